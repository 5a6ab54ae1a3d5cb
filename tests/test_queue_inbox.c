/* The kernel's inbox (src/queue/inbox.h) and output queue
 * (src/runtime/outq.h) on their own: lanes behind the producer lock and
 * the DROP_OLDEST rk_mqueue, in-place takes, held slots outside the
 * capacity, eviction never touching held slots, the wake eventcount and
 * any capacity held exactly. Placement, sizes, many senders and the
 * slots' ready flags are in test_queue_inbox_layout.c; the fixtures both
 * share are in tests/support/inbox_check.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "common/ec.h"
#include "ringkernel/message.h"
#include "queue/inbox.h"
#include "runtime/ids.h"
#include "runtime/outq.h"
#include "inbox_check.h"

/* ------------------------------------------------------------ basics */

/* Every kind: FIFO per band, in place, counted, held slots in the depth
 * until released. */
static void
test_in_place_fifo(void **state)
{
    (void)state;
    for (int kind = 0; kind < 3; kind++) {
        rk_mqueue_config c = cfg_of(
            8, kind == 2 ? RK_BP_DROP_OLDEST : RK_BP_REJECT, false, kind == 0);
        rk__ec wake;
        rk__inbox *q;
        rk__inbox_batch b;
        rk_queue_stats st;

        rk__ec_init(&wake);
        assert_int_equal(rk__inbox_create(&q, &c, 4, &wake, NULL), RK_OK);
        assert_string_equal(q->ops->name, kind == 2 ? "mqueue" : "lanes");
        for (uint64_t i = 0; i < 6; i++)
            assert_int_equal(send_u64(q, 100 + i, 128, RK_NO_WAIT), RK_OK);
        assert_int_equal(take(q, 4, &b), 4);
        for (size_t i = 0; i < 4; i++)
            assert_int_equal(frame_u64(&b, i), 100 + i);
        assert_int_equal(rk__inbox_depth(q), 6); /* 4 held + 2 queued */
        rk__inbox_stats(q, &st);
        assert_int_equal(st.enqueued, 6);
        assert_int_equal(st.dequeued, 4);
        rk__inbox_release(q, 4);
        assert_int_equal(rk__inbox_depth(q), 2);
        assert_int_equal(take(q, 4, &b), 2);
        assert_int_equal(frame_u64(&b, 0), 104);
        assert_int_equal(frame_u64(&b, 1), 105);
        rk__inbox_release(q, 2);
        assert_int_equal(rk__inbox_take(q, 4, &b), RK_EEMPTY);
        rk__inbox_close(q);
        assert_int_equal(rk__inbox_take(q, 4, &b), RK_ECLOSED);
        assert_int_equal(send_u64(q, 1, 128, RK_NO_WAIT), RK_ECLOSED);
        rk__inbox_destroy(q);
    }
}

/* Slots the kernel holds in place never take room from the queue: with
 * capacity 4 and a held batch of 4, four more messages still go in, and
 * the fifth is refused. Every kind, bands included. */
static void
test_held_slots_outside_capacity(void **state)
{
    (void)state;
    for (int kind = 0; kind < 4; kind++) {
        rk_mqueue_config c
            = cfg_of(4, kind == 3 ? RK_BP_DROP_OLDEST : RK_BP_REJECT,
                kind == 2, kind == 0);
        rk__ec wake;
        rk__inbox *q;
        rk__inbox_batch b;

        rk__ec_init(&wake);
        assert_int_equal(rk__inbox_create(&q, &c, 4, &wake, NULL), RK_OK);
        for (uint64_t i = 0; i < 4; i++)
            assert_int_equal(send_u64(q, i, 128, RK_NO_WAIT), RK_OK);
        if (kind != 3)
            assert_int_equal(send_u64(q, 99, 128, RK_NO_WAIT), RK_EREJECTED);
        assert_int_equal(take(q, 4, &b), 4);
        for (uint64_t i = 4; i < 8; i++)
            assert_int_equal(send_u64(q, i, 128, RK_NO_WAIT), RK_OK);
        if (kind != 3)
            assert_int_equal(send_u64(q, 99, 128, RK_NO_WAIT), RK_EREJECTED);
        /* The held frames were not overwritten. */
        for (size_t i = 0; i < 4; i++)
            assert_int_equal(frame_u64(&b, i), i);
        rk__inbox_release(q, 4);
        assert_int_equal(take(q, 4, &b), 4);
        for (size_t i = 0; i < 4; i++)
            assert_int_equal(frame_u64(&b, i), 4 + i);
        rk__inbox_release(q, 4);
        rk__inbox_destroy(q);
    }
}

/* DROP_OLDEST evicts the oldest *queued* message, never one the kernel
 * holds in place, and counts it (evicted, dropped). When senders have
 * evicted so far ahead that the slot the next one needs is still held,
 * that sender is refused (RK_EFULL without a timeout, counted rejected)
 * instead of evicting messages to no purpose or overwriting a held one;
 * after the release it gets in. */
static void
test_drop_oldest_spares_held(void **state)
{
    rk_mqueue_config c = cfg_of(4, RK_BP_DROP_OLDEST, false, false);
    rk__ec wake;
    rk__inbox *q;
    rk__inbox_batch b;
    rk_queue_stats st;

    (void)state;
    rk__ec_init(&wake);
    assert_int_equal(rk__inbox_create(&q, &c, 2, &wake, NULL), RK_OK); /* ring 8 */
    for (uint64_t i = 1; i <= 4; i++)
        assert_int_equal(send_u64(q, i, 128, RK_NO_WAIT), RK_OK);
    assert_int_equal(take(q, 2, &b), 2); /* holds 1, 2 */
    for (uint64_t i = 5; i <= 8; i++)     /* 5, 6 fit; 7, 8 evict 3, 4 */
        assert_int_equal(send_u64(q, i, 128, RK_NO_WAIT), RK_OK);
    /* 9's slot is 1's: refused, nothing more evicted. */
    assert_int_equal(send_u64(q, 9, 128, RK_NO_WAIT), RK_EFULL);
    assert_int_equal(frame_u64(&b, 0), 1);
    assert_int_equal(frame_u64(&b, 1), 2);
    rk__inbox_stats(q, &st);
    assert_int_equal(st.evicted, 2);
    assert_int_equal(st.dropped, 2);
    assert_int_equal(st.rejected, 1);
    assert_int_equal(st.enqueued, 8);
    assert_int_equal(st.dequeued, 2);
    assert_int_equal(st.depth, 4);
    rk__inbox_release(q, 2);
    assert_int_equal(send_u64(q, 9, 128, RK_NO_WAIT), RK_OK); /* evicts 5 */
    assert_int_equal(take(q, 2, &b), 2);
    assert_int_equal(frame_u64(&b, 0), 6);
    assert_int_equal(frame_u64(&b, 1), 7);
    rk__inbox_release(q, 2);
    /* 8 is in the ring's last slot: a run stops there. */
    assert_int_equal(take(q, 2, &b), 1);
    assert_int_equal(frame_u64(&b, 0), 8);
    rk__inbox_release(q, 1);
    assert_int_equal(take(q, 2, &b), 1);
    assert_int_equal(frame_u64(&b, 0), 9);
    rk__inbox_release(q, 1);
    rk__inbox_stats(q, &st);
    assert_int_equal(st.evicted, 3);
    assert_int_equal(st.enqueued, st.dequeued + st.evicted + st.depth);
    rk__inbox_destroy(q);
}

/* Bands: each take is a run from the highest non-empty band. */
/* DROP_OLDEST under load, through the inbox's single send (its own
 * short path, rk__mqueue_send_frame, and the eviction it does in one go,
 * evict_claim): three senders evict from a small queue while the kernel
 * takes batches in place and holds them a while. Every message is either
 * taken exactly once or counted evicted (dropped too), each sender's
 * messages come out in order, and a held batch never changes under the
 * kernel (no sender evicts or overwrites a held slot). */
enum { DO_SENDERS = 3, DO_EACH = 20000, DO_CAP = 8, DO_HOLD = 4 };

typedef struct do_sender {
    rk__inbox *q;
    uint32_t id;
    _Atomic int bad;
} do_sender;

static void *
do_send(void *arg)
{
    do_sender *s = arg;

    for (uint32_t i = 0; i < DO_EACH; i++)
        if (send_u64(s->q, (uint64_t)s->id << 32 | i, 128, RK_WAIT_FOREVER)
            != RK_OK)
            atomic_store_explicit(&s->bad, 1, memory_order_relaxed);
    return NULL;
}

static void
test_drop_oldest_many_senders(void **state)
{
    rk_mqueue_config c = cfg_of(DO_CAP, RK_BP_DROP_OLDEST, false, false);
    do_sender s[DO_SENDERS];
    pthread_t t[DO_SENDERS];
    uint64_t next[DO_SENDERS] = { 0 }, got = 0, seen[DO_HOLD];
    rk__ec wake;
    rk__inbox *q;
    rk__inbox_batch b;
    rk_queue_stats st;
    bool running = true;

    (void)state;
    rk__ec_init(&wake);
    assert_int_equal(rk__inbox_create(&q, &c, DO_HOLD, &wake, NULL), RK_OK);
    for (uint32_t i = 0; i < DO_SENDERS; i++) {
        s[i].q = q;
        s[i].id = i;
        atomic_init(&s[i].bad, 0);
        assert_int_equal(pthread_create(&t[i], NULL, do_send, &s[i]), 0);
    }
    while (running) {
        /* Senders done? Then drain what is left and stop. */
        rk__inbox_stats(q, &st);
        running = st.enqueued < (uint64_t)DO_SENDERS * DO_EACH;
        while (rk__inbox_take(q, DO_HOLD, &b) == RK_OK) {
            for (size_t i = 0; i < b.n; i++) {
                uint64_t v = frame_u64(&b, i);
                uint32_t id = (uint32_t)(v >> 32), seq = (uint32_t)v;
                assert_true(id < DO_SENDERS);
                assert_true(seq >= next[id]); /* in order, never twice */
                next[id] = seq + 1;
                seen[i] = v;
            }
            got += b.n;
            /* Hold it while the senders evict around it. */
            for (int spin = 0; spin < 200; spin++)
                rk__cpu_relax();
            for (size_t i = 0; i < b.n; i++)
                assert_int_equal(frame_u64(&b, i), seen[i]);
            rk__inbox_release(q, b.n);
        }
    }
    for (uint32_t i = 0; i < DO_SENDERS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(atomic_load(&s[i].bad), 0);
    }
    while (rk__inbox_take(q, DO_HOLD, &b) == RK_OK) {
        got += b.n;
        rk__inbox_release(q, b.n);
    }
    rk__inbox_stats(q, &st);
    assert_int_equal(st.enqueued, (uint64_t)DO_SENDERS * DO_EACH);
    assert_int_equal(st.rejected, 0);
    assert_int_equal(st.dequeued, got);
    assert_int_equal(st.evicted + got, st.enqueued);
    assert_int_equal(st.dropped, st.evicted);
    assert_int_equal(st.depth, 0);
    rk__inbox_destroy(q);
}

static void
test_bands_order(void **state)
{
    rk_mqueue_config c = cfg_of(4, RK_BP_REJECT, true, false);
    rk__ec wake;
    rk__inbox *q;
    rk__inbox_batch b;

    (void)state;
    rk__ec_init(&wake);
    assert_int_equal(rk__inbox_create(&q, &c, 4, &wake, NULL), RK_OK);
    assert_int_equal(rk__inbox_lane_count(&c), RK_BAND_COUNT);
    assert_int_equal(send_u64(q, 1, 10, RK_NO_WAIT), RK_OK);  /* LOW */
    assert_int_equal(send_u64(q, 2, 250, RK_NO_WAIT), RK_OK); /* SYSTEM */
    assert_int_equal(send_u64(q, 3, 100, RK_NO_WAIT), RK_OK); /* NORMAL */
    assert_int_equal(send_u64(q, 4, 250, RK_NO_WAIT), RK_OK);
    assert_int_equal(take(q, 4, &b), 2);
    assert_int_equal(frame_u64(&b, 0), 2);
    assert_int_equal(frame_u64(&b, 1), 4);
    rk__inbox_release(q, 2);
    assert_int_equal(take(q, 4, &b), 1);
    assert_int_equal(frame_u64(&b, 0), 3);
    rk__inbox_release(q, 1);
    assert_int_equal(take(q, 4, &b), 1);
    assert_int_equal(frame_u64(&b, 0), 1);
    rk__inbox_release(q, 1);
    rk__inbox_destroy(q);
}

/* send_many: one batch, fresh ids, the stop at the first refusal counted
 * once, on every kind. */
static void
test_send_many(void **state)
{
    (void)state;
    for (int kind = 0; kind < 3; kind++) {
        rk_mqueue_config c = cfg_of(4,
            kind == 2 ? RK_BP_DROP_NEW : RK_BP_REJECT, kind == 1, kind == 0);
        rk__ec wake;
        rk__inbox *q;
        rk__inbox_batch b;
        rk_msg_header h;
        rk_queue_stats st;
        uint64_t pay[6] = { 10, 11, 12, 13, 14, 15 };
        size_t sent = 99;

        rk__ec_init(&wake);
        assert_int_equal(rk__inbox_create(&q, &c, 4, &wake, NULL), RK_OK);
        memset(&h, 0, sizeof(h));
        h.priority = 128;
        h.payload_len = 8;
        assert_int_equal(
            send_many(q, &h, pay, 8, 6, RK_NO_WAIT, &sent),
            kind == 2 ? RK_EDROPPED : RK_EREJECTED);
        assert_int_equal(sent, 4);
        rk__inbox_stats(q, &st);
        assert_int_equal(st.enqueued, 4);
        assert_int_equal(kind == 2 ? st.dropped : st.rejected, 1);
        assert_int_equal(take(q, 4, &b), 4);
        for (size_t i = 0; i < 4; i++) {
            rk_msg_header hi, hj;
            assert_int_equal(frame_u64(&b, i), 10 + i);
            memcpy(&hi, b.frames + i * b.stride, sizeof(hi));
            if (i > 0) {
                memcpy(&hj, b.frames + (i - 1) * b.stride, sizeof(hj));
                assert_memory_not_equal(
                    &hi.message_id, &hj.message_id, sizeof(hi.message_id));
            }
        }
        rk__inbox_release(q, 4);
        rk__inbox_destroy(q);
    }
}

/* ------------------------------------------------------- waking */

/* The queue wakes the kernel itself: a consumer parked on the wake
 * eventcount (prepare, re-check, wait with no deadline) returns once a
 * sender enqueues, on every kind; close wakes it too. Ordered by atomics:
 * the sender sends only after the consumer has prepared. */
typedef struct waiter {
    rk__inbox *q;
    rk__ec *wake;
    _Atomic int prepared;
    int rc;
} waiter;

static void *
kernel_like(void *arg)
{
    waiter *w = arg;
    rk__inbox_batch b;

    for (;;) {
        uint32_t key = rk__ec_prepare(w->wake);
        atomic_store_explicit(&w->prepared, 1, memory_order_release);
        if (rk__inbox_depth(w->q) != 0) {
            rk__ec_cancel(w->wake);
            break;
        }
        /* Closed, or a message that came after the depth check: either
         * ends the wait (a taken batch must be released before the next
         * take). */
        w->rc = rk__inbox_take(w->q, 1, &b);
        if (w->rc == RK_ECLOSED || w->rc == RK_OK) {
            rk__ec_cancel(w->wake);
            if (w->rc == RK_OK)
                rk__inbox_release(w->q, b.n);
            return NULL;
        }
        (void)rk__ec_wait(w->wake, key, UINT64_MAX);
    }
    w->rc = rk__inbox_take(w->q, 1, &b);
    if (w->rc == RK_OK)
        rk__inbox_release(w->q, b.n);
    return NULL;
}

static void
run_waiter(rk__inbox *q, rk__ec *wake, bool close, int expect)
{
    waiter w = { .q = q, .wake = wake };
    pthread_t t;

    atomic_init(&w.prepared, 0);
    assert_int_equal(pthread_create(&t, NULL, kernel_like, &w), 0);
    while (!atomic_load_explicit(&w.prepared, memory_order_acquire))
        rk__cpu_relax();
    if (close) {
        rk__inbox_close(q);
    } else {
        rk_msg_header h;
        uint64_t v = 7;
        size_t sent;
        memset(&h, 0, sizeof(h));
        h.priority = 128;
        h.payload_len = 8;
        assert_int_equal(
            send_many(q, &h, &v, 8, 1, RK_NO_WAIT, &sent), RK_OK);
    }
    pthread_join(t, NULL);
    assert_int_equal(w.rc, expect);
}

static void
test_enqueue_and_close_wake_the_kernel(void **state)
{
    (void)state;
    for (int kind = 0; kind < 3; kind++) {
        rk_mqueue_config c = cfg_of(
            8, kind == 2 ? RK_BP_DROP_OLDEST : RK_BP_BLOCK, false, kind == 0);
        rk__ec wake;
        rk__inbox *q;

        rk__ec_init(&wake);
        assert_int_equal(rk__inbox_create(&q, &c, 4, &wake, NULL), RK_OK);
        run_waiter(q, &wake, false, RK_OK);
        assert_int_equal(send_u64(q, 1, 128, RK_NO_WAIT), RK_OK);
        run_waiter(q, &wake, false, RK_OK); /* takes the queued one */
        rk__inbox_batch b;
        assert_int_equal(take(q, 4, &b), 1);
        rk__inbox_release(q, 1);
        run_waiter(q, &wake, true, RK_ECLOSED);
        rk__inbox_destroy(q);
    }
}

/* ------------------------------------------------ any capacity */

/* The result the (capacity + 1)th send meets under each policy (RK_NO_WAIT
 * for BLOCK); DROP_OLDEST takes it and evicts the oldest. */
static int
over_capacity_rc(rk_backpressure bp)
{
    switch (bp) {
    case RK_BP_BLOCK: return RK_EFULL;
    case RK_BP_REJECT: return RK_EREJECTED;
    case RK_BP_DROP_NEW: return RK_EDROPPED;
    default: return RK_OK;
    }
}

/* Fills the band of prio with cap frames (values base + i), then sends one
 * more, which must meet the policy exactly as at a power of two. */
static void
fill_exactly(rk__inbox *q, uint32_t cap, rk_backpressure bp, uint8_t prio,
    uint64_t base)
{
    for (uint32_t i = 0; i < cap; i++)
        assert_int_equal(send_u64(q, base + i, prio, RK_NO_WAIT), RK_OK);
    assert_int_equal(
        send_u64(q, base + cap, prio, RK_NO_WAIT), over_capacity_rc(bp));
}

/* Issue 27, item 1: any capacity from 1 up, held exactly. For every
 * policy, with and without bands, the inbox takes exactly N messages per
 * band and the (N+1)th meets the policy; a held batch still takes no
 * room, so after a take of k exactly k more go in; the counters and the
 * order are as at a power of two. */
static void
test_any_capacity_exact(void **state)
{
    static const uint32_t caps[] = { 1, 3, 10, 1000 };
    static const rk_backpressure bps[] = { RK_BP_BLOCK, RK_BP_REJECT,
        RK_BP_DROP_NEW, RK_BP_DROP_OLDEST };

    (void)state;
    for (size_t ci = 0; ci < RK__ARRAY_LEN(caps); ci++)
        for (size_t pi = 0; pi < RK__ARRAY_LEN(bps); pi++)
            for (int bands = 0; bands < 2; bands++) {
                uint32_t cap = caps[ci], hold = 4;
                rk_backpressure bp = bps[pi];
                rk_mqueue_config c = cfg_of(cap, bp, bands, false);
                bool evicts = bp == RK_BP_DROP_OLDEST;
                size_t k, n;
                rk__ec wake;
                rk__inbox *q;
                rk__inbox_batch b;
                rk_queue_stats st;

                print_message("capacity %u, policy %d, bands %d\n", cap,
                    (int)bp, bands);
                rk__ec_init(&wake);
                assert_int_equal(
                    rk__inbox_create(&q, &c, hold, &wake, NULL), RK_OK);
                fill_exactly(q, cap, bp, 128, 0);
                rk__inbox_stats(q, &st);
                assert_int_equal(st.enqueued, cap + (evicts ? 1 : 0));
                assert_int_equal(st.depth, cap);
                assert_int_equal(rk__inbox_depth(q), cap);
                assert_int_equal(
                    evicts ? st.evicted : st.rejected + st.dropped, 1);
                if (bands) /* another band holds its own N */
                    fill_exactly(q, cap, bp, 250, 5000);
                /* A held batch takes no room: k more, then the policy
                 * (SYSTEM's band first with bands). DROP_OLDEST evicted
                 * the band's first value for its (N+1)th. */
                k = take(q, hold, &b);
                assert_int_equal(k, cap < hold ? cap : hold);
                assert_int_equal(
                    frame_u64(&b, 0), (bands ? 5000 : 0) + (evicts ? 1 : 0));
                fill_exactly(q, (uint32_t)k, bp, bands ? 250 : 128, 100000);
                rk__inbox_stats(q, &st);
                assert_int_equal(st.depth, (uint64_t)cap * (bands ? 2 : 1));
                assert_int_equal(
                    rk__inbox_depth(q), (size_t)cap * (bands ? 2 : 1) + k);
                rk__inbox_release(q, k);
                /* Everything queued comes out once. */
                n = 0;
                while (rk__inbox_take(q, hold, &b) == RK_OK) {
                    n += b.n;
                    rk__inbox_release(q, b.n);
                }
                assert_int_equal(n, (size_t)cap * (bands ? 2 : 1));
                rk__inbox_stats(q, &st);
                assert_int_equal(
                    st.enqueued, st.dequeued + st.evicted + st.depth);
                assert_int_equal(st.depth, 0);
                rk__inbox_destroy(q);
            }
}

/* The output ring holds exactly its capacity too: a kernel-side producer
 * sending capacity + 1 frames with nobody receiving parks (its waiter is
 * counted on the ring's producer eventcount) with exactly capacity frames
 * queued, and goes on after one receive. */
typedef struct outq_prod {
    rk__outq *o;
    uint32_t n;
    atomic_int rc;
} outq_prod;

static void *
outq_producer(void *arg)
{
    outq_prod *p = arg;
    rk_msg_header h;

    memset(&h, 0, sizeof(h));
    h.payload_len = 8;
    for (uint64_t v = 0; v < p->n; v++) {
        int rc = rk__outq_send(p->o, &h, sizeof(h), &v, 8);
        if (rc != RK_OK) {
            atomic_store(&p->rc, rc);
            break;
        }
    }
    return NULL;
}

static void
test_outq_any_capacity_exact(void **state)
{
    static const uint32_t caps[] = { 1, 3, 10, 1000 };

    (void)state;
    for (size_t ci = 0; ci < RK__ARRAY_LEN(caps); ci++) {
        uint32_t cap = caps[ci];
        rk__outq o;
        outq_prod p = { &o, cap + 1, 0 };
        pthread_t t;
        size_t flen;
        const unsigned char *f;

        assert_int_equal(
            rk__outq_init(&o, cap, RK_MSG_HEADER_SIZE + 8), RK_OK);
        assert_int_equal(pthread_create(&t, NULL, outq_producer, &p), 0);
        /* The producer parks only when the ring is full (it spins first). */
        while (atomic_load_explicit(&o.prod_ec.waiters, memory_order_acquire)
            == 0)
            rk__cpu_relax();
        assert_int_equal(rk_spsc_depth(o.ring), cap);
        for (uint64_t v = 0; v <= cap; v++) {
            uint64_t got;
            assert_int_equal(rk__outq_wait(&o, 0, UINT64_MAX), RK_OK);
            f = rk__outq_peek(&o, &flen);
            assert_non_null(f);
            memcpy(&got, f + RK_MSG_HEADER_SIZE, 8);
            assert_int_equal(got, v);
            rk__outq_release(&o);
            /* Never more than cap queued. */
            assert_true(rk_spsc_depth(o.ring) <= cap);
        }
        pthread_join(t, NULL);
        assert_int_equal(atomic_load(&p.rc), RK_OK);
        assert_null(rk__outq_peek(&o, &flen));
        rk__outq_fini(&o);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_place_fifo),
        cmocka_unit_test(test_held_slots_outside_capacity),
        cmocka_unit_test(test_drop_oldest_spares_held),
        cmocka_unit_test(test_drop_oldest_many_senders),
        cmocka_unit_test(test_bands_order),
        cmocka_unit_test(test_send_many),
        cmocka_unit_test(test_enqueue_and_close_wake_the_kernel),
        cmocka_unit_test(test_any_capacity_exact),
        cmocka_unit_test(test_outq_any_capacity_exact),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
