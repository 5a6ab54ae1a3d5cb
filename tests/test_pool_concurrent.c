/*
 * Concurrent pool use (meant for ThreadSanitizer, bounded in time): four
 * threads allocate, write, verify and free random sizes against one pool,
 * with and without a limit. Checks run in the threads but are reported to
 * the main thread through atomics, since cmocka's asserts are not
 * thread-safe.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "common/common.h"
#include "ringkernel/ringkernel.h"

#define THREADS 4
#define LIVE    8
#ifdef RK_DEBUG
#define ITERS 3000 /* sanitizer builds run ~10x slower */
#else
#define ITERS 30000
#endif

struct shared {
    rk_pool *pool;
    size_t limit;
    _Atomic uint64_t allocs;  /* successful allocations */
    _Atomic uint64_t limited; /* RK_ELIMIT answers */
    _Atomic uint64_t bad;     /* anything that broke the contract */
};

struct worker {
    struct shared *sh;
    unsigned id;
};

static uint32_t
xorshift(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static void *
worker_main(void *arg)
{
    struct worker *w = arg;
    struct shared *sh = w->sh;
    void *blk[LIVE] = { 0 };
    size_t sz[LIVE] = { 0 };
    uint32_t seed = 0x9e3779b9u * (w->id + 1);
    unsigned char tag = (unsigned char)(0x11 * (w->id + 1));

    for (int it = 0; it < ITERS; it++) {
        unsigned slot = xorshift(&seed) % LIVE;
        if (blk[slot] != NULL) {
            /* Nobody else wrote into our block while we held it. */
            unsigned char *p = blk[slot];
            if (p[0] != tag || p[sz[slot] - 1] != tag
                || p[sz[slot] / 2] != tag)
                atomic_fetch_add_explicit(&sh->bad, 1, memory_order_relaxed);
            rk_pool_free(sh->pool, blk[slot], sz[slot]);
            blk[slot] = NULL;
            continue;
        }
        sz[slot] = 1 + xorshift(&seed) % 8192;
        int rc = rk_pool_alloc(sh->pool, sz[slot], &blk[slot]);
        if (rc == RK_ELIMIT && sh->limit != 0) {
            atomic_fetch_add_explicit(&sh->limited, 1, memory_order_relaxed);
            blk[slot] = NULL;
            continue;
        }
        if (rc != RK_OK) {
            atomic_fetch_add_explicit(&sh->bad, 1, memory_order_relaxed);
            blk[slot] = NULL;
            continue;
        }
        atomic_fetch_add_explicit(&sh->allocs, 1, memory_order_relaxed);
        memset(blk[slot], tag, sz[slot]);
        if (sh->limit != 0) {
            rk_pool_stats st;
            rk_pool_stats_get(sh->pool, &st);
            if (st.total_bytes > sh->limit)
                atomic_fetch_add_explicit(&sh->bad, 1, memory_order_relaxed);
        }
        if (xorshift(&seed) % 64 == 0)
            rk_pool_trim(sh->pool, 16384);
    }
    for (unsigned i = 0; i < LIVE; i++)
        if (blk[i] != NULL)
            rk_pool_free(sh->pool, blk[i], sz[i]);
    return NULL;
}

static void
run(rk_pool_kind kind, size_t limit)
{
    rk_pool_config cfg = { .kind = kind, .limit = limit };
    struct shared sh = { .limit = limit };
    struct worker w[THREADS];
    pthread_t t[THREADS];
    rk_pool_stats st;

    assert_int_equal(rk_pool_create(&sh.pool, &cfg), RK_OK);
    for (unsigned i = 0; i < THREADS; i++) {
        w[i].sh = &sh;
        w[i].id = i;
        assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
    }
    for (unsigned i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&sh.bad), 0);
    rk_pool_stats_get(sh.pool, &st);
    assert_int_equal(st.used_bytes, 0);
    assert_int_equal(st.used_blocks, 0);
    assert_int_equal(st.total_bytes, st.free_bytes);
    assert_int_equal(st.hits + st.misses, atomic_load(&sh.allocs));
    assert_int_equal(st.limit_failures, atomic_load(&sh.limited));
    if (kind == RK_POOL_MALLOC)
        assert_int_equal(st.hits, 0);
    else
        assert_true(st.hits > 0);
    if (limit != 0)
        assert_true(st.total_bytes <= limit);
    rk_pool_destroy(sh.pool);
}

static void
test_concurrent_host(void **state)
{
    (void)state;
    run(RK_POOL_HOST, 0);
}

static void
test_concurrent_host_limited(void **state)
{
    (void)state;
    /* Tight enough that threads hit the limit: 4 threads x 8 live blocks
     * of up to 8 KiB want up to 256 KiB. */
    run(RK_POOL_HOST, 96 * 1024);
}

static void
test_concurrent_malloc(void **state)
{
    (void)state;
    run(RK_POOL_MALLOC, 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_host),
        cmocka_unit_test(test_concurrent_host_limited),
        cmocka_unit_test(test_concurrent_malloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
