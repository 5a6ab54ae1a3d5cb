/*
 * Ring kernels on several CUDA devices (rk_kernel_config.device), through
 * the public runtime API. By default on the stand-in driver, which offers
 * two devices, each with its own context and block slots
 * (tests/fake_cuda); RK_TEST_CUDA_REAL=1 runs the same on the real driver
 * (tools/gpu-check.sh), where the two-device cases need two GPUs and skip
 * otherwise.
 *
 *   - two kernels on devices 0 and 1 with an rk_connect route between
 *     them (through the host relay): a message sent to the first comes
 *     out of the second; on the stand-in each grid ran on its own device;
 *   - co-residency is per device: a grid that fills device 0 and one
 *     that fills device 1 run together (one device would refuse the
 *     second, and the stand-in would never start its blocks);
 *   - a device ordinal that does not exist: RK_ENODEV naming the kernel
 *     and the device count; a negative one: RK_EINVAL; nothing runs;
 *   - RK_CUDA_DEVICE is the default for a kernel that names no device;
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

#include "cuda_helpers.h"
#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

static char *kernels_src;
static int real_gpu;

#define cuda_runtime cuda_test_runtime

/* An rk_echo kernel of grid blocks on CUDA device `device`. */
static void
reg_on(rk_runtime *rt, const char *id, int device, uint32_t grid)
{
    cuda_kdef k = { .id = id,
        .src = kernels_src,
        .src_name = "test_kernels.cu",
        .entry = "rk_echo",
        .grid = grid,
        .max_payload = 128,
        .device = device };
    cuda_register(rt, &k);
}

/* The stand-in's grids running on device dev, or -1 on a GPU. */
static int
grids_on(int dev)
{
    int (*fn)(int);
    if (real_gpu)
        return -1;
    *(void **)&fn = cuda_fake_sym(FAKE_CUDA_LIB, "fake_cuda_grids_on");
    assert_non_null(fn);
    return fn(dev);
}

static void
test_two_devices_route(void **state)
{
    rk_runtime *rt;
    rk_kernel a, b;
    (void)state;
    cuda_require_nvrtc();
    if (cuda_device_count() < 2) {
        print_message("one CUDA device: the two-device route needs two\n");
        skip();
    }
    assert_int_equal(cuda_device_count(), real_gpu ? cuda_device_count() : 2);

    rt = cuda_runtime();
    reg_on(rt, "dev0", 0, 1);
    reg_on(rt, "dev1", 1, 1);
    assert_int_equal(rk_connect(rt, "dev0", "dev1"), RK_OK);
    a = cuda_start(rt, "dev0");
    b = cuda_start(rt, "dev1");
    if (!real_gpu) { /* each grid is on the device its kernel named */
        assert_int_equal(grids_on(0), 1);
        assert_int_equal(grids_on(1), 1);
    }
    cuda_hops(rt, a, b, 20);
    assert_int_equal(rk_kernel_terminate(rt, "dev0", RT_LONG), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "dev1", RT_LONG), RK_OK);
    assert_int_equal(grids_on(0), real_gpu ? -1 : 0);
    assert_int_equal(grids_on(1), real_gpu ? -1 : 0);
    rk_runtime_destroy(rt);
}

/* Each device has its own block budget: a grid filling device 0 does not
 * keep one filling device 1 out (stand-in: 2 SMs x 2 blocks each). */
static void
test_residency_per_device(void **state)
{
    rk_runtime *rt;
    rk_kernel k;
    char buf[128];
    size_t len;
    (void)state;
    if (!cuda_have_nvrtc() || real_gpu || cuda_device_count() < 2)
        skip(); /* a GPU's budget is not known here */

    rt = cuda_runtime();
    reg_on(rt, "full0", 0, 4);
    reg_on(rt, "full1", 1, 4);
    reg_on(rt, "more0", 0, 1);
    assert_int_equal(rk_kernel_launch(rt, "full0"), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "full1"), RK_OK);
    /* Device 0 is full: refused, naming the kernel already there. */
    assert_int_equal(rk_kernel_launch(rt, "more0"), RK_ENOTSUP);
    assert_non_null(strstr(rk_errdetail(), "'full0'"));
    assert_null(strstr(rk_errdetail(), "'full1'"));
    assert_int_equal(rk_kernel_activate(rt, "full1"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "full1", &k), RK_OK);
    /* Every block of full1 runs: the relay spreads 8 messages over its 4
     * blocks, and each comes back. */
    for (int i = 0; i < 8; i++)
        assert_int_equal(rk_send(rt, k, 1, "x", 1, 128, RT_LONG), RK_OK);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(
            rk_recv(rt, k, NULL, buf, sizeof(buf), &len, RT_LONG), RK_OK);
        assert_int_equal(len, 1);
    }
    cuda_finish(rt, (const char *const[]) { "full0", "full1", NULL });
}

/* A device the driver lacks (one past the last) or a negative ordinal:
 * refused at launch, naming the kernel (and the device count). */
static void
test_bad_device(void **state)
{
    char want[96];
    int n = cuda_device_count();
    rk_runtime *rt;
    (void)state;
    cuda_require_nvrtc();

    rt = cuda_runtime();
    snprintf(want, sizeof(want),
        "names CUDA device %d, but the driver has "
        "%d device(s)",
        n, n);
    reg_on(rt, "nowhere", n, 1);
    cuda_assert_refused(rt, "nowhere", RK_ENODEV, want);
    reg_on(rt, "negative", -1, 1);
    cuda_assert_refused(rt, "negative", RK_EINVAL, "CUDA device -1");
    rk_runtime_destroy(rt);
}

/* A one-shot kernel (on RK_CUDA_DEVICE's device, 0) handed a buffer of
 * device 1: refused before anything runs, naming both devices. */
static void
test_oneshot_other_device_buffer(void **state)
{
    char *src = cuda_slurp("tests/kernels/oneshot_kernels.cu");
    rk_oneshot_def d = { .name = "vadd",
        .entry = "rk_os_vadd",
        .source = src,
        .source_name = "oneshot_kernels.cu" };
    rk_buffer_config c = { .dtype = RK_DTYPE_U32,
        .dims = { 64 },
        .device = RK_DEVICE_CUDA,
        .ordinal = 1 };
    rk_buffer *b[3] = { NULL, NULL, NULL };
    uint32_t n = 64;
    rk_oneshot_launch l = { .grid = 1,
        .block = 64,
        .args = &n,
        .args_len = sizeof(n),
        .bufs = b,
        .nbuf = 3 };
    rk_oneshot *k = NULL;
    (void)state;
    cuda_require_nvrtc();
    if (cuda_device_count() < 2)
        skip();

    assert_non_null(src);
    assert_int_equal(rk_oneshot_create(&d, &k), RK_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(rk_buffer_create(&b[i], &c), RK_OK);
    assert_int_equal(rk_buffer_ordinal(b[0]), 1);
    assert_int_equal(rk_oneshot_run(k, &l), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "'vadd'"));
    assert_non_null(strstr(rk_errdetail(),
        "buffer 0 is on CUDA device 1, the kernel runs on device 0"));
    for (int i = 0; i < 3; i++)
        rk_buffer_destroy(b[i]);
    rk_oneshot_destroy(k);
    free(src);
}

/* A kernel that names no device runs on RK_CUDA_DEVICE's. */
static void
test_env_default(void **state)
{
    rk_runtime *rt;
    (void)state;
    if (!cuda_have_nvrtc() || real_gpu || cuda_device_count() < 2)
        skip();

    setenv("RK_CUDA_DEVICE", "1", 1);
    rt = cuda_runtime();
    reg_on(rt, "envdev", 0, 1);
    assert_int_equal(rk_kernel_launch(rt, "envdev"), RK_OK);
    assert_int_equal(grids_on(0), 0);
    assert_int_equal(grids_on(1), 1);
    assert_int_equal(rk_kernel_terminate(rt, "envdev", RT_LONG), RK_OK);
    rk_runtime_destroy(rt);
    unsetenv("RK_CUDA_DEVICE");
}

CUDA_TEST_NO_HANG(real_gpu)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_devices_route),
        cmocka_unit_test(test_residency_per_device),
        cmocka_unit_test(test_bad_device),
        cmocka_unit_test(test_oneshot_other_device_buffer),
        cmocka_unit_test(test_env_default),
        cmocka_unit_test(test_no_call_would_hang),
    };
    return cuda_sim_run("test_cuda_devices", tests,
        sizeof(tests) / sizeof(tests[0]), FAKE_CUDA_LIB,
        "tests/kernels/test_kernels.cu", &kernels_src, &real_gpu);
}
