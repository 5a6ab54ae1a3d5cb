/*
 * src/runtime/host_recv.c - the host's side of a kernel's output: receive,
 * request/reply by correlation id, and the stash of outputs a receive had
 * to step over.
 */
#include <sched.h>
#include <string.h>

#include "runtime/internal.h"

#define REQUEST_SLICE_NS INT64_C(1000000)
/* A receiver of a device instance's output reads its output lanes itself
 * (the backend's pull) for this long, then in parked slices of
 * PULL_SLICE_NS, so that an answer to a message the caller wrote into a
 * lane itself never waits for the relay's wake-up. */
#define PULL_POLL_NS  50000u
#define PULL_SLICE_NS 100000u

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

/* An error reply (RK_MSG_TYPE_ERROR) to a request, header h and payload
 * p: its code, with the detail it carries. The header is copied out; the
 * payload is not. */
static int
error_reply(const rk__kernel *k, const rk_msg_header *h,
    const unsigned char *p, size_t plen, rk_msg_header *hdr, size_t *len)
{
    uint32_t code;

    if (hdr != NULL)
        memcpy(hdr, h, sizeof(*hdr));
    if (len != NULL)
        *len = 0;
    code = plen >= 4 ? (uint32_t)p[0] | (uint32_t)p[1] << 8
            | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
                     : 0;
    if (code == RK_OK || code >= RK__ERR_COUNT)
        return rk__fail(RK_EDECODE,
            "kernel '%s' answered the request with a malformed error reply "
            "(%zu bytes)",
            k->id, plen);
    if (plen > 4)
        return rk__fail((int)code, "%.*s",
            (int)(plen - 4 > 400 ? 400 : plen - 4), (const char *)p + 4);
    return rk__fail((int)code, "kernel '%s' answered the request with %s",
        k->id, rk_err_name((int)code));
}

/* A frame that answers the caller: an error reply to a request (corr set)
 * becomes its code (*answered: the code is the answer's, not this
 * receive's), anything else is copied out. */
static int
answer(const rk__kernel *k, const rk_uuid *corr, const unsigned char *frame,
    size_t flen, rk_msg_header *hdr, void *buf, size_t cap, size_t *len,
    bool *answered)
{
    const rk_msg_header *h = (const void *)frame;

    if (corr != NULL && h->type_id == RK_MSG_TYPE_ERROR) {
        *answered = true;
        return error_reply(k, h, frame + RK_MSG_HEADER_SIZE,
            flen - RK_MSG_HEADER_SIZE, hdr, len);
    }
    return copy_out(frame, flen, hdr, buf, cap, len);
}

/* ------------------------------------------------- the consumer lock */

/*
 * Host receivers of one output take turns: out_busy is their lock. It is
 * a flag with an eventcount (out_free) rather than a mutex, so that a
 * receiver waiting for it keeps its own deadline (RK_NO_WAIT included)
 * while another one holds it, and a forked child never waits on a lock a
 * parent thread held.
 */
static bool
out_try(rk__inst *inst)
{
    uint32_t z = 0;

    /* Acquire pairs with the release store in out_unlock: the stash and
     * the ring's consumer side as the last holder left them. */
    return atomic_compare_exchange_strong_explicit(
        &inst->out_busy, &z, 1, memory_order_acquire, memory_order_relaxed);
}

/* Takes the lock by the absolute deadline: RK_OK or RK_ETIMEDOUT. */
static int
out_lock(rk__inst *inst, uint64_t deadline)
{
    int rc = RK_OK;

    if (rk__likely(out_try(inst)))
        return RK_OK;
    /* The holder waits in slices while this is non-zero (take_output). */
    atomic_fetch_add_explicit(&inst->out_waiters, 1, memory_order_relaxed);
    for (;;) {
        uint32_t key;

        if (out_try(inst))
            break;
        if (rk_now_ns() >= deadline) {
            rc = RK_ETIMEDOUT;
            break;
        }
        key = rk__ec_prepare(&inst->out_free);
        if (atomic_load_explicit(&inst->out_busy, memory_order_relaxed) == 0) {
            rk__ec_cancel(&inst->out_free);
            continue;
        }
        (void)rk__ec_wait(&inst->out_free, key, deadline);
    }
    atomic_fetch_sub_explicit(&inst->out_waiters, 1, memory_order_relaxed);
    return rc;
}

static void
out_unlock(rk__inst *inst)
{
    /* Release pairs with the acquire CAS in out_try. */
    atomic_store_explicit(&inst->out_busy, 0, memory_order_release);
    rk__ec_notify_all(&inst->out_free);
}

/*
 * Takes one output message of inst: from the stash if one matches corr
 * (NULL: any), else from the queue; a queue message that does not match
 * is stashed. Called with the consumer lock held; with other waiters, it
 * waits in short slices and lets the lock go in between so they can look
 * too. *held says whether the lock is still held on return.
 */
/* rk__outq_wait for a receiver; with a backend that has pull, the
 * receiver moves the instance's device output to the output queue itself
 * while it waits (the queue is empty whenever it pulls, so a pull of up
 * to output_capacity frames never waits for room). */
static int
wait_output(rk__inst *inst, int64_t spin_ns, uint64_t deadline)
{
    uint64_t t0 = 0;
    uint32_t spins = 0;
    int rc;

    if (inst->be->pull == NULL)
        return rk__outq_wait(&inst->out, spin_ns, deadline);
    for (;;) {
        uint64_t now, end;

        (void)inst->be->pull(inst->bi, inst->k->def.config.output_capacity);
        if ((rc = rk__outq_wait(&inst->out, 0, 0)) != RK_ETIMEDOUT)
            return rc;
        if (deadline == 0 || (now = rk_now_ns()) >= deadline)
            return RK_ETIMEDOUT;
        if (t0 == 0)
            t0 = now;
        if (now - t0 < PULL_POLL_NS) {
            if (++spins % 64 == 0)
                sched_yield();
            else
                rk__cpu_relax();
            continue;
        }
        end = now + PULL_SLICE_NS < deadline ? now + PULL_SLICE_NS : deadline;
        if ((rc = rk__outq_wait(&inst->out, 0, end)) != RK_ETIMEDOUT)
            return rc;
    }
}

static int
take_output(rk__inst *inst, const rk_uuid *corr, rk_msg_header *hdr, void *buf,
    size_t cap, size_t *len, uint64_t deadline, int64_t spin_ns, bool *held,
    bool *answered)
{
    int rc;

    for (;;) {
        rk__stash_item *s = inst->stash_head ? stash_take(inst, corr) : NULL;
        uint64_t slice_end;

        if (s != NULL) {
            rc = answer(
                inst->k, corr, s->frame, s->len, hdr, buf, cap, len, answered);
            if (rc == RK_EMSGSIZE && !*answered)
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
        rc = wait_output(inst, spin_ns, slice_end);
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
                rc = answer(
                    inst->k, corr, frame, flen, hdr, buf, cap, len, answered);
                if (rc != RK_EMSGSIZE || *answered)
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
        if (rc != RK_ETIMEDOUT || deadline == 0 || rk_now_ns() >= deadline)
            return rc;
        /* Let another waiter look at the stash. */
        out_unlock(inst);
        sched_yield();
        if ((rc = out_lock(inst, deadline)) != RK_OK) {
            *held = false;
            return rc;
        }
    }
}

static int64_t
rt_spin(const rk__kernel *k)
{
    return k->rt->cfg.host_spin_ns > 0 ? k->rt->cfg.host_spin_ns : 0;
}

/* The output of an ended instance is closed once it is drained: say
 * which end the kernel came to, or that the runtime is going away. */
static int
output_closed(rk__kernel *k)
{
    uint32_t st = rk__state_of(k);

    if (atomic_load_explicit(&k->rt->closing, memory_order_acquire))
        return rk__fail(
            RK_ECLOSED, "kernel '%s': the runtime is being destroyed", k->id);
    return rk__fail(RK_ETERMINATED,
        "kernel '%s' has ended (%s) and its output is drained", k->id,
        rk_kernel_state_name((rk_kernel_state)st));
}

static int
recv_output(rk__kernel *k, const rk_uuid *corr, rk_msg_header *hdr, void *buf,
    size_t cap, size_t *len, int64_t timeout_ns)
{
    rk__inst *inst = atomic_load_explicit(&k->inst, memory_order_acquire);
    /* Not waiting: deadline 0, already past, and no clock is read (a
     * relay polls outputs this way many times a microsecond). */
    uint64_t deadline = timeout_ns == RK_NO_WAIT ? 0 : rk__deadline(timeout_ns);
    bool held = true, answered = false;
    int rc;

    if (inst == NULL)
        return rk__fail(
            RK_ENOTLAUNCHED, "kernel '%s' has not been launched", k->id);
    if (out_lock(inst, deadline) != RK_OK)
        return rk__fail(RK_ETIMEDOUT,
            "no output from kernel '%s' in time (another receiver held "
            "its output)",
            k->id);
    /* Spin before parking unless the caller asked not to wait: a reply
     * usually comes within a microsecond or two, parking costs several. */
    rc = take_output(inst, corr, hdr, buf, cap, len, deadline,
        timeout_ns == RK_NO_WAIT ? 0 : rt_spin(k), &held, &answered);
    if (held)
        out_unlock(inst);
    if (answered)
        return rc; /* an error reply: its code and detail */
    if (rc == RK_ETIMEDOUT) /* polled with RK_NO_WAIT: often, cheaply */
        return rk__fail_s(rc, "no output from kernel '%s' in time", k->id);
    if (rc == RK_ECLOSED)
        return output_closed(k);
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
    if ((rc = rk__call_enter(rt, "rk_recv")) != RK_OK)
        return rc;
    if ((rc = rk__resolve(rt, kh, &k)) == RK_OK)
        rc = recv_output(k, NULL, hdr, buf, cap, len, timeout_ns);
    rk__call_leave(rt);
    return rc;
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
rk_kernel_output_arm(rk_runtime *rt, rk_kernel kh, int *fd)
{
    rk__kernel *k;
    rk__inst *inst;
    int rc, efd = -1;

    if ((rc = rk__call_enter(rt, "rk_kernel_output_arm")) != RK_OK)
        return rc;
    if ((rc = rk__resolve(rt, kh, &k)) != RK_OK)
        goto out;
    inst = atomic_load_explicit(&k->inst, memory_order_acquire);
    if (inst == NULL) {
        rc = rk__fail(
            RK_ENOTLAUNCHED, "kernel '%s' has not been launched", k->id);
        goto out;
    }
    if ((rc = rk__outq_fd(&inst->out, &efd)) != RK_OK)
        goto out;
    /* Under the consumer lock: the stash is output too. A receiver that
     * holds the lock while it waits lets it go every slice. */
    if (out_lock(inst, rk_now_ns() + (uint64_t)REQUEST_SLICE_NS * 4)
        != RK_OK) {
        rc = rk__fail(RK_EALREADY,
            "kernel '%s': another receiver has the output; receive", k->id);
        goto out;
    }
    rc = inst->stash_head == NULL && rk__outq_arm(&inst->out) ? RK_OK
                                                              : RK_EALREADY;
    out_unlock(inst);
    if (rc != RK_OK)
        rk__fail(
            rc, "kernel '%s' has output to receive (or has ended)", k->id);
out:
    if (fd != NULL)
        *fd = efd;
    rk__call_leave(rt);
    return rc;
}

int
rk_request_opts(rk_runtime *rt, rk_kernel kh, const rk_request_options *opts,
    const void *req, size_t req_len, rk_msg_header *reply_hdr, void *reply,
    size_t cap, size_t *reply_len)
{
    static const rk_request_options defaults = RK_REQUEST_OPTIONS_INIT;
    rk__kernel *k;
    rk_msg_header h;
    uint64_t t0 = rk_now_ns();
    int64_t timeout_ns;
    int rc;

    if (opts == NULL)
        opts = &defaults;
    timeout_ns = opts->timeout_ns;
    if ((req == NULL && req_len != 0) || (reply == NULL && cap != 0))
        return rk__fail(RK_EINVAL, "rk_request: NULL buffer");
    if ((rc = rk__call_enter(rt, "request")) != RK_OK)
        return rc;
    if ((rc = rk__resolve(rt, kh, &k)) != RK_OK)
        goto out;
    rk__header(&h, opts->type_id, opts->priority, rk__send_stamp(k), 0);
    h.payload_len = (uint32_t)req_len;
    h.flags |= RK_MSG_F_REQUEST;
    if (k->def.config.direct_calls || k->be->send != NULL) {
        /* The handler on this thread, its reply straight into the
         * caller's buffer, when the kernel is idle (rk_kernel_call); on a
         * device instance, the request written into its input lane by
         * this thread, which polls for the reply itself. */
        rk_call_reply cr;

        memset(&cr, 0, sizeof(cr));
        cr.buf = reply;
        cr.cap = cap;
        cr.deadline_ns = timeout_ns < 0 ? 0 : t0 + (uint64_t)timeout_ns;
        rc = rk__kernel_call(k, &h, req, req_len, &cr, "request");
        if (rc == RK_OK && cr.got) {
            if (cr.hdr.type_id == RK_MSG_TYPE_ERROR) {
                rc = error_reply(
                    k, &cr.hdr, cr.buf, cr.len, reply_hdr, reply_len);
                goto out;
            }
            if (reply_hdr != NULL)
                *reply_hdr = cr.hdr;
            if (reply_len != NULL)
                *reply_len = cr.len;
            goto out;
        }
        if (rc == RK_OK) /* no reply during the call: from the queue */
            goto wait;
        if (rc != RK_EBUSY && rc != RK_ENOTSUP)
            goto out;
    }
    if ((rc = rk__deliver(k, &h, req, req_len, timeout_ns, "request"))
        != RK_OK)
        goto out;
wait:
    if (timeout_ns > 0) {
        uint64_t used = rk_now_ns() - t0;
        timeout_ns = used >= (uint64_t)timeout_ns ? RK_NO_WAIT
                                                  : timeout_ns - (int64_t)used;
    }
    rc = recv_output(
        k, &h.message_id, reply_hdr, reply, cap, reply_len, timeout_ns);
out:
    rk__call_leave(rt);
    return rc;
}

int
rk_request(rk_runtime *rt, rk_kernel kh, uint32_t type_id, const void *req,
    size_t req_len, rk_msg_header *reply_hdr, void *reply, size_t cap,
    size_t *reply_len, int64_t timeout_ns)
{
    rk_request_options o = { type_id, RK_MSG_PRIORITY_DEFAULT, timeout_ns };

    return rk_request_opts(
        rt, kh, &o, req, req_len, reply_hdr, reply, cap, reply_len);
}
