/*
 * GPU monitor over NVML, reached through dlopen("libnvidia-ml.so.1").
 *
 * The types and values below are NVML's documented ABI (nvml.h):
 * nvmlReturn_t is an int enum with NVML_SUCCESS = 0; nvmlMemory_t is
 * { total, free, used } as unsigned long long; nvmlUtilization_t is
 * { gpu, memory } as unsigned int; NVML_TEMPERATURE_GPU = 0;
 * NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2.
 *
 * The library is loaded once per process (pthread_once). nvmlInit_v2 and
 * nvmlShutdown are reference counted by NVML itself, so each monitor calls
 * one of each.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "ringkernel/device.h"

#define RK__NVML_DEFAULT_LIB     "libnvidia-ml.so.1"
#define RK__NVML_SUCCESS         0
#define RK__NVML_TEMPERATURE_GPU 0
#define RK__NVML_CLOCK_GRAPHICS  0
#define RK__NVML_CLOCK_SM        1
#define RK__NVML_CLOCK_MEM       2

typedef int rk__nvml_return;
typedef struct rk__nvml_device_st *rk__nvml_device;
struct rk__nvml_memory {
    unsigned long long total, free, used;
};
struct rk__nvml_utilization {
    unsigned gpu, memory;
};

#define RK__NVML_FNS(X)                                                       \
    X(nvmlInit, "nvmlInit_v2", (void))                                        \
    X(nvmlShutdown, "nvmlShutdown", (void))                                   \
    X(nvmlErrorString, "nvmlErrorString", (rk__nvml_return))                  \
    X(nvmlDeviceGetCount, "nvmlDeviceGetCount_v2", (unsigned *))              \
    X(nvmlDeviceGetHandleByIndex, "nvmlDeviceGetHandleByIndex_v2",            \
        (unsigned, rk__nvml_device *))                                        \
    X(nvmlDeviceGetName, "nvmlDeviceGetName",                                 \
        (rk__nvml_device, char *, unsigned))                                  \
    X(nvmlDeviceGetUtilizationRates, "nvmlDeviceGetUtilizationRates",         \
        (rk__nvml_device, struct rk__nvml_utilization *))                     \
    X(nvmlDeviceGetMemoryInfo, "nvmlDeviceGetMemoryInfo",                     \
        (rk__nvml_device, struct rk__nvml_memory *))                          \
    X(nvmlDeviceGetTemperature, "nvmlDeviceGetTemperature",                   \
        (rk__nvml_device, int, unsigned *))                                   \
    X(nvmlDeviceGetPowerUsage, "nvmlDeviceGetPowerUsage",                     \
        (rk__nvml_device, unsigned *))                                        \
    X(nvmlDeviceGetEnforcedPowerLimit, "nvmlDeviceGetEnforcedPowerLimit",     \
        (rk__nvml_device, unsigned *))                                        \
    X(nvmlDeviceGetClockInfo, "nvmlDeviceGetClockInfo",                       \
        (rk__nvml_device, int, unsigned *))

/* nvmlErrorString returns a string, every other entry an nvmlReturn_t; the
 * table stores them all as the same pointer type and casts the odd one. */
struct rk__nvml_api {
#define RK__NVML_FIELD(field, sym, params) rk__nvml_return(*field) params;
    RK__NVML_FNS(RK__NVML_FIELD)
#undef RK__NVML_FIELD
    void *lib;
};

static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;
static struct rk__nvml_api nvml;
static int nvml_loaded;
static char nvml_load_detail[320];

static void
load_nvml(void)
{
    const char *path, *e;

    nvml.lib
        = rk__dlopen_env("RK_NVML_LIBRARY", RK__NVML_DEFAULT_LIB, &path, &e);
    if (nvml.lib == NULL) {
        snprintf(nvml_load_detail, sizeof(nvml_load_detail),
            "cannot load NVML: %s", e);
        return;
    }
#define RK__NVML_RESOLVE(field, sym, params)                                  \
    *(void **)(&nvml.field) = dlsym(nvml.lib, sym);                           \
    if (nvml.field == NULL) {                                                 \
        snprintf(nvml_load_detail, sizeof(nvml_load_detail),                  \
            "NVML library %s lacks %s", path, sym);                           \
        return;                                                               \
    }
    RK__NVML_FNS(RK__NVML_RESOLVE)
#undef RK__NVML_RESOLVE
    nvml_loaded = 1;
}

static const char *
nvml_err(rk__nvml_return r)
{
    typedef const char *(*errstr_fn)(rk__nvml_return);
    const char *s = ((errstr_fn)(void (*)(void))nvml.nvmlErrorString)(r);
    return s ? s : "unknown NVML error";
}

struct rk_gpu_monitor {
    rk_monitor_status status;
    int initialised; /* nvmlInit succeeded: nvmlShutdown on close */
    unsigned count;
    char detail[320];
};

int
rk_gpu_monitor_open(rk_gpu_monitor **out)
{
    rk_gpu_monitor *m;
    rk__nvml_return r;

    if (out == NULL)
        return rk__fail(RK_EINVAL, "rk_gpu_monitor_open: out is NULL");
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return rk__fail(RK_ENOMEM, "rk_gpu_monitor_open");
    m->status = RK_MONITOR_UNAVAILABLE;
    pthread_once(&nvml_once, load_nvml);
    if (!nvml_loaded) {
        snprintf(m->detail, sizeof(m->detail), "%s", nvml_load_detail);
    } else if ((r = nvml.nvmlInit()) != RK__NVML_SUCCESS) {
        snprintf(m->detail, sizeof(m->detail), "nvmlInit_v2: %s (%d)",
            nvml_err(r), r);
    } else {
        m->initialised = 1;
        r = nvml.nvmlDeviceGetCount(&m->count);
        if (r != RK__NVML_SUCCESS) {
            snprintf(m->detail, sizeof(m->detail), "nvmlDeviceGetCount: %s",
                nvml_err(r));
            m->count = 0;
        } else {
            m->status = RK_MONITOR_AVAILABLE;
        }
    }
    *out = m;
    return RK_OK;
}

void
rk_gpu_monitor_close(rk_gpu_monitor *mon)
{
    if (mon != NULL && mon->initialised)
        nvml.nvmlShutdown();
    free(mon);
}

rk_monitor_status
rk_gpu_monitor_status(const rk_gpu_monitor *mon, const char **detail)
{
    if (detail)
        *detail = mon ? mon->detail : "no monitor";
    return mon ? mon->status : RK_MONITOR_UNAVAILABLE;
}

unsigned
rk_gpu_monitor_count(const rk_gpu_monitor *mon)
{
    return mon && mon->status == RK_MONITOR_AVAILABLE ? mon->count : 0;
}

int
rk_gpu_monitor_read(rk_gpu_monitor *mon, unsigned index, rk_gpu_reading *out)
{
    rk__nvml_device dev;
    struct rk__nvml_utilization u;
    struct rk__nvml_memory mem;
    unsigned v, g, s, mc;
    rk__nvml_return r;

    if (mon == NULL || out == NULL)
        return rk__fail(RK_EINVAL, "rk_gpu_monitor_read: NULL argument");
    if (mon->status != RK_MONITOR_AVAILABLE)
        return rk__fail(RK_ENODEV, "GPU monitor unavailable: %s", mon->detail);
    if (index >= mon->count)
        return rk__fail(
            RK_ENODEV, "no GPU %u (NVML sees %u)", index, mon->count);
    memset(out, 0, sizeof(*out));
    out->index = index;
    r = nvml.nvmlDeviceGetHandleByIndex(index, &dev);
    if (r != RK__NVML_SUCCESS)
        return rk__fail(RK_ENVML, "nvmlDeviceGetHandleByIndex(%u): %s", index,
            nvml_err(r));
    if (nvml.nvmlDeviceGetName(dev, out->name, sizeof(out->name))
        != RK__NVML_SUCCESS)
        snprintf(out->name, sizeof(out->name), "GPU %u", index);
    /* Each metric is optional: boards differ in what they report. */
    if (nvml.nvmlDeviceGetUtilizationRates(dev, &u) == RK__NVML_SUCCESS) {
        out->util_gpu_pct = u.gpu;
        out->util_mem_pct = u.memory;
        out->valid |= RK_READING_UTILIZATION;
    }
    if (nvml.nvmlDeviceGetMemoryInfo(dev, &mem) == RK__NVML_SUCCESS) {
        out->mem_total = mem.total;
        out->mem_free = mem.free;
        out->mem_used = mem.used;
        out->valid |= RK_READING_MEMORY;
    }
    if (nvml.nvmlDeviceGetTemperature(dev, RK__NVML_TEMPERATURE_GPU, &v)
        == RK__NVML_SUCCESS) {
        out->temperature_c = v;
        out->valid |= RK_READING_TEMPERATURE;
    }
    if (nvml.nvmlDeviceGetPowerUsage(dev, &v) == RK__NVML_SUCCESS) {
        out->power_mw = v;
        out->valid |= RK_READING_POWER;
    }
    if (nvml.nvmlDeviceGetEnforcedPowerLimit(dev, &v) == RK__NVML_SUCCESS) {
        out->power_limit_mw = v;
        out->valid |= RK_READING_POWER_LIMIT;
    }
    if (nvml.nvmlDeviceGetClockInfo(dev, RK__NVML_CLOCK_GRAPHICS, &g)
            == RK__NVML_SUCCESS
        && nvml.nvmlDeviceGetClockInfo(dev, RK__NVML_CLOCK_SM, &s)
            == RK__NVML_SUCCESS
        && nvml.nvmlDeviceGetClockInfo(dev, RK__NVML_CLOCK_MEM, &mc)
            == RK__NVML_SUCCESS) {
        out->clock_graphics_mhz = g;
        out->clock_sm_mhz = s;
        out->clock_mem_mhz = mc;
        out->valid |= RK_READING_CLOCKS;
    }
    return RK_OK;
}
