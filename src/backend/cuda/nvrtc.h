/*
 * src/backend/cuda/nvrtc.h - run-time compilation of device sources with
 * NVRTC, reached through dlopen (never linked).
 *
 * rk__nvrtc_compile() compiles a user's handler source together with the
 * device headers (ringkernel/dev_kernel.h) for one GPU architecture:
 *   - an sm_XY cubin when this NVRTC can target the device's own
 *     architecture, loaded by the driver as is;
 *   - otherwise PTX for the newest compute_XY NVRTC supports at or below
 *     the device's, which the driver JIT-compiles at module load
 *     (cuModuleLoadDataEx passes the JIT log back).
 * A source that does not compile returns RK_ECOMPILE; the detail names the
 * user's file and line of the first error ("handler.cu:12: error: ...")
 * and the whole NVRTC log is returned in the image for the caller.
 *
 * The library is loaded once per process. RK_NVRTC_LIBRARY overrides the
 * path (tests point it at a missing file to check the "no NVRTC" error).
 *
 * Ownership: rk__nvrtc_image owns its data and log (rk__nvrtc_image_free).
 */
#ifndef RK_SRC_BACKEND_CUDA_NVRTC_H
#define RK_SRC_BACKEND_CUDA_NVRTC_H

#include <stddef.h>
#include <stdint.h>

#define RK__NVRTC_MIN_CC 70 /* acquire/release PTX needs sm_70 */

typedef struct rk__nvrtc_src {
    const char *name;   /* the user's file name, used in messages */
    const char *source; /* the user's handler source */
    int cc;             /* compute capability, major * 10 + minor */
    /* Directory holding ringkernel/dev_kernel.h; NULL: RK_INCLUDE_DIR from
     * the environment, else the copies of the device headers embedded in
     * the library (so an installed library needs no include tree). */
    const char *include_dir;
    const char *const *opts; /* extra NVRTC options, or NULL */
    size_t nopts;
    int want_ptx; /* 1: PTX even where a cubin is possible (inspection) */
    int raw;      /* 1: the source as is, without the header prelude */
    /* PTX to link with the compiled source (a Numba handler, jitlink.h),
     * with its NUL; NULL: none. rk__nvrtc_compile ignores it, the cache
     * key covers it. */
    const char *link_ptx;
    size_t link_ptx_size;
} rk__nvrtc_src;

enum { RK__IMG_CUBIN = 1, RK__IMG_PTX = 2 };

typedef struct rk__nvrtc_image {
    unsigned char *data; /* cubin, or PTX text with its NUL */
    size_t size;
    int kind;  /* RK__IMG_CUBIN or RK__IMG_PTX */
    int arch;  /* the arch compiled for, e.g. 90 */
    char *log; /* NVRTC's log (may be ""), or NULL */
} rk__nvrtc_image;

/* NVRTC's version (e.g. 13, 0). RK_ENVRTC when NVRTC cannot be loaded. */
int rk__nvrtc_version(int *major, int *minor);

/* The architecture and image kind rk__nvrtc_compile would produce for a
 * device of compute capability cc. RK_ENOTSUP below sm_70 or when NVRTC
 * supports nothing at or below cc; RK_ENVRTC without NVRTC. */
int rk__nvrtc_target(int cc, int *arch, int *kind);

/* Compiles. On RK_OK *out holds the image. On RK_ECOMPILE *out holds only
 * the log. Other errors: RK_ENVRTC, RK_ENOTSUP, RK_ENOMEM, RK_EINVAL. */
int rk__nvrtc_compile(const rk__nvrtc_src *src, rk__nvrtc_image *out);

void rk__nvrtc_image_free(rk__nvrtc_image *img);

/* The text NVRTC is given for src: the device header include, a #line
 * directive naming the user's file, then the user's source (malloc'd). */
char *rk__nvrtc_full_source(const rk__nvrtc_src *src);

/* The include directory rk__nvrtc_compile uses for src, or NULL when it
 * uses the embedded headers. */
const char *rk__nvrtc_include_dir(const rk__nvrtc_src *src);

/* dlopen of env_var's path when it is set, else of the first of
 * lib<base>.so.13, .so.12, .so and /usr/local/cuda/lib{64,}/lib<base>.so
 * that loads (RTLD_NOW | RTLD_LOCAL). NULL, with "cannot load <what>:
 * <dlerror>" in why, when none does. For NVRTC and nvJitLink. */
void *rk__dlopen_first(const char *env_var, const char *base,
    const char *what, char *why, size_t cap);

/* The device headers embedded at build time (cmake/RkEmbedDevHeaders):
 * include names ("ringkernel/dev_kernel.h") and texts. */
extern const size_t rk__dev_header_count;
extern const char *const rk__dev_header_names[];
extern const char *const rk__dev_header_texts[];

#endif /* RK_SRC_BACKEND_CUDA_NVRTC_H */
