/*
 * bench_memory - suite "memory".
 *
 *   alloc_free_<size>   ns per alloc+free pair, for the host pool, the
 *                       malloc pass-through pool and plain malloc/free;
 *                       with CUDA also for the pinned pool against a plain
 *                       cuMemHostAlloc/cuMemFreeHost pair.
 *   sync_check_clean    ns per rk_buffer_ensure_host() /
 *                       rk_buffer_host(READ) on a SYNCHRONIZED buffer,
 *                       i.e. the cost of the lazy check when nothing is
 *                       dirty.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "memory/mem.h"
#include "ringkernel/ringkernel.h"

static volatile uintptr_t sink;

static size_t
iters(size_t base)
{
    size_t n = (size_t)((double)base * bench_scale());
    return n < 100 ? 100 : n;
}

static void
emit_ns(const char *name, const char *impl, uint64_t t0, size_t n, size_t size)
{
    char extra[64];
    snprintf(extra, sizeof(extra), "\"bytes\":%zu", size);
    bench_emit("memory", name, impl, (double)(bench_now_ns() - t0) / (double)n,
        "ns", extra);
}

static void
bench_pool(rk_pool_kind kind, const char *impl, size_t size, size_t n)
{
    rk_pool_config cfg = { .kind = kind };
    char name[64];
    rk_pool *p;
    void *x;
    uint64_t t0;

    if (rk_pool_create(&p, &cfg) != RK_OK) {
        fprintf(stderr, "bench_memory: %s pool: %s\n", impl, rk_errdetail());
        return;
    }
    /* Warm the free list so the loop measures steady state. */
    if (rk_pool_alloc(p, size, &x) == RK_OK)
        rk_pool_free(p, x, size);
    t0 = bench_now_ns();
    for (size_t i = 0; i < n; i++) {
        if (rk_pool_alloc(p, size, &x) != RK_OK)
            abort();
        sink += (uintptr_t)x;
        rk_pool_free(p, x, size);
    }
    snprintf(name, sizeof(name), "alloc_free_%zu", size);
    emit_ns(name, impl, t0, n, size);
    rk_pool_destroy(p);
}

static void
bench_malloc(size_t size, size_t n)
{
    char name[64];
    uint64_t t0 = bench_now_ns();

    for (size_t i = 0; i < n; i++) {
        void *x = malloc(size);
        if (x == NULL)
            abort();
        sink += (uintptr_t)x;
        free(x);
    }
    snprintf(name, sizeof(name), "alloc_free_%zu", size);
    emit_ns(name, "malloc", t0, n, size);
}

static void
bench_plain_pinned(size_t size, size_t n)
{
    char name[64];
    uint64_t t0 = bench_now_ns();

    for (size_t i = 0; i < n; i++) {
        void *x;
        if (rk__mem_alloc(RK__MEM_PINNED, 0, NULL, size, 256, &x) != RK_OK)
            abort();
        sink += (uintptr_t)x;
        rk__mem_release(RK__MEM_PINNED, 0, NULL, x, size);
    }
    snprintf(name, sizeof(name), "alloc_free_%zu", size);
    emit_ns(name, "cuMemHostAlloc", t0, n, size);
}

static void
bench_sync_check(size_t n)
{
    rk_buffer_config cfg = { .dtype = RK_DTYPE_F32, .dims = { 1024 } };
    rk_buffer *b;
    uint64_t t0;
    void *p;

    if (rk_buffer_create(&b, &cfg) != RK_OK || rk_buffer_zeros(b) != RK_OK
        || rk_buffer_ensure_device(b, NULL) != RK_OK)
        abort();
    t0 = bench_now_ns();
    for (size_t i = 0; i < n; i++)
        if (rk_buffer_ensure_host(b, NULL) != RK_OK)
            abort();
    emit_ns("sync_check_clean", "ensure_host", t0, n, rk_buffer_bytes(b));
    t0 = bench_now_ns();
    for (size_t i = 0; i < n; i++) {
        if (rk_buffer_host(b, RK_ACCESS_READ, &p) != RK_OK)
            abort();
        sink += (uintptr_t)p;
    }
    emit_ns("sync_check_clean", "host_read", t0, n, rk_buffer_bytes(b));
    rk_buffer_destroy(b);
}

int
main(void)
{
    static const size_t sizes[] = { 64, 4096, 65536 };
    const char *why;
    int cuda = rk_cuda_probe(&why) == RK_CUDA_AVAILABLE;
    size_t n = iters(2000000);

    if (!cuda)
        fprintf(stderr,
            "bench_memory: pinned benchmarks skipped: no CUDA (%s)\n", why);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        bench_pool(RK_POOL_HOST, "rk_pool_host", sizes[i], n);
        bench_pool(RK_POOL_MALLOC, "rk_pool_malloc", sizes[i], n);
        bench_malloc(sizes[i], n);
        if (cuda) {
            size_t np = iters(20000); /* pinning costs microseconds */
            bench_pool(RK_POOL_PINNED, "rk_pool_pinned", sizes[i], np);
            bench_plain_pinned(sizes[i], np);
        }
    }
    bench_sync_check(iters(10000000));
    return 0;
}
