/*
 * src/backend/cuda/devwide.h - what the cuda backend keeps per device and
 * process rather than per instance: the driver's extra entry points, the
 * loaded modules, and the persistent kernels resident on the device.
 *
 * Why (seen on an H200, driver 580): CUDA loads a module only while no
 * kernel runs on the device (the load waits for the running ones, with
 * eager and lazy loading alike), frees wait the same way, and a
 * persistent kernel never ends by itself. So, per process:
 *   - modules are loaded when their kernel is registered (prepare), or at
 *     launch if no persistent kernel is resident then; a launch that
 *     would have to load one while others run is refused (RK_EBUSY)
 *     instead of hanging. Loaded modules stay loaded (one per distinct
 *     source and architecture) until the process ends;
 *   - every resident kernel is counted here and in the memory layer
 *     (rk__mem_resident), which defers pinned and device frees while any
 *     is;
 *   - co-residency is device-wide: a kernel's blocks must fit beside
 *     those of every resident kernel on the same device (each device
 *     has its own primary context, modules and block budget);
 *   - named barriers (rk_kernel_config.device_barrier) live in one
 *     device's memory, placed while nothing runs, for the life of the
 *     process; the kernels at one are counted against its parties;
 *   - a kernel the watchdog reported, or whose instance was destroyed
 *     while it still ran (a zombie), stays counted until its stream says
 *     it returned; launch and registration reap those;
 *   - a lost context (a block trapped: __trap, an illegal address, a
 *     device assert; every stream of the context then reports the
 *     driver's error) ends every kernel on it: each relay sees the error
 *     on its own stream (rk__cu_res_check) and counts its kernel out,
 *     and every later launch or load is refused (RK_ECUDA, "context
 *     lost"). The context is not reset (cuDevicePrimaryCtxReset): that
 *     would destroy every allocation and module of the process on the
 *     device, the user's buffers and pools and other libraries' memory
 *     included, and CUDA's documentation asks for a process restart
 *     after such errors.
 * Everything is under one device lock; a launch happens under it.
 */
#ifndef RK_SRC_BACKEND_CUDA_DEVWIDE_H
#define RK_SRC_BACKEND_CUDA_DEVWIDE_H

#include <stdint.h>

#include "backend/backend.h"
#include "backend/cuda/jitlink.h"
#include "device/cuda_driver.h"

/* Driver entry points beyond the shared loader's table, resolved from the
 * same library handle. */
typedef int rk__cu_jit_option;
struct rk__cuda_ext {
    rk__cu_result (*module_load_ex)(
        rk__cu_module *, const void *, unsigned, rk__cu_jit_option *, void **);
    rk__cu_result (*occupancy)(int *, rk__cu_function, int, size_t);
    rk__cu_result (*func_load)(rk__cu_function); /* 12.4+, or NULL */
    rk__cu_result (*func_set_attr)(rk__cu_function, int, int); /* or NULL */
    rk__jitlink_drv link; /* the driver's linker, or all NULL */
};

/* The entry points, or NULL when the driver lacks cuModuleLoadDataEx or
 * the occupancy API (or cannot be loaded). */
const struct rk__cuda_ext *rk__cuda_ext(void);

/* The CUDA device a kernel runs on: c->device when set (c may be NULL),
 * else RK_CUDA_DEVICE, else 0. Unchecked. */
int rk__cu_ordinal(const rk_kernel_config *c);

/* rk__cu_ordinal(c), checked: RK_EINVAL for a negative ordinal, RK_ENODEV
 * for one the driver does not have, the detail naming kernel id and the
 * device count. */
int rk__cu_device_of(const char *id, const rk_kernel_config *c, int *ordinal);

/* The loaded module of a kernel's device source for compute capability
 * cc on device ordinal (whose context is current): from the table, or
 * compiled (through the kernel cache) and loaded now if no persistent
 * kernel is resident on any device, with the kernel's entry loaded too;
 * else RK_EBUSY. RK_ECOMPILE, RK_ECUDA (also: the device's context is
 * lost), RK_ENOMEM. */
int rk__cu_module_get(const struct rk__cuda_driver *d, const char *id,
    const rk_kernel_config *c, int cc, int ordinal, rk__cu_module *out);

/* A named barrier in device memory (rk_kernel_config.device_barrier). */
typedef struct rk__cu_bar rk__cu_bar;

/* The barrier kernel id names in c (NULL *out when it names none), on
 * device ordinal (whose context is current): found, or placed now
 * (zeroed device memory) if nothing is resident. *dev is its device
 * address. RK_EINVAL (no parties, parties other than the barrier's, a
 * barrier on another device), RK_EBUSY (not placed and kernels resident:
 * register first), RK_ENOMEM, RK_ECUDA; the detail names the kernel and
 * the barrier. */
int rk__cu_bar_get(const char *id, const rk_kernel_config *c, int ordinal,
    rk__cu_bar **out, uint64_t *dev);

/* A resident persistent kernel. */
typedef struct rk__cu_res rk__cu_res;

/* Launches a persistent kernel of `grid` blocks (per_sm blocks of its
 * shape per SM, sms SMs) on device ordinal under the device lock: reaps,
 * refuses (RK_ECUDA) any on a lost context, (RK_ENOTSUP, naming the
 * resident kernels) a grid that does not fit beside those on its device,
 * and, at barrier bar (NULL: none), a barrier whose parties cannot all be
 * resident on the device (RK_ENOTSUP) or that the kernels already at it
 * leave no room for this grid (RK_EINVAL); counts it resident, calls
 * launch(arg) and, when that returns RK_OK, keeps it as *out; otherwise
 * counts it out and returns launch's error. */
int rk__cu_res_launch(const struct rk__cuda_driver *d, const char *id,
    int ordinal, uint32_t grid, uint32_t per_sm, uint32_t sms,
    rk__cu_bar *bar, rk__cu_stream stream, int (*launch)(void *arg),
    void *arg, rk__cu_res **out);

/* A kernel joined to the launched one by a device route (k2k.h), with
 * its grid and its shape's blocks per SM. */
typedef struct rk__cu_partner {
    const char *id;
    uint32_t grid, per_sm, sms;
} rk__cu_partner;

/* rk__cu_res_launch, where the partners that are not resident yet must
 * fit as well (their shares are checked, not taken): RK_ENOTSUP naming
 * the kernel and its partners otherwise, nothing launched. */
int rk__cu_res_launch_with(const struct rk__cuda_driver *d, const char *id,
    int ordinal, uint32_t grid, uint32_t per_sm, uint32_t sms,
    rk__cu_bar *bar, rk__cu_stream stream, const rk__cu_partner *partners, uint32_t npartners,
    int (*launch)(void *arg), void *arg, rk__cu_res **out);

/* Whether kernel e's context still works: RK_OK while its stream says
 * the kernel runs (or returned); RK_ECUDA when the stream reports an
 * error (the grid is gone: the caller counts it out with
 * rk__cu_res_returned): the context is recorded as lost, later launches
 * are refused, and the driver's error name and string, with the kernel,
 * go to the detail and to the log (RK_LOG_ERROR). One cuStreamQuery: a
 * host-side call, cheap enough for a relay's idle loop. Any thread. */
int rk__cu_res_check(const struct rk__cuda_driver *d, rk__cu_res *e);

/* rc, the result of a driver call that failed, said again as RK_ECUDA
 * ("context lost; ...": the driver's error and the kernel that first saw
 * it) when a context was lost; rc unchanged otherwise (RK_OK too). */
int rk__cu_lost(int rc);

/* The kernel returned (its stream synchronised): counted out (unless a
 * reap did), e freed. */
void rk__cu_res_returned(rk__cu_res *e);

/* The watchdog reported the kernel: counted out once its stream says it
 * returned (at the next reap); the caller still owns e. */
void rk__cu_res_hung(rk__cu_res *e);

/* The kernel's instance goes away while the kernel may still run: e now
 * owns the stream and region, freed once it returned. Returns 0 (e not
 * taken: the kernel already returned, call rk__cu_res_returned) or 1. */
int rk__cu_res_zombie(rk__cu_res *e, const rk__placed *region);

#endif /* RK_SRC_BACKEND_CUDA_DEVWIDE_H */
