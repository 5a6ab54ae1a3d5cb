/*
 * src/cluster/mpi_proxy.c - proxies: one local actor kernel per remote
 * kernel ("R/id", and "id" when no local kernel has the name) and per
 * remote topic member ("R/#topic") (docs/cluster.md). A proxy forwards
 * each message it receives as a frame into its peer's staging buffer,
 * and puts the replies the progress thread injects (flag
 * RK__CL_F_INJECT) out on its own output queue with rk_ctx_reply, so
 * rk_request on the proxy sees them. A kernel proxy also takes direct
 * calls (proxy_call): rk_request and rk_kernel_call on its handle then
 * send on the caller's thread, as rk_cluster_request does. The cluster's
 * kernels (proxies and the control kernel) are started here.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster_int.h"

static int
proxy_error_reply(rk_ctx *ctx, const rk_msg_header *req, int err)
{
    rk_msg_view v = { req, NULL, 0 };
    cl_proxy *px = rk_ctx_user(ctx);
    char why[160];

    if (err == RK_EUNREACHABLE)
        snprintf(why, sizeof(why), "kernel '%s': rank %d %s", px->id, px->rank,
            rk__cl_peer_fate(px->cl, px->rank));
    else
        snprintf(
            why, sizeof(why), "kernel '%s': %s", px->id, rk_strerror(err));
    return rk_ctx_reply_error(ctx, &v, err, why);
}

/* The peer of px died or left: every request it forwarded and that was
 * not answered fails with RK_EUNREACHABLE (once, on the proxy's thread,
 * so nothing it forwards later is missed: later frames fail in
 * proxy_flush). */
static void
proxy_fail_pending(rk_ctx *ctx, cl_proxy *px)
{
    size_t n = 0;
    cl_ident *lost
        = rk__cl_idmap_take_proxy(&px->cl->fwd, px->rank, px->index, &n);

    for (size_t i = 0; i < n; i++) {
        rk_msg_header h;

        STAT(px->cl, unreachable, 1);
        memset(&h, 0, sizeof(h));
        h.message_id = lost[i].id;
        h.priority = lost[i].priority;
        proxy_error_reply(ctx, &h, RK_EUNREACHABLE);
    }
    free(lost);
}

/* Hands a proxy's run of frames to its peer; on failure each message
 * gets its error reply. */
static void
proxy_flush(rk_ctx *ctx, cl_proxy *px, cl_buf *run, uint32_t n)
{
    rk_cluster *cl = px->cl;
    int rc;

    if (n == 0)
        return;
    rc = rk__cl_stage_bytes(cl, px->rank, run->p, run->len, n);
    if (rc == RK_OK) {
        STAT(cl, forwarded, n);
    } else {
        rk__cl_frame f;
        size_t off = 0;

        while (rk__cl_frame_next(run->p, run->len, &off, &f) == RK_OK) {
            rk_msg_header h;

            STAT(cl, unreachable, 1);
            if (px->topic || !(f.flags & RK_MSG_F_REQUEST))
                continue; /* nobody waits for an answer */
            rk__cl_idmap_take(&cl->fwd, &f.id, NULL, NULL);
            memset(&h, 0, sizeof(h));
            h.message_id = f.id;
            h.priority = f.priority;
            proxy_error_reply(ctx, &h, rc);
        }
    }
    rk__cl_buf_reset(run);
}

/* An idle proxy looks at its peer's state after this long, doubling up
 * to PROXY_IDLE_MAX_NS while it stays idle (proxy_actor). */
#define PROXY_IDLE_MIN_NS (100 * INT64_C(1000000))
#define PROXY_IDLE_MAX_NS (3200 * INT64_C(1000000))

/* A proxy takes what is queued for it (up to 256 messages or 16 KiB)
 * before handing it over under one lock, and waits only when it has
 * nothing left to hand over. */
static int
proxy_actor(rk_ctx *ctx)
{
    cl_proxy *px = rk_ctx_user(ctx);
    rk_cluster *cl = px->cl;
    cl_buf run = { 0 };
    uint32_t n = 0;
    bool failed = false;
    int64_t idle_ns = PROXY_IDLE_MIN_NS;
    rk_msg_view m;

    for (;;) {
        bool waited = n == 0;
        int rc = rk_ctx_recv(ctx, &m, waited ? idle_ns : RK_NO_WAIT);

        /* A poke that found the queue full is caught by the first idle
         * wait after the busy spell (PROXY_IDLE_MIN_NS); a proxy idle for
         * longer than that looks at the peer's state ever less often (a
         * wake-up costs a spin before it parks again). */
        if (rc == RK_ETIMEDOUT && waited) {
            STAT(cl, proxy_wakeups, 1);
            idle_ns = idle_ns < PROXY_IDLE_MAX_NS / 2 ? idle_ns * 2
                                                      : PROXY_IDLE_MAX_NS;
        } else if (rc == RK_OK) {
            idle_ns = PROXY_IDLE_MIN_NS;
        }

        bool poke = rc == RK_OK && m.hdr->type_id == RK_CLUSTER_TYPE_INJECT
            && (m.hdr->flags & RK__CL_F_INJECT);

        /* A poke: the progress thread is taking the peer down and sets
         * its state in a moment (rk__cl_peer_down). */
        while (poke && atomic_load(&cl->peers[px->rank].state) == PEER_LIVE)
            sched_yield();
        if (!failed && atomic_load(&cl->peers[px->rank].state) != PEER_LIVE) {
            /* The run first: frames that went in before the peer went
             * down are still in the id map; later ones fail here. */
            proxy_flush(ctx, px, &run, n);
            n = 0;
            proxy_fail_pending(ctx, px);
            failed = true;
        }
        if (poke)
            continue;
        if (rc == RK_OK && (m.hdr->flags & RK__CL_F_INJECT)) {
            /* A reply (or an error) from the owning rank: put it out as
             * the answer to the message whose id it correlates. */
            rk_msg_header req = *m.hdr;
            rk_msg_view v = { &req, NULL, 0 };

            req.message_id = m.hdr->correlation_id;
            rk_ctx_reply(ctx, &v, m.hdr->type_id, m.data, m.len);
            continue;
        }
        if (rc == RK_OK && (m.hdr->flags & RK__CL_F_REMOTE))
            continue; /* a publish that came from a peer: not back out */
        if (rc == RK_OK) {
            rk__cl_frame f;
            uint8_t *dst = NULL;

            rk__cl_frame_from_header(&f, m.hdr, m.len);
            f.kind = px->topic ? RK__CL_TOPIC : RK__CL_DATA;
            f.target = px->target;
            f.aux = (int32_t)px->index;
            if (rk__cl_buf_append(&run, rk__cl_frame_size(f.len), &dst)
                != RK_OK) {
                STAT(cl, unreachable, 1);
                if (!px->topic && (m.hdr->flags & RK_MSG_F_REQUEST))
                    proxy_error_reply(ctx, m.hdr, RK_ENOMEM);
                continue;
            }
            rk__cl_frame_write(dst, &f, m.data);
            if (!px->topic && (m.hdr->flags & RK_MSG_F_REQUEST))
                rk__cl_idmap_put(
                    &cl->fwd, &f.id, px->rank, px->index, f.priority);
            if (++n < 1024 && run.len < 65536)
                continue;
        }
        proxy_flush(ctx, px, &run, n);
        n = 0;
        if (rc != RK_OK && rc != RK_ETIMEDOUT)
            break;
    }
    free(run.p);
    if (!atomic_exchange(&px->exited, true))
        rk__cl_unref(cl);
    return RK_OK;
}

/* An error reply to request m with code rc and the calling thread's
 * detail. */
static void
reply_detail(rk_ctx *ctx, const rk_msg_view *m, int rc)
{
    char why[200];

    snprintf(why, sizeof(why), "%s", rk_errdetail());
    (void)rk_ctx_reply_error(ctx, m, rc, why);
}

/*
 * A message that came into a kernel proxy as a direct call: rk_request
 * (or rk_kernel_call) on its handle runs this on the caller's thread,
 * only while the proxy's own thread waits with nothing in hand and
 * nothing queued (rk_kernel_call), so nothing sent into the proxy before
 * is left to overtake. A request whose caller waits (rk_ctx_call) goes
 * as rk_cluster_request's does, by this thread's MPI calls when it can,
 * and its reply (or error) comes back from the call; anything else, or a
 * request while every waiting slot is busy, is staged as the proxy's
 * thread stages it. Always RK_OK: a failure is the request's error reply
 * (a failing handler would end the proxy).
 */
static int
proxy_call(rk_ctx *ctx, const rk_msg_view *m)
{
    cl_proxy *px = rk_ctx_user(ctx);
    rk_cluster *cl = px->cl;
    const rk_call_reply *cr = rk_ctx_call(ctx);
    bool request = (m->hdr->flags & RK_MSG_F_REQUEST) != 0;
    int64_t timeout_ns = RK_WAIT_FOREVER;
    rk__cl_frame f;
    int rc;

    if (request && cr != NULL) {
        /* A reply bigger than the caller's buffer but within 4 KiB is
         * still taken, so that it waits in the output queue for a bigger
         * buffer as a proxied reply does. */
        uint8_t small[CL_CALL_MAX], *buf = small;
        size_t cap = cr->cap > sizeof(small) ? cr->cap : sizeof(small);
        rk_msg_header rh;
        size_t len = 0;

        if (cap > sizeof(small) && (buf = malloc(cap)) == NULL) {
            (void)proxy_error_reply(ctx, m->hdr, RK_ENOMEM);
            return RK_OK;
        }
        rc = rk__cl_request_call(cl, px, m->hdr, m->data, m->len,
            cr->deadline_ns, &rh, buf, cap, &len);
        if (rc == RK_OK)
            (void)rk_ctx_reply(ctx, m, rh.type_id, buf, len);
        else if (rc != RK_EBUSY)
            reply_detail(ctx, m, rc);
        if (buf != small)
            free(buf);
        if (rc != RK_EBUSY)
            return RK_OK;
    }
    if (cr != NULL && cr->deadline_ns != 0) {
        uint64_t now = rk_now_ns();
        timeout_ns = cr->deadline_ns > now ? (int64_t)(cr->deadline_ns - now)
                                           : RK_NO_WAIT;
    }
    rk__cl_frame_from_header(&f, m->hdr, m->len);
    f.kind = RK__CL_DATA;
    f.target = px->target;
    f.aux = (int32_t)px->index;
    if (request)
        rk__cl_idmap_put(&cl->fwd, &f.id, px->rank, px->index, f.priority);
    rc = rk__cl_stage_frame(cl, px->rank, 0, &f, m->data, timeout_ns);
    if (rc == RK_OK) {
        STAT(cl, forwarded, 1);
        return RK_OK;
    }
    STAT(cl, unreachable, 1);
    if (request) {
        rk__cl_idmap_take(&cl->fwd, &f.id, NULL, NULL);
        (void)proxy_error_reply(ctx, m->hdr, rc);
    }
    return RK_OK;
}

static int
proxy_add(
    rk_cluster *cl, const char *id, int rank, uint32_t target, bool topic)
{
    cl_proxy *px;

    if (cl->n_proxies == cl->proxies_cap)
        return rk__fail(RK_EFULL, "cluster: proxy table full");
    px = &cl->proxies[cl->n_proxies];
    if (snprintf(px->id, sizeof(px->id), "%s", id) >= (int)sizeof(px->id))
        return rk__fail(RK_EINVAL, "cluster: proxy id '%s' is too long", id);
    px->cl = cl;
    px->rank = rank;
    px->target = target;
    px->index = (uint32_t)cl->n_proxies;
    px->topic = topic;
    cl->n_proxies++;
    return RK_OK;
}

/* Registers, launches and activates one kernel of the cluster; with a
 * handler (call), one that takes direct calls too. */
int
rk__cl_start_kernel(rk_cluster *cl, const char *id, rk_actor_fn fn,
    rk_handler_fn call, void *user, const rk__cl_dir_export *e)
{
    rk_kernel_def def;
    int rc;

    memset(&def, 0, sizeof(def));
    def.id = id;
    def.actor = fn;
    def.handler = call;
    def.config.direct_calls = call != NULL;
    def.config.user = user;
    def.config.backend = "cpu";
    /* Proxies park at once: on shared cores a spinning proxy holds the
     * CPU the thread it waits for needs (round trip 118 us against 130 us
     * with 200 spins, 171 us with 5000, on 2 cores). */
    def.config.spin = 1;
    if (e != NULL) {
        def.config.input_capacity = e->capacity;
        def.config.max_payload = e->max_payload;
        def.config.backpressure = (rk_backpressure)e->backpressure;
        def.config.priority_bands = e->bands != 0;
    }
    if ((rc = rk_runtime_register(cl->rt, &def)) != RK_OK)
        return rc;
    if ((rc = rk_kernel_launch(cl->rt, id)) != RK_OK)
        return rc;
    return rk_kernel_activate(cl->rt, id);
}

/* The proxies of rank r's export i (record e): "r/id", and "id" when
 * bare and no local kernel (or earlier proxy) has the name. Each running
 * proxy holds a reference to the cluster. */
int
rk__cl_proxy_start(
    rk_cluster *cl, int r, uint32_t i, const rk__cl_dir_export *e, bool bare)
{
    char id[2 * (RK_ID_MAX + 1) + 16];
    rk_kernel_state s;
    int rc;

    if (bare)
        snprintf(id, sizeof(id), "%s", e->id);
    else
        snprintf(id, sizeof(id), "%d/%s", r, e->id);
    if (bare && rk_kernel_state_get(cl->rt, id, &s) == RK_OK)
        return RK_OK; /* a local kernel (or earlier proxy) */
    if ((rc = proxy_add(cl, id, r, i, false)) != RK_OK)
        return rc;
    if ((rc = rk__cl_start_kernel(cl, id, proxy_actor, proxy_call,
             &cl->proxies[cl->n_proxies - 1], e))
        != RK_OK)
        return rc;
    atomic_fetch_add(&cl->refs, 1);
    return RK_OK;
}

/* The proxy of rank r's topic member (record t): "r/#name", subscribed
 * to the topic here. A running proxy holds a reference to the cluster. */
int
rk__cl_topic_proxy_start(rk_cluster *cl, int r, const rk__cl_dir_topic *t)
{
    char id[2 * (RK_ID_MAX + 1) + 16];
    int rc;

    snprintf(id, sizeof(id), "%d/#%s", r, t->name);
    if ((rc = proxy_add(cl, id, r, t->index, true)) != RK_OK)
        return rc;
    if ((rc = rk__cl_start_kernel(
             cl, id, proxy_actor, NULL, &cl->proxies[cl->n_proxies - 1], NULL))
        != RK_OK)
        return rc;
    if ((rc = rk_subscribe(cl->rt, id, t->name)) != RK_OK)
        return rc;
    atomic_fetch_add(&cl->refs, 1);
    return RK_OK;
}
