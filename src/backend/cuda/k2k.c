/*
 * src/backend/cuda/k2k.c - rk_connect routes between cuda kernels on the
 * device (see k2k.h).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/k2k.h"
#include "backend/cuda/peer.h"
#include "common/common.h"
#include "memory/mem.h"

struct rk__k2k_link {
    rk__k2k_link *next;
    char from[RK_ID_MAX + 1], to[RK_ID_MAX + 1];
    uint32_t tag; /* 0: the rk_connect route; i + 1: device topic i */
    uint32_t ga, gb, per; /* grids; lanes per block of `to` */
    uint32_t slot_size;
    size_t lane_bytes, size;
    void *dev;   /* cuMemAlloc'd: per * gb lanes */
    int ordinal; /* the device holding them: the target's (peer.h) */
    int refs;
    /* The sender's route table (host address, route 0 of each of its ga
     * blocks, nroutes apart) while its instance exists, and whether the
     * target's instance is up: the sender's entries are written once
     * both hold (publish_routes), so until its target has started a
     * sender's output goes through the relay. */
    rk_dev_lane *sender_tab;
    uint32_t sender_nroutes;
    int target_up;
};

_Static_assert(RK__TOPIC_BITS == RK_DEV_TOPIC_BITS,
    "the runtime's topic_relay is the device's");
_Static_assert(RK__TOPIC_OUT_MAX <= 8 && RK_DEV_MAX_ROUTES <= 8,
    "a publish's carried and dropped masks are a byte each");

static pthread_mutex_t links_lock = PTHREAD_MUTEX_INITIALIZER;
static rk__k2k_link *links; /* under links_lock */

static uint32_t
grid_of(const rk_kernel_config *c)
{
    return c->grid_size ? c->grid_size : 1;
}

static uint32_t
stride_of(const rk_kernel_config *c)
{
    return (uint32_t)((RK_MSG_HEADER_SIZE + (size_t)c->max_payload + 63u)
        & ~(size_t)63u);
}

/* A device route: the peer is a kernel with device code on this backend
 * (the runtime hands only peers on the same backend) and on the same
 * device or a peer-linked one (peer.h: lanes in the target's memory,
 * written over the link); any other route between devices stays on the
 * host relay. */
static int
on_device(const rk__k2k *k, const rk__backend_peer *p)
{
    return p->kernel_id != NULL && p->config != NULL
        && p->config->device_source != NULL
        && rk__cu_peer_linked(k->ordinal, rk__cu_ordinal(p->config));
}

/* Topic lanes join kernels on this device only (docs/cuda-k2k.md); a
 * subscriber on another device is served by the relay. */
static int
on_this_device(const rk__k2k *k, const rk__backend_peer *p)
{
    return on_device(k, p) && rk__cu_ordinal(p->config) == k->ordinal;
}

/* Adds p (tag) to k's links in, needing `per` lanes per block. */
static void
plan_in(rk__k2k *k, const rk__backend_peer *p, uint32_t tag, uint32_t per)
{
    k->in_peer[k->nin] = p;
    k->in_tag[k->nin] = tag;
    k->lanes[k->nin++] = per;
}

int
rk__k2k_plan(rk__k2k *k, int ordinal, const rk__backend_launch *spec,
    uint32_t grid, rk__dh_cfg *dc)
{
    uint32_t lanes = 0, nr;
    int rc;

    memset(k, 0, sizeof(*k));
    k->ordinal = ordinal;
    if ((rc = rk__cu_peer_plan(ordinal, spec)) != RK_OK)
        return rc; /* a route to a device that is not there, ... */
    for (uint32_t i = 0; i < spec->nroutes_in; i++) {
        const rk__backend_peer *p = &spec->routes_in[i];
        if (!on_device(k, p))
            continue;
        lanes += (grid_of(p->config) + grid - 1) / grid;
        if (1 + lanes > RK_DEV_MAX_IN)
            return rk__fail(RK_ENOTSUP,
                "kernel '%s': the device routes into it (the last from "
                "'%s', %u blocks, into %u blocks here) need %u K2K input "
                "lanes per block, more than %u: use larger grids here, "
                "fewer routes, or route through the host",
                spec->kernel_id, p->kernel_id, grid_of(p->config), grid,
                lanes, RK_DEV_MAX_IN - 1);
        plan_in(k, p, 0, (grid_of(p->config) + grid - 1) / grid);
    }
    /* Topic lanes while there is room; the rest stays on the relay. */
    for (uint32_t i = 0; i < spec->ntopic_in; i++) {
        const rk__backend_topic *t = &spec->topic_in[i];
        uint32_t per = (grid_of(t->peer.config) + grid - 1) / grid;
        if (on_this_device(k, &t->peer) && 1 + lanes + per <= RK_DEV_MAX_IN) {
            plan_in(k, &t->peer, t->index + 1, per);
            lanes += per;
        }
    }
    dc->nin = 1 + lanes;
    nr = k->tfirst = on_device(k, &spec->route_to) ? 1 : 0;
    for (uint32_t j = 0; j < spec->ntopic_out && nr < RK_DEV_MAX_ROUTES; j++)
        if (on_this_device(k, &spec->topic_out[j].peer)) {
            k->tout_j[k->ntout++] = j;
            nr++;
        }
    dc->nroutes = nr;
    return RK_OK;
}

/* Fills the control lines of every lane of a new link in device memory:
 * a host image copied on a stream of our own (never the legacy stream,
 * which would wait for the resident kernels), complete on return. */
static int
link_init(rk__k2k_link *l, int ordinal, int sys)
{
    const struct rk__cuda_driver *d;
    rk__cu_stream s = NULL;
    unsigned char *img = calloc(1, l->size);
    int rc;

    if (img == NULL)
        return rk__fail(RK_ENOMEM, "no memory for a K2K link");
    for (uint32_t i = 0; i < l->per * l->gb; i++) {
        rk_ring_ctrl *c = (rk_ring_ctrl *)(void *)(img + i * l->lane_bytes);
        rk_ring_init(c, RK__K2K_CAPACITY, l->slot_size);
        c->flags = sys ? RK_RING_F_SYS : 0; /* sender on another GPU */
    }
    rc = rk__cuda_enter(ordinal, &d);
    if (rc == RK_OK)
        rc = rk__cuda_check(d->cuStreamCreate(&s, RK__CU_STREAM_NON_BLOCKING),
            "cuStreamCreate");
    if (rc == RK_OK)
        rc = rk__mem_h2d(ordinal, l->dev, img, l->size, s);
    if (rc == RK_OK)
        rc = rk__cuda_check(d->cuStreamSynchronize(s), "cuStreamSynchronize");
    if (s != NULL)
        d->cuStreamDestroy(s);
    free(img);
    return rc;
}

/* The link from -> to (tag; kernels on devices src and dst), made if new
 * in dst's memory. links_lock held. */
static int
link_get(const char *from, const char *to, uint32_t tag, uint32_t ga,
    uint32_t gb, uint32_t slot_size, int src, int dst, rk__k2k_link **out)
{
    rk__k2k_link *l;
    int rc;

    for (l = links; l != NULL; l = l->next)
        if (strcmp(l->from, from) == 0 && strcmp(l->to, to) == 0
            && l->tag == tag && l->ga == ga && l->gb == gb
            && l->slot_size == slot_size) {
            l->refs++;
            *out = l;
            return RK_OK;
        }
    if ((l = calloc(1, sizeof(*l))) == NULL)
        return rk__fail(RK_ENOMEM, "no memory for a K2K link");
    snprintf(l->from, sizeof(l->from), "%s", from);
    snprintf(l->to, sizeof(l->to), "%s", to);
    l->tag = tag;
    l->ga = ga;
    l->gb = gb;
    l->per = (ga + gb - 1) / gb;
    l->slot_size = slot_size;
    l->lane_bytes = sizeof(rk_ring_ctrl)
        + (((size_t)RK__K2K_CAPACITY * slot_size + 255u) & ~(size_t)255u);
    l->size = l->lane_bytes * l->per * gb;
    l->ordinal = dst;
    rc = rk__mem_alloc(RK__MEM_DEVICE, dst, NULL, l->size, 256, &l->dev);
    if (rc == RK_OK && (rc = link_init(l, dst, src != dst)) != RK_OK)
        rk__mem_release(RK__MEM_DEVICE, dst, NULL, l->dev, l->size);
    if (rc != RK_OK) {
        free(l);
        return rk__fail(rc, "device route '%s' -> '%s': %s", from, to,
            rk_errdetail());
    }
    l->refs = 1;
    l->next = links;
    links = l;
    *out = l;
    return RK_OK;
}

/* Lane i of a link as the device sees it. */
static rk_dev_lane
lane_at(const rk__k2k_link *l, uint32_t i)
{
    unsigned char *at = (unsigned char *)l->dev + (size_t)i * l->lane_bytes;
    return (rk_dev_lane) { (rk_ring_ctrl *)(void *)at,
        at + sizeof(rk_ring_ctrl), RK_DEV_LANE_RING, 0 };
}

/* Writes the sender's route entries: slots first, then ctrl with a
 * release store, which pairs with the block's acquire in rk_dev__route.
 * links_lock held; the sender's region stays mapped while sender_tab is
 * set. */
static void
publish_routes(rk__k2k_link *l)
{
    if (l->sender_tab == NULL || !l->target_up)
        return;
    for (uint32_t b = 0; b < l->ga; b++) {
        rk_dev_lane *e = &l->sender_tab[b * l->sender_nroutes];
        rk_dev_lane v = lane_at(l, (b % l->gb) * l->per + b / l->gb);
        e->slots = v.slots;
        atomic_store_explicit((_Atomic uint64_t *)(void *)&e->ctrl,
            (uint64_t)(uintptr_t)v.ctrl, memory_order_release);
    }
}

/* The sending side of a link: route r of the kernel whose region is d
 * (its entries are written once the target is up). links_lock held. */
static int
wire_out(const char *from, const rk__backend_peer *p, uint32_t tag,
    uint32_t r, int ordinal, rk__dh *d, rk__k2k_link **out)
{
    int rc = link_get(from, p->kernel_id, tag, d->cfg.nblocks,
        grid_of(p->config), stride_of(p->config), ordinal,
        rk__cu_ordinal(p->config), out);

    (void)rk__cuda_enter(ordinal, NULL); /* if made on the target's */
    if (rc == RK_OK) {
        (*out)->sender_tab = d->route_tab + r;
        (*out)->sender_nroutes = d->cfg.nroutes;
        publish_routes(*out); /* if the target is up already */
    }
    return rc;
}

/* The kernel's topic fields (dev_kernel.h, rk_dev_kargs): which route is
 * which subscriber's lane, and which topic indices the relay must also
 * see (any subscriber no lane here reaches). */
static void
wire_topics(const rk__k2k *k, const rk__backend_launch *spec, rk__dh *d)
{
    uint32_t relay = spec->topic_relay;

    for (uint32_t j = 0; j < spec->ntopic_out; j++) {
        const rk__backend_topic *t = &spec->topic_out[j];
        uint32_t q = 0;
        while (q < k->ntout && k->tout_j[q] != j)
            q++;
        if (q == k->ntout) { /* not on this device, or no route left */
            if (t->index < RK__TOPIC_BITS)
                relay |= 1u << t->index;
            continue;
        }
        d->kargs.topic_of[k->tfirst + q] = (unsigned short)(t->index + 1);
        d->kargs.topic_bit[k->tfirst + q] = (unsigned char)j;
        if (t->drop)
            d->kargs.topic_drop |= 1u << (k->tfirst + q);
    }
    d->kargs.topic_relay = relay;
}

int
rk__k2k_wire(
    rk__k2k *k, int ordinal, const rk__backend_launch *spec, rk__dh *d)
{
    uint32_t g = d->cfg.nblocks, nin = d->cfg.nin, first = 1;
    int rc = RK_OK;

    pthread_mutex_lock(&links_lock);
    if (k->tfirst != 0) {
        rc = wire_out(spec->kernel_id, &spec->route_to, 0, 0, ordinal, d,
            &k->out);
        d->kargs.send_route = 1;
    }
    for (uint32_t q = 0; rc == RK_OK && q < k->ntout; q++) {
        const rk__backend_topic *t = &spec->topic_out[k->tout_j[q]];
        rc = wire_out(spec->kernel_id, &t->peer, t->index + 1,
            k->tfirst + q, ordinal, d, &k->tout[q]);
    }
    wire_topics(k, spec, d);
    for (uint32_t i = 0; rc == RK_OK && i < k->nin; i++) {
        const rk__backend_peer *p = k->in_peer[i];
        rk__k2k_link *l;
        rc = link_get(p->kernel_id, spec->kernel_id, k->in_tag[i],
            grid_of(p->config), g, (uint32_t)d->cfg.slot_size,
            rk__cu_ordinal(p->config), ordinal, &l);
        if (rc != RK_OK)
            break;
        k->in[i] = l;
        /* Block tb's lanes first .. first + per - 1 are this link's. */
        for (uint32_t tb = 0; tb < g; tb++)
            for (uint32_t q = 0; q < l->per; q++)
                d->in_tab[tb * nin + first + q] = lane_at(l, tb * l->per + q);
        first += l->per;
    }
    pthread_mutex_unlock(&links_lock);
    if (rc != RK_OK)
        rk__k2k_release(k, NULL, ordinal);
    return rc;
}

void
rk__k2k_started(rk__k2k *k)
{
    pthread_mutex_lock(&links_lock);
    for (uint32_t i = 0; i < k->nin; i++)
        if (k->in[i] != NULL) {
            k->in[i]->target_up = 1;
            publish_routes(k->in[i]); /* a running sender starts using it */
        }
    pthread_mutex_unlock(&links_lock);
}

void
rk__k2k_partners(rk__k2k *k, const struct rk__cuda_driver *drv,
    const struct rk__cuda_ext *ext, const rk__backend_launch *spec, int cc,
    uint32_t sms, uint32_t own_per_sm)
{
    const rk__backend_peer *cand[1 + RK_DEV_MAX_ROUTES + RK__K2K_IN_MAX];
    const rk__backend_peer *peers[1 + RK_DEV_MAX_ROUTES + RK__K2K_IN_MAX];
    uint32_t nc = 0, n = 0;

    /* Whoever this kernel's blocks wait on, or who waits on them. */
    if (k->out != NULL)
        cand[nc++] = &spec->route_to;
    for (uint32_t q = 0; q < k->ntout; q++)
        cand[nc++] = &spec->topic_out[k->tout_j[q]].peer;
    for (uint32_t i = 0; i < k->nin; i++)
        cand[nc++] = k->in_peer[i];
    for (uint32_t i = 0; i < nc; i++) {
        const rk__backend_peer *p = cand[i];
        int seen = strcmp(p->kernel_id, spec->kernel_id) == 0;
        /* Each kernel once (A -> B and B -> A are one partner). */
        for (uint32_t j = 0; j < n && !seen; j++)
            seen = strcmp(peers[j]->kernel_id, p->kernel_id) == 0;
        /* Only kernels on this device share its SMs (peer.h). */
        if (!seen && rk__cu_ordinal(p->config) == k->ordinal)
            peers[n++] = p;
    }
    k->npartners = 0;
    for (uint32_t i = 0; i < n; i++) {
        const rk_kernel_config *c = peers[i]->config;
        rk__cu_module mod;
        rk__cu_function fn;
        int per_sm = 0;
        /* Its code is loaded at registration: the look-up loads nothing
         * while kernels run (RK_EBUSY then, and the estimate stands). */
        if (rk__cu_module_get(drv, peers[i]->kernel_id, c, cc, k->ordinal, &mod)
                != RK_OK
            || drv->cuModuleGetFunction(&fn, mod, c->device_entry)
                != RK__CUDA_SUCCESS
            || ext->occupancy(&per_sm, fn,
                   (int)(c->block_size ? c->block_size : 128), 0)
                != RK__CUDA_SUCCESS
            || per_sm <= 0)
            per_sm = (int)own_per_sm;
        k->partners[k->npartners++] = (rk__cu_partner) { peers[i]->kernel_id,
            grid_of(c), (uint32_t)per_sm, sms };
    }
}

/* Copies n bytes of device memory at src to dst on a stream of our own
 * (never the legacy stream, which would wait for the resident kernels),
 * complete on return: RK_OK or an error. */
static int
d2h_sync(int ordinal, void *dst, const void *src, size_t n)
{
    const struct rk__cuda_driver *d;
    rk__cu_stream s = NULL;
    int rc = rk__cuda_enter(ordinal, &d);

    if (rc == RK_OK)
        rc = rk__cuda_check(d->cuStreamCreate(&s, RK__CU_STREAM_NON_BLOCKING),
            "cuStreamCreate");
    if (rc == RK_OK)
        rc = rk__mem_d2h(ordinal, dst, src, n, s);
    if (rc == RK_OK)
        rc = rk__cuda_check(d->cuStreamSynchronize(s), "cuStreamSynchronize");
    if (s != NULL)
        d->cuStreamDestroy(s);
    return rc;
}

/* The payload length in a frame's header, clipped to its slot. */
static size_t
frame_len(const unsigned char *f, uint32_t slot_size)
{
    uint32_t plen;

    memcpy(&plen, f + offsetof(rk_msg_header, payload_len), sizeof(plen));
    if (plen > slot_size - RK_MSG_HEADER_SIZE)
        plen = slot_size - RK_MSG_HEADER_SIZE;
    return RK_MSG_HEADER_SIZE + (size_t)plen;
}

size_t
rk__k2k_peek_failed(
    int ordinal, rk__dh *d, uint32_t b, unsigned char *dst, size_t cap)
{
    uint32_t lane = rk__dh_failed_lane(d, b);
    rk_ring_ctrl c;
    unsigned char *f;
    size_t n = 0;

    if (lane < 2 || lane - 1 >= d->cfg.nin)
        return 0; /* none, or on the host's lane (rk__dh_peek_failed) */
    /* The table entry is host memory; the lane is device memory. The
     * block is FAULTED on this message: its head stays until the host's
     * verdict (which it posts after this copy). */
    rk_dev_lane e = d->in_tab[b * d->cfg.nin + lane - 1];
    size_t at = offsetof(rk_ring_ctrl, head);
    /* From head on: the producer may be writing the tail's line (and
     * slots past head) meanwhile; head and the slot at it stay put. */
    memset(&c, 0, sizeof(c));
    if (d2h_sync(ordinal, (unsigned char *)&c + at,
            (const unsigned char *)e.ctrl + at, sizeof(c) - at)
            != RK_OK
        || c.slot_size < RK_MSG_HEADER_SIZE || c.capacity == 0
        || (f = malloc(c.slot_size)) == NULL)
        return 0;
    if (d2h_sync(ordinal, f,
            e.slots
                + (size_t)((rk_ring_load_relaxed(&c.head) & ~RK_K2K_CLOSED)
                      & (c.capacity - 1))
                    * c.slot_size,
            c.slot_size)
        == RK_OK) {
        n = frame_len(f, c.slot_size);
        if (n > cap)
            n = cap;
        memcpy(dst, f, n);
    }
    free(f);
    return n;
}

/* What is left in a link's lanes, copied out of device memory (both
 * kernels returned), dead-lettered through io. */
static void
link_drain(const rk__k2k_link *l, const rk__backend_io *io, int ordinal)
{
    unsigned char *img;

    if (io == NULL || (img = malloc(l->size)) == NULL)
        return;
    if (d2h_sync(ordinal, img, l->dev, l->size) == RK_OK)
        for (uint32_t i = 0; i < l->per * l->gb; i++) {
            unsigned char *at = img + (size_t)i * l->lane_bytes;
            rk_ring_ctrl *c = (rk_ring_ctrl *)(void *)at;
            uint64_t head = rk_ring_load_relaxed(&c->head);
            uint64_t tail = rk_ring_load_relaxed(&c->tail);
            uint64_t pos = head & ~RK_K2K_CLOSED;
            for (uint64_t left = rk_k2k_left(head, tail); left; left--) {
                unsigned char *f = at + sizeof(rk_ring_ctrl)
                    + (pos++ % RK__K2K_CAPACITY) * l->slot_size;
                io->dead_letter(io->rt, RK_DEAD_TERMINATED, RK_ECLOSED,
                    f, frame_len(f, l->slot_size));
            }
        }
    free(img);
}

static void
link_put(rk__k2k_link *l, const rk__backend_io *io, int ordinal)
{
    if (l == NULL || --l->refs > 0)
        return;
    for (rk__k2k_link **at = &links; *at != NULL; at = &(*at)->next)
        if (*at == l) {
            *at = l->next;
            break;
        }
    link_drain(l, io, l->ordinal);
    rk__mem_release(RK__MEM_DEVICE, l->ordinal, NULL, l->dev, l->size);
    if (l->ordinal != ordinal)
        (void)rk__cuda_enter(ordinal, NULL); /* the caller's again */
    free(l);
}

int
rk__k2k_route_live(rk__k2k *k)
{
    int live;

    pthread_mutex_lock(&links_lock);
    live = k->out != NULL && k->out->sender_tab != NULL && k->out->target_up;
    pthread_mutex_unlock(&links_lock);
    return live;
}

void
rk__k2k_release(rk__k2k *k, const rk__backend_io *io, int ordinal)
{
    pthread_mutex_lock(&links_lock);
    if (k->out != NULL)
        k->out->sender_tab = NULL; /* its region goes away */
    link_put(k->out, io, ordinal);
    for (uint32_t q = 0; q < k->ntout; q++) {
        if (k->tout[q] != NULL)
            k->tout[q]->sender_tab = NULL;
        link_put(k->tout[q], io, ordinal);
    }
    for (uint32_t i = 0; i < k->nin; i++) {
        if (k->in[i] != NULL)
            k->in[i]->target_up = 0; /* the sender keeps its wiring */
        link_put(k->in[i], io, ordinal);
    }
    pthread_mutex_unlock(&links_lock);
    memset(k, 0, sizeof(*k));
}
