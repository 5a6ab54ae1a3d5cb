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
#include "backend/cuda/jitlink.h"
#include "backend/cuda/kcache.h"
#include "common/common.h"
#include "memory/mem.h"
#include "ringkernel/dev_oneshot.h"

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
    /* The driver's linker: jitlink.c's fallback without nvJitLink. */
    *(void **)&ext.link.create = dlsym(d->lib, "cuLinkCreate_v2");
    *(void **)&ext.link.add_data = dlsym(d->lib, "cuLinkAddData_v2");
    *(void **)&ext.link.complete = dlsym(d->lib, "cuLinkComplete");
    *(void **)&ext.link.destroy = dlsym(d->lib, "cuLinkDestroy");
    if (!ext.link.create || !ext.link.add_data || !ext.link.complete
        || !ext.link.destroy)
        memset(&ext.link, 0, sizeof(ext.link));
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
    uint64_t key; /* the source, the architecture, the device (mod_key) */
    rk__cu_module mod;
} cu_mod;

/* A named barrier: an rk_dev_barrier in one device's memory, for the
 * life of the process (16 bytes per name). */
struct rk__cu_bar {
    struct rk__cu_bar *next;
    char name[RK_ID_MAX + 1];
    int ordinal;
    uint32_t parties;
    uint64_t dev; /* its device address */
};

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
    rk__cu_bar *bar; /* the named barrier its blocks wait at, or NULL */
    int hung, zombie, out;
    rk__cu_stream stream;
    rk__placed region; /* zombie */
};

static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER;
static cu_mod *mods;          /* under dev_lock */
static rk__cu_res *residents; /* under dev_lock */
static rk__cu_bar *bars;      /* under dev_lock */
/* Launched persistent kernels not yet returned, on every device: code is
 * loaded only while none runs anywhere (whether a load on one device
 * waits for the kernels of another is not known, so none is tried). */
static uint32_t resident;
/* The devices whose context is lost: a stream reported the driver's
 * error, why = "NAME (string) [code], first seen by kernel 'id'". Under
 * dev_lock; never cleared or freed (the context is not reset: devwide.h
 * says why). */
typedef struct lost_dev {
    struct lost_dev *next;
    int ordinal;
    char why[RK_ID_MAX + 200];
} lost_dev;
static lost_dev *losts;

/* Modules belong to a context, so the device is part of the key. */
static uint64_t
mod_key(const rk_kernel_config *c, int cc, int ordinal)
{
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)cc
        ^ ((uint64_t)(uint32_t)ordinal << 32);
    for (const unsigned char *p = (const unsigned char *)c->device_source; *p;
         p++)
        h = (h ^ *p) * 0x100000001b3ull;
    /* Linked code (a Numba handler): the PTX decides too. */
    for (const unsigned char *p = (const unsigned char *)c->device_link_ptx;
         p != NULL && *p; p++)
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

/* "NAME (string) [code]" of the driver's error r, into buf. */
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

/* Device ordinal's lost context, or NULL. dev_lock held. */
static const lost_dev *
lost_of(int ordinal)
{
    const lost_dev *l = losts;
    while (l != NULL && l->ordinal != ordinal)
        l = l->next;
    return l;
}

/* The driver's error r on a stream of kernel id: device ordinal's
 * context is lost (its first error is kept). dev_lock held. */
static void
lose(const struct rk__cuda_driver *d, rk__cu_result r, const char *id,
    int ordinal)
{
    char why[160];
    lost_dev *l;

    if (lost_of(ordinal) != NULL || (l = calloc(1, sizeof(*l))) == NULL)
        return; /* without memory: the launch fails on the driver's error */
    err_text(d, r, why, sizeof(why));
    l->ordinal = ordinal;
    snprintf(l->why, sizeof(l->why), "%s, first seen by kernel '%s'", why, id);
    l->next = losts;
    losts = l;
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

/* A launch, load or allocation (id NULL) on lost context l. dev_lock
 * held. */
static int
refuse_lost(const char *id, const lost_dev *l)
{
    return rk__fail(RK_ECUDA,
        "%s%s%scontext lost; device %d's CUDA context failed with %s: "
        "every kernel on it ended FAILED, and nothing runs on it again in "
        "this process (resetting it would also destroy every buffer, pool "
        "and module of the process on that device); restart the process "
        "to use the device",
        id ? "kernel '" : "", id ? id : "", id ? "': " : "", l->ordinal,
        l->why);
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
    if (c->device_link_ptx != NULL) {
        src.link_ptx = c->device_link_ptx;
        src.link_ptx_size = strlen(c->device_link_ptx) + 1;
        rc = rk__jitlink_compile(kcache, &src, &ext.link, &img, &how);
    } else {
        rc = rk__kcache_compile(kcache, &src, &img, &how);
    }
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
rk__cu_ordinal(const rk_kernel_config *c)
{
    const char *s;

    if (c != NULL && c->device != 0)
        return c->device;
    s = getenv("RK_CUDA_DEVICE");
    return s != NULL ? atoi(s) : 0;
}

int
rk__cu_device_of(const char *id, const rk_kernel_config *c, int *ordinal)
{
    const struct rk__cuda_driver *d;
    int ord = rk__cu_ordinal(c), rc;

    if (ord < 0)
        return rk__fail(RK_EINVAL,
            "kernel '%s': CUDA device %d is not a device ordinal (0 or "
            "more)",
            id, ord);
    if ((rc = rk__cuda_driver(&d)) != RK_OK)
        return rk__fail(rc, "kernel '%s': %s", id, rk_errdetail());
    if (ord >= d->device_count)
        return rk__fail(RK_ENODEV,
            "kernel '%s' names CUDA device %d, but the driver has %d "
            "device(s) (ordinals 0 to %d)",
            id, ord, d->device_count, d->device_count - 1);
    *ordinal = ord;
    return RK_OK;
}

int
rk__cu_module_get(const struct rk__cuda_driver *d, const char *id,
    const rk_kernel_config *c, int cc, int ordinal, rk__cu_module *out)
{
    uint64_t key = mod_key(c, cc, ordinal);
    cu_mod *m;
    int rc = RK_OK;

    pthread_mutex_lock(&dev_lock);
    reap_zombies(d);
    for (m = mods; m != NULL && m->key != key; m = m->next)
        ;
    if (lost_of(ordinal) != NULL) {
        rc = refuse_lost(id, lost_of(ordinal));
        m = NULL;
    } else if (m == NULL && resident != 0) {
        rc = rk__fail(RK_EBUSY,
            "kernel '%s': its code is not loaded, and CUDA cannot load it "
            "while %u persistent kernel(s) run (the load "
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
static uint64_t
share_of(uint32_t grid, uint32_t per_sm, uint32_t sms)
{
    uint64_t cap = (uint64_t)per_sm * sms;
    return cap != 0 ? ((uint64_t)grid * SHARE_ONE + cap - 1) / cap
                    : SHARE_ONE + 1;
}

static int
is_resident(const char *id)
{
    for (rk__cu_res *r = residents; r != NULL; r = r->next)
        if (strcmp(r->id, id) == 0)
            return 1;
    return 0;
}

/* Device routes (k2k.h): the kernels joined to this one by a route on
 * the device that are not resident yet must fit too, beside this one and
 * the resident ones, or a block would wait on a lane nobody serves.
 * dev_lock held. */
static int
partners_fit(const char *id, uint32_t grid, uint64_t used, uint32_t n,
    const rk__cu_partner *p, uint32_t np)
{
    char names[300];
    size_t at = 0;
    uint32_t k = 0;

    names[0] = '\0';
    for (uint32_t i = 0; i < np; i++) {
        if (is_resident(p[i].id))
            continue;
        used += share_of(p[i].grid, p[i].per_sm, p[i].sms);
        n++;
        if (at < sizeof(names))
            at += (size_t)snprintf(names + at, sizeof(names) - at,
                "%s'%s' (%u blocks)", k++ ? ", " : "", p[i].id, p[i].grid);
    }
    if (k == 0 || used <= SHARE_ONE + n + 1)
        return RK_OK;
    return rk__fail(RK_ENOTSUP,
        "kernel '%s' (%u blocks) and %s, joined by a device route "
        "(rk_connect), cannot all be resident on the device together "
        "(beside the %u persistent kernel(s) already running): a block "
        "would wait forever on a lane whose kernel never starts; use "
        "smaller grids or route through the host (a cpu kernel between)",
        id, grid, names, n - k);
}

static int
fits(const char *id, int ordinal, uint32_t grid, uint32_t per_sm,
    uint32_t sms, uint64_t *share, const rk__cu_partner *p, uint32_t np)
{
    uint64_t used = 0;
    uint32_t n = 0;
    char others[400];
    size_t at = 0;

    *share = share_of(grid, per_sm, sms);
    others[0] = '\0';
    for (rk__cu_res *r = residents; r != NULL; r = r->next) {
        if (r->ordinal != ordinal)
            continue;
        n++;
        used += r->share;
        if (at < sizeof(others))
            at += (size_t)snprintf(others + at, sizeof(others) - at,
                "%s'%s' (%u blocks)", n > 1 ? ", " : "", r->id, r->grid);
    }
    /* One unit of slack per kernel for the rounding up of each share. */
    if (used + *share <= SHARE_ONE + n + 1)
        return partners_fit(id, grid, used + *share, n + 1, p, np);
    return rk__fail(RK_ENOTSUP,
            "kernel '%s': its %u blocks cannot be resident together with "
            "the persistent kernels already running on CUDA device %d: %s "
            "(%u blocks per SM x %u SMs for this kernel's shape); the "
            "grids fit alone but not together, and a block that never "
            "starts leaves its lanes unserved: terminate one or use "
            "smaller grids",
            id, grid, ordinal, others, per_sm, sms);
}

/* A named barrier's parties must all be resident at once, or its waits
 * never end: at most the device's blocks for this kernel's shape; and the
 * kernels already at it, with this one, may not bring more blocks than
 * it has parties (each block arrives once per generation). dev_lock
 * held. */
static int
bar_fits(const char *id, const rk__cu_bar *bar, uint32_t grid,
    uint32_t per_sm, uint32_t sms)
{
    uint64_t cap = (uint64_t)per_sm * sms, at = 0;

    if (bar->parties > cap)
        return rk__fail(RK_ENOTSUP,
            "kernel '%s': barrier '%s' has %u parties, but at most %llu "
            "blocks can be resident on CUDA device %d (%u blocks per SM x "
            "%u SMs for this kernel's shape); its waits would never end",
            id, bar->name, bar->parties, (unsigned long long)cap,
            bar->ordinal, per_sm, sms);
    for (const rk__cu_res *r = residents; r != NULL; r = r->next)
        if (r->bar == bar)
            at += r->grid;
    if (at + grid > bar->parties)
        return rk__fail(RK_EINVAL,
            "kernel '%s': its %u blocks and the %llu of the kernels already "
            "resident at barrier '%s' are more than its %u parties",
            id, grid, (unsigned long long)at, bar->name, bar->parties);
    return RK_OK;
}

int
rk__cu_bar_get(const char *id, const rk_kernel_config *c, int ordinal,
    rk__cu_bar **out, uint64_t *dev)
{
    rk__cu_bar *b;
    void *p = NULL;
    int rc = RK_OK;

    *out = NULL;
    *dev = 0;
    if (c->device_barrier == NULL)
        return RK_OK;
    if (c->device_barrier[0] == '\0'
        || strlen(c->device_barrier) > RK_ID_MAX
        || c->device_barrier_parties == 0)
        return rk__fail(RK_EINVAL,
            "kernel '%s': device_barrier needs a name of 1 to %d bytes "
            "and device_barrier_parties (the blocks that wait at it, "
            "across the kernels naming it)",
            id, RK_ID_MAX);
    pthread_mutex_lock(&dev_lock);
    for (b = bars; b != NULL && strcmp(b->name, c->device_barrier) != 0;
         b = b->next)
        ;
    if (b != NULL && b->ordinal != ordinal)
        rc = rk__fail(RK_EINVAL,
            "kernel '%s' runs on CUDA device %d, but barrier '%s' is in "
            "device %d's memory (its GPU-scope atomics do not reach "
            "another device)",
            id, ordinal, b->name, b->ordinal);
    else if (b != NULL && b->parties != c->device_barrier_parties)
        rc = rk__fail(RK_EINVAL,
            "kernel '%s': barrier '%s' has %u parties, not %u",
            id, b->name, b->parties, c->device_barrier_parties);
    else if (b == NULL && resident != 0)
        /* A synchronous memset while a persistent kernel runs may never
         * return, like a module load. */
        rc = rk__fail(RK_EBUSY,
            "kernel '%s': barrier '%s' is not placed yet, and %u "
            "persistent kernel(s) run; register every cuda kernel before "
            "launching the first",
            id, c->device_barrier, resident);
    else if (b == NULL && (b = calloc(1, sizeof(*b))) == NULL)
        rc = rk__fail(RK_ENOMEM, "kernel '%s': no memory", id);
    else if (b->dev == 0) {
        rc = rk__mem_alloc(
            RK__MEM_DEVICE, ordinal, NULL, sizeof(rk_dev_barrier), 64, &p);
        if (rc == RK_OK)
            rc = rk__mem_zero_device(ordinal, p, sizeof(rk_dev_barrier));
        if (rc != RK_OK) {
            rk__mem_release(
                RK__MEM_DEVICE, ordinal, NULL, p, sizeof(rk_dev_barrier));
            free(b);
            b = NULL;
            rc = rk__fail(rc, "kernel '%s': barrier '%s': %s", id,
                c->device_barrier, rk_errdetail());
        } else {
            snprintf(b->name, sizeof(b->name), "%s", c->device_barrier);
            b->ordinal = ordinal;
            b->parties = c->device_barrier_parties;
            b->dev = (uint64_t)(uintptr_t)p;
            b->next = bars;
            bars = b;
        }
    }
    if (rc == RK_OK) {
        *out = b;
        *dev = b->dev;
    }
    pthread_mutex_unlock(&dev_lock);
    return rc;
}

int
rk__cu_res_launch(const struct rk__cuda_driver *d, const char *id, int ordinal,
    uint32_t grid, uint32_t per_sm, uint32_t sms, rk__cu_bar *bar,
    rk__cu_stream stream, int (*launch)(void *arg), void *arg,
    rk__cu_res **out)
{
    return rk__cu_res_launch_with(d, id, ordinal, grid, per_sm, sms, bar,
        stream, NULL, 0, launch, arg, out);
}

int
rk__cu_res_launch_with(const struct rk__cuda_driver *d, const char *id,
    int ordinal, uint32_t grid, uint32_t per_sm, uint32_t sms,
    rk__cu_bar *bar, rk__cu_stream stream, const rk__cu_partner *partners, uint32_t npartners,
    int (*launch)(void *arg), void *arg, rk__cu_res **out)
{
    rk__cu_res *e;
    uint64_t share;
    int rc;

    if ((e = calloc(1, sizeof(*e))) == NULL)
        return rk__fail(RK_ENOMEM, "kernel '%s': no memory", id);
    pthread_mutex_lock(&dev_lock);
    reap_zombies(d);
    rc = lost_of(ordinal) != NULL
        ? refuse_lost(id, lost_of(ordinal))
        : fits(id, ordinal, grid, per_sm, sms, &share, partners, npartners);
    if (rc == RK_OK && bar != NULL)
        rc = bar_fits(id, bar, grid, per_sm, sms);
    if (rc == RK_OK) {
        /* Counted in before it starts: a free decided from now on waits
         * for it (memory/mem.h). */
        rk__mem_resident(1);
        rc = launch(arg);
        if (rc == RK_OK) {
            *e = (rk__cu_res) { .next = residents,
                .ordinal = ordinal,
                .grid = grid,
                .share = share,
                .bar = bar,
                .stream = stream };
            snprintf(e->id, sizeof(e->id), "%s", id);
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
rk__cu_lost(int rc)
{
    pthread_mutex_lock(&dev_lock);
    if (rc != RK_OK && losts != NULL)
        rc = refuse_lost(NULL, losts);
    pthread_mutex_unlock(&dev_lock);
    return rc;
}
