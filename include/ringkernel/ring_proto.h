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
#if defined(__CUDACC_RTC__)
/** NVRTC: no standard headers are available. */
typedef unsigned long long rk_proto_u64;
typedef unsigned int rk_proto_u32;
#define RK_PROTO_FN      static __host__ __device__ __forceinline__
#define RK_PROTO_ALIGN64 alignas(64)
#define RK_PROTO_A64     rk_proto_u64
#elif defined(__CUDACC__) || defined(__cplusplus)
#include <stdint.h>
typedef uint64_t rk_proto_u64;
typedef uint32_t rk_proto_u32;
#if defined(__CUDACC__)
#define RK_PROTO_FN static __host__ __device__ __forceinline__
#else
#define RK_PROTO_FN static inline
#endif
#define RK_PROTO_ALIGN64 alignas(64)
#define RK_PROTO_A64     rk_proto_u64
#else
#include <stdatomic.h>
#include <stdint.h>
typedef uint64_t rk_proto_u64; /**< 64-bit unsigned word of the protocol */
typedef uint32_t rk_proto_u32; /**< 32-bit unsigned word of the protocol */
/** how protocol functions are declared (static inline; __host__ __device__
 * under CUDA) */
#define RK_PROTO_FN      static inline
#define RK_PROTO_ALIGN64 _Alignas(64) /**< starts a 64-byte line */
/** a 64-bit index word shared by both sides (_Atomic in host C) */
#define RK_PROTO_A64     _Atomic uint64_t
#define RK_PROTO_HOST_C  1 /**< defined in a host C build (C11 atomics) */
#endif

#define RK_RING_LINE  64          /**< cache line size the layout assumes */
#define RK_RING_MAGIC 0x524b5231u /**< "RKR1" */

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
    rk_proto_u32 reserved;               /**< 0 */
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
        slot_size; /**< bytes per slot (copied from the control block) */
} rk_ring_side;

/* ---------------------------------------------------------- primitives */

/** Relaxed load of an index. Used only by the index's owner, or for stats. */
RK_PROTO_FN rk_proto_u64
rk_ring_load_relaxed(const RK_PROTO_A64 *p)
{
#if defined(__CUDA_ARCH__)
    return *(const volatile rk_proto_u64 *)p;
#elif defined(RK_PROTO_HOST_C)
    return atomic_load_explicit(p, memory_order_relaxed);
#else
    return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

/** Relaxed store of a word only this side writes (counters, statistics). */
RK_PROTO_FN void
rk_ring_store_relaxed_u64(RK_PROTO_A64 *p, rk_proto_u64 v)
{
#if defined(__CUDA_ARCH__)
    *(volatile rk_proto_u64 *)p = v;
#elif defined(RK_PROTO_HOST_C)
    atomic_store_explicit(p, v, memory_order_relaxed);
#else
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

/** Acquire load: everything the other side wrote before its release store
 * of this index is visible after this load. */
RK_PROTO_FN rk_proto_u64
rk_ring_load_acquire(const RK_PROTO_A64 *p)
{
#if defined(__CUDA_ARCH__)
#if __CUDA_ARCH__ >= 700
    rk_proto_u64 v;
    asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
#else
    rk_proto_u64 v = *(const volatile rk_proto_u64 *)p;
    __threadfence_system(); /* later accesses stay after the load */
    return v;
#endif
#elif defined(RK_PROTO_HOST_C)
    return atomic_load_explicit(p, memory_order_acquire);
#else
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

/** Release store: everything this side wrote before it (slot contents, or
 * its reads of a slot) is ordered before the new index value. */
RK_PROTO_FN void
rk_ring_store_release(RK_PROTO_A64 *p, rk_proto_u64 v)
{
#if defined(__CUDA_ARCH__)
#if __CUDA_ARCH__ >= 700
    asm volatile("st.release.sys.u64 [%0], %1;" : : "l"(p), "l"(v) : "memory");
#else
    __threadfence_system(); /* earlier accesses complete first */
    *(volatile rk_proto_u64 *)p = v;
#endif
#elif defined(RK_PROTO_HOST_C)
    atomic_store_explicit(p, v, memory_order_release);
#else
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

/* ---------------------------------------------------------- setup */

/** Initialises the control block (host side, before either side starts).
 * capacity must be a power of two and slot_size non-zero; the caller
 * validates (rk_spsc_init does). */
RK_PROTO_FN void
rk_ring_init(rk_ring_ctrl *c, rk_proto_u32 capacity, rk_proto_u32 slot_size)
{
#if defined(RK_PROTO_HOST_C)
    atomic_init(&c->tail, 0);
    atomic_init(&c->head, 0);
#else
    c->tail = 0;
    c->head = 0;
#endif
    c->magic = RK_RING_MAGIC;
    c->capacity = capacity;
    c->slot_size = slot_size;
    c->reserved = 0;
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
