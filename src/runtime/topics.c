/*
 * src/runtime/topics.c - topics: subscriptions and fan-out publishing
 * through rk__deliver.
 */
#include <string.h>

#include "runtime/internal.h"

static rk__topic *
topic_find(rk_runtime *rt, const char *name)
{
    for (uint32_t i = 0; i < rt->ntopics; i++)
        if (strcmp(rt->topics[i].name, name) == 0)
            return &rt->topics[i];
    return NULL;
}

static int
check_name(const char *what, const char *name)
{
    return rk__check_name(what, "topic name", name, RK_ID_MAX);
}

/* Where k stands among t's subscribers; t->nsubs if it is not one. */
static uint32_t
sub_index(const rk__topic *t, const rk__kernel *k)
{
    uint32_t i = 0;

    while (i < t->nsubs && t->subs[i] != k)
        i++;
    return i;
}

/* Adds k to the subscribers of topic (t), creating the topic if t is
 * NULL. Caller holds topics_lock for writing. */
static int
sub_add(rk_runtime *rt, rk__topic *t, const char *topic, rk__kernel *k)
{
    if (t == NULL) {
        if (rt->ntopics == rt->topics_cap) {
            uint32_t cap = rt->topics_cap ? rt->topics_cap * 2 : 8;
            rk__topic *nt = realloc(rt->topics, cap * sizeof(*nt));
            if (nt == NULL)
                return rk__fail(RK_ENOMEM, "no memory for topic '%s'", topic);
            rt->topics = nt;
            rt->topics_cap = cap;
        }
        t = &rt->topics[rt->ntopics++];
        memset(t, 0, sizeof(*t));
        strcpy(t->name, topic);
    }
    if (t->nsubs == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 4;
        rk__kernel **ns = realloc(t->subs, cap * sizeof(*ns));
        if (ns == NULL)
            return rk__fail(RK_ENOMEM, "no memory for topic '%s'", topic);
        t->subs = ns;
        t->cap = cap;
    }
    t->subs[t->nsubs++] = k;
    return RK_OK;
}

/* rk_subscribe (add) and rk_unsubscribe: the same checks, then under the
 * topics' write lock the kernel joins or leaves the topic. */
static int
subscription(
    rk_runtime *rt, const char *kernel_id, const char *topic, bool add)
{
    rk__kernel *k;
    rk__topic *t;
    uint32_t i;
    int rc;

    if ((rc = check_name(add ? "rk_subscribe" : "rk_unsubscribe", topic))
            != RK_OK
        || (k = rk__kernel_for_op(rt, kernel_id, &rc)) == NULL)
        return rc;
    pthread_rwlock_wrlock(&rt->topics_lock);
    t = topic_find(rt, topic);
    i = t != NULL ? sub_index(t, k) : 0;
    if (t != NULL && i < t->nsubs) {
        if (add) {
            rc = rk__fail(RK_EEXIST, "kernel '%s' already subscribes to '%s'",
                kernel_id, topic);
        } else {
            memmove(&t->subs[i], &t->subs[i + 1],
                (t->nsubs - i - 1) * sizeof(*t->subs));
            t->nsubs--;
        }
    } else if (add) {
        rc = sub_add(rt, t, topic, k);
    } else {
        rc = rk__fail(RK_ENOTFOUND, "kernel '%s' does not subscribe to '%s'",
            kernel_id, topic);
    }
    pthread_rwlock_unlock(&rt->topics_lock);
    return rc;
}

int
rk_subscribe(rk_runtime *rt, const char *kernel_id, const char *topic)
{
    return subscription(rt, kernel_id, topic, true);
}

int
rk_unsubscribe(rk_runtime *rt, const char *kernel_id, const char *topic)
{
    return subscription(rt, kernel_id, topic, false);
}

/* A device publish's masks (rk__publish_device): what the publishing
 * instance did with its publish on device topic `index` for subscriber k
 * itself. 1: carried (delivered on its lane), 2: dropped there (its
 * policy), 0: the runtime delivers. Adds k's bit to *seen. */
static int
carried_by(const rk__inst *pub, uint32_t index, uint32_t carried,
    uint32_t dropped, const rk__kernel *k, uint32_t *seen)
{
    for (uint32_t j = 0; pub != NULL && j < pub->ntopic_out; j++)
        if (pub->topic_out[j] == k && pub->topic_out_index[j] == index) {
            *seen |= 1u << j;
            return (carried >> j) & 1u ? 1 : (dropped >> j) & 1u ? 2 : 0;
        }
    return 0;
}

/* A drop on subscriber k's lane: counted in its dropped. Acquire: as
 * rk__deliver's load of inst. */
static void
lane_drop(rk__kernel *k)
{
    rk__inst *si = atomic_load_explicit(&k->inst, memory_order_acquire);

    if (si != NULL)
        rk__counter_add(&si->lane_dropped, 1);
}

static uint32_t
bits(uint32_t m)
{
    uint32_t n = 0;

    for (; m != 0; m &= m - 1)
        n++;
    return n;
}

/* The lanes of a device publish whose subscriber has left the topic
 * since the publisher's launch (its lane stays wired until the next one,
 * docs/cuda-k2k.md): what they carried counts as delivered, what they
 * dropped as failed and in that subscriber's dropped, as for the others.
 * Returns the failed count. */
static uint32_t
left_lanes(rk__topic *t, const rk__inst *pub, uint32_t carried,
    uint32_t dropped, uint32_t seen)
{
    carried &= ~seen;
    dropped &= ~seen;
    rk__counter_add(&t->delivered, bits(carried));
    for (uint32_t j = 0; j < pub->ntopic_out; j++)
        if ((dropped >> j) & 1u)
            lane_drop(pub->topic_out[j]);
    return bits(dropped);
}

/* The fan-out: every subscriber of topic, but those pub (a device
 * instance, or NULL) reached itself according to carried and dropped. */
static int
fan_out(rk_runtime *rt, const char *topic, const rk_msg_header *h,
    const void *payload, size_t len, int64_t timeout_ns, size_t *delivered,
    const rk__inst *pub, uint32_t index, uint32_t carried, uint32_t dropped)
{
    rk__topic *t;
    size_t ok = 0;
    uint32_t seen = 0;
    int first = RK_OK;

    pthread_rwlock_rdlock(&rt->topics_lock);
    t = topic_find(rt, topic);
    if (t != NULL) {
        rk__counter_add(&t->published, 1);
        for (uint32_t i = 0; i < t->nsubs; i++) {
            int by
                = carried_by(pub, index, carried, dropped, t->subs[i], &seen);
            int rc;
            if (by == 2) {
                /* Dropped by its policy on its lane: counted (failed and
                 * its dropped), not an error of the publish, as a
                 * DROP_NEW inbox's drop is not. */
                lane_drop(t->subs[i]);
                continue;
            }
            rc = by == 1 ? RK_OK
                         : rk__deliver(t->subs[i], h, payload, len,
                               timeout_ns, "publish");
            if (rc == RK_OK) {
                ok++;
            } else if (first == RK_OK) {
                first = rc;
            }
        }
        rk__counter_add(&t->delivered, ok);
        rk__counter_add(&t->failed,
            t->nsubs - ok
                + (pub != NULL ? left_lanes(t, pub, carried, dropped, seen)
                               : 0));
    }
    pthread_rwlock_unlock(&rt->topics_lock);
    if (delivered != NULL)
        *delivered = ok;
    return first;
}

int
rk__publish(rk_runtime *rt, const char *topic, const rk_msg_header *h,
    const void *payload, size_t len, int64_t timeout_ns, size_t *delivered)
{
    return fan_out(
        rt, topic, h, payload, len, timeout_ns, delivered, NULL, 0, 0, 0);
}

int
rk__publish_device(rk__inst *inst, uint32_t index, const rk_msg_header *h,
    const void *payload, size_t len, uint32_t carried, uint32_t dropped)
{
    const rk__kernel *k = inst->k;
    const rk_kernel_config *c = &k->def.config;

    if (index >= c->ndevice_topics)
        return rk__fail(RK_ENOTFOUND,
            "kernel '%s': rk_dev_publish on topic index %u, and its "
            "device_topics name %u",
            k->id, index, c->ndevice_topics);
    return fan_out(k->rt, c->device_topics[index], h, payload, len,
        RK_WAIT_FOREVER, NULL, inst, index, carried, dropped);
}

void
rk__topic_device_count(rk__inst *inst, uint32_t bit, uint64_t n)
{
    const rk_kernel_config *c = &inst->k->def.config;
    rk_runtime *rt = inst->k->rt;
    uint32_t index;
    bool first = true;
    rk__topic *t;

    if (bit >= inst->ntopic_out || n == 0)
        return;
    index = inst->topic_out_index[bit];
    /* Each such publish went on every lane of its index: published once,
     * by the index's first lane; delivered once per lane. */
    for (uint32_t j = 0; j < bit; j++)
        first = first && inst->topic_out_index[j] != index;
    pthread_rwlock_rdlock(&rt->topics_lock);
    if (index < c->ndevice_topics
        && (t = topic_find(rt, c->device_topics[index])) != NULL) {
        if (first)
            rk__counter_add(&t->published, n);
        rk__counter_add(&t->delivered, n);
    }
    pthread_rwlock_unlock(&rt->topics_lock);
}

/* A subscriber s that a publisher p's device code may reach on its own:
 * another kernel on p's backend with device code, taking what p sends
 * (as rk_connect's check). Where it runs is the backend's to say. */
static bool
reachable(const rk__kernel *p, const rk__kernel *s)
{
    const rk_msgtype *it = s->def.config.input_type;

    return s != p && s->be == p->be && s->def.config.device_source != NULL
        && (it == NULL || it == p->def.config.output_type);
}

/* Does k subscribe to topic (name)? topics_lock held. */
static bool
subscribes(rk_runtime *rt, const rk__kernel *k, const char *topic)
{
    rk__topic *t = topic_find(rt, topic);

    return t != NULL && sub_index(t, k) < t->nsubs;
}

static rk__backend_topic
topic_entry(uint32_t index, const rk__kernel *peer)
{
    return (rk__backend_topic) { index,
        peer->def.config.backpressure != RK_BP_BLOCK,
        { peer->id, &peer->def.config } };
}

/* The launch's view of device topics (rk__backend_launch.topic_out,
 * topic_relay, topic_in), as the subscriptions stand now: a device
 * publisher's fan-out plan is made at its launch (docs/cuda-k2k.md,
 * "Subscriptions after launch"). Under k's lock. */
void
rk__topics_for_launch(rk__kernel *k, rk__backend_launch *spec, rk__inst *inst)
{
    rk_runtime *rt = k->rt;
    const rk_kernel_config *c = &k->def.config;
    rk__kernel *pubs[RK__TOPIC_IN_MAX * 4];
    uint32_t npubs = 0;

    spec->ntopic_out = spec->ntopic_in = 0;
    spec->topic_relay = 0;
    inst->ntopic_out = 0;
    if (k->be->code & RK__CODE_DEVICE) {
        /* The kernels with device topics, first (the registry's lock is
         * not taken under the topics' lock). */
        pthread_mutex_lock(&rt->reg_lock);
        for (uint32_t i = 0; i < rt->nkernels && npubs < RK__TOPIC_IN_MAX * 4;
             i++) {
            rk__kernel *s
                = atomic_load_explicit(&rt->slots[i], memory_order_acquire);
            if (s != NULL && s->def.config.ndevice_topics != 0
                && reachable(s, k))
                pubs[npubs++] = s;
        }
        pthread_mutex_unlock(&rt->reg_lock);
    }
    pthread_rwlock_rdlock(&rt->topics_lock);
    for (uint32_t i = 0; i < c->ndevice_topics; i++) {
        rk__topic *t = topic_find(rt, c->device_topics[i]);
        bool relay = t == NULL || t->nsubs == 0;
        for (uint32_t j = 0; t != NULL && j < t->nsubs; j++) {
            if (i >= RK__TOPIC_BITS || !reachable(k, t->subs[j])
                || spec->ntopic_out == RK__TOPIC_OUT_MAX) {
                relay = true;
                continue;
            }
            inst->topic_out_index[inst->ntopic_out] = i;
            inst->topic_out[inst->ntopic_out++] = t->subs[j];
            spec->topic_out[spec->ntopic_out++] = topic_entry(i, t->subs[j]);
        }
        if (relay && i < RK__TOPIC_BITS)
            spec->topic_relay |= 1u << i;
    }
    for (uint32_t p = 0; p < npubs; p++) {
        const rk_kernel_config *pc = &pubs[p]->def.config;
        for (uint32_t i = 0; i < pc->ndevice_topics && i < RK__TOPIC_BITS
             && spec->ntopic_in < RK__TOPIC_IN_MAX;
             i++)
            if (subscribes(rt, k, pc->device_topics[i]))
                spec->topic_in[spec->ntopic_in++] = topic_entry(i, pubs[p]);
    }
    pthread_rwlock_unlock(&rt->topics_lock);
}

int
rk_publish(rk_runtime *rt, const char *topic, uint32_t type_id,
    const void *payload, size_t len, uint8_t priority, int64_t timeout_ns,
    size_t *delivered)
{
    rk_msg_header h;
    int rc;

    if (delivered != NULL)
        *delivered = 0;
    if (rt == NULL || (payload == NULL && len != 0))
        return rk__fail(RK_EINVAL, "rk_publish: NULL argument");
    if ((rc = check_name("rk_publish", topic)) != RK_OK)
        return rc;
    if ((rc = rk__call_enter(rt, "publish")) != RK_OK)
        return rc;
    rk__header(&h, type_id, priority, rk_now_ns(), 0);
    h.payload_len = (uint32_t)len;
    rc = rk__publish(rt, topic, &h, payload, len, timeout_ns, delivered);
    rk__call_leave(rt);
    return rc;
}

int
rk_publish_frame(rk_runtime *rt, const char *topic, const rk_msg_header *h,
    const void *payload, size_t len, int64_t timeout_ns, size_t *delivered)
{
    int rc;

    if (delivered != NULL)
        *delivered = 0;
    if (rt == NULL || h == NULL || (payload == NULL && len != 0))
        return rk__fail(RK_EINVAL, "rk_publish_frame: NULL argument");
    if ((rc = check_name("rk_publish_frame", topic)) != RK_OK)
        return rc;
    if ((rc = rk__call_enter(rt, "publish")) != RK_OK)
        return rc;
    {
        rk_msg_header out;
        rk__forwarded_header(&out, h, len, rk_now_ns());
        rc = rk__publish(rt, topic, &out, payload, len, timeout_ns, delivered);
    }
    rk__call_leave(rt);
    return rc;
}

int
rk_topic_stats_get(rk_runtime *rt, const char *topic, rk_topic_stats *out)
{
    rk__topic *t;
    int rc = RK_OK;

    if ((rc = rk__host_check(
             rt, topic != NULL && out != NULL, "rk_topic_stats_get"))
        != RK_OK)
        return rc;
    pthread_rwlock_rdlock(&rt->topics_lock);
    if ((t = topic_find(rt, topic)) != NULL) {
        out->published = rk__counter_get(&t->published);
        out->delivered = rk__counter_get(&t->delivered);
        out->failed = rk__counter_get(&t->failed);
        out->subscribers = t->nsubs;
    } else {
        rc = rk__fail(RK_ENOTFOUND, "no topic '%s'", topic);
    }
    pthread_rwlock_unlock(&rt->topics_lock);
    return rc;
}


int
rk_runtime_topic_names(
    rk_runtime *rt, char (*names)[RK_ID_MAX + 1], size_t cap, size_t *n)
{
    uint32_t i;
    int rc;

    if ((rc = rk__host_check(rt, n != NULL && (names != NULL || cap == 0),
             "rk_runtime_topic_names"))
        != RK_OK)
        return rc;
    pthread_rwlock_rdlock(&rt->topics_lock);
    for (i = 0; i < rt->ntopics && i < cap; i++)
        memcpy(names[i], rt->topics[i].name, sizeof(rt->topics[i].name));
    *n = rt->ntopics;
    pthread_rwlock_unlock(&rt->topics_lock);
    return RK_OK;
}
