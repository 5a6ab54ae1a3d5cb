/*
 * libFuzzer: size arguments of the pool and buffer APIs. The bytes are a
 * pool configuration (kind, block bounds, limit, allocator) and then a
 * program of operations: allocate a fuzzed size (small, near a class
 * edge, or huge), free a live block with its size, with a wrong size,
 * twice, or a pointer inside a block, trim; then a buffer with a fuzzed
 * dtype, element size and shape (pooled or not), filled, copied in and
 * out with fuzzed byte counts. Each live block is filled with a pattern
 * and checked before it is freed, so two live blocks that overlap abort;
 * checks are on, so every bad free must be refused with RK_EINVAL and
 * change nothing; stats must stay consistent. ASan sees any overrun.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_support.h"

#define MAX_LIVE 32

/* Huge requests must come back as RK_ENOMEM, not as an ASan report:
 * let the sanitizer's allocator return NULL as malloc may. */
const char *__asan_default_options(void);

const char *
__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

struct live {
    unsigned char *p;
    size_t size;
    unsigned char tag;
};

static size_t
fuzz_size(struct fz_in *in)
{
    unsigned sel = fz_byte(in);
    size_t s = 0;

    switch (sel & 3) {
    case 0: /* small */
        return 1 + fz_byte(in);
    case 1: /* around a power of two */
        s = (size_t)1 << (fz_byte(in) % 17);
        return s + (size_t)(int)((int8_t)fz_byte(in));
    case 2: /* anything up to 64 KiB */
        fz_bytes(in, &s, 2);
        return s;
    default: /* huge: past PTRDIFF_MAX, or (rarely) 1 TiB and up */
        fz_bytes(in, &s, sizeof(s));
        return (sel & 0x1c) == 0x1c ? s | ((size_t)1 << 40)
                                    : s | ((size_t)1 << 63);
    }
}

static void
check_stats(rk_pool *p, size_t nlive)
{
    rk_pool_stats s;

    rk_pool_stats_get(p, &s);
    if (s.used_blocks != nlive || s.total_bytes != s.used_bytes + s.free_bytes)
        abort();
}

static void
run_pool(struct fz_in *in)
{
    rk_pool_config cfg = { 0 };
    struct live live[MAX_LIVE];
    size_t nlive = 0;
    rk_pool *p = NULL;
    unsigned ops;

    cfg.kind = (fz_byte(in) & 1) ? RK_POOL_MALLOC : RK_POOL_HOST;
    cfg.min_block = (size_t)1 << (fz_byte(in) % 12);
    cfg.max_block = cfg.min_block << (fz_byte(in) % 12);
    cfg.limit = (fz_byte(in) & 1) ? (size_t)fz_byte(in) << 12 : 0;
    cfg.checks = RK_POOL_CHECKS_ON;
    if (rk_pool_create(&p, &cfg) != RK_OK)
        abort(); /* every config above is valid */
    for (ops = 0; ops < 64 && in->n > 0; ops++) {
        unsigned op = fz_byte(in) % 6;
        size_t i = nlive ? fz_byte(in) % nlive : 0;
        void *x = NULL;
        size_t size;
        int rc;

        if (op <= 1 && nlive < MAX_LIVE) {
            size = fuzz_size(in);
            rc = rk_pool_alloc(p, size, &x);
            if (rc == RK_OK) {
                if (size > (1u << 20))
                    abort(); /* no 1 TiB block here */
                live[nlive] = (struct live) { x, size, (unsigned char)ops };
                memset(x, live[nlive].tag, size);
                nlive++;
            } else if (rc != RK_ENOMEM && rc != RK_ELIMIT
                && !(rc == RK_EINVAL && size == 0)) {
                abort();
            }
        } else if (op == 2 && nlive > 0) {
            for (size_t k = 0; k < live[i].size; k++)
                if (live[i].p[k] != live[i].tag)
                    abort(); /* another block overlapped this one */
            if (rk_pool_free(p, live[i].p, live[i].size) != RK_OK)
                abort();
            /* A second free of the same block is refused. */
            if (rk_pool_free(p, live[i].p, live[i].size) != RK_EINVAL)
                abort();
            live[i] = live[--nlive];
        } else if (op == 3 && nlive > 0) {
            size = fuzz_size(in);
            if (size != live[i].size
                && rk_pool_free(p, live[i].p, size) != RK_EINVAL)
                abort();
            if (live[i].size > 1
                && rk_pool_free(p, live[i].p + 1, live[i].size) != RK_EINVAL)
                abort();
        } else if (op == 4) {
            rk_pool_trim(p, (size_t)fz_byte(in) << 8);
        }
        check_stats(p, nlive);
    }
    while (nlive > 0) {
        nlive--;
        if (rk_pool_free(p, live[nlive].p, live[nlive].size) != RK_OK)
            abort();
    }
    check_stats(p, 0);
    rk_pool_destroy(p);
}

static void
run_buffer(struct fz_in *in)
{
    rk_buffer_config cfg = { 0 };
    rk_pool *pool = NULL;
    rk_pool_config pc = { .checks = RK_POOL_CHECKS_ON };
    rk_buffer *b = NULL;
    unsigned char elem[256];
    size_t bytes, n;
    void *h;

    cfg.dtype = (rk_dtype)(fz_byte(in) % 13); /* two past the last */
    cfg.elem_size = (fz_byte(in) & 1) ? fz_byte(in) : 0;
    for (int d = 0; d < 3; d++)
        cfg.dims[d] = fuzz_size(in) >> (fz_byte(in) % 64);
    cfg.device = RK_DEVICE_CPU;
    if (fz_byte(in) & 1) {
        if (rk_pool_create(&pool, &pc) != RK_OK)
            abort();
        cfg.host_pool = pool;
        cfg.device_pool = pool;
    }
    if (rk_buffer_create(&b, &cfg) != RK_OK)
        goto out;
    bytes = rk_buffer_bytes(b);
    if (bytes != rk_buffer_count(b) * rk_buffer_elem_size(b)
        || rk_buffer_elem_size(b) > sizeof(elem))
        abort();
    if (bytes > (1u << 18))
        goto out; /* valid, just too big to touch here */
    fz_bytes(in, elem, sizeof(elem));
    if (rk_buffer_fill(b, elem) != RK_OK)
        abort();
    if (rk_buffer_host(b, RK_ACCESS_READ, &h) != RK_OK
        || (bytes >= rk_buffer_elem_size(b)
            && memcmp((unsigned char *)h + bytes - rk_buffer_elem_size(b),
                   elem, rk_buffer_elem_size(b))
                != 0))
        abort();
    n = fuzz_size(in);
    {
        unsigned char *tmp
            = malloc(n < bytes ? bytes : (n > (1u << 22) ? 1 : n));
        int rc = rk_buffer_copy_to(b, tmp, n);

        if ((rc == RK_OK) != (n == bytes))
            abort();
        rc = rk_buffer_copy_from(b, tmp, n);
        if ((rc == RK_OK) != (n == bytes))
            abort();
        free(tmp);
    }
    if (rk_buffer_device(b, RK_ACCESS_WRITE, &h) != RK_OK
        || rk_buffer_ensure_host(b, NULL) != RK_OK)
        abort();
out:
    rk_buffer_destroy(b);
    rk_pool_destroy(pool);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    struct fz_in in = { data, size };

    if (fz_byte(&in) & 1)
        run_buffer(&in);
    else
        run_pool(&in);
    return 0;
}
