/*
 * Lifecycle: every state x every operation (the table in docs/runtime.md),
 * registration, static registration, look-ups and stale handles.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

/* ------------------------------------------------------------ kernels */

enum mode { MODE_ECHO, MODE_GATE, MODE_FAIL };

static rt_gate gate;

static int
test_actor(rk_ctx *ctx)
{
    enum mode m = (enum mode)(intptr_t)rk_ctx_user(ctx);

    if (m == MODE_FAIL)
        return RK_EINTERNAL;
    if (m == MODE_GATE)
        rt_gate_pass(&gate); /* ignores terminate until the test opens */
    return rt_echo_actor(ctx);
}

static int
static_actor(rk_ctx *ctx)
{
    return rt_echo_actor(ctx);
}

RK_RING_KERNEL(static_actor, "static-echo", .input_capacity = 64);

static rk_runtime *
make_rt(enum mode m, rk_inactive_policy pol)
{
    rk_runtime *rt = NULL;
    rk_runtime_config cfg = { .no_static_kernels = true };
    rk_kernel_def def = { .id = "k", .actor = test_actor };

    rt_gate_init(&gate);
    def.config.user = (void *)(intptr_t)m;
    def.config.when_inactive = pol;
    assert_int_equal(rk_runtime_create(&rt, &cfg), RK_OK);
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    return rt;
}

/* Brings kernel "k" of a fresh runtime to state s. */
static rk_runtime *
reach(rk_kernel_state s, rk_inactive_policy pol)
{
    rk_runtime *rt = make_rt(s == RK_KERNEL_TERMINATING ? MODE_GATE
            : s == RK_KERNEL_FAILED                     ? MODE_FAIL
                                                        : MODE_ECHO,
        pol);

    if (s == RK_KERNEL_CREATED)
        goto done;
    assert_int_equal(rk_kernel_launch(rt, "k"), RK_OK);
    if (s == RK_KERNEL_LAUNCHED)
        goto done;
    assert_int_equal(rk_kernel_activate(rt, "k"), RK_OK);
    switch (s) {
    case RK_KERNEL_DEACTIVATED:
        assert_int_equal(rk_kernel_deactivate(rt, "k"), RK_OK);
        break;
    case RK_KERNEL_TERMINATING:
        rt_gate_wait_for(&gate, 1); /* the actor is held in its own code */
        assert_int_equal(rk_kernel_terminate(rt, "k", 1000000), RK_ETIMEDOUT);
        break;
    case RK_KERNEL_TERMINATED:
        assert_int_equal(rk_kernel_terminate(rt, "k", RT_LONG), RK_OK);
        break;
    case RK_KERNEL_FAILED:
        assert_int_equal(rk_kernel_wait(rt, "k", RT_LONG), RK_OK);
        break;
    default:
        break;
    }
done:
    assert_int_equal(rt_state(rt, "k"), s);
    return rt;
}

static void
finish(rk_runtime *rt)
{
    rt_gate_open(&gate);
    rk_runtime_destroy(rt);
    rt_gate_fini(&gate);
}

/* ------------------------------------------------------- the table */

enum op {
    OP_LAUNCH,
    OP_ACTIVATE,
    OP_DEACTIVATE,
    OP_TERMINATE,
    OP_SEND_QUEUE,
    OP_SEND_REJECT,
    OP_COUNT
};

static const char *const op_names[] = { "launch", "activate", "deactivate",
    "terminate", "send(queue)", "send(reject)" };

typedef struct cell {
    int rc;
    rk_kernel_state after;
} cell;

#define C(r, s)                                                               \
    {                                                                         \
        RK_##r, RK_KERNEL_##s                                                 \
    }
/* Rows: states in enum order; columns: enum op. docs/runtime.md. */
static const cell table[RK__KERNEL_STATE_COUNT][OP_COUNT] = {
    /* CREATED */
    { C(OK, LAUNCHED), C(ENOTLAUNCHED, CREATED), C(ENOTLAUNCHED, CREATED),
        C(ENOTLAUNCHED, CREATED), C(ENOTLAUNCHED, CREATED),
        C(ENOTLAUNCHED, CREATED) },
    /* LAUNCHED */
    { C(EALREADY, LAUNCHED), C(OK, ACTIVE), C(ENOTACTIVE, LAUNCHED),
        C(OK, TERMINATED), C(OK, LAUNCHED), C(ENOTACTIVE, LAUNCHED) },
    /* ACTIVE */
    { C(EALREADY, ACTIVE), C(EALREADY, ACTIVE), C(OK, DEACTIVATED),
        C(OK, TERMINATED), C(OK, ACTIVE), C(OK, ACTIVE) },
    /* DEACTIVATED */
    { C(EALREADY, DEACTIVATED), C(OK, ACTIVE), C(EALREADY, DEACTIVATED),
        C(OK, TERMINATED), C(OK, DEACTIVATED), C(ENOTACTIVE, DEACTIVATED) },
    /* TERMINATING (terminate waits again; the actor is still held) */
    { C(ETERMINATED, TERMINATING), C(ETERMINATED, TERMINATING),
        C(ETERMINATED, TERMINATING), C(ETIMEDOUT, TERMINATING),
        C(ETERMINATED, TERMINATING), C(ETERMINATED, TERMINATING) },
    /* TERMINATED */
    { C(OK, LAUNCHED), C(ETERMINATED, TERMINATED), C(ETERMINATED, TERMINATED),
        C(EALREADY, TERMINATED), C(ETERMINATED, TERMINATED),
        C(ETERMINATED, TERMINATED) },
    /* FAILED */
    { C(OK, LAUNCHED), C(EFAILED, FAILED), C(EFAILED, FAILED),
        C(EFAILED, FAILED), C(EFAILED, FAILED), C(EFAILED, FAILED) },
};
#undef C

/* terminate waits long where it must succeed, briefly where the actor is
 * held and it must time out (no timing is asserted either way). */
static int
apply(rk_runtime *rt, enum op o, rk_kernel_state s)
{
    uint64_t v = 42;

    switch (o) {
    case OP_LAUNCH:
        return rk_kernel_launch(rt, "k");
    case OP_ACTIVATE:
        return rk_kernel_activate(rt, "k");
    case OP_DEACTIVATE:
        return rk_kernel_deactivate(rt, "k");
    case OP_TERMINATE:
        return rk_kernel_terminate(
            rt, "k", s == RK_KERNEL_TERMINATING ? 1000000 : RT_LONG);
    default:
        return rk_send_id(rt, "k", 0, &v, sizeof(v), 128, RK_NO_WAIT);
    }
}

static void
test_transition_table(void **state)
{
    (void)state;
    for (int s = 0; s < RK__KERNEL_STATE_COUNT; s++) {
        for (int o = 0; o < OP_COUNT; o++) {
            rk_inactive_policy pol
                = o == OP_SEND_REJECT ? RK_INACTIVE_REJECT : RK_INACTIVE_QUEUE;
            rk_runtime *rt = reach((rk_kernel_state)s, pol);
            int rc = apply(rt, (enum op)o, (rk_kernel_state)s);
            const cell *want = &table[s][o];

            if (rc != want->rc || rt_state(rt, "k") != want->after)
                fail_msg("%s on %s: got %s -> %s, want %s -> %s (%s)",
                    op_names[o], rk_kernel_state_name((rk_kernel_state)s),
                    rk_err_name(rc), rk_kernel_state_name(rt_state(rt, "k")),
                    rk_err_name(want->rc), rk_kernel_state_name(want->after),
                    rk_errdetail());
            /* A refused transition says what and where. */
            if (rc != RK_OK && rc != RK_ETIMEDOUT)
                assert_non_null(strstr(rk_errdetail(), "'k'"));
            finish(rt);
        }
    }
}

/* Reactivation keeps queued messages: sent while DEACTIVATED, they are
 * processed after activate, in order, and not before. */
static void
test_deactivated_keeps_queue(void **state)
{
    rk_runtime *rt = reach(RK_KERNEL_DEACTIVATED, RK_INACTIVE_QUEUE);
    rk_kernel k;
    rk_kernel_stats st;
    uint64_t v, got;
    size_t len;

    (void)state;
    assert_int_equal(rk_kernel_lookup(rt, "k", &k), RK_OK);
    for (v = 0; v < 10; v++)
        assert_int_equal(
            rk_send(rt, k, 0, &v, sizeof(v), 128, RK_NO_WAIT), RK_OK);
    /* Paused at a safe point: nothing can have been processed. */
    assert_int_equal(rk_kernel_stats_get(rt, "k", &st), RK_OK);
    assert_int_equal(st.processed, 0);
    assert_int_equal(st.pending, 10);
    assert_int_equal(rk_recv(rt, k, NULL, &got, sizeof(got), &len, RK_NO_WAIT),
        RK_ETIMEDOUT);
    assert_int_equal(rk_kernel_activate(rt, "k"), RK_OK);
    for (v = 0; v < 10; v++) {
        assert_int_equal(
            rk_recv(rt, k, NULL, &got, sizeof(got), &len, RT_LONG), RK_OK);
        assert_int_equal(len, sizeof(got));
        assert_int_equal(got, v);
    }
    finish(rt);
}

/* ------------------------------------------------- registry, handles */

static void
test_register_and_lookup(void **state)
{
    rk_runtime *rt = make_rt(MODE_ECHO, RK_INACTIVE_QUEUE);
    rk_kernel_def def = { .id = "k", .actor = test_actor };
    rk_kernel_def bad = { .id = "both", .actor = test_actor, .handler = NULL };
    rk_kernel k;

    (void)state;
    assert_int_equal(rk_runtime_register(rt, &def), RK_EEXIST);
    bad.actor = NULL;
    assert_int_equal(rk_runtime_register(rt, &bad), RK_EINVAL);
    def.id = "other";
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "nope", &k), RK_ENOTFOUND);
    /* The detail names the kernels that do exist. */
    assert_non_null(strstr(rk_errdetail(), "'nope'"));
    assert_non_null(strstr(rk_errdetail(), "'k'"));
    assert_non_null(strstr(rk_errdetail(), "'other'"));
    assert_int_equal(rk_kernel_launch(rt, "missing"), RK_ENOTFOUND);
    assert_int_equal(
        rk_send_id(rt, "missing", 0, NULL, 0, 0, 0), RK_ENOTFOUND);
    assert_non_null(strstr(rk_errdetail(), "'other'"));
    finish(rt);
}

static void
test_static_registration(void **state)
{
    rk_runtime *rt = NULL;
    rk_kernel k;
    uint64_t v = 7, got = 0;
    size_t len;

    (void)state;
    assert_int_equal(rk_runtime_create(&rt, NULL), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "static-echo", &k), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "static-echo"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "static-echo"), RK_OK);
    assert_int_equal(rk_send(rt, k, 0, &v, sizeof(v), 128, RT_LONG), RK_OK);
    assert_int_equal(
        rk_recv(rt, k, NULL, &got, sizeof(got), &len, RT_LONG), RK_OK);
    assert_int_equal(got, 7);
    /* A second runtime gets its own copy; a duplicate there is refused. */
    {
        rk_runtime *rt2 = NULL;
        rk_kernel_def dup = { .id = "static-echo", .actor = static_actor };
        assert_int_equal(rk_runtime_create(&rt2, NULL), RK_OK);
        assert_int_equal(rk_runtime_register(rt2, &dup), RK_EEXIST);
        assert_int_equal(rt_state(rt2, "static-echo"), RK_KERNEL_CREATED);
        rk_runtime_destroy(rt2);
    }
    rk_runtime_destroy(rt);
}

static void
test_stale_handle(void **state)
{
    rk_runtime *rt = reach(RK_KERNEL_ACTIVE, RK_INACTIVE_QUEUE);
    rk_kernel old, fresh;
    uint64_t v = 1, got;
    size_t len;

    (void)state;
    assert_int_equal(rk_kernel_lookup(rt, "k", &old), RK_OK);
    assert_int_equal(rk_send(rt, old, 0, &v, sizeof(v), 128, RT_LONG), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "k", RT_LONG), RK_OK);
    assert_int_equal(
        rk_send(rt, old, 0, &v, sizeof(v), 128, RT_LONG), RK_ESTALE);
    assert_int_equal(
        rk_recv(rt, old, NULL, &got, sizeof(got), &len, 0), RK_ESTALE);
    /* A fresh look-up still reads what the ended instance left. */
    assert_int_equal(rk_kernel_lookup(rt, "k", &fresh), RK_OK);
    assert_int_equal(
        rk_recv(rt, fresh, NULL, &got, sizeof(got), &len, 0), RK_OK);
    assert_int_equal(got, 1);
    /* Relaunched: the old handle stays stale, the fresh one works. */
    assert_int_equal(rk_kernel_launch(rt, "k"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "k"), RK_OK);
    assert_int_equal(
        rk_send(rt, old, 0, &v, sizeof(v), 128, RT_LONG), RK_ESTALE);
    v = 2;
    assert_int_equal(
        rk_send(rt, fresh, 0, &v, sizeof(v), 128, RT_LONG), RK_OK);
    assert_int_equal(
        rk_recv(rt, fresh, NULL, &got, sizeof(got), &len, RT_LONG), RK_OK);
    assert_int_equal(got, 2);
    /* Garbage handles are refused, not dereferenced. */
    assert_int_equal(
        rk_send(rt, (rk_kernel) { 9999, 1 }, 0, &v, sizeof(v), 0, 0),
        RK_ESTALE);
    assert_int_equal(
        rk_send(rt, (rk_kernel) { 0, 0 }, 0, &v, sizeof(v), 0, 0), RK_ESTALE);
    finish(rt);
}

static void
test_state_names(void **state)
{
    (void)state;
    assert_string_equal(rk_kernel_state_name(RK_KERNEL_ACTIVE), "ACTIVE");
    assert_string_equal(
        rk_kernel_state_name(RK_KERNEL_TERMINATING), "TERMINATING");
    assert_string_equal(rk_kernel_state_name((rk_kernel_state)99), "UNKNOWN");
    assert_string_equal(rk_err_name(RK_ENOTLAUNCHED), "RK_ENOTLAUNCHED");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transition_table),
        cmocka_unit_test(test_deactivated_keeps_queue),
        cmocka_unit_test(test_register_and_lookup),
        cmocka_unit_test(test_static_registration),
        cmocka_unit_test(test_stale_handle),
        cmocka_unit_test(test_state_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
