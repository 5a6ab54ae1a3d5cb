/*
 * tests/test_metrics_slow_clients.c - the metrics endpoint under bad
 * input found by fault testing (issue 27, item 4).
 *
 * - GET /metrics%00.json used to answer 200 with the metrics: the decoded
 *   URL was compared with strcmp, which stops at the NUL. Any path other
 *   than /metrics and /stats.json is a 404 (docs/metrics.md).
 * - Local clients that each send a byte now and then, never finishing a
 *   request head, used to hold every connection slot (16) for as long as
 *   they kept going, since the idle timeout never fired, so no scrape was
 *   answered. With 20 such clients trickling from a helper thread (and
 *   reconnecting whenever the server closes one, as an attacker would),
 *   a scrape must still be answered. The test's deadline is generous (the
 *   client's 10 s receive timeout); it checks that the scrape is answered,
 *   not how fast. A single such client, with no slot pressure, is closed
 *   once it has taken the head deadline (2 s) without finishing its head.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "http_client.h"
#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

#define SLOW 20 /* more than the 16 connection slots */

typedef struct fixture {
    rk_runtime *rt;
    rk_metrics *m;
    uint16_t port;
} fixture;

static int
nop_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    (void)ctx;
    (void)m;
    return RK_OK;
}

static int
setup(void **state)
{
    static fixture f;
    rk_kernel_def def = { .id = "worker", .handler = nop_handler };
    rk_metrics_config mc = { .no_gpu_monitor = true };

    f.rt = rt_new_runtime();
    assert_int_equal(rk_runtime_register(f.rt, &def), RK_OK);
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

/* ---------------------------------------------------------- paths */

static void
test_nul_in_path_is_404(void **state)
{
    fixture *f = *state;
    static const char *const paths[] = { "/metrics%00.json", "/metrics%00",
        "/stats.json%00", "/stats.json%00/x", "/metrics%00?x=1" };
    http_reply r;

    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        assert_int_equal(http_req(f->port, "GET", paths[i], &r), 0);
        if (r.status != 404)
            fail_msg("GET %s answered %d, not 404", paths[i], r.status);
        http_free(&r);
    }
    /* The two real paths still answer, a query string included. */
    assert_int_equal(http_req(f->port, "GET", "/metrics?x=%00", &r), 0);
    assert_int_equal(r.status, 200);
    http_free(&r);
    assert_int_equal(http_req(f->port, "GET", "/stats.json", &r), 0);
    assert_int_equal(r.status, 200);
    http_free(&r);
}

/* ---------------------------------------------------- slow clients */

typedef struct trickle {
    uint16_t port;
    int fd[SLOW];
    unsigned rounds;     /* trickle rounds done */
    unsigned reconnects; /* connections the server closed */
    bool stop;
    pthread_mutex_t lock;
    pthread_cond_t cv;
} trickle;

static int
slow_connect(uint16_t port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

/* Each round sends every client one more byte of a request head that
 * never ends; a client the server has closed is replaced. Rounds are
 * paced by a timed wait on the stop flag (the trickle rate is what is
 * tested; nothing waits on it for synchronisation). */
static void *
trickle_main(void *arg)
{
    static const char head[] = "GET /metrics HTTP/1.1\r\nX-Slow: ";
    trickle *t = arg;
    size_t pos = 0;
    struct timespec dl;

    pthread_mutex_lock(&t->lock);
    while (!t->stop) {
        char c = pos < sizeof(head) - 1 ? head[pos] : 'a';
        pthread_mutex_unlock(&t->lock);
        for (int i = 0; i < SLOW; i++) {
            char buf[256];
            ssize_t n;
            /* Anything from the server (an error page) or EOF: gone. */
            n = recv(t->fd[i], buf, sizeof(buf), MSG_DONTWAIT);
            if (n >= 0
                || send(t->fd[i], &c, 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
                close(t->fd[i]);
                t->fd[i] = slow_connect(t->port);
                pthread_mutex_lock(&t->lock);
                t->reconnects++;
                pthread_mutex_unlock(&t->lock);
            }
        }
        pos++;
        pthread_mutex_lock(&t->lock);
        t->rounds++;
        pthread_cond_broadcast(&t->cv);
        clock_gettime(CLOCK_MONOTONIC, &dl);
        dl.tv_nsec += 100 * 1000 * 1000;
        if (dl.tv_nsec >= 1000000000) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000;
        }
        while (!t->stop
            && pthread_cond_timedwait(&t->cv, &t->lock, &dl) != ETIMEDOUT) { }
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

static void
test_scrape_answered_despite_slow_clients(void **state)
{
    fixture *f = *state;
    trickle t = { .port = f->port, .lock = PTHREAD_MUTEX_INITIALIZER };
    pthread_condattr_t ca;
    pthread_t th;
    http_reply r[3] = { { 0 } }, last;
    int rc[3] = { -1, -1, -1 };

    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t.cv, &ca);
    pthread_condattr_destroy(&ca);
    for (int i = 0; i < SLOW; i++)
        t.fd[i] = slow_connect(f->port);
    assert_int_equal(pthread_create(&th, NULL, trickle_main, &t), 0);
    /* Every client has sent a few bytes: they hold the slots. */
    pthread_mutex_lock(&t.lock);
    while (t.rounds < 5)
        pthread_cond_wait(&t.cv, &t.lock);
    pthread_mutex_unlock(&t.lock);

    /* Three scrapes while they trickle; checked once the helper has
     * stopped, so that a failure leaves no thread behind. */
    for (int i = 0; i < 3; i++) {
        rc[i] = http_req(f->port, "GET", "/metrics", &r[i]);
        if (rc[i] != 0)
            break;
    }

    pthread_mutex_lock(&t.lock);
    t.stop = true;
    pthread_cond_broadcast(&t.cv);
    pthread_mutex_unlock(&t.lock);
    pthread_join(th, NULL);
    pthread_cond_destroy(&t.cv);
    for (int i = 0; i < SLOW; i++)
        close(t.fd[i]);
    print_message("%u trickle rounds, %u slow clients closed by the "
                  "server\n",
        t.rounds, t.reconnects);
    for (int i = 0; i < 3; i++) {
        if (rc[i] != 0)
            fail_msg(
                "scrape %d not answered while %d clients trickle", i, SLOW);
        assert_int_equal(r[i].status, 200);
        assert_non_null(
            strstr(r[i].body, "ringkernel_messages_processed_total"));
        http_free(&r[i]);
    }
    /* Served afterwards as well. */
    assert_int_equal(http_req(f->port, "GET", "/stats.json", &last), 0);
    assert_int_equal(last.status, 200);
    http_free(&last);
}

/* One client alone (no slot pressure) that trickles a head forever is
 * closed by the server once the head deadline passes, though it is never
 * idle. The client sends a byte, then polls 100 ms for the server's end
 * of stream, until a generous deadline. */
static void
test_slow_head_is_closed(void **state)
{
    static const char head[] = "GET /metrics HTTP/1.1\r\nX-Slow: ";
    fixture *f = *state;
    int fd = slow_connect(f->port);
    uint64_t t0 = rk_now_ns(), end = t0 + 60 * UINT64_C(1000000000);
    bool closed = false;
    size_t pos = 0;

    while (!closed && rk_now_ns() < end) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        char c = pos < sizeof(head) - 1 ? head[pos] : 'a', buf[512];
        pos++;
        if (send(fd, &c, 1, MSG_NOSIGNAL) < 0) {
            closed = true;
            break;
        }
        /* Readable: the end of stream, or an error page before it; either
         * way the server has given up on the request. */
        if (poll(&p, 1, 100) == 1) {
            (void)recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
            closed = true;
        }
    }
    close(fd);
    if (!closed)
        fail_msg("a client trickling a request head was not closed in 60 s");
    print_message("closed after %.1f s, %zu bytes sent\n",
        (double)(rk_now_ns() - t0) / 1e9, pos);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nul_in_path_is_404),
        cmocka_unit_test(test_scrape_answered_despite_slow_clients),
        cmocka_unit_test(test_slow_head_is_closed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
