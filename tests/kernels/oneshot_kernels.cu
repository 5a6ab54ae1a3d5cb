/*
 * tests/kernels/oneshot_kernels.cu - one-shot kernels the tests use
 * (ringkernel/dev_oneshot.h), in the C subset of docs/cuda-programming.md. NVRTC
 * compiles this file (test_cuda_nvrtc checks the PTX; test_oneshot_cuda
 * loads it through the cuda backend); the stand-in driver and
 * test_oneshot include it as host C and run it on CPU threads, one per
 * block.
 *
 *   rk_os_vadd:    c[i] = a[i] + b[i] for i < n (u32; args: rk_os_n),
 *                  grid-stride over every thread of the grid;
 *   rk_os_gridsum: cooperative: each block stores the sum of its part of
 *                  in[0..n) in part[block]; grid barrier; block 0 stores
 *                  the total in out[0]; grid barrier; every block copies
 *                  out[0] to out[1 + block]. Wrong without a real barrier
 *                  (buffers: in, part, out; args: rk_os_n);
 *   rk_os_nocoop:  calls rk_dev_sync_grid (launched without cooperative:
 *                  the launch must fail, naming the kernel), and stores
 *                  the call's result in out[block];
 *   rk_os_warp:    per block: out[4b] = the warp sum of (lane + 1) over
 *                  lane 0's warp, out[4b+1] = ballot(lane even),
 *                  out[4b+2] = vote_all(1), out[4b+3] = vote_any(lane ==
 *                  1) (a warp of 32 lanes: 528, 0x55555555, 1, 1; on the
 *                  host, a warp of one lane: 1, 1, 1, 0).
 */
#include "ringkernel/dev_oneshot.h"

typedef struct rk_os_n {
    rk_dev_u32 n;
} rk_os_n;

RK_DEV_FN void
os_vadd(const rk_dev_oneshot_args *a)
{
    const rk_dev_u32 *x = (const rk_dev_u32 *)rk_dev_oneshot_buf(a, 0);
    const rk_dev_u32 *y = (const rk_dev_u32 *)rk_dev_oneshot_buf(a, 1);
    rk_dev_u32 *z = (rk_dev_u32 *)rk_dev_oneshot_buf(a, 2);
    rk_os_n p;
    rk_dev_oneshot_arg(a, &p, sizeof(p));
    for (rk_dev_u32 i = rk_dev_global_idx(); i < p.n; i += rk_dev_global_dim())
        z[i] = x[i] + y[i];
}
RK_DEV_ONESHOT(rk_os_vadd, os_vadd)

RK_DEV_FN void
os_gridsum(const rk_dev_oneshot_args *a)
{
    RK_DEV_SHARED rk_dev_u32 red[1024];
    const rk_dev_u32 *in = (const rk_dev_u32 *)rk_dev_oneshot_buf(a, 0);
    rk_dev_u32 *part = (rk_dev_u32 *)rk_dev_oneshot_buf(a, 1);
    rk_dev_u32 *out = (rk_dev_u32 *)rk_dev_oneshot_buf(a, 2);
    rk_os_n p;
    rk_dev_u32 t = rk_dev_thread_idx(), bd = rk_dev_block_dim();
    rk_dev_u32 b = rk_dev_block_idx(), s = 0, i;

    rk_dev_oneshot_arg(a, &p, sizeof(p));
    for (i = rk_dev_global_idx(); i < p.n; i += rk_dev_global_dim())
        s += in[i];
    red[t] = s;
    rk_dev_sync_block();
    if (t == 0) {
        for (i = 1; i < bd; i++)
            s += red[i];
        part[b] = s;
    }
    rk_dev_sync_grid(a);
    if (b == 0 && t == 0) {
        s = 0;
        for (i = 0; i < rk_dev_grid_dim(); i++)
            s += part[i];
        out[0] = s;
    }
    rk_dev_sync_grid(a);
    if (t == 0)
        out[1 + b] = out[0];
}
RK_DEV_ONESHOT(rk_os_gridsum, os_gridsum)

RK_DEV_FN void
os_nocoop(const rk_dev_oneshot_args *a)
{
    rk_dev_u32 *out = (rk_dev_u32 *)rk_dev_oneshot_buf(a, 0);
    int waited = rk_dev_sync_grid(a);
    if (rk_dev_thread_idx() == 0)
        out[rk_dev_block_idx()] = (rk_dev_u32)waited;
}
RK_DEV_ONESHOT(rk_os_nocoop, os_nocoop)

RK_DEV_FN void
os_warp(const rk_dev_oneshot_args *a)
{
    rk_dev_u32 *out = (rk_dev_u32 *)rk_dev_oneshot_buf(a, 0);
    rk_dev_u32 lane = rk_dev_lane_id(), b = rk_dev_block_idx();
    rk_dev_u32 sum = rk_dev_warp_sum32(lane + 1);
    rk_dev_u32 even = rk_dev_ballot((lane & 1u) == 0);
    int all = rk_dev_vote_all(1);
    int any = rk_dev_vote_any(lane == 1);
    rk_dev_u32 lane0 = rk_dev_shfl32(lane, 0);
    rk_dev_sync_warp();
    if (rk_dev_thread_idx() == 0) {
        out[4 * b] = sum;
        out[4 * b + 1] = even;
        out[4 * b + 2] = (rk_dev_u32)all;
        out[4 * b + 3] = (rk_dev_u32)any + lane0; /* lane0 is 0 */
    }
}
RK_DEV_ONESHOT(rk_os_warp, os_warp)
