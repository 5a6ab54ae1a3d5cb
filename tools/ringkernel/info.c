/*
 * tools/ringkernel/info.c - `ringkernel info`: version, build
 * configuration, backends and whether each is usable, devices, and the GPU
 * monitor's readings when NVML is present.
 */
#include <inttypes.h>
#include <string.h>

#include "cli.h"

#ifndef RK_CLI_BUILD_TYPE
#define RK_CLI_BUILD_TYPE "unknown"
#endif

static void
help(FILE *f)
{
    fprintf(f,
        "usage: ringkernel info\n\n"
        "Prints the library version and build configuration, the backends\n"
        "compiled in and whether each is usable here (with the reason when\n"
        "not), every device with its properties, and GPU monitor readings\n"
        "when NVML is present.\n\n"
        "exit status: 0 ok, 1 the device query failed, 2 bad command "
        "line.\n");
}

static void
print_device(const rk_device_info *d)
{
    printf("  [%s %d] %s\n", d->kind == RK_DEVICE_CUDA ? "cuda" : "cpu",
        d->ordinal, d->name);
    if (d->kind == RK_DEVICE_CUDA)
        printf("      compute capability %d.%d, %d SMs, warp %d, "
               "%d threads/block, clock %d MHz, PCI bus %d\n",
            d->cc_major, d->cc_minor, d->multiprocessors, d->warp_size,
            d->max_threads_per_block, d->clock_khz / 1000, d->pci_bus_id);
    else
        printf("      %d logical cores\n", d->multiprocessors);
    printf("      memory %.1f GiB total, %.1f GiB free\n",
        (double)d->total_mem / (1 << 30), (double)d->free_mem / (1 << 30));
    printf("      map host memory %s, unified addressing %s, integrated %s, "
           "host-native atomics %s, concurrent managed access %s\n",
        d->can_map_host_memory ? "yes" : "no",
        d->unified_addressing ? "yes" : "no", d->integrated ? "yes" : "no",
        d->host_native_atomics ? "yes" : "no",
        d->concurrent_managed_access ? "yes" : "no");
}

static void
print_monitor(void)
{
    rk_gpu_monitor *mon;
    const char *detail = "";

    if (rk_gpu_monitor_open(&mon) != RK_OK) {
        printf("gpu monitor: could not open (out of memory)\n");
        return;
    }
    if (rk_gpu_monitor_status(mon, &detail) != RK_MONITOR_AVAILABLE) {
        printf("gpu monitor: unavailable (%s)\n", detail);
        rk_gpu_monitor_close(mon);
        return;
    }
    printf("gpu monitor: NVML, %u GPU(s)\n", rk_gpu_monitor_count(mon));
    for (unsigned i = 0; i < rk_gpu_monitor_count(mon); i++) {
        rk_gpu_reading r;
        if (rk_gpu_monitor_read(mon, i, &r) != RK_OK) {
            printf("  [%u] read failed: %s\n", i, rk_errdetail());
            continue;
        }
        printf("  [%u] %s:", i, r.name);
        if (r.valid & RK_READING_UTILIZATION)
            printf(" util %u %% (mem %u %%)", r.util_gpu_pct, r.util_mem_pct);
        if (r.valid & RK_READING_MEMORY)
            printf(" mem %.1f/%.1f GiB", (double)r.mem_used / (1 << 30),
                (double)r.mem_total / (1 << 30));
        if (r.valid & RK_READING_TEMPERATURE)
            printf(" %u C", r.temperature_c);
        if (r.valid & RK_READING_POWER)
            printf(" %.1f W", r.power_mw / 1000.0);
        if (r.valid & RK_READING_POWER_LIMIT)
            printf(" (limit %.0f W)", r.power_limit_mw / 1000.0);
        if (r.valid & RK_READING_CLOCKS)
            printf(" sm %u MHz mem %u MHz", r.clock_sm_mhz, r.clock_mem_mhz);
        printf("\n");
    }
    rk_gpu_monitor_close(mon);
}

int
cli_info(int argc, char **argv)
{
    static const struct option opts[]
        = { { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
    cli_opts p = { "info", opts, help, 0, 0 };
    rk_device_list *list;
    const char *detail = "";
    rk_cuda_status cs;
    int rc, go;

    (void)cli_opt_next(&p, argc, argv, &go); /* no option but --help */
    if (go != CLI_GO_ON)
        return go;
    printf("ringkernel %s (ABI %d)\n", rk_version(), RK_ABI_VERSION);
    printf("build: %s, C11, metrics endpoint %s\n", RK_CLI_BUILD_TYPE,
        rk_metrics_http_available()
            ? "compiled in (libmicrohttpd)"
            : "not compiled in (install libmicrohttpd-dev and rebuild)");

    if ((rc = rk_devices_query(&list)) != RK_OK) {
        cli_report_error("info", "device query", rc);
        return CLI_FAILED;
    }
    cs = rk_device_list_cuda_status(list, &detail);
    printf("backends (best first):\n");
    for (size_t i = 0; i < rk_backend_count(); i++) {
        const char *name = rk_backend_name(i);
        if (rk_backend_probe(name) == RK_OK)
            printf("  %-5s usable\n", name);
        else
            printf("  %-5s not usable: %s\n", name, rk_errdetail());
    }
    printf("cuda driver: %s%s%s", rk_cuda_status_name(cs), *detail ? " (" : "",
        detail);
    printf("%s", *detail ? ")" : "");
    if (rk_device_list_cuda_driver_version(list))
        printf(", version %d", rk_device_list_cuda_driver_version(list));
    printf("\ndevices:\n");
    for (size_t i = 0; i < rk_device_list_count(list); i++)
        print_device(rk_device_list_get(list, i));
    rk_device_list_free(list);
    print_monitor();
    return CLI_OK;
}
