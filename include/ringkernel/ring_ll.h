/** @file
 * ringkernel/ring_ll.h - lanes whose slots carry their own sequence number
 * (the "LL" format, after NCCL's low-latency protocol), so a GPU finds
 * and validates the next message with one read of mapped memory.
 *
 * An LL lane is a ring_proto.h ring (the same rk_ring_ctrl and
 * rk_ring_side, the same free-running positions, the same head and tail
 * words) whose slot array holds every slot twice as wide: each 8-byte
 * word carries 4 bytes of the message and a 4-byte flag,
 *
 *     word = data | (u64)flag << 32,   flag = rk_ring_ll_flag(pos),
 *
 * written with one aligned 8-byte store and read with one aligned 8-byte
 * (or 16-byte vector) load. A word whose flag is the flag of the position
 * the reader expects carries that message's data: the flag travels in
 * the same single-copy-atomic access as the data, so no fence separates
 * them and no tail says where the producer is. A word left from the slot's
 * previous lap (pos - capacity) carries another flag, and so does a word
 * not written yet. The consumer accepts a slot once every word it needs
 * carries the flag; a slot being written fails the check and is read
 * again.
 *
 *   - The producer still stores the tail (release) after each message:
 *     the host uses it for its own accounting (pending, leftovers, the
 *     watchdog); a device consumer never reads it.
 *   - The consumer still stores the head after a batch: the producer
 *     reads it (acquire) only when its cached copy says full. The device
 *     stores it relaxed (the argument is in docs/cuda-data-path.md, "One
 *     read per message"); the host build uses release.
 *   - The producer writes at least the first rk_ring_ll_window() bytes of
 *     a slot (zero-padded), so a consumer polls that window: one sweep of
 *     16-byte loads finds, validates and reads a message of up to
 *     RK_RING_LL_WINDOW bytes, header included; a longer one needs a
 *     second sweep for the rest.
 *   - Command word: while a slot is free, the host may store the current
 *     command into its word 0 with rk_ring_ll_cmd_flag(pos), so a block
 *     polling that slot reads the command in the same load (a message
 *     written there later replaces it).
 *
 * Flags: rk_ring_ll_flag(pos) is odd and never 0; the command flag is
 * even. Positions a lap apart (capacity <= 2^20) never share a flag;
 * flags repeat only after 2^31 positions, by when the slot was rewritten
 * many times.
 *
 * Compiles as host C11, host C++, NVRTC and nvcc like ring_proto.h; the
 * byte packing is written out (no memcpy under NVRTC). Little-endian
 * words on both sides (x86-64, Arm64 and every NVIDIA GPU).
 */
#ifndef RINGKERNEL_RING_LL_H
#define RINGKERNEL_RING_LL_H

#include "ringkernel/ring_proto.h"

/** Data bytes of a slot a consumer polls in one sweep (header included). */
#define RK_RING_LL_WINDOW 256u

/** The flag of the message at position pos (odd, never 0). */
RK_PROTO_FN rk_proto_u32
rk_ring_ll_flag(rk_proto_u64 pos)
{
    return ((rk_proto_u32)(pos + 1) << 1) | 1u;
}

/** The flag of a command word in the free slot at position pos (even). */
RK_PROTO_FN rk_proto_u32
rk_ring_ll_cmd_flag(rk_proto_u64 pos)
{
    return (rk_proto_u32)(pos + 1) << 1;
}

/** Bytes of an LL lane's slot array. */
RK_PROTO_FN rk_proto_u64
rk_ring_ll_bytes(rk_proto_u32 capacity, rk_proto_u32 slot_size)
{
    return 2u * (rk_proto_u64)capacity * slot_size;
}

/** The words of the slot at position pos (slot_size / 4 of them). */
RK_PROTO_FN RK_PROTO_A64 *
rk_ring_ll_slot(const rk_ring_side *s, rk_proto_u64 pos)
{
    return (RK_PROTO_A64 *)(void *)(s->base
        + (pos & s->mask) * 2u * (rk_proto_u64)s->slot_size);
}

/** Data bytes the producer always writes and a poll reads. */
RK_PROTO_FN rk_proto_u32
rk_ring_ll_window(const rk_ring_side *s)
{
    return s->slot_size < RK_RING_LL_WINDOW ? s->slot_size : RK_RING_LL_WINDOW;
}

/** One LL word: data and flag. */
RK_PROTO_FN rk_proto_u64
rk_ring_ll_word(rk_proto_u32 data, rk_proto_u32 flag)
{
    return (rk_proto_u64)data | (rk_proto_u64)flag << 32;
}

/* ---------------------------------------------------------- producer */

/* LL words: relaxed on the device, where each word validates itself
 * (docs/cuda-data-path.md, "One read per message"); host builds (the
 * host's side of the lanes, and the host build of the device loop) store
 * with release and load with acquire, plain moves on x86, so that the C11
 * model and TSan also see what a message hands over, as the device's
 * rk_dev_release_writes / rk_dev_acquire_writes fences provide there. */
#if defined(__CUDA_ARCH__)
/** Stores LL word v at p (device: relaxed). */
#define RK_RING_LL_STORE(p, v) rk_atomic_store_relaxed_u64(p, v)
/** Loads the LL word at p (device: relaxed). */
#define RK_RING_LL_LOAD(p) rk_atomic_load_relaxed_u64(p)
#else
/** Stores LL word v at p (host builds: release). */
#define RK_RING_LL_STORE(p, v) rk_atomic_store_release_sys_u64(p, v)
/** Loads the LL word at p (host builds: acquire). */
#define RK_RING_LL_LOAD(p) rk_atomic_load_acquire_sys_u64(p)
#endif

/**
 * Writes n bytes of src at data offset off (a multiple of 4) of the slot
 * at pos; the last word's missing bytes are zero. Relaxed 8-byte stores:
 * each word validates itself. The caller checked the room
 * (rk_ring_prod_space) and publishes the tail after the last put.
 */
RK_PROTO_FN void
rk_ring_ll_put(const rk_ring_side *s, rk_proto_u64 pos, rk_proto_u32 off,
    const void *src, rk_proto_u32 n)
{
    RK_PROTO_A64 *w = rk_ring_ll_slot(s, pos) + off / 4;
    const unsigned char *b = (const unsigned char *)src;
    rk_proto_u32 flag = rk_ring_ll_flag(pos), i;
    for (i = 0; i < n; i += 4) {
        rk_proto_u32 d = 0;
        for (rk_proto_u32 k = 0; k < 4 && i + k < n; k++)
            d |= (rk_proto_u32)b[i + k] << (8 * k);
        RK_RING_LL_STORE(w + i / 4, rk_ring_ll_word(d, flag));
    }
}

/** Writes zero words with pos's flag over data bytes [from, to) (multiples
 * of 4): the rest of the poll window after a short message. */
RK_PROTO_FN void
rk_ring_ll_pad(const rk_ring_side *s, rk_proto_u64 pos, rk_proto_u32 from,
    rk_proto_u32 to)
{
    RK_PROTO_A64 *w = rk_ring_ll_slot(s, pos);
    rk_proto_u64 v = rk_ring_ll_word(0, rk_ring_ll_flag(pos));
    for (rk_proto_u32 i = from / 4; i < to / 4; i++)
        RK_RING_LL_STORE(w + i, v);
}

/** Stores command cmd into word 0 of the free slot at pos (the caller
 * knows the slot is free: pos - head < capacity). */
RK_PROTO_FN void
rk_ring_ll_cmd_put(const rk_ring_side *s, rk_proto_u64 pos, rk_proto_u32 cmd)
{
    RK_RING_LL_STORE(rk_ring_ll_slot(s, pos),
        rk_ring_ll_word(cmd, rk_ring_ll_cmd_flag(pos)));
}

/* ---------------------------------------------------------- consumer */

/**
 * Copies n data bytes from offset off (a multiple of 4) of the slot at pos
 * into dst when every word covering them carries pos's flag, and returns
 * 1; returns 0 (dst partly written) when some word does not yet.
 */
RK_PROTO_FN int
rk_ring_ll_get(const rk_ring_side *s, rk_proto_u64 pos, rk_proto_u32 off,
    void *dst, rk_proto_u32 n)
{
    const RK_PROTO_A64 *w = rk_ring_ll_slot(s, pos) + off / 4;
    unsigned char *b = (unsigned char *)dst;
    rk_proto_u32 flag = rk_ring_ll_flag(pos), i;
    for (i = 0; i < n; i += 4) {
        rk_proto_u64 v = RK_RING_LL_LOAD(w + i / 4);
        if ((rk_proto_u32)(v >> 32) != flag)
            return 0;
        for (rk_proto_u32 k = 0; k < 4 && i + k < n; k++)
            b[i + k] = (unsigned char)(v >> (8 * k));
    }
    return 1;
}

/** Word 0 of the slot at pos (relaxed): a message's first word, a command
 * word, or a stale word. */
RK_PROTO_FN rk_proto_u64
rk_ring_ll_word0(const rk_ring_side *s, rk_proto_u64 pos)
{
    return RK_RING_LL_LOAD(rk_ring_ll_slot(s, pos));
}

/**
 * Hands every position below head back to the producer. On the device a
 * relaxed store: the value is computed from the flags the consumer read,
 * so the store cannot be seen before those reads are satisfied (the PTX
 * model's no-thin-air rule; docs/cuda-data-path.md, "One read per
 * message"), and a
 * write the producer makes after seeing it cannot be what those reads
 * returned. Host builds: a release store (free on x86), which pairs with
 * the producer's acquire in rk_ring_prod_space and lets the C11 model and
 * TSan check the same protocol.
 */
RK_PROTO_FN void
rk_ring_ll_release_head(rk_ring_ctrl *c, rk_proto_u64 head)
{
#if defined(__CUDA_ARCH__)
    rk_atomic_store_relaxed_u64(&c->head, head);
#else
    rk_ring_release_head(c, head);
#endif
}

#endif /* RINGKERNEL_RING_LL_H */
