/*
 * Managed buffers (RK_BUFFER_MANAGED): one allocation both sides address.
 *
 *   - the CPU device (everywhere): one host allocation; UNINITIALIZED
 *     until first use, then always SYNCHRONIZED, zeros first, no transfer
 *     ever counted, the same pointer on both sides; prefetch and advice
 *     only allocate;
 *   - bad input: with RK_BUFFER_PINNED or pools, prefetch or advice on a
 *     buffer that is not managed, an unknown advice or side: RK_EINVAL;
 *   - a CUDA device (the stand-in under ctest's _cuda_sim run, or a GPU):
 *     cuMemAllocManaged memory, prefetch to the device and to the host and
 *     advice reach the driver with the right device (stand-in: recorded);
 *     on device 1 of the stand-in's two as well;
 *   - never more managed memory than the device has free: creating a
 *     buffer larger than cuMemGetInfo's free bytes, or allocating one once
 *     the free memory shrank, is RK_ENOMEM naming both sizes, and the
 *     driver was never asked (stand-in: no over-ask counted); on a GPU
 *     the creation of a buffer 1 GiB larger than what is free;
 *   - a managed buffer destroyed while a persistent kernel is resident is
 *     freed only once none is (rk__mem_release's deferral).
 * Without a CUDA driver the CUDA cases skip ("no CUDA device"), which the
 * _cuda_sim run turns into a failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory/mem.h"
#include "ringkernel/ringkernel.h"

enum { N = 1000 };

static rk_buffer *
managed(rk_device_kind kind, int ordinal, size_t n)
{
    rk_buffer *b = NULL;
    rk_buffer_config c = { .dtype = RK_DTYPE_U32,
        .dims = { n },
        .device = kind,
        .ordinal = ordinal,
        .flags = RK_BUFFER_MANAGED };
    if (rk_buffer_create(&b, &c) != RK_OK)
        fail_msg("managed buffer: %s", rk_errdetail());
    assert_true(rk_buffer_is_managed(b));
    assert_false(rk_buffer_is_pinned(b));
    return b;
}

/* The state rules of a managed buffer, on either device. */
static void
check_one_copy(rk_buffer *b)
{
    uint32_t *h, *d, in[N], out[N];
    rk_buffer_stats st;

    assert_int_equal(rk_buffer_get_state(b), RK_BUFFER_UNINITIALIZED);
    assert_int_equal(rk_buffer_host(b, RK_ACCESS_READ, (void **)&h), RK_OK);
    assert_int_equal(rk_buffer_get_state(b), RK_BUFFER_SYNCHRONIZED);
    for (int i = 0; i < N; i++)
        assert_int_equal(h[i], 0); /* first use: zeros */
    assert_int_equal(rk_buffer_device(b, RK_ACCESS_WRITE, (void **)&d), RK_OK);
    assert_ptr_equal(h, d); /* one allocation */
    assert_int_equal(rk_buffer_get_state(b), RK_BUFFER_SYNCHRONIZED);
    for (int i = 0; i < N; i++)
        in[i] = (uint32_t)i * 3u;
    assert_int_equal(rk_buffer_copy_from(b, in, sizeof(in)), RK_OK);
    assert_int_equal(rk_buffer_get_state(b), RK_BUFFER_SYNCHRONIZED);
    assert_int_equal(rk_buffer_mark_device_dirty(b), RK_OK);
    assert_int_equal(rk_buffer_get_state(b), RK_BUFFER_SYNCHRONIZED);
    assert_int_equal(rk_buffer_ensure_host(b, NULL), RK_OK);
    assert_int_equal(rk_buffer_ensure_device(b, NULL), RK_OK);
    assert_int_equal(rk_buffer_copy_to(b, out, sizeof(out)), RK_OK);
    assert_memory_equal(in, out, sizeof(in));
    rk_buffer_stats_get(b, &st);
    assert_int_equal(st.h2d_transfers + st.d2h_transfers, 0);
    assert_int_equal(st.h2d_bytes + st.d2h_bytes, 0);
    assert_true(st.transfers_avoided > 0);
}

static void
test_cpu_managed(void **state)
{
    rk_buffer *b;
    void *h;
    (void)state;

    b = managed(RK_DEVICE_CPU, 0, N);
    check_one_copy(b);
    rk_buffer_destroy(b);

    /* Prefetch and advice allocate, zeroed, and do nothing more. */
    b = managed(RK_DEVICE_CPU, 0, N);
    assert_int_equal(rk_buffer_prefetch(b, RK_SIDE_DEVICE, NULL), RK_OK);
    assert_int_equal(rk_buffer_get_state(b), RK_BUFFER_SYNCHRONIZED);
    assert_int_equal(
        rk_buffer_advise(b, RK_ADVISE_READ_MOSTLY, RK_SIDE_HOST), RK_OK);
    assert_int_equal(rk_buffer_host(b, RK_ACCESS_READ, &h), RK_OK);
    assert_int_equal(((uint32_t *)h)[N - 1], 0);
    rk_buffer_destroy(b);
}

static void
test_bad_input(void **state)
{
    rk_buffer *b = NULL;
    rk_pool *pool = NULL;
    rk_pool_config pc = { .kind = RK_POOL_HOST };
    rk_buffer_config c
        = { .dtype = RK_DTYPE_U8, .dims = { 64 }, .flags = RK_BUFFER_MANAGED };
    (void)state;

    c.flags |= RK_BUFFER_PINNED;
    assert_int_equal(rk_buffer_create(&b, &c), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "RK_BUFFER_MANAGED"));
    c.flags = RK_BUFFER_MANAGED;
    assert_int_equal(rk_pool_create(&pool, &pc), RK_OK);
    c.host_pool = pool;
    assert_int_equal(rk_buffer_create(&b, &c), RK_EINVAL);
    assert_null(b);
    rk_pool_destroy(pool);

    /* Hints are for managed buffers only. */
    c = (rk_buffer_config) { .dtype = RK_DTYPE_U8, .dims = { 64 } };
    assert_int_equal(rk_buffer_create(&b, &c), RK_OK);
    assert_int_equal(rk_buffer_prefetch(b, RK_SIDE_DEVICE, NULL), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "not managed"));
    assert_int_equal(
        rk_buffer_advise(b, RK_ADVISE_ACCESSED_BY, RK_SIDE_DEVICE), RK_EINVAL);
    assert_int_equal(rk_buffer_get_state(b), RK_BUFFER_UNINITIALIZED);
    rk_buffer_destroy(b);
    b = managed(RK_DEVICE_CPU, 0, 16);
    assert_int_equal(
        rk_buffer_advise(b, (rk_mem_advice)7, RK_SIDE_HOST), RK_EINVAL);
    assert_int_equal(
        rk_buffer_advise(b, (rk_mem_advice)0, RK_SIDE_HOST), RK_EINVAL);
    assert_int_equal(
        rk_buffer_prefetch(b, (rk_buffer_side)2, NULL), RK_EINVAL);
    assert_int_equal(rk_buffer_prefetch(NULL, RK_SIDE_HOST, NULL), RK_EINVAL);
    assert_int_equal(
        rk_buffer_advise(NULL, RK_ADVISE_READ_MOSTLY, RK_SIDE_HOST),
        RK_EINVAL);
    assert_false(rk_buffer_is_managed(NULL));
    rk_buffer_destroy(b);
}

/* ------------------------------------------------------------ CUDA */

/* The stand-in's fake_cuda_managed_query, or NULL on a real driver. */
typedef unsigned (*managed_query)(int what, int *dev);

static managed_query
fake_query(void)
{
    const char *path = getenv("RK_CUDA_DRIVER");
    void *lib, *fn;
    if (path == NULL || (lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD)) == NULL)
        return NULL;
    fn = dlsym(lib, "fake_cuda_managed_query");
    dlclose(lib);
    return (managed_query)(uintptr_t)fn;
}

static int
need_cuda(void)
{
    const char *why;
    if (rk_cuda_probe(&why) != RK_CUDA_AVAILABLE) {
        print_message("no CUDA device (%s); skipping\n", why);
        return 0;
    }
    return 1;
}

static void
check_hints(int ordinal)
{
    managed_query q = fake_query();
    rk_buffer *b = managed(RK_DEVICE_CUDA, ordinal, N);
    unsigned n0 = 0;
    int dev = -2;

    if (q)
        n0 = q(1, &dev);
    assert_int_equal(rk_buffer_prefetch(b, RK_SIDE_DEVICE, NULL), RK_OK);
    if (q) {
        assert_int_equal(q(1, &dev), n0 + 1);
        assert_int_equal(dev, ordinal);
    }
    assert_int_equal(rk_buffer_prefetch(b, RK_SIDE_HOST, NULL), RK_OK);
    if (q) {
        assert_int_equal(q(1, &dev), n0 + 2);
        assert_int_equal(dev, -1); /* CU_DEVICE_CPU */
    }
    assert_int_equal(
        rk_buffer_advise(b, RK_ADVISE_PREFERRED_LOCATION, RK_SIDE_DEVICE),
        RK_OK);
    if (q) {
        assert_int_equal(q(2, &dev), 3);
        assert_int_equal(dev, ordinal);
    }
    assert_int_equal(
        rk_buffer_advise(b, RK_ADVISE_ACCESSED_BY, RK_SIDE_HOST), RK_OK);
    if (q) {
        assert_int_equal(q(2, &dev), 5);
        assert_int_equal(dev, -1);
    }
    rk_buffer_destroy(b);
}

static void
test_cuda_managed(void **state)
{
    rk_device_list *l;
    int ncuda = 0;
    rk_buffer *b;
    (void)state;
    if (!need_cuda())
        skip();

    b = managed(RK_DEVICE_CUDA, 0, N);
    check_one_copy(b);
    rk_buffer_destroy(b);
    check_hints(0);
    assert_int_equal(rk_devices_query(&l), RK_OK);
    ncuda = (int)rk_device_list_count(l) - 1;
    rk_device_list_free(l);
    if (ncuda >= 2) /* the stand-in's second device, or a GPU's */
        check_hints(1);
}

/* Never more than is free: refused before the driver is asked. */
static void
test_cuda_beyond_free(void **state)
{
    managed_query q = fake_query();
    rk_buffer *b = NULL;
    rk_buffer_config c = { .dtype = RK_DTYPE_U8,
        .device = RK_DEVICE_CUDA,
        .flags = RK_BUFFER_MANAGED };
    char want[96];
    void *p;
    int dev;
    (void)state;
    if (!need_cuda())
        skip();

    if (q == NULL) { /* a GPU: 1 GiB more than is free */
        rk_device_list *l;
        const rk_device_info *gpu;
        assert_int_equal(rk_devices_query(&l), RK_OK);
        assert_int_equal(rk_device_select(l, RK_DEVICE_CUDA, 0, &gpu), RK_OK);
        c.dims[0] = (size_t)gpu->free_mem + ((size_t)1 << 30);
        rk_device_list_free(l);
        assert_int_equal(rk_buffer_create(&b, &c), RK_ENOMEM);
        assert_null(b);
        snprintf(want, sizeof(want), "%zu bytes of managed memory", c.dims[0]);
        assert_non_null(strstr(rk_errdetail(), want));
        return;
    }
    setenv("FAKE_CUDA_FREE_BYTES", "1048576", 1);
    c.dims[0] = 2u << 20;
    assert_int_equal(rk_buffer_create(&b, &c), RK_ENOMEM);
    assert_null(b);
    assert_non_null(
        strstr(rk_errdetail(), "2097152 bytes of managed memory asked for"));
    assert_non_null(strstr(rk_errdetail(), "only 1048576 bytes free"));
    assert_non_null(strstr(rk_errdetail(), "CUDA device 0"));
    /* Free at creation, not at first use: refused then. */
    c.dims[0] = 512u << 10;
    assert_int_equal(rk_buffer_create(&b, &c), RK_OK);
    setenv("FAKE_CUDA_FREE_BYTES", "262144", 1);
    assert_int_equal(rk_buffer_host(b, RK_ACCESS_READ, &p), RK_ENOMEM);
    assert_non_null(strstr(rk_errdetail(), "only 262144 bytes free"));
    assert_int_equal(rk_buffer_get_state(b), RK_BUFFER_UNINITIALIZED);
    /* Room again: the same buffer allocates, and counts as held. */
    setenv("FAKE_CUDA_FREE_BYTES", "1048576", 1);
    assert_int_equal(rk_buffer_host(b, RK_ACCESS_READ, &p), RK_OK);
    {
        rk_buffer *b2 = NULL;
        c.dims[0] = 768u << 10; /* 1 MiB less the 512 KiB held: too big */
        assert_int_equal(rk_buffer_create(&b2, &c), RK_ENOMEM);
        assert_non_null(strstr(rk_errdetail(), "only 524288 bytes free"));
    }
    rk_buffer_destroy(b);
    unsetenv("FAKE_CUDA_FREE_BYTES");
    assert_int_equal(q(0, &dev), 0); /* the driver was never asked */
}

/* Destroyed while a persistent kernel is resident: freed once none is. */
static void
test_cuda_deferred_free(void **state)
{
    rk_buffer *b;
    size_t before;
    void *p;
    (void)state;
    if (!need_cuda())
        skip();

    b = managed(RK_DEVICE_CUDA, 0, N);
    assert_int_equal(rk_buffer_device(b, RK_ACCESS_WRITE, &p), RK_OK);
    before = rk__mem_deferred();
    rk__mem_resident(1); /* as the cuda backend counts a launch in */
    rk_buffer_destroy(b);
    assert_int_equal(rk__mem_deferred(), before + 1);
    rk__mem_resident(-1); /* it returned: the free runs now */
    assert_int_equal(rk__mem_deferred(), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_managed),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_cuda_managed),
        cmocka_unit_test(test_cuda_beyond_free),
        cmocka_unit_test(test_cuda_deferred_free),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
