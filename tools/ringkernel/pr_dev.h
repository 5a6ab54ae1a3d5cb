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
 * rank D of the ranks it reads); whichever block takes it computes, data
 * parallel over its threads (one thread per node, strided),
 *
 *   next[v] = (1 - d) / n + d * (sum over u -> v of contrib[u] + D / n)
 *
 * for v in [lo, hi), writes next and next_contrib for that range only,
 * reduces the range's L1 change and dangling rank over the block in shared
 * memory, and replies with them (cli_prd_part). The host adds the replies
 * in range order and sends the next iteration: the host is the reducer,
 * one message round per iteration through the backend's relay (the CPU
 * configuration's reducer is a kernel; a device-side reducer needs grid
 * barriers or device-memory K2K, which the backend does not have yet).
 *
 * A node's sum adds its in-edges' contribs one at a time in CSC order, as
 * tools/ringkernel/pr.c's iterate_range does, so the ranks match the
 * host's plain power iteration up to the order of the per-range sums of D
 * (and, on a GPU, fused multiply-adds): far below 1e-12.
 *
 * Memory and ordering. The graph and the four rank arrays are device
 * memory the host allocated (rk_buffer) and filled before launch; the
 * kernel never allocates. A block writes only [lo, hi) of next and
 * next_contrib; the next iteration reads all of contrib. A reply on the
 * host's LL lane carries only itself (no fence), so every thread fences
 * its writes at system scope before the reply (rk_dev_release_writes);
 * the host sends the next step only after every reply arrived, and every
 * thread fences again after taking that step (rk_dev_acquire_writes)
 * before it reads the arrays. So an iteration's reads follow every write
 * of the one before. The arrays
 * change between iterations of one resident kernel: they must never be
 * read through the non-coherent path (ld.global.nc); nothing here is
 * declared restrict, and test_cuda_pagerank checks the PTX.
 *
 * Bad input (a wrong length, a range outside [0, n], a block larger than
 * CLI_PRD_MAX_THREADS) makes the handler return RK_EINVAL: the block
 * faults and supervision decides, as for any device handler. A step
 * carries raw device addresses and its own n, which the kernel cannot
 * check against the allocations: only the host code that made the
 * buffers (pr_cuda.c) may send steps. This kernel is the command's own,
 * registered by it and reachable by nothing else.
 */
#ifndef RK_CLI_PR_DEV_H
#define RK_CLI_PR_DEV_H

#include "ringkernel/dev_kernel.h"

#define CLI_PRD_STEP_TYPE   0x50520001u /**< cli_prd_step */
#define CLI_PRD_PART_TYPE   0x50520002u /**< cli_prd_part */
#define CLI_PRD_MAX_THREADS 1024u       /**< threads per block, at most */

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
    rk_dev_u32 n, lo, hi, part, iter, reserved;
} cli_prd_step;

/* The range's result (device -> host, the reply). 32 bytes. */
typedef struct cli_prd_part {
    double delta;    /* L1 change over [lo, hi) */
    double dangling; /* rank of dangling nodes in [lo, hi), after */
    rk_dev_u32 part, iter, lo, hi;
} cli_prd_part;

/* The host program that only sends steps (pr_cuda.c) needs the layouts,
 * not a host build of the kernel. */
#if !defined(CLI_PRD_LAYOUT_ONLY)
#define CLI_PRD_PTR(type, addr) ((type *)(rk_dev_size)(addr))

RK_DEV_HANDLER(cli_prd_handler)(rk_dev_ctx *x, const rk_dev_msg *m)
{
    /* Block-shared: the step (copied out of the lane's slot, which is
     * mapped host memory), the per-thread partial sums and the reply. */
    RK_DEV_SHARED cli_prd_step st;
    RK_DEV_SHARED double red_delta[CLI_PRD_MAX_THREADS];
    RK_DEV_SHARED double red_dang[CLI_PRD_MAX_THREADS];
    RK_DEV_SHARED cli_prd_part out;
    rk_dev_u32 t = rk_dev_thread_idx(), bd = rk_dev_block_dim(), s;
    double delta = 0, dang = 0;

    if (m->len != (rk_dev_u32)sizeof(cli_prd_step) || bd > CLI_PRD_MAX_THREADS)
        return RK_EINVAL;
    rk_dev_copy_block(&st, m->data, (rk_dev_u32)sizeof(st));
    rk_dev_acquire_writes(); /* the other blocks' last iteration */
    rk_dev_sync_block();
    if (st.n == 0 || st.lo > st.hi || st.hi > st.n)
        return RK_EINVAL;
    {
        const rk_dev_u64 *off = CLI_PRD_PTR(const rk_dev_u64, st.in_off);
        const rk_dev_u32 *src = CLI_PRD_PTR(const rk_dev_u32, st.in_src);
        const rk_dev_u32 *deg = CLI_PRD_PTR(const rk_dev_u32, st.outdeg);
        const double *rank = CLI_PRD_PTR(const double, st.rank);
        const double *contrib = CLI_PRD_PTR(const double, st.contrib);
        double *next = CLI_PRD_PTR(double, st.next_rank);
        double *next_contrib = CLI_PRD_PTR(double, st.next_contrib);
        double d = st.damping, nd = (double)st.n;
        double base = (1.0 - d) / nd + d * st.dangling / nd;

        for (rk_dev_u64 v = (rk_dev_u64)st.lo + t; v < st.hi; v += bd) {
            double sum = 0, r, diff;
            rk_dev_u64 e = off[v], end = off[v + 1];
            for (; e < end; e++)
                sum += contrib[src[e]];
            r = base + d * sum;
            diff = r - rank[v];
            delta += diff < 0 ? -diff : diff;
            next[v] = r;
            if (deg[v] != 0) {
                next_contrib[v] = r / (double)deg[v];
            } else {
                next_contrib[v] = 0;
                dang += r;
            }
        }
    }
    /* Tree reduction over the block, for any block size: s starts at
     * half the next power of two, and a thread adds its partner only
     * where the partner exists. */
    red_delta[t] = delta;
    red_dang[t] = dang;
    rk_dev_sync_block();
    for (s = 1; s < bd; s <<= 1)
        ;
    for (s >>= 1; s > 0; s >>= 1) {
        if (t < s && t + s < bd) {
            red_delta[t] += red_delta[t + s];
            red_dang[t] += red_dang[t + s];
        }
        rk_dev_sync_block();
    }
    if (t == 0) {
        out.delta = red_delta[0];
        out.dangling = red_dang[0];
        out.part = st.part;
        out.iter = st.iter;
        out.lo = st.lo;
        out.hi = st.hi;
    }
    rk_dev_release_writes(); /* next, next_contrib before the reply */
    rk_dev_sync_block();
    return rk_dev_reply(
        x, m, CLI_PRD_PART_TYPE, &out, (rk_dev_u32)sizeof(out));
}
RK_DEV_KERNEL(cli_prd_kernel, cli_prd_handler)
#endif /* CLI_PRD_LAYOUT_ONLY */

#endif /* RK_CLI_PR_DEV_H */
