/** @file
 * ringkernel/dev_send.h - the sending half of the device actor API
 * (dev_kernel.h includes it at its end; it needs the context and the
 * staging of dev_kernel.h): rk_dev_send and rk_dev_reply to the kernel's
 * output (the output lane, or its rk_connect route wired on the device),
 * rk_dev_reply_host, rk_dev_send_to a K2K route, rk_dev_publish to a
 * topic. Every call is block-collective.
 */
/* dev_kernel.h includes this file at its end, after what it needs, and
 * before the headers that use it (dev_oneshot.h, dev_warp.h); included
 * alone, this file includes dev_kernel.h, which brings it in there. */
#ifndef RINGKERNEL_DEV_SEND_H
#include "ringkernel/dev_kernel.h"
#endif
#ifndef RINGKERNEL_DEV_SEND_H
#define RINGKERNEL_DEV_SEND_H

/* ---------------------------------------------------------- sending */

/** Fills a device message id: v7-shaped, unique per (kernel, block,
 * sequence): 48 bits of the global timer in ms, the block, the kernel id
 * and a per-block counter. */
RK_DEV_FN void
rk_dev__msg_id(
    rk_dev_ctx *x, unsigned char *id, rk_dev_u64 now, rk_dev_u32 seq)
{
    rk_dev_u64 ms = now / 1000000u;
    rk_dev_u32 k = x->a.kernel_id;
    for (int i = 0; i < 6; i++)
        id[i] = (unsigned char)(ms >> (40 - 8 * i));
    id[6] = (unsigned char)(0x70u | ((x->blk >> 8) & 0x0fu));
    id[7] = (unsigned char)x->blk;
    id[8] = (unsigned char)(0x80u | ((k >> 16) & 0x3fu));
    id[9] = (unsigned char)(k >> 8);
    id[10] = (unsigned char)k;
    id[11] = 0;
    id[12] = (unsigned char)(seq >> 24);
    id[13] = (unsigned char)(seq >> 16);
    id[14] = (unsigned char)(seq >> 8);
    id[15] = (unsigned char)seq;
}

/** Fills the envelope of a message the block sends: id from sequence seq
 * (unique per kernel, block and seq), corr copied (a reply) or zero, the
 * send time and the sender. One thread. */
RK_DEV_FN void
rk_dev__header(rk_dev_ctx *x, rk_dev_msg_header *h, rk_dev_u32 type_id,
    rk_dev_u32 flags, const unsigned char *corr, unsigned char prio,
    rk_dev_u32 len, rk_dev_u32 seq)
{
    rk_dev_u64 now = rk_dev_now_ns();
    h->magic = RK_DEV_MSG_MAGIC;
    h->version = RK_DEV_MSG_VERSION;
    h->priority = prio;
    h->type_id = type_id;
    h->flags = flags;
    h->payload_len = len;
    rk_dev__msg_id(x, h->message_id, now, seq);
    for (int i = 0; i < 16; i++)
        h->correlation_id[i] = corr ? corr[i] : 0;
    h->send_ns = now;
    h->sender = x->a.kernel_id;
    h->type_version = 0;
    /* A publish for the relay: which subscribers its lanes took
     * (rk_dev_publish), for the runtime not to deliver it to them again. */
    h->reserved = (flags & RK_DEV_MSG_F_TOPIC) != 0
        ? (unsigned short)x->pub_mask
        : (unsigned short)0;
}

/** Thread 0: RK_OK when len fits a slot of s, else RK_EMSGSIZE (counted
 * in errors); sets x->rc and clears x->slot. */
RK_DEV_FN int
rk_dev__fits(rk_dev_ctx *x, const rk_ring_side *s, rk_dev_u32 len)
{
    x->slot = 0;
    x->rc = RK_OK;
    if (len > s->slot_size - RK_DEV_MSG_HEADER_SIZE) {
        x->rc = RK_EMSGSIZE;
        x->k.errors += 1;
    }
    return x->rc;
}

/** Thread 0 chose x->slot (or set the error x->rc): the block copies the
 * payload in parallel, then thread 0 writes the header. Returns x->rc
 * (every thread); the caller's thread 0 publishes the slot. Collective. */
RK_DEV_FN int
rk_dev__fill(rk_dev_ctx *x, rk_dev_u32 type_id, rk_dev_u32 flags,
    const unsigned char *corr, unsigned char prio, const void *payload,
    rk_dev_u32 len)
{
    rk_dev_sync_block();
    if (x->rc != RK_OK)
        return x->rc;
    rk_dev_copy_block(x->slot + RK_DEV_MSG_HEADER_SIZE, payload, len);
    rk_dev_sync_block(); /* the copy, before thread 0's release (commit) */
    if (rk_dev_thread0()) {
        rk_dev__header(x, (rk_dev_msg_header *)(void *)x->slot, type_id, flags,
            corr, prio, len, x->msg_seq++);
        x->k.sent += 1;
    }
    return RK_OK;
}

/**
 * Writes one message on a K2K lane (a route, or a topic subscriber's
 * lane in device memory), directly: thread 0 waits for a free slot
 * (polling with back-off; the heartbeat keeps beating; not with
 * x->nowait: RK_EFULL), the block copies the payload in parallel, thread
 * 0 writes the header and publishes (the GPU-scope release store of the
 * tail in dev_k2k.h orders the whole slot before it). RK_ECLOSED: the
 * consumer is gone and the lane is full. Collective.
 */
RK_DEV_FN int
rk_dev__emit_lane(rk_dev_ctx *x, rk_ring_ctrl *c, rk_ring_side *s,
    rk_dev_u32 type_id, rk_dev_u32 flags, const unsigned char *corr,
    unsigned char prio, const void *payload, rk_dev_u32 len)
{
    rk_dev_sync_block(); /* every thread has read x->rc's last value */
    if (rk_dev_thread0() && rk_dev__fits(x, s, len) == RK_OK) {
        /* The target's backpressure is BLOCK (wait for room,
         * heartbeat beating), until the target is gone. */
        rk_dev_u32 ns = 0, room;
        int closed = 0;
        while ((room = rk_k2k_prod_space(c, s, 1, &closed)) == 0
            && !closed && !x->nowait) {
            rk_dev__beat(x);
            rk_dev_backoff(&ns);
        }
        if (room == 0 && !closed) {
            x->rc = RK_EFULL; /* nowait: a topic lane that drops */
        } else if (room == 0) {
            x->rc = RK_ECLOSED; /* the caller counts or reroutes it */
        } else {
            x->slot = rk_ring_slot(s, s->pos);
        }
    }
    if (rk_dev__fill(x, type_id, flags, corr, prio, payload, len) != RK_OK)
        return x->rc;
    if (rk_dev_thread0())
        rk_k2k_prod_publish(c, s, 1);
    rk_dev_sync_block();
    return RK_OK;
}

/**
 * Writes one message to the output lane (c == x->out_ctrl) or a K2K lane
 * (rk_dev__emit_lane). The output lane's go to the block's stage
 * (published by rk_dev__flush: at the end of the batch, when the stage is
 * full, and wherever the block waits). corr: the correlation id to copy
 * (a reply), or NULL. Collective.
 */
RK_DEV_FN int
rk_dev__emit(rk_dev_ctx *x, rk_ring_ctrl *c, rk_ring_side *s,
    rk_dev_u32 type_id, rk_dev_u32 flags, const unsigned char *corr,
    unsigned char prio, const void *payload, rk_dev_u32 len)
{
    if (c != x->out_ctrl)
        return rk_dev__emit_lane(
            x, c, s, type_id, flags, corr, prio, payload, len);
    rk_dev_sync_block(); /* x->nout is settled */
    if (x->nout == x->stage_cap)
        rk_dev__flush(x);
    if (rk_dev_thread0() && rk_dev__fits(x, s, len) == RK_OK)
        x->slot = x->stage_out + (rk_dev_size)x->nout * s->slot_size;
    if (rk_dev__fill(x, type_id, flags, corr, prio, payload, len) != RK_OK)
        return x->rc;
    if (rk_dev_thread0())
        x->nout += 1;
    rk_dev_sync_block();
    return RK_OK;
}

/** To the kernel's output: the output lane, or its rk_connect route when
 * that is wired on the device (kargs.send_route). */
RK_DEV_FN int
rk_dev__to_output(rk_dev_ctx *x, rk_dev_u32 type_id,
    const unsigned char *corr, unsigned char prio, const void *payload,
    rk_dev_u32 len)
{
    rk_dev_u32 r = x->a.send_route;
    if (r != 0 && r <= x->nroutes && rk_dev__route_ready(x, r - 1)) {
        int rc = rk_dev__emit(x, x->route_ctrl[r - 1], &x->route[r - 1],
            type_id, 0, corr, prio, payload, len);
        if (rc != RK_ECLOSED)
            return rc;
        /* The target exited: the message goes to the host, where the
         * runtime hands it to the route's target or refuses it (the
         * relay dead-letters a refusal). */
    }
    /* Not wired yet (the target has not started): through the relay. */
    return rk_dev__emit(
        x, x->out_ctrl, &x->out, type_id, 0, corr, prio, payload, len);
}

/** Sends to the kernel's output (the host, or its rk_connect route: on the
 * device while the target is a running device kernel, else through the
 * host relay, where the runtime applies the target's rules). RK_OK or
 * RK_EMSGSIZE. Collective. */
RK_DEV_FN int
rk_dev_send(
    rk_dev_ctx *x, rk_dev_u32 type_id, const void *payload, rk_dev_u32 len)
{
    return rk_dev__to_output(x, type_id, 0, 128, payload, len);
}

/** Replies to req: correlation id = req's message id, req's priority. */
RK_DEV_FN int
rk_dev_reply(rk_dev_ctx *x, const rk_dev_msg *req, rk_dev_u32 type_id,
    const void *payload, rk_dev_u32 len)
{
    return rk_dev__to_output(x, type_id, req->hdr->message_id,
        req->hdr->priority, payload, len);
}

/** Replies to req to the host: on the output lane, flagged
 * RK_DEV_MSG_F_HOST so the runtime hands it to the kernel's output queue
 * even where its output is routed (on the device or through the relay):
 * the result of a chain of device kernels. Collective. */
RK_DEV_FN int
rk_dev_reply_host(rk_dev_ctx *x, const rk_dev_msg *req, rk_dev_u32 type_id,
    const void *payload, rk_dev_u32 len)
{
    return rk_dev__emit(x, x->out_ctrl, &x->out, type_id, RK_DEV_MSG_F_HOST,
        req->hdr->message_id, req->hdr->priority, payload, len);
}

/** Sends on K2K route r (another kernel's input lane, no host hop).
 * RK_OK, RK_EMSGSIZE, RK_ECLOSED (the target exited and its lane is full;
 * counted in errors), or RK_ENOTFOUND for a route that does not exist or
 * is not wired yet. */
RK_DEV_FN int
rk_dev_send_to(rk_dev_ctx *x, rk_dev_u32 route, rk_dev_u32 type_id,
    const void *payload, rk_dev_u32 len)
{
    int rc;
    if (route >= x->nroutes || x->a.topic_of[route] != 0
        || !rk_dev__route_ready(x, route))
        return RK_ENOTFOUND;
    rc = rk_dev__emit(x, x->route_ctrl[route], &x->route[route], type_id, 0,
        0, 128, payload, len);
    if (rc == RK_ECLOSED && rk_dev_thread0())
        x->k.errors += 1; /* refused: counted, never silently lost */
    return rc;
}

/** Writes the publish into each wired K2K lane of topic `topic`'s
 * subscribers on this device (GPU scope, no host hop): under a
 * subscriber's BLOCK policy the block waits for room (heartbeat beating)
 * until the subscriber is gone; otherwise a full lane drops it. Returns
 * the carried mask (low 8 bits: lanes that took it; the next 8: lanes
 * that dropped it) and sets *want to the bits of every topic lane the
 * host wired for this index. Collective. */
RK_DEV_FN rk_dev_u32
rk_dev__topic_fan(rk_dev_ctx *x, rk_dev_u32 topic, rk_dev_u32 type_id,
    const void *payload, rk_dev_u32 len, rk_dev_u32 *want)
{
    rk_dev_u32 carried = 0, dropped = 0, r;
    *want = 0;
    for (r = 0; r < x->nroutes; r++) {
        rk_dev_u32 bit;
        int rc;
        if (x->a.topic_of[r] != topic + 1)
            continue;
        bit = 1u << x->a.topic_bit[r];
        *want |= bit;
        if (x->route_ctrl[r] == 0)
            continue; /* not wired yet: the relay delivers it */
        if (rk_dev_thread0())
            x->nowait = (x->a.topic_drop >> r) & 1u;
        rc = rk_dev__emit_lane(x, x->route_ctrl[r], &x->route[r], type_id, 0,
            0, 128, payload, len);
        if (rk_dev_thread0())
            x->nowait = 0;
        if (rc == RK_OK)
            carried |= bit;
        else if (rc == RK_EFULL)
            dropped |= bit; /* the relay's frame says so: counted */
        /* RK_ECLOSED (the subscriber ended), RK_EMSGSIZE (its slots are
         * smaller): the relay's fan-out applies the runtime's rules. */
    }
    return carried | dropped << 8;
}

/** Publishes on topic index `topic`: to the subscribers that run on this
 * device over their K2K lanes (rk_dev__topic_fan), and through the host
 * relay (the runtime names the topic from the kernel's device_topics and
 * fans it out to the other subscribers) unless those lanes reached every
 * subscriber the topic had at launch. RK_OK, RK_EMSGSIZE or RK_EINVAL
 * (index too big). Collective. */
RK_DEV_FN int
rk_dev_publish(rk_dev_ctx *x, rk_dev_u32 topic, rk_dev_u32 type_id,
    const void *payload, rk_dev_u32 len)
{
    rk_dev_u32 want, mask;
    if (topic > 0xffffu)
        return RK_EINVAL;
    mask = rk_dev__topic_fan(x, topic, type_id, payload, len, &want);
    if (want != 0 && mask == want && topic < RK_DEV_TOPIC_BITS
        && ((x->a.topic_relay >> topic) & 1u) == 0) {
        /* Every subscriber had it on the device: counted per lane in the
         * block's counters (shared memory), which reach the host-mapped
         * control block with the others (rk_dev__counters), where the
         * relay folds them into the topic's statistics. */
        if (rk_dev_thread0()) {
            for (rk_dev_u32 j = 0; j < RK_DEV_CTL_TOPICS; j++)
                if ((want >> j) & 1u)
                    x->k.topic[j] += 1;
            x->k.tdirty |= want;
        }
        return RK_OK;
    }
    if (rk_dev_thread0())
        x->pub_mask = mask;
    return rk_dev__emit(x, x->out_ctrl, &x->out, type_id,
        RK_DEV_MSG_F_TOPIC | (topic << RK_DEV_MSG_TOPIC_SHIFT), 0, 128,
        payload, len);
}

#endif /* RINGKERNEL_DEV_SEND_H */
