/* Buffer shape/type validation, fill patterns, pool-backed memory and
 * argument checks (the state machine itself is in test_buffer_states.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "ringkernel/ringkernel.h"

static void
test_shapes_and_types(void **state)
{
    rk_buffer_config cfg = { .dtype = RK_DTYPE_F64, .dims = { 4, 3, 2 } };
    rk_buffer *b = NULL;
    (void)state;

    assert_int_equal(rk_buffer_create(&b, &cfg), RK_OK);
    assert_int_equal(rk_buffer_ndim(b), 3);
    assert_int_equal(rk_buffer_dim(b, 0), 4);
    assert_int_equal(rk_buffer_dim(b, 2), 2);
    assert_int_equal(rk_buffer_dim(b, 3), 1);
    assert_int_equal(rk_buffer_count(b), 24);
    assert_int_equal(rk_buffer_elem_size(b), 8);
    assert_int_equal(rk_buffer_bytes(b), 192);
    assert_int_equal(rk_buffer_dtype(b), RK_DTYPE_F64);
    assert_int_equal(rk_buffer_device_kind(b), RK_DEVICE_CPU);
    rk_buffer_destroy(b);

    cfg.dims[2] = 0; /* 2-D */
    assert_int_equal(rk_buffer_create(&b, &cfg), RK_OK);
    assert_int_equal(rk_buffer_ndim(b), 2);
    rk_buffer_destroy(b);

    cfg.dims[0] = 0; /* no shape */
    assert_int_equal(rk_buffer_create(&b, &cfg), RK_EINVAL);
    cfg.dims[0] = 4;
    cfg.dims[1] = 0;
    cfg.dims[2] = 5; /* a gap */
    assert_int_equal(rk_buffer_create(&b, &cfg), RK_EINVAL);
    cfg.dims[1] = SIZE_MAX / 2;
    assert_int_equal(rk_buffer_create(&b, &cfg), RK_ETOOBIG);
    {
        /* Byte sizes above PTRDIFF_MAX are refused at creation; one used
         * to be accepted and then crashed rk_buffer_host(). */
        rk_buffer_config big = { .dtype = RK_DTYPE_U8 };

        big.dims[0] = SIZE_MAX - 7;
        assert_int_equal(rk_buffer_create(&b, &big), RK_ETOOBIG);
        assert_true(strlen(rk_errdetail()) > 0);
        big.dims[0] = (size_t)PTRDIFF_MAX + 1;
        assert_int_equal(rk_buffer_create(&b, &big), RK_ETOOBIG);
        big.dtype = RK_DTYPE_U16;
        big.dims[0] = (size_t)PTRDIFF_MAX / 2 + 1;
        assert_int_equal(rk_buffer_create(&b, &big), RK_ETOOBIG);
        big.dims[0] = (size_t)PTRDIFF_MAX / 4;
        big.dims[1] = 2;
        big.dims[2] = 2; /* bytes fit size_t, not PTRDIFF_MAX */
        assert_int_equal(rk_buffer_create(&b, &big), RK_ETOOBIG);
        /* The largest size is accepted (memory comes on first use). */
        big.dtype = RK_DTYPE_U8;
        big.dims[0] = PTRDIFF_MAX;
        big.dims[1] = big.dims[2] = 0;
        assert_int_equal(rk_buffer_create(&b, &big), RK_OK);
        assert_int_equal(rk_buffer_bytes(b), (size_t)PTRDIFF_MAX);
        rk_buffer_destroy(b);
    }
    cfg.dims[1] = 3;
    cfg.dims[2] = 0;
    cfg.elem_size = 4; /* contradicts f64 */
    assert_int_equal(rk_buffer_create(&b, &cfg), RK_EINVAL);
    cfg.dtype = RK_DTYPE_OPAQUE; /* opaque needs a size */
    cfg.elem_size = 0;
    assert_int_equal(rk_buffer_create(&b, &cfg), RK_EINVAL);
    cfg.dtype = (rk_dtype)77;
    assert_int_equal(rk_buffer_create(&b, &cfg), RK_EINVAL);
    assert_int_equal(rk_dtype_size(RK_DTYPE_I16), 2);
    assert_string_equal(rk_dtype_name(RK_DTYPE_F32), "f32");
    assert_string_equal(
        rk_buffer_state_name(RK_BUFFER_DEVICE_DIRTY), "DEVICE_DIRTY");
}

static void
test_opaque_fill_and_copy(void **state)
{
    struct rec {
        uint32_t a;
        uint16_t b;
        uint8_t c[10];
    } pat = { 0xdeadbeef, 0x1234, { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 } };
    rk_buffer_config cfg = {
        .dtype = RK_DTYPE_OPAQUE, .elem_size = sizeof(pat), .dims = { 7 }
    };
    struct rec out[7];
    rk_buffer *b = NULL;
    void *d;
    (void)state;

    assert_int_equal(rk_buffer_create(&b, &cfg), RK_OK);
    assert_int_equal(rk_buffer_fill(b, &pat), RK_OK);
    /* Through the device side and back. */
    assert_int_equal(rk_buffer_device(b, RK_ACCESS_WRITE, &d), RK_OK);
    ((struct rec *)d)[3].a = 7;
    assert_int_equal(rk_buffer_copy_to(b, out, sizeof(out)), RK_OK);
    for (int i = 0; i < 7; i++) {
        assert_int_equal(out[i].a, i == 3 ? 7u : pat.a);
        assert_int_equal(out[i].b, pat.b);
        assert_memory_equal(out[i].c, pat.c, sizeof(pat.c));
    }
    assert_int_equal(rk_buffer_copy_to(b, out, sizeof(out) - 1), RK_EINVAL);
    assert_int_equal(rk_buffer_copy_from(b, out, 1), RK_EINVAL);
    assert_int_equal(rk_buffer_copy_from(b, NULL, sizeof(out)), RK_EINVAL);
    rk_buffer_destroy(b);
}

static void
test_pool_backed_buffer(void **state)
{
    rk_pool_config pc = { .kind = RK_POOL_HOST };
    rk_pool *hp, *dp;
    rk_pool_stats s;
    rk_buffer *b = NULL;
    rk_buffer_config bc = { .dtype = RK_DTYPE_U32, .dims = { 100 } };
    void *p;
    (void)state;

    assert_int_equal(rk_pool_create(&hp, &pc), RK_OK);
    pc.kind = RK_POOL_MALLOC;
    assert_int_equal(rk_pool_create(&dp, &pc), RK_OK);
    bc.host_pool = hp;
    bc.device_pool = dp;
    assert_int_equal(rk_buffer_create(&b, &bc), RK_OK);
    assert_int_equal(rk_buffer_zeros(b), RK_OK);
    assert_int_equal(rk_buffer_device(b, RK_ACCESS_READ, &p), RK_OK);
    rk_pool_stats_get(hp, &s);
    assert_int_equal(s.used_bytes, 512); /* 400 bytes in the 512 class */
    rk_pool_stats_get(dp, &s);
    assert_int_equal(s.used_bytes, 400);
    rk_buffer_destroy(b);
    rk_pool_stats_get(hp, &s);
    assert_int_equal(s.used_bytes, 0);
    rk_pool_stats_get(dp, &s);
    assert_int_equal(s.used_bytes, 0);
    rk_pool_destroy(hp);
    rk_pool_destroy(dp);
}

static void
test_bad_arguments(void **state)
{
    rk_buffer_config cfg = { .dims = { 8 } };
    rk_buffer *b = NULL;
    rk_buffer_stats st;
    void *p;
    (void)state;

    assert_int_equal(rk_buffer_create(NULL, &cfg), RK_EINVAL);
    assert_int_equal(rk_buffer_create(&b, NULL), RK_EINVAL); /* no shape */
    assert_int_equal(rk_buffer_create(&b, &cfg), RK_OK);
    assert_int_equal(rk_buffer_host(b, (rk_access)9, &p), RK_EINVAL);
    assert_int_equal(rk_buffer_device(b, RK_ACCESS_READ, NULL), RK_EINVAL);
    assert_int_equal(rk_buffer_fill(b, NULL), RK_EINVAL);
    assert_int_equal(rk_buffer_mark_host_dirty(b), RK_ESTATE);
    assert_true(strstr(rk_errdetail(), "UNINITIALIZED") != NULL);
    assert_int_equal(rk_buffer_mark_device_dirty(NULL), RK_EINVAL);
    assert_int_equal(rk_buffer_ensure_host(NULL, NULL), RK_EINVAL);
    rk_buffer_stats_get(NULL, &st);
    assert_int_equal(st.h2d_transfers, 0);
    rk_buffer_destroy(b);
    rk_buffer_destroy(NULL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes_and_types),
        cmocka_unit_test(test_opaque_fill_and_copy),
        cmocka_unit_test(test_pool_backed_buffer),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
