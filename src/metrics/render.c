/*
 * src/metrics/render.c - the metrics collector and its two renderers:
 * Prometheus text exposition (0.0.4) and JSON.
 *
 * Everything is read through the public API at render time; nothing is
 * cached between scrapes, so a scrape costs one stats call per kernel and
 * topic plus one NVML read per GPU, and memory is bounded by the size of
 * one report. One table (kernel_fields) drives both formats so that the
 * Prometheus names and the JSON keys cannot drift apart.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "metrics/metrics_internal.h"
#include "ringkernel/version.h"

/* ------------------------------------------------------- text buffer */

/* A growing string; on allocation failure it keeps failing quietly and the
 * caller checks oom once at the end. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void
sb_grow(sbuf *b, size_t need)
{
    size_t cap = b->cap ? b->cap : 4096;
    char *p;

    while (cap < b->len + need + 1)
        cap *= 2;
    if (cap == b->cap)
        return;
    if ((p = realloc(b->p, cap)) == NULL) {
        b->oom = 1;
        return;
    }
    b->p = p;
    b->cap = cap;
}

static void sb_printf(sbuf *b, const char *fmt, ...) RK__PRINTF(2, 3);

static void
sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->oom)
        return;
    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    sb_grow(b, (size_t)n);
    if (b->oom)
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* s escaped for a Prometheus label value (backslash, quote, newline) or a
 * JSON string (the same plus the other control characters). */
static void
sb_escaped(sbuf *b, const char *s, int json)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\\' || c == '"')
            sb_printf(b, "\\%c", c);
        else if (c == '\n')
            sb_printf(b, "\\n");
        else if (json && c < 0x20)
            sb_printf(b, "\\u%04x", c);
        else
            sb_printf(b, "%c", c);
    }
}

/* ------------------------------------------------------- collector */

static void
free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static int
copy_list(const char *const *src, char ***out, size_t *n)
{
    size_t k = 0;

    while (src[k])
        k++;
    if ((*out = calloc(k ? k : 1, sizeof(char *))) == NULL)
        return rk__fail(RK_ENOMEM, "metrics: kernel list");
    for (*n = 0; *n < k; ++*n)
        if (((*out)[*n] = strdup(src[*n])) == NULL)
            return rk__fail(RK_ENOMEM, "metrics: kernel list");
    return RK_OK;
}

int
rk_metrics_create(
    rk_metrics **out, rk_runtime *rt, const rk_metrics_config *cfg)
{
    rk_metrics *m;
    int rc = RK_OK;

    if (out == NULL || rt == NULL)
        return rk__fail(RK_EINVAL, "rk_metrics_create: NULL argument");
    *out = NULL;
    if ((m = calloc(1, sizeof(*m))) == NULL)
        return rk__fail(RK_ENOMEM, "rk_metrics_create");
    m->rt = rt;
    if (cfg)
        m->cfg = *cfg;
    m->cfg.kernels = m->cfg.topics = NULL; /* copied below, not borrowed */
    if (m->cfg.max_request == 0)
        m->cfg.max_request = 8192;
    if (m->cfg.max_clients == 0)
        m->cfg.max_clients = 16;
    pthread_mutex_init(&m->lock, NULL);
    if (cfg && cfg->kernels)
        rc = copy_list(cfg->kernels, &m->kernels, &m->nkernels);
    for (size_t i = 0; rc == RK_OK && cfg && cfg->topics && cfg->topics[i];
         i++)
        rc = rk_metrics_add_topic(m, cfg->topics[i]);
    if (rc == RK_OK && !m->cfg.no_gpu_monitor)
        rc = rk_gpu_monitor_open(&m->mon);
    if (rc != RK_OK) {
        rk_metrics_destroy(m);
        return rc;
    }
    *out = m;
    return RK_OK;
}

void
rk_metrics_destroy(rk_metrics *m)
{
    if (m == NULL)
        return;
    if (m->server_stop != NULL)
        m->server_stop(m);
    free_list(m->kernels, m->nkernels);
    free_list(m->topics, m->ntopics);
    rk_gpu_monitor_close(m->mon);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

int
rk_metrics_add_topic(rk_metrics *m, const char *topic)
{
    int rc = RK_OK;

    if (m == NULL)
        return rk__fail(RK_EINVAL, "rk_metrics_add_topic: NULL collector");
    if ((rc = rk__check_name(
             "rk_metrics_add_topic", "topic name", topic, RK_ID_MAX))
        != RK_OK)
        return rc;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < m->ntopics; i++)
        if (strcmp(m->topics[i], topic) == 0)
            goto out;
    if (m->ntopics == m->captopics) {
        size_t cap = m->captopics ? 2 * m->captopics : 8;
        char **v = realloc(m->topics, cap * sizeof(*v));
        if (v == NULL) {
            rc = rk__fail(RK_ENOMEM, "rk_metrics_add_topic");
            goto out;
        }
        m->topics = v;
        m->captopics = cap;
    }
    if ((m->topics[m->ntopics] = strdup(topic)) == NULL)
        rc = rk__fail(RK_ENOMEM, "rk_metrics_add_topic");
    else
        m->ntopics++;
out:
    pthread_mutex_unlock(&m->lock);
    return rc;
}

/* The ids of every registered kernel (up to cap), into ids. */
static size_t
discover_kernels(rk_runtime *rt, char (*ids)[RK_ID_MAX + 1], size_t cap)
{
    size_t n = 0;

    if (rk_runtime_kernel_ids(rt, ids, cap, &n) != RK_OK)
        return 0;
    return n < cap ? n : cap;
}

/* --------------------------------------------------------- figures */

/* One per-kernel figure: its Prometheus family, its JSON key and where it
 * sits in rk_kernel_stats. scale != 0 turns a nanosecond count into
 * seconds for Prometheus; JSON keeps the raw field. */
typedef struct kfield {
    const char *prom, *type, *help, *json;
    size_t off;
    double scale;
} kfield;

#define KF(prom, type, help, field, scale)                                    \
    {                                                                         \
        prom, type, help, #field, offsetof(rk_kernel_stats, field), scale     \
    }

static const kfield kernel_fields[] = {
    KF("ringkernel_messages_offered_total", "counter",
        "Sends attempted into the kernel's input queue.", offered, 0),
    KF("ringkernel_messages_processed_total", "counter",
        "Messages the kernel handled to completion.", processed, 0),
    KF("ringkernel_messages_dropped_total", "counter",
        "Messages dropped by the input queue's backpressure policy.", dropped,
        0),
    KF("ringkernel_messages_rejected_total", "counter",
        "Sends refused (backpressure, kernel state or message type).",
        rejected, 0),
    KF("ringkernel_messages_sent_total", "counter",
        "Messages the kernel sent to any target.", sent, 0),
    KF("ringkernel_dead_letters_total", "counter",
        "Messages of this kernel sent to the dead-letter queue.",
        dead_lettered, 0),
    KF("ringkernel_kernel_errors_total", "counter",
        "Actor or handler failures.", errors, 0),
    KF("ringkernel_kernel_restarts_total", "counter",
        "Restarts by the kernel's supervisor.", restarts, 0),
    KF("ringkernel_messages_pending", "gauge",
        "Messages in the input queue or being handled.", pending, 0),
    KF("ringkernel_queue_depth", "gauge",
        "Messages in the kernel's input queue now.", queue_depth, 0),
    KF("ringkernel_queue_high_water", "gauge",
        "Most messages the input queue has held at once.", queue_high_water,
        0),
    KF("ringkernel_queue_capacity", "gauge",
        "Messages the input queue holds (per priority band), as configured.",
        queue_capacity, 0),
    KF("ringkernel_output_capacity", "gauge",
        "Messages the output queue holds, as configured.", output_capacity, 0),
    KF("ringkernel_messages_direct_total", "counter",
        "Messages taken on the caller's own path (direct calls; on cuda, "
        "sends written into a device lane by the caller).",
        direct_calls, 0),
    KF("ringkernel_relay_handoffs_total", "counter",
        "Frames a device kernel's host relay moved to or from its lanes.",
        relay_handoffs, 0),
    KF("ringkernel_kernel_uptime_seconds", "gauge",
        "Time since the instance's first activation.", uptime_ns, 1e-9),
    KF("ringkernel_kernel_cpu_seconds_total", "counter",
        "CPU time of the kernel's thread (0 where not measured).", cpu_time_ns,
        1e-9),
};

/* Everything read about one kernel for one report. */
typedef struct kernel_row {
    char id[RK_ID_MAX + 1];
    rk_kernel_stats st;
    rk_latency_summary lat;
} kernel_row;

typedef struct topic_row {
    char name[RK_ID_MAX + 1];
    rk_topic_stats st;
} topic_row;

typedef struct report {
    kernel_row *k;
    size_t nk;
    topic_row *t;
    size_t nt;
    rk_gpu_reading *g;
    unsigned ng;
    int gpu_available;
    const char *gpu_detail;
} report;

static uint64_t
field_u64(const rk_kernel_stats *st, const kfield *f)
{
    uint64_t v;

    memcpy(&v, (const char *)st + f->off, sizeof(v));
    return v;
}

/* An unsigned field of a stats struct, 4 or 8 bytes wide, as a double
 * times scale. */
static double
field_at(const void *base, size_t off, size_t size, double scale)
{
    uint64_t v64 = 0;
    uint32_t v32;

    if (size == sizeof(v32)) {
        memcpy(&v32, (const char *)base + off, sizeof(v32));
        v64 = v32;
    } else {
        memcpy(&v64, (const char *)base + off, sizeof(v64));
    }
    return (double)v64 * scale;
}

static int
read_kernel(rk_runtime *rt, const char *id, kernel_row *row)
{
    rk_stats snap;
    const rk_latency_summary *lat;

    if (rk_kernel_stats_get(rt, id, &row->st) != RK_OK)
        return 0;
    snprintf(row->id, sizeof(row->id), "%s", id);
    memset(&row->lat, 0, sizeof(row->lat));
    if (rk_kernel_telemetry(rt, id, &snap) == RK_OK
        && (lat = rk_stats_find_latency(&snap, "latency_ns")) != NULL)
        row->lat = *lat;
    return 1;
}

static int
collect(rk_metrics *m, report *r)
{
    char(*ids)[RK_ID_MAX + 1] = NULL;
    size_t n = 0;

    memset(r, 0, sizeof(*r));
    if (m->kernels == NULL) {
        size_t total = 0;
        if (rk_runtime_kernel_ids(m->rt, NULL, 0, &total) != RK_OK)
            return RK_EINVAL;
        if ((ids = calloc(total ? total : 1, sizeof(*ids))) == NULL)
            return RK_ENOMEM;
        n = discover_kernels(m->rt, ids, total);
    } else {
        n = m->nkernels;
    }
    if ((r->k = calloc(n ? n : 1, sizeof(*r->k))) == NULL) {
        free(ids);
        return RK_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        r->nk += (size_t)read_kernel(
            m->rt, ids ? ids[i] : m->kernels[i], &r->k[r->nk]);
    free(ids);

    pthread_mutex_lock(&m->lock);
    if (m->ntopics != 0) {
        r->t = calloc(m->ntopics, sizeof(*r->t));
        for (size_t i = 0; r->t && i < m->ntopics; i++)
            if (rk_topic_stats_get(m->rt, m->topics[i], &r->t[r->nt].st)
                == RK_OK)
                snprintf(
                    r->t[r->nt++].name, RK_ID_MAX + 1, "%s", m->topics[i]);
    } else {
        /* None named: every topic the runtime has. */
        char(*names)[RK_ID_MAX + 1] = NULL;
        size_t total = 0, got;
        (void)rk_runtime_topic_names(m->rt, NULL, 0, &total);
        names = calloc(total ? total : 1, sizeof(*names));
        r->t = calloc(total ? total : 1, sizeof(*r->t));
        if (names != NULL && r->t != NULL
            && rk_runtime_topic_names(m->rt, names, total, &got) == RK_OK)
            for (size_t i = 0; i < got && i < total; i++)
                if (rk_topic_stats_get(m->rt, names[i], &r->t[r->nt].st)
                    == RK_OK)
                    snprintf(r->t[r->nt++].name, RK_ID_MAX + 1, "%s",
                        names[i]);
        free(names);
    }
    pthread_mutex_unlock(&m->lock);
    if (r->t == NULL)
        return RK_ENOMEM;

    if (m->mon) {
        unsigned count = rk_gpu_monitor_count(m->mon);
        r->gpu_available = rk_gpu_monitor_status(m->mon, &r->gpu_detail)
            == RK_MONITOR_AVAILABLE;
        if ((r->g = calloc(count ? count : 1, sizeof(*r->g))) == NULL)
            return RK_ENOMEM;
        for (unsigned i = 0; i < count; i++)
            if (rk_gpu_monitor_read(m->mon, i, &r->g[r->ng]) == RK_OK)
                r->ng++;
    } else {
        r->gpu_detail = "disabled (rk_metrics_config.no_gpu_monitor)";
    }
    return RK_OK;
}

static void
report_free(report *r)
{
    free(r->k);
    free(r->t);
    free(r->g);
}

/* ------------------------------------------------------ Prometheus */

static void
family(sbuf *b, const char *name, const char *type, const char *help)
{
    sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void
label_open(sbuf *b, const char *name, const char *key, const char *val)
{
    sb_printf(b, "%s{%s=\"", name, key);
    sb_escaped(b, val, 0);
    sb_printf(b, "\"");
}

static void
prom_kernels(sbuf *b, const report *r)
{
    for (size_t f = 0; f < RK__ARRAY_LEN(kernel_fields); f++) {
        const kfield *kf = &kernel_fields[f];
        family(b, kf->prom, kf->type, kf->help);
        for (size_t i = 0; i < r->nk; i++) {
            uint64_t v = field_u64(&r->k[i].st, kf);
            label_open(b, kf->prom, "kernel", r->k[i].id);
            if (kf->scale != 0)
                sb_printf(b, "} %.15g\n", (double)v * kf->scale);
            else
                sb_printf(b, "} %" PRIu64 "\n", v);
        }
    }
    family(b, "ringkernel_kernel_state", "gauge",
        "1 for the kernel's current lifecycle state, 0 for the others.");
    for (size_t i = 0; i < r->nk; i++)
        for (int s = 0; s < RK__KERNEL_STATE_COUNT; s++) {
            label_open(b, "ringkernel_kernel_state", "kernel", r->k[i].id);
            sb_printf(b, ",state=\"%s\"} %d\n",
                rk_kernel_state_name((rk_kernel_state)s),
                (int)r->k[i].st.state == s);
        }

    /* Send timestamp to the start of processing, as a summary. */
    static const struct {
        const char *q;
        size_t off;
    } qs[] = {
        { "0.5", offsetof(rk_latency_summary, p50_ns) },
        { "0.9", offsetof(rk_latency_summary, p90_ns) },
        { "0.99", offsetof(rk_latency_summary, p99_ns) },
        { "0.999", offsetof(rk_latency_summary, p999_ns) },
    };
    const char *lat = "ringkernel_message_latency_seconds";
    family(b, lat, "summary",
        "Queueing latency: send timestamp to the start of processing.");
    for (size_t i = 0; i < r->nk; i++) {
        const rk_latency_summary *l = &r->k[i].lat;
        for (size_t q = 0; q < RK__ARRAY_LEN(qs); q++) {
            uint64_t v;
            memcpy(&v, (const char *)l + qs[q].off, sizeof(v));
            label_open(b, lat, "kernel", r->k[i].id);
            sb_printf(
                b, ",quantile=\"%s\"} %.15g\n", qs[q].q, (double)v * 1e-9);
        }
        label_open(
            b, "ringkernel_message_latency_seconds_sum", "kernel", r->k[i].id);
        sb_printf(b, "} %.15g\n", l->mean_ns * (double)l->count * 1e-9);
        label_open(b, "ringkernel_message_latency_seconds_count", "kernel",
            r->k[i].id);
        sb_printf(b, "} %" PRIu64 "\n", l->count);
    }
    family(b, "ringkernel_message_latency_max_seconds", "gauge",
        "Largest queueing latency recorded.");
    for (size_t i = 0; i < r->nk; i++) {
        label_open(
            b, "ringkernel_message_latency_max_seconds", "kernel", r->k[i].id);
        sb_printf(b, "} %.15g\n", (double)r->k[i].lat.max_ns * 1e-9);
    }
}

static void
prom_topics(sbuf *b, const report *r)
{
    static const struct {
        const char *name, *type, *help;
        size_t off, size;
    } tf[] = {
        { "ringkernel_topic_published_total", "counter",
            "Publish calls on the topic.", offsetof(rk_topic_stats, published),
            8 },
        { "ringkernel_topic_delivered_total", "counter",
            "Copies that went into a subscriber.",
            offsetof(rk_topic_stats, delivered), 8 },
        { "ringkernel_topic_failed_total", "counter",
            "Copies a subscriber refused.", offsetof(rk_topic_stats, failed),
            8 },
        { "ringkernel_topic_subscribers", "gauge", "Subscribers now.",
            offsetof(rk_topic_stats, subscribers), 4 },
    };
    for (size_t f = 0; f < RK__ARRAY_LEN(tf); f++) {
        family(b, tf[f].name, tf[f].type, tf[f].help);
        for (size_t i = 0; i < r->nt; i++) {
            label_open(b, tf[f].name, "topic", r->t[i].name);
            sb_printf(b, "} %.0f\n",
                field_at(&r->t[i].st, tf[f].off, tf[f].size, 1));
        }
    }
}

#define GF(prom, help, json, need, field, scale)                              \
    {                                                                         \
        prom, help, json, need, offsetof(rk_gpu_reading, field),              \
            sizeof(((rk_gpu_reading *)0)->field), scale                       \
    }

/* One GPU gauge family, reported for every GPU whose valid bits include
 * need. */
static const struct gfield {
    const char *prom, *help, *json;
    unsigned need;
    size_t off, size;
    double scale;
} gpu_fields[] = {
    GF("ringkernel_gpu_utilization_ratio", "Share of time a kernel ran.",
        "utilization", RK_READING_UTILIZATION, util_gpu_pct, 0.01),
    GF("ringkernel_gpu_memory_utilization_ratio",
        "Share of time memory was read or written.", "memory_utilization",
        RK_READING_UTILIZATION, util_mem_pct, 0.01),
    GF("ringkernel_gpu_memory_total_bytes", "Device memory.",
        "memory_total_bytes", RK_READING_MEMORY, mem_total, 1),
    GF("ringkernel_gpu_memory_used_bytes", "Device memory in use.",
        "memory_used_bytes", RK_READING_MEMORY, mem_used, 1),
    GF("ringkernel_gpu_temperature_celsius", "GPU core temperature.",
        "temperature_celsius", RK_READING_TEMPERATURE, temperature_c, 1),
    GF("ringkernel_gpu_power_watts", "Current power draw.", "power_watts",
        RK_READING_POWER, power_mw, 1e-3),
    GF("ringkernel_gpu_power_limit_watts", "Enforced power limit.",
        "power_limit_watts", RK_READING_POWER_LIMIT, power_limit_mw, 1e-3),
    GF("ringkernel_gpu_clock_sm_hertz", "SM clock.", "clock_sm_hertz",
        RK_READING_CLOCKS, clock_sm_mhz, 1e6),
    GF("ringkernel_gpu_clock_memory_hertz", "Memory clock.",
        "clock_memory_hertz", RK_READING_CLOCKS, clock_mem_mhz, 1e6),
};

static double
gpu_value(const struct gfield *f, const rk_gpu_reading *g)
{
    return field_at(g, f->off, f->size, f->scale);
}

static void
prom_gpus(sbuf *b, const report *r)
{
    family(b, "ringkernel_gpu_monitor_available", "gauge",
        "1 when NVML is loaded and GPU gauges are reported.");
    sb_printf(b, "ringkernel_gpu_monitor_available %d\n", r->gpu_available);
    for (size_t f = 0; f < RK__ARRAY_LEN(gpu_fields) && r->ng; f++) {
        family(b, gpu_fields[f].prom, "gauge", gpu_fields[f].help);
        for (unsigned i = 0; i < r->ng; i++) {
            if (!(r->g[i].valid & gpu_fields[f].need))
                continue;
            sb_printf(
                b, "%s{gpu=\"%u\",name=\"", gpu_fields[f].prom, r->g[i].index);
            sb_escaped(b, r->g[i].name, 0);
            sb_printf(b, "\"} %.15g\n", gpu_value(&gpu_fields[f], &r->g[i]));
        }
    }
}

static void
render_prometheus(sbuf *b, const report *r)
{
    family(b, "ringkernel_build_info", "gauge",
        "Always 1; the library version is in the label.");
    sb_printf(b, "ringkernel_build_info{version=\"%s\"} 1\n", rk_version());
    family(b, "ringkernel_kernels", "gauge", "Kernels in this report.");
    sb_printf(b, "ringkernel_kernels %zu\n", r->nk);
    prom_kernels(b, r);
    prom_topics(b, r);
    prom_gpus(b, r);
}

/* ------------------------------------------------------------ JSON */

/* JSON has no inf or NaN: a rate over no time is reported as 0. */
static double
json_num(double v)
{
    return isfinite(v) ? v : 0.0;
}

static void
json_str(sbuf *b, const char *s)
{
    sb_printf(b, "\"");
    sb_escaped(b, s, 1);
    sb_printf(b, "\"");
}

static void
render_json(sbuf *b, const report *r)
{
    sb_printf(b, "{\"version\":\"%s\",\"taken_ns\":%" PRIu64 ",\"kernels\":[",
        rk_version(), rk_now_ns());
    for (size_t i = 0; i < r->nk; i++) {
        const kernel_row *k = &r->k[i];
        const rk_latency_summary *l = &k->lat;
        sb_printf(b, "%s{\"id\":", i ? "," : "");
        json_str(b, k->id);
        sb_printf(b, ",\"state\":\"%s\"", rk_kernel_state_name(k->st.state));
        for (size_t f = 0; f < RK__ARRAY_LEN(kernel_fields); f++)
            sb_printf(b, ",\"%s\":%" PRIu64, kernel_fields[f].json,
                field_u64(&k->st, &kernel_fields[f]));
        sb_printf(b,
            ",\"throughput\":%.6g,\"latency_ns\":{\"count\":%" PRIu64
            ",\"min\":%" PRIu64 ",\"p50\":%" PRIu64 ",\"p90\":%" PRIu64
            ",\"p99\":%" PRIu64 ",\"p999\":%" PRIu64 ",\"max\":%" PRIu64
            ",\"mean\":%.6g}}",
            json_num(k->st.throughput), l->count, l->min_ns, l->p50_ns,
            l->p90_ns, l->p99_ns, l->p999_ns, l->max_ns, json_num(l->mean_ns));
    }
    sb_printf(b, "],\"topics\":[");
    for (size_t i = 0; i < r->nt; i++) {
        sb_printf(b, "%s{\"name\":", i ? "," : "");
        json_str(b, r->t[i].name);
        sb_printf(b,
            ",\"published\":%" PRIu64 ",\"delivered\":%" PRIu64
            ",\"failed\":%" PRIu64 ",\"subscribers\":%u}",
            r->t[i].st.published, r->t[i].st.delivered, r->t[i].st.failed,
            r->t[i].st.subscribers);
    }
    sb_printf(b, "],\"gpu_monitor\":{\"available\":%s,\"detail\":",
        r->gpu_available ? "true" : "false");
    json_str(b, r->gpu_detail ? r->gpu_detail : "");
    sb_printf(b, ",\"gpus\":[");
    for (unsigned i = 0; i < r->ng; i++) {
        sb_printf(b, "%s{\"index\":%u,\"name\":", i ? "," : "", r->g[i].index);
        json_str(b, r->g[i].name);
        for (size_t f = 0; f < RK__ARRAY_LEN(gpu_fields); f++)
            if (r->g[i].valid & gpu_fields[f].need)
                sb_printf(b, ",\"%s\":%.15g", gpu_fields[f].json,
                    gpu_value(&gpu_fields[f], &r->g[i]));
        sb_printf(b, "}");
    }
    sb_printf(b, "]}}\n");
}

int
rk_metrics_render(
    rk_metrics *m, rk_metrics_format fmt, char **out, size_t *len)
{
    sbuf b = { 0 };
    report r;
    int rc;

    if (m == NULL || out == NULL
        || (fmt != RK_METRICS_PROMETHEUS && fmt != RK_METRICS_JSON))
        return rk__fail(RK_EINVAL, "rk_metrics_render: %s",
            m && out ? "unknown format" : "NULL argument");
    *out = NULL;
    rc = collect(m, &r);
    if (rc == RK_OK) {
        if (fmt == RK_METRICS_PROMETHEUS)
            render_prometheus(&b, &r);
        else
            render_json(&b, &r);
    }
    report_free(&r);
    if (rc == RK_OK && b.oom)
        rc = RK_ENOMEM;
    if (rc != RK_OK) {
        free(b.p);
        return rk__fail(rc, "rk_metrics_render: out of memory");
    }
    if (b.p == NULL && (b.p = calloc(1, 1)) == NULL)
        return rk__fail(RK_ENOMEM, "rk_metrics_render");
    *out = b.p;
    if (len)
        *len = b.len;
    return RK_OK;
}
