/*
 * The bad-input table (issue 10): every public function of message.h,
 * queue.h, telemetry.h, buffer.h, pool.h, device.h, clock.h, error.h,
 * log.h and version.h called with NULL, zero, huge, stale and garbage
 * arguments. Each row is one call (or a few on one object) and states the
 * code it must return; functions that return no code must come back
 * without crashing and give their documented neutral answer (a row then
 * returns RK_OK, or RK_EINTERNAL if the answer was wrong). The suite runs
 * under ASan and UBSan in CI (make asan), so a row that reads or writes
 * out of bounds fails there even when it returns the right code.
 *
 * The table is data: append a row (a function and its expected code) to
 * rows[] to cover a new function. Runtime rows (runtime.h) are appended
 * by the runtime's owner.
 *
 * Not in the table: the inline hot-path queue functions (rk_spsc_try_*,
 * reserve/commit/peek/release, RK_SPSC_TYPED handles); queue.h documents
 * their preconditions (a live queue, a non-NULL element).
 *
 * The table is split by header over three programs: this one
 * (message.h), test_bad_input_queue.c (queue.h, telemetry.h) and
 * test_bad_input_objects.c (buffer.h, pool.h, device.h, clock.h,
 * error.h, log.h, version.h); tests/support/bad_input.h runs the rows.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bad_input.h"
#include "common/common.h"
#include "msg_test_types.h"
#include "ringkernel/ringkernel.h"

/* A fixed 16-byte type with a bool, for the fixed-layout rows. */
#define BI_FIXED_FIELDS(X)                                                    \
    X(v, RK_DOUBLE)                                                           \
    X(n, RK_INT32)                                                            \
    X(ok, RK_BOOL)
RK_MSGTYPE_DECLARE(bi_fixed, BI_FIXED_FIELDS);
RK_MSGTYPE_DEFINE(bi_fixed, "BiFixed", 0xB1001, BI_FIXED_FIELDS);

/* ----------------------------------------------------------- message */

static int
uuid_is_nil_null(void)
{
    return rk_uuid_is_nil(NULL) ? RK_OK : WRONG;
}
static int
uuid_cmp_null(void)
{
    rk_uuid u = rk_uuid_v7();
    return rk_uuid_cmp(NULL, NULL) == 0 && rk_uuid_cmp(NULL, &u) < 0
            && rk_uuid_cmp(&u, NULL) > 0
        ? RK_OK
        : WRONG;
}
static int
uuid_format_null(void)
{
    char out[RK_UUID_STRLEN + 1];
    rk_uuid u = rk_uuid_v7();

    rk_uuid_format(&u, NULL);
    rk_uuid_format(NULL, out);
    return strcmp(out, "00000000-0000-0000-0000-000000000000") == 0 ? RK_OK
                                                                    : WRONG;
}
static int
uuid_parse_null_text(void)
{
    rk_uuid u;
    return rk_uuid_parse(NULL, 36, &u);
}
static int
uuid_parse_null_out(void)
{
    return rk_uuid_parse("01890a5d-ac96-774b-bcce-b302099a8057", 36, NULL);
}
static int
uuid_parse_garbage(void)
{
    rk_uuid u;
    return rk_uuid_parse("01890a5d-ac96-774b-bcce-b302099a805g", 36, &u);
}
static int
uuid_parse_huge_len(void)
{
    static const char s[40] = "01890a5d-ac96-774b-bcce-b302099a8057";
    rk_uuid u;
    return rk_uuid_parse(s, SIZE_MAX, &u);
}
static int
uuid_parse_zero_len(void)
{
    rk_uuid u;
    return rk_uuid_parse("", 0, &u);
}
static int
header_setters_null(void)
{
    rk_msg_header h;

    rk_msg_header_init(NULL, 1, 2);
    rk_msg_reply(NULL, NULL);
    rk_msg_header_init(&h, 1, 2);
    rk_msg_reply(&h, NULL);
    rk_msg_with_correlation(NULL, NULL);
    return rk_uuid_is_nil(&h.correlation_id) ? RK_OK : WRONG;
}
static int
header_write_null(void)
{
    return rk_msg_header_write(NULL, NULL, 64);
}
static int
header_write_null_dst(void)
{
    rk_msg_header h;
    rk_msg_header_init(&h, 0, 0);
    return rk_msg_header_write(&h, NULL, 64);
}
static int
header_write_zero_cap(void)
{
    rk_msg_header h;
    char b[64];
    rk_msg_header_init(&h, 0, 0);
    return rk_msg_header_write(&h, b, 0);
}
static int
header_parse_null(void)
{
    rk_msg_header h;
    return rk_msg_header_parse(NULL, 64, &h);
}
static int
header_parse_null_out(void)
{
    char b[64] = { 0 };
    return rk_msg_header_parse(b, 64, NULL);
}
static int
header_parse_zero(void)
{
    char b[64] = { 0 };
    rk_msg_header h;
    return rk_msg_header_parse(b, 0, &h);
}
static int
header_parse_garbage(void)
{
    unsigned char b[64];
    rk_msg_header h;
    memset(b, 0xa5, sizeof(b));
    return rk_msg_header_parse(b, sizeof(b), &h);
}
static int
header_parse_huge_payload(void)
{
    rk_msg_header h, out;
    rk_msg_header_init(&h, 0, 0);
    h.payload_len = UINT32_MAX;
    return rk_msg_header_parse(&h, sizeof(h), &out);
}
static int
header_parse_stale_version(void)
{
    rk_msg_header h, out;
    rk_msg_header_init(&h, 0, 0);
    h.version = 0; /* a frame from before version 1 */
    return rk_msg_header_parse(&h, sizeof(h), &out);
}
static int
header_check_null(void)
{
    return rk_msg_header_check(NULL, &rkt_point_msgtype);
}
static int
header_check_null_type(void)
{
    rk_msg_header h;
    rk_msg_header_init(&h, rkt_point_msgtype.id, 0);
    return rk_msg_header_check(&h, NULL);
}
static int
header_check_stale_version(void)
{
    rk_msg_header h;
    rk_msg_header_init(&h, rkt_point_msgtype.id, 0);
    h.type_version = (uint16_t)(rkt_point_msgtype.version + 1);
    return rk_msg_header_check(&h, &rkt_point_msgtype);
}
static int
header_check_unknown_id(void)
{
    rk_msg_header h;
    rk_msg_header_init(&h, 0xdeadbeef, 0);
    return rk_msg_header_check(&h, &rkt_point_msgtype);
}
static int
encode_null_type(void)
{
    rkt_point p = { 0, 0 };
    char b[256];
    size_t len;
    return rk_msg_encode(NULL, NULL, &p, b, sizeof(b), &len);
}
static int
encode_null_obj(void)
{
    char b[256];
    size_t len;
    return rk_msg_encode(&rkt_point_msgtype, NULL, NULL, b, sizeof(b), &len);
}
static int
encode_null_len(void)
{
    rkt_point p = { 0, 0 };
    char b[256];
    return rk_msg_encode(&rkt_point_msgtype, NULL, &p, b, sizeof(b), NULL);
}
static int
encode_zero_cap(void)
{
    rkt_point p = { 0, 0 };
    char b[1];
    size_t len;
    return rk_msg_encode(&rkt_point_msgtype, NULL, &p, b, 0, &len);
}
static int
encode_garbage_type(void)
{
    rk_msgtype t = rkt_point_msgtype;
    rkt_point p = { 0, 0 };
    char b[256];
    size_t len;
    t.nfields = 1000;
    return rk_msg_encode(&t, NULL, &p, b, sizeof(b), &len);
}
static int
encode_huge_string(void)
{
    rkt_all a;
    char b[256];
    size_t len;
    memset(&a, 0, sizeof(a));
    a.label.ptr = (char *)"x";
    a.label.len = UINT32_MAX;
    return rk_msg_encode(&rkt_all_msgtype, NULL, &a, b, sizeof(b), &len);
}
static int
encode_garbage_utf8(void)
{
    rkt_all a;
    char b[1024];
    size_t len;
    memset(&a, 0, sizeof(a));
    a.label.ptr = (char *)"\xff\xfe";
    a.label.len = 2;
    return rk_msg_encode(&rkt_all_msgtype, NULL, &a, b, sizeof(b), &len);
}
static int
encode_null_vla(void)
{
    rkt_all a;
    char b[1024];
    size_t len;
    memset(&a, 0, sizeof(a));
    a.samples.len = 5; /* ptr NULL */
    return rk_msg_encode(&rkt_all_msgtype, NULL, &a, b, sizeof(b), &len);
}
static int
decode_null_type(void)
{
    rkt_point p;
    return rk_msg_decode(NULL, "\x80", 1, &p, NULL, 0);
}
static int
decode_null_obj(void)
{
    return rk_msg_decode(&rkt_point_msgtype, "\x80", 1, NULL, NULL, 0);
}
static int
decode_null_buf(void)
{
    rkt_point p;
    return rk_msg_decode(&rkt_point_msgtype, NULL, 5, &p, NULL, 0);
}
static int
decode_zero(void)
{
    rkt_point p;
    return rk_msg_decode(&rkt_point_msgtype, "", 0, &p, NULL, 0);
}
static int
decode_garbage(void)
{
    static const unsigned char g[] = { 0xde, 0xff, 0xff, 0xc1, 0x00, 0x13 };
    rkt_all a;
    return rk_msg_decode(&rkt_all_msgtype, g, sizeof(g), &a, NULL, 0);
}
static int
decode_garbage_flags(void)
{
    rkt_point p;
    /* Unknown flag bits are ignored; the empty map lacks x. */
    return rk_msg_decode(&rkt_point_msgtype, "\x80", 1, &p, NULL, ~0u);
}
static int
msg_free_null(void)
{
    rkt_all a;
    memset(&a, 0, sizeof(a));
    rk_msg_free(NULL, NULL);
    rk_msg_free(&rkt_all_msgtype, NULL);
    rk_msg_free(NULL, &a);
    return RK_OK;
}
static int
fixed_size_null(void)
{
    return rk_msg_fixed_size(NULL) == 0 ? RK_OK : WRONG;
}
static int
fixed_write_null_type(void)
{
    bi_fixed o = { 0, 0, 0 };
    char b[64];
    return rk_msg_fixed_write(NULL, &o, b, sizeof(b));
}
static int
fixed_write_null_obj(void)
{
    char b[64];
    return rk_msg_fixed_write(&bi_fixed_msgtype, NULL, b, sizeof(b));
}
static int
fixed_write_null_dst(void)
{
    bi_fixed o = { 0, 0, 0 };
    return rk_msg_fixed_write(&bi_fixed_msgtype, &o, NULL, 64);
}
static int
fixed_write_zero_cap(void)
{
    bi_fixed o = { 0, 0, 0 };
    char b[1];
    return rk_msg_fixed_write(&bi_fixed_msgtype, &o, b, 0);
}
static int
fixed_write_variable_type(void)
{
    rkt_all a;
    char b[64];
    memset(&a, 0, sizeof(a));
    return rk_msg_fixed_write(&rkt_all_msgtype, &a, b, sizeof(b));
}
static int
fixed_read_null_type(void)
{
    bi_fixed o;
    char b[16] = { 0 };
    return rk_msg_fixed_read(NULL, b, sizeof(b), &o);
}
static int
fixed_read_null_src(void)
{
    bi_fixed o;
    return rk_msg_fixed_read(&bi_fixed_msgtype, NULL, 16, &o);
}
static int
fixed_read_null_obj(void)
{
    char b[16] = { 0 };
    return rk_msg_fixed_read(&bi_fixed_msgtype, b, sizeof(b), NULL);
}
static int
fixed_read_zero(void)
{
    bi_fixed o;
    char b[16] = { 0 };
    return rk_msg_fixed_read(&bi_fixed_msgtype, b, 0, &o);
}
static int
fixed_read_huge(void)
{
    bi_fixed o;
    char b[16] = { 0 };
    return rk_msg_fixed_read(&bi_fixed_msgtype, b, SIZE_MAX, &o);
}
static int
fixed_read_garbage_bool(void)
{
    bi_fixed o;
    unsigned char b[sizeof(bi_fixed)];
    memset(b, 0x7f, sizeof(b));
    return rk_msg_fixed_read(&bi_fixed_msgtype, b, sizeof(b), &o);
}
static int
layout_hash_null(void)
{
    return rk_msgtype_layout_hash(NULL) == 0 ? RK_OK : WRONG;
}
static int
register_null(void)
{
    return rk_msgtype_register(NULL);
}
static int
register_garbage(void)
{
    static rk_msgtype t; /* zeroed: no name, id 0, no fields */
    return rk_msgtype_register(&t);
}
static int
lookups_null_and_garbage(void)
{
    if (rk_msgtype_register(&rkt_point_msgtype) != RK_OK)
        return WRONG;
    if (rk_msgtype_by_id(0) != NULL || rk_msgtype_by_id(UINT32_MAX) != NULL
        || rk_msgtype_by_name(NULL) != NULL
        || rk_msgtype_by_name_n(NULL, 5) != NULL
        || rk_msgtype_by_name_n("", 0) != NULL
        || rk_msgtype_by_name_n("Point\0\xff\xff", 8) != NULL
        || rk_msgtype_by_name_n("Poin", 4) != NULL
        || rk_msgtype_by_name_n("Point", 5) != &rkt_point_msgtype)
        return WRONG;
    return RK_OK;
}
static int
msgtype_check_null(void)
{
    return rk_msgtype_check(&rkt_point_msgtype, NULL);
}
static int
msgtype_check_null_expected(void)
{
    return rk_msgtype_check(NULL, &rkt_point_msgtype);
}

/* -------------------------------------------------------------- table */

static const struct row rows[] = {
    /* message.h */
    ROW(uuid_is_nil_null, RK_OK),
    ROW(uuid_cmp_null, RK_OK),
    ROW(uuid_format_null, RK_OK),
    ROW(uuid_parse_null_text, RK_EINVAL),
    ROW(uuid_parse_null_out, RK_EINVAL),
    ROW(uuid_parse_garbage, RK_EDECODE),
    ROW(uuid_parse_huge_len, RK_EDECODE),
    ROW(uuid_parse_zero_len, RK_EDECODE),
    ROW(header_setters_null, RK_OK),
    ROW(header_write_null, RK_EINVAL),
    ROW(header_write_null_dst, RK_EINVAL),
    ROW(header_write_zero_cap, RK_EMSGSIZE),
    ROW(header_parse_null, RK_EINVAL),
    ROW(header_parse_null_out, RK_EINVAL),
    ROW(header_parse_zero, RK_ETRUNCATED),
    ROW(header_parse_garbage, RK_EDECODE),
    ROW(header_parse_huge_payload, RK_ETRUNCATED),
    ROW(header_parse_stale_version, RK_ENOTSUP),
    ROW(header_check_null, RK_EINVAL),
    ROW(header_check_null_type, RK_EINVAL),
    ROW(header_check_stale_version, RK_ETYPE),
    ROW(header_check_unknown_id, RK_ETYPE),
    ROW(encode_null_type, RK_EINVAL),
    ROW(encode_null_obj, RK_EINVAL),
    ROW(encode_null_len, RK_EINVAL),
    ROW(encode_zero_cap, RK_EMSGSIZE),
    ROW(encode_garbage_type, RK_EINVAL),
    ROW(encode_huge_string, RK_ETOOBIG),
    ROW(encode_garbage_utf8, RK_EENCODE),
    ROW(encode_null_vla, RK_EINVAL),
    ROW(decode_null_type, RK_EINVAL),
    ROW(decode_null_obj, RK_EINVAL),
    ROW(decode_null_buf, RK_EINVAL),
    ROW(decode_zero, RK_ETRUNCATED),
    ROW(decode_garbage, ANY_ERROR),
    ROW(decode_garbage_flags, RK_EFIELDMISSING),
    ROW(msg_free_null, RK_OK),
    ROW(fixed_size_null, RK_OK),
    ROW(fixed_write_null_type, RK_EINVAL),
    ROW(fixed_write_null_obj, RK_EINVAL),
    ROW(fixed_write_null_dst, RK_EINVAL),
    ROW(fixed_write_zero_cap, RK_EMSGSIZE),
    ROW(fixed_write_variable_type, RK_ENOTSUP),
    ROW(fixed_read_null_type, RK_EINVAL),
    ROW(fixed_read_null_src, RK_EINVAL),
    ROW(fixed_read_null_obj, RK_EINVAL),
    ROW(fixed_read_zero, RK_ETRUNCATED),
    ROW(fixed_read_huge, RK_EDECODE),
    ROW(fixed_read_garbage_bool, RK_EDECODE),
    ROW(layout_hash_null, RK_OK),
    ROW(register_null, RK_EINVAL),
    ROW(register_garbage, RK_EINVAL),
    ROW(lookups_null_and_garbage, RK_OK),
    ROW(msgtype_check_null, RK_ETYPE),
    ROW(msgtype_check_null_expected, RK_ETYPE),
};

int
main(void)
{
    return run_rows("bad_input", rows, sizeof(rows) / sizeof(rows[0]));
}
