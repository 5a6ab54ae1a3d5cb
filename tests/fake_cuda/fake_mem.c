/*
 * tests/fake_cuda/fake_mem.c - the stand-in driver's managed memory,
 * prefetch and advice and free memory (test-only; see
 * fake_cuda.c).
 *
 *   - cuMemAllocManaged: host memory (readable and writable by the host,
 *     as unified memory is), counted against the free memory;
 *   - cuMemGetInfo: FAKE_CUDA_FREE_BYTES (default 512 MiB, read at every
 *     call) less the managed memory held, of a 1 GiB device;
 *   - a managed allocation larger than what cuMemGetInfo says is free
 *     succeeds, as the real driver's oversubscription does (and then can
 *     hang the GPU): fake_cuda_managed_query counts them, so a test shows
 *     the library never asked;
 *   - cuMemPrefetchAsync and cuMemAdvise check their range and device and
 *     record the last call (fake_cuda_managed_query).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

typedef struct managed {
    struct managed *next;
    unsigned char *p;
    size_t n;
} managed;

static pthread_mutex_t mlock = PTHREAD_MUTEX_INITIALIZER;
static managed *mlist;    /* under mlock */
static size_t mheld;      /* bytes of managed memory held */
static unsigned overasks; /* allocations beyond what was free */
static unsigned prefetches;
static int last_prefetch_dev = -2, last_advice, last_advice_dev = -2;

static size_t
free_bytes(void)
{
    const char *s = getenv("FAKE_CUDA_FREE_BYTES");
    size_t f = s != NULL && s[0] != '\0' ? (size_t)strtoull(s, NULL, 10)
                                         : (size_t)1 << 29;
    return f > mheld ? f - mheld : 0;
}

EXPORT CUresult
cuMemGetInfo_v2(size_t *free_b, size_t *total)
{
    NEED_CTX_ONLY();
    pthread_mutex_lock(&mlock);
    *free_b = free_bytes();
    pthread_mutex_unlock(&mlock);
    *total = (size_t)1 << 30;
    return OK;
}

EXPORT CUresult
cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned flags)
{
    managed *m;

    NEED_CTX_ONLY();
    if (n == 0 || (flags != 1 && flags != 2)) /* ATTACH_GLOBAL or _HOST */
        return E_INVALID_VALUE;
    if ((m = malloc(sizeof(*m))) == NULL)
        return E_OUT_OF_MEMORY;
    /* Not zeroed, as the driver's: the library zero-fills first use. */
    m->p = aligned_alloc(4096, (n + 4095) & ~(size_t)4095);
    if (m->p == NULL) {
        free(m);
        return E_OUT_OF_MEMORY;
    }
    m->n = n;
    pthread_mutex_lock(&mlock);
    if (n > free_bytes())
        overasks++;
    mheld += n;
    m->next = mlist;
    mlist = m;
    pthread_mutex_unlock(&mlock);
    *p = (CUdeviceptr)(uintptr_t)m->p;
    return OK;
}

int
fake_managed_free(CUdeviceptr p)
{
    managed **at, *m = NULL;

    pthread_mutex_lock(&mlock);
    for (at = &mlist; *at != NULL; at = &(*at)->next)
        if ((uintptr_t)(*at)->p == (uintptr_t)p) {
            m = *at;
            *at = m->next;
            mheld -= m->n;
            break;
        }
    pthread_mutex_unlock(&mlock);
    if (m == NULL)
        return 0;
    free(m->p);
    free(m);
    return 1;
}

/* 1 when [p, p + n) lies inside one managed allocation. mlock held. */
static int
is_managed(CUdeviceptr p, size_t n)
{
    for (managed *m = mlist; m != NULL; m = m->next)
        if ((uintptr_t)p >= (uintptr_t)m->p
            && n <= m->n - ((uintptr_t)p - (uintptr_t)m->p))
            return 1;
    return 0;
}

EXPORT CUresult
cuMemPrefetchAsync(CUdeviceptr p, size_t n, CUdevice dev, void *stream)
{
    CUresult r = OK;

    (void)stream;
    NEED_CTX_ONLY();
    if (n == 0 || (dev != -1 && (dev < 0 || dev >= fake_devices())))
        return E_INVALID_VALUE;
    pthread_mutex_lock(&mlock);
    if (!is_managed(p, n)) {
        r = E_INVALID_VALUE;
    } else {
        prefetches++;
        last_prefetch_dev = dev;
    }
    pthread_mutex_unlock(&mlock);
    return r;
}

EXPORT CUresult
cuMemAdvise(CUdeviceptr p, size_t n, int advice, CUdevice dev)
{
    CUresult r = OK;

    NEED_CTX_ONLY();
    if (n == 0 || advice < 1 || advice > 6
        || (dev != -1 && (dev < 0 || dev >= fake_devices())))
        return E_INVALID_VALUE;
    pthread_mutex_lock(&mlock);
    if (!is_managed(p, n)) {
        r = E_INVALID_VALUE;
    } else {
        last_advice = advice;
        last_advice_dev = dev;
    }
    pthread_mutex_unlock(&mlock);
    return r;
}

/* Test-only query (not a driver entry point). what 0: managed
 * allocations beyond what was free; 1: prefetches made, *dev the last
 * one's destination; 2: the last advice (0: none), *dev its device.
 * Device -1 is the host, -2 none yet. */
EXPORT unsigned
fake_cuda_managed_query(int what, int *dev)
{
    unsigned n;
    pthread_mutex_lock(&mlock);
    n = what == 0 ? overasks : what == 1 ? prefetches : (unsigned)last_advice;
    *dev = what == 1 ? last_prefetch_dev : last_advice_dev;
    pthread_mutex_unlock(&mlock);
    return n;
}
