/*
 * src/cluster/mpi_ingress.c - the ingress threads of BLOCK exports
 * (docs/cluster.md): a BLOCK kernel that is full must make its sender
 * wait, not refuse, and the progress thread never waits. It hands such
 * frames (rk__cl_ingress_hand) to the export's ingress thread, which
 * sends them with a wait; the credit goes back once the kernel took the
 * message.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster_int.h"
#include "cluster/mpi_wake.h"

/* The ingress thread of a BLOCK export: sends what the progress thread
 * handed over, waiting while the kernel is full (in steps of a second, so
 * that a leave is never stuck behind a kernel that stopped taking input;
 * a step that expires is not counted by the kernel: rk_send_frame_try).
 * A frame given up at a leave or a peer's death is counted rejected by
 * the cluster and answered with an error. The kernel's handle is looked
 * up again only when it went stale. True if the frame took a credit (to
 * return once it is done). */
static bool
ingress_one(rk_cluster *cl, cl_export *e, int src, const rk__cl_frame *f)
{
    rk_msg_header h = rk__cl_frame_header(f);
    bool serve = !e->cfg.local_output && (f->flags & RK_MSG_F_REQUEST);
    bool stale = false;
    int rc;

    STAT(cl, delivered, 1); /* first: see send_direct; undone below */
    for (;;) {
        if (!e->ik_ok) {
            if ((rc = rk_kernel_lookup(cl->rt, e->id, &e->ik)) != RK_OK)
                break;
            e->ik_ok = true;
        }
        if (serve)
            rk__cl_idmap_put(
                &cl->served, &f->id, src, (uint32_t)f->aux, f->priority);
        rc = rk_send_frame_try(
            cl->rt, e->ik, &h, f->payload, f->len, 1000 * 1000000);
        if (rc != RK_OK && serve)
            rk__cl_idmap_take(&cl->served, &f->id, NULL, NULL);
        if (rc == RK_ESTALE && !stale) {
            stale = true; /* relaunched: look it up again, once */
            e->ik_ok = false;
            continue;
        }
        if (rc != RK_ETIMEDOUT || atomic_load(&cl->drain_stop)
            || atomic_load(&cl->peers[src].state) != PEER_LIVE)
            break;
    }
    if (rc != RK_OK) {
        STAT(cl, delivered, (uint64_t)-1);
        STAT(cl, rejected, 1);
        rk__cl_send_error(cl, src, f, rc);
    }
    return f->kind == RK__CL_DATA; /* a CALL took no credit */
}

/* Credits the ingress thread returns at once, at most. */
#define CL_INGRESS_OWE 256u

/* Returns n credits to src (the progress thread sends them). */
static void
ingress_owe(rk_cluster *cl, int src, uint32_t n)
{
    if (n != 0)
        atomic_fetch_add_explicit(
            &cl->peers[src].owed_async, n, memory_order_relaxed);
}

void *
rk__cl_ingress_main(void *arg)
{
    cl_export *e = arg;
    rk_cluster *cl = e->cl;
    cl_buf work = { 0 };

    for (;;) {
        pthread_mutex_lock(&e->lock);
        while (e->in.len == 0 && !atomic_load(&cl->drain_stop)) {
            e->in_waiting = true;
            pthread_cond_wait(&e->cond, &e->lock);
            e->in_waiting = false;
        }
        if (e->in.len == 0) {
            pthread_mutex_unlock(&e->lock);
            break;
        }
        rk__cl_buf_swap(&e->in, &work);
        pthread_mutex_unlock(&e->lock);
        uint32_t done = 0, owed = 0;
        int osrc = -1;
        for (size_t off = 0; off + 4 <= work.len; done++) {
            int src = (int)rk__cl_get32(work.p + off);
            size_t at = off + 4;
            rk__cl_frame f;

            if (rk__cl_frame_next(work.p, work.len, &at, &f) != RK_OK)
                break; /* cannot happen: the progress thread wrote it */
            if (src >= 0 && src < cl->size) {
                /* Credits go back per run of one sender's frames, and
                 * every CL_INGRESS_OWE of them, not per frame: a long
                 * hand-over still returns them as it goes, so the
                 * sender is not held up until its end. */
                if (src != osrc || owed >= CL_INGRESS_OWE) {
                    if (osrc >= 0) {
                        ingress_owe(cl, osrc, owed);
                        rk__cl_wake_progress(cl);
                    }
                    osrc = src;
                    owed = 0;
                }
                owed += ingress_one(cl, e, src, &f);
            }
            off = at;
        }
        if (osrc >= 0)
            ingress_owe(cl, osrc, owed);
        /* Release: the progress thread that sees none pending sees these
         * sends done (it then sends directly, after them). */
        atomic_fetch_sub_explicit(&e->in_pending, done, memory_order_release);
        rk__cl_wake_progress(cl); /* the credits, and direct sends again */
        rk__cl_buf_reset(&work);
    }
    free(work.p);
    return NULL;
}

/* Hands frame f from rank src to e's ingress thread (progress thread: a
 * BLOCK kernel that is full, or frames already waiting there, which f
 * must not overtake). f was decoded from wire bytes (rk__cl_frame_next,
 * which checked them): its header and padded payload are the
 * rk__cl_frame_size(f->len) bytes that end the header at f->payload, and
 * they are copied as they are. RK_OK, or RK_ENOMEM with nothing handed
 * over. */
int
rk__cl_ingress_hand(cl_export *e, int src, const rk__cl_frame *f)
{
    uint8_t *dst = NULL;
    int rc;

    pthread_mutex_lock(&e->lock);
    rc = rk__cl_buf_append(&e->in, 4 + rk__cl_frame_size(f->len), &dst);
    if (rc == RK_OK) {
        /* The ingress thread's sends take room too: look again once it
         * is done. */
        e->room = 0;
        /* Relaxed: only this thread adds; the ingress thread's release
         * subtraction is what the progress thread's acquire load pairs
         * with. */
        atomic_fetch_add_explicit(&e->in_pending, 1, memory_order_relaxed);
        rk__cl_put32(dst, (uint32_t)src);
        memcpy(dst + 4, f->payload - RK__CL_FRAME_HDR,
            rk__cl_frame_size(f->len));
        /* The mailbox's readers wait on cond too: all are woken. */
        if (e->in_waiting)
            pthread_cond_broadcast(&e->cond);
    }
    pthread_mutex_unlock(&e->lock);
    return rc;
}
