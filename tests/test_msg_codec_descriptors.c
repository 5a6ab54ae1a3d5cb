/* Typed messages <-> msgpack: malformed descriptors, the token tape
 * (overflow, counts beyond the frame, nesting), encode errors, the field
 * count limit and reserved field names. Shares
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

/* --------------------------------------------- malformed descriptors */

/* A hand-built type of n one-byte fields f0..f<n-1>: RK_MSGTYPE_DEFINE
 * refuses more than RK_MSG_MAX_FIELDS at compile time, but encode and
 * decode also take descriptors that never went through it. */
#define WIDE_MAX (RK_MSG_MAX_FIELDS + 1)
static rk_msgfield wide_f[WIDE_MAX];
static char wide_names[WIDE_MAX][4];

static const rk_msgfield *
wide_fields(void)
{
    return wide_f;
}

static rk_msgtype
wide_type(unsigned n)
{
    rk_msgtype t
        = { "Wide", 0x6565, 1, (uint16_t)n, WIDE_MAX, 0, 0, wide_fields };

    for (unsigned i = 0; i < WIDE_MAX; i++) {
        snprintf(wide_names[i], sizeof(wide_names[i]), "f%u", i);
        wide_f[i] = (rk_msgfield) { .name = wide_names[i],
            .name_len = (uint32_t)strlen(wide_names[i]),
            .cls = RK_FC_SCALAR,
            .kind = RK_FK_UINT8,
            .elem_size = 1,
            .offset = i };
    }
    return t;
}

/* {"__type__": "Wide", "f0": 1, ..., "f<n-1>": n} */
static void
wide_frame(struct fb *f, unsigned n)
{
    fb_init(f);
    msgpack_pack_map(&f->pk, n + 1);
    fb_str(f, "__type__");
    fb_str(f, "Wide");
    for (unsigned i = 0; i < n; i++) {
        fb_str(f, wide_names[i]);
        msgpack_pack_uint8(&f->pk, (uint8_t)(i + 1));
    }
}

static void
test_field_count_limit(void **state)
{
    unsigned char obj[WIDE_MAX], buf[1024];
    rk_msgtype t = wide_type(RK_MSG_MAX_FIELDS);
    struct fb f;
    size_t len;

    (void)state;
    /* 64 fields is the limit and works, all of them tracked. */
    for (unsigned i = 0; i < WIDE_MAX; i++)
        obj[i] = (unsigned char)(i + 1);
    assert_int_equal(
        rk_msg_encode(&t, NULL, obj, buf, sizeof(buf), &len), RK_OK);
    memset(obj, 0xff, sizeof(obj));
    assert_int_equal(rk_msg_decode(&t, buf, len, obj, NULL, 0), RK_OK);
    for (unsigned i = 0; i < RK_MSG_MAX_FIELDS; i++)
        assert_int_equal(obj[i], i + 1);
    wide_frame(&f, RK_MSG_MAX_FIELDS - 1); /* the last one missing */
    assert_int_equal(rk_msg_decode(&t, f.sb.data, f.sb.size, obj, NULL, 0),
        RK_EFIELDMISSING);
    assert_detail_has("Wide.f63");
    msgpack_sbuffer_destroy(&f.sb);

    /* 65 fields: refused by encode and decode (the decode mask would have
     * shifted by 64), as by the registry. */
    t = wide_type(WIDE_MAX);
    assert_int_equal(
        rk_msg_encode(&t, NULL, obj, buf, sizeof(buf), &len), RK_EINVAL);
    assert_detail_has("Wide");
    wide_frame(&f, WIDE_MAX);
    memset(obj, 0xff, sizeof(obj));
    assert_int_equal(
        rk_msg_decode(&t, f.sb.data, f.sb.size, obj, NULL, 0), RK_EINVAL);
    for (unsigned i = 0; i < WIDE_MAX; i++)
        assert_int_equal(obj[i], 0); /* zeroed on failure, as documented */
    msgpack_sbuffer_destroy(&f.sb);
    assert_int_equal(rk_msgtype_register(&t), RK_EINVAL);
}

/* A field named like an envelope key would be written twice. */
#define RESV_FIELDS(X) X(x, RK_INT32) X(message_id, RK_UINT8)
RK_MSGTYPE_DECLARE(resv, RESV_FIELDS);
RK_MSGTYPE_DEFINE(resv, "Resv", 0x7001, RESV_FIELDS);
#define RESV_OUTER_FIELDS(X) X(inner, RK_NESTED(resv)) X(y, RK_INT32)
RK_MSGTYPE_DECLARE(resv_outer, RESV_OUTER_FIELDS);
RK_MSGTYPE_DEFINE(resv_outer, "ResvOuter", 0x7002, RESV_OUTER_FIELDS);

static void
test_reserved_field_names(void **state)
{
    resv r = { 5, 6 };
    resv_outer o = { { 5, 6 }, 7 };
    unsigned char buf[256];
    struct fb f;
    size_t len;

    (void)state;
    assert_int_equal(
        rk_msg_encode(&resv_msgtype, NULL, &r, buf, sizeof(buf), &len),
        RK_EINVAL);
    assert_detail_has("Resv.message_id");
    assert_int_equal(
        rk_msg_encode(&resv_outer_msgtype, NULL, &o, buf, sizeof(buf), &len),
        RK_EINVAL);
    assert_detail_has("Resv.message_id");

    fb_init(&f);
    msgpack_pack_map(&f.pk, 3);
    fb_str(&f, "__type__");
    fb_str(&f, "Resv");
    fb_str(&f, "x");
    msgpack_pack_int32(&f.pk, 5);
    fb_str(&f, "message_id");
    msgpack_pack_uint8(&f.pk, 6);
    assert_int_equal(
        rk_msg_decode(&resv_msgtype, f.sb.data, f.sb.size, &r, NULL, 0),
        RK_EINVAL);
    assert_int_equal(r.x, 0);
    msgpack_sbuffer_destroy(&f.sb);

    fb_init(&f);
    msgpack_pack_map(&f.pk, 3);
    fb_str(&f, "__type__");
    fb_str(&f, "ResvOuter");
    fb_str(&f, "y");
    msgpack_pack_int32(&f.pk, 7);
    fb_str(&f, "inner");
    msgpack_pack_map(&f.pk, 1);
    fb_str(&f, "x");
    msgpack_pack_int32(&f.pk, 5);
    assert_int_equal(
        rk_msg_decode(&resv_outer_msgtype, f.sb.data, f.sb.size, &o, NULL, 0),
        RK_EINVAL);
    assert_detail_has("Resv.message_id");
    assert_int_equal(o.y, 0);
    msgpack_sbuffer_destroy(&f.sb);
    assert_int_equal(rk_msgtype_register(&resv_msgtype), RK_EINVAL);
    assert_int_equal(rk_msgtype_register(&resv_outer_msgtype), RK_EINVAL);
}

/* One fixed array of every element kind: the encoder's per-kind constant
 * runs must write numpy's dtype name and a one-element shape for each. */
#define KINDS_FIELDS(X)                                                       \
    X(b, RK_ARRAY(RK_BOOL, 2))                                                \
    X(i8, RK_ARRAY(RK_INT8, 2))                                               \
    X(i16, RK_ARRAY(RK_INT16, 2))                                             \
    X(i32, RK_ARRAY(RK_INT32, 2))                                             \
    X(i64, RK_ARRAY(RK_INT64, 2))                                             \
    X(u8, RK_ARRAY(RK_UINT8, 2))                                              \
    X(u16, RK_ARRAY(RK_UINT16, 2))                                            \
    X(u32, RK_ARRAY(RK_UINT32, 2))                                            \
    X(u64, RK_ARRAY(RK_UINT64, 2))                                            \
    X(f32, RK_ARRAY(RK_FLOAT, 2))                                             \
    X(f64, RK_ARRAY(RK_DOUBLE, 2))
RK_MSGTYPE_DECLARE(kinds_msg, KINDS_FIELDS);
RK_MSGTYPE_DEFINE(kinds_msg, "Kinds", 0x7003, KINDS_FIELDS);

static void
test_ndarray_every_kind(void **state)
{
    static const char *const dtypes[] = { "bool", "int8", "int16", "int32",
        "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64" };
    kinds_msg k, out;
    uint8_t buf[2048];
    size_t len, off = 0;
    msgpack_zone z;
    msgpack_object root;
    unsigned seen = 0;

    (void)state;
    memset(&k, 0, sizeof(k));
    k.b[1] = true;
    k.i8[0] = -3;
    k.i16[1] = -300;
    k.i32[0] = -70000;
    k.i64[1] = INT64_MIN;
    k.u8[0] = 255;
    k.u16[1] = 65535;
    k.u32[0] = UINT32_MAX;
    k.u64[1] = UINT64_MAX;
    k.f32[0] = 0.5f;
    k.f64[1] = -2.5;
    assert_int_equal(
        rk_msg_encode(&kinds_msg_msgtype, NULL, &k, buf, sizeof(buf), &len),
        RK_OK);
    /* read back with msgpack-c's stock unpacker, independently */
    msgpack_zone_init(&z, 4096);
    assert_int_equal(msgpack_unpack((char *)buf, len, &off, &z, &root),
        MSGPACK_UNPACK_SUCCESS);
    assert_int_equal(off, len);
    for (uint32_t i = 0; i < root.via.map.size; i++) {
        const msgpack_object_kv *kv = &root.via.map.ptr[i];
        const rk_msgfield *f = rk_msgtype_fields(&kinds_msg_msgtype);

        for (unsigned j = 0; j < kinds_msg_msgtype.nfields; j++) {
            const msgpack_object *nd = &kv->val;

            if (kv->key.via.str.size != f[j].name_len
                || memcmp(kv->key.via.str.ptr, f[j].name, f[j].name_len))
                continue;
            assert_int_equal(nd->type, MSGPACK_OBJECT_MAP);
            assert_int_equal(nd->via.map.size, 3);
            assert_int_equal(nd->via.map.ptr[0].val.type, MSGPACK_OBJECT_BIN);
            assert_int_equal(
                nd->via.map.ptr[0].val.via.bin.size, 2 * f[j].elem_size);
            assert_int_equal(nd->via.map.ptr[1].key.via.str.size, 5);
            assert_memory_equal(
                nd->via.map.ptr[1].key.via.str.ptr, "dtype", 5);
            assert_int_equal(
                nd->via.map.ptr[1].val.via.str.size, strlen(dtypes[j]));
            assert_memory_equal(nd->via.map.ptr[1].val.via.str.ptr, dtypes[j],
                strlen(dtypes[j]));
            assert_memory_equal(
                nd->via.map.ptr[2].key.via.str.ptr, "shape", 5);
            assert_int_equal(nd->via.map.ptr[2].val.via.array.size, 1);
            assert_int_equal(
                nd->via.map.ptr[2].val.via.array.ptr[0].via.u64, 2);
            seen |= 1u << j;
        }
    }
    msgpack_zone_destroy(&z);
    assert_int_equal(seen, (1u << 11) - 1);
    assert_int_equal(
        rk_msg_decode(&kinds_msg_msgtype, buf, len, &out, NULL, RK_MSG_STRICT),
        RK_OK);
    assert_memory_equal(&k, &out, sizeof(k));
}

/* ------------------------------------------------------- token tape */

/* More objects than rk_msg_decode's on-stack tape holds (it moves to the
 * heap): a 1024-element list for samples, behind an unknown key whose
 * value is a large nested tree that must be skipped as one subtree. */
static void
test_tape_overflow(void **state)
{
    static double samples[1024];
    rkt_all a, out;
    uint8_t buf[32 * 1024];
    msgpack_object root;
    msgpack_zone z;
    struct fb f;

    (void)state;
    for (int i = 0; i < 1024; i++)
        samples[i] = i * 0.5 - 100;
    fill_all(&a, samples, 1024, NULL, 0, "lbl", 3);
    encode_unpack_all(&a, buf, sizeof(buf), &z, &root);
    fb_init(&f);
    msgpack_pack_map(&f.pk, root.via.map.size + 1);
    /* {"zz": [[0, {"samples": 1}], ...] x 300} first: its "samples" key
     * is inside the subtree and must not be taken for the field. */
    fb_str(&f, "zz");
    msgpack_pack_array(&f.pk, 300);
    for (int i = 0; i < 300; i++) {
        msgpack_pack_array(&f.pk, 2);
        msgpack_pack_int(&f.pk, i);
        msgpack_pack_map(&f.pk, 1);
        fb_str(&f, "samples");
        msgpack_pack_int(&f.pk, 1);
    }
    for (uint32_t i = 0; i < root.via.map.size; i++) {
        msgpack_object_kv *kv = &root.via.map.ptr[i];

        msgpack_pack_object(&f.pk, kv->key);
        if (kv->key.via.str.size == 7
            && memcmp(kv->key.via.str.ptr, "samples", 7) == 0) {
            /* as a plain list: one token per element */
            msgpack_pack_array(&f.pk, 1024);
            for (int j = 0; j < 1024; j++)
                msgpack_pack_double(&f.pk, samples[j]);
        } else {
            msgpack_pack_object(&f.pk, kv->val);
        }
    }
    msgpack_zone_destroy(&z);
    assert_int_equal(
        rk_msg_decode(&rkt_all_msgtype, f.sb.data, f.sb.size, &out, NULL, 0),
        RK_OK);
    assert_all_equal(&a, &out);
    rk_msg_free(&rkt_all_msgtype, &out);
    /* strict: the unknown key is named */
    assert_int_equal(rk_msg_decode(&rkt_all_msgtype, f.sb.data, f.sb.size,
                         &out, NULL, RK_MSG_STRICT),
        RK_EFIELDUNKNOWN);
    assert_detail_has("'zz'");
    /* every prefix is still just truncated (and never leaks: ASan) */
    for (size_t cut = 1; cut < f.sb.size; cut += 97)
        assert_int_equal(
            rk_msg_decode(&rkt_all_msgtype, f.sb.data, cut, &out, NULL, 0),
            RK_ETRUNCATED);
    msgpack_sbuffer_destroy(&f.sb);
}

/* A container count larger than the rest of the frame is refused when its
 * header is read, nested or not, whatever the bytes after it. */
static void
test_count_exceeds_frame(void **state)
{
    uint8_t fr[64];
    rkt_point p;
    struct fb f;

    (void)state;
    /* {"x": 1.0, "y": [1, 1, ...] declaring 40 elements in 30 bytes} */
    fb_init(&f);
    msgpack_pack_map(&f.pk, 2);
    fb_str(&f, "x");
    msgpack_pack_double(&f.pk, 1);
    fb_str(&f, "y");
    msgpack_pack_array(&f.pk, 40);
    for (int i = 0; i < 12; i++)
        msgpack_pack_int(&f.pk, 1);
    assert_true(f.sb.size < 40);
    assert_int_equal(
        rk_msg_decode(&rkt_point_msgtype, f.sb.data, f.sb.size, &p, NULL, 0),
        RK_ETRUNCATED);
    assert_detail_has("declares");
    msgpack_sbuffer_destroy(&f.sb);
    /* a map16 of 20 pairs (40 objects) padded to 39 bytes with nils */
    memset(fr, 0xc0, sizeof(fr));
    fr[0] = 0xde;
    fr[1] = 0x00;
    fr[2] = 20;
    assert_int_equal(
        rk_msg_decode(&rkt_point_msgtype, fr, 39, &p, NULL, 0), RK_ETRUNCATED);
    assert_detail_has("declares");
    /* 20 pairs in exactly 43 bytes fit the count; only the keys are
     * wrong (nil keys are unknown keys), so x and y are missing. */
    assert_int_equal(rk_msg_decode(&rkt_point_msgtype, fr, 43, &p, NULL, 0),
        RK_EFIELDMISSING);
}

/* Nesting deeper than msgpack-c's parser stack is a decode error. */
static void
test_nesting_limit(void **state)
{
    uint8_t fr[128];
    rkt_point p;
    size_t n = 0;

    (void)state;
    fr[n++] = 0x83; /* {"x": 1, "y": 2, "z": [[[...]]]} */
    fr[n++] = 0xa1;
    fr[n++] = 'x';
    fr[n++] = 0x01;
    fr[n++] = 0xa1;
    fr[n++] = 'y';
    fr[n++] = 0x02;
    fr[n++] = 0xa1;
    fr[n++] = 'z';
    for (int i = 0; i < 30; i++) /* depth 31 with the map: fine */
        fr[n++] = 0x91;
    fr[n++] = 0xc0;
    assert_int_equal(
        rk_msg_decode(&rkt_point_msgtype, fr, n, &p, NULL, 0), RK_OK);
    assert_true(p.x == 1 && p.y == 2);
    n--;
    for (int i = 0; i < 10; i++)
        fr[n++] = 0x91;
    fr[n++] = 0xc0;
    assert_int_equal(
        rk_msg_decode(&rkt_point_msgtype, fr, n, &p, NULL, 0), RK_EDECODE);
    assert_detail_has("nested deeper");
    assert_true(p.x == 0); /* zeroed */
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ndarray_every_kind),
        cmocka_unit_test(test_tape_overflow),
        cmocka_unit_test(test_count_exceeds_frame),
        cmocka_unit_test(test_nesting_limit),
        cmocka_unit_test(test_field_count_limit),
        cmocka_unit_test(test_reserved_field_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
