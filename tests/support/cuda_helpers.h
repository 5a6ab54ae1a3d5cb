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

#include <dlfcn.h>
#include <stdint.h>

#include "backend/cuda/nvrtc.h"
#include "ringkernel/device.h"
#include "ringkernel/error.h"
#include "ringkernel/runtime.h"

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

/* CUDA devices the driver reports (0 without one). */
static inline int
cuda_device_count(void)
{
    rk_device_list *l;
    int n = 0;
    assert_int_equal(rk_devices_query(&l), RK_OK);
    for (size_t i = 0; i < rk_device_list_count(l); i++)
        n += rk_device_list_get(l, i)->kind == RK_DEVICE_CUDA;
    rk_device_list_free(l);
    return n;
}

/* Skips the calling test when NVRTC does not load (cuda_have_nvrtc). */
static inline void
cuda_require_nvrtc(void)
{
    if (!cuda_have_nvrtc())
        skip();
}

/* A made-up image of n bytes (seed + i * step) for the cache tests. */
static inline rk__nvrtc_image
cuda_test_image(size_t n, unsigned char seed, unsigned step, int kind)
{
    rk__nvrtc_image img = { 0 };
    img.data = malloc(n);
    assert_non_null(img.data);
    for (size_t i = 0; i < n; i++)
        img.data[i] = (unsigned char)(seed + i * step);
    img.size = n;
    img.kind = kind;
    img.arch = 90;
    return img;
}

/* A file as a malloc'd string, or NULL. */
static inline char *
cuda_slurp_path(const char *path)
{
    FILE *f;
    long n;
    char *s;

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

/* A file of the source tree as a malloc'd string, or NULL. */
static inline char *
cuda_slurp(const char *rel)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", RK_SOURCE_DIR, rel);
    return cuda_slurp_path(path);
}

/* Lines of ptx that contain s anywhere (".sys": every system-scope
 * access or fence, whatever its opcode). */
static inline int
cuda_count_lines_with(const char *ptx, const char *s)
{
    int n = 0;
    for (const char *l = ptx; l != NULL && *l != '\0';) {
        const char *e = strchr(l, '\n');
        size_t len = e != NULL ? (size_t)(e - l) : strlen(l);
        if (memmem(l, len, s, strlen(s)) != NULL)
            n++;
        l = e != NULL ? e + 1 : NULL;
    }
    return n;
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

/* Compiles src (named name) for sm_<cc> to PTX, returned (the caller
 * frees it); raw: without the device API prelude. A compile error fails
 * the test with NVRTC's log. */
static inline char *
cuda_compile_ptx(const char *name, const char *src, int cc, int raw)
{
    rk__nvrtc_src s
        = { .name = name, .source = src, .cc = cc, .want_ptx = 1, .raw = raw };
    rk__nvrtc_image img;
    int rc = rk__nvrtc_compile(&s, &img);
    char *ptx;

    if (rc != RK_OK)
        fail_msg("%s: %s\n%s", name, rk_errdetail(), img.log ? img.log : "");
    assert_int_equal(img.kind, RK__IMG_PTX);
    assert_int_equal(img.arch, cc);
    ptx = (char *)img.data;
    img.data = NULL;
    rk__nvrtc_image_free(&img);
    return ptx;
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

/* ptx has none of ops (a NULL-ended list of instruction prefixes, e.g.
 * system-scope fences): the test fails naming the first found. */
static inline void
cuda_assert_no_ops(const char *ptx, const char *const *ops)
{
    for (; *ops != NULL; ops++)
        if (cuda_count_op(ptx, *ops) != 0)
            fail_msg("%d x %s in the PTX", cuda_count_op(ptx, *ops), *ops);
}

/* No system-scope fence and no read-modify-write. */
#define CUDA_NO_SYS_FENCE                                                     \
    "membar.sys", "fence.sc.sys", "fence.acq_rel.sys", "atom.", "red."

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

/* Symbol name of the stand-in driver lib (a test-only export), or NULL
 * when lib is not loaded or lacks it (a real driver). */
static inline void *
cuda_fake_sym(const char *lib, const char *name)
{
    void *h, *fn;
    if (lib == NULL || (h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD)) == NULL)
        return NULL;
    fn = dlsym(h, name);
    dlclose(h);
    return fn;
}

/* The last test of a stand-in program: no driver call it made would have
 * hung on a GPU (a module load, a free or a synchronise while a
 * persistent kernel was resident; fake_cuda_hangs). Skips on a GPU. */
static inline void
cuda_assert_no_hang(const char *fake_lib, int real_gpu)
{
    unsigned (*hangs)(void);
    if (real_gpu)
        skip();
    *(void **)&hangs = cuda_fake_sym(fake_lib, "fake_cuda_hangs");
    assert_non_null(hangs);
    assert_int_equal(hangs(), 0);
}

/* Defines the test test_no_call_would_hang: cuda_assert_no_hang with
 * FAKE_CUDA_LIB. */
#define CUDA_TEST_NO_HANG(real_gpu)                                           \
    static void test_no_call_would_hang(void **state)                         \
    {                                                                         \
        (void)state;                                                          \
        cuda_assert_no_hang(FAKE_CUDA_LIB, real_gpu);                         \
    }

/* The cpu fallback of a device kernel's definition: never runs under
 * "cuda". */
static inline int
cuda_ignore_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    (void)ctx;
    (void)m;
    return RK_OK;
}

/* A runtime whose kernels run on the cuda backend. */
static inline rk_runtime *
cuda_test_runtime(void)
{
    rk_runtime *rt = NULL;
    rk_runtime_config cfg = { .no_static_kernels = true, .backend = "cuda" };
    assert_int_equal(rk_runtime_create(&rt, &cfg), RK_OK);
    return rt;
}

/* A device kernel to register: grid blocks of 64 threads, batch 8. */
typedef struct cuda_kdef {
    const char *id, *src, *src_name, *entry;
    uint32_t grid, max_payload;
    int device;
    const char *barrier;
    uint32_t parties;
    rk_supervision supervision;
    uint32_t output_capacity; /* 0: the default */
} cuda_kdef;

static inline void
cuda_register(rk_runtime *rt, const cuda_kdef *k)
{
    rk_kernel_def def = { .id = k->id, .handler = cuda_ignore_handler };
    def.config.device_source = k->src;
    def.config.device_entry = k->entry;
    def.config.device_source_name = k->src_name;
    def.config.grid_size = k->grid;
    def.config.block_size = 64;
    def.config.batch = 8;
    def.config.max_payload = k->max_payload;
    def.config.device = k->device;
    def.config.device_barrier = k->barrier;
    def.config.device_barrier_parties = k->parties;
    def.config.supervision = k->supervision;
    def.config.output_capacity = k->output_capacity;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
}

/* Kernel id's launch fails with rc, the detail naming it ('id') and
 * containing why; the kernel is left CREATED. */
static inline void
cuda_assert_refused(rk_runtime *rt, const char *id, int rc, const char *why)
{
    char named[RK_ID_MAX + 3];
    rk_kernel_state s;

    snprintf(named, sizeof(named), "'%s'", id);
    assert_int_equal(rk_kernel_launch(rt, id), rc);
    assert_non_null(strstr(rk_errdetail(), named));
    assert_non_null(strstr(rk_errdetail(), why));
    assert_int_equal(rk_kernel_state_get(rt, id, &s), RK_OK);
    assert_int_equal(s, RK_KERNEL_CREATED);
}

/* Launches and activates kernel id; its handle. */
static inline rk_kernel
cuda_start(rk_runtime *rt, const char *id)
{
    rk_kernel k;
    assert_int_equal(rk_kernel_lookup(rt, id, &k), RK_OK);
    if (rk_kernel_launch(rt, id) != RK_OK)
        fail_msg("launch '%s': %s", id, rk_errdetail());
    assert_int_equal(rk_kernel_activate(rt, id), RK_OK);
    return k;
}

/* Terminates each kernel of ids (NULL-ended; a kernel that ended is
 * fine), then destroys rt. */
static inline void
cuda_finish(rk_runtime *rt, const char *const *ids)
{
    for (; *ids != NULL; ids++)
        assert_int_equal(
            rk_kernel_terminate(rt, *ids, 30 * INT64_C(1000000000)), RK_OK);
    rk_runtime_destroy(rt);
}

/* n messages ("hop0", "hop1", ...) sent to kernel a come out of kernel b
 * (of at most 128-byte payloads), in order: one route or a chain of them
 * between two rk_echo kernels. */
static inline void
cuda_hops(rk_runtime *rt, rk_kernel a, rk_kernel b, int n)
{
    const int64_t t = 30 * INT64_C(1000000000);
    char msg[16], buf[128];
    size_t len;

    for (int i = 0; i < n; i++) {
        int m = snprintf(msg, sizeof(msg), "hop%d", i);
        assert_int_equal(rk_send(rt, a, 9, msg, (size_t)m, 128, t), RK_OK);
        assert_int_equal(
            rk_recv(rt, b, NULL, buf, sizeof(buf), &len, t), RK_OK);
        assert_int_equal(len, (size_t)m);
        assert_memory_equal(buf, msg, len);
    }
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

    if (!cuda_have_nvrtc())
        skip();
    *rtp = cuda_test_runtime();
    def.config.device_source = src;
    def.config.device_entry = "rk_fail";
    def.config.batch = 8;
    def.config.supervision.policy = RK_SUPERVISE_RESTART;
    def.config.supervision.max_restarts = max_restarts;
    def.config.supervision.backoff_ns = 1000;
    assert_int_equal(rk_runtime_register(*rtp, &def), RK_OK);
    return cuda_start(*rtp, id);
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

/* The main of a stand-in program: cuda_sim_begin, the device source file
 * rel (of the source tree) in *src while the tests run, cuda_sim_end.
 * *real_gpu as cuda_sim_begin. Returns the exit status. */
static inline int
cuda_sim_run(const char *name, const struct CMUnitTest *tests, size_t n,
    const char *fake_lib, const char *rel, char **src, int *real_gpu)
{
    char dir[128];
    int rc;

    if ((*real_gpu = cuda_sim_begin(fake_lib, dir, sizeof(dir))) < 0)
        return 1;
    if ((*src = cuda_slurp(rel)) == NULL)
        return 1;
    rc = _cmocka_run_group_tests(name, tests, n, NULL, NULL);
    free(*src);
    *src = NULL;
    return rc | cuda_sim_end(dir);
}

#endif /* RK_TEST_CUDA_HELPERS_H */
