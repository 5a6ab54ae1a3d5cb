/* rk_spsc and the ring_proto.h protocol it is built on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "ringkernel/queue.h"
#include "ringkernel/ring_proto.h"

#ifdef RK_DEBUG
#define STRESS_N 200000u
#else
#define STRESS_N 2000000u
#endif

static void
test_bad_arguments(void **state)
{
    (void)state;
    rk_spsc q;
    uint64_t buf[64];
    rk_spsc *qp = (rk_spsc *)&buf; /* must stay untouched on failure */
    assert_int_equal(rk_spsc_init(NULL, buf, 8, 8), RK_EINVAL);
    assert_int_equal(rk_spsc_init(&q, NULL, 8, 8), RK_EINVAL);
    assert_int_equal(rk_spsc_init(&q, buf, 0, 8), RK_EINVAL);
    assert_int_equal(rk_spsc_init(&q, buf, 6, 8), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "power of two"));
    assert_int_equal(rk_spsc_init(&q, buf, 8, 0), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "slot_size"));
    assert_int_equal(rk_spsc_create(NULL, 8, 8), RK_EINVAL);
    assert_int_equal(rk_spsc_create(&qp, 3, 8), RK_EINVAL);
    assert_null(qp);
    assert_int_equal(
        rk_spsc_create(&qp, UINT32_C(1) << 31, UINT32_MAX), RK_EINVAL);
    assert_int_equal(rk_spsc_buffer_size(8, 16), 128);
    rk_spsc_destroy(NULL);
    /* The out-of-line calls take NULL and empty batches without touching
     * memory (the inline hot paths, like ck's, do not check). */
    assert_int_equal(rk_spsc_init(&q, buf, 8, 8), RK_OK);
    assert_int_equal(rk_spsc_enqueue_batch(NULL, buf, 1), 0);
    assert_int_equal(rk_spsc_enqueue_batch(&q, NULL, 0), 0);
    assert_int_equal(rk_spsc_dequeue_batch(&q, NULL, 4), 0);
    assert_int_equal(rk_spsc_depth(NULL), 0);
    assert_int_equal(rk_spsc_depth(&q), 0);
}

static void
test_full_empty_wraparound(void **state)
{
    (void)state;
    rk_spsc q;
    uint32_t storage[4 * 3];
    assert_int_equal(
        rk_spsc_init(&q, storage, 4, 3 * sizeof(uint32_t)), RK_OK);
    uint32_t in[3], out[3];
    uint32_t next_in = 0, next_out = 0;
    assert_int_equal(rk_spsc_try_dequeue(&q, out), RK_EEMPTY);
    /* Many rounds with varying fill levels cross the wrap many times. */
    for (int round = 0; round < 50; round++) {
        int fill = 1 + round % 4;
        for (int i = 0; i < fill; i++) {
            in[0] = next_in;
            in[1] = ~next_in;
            in[2] = next_in * 7;
            next_in++;
            assert_int_equal(rk_spsc_try_enqueue(&q, in), RK_OK);
        }
        assert_int_equal(rk_spsc_depth(&q), fill);
        if (fill == 4)
            assert_int_equal(rk_spsc_try_enqueue(&q, in), RK_EFULL);
        for (int i = 0; i < fill; i++) {
            assert_int_equal(rk_spsc_try_dequeue(&q, out), RK_OK);
            assert_int_equal(out[0], next_out);
            assert_int_equal(out[1], ~next_out);
            assert_int_equal(out[2], next_out * 7);
            next_out++;
        }
        assert_int_equal(rk_spsc_try_dequeue(&q, out), RK_EEMPTY);
        assert_int_equal(rk_spsc_depth(&q), 0);
    }
}

static void
test_batch(void **state)
{
    (void)state;
    rk_spsc *q;
    assert_int_equal(rk_spsc_create(&q, 8, sizeof(uint64_t)), RK_OK);
    uint64_t in[20], out[20];
    for (int i = 0; i < 20; i++)
        in[i] = 1000 + (uint64_t)i;
    /* Offset the indices so the batches wrap mid-copy. */
    assert_int_equal(rk_spsc_enqueue_batch(q, in, 5), 5);
    assert_int_equal(rk_spsc_dequeue_batch(q, out, 5), 5);
    assert_memory_equal(in, out, 5 * sizeof(uint64_t));
    assert_int_equal(rk_spsc_enqueue_batch(q, in + 5, 20), 8);
    assert_int_equal(rk_spsc_enqueue_batch(q, in, 1), 0);
    assert_int_equal(rk_spsc_dequeue_batch(q, out, 3), 3);
    assert_int_equal(rk_spsc_enqueue_batch(q, in + 13, 7), 3);
    assert_int_equal(rk_spsc_dequeue_batch(q, out + 3, 20), 8);
    assert_memory_equal(in + 5, out, 11 * sizeof(uint64_t));
    assert_int_equal(rk_spsc_dequeue_batch(q, out, 4), 0);
    assert_int_equal(rk_spsc_enqueue_batch(q, in, 0), 0);
    rk_spsc_destroy(q);
}

static void
test_reserve_commit_peek_release(void **state)
{
    (void)state;
    rk_spsc *q;
    assert_int_equal(rk_spsc_create(&q, 2, 32), RK_OK);
    assert_null(rk_spsc_peek(q));
    char *a = rk_spsc_reserve(q);
    assert_non_null(a);
    /* An uncommitted reserve is invisible and reserving again gives the
     * same slot. */
    assert_null(rk_spsc_peek(q));
    assert_ptr_equal(rk_spsc_reserve(q), a);
    strcpy(a, "first");
    rk_spsc_commit(q);
    char *b = rk_spsc_reserve(q);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    strcpy(b, "second");
    rk_spsc_commit(q);
    assert_null(rk_spsc_reserve(q));
    const char *p = rk_spsc_peek(q);
    assert_ptr_equal(p, a);
    assert_string_equal(p, "first");
    rk_spsc_release(q);
    assert_string_equal(rk_spsc_peek(q), "second");
    rk_spsc_release(q);
    assert_null(rk_spsc_peek(q));
    rk_spsc_destroy(q);
}

/* ---------------------------------------------------------- stress */

typedef struct stress {
    rk_spsc *q;
    uint32_t n;
    int batch;
} stress;

static void *
stress_producer(void *arg)
{
    stress *s = arg;
    uint64_t buf[16];
    uint64_t next = 0;
    while (next < s->n) {
        if (s->batch) {
            uint32_t k = 1 + (uint32_t)(next % 16);
            if (k > s->n - next)
                k = (uint32_t)(s->n - next);
            for (uint32_t i = 0; i < k; i++)
                buf[i] = next + i;
            next += rk_spsc_enqueue_batch(s->q, buf, k);
        } else if ((next & 1) == 0) {
            if (rk_spsc_try_enqueue(s->q, &next) == RK_OK)
                next++;
        } else {
            uint64_t *slot = rk_spsc_reserve(s->q);
            if (slot != NULL) {
                *slot = next++;
                rk_spsc_commit(s->q);
            }
        }
        rk__cpu_relax();
    }
    return NULL;
}

static void
run_stress(int batch)
{
    stress s = { NULL, STRESS_N, batch };
    assert_int_equal(rk_spsc_create(&s.q, 64, sizeof(uint64_t)), RK_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stress_producer, &s), 0);
    uint64_t expect = 0, buf[16];
    while (expect < s.n) {
        if (batch) {
            uint32_t k = rk_spsc_dequeue_batch(s.q, buf, 1 + expect % 16);
            for (uint32_t i = 0; i < k; i++)
                assert_int_equal(buf[i], expect++);
        } else if ((expect & 1) == 0) {
            if (rk_spsc_try_dequeue(s.q, buf) == RK_OK)
                assert_int_equal(buf[0], expect++);
        } else {
            const uint64_t *p = rk_spsc_peek(s.q);
            if (p != NULL) {
                assert_int_equal(*p, expect++);
                rk_spsc_release(s.q);
            }
        }
    }
    pthread_join(t, NULL);
    assert_int_equal(rk_spsc_try_dequeue(s.q, buf), RK_EEMPTY);
    rk_spsc_destroy(s.q);
}

static void
test_stress_two_threads(void **state)
{
    (void)state;
    run_stress(0);
}

static void
test_stress_two_threads_batch(void **state)
{
    (void)state;
    run_stress(1);
}

/* ---------------------------------------------------------- ring_proto */

/*
 * The raw protocol as a GPU would use it: a "device" thread owns the
 * consumer side state privately, the "host" thread the producer side; they
 * share only the control block and the slot array, exactly as mapped
 * pinned memory would be shared. TSan checks every access.
 */
typedef struct proto_shared {
    rk_ring_ctrl ctrl;
    unsigned char slots[16][24];
    uint32_t n;
    uint64_t sum;
} proto_shared;

static void *
proto_device(void *arg)
{
    proto_shared *sh = arg;
    rk_ring_side me;
    rk_ring_cons_attach(&sh->ctrl, &me, &sh->slots[0][0]);
    uint32_t got = 0;
    while (got < sh->n) {
        uint32_t k = rk_ring_cons_avail(&sh->ctrl, &me, 4);
        for (uint32_t i = 0; i < k; i++) {
            uint64_t v, chk;
            const unsigned char *slot = rk_ring_slot(&me, me.pos + i);
            memcpy(&v, slot, 8);
            memcpy(&chk, slot + 16, 8);
            if (v != got + i || chk != ~v)
                return (void *)1;
            sh->sum += v;
        }
        if (k > 0)
            rk_ring_cons_release(&sh->ctrl, &me, k);
        got += k;
    }
    return NULL;
}

static void
test_ring_proto_host_device(void **state)
{
    (void)state;
    proto_shared *sh = aligned_alloc(64, sizeof(*sh));
    assert_non_null(sh);
    memset(sh, 0, sizeof(*sh));
    rk_ring_init(&sh->ctrl, 16, 24);
    sh->n = STRESS_N / 4;
    assert_int_equal(sh->ctrl.magic, RK_RING_MAGIC);
    pthread_t dev;
    assert_int_equal(pthread_create(&dev, NULL, proto_device, sh), 0);
    rk_ring_side me;
    rk_ring_prod_attach(&sh->ctrl, &me, &sh->slots[0][0]);
    uint64_t next = 0;
    while (next < sh->n) {
        uint32_t want = 1 + (uint32_t)(next % 5);
        if (want > sh->n - next)
            want = (uint32_t)(sh->n - next);
        uint32_t k = rk_ring_prod_space(&sh->ctrl, &me, want);
        for (uint32_t i = 0; i < k; i++) {
            uint64_t v = next + i, chk = ~v;
            unsigned char *slot = rk_ring_slot(&me, me.pos + i);
            memcpy(slot, &v, 8);
            memcpy(slot + 16, &chk, 8);
        }
        if (k > 0)
            rk_ring_prod_publish(&sh->ctrl, &me, k);
        next += k;
    }
    void *bad;
    pthread_join(dev, &bad);
    assert_null(bad);
    uint64_t n = sh->n;
    assert_int_equal(sh->sum, n * (n - 1) / 2);
    assert_int_equal(rk_ring_load_relaxed(&sh->ctrl.head), n);
    assert_int_equal(rk_ring_load_relaxed(&sh->ctrl.tail), n);
    free(sh);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_full_empty_wraparound),
        cmocka_unit_test(test_batch),
        cmocka_unit_test(test_reserve_commit_peek_release),
        cmocka_unit_test(test_stress_two_threads),
        cmocka_unit_test(test_stress_two_threads_batch),
        cmocka_unit_test(test_ring_proto_host_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
