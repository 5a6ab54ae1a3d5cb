/*
 * src/backend/cuda/nvrtc.c - NVRTC through dlopen (see nvrtc.h).
 *
 * The library is loaded inside pthread_once; afterwards the table is
 * read-only. NVRTC itself is thread-safe for distinct programs.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/nvrtc.h"
#include "common/common.h"

typedef int nv_result; /* nvrtcResult; NVRTC_SUCCESS == 0 */
typedef struct nv_prog *nv_program;

#define NV_ERROR_COMPILATION 6

/* X(field, symbol, parameters): every entry is required. */
#define NV_FNS(X)                                                             \
    X(version, "nvrtcVersion", (int *, int *))                                \
    X(num_archs, "nvrtcGetNumSupportedArchs", (int *))                        \
    X(archs, "nvrtcGetSupportedArchs", (int *))                               \
    X(create, "nvrtcCreateProgram",                                           \
        (nv_program *, const char *, const char *, int, const char *const *,  \
            const char *const *))                                             \
    X(compile, "nvrtcCompileProgram", (nv_program, int, const char *const *)) \
    X(log_size, "nvrtcGetProgramLogSize", (nv_program, size_t *))             \
    X(log, "nvrtcGetProgramLog", (nv_program, char *))                        \
    X(ptx_size, "nvrtcGetPTXSize", (nv_program, size_t *))                    \
    X(ptx, "nvrtcGetPTX", (nv_program, char *))                               \
    X(cubin_size, "nvrtcGetCUBINSize", (nv_program, size_t *))                \
    X(cubin, "nvrtcGetCUBIN", (nv_program, char *))                           \
    X(destroy, "nvrtcDestroyProgram", (nv_program *))

static struct {
#define NV_FIELD(f, sym, params) nv_result(*f) params;
    NV_FNS(NV_FIELD)
#undef NV_FIELD
    const char *(*err_string)(nv_result);
    void *lib;
    int major, minor;
    int archs_n;
    int arch_list[64];
} nv;

static pthread_once_t nv_once = PTHREAD_ONCE_INIT;
static int nv_status = RK_ENVRTC;
static char nv_detail[320];

void *
rk__dlopen_first(const char *env_var, const char *base, const char *what,
    char *why, size_t cap)
{
    static const char *const where[] = { "lib%s.so.13", "lib%s.so.12",
        "lib%s.so", "/usr/local/cuda/lib64/lib%s.so",
        "/usr/local/cuda/lib/lib%s.so" };
    const char *env = getenv(env_var);
    const char *e = NULL;
    char name[128];
    void *lib = NULL;

    if (env != NULL && env[0] != '\0') {
        lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        e = lib ? NULL : dlerror();
    }
    for (size_t i = 0; (env == NULL || env[0] == '\0') && lib == NULL
         && i < RK__ARRAY_LEN(where);
         i++) {
        snprintf(name, sizeof(name), where[i], base);
        if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) == NULL)
            e = dlerror();
    }
    if (lib == NULL)
        snprintf(why, cap, "cannot load %s: %s", what, e ? e : "not found");
    return lib;
}

static void
nv_load(void)
{
    int n = 0;

    nv.lib = rk__dlopen_first(
        "RK_NVRTC_LIBRARY", "nvrtc", "NVRTC", nv_detail, sizeof(nv_detail));
    if (nv.lib == NULL)
        return;
#define NV_RESOLVE(f, sym, params)                                            \
    *(void **)(&nv.f) = dlsym(nv.lib, sym);                                   \
    if (nv.f == NULL) {                                                       \
        snprintf(nv_detail, sizeof(nv_detail),                                \
            "NVRTC library lacks the entry point %s", sym);                   \
        return;                                                               \
    }
    NV_FNS(NV_RESOLVE)
#undef NV_RESOLVE
    *(void **)(&nv.err_string) = dlsym(nv.lib, "nvrtcGetErrorString");
    if (nv.version(&nv.major, &nv.minor) != 0 || nv.num_archs(&n) != 0
        || n <= 0 || n > (int)RK__ARRAY_LEN(nv.arch_list)
        || nv.archs(nv.arch_list) != 0) {
        snprintf(nv_detail, sizeof(nv_detail),
            "NVRTC does not report its version or architectures");
        return;
    }
    nv.archs_n = n;
    nv_status = RK_OK;
}

static int
nv_ready(void)
{
    pthread_once(&nv_once, nv_load);
    if (nv_status != RK_OK)
        return rk__fail(RK_ENVRTC, "%s", nv_detail);
    return RK_OK;
}

int
rk__nvrtc_version(int *major, int *minor)
{
    int rc = nv_ready();
    if (rc == RK_OK) {
        *major = nv.major;
        *minor = nv.minor;
    }
    return rc;
}

int
rk__nvrtc_target(int cc, int *arch, int *kind)
{
    int best = 0, rc = nv_ready();

    if (rc != RK_OK)
        return rc;
    if (cc < RK__NVRTC_MIN_CC)
        return rk__fail(RK_ENOTSUP,
            "compute capability %d.%d: ringkernel's device code needs 7.0 "
            "or newer",
            cc / 10, cc % 10);
    for (int i = 0; i < nv.archs_n; i++) {
        if (nv.arch_list[i] == cc) {
            *arch = cc;
            *kind = RK__IMG_CUBIN;
            return RK_OK;
        }
        if (nv.arch_list[i] < cc && nv.arch_list[i] > best)
            best = nv.arch_list[i];
    }
    if (best == 0)
        return rk__fail(RK_ENOTSUP,
            "NVRTC %d.%d supports no architecture at or below "
            "compute capability %d.%d",
            nv.major, nv.minor, cc / 10, cc % 10);
    *arch = best;
    *kind = RK__IMG_PTX;
    return RK_OK;
}

const char *
rk__nvrtc_include_dir(const rk__nvrtc_src *src)
{
    const char *env = getenv("RK_INCLUDE_DIR");

    if (src->include_dir != NULL)
        return src->include_dir;
    if (env != NULL && env[0] != '\0')
        return env;
    return NULL; /* the embedded headers */
}

char *
rk__nvrtc_full_source(const rk__nvrtc_src *src)
{
    static const char fmt[] = "#include \"ringkernel/dev_kernel.h\"\n"
                              "#line 1 \"%s\"\n%s\n";
    size_t n = sizeof(fmt) + strlen(src->name) + strlen(src->source);
    char *s = malloc(n);

    if (s != NULL && src->raw)
        snprintf(s, n, "%s", src->source);
    else if (s != NULL)
        snprintf(s, n, fmt, src->name, src->source);
    return s;
}

/* "name(12): error: text" -> "name:12: error: text" for the detail. */
static void
first_error(const char *log, const char *name, char *out, size_t cap)
{
    const char *p = strstr(log, ": error");
    const char *ls, *le, *paren;
    size_t nl = strlen(name);

    if (p == NULL) {
        snprintf(out, cap, "%.200s", log);
        return;
    }
    ls = p;
    while (ls > log && ls[-1] != '\n')
        ls--;
    le = strchr(p, '\n');
    if (le == NULL)
        le = p + strlen(p);
    paren = ls + nl;
    if (strncmp(ls, name, nl) == 0 && *paren == '(') {
        int line = atoi(paren + 1);
        snprintf(out, cap, "%s:%d%.*s", name, line, (int)(le - p), p);
    } else {
        snprintf(out, cap, "%.*s", (int)(le - ls), ls);
    }
}

static char *
prog_log(nv_program prog)
{
    size_t n = 0;
    char *log;

    if (nv.log_size(prog, &n) != 0)
        n = 0;
    log = malloc(n + 1);
    if (log == NULL)
        return NULL;
    log[0] = '\0';
    if (n > 0 && nv.log(prog, log) != 0)
        log[0] = '\0';
    log[n] = '\0';
    return log;
}

int
rk__nvrtc_compile(const rk__nvrtc_src *src, rk__nvrtc_image *out)
{
    char archopt[48], incopt[1100], first[400];
    const char *inc;
    const char *opts[40];
    int nopts = 0, arch, kind, rc;
    nv_program prog = NULL;
    nv_result r;
    char *full;
    size_t n = 0;

    memset(out, 0, sizeof(*out));
    if (src == NULL || src->name == NULL || src->source == NULL
        || src->nopts > 32)
        return rk__fail(RK_EINVAL, "rk__nvrtc_compile: bad arguments");
    if ((rc = rk__nvrtc_target(src->cc, &arch, &kind)) != RK_OK)
        return rc;
    if (src->want_ptx)
        kind = RK__IMG_PTX;
    snprintf(archopt, sizeof(archopt), "--gpu-architecture=%s_%d",
        kind == RK__IMG_CUBIN ? "sm" : "compute", arch);
    opts[nopts++] = archopt;
    if ((inc = rk__nvrtc_include_dir(src)) != NULL) {
        snprintf(incopt, sizeof(incopt), "-I%s", inc);
        opts[nopts++] = incopt;
    }
    opts[nopts++] = "--std=c++17";
    opts[nopts++] = "-default-device";
    for (size_t i = 0; i < src->nopts; i++)
        opts[nopts++] = src->opts[i];

    if ((full = rk__nvrtc_full_source(src)) == NULL)
        return rk__fail(RK_ENOMEM, "no memory for the source");
    r = inc != NULL
        ? nv.create(&prog, full, src->name, 0, NULL, NULL)
        : nv.create(&prog, full, src->name, (int)rk__dev_header_count,
            rk__dev_header_texts, rk__dev_header_names);
    free(full);
    if (r != 0)
        return rk__fail(RK_ENVRTC, "nvrtcCreateProgram failed (%d: %s)", r,
            nv.err_string ? nv.err_string(r) : "?");
    r = nv.compile(prog, nopts, opts);
    out->log = prog_log(prog);
    if (r == NV_ERROR_COMPILATION) {
        first_error(out->log ? out->log : "", src->name, first, sizeof(first));
        nv.destroy(&prog);
        return rk__fail(RK_ECOMPILE, "%s (sm_%d)", first, arch);
    }
    if (r != 0) {
        nv.destroy(&prog);
        rk__nvrtc_image_free(out);
        return rk__fail(RK_ENVRTC, "nvrtcCompileProgram failed (%d: %s)", r,
            nv.err_string ? nv.err_string(r) : "?");
    }
    r = kind == RK__IMG_CUBIN ? nv.cubin_size(prog, &n)
                              : nv.ptx_size(prog, &n);
    if (r == 0 && n > 0 && (out->data = malloc(n)) != NULL)
        r = kind == RK__IMG_CUBIN ? nv.cubin(prog, (char *)out->data)
                                  : nv.ptx(prog, (char *)out->data);
    nv.destroy(&prog);
    if (r != 0 || out->data == NULL) {
        rk__nvrtc_image_free(out);
        return rk__fail(r != 0 ? RK_ENVRTC : RK_ENOMEM,
            "cannot fetch the compiled image (%d)", r);
    }
    out->size = n;
    out->kind = kind;
    out->arch = arch;
    return RK_OK;
}

void
rk__nvrtc_image_free(rk__nvrtc_image *img)
{
    free(img->data);
    free(img->log);
    img->data = NULL;
    img->log = NULL;
    img->size = 0;
}
