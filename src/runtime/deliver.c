/*
 * src/runtime/deliver.c - the way into a kernel: admission (state, type
 * and size rules), the input queue's backpressure, and the host's sends.
 *
 * Every path into a kernel goes through rk__deliver (or rk_send_batch,
 * which applies the same admission), so the counters add up the same way
 * whoever sent. After queueing, the sender notifies the instance's wake
 * eventcount; it never calls the backend.
 */
#include <stdio.h>
#include <string.h>

#include "runtime/internal.h"

/* Why a send (op: "send", "request", "publish") to k in state st is
 * refused, or RK_OK. Every refusal names the operation, the kernel and
 * its state or the rule. */
/* A send to a kernel rk_kernel_refuse closed: counted like any refusal
 * before the queue. */
static int
refused(rk__kernel *k, rk__inst *inst, int err, const char *op)
{
    if (inst != NULL)
        rk__counter_add(&inst->rejected, 1);
    return rk__fail(
        err, "%s refused by kernel '%s': %s", op, k->id, k->refuse_detail);
}

/* admit's checks in full, for a send its fast path did not pass: err is
 * the refusal rk_kernel_refuse set (RK_OK: none). Out of line, so that
 * the sends that inline admit carry only its fast path. */
static __attribute__((noinline)) int
admit_checks(rk__kernel *k, rk__inst *inst, uint32_t st, uint32_t type_id,
    size_t len, const char *op, int err)
{
    const rk_kernel_config *c = &k->def.config;

    if (err != RK_OK)
        return refused(k, inst, err, op);
    if (rk__likely(st == RK_KERNEL_ACTIVE)) {
        err = RK_OK;
    } else if (inst == NULL || st == RK_KERNEL_CREATED) {
        return rk__fail(RK_ENOTLAUNCHED,
            "%s refused by kernel '%s': it has not been launched", op, k->id);
    } else if (st == RK_KERNEL_LAUNCHED || st == RK_KERNEL_DEACTIVATED) {
        err = c->when_inactive == RK_INACTIVE_QUEUE ? RK_OK : RK_ENOTACTIVE;
    } else if (st == RK_KERNEL_FAILED) {
        err = RK_EFAILED;
    } else {
        err = RK_ETERMINATED;
    }
    if (err != RK_OK) {
        rk__counter_add(&inst->rejected, 1);
        return rk__fail(err, "%s refused by kernel '%s': it is %s", op, k->id,
            rk_kernel_state_name((rk_kernel_state)st));
    }
    if (c->input_type != NULL && type_id != c->input_type->id) {
        const rk_msgtype *got = rk_msgtype_by_id(type_id);
        rk__counter_add(&inst->rejected, 1);
        return rk__fail(RK_ETYPE,
            "%s refused by kernel '%s': it takes %s (id %u), got %s (id %u)",
            op, k->id, c->input_type->name, c->input_type->id,
            got           ? got->name
                : type_id ? "an unregistered type"
                          : "an untyped message",
            type_id);
    }
    if (len > c->max_payload) {
        rk__counter_add(&inst->rejected, 1);
        return rk__fail(RK_EMSGSIZE,
            "%s refused by kernel '%s': %zu-byte payload exceeds max_payload "
            "%u",
            op, k->id, len, c->max_payload);
    }
    return RK_OK;
}

/* RK_OK if k takes a send of type_id and len bytes in state st, else the
 * refusal, counted and named (op: "send", "call", ...). The common case,
 * an ACTIVE kernel that nothing refuses, is a few compares inline. */
static inline int
admit(rk__kernel *k, rk__inst *inst, uint32_t st, uint32_t type_id, size_t len,
    const char *op)
{
    const rk_kernel_config *c = &k->def.config;
    /* Acquire pairs with the release store in rk_kernel_refuse (the
     * detail); the one branch the hot path pays for refusals. */
    int err = atomic_load_explicit(&k->refuse_err, memory_order_acquire);

    if (rk__likely(err == RK_OK && st == RK_KERNEL_ACTIVE
            && (c->input_type == NULL || type_id == c->input_type->id)
            && len <= c->max_payload))
        return RK_OK;
    return admit_checks(k, inst, st, type_id, len, op, err);
}

/* A send the queue refused because it is closed: the kernel ended after
 * admit() looked. The queue does not count it, so the runtime does. */
static int
closed(rk__kernel *k, rk__inst *inst, const char *op)
{
    uint32_t st = atomic_load_explicit(&k->state, memory_order_acquire);

    rk__counter_add(&inst->rejected, 1);
    return rk__fail(st == RK_KERNEL_FAILED ? RK_EFAILED : RK_ETERMINATED,
        "%s refused by kernel '%s': it is %s (its input is closed)", op, k->id,
        rk_kernel_state_name((rk_kernel_state)st));
}

/* A send the input queue refused: names the kernel. Backpressure results
 * leave no detail of their own; RK_EINVAL and RK_EMSGSIZE do, and it is
 * kept. */
static int
queue_fail(const rk__kernel *k, int rc, const char *op)
{
    char why[256];

    if (rc != RK_EINVAL && rc != RK_EMSGSIZE)
        return rk__fail(
            rc, "%s refused by kernel '%s': %s", op, k->id, rk_strerror(rc));
    snprintf(why, sizeof(why), "%s", rk_errdetail());
    return rk__fail(rc, "%s refused by kernel '%s': %s", op, k->id, why);
}

/* rk__deliver, with the caller keeping the message on a BLOCK refusal
 * when uncounted (rk__inbox_send). host: a host thread's send (rk_send,
 * rk_send_frame), which may take the caller's own path into an ACTIVE
 * device instance (the backend's send: straight into its input lane when
 * it is idle and nothing is queued ahead, counted in direct); else, and
 * for everything an instance sends (routes, topics), the inbox. */
static inline int
deliver(rk__kernel *k, const rk_msg_header *h, const void *payload, size_t len,
    int64_t timeout_ns, const char *op, bool uncounted, bool host)
{
    /* Acquire loads pair with the CAS on state and the release store of
     * inst in rk_kernel_launch. */
    uint32_t st = atomic_load_explicit(&k->state, memory_order_acquire);
    rk__inst *inst = atomic_load_explicit(&k->inst, memory_order_acquire);
    int rc;

    if ((rc = admit(k, inst, st, h->type_id, len, op)) != RK_OK)
        return rc;
    if (host && st == RK_KERNEL_ACTIVE && inst->be->send != NULL) {
        rc = inst->be->send(inst->bi, h, payload, len);
        if (rc == RK_OK) {
            rk__counter_add(&inst->direct, 1);
            return RK_OK;
        }
        /* RK_EBUSY (not idle) or RK_ECLOSED (ending): the inbox's rules
         * apply, as for any send racing a terminate. */
        if (rc != RK_EBUSY && rc != RK_ECLOSED)
            return queue_fail(k, rc, op);
    }
    rc = rk__inbox_send(inst->in, h, sizeof(*h), payload, len, h->priority,
        timeout_ns, uncounted);
    if (rk__likely(rc == RK_OK))
        return RK_OK; /* the queue woke the kernel (inbox.h) */
    if (rc == RK_ECLOSED)
        return closed(k, inst, op);
    return queue_fail(k, rc, op);
}

int
rk__deliver(rk__kernel *k, const rk_msg_header *h, const void *payload,
    size_t len, int64_t timeout_ns, const char *op)
{
    return deliver(k, h, payload, len, timeout_ns, op, false, false);
}

int
rk__deliver_try(rk__kernel *k, const rk_msg_header *h, const void *payload,
    size_t len, int64_t timeout_ns, const char *op)
{
    return deliver(k, h, payload, len, timeout_ns, op, true, false);
}

/* ------------------------------------------------------- host side */

int
rk_kernel_refuse(rk_runtime *rt, const char *id, int err, const char *detail)
{
    rk__kernel *k;
    int rc;

    if (id == NULL)
        return rk__fail(RK_EINVAL, "rk_kernel_refuse: id is NULL");
    if (err <= RK_OK || err >= RK__ERR_COUNT)
        return rk__fail(
            RK_EINVAL, "rk_kernel_refuse: %d is not an RK_E* error code", err);
    if ((k = rk__kernel_for_op(rt, id, &rc)) == NULL)
        return rc;
    pthread_mutex_lock(&k->lock);
    if (atomic_load_explicit(&k->refuse_err, memory_order_relaxed) == 0) {
        snprintf(k->refuse_detail, sizeof(k->refuse_detail), "%s",
            detail != NULL ? detail : rk_strerror(err));
        /* Release: a sender that sees err sees the detail. */
        atomic_store_explicit(&k->refuse_err, err, memory_order_release);
    }
    pthread_mutex_unlock(&k->lock);
    return RK_OK;
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
    if ((rc = rk__call_enter(rt, "send")) != RK_OK)
        return rc;
    if ((rc = rk__resolve(rt, kh, &k)) == RK_OK) {
        rk__header(&h, type_id, priority, rk__send_stamp(k), 0);
        h.payload_len = (uint32_t)len;
        rc = deliver(k, &h, payload, len, timeout_ns, "send", false, true);
    }
    rk__call_leave(rt);
    return rc;
}

static int
send_frame(rk_runtime *rt, rk_kernel kh, const rk_msg_header *h,
    const void *payload, size_t len, int64_t timeout_ns, bool uncounted)
{
    rk__kernel *k;
    rk_msg_header out;
    int rc;

    if (h == NULL || (payload == NULL && len != 0))
        return rk__fail(RK_EINVAL, "%s: NULL argument",
            uncounted ? "rk_send_frame_try" : "rk_send_frame");
    if ((rc = rk__call_enter(rt, "send")) != RK_OK)
        return rc;
    if ((rc = rk__resolve(rt, kh, &k)) == RK_OK) {
        rk__forwarded_header(&out, h, len, rk__send_stamp(k));
        rc = deliver(
            k, &out, payload, len, timeout_ns, "send", uncounted, true);
    }
    rk__call_leave(rt);
    return rc;
}

int
rk_send_frame(rk_runtime *rt, rk_kernel kh, const rk_msg_header *h,
    const void *payload, size_t len, int64_t timeout_ns)
{
    return send_frame(rt, kh, h, payload, len, timeout_ns, false);
}

int
rk_send_frame_try(rk_runtime *rt, rk_kernel kh, const rk_msg_header *h,
    const void *payload, size_t len, int64_t timeout_ns)
{
    return send_frame(rt, kh, h, payload, len, timeout_ns, true);
}

/* A direct call on k, for a caller inside rk__call_enter (rk_kernel_call,
 * rk_request_opts); op names it in a refusal. */
int
rk__kernel_call(rk__kernel *k, const rk_msg_header *h, const void *payload,
    size_t len, rk_call_reply *reply, const char *op)
{
    rk__inst *inst;
    rk_msg_header out;
    uint32_t st;
    int rc;

    /* A backend with the caller's own path (send: a device instance)
     * runs a call on the instance itself, so it needs no opt-in. */
    if (!k->def.config.direct_calls && k->be->send == NULL)
        return rk__fail(RK_ENOTSUP,
            "rk_kernel_call: kernel '%s' does not take direct calls "
            "(config.direct_calls)",
            k->id);
    /* Acquire: as in deliver(). Only an ACTIVE kernel runs calls; in any
     * other state the message is sent instead, under the state's rules. */
    st = atomic_load_explicit(&k->state, memory_order_acquire);
    inst = atomic_load_explicit(&k->inst, memory_order_acquire);
    if (st != RK_KERNEL_ACTIVE || inst == NULL)
        return RK_EBUSY;
    if (inst->be->call == NULL)
        return rk__fail(RK_ENOTSUP,
            "rk_kernel_call: the %s backend runs no direct calls",
            inst->be->name);
    if ((rc = admit(k, inst, st, h->type_id, len, op)) != RK_OK)
        return rc;
    rk__forwarded_header(&out, h, len, rk__send_stamp(k));
    rc = inst->be->call(inst->bi, &out, payload, len, reply);
    if (rc == RK_OK)
        rk__counter_add(&inst->direct, 1);
    else if (rc == RK_ECLOSED) /* racing a terminate: the instance ended */
        rc = rk__fail(RK_EBUSY,
            "%s: kernel '%s' is ending (its instance has exited); nothing "
            "was done",
            op, k->id);
    return rc;
}

static int
kernel_call(rk_runtime *rt, rk_kernel kh, const rk_msg_header *h,
    const void *payload, size_t len, rk_call_reply *reply)
{
    rk__kernel *k;
    int rc;

    if (h == NULL || (payload == NULL && len != 0))
        return rk__fail(RK_EINVAL, "rk_kernel_call: NULL argument");
    if ((rc = rk__call_enter(rt, "call")) != RK_OK)
        return rc;
    if ((rc = rk__resolve(rt, kh, &k)) == RK_OK)
        rc = rk__kernel_call(k, h, payload, len, reply, "call");
    rk__call_leave(rt);
    return rc;
}

int
rk_kernel_call(rk_runtime *rt, rk_kernel kh, const rk_msg_header *h,
    const void *payload, size_t len)
{
    return kernel_call(rt, kh, h, payload, len, NULL);
}

int
rk_kernel_call_reply(rk_runtime *rt, rk_kernel kh, const rk_msg_header *h,
    const void *payload, size_t len, rk_call_reply *reply)
{
    if (reply == NULL || (reply->buf == NULL && reply->cap != 0))
        return rk__fail(RK_EINVAL, "rk_kernel_call_reply: NULL reply buffer");
    reply->got = false;
    reply->len = 0;
    return kernel_call(rt, kh, h, payload, len, reply);
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

/* rk_send_batch's frames, written in place by the inbox's send_fill: h
 * with a fresh id each, then payload i (len bytes at src + i * len). */
typedef struct batch_fill {
    rk_msg_header *h;
    const unsigned char *src;
    size_t len;
} batch_fill;

static void
fill_batch(void *arg, size_t first, unsigned char *dst, size_t stride,
    size_t k, bool flagged)
{
    batch_fill *f = arg;

    rk__fill_frames(
        dst, stride, f->h, f->src + first * f->len, f->len, k, flagged);
}

/* The caller's own path for rk_send_batch: frame i is h with a fresh id
 * and payload i. */
static void
direct_frame(void *arg, size_t i, rk_msg_header *h, const void **payload)
{
    batch_fill *f = arg;

    *h = *f->h;
    h->message_id = rk__next_id();
    *payload = f->src + i * f->len;
}

static int
send_batch(rk_runtime *rt, rk_kernel kh, uint32_t type_id, const void *base,
    size_t len, size_t n, uint8_t priority, int64_t timeout_ns, size_t *sent)
{
    rk__kernel *k;
    rk__inst *inst;
    rk_msg_header h;
    uint32_t st;
    size_t i = 0, d = 0;
    int rc = RK_OK;

    if (sent != NULL)
        *sent = 0;
    if (base == NULL && n != 0 && len != 0)
        return rk__fail(RK_EINVAL, "rk_send_batch: base is NULL");
    if ((rc = rk__resolve(rt, kh, &k)) != RK_OK)
        return rc;
    st = atomic_load_explicit(&k->state, memory_order_acquire);
    inst = atomic_load_explicit(&k->inst, memory_order_acquire);
    if ((rc = admit(k, inst, st, type_id, len, "send")) != RK_OK)
        return rc;
    rk__header(&h, type_id, priority, rk__send_stamp(k), 0);
    h.payload_len = (uint32_t)len;
    /* An idle device instance takes what its lanes hold now straight from
     * the caller (the backend's send_batch), counted in direct; the rest
     * queues behind it. */
    if (st == RK_KERNEL_ACTIVE && inst->be->send_batch != NULL && n != 0) {
        batch_fill f = { &h, base, len };
        if (inst->be->send_batch(inst->bi, n, direct_frame, &f, &d) == RK_OK)
            rk__counter_add(&inst->direct, d);
        else
            d = 0;
    }
    /* Frames are written straight into runs of claimed slots (fill_batch),
     * and the inbox wakes the kernel after each run (inbox.h). */
    if (d < n) {
        batch_fill f = { &h, (const unsigned char *)base + d * len, len };
        rc = rk__inbox_send_fill(inst->in, priority,
            (uint32_t)(sizeof(h) + len), n - d, fill_batch, &f, timeout_ns,
            &i);
    }
    i += d;
    if (sent != NULL)
        *sent = i;
    if (rc == RK_ECLOSED)
        return closed(k, inst, "send");
    return rc == RK_OK ? RK_OK : queue_fail(k, rc, "send");
}

int
rk_send_batch(rk_runtime *rt, rk_kernel kh, uint32_t type_id, const void *base,
    size_t len, size_t n, uint8_t priority, int64_t timeout_ns, size_t *sent)
{
    int rc;

    if (sent != NULL)
        *sent = 0;
    if (base == NULL && n != 0 && len != 0)
        return rk__fail(RK_EINVAL, "rk_send_batch: base is NULL");
    if ((rc = rk__call_enter(rt, "send")) != RK_OK)
        return rc;
    rc = send_batch(rt, kh, type_id, base, len, n, priority, timeout_ns, sent);
    rk__call_leave(rt);
    return rc;
}

/* Copies a frame out to the caller. RK_EMSGSIZE if cap is too small. */
