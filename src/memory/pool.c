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
 *
 * Checks (rk_pool_config.checks, on by default in debug and sanitizer
 * builds). A side table of live blocks (address -> requested size), an
 * open-addressing hash under its own mutex, is filled by every
 * allocation and emptied by every free: a free of a block that is not in
 * it (freed twice, or never from this pool) or with a size other than the
 * one it was allocated with is refused with RK_EINVAL and changes
 * nothing. The table lives outside the blocks for the same reason as the
 * free stacks: device memory cannot carry a header the host writes.
 * Without checks a bad free is undefined behaviour (docs/memory.md).
 *
 * AddressSanitizer. In an ASan build a host block parked on a free stack
 * is poisoned and unpoisoned when it is handed out again or released, as
 * the Pony runtime's pool does, so a use after rk_pool_free() is
 * reported even though the memory stays with the pool.
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

#if defined(__SANITIZE_ADDRESS__)
#define RK__POOL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RK__POOL_ASAN 1
#endif
#endif
#ifdef RK__POOL_ASAN
#include <sanitizer/asan_interface.h>
#define POOL_POISON(p, n)   ASAN_POISON_MEMORY_REGION(p, n)
#define POOL_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POOL_POISON(p, n)   ((void)(p), (void)(n))
#define POOL_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#ifdef RK_DEBUG
#define RK__POOL_CHECKS_DEFAULT true
#else
#define RK__POOL_CHECKS_DEFAULT false
#endif

/* Live blocks for the checks: open addressing, linear probing, deletion
 * by backward shift (no tombstones). cap is a power of two, at most half
 * full. */
struct rk__pool_live {
    pthread_mutex_t lock;
    uintptr_t *addr; /* 0 = empty slot */
    size_t *size;    /* the size the block was allocated with */
    size_t n, cap;
};

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
    bool checks;
    struct rk__pool_live live; /* used only when checks */
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

/* ------------------------------------------------------ live blocks */

static size_t
live_slot(const struct rk__pool_live *l, uintptr_t a)
{
    return (size_t)(((uint64_t)a * UINT64_C(0x9E3779B97F4A7C15)) >> 20)
        & (l->cap - 1);
}

/* Under l->lock: room for one more entry. false if out of memory. */
static bool
live_grow(struct rk__pool_live *l)
{
    size_t ncap = l->cap ? l->cap * 2 : 64;
    uintptr_t *na;
    size_t *ns;
    struct rk__pool_live old = *l;

    if ((l->n + 1) * 2 <= l->cap)
        return true;
    na = calloc(ncap, sizeof(*na));
    ns = malloc(ncap * sizeof(*ns));
    if (na == NULL || ns == NULL) {
        free(na);
        free(ns);
        return false;
    }
    l->addr = na;
    l->size = ns;
    l->cap = ncap;
    for (size_t i = 0; i < old.cap; i++) {
        if (old.addr[i] != 0) {
            size_t j = live_slot(l, old.addr[i]);

            while (l->addr[j] != 0)
                j = (j + 1) & (ncap - 1);
            l->addr[j] = old.addr[i];
            l->size[j] = old.size[i];
        }
    }
    free(old.addr);
    free(old.size);
    return true;
}

static int
live_add(rk_pool *p, void *ptr, size_t size)
{
    struct rk__pool_live *l = &p->live;
    uintptr_t a = (uintptr_t)ptr;
    int rc = RK_OK;

    pthread_mutex_lock(&l->lock);
    if (!live_grow(l)) {
        rc = rk__fail(RK_ENOMEM, "rk_pool_alloc: no memory to track blocks");
    } else {
        size_t j = live_slot(l, a);

        while (l->addr[j] != 0 && l->addr[j] != a)
            j = (j + 1) & (l->cap - 1);
        if (l->addr[j] == a) {
            /* Only a caller's allocator hook can do this: it returned a
             * block the pool has handed out and not got back. */
            rc = rk__fail(RK_EINVAL,
                "rk_pool_alloc: the allocator returned %p, a block that "
                "is still in use",
                ptr);
        } else {
            l->addr[j] = a;
            l->size[j] = size;
            l->n++;
        }
    }
    pthread_mutex_unlock(&l->lock);
    return rc;
}

/* Removes ptr if it is live with this size: RK_OK. Otherwise RK_EINVAL
 * with a detail, and the table is unchanged. */
static int
live_del(rk_pool *p, void *ptr, size_t size)
{
    struct rk__pool_live *l = &p->live;
    uintptr_t a = (uintptr_t)ptr;
    size_t j, had = 0;
    int rc = RK_EINVAL;

    pthread_mutex_lock(&l->lock);
    j = l->cap ? live_slot(l, a) : 0;
    while (l->cap != 0 && l->addr[j] != 0 && l->addr[j] != a)
        j = (j + 1) & (l->cap - 1);
    if (l->cap == 0 || l->addr[j] == 0) {
        rc = RK_ENOTFOUND;
    } else if ((had = l->size[j]) == size) {
        /* Backward shift: pull later entries of the run into the hole. */
        size_t hole = j;

        for (size_t k = (j + 1) & (l->cap - 1); l->addr[k] != 0;
             k = (k + 1) & (l->cap - 1)) {
            size_t home = live_slot(l, l->addr[k]);

            /* k's entry may move to hole unless its home lies in
             * (hole, k] cyclically. */
            if (((k - home) & (l->cap - 1)) >= ((k - hole) & (l->cap - 1))) {
                l->addr[hole] = l->addr[k];
                l->size[hole] = l->size[k];
                hole = k;
            }
        }
        l->addr[hole] = 0;
        l->n--;
        rc = RK_OK;
    }
    pthread_mutex_unlock(&l->lock);
    if (rc == RK_ENOTFOUND)
        return rk__fail(RK_EINVAL,
            "rk_pool_free: %p is not a live block of this %s pool (freed "
            "twice, or not allocated from it)",
            ptr, rk_pool_kind_name(p->kind));
    if (rc != RK_OK)
        return rk__fail(RK_EINVAL,
            "rk_pool_free: block %p was allocated with size %zu, freed "
            "with size %zu",
            ptr, had, size);
    return RK_OK;
}

/* ---------------------------------------------------------------- pool */

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
    if ((unsigned)cfg->checks > RK_POOL_CHECKS_OFF)
        return rk__fail(RK_EINVAL,
            "rk_pool_create: checks is %d, not an "
            "rk_pool_checks value",
            (int)cfg->checks);
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
    p->checks = cfg->checks == RK_POOL_CHECKS_DEFAULT
        ? RK__POOL_CHECKS_DEFAULT
        : cfg->checks == RK_POOL_CHECKS_ON;
    pthread_mutex_init(&p->live.lock, NULL);
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

static void take_back(rk_pool *pool, void *ptr, size_t size);

/* The last step of a cache hit: record the block for the checks. A hit
 * is never live (it came back through a checked free), so the only
 * failure is no memory to track it: the block goes back to the cache. */
static int
handed_out(rk_pool *pool, void *blk, size_t size, void **out)
{
    int rc;

    if (pool->checks && (rc = live_add(pool, blk, size)) != RK_OK) {
        take_back(pool, blk, size);
        return rc;
    }
    *out = blk;
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
            if (pool->space == RK__MEM_HOST)
                POOL_UNPOISON(blk, bsize);
            return handed_out(pool, blk, size, out);
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
    if (pool->checks && (rc = live_add(pool, blk, size)) != RK_OK) {
        /* Undo the miss. A block the allocator returned twice is someone
         * else's live block: it is not released. */
        if (rc == RK_ENOMEM)
            release_block(pool, blk, bsize);
        else
            sub(&pool->total_bytes, bsize);
        sub(&pool->misses, 1);
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

/* Takes a block back (cache or release) without any check. */
static void
take_back(rk_pool *pool, void *ptr, size_t size)
{
    struct rk__pool_class *c;
    size_t bsize;
    bool cached = false;
    int ci;

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
            /* Poisoned before it is visible to another allocation, which
             * unpoisons it after popping it under this lock. */
            if (pool->space == RK__MEM_HOST)
                POOL_POISON(ptr, bsize);
            c->stack[c->nfree++] = ptr;
            cached = true;
        }
        pthread_mutex_unlock(&c->lock);
    }
    /* Uncached sizes, or no room to remember the block. */
    if (!cached)
        release_block(pool, ptr, bsize);
}

int
rk_pool_free(rk_pool *pool, void *ptr, size_t size)
{
    int rc;

    if (pool == NULL || ptr == NULL)
        return ptr == NULL ? RK_OK
                           : rk__fail(RK_EINVAL, "rk_pool_free: NULL pool");
    if (pool->checks && (rc = live_del(pool, ptr, size)) != RK_OK)
        return rc;
    if (size == 0) /* only reachable without checks */
        return rk__fail(RK_EINVAL, "rk_pool_free: size is 0");
    take_back(pool, ptr, size);
    return RK_OK;
}

bool
rk_pool_checking(const rk_pool *pool)
{
    return pool != NULL && pool->checks;
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
            void *blk = c->stack[--c->nfree];

            /* Cached, so poisoned; the allocator may write into it. */
            if (pool->space == RK__MEM_HOST)
                POOL_UNPOISON(blk, bsize);
            release_block(pool, blk, bsize);
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
    pthread_mutex_destroy(&pool->live.lock);
    free(pool->live.addr);
    free(pool->live.size);
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
