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

#include "common/common.h"
#include "msg_test_types.h"
#include "ringkernel/ringkernel.h"

#define ANY_ERROR (-1) /* any RK_E* code, not RK_OK */
#define WRONG     RK_EINTERNAL

struct row {
    const char *name;
    int (*call)(void);
    int want;
};

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

/* ------------------------------------------------------------- queue */

static int
spsc_init_null(void)
{
    char b[64];
    return rk_spsc_init(NULL, b, 4, 8);
}
static int
spsc_init_null_buffer(void)
{
    rk_spsc q;
    return rk_spsc_init(&q, NULL, 4, 8);
}
static int
spsc_create_null(void)
{
    return rk_spsc_create(NULL, 4, 8);
}
static int
spsc_create_zero(void)
{
    rk_spsc *q = NULL;
    return rk_spsc_create(&q, 0, 8);
}
static int
spsc_create_zero_slot(void)
{
    rk_spsc *q = NULL;
    return rk_spsc_create(&q, 4, 0);
}
static int
spsc_create_not_pow2(void)
{
    rk_spsc *q = NULL;
    return rk_spsc_create(&q, 3, 8);
}
static int
spsc_create_huge(void)
{
    rk_spsc *q = NULL;
    return rk_spsc_create(&q, UINT32_MAX, UINT32_MAX);
}
static int
spsc_create_huge_bytes(void)
{
    rk_spsc *q = NULL;
    return rk_spsc_create(&q, 1u << 31, UINT32_MAX);
}
static int
spsc_buffer_size_overflow(void)
{
    return rk_spsc_buffer_size(UINT32_MAX, UINT32_MAX)
            == (size_t)UINT32_MAX * UINT32_MAX
        ? RK_OK
        : (rk_spsc_buffer_size(0, 8) == 0 ? RK_OK : WRONG);
}
static int
spsc_null_accessors(void)
{
    rk_queue_stats s;
    rk_spsc *q = NULL;

    rk_spsc_destroy(NULL);
    if (rk_spsc_depth(NULL) != 0)
        return WRONG;
    memset(&s, 0xff, sizeof(s));
    rk_spsc_stats(NULL, &s);
    if (s.enqueued != 0)
        return WRONG;
    if (rk_spsc_create(&q, 4, 8) != RK_OK)
        return WRONG;
    rk_spsc_stats(q, NULL);
    rk_spsc_destroy(q);
    return RK_OK;
}
static int
spsc_batch_null(void)
{
    rk_spsc *q = NULL;
    char e[64] = { 0 };
    uint32_t n;

    if (rk_spsc_enqueue_batch(NULL, e, 1) != 0
        || rk_spsc_dequeue_batch(NULL, e, 1) != 0)
        return WRONG;
    if (rk_spsc_create(&q, 4, 8) != RK_OK)
        return WRONG;
    n = rk_spsc_enqueue_batch(q, NULL, 1) + rk_spsc_dequeue_batch(q, NULL, 1)
        + rk_spsc_enqueue_batch(q, e, 0);
    /* huge n: bounded by what fits (4), never by n */
    n += rk_spsc_enqueue_batch(q, e, UINT32_MAX) == 4 ? 0 : 100;
    rk_spsc_destroy(q);
    return n == 0 ? RK_OK : WRONG;
}
static int
spsc_check_slot_null(void)
{
    return rk_spsc_check_slot(NULL, 8, 8);
}
static int
spsc_check_slot_garbage(void)
{
    rk_spsc *q = NULL;
    int rc;

    if (rk_spsc_create(&q, 4, 8) != RK_OK)
        return WRONG;
    rc = rk_spsc_check_slot(q, SIZE_MAX, 3);
    rk_spsc_destroy(q);
    return rc;
}
static int
mpsc_create_bad(void)
{
    rk_mpsc *q = NULL;
    if (rk_mpsc_create(NULL, 4, 8) != RK_EINVAL
        || rk_mpsc_create(&q, 3, 8) != RK_EINVAL
        || rk_mpsc_create(&q, 4, 0) != RK_EINVAL)
        return WRONG;
    return rk_mpsc_create(&q, UINT32_MAX, UINT32_MAX);
}
static int
mpsc_null_calls(void)
{
    uint64_t t;
    rk_queue_stats s;
    char e[8];

    rk_mpsc_destroy(NULL);
    rk_mpsc_commit(NULL, 0);
    rk_mpsc_stats(NULL, &s);
    if (rk_mpsc_reserve(NULL, &t) != NULL || rk_mpsc_depth(NULL) != 0
        || rk_mpsc_try_dequeue(NULL, e) != RK_EINVAL)
        return WRONG;
    return rk_mpsc_try_enqueue(NULL, e);
}
static int
mpmc_create_bad(void)
{
    rk_mpmc *q = NULL;
    if (rk_mpmc_create(NULL, 4, 8) != RK_EINVAL
        || rk_mpmc_create(&q, 3, 8) != RK_EINVAL
        || rk_mpmc_create(&q, 4, 0) != RK_EINVAL)
        return WRONG;
    return rk_mpmc_create(&q, UINT32_MAX, UINT32_MAX);
}
static int
mpmc_null_calls(void)
{
    uint64_t t;
    rk_queue_stats s;
    char e[8];

    rk_mpmc_destroy(NULL);
    rk_mpmc_commit(NULL, 0);
    rk_mpmc_stats(NULL, &s);
    if (rk_mpmc_reserve(NULL, &t) != NULL || rk_mpmc_depth(NULL) != 0
        || rk_mpmc_try_dequeue(NULL, e) != RK_EINVAL)
        return WRONG;
    return rk_mpmc_try_enqueue(NULL, e);
}
static int
mpsc_null_elem(void)
{
    rk_mpsc *q = NULL;
    int rc;

    if (rk_mpsc_create(&q, 4, 8) != RK_OK)
        return WRONG;
    rc = rk_mpsc_try_enqueue(q, NULL);
    if (rc == RK_EINVAL)
        rc = rk_mpsc_try_dequeue(q, NULL);
    rk_mpsc_destroy(q);
    return rc;
}
static int
mqueue_create_bad(void)
{
    rk_mqueue *q = NULL;
    rk_mqueue_config c = { .capacity = 3 };
    if (rk_mqueue_create(NULL, NULL) != RK_EINVAL
        || rk_mqueue_create(&q, &c) != RK_EINVAL)
        return WRONG;
    c.capacity = UINT32_MAX;
    c.slot_size = UINT32_MAX;
    return rk_mqueue_create(&q, &c);
}
static int
mqueue_garbage_backpressure(void)
{
    rk_mqueue *q = NULL;
    rk_mqueue_config c = { .backpressure = (rk_backpressure)99 };
    int rc = rk_mqueue_create(&q, &c);
    if (rc == RK_OK)
        rk_mqueue_destroy(q);
    return rc;
}
static int
mqueue_null_calls(void)
{
    rk_queue_stats s;
    char b[8];
    size_t len, n;

    rk_mqueue_destroy(NULL);
    rk_mqueue_close(NULL);
    rk_mqueue_stats(NULL, &s);
    (void)rk_mqueue_is_closed(NULL);
    if (rk_mqueue_depth(NULL) != 0)
        return WRONG;
    if (rk_mqueue_send(NULL, b, 1, 0, 0) != RK_EINVAL
        || rk_mqueue_sendv(NULL, NULL, 0, 0, 0) != RK_EINVAL
        || rk_mqueue_send_batch(NULL, b, 1, &len, 1, 0, 0, &n) != RK_EINVAL
        || rk_mqueue_recv_batch(NULL, b, 1, &len, 1, &n, 0) != RK_EINVAL)
        return WRONG;
    return rk_mqueue_recv(NULL, b, sizeof(b), &len, 0);
}
static int
mqueue_huge_and_stale(void)
{
    rk_mqueue *q = NULL;
    char b[16];
    size_t len;
    int rc;

    if (rk_mqueue_create(&q, NULL) != RK_OK)
        return WRONG;
    if (rk_mqueue_send(q, b, SIZE_MAX, 0, 0) != RK_EMSGSIZE
        || rk_mqueue_send(q, NULL, 8, 0, 0) != RK_EINVAL
        || rk_mqueue_recv(q, b, sizeof(b), &len, 0) == RK_OK) {
        rk_mqueue_destroy(q);
        return WRONG;
    }
    rk_mqueue_close(q); /* stale: used after close */
    rc = rk_mqueue_send(q, b, 1, 0, 0);
    rk_mqueue_destroy(q);
    return rc;
}
static int
priority_band_garbage(void)
{
    return rk_priority_band(255) <= rk_priority_band(0) + 10 ? RK_OK : WRONG;
}

/* --------------------------------------------------------- telemetry */

static int
histogram_null(void)
{
    rk_latency_summary s;
    rk_histogram *h = NULL;

    rk_histogram_destroy(NULL);
    rk_histogram_record(NULL, 5);
    memset(&s, 0xff, sizeof(s));
    rk_histogram_summary(NULL, &s);
    if (s.count != 0)
        return WRONG;
    rk_histogram_merge(NULL, NULL);
    rk_histogram_reset(NULL);
    if (rk_histogram_percentile(NULL, 50) != 0)
        return WRONG;
    if (rk_histogram_create(&h) != RK_OK)
        return WRONG;
    rk_histogram_summary(h, NULL);
    rk_histogram_merge(h, NULL);
    rk_histogram_merge(NULL, h);
    rk_histogram_destroy(h);
    return rk_histogram_create(NULL);
}
static int
histogram_garbage_values(void)
{
    rk_histogram *h = NULL;
    uint64_t p;

    if (rk_histogram_create(&h) != RK_OK)
        return WRONG;
    rk_histogram_record(h, UINT64_MAX);
    rk_histogram_record(h, 0);
    p = rk_histogram_percentile(h, NAN) + rk_histogram_percentile(h, -5)
        + rk_histogram_percentile(h, 1e300);
    (void)p;
    p = rk_histogram_percentile(h, 100);
    rk_histogram_destroy(h);
    return p == UINT64_MAX ? RK_OK : WRONG;
}
static const rk_stat_desc bi_desc
    = { "bad\"name\x01\xff", "d", RK_STAT_COUNTER, RK_UNIT_MESSAGES };

static int
stats_build_null(void)
{
    rk_stats s;
    rk_latency_summary l = { 0 };

    rk_stats_init(NULL, "x", 0);
    rk_stats_init(&s, NULL, 0);
    if (s.label[0] != '\0')
        return WRONG;
    if (rk_stats_add_value(NULL, &bi_desc, 1) != RK_EINVAL
        || rk_stats_add_value(&s, NULL, 1) != RK_EINVAL
        || rk_stats_add_summary(&s, &bi_desc, NULL) != RK_EINVAL
        || rk_stats_add_summary(NULL, &bi_desc, &l) != RK_EINVAL)
        return WRONG;
    for (int i = 0; i < RK_STATS_MAX_COUNTERS; i++)
        if (rk_stats_add_value(&s, &bi_desc, 1) != RK_OK)
            return WRONG;
    return rk_stats_add_value(&s, &bi_desc, 1);
}
static int
stats_find_null(void)
{
    rk_stats s;

    rk_stats_init(&s, "x", 0);
    if (rk_stats_find(NULL, "x") != NULL || rk_stats_find(&s, NULL) != NULL
        || rk_stats_find_latency(NULL, "x") != NULL
        || rk_stats_find_latency(&s, NULL) != NULL)
        return WRONG;
    return RK_OK;
}
static int
stats_rates_garbage(void)
{
    rk_stats a, b;

    rk_stats_init(&a, "x", UINT64_MAX); /* start after taken: inverted */
    b = a;
    b.taken_ns = 0;
    if (rk_stats_uptime_ns(NULL) != 0 || rk_stats_uptime_ns(&a) != 0
        || rk_rate_per_sec(5, 0) != 0.0 || rk_stats_rate(NULL, "x") != 0.0
        || rk_stats_rate(&a, NULL) != 0.0
        || rk_stats_rate_between(NULL, NULL, NULL) != 0.0
        || rk_stats_rate_between(&a, &b, "x") != 0.0)
        return WRONG;
    return RK_OK;
}
static int
stats_format_null(void)
{
    rk_stats s;
    char b[8];
    size_t len;

    rk_stats_init(&s, "x", 0);
    if (rk_stats_format_json(NULL, b, sizeof(b), &len) != RK_EINVAL
        || rk_stats_format_text(NULL, b, sizeof(b), &len) != RK_EINVAL
        || rk_stats_format_text(&s, NULL, 8, &len) != RK_EINVAL)
        return WRONG;
    return rk_stats_format_json(&s, NULL, 8, &len);
}
static int
stats_format_zero(void)
{
    rk_stats s;
    size_t len = 0;

    rk_stats_init(&s, "x", 0);
    if (rk_stats_format_json(&s, NULL, 0, &len) != RK_OK || len == 0)
        return WRONG;
    return rk_stats_format_text(&s, NULL, 0, NULL);
}
static int
stats_format_corrupt(void)
{
    rk_stats s;
    char b[256];

    rk_stats_init(&s, "x", 0);
    s.ncounters = SIZE_MAX;
    return rk_stats_format_json(&s, b, sizeof(b), NULL);
}
static int
stats_format_garbage_label(void)
{
    rk_stats s;
    char b[1024];
    int rc;

    rk_stats_init(&s, "x", 0);
    memset(s.label, 0xff, sizeof(s.label)); /* no NUL, not UTF-8 */
    if (rk_stats_add_value(&s, &bi_desc, 7) != RK_OK)
        return WRONG;
    rc = rk_stats_format_json(&s, b, sizeof(b), NULL);
    if (rc != RK_OK || strchr(b, '\xff') != NULL)
        return WRONG;
    return rk_stats_format_text(&s, b, sizeof(b), NULL);
}
static int
stats_print_null(void)
{
    rk_stats s;
    FILE *f = fopen("/dev/null", "w");
    int rc;

    rk_stats_init(&s, "x", 0);
    if (f == NULL)
        return WRONG;
    rc = rk_stats_print(NULL, &s, 1);
    if (rc == RK_EINVAL)
        rc = rk_stats_print(f, NULL, 0);
    fclose(f);
    return rc;
}
static int
stat_unit_garbage(void)
{
    return strcmp(rk_stat_unit_name((rk_stat_unit)99), "?") == 0 ? RK_OK
                                                                 : WRONG;
}

/* ------------------------------------------------------------ buffer */

static int
dtype_garbage(void)
{
    return rk_dtype_size((rk_dtype)99) == 0
            && rk_dtype_name((rk_dtype)99) != NULL
            && rk_buffer_state_name((rk_buffer_state)99) != NULL
        ? RK_OK
        : WRONG;
}
static int
buffer_create_null(void)
{
    rk_buffer_config c = { .dims = { 4 } };
    return rk_buffer_create(NULL, &c);
}
static int
buffer_create_zero(void)
{
    rk_buffer *b = NULL;
    return rk_buffer_create(&b, NULL); /* no dims */
}
static int
buffer_create_huge(void)
{
    rk_buffer *b = NULL;
    rk_buffer_config c
        = { .dtype = RK_DTYPE_F64, .dims = { SIZE_MAX / 2, 4, 0 } };
    return rk_buffer_create(&b, &c);
}
static int
buffer_create_garbage_dtype(void)
{
    rk_buffer *b = NULL;
    rk_buffer_config c = { .dtype = (rk_dtype)99, .dims = { 4 } };
    return rk_buffer_create(&b, &c);
}
static int
buffer_create_garbage_device(void)
{
    rk_buffer *b = NULL;
    rk_buffer_config c = { .device = (rk_device_kind)99, .dims = { 4 } };
    return rk_buffer_create(&b, &c);
}
static int
buffer_create_bad_elem_size(void)
{
    rk_buffer *b = NULL;
    rk_buffer_config c
        = { .dtype = RK_DTYPE_F32, .elem_size = 3, .dims = { 4 } };
    return rk_buffer_create(&b, &c);
}
static int
buffer_null_calls(void)
{
    void *p;
    char e[8] = { 0 };
    rk_buffer_stats s;

    rk_buffer_destroy(NULL);
    rk_buffer_stats_get(NULL, &s);
    rk_buffer_stats_reset(NULL);
    if (rk_buffer_host(NULL, RK_ACCESS_READ, &p) != RK_EINVAL
        || rk_buffer_device(NULL, RK_ACCESS_READ, &p) != RK_EINVAL
        || rk_buffer_mark_host_dirty(NULL) != RK_EINVAL
        || rk_buffer_mark_device_dirty(NULL) != RK_EINVAL
        || rk_buffer_ensure_host(NULL, NULL) != RK_EINVAL
        || rk_buffer_ensure_device(NULL, NULL) != RK_EINVAL
        || rk_buffer_copy_from(NULL, e, 1) != RK_EINVAL
        || rk_buffer_copy_to(NULL, e, 1) != RK_EINVAL
        || rk_buffer_fill(NULL, e) != RK_EINVAL)
        return WRONG;
    if (rk_buffer_elem_size(NULL) != 0 || rk_buffer_ndim(NULL) != 0
        || rk_buffer_dim(NULL, 0) != 1 || rk_buffer_count(NULL) != 0
        || rk_buffer_bytes(NULL) != 0 || rk_buffer_is_pinned(NULL))
        return WRONG;
    (void)rk_buffer_get_state(NULL);
    (void)rk_buffer_dtype(NULL);
    (void)rk_buffer_device_kind(NULL);
    return rk_buffer_zeros(NULL);
}
static int
buffer_garbage_args(void)
{
    rk_buffer *b = NULL;
    rk_buffer_config c = { .dtype = RK_DTYPE_U8, .dims = { 16 } };
    char src[16] = { 0 };
    void *p;
    int rc = RK_OK;

    if (rk_buffer_create(&b, &c) != RK_OK)
        return WRONG;
    if (rk_buffer_host(b, (rk_access)9, &p) != RK_EINVAL
        || rk_buffer_host(b, RK_ACCESS_READ, NULL) != RK_EINVAL
        || rk_buffer_copy_from(b, NULL, 16) != RK_EINVAL
        || rk_buffer_copy_from(b, src, SIZE_MAX) == RK_OK
        || rk_buffer_copy_to(b, NULL, 16) != RK_EINVAL
        || rk_buffer_copy_to(b, src, SIZE_MAX) == RK_OK
        || rk_buffer_fill(b, NULL) != RK_EINVAL || rk_buffer_dim(b, 99) != 1)
        rc = WRONG;
    rk_buffer_stats_get(b, NULL);
    rk_buffer_destroy(b);
    return rc;
}

/* -------------------------------------------------------------- pool */

static int
pool_create_bad(void)
{
    rk_pool *p = NULL;
    rk_pool_config c = { .kind = (rk_pool_kind)99 };

    if (rk_pool_create(NULL, NULL) != RK_EINVAL
        || rk_pool_create(&p, &c) != RK_EINVAL)
        return WRONG;
    c.kind = RK_POOL_HOST;
    c.min_block = 3;
    if (rk_pool_create(&p, &c) != RK_EINVAL)
        return WRONG;
    c.min_block = 128;
    c.max_block = 64;
    if (rk_pool_create(&p, &c) != RK_EINVAL)
        return WRONG;
    c.max_block = SIZE_MAX / 2 + 1;
    if (rk_pool_create(&p, &c) != RK_EINVAL)
        return WRONG;
    c.max_block = 0;
    c.checks = (rk_pool_checks)99;
    return rk_pool_create(&p, &c);
}
static int
pool_null_calls(void)
{
    rk_pool_stats s;
    void *x;

    rk_pool_destroy(NULL);
    rk_pool_trim(NULL, 0);
    rk_pool_free_all(NULL);
    memset(&s, 0xff, sizeof(s));
    rk_pool_stats_get(NULL, &s);
    if (s.used_bytes != 0 || rk_pool_get_kind(NULL) != RK_POOL_HOST
        || rk_pool_block_size(NULL, 5) != 5 || rk_pool_checking(NULL))
        return WRONG;
    if (rk_pool_alloc(NULL, 8, &x) != RK_EINVAL)
        return WRONG;
    return rk_pool_free(NULL, &s, 8);
}
static int
pool_zero_huge_stale(void)
{
    rk_pool *p = NULL;
    rk_pool_config c = { .checks = RK_POOL_CHECKS_ON };
    void *x = NULL;
    int rc = RK_OK;

    if (rk_pool_create(&p, &c) != RK_OK)
        return WRONG;
    rk_pool_stats_get(p, NULL);
    if (rk_pool_alloc(p, 0, &x) != RK_EINVAL
        || rk_pool_alloc(p, 8, NULL) != RK_EINVAL
        || rk_pool_alloc(p, SIZE_MAX, &x) != RK_ENOMEM
        || rk_pool_free(p, NULL, 8) != RK_OK)
        rc = WRONG;
    if (rc == RK_OK && rk_pool_alloc(p, 64, &x) == RK_OK) {
        if (rk_pool_free(p, x, 64) != RK_OK
            || rk_pool_free(p, x, 64) != RK_EINVAL /* stale: freed */
            || rk_pool_free(p, (char *)x + 1, 64) != RK_EINVAL)
            rc = WRONG;
    }
    rk_pool_destroy(p);
    return rc;
}

/* ------------------------------------------------------------ device */

static int
device_null_calls(void)
{
    const rk_device_info *info = NULL;
    const char *d = NULL;

    rk_device_list_free(NULL);
    if (rk_device_list_count(NULL) != 0 || rk_device_list_get(NULL, 0) != NULL
        || rk_cuda_status_name((rk_cuda_status)99) == NULL
        || rk_device_list_cuda_driver_version(NULL) != 0)
        return WRONG;
    (void)rk_device_list_cuda_status(NULL, &d);
    (void)rk_device_list_cuda_status(NULL, NULL);
    (void)rk_cuda_probe(NULL);
    if (rk_device_select(NULL, RK_DEVICE_CPU, 0, &info) != RK_EINVAL)
        return WRONG;
    return rk_devices_query(NULL);
}
static int
device_garbage_args(void)
{
    rk_device_list *l = NULL;
    const rk_device_info *info = NULL;
    int rc = RK_OK;

    if (rk_devices_query(&l) != RK_OK)
        return WRONG;
    if (rk_device_list_get(l, SIZE_MAX) != NULL
        || rk_device_list_get(l, rk_device_list_count(l)) != NULL
        || rk_device_select(l, (rk_device_kind)99, 0, &info) == RK_OK
        || rk_device_select(l, RK_DEVICE_CPU, -5, &info) == RK_OK
        || rk_device_select(l, RK_DEVICE_CPU, 0, NULL) != RK_EINVAL)
        rc = WRONG;
    rk_device_list_free(l);
    return rc;
}
static int
monitor_null_calls(void)
{
    rk_gpu_reading r;
    const char *d;

    rk_gpu_monitor_close(NULL);
    (void)rk_gpu_monitor_status(NULL, &d);
    (void)rk_gpu_monitor_status(NULL, NULL);
    if (rk_gpu_monitor_count(NULL) != 0
        || rk_gpu_monitor_read(NULL, 0, &r) == RK_OK)
        return WRONG;
    return rk_gpu_monitor_open(NULL);
}
static int
monitor_garbage_index(void)
{
    rk_gpu_monitor *m = NULL;
    rk_gpu_reading r;
    int rc;

    if (rk_gpu_monitor_open(&m) != RK_OK)
        return WRONG;
    rc = rk_gpu_monitor_read(m, UINT32_MAX, &r);
    if (rc != RK_OK && rk_gpu_monitor_read(m, 0, NULL) == RK_OK)
        rc = WRONG;
    rk_gpu_monitor_close(m);
    return rc;
}

/* ------------------------------------ clock, error, log, version */

static int
error_garbage_codes(void)
{
    if (strcmp(rk_strerror(-1), "unknown error") != 0
        || strcmp(rk_strerror(INT32_MAX), "unknown error") != 0
        || strcmp(rk_err_name(-5), "RK_E?") != 0
        || strcmp(rk_err_name(RK__ERR_COUNT), "RK_E?") != 0
        || rk_errdetail() == NULL)
        return WRONG;
    return RK_OK;
}
static int
clock_and_version(void)
{
    uint64_t a = rk_now_ns(), b = rk_now_ns();

    if (b < a || rk_version() == NULL
        || rk_version_number() != RK_VERSION_NUMBER)
        return WRONG;
    return RK_OK;
}
static int
log_garbage_level(void)
{
    if (rk_set_log_level((rk_log_level)-1) != RK_EINVAL
        || strcmp(rk_log_level_name((rk_log_level)99), "?") != 0)
        return WRONG;
    rk_set_log(NULL, NULL);
    return rk_set_log_level((rk_log_level)99);
}

/* -------------------------------------------------------------- table */

#define ROW(fn, want)                                                         \
    {                                                                         \
#fn, fn, want                                                         \
    }

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
    /* queue.h */
    ROW(spsc_init_null, RK_EINVAL),
    ROW(spsc_init_null_buffer, RK_EINVAL),
    ROW(spsc_create_null, RK_EINVAL),
    ROW(spsc_create_zero, RK_EINVAL),
    ROW(spsc_create_zero_slot, RK_EINVAL),
    ROW(spsc_create_not_pow2, RK_EINVAL),
    ROW(spsc_create_huge, RK_EINVAL),
    ROW(spsc_create_huge_bytes, RK_EINVAL),
    ROW(spsc_buffer_size_overflow, RK_OK),
    ROW(spsc_null_accessors, RK_OK),
    ROW(spsc_batch_null, RK_OK),
    ROW(spsc_check_slot_null, RK_EINVAL),
    ROW(spsc_check_slot_garbage, RK_EINVAL),
    ROW(mpsc_create_bad, RK_EINVAL),
    ROW(mpsc_null_calls, RK_EINVAL),
    ROW(mpsc_null_elem, RK_EINVAL),
    ROW(mpmc_create_bad, RK_EINVAL),
    ROW(mpmc_null_calls, RK_EINVAL),
    ROW(mqueue_create_bad, RK_EINVAL),
    ROW(mqueue_garbage_backpressure, RK_EINVAL),
    ROW(mqueue_null_calls, RK_EINVAL),
    ROW(mqueue_huge_and_stale, RK_ECLOSED),
    ROW(priority_band_garbage, RK_OK),
    /* telemetry.h */
    ROW(histogram_null, RK_EINVAL),
    ROW(histogram_garbage_values, RK_OK),
    ROW(stats_build_null, RK_ETOOBIG),
    ROW(stats_find_null, RK_OK),
    ROW(stats_rates_garbage, RK_OK),
    ROW(stats_format_null, RK_EINVAL),
    ROW(stats_format_zero, RK_OK),
    ROW(stats_format_corrupt, RK_EINVAL),
    ROW(stats_format_garbage_label, RK_OK),
    ROW(stats_print_null, RK_EINVAL),
    ROW(stat_unit_garbage, RK_OK),
    /* buffer.h */
    ROW(dtype_garbage, RK_OK),
    ROW(buffer_create_null, RK_EINVAL),
    ROW(buffer_create_zero, RK_EINVAL),
    ROW(buffer_create_huge, RK_ETOOBIG),
    ROW(buffer_create_garbage_dtype, RK_EINVAL),
    ROW(buffer_create_garbage_device, RK_EINVAL),
    ROW(buffer_create_bad_elem_size, RK_EINVAL),
    ROW(buffer_null_calls, RK_EINVAL),
    ROW(buffer_garbage_args, RK_OK),
    /* pool.h */
    ROW(pool_create_bad, RK_EINVAL),
    ROW(pool_null_calls, RK_EINVAL),
    ROW(pool_zero_huge_stale, RK_OK),
    /* device.h */
    ROW(device_null_calls, RK_EINVAL),
    ROW(device_garbage_args, RK_OK),
    ROW(monitor_null_calls, RK_EINVAL),
    ROW(monitor_garbage_index, ANY_ERROR),
    /* clock.h, error.h, log.h, version.h */
    ROW(error_garbage_codes, RK_OK),
    ROW(clock_and_version, RK_OK),
    ROW(log_garbage_level, RK_EINVAL),
};

static void
run_row(void **state)
{
    const struct row *r = *state;
    int rc;

    rk__clear_detail();
    rc = r->call();

    if (r->want == ANY_ERROR) {
        if (rc == RK_OK || rc == WRONG)
            fail_msg(
                "%s: returned %s, want an error", r->name, rk_err_name(rc));
    } else if (rc != r->want) {
        fail_msg("%s: returned %s (%s), want %s", r->name, rk_err_name(rc),
            rk_errdetail(), rk_err_name(r->want));
    }
    /* Every error leaves a detail. */
    if (rc != RK_OK && rc != WRONG && rk_errdetail()[0] == '\0')
        fail_msg("%s: %s without a detail", r->name, rk_err_name(rc));
}

int
main(void)
{
    enum { N = sizeof(rows) / sizeof(rows[0]) };
    static struct CMUnitTest tests[N];

    for (size_t i = 0; i < N; i++) {
        tests[i] = (struct CMUnitTest) { rows[i].name, run_row, NULL, NULL,
            (void *)(uintptr_t)&rows[i] };
    }
    return _cmocka_run_group_tests("bad_input", tests, N, NULL, NULL);
}
