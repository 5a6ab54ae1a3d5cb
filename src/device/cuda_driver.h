/*
 * src/device/cuda_driver.h - the CUDA driver API, reached through dlopen.
 *
 * The library never links against CUDA and never includes cuda.h. This
 * header declares the handful of driver types, enum values and function
 * signatures ringkernel uses, copied from the documented values in the
 * toolkit's cuda.h (CUDA 13.0; the values have been stable since CUDA 9).
 * rk__cuda_driver() loads libcuda.so.1 once per process (pthread_once),
 * resolves every entry point into one table, calls cuInit and checks the
 * driver version. Every later user (device enumeration, buffers, pools and
 * the CUDA kernel backend) shares that table.
 *
 * RK_CUDA_DRIVER=/path/to/libcuda.so overrides the library that is opened,
 * so tests can point it at a missing file (or the toolkit's stub library)
 * and exercise the "no CUDA" paths deterministically on any machine.
 *
 * Ownership: the table and the library handle belong to the process and
 * are never unloaded. Callers only read the table.
 */
#ifndef RK_SRC_DEVICE_CUDA_DRIVER_H
#define RK_SRC_DEVICE_CUDA_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "ringkernel/device.h"

/* Driver types, laid out exactly as cuda.h declares them. */
typedef int rk__cu_result;                      /* CUresult */
typedef int rk__cu_device;                      /* CUdevice */
typedef unsigned long long rk__cu_dptr;         /* CUdeviceptr (64-bit) */
typedef struct rk__cu_ctx_st *rk__cu_ctx;       /* CUcontext */
typedef struct rk__cu_stream_st *rk__cu_stream; /* CUstream */
typedef struct rk__cu_mod_st *rk__cu_module;    /* CUmodule */
typedef struct rk__cu_func_st *rk__cu_function; /* CUfunction */

/* CUresult values (cuda.h, enum cudaError_enum). */
#define RK__CUDA_SUCCESS               0
#define RK__CUDA_ERROR_INVALID_VALUE   1
#define RK__CUDA_ERROR_OUT_OF_MEMORY   2
#define RK__CUDA_ERROR_NOT_INITIALIZED 3
#define RK__CUDA_ERROR_STUB_LIBRARY    34
#define RK__CUDA_ERROR_NO_DEVICE       100
#define RK__CUDA_ERROR_NOT_READY       600
/* Peer access (cuCtxEnablePeerAccess). */
#define RK__CUDA_ERROR_PEER_ACCESS_UNSUPPORTED     217
#define RK__CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED 704

/* CUdevice_attribute values (cuda.h, enum CUdevice_attribute_enum). */
#define RK__CU_ATTR_MAX_THREADS_PER_BLOCK        1
#define RK__CU_ATTR_WARP_SIZE                    10
#define RK__CU_ATTR_CLOCK_RATE                   13
#define RK__CU_ATTR_MULTIPROCESSOR_COUNT         16
#define RK__CU_ATTR_INTEGRATED                   18
#define RK__CU_ATTR_CAN_MAP_HOST_MEMORY          19
#define RK__CU_ATTR_PCI_BUS_ID                   33
#define RK__CU_ATTR_UNIFIED_ADDRESSING           41
#define RK__CU_ATTR_COMPUTE_CAPABILITY_MAJOR     75
#define RK__CU_ATTR_COMPUTE_CAPABILITY_MINOR     76
#define RK__CU_ATTR_MANAGED_MEMORY               83
#define RK__CU_ATTR_HOST_NATIVE_ATOMIC_SUPPORTED 86
#define RK__CU_ATTR_PAGEABLE_MEMORY_ACCESS       88
#define RK__CU_ATTR_CONCURRENT_MANAGED_ACCESS    89

/* Flags (cuda.h). */
#define RK__CU_MEMHOSTALLOC_PORTABLE  0x01
#define RK__CU_MEMHOSTALLOC_DEVICEMAP 0x02
#define RK__CU_STREAM_NON_BLOCKING    0x1
#define RK__CU_MEM_ATTACH_GLOBAL      0x1
#define RK__CU_DEVICE_CPU             (-1) /* cuMemPrefetchAsync: the host */

/* The oldest driver accepted: CUDA 11.0 has every entry point below. */
#define RK__CUDA_MIN_DRIVER_VERSION 11000

/*
 * X(field, "exported symbol", parameter list). The field keeps the name a
 * CUDA programmer expects; the symbol is the versioned export that cuda.h's
 * macros select (cuMemAlloc is cuMemAlloc_v2 and so on). Every entry is
 * required: a driver that lacks one is reported as unusable.
 */
#define RK__CUDA_DRIVER_FNS(X)                                                \
    X(cuGetErrorName, "cuGetErrorName", (rk__cu_result, const char **))       \
    X(cuGetErrorString, "cuGetErrorString", (rk__cu_result, const char **))   \
    X(cuInit, "cuInit", (unsigned))                                           \
    X(cuDriverGetVersion, "cuDriverGetVersion", (int *))                      \
    X(cuDeviceGetCount, "cuDeviceGetCount", (int *))                          \
    X(cuDeviceGet, "cuDeviceGet", (rk__cu_device *, int))                     \
    X(cuDeviceGetName, "cuDeviceGetName", (char *, int, rk__cu_device))       \
    X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", (size_t *, rk__cu_device))     \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute",                           \
        (int *, int, rk__cu_device))                                          \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain",                   \
        (rk__cu_ctx *, rk__cu_device))                                        \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2",              \
        (rk__cu_device))                                                      \
    X(cuCtxSetCurrent, "cuCtxSetCurrent", (rk__cu_ctx))                       \
    X(cuCtxGetCurrent, "cuCtxGetCurrent", (rk__cu_ctx *))                     \
    X(cuCtxPushCurrent, "cuCtxPushCurrent_v2", (rk__cu_ctx))                  \
    X(cuCtxPopCurrent, "cuCtxPopCurrent_v2", (rk__cu_ctx *))                  \
    X(cuCtxSynchronize, "cuCtxSynchronize", (void))                           \
    X(cuMemGetInfo, "cuMemGetInfo_v2", (size_t *, size_t *))                  \
    X(cuMemAlloc, "cuMemAlloc_v2", (rk__cu_dptr *, size_t))                   \
    X(cuMemFree, "cuMemFree_v2", (rk__cu_dptr))                               \
    X(cuMemHostAlloc, "cuMemHostAlloc", (void **, size_t, unsigned))          \
    X(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2",              \
        (rk__cu_dptr *, void *, unsigned))                                    \
    X(cuMemFreeHost, "cuMemFreeHost", (void *))                               \
    X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", (rk__cu_dptr, const void *, size_t))   \
    X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", (void *, rk__cu_dptr, size_t))         \
    X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2",                              \
        (rk__cu_dptr, const void *, size_t, rk__cu_stream))                   \
    X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2",                              \
        (void *, rk__cu_dptr, size_t, rk__cu_stream))                         \
    X(cuMemsetD8, "cuMemsetD8_v2", (rk__cu_dptr, unsigned char, size_t))      \
    X(cuStreamCreate, "cuStreamCreate", (rk__cu_stream *, unsigned))          \
    X(cuStreamDestroy, "cuStreamDestroy_v2", (rk__cu_stream))                 \
    X(cuStreamSynchronize, "cuStreamSynchronize", (rk__cu_stream))            \
    X(cuStreamQuery, "cuStreamQuery", (rk__cu_stream))                        \
    X(cuModuleLoadData, "cuModuleLoadData", (rk__cu_module *, const void *))  \
    X(cuModuleUnload, "cuModuleUnload", (rk__cu_module))                      \
    X(cuModuleGetFunction, "cuModuleGetFunction",                             \
        (rk__cu_function *, rk__cu_module, const char *))                     \
    X(cuModuleGetGlobal, "cuModuleGetGlobal_v2",                              \
        (rk__cu_dptr *, size_t *, rk__cu_module, const char *))               \
    X(cuLaunchKernel, "cuLaunchKernel",                                       \
        (rk__cu_function, unsigned, unsigned, unsigned, unsigned, unsigned,   \
            unsigned, unsigned, rk__cu_stream, void **, void **))

/* A CUmemLocation (CUDA 12.2+): {type, id}, passed by value to the _v2
 * prefetch and advice calls. Types: 1 device, 2 host. */
typedef struct rk__cu_memloc {
    int type;
    int id;
} rk__cu_memloc;

/*
 * Optional entry points: NULL where the driver lacks them, and the calls
 * that need them report RK_ENOTSUP. Managed memory (cuMemAllocManaged,
 * prefetch and advice: the CUDA 8 signatures, which drivers keep
 * exporting, else the CUDA 12.2 _v2 ones with a location) and peer
 * access between devices.
 */
#define RK__CUDA_DRIVER_OPT_FNS(X)                                            \
    X(cuMemAllocManaged, "cuMemAllocManaged",                                 \
        (rk__cu_dptr *, size_t, unsigned))                                    \
    X(cuMemPrefetchAsync, "cuMemPrefetchAsync",                               \
        (rk__cu_dptr, size_t, rk__cu_device, rk__cu_stream))                  \
    X(cuMemPrefetchAsync_v2, "cuMemPrefetchAsync_v2",                         \
        (rk__cu_dptr, size_t, rk__cu_memloc, unsigned, rk__cu_stream))        \
    X(cuMemAdvise, "cuMemAdvise", (rk__cu_dptr, size_t, int, rk__cu_device))  \
    X(cuMemAdvise_v2, "cuMemAdvise_v2",                                       \
        (rk__cu_dptr, size_t, int, rk__cu_memloc))                            \
    X(cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer",                         \
        (int *, rk__cu_device, rk__cu_device))                                \
    X(cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess", (rk__cu_ctx, unsigned))

struct rk__cuda_driver {
#define RK__CUDA_FIELD(field, sym, params) rk__cu_result(*field) params;
    RK__CUDA_DRIVER_FNS(RK__CUDA_FIELD)
    RK__CUDA_DRIVER_OPT_FNS(RK__CUDA_FIELD)
#undef RK__CUDA_FIELD
    void *lib;        /* dlopen handle, never closed */
    int version;      /* cuDriverGetVersion, e.g. 12040 */
    int device_count; /* cuDeviceGetCount after cuInit */
};

/*
 * Loads and initialises the driver once per process. On success *out is
 * the shared table (at least one device present) and RK_OK is returned.
 * Otherwise returns RK_ENODEV with a detail naming the cause (library
 * missing, symbol missing, cuInit failed, driver too old, no device);
 * the same cause is reported on every later call.
 */
int rk__cuda_driver(const struct rk__cuda_driver **out);

/* The outcome of the one-time load, with its detail (static string; "" on
 * success). Never fails; loads the driver if nobody has yet. */
rk_cuda_status rk__cuda_driver_status(const char **detail);

/*
 * Turns a failed CUresult into RK_ECUDA with a detail such as
 * "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (out of memory)", or returns RK_OK
 * for CUDA_SUCCESS. Out-of-memory maps to RK_ENOMEM instead.
 */
int rk__cuda_check(rk__cu_result r, const char *what);

/*
 * Makes device ordinal's primary context current on the calling thread,
 * retaining it on first use (the retain lasts for the process). Needed
 * before any memory or stream call. Returns RK_ENODEV when CUDA or that
 * ordinal is absent, RK_ECUDA when the driver refuses.
 */
int rk__cuda_enter(int ordinal, const struct rk__cuda_driver **drv);

#endif /* RK_SRC_DEVICE_CUDA_DRIVER_H */
