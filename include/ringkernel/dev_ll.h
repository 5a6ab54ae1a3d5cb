/** @file
 * ringkernel/dev_ll.h - the device side of LL lanes (ring_ll.h): the
 * block-collective sweep that takes a batch from an input lane with one
 * read of mapped memory, and the writer that puts a staged batch into an
 * output lane with no fence; the counted accessors of ring lanes (K2K);
 * and the two fences a handler pays when its reply announces writes made
 * elsewhere. dev_kernel.h's loop calls them; they touch only the lane,
 * the block's stage and the sweep's shared results.
 *
 * The sweep: every thread of the block loads 16-byte lines (two flagged
 * words, ld.relaxed.sys.v2.u64) of the poll window of up to `want` slots
 * from the head, all issued together, so the whole batch costs one PCIe
 * round trip; each line's data goes to the stage and its flags are
 * checked against the slot's sequence. The batch is the slots from the
 * head whose every line checked out. The head slot's first word may hold
 * the host's command instead (the command flag): it is returned with the
 * poll, so an idle block reads nothing else.
 *
 * Compiles as NVRTC, nvcc, host C11 and host C++ (rk_dev.h); on the host
 * a block is one thread and the same code runs whole.
 */
#ifndef RINGKERNEL_DEV_LL_H
#define RINGKERNEL_DEV_LL_H

#include "ringkernel/ring_ll.h"
#include "ringkernel/rk_dev.h"

#define RK_DEV_LL_MAX_BATCH 64 /**< slots one sweep takes, at most */
/** 16-byte loads a thread issues together in a sweep: a sweep of up to
 * this many lines per thread costs one PCIe round trip. */
#define RK_DEV_LL_LOADS 4
/** No command came with the poll. */
#define RK_DEV_CMD_NONE 0xffffffffu
/** Offset of payload_len in the 64-byte envelope (rk_msg_header). */
#define RK_DEV_LL_LEN_OFFSET 12u

/** A sweep's block-shared results (in the block's shared context). */
typedef struct rk_dev_ll_sweep {
    /** 1 where a slot of the sweep is not whole yet; afterwards bad[0]
     * says "sweep the long messages' rest again". */
    unsigned char bad[RK_DEV_LL_MAX_BATCH];
    rk_dev_u32 n;  /**< broadcast: whole slots from the head */
    rk_dev_u32 ib; /**< the head slot's command word, or RK_DEV_CMD_NONE */
} rk_dev_ll_sweep;

/** Sets a block-shared flag that several threads may set at once, all to
 * 1 (a volatile store: morally strong, so no data race). */
RK_DEV_FN void
rk_dev_ll_mark(unsigned char *p)
{
    *(volatile unsigned char *)p = 1;
}

/** Bytes of the message in a staged slot (64-byte header + payload,
 * clipped to the slot), from its header. */
RK_DEV_FN rk_dev_u32
rk_dev_ll_used(const unsigned char *slot, rk_dev_u32 slot_size)
{
    rk_dev_u32 len
        = *(const rk_dev_u32 *)(const void *)(slot + RK_DEV_LL_LEN_OFFSET);
    rk_dev_u32 room = slot_size - 64u;
    return 64u + (len > room ? room : len);
}

/** Data and flag check of line k of the slot at pos + i, loaded as a and
 * b: the data goes to the stage (slots slot_size apart). Returns 1 when
 * both words carry the slot's flag; on the head slot's first line a
 * command word sets *ib. One thread. */
RK_DEV_FN int
rk_dev_ll_accept(const rk_ring_side *s, rk_dev_u64 pos, rk_dev_u32 i,
    rk_dev_u32 k, rk_dev_u64 a, rk_dev_u64 b, unsigned char *stage,
    rk_dev_u32 *ib)
{
    rk_dev_u32 f = rk_ring_ll_flag(pos + i);
    rk_dev_u32 *d
        = (rk_dev_u32 *)(void *)(stage + (rk_dev_size)i * s->slot_size)
        + 2 * k;
    d[0] = (rk_dev_u32)a;
    d[1] = (rk_dev_u32)b;
    if ((rk_dev_u32)(a >> 32) == f && (rk_dev_u32)(b >> 32) == f)
        return 1;
    if (i == 0 && k == 0 && (rk_dev_u32)(a >> 32) == rk_ring_ll_cmd_flag(pos))
        *ib = (rk_dev_u32)a;
    return 0;
}

/**
 * Reads `count` lines into the stage, every thread RK_DEV_LL_LOADS of them
 * at a time, all loads issued before any result is used, so the lines
 * cost one PCIe round trip when count <= RK_DEV_LL_LOADS x the block's
 * threads. Line j is line j % per of slot j / per (per != 0: the poll
 * windows of consecutive slots), or line k0 + j of slot i0 (per == 0: a
 * long message's rest). A line that fails its check marks bad[its slot]
 * (per != 0) or bad[0]. Data-parallel; no sync.
 */
RK_DEV_FN void
rk_dev_ll_lines(const rk_ring_side *s, rk_dev_u64 pos, rk_dev_u32 count,
    rk_dev_u32 per, rk_dev_u32 i0, rk_dev_u32 k0, unsigned char *stage,
    rk_dev_ll_sweep *w)
{
    rk_dev_u32 bd = rk_dev_block_dim();
    for (rk_dev_u32 j = rk_dev_thread_idx(); j < count;
         j += RK_DEV_LL_LOADS * bd) {
        rk_dev_u64 a[RK_DEV_LL_LOADS], b[RK_DEV_LL_LOADS];
        rk_dev_u32 u;
        for (u = 0; u < RK_DEV_LL_LOADS && j + u * bd < count; u++) {
            rk_dev_u32 l = j + u * bd;
            rk_dev_u32 i = per ? l / per : i0, k = per ? l % per : k0 + l;
            rk_atomic_load_pair_relaxed_sys_u64(
                rk_ring_ll_slot(s, pos + i) + 2 * k, &a[u], &b[u]);
        }
        for (u = 0; u < RK_DEV_LL_LOADS && j + u * bd < count; u++) {
            rk_dev_u32 l = j + u * bd;
            rk_dev_u32 i = per ? l / per : i0, k = per ? l % per : k0 + l;
            if (!rk_dev_ll_accept(s, pos, i, k, a[u], b[u], stage, &w->ib))
                rk_dev_ll_mark(&w->bad[per ? i : 0]);
        }
    }
}

/**
 * Takes up to `want` (<= RK_DEV_LL_MAX_BATCH) messages from the head of LL
 * lane s into the stage: one sweep over their poll windows (one PCIe
 * read) finds, validates and reads them; nothing reads the tail. On the
 * device a sweep covers at most RK_DEV_LL_LOADS lines per thread (a
 * larger batch is taken by the next sweeps, one read each). A message
 * longer than the window is completed by a further sweep, repeated until
 * all its words have arrived. Returns how many slots from the head hold
 * whole messages (every thread); w->ib is the command that came with the
 * poll. The slots stay in the lane (the caller hands them back).
 * Collective.
 */
RK_DEV_FN rk_dev_u32
rk_dev_ll_take(const rk_ring_side *s, unsigned char *stage, rk_dev_u32 want,
    rk_dev_ll_sweep *w)
{
    rk_dev_u64 pos = s->pos;
    rk_dev_u32 lines = rk_ring_ll_window(s) / 8, sz = s->slot_size, n, i;
    rk_dev_u32 t = rk_dev_thread_idx(), bd = rk_dev_block_dim();
    if (want > s->mask + 1)
        want = s->mask + 1;
    if (want > RK_DEV_LL_MAX_BATCH)
        want = RK_DEV_LL_MAX_BATCH;
#if defined(RK_DEV_ON_DEVICE)
    if (want * lines > RK_DEV_LL_LOADS * bd)
        want = RK_DEV_LL_LOADS * bd / lines > 0 ? RK_DEV_LL_LOADS * bd / lines
                                                : 1;
#endif
    for (i = t; i < want; i += bd)
        w->bad[i] = 0;
    if (t == 0) {
        w->ib = RK_DEV_CMD_NONE;
        rk_dev_pcie_read(); /* the sweep */
    }
    rk_dev_sync_block();
    rk_dev_ll_lines(s, pos, want * lines, lines, 0, 0, stage, w);
    rk_dev_sync_block();
    if (t == 0) {
        rk_dev_u32 k = 0, more = 0;
        while (k < want && !w->bad[k])
            k++;
        for (i = 0; i < k; i++)
            if (rk_dev_ll_used(stage + (rk_dev_size)i * sz, sz) > lines * 8)
                more = 1;
        w->n = k;
        w->bad[0] = (unsigned char)more; /* from here: "sweep again" */
    }
    rk_dev_sync_block();
    n = w->n;
    for (;;) {
        rk_dev_u32 again = w->bad[0];
        rk_dev_sync_block(); /* all have read it before it is reset */
        if (!again)
            break;
        if (t == 0) {
            w->bad[0] = 0;
            rk_dev_pcie_read(); /* the long messages' rest */
        }
        rk_dev_sync_block();
        for (i = 0; i < n; i++) {
            rk_dev_u32 end
                = (rk_dev_ll_used(stage + (rk_dev_size)i * sz, sz) + 7) / 8;
            if (end > lines)
                rk_dev_ll_lines(s, pos, end - lines, 0, i, lines, stage, w);
        }
        rk_dev_sync_block();
    }
    return n;
}

/** 1 when the head slot of LL lane s holds a message, whole or being
 * written (its first word carries the slot's flag). One read; thread 0. */
RK_DEV_FN int
rk_dev_ll_any(const rk_ring_side *s)
{
    rk_dev_pcie_read();
    return (rk_dev_u32)(rk_ring_ll_word0(s, s->pos) >> 32)
        == rk_ring_ll_flag(s->pos);
}

/**
 * Writes n staged messages (slots slot_size apart in stage) into LL lane
 * s from its producer position s->pos (the caller checked the room and
 * advances s->pos after): every thread stores 16-byte lines of two
 * flagged words (st.relaxed.sys.v2.u64) of the used part of a slot. No
 * fence and no tail: the host accepts a slot once all its words carry
 * the flag. Data-parallel over the block; no sync.
 */
RK_DEV_FN void
rk_dev_ll_put(const rk_ring_side *s, const unsigned char *stage, rk_dev_u32 n)
{
    for (rk_dev_u32 i = 0; i < n; i++) {
        const unsigned char *src = stage + (rk_dev_size)i * s->slot_size;
        const rk_dev_u32 *d = (const rk_dev_u32 *)(const void *)src;
        rk_dev_u32 lines = (rk_dev_ll_used(src, s->slot_size) + 7) / 8;
        rk_dev_u32 f = rk_ring_ll_flag(s->pos + i);
        RK_DEV_A64 *w = rk_ring_ll_slot(s, s->pos + i);
        for (rk_dev_u32 k = rk_dev_thread_idx(); k < lines;
             k += rk_dev_block_dim())
            rk_atomic_store_pair_relaxed_sys_u64(w + 2 * k,
                rk_ring_ll_word(d[2 * k], f),
                rk_ring_ll_word(d[2 * k + 1], f));
    }
}

/* ---------------------------------------------------------- ring lanes */

/** Copies n slots between a ring (from position pos, wrapping) and a
 * contiguous stage. Data-parallel over the block; no sync. */
RK_DEV_FN void
rk_dev_ring_copy(const rk_ring_side *s, rk_dev_u64 pos, rk_dev_u32 n,
    unsigned char *stage, int to_ring)
{
    rk_dev_u32 first = (rk_dev_u32)(pos & s->mask), sz = s->slot_size;
    rk_dev_u32 k = n < s->mask + 1 - first ? n : s->mask + 1 - first;
    unsigned char *ring = s->base + (rk_dev_size)first * sz;
    if (to_ring) {
        rk_dev_copy_words(ring, stage, k * sz);
        rk_dev_copy_words(s->base, stage + (rk_dev_size)k * sz, (n - k) * sz);
    } else {
        rk_dev_copy_words(stage, ring, k * sz);
        rk_dev_copy_words(stage + (rk_dev_size)k * sz, s->base, (n - k) * sz);
    }
}

/** rk_ring_cons_avail on a lane in mapped memory, counting the tail read
 * it makes when its cached tail is short. */
RK_DEV_FN rk_dev_u32
rk_dev__sys_avail(rk_ring_ctrl *c, rk_ring_side *s, rk_dev_u32 want)
{
    if (s->peer - s->pos < want)
        rk_dev_pcie_read();
    return rk_ring_cons_avail(c, s, want);
}

/** rk_ring_prod_space on a lane in mapped memory, counting the head read
 * it makes when its cached head says there is not enough room. */
RK_DEV_FN rk_dev_u32
rk_dev__space(rk_ring_ctrl *c, rk_ring_side *s, rk_dev_u32 want)
{
    if ((rk_dev_u64)s->mask + 1 - (s->pos - s->peer) < want)
        rk_dev_pcie_read();
    return rk_ring_prod_space(c, s, want);
}

/* ---------------------------------------------------------- ordering */

/**
 * A reply on an LL lane carries its own payload and nothing else: it is
 * published with no fence, so writes a handler made elsewhere (device
 * memory another block reads, host memory) are not ordered before it. A
 * handler whose reply announces such writes calls this first, on every
 * thread (a system-scope fence per thread: the release half of the
 * hand-over; the host, then the next block, see the writes once they see
 * the reply). Not needed for what the reply itself carries.
 */
RK_DEV_FN void
rk_dev_release_writes(void)
{
    rk_dev_fence_sys();
}

/**
 * The acquire half: a handler that reads memory written by others before
 * the message that announced them (another block's rk_dev_release_writes
 * before its reply, then the host's request) calls this, on every thread,
 * after taking the message and before those reads. The message arrived
 * through relaxed loads (ring_ll.h); this fence orders the reads after
 * them (and drops what the SM's L1 cached from before).
 */
RK_DEV_FN void
rk_dev_acquire_writes(void)
{
    rk_dev_fence_sys();
}

#endif /* RINGKERNEL_DEV_LL_H */
