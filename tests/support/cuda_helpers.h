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
#include "ringkernel/ringkernel.h"

/* The cpu fallback of the tests' cuda kernels: a handler is required,
 * and never runs under "cuda". */
static inline int
cuda_ignore_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    (void)ctx;
    (void)m;
    return RK_OK;
}

/* A runtime whose kernels run on the cuda backend. */
static inline rk_runtime *
cuda_runtime_new(void)
{
    rk_runtime *rt = NULL;
    rk_runtime_config cfg = { .no_static_kernels = true, .backend = "cuda" };
    assert_int_equal(rk_runtime_create(&rt, &cfg), RK_OK);
    return rt;
}

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

/* A new runtime in *rtp with kernel id running test_kernels.cu's rk_fail
 * (src) under supervision RESTART with max_restarts, launched and
 * activated (skips the test without NVRTC): a failing message is
 * dead-lettered and the kernel goes on. */
static inline rk_kernel
cuda_start_failing(
    rk_runtime **rtp, const char *id, const char *src, uint32_t max_restarts)
{
    rk_kernel_def def = { .id = id, .handler = cuda_ignore_handler };
    rk_kernel k;

    if (!cuda_have_nvrtc())
        skip();
    *rtp = cuda_runtime_new();
    def.config.device_source = src;
    def.config.device_entry = "rk_fail";
    def.config.batch = 8;
    def.config.supervision.policy = RK_SUPERVISE_RESTART;
    def.config.supervision.max_restarts = max_restarts;
    def.config.supervision.backoff_ns = 1000;
    assert_int_equal(rk_runtime_register(*rtp, &def), RK_OK);
    assert_int_equal(rk_kernel_lookup(*rtp, id, &k), RK_OK);
    assert_int_equal(rk_kernel_launch(*rtp, id), RK_OK);
    assert_int_equal(rk_kernel_activate(*rtp, id), RK_OK);
    return k;
}

/* One round on a cuda_start_failing kernel: nbad failing messages, then
 * "ok"; the answer to "ok" comes back and each failing one is
 * dead-lettered (RK_DEAD_FAILED). */
static inline void
cuda_fail_round(rk_runtime *rt, rk_kernel k, int nbad)
{
    const int64_t t = 30 * INT64_C(1000000000);
    unsigned char bad = 0xff, buf[128];
    rk_dead_letter dl;
    size_t len;

    for (int i = 0; i < nbad; i++)
        assert_int_equal(rk_send(rt, k, 1, &bad, 1, 128, t), RK_OK);
    assert_int_equal(rk_send(rt, k, 1, "ok", 2, 128, t), RK_OK);
    assert_int_equal(rk_recv(rt, k, NULL, buf, sizeof(buf), &len, t), RK_OK);
    assert_int_equal(len, 2);
    assert_memory_equal(buf, "ok", 2);
    for (int i = 0; i < nbad; i++) {
        assert_int_equal(
            rk_dead_letter_recv(rt, &dl, buf, sizeof(buf), t), RK_OK);
        assert_int_equal(dl.reason, RK_DEAD_FAILED);
        assert_int_equal(buf[0], 0xff);
    }
}

/* The main() of a CUDA test program: cuda_sim_begin (the stand-in
 * fake_lib unless RK_TEST_CUDA_REAL=1; *real says which), the device
 * kernels of tests/kernels/test_kernels.cu in *src, the n tests, then
 * the cache removed. Returns the exit status. */
static inline int
cuda_test_main(const struct CMUnitTest *tests, size_t n, const char *name,
    const char *fake_lib, char **src, int *real)
{
    char dir[128];
    int rc = cuda_sim_begin(fake_lib, dir, sizeof(dir));

    if (rc < 0)
        return 1;
    if (real != NULL)
        *real = rc;
    *src = cuda_slurp("tests/kernels/test_kernels.cu");
    if (*src == NULL)
        return 1;
    rc = _cmocka_run_group_tests(name, tests, n, NULL, NULL);
    free(*src);
    *src = NULL;
    return cuda_sim_end(dir) ? 1 : rc;
}

#endif /* RK_TEST_CUDA_HELPERS_H */
