/*
 * One-shot kernels on the cuda backend, under the stand-in driver
 * (tests/fake_cuda: real NVRTC output is loaded, the host build of the
 * same source runs one CPU thread per block; RK_TEST_CUDA_REAL=1 runs the
 * same on a GPU):
 *   - "auto" picks cuda; vector add over cuda rk_buffers, synchronously
 *     and started with a completion;
 *   - a cooperative grid-barrier kernel gives the right grid-wide result;
 *     a cooperative grid larger than can be resident is refused before it
 *     starts, naming the kernel and the limit;
 *   - rk_dev_sync_grid in a kernel not defined cooperative fails the
 *     launch (RK_EINVAL naming it) and nothing hangs;
 *   - the warp helpers (a warp of one lane on the stand-in);
 *   - creation while a persistent ring kernel is resident and the code is
 *     not loaded: RK_EBUSY; a kernel created before runs beside it; an
 *     actor's handler runs one (rk_ctx_execute_kernel);
 *   - last: no driver call the backend made would have hung on a GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_helpers.h"
#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

static char *src;
static int real_gpu;

typedef struct os_n {
    uint32_t n;
} os_n;

static rk_oneshot *
make(const char *name, const char *entry, bool coop, const char *source)
{
    rk_oneshot *k = NULL;
    rk_oneshot_def d = { .name = name,
        .entry = entry,
        .source = source ? source : src,
        .source_name = "oneshot_kernels.cu",
        .cooperative = coop };
    if (rk_oneshot_create(&d, &k) != RK_OK)
        fail_msg("%s: %s", name, rk_errdetail());
    assert_string_equal(rk_oneshot_backend(k), "cuda");
    return k;
}

static rk_buffer *
cu_buffer(size_t n)
{
    rk_buffer *b = NULL;
    rk_buffer_config c
        = { .dtype = RK_DTYPE_U32, .dims = { n }, .device = RK_DEVICE_CUDA };
    assert_int_equal(rk_buffer_create(&b, &c), RK_OK);
    assert_int_equal(rk_buffer_zeros(b), RK_OK);
    return b;
}

#define N 1000

static void
vadd_once(rk_oneshot *k, int started)
{
    static uint32_t x[N], y[N], z[N];
    rk_buffer *b[3] = { cu_buffer(N), cu_buffer(N), cu_buffer(N) };
    os_n n = { N };
    rk_oneshot_launch l = { .grid = 4, .block = 64, .args = &n,
        .args_len = sizeof(n), .bufs = b, .nbuf = 3 };

    for (uint32_t i = 0; i < N; i++) {
        x[i] = i;
        y[i] = 2 * i + 7;
    }
    assert_int_equal(rk_buffer_copy_from(b[0], x, sizeof(x)), RK_OK);
    assert_int_equal(rk_buffer_copy_from(b[1], y, sizeof(y)), RK_OK);
    if (started) {
        rk_oneshot_done *d = NULL;
        assert_int_equal(rk_oneshot_start(k, &l, &d), RK_OK);
        if (rk_oneshot_wait(d, RT_LONG) != RK_OK)
            fail_msg("%s", rk_errdetail());
        rk_oneshot_done_free(d);
    } else if (rk_oneshot_run(k, &l) != RK_OK) {
        fail_msg("%s", rk_errdetail());
    }
    assert_int_equal(rk_buffer_copy_to(b[2], z, sizeof(z)), RK_OK);
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(z[i], 3 * i + 7);
    for (int i = 0; i < 3; i++)
        rk_buffer_destroy(b[i]);
}

static void
test_vadd(void **state)
{
    (void)state;
    if (!cuda_have_nvrtc())
        skip();
    rk_oneshot *k = make("vadd", "rk_os_vadd", false, NULL);
    vadd_once(k, 0);
    vadd_once(k, 1);
    rk_oneshot_destroy(k);
}

static void
test_grid_barrier(void **state)
{
    enum { M = 5000 };
    static uint32_t in[M], out[1 + 4];
    uint32_t want = 0;
    rk_buffer *b[3];
    os_n n = { M };
    rk_oneshot_launch l = { .grid = 4, .block = 32, .args = &n,
        .args_len = sizeof(n), .bufs = b, .nbuf = 3 };
    (void)state;
    if (!cuda_have_nvrtc())
        skip();
    rk_oneshot *k = make("gridsum", "rk_os_gridsum", true, NULL);
    b[0] = cu_buffer(M);
    b[1] = cu_buffer(4);
    b[2] = cu_buffer(1 + 4);
    for (uint32_t i = 0; i < M; i++) {
        in[i] = i * 3u + 1u;
        want += in[i];
    }
    assert_int_equal(rk_buffer_copy_from(b[0], in, sizeof(in)), RK_OK);
    for (int round = 0; round < 10; round++) {
        assert_int_equal(rk_buffer_zeros(b[2]), RK_OK);
        if (rk_oneshot_run(k, &l) != RK_OK)
            fail_msg("%s", rk_errdetail());
        assert_int_equal(rk_buffer_copy_to(b[2], out, sizeof(out)), RK_OK);
        for (int i = 0; i < 5; i++)
            assert_int_equal(out[i], want);
    }
    /* More blocks than can be resident at once: refused, naming the
     * kernel and the limit (the stand-in: 2 SMs x 2 blocks). */
    l.grid = real_gpu ? 60000 : 5;
    assert_int_equal(rk_oneshot_run(k, &l), RK_ENOTSUP);
    assert_non_null(strstr(rk_errdetail(), "'gridsum'"));
    assert_non_null(strstr(rk_errdetail(), "cannot be resident"));
    if (!real_gpu)
        assert_non_null(strstr(rk_errdetail(), "at most 4"));
    for (int i = 0; i < 3; i++)
        rk_buffer_destroy(b[i]);
    rk_oneshot_destroy(k);
}

static void
test_grid_barrier_not_cooperative(void **state)
{
    rk_buffer *b[1];
    rk_oneshot_launch l = { .grid = 4, .block = 32, .bufs = b, .nbuf = 1 };
    (void)state;
    if (!cuda_have_nvrtc())
        skip();
    rk_oneshot *k = make("nocoop", "rk_os_nocoop", false, NULL);
    b[0] = cu_buffer(4);
    assert_int_equal(rk_oneshot_run(k, &l), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "'nocoop'"));
    assert_non_null(strstr(rk_errdetail(), "not launched cooperatively"));
    rk_buffer_destroy(b[0]);
    rk_oneshot_destroy(k);
}

static void
test_warp_helpers(void **state)
{
    static uint32_t out[8];
    rk_buffer *b[1];
    rk_oneshot_launch l = { .grid = 2, .block = 64, .bufs = b, .nbuf = 1 };
    (void)state;
    if (!cuda_have_nvrtc())
        skip();
    rk_oneshot *k = make("warp", "rk_os_warp", false, NULL);
    b[0] = cu_buffer(8);
    if (rk_oneshot_run(k, &l) != RK_OK)
        fail_msg("%s", rk_errdetail());
    assert_int_equal(rk_buffer_copy_to(b[0], out, sizeof(out)), RK_OK);
    for (int i = 0; i < 2; i++) {
        /* A warp of 32 lanes on a GPU, one lane on the stand-in. */
        assert_int_equal(out[4 * i], real_gpu ? 528 : 1);
        assert_int_equal(out[4 * i + 1], real_gpu ? 0x55555555u : 1);
        assert_int_equal(out[4 * i + 2], 1);
        assert_int_equal(out[4 * i + 3], real_gpu ? 1 : 0);
    }
    rk_buffer_destroy(b[0]);
    rk_oneshot_destroy(k);
}

/* ---------------------------------------------------------- beside ring
 * kernels, and from a handler */

static rk_oneshot *h_kernel;

static int
h_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    static uint32_t x[N], z[N];
    rk_buffer *b[3] = { cu_buffer(N), cu_buffer(N), cu_buffer(N) };
    os_n n = { N };
    rk_oneshot_launch l = { .grid = 2, .block = 32, .args = &n,
        .args_len = sizeof(n), .bufs = b, .nbuf = 3 };
    int32_t rc;

    for (uint32_t i = 0; i < N; i++)
        x[i] = i;
    rc = rk_buffer_copy_from(b[0], x, sizeof(x));
    if (rc == RK_OK)
        rc = rk_buffer_copy_from(b[1], x, sizeof(x));
    if (rc == RK_OK)
        rc = rk_ctx_execute_kernel(ctx, h_kernel, &l, NULL);
    if (rc == RK_OK)
        rc = rk_buffer_copy_to(b[2], z, sizeof(z));
    for (uint32_t i = 0; rc == RK_OK && i < N; i++)
        if (z[i] != 2 * i)
            rc = RK_EINTERNAL;
    for (int i = 0; i < 3; i++)
        rk_buffer_destroy(b[i]);
    return rk_ctx_reply(ctx, m, 0, &rc, sizeof(rc));
}

static void
test_beside_ring_kernels(void **state)
{
    rk_runtime *rt = NULL;
    rk_runtime_config cfg = { .no_static_kernels = true };
    rk_kernel_def echo = { .id = "echo", .handler = h_handler };
    rk_kernel_def runner = { .id = "runner", .handler = h_handler };
    char *late_src;
    rk_oneshot *late = NULL;
    rk_oneshot_def d;
    rk_kernel k;
    rk_msg_header rh;
    int32_t rc = -1;
    size_t len = 0;
    char *tsrc;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    h_kernel = make("vadd", "rk_os_vadd", false, NULL);
    tsrc = cuda_slurp("tests/kernels/test_kernels.cu");
    assert_non_null(tsrc);
    assert_int_equal(rk_runtime_create(&rt, &cfg), RK_OK);
    echo.config.backend = "cuda";
    echo.config.device_source = tsrc;
    echo.config.device_entry = "rk_echo";
    echo.config.grid_size = 1;
    echo.config.block_size = 32;
    assert_int_equal(rk_runtime_register(rt, &echo), RK_OK);
    runner.config.backend = "cpu";
    assert_int_equal(rk_runtime_register(rt, &runner), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "echo"), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "runner"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "runner"), RK_OK);

    /* A persistent kernel is resident: new code cannot load. */
    late_src = malloc(strlen(src) + 32);
    assert_non_null(late_src);
    sprintf(late_src, "%s\n/* late */\n", src);
    d = (rk_oneshot_def) { .name = "late", .entry = "rk_os_vadd",
        .source = late_src, .backend = "cuda" };
    assert_int_equal(rk_oneshot_create(&d, &late), RK_EBUSY);
    assert_null(late);
    assert_non_null(strstr(rk_errdetail(), "'late'"));

    /* Code loaded before runs beside it, from an actor's handler. */
    assert_int_equal(rk_kernel_lookup(rt, "runner", &k), RK_OK);
    assert_int_equal(
        rk_request(rt, k, 0, "x", 1, &rh, &rc, sizeof(rc), &len, RT_LONG),
        RK_OK);
    assert_int_equal(len, sizeof(rc));
    assert_int_equal(rc, RK_OK);

    assert_int_equal(rk_kernel_terminate(rt, "echo", RT_LONG), RK_OK);
    /* Nothing resident now: the code loads. */
    assert_int_equal(rk_oneshot_create(&d, &late), RK_OK);
    vadd_once(late, 0);
    rk_oneshot_destroy(late);
    rk_runtime_destroy(rt);
    rk_oneshot_destroy(h_kernel);
    free(late_src);
    free(tsrc);
}

/* NVRTC compiles the one-shot kernels (the test file, and every device
 * header alone with an entry): the PTX has the entries, the barrier's GPU-
 * scope acq_rel arrival and acquire/release generation word, the block
 * barrier, and the warp shuffles and votes. */
static void
test_ptx(void **state)
{
    rk__nvrtc_src s = { .name = "oneshot_kernels.cu", .cc = 90,
        .want_ptx = 1 };
    rk__nvrtc_image img;
    const char *ptx;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();
    s.source = src;
    if (rk__nvrtc_compile(&s, &img) != RK_OK)
        fail_msg("%s\n%s", rk_errdetail(), img.log ? img.log : "");
    assert_int_equal(img.kind, RK__IMG_PTX);
    ptx = (const char *)img.data;
    assert_non_null(strstr(ptx, ".visible .entry rk_os_vadd("));
    assert_non_null(strstr(ptx, ".visible .entry rk_os_gridsum("));
    assert_non_null(strstr(ptx, ".visible .entry rk_os_nocoop("));
    assert_non_null(strstr(ptx, ".visible .entry rk_os_warp("));
    assert_true(cuda_count_op(ptx, "atom.acq_rel.gpu.add.u32") >= 2);
    assert_true(cuda_count_op(ptx, "ld.acquire.gpu") >= 2);
    assert_true(cuda_count_op(ptx, "st.release.gpu") >= 2);
    assert_true(cuda_count_op(ptx, "bar.sync") + cuda_count_op(ptx,
                    "barrier.sync") >= 2);
    assert_true(cuda_count_op(ptx, "shfl.sync.down") >= 1);
    assert_true(cuda_count_op(ptx, "shfl.sync.idx") >= 1);
    assert_true(cuda_count_op(ptx, "vote.sync.ballot") >= 1);
    assert_true(cuda_count_op(ptx, "vote.sync.all") >= 1);
    assert_true(cuda_count_op(ptx, "vote.sync.any") >= 1);
    rk__nvrtc_image_free(&img);

    /* dev_oneshot.h alone, as the first and only include. */
    s.raw = 1;
    s.source = "#include \"ringkernel/dev_oneshot.h\"\n"
               "RK_DEV_FN void f(const rk_dev_oneshot_args *a)\n"
               "{ rk_dev_sync_grid(a); }\n"
               "RK_DEV_ONESHOT(alone, f)\n";
    if (rk__nvrtc_compile(&s, &img) != RK_OK)
        fail_msg("%s\n%s", rk_errdetail(), img.log ? img.log : "");
    assert_non_null(strstr((const char *)img.data, ".entry alone("));
    rk__nvrtc_image_free(&img);
}

CUDA_TEST_NO_HANG(real_gpu)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ptx),
        cmocka_unit_test(test_vadd),
        cmocka_unit_test(test_grid_barrier),
        cmocka_unit_test(test_grid_barrier_not_cooperative),
        cmocka_unit_test(test_warp_helpers),
        cmocka_unit_test(test_beside_ring_kernels),
        cmocka_unit_test(test_no_call_would_hang),
    };
    return cuda_sim_run("test_oneshot_cuda", tests,
        sizeof(tests) / sizeof(tests[0]), FAKE_CUDA_LIB,
        "tests/kernels/oneshot_kernels.cu", &src, &real_gpu);
}
