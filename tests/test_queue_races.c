/* rk_mqueue races: timeouts against traffic, close against parked threads,
 * DROP_OLDEST evictions against the receiver, concurrent batch sends.
 * Worker threads never call cmocka (not thread-safe): they count failed
 * checks in an atomic that the main thread asserts on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "queue/vring.h"
#include "ringkernel/queue.h"
#include "worker_check.h"

#ifdef RK_DEBUG
#define SCALE 1u
#else
#define SCALE 10u
#endif

static rk_mqueue *
make(uint32_t cap, uint32_t slot, rk_backpressure bp, bool bands, bool sp)
{
    rk_mqueue_config c = { cap, slot, bp, bands, sp };
    rk_mqueue *q = NULL;
    assert_int_equal(rk_mqueue_create(&q, &c), RK_OK);
    return q;
}

/* ------------------------------------------- timeouts racing traffic */

typedef struct tctx {
    rk_mqueue *q;
    uint32_t n;
    uint64_t gave_up;
} tctx;

static void *
timed_sender(void *arg)
{
    tctx *t = arg;
    for (uint32_t i = 0; i < t->n;) {
        int rc = rk_mqueue_send(t->q, &i, 4, (uint8_t)(i * 37), 20000);
        if (rc == RK_OK)
            i++;
        else {
            CHECK(rc == RK_ETIMEDOUT);
            t->gave_up++;
        }
    }
    return NULL;
}

/* Short timeouts on both sides of a two-slot queue: a timeout that races
 * a send or receive must neither lose, duplicate nor reorder a message,
 * and every sender timeout is counted rejected. */
static void
run_timeouts(bool sp, bool bands)
{
    atomic_store(&worker_errors, 0);
    rk_mqueue *q = make(2, 4, RK_BP_BLOCK, bands, sp);
    tctx t = { q, 2000 * SCALE, 0 };
    unsigned char *seen = calloc(t.n, 1);
    assert_non_null(seen);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, timed_sender, &t), 0);
    uint32_t got = 0, next = 0, bad = 0;
    while (got < t.n) {
        uint32_t v;
        size_t len;
        int rc = rk_mqueue_recv(q, &v, 4, &len, 20000);
        if (rc == RK_ETIMEDOUT)
            continue;
        if (rc != RK_OK || len != 4 || v >= t.n || seen[v]
            || (!bands && v != next)) {
            bad++;
            break;
        }
        seen[v] = 1;
        next++;
        got++;
    }
    pthread_join(th, NULL);
    assert_int_equal(bad, 0);
    assert_int_equal(atomic_load(&worker_errors), 0);
    rk_queue_stats st;
    rk_mqueue_stats(q, &st);
    assert_int_equal(st.enqueued, t.n);
    assert_int_equal(st.dequeued, t.n);
    assert_int_equal(st.depth, 0);
    assert_int_equal(st.rejected, t.gave_up);
    free(seen);
    rk_mqueue_destroy(q);
}

static void
test_timeouts_race_traffic(void **state)
{
    (void)state;
    run_timeouts(false, false);
    run_timeouts(true, false);
    run_timeouts(false, true);
}

/* ------------------------------------------- close vs parked threads */

typedef struct parked {
    rk_mqueue *q;
    bool send;
    _Atomic int rc;
} parked;

static void *
park_main(void *arg)
{
    parked *p = arg;
    uint32_t v = 1;
    size_t len;
    int rc;
    if (p->send)
        rc = rk_mqueue_send(p->q, &v, 4, 0, RK_WAIT_FOREVER);
    else
        rc = rk_mqueue_recv(p->q, &v, 4, &len, RK_WAIT_FOREVER);
    atomic_store(&p->rc, rc);
    return NULL;
}

/* Waits (yielding, no sleep) until n threads wait on q's side. */
static void
await_waiters(rk_mqueue *q, bool senders, uint32_t n)
{
    while (rk__mqueue_waiters(q, senders) < n)
        sched_yield();
}

/* Senders parked on a full queue and a receiver parked on an empty one,
 * all of them parked BEFORE the close: close must wake every one with
 * RK_ECLOSED and lose nothing that was queued. */
static void
test_close_parked_waiters(void **state)
{
    (void)state;
    enum { NS = 3 };
    for (uint32_t round = 0; round < 5 * SCALE; round++) {
        rk_mqueue *full = make(2, 4, RK_BP_BLOCK, round & 1, false);
        rk_mqueue *empty = make(2, 4, RK_BP_BLOCK, false, round & 2);
        uint32_t v = 7;
        assert_int_equal(rk_mqueue_send(full, &v, 4, 0, 0), RK_OK);
        assert_int_equal(rk_mqueue_send(full, &v, 4, 0, 0), RK_OK);
        parked p[NS + 1];
        pthread_t t[NS + 1];
        for (int i = 0; i <= NS; i++) {
            p[i].q = i < NS ? full : empty;
            p[i].send = i < NS;
            atomic_init(&p[i].rc, -1);
            assert_int_equal(pthread_create(&t[i], NULL, park_main, &p[i]), 0);
        }
        await_waiters(full, true, NS);
        await_waiters(empty, false, 1);
        for (int i = 0; i <= NS; i++)
            assert_int_equal(atomic_load(&p[i].rc), -1); /* still parked */
        rk_mqueue_close(full);
        rk_mqueue_close(empty);
        for (int i = 0; i <= NS; i++) {
            pthread_join(t[i], NULL);
            assert_int_equal(atomic_load(&p[i].rc), RK_ECLOSED);
        }
        assert_int_equal(rk__mqueue_waiters(full, true), 0);
        size_t len;
        assert_int_equal(rk_mqueue_recv(full, &v, 4, &len, 0), RK_OK);
        assert_int_equal(rk_mqueue_recv(full, &v, 4, &len, 0), RK_OK);
        assert_int_equal(
            rk_mqueue_recv(full, &v, 4, &len, RK_WAIT_FOREVER), RK_ECLOSED);
        rk_queue_stats st;
        rk_mqueue_stats(full, &st);
        assert_int_equal(st.enqueued, 2);
        assert_int_equal(st.dequeued, 2);
        assert_int_equal(st.rejected, 0); /* closed sends are not refusals */
        rk_mqueue_destroy(full);
        rk_mqueue_destroy(empty);
    }
}

/* ------------------------------------------- DROP_OLDEST under load */

typedef struct dctx {
    rk_mqueue *q;
    uint32_t n;
    uint32_t first; /* this sender's first value (values are disjoint) */
} dctx;

static void *
evicting_sender(void *arg)
{
    dctx *d = arg;
    for (uint32_t i = d->first; i < d->first + d->n; i++) {
        uint32_t m[2] = { i, ~i };
        /* RK_WAIT_FOREVER: a receiver preempted mid-copy may leave
         * nothing to evict for a moment (see claim_evicting). */
        CHECK(rk_mqueue_send(
                  d->q, m, 8, (uint8_t)((i % 3) * 90), RK_WAIT_FOREVER)
            == RK_OK);
    }
    return NULL;
}

/* Senders evict while the receiver takes: per band, each sender's
 * messages arrive in order and intact, and every admitted message is
 * either received or counted evicted. */
static void
run_drop_oldest(bool sp, int nsenders)
{
    atomic_store(&worker_errors, 0);
    rk_mqueue *q = make(2, 8, RK_BP_DROP_OLDEST, true, sp);
    dctx d[2];
    pthread_t t[2];
    uint32_t per = 5000 * SCALE;
    for (int i = 0; i < nsenders; i++) {
        d[i] = (dctx) { q, per, (uint32_t)i * per };
        assert_int_equal(
            pthread_create(&t[i], NULL, evicting_sender, &d[i]), 0);
    }
    uint64_t got = 0, bad = 0, total = (uint64_t)per * (uint64_t)nsenders;
    int64_t last[2][3] = { { -1, -1, -1 }, { -1, -1, -1 } };
    bool closed = false;
    for (;;) {
        uint32_t buf[4][2];
        size_t lens[4], n;
        int rc = rk_mqueue_recv_batch(q, buf, 8, lens, 4, &n, 1000000);
        if (rc == RK_ECLOSED)
            break;
        if (rc != RK_OK && rc != RK_ETIMEDOUT)
            bad++;
        for (size_t k = 0; k < n; k++) {
            uint32_t v = buf[k][0], s = v / per, b = v % 3;
            if (lens[k] != 8 || buf[k][1] != ~v || s >= (uint32_t)nsenders
                || (int64_t)v <= last[s][b])
                bad++;
            else
                last[s][b] = v;
            got++;
        }
        if (!closed) {
            rk_queue_stats st;
            rk_mqueue_stats(q, &st);
            if (st.enqueued == total) {
                for (int i = 0; i < nsenders; i++)
                    pthread_join(t[i], NULL);
                rk_mqueue_close(q);
                closed = true;
            }
        }
    }
    assert_int_equal(bad, 0);
    assert_int_equal(atomic_load(&worker_errors), 0);
    rk_queue_stats st;
    rk_mqueue_stats(q, &st);
    assert_int_equal(st.enqueued, total);
    assert_int_equal(st.dequeued, got);
    assert_int_equal(st.evicted, total - got);
    assert_int_equal(st.dropped, st.evicted);
    assert_int_equal(st.rejected, 0);
    assert_int_equal(st.depth, 0);
    rk_mqueue_destroy(q);
}

static void
test_drop_oldest_single_producer_concurrent(void **state)
{
    (void)state;
    run_drop_oldest(true, 1);
    run_drop_oldest(false, 2);
}

/* ------------------------------------------- concurrent batch sends */

static void *
batch_sender(void *arg)
{
    dctx *d = arg;
    uint32_t buf[8][2];
    for (uint32_t i = 0; i < d->n;) {
        uint32_t k = d->n - i < 8 ? d->n - i : 1 + i % 8;
        for (uint32_t j = 0; j < k; j++) {
            buf[j][0] = d->first + i + j;
            buf[j][1] = ~buf[j][0];
        }
        size_t sent = 0;
        int rc = rk_mqueue_send_batch(
            d->q, buf, 8, NULL, k, 0, RK_WAIT_FOREVER, &sent);
        CHECK(rc == RK_OK && sent == k);
        i += k;
    }
    return NULL;
}

/* Two senders batch into one small BLOCK ring: range claims interleave
 * with waits, and each sender's messages arrive once, whole, in order. */
static void
test_send_batch_concurrent(void **state)
{
    (void)state;
    atomic_store(&worker_errors, 0);
    rk_mqueue *q = make(8, 8, RK_BP_BLOCK, false, false);
    uint32_t per = 5000 * SCALE;
    dctx d[2] = { { q, per, 0 }, { q, per, per } };
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, batch_sender, &d[i]), 0);
    uint32_t next[2] = { 0, per };
    uint64_t bad = 0;
    for (uint64_t got = 0; got < 2 * (uint64_t)per && bad == 0;) {
        uint32_t buf[4][2];
        size_t lens[4], n;
        int rc = rk_mqueue_recv_batch(q, buf, 8, lens, 4, &n, RK_WAIT_FOREVER);
        if (rc != RK_OK)
            bad++;
        for (size_t k = 0; k < n; k++) {
            uint32_t v = buf[k][0], s = v < per ? 0 : 1;
            if (lens[k] != 8 || buf[k][1] != ~v || v != next[s])
                bad++;
            next[s]++;
        }
        got += n;
    }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(bad, 0);
    assert_int_equal(atomic_load(&worker_errors), 0);
    rk_queue_stats st;
    rk_mqueue_stats(q, &st);
    assert_int_equal(st.enqueued, 2 * (uint64_t)per);
    assert_int_equal(st.dequeued, 2 * (uint64_t)per);
    assert_int_equal(st.depth, 0);
    assert_in_range(st.high_water, 1, 8);
    rk_mqueue_destroy(q);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timeouts_race_traffic),
        cmocka_unit_test(test_close_parked_waiters),
        cmocka_unit_test(test_drop_oldest_single_producer_concurrent),
        cmocka_unit_test(test_send_batch_concurrent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
