/*
 * tests/test_cli_top.c - `ringkernel top` against a live metrics endpoint.
 *
 * The test serves metrics for a runtime whose kernel has processed a known
 * number of messages and ended (so the figures are final), runs the
 * installed-style binary with popen, and checks what it printed: one
 * table with --once, and repeated frames until SIGINT in the live mode,
 * after which it must exit 0 (quits cleanly on Ctrl-C).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

#ifndef RK_CLI_PATH
#define RK_CLI_PATH "ringkernel" /* the test is disabled in this build */
#endif

#define N_MSGS 500

static int
count_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    (void)ctx;
    (void)m;
    return RK_OK;
}

/* Runs cmd, returns its exit status and its output (caller frees). */
static int
run(const char *cmd, char **out)
{
    FILE *p = popen(cmd, "r");
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    size_t n;
    int st;

    assert_non_null(p);
    assert_non_null(buf);
    while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += n;
        if (cap - len < 2) {
            cap *= 2;
            assert_non_null(buf = realloc(buf, cap));
        }
    }
    buf[len] = '\0';
    st = pclose(p);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The worker's row of a frame: "worker  TERMINATED  500 ...". */
static void
check_row(const char *text, const char *rate)
{
    const char *row = strstr(text, "\nworker ");
    char id[32], state[32], rt[32];
    double processed, queue, hwm;

    assert_non_null(row);
    assert_int_equal(sscanf(row + 1, "%31s %31s %lf %31s %lf %lf", id, state,
                         &processed, rt, &queue, &hwm),
        6);
    assert_string_equal(state, "TERMINATED");
    assert_true(processed == N_MSGS);
    assert_true(queue == 0);
    assert_true(hwm >= 1);
    if (rate)
        assert_string_equal(rt, rate);
}

static void
test_top(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "worker", .handler = count_handler };
    rk_metrics *m;
    uint64_t v = 1;
    char cmd[512], *out;
    const char *p;
    int frames = 0;

    (void)state;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "worker"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "worker"), RK_OK);
    for (int i = 0; i < N_MSGS; i++)
        assert_int_equal(
            rk_send_id(rt, "worker", 0, &v, sizeof(v), 128, RT_LONG), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "worker", RT_LONG), RK_OK);
    assert_int_equal(rk_metrics_serve(rt, "127.0.0.1:0", &m), RK_OK);

    snprintf(cmd, sizeof(cmd), "%s top --once --addr 127.0.0.1:%u 2>&1",
        RK_CLI_PATH, (unsigned)rk_metrics_port(m));
    assert_int_equal(run(cmd, &out), 0);
    assert_non_null(strstr(out, "1 kernel(s)"));
    check_row(out, "-"); /* one scrape: no rate yet */
    free(out);

    /* Live mode until SIGINT: several frames, then exit status 0. */
    snprintf(cmd, sizeof(cmd),
        "timeout --preserve-status -s INT 2 %s top --interval 0.1 "
        "--addr 127.0.0.1:%u </dev/null 2>&1",
        RK_CLI_PATH, (unsigned)rk_metrics_port(m));
    assert_int_equal(run(cmd, &out), 0);
    for (p = out; (p = strstr(p, "ringkernel top - ")) != NULL; p++)
        frames++;
    assert_true(frames >= 2);
    /* The first frame has no rate yet; from the second on, the rate of
     * the ended kernel is 0. */
    p = strstr(out, "ringkernel top - ");
    check_row(p, "-");
    check_row(strstr(p + 1, "ringkernel top - "), "0");
    free(out);

    rk_metrics_destroy(m);
    rk_runtime_destroy(rt);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_top),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
