/*
 * tests/support/msg_codec_check.h - what the msgpack codec tests
 * (test_msg_codec, test_msg_codec_errors, test_msg_codec_descriptors)
 * share: the envelope ids of the reference vectors, the vectors
 * themselves (vec(), written by the ctest fixture msg_vectors_pydotcompute),
 * hex decoding, the error-detail check, the AllTypes fill and compare,
 * and a small msgpack frame builder. Header-only; one copy per test
 * program; include it after <cmocka.h> and msg_test_types.h.
 */
#ifndef RK_TEST_MSG_CODEC_CHECK_H
#define RK_TEST_MSG_CODEC_CHECK_H

#include <math.h>
#include <msgpack.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static inline const char *
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
static inline uint8_t *
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

static inline void
assert_detail_has(const char *what)
{
    if (strstr(rk_errdetail(), what) == NULL)
        fail_msg("detail '%s' lacks '%s'", rk_errdetail(), what);
}

static inline void
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

static inline void
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

/* A tiny frame builder over msgpack-c's sbuffer. */
struct fb {
    msgpack_sbuffer sb;
    msgpack_packer pk;
};

static inline void
fb_init(struct fb *f)
{
    msgpack_sbuffer_init(&f->sb);
    msgpack_packer_init(&f->pk, &f->sb, msgpack_sbuffer_write);
}

static inline void
fb_str(struct fb *f, const char *s)
{
    msgpack_pack_str(&f->pk, strlen(s));
    msgpack_pack_str_body(&f->pk, s, strlen(s));
}

static inline int
dec_point(struct fb *f, unsigned flags)
{
    rkt_point p;
    int rc = rk_msg_decode(
        &rkt_point_msgtype, f->sb.data, f->sb.size, &p, NULL, flags);

    msgpack_sbuffer_destroy(&f->sb);
    return rc;
}

/* Encodes a into buf and unpacks it with msgpack-c into *root (in *z,
 * which the caller destroys), for tests that re-pack a frame. */
static inline void
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
static inline int
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

#endif /* RK_TEST_MSG_CODEC_CHECK_H */
