/*
 * The one-time loader of the CUDA driver API (see cuda_driver.h).
 *
 * Loading happens inside pthread_once, so concurrent first callers all see
 * one finished table; after that the table is read-only and needs no lock.
 * The outcome (status + detail) is kept in statics so every later caller
 * gets the same answer without touching the driver again.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "device/cuda_driver.h"

#define RK__CUDA_DEFAULT_LIB "libcuda.so.1"
#define RK__CUDA_MAX_DEVICES 64

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static struct rk__cuda_driver drv;
static rk_cuda_status load_status = RK_CUDA_NO_DRIVER;
static char load_detail[320];

/* Primary contexts, retained lazily per ordinal and kept for the process.
 * ctx_lock guards the array; a retained context is never released, so a
 * pointer read under the lock stays valid after it is dropped. */
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static rk__cu_ctx primary_ctx[RK__CUDA_MAX_DEVICES];

/* The driver's own name for r, with a fallback for the codes a broken or
 * stub driver returns before its name table works. */
static const char *
cu_err_name(rk__cu_result r)
{
    const char *s = NULL;
    if (drv.cuGetErrorName != NULL && drv.cuGetErrorName(r, &s) == 0
        && s != NULL)
        return s;
    switch (r) {
    case RK__CUDA_ERROR_STUB_LIBRARY:
        return "CUDA_ERROR_STUB_LIBRARY";
    case RK__CUDA_ERROR_NO_DEVICE:
        return "CUDA_ERROR_NO_DEVICE";
    case RK__CUDA_ERROR_NOT_INITIALIZED:
        return "CUDA_ERROR_NOT_INITIALIZED";
    default:
        return "CUDA_ERROR_?";
    }
}

static const char *
cu_err_string(rk__cu_result r)
{
    const char *s = NULL;
    if (drv.cuGetErrorString == NULL || drv.cuGetErrorString(r, &s) != 0
        || s == NULL)
        return "unknown";
    return s;
}

static void set_outcome(rk_cuda_status st, const char *fmt, ...)
    RK__PRINTF(2, 3);

static void
set_outcome(rk_cuda_status st, const char *fmt, ...)
{
    va_list ap;

    load_status = st;
    va_start(ap, fmt);
    vsnprintf(load_detail, sizeof(load_detail), fmt, ap);
    va_end(ap);
}

static void
load_driver(void)
{
    const char *path, *e;
    rk__cu_result r;

    drv.lib
        = rk__dlopen_env("RK_CUDA_DRIVER", RK__CUDA_DEFAULT_LIB, &path, &e);
    if (drv.lib == NULL) {
        set_outcome(RK_CUDA_NO_DRIVER, "cannot load the CUDA driver: %s", e);
        return;
    }
    /* dlsym returns void *; the cast to a function pointer is what POSIX
     * guarantees to work. A missing entry point makes the driver unusable
     * rather than half-usable. */
#define RK__CUDA_RESOLVE(field, sym, params)                                  \
    *(void **)(&drv.field) = dlsym(drv.lib, sym);                             \
    if (drv.field == NULL) {                                                  \
        set_outcome(RK_CUDA_NO_DRIVER,                                        \
            "CUDA driver %s lacks the entry point %s", path, sym);            \
        return;                                                               \
    }
    RK__CUDA_DRIVER_FNS(RK__CUDA_RESOLVE)
#undef RK__CUDA_RESOLVE
#define RK__CUDA_RESOLVE_OPT(field, sym, params)                              \
    *(void **)(&drv.field) = dlsym(drv.lib, sym);
    RK__CUDA_DRIVER_OPT_FNS(RK__CUDA_RESOLVE_OPT)
#undef RK__CUDA_RESOLVE_OPT

    /* Lazy loading (the default since CUDA 12.2) loads a kernel's code at
     * its first launch, and that load can wait for the kernels already
     * running: a second persistent kernel would never start while the
     * first one runs. Eager loading, unless the user chose otherwise;
     * it only takes effect if we are the first to initialise the driver
     * (the cuda backend also loads each entry before launching it). */
    (void)setenv("CUDA_MODULE_LOADING", "EAGER", 0);
    r = drv.cuInit(0);
    if (r == RK__CUDA_ERROR_NO_DEVICE) {
        set_outcome(RK_CUDA_NO_DEVICE, "cuInit: CUDA_ERROR_NO_DEVICE (%s)",
            cu_err_string(r));
        return;
    }
    if (r != RK__CUDA_SUCCESS) {
        set_outcome(RK_CUDA_INIT_FAILED, "cuInit failed: %s (%s)",
            cu_err_name(r), cu_err_string(r));
        return;
    }
    r = drv.cuDriverGetVersion(&drv.version);
    if (r != RK__CUDA_SUCCESS || drv.version < RK__CUDA_MIN_DRIVER_VERSION) {
        set_outcome(RK_CUDA_INIT_FAILED,
            "CUDA driver %s reports version %d; ringkernel needs "
            ">= 11000",
            path, drv.version);
        return;
    }
    r = drv.cuDeviceGetCount(&drv.device_count);
    if (r != RK__CUDA_SUCCESS || drv.device_count <= 0) {
        drv.device_count = 0;
        set_outcome(RK_CUDA_NO_DEVICE,
            "the CUDA driver (%s) reports no devices", path);
        return;
    }
    if (drv.device_count > RK__CUDA_MAX_DEVICES)
        drv.device_count = RK__CUDA_MAX_DEVICES;
    load_status = RK_CUDA_AVAILABLE;
    load_detail[0] = '\0';
}

rk_cuda_status
rk__cuda_driver_status(const char **detail)
{
    pthread_once(&load_once, load_driver);
    if (detail != NULL)
        *detail = load_detail;
    return load_status;
}

int
rk__cuda_driver(const struct rk__cuda_driver **out)
{
    if (rk__cuda_driver_status(NULL) != RK_CUDA_AVAILABLE)
        return rk__fail(RK_ENODEV, "no CUDA device: %s", load_detail);
    *out = &drv;
    return RK_OK;
}

int
rk__cuda_check(rk__cu_result r, const char *what)
{
    if (r == RK__CUDA_SUCCESS)
        return RK_OK;
    return rk__fail(r == RK__CUDA_ERROR_OUT_OF_MEMORY ? RK_ENOMEM : RK_ECUDA,
        "%s: %s (%s)", what, cu_err_name(r), cu_err_string(r));
}

int
rk__cuda_enter(int ordinal, const struct rk__cuda_driver **out)
{
    const struct rk__cuda_driver *d;
    rk__cu_ctx ctx;
    int rc = rk__cuda_driver(&d);

    if (rc != RK_OK)
        return rc;
    if (ordinal < 0 || ordinal >= d->device_count)
        return rk__fail(RK_ENODEV, "no CUDA device %d (the driver has %d)",
            ordinal, d->device_count);
    pthread_mutex_lock(&ctx_lock);
    ctx = primary_ctx[ordinal];
    if (ctx == NULL) {
        rk__cu_device dev;
        rc = rk__cuda_check(d->cuDeviceGet(&dev, ordinal), "cuDeviceGet");
        if (rc == RK_OK)
            rc = rk__cuda_check(d->cuDevicePrimaryCtxRetain(&ctx, dev),
                "cuDevicePrimaryCtxRetain");
        if (rc == RK_OK)
            primary_ctx[ordinal] = ctx;
    }
    pthread_mutex_unlock(&ctx_lock);
    if (rc != RK_OK)
        return rc;
    rc = rk__cuda_check(d->cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    if (rc == RK_OK && out != NULL)
        *out = d;
    return rc;
}

rk_cuda_status
rk_cuda_probe(const char **detail)
{
    return rk__cuda_driver_status(detail);
}

const char *
rk_cuda_status_name(rk_cuda_status s)
{
    switch (s) {
    case RK_CUDA_AVAILABLE:
        return "available";
    case RK_CUDA_NO_DRIVER:
        return "no driver";
    case RK_CUDA_INIT_FAILED:
        return "driver initialisation failed";
    case RK_CUDA_NO_DEVICE:
        return "no device";
    }
    return "unknown";
}
