/* The compile-time switch: a translation unit built with RK_TELEMETRY=0
 * gets no-op histogram recording and a constant-false telemetry gate. (The
 * whole build is switched with CFLAGS=-DRK_TELEMETRY=0; this test checks
 * the effect on one file.) */
#define RK_TELEMETRY 0

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h> /* after setjmp.h, stdarg.h and stddef.h */

#include "ringkernel/ringkernel.h"
#include "telemetry/stats.h"

static void
test_record_is_a_no_op(void **state)
{
    (void)state;
    rk__hist *h = calloc(1, sizeof(*h));
    assert_non_null(h);
    rk__hist_record(h, 100);
    rk__hist_record_mw(h, 200);
    rk_latency_summary s;
    rk__hist_summary(h, &s);
    assert_int_equal(s.count, 0);
    assert_int_equal(s.max_ns, 0);
    free(h);
}

static int gate_evaluations;

static int
flag_with_side_effect(void)
{
    gate_evaluations++;
    return 1;
}

static void
test_gate_is_constant_false(void **state)
{
    (void)state;
    int work = 0;
    if (rk__telemetry_on(1))
        work++;
    /* The flag expression is still evaluated once (it may be a load the
     * caller relies on), but the gated code never runs. */
    if (rk__telemetry_on(flag_with_side_effect()))
        work++;
    assert_int_equal(work, 0);
    assert_int_equal(gate_evaluations, 1);

    /* Counters are not telemetry-gated: they carry the object's state. */
    rk__counter c = 0;
    rk__counter_add(&c, 2);
    assert_int_equal(rk__counter_get(&c), 2);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_is_a_no_op),
        cmocka_unit_test(test_gate_is_constant_false),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
