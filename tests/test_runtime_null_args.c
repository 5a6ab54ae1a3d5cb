/*
 * Bad arguments to every function of runtime.h (issue 10, defect 8, the
 * runtime's part of the bad-input table): NULL, zero, huge, stale and
 * garbage values each get an error code and a detail, never a crash or a
 * hang. Run under ASan/UBSan like every test. Today rk_should_terminate
 * (NULL) and rk_static_kernel_add(NULL) crash (SIGSEGV).
 *
 * Functions that cannot return an error say what they do instead:
 * rk_should_terminate(NULL) is true (a loop on it ends), the rk_ctx_*
 * getters return NULL, rk_runtime_destroy(NULL) does nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ringkernel/ringkernel.h"
#include "rt_fault.h"
#include "rt_helpers.h"

#define E(call) expect_error((call), #call, __LINE__)

static void
expect_error(int rc, const char *what, int line)
{
    if (rc == RK_OK)
        fail_msg("line %d: %s returned RK_OK", line, what);
    if (rk_errdetail()[0] == '\0')
        fail_msg("line %d: %s returned %s with no detail", line, what,
            rk_err_name(rc));
}

static void
test_runtime_and_registry(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "k", .actor = rt_echo_actor };
    rk_kernel_def none = { .id = "none" };
    rk_kernel_def both = { .id = "both",
        .actor = rt_echo_actor,
        .handler = (rk_handler_fn)(void (*)(void))rt_echo_actor };
    rk_kernel_def noid = { .actor = rt_echo_actor };
    rk_kernel_def emptyid = { .id = "", .actor = rt_echo_actor };
    rk_kernel_def badenum = { .id = "e", .actor = rt_echo_actor };
    char longid[RK_ID_MAX + 2];
    rk_kernel h;
    rk_kernel_state s;
    rk_kernel_stats st;
    rk_stats ts;

    (void)state;
    memset(longid, 'x', sizeof(longid) - 1);
    longid[sizeof(longid) - 1] = '\0';
    E(rk_runtime_create(NULL, NULL));
    rk_runtime_destroy(NULL);
    assert_string_equal(rk_kernel_state_name((rk_kernel_state)-1), "UNKNOWN");
    assert_string_equal(
        rk_kernel_state_name((rk_kernel_state)RK__KERNEL_STATE_COUNT),
        "UNKNOWN");

    E(rk_runtime_register(NULL, &def));
    E(rk_runtime_register(rt, NULL));
    E(rk_runtime_register(rt, &none));
    E(rk_runtime_register(rt, &both));
    E(rk_runtime_register(rt, &noid));
    E(rk_runtime_register(rt, &emptyid));
    def.id = longid;
    E(rk_runtime_register(rt, &def));
    def.id = "k";
    badenum.config.backpressure = (rk_backpressure)77;
    E(rk_runtime_register(rt, &badenum));
    badenum.config.backpressure = RK_BP_BLOCK;
    badenum.config.supervision.policy = (rk_restart_policy)-1;
    E(rk_runtime_register(rt, &badenum));
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);

    E(rk_kernel_lookup(NULL, "k", &h));
    E(rk_kernel_lookup(rt, NULL, &h));
    E(rk_kernel_lookup(rt, "k", NULL));
    E(rk_kernel_lookup(rt, "", &h));
    E(rk_kernel_lookup(rt, longid, &h));
    E(rk_kernel_launch(NULL, "k"));
    E(rk_kernel_launch(rt, NULL));
    E(rk_kernel_activate(NULL, "k"));
    E(rk_kernel_activate(rt, NULL));
    E(rk_kernel_deactivate(NULL, "k"));
    E(rk_kernel_deactivate(rt, NULL));
    E(rk_kernel_terminate(NULL, "k", 0));
    E(rk_kernel_terminate(rt, NULL, 0));
    E(rk_kernel_wait(NULL, "k", 0));
    E(rk_kernel_wait(rt, NULL, 0));
    E(rk_kernel_wait(rt, "k", 0)); /* not launched */
    E(rk_kernel_state_get(NULL, "k", &s));
    E(rk_kernel_state_get(rt, NULL, &s));
    E(rk_kernel_state_get(rt, "k", NULL));
    E(rk_kernel_stats_get(NULL, "k", &st));
    E(rk_kernel_stats_get(rt, NULL, &st));
    E(rk_kernel_stats_get(rt, "k", NULL));
    E(rk_kernel_telemetry(NULL, "k", &ts));
    E(rk_kernel_telemetry(rt, NULL, &ts));
    E(rk_kernel_telemetry(rt, "k", NULL));
    rk_runtime_destroy(rt);
}

static void
test_messaging(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "k", .actor = rt_echo_actor };
    rk_kernel h, stale, garbage = { .slot = 0x7fffffffu, .gen = 3 };
    rk_kernel zero = { 0, 0 };
    rk_msg_header hdr;
    rk_dead_letter dl;
    rk_topic_stats ts;
    char buf[16];
    size_t len, n;

    (void)state;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "k"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "k"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "k", &h), RK_OK);

    E(rk_send(NULL, h, 0, "x", 1, 128, 0));
    E(rk_send(rt, h, 0, NULL, 1, 128, 0));
    E(rk_send(rt, garbage, 0, "x", 1, 128, 0));
    E(rk_send(rt, zero, 0, "x", 1, 128, 0));
    E(rk_send(rt, h, 0, buf, SIZE_MAX, 128, 0)); /* huge: never read */
    E(rk_send_id(rt, NULL, 0, "x", 1, 128, 0));
    E(rk_send_id(NULL, "k", 0, "x", 1, 128, 0));
    E(rk_send_batch(NULL, h, 0, "x", 1, 1, 128, 0, &n));
    E(rk_send_batch(rt, h, 0, NULL, 1, 1, 128, 0, &n));
    E(rk_send_batch(rt, garbage, 0, "x", 1, 1, 128, 0, NULL));
    E(rk_send_batch(rt, h, 0, buf, SIZE_MAX / 2, 4, 128, 0, &n));
    E(rk_recv(NULL, h, &hdr, buf, sizeof(buf), &len, 0));
    E(rk_recv(rt, h, &hdr, NULL, sizeof(buf), &len, 0));
    E(rk_recv(rt, garbage, &hdr, buf, sizeof(buf), &len, 0));
    E(rk_recv_id(rt, NULL, &hdr, buf, sizeof(buf), &len, 0));
    E(rk_request(NULL, h, 0, "x", 1, &hdr, buf, sizeof(buf), &len, 0));
    E(rk_request(rt, h, 0, NULL, 1, &hdr, buf, sizeof(buf), &len, 0));
    E(rk_request(rt, h, 0, "x", 1, &hdr, NULL, sizeof(buf), &len, 0));
    E(rk_request(rt, garbage, 0, "x", 1, &hdr, buf, sizeof(buf), &len, 0));

    E(rk_connect(NULL, "k", "k"));
    E(rk_connect(rt, NULL, "k"));
    E(rk_connect(rt, "k", NULL));
    E(rk_connect(rt, "k", "nope"));
    E(rk_disconnect(NULL, "k"));
    E(rk_disconnect(rt, NULL));
    E(rk_subscribe(NULL, "k", "t"));
    E(rk_subscribe(rt, NULL, "t"));
    E(rk_subscribe(rt, "k", NULL));
    E(rk_subscribe(rt, "k", ""));
    E(rk_unsubscribe(NULL, "k", "t"));
    E(rk_unsubscribe(rt, NULL, "t"));
    E(rk_unsubscribe(rt, "k", NULL));
    E(rk_unsubscribe(rt, "k", "t")); /* not subscribed */
    E(rk_publish(NULL, "t", 0, "x", 1, 128, 0, &n));
    E(rk_publish(rt, NULL, 0, "x", 1, 128, 0, &n));
    E(rk_publish(rt, "t", 0, NULL, 1, 128, 0, &n));
    E(rk_topic_stats_get(NULL, "t", &ts));
    E(rk_topic_stats_get(rt, NULL, &ts));
    E(rk_topic_stats_get(rt, "t", NULL));
    E(rk_topic_stats_get(rt, "t", &ts)); /* no such topic */
    E(rk_dead_letter_recv(NULL, &dl, buf, sizeof(buf), 0));
    E(rk_dead_letter_recv(rt, NULL, buf, sizeof(buf), 0));
    E(rk_dead_letter_recv(rt, &dl, NULL, sizeof(buf), 0));

    /* Stale: the instance the handle named has ended. */
    stale = h;
    assert_int_equal(rk_kernel_terminate(rt, "k", RT_LONG), RK_OK);
    E(rk_send(rt, stale, 0, "x", 1, 128, 0));
    E(rk_send_batch(rt, stale, 0, "x", 1, 1, 128, 0, &n));
    E(rk_request(rt, stale, 0, "x", 1, &hdr, buf, sizeof(buf), &len, 0));
    rk_runtime_destroy(rt);
}

/* --------------------------------------------------- actor side */

typedef struct ctx_results {
    int recv_null, send_null, reply_null_req, reply_null_hdr, send_to_null,
        send_to_garbage, publish_null_topic, publish_null_ctx, prio_bad,
        prio_null, recv_null_out;
    bool term_null;
    void *user_null;
    const char *id_null;
    rk_runtime *rt_null;
} ctx_results;

static ctx_results cr;

static int
bad_args_actor(rk_ctx *ctx)
{
    rk_msg_view v = { 0 };
    rk_kernel garbage = { .slot = 0xffffffu, .gen = 9 };

    cr.recv_null = rk_ctx_recv(NULL, &v, 0);
    cr.recv_null_out = rk_ctx_recv(ctx, NULL, 0);
    cr.send_null = rk_ctx_send(NULL, 0, "x", 1);
    cr.reply_null_req = rk_ctx_reply(ctx, NULL, 0, "x", 1);
    cr.reply_null_hdr = rk_ctx_reply(ctx, &v, 0, "x", 1);
    cr.send_to_null = rk_ctx_send_to(NULL, garbage, 0, "x", 1);
    cr.send_to_garbage = rk_ctx_send_to(ctx, garbage, 0, "x", 1);
    cr.publish_null_topic = rk_ctx_publish(ctx, NULL, 0, "x", 1);
    cr.publish_null_ctx = rk_ctx_publish(NULL, "t", 0, "x", 1);
    cr.prio_bad = rk_ctx_set_priority(ctx, 256);
    cr.prio_null = rk_ctx_set_priority(NULL, 0);
    cr.term_null = rk_should_terminate(NULL);
    cr.user_null = rk_ctx_user(NULL);
    cr.id_null = rk_ctx_kernel_id(NULL);
    cr.rt_null = rk_ctx_runtime(NULL);
    return RK_OK;
}

static void
test_actor_side(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "bad", .actor = bad_args_actor };

    (void)state;
    memset(&cr, 0, sizeof(cr));
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "bad"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "bad"), RK_OK);
    assert_int_equal(rk_kernel_wait(rt, "bad", RT_LONG), RK_OK);
    assert_int_equal(rt_state(rt, "bad"), RK_KERNEL_TERMINATED);
    assert_int_equal(cr.recv_null, RK_EINVAL);
    assert_int_equal(cr.recv_null_out, RK_EINVAL);
    assert_int_equal(cr.send_null, RK_EINVAL);
    assert_int_equal(cr.reply_null_req, RK_EINVAL);
    assert_int_equal(cr.reply_null_hdr, RK_EINVAL);
    assert_int_equal(cr.send_to_null, RK_EINVAL);
    assert_int_equal(cr.send_to_garbage, RK_ESTALE);
    assert_int_equal(cr.publish_null_topic, RK_EINVAL);
    assert_int_equal(cr.publish_null_ctx, RK_EINVAL);
    assert_int_equal(cr.prio_bad, RK_EINVAL);
    assert_int_equal(cr.prio_null, RK_EINVAL);
    assert_true(cr.term_null);
    assert_null(cr.user_null);
    assert_null(cr.id_null);
    assert_null(cr.rt_null);
    rk_runtime_destroy(rt);
}

/* The header's own NULL cases, alone: today a SIGSEGV each. */
static void
test_should_terminate_null(void **state)
{
    (void)state;
    assert_true(rk_should_terminate(NULL));
}

static void
test_static_kernel_add_null(void **state)
{
    rk_static_kernel empty = { NULL, NULL };

    (void)state;
    rk_static_kernel_add(NULL);
    /* A node without a definition is ignored by later runtimes too. */
    rk_static_kernel_add(&empty);
    {
        rk_runtime *rt = NULL;
        assert_int_equal(rk_runtime_create(&rt, NULL), RK_OK);
        rk_runtime_destroy(rt);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_should_terminate_null),
        cmocka_unit_test(test_static_kernel_add_null),
        cmocka_unit_test(test_runtime_and_registry),
        cmocka_unit_test(test_messaging),
        cmocka_unit_test(test_actor_side),
    };
    rt_test_filter();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
