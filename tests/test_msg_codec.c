/* Typed messages <-> msgpack: reference vectors, round trips, errors. */
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
#include "ringkernel/ringkernel.h"

static const uint8_t MID[16] = { 0x01, 0x89, 0x0a, 0x5d, 0xac, 0x96, 0x77,
    0x4b, 0xbc, 0xce, 0xb3, 0x02, 0x09, 0x9a, 0x80, 0x57 };
static const uint8_t CID[16] = { 0x01, 0x89, 0xaa, 0xaa, 0xbb, 0xbb, 0x7c,
    0xcc, 0x8d, 0xdd, 0xee, 0xee, 0xff, 0xff, 0x00, 0x11 };

/*
 * The reference vectors: written at test time by the published
 * PyDotCompute 0.2.0 (tests/support/gen_msg_vectors.py, the ctest fixture
 * msg_vectors_pydotcompute) into the file RK_MSG_VECTORS names, one
 * "name hex" line each. Read once; the lines stay in a static buffer.
 */
#define RK__ARRAY_LEN_T(a) (sizeof(a) / sizeof((a)[0]))

static char *vec_text;
static char *vec_kept[64]; /* the hex strings handed out, kept reachable */
static size_t vec_nkept;

static const char *
vec(const char *name)
{
    const char *path = getenv("RK_MSG_VECTORS");
    size_t nl = strlen(name);

    if (vec_text == NULL) {
        FILE *f = path != NULL ? fopen(path, "rb") : NULL;
        long sz;

        if (f == NULL)
            fail_msg("no vectors at RK_MSG_VECTORS=%s: run through ctest, "
                     "whose fixture msg_vectors_pydotcompute writes them "
                     "with PyDotCompute (tools/pydeps.sh installs it)",
                path != NULL ? path : "(unset)");
        assert_int_equal(fseek(f, 0, SEEK_END), 0);
        sz = ftell(f);
        assert_true(sz > 0);
        rewind(f);
        vec_text = calloc(1, (size_t)sz + 1);
        assert_non_null(vec_text);
        assert_int_equal(fread(vec_text, 1, (size_t)sz, f), (size_t)sz);
        fclose(f);
    }
    for (const char *l = vec_text; l != NULL && *l != '\0';) {
        const char *end = strchr(l, '\n');

        if (strncmp(l, name, nl) == 0 && l[nl] == ' ') {
            size_t hl = end != NULL ? (size_t)(end - l) - nl - 1
                                    : strlen(l + nl + 1);
            char *hex = malloc(hl + 1);

            assert_non_null(hex);
            memcpy(hex, l + nl + 1, hl);
            hex[hl] = '\0';
            assert_true(vec_nkept < RK__ARRAY_LEN_T(vec_kept));
            vec_kept[vec_nkept++] = hex;
            return hex;
        }
        l = end != NULL ? end + 1 : NULL;
    }
    fail_msg("vector %s missing from %s", name, path);
    return NULL;
}

#define VEC_POINT_REF      vec("point_ref")
#define VEC_POINT_NP       vec("point_np_scalars")
#define VEC_ALL_NP         vec("all_np_scalars")
#define VEC_POINT_SUBCLASS vec("point_subclass")
#define VEC_ALL_REF        vec("all_ref")
#define VEC_ALL_LISTS      vec("all_lists")
#define VEC_POINT_BARE_BIN vec("point_bare_bin")
#define VEC_ALL_TYPESTR    vec("all_typestr")
#define VEC_POINT_NAN      vec("point_nan")

/* Hex string -> malloc'd bytes. */
static uint8_t *
unhex(const char *hex, size_t *len)
{
    size_t n = strlen(hex) / 2;
    uint8_t *b = malloc(n ? n : 1);

    assert_non_null(b);
    for (size_t i = 0; i < n; i++) {
        unsigned v;

        assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
        b[i] = (uint8_t)v;
    }
    *len = n;
    return b;
}

static void
assert_detail_has(const char *what)
{
    if (strstr(rk_errdetail(), what) == NULL)
        fail_msg("detail '%s' lacks '%s'", rk_errdetail(), what);
}

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
fill_all(rkt_all *a, double *samples, uint32_t ns, int32_t *ids, uint32_t nids,
    char *label, uint32_t nlabel)
{
    memset(a, 0, sizeof(*a));
    a->flag = true;
    a->i8 = -5;
    a->i16 = 300;
    a->i32 = -70000;
    a->i64 = 1ll << 40;
    a->u8 = 200;
    a->u16 = 60000;
    a->u32 = 4000000000u;
    a->u64 = 1ull << 63;
    a->f32 = -1.25e-40f; /* subnormal */
    a->f64 = 1e308;
    for (int i = 0; i < 4; i++)
        a->arr[i] = (float)i * 0.5f;
    a->bits[1] = true;
    a->samples.ptr = samples;
    a->samples.len = ns;
    a->ids.ptr = ids;
    a->ids.len = nids;
    a->blob.ptr = (uint8_t *)"\x01\x02";
    a->blob.len = 2;
    a->label.ptr = label;
    a->label.len = nlabel;
    a->origin.x = -1;
    a->origin.y = NAN;
}

static void
assert_all_equal(const rkt_all *a, const rkt_all *b)
{
    assert_int_equal(a->flag, b->flag);
    assert_int_equal(a->i8, b->i8);
    assert_int_equal(a->i16, b->i16);
    assert_int_equal(a->i32, b->i32);
    assert_true(a->i64 == b->i64);
    assert_int_equal(a->u8, b->u8);
    assert_int_equal(a->u16, b->u16);
    assert_int_equal(a->u32, b->u32);
    assert_true(a->u64 == b->u64);
    assert_memory_equal(&a->f32, &b->f32, sizeof(float));
    assert_memory_equal(&a->f64, &b->f64, sizeof(double));
    assert_memory_equal(a->arr, b->arr, sizeof(a->arr));
    assert_memory_equal(a->bits, b->bits, sizeof(a->bits));
    assert_int_equal(a->samples.len, b->samples.len);
    if (a->samples.len)
        assert_memory_equal(
            a->samples.ptr, b->samples.ptr, a->samples.len * sizeof(double));
    assert_int_equal(a->ids.len, b->ids.len);
    if (a->ids.len)
        assert_memory_equal(
            a->ids.ptr, b->ids.ptr, a->ids.len * sizeof(int32_t));
    assert_int_equal(a->blob.len, b->blob.len);
    if (a->blob.len)
        assert_memory_equal(a->blob.ptr, b->blob.ptr, a->blob.len);
    assert_int_equal(a->label.len, b->label.len);
    assert_memory_equal(a->label.ptr, b->label.ptr, a->label.len);
    assert_int_equal(b->label.ptr[b->label.len], '\0');
    assert_memory_equal(&a->origin, &b->origin, sizeof(a->origin));
}

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

/* ------------------------------------------------------ error frames */

/* A tiny frame builder over msgpack-c's sbuffer. */
struct fb {
    msgpack_sbuffer sb;
    msgpack_packer pk;
};

static void
fb_init(struct fb *f)
{
    msgpack_sbuffer_init(&f->sb);
    msgpack_packer_init(&f->pk, &f->sb, msgpack_sbuffer_write);
}

static void
fb_str(struct fb *f, const char *s)
{
    msgpack_pack_str(&f->pk, strlen(s));
    msgpack_pack_str_body(&f->pk, s, strlen(s));
}

static int
dec_point(struct fb *f, unsigned flags)
{
    rkt_point p;
    int rc = rk_msg_decode(
        &rkt_point_msgtype, f->sb.data, f->sb.size, &p, NULL, flags);

    msgpack_sbuffer_destroy(&f->sb);
    return rc;
}

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

/* Encodes a into buf and unpacks it with msgpack-c into *root (in *z,
 * which the caller destroys), for tests that re-pack a frame. */
static void
encode_unpack_all(const rkt_all *a, uint8_t *buf, size_t cap, msgpack_zone *z,
    msgpack_object *root)
{
    size_t len, off = 0;

    assert_int_equal(
        rk_msg_encode(&rkt_all_msgtype, NULL, a, buf, cap, &len), RK_OK);
    msgpack_zone_init(z, 4096);
    assert_int_equal(msgpack_unpack((char *)buf, len, &off, z, root),
        MSGPACK_UNPACK_SUCCESS);
}

/* AllTypes frame with field `bad` replaced by the packer callback. */
static int
dec_all_with(const char *bad, void (*put)(msgpack_packer *), unsigned flags)
{
    static double samples[2] = { 1, 2 };
    static int32_t ids[1] = { 5 };
    uint8_t buf[8192];
    rkt_all a;
    rkt_all out;
    struct fb f;
    msgpack_object root;
    msgpack_zone z;
    int rc;

    fill_all(&a, samples, 2, ids, 1, "lbl", 3);
    /* Re-pack the map, swapping one value. */
    encode_unpack_all(&a, buf, sizeof(buf), &z, &root);
    fb_init(&f);
    msgpack_pack_map(&f.pk, root.via.map.size);
    for (uint32_t i = 0; i < root.via.map.size; i++) {
        msgpack_object_kv *kv = &root.via.map.ptr[i];

        msgpack_pack_object(&f.pk, kv->key);
        if (kv->key.via.str.size == strlen(bad)
            && memcmp(kv->key.via.str.ptr, bad, strlen(bad)) == 0)
            put(&f.pk);
        else
            msgpack_pack_object(&f.pk, kv->val);
    }
    msgpack_zone_destroy(&z);
    rc = rk_msg_decode(
        &rkt_all_msgtype, f.sb.data, f.sb.size, &out, NULL, flags);
    msgpack_sbuffer_destroy(&f.sb);
    if (rc == RK_OK)
        rk_msg_free(&rkt_all_msgtype, &out);
    return rc;
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
        cmocka_unit_test(test_errors_point),
        cmocka_unit_test(test_errors_fields),
        cmocka_unit_test(test_truncated_and_corrupt),
        cmocka_unit_test(test_huge_declared_counts),
        cmocka_unit_test(test_ndarray_every_kind),
        cmocka_unit_test(test_tape_overflow),
        cmocka_unit_test(test_count_exceeds_frame),
        cmocka_unit_test(test_nesting_limit),
        cmocka_unit_test(test_encode_errors),
        cmocka_unit_test(test_field_count_limit),
        cmocka_unit_test(test_reserved_field_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
