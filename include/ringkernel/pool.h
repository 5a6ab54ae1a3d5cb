/** @file
 * ringkernel/pool.h - memory pools with size classes and statistics.
 *
 * A pool hands out blocks rounded up to a power-of-two size class and keeps
 * freed blocks on a per-class free list for reuse, so steady-state
 * allocation costs one lock and one pop instead of a trip to the system
 * allocator (or to cuMemAlloc, which also synchronises the device).
 *
 * Variants (rk_pool_kind):
 *   RK_POOL_HOST    ordinary host memory, cached per size class.
 *   RK_POOL_PINNED  page-locked host memory mapped into the device's
 *                   address space (cuMemHostAlloc); needs CUDA.
 *   RK_POOL_DEVICE  GPU memory (cuMemAlloc); needs CUDA. Block pointers
 *                   are device addresses and must not be dereferenced on
 *                   the host.
 *   RK_POOL_MALLOC  pass-through: every alloc/free goes straight to the
 *                   allocator, nothing is cached, so ASan and valgrind see
 *                   each block. Statistics and the limit still apply.
 * CUDA variants fail to create with RK_ENODEV when no GPU is present.
 *
 * Statistics: used = bytes in blocks handed out (class-rounded), free =
 * bytes cached on free lists, total = used + free = memory the pool holds
 * from its backing allocator. hits = allocations served from a free list,
 * misses = allocations that needed fresh memory.
 *
 * Limit: when cfg.limit is non-zero, total never exceeds it. An allocation
 * that would go past it first releases cached blocks of other classes and
 * retries; if it still does not fit it returns RK_ELIMIT (never aborts).
 *
 * Threads: every call is thread-safe (one mutex per size class, atomic
 * counters). Statistics read while other threads allocate are each exact
 * but not a consistent snapshot of one instant.
 *
 * Ownership: the caller owns the pool and every block it allocated until
 * the block is passed back to rk_pool_free() with the size it asked for.
 * rk_pool_destroy() releases cached blocks; blocks still outstanding then
 * are the caller's leak.
 */
#ifndef RINGKERNEL_POOL_H
#define RINGKERNEL_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Where a pool's memory comes from (the variants in the file comment). */
typedef enum rk_pool_kind {
    RK_POOL_HOST = 0, /**< ordinary host memory, cached per size class */
    RK_POOL_PINNED
    = 1, /**< page-locked, device-mapped host memory; needs CUDA */
    RK_POOL_DEVICE = 2, /**< GPU memory; needs CUDA */
    RK_POOL_MALLOC = 3  /**< pass-through to the allocator, nothing cached */
} rk_pool_kind;

/** "host", "pinned", "device", "malloc". Never NULL. */
const char *rk_pool_kind_name(rk_pool_kind kind);

/**
 * Allocator hooks for the backing memory of RK_POOL_HOST and
 * RK_POOL_MALLOC (CUDA variants always use the driver). alloc returns
 * size bytes aligned to align (a power of two) or NULL; free receives the
 * same size. NULL hooks mean aligned_alloc/free.
 */
typedef struct rk_allocator {
    void *(*alloc)(void *ctx, size_t size,
        size_t align); /**< returns size bytes aligned to align, or NULL */
    void (*free)(void *ctx, void *ptr,
        size_t size); /**< releases a block alloc returned, with its size */
    void *ctx;        /**< passed to both hooks */
} rk_allocator;

/**
 * Misuse checks (see rk_pool_free): RK_POOL_CHECKS_DEFAULT means on in
 * debug and sanitizer builds of the library (RK_DEBUG) and off in
 * release builds. They cost one hash insert and one hash delete under a
 * pool-wide mutex per block, so release builds leave them off unless asked.
 */
typedef enum rk_pool_checks {
    RK_POOL_CHECKS_DEFAULT = 0, /**< on in RK_DEBUG builds of the library */
    RK_POOL_CHECKS_ON = 1,      /**< always check */
    RK_POOL_CHECKS_OFF = 2      /**< never check */
} rk_pool_checks;

/** Zeroed fields mean the defaults shown. */
typedef struct rk_pool_config {
    rk_pool_kind kind; /**< RK_POOL_HOST */
    int device;        /**< CUDA ordinal for PINNED/DEVICE (0) */
    size_t limit;      /**< max total bytes, 0 = unlimited */
    size_t min_block;  /**< smallest class, power of two (64) */
    size_t max_block;  /**< largest cached class, power of two (4 MiB),
                          at most PTRDIFF_MAX / 2 + 1; bigger requests
                          are allocated and released directly but still
                          counted */
    const rk_allocator *allocator; /**< NULL: aligned_alloc/free; copied */
    rk_pool_checks checks;         /**< RK_POOL_CHECKS_DEFAULT */
} rk_pool_config;

/** A pool's statistics (terms defined in the file comment); a caller-owned
 * snapshot. */
typedef struct rk_pool_stats {
    uint64_t used_bytes;     /**< bytes in blocks handed out (class-rounded) */
    uint64_t free_bytes;     /**< bytes cached on free lists */
    uint64_t total_bytes;    /**< used + free: what the pool holds */
    uint64_t used_blocks;    /**< blocks handed out */
    uint64_t free_blocks;    /**< blocks cached on free lists */
    uint64_t hits;           /**< allocations served from a free list */
    uint64_t misses;         /**< allocations that needed fresh memory */
    uint64_t limit_failures; /**< allocations refused with RK_ELIMIT */
} rk_pool_stats;

/** An opaque pool; the caller owns it (rk_pool_create, rk_pool_destroy). */
typedef struct rk_pool rk_pool;

/** Creates a pool. RK_EINVAL for a bad config (kind, checks, block sizes,
 * half an allocator), RK_ENODEV for a CUDA
 * variant without a GPU, RK_ENOMEM. On success the caller owns *out. */
int rk_pool_create(rk_pool **out, const rk_pool_config *cfg);

/** Releases every cached block and the pool. NULL is ignored. */
void rk_pool_destroy(rk_pool *pool);

/** Allocates at least size (> 0) bytes, aligned to min(class size, 64) at
 * least (device blocks: 256). RK_ELIMIT past the limit, RK_ENOMEM /
 * RK_ECUDA when the backing allocator fails, RK_ENOMEM for a size above
 * PTRDIFF_MAX or one that would overflow the pool's byte total. */
int rk_pool_alloc(rk_pool *pool, size_t size, void **out);

/**
 * Returns a block. size must be the size passed to rk_pool_alloc(). ptr
 * NULL does nothing (RK_OK); pool NULL is RK_EINVAL.
 *
 * With checks on (rk_pool_config.checks; the default in debug and
 * sanitizer builds) a block that is not live in this pool (freed twice,
 * never allocated from it) or a size other than the one it was allocated
 * with is refused: RK_EINVAL, a detail naming the block and both sizes,
 * and nothing changes (the block stays the caller's). With checks off
 * such a free is undefined behaviour and is not detected: the pool may
 * later hand one block out twice, or a small block for a large request
 * (docs/memory.md). In an AddressSanitizer build a host block cached by
 * the pool is poisoned until it is handed out again.
 */
int rk_pool_free(rk_pool *pool, void *ptr, size_t size);

/** True if pool checks frees (see rk_pool_free). false for NULL. */
bool rk_pool_checking(const rk_pool *pool);

/** Releases cached blocks, largest classes first, until at most keep_bytes
 * stay cached. Blocks in use are untouched. NULL is ignored (as for
 * rk_pool_free_all). */
void rk_pool_trim(rk_pool *pool, size_t keep_bytes);

/** Releases every cached block (rk_pool_trim(pool, 0)). */
void rk_pool_free_all(rk_pool *pool);

/** Fills *out (out NULL: nothing; pool NULL: all zeros). */
void rk_pool_stats_get(const rk_pool *pool, rk_pool_stats *out);

/** The pool's kind; RK_POOL_HOST for NULL. */
rk_pool_kind rk_pool_get_kind(const rk_pool *pool);

/** The block size a request of size bytes occupies (its class size, or size
 * itself above max_block; size itself for a NULL pool). */
size_t rk_pool_block_size(const rk_pool *pool, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* RINGKERNEL_POOL_H */
