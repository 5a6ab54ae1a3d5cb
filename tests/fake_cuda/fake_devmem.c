/*
 * tests/fake_cuda/fake_devmem.c - the stand-in driver's device memory and
 * mapped pinned memory, and peer access between devices (test-only; see
 * fake_cuda.c).
 *
 *   - device memory (cuMemAlloc) is NOT host memory: it lives in an arena
 *     mapped twice, once at the addresses cuMemAlloc returns, which are
 *     PROT_NONE whenever no grid runs (a host read or write of a device
 *     pointer crashes, as on a GPU), and once as a private shadow that
 *     cuMemcpy* and cuMemsetD8 translate to;
 *   - each device has its own region of the arena (the current context's
 *     device at cuMemAlloc). A region is readable while a grid runs on its
 *     device, or on a device that enabled peer access to it; otherwise a
 *     grid's access to it crashes, as a GPU's access to a peer it may not
 *     reach faults. (Protection is per process, not per grid: while grids
 *     run on both devices each can reach the other's memory unnoticed.)
 *   - cuDeviceCanAccessPeer says FAKE_CUDA_PEER (default 0: no peer
 *     access; 1: every pair of distinct devices); cuCtxEnablePeerAccess
 *     fails with CUDA_ERROR_PEER_ACCESS_UNSUPPORTED where it says 0, else
 *     with FAKE_CUDA_PEER_FAIL's code if set (a driver that refuses: e.g.
 *     711, CUDA_ERROR_TOO_MANY_PEERS), else with
 *     CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED on a second call for a pair;
 *     fake_cuda_peer_query counts the calls;
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
 * cuMemAlloc hands out (PROT_NONE while no grid may reach it, so the host
 * cannot read a device pointer); `shadow` is the stand-in's own view,
 * always readable, used by the copies. Device d owns the REGION bytes at
 * d * REGION. Allocation is first fit in the device's region over a list
 * of extents sorted by offset; a freed extent's pages are given back.
 */
#define REGION     ((size_t)1 << 30)
#define ARENA_SIZE (REGION * FAKE_MAX_DEVICES)

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

/* Peer access: peer_on[a][b] once device a's context enabled access to
 * device b's memory. Under peer_lock, which fake_arena_protect takes
 * under the launch code's lock (that order only). */
static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char peer_on[FAKE_MAX_DEVICES][FAKE_MAX_DEVICES];
static unsigned peer_calls, peer_again; /* enables asked; already on */
/* Regions made readable (the launch code's lock held). */
static unsigned char readable[FAKE_MAX_DEVICES];

void
fake_arena_protect(const int *grids_on)
{
    pthread_mutex_lock(&peer_lock);
    for (int d = 0; d < FAKE_MAX_DEVICES; d++) {
        int want = grids_on[d] != 0;
        for (int a = 0; a < FAKE_MAX_DEVICES && !want; a++)
            want = grids_on[a] != 0 && peer_on[a][d];
        if (arena_dev != NULL && want != readable[d]) {
            (void)mprotect(arena_dev + (size_t)d * REGION, REGION,
                want ? PROT_READ | PROT_WRITE : PROT_NONE);
            readable[d] = (unsigned char)want;
        }
    }
    pthread_mutex_unlock(&peer_lock);
}

static int
can_peer(CUdevice a, CUdevice b)
{
    return a != b && env_int("FAKE_CUDA_PEER", 0) != 0;
}

EXPORT CUresult
cuDeviceCanAccessPeer(int *can, CUdevice a, CUdevice b)
{
    if (can == NULL || a < 0 || b < 0 || a >= fake_devices()
        || b >= fake_devices())
        return E_INVALID_VALUE;
    *can = can_peer(a, b);
    return OK;
}

EXPORT CUresult
cuCtxEnablePeerAccess(void *peer_ctx, unsigned flags)
{
    int a = fake_cur_dev(), b = fake_ctx_dev(peer_ctx), fail;
    CUresult r = OK;

    NEED_CTX();
    if (flags != 0)
        return E_INVALID_VALUE;
    if (b < 0)
        return E_INVALID_CONTEXT;
    if (a == b)
        return E_INVALID_DEVICE;
    pthread_mutex_lock(&peer_lock);
    peer_calls++;
    fail = env_int("FAKE_CUDA_PEER_FAIL", 0);
    if (!can_peer(a, b))
        r = E_PEER_UNSUPPORTED;
    else if (fail != 0)
        r = fail; /* a driver that refuses, whatever came before */
    else if (peer_on[a][b])
        r = E_PEER_ALREADY_ENABLED;
    else
        peer_on[a][b] = 1;
    if (r == E_PEER_ALREADY_ENABLED)
        peer_again++;
    pthread_mutex_unlock(&peer_lock);
    if (r == OK)
        fake_reprotect(); /* a's running grids reach b's memory now */
    return r;
}

/* Test-only query (not a driver entry point): 1 if device a enabled
 * access to device b; *calls the cuCtxEnablePeerAccess calls so far and
 * *again those that found access already enabled. */
EXPORT int
fake_cuda_peer_query(int a, int b, unsigned *calls, unsigned *again)
{
    int on;
    pthread_mutex_lock(&peer_lock);
    on = a >= 0 && b >= 0 && a < FAKE_MAX_DEVICES && b < FAKE_MAX_DEVICES
        && peer_on[a][b];
    *calls = peer_calls;
    *again = peer_again;
    pthread_mutex_unlock(&peer_lock);
    return on;
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
    extent *e, **at;
    size_t off, lo, hi;
    int d = fake_cur_dev();

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
    /* First gap of n bytes in the device's region; a region's offset 0 is
     * never handed out (no NULL, and no range that starts in another
     * device's region). */
    lo = (size_t)d * REGION + 256;
    hi = ((size_t)d + 1) * REGION;
    off = lo;
    for (at = &arena_used; *at != NULL; at = &(*at)->next) {
        if ((*at)->off + (*at)->len <= off)
            continue; /* before the region */
        if ((*at)->off >= off + n)
            break;
        off = (*at)->off + (*at)->len;
    }
    if (off + n > hi) {
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

/* A copy between host memory h and device address p, either way. */
static CUresult
copy(CUdeviceptr p, void *h, size_t n, int to_device)
{
    void *v = view(p, n);
    NEED_CTX();
    if (v == NULL)
        return E_INVALID_VALUE;
    if (to_device)
        memcpy(v, h, n);
    else
        memcpy(h, v, n);
    return OK;
}

EXPORT CUresult
cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n)
{
    return copy(d, (void *)(uintptr_t)s, n, 1);
}

EXPORT CUresult
cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n)
{
    return copy(s, d, n, 0);
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
