/*
 * tests/kernels/bar_kernels.cu - two ring kernels that meet at a named
 * barrier (rk_kernel_config.device_barrier, rk_dev_kernel_barrier),
 * written once: NVRTC compiles it (test_cuda_barrier checks the PTX), the
 * stand-in driver and the tests run its host build on CPU threads.
 *
 *   rk_bar_a, rk_bar_b: on a message whose payload is a 4-byte round
 *   number r, the kernel writes r to its own word of a board both kernels
 *   share (one module, so one __device__ array; one array in the host
 *   build), waits at the barrier, reads the other kernel's word, waits
 *   again (so neither writes the next round before both have read), and
 *   replies with the word it read. The reply is r only if the barrier
 *   held each kernel until the other had written; the board is accessed
 *   with plain loads and stores, so under TSan the barrier's
 *   acquire/release is the only thing ordering them.
 */
#include "ringkernel/dev_oneshot.h"

#if defined(RK_DEV_ON_DEVICE)
static __device__ rk_dev_u32 bar_board[2];
#else
static rk_dev_u32 bar_board[2];
#endif

RK_DEV_FN int
bar_round(rk_dev_ctx *x, const rk_dev_msg *m, rk_dev_u32 self)
{
    rk_dev_u32 r = 0, other, i;
    unsigned char out[4];

    for (i = 0; i < 4 && i < m->len; i++)
        r |= (rk_dev_u32)m->data[i] << (8 * i);
    if (rk_dev_thread0())
        bar_board[self] = r;
    if (!rk_dev_kernel_barrier(x))
        return RK_EINVAL; /* the kernel names no barrier */
    other = bar_board[1 - self];
    rk_dev_kernel_barrier(x);
    for (i = 0; i < 4; i++)
        out[i] = (unsigned char)(other >> (8 * i));
    return rk_dev_reply(x, m, m->hdr->type_id, out, 4);
}

RK_DEV_HANDLER(bar_a_h)(rk_dev_ctx *x, const rk_dev_msg *m)
{
    return bar_round(x, m, 0);
}
RK_DEV_KERNEL(rk_bar_a, bar_a_h)

RK_DEV_HANDLER(bar_b_h)(rk_dev_ctx *x, const rk_dev_msg *m)
{
    return bar_round(x, m, 1);
}
RK_DEV_KERNEL(rk_bar_b, bar_b_h)
