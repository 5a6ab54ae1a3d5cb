/*
 * src/backend/cpu.c - the CPU backend: one thread per kernel instance.
 *
 * The thread runs the runtime's body from launch to exit. Every wait is a
 * futex on a control-block word, so a parked kernel costs no CPU: the body
 * parks on wake_seq, a host waiting for an acknowledgement parks on
 * ack_seq.
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "backend/backend.h"
#include "common/barrier.h"
#include "common/common.h"
#include "common/futex.h"

struct rk__backend_inst {
    pthread_t thread;
    rk__control *c;
    void (*body)(rk__backend_inst *bi, void *arg);
    void *arg;
    clockid_t cpu_clock;
    int have_cpu_clock;
};

static void *
cpu_main(void *arg)
{
    rk__backend_inst *bi = arg;

    bi->body(bi, bi->arg);
    return NULL;
}

static int
cpu_launch(const rk__backend_launch *spec, rk__backend_inst **out)
{
    rk__backend_inst *bi = calloc(1, sizeof(*bi));
    int rc;

    if (bi == NULL)
        return rk__fail(RK_ENOMEM, "kernel '%s': no memory for its thread",
            spec->kernel_id);
    bi->c = spec->control;
    bi->body = spec->body;
    bi->arg = spec->arg;
    rc = pthread_create(&bi->thread, NULL, cpu_main, bi);
    if (rc != 0) {
        free(bi);
        return rk__fail(RK_ENOMEM, "kernel '%s': pthread_create failed (%d)",
            spec->kernel_id, rc);
    }
    bi->have_cpu_clock
        = pthread_getcpuclockid(bi->thread, &bi->cpu_clock) == 0;
    *out = bi;
    return RK_OK;
}

/* Posts a command. The release store pairs with the body's acquire load of
 * cmd; the wake_seq bump (release) pairs with the acquire load the body
 * makes before parking, so a body about to park either sees the new cmd or
 * is woken. */
static void
cpu_command(rk__backend_inst *bi, uint32_t cmd)
{
    atomic_store_explicit(&bi->c->cmd, cmd, memory_order_release);
    rk__ec_notify_all(&bi->c->wake);
}

static int
cpu_wait_ack(rk__backend_inst *bi, uint32_t want, uint64_t deadline)
{
    for (;;) {
        /* Acquire pairs with the release in cpu_report. */
        uint32_t seq
            = atomic_load_explicit(&bi->c->ack_seq, memory_order_acquire);
        uint32_t ack = atomic_load_explicit(&bi->c->ack, memory_order_acquire);

        if (ack == want || ack == RK__ACK_EXITED)
            return RK_OK;
        if (rk__futex_wait(&bi->c->ack_seq, seq, deadline) == RK_ETIMEDOUT) {
            ack = atomic_load_explicit(&bi->c->ack, memory_order_acquire);
            return ack == want || ack == RK__ACK_EXITED ? RK_OK : RK_ETIMEDOUT;
        }
    }
}

static void
cpu_activate(rk__backend_inst *bi)
{
    /* Release pairs with the body's acquire load when STOP overtook RUN. */
    atomic_store_explicit(&bi->c->activated, 1, memory_order_release);
    cpu_command(bi, RK__CMD_RUN);
}

static int
cpu_deactivate(rk__backend_inst *bi, uint64_t deadline)
{
    cpu_command(bi, RK__CMD_PAUSE);
    return cpu_wait_ack(bi, RK__ACK_PAUSED, deadline);
}

static int
cpu_terminate(rk__backend_inst *bi, uint64_t deadline)
{
    cpu_command(bi, RK__CMD_STOP);
    return cpu_wait_ack(bi, RK__ACK_EXITED, deadline);
}

static int
cpu_wait_exit(rk__backend_inst *bi, uint64_t deadline)
{
    return cpu_wait_ack(bi, RK__ACK_EXITED, deadline);
}

/* The producer half of the parking handshake (see rk__control): the
 * seq_cst fence orders the caller's enqueue before the load of parked, and
 * pairs with the fence the body issues after publishing parked = 1. */
static void
cpu_wake(rk__backend_inst *bi)
{
    rk__ec_notify(&bi->c->wake);
}

static void
cpu_park(rk__backend_inst *bi, uint32_t seq, uint64_t deadline)
{
    (void)rk__ec_wait(&bi->c->wake, seq, deadline);
}

static void
cpu_report(rk__backend_inst *bi, uint32_t ack)
{
    /* Release pairs with the acquire loads in cpu_wait_ack. */
    atomic_store_explicit(&bi->c->ack, ack, memory_order_release);
    atomic_fetch_add_explicit(&bi->c->ack_seq, 1, memory_order_release);
    rk__futex_wake(&bi->c->ack_seq, INT32_MAX);
}

static void
cpu_query(rk__backend_inst *bi, rk__backend_status *out)
{
    struct timespec ts;

    out->ack = atomic_load_explicit(&bi->c->ack, memory_order_acquire);
    out->exit_code
        = atomic_load_explicit(&bi->c->exit_code, memory_order_relaxed);
    out->cpu_time_ns = 0;
    if (out->ack != RK__ACK_EXITED && bi->have_cpu_clock
        && clock_gettime(bi->cpu_clock, &ts) == 0)
        out->cpu_time_ns
            = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
cpu_destroy(rk__backend_inst *bi)
{
    (void)pthread_join(bi->thread, NULL);
    free(bi);
}

const rk__backend rk__backend_cpu = {
    .abi_version = RK__BACKEND_ABI,
    .name = "cpu",
    .launch = cpu_launch,
    .activate = cpu_activate,
    .deactivate = cpu_deactivate,
    .terminate = cpu_terminate,
    .wait_exit = cpu_wait_exit,
    .wake = cpu_wake,
    .park = cpu_park,
    .report = cpu_report,
    .query = cpu_query,
    .destroy = cpu_destroy,
};
