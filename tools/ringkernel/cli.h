/*
 * tools/ringkernel/cli.h - what the `ringkernel` command's files share.
 *
 * The command uses only the public API (include/ringkernel/). Each
 * subcommand is one function taking its own argv (argv[0] is the
 * subcommand's name) and returning the process exit status below.
 */
#ifndef RK_CLI_H
#define RK_CLI_H

#include <getopt.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ringkernel/ringkernel.h"

/* Exit statuses, the same for every subcommand (docs/cli.md). */
enum {
    CLI_OK = 0,         /* did what was asked; every check held */
    CLI_FAILED = 1,     /* ran, but a run or a check failed */
    CLI_USAGE = 2,      /* bad command line */
    CLI_UNAVAILABLE = 3 /* asked for something this machine or build lacks
                           (a backend, the metrics endpoint) */
};

int cli_info(int argc, char **argv);
int cli_demo(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_top(int argc, char **argv);
int cli_pagerank(int argc, char **argv);

/* ------------------------------------------------------------ backends */

/*
 * Resolves the --backend argument of subcommand sub ("cpu", "cuda",
 * "auto"; NULL is "auto"): on CLI_OK *use_cuda says whether the command's
 * device kernels run (cuda usable here, and "cuda" or "auto" asked).
 * "auto" where cuda is not usable gives CLI_OK, *use_cuda false, the
 * probe's reason in why and, when note is not NULL, "cuda: not usable
 * (<reason>); running on cpu" on note. "cuda" there gives CLI_UNAVAILABLE
 * and an unknown name CLI_USAGE, each with its sentence in why and on
 * stderr ("ringkernel SUB: backend 'cuda' is not available: <reason>").
 */
int cli_backend_pick(const char *sub, const char *name, FILE *note,
    bool *use_cuda, char *why, size_t whylen);

/* ---------------------------------------------------- the cuda backend */

/* The CUDA device the backend uses (RK_CUDA_DEVICE, default 0). */
typedef struct cli_cuda_dev {
    char name[128]; /* the device's name */
    bool simulated; /* the test-only stand-in driver (device "fake"): its
                       figures are CPU threads, never GPU figures */
    int ordinal;    /* its ordinal */
    uint32_t sms;   /* multiprocessors (at least 1) */
} cli_cuda_dev;

/* What the stand-in's figures must say wherever they are printed. */
#define CLI_CUDA_SIM_NOTE                                                     \
    "cuda_sim: the test-only stand-in driver ran the device code on CPU "     \
    "threads; these are not GPU figures"

/* True when the cuda backend could run here (driver, device, NVRTC);
 * otherwise false with the probe's reason in why. */
bool cli_cuda_usable(char *why, size_t whylen);
/* Fills *d for the backend's device; an error (detail in rk_errdetail())
 * when there is none. */
int cli_cuda_device(cli_cuda_dev *d);
/* Label of a cuda result: "cuda", or "cuda_sim" under the stand-in. */
const char *cli_cuda_label(bool simulated);
/* A device buffer (rk_buffer on CUDA device `ordinal`) of count elements
 * of t, filled from host (NULL: left for the kernel to write); *dev is its
 * device address. The caller destroys *b (also on failure), never while a
 * kernel that uses it runs. */
int cli_device_array(rk_buffer **b, rk_dtype t, size_t count, const void *host,
    int ordinal, uint64_t *dev);
/* The smallest power of two >= v. */
uint32_t cli_pow2_at_least(uint32_t v);

/* ------------------------------------------------------------ options */

/*
 * A subcommand's command line, parsed the same way everywhere: long
 * options only (getopt_long), plus -h and --help, which print the help to
 * stdout. The subcommand handles its own options in a loop:
 *
 *     cli_opts p = { "demo", opts, help, 0 };
 *     while ((c = cli_opt_next(&p, argc, argv, &rc)) != 0) {
 *         switch (c) { case 'd': ok = ...; break; ... }
 *         if (!ok)
 *             return cli_opt_bad(&p, NULL);
 *     }
 *     if (rc != CLI_GO_ON)
 *         return rc;
 *
 * after which argv[optind..] are its operands.
 */
#define CLI_GO_ON   (-1) /* not an exit status: the command line was good */
#define CLI_STR(x)  CLI_STR_(x) /* a macro's value as a string literal */
#define CLI_STR_(x) #x

typedef struct cli_opts {
    const char *sub;           /* the subcommand's name, for messages */
    const struct option *opts; /* getopt_long's table, "help" -> 'h' */
    void (*help)(FILE *f);     /* prints the subcommand's usage */
    int operands;              /* 0: none taken, else any number */
    int last;                  /* the option cli_opt_next returned last */
} cli_opts;

/* The next option's character for the caller to handle (optarg holds its
 * value), or 0 when none is left: then *rc is CLI_GO_ON, or the exit
 * status to return (CLI_OK after --help; CLI_USAGE, with the usage on
 * stderr, for an unknown option or an operand where none is taken). */
int cli_opt_next(cli_opts *p, int argc, char **argv, int *rc);

/* Reports the bad value of the option cli_opt_next returned last
 * ("ringkernel SUB: bad --NAME 'VALUE'", then " (wants WANTS)" when wants
 * is not NULL) and returns CLI_USAGE. */
int cli_opt_bad(const cli_opts *p, const char *wants);

/* ------------------------------------------------------------ helpers */

/* Parses a positive number with an optional k/M/G suffix (x1000). */
bool cli_parse_count(const char *s, uint64_t *out);
/* Parses seconds ("2", "0.5"); > 0. */
bool cli_parse_seconds(const char *s, double *out);

/* A tiny deterministic PRNG shared by the workloads. */
static inline uint64_t
cli_splitmix64(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));

    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* A uniform double in (0, 1]. */
static inline double
cli_uniform(uint64_t *s)
{
    return ((double)(cli_splitmix64(s) >> 11) + 1.0) * 0x1.0p-53;
}

/* Prints "ringkernel SUB: <what>: <rk_strerror> (<detail>)" to stderr. */
void cli_report_error(const char *sub, const char *what, int rc);

/* Prints the per-kernel telemetry table for ids (n of them). */
void cli_print_kernel_table(
    FILE *f, rk_runtime *rt, const char *const *ids, size_t n);

/* ---------------------------------------------------- anomaly pipeline */

/* Most sensors a stream may have: each keeps a 64-reading window (about
 * 540 bytes), so this bounds the detector's state near 54 MB. */
#define CLI_MAX_SENSORS 100000

/* One run of the streaming anomaly-detection pipeline (anomaly.c). */
typedef struct cli_anomaly_cfg {
    uint32_t sensors;  /* > 0 */
    uint64_t readings; /* stop after this many (0: until *stop) */
    atomic_int *stop;  /* set (any thread, or a signal handler) to end
                          the stream early; relaxed: it carries no data */
    uint64_t seed;
    double rate; /* readings per second (0: as fast as the pipeline takes
                    them); paced in bursts of CLI_PACE_BURST */
    const char *metrics_addr; /* serve metrics while running, or NULL */
    /* Called about every progress_ms while the stream runs (may be NULL). */
    void (*progress)(
        void *arg, uint64_t readings, uint64_t alerts, double elapsed_s);
    void *progress_arg;
    uint32_t progress_ms;
    bool table; /* print the per-kernel telemetry table at the end */
    /* The detector stage on the cuda backend (anomaly_dev.h); the other
     * stages stay CPU kernels, routed through the runtime. */
    bool cuda;
    /* With readings > 0: readings entries the run fills with each
     * reading's CLI_VERDICT_* (caller-owned, zeroed by the caller), or
     * NULL. */
    uint8_t *verdicts;
} cli_anomaly_cfg;

#define CLI_VERDICT_NONE    0 /* no verdict reached the host */
#define CLI_VERDICT_NORMAL  1
#define CLI_VERDICT_ANOMALY 2

/* The cuda detector's batches (anomaly_dev.h): what moving them between
 * host and device cost against deciding them. h2d, compute and d2h are
 * the device's clock (%globaltimer; CLOCK_MONOTONIC in the host build the
 * stand-in runs), stage the host's: per batch, from its newest reading's
 * generation to its verdict record's arrival at the host (the relay and
 * queues are stage minus the device's parts). */
typedef struct cli_anomaly_xfer {
    uint64_t batches, readings;   /* batches decided; readings in them */
    uint64_t h2d_ns, compute_ns;  /* sums over the batches */
    uint64_t d2h_ns, d2h_batches; /* d2h is known for all but the last */
    uint64_t stage_ns;            /* sum over the batches */
    uint64_t bad;                 /* records or alerts that fit no reading */
    rk_latency_summary stage;     /* per batch */
} cli_anomaly_xfer;

typedef struct cli_anomaly_result {
    uint64_t readings, injected, alerts, true_alerts;
    double elapsed_s;
    /* reading generated -> verdict: the CPU detector records each
     * reading as it decides it; the cuda run, each batch's oldest reading
     * when the batch's verdicts reach the host */
    rk_latency_summary verdict;
    rk_latency_summary alert;   /* reading generated -> alert at the sink */
    rk_histogram *verdict_hist; /* owned by the result; may be NULL */
    uint16_t metrics_port;
    /* The alerts' (reading, z-score bits) mixed, independent of arrival
     * order: two runs with the same verdicts and z-scores agree. */
    uint64_t zhash;
    cli_cuda_dev dev;      /* cuda: the device */
    uint32_t threads;      /* cuda: threads of the detector's one block */
    cli_anomaly_xfer xfer; /* cuda only */
} cli_anomaly_result;

/* Runs the pipeline. On failure the error's detail is in rk_errdetail();
 * cli_anomaly_result_free either way. */
int cli_anomaly_run(const cli_anomaly_cfg *cfg, cli_anomaly_result *out);
void cli_anomaly_result_free(cli_anomaly_result *r);

/* The detector's cuda side (anomaly_cuda.c): fills c (backend, the
 * embedded device source, one block of *threads threads, sizes) for a
 * stream of `sensors` sensors, finds the device (*dev) and makes the
 * windows' device buffer (*win, device address *win_dev; the caller
 * destroys it after the runtime that ran the kernel). */
int cli_anomaly_cuda_config(uint32_t sensors, rk_kernel_config *c,
    cli_cuda_dev *dev, uint32_t *threads, rk_buffer **win, uint64_t *win_dev);
/* Sends the detector `id` its init (the windows): after its launch,
 * before the first reading. */
int cli_anomaly_cuda_init(
    rk_runtime *rt, const char *id, uint64_t win_dev, uint32_t sensors);

/* A cuda run's batches as means: readings a batch, then ns a batch of
 * each part; relay is the stage less the device's parts (the host relay's
 * two hops, the device's pickup and the queues). share_stage is what is
 * not compute in the stage ((stage - compute) / stage), share_device the
 * lanes' part of the device's time ((h2d + d2h) / (h2d + compute + d2h)):
 * the seeds' "transfer overhead" measured both ways. */
typedef struct cli_xfer_means {
    double per_batch, h2d, compute, d2h, stage, relay;
    double share_stage, share_device;
} cli_xfer_means;
void cli_anomaly_xfer_means(const cli_anomaly_xfer *x, cli_xfer_means *m);
/* Prints a cuda run's transfer against compute (a few lines, the
 * stand-in's note included). */
void cli_anomaly_xfer_print(FILE *f, const cli_anomaly_result *r);

/* The same stream processed in fixed windows on the calling thread. */
typedef struct cli_batch_result {
    uint64_t readings, alerts, true_alerts, injected;
    double elapsed_s;
    rk_latency_summary latency; /* reading generated -> its window done */
    rk_histogram *hist;
} cli_batch_result;

int cli_anomaly_batch(uint32_t sensors, uint64_t readings, uint64_t seed,
    uint32_t window, double rate, cli_batch_result *out);

/* Paced streams generate this many readings at a time, then sleep until
 * the next burst is due. */
#define CLI_PACE_BURST 32

/* ------------------------------------------------------------ pagerank */

/* Edges ahead that an iteration prefetches contrib for; in_src has this
 * many zeroed slots of padding past its m edges. */
#define CLI_PR_PREFETCH 16

typedef struct cli_graph {
    uint32_t n;       /* nodes */
    uint64_t m;       /* edges */
    uint64_t *in_off; /* n + 1 offsets into in_src (CSC by destination) */
    uint32_t *in_src;
    uint32_t *outdeg;
    uint64_t *orig; /* node i's id in the file (NULL: synthetic, id i) */
} cli_graph;

/* Reads a SNAP edge list (# comments, "src dst" per line); node ids are
 * compacted to 0..n-1 in order of first appearance. */
int cli_graph_load(const char *path, cli_graph *g, char *why, size_t wl);
/* A power-law graph with m edges on m / 10 nodes (at least 16), fixed
 * seed. */
int cli_graph_synthetic(uint64_t m, uint64_t seed, cli_graph *g);
void cli_graph_free(cli_graph *g);
/* malloc for big arrays: 2 MiB aligned and advised for huge pages from
 * 2 MiB up, zeroed if asked; the caller frees it with free(). */
void *cli_big_alloc(size_t bytes, bool zero);

typedef struct cli_pr_result {
    double *rank; /* n ranks, owned by the result */
    uint32_t iterations;
    double residual; /* L1 change of the last iteration */
    double iter_s;   /* total time in iterations */
    double setup_s;  /* kernels created and launched */
} cli_pr_result;

/* PageRank by `parts` ring kernels (1: one actor; > 1: partition actors
 * that report to a reducer kernel kernel-to-kernel). max_iter iterations or
 * until the L1 change is below tol (tol 0: exactly max_iter). */
int cli_pagerank_actors(const cli_graph *g, uint32_t parts, double damping,
    double tol, uint32_t max_iter, cli_pr_result *out);
/* The plain power iteration on the calling thread, same formula. */
void cli_pagerank_reference(const cli_graph *g, double damping, double tol,
    uint32_t max_iter, cli_pr_result *out);
void cli_pr_result_free(cli_pr_result *r);
/* Range bounds lo[0..parts] with about (edges + nodes) / parts work each. */
void cli_pr_split(const cli_graph *g, uint32_t parts, uint32_t *lo);
/* rank = 1/n, contrib = rank/outdeg (0 if dangling); *dang = their D. */
void cli_pr_init_ranks(
    const cli_graph *g, double *rank, double *contrib, double *dang);

/* One per-iteration time over a run's iterations. */
typedef struct cli_pr_iter_times {
    double median_s, max_s;
    uint32_t max_at; /* the slowest iteration, from 0 */
} cli_pr_iter_times;

/* The cuda configuration (pr_cuda.c, device kernel pr_dev.h). */
typedef struct cli_pr_cuda_info {
    char device[128]; /* the CUDA device's name */
    bool simulated;   /* the test-only stand-in driver ran the device code
                         on CPU threads: never a GPU figure */
    uint32_t blocks;  /* actors (thread blocks) = node ranges */
    uint32_t threads; /* threads per block */
    uint32_t lanes;   /* merge-path work shares per range */
    /* Per iteration, from the blocks' own clocks (rk_dev_now_ns:
     * %globaltimer on a GPU, the host's clock under the stand-in): dev
     * from the first block's start to the last block's end, busy the
     * slowest block's own time; host: the host's round, first step sent
     * to last reply read (adds the relay). */
    cli_pr_iter_times dev, busy, host;
} cli_pr_cuda_info;

/* PageRank by the device kernel of pr_dev.h on the cuda backend: the
 * graph and ranks in device memory (rk_buffer), one actor per thread
 * block, the host adding the blocks' partial sums each iteration.
 * setup_s counts the upload and the kernel's compile and launch. On
 * failure the error's detail is in rk_errdetail(). */
int cli_pagerank_cuda(const cli_graph *g, double damping, double tol,
    uint32_t max_iter, cli_pr_cuda_info *info, cli_pr_result *out);

/* ------------------------------------------------------------------ top */

#define CLI_TOP_MAX_KERNELS 256

/* One kernel's row in `ringkernel top`, as read from /metrics. */
typedef struct cli_top_row {
    char id[RK_ID_MAX + 1];
    char state[32];
    double processed, dropped, depth, hwm, p50, p99, restarts;
} cli_top_row;

typedef struct cli_top_frame {
    cli_top_row k[CLI_TOP_MAX_KERNELS];
    size_t n;
    uint64_t taken_ns;
} cli_top_frame;

/* Reads the ringkernel_* series of a /metrics body (modified in place)
 * into f, one row per kernel label (at most CLI_TOP_MAX_KERNELS). */
void cli_prom_parse(char *body, cli_top_frame *f);

/* Parses a SNAP edge list from f (name is used in messages); see
 * cli_graph_load. */
int cli_graph_parse(
    FILE *f, const char *name, cli_graph *g, char *why, size_t wl);

#endif /* RK_CLI_H */
