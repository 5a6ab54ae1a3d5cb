/*
 * src/memory/mem.h - raw allocation and copies per memory space.
 *
 * The one place that knows how to obtain and release each kind of memory
 * (host through the allocator hooks, pinned host and device memory through
 * the CUDA driver) and how to copy between host and a CUDA device. Pools
 * and buffers build on it; the CUDA backend can too.
 *
 * Ownership: rk__mem_alloc() gives the caller the block; it goes back
 * through rk__mem_release() with the same space, ordinal, allocator and
 * size.
 */
#ifndef RK_SRC_MEMORY_MEM_H
#define RK_SRC_MEMORY_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringkernel/buffer.h"
#include "ringkernel/pool.h"

typedef enum rk__mem_space {
    RK__MEM_HOST = 0,   /* allocator hooks (default aligned_alloc) */
    RK__MEM_PINNED = 1, /* cuMemHostAlloc(PORTABLE | DEVICEMAP) */
    RK__MEM_DEVICE = 2, /* cuMemAlloc; the pointer is a device address */
    /* cuMemAllocManaged(ATTACH_GLOBAL): one address for host and device;
     * never more than cuMemGetInfo says is free (rk__mem_managed_fits) */
    RK__MEM_MANAGED = 3
} rk__mem_space;

/* Allocates size bytes (> 0) aligned to align (power of two; device and
 * pinned memory are always at least 256-aligned). a may be NULL. */
int rk__mem_alloc(rk__mem_space space, int ordinal, const rk_allocator *a,
    size_t size, size_t align, void **out);

/* Pinned and device memory released while a persistent kernel is
 * resident is not freed then (a CUDA free waits for the running kernels,
 * which may be never): it waits until rk__mem_resident brings the count
 * to zero. Host memory is freed at once. */
void rk__mem_release(rk__mem_space space, int ordinal, const rk_allocator *a,
    void *ptr, size_t size);

/* A backend that runs persistent kernels counts each one in (+1, just
 * before its launch) and out (-1, once it returned); at zero the deferred
 * frees run, on the calling thread. */
void rk__mem_resident(int delta);

/* Frees waiting for the resident kernels to return (tests). */
size_t rk__mem_deferred(void);

/* A copy between host memory and device memory on CUDA device ordinal:
 * to_dev, host src to device dst; else device src to host dst. stream
 * NULL: synchronous; otherwise a CUstream, and the copy is complete once
 * the stream is. */
int rk__mem_copy(int ordinal, void *dst, const void *src, size_t n,
    void *stream, bool to_dev);

static inline int
rk__mem_h2d(int ordinal, void *dst, const void *src, size_t n, void *stream)
{
    return rk__mem_copy(ordinal, dst, src, n, stream, true);
}

static inline int
rk__mem_d2h(int ordinal, void *dst, const void *src, size_t n, void *stream)
{
    return rk__mem_copy(ordinal, dst, src, n, stream, false);
}

/* Managed memory: RK_OK when size bytes of it fit in what device
 * ordinal has free (cuMemGetInfo); else RK_ENOMEM naming both (asking the
 * driver for more than is free can hang the GPU, not only the process),
 * RK_ENOTSUP when the device or driver has no managed memory. what names
 * the caller in the detail. */
int rk__mem_managed_fits(int ordinal, size_t size, const char *what);

/* A managed memory hint on [ptr, ptr + n) of one managed allocation of
 * device ordinal: advice 0, a prefetch to the device (host: to the host)
 * on stream (a CUstream or NULL); else cuMemAdvise's advice (1..6) for
 * the device (host: for the host). RK_ENOTSUP when the driver lacks the
 * call. */
int rk__mem_hint(int ordinal, void *ptr, size_t n, int advice, int host,
    void *stream);

/* The CUDA device whose memory dptr is (cuPointerGetAttribute), in
 * *owner; asked in device ordinal's context. RK_ENOTSUP (no detail) when
 * the driver cannot say, RK_EINVAL when it does not know the address. */
int rk__mem_device_of(int ordinal, const void *dptr, int *owner);

/* Waits for the work queued on stream (a CUstream of device ordinal; 1:
 * the legacy default stream, 2: the per-thread one) to complete. */
int rk__mem_stream_sync(int ordinal, uintptr_t stream);

/* Sets n bytes of device memory to zero (synchronous). */
int rk__mem_zero_device(int ordinal, void *dst, size_t n);

/* White-box access for tests: a buffer's raw host and device pointers
 * (NULL where a side has no memory), without any synchronisation. */
void rk__buffer_sides(const rk_buffer *buf, void **host, void **dev);

#endif /* RK_SRC_MEMORY_MEM_H */
