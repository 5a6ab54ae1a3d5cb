/*
 * src/cluster/mpi_handle.c - the cluster handle's lifetime: its
 * references (the handle, the control kernel and each running proxy hold
 * one; the last one out frees everything).
 */
#include <pthread.h>
#include <stdlib.h>

#include "cluster/cluster_int.h"
#include "cluster/mpi_wake.h"

/* Frees the handle and everything it holds, whatever part of the join
 * made it (the last reference; no thread of the cluster runs). */
static void
cluster_free(rk_cluster *cl)
{
    if (cl->peers != NULL) {
        for (int r = 0; r < cl->size; r++) {
            cl_peer *p = &cl->peers[r];
            for (int c = 0; c < 2; c++) {
                free(p->stage[c].p);
                free(p->backlog[c].p);
            }
            free(p->held.p);
            for (int i = 0; i < CL_NSEND; i++)
                free(p->sb[i].p);
            pthread_mutex_destroy(&p->lock);
            pthread_cond_destroy(&p->room);
        }
    }
    for (size_t i = 0; i < cl->n_exports; i++) {
        cl_export *e = &cl->exports[i];
        for (uint32_t j = 0; j < e->mcount; j++)
            free(e->mail[(e->mhead + j) % CL_MAILBOX].data);
        free(e->mail);
        free(e->in.p);
        free(e->obuf);
        pthread_mutex_destroy(&e->lock);
        pthread_cond_destroy(&e->cond);
    }
    for (int i = 0; i < CL_NRECV; i++)
        free(cl->rbuf[i]);
    for (int i = 0; i < CL_NWAIT; i++) {
        free(cl->wait[i].sbuf);
        pthread_mutex_destroy(&cl->wait[i].lock);
        pthread_cond_destroy(&cl->wait[i].cond);
    }
    rk__cl_idmap_free(&cl->served);
    rk__cl_idmap_free(&cl->fwd);
    free(cl->peers);
    free(cl->exports);
    free(cl->topics);
    free(cl->proxies);
    pthread_mutex_destroy(&cl->stop_lock);
    pthread_mutex_destroy(&cl->export_lock);
    rk__cl_wake_close(cl);
    free(cl);
}

void
rk__cl_unref(rk_cluster *cl)
{
    /* acq_rel: the last one out sees every other user's writes. */
    if (atomic_fetch_sub_explicit(&cl->refs, 1, memory_order_acq_rel) == 1)
        cluster_free(cl);
}
