/* Errors, version and clock: the base every subsystem uses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "common/common.h"
#include "ringkernel/ringkernel.h"

static void
test_err_names_and_messages(void **state)
{
    (void)state;
    assert_int_equal(RK_OK, 0);
    assert_string_equal(rk_err_name(RK_OK), "RK_OK");
    assert_string_equal(rk_err_name(RK_ETIMEDOUT), "RK_ETIMEDOUT");
    assert_string_equal(rk_strerror(RK_ETIMEDOUT), "timed out");
    assert_string_equal(rk_err_name(RK__ERR_COUNT), "RK_E?");
    assert_string_equal(rk_strerror(-1), "unknown error");
    /* Every code has a distinct, non-empty name and message. */
    for (int i = 0; i < RK__ERR_COUNT; i++) {
        assert_true(strncmp(rk_err_name(i), "RK_", 3) == 0);
        assert_true(rk_strerror(i)[0] != '\0');
        for (int j = 0; j < i; j++)
            assert_string_not_equal(rk_err_name(i), rk_err_name(j));
    }
}

static void
test_errdetail_is_per_call(void **state)
{
    (void)state;
    rk__clear_detail();
    assert_string_equal(rk_errdetail(), "");
    assert_int_equal(rk__fail(RK_ENOTFOUND, "kernel '%s'", "x"), RK_ENOTFOUND);
    assert_string_equal(rk_errdetail(), "kernel 'x'");
}

static void
test_version_matches_header(void **state)
{
    (void)state;
    char want[32];
    snprintf(want, sizeof(want), "%d.%d.%d", RK_VERSION_MAJOR,
             RK_VERSION_MINOR, RK_VERSION_PATCH);
    assert_string_equal(rk_version(), want);
    assert_int_equal(rk_version_number(), RK_VERSION_NUMBER);
}

static void
test_clock_is_monotonic(void **state)
{
    (void)state;
    uint64_t a = rk_now_ns();
    uint64_t b = rk_now_ns();
    assert_true(b >= a);
    assert_int_equal(rk__deadline(RK_WAIT_FOREVER), UINT64_MAX);
    assert_true(rk__deadline(RK_NO_WAIT) >= b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_err_names_and_messages),
        cmocka_unit_test(test_errdetail_is_per_call),
        cmocka_unit_test(test_version_matches_header),
        cmocka_unit_test(test_clock_is_monotonic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
