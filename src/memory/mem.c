/* Raw allocation and copies per memory space (see mem.h). */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "device/cuda_driver.h"
#include "memory/mem.h"

/* n <= PTRDIFF_MAX and align <= 256, so the sum cannot wrap. */
static size_t
round_up(size_t n, size_t align)
{
    return (n + align - 1) & ~(align - 1);
}

int
rk__mem_alloc(rk__mem_space space, int ordinal, const rk_allocator *a,
    size_t size, size_t align, void **out)
{
    const struct rk__cuda_driver *drv;
    int rc;

    RK_ASSERT(size > 0 && rk__is_pow2(align));
    /* No object may be larger than PTRDIFF_MAX, and the check also keeps
     * round_up() below from wrapping to a tiny size. */
    if (size > PTRDIFF_MAX)
        return rk__fail(RK_ENOMEM,
            "allocation of %zu bytes is larger than "
            "any object can be",
            size);
    if (space == RK__MEM_HOST) {
        void *p;
        if (a != NULL && a->alloc != NULL)
            p = a->alloc(a->ctx, size, align);
        else /* aligned_alloc wants a multiple of the alignment */
            p = aligned_alloc(align, round_up(size, align));
        if (p == NULL)
            return rk__fail(RK_ENOMEM, "host allocation of %zu bytes", size);
        *out = p;
        return RK_OK;
    }
    rc = rk__cuda_enter(ordinal, &drv);
    if (rc != RK_OK)
        return rc;
    if (space == RK__MEM_PINNED) {
        return rk__cuda_check(
            drv->cuMemHostAlloc(out, size,
                RK__CU_MEMHOSTALLOC_PORTABLE | RK__CU_MEMHOSTALLOC_DEVICEMAP),
            "cuMemHostAlloc");
    } else if (space == RK__MEM_MANAGED) {
        rk__cu_dptr d = 0;
        /* Checked again here, not only when the buffer was made: what is
         * free changes. */
        if ((rc = rk__mem_managed_fits(ordinal, size, "managed allocation"))
            != RK_OK)
            return rc;
        rc = rk__cuda_check(
            drv->cuMemAllocManaged(&d, size, RK__CU_MEM_ATTACH_GLOBAL),
            "cuMemAllocManaged");
        if (rc == RK_OK)
            *out = (void *)(uintptr_t)d;
        return rc;
    } else {
        rk__cu_dptr d = 0;
        rc = rk__cuda_check(drv->cuMemAlloc(&d, size), "cuMemAlloc");
        if (rc == RK_OK)
            *out = (void *)(uintptr_t)d;
        return rc;
    }
}

/*
 * Persistent kernels and frees. CUDA's frees (cuMemFree, cuMemFreeHost)
 * wait for the kernels running on the device, and a persistent kernel
 * does not end by itself: a free while one is resident may never return.
 * So while any is (rk__mem_resident), pinned and device memory released
 * here waits in `graves` and is freed when the last one has returned.
 * Frees run under res_lock, so a kernel counted in after the check cannot
 * overtake a free already decided.
 */
typedef struct grave {
    struct grave *next;
    rk__mem_space space;
    int ordinal;
    void *ptr;
} grave;

static pthread_mutex_t res_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t resident; /* under res_lock */
static grave *graves;     /* under res_lock */

/* res_lock held. */
static void
cuda_free(rk__mem_space space, int ordinal, void *ptr)
{
    const struct rk__cuda_driver *drv;

    /* Memory of this space was only ever obtained through a working
     * driver, so entering the context cannot fail for lack of one. */
    if (rk__cuda_enter(ordinal, &drv) != RK_OK)
        return;
    if (space == RK__MEM_PINNED)
        (void)drv->cuMemFreeHost(ptr);
    else /* device and managed memory */
        (void)drv->cuMemFree((rk__cu_dptr)(uintptr_t)ptr);
}

void
rk__mem_resident(int delta)
{
    pthread_mutex_lock(&res_lock);
    RK_ASSERT(delta > 0 || resident >= (uint32_t)-delta);
    resident = (uint32_t)((int64_t)resident + delta);
    while (resident == 0 && graves != NULL) {
        grave *g = graves;
        graves = g->next;
        cuda_free(g->space, g->ordinal, g->ptr);
        free(g);
    }
    pthread_mutex_unlock(&res_lock);
}

size_t
rk__mem_deferred(void)
{
    size_t n = 0;
    pthread_mutex_lock(&res_lock);
    for (grave *g = graves; g != NULL; g = g->next)
        n++;
    pthread_mutex_unlock(&res_lock);
    return n;
}

void
rk__mem_release(rk__mem_space space, int ordinal, const rk_allocator *a,
    void *ptr, size_t size)
{
    grave *g;

    if (ptr == NULL)
        return;
    if (space == RK__MEM_HOST) {
        if (a != NULL && a->free != NULL)
            a->free(a->ctx, ptr, size);
        else
            free(ptr);
        return;
    }
    pthread_mutex_lock(&res_lock);
    if (resident == 0) {
        cuda_free(space, ordinal, ptr);
    } else if ((g = malloc(sizeof(*g))) != NULL) {
        *g = (grave) { graves, space, ordinal, ptr };
        graves = g;
    } /* else leaked: better than a free that may never return */
    pthread_mutex_unlock(&res_lock);
}

int
rk__mem_copy(int ordinal, void *dst, const void *src, size_t n, void *stream,
    bool to_dev)
{
    const struct rk__cuda_driver *drv;
    rk__cu_stream st = (rk__cu_stream)stream;
    int rc = rk__cuda_enter(ordinal, &drv);

    if (rc != RK_OK)
        return rc;
    if (to_dev) {
        rk__cu_dptr d = (rk__cu_dptr)(uintptr_t)dst;
        return stream == NULL
            ? rk__cuda_check(drv->cuMemcpyHtoD(d, src, n), "cuMemcpyHtoD")
            : rk__cuda_check(drv->cuMemcpyHtoDAsync(d, src, n, st),
                  "cuMemcpyHtoDAsync");
    }
    rk__cu_dptr s = (rk__cu_dptr)(uintptr_t)src;
    return stream == NULL
        ? rk__cuda_check(drv->cuMemcpyDtoH(dst, s, n), "cuMemcpyDtoH")
        : rk__cuda_check(
              drv->cuMemcpyDtoHAsync(dst, s, n, st), "cuMemcpyDtoHAsync");
}

int
rk__mem_zero_device(int ordinal, void *dst, size_t n)
{
    const struct rk__cuda_driver *drv;
    int rc = rk__cuda_enter(ordinal, &drv);

    if (rc != RK_OK)
        return rc;
    return rk__cuda_check(
        drv->cuMemsetD8((rk__cu_dptr)(uintptr_t)dst, 0, n), "cuMemsetD8");
}

int
rk__mem_managed_fits(int ordinal, size_t size, const char *what)
{
    const struct rk__cuda_driver *drv;
    rk__cu_device dev;
    size_t avail = 0, total = 0;
    int managed = 0, rc = rk__cuda_enter(ordinal, &drv);

    if (rc != RK_OK)
        return rc;
    if (drv->cuMemAllocManaged == NULL
        || drv->cuDeviceGet(&dev, ordinal) != RK__CUDA_SUCCESS
        || drv->cuDeviceGetAttribute(
               &managed, RK__CU_ATTR_MANAGED_MEMORY, dev)
            != RK__CUDA_SUCCESS
        || managed == 0)
        return rk__fail(RK_ENOTSUP,
            "%s: CUDA device %d (or its driver) has no managed memory",
            what, ordinal);
    if ((rc = rk__cuda_check(drv->cuMemGetInfo(&avail, &total),
             "cuMemGetInfo"))
        != RK_OK)
        return rc;
    if (size > avail)
        return rk__fail(RK_ENOMEM,
            "%s: %zu bytes of managed memory asked for, but CUDA device %d "
            "has only %zu bytes free (of %zu); asking the driver for more "
            "than is free can hang the GPU, so it is refused",
            what, size, ordinal, avail, total);
    return RK_OK;
}

int
rk__mem_hint(int ordinal, void *ptr, size_t n, int advice, int host,
    void *stream)
{
    const struct rk__cuda_driver *drv;
    rk__cu_dptr p = (rk__cu_dptr)(uintptr_t)ptr;
    rk__cu_device to = host ? RK__CU_DEVICE_CPU : ordinal;
    rk__cu_memloc loc = { host ? 2 : 1, host ? 0 : ordinal };
    rk__cu_stream st = (rk__cu_stream)stream;
    int rc = rk__cuda_enter(ordinal, &drv);

    if (rc != RK_OK)
        return rc;
    /* The CUDA 8 calls where the driver keeps them, else CUDA 12.2's. */
    if (advice == 0 && drv->cuMemPrefetchAsync != NULL)
        return rk__cuda_check(
            drv->cuMemPrefetchAsync(p, n, to, st), "cuMemPrefetchAsync");
    if (advice == 0 && drv->cuMemPrefetchAsync_v2 != NULL)
        return rk__cuda_check(drv->cuMemPrefetchAsync_v2(p, n, loc, 0, st),
            "cuMemPrefetchAsync_v2");
    if (advice != 0 && drv->cuMemAdvise != NULL)
        return rk__cuda_check(
            drv->cuMemAdvise(p, n, advice, to), "cuMemAdvise");
    if (advice != 0 && drv->cuMemAdvise_v2 != NULL)
        return rk__cuda_check(
            drv->cuMemAdvise_v2(p, n, advice, loc), "cuMemAdvise_v2");
    return rk__fail(RK_ENOTSUP, "the CUDA driver has no %s",
        advice == 0 ? "cuMemPrefetchAsync" : "cuMemAdvise");
}

/* cuPointerGetAttribute: looked up at each call (a dlsym, beside a
 * launch's cost), since it is not in the driver table, whose entries
 * every driver must have. */
typedef rk__cu_result (*ptr_attr_fn)(void *, int, rk__cu_dptr);

#define RK__CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9

int
rk__mem_device_of(int ordinal, const void *dptr, int *owner)
{
    const struct rk__cuda_driver *drv;
    int dev = -1, rc = rk__cuda_enter(ordinal, &drv);
    ptr_attr_fn attr;
    rk__cu_result r;

    if (rc != RK_OK)
        return rc;
    *(void **)&attr = dlsym(drv->lib, "cuPointerGetAttribute");
    if (attr == NULL)
        return RK_ENOTSUP; /* no detail: the caller goes on unchecked */
    r = attr(&dev, RK__CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        (rk__cu_dptr)(uintptr_t)dptr);
    if (r != RK__CUDA_SUCCESS) {
        char why[200];
        (void)rk__cuda_check(r, "cuPointerGetAttribute");
        snprintf(why, sizeof(why), "%s", rk_errdetail());
        return rk__fail(RK_EINVAL,
            "address %p is not memory the CUDA driver knows (%s)", dptr,
            why);
    }
    *owner = dev;
    return RK_OK;
}

int
rk__mem_stream_sync(int ordinal, uintptr_t stream)
{
    const struct rk__cuda_driver *drv;
    int rc = rk__cuda_enter(ordinal, &drv);

    if (rc != RK_OK)
        return rc;
    /* 1 is the legacy default stream in the CUDA Array Interface and
     * DLPack: the driver's NULL stream. 2 (CU_STREAM_PER_THREAD) and real
     * handles go to the driver as they are. */
    return rk__cuda_check(
        drv->cuStreamSynchronize(
            stream == 1 ? NULL : (rk__cu_stream)(void *)stream),
        "cuStreamSynchronize");
}
