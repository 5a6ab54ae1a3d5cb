/*
 * One-shot kernels on a chosen CUDA device (rk_oneshot_def.device) and
 * device memory another library allocated (rk_buffer_wrap_device), under
 * the stand-in driver, which offers two devices (tests/fake_cuda);
 * RK_TEST_CUDA_REAL=1 runs the same on a GPU's real driver
 * (tools/gpu-check.sh), where the two-device cases need two GPUs and skip
 * otherwise.
 *
 *   - a kernel on device 1 adds buffers of device 1; a buffer of device 0
 *     is refused, naming both devices;
 *   - a device the driver lacks: RK_ENODEV naming the ordinal and the
 *     device count; a negative ordinal: RK_EINVAL; nothing is made;
 *   - a wrapped buffer over another buffer's device memory is read and
 *     written by a launch in place (no copy), and destroying it leaves
 *     the memory to its owner; its host side is copied as for any buffer;
 *   - wrapping: a NULL address, a CPU or managed config, a device the
 *     driver lacks, a wrapped buffer of device 1 given to a kernel on
 *     device 0, and (on the real driver with two GPUs) memory of device 1
 *     claimed as device 0's, each a clear error;
 *   - rk_buffer_wait_stream: stream 0 and a CPU buffer refused, the
 *     legacy default stream (1) waited for;
 *   - rk_oneshot_device: the device that runs a kernel (RK_CUDA_DEVICE's
 *     for 0), -1 on the cpu backend;
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

#define N 256

typedef struct os_n {
    uint32_t n;
} os_n;

/* rk_os_vadd as a one-shot kernel of `name` on CUDA device `device`. */
static int
vadd_on(const char *name, int device, rk_oneshot **k)
{
    rk_oneshot_def d = { .name = name,
        .entry = "rk_os_vadd",
        .source = src,
        .source_name = "oneshot_kernels.cu",
        .backend = "cuda",
        .device = device };
    *k = NULL;
    return rk_oneshot_create(&d, k);
}

/* vadd_on's kernel, made (the test fails otherwise). */
static rk_oneshot *
vadd_ok(const char *name, int device)
{
    rk_oneshot *k;
    if (vadd_on(name, device, &k) != RK_OK)
        fail_msg("%s: %s", name, rk_errdetail());
    return k;
}

/* A u32 buffer of N elements on CUDA device `ordinal`, holding
 * i * mul + add. */
static rk_buffer *
filled(int ordinal, uint32_t mul, uint32_t add)
{
    uint32_t v[N];
    rk_buffer *b = NULL;
    rk_buffer_config c = { .dtype = RK_DTYPE_U32,
        .dims = { N },
        .device = RK_DEVICE_CUDA,
        .ordinal = ordinal };
    for (uint32_t i = 0; i < N; i++)
        v[i] = i * mul + add;
    assert_int_equal(rk_buffer_create(&b, &c), RK_OK);
    assert_int_equal(rk_buffer_copy_from(b, v, sizeof(v)), RK_OK);
    return b;
}

/* Runs k over the three buffers (c = a + b); the launch's result. */
static int
run3(rk_oneshot *k, rk_buffer *a, rk_buffer *b, rk_buffer *c)
{
    rk_buffer *bufs[3] = { a, b, c };
    os_n n = { N };
    rk_oneshot_launch l = { .grid = 2,
        .block = 64,
        .args = &n,
        .args_len = sizeof(n),
        .bufs = bufs,
        .nbuf = 3 };
    return rk_oneshot_run(k, &l);
}

/* run3, which must succeed. */
static void
run_ok(rk_oneshot *k, rk_buffer *a, rk_buffer *b, rk_buffer *c)
{
    if (run3(k, a, b, c) != RK_OK)
        fail_msg("%s", rk_errdetail());
}

/* run3 refused with RK_EINVAL, the detail saying why. */
static void
assert_refused(
    rk_oneshot *k, rk_buffer *a, rk_buffer *b, rk_buffer *c, const char *why)
{
    assert_int_equal(run3(k, a, b, c), RK_EINVAL);
    if (strstr(rk_errdetail(), why) == NULL)
        fail_msg("'%s' does not say '%s'", rk_errdetail(), why);
}

/* Every element of b is i * mul + add. */
static void
assert_holds(rk_buffer *b, uint32_t mul, uint32_t add)
{
    uint32_t v[N];
    assert_int_equal(rk_buffer_copy_to(b, v, sizeof(v)), RK_OK);
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(v[i], i * mul + add);
}

static void
test_kernel_on_device_1(void **state)
{
    rk_buffer *a, *b, *c, *zero;
    rk_oneshot *k;
    (void)state;
    cuda_require_nvrtc();
    if (cuda_device_count() < 2) {
        print_message("one CUDA device: a kernel on device 1 needs two\n");
        skip();
    }
    k = vadd_ok("vadd1", 1);
    assert_int_equal(rk_oneshot_device(k), 1);
    assert_int_equal(rk_oneshot_device(NULL), -1);
    a = filled(1, 1, 0);
    b = filled(1, 2, 5);
    c = filled(1, 0, 0);
    run_ok(k, a, b, c);
    assert_holds(c, 3, 5);
    /* Device 0's memory is not the kernel's to address. */
    zero = filled(0, 1, 0);
    assert_refused(k, zero, b, c, "'vadd1': buffer 0 is on CUDA device 0, "
                                  "the kernel runs on device 1");
    rk_buffer_destroy(zero);
    rk_buffer_destroy(a);
    rk_buffer_destroy(b);
    rk_buffer_destroy(c);
    rk_oneshot_destroy(k);
}

static void
test_bad_device(void **state)
{
    char want[96];
    int n = cuda_device_count();
    rk_oneshot *k;
    (void)state;
    cuda_require_nvrtc();

    assert_int_equal(vadd_on("nowhere", n, &k), RK_ENODEV);
    assert_null(k);
    snprintf(want, sizeof(want),
        "'nowhere' names CUDA device %d, but the driver has %d device(s)", n,
        n);
    assert_non_null(strstr(rk_errdetail(), want));
    assert_int_equal(vadd_on("negative", -1, &k), RK_EINVAL);
    assert_null(k);
    assert_non_null(strstr(rk_errdetail(), "'negative': CUDA device -1"));
}

/* A wrapped buffer over the device side of `owner` (made current there). */
static rk_buffer *
wrap_of(rk_buffer *owner)
{
    void *d = NULL;
    rk_buffer *w = NULL;
    rk_buffer_config c = { .dtype = RK_DTYPE_U32,
        .dims = { N },
        .device = RK_DEVICE_CUDA,
        .ordinal = rk_buffer_ordinal(owner) };
    assert_int_equal(rk_buffer_device(owner, RK_ACCESS_READ, &d), RK_OK);
    if (rk_buffer_wrap_device(&w, &c, d) != RK_OK)
        fail_msg("%s", rk_errdetail());
    return w;
}

static void
test_wrapped_memory_in_place(void **state)
{
    rk_buffer *x, *y, *out, *wx, *wout;
    rk_buffer_stats st;
    rk_oneshot *k;
    void *p = NULL, *q = NULL;
    (void)state;
    cuda_require_nvrtc();

    k = vadd_ok("vaddw", 0);
    assert_int_equal(rk_oneshot_device(k), 0);
    x = filled(0, 1, 1);
    y = filled(0, 10, 0);
    out = filled(0, 0, 0);
    wx = wrap_of(x);
    wout = wrap_of(out);
    assert_true(rk_buffer_is_wrapped(wx));
    assert_false(rk_buffer_is_wrapped(x));
    assert_int_equal(rk_buffer_get_state(wx), RK_BUFFER_DEVICE_ONLY);
    /* The launch uses the wrapped memory itself: no transfer either way. */
    run_ok(k, wx, y, wout);
    rk_buffer_stats_get(wout, &st);
    assert_int_equal(st.h2d_transfers + st.d2h_transfers, 0);
    assert_int_equal(rk_buffer_device(wout, RK_ACCESS_READ, &p), RK_OK);
    assert_int_equal(rk_buffer_device(out, RK_ACCESS_READ, &q), RK_OK);
    assert_ptr_equal(p, q);
    /* The kernel wrote the owner's memory: its owner reads it there. */
    assert_int_equal(rk_buffer_mark_device_dirty(out), RK_OK);
    assert_holds(out, 11, 1);
    /* A wrapped buffer's host side is copied from the device as usual. */
    assert_holds(wout, 11, 1);
    rk_buffer_stats_get(wout, &st);
    assert_int_equal(st.d2h_transfers, 1);
    /* Destroying the wrappers leaves the memory to its owners: it still
     * holds their data, and a launch over it still runs. */
    rk_buffer_destroy(wx);
    rk_buffer_destroy(wout);
    run_ok(k, x, y, out);
    assert_holds(out, 11, 1);
    assert_holds(x, 1, 1);
    rk_buffer_destroy(x);
    rk_buffer_destroy(y);
    rk_buffer_destroy(out);
    rk_oneshot_destroy(k);
}

static void
test_wrap_errors(void **state)
{
    char want[64];
    int n = cuda_device_count();
    uint32_t word = 0;
    rk_buffer *w = NULL, *owner;
    rk_buffer_config c = { .dtype = RK_DTYPE_U32,
        .dims = { N },
        .device = RK_DEVICE_CUDA };
    void *d = NULL;
    (void)state;

    owner = filled(0, 1, 0);
    assert_int_equal(rk_buffer_device(owner, RK_ACCESS_READ, &d), RK_OK);
    assert_int_equal(rk_buffer_wrap_device(&w, &c, NULL), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "dptr"));
    assert_int_equal(rk_buffer_wrap_device(NULL, &c, d), RK_EINVAL);
    c.device = RK_DEVICE_CPU;
    assert_int_equal(rk_buffer_wrap_device(&w, &c, &word), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "RK_DEVICE_CUDA"));
    c.device = RK_DEVICE_CUDA;
    c.flags = RK_BUFFER_MANAGED;
    assert_int_equal(rk_buffer_wrap_device(&w, &c, d), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "RK_BUFFER_MANAGED"));
    c.flags = 0;
    c.ordinal = n;
    assert_int_equal(rk_buffer_wrap_device(&w, &c, d), RK_ENODEV);
    snprintf(want, sizeof(want), "no CUDA device %d (the driver has %d)", n,
        n);
    assert_non_null(strstr(rk_errdetail(), want));
    assert_null(w);
    rk_buffer_destroy(owner);
}

/* Device 1's memory: wrapped as device 1's, a kernel on device 0 refuses
 * it naming both; claimed as device 0's, the real driver says whose it
 * is (the stand-in cannot, and takes the claim). */
static void
test_wrapped_other_device(void **state)
{
    rk_buffer *owner, *w = NULL, *a, *b;
    rk_buffer_config c = { .dtype = RK_DTYPE_U32,
        .dims = { N },
        .device = RK_DEVICE_CUDA,
        .ordinal = 0 };
    rk_oneshot *k;
    void *d = NULL;
    (void)state;
    cuda_require_nvrtc();
    if (cuda_device_count() < 2)
        skip();

    k = vadd_ok("vadd0", 0);
    owner = filled(1, 1, 0);
    w = wrap_of(owner);
    assert_int_equal(rk_buffer_ordinal(w), 1);
    a = filled(0, 1, 0);
    b = filled(0, 1, 0);
    assert_refused(k, a, w, b, "'vadd0': buffer 1 is on CUDA device 1, "
                               "the kernel runs on device 0");
    rk_buffer_destroy(w);
    w = NULL;
    assert_int_equal(rk_buffer_device(owner, RK_ACCESS_READ, &d), RK_OK);
    if (real_gpu) {
        assert_int_equal(rk_buffer_wrap_device(&w, &c, d), RK_EINVAL);
        assert_non_null(strstr(rk_errdetail(),
            "is memory of CUDA device 1, not of device 0"));
        assert_null(w);
    } else {
        assert_int_equal(rk_buffer_wrap_device(&w, &c, d), RK_OK);
        rk_buffer_destroy(w);
    }
    rk_buffer_destroy(a);
    rk_buffer_destroy(b);
    rk_buffer_destroy(owner);
    rk_oneshot_destroy(k);
}

static void
test_wait_stream(void **state)
{
    rk_buffer *b = filled(0, 1, 0), *h = NULL;
    rk_buffer_config c = { .dtype = RK_DTYPE_U32, .dims = { N } };
    (void)state;

    assert_int_equal(rk_buffer_wait_stream(b, 0), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "other than 0"));
    assert_int_equal(rk_buffer_create(&h, &c), RK_OK);
    assert_int_equal(rk_buffer_wait_stream(h, 1), RK_EINVAL);
    assert_int_equal(rk_buffer_wait_stream(NULL, 1), RK_EINVAL);
    if (rk_buffer_wait_stream(b, 1) != RK_OK)
        fail_msg("%s", rk_errdetail());
    rk_buffer_destroy(h);
    rk_buffer_destroy(b);
}

static int
host_nop(const rk_oneshot_host_args *a)
{
    (void)a;
    return RK_OK;
}

/* Device 0 is RK_CUDA_DEVICE's (as for ring kernels); the cpu backend
 * runs on no CUDA device. */
static void
test_env_default_and_cpu(void **state)
{
    rk_oneshot_def h = { .name = "hostonly", .host = host_nop, .backend = "cpu",
        .device = 1 };
    rk_oneshot *k;
    (void)state;
    cuda_require_nvrtc();

    assert_int_equal(rk_oneshot_create(&h, &k), RK_OK);
    assert_int_equal(rk_oneshot_device(k), -1);
    rk_oneshot_destroy(k);
    if (real_gpu || cuda_device_count() < 2)
        return;
    setenv("RK_CUDA_DEVICE", "1", 1);
    k = vadd_ok("envdev", 0);
    unsetenv("RK_CUDA_DEVICE");
    assert_int_equal(rk_oneshot_device(k), 1);
    rk_oneshot_destroy(k);
}

CUDA_TEST_NO_HANG(real_gpu)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_on_device_1),
        cmocka_unit_test(test_bad_device),
        cmocka_unit_test(test_wrapped_memory_in_place),
        cmocka_unit_test(test_wrap_errors),
        cmocka_unit_test(test_wrapped_other_device),
        cmocka_unit_test(test_wait_stream),
        cmocka_unit_test(test_env_default_and_cpu),
        cmocka_unit_test(test_no_call_would_hang),
    };
    return cuda_sim_run("test_oneshot_devices", tests,
        sizeof(tests) / sizeof(tests[0]), FAKE_CUDA_LIB,
        "tests/kernels/oneshot_kernels.cu", &src, &real_gpu);
}
