/*
 * tests/fake_nvml/fake_nvml.c - a stand-in for libnvidia-ml.so.1 with one
 * GPU and fixed readings, loaded through RK_NVML_LIBRARY by
 * test_metrics_gpu so that the metrics' GPU gauges are checked on
 * machines without a GPU. Only the entry points src/device/nvml.c looks up,
 * with NVML's C signatures (nvmlReturn_t is an int, 0 is success).
 */
#include <stdio.h>
#include <string.h>

typedef struct fake_dev *nvmlDevice_t;
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
    unsigned gpu, memory;
} nvmlUtilization_t;

static struct fake_dev {
    int unused;
} gpu0;

/* Each is exported for dlsym; -Wmissing-prototypes wants declarations. */
int nvmlInit_v2(void);
int nvmlShutdown(void);
const char *nvmlErrorString(int r);
int nvmlDeviceGetCount_v2(unsigned *n);
int nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t *d);
int nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned len);
int nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u);
int nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m);
int nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned *t);
int nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned *mw);
int nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned *mw);
int nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned *mhz);

int
nvmlInit_v2(void)
{
    return 0;
}

int
nvmlShutdown(void)
{
    return 0;
}

const char *
nvmlErrorString(int r)
{
    return r ? "fake error" : "success";
}

int
nvmlDeviceGetCount_v2(unsigned *n)
{
    *n = 1;
    return 0;
}

int
nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t *d)
{
    if (i != 0)
        return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    *d = &gpu0;
    return 0;
}

int
nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned len)
{
    (void)d;
    snprintf(name, len, "Fake \"GPU\" 80GB");
    return 0;
}

int
nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
    (void)d;
    u->gpu = 37;
    u->memory = 12;
    return 0;
}

int
nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
    (void)d;
    m->total = 85899345920ull; /* 80 GiB */
    m->used = 1073741824ull;   /* 1 GiB */
    m->free = m->total - m->used;
    return 0;
}

int
nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned *t)
{
    (void)d;
    (void)sensor;
    *t = 55;
    return 0;
}

int
nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned *mw)
{
    (void)d;
    *mw = 123456;
    return 0;
}

int
nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned *mw)
{
    (void)d;
    (void)mw;
    return 3; /* NVML_ERROR_NOT_SUPPORTED: the gauge must be left out */
}

int
nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned *mhz)
{
    (void)d;
    *mhz = type == 2 ? 2619 : 1980; /* memory : graphics, SM */
    return 0;
}
