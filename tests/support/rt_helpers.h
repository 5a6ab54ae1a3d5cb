/*
 * tests/support/rt_helpers.h - shared pieces of the runtime tests.
 *
 * Header-only (static inline), so each test program takes what it uses.
 */
#ifndef RK_TEST_RT_HELPERS_H
#define RK_TEST_RT_HELPERS_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "ringkernel/runtime.h"

/* Sanitizer builds run the stress loops shorter. */
#ifdef RK_DEBUG
#define RT_SCALE 1
#else
#define RT_SCALE 4
#endif

#define RT_LONG (30 * INT64_C(1000000000)) /* "forever" with a backstop */

#ifdef assert_int_equal /* cmocka.h was included first */
/* A runtime without the RK_RING_KERNEL kernels of the test binary. */
static inline rk_runtime *
rt_new_runtime(void)
{
    rk_runtime *rt = NULL;
    rk_runtime_config cfg = { .no_static_kernels = true };

    assert_int_equal(rk_runtime_create(&rt, &cfg), RK_OK);
    return rt;
}
#endif

/* A one-shot gate a test opens to release an actor it is holding. */
typedef struct rt_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open;
    int waiting;
} rt_gate;

static inline void
rt_gate_init(rt_gate *g)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->open = false;
    g->waiting = 0;
}

static inline void
rt_gate_fini(rt_gate *g)
{
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
}

static inline void
rt_gate_pass(rt_gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->waiting++;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

/* Blocks until n threads wait at the gate. */
static inline void
rt_gate_wait_for(rt_gate *g, int n)
{
    pthread_mutex_lock(&g->mu);
    while (g->waiting < n)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static inline void
rt_gate_open(rt_gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* A handler that does nothing: the cpu fallback a device kernel's
 * definition needs (it never runs under the "cuda" backend). */
static inline int
rt_ignore_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    (void)ctx;
    (void)m;
    return RK_OK;
}

/* An echo actor: replies to every message with the same type and bytes. */
static inline int
rt_echo_actor(rk_ctx *ctx)
{
    rk_msg_view m;

    while (!rk_should_terminate(ctx)) {
        int rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER);
        if (rc == RK_ECLOSED)
            break;
        if (rc != RK_OK)
            return rc;
        rc = rk_ctx_reply(ctx, &m, m.hdr->type_id, m.data, m.len);
        if (rc != RK_OK)
            return rc;
    }
    return RK_OK;
}

static inline rk_kernel_state
rt_state(rk_runtime *rt, const char *id)
{
    rk_kernel_state s = RK__KERNEL_STATE_COUNT;
    (void)rk_kernel_state_get(rt, id, &s);
    return s;
}

#ifdef assert_int_equal
/* Kernel id's stats, which must be readable. */
static inline rk_kernel_stats
rt_stats(rk_runtime *rt, const char *id)
{
    rk_kernel_stats s;
    assert_int_equal(rk_kernel_stats_get(rt, id, &s), RK_OK);
    return s;
}

/* Waits (bounded by RT_LONG, yielding) until kernel id has processed at
 * least n messages; returns its processed count then. */
static inline uint64_t
rt_wait_processed(rk_runtime *rt, const char *id, uint64_t n)
{
    uint64_t until = rk_now_ns() + (uint64_t)RT_LONG;
    rk_kernel_stats st;

    for (;;) {
        assert_int_equal(rk_kernel_stats_get(rt, id, &st), RK_OK);
        if (st.processed >= n || rk_now_ns() >= until)
            return st.processed;
        sched_yield();
    }
}

/* Takes the next dead letter (within RT_LONG) and checks it: from kernel
 * id, for reason with error, carrying len bytes equal to payload. */
static inline void
rt_expect_dead(rk_runtime *rt, const char *id, rk_dead_reason reason,
    int error, const void *payload, size_t len)
{
    rk_dead_letter dl;
    unsigned char buf[256];

    assert_int_equal(
        rk_dead_letter_recv(rt, &dl, buf, sizeof(buf), RT_LONG), RK_OK);
    assert_string_equal(dl.kernel_id, id);
    assert_int_equal(dl.reason, reason);
    assert_int_equal(dl.error, error);
    assert_int_equal(dl.len, len);
    assert_memory_equal(buf, payload, len);
}
#endif

#endif /* RK_TEST_RT_HELPERS_H */
