/* The kernel's inbox (src/queue/inbox.h) and output queue
 * (src/runtime/outq.h), continued from test_queue_inbox.c: placement in
 * caller memory, slot alignment and size checks, many senders through
 * the lock, and the slots' ready flags under stress. Worker threads never
 * call cmocka: they count failed checks in an atomic. */
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
#include "worker_check.h"

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
