/*
 * src/backend/cuda/jitlink.c - nvJitLink through dlopen, the driver's
 * linker as the fallback, and the loop + Numba handler compile (see
 * jitlink.h).
 *
 * The library is loaded inside pthread_once; afterwards the table is
 * read-only. nvJitLink is thread-safe for distinct handles.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/jitlink.h"
#include "common/common.h"

typedef struct nvjl *nvjl_handle;
enum { NVJL_INPUT_CUBIN = 1, NVJL_INPUT_PTX = 2 };
enum { CU_JIT_ERRLOG = 5, CU_JIT_ERRLOG_SIZE = 6 };
enum { CU_INPUT_CUBIN = 0, CU_INPUT_PTX = 1 };

/* X(field, symbol, parameters): every entry is required. */
#define JL_FNS(X)                                                             \
    X(version, "nvJitLinkVersion", (unsigned *, unsigned *))                  \
    X(create, "nvJitLinkCreate", (nvjl_handle *, uint32_t, const char **))    \
    X(destroy, "nvJitLinkDestroy", (nvjl_handle *))                           \
    X(add, "nvJitLinkAddData",                                                \
        (nvjl_handle, int, const void *, size_t, const char *))               \
    X(complete, "nvJitLinkComplete", (nvjl_handle))                           \
    X(cubin_size, "nvJitLinkGetLinkedCubinSize", (nvjl_handle, size_t *))     \
    X(cubin, "nvJitLinkGetLinkedCubin", (nvjl_handle, void *))                \
    X(log_size, "nvJitLinkGetErrorLogSize", (nvjl_handle, size_t *))          \
    X(log, "nvJitLinkGetErrorLog", (nvjl_handle, char *))

static struct {
#define JL_FIELD(f, sym, params) int(*f) params;
    JL_FNS(JL_FIELD)
#undef JL_FIELD
    void *lib;
    unsigned major, minor;
} jl;

static pthread_once_t jl_once = PTHREAD_ONCE_INIT;
static int jl_status = RK_ENVRTC;
static char jl_detail[320];

static void
jl_load(void)
{
    jl.lib = rk__dlopen_first("RK_NVJITLINK_LIBRARY", "nvJitLink", "nvJitLink",
        jl_detail, sizeof(jl_detail));
    if (jl.lib == NULL)
        return;
#define JL_RESOLVE(f, sym, params)                                            \
    if ((*(void **)(&jl.f) = dlsym(jl.lib, sym)) == NULL) {                   \
        snprintf(jl_detail, sizeof(jl_detail),                                \
            "nvJitLink library lacks the entry point %s", sym);               \
        return;                                                               \
    }
    JL_FNS(JL_RESOLVE)
#undef JL_RESOLVE
    jl_status = jl.version(&jl.major, &jl.minor) == 0 ? RK_OK : RK_ENVRTC;
    snprintf(jl_detail, sizeof(jl_detail), "nvJitLink %s",
        jl_status == RK_OK ? "loaded" : "does not report its version");
}

/* RK_OK once nvJitLink is loaded, else RK_ENVRTC saying why. */
static int
jl_ready(void)
{
    pthread_once(&jl_once, jl_load);
    return jl_status == RK_OK ? RK_OK : rk__fail(RK_ENVRTC, "%s", jl_detail);
}

int
rk__jitlink_version(unsigned *major, unsigned *minor)
{
    int rc = jl_ready();
    *major = rc == RK_OK ? jl.major : 0;
    *minor = rc == RK_OK ? jl.minor : 0;
    return rc;
}

/* The log's first line that says "error" (else its first line), for the
 * detail. */
static int
link_failed(const char *log, int arch)
{
    const char *p = log != NULL ? strstr(log, "error") : NULL;
    const char *ls = p, *le;

    if (p == NULL)
        ls = p = log != NULL ? log : "";
    while (ls > log && ls[-1] != '\n')
        ls--;
    le = strchr(p, '\n');
    if (le == NULL)
        le = p + strlen(p);
    return rk__fail(RK_ECOMPILE, "link for sm_%d failed: %.*s", arch,
        (int)(le - ls > 300 ? 300 : le - ls), ls);
}

static int
link_nvjitlink(
    const rk__nvrtc_image *in, size_t n, int arch, rk__nvrtc_image *out)
{
    char archopt[32];
    const char *opts[1] = { archopt };
    nvjl_handle h = NULL;
    size_t size = 0, logn = 0;
    int r;

    snprintf(archopt, sizeof(archopt), "-arch=sm_%d", arch);
    if ((r = jl.create(&h, 1, opts)) != 0)
        return rk__fail(RK_ENVRTC, "nvJitLinkCreate failed (%d)", r);
    for (size_t i = 0; i < n && r == 0; i++)
        r = jl.add(h,
            in[i].kind == RK__IMG_CUBIN ? NVJL_INPUT_CUBIN : NVJL_INPUT_PTX,
            in[i].data, in[i].size, i == 0 ? "loop" : "handler");
    if (r == 0)
        r = jl.complete(h);
    if (r != 0) {
        if (jl.log_size(h, &logn) == 0 && (out->log = malloc(logn + 1)) != NULL
            && (logn == 0 || jl.log(h, out->log) != 0))
            out->log[0] = '\0';
        if (out->log != NULL)
            out->log[logn] = '\0';
        jl.destroy(&h);
        return link_failed(out->log, arch);
    }
    if (jl.cubin_size(h, &size) != 0 || size == 0
        || (out->data = malloc(size)) == NULL || jl.cubin(h, out->data) != 0) {
        jl.destroy(&h);
        rk__nvrtc_image_free(out);
        return rk__fail(RK_ENOMEM, "cannot fetch the linked cubin");
    }
    jl.destroy(&h);
    out->size = size;
    return RK_OK;
}

/* The driver's linker: the image it returns belongs to the link state,
 * so it is copied before the state is destroyed. */
static int
link_driver(const rk__nvrtc_image *in, size_t n, int arch,
    const rk__jitlink_drv *drv, rk__nvrtc_image *out)
{
    char errlog[1024];
    int opt[2] = { CU_JIT_ERRLOG, CU_JIT_ERRLOG_SIZE };
    void *val[2] = { errlog, (void *)(uintptr_t)sizeof(errlog) };
    void *st = NULL, *cubin = NULL;
    size_t size = 0;
    int r;

    errlog[0] = '\0';
    if ((r = drv->create(2, opt, val, &st)) != 0)
        return rk__fail(RK_ECUDA, "cuLinkCreate failed (%d)", r);
    for (size_t i = 0; i < n && r == 0; i++)
        r = drv->add_data(st,
            in[i].kind == RK__IMG_CUBIN ? CU_INPUT_CUBIN : CU_INPUT_PTX,
            in[i].data, in[i].size, i == 0 ? "loop" : "handler", 0, NULL,
            NULL);
    if (r == 0)
        r = drv->complete(st, &cubin, &size);
    if (r != 0) {
        errlog[sizeof(errlog) - 1] = '\0';
        out->log = strdup(errlog);
        drv->destroy(st);
        return link_failed(out->log, arch);
    }
    if ((out->data = malloc(size)) == NULL) {
        drv->destroy(st);
        return rk__fail(RK_ENOMEM, "no memory for the linked cubin");
    }
    memcpy(out->data, cubin, size);
    out->size = size;
    drv->destroy(st);
    return RK_OK;
}

int
rk__jitlink_link(const rk__nvrtc_image *in, size_t n, int arch,
    const rk__jitlink_drv *drv, rk__nvrtc_image *out)
{
    int rc;

    memset(out, 0, sizeof(*out));
    if (in == NULL || n == 0 || arch <= 0)
        return rk__fail(RK_EINVAL, "rk__jitlink_link: bad arguments");
    rc = jl_ready();
    if (rc == RK_OK)
        rc = link_nvjitlink(in, n, arch, out);
    else if (drv != NULL && drv->create != NULL)
        rc = link_driver(in, n, arch, drv, out);
    if (rc == RK_OK) {
        out->kind = RK__IMG_CUBIN;
        out->arch = arch;
    }
    return rc;
}

int
rk__jitlink_compile(rk__kcache *c, const rk__nvrtc_src *src,
    const rk__jitlink_drv *drv, rk__nvrtc_image *img, int *how)
{
    const char *opts[33];
    rk__nvrtc_src loop = *src;
    rk__nvrtc_image parts[2];
    int major, minor, arch, kind, rc;
    rk__kkey key;

    *how = RK__KC_MISS;
    memset(img, 0, sizeof(*img));
    if (src->link_ptx == NULL || src->link_ptx_size == 0 || src->nopts > 31
        || memchr(src->link_ptx, '\0', src->link_ptx_size) == NULL)
        return rk__fail(RK_EINVAL, "rk__jitlink_compile: no PTX to link");
    /* The loop as relocatable code: a cubin for the device's own sm_XY,
     * else PTX for the newest arch below, which the link compiles. */
    for (size_t i = 0; i < src->nopts; i++)
        opts[i] = src->opts[i];
    opts[src->nopts] = "-rdc=true";
    loop.opts = opts;
    loop.nopts = src->nopts + 1;
    if ((rc = rk__nvrtc_version(&major, &minor)) != RK_OK
        || (rc = rk__nvrtc_target(src->cc, &arch, &kind)) != RK_OK
        || (rc = rk__kcache_key(
                &loop, major, minor, arch, RK__IMG_CUBIN, &key))
            != RK_OK)
        return rc;
    if ((*how = rk__kcache_get(c, &key, img)) != RK__KC_MISS)
        return RK_OK;
    if ((rc = rk__nvrtc_compile(&loop, &parts[0])) != RK_OK) {
        *img = parts[0]; /* the log */
        return rc;
    }
    parts[1].data = (unsigned char *)(uintptr_t)src->link_ptx;
    parts[1].size = src->link_ptx_size;
    parts[1].kind = RK__IMG_PTX;
    rc = rk__jitlink_link(parts, 2, arch, drv, img);
    rk__nvrtc_image_free(&parts[0]);
    if (rc == RK_OK)
        (void)rk__kcache_put(c, &key, img); /* a disk failure is not fatal */
    return rc;
}
