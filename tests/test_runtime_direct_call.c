/*
 * Direct calls (rk_kernel_call, config.direct_calls): a caller runs an idle
 * handler kernel's handler on one message itself.
 *   - the handler runs on the caller's thread, the reply comes out of the
 *     kernel's output queue correlated with the message's id, and the
 *     kernel's books count the call (offered, processed, pending 0);
 *   - RK_EBUSY, with nothing counted, while the kernel's thread is
 *     handling a message (the caller then queues, behind what is queued),
 *     and while the kernel is deactivated;
 *   - RK_ENOTSUP for a kernel without direct_calls, RK_EINVAL at register
 *     for an actor asking for them, admission's refusals counted;
 *   - a handler that fails in a call hands the message back to the
 *     kernel's thread: the fault, its dead letter and the restart are the
 *     usual ones;
 *   - rk_kernel_call_reply hands the reply to the caller (not the output
 *     queue, still counted sent) when it fits and k has no route; a bigger
 *     one, other outputs and a routed kernel's reply go where they always
 *     go;
 *   - rk_request on an idle direct_calls kernel is a direct call: the
 *     handler runs on the requesting thread, its reply (or error reply)
 *     comes back from the call, counted in direct_calls;
 *   - an actor kernel that also names a handler takes direct calls (the
 *     handler) while the actor waits for input, and rk_request on it too;
 *   - callers and senders at once (run under TSan too): the handler never
 *     runs twice at once, each sender's messages are handled in the order
 *     sent, and every message exactly once.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

#define T_ECHO 1
#define T_HOLD 2 /* waits at the gate before replying */
#define T_FAIL 3 /* the handler fails */
#define T_SEQ  4 /* stress: payload is (sender, sequence) */
#define T_TWO  5 /* sends its payload as a plain output, then replies */
#define T_ERR  6 /* answers with an error reply (RK_EREJECTED) */

static rt_gate gate;
static _Atomic int inside;   /* handlers running now */
static _Atomic bool overlap; /* two ran at once */
static pthread_t last_thread;
static _Atomic uint64_t last_seq[4]; /* stress: next expected per sender */
static _Atomic bool out_of_order;
static _Atomic uint64_t handled;

static int
handler(rk_ctx *ctx, const rk_msg_view *m)
{
    int rc = RK_OK;

    if (atomic_fetch_add(&inside, 1) != 0)
        atomic_store(&overlap, true);
    last_thread = pthread_self();
    switch (m->hdr->type_id) {
    case T_HOLD:
        rt_gate_pass(&gate);
        /* fall through */
    case T_ECHO:
        rc = rk_ctx_reply(ctx, m, m->hdr->type_id, m->data, m->len);
        break;
    case T_FAIL:
        rc = RK_EINTERNAL;
        break;
    case T_ERR:
        rc = rk_ctx_reply_error(ctx, m, RK_EREJECTED, "no, said the handler");
        break;
    case T_TWO:
        if ((rc = rk_ctx_send(ctx, T_TWO, m->data, m->len)) == RK_OK)
            rc = rk_ctx_reply(ctx, m, T_ECHO, m->data, m->len);
        break;
    case T_SEQ: {
        uint32_t who, seq;
        memcpy(&who, m->data, 4);
        memcpy(&seq, (const uint8_t *)m->data + 4, 4);
        if (who < 4 && atomic_exchange(&last_seq[who], seq + 1) != seq)
            atomic_store(&out_of_order, true);
        break;
    }
    default:
        break;
    }
    atomic_fetch_add(&handled, 1);
    atomic_fetch_sub(&inside, 1);
    return rc;
}

static rk_runtime *
start(bool direct, rk_restart_policy policy)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def d = { .id = "k", .handler = handler };

    d.config.direct_calls = direct;
    d.config.input_capacity = 1024;
    d.config.output_capacity = 1024;
    d.config.latency_sample = 1;
    d.config.supervision.policy = policy;
    d.config.supervision.max_restarts = 10;
    assert_int_equal(rk_runtime_register(rt, &d), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "k"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "k"), RK_OK);
    atomic_store(&handled, 0);
    atomic_store(&overlap, false);
    return rt;
}

static void
header(rk_msg_header *h, uint32_t type)
{
    memset(h, 0, sizeof(*h));
    h->type_id = type;
    h->priority = 128;
    h->message_id = rk_uuid_v7();
}

/* Calls until the kernel's thread has reached its wait (at the start it
 * still holds its context): RK_EBUSY until then. */
static int
reply_when_idle(rk_runtime *rt, rk_kernel k, const rk_msg_header *h,
    const void *data, size_t len, rk_call_reply *reply)
{
    uint64_t until = rk_now_ns() + (uint64_t)RT_LONG;
    int rc;

    while (
        (rc = reply != NULL ? rk_kernel_call_reply(rt, k, h, data, len, reply)
                            : rk_kernel_call(rt, k, h, data, len))
            == RK_EBUSY
        && rk_now_ns() < until)
        sched_yield();
    return rc;
}

static int
call_when_idle(rk_runtime *rt, rk_kernel k, const rk_msg_header *h,
    const void *data, size_t len)
{
    return reply_when_idle(rt, k, h, data, len, NULL);
}

static void
test_call_runs_on_caller(void **state)
{
    rk_runtime *rt = start(true, RK_SUPERVISE_STOP);
    rk_kernel k;
    rk_msg_header h, rh;
    uint8_t b[3] = { 1, 2, 3 }, r[8];
    size_t len = 0;
    rk_kernel_stats st;

    (void)state;
    assert_int_equal(rk_kernel_lookup(rt, "k", &k), RK_OK);
    header(&h, T_ECHO);
    assert_int_equal(call_when_idle(rt, k, &h, b, sizeof(b)), RK_OK);
    /* Returned: handled, on this thread. */
    assert_int_equal(atomic_load(&handled), 1);
    assert_true(pthread_equal(last_thread, pthread_self()));
    assert_int_equal(rk_recv(rt, k, &rh, r, sizeof(r), &len, RT_LONG), RK_OK);
    assert_int_equal(len, 3);
    assert_memory_equal(r, b, 3);
    assert_memory_equal(rh.correlation_id.b, h.message_id.b, 16);
    assert_int_equal(rk_kernel_stats_get(rt, "k", &st), RK_OK);
    assert_int_equal(st.offered, 1);
    assert_int_equal(st.processed, 1);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.latency_count, 1);
    assert_int_equal(st.direct_calls, 1);
    /* The kernel's own thread still takes sends. */
    assert_int_equal(rk_send(rt, k, T_ECHO, b, 1, 128, RT_LONG), RK_OK);
    assert_int_equal(rk_recv(rt, k, NULL, r, sizeof(r), &len, RT_LONG), RK_OK);
    assert_int_equal(len, 1);
    /* A queued message counts processed after its handler returned,
     * which may be after its reply came out. */
    rt_wait_processed(rt, "k", 2);
    assert_int_equal(rk_kernel_stats_get(rt, "k", &st), RK_OK);
    assert_int_equal(st.offered, 2);
    assert_int_equal(st.processed, 2);
    assert_false(atomic_load(&overlap));
    rk_runtime_destroy(rt);
}

static void
test_busy_while_handling_and_inactive(void **state)
{
    rk_runtime *rt;
    rk_kernel k;
    rk_msg_header h;
    uint8_t b = 5, r[8];
    size_t len;
    rk_kernel_stats st;

    (void)state;
    rt_gate_init(&gate);
    rt = start(true, RK_SUPERVISE_STOP);
    assert_int_equal(rk_kernel_lookup(rt, "k", &k), RK_OK);
    /* The kernel's thread holds a message at the gate: calls are busy,
     * uncounted. */
    assert_int_equal(rk_send(rt, k, T_HOLD, &b, 1, 128, RT_LONG), RK_OK);
    rt_gate_wait_for(&gate, 1);
    header(&h, T_ECHO);
    assert_int_equal(rk_kernel_call(rt, k, &h, &b, 1), RK_EBUSY);
    /* Queued behind it instead, handled in order after the gate. */
    assert_int_equal(rk_send_frame(rt, k, &h, &b, 1, RT_LONG), RK_OK);
    assert_int_equal(rk_kernel_stats_get(rt, "k", &st), RK_OK);
    assert_int_equal(st.offered, 2);
    rt_gate_open(&gate);
    assert_int_equal(rk_recv(rt, k, NULL, r, sizeof(r), &len, RT_LONG), RK_OK);
    assert_int_equal(rk_recv(rt, k, NULL, r, sizeof(r), &len, RT_LONG), RK_OK);
    /* Deactivated: busy (the message is then sent under the inactive
     * policy); active again: calls run. */
    assert_int_equal(rk_kernel_deactivate(rt, "k"), RK_OK);
    assert_int_equal(rk_kernel_call(rt, k, &h, &b, 1), RK_EBUSY);
    assert_int_equal(rk_kernel_activate(rt, "k"), RK_OK);
    assert_int_equal(call_when_idle(rt, k, &h, &b, 1), RK_OK);
    assert_int_equal(rk_recv(rt, k, NULL, r, sizeof(r), &len, RT_LONG), RK_OK);
    assert_int_equal(rk_kernel_stats_get(rt, "k", &st), RK_OK);
    assert_int_equal(st.offered, 3);
    assert_int_equal(st.processed, 3);
    rk_runtime_destroy(rt);
    rt_gate_fini(&gate);
}

static int
nop_actor(rk_ctx *ctx)
{
    while (!rk_should_terminate(ctx)) {
        rk_msg_view m;
        if (rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER) != RK_OK)
            break;
    }
    return RK_OK;
}

static void
test_refusals(void **state)
{
    rk_runtime *rt = start(false, RK_SUPERVISE_STOP);
    rk_kernel_def a = { .id = "a", .actor = nop_actor };
    rk_kernel k;
    rk_msg_header h;
    uint8_t big[300] = { 0 };
    rk_kernel_stats st;

    (void)state;
    assert_int_equal(rk_kernel_lookup(rt, "k", &k), RK_OK);
    header(&h, T_ECHO);
    assert_int_equal(rk_kernel_call(rt, k, &h, big, 1), RK_ENOTSUP);
    assert_non_null(strstr(rk_errdetail(), "direct_calls"));
    a.config.direct_calls = true;
    assert_int_equal(rk_runtime_register(rt, &a), RK_EINVAL);
    assert_int_equal(rk_kernel_call(rt, k, NULL, big, 1), RK_EINVAL);
    rk_runtime_destroy(rt);

    rt = start(true, RK_SUPERVISE_STOP);
    assert_int_equal(rk_kernel_lookup(rt, "k", &k), RK_OK);
    /* Over max_payload (192): admission's refusal, counted. */
    assert_int_equal(rk_kernel_call(rt, k, &h, big, sizeof(big)), RK_EMSGSIZE);
    assert_int_equal(rk_kernel_stats_get(rt, "k", &st), RK_OK);
    assert_int_equal(st.rejected, 1);
    assert_int_equal(st.offered, 1);
    assert_int_equal(st.processed, 0);
    rk_runtime_destroy(rt);
}

static void
test_failure_handed_back(void **state)
{
    rk_runtime *rt = start(true, RK_SUPERVISE_RESTART);
    rk_kernel k;
    rk_msg_header h;
    uint8_t b = 9, r[8];
    size_t len;
    rk_dead_letter dl;
    rk_kernel_stats st;

    (void)state;
    assert_int_equal(rk_kernel_lookup(rt, "k", &k), RK_OK);
    header(&h, T_FAIL);
    assert_int_equal(call_when_idle(rt, k, &h, &b, 1), RK_OK);
    /* The kernel's thread reports it: dead letter with the message. */
    assert_int_equal(
        rk_dead_letter_recv(rt, &dl, r, sizeof(r), RT_LONG), RK_OK);
    assert_string_equal(dl.kernel_id, "k");
    assert_int_equal(dl.reason, RK_DEAD_FAILED);
    assert_int_equal(dl.error, RK_EINTERNAL);
    assert_memory_equal(dl.hdr.message_id.b, h.message_id.b, 16);
    assert_int_equal(dl.len, 1);
    assert_int_equal(r[0], 9);
    /* Restarted: it runs calls again. */
    header(&h, T_ECHO);
    assert_int_equal(call_when_idle(rt, k, &h, &b, 1), RK_OK);
    assert_int_equal(rk_recv(rt, k, NULL, r, sizeof(r), &len, RT_LONG), RK_OK);
    assert_int_equal(rk_kernel_stats_get(rt, "k", &st), RK_OK);
    assert_int_equal(st.errors, 1);
    assert_int_equal(st.dead_lettered, 1);
    assert_int_equal(st.processed, 1);
    assert_int_equal(st.offered, 2);
    assert_int_equal(st.pending, 0);
    rk_runtime_destroy(rt);
}

/* ---------------------------------------------------------- stress */

#define PER_SENDER (20000 / RT_SCALE)

typedef struct sender {
    rk_runtime *rt;
    rk_kernel k;
    uint32_t who;
    bool call; /* try a direct call first */
    uint64_t calls;
    int rc;
} sender;

static void *
sender_main(void *arg)
{
    sender *s = arg;
    uint8_t p[8];

    for (uint32_t i = 0; i < PER_SENDER && s->rc == RK_OK; i++) {
        rk_msg_header h;
        int rc = RK_EBUSY;

        header(&h, T_SEQ);
        memcpy(p, &s->who, 4);
        memcpy(p + 4, &i, 4);
        if (s->call)
            rc = rk_kernel_call(s->rt, s->k, &h, p, sizeof(p));
        if (rc == RK_OK)
            s->calls++;
        else if (rc == RK_EBUSY)
            rc = rk_send_frame(s->rt, s->k, &h, p, sizeof(p), RT_LONG);
        s->rc = rc;
    }
    return NULL;
}

/* One round: three threads call (falling back to a send when the kernel
 * is busy) and one sends, concurrently; every message is handled once,
 * in each sender's order, never two at a time. Returns how many calls
 * ran directly. */
static uint64_t
callers_and_senders_round(void)
{
    rk_runtime *rt = start(true, RK_SUPERVISE_STOP);
    sender s[4];
    pthread_t t[4];
    rk_kernel_stats st;
    uint64_t calls = 0;

    atomic_store(&out_of_order, false);
    for (int i = 0; i < 4; i++) {
        atomic_store(&last_seq[i], 0);
        s[i] = (sender) { .rt = rt, .who = (uint32_t)i, .call = i < 3 };
        assert_int_equal(rk_kernel_lookup(rt, "k", &s[i].k), RK_OK);
    }
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, sender_main, &s[i]), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(s[i].rc, RK_OK);
        calls += s[i].calls;
    }
    /* Every message handled once: wait for the queued ones. */
    rt_wait_processed(rt, "k", 4 * PER_SENDER);
    assert_int_equal(atomic_load(&handled), 4 * PER_SENDER);
    assert_int_equal(rk_kernel_stats_get(rt, "k", &st), RK_OK);
    assert_int_equal(st.processed, 4 * PER_SENDER);
    assert_int_equal(st.offered, 4 * PER_SENDER);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.direct_calls, calls);
    assert_false(atomic_load(&overlap));
    assert_false(atomic_load(&out_of_order));
    for (int i = 0; i < 4; i++)
        assert_int_equal(atomic_load(&last_seq[i]), PER_SENDER);
    rk_runtime_destroy(rt);
    return calls;
}

static void
test_callers_and_senders(void **state)
{
    uint64_t calls = 0;

    (void)state;
    /* Both ways must be taken: a round where every call found the kernel
     * busy tested only the sends (it happens on a loaded machine), so it
     * is run again, up to 10 rounds, until one also ran calls. */
    for (int round = 0; round < 10 && calls == 0; round++)
        calls = callers_and_senders_round();
    printf("direct calls: %llu of %d\n", (unsigned long long)calls,
        3 * PER_SENDER);
    assert_true(calls > 0);
}

/* rk_kernel_call_reply: the reply comes back in the call. */
static void
test_call_reply(void **state)
{
    rk_runtime *rt = start(true, RK_SUPERVISE_STOP);
    rk_kernel k;
    rk_msg_header h, rh;
    uint8_t b[5] = { 9, 8, 7, 6, 5 }, r[8], small[2];
    size_t len = 0;
    rk_kernel_stats st;
    rk_call_reply cr = { .buf = r, .cap = sizeof(r) };

    (void)state;
    assert_int_equal(rk_kernel_lookup(rt, "k", &k), RK_OK);
    header(&h, T_ECHO);
    assert_int_equal(reply_when_idle(rt, k, &h, b, sizeof(b), &cr), RK_OK);
    assert_true(cr.got);
    assert_int_equal(cr.len, sizeof(b));
    assert_memory_equal(r, b, sizeof(b));
    assert_int_equal(cr.hdr.type_id, T_ECHO);
    assert_int_equal(cr.hdr.payload_len, sizeof(b));
    assert_memory_equal(cr.hdr.correlation_id.b, h.message_id.b, 16);
    /* Nothing went to the output queue; the reply is counted sent. */
    assert_int_equal(
        rk_recv(rt, k, &rh, r, sizeof(r), &len, RK_NO_WAIT), RK_ETIMEDOUT);
    assert_int_equal(rk_kernel_stats_get(rt, "k", &st), RK_OK);
    assert_int_equal(st.processed, 1);
    assert_int_equal(st.direct_calls, 1);
    assert_int_equal(st.sent, 1);

    /* Too big for the buffer: not taken, and not lost either. */
    cr.buf = small;
    cr.cap = sizeof(small);
    header(&h, T_ECHO);
    assert_int_equal(
        rk_kernel_call_reply(rt, k, &h, b, sizeof(b), &cr), RK_OK);
    assert_false(cr.got);
    assert_int_equal(cr.len, 0);
    assert_int_equal(rk_recv(rt, k, &rh, r, sizeof(r), &len, RT_LONG), RK_OK);
    assert_int_equal(len, sizeof(b));
    assert_memory_equal(rh.correlation_id.b, h.message_id.b, 16);

    /* Another output first: it goes to the queue, the reply to the call. */
    cr.buf = r;
    cr.cap = sizeof(r);
    header(&h, T_TWO);
    assert_int_equal(rk_kernel_call_reply(rt, k, &h, b, 3, &cr), RK_OK);
    assert_true(cr.got);
    assert_int_equal(cr.len, 3);
    assert_int_equal(cr.hdr.type_id, T_ECHO);
    assert_int_equal(rk_recv(rt, k, &rh, r, sizeof(r), &len, RT_LONG), RK_OK);
    assert_int_equal(rh.type_id, T_TWO);
    assert_true(rk_uuid_is_nil(&rh.correlation_id));
    assert_int_equal(
        rk_recv(rt, k, &rh, r, sizeof(r), &len, RK_NO_WAIT), RK_ETIMEDOUT);

    /* Bad arguments. */
    assert_int_equal(rk_kernel_call_reply(rt, k, &h, b, 3, NULL), RK_EINVAL);
    cr.buf = NULL;
    assert_int_equal(rk_kernel_call_reply(rt, k, &h, b, 3, &cr), RK_EINVAL);
    assert_false(atomic_load(&overlap));
    rk_runtime_destroy(rt);
}

/* Requests until one was a direct call (direct_calls counts it): the
 * kernel's thread holds its context until it first waits, so the first
 * requests may be queued. Returns the stats after. */
static void
request_until_direct(rk_runtime *rt, const char *id, rk_kernel_stats *st)
{
    uint64_t until = rk_now_ns() + (uint64_t)RT_LONG;
    rk_kernel k;
    uint8_t b[4] = { 4, 3, 2, 1 }, r[8];
    size_t len = 0;
    rk_msg_header rh;

    assert_int_equal(rk_kernel_lookup(rt, id, &k), RK_OK);
    for (;;) {
        assert_int_equal(rk_request(rt, k, T_ECHO, b, sizeof(b), &rh, r,
                             sizeof(r), &len, RT_LONG),
            RK_OK);
        assert_int_equal(len, sizeof(b));
        assert_memory_equal(r, b, sizeof(b));
        assert_int_equal(rk_kernel_stats_get(rt, id, st), RK_OK);
        if (st->direct_calls != 0 || rk_now_ns() >= until)
            break;
        sched_yield();
    }
    assert_int_equal(st->direct_calls, 1);
    /* The direct one was the last: its handler ran on this thread. */
    assert_true(pthread_equal(last_thread, pthread_self()));
}

static void
test_request_is_direct(void **state)
{
    rk_runtime *rt = start(true, RK_SUPERVISE_STOP);
    rk_kernel k;
    rk_kernel_stats st;
    rk_msg_header rh;
    uint8_t r[64];
    size_t len = 99;

    (void)state;
    request_until_direct(rt, "k", &st);
    /* Nothing was left in the output queue. */
    assert_int_equal(rk_kernel_lookup(rt, "k", &k), RK_OK);
    assert_int_equal(
        rk_recv(rt, k, &rh, r, sizeof(r), &len, RK_NO_WAIT), RK_ETIMEDOUT);
    /* An error reply through the call is the request's code and detail. */
    assert_int_equal(
        rk_request(rt, k, T_ERR, NULL, 0, &rh, r, sizeof(r), &len, RT_LONG),
        RK_EREJECTED);
    assert_non_null(strstr(rk_errdetail(), "no, said the handler"));
    assert_int_equal(len, 0);
    assert_int_equal(rk_kernel_stats_get(rt, "k", &st), RK_OK);
    assert_int_equal(st.direct_calls, 2);
    /* Too big for the caller's buffer: received from the queue, with the
     * usual RK_EMSGSIZE. */
    assert_int_equal(
        rk_request(rt, k, T_ECHO, r, 16, &rh, r, 8, &len, RT_LONG),
        RK_EMSGSIZE);
    assert_int_equal(len, 16);
    assert_false(atomic_load(&overlap));
    rk_runtime_destroy(rt);
}

/* An actor that echoes what it receives, waiting with a timeout (so it
 * lets direct calls in while it waits). */
static int
echo_actor(rk_ctx *ctx)
{
    rk_msg_view m;

    while (!rk_should_terminate(ctx)) {
        int rc = rk_ctx_recv(ctx, &m, 50 * 1000000);
        if (rc == RK_ETIMEDOUT)
            continue;
        if (rc != RK_OK)
            return rc == RK_ECLOSED ? RK_OK : rc;
        if ((rc = rk_ctx_reply(ctx, &m, m.hdr->type_id, m.data, m.len))
            != RK_OK)
            return rc;
    }
    return RK_OK;
}

static void
test_actor_with_handler(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def d = { .id = "a", .actor = echo_actor, .handler = handler };
    rk_kernel_stats st;

    (void)state;
    /* Both without direct_calls: refused. */
    assert_int_equal(rk_runtime_register(rt, &d), RK_EINVAL);
    d.config.direct_calls = true;
    assert_int_equal(rk_runtime_register(rt, &d), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "a"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "a"), RK_OK);
    atomic_store(&handled, 0);
    request_until_direct(rt, "a", &st);
    /* The handler ran once (the direct call); the actor answered the
     * rest. */
    assert_int_equal(atomic_load(&handled), 1);
    assert_int_equal(st.processed, st.offered);
    rk_runtime_destroy(rt);
}

/* A kernel connected to another: its reply takes the route, as any
 * output of it does, and the call hands nothing back. */
static void
test_call_reply_routed(void **state)
{
    rk_runtime *rt = start(true, RK_SUPERVISE_STOP);
    rk_kernel_def d = { .id = "down", .handler = handler };
    rk_kernel k, down;
    rk_msg_header h, rh;
    uint8_t b[4] = { 1, 2, 3, 4 }, r[8];
    size_t len = 0;
    rk_call_reply cr = { .buf = r, .cap = sizeof(r) };

    (void)state;
    assert_int_equal(rk_runtime_register(rt, &d), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "down"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "down"), RK_OK);
    assert_int_equal(rk_connect(rt, "k", "down"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "k", &k), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "down", &down), RK_OK);
    header(&h, T_ECHO);
    assert_int_equal(reply_when_idle(rt, k, &h, b, sizeof(b), &cr), RK_OK);
    assert_false(cr.got);
    /* down got the reply and echoed it (type T_ECHO) to its own output. */
    assert_int_equal(
        rk_recv(rt, down, &rh, r, sizeof(r), &len, RT_LONG), RK_OK);
    assert_int_equal(len, sizeof(b));
    assert_memory_equal(r, b, sizeof(b));
    rk_runtime_destroy(rt);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_call_runs_on_caller),
        cmocka_unit_test(test_busy_while_handling_and_inactive),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_failure_handed_back),
        cmocka_unit_test(test_callers_and_senders),
        cmocka_unit_test(test_call_reply),
        cmocka_unit_test(test_call_reply_routed),
        cmocka_unit_test(test_request_is_direct),
        cmocka_unit_test(test_actor_with_handler),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
