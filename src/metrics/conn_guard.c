/*
 * src/metrics/conn_guard.c - slow-client guard for the metrics endpoint
 * (see conn_guard.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "common/common.h"
#include "metrics/conn_guard.h"

typedef struct guard_conn {
    const void *conn; /* NULL: a free entry */
    int fd;
    bool waiting;      /* awaiting a request head (else in a request) */
    bool evicted;      /* shut down; the server will close it */
    uint64_t since_ns; /* when it began to wait, or its request began */
} guard_conn;

struct rk__conn_guard {
    pthread_mutex_t lock;
    pthread_cond_t cv; /* CLOCK_MONOTONIC; new waiter or stop */
    pthread_t thread;
    bool stop;
    size_t soft, cap;
    uint64_t head_ns, request_ns; /* the two deadlines */
    guard_conn *c;
};

/* Under lock: stops conn's reads and writes, so the server sees the end
 * of the stream and closes it. */
static void
evict(guard_conn *e)
{
    (void)shutdown(e->fd, SHUT_RDWR);
    e->evicted = true;
    e->waiting = false;
}

static guard_conn *
find(rk__conn_guard *g, const void *conn)
{
    for (size_t i = 0; i < g->cap; i++)
        if (g->c[i].conn == conn)
            return &g->c[i];
    return NULL;
}

static void *
guard_main(void *arg)
{
    rk__conn_guard *g = arg;

    pthread_mutex_lock(&g->lock);
    while (!g->stop) {
        uint64_t now = rk_now_ns(), next = UINT64_MAX;
        struct timespec ts;

        for (size_t i = 0; i < g->cap; i++) {
            guard_conn *e = &g->c[i];
            uint64_t due;
            if (e->conn == NULL || e->evicted)
                continue;
            due = e->since_ns + (e->waiting ? g->head_ns : g->request_ns);
            if (now >= due)
                evict(e);
            else if (due < next)
                next = due;
        }
        if (next == UINT64_MAX) {
            pthread_cond_wait(&g->cv, &g->lock);
            continue;
        }
        ts.tv_sec = (time_t)(next / 1000000000u);
        ts.tv_nsec = (long)(next % 1000000000u);
        (void)pthread_cond_timedwait(&g->cv, &g->lock, &ts);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

int
rk__guard_create(rk__conn_guard **out, size_t soft, size_t cap,
    uint64_t head_ns, uint64_t request_ns)
{
    rk__conn_guard *g = calloc(1, sizeof(*g));

    if (g == NULL || (g->c = calloc(cap, sizeof(*g->c))) == NULL) {
        free(g);
        return rk__fail(RK_ENOMEM, "metrics endpoint: connection table");
    }
    g->soft = soft;
    g->cap = cap;
    g->head_ns = head_ns;
    g->request_ns = request_ns;
    pthread_mutex_init(&g->lock, NULL);
    rk__cond_init_mono(&g->cv); /* deadlines are rk_now_ns values */
    if (pthread_create(&g->thread, NULL, guard_main, g) != 0) {
        pthread_cond_destroy(&g->cv);
        pthread_mutex_destroy(&g->lock);
        free(g->c);
        free(g);
        return rk__fail(RK_EINTERNAL,
            "metrics endpoint: cannot start the connection guard thread");
    }
    *out = g;
    return RK_OK;
}

void
rk__guard_destroy(rk__conn_guard *g)
{
    if (g == NULL)
        return;
    pthread_mutex_lock(&g->lock);
    g->stop = true;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->thread, NULL);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->lock);
    free(g->c);
    free(g);
}

bool
rk__guard_admit(rk__conn_guard *g)
{
    guard_conn *oldest = NULL;
    size_t live = 0;
    bool ok;

    pthread_mutex_lock(&g->lock);
    for (size_t i = 0; i < g->cap; i++) {
        guard_conn *e = &g->c[i];
        if (e->conn == NULL || e->evicted)
            continue;
        live++;
        if (e->waiting && (oldest == NULL || e->since_ns < oldest->since_ns))
            oldest = e;
    }
    ok = live < g->soft;
    if (!ok && oldest != NULL) {
        evict(oldest);
        ok = true;
    }
    pthread_mutex_unlock(&g->lock);
    return ok;
}

bool
rk__guard_started(rk__conn_guard *g, const void *conn, int fd)
{
    guard_conn *e;

    pthread_mutex_lock(&g->lock);
    if ((e = find(g, NULL)) != NULL) {
        e->conn = conn;
        e->fd = fd;
        e->waiting = true;
        e->evicted = false;
        e->since_ns = rk_now_ns();
        pthread_cond_signal(&g->cv);
    }
    pthread_mutex_unlock(&g->lock);
    return e != NULL;
}

void
rk__guard_head(rk__conn_guard *g, const void *conn)
{
    guard_conn *e;

    pthread_mutex_lock(&g->lock);
    if ((e = find(g, conn)) != NULL && e->waiting) {
        e->waiting = false;
        e->since_ns = rk_now_ns();
    }
    pthread_mutex_unlock(&g->lock);
}

void
rk__guard_idle(rk__conn_guard *g, const void *conn)
{
    guard_conn *e;

    pthread_mutex_lock(&g->lock);
    if ((e = find(g, conn)) != NULL && !e->evicted) {
        e->waiting = true;
        e->since_ns = rk_now_ns();
        pthread_cond_signal(&g->cv);
    }
    pthread_mutex_unlock(&g->lock);
}

void
rk__guard_closed(rk__conn_guard *g, const void *conn)
{
    guard_conn *e;

    pthread_mutex_lock(&g->lock);
    if ((e = find(g, conn)) != NULL)
        e->conn = NULL;
    pthread_mutex_unlock(&g->lock);
}
