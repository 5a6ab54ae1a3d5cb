/*
 * src/backend/cpu/cpu.c - the CPU backend's table: one thread per kernel
 * instance (cpu.h), memory from the heap, waits on eventcounts.
 */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "common/common.h"

static int
cpu_probe(void)
{
    return RK_OK; /* a CPU is always there */
}

static int
cpu_check(const rk__backend_launch *spec)
{
    if (spec->grid_size > 1 || spec->block_size > 1)
        return rk__fail(RK_ENOTSUP,
            "kernel '%s': the cpu backend runs one thread per kernel; "
            "grid_size %u and block_size %u must be 0 or 1 "
            "(use the cuda backend for a grid)",
            spec->kernel_id, spec->grid_size, spec->block_size);
    return RK_OK;
}

static int
cpu_alloc(size_t size, rk__placed *out)
{
    size_t n = (size + 63) & ~(size_t)63;
    void *p = n != 0 ? aligned_alloc(64, n) : NULL;

    if (p == NULL)
        return rk__fail(RK_ENOMEM, "cpu backend: no memory for %zu bytes",
            size);
    memset(p, 0, n);
    *out = (rk__placed) { .host = p, .dev = 0, .size = size };
    return RK_OK;
}

static void
cpu_release(rk__placed *p)
{
    free(p->host);
    p->host = NULL;
}

static int
cpu_launch(rk__backend_inst *bi, const rk__backend_launch *spec)
{
    int rc;

    bi->ctl = spec->ctl.host;
    bi->wake = spec->wake;
    bi->events = spec->events;
    bi->ack = spec->ack;
    bi->io = spec->io;
    if ((rc = rk__cpu_ctx_init(bi, spec)) != RK_OK)
        return rk__fail(rc, "kernel '%s': no memory for its context",
            spec->kernel_id);
    rc = pthread_create(&bi->thread, NULL, rk__cpu_body, bi);
    if (rc != 0) {
        rk__cpu_ctx_fini(bi);
        return rk__fail(RK_ENOMEM, "kernel '%s': pthread_create failed (%d)",
            spec->kernel_id, rc);
    }
    bi->have_cpu_clock
        = pthread_getcpuclockid(bi->thread, &bi->cpu_clock) == 0;
    return RK_OK;
}

static uint64_t
cpu_time(rk__backend_inst *bi)
{
    struct timespec ts;

    /* After EXITED the thread may be joined: its clock is gone. */
    if (rk_ctl_ack_get(bi->ctl) == RK_CTL_ACK_EXITED || !bi->have_cpu_clock
        || clock_gettime(bi->cpu_clock, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
cpu_destroy(rk__backend_inst *bi, int detach)
{
    if (detach) {
        (void)pthread_detach(bi->thread);
        return; /* the thread keeps using its context */
    }
    (void)pthread_join(bi->thread, NULL);
    rk__cpu_ctx_fini(bi);
}

const rk__backend rk__backend_cpu = {
    .abi_version = RK__BACKEND_ABI,
    .name = "cpu",
    .inst_size = sizeof(rk__backend_inst),
    .code = RK__CODE_HOST,
    .event_poll_ns = 0,
    .probe = cpu_probe,
    .check = cpu_check,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .launch = cpu_launch,
    .cpu_time = cpu_time,
    .destroy = cpu_destroy,
    .call = rk__cpu_call,
    .exec = rk__cpu_exec,
};
