/** @file
 * ringkernel/oneshot.h - one-shot kernels: CUDA C compiled once (NVRTC,
 * through the kernel cache), launched over a grid with arguments and
 * rk_buffers, run to completion.
 *
 * A definition names the kernel, its CUDA C source and entry (written with
 * RK_DEV_ONESHOT, ringkernel/dev_oneshot.h), and optionally a host
 * fallback. rk_oneshot_create decides which backend runs it (the runtime
 * decides, a backend executes): "auto" takes cuda where a GPU, its driver
 * and NVRTC are usable, the cpu backend (the host fallback) elsewhere.
 * The cuda backend compiles and loads the code at creation, because CUDA
 * cannot load a module while a persistent ring kernel is resident
 * (docs/cuda-programming.md): create one-shot kernels before launching ring kernels,
 * or creation is refused with RK_EBUSY rather than hanging.
 *
 * A launch runs synchronously (rk_oneshot_run), or in the background with
 * a completion to wait on (rk_oneshot_start, rk_oneshot_wait). An actor
 * runs one from its handler with rk_ctx_execute_kernel.
 *
 * Errors, each with a detail naming the kernel (rk_errdetail()):
 *   - RK_EINVAL: bad definition or launch (no name, grid or block 0 or
 *     over the limits, too many buffers, arguments over
 *     RK_ONESHOT_ARG_MAX); rk_dev_sync_grid called in a kernel not
 *     defined cooperative (reported when the launch completes: the
 *     barrier does not wait there, so nothing hangs);
 *   - RK_ENOTSUP: a cooperative grid larger than can be resident at once
 *     (the detail gives the limit), refused before it starts; on the cpu
 *     backend, a kernel without a host fallback;
 *   - RK_EBUSY: creation while persistent kernels are resident and the
 *     code is not loaded yet;
 *   - RK_ENODEV: rk_oneshot_def.device names a device the driver does
 *     not have (the detail gives the ordinal and the device count);
 *   - RK_EINVAL at a launch: an rk_buffer on another CUDA device than the
 *     kernel's (the detail names both devices);
 *   - RK_ECOMPILE: the source does not compile (file:line in the detail);
 *   - the host fallback's own return code.
 *
 * Threads: a created kernel may be launched from any number of threads at
 * once. Ownership: the caller owns the buffers, which must outlive the
 * launch (a started launch: until rk_oneshot_wait returned its result).
 */
#ifndef RINGKERNEL_ONESHOT_H
#define RINGKERNEL_ONESHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringkernel/buffer.h"
#include "ringkernel/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RK_ONESHOT_MAX_BUFS 8   /**< rk_buffers one launch passes */
#define RK_ONESHOT_ARG_MAX  256 /**< bytes of by-value arguments */

/** What a host fallback is given: the same as every block of the device
 * kernel (buffers as host pointers, made current on the host first and
 * marked host-dirty after). */
typedef struct rk_oneshot_host_args {
    const char *name;  /**< the kernel's name */
    uint32_t grid;     /**< the launch's blocks */
    uint32_t block;    /**< the launch's threads per block */
    void *const *bufs; /**< host addresses, in the launch's order */
    size_t nbuf;       /**< how many bufs */
    const void *args;  /**< the by-value arguments */
    size_t args_len;   /**< bytes of args */
    void *user;        /**< rk_oneshot_def.user */
} rk_oneshot_host_args;

/** A host fallback: runs the whole launch on the calling thread; RK_OK or
 * an RK_E* code (returned by the launch). */
typedef int (*rk_oneshot_host_fn)(const rk_oneshot_host_args *a);

/** A one-shot kernel's definition (copied by rk_oneshot_create). */
typedef struct rk_oneshot_def {
    const char *name;   /**< required; names the kernel in every error */
    const char *source; /**< CUDA C (the device headers are included
                             first), or NULL: host fallback only */
    const char *entry;  /**< the RK_DEV_ONESHOT entry; NULL: name */
    const char *source_name; /**< file name in compile errors; NULL:
                                  "<name>.cu" */
    /** launched with cuLaunchCooperativeKernel: the grid is co-resident
     * and may call rk_dev_sync_grid; a grid that cannot be is refused */
    bool cooperative;
    rk_oneshot_host_fn host; /**< host fallback, or NULL */
    void *user;              /**< handed to host */
    const char *backend;     /**< "cpu", "cuda", "auto" or NULL */
    /** cuda backend: the CUDA device ordinal that runs the kernel, as
     * rk_kernel_config.device: 0 is the default, RK_CUDA_DEVICE's ordinal
     * where it is set, else device 0. The code is compiled and loaded in
     * that device's context at creation; a device the driver does not
     * have is RK_ENODEV naming the ordinal and the device count (a
     * negative one RK_EINVAL). The cpu backend ignores it. */
    int device;
} rk_oneshot_def;

/** One launch. */
typedef struct rk_oneshot_launch {
    uint32_t grid;  /**< blocks (1 .. 65535) */
    uint32_t block; /**< threads per block (1 .. 1024) */
    const void *args; /**< by-value arguments (copied at the launch) */
    size_t args_len;  /**< at most RK_ONESHOT_ARG_MAX */
    /** buffers made current where the kernel runs before it starts and
     * marked modified there after it (at most RK_ONESHOT_MAX_BUFS); on
     * cuda each must be on the kernel's device (rk_oneshot_def.device);
     * device memory another library allocated (CuPy, PyTorch, Numba)
     * is passed as an rk_buffer_wrap_device() buffer */
    rk_buffer *const *bufs;
    size_t nbuf; /**< how many bufs */
} rk_oneshot_launch;

typedef struct rk_oneshot rk_oneshot;           /**< a created kernel */
typedef struct rk_oneshot_done rk_oneshot_done; /**< a started launch */

/** Checks def, picks the backend and (cuda) compiles and loads the code. */
int rk_oneshot_create(const rk_oneshot_def *def, rk_oneshot **out);

/** Frees k. Every launch of it must have completed. NULL is ignored. */
void rk_oneshot_destroy(rk_oneshot *k);

/** The name of the backend that runs k ("cpu", "cuda"). */
const char *rk_oneshot_backend(const rk_oneshot *k);

/** The CUDA device ordinal that runs k (rk_oneshot_def.device resolved:
 * RK_CUDA_DEVICE's device for 0), or -1 when its backend uses no CUDA
 * device (cpu) or k is NULL. Its buffers belong on that device. */
int rk_oneshot_device(const rk_oneshot *k);

/** Runs one launch to completion on the calling thread's behalf. */
int rk_oneshot_run(rk_oneshot *k, const rk_oneshot_launch *l);

/** Starts one launch in the background: RK_OK and *out, whose result
 * rk_oneshot_wait returns; or an error with nothing started. */
int rk_oneshot_start(
    rk_oneshot *k, const rk_oneshot_launch *l, rk_oneshot_done **out);

/** Waits at most timeout_ns (RK_WAIT_FOREVER, RK_NO_WAIT) for the launch:
 * its result, or RK_ETIMEDOUT while it still runs. */
int rk_oneshot_wait(rk_oneshot_done *d, int64_t timeout_ns);

/** Waits for the launch to complete, then frees d. NULL is ignored. */
void rk_oneshot_done_free(rk_oneshot_done *d);

/** From an actor's handler or loop: runs one launch of k. done NULL:
 * synchronously (the launch's result); otherwise started, *done to wait
 * on. RK_EINVAL for a NULL ctx, k or l. */
int rk_ctx_execute_kernel(rk_ctx *ctx, rk_oneshot *k,
    const rk_oneshot_launch *l, rk_oneshot_done **done);

#ifdef __cplusplus
}
#endif

#endif /* RINGKERNEL_ONESHOT_H */
