/*
 * tests/support/bad_input.h - the bad-input table's row type and runner,
 * shared by test_bad_input (message.h), test_bad_input_queue (queue.h,
 * telemetry.h) and test_bad_input_objects (buffer.h, pool.h, device.h,
 * clock.h, error.h, log.h, version.h). Header-only; one copy per program.
 *
 * A row is one call (or a few on one object) and the code it must return;
 * every error must leave a detail (rk_errdetail()).
 */
#ifndef RK_TEST_BAD_INPUT_H
#define RK_TEST_BAD_INPUT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "common/common.h"
#include "ringkernel/ringkernel.h"

#define ANY_ERROR (-1) /* any RK_E* code, not RK_OK */
#define WRONG     RK_EINTERNAL

struct row {
    const char *name;
    int (*call)(void);
    int want;
};

#define ROW(fn, want)                                                         \
    {                                                                         \
#fn, fn, want                                                         \
    }

static inline void
run_row(void **state)
{
    const struct row *r = *state;
    int rc;

    rk__clear_detail();
    rc = r->call();

    if (r->want == ANY_ERROR) {
        if (rc == RK_OK || rc == WRONG)
            fail_msg(
                "%s: returned %s, want an error", r->name, rk_err_name(rc));
    } else if (rc != r->want) {
        fail_msg("%s: returned %s (%s), want %s", r->name, rk_err_name(rc),
            rk_errdetail(), rk_err_name(r->want));
    }
    /* Every error leaves a detail. */
    if (rc != RK_OK && rc != WRONG && rk_errdetail()[0] == '\0')
        fail_msg("%s: %s without a detail", r->name, rk_err_name(rc));
}

/* Runs each of rows[0..n) as one cmocka test of the group; returns
 * cmocka's count of failed tests (1 if the table cannot be allocated). */
static inline int
run_rows(const char *group, const struct row *rows, size_t n)
{
    struct CMUnitTest *tests = calloc(n, sizeof(*tests));
    int failed;

    if (tests == NULL)
        return 1;
    for (size_t i = 0; i < n; i++) {
        tests[i] = (struct CMUnitTest) { rows[i].name, run_row, NULL, NULL,
            (void *)(uintptr_t)&rows[i] };
    }
    failed = _cmocka_run_group_tests(group, tests, n, NULL, NULL);
    free(tests);
    return failed;
}

#endif /* RK_TEST_BAD_INPUT_H */
