/*
 * Size-class memory pool (see ringkernel/pool.h).
 *
 * Design. Class i holds blocks of min_block << i bytes. Each class keeps a
 * stack of free block pointers in a separate array rather than threading
 * a free list through the blocks themselves: device memory cannot be
 * written from the host, and keeping pool metadata out of freed blocks
 * lets ASan report a use after rk_pool_free() as an ordinary bug in the
 * MALLOC variant. Each class has its own mutex on its own cache line, so
 * threads working in different classes do not contend.
 *
 * Counters are relaxed atomics: each is exact, none orders anything.
 * total_bytes is also the limit's reservation counter: a miss reserves its
 * block size with a CAS loop before allocating, so concurrent misses can
 * never push total past the limit together.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "device/cuda_driver.h"
#include "memory/mem.h"
#include "ringkernel/pool.h"

#define RK__POOL_DEFAULT_MIN 64u
#define RK__POOL_DEFAULT_MAX (4u << 20)
#define RK__POOL_HOST_ALIGN  64u
#define RK__POOL_CUDA_ALIGN  256u

struct rk__pool_class {
    _Alignas(RK_CACHELINE) pthread_mutex_t lock;
    void **stack; /* free blocks; guarded by lock */
    size_t nfree;
    size_t cap;
};

struct rk_pool {
    rk_pool_kind kind;
    rk__mem_space space;
    int device;
    size_t limit;
    size_t min_block;
    size_t max_block;
    unsigned nclasses;
    rk_allocator alloc;
    bool has_alloc;
    _Atomic uint64_t used_bytes;
    _Atomic uint64_t free_bytes;
    _Atomic uint64_t total_bytes;
    _Atomic uint64_t used_blocks;
    _Atomic uint64_t free_blocks;
    _Atomic uint64_t hits;
    _Atomic uint64_t misses;
    _Atomic uint64_t limit_failures;
    struct rk__pool_class cls[];
};

#define RELAXED memory_order_relaxed

static void
add(_Atomic uint64_t *c, uint64_t v)
{
    atomic_fetch_add_explicit(c, v, RELAXED);
}

static void
sub(_Atomic uint64_t *c, uint64_t v)
{
    atomic_fetch_sub_explicit(c, v, RELAXED);
}

const char *
rk_pool_kind_name(rk_pool_kind kind)
{
    switch (kind) {
    case RK_POOL_HOST:
        return "host";
    case RK_POOL_PINNED:
        return "pinned";
    case RK_POOL_DEVICE:
        return "device";
    case RK_POOL_MALLOC:
        return "malloc";
    }
    return "unknown";
}

static const rk_allocator *
hooks(const rk_pool *p)
{
    return p->has_alloc ? &p->alloc : NULL;
}

static size_t
block_align(const rk_pool *p, size_t bsize)
{
    if (p->space != RK__MEM_HOST)
        return RK__POOL_CUDA_ALIGN;
    return bsize < RK__POOL_HOST_ALIGN && rk__is_pow2(bsize)
        ? bsize
        : RK__POOL_HOST_ALIGN;
}

/* Class index for a request, or -1 when it is not cached (MALLOC kind, or
 * above max_block). */
static int
class_of(const rk_pool *p, size_t size)
{
    unsigned i = 0;

    if (p->kind == RK_POOL_MALLOC || size > p->max_block)
        return -1;
    while ((p->min_block << i) < size)
        i++;
    return (int)i;
}

size_t
rk_pool_block_size(const rk_pool *pool, size_t size)
{
    int c;

    if (pool == NULL)
        return size;
    c = class_of(pool, size);
    return c < 0 ? size : pool->min_block << c;
}

int
rk_pool_create(rk_pool **out, const rk_pool_config *cfg)
{
    rk_pool_config def = { 0 };
    rk_pool *p;
    unsigned n = 0;

    if (out == NULL)
        return rk__fail(RK_EINVAL, "rk_pool_create: out is NULL");
    if (cfg == NULL)
        cfg = &def;
    size_t minb = cfg->min_block ? cfg->min_block : RK__POOL_DEFAULT_MIN;
    size_t maxb = cfg->max_block ? cfg->max_block : RK__POOL_DEFAULT_MAX;
    if ((unsigned)cfg->kind > RK_POOL_MALLOC)
        return rk__fail(
            RK_EINVAL, "rk_pool_create: unknown kind %d", (int)cfg->kind);
    if (!rk__is_pow2(minb) || !rk__is_pow2(maxb) || maxb < minb)
        return rk__fail(RK_EINVAL,
            "rk_pool_create: min_block %zu and max_block %zu "
            "must be powers of two with min <= max",
            minb, maxb);
    if (cfg->allocator != NULL
        && (cfg->allocator->alloc == NULL) != (cfg->allocator->free == NULL))
        return rk__fail(
            RK_EINVAL, "rk_pool_create: allocator needs both alloc and free");
    if (cfg->kind == RK_POOL_PINNED || cfg->kind == RK_POOL_DEVICE) {
        int rc = rk__cuda_enter(cfg->device, NULL);
        if (rc != RK_OK)
            return rc; /* RK_ENODEV with the driver's reason */
    }
    while ((minb << n) <= maxb)
        n++;
    p = calloc(1, sizeof(*p) + n * sizeof(p->cls[0]));
    if (p == NULL)
        return rk__fail(RK_ENOMEM, "rk_pool_create");
    p->kind = cfg->kind;
    p->space = cfg->kind == RK_POOL_PINNED ? RK__MEM_PINNED
        : cfg->kind == RK_POOL_DEVICE      ? RK__MEM_DEVICE
                                           : RK__MEM_HOST;
    p->device = cfg->device;
    p->limit = cfg->limit;
    p->min_block = minb;
    p->max_block = maxb;
    p->nclasses = n;
    if (cfg->allocator != NULL && cfg->allocator->alloc != NULL) {
        p->alloc = *cfg->allocator;
        p->has_alloc = true;
    }
    for (unsigned i = 0; i < n; i++)
        pthread_mutex_init(&p->cls[i].lock, NULL);
    *out = p;
    return RK_OK;
}

/* Reserves bsize bytes of the limit. */
static bool
reserve(rk_pool *p, size_t bsize)
{
    uint64_t cur = atomic_load_explicit(&p->total_bytes, RELAXED);

    do {
        if (p->limit != 0 && (cur > p->limit || bsize > p->limit - cur))
            return false;
    } while (!atomic_compare_exchange_weak_explicit(
        &p->total_bytes, &cur, cur + bsize, RELAXED, RELAXED));
    return true;
}

static void
release_block(rk_pool *p, void *ptr, size_t bsize)
{
    rk__mem_release(p->space, p->device, hooks(p), ptr, bsize);
    sub(&p->total_bytes, bsize);
}

/* Fresh memory for a miss: reserve, trim the cache once if over the
 * limit, then allocate. */
static int
fresh_block(rk_pool *p, size_t bsize, void **out)
{
    int rc;

    if (!reserve(p, bsize)) {
        rk_pool_free_all(p);
        if (!reserve(p, bsize)) {
            add(&p->limit_failures, 1);
            return rk__fail(RK_ELIMIT,
                "%s pool: %zu more bytes would pass the limit "
                "of %zu (%llu in use)",
                rk_pool_kind_name(p->kind), bsize, p->limit,
                (unsigned long long)atomic_load_explicit(
                    &p->used_bytes, RELAXED));
        }
    }
    rc = rk__mem_alloc(
        p->space, p->device, hooks(p), bsize, block_align(p, bsize), out);
    if (rc != RK_OK) {
        sub(&p->total_bytes, bsize);
        return rc;
    }
    add(&p->misses, 1);
    return RK_OK;
}

int
rk_pool_alloc(rk_pool *pool, size_t size, void **out)
{
    struct rk__pool_class *c;
    void *blk = NULL;
    size_t bsize;
    int ci, rc;

    if (pool == NULL || out == NULL || size == 0)
        return rk__fail(RK_EINVAL, "rk_pool_alloc: %s",
            size == 0 ? "size is 0" : "NULL argument");
    ci = class_of(pool, size);
    bsize = ci < 0 ? size : pool->min_block << ci;
    if (ci >= 0) {
        c = &pool->cls[ci];
        pthread_mutex_lock(&c->lock);
        if (c->nfree > 0) {
            blk = c->stack[--c->nfree];
            /* Inside the lock, so free_bytes never dips below the bytes
             * actually cached (trim compares against it). */
            sub(&pool->free_bytes, bsize);
            sub(&pool->free_blocks, 1);
        }
        pthread_mutex_unlock(&c->lock);
    }
    if (blk != NULL) {
        add(&pool->hits, 1);
    } else {
        rc = fresh_block(pool, bsize, &blk);
        if (rc != RK_OK)
            return rc;
    }
    add(&pool->used_bytes, bsize);
    add(&pool->used_blocks, 1);
    *out = blk;
    return RK_OK;
}

void
rk_pool_free(rk_pool *pool, void *ptr, size_t size)
{
    struct rk__pool_class *c;
    size_t bsize;
    bool cached = false;
    int ci;

    if (pool == NULL || ptr == NULL || size == 0)
        return;
    ci = class_of(pool, size);
    bsize = ci < 0 ? size : pool->min_block << ci;
    sub(&pool->used_bytes, bsize);
    sub(&pool->used_blocks, 1);
    if (ci >= 0) {
        c = &pool->cls[ci];
        pthread_mutex_lock(&c->lock);
        if (c->nfree == c->cap) {
            size_t ncap = c->cap ? c->cap * 2 : 16;
            void **ns = realloc(c->stack, ncap * sizeof(*ns));
            if (ns != NULL) {
                c->stack = ns;
                c->cap = ncap;
            }
        }
        if (c->nfree < c->cap) {
            c->stack[c->nfree++] = ptr;
            add(&pool->free_bytes, bsize);
            add(&pool->free_blocks, 1);
            cached = true;
        }
        pthread_mutex_unlock(&c->lock);
    }
    /* Uncached sizes, or no room to remember the block. */
    if (!cached)
        release_block(pool, ptr, bsize);
}

void
rk_pool_trim(rk_pool *pool, size_t keep_bytes)
{
    if (pool == NULL)
        return;
    for (unsigned i = pool->nclasses; i-- > 0;) {
        struct rk__pool_class *c = &pool->cls[i];
        size_t bsize = pool->min_block << i;

        pthread_mutex_lock(&c->lock);
        while (c->nfree > 0
            && atomic_load_explicit(&pool->free_bytes, RELAXED) > keep_bytes) {
            void *blk = c->stack[--c->nfree];
            sub(&pool->free_bytes, bsize);
            sub(&pool->free_blocks, 1);
            release_block(pool, blk, bsize);
        }
        pthread_mutex_unlock(&c->lock);
    }
}

void
rk_pool_free_all(rk_pool *pool)
{
    rk_pool_trim(pool, 0);
}

void
rk_pool_destroy(rk_pool *pool)
{
    if (pool == NULL)
        return;
    rk_pool_free_all(pool);
    for (unsigned i = 0; i < pool->nclasses; i++) {
        pthread_mutex_destroy(&pool->cls[i].lock);
        free(pool->cls[i].stack);
    }
    free(pool);
}

void
rk_pool_stats_get(const rk_pool *pool, rk_pool_stats *out)
{
    rk_pool *p = (rk_pool *)pool; /* atomic loads need a non-const object */

    if (out == NULL)
        return;
    memset(out, 0, sizeof(*out));
    if (p == NULL)
        return;
    out->used_bytes = atomic_load_explicit(&p->used_bytes, RELAXED);
    out->free_bytes = atomic_load_explicit(&p->free_bytes, RELAXED);
    out->total_bytes = atomic_load_explicit(&p->total_bytes, RELAXED);
    out->used_blocks = atomic_load_explicit(&p->used_blocks, RELAXED);
    out->free_blocks = atomic_load_explicit(&p->free_blocks, RELAXED);
    out->hits = atomic_load_explicit(&p->hits, RELAXED);
    out->misses = atomic_load_explicit(&p->misses, RELAXED);
    out->limit_failures = atomic_load_explicit(&p->limit_failures, RELAXED);
}

rk_pool_kind
rk_pool_get_kind(const rk_pool *pool)
{
    return pool ? pool->kind : RK_POOL_HOST;
}
