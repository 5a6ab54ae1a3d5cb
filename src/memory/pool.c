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
 * The hot path (a hit, or a free into the cache) takes the class mutex
 * once and touches no shared atomic: the per-class counters (free and
 * in-use blocks, hits) live under that mutex and statistics sum them
 * class by class. Pool-wide relaxed atomics count only what happens off
 * the hot path: misses, limit failures and the uncached blocks. Each is
 * exact; none orders anything. total_bytes is also the limit's
 * reservation counter: a miss reserves its block size with a CAS loop
 * before allocating, so concurrent misses can never pass the limit
 * together.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
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
/* Largest cached class: the largest power of two no object size exceeds
 * (PTRDIFF_MAX), so every class size and shift stays in range. */
#define RK__POOL_MAX_CLASS ((size_t)PTRDIFF_MAX / 2 + 1)

struct rk__pool_class {
    _Alignas(RK_CACHELINE) pthread_mutex_t lock;
    void **stack; /* free blocks; guarded by lock */
    size_t nfree;
    size_t cap;
    uint64_t in_use; /* blocks of this class handed out; guarded by lock */
    uint64_t hits;   /* guarded by lock */
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
    _Atomic uint64_t total_bytes;
    _Atomic uint64_t huge_bytes; /* uncached blocks in use */
    _Atomic uint64_t huge_blocks;
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
    if (!rk__is_pow2(minb) || !rk__is_pow2(maxb) || maxb < minb
        || maxb > RK__POOL_MAX_CLASS)
        return rk__fail(RK_EINVAL,
            "rk_pool_create: min_block %zu and max_block %zu "
            "must be powers of two with min <= max <= %zu",
            minb, maxb, RK__POOL_MAX_CLASS);
    if (cfg->allocator != NULL
        && (cfg->allocator->alloc == NULL) != (cfg->allocator->free == NULL))
        return rk__fail(
            RK_EINVAL, "rk_pool_create: allocator needs both alloc and free");
    if (cfg->kind == RK_POOL_PINNED || cfg->kind == RK_POOL_DEVICE) {
        int rc = rk__cuda_enter(cfg->device, NULL);
        if (rc != RK_OK)
            return rc; /* RK_ENODEV with the driver's reason */
    }
    /* One class per power of two from minb to maxb; b never passes maxb,
     * so no shift goes out of range. */
    for (size_t b = minb;; b <<= 1) {
        n++;
        if (b == maxb)
            break;
    }
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

/* Reserves bsize bytes of the limit. Without a limit the counter's own
 * range is the limit, so total_bytes can never wrap. */
static bool
reserve(rk_pool *p, size_t bsize)
{
    uint64_t cur = atomic_load_explicit(&p->total_bytes, RELAXED);
    uint64_t lim = p->limit != 0 ? p->limit : UINT64_MAX;

    do {
        if (cur > lim || bsize > lim - cur)
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
            if (p->limit == 0)
                return rk__fail(RK_ENOMEM,
                    "%s pool: %zu more bytes would overflow its total",
                    rk_pool_kind_name(p->kind), bsize);
            add(&p->limit_failures, 1);
            return rk__fail(RK_ELIMIT,
                "%s pool: %zu more bytes would pass the limit "
                "of %zu",
                rk_pool_kind_name(p->kind), bsize, p->limit);
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
    struct rk__pool_class *c = NULL;
    void *blk = NULL;
    size_t bsize;
    int ci, rc;

    if (pool == NULL || out == NULL || size == 0)
        return rk__fail(RK_EINVAL, "rk_pool_alloc: %s",
            size == 0 ? "size is 0" : "NULL argument");
    if (size > PTRDIFF_MAX) /* before reserving any of the limit */
        return rk__fail(RK_ENOMEM,
            "rk_pool_alloc: %zu bytes is larger than any object can be", size);
    ci = class_of(pool, size);
    bsize = ci < 0 ? size : pool->min_block << ci;
    if (ci >= 0) {
        c = &pool->cls[ci];
        pthread_mutex_lock(&c->lock);
        c->in_use++; /* taken back below if a miss fails */
        if (c->nfree > 0) {
            blk = c->stack[--c->nfree];
            c->hits++;
        }
        pthread_mutex_unlock(&c->lock);
        if (blk != NULL) {
            *out = blk;
            return RK_OK;
        }
    }
    rc = fresh_block(pool, bsize, &blk);
    if (rc != RK_OK) {
        if (c != NULL) {
            pthread_mutex_lock(&c->lock);
            c->in_use--;
            pthread_mutex_unlock(&c->lock);
        }
        return rc;
    }
    if (c == NULL) {
        add(&pool->huge_bytes, bsize);
        add(&pool->huge_blocks, 1);
    }
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
    if (ci < 0) {
        sub(&pool->huge_bytes, bsize);
        sub(&pool->huge_blocks, 1);
    } else {
        c = &pool->cls[ci];
        pthread_mutex_lock(&c->lock);
        c->in_use--;
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
            cached = true;
        }
        pthread_mutex_unlock(&c->lock);
    }
    /* Uncached sizes, or no room to remember the block. */
    if (!cached)
        release_block(pool, ptr, bsize);
}

/* Bytes cached on free lists, summed class by class. */
static uint64_t
cached_bytes(rk_pool *pool)
{
    uint64_t sum = 0;

    for (unsigned i = 0; i < pool->nclasses; i++) {
        struct rk__pool_class *c = &pool->cls[i];
        pthread_mutex_lock(&c->lock);
        sum += (uint64_t)c->nfree * (pool->min_block << i);
        pthread_mutex_unlock(&c->lock);
    }
    return sum;
}

void
rk_pool_trim(rk_pool *pool, size_t keep_bytes)
{
    uint64_t cached, excess;

    if (pool == NULL)
        return;
    cached = cached_bytes(pool);
    if (cached <= keep_bytes)
        return;
    excess = cached - keep_bytes;
    /* Largest classes first: fewest calls into the backing allocator. */
    for (unsigned i = pool->nclasses; i-- > 0 && excess > 0;) {
        struct rk__pool_class *c = &pool->cls[i];
        size_t bsize = pool->min_block << i;

        pthread_mutex_lock(&c->lock);
        while (c->nfree > 0 && excess > 0) {
            release_block(pool, c->stack[--c->nfree], bsize);
            excess = excess > bsize ? excess - bsize : 0;
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
    rk_pool *p = (rk_pool *)pool; /* locks and atomics need a mutable pool */

    if (out == NULL)
        return;
    memset(out, 0, sizeof(*out));
    if (p == NULL)
        return;
    for (unsigned i = 0; i < p->nclasses; i++) {
        struct rk__pool_class *c = &p->cls[i];
        uint64_t bsize = p->min_block << i;
        pthread_mutex_lock(&c->lock);
        out->free_blocks += c->nfree;
        out->free_bytes += c->nfree * bsize;
        out->used_blocks += c->in_use;
        out->used_bytes += c->in_use * bsize;
        out->hits += c->hits;
        pthread_mutex_unlock(&c->lock);
    }
    out->used_bytes += atomic_load_explicit(&p->huge_bytes, RELAXED);
    out->used_blocks += atomic_load_explicit(&p->huge_blocks, RELAXED);
    out->total_bytes = atomic_load_explicit(&p->total_bytes, RELAXED);
    out->misses = atomic_load_explicit(&p->misses, RELAXED);
    out->limit_failures = atomic_load_explicit(&p->limit_failures, RELAXED);
}

rk_pool_kind
rk_pool_get_kind(const rk_pool *pool)
{
    return pool ? pool->kind : RK_POOL_HOST;
}
