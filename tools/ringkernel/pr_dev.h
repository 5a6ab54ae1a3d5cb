/*
 * tools/ringkernel/pr_dev.h - PageRank as a device ring kernel, written
 * once: this file compiles as host C (the tests, the stand-in driver) and
 * as CUDA under NVRTC or nvcc. The `ringkernel` command hands this file's
 * text (embedded at build time) to the cuda backend as the kernel's
 * device_source; the backend compiles it with NVRTC after
 * ringkernel/dev_kernel.h at launch.
 *
 * The kernel is partitioned across the grid: every thread block is one
 * actor, and the host splits the nodes into ranges. One iteration is one
 * fixed-layout message per range (cli_prd_step: the device addresses of
 * the graph and rank arrays, the range, the iteration and the dangling
 * rank D of the ranks it reads); whichever block takes it computes
 *
 *   next[v] = (1 - d) / n + d * (sum over u -> v of contrib[u] + D / n)
 *
 * for v in [lo, hi), writes next and next_contrib for that range only,
 * reduces the range's L1 change and dangling rank over the block in shared
 * memory, and replies with them (cli_prd_part) and the block's start and
 * end times (rk_dev_now_ns: %globaltimer on a GPU). The host adds the
 * replies in range order and sends the next iteration: the host is the
 * reducer, one message round per iteration through the backend's relay
 * (a device-side reducer needs grid barriers or device-memory K2K, which
 * the backend does not have yet).
 *
 * Work split inside a block: merge path. The range's rows (nodes) and its
 * in-edges form one merged sequence of nr + ne items (each edge, then
 * the end of its row); the step's `lanes` shares cut that sequence into
 * pieces of floor or ceil((nr + ne) / lanes) items, so a node with 100 K
 * in-edges is spread over every lane instead of running on one thread
 * while the others wait (merge-path SpMV, Merrill and Garland, SC'16).
 * cli_prd_path() finds where a share starts by binary search over in_off.
 * A lane adds its edges in CSC order; a row cut by share boundaries is
 * finished by the lane where it ends, which adds the earlier lanes' parts
 * (a segmented scan over the lanes in shared memory, a fixed tree) before
 * its own. Lanes are strided over the block's threads, so the same code
 * runs any number of lanes on any block size; the host build (one thread
 * a block) runs them one after another, phase by phase, and so tests the
 * very split and scan a GPU runs.
 *
 * Determinism and the 1e-12 check. Everything here is a fixed order: the
 * shares depend only on the range and `lanes`, the scan's tree only on
 * `lanes`, and no atomics are used, so a run repeats bit for bit. A row
 * inside one share sums in exactly the reference's order (adding the
 * zero carry of an empty part changes nothing), and with lanes = 1 the
 * whole result equals tools/ringkernel/pr.c's iterate_range. A row cut
 * into parts is the same non-negative terms c_i summed in another
 * association: each order is within (m_v - 1) u S_v of the exact sum
 * (u = 2^-53, m_v the row's in-degree, S_v = sum c_i), so one iteration
 * moves the rank by at most 2 d (m_v - 1) u S_v: about 2e-13 for the
 * sweep's heaviest node (10^5 in-edges of 10 M, S_v about 0.01), and only
 * rows cut by a share boundary (at most lanes - 1 per range) move at all.
 * Later iterations carry such a change on through contrib, damped by d
 * (< 1) in the L1 norm. That is the worst case; the rounding errors of a
 * long sum behave like a random walk (sqrt(m_v) u S_v, about 4e-16 for
 * that node), which is what test_cuda_pagerank measures against its
 * independent reference on skewed and power-law graphs (limit 1e-12).
 *
 * Memory and ordering. The graph and the four rank arrays are device
 * memory the host allocated (rk_buffer) and filled before launch; the
 * kernel never allocates. A block writes only [lo, hi) of next and
 * next_contrib; the next iteration reads all of contrib. Every thread's
 * writes are fenced at system scope before the block's reply is published
 * (rk_dev_reply: fence, block sync, release by thread 0); the host sends
 * the next step only after every reply arrived, and a block reads the
 * arrays only after its thread 0's acquire of that step and a block sync.
 * So an iteration's reads follow every write of the one before. The arrays
 * change between iterations of one resident kernel: they must never be
 * read through the non-coherent path (ld.global.nc); nothing here is
 * declared restrict, and test_cuda_pagerank checks the PTX.
 *
 * Bad input (a wrong length, a range outside [0, n], a block larger than
 * CLI_PRD_MAX_THREADS, more than CLI_PRD_MAX_LANES lanes) makes the
 * handler return RK_EINVAL: the block faults and supervision decides, as
 * for any device handler. A step carries raw device addresses and its own
 * n, which the kernel cannot check against the allocations: only the host
 * code that made the buffers (pr_cuda.c) may send steps. This kernel is
 * the command's own, registered by it and reachable by nothing else.
 */
#ifndef RK_CLI_PR_DEV_H
#define RK_CLI_PR_DEV_H

#include "ringkernel/dev_kernel.h"

#define CLI_PRD_STEP_TYPE   0x50520001u /**< cli_prd_step */
#define CLI_PRD_PART_TYPE   0x50520002u /**< cli_prd_part */
#define CLI_PRD_MAX_THREADS 1024u       /**< threads per block, at most */
#define CLI_PRD_MAX_LANES   512u        /**< work shares per range, at most */

/* One iteration over one node range (host -> device). Addresses are device
 * addresses as 64-bit integers, so the layout is the same for every
 * compiler; 96 bytes. */
typedef struct cli_prd_step {
    rk_dev_u64 in_off;    /* n + 1 offsets into in_src (CSC by destination) */
    rk_dev_u64 in_src;    /* source node of each in-edge */
    rk_dev_u64 outdeg;    /* out-degree of each node */
    rk_dev_u64 rank;      /* read: this iteration's ranks */
    rk_dev_u64 contrib;   /* read: rank / outdeg (0 for dangling nodes) */
    rk_dev_u64 next_rank; /* written, [lo, hi) only */
    rk_dev_u64 next_contrib; /* written, [lo, hi) only */
    double damping;
    double dangling; /* D: the rank of dangling nodes in `rank` */
    rk_dev_u32 n, lo, hi, part, iter;
    rk_dev_u32 lanes; /* merge-path shares (0: one per thread of the block) */
} cli_prd_step;

/* The range's result (device -> host, the reply). 48 bytes. */
typedef struct cli_prd_part {
    double delta;       /* L1 change over [lo, hi) */
    double dangling;    /* rank of dangling nodes in [lo, hi), after */
    rk_dev_u64 t_start; /* rk_dev_now_ns() when the block took the step */
    rk_dev_u64 t_end;   /* ... and when its result was complete */
    rk_dev_u32 part, iter, lo, hi;
} cli_prd_part;

/* The host program that only sends steps (pr_cuda.c) needs the layouts,
 * not a host build of the kernel. */
#if !defined(CLI_PRD_LAYOUT_ONLY)
#define CLI_PRD_PTR(type, addr) ((type *)(rk_dev_size)(addr))

/* ------------------------------------------------------------ merge path */
/*
 * A range [lo, hi) of nr rows and ne = off[hi] - off[lo] edges is one
 * sequence of nr + ne items in merge order: row i's edges, then row i's
 * end. The coordinate of diagonal k (the first k items) is (i, k - i):
 * i rows finished and k - i edges taken. These two functions are the
 * whole partition; test_cuda_pagerank checks them directly.
 */

/* Where share l of `lanes` starts: l * total / lanes items, rounded down
 * (without overflow for any total), so shares differ by at most one. */
RK_DEV_FN rk_dev_u64
cli_prd_diag(rk_dev_u64 total, rk_dev_u32 lanes, rk_dev_u32 l)
{
    return total / lanes * l + total % lanes * l / lanes;
}

/* Rows finished in the first k items of [lo, hi): the largest i <= nr
 * with off[lo + i] - off[lo] + i <= k (the left side grows by at least
 * one per row, so a binary search finds it). Then k - i edges are taken,
 * and off[lo + i] - off[lo] <= k - i <= off[lo + i + 1] - off[lo]. */
RK_DEV_FN rk_dev_u32
cli_prd_path(const rk_dev_u64 *off, rk_dev_u32 lo, rk_dev_u32 hi, rk_dev_u64 k)
{
    rk_dev_u64 e0 = off[lo];
    rk_dev_u32 a = 0, b = hi - lo;

    if ((rk_dev_u64)b > k)
        b = (rk_dev_u32)k;
    while (a < b) {
        rk_dev_u32 mid = a + (b - a + 1) / 2;
        if (off[lo + mid] - e0 + mid <= k)
            a = mid;
        else
            b = mid - 1;
    }
    return a;
}

/* The sum of contrib over the in-edges [j, end) of one row, in CSC order
 * (four gathers in flight, added one at a time as the reference does). */
RK_DEV_FN double
cli_prd_gather(
    const rk_dev_u32 *src, const double *contrib, rk_dev_u64 j, rk_dev_u64 end)
{
    double sum = 0;
    for (; j + 4 <= end; j += 4) {
        double c0 = contrib[src[j]], c1 = contrib[src[j + 1]];
        double c2 = contrib[src[j + 2]], c3 = contrib[src[j + 3]];
        sum += c0;
        sum += c1;
        sum += c2;
        sum += c3;
    }
    for (; j < end; j++)
        sum += contrib[src[j]];
    return sum;
}

/* Node v's new rank from its in-edge sum; adds its L1 change and (if it
 * has no out-edges) its rank to *delta and *dang. */
RK_DEV_FN void
cli_prd_finish(const cli_prd_step *st, double base, rk_dev_u64 v, double sum,
    double *delta, double *dang)
{
    const rk_dev_u32 *deg = CLI_PRD_PTR(const rk_dev_u32, st->outdeg);
    const double *rank = CLI_PRD_PTR(const double, st->rank);
    double *next = CLI_PRD_PTR(double, st->next_rank);
    double *next_contrib = CLI_PRD_PTR(double, st->next_contrib);
    double r = base + st->damping * sum, diff = r - rank[v];

    *delta += diff < 0 ? -diff : diff;
    next[v] = r;
    if (deg[v] != 0) {
        next_contrib[v] = r / (double)deg[v];
    } else {
        next_contrib[v] = 0;
        *dang += r;
    }
}

RK_DEV_HANDLER(cli_prd_handler)(rk_dev_ctx *x, const rk_dev_msg *m)
{
    /* Block-shared: the step (copied out of the lane's slot, which is
     * mapped host memory), the lanes' coordinates and partial sums, and
     * the reply. Per-lane values live here, not in registers, so a thread
     * may run several lanes (and the host build all of them). */
    RK_DEV_SHARED cli_prd_step st;
    RK_DEV_SHARED rk_dev_u32 row_at[CLI_PRD_MAX_LANES + 1]; /* share starts */
    RK_DEV_SHARED double head[CLI_PRD_MAX_LANES];  /* own part, first row */
    RK_DEV_SHARED double carry[CLI_PRD_MAX_LANES]; /* part of unfinished row */
    RK_DEV_SHARED double scan[CLI_PRD_MAX_LANES];  /* the scan's next step */
    RK_DEV_SHARED double red_delta[CLI_PRD_MAX_LANES];
    RK_DEV_SHARED double red_dang[CLI_PRD_MAX_LANES];
    RK_DEV_SHARED cli_prd_part out;
    RK_DEV_SHARED rk_dev_u64 t_start;
    rk_dev_u32 t = rk_dev_thread_idx(), bd = rk_dev_block_dim(), lanes, l, s;
    rk_dev_u64 e0, total;
    double base;

    if (t == 0)
        t_start = rk_dev_now_ns();
    if (m->len != (rk_dev_u32)sizeof(cli_prd_step) || bd > CLI_PRD_MAX_THREADS)
        return RK_EINVAL;
    rk_dev_copy_block(&st, m->data, (rk_dev_u32)sizeof(st));
    rk_dev_sync_block();
    lanes = st.lanes != 0 ? st.lanes : bd;
    if (st.n == 0 || st.lo > st.hi || st.hi > st.n
        || lanes > CLI_PRD_MAX_LANES)
        return RK_EINVAL;
    {
        const rk_dev_u64 *off = CLI_PRD_PTR(const rk_dev_u64, st.in_off);
        const rk_dev_u32 *src = CLI_PRD_PTR(const rk_dev_u32, st.in_src);
        const double *contrib = CLI_PRD_PTR(const double, st.contrib);
        rk_dev_u32 nr = st.hi - st.lo;
        double nd = (double)st.n;

        e0 = off[st.lo];
        total = (rk_dev_u64)nr + (off[st.hi] - e0);
        base = (1.0 - st.damping) / nd + st.damping * st.dangling / nd;

        /* 1. Where each share starts (rows finished before it). */
        for (l = t; l <= lanes; l += bd)
            row_at[l] = l == lanes ? nr
                                   : cli_prd_path(off, st.lo, st.hi,
                                       cli_prd_diag(total, lanes, l));
        rk_dev_sync_block();

        /* 2. Each lane walks its share: it finishes every row that ends
         * in it except the first (whose earlier parts other lanes hold),
         * keeps its own part of that first row in head[] and its part of
         * the row it leaves unfinished in carry[]. */
        for (l = t; l < lanes; l += bd) {
            rk_dev_u32 i0 = row_at[l], i1 = row_at[l + 1], i;
            rk_dev_u64 j = cli_prd_diag(total, lanes, l) - i0;
            rk_dev_u64 j1 = cli_prd_diag(total, lanes, l + 1) - i1;
            double delta = 0, dang = 0, own = 0;
            for (i = i0; i < i1; i++) {
                rk_dev_u64 end = off[st.lo + i + 1] - e0;
                double sum = cli_prd_gather(src + e0, contrib, j, end);
                j = end;
                if (i == i0)
                    own = sum;
                else
                    cli_prd_finish(
                        &st, base, (rk_dev_u64)st.lo + i, sum, &delta, &dang);
            }
            head[l] = own;
            carry[l] = i1 < nr ? cli_prd_gather(src + e0, contrib, j, j1) : 0;
            red_delta[l] = delta;
            red_dang[l] = dang;
        }
        rk_dev_sync_block();

        /* 3. Segmented inclusive scan of carry[] over the lanes, keyed by
         * the row each part belongs to (row_at[l + 1], non-decreasing in
         * l): afterwards carry[l] is the sum of every part of that row
         * held by lanes up to l. A fixed tree of log2(lanes) steps. */
        for (s = 1; s < lanes; s <<= 1) {
            for (l = t; l < lanes; l += bd)
                scan[l] = l >= s && row_at[l + 1 - s] == row_at[l + 1]
                    ? carry[l - s] + carry[l]
                    : carry[l];
            rk_dev_sync_block();
            for (l = t; l < lanes; l += bd)
                carry[l] = scan[l];
            rk_dev_sync_block();
        }

        /* 4. The first row of each share, with the earlier lanes' parts
         * (lane l - 1's unfinished row is exactly lane l's first row;
         * zero if the row started in this share). */
        for (l = t; l < lanes; l += bd) {
            rk_dev_u32 i0 = row_at[l];
            if (i0 < row_at[l + 1]) {
                double sum = l > 0 ? carry[l - 1] + head[l] : head[l];
                cli_prd_finish(&st, base, (rk_dev_u64)st.lo + i0, sum,
                    &red_delta[l], &red_dang[l]);
            }
        }
    }
    rk_dev_sync_block();
    /* Tree reduction over the lanes, for any count: s starts at half the
     * next power of two, and a lane adds its partner only where the
     * partner exists (lane l + s is not written in the step that reads
     * it, so lanes sharing a thread need no extra barrier). */
    for (s = 1; s < lanes; s <<= 1)
        ;
    for (s >>= 1; s > 0; s >>= 1) {
        for (l = t; l < s; l += bd) {
            if (l + s < lanes) {
                red_delta[l] += red_delta[l + s];
                red_dang[l] += red_dang[l + s];
            }
        }
        rk_dev_sync_block();
    }
    if (t == 0) {
        out.delta = red_delta[0];
        out.dangling = red_dang[0];
        out.t_start = t_start;
        out.t_end = rk_dev_now_ns();
        out.part = st.part;
        out.iter = st.iter;
        out.lo = st.lo;
        out.hi = st.hi;
    }
    rk_dev_sync_block();
    return rk_dev_reply(
        x, m, CLI_PRD_PART_TYPE, &out, (rk_dev_u32)sizeof(out));
}
RK_DEV_KERNEL(cli_prd_kernel, cli_prd_handler)
#endif /* CLI_PRD_LAYOUT_ONLY */

#endif /* RK_CLI_PR_DEV_H */
