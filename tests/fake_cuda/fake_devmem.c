/*
 * tests/fake_cuda/fake_devmem.c - the stand-in driver's device memory and
 * mapped pinned memory (test-only; see fake_cuda.c).
 *
 *   - device memory (cuMemAlloc) is NOT host memory: it lives in an arena
 *     mapped twice, once at the addresses cuMemAlloc returns, which are
 *     PROT_NONE whenever no grid runs (a host read or write of a device
 *     pointer crashes, as on a GPU), and once as a private shadow that
 *     cuMemcpy* and cuMemsetD8 translate to;
 *   - mapped pinned memory (cuMemHostAlloc) is the process's memory, and
 *     its device address is the host address, as with unified addressing;
 *   - cuMemFree and cuMemFreeHost wait until no grid runs on any device.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake_cuda.h"

/*
 * Device memory: one arena of a memfd mapped twice. `dev` is what
 * cuMemAlloc hands out (PROT_NONE while no grid runs, so the host cannot
 * read a device pointer); `shadow` is the stand-in's own view, always
 * readable, used by the copies. Allocation is first fit over a list of
 * extents sorted by offset; a freed extent's pages are given back.
 */
#define ARENA_SIZE ((size_t)1 << 30)

typedef struct extent {
    struct extent *next;
    size_t off, len;
} extent;

static pthread_once_t arena_once = PTHREAD_ONCE_INIT;
static int arena_fd = -1;
static unsigned char *arena_dev, *arena_shadow;
static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
static extent *arena_used; /* under arena_lock */

static void
arena_init(void)
{
    void *d, *s;
    int fd = memfd_create("fake_cuda_device_memory", MFD_CLOEXEC);

    if (fd < 0 || ftruncate(fd, (off_t)ARENA_SIZE) != 0)
        return;
    d = mmap(NULL, ARENA_SIZE, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    s = mmap(NULL, ARENA_SIZE, PROT_READ | PROT_WRITE,
        MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (d == MAP_FAILED || s == MAP_FAILED) {
        if (d != MAP_FAILED)
            munmap(d, ARENA_SIZE);
        if (s != MAP_FAILED)
            munmap(s, ARENA_SIZE);
        close(fd);
        return;
    }
    arena_fd = fd;
    arena_dev = d;
    arena_shadow = s;
}

void
fake_arena_protect(int device_may_run)
{
    if (arena_dev != NULL)
        (void)mprotect(arena_dev, ARENA_SIZE,
            device_may_run ? PROT_READ | PROT_WRITE : PROT_NONE);
}

/* The stand-in's view of device address p for n bytes: the shadow for
 * the arena, the address itself for mapped host memory; NULL if a range
 * starts in the arena and leaves it. */
static void *
view(CUdeviceptr p, size_t n)
{
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)arena_dev;
    if (arena_dev == NULL || a < lo || a >= lo + ARENA_SIZE)
        return (void *)a;
    if (n > ARENA_SIZE - (a - lo))
        return NULL;
    return arena_shadow + (a - lo);
}

EXPORT CUresult
cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    extent *e, **at, *prev = NULL;
    size_t off = 0;

    NEED_CTX();
    if (n == 0)
        return E_INVALID_VALUE;
    pthread_once(&arena_once, arena_init);
    if (arena_dev == NULL)
        return E_OUT_OF_MEMORY;
    n = (n + 255) & ~(size_t)255;
    if ((e = malloc(sizeof(*e))) == NULL)
        return E_OUT_OF_MEMORY;
    pthread_mutex_lock(&arena_lock);
    /* First gap of n bytes; offset 0 is never handed out (no NULL). */
    off = 256;
    for (at = &arena_used; *at != NULL; prev = *at, at = &(*at)->next) {
        if ((*at)->off >= off + n)
            break;
        off = (*at)->off + (*at)->len;
    }
    (void)prev;
    if (off + n > ARENA_SIZE) {
        pthread_mutex_unlock(&arena_lock);
        free(e);
        return E_OUT_OF_MEMORY;
    }
    e->off = off;
    e->len = n;
    e->next = *at;
    *at = e;
    pthread_mutex_unlock(&arena_lock);
    *p = (CUdeviceptr)(uintptr_t)(arena_dev + off);
    return OK;
}

EXPORT CUresult
cuMemFree_v2(CUdeviceptr p)
{
    extent **at, *e;
    CUresult r;

    NEED_CTX_ONLY();
    if ((r = fake_wait_idle("cuMemFree")) != OK && r != fake_sticky())
        return r;
    if (p != 0 && fake_managed_free(p))
        return OK;
    if (p == 0 || arena_dev == NULL)
        return E_INVALID_VALUE;
    pthread_mutex_lock(&arena_lock);
    for (at = &arena_used; *at != NULL; at = &(*at)->next)
        if ((uintptr_t)(arena_dev + (*at)->off) == (uintptr_t)p)
            break;
    e = *at;
    if (e != NULL)
        *at = e->next;
    pthread_mutex_unlock(&arena_lock);
    if (e == NULL)
        return E_INVALID_VALUE; /* not a device allocation */
    (void)fallocate(arena_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
        (off_t)e->off, (off_t)e->len);
    free(e);
    return r; /* a lost context's error, once released */
}

EXPORT CUresult
cuMemHostAlloc(void **p, size_t n, unsigned flags)
{
    NEED_CTX();
    if (n == 0 || (flags & ~0x7u) != 0)
        return E_INVALID_VALUE;
    *p = aligned_alloc(4096, (n + 4095) & ~(size_t)4095);
    if (*p == NULL)
        return E_OUT_OF_MEMORY;
    memset(*p, 0, n);
    return OK;
}

EXPORT CUresult
cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned flags)
{
    NEED_CTX();
    if (flags != 0 || p == NULL)
        return E_INVALID_VALUE;
    *d = (CUdeviceptr)(uintptr_t)p;
    return OK;
}

EXPORT CUresult
cuMemFreeHost(void *p)
{
    CUresult r;
    NEED_CTX_ONLY();
    if ((r = fake_wait_idle("cuMemFreeHost")) != OK && r != fake_sticky())
        return r;
    free(p);
    return r; /* a lost context's error, once released */
}

EXPORT CUresult
cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n)
{
    void *v = view(d, n);
    NEED_CTX();
    if (v == NULL)
        return E_INVALID_VALUE;
    memcpy(v, s, n);
    return OK;
}

EXPORT CUresult
cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n)
{
    void *v = view(s, n);
    NEED_CTX();
    if (v == NULL)
        return E_INVALID_VALUE;
    memcpy(d, v, n);
    return OK;
}

EXPORT CUresult
cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, void *st)
{
    (void)st;
    return cuMemcpyHtoD_v2(d, s, n);
}

EXPORT CUresult
cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, void *st)
{
    (void)st;
    return cuMemcpyDtoH_v2(d, s, n);
}

EXPORT CUresult
cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n)
{
    void *p = view(d, n);
    NEED_CTX();
    if (p == NULL)
        return E_INVALID_VALUE;
    memset(p, v, n);
    return OK;
}
