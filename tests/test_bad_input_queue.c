/*
 * The bad-input table (issue 10, see test_bad_input.c) for queue.h and telemetry.h:
 * NULL, zero, huge, stale and garbage arguments, each row with the code
 * it must return. Runs under ASan and UBSan in CI (make asan).
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

/* -------------------------------------------------------------- table */

static const struct row rows[] = {
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
};

int
main(void)
{
    return run_rows("bad_input_queue", rows, sizeof(rows) / sizeof(rows[0]));
}
