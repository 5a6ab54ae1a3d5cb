/* rk_mqueue: bands, backpressure, counters, parking and close. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "queue/vring.h"
#include "ringkernel/queue.h"

#ifdef RK_DEBUG
#define SCALE 1u
#else
#define SCALE 8u
#endif

static rk_mqueue *
make(uint32_t cap, uint32_t slot, rk_backpressure bp, bool bands, bool sp)
{
    rk_mqueue_config c = { cap, slot, bp, bands, sp };
    rk_mqueue *q = NULL;
    assert_int_equal(rk_mqueue_create(&q, &c), RK_OK);
    return q;
}

static void
send_u32(rk_mqueue *q, uint32_t v, uint8_t prio, int expect)
{
    assert_int_equal(
        rk_mqueue_send(q, &v, sizeof(v), prio, RK_NO_WAIT), expect);
}

static uint32_t
recv_u32(rk_mqueue *q)
{
    uint32_t v = 0;
    size_t len = 0;
    assert_int_equal(
        rk_mqueue_recv(q, &v, sizeof(v), &len, RK_NO_WAIT), RK_OK);
    assert_int_equal(len, sizeof(v));
    return v;
}

static void
expect_stats(rk_mqueue *q, uint64_t enq, uint64_t deq, uint64_t dropped,
    uint64_t rejected, uint64_t evicted, uint64_t hw)
{
    rk_queue_stats s;
    rk_mqueue_stats(q, &s);
    assert_int_equal(s.enqueued, enq);
    assert_int_equal(s.dequeued, deq);
    assert_int_equal(s.dropped, dropped);
    assert_int_equal(s.rejected, rejected);
    assert_int_equal(s.evicted, evicted);
    assert_int_equal(s.high_water, hw);
    assert_int_equal(s.depth, enq - deq - evicted);
    assert_int_equal(rk_mqueue_depth(q), s.depth);
}

static void
test_bad_arguments(void **state)
{
    (void)state;
    rk_mqueue *q = (rk_mqueue *)&q;
    rk_mqueue_config c = { .capacity = 12 };
    assert_int_equal(rk_mqueue_create(NULL, NULL), RK_EINVAL);
    assert_int_equal(rk_mqueue_create(&q, &c), RK_EINVAL);
    assert_null(q);
    c.capacity = 1; /* Vyukov's slots need two */
    assert_int_equal(rk_mqueue_create(&q, &c), RK_EINVAL);
    c.capacity = 8;
    c.backpressure = (rk_backpressure)9;
    assert_int_equal(rk_mqueue_create(&q, &c), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "backpressure"));

    q = make(4, 8, RK_BP_REJECT, false, false);
    char big[9] = { 0 }, out[8];
    size_t len, n;
    assert_int_equal(rk_mqueue_send(q, big, 9, 0, RK_NO_WAIT), RK_EMSGSIZE);
    assert_int_equal(rk_mqueue_send(q, NULL, 1, 0, RK_NO_WAIT), RK_EINVAL);
    assert_int_equal(rk_mqueue_send(NULL, big, 1, 0, RK_NO_WAIT), RK_EINVAL);
    struct rk_iov iov[2] = { { big, 5 }, { big, 4 } };
    assert_int_equal(rk_mqueue_sendv(q, iov, 2, 0, RK_NO_WAIT), RK_EMSGSIZE);
    assert_int_equal(rk_mqueue_sendv(q, NULL, 1, 0, RK_NO_WAIT), RK_EINVAL);
    assert_int_equal(rk_mqueue_sendv(q, iov, -1, 0, RK_NO_WAIT), RK_EINVAL);
    assert_int_equal(
        rk_mqueue_recv(NULL, out, 8, &len, RK_NO_WAIT), RK_EINVAL);
    assert_int_equal(rk_mqueue_recv(q, NULL, 8, &len, RK_NO_WAIT), RK_EINVAL);
    assert_int_equal(
        rk_mqueue_recv_batch(q, out, 8, NULL, 1, &n, RK_NO_WAIT), RK_EINVAL);
    /* Nothing above was counted. */
    expect_stats(q, 0, 0, 0, 0, 0, 0);
    rk_mqueue_destroy(q);
    rk_mqueue_destroy(NULL);
}

static void
test_defaults_and_empty_message(void **state)
{
    (void)state;
    rk_mqueue *q;
    assert_int_equal(rk_mqueue_create(&q, NULL), RK_OK);
    char msg[RK_MQUEUE_DEFAULT_SLOT_SIZE], out[RK_MQUEUE_DEFAULT_SLOT_SIZE];
    memset(msg, 'x', sizeof(msg));
    for (uint32_t i = 0; i < RK_MQUEUE_DEFAULT_CAPACITY; i++)
        assert_int_equal(
            rk_mqueue_send(q, msg, sizeof(msg), 0, RK_NO_WAIT), RK_OK);
    /* BLOCK is the default: a full queue with no wait is RK_EFULL. */
    assert_int_equal(rk_mqueue_send(q, msg, 1, 0, RK_NO_WAIT), RK_EFULL);
    size_t len;
    for (uint32_t i = 0; i < RK_MQUEUE_DEFAULT_CAPACITY; i++) {
        assert_int_equal(rk_mqueue_recv(q, out, sizeof(out), &len, 0), RK_OK);
        assert_int_equal(len, sizeof(msg));
    }
    assert_int_equal(rk_mqueue_send(q, NULL, 0, 0, RK_NO_WAIT), RK_OK);
    len = 99;
    assert_int_equal(rk_mqueue_recv(q, NULL, 0, &len, RK_NO_WAIT), RK_OK);
    assert_int_equal(len, 0);
    expect_stats(q, 1025, 1025, 0, 1, 0, 1024);
    rk_mqueue_destroy(q);
}

static void
test_fifo_wraparound_no_bands(void **state)
{
    (void)state;
    for (int sp = 0; sp < 2; sp++) {
        rk_mqueue *q = make(4, 4, RK_BP_REJECT, false, sp);
        uint32_t next_in = 0, next_out = 0;
        for (int round = 0; round < 40; round++) {
            int fill = 1 + round % 4;
            for (int i = 0; i < fill; i++)
                send_u32(q, next_in++, (uint8_t)(255 - 60 * i), RK_OK);
            for (int i = 0; i < fill; i++)
                assert_int_equal(recv_u32(q), next_out++); /* FIFO */
            uint32_t v;
            size_t len;
            assert_int_equal(
                rk_mqueue_recv(q, &v, 4, &len, RK_NO_WAIT), RK_EEMPTY);
        }
        expect_stats(q, next_in, next_in, 0, 0, 0, 4);
        rk_mqueue_destroy(q);
    }
}

static void
test_priority_band_mapping(void **state)
{
    (void)state;
    assert_int_equal(rk_priority_band(0), RK_BAND_LOW);
    assert_int_equal(rk_priority_band(63), RK_BAND_LOW);
    assert_int_equal(rk_priority_band(64), RK_BAND_NORMAL);
    assert_int_equal(rk_priority_band(159), RK_BAND_NORMAL);
    assert_int_equal(rk_priority_band(160), RK_BAND_HIGH);
    assert_int_equal(rk_priority_band(223), RK_BAND_HIGH);
    assert_int_equal(rk_priority_band(224), RK_BAND_SYSTEM);
    assert_int_equal(rk_priority_band(255), RK_BAND_SYSTEM);
}

static void
test_priority_ordering(void **state)
{
    (void)state;
    rk_mqueue *q = make(8, 4, RK_BP_REJECT, true, false);
    /* value = band * 100 + order within band */
    static const uint8_t prio[]
        = { 10, 100, 200, 250, 63, 64, 223, 224, 0, 159, 160, 255 };
    uint32_t count[4] = { 0 };
    for (size_t i = 0; i < RK__ARRAY_LEN(prio); i++) {
        uint32_t b = rk_priority_band(prio[i]);
        send_u32(q, b * 100 + count[b]++, prio[i], RK_OK);
    }
    for (int b = 3; b >= 0; b--)
        for (uint32_t i = 0; i < count[b]; i++)
            assert_int_equal(recv_u32(q), (uint32_t)b * 100 + i);
    /* A higher band arriving later still goes first. */
    send_u32(q, 1, 0, RK_OK);
    send_u32(q, 2, 0, RK_OK);
    assert_int_equal(recv_u32(q), 1);
    send_u32(q, 3, 230, RK_OK);
    assert_int_equal(recv_u32(q), 3);
    assert_int_equal(recv_u32(q), 2);
    /* Each band has its own capacity. */
    for (uint32_t i = 0; i < 8; i++)
        send_u32(q, i, 100, RK_OK);
    send_u32(q, 9, 100, RK_EREJECTED);
    send_u32(q, 10, 170, RK_OK);
    assert_int_equal(recv_u32(q), 10);
    expect_stats(q, 24, 16, 0, 1, 0, 12);
    rk_mqueue_destroy(q);
}

static void
test_reject(void **state)
{
    (void)state;
    rk_mqueue *q = make(4, 4, RK_BP_REJECT, false, false);
    for (uint32_t i = 0; i < 4; i++)
        send_u32(q, i, 0, RK_OK);
    send_u32(q, 4, 0, RK_EREJECTED);
    /* REJECT never waits, even when asked to. */
    uint32_t v = 5;
    assert_int_equal(
        rk_mqueue_send(q, &v, 4, 0, RK_WAIT_FOREVER), RK_EREJECTED);
    expect_stats(q, 4, 0, 0, 2, 0, 4);
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(recv_u32(q), i);
    expect_stats(q, 4, 4, 0, 2, 0, 4);
    rk_mqueue_destroy(q);
}

static void
test_drop_new(void **state)
{
    (void)state;
    rk_mqueue *q = make(4, 4, RK_BP_DROP_NEW, false, true);
    for (uint32_t i = 0; i < 6; i++)
        send_u32(q, i, 0, i < 4 ? RK_OK : RK_EDROPPED);
    expect_stats(q, 4, 0, 2, 0, 0, 4);
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(recv_u32(q), i); /* the new ones were lost */
    send_u32(q, 7, 0, RK_OK);
    assert_int_equal(recv_u32(q), 7);
    expect_stats(q, 5, 5, 2, 0, 0, 4);
    rk_mqueue_destroy(q);
}

static void
test_drop_oldest(void **state)
{
    (void)state;
    for (int sp = 0; sp < 2; sp++) {
        rk_mqueue *q = make(4, 4, RK_BP_DROP_OLDEST, false, sp);
        for (uint32_t i = 0; i < 7; i++)
            send_u32(q, i, 0, RK_OK); /* admitted, evicting 0, 1, 2 */
        expect_stats(q, 7, 0, 3, 0, 3, 4);
        for (uint32_t i = 3; i < 7; i++)
            assert_int_equal(recv_u32(q), i);
        expect_stats(q, 7, 4, 3, 0, 3, 4);
        rk_mqueue_destroy(q);
    }
}

/* DROP_OLDEST on a full band whose oldest slot is claimed but not yet
 * published (its sender is mid-copy): nothing can be evicted, and the send
 * must give up at its timeout instead of spinning forever. */
static void
test_drop_oldest_stuck_head_times_out(void **state)
{
    (void)state;
    for (int sp = 0; sp < 2; sp++) {
        rk_mqueue *q = make(2, 4, RK_BP_DROP_OLDEST, false, sp);
        rk__vring *r = rk__mqueue_band(q, 0);
        uint64_t pos = 99;
        /* A "sender" that claimed position 0 and stalls. */
        assert_true(rk__vring_claim_mp(r, &pos));
        assert_int_equal(pos, 0);
        send_u32(q, 1, 0, RK_OK); /* position 1: the band is now full */
        uint32_t v = 2;
        assert_int_equal(rk_mqueue_send(q, &v, 4, 0, RK_NO_WAIT), RK_EFULL);
        assert_int_equal(rk_mqueue_send(q, &v, 4, 0, 1000000), RK_ETIMEDOUT);
        size_t sent = 9;
        assert_int_equal(
            rk_mqueue_send_batch(q, &v, 4, NULL, 1, 0, RK_NO_WAIT, &sent),
            RK_EFULL);
        assert_int_equal(sent, 0);
        expect_stats(q, 1, 0, 0, 3, 0, 1);
        /* The stalled sender finishes: now the oldest can be evicted. */
        uint32_t zero = 0;
        memcpy(rk__vslot_data(rk__vring_slot(r, pos)), &zero, 4);
        atomic_store_explicit(
            &rk__vring_slot(r, pos)->len, 4, memory_order_relaxed);
        rk__vring_publish(r, pos);
        send_u32(q, 2, 0, RK_OK); /* evicts the message of position 0 */
        assert_int_equal(recv_u32(q), 1);
        assert_int_equal(recv_u32(q), 2);
        rk_mqueue_destroy(q);
    }
}

/* Batch send: order, counters and the per-message policy. */
static void
test_send_batch(void **state)
{
    (void)state;
    uint32_t in[6] = { 10, 11, 12, 13, 14, 15 };
    size_t sent = 99;
    for (int sp = 0; sp < 2; sp++) {
        /* REJECT: 4 fit, the other 2 are rejected one by one. */
        rk_mqueue *q = make(4, 8, RK_BP_REJECT, true, sp);
        assert_int_equal(
            rk_mqueue_send_batch(q, in, 4, NULL, 6, 200, RK_NO_WAIT, &sent),
            RK_EREJECTED);
        assert_int_equal(sent, 4);
        expect_stats(q, 4, 0, 0, 2, 0, 4);
        send_u32(q, 7, 0, RK_OK); /* another band still has room */
        for (uint32_t i = 0; i < 4; i++)
            assert_int_equal(recv_u32(q), in[i]);
        assert_int_equal(recv_u32(q), 7);
        /* Wraps around the ring, with room for all. */
        assert_int_equal(
            rk_mqueue_send_batch(q, in + 2, 4, NULL, 3, 200, 0, &sent), RK_OK);
        assert_int_equal(sent, 3);
        for (uint32_t i = 2; i < 5; i++)
            assert_int_equal(recv_u32(q), in[i]);
        expect_stats(q, 8, 8, 0, 2, 0, 5); /* 4 + the other band */
        rk_mqueue_destroy(q);

        /* DROP_NEW with lengths: 2 of 3 fit after 2 singles. */
        q = make(4, 8, RK_BP_DROP_NEW, false, sp);
        send_u32(q, 1, 0, RK_OK);
        send_u32(q, 2, 0, RK_OK);
        unsigned char msgs[3][8] = { "a", "bcd", "efgh" };
        size_t lens[3] = { 1, 3, 4 };
        assert_int_equal(
            rk_mqueue_send_batch(q, msgs, 8, lens, 3, 0, 0, &sent),
            RK_EDROPPED);
        assert_int_equal(sent, 2);
        expect_stats(q, 4, 0, 1, 0, 0, 4);
        assert_int_equal(recv_u32(q), 1);
        assert_int_equal(recv_u32(q), 2);
        unsigned char buf[8];
        size_t len;
        assert_int_equal(rk_mqueue_recv(q, buf, 8, &len, 0), RK_OK);
        assert_int_equal(len, 1);
        assert_memory_equal(buf, "a", 1);
        assert_int_equal(rk_mqueue_recv(q, buf, 8, &len, 0), RK_OK);
        assert_int_equal(len, 3);
        assert_memory_equal(buf, "bcd", 3);
        expect_stats(q, 4, 4, 1, 0, 0, 4);
        rk_mqueue_destroy(q);

        /* DROP_OLDEST: all admitted, the oldest evicted. */
        q = make(4, 4, RK_BP_DROP_OLDEST, false, sp);
        assert_int_equal(
            rk_mqueue_send_batch(q, in, 4, NULL, 6, 0, 0, &sent), RK_OK);
        assert_int_equal(sent, 6);
        expect_stats(q, 6, 0, 2, 0, 2, 4);
        for (uint32_t i = 2; i < 6; i++)
            assert_int_equal(recv_u32(q), in[i]);
        rk_mqueue_destroy(q);

        /* BLOCK: 4 admitted, then the rest times out (counted rejected);
         * RK_NO_WAIT gives RK_EFULL. */
        q = make(4, 4, RK_BP_BLOCK, false, sp);
        assert_int_equal(
            rk_mqueue_send_batch(q, in, 4, NULL, 6, 0, 1000000, &sent),
            RK_ETIMEDOUT);
        assert_int_equal(sent, 4);
        assert_int_equal(
            rk_mqueue_send_batch(q, in, 4, NULL, 2, 0, RK_NO_WAIT, &sent),
            RK_EFULL);
        assert_int_equal(sent, 0);
        expect_stats(q, 4, 0, 0, 4, 0, 4);
        rk_mqueue_close(q);
        assert_int_equal(
            rk_mqueue_send_batch(q, in, 4, NULL, 2, 0, 0, &sent), RK_ECLOSED);
        rk_mqueue_destroy(q);
    }
    /* Bad arguments: nothing is sent. */
    rk_mqueue *q = make(4, 4, RK_BP_REJECT, false, false);
    size_t big[2] = { 4, 5 };
    unsigned char m[16] = { 0 };
    assert_int_equal(
        rk_mqueue_send_batch(NULL, m, 4, NULL, 1, 0, 0, &sent), RK_EINVAL);
    assert_int_equal(
        rk_mqueue_send_batch(q, NULL, 4, NULL, 1, 0, 0, &sent), RK_EINVAL);
    assert_int_equal(
        rk_mqueue_send_batch(q, m, 4, big, 2, 0, 0, &sent), RK_EINVAL);
    assert_int_equal(
        rk_mqueue_send_batch(q, m, 8, big, 2, 0, 0, &sent), RK_EMSGSIZE);
    assert_int_equal(sent, 0);
    assert_int_equal(
        rk_mqueue_send_batch(q, m, 4, NULL, 0, 0, 0, NULL), RK_OK);
    expect_stats(q, 0, 0, 0, 0, 0, 0);
    rk_mqueue_destroy(q);
}

static void
test_drop_oldest_is_per_band(void **state)
{
    (void)state;
    rk_mqueue *q = make(2, 4, RK_BP_DROP_OLDEST, true, false);
    send_u32(q, 100, 0, RK_OK);   /* LOW */
    send_u32(q, 101, 0, RK_OK);   /* LOW, now full */
    send_u32(q, 300, 250, RK_OK); /* SYSTEM */
    send_u32(q, 102, 0, RK_OK);   /* evicts LOW 100, not SYSTEM 300 */
    expect_stats(q, 4, 0, 1, 0, 1, 3);
    assert_int_equal(recv_u32(q), 300);
    assert_int_equal(recv_u32(q), 101);
    assert_int_equal(recv_u32(q), 102);
    expect_stats(q, 4, 3, 1, 0, 1, 3);
    rk_mqueue_destroy(q);
}

static void
test_block_timeouts(void **state)
{
    (void)state;
    rk_mqueue *q = make(2, 4, RK_BP_BLOCK, true, false);
    uint32_t v;
    size_t len;
    assert_int_equal(rk_mqueue_recv(q, &v, 4, &len, RK_NO_WAIT), RK_EEMPTY);
    assert_int_equal(rk_mqueue_recv(q, &v, 4, &len, 2000000), RK_ETIMEDOUT);
    send_u32(q, 1, 0, RK_OK);
    send_u32(q, 2, 0, RK_OK);
    v = 3;
    assert_int_equal(rk_mqueue_send(q, &v, 4, 0, RK_NO_WAIT), RK_EFULL);
    assert_int_equal(rk_mqueue_send(q, &v, 4, 0, 2000000), RK_ETIMEDOUT);
    /* Another band is not full. */
    assert_int_equal(rk_mqueue_send(q, &v, 4, 200, 2000000), RK_OK);
    expect_stats(q, 3, 0, 0, 2, 0, 3);
    assert_int_equal(recv_u32(q), 3);
    assert_int_equal(recv_u32(q), 1);
    assert_int_equal(recv_u32(q), 2);
    rk_mqueue_destroy(q);
}

static void
test_msgsize_and_gather(void **state)
{
    (void)state;
    rk_mqueue *q = make(4, 16, RK_BP_REJECT, false, false);
    struct rk_iov iov[3] = { { "head:", 5 }, { "", 0 }, { "payload", 8 } };
    assert_int_equal(rk_mqueue_sendv(q, iov, 3, 0, RK_NO_WAIT), RK_OK);
    char small[4], buf[16];
    size_t len = 0;
    /* Too small a buffer: RK_EMSGSIZE, the size, and the message stays. */
    assert_int_equal(
        rk_mqueue_recv(q, small, sizeof(small), &len, 0), RK_EMSGSIZE);
    assert_int_equal(len, 13);
    assert_int_equal(rk_mqueue_depth(q), 1);
    assert_int_equal(rk_mqueue_recv(q, buf, sizeof(buf), &len, 0), RK_OK);
    assert_int_equal(len, 13);
    assert_string_equal(buf, "head:payload");
    rk_mqueue_destroy(q);
}

static void
test_recv_batch(void **state)
{
    (void)state;
    rk_mqueue *q = make(8, 4, RK_BP_REJECT, true, false);
    send_u32(q, 1, 0, RK_OK);
    send_u32(q, 2, 100, RK_OK);
    send_u32(q, 3, 0, RK_OK);
    send_u32(q, 4, 255, RK_OK);
    uint32_t out[3];
    size_t lens[3], n;
    assert_int_equal(
        rk_mqueue_recv_batch(q, out, sizeof(uint32_t), lens, 3, &n, 0), RK_OK);
    assert_int_equal(n, 3);
    assert_int_equal(out[0], 4);
    assert_int_equal(out[1], 2);
    assert_int_equal(out[2], 1);
    assert_int_equal(lens[2], 4);
    assert_int_equal(
        rk_mqueue_recv_batch(q, out, sizeof(uint32_t), lens, 3, &n, 0), RK_OK);
    assert_int_equal(n, 1);
    assert_int_equal(out[0], 3);
    assert_int_equal(
        rk_mqueue_recv_batch(q, out, sizeof(uint32_t), lens, 3, &n, 0),
        RK_EEMPTY);
    assert_int_equal(n, 0);
    expect_stats(q, 4, 4, 0, 0, 0, 4);
    rk_mqueue_destroy(q);
}

static void
test_high_water(void **state)
{
    (void)state;
    rk_mqueue *q = make(8, 4, RK_BP_BLOCK, false, false);
    for (uint32_t i = 0; i < 3; i++)
        send_u32(q, i, 0, RK_OK);
    recv_u32(q);
    recv_u32(q);
    for (uint32_t i = 0; i < 4; i++)
        send_u32(q, i, 0, RK_OK); /* depth 1 -> 5 */
    expect_stats(q, 7, 2, 0, 0, 0, 5);
    for (uint32_t i = 0; i < 5; i++)
        recv_u32(q);
    for (uint32_t i = 0; i < 4; i++)
        send_u32(q, i, 0, RK_OK); /* depth 4 < 5 */
    expect_stats(q, 11, 7, 0, 0, 0, 5);
    rk_mqueue_destroy(q);
}

/* ---------------------------------------------------------- close */

typedef struct waiter {
    rk_mqueue *q;
    int rc;
    int is_send;
} waiter;

static void *
waiter_main(void *arg)
{
    waiter *w = arg;
    uint32_t v = 42;
    size_t len;
    if (w->is_send)
        w->rc = rk_mqueue_send(w->q, &v, 4, 0, RK_WAIT_FOREVER);
    else
        w->rc = rk_mqueue_recv(w->q, &v, 4, &len, RK_WAIT_FOREVER);
    return NULL;
}

static void
test_close_wakes_waiters(void **state)
{
    (void)state;
    /* A receiver waiting forever on an empty queue, and senders waiting
     * forever on a full one: close must release all of them, whether they
     * have parked yet or not. */
    rk_mqueue *rq = make(2, 4, RK_BP_BLOCK, false, false);
    rk_mqueue *sq = make(2, 4, RK_BP_BLOCK, false, false);
    send_u32(sq, 6, 0, RK_OK);
    send_u32(sq, 7, 0, RK_OK);
    waiter w[3] = { { rq, -1, 0 }, { sq, -1, 1 }, { sq, -1, 1 } };
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&t[i], NULL, waiter_main, &w[i]), 0);
    rk_mqueue_close(rq);
    rk_mqueue_close(sq);
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].rc, RK_ECLOSED);
    }
    assert_true(rk_mqueue_is_closed(sq));
    /* Sends fail; what is left drains, then RK_ECLOSED. */
    send_u32(sq, 8, 0, RK_ECLOSED);
    assert_int_equal(recv_u32(sq), 6);
    assert_int_equal(recv_u32(sq), 7);
    uint32_t v;
    size_t len;
    assert_int_equal(
        rk_mqueue_recv(sq, &v, 4, &len, RK_WAIT_FOREVER), RK_ECLOSED);
    rk_mqueue_close(sq); /* idempotent */
    expect_stats(sq, 2, 2, 0, 0, 0, 2);
    rk_mqueue_destroy(rq);
    rk_mqueue_destroy(sq);
}

/* ---------------------------------------------------------- parking */

typedef struct pingpong {
    rk_mqueue *to, *from;
    uint32_t rounds;
} pingpong;

static void *
echo_main(void *arg)
{
    pingpong *p = arg;
    for (uint32_t i = 0; i < p->rounds; i++) {
        uint32_t v;
        size_t len;
        if (rk_mqueue_recv(p->to, &v, 4, &len, RK_WAIT_FOREVER) != RK_OK)
            return (void *)1;
        v++;
        if (rk_mqueue_send(p->from, &v, 4, 0, RK_WAIT_FOREVER) != RK_OK)
            return (void *)2;
    }
    return NULL;
}

static void
test_pingpong_no_lost_wakeup(void **state)
{
    (void)state;
    /* Each side repeatedly finds its queue empty and parks while the other
     * sends; one lost wake-up hangs the test (the ctest timeout). */
    pingpong p = { make(2, 4, RK_BP_BLOCK, false, true),
        make(2, 4, RK_BP_BLOCK, false, true), 3000 * SCALE };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, echo_main, &p), 0);
    for (uint32_t i = 0; i < p.rounds; i++) {
        uint32_t v = i * 2;
        size_t len;
        assert_int_equal(
            rk_mqueue_send(p.to, &v, 4, 0, RK_WAIT_FOREVER), RK_OK);
        assert_int_equal(
            rk_mqueue_recv(p.from, &v, 4, &len, RK_WAIT_FOREVER), RK_OK);
        assert_int_equal(v, i * 2 + 1);
    }
    void *rc;
    pthread_join(t, &rc);
    assert_null(rc);
    rk_mqueue_destroy(p.to);
    rk_mqueue_destroy(p.from);
}

/* ---------------------------------------------------------- stress */

#define NPROD 4

typedef struct mstress {
    rk_mqueue *q;
    uint32_t per;
    uint32_t id;
    uint32_t ok, lost;
} mstress;

static void *
mstress_producer(void *arg)
{
    mstress *s = arg;
    for (uint32_t i = 0; i < s->per; i++) {
        uint32_t msg[2] = { s->id, i };
        /* Each producer keeps to one band, so its order is FIFO. */
        int rc = rk_mqueue_send(
            s->q, msg, sizeof(msg), (uint8_t)(s->id * 70), RK_WAIT_FOREVER);
        if (rc == RK_OK)
            s->ok++;
        else if (rc == RK_EDROPPED)
            s->lost++;
        else
            return (void *)1;
    }
    return NULL;
}

/* Runs NPROD producers (1 with sp) into q while this thread receives until
 * the producers are done and the queue is closed and drained. Checks per
 * producer order, no duplicates, and exact counter reconciliation. */
static void
run_mstress(rk_backpressure bp, bool bands, bool sp, uint32_t cap)
{
    rk_mqueue *q = make(cap, 8, bp, bands, sp);
    int np = sp ? 1 : NPROD;
    mstress s[NPROD];
    pthread_t t[NPROD];
    for (int i = 0; i < np; i++) {
        s[i] = (mstress) { q, 20000 * SCALE, (uint32_t)i, 0, 0 };
        assert_int_equal(
            pthread_create(&t[i], NULL, mstress_producer, &s[i]), 0);
    }
    int64_t next[NPROD] = { 0 };
    uint64_t got = 0;
    int done = 0;
    for (;;) {
        uint32_t buf[16][2];
        size_t lens[16], n;
        int rc = rk_mqueue_recv_batch(
            q, buf, sizeof(buf[0]), lens, 16, &n, 1000000);
        if (rc == RK_ECLOSED)
            break;
        if (rc == RK_ETIMEDOUT || rc == RK_OK) {
            for (size_t k = 0; k < n; k++) {
                assert_int_equal(lens[k], 8);
                assert_in_range(buf[k][0], 0, np - 1);
                /* In order per producer; with eviction gaps are allowed,
                 * duplicates and reordering never. */
                if (bp == RK_BP_DROP_OLDEST || bp == RK_BP_DROP_NEW)
                    assert_true((int64_t)buf[k][1] >= next[buf[k][0]]);
                else
                    assert_int_equal(buf[k][1], next[buf[k][0]]);
                next[buf[k][0]] = (int64_t)buf[k][1] + 1;
                got++;
            }
        } else {
            fail_msg("recv: %s", rk_err_name(rc));
        }
        if (!done) {
            uint64_t sent = 0;
            rk_queue_stats st;
            rk_mqueue_stats(q, &st);
            for (int i = 0; i < np; i++)
                sent += s[i].per;
            if (st.enqueued + st.dropped - st.evicted == sent) {
                for (int i = 0; i < np; i++) {
                    void *prc;
                    pthread_join(t[i], &prc);
                    assert_null(prc);
                }
                rk_mqueue_close(q);
                done = 1;
            }
        }
    }
    assert_true(done);
    uint64_t ok = 0, lost = 0;
    for (int i = 0; i < np; i++) {
        ok += s[i].ok;
        lost += s[i].lost;
        assert_int_equal(s[i].ok + s[i].lost, s[i].per);
    }
    rk_queue_stats st;
    rk_mqueue_stats(q, &st);
    assert_int_equal(st.depth, 0);
    assert_int_equal(st.enqueued, ok);
    assert_int_equal(st.dequeued, got);
    assert_int_equal(st.enqueued, st.dequeued + st.evicted + st.depth);
    assert_int_equal(st.rejected, 0);
    assert_true(st.high_water <= (uint64_t)cap * (bands ? 4 : 1));
    assert_true(st.high_water >= 1);
    if (bp == RK_BP_DROP_NEW) {
        assert_int_equal(st.dropped, lost);
        assert_int_equal(st.evicted, 0);
    } else {
        assert_int_equal(lost, 0);
        assert_int_equal(st.dropped, st.evicted);
    }
    if (bp == RK_BP_BLOCK)
        assert_int_equal(got, (uint64_t)np * s[0].per);
    rk_mqueue_destroy(q);
}

static void
test_stress_mpsc_block(void **state)
{
    (void)state;
    run_mstress(RK_BP_BLOCK, false, false, 8);
}

static void
test_stress_mpsc_block_bands(void **state)
{
    (void)state;
    run_mstress(RK_BP_BLOCK, true, false, 4);
}

static void
test_stress_spsc_block(void **state)
{
    (void)state;
    run_mstress(RK_BP_BLOCK, false, true, 16);
}

static void
test_stress_mpsc_drop_oldest(void **state)
{
    (void)state;
    run_mstress(RK_BP_DROP_OLDEST, true, false, 4);
}

static void
test_stress_mpsc_drop_new(void **state)
{
    (void)state;
    run_mstress(RK_BP_DROP_NEW, false, false, 4);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_defaults_and_empty_message),
        cmocka_unit_test(test_fifo_wraparound_no_bands),
        cmocka_unit_test(test_priority_band_mapping),
        cmocka_unit_test(test_priority_ordering),
        cmocka_unit_test(test_reject),
        cmocka_unit_test(test_drop_new),
        cmocka_unit_test(test_drop_oldest),
        cmocka_unit_test(test_drop_oldest_is_per_band),
        cmocka_unit_test(test_drop_oldest_stuck_head_times_out),
        cmocka_unit_test(test_send_batch),
        cmocka_unit_test(test_block_timeouts),
        cmocka_unit_test(test_msgsize_and_gather),
        cmocka_unit_test(test_recv_batch),
        cmocka_unit_test(test_high_water),
        cmocka_unit_test(test_close_wakes_waiters),
        cmocka_unit_test(test_pingpong_no_lost_wakeup),
        cmocka_unit_test(test_stress_mpsc_block),
        cmocka_unit_test(test_stress_mpsc_block_bands),
        cmocka_unit_test(test_stress_spsc_block),
        cmocka_unit_test(test_stress_mpsc_drop_oldest),
        cmocka_unit_test(test_stress_mpsc_drop_new),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
