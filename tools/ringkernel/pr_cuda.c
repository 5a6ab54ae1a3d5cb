/*
 * tools/ringkernel/pr_cuda.c - PageRank on the cuda backend: the device
 * kernel of pr_dev.h, one actor per thread block, driven from the host.
 *
 * The graph (CSC, graph.c) and the rank arrays go to device memory
 * through the library's buffers (rk_buffer on the CUDA device) before the
 * kernel is launched, and the ranks come back after it has exited:
 * docs/cuda-robustness.md warns that freeing or synchronous copies while a
 * persistent kernel is resident can block, so nothing here copies or
 * frees while it runs. Each iteration the host sends one step per node
 * range (cli_pr_split, as the CPU partitions), reads one reply per range,
 * adds them in range order and sends the next: the host is the reducer.
 * Each block splits its range over LANES merge-path shares (pr_dev.h) and
 * stamps its reply with its start and end on its own clock; the host logs
 * per iteration the device's span (first start to last end), the slowest
 * block's own time and its own round, and reports median and slowest.
 *
 * Ownership: the runtime, the buffers and the kernel are this file's and
 * live for one call; out->rank is the caller's (cli_pr_result_free).
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define CLI_PRD_LAYOUT_ONLY
#include "pr_dev.h"

_Static_assert(sizeof(cli_prd_step) == 96, "step layout");
_Static_assert(sizeof(cli_prd_part) == 48, "part layout");

#define TIMEOUT_NS (120 * INT64_C(1000000000))
/* Threads per block: 16 warps, so the gathers have more loads in flight
 * than 8 warps give (nvcc for sm_90 gives the kernel 72 registers: 512
 * threads fit an SM's 64 K, 1024 would not). Not yet measured on a GPU. */
#define THREADS    512u
#define LANES      THREADS /* merge-path shares: one per thread */
#define MAX_BLOCKS 1024u

/* pr_dev.h's text (generated from it at build time: embed.cmake). */
extern const char *const cli_pr_dev_source;

/* The cpu backend's twin of the kernel, which the definition must have;
 * this command registers the kernel on "cuda" only, so it never runs. */
static int
not_on_cpu(rk_ctx *ctx, const rk_msg_view *m)
{
    (void)ctx;
    (void)m;
    return RK_ENOTSUP;
}

static int
by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median and the slowest of v[0..n) (seconds); v is reordered. */
static cli_pr_iter_times
iter_times(double *v, uint32_t n)
{
    cli_pr_iter_times r = { 0, 0, 0 };

    if (n == 0)
        return r;
    for (uint32_t i = 0; i < n; i++) {
        if (v[i] > r.max_s) {
            r.max_s = v[i];
            r.max_at = i;
        }
    }
    qsort(v, n, sizeof(*v), by_value);
    r.median_s = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    return r;
}

/* Per-iteration times, seconds, one array each (cli_pr_cuda_info). */
typedef struct iter_log {
    double *dev, *busy, *host;
} iter_log;

/* The blocks' clock readings of one iteration's replies into the log. */
static void
log_iteration(iter_log *lg, uint32_t it, const cli_prd_part *got,
    uint32_t parts, uint64_t host_ns)
{
    uint64_t first = UINT64_MAX, last = 0, busy = 0;

    for (uint32_t p = 0; p < parts; p++) {
        uint64_t own = got[p].t_end >= got[p].t_start
            ? got[p].t_end - got[p].t_start
            : 0;
        first = got[p].t_start < first ? got[p].t_start : first;
        last = got[p].t_end > last ? got[p].t_end : last;
        busy = own > busy ? own : busy;
    }
    lg->dev[it] = last >= first ? (double)(last - first) / 1e9 : 0;
    lg->busy[it] = (double)busy / 1e9;
    lg->host[it] = (double)host_ns / 1e9;
}

/* The iterations: one step per range, replies added in range order. */
static int
iterate(rk_runtime *rt, rk_kernel k, cli_prd_step *proto,
    const uint64_t dev_rank[2], const uint64_t dev_contrib[2],
    const uint32_t *lo, uint32_t parts, double tol, uint32_t max_iter,
    double dangling, iter_log *lg, cli_pr_result *out)
{
    cli_prd_part *got = calloc(parts, sizeof(*got));
    uint8_t *seen = calloc(parts, 1);
    int rc = got && seen ? RK_OK : RK_ENOMEM;

    for (uint32_t it = 0; it < max_iter && rc == RK_OK; it++) {
        unsigned cur = it & 1, nxt = cur ^ 1;
        double delta = 0, dang = 0;
        uint64_t t0 = rk_now_ns();
        memset(seen, 0, parts);
        for (uint32_t p = 0; p < parts && rc == RK_OK; p++) {
            cli_prd_step st = *proto;
            st.rank = dev_rank[cur];
            st.contrib = dev_contrib[cur];
            st.next_rank = dev_rank[nxt];
            st.next_contrib = dev_contrib[nxt];
            st.dangling = dangling;
            st.lo = lo[p];
            st.hi = lo[p + 1];
            st.part = p;
            st.iter = it;
            rc = rk_send(
                rt, k, CLI_PRD_STEP_TYPE, &st, sizeof(st), 128, TIMEOUT_NS);
        }
        for (uint32_t i = 0; i < parts && rc == RK_OK; i++) {
            rk_msg_header h;
            cli_prd_part r;
            size_t len = 0;
            rc = rk_recv(rt, k, &h, &r, sizeof(r), &len, TIMEOUT_NS);
            if (rc != RK_OK)
                break;
            if (len != sizeof(r) || h.type_id != CLI_PRD_PART_TYPE
                || r.iter != it || r.part >= parts || seen[r.part]
                || r.lo != lo[r.part] || r.hi != lo[r.part + 1]) {
                rc = RK_EDECODE; /* a reply that answers no step sent */
                break;
            }
            seen[r.part] = 1;
            got[r.part] = r;
        }
        if (rc != RK_OK)
            break;
        log_iteration(lg, it, got, parts, rk_now_ns() - t0);
        for (uint32_t p = 0; p < parts; p++) {
            delta += got[p].delta;
            dang += got[p].dangling;
        }
        dangling = dang;
        out->iterations = it + 1;
        out->residual = delta;
        if (tol > 0 && delta < tol)
            break;
    }
    free(got);
    free(seen);
    return rc;
}

int
cli_pagerank_cuda(const cli_graph *g, double damping, double tol,
    uint32_t max_iter, cli_pr_cuda_info *info, cli_pr_result *out)
{
    rk_runtime_config rcfg = { .no_static_kernels = true, .backend = "cuda" };
    rk_kernel_def def = { .id = "pr.gpu", .handler = not_on_cpu };
    rk_buffer *off = NULL, *src = NULL, *deg = NULL, *rank[2] = { 0 },
              *contrib[2] = { 0 };
    uint64_t dev_rank[2] = { 0 }, dev_contrib[2] = { 0 };
    cli_prd_step proto = { .damping = damping, .n = g->n, .lanes = LANES };
    iter_log lg = { 0 };
    cli_cuda_dev gpu;
    rk_runtime *rt = NULL;
    double *h_rank = NULL, *h_contrib = NULL, dangling = 0;
    uint32_t *lo = NULL;
    int ordinal, rc;
    uint64_t t0 = rk_now_ns();
    rk_kernel k;

    memset(out, 0, sizeof(*out));
    memset(info, 0, sizeof(*info));
    if ((rc = cli_cuda_device(&gpu)) != RK_OK)
        goto out;
    ordinal = gpu.ordinal;
    snprintf(info->device, sizeof(info->device), "%s", gpu.name);
    info->simulated = gpu.simulated;
    /* One block per SM (always co-resident if the kernel fits at all),
     * never more blocks than nodes. */
    info->blocks = gpu.sms;
    if (info->blocks > MAX_BLOCKS)
        info->blocks = MAX_BLOCKS;
    if (info->blocks > g->n)
        info->blocks = g->n > 0 ? g->n : 1;
    info->threads = THREADS;
    info->lanes = LANES;

    lo = calloc((size_t)info->blocks + 1, sizeof(*lo));
    h_rank = cli_big_alloc(g->n * sizeof(double), true);
    h_contrib = cli_big_alloc(g->n * sizeof(double), true);
    lg.dev = calloc(max_iter ? max_iter : 1, sizeof(double));
    lg.busy = calloc(max_iter ? max_iter : 1, sizeof(double));
    lg.host = calloc(max_iter ? max_iter : 1, sizeof(double));
    if (lo == NULL || h_rank == NULL || h_contrib == NULL || lg.dev == NULL
        || lg.busy == NULL || lg.host == NULL) {
        rc = RK_ENOMEM;
        goto out;
    }
    cli_pr_split(g, info->blocks, lo);
    cli_pr_init_ranks(g, h_rank, h_contrib, &dangling);

    /* Upload: every copy happens before the kernel is launched. */
    if ((rc = cli_device_array(&off, RK_DTYPE_U64, (size_t)g->n + 1, g->in_off,
             ordinal, &proto.in_off))
            != RK_OK
        || (rc = cli_device_array(
                &src, RK_DTYPE_U32, g->m, g->in_src, ordinal, &proto.in_src))
            != RK_OK
        || (rc = cli_device_array(
                &deg, RK_DTYPE_U32, g->n, g->outdeg, ordinal, &proto.outdeg))
            != RK_OK
        || (rc = cli_device_array(
                &rank[0], RK_DTYPE_F64, g->n, h_rank, ordinal, &dev_rank[0]))
            != RK_OK
        || (rc = cli_device_array(&contrib[0], RK_DTYPE_F64, g->n, h_contrib,
                ordinal, &dev_contrib[0]))
            != RK_OK
        || (rc = cli_device_array(
                &rank[1], RK_DTYPE_F64, g->n, NULL, ordinal, &dev_rank[1]))
            != RK_OK
        || (rc = cli_device_array(&contrib[1], RK_DTYPE_F64, g->n, NULL,
                ordinal, &dev_contrib[1]))
            != RK_OK)
        goto out;

    def.config.backend = "cuda";
    def.config.device_source = cli_pr_dev_source;
    def.config.device_entry = "cli_prd_kernel";
    def.config.device_source_name = "pr_dev.h";
    def.config.grid_size = info->blocks;
    def.config.block_size = info->threads;
    /* The relay's batch, split over the blocks' lanes: two steps each. */
    def.config.batch
        = cli_pow2_at_least(2 * info->blocks < 64 ? 64 : 2 * info->blocks);
    def.config.input_capacity = cli_pow2_at_least(2 * info->blocks);
    def.config.output_capacity = cli_pow2_at_least(2 * info->blocks);
    def.config.max_payload = 128;
    if ((rc = rk_runtime_create(&rt, &rcfg)) != RK_OK
        || (rc = rk_runtime_register(rt, &def)) != RK_OK
        || (rc = rk_kernel_launch(rt, def.id)) != RK_OK
        || (rc = rk_kernel_activate(rt, def.id)) != RK_OK
        || (rc = rk_kernel_lookup(rt, def.id, &k)) != RK_OK)
        goto out;
    out->setup_s = (double)(rk_now_ns() - t0) / 1e9;

    t0 = rk_now_ns();
    rc = iterate(rt, k, &proto, dev_rank, dev_contrib, lo, info->blocks, tol,
        max_iter, dangling, &lg, out);
    out->iter_s = (double)(rk_now_ns() - t0) / 1e9;
    info->dev = iter_times(lg.dev, out->iterations);
    info->busy = iter_times(lg.busy, out->iterations);
    info->host = iter_times(lg.host, out->iterations);
    /* The kernel exits (and its stream is synchronised) here, before any
     * copy back or free. */
    rk_runtime_destroy(rt);
    rt = NULL;
    if (rc != RK_OK)
        goto out;
    /* The last step wrote rank[iterations & 1] on the device. */
    {
        rk_buffer *fin = rank[out->iterations & 1];
        if (out->iterations > 0
            && (rc = rk_buffer_mark_device_dirty(fin)) != RK_OK)
            goto out;
        if ((rc = rk_buffer_copy_to(fin, h_rank, g->n * sizeof(double)))
            != RK_OK)
            goto out;
        out->rank = h_rank;
        h_rank = NULL;
    }
out:
    rk_runtime_destroy(rt);
    rk_buffer_destroy(off);
    rk_buffer_destroy(src);
    rk_buffer_destroy(deg);
    for (int i = 0; i < 2; i++) {
        rk_buffer_destroy(rank[i]);
        rk_buffer_destroy(contrib[i]);
    }
    free(h_rank);
    free(h_contrib);
    free(lo);
    free(lg.dev);
    free(lg.busy);
    free(lg.host);
    return rc;
}
