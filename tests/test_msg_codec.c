/* Typed messages <-> msgpack: the reference vectors, round trips, numpy
 * scalars and key order. Error frames are in test_msg_codec_errors.c,
 * malformed descriptors and the token tape in test_msg_codec_descriptors.c;
 * tests/support/msg_codec_check.h holds what they share. */
#include <float.h>
#include <math.h>
#include <msgpack.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/common.h"
#include "msg_test_types.h"
#include "msg_codec_check.h"
#include "ringkernel/ringkernel.h"

/* ------------------------------------------------ reference vectors */

static void
encode_matches(const rk_msgtype *t, const rk_msg_header *h, const void *obj,
    const uint8_t *want, size_t wlen)
{
    uint8_t buf[2048];
    size_t len = 0;

    assert_int_equal(rk_msg_encode(t, h, obj, buf, sizeof(buf), &len), RK_OK);
    assert_int_equal(len, wlen);
    assert_memory_equal(buf, want, wlen);
    /* measuring mode gives the same length */
    len = 0;
    assert_int_equal(rk_msg_encode(t, h, obj, NULL, 0, &len), RK_OK);
    assert_int_equal(len, wlen);
}

static void
test_vec_point_ref(void **state)
{
    size_t n;
    uint8_t *b = unhex(VEC_POINT_REF, &n);
    rkt_point p;
    rk_msg_header h;

    (void)state;
    memset(&h, 0x55, sizeof(h));
    assert_int_equal(
        rk_msg_decode(&rkt_point_msgtype, b, n, &p, &h, RK_MSG_STRICT), RK_OK);
    assert_true(p.x == 1.5);
    assert_true(p.y == -2.25);
    assert_memory_equal(h.message_id.b, MID, 16);
    assert_true(rk_uuid_is_nil(&h.correlation_id));
    assert_int_equal(h.priority, 128);
    assert_int_equal(h.type_id, 0x55555555); /* untouched */
    rk_msg_header_init(&h, rkt_point_msgtype.id, 128);
    memcpy(h.message_id.b, MID, 16);
    encode_matches(&rkt_point_msgtype, &h, &p, b, n);
    free(b);
}

static void
test_vec_all_ref(void **state)
{
    size_t n;
    uint8_t *b = unhex(VEC_ALL_REF, &n);
    rkt_all a;
    rk_msg_header h;
    static const float arr[4] = { 1.0f, -0.5f, 3.25f, 1e30f };
    static const double samples[3] = { 0.0, -1.0, 2.5e-300 };

    (void)state;
    assert_int_equal(
        rk_msg_decode(&rkt_all_msgtype, b, n, &a, &h, RK_MSG_STRICT), RK_OK);
    assert_true(a.flag);
    assert_int_equal(a.i8, INT8_MIN);
    assert_int_equal(a.i16, INT16_MIN);
    assert_int_equal(a.i32, INT32_MIN);
    assert_true(a.i64 == INT64_MIN);
    assert_int_equal(a.u8, UINT8_MAX);
    assert_int_equal(a.u16, UINT16_MAX);
    assert_int_equal(a.u32, UINT32_MAX);
    assert_true(a.u64 == UINT64_MAX);
    assert_true(isinf(a.f32) && a.f32 > 0);
    assert_true(isinf(a.f64) && a.f64 < 0);
    assert_memory_equal(a.arr, arr, sizeof(arr));
    assert_true(a.bits[0] && !a.bits[1] && a.bits[2]);
    assert_int_equal(a.samples.len, 3);
    assert_memory_equal(a.samples.ptr, samples, sizeof(samples));
    assert_int_equal(a.ids.len, 0);
    assert_null(a.ids.ptr);
    assert_int_equal(a.blob.len, 4);
    assert_memory_equal(a.blob.ptr, "\x00\x01\xfe\xff", 4);
    assert_int_equal(a.label.len, 6);
    assert_string_equal(a.label.ptr, "h\xc3\xa9llo");
    assert_true(a.origin.x == 0.25 && a.origin.y == 4.0);
    assert_memory_equal(h.message_id.b, MID, 16);
    assert_memory_equal(h.correlation_id.b, CID, 16);
    assert_int_equal(h.priority, 7);
    /* C writes exactly what Python wrote. */
    encode_matches(&rkt_all_msgtype, &h, &a, b, n);
    rk_msg_free(&rkt_all_msgtype, &a);
    assert_null(a.samples.ptr);
    assert_null(a.label.ptr);
    free(b);
}

static void
test_vec_all_lists(void **state)
{
    size_t n;
    uint8_t *b = unhex(VEC_ALL_LISTS, &n);
    rkt_all a;
    rk_msg_header h;

    (void)state;
    memset(&h, 0, sizeof(h));
    /* "extra" is unknown: fine by default, an error when strict. */
    assert_int_equal(
        rk_msg_decode(&rkt_all_msgtype, b, n, &a, &h, RK_MSG_STRICT),
        RK_EFIELDUNKNOWN);
    assert_detail_has("extra");
    assert_null(a.samples.ptr); /* zeroed on failure */
    assert_int_equal(rk_msg_decode(&rkt_all_msgtype, b, n, &a, &h, 0), RK_OK);
    assert_memory_equal(h.message_id.b, MID, 16);
    assert_memory_equal(h.correlation_id.b, CID, 16);
    assert_int_equal(h.priority, 0);
    assert_false(a.flag);
    assert_int_equal(a.i8, INT8_MAX);
    assert_int_equal(a.i32, INT32_MAX);
    assert_true(a.i64 == INT64_MAX);
    assert_true(a.f32 == 3.0f && a.f64 == -7.0);
    assert_true(a.arr[0] == 1.0f && a.arr[1] == 2.5f && a.arr[2] == -3.0f
        && a.arr[3] == 4.0f);
    assert_true(!a.bits[0] && a.bits[1] && !a.bits[2]);
    assert_int_equal(a.samples.len, 3);
    assert_true(a.samples.ptr[1] == 2.0 && a.samples.ptr[2] == -3.5);
    assert_int_equal(a.ids.len, 3);
    assert_int_equal(a.ids.ptr[0], -1);
    assert_int_equal(a.ids.ptr[2], 1);
    assert_int_equal(a.blob.len, 0);
    assert_int_equal(a.label.len, 0);
    assert_string_equal(a.label.ptr, "");
    assert_true(a.origin.x == 1.0 && a.origin.y == 2.0);
    rk_msg_free(&rkt_all_msgtype, &a);
    free(b);
}

static void
test_vec_other_forms(void **state)
{
    size_t n;
    uint8_t *b = unhex(VEC_POINT_BARE_BIN, &n);
    rkt_point p;
    rkt_all a;
    rk_msg_header h;

    (void)state;
    assert_int_equal(
        rk_msg_decode(&rkt_point_msgtype, b, n, &p, &h, RK_MSG_STRICT), RK_OK);
    assert_memory_equal(h.message_id.b, MID, 16);
    assert_int_equal(h.priority, RK_MSG_PRIORITY_DEFAULT);
    assert_true(p.x == 0.0 && p.y == 0.0 && signbit(p.y));
    free(b);

    b = unhex(VEC_ALL_TYPESTR, &n);
    assert_int_equal(
        rk_msg_decode(&rkt_all_msgtype, b, n, &a, &h, RK_MSG_STRICT), RK_OK);
    assert_int_equal(h.priority, 255);
    assert_true(a.arr[0] == 1.0f && a.arr[3] == 4.0f);
    assert_true(a.bits[0] && !a.bits[1] && a.bits[2]);
    assert_int_equal(a.samples.len, 3);
    assert_true(a.samples.ptr[2] == 3.0);
    assert_int_equal(a.ids.len, 2);
    assert_int_equal(a.ids.ptr[1], -7);
    assert_string_equal(a.label.ptr, "y");
    rk_msg_free(&rkt_all_msgtype, &a);
    free(b);

    b = unhex(VEC_POINT_NAN, &n);
    assert_int_equal(
        rk_msg_decode(&rkt_point_msgtype, b, n, &p, &h, 0), RK_OK);
    assert_true(isnan(p.x));
    assert_true(isinf(p.y));
    rk_msg_header_init(&h, 0, 128);
    memcpy(h.message_id.b, MID, 16);
    encode_matches(&rkt_point_msgtype, &h, &p, b, n);
    free(b);
}

/* -------------------------------------------------------- round trips */

static void
roundtrip_all(const rkt_all *in)
{
    static uint8_t buf[64 * 1024];
    rk_msg_header h, h2;
    rkt_all out;
    size_t len;

    rk_msg_header_init(&h, rkt_all_msgtype.id, 3);
    rk_msg_with_correlation(&h, &h.message_id);
    assert_int_equal(
        rk_msg_encode(&rkt_all_msgtype, &h, in, buf, sizeof(buf), &len),
        RK_OK);
    assert_int_equal(
        rk_msg_decode(&rkt_all_msgtype, buf, len, &out, &h2, RK_MSG_STRICT),
        RK_OK);
    assert_all_equal(in, &out);
    assert_memory_equal(&h.message_id, &h2.message_id, 16);
    assert_memory_equal(&h.correlation_id, &h2.correlation_id, 16);
    assert_int_equal(h2.priority, 3);
    rk_msg_free(&rkt_all_msgtype, &out);
}

static void
test_roundtrip_all(void **state)
{
    static double samples[1024];
    static int32_t ids[16] = { INT32_MIN, -1, 0, 1, INT32_MAX };
    static char label[65];
    rkt_all a;

    (void)state;
    for (int i = 0; i < 1024; i++)
        samples[i] = i % 3 == 0 ? -INFINITY : i * 1.0e-3;
    samples[7] = NAN;
    memset(label, 'z', 64);
    fill_all(&a, samples, 3, ids, 5, label, 10);
    roundtrip_all(&a);
    /* empty variable-length fields */
    fill_all(&a, NULL, 0, NULL, 0, label, 0);
    a.blob.ptr = NULL;
    a.blob.len = 0;
    roundtrip_all(&a);
    /* every maximum */
    fill_all(&a, samples, 1024, ids, 16, label, 64);
    roundtrip_all(&a);
    /* extreme scalars */
    a.i8 = INT8_MIN;
    a.i64 = INT64_MIN;
    a.u64 = UINT64_MAX;
    a.f32 = -FLT_MAX;
    a.f64 = -0.0;
    a.origin.x = INFINITY;
    roundtrip_all(&a);
    a.i64 = INT64_MAX;
    a.f32 = NAN;
    a.f64 = DBL_MIN;
    roundtrip_all(&a);
}

/* Every integer width at its edges, through the variable-size encodings. */
static void
test_roundtrip_int_edges(void **state)
{
    static const int64_t sv[] = { 0, -1, -32, -33, 127, -128, 128, -129, 255,
        256, 32767, -32768, 65535, 65536, INT32_MAX, INT32_MIN, 4294967295ll,
        INT64_MAX, INT64_MIN };
    rkt_all a;

    (void)state;
    fill_all(&a, NULL, 0, NULL, 0, "", 0);
    for (size_t i = 0; i < sizeof(sv) / sizeof(sv[0]); i++) {
        a.i64 = sv[i];
        a.u64 = (uint64_t)sv[i];
        a.i32 = (int32_t)sv[i];
        a.u32 = (uint32_t)sv[i];
        a.i16 = (int16_t)sv[i];
        a.u16 = (uint16_t)sv[i];
        a.i8 = (int8_t)sv[i];
        a.u8 = (uint8_t)sv[i];
        roundtrip_all(&a);
    }
}

/* ------------------------------------------ numpy scalars, key order */

/* PyDotCompute sends np.float32 / np.int64 values as 0-d ndarray maps. */
static void
test_vec_numpy_scalars(void **state)
{
    size_t n;
    uint8_t *b = unhex(VEC_POINT_NP, &n);
    rkt_point p;
    rkt_all a;
    rk_msg_header h;

    (void)state;
    assert_int_equal(
        rk_msg_decode(&rkt_point_msgtype, b, n, &p, &h, RK_MSG_STRICT), RK_OK);
    assert_true(p.x == 1.5);
    assert_true(p.y == -3.0); /* int64 into a double field */
    assert_memory_equal(h.message_id.b, MID, 16);
    free(b);

    b = unhex(VEC_ALL_NP, &n);
    assert_int_equal(
        rk_msg_decode(&rkt_all_msgtype, b, n, &a, &h, RK_MSG_STRICT), RK_OK);
    assert_true(a.flag);
    assert_int_equal(a.i8, -5);
    assert_int_equal(a.i16, -300);
    assert_int_equal(a.i32, 70000);
    assert_true(a.i64 == -((int64_t)1 << 40));
    assert_int_equal(a.u8, 200);
    assert_int_equal(a.u16, 60000);
    assert_true(a.u32 == 4000000000u);
    assert_true(a.u64 == UINT64_MAX - 1);
    assert_true(a.f32 == 0.1f);
    assert_true(a.f64 == (double)0.1f); /* float32 widened exactly */
    assert_true(a.origin.x == 2.5 && a.origin.y == 7.0);
    assert_int_equal(h.priority, 1);
    rk_msg_free(&rkt_all_msgtype, &a);
    free(b);
}

/* A RingKernelMessage subclass writes the envelope keys first: also read. */
static void
test_vec_subclass_order(void **state)
{
    size_t n;
    uint8_t *b = unhex(VEC_POINT_SUBCLASS, &n);
    rkt_point p;
    rk_msg_header h;

    (void)state;
    /* Its __type__ is "PointSubclass": a type mismatch, named. */
    assert_int_equal(
        rk_msg_decode(&rkt_point_msgtype, b, n, &p, &h, 0), RK_ETYPE);
    assert_detail_has("PointSubclass");
    /* Without __type__ (cut off the last key and value, fix the count)
     * the fields decode in that order too. */
    {
        size_t tl = 1 + 8 + 1 + strlen("PointSubclass");

        b[0] = 0x85;
        assert_int_equal(rk_msg_decode(&rkt_point_msgtype, b, n - tl, &p, &h,
                             RK_MSG_STRICT),
            RK_OK);
    }
    assert_true(p.x == 0.5 && p.y == 8.0);
    assert_int_equal(h.priority, 9);
    free(b);
}

/* One 0-d (or 1-d) ndarray value for dec_all_with. */
static const char *nd_dtype;
static const void *nd_data;
static size_t nd_len;
static int nd_ndim;

static void
put_nd_scalar(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 3);
    msgpack_pack_str(pk, 11);
    msgpack_pack_str_body(pk, "__ndarray__", 11);
    msgpack_pack_bin(pk, nd_len);
    msgpack_pack_bin_body(pk, nd_data, nd_len);
    msgpack_pack_str(pk, 5);
    msgpack_pack_str_body(pk, "dtype", 5);
    msgpack_pack_str(pk, strlen(nd_dtype));
    msgpack_pack_str_body(pk, nd_dtype, strlen(nd_dtype));
    msgpack_pack_str(pk, 5);
    msgpack_pack_str_body(pk, "shape", 5);
    msgpack_pack_array(pk, (size_t)nd_ndim);
    if (nd_ndim == 1)
        msgpack_pack_int(pk, 1);
}

static int
dec_scalar(const char *field, const char *dtype, const void *data, size_t len,
    int ndim)
{
    nd_dtype = dtype;
    nd_data = data;
    nd_len = len;
    nd_ndim = ndim;
    return dec_all_with(field, put_nd_scalar, RK_MSG_STRICT);
}

/* The conversion rules of docs/wire-format.md for 0-d arrays. */
static void
test_scalar_ndarray_rules(void **state)
{
    const int64_t i100 = 100, i300 = 300;
    const float f = 1.5f;
    const double huge = 1e300;
    const uint8_t two = 2, one = 1;
    const uint64_t umax = UINT64_MAX;

    (void)state;
    assert_int_equal(dec_scalar("i8", "int64", &i100, 8, 0), RK_OK);
    assert_int_equal(dec_scalar("i8", "<i8", &i300, 8, 0), RK_EFIELDTYPE);
    assert_detail_has("AllTypes.i8: integer out of range");
    assert_int_equal(dec_scalar("u64", "uint64", &umax, 8, 0), RK_OK);
    assert_int_equal(dec_scalar("i64", "uint64", &umax, 8, 0), RK_EFIELDTYPE);
    assert_int_equal(dec_scalar("i32", "float32", &f, 4, 0), RK_EFIELDTYPE);
    assert_detail_has("expected an integer, got float");
    assert_int_equal(dec_scalar("f64", "float32", &f, 4, 0), RK_OK);
    assert_int_equal(dec_scalar("f32", "float64", &huge, 8, 0), RK_EFIELDTYPE);
    assert_detail_has("float32 range");
    assert_int_equal(dec_scalar("f64", "int64", &i300, 8, 0), RK_OK);
    assert_int_equal(dec_scalar("flag", "bool", &one, 1, 0), RK_OK);
    assert_int_equal(dec_scalar("flag", "bool", &two, 1, 0), RK_EFIELDTYPE);
    assert_int_equal(dec_scalar("flag", "uint8", &one, 1, 0), RK_EFIELDTYPE);
    assert_int_equal(dec_scalar("u8", "bool", &one, 1, 0), RK_EFIELDTYPE);
    /* Only 0-d: shape [1] is an array, not a scalar. */
    assert_int_equal(dec_scalar("f64", "float64", &huge, 8, 1), RK_EFIELDTYPE);
    assert_detail_has("0-d");
    /* The byte count must match the dtype. */
    assert_int_equal(dec_scalar("f64", "float64", &huge, 4, 0), RK_EDECODE);
    assert_int_equal(
        dec_scalar("f64", "complex64", &huge, 8, 0), RK_EFIELDTYPE);
}

/* Defect 9: the encoder wrote strings the decoder refuses. */
static void
test_encode_refuses_invalid_utf8(void **state)
{
    static const char *const bad[] = { "\xff\xfe", "a\xc3", "\xed\xa0\x80",
        "\xc0\xaf", "\xf4\x90\x80\x80", "ok\x80" };
    static double samples[1] = { 1 };
    static int32_t ids[1] = { 1 };
    uint8_t buf[4096];
    size_t len;
    rkt_all a, out;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        fill_all(
            &a, samples, 1, ids, 1, (char *)bad[i], (uint32_t)strlen(bad[i]));
        rk__clear_detail();
        assert_int_equal(
            rk_msg_encode(&rkt_all_msgtype, NULL, &a, buf, sizeof(buf), &len),
            RK_EENCODE);
        assert_detail_has("AllTypes.label");
        assert_detail_has("UTF-8");
        /* measuring mode refuses it too */
        assert_int_equal(
            rk_msg_encode(&rkt_all_msgtype, NULL, &a, NULL, 0, &len),
            RK_EENCODE);
    }
    /* Valid multi-byte text still round-trips. */
    fill_all(&a, samples, 1, ids, 1, (char *)"h\xc3\xa9\xf0\x9f\x98\x80", 7);
    assert_int_equal(
        rk_msg_encode(&rkt_all_msgtype, NULL, &a, buf, sizeof(buf), &len),
        RK_OK);
    assert_int_equal(
        rk_msg_decode(&rkt_all_msgtype, buf, len, &out, NULL, RK_MSG_STRICT),
        RK_OK);
    assert_string_equal(out.label.ptr, "h\xc3\xa9\xf0\x9f\x98\x80");
    rk_msg_free(&rkt_all_msgtype, &out);
}

/* We write the fields first and "__type__" last, as PyDotCompute does. */
static void
test_encode_key_order(void **state)
{
    rkt_point p = { 1, 2 };
    uint8_t buf[256];
    size_t len;

    (void)state;
    assert_int_equal(
        rk_msg_encode(&rkt_point_msgtype, NULL, &p, buf, sizeof(buf), &len),
        RK_OK);
    assert_int_equal(buf[0], 0x86);
    assert_memory_equal(buf + 1, "\xa1x", 2); /* first key: "x" */
    assert_memory_equal(buf + len - 15, "\xa8__type__\xa5Point", 15);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vec_point_ref),
        cmocka_unit_test(test_vec_all_ref),
        cmocka_unit_test(test_vec_all_lists),
        cmocka_unit_test(test_vec_other_forms),
        cmocka_unit_test(test_vec_numpy_scalars),
        cmocka_unit_test(test_vec_subclass_order),
        cmocka_unit_test(test_scalar_ndarray_rules),
        cmocka_unit_test(test_encode_refuses_invalid_utf8),
        cmocka_unit_test(test_encode_key_order),
        cmocka_unit_test(test_roundtrip_all),
        cmocka_unit_test(test_roundtrip_int_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
