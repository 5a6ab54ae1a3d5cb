/*
 * src/cluster/mpi_request.c - rk_cluster_request (docs/cluster.md): a
 * request from a host thread to a remote kernel, or to an exported one
 * of this rank, waited for in one of CL_NWAIT slots instead of through a
 * proxy. A small request to a peer, with nothing of this process's
 * staged for it, goes by the requesting thread's own MPI calls
 * (request_by_mpi), and its answer comes back into a receive that
 * thread posted; any other is staged for the progress thread, which
 * answers the slot (rk__cl_waiter_answer).
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster/cluster_int.h"
#include "cluster/mpi_trace.h"
#include "cluster/mpi_wake.h"
#include "runtime/ids.h"

#ifdef RK_CLUSTER_TRACE
/* The requesting thread's stamps (mpi_trace.h): entry, answer seen,
 * slot answered. */
static _Thread_local uint64_t tr_entry, tr_seen, tr_answered;
#endif

/* Writes the answer into slot w's caller's buffers: reply frame f (rc
 * RK_OK) or error rc (f NULL, or an ERROR frame). The writer claimed the
 * slot (W_WAITING -> W_BUSY); no one else touches the buffers. */
static void
waiter_fill(cl_waiter *w, const rk__cl_frame *f, int rc)
{
    w->rc = rc;
    if (f != NULL && rc == RK_OK) {
        w->len = f->len;
        if (f->len > w->cap)
            w->rc = RK_EMSGSIZE;
        else if (f->len != 0)
            memcpy(w->buf, f->payload, f->len);
        if (w->hdr != NULL) {
            *w->hdr = rk__cl_frame_header(f);
            w->hdr->payload_len = f->len;
            w->hdr->send_ns = f->send_ns;
        }
    }
    /* Release: the caller that sees DONE (acquire) sees the answer. */
    atomic_store_explicit(&w->state, W_DONE, memory_order_release);
}

/* Answers waiting slot i: with reply frame f (rc RK_OK), or with error
 * rc (f NULL: every waiter on rank, else the one f's correlation id
 * names). True if a waiter took it. Progress thread (and any thread for
 * a request of its own rank's). Under the slot's lock, so the caller
 * cannot give up and arm the slot again (both under the lock) between
 * the id check and the claim; the requesting thread's own claim of an
 * answer it received (mpi_answer) takes no lock, and then the claim
 * here fails. */
bool
rk__cl_waiter_answer(
    rk_cluster *cl, uint32_t i, const rk__cl_frame *f, int rc, int rank)
{
    cl_waiter *w = &cl->wait[i];
    bool took = false;
    int st = W_WAITING;

    if (i >= CL_NWAIT
        || atomic_load_explicit(&w->state, memory_order_relaxed) != W_WAITING)
        return false;
    pthread_mutex_lock(&w->lock);
    /* Acquire (load and claim): pairs with the release store of WAITING
     * in waiter_arm, so the id, rank and buffers read are this
     * request's. */
    if (atomic_load_explicit(&w->state, memory_order_acquire) == W_WAITING
        && (f != NULL ? memcmp(w->id.b, f->corr.b, 16) == 0 : w->rank == rank)
        && atomic_compare_exchange_strong_explicit(&w->state, &st, W_BUSY,
            memory_order_acquire, memory_order_relaxed)) {
        waiter_fill(w, f, rc);
        if (w->sleeping)
            pthread_cond_signal(&w->cond);
        took = true;
    }
    pthread_mutex_unlock(&w->lock);
    return took;
}

/* Takes a free waiting slot: its index, or -1 when all are in use. */
static int
waiter_get(rk_cluster *cl)
{
    uint64_t m = atomic_load_explicit(&cl->wfree, memory_order_relaxed);

    while (m != 0) {
        int i = __builtin_ctzll(m);
        /* acq_rel: the slot's last user's writes (under its lock as
         * well) come before ours. */
        if (atomic_compare_exchange_weak_explicit(&cl->wfree, &m,
                m & ~(UINT64_C(1) << i), memory_order_acq_rel,
                memory_order_relaxed))
            return i;
    }
    return -1;
}

static void
waiter_put(rk_cluster *cl, int i)
{
    /* Release: pairs with the acq_rel take in waiter_get. */
    atomic_fetch_or_explicit(
        &cl->wfree, UINT64_C(1) << i, memory_order_release);
}

/* How long a waiter spins before it parks: adapted as the runtime's own
 * waits are (full after a spin that found the reply, halved after one
 * that ran out): a ping-pong with a peer that takes a whole round trip
 * parks at once and leaves the core to the threads that answer. */
#define CL_WSPIN_MAX_NS   20000u
#define CL_WSPIN_FLOOR_NS 1000u

static int
waiter_wait(rk_cluster *cl, cl_waiter *w, uint64_t deadline)
{
    uint32_t b = atomic_load_explicit(&cl->wspin_ns, memory_order_relaxed);
    uint64_t budget = b != 0 ? b : CL_WSPIN_MAX_NS, t0 = rk_now_ns();
    int rc;

    for (uint32_t i = 1;; i++) {
        /* Acquire: pairs with the release store of DONE
         * (rk__cl_waiter_answer). */
        if (atomic_load_explicit(&w->state, memory_order_acquire) == W_DONE) {
            if (i > 1 && b != 0)
                atomic_store_explicit(&cl->wspin_ns, 0, memory_order_relaxed);
            break;
        }
        if (i % 64 == 0) {
            uint64_t now = rk_now_ns();
            if (now - t0 >= budget || now >= deadline) {
                uint32_t half = (uint32_t)(budget / 2);
                atomic_store_explicit(&cl->wspin_ns,
                    half < CL_WSPIN_FLOOR_NS ? CL_WSPIN_FLOOR_NS : half,
                    memory_order_relaxed);
                break;
            }
            sched_yield();
        }
        rk__cpu_relax();
    }
    pthread_mutex_lock(&w->lock);
    while (atomic_load_explicit(&w->state, memory_order_relaxed) == W_WAITING
        && rk_now_ns() < deadline) {
        struct timespec ts;
        w->sleeping = true;
        ts.tv_sec = (time_t)(deadline / 1000000000u);
        ts.tv_nsec = (long)(deadline % 1000000000u);
        if (deadline == UINT64_MAX) {
            pthread_cond_wait(&w->cond, &w->lock);
        } else {
            pthread_cond_timedwait(&w->cond, &w->lock, &ts);
        }
        w->sleeping = false;
    }
    if (atomic_load_explicit(&w->state, memory_order_relaxed) == W_DONE) {
        rc = w->rc;
    } else {
        rc = RK_ETIMEDOUT; /* a reply now finds the slot free: ignored */
    }
    atomic_store_explicit(&w->state, W_FREE, memory_order_relaxed);
    pthread_mutex_unlock(&w->lock);
    return rc;
}

/* Posts the receive of slot i's answer from rank (requesting thread):
 * posted before the request goes, the answer lands in it directly, as a
 * blocking MPI_Recv's would, instead of waiting in MPI's unexpected
 * queue for a probe and a second copy. */
static int
answer_post(rk_cluster *cl, int i, int rank)
{
    cl_waiter *w = &cl->wait[i];
    int mrc = MPI_Irecv(
        w->rbuf, CL_CALL_MAX, MPI_BYTE, rank, i, cl->rcomm, &w->rreq);

    if (mrc != MPI_SUCCESS) {
        w->rreq = MPI_REQUEST_NULL;
        return rk__cl_mpi_fail(mrc, "MPI_Irecv");
    }
    return RK_OK;
}

/* Takes the answer that came on rcomm for slot i, if it is there: true
 * once the slot is answered (by this or by the progress thread). An
 * answer for an earlier request of the slot (one that timed out) is
 * dropped and the receive posted again. Requesting thread. */
static bool
mpi_answer(rk_cluster *cl, int i, int rank)
{
    cl_waiter *w = &cl->wait[i];
    MPI_Status st;
    int done = 0, count = 0;
    rk__cl_batch b;
    rk__cl_frame f;
    size_t off = RK__CL_BATCH_HDR;

    if (w->rreq == MPI_REQUEST_NULL
        || MPI_Test(&w->rreq, &done, &st) != MPI_SUCCESS || !done)
        return false;
    w->rreq = MPI_REQUEST_NULL;
    CL_TR_SET(tr_seen);
    MPI_Get_count(&st, MPI_BYTE, &count);
    if (count > 0 && rk__cl_batch_parse(w->rbuf, (size_t)count, &b) == RK_OK
        && rk__cl_frame_next(w->rbuf, (size_t)count, &off, &f) == RK_OK
        && (f.kind == RK__CL_REPLY || f.kind == RK__CL_ERROR)) {
        bool err = f.kind == RK__CL_ERROR;
        int want = W_WAITING;

        /* The slot is this thread's: it claims it without the lock
         * (rk__cl_waiter_answer says why that is safe). Acquire on
         * success: nothing to pair with but the slot's own history. */
        if (memcmp(w->id.b, f.corr.b, 16) != 0
            || !atomic_compare_exchange_strong_explicit(&w->state, &want,
                W_BUSY, memory_order_acquire, memory_order_relaxed))
            STAT(cl, late_replies, 1);
        else {
            waiter_fill(w, &f, err ? f.aux : RK_OK);
            if (err)
                STAT(cl, remote_errors, 1);
            else
                WSTAT(w, replies_by_mpi);
        }
        CL_TR_ADD(CL_TR_REP_WIRE, f.send_ns, tr_seen);
        CL_TR_SET(tr_answered);
        CL_TR_ADD(CL_TR_C_DECODE, tr_seen, tr_answered);
    }
    if (atomic_load_explicit(&w->state, memory_order_acquire) == W_DONE)
        return true;
    answer_post(cl, i, rank); /* that one was not ours: wait on */
    return false;
}

/* Ends the requesting thread's wait in slot w: the answer's code if one
 * came, else rc; the slot is FREE after. An answer being written (BUSY:
 * the progress thread holds the lock while it writes) is waited for.
 * Answered, the slot is freed without the lock: no answerer touches it
 * once it is DONE. Otherwise it is freed under the lock, so an answerer
 * that read WAITING cannot write to buffers the caller no longer has. */
static int
waiter_release(cl_waiter *w, int rc)
{
    /* Acquire: pairs with waiter_fill's release store of DONE. */
    int st = atomic_load_explicit(&w->state, memory_order_acquire);

    while (st == W_BUSY) {
        rk__cpu_relax();
        st = atomic_load_explicit(&w->state, memory_order_acquire);
    }
    if (st == W_DONE) {
        rc = w->rc;
    } else {
        pthread_mutex_lock(&w->lock);
        /* Under the lock no answer is half written: WAITING or DONE. */
        if (atomic_load_explicit(&w->state, memory_order_acquire) == W_DONE)
            rc = w->rc;
        atomic_store_explicit(&w->state, W_FREE, memory_order_relaxed);
        pthread_mutex_unlock(&w->lock);
        return rc;
    }
    atomic_store_explicit(&w->state, W_FREE, memory_order_relaxed);
    return rc;
}

/*
 * rk_cluster_request by the requesting thread's own MPI calls (MPI
 * THREAD_MULTIPLE, a small request, nothing of this process's staged for
 * the peer): the request goes as a one-frame batch (a CALL, no credit)
 * on comm, where the peer's progress thread takes it like any batch, and
 * the answer comes back on rcomm tagged with the slot. No progress thread
 * hand-off on this side. The wait polls MPI (Open MPI has nothing to
 * block on): the adaptive spin of waiter_wait, then polling that yields
 * the CPU for poll_ns, then naps growing to idle_sleep_max_ns, as the
 * progress thread waits. An answer the progress thread hands over (an
 * error staged by the peer, a peer declared dead) ends the wait too.
 * deadline: rk_now_ns() time (UINT64_MAX: none). The slot is WAITING;
 * returns as waiter_wait, with the slot FREE.
 */
static int
request_by_mpi(rk_cluster *cl, int slot, int rank, rk__cl_frame *f,
    const void *req, uint64_t deadline)
{
    cl_waiter *w = &cl->wait[slot];
    size_t size = RK__CL_BATCH_HDR + rk__cl_frame_size(f->len);
    uint32_t b = atomic_load_explicit(&cl->wspin_ns, memory_order_relaxed);
    uint64_t spin = b != 0 ? b : CL_WSPIN_MAX_NS, t0, now, nap = 2000;
    bool answered = false;
    int rc, mrc, posted, sent = 0;

    if (w->sbuf == NULL) {
        if ((w->sbuf = malloc(2 * CL_CALL_MAX)) == NULL) {
            rc = rk__fail(RK_ENOMEM, "rk_cluster_request: MPI buffers");
            goto out;
        }
        CL_MPI_BUFFER(w->sbuf, 2 * CL_CALL_MAX);
        w->rbuf = w->sbuf + CL_CALL_MAX;
    }
    f->kind = RK__CL_CALL;
    f->aux = (int32_t)(CL_DIRECT | CL_BYMPI | (uint32_t)slot);
    CL_TR_STAMP(tr_isend);
    CL_TR_ADD(CL_TR_C_PREP, tr_entry, tr_isend);
    CL_TR_SET(f->send_ns); /* traced: the request's transit */
    rk__cl_batch_write(w->sbuf, 0, 1, 0);
    rk__cl_frame_write(w->sbuf + RK__CL_BATCH_HDR, f, req);
    mrc = MPI_Isend(
        w->sbuf, (int)size, MPI_BYTE, rank, CL_TAG, cl->comm, &w->sreq);
    CL_TR_STAMP(tr_sent);
    CL_TR_ADD(CL_TR_C_ISEND, tr_isend, tr_sent);
    if (mrc != MPI_SUCCESS) {
        w->sreq = MPI_REQUEST_NULL;
        rc = rk__cl_mpi_fail(mrc, "MPI_Isend");
        goto out;
    }
    WSTAT(w, sent_by_mpi);
    /* The answer's receive is posted while the request travels (an
     * answer quicker than that waits in MPI's unexpected queue and still
     * matches it). */
    posted = answer_post(cl, slot, rank);
    /* This thread makes MPI progress now: the progress thread naps. */
    atomic_fetch_add_explicit(&cl->driving, 1, memory_order_relaxed);
    now = t0 = rk_now_ns();
    rk__cl_sent_to(cl, rank, t0); /* the request went just now */
    CL_TR_STAMP(tr_posted);
    CL_TR_ADD(CL_TR_C_IRECV, tr_sent, tr_posted);
    for (uint32_t i = 1; posted == RK_OK; i++) {
        if (!sent
            && MPI_Test(&w->sreq, &sent, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            sent = 1; /* the peer's failure shows in its state */
        if (mpi_answer(cl, slot, rank)
            || atomic_load_explicit(&w->state, memory_order_acquire)
                == W_DONE) {
            answered = true;
            CL_TR_COUNT(CL_TR_C_TESTS, i);
            break;
        }
        /* Each try is a few hundred ns of MPI: the clock and the peer's
         * state are read every 8th. */
        if (i % 8 != 0)
            continue;
        if (atomic_load(&cl->peers[rank].state) != PEER_LIVE) {
            rk__cl_waiter_answer(
                cl, (uint32_t)slot, NULL, RK_EUNREACHABLE, rank);
            answered = true;
            break;
        }
        now = rk_now_ns();
        if (now >= deadline)
            break;
        if (now - t0 < spin) {
            if (i % 64 == 0)
                sched_yield();
        } else if (now - t0 < spin + (uint64_t)cl->cfg.poll_ns) {
            sched_yield();
        } else {
            struct timespec ts = { 0, (long)nap };
            nanosleep(&ts, NULL);
            if (nap * 2 <= (uint64_t)cl->cfg.idle_sleep_max_ns)
                nap *= 2;
        }
    }
    atomic_fetch_sub_explicit(&cl->driving, 1, memory_order_relaxed);
    /* The spin adapts as waiter_wait's does: full after an answer found
     * while spinning, halved after one that ran out. */
    if (answered && now - t0 < spin) {
        if (b != 0)
            atomic_store_explicit(&cl->wspin_ns, 0, memory_order_relaxed);
    } else {
        uint32_t half = (uint32_t)(spin / 2);
        atomic_store_explicit(&cl->wspin_ns,
            half < CL_WSPIN_FLOOR_NS ? CL_WSPIN_FLOOR_NS : half,
            memory_order_relaxed);
    }
    /* The request is small enough to go eagerly: its send completes
     * locally. Should it not, the buffers are left to MPI (the slot gets
     * new ones). */
    if (!sent) {
        uint64_t until = rk_now_ns() + 100000000;
        while (!sent && rk_now_ns() < until)
            if (MPI_Test(&w->sreq, &sent, MPI_STATUS_IGNORE) != MPI_SUCCESS)
                sent = 1;
        if (!sent) {
            MPI_Request_free(&w->sreq);
            w->sbuf = NULL;
        }
    }
    w->sreq = MPI_REQUEST_NULL;
    /* Not answered: an answer now finds the slot free and is dropped. */
    rc = posted != RK_OK ? posted : RK_ETIMEDOUT;
out:
    if (w->rreq != MPI_REQUEST_NULL) {
        /* No answer by MPI (a time-out, an error the progress thread
         * handed over): withdraw the receive. One that matched after all
         * is a late answer, dropped. */
        MPI_Cancel(&w->rreq);
        MPI_Wait(&w->rreq, MPI_STATUS_IGNORE);
        w->rreq = MPI_REQUEST_NULL;
    }
    return waiter_release(w, rc);
}

/* Fills slot i's waiter for a request with id to rank (the caller's
 * reply buffers) and marks it WAITING. */
static void
waiter_arm(rk_cluster *cl, int i, const rk_uuid *id, int rank,
    rk_msg_header *reply_hdr, void *reply, size_t cap)
{
    cl_waiter *w = &cl->wait[i];

    pthread_mutex_lock(&w->lock);
    w->id = *id;
    w->rank = rank;
    w->hdr = reply_hdr;
    w->buf = reply;
    w->cap = cap;
    w->len = 0;
    w->rc = RK_OK;
    /* Release: pairs with rk__cl_waiter_answer's acquire load (it reads
     * the fields above once it sees WAITING). Under the lock as well, so
     * an answerer never sees the slot armed again between its id check
     * and its claim. */
    atomic_store_explicit(&w->state, W_WAITING, memory_order_release);
    pthread_mutex_unlock(&w->lock);
}

/*
 * rk_cluster_request to a kernel of this rank that the cluster exports
 * (without local_output): the progress thread reads its outputs
 * (drain_poll), so an rk_request of its own would race it for the reply.
 * The request goes in with its route back recorded as a remote one's is
 * (served: this rank and slot), and drain_poll hands the reply to the
 * slot (rk__cl_reply_out). The slot is taken; returns as waiter_wait, with the
 * slot given back.
 */
static int
request_local(rk_cluster *cl, cl_export *e, int slot,
    const rk_request_options *opts, const void *req, size_t req_len,
    rk_msg_header *reply_hdr, void *reply, size_t cap, size_t *reply_len)
{
    cl_waiter *w = &cl->wait[slot];
    uint64_t deadline = rk__deadline(opts->timeout_ns);
    rk__cl_frame f;
    rk_msg_header h;
    rk_kernel k;
    int rc;

    memset(&f, 0, sizeof(f));
    f.priority = opts->priority;
    f.type_id = opts->type_id;
    f.flags = RK_MSG_F_REQUEST;
    f.id = rk__next_id();
    h = rk__cl_frame_header(&f);
    waiter_arm(cl, slot, &f.id, cl->rank, reply_hdr, reply, cap);
    rk__cl_idmap_put(
        &cl->served, &f.id, cl->rank, CL_DIRECT | (uint32_t)slot, f.priority);
    rc = rk_kernel_lookup(cl->rt, e->id, &k);
    if (rc == RK_OK)
        rc = rk_send_frame(cl->rt, k, &h, req, req_len, opts->timeout_ns);
    if (rc == RK_OK) {
        rk__cl_wake_progress(cl); /* it polls while the kernel answers */
        rc = waiter_wait(cl, w, deadline);
    } else {
        rk__cl_idmap_take(&cl->served, &f.id, NULL, NULL);
        pthread_mutex_lock(&w->lock);
        atomic_store_explicit(&w->state, W_FREE, memory_order_relaxed);
        pthread_mutex_unlock(&w->lock);
    }
    *reply_len = w->len;
    waiter_put(cl, slot);
    return rc;
}

/* The detail of request rc to proxy px's kernel (op: the call that
 * asked); len: the reply's length for RK_EMSGSIZE. */
static int
request_fail(rk_cluster *cl, const cl_proxy *px, const char *op, int rc,
    size_t len, size_t cap)
{
    switch (rc) {
    case RK_OK:
        return RK_OK;
    case RK_ETIMEDOUT:
        return rk__fail(rc, "%s: no reply from '%s' in time", op, px->id);
    case RK_EUNREACHABLE:
        return rk__fail(rc, "%s: kernel '%s': rank %d %s", op, px->id,
            px->rank, rk__cl_peer_fate(cl, px->rank));
    case RK_EMSGSIZE:
        return rk__fail(rc, "%s: %zu-byte reply from '%s', %zu-byte buffer",
            op, len, px->id, cap);
    default:
        return rk__fail(rc, "%s: kernel '%s' on rank %d: %s", op, px->id,
            px->rank, rk_strerror(rc));
    }
}

/*
 * A request to proxy px's kernel in waiting slot `slot` (taken): f holds
 * its envelope (id, priority, type, flags; the rest is filled here),
 * until is its rk_now_ns() deadline (UINT64_MAX: none). By the caller's
 * own MPI calls when it can, else staged. Returns with the slot given
 * back, the reply in the caller's buffers, and the detail of a failure
 * (op: the call that asked).
 */
static int
request_px(rk_cluster *cl, const cl_proxy *px, int slot, rk__cl_frame *f,
    const void *req, uint64_t until, rk_msg_header *reply_hdr, void *reply,
    size_t cap, size_t *reply_len, const char *op)
{
    cl_waiter *w = &cl->wait[slot];
    int64_t timeout_ns = RK_WAIT_FOREVER;
    int rc;

    f->kind = RK__CL_DATA;
    f->flags |= RK_MSG_F_REQUEST;
    f->target = px->target;
    f->aux = (int32_t)(CL_DIRECT | (uint32_t)slot);
    waiter_arm(cl, slot, &f->id, px->rank, reply_hdr, reply, cap);
    if (cl->multiple
        && RK__CL_BATCH_HDR + rk__cl_frame_size(f->len) <= CL_CALL_MAX
        && atomic_load_explicit(
               &cl->peers[px->rank].unsent, memory_order_acquire)
            == 0) {
        /* Nothing this process staged for the peer is waiting to be
         * sent: this request cannot overtake one. */
        rc = request_by_mpi(cl, slot, px->rank, f, req, until);
        *reply_len = w->len;
        waiter_put(cl, slot);
        rc = request_fail(cl, px, op, rc, *reply_len, cap);
#ifdef RK_CLUSTER_TRACE
        {
            uint64_t end = rk__cl_tsc();
            if (tr_answered != 0) {
                CL_TR_ADD(CL_TR_C_DONE, tr_answered, end);
                CL_TR_ADD(CL_TR_C_TOTAL, tr_entry, end);
            }
            tr_answered = tr_entry = 0;
        }
#endif
        return rc;
    }
    if (until != UINT64_MAX) {
        uint64_t now = rk_now_ns();
        timeout_ns = until > now ? (int64_t)(until - now) : RK_NO_WAIT;
    }
    rc = rk__cl_stage_frame(cl, px->rank, 0, f, req, timeout_ns);
    if (rc == RK_OK) {
        STAT(cl, forwarded, 1);
        rc = waiter_wait(cl, w, until);
        *reply_len = w->len;
    } else {
        pthread_mutex_lock(&w->lock);
        atomic_store_explicit(&w->state, W_FREE, memory_order_relaxed);
        pthread_mutex_unlock(&w->lock);
    }
    waiter_put(cl, slot);
    return request_fail(cl, px, op, rc, *reply_len, cap);
}

/* A request that came into proxy px as a direct call (rk_request or
 * rk_kernel_call_reply on its handle; mpi_proxy.c): h and its payload,
 * the caller's deadline (0: none). RK_EBUSY (nothing done) when every
 * waiting slot is in use. */
int
rk__cl_request_call(rk_cluster *cl, const cl_proxy *px, const rk_msg_header *h,
    const void *req, size_t len, uint64_t deadline, rk_msg_header *reply_hdr,
    void *reply, size_t cap, size_t *reply_len)
{
    rk__cl_frame f;
    int slot;

    CL_TR_SET(tr_entry);
    if (len > UINT32_MAX)
        return rk__fail(RK_EMSGSIZE, "request: %zu-byte request", len);
    if ((slot = waiter_get(cl)) < 0)
        return RK_EBUSY;
    rk__cl_frame_from_header(&f, h, len);
    return request_px(cl, px, slot, &f, req,
        deadline == 0 ? UINT64_MAX : deadline, reply_hdr, reply, cap,
        reply_len, "request");
}

int
rk_cluster_request(rk_cluster *cl, const char *id,
    const rk_request_options *opts, const void *req, size_t req_len,
    rk_msg_header *reply_hdr, void *reply, size_t cap, size_t *reply_len)
{
    static const rk_request_options defaults = RK_REQUEST_OPTIONS_INIT;
    const cl_proxy *px;
    rk__cl_frame f;
    int slot, rc;
    rk_kernel k;

    CL_TR_SET(tr_entry);
    if (cl == NULL || id == NULL || reply_len == NULL
        || (req == NULL && req_len != 0) || (reply == NULL && cap != 0))
        return rk__fail(RK_EINVAL, "rk_cluster_request: NULL argument");
    if (opts == NULL)
        opts = &defaults;
    /* Not a remote kernel, or every slot busy: the ordinary request (to a
     * local kernel, or through the proxy). */
    if ((px = rk__cl_proxy_named(cl, id)) == NULL) {
        cl_export *e = rk__cl_export_named(cl, id);
        if (e != NULL && !e->cfg.local_output
            && (slot = waiter_get(cl)) >= 0) {
            /* request_local: the runtime's refusal and detail */
            rc = request_local(cl, e, slot, opts, req, req_len, reply_hdr,
                reply, cap, reply_len);
            if (rc == RK_ETIMEDOUT)
                return rk__fail(
                    rc, "rk_cluster_request: no reply from '%s' in time", id);
            if (rc == RK_EMSGSIZE)
                return rk__fail(rc,
                    "rk_cluster_request: %zu-byte reply from '%s', %zu-byte "
                    "buffer",
                    *reply_len, id, cap);
            return rc;
        }
    }
    if (px == NULL || (slot = waiter_get(cl)) < 0) {
        if ((rc = rk_kernel_lookup(cl->rt, id, &k)) != RK_OK)
            return rc;
        return rk_request_opts(
            cl->rt, k, opts, req, req_len, reply_hdr, reply, cap, reply_len);
    }
    if (req_len > UINT32_MAX) {
        waiter_put(cl, slot);
        return rk__fail(
            RK_EMSGSIZE, "rk_cluster_request: %zu-byte request", req_len);
    }
    memset(&f, 0, sizeof(f));
    f.priority = opts->priority;
    f.type_id = opts->type_id;
    f.len = (uint32_t)req_len;
    f.id = rk__next_id();
    rc = request_px(cl, px, slot, &f, req, rk__deadline(opts->timeout_ns),
        reply_hdr, reply, cap, reply_len, "rk_cluster_request");
    return rc;
}
