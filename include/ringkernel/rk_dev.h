/** @file
 * ringkernel/rk_dev.h - the portable shim under the device-side headers.
 *
 * Device code in ringkernel (the persistent loop, the device actor API and
 * the handlers users write) is written once against this header and
 * compiles four ways, like ring_proto.h:
 *
 *   - NVRTC (__CUDACC_RTC__): no standard headers; device intrinsics;
 *   - nvcc (__CUDACC__, device pass __CUDA_ARCH__): the same;
 *   - host C11 (gcc, clang): the same source runs on CPU threads in tests
 *     and in the test-only stand-in driver, one thread per thread block;
 *   - host C++ (g++, clang++, nvcc's host pass).
 *
 * What it provides:
 *   - RK_DEV_FN / RK_DEV_SHARED / RK_DEV_ALIGN64 / 32- and 64-bit types;
 *   - the block and thread index, block size and grid size; on the host a
 *     block has exactly one thread (rk_dev_block_dim() == 1), so a
 *     data-parallel loop `for (i = tid; i < n; i += bdim)` runs whole;
 *   - rk_dev_sync_block() (__syncthreads; nothing on the host) and
 *     rk_dev_fence_sys() (__threadfence_system);
 *   - rk_dev_backoff(): __nanosleep on the device (sm_70+), a pause then
 *     sched_yield on the host;
 *   - acquire loads and release stores of 32- and 64-bit words at system
 *     scope (host <-> device, PTX ld.acquire.sys / st.release.sys) and at
 *     GPU scope (kernel <-> kernel in device memory, .gpu). On the host
 *     both are C11 acquire/release (C) or __atomic builtins (C++);
 *   - rk_dev_now_ns(): %globaltimer on the device, CLOCK_MONOTONIC on the
 *     host. The two clocks are unrelated; see docs/cuda.md.
 *
 * Words shared across sides are declared with RK_DEV_A32 / RK_DEV_A64:
 * _Atomic in host C (so TSan and the C11 model see them), plain words
 * everywhere else, with one layout (checked by static assertions in the
 * tests under every compiler).
 *
 * No read-modify-write across PCIe: nothing here offers one.
 *
 * Ownership: nothing here allocates or owns memory.
 */
#ifndef RINGKERNEL_RK_DEV_H
#define RINGKERNEL_RK_DEV_H

/* ---------------------------------------------------------- environment */
/* The words, qualifiers and every atomic operation come from rk_atomic.h,
 * the one atomics layer shared with ring_proto.h and ctl_proto.h. */
#include "ringkernel/rk_atomic.h"

#if defined(__CUDACC_RTC__)
typedef int rk_dev_i32;
typedef unsigned char rk_dev_u8;
typedef unsigned long long rk_dev_size;
#else
#include <stddef.h>
#include <stdint.h>
typedef int32_t rk_dev_i32; /**< 32-bit signed */
typedef uint8_t rk_dev_u8;  /**< 8-bit unsigned */
typedef size_t rk_dev_size; /**< a size in bytes */
#endif
typedef rk_atomic_u64 rk_dev_u64; /**< 64-bit unsigned */
typedef rk_atomic_u32 rk_dev_u32; /**< 32-bit unsigned */

#define RK_DEV_ALIGN64 RK_ATOMIC_ALIGN64 /**< starts a 64-byte line */
/** a 32-bit word shared across sides (_Atomic in host C) */
#define RK_DEV_A32 RK_ATOMIC_U32
/** a 64-bit word shared across sides (_Atomic in host C) */
#define RK_DEV_A64 RK_ATOMIC_U64
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define RK_DEV_CUDA 1
/** Device functions are __device__ only: they use intrinsics. Everything
 * a host program calls on these structs lives in the host build. */
#define RK_DEV_FN     static __device__ __forceinline__
#define RK_DEV_SHARED __shared__
#else
/** how device functions are declared (static __device__ __forceinline__ under
 * CUDA) */
#define RK_DEV_FN static inline
/** block-shared storage (__shared__ under CUDA; nothing on the host, where a
 * block is one thread) */
#define RK_DEV_SHARED
#endif

/* True in the device pass (NVRTC, nvcc -arch): device intrinsics exist. */
#if defined(__CUDA_ARCH__)
#define RK_DEV_ON_DEVICE 1
#if __CUDA_ARCH__ < 700
#error "ringkernel device code needs sm_70 or newer (acquire/release PTX)"
#endif
#endif

#if !defined(RK_DEV_ON_DEVICE)
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#endif

#define RK_DEV_LINE 64 /**< cache line size the layouts assume */

/* ---------------------------------------------------------- host blocks */
/*
 * On the host a "block" is one thread. The host runner (the test harness
 * or the stand-in driver) tells the code which block it is with
 * rk_dev_host_enter(); the values are thread-local to the translation unit
 * that includes this header, which is the one holding the kernel entry
 * (RK_DEV_KERNEL in dev_kernel.h calls it).
 */
#if !defined(RK_DEV_ON_DEVICE)
#if defined(__cplusplus)
static thread_local rk_dev_u32 rk_dev_host_blk, rk_dev_host_nblk = 1;
#else
/** @{ */
/** This thread's block index and the block count (host build only; set by
 * rk_dev_host_enter()). */
static _Thread_local rk_dev_u32 rk_dev_host_blk, rk_dev_host_nblk = 1;
/** @} */
#endif
#if defined(__cplusplus)
static thread_local unsigned char *rk_dev_host_stage;
#else
/** Host build only: this thread's block staging memory (the device's
 * dynamic shared memory; set by rk_dev_host_stage_set()). */
static _Thread_local unsigned char *rk_dev_host_stage;
#endif
/** Host build only: gives the calling thread's block its staging memory
 * (the host runner allocates rk_dev_kargs.stage_bytes). */
static inline void
rk_dev_host_stage_set(void *stage)
{
    rk_dev_host_stage = (unsigned char *)stage;
}
/** Host build only: tells the calling thread that it runs block of nblocks
 * (the host runner calls it before the kernel body). */
static inline void
rk_dev_host_enter(rk_dev_u32 block, rk_dev_u32 nblocks)
{
    rk_dev_host_blk = block;
    rk_dev_host_nblk = nblocks;
}
#endif

/*
 * Host build only: RK_DEV_HOST_POINT() runs at the device calls a block
 * makes all the time (back-off, block sync, system fence, the timer) and
 * RK_DEV_HOST_TRAP() is rk_dev_trap()'s host half. A host runner that
 * models a trap (the stand-in driver: every block of the context stops at
 * its next such call) defines both before it includes the device code;
 * otherwise a point is nothing and a trap aborts the process.
 */
#if !defined(RK_DEV_ON_DEVICE) && !defined(RK_DEV_HOST_POINT)
/** Host build: a point where a host runner may stop a trapped block
 * (nothing unless the runner defines it; see above). */
#define RK_DEV_HOST_POINT() ((void)0)
#endif

/* ---------------------------------------------------------- indices */

/** The thread's index within its block (threadIdx.x; 0 on the host). */
RK_DEV_FN rk_dev_u32
rk_dev_thread_idx(void)
{
#if defined(RK_DEV_ON_DEVICE)
    return threadIdx.x;
#else
    return 0;
#endif
}

/** Threads per block (blockDim.x; 1 on the host). */
RK_DEV_FN rk_dev_u32
rk_dev_block_dim(void)
{
#if defined(RK_DEV_ON_DEVICE)
    return blockDim.x;
#else
    return 1;
#endif
}

/** The block's index in the grid (blockIdx.x; the runner's block on the host).
 */
RK_DEV_FN rk_dev_u32
rk_dev_block_idx(void)
{
#if defined(RK_DEV_ON_DEVICE)
    return blockIdx.x;
#else
    return rk_dev_host_blk;
#endif
}

/** Blocks in the grid (gridDim.x; the runner's count on the host). */
RK_DEV_FN rk_dev_u32
rk_dev_grid_dim(void)
{
#if defined(RK_DEV_ON_DEVICE)
    return gridDim.x;
#else
    return rk_dev_host_nblk;
#endif
}

/** Every thread of the block waits here; shared-memory writes before it are
 * visible to the whole block after it. */
RK_DEV_FN void
rk_dev_sync_block(void)
{
#if defined(RK_DEV_ON_DEVICE)
    __syncthreads();
#else
    RK_DEV_HOST_POINT();
#endif
}

/* ---------------------------------------------------------- back-off */

/** One step of a polling back-off; *ns doubles from 32 ns to 8 us on the
 * device. On the host: a pause for short waits, then the CPU is yielded so
 * an oversubscribed machine still runs the peer being waited for. */
RK_DEV_FN void
rk_dev_backoff(rk_dev_u32 *ns)
{
    rk_dev_u32 cur = *ns < 32 ? 32 : *ns;
#if defined(RK_DEV_ON_DEVICE)
    __nanosleep(cur);
#else
    RK_DEV_HOST_POINT();
    if (cur < 1024)
        rk_atomic_cpu_relax();
    else
        sched_yield();
#endif
    *ns = cur >= 8192 ? 8192 : cur * 2;
}

/** Nanoseconds from the device's global timer (host: CLOCK_MONOTONIC, or
 * TIME_UTC in strict C11 without POSIX). */
RK_DEV_FN rk_dev_u64
rk_dev_now_ns(void)
{
#if defined(RK_DEV_ON_DEVICE)
    rk_dev_u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
#else
    struct timespec ts;
    RK_DEV_HOST_POINT();
#if defined(CLOCK_MONOTONIC)
    clock_gettime(CLOCK_MONOTONIC, &ts);
#else
    timespec_get(&ts, TIME_UTC); /* strict C11 without POSIX */
#endif
    return (rk_dev_u64)ts.tv_sec * 1000000000u + (rk_dev_u64)ts.tv_nsec;
#endif
}

/* ---------------------------------------------------------- ordering */
/*
 * The device API's names for the operations of rk_atomic.h:
 * _sys: the other side is the host (mapped pinned memory over PCIe);
 * _gpu: the other side is another kernel on the same GPU (device memory);
 * _relaxed: the word's own writer, or statistics.
 * On the host every scope is the same C11 order. An acquire load makes
 * what the other side wrote before its release store of *p visible; a
 * release store orders this thread's earlier writes before *p = v.
 */
/** acquire load, 32-bit, the same GPU */
#define rk_dev_ld_acquire_gpu32 rk_atomic_load_acquire_gpu_u32
/** acquire load, 64-bit, the same GPU */
#define rk_dev_ld_acquire_gpu64 rk_atomic_load_acquire_gpu_u64
/** release store, 32-bit, the same GPU */
#define rk_dev_st_release_gpu32 rk_atomic_store_release_gpu_u32
/** release store, 64-bit, the same GPU */
#define rk_dev_st_release_gpu64 rk_atomic_store_release_gpu_u64
/** relaxed store, 32-bit */
#define rk_dev_st_relaxed32 rk_atomic_store_relaxed_u32
/** relaxed store, 64-bit */
#define rk_dev_st_relaxed64 rk_atomic_store_relaxed_u64

/* ---------------------------------------------------------- PCIe accounting
 */
/*
 * What the device build costs across PCIe, counted by the host build (the
 * device build compiles every hook to nothing). Per block, in a table of
 * the translation unit that holds the kernel (the test includes the
 * kernel source, so it reads the table directly):
 *
 *   reads       device reads of host-mapped memory by the loop passes that
 *               took messages, from the end of the previous pass to the
 *               hand-back of the batch (a pipelined sweep of several words
 *               issued together is one read: one PCIe latency);
 *   msgs        messages handed back by those passes;
 *   polls       loop passes that found nothing;
 *   poll_reads  the reads of those passes (an idle poll's cost);
 *   fences      system-scope fences (fence.sc.sys / membar.sys, i.e.
 *               __threadfence_system) and release stores at system scope
 *               (st.release.sys, which the hardware implements with one).
 *
 * A read is counted where the device issues it: rk_dev_pcie_read() at
 * each site in dev_kernel.h and in the system-scope acquire loads below.
 * Relaxed stores to mapped memory (heartbeat, counters, posted writes)
 * are not counted: they cost bandwidth, not a round trip.
 */
/** One block's PCIe counts (host build; see above). */
typedef struct rk_dev_pcie {
    RK_DEV_A64 reads;      /**< reads by passes that took messages */
    RK_DEV_A64 msgs;       /**< messages those passes handed back */
    RK_DEV_A64 polls;      /**< passes that found nothing */
    RK_DEV_A64 poll_reads; /**< reads by those passes */
    RK_DEV_A64 fences;     /**< system fences and st.release.sys */
} rk_dev_pcie;
#define RK_DEV_PCIE_BLOCKS 64 /**< blocks counted (block % 64) */
#if !defined(RK_DEV_ON_DEVICE)
/** Host build only: the counts of this translation unit's blocks. Each
 * entry has one writer (its block's thread). */
static rk_dev_pcie rk_dev_host_pcie[RK_DEV_PCIE_BLOCKS];
#if defined(__cplusplus)
static thread_local rk_dev_u64 rk_dev_host_pcie_cur;
#else
/** Host build only: reads since the calling block's last pass ended. */
static _Thread_local rk_dev_u64 rk_dev_host_pcie_cur;
#endif
static inline void
rk_dev__pcie_add(RK_DEV_A64 *w, rk_dev_u64 n)
{
    /* One writer per entry: a load and a store, no read-modify-write. */
    rk_atomic_store_relaxed_u64(w, rk_atomic_load_relaxed_u64(w) + n);
}
/** Host build only: a snapshot of block b's counts (relaxed: statistics). */
static inline void
rk_dev_pcie_get(rk_dev_u32 b, rk_dev_u64 out[5])
{
    rk_dev_pcie *p = &rk_dev_host_pcie[b % RK_DEV_PCIE_BLOCKS];
    out[0] = rk_atomic_load_relaxed_u64(&p->reads);
    out[1] = rk_atomic_load_relaxed_u64(&p->msgs);
    out[2] = rk_atomic_load_relaxed_u64(&p->polls);
    out[3] = rk_atomic_load_relaxed_u64(&p->poll_reads);
    out[4] = rk_atomic_load_relaxed_u64(&p->fences);
}
#endif

/** Counts one device read of host-mapped memory (nothing on the device). */
RK_DEV_FN void
rk_dev_pcie_read(void)
{
#if !defined(RK_DEV_ON_DEVICE)
    rk_dev_host_pcie_cur += 1;
#endif
}

/** Counts one system fence (nothing on the device). */
RK_DEV_FN void
rk_dev_pcie_fence(void)
{
#if !defined(RK_DEV_ON_DEVICE)
    rk_dev__pcie_add(
        &rk_dev_host_pcie[rk_dev_host_blk % RK_DEV_PCIE_BLOCKS].fences, 1);
#endif
}

/** Ends a loop pass that handed back msgs messages (0: found nothing):
 * the reads since the last pass go to that pass's kind. */
RK_DEV_FN void
rk_dev_pcie_pass(rk_dev_u32 msgs)
{
#if !defined(RK_DEV_ON_DEVICE)
    rk_dev_pcie *p = &rk_dev_host_pcie[rk_dev_host_blk % RK_DEV_PCIE_BLOCKS];
    if (msgs == 0) {
        rk_dev__pcie_add(&p->polls, 1);
        rk_dev__pcie_add(&p->poll_reads, rk_dev_host_pcie_cur);
    } else {
        rk_dev__pcie_add(&p->msgs, msgs);
        rk_dev__pcie_add(&p->reads, rk_dev_host_pcie_cur);
    }
    rk_dev_host_pcie_cur = 0;
#else
    (void)msgs;
#endif
}

/** RK_DEV_PCIE_READ(): one device read of host-mapped memory, counted by
 * the host build. */
#define RK_DEV_PCIE_READ() rk_dev_pcie_read()
/** RK_DEV_PCIE_FENCE(): one system fence, counted by the host build. */
#define RK_DEV_PCIE_FENCE() rk_dev_pcie_fence()

/** Acquire load, 32-bit, of a word the host writes (a counted read). */
RK_DEV_FN rk_dev_u32
rk_dev_ld_acquire_sys32(const RK_DEV_A32 *p)
{
    rk_dev_pcie_read();
    return rk_atomic_load_acquire_sys_u32(p);
}

/** Acquire load, 64-bit, of a word the host writes (a counted read). */
RK_DEV_FN rk_dev_u64
rk_dev_ld_acquire_sys64(const RK_DEV_A64 *p)
{
    rk_dev_pcie_read();
    return rk_atomic_load_acquire_sys_u64(p);
}

/** Release store, 32-bit, for the host (st.release.sys: a counted fence). */
RK_DEV_FN void
rk_dev_st_release_sys32(RK_DEV_A32 *p, rk_dev_u32 v)
{
    rk_dev_pcie_fence();
    rk_atomic_store_release_sys_u32(p, v);
}

/** Release store, 64-bit, for the host (a counted fence). */
RK_DEV_FN void
rk_dev_st_release_sys64(RK_DEV_A64 *p, rk_dev_u64 v)
{
    rk_dev_pcie_fence();
    rk_atomic_store_release_sys_u64(p, v);
}

/** A system-scope fence by the calling thread: its earlier writes (and
 * reads) are ordered before its later ones for every observer, the host
 * included. Used by every thread of a block before the block sync that
 * precedes thread 0's release store, so the data the other threads wrote
 * is covered by that release at system scope, not only at block scope.
 * On the host a block is one thread: a compiler barrier suffices. */
RK_DEV_FN void
rk_dev_fence_sys(void)
{
    rk_dev_pcie_fence();
#if defined(RK_DEV_ON_DEVICE)
    rk_atomic_fence_sys();
#else
    RK_DEV_HOST_POINT();
    rk_atomic_compiler_barrier();
#endif
}

/** Ends the kernel with an error, as a failed device assertion or an
 * illegal address does: on the device __trap() (PTX trap;), which stops
 * every block of the grid and leaves the CUDA context's error sticky: the
 * host sees it on every stream and call of the context, and every other
 * kernel in that context is gone too (docs/cuda-robustness.md, "A block that
 * traps"). On the host build RK_DEV_HOST_TRAP() (the stand-in driver's
 * model of the same), else abort(). Does not return. */
RK_DEV_FN void
rk_dev_trap(void)
{
#if defined(RK_DEV_ON_DEVICE)
    __trap();
#elif defined(RK_DEV_HOST_TRAP)
    RK_DEV_HOST_TRAP();
#else
    abort();
#endif
}

/** The block's staging memory: the kernel's dynamic shared memory on the
 * device (the launch gives rk_dev_kargs.stage_bytes of it), the runner's
 * allocation on the host. 16-byte aligned. */
RK_DEV_FN unsigned char *
rk_dev_stage_mem(void)
{
#if defined(RK_DEV_ON_DEVICE)
    extern __shared__ __align__(16) unsigned char rk_dev_stage_[];
    return rk_dev_stage_;
#else
    return rk_dev_host_stage;
#endif
}

/** Block-wide copy of n bytes in 8-byte words (dst, src and n multiples of
 * 8): one warp-wide load or store moves 256 contiguous bytes, so a copy
 * from mapped host memory costs about one PCIe round trip, not one per
 * byte. Data-parallel over the block's threads; no sync. */
RK_DEV_FN void
rk_dev_copy_words(void *dst, const void *src, rk_dev_u32 n)
{
#if defined(RK_DEV_ON_DEVICE)
    rk_dev_u64 *d = (rk_dev_u64 *)dst;
    const rk_dev_u64 *s = (const rk_dev_u64 *)src;
    for (rk_dev_u32 i = threadIdx.x; i < n / 8; i += blockDim.x)
        d[i] = s[i];
#else
    memcpy(dst, src, n); /* one thread per block on the host */
#endif
}

/** Byte copy usable everywhere (no memcpy under NVRTC). Data-parallel over
 * the block when every thread calls it with the same arguments. */
RK_DEV_FN void
rk_dev_copy_block(void *dst, const void *src, rk_dev_u32 n)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    for (rk_dev_u32 i = rk_dev_thread_idx(); i < n; i += rk_dev_block_dim())
        d[i] = s[i];
}

/* ---------------------------------------------------------- warps */
/*
 * Warp-level helpers. On the device a warp is 32 threads and every one of
 * them must call the helper (the full mask 0xffffffff is used: launch
 * blocks of a multiple of 32 threads). On the host a block is one thread,
 * so a warp is one lane: a shuffle returns the caller's own value (as
 * CUDA does when the source lane is outside the warp), a vote is the
 * caller's own predicate, a warp sync is nothing. Written once, the same
 * reduction runs whole either way (rk_dev_warp_sum32).
 */
/** Threads per warp: 32 on the device, 1 on the host. */
RK_DEV_FN rk_dev_u32
rk_dev_warp_size(void)
{
#if defined(RK_DEV_ON_DEVICE)
    return 32u;
#else
    return 1u;
#endif
}

/** The calling thread's lane in its warp (0 on the host). */
RK_DEV_FN rk_dev_u32
rk_dev_lane_id(void)
{
#if defined(RK_DEV_ON_DEVICE)
    return threadIdx.x & 31u;
#else
    return 0u;
#endif
}

/** Every lane of the warp waits here (__syncwarp; nothing on the host). */
RK_DEV_FN void
rk_dev_sync_warp(void)
{
#if defined(RK_DEV_ON_DEVICE)
    __syncwarp(0xffffffffu);
#endif
}

/** v of lane src (__shfl_sync); the caller's own v on the host. */
RK_DEV_FN rk_dev_u32
rk_dev_shfl32(rk_dev_u32 v, rk_dev_u32 src)
{
#if defined(RK_DEV_ON_DEVICE)
    return __shfl_sync(0xffffffffu, v, (int)src);
#else
    (void)src;
    return v;
#endif
}

/** v of lane (this lane + delta), or the caller's own v where that lane is
 * outside the warp (__shfl_down_sync); always the caller's own on the
 * host. */
RK_DEV_FN rk_dev_u32
rk_dev_shfl_down32(rk_dev_u32 v, rk_dev_u32 delta)
{
#if defined(RK_DEV_ON_DEVICE)
    return __shfl_down_sync(0xffffffffu, v, delta);
#else
    (void)delta;
    return v;
#endif
}

/** v of lane (this lane ^ mask) (__shfl_xor_sync); the caller's own v on
 * the host. */
RK_DEV_FN rk_dev_u32
rk_dev_shfl_xor32(rk_dev_u32 v, rk_dev_u32 mask)
{
#if defined(RK_DEV_ON_DEVICE)
    return __shfl_xor_sync(0xffffffffu, v, (int)mask);
#else
    (void)mask;
    return v;
#endif
}

/** 1 when pred is non-zero on every lane (__all_sync). */
RK_DEV_FN int
rk_dev_vote_all(int pred)
{
#if defined(RK_DEV_ON_DEVICE)
    return __all_sync(0xffffffffu, pred) != 0;
#else
    return pred != 0;
#endif
}

/** 1 when pred is non-zero on some lane (__any_sync). */
RK_DEV_FN int
rk_dev_vote_any(int pred)
{
#if defined(RK_DEV_ON_DEVICE)
    return __any_sync(0xffffffffu, pred) != 0;
#else
    return pred != 0;
#endif
}

/** Bit i set when pred is non-zero on lane i (__ballot_sync). */
RK_DEV_FN rk_dev_u32
rk_dev_ballot(int pred)
{
#if defined(RK_DEV_ON_DEVICE)
    return __ballot_sync(0xffffffffu, pred);
#else
    return pred != 0 ? 1u : 0u;
#endif
}

/** The sum of v over the warp, in lane 0 (other lanes: partial sums). */
RK_DEV_FN rk_dev_u32
rk_dev_warp_sum32(rk_dev_u32 v)
{
    for (rk_dev_u32 d = rk_dev_warp_size() / 2; d > 0; d /= 2)
        v += rk_dev_shfl_down32(v, d);
    return v;
}

#endif /* RINGKERNEL_RK_DEV_H */
