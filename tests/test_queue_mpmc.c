/* rk_mpsc and rk_mpmc: Vyukov bounded queues. */
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
#include "ringkernel/queue.h"

#ifdef RK_DEBUG
#define PER_PRODUCER 20000u
#else
#define PER_PRODUCER 200000u
#endif
#define NPROD 3
#define NCONS 3

/* The two kinds behind one table so every test runs on both. */
typedef struct ops {
    const char *name;
    int (*create)(void **, uint32_t, uint32_t);
    void (*destroy)(void *);
    int (*enq)(void *, const void *);
    int (*deq)(void *, void *);
    uint32_t (*enq_batch)(void *, const void *, uint32_t);
    uint32_t (*deq_batch)(void *, void *, uint32_t);
    void *(*reserve)(void *, uint64_t *);
    void (*commit)(void *, uint64_t);
    size_t (*depth)(const void *);
    void (*stats)(const void *, rk_queue_stats *);
} ops;

/* Wrappers with void * handles, so the table calls through exact types. */
#define WRAP(kind)                                                            \
    static int kind##_create(void **q, uint32_t c, uint32_t s)                \
    {                                                                         \
        return rk_##kind##_create((rk_##kind **)q, c, s);                     \
    }                                                                         \
    static void kind##_destroy(void *q)                                       \
    {                                                                         \
        rk_##kind##_destroy(q);                                               \
    }                                                                         \
    static int kind##_enq(void *q, const void *e)                             \
    {                                                                         \
        return rk_##kind##_try_enqueue(q, e);                                 \
    }                                                                         \
    static int kind##_deq(void *q, void *e)                                   \
    {                                                                         \
        return rk_##kind##_try_dequeue(q, e);                                 \
    }                                                                         \
    static uint32_t kind##_enq_batch(void *q, const void *e, uint32_t n)      \
    {                                                                         \
        return rk_##kind##_enqueue_batch(q, e, n);                            \
    }                                                                         \
    static uint32_t kind##_deq_batch(void *q, void *e, uint32_t n)            \
    {                                                                         \
        return rk_##kind##_dequeue_batch(q, e, n);                            \
    }                                                                         \
    static void *kind##_reserve(void *q, uint64_t *t)                         \
    {                                                                         \
        return rk_##kind##_reserve(q, t);                                     \
    }                                                                         \
    static void kind##_commit(void *q, uint64_t t)                            \
    {                                                                         \
        rk_##kind##_commit(q, t);                                             \
    }                                                                         \
    static size_t kind##_depth(const void *q)                                 \
    {                                                                         \
        return rk_##kind##_depth(q);                                          \
    }                                                                         \
    static void kind##_stats(const void *q, rk_queue_stats *s)                \
    {                                                                         \
        rk_##kind##_stats(q, s);                                              \
    }
WRAP(mpsc)
WRAP(mpmc)
#define OPS(kind)                                                             \
    {                                                                         \
#kind, kind##_create, kind##_destroy, kind##_enq, kind##_deq,         \
            kind##_enq_batch, kind##_deq_batch, kind##_reserve,               \
            kind##_commit, kind##_depth, kind##_stats                         \
    }
static const ops kinds[2] = { OPS(mpsc), OPS(mpmc) };

static void
test_bad_arguments(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++) {
        const ops *o = &kinds[k];
        void *q = &q;
        assert_int_equal(o->create(NULL, 8, 8), RK_EINVAL);
        assert_int_equal(o->create(&q, 0, 8), RK_EINVAL);
        assert_null(q);
        assert_int_equal(o->create(&q, 1, 8), RK_EINVAL);
        assert_int_equal(o->create(&q, 24, 8), RK_EINVAL);
        assert_int_equal(o->create(&q, 8, 0), RK_EINVAL);
        o->destroy(NULL);
        /* NULL handles and buffers: error codes, never a crash. */
        uint64_t e = 0, t = 0;
        assert_int_equal(o->enq(NULL, &e), RK_EINVAL);
        assert_non_null(strstr(rk_errdetail(), "NULL queue"));
        assert_int_equal(o->deq(NULL, &e), RK_EINVAL);
        assert_int_equal(o->enq_batch(NULL, &e, 1), 0);
        assert_int_equal(o->deq_batch(NULL, &e, 1), 0);
        assert_null(o->reserve(NULL, &t));
        o->commit(NULL, 0);
        assert_int_equal(o->depth(NULL), 0);
        rk_queue_stats st;
        memset(&st, 0xff, sizeof(st));
        o->stats(NULL, &st);
        assert_int_equal(st.enqueued, 0);
        assert_int_equal(st.high_water, 0);
        assert_int_equal(o->create(&q, 4, 8), RK_OK);
        assert_int_equal(o->enq(q, NULL), RK_EINVAL);
        assert_non_null(strstr(rk_errdetail(), "NULL element"));
        assert_int_equal(o->deq(q, NULL), RK_EINVAL);
        assert_int_equal(o->enq_batch(q, NULL, 2), 0);
        assert_int_equal(o->deq_batch(q, NULL, 2), 0);
        assert_null(o->reserve(q, NULL));
        o->stats(q, NULL);
        o->stats(q, &st);
        assert_int_equal(st.enqueued, 0);
        assert_int_equal(st.rejected, 0);
        o->destroy(q);
    }
}

static void
expect_stats(const ops *o, void *q, uint64_t enq, uint64_t deq,
    uint64_t rejected, uint64_t hw)
{
    rk_queue_stats s;
    o->stats(q, &s);
    assert_int_equal(s.enqueued, enq);
    assert_int_equal(s.dequeued, deq);
    assert_int_equal(s.rejected, rejected);
    assert_int_equal(s.high_water, hw);
    assert_int_equal(s.depth, enq - deq);
    assert_int_equal(o->depth(q), s.depth);
    assert_int_equal(s.dropped, 0);
    assert_int_equal(s.evicted, 0);
}

static void
test_stats(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++) {
        const ops *o = &kinds[k];
        void *q;
        assert_int_equal(o->create(&q, 4, sizeof(uint64_t)), RK_OK);
        uint64_t in[6] = { 1, 2, 3, 4, 5, 6 }, out[6], t;
        expect_stats(o, q, 0, 0, 0, 0);
        assert_int_equal(o->enq(q, in), RK_OK);
        assert_int_equal(o->enq(q, in), RK_OK);
        expect_stats(o, q, 2, 0, 0, 2);
        assert_int_equal(o->deq(q, out), RK_OK);
        assert_int_equal(o->deq(q, out), RK_OK);
        expect_stats(o, q, 2, 2, 0, 2);
        assert_int_equal(o->enq_batch(q, in, 6), 4); /* 2 refused */
        expect_stats(o, q, 6, 2, 2, 4);
        assert_int_equal(o->enq(q, in), RK_EFULL);
        assert_null(o->reserve(q, &t));
        expect_stats(o, q, 6, 2, 4, 4);
        assert_int_equal(o->deq_batch(q, out, 6), 4);
        expect_stats(o, q, 6, 6, 4, 4);
        uint64_t *slot = o->reserve(q, &t);
        assert_non_null(slot);
        expect_stats(o, q, 7, 6, 4, 4); /* reserved counts as enqueued */
        *slot = 9;
        o->commit(q, t);
        assert_int_equal(o->deq(q, out), RK_OK);
        assert_int_equal(out[0], 9);
        expect_stats(o, q, 7, 7, 4, 4);
        o->destroy(q);
    }
}

static void
test_full_empty_wraparound(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++) {
        const ops *o = &kinds[k];
        void *q;
        assert_int_equal(o->create(&q, 4, 12), RK_OK);
        uint32_t in[3], out[3], next_in = 0, next_out = 0;
        assert_int_equal(o->deq(q, out), RK_EEMPTY);
        for (int round = 0; round < 40; round++) {
            int fill = 1 + round % 4;
            for (int i = 0; i < fill; i++) {
                in[0] = next_in;
                in[1] = ~next_in;
                in[2] = next_in++ * 3;
                assert_int_equal(o->enq(q, in), RK_OK);
            }
            assert_int_equal(o->depth(q), fill);
            if (fill == 4)
                assert_int_equal(o->enq(q, in), RK_EFULL);
            for (int i = 0; i < fill; i++) {
                assert_int_equal(o->deq(q, out), RK_OK);
                assert_int_equal(out[0], next_out);
                assert_int_equal(out[1], ~next_out);
                assert_int_equal(out[2], next_out++ * 3);
            }
            assert_int_equal(o->deq(q, out), RK_EEMPTY);
        }
        o->destroy(q);
    }
}

static void
test_batch_and_reserve(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++) {
        const ops *o = &kinds[k];
        void *q;
        assert_int_equal(o->create(&q, 8, sizeof(uint64_t)), RK_OK);
        uint64_t in[12], out[12];
        for (int i = 0; i < 12; i++)
            in[i] = 500 + (uint64_t)i;
        assert_int_equal(o->enq_batch(q, in, 5), 5);
        assert_int_equal(o->deq_batch(q, out, 3), 3);
        assert_memory_equal(in, out, 3 * sizeof(uint64_t));
        assert_int_equal(o->enq_batch(q, in + 5, 12), 6); /* 2 + 6 = 8 */
        assert_int_equal(o->enq_batch(q, in, 1), 0);
        uint64_t t;
        assert_null(o->reserve(q, &t));
        assert_int_equal(o->deq_batch(q, out, 12), 8);
        assert_memory_equal(in + 3, out, 8 * sizeof(uint64_t));
        assert_int_equal(o->deq_batch(q, out, 1), 0);

        /* Zero copy: a claimed but uncommitted slot blocks the consumer
         * at that position and no further. */
        uint64_t t1, t2;
        uint64_t *a = o->reserve(q, &t1);
        uint64_t *b = o->reserve(q, &t2);
        assert_non_null(a);
        assert_non_null(b);
        assert_int_equal(t2, t1 + 1);
        *b = 2;
        o->commit(q, t2);
        assert_int_equal(o->deq(q, out), RK_EEMPTY);
        *a = 1;
        o->commit(q, t1);
        assert_int_equal(o->deq(q, out), RK_OK);
        assert_int_equal(out[0], 1);
        assert_int_equal(o->deq(q, out), RK_OK);
        assert_int_equal(out[0], 2);
        assert_null(o->reserve(q, NULL));
        o->destroy(q);
    }
}

/* rk_spsc_stats lives beside these (the spsc tests belong to another
 * change): positions only, rejected and high_water read 0. */
static void
test_spsc_stats(void **state)
{
    (void)state;
    rk_spsc *q;
    rk_queue_stats st;
    assert_int_equal(rk_spsc_create(&q, 4, sizeof(uint32_t)), RK_OK);
    uint32_t in[6] = { 1, 2, 3, 4, 5, 6 }, out[6];
    for (int round = 0; round < 3; round++) {
        assert_int_equal(rk_spsc_enqueue_batch(q, in, 6), 4);
        assert_int_equal(rk_spsc_try_enqueue(q, in), RK_EFULL);
        assert_int_equal(rk_spsc_try_dequeue(q, out), RK_OK);
        rk_spsc_stats(q, &st);
        assert_int_equal(st.enqueued, 4 * (uint64_t)round + 4);
        assert_int_equal(st.dequeued, 4 * (uint64_t)round + 1);
        assert_int_equal(st.depth, 3);
        assert_int_equal(st.depth, rk_spsc_depth(q));
        assert_int_equal(st.rejected + st.high_water + st.dropped, 0);
        assert_int_equal(rk_spsc_dequeue_batch(q, out, 6), 3);
    }
    rk_spsc_stats(q, &st);
    assert_int_equal(st.enqueued, st.dequeued);
    assert_int_equal(st.depth, 0);
    memset(&st, 0xff, sizeof(st));
    rk_spsc_stats(NULL, &st);
    assert_int_equal(st.enqueued + st.depth, 0);
    rk_spsc_stats(q, NULL);
    rk_spsc_destroy(q);
}

/* ---------------------------------------------------------- stress */

typedef struct shared {
    const ops *o;
    void *q;
    _Atomic uint32_t producers_left;
    _Atomic uint64_t consumed;
    _Atomic uint64_t sum;
    _Atomic uint64_t refused; /* elements the queue refused, full */
    _Atomic uint32_t errors;  /* checks failed in worker threads */
} shared;

/* cmocka's asserts longjmp and are not thread-safe: workers count failed
 * checks here and the main thread asserts the count is zero. */
#define CHECK(sh, cond)                                                       \
    do {                                                                      \
        if (!(cond))                                                          \
            atomic_fetch_add(&(sh)->errors, 1);                               \
    } while (0)

typedef struct prod {
    shared *sh;
    uint32_t id;
} prod;

static void *
producer(void *arg)
{
    prod *p = arg;
    const ops *o = p->sh->o;
    uint64_t batch[8];
    uint32_t i = 0;
    uint64_t refused = 0;
    while (i < PER_PRODUCER) {
        if (i % 3 == 0) {
            uint32_t k = PER_PRODUCER - i < 8 ? PER_PRODUCER - i : 8;
            for (uint32_t j = 0; j < k; j++)
                batch[j] = ((uint64_t)p->id << 32) | (i + j);
            uint32_t got = o->enq_batch(p->sh->q, batch, k);
            i += got;
            refused += k - got;
        } else {
            uint64_t v = ((uint64_t)p->id << 32) | i;
            int rc = o->enq(p->sh->q, &v);
            CHECK(p->sh, rc == RK_OK || rc == RK_EFULL);
            if (rc == RK_OK)
                i++;
            else
                refused++;
        }
        rk__cpu_relax();
    }
    atomic_fetch_add(&p->sh->refused, refused);
    atomic_fetch_sub(&p->sh->producers_left, 1);
    return NULL;
}

typedef struct cons {
    shared *sh;
    int64_t last[NPROD]; /* last sequence seen per producer */
    uint64_t count;
    unsigned char *seen; /* [NPROD][PER_PRODUCER], shared by consumers */
} cons;

static void
consume_one(cons *c, uint64_t v)
{
    uint32_t id = (uint32_t)(v >> 32), seq = (uint32_t)v;
    if (id >= NPROD || seq >= PER_PRODUCER) {
        atomic_fetch_add(&c->sh->errors, 1);
        return;
    }
    /* Each consumer sees each producer's items in increasing order. */
    CHECK(c->sh, (int64_t)seq > c->last[id]);
    c->last[id] = seq;
    /* Nobody else received this one (seen is touched by one thread per
     * item because items are unique; a duplicate is counted). */
    unsigned char *s = &c->seen[(size_t)id * PER_PRODUCER + seq];
    CHECK(c->sh, *s == 0);
    *s = 1;
    c->count++;
    atomic_fetch_add(&c->sh->sum, seq);
}

static void *
consumer(void *arg)
{
    cons *c = arg;
    const ops *o = c->sh->o;
    uint64_t buf[8];
    for (;;) {
        uint32_t n = o->deq_batch(c->sh->q, buf, 1 + c->count % 8);
        for (uint32_t i = 0; i < n; i++)
            consume_one(c, buf[i]);
        if (n == 0) {
            /* Once every producer is done, everything is published: drain
             * until empty. (The item a final probe takes must be consumed,
             * not discarded.) */
            if (atomic_load(&c->sh->producers_left) == 0) {
                if (o->deq(c->sh->q, buf) == RK_EEMPTY)
                    break;
                consume_one(c, buf[0]);
                continue;
            }
            rk__cpu_relax();
        }
    }
    atomic_fetch_add(&c->sh->consumed, c->count);
    return NULL;
}

static void
run_stress(int kind, int ncons)
{
    shared sh = { &kinds[kind], NULL, NPROD, 0, 0, 0, 0 };
    assert_int_equal(sh.o->create(&sh.q, 64, sizeof(uint64_t)), RK_OK);
    unsigned char *seen = calloc((size_t)NPROD * PER_PRODUCER, 1);
    assert_non_null(seen);
    pthread_t pt[NPROD], ct[NCONS];
    prod p[NPROD];
    cons c[NCONS];
    for (int i = 0; i < ncons; i++) {
        c[i] = (cons) { &sh, { -1, -1, -1 }, 0, seen };
        assert_int_equal(pthread_create(&ct[i], NULL, consumer, &c[i]), 0);
    }
    for (uint32_t i = 0; i < NPROD; i++) {
        p[i] = (prod) { &sh, i };
        assert_int_equal(pthread_create(&pt[i], NULL, producer, &p[i]), 0);
    }
    for (int i = 0; i < NPROD; i++)
        pthread_join(pt[i], NULL);
    for (int i = 0; i < ncons; i++)
        pthread_join(ct[i], NULL);
    assert_int_equal(atomic_load(&sh.errors), 0);
    /* Conservation: everything arrived exactly once. */
    uint64_t total = (uint64_t)NPROD * PER_PRODUCER;
    assert_int_equal(atomic_load(&sh.consumed), total);
    assert_int_equal(atomic_load(&sh.sum),
        (uint64_t)NPROD * PER_PRODUCER * (PER_PRODUCER - 1) / 2);
    for (size_t i = 0; i < total; i++)
        assert_int_equal(seen[i], 1);
    assert_int_equal(sh.o->depth(sh.q), 0);
    /* The counters reconcile with what the threads saw. */
    rk_queue_stats st;
    sh.o->stats(sh.q, &st);
    assert_int_equal(st.enqueued, total);
    assert_int_equal(st.dequeued, total);
    assert_int_equal(st.depth, 0);
    assert_int_equal(st.rejected, atomic_load(&sh.refused));
    assert_in_range(st.high_water, 1, 64);
    free(seen);
    sh.o->destroy(sh.q);
}

static void
test_stress_mpsc(void **state)
{
    (void)state;
    run_stress(0, 1);
}

static void
test_stress_mpmc(void **state)
{
    (void)state;
    run_stress(1, NCONS);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_full_empty_wraparound),
        cmocka_unit_test(test_batch_and_reserve),
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_spsc_stats),
        cmocka_unit_test(test_stress_mpsc),
        cmocka_unit_test(test_stress_mpmc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
