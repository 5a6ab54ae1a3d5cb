/*
 * src/cluster/mpi_wake.h - the progress thread's idle wait and its
 * wake-ups (mpi_wake.c): an eventfd for local producers, a UDP poke from
 * peers. Apart from cluster_int.h so that the types there depend on
 * nothing that uses them.
 */
#ifndef RK_SRC_CLUSTER_MPI_WAKE_H
#define RK_SRC_CLUSTER_MPI_WAKE_H

#include "cluster/cluster_int.h"

/* Opens the eventfd and the UDP socket and exchanges the peers'
 * addresses at the join; closes them. */
int rk__cl_wake_setup(rk_cluster *cl);
void rk__cl_wake_close(rk_cluster *cl);
/* The progress thread parks for up to ns or until woken; true if woken. */
bool rk__cl_idle_wait(rk_cluster *cl, int64_t ns);
void rk__cl_wake_fd(rk_cluster *cl);
void rk__cl_poke(rk_cluster *cl, int rank);

/* Wakes the progress thread if it sleeps. The seq_cst store of work and
 * load of sleeping pair with the progress thread's seq_cst store of
 * sleeping and load of work (rk__cl_idle_wait; a Dekker handshake: one
 * of the two sees the other). */
static inline void
rk__cl_wake_progress(rk_cluster *cl)
{
    atomic_store(&cl->work, 1);
    if (atomic_load(&cl->sleeping))
        rk__cl_wake_fd(cl);
}

/* Any thread of ours, after it handed MPI a batch for rank's progress
 * thread at time now: the first batch after a quiet spell of more than
 * poll_ns / 2 (the shortest of any rank's) also pokes that thread, which
 * may be parked. One sent within the spell needs no poke: the peer
 * received the one before less than poll_ns ago and polls for poll_ns
 * after its last activity. */
static inline void
rk__cl_sent_to(rk_cluster *cl, int rank, uint64_t now)
{
    cl_peer *p = &cl->peers[rank];
    uint64_t prev = atomic_load_explicit(&p->last_tx, memory_order_relaxed);

    if (now - prev < 1000 && now >= prev)
        return; /* a stream: no store per batch */
    atomic_store_explicit(&p->last_tx, now, memory_order_relaxed);
    if (rk__cl_ns_since(prev, now) > cl->poke_gap_ns)
        rk__cl_poke(cl, rank);
}

#endif /* RK_SRC_CLUSTER_MPI_WAKE_H */
