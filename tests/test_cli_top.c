/*
 * tests/test_cli_top.c - `ringkernel top` against a live metrics endpoint.
 *
 * The test serves metrics for a runtime whose kernel has processed a known
 * number of messages and ended (so the figures are final), runs the
 * installed-style binary with popen, and checks what it printed: one
 * table with --once; in the live mode, frames until the test sends q on
 * stdin or SIGINT (Ctrl-C), after either of which it must exit 0.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* Complete worker rows (ended by a newline) in text. */
static int
complete_rows(const char *text)
{
    int n = 0;

    for (const char *p = text; (p = strstr(p, "\nworker ")) != NULL; p++)
        n += strchr(p + 1, '\n') != NULL;
    return n;
}

/*
 * Runs `top --interval 0.05` with pipes for stdin and stdout, reads until
 * two frames are complete, then sends q (sig 0) or the signal sig, and
 * checks that top exits 0 and that the second frame has a rate.
 */
static void
live(uint16_t port, int sig)
{
    int in[2], out[2], st;
    char portarg[32], buf[1 << 16] = "";
    size_t len = 0;
    ssize_t n;
    pid_t pid;

    assert_int_equal(pipe(in), 0);
    assert_int_equal(pipe(out), 0);
    snprintf(portarg, sizeof(portarg), "127.0.0.1:%u", (unsigned)port);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        dup2(out[1], 2);
        close(in[1]);
        close(out[0]);
        execl(RK_CLI_PATH, RK_CLI_PATH, "top", "--interval", "0.05", "--addr",
            portarg, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    while (complete_rows(buf) < 2 && len < sizeof(buf) - 1) {
        n = read(out[0], buf + len, sizeof(buf) - 1 - len);
        assert_true(n > 0);
        len += (size_t)n;
        buf[len] = '\0';
    }
    if (sig)
        assert_int_equal(kill(pid, sig), 0);
    else
        assert_int_equal(write(in[1], "q\n", 2), 2);
    while (len < sizeof(buf) - 1
        && (n = read(out[0], buf + len, sizeof(buf) - 1 - len)) > 0)
        len += (size_t)n;
    buf[len] = '\0';
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    close(in[1]);
    close(out[0]);
    /* The first frame has no rate yet; the second has the ended
     * kernel's: 0. */
    const char *p = strstr(buf, "ringkernel top - ");
    assert_non_null(p);
    check_row(p, "-");
    assert_non_null(p = strstr(p + 1, "ringkernel top - "));
    check_row(p, "0");
}

static void
test_top(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "worker", .handler = count_handler };
    rk_metrics *m;
    uint64_t v = 1;
    char cmd[512], *out;

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

    /* Live mode: quits on q (here from a pipe) and on Ctrl-C (SIGINT),
     * each after two frames, with exit status 0. */
    live(rk_metrics_port(m), 0);
    live(rk_metrics_port(m), SIGINT);

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
