/** @file
 * ringkernel/device.h - compute devices and the GPU monitor.
 *
 * Devices. rk_devices_query() lists every compute device: the CPU always
 * (entry 0), then each CUDA device the driver reports. CUDA is reached at
 * run time through dlopen("libcuda.so.1"); the library has no link-time
 * CUDA dependency. A machine without the driver or without a GPU is not an
 * error: the list still holds the CPU and its cuda_status says why there is
 * no CUDA device (with a human-readable detail).
 *
 * Monitor. rk_gpu_monitor_open() reads live GPU figures (utilization,
 * memory, temperature, power, clocks) through NVML, also via dlopen
 * ("libnvidia-ml.so.1"). Without NVML the monitor opens anyway and reports
 * RK_MONITOR_UNAVAILABLE with a detail.
 *
 * Environment: RK_CUDA_DRIVER and RK_NVML_LIBRARY name the library files to
 * open instead of the defaults (tests point them at missing files to
 * exercise the no-GPU paths). Both are read once per process.
 *
 * Ownership: a device list and a monitor belong to the caller, who frees
 * them with rk_device_list_free() / rk_gpu_monitor_close(). Pointers
 * returned by the getters stay valid until then. All calls are thread-safe
 * except that one list or monitor must not be freed while in use.
 *
 * NULL and out-of-range arguments: functions returning int give RK_EINVAL
 * (RK_ENODEV for a device that is not there);
 * the others do nothing or give a neutral answer (0, NULL, a status that
 * is not "available"). tests/test_bad_input.c holds them to it.
 */
#ifndef RINGKERNEL_DEVICE_H
#define RINGKERNEL_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The kinds of device. */
typedef enum rk_device_kind {
    RK_DEVICE_CPU = 0,  /**< the host processor(s) */
    RK_DEVICE_CUDA = 1, /**< an NVIDIA GPU through the CUDA driver API */
    RK_DEVICE_ANY = 2   /**< for rk_device_select(): the best available */
} rk_device_kind;

/** Why CUDA devices are or are not available. */
typedef enum rk_cuda_status {
    RK_CUDA_AVAILABLE = 0,   /**< the driver loaded and found >= 1 GPU */
    RK_CUDA_NO_DRIVER = 1,   /**< libcuda.so.1 missing or lacks symbols */
    RK_CUDA_INIT_FAILED = 2, /**< cuInit failed (stub library, bad driver),
                                or the driver is older than CUDA 11.0 */
    RK_CUDA_NO_DEVICE = 3    /**< the driver works but reports no GPU */
} rk_cuda_status;

/** "available", "no driver", ... Never NULL. */
const char *rk_cuda_status_name(rk_cuda_status s);

/** Properties of one device. For the CPU the GPU-only fields hold the
 * values that make the CPU "device" behave sensibly in generic code:
 * warp_size 1, max_threads_per_block 1, multiprocessors = online cores,
 * and every capability flag true except host_native_atomics (which is
 * trivially true for the CPU and reported so). */
typedef struct rk_device_info {
    rk_device_kind kind; /**< CPU or CUDA */
    int ordinal;         /**< index among devices of the same kind */
    char name[128];      /**< "NVIDIA H100 80GB HBM3", or the CPU model name */
    int cc_major;        /**< compute capability; 0 for the CPU */
    int cc_minor;        /**< compute capability, minor part; 0 for the CPU */
    uint64_t total_mem;  /**< bytes; for the CPU: MemTotal */
    uint64_t free_mem;   /**< bytes at query time; CPU: MemAvailable */
    int multiprocessors; /**< SMs; CPU: online logical cores */
    int max_threads_per_block; /**< CPU: 1 */
    int warp_size;             /**< CPU: 1 */
    int clock_khz;             /**< SM clock; CPU: 0 when unknown */
    int pci_bus_id;            /**< CUDA only, -1 for the CPU */
    bool can_map_host_memory;  /**< pinned host memory is device-visible */
    bool unified_addressing;   /**< host and device share one address space */
    bool integrated;           /**< shares physical memory with the host */
    /** The two properties the GPU queue design depends on: whether CPU and
     * GPU atomics on mapped memory are atomic with respect to each other,
     * and whether managed memory may be touched by both at once. */
    bool host_native_atomics; /**< CPU and GPU atomics on mapped memory are
                                 mutually atomic */
    bool concurrent_managed_access; /**< CPU and GPU may touch managed memory
                                       at once */
} rk_device_info;

/** An opaque list of devices from rk_devices_query(); the caller owns it. */
typedef struct rk_device_list rk_device_list;

/** Enumerates devices. Fails only with RK_ENOMEM; a missing CUDA driver or
 * GPU is reported through rk_device_list_cuda_status(). On success the
 * caller owns *out. */
int rk_devices_query(rk_device_list **out);

/** Frees a list and every rk_device_info it handed out. NULL is ignored. */
void rk_device_list_free(rk_device_list *list);

/** Number of devices (>= 1: the CPU is always there). */
size_t rk_device_list_count(const rk_device_list *list);

/** Device i, or NULL when i is out of range. */
const rk_device_info *rk_device_list_get(const rk_device_list *list, size_t i);

/** Why CUDA devices are (not) in the list; *detail (if detail != NULL)
 * receives a sentence such as "libcuda.so.1: cannot open shared object
 * file" ("" when available). The string lives as long as the list. */
rk_cuda_status rk_device_list_cuda_status(
    const rk_device_list *list, const char **detail);

/** The CUDA driver version (e.g. 12040), or 0 without CUDA. */
int rk_device_list_cuda_driver_version(const rk_device_list *list);

/**
 * Picks a device. kind RK_DEVICE_ANY with ordinal -1 gives CUDA device 0
 * when there is one and the CPU otherwise; a concrete kind with ordinal -1
 * means that kind's device 0. Returns RK_ENODEV (detail: the CUDA status,
 * or the number of devices of that kind) when no such device exists.
 */
int rk_device_select(const rk_device_list *list, rk_device_kind kind,
    int ordinal, const rk_device_info **out);

/** Cheap process-wide check: loads the driver on first use and returns its
 * status (and detail, a static string) without building a list. */
rk_cuda_status rk_cuda_probe(const char **detail);

/* ------------------------------------------------------------ monitor */

/** Whether the GPU monitor (NVML) works here. */
typedef enum rk_monitor_status {
    RK_MONITOR_AVAILABLE = 0,  /**< NVML loaded and initialised */
    RK_MONITOR_UNAVAILABLE = 1 /**< no NVML library, or nvmlInit failed */
} rk_monitor_status;

/** Which fields of an rk_gpu_reading hold a value: NVML reports "not
 * supported" for some metrics on some boards, and those stay unset. */
enum {
    RK_READING_UTILIZATION = 1u << 0, /**< util_gpu_pct and util_mem_pct */
    RK_READING_MEMORY = 1u << 1,      /**< mem_total, mem_free and mem_used */
    RK_READING_TEMPERATURE = 1u << 2, /**< temperature_c */
    RK_READING_POWER = 1u << 3,       /**< power_mw */
    RK_READING_POWER_LIMIT = 1u << 4, /**< power_limit_mw */
    RK_READING_CLOCKS = 1u << 5       /**< the three clock fields */
};

/** One GPU's readings at one moment; a caller-owned value. Only the fields
 * named by valid hold a value. */
typedef struct rk_gpu_reading {
    unsigned index;          /**< NVML device index */
    char name[96];           /**< board name from NVML */
    unsigned valid;          /**< RK_READING_* bits */
    unsigned util_gpu_pct;   /**< % of time a kernel ran, last sample period */
    unsigned util_mem_pct;   /**< % of time memory was read or written */
    uint64_t mem_total;      /**< bytes */
    uint64_t mem_free;       /**< bytes */
    uint64_t mem_used;       /**< bytes */
    unsigned temperature_c;  /**< GPU core, degrees Celsius */
    unsigned power_mw;       /**< current draw, milliwatts */
    unsigned power_limit_mw; /**< enforced limit, milliwatts */
    unsigned clock_graphics_mhz; /**< graphics clock, MHz */
    unsigned clock_sm_mhz;       /**< SM clock, MHz */
    unsigned clock_mem_mhz;      /**< memory clock, MHz */
} rk_gpu_reading;

/** An opaque GPU monitor (NVML through dlopen); the caller owns it. */
typedef struct rk_gpu_monitor rk_gpu_monitor;

/** Opens a monitor. Fails only with RK_ENOMEM; without NVML the monitor is
 * still returned and reports RK_MONITOR_UNAVAILABLE. Caller owns *out. */
int rk_gpu_monitor_open(rk_gpu_monitor **out);

/** Closes a monitor (and releases NVML when it is the last). NULL is ignored.
 */
void rk_gpu_monitor_close(rk_gpu_monitor *mon);

/** Status and detail ("libnvidia-ml.so.1: cannot open ...", "" if
 * available); the detail lives as long as the monitor. */
rk_monitor_status rk_gpu_monitor_status(
    const rk_gpu_monitor *mon, const char **detail);

/** Number of GPUs NVML sees (0 when unavailable). */
unsigned rk_gpu_monitor_count(const rk_gpu_monitor *mon);

/** Reads device index now. RK_ENODEV when the monitor is unavailable or
 * index is out of range; RK_ENVML when NVML fails for the device as a
 * whole. Metrics NVML does not support are left out of out->valid. */
int rk_gpu_monitor_read(
    rk_gpu_monitor *mon, unsigned index, rk_gpu_reading *out);

#ifdef __cplusplus
}
#endif

#endif /* RINGKERNEL_DEVICE_H */
