/*
 * src/telemetry/stats.c - snapshots of counters, rates and the JSON and
 * text formatters.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include "common/common.h"
#include "telemetry/stats.h"

const char *
rk_stat_unit_name(rk_stat_unit unit)
{
    switch (unit) {
    case RK_UNIT_NONE:
        return "";
    case RK_UNIT_MESSAGES:
        return "msg";
    case RK_UNIT_BYTES:
        return "B";
    case RK_UNIT_NS:
        return "ns";
    case RK_UNIT_EVENTS:
        return "events";
    }
    return "?";
}

/* ------------------------------------------------------------ snapshots */

void
rk_stats_init(rk_stats *s, const char *label, uint64_t start_ns)
{
    if (s == NULL)
        return;
    memset(s, 0, sizeof(*s));
    if (label != NULL) {
        size_t n = strlen(label);
        if (n >= sizeof(s->label))
            n = sizeof(s->label) - 1;
        memcpy(s->label, label, n);
    }
    s->start_ns = start_ns;
    s->taken_ns = rk_now_ns();
}

void
rk__stats_begin(rk_stats *out, const char *label, uint64_t start_ns)
{
    rk_stats_init(out, label, start_ns);
}

int
rk_stats_add_value(rk_stats *s, const rk_stat_desc *desc, uint64_t value)
{
    if (s == NULL || desc == NULL)
        return rk__fail(RK_EINVAL, "rk_stats_add_value: NULL argument");
    if (s->ncounters >= RK_STATS_MAX_COUNTERS)
        return rk__fail(RK_ETOOBIG, "rk_stats: more than %d counters",
            RK_STATS_MAX_COUNTERS);
    s->counter[s->ncounters].desc = desc;
    s->counter[s->ncounters].value = value;
    s->ncounters++;
    return RK_OK;
}

int
rk_stats_add_summary(
    rk_stats *s, const rk_stat_desc *desc, const rk_latency_summary *sum)
{
    if (s == NULL || desc == NULL || sum == NULL)
        return rk__fail(RK_EINVAL, "rk_stats_add_summary: NULL argument");
    return rk__stats_add_summary(s, desc, sum);
}

int
rk__stats_add_counters(rk_stats *out, const rk_stat_desc *desc,
    const rk__counter *values, size_t n)
{
    if (n > RK_STATS_MAX_COUNTERS - out->ncounters)
        return rk__fail(RK_ETOOBIG, "rk_stats: %zu + %zu counters > %d",
            out->ncounters, n, RK_STATS_MAX_COUNTERS);
    for (size_t i = 0; i < n; i++) {
        rk_stat_value *v = &out->counter[out->ncounters++];
        v->desc = &desc[i];
        v->value = rk__counter_get(&values[i]);
    }
    return RK_OK;
}

int
rk__stats_add_summary(
    rk_stats *out, const rk_stat_desc *desc, const rk_latency_summary *sum)
{
    if (out->nlatencies >= RK_STATS_MAX_LATENCIES)
        return rk__fail(RK_ETOOBIG, "rk_stats: more than %d latencies",
            RK_STATS_MAX_LATENCIES);
    rk_stat_latency *l = &out->latency[out->nlatencies++];
    l->desc = desc;
    l->summary = *sum;
    return RK_OK;
}

int
rk__stats_add_latency(
    rk_stats *out, const rk_stat_desc *desc, const rk__hist *h)
{
    rk_latency_summary sum;

    if (out->nlatencies >= RK_STATS_MAX_LATENCIES)
        return rk__fail(RK_ETOOBIG, "rk_stats: more than %d latencies",
            RK_STATS_MAX_LATENCIES);
    rk__hist_summary(h, &sum);
    return rk__stats_add_summary(out, desc, &sum);
}

/* The entry named name among n entries (at most max) that start at
 * first, stride bytes apart, each beginning with its desc pointer
 * (rk_stat_value, rk_stat_latency); NULL when there is none. */
_Static_assert(offsetof(rk_stat_value, desc) == 0
        && offsetof(rk_stat_latency, desc) == 0,
    "find_named reads an entry's desc at its start");

static const void *
find_named(const void *first, size_t stride, size_t n, size_t max,
    const char *name)
{
    for (size_t i = 0; name != NULL && i < n && i < max; i++) {
        const char *e = (const char *)first + i * stride;
        const rk_stat_desc *d;

        memcpy(&d, e, sizeof(d));
        if (d != NULL && strcmp(d->name, name) == 0)
            return e;
    }
    return NULL;
}

const rk_stat_value *
rk_stats_find(const rk_stats *s, const char *name)
{
    return s == NULL ? NULL
                     : find_named(s->counter, sizeof(s->counter[0]),
                           s->ncounters, RK_STATS_MAX_COUNTERS, name);
}

const rk_latency_summary *
rk_stats_find_latency(const rk_stats *s, const char *name)
{
    const rk_stat_latency *l = s == NULL ? NULL
        : find_named(s->latency, sizeof(s->latency[0]), s->nlatencies,
              RK_STATS_MAX_LATENCIES, name);

    return l != NULL ? &l->summary : NULL;
}

/* ------------------------------------------------------------ rates */

uint64_t
rk_stats_uptime_ns(const rk_stats *s)
{
    if (s == NULL || s->taken_ns < s->start_ns)
        return 0;
    return s->taken_ns - s->start_ns;
}

double
rk_rate_per_sec(uint64_t count, uint64_t elapsed_ns)
{
    if (elapsed_ns == 0)
        return 0.0;
    return (double)count * 1e9 / (double)elapsed_ns;
}

double
rk_stats_rate(const rk_stats *s, const char *name)
{
    const rk_stat_value *v = rk_stats_find(s, name);
    return v != NULL ? rk_rate_per_sec(v->value, rk_stats_uptime_ns(s)) : 0.0;
}

double
rk_stats_rate_between(
    const rk_stats *prev, const rk_stats *cur, const char *name)
{
    const rk_stat_value *a = rk_stats_find(prev, name);
    const rk_stat_value *b = rk_stats_find(cur, name);
    if (a == NULL || b == NULL || b->value < a->value
        || cur->taken_ns <= prev->taken_ns)
        return 0.0;
    return rk_rate_per_sec(
        b->value - a->value, cur->taken_ns - prev->taken_ns);
}

/* ------------------------------------------------------------ formatting */

/* An snprintf-style appender: writes what fits, counts everything. */
typedef struct outbuf {
    char *buf;
    size_t size;
    size_t len; /* full length, may exceed size */
} outbuf;

static void ob_printf(outbuf *o, const char *fmt, ...) RK__PRINTF(2, 3);

static void
ob_printf(outbuf *o, const char *fmt, ...)
{
    va_list ap;
    size_t room = o->len < o->size ? o->size - o->len : 0;

    va_start(ap, fmt);
    int n = vsnprintf(room > 0 ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

/* A JSON string literal of at most max bytes of s (stopping at a NUL):
 * quotes, backslashes and control characters are escaped, valid UTF-8
 * passes through, and each byte that does not start a valid UTF-8
 * sequence becomes U+FFFD, so the output is always valid JSON whatever
 * the label or descriptor name holds. */
static void
ob_json_string(outbuf *o, const char *s, size_t max)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strnlen(s, max), i = 0;

    ob_printf(o, "\"");
    while (i < n) {
        /* Copy the longest run that needs no escaping in one call. */
        size_t run = 0, k;

        while (i + run < n && u[i + run] >= 0x20 && u[i + run] != '"'
            && u[i + run] != '\\'
            && (k = rk__utf8_seq(u + i + run, n - i - run)) != 0)
            run += k;
        if (run > 0) {
            ob_printf(o, "%.*s", (int)run, s + i);
            i += run;
            continue;
        }
        if (u[i] == '"' || u[i] == '\\')
            ob_printf(o, "\\%c", u[i]);
        else if (u[i] < 0x20)
            ob_printf(o, "\\u%04x", (unsigned)u[i]);
        else
            ob_printf(o, "\\ufffd");
        i++;
    }
    ob_printf(o, "\"");
}

static int
ob_finish(outbuf *o, size_t *len)
{
    if (len != NULL)
        *len = o->len;
    if (o->size > 0 && o->len >= o->size)
        return rk__fail(RK_ETOOBIG, "rk_stats: %zu bytes needed, %zu given",
            o->len + 1, o->size);
    return RK_OK;
}

static const char *
desc_name(const rk_stat_desc *d)
{
    return d != NULL && d->name != NULL ? d->name : "?";
}

static int
check_format_args(const rk_stats *s, const char *buf, size_t size)
{
    if (s == NULL || (buf == NULL && size > 0))
        return rk__fail(RK_EINVAL, "rk_stats_format: NULL argument");
    if (s->ncounters > RK_STATS_MAX_COUNTERS
        || s->nlatencies > RK_STATS_MAX_LATENCIES)
        return rk__fail(RK_EINVAL, "rk_stats_format: corrupt snapshot");
    return RK_OK;
}

int
rk_stats_format_json(const rk_stats *s, char *buf, size_t size, size_t *len)
{
    outbuf o = { buf, size, 0 };
    int rv = check_format_args(s, buf, size);

    if (rv != RK_OK)
        return rv;
    if (size > 0)
        buf[0] = '\0';
    ob_printf(&o, "{\"label\":");
    ob_json_string(&o, s->label, sizeof(s->label));
    ob_printf(&o, ",\"uptime_ns\":%llu,\"counters\":{",
        (unsigned long long)rk_stats_uptime_ns(s));
    for (size_t i = 0; i < s->ncounters; i++) {
        if (i > 0)
            ob_printf(&o, ",");
        ob_json_string(&o, desc_name(s->counter[i].desc), SIZE_MAX);
        ob_printf(&o, ":%llu", (unsigned long long)s->counter[i].value);
    }
    ob_printf(&o, "},\"latency\":{");
    for (size_t i = 0; i < s->nlatencies; i++) {
        const rk_latency_summary *l = &s->latency[i].summary;
        if (i > 0)
            ob_printf(&o, ",");
        ob_json_string(&o, desc_name(s->latency[i].desc), SIZE_MAX);
        ob_printf(&o, ":{\"count\":%llu,\"min_ns\":%llu,\"max_ns\":%llu,",
            (unsigned long long)l->count, (unsigned long long)l->min_ns,
            (unsigned long long)l->max_ns);
        /* JSON has no NaN or infinity: a mean that is not finite (only a
         * hand-built snapshot can hold one) is written as null. */
        if (isfinite(l->mean_ns))
            ob_printf(&o, "\"mean_ns\":%.1f", l->mean_ns);
        else
            ob_printf(&o, "\"mean_ns\":null");
        ob_printf(&o,
            ",\"p50_ns\":%llu,\"p90_ns\":%llu,\"p99_ns\":%llu,"
            "\"p999_ns\":%llu}",
            (unsigned long long)l->p50_ns, (unsigned long long)l->p90_ns,
            (unsigned long long)l->p99_ns, (unsigned long long)l->p999_ns);
    }
    ob_printf(&o, "}}");
    return ob_finish(&o, len);
}

int
rk_stats_format_text(const rk_stats *s, char *buf, size_t size, size_t *len)
{
    outbuf o = { buf, size, 0 };
    int rv = check_format_args(s, buf, size);
    uint64_t up = rk_stats_uptime_ns(s);

    if (rv != RK_OK)
        return rv;
    if (size > 0)
        buf[0] = '\0';
    /* label need not be NUL-terminated in a hand-built snapshot. */
    ob_printf(&o, "%.*s: uptime %.3f s\n",
        s->label[0] ? (int)strnlen(s->label, sizeof(s->label)) : 7,
        s->label[0] ? s->label : "(stats)", (double)up / 1e9);
    for (size_t i = 0; i < s->ncounters; i++) {
        const rk_stat_desc *d = s->counter[i].desc;
        ob_printf(&o, "  %-24s %14llu %-6s", desc_name(d),
            (unsigned long long)s->counter[i].value,
            d != NULL ? rk_stat_unit_name(d->unit) : "");
        if (d != NULL && d->kind == RK_STAT_COUNTER)
            ob_printf(
                &o, " %12.1f/s", rk_rate_per_sec(s->counter[i].value, up));
        else
            ob_printf(&o, " %14s", "");
        ob_printf(&o, "  %s\n", d != NULL && d->desc != NULL ? d->desc : "");
    }
    for (size_t i = 0; i < s->nlatencies; i++) {
        const rk_latency_summary *l = &s->latency[i].summary;
        ob_printf(&o,
            "  %-24s count %llu  min %llu  p50 %llu  p90 %llu  "
            "p99 %llu  p99.9 %llu  max %llu  mean %.1f ns\n",
            desc_name(s->latency[i].desc), (unsigned long long)l->count,
            (unsigned long long)l->min_ns, (unsigned long long)l->p50_ns,
            (unsigned long long)l->p90_ns, (unsigned long long)l->p99_ns,
            (unsigned long long)l->p999_ns, (unsigned long long)l->max_ns,
            l->mean_ns);
    }
    return ob_finish(&o, len);
}

int
rk_stats_print(FILE *f, const rk_stats *s, int json)
{
    char small[2048];
    size_t len = 0;
    int rv;

    if (f == NULL || s == NULL)
        return rk__fail(RK_EINVAL, "rk_stats_print: NULL argument");
    rv = json ? rk_stats_format_json(s, small, sizeof(small), &len)
              : rk_stats_format_text(s, small, sizeof(small), &len);
    char *text = small;
    if (rv == RK_ETOOBIG) {
        text = malloc(len + 1);
        if (text == NULL)
            return rk__fail(RK_ENOMEM, "rk_stats_print: %zu bytes", len + 1);
        rv = json ? rk_stats_format_json(s, text, len + 1, NULL)
                  : rk_stats_format_text(s, text, len + 1, NULL);
    }
    if (rv == RK_OK
        && (fputs(text, f) == EOF || (json && fputc('\n', f) == EOF)))
        rv = rk__fail(RK_EINTERNAL, "rk_stats_print: write failed");
    if (text != small)
        free(text);
    return rv;
}
