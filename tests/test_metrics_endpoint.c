/*
 * tests/test_metrics_endpoint.c - the metrics endpoint over real HTTP.
 *
 * A runtime processes a known number of messages, a kernel fails under
 * supervision, a topic fans out; the test then scrapes /metrics over
 * loopback with a plain socket client, checks every line with a small
 * Prometheus text-format (0.0.4) parser, and compares names, labels and
 * values with the runtime's own telemetry (rk_kernel_stats_get,
 * rk_topic_stats_get) taken after the kernels have ended, so the figures
 * cannot move in between. It also checks /stats.json, the 404/405/oversize
 * answers, a scrape loop, and the error paths of the API.
 */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "http_client.h"
#include "prom_text.h"
#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

#define N_MSGS 1000
#define WEIRD  "we\"ird\\id" /* a kernel id that needs label escaping */

/* ------------------------------------------------------------ runtime */

static int
count_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    (void)ctx;
    (void)m;
    return RK_OK;
}

static int
failing_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    (void)ctx;
    (void)m;
    return RK_EINTERNAL;
}

typedef struct fixture {
    rk_runtime *rt;
    rk_metrics *m;
    uint16_t port;
} fixture;

static void
reg(rk_runtime *rt, const char *id, rk_handler_fn fn, rk_supervision sup)
{
    rk_kernel_def def = { .id = id, .handler = fn };

    def.config.supervision = sup;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, id), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, id), RK_OK);
}

/*
 * worker: N_MSGS messages, then terminated (drained, figures final).
 * faulty: fails on each message; restarts once, then gives up (FAILED).
 * WEIRD:  active and idle, subscribed to topic "news" (3 publishes).
 */
static int
setup(void **state)
{
    static fixture f;
    static const char *const topics[] = { "news", "absent", NULL };
    rk_metrics_config mc = { .topics = topics };
    rk_supervision none = { 0 };
    rk_supervision restart_once
        = { .policy = RK_SUPERVISE_RESTART, .max_restarts = 1 };
    uint64_t payload = 7;
    size_t delivered = 0;

    f.rt = rt_new_runtime();
    reg(f.rt, "worker", count_handler, none);
    reg(f.rt, "faulty", failing_handler, restart_once);
    reg(f.rt, WEIRD, count_handler, none);
    assert_int_equal(rk_subscribe(f.rt, WEIRD, "news"), RK_OK);
    for (int i = 0; i < N_MSGS; i++)
        assert_int_equal(rk_send_id(f.rt, "worker", 0, &payload,
                             sizeof(payload), 128, RT_LONG),
            RK_OK);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(rk_publish(f.rt, "news", 0, &payload, sizeof(payload),
                             128, RT_LONG, &delivered),
            RK_OK);
        assert_int_equal(delivered, 1);
    }
    /* WEIRD idle before anything is scraped: its 3 messages handled, and
     * a pause (which returns once the kernel is at its next receive,
     * where the batch's latencies are booked) and a resume, so that its
     * figures no longer move between the scrape and the comparison. */
    assert_int_equal(rt_wait_processed(f.rt, WEIRD, 3), 3);
    assert_int_equal(rk_kernel_deactivate(f.rt, WEIRD), RK_OK);
    assert_int_equal(rk_kernel_activate(f.rt, WEIRD), RK_OK);
    assert_int_equal(rk_kernel_terminate(f.rt, "worker", RT_LONG), RK_OK);
    /* Two failures: the first restarts the kernel, the second ends it. */
    for (int i = 0; i < 2; i++)
        (void)rk_send_id(
            f.rt, "faulty", 0, &payload, sizeof(payload), 128, RT_LONG);
    assert_int_equal(rk_kernel_wait(f.rt, "faulty", RT_LONG), RK_OK);

    assert_int_equal(rk_metrics_create(&f.m, f.rt, &mc), RK_OK);
    assert_int_equal(rk_metrics_listen(f.m, "127.0.0.1:0"), RK_OK);
    f.port = rk_metrics_port(f.m);
    assert_true(f.port != 0);
    *state = &f;
    return 0;
}

static int
teardown(void **state)
{
    fixture *f = *state;

    rk_metrics_destroy(f->m);
    rk_runtime_destroy(f->rt);
    return 0;
}

static void
scrape(fixture *f, exposition *e)
{
    http_reply r;

    assert_int_equal(http_req(f->port, "GET", "/metrics", &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.head, "text/plain; version=0.0.4"));
    parse_exposition(r.body, e);
    http_free(&r);
}

/* The exposition prints scaled values with 15 significant digits. */
static void
assert_close(double got, double want, double abs_tol)
{
    if (!(fabs(got - want) <= abs_tol + 1e-8 * fabs(want)))
        fail_msg("%.17g is not %.17g", got, want);
}

/* Every per-kernel counter and gauge equals the runtime's own figure. */
static void
check_kernel(
    const exposition *e, rk_runtime *rt, const char *id, const char *label)
{
    rk_kernel_stats st;
    char l[160], lq[200];

    assert_int_equal(rk_kernel_stats_get(rt, id, &st), RK_OK);
    snprintf(l, sizeof(l), "kernel=\"%s\"", id);
    assert_string_equal(l, label);
    assert_true(
        get(e, "ringkernel_messages_offered_total", l) == (double)st.offered);
    assert_true(get(e, "ringkernel_messages_processed_total", l)
        == (double)st.processed);
    assert_true(
        get(e, "ringkernel_messages_dropped_total", l) == (double)st.dropped);
    assert_true(get(e, "ringkernel_messages_rejected_total", l)
        == (double)st.rejected);
    assert_true(
        get(e, "ringkernel_messages_sent_total", l) == (double)st.sent);
    assert_true(get(e, "ringkernel_dead_letters_total", l)
        == (double)st.dead_lettered);
    assert_true(
        get(e, "ringkernel_kernel_errors_total", l) == (double)st.errors);
    assert_true(
        get(e, "ringkernel_kernel_restarts_total", l) == (double)st.restarts);
    assert_true(get(e, "ringkernel_queue_depth", l) == (double)st.queue_depth);
    assert_true(get(e, "ringkernel_queue_high_water", l)
        == (double)st.queue_high_water);
    assert_true(get(e, "ringkernel_message_latency_seconds_count", l)
        == (double)st.latency_count);
    snprintf(lq, sizeof(lq), "%s,quantile=\"0.5\"", l);
    assert_close(get(e, "ringkernel_message_latency_seconds", lq),
        (double)st.latency_p50_ns * 1e-9, 1e-15);
    snprintf(lq, sizeof(lq), "%s,quantile=\"0.99\"", l);
    assert_close(get(e, "ringkernel_message_latency_seconds", lq),
        (double)st.latency_p99_ns * 1e-9, 1e-15);
    assert_close(get(e, "ringkernel_message_latency_max_seconds", l),
        (double)st.latency_max_ns * 1e-9, 1e-15);
    for (int s = 0; s < RK__KERNEL_STATE_COUNT; s++) {
        snprintf(lq, sizeof(lq), "%s,state=\"%s\"", l,
            rk_kernel_state_name((rk_kernel_state)s));
        assert_true(get(e, "ringkernel_kernel_state", lq)
            == (s == (int)st.state ? 1.0 : 0.0));
    }
}

static void
test_metrics_match_telemetry(void **state)
{
    fixture *f = *state;
    exposition e;
    rk_topic_stats ts;

    scrape(f, &e);
    /* Known figures first, so a renderer that printed the snapshot's
     * values under the wrong names would still fail. */
    assert_true(
        get(&e, "ringkernel_messages_processed_total", "kernel=\"worker\"")
        == N_MSGS);
    assert_true(get(&e, "ringkernel_kernel_state",
                    "kernel=\"worker\",state=\"TERMINATED\"")
        == 1);
    assert_true(get(&e, "ringkernel_kernel_state",
                    "kernel=\"faulty\",state=\"FAILED\"")
        == 1);
    assert_true(
        get(&e, "ringkernel_kernel_restarts_total", "kernel=\"faulty\"") == 1);
    assert_true(
        get(&e, "ringkernel_dead_letters_total", "kernel=\"faulty\"") >= 1);
    /* The runtime times one send in latency_sample per thread, so the
     * count is at most the messages and at least one; check_kernel
     * compares it with the runtime's own figure exactly. */
    double lc = get(
        &e, "ringkernel_message_latency_seconds_count", "kernel=\"worker\"");
    if (lc < 1 || lc > N_MSGS)
        fail_msg("latency count %.0f of %d messages", lc, N_MSGS);
    if (lc != N_MSGS)
        print_message("note: latency count %.0f of %d messages\n", lc, N_MSGS);
    assert_true(get(&e, "ringkernel_kernels", "") == 3);
    check_kernel(&e, f->rt, "worker", "kernel=\"worker\"");
    check_kernel(&e, f->rt, "faulty", "kernel=\"faulty\"");
    /* The label parser unescaped the id, so it matches the real one. */
    check_kernel(&e, f->rt, WEIRD, "kernel=\"" WEIRD "\"");

    assert_int_equal(rk_topic_stats_get(f->rt, "news", &ts), RK_OK);
    assert_true(
        get(&e, "ringkernel_topic_published_total", "topic=\"news\"") == 3);
    assert_true(get(&e, "ringkernel_topic_delivered_total", "topic=\"news\"")
        == (double)ts.delivered);
    assert_true(
        get(&e, "ringkernel_topic_subscribers", "topic=\"news\"") == 1);
    /* A named topic that does not exist is left out, not invented. */
    assert_false(
        has(&e, "ringkernel_topic_published_total", "topic=\"absent\""));
    /* No NVML here unless there is a GPU; the gauge says which. */
    double avail = get(&e, "ringkernel_gpu_monitor_available", "");
    assert_true(avail == 0 || avail == 1);
    assert_true(get(&e, "ringkernel_build_info", "version=\"0.1.0\"") == 1);
    free(e.s);
}

static void
test_stats_json(void **state)
{
    fixture *f = *state;
    http_reply r;
    char want[96];

    assert_int_equal(http_req(f->port, "GET", "/stats.json", &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.head, "application/json"));
    assert_true(r.body[0] == '{');
    snprintf(want, sizeof(want),
        "{\"id\":\"worker\",\"state\":\"TERMINATED\",\"offered\":%d,"
        "\"processed\":%d,",
        N_MSGS, N_MSGS);
    assert_non_null(strstr(r.body, want));
    assert_non_null(strstr(r.body, "{\"id\":\"we\\\"ird\\\\id\""));
    assert_non_null(strstr(r.body, "{\"name\":\"news\",\"published\":3,"));
    /* Balanced braces and brackets outside strings: one whole object. */
    int depth = 0, in_str = 0;
    for (const char *p = r.body; *p; p++) {
        if (in_str) {
            if (*p == '\\')
                p++;
            else if (*p == '"')
                in_str = 0;
            continue;
        }
        if (*p == '"')
            in_str = 1;
        else if (*p == '{' || *p == '[')
            depth++;
        else if (*p == '}' || *p == ']')
            assert_true(--depth >= 0);
    }
    assert_int_equal(depth, 0);
    http_free(&r);
}

static void
test_bad_requests(void **state)
{
    fixture *f = *state;
    http_reply r;
    size_t big = 64 * 1024;
    char *req;

    assert_int_equal(http_req(f->port, "GET", "/nope", &r), 0);
    assert_int_equal(r.status, 404);
    http_free(&r);
    assert_int_equal(http_req(f->port, "POST", "/metrics", &r), 0);
    assert_int_equal(r.status, 405);
    assert_non_null(strstr(r.head, "Allow: GET, HEAD"));
    http_free(&r);
    assert_int_equal(http_req(f->port, "DELETE", "/stats.json", &r), 0);
    assert_int_equal(r.status, 405);
    http_free(&r);
    assert_int_equal(http_req(f->port, "HEAD", "/metrics", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 0);
    http_free(&r);

    /* A request head far over max_request (8 KiB) is refused. */
    assert_non_null(req = malloc(big + 128));
    int n = snprintf(req, 128, "GET /metrics HTTP/1.1\r\nX-Big: ");
    memset(req + n, 'a', big);
    memcpy(req + n + big, "\r\n\r\n", 5);
    if (http_raw(f->port, req, (size_t)n + big + 4, &r) == 0) {
        assert_true(r.status == 431 || r.status == 414 || r.status == 413
            || r.status == 400);
        http_free(&r);
    } /* else: the server closed without answering, also a refusal */
    free(req);
    /* The endpoint still serves afterwards. */
    assert_int_equal(http_req(f->port, "GET", "/metrics", &r), 0);
    assert_int_equal(r.status, 200);
    http_free(&r);
}

static void
test_scrape_loop(void **state)
{
    fixture *f = *state;

    /* Scraping in a loop: every answer complete and identical in shape
     * (the figures are final, so the text is identical too). */
    http_reply first;
    assert_int_equal(http_req(f->port, "GET", "/metrics", &first), 0);
    for (int i = 0; i < 200; i++) {
        http_reply r;
        assert_int_equal(http_req(f->port, "GET", "/metrics", &r), 0);
        assert_int_equal(r.status, 200);
        /* Uptime and CPU time of the active kernel move; line count does
         * not. */
        size_t a = 0, b = 0;
        for (const char *p = r.body; *p; p++)
            a += *p == '\n';
        for (const char *p = first.body; *p; p++)
            b += *p == '\n';
        assert_int_equal(a, b);
        http_free(&r);
    }
    http_free(&first);
}

static void
test_render_and_kernel_list(void **state)
{
    fixture *f = *state;
    static const char *const only[] = { "worker", "nosuch", NULL };
    rk_metrics_config mc = { .kernels = only, .no_gpu_monitor = true };
    rk_metrics *m;
    char *text;
    size_t len;
    exposition e;

    assert_int_equal(rk_metrics_create(&m, f->rt, &mc), RK_OK);
    assert_int_equal(
        rk_metrics_render(m, RK_METRICS_PROMETHEUS, &text, &len), RK_OK);
    assert_int_equal(strlen(text), len);
    parse_exposition(text, &e);
    assert_true(get(&e, "ringkernel_kernels", "") == 1);
    assert_true(
        get(&e, "ringkernel_messages_processed_total", "kernel=\"worker\"")
        == N_MSGS);
    assert_false(
        has(&e, "ringkernel_messages_processed_total", "kernel=\"faulty\""));
    assert_true(get(&e, "ringkernel_gpu_monitor_available", "") == 0);
    free(e.s);
    free(text);
    /* Topics added later show up; a second add is a no-op. */
    assert_int_equal(rk_metrics_add_topic(m, "news"), RK_OK);
    assert_int_equal(rk_metrics_add_topic(m, "news"), RK_OK);
    assert_int_equal(
        rk_metrics_render(m, RK_METRICS_PROMETHEUS, &text, NULL), RK_OK);
    parse_exposition(text, &e);
    assert_true(
        get(&e, "ringkernel_topic_published_total", "topic=\"news\"") == 3);
    free(e.s);
    free(text);
    assert_int_equal(
        rk_metrics_render(m, (rk_metrics_format)9, &text, NULL), RK_EINVAL);
    assert_int_equal(rk_metrics_add_topic(m, ""), RK_EINVAL);
    assert_int_equal(rk_metrics_port(m), 0);
    rk_metrics_destroy(m);
}

static void
test_listen_errors(void **state)
{
    fixture *f = *state;
    rk_metrics *m, *m2;
    char addr[32];

    assert_int_equal(rk_metrics_create(&m, f->rt, NULL), RK_OK);
    assert_int_equal(rk_metrics_listen(m, "nonsense"), RK_EINVAL);
    assert_int_equal(rk_metrics_listen(m, "127.0.0.1:99999"), RK_EINVAL);
    assert_int_equal(rk_metrics_listen(m, "example.com:80"), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "IPv4"));
    /* Listening twice, and a port already taken. */
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", (unsigned)f->port);
    assert_int_equal(rk_metrics_listen(m, addr), RK_EBUSY);
    assert_int_equal(rk_metrics_listen(m, "localhost:0"), RK_OK);
    assert_int_equal(rk_metrics_listen(m, "localhost:0"), RK_EALREADY);
    rk_metrics_destroy(m);

    assert_int_equal(rk_metrics_serve(NULL, NULL, &m), RK_EINVAL);
    assert_null(m);
    unsetenv(RK_METRICS_ENV);
    assert_int_equal(rk_metrics_serve_env(f->rt, &m2), RK_OK);
    assert_null(m2);
    setenv(RK_METRICS_ENV, "127.0.0.1:0", 1);
    assert_int_equal(rk_metrics_serve_env(f->rt, &m2), RK_OK);
    assert_non_null(m2);
    assert_true(rk_metrics_port(m2) != 0);
    http_reply r;
    assert_int_equal(http_req(rk_metrics_port(m2), "GET", "/metrics", &r), 0);
    assert_int_equal(r.status, 200);
    http_free(&r);
    rk_metrics_destroy(m2);
    unsetenv(RK_METRICS_ENV);
    assert_true(rk_metrics_http_available());
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_match_telemetry),
        cmocka_unit_test(test_stats_json),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_scrape_loop),
        cmocka_unit_test(test_render_and_kernel_list),
        cmocka_unit_test(test_listen_errors),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
