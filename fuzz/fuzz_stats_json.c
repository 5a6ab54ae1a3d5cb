/*
 * libFuzzer: the telemetry formatters (rk_stats_format_json/_text) on a
 * snapshot built from hostile bytes: a label of up to RK_STATS_LABEL_MAX
 * bytes with or without a NUL (a kernel id), counter and latency names
 * with any bytes (NUL-terminated slices of the input: topic and counter
 * names), any values. The runtime's stats writer is this formatter fed
 * with a kernel snapshot, so this covers it without a runtime. The full
 * output must be valid JSON (a strict parser, tests/support/json_check.h)
 * of the documented shape; a truncated write must be the NUL-terminated
 * prefix of it with RK_ETOOBIG; the text form must not crash.
 */
#include <stdlib.h>
#include <string.h>

#include "../tests/support/json_check.h"
#include "fuzz_support.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    struct fz_in in = { data, size };
    rk_stat_desc descs[RK_STATS_MAX_COUNTERS + RK_STATS_MAX_LATENCIES];
    char names[RK_STATS_MAX_COUNTERS + RK_STATS_MAX_LATENCIES][48];
    rk_stats s;
    size_t nd = 0, len = 0, tlen = 0, cut;
    unsigned nc, nl;
    char *full, *part;
    int rc;

    rk_stats_init(&s, NULL, 0);
    fz_bytes(&in, s.label, sizeof(s.label)); /* NUL or not: as it comes */
    fz_bytes(&in, &s.start_ns, sizeof(s.start_ns));
    fz_bytes(&in, &s.taken_ns, sizeof(s.taken_ns));
    nc = fz_byte(&in) % (RK_STATS_MAX_COUNTERS + 1);
    nl = fz_byte(&in) % (RK_STATS_MAX_LATENCIES + 1);
    for (unsigned i = 0; i < nc + nl; i++, nd++) {
        size_t n = fz_byte(&in) % sizeof(names[0]);

        fz_bytes(&in, names[nd], n);
        names[nd][n] = '\0';
        descs[nd] = (rk_stat_desc) { names[nd], "fuzzed",
            (rk_stat_kind)(fz_byte(&in) & 1),
            (rk_stat_unit)(fz_byte(&in) % 6) };
        if (i < nc) {
            uint64_t v;
            fz_bytes(&in, &v, sizeof(v));
            if (rk_stats_add_value(&s, &descs[nd], v) != RK_OK)
                abort();
        } else {
            rk_latency_summary l;
            fz_bytes(&in, &l, sizeof(l));
            if (rk_stats_add_summary(&s, &descs[nd], &l) != RK_OK)
                abort();
        }
    }
    if (rk_stats_format_json(&s, NULL, 0, &len) != RK_OK)
        abort();
    full = malloc(len + 1);
    if (rk_stats_format_json(&s, full, len + 1, &tlen) != RK_OK || tlen != len
        || strlen(full) != len)
        abort();
    if (!json_valid(full, len) || strncmp(full, "{\"label\":\"", 10) != 0
        || strstr(full, "\"uptime_ns\":") == NULL
        || strstr(full, ",\"counters\":{") == NULL
        || strstr(full, "},\"latency\":{") == NULL)
        abort();
    cut = len ? fz_byte(&in) % (len + 1) : 0;
    part = malloc(cut + 1);
    rc = rk_stats_format_json(&s, part, cut + 1, &tlen);
    if (tlen != len || (cut < len && rc != RK_ETOOBIG)
        || (cut == len && rc != RK_OK) || strlen(part) != cut
        || memcmp(part, full, cut) != 0)
        abort();
    free(part);
    free(full);
    if (rk_stats_format_text(&s, NULL, 0, &len) != RK_OK)
        abort();
    full = malloc(len + 1);
    if (rk_stats_format_text(&s, full, len + 1, NULL) != RK_OK)
        abort();
    free(full);
    return 0;
}
