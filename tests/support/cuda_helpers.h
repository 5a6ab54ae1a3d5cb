/*
 * tests/support/cuda_helpers.h - shared pieces of the CUDA tests.
 *
 * Header-only (static inline); include after cmocka.h.
 */
#ifndef RK_TEST_CUDA_HELPERS_H
#define RK_TEST_CUDA_HELPERS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/nvrtc.h"
#include "ringkernel/error.h"
#include "ringkernel/ringkernel.h"

/* True when NVRTC loads; otherwise says why (the caller skips). */
static inline int
cuda_have_nvrtc(void)
{
    int a, b;
    if (rk__nvrtc_version(&a, &b) != RK_OK) {
        print_message("NVRTC not available: %s\n", rk_errdetail());
        return 0;
    }
    return 1;
}

/* A kernel's host handler where only its device code runs (the cpu
 * fallback a definition needs; never called under "cuda"). */
static inline int
cuda_ignore_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    (void)ctx;
    (void)m;
    return RK_OK;
}

/* A runtime on the cuda backend whose lifecycle calls give up after
 * control_ns (terminate after 10 s), so a broken case fails within
 * seconds instead of hanging. */
static inline rk_runtime *
cuda_runtime_bounded(int64_t control_ns)
{
    rk_runtime *rt = NULL;
    rk_runtime_config cfg = { .no_static_kernels = true,
        .backend = "cuda",
        .control_timeout_ns = control_ns,
        .terminate_timeout_ns = 10000000000ll };
    assert_int_equal(rk_runtime_create(&rt, &cfg), RK_OK);
    return rt;
}

/* A file of the source tree as a malloc'd string, or NULL. */
static inline char *
cuda_slurp(const char *rel)
{
    char path[512];
    FILE *f;
    long n;
    char *s;

    snprintf(path, sizeof(path), "%s/%s", RK_SOURCE_DIR, rel);
    f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s != NULL && fread(s, 1, (size_t)n, f) == (size_t)n) {
        s[n] = '\0';
    } else {
        free(s);
        s = NULL;
    }
    fclose(f);
    return s;
}

/* Counts PTX instructions starting with op (after an optional predicate),
 * so "ld.shared" never counts as "red.". */
static inline int
cuda_count_op(const char *ptx, const char *op)
{
    int n = 0;
    size_t ol = strlen(op);
    for (const char *l = ptx; l && *l;
         l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *p = l;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '@') {
            while (*p && *p != ' ' && *p != '\t' && *p != '\n')
                p++;
            while (*p == ' ' || *p == '\t')
                p++;
        }
        if (strncmp(p, op, ol) == 0)
            n++;
    }
    return n;
}

/* Before anything loads the driver: the stand-in fake_lib unless
 * RK_TEST_CUDA_REAL=1 asks for the real driver, and a private kernel
 * cache in a new directory (dir, cap bytes). Returns 1 on a real GPU, 0
 * on the stand-in, -1 when the directory cannot be made. */
static inline int
cuda_sim_begin(const char *fake_lib, char *dir, size_t cap)
{
    const char *real = getenv("RK_TEST_CUDA_REAL");
    int real_gpu = real != NULL && strcmp(real, "1") == 0;
    if (!real_gpu)
        setenv("RK_CUDA_DRIVER", fake_lib, 1);
    snprintf(dir, cap, "/tmp/rk-fake-cache-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    setenv("RK_KERNEL_CACHE_DIR", dir, 1);
    return real_gpu;
}

/* Removes cuda_sim_begin's cache directory: 0, or 1 when that fails. */
static inline int
cuda_sim_end(const char *dir)
{
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) != 0;
}

#endif /* RK_TEST_CUDA_HELPERS_H */
