/** @file
 * ringkernel/dev_oneshot.h - the device side of one-shot kernels
 * (ringkernel/oneshot.h): the arguments a launch hands every block, the
 * entry macro, and the barriers.
 *
 * A one-shot kernel runs once over a grid and returns (unlike a ring
 * kernel's persistent loop). It is written once against rk_dev.h and, like
 * the persistent loop, compiles under NVRTC, nvcc, host C and host C++:
 *
 *     RK_DEV_FN void vadd_body(const rk_dev_oneshot_args *a)
 *     {
 *         const float *x = (const float *)rk_dev_oneshot_buf(a, 0);
 *         ...
 *     }
 *     RK_DEV_ONESHOT(vadd, vadd_body)
 *
 * The host build of the entry (rk_dev_host_kernel_vadd) is what the tests
 * and the stand-in driver run, one CPU thread per block.
 *
 * Barriers:
 *   - rk_dev_barrier_wait(b, parties): a barrier in device memory shared
 *     by `parties` blocks, of one grid or of several resident kernels
 *     (each block's thread 0 arrives once; the whole block waits).
 *     Generation-counted, so it is reusable without a reset;
 *   - rk_dev_sync_grid(a): every block of the grid, for a kernel launched
 *     cooperatively (rk_oneshot_def.cooperative), whose blocks are then
 *     guaranteed co-resident. In a kernel that was not launched so it
 *     does not wait (its blocks might never be resident together: a
 *     hang): it records the misuse, which the launch reports as
 *     RK_EINVAL naming the kernel.
 * The arrival is the one read-modify-write in the device headers: an
 * acq_rel atomic add at GPU scope on device memory (never across PCIe).
 * On the host it is a C11 acq_rel fetch-add, and the wait a real wait,
 * so the host twin is a real barrier across the block threads.
 */
#ifndef RINGKERNEL_DEV_ONESHOT_H
#define RINGKERNEL_DEV_ONESHOT_H

#include "ringkernel/dev_kernel.h"
#include "ringkernel/rk_dev.h"

#define RK_DEV_ONESHOT_MAX_BUFS 8   /**< buffers one launch passes */
#define RK_DEV_ONESHOT_ARG_MAX  256 /**< bytes of by-value arguments */

/** A barrier in device memory (zeroed before first use). */
typedef struct rk_dev_barrier {
    RK_DEV_A32 count;  /**< arrivals in the current generation */
    RK_DEV_A32 gen;    /**< generation: bumped by the last arrival */
    RK_DEV_A32 misuse; /**< rk_dev_sync_grid in a non-cooperative launch */
    RK_DEV_A32 pad_;   /**< reserved (16-byte size) */
} rk_dev_barrier;

/** What every block of a one-shot launch receives (by value). */
typedef struct rk_dev_oneshot_args {
    /** the buffers' addresses, in the launch's order (device addresses
     * on a GPU, host addresses in a host fallback) */
    rk_dev_u64 buf[RK_DEV_ONESHOT_MAX_BUFS];
    rk_dev_u64 grid_bar;   /**< rk_dev_barrier * (device memory) */
    rk_dev_u32 coop;       /**< 1: launched cooperatively */
    rk_dev_u32 nbuf;       /**< buffers passed */
    rk_dev_u32 arg_len;    /**< bytes of arg used */
    rk_dev_u32 pad_;       /**< reserved (8-byte alignment of arg) */
    /** by-value arguments (8-byte aligned): rk_dev_oneshot_arg */
    rk_dev_u64 arg[RK_DEV_ONESHOT_ARG_MAX / 8];
} rk_dev_oneshot_args;

/** Buffer i's address as a pointer. */
#define rk_dev_oneshot_buf(a, i) ((void *)(rk_dev_size)(a)->buf[i])
/** Copies the first n bytes of the by-value arguments (a struct the host
 * packed) to dst: `rk_os_n p; rk_dev_oneshot_arg(a, &p, sizeof(p));`.
 * A byte copy, so no pointer is type-punned. */
RK_DEV_FN void
rk_dev_oneshot_arg(const rk_dev_oneshot_args *a, void *dst, rk_dev_u32 n)
{
    const unsigned char *s = (const unsigned char *)a->arg;
    unsigned char *d = (unsigned char *)dst;
    for (rk_dev_u32 i = 0; i < n && i < RK_DEV_ONESHOT_ARG_MAX; i++)
        d[i] = s[i];
}

/* acq_rel fetch-add at GPU scope: the arrival. Device memory only. */
RK_DEV_FN rk_dev_u32
rk_dev__fetch_add_gpu32(RK_DEV_A32 *p, rk_dev_u32 v)
{
#if defined(RK_DEV_ON_DEVICE)
    rk_dev_u32 old;
    asm volatile("atom.acq_rel.gpu.add.u32 %0, [%1], %2;"
                 : "=r"(old)
                 : "l"(p), "r"(v)
                 : "memory");
    return old;
#elif defined(RK_ATOMIC_HOST_C)
    /* acq_rel: the release publishes this block's writes to the last
     * arrival, whose acquire here sees every block's before it bumps gen. */
    return atomic_fetch_add_explicit(p, v, memory_order_acq_rel);
#else
    return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
#endif
}

/**
 * Waits until `parties` blocks (this one included) arrived at b. Every
 * thread of the block calls it; thread 0 arrives. Each party arrives once
 * per generation. What a block wrote before it is visible to every block
 * after it (GPU scope).
 */
RK_DEV_FN void
rk_dev_barrier_wait(rk_dev_barrier *b, rk_dev_u32 parties)
{
    rk_dev_sync_block();
    if (rk_dev_thread_idx() == 0) {
        rk_dev_u32 ns = 0;
        /* Read before arriving: gen cannot move until this block has
         * arrived. Acquire pairs with the release store of gen below. */
        rk_dev_u32 g = rk_dev_ld_acquire_gpu32(&b->gen);
        rk_dev_fence_sys(); /* the block's writes before the arrival */
        if (rk_dev__fetch_add_gpu32(&b->count, 1) + 1 == parties) {
            /* The last: reset for the next generation, then release
             * everyone (the release orders the reset before a waiter's
             * next arrival, which follows its acquire of gen). */
            rk_dev_st_relaxed32(&b->count, 0);
            rk_dev_st_release_gpu32(&b->gen, g + 1);
        } else {
            /* Acquire pairs with the last arrival's release of gen. */
            while (rk_dev_ld_acquire_gpu32(&b->gen) == g)
                rk_dev_backoff(&ns);
        }
    }
    rk_dev_sync_block();
}

/**
 * Every block of the grid waits here (a grid-wide barrier). Only in a
 * kernel launched cooperatively; elsewhere it returns at once and the
 * launch fails with RK_EINVAL naming the kernel. Returns 1 when it
 * waited, 0 on such misuse.
 */
RK_DEV_FN int
rk_dev_sync_grid(const rk_dev_oneshot_args *a)
{
    rk_dev_barrier *b = (rk_dev_barrier *)(rk_dev_size)a->grid_bar;
    if (b == 0)
        return 0;
    if (a->coop == 0) {
        rk_dev_st_relaxed32(&b->misuse, 1); /* read after the grid ended */
        return 0;
    }
    rk_dev_barrier_wait(b, rk_dev_grid_dim());
    return 1;
}

/**
 * A ring kernel's named barrier (rk_kernel_config.device_barrier): every
 * block of every kernel naming it waits here until all its parties have
 * arrived; what a block wrote before is visible to every block after
 * (GPU scope, device memory). The wait is unbounded: a block waiting
 * here sees no command, so every party must reach it. Collective.
 * Returns 1 when it waited, 0 when the kernel names no barrier.
 */
RK_DEV_FN int
rk_dev_kernel_barrier(const rk_dev_ctx *x)
{
    rk_dev_barrier *b = (rk_dev_barrier *)(rk_dev_size)x->a.barrier;
    if (b == 0)
        return 0;
    rk_dev_barrier_wait(b, x->a.barrier_parties);
    return 1;
}

/** The global index of this thread: block * block size + thread. */
RK_DEV_FN rk_dev_u32
rk_dev_global_idx(void)
{
    return rk_dev_block_idx() * rk_dev_block_dim() + rk_dev_thread_idx();
}

/** Threads in the grid. */
RK_DEV_FN rk_dev_u32
rk_dev_global_dim(void)
{
    return rk_dev_grid_dim() * rk_dev_block_dim();
}

#if defined(RK_DEV_CUDA)
/** A one-shot kernel entry `name` running fn(const rk_dev_oneshot_args *)
 * on every thread of every block. */
#define RK_DEV_ONESHOT(name, fn)                                              \
    extern "C" __global__ void name(rk_dev_oneshot_args rk_dev_a_)            \
    {                                                                         \
        fn(&rk_dev_a_);                                                       \
    }
#else
/** The host build of RK_DEV_ONESHOT: a static function named after the
 * kernel (suffix `_rk_host`) runs fn for every
 * thread of one block (the stand-in driver's blocks are CPU threads). */
#define RK_DEV_ONESHOT(name, fn)                                              \
    static void name##_rk_host(                                               \
        const void *args, rk_dev_u32 block, rk_dev_u32 nblocks)               \
    {                                                                         \
        rk_dev_host_enter(block, nblocks);                                    \
        fn((const rk_dev_oneshot_args *)args);                                \
    }                                                                         \
    RK_DEV__EXTERN const rk_dev_host_kernel rk_dev_host_kernel_##name;        \
    RK_DEV__EXTERN const rk_dev_host_kernel rk_dev_host_kernel_##name         \
        = { #name, sizeof(rk_dev_oneshot_args), name##_rk_host };
#endif

#endif /* RINGKERNEL_DEV_ONESHOT_H */
