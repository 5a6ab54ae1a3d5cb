/** @file
 * ringkernel/ring_proto.h - the single-producer/single-consumer ring
 * protocol shared by the host and the GPU.
 *
 * This one header is the whole contract between a CPU thread and a
 * persistent CUDA kernel that exchange messages through mapped pinned host
 * memory. It compiles three ways:
 *
 *   - as host C11 (the library, the tests): indices are _Atomic and use
 *     <stdatomic.h> acquire/release;
 *   - as CUDA device code (__CUDA_ARCH__, which NVRTC and nvcc's device pass
 *     define): system-scope ld.acquire.sys / st.release.sys in inline PTX on
 *     sm_70 and newer, volatile plus __threadfence_system() before that. No
 *     CUDA header is needed, so NVRTC compiles it with no include path but
 *     ours;
 *   - as host C++ (nvcc's host pass, C++ users): GCC/Clang __atomic builtins
 *     on the same plain 64-bit words.
 *
 * The two sides never use an atomic read-modify-write on shared memory, only
 * acquire loads and release stores, because CPU<->GPU RMW over PCIe is not
 * atomic (see docs/queues.md, "Host and GPU").
 *
 * Ownership: the caller owns every object here. rk_ring_ctrl and the slot
 * array are shared memory (for a GPU, mapped pinned host memory); each side
 * keeps its rk_ring_side privately (host memory, registers or device
 * memory) and is the only one to touch it.
 *
 * Protocol (positions are free-running 64-bit counters, never reduced):
 *   producer: wait until tail - head < capacity (head read with acquire),
 *             write slot[tail & mask], store tail + 1 with release;
 *   consumer: wait until head < tail (tail read with acquire), read
 *             slot[head & mask], store head + 1 with release.
 * Each side caches the other side's index and re-reads it only when the
 * cached value says full (producer) or empty (consumer).
 */
#ifndef RINGKERNEL_RING_PROTO_H
#define RINGKERNEL_RING_PROTO_H

/* ---------------------------------------------------------- environment */
/* Types, qualifiers and every atomic operation come from rk_atomic.h, the
 * one atomics layer the ring shares with the control block and the device
 * shim; the names below are the ring's spelling of them. */
#include "ringkernel/rk_atomic.h"

typedef rk_atomic_u64 rk_proto_u64; /**< 64-bit word of the protocol */
typedef rk_atomic_u32 rk_proto_u32; /**< 32-bit word of the protocol */
/** how protocol functions are declared (static inline; __host__ __device__
 * under CUDA) */
#define RK_PROTO_FN      RK_ATOMIC_FN
#define RK_PROTO_ALIGN64 RK_ATOMIC_ALIGN64 /**< starts a 64-byte line */
/** a 64-bit index word shared by both sides (_Atomic in host C) */
#define RK_PROTO_A64 RK_ATOMIC_U64

#define RK_RING_LINE  64          /**< cache line size the layout assumes */
#define RK_RING_MAGIC 0x524b5231u /**< "RKR1" */
/** rk_ring_ctrl.flags: the ring is a K2K lane between kernels on two GPUs
 * (peer access), so its index words are ordered at system scope
 * (ringkernel/dev_k2k.h). Host rings ignore it. */
#define RK_RING_F_SYS 0x1u

/* ---------------------------------------------------------- layout */

/**
 * The control block: 192 bytes, three 64-byte lines. The same layout under
 * every compiler (checked by static assertions in src/queue/spsc.c and by
 * the NVRTC test). _Atomic uint64_t has the size and alignment of uint64_t
 * on every ABI we build for.
 */
typedef struct rk_ring_ctrl {
    /** Line 0: written only by the producer. */
    RK_PROTO_ALIGN64 RK_PROTO_A64 tail; /**< positions published so far */
    unsigned char
        pad0[RK_RING_LINE - 8]; /**< padding to the end of the 64-byte line */
    /** Line 1: written only by the consumer. */
    RK_PROTO_ALIGN64 RK_PROTO_A64 head; /**< positions consumed so far */
    unsigned char
        pad1[RK_RING_LINE - 8]; /**< padding to the end of the 64-byte line */
    /** Line 2: written once by rk_ring_init, read-only afterwards. */
    RK_PROTO_ALIGN64 rk_proto_u32 magic; /**< RK_RING_MAGIC */
    rk_proto_u32 capacity;               /**< slots, a power of two */
    rk_proto_u32 slot_size;              /**< bytes per slot */
    rk_proto_u32 flags;                  /**< RK_RING_F_SYS, else 0 */
    unsigned char
        pad2[RK_RING_LINE - 16]; /**< padding to the end of the 64-byte line */
} rk_ring_ctrl;

/**
 * One side's private state. Lives wherever that side runs; the hot path
 * touches only this and the other side's index word, never line 2 of the
 * control block (a PCIe read for a GPU).
 */
typedef struct rk_ring_side {
    rk_proto_u64 pos;    /**< own index: tail (producer) or head (consumer) */
    rk_proto_u64 peer;   /**< cached copy of the other side's index */
    unsigned char *base; /**< the slot array */
    rk_proto_u32 mask;   /**< capacity - 1 */
    rk_proto_u32
        slot_size;    /**< bytes per slot (copied from the control block) */
    rk_proto_u32 sys; /**< K2K only: 1 for system scope (RK_RING_F_SYS) */
    rk_proto_u32 pad; /**< 0 */
} rk_ring_side;

/* ---------------------------------------------------------- primitives */
/*
 * The ring's index words are 64-bit and shared at system scope (a GPU side
 * reaches them over PCIe). rk_ring_load_relaxed: the index's owner, or
 * statistics. rk_ring_store_relaxed_u64: a word only this side writes
 * (counters). rk_ring_load_acquire: everything the other side wrote before
 * its release store of this index is visible after the load.
 * rk_ring_store_release: everything this side wrote before (slot contents,
 * or its reads of a slot) is ordered before the new index value.
 */
/** relaxed load of an index (its owner, statistics) */
#define rk_ring_load_relaxed rk_atomic_load_relaxed_u64
/** relaxed store (a word only this side writes) */
#define rk_ring_store_relaxed_u64 rk_atomic_store_relaxed_u64
/** acquire load of the other side's index */
#define rk_ring_load_acquire rk_atomic_load_acquire_sys_u64
/** release store of this side's index */
#define rk_ring_store_release rk_atomic_store_release_sys_u64

/* ---------------------------------------------------------- setup */

/** Initialises the control block (host side, before either side starts).
 * capacity must be a power of two and slot_size non-zero; the caller
 * validates (rk_spsc_init does). */
RK_PROTO_FN void
rk_ring_init(rk_ring_ctrl *c, rk_proto_u32 capacity, rk_proto_u32 slot_size)
{
    rk_atomic_init_u64(&c->tail, 0);
    rk_atomic_init_u64(&c->head, 0);
    c->magic = RK_RING_MAGIC;
    c->capacity = capacity;
    c->slot_size = slot_size;
    c->flags = 0;
}

/** Prepares the producer's private state. Called by the producer before its
 * first operation; reads line 2 once. */
RK_PROTO_FN void
rk_ring_prod_attach(
    const rk_ring_ctrl *c, rk_ring_side *s, unsigned char *base)
{
    s->pos = rk_ring_load_relaxed(&c->tail);  /* only the producer writes */
    s->peer = rk_ring_load_acquire(&c->head); /* pairs with cons_release */
    s->base = base;
    s->mask = c->capacity - 1;
    s->slot_size = c->slot_size;
}

/** Prepares the consumer's private state. */
RK_PROTO_FN void
rk_ring_cons_attach(
    const rk_ring_ctrl *c, rk_ring_side *s, unsigned char *base)
{
    s->pos = rk_ring_load_relaxed(&c->head);  /* only the consumer writes */
    s->peer = rk_ring_load_acquire(&c->tail); /* pairs with prod_publish */
    s->base = base;
    s->mask = c->capacity - 1;
    s->slot_size = c->slot_size;
}

/** Address of the slot for position pos. */
RK_PROTO_FN unsigned char *
rk_ring_slot(const rk_ring_side *s, rk_proto_u64 pos)
{
    return s->base + (pos & s->mask) * (rk_proto_u64)s->slot_size;
}

/* ---------------------------------------------------------- producer */

/**
 * How many of the next `want` slots the producer may write: min(want, free
 * slots). Re-reads the consumer's head only when the cached copy says
 * there is not enough room.
 */
RK_PROTO_FN rk_proto_u32
rk_ring_prod_space(const rk_ring_ctrl *c, rk_ring_side *s, rk_proto_u32 want)
{
    /* Private fields are read before the acquire load: after it the
     * compiler must re-read anything still in memory. */
    rk_proto_u64 pos = s->pos;
    rk_proto_u64 cap = (rk_proto_u64)s->mask + 1;
    rk_proto_u64 free_slots = cap - (pos - s->peer);
    if (free_slots < want) {
        /* Acquire pairs with the consumer's release store of head in
         * rk_ring_cons_release: its reads of the freed slots are done
         * before we overwrite them. */
        rk_proto_u64 peer = rk_ring_load_acquire(&c->head);
        s->peer = peer;
        free_slots = cap - (pos - peer);
    }
    return free_slots < want ? (rk_proto_u32)free_slots : want;
}

/** Makes every position below tail visible to the consumer. tail is the
 * producer's s->pos after its writes; callers that advanced s->pos before
 * copying (so no field is re-read after the copy) publish with this. */
RK_PROTO_FN void
rk_ring_publish_tail(rk_ring_ctrl *c, rk_proto_u64 tail)
{
    /* Release pairs with the consumer's acquire load of tail in
     * rk_ring_cons_avail: the slot contents are visible before the new
     * tail is. */
    rk_ring_store_release(&c->tail, tail);
}

/** Publishes n written slots (n <= the last rk_ring_prod_space result). */
RK_PROTO_FN void
rk_ring_prod_publish(rk_ring_ctrl *c, rk_ring_side *s, rk_proto_u32 n)
{
    s->pos += n;
    rk_ring_publish_tail(c, s->pos);
}

/* ---------------------------------------------------------- consumer */

/** How many of the next `want` slots hold messages: min(want, available).
 * Re-reads the producer's tail only when the cached copy says empty. */
RK_PROTO_FN rk_proto_u32
rk_ring_cons_avail(const rk_ring_ctrl *c, rk_ring_side *s, rk_proto_u32 want)
{
    rk_proto_u64 pos = s->pos; /* read before the acquire, as above */
    rk_proto_u64 avail = s->peer - pos;
    if (avail < want) {
        /* Acquire pairs with the producer's release store of tail in
         * rk_ring_prod_publish: the slots below tail are fully written. */
        rk_proto_u64 peer = rk_ring_load_acquire(&c->tail);
        s->peer = peer;
        avail = peer - pos;
    }
    return avail < want ? (rk_proto_u32)avail : want;
}

/** Hands every position below head back to the producer (head is the
 * consumer's s->pos after its reads). */
RK_PROTO_FN void
rk_ring_release_head(rk_ring_ctrl *c, rk_proto_u64 head)
{
    /* Release pairs with the producer's acquire load of head in
     * rk_ring_prod_space: our reads of these slots happen before the
     * producer may overwrite them. */
    rk_ring_store_release(&c->head, head);
}

/** Hands n read slots back to the producer. */
RK_PROTO_FN void
rk_ring_cons_release(rk_ring_ctrl *c, rk_ring_side *s, rk_proto_u32 n)
{
    s->pos += n;
    rk_ring_release_head(c, s->pos);
}

#endif /* RINGKERNEL_RING_PROTO_H */
