/* Typed messages <-> msgpack: error frames (bad fields, truncated and
 * corrupt input, huge declared counts, every ndarray kind). Shares
 * tests/support/msg_codec_check.h with test_msg_codec.c. */
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

/* ------------------------------------------------------ error frames */

static void
test_errors_point(void **state)
{
    struct fb f;

    (void)state;
    /* x is a string */
    fb_init(&f);
    msgpack_pack_map(&f.pk, 2);
    fb_str(&f, "x");
    fb_str(&f, "1.0");
    fb_str(&f, "y");
    msgpack_pack_double(&f.pk, 1);
    assert_int_equal(dec_point(&f, 0), RK_EFIELDTYPE);
    assert_detail_has("Point.x");
    /* y missing */
    fb_init(&f);
    msgpack_pack_map(&f.pk, 1);
    fb_str(&f, "x");
    msgpack_pack_double(&f.pk, 1);
    assert_int_equal(dec_point(&f, 0), RK_EFIELDMISSING);
    assert_detail_has("Point.y");
    /* wrong __type__ */
    fb_init(&f);
    msgpack_pack_map(&f.pk, 3);
    fb_str(&f, "__type__");
    fb_str(&f, "Vector");
    fb_str(&f, "x");
    msgpack_pack_double(&f.pk, 1);
    fb_str(&f, "y");
    msgpack_pack_double(&f.pk, 1);
    assert_int_equal(dec_point(&f, 0), RK_ETYPE);
    assert_detail_has("Point");
    assert_detail_has("Vector");
    /* duplicate key */
    fb_init(&f);
    msgpack_pack_map(&f.pk, 3);
    fb_str(&f, "x");
    msgpack_pack_double(&f.pk, 1);
    fb_str(&f, "x");
    msgpack_pack_double(&f.pk, 1);
    fb_str(&f, "y");
    msgpack_pack_double(&f.pk, 1);
    assert_int_equal(dec_point(&f, 0), RK_EDECODE);
    /* unknown non-string key: ignored, strict refuses */
    fb_init(&f);
    msgpack_pack_map(&f.pk, 3);
    msgpack_pack_int(&f.pk, 1);
    msgpack_pack_nil(&f.pk);
    fb_str(&f, "x");
    msgpack_pack_double(&f.pk, 1);
    fb_str(&f, "y");
    msgpack_pack_float(&f.pk, 1);
    assert_int_equal(dec_point(&f, 0), RK_OK);
    /* priority out of range, bad uuid */
    fb_init(&f);
    msgpack_pack_map(&f.pk, 3);
    fb_str(&f, "priority");
    msgpack_pack_int(&f.pk, 256);
    fb_str(&f, "x");
    msgpack_pack_double(&f.pk, 1);
    fb_str(&f, "y");
    msgpack_pack_double(&f.pk, 1);
    assert_int_equal(dec_point(&f, 0), RK_EFIELDTYPE);
    assert_detail_has("priority");
    fb_init(&f);
    msgpack_pack_map(&f.pk, 3);
    fb_str(&f, "message_id");
    fb_str(&f, "not-a-uuid");
    fb_str(&f, "x");
    msgpack_pack_double(&f.pk, 1);
    fb_str(&f, "y");
    msgpack_pack_double(&f.pk, 1);
    assert_int_equal(dec_point(&f, 0), RK_EFIELDTYPE);
    assert_detail_has("message_id");
    fb_init(&f);
    msgpack_pack_map(&f.pk, 3);
    fb_str(&f, "correlation_id");
    msgpack_pack_bin(&f.pk, 15);
    msgpack_pack_bin_body(&f.pk, MID, 15);
    fb_str(&f, "x");
    msgpack_pack_double(&f.pk, 1);
    fb_str(&f, "y");
    msgpack_pack_double(&f.pk, 1);
    assert_int_equal(dec_point(&f, 0), RK_EFIELDTYPE);
    assert_detail_has("correlation_id");
    /* not a map, trailing bytes */
    fb_init(&f);
    msgpack_pack_array(&f.pk, 0);
    assert_int_equal(dec_point(&f, 0), RK_EDECODE);
    fb_init(&f);
    msgpack_pack_map(&f.pk, 2);
    fb_str(&f, "x");
    msgpack_pack_double(&f.pk, 1);
    fb_str(&f, "y");
    msgpack_pack_double(&f.pk, 1);
    msgpack_pack_nil(&f.pk);
    assert_int_equal(dec_point(&f, 0), RK_EDECODE);
}

static void
put_300(msgpack_packer *pk)
{
    msgpack_pack_int(pk, 300);
}
static void
put_neg(msgpack_packer *pk)
{
    msgpack_pack_int(pk, -1);
}
static void
put_float(msgpack_packer *pk)
{
    msgpack_pack_double(pk, 1.5);
}
static void
put_big_float(msgpack_packer *pk)
{
    msgpack_pack_double(pk, 1e300);
}
static void
put_true(msgpack_packer *pk)
{
    msgpack_pack_true(pk);
}
static void
put_list3(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 3);
    for (int i = 0; i < 3; i++)
        msgpack_pack_int(pk, i);
}
static void
put_list_str(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 4);
    for (int i = 0; i < 3; i++)
        msgpack_pack_int(pk, i);
    msgpack_pack_str(pk, 1);
    msgpack_pack_str_body(pk, "a", 1);
}
static void
put_list_1025(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 1025);
    for (int i = 0; i < 1025; i++)
        msgpack_pack_int(pk, i);
}
static void
put_str65(msgpack_packer *pk)
{
    char s[65];

    memset(s, 'a', sizeof(s));
    msgpack_pack_str(pk, 65);
    msgpack_pack_str_body(pk, s, 65);
}
static const char *utf8_case;
static void
put_utf8_case(msgpack_packer *pk)
{
    msgpack_pack_str(pk, strlen(utf8_case));
    msgpack_pack_str_body(pk, utf8_case, strlen(utf8_case));
}
static void
put_bin3(msgpack_packer *pk)
{
    msgpack_pack_bin(pk, 3);
    msgpack_pack_bin_body(pk, "abc", 3);
}
static void
put_nd_badlen(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 3);
    msgpack_pack_str(pk, 11);
    msgpack_pack_str_body(pk, "__ndarray__", 11);
    msgpack_pack_bin(pk, 15);
    msgpack_pack_bin_body(pk, "0123456789abcde", 15);
    msgpack_pack_str(pk, 5);
    msgpack_pack_str_body(pk, "dtype", 5);
    msgpack_pack_str(pk, 7);
    msgpack_pack_str_body(pk, "float32", 7);
    msgpack_pack_str(pk, 5);
    msgpack_pack_str_body(pk, "shape", 5);
    msgpack_pack_array(pk, 1);
    msgpack_pack_int(pk, 4);
}
static void
put_nd_dtype(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 3);
    msgpack_pack_str(pk, 11);
    msgpack_pack_str_body(pk, "__ndarray__", 11);
    msgpack_pack_bin(pk, 8);
    msgpack_pack_bin_body(pk, "01234567", 8);
    msgpack_pack_str(pk, 5);
    msgpack_pack_str_body(pk, "dtype", 5);
    msgpack_pack_str(pk, 9);
    msgpack_pack_str_body(pk, "complex64", 9);
    msgpack_pack_str(pk, 5);
    msgpack_pack_str_body(pk, "shape", 5);
    msgpack_pack_array(pk, 1);
    msgpack_pack_int(pk, 1);
}
static void
put_nd_bool2(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 3);
    msgpack_pack_str(pk, 11);
    msgpack_pack_str_body(pk, "__ndarray__", 11);
    msgpack_pack_bin(pk, 3);
    msgpack_pack_bin_body(pk, "\x01\x02\x00", 3);
    msgpack_pack_str(pk, 5);
    msgpack_pack_str_body(pk, "dtype", 5);
    msgpack_pack_str(pk, 4);
    msgpack_pack_str_body(pk, "bool", 4);
    msgpack_pack_str(pk, 5);
    msgpack_pack_str_body(pk, "shape", 5);
    msgpack_pack_array(pk, 1);
    msgpack_pack_int(pk, 3);
}
static void
put_point_wrong(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 2);
    msgpack_pack_str(pk, 1);
    msgpack_pack_str_body(pk, "x", 1);
    msgpack_pack_nil(pk);
    msgpack_pack_str(pk, 1);
    msgpack_pack_str_body(pk, "y", 1);
    msgpack_pack_double(pk, 1);
}

static void
test_errors_fields(void **state)
{
    (void)state;
    assert_int_equal(dec_all_with("u8", put_300, 0), RK_EFIELDTYPE);
    assert_detail_has("AllTypes.u8");
    assert_detail_has("range");
    assert_int_equal(dec_all_with("i8", put_300, 0), RK_EFIELDTYPE);
    assert_int_equal(dec_all_with("i16", put_300, 0), RK_OK);
    assert_int_equal(dec_all_with("u64", put_neg, 0), RK_EFIELDTYPE);
    assert_int_equal(dec_all_with("i32", put_float, 0), RK_EFIELDTYPE);
    assert_detail_has("AllTypes.i32");
    assert_int_equal(dec_all_with("f32", put_big_float, 0), RK_EFIELDTYPE);
    assert_int_equal(dec_all_with("f64", put_big_float, 0), RK_OK);
    assert_int_equal(dec_all_with("f64", put_true, 0), RK_EFIELDTYPE);
    assert_int_equal(dec_all_with("flag", put_neg, 0), RK_EFIELDTYPE);
    assert_detail_has("AllTypes.flag");
    assert_int_equal(dec_all_with("arr", put_list3, 0), RK_EFIELDTYPE);
    assert_detail_has("AllTypes.arr");
    assert_int_equal(dec_all_with("samples", put_list3, 0), RK_OK);
    assert_int_equal(dec_all_with("samples", put_list_str, 0), RK_EFIELDTYPE);
    assert_detail_has("AllTypes.samples");
    assert_int_equal(dec_all_with("samples", put_list_1025, 0), RK_ETOOBIG);
    assert_detail_has("AllTypes.samples");
    assert_int_equal(dec_all_with("ids", put_list_1025, 0), RK_ETOOBIG);
    assert_int_equal(dec_all_with("label", put_str65, 0), RK_ETOOBIG);
    assert_detail_has("AllTypes.label");
    assert_int_equal(dec_all_with("label", put_bin3, 0), RK_EFIELDTYPE);
    {
        /* Python's decoder refuses these; so do we. */
        static const char *const bad[] = { "\xc3", "\xc0\x80", "\xed\xa0\x80",
            "\xf4\x90\x80\x80", "a\xff", "\xe2\x82" };
        static const char *const good[] = { "\xc3\xa9", "\xe2\x82\xac",
            "\xf0\x9f\x98\x80", "\xef\xbf\xbf" };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            utf8_case = bad[i];
            assert_int_equal(
                dec_all_with("label", put_utf8_case, 0), RK_EFIELDTYPE);
            assert_detail_has("UTF-8");
        }
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
            utf8_case = good[i];
            assert_int_equal(dec_all_with("label", put_utf8_case, 0), RK_OK);
        }
    }
    assert_int_equal(dec_all_with("blob", put_str65, 0), RK_EFIELDTYPE);
    assert_detail_has("AllTypes.blob");
    assert_int_equal(dec_all_with("blob", put_bin3, 0), RK_OK);
    assert_int_equal(dec_all_with("arr", put_nd_badlen, 0), RK_EDECODE);
    assert_detail_has("AllTypes.arr");
    assert_int_equal(dec_all_with("arr", put_nd_dtype, 0), RK_EFIELDTYPE);
    assert_detail_has("complex64");
    assert_int_equal(dec_all_with("bits", put_nd_bool2, 0), RK_EFIELDTYPE);
    assert_detail_has("AllTypes.bits");
    assert_int_equal(
        dec_all_with("origin", put_point_wrong, 0), RK_EFIELDTYPE);
    assert_detail_has("Point.x");
    assert_int_equal(dec_all_with("origin", put_300, 0), RK_EFIELDTYPE);
    assert_detail_has("AllTypes.origin");
}

/* Every strict prefix of a valid frame is truncated; corrupting any byte
 * never crashes or leaks (ASan checks), whatever it returns. */
static void
test_truncated_and_corrupt(void **state)
{
    const char *const vecs[]
        = { VEC_POINT_REF, VEC_ALL_REF, VEC_ALL_LISTS, VEC_ALL_TYPESTR };
    static const uint8_t pokes[]
        = { 0x00, 0xff, 0xc1, 0xdd, 0xdf, 0xc6, 0x7f, 0x90, 0x80 };

    (void)state;
    for (size_t v = 0; v < sizeof(vecs) / sizeof(vecs[0]); v++) {
        size_t n;
        uint8_t *b = unhex(vecs[v], &n);
        rkt_all a;

        for (size_t cut = 0; cut < n; cut++) {
            uint8_t *p = malloc(cut ? cut : 1);

            memcpy(p, b, cut);
            assert_int_equal(
                rk_msg_decode(&rkt_all_msgtype, p, cut, &a, NULL, 0),
                RK_ETRUNCATED);
            free(p);
        }
        for (size_t i = 0; i < n; i++) {
            uint8_t *p = malloc(n);

            for (size_t k = 0; k < sizeof(pokes); k++) {
                int rc;

                memcpy(p, b, n);
                p[i] = pokes[k];
                rc = rk_msg_decode(&rkt_all_msgtype, p, n, &a, NULL, 0);
                if (rc == RK_OK)
                    rk_msg_free(&rkt_all_msgtype, &a);
                else
                    assert_true(strlen(rk_errdetail()) > 0);
            }
            free(p);
        }
        free(b);
    }
}

static void
test_huge_declared_counts(void **state)
{
    static const uint8_t frames[][8] = {
        { 0xdd, 0x7f, 0xff, 0xff, 0xff },       /* array32 of 2^31 */
        { 0xdf, 0x10, 0x00, 0x00, 0x00 },       /* map32 of 2^28 */
        { 0xc6, 0xff, 0xff, 0xff, 0xff, 0x00 }, /* bin32 of 4 GiB */
        { 0x81, 0xa1, 0x78, 0xdc, 0xff, 0xff }, /* {"x": array16 65535} */
    };
    rkt_point p;

    (void)state;
    for (size_t i = 0; i < sizeof(frames) / sizeof(frames[0]); i++)
        assert_int_equal(
            rk_msg_decode(&rkt_point_msgtype, frames[i], 8, &p, NULL, 0),
            RK_ETRUNCATED);
    /* reserved tag byte */
    assert_int_equal(
        rk_msg_decode(&rkt_point_msgtype, "\xc1", 1, &p, NULL, 0), RK_EDECODE);
    assert_int_equal(rk_msg_decode(&rkt_point_msgtype, NULL, 0, &p, NULL, 0),
        RK_ETRUNCATED);
}

static void
test_encode_errors(void **state)
{
    static double samples[1025];
    uint8_t buf[4096];
    size_t len, need;
    rkt_all a;

    (void)state;
    fill_all(&a, samples, 1025, NULL, 0, "x", 1);
    assert_int_equal(
        rk_msg_encode(&rkt_all_msgtype, NULL, &a, buf, sizeof(buf), &len),
        RK_ETOOBIG);
    assert_detail_has("AllTypes.samples");
    fill_all(&a, NULL, 3, NULL, 0, "x", 1);
    assert_int_equal(
        rk_msg_encode(&rkt_all_msgtype, NULL, &a, buf, sizeof(buf), &len),
        RK_EINVAL);
    assert_detail_has("AllTypes.samples");
    fill_all(&a, samples, 10, NULL, 0, "x", 1);
    assert_int_equal(
        rk_msg_encode(&rkt_all_msgtype, NULL, &a, NULL, 0, &need), RK_OK);
    for (size_t cap = 0; cap < need; cap += 7) {
        memset(buf, 0xEE, sizeof(buf));
        assert_int_equal(
            rk_msg_encode(&rkt_all_msgtype, NULL, &a, buf, cap, &len),
            RK_EMSGSIZE);
        assert_int_equal(len, need);
        assert_int_equal(buf[cap], 0xEE); /* nothing written past cap */
    }
    assert_int_equal(
        rk_msg_encode(&rkt_all_msgtype, NULL, &a, buf, need, &len), RK_OK);
    assert_int_equal(len, need);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors_point),
        cmocka_unit_test(test_errors_fields),
        cmocka_unit_test(test_truncated_and_corrupt),
        cmocka_unit_test(test_huge_declared_counts),
        cmocka_unit_test(test_encode_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
