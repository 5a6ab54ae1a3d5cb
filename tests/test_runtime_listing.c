/*
 * rk_runtime_kernel_ids and rk_runtime_topic_names: what tools (the metrics
 * endpoint, `ringkernel top`) use to find what exists.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "rt_helpers.h"

static int
nop_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    (void)ctx;
    (void)m;
    return RK_OK;
}

static void
test_kernel_ids(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    char ids[2][RK_ID_MAX + 1];
    static const char *const names[] = { "alpha", "beta", "gamma" };
    size_t n = 99;
    (void)state;

    assert_int_equal(rk_runtime_kernel_ids(rt, NULL, 0, &n), RK_OK);
    assert_int_equal(n, 0);
    for (int i = 0; i < 3; i++) {
        rk_kernel_def def = { .id = names[i], .handler = nop_handler };
        assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    }
    /* Room for two of three: two copied, three counted. */
    assert_int_equal(rk_runtime_kernel_ids(rt, ids, 2, &n), RK_OK);
    assert_int_equal(n, 3);
    assert_string_equal(ids[0], "alpha");
    assert_string_equal(ids[1], "beta");
    assert_int_equal(rk_runtime_kernel_ids(rt, NULL, 1, &n), RK_EINVAL);
    assert_int_equal(rk_runtime_kernel_ids(NULL, ids, 2, &n), RK_EINVAL);
    assert_int_equal(rk_runtime_kernel_ids(rt, ids, 2, NULL), RK_EINVAL);
    rk_runtime_destroy(rt);
}

static void
test_topic_names(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "sub", .handler = nop_handler };
    char names[4][RK_ID_MAX + 1];
    size_t n = 99;
    (void)state;

    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_runtime_topic_names(rt, names, 4, &n), RK_OK);
    assert_int_equal(n, 0);
    assert_int_equal(rk_subscribe(rt, "sub", "prices"), RK_OK);
    assert_int_equal(rk_subscribe(rt, "sub", "alerts"), RK_OK);
    assert_int_equal(rk_runtime_topic_names(rt, names, 4, &n), RK_OK);
    assert_int_equal(n, 2);
    assert_true((strcmp(names[0], "prices") == 0
                    && strcmp(names[1], "alerts") == 0)
        || (strcmp(names[0], "alerts") == 0
            && strcmp(names[1], "prices") == 0));
    assert_int_equal(rk_runtime_topic_names(rt, NULL, 0, &n), RK_OK);
    assert_int_equal(n, 2);
    assert_int_equal(rk_runtime_topic_names(NULL, names, 4, &n), RK_EINVAL);
    rk_runtime_destroy(rt);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_ids),
        cmocka_unit_test(test_topic_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
