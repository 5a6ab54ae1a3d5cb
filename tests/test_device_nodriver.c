/*
 * The no-GPU paths, made deterministic on any machine: RK_CUDA_DRIVER and
 * RK_NVML_LIBRARY point at files that do not exist, so even on a GPU host
 * every CUDA entry point must answer with a clear "no CUDA device" status
 * or RK_ENODEV, and the monitor must report unavailable. (The driver is
 * loaded once per process, hence a program of its own.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "ringkernel/ringkernel.h"

#define MISSING_CUDA "/nonexistent/rk-test/libcuda.so.1"
#define MISSING_NVML "/nonexistent/rk-test/libnvidia-ml.so.1"

static void
test_driver_missing_is_a_status(void **state)
{
    rk_device_list *l = NULL;
    const rk_device_info *sel;
    const char *detail;
    (void)state;

    assert_int_equal(rk_cuda_probe(&detail), RK_CUDA_NO_DRIVER);
    assert_true(strstr(detail, MISSING_CUDA) != NULL);
    assert_int_equal(rk_devices_query(&l), RK_OK);
    assert_int_equal(rk_device_list_count(l), 1);
    assert_int_equal(
        rk_device_list_cuda_status(l, &detail), RK_CUDA_NO_DRIVER);
    assert_true(strstr(detail, MISSING_CUDA) != NULL);
    assert_int_equal(rk_device_select(l, RK_DEVICE_CUDA, 0, &sel), RK_ENODEV);
    assert_true(strstr(rk_errdetail(), "no driver") != NULL);
    assert_int_equal(rk_device_select(l, RK_DEVICE_ANY, -1, &sel), RK_OK);
    assert_int_equal(sel->kind, RK_DEVICE_CPU);
    rk_device_list_free(l);
}

static void
test_cuda_memory_needs_a_device(void **state)
{
    rk_pool_config pc = { .kind = RK_POOL_DEVICE };
    rk_buffer_config bc = { .dims = { 16 }, .device = RK_DEVICE_CUDA };
    rk_pool *p = NULL;
    rk_buffer *b = NULL;
    (void)state;

    assert_int_equal(rk_pool_create(&p, &pc), RK_ENODEV);
    pc.kind = RK_POOL_PINNED;
    assert_int_equal(rk_pool_create(&p, &pc), RK_ENODEV);
    assert_true(strstr(rk_errdetail(), MISSING_CUDA) != NULL);
    assert_null(p);
    assert_int_equal(rk_buffer_create(&b, &bc), RK_ENODEV);
    assert_null(b);
    /* RK_DEVICE_ANY falls back to the CPU device, pinned flag ignored. */
    bc.device = RK_DEVICE_ANY;
    bc.flags = RK_BUFFER_PINNED;
    assert_int_equal(rk_buffer_create(&b, &bc), RK_OK);
    assert_int_equal(rk_buffer_device_kind(b), RK_DEVICE_CPU);
    assert_false(rk_buffer_is_pinned(b));
    rk_buffer_destroy(b);
}

static void
test_nvml_missing_is_unavailable(void **state)
{
    rk_gpu_monitor *m = NULL;
    rk_gpu_reading r;
    const char *detail;
    (void)state;

    assert_int_equal(rk_gpu_monitor_open(&m), RK_OK);
    assert_int_equal(
        rk_gpu_monitor_status(m, &detail), RK_MONITOR_UNAVAILABLE);
    assert_true(strstr(detail, MISSING_NVML) != NULL);
    assert_int_equal(rk_gpu_monitor_count(m), 0);
    assert_int_equal(rk_gpu_monitor_read(m, 0, &r), RK_ENODEV);
    assert_true(strstr(rk_errdetail(), "unavailable") != NULL);
    rk_gpu_monitor_close(m);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_driver_missing_is_a_status),
        cmocka_unit_test(test_cuda_memory_needs_a_device),
        cmocka_unit_test(test_nvml_missing_is_unavailable),
    };
    setenv("RK_CUDA_DRIVER", MISSING_CUDA, 1);
    setenv("RK_NVML_LIBRARY", MISSING_NVML, 1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
