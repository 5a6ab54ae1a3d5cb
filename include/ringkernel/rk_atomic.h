/** @file
 * ringkernel/rk_atomic.h - the one atomics layer under every protocol that
 * the host and a GPU share (the ring, ring_proto.h; the control block,
 * ctl_proto.h; the device shim, rk_dev.h), in the manner of Concurrency
 * Kit's ck_pr.h: loads and stores of 32- and 64-bit words with an explicit
 * order and scope, fences, and a spin-loop hint. It compiles four ways:
 *
 *   - host C11 (gcc, clang): shared words are _Atomic (so TSan and the C11
 *     model see them) and every operation is <stdatomic.h>;
 *   - NVRTC (__CUDACC_RTC__): no standard header, not even <stdint.h>, so
 *     NVRTC needs no include path but ours; device code (__CUDA_ARCH__)
 *     uses PTX ld.acquire / st.release at the scope the name says, volatile
 *     accesses for relaxed words;
 *   - nvcc: the same in the device pass; the host pass is host C++;
 *   - host C++ (g++, clang++, nvcc's host pass): GCC/Clang __atomic
 *     builtins on plain words.
 *
 * Scopes. _sys: the other side is the host or another device (mapped
 * pinned memory over PCIe: PTX .sys). _gpu: the other side is another
 * kernel on the same GPU (device memory: PTX .gpu). On the host both are
 * the same C11 order. Below sm_70 (no ld.acquire / st.release in PTX) a
 * device load is volatile and then fenced at its scope, a store is fenced
 * and then volatile; rk_dev.h refuses that architecture, ring_proto.h and
 * ctl_proto.h still compile for it.
 *
 * No read-modify-write: CPU<->GPU RMW over PCIe is not atomic, so the
 * protocols built on this header only load and store (docs/queues.md,
 * "Host and GPU").
 *
 * Ownership: nothing here allocates or owns memory; every pointer is the
 * caller's and must be naturally aligned.
 *
 * The operations (T is rk_atomic_u32 or rk_atomic_u64, A the matching
 * RK_ATOMIC_U32 or RK_ATOMIC_U64, N is 32 or 64):
 *
 *   void rk_atomic_init_uN(A *p, T v)              before any sharing
 *   T    rk_atomic_load_relaxed_uN(const A *p)     owner, or statistics
 *   void rk_atomic_store_relaxed_uN(A *p, T v)     single writer
 *   T    rk_atomic_load_acquire_sys_uN(const A *p) pairs with ..._release_sys
 *   void rk_atomic_store_release_sys_uN(A *p, T v)
 *   T    rk_atomic_load_acquire_gpu_uN(const A *p) pairs with ..._release_gpu
 *   void rk_atomic_store_release_gpu_uN(A *p, T v)
 *   void rk_atomic_load_pair_relaxed_sys_u64(const A *p, T *a, T *b)
 *   void rk_atomic_store_pair_relaxed_sys_u64(A *p, T a, T b)
 *   void rk_atomic_fence_sys(void), rk_atomic_fence_gpu(void)
 *   void rk_atomic_compiler_barrier(void)
 *   void rk_atomic_cpu_relax(void)
 */
#ifndef RINGKERNEL_RK_ATOMIC_H
#define RINGKERNEL_RK_ATOMIC_H

/* ---------------------------------------------------------- environment */
#if defined(__CUDACC_RTC__)
typedef unsigned long long rk_atomic_u64;
typedef unsigned int rk_atomic_u32;
#else
#include <stdint.h>
typedef uint64_t rk_atomic_u64; /**< 64-bit unsigned word */
typedef uint32_t rk_atomic_u32; /**< 32-bit unsigned word */
#endif

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define RK_ATOMIC_FN      static __host__ __device__ __forceinline__
#define RK_ATOMIC_ALIGN64 alignas(64)
#define RK_ATOMIC_U32     rk_atomic_u32
#define RK_ATOMIC_U64     rk_atomic_u64
#elif defined(__cplusplus)
#define RK_ATOMIC_FN      static inline
#define RK_ATOMIC_ALIGN64 alignas(64)
#define RK_ATOMIC_U32     rk_atomic_u32
#define RK_ATOMIC_U64     rk_atomic_u64
#else
#include <stdatomic.h>
/** how the operations are declared (static __host__ __device__
 * __forceinline__ under CUDA) */
#define RK_ATOMIC_FN      static inline
#define RK_ATOMIC_ALIGN64 _Alignas(64) /**< starts a 64-byte line */
/** a 32-bit word shared across threads or sides (_Atomic in host C, a
 * plain word elsewhere: the same size and alignment on every ABI we build
 * for) */
#define RK_ATOMIC_U32     _Atomic rk_atomic_u32
/** a 64-bit word shared across threads or sides (see RK_ATOMIC_U32) */
#define RK_ATOMIC_U64     _Atomic rk_atomic_u64
#define RK_ATOMIC_HOST_C  1 /**< defined in a host C build (C11 atomics) */
#endif

/* ---------------------------------------------------------- fences */
#if defined(__CUDA_ARCH__)
#define RK_ATOMIC__FENCE(device_fence) device_fence()
#define RK_ATOMIC__BARRIER()           asm volatile("" : : : "memory")
#elif defined(RK_ATOMIC_HOST_C)
#define RK_ATOMIC__FENCE(device_fence)                                        \
    atomic_thread_fence(memory_order_seq_cst)
#define RK_ATOMIC__BARRIER() atomic_signal_fence(memory_order_seq_cst)
#else
#define RK_ATOMIC__FENCE(device_fence) __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define RK_ATOMIC__BARRIER()           __atomic_signal_fence(__ATOMIC_SEQ_CST)
#endif

/** Orders the calling thread's earlier accesses before its later ones for
 * every observer, the host and other devices included
 * (__threadfence_system; a sequentially consistent fence on the host). */
RK_ATOMIC_FN void
rk_atomic_fence_sys(void)
{
    RK_ATOMIC__FENCE(__threadfence_system);
}

/** The same for observers on this GPU (__threadfence; on the host the same
 * fence as rk_atomic_fence_sys). */
RK_ATOMIC_FN void
rk_atomic_fence_gpu(void)
{
    RK_ATOMIC__FENCE(__threadfence);
}

/** Keeps the compiler from moving memory accesses across this point; emits
 * no instruction (a signal fence). */
RK_ATOMIC_FN void
rk_atomic_compiler_barrier(void)
{
    RK_ATOMIC__BARRIER();
}

/** A hint inside a spin loop that the thread is waiting (x86 pause, Arm
 * yield). Nothing on a GPU, where a waiting thread sleeps instead
 * (rk_dev_backoff's __nanosleep). */
RK_ATOMIC_FN void
rk_atomic_cpu_relax(void)
{
#if defined(__CUDA_ARCH__)
#elif defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* ---------------------------------------------------------- loads, stores */
/*
 * Each environment defines the bodies (p is the word, v the value); the
 * generators after them write the functions once for every environment.
 * The device bodies keep the exact PTX the protocols have always used
 * (tests/test_cuda_nvrtc.c and tests/test_queue_nvrtc.c check it).
 */
#if defined(__CUDA_ARCH__)
#define RK_ATOMIC__INIT(bits)   *p = v
#define RK_ATOMIC__LD_RLX(bits) return *(const volatile rk_atomic_u##bits *)p
#define RK_ATOMIC__ST_RLX(bits) *(volatile rk_atomic_u##bits *)p = v
#if __CUDA_ARCH__ >= 700
#define RK_ATOMIC__LD_ACQ(bits, scope, cons)                                  \
    rk_atomic_u##bits v;                                                      \
    asm volatile("ld.acquire." #scope ".u" #bits " %0, [%1];"                 \
                 : "=" cons(v)                                                \
                 : "l"(p)                                                     \
                 : "memory");                                                 \
    return v
#define RK_ATOMIC__ST_REL(bits, scope, cons)                                  \
    asm volatile("st.release." #scope ".u" #bits " [%0], %1;"                 \
                 :                                                            \
                 : "l"(p), cons(v)                                            \
                 : "memory")
#else /* before sm_70: a volatile access and a fence at the scope */
#define RK_ATOMIC__LD_ACQ(bits, scope, cons)                                  \
    rk_atomic_u##bits v = *(const volatile rk_atomic_u##bits *)p;             \
    rk_atomic_fence_##scope(); /* later accesses stay after the load */       \
    return v
#define RK_ATOMIC__ST_REL(bits, scope, cons)                                  \
    rk_atomic_fence_##scope(); /* earlier accesses complete first */          \
    *(volatile rk_atomic_u##bits *)p = v
#endif
#elif defined(RK_ATOMIC_HOST_C)
#define RK_ATOMIC__INIT(bits) atomic_init(p, v)
#define RK_ATOMIC__LD_RLX(bits)                                               \
    return atomic_load_explicit(p, memory_order_relaxed)
#define RK_ATOMIC__ST_RLX(bits)                                               \
    atomic_store_explicit(p, v, memory_order_relaxed)
#define RK_ATOMIC__LD_ACQ(bits, scope, cons)                                  \
    return atomic_load_explicit(p, memory_order_acquire)
#define RK_ATOMIC__ST_REL(bits, scope, cons)                                  \
    atomic_store_explicit(p, v, memory_order_release)
#else
#define RK_ATOMIC__INIT(bits)   *p = v
#define RK_ATOMIC__LD_RLX(bits) return __atomic_load_n(p, __ATOMIC_RELAXED)
#define RK_ATOMIC__ST_RLX(bits) __atomic_store_n(p, v, __ATOMIC_RELAXED)
#define RK_ATOMIC__LD_ACQ(bits, scope, cons)                                  \
    return __atomic_load_n(p, __ATOMIC_ACQUIRE)
#define RK_ATOMIC__ST_REL(bits, scope, cons)                                  \
    __atomic_store_n(p, v, __ATOMIC_RELEASE)
#endif

#define RK_ATOMIC__RELAXED(bits)                                              \
    RK_ATOMIC_FN rk_atomic_u##bits rk_atomic_load_relaxed_u##bits(            \
        const RK_ATOMIC_U##bits *p)                                           \
    {                                                                         \
        RK_ATOMIC__LD_RLX(bits);                                              \
    }                                                                         \
    RK_ATOMIC_FN void rk_atomic_store_relaxed_u##bits(                        \
        RK_ATOMIC_U##bits *p, rk_atomic_u##bits v)                            \
    {                                                                         \
        RK_ATOMIC__ST_RLX(bits);                                              \
    }
#define RK_ATOMIC__ORDERED(bits, scope, cons)                                 \
    RK_ATOMIC_FN rk_atomic_u##bits rk_atomic_load_acquire_##scope##_u##bits(  \
        const RK_ATOMIC_U##bits *p)                                           \
    {                                                                         \
        RK_ATOMIC__LD_ACQ(bits, scope, cons);                                 \
    }                                                                         \
    RK_ATOMIC_FN void rk_atomic_store_release_##scope##_u##bits(              \
        RK_ATOMIC_U##bits *p, rk_atomic_u##bits v)                            \
    {                                                                         \
        RK_ATOMIC__ST_REL(bits, scope, cons);                                 \
    }

/** Initialises a 32-bit shared word before any other thread or side can
 * see it (atomic_init in host C, a plain store elsewhere). */
RK_ATOMIC_FN void
rk_atomic_init_u32(RK_ATOMIC_U32 *p, rk_atomic_u32 v)
{
    RK_ATOMIC__INIT(32);
}

/** Initialises a 64-bit shared word (see rk_atomic_init_u32). */
RK_ATOMIC_FN void
rk_atomic_init_u64(RK_ATOMIC_U64 *p, rk_atomic_u64 v)
{
    RK_ATOMIC__INIT(64);
}

/* rk_atomic_{load,store}_relaxed_u32 and _u64: no ordering, for a word's
 * single writer or for statistics. */
/** \fn rk_atomic_u32 rk_atomic_load_relaxed_u32(const rk_atomic_u32 *p)
 * Loads *p with no ordering (the word's own writer, or statistics). */
/** \fn void rk_atomic_store_relaxed_u32(rk_atomic_u32 *p, rk_atomic_u32 v)
 * Stores v to *p with no ordering (a word only the caller writes). */
/** \fn rk_atomic_u64 rk_atomic_load_relaxed_u64(const rk_atomic_u64 *p)
 * Loads *p with no ordering (the word's own writer, or statistics). */
/** \fn void rk_atomic_store_relaxed_u64(rk_atomic_u64 *p, rk_atomic_u64 v)
 * Stores v to *p with no ordering (a word only the caller writes). */
RK_ATOMIC__RELAXED(32)
RK_ATOMIC__RELAXED(64)

/* rk_atomic_load_acquire_{sys,gpu}_u{32,64}: what the other side wrote
 * before its release store of *p is visible after the load.
 * rk_atomic_store_release_{sys,gpu}_u{32,64}: the calling thread's earlier
 * reads and writes are ordered before the new value. Each acquire pairs
 * with the release of the same scope by the word's writer. */
/** \fn rk_atomic_u32 rk_atomic_load_acquire_sys_u32(const rk_atomic_u32 *p)
 * Acquire load of *p (the host and a device over PCIe: system scope); pairs
 * with rk_atomic_store_release_sys_u32 by the word's writer. */
/** \fn void rk_atomic_store_release_sys_u32(rk_atomic_u32 *p, rk_atomic_u32 v)
 * Release store of v to *p (the host and a device over PCIe: system scope);
 * pairs with rk_atomic_load_acquire_sys_u32 by the reader. */
/** \fn rk_atomic_u64 rk_atomic_load_acquire_sys_u64(const rk_atomic_u64 *p)
 * Acquire load of *p (the host and a device over PCIe: system scope); pairs
 * with rk_atomic_store_release_sys_u64 by the word's writer. */
/** \fn void rk_atomic_store_release_sys_u64(rk_atomic_u64 *p, rk_atomic_u64 v)
 * Release store of v to *p (the host and a device over PCIe: system scope);
 * pairs with rk_atomic_load_acquire_sys_u64 by the reader. */
/** \fn rk_atomic_u32 rk_atomic_load_acquire_gpu_u32(const rk_atomic_u32 *p)
 * Acquire load of *p (kernels of one GPU: device scope); pairs with
 * rk_atomic_store_release_gpu_u32 by the word's writer. */
/** \fn void rk_atomic_store_release_gpu_u32(rk_atomic_u32 *p, rk_atomic_u32 v)
 * Release store of v to *p (kernels of one GPU: device scope); pairs with
 * rk_atomic_load_acquire_gpu_u32 by the reader. */
/** \fn rk_atomic_u64 rk_atomic_load_acquire_gpu_u64(const rk_atomic_u64 *p)
 * Acquire load of *p (kernels of one GPU: device scope); pairs with
 * rk_atomic_store_release_gpu_u64 by the word's writer. */
/** \fn void rk_atomic_store_release_gpu_u64(rk_atomic_u64 *p, rk_atomic_u64 v)
 * Release store of v to *p (kernels of one GPU: device scope); pairs with
 * rk_atomic_load_acquire_gpu_u64 by the reader. */
RK_ATOMIC__ORDERED(32, sys, "r")
RK_ATOMIC__ORDERED(64, sys, "l")
RK_ATOMIC__ORDERED(32, gpu, "r")
RK_ATOMIC__ORDERED(64, gpu, "l")

/* rk_atomic_{load,store}_pair_relaxed_sys_u64: two adjacent 64-bit words
 * (p 16-byte aligned) in one access where the machine has one: a 16-byte
 * vector load or store at system scope on the device
 * (ld/st.relaxed.sys.v2.u64, each 64-bit element single-copy atomic, no
 * order between the two), two relaxed accesses elsewhere. The LL lanes
 * (ring_ll.h) move messages with them. */
/** Loads p[0] and p[1] (relaxed, system scope; one 16-byte load on the
 * device). */
RK_ATOMIC_FN void
rk_atomic_load_pair_relaxed_sys_u64(
    const RK_ATOMIC_U64 *p, rk_atomic_u64 *a, rk_atomic_u64 *b)
{
#if defined(__CUDA_ARCH__)
    rk_atomic_u64 x, y;
    asm volatile("ld.relaxed.sys.v2.u64 {%0, %1}, [%2];"
                 : "=l"(x), "=l"(y)
                 : "l"(p)
                 : "memory");
    *a = x;
    *b = y;
#else
    /* Host builds: acquire (a plain move on x86), so that the C11 model
     * and TSan see what an LL message hands over (ring_ll.h). */
    *a = rk_atomic_load_acquire_sys_u64(p);
    *b = rk_atomic_load_acquire_sys_u64(p + 1);
#endif
}

/** Stores a to p[0] and b to p[1] (relaxed, system scope; one 16-byte
 * store on the device). */
RK_ATOMIC_FN void
rk_atomic_store_pair_relaxed_sys_u64(
    RK_ATOMIC_U64 *p, rk_atomic_u64 a, rk_atomic_u64 b)
{
#if defined(__CUDA_ARCH__)
    asm volatile("st.relaxed.sys.v2.u64 [%0], {%1, %2};"
                 :
                 : "l"(p), "l"(a), "l"(b)
                 : "memory");
#else
    /* Host builds: release (a plain move on x86), as the load above. */
    rk_atomic_store_release_sys_u64(p, a);
    rk_atomic_store_release_sys_u64(p + 1, b);
#endif
}

#undef RK_ATOMIC__FENCE
#undef RK_ATOMIC__BARRIER
#undef RK_ATOMIC__INIT
#undef RK_ATOMIC__LD_RLX
#undef RK_ATOMIC__ST_RLX
#undef RK_ATOMIC__LD_ACQ
#undef RK_ATOMIC__ST_REL
#undef RK_ATOMIC__RELAXED
#undef RK_ATOMIC__ORDERED

#endif /* RINGKERNEL_RK_ATOMIC_H */
