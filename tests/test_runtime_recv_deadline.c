/*
 * Every host call honours its own deadline (issue 10, defect 3): while one
 * receiver holds a kernel's output (blocked in rk_recv with no deadline),
 * a second rk_recv or rk_request with a short timeout returns
 * RK_ETIMEDOUT, and one with RK_NO_WAIT returns at once. Today the second
 * caller waits on the output lock until the first one leaves, which here
 * is never (ctest's timeout reports the hang). No test asserts on time:
 * each only needs the call to come back with RK_ETIMEDOUT.
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

#define MS INT64_C(1000000)

typedef struct fixture {
    rk_runtime *rt;
    rk_kernel k;
    rt_call holder; /* blocked in rk_recv, RK_WAIT_FOREVER */
} fixture;

static void
setup_holder(fixture *f)
{
    rk_kernel_def def = { .id = "gated", .actor = rt_gated_actor };

    f->rt = rt_new_runtime();
    assert_int_equal(rk_runtime_register(f->rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(f->rt, "gated"), RK_OK);
    assert_int_equal(rk_kernel_activate(f->rt, "gated"), RK_OK);
    assert_int_equal(rk_kernel_lookup(f->rt, "gated", &f->k), RK_OK);
    f->holder = (rt_call) { .fn = rt_call_recv,
        .rt = f->rt,
        .k = f->k,
        .timeout_ns = RK_WAIT_FOREVER };
    assert_int_equal(rt_call_start(&f->holder), 0);
    assert_true(rt_call_wait_blocked(&f->holder));
}

/* Lets the holder have its message, and checks it got it. */
static void
release_holder(fixture *f)
{
    assert_int_equal(rk_send(f->rt, f->k, 0, "go", 2, 128, RT_LONG), RK_OK);
    assert_int_equal(rt_call_join(&f->holder), RK_OK);
    assert_int_equal(f->holder.len, 2);
    assert_memory_equal(f->holder.buf, "go", 2);
    rk_runtime_destroy(f->rt);
}

static void
test_second_receiver_times_out(void **state)
{
    fixture f;
    char buf[8];
    size_t len;

    (void)state;
    setup_holder(&f);
    assert_int_equal(
        rk_recv(f.rt, f.k, NULL, buf, sizeof(buf), &len, 100 * MS),
        RK_ETIMEDOUT);
    assert_non_null(strstr(rk_errdetail(), "'gated'"));
    release_holder(&f);
}

static void
test_second_receiver_no_wait(void **state)
{
    fixture f;
    char buf[8];
    size_t len;

    (void)state;
    setup_holder(&f);
    assert_int_equal(
        rk_recv(f.rt, f.k, NULL, buf, sizeof(buf), &len, RK_NO_WAIT),
        RK_ETIMEDOUT);
    assert_int_equal(
        rk_recv_id(f.rt, "gated", NULL, buf, sizeof(buf), &len, RK_NO_WAIT),
        RK_ETIMEDOUT);
    release_holder(&f);
}

/* The request goes in (the kernel takes it and does not answer), and the
 * wait for its reply ends at the requester's own deadline. */
static void
test_request_times_out_while_held(void **state)
{
    fixture f;
    char buf[8];
    size_t len;

    (void)state;
    setup_holder(&f);
    assert_int_equal(rk_request(f.rt, f.k, 0, "no", 2, NULL, buf, sizeof(buf),
                         &len, 100 * MS),
        RK_ETIMEDOUT);
    release_holder(&f);
}

/* Several short receivers behind one holder all come back. */
static void
test_many_short_receivers(void **state)
{
    fixture f;
    rt_call c[3];

    (void)state;
    setup_holder(&f);
    for (int i = 0; i < 3; i++) {
        c[i] = (rt_call) { .fn = rt_call_recv,
            .rt = f.rt,
            .k = f.k,
            .timeout_ns = (i + 1) * 50 * MS };
        assert_int_equal(rt_call_start(&c[i]), 0);
    }
    for (int i = 0; i < 3; i++)
        assert_int_equal(rt_call_join(&c[i]), RK_ETIMEDOUT);
    release_holder(&f);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_second_receiver_times_out),
        cmocka_unit_test(test_second_receiver_no_wait),
        cmocka_unit_test(test_request_times_out_while_held),
        cmocka_unit_test(test_many_short_receivers),
    };
    rt_test_filter();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
