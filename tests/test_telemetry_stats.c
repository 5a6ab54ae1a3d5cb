/* Counter descriptors, snapshots, rates and the JSON/text formatters. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h> /* after setjmp.h, stdarg.h and stddef.h */

#include "common/common.h"
#include "json_check.h"
#include "ringkernel/ringkernel.h"
#include "telemetry/stats.h"

/* The X-macro pattern stats.h recommends, as the runtime would use it. */
#define TSTATS(X)                                                             \
    X(PROCESSED, "messages_processed", RK_STAT_COUNTER, RK_UNIT_MESSAGES,     \
        "messages handled")                                                   \
    X(DEPTH, "queue_depth", RK_STAT_GAUGE, RK_UNIT_MESSAGES, "inbox depth")

enum {
#define TSTAT_ENUM(id, n, k, u, d) TSTAT_##id,
    TSTATS(TSTAT_ENUM)
#undef TSTAT_ENUM
        TSTAT_COUNT
};

static const rk_stat_desc tstat_desc[] = {
#define TSTAT_DESC(id, n, k, u, d) { n, d, k, u },
    TSTATS(TSTAT_DESC)
#undef TSTAT_DESC
};

static const rk_stat_desc handler_desc
    = { "handler_ns", "time spent in the handler", RK_STAT_GAUGE, RK_UNIT_NS };

/* An object as the runtime would lay it out: counters and a histogram. */
typedef struct tobj {
    rk__counter stat[TSTAT_COUNT];
    rk__hist lat;
} tobj;

/* A snapshot with known contents and fixed clock values. */
static void
known_snapshot(tobj *o, rk_stats *s, const char *label)
{
    memset(o, 0, sizeof(*o));
    for (int i = 0; i < 10; i++)
        rk__counter_add_sw(&o->stat[TSTAT_PROCESSED], 1);
    rk__counter_set(&o->stat[TSTAT_DEPTH], 5);
    rk__counter_sub(&o->stat[TSTAT_DEPTH], 2);
    uint64_t vals[] = { 1, 2, 3, 4, 11 };
    for (size_t i = 0; i < 5; i++)
        rk__hist_record(&o->lat, vals[i]);

    rk__stats_begin(s, label, 1000);
    assert_true(s->taken_ns >= 1000);
    assert_int_equal(
        rk__stats_add_counters(s, tstat_desc, o->stat, TSTAT_COUNT), RK_OK);
    assert_int_equal(rk__stats_add_latency(s, &handler_desc, &o->lat), RK_OK);
    s->taken_ns = 1000 + UINT64_C(2000000000); /* uptime exactly 2 s */
}

static const char known_json[]
    = "{\"label\":\"worker\",\"uptime_ns\":2000000000,\"counters\":{"
      "\"messages_processed\":10,\"queue_depth\":3},\"latency\":{"
      "\"handler_ns\":{\"count\":5,\"min_ns\":1,\"max_ns\":11,\"mean_ns\":4.2,"
      "\"p50_ns\":3,\"p90_ns\":11,\"p99_ns\":11,\"p999_ns\":11}}}";

static const char known_text[]
    = "worker: uptime 2.000 s\n"
      "  messages_processed                   10 msg             5.0/s  "
      "messages handled\n"
      "  queue_depth                           3 msg                    "
      "inbox depth\n"
      "  handler_ns               count 5  min 1  p50 3  p90 11  p99 11  "
      "p99.9 11  max 11  mean 4.2 ns\n";

static void
test_snapshot_and_find(void **state)
{
    (void)state;
    tobj o;
    rk_stats s;
    known_snapshot(&o, &s, "worker");
    assert_string_equal(s.label, "worker");
    assert_int_equal(s.ncounters, 2);
    assert_int_equal(s.nlatencies, 1);
    assert_ptr_equal(s.counter[0].desc, &tstat_desc[TSTAT_PROCESSED]);

    const rk_stat_value *v = rk_stats_find(&s, "messages_processed");
    assert_non_null(v);
    assert_int_equal(v->value, 10);
    assert_int_equal(v->desc->kind, RK_STAT_COUNTER);
    assert_int_equal(rk_stats_find(&s, "queue_depth")->value, 3);
    assert_null(rk_stats_find(&s, "nope"));
    assert_null(rk_stats_find(NULL, "queue_depth"));
    assert_null(rk_stats_find(&s, NULL));

    const rk_latency_summary *l = rk_stats_find_latency(&s, "handler_ns");
    assert_non_null(l);
    assert_int_equal(l->count, 5);
    assert_int_equal(l->min_ns, 1);
    assert_int_equal(l->max_ns, 11);
    assert_int_equal(l->p50_ns, 3);
    assert_null(rk_stats_find_latency(&s, "messages_processed"));
}

static void
test_label_truncated(void **state)
{
    (void)state;
    char big[200];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    rk_stats s;
    rk__stats_begin(&s, big, 0);
    assert_int_equal(strlen(s.label), RK_STATS_LABEL_MAX - 1);
    rk__stats_begin(&s, NULL, 0);
    assert_string_equal(s.label, "");
}

static void
test_capacity_limits(void **state)
{
    (void)state;
    rk__counter c[RK_STATS_MAX_COUNTERS + 1];
    rk_stat_desc d[RK_STATS_MAX_COUNTERS + 1];
    memset(c, 0, sizeof(c));
    for (size_t i = 0; i < RK__ARRAY_LEN(d); i++)
        d[i] = tstat_desc[0];
    rk_stats s;
    rk__stats_begin(&s, "cap", 0);
    assert_int_equal(
        rk__stats_add_counters(&s, d, c, RK__ARRAY_LEN(c)), RK_ETOOBIG);
    assert_int_equal(s.ncounters, 0); /* all or nothing */
    assert_int_equal(
        rk__stats_add_counters(&s, d, c, RK_STATS_MAX_COUNTERS - 1), RK_OK);
    assert_int_equal(rk__stats_add_counters(&s, d, c, 2), RK_ETOOBIG);
    assert_int_equal(rk__stats_add_counters(&s, d, c, 1), RK_OK);
    assert_int_equal(s.ncounters, RK_STATS_MAX_COUNTERS);

    rk__hist *h = calloc(1, sizeof(*h));
    assert_non_null(h);
    for (int i = 0; i < RK_STATS_MAX_LATENCIES; i++)
        assert_int_equal(rk__stats_add_latency(&s, &handler_desc, h), RK_OK);
    assert_int_equal(rk__stats_add_latency(&s, &handler_desc, h), RK_ETOOBIG);
    assert_int_equal(s.nlatencies, RK_STATS_MAX_LATENCIES);
    free(h);
}

static void
test_rates(void **state)
{
    (void)state;
    tobj o;
    rk_stats a, b;
    known_snapshot(&o, &a, "worker");
    assert_int_equal(rk_stats_uptime_ns(&a), 2000000000);
    assert_true(rk_stats_rate(&a, "messages_processed") == 5.0);
    assert_true(rk_stats_rate(&a, "nope") == 0.0);

    b = a;
    b.counter[TSTAT_PROCESSED].value = 1010;
    b.taken_ns = a.taken_ns + 500000000; /* +1000 msgs in 0.5 s */
    assert_true(rk_stats_rate_between(&a, &b, "messages_processed") == 2000.0);
    /* No time passed, time went backwards, or the counter went down. */
    assert_true(rk_stats_rate_between(&a, &a, "messages_processed") == 0.0);
    assert_true(rk_stats_rate_between(&b, &a, "messages_processed") == 0.0);
    assert_true(rk_stats_rate_between(&a, &b, "nope") == 0.0);

    assert_true(rk_rate_per_sec(3, 1500000000) == 2.0);
    assert_true(rk_rate_per_sec(3, 0) == 0.0);
    a.start_ns = a.taken_ns + 1;
    assert_int_equal(rk_stats_uptime_ns(&a), 0);
    assert_true(rk_stats_rate(&a, "messages_processed") == 0.0);
    assert_int_equal(rk_stats_uptime_ns(NULL), 0);
}

typedef int (*format_fn)(const rk_stats *, char *, size_t, size_t *);

/* Formats the known snapshot with fn: the full text equals want, and the
 * reported length is right both when writing and when only measuring. */
static void
check_known_format(format_fn fn, const char *want, rk_stats *s)
{
    tobj o;
    char buf[1024];
    size_t len = 0;
    known_snapshot(&o, s, "worker");
    assert_int_equal(fn(s, buf, sizeof(buf), &len), RK_OK);
    assert_string_equal(buf, want);
    assert_int_equal(len, strlen(want));
    len = 0;
    assert_int_equal(fn(s, NULL, 0, &len), RK_OK);
    assert_int_equal(len, strlen(want));
}

static void
test_format_json(void **state)
{
    (void)state;
    rk_stats s;
    char buf[1024];
    size_t len = 0;
    check_known_format(rk_stats_format_json, known_json, &s);

    /* Truncation like snprintf. */
    char small[16];
    assert_int_equal(
        rk_stats_format_json(&s, small, sizeof(small), &len), RK_ETOOBIG);
    assert_int_equal(len, strlen(known_json));
    assert_int_equal(strlen(small), sizeof(small) - 1);
    assert_memory_equal(small, known_json, sizeof(small) - 1);
    /* Exactly one byte short of room for the NUL is still truncation. */
    char *exact = malloc(strlen(known_json));
    assert_non_null(exact);
    assert_int_equal(
        rk_stats_format_json(&s, exact, strlen(known_json), NULL), RK_ETOOBIG);
    free(exact);

    assert_int_equal(
        rk_stats_format_json(NULL, buf, sizeof(buf), NULL), RK_EINVAL);
    assert_int_equal(rk_stats_format_json(&s, NULL, 10, NULL), RK_EINVAL);
    s.ncounters = RK_STATS_MAX_COUNTERS + 1;
    assert_int_equal(
        rk_stats_format_json(&s, buf, sizeof(buf), NULL), RK_EINVAL);
}

static void
test_format_json_escapes_and_empty(void **state)
{
    (void)state;
    rk_stats s;
    char buf[256];
    rk__stats_begin(&s, "a\"b\\c\td\x01", 5);
    s.taken_ns = 5;
    assert_int_equal(rk_stats_format_json(&s, buf, sizeof(buf), NULL), RK_OK);
    assert_string_equal(buf,
        "{\"label\":\"a\\\"b\\\\c\\u0009d\\u0001\","
        "\"uptime_ns\":0,\"counters\":{},"
        "\"latency\":{}}");
}

static void
test_format_text(void **state)
{
    (void)state;
    rk_stats s;
    char buf[1024];
    size_t len = 0;
    check_known_format(rk_stats_format_text, known_text, &s);
    assert_int_equal(rk_stats_format_text(&s, buf, 8, &len), RK_ETOOBIG);
    assert_string_equal(buf, "worker:");
}

static void
test_print(void **state)
{
    (void)state;
    tobj o;
    rk_stats s;
    char *mem = NULL;
    size_t memlen = 0;
    known_snapshot(&o, &s, "worker");

    FILE *f = open_memstream(&mem, &memlen);
    assert_non_null(f);
    assert_int_equal(rk_stats_print(f, &s, 1), RK_OK);
    assert_int_equal(rk_stats_print(f, &s, 0), RK_OK);
    assert_int_equal(rk_stats_print(NULL, &s, 0), RK_EINVAL);
    assert_int_equal(rk_stats_print(f, NULL, 0), RK_EINVAL);
    fclose(f);
    char want[2048];
    snprintf(want, sizeof(want), "%s\n%s", known_json, known_text);
    assert_string_equal(mem, want);
    free(mem);

    /* A snapshot longer than rk_stats_print's stack buffer. */
    rk__counter c[RK_STATS_MAX_COUNTERS];
    rk_stat_desc d[RK_STATS_MAX_COUNTERS];
    memset(c, 0, sizeof(c));
    for (size_t i = 0; i < RK__ARRAY_LEN(d); i++)
        d[i] = tstat_desc[0];
    rk__stats_begin(&s, "long", 0);
    assert_int_equal(
        rk__stats_add_counters(&s, d, c, RK_STATS_MAX_COUNTERS), RK_OK);
    size_t need = 0;
    assert_int_equal(rk_stats_format_text(&s, NULL, 0, &need), RK_OK);
    assert_true(need > 2048);
    f = open_memstream(&mem, &memlen);
    assert_non_null(f);
    assert_int_equal(rk_stats_print(f, &s, 0), RK_OK);
    fclose(f);
    assert_int_equal(memlen, need);
    free(mem);
}

/* Application code builds the same snapshot with the public API only. */
static void
test_public_builders(void **state)
{
    (void)state;
    rk_histogram *h = NULL;
    assert_int_equal(rk_histogram_create(&h), RK_OK);
    uint64_t vals[] = { 1, 2, 3, 4, 11 };
    for (size_t i = 0; i < 5; i++)
        rk_histogram_record(h, vals[i]);
    rk_latency_summary sum;
    rk_histogram_summary(h, &sum);
    rk_histogram_destroy(h);

    rk_stats s;
    rk_stats_init(&s, "worker", 1000);
    assert_int_equal(
        rk_stats_add_value(&s, &tstat_desc[TSTAT_PROCESSED], 10), RK_OK);
    assert_int_equal(
        rk_stats_add_value(&s, &tstat_desc[TSTAT_DEPTH], 3), RK_OK);
    assert_int_equal(rk_stats_add_summary(&s, &handler_desc, &sum), RK_OK);
    s.taken_ns = 1000 + UINT64_C(2000000000);
    char buf[1024];
    assert_int_equal(rk_stats_format_json(&s, buf, sizeof(buf), NULL), RK_OK);
    assert_string_equal(buf, known_json);

    assert_int_equal(rk_stats_add_value(NULL, &handler_desc, 1), RK_EINVAL);
    assert_int_equal(rk_stats_add_value(&s, NULL, 1), RK_EINVAL);
    assert_int_equal(rk_stats_add_summary(&s, &handler_desc, NULL), RK_EINVAL);
    rk_stats_init(NULL, "x", 0); /* ignored */
    while (s.ncounters < RK_STATS_MAX_COUNTERS)
        assert_int_equal(rk_stats_add_value(&s, &handler_desc, 0), RK_OK);
    assert_int_equal(rk_stats_add_value(&s, &handler_desc, 0), RK_ETOOBIG);
    assert_int_equal(s.ncounters, RK_STATS_MAX_COUNTERS);
}

static void
test_unit_names(void **state)
{
    (void)state;
    assert_string_equal(rk_stat_unit_name(RK_UNIT_NONE), "");
    assert_string_equal(rk_stat_unit_name(RK_UNIT_MESSAGES), "msg");
    assert_string_equal(rk_stat_unit_name(RK_UNIT_BYTES), "B");
    assert_string_equal(rk_stat_unit_name(RK_UNIT_NS), "ns");
    assert_string_equal(rk_stat_unit_name(RK_UNIT_EVENTS), "events");
    assert_string_equal(rk_stat_unit_name((rk_stat_unit)99), "?");
}

static void
test_telemetry_switch(void **state)
{
    (void)state;
    /* In this build telemetry is compiled in: the gate follows the flag. */
    int on = 1, off = 0;
    assert_int_equal(RK_TELEMETRY, 1);
    assert_true(rk__telemetry_on(on));
    assert_false(rk__telemetry_on(off));
}

/* Hostile kernel ids and counter names (issue 10): a label with no NUL
 * and bytes that are not UTF-8, names with quotes, control characters
 * and broken sequences all format to valid JSON of the documented shape,
 * and the label is not read past RK_STATS_LABEL_MAX. */
static void
test_format_json_hostile(void **state)
{
    static const rk_stat_desc bad[] = {
        { "q\"uote\\back\x01\x1f", "d", RK_STAT_COUNTER, RK_UNIT_NONE },
        { "\xff\xfe\xc3(\xed\xa0\x80\xf4\x90\x80\x80", "d", RK_STAT_GAUGE,
            RK_UNIT_NONE },
        { "caf\xc3\xa9", "d", RK_STAT_COUNTER, RK_UNIT_NONE },
    };
    rk_stats s;
    rk_latency_summary l = { 3, 1, 9, 4, 8, 9, 9, 4.5 };
    char buf[4096], *p;
    size_t len;

    (void)state;
    rk_stats_init(&s, "x", 0);
    memset(s.label, 0xff, sizeof(s.label)); /* no NUL, not UTF-8 */
    s.label[3] = '"';
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(rk_stats_add_value(&s, &bad[i], i), RK_OK);
    assert_int_equal(rk_stats_add_summary(&s, &bad[1], &l), RK_OK);
    assert_int_equal(rk_stats_format_json(&s, buf, sizeof(buf), &len), RK_OK);
    assert_int_equal(strlen(buf), len);
    if (!json_valid(buf, len))
        fail_msg("not valid JSON: %s", buf);
    /* 64 label bytes: 63 replacement characters and one escaped quote. */
    p = strstr(buf, "\"uptime_ns\"");
    assert_non_null(p);
    assert_int_equal(
        (size_t)(p - buf), strlen("{\"label\":\"") + 63 * 6 + 2 + 2);
    assert_non_null(strstr(buf,
        ",\"counters\":{\"q\\\"uote\\\\back"
        "\\u0001\\u001f\":0,"));
    assert_non_null(strstr(buf, "\"caf\xc3\xa9\":2}"));
    assert_non_null(strstr(buf, "},\"latency\":{\"\\ufffd"));
    assert_int_equal(rk_stats_format_text(&s, buf, sizeof(buf), &len), RK_OK);
    /* JSON has no NaN or infinity: a mean that is not finite is null. */
    s.latency[0].summary.mean_ns = NAN;
    assert_int_equal(rk_stats_format_json(&s, buf, sizeof(buf), &len), RK_OK);
    assert_non_null(strstr(buf, "\"mean_ns\":null,\"p50_ns\":4,"));
    assert_true(json_valid(buf, len));
    s.latency[0].summary.mean_ns = -INFINITY;
    assert_int_equal(rk_stats_format_json(&s, buf, sizeof(buf), &len), RK_OK);
    assert_true(json_valid(buf, len));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snapshot_and_find),
        cmocka_unit_test(test_label_truncated),
        cmocka_unit_test(test_capacity_limits),
        cmocka_unit_test(test_rates),
        cmocka_unit_test(test_format_json),
        cmocka_unit_test(test_format_json_escapes_and_empty),
        cmocka_unit_test(test_format_json_hostile),
        cmocka_unit_test(test_format_text),
        cmocka_unit_test(test_print),
        cmocka_unit_test(test_public_builders),
        cmocka_unit_test(test_unit_names),
        cmocka_unit_test(test_telemetry_switch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
