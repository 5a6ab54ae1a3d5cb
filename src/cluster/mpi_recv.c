/*
 * src/cluster/mpi_recv.c - the progress thread's receives
 * (docs/cluster.md): CL_NRECV persistent receives, tested oldest first
 * (rk__cl_poll_recv); each batch's credits and goodbye, then its frames,
 * each to the handler of its kind (on_frame): messages into exported
 * kernels, run directly where a kernel takes direct calls, publishes to
 * local subscribers, answers to proxies or to waiting rk_cluster_request
 * callers, late exports' proxies. A frame a full BLOCK kernel cannot take
 * is held, with every later one from that peer, and tried again
 * (rk__cl_retry_held). Progress thread only.
 */
#include <pthread.h>
#include <string.h>

#include "cluster/cluster_int.h"
#include "cluster/mpi_trace.h"

/* rk_send_frame_try without waiting, to a kernel by a cached handle:
 * looked up once, and again when the handle went stale (a relaunch). A
 * BLOCK kernel that is full returns RK_EFULL uncounted, since the frame
 * is then held or handed to the ingress thread, not lost. Progress
 * thread. */
static int
send_cached(rk_cluster *cl, const char *id, rk_kernel *k, bool *ok,
    const rk_msg_header *h, const void *data, size_t len)
{
    int rc;

    for (int tries = 0; tries < 2; tries++) {
        if (!*ok) {
            if ((rc = rk_kernel_lookup(cl->rt, id, k)) != RK_OK)
                return rc;
            *ok = true;
        }
        rc = rk_send_frame_try(cl->rt, *k, h, data, len, RK_NO_WAIT);
        if (rc != RK_ESTALE)
            return rc;
        *ok = false;
    }
    return rc;
}

/* Sends frame f from rank src straight into export e's kernel, without
 * waiting (send_cached). The delivered count (and the reply route, serve,
 * for a message the kernel's thread will handle) goes first, because the
 * kernel's host may read the counters as soon as the kernel has the
 * message; both are undone if the send fails. Progress thread. */
static int
send_direct(rk_cluster *cl, cl_export *e, int src, const rk__cl_frame *f,
    const rk_msg_header *h, bool serve)
{
    int rc = RK_EBUSY;

    PSTAT(cl, delivered, 1);
    if (e->direct_calls && e->k_ok) {
        /* The kernel's handler on this thread, if it is idle: no queue,
         * no wake-up. The reply it makes meanwhile goes straight back;
         * any other (too big for obuf, or made later) comes out of its
         * output queue to drain_poll, which finds the route in served:
         * only this thread reads the outputs, so the route may follow. */
        rk_call_reply r = { .buf = e->obuf, .cap = e->obuf ? e->ocap : 0 };

#ifdef RK_CLUSTER_TRACE
        if (f->kind == RK__CL_CALL) {
            CL_TR_SET(rk__cl_tr.called);
            CL_TR_ADD(CL_TR_REQ_WIRE, f->send_ns, rk__cl_tr.seen);
            CL_TR_ADD(CL_TR_P_PARSE, rk__cl_tr.seen, rk__cl_tr.called);
        }
#endif
        rc = rk_kernel_call_reply(cl->rt, e->k, h, f->payload, f->len, &r);
#ifdef RK_CLUSTER_TRACE
        if (f->kind == RK__CL_CALL) {
            CL_TR_SET(rk__cl_tr.answered);
            CL_TR_ADD(CL_TR_P_CALL, rk__cl_tr.called, rk__cl_tr.answered);
        }
#endif
        if (rc == RK_OK && serve) {
            if (r.got)
                rk__cl_reply_out(
                    cl, src, (uint32_t)f->aux, &r.hdr, e->obuf, r.len);
            else
                rk__cl_idmap_put(
                    &cl->served, &f->id, src, (uint32_t)f->aux, f->priority);
        }
        if (rc == RK_ESTALE)
            e->k_ok = false;
        if (rc == RK_ENOTSUP) /* its backend runs no calls: queue */
            e->direct_calls = false;
    }
    if (rc == RK_EBUSY || rc == RK_ESTALE || rc == RK_ENOTSUP) {
        if (serve)
            rk__cl_idmap_put(
                &cl->served, &f->id, src, (uint32_t)f->aux, f->priority);
        rc = send_cached(cl, e->id, &e->k, &e->k_ok, h, f->payload, f->len);
        if (rc != RK_OK && serve)
            rk__cl_idmap_take(&cl->served, &f->id, NULL, NULL);
    }
    if (rc != RK_OK)
        PSTAT(cl, delivered, (uint64_t)-1);
    return rc;
}

/* ----------------------------------------------------- frame handlers */

/*
 * One handler per frame kind (on_frame, indexed by the kind): each takes
 * frame f from peer src and returns false if it must be held (a BLOCK
 * kernel is full) and tried again later, before the frames after it.
 */

/* How much room BLOCK export e's input has, looked up again only when
 * the last look is used up: a direct send that finds the queue full
 * costs a try (uncounted) and a hand-over to the ingress thread. Half of
 * what looks free: slots the kernel holds while it handles a batch may
 * not show in the depth. */
static void
block_room(rk_cluster *cl, cl_export *e)
{
    rk_kernel_stats ks;
    uint64_t cap = e->cfg.input_capacity ? e->cfg.input_capacity : 1024;

    if (rk_kernel_stats_get(cl->rt, e->id, &ks) == RK_OK
        && ks.queue_depth < cap)
        e->room = (cap - ks.queue_depth) / 2;
}

/* A DATA or CALL frame for BLOCK export e. A BLOCK kernel that is full
 * must make the sender wait, not refuse: its ingress thread sends with a
 * wait, and the credit goes back once the kernel took the message. While
 * nothing waits there, a frame the kernel takes at once goes in from
 * here (no hand-off). */
static bool
deliver_block(rk_cluster *cl, int src, const rk__cl_frame *f, cl_export *e)
{
    /* A CALL took no credit: none goes back for it. */
    uint32_t credit = f->kind == RK__CL_DATA;
    bool serve = !e->cfg.local_output && (f->flags & RK_MSG_F_REQUEST);
    /* Acquire: pairs with the ingress thread's release of in_pending
     * (rk__cl_ingress_main): what it sent is in before what goes from
     * here. */
    bool idle
        = atomic_load_explicit(&e->in_pending, memory_order_acquire) == 0;
    int rc;

    if (idle && e->room == 0 && !e->cfg.priority_bands)
        block_room(cl, e);
    if (idle && e->room != 0) {
        rk_msg_header h = rk__cl_frame_header(f);

        e->room--;
        PSTAT(cl, received, 1); /* first, as send_direct's */
        rc = send_direct(cl, e, src, f, &h, serve);
        if (rc != RK_ETIMEDOUT && rc != RK_EFULL) {
            cl->peers[src].owed += credit;
            if (rc != RK_OK) {
                PSTAT(cl, rejected, 1);
                rk__cl_send_error(cl, src, f, rc);
            }
            return true;
        }
        PSTAT(cl, received, (uint64_t)-1);
    }
    if (rk__cl_ingress_hand(e, src, f) != RK_OK)
        return false; /* out of memory: try again later */
    PSTAT(cl, received, 1);
    return true;
}

/* DATA (a message from a proxy or rk_cluster_send_batch) and CALL (a
 * request its requesting thread sent itself): into export f->target's
 * kernel, or refused with an ERROR back. */
static bool
on_data(rk_cluster *cl, int src, const rk__cl_frame *f)
{
    cl_export *e = f->target < cl->n_exports ? &cl->exports[f->target] : NULL;
    /* A CALL took no credit: none goes back for it. */
    uint32_t credit = f->kind == RK__CL_DATA;
    int rc;

    if (e != NULL && e->cfg.backpressure == RK_BP_BLOCK)
        return deliver_block(cl, src, f, e);
    if (e == NULL) {
        rc = rk__fail(RK_ENOTFOUND, "cluster: no export %u", f->target);
    } else {
        rk_msg_header h = rk__cl_frame_header(f);
        bool serve = !e->cfg.local_output && (f->flags & RK_MSG_F_REQUEST);

        rc = send_direct(cl, e, src, f, &h, serve);
    }
    if (rc == RK_ETIMEDOUT || rc == RK_EFULL)
        return false;
    PSTAT(cl, received, 1);
    cl->peers[src].owed += credit;
    if (rc == RK_OK) {
        /* counted in send_direct */
    } else if (rc == RK_EDROPPED) {
        PSTAT(cl, dropped, 1);
    } else {
        PSTAT(cl, rejected, 1);
        rk__cl_send_error(cl, src, f, rc);
    }
    return true;
}

/* TOPIC: a publish on src, for this rank's subscribers of topic
 * f->target. */
static bool
on_topic(rk_cluster *cl, int src, const rk__cl_frame *f)
{
    rk_msg_header h;

    PSTAT(cl, received, 1);
    cl->peers[src].owed++;
    if (f->target >= cl->n_topics) {
        PSTAT(cl, rejected, 1);
        return true;
    }
    h = rk__cl_frame_header(f);
    h.flags |= RK__CL_F_REMOTE;
    /* A subscriber that is full misses it: counted failed in the topic's
     * stats here, as a local publish would be. */
    (void)rk_publish_frame(cl->rt, cl->topics[f->target], &h, f->payload,
        f->len, RK_NO_WAIT, NULL);
    PSTAT(cl, delivered, 1);
    return true;
}

/* Counts an answer that came (n 1) or undoes that (n -1). */
static inline void
count_answer(rk_cluster *cl, bool err, uint64_t n)
{
    if (err)
        PSTAT(cl, remote_errors, n);
    else
        PSTAT(cl, replies_received, n);
}

/* The answer to an rk_cluster_request (CL_DIRECT): straight to the
 * waiting host thread (counted first, as answer_proxy's; undone if it
 * gave up). */
static bool
answer_direct(rk_cluster *cl, int src, const rk__cl_frame *f, bool err)
{
    count_answer(cl, err, 1);
    if (!rk__cl_waiter_answer(
            cl, f->target & CL_SLOT_MASK, f, err ? f->aux : RK_OK, src)) {
        count_answer(cl, err, (uint64_t)-1);
        PSTAT(cl, late_replies, 1);
    }
    return true;
}

/* The answer to a message proxy f->target forwarded: injected into the
 * proxy, which puts it out as the reply (an ERROR as a message of type
 * RK_CLUSTER_TYPE_ERROR holding the code). */
static bool
answer_proxy(rk_cluster *cl, const rk__cl_frame *f, bool err)
{
    rk_msg_header h = rk__cl_frame_header(f);
    uint8_t le[4];
    const void *data = f->payload;
    size_t len = f->len;
    cl_proxy *px;
    int rc;

    if (f->target >= cl->n_proxies)
        return true;
    if (err) {
        h.type_id = RK_CLUSTER_TYPE_ERROR;
        h.flags = 0;
        rk__cl_put32(le, (uint32_t)f->aux);
        data = le;
        len = sizeof(le);
    }
    h.flags |= RK__CL_F_INJECT;
    /* Counted first: the requester may read the reply (and the counters)
     * before this thread gets back from the send. */
    count_answer(cl, err, 1);
    px = &cl->proxies[f->target];
    rc = send_cached(cl, px->id, &px->k, &px->k_ok, &h, data, len);
    if (rc == RK_ENOTFOUND) {
        count_answer(cl, err, (uint64_t)-1);
        return true;
    }
    if (rc == RK_ETIMEDOUT || rc == RK_EFULL || rc == RK_EREJECTED) {
        count_answer(cl, err, (uint64_t)-1);
        return false;
    }
    rk__cl_idmap_take(&cl->fwd, &f->corr, NULL, NULL);
    return true;
}

/* REPLY (a kernel's reply to a request of this rank's) and ERROR (a
 * message of this rank's was refused on src; aux says why): to the
 * waiting rk_cluster_request caller or to the proxy that forwarded it. */
static bool
on_answer(rk_cluster *cl, int src, const rk__cl_frame *f)
{
    bool err = f->kind == RK__CL_ERROR;

    return (f->target & CL_DIRECT) ? answer_direct(cl, src, f, err)
                                   : answer_proxy(cl, f, err);
}

/* ANNOUNCE: a kernel src exported after the join (rk_cluster_announce):
 * its proxies, as the join makes them. Without room, or if the runtime
 * refuses one, that kernel stays unreachable from here (its "R/id" is
 * missing). */
static bool
on_announce(rk_cluster *cl, int src, const rk__cl_frame *f)
{
    rk__cl_dir d;
    rk__cl_dir_export e;

    if (rk__cl_dir_parse(f->payload, f->len, &d) == RK_OK && d.n_exports == 1
        && rk__cl_dir_export_get(&d, 0, &e) == RK_OK
        && rk__cl_proxy_start(cl, src, f->target, &e, false) == RK_OK)
        (void)rk__cl_proxy_start(cl, src, f->target, &e, true);
    return true;
}

typedef bool (*frame_fn)(rk_cluster *cl, int src, const rk__cl_frame *f);

static const frame_fn on_frame[RK__CL_KIND_MAX + 1] = {
    [RK__CL_DATA] = on_data,
    [RK__CL_REPLY] = on_answer,
    [RK__CL_ERROR] = on_answer,
    [RK__CL_TOPIC] = on_topic,
    [RK__CL_ANNOUNCE] = on_announce,
    [RK__CL_CALL] = on_data,
};

/* One frame from a peer, to its kind's handler (the decoder passes no
 * other kind; one without a handler is dropped). False if it must be
 * held and tried again later. */
static inline bool
deliver(rk_cluster *cl, int src, const rk__cl_frame *f)
{
    frame_fn fn = f->kind <= RK__CL_KIND_MAX ? on_frame[f->kind] : NULL;

    return fn == NULL || fn(cl, src, f);
}

/* Frames from held (oldest first) while they go in. True if any did. */
bool
rk__cl_retry_held(rk_cluster *cl, int src)
{
    cl_peer *p = &cl->peers[src];
    bool did = false;

    while (p->held.off < p->held.len) {
        rk__cl_frame f;
        size_t off = p->held.off;

        if (rk__cl_frame_next(p->held.p, p->held.len, &off, &f) != RK_OK) {
            rk__cl_buf_reset(&p->held); /* cannot happen: we wrote them */
            break;
        }
        if (!deliver(cl, src, &f))
            break;
        p->held.off = off;
        did = true;
    }
    if (p->held.off == p->held.len)
        rk__cl_buf_reset(&p->held);
    return did;
}

/* Takes in one batch from src. True if it carried anything but a
 * heartbeat: frames, credits or a goodbye (a bare heartbeat is not
 * traffic that the progress thread should poll on for). */
static bool
batch_in(rk_cluster *cl, int src, const uint8_t *buf, size_t len, uint64_t now)
{
    cl_peer *p = &cl->peers[src];
    rk__cl_batch b;
    rk__cl_frame f;
    size_t off = RK__CL_BATCH_HDR;
    int rc;

    if (rk__cl_batch_parse(buf, len, &b) != RK_OK)
        return false; /* not ours or corrupt: nothing in it can be trusted */
    p->last_heard = now;
    p->credits += b.credits;
    if (b.flags & RK__CL_B_BYE)
        p->bye_got = true;
    if (atomic_load(&p->state) != PEER_LIVE)
        return true;
    if (b.nframes == 0 && b.credits == 0 && !(b.flags & RK__CL_B_BYE))
        return false; /* a heartbeat: the link is alive, nothing else */
    while ((rc = rk__cl_frame_next(buf, len, &off, &f)) == RK_OK) {
        size_t start = off - rk__cl_frame_size(f.len);
        uint8_t *dst = NULL;

        if (p->held.len == 0 && deliver(cl, src, &f))
            continue;
        /* Keep this frame and every later one, in order. */
        if (rk__cl_buf_append(&p->held, len - start, &dst) == RK_OK)
            memcpy(dst, buf + start, len - start);
        break;
    }
    return true;
}

/* Receives complete in the order they were posted, and a restarted
 * persistent receive goes to the back of that order: testing only the
 * oldest one keeps every peer's batches in the order it sent them (MPI's
 * non-overtaking rule); MPI_Testsome's index order would not. */
bool
rk__cl_poll_recv(rk_cluster *cl, uint64_t now)
{
    bool did = false;

    for (int k = 0; k < CL_NRECV; k++) {
        int i = cl->rnext, done = 0, count = 0, src;
        MPI_Status st;

        if (MPI_Test(&cl->rreq[i], &done, &st) != MPI_SUCCESS || !done)
            break;
        CL_TR_SET(rk__cl_tr.seen);
        src = st.MPI_SOURCE;
        MPI_Get_count(&st, MPI_BYTE, &count);
        if (src >= 0 && src < cl->size && src != cl->rank && count > 0
            && batch_in(cl, src, cl->rbuf[i], (size_t)count, now))
            did = true;
        MPI_Start(&cl->rreq[i]);
#ifdef RK_CLUSTER_TRACE
        CL_TR_ADD(CL_TR_P_AFTER, rk__cl_tr.answered, rk__cl_tsc());
        rk__cl_tr.answered = 0;
#endif
        cl->rnext = (cl->rnext + 1) % CL_NRECV;
    }
    return did;
}
