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
 *   - two devices (FAKE_CUDA_DEVICES, at most FAKE_MAX_DEVICES), each with
 *     its own primary context, compute capability FAKE_CUDA_CC (default
 *     90), FAKE_CUDA_SMS SMs (default 2) with FAKE_CUDA_BLOCKS_PER_SM
 *     resident blocks each (default 2), the display watchdog attribute from
 *     FAKE_CUDA_EXEC_TIMEOUT; the variables are read at every call. A
 *     stream belongs to the device whose context was current when it was
 *     created, and its grids take that device's block slots;
 *   - managed memory, prefetch, advice and cuMemGetInfo with a settable
 *     free size (fake_mem.c);
 *   - peer access between devices (FAKE_CUDA_PEER, fake_devmem.c): a
 *     device's memory is reachable from a grid on another device only
 *     once peer access is enabled;
 *   - mapped pinned memory (cuMemHostAlloc) is the process's memory, and
 *     its device address is the host address, as with unified addressing
 *     (fake_devmem.c);
 *   - device memory (cuMemAlloc, fake_devmem.c) is NOT host memory: it
 *     lives in an arena mapped twice, once at the addresses cuMemAlloc
 *     returns, which are PROT_NONE whenever no grid runs (a host read or
 *     write of a device pointer crashes, as on a GPU), and once as a
 *     private shadow that cuMemcpy* and cuMemsetD8 translate to. While a
 *     grid runs the device
 *     addresses are readable, because its blocks are CPU threads that
 *     dereference them: a host access then goes unnoticed;
 *   - what the real driver does while kernels run: cuModuleLoadData(Ex),
 *     cuModuleUnload and cuCtxSynchronize wait until no grid runs on the
 *     current context's device, cuMemFree and cuMemFreeHost until none
 *     runs on any, and launches on one stream run one after another. A persistent kernel never ends by itself, so such a wait
 *     would hang: the stand-in gives up after FAKE_CUDA_HANG_MS (default
 *     10000), prints what would have hung, counts it and returns
 *     FAKE_ERROR_WOULD_HANG; tests read the counts through
 *     fake_cuda_hangs(), fake_cuda_waits() and fake_cuda_last_hang();
 *   - cuModuleLoadData(Ex) accepts only real NVRTC/nvcc output (a CUDA ELF
 *     cubin, or PTX whose .target is not newer than the device) and
 *     cuModuleGetFunction finds an entry only if the image defines it and
 *     the host build of the same kernel source (tests/kernels,
 *     tools/ringkernel/pr_dev.h and anomaly_dev.h, compiled into this
 *     library as C) exists;
 *   - cuLaunchKernel runs that host build, one CPU thread per block (on
 *     a stream of the current context only); at most SMS x BLOCKS_PER_SM
 *     blocks are resident at once across the device and the others wait for a resident block to finish, as on a
 *     GPU (so an over-sized persistent grid hangs here too: the backend's
 *     occupancy check must refuse it first);
 *   - cuLaunchCooperativeKernel refuses a grid that cannot be resident;
 *   - a trap (rk_dev_trap, or fake_cuda_trap(code)) loses the context
 *     as on a GPU: every block stops at its next device call, then the
 *     error is sticky on every call (docs/cuda-robustness.md, "The stand-in
 *     driver"; for the process, every device alike).
 * What it cannot do: the PTX memory model, PCIe ordering, warps, more than
 * one thread per block. Figures measured on it are "cuda_sim", never GPU.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* Traps: the device code's host build calls these (rk_dev.h). */
static void fake_point(void);
static void fake_trap(void);
#define RK_DEV_HOST_POINT() fake_point()
#define RK_DEV_HOST_TRAP()  fake_trap()

/* The test kernels' host builds (rk_dev_host_kernel_<name>), and the
 * `ringkernel` command's PageRank kernel (cli_prd_kernel) and anomaly
 * detector (cli_and_kernel). */
#include "../../tools/ringkernel/anomaly_dev.h"
#include "../../tools/ringkernel/pr_dev.h"
#include "../kernels/bar_kernels.cu"
#include "../kernels/numba_kernels.cu"
#include "../kernels/oneshot_kernels.cu"
#include "../kernels/test_kernels.cu"

#include "fake_cuda.h"

static int
resident_limit(void)
{
    return env_int("FAKE_CUDA_SMS", 2) * env_int("FAKE_CUDA_BLOCKS_PER_SM", 2);
}

/* ------------------------------------------------------------ contexts */

static int ctx_token[FAKE_MAX_DEVICES]; /* device d's primary context */
static _Thread_local void *current_ctx;

int
fake_ctx_dev(const void *ctx)
{
    for (int d = 0; d < FAKE_MAX_DEVICES; d++)
        if (ctx == (const void *)&ctx_token[d])
            return d;
    return -1;
}

int
fake_cur_dev(void)
{
    return current_ctx != NULL ? (int)((int *)current_ctx - ctx_token) : -1;
}

EXPORT CUresult
cuDevicePrimaryCtxRetain(void **ctx, CUdevice d)
{
    if (d < 0 || d >= fake_devices())
        return E_INVALID_VALUE;
    *ctx = &ctx_token[d];
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

/* A lost context's sticky error (0: none). Set under res_lock once a
 * trap stopped every grid; release pairs with the acquire in fake_sticky(). */
static _Atomic CUresult lost;

CUresult
fake_sticky(void)
{
    return atomic_load_explicit(&lost, memory_order_acquire);
}

/* ------------------------------------------------------------ the device */

/* Grids and each device's block slots: blocks of every grid on a device
 * share them. Everything here is under res_lock. */
static pthread_mutex_t res_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t res_cond = PTHREAD_COND_INITIALIZER;
static int res_used[FAKE_MAX_DEVICES]; /* resident blocks per device */
static int grids_live; /* grids launched whose blocks have not all ended */
static int grids_on[FAKE_MAX_DEVICES]; /* ... per device */
static unsigned n_waits; /* calls that waited for running grids */
static unsigned n_hangs; /* ... and gave up: on a GPU they would hang */
static char last_hang[160];
/* A trap's error while the context's grids stop (0: none); blocks read it
 * at their device calls (relaxed: a block only stops sooner or later).
 * Written under res_lock. */
static _Atomic CUresult dying;

/* A trap is stopping the grids and its error does not show yet. res_lock
 * held (both words are written under it). */
static int
tearing_down(void)
{
    return atomic_load_explicit(&dying, memory_order_relaxed) != OK
        && atomic_load_explicit(&lost, memory_order_relaxed) == OK;
}

/* Waits under res_lock while busy(arg), as the real driver does for the
 * calls that wait for the device's work. A persistent grid never ends, so
 * the wait is bounded (FAKE_CUDA_HANG_MS) and reported instead of hanging
 * the test: on a GPU the call would never return. */
static CUresult
bounded_wait(int (*busy)(const void *), const void *arg, const char *what)
{
    struct timespec dl;
    long ms = env_int("FAKE_CUDA_HANG_MS", 10000);
    CUresult r = OK;

    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&res_lock);
    if (busy(arg))
        n_waits++;
    /* A context being lost: its grids stop, then the error shows. */
    while (busy(arg) || tearing_down()) {
        if (pthread_cond_timedwait(&res_cond, &res_lock, &dl) == ETIMEDOUT
            && (busy(arg) || tearing_down())) {
            n_hangs++;
            snprintf(last_hang, sizeof(last_hang),
                "%s called while %d grid(s) ran", what, grids_live);
            fprintf(stderr,
                "fake_cuda: %s waited %ld ms for %d running grid(s): on a "
                "GPU with a persistent kernel resident it never returns\n",
                what, ms, grids_live);
            r = E_WOULD_HANG;
            break;
        }
    }
    if (r == OK)
        r = atomic_load_explicit(&lost, memory_order_relaxed);
    pthread_mutex_unlock(&res_lock);
    return r;
}

/* arg: a device, or NULL for every device. */
static int
device_busy(const void *arg)
{
    return arg != NULL ? grids_on[*(const int *)arg] != 0 : grids_live != 0;
}

/* A free: until no grid runs on any device (pinned memory is every
 * context's). */
CUresult
fake_wait_idle(const char *what)
{
    return bounded_wait(device_busy, NULL, what);
}

/* A module load or unload, a context synchronise: until no grid runs on
 * the current context's device. */
static CUresult
wait_idle_dev(const char *what)
{
    int d = fake_cur_dev();
    return bounded_wait(device_busy, &d, what);
}

/* Test-only: the handler the host build of rk_numba_kernel calls (a
 * numba.cfunc's address or a C function) and its message sizes; set
 * before launching the kernel. */
EXPORT void
fake_cuda_numba_set(
    void *fn, unsigned in_size, unsigned out_size, unsigned out_type)
{
    *(void **)&fake_numba.fn = fn;
    fake_numba.in_size = in_size;
    fake_numba.out_size = out_size;
    fake_numba.out_type = out_type;
}

void
fake_reprotect(void)
{
    pthread_mutex_lock(&res_lock);
    fake_arena_protect(grids_on);
    pthread_mutex_unlock(&res_lock);
}

/* Test-only queries (not driver entry points). */
EXPORT unsigned
fake_cuda_hangs(void)
{
    unsigned n;
    pthread_mutex_lock(&res_lock);
    n = n_hangs;
    pthread_mutex_unlock(&res_lock);
    return n;
}

EXPORT unsigned
fake_cuda_waits(void)
{
    unsigned n;
    pthread_mutex_lock(&res_lock);
    n = n_waits;
    pthread_mutex_unlock(&res_lock);
    return n;
}

/* Grids running on device dev (launched, not all blocks ended). */
EXPORT int
fake_cuda_grids_on(int dev)
{
    int n;
    if (dev < 0 || dev >= FAKE_MAX_DEVICES)
        return -1;
    pthread_mutex_lock(&res_lock);
    n = grids_on[dev];
    pthread_mutex_unlock(&res_lock);
    return n;
}

/* What the last call that would hang was ("" if none). The string stays
 * valid until the next one. */
EXPORT const char *
fake_cuda_last_hang(void)
{
    return last_hang;
}

/* ------------------------------------------------------------ launches */

typedef struct fake_stream {
    pthread_mutex_t lock;
    int dev; /* the device of the context it was created in */
    struct grid *grids;
    uint64_t launched; /* grids launched on it (their seq) */
    uint64_t finished; /* under res_lock: grids ended, in order */
} fake_stream;

typedef struct grid {
    struct grid *next;
    const rk_dev_host_kernel *k;
    unsigned char *args;
    uint32_t nblocks;
    pthread_t *th;
    fake_stream *s;
    uint64_t seq;             /* its place on its stream */
    _Atomic uint32_t running; /* blocks not ended */
} grid;

typedef struct blk {
    grid *g;
    uint32_t b;
} blk;

/* Where a block thread goes when a trap stops it (NULL outside one). */
static _Thread_local jmp_buf *block_jb;

/* A device call of a block: a block of a context being lost stops here. */
static void
fake_point(void)
{
    if (atomic_load_explicit(&dying, memory_order_relaxed) != OK
        && block_jb != NULL)
        longjmp(*block_jb, 1);
}

/* Test-only: the context is lost with error code (as if a block had
 * trapped): every block stops at its next device call, and once none
 * runs, code is sticky. The first trap's code wins. */
EXPORT void
fake_cuda_trap(CUresult code)
{
    pthread_mutex_lock(&res_lock);
    if (atomic_load_explicit(&dying, memory_order_relaxed) == OK)
        atomic_store_explicit(&dying, code, memory_order_relaxed);
    if (grids_live == 0) /* release pairs with fake_sticky()'s acquire */
        atomic_store_explicit(&lost,
            atomic_load_explicit(&dying, memory_order_relaxed),
            memory_order_release);
    pthread_cond_broadcast(&res_cond); /* blocks waiting for a slot */
    pthread_mutex_unlock(&res_lock);
}

/* rk_dev_trap in a block: the context is lost and the block stops now. */
static void
fake_trap(void)
{
    fake_cuda_trap(env_int("FAKE_CUDA_TRAP_ERROR", E_LAUNCH_FAILED));
    if (block_jb == NULL)
        abort(); /* not a block of a grid */
    longjmp(*block_jb, 1);
}

static void *
block_main(void *arg)
{
    blk *bk = arg;
    grid *g = bk->g;
    jmp_buf jb;
    int started;

    /* A grid starts when the grids launched before it on its stream have
     * ended, and each block when a block slot is free; none starts in a
     * context being lost. */
    pthread_mutex_lock(&res_lock);
    while (atomic_load_explicit(&dying, memory_order_relaxed) == OK
        && (g->s->finished < g->seq
            || res_used[g->s->dev] >= resident_limit()))
        pthread_cond_wait(&res_cond, &res_lock);
    started = atomic_load_explicit(&dying, memory_order_relaxed) == OK;
    if (started)
        res_used[g->s->dev]++;
    pthread_mutex_unlock(&res_lock);

    if (started) {
        if (setjmp(jb) == 0) {
            block_jb = &jb;
            g->k->run(g->args, bk->b, g->nblocks);
        } else {
            /* Stopped by a trap inside the kernel: its host entry's
             * staging memory (rk_dev.h; NULL for a one-shot kernel). */
            free(rk_dev_host_stage);
        }
        block_jb = NULL;
    }

    pthread_mutex_lock(&res_lock);
    if (started)
        res_used[g->s->dev]--;
    /* Release pairs with cuStreamQuery's acquire. */
    if (atomic_fetch_sub_explicit(&g->running, 1, memory_order_release) == 1) {
        /* In order, unless a trap stopped them (a later grid that never
         * started may end first). */
        if (g->s->finished < g->seq + 1)
            g->s->finished = g->seq + 1;
        grids_on[g->s->dev]--;
        fake_arena_protect(grids_on);
        if (--grids_live == 0) {
            /* A trap stopped them all: the context's error shows now
             * (release pairs with fake_sticky()'s acquire). */
            if (atomic_load_explicit(&dying, memory_order_relaxed) != OK)
                atomic_store_explicit(&lost,
                    atomic_load_explicit(&dying, memory_order_relaxed),
                    memory_order_release);
        }
    }
    pthread_cond_broadcast(&res_cond);
    pthread_mutex_unlock(&res_lock);
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
    s->dev = fake_cur_dev();
    *out = s;
    return OK;
}

typedef struct stream_mark {
    const struct fake_stream *s;
    uint64_t want;
} stream_mark;

static int
stream_busy(const void *arg)
{
    const stream_mark *m = arg;
    return m->s->finished < m->want;
}

/* Waits for every grid launched on s so far, bounded as fake_wait_idle. */
static CUresult
stream_wait(fake_stream *s, const char *what)
{
    stream_mark m = { s, 0 };

    pthread_mutex_lock(&s->lock);
    m.want = s->launched;
    pthread_mutex_unlock(&s->lock);
    return bounded_wait(stream_busy, &m, what);
}

EXPORT CUresult
cuStreamSynchronize(void *st)
{
    fake_stream *s = st;
    grid *g, *next, *keep = NULL;
    CUresult r;
    NEED_CTX_ONLY();
    if (s == NULL)
        return fake_sticky(); /* the legacy stream: nothing launched on it */
    /* On a lost context every grid has ended: they are joined, and the
     * error returned. */
    if ((r = stream_wait(s, "cuStreamSynchronize")) != OK
        && r != fake_sticky())
        return r;
    /* Every grid launched before the wait has ended: join those. */
    pthread_mutex_lock(&s->lock);
    g = s->grids;
    s->grids = NULL;
    pthread_mutex_unlock(&s->lock);
    for (; g != NULL; g = next) {
        next = g->next;
        if (atomic_load_explicit(&g->running, memory_order_acquire) == 0) {
            grid_join(g);
        } else { /* launched after the wait began */
            g->next = keep;
            keep = g;
        }
    }
    if (keep != NULL) {
        pthread_mutex_lock(&s->lock);
        for (g = keep; g->next != NULL; g = g->next)
            ;
        g->next = s->grids;
        s->grids = keep;
        pthread_mutex_unlock(&s->lock);
    }
    return r;
}

EXPORT CUresult
cuStreamQuery(void *st)
{
    fake_stream *s = st;
    CUresult r = OK;
    NEED_CTX();
    if (s == NULL)
        return OK;
    /* A context being lost: the error shows once every grid stopped. */
    if (atomic_load_explicit(&dying, memory_order_relaxed) != OK)
        return E_NOT_READY;
    pthread_mutex_lock(&s->lock);
    for (grid *g = s->grids; g != NULL; g = g->next)
        /* Acquire pairs with the release in block_main. */
        if (atomic_load_explicit(&g->running, memory_order_acquire) != 0)
            r = E_NOT_READY;
    pthread_mutex_unlock(&s->lock);
    return r;
}

EXPORT CUresult
cuStreamDestroy_v2(void *st)
{
    fake_stream *s = st;
    CUresult r;
    if (s == NULL)
        return E_INVALID_HANDLE;
    /* The real driver defers the release until the work is done; the
     * stand-in waits for it, so no block outlives its stream (a grid
     * that never ends keeps its stream: leaked, and reported). On a lost
     * context: released, and the error returned. */
    if ((r = cuStreamSynchronize(st)) != OK && r != fake_sticky())
        return r;
    pthread_mutex_destroy(&s->lock);
    free(s);
    return r;
}

EXPORT CUresult
cuCtxSynchronize(void)
{
    NEED_CTX();
    return wait_idle_dev("cuCtxSynchronize");
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
    /* The driver loads code only while no kernel runs (seen on an H200,
     * driver 580): it waits for the running ones. */
    if ((r = wait_idle_dev("cuModuleLoadData")) != OK)
        return r;
    if ((r = fake_check_image(image, &size, &is_ptx)) != OK)
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
    CUresult r;
    NEED_CTX_ONLY();
    if (m == NULL)
        return E_INVALID_HANDLE;
    if ((r = wait_idle_dev("cuModuleUnload")) != OK && r != fake_sticky())
        return r;
    free(m->image);
    free(m);
    return r; /* a lost context's error, once released */
}

EXPORT CUresult cuModuleGetFunction(void **out, void *mod, const char *name);

static void *
self_handle(void)
{
    Dl_info info;
    if (dladdr((void *)cuModuleGetFunction, &info) == 0
        || info.dli_fname == NULL)
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
    if (s->dev != fake_cur_dev())
        return E_INVALID_HANDLE; /* a stream of another context */
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
    g->s = s;
    /* The grid's place on its stream: it starts when those before it
     * ended. */
    pthread_mutex_lock(&s->lock);
    g->seq = s->launched++;
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_lock(&res_lock);
    grids_on[s->dev]++;
    grids_live++;
    fake_arena_protect(grids_on);
    pthread_mutex_unlock(&res_lock);
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
