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

/* Compiles the tree's file rel (e.g. "tools/ringkernel/pr_dev.h") as the
 * cuda backend compiles a kernel's device_source (dev_kernel.h first,
 * then #line) for sm_90: the cubin the backend loads there must name
 * entry, and the PTX, returned in *img (the caller frees it), must define
 * it. A compile error fails the test with NVRTC's log; without NVRTC the
 * test is skipped. */
static inline const char *
cuda_tree_ptx(const char *rel, const char *entry, rk__nvrtc_image *img)
{
    const char *name = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
    rk__nvrtc_src s = { .name = name, .cc = 90, .want_ptx = 0 };
    char *src, decl[160];

    if (!cuda_have_nvrtc())
        skip();
    src = cuda_slurp(rel);
    assert_non_null(src);
    s.source = src;
    for (int ptx = 0; ptx < 2; ptx++) {
        s.want_ptx = ptx;
        if (rk__nvrtc_compile(&s, img) != RK_OK)
            fail_msg("%s: %s\n%s", rel, rk_errdetail(),
                img->log ? img->log : "");
        assert_int_equal(img->kind, ptx ? RK__IMG_PTX : RK__IMG_CUBIN);
        if (!ptx) {
            assert_non_null(
                memmem(img->data, img->size, entry, strlen(entry)));
            rk__nvrtc_image_free(img);
        }
    }
    free(src);
    snprintf(decl, sizeof(decl), ".visible .entry %s(", entry);
    assert_non_null(strstr((const char *)img->data, decl));
    return (const char *)img->data;
}

/* A kernel's PTX keeps the lanes' protocol: system-scope acquire loads
 * and release stores, never a read-modify-write (PCIe does not make one
 * atomic), and no non-coherent load (ld.global.nc, ldu, tex) of memory
 * the kernel's messages change while it runs. */
static inline void
cuda_assert_lane_ptx(const char *ptx)
{
    assert_true(cuda_count_op(ptx, "ld.acquire.sys") > 0);
    assert_true(cuda_count_op(ptx, "st.release.sys") > 0);
    assert_int_equal(cuda_count_op(ptx, "atom."), 0);
    assert_int_equal(cuda_count_op(ptx, "red."), 0);
    assert_int_equal(cuda_count_op(ptx, "ld.global.nc"), 0);
    assert_int_equal(cuda_count_op(ptx, "ldu."), 0);
    assert_int_equal(cuda_count_op(ptx, "tex."), 0);
}

#endif /* RK_TEST_CUDA_HELPERS_H */
