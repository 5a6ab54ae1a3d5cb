/*
 * src/backend/cuda/jitlink.h - linking device code from two compilers into
 * one cubin: the persistent loop (NVRTC, relocatable) and a handler that
 * Numba compiled to PTX with the C ABI (docs/cuda-programming.md,
 * "Handlers in Python").
 *
 * The linker is nvJitLink, reached through dlopen like NVRTC
 * (libnvJitLink.so.13, .so.12, .so, /usr/local/cuda/lib{64,};
 * RK_NVJITLINK_LIBRARY overrides). Where it cannot be loaded, the driver's
 * own linker (cuLinkCreate / cuLinkAddData / cuLinkComplete) is used if the
 * caller hands its entry points (they need a current context); with
 * neither, RK_ENVRTC.
 *
 * rk__jitlink_compile() goes through the kernel cache: the key covers the
 * loop's source and headers (rk__kcache_key) and the handler's PTX
 * (rk__nvrtc_src.link_ptx), so a change to either is a miss.
 *
 * Ownership: the image returned is the caller's (rk__nvrtc_image_free).
 */
#ifndef RK_SRC_BACKEND_CUDA_JITLINK_H
#define RK_SRC_BACKEND_CUDA_JITLINK_H

#include <stddef.h>

#include "backend/cuda/kcache.h"
#include "backend/cuda/nvrtc.h"

/* The driver's linker (cuda.h's cuLink* _v2 entry points), or all NULL. */
typedef struct rk__jitlink_drv {
    int (*create)(unsigned, int *, void **, void **);
    int (*add_data)(
        void *, int, void *, size_t, const char *, unsigned, int *, void **);
    int (*complete)(void *, void **, size_t *);
    int (*destroy)(void *);
} rk__jitlink_drv;

/* nvJitLink's version (e.g. 13, 0); RK_ENVRTC when it cannot be loaded
 * (the detail says why). */
int rk__jitlink_version(unsigned *major, unsigned *minor);

/*
 * Links n images (each RK__IMG_CUBIN, relocatable, or RK__IMG_PTX with
 * its NUL) into a cubin for sm_<arch>. drv may be NULL (no fallback).
 * RK_ECOMPILE when the link fails (an unresolved symbol, a bad image): the
 * detail holds the linker's first error, out->log the whole log.
 */
int rk__jitlink_link(const rk__nvrtc_image *in, size_t n, int arch,
    const rk__jitlink_drv *drv, rk__nvrtc_image *out);

/*
 * The loop src (its link_ptx naming the handler's PTX) compiled by NVRTC
 * with -rdc and linked with that PTX into a cubin, through the cache c.
 * *how says where the image came from (RK__KC_*). Errors are NVRTC's
 * (RK_ECOMPILE with the loop's file:line) or the link's.
 */
int rk__jitlink_compile(rk__kcache *c, const rk__nvrtc_src *src,
    const rk__jitlink_drv *drv, rk__nvrtc_image *img, int *how);

#endif /* RK_SRC_BACKEND_CUDA_JITLINK_H */
