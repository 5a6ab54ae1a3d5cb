/*
 * src/backend/cuda/exec.c - one-shot kernels on the cuda backend
 * (ringkernel/oneshot.h, the table's exec entries).
 *
 * exec_load (at rk_oneshot_create) compiles the source through the NVRTC
 * path and the kernel cache and loads the module in the context of the
 * definition's device (rk_oneshot_def.device; devwide.c's table, one
 * module per distinct source, architecture and device), and finds the
 * entry: CUDA cannot load code while a persistent kernel is resident, so
 * a creation that would have to is refused with RK_EBUSY (devwide.c)
 * instead of hanging. exec runs one launch on a stream of its own:
 *   - the grid is checked against what can be resident (occupancy x SMs):
 *     a cooperative grid larger than that is refused with RK_ENOTSUP
 *     naming the kernel and the limit (cuLaunchCooperativeKernel would
 *     refuse it too: its error gets the same detail);
 *   - the launch is counted resident (devwide.c's rk__cu_res_launch), so
 *     it is refused beside persistent kernels that leave it no room, and
 *     code loads and frees wait for it as for them;
 *   - buffers are made current on the device on the stream, the grid
 *     barrier (rk_dev_barrier, device memory) zeroed on the stream, the
 *     kernel launched (cooperatively when the definition says so), the
 *     stream synchronised, and the barrier's misuse word read back: a
 *     non-cooperative kernel that called rk_dev_sync_grid is RK_EINVAL.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/devwide.h"
#include "backend/cuda/exec.h"
#include "backend/cuda/nvrtc.h"
#include "common/common.h"
#include "device/cuda_driver.h"
#include "memory/mem.h"
#include "ringkernel/dev_oneshot.h"
#include "ringkernel/oneshot.h"

#define CU_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE 720

typedef rk__cu_result (*coop_fn)(rk__cu_function, unsigned, unsigned,
    unsigned, unsigned, unsigned, unsigned, unsigned, rk__cu_stream, void **);

typedef struct exec_be {
    rk__cu_function fn;
    int ordinal;
} exec_be;

static pthread_once_t coop_once = PTHREAD_ONCE_INIT;
static coop_fn coop_launch;

static void
coop_load(void)
{
    const struct rk__cuda_driver *d;
    if (rk__cuda_driver(&d) == RK_OK)
        *(void **)&coop_launch = dlsym(d->lib, "cuLaunchCooperativeKernel");
}

static int
attr(const struct rk__cuda_driver *d, int ord, int which)
{
    rk__cu_device dev;
    int v = 0;
    if (d->cuDeviceGet(&dev, ord) != RK__CUDA_SUCCESS)
        return 0;
    d->cuDeviceGetAttribute(&v, which, dev);
    return v;
}

int
rk__cuda_exec_load(rk__exec_kernel *k)
{
    const rk_oneshot_def *def = k->def;
    const struct rk__cuda_driver *d;
    rk_kernel_config cfg;
    rk__cu_module mod;
    exec_be *be;
    int rc, ord, cc;

    if (def->source == NULL)
        return rk__fail(RK_ENOTSUP,
            "one-shot kernel '%s': no CUDA C source to run on cuda",
            def->name);
    memset(&cfg, 0, sizeof(cfg));
    cfg.device = def->device;
    /* The definition's device (0: RK_CUDA_DEVICE's, else 0), checked:
     * RK_ENODEV naming the ordinal and the device count. */
    if ((rc = rk__cu_device_of(def->name, &cfg, &ord)) != RK_OK
        || (rc = rk__cuda_enter(ord, &d)) != RK_OK)
        return rc;
    if (rk__cuda_ext() == NULL)
        return rk__fail(RK_ENODEV,
            "one-shot kernel '%s': the CUDA driver lacks cuModuleLoadDataEx "
            "or the occupancy API", def->name);
    cc = attr(d, ord, RK__CU_ATTR_COMPUTE_CAPABILITY_MAJOR) * 10
        + attr(d, ord, RK__CU_ATTR_COMPUTE_CAPABILITY_MINOR);
    if (cc < RK__NVRTC_MIN_CC)
        return rk__fail(RK_ENOTSUP,
            "one-shot kernel '%s': device %d has compute capability %d.%d; "
            "ringkernel device code needs 7.0 or newer", def->name, ord,
            cc / 10, cc % 10);
    cfg.device_source = def->source;
    cfg.device_source_name = def->source_name;
    cfg.device_entry = def->entry;
    /* Compiled (through the cache) and loaded now, or RK_EBUSY while
     * persistent kernels are resident; the detail names the kernel. */
    if ((rc = rk__cu_module_get(d, def->name, &cfg, cc, ord, &mod)) != RK_OK)
        return rc;
    if ((be = calloc(1, sizeof(*be))) == NULL)
        return rk__fail(RK_ENOMEM, "one-shot kernel '%s': no memory",
            def->name);
    if (d->cuModuleGetFunction(&be->fn, mod, def->entry) != RK__CUDA_SUCCESS) {
        free(be);
        return rk__fail(RK_EINVAL,
            "one-shot kernel '%s': its source defines no entry '%s' "
            "(RK_DEV_ONESHOT(%s, ...))", def->name, def->entry, def->entry);
    }
    be->ordinal = ord;
    k->be = be;
    k->ordinal = ord;
    return RK_OK;
}

void
rk__cuda_exec_unload(rk__exec_kernel *k)
{
    free(k->be); /* the module stays loaded (devwide.c) */
    k->be = NULL;
}

typedef struct launch_arg {
    const struct rk__cuda_driver *d;
    const rk_oneshot_def *def;
    exec_be *be;
    const rk_oneshot_launch *l;
    rk__cu_stream stream;
    rk_dev_oneshot_args *args;
    uint32_t cap, per_sm;
    int sms;
} launch_arg;

static int
too_large(const launch_arg *la)
{
    return rk__fail(RK_ENOTSUP,
        "one-shot kernel '%s': a cooperative grid of %u blocks cannot be "
        "resident at once: at most %u (%u blocks of %u threads per SM x %d "
        "SMs); rk_dev_sync_grid needs every block resident",
        la->def->name, la->l->grid, la->cap, la->per_sm, la->l->block,
        la->sms);
}

/* Under devwide's device lock (rk__cu_res_launch). */
static int
launch_now(void *arg)
{
    launch_arg *la = arg;
    void *params[1] = { la->args };
    rk__cu_result r;

    if (la->def->cooperative)
        r = coop_launch(la->be->fn, la->l->grid, 1, 1, la->l->block, 1, 1, 0,
            la->stream, params);
    else
        r = la->d->cuLaunchKernel(la->be->fn, la->l->grid, 1, 1, la->l->block,
            1, 1, 0, la->stream, params, NULL);
    if (r == CU_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE)
        return too_large(la);
    return rk__cuda_check(r, la->def->cooperative
            ? "cuLaunchCooperativeKernel"
            : "cuLaunchKernel");
}

/* Buffers made current on the device (copies queued on the stream) and
 * their device addresses; each is the device's copy from now on. */
static int
bind_buffers(launch_arg *la)
{
    for (size_t i = 0; i < la->l->nbuf; i++) {
        void *p = NULL;
        int rc;
        /* Another GPU's memory is not this kernel's to address. */
        if (rk_buffer_device_kind(la->l->bufs[i]) == RK_DEVICE_CUDA
            && rk_buffer_ordinal(la->l->bufs[i]) != la->be->ordinal)
            return rk__fail(RK_EINVAL,
                "one-shot kernel '%s': buffer %zu is on CUDA device %d, "
                "the kernel runs on device %d",
                la->def->name, i, rk_buffer_ordinal(la->l->bufs[i]),
                la->be->ordinal);
        rc = rk_buffer_ensure_device(la->l->bufs[i], la->stream);
        if (rc == RK_OK)
            rc = rk_buffer_device(la->l->bufs[i], RK_ACCESS_WRITE, &p);
        if (rc != RK_OK) {
            char why[300];
            snprintf(why, sizeof(why), "%s", rk_errdetail());
            return rk__fail(rc, "one-shot kernel '%s': buffer %zu: %s",
                la->def->name, i, why);
        }
        la->args->buf[i] = (rk_dev_u64)(uintptr_t)p;
    }
    la->args->nbuf = (rk_dev_u32)la->l->nbuf;
    return RK_OK;
}

int
rk__cuda_exec(rk__exec_kernel *k, const rk_oneshot_launch *l)
{
    const rk_oneshot_def *def = k->def;
    exec_be *be = k->be;
    const struct rk__cuda_driver *d;
    const struct rk__cuda_ext *ext = rk__cuda_ext();
    rk_dev_oneshot_args args;
    rk_dev_barrier bar;
    launch_arg la;
    rk__cu_res *res = NULL;
    void *dbar = NULL;
    int per_sm = 0, rc, rc2;

    if ((rc = rk__cuda_enter(be->ordinal, &d)) != RK_OK)
        return rc;
    memset(&la, 0, sizeof(la));
    la = (launch_arg) { .d = d, .def = def, .be = be, .l = l, .args = &args };
    if (def->cooperative) {
        pthread_once(&coop_once, coop_load);
        if (coop_launch == NULL)
            return rk__fail(RK_ENOTSUP,
                "one-shot kernel '%s': the CUDA driver has no "
                "cuLaunchCooperativeKernel", def->name);
    }
    if ((rc = rk__cuda_check(ext->occupancy(&per_sm, be->fn, (int)l->block, 0),
             "cuOccupancyMaxActiveBlocksPerMultiprocessor"))
        != RK_OK)
        return rc;
    la.sms = attr(d, be->ordinal, RK__CU_ATTR_MULTIPROCESSOR_COUNT);
    la.per_sm = (uint32_t)per_sm;
    la.cap = (uint32_t)per_sm * (uint32_t)la.sms;
    if (la.cap == 0)
        return rk__fail(RK_EINVAL,
            "one-shot kernel '%s': blocks of %u threads cannot run on "
            "device %d (occupancy 0)", def->name, l->block, be->ordinal);
    if (def->cooperative && l->grid > la.cap)
        return too_large(&la);

    memset(&args, 0, sizeof(args));
    memset(&bar, 0, sizeof(bar));
    args.coop = def->cooperative ? 1u : 0u;
    args.arg_len = (rk_dev_u32)l->args_len;
    if (l->args_len > 0)
        memcpy(args.arg, l->args, l->args_len);
    rc = rk__cuda_check(
        d->cuStreamCreate(&la.stream, RK__CU_STREAM_NON_BLOCKING),
        "cuStreamCreate");
    if (rc != RK_OK)
        return rc;
    rc = rk__mem_alloc(RK__MEM_DEVICE, be->ordinal, NULL, sizeof(bar), 64,
        &dbar);
    if (rc == RK_OK) {
        args.grid_bar = (rk_dev_u64)(uintptr_t)dbar;
        rc = rk__cuda_check(d->cuMemcpyHtoDAsync((rk__cu_dptr)(uintptr_t)dbar,
                                &bar, sizeof(bar), la.stream),
            "cuMemcpyHtoDAsync");
    }
    if (rc == RK_OK)
        rc = bind_buffers(&la);
    /* Counted resident while it runs: refused when persistent kernels
     * leave it no room (a non-cooperative grid needs at most the whole
     * device), and loads and frees wait for it as for them. */
    if (rc == RK_OK)
        rc = rk__cu_res_launch(d, def->name, be->ordinal,
            l->grid < la.cap ? l->grid : la.cap, la.per_sm, (uint32_t)la.sms,
            NULL, la.stream, launch_now, &la, &res);
    rc2 = rk__cuda_check(d->cuStreamSynchronize(la.stream),
        "cuStreamSynchronize");
    if (res != NULL) {
        rk__cu_res_returned(res);
        if (rc == RK_OK && rc2 != RK_OK) {
            char why[300];
            snprintf(why, sizeof(why), "%s", rk_errdetail());
            rc = rk__fail(rc2, "one-shot kernel '%s': %s", def->name, why);
        }
        if (rc == RK_OK)
            rc = rk__cuda_check(
                d->cuMemcpyDtoHAsync(&bar, (rk__cu_dptr)(uintptr_t)dbar,
                    sizeof(bar), la.stream),
                "cuMemcpyDtoHAsync");
        if (rc == RK_OK)
            rc = rk__cuda_check(d->cuStreamSynchronize(la.stream),
                "cuStreamSynchronize");
        /* bar is this thread's copy, complete once the stream is. */
        if (rc == RK_OK && rk_atomic_load_relaxed_u32(&bar.misuse) != 0)
            rc = rk__fail(RK_EINVAL,
                "one-shot kernel '%s' calls rk_dev_sync_grid but was not "
                "launched cooperatively (set rk_oneshot_def.cooperative): "
                "its blocks may not be resident together, so the barrier "
                "did not wait and the results are not valid",
                def->name);
    }
    if (dbar != NULL)
        rk__mem_release(RK__MEM_DEVICE, be->ordinal, NULL, dbar, sizeof(bar));
    (void)d->cuStreamDestroy(la.stream);
    return rc;
}
