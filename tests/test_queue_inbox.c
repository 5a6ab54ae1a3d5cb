/* The kernel's inbox (src/queue/inbox.h) and output queue
 * (src/runtime/outq.h) on their own: lanes behind the producer lock and
 * the DROP_OLDEST rk_mqueue, in-place takes, held slots outside the
 * capacity, eviction never touching held slots, the wake eventcount,
 * placement in caller memory, slot alignment and size checks, and many
 * senders through the lock. Worker threads never call cmocka: they count
 * failed checks in an atomic. */
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
#include "worker_check.h"

#ifdef RK_DEBUG
#define SCALE 1u
#else
#define SCALE 10u
#endif

/* The three kinds: a single-producer lane, the general inbox (lanes
 * behind the lock, four with bands) and DROP_OLDEST's rk_mqueue. */
static rk_mqueue_config
cfg_of(uint32_t cap, rk_backpressure bp, bool bands, bool sp)
{
    rk_mqueue_config c = { .capacity = cap,
        .slot_size = RK_MSG_HEADER_SIZE + 8,
        .backpressure = bp,
        .priority_bands = bands,
        .single_producer = sp };
    return c;
}

/* Sends a frame whose payload is v (8 bytes) at priority prio. */
static int
send_u64(rk__inbox *q, uint64_t v, uint8_t prio, int64_t timeout)
{
    rk_msg_header h;

    memset(&h, 0, sizeof(h));
    h.priority = prio;
    h.payload_len = 8;
    return rk__inbox_send(q, &h, sizeof(h), &v, 8, prio, timeout, false);
}

/* rk_send_batch's way in: n frames, each h with a fresh id and payload i
 * of len bytes at base, written in place (inbox.h, send_fill). */
typedef struct many {
    rk_msg_header *h;
    const unsigned char *src;
    size_t len;
} many;

static void
fill_many(void *arg, size_t first, unsigned char *dst, size_t stride,
    size_t k, bool flagged)
{
    many *m = arg;

    rk__fill_frames(
        dst, stride, m->h, m->src + first * m->len, m->len, k, flagged);
}

static int
send_many(rk__inbox *q, rk_msg_header *h, const void *base, size_t len,
    size_t n, int64_t timeout_ns, size_t *sent)
{
    many m = { h, base, len };

    return rk__inbox_send_fill(q, h->priority,
        (uint32_t)(RK_MSG_HEADER_SIZE + len), n, fill_many, &m, timeout_ns,
        sent);
}

static uint64_t
frame_u64(const rk__inbox_batch *b, size_t i)
{
    const unsigned char *f = b->frames + i * b->stride;
    uint64_t v;
    uint32_t plen;

    memcpy(&plen, f + offsetof(rk_msg_header, payload_len), 4);
    assert_int_equal(plen, 8);
    memcpy(&v, f + RK_MSG_HEADER_SIZE, 8);
    return v;
}

/* Takes one batch (up to max), checks it is in place and aligned, returns
 * its size. */
static size_t
take(rk__inbox *q, size_t max, rk__inbox_batch *b)
{
    assert_int_equal(rk__inbox_take(q, max, b), RK_OK);
    assert_true(b->in_place);
    assert_true(b->n >= 1 && b->n <= max);
    /* Headers are 8-byte aligned at least, lanes 64 (issue 10, 7). */
    assert_int_equal((uintptr_t)b->frames % 8, 0);
    assert_int_equal(b->stride % 8, 0);
    return b->n;
}

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

/* ----------------------------------------------- placement and sizes */

static void
test_placement(void **state)
{
    (void)state;
    for (int bands = 0; bands < 2; bands++) {
        rk_mqueue_config c = cfg_of(16, RK_BP_BLOCK, bands, false);
        size_t bytes = rk__inbox_placed_bytes(&c, 8);
        uint32_t n = rk__inbox_lane_count(&c);
        unsigned char *mem;
        rk__ec wake;
        rk__inbox *q;
        rk__inbox_batch b;

        assert_int_equal(n, bands ? RK_BAND_COUNT : 1);
        assert_true(bytes >= n * (RK__INBOX_LANE_HDR + 32 * 128));
        mem = aligned_alloc(64, bytes);
        assert_non_null(mem);
        rk__ec_init(&wake);
        assert_int_equal(rk__inbox_create(&q, &c, 8, &wake, mem), RK_OK);
        for (uint32_t i = 0; i < n; i++) {
            /* Lane i is the block at mem + i * (bytes / n): the
             * ring_proto.h control block a device reads first, then its
             * slots, all in mem. */
            rk_spsc *lane = (rk_spsc *)(void *)(mem + i * (bytes / n));
            assert_int_equal(lane->ctrl.magic, RK_RING_MAGIC);
            assert_int_equal(lane->ctrl.capacity, 32); /* 16 + 8, rounded */
            assert_true(lane->prod.base == (unsigned char *)lane
                    + RK__INBOX_LANE_HDR
                && lane->prod.base + 32 * 128 <= mem + bytes);
        }
        assert_int_equal(send_u64(q, 42, 128, RK_NO_WAIT), RK_OK);
        assert_int_equal(take(q, 1, &b), 1);
        assert_true(b.frames >= mem && b.frames < mem + bytes);
        assert_int_equal(frame_u64(&b, 0), 42);
        rk__inbox_release(q, 1);
        rk__inbox_destroy(q); /* must not free mem (ASan: double free) */
        free(mem);
    }
    /* DROP_OLDEST stays host memory: no lanes to place. */
    rk_mqueue_config d = cfg_of(16, RK_BP_DROP_OLDEST, false, false);
    assert_int_equal(rk__inbox_placed_bytes(&d, 8), 0);
    assert_int_equal(rk__inbox_lane_count(&d), 0);
}

/* max_payload 3: a slot of 67 bytes; every frame header stays aligned
 * (issue 10, defect 7), on the input lanes and on the output ring. */
static void
test_odd_slot_sizes_stay_aligned(void **state)
{
    (void)state;
    for (int kind = 0; kind < 3; kind++) {
        rk_mqueue_config c = cfg_of(
            4, kind == 2 ? RK_BP_DROP_OLDEST : RK_BP_BLOCK, false, kind == 0);
        rk__ec wake;
        rk__inbox *q;
        rk__inbox_batch b;
        rk_msg_header h;
        unsigned char p3[3] = { 1, 2, 3 };

        c.slot_size = RK_MSG_HEADER_SIZE + 3;
        rk__ec_init(&wake);
        assert_int_equal(rk__inbox_create(&q, &c, 4, &wake, NULL), RK_OK);
        memset(&h, 0, sizeof(h));
        h.payload_len = 3;
        for (int i = 0; i < 3; i++)
            assert_int_equal(
                rk__inbox_send(q, &h, sizeof(h), p3, 3, 128, RK_NO_WAIT, false),
                RK_OK);
        assert_int_equal(take(q, 4, &b), 3);
        for (size_t i = 0; i < 3; i++)
            assert_int_equal(
                (uintptr_t)(b.frames + i * b.stride) % _Alignof(rk_msg_header),
                0);
        if (kind != 2)
            assert_int_equal(b.stride % 64, 0);
        rk__inbox_release(q, 3);
        rk__inbox_destroy(q);
    }
    rk__outq o;
    rk_msg_header h;
    size_t flen;
    memset(&h, 0, sizeof(h));
    h.payload_len = 3;
    assert_int_equal(rk__outq_init(&o, 4, RK_MSG_HEADER_SIZE + 3), RK_OK);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(rk__outq_send(&o, &h, sizeof(h), "abc", 3), RK_OK);
        const unsigned char *f = rk__outq_peek(&o, &flen);
        assert_non_null(f);
        assert_int_equal((uintptr_t)f % 64, 0);
        assert_int_equal(flen, RK_MSG_HEADER_SIZE + 3);
        rk__outq_release(&o);
    }
    rk__outq_fini(&o);
}

/* Sizes that overflow are refused with a detail naming the field (issue
 * 10, defect 1: 64 + max_payload truncated to 32 bits). */
static void
test_sizes_refused(void **state)
{
    rk_mqueue_config c = cfg_of(4, RK_BP_BLOCK, false, true);
    rk__ec wake;
    rk__inbox *q;
    rk__outq o;

    (void)state;
    rk__ec_init(&wake);
    c.slot_size = UINT32_MAX - 10;
    assert_int_equal(rk__inbox_create(&q, &c, 4, &wake, NULL), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "max_payload"));
    c.single_producer = false;
    assert_int_equal(rk__inbox_create(&q, &c, 4, &wake, NULL), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "max_payload"));
    c.backpressure = RK_BP_DROP_OLDEST;
    assert_int_equal(rk__inbox_create(&q, &c, 4, &wake, NULL), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "max_payload"));
    /* Too many bytes in all. */
    c = cfg_of(UINT32_C(1) << 30, RK_BP_BLOCK, false, false);
    c.slot_size = 1u << 20;
    assert_int_equal(rk__inbox_create(&q, &c, 4, &wake, NULL), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "input_capacity"));
    assert_int_equal(rk__inbox_placed_bytes(&c, 4), 0);
    c = cfg_of(0, RK_BP_BLOCK, false, false);
    assert_int_equal(rk__inbox_create(&q, &c, 4, &wake, NULL), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "input_capacity"));
    /* The output ring: a size_t slot that does not fit 32 bits. */
    assert_int_equal(
        rk__outq_init(&o, 4, (size_t)UINT32_MAX + RK_MSG_HEADER_SIZE),
        RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "max_payload"));
    assert_int_equal(rk__outq_ring_bytes(4, (size_t)UINT32_MAX + 64), 0);
    assert_int_equal(rk__outq_init(&o, 0, 128), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "output_capacity"));
}

/* The output ring in caller memory: the ring is there, fini leaves it. */
static void
test_outq_placement(void **state)
{
    size_t bytes = rk__outq_ring_bytes(8, 100);
    unsigned char *mem = aligned_alloc(64, bytes);
    rk__outq o;
    rk_msg_header h;
    size_t flen;

    (void)state;
    assert_true(bytes >= RK__OUTQ_HDR + 8 * 128);
    assert_non_null(mem);
    assert_int_equal(rk__outq_init_at(&o, mem, 8, 100), RK_OK);
    assert_ptr_equal((void *)o.ring, mem);
    memset(&h, 0, sizeof(h));
    h.payload_len = 4;
    assert_int_equal(rk__outq_send(&o, &h, sizeof(h), "wxyz", 4), RK_OK);
    const unsigned char *f = rk__outq_peek(&o, &flen);
    assert_true(f >= mem && f < mem + bytes);
    assert_memory_equal(f + RK_MSG_HEADER_SIZE, "wxyz", 4);
    rk__outq_release(&o);
    rk__outq_close(&o);
    assert_int_equal(rk__outq_wait(&o, 0, UINT64_MAX), RK_ECLOSED);
    rk__outq_fini(&o);
    free(mem);
}

/* The kernel's side of a test: takes a batch (up to max), or, with
 * nothing there, parks on wake until a sender notifies (the eventcount's
 * prepare, re-check, wait) and returns RK_EEMPTY to be called again. */
static int
take_or_park(rk__inbox *q, rk__ec *wake, size_t max, rk__inbox_batch *b)
{
    int rc = rk__inbox_take(q, max, b);

    if (rc == RK_EEMPTY) {
        uint32_t key = rk__ec_prepare(wake);
        if (rk__inbox_depth(q) != 0)
            rk__ec_cancel(wake);
        else
            (void)rk__ec_wait(wake, key, UINT64_MAX);
    }
    return rc;
}

/* ------------------------------------------- many senders, the lock */

enum { NSEND = 3 };

typedef struct mp {
    rk__inbox *q;
    uint32_t id, n;
    bool batch;
} mp;

static void *
mp_sender(void *arg)
{
    mp *m = arg;
    rk_msg_header h;

    memset(&h, 0, sizeof(h));
    h.payload_len = 8;
    for (uint32_t i = 0; i < m->n;) {
        uint64_t v[4];
        uint8_t prio = (uint8_t)(i % 2 ? 250 : 100);
        size_t k = m->batch && m->n - i >= 4 ? 4 : 1, sent = 0;
        for (size_t j = 0; j < k; j++)
            v[j] = (uint64_t)m->id << 32 | (i + j);
        h.priority = prio;
        if (k == 1)
            CHECK(send_u64(m->q, v[0], prio, RK_WAIT_FOREVER) == RK_OK);
        else
            CHECK(send_many(m->q, &h, v, 8, k, RK_WAIT_FOREVER, &sent)
                    == RK_OK
                && sent == k);
        i += (uint32_t)k;
    }
    return NULL;
}

/* Three senders (single and batched sends, two bands) and a consumer
 * that takes in place: every message arrives once, each sender's
 * messages in order within a band, the counters add up. BLOCK with a
 * small capacity, so senders wait for room (giving the lock up). */
static void
test_many_senders(void **state)
{
    (void)state;
    for (int bands = 0; bands < 2; bands++) {
        rk_mqueue_config c = cfg_of(16, RK_BP_BLOCK, bands, false);
        uint32_t per = 20000 * SCALE;
        uint64_t next[NSEND][2] = { { 0 } }, got = 0;
        rk__ec wake;
        rk__inbox *q;
        mp m[NSEND];
        pthread_t t[NSEND];
        rk_queue_stats st;

        rk__ec_init(&wake);
        atomic_store(&worker_errors, 0);
        assert_int_equal(rk__inbox_create(&q, &c, 8, &wake, NULL), RK_OK);
        for (uint32_t i = 0; i < NSEND; i++) {
            m[i] = (mp) { q, i, per, i != 0 };
            assert_int_equal(pthread_create(&t[i], NULL, mp_sender, &m[i]), 0);
        }
        while (got < (uint64_t)NSEND * per) {
            rk__inbox_batch b;
            int rc = take_or_park(q, &wake, 8, &b);
            if (rc == RK_EEMPTY)
                continue;
            assert_int_equal(rc, RK_OK);
            for (size_t i = 0; i < b.n; i++) {
                uint64_t v = frame_u64(&b, i);
                uint32_t id = (uint32_t)(v >> 32), seq = (uint32_t)v;
                assert_true(id < NSEND);
                /* With bands, odd and even sequence numbers travel in
                 * different bands; each band keeps its order. */
                uint32_t band = bands ? seq % 2 : 0;
                assert_true(seq >= next[id][band]);
                assert_int_equal(seq % (bands ? 2 : 1), band);
                next[id][band] = seq + (bands ? 2 : 1);
            }
            got += b.n;
            rk__inbox_release(q, b.n);
        }
        for (uint32_t i = 0; i < NSEND; i++)
            pthread_join(t[i], NULL);
        assert_int_equal(atomic_load(&worker_errors), 0);
        rk__inbox_stats(q, &st);
        assert_int_equal(st.enqueued, (uint64_t)NSEND * per);
        assert_int_equal(st.dequeued, (uint64_t)NSEND * per);
        assert_int_equal(st.rejected + st.dropped, 0);
        assert_true(st.high_water <= 16);
        rk__inbox_destroy(q);
    }
}

/* ------------------------------------------- the slots' ready flags */

/*
 * The per-slot ready flag (src/queue/slotflag.h): the consumers poll
 * each slot's flag instead of the producer's tail. A producer thread and
 * a consumer thread go round small rings many times; every frame must
 * arrive once, in order, with every byte of its envelope and its 64-byte
 * payload as sent and its reserved field 0. A flag published before the
 * frame is written, or a slot not marked EMPTY when it is given back
 * (the consumer would take last lap's frame again), fails the checks;
 * under TSan the first is also a reported race.
 */
#define FLAG_PAY 64u

static void
flag_frame(uint64_t seq, rk_msg_header *h, unsigned char *pay)
{
    memset(h, 0, sizeof(*h));
    h->magic = RK_MSG_MAGIC;
    h->version = RK_MSG_VERSION;
    h->type_id = (uint32_t)seq;
    h->payload_len = FLAG_PAY;
    h->send_ns = seq * 3 + 1;
    h->sender = (uint32_t)(seq >> 3);
    memset(&h->correlation_id, (int)(seq * 7 + 1), sizeof(h->correlation_id));
    for (uint32_t i = 0; i < FLAG_PAY; i++)
        pay[i] = (unsigned char)(seq + i * 13);
}

/* The lane sender's pattern: single sends, and runs of three (one
 * envelope, rk__fill_frames) starting where i % 5 == 4, so runs wrap the
 * ring at every offset. A frame carries the envelope of its run's first
 * frame. */
static bool
flag_run_at(uint64_t i, uint64_t n)
{
    return i % 5 == 4 && n - i >= 3;
}

static uint64_t
flag_env_seq(uint64_t seq, uint64_t n)
{
    for (uint64_t back = 0; back < 3 && back <= seq; back++) {
        uint64_t i = seq - back;
        if (flag_run_at(i, n))
            return i;
    }
    return seq;
}

/* True when frame f is exactly frame seq, with the envelope of frame
 * env. The message id is the queue's business for batch sends (fresh
 * ids), so it is not compared. */
static bool
flag_frame_ok(const unsigned char *f, uint64_t seq, uint64_t env)
{
    rk_msg_header want, got, scratch;
    unsigned char pay[FLAG_PAY];

    flag_frame(env, &want, pay);
    flag_frame(seq, &scratch, pay);
    memcpy(&got, f, sizeof(got));
    memset(&got.message_id, 0, sizeof(got.message_id));
    return got.reserved == 0 && memcmp(&got, &want, sizeof(got)) == 0
        && memcmp(f + RK_MSG_HEADER_SIZE, pay, FLAG_PAY) == 0;
}

typedef struct flag_prod {
    rk__inbox *q;
    rk__outq *o;
    uint64_t n;
} flag_prod;

static void *
flag_lane_sender(void *arg)
{
    flag_prod *p = arg;
    rk_msg_header h;
    unsigned char pay[3][FLAG_PAY];

    for (uint64_t i = 0; i < p->n;) {
        if (flag_run_at(i, p->n)) {
            size_t sent = 0;
            for (uint64_t j = 0; j < 3; j++)
                flag_frame(i + j, &h, pay[j]);
            flag_frame(i, &h, pay[0]); /* the run's common envelope */
            CHECK(send_many(
                      p->q, &h, pay, FLAG_PAY, 3, RK_WAIT_FOREVER, &sent)
                    == RK_OK
                && sent == 3);
            i += 3;
        } else {
            flag_frame(i, &h, pay[0]);
            CHECK(rk__inbox_send(p->q, &h, sizeof(h), pay[0], FLAG_PAY, 0,
                      RK_WAIT_FOREVER, false)
                == RK_OK);
            i++;
        }
    }
    return NULL;
}

static void
test_lane_flags_stress(void **state)
{
    (void)state;
    rk_mqueue_config c = { .capacity = 4,
        .slot_size = RK_MSG_HEADER_SIZE + FLAG_PAY,
        .backpressure = RK_BP_BLOCK,
        .single_producer = true };
    flag_prod p = { .n = 20000 * SCALE };
    uint64_t next = 0;
    rk__ec wake;
    rk__inbox *q;
    rk__inbox_batch b;
    pthread_t t;

    rk__ec_init(&wake);
    atomic_store(&worker_errors, 0);
    assert_int_equal(rk__inbox_create(&q, &c, 3, &wake, NULL), RK_OK); /* ring 8 */
    p.q = q;
    assert_int_equal(pthread_create(&t, NULL, flag_lane_sender, &p), 0);
    while (next < p.n) {
        /* Batches of 1 to 3 (the hold), so runs end everywhere. */
        int rc = take_or_park(q, &wake, 1 + next % 3, &b);
        if (rc == RK_EEMPTY)
            continue;
        assert_int_equal(rc, RK_OK);
        for (size_t i = 0; i < b.n; i++)
            if (!flag_frame_ok(b.frames + i * b.stride, next + i,
                    flag_env_seq(next + i, p.n)))
                fail_msg("lane frame %llu arrived wrong (batch at %llu)",
                    (unsigned long long)(next + i), (unsigned long long)next);
        next += b.n;
        rk__inbox_release(q, b.n);
    }
    pthread_join(t, NULL);
    assert_int_equal(atomic_load(&worker_errors), 0);
    /* Nothing more: every slot reads EMPTY again. */
    assert_int_equal(rk__inbox_take(q, 3, &b), RK_EEMPTY);
    rk__inbox_destroy(q);
}

static void *
flag_out_sender(void *arg)
{
    flag_prod *p = arg;
    rk_msg_header h;
    unsigned char pay[FLAG_PAY];

    for (uint64_t i = 0; i < p->n; i++) {
        flag_frame(i, &h, pay);
        CHECK(rk__outq_send(p->o, &h, sizeof(h), pay, FLAG_PAY) == RK_OK);
    }
    return NULL;
}

static void
test_outq_flags_stress(void **state)
{
    (void)state;
    flag_prod p = { .n = 20000 * SCALE };
    size_t flen = 0;
    rk__outq o;
    pthread_t t;

    atomic_store(&worker_errors, 0);
    assert_int_equal(
        rk__outq_init(&o, 4, RK_MSG_HEADER_SIZE + FLAG_PAY), RK_OK);
    p.o = &o;
    assert_int_equal(pthread_create(&t, NULL, flag_out_sender, &p), 0);
    for (uint64_t i = 0; i < p.n; i++) {
        const unsigned char *f;
        /* Every other frame spins a little first; both paths poll the
         * flag, the second parks. */
        assert_int_equal(
            rk__outq_wait(&o, (int64_t)(i % 2) * 1000, UINT64_MAX), RK_OK);
        f = rk__outq_peek(&o, &flen);
        assert_non_null(f);
        assert_int_equal(flen, RK_MSG_HEADER_SIZE + FLAG_PAY);
        if (!flag_frame_ok(f, i, i))
            fail_msg("output frame %llu arrived wrong", (unsigned long long)i);
        rk__outq_release(&o);
    }
    pthread_join(t, NULL);
    assert_int_equal(atomic_load(&worker_errors), 0);
    assert_null(rk__outq_peek(&o, &flen));
    rk__outq_fini(&o);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_place_fifo),
        cmocka_unit_test(test_held_slots_outside_capacity),
        cmocka_unit_test(test_drop_oldest_spares_held),
        cmocka_unit_test(test_bands_order),
        cmocka_unit_test(test_send_many),
        cmocka_unit_test(test_enqueue_and_close_wake_the_kernel),
        cmocka_unit_test(test_any_capacity_exact),
        cmocka_unit_test(test_outq_any_capacity_exact),
        cmocka_unit_test(test_placement),
        cmocka_unit_test(test_odd_slot_sizes_stay_aligned),
        cmocka_unit_test(test_sizes_refused),
        cmocka_unit_test(test_outq_placement),
        cmocka_unit_test(test_many_senders),
        cmocka_unit_test(test_lane_flags_stress),
        cmocka_unit_test(test_outq_flags_stress),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
