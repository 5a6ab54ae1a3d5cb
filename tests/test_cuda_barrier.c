/*
 * A named barrier in device memory shared by several resident ring
 * kernels (rk_kernel_config.device_barrier, rk_dev_kernel_barrier),
 * through the public runtime API. By default on the stand-in driver
 * (tests/fake_cuda: the host build of tests/kernels/bar_kernels.cu on CPU
 * threads, one per block, so under TSan the barrier's C11 acquire/release
 * is what orders the kernels' plain accesses); RK_TEST_CUDA_REAL=1 runs
 * the same on a GPU, skipping the cases that depend on the stand-in's
 * block budget.
 *
 *   - NVRTC's PTX of the kernels: the arrival is one atom.acq_rel.gpu
 *     (device memory, GPU scope), no system-scope atomic, no red.;
 *   - two kernels meet at barrier "ab" (2 parties) round after round: each
 *     replies with the round number the other wrote before the barrier
 *     (stale without the wait; a data race under TSan);
 *   - bad input, each refused at launch with the kernel and the barrier
 *     named, nothing left waiting: more parties than can be resident
 *     (RK_ENOTSUP), more blocks at the barrier than its parties
 *     (RK_EINVAL), two kernels giving different parties (RK_EINVAL), a
 *     kernel on another device than the barrier (RK_EINVAL), a name
 *     without parties (RK_EINVAL);
 *   - last: no driver call would have hung on a GPU.
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

#include "backend/cuda/nvrtc.h"
#include "cuda_helpers.h"
#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

static char *bar_src;
static int real_gpu;

#define cuda_runtime cuda_test_runtime

/* A kernel of bar_kernels.cu at barrier `barrier` of `parties`. */
static void
reg_bar(rk_runtime *rt, const char *id, const char *entry, uint32_t grid,
    const char *barrier, uint32_t parties, int device)
{
    cuda_kdef k = { .id = id,
        .src = bar_src,
        .src_name = "bar_kernels.cu",
        .entry = entry,
        .grid = grid,
        .max_payload = 64,
        .device = device,
        .barrier = barrier,
        .parties = parties };
    cuda_register(rt, &k);
}

/* Two kernels at one barrier, launched: a is rk_bar_a, b rk_bar_b. */
static rk_runtime *
launch_pair(const char *a, const char *b, uint32_t grid_a, uint32_t grid_b,
    const char *barrier, uint32_t parties)
{
    rk_runtime *rt = cuda_runtime();
    reg_bar(rt, a, "rk_bar_a", grid_a, barrier, parties, 0);
    reg_bar(rt, b, "rk_bar_b", grid_b, barrier, parties, 0);
    return rt;
}

static void
test_ptx(void **state)
{
    rk__nvrtc_src s = { .name = "bar_kernels.cu", .cc = 90 };
    rk__nvrtc_image img;
    const char *ptx;
    (void)state;
    cuda_require_nvrtc();
    s.source = bar_src;
    s.want_ptx = 1;
    assert_int_equal(rk__nvrtc_compile(&s, &img), RK_OK);
    ptx = (const char *)img.data;
    assert_non_null(strstr(ptx, ".entry rk_bar_a("));
    assert_non_null(strstr(ptx, ".entry rk_bar_b("));
    /* The arrival: GPU scope, in device memory; the persistent loop's
     * PCIe traffic has no read-modify-write. */
    assert_true(cuda_count_op(ptx, "atom.acq_rel.gpu.add.u32") >= 2);
    assert_int_equal(cuda_count_op(ptx, "atom."),
        cuda_count_op(ptx, "atom.acq_rel.gpu.add.u32"));
    assert_int_equal(cuda_count_op(ptx, "red."), 0);
    assert_true(cuda_count_op(ptx, "ld.acquire.gpu") >= 2);
    assert_true(cuda_count_op(ptx, "st.release.gpu") >= 2);
    rk__nvrtc_image_free(&img);
}

static uint32_t
word(const char *b)
{
    return (uint32_t)(unsigned char)b[0] | (uint32_t)(unsigned char)b[1] << 8
        | (uint32_t)(unsigned char)b[2] << 16
        | (uint32_t)(unsigned char)b[3] << 24;
}

static void
test_two_kernels_meet(void **state)
{
    rk_runtime *rt;
    rk_kernel a, b;
    char buf[64];
    size_t len;
    (void)state;
    cuda_require_nvrtc();

    rt = launch_pair("bar_a", "bar_b", 1, 1, "ab", 2);
    a = cuda_start(rt, "bar_a");
    b = cuda_start(rt, "bar_b");
    for (uint32_t r = 1; r <= 50u * RT_SCALE; r++) {
        unsigned char m[4] = { (unsigned char)r, (unsigned char)(r >> 8),
            (unsigned char)(r >> 16), (unsigned char)(r >> 24) };
        /* Either kernel may get its message first and wait for the
         * other. */
        rk_kernel first = r % 2 ? a : b, second = r % 2 ? b : a;
        assert_int_equal(rk_send(rt, first, 1, m, 4, 128, RT_LONG), RK_OK);
        assert_int_equal(rk_send(rt, second, 1, m, 4, 128, RT_LONG), RK_OK);
        assert_int_equal(
            rk_recv(rt, a, NULL, buf, sizeof(buf), &len, RT_LONG), RK_OK);
        assert_int_equal(len, 4);
        assert_int_equal(word(buf), r); /* what bar_b wrote this round */
        assert_int_equal(
            rk_recv(rt, b, NULL, buf, sizeof(buf), &len, RT_LONG), RK_OK);
        assert_int_equal(len, 4);
        assert_int_equal(word(buf), r);
    }
    cuda_finish(rt, (const char *const[]) { "bar_a", "bar_b", NULL });
}

#define refused cuda_assert_refused

static void
test_bad_barriers(void **state)
{
    rk_runtime *rt;
    (void)state;
    cuda_require_nvrtc();

    rt = cuda_runtime();
    /* A name without parties. */
    reg_bar(rt, "noparties", "rk_bar_a", 1, "np", 0, 0);
    refused(rt, "noparties", RK_EINVAL, "device_barrier_parties");
    /* Parties the kernels at it disagree on (p2 placed it, with 2). */
    reg_bar(rt, "p2", "rk_bar_a", 1, "pp", 2, 0);
    reg_bar(rt, "p3", "rk_bar_b", 1, "pp", 3, 0);
    refused(rt, "p3", RK_EINVAL, "'pp' has 2 parties, not 3");
    rk_runtime_destroy(rt);

    /* More blocks at the barrier than its parties: the second kernel's
     * blocks would arrive in the first's generation. */
    rt = launch_pair("g2", "g2b", 2, 2, "gg", 3);
    assert_int_equal(rk_kernel_launch(rt, "g2"), RK_OK);
    refused(rt, "g2b", RK_EINVAL, "more than its 3 parties");
    /* g2 never got a message, so none of its blocks waits: it ends. */
    assert_int_equal(rk_kernel_terminate(rt, "g2", RT_LONG), RK_OK);

    if (!real_gpu) {
        /* More parties than can be resident (stand-in: 2 SMs x 2). */
        reg_bar(rt, "big", "rk_bar_a", 1, "big", 5, 0);
        refused(rt, "big", RK_ENOTSUP, "'big' has 5 parties, but at most 4");
        /* A kernel on the other device than the barrier's memory (near
         * placed it on device 0 when it was registered). */
        reg_bar(rt, "near", "rk_bar_a", 1, "fb", 2, 0);
        reg_bar(rt, "far", "rk_bar_b", 1, "fb", 2, 1);
        refused(rt, "far", RK_EINVAL,
            "runs on CUDA device 1, but barrier "
            "'fb' is in device 0's memory");
    }
    rk_runtime_destroy(rt);
}

CUDA_TEST_NO_HANG(real_gpu)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ptx),
        cmocka_unit_test(test_two_kernels_meet),
        cmocka_unit_test(test_bad_barriers),
        cmocka_unit_test(test_no_call_would_hang),
    };
    return cuda_sim_run("test_cuda_barrier", tests,
        sizeof(tests) / sizeof(tests[0]), FAKE_CUDA_LIB,
        "tests/kernels/bar_kernels.cu", &bar_src, &real_gpu);
}
