/* The eventcount (src/common/ec.h): the no-lost-wake-up property under
 * stress (run under TSan by `make tsan`; a lost wake-up hangs, and the
 * ctest TIMEOUT fails the test), in both barrier modes (seq_cst fences,
 * and membarrier's asymmetric pair once rk__barrier_init registered it),
 * and deterministic cases: a notify between prepare and wait makes the
 * wait return at once, from the same thread and from another one. Worker
 * threads never call cmocka: they count failed checks in an atomic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "common/barrier.h"
#include "common/common.h"
#include "common/ec.h"
#include "worker_check.h"

#ifdef RK_DEBUG
#define ROUNDS 20000u
#else
#define ROUNDS 200000u
#endif

/* ------------------------------------------------ ping-pong on two ecs */

/* Two threads pass a turn back and forth; each waits for its turn with
 * the full protocol (no spinning first, so nearly every wait goes through
 * prepare / re-check / wait), the other makes the turn its partner's and
 * notifies. A lost wake-up leaves both asleep: the test hangs. */
typedef struct pp {
    _Atomic uint32_t turn; /* whose turn: 0 or 1 */
    rk__ec ec[2];          /* ec[i]: thread i waits here */
    uint64_t payload;      /* plain data handed over with the turn */
    uint32_t rounds;
} pp;

typedef struct pp_arg {
    pp *p;
    uint32_t me;
} pp_arg;

static void
wait_turn(pp *p, uint32_t me)
{
    for (;;) {
        /* Acquire pairs with the release store of turn by the partner:
         * the payload it wrote is visible. */
        if (atomic_load_explicit(&p->turn, memory_order_acquire) == me)
            return;
        uint32_t key = rk__ec_prepare(&p->ec[me]);
        if (atomic_load_explicit(&p->turn, memory_order_acquire) == me) {
            rk__ec_cancel(&p->ec[me]);
            return;
        }
        CHECK(rk__ec_wait(&p->ec[me], key, UINT64_MAX) == RK_OK);
    }
}

static void *
pp_thread(void *arg)
{
    pp_arg *a = arg;
    pp *p = a->p;
    uint32_t other = 1 - a->me;

    for (uint32_t i = 0; i < p->rounds; i++) {
        wait_turn(p, a->me);
        CHECK(p->payload == (uint64_t)i * 2 + a->me);
        p->payload++;
        atomic_store_explicit(&p->turn, other, memory_order_release);
        rk__ec_notify(&p->ec[other]);
    }
    return NULL;
}

static void
run_pingpong(uint32_t rounds)
{
    pp p = { .rounds = rounds };
    pp_arg a[2] = { { &p, 0 }, { &p, 1 } };
    pthread_t t[2];

    atomic_init(&p.turn, 0);
    rk__ec_init(&p.ec[0]);
    rk__ec_init(&p.ec[1]);
    atomic_store(&worker_errors, 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, pp_thread, &a[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&worker_errors), 0);
    assert_int_equal(p.payload, (uint64_t)rounds * 2);
    /* Every wait withdrew its announcement. */
    assert_int_equal(atomic_load(&p.ec[0].waiters), 0);
    assert_int_equal(atomic_load(&p.ec[1].waiters), 0);
}

/* The fallback: seq_cst fences on both sides (membarrier not registered
 * yet: this test runs first in the process). */
static void
test_pingpong_fences(void **state)
{
    (void)state;
    run_pingpong(ROUNDS / 4);
}

/* The asymmetric pair (compiler barrier / membarrier) where the kernel
 * offers it; else fences again. */
static void
test_pingpong_membarrier(void **state)
{
    (void)state;
    rk__barrier_init();
    run_pingpong(ROUNDS / 4);
}

/* ------------------------------------- producer / consumer of a counter */

/* Producers add to a counter and notify (one waiter: rk__ec_notify);
 * one consumer waits until the counter passes what it has consumed. The
 * consumer must see every unit and must never sleep through the last
 * one. */
typedef struct pc {
    _Atomic uint64_t produced;
    rk__ec ec;
    uint32_t per_producer;
} pc;

static void *
producer(void *arg)
{
    pc *c = arg;

    for (uint32_t i = 0; i < c->per_producer; i++) {
        atomic_fetch_add_explicit(&c->produced, 1, memory_order_release);
        rk__ec_notify(&c->ec);
    }
    return NULL;
}

static void
test_producers_consumer(void **state)
{
    enum { NP = 3 };
    pc c = { .per_producer = ROUNDS / 2 };
    pthread_t t[NP];
    uint64_t consumed = 0, total = (uint64_t)NP * c.per_producer;
    uint64_t sleeps = 0;

    (void)state;
    rk__barrier_init();
    atomic_init(&c.produced, 0);
    rk__ec_init(&c.ec);
    for (int i = 0; i < NP; i++)
        assert_int_equal(pthread_create(&t[i], NULL, producer, &c), 0);
    while (consumed < total) {
        uint64_t now = atomic_load_explicit(&c.produced, memory_order_acquire);
        if (now > consumed) {
            consumed = now;
            continue;
        }
        uint32_t key = rk__ec_prepare(&c.ec);
        if (atomic_load_explicit(&c.produced, memory_order_acquire)
            > consumed) {
            rk__ec_cancel(&c.ec);
            continue;
        }
        assert_int_equal(rk__ec_wait(&c.ec, key, UINT64_MAX), RK_OK);
        sleeps++;
    }
    for (int i = 0; i < NP; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(consumed, total);
    assert_int_equal(atomic_load(&c.ec.waiters), 0);
    (void)sleeps;
}

/* --------------------------------------------- notify_all, many waiters */

typedef struct gen {
    _Atomic uint32_t gen;
    rk__ec ec;
    uint32_t rounds;
    _Atomic uint32_t acks;
} gen;

static void *
gen_waiter(void *arg)
{
    gen *g = arg;

    for (uint32_t want = 1; want <= g->rounds; want++) {
        for (;;) {
            if (atomic_load_explicit(&g->gen, memory_order_acquire) >= want)
                break;
            uint32_t key = rk__ec_prepare(&g->ec);
            if (atomic_load_explicit(&g->gen, memory_order_acquire) >= want) {
                rk__ec_cancel(&g->ec);
                break;
            }
            CHECK(rk__ec_wait(&g->ec, key, UINT64_MAX) == RK_OK);
        }
        atomic_fetch_add_explicit(&g->acks, 1, memory_order_release);
    }
    return NULL;
}

/* Each generation is announced with one notify_all; every waiter must
 * see each one (the announcer waits for all acknowledgements by
 * spinning, so nothing but the eventcount puts a waiter to sleep). */
static void
test_notify_all(void **state)
{
    enum { NW = 3 };
    gen g = { .rounds = ROUNDS / 100 };
    pthread_t t[NW];

    (void)state;
    atomic_init(&g.gen, 0);
    atomic_init(&g.acks, 0);
    rk__ec_init(&g.ec);
    atomic_store(&worker_errors, 0);
    for (int i = 0; i < NW; i++)
        assert_int_equal(pthread_create(&t[i], NULL, gen_waiter, &g), 0);
    for (uint32_t r = 1; r <= g.rounds; r++) {
        atomic_store_explicit(&g.gen, r, memory_order_release);
        rk__ec_notify_all(&g.ec);
        while (atomic_load_explicit(&g.acks, memory_order_acquire) < r * NW)
            rk__cpu_relax();
    }
    for (int i = 0; i < NW; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&worker_errors), 0);
    assert_int_equal(atomic_load(&g.ec.waiters), 0);
}

/* ------------------------------------------------------ deterministic */

/* prepare, notify (same thread), wait: the wait returns at once, with
 * RK_OK, even with no deadline (a lost notify would sleep forever). */
static void
test_notify_between_prepare_and_wait(void **state)
{
    rk__ec ec;
    uint32_t seq0;

    (void)state;
    rk__ec_init(&ec);
    seq0 = atomic_load(&ec.seq);
    uint32_t key = rk__ec_prepare(&ec);
    assert_int_equal(atomic_load(&ec.waiters), 1);
    rk__ec_notify(&ec); /* sees the waiter: bumps seq */
    assert_int_not_equal(atomic_load(&ec.seq), seq0);
    assert_int_equal(rk__ec_wait(&ec, key, UINT64_MAX), RK_OK);
    assert_int_equal(atomic_load(&ec.waiters), 0);
}

/* A notify with nobody prepared costs nothing and changes nothing; a
 * wait with no notify times out at its deadline; cancel withdraws. */
static void
test_idle_notify_and_timeout(void **state)
{
    rk__ec ec;

    (void)state;
    rk__ec_init(&ec);
    rk__ec_notify(&ec);
    rk__ec_notify_all(&ec);
    assert_int_equal(atomic_load(&ec.seq), 0);
    uint32_t key = rk__ec_prepare(&ec);
    assert_int_equal(
        rk__ec_wait(&ec, key, rk_now_ns() + 1000000), RK_ETIMEDOUT);
    assert_int_equal(atomic_load(&ec.waiters), 0);
    key = rk__ec_prepare(&ec);
    rk__ec_cancel(&ec);
    assert_int_equal(atomic_load(&ec.waiters), 0);
    (void)key;
}

/* The same from another thread: the waiter prepares and says so; the
 * notifier notifies and says so; only then does the waiter wait (with no
 * deadline). Ordered by atomics, not by sleeps. */
typedef struct xt {
    rk__ec ec;
    _Atomic int prepared, notified;
} xt;

static void *
xt_notifier(void *arg)
{
    xt *x = arg;

    while (!atomic_load_explicit(&x->prepared, memory_order_acquire))
        rk__cpu_relax();
    rk__ec_notify(&x->ec);
    atomic_store_explicit(&x->notified, 1, memory_order_release);
    return NULL;
}

static void
test_notify_from_other_thread(void **state)
{
    xt x;
    pthread_t t;

    (void)state;
    rk__ec_init(&x.ec);
    atomic_init(&x.prepared, 0);
    atomic_init(&x.notified, 0);
    assert_int_equal(pthread_create(&t, NULL, xt_notifier, &x), 0);
    uint32_t key = rk__ec_prepare(&x.ec);
    atomic_store_explicit(&x.prepared, 1, memory_order_release);
    while (!atomic_load_explicit(&x.notified, memory_order_acquire))
        rk__cpu_relax();
    assert_int_equal(rk__ec_wait(&x.ec, key, UINT64_MAX), RK_OK);
    pthread_join(t, NULL);
    assert_int_equal(atomic_load(&x.ec.waiters), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        /* First: membarrier is registered once per process. */
        cmocka_unit_test(test_pingpong_fences),
        cmocka_unit_test(test_notify_between_prepare_and_wait),
        cmocka_unit_test(test_idle_notify_and_timeout),
        cmocka_unit_test(test_notify_from_other_thread),
        cmocka_unit_test(test_pingpong_membarrier),
        cmocka_unit_test(test_producers_consumer),
        cmocka_unit_test(test_notify_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
