/*
 * device_query - lists the compute devices ringkernel sees and, where NVML
 * is present, live readings for each GPU. Works on a machine without a
 * GPU: it then prints the CPU and says why CUDA is unavailable.
 */
#include <stdio.h>

#include "ringkernel/ringkernel.h"

static void
print_device(const rk_device_info *d)
{
    printf("%s %d: %s\n", d->kind == RK_DEVICE_CUDA ? "cuda" : "cpu",
        d->ordinal, d->name);
    if (d->kind == RK_DEVICE_CUDA)
        printf("  compute capability %d.%d, %d SMs, %d threads/block, "
               "warp %d, %d MHz, PCI bus %d\n",
            d->cc_major, d->cc_minor, d->multiprocessors,
            d->max_threads_per_block, d->warp_size, d->clock_khz / 1000,
            d->pci_bus_id);
    else
        printf(
            "  %d cores, %d MHz\n", d->multiprocessors, d->clock_khz / 1000);
    printf("  memory: %.1f GiB total, %.1f GiB free\n",
        (double)d->total_mem / (1u << 30), (double)d->free_mem / (1u << 30));
    if (d->kind == RK_DEVICE_CUDA)
        printf("  map host memory %s, unified addressing %s, host-native "
               "atomics %s, concurrent managed access %s\n",
            d->can_map_host_memory ? "yes" : "no",
            d->unified_addressing ? "yes" : "no",
            d->host_native_atomics ? "yes" : "no",
            d->concurrent_managed_access ? "yes" : "no");
}

int
main(void)
{
    rk_device_list *list;
    rk_gpu_monitor *mon;
    const rk_device_info *best;
    const char *detail;
    rk_cuda_status st;
    int rc;

    if ((rc = rk_devices_query(&list)) != RK_OK) {
        fprintf(stderr, "rk_devices_query: %s\n", rk_strerror(rc));
        return 1;
    }
    for (size_t i = 0; i < rk_device_list_count(list); i++)
        print_device(rk_device_list_get(list, i));
    st = rk_device_list_cuda_status(list, &detail);
    if (st == RK_CUDA_AVAILABLE)
        printf("CUDA driver version %d\n",
            rk_device_list_cuda_driver_version(list));
    else
        printf("CUDA: %s (%s)\n", rk_cuda_status_name(st), detail);
    if (rk_device_select(list, RK_DEVICE_ANY, -1, &best) == RK_OK)
        printf("selected: %s %d (%s)\n",
            best->kind == RK_DEVICE_CUDA ? "cuda" : "cpu", best->ordinal,
            best->name);

    if ((rc = rk_gpu_monitor_open(&mon)) != RK_OK) {
        fprintf(stderr, "rk_gpu_monitor_open: %s\n", rk_strerror(rc));
        rk_device_list_free(list);
        return 1;
    }
    if (rk_gpu_monitor_status(mon, &detail) != RK_MONITOR_AVAILABLE)
        printf("GPU monitor: unavailable (%s)\n", detail);
    for (unsigned i = 0; i < rk_gpu_monitor_count(mon); i++) {
        rk_gpu_reading r;
        if (rk_gpu_monitor_read(mon, i, &r) != RK_OK) {
            printf("GPU %u: %s\n", i, rk_errdetail());
            continue;
        }
        printf("GPU %u %s:", i, r.name);
        if (r.valid & RK_READING_UTILIZATION)
            printf(" util %u%% (mem %u%%)", r.util_gpu_pct, r.util_mem_pct);
        if (r.valid & RK_READING_MEMORY)
            printf(" mem %llu/%llu MiB",
                (unsigned long long)(r.mem_used >> 20),
                (unsigned long long)(r.mem_total >> 20));
        if (r.valid & RK_READING_TEMPERATURE)
            printf(" %u C", r.temperature_c);
        if (r.valid & RK_READING_POWER)
            printf(" %.1f W", r.power_mw / 1000.0);
        if (r.valid & RK_READING_POWER_LIMIT)
            printf(" (limit %.1f W)", r.power_limit_mw / 1000.0);
        if (r.valid & RK_READING_CLOCKS)
            printf(" sm %u MHz, mem %u MHz", r.clock_sm_mhz, r.clock_mem_mhz);
        printf("\n");
    }
    rk_gpu_monitor_close(mon);
    rk_device_list_free(list);
    return 0;
}
