/*
 * tests/fake_cuda/fake_cuda.c - a test-only stand-in for libcuda.so.
 *
 * It exports every driver entry point ringkernel resolves
 * (src/device/cuda_driver.h's table, plus what the cuda backend adds) so
 * the backend's real host code runs on a machine without a GPU, loaded
 * through RK_CUDA_DRIVER=<this library>. It is never installed and never
 * loaded by default.
 *
 * What it does:
 *   - one device (FAKE_CUDA_DEVICES), compute capability FAKE_CUDA_CC
 *     (default 90), FAKE_CUDA_SMS SMs (default 2) with FAKE_CUDA_BLOCKS_PER_SM
 *     resident blocks each (default 2), the display watchdog attribute from
 *     FAKE_CUDA_EXEC_TIMEOUT; the variables are read at every call;
 *   - host and "device" memory are the process's memory (a mapped pointer's
 *     device address is the host address, as with unified addressing);
 *   - cuModuleLoadData(Ex) accepts only real NVRTC/nvcc output (a CUDA ELF
 *     cubin, or PTX whose .target is not newer than the device) and
 *     cuModuleGetFunction finds an entry only if the image defines it and
 *     the host build of the same kernel source (tests/kernels and
 *     tools/ringkernel/pr_dev.h, compiled into this library as C) exists;
 *   - cuLaunchKernel runs that host build, one CPU thread per block; at
 *     most SMS x BLOCKS_PER_SM blocks are resident at once across the
 *     device and the others wait for a resident block to finish, as on a
 *     GPU (so an over-sized persistent grid hangs here too: the backend's
 *     occupancy check must refuse it first);
 *   - cuLaunchCooperativeKernel refuses a grid that cannot be resident.
 * What it cannot do: the PTX memory model, PCIe ordering, warps, more than
 * one thread per block. Figures measured on it are "cuda_sim", never GPU.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The test kernels' host builds (rk_dev_host_kernel_<name>), and the
 * `ringkernel` command's PageRank kernel (cli_prd_kernel). */
#include "../kernels/test_kernels.cu"
#include "../../tools/ringkernel/pr_dev.h"

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

#define OK                  0
#define E_INVALID_VALUE     1
#define E_OUT_OF_MEMORY     2
#define E_INVALID_IMAGE     200
#define E_NO_BINARY_FOR_GPU 209
#define E_INVALID_PTX       218
#define E_NOT_FOUND         500
#define E_NOT_READY         600
#define E_COOP_TOO_LARGE    720
#define E_INVALID_HANDLE    400

#define EXPORT __attribute__((visibility("default")))

static int
env_int(const char *name, int def)
{
    const char *s = getenv(name);
    return s != NULL && s[0] != '\0' ? atoi(s) : def;
}

static int
resident_limit(void)
{
    return env_int("FAKE_CUDA_SMS", 2) * env_int("FAKE_CUDA_BLOCKS_PER_SM", 2);
}

/* ------------------------------------------------------------ errors */

EXPORT CUresult
cuGetErrorName(CUresult r, const char **s)
{
    switch (r) {
    case OK:
        *s = "CUDA_SUCCESS";
        break;
    case E_INVALID_VALUE:
        *s = "CUDA_ERROR_INVALID_VALUE";
        break;
    case E_OUT_OF_MEMORY:
        *s = "CUDA_ERROR_OUT_OF_MEMORY";
        break;
    case E_INVALID_IMAGE:
        *s = "CUDA_ERROR_INVALID_IMAGE";
        break;
    case E_NO_BINARY_FOR_GPU:
        *s = "CUDA_ERROR_NO_BINARY_FOR_GPU";
        break;
    case E_INVALID_PTX:
        *s = "CUDA_ERROR_INVALID_PTX";
        break;
    case E_NOT_FOUND:
        *s = "CUDA_ERROR_NOT_FOUND";
        break;
    case E_NOT_READY:
        *s = "CUDA_ERROR_NOT_READY";
        break;
    case E_COOP_TOO_LARGE:
        *s = "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE";
        break;
    default:
        *s = "CUDA_ERROR_UNKNOWN";
        return E_INVALID_VALUE;
    }
    return OK;
}

EXPORT CUresult
cuGetErrorString(CUresult r, const char **s)
{
    if (cuGetErrorName(r, s) != OK)
        return E_INVALID_VALUE;
    *s = r == OK ? "no error" : "fake CUDA driver error";
    return OK;
}

/* ------------------------------------------------------------ device */

EXPORT CUresult
cuInit(unsigned flags)
{
    return flags == 0 ? OK : E_INVALID_VALUE;
}

EXPORT CUresult
cuDriverGetVersion(int *v)
{
    *v = 13000;
    return OK;
}

EXPORT CUresult
cuDeviceGetCount(int *n)
{
    *n = env_int("FAKE_CUDA_DEVICES", 1);
    return OK;
}

EXPORT CUresult
cuDeviceGet(CUdevice *d, int ordinal)
{
    if (ordinal < 0 || ordinal >= env_int("FAKE_CUDA_DEVICES", 1))
        return E_INVALID_VALUE;
    *d = ordinal;
    return OK;
}

EXPORT CUresult
cuDeviceGetName(char *name, int len, CUdevice d)
{
    (void)d;
    if (len <= 0)
        return E_INVALID_VALUE;
    strncpy(
        name, "ringkernel fake CUDA device (CPU threads)", (size_t)len - 1);
    name[len - 1] = '\0';
    return OK;
}

EXPORT CUresult
cuDeviceTotalMem_v2(size_t *bytes, CUdevice d)
{
    (void)d;
    *bytes = (size_t)1 << 30;
    return OK;
}

EXPORT CUresult
cuDeviceGetAttribute(int *v, int attr, CUdevice d)
{
    int cc = env_int("FAKE_CUDA_CC", 90);
    (void)d;
    switch (attr) {
    case 1: /* max threads per block */
        *v = 1024;
        break;
    case 10: /* warp size */
        *v = 32;
        break;
    case 13: /* clock rate kHz */
        *v = 1000000;
        break;
    case 16: /* SMs */
        *v = env_int("FAKE_CUDA_SMS", 2);
        break;
    case 17: /* kernel exec timeout */
        *v = env_int("FAKE_CUDA_EXEC_TIMEOUT", 0);
        break;
    case 18: /* integrated */
        *v = 0;
        break;
    case 19: /* can map host memory */
    case 41: /* unified addressing */
    case 83: /* managed memory */
    case 95: /* cooperative launch */
        *v = 1;
        break;
    case 33: /* PCI bus */
        *v = 0;
        break;
    case 75:
        *v = cc / 10;
        break;
    case 76:
        *v = cc % 10;
        break;
    default:
        *v = 0;
        break;
    }
    return OK;
}

/* ------------------------------------------------------------ contexts */

static int ctx_token;
static _Thread_local void *current_ctx;

EXPORT CUresult
cuDevicePrimaryCtxRetain(void **ctx, CUdevice d)
{
    (void)d;
    *ctx = &ctx_token;
    return OK;
}

EXPORT CUresult
cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
    (void)d;
    return OK;
}

EXPORT CUresult
cuCtxSetCurrent(void *ctx)
{
    current_ctx = ctx;
    return OK;
}

EXPORT CUresult
cuCtxGetCurrent(void **ctx)
{
    *ctx = current_ctx;
    return OK;
}

EXPORT CUresult
cuCtxPushCurrent_v2(void *ctx)
{
    current_ctx = ctx;
    return OK;
}

EXPORT CUresult
cuCtxPopCurrent_v2(void **ctx)
{
    if (ctx != NULL)
        *ctx = current_ctx;
    return OK;
}

/* Every call below that touches the device needs a current context, as
 * with the real driver. */
#define NEED_CTX()                                                            \
    do {                                                                      \
        if (current_ctx == NULL)                                              \
            return 201; /* CUDA_ERROR_INVALID_CONTEXT */                      \
    } while (0)

/* ------------------------------------------------------------ memory */

EXPORT CUresult
cuMemGetInfo_v2(size_t *free_b, size_t *total)
{
    NEED_CTX();
    *free_b = (size_t)1 << 29;
    *total = (size_t)1 << 30;
    return OK;
}

EXPORT CUresult
cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    void *m;
    NEED_CTX();
    if (n == 0)
        return E_INVALID_VALUE;
    m = aligned_alloc(256, (n + 255) & ~(size_t)255);
    if (m == NULL)
        return E_OUT_OF_MEMORY;
    *p = (CUdeviceptr)(uintptr_t)m;
    return OK;
}

EXPORT CUresult
cuMemFree_v2(CUdeviceptr p)
{
    NEED_CTX();
    free((void *)(uintptr_t)p);
    return OK;
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
    NEED_CTX();
    free(p);
    return OK;
}

EXPORT CUresult
cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n)
{
    NEED_CTX();
    memcpy((void *)(uintptr_t)d, s, n);
    return OK;
}

EXPORT CUresult
cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n)
{
    NEED_CTX();
    memcpy(d, (const void *)(uintptr_t)s, n);
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
    NEED_CTX();
    memset((void *)(uintptr_t)d, v, n);
    return OK;
}

/* ------------------------------------------------------------ launches */

/* Residency: blocks of every grid share the device's slots. */
static pthread_mutex_t res_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t res_cond = PTHREAD_COND_INITIALIZER;
static int res_used;

typedef struct grid {
    struct grid *next;
    const rk_dev_host_kernel *k;
    unsigned char *args;
    uint32_t nblocks;
    pthread_t *th;
    _Atomic uint32_t running;
} grid;

typedef struct fake_stream {
    pthread_mutex_t lock;
    grid *grids;
} fake_stream;

typedef struct blk {
    grid *g;
    uint32_t b;
} blk;

static void *
block_main(void *arg)
{
    blk *bk = arg;
    grid *g = bk->g;

    pthread_mutex_lock(&res_lock);
    while (res_used >= resident_limit())
        pthread_cond_wait(&res_cond, &res_lock);
    res_used++;
    pthread_mutex_unlock(&res_lock);

    g->k->run(g->args, bk->b, g->nblocks);

    pthread_mutex_lock(&res_lock);
    res_used--;
    pthread_cond_broadcast(&res_cond);
    pthread_mutex_unlock(&res_lock);
    atomic_fetch_sub_explicit(&g->running, 1, memory_order_release);
    free(bk);
    return NULL;
}

static void
grid_join(grid *g)
{
    for (uint32_t b = 0; b < g->nblocks; b++)
        pthread_join(g->th[b], NULL);
    free(g->th);
    free(g->args);
    free(g);
}

EXPORT CUresult
cuStreamCreate(void **out, unsigned flags)
{
    fake_stream *s;
    NEED_CTX();
    (void)flags;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return E_OUT_OF_MEMORY;
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return OK;
}

EXPORT CUresult
cuStreamSynchronize(void *st)
{
    fake_stream *s = st;
    grid *g, *next;
    NEED_CTX();
    if (s == NULL)
        return OK; /* the legacy stream: nothing launched on it here */
    pthread_mutex_lock(&s->lock);
    g = s->grids;
    s->grids = NULL;
    pthread_mutex_unlock(&s->lock);
    for (; g != NULL; g = next) {
        next = g->next;
        grid_join(g);
    }
    return OK;
}

EXPORT CUresult
cuStreamQuery(void *st)
{
    fake_stream *s = st;
    CUresult r = OK;
    NEED_CTX();
    if (s == NULL)
        return OK;
    pthread_mutex_lock(&s->lock);
    for (grid *g = s->grids; g != NULL; g = g->next)
        if (atomic_load_explicit(&g->running, memory_order_acquire) != 0)
            r = E_NOT_READY;
    pthread_mutex_unlock(&s->lock);
    return r;
}

EXPORT CUresult
cuStreamDestroy_v2(void *st)
{
    fake_stream *s = st;
    if (s == NULL)
        return E_INVALID_HANDLE;
    /* The real driver defers the release until the work is done; the
     * stand-in waits for it, so no block outlives its stream. */
    cuStreamSynchronize(st);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return OK;
}

EXPORT CUresult
cuCtxSynchronize(void)
{
    NEED_CTX();
    return OK;
}

/* ------------------------------------------------------------ modules */

typedef struct fake_function {
    const rk_dev_host_kernel *k;
} fake_function;

/* A module keeps its functions: a CUfunction lives as long as its module. */
#define FAKE_MAX_FNS 16
typedef struct fake_module {
    unsigned char *image;
    size_t size;
    int is_ptx;
    fake_function fns[FAKE_MAX_FNS];
    int nfns;
} fake_module;

/* Checks an image the way the driver would reject one: a CUDA ELF cubin
 * (EM_CUDA = 190), or PTX whose .target is at most the device's. */
static CUresult
check_image(const unsigned char *img, size_t *size, int *is_ptx)
{
    int cc = env_int("FAKE_CUDA_CC", 90);

    if (img[0] == 0x7f && img[1] == 'E' && img[2] == 'L' && img[3] == 'F') {
        uint64_t shoff, phoff, end;
        uint16_t shentsize, shnum, phentsize, phnum;
        if (img[4] != 2 || (img[18] | img[19] << 8) != 190)
            return E_INVALID_IMAGE; /* not ELF64 for EM_CUDA */
        /* The image's size: the furthest end of the header tables and of
         * every section with contents. */
        memcpy(&phoff, img + 32, 8);
        memcpy(&shoff, img + 40, 8);
        memcpy(&phentsize, img + 54, 2);
        memcpy(&phnum, img + 56, 2);
        memcpy(&shentsize, img + 58, 2);
        memcpy(&shnum, img + 60, 2);
        if (shoff > (1u << 28) || phoff > (1u << 28) || shentsize < 64)
            return E_INVALID_IMAGE;
        end = shoff + (uint64_t)shentsize * shnum;
        if (phoff + (uint64_t)phentsize * phnum > end)
            end = phoff + (uint64_t)phentsize * phnum;
        for (uint16_t i = 0; i < shnum; i++) {
            const unsigned char *sh = img + shoff + (uint64_t)i * shentsize;
            uint32_t type;
            uint64_t off, sz;
            memcpy(&type, sh + 4, 4);
            memcpy(&off, sh + 24, 8);
            memcpy(&sz, sh + 32, 8);
            if (type != 8 /* SHT_NOBITS */ && off + sz > end)
                end = off + sz;
        }
        if (end < 64 || end > (1u << 28))
            return E_INVALID_IMAGE;
        *size = (size_t)end;
        *is_ptx = 0;
        return OK;
    }
    {
        const char *p = (const char *)img, *t;
        size_t n = strnlen(p, 1u << 28);
        int target;
        if (strstr(p, ".version") == NULL
            || (t = strstr(p, ".target sm_")) == NULL)
            return E_INVALID_PTX;
        target = atoi(t + 11);
        if (target > cc)
            return E_NO_BINARY_FOR_GPU;
        *size = n + 1;
        *is_ptx = 1;
        return OK;
    }
}

EXPORT CUresult
cuModuleLoadData(void **out, const void *image)
{
    fake_module *m;
    size_t size;
    int is_ptx;
    CUresult r;

    NEED_CTX();
    if (image == NULL)
        return E_INVALID_VALUE;
    if ((r = check_image(image, &size, &is_ptx)) != OK)
        return r;
    m = calloc(1, sizeof(*m));
    if (m == NULL || (m->image = malloc(size)) == NULL) {
        free(m);
        return E_OUT_OF_MEMORY;
    }
    memcpy(m->image, image, size);
    m->size = size;
    m->is_ptx = is_ptx;
    *out = m;
    return OK;
}

EXPORT CUresult
cuModuleLoadDataEx(
    void **out, const void *image, unsigned n, int *opts, void **vals)
{
    CUresult r = cuModuleLoadData(out, image);
    /* Fill the error log buffer the way the JIT does. */
    for (unsigned i = 0; i < n && r != OK; i++)
        if (opts[i] == 5 && vals[i] != NULL)
            strcpy((char *)vals[i], "fake driver: image rejected");
    return r;
}

EXPORT CUresult
cuModuleUnload(void *mod)
{
    fake_module *m = mod;
    NEED_CTX();
    if (m == NULL)
        return E_INVALID_HANDLE;
    free(m->image);
    free(m);
    return OK;
}

static void *
self_handle(void)
{
    Dl_info info;
    if (dladdr((void *)cuInit, &info) == 0 || info.dli_fname == NULL)
        return NULL;
    return dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
}

EXPORT CUresult
cuModuleGetFunction(void **out, void *mod, const char *name)
{
    fake_module *m = mod;
    char sym[160], entry[160];
    const rk_dev_host_kernel *k;
    fake_function *f;
    void *self;
    int in_image;

    NEED_CTX();
    if (m == NULL || name == NULL)
        return E_INVALID_VALUE;
    /* The entry must be in the image NVRTC produced ... */
    if (m->is_ptx) {
        snprintf(entry, sizeof(entry), ".entry %s(", name);
        in_image = strstr((const char *)m->image, entry) != NULL;
    } else {
        in_image = memmem(m->image, m->size, name, strlen(name) + 1) != NULL;
    }
    if (!in_image)
        return E_NOT_FOUND;
    /* ... and its host build must be here to run. */
    snprintf(sym, sizeof(sym), "rk_dev_host_kernel_%s", name);
    self = self_handle();
    k = self ? dlsym(self, sym) : NULL;
    if (self)
        dlclose(self);
    if (k == NULL)
        return E_NOT_FOUND;
    for (int i = 0; i < m->nfns; i++)
        if (m->fns[i].k == k) {
            *out = &m->fns[i];
            return OK;
        }
    if (m->nfns == FAKE_MAX_FNS)
        return E_OUT_OF_MEMORY;
    f = &m->fns[m->nfns++];
    f->k = k;
    *out = f;
    return OK;
}

EXPORT CUresult
cuModuleGetGlobal_v2(CUdeviceptr *p, size_t *n, void *mod, const char *name)
{
    (void)p;
    (void)n;
    (void)mod;
    (void)name;
    NEED_CTX();
    return E_NOT_FOUND;
}

EXPORT CUresult
cuOccupancyMaxActiveBlocksPerMultiprocessor(
    int *n, void *fn, int block, size_t smem)
{
    NEED_CTX();
    if (fn == NULL)
        return E_INVALID_HANDLE;
    *n = block > 0 && block <= 1024 && smem <= 49152
        ? env_int("FAKE_CUDA_BLOCKS_PER_SM", 2)
        : 0;
    return OK;
}

static CUresult
launch(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
    unsigned by, unsigned bz, void *st, void **params)
{
    fake_function *f = fn;
    fake_stream *s = st;
    uint64_t n = (uint64_t)gx * gy * gz;
    grid *g;

    NEED_CTX();
    if (f == NULL || params == NULL || params[0] == NULL || n == 0 || n > 65535
        || (uint64_t)bx * by * bz > 1024 || s == NULL)
        return E_INVALID_VALUE;
    g = calloc(1, sizeof(*g));
    if (g == NULL)
        return E_OUT_OF_MEMORY;
    g->k = f->k;
    g->nblocks = (uint32_t)n;
    /* Kernel parameters are copied at launch, as the driver does. */
    g->args = malloc(f->k->arg_size);
    g->th = calloc(n, sizeof(*g->th));
    if (g->args == NULL || g->th == NULL) {
        free(g->args);
        free(g->th);
        free(g);
        return E_OUT_OF_MEMORY;
    }
    memcpy(g->args, params[0], f->k->arg_size);
    atomic_init(&g->running, (uint32_t)n);
    for (uint32_t b = 0; b < n; b++) {
        blk *bk = malloc(sizeof(*bk));
        if (bk == NULL)
            abort(); /* test-only library */
        bk->g = g;
        bk->b = b;
        if (pthread_create(&g->th[b], NULL, block_main, bk) != 0)
            abort();
    }
    pthread_mutex_lock(&s->lock);
    g->next = s->grids;
    s->grids = g;
    pthread_mutex_unlock(&s->lock);
    return OK;
}

EXPORT CUresult
cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
    unsigned by, unsigned bz, unsigned smem, void *st, void **params,
    void **extra)
{
    (void)smem;
    if (extra != NULL)
        return E_INVALID_VALUE;
    return launch(fn, gx, gy, gz, bx, by, bz, st, params);
}

EXPORT CUresult
cuLaunchCooperativeKernel(void *fn, unsigned gx, unsigned gy, unsigned gz,
    unsigned bx, unsigned by, unsigned bz, unsigned smem, void *st,
    void **params)
{
    (void)smem;
    if ((uint64_t)gx * gy * gz > (uint64_t)resident_limit())
        return E_COOP_TOO_LARGE;
    return launch(fn, gx, gy, gz, bx, by, bz, st, params);
}
