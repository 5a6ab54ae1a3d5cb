/*
 * bench/bench.h - helpers shared by the benchmark programs.
 *
 * Every result is one JSON object on one line of stdout with at least the
 * keys suite, name, impl, value and unit, so results can be collected with
 * `make bench | jq`. Progress and commentary go to stderr.
 */
#ifndef RK_BENCH_H
#define RK_BENCH_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline uint64_t
bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Prints one result line. extra is NULL or a fragment of further JSON
 * members without braces, e.g. "\"threads\":2". */
static inline void
bench_emit(const char *suite, const char *name, const char *impl, double value,
    const char *unit, const char *extra)
{
    printf("{\"suite\":\"%s\",\"name\":\"%s\",\"impl\":\"%s\",\"value\":%.3f,"
           "\"unit\":\"%s\"%s%s}\n",
        suite, name, impl, value, unit, extra ? "," : "", extra ? extra : "");
    fflush(stdout);
}

/* Prints a "skipped" row for name with why (quotes and control
 * characters replaced, so the line stays JSON). */
static inline void
bench_skip(const char *suite, const char *name, const char *why)
{
    char r[200], extra[240];
    snprintf(r, sizeof(r), "%s", why);
    for (char *p = r; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
            *p = '\'';
    snprintf(extra, sizeof(extra), "\"reason\":\"%s\"", r);
    bench_emit(suite, name, "skipped", 0, "", extra);
}

static int
bench_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Sorts v in place and returns the p-th percentile (0 < p < 100). */
static inline uint64_t
bench_percentile(uint64_t *v, size_t n, double p)
{
    qsort(v, n, sizeof(*v), bench_cmp_u64);
    size_t i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

/* Sorts v in place (n is small: paired rounds) and returns its median. */
static inline double
bench_median(double *v, size_t n)
{
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Iteration scale: RK_BENCH_SCALE=0.1 makes a quick smoke run. */
static inline double
bench_scale(void)
{
    const char *s = getenv("RK_BENCH_SCALE");
    double v = s ? atof(s) : 1.0;
    return v > 0 ? v : 1.0;
}

#endif /* RK_BENCH_H */
