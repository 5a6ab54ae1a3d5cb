/*
 * tests/kernels/test_kernels.cu - device kernels the CUDA tests use,
 * written once in the C subset of docs/cuda.md. NVRTC and nvcc compile
 * this file as CUDA (tests check the PTX); tests/fake_cuda and
 * test_cuda_loop_host include it as host C and run the same code on CPU
 * threads, one per block.
 *
 *   rk_echo:    replies with the request's payload (correlation id set);
 *   rk_fwd:     forwards every message on K2K route 0 (payload + 1 to
 *               its first byte), and publishes it on topic 3 when the
 *               first byte is 0x7f;
 *   rk_sum:     data-parallel over the block: replies with the sum of the
 *               payload's bytes as a 4-byte little-endian word;
 *   rk_fail:    fails (RK_EINVAL) on a payload whose first byte is 0xff,
 *               echoes otherwise;
 *   rk_twice:   replies with the payload, then sends it again with type
 *               2: a batch writes twice as many outputs as it takes, so
 *               the block's output stage fills and flushes mid-batch;
 *   rk_spin:    busy for 10 ms times its first payload byte (neither its
 *               heartbeat nor its lane's head moves meanwhile: a hung
 *               block to the watchdog), then echoes;
 *   rk_trap:    traps (rk_dev_trap: __trap() on the device, the context
 *               is lost) on a payload whose first byte is 0xee, echoes
 *               otherwise.
 */
#include "ringkernel/dev_kernel.h"

RK_DEV_HANDLER(echo_h)(rk_dev_ctx *x, const rk_dev_msg *m)
{
    return rk_dev_reply(x, m, m->hdr->type_id, m->data, m->len);
}
RK_DEV_KERNEL(rk_echo, echo_h)

RK_DEV_HANDLER(fwd_h)(rk_dev_ctx *x, const rk_dev_msg *m)
{
    RK_DEV_SHARED unsigned char buf[256];
    rk_dev_u32 n = m->len > 256 ? 256 : m->len;
    int rc;
    rk_dev_copy_block(buf, m->data, n);
    rk_dev_sync_block();
    if (rk_dev_thread0() && n > 0)
        buf[0] = (unsigned char)(buf[0] + 1);
    rk_dev_sync_block();
    rc = rk_dev_send_to(x, 0, m->hdr->type_id, buf, n);
    if (rc == RK_OK && n > 0 && m->data[0] == 0x7f)
        rc = rk_dev_publish(x, 3, m->hdr->type_id, buf, n);
    return rc;
}
RK_DEV_KERNEL(rk_fwd, fwd_h)

RK_DEV_HANDLER(sum_h)(rk_dev_ctx *x, const rk_dev_msg *m)
{
    RK_DEV_SHARED rk_dev_u32 part[1024];
    rk_dev_u32 t = rk_dev_thread_idx(), bd = rk_dev_block_dim(), s = 0, i;
    unsigned char out[4];
    for (i = t; i < m->len; i += bd)
        s += m->data[i];
    if (t < 1024)
        part[t] = s;
    rk_dev_sync_block();
    if (t == 0) {
        for (i = 1; i < bd && i < 1024; i++)
            s += part[i];
        part[0] = s;
    }
    rk_dev_sync_block();
    s = part[0];
    out[0] = (unsigned char)s;
    out[1] = (unsigned char)(s >> 8);
    out[2] = (unsigned char)(s >> 16);
    out[3] = (unsigned char)(s >> 24);
    return rk_dev_reply(x, m, m->hdr->type_id, out, 4);
}
RK_DEV_KERNEL(rk_sum, sum_h)

RK_DEV_HANDLER(fail_h)(rk_dev_ctx *x, const rk_dev_msg *m)
{
    if (m->len > 0 && m->data[0] == 0xff)
        return RK_EINVAL;
    return rk_dev_reply(x, m, m->hdr->type_id, m->data, m->len);
}
RK_DEV_KERNEL(rk_fail, fail_h)

RK_DEV_HANDLER(twice_h)(rk_dev_ctx *x, const rk_dev_msg *m)
{
    int rc = rk_dev_reply(x, m, m->hdr->type_id, m->data, m->len);
    return rc != RK_OK ? rc : rk_dev_send(x, 2, m->data, m->len);
}
RK_DEV_KERNEL(rk_twice, twice_h)

RK_DEV_HANDLER(spin_h)(rk_dev_ctx *x, const rk_dev_msg *m)
{
    rk_dev_u64 ms = m->len > 0 ? m->data[0] * 10u : 0u;
    rk_dev_u64 until = rk_dev_now_ns() + ms * 1000000u;
    while (rk_dev_now_ns() < until)
        ;
    return rk_dev_reply(x, m, m->hdr->type_id, m->data, m->len);
}
RK_DEV_KERNEL(rk_spin, spin_h)

RK_DEV_HANDLER(trap_h)(rk_dev_ctx *x, const rk_dev_msg *m)
{
    if (m->len > 0 && m->data[0] == 0xee)
        rk_dev_trap();
    return rk_dev_reply(x, m, m->hdr->type_id, m->data, m->len);
}
RK_DEV_KERNEL(rk_trap, trap_h)

/* rk_count: an actor. It keeps a running count in a register across
 * messages (state a handler cannot keep), replies with it as one byte,
 * faults (RK_EINVAL) on a first byte of 0xff while holding it, and ends
 * itself with RK_OK on a first byte of 0xfe. */
RK_DEV_ACTOR(count_a)(rk_dev_ctx *x)
{
    unsigned char n = 0;
    rk_dev_msg m;
    while (!rk_dev_should_terminate(x)) {
        if (!rk_dev_recv(x, &m))
            continue;
        if (m.len > 0 && m.data[0] == 0xff)
            return RK_EINVAL; /* the message stays held: it is the failed one */
        if (m.len > 0 && m.data[0] == 0xfe) {
            rk_dev_recv_done(x, 1);
            return RK_OK;
        }
        n = (unsigned char)(n + 1);
        rk_dev_reply(x, &m, m.hdr->type_id, &n, 1);
        rk_dev_recv_done(x, 1);
    }
    return RK_OK;
}
RK_DEV_ACTOR_KERNEL(rk_count, count_a)
