/*
 * tests/test_metrics_nohttp.c - the metrics API in a build without
 * libmicrohttpd. This program links its own copy of src/metrics/http.c
 * compiled without RK_HAVE_MHD (tests/CMakeLists.txt), which takes the
 * place of the library's, so the no-endpoint path is checked in every
 * build: the listen calls refuse with RK_ENOTSUP and say how to enable the
 * endpoint, nothing is left running, and rendering still works.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

static void
test_no_endpoint(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_metrics *m = (rk_metrics *)1;
    char *text;

    (void)state;
    assert_false(rk_metrics_http_available());
    assert_int_equal(rk_metrics_serve(rt, NULL, &m), RK_ENOTSUP);
    assert_null(m);
    assert_non_null(strstr(rk_errdetail(), "libmicrohttpd-dev"));
    setenv(RK_METRICS_ENV, "127.0.0.1:9464", 1);
    assert_int_equal(rk_metrics_serve_env(rt, &m), RK_ENOTSUP);
    assert_null(m);
    unsetenv(RK_METRICS_ENV);
    assert_int_equal(rk_metrics_serve_env(rt, &m), RK_OK);
    assert_null(m);

    assert_int_equal(rk_metrics_create(&m, rt, NULL), RK_OK);
    /* A malformed address is still reported as such first. */
    assert_int_equal(rk_metrics_listen(m, "nonsense"), RK_EINVAL);
    assert_int_equal(rk_metrics_listen(m, "127.0.0.1:0"), RK_ENOTSUP);
    assert_int_equal(rk_metrics_port(m), 0);
    assert_int_equal(
        rk_metrics_render(m, RK_METRICS_PROMETHEUS, &text, NULL), RK_OK);
    assert_non_null(strstr(text, "ringkernel_kernels 0\n"));
    free(text);
    rk_metrics_destroy(m);
    rk_runtime_destroy(rt);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_endpoint),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
