/*
 * Device enumeration: the CPU from /proc and sysconf, CUDA devices through
 * the dlopen'ed driver (cuda_driver.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "device/cuda_driver.h"
#include "ringkernel/device.h"

struct rk_device_list {
    size_t count;
    rk_cuda_status cuda_status;
    int cuda_version;
    char cuda_detail[320];
    rk_device_info dev[]; /* count entries: CPU first, then CUDA 0.. */
};

/* Copies the value after "key<spaces>:" of the first /proc line starting
 * with key into buf; returns 0 when not found. */
static int
proc_field(const char *file, const char *key, char *buf, size_t len)
{
    char line[512];
    size_t klen = strlen(key);
    int found = 0;
    FILE *f = fopen(file, "r");

    if (f == NULL)
        return 0;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        char *p;
        if (strncmp(line, key, klen) != 0)
            continue;
        p = line + klen;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p != ':')
            continue;
        p++;
        while (*p == ' ' || *p == '\t')
            p++;
        p[strcspn(p, "\n")] = '\0';
        snprintf(buf, len, "%s", p);
        found = 1;
    }
    fclose(f);
    return found;
}

static uint64_t
meminfo_bytes(const char *key)
{
    char buf[64];
    if (!proc_field("/proc/meminfo", key, buf, sizeof(buf)))
        return 0;
    return (uint64_t)strtoull(buf, NULL, 10) * 1024u; /* reported in kB */
}

static void
fill_cpu(rk_device_info *d)
{
    char buf[64];
    long cores = sysconf(_SC_NPROCESSORS_ONLN);

    memset(d, 0, sizeof(*d));
    d->kind = RK_DEVICE_CPU;
    /* x86 names the CPU "model name"; some arm64 kernels give only
     * "Hardware" or nothing at all. */
    if (!proc_field("/proc/cpuinfo", "model name", d->name, sizeof(d->name))
        && !proc_field("/proc/cpuinfo", "Hardware", d->name, sizeof(d->name)))
        snprintf(d->name, sizeof(d->name), "CPU");
    d->multiprocessors = cores > 0 ? (int)cores : 1;
    d->max_threads_per_block = 1;
    d->warp_size = 1;
    if (proc_field("/proc/cpuinfo", "cpu MHz", buf, sizeof(buf)))
        d->clock_khz = (int)(atof(buf) * 1000.0);
    d->total_mem = meminfo_bytes("MemTotal");
    d->free_mem = meminfo_bytes("MemAvailable");
    d->pci_bus_id = -1;
    d->can_map_host_memory = true;
    d->unified_addressing = true;
    d->integrated = true;
    d->host_native_atomics = true;
    d->concurrent_managed_access = true;
}

static int
cuda_attr(const struct rk__cuda_driver *drv, rk__cu_device dev, int attr)
{
    int v = 0;
    if (drv->cuDeviceGetAttribute(&v, attr, dev) != RK__CUDA_SUCCESS)
        return 0;
    return v;
}

/* Fills d for CUDA ordinal i. Free memory needs a current context, which
 * retaining the primary context provides. */
static int
fill_cuda(const struct rk__cuda_driver *drv, int i, rk_device_info *d)
{
    rk__cu_device dev;
    size_t total = 0, avail = 0;
    int rc;

    memset(d, 0, sizeof(*d));
    d->kind = RK_DEVICE_CUDA;
    d->ordinal = i;
    rc = rk__cuda_check(drv->cuDeviceGet(&dev, i), "cuDeviceGet");
    if (rc != RK_OK)
        return rc;
    if (drv->cuDeviceGetName(d->name, (int)sizeof(d->name), dev)
        != RK__CUDA_SUCCESS)
        snprintf(d->name, sizeof(d->name), "CUDA device %d", i);
    d->name[sizeof(d->name) - 1] = '\0';
    if (drv->cuDeviceTotalMem(&total, dev) == RK__CUDA_SUCCESS)
        d->total_mem = total;
    if (rk__cuda_enter(i, NULL) == RK_OK
        && drv->cuMemGetInfo(&avail, &total) == RK__CUDA_SUCCESS)
        d->free_mem = avail;
    d->cc_major = cuda_attr(drv, dev, RK__CU_ATTR_COMPUTE_CAPABILITY_MAJOR);
    d->cc_minor = cuda_attr(drv, dev, RK__CU_ATTR_COMPUTE_CAPABILITY_MINOR);
    d->multiprocessors = cuda_attr(drv, dev, RK__CU_ATTR_MULTIPROCESSOR_COUNT);
    d->max_threads_per_block
        = cuda_attr(drv, dev, RK__CU_ATTR_MAX_THREADS_PER_BLOCK);
    d->warp_size = cuda_attr(drv, dev, RK__CU_ATTR_WARP_SIZE);
    d->clock_khz = cuda_attr(drv, dev, RK__CU_ATTR_CLOCK_RATE);
    d->pci_bus_id = cuda_attr(drv, dev, RK__CU_ATTR_PCI_BUS_ID);
    d->can_map_host_memory
        = cuda_attr(drv, dev, RK__CU_ATTR_CAN_MAP_HOST_MEMORY) != 0;
    d->unified_addressing
        = cuda_attr(drv, dev, RK__CU_ATTR_UNIFIED_ADDRESSING) != 0;
    d->integrated = cuda_attr(drv, dev, RK__CU_ATTR_INTEGRATED) != 0;
    d->host_native_atomics
        = cuda_attr(drv, dev, RK__CU_ATTR_HOST_NATIVE_ATOMIC_SUPPORTED) != 0;
    d->concurrent_managed_access
        = cuda_attr(drv, dev, RK__CU_ATTR_CONCURRENT_MANAGED_ACCESS) != 0;
    return RK_OK;
}

int
rk_devices_query(rk_device_list **out)
{
    const struct rk__cuda_driver *drv = NULL;
    const char *detail;
    rk_cuda_status st;
    rk_device_list *l;
    int ncuda = 0;

    if (out == NULL)
        return rk__fail(RK_EINVAL, "rk_devices_query: out is NULL");
    st = rk__cuda_driver_status(&detail);
    if (st == RK_CUDA_AVAILABLE && rk__cuda_driver(&drv) == RK_OK)
        ncuda = drv->device_count;
    l = calloc(1, sizeof(*l) + (size_t)(1 + ncuda) * sizeof(rk_device_info));
    if (l == NULL)
        return rk__fail(RK_ENOMEM, "rk_devices_query: device list");
    l->cuda_status = st;
    l->cuda_version = drv ? drv->version : 0;
    snprintf(l->cuda_detail, sizeof(l->cuda_detail), "%s", detail);
    fill_cpu(&l->dev[0]);
    l->count = 1;
    for (int i = 0; i < ncuda; i++) {
        /* A device that fails to answer is left out, not fatal; the
         * detail says which one. */
        if (fill_cuda(drv, i, &l->dev[l->count]) == RK_OK)
            l->count++;
        else
            snprintf(l->cuda_detail, sizeof(l->cuda_detail),
                "CUDA device %d skipped: %s", i, rk_errdetail());
    }
    *out = l;
    return RK_OK;
}

void
rk_device_list_free(rk_device_list *list)
{
    free(list);
}

size_t
rk_device_list_count(const rk_device_list *list)
{
    return list ? list->count : 0;
}

const rk_device_info *
rk_device_list_get(const rk_device_list *list, size_t i)
{
    if (list == NULL || i >= list->count)
        return NULL;
    return &list->dev[i];
}

rk_cuda_status
rk_device_list_cuda_status(const rk_device_list *list, const char **detail)
{
    if (detail)
        *detail = list ? list->cuda_detail : "no device list";
    return list ? list->cuda_status : RK_CUDA_NO_DRIVER;
}

int
rk_device_list_cuda_driver_version(const rk_device_list *list)
{
    return list ? list->cuda_version : 0;
}

int
rk_device_select(const rk_device_list *list, rk_device_kind kind, int ordinal,
    const rk_device_info **out)
{
    int seen = 0;

    if (list == NULL || out == NULL || ordinal < -1
        || (unsigned)kind > RK_DEVICE_ANY)
        return rk__fail(RK_EINVAL, "rk_device_select: bad argument");
    if (kind == RK_DEVICE_ANY) {
        if (ordinal >= 0)
            return rk__fail(
                RK_EINVAL, "rk_device_select: RK_DEVICE_ANY takes ordinal -1");
        kind = list->count > 1 ? RK_DEVICE_CUDA : RK_DEVICE_CPU;
    }
    if (ordinal < 0)
        ordinal = 0;
    for (size_t i = 0; i < list->count; i++) {
        if (list->dev[i].kind != kind)
            continue;
        if (list->dev[i].ordinal == ordinal) {
            *out = &list->dev[i];
            return RK_OK;
        }
        seen++;
    }
    if (kind == RK_DEVICE_CUDA && list->cuda_status != RK_CUDA_AVAILABLE)
        return rk__fail(RK_ENODEV, "no CUDA device (%s): %s",
            rk_cuda_status_name(list->cuda_status), list->cuda_detail);
    return rk__fail(RK_ENODEV, "no %s device %d (there are %d)",
        kind == RK_DEVICE_CPU ? "CPU" : "CUDA", ordinal, seen);
}
