/*
 * src/cluster/cluster_mpi.c - ringkernel across MPI ranks: the public
 * calls after the join (design in docs/cluster.md; cluster_none.c is the
 * same API without MPI). The join is rk_cluster_mpi (mpi_join.c) and
 * rk_cluster_request has a file of its own (mpi_request.c);
 * cluster_int.h says what the other files do.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster/cluster_int.h"
#include "cluster/mpi_trace.h"
#include "cluster/mpi_wake.h"
#include "runtime/ids.h"

#ifdef RK_CLUSTER_TRACE
rk__cl_trace rk__cl_tr;

static int
cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Each stage's p50 and p90 of its last samples, in ns (the TSC measured
 * against rk_now_ns over 20 ms), on stderr. */
void
rk__cl_trace_dump(int rank)
{
    static const char *name[CL_TR_N] = { "caller: entry -> encoded",
        "caller: MPI_Isend", "caller: MPI_Irecv + wait set-up",
        "request on the wire (Isend -> peer's test)", "owner: seen -> handler",
        "owner: rk_kernel_call_reply", "owner: call -> reply Isend",
        "owner: MPI_Isend", "owner: after send -> receive reposted",
        "reply on the wire (Isend -> caller's test)",
        "caller: seen -> slot answered", "caller: answered -> return",
        "caller: total", "caller: wait rounds (count)" };
    struct timespec ms20 = { 0, 20000000 };
    uint64_t n0 = rk_now_ns(), c0 = rk__cl_tsc(), n1, c1;
    double per;

    nanosleep(&ms20, NULL);
    n1 = rk_now_ns();
    c1 = rk__cl_tsc();
    per = (double)(n1 - n0) / (double)(c1 - c0);
    for (int i = 0; i < CL_TR_N; i++) {
        uint64_t n = atomic_load(&rk__cl_tr.n[i]);
        size_t k = n < CL_TR_KEEP ? (size_t)n : CL_TR_KEEP;
        double f = i == CL_TR_C_TESTS ? 1.0 : per;

        if (n == 0)
            continue;
        qsort(rk__cl_tr.v[i], k, sizeof(uint32_t), cmp_u32);
        fprintf(stderr,
            "cluster trace rank %d: %-44s p50 %8.1f p90 %8.1f %s (n %llu)\n",
            rank, name[i], (double)rk__cl_tr.v[i][k / 2] * f,
            (double)rk__cl_tr.v[i][k * 9 / 10] * f,
            i == CL_TR_C_TESTS ? "  " : "ns", (unsigned long long)n);
    }
}
#endif

int
rk_cluster_leave(rk_cluster *cl)
{
    bool clean, ours;
    int64_t t;

    if (cl == NULL)
        return RK_OK;
    pthread_mutex_lock(&cl->stop_lock);
    cl->leaving = true;
    pthread_mutex_unlock(&cl->stop_lock);
    rk__cl_stop(cl);
    CL_TR_DUMP(cl->rank);
    clean = cl->clean;
    ours = cl->mpi_ours;
    t = cl->cfg.leave_timeout_ns;
    for (size_t i = 0; i < cl->n_proxies; i++)
        rk_kernel_terminate(cl->rt, cl->proxies[i].id, t);
    rk_kernel_terminate(cl->rt, CL_CONTROL_ID, t);
    if (clean)
        MPI_Comm_free(&cl->comm);
    rk__cl_unref(cl);
    if (ours && clean) {
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin)
            MPI_Finalize();
    }
    return clean ? RK_OK
                 : rk__fail(RK_EUNREACHABLE,
                     "rk_cluster_leave: a peer died or did not say goodbye");
}

int
rk_cluster_rank(const rk_cluster *cl)
{
    return cl != NULL ? cl->rank : -1;
}

int
rk_cluster_size(const rk_cluster *cl)
{
    return cl != NULL ? cl->size : 0;
}

int
rk_cluster_peer_status(const rk_cluster *cl, int rank)
{
    if (cl == NULL || rank < 0 || rank >= cl->size)
        return rk__fail(RK_EINVAL, "rk_cluster_peer_status: rank %d", rank);
    if (rank == cl->rank)
        return atomic_load(&cl->stopped)
            ? rk__fail(RK_EUNREACHABLE, "this rank has left")
            : RK_OK;
    switch (atomic_load(&cl->peers[rank].state)) {
    case PEER_LIVE:
        return RK_OK;
    case PEER_DEAD:
        return rk__fail(RK_EUNREACHABLE, "rank %d died", rank);
    default:
        return rk__fail(RK_EUNREACHABLE, "rank %d left", rank);
    }
}

int
rk_cluster_recv(rk_cluster *cl, const char *id, rk_msg_header *hdr, void *buf,
    size_t cap, size_t *len, int64_t timeout_ns)
{
    cl_export *e = NULL;
    uint64_t deadline = rk__deadline(timeout_ns);
    cl_mail *m;

    if (cl == NULL || id == NULL || len == NULL || (buf == NULL && cap != 0))
        return rk__fail(RK_EINVAL, "rk_cluster_recv: NULL argument");
    e = rk__cl_export_named(cl, id);
    if (e == NULL || e->cfg.local_output)
        return rk_recv_id(cl->rt, id, hdr, buf, cap, len, timeout_ns);
    pthread_mutex_lock(&e->lock);
    while (e->mcount == 0) {
        struct timespec ts;
        uint64_t now = rk_now_ns();
        if (now >= deadline) {
            pthread_mutex_unlock(&e->lock);
            return RK_ETIMEDOUT;
        }
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t abs = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec
            + (deadline - now < 50000000 ? deadline - now : 50000000);
        ts.tv_sec = (time_t)(abs / 1000000000u);
        ts.tv_nsec = (long)(abs % 1000000000u);
        pthread_cond_timedwait(&e->cond, &e->lock, &ts);
    }
    m = &e->mail[e->mhead];
    *len = m->len;
    if (m->len > cap) {
        pthread_mutex_unlock(&e->lock);
        return rk__fail(RK_EMSGSIZE,
            "rk_cluster_recv: %zu-byte payload, %zu "
            "-byte buffer",
            m->len, cap);
    }
    if (hdr != NULL)
        *hdr = m->hdr;
    memcpy(buf, m->data, m->len);
    free(m->data);
    e->mhead = (e->mhead + 1) % CL_MAILBOX;
    e->mcount--;
    atomic_store_explicit(&e->mfill, e->mcount, memory_order_relaxed);
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    return RK_OK;
}

int
rk_cluster_announce(rk_cluster *cl, const rk_cluster_export *ex)
{
    uint8_t dir[RK__CL_DIR_HDR + RK__CL_DIR_EXPORT];
    rk__cl_dir_export rec;
    rk__cl_frame f;
    cl_export *e, tmp;
    size_t n;
    int rc = RK_OK;

    if (cl == NULL || ex == NULL || ex->id == NULL)
        return rk__fail(RK_EINVAL, "rk_cluster_announce: NULL argument");
    if (!rk__cl_export_by_default(ex->id))
        return rk__fail(RK_EINVAL,
            "rk_cluster_announce: '%s' is the cluster's, or holds a '/'",
            ex->id);
    /* The runtime's view of the kernel first, with no lock held. */
    memset(&tmp, 0, sizeof(tmp));
    if ((rc = rk__cl_export_fill(cl, &tmp, ex)) != RK_OK) {
        free(tmp.mail);
        return rc;
    }
    pthread_mutex_lock(&cl->export_lock);
    n = cl->n_exports;
    if (atomic_load(&cl->drain_stop) || atomic_load(&cl->stop))
        rc = rk__fail(RK_ECLOSED, "rk_cluster_announce: leaving the cluster");
    for (size_t i = 0; rc == RK_OK && i < n; i++)
        if (strcmp(cl->exports[i].id, ex->id) == 0)
            rc = rk__fail(
                RK_EEXIST, "rk_cluster_announce: '%s' is exported", ex->id);
    if (rc == RK_OK && n == cl->exports_cap)
        rc = rk__fail(RK_EFULL,
            "rk_cluster_announce: at most %d kernels exported after the join",
            CL_LATE);
    if (rc != RK_OK) {
        pthread_mutex_unlock(&cl->export_lock);
        free(tmp.mail);
        return rc;
    }
    e = &cl->exports[n];
    *e = tmp; /* before its lock exists: nothing else sees this slot yet */
    rk__cl_export_locks_init(e);
    if ((rc = rk__cl_export_start(e)) != RK_OK) {
        /* Not published: nothing else has seen it. */
        free(e->mail);
        free(e->obuf);
        pthread_mutex_destroy(&e->lock);
        pthread_cond_destroy(&e->cond);
        memset(e, 0, sizeof(*e));
        pthread_mutex_unlock(&cl->export_lock);
        return rc;
    }
    cl->n_exports = n + 1; /* seq_cst: published to the progress thread */
    pthread_mutex_unlock(&cl->export_lock);

    /* Tell every peer (a dead or departed one needs nothing). */
    memset(&rec, 0, sizeof(rec));
    snprintf(rec.id, sizeof(rec.id), "%s", e->id);
    rec.capacity = e->cfg.input_capacity;
    rec.max_payload = e->cfg.max_payload;
    rec.backpressure = (uint32_t)e->cfg.backpressure;
    rec.bands = e->cfg.priority_bands;
    rk__cl_dir_header_write(dir, 1, 0, cl->cfg.credits);
    rk__cl_dir_export_write(dir + RK__CL_DIR_HDR, &rec);
    memset(&f, 0, sizeof(f));
    f.kind = RK__CL_ANNOUNCE;
    f.target = (uint32_t)n;
    f.len = sizeof(dir);
    f.id = rk__next_id();
    for (int r = 0; r < cl->size; r++)
        if (r != cl->rank)
            (void)rk__cl_stage_frame(cl, r, 1, &f, dir, RK_NO_WAIT);
    return RK_OK;
}

/* Frames staged per lock hold: the stage's limit is checked between
 * chunks, so a long batch waits for room as a proxy's runs do. */
#define CL_SEND_CHUNK 256

int
rk_cluster_send_batch(rk_cluster *cl, const char *id, uint32_t type_id,
    const void *base, size_t len, size_t n, uint8_t priority,
    int64_t timeout_ns, size_t *sent)
{
    const uint8_t *src = base;
    const cl_proxy *px;
    uint64_t deadline;
    rk__cl_frame f;
    rk_kernel k;
    size_t done = 0;
    int rc = RK_OK;

    if (sent != NULL)
        *sent = 0;
    if (cl == NULL || id == NULL || sent == NULL || (base == NULL && n != 0))
        return rk__fail(RK_EINVAL, "rk_cluster_send_batch: NULL argument");
    if ((px = rk__cl_proxy_named(cl, id)) == NULL) {
        if ((rc = rk_kernel_lookup(cl->rt, id, &k)) != RK_OK)
            return rc;
        return rk_send_batch(
            cl->rt, k, type_id, base, len, n, priority, timeout_ns, sent);
    }
    if (len > UINT32_MAX)
        return rk__fail(
            RK_EMSGSIZE, "rk_cluster_send_batch: %zu-byte message", len);
    deadline = rk__deadline(timeout_ns);
    memset(&f, 0, sizeof(f));
    f.kind = RK__CL_DATA;
    f.priority = priority;
    f.type_id = type_id;
    f.len = (uint32_t)len;
    f.target = px->target;
    f.aux = (int32_t)px->index; /* refusals go where a proxied send's go */
    while (done < n && rc == RK_OK) {
        size_t m = n - done < CL_SEND_CHUNK ? n - done : CL_SEND_CHUNK;
        size_t one = rk__cl_frame_size(f.len);
        cl_peer *p = &cl->peers[px->rank];
        uint8_t *dst = NULL;

        pthread_mutex_lock(&p->lock);
        rc = rk__cl_stage_reserve(cl, p, px->rank, 0, one * m, deadline, &dst);
        if (rc == RK_OK) {
            uint64_t now = rk_now_ns();
            for (size_t i = 0; i < m; i++) {
                f.id = rk__next_id();
                f.send_ns = now;
                rk__cl_frame_write(dst + i * one, &f, src + (done + i) * len);
            }
            atomic_fetch_add_explicit(
                &p->unsent, (uint32_t)m, memory_order_relaxed);
        }
        pthread_mutex_unlock(&p->lock);
        if (rc != RK_OK)
            break;
        rk__cl_wake_progress(cl);
        STAT(cl, forwarded, m);
        done += m;
    }
    *sent = done;
    if (rc == RK_EUNREACHABLE)
        return rk__fail(rc, "rk_cluster_send_batch: kernel '%s': rank %d %s",
            id, px->rank, rk__cl_peer_fate(cl, px->rank));
    return rc;
}

int
rk_cluster_stats_get(const rk_cluster *cl, rk_cluster_stats *out)
{
    if (cl == NULL || out == NULL)
        return rk__fail(RK_EINVAL, "rk_cluster_stats_get: NULL argument");
#define GET(f)                                                                \
    out->f = atomic_load_explicit(&cl->st.f, memory_order_relaxed)            \
        + atomic_load_explicit(&cl->pst.f, memory_order_relaxed)
    GET(forwarded);
    GET(sent_frames);
    GET(sent_batches);
    GET(received);
    GET(delivered);
    GET(rejected);
    GET(dropped);
    GET(replies_sent);
    GET(replies_received);
    GET(remote_errors);
    GET(unreachable);
    GET(credit_stalls);
    GET(idle_sleeps);
    GET(late_replies);
    GET(proxy_wakeups);
#undef GET
    for (int i = 0; i < CL_NWAIT; i++) {
        uint64_t sent = atomic_load_explicit(
                     &cl->wait[i].sent_by_mpi, memory_order_relaxed),
                 got = atomic_load_explicit(
                     &cl->wait[i].replies_by_mpi, memory_order_relaxed);
        /* A request by MPI is one frame in a batch of its own. */
        out->forwarded += sent;
        out->sent_batches += sent;
        out->sent_frames += sent;
        out->replies_received += got;
    }
    return RK_OK;
}
