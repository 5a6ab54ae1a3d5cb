/*
 * Device enumeration, selection and the GPU monitor on whatever this
 * machine has: the CPU checks always run; CUDA and NVML checks run where a
 * GPU is present and otherwise check the clear "unavailable" answers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>
#include <unistd.h>

#include "ringkernel/ringkernel.h"

static void
test_cpu_is_always_listed(void **state)
{
    rk_device_list *l = NULL;
    const rk_device_info *cpu, *sel;
    (void)state;

    assert_int_equal(rk_devices_query(&l), RK_OK);
    assert_true(rk_device_list_count(l) >= 1);
    cpu = rk_device_list_get(l, 0);
    assert_non_null(cpu);
    assert_int_equal(cpu->kind, RK_DEVICE_CPU);
    assert_int_equal(cpu->ordinal, 0);
    assert_true(strlen(cpu->name) > 0);
    assert_int_equal(cpu->multiprocessors, sysconf(_SC_NPROCESSORS_ONLN));
    assert_true(cpu->total_mem > 0);
    assert_true(cpu->free_mem <= cpu->total_mem);
    assert_int_equal(cpu->warp_size, 1);
    assert_null(rk_device_list_get(l, rk_device_list_count(l)));
    assert_int_equal(rk_device_select(l, RK_DEVICE_CPU, -1, &sel), RK_OK);
    assert_ptr_equal(sel, cpu);
    assert_int_equal(rk_device_select(l, RK_DEVICE_CPU, 1, &sel), RK_ENODEV);
    assert_int_equal(rk_device_select(l, RK_DEVICE_ANY, 0, &sel), RK_EINVAL);
    assert_int_equal(
        rk_device_select(l, (rk_device_kind)7, -1, &sel), RK_EINVAL);
    rk_device_list_free(l);
}

static void
test_cuda_devices_or_a_clear_status(void **state)
{
    rk_device_list *l = NULL;
    const rk_device_info *sel;
    const char *detail, *probe_detail;
    rk_cuda_status st;
    (void)state;

    assert_int_equal(rk_devices_query(&l), RK_OK);
    st = rk_device_list_cuda_status(l, &detail);
    assert_int_equal(rk_cuda_probe(&probe_detail), st);
    assert_non_null(detail);
    if (st != RK_CUDA_AVAILABLE) {
        assert_int_equal(rk_device_list_count(l), 1);
        assert_true(strlen(detail) > 0);
        assert_int_equal(rk_device_list_cuda_driver_version(l), 0);
        assert_int_equal(
            rk_device_select(l, RK_DEVICE_CUDA, -1, &sel), RK_ENODEV);
        assert_true(strstr(rk_errdetail(), "no CUDA device") != NULL);
        /* ANY falls back to the CPU. */
        assert_int_equal(rk_device_select(l, RK_DEVICE_ANY, -1, &sel), RK_OK);
        assert_int_equal(sel->kind, RK_DEVICE_CPU);
        print_message("no CUDA: %s (%s)\n", rk_cuda_status_name(st), detail);
        rk_device_list_free(l);
        return;
    }
    assert_true(rk_device_list_count(l) >= 2);
    assert_true(rk_device_list_cuda_driver_version(l) >= 11000);
    for (size_t i = 1; i < rk_device_list_count(l); i++) {
        const rk_device_info *d = rk_device_list_get(l, i);
        assert_int_equal(d->kind, RK_DEVICE_CUDA);
        assert_int_equal(d->ordinal, (int)i - 1);
        assert_true(strlen(d->name) > 0);
        assert_true(d->cc_major >= 3);
        assert_int_equal(d->warp_size, 32);
        assert_true(d->multiprocessors > 0);
        assert_true(d->max_threads_per_block >= 512);
        assert_true(d->total_mem > 0);
        assert_true(d->free_mem > 0 && d->free_mem <= d->total_mem);
        print_message("CUDA %d: %s cc %d.%d, %d SMs, host-native atomics "
                      "%d, concurrent managed %d\n",
            d->ordinal, d->name, d->cc_major, d->cc_minor, d->multiprocessors,
            d->host_native_atomics, d->concurrent_managed_access);
    }
    assert_int_equal(rk_device_select(l, RK_DEVICE_ANY, -1, &sel), RK_OK);
    assert_int_equal(sel->kind, RK_DEVICE_CUDA);
    assert_int_equal(sel->ordinal, 0);
    assert_int_equal(rk_device_select(l, RK_DEVICE_CUDA,
                         (int)rk_device_list_count(l) - 1, &sel),
        RK_ENODEV);
    rk_device_list_free(l);
}

static void
test_monitor_reads_or_reports_unavailable(void **state)
{
    rk_gpu_monitor *m = NULL;
    rk_gpu_reading r;
    const char *detail;
    (void)state;

    assert_int_equal(rk_gpu_monitor_open(&m), RK_OK);
    if (rk_gpu_monitor_status(m, &detail) != RK_MONITOR_AVAILABLE) {
        assert_true(strlen(detail) > 0);
        assert_int_equal(rk_gpu_monitor_count(m), 0);
        assert_int_equal(rk_gpu_monitor_read(m, 0, &r), RK_ENODEV);
        print_message("monitor unavailable: %s\n", detail);
        rk_gpu_monitor_close(m);
        return;
    }
    assert_int_equal(
        rk_gpu_monitor_read(m, rk_gpu_monitor_count(m), &r), RK_ENODEV);
    for (unsigned i = 0; i < rk_gpu_monitor_count(m); i++) {
        assert_int_equal(rk_gpu_monitor_read(m, i, &r), RK_OK);
        assert_int_equal(r.index, i);
        assert_true(strlen(r.name) > 0);
        /* Every datacentre board reports memory; check its layout. */
        assert_true(r.valid & RK_READING_MEMORY);
        assert_true(r.mem_total > 0);
        assert_true(r.mem_used <= r.mem_total && r.mem_free <= r.mem_total);
        if (r.valid & RK_READING_UTILIZATION)
            assert_true(r.util_gpu_pct <= 100 && r.util_mem_pct <= 100);
        if (r.valid & RK_READING_TEMPERATURE)
            assert_true(r.temperature_c > 0 && r.temperature_c < 150);
        if ((r.valid & RK_READING_POWER) && (r.valid & RK_READING_POWER_LIMIT))
            assert_true(r.power_limit_mw > 0);
        print_message("GPU %u %s: util %u%%, mem %llu/%llu MiB, %u C, "
                      "%u/%u mW, sm %u MHz (valid 0x%x)\n",
            i, r.name, r.util_gpu_pct, (unsigned long long)(r.mem_used >> 20),
            (unsigned long long)(r.mem_total >> 20), r.temperature_c,
            r.power_mw, r.power_limit_mw, r.clock_sm_mhz, r.valid);
    }
    rk_gpu_monitor_close(m);
}

static void
test_null_arguments(void **state)
{
    (void)state;
    assert_int_equal(rk_devices_query(NULL), RK_EINVAL);
    assert_int_equal(rk_gpu_monitor_open(NULL), RK_EINVAL);
    assert_int_equal(rk_device_list_count(NULL), 0);
    assert_null(rk_device_list_get(NULL, 0));
    rk_device_list_free(NULL);
    rk_gpu_monitor_close(NULL);
    assert_string_equal(rk_cuda_status_name(RK_CUDA_NO_DRIVER), "no driver");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_is_always_listed),
        cmocka_unit_test(test_cuda_devices_or_a_clear_status),
        cmocka_unit_test(test_monitor_reads_or_reports_unavailable),
        cmocka_unit_test(test_null_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
