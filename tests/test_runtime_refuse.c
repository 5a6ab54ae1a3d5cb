/*
 * The runtime's hooks for things that go away (docs/cluster.md, "Core
 * hooks"), generic and without the cluster:
 *   - rk_kernel_refuse: every later send, request, publish copy, batch and
 *     kernel-to-kernel send into the kernel is refused with the given code
 *     and detail, counted in its rejected; what was queued is still
 *     handled; the first refusal stays; concurrent senders switch from
 *     RK_OK to the refusal once and for all (run under TSan too);
 *   - error replies (RK_MSG_TYPE_ERROR, rk_ctx_reply_error): rk_request
 *     returns the reply's code with its detail, whatever the kernel's
 *     output_type; a plain receive gets the message; a malformed one is
 *     RK_EDECODE;
 *   - rk_kernel_config_get: the registered configuration, defaults
 *     filled in;
 *   - rk_send_frame_try: a full BLOCK kernel's refusal is not counted.
 */
#include <pthread.h>
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

/* Counts what it handles; replies with the byte it got. */
static _Atomic uint64_t handled;

static int
count_actor(rk_ctx *ctx)
{
    rk_msg_view m;
    int rc;

    while ((rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER)) == RK_OK) {
        atomic_fetch_add(&handled, 1);
        if ((rc = rk_ctx_reply(ctx, &m, 0, m.data, m.len)) != RK_OK)
            return rc;
    }
    return rc == RK_ECLOSED ? RK_OK : rc;
}

/* Forwards each message to "sink" with rk_ctx_send_to and replies with
 * the result code (one byte). */
static int
fwd_actor(rk_ctx *ctx)
{
    rk_runtime *rt = rk_ctx_runtime(ctx);
    rk_msg_view m;
    rk_kernel sink;
    int rc;

    if ((rc = rk_kernel_lookup(rt, "sink", &sink)) != RK_OK)
        return rc;
    while ((rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER)) == RK_OK) {
        uint8_t r = (uint8_t)rk_ctx_send_to(ctx, sink, 0, m.data, m.len);
        if ((rc = rk_ctx_reply(ctx, &m, 0, &r, 1)) != RK_OK)
            return rc;
    }
    return rc == RK_ECLOSED ? RK_OK : rc;
}

static void
start(rk_runtime *rt, const char *id, rk_actor_fn fn, const rk_msgtype *out)
{
    rk_kernel_def def = { .id = id, .actor = fn };

    def.config.input_capacity = 1024;
    def.config.output_capacity = 1024;
    def.config.output_type = out;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, id), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, id), RK_OK);
}

static uint64_t
rejected_of(rk_runtime *rt, const char *id)
{
    rk_kernel_stats st;

    assert_int_equal(rk_kernel_stats_get(rt, id, &st), RK_OK);
    return st.rejected;
}

static void
test_refuse(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel k, f;
    uint8_t b = 7, r = 0;
    size_t len = 0, n = 0;

    (void)state;
    atomic_store(&handled, 0);
    start(rt, "sink", count_actor, NULL);
    start(rt, "fwd", fwd_actor, NULL);
    assert_int_equal(rk_kernel_lookup(rt, "sink", &k), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "fwd", &f), RK_OK);
    assert_int_equal(rk_subscribe(rt, "sink", "t"), RK_OK);

    /* Bad arguments. */
    assert_int_equal(rk_kernel_refuse(rt, "sink", RK_OK, NULL), RK_EINVAL);
    assert_int_equal(rk_kernel_refuse(rt, "sink", -3, NULL), RK_EINVAL);
    assert_int_equal(
        rk_kernel_refuse(rt, "sink", RK__ERR_COUNT, NULL), RK_EINVAL);
    assert_int_equal(rk_kernel_refuse(rt, NULL, RK_EBUSY, NULL), RK_EINVAL);
    assert_int_equal(
        rk_kernel_refuse(rt, "nobody", RK_EBUSY, NULL), RK_ENOTFOUND);

    /* Before: everything goes in (and out: 3 replies queued). */
    for (int i = 0; i < 3; i++)
        assert_int_equal(rk_send(rt, k, 0, &b, 1, 128, RT_LONG), RK_OK);
    assert_int_equal(
        rk_request(rt, f, 0, &b, 1, NULL, &r, 1, &len, RT_LONG), RK_OK);
    assert_int_equal(r, RK_OK); /* fwd's send_to went in */
    assert_int_equal(rejected_of(rt, "sink"), 0);

    assert_int_equal(
        rk_kernel_refuse(rt, "sink", RK_EUNREACHABLE, "rank 2 died"), RK_OK);
    /* A second refusal changes nothing. */
    assert_int_equal(rk_kernel_refuse(rt, "sink", RK_EBUSY, "x"), RK_OK);

    assert_int_equal(rk_send(rt, k, 0, &b, 1, 128, RT_LONG), RK_EUNREACHABLE);
    assert_non_null(strstr(rk_errdetail(), "send refused by kernel 'sink'"));
    assert_non_null(strstr(rk_errdetail(), "rank 2 died"));
    assert_int_equal(rk_request(rt, k, 0, &b, 1, NULL, &r, 1, &len, RT_LONG),
        RK_EUNREACHABLE);
    assert_non_null(strstr(rk_errdetail(), "request refused"));
    assert_int_equal(
        rk_send_batch(rt, k, 0, &b, 1, 4, 128, RT_LONG, &n), RK_EUNREACHABLE);
    assert_int_equal(n, 0);
    {
        rk_msg_header h;
        memset(&h, 0, sizeof(h));
        assert_int_equal(
            rk_send_frame(rt, k, &h, &b, 1, RT_LONG), RK_EUNREACHABLE);
    }
    {
        size_t got = 9;
        rk_topic_stats ts;
        assert_int_not_equal(
            rk_publish(rt, "t", 0, &b, 1, 128, RT_LONG, &got), RK_OK);
        assert_int_equal(got, 0);
        assert_int_equal(rk_topic_stats_get(rt, "t", &ts), RK_OK);
        assert_int_equal(ts.failed, 1);
    }
    /* A kernel's send into it gets the same code. */
    assert_int_equal(
        rk_request(rt, f, 0, &b, 1, NULL, &r, 1, &len, RT_LONG), RK_OK);
    assert_int_equal(r, RK_EUNREACHABLE);
    /* Every refusal counted; 4 in, 4 handled, the kernel runs on. */
    assert_int_equal(rejected_of(rt, "sink"), 6);
    for (int i = 0; i < 4; i++)
        assert_int_equal(rk_recv(rt, k, NULL, &r, 1, &len, RT_LONG), RK_OK);
    assert_int_equal(atomic_load(&handled), 4);
    rk_kernel_state s;
    assert_int_equal(rk_kernel_state_get(rt, "sink", &s), RK_OK);
    assert_int_equal(s, RK_KERNEL_ACTIVE);
    rk_runtime_destroy(rt);
}

/* ------------------------------------------------ concurrent refusal */

typedef struct racer {
    rk_runtime *rt;
    rk_kernel k;
    _Atomic int go;
    uint64_t ok, refused;
    bool bad;
    int bad_rc; /* the result that made it bad, for the failure message */
} racer;

static void *
race_main(void *arg)
{
    racer *x = arg;
    uint8_t b = 1;

    while (!atomic_load(&x->go))
        ;
    for (;;) {
        int rc = rk_send(x->rt, x->k, 0, &b, 1, 128, RT_LONG);
        /* Before the refusal a send is accepted, or dropped by the
         * DROP_NEW policy once the sink (whose output nobody reads) has
         * filled up, which a slow run (TSan) reaches. */
        if (rc == RK_OK || rc == RK_EDROPPED) {
            if (x->refused != 0) {
                x->bad = true; /* accepted after a refusal */
                x->bad_rc = rc;
            }
            x->ok++;
        } else if (rc == RK_EUNREACHABLE
            && strstr(rk_errdetail(), "gone away") != NULL) {
            if (++x->refused == 100)
                break;
        } else {
            x->bad = true;
            x->bad_rc = rc;
            break;
        }
    }
    return NULL;
}

static void
test_refuse_concurrent(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    racer x[2];
    pthread_t th[2];

    (void)state;
    atomic_store(&handled, 0);
    {
        rk_kernel_def def = { .id = "sink", .actor = count_actor };
        def.config.input_capacity = 1024;
        def.config.output_capacity = 1024;
        def.config.backpressure = RK_BP_DROP_NEW;
        def.config.telemetry_off = true;
        assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
        assert_int_equal(rk_kernel_launch(rt, "sink"), RK_OK);
        assert_int_equal(rk_kernel_activate(rt, "sink"), RK_OK);
    }
    for (int i = 0; i < 2; i++) {
        memset(&x[i], 0, sizeof(x[i]));
        x[i].rt = rt;
        assert_int_equal(rk_kernel_lookup(rt, "sink", &x[i].k), RK_OK);
        assert_int_equal(pthread_create(&th[i], NULL, race_main, &x[i]), 0);
        atomic_store(&x[i].go, 1);
    }
    assert_int_equal(
        rk_kernel_refuse(rt, "sink", RK_EUNREACHABLE, "gone away"), RK_OK);
    /* Both joined before any check, so a failed check leaves no thread
     * behind. */
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < 2; i++) {
        if (x[i].bad)
            fail_msg("sender %d: %s after %llu refusals", i,
                rk_err_name(x[i].bad_rc), (unsigned long long)x[i].refused);
        assert_int_equal(x[i].refused, 100);
    }
    /* Refusals counted as rejected (the DROP_NEW queue counts its drops
     * as dropped, not rejected). */
    assert_true(rejected_of(rt, "sink") >= 200);
    rk_runtime_destroy(rt);
}

/* ---------------------------------------------------- error replies */

#define OUT_FIELDS(X) X(v, RK_UINT8)
RK_MSGTYPE_DECLARE(out_t, OUT_FIELDS);
RK_MSGTYPE_DEFINE(out_t, "refuse.out", 4242, OUT_FIELDS);

/* 'e': an error reply with a detail; 'n': without; 'm': a malformed one
 * (2-byte payload); 'i': rk_ctx_reply_error with a bad code, whose result
 * comes back as a normal reply; anything else: a normal reply. */
static int
err_actor(rk_ctx *ctx)
{
    rk_msg_view m;
    int rc;

    while ((rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER)) == RK_OK) {
        char c = m.len ? *(const char *)m.data : 0;
        out_t o = { 1 };

        if (c == 'e')
            rc = rk_ctx_reply_error(ctx, &m, RK_EREJECTED, "no room upstream");
        else if (c == 'n')
            rc = rk_ctx_reply_error(ctx, &m, RK_EBUSY, NULL);
        else if (c == 'm')
            rc = rk_ctx_reply(ctx, &m, RK_MSG_TYPE_ERROR, "xy", 2);
        else if (c == 'i') {
            o.v = (uint8_t)rk_ctx_reply_error(ctx, &m, 0, NULL);
            rc = rk_ctx_reply(ctx, &m, out_t_msgtype.id, &o, sizeof(o));
        } else
            rc = rk_ctx_reply(ctx, &m, out_t_msgtype.id, &o, sizeof(o));
        if (rc != RK_OK)
            return rc;
    }
    return rc == RK_ECLOSED ? RK_OK : rc;
}

static void
test_error_reply(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_msg_header h;
    rk_kernel k;
    out_t o;
    size_t len = 99;
    uint8_t raw[64];

    (void)state;
    assert_int_equal(rk_msgtype_register(&out_t_msgtype), RK_OK);
    start(rt, "err", err_actor, &out_t_msgtype);
    assert_int_equal(rk_kernel_lookup(rt, "err", &k), RK_OK);

    /* A normal answer. */
    assert_int_equal(
        rk_request(rt, k, 0, "a", 1, &h, &o, sizeof(o), &len, RT_LONG), RK_OK);
    assert_int_equal(h.type_id, out_t_msgtype.id);
    assert_int_equal(o.v, 1);

    /* An error reply with a detail: its code, its text, the header. */
    memset(&h, 0, sizeof(h));
    assert_int_equal(
        rk_request(rt, k, 0, "e", 1, &h, &o, sizeof(o), &len, RT_LONG),
        RK_EREJECTED);
    assert_string_equal(rk_errdetail(), "no room upstream");
    assert_int_equal(h.type_id, RK_MSG_TYPE_ERROR);
    assert_false(rk_uuid_is_nil(&h.correlation_id));
    assert_int_equal(len, 0);
    /* Even into a buffer too small for the payload. */
    assert_int_equal(
        rk_request(rt, k, 0, "e", 1, NULL, NULL, 0, &len, RT_LONG),
        RK_EREJECTED);

    /* Without a detail: the kernel and the code are named. */
    assert_int_equal(
        rk_request(rt, k, 0, "n", 1, NULL, &o, sizeof(o), &len, RT_LONG),
        RK_EBUSY);
    assert_non_null(strstr(rk_errdetail(), "'err'"));
    assert_non_null(strstr(rk_errdetail(), "RK_EBUSY"));

    /* Malformed. */
    assert_int_equal(
        rk_request(rt, k, 0, "m", 1, NULL, &o, sizeof(o), &len, RT_LONG),
        RK_EDECODE);

    /* A bad code is the kernel's error, not a reply. */
    assert_int_equal(
        rk_request(rt, k, 0, "i", 1, &h, &o, sizeof(o), &len, RT_LONG), RK_OK);
    assert_int_equal(o.v, RK_EINVAL);

    /* A plain receive gets an error reply as a message. */
    assert_int_equal(rk_send(rt, k, 0, "e", 1, 128, RT_LONG), RK_OK);
    assert_int_equal(
        rk_recv(rt, k, &h, raw, sizeof(raw), &len, RT_LONG), RK_OK);
    assert_int_equal(h.type_id, RK_MSG_TYPE_ERROR);
    assert_int_equal(len, 4 + strlen("no room upstream"));
    assert_int_equal(raw[0], RK_EREJECTED);
    assert_memory_equal(raw + 4, "no room upstream", len - 4);

    /* A request steps over someone else's error reply (it is set
     * aside for a plain receive) and gets its own. */
    assert_int_equal(rk_send(rt, k, 0, "n", 1, 128, RT_LONG), RK_OK);
    assert_int_equal(
        rk_request(rt, k, 0, "e", 1, NULL, &o, sizeof(o), &len, RT_LONG),
        RK_EREJECTED);
    assert_int_equal(
        rk_recv(rt, k, &h, raw, sizeof(raw), &len, RT_LONG), RK_OK);
    assert_int_equal(h.type_id, RK_MSG_TYPE_ERROR);
    assert_int_equal(len, 4);
    assert_int_equal(raw[0], RK_EBUSY);
    rk_runtime_destroy(rt);
}

/* ------------------------------------------------- config read back */

static void
test_config_get(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "cfg", .actor = count_actor };
    rk_kernel_config c;
    int user;

    (void)state;
    def.config.input_capacity = 128;
    def.config.backpressure = RK_BP_REJECT;
    def.config.priority_bands = true;
    def.config.user = &user;
    if (rk_runtime_register(rt, &def) != RK_OK)
        fail_msg("register: %s", rk_errdetail());
    memset(&c, 0xab, sizeof(c));
    assert_int_equal(rk_kernel_config_get(rt, "cfg", &c), RK_OK);
    assert_int_equal(c.input_capacity, 128);
    assert_int_equal(c.backpressure, RK_BP_REJECT);
    assert_true(c.priority_bands);
    assert_ptr_equal(c.user, &user);
    /* Defaults filled in. */
    assert_true(c.max_payload > 0);
    assert_true(c.output_capacity > 0);
    assert_true(c.spin > 0);
    assert_int_equal(rk_kernel_config_get(rt, "nobody", &c), RK_ENOTFOUND);
    assert_int_equal(rk_kernel_config_get(rt, "cfg", NULL), RK_EINVAL);
    rk_runtime_destroy(rt);
}

/* rk_send_frame_try: a full BLOCK kernel refuses without counting (the
 * caller keeps the message), RK_EFULL without a wait and RK_ETIMEDOUT
 * after one; rk_send_frame counts the same refusal; other policies count
 * as always; and every message the tries got in is handled. */
static void
test_send_frame_try(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "full", .actor = count_actor };
    rk_kernel_def rej = { .id = "rej", .actor = count_actor };
    rk_msg_header h;
    rk_kernel k, kr;
    uint64_t in = 0;
    char b = 'x';
    int rc;

    (void)state;
    atomic_store(&handled, 0);
    def.config.input_capacity = 8;
    def.config.when_inactive = RK_INACTIVE_QUEUE; /* launched: queues */
    rej.config = def.config;
    rej.config.backpressure = RK_BP_REJECT;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_runtime_register(rt, &rej), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "full"), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "rej"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "full", &k), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "rej", &kr), RK_OK);
    rk_msg_header_init(&h, 0, 128);

    /* Fill the held kernel with tries: in until full, nothing counted. */
    while ((rc = rk_send_frame_try(rt, k, &h, &b, 1, RK_NO_WAIT)) == RK_OK)
        in++;
    assert_int_equal(rc, RK_EFULL);
    assert_true(in >= 8);
    assert_int_equal(rejected_of(rt, "full"), 0);
    assert_int_equal(
        rk_send_frame_try(rt, k, &h, &b, 1, 1000000), RK_ETIMEDOUT);
    assert_int_equal(rejected_of(rt, "full"), 0);
    /* The same refusal by rk_send_frame is counted. */
    assert_int_equal(rk_send_frame(rt, k, &h, &b, 1, RK_NO_WAIT), RK_EFULL);
    assert_int_equal(rejected_of(rt, "full"), 1);

    /* REJECT: the policy's refusal is counted by a try too. */
    while ((rc = rk_send_frame_try(rt, kr, &h, &b, 1, RK_NO_WAIT)) == RK_OK)
        ;
    assert_int_equal(rc, RK_EREJECTED);
    assert_int_equal(rejected_of(rt, "rej"), 1);

    /* Bad arguments. */
    assert_int_equal(
        rk_send_frame_try(rt, k, NULL, &b, 1, RK_NO_WAIT), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "rk_send_frame_try"));

    /* Everything the tries got into "full" is handled, once. */
    assert_int_equal(rk_kernel_terminate(rt, "rej", RT_LONG), RK_OK);
    atomic_store(&handled, 0);
    assert_int_equal(rk_kernel_activate(rt, "full"), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "full", RT_LONG), RK_OK);
    assert_int_equal(atomic_load(&handled), in);
    rk_runtime_destroy(rt);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refuse),
        cmocka_unit_test(test_refuse_concurrent),
        cmocka_unit_test(test_error_reply),
        cmocka_unit_test(test_config_get),
        cmocka_unit_test(test_send_frame_try),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
