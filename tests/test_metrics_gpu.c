/*
 * tests/test_metrics_gpu.c - the metrics' GPU gauges, from a fake NVML
 * (tests/fake_nvml, loaded through RK_NVML_LIBRARY before the first use of
 * NVML in this process) with one GPU and fixed readings: each gauge the
 * fake supports appears with the right value and labels, in Prometheus
 * text and in JSON, and the one it reports as not supported is left out.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "prom_text.h"
#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

#ifndef RK_FAKE_NVML
#define RK_FAKE_NVML "libfake_nvml.so"
#endif

#define GPU_LABELS "gpu=\"0\",name=\"Fake \"GPU\" 80GB\""

static void
test_gpu_gauges(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_metrics *m;
    exposition e;
    char *text;

    (void)state;
    assert_int_equal(rk_metrics_create(&m, rt, NULL), RK_OK);
    assert_int_equal(
        rk_metrics_render(m, RK_METRICS_PROMETHEUS, &text, NULL), RK_OK);
    parse_exposition(text, &e);
    assert_true(get(&e, "ringkernel_gpu_monitor_available", "") == 1);
    assert_true(
        get(&e, "ringkernel_gpu_utilization_ratio", GPU_LABELS) == 0.37);
    assert_true(get(&e, "ringkernel_gpu_memory_utilization_ratio", GPU_LABELS)
        == 0.12);
    assert_true(get(&e, "ringkernel_gpu_memory_total_bytes", GPU_LABELS)
        == 85899345920.0);
    assert_true(get(&e, "ringkernel_gpu_memory_used_bytes", GPU_LABELS)
        == 1073741824.0);
    assert_true(
        get(&e, "ringkernel_gpu_temperature_celsius", GPU_LABELS) == 55);
    assert_true(get(&e, "ringkernel_gpu_power_watts", GPU_LABELS) == 123.456);
    assert_true(
        get(&e, "ringkernel_gpu_clock_sm_hertz", GPU_LABELS) == 1980e6);
    assert_true(
        get(&e, "ringkernel_gpu_clock_memory_hertz", GPU_LABELS) == 2619e6);
    /* Not supported by the fake board: no series at all. */
    assert_false(has(&e, "ringkernel_gpu_power_limit_watts", GPU_LABELS));
    free(e.s);
    free(text);

    assert_int_equal(
        rk_metrics_render(m, RK_METRICS_JSON, &text, NULL), RK_OK);
    assert_non_null(strstr(text,
        "\"gpu_monitor\":{\"available\":true,\"detail\":\"\",\"gpus\":[{"
        "\"index\":0,\"name\":\"Fake \\\"GPU\\\" "
        "80GB\",\"utilization\":0.37,"));
    assert_null(strstr(text, "power_limit_watts"));
    assert_non_null(strstr(text, "\"temperature_celsius\":55,"));
    free(text);
    rk_metrics_destroy(m);

    /* With the monitor turned off, no GPU series and available 0. */
    rk_metrics_config mc = { .no_gpu_monitor = true };
    assert_int_equal(rk_metrics_create(&m, rt, &mc), RK_OK);
    assert_int_equal(
        rk_metrics_render(m, RK_METRICS_PROMETHEUS, &text, NULL), RK_OK);
    parse_exposition(text, &e);
    assert_true(get(&e, "ringkernel_gpu_monitor_available", "") == 0);
    assert_false(has(&e, "ringkernel_gpu_temperature_celsius", GPU_LABELS));
    free(e.s);
    free(text);
    rk_metrics_destroy(m);
    rk_runtime_destroy(rt);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_gauges),
    };

    /* Read once per process, at the monitor's first use: set it first. */
    setenv("RK_NVML_LIBRARY", RK_FAKE_NVML, 1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
