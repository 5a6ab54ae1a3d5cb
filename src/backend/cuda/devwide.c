/*
 * src/backend/cuda/devwide.c - the cuda backend's per-device state: the
 * driver's extra entry points, loaded modules, resident kernels (see
 * devwide.h).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/devwide.h"
#include "backend/cuda/kcache.h"
#include "common/common.h"
#include "memory/mem.h"

#define CU_JIT_ERROR_LOG_BUFFER            5
#define CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6

/* ------------------------------------------------------------ entry points */

static pthread_once_t ext_once = PTHREAD_ONCE_INIT;
static struct rk__cuda_ext ext;
static int ext_ok;

static void
ext_load(void)
{
    const struct rk__cuda_driver *d;
    if (rk__cuda_driver(&d) != RK_OK)
        return;
    *(void **)&ext.module_load_ex = dlsym(d->lib, "cuModuleLoadDataEx");
    *(void **)&ext.occupancy
        = dlsym(d->lib, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    *(void **)&ext.func_load = dlsym(d->lib, "cuFuncLoad");
    *(void **)&ext.func_set_attr = dlsym(d->lib, "cuFuncSetAttribute");
    ext_ok = ext.module_load_ex != NULL && ext.occupancy != NULL;
}

const struct rk__cuda_ext *
rk__cuda_ext(void)
{
    pthread_once(&ext_once, ext_load);
    return ext_ok ? &ext : NULL;
}

/* ------------------------------------------------------------ the state */

typedef struct cu_mod {
    struct cu_mod *next;
    uint64_t key; /* the source and the architecture (mod_key) */
    rk__cu_module mod;
} cu_mod;

/* A launched persistent kernel until it returned: its share of the
 * device's block slots. hung: the watchdog reported it, reap_zombies
 * watches its stream and counts it out when it returned (out: unlinked,
 * the instance still owns the entry). zombie: its instance is gone while
 * the kernel still ran; the entry owns the stream and region, freed with
 * it once the kernel returned. */
#define SHARE_ONE (1ull << 32) /* the whole device */
struct rk__cu_res {
    struct rk__cu_res *next;
    char id[RK_ID_MAX + 1];
    int ordinal;
    uint32_t grid;
    uint64_t share; /* grid / (blocks per SM x SMs), in SHARE_ONE units */
    int hung, zombie, out;
    rk__cu_stream stream;
    rk__placed region; /* zombie */
};

static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER;
static cu_mod *mods;          /* under dev_lock */
static rk__cu_res *residents; /* under dev_lock */
static uint32_t resident; /* launched persistent kernels not yet returned */
/* The context's sticky error once a stream reported one (0: none), the
 * device, and "NAME (string), first seen by kernel 'id'". Under dev_lock;
 * never cleared (the context is not reset: devwide.h says why). */
static rk__cu_result lost;
static int lost_ordinal;
static char lost_why[RK_ID_MAX + 200];

static uint64_t
mod_key(const char *source, int cc)
{
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)cc;
    for (const unsigned char *p = (const unsigned char *)source; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return h;
}

/* One resident kernel fewer: unlinks e. dev_lock held. The memory layer
 * frees what waited for no kernel to be resident when the count is 0. */
static void
res_remove(rk__cu_res *e)
{
    for (rk__cu_res **at = &residents; *at != NULL; at = &(*at)->next)
        if (*at == e) {
            *at = e->next;
            break;
        }
    resident -= 1;
    rk__mem_resident(-1);
}

/* "NAME (string)" of the driver's error r, into buf. */
static void
err_text(
    const struct rk__cuda_driver *d, rk__cu_result r, char *buf, size_t cap)
{
    const char *name = NULL, *str = NULL;

    if (d->cuGetErrorName(r, &name) != RK__CUDA_SUCCESS || name == NULL)
        name = "CUDA_ERROR_UNKNOWN";
    if (d->cuGetErrorString(r, &str) != RK__CUDA_SUCCESS || str == NULL)
        str = "no description";
    snprintf(buf, cap, "%s (%s) [%d]", name, str, r);
}

/* The driver's error r on a stream of kernel id: the context is lost
 * (the first error is kept). dev_lock held. */
static void
lose(const struct rk__cuda_driver *d, rk__cu_result r, const char *id,
    int ordinal)
{
    char why[160];

    if (lost != 0)
        return;
    err_text(d, r, why, sizeof(why));
    lost = r;
    lost_ordinal = ordinal;
    snprintf(
        lost_why, sizeof(lost_why), "%s, first seen by kernel '%s'", why, id);
}

/* Kernels reported hung, and zombies, that returned since (or whose grid
 * a lost context ended): counted out (so the deferred frees run and code
 * loads again once none is left); a zombie's region is freed (deferred by
 * the memory layer while others are resident; a free a lost context
 * refuses is dropped) and its stream destroyed. dev_lock held. */
static void
reap_zombies(const struct rk__cuda_driver *d)
{
    rk__cu_res *e = residents, *next;
    rk__cu_result r;

    for (; e != NULL; e = next) {
        next = e->next;
        if (!e->zombie && !e->hung)
            continue;
        if ((r = d->cuStreamQuery(e->stream)) == RK__CUDA_ERROR_NOT_READY)
            continue;
        if (r != RK__CUDA_SUCCESS)
            lose(d, r, e->id, e->ordinal);
        res_remove(e);
        if (!e->zombie) {
            e->out = 1; /* its instance frees the entry */
            continue;
        }
        (void)d->cuStreamDestroy(e->stream);
        rk__mem_release(
            RK__MEM_PINNED, e->ordinal, NULL, e->region.host, e->region.size);
        free(e);
    }
}

/* A launch, load or allocation (id NULL) on a lost context. dev_lock
 * held. */
static int
refuse_lost(const char *id)
{
    return rk__fail(RK_ECUDA,
        "%s%s%scontext lost; device %d's CUDA context failed with %s: "
        "every kernel on it ended FAILED, and nothing runs on it again in "
        "this process (resetting it would also destroy every buffer, pool "
        "and module of the process on that device); restart the process "
        "to use the device",
        id ? "kernel '" : "", id ? id : "", id ? "': " : "", lost_ordinal,
        lost_why);
}

/* ------------------------------------------------------------ modules */

static rk__kcache *kcache;
static pthread_once_t kcache_once = PTHREAD_ONCE_INIT;

static void
kcache_open(void)
{
    rk__kcache_cfg cfg = { .dir = getenv("RK_KERNEL_CACHE_DIR") };
    (void)rk__kcache_open(&kcache, &cfg);
}

/* Compiles a kernel's device source for compute capability cc, through
 * the cache, and loads it (cuModuleLoadDataEx, so the JIT log of a PTX
 * image reaches the detail). dev_lock held. */
static int
load_module(
    const char *id, const rk_kernel_config *c, int cc, rk__cu_module *mod)
{
    char name[RK_ID_MAX + 8], jit_err[1024];
    rk__nvrtc_src src = { .source = c->device_source, .cc = cc };
    rk__nvrtc_image img;
    rk__cu_jit_option opt[2]
        = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
    void *val[2] = { jit_err, (void *)(uintptr_t)sizeof(jit_err) };
    rk__cu_result r;
    int how, rc;

    snprintf(name, sizeof(name), "%s.cu", id);
    src.name = c->device_source_name ? c->device_source_name : name;
    pthread_once(&kcache_once, kcache_open);
    if (kcache == NULL)
        return rk__fail(RK_ENOMEM, "no memory for the kernel cache");
    rc = rk__kcache_compile(kcache, &src, &img, &how);
    if (rc != RK_OK) {
        char why[400];
        snprintf(why, sizeof(why), "%s", rk_errdetail());
        rk__nvrtc_image_free(&img);
        return rk__fail(rc, "kernel '%s': %s", id, why);
    }
    jit_err[0] = '\0';
    r = ext.module_load_ex(mod, img.data, 2, opt, val);
    rk__nvrtc_image_free(&img);
    if (r != RK__CUDA_SUCCESS) {
        jit_err[sizeof(jit_err) - 1] = '\0';
        rk__cuda_check(r, "cuModuleLoadDataEx");
        return rk__fail(RK_ECUDA, "kernel '%s': module load failed (%d): %s",
            id, r, jit_err[0] ? jit_err : rk_errdetail());
    }
    return RK_OK;
}

int
rk__cu_module_get(const struct rk__cuda_driver *d, const char *id,
    const rk_kernel_config *c, int cc, rk__cu_module *out)
{
    uint64_t key = mod_key(c->device_source, cc);
    cu_mod *m;
    int rc = RK_OK;

    pthread_mutex_lock(&dev_lock);
    reap_zombies(d);
    for (m = mods; m != NULL && m->key != key; m = m->next)
        ;
    if (lost != 0) {
        rc = refuse_lost(id);
        m = NULL;
    } else if (m == NULL && resident != 0) {
        rc = rk__fail(RK_EBUSY,
            "kernel '%s': its code is not loaded, and CUDA cannot load it "
            "while %u persistent kernel(s) run on the device (the load "
            "waits for them); register every cuda kernel before "
            "launching the first, or terminate the running ones",
            id, resident);
    } else if (m == NULL) {
        if ((m = calloc(1, sizeof(*m))) == NULL)
            rc = rk__fail(RK_ENOMEM, "kernel '%s': no memory", id);
        else if ((rc = load_module(id, c, cc, &m->mod)) != RK_OK) {
            free(m);
            m = NULL;
        } else {
            m->key = key;
            m->next = mods;
            mods = m;
        }
    }
    if (m != NULL) {
        rk__cu_function fn;
        *out = m->mod;
        /* With nothing running, the kernel's entry is loaded too: under
         * lazy loading (the user's CUDA_MODULE_LOADING; we ask for eager)
         * it would load at its first launch, which may wait for the
         * persistent kernels running then. A missing entry is launch's
         * to report. */
        if (resident == 0 && ext.func_load != NULL && c->device_entry != NULL
            && d->cuModuleGetFunction(&fn, m->mod, c->device_entry)
                == RK__CUDA_SUCCESS)
            (void)ext.func_load(fn);
    }
    pthread_mutex_unlock(&dev_lock);
    return rc;
}

/* ------------------------------------------------------------ residents */

/* Co-residency across the device: the kernel's blocks must fit beside
 * those of every persistent kernel already resident, or some of them
 * never start. Each kernel takes grid / (its blocks per SM x SMs) of the
 * device (exact for kernels of one shape; for mixed shapes, an
 * approximation of how SM resources split). dev_lock held. */
static int
fits(const char *id, uint32_t grid, uint32_t per_sm, uint32_t sms,
    uint64_t *share)
{
    uint64_t cap = (uint64_t)per_sm * sms, used = 0;
    uint32_t n = 0;
    char others[400];
    size_t at = 0;

    *share = cap != 0 ? ((uint64_t)grid * SHARE_ONE + cap - 1) / cap
                      : SHARE_ONE + 1;
    others[0] = '\0';
    for (rk__cu_res *r = residents; r != NULL; r = r->next, n++) {
        used += r->share;
        if (at < sizeof(others))
            at += (size_t)snprintf(others + at, sizeof(others) - at,
                "%s'%s' (%u blocks)", n ? ", " : "", r->id, r->grid);
    }
    /* One unit of slack per kernel for the rounding up of each share. */
    if (used + *share > SHARE_ONE + n + 1)
        return rk__fail(RK_ENOTSUP,
            "kernel '%s': its %u blocks cannot be resident together with "
            "the persistent kernels already running: %s (%u blocks per SM "
            "x %u SMs for this kernel's shape); the grids fit alone but "
            "not together, and a block that never starts leaves its lanes "
            "unserved: terminate one or use smaller grids",
            id, grid, others, per_sm, sms);
    return RK_OK;
}

int
rk__cu_res_launch(const struct rk__cuda_driver *d, const char *id, int ordinal,
    uint32_t grid, uint32_t per_sm, uint32_t sms, rk__cu_stream stream,
    int (*launch)(void *arg), void *arg, rk__cu_res **out)
{
    rk__cu_res *e;
    uint64_t share;
    int rc;

    if ((e = calloc(1, sizeof(*e))) == NULL)
        return rk__fail(RK_ENOMEM, "kernel '%s': no memory", id);
    pthread_mutex_lock(&dev_lock);
    reap_zombies(d);
    rc = lost != 0 ? refuse_lost(id) : fits(id, grid, per_sm, sms, &share);
    if (rc == RK_OK) {
        /* Counted in before it starts: a free decided from now on waits
         * for it (memory/mem.h). */
        rk__mem_resident(1);
        rc = launch(arg);
        if (rc == RK_OK) {
            snprintf(e->id, sizeof(e->id), "%s", id);
            e->ordinal = ordinal;
            e->grid = grid;
            e->share = share;
            e->stream = stream;
            e->next = residents;
            residents = e;
            resident += 1;
            *out = e;
            e = NULL;
        } else {
            rk__mem_resident(-1);
        }
    }
    pthread_mutex_unlock(&dev_lock);
    free(e);
    return rc;
}

void
rk__cu_res_returned(rk__cu_res *e)
{
    pthread_mutex_lock(&dev_lock);
    if (!e->out)
        res_remove(e);
    pthread_mutex_unlock(&dev_lock);
    free(e);
}

void
rk__cu_res_hung(rk__cu_res *e)
{
    pthread_mutex_lock(&dev_lock);
    e->hung = 1;
    pthread_mutex_unlock(&dev_lock);
}

int
rk__cu_res_zombie(rk__cu_res *e, const rk__placed *region)
{
    int taken = 0;

    pthread_mutex_lock(&dev_lock);
    if (!e->out) {
        e->zombie = 1;
        e->region = *region;
        taken = 1;
    }
    pthread_mutex_unlock(&dev_lock);
    return taken;
}

int
rk__cu_res_check(const struct rk__cuda_driver *d, rk__cu_res *e)
{
    char why[160];
    rk__cu_result r;

    /* A host-side call: no PCIe read of the device's lines. */
    (void)rk__cuda_enter(e->ordinal, NULL);
    r = d->cuStreamQuery(e->stream);
    if (r == RK__CUDA_SUCCESS || r == RK__CUDA_ERROR_NOT_READY)
        return RK_OK;
    pthread_mutex_lock(&dev_lock);
    lose(d, r, e->id, e->ordinal);
    pthread_mutex_unlock(&dev_lock);
    err_text(d, r, why, sizeof(why));
    /* Not the result of a call: the log is where an operator learns why
     * the kernel is FAILED. */
    rk__log(RK_LOG_ERROR,
        "kernel '%s': the CUDA context of device %d is lost: %s; the "
        "kernel ended FAILED (RK_ECUDA), what it had queued is "
        "dead-lettered, and no cuda kernel runs on the device again in "
        "this process",
        e->id, e->ordinal, why);
    return rk__fail(RK_ECUDA,
        "kernel '%s': the CUDA context of device %d is lost: %s", e->id,
        e->ordinal, why);
}

int
rk__cu_lost(void)
{
    int rc = RK_OK;

    pthread_mutex_lock(&dev_lock);
    if (lost != 0)
        rc = refuse_lost(NULL);
    pthread_mutex_unlock(&dev_lock);
    return rc;
}
