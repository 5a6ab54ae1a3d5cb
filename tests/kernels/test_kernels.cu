/*
 * tests/kernels/test_kernels.cu - device kernels the CUDA tests use,
 * written once in the C subset of docs/cuda-programming.md. NVRTC and nvcc compile
 * this file as CUDA (tests check the PTX); tests/fake_cuda,
 * test_cuda_loop_host and test_cuda_loop_lanes include it as host C and
 * run the same code on CPU threads, one per block.
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
 *   rk_wecho:   one message per warp (RK_DEV_WARP_KERNEL): replies with
 *               the payload, fails (RK_EINVAL) on a first byte 0xff,
 *               sends nothing for a first byte 0xfe;
 *   rk_spin:    busy for 10 ms times its first payload byte (neither its
 *               heartbeat nor its lane's head moves meanwhile: a hung
 *               block to the watchdog), then echoes;
 *   rk_pong:    K2K ping-pong (rk_pong_h below): passes a message on K2K
 *               route 0 until its hop count is spent, then replies to
 *               the host with the device time the hops took;
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

/* rk_pub: publishes each message, unchanged, on the topic index in its
 * first byte (rk_kernel_config.device_topics names it); replies nothing. */
RK_DEV_HANDLER(pub_h)(rk_dev_ctx *x, const rk_dev_msg *m)
{
    if (m->len == 0)
        return RK_EINVAL;
    return rk_dev_publish(x, m->data[0], m->hdr->type_id, m->data, m->len);
}
RK_DEV_KERNEL(rk_pub, pub_h)

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

RK_DEV_FN int
wecho_h(rk_dev_ctx *x, const rk_dev_msg *m, rk_dev_u32 i)
{
    if (m->len > 0 && m->data[0] == 0xff)
        return RK_EINVAL;
    if (m->len > 0 && m->data[0] == 0xfe)
        return RK_OK; /* no reply */
    return rk_dev_warp_reply(x, m, i, m->hdr->type_id, m->data, m->len);
}
RK_DEV_WARP_KERNEL(rk_wecho, wecho_h)

/* rk_pong: the payload is a little-endian hop count (bytes 0..3), the
 * %globaltimer of the first hop (4..11, 0 until set) and of the last
 * (12..19). With hops left it sends the message on K2K route 0 with one
 * hop fewer; at 0 it stamps the last hop and replies to the host
 * (rk_dev_reply_host: also where the kernel's output is routed), so the
 * host reads the device time of the whole exchange.
 * A send the route's target refused because it exited (RK_ECLOSED) is
 * counted in the block's errors by the loop, not a fault. */
RK_DEV_HANDLER(pong_h)(rk_dev_ctx *x, const rk_dev_msg *m)
{
    RK_DEV_SHARED unsigned char buf[64];
    RK_DEV_SHARED rk_dev_u32 left;
    rk_dev_u32 n = m->len > 64 ? 64 : m->len;
    int rc;
    rk_dev_copy_block(buf, m->data, n);
    rk_dev_sync_block();
    if (rk_dev_thread0()) {
        rk_dev_u64 now = rk_dev_now_ns(), t0 = 0;
        int i;
        left = n < 20 ? 0
                      : (rk_dev_u32)buf[0] | (rk_dev_u32)buf[1] << 8
                | (rk_dev_u32)buf[2] << 16 | (rk_dev_u32)buf[3] << 24;
        for (i = 0; n >= 20 && i < 8; i++)
            t0 |= (rk_dev_u64)buf[4 + i] << (8 * i);
        for (i = 0; n >= 20 && i < 8; i++) {
            if (t0 == 0)
                buf[4 + i] = (unsigned char)(now >> (8 * i));
            buf[12 + i] = (unsigned char)(now >> (8 * i));
        }
        if (left != 0) {
            buf[0] = (unsigned char)(left - 1);
            buf[1] = (unsigned char)((left - 1) >> 8);
            buf[2] = (unsigned char)((left - 1) >> 16);
            buf[3] = (unsigned char)((left - 1) >> 24);
        }
    }
    rk_dev_sync_block();
    if (left == 0)
        return rk_dev_reply_host(x, m, m->hdr->type_id, buf, n);
    rc = rk_dev_send_to(x, 0, m->hdr->type_id, buf, n);
    return rc == RK_ECLOSED ? RK_OK : rc;
}
RK_DEV_KERNEL(rk_pong, pong_h)
