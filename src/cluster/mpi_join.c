/*
 * src/cluster/mpi_join.c - joining the cluster (rk_cluster_mpi,
 * docs/cluster.md): MPI set-up on duplicated communicators, the local
 * exports and topics, the directory exchange (every rank's exports and
 * topic members, and a proxy for each remote one), the receives, the
 * control kernel and the progress thread. Every collective step ends
 * with a vote (agree), so that a rank that fails never leaves another
 * waiting in a collective.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster/cluster_int.h"
#include "cluster/mpi_wake.h"

static int
mpi_setup(rk_cluster *cl, const void *comm)
{
    int init = 0, level = 0, mrc;

    MPI_Initialized(&init);
    if (!init) {
        mrc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &level);
        if (mrc != MPI_SUCCESS)
            return rk__cl_mpi_fail(mrc, "MPI_Init_thread");
        cl->mpi_ours = true;
    } else {
        int fin = 0;
        MPI_Finalized(&fin);
        if (fin)
            return rk__fail(RK_EINVAL, "rk_cluster_mpi: MPI is finalized");
        MPI_Query_thread(&level);
    }
    if (level < MPI_THREAD_SERIALIZED)
        return rk__fail(RK_ENOTSUP,
            "rk_cluster_mpi: MPI thread level %d; the cluster needs "
            "MPI_THREAD_SERIALIZED (initialise MPI with MPI_Init_thread)",
            level);
    mrc = MPI_Comm_dup(
        comm != NULL ? *(const MPI_Comm *)comm : MPI_COMM_WORLD, &cl->comm);
    if (mrc != MPI_SUCCESS)
        return rk__cl_mpi_fail(mrc, "MPI_Comm_dup");
    MPI_Comm_set_errhandler(cl->comm, MPI_ERRORS_RETURN);
    mrc = MPI_Comm_dup(cl->comm, &cl->rcomm);
    if (mrc != MPI_SUCCESS)
        return rk__cl_mpi_fail(mrc, "MPI_Comm_dup");
    MPI_Comm_set_errhandler(cl->rcomm, MPI_ERRORS_RETURN);
    cl->multiple = level >= MPI_THREAD_MULTIPLE;
    MPI_Comm_rank(cl->comm, &cl->rank);
    MPI_Comm_size(cl->comm, &cl->size);
    return RK_OK;
}

static void
config_defaults(rk_cluster_config *c)
{
    if (c->batch_bytes == 0)
        c->batch_bytes = 256 * 1024;
    if (c->batch_bytes < 4096)
        c->batch_bytes = 4096;
    if (c->batch_window_ns <= 0)
        c->batch_window_ns = 20000;
    if (c->credits == 0)
        c->credits = 8192;
    if (c->heartbeat_ns <= 0)
        c->heartbeat_ns = 3000000000LL;
    if (c->poll_ns <= 0)
        c->poll_ns = 1000000;
    if (c->idle_sleep_max_ns <= 0)
        c->idle_sleep_max_ns = 1000000;
    if (c->idle_park_ns <= 0)
        c->idle_park_ns = 50000000;
    /* A parked thread still sends the heartbeats of a quiet link, every
     * heartbeat_ns / 4. */
    if (c->idle_park_ns > c->heartbeat_ns / 8)
        c->idle_park_ns = c->heartbeat_ns / 8;
    if (c->idle_park_ns < c->idle_sleep_max_ns)
        c->idle_park_ns = c->idle_sleep_max_ns;
    if (c->leave_timeout_ns <= 0)
        c->leave_timeout_ns = 2000000000LL;
}

/* Our directory record: exports and the topics we have subscribers for. */
static int
directory_local(rk_cluster *cl, uint8_t **out, size_t *len)
{
    uint32_t nt = 0;
    bool *has = calloc(cl->n_topics + 1, sizeof(bool));
    uint8_t *d, *p;

    if (has == NULL)
        return rk__fail(RK_ENOMEM, "cluster: directory");
    for (size_t i = 0; i < cl->n_topics; i++) {
        rk_topic_stats ts;
        if (rk_topic_stats_get(cl->rt, cl->topics[i], &ts) == RK_OK
            && ts.subscribers > 0) {
            has[i] = true;
            nt++;
        }
    }
    *len = rk__cl_dir_size((uint32_t)cl->n_exports, nt);
    if ((d = malloc(*len)) == NULL) {
        free(has);
        return rk__fail(RK_ENOMEM, "cluster: directory");
    }
    rk__cl_dir_header_write(d, (uint32_t)cl->n_exports, nt, cl->cfg.credits);
    p = d + RK__CL_DIR_HDR;
    for (size_t i = 0; i < cl->n_exports; i++, p += RK__CL_DIR_EXPORT) {
        const rk_cluster_export *x = &cl->exports[i].cfg;
        rk__cl_dir_export e;
        snprintf(e.id, sizeof(e.id), "%s", cl->exports[i].id);
        e.capacity = x->input_capacity;
        e.max_payload = x->max_payload;
        e.backpressure = (uint32_t)x->backpressure;
        e.bands = x->priority_bands;
        rk__cl_dir_export_write(p, &e);
    }
    for (size_t i = 0; i < cl->n_topics; i++) {
        rk__cl_dir_topic t;
        if (!has[i])
            continue;
        snprintf(t.name, sizeof(t.name), "%s", cl->topics[i]);
        t.index = (uint32_t)i;
        rk__cl_dir_topic_write(p, &t);
        p += RK__CL_DIR_TOPIC;
    }
    free(has);
    *out = d;
    return RK_OK;
}

/* The control kernel "rk.cluster": it only waits. When
 * rk_runtime_destroy (or rk_cluster_leave) terminates it, it stops the
 * progress and ingress threads, so nothing outlives the runtime. */
static int
control_actor(rk_ctx *ctx)
{
    rk_cluster *cl = rk_ctx_user(ctx);
    rk_msg_view m;
    bool leaving;

    while (!rk_should_terminate(ctx)) {
        int rc = rk_ctx_recv(ctx, &m, 1000 * 1000000);
        if (rc != RK_OK && rc != RK_ETIMEDOUT)
            break;
    }
    rk__cl_stop(cl);
    pthread_mutex_lock(&cl->stop_lock);
    leaving = cl->leaving;
    pthread_mutex_unlock(&cl->stop_lock);
    if (!leaving)
        rk__cl_unref(cl); /* rk_runtime_destroy without leave: the handle's */
    rk__cl_unref(cl);
    return RK_OK;
}

static int
directory_exchange(rk_cluster *cl)
{
    uint8_t *mine = NULL, *all = NULL;
    size_t len = 0, total = 0, cap = 0;
    int *lens = NULL, *displs = NULL, mrc, rc;
    rk__cl_dir *dirs = NULL;

    if ((rc = directory_local(cl, &mine, &len)) != RK_OK)
        return rc;
    lens = calloc((size_t)cl->size, sizeof(int));
    displs = calloc((size_t)cl->size, sizeof(int));
    dirs = calloc((size_t)cl->size, sizeof(*dirs));
    if (lens == NULL || displs == NULL || dirs == NULL) {
        rc = rk__fail(RK_ENOMEM, "cluster: directory");
        goto out;
    }
    int mylen = (int)len;
    if ((mrc = MPI_Allgather(&mylen, 1, MPI_INT, lens, 1, MPI_INT, cl->comm))
        != MPI_SUCCESS) {
        rc = rk__cl_mpi_fail(mrc, "MPI_Allgather");
        goto out;
    }
    for (int r = 0; r < cl->size; r++) {
        displs[r] = (int)total;
        total += (size_t)lens[r];
    }
    if ((all = malloc(total)) == NULL) {
        rc = rk__fail(RK_ENOMEM, "cluster: directory of %zu bytes", total);
        goto out;
    }
    mrc = MPI_Allgatherv(
        mine, mylen, MPI_BYTE, all, lens, displs, MPI_BYTE, cl->comm);
    if (mrc != MPI_SUCCESS) {
        rc = rk__cl_mpi_fail(mrc, "MPI_Allgatherv");
        goto out;
    }
    /* Every rank agrees on the largest batch (receive buffers). */
    uint32_t bb = cl->cfg.batch_bytes;
    mrc = MPI_Allreduce(
        &bb, &cl->batch_bytes, 1, MPI_UINT32_T, MPI_MAX, cl->comm);
    if (mrc != MPI_SUCCESS) {
        rc = rk__cl_mpi_fail(mrc, "MPI_Allreduce");
        goto out;
    }
    cl->stage_limit = (size_t)cl->batch_bytes * 4;
    for (int r = 0; r < cl->size; r++) {
        rc = rk__cl_dir_parse(all + displs[r], (size_t)lens[r], &dirs[r]);
        if (rc != RK_OK)
            goto out;
        if (r != cl->rank)
            cap += 2 * dirs[r].n_exports + dirs[r].n_topics;
        cl->peers[r].credits = cl->peers[r].window = dirs[r].credits;
    }
    /* Room for the proxies of exports announced later: two per export
     * of each peer. */
    cl->proxies_cap = cap + 2 * CL_LATE * (size_t)(cl->size - 1);
    if ((cl->proxies = calloc(cl->proxies_cap + 1, sizeof(*cl->proxies)))
        == NULL) {
        rc = rk__fail(RK_ENOMEM, "cluster: proxies");
        goto out;
    }
    /* Proxies: "R/id" for every remote export, "id" for the first rank
     * exporting a name no local kernel has, "R/#topic" for remote topic
     * members. */
    for (int pass = 0; pass < 3; pass++) {
        for (int r = 0; r < cl->size; r++) {
            if (r == cl->rank)
                continue;
            uint32_t n = pass < 2 ? dirs[r].n_exports : dirs[r].n_topics;
            for (uint32_t i = 0; i < n; i++) {
                rk__cl_dir_export e;
                rk__cl_dir_topic t;

                if (pass < 2) {
                    if ((rc = rk__cl_dir_export_get(&dirs[r], i, &e)) != RK_OK
                        || (rc = rk__cl_proxy_start(cl, r, i, &e, pass == 1))
                            != RK_OK)
                        goto out;
                    continue;
                }
                if ((rc = rk__cl_dir_topic_get(&dirs[r], i, &t)) != RK_OK
                    || (rc = rk__cl_topic_proxy_start(cl, r, &t)) != RK_OK)
                    goto out;
            }
        }
    }
    rc = RK_OK;
out:
    free(mine);
    free(all);
    free(lens);
    free(displs);
    free(dirs);
    return rc;
}

/* Every rank's verdict on a step of the join: rc if this rank failed,
 * RK_EINTERNAL if another did, else RK_OK. Collective. */
static int
agree(rk_cluster *cl, int rc)
{
    int bad = rc != RK_OK, any = 0;
    char detail[512];

    snprintf(detail, sizeof(detail), "%s", rk_errdetail());
    if (MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, cl->comm)
        != MPI_SUCCESS)
        any = 1;
    if (rc != RK_OK)
        return rk__fail(rc, "%s", detail);
    if (any)
        return rk__fail(
            RK_EINTERNAL, "rk_cluster_mpi: another rank failed to join");
    return RK_OK;
}

/* Fills export e from x, as the kernel id names it now (what the
 * proxies mirror is read from its registration): everything but its lock
 * and condition (rk__cl_export_locks_init). RK_EINVAL for a bad id,
 * RK_ENOTFOUND for no such kernel, RK_ENOMEM. Calls the runtime: no lock
 * held. */
int
rk__cl_export_fill(rk_cluster *cl, cl_export *e, const rk_cluster_export *x)
{
    rk_kernel_state s;
    rk_kernel_config kc;
    int rc;

    e->cl = cl;
    e->cfg = *x;
    e->cfg.id = NULL;
    if (x->id == NULL || strlen(x->id) > RK_ID_MAX)
        return rk__fail(RK_EINVAL, "cluster: export with a bad id");
    snprintf(e->id, sizeof(e->id), "%s", x->id);
    if ((rc = rk_kernel_state_get(cl->rt, e->id, &s)) != RK_OK)
        return rc;
    if ((rc = rk_kernel_config_get(cl->rt, e->id, &kc)) != RK_OK)
        return rc;
    e->cfg.input_capacity = kc.input_capacity;
    e->cfg.max_payload = kc.max_payload;
    e->cfg.backpressure = kc.backpressure;
    e->cfg.priority_bands = kc.priority_bands;
    e->direct_calls = kc.direct_calls;
    if ((e->mail = calloc(CL_MAILBOX, sizeof(*e->mail))) == NULL)
        return rk__fail(RK_ENOMEM, "cluster: export mailbox");
    return RK_OK;
}

void
rk__cl_export_locks_init(cl_export *e)
{
    pthread_mutex_init(&e->lock, NULL);
    rk__cond_init_mono(&e->cond);
}

/* Starts what serves export e: its ingress thread (BLOCK) and the buffer
 * the progress thread reads its output into. */
int
rk__cl_export_start(cl_export *e)
{
    if (!e->cfg.local_output) {
        e->ocap = e->cfg.max_payload ? e->cfg.max_payload : 192;
        if ((e->obuf = malloc(e->ocap)) == NULL)
            return rk__fail(RK_ENOMEM, "cluster: output buffer");
    }
    /* Last: a failure before it leaves no thread running. */
    if (e->cfg.backpressure == RK_BP_BLOCK) {
        if (pthread_create(&e->ingress, NULL, rk__cl_ingress_main, e) != 0)
            return rk__fail(RK_ENOMEM, "cluster: ingress thread");
        e->ingress_started = true;
    }
    return RK_OK;
}

/* Whether a kernel registered at the join is exported when the
 * configuration names none: not the cluster's own kernels (the control
 * kernel, and proxies, whose ids hold a '/': "R/id", "R/#topic"), nor
 * any other id with a '/', which would read as a remote name. */
bool
rk__cl_export_by_default(const char *id)
{
    return strcmp(id, CL_CONTROL_ID) != 0 && strchr(id, '/') == NULL;
}

/* export_all in the configuration: every kernel registered now
 * (rk__cl_export_by_default), with the defaults of rk_cluster_export, in *out
 * (malloc'd, the caller frees it and *ids) and *n. */
static int
exports_all(rk_runtime *rt, rk_cluster_export **out,
    char (**ids)[RK_ID_MAX + 1], size_t *n)
{
    char(*all)[RK_ID_MAX + 1] = NULL;
    size_t total = 0, cap = 0, k = 0;
    int rc;

    *out = NULL;
    *ids = NULL;
    *n = 0;
    /* Kernels registered meanwhile: ask again with room for them. */
    for (;;) {
        if ((rc = rk_runtime_kernel_ids(rt, all, cap, &total)) != RK_OK) {
            free(all);
            return rc;
        }
        if (total <= cap)
            break;
        free(all);
        cap = total;
        if ((all = malloc(cap * sizeof(*all))) == NULL)
            return rk__fail(RK_ENOMEM, "rk_cluster_mpi: kernel list");
    }
    if ((*out = calloc(total + 1, sizeof(**out))) == NULL) {
        free(all);
        return rk__fail(RK_ENOMEM, "rk_cluster_mpi: kernel list");
    }
    for (size_t i = 0; i < total; i++)
        if (rk__cl_export_by_default(all[i]))
            (*out)[k++].id = all[i];
    *ids = all;
    *n = k;
    return RK_OK;
}

int
rk_cluster_mpi(rk_runtime *rt, const void *comm, const rk_cluster_config *cfg,
    rk_cluster **out)
{
    rk_cluster *cl;
    rk_cluster_config c;
    rk_cluster_export *all = NULL; /* export_all: every kernel */
    char(*all_ids)[RK_ID_MAX + 1] = NULL;
    const rk_cluster_export *xs;
    int rc;

    if (out != NULL)
        *out = NULL;
    if (rt == NULL || out == NULL)
        return rk__fail(RK_EINVAL, "rk_cluster_mpi: NULL argument");
    memset(&c, 0, sizeof(c));
    if (cfg != NULL)
        c = *cfg;
    if ((c.n_exports != 0 && c.exports == NULL)
        || (c.n_topics != 0 && c.topics == NULL))
        return rk__fail(RK_EINVAL, "rk_cluster_mpi: NULL export/topic list");
    if (c.export_all && c.exports != NULL)
        return rk__fail(RK_EINVAL,
            "rk_cluster_mpi: export_all with an export list (pass one)");
    if (c.export_all
        && (rc = exports_all(rt, &all, &all_ids, &c.n_exports)) != RK_OK)
        return rc;
    xs = all != NULL ? all : c.exports;
    config_defaults(&c);
    if ((cl = calloc(1, sizeof(*cl))) == NULL) {
        free(all);
        free(all_ids);
        return rk__fail(RK_ENOMEM, "rk_cluster_mpi");
    }
    cl->rt = rt;
    cl->cfg = c;
    cl->cfg.exports = NULL;
    cl->cfg.topics = NULL;
    cl->comm = MPI_COMM_NULL;
    cl->rcomm = MPI_COMM_NULL;
    atomic_init(&cl->refs, 1);
    pthread_mutex_init(&cl->stop_lock, NULL);
    pthread_mutex_init(&cl->export_lock, NULL);
    cl->wake_fd = -1;
    cl->poke_fd = -1;
    for (int i = 0; i < CL_NRECV; i++)
        cl->rreq[i] = MPI_REQUEST_NULL;
    for (int i = 0; i < CL_NWAIT; i++) {
        pthread_mutex_init(&cl->wait[i].lock, NULL);
        rk__cond_init_mono(&cl->wait[i].cond);
        cl->wait[i].sreq = MPI_REQUEST_NULL;
        cl->wait[i].rreq = MPI_REQUEST_NULL;
    }
    atomic_init(&cl->wfree, UINT64_MAX);
    if ((rc = rk__cl_idmap_init(&cl->served)) != RK_OK
        || (rc = rk__cl_idmap_init(&cl->fwd)) != RK_OK)
        goto fail;

    /* Local exports and topics. A rank that finds a mistake here still
     * takes part in the vote below, so that no other rank is left waiting
     * in a collective. */
    cl->exports_cap = c.n_exports + CL_LATE;
    cl->exports = calloc(cl->exports_cap, sizeof(*cl->exports));
    cl->topics = calloc(c.n_topics + 1, sizeof(*cl->topics));
    if (cl->exports == NULL || cl->topics == NULL) {
        rc = rk__fail(RK_ENOMEM, "rk_cluster_mpi");
        goto checked;
    }
    for (size_t i = 0; i < c.n_exports; i++) {
        /* Counted at once: cluster_free destroys its lock and condition,
         * and frees what the fill got, whatever the outcome. */
        rk__cl_export_locks_init(&cl->exports[i]);
        cl->n_exports++;
        rc = rk__cl_export_fill(cl, &cl->exports[i], &xs[i]);
        if (rc != RK_OK) {
            char why[256];
            snprintf(why, sizeof(why), "%s", rk_errdetail());
            rc = rk__fail(rc, "rk_cluster_mpi: export %zu: %s", i, why);
            goto checked;
        }
    }
    for (size_t i = 0; i < c.n_topics; i++) {
        if (c.topics[i] == NULL || strlen(c.topics[i]) > RK_ID_MAX) {
            rc = rk__fail(RK_EINVAL, "rk_cluster_mpi: topic %zu: bad name", i);
            goto checked;
        }
        snprintf(cl->topics[i], sizeof(cl->topics[i]), "%s", c.topics[i]);
        cl->n_topics++;
    }

checked:
    free(all);
    free(all_ids);
    all = NULL;
    all_ids = NULL;
    {
        int mrc = mpi_setup(cl, comm);
        if (mrc != RK_OK) {
            rc = rc != RK_OK ? rc : mrc; /* without MPI, no vote */
            goto fail;
        }
    }
    if ((rc = agree(cl, rc)) != RK_OK)
        goto fail;

    if ((cl->peers = calloc((size_t)cl->size, sizeof(*cl->peers))) == NULL) {
        rc = rk__fail(RK_ENOMEM, "rk_cluster_mpi");
        goto fail;
    }
    for (int r = 0; r < cl->size; r++) {
        cl_peer *p = &cl->peers[r];

        pthread_mutex_init(&p->lock, NULL);
        rk__cond_init_mono(&p->room);
        for (int i = 0; i < CL_NSEND; i++)
            p->sb[i].req = MPI_REQUEST_NULL;
        p->last_heard = p->last_sent = rk_now_ns();
    }
    rc = directory_exchange(cl);
    if ((rc = agree(cl, rc)) != RK_OK)
        goto fail;
    rc = rk__cl_wake_setup(cl); /* collective */
    if ((rc = agree(cl, rc)) != RK_OK)
        goto fail;
    for (int i = 0; i < CL_NRECV; i++) {
        if ((cl->rbuf[i] = malloc(cl->batch_bytes)) == NULL) {
            rc = rk__fail(RK_ENOMEM, "rk_cluster_mpi");
            goto fail;
        }
        CL_MPI_BUFFER(cl->rbuf[i], cl->batch_bytes);
        int mrc = MPI_Recv_init(cl->rbuf[i], (int)cl->batch_bytes, MPI_BYTE,
            MPI_ANY_SOURCE, CL_TAG, cl->comm, &cl->rreq[i]);
        if (mrc != MPI_SUCCESS) {
            rc = rk__cl_mpi_fail(mrc, "MPI_Recv_init");
            goto fail;
        }
    }
    /* The control kernel: rk_runtime_destroy stops the cluster through it. */
    atomic_fetch_add(&cl->refs, 1);
    if ((rc = rk__cl_start_kernel(
             cl, CL_CONTROL_ID, control_actor, NULL, cl, NULL))
        != RK_OK) {
        atomic_fetch_sub(&cl->refs, 1);
        goto fail;
    }
    for (size_t i = 0; i < cl->n_exports; i++)
        if ((rc = rk__cl_export_start(&cl->exports[i])) != RK_OK)
            goto fail;
    /* Everyone's proxies exist before anyone's progress thread sends. */
    MPI_Barrier(cl->comm);
    if (pthread_create(&cl->progress, NULL, rk__cl_progress_main, cl) != 0) {
        rc = rk__fail(RK_ENOMEM, "rk_cluster_mpi: progress thread");
        goto fail;
    }
    cl->progress_started = true;
    *out = cl;
    return RK_OK;

fail:
    /* A failed join: stop what started, end the kernels we registered. */
    free(all);
    free(all_ids);
    {
        char detail[512];
        snprintf(detail, sizeof(detail), "%s", rk_errdetail());
        rk__cl_stop(cl);
        pthread_mutex_lock(&cl->stop_lock);
        cl->leaving = true;
        pthread_mutex_unlock(&cl->stop_lock);
        for (size_t i = 0; i < cl->n_proxies; i++)
            rk_kernel_terminate(rt, cl->proxies[i].id, 1000000000);
        rk_kernel_terminate(rt, CL_CONTROL_ID, 1000000000);
        if (cl->comm != MPI_COMM_NULL) {
            for (int i = 0; i < CL_NRECV; i++)
                if (cl->rreq[i] != MPI_REQUEST_NULL)
                    MPI_Request_free(&cl->rreq[i]);
            MPI_Comm_free(&cl->comm);
        }
        /* MPI stays initialised (a later call may try again); a program
         * that gives up calls MPI_Finalize itself. */
        rk__cl_unref(cl);
        return rk__fail(rc, "%s", detail);
    }
}
