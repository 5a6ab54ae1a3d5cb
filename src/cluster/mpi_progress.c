/*
 * src/cluster/mpi_progress.c - the progress thread's loop
 * (docs/cluster.md): each round receives (mpi_recv.c), takes what
 * exported kernels put out (drain_poll: a reply to a peer's request goes
 * back to it, anything else to the export's mailbox, read with
 * rk_cluster_recv), returns credits, sends (mpi_send.c), declares silent
 * peers dead, and at a leave runs the goodbye; then it polls for a
 * while, and naps when idle (mpi_wake.c: how it waits, who wakes it). rk__cl_stop stops it and the ingress
 * threads.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster/cluster_int.h"
#include "cluster/mpi_wake.h"

/* While a thread waits for its answer by polling MPI itself
 * (request_by_mpi), an idle progress thread naps this long between
 * rounds instead of polling: the two would share the rank's core. */
#ifndef CL_DRIVEN_NAP_NS
#define CL_DRIVEN_NAP_NS 200000
#endif
/* The progress thread's polling yields the CPU every this many idle
 * rounds. */
#ifndef CL_POLL_YIELD
#define CL_POLL_YIELD 8
#endif
/* An idle polling round ends with this many tests of the receives
 * alone: a whole round (every export's output, every peer) takes a few
 * hundred ns, a test tens, and a batch that comes is seen at the next
 * test. */
#ifndef CL_HOT_POLLS
#define CL_HOT_POLLS 4
#endif

/* Puts an output in e's mailbox (progress thread; the caller saw room:
 * only this thread adds). */
static void
mail_put(cl_export *e, const rk_msg_header *h, const void *data, size_t len)
{
    cl_mail *slot;
    uint8_t *copy = malloc(len ? len : 1);

    if (copy == NULL)
        return;
    memcpy(copy, data, len);
    pthread_mutex_lock(&e->lock);
    slot = &e->mail[(e->mhead + e->mcount) % CL_MAILBOX];
    slot->hdr = *h;
    slot->len = len;
    slot->data = copy;
    e->mcount++;
    atomic_store_explicit(&e->mfill, e->mcount, memory_order_relaxed);
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

/* Takes what e's kernel put out, without waiting (progress thread, which
 * polls while it is active and at each idle wake-up): a reply to a
 * request from a peer goes back to it, anything else to the mailbox
 * (rk_cluster_recv) while it has room; a full mailbox leaves the output
 * queued, so the kernel feels it. No thread of its own: the round trip
 * saves a hand-off. True if it took anything. */
static bool
drain_poll(rk_cluster *cl, cl_export *e)
{
    rk_msg_header h;
    size_t len;
    int rc = RK_OK;
    bool did = false;

    for (int i = 0; i < 64 && e->obuf != NULL; i++) {
        int rank;
        uint32_t proxy;

        if (atomic_load_explicit(&e->mfill, memory_order_relaxed)
            >= CL_MAILBOX)
            break;
        if (!e->k_ok) {
            if (rk_kernel_lookup(cl->rt, e->id, &e->k) != RK_OK)
                break;
            e->k_ok = true;
        }
        rc = rk_recv(cl->rt, e->k, &h, e->obuf, e->ocap, &len, RK_NO_WAIT);
        if (rc == RK_ESTALE)
            e->k_ok = false;
        if (rc == RK_EMSGSIZE && len > e->ocap) {
            /* Bigger than the export said: the output stays first in
             * line; take it with a buffer that fits. */
            uint8_t *grown = realloc(e->obuf, len);
            if (grown == NULL)
                break;
            e->obuf = grown;
            e->ocap = len;
            i--;
            continue;
        }
        if (rc != RK_OK)
            break;
        did = true;
        if (!rk_uuid_is_nil(&h.correlation_id)
            && rk__cl_idmap_take(
                &cl->served, &h.correlation_id, &rank, &proxy)) {
            rk__cl_reply_out(cl, rank, proxy, &h, e->obuf, len);
            continue;
        }
        mail_put(e, &h, e->obuf, len);
    }
    return did;
}

/* Whether an idle nap may grow to idle_park_ns: every peer can poke us
 * (mpi_wake.c), and nothing is in hand that would go on without a
 * wake-up: no peer's request in a kernel (its reply comes out of the
 * kernel's output, which only this thread's rounds read), no frame held
 * for a full kernel, no batch in MPI's hands (a large one needs this
 * side's progress to be sent). */
static bool
may_park(rk_cluster *cl)
{
    if (!cl->pokeable || rk__cl_idmap_size(&cl->served) != 0)
        return false;
    for (int r = 0; r < cl->size; r++) {
        cl_peer *p = &cl->peers[r];

        if (r == cl->rank || atomic_load(&p->state) != PEER_LIVE)
            continue;
        if (p->held.len != 0)
            return false;
        for (int i = 0; i < CL_NSEND; i++) {
            int done = 0;

            if (p->sb[i].req != MPI_REQUEST_NULL
                && (MPI_Test(&p->sb[i].req, &done, MPI_STATUS_IGNORE)
                        != MPI_SUCCESS
                    || !done))
                return false; /* a failed test: the next round sees it */
        }
    }
    return true;
}

static bool
all_quiet(rk_cluster *cl)
{
    for (int r = 0; r < cl->size; r++) {
        cl_peer *p = &cl->peers[r];
        if (r == cl->rank || atomic_load(&p->state) != PEER_LIVE)
            continue;
        if (!p->bye_got || p->held.len != 0)
            return false;
    }
    return true;
}

void *
rk__cl_progress_main(void *arg)
{
    rk_cluster *cl = arg;
    uint64_t last_act = rk_now_ns(), leave_by = 0;
    int64_t nap = 2000;
    uint32_t idle_rounds = 0;

    for (int i = 0; i < CL_NRECV; i++)
        MPI_Start(&cl->rreq[i]);
    for (;;) {
        uint64_t now = rk_now_ns();
        bool did = rk__cl_poll_recv(cl, now);

        for (size_t i = 0; i < cl->n_exports; i++)
            if (!cl->exports[i].cfg.local_output)
                did |= drain_poll(cl, &cl->exports[i]);

        atomic_store_explicit(&cl->work, 0, memory_order_relaxed);
        for (int r = 0; r < cl->size; r++) {
            cl_peer *p = &cl->peers[r];

            if (r == cl->rank || atomic_load(&p->state) != PEER_LIVE)
                continue;
            if (atomic_load_explicit(&p->owed_async, memory_order_relaxed))
                p->owed += atomic_exchange(&p->owed_async, 0);
            if (p->held.len != 0)
                did |= rk__cl_retry_held(cl, r);
            did |= rk__cl_pump(cl, p, now);
            if (!p->bye_got
                && rk__cl_ns_since(p->last_heard, now)
                    > (uint64_t)cl->cfg.heartbeat_ns)
                rk__cl_peer_down(cl, r, PEER_DEAD);
        }
        if (atomic_load(&cl->stop)) {
            if (leave_by == 0)
                leave_by = now + (uint64_t)cl->cfg.leave_timeout_ns;
            for (int r = 0; r < cl->size; r++) {
                cl_peer *p = &cl->peers[r];
                bool empty;

                pthread_mutex_lock(&p->lock); /* producers append to stage */
                empty = p->backlog[0].off == p->backlog[0].len
                    && p->stage[0].len == 0;
                pthread_mutex_unlock(&p->lock);

                if (r == cl->rank || p->bye_sent
                    || atomic_load(&p->state) != PEER_LIVE)
                    continue;
                if ((empty
                        || now > leave_by
                                - (uint64_t)cl->cfg.leave_timeout_ns / 2)
                    && rk__cl_flush(cl, p, RK__CL_B_BYE, now))
                    p->bye_sent = true;
            }
            bool sent_all = true;
            for (int r = 0; r < cl->size; r++)
                if (r != cl->rank && !cl->peers[r].bye_sent
                    && atomic_load(&cl->peers[r].state) == PEER_LIVE)
                    sent_all = false;
            if ((sent_all && all_quiet(cl)) || now > leave_by)
                break;
        }
        if (did) {
            last_act = now;
            nap = 2000;
            continue;
        }
        if (atomic_load_explicit(&cl->driving, memory_order_relaxed) > 0) {
            rk__cl_idle_wait(cl, CL_DRIVEN_NAP_NS);
            continue;
        }
        if (rk__cl_ns_since(last_act, now) < (uint64_t)cl->cfg.poll_ns) {
            /* Poll, yielding the CPU every few rounds (a round is a few
             * hundred ns of MPI tests): a yield per round would add a
             * system call to the time a request waits here. */
            if (++idle_rounds % CL_POLL_YIELD == 0)
                sched_yield();
            rk__cl_sendbuf_reap(cl);
            for (int j = 0; j < CL_HOT_POLLS; j++)
                if (rk__cl_poll_recv(cl, now)) {
                    /* A batch received is activity: peers that sent
                     * within poll_ns count on this thread polling
                     * (rk__cl_sent_to). */
                    last_act = now;
                    break;
                }
            continue;
        }
        {
            int64_t cap = cl->cfg.idle_sleep_max_ns;

            if (nap * 2 > cap && may_park(cl))
                cap = cl->cfg.idle_park_ns;
            if (rk__cl_idle_wait(cl, nap)) {
                last_act = rk_now_ns(); /* woken: poll again */
                nap = 2000;
            } else {
                nap = nap * 2 > cap ? cap : nap * 2;
            }
        }
    }
    cl->clean = true;
    for (int r = 0; r < cl->size; r++) {
        cl_peer *p = &cl->peers[r];
        if (r == cl->rank)
            continue;
        if (atomic_load(&p->state) == PEER_DEAD || !p->bye_got)
            cl->clean = false;
        rk__cl_peer_down(cl, r, PEER_GONE);
    }
    /* Our last sends: wait for them briefly, then give up on them. */
    for (int r = 0; r < cl->size; r++) {
        for (int i = 0; i < CL_NSEND; i++) {
            MPI_Request *q = &cl->peers[r].sb[i].req;
            uint64_t until = rk_now_ns() + 100000000;
            int done = 0;

            while (*q != MPI_REQUEST_NULL && !done && rk_now_ns() < until)
                if (MPI_Test(q, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
                    break;
            if (*q != MPI_REQUEST_NULL && !done) {
                cl->clean = false;
                MPI_Request_free(q);
            }
        }
    }
    for (int i = 0; i < CL_NRECV; i++) {
        MPI_Cancel(&cl->rreq[i]);
        MPI_Wait(&cl->rreq[i], MPI_STATUS_IGNORE);
        MPI_Request_free(&cl->rreq[i]);
    }
    atomic_store(&cl->stopped, true);
    return NULL;
}

/* Stops the progress and ingress threads (once; later calls wait for the
 * first). */
void
rk__cl_stop(rk_cluster *cl)
{
    pthread_mutex_lock(&cl->stop_lock);
    if (!cl->stop_done) {
        atomic_store(&cl->stop, true);
        rk__cl_wake_progress(cl);
        if (cl->progress_started)
            pthread_join(cl->progress, NULL);
        atomic_store(&cl->stopped, true);
        /* Under export_lock: no export (and ingress thread) is added
         * after this (rk_cluster_announce checks it there). */
        pthread_mutex_lock(&cl->export_lock);
        atomic_store(&cl->drain_stop, true);
        pthread_mutex_unlock(&cl->export_lock);
        for (size_t i = 0; i < cl->n_exports; i++) {
            cl_export *e = &cl->exports[i];
            pthread_mutex_lock(&e->lock);
            pthread_cond_broadcast(&e->cond);
            pthread_mutex_unlock(&e->lock);
            if (e->ingress_started)
                pthread_join(e->ingress, NULL);
        }
        for (int r = 0; cl->peers != NULL && r < cl->size; r++) {
            pthread_mutex_lock(&cl->peers[r].lock);
            pthread_cond_broadcast(&cl->peers[r].room);
            pthread_mutex_unlock(&cl->peers[r].lock);
        }
        cl->stop_done = true;
    }
    pthread_mutex_unlock(&cl->stop_lock);
}
