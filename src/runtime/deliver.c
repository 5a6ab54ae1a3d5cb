/*
 * src/runtime/deliver.c - moving messages: host send and receive,
 * request/reply, kernel-to-kernel routes, topics and the dead-letter queue.
 *
 * Every path into a kernel goes through rk__deliver, which applies the
 * target's state, type and size rules and then its input queue's
 * backpressure policy, so the counters add up the same way whoever sent.
 */
#include <sched.h>
#include <string.h>

#include "runtime/internal.h"

#define FRAME_ON_STACK   2048
#define REQUEST_SLICE_NS INT64_C(1000000)

/* Message ids: see rk__id_gen in internal.h. */
_Thread_local rk__idgen rk__id_gen = { { { 0 } }, RK__ID_BLOCK };

/* A forked child would go on numbering its parent's block (the same ids):
 * the forking thread's copy, the only thread there, starts a new one. */
static void
id_atfork_child(void)
{
    rk__id_gen.next = RK__ID_BLOCK;
}

static pthread_once_t id_atfork_once = PTHREAD_ONCE_INIT;

static void
id_atfork_register(void)
{
    (void)pthread_atfork(NULL, NULL, id_atfork_child);
}

void
rk__id_refill(void)
{
    (void)pthread_once(&id_atfork_once, id_atfork_register);
    rk__id_gen.base = rk_uuid_v7();
    rk__id_gen.next = 0;
}

uint32_t
rk__id_run(uint32_t want, rk_uuid *first, uint32_t *seq)
{
    uint32_t got;

    if (rk__unlikely(rk__id_gen.next == RK__ID_BLOCK))
        rk__id_refill();
    got = RK__ID_BLOCK - rk__id_gen.next;
    got = want < got ? want : got;
    *first = rk__id_gen.base;
    *seq = rk__id_gen.next;
    rk__id_put(&first->b[12], rk__id_gen.next);
    rk__id_gen.next += got;
    return got;
}

/* k frames of one id run (ids seq, seq + 1, ...). Inlined per payload
 * size, so the common sizes copy with a few vector moves, no call. */
static inline void
fill_run(unsigned char *dst, size_t stride, const rk_msg_header *h,
    const unsigned char *src, size_t len, uint32_t seq, uint32_t k)
{
    for (uint32_t j = 0; j < k; j++, dst += stride, src += len) {
        /* The header is copied as it is and only the id's counter bytes
         * are patched per frame. */
        memcpy(dst, h, sizeof(*h));
        rk__id_put(dst + offsetof(rk_msg_header, message_id) + 12, seq + j);
        if (len != 0)
            memcpy(dst + sizeof(*h), src, len);
    }
}

void
rk__fill_frames(unsigned char *dst, size_t stride, rk_msg_header *h,
    const unsigned char *src, size_t len, size_t n)
{
    while (n != 0) {
        uint32_t seq,
            k = rk__id_run(n > UINT32_MAX ? UINT32_MAX : (uint32_t)n,
                &h->message_id, &seq);
        if (len == 64)
            fill_run(dst, stride, h, src, 64, seq, k);
        else if (len == 32)
            fill_run(dst, stride, h, src, 32, seq, k);
        else
            fill_run(dst, stride, h, src, len, seq, k);
        dst += (size_t)k * stride;
        src += (size_t)k * len;
        n -= k;
    }
}

/* Why a send to k in state st is refused, or RK_OK to go ahead. */
static int
admit(rk__kernel *k, rk__inst *inst, uint32_t st, uint32_t type_id, size_t len)
{
    const rk_kernel_config *c = &k->def.config;
    int err;

    if (rk__likely(st == RK_KERNEL_ACTIVE)) {
        err = RK_OK;
    } else if (inst == NULL || st == RK_KERNEL_CREATED) {
        return rk__fail(
            RK_ENOTLAUNCHED, "kernel '%s' has not been launched", k->id);
    } else if (st == RK_KERNEL_LAUNCHED || st == RK_KERNEL_DEACTIVATED) {
        err = c->when_inactive == RK_INACTIVE_QUEUE ? RK_OK : RK_ENOTACTIVE;
    } else if (st == RK_KERNEL_FAILED) {
        err = RK_EFAILED;
    } else {
        err = RK_ETERMINATED;
    }
    if (err != RK_OK) {
        rk__counter_add(&inst->rejected, 1);
        return rk__fail(err, "kernel '%s' is %s", k->id,
            rk_kernel_state_name((rk_kernel_state)st));
    }
    if (c->input_type != NULL && type_id != c->input_type->id) {
        const rk_msgtype *got = rk_msgtype_by_id(type_id);
        rk__counter_add(&inst->rejected, 1);
        return rk__fail(RK_ETYPE,
            "kernel '%s' takes %s (id %u), got %s (id %u)", k->id,
            c->input_type->name, c->input_type->id,
            got           ? got->name
                : type_id ? "an unregistered type"
                          : "an untyped message",
            type_id);
    }
    if (len > c->max_payload) {
        rk__counter_add(&inst->rejected, 1);
        return rk__fail(RK_EMSGSIZE,
            "kernel '%s': %zu-byte payload exceeds max_payload %u", k->id, len,
            c->max_payload);
    }
    return RK_OK;
}

/* A send the queue refused because it is closed: the kernel ended after
 * admit() looked. The queue does not count it, so the runtime does. */
static int
closed(rk__kernel *k, rk__inst *inst)
{
    uint32_t st = atomic_load_explicit(&k->state, memory_order_acquire);

    rk__counter_add(&inst->rejected, 1);
    return rk__fail(st == RK_KERNEL_FAILED ? RK_EFAILED : RK_ETERMINATED,
        "kernel '%s' is %s", k->id, rk_kernel_state_name((rk_kernel_state)st));
}

/* A send the input queue refused: names the kernel. Backpressure results
 * leave no detail of their own; RK_EINVAL and RK_EMSGSIZE do, and it is
 * kept. */
static int
queue_fail(const rk__kernel *k, int rc)
{
    char why[256];

    if (rc != RK_EINVAL && rc != RK_EMSGSIZE)
        return rk__fail(rc, "kernel '%s': %s", k->id, rk_strerror(rc));
    snprintf(why, sizeof(why), "%s", rk_errdetail());
    return rk__fail(rc, "kernel '%s': %s", k->id, why);
}

int
rk__deliver(rk__kernel *k, const rk_msg_header *h, const void *payload,
    size_t len, int64_t timeout_ns)
{
    /* Acquire loads pair with the CAS on state and the release store of
     * inst in rk_kernel_launch. */
    uint32_t st = atomic_load_explicit(&k->state, memory_order_acquire);
    rk__inst *inst = atomic_load_explicit(&k->inst, memory_order_acquire);
    int rc;

    if ((rc = admit(k, inst, st, h->type_id, len)) != RK_OK)
        return rc;
    rc = rk__inq_send(
        &inst->in, h, sizeof(*h), payload, len, h->priority, timeout_ns);
    if (rk__likely(rc == RK_OK))
        return RK_OK; /* the queue woke the kernel (inq.h) */
    if (rc == RK_ECLOSED)
        return closed(k, inst);
    return queue_fail(k, rc);
}

/* ------------------------------------------------------- host side */

static bool
stamp(const rk__kernel *k)
{
    return !k->def.config.telemetry_off;
}

int
rk_send(rk_runtime *rt, rk_kernel kh, uint32_t type_id, const void *payload,
    size_t len, uint8_t priority, int64_t timeout_ns)
{
    rk__kernel *k;
    rk_msg_header h;
    int rc;

    if (rk__unlikely(payload == NULL && len != 0))
        return rk__fail(RK_EINVAL, "rk_send: payload is NULL");
    if ((rc = rk__resolve(rt, kh, &k)) != RK_OK)
        return rc;
    rk__header(&h, type_id, priority, stamp(k) ? rk_now_ns() : 0, 0);
    h.payload_len = (uint32_t)len;
    return rk__deliver(k, &h, payload, len, timeout_ns);
}

int
rk_send_id(rk_runtime *rt, const char *id, uint32_t type_id,
    const void *payload, size_t len, uint8_t priority, int64_t timeout_ns)
{
    rk_kernel kh;
    int rc;

    if ((rc = rk_kernel_lookup(rt, id, &kh)) != RK_OK)
        return rc;
    return rk_send(rt, kh, type_id, payload, len, priority, timeout_ns);
}

int
rk_send_batch(rk_runtime *rt, rk_kernel kh, uint32_t type_id, const void *base,
    size_t len, size_t n, uint8_t priority, int64_t timeout_ns, size_t *sent)
{
    rk__kernel *k;
    rk__inst *inst;
    rk_msg_header h;
    uint32_t st;
    size_t i = 0;
    int rc = RK_OK;

    if (sent != NULL)
        *sent = 0;
    if (base == NULL && n != 0 && len != 0)
        return rk__fail(RK_EINVAL, "rk_send_batch: base is NULL");
    if ((rc = rk__resolve(rt, kh, &k)) != RK_OK)
        return rc;
    st = atomic_load_explicit(&k->state, memory_order_acquire);
    inst = atomic_load_explicit(&k->inst, memory_order_acquire);
    if ((rc = admit(k, inst, st, type_id, len)) != RK_OK)
        return rc;
    rk__header(&h, type_id, priority, stamp(k) ? rk_now_ns() : 0, 0);
    h.payload_len = (uint32_t)len;
    /* Either inbox: frames are written straight into runs of claimed
     * slots, and the queue wakes the kernel after each run (inq.h). */
    rc = rk__inq_send_many(&inst->in, &h, base, len, n, timeout_ns, &i);
    if (sent != NULL)
        *sent = i;
    if (rc == RK_ECLOSED)
        return closed(k, inst);
    return rc == RK_OK ? RK_OK : queue_fail(k, rc);
}

/* Copies a frame out to the caller. RK_EMSGSIZE if cap is too small. */
static int
copy_out(const unsigned char *frame, size_t flen, rk_msg_header *hdr,
    void *buf, size_t cap, size_t *len)
{
    size_t plen = flen - RK_MSG_HEADER_SIZE;

    if (len != NULL)
        *len = plen;
    if (plen > cap)
        return rk__fail(
            RK_EMSGSIZE, "reply of %zu bytes, buffer of %zu", plen, cap);
    if (hdr != NULL)
        memcpy(hdr, frame, sizeof(*hdr));
    if (plen != 0)
        memcpy(buf, frame + RK_MSG_HEADER_SIZE, plen);
    return RK_OK;
}

static void
stash_link(rk__inst *inst, rk__stash_item *s, bool front)
{
    s->next = NULL;
    if (front) {
        s->next = inst->stash_head;
        inst->stash_head = s;
        if (inst->stash_tail == NULL)
            inst->stash_tail = s;
    } else {
        if (inst->stash_tail != NULL)
            inst->stash_tail->next = s;
        else
            inst->stash_head = s;
        inst->stash_tail = s;
    }
}

/* Copies a frame to the back of the stash; false if out of memory. */
static bool
stash_push(rk__inst *inst, const unsigned char *frame, size_t flen)
{
    rk__stash_item *s = malloc(sizeof(*s) + flen);

    if (s == NULL)
        return false;
    s->len = flen;
    memcpy(s->frame, frame, flen);
    stash_link(inst, s, false);
    return true;
}

/* Removes and returns the first stashed frame matching corr (NULL: any). */
static rk__stash_item *
stash_take(rk__inst *inst, const rk_uuid *corr)
{
    rk__stash_item **pp, *prev = NULL;

    for (pp = &inst->stash_head; *pp != NULL; pp = &(*pp)->next) {
        rk__stash_item *s = *pp;
        const rk_msg_header *h = (const void *)s->frame;
        if (corr == NULL
            || memcmp(&h->correlation_id, corr, sizeof(*corr)) == 0) {
            *pp = s->next;
            if (inst->stash_tail == s)
                inst->stash_tail = prev;
            return s;
        }
        prev = s;
    }
    return NULL;
}

/*
 * Takes one output message of inst: from the stash if one matches corr
 * (NULL: any), else from the queue; a queue message that does not match
 * is stashed. Called with out_lock held; with other waiters, it waits in
 * short slices and drops the lock in between so they can look too.
 */
static int
take_output(rk__inst *inst, const rk_uuid *corr, rk_msg_header *hdr, void *buf,
    size_t cap, size_t *len, uint64_t deadline, int64_t spin_ns)
{
    int rc;

    for (;;) {
        rk__stash_item *s = inst->stash_head ? stash_take(inst, corr) : NULL;
        uint64_t slice_end;

        if (s != NULL) {
            rc = copy_out(s->frame, s->len, hdr, buf, cap, len);
            if (rc == RK_EMSGSIZE)
                stash_link(inst, s, true); /* kept for a bigger buffer */
            else
                free(s);
            return rc;
        }
        /* With other waiters, wait in slices (see above). */
        slice_end = deadline;
        if (atomic_load_explicit(&inst->out_waiters, memory_order_relaxed)
            > 0) {
            uint64_t now = rk_now_ns();
            if (deadline > now && deadline - now > (uint64_t)REQUEST_SLICE_NS)
                slice_end = now + (uint64_t)REQUEST_SLICE_NS;
        }
        rc = rk__outq_wait(&inst->out, spin_ns, slice_end);
        if (rc == RK_OK) {
            /* Copied straight out of the slot, which is freed after. */
            size_t flen;
            const unsigned char *frame = rk__outq_peek(&inst->out, &flen);
            const rk_msg_header *h = (const void *)frame;
            bool mine = corr == NULL
                || memcmp(&h->correlation_id, corr, sizeof(*corr)) == 0;

            if (mine) {
                /* Too big for buf: the frame stays at the head of the
                 * queue for a call with a bigger buffer. */
                rc = copy_out(frame, flen, hdr, buf, cap, len);
                if (rc != RK_EMSGSIZE)
                    rk__outq_release(&inst->out);
                return rc;
            }
            /* Someone else's: set aside for them. Without memory for
             * that it stays queued, and this caller gets the error. */
            if (!stash_push(inst, frame, flen))
                return rk__fail(RK_ENOMEM,
                    "no memory to set aside an output of kernel '%s' "
                    "while waiting for a reply; it stays queued",
                    inst->k->id);
            rk__outq_release(&inst->out);
            continue;
        }
        if (rc != RK_ETIMEDOUT || rk_now_ns() >= deadline)
            return rc;
        /* Let another waiter look at the stash. */
        pthread_mutex_unlock(&inst->out_lock);
        sched_yield();
        pthread_mutex_lock(&inst->out_lock);
    }
}

static int64_t
rt_spin(const rk__kernel *k)
{
    return k->rt->cfg.host_spin_ns > 0 ? k->rt->cfg.host_spin_ns : 0;
}

static int
recv_output(rk__kernel *k, const rk_uuid *corr, rk_msg_header *hdr, void *buf,
    size_t cap, size_t *len, int64_t timeout_ns)
{
    rk__inst *inst = atomic_load_explicit(&k->inst, memory_order_acquire);
    uint64_t deadline = rk__deadline(timeout_ns);
    int rc;

    if (inst == NULL)
        return rk__fail(
            RK_ENOTLAUNCHED, "kernel '%s' has not been launched", k->id);
    /* out_waiters counts the receivers blocked on out_lock, so that the
     * holder waits in slices while others want to look. The usual lone
     * receiver takes the lock at the first try and never touches it (two
     * read-modify-writes less per receive). */
    if (pthread_mutex_trylock(&inst->out_lock) != 0) {
        atomic_fetch_add_explicit(&inst->out_waiters, 1, memory_order_relaxed);
        pthread_mutex_lock(&inst->out_lock);
        atomic_fetch_sub_explicit(&inst->out_waiters, 1, memory_order_relaxed);
    }
    /* Spin before parking unless the caller asked not to wait: a reply
     * usually comes within a microsecond or two, parking costs several. */
    rc = take_output(inst, corr, hdr, buf, cap, len, deadline,
        timeout_ns == RK_NO_WAIT ? 0 : rt_spin(k));
    pthread_mutex_unlock(&inst->out_lock);
    if (rc == RK_ETIMEDOUT)
        return rk__fail(rc, "no output from kernel '%s' in time", k->id);
    return rc;
}

int
rk_recv(rk_runtime *rt, rk_kernel kh, rk_msg_header *hdr, void *buf,
    size_t cap, size_t *len, int64_t timeout_ns)
{
    rk__kernel *k;
    int rc;

    if (buf == NULL && cap != 0)
        return rk__fail(RK_EINVAL, "rk_recv: buf is NULL");
    if ((rc = rk__resolve(rt, kh, &k)) != RK_OK)
        return rc;
    return recv_output(k, NULL, hdr, buf, cap, len, timeout_ns);
}

int
rk_recv_id(rk_runtime *rt, const char *id, rk_msg_header *hdr, void *buf,
    size_t cap, size_t *len, int64_t timeout_ns)
{
    rk_kernel kh;
    int rc;

    if ((rc = rk_kernel_lookup(rt, id, &kh)) != RK_OK)
        return rc;
    return rk_recv(rt, kh, hdr, buf, cap, len, timeout_ns);
}

int
rk_request(rk_runtime *rt, rk_kernel kh, uint32_t type_id, const void *req,
    size_t req_len, rk_msg_header *reply_hdr, void *reply, size_t cap,
    size_t *reply_len, int64_t timeout_ns)
{
    rk__kernel *k;
    rk_msg_header h;
    uint64_t t0 = rk_now_ns();
    int rc;

    if ((req == NULL && req_len != 0) || (reply == NULL && cap != 0))
        return rk__fail(RK_EINVAL, "rk_request: NULL buffer");
    if ((rc = rk__resolve(rt, kh, &k)) != RK_OK)
        return rc;
    rk__header(&h, type_id, RK_MSG_PRIORITY_DEFAULT, stamp(k) ? t0 : 0, 0);
    h.payload_len = (uint32_t)req_len;
    if ((rc = rk__deliver(k, &h, req, req_len, timeout_ns)) != RK_OK)
        return rc;
    if (timeout_ns > 0) {
        uint64_t used = rk_now_ns() - t0;
        timeout_ns = used >= (uint64_t)timeout_ns ? RK_NO_WAIT
                                                  : timeout_ns - (int64_t)used;
    }
    return recv_output(
        k, &h.message_id, reply_hdr, reply, cap, reply_len, timeout_ns);
}

/* ------------------------------------------------------- routing */

int
rk_connect(rk_runtime *rt, const char *from, const char *to)
{
    rk__kernel *a, *b;
    const rk_msgtype *ot, *it;

    if (rt == NULL)
        return rk__fail(RK_EINVAL, "runtime is NULL");
    if ((a = rk__kernel_by_id(rt, from)) == NULL)
        return rk__not_found(rt, from);
    if ((b = rk__kernel_by_id(rt, to)) == NULL)
        return rk__not_found(rt, to);
    ot = a->def.config.output_type;
    it = b->def.config.input_type;
    if (it != NULL && ot != it)
        return rk__fail(RK_ETYPE,
            "cannot connect '%s' -> '%s': '%s' sends %s, '%s' "
            "takes %s",
            from, to, from, ot ? ot->name : "any type", to, it->name);
    /* Release pairs with the acquire load in ctx_emit. The route belongs
     * to the kernel, so it outlives relaunches. */
    atomic_store_explicit(&a->route, b, memory_order_release);
    return RK_OK;
}

int
rk_disconnect(rk_runtime *rt, const char *from)
{
    rk__kernel *a;

    if (rt == NULL)
        return rk__fail(RK_EINVAL, "runtime is NULL");
    if ((a = rk__kernel_by_id(rt, from)) == NULL)
        return rk__not_found(rt, from);
    atomic_store_explicit(&a->route, NULL, memory_order_release);
    return RK_OK;
}

/* --------------------------------------------------------- topics */

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
    if (name == NULL || name[0] == '\0' || strlen(name) > RK_ID_MAX)
        return rk__fail(RK_EINVAL, "%s: topic name empty or over %d bytes",
            what, RK_ID_MAX);
    return RK_OK;
}

int
rk_subscribe(rk_runtime *rt, const char *kernel_id, const char *topic)
{
    rk__kernel *k;
    rk__topic *t;
    int rc;

    if (rt == NULL)
        return rk__fail(RK_EINVAL, "runtime is NULL");
    if ((rc = check_name("rk_subscribe", topic)) != RK_OK)
        return rc;
    if ((k = rk__kernel_by_id(rt, kernel_id)) == NULL)
        return rk__not_found(rt, kernel_id);
    pthread_rwlock_wrlock(&rt->topics_lock);
    t = topic_find(rt, topic);
    if (t == NULL) {
        if (rt->ntopics == rt->topics_cap) {
            uint32_t cap = rt->topics_cap ? rt->topics_cap * 2 : 8;
            rk__topic *nt = realloc(rt->topics, cap * sizeof(*nt));
            if (nt == NULL) {
                rc = rk__fail(RK_ENOMEM, "no memory for topic '%s'", topic);
                goto out;
            }
            rt->topics = nt;
            rt->topics_cap = cap;
        }
        t = &rt->topics[rt->ntopics++];
        memset(t, 0, sizeof(*t));
        strcpy(t->name, topic);
    }
    for (uint32_t i = 0; i < t->nsubs; i++)
        if (t->subs[i] == k) {
            rc = rk__fail(RK_EEXIST, "kernel '%s' already subscribes to '%s'",
                kernel_id, topic);
            goto out;
        }
    if (t->nsubs == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 4;
        rk__kernel **ns = realloc(t->subs, cap * sizeof(*ns));
        if (ns == NULL) {
            rc = rk__fail(RK_ENOMEM, "no memory for topic '%s'", topic);
            goto out;
        }
        t->subs = ns;
        t->cap = cap;
    }
    t->subs[t->nsubs++] = k;
out:
    pthread_rwlock_unlock(&rt->topics_lock);
    return rc;
}

int
rk_unsubscribe(rk_runtime *rt, const char *kernel_id, const char *topic)
{
    rk__kernel *k;
    rk__topic *t;
    int rc;

    if (rt == NULL)
        return rk__fail(RK_EINVAL, "runtime is NULL");
    if ((rc = check_name("rk_unsubscribe", topic)) != RK_OK)
        return rc;
    if ((k = rk__kernel_by_id(rt, kernel_id)) == NULL)
        return rk__not_found(rt, kernel_id);
    pthread_rwlock_wrlock(&rt->topics_lock);
    rc = rk__fail(RK_ENOTFOUND, "kernel '%s' does not subscribe to '%s'",
        kernel_id, topic);
    if ((t = topic_find(rt, topic)) != NULL) {
        for (uint32_t i = 0; i < t->nsubs; i++) {
            if (t->subs[i] == k) {
                memmove(&t->subs[i], &t->subs[i + 1],
                    (t->nsubs - i - 1) * sizeof(*t->subs));
                t->nsubs--;
                rc = RK_OK;
                rk__clear_detail();
                break;
            }
        }
    }
    pthread_rwlock_unlock(&rt->topics_lock);
    return rc;
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
            int rc = rk__deliver(t->subs[i], h, payload, len, timeout_ns);
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
    rk__header(&h, type_id, priority, rk_now_ns(), 0);
    h.payload_len = (uint32_t)len;
    return rk__publish(rt, topic, &h, payload, len, timeout_ns, delivered);
}

int
rk_topic_stats_get(rk_runtime *rt, const char *topic, rk_topic_stats *out)
{
    rk__topic *t;
    int rc = RK_OK;

    if (rt == NULL || topic == NULL || out == NULL)
        return rk__fail(RK_EINVAL, "rk_topic_stats_get: NULL argument");
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

/* ---------------------------------------------------- dead letters */

void
rk__dead_letter(rk_runtime *rt, rk__inst *inst, rk_dead_reason reason,
    int error, const void *frame, size_t len)
{
    rk__dead d;
    size_t plen = len > RK_MSG_HEADER_SIZE ? len - RK_MSG_HEADER_SIZE : 0;

    memset(&d, 0, sizeof(d));
    strcpy(d.dl.kernel_id, inst->k->id);
    d.dl.reason = reason;
    d.dl.error = error;
    memcpy(&d.dl.hdr, frame, len < sizeof(d.dl.hdr) ? len : sizeof(d.dl.hdr));
    d.dl.len = plen;
    d.payload = plen ? malloc(plen) : NULL;
    if (d.payload != NULL)
        memcpy(d.payload, (const char *)frame + RK_MSG_HEADER_SIZE, plen);
    else
        d.dl.len = 0; /* out of memory: keep the header at least */
    rk__counter_add_sw(&inst->kc.dead_lettered, 1);

    pthread_mutex_lock(&rt->dlq_lock);
    if (rt->dlq_count == rt->cfg.dead_letter_capacity) {
        /* Full: the oldest goes (counted), the newest is kept. */
        free(rt->dlq[rt->dlq_head].payload);
        rt->dlq_head = (rt->dlq_head + 1) % rt->cfg.dead_letter_capacity;
        rt->dlq_count--;
        rt->dlq_overflow++;
    }
    rt->dlq[(rt->dlq_head + rt->dlq_count) % rt->cfg.dead_letter_capacity] = d;
    rt->dlq_count++;
    pthread_cond_signal(&rt->dlq_cond);
    pthread_mutex_unlock(&rt->dlq_lock);
}

int
rk_dead_letter_recv(rk_runtime *rt, rk_dead_letter *out, void *buf, size_t cap,
    int64_t timeout_ns)
{
    uint64_t deadline = rk__deadline(timeout_ns);
    rk__dead d;

    if (rt == NULL || out == NULL || (buf == NULL && cap != 0))
        return rk__fail(RK_EINVAL, "rk_dead_letter_recv: NULL argument");
    pthread_mutex_lock(&rt->dlq_lock);
    while (rt->dlq_count == 0) {
        struct timespec ts;
        if (rk_now_ns() >= deadline) {
            pthread_mutex_unlock(&rt->dlq_lock);
            return rk__fail(RK_ETIMEDOUT, "no dead letters");
        }
        if (deadline == UINT64_MAX) {
            pthread_cond_wait(&rt->dlq_cond, &rt->dlq_lock);
            continue;
        }
        ts.tv_sec = (time_t)(deadline / 1000000000u);
        ts.tv_nsec = (long)(deadline % 1000000000u);
        pthread_cond_timedwait(&rt->dlq_cond, &rt->dlq_lock, &ts);
    }
    d = rt->dlq[rt->dlq_head];
    rt->dlq_head = (rt->dlq_head + 1) % rt->cfg.dead_letter_capacity;
    rt->dlq_count--;
    pthread_mutex_unlock(&rt->dlq_lock);
    *out = d.dl;
    if (d.payload != NULL && cap != 0)
        memcpy(buf, d.payload, d.dl.len < cap ? d.dl.len : cap);
    free(d.payload);
    return RK_OK;
}
