/*
 * src/cluster/mpi_send.c - the progress thread's sends (docs/cluster.md):
 * staged frames into per-peer batches within the peer's credits, replies
 * and errors first (rk__cl_pump), each batch out with MPI_Isend from one
 * of the peer's CL_NSEND buffers (rk__cl_flush), which also returns the
 * credits owed and carries the heartbeat and the goodbye; replies to
 * peers' requests (rk__cl_reply_out), by MPI straight to a requesting
 * thread where it sent the request itself; and a peer declared dead or
 * gone (rk__cl_peer_down). Progress thread only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster_int.h"
#include "cluster/mpi_trace.h"
#include "cluster/mpi_wake.h"
#include "runtime/ids.h"

/* Declares a peer dead (or gone) and fails what waits on it (progress
 * thread only). */
void
rk__cl_peer_down(rk_cluster *cl, int rank, int state)
{
    cl_peer *p = &cl->peers[rank];
    size_t n = 0;
    char why[96];

    if (atomic_load(&p->state) != PEER_LIVE)
        return;
    /* Its proxies are poked (to look at the state at once), then refuse
     * every later send with RK_EUNREACHABLE; once the state says so, each
     * fails the requests it forwarded that were not answered. In this
     * order a request is either refused or was admitted before and is
     * failed by its proxy. A proxy whose queue had no room for the poke
     * is busy and looks at the state after each message, and 100 ms
     * after its queue ran dry (mpi_proxy.c, PROXY_IDLE_MIN_NS). */
    for (size_t i = 0; i < cl->n_proxies; i++) {
        rk_msg_header h;
        rk_kernel k;

        if (cl->proxies[i].rank != rank
            || rk_kernel_lookup(cl->rt, cl->proxies[i].id, &k) != RK_OK)
            continue;
        memset(&h, 0, sizeof(h));
        h.type_id = RK_CLUSTER_TYPE_INJECT;
        h.flags = RK__CL_F_INJECT;
        (void)rk_send_frame(cl->rt, k, &h, NULL, 0, RK_NO_WAIT);
    }
    snprintf(why, sizeof(why), "rank %d %s", rank,
        state == PEER_DEAD ? "died" : "left the cluster");
    for (size_t i = 0; i < cl->n_proxies; i++)
        if (cl->proxies[i].rank == rank)
            rk_kernel_refuse(cl->rt, cl->proxies[i].id, RK_EUNREACHABLE, why);
    atomic_store(&p->state, state);
    pthread_mutex_lock(&p->lock);
    rk__cl_buf_reset(&p->stage[0]);
    rk__cl_buf_reset(&p->stage[1]);
    pthread_cond_broadcast(&p->room);
    pthread_mutex_unlock(&p->lock);
    rk__cl_buf_reset(&p->backlog[0]);
    rk__cl_buf_reset(&p->backlog[1]);
    rk__cl_buf_reset(&p->held);
    /* Replies owed to it can no longer be sent. */
    free(rk__cl_idmap_take_proxy(&cl->served, rank, UINT32_MAX, &n));
    /* Direct requests waiting on it fail (those staged after this see the
     * state and fail in rk__cl_stage_reserve). */
    for (int i = 0; i < CL_NWAIT; i++)
        rk__cl_waiter_answer(cl, (uint32_t)i, NULL, RK_EUNREACHABLE, rank);
}

/* True once the last send of p's next send buffer has completed (its
 * request is then MPI_REQUEST_NULL); a failed test declares p dead. */
static bool
sendbuf_free(rk_cluster *cl, cl_peer *p)
{
    cl_sendbuf *b = &p->sb[p->cur];
    int done = 0;

    if (b->req == MPI_REQUEST_NULL)
        return true;
    if (MPI_Test(&b->req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        rk__cl_peer_down(cl, (int)(p - cl->peers), PEER_DEAD);
        return false;
    }
    return done != 0;
}

/* The send buffer to fill next, or NULL while all are in flight. */
static cl_sendbuf *
sendbuf(rk_cluster *cl, cl_peer *p)
{
    cl_sendbuf *b = &p->sb[p->cur];

    if (!sendbuf_free(cl, p))
        return NULL;
    /* Allocated on first use: a peer this rank never sends to costs no
     * send buffers (out of memory: tried again next time). */
    if (b->p == NULL) {
        if ((b->p = malloc(cl->batch_bytes)) == NULL)
            return NULL;
        CL_MPI_BUFFER(b->p, cl->batch_bytes);
    }
    if (b->len == 0)
        b->len = RK__CL_BATCH_HDR;
    return b;
}

/* Completes, if it is done, each peer's next send buffer's last send
 * (an idle progress thread): an answer that goes out in it next finds it
 * free without testing it then. */
void
rk__cl_sendbuf_reap(rk_cluster *cl)
{
    for (int r = 0; r < cl->size; r++)
        if (r != cl->rank && atomic_load(&cl->peers[r].state) == PEER_LIVE)
            (void)sendbuf_free(cl, &cl->peers[r]);
}

/* Sends the current buffer (with flags, and the credits owed). */
bool
rk__cl_flush(rk_cluster *cl, cl_peer *p, uint16_t flags, uint64_t now)
{
    cl_sendbuf *b = sendbuf(cl, p);
    int rank = (int)(p - cl->peers);
    bool beat;
    int mrc;

    if (b == NULL)
        return false;
    beat = b->nframes == 0 && p->owed == 0 && flags == 0;
    rk__cl_batch_write(b->p, flags, b->nframes, p->owed);
    mrc = MPI_Isend(
        b->p, (int)b->len, MPI_BYTE, rank, CL_TAG, cl->comm, &b->req);
    if (mrc != MPI_SUCCESS) {
        rk__cl_peer_down(cl, rank, PEER_DEAD);
        return false;
    }
    PSTAT(cl, sent_batches, 1);
    PSTAT(cl, sent_frames, b->nframes);
    /* Release: a thread that reads the count these bring to 0 sends after
     * this send (see cl_peer.unsent). */
    if (b->ncredited != 0)
        atomic_fetch_sub_explicit(
            &p->unsent, b->ncredited, memory_order_release);
    p->owed = 0;
    p->last_sent = now;
    /* A bare heartbeat neither pokes the peer nor counts as a send that
     * finds it polling: the peer's progress thread hears it at the end of
     * its nap, and the next real batch still pokes it. */
    if (!beat)
        rk__cl_sent_to(cl, rank, now);
    b->len = 0;
    b->nframes = 0;
    b->ncredited = 0;
    p->cur = (p->cur + 1) % CL_NSEND;
    return true;
}

/* Moves staged frames into batches and sends them. True if it did
 * anything. */
bool
rk__cl_pump(rk_cluster *cl, cl_peer *p, uint64_t now)
{
    bool did = false, more = false;

    if (atomic_load(&p->state) != PEER_LIVE)
        return false;
    for (int cls = 0; cls < 2; cls++) {
        if (p->backlog[cls].off == p->backlog[cls].len) {
            rk__cl_buf_reset(&p->backlog[cls]);
            if (!(atomic_load_explicit(&p->staged, memory_order_relaxed)
                    & (1u << cls)))
                continue;
            pthread_mutex_lock(&p->lock);
            atomic_fetch_and_explicit(
                &p->staged, ~(1u << cls), memory_order_relaxed);
            if (p->stage[cls].len != 0) {
                rk__cl_buf_swap(&p->stage[cls], &p->backlog[cls]);
                if (cls == 0)
                    pthread_cond_broadcast(&p->room);
            }
            pthread_mutex_unlock(&p->lock);
        }
    }
    /* Replies and errors first: they never wait for credits. */
    for (int cls = 1; cls >= 0; cls--) {
        cl_buf *bl = &p->backlog[cls];

        while (bl->off < bl->len) {
            const uint8_t *fr = bl->p + bl->off;
            size_t size = rk__cl_frame_size(rk__cl_get32(fr + 16));
            cl_sendbuf *b;

            if (cls == 0 && p->credits == 0) {
                PSTAT(cl, credit_stalls, 1);
                more = true;
                break;
            }
            if ((b = sendbuf(cl, p)) == NULL) {
                more = true;
                break;
            }
            if (b->len + size > cl->batch_bytes) {
                if (!rk__cl_flush(cl, p, 0, now)) {
                    more = true;
                    break;
                }
                continue;
            }
            memcpy(b->p + b->len, fr, size);
            b->len += size;
            b->nframes++;
            bl->off += size;
            if (cls == 0) {
                p->credits--;
                b->ncredited++;
            }
            did = true;
        }
    }
    /* The batch goes as soon as nothing more can join it now; frames
     * that keep coming while the buffers are in flight join it for up to
     * batch_window_ns. Owed credits go once half a window is owed, or
     * when the thread has nothing else to do; a quiet link gets a
     * heartbeat every heartbeat_ns / 4. */
    {
        cl_sendbuf *b = &p->sb[p->cur];
        uint64_t quiet = rk__cl_ns_since(p->last_sent, now);
        bool go = b->nframes != 0
            && (!more || quiet >= (uint64_t)cl->cfg.batch_window_ns);
        bool beat = b->nframes == 0 && p->owed == 0;

        if ((go || p->owed >= p->window / 2 || (p->owed != 0 && !did)
                || quiet >= (uint64_t)cl->cfg.heartbeat_ns / 4)
            && rk__cl_flush(cl, p, 0, now) && !beat)
            did = true; /* a heartbeat alone is not work to poll on for */
    }
    return did;
}

/* Sends answer f (a REPLY to a request its sender sent itself, CL_BYMPI)
 * as a batch of its own on rcomm, tagged with the waiting slot, where the
 * requesting thread receives it (rk_cluster_request). It uses the peer's
 * send buffers (an open batch goes out first, on comm). False if none is
 * free or the answer does not fit one or the requester's receive
 * (CL_CALL_MAX): the caller stages it then, and the
 * peer's progress thread hands it over (the waiter looks at both).
 * Progress thread. */
static bool
answer_by_mpi(rk_cluster *cl, int rank, rk__cl_frame *f, const void *payload)
{
    cl_peer *p = &cl->peers[rank];
    size_t size = RK__CL_BATCH_HDR + rk__cl_frame_size(f->len);
    cl_sendbuf *b;
    int mrc;

    /* The requester's receive holds CL_CALL_MAX bytes. */
    if (atomic_load(&p->state) != PEER_LIVE || size > cl->batch_bytes
        || size > CL_CALL_MAX || (b = sendbuf(cl, p)) == NULL)
        return false;
    if (b->nframes != 0
        && (!rk__cl_flush(cl, p, 0, rk_now_ns())
            || (b = sendbuf(cl, p)) == NULL))
        return false;
#ifdef RK_CLUSTER_TRACE
    f->send_ns = rk__cl_tsc(); /* traced: the reply's transit */
    CL_TR_ADD(CL_TR_P_ENCODE, rk__cl_tr.answered, f->send_ns);
#endif
    rk__cl_batch_write(b->p, 0, 1, 0);
    rk__cl_frame_write(b->p + RK__CL_BATCH_HDR, f, payload);
    mrc = MPI_Isend(b->p, (int)size, MPI_BYTE, rank,
        (int)(f->target & CL_SLOT_MASK), cl->rcomm, &b->req);
#ifdef RK_CLUSTER_TRACE
    CL_TR_SET(rk__cl_tr.answered);
    CL_TR_ADD(CL_TR_P_ISEND, f->send_ns, rk__cl_tr.answered);
#endif
    if (mrc != MPI_SUCCESS) {
        rk__cl_peer_down(cl, rank, PEER_DEAD);
        return false;
    }
    PSTAT(cl, sent_batches, 1);
    PSTAT(cl, sent_frames, 1);
    b->len = 0;
    p->cur = (p->cur + 1) % CL_NSEND;
    return true;
}

/* Sends kernel output h (its payload, len bytes), a reply to a request
 * from rank, back there: to the waiting thread's receive (proxy has
 * CL_BYMPI: a slot of rk_cluster_request) or staged for rank's progress
 * thread (a slot or a proxy). Progress thread. */
void
rk__cl_reply_out(rk_cluster *cl, int rank, uint32_t proxy,
    const rk_msg_header *h, const void *payload, size_t len)
{
    rk__cl_frame f;

    rk__cl_frame_from_header(&f, h, len);
    f.kind = RK__CL_REPLY;
    f.target = proxy;
    if (rank == cl->rank) {
        /* A request of this rank's own (request_local): to its slot. */
        f.payload = payload;
        if (!rk__cl_waiter_answer(cl, proxy & CL_SLOT_MASK, &f, RK_OK, rank))
            PSTAT(cl, late_replies, 1);
        return;
    }
    if (((proxy & CL_BYMPI) && answer_by_mpi(cl, rank, &f, payload))
        || rk__cl_stage_frame(cl, rank, 1, &f, payload, RK_NO_WAIT) == RK_OK)
        PSTAT(cl, replies_sent, 1);
}

/* Tells src that the message of frame f was refused with rc. */
void
rk__cl_send_error(rk_cluster *cl, int src, const rk__cl_frame *f, int rc)
{
    rk__cl_frame err;

    memset(&err, 0, sizeof(err));
    err.kind = RK__CL_ERROR;
    err.priority = f->priority;
    err.target = (uint32_t)f->aux;
    err.aux = rc;
    err.corr = f->id;
    err.id = rk__next_id();
    rk__cl_stage_frame(cl, src, 1, &err, NULL, RK_NO_WAIT);
}
