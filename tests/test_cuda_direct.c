/*
 * The caller's own path into a cuda kernel (docs/cuda-data-path.md): rk_send,
 * rk_request, rk_kernel_call and rk_send_batch write an idle block's
 * input lane themselves, a call polls the output lanes for its reply
 * itself, and receivers read the output lanes while they wait. Through
 * the public API under the stand-in driver (tests/fake_cuda), or the real
 * one with RK_TEST_CUDA_REAL=1.
 *
 * What is counted: rk_kernel_stats.direct_calls (messages that took the
 * caller's own path) and relay_handoffs (frames the host relay thread
 * moved to or from a lane). A direct round trip after warm-up costs no
 * relay hand-off; with the relay busy (input queued ahead), order holds;
 * a direct call racing a terminate ends with an answer or a clear error,
 * and every message accepted is processed or dead-lettered.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_helpers.h"
#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

#define T_LONG RT_LONG

static char *kernels_src;

/* One request of 4 bytes (tag, i) to the echo kernel, checked. */
static void
request_ok(rk_runtime *rt, rk_kernel k, uint32_t tag, uint32_t i)
{
    uint32_t req[2] = { tag, i }, rep[2] = { 0, 0 };
    rk_msg_header h;
    size_t len = 0;

    assert_int_equal(rk_request(rt, k, 7, req, sizeof(req), &h, rep,
                         sizeof(rep), &len, T_LONG),
        RK_OK);
    assert_int_equal(len, sizeof(req));
    assert_memory_equal(rep, req, sizeof(req));
    assert_int_equal(h.type_id, 7);
}

/* Requests (tag 0: no spin for rk_spin) until one went direct: the relay
 * held nothing of the lanes then, and direct round trips leave it
 * nothing to take, so the next ones go direct too. Returns how many
 * requests it made. */
static uint32_t
warm_up(rk_runtime *rt, rk_kernel k, const char *id)
{
    uint64_t d = rt_stats(rt, id).direct_calls;
    uint32_t n = 0;

    do {
        assert_true(n < 10000);
        request_ok(rt, k, 0, n++);
    } while (rt_stats(rt, id).direct_calls == d);
    return n;
}

/* A new runtime in *rtp with kernel id (entry of test_kernels.cu, one
 * block, lanes of 8, an output queue of out_cap frames, 0: the default)
 * launched and activated, skipping the test without NVRTC; with warm,
 * warmed up (warm_up, *warm requests) and its processed count caught up
 * in the stats (which the relay mirrors). */
static rk_kernel
start_out(rk_runtime **rtp, const char *id, const char *entry,
    uint32_t out_cap, uint32_t *warm)
{
    cuda_kdef kd = { .id = id,
        .src = kernels_src,
        .src_name = "test_kernels.cu",
        .entry = entry,
        .grid = 1,
        .max_payload = 64,
        .output_capacity = out_cap };
    rk_kernel k;

    if (!cuda_have_nvrtc())
        skip();
    *rtp = cuda_test_runtime();
    cuda_register(*rtp, &kd);
    k = cuda_start(*rtp, id);
    if (warm != NULL) {
        *warm = warm_up(*rtp, k, id);
        assert_int_equal(rt_wait_processed(*rtp, id, *warm), *warm);
    }
    return k;
}

static rk_kernel
start(rk_runtime **rtp, const char *id, const char *entry, uint32_t *warm)
{
    return start_out(rtp, id, entry, 0, warm);
}

/* A started, warmed-up kernel and its stats after the warm-up. */
typedef struct warm {
    rk_runtime *rt;
    rk_kernel k;
    uint32_t n;         /* warm-up requests */
    rk_kernel_stats s0; /* the stats after them */
} warm;

static void
start_warm(warm *w, const char *id, const char *entry)
{
    w->k = start(&w->rt, id, entry, &w->n);
    w->s0 = rt_stats(w->rt, id);
}

/* One direct call to the echo kernel, checked: with a reply buffer
 * (rk_kernel_call_reply), or without (rk_kernel_call, whose answer the
 * caller moved to the output queue itself: received without waiting). */
static void
call_ok(rk_runtime *rt, rk_kernel k, uint32_t i, int with_reply)
{
    uint32_t req[2] = { 3, i }, rep[2] = { 0, 0 };
    rk_call_reply cr = { .buf = rep, .cap = sizeof(rep) };
    rk_msg_header h;
    size_t len = 0;

    rk_msg_header_init(&h, 9, RK_MSG_PRIORITY_DEFAULT);
    h.flags |= RK_MSG_F_REQUEST;
    if (with_reply) {
        assert_int_equal(
            rk_kernel_call_reply(rt, k, &h, req, sizeof(req), &cr), RK_OK);
        assert_true(cr.got);
        assert_memory_equal(&cr.hdr.correlation_id, &h.message_id, 16);
        len = cr.len;
    } else {
        assert_int_equal(rk_kernel_call(rt, k, &h, req, sizeof(req)), RK_OK);
        assert_int_equal(
            rk_recv(rt, k, NULL, rep, sizeof(rep), &len, RK_NO_WAIT), RK_OK);
    }
    assert_int_equal(len, sizeof(req));
    assert_memory_equal(rep, req, sizeof(req));
}

/* After warm-up, a round trip on the caller's own path costs no relay
 * hand-off: rk_request, rk_kernel_call_reply and rk_kernel_call (whose
 * answer the caller moved to the output queue itself) each count one
 * direct message, and the relay moved nothing. */
static void
test_direct_round_trip(void **state)
{
    warm w;
    rk_kernel_stats s1;
    (void)state;
    start_warm(&w, "echo", "rk_echo");
    for (uint32_t i = 0; i < 40; i++)
        request_ok(w.rt, w.k, 2, i);
    for (uint32_t i = 0; i < 20; i++)
        call_ok(w.rt, w.k, i, i % 2 == 0);
    assert_int_equal(rt_wait_processed(w.rt, "echo", w.n + 60), w.n + 60);
    s1 = rt_stats(w.rt, "echo");
    assert_int_equal(s1.direct_calls - w.s0.direct_calls, 60);
    assert_int_equal(s1.relay_handoffs, w.s0.relay_handoffs);
    /* The counters reach telemetry (and so /metrics). */
    {
        rk_stats t;
        uint64_t v = 0;
        int found = 0;
        assert_int_equal(rk_kernel_telemetry(w.rt, "echo", &t), RK_OK);
        for (size_t i = 0; i < t.ncounters; i++)
            if (strcmp(t.counter[i].desc->name, "messages_direct") == 0) {
                v = t.counter[i].value;
                found = 1;
            }
        assert_true(found);
        assert_true(v >= s1.direct_calls);
    }
    assert_int_equal(rk_kernel_terminate(w.rt, "echo", T_LONG), RK_OK);
    s1 = rt_stats(w.rt, "echo");
    assert_int_equal(s1.pending, 0);
    assert_int_equal(s1.offered, s1.processed);
    rk_runtime_destroy(w.rt);
}

/* With the relay busy (a block holds a slow message, its lane fills and
 * input queues in the inbox) sends queue behind what is queued: the
 * outputs come back in send order, some sends having gone direct and
 * some through the relay. */
static void
test_order_with_relay_busy(void **state)
{
    enum { N = 24 };
    warm w;
    rk_kernel_stats s1;
    (void)state;
    start_warm(&w, "spin", "rk_spin");
    /* Message 0 keeps the block busy for 100 ms; the next ones fill its
     * lane (they go direct while it has room), then queue. */
    for (uint8_t i = 0; i < N; i++) {
        uint8_t m[2] = { i == 0 ? 10 : 0, i };
        assert_int_equal(rk_send(w.rt, w.k, 1, m, 2, 128, T_LONG), RK_OK);
    }
    for (uint8_t i = 0; i < N; i++) {
        uint8_t rep[2];
        rk_msg_header h;
        size_t len;
        assert_int_equal(
            rk_recv(w.rt, w.k, &h, rep, sizeof(rep), &len, T_LONG), RK_OK);
        assert_int_equal(len, 2);
        assert_int_equal(rep[1], i); /* in send order */
    }
    assert_int_equal(rt_wait_processed(w.rt, "spin", w.n + N), w.n + N);
    s1 = rt_stats(w.rt, "spin");
    /* Both paths ran: message 0 (at least) went direct, and what
     * queued behind the full lane went through the relay. */
    assert_true(s1.direct_calls - w.s0.direct_calls >= 1);
    assert_true(s1.direct_calls - w.s0.direct_calls < N);
    assert_true(s1.relay_handoffs > w.s0.relay_handoffs);
    assert_int_equal(rk_kernel_terminate(w.rt, "spin", T_LONG), RK_OK);
    rk_runtime_destroy(w.rt);
}

/* rk_send_batch writes what the lanes hold straight into them; the rest
 * queues behind, in order; receivers read the output lanes themselves. */
static void
test_send_batch_direct(void **state)
{
    enum { N = 40 };
    warm w;
    rk_kernel_stats s1;
    uint32_t batch[N];
    size_t sent = 0;
    (void)state;
    w.k = start(&w.rt, "echo", "rk_echo", &w.n);
    for (uint32_t i = 0; i < N; i++)
        batch[i] = 1000 + i;
    w.s0 = rt_stats(w.rt, "echo");
    assert_int_equal(rk_send_batch(w.rt, w.k, 5, batch, sizeof(batch[0]), 6,
                         128, T_LONG, &sent),
        RK_OK);
    assert_int_equal(sent, 6);
    s1 = rt_stats(w.rt, "echo");
    assert_int_equal(s1.direct_calls - w.s0.direct_calls, 6); /* lanes: 8 */
    assert_int_equal(rk_send_batch(w.rt, w.k, 5, batch + 6, sizeof(batch[0]),
                         N - 6, 128, T_LONG, &sent),
        RK_OK);
    assert_int_equal(sent, N - 6);
    for (uint32_t i = 0; i < N; i++) {
        uint32_t v = 0;
        rk_msg_header h;
        size_t len;
        assert_int_equal(
            rk_recv(w.rt, w.k, &h, &v, sizeof(v), &len, T_LONG), RK_OK);
        assert_int_equal(v, 1000 + i);
        assert_int_equal(h.type_id, 5);
    }
    assert_int_equal(rt_wait_processed(w.rt, "echo", w.n + N), w.n + N);
    assert_int_equal(rk_kernel_terminate(w.rt, "echo", T_LONG), RK_OK);
    rk_runtime_destroy(w.rt);
}

/* Failing messages back to back in one block's lane (written there by
 * the callers themselves): each fault is reported, dead-lettered and
 * restarted in turn, also when the block faults again before the relay
 * saw it leave the previous one. */
static void
test_faults_back_to_back(void **state)
{
    rk_runtime *rt;
    rk_kernel k;
    (void)state;

    k = cuda_start_failing(&rt, "fails", kernels_src, 100);
    for (int round = 0; round < 10; round++)
        cuda_fail_round(rt, k, 3);
    assert_int_equal(rk_kernel_terminate(rt, "fails", T_LONG), RK_OK);
    rk_runtime_destroy(rt);
}

/* ------------------------------------------------ racing a terminate */

/* Nothing receives the kernel's output (1024 frames by default): the
 * calls and sends whose answers go there stop at RACE_OUT_ROOM, so it
 * never fills, however late the terminate comes (a full output is
 * test_direct_call_output_full's); requests, answered to their caller,
 * go on until the kernel refuses. */
enum { RACERS = 3, RACE_OUT_ROOM = 512 };

typedef struct race {
    rk_runtime *rt;
    rk_kernel k;
    _Atomic uint32_t calls; /* calls that returned, all threads */
    _Atomic uint32_t ended; /* racers that saw the kernel refuse */
    _Atomic uint64_t accepted_calls;
    _Atomic uint32_t out_taken; /* calls and sends tried: RACE_OUT_ROOM */
    int bad; /* a result that is neither an answer nor a clear error */
    char why[256];
    pthread_mutex_t lock;
} race;

static void
race_bad(race *r, const char *what, int rc)
{
    pthread_mutex_lock(&r->lock);
    if (!r->bad) {
        r->bad = 1;
        snprintf(r->why, sizeof(r->why), "%s: %s (%s)", what, rk_err_name(rc),
            rk_errdetail());
    }
    pthread_mutex_unlock(&r->lock);
}

/* A refusal must name the kernel. */
static int
clear(void)
{
    return strstr(rk_errdetail(), "'race'") != NULL;
}

/* The refusals of a kernel that is ending or has ended: by its state, or
 * (once the instance is reaped) by the racer's handle, now stale. */
static int
ended(int rc)
{
    return rc == RK_ETERMINATED || rc == RK_ESTALE;
}

static void *
racer(void *arg)
{
    race *r = arg;
    uint32_t i = 0;

    for (;; i++) {
        uint32_t req[2] = { (uint32_t)(uintptr_t)pthread_self(), i };
        uint32_t rep[2];
        rk_msg_header h;
        size_t len = 0;
        int rc;

        if (i % 2 == 0
            || atomic_fetch_add(&r->out_taken, 1) >= RACE_OUT_ROOM) {
            rc = rk_request(r->rt, r->k, 7, req, sizeof(req), &h, rep,
                sizeof(rep), &len, T_LONG);
            if (rc == RK_OK
                && (len != sizeof(req) || memcmp(rep, req, len) != 0))
                race_bad(r, "wrong reply", rc);
            else if (rc != RK_OK && !ended(rc))
                race_bad(r, "rk_request", rc);
            else if (rc != RK_OK && !clear())
                race_bad(r, "rk_request: no detail", rc);
        } else {
            rk_msg_header_init(&h, 7, RK_MSG_PRIORITY_DEFAULT);
            rc = rk_kernel_call(r->rt, r->k, &h, req, sizeof(req));
            if (rc == RK_OK)
                atomic_fetch_add(&r->accepted_calls, 1);
            else if (rc != RK_EBUSY && !ended(rc))
                race_bad(r, "rk_kernel_call", rc);
            else if (rc != RK_EBUSY && !clear())
                race_bad(r, "rk_kernel_call: no detail", rc);
            /* Not idle (or ending): send it instead, under its rules. */
            if (rc == RK_EBUSY) {
                rc = rk_send(r->rt, r->k, 7, req, sizeof(req), 128, T_LONG);
                if (rc != RK_OK && !ended(rc))
                    race_bad(r, "rk_send", rc);
                else if (rc != RK_OK && !clear())
                    race_bad(r, "rk_send: no detail", rc);
            }
        }
        atomic_fetch_add(&r->calls, 1);
        if (ended(rc)) {
            atomic_fetch_add(&r->ended, 1);
            return NULL;
        }
        if (i > 100000) {
            race_bad(r, "never refused", rc);
            return NULL;
        }
    }
}

static void
test_direct_call_racing_terminate(void **state)
{
    (void)state;
    for (int round = 0; round < 4; round++) {
        race r = { .bad = 0 };
        pthread_t th[RACERS];
        rk_kernel_stats s;
        rk_dead_letter dl;
        unsigned char buf[128];
        uint64_t dead = 0;

        pthread_mutex_init(&r.lock, NULL);
        r.k = start(&r.rt, "race", "rk_echo", NULL);
        for (int i = 0; i < RACERS; i++)
            assert_int_equal(pthread_create(&th[i], NULL, racer, &r), 0);
        /* Terminate once the racers are under way (a few more calls each
         * round, so the terminate lands at different points). */
        while (atomic_load(&r.calls) < (uint32_t)(20 + 40 * round))
            sched_yield();
        assert_int_equal(rk_kernel_terminate(r.rt, "race", T_LONG), RK_OK);
        for (int i = 0; i < RACERS; i++)
            pthread_join(th[i], NULL);
        if (r.bad)
            fail_msg("%s", r.why);
        assert_int_equal(atomic_load(&r.ended), RACERS);
        /* Nothing hangs or leaks: every message accepted was processed
         * or dead-lettered, none is pending. */
        s = rt_stats(r.rt, "race");
        assert_int_equal(s.state, RK_KERNEL_TERMINATED);
        assert_int_equal(s.pending, 0);
        assert_int_equal(
            s.offered, s.processed + s.dead_lettered + s.rejected + s.dropped);
        assert_true(s.processed >= atomic_load(&r.accepted_calls));
        while (rk_dead_letter_recv(r.rt, &dl, buf, sizeof(buf), RK_NO_WAIT)
            == RK_OK)
            dead++;
        assert_int_equal(dead, s.dead_lettered);
        /* After the terminate: a call is refused at once, with a fresh
         * handle too. */
        {
            uint32_t req[2] = { 0, 0 };
            rk_msg_header h;
            rk_kernel k2;
            rk_msg_header_init(&h, 7, RK_MSG_PRIORITY_DEFAULT);
            assert_int_equal(
                rk_kernel_call(r.rt, r.k, &h, req, sizeof(req)), RK_ESTALE);
            assert_true(clear());
            assert_int_equal(rk_kernel_lookup(r.rt, "race", &k2), RK_OK);
            assert_int_equal(
                rk_kernel_call(r.rt, k2, &h, req, sizeof(req)), RK_EBUSY);
            assert_int_equal(rk_request(r.rt, k2, 7, req, sizeof(req), NULL,
                                 req, sizeof(req), NULL, T_LONG),
                RK_ETERMINATED);
            assert_true(clear());
        }
        rk_runtime_destroy(r.rt);
        pthread_mutex_destroy(&r.lock);
    }
}

/* ------------------------------------------------- a full output */

enum { OUT_CAP = 2, OUT_N = 6 };

/* Nothing receives and the output queue holds OUT_CAP: the first answers
 * fill it, the next ones find it full. Neither a caller on the lanes nor
 * the relay waits there for a receiver (it keeps the frame and tries it
 * again, cuda-robustness.md): each call returns, the device takes the
 * rest, a terminate ends the kernel, and the answers that never found
 * room are dead-lettered with RK_ETIMEDOUT, in order. (A caller that
 * waited for room while it held the lanes kept the relay from posting
 * STOP: the terminate hung.) */
static void
test_direct_call_output_full(void **state)
{
    rk_runtime *rt;
    rk_kernel k;
    rk_dead_letter dl;
    uint32_t nwarm, got[2];
    uint64_t direct;
    size_t len = 0;

    (void)state;
    k = start_out(&rt, "full", "rk_echo", OUT_CAP, &nwarm);
    direct = rt_stats(rt, "full").direct_calls;
    for (uint32_t i = 0; i < OUT_N; i++) {
        uint32_t req[2] = { 5, i };
        rk_msg_header h;
        int rc;

        rk_msg_header_init(&h, 7, RK_MSG_PRIORITY_DEFAULT);
        rc = rk_kernel_call(rt, k, &h, req, sizeof(req));
        if (rc == RK_EBUSY) /* a frame kept for the output: the relay's */
            rc = rk_send(rt, k, 7, req, sizeof(req), 128, T_LONG);
        assert_int_equal(rc, RK_OK);
    }
    /* Warmed up: the first call went direct (warm_up). */
    assert_true(rt_stats(rt, "full").direct_calls > direct);
    assert_int_equal(
        rt_wait_processed(rt, "full", nwarm + OUT_N), nwarm + OUT_N);
    assert_int_equal(rk_kernel_terminate(rt, "full", T_LONG), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "full", &k), RK_OK);
    for (uint32_t i = 0; i < OUT_CAP; i++) {
        assert_int_equal(
            rk_recv(rt, k, NULL, got, sizeof(got), &len, RK_NO_WAIT), RK_OK);
        assert_int_equal(len, sizeof(got));
        assert_int_equal(got[1], i);
    }
    for (uint32_t i = OUT_CAP; i < OUT_N; i++) {
        assert_int_equal(
            rk_dead_letter_recv(rt, &dl, got, sizeof(got), RK_NO_WAIT), RK_OK);
        assert_int_equal(dl.reason, RK_DEAD_FAILED);
        assert_int_equal(dl.error, RK_ETIMEDOUT);
        assert_int_equal(got[1], i);
    }
    assert_int_equal(rk_dead_letter_recv(rt, &dl, got, sizeof(got), RK_NO_WAIT),
        RK_ETIMEDOUT);
    rk_runtime_destroy(rt);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_direct_round_trip),
        cmocka_unit_test(test_order_with_relay_busy),
        cmocka_unit_test(test_send_batch_direct),
        cmocka_unit_test(test_faults_back_to_back),
        cmocka_unit_test(test_direct_call_racing_terminate),
        cmocka_unit_test(test_direct_call_output_full),
    };

    int real_gpu;

    return cuda_sim_run("test_cuda_direct", tests,
        sizeof(tests) / sizeof(tests[0]), FAKE_CUDA_LIB,
        "tests/kernels/test_kernels.cu", &kernels_src, &real_gpu);
}
