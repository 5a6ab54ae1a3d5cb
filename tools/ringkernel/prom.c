/*
 * tools/ringkernel/prom.c - the reader `ringkernel top` uses for the
 * Prometheus text it scrapes: only the ringkernel_* series with a kernel
 * label, into one row per kernel. The text comes from a socket, so this is
 * a decoder of external bytes and has a fuzz target
 * (fuzz/fuzz_cli_parsers.c): it must not crash on any input.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The value of label key in a "{k=\"v\",...}" block, unescaped, into out. */
static bool
label(const char *labels, const char *key, char *out, size_t cap)
{
    size_t kl = strlen(key), o = 0;
    const char *p = labels;

    while ((p = strstr(p, key)) != NULL) {
        if ((p == labels || p[-1] == '{' || p[-1] == ',')
            && strncmp(p + kl, "=\"", 2) == 0)
            break;
        p += kl;
    }
    if (p == NULL)
        return false;
    for (p += kl + 2; *p && *p != '"' && o + 1 < cap; p++) {
        char c = *p;
        if (c == '\\' && p[1]) {
            c = *++p == 'n' ? '\n' : *p;
        }
        out[o++] = c;
    }
    out[o] = '\0';
    return true;
}

static cli_top_row *
find_row(cli_top_frame *f, const char *id)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->k[i].id, id) == 0)
            return &f->k[i];
    if (f->n == CLI_TOP_MAX_KERNELS)
        return NULL;
    cli_top_row *r = &f->k[f->n++];
    memset(r, 0, sizeof(*r));
    snprintf(r->id, sizeof(r->id), "%s", id);
    snprintf(r->state, sizeof(r->state), "?");
    return r;
}

void
cli_prom_parse(char *body, cli_top_frame *f)
{
    char *save = NULL;

    f->n = 0;
    for (char *line = strtok_r(body, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char name[96], id[RK_ID_MAX + 1], extra[32];
        const char *brace = strchr(line, '{'), *close;
        cli_top_row *r;
        double v;
        if (line[0] == '#' || brace == NULL
            || (close = strrchr(line, '}')) == NULL
            || (size_t)(brace - line) >= sizeof(name))
            continue;
        memcpy(name, line, (size_t)(brace - line));
        name[brace - line] = '\0';
        if (strncmp(name, "ringkernel_", 11) != 0
            || !label(brace, "kernel", id, sizeof(id))
            || (r = find_row(f, id)) == NULL)
            continue;
        v = strtod(close + 1, NULL);
        if (strcmp(name, "ringkernel_messages_processed_total") == 0)
            r->processed = v;
        else if (strcmp(name, "ringkernel_messages_dropped_total") == 0)
            r->dropped = v;
        else if (strcmp(name, "ringkernel_queue_depth") == 0)
            r->depth = v;
        else if (strcmp(name, "ringkernel_queue_high_water") == 0)
            r->hwm = v;
        else if (strcmp(name, "ringkernel_kernel_restarts_total") == 0)
            r->restarts = v;
        else if (strcmp(name, "ringkernel_kernel_state") == 0 && v == 1
            && label(brace, "state", extra, sizeof(extra)))
            snprintf(r->state, sizeof(r->state), "%s", extra);
        else if (strcmp(name, "ringkernel_message_latency_seconds") == 0
            && label(brace, "quantile", extra, sizeof(extra))) {
            if (strcmp(extra, "0.5") == 0)
                r->p50 = v;
            else if (strcmp(extra, "0.99") == 0)
                r->p99 = v;
        }
    }
}
