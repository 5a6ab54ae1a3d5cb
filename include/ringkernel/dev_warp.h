/** @file
 * ringkernel/dev_warp.h - one message per warp: a persistent kernel whose
 * block takes a batch with one sweep (dev_ll.h) and hands message i to
 * warp i % warps, so a block of 8 warps handles 8 small messages at once
 * instead of one after another.
 *
 *     RK_DEV_FN int wecho(rk_dev_ctx *x, const rk_dev_msg *m, rk_dev_u32 i)
 *     {
 *         return rk_dev_warp_reply(x, m, i, m->hdr->type_id, m->data,
 *             m->len);
 *     }
 *     RK_DEV_WARP_KERNEL(rk_wecho, wecho)
 *
 * Every lane of the warp calls the handler with the same message. It may
 * use the warp helpers of rk_dev.h and rk_dev_warp_reply, never a
 * block-wide call (rk_dev_sync_block, rk_dev_reply, rk_dev_send,
 * rk_dev_copy_block): the other warps are handling other messages. Blocks
 * must be a multiple of 32 threads. A reply goes to the output stage slot
 * of its message (one reply per message, at most), and the block
 * publishes the replies in message order once every warp is done.
 *
 * A handler that returns an error faults the block at that message, as
 * in rk_dev_run: the messages before it are handed back and their replies
 * published; it and the ones after it stay in the lane (the failed one at
 * the head). The warps that handled messages after it did so for
 * nothing: their replies are dropped and those messages are handled again
 * after a restart, so a warp handler should be idempotent.
 *
 * On the host build a block is one thread and one warp of one lane: the
 * messages of a batch run one after another, through the same code.
 */
#ifndef RINGKERNEL_DEV_WARP_H
#define RINGKERNEL_DEV_WARP_H

#include "ringkernel/dev_kernel.h"

/** A handler run by one warp for message i of the batch (see above). */
typedef int (*rk_dev_warp_handler)(
    rk_dev_ctx *x, const rk_dev_msg *m, rk_dev_u32 i);

/** Warps in the block (1 on the host). */
RK_DEV_FN rk_dev_u32
rk_dev_warps(void)
{
    return rk_dev_block_dim() / rk_dev_warp_size();
}

/** The calling thread's warp in the block (0 on the host). */
RK_DEV_FN rk_dev_u32
rk_dev_warp_idx(void)
{
    return rk_dev_thread_idx() / rk_dev_warp_size();
}

/**
 * Replies to message i (req) from its warp: the payload goes to the
 * message's output stage slot, copied by the warp's lanes, and lane 0
 * writes the envelope (correlation id = req's message id, req's
 * priority). RK_OK, RK_EMSGSIZE (the handler decides) or RK_EINVAL (a
 * second reply to the same message). Warp-collective.
 */
RK_DEV_FN int
rk_dev_warp_reply(rk_dev_ctx *x, const rk_dev_msg *req, rk_dev_u32 i,
    rk_dev_u32 type_id, const void *payload, rk_dev_u32 len)
{
    rk_dev_u32 sz = x->out.slot_size;
    unsigned char *slot = x->stage_out + (rk_dev_size)i * sz;
    const unsigned char *p = (const unsigned char *)payload;
    int rc = RK_OK;

    if (len > sz - RK_DEV_MSG_HEADER_SIZE)
        rc = RK_EMSGSIZE;
    else if (x->wout[i])
        rc = RK_EINVAL;
    rk_dev_sync_warp(); /* every lane has read wout[i] */
    if (rc != RK_OK)
        return rc;
    for (rk_dev_u32 k = rk_dev_lane_id(); k < len; k += rk_dev_warp_size())
        slot[RK_DEV_MSG_HEADER_SIZE + k] = p[k];
    if (rk_dev_lane_id() == 0) {
        rk_dev__header(x, (rk_dev_msg_header *)(void *)slot, type_id, 0,
            req->hdr->message_id, req->hdr->priority, len, x->msg_seq + i);
        x->wout[i] = 1;
    }
    rk_dev_sync_warp();
    return RK_OK;
}

/**
 * After every warp ran: the replies of messages [0, done) are moved to
 * the front of the output stage in message order (a block-wide copy only
 * where a message did not reply) and counted as staged, ready for
 * rk_dev_recv_done to publish. Collective.
 */
RK_DEV_FN void
rk_dev__warp_gather(rk_dev_ctx *x, rk_dev_u32 done)
{
    rk_dev_u32 sz = x->out.slot_size, nout = 0;
    for (rk_dev_u32 i = 0; i < done; i++) {
        if (!x->wout[i])
            continue;
        if (i != nout) {
            rk_dev_copy_words(x->stage_out + (rk_dev_size)nout * sz,
                x->stage_out + (rk_dev_size)i * sz,
                (rk_dev_ll_used(x->stage_out + (rk_dev_size)i * sz, sz) + 7)
                    & ~7u);
            rk_dev_sync_block();
        }
        nout++;
    }
    if (rk_dev_thread0()) {
        x->nout = nout;
        x->k.sent += nout;
    }
    rk_dev_sync_block();
}

/**
 * The persistent loop of a warp kernel: rk_dev_run's lifecycle, batches,
 * faults and drain, with message i of each batch handled by warp
 * i % warps. A batch is cut to the output stage's slots (one reply each).
 */
RK_DEV_FN void
rk_dev_run_warps(const rk_dev_kargs *a, rk_dev_ctx *x, rk_dev_warp_handler fn)
{
    rk_dev_i32 code = RK_OK;

    rk_dev_ctx_init(x, a);
    if (rk_dev_begin(x)) {
        while (!rk_dev_should_terminate(x)) {
            rk_dev_u32 n = rk_dev_recv_batch(x), done = 0, i;
            if (n > x->stage_cap)
                n = x->stage_cap; /* the rest is taken again */
            for (i = rk_dev_thread_idx(); i < n; i += rk_dev_block_dim()) {
                x->wout[i] = 0;
                x->wrc[i] = RK_OK;
            }
            rk_dev_sync_block();
            for (i = rk_dev_warp_idx(); i < n; i += rk_dev_warps()) {
                rk_dev_msg m = rk_dev_msg_at(x, i);
                int rc = fn(x, &m, i);
                if (rk_dev_lane_id() == 0)
                    x->wrc[i] = rc;
            }
            rk_dev_sync_block();
            while (done < n && x->wrc[done] == RK_OK)
                done++;
            code = done < n ? x->wrc[done] : RK_OK;
            rk_dev__warp_gather(x, done);
            if (rk_dev_thread0())
                x->msg_seq += n;
            if (!rk_dev__batch_end(x, done, code))
                break;
            code = RK_OK;
        }
    }
    rk_dev_exit(x, code);
}

/** A persistent kernel entry `name` handing each message of a batch to one
 * warp running handler (blocks of a multiple of 32 threads). */
#define RK_DEV_WARP_KERNEL(name, handler)                                     \
    RK_DEV__ENTRY(name, rk_dev_run_warps, handler)

#endif /* RINGKERNEL_DEV_WARP_H */
