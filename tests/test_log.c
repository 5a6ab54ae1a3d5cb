/* The log callback (ringkernel/log.h): quiet by default, levels, user
 * pointer, truncation, switching it off. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/common.h"
#include "ringkernel/ringkernel.h"

struct seen {
    int calls;
    rk_log_level level;
    char msg[1024];
};

static void
record(rk_log_level level, const char *msg, void *user)
{
    struct seen *s = user;

    s->calls++;
    s->level = level;
    snprintf(s->msg, sizeof(s->msg), "%s", msg);
}

static int
reset(void **state)
{
    (void)state;
    rk_set_log(NULL, NULL);
    return rk_set_log_level(RK_LOG_INFO);
}

/* Without a callback nothing reaches stderr (or anywhere). */
static void
test_default_is_quiet(void **state)
{
    char path[] = "/tmp/rk_test_log_XXXXXX";
    int fd = mkstemp(path), saved;
    off_t size;

    (void)state;
    assert_true(fd >= 0);
    unlink(path);
    fflush(stderr);
    saved = dup(2);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fd, 2), 2);
    rk__log(RK_LOG_ERROR, "should go nowhere %d", 1);
    rk__log(RK_LOG_WARN, "nor this");
    fflush(stderr);
    assert_int_equal(dup2(saved, 2), 2);
    close(saved);
    size = lseek(fd, 0, SEEK_END);
    close(fd);
    assert_int_equal(size, 0);
}

static void
test_callback_levels_and_user(void **state)
{
    struct seen s = { 0 };

    (void)state;
    rk_set_log(record, &s);
    rk__log(RK_LOG_WARN, "kernel '%s' did not end", "k1");
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.level, RK_LOG_WARN);
    assert_string_equal(s.msg, "kernel 'k1' did not end");
    /* Below the default level (info): not delivered. */
    rk__log(RK_LOG_DEBUG, "noise");
    assert_int_equal(s.calls, 1);
    assert_false(rk__log_enabled(RK_LOG_DEBUG));
    assert_int_equal(rk_set_log_level(RK_LOG_DEBUG), RK_OK);
    assert_true(rk__log_enabled(RK_LOG_DEBUG));
    rk__log(RK_LOG_DEBUG, "now %s", "heard");
    assert_int_equal(s.calls, 2);
    assert_string_equal(s.msg, "now heard");
    /* Fatal always passes the filter. */
    assert_int_equal(rk_set_log_level(RK_LOG_FATAL), RK_OK);
    rk__log(RK_LOG_ERROR, "filtered");
    assert_int_equal(s.calls, 2);
    rk__log(RK_LOG_FATAL, "fatal");
    assert_int_equal(s.calls, 3);
    assert_int_equal(s.level, RK_LOG_FATAL);
    /* Switched off again. */
    rk_set_log(NULL, &s);
    rk__log(RK_LOG_FATAL, "gone");
    assert_int_equal(s.calls, 3);
}

static void
test_long_message_truncated(void **state)
{
    struct seen s = { 0 };
    char big[2000];

    (void)state;
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    rk_set_log(record, &s);
    rk__log(RK_LOG_ERROR, "%s", big);
    assert_int_equal(s.calls, 1);
    assert_int_equal(strlen(s.msg), 511);
}

static void
test_levels_named_and_checked(void **state)
{
    (void)state;
    assert_string_equal(rk_log_level_name(RK_LOG_DEBUG), "debug");
    assert_string_equal(rk_log_level_name(RK_LOG_WARN), "warn");
    assert_string_equal(rk_log_level_name(RK_LOG_FATAL), "fatal");
    assert_string_equal(rk_log_level_name((rk_log_level)42), "?");
    assert_int_equal(rk_set_log_level((rk_log_level)5), RK_EINVAL);
    assert_int_equal(rk_set_log_level((rk_log_level)-1), RK_EINVAL);
    assert_true(strstr(rk_errdetail(), "RK_LOG_DEBUG") != NULL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_default_is_quiet, reset),
        cmocka_unit_test_setup(test_callback_levels_and_user, reset),
        cmocka_unit_test_setup(test_long_message_truncated, reset),
        cmocka_unit_test_setup(test_levels_named_and_checked, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
