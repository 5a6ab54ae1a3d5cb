/*
 * tools/ringkernel/main.c - the `ringkernel` command: dispatch to the
 * subcommands, top-level help, and the helpers they share.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *what;
} commands[] = {
    { "info", cli_info, "backends, devices, GPU monitor, build and version" },
    { "demo", cli_demo,
        "stream sensor readings through the anomaly-detection pipeline" },
    { "bench", cli_bench,
        "PageRank sweep and real-time anomaly benchmark (table, JSON, PNG)" },
    { "top", cli_top, "live view of a running process's kernels" },
    { "pagerank", cli_pagerank,
        "PageRank of a SNAP edge list by ring kernels" },
};

static void
usage(FILE *f)
{
    fprintf(f,
        "usage: ringkernel [--version] [--help] COMMAND [ARGS]\n\n"
        "commands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(*commands); i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].what);
    fprintf(f,
        "\n`ringkernel COMMAND --help` describes each one.\n"
        "exit status: 0 ok, 1 a run or check failed, 2 bad command line,\n"
        "3 something asked for is not available here (backend, endpoint).\n");
}

int
main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0
        || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("ringkernel %s\n", rk_version());
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(*commands); i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "ringkernel: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return CLI_USAGE;
}

/* ------------------------------------------------------------ options */

int
cli_opt_next(cli_opts *p, int argc, char **argv, int *rc)
{
    if (p->last == 0)
        optind = 1; /* the first call: argv is a new command line */
    p->last = getopt_long(argc, argv, "h", p->opts, NULL);
    switch (p->last) {
    case -1:
        break;
    case 'h':
        p->help(stdout);
        *rc = CLI_OK;
        return 0;
    case '?':
    case ':':
        p->help(stderr);
        *rc = CLI_USAGE;
        return 0;
    default:
        return p->last;
    }
    if (!p->operands && optind < argc) {
        fprintf(stderr, "ringkernel %s: unexpected argument '%s'\n", p->sub,
            argv[optind]);
        p->help(stderr);
        *rc = CLI_USAGE;
        return 0;
    }
    *rc = CLI_GO_ON;
    return 0;
}

int
cli_opt_bad(const cli_opts *p, const char *wants)
{
    const char *name = "?";

    for (const struct option *o = p->opts; o->name != NULL; o++)
        if (o->val == p->last)
            name = o->name;
    fprintf(stderr, "ringkernel %s: bad --%s '%s'%s%s%s\n", p->sub, name,
        optarg != NULL ? optarg : "", wants ? " (wants " : "",
        wants ? wants : "", wants ? ")" : "");
    return CLI_USAGE;
}

/* ------------------------------------------------------------ helpers */

bool
cli_parse_count(const char *s, uint64_t *out)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (end == s || errno || !(v > 0))
        return false;
    switch (*end) {
    case 'k':
    case 'K':
        v *= 1e3, end++;
        break;
    case 'm':
    case 'M':
        v *= 1e6, end++;
        break;
    case 'g':
    case 'G':
        v *= 1e9, end++;
        break;
    default:
        break;
    }
    if (*end != '\0' || v >= 1.8e19 || v < 1)
        return false;
    *out = (uint64_t)llround(v);
    return true;
}

bool
cli_parse_seconds(const char *s, double *out)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (end == s || *end != '\0' || errno || !(v > 0) || v > 86400 * 365)
        return false;
    *out = v;
    return true;
}

void
cli_report_error(const char *sub, const char *what, int rc)
{
    const char *d = rk_errdetail();

    fprintf(stderr, "ringkernel %s: %s: %s%s%s%s\n", sub, what,
        rk_strerror(rc), *d ? " (" : "", d, *d ? ")" : "");
}

void
cli_print_kernel_table(
    FILE *f, rk_runtime *rt, const char *const *ids, size_t n)
{
    fprintf(f, "%-10s %-11s %10s %10s %7s %6s %10s %10s %8s %8s %12s\n",
        "kernel", "state", "processed", "sent", "dropped", "errors",
        "queue hwm", "restarts", "p50 ns", "p99 ns", "msg/s");
    for (size_t i = 0; i < n; i++) {
        rk_kernel_stats s;
        if (rk_kernel_stats_get(rt, ids[i], &s) != RK_OK)
            continue;
        fprintf(f,
            "%-10s %-11s %10" PRIu64 " %10" PRIu64 " %7" PRIu64 " %6" PRIu64
            " %10" PRIu64 " %10" PRIu64 " %8" PRIu64 " %8" PRIu64 " %12.0f\n",
            ids[i], rk_kernel_state_name(s.state), s.processed, s.sent,
            s.dropped, s.errors, s.queue_high_water, s.restarts,
            s.latency_p50_ns, s.latency_p99_ns, s.throughput);
    }
}
