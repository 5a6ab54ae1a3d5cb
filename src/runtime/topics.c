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

int
rk__publish(rk_runtime *rt, const char *topic, const rk_msg_header *h,
    const void *payload, size_t len, int64_t timeout_ns, size_t *delivered)
{
    rk__topic *t;
    size_t ok = 0;
    int first = RK_OK;

    pthread_rwlock_rdlock(&rt->topics_lock);
    t = topic_find(rt, topic);
    if (t != NULL) {
        rk__counter_add(&t->published, 1);
        for (uint32_t i = 0; i < t->nsubs; i++) {
            int rc = rk__deliver(
                t->subs[i], h, payload, len, timeout_ns, "publish");
            if (rc == RK_OK) {
                ok++;
            } else if (first == RK_OK) {
                first = rc;
            }
        }
        rk__counter_add(&t->delivered, ok);
        rk__counter_add(&t->failed, t->nsubs - ok);
    }
    pthread_rwlock_unlock(&rt->topics_lock);
    if (delivered != NULL)
        *delivered = ok;
    return first;
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
