/** @file
 * ringkernel/dev_k2k.h - kernel-to-kernel (K2K) lanes between persistent
 * kernels on one GPU.
 *
 * A K2K lane is a ring_proto.h ring (the same rk_ring_ctrl layout and
 * slot array) that lives in DEVICE memory (cuMemAlloc) and is shared by
 * two blocks of co-resident kernels: the sending block is its single
 * producer, the receiving block its single consumer. Nothing crosses
 * PCIe, so its index words use GPU scope (PTX ld.acquire.gpu /
 * st.release.gpu) where a host lane uses system scope; on the host build
 * both are the same C11 acquire/release, so the protocol runs under TSan
 * on CPU threads. The host never reads a K2K lane while a kernel that
 * uses it may run (device memory is not host memory).
 *
 * A lane between kernels on two GPUs (peer access: it lives in the
 * target's memory and the sender writes it over the link) has
 * RK_RING_F_SYS in its control block. GPU scope covers the threads of one
 * device only, so both sides then order the index words at system scope
 * (ld.acquire.sys / st.release.sys); each side reads the flag once, at
 * attach, into its rk_ring_side (docs/cuda-devices.md).
 *
 * Closing. The consumer owns head. When the receiving block exits it
 * stores head | RK_K2K_CLOSED (release), so a sender that finds no room
 * learns that none will come and refuses the message (RK_ECLOSED,
 * counted in its errors) instead of waiting forever. A receiving block
 * that starts again (a relaunch on the same lanes) clears the bit at
 * attach. Messages a sender published before it saw the bit stay in the
 * lane; the host counts them (rk_k2k_left) once both kernels returned.
 *
 * Ownership: as ring_proto.h; every pointer is the caller's.
 */
#ifndef RINGKERNEL_DEV_K2K_H
#define RINGKERNEL_DEV_K2K_H

#include "ringkernel/ring_proto.h"

/** The bit of head that says the consumer is gone. Positions never reach
 * it (2^63 messages). */
#define RK_K2K_CLOSED (1ull << 63)

/** Acquire load of a lane's index word at the lane's scope (s->sys). */
RK_PROTO_FN rk_proto_u64
rk_k2k__acquire(const RK_PROTO_A64 *p, const rk_ring_side *s)
{
    return s->sys ? rk_atomic_load_acquire_sys_u64(p)
                  : rk_atomic_load_acquire_gpu_u64(p);
}

/** Release store of a lane's index word at the lane's scope (s->sys). */
RK_PROTO_FN void
rk_k2k__release(RK_PROTO_A64 *p, const rk_ring_side *s, rk_proto_u64 v)
{
    if (s->sys)
        rk_atomic_store_release_sys_u64(p, v);
    else
        rk_atomic_store_release_gpu_u64(p, v);
}

/** The consumer's attach: head may carry RK_K2K_CLOSED from an earlier
 * consumer, which this one clears (it owns head). */
RK_PROTO_FN void
rk_k2k_cons_attach(rk_ring_ctrl *c, rk_ring_side *s, unsigned char *base)
{
    rk_proto_u64 head = rk_atomic_load_relaxed_u64(&c->head) & ~RK_K2K_CLOSED;
    s->pos = head;
    s->sys = (c->flags & RK_RING_F_SYS) != 0;
    s->pad = 0;
    /* Acquire pairs with the producer's release of tail
     * (rk_k2k_prod_publish): the slots below it are written. */
    s->peer = rk_k2k__acquire(&c->tail, s);
    s->base = base;
    s->mask = c->capacity - 1;
    s->slot_size = c->slot_size;
    /* Release pairs with the producer's acquire of head in
     * rk_k2k_prod_space: the lane is open again. */
    rk_k2k__release(&c->head, s, head);
}

/** The producer's attach (the sending block, before its first send). */
RK_PROTO_FN void
rk_k2k_prod_attach(
    const rk_ring_ctrl *c, rk_ring_side *s, unsigned char *base)
{
    s->pos = rk_atomic_load_relaxed_u64(&c->tail); /* only we write it */
    s->sys = (c->flags & RK_RING_F_SYS) != 0;
    s->pad = 0;
    /* Acquire pairs with the consumer's release of head: its reads of the
     * slots below head are done. */
    s->peer = rk_k2k__acquire(&c->head, s) & ~RK_K2K_CLOSED;
    s->base = base;
    s->mask = c->capacity - 1;
    s->slot_size = c->slot_size;
}

/** Free slots, up to want. The consumer's head is re-read only when the
 * cached copy says there is not enough room; *closed is set when that
 * read finds the consumer gone (then no room will come). */
RK_PROTO_FN rk_proto_u32
rk_k2k_prod_space(
    const rk_ring_ctrl *c, rk_ring_side *s, rk_proto_u32 want, int *closed)
{
    rk_proto_u64 pos = s->pos, cap = (rk_proto_u64)s->mask + 1;
    rk_proto_u64 free_slots = cap - (pos - s->peer);
    *closed = 0;
    if (free_slots < want) {
        /* Acquire pairs with rk_k2k_cons_release / rk_k2k_close: the
         * consumer's reads of the freed slots happen before we reuse
         * them. */
        rk_proto_u64 head = rk_k2k__acquire(&c->head, s);
        *closed = (head & RK_K2K_CLOSED) != 0;
        s->peer = head & ~RK_K2K_CLOSED;
        free_slots = cap - (pos - s->peer);
    }
    return free_slots < want ? (rk_proto_u32)free_slots : want;
}

/** Advances this side's index by n and publishes it (its own word: tail
 * for the producer, head for the consumer) with a release at the lane's
 * scope (GPU, or system between two GPUs), which
 * pairs with the other side's acquire of that word: the producer's slot
 * writes, or the consumer's slot reads, come first. */
RK_PROTO_FN void
rk_k2k__advance(RK_PROTO_A64 *own, rk_ring_side *s, rk_proto_u32 n)
{
    s->pos += n;
    rk_k2k__release(own, s, s->pos);
}

/** Publishes n written slots to the consumer (rk_k2k_cons_avail). */
RK_PROTO_FN void
rk_k2k_prod_publish(rk_ring_ctrl *c, rk_ring_side *s, rk_proto_u32 n)
{
    rk_k2k__advance(&c->tail, s, n);
}

/** Messages queued, up to want; tail is re-read only when the cached copy
 * says there are not enough. */
RK_PROTO_FN rk_proto_u32
rk_k2k_cons_avail(const rk_ring_ctrl *c, rk_ring_side *s, rk_proto_u32 want)
{
    rk_proto_u64 pos = s->pos, avail = s->peer - pos;
    if (avail < want) {
        /* Acquire pairs with rk_k2k_prod_publish's release of tail. */
        rk_proto_u64 tail = rk_k2k__acquire(&c->tail, s);
        s->peer = tail;
        avail = tail - pos;
    }
    return avail < want ? (rk_proto_u32)avail : want;
}

/** Hands n read slots back to the producer (rk_k2k_prod_space). */
RK_PROTO_FN void
rk_k2k_cons_release(rk_ring_ctrl *c, rk_ring_side *s, rk_proto_u32 n)
{
    rk_k2k__advance(&c->head, s, n);
}

/** The consumer leaves: head keeps its position and gains RK_K2K_CLOSED.
 * What is still queued stays for the host to count. */
RK_PROTO_FN void
rk_k2k_close(rk_ring_ctrl *c, const rk_ring_side *s)
{
    /* Release pairs with the producer's acquire of head: everything the
     * consumer read is read before the producer learns it left. */
    rk_k2k__release(&c->head, s, s->pos | RK_K2K_CLOSED);
}

/** Messages left in a lane whose kernels both returned, from a copy of its
 * control block's head and tail. */
RK_PROTO_FN rk_proto_u64
rk_k2k_left(rk_proto_u64 head, rk_proto_u64 tail)
{
    rk_proto_u64 h = head & ~RK_K2K_CLOSED;
    return tail > h ? tail - h : 0;
}

#endif /* RINGKERNEL_DEV_K2K_H */
