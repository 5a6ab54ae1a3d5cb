/*
 * src/runtime/kernel.c - the kernel side: the body every instance runs on
 * its backend thread, supervision, and the rk_ctx API actors use.
 *
 * Input is taken in batches (rk__inq_recv_batch) into the context and
 * handed out one message at a time, so actor-style and handler-style
 * kernels both pay the queue's costs once per batch. A message handed out
 * is "in flight" until the next receive (processed) or until the actor
 * fails (dead-lettered). Before every hand-out the kernel passes a safe
 * point: it reads cmd and parks there while DEACTIVATED.
 */
#include <sched.h>
#include <string.h>

#include "runtime/internal.h"

#define STRIDE_ALIGN 64
#define SAMPLE_SMALL 16
#ifndef RK__SPIN_YIELD
#define RK__SPIN_YIELD 1024
#endif

static size_t
stride_of(const rk__inst *inst)
{
    return (inst->slot_size + STRIDE_ALIGN - 1) & ~(size_t)(STRIDE_ALIGN - 1);
}

int
rk__ctx_init(rk_ctx *ctx, rk__inst *inst, uint32_t batch)
{
    memset(ctx, 0, sizeof(*ctx));
    ctx->inst = inst;
    ctx->batch = batch;
    ctx->cur = -1;
    ctx->priority = RK_CTX_PRIORITY_INHERIT;
    ctx->user = inst->k->def.config.user;
    ctx->buf = aligned_alloc(STRIDE_ALIGN, stride_of(inst) * batch);
    ctx->lens = calloc(batch, sizeof(*ctx->lens));
    if (ctx->buf == NULL || ctx->lens == NULL) {
        rk__ctx_fini(ctx);
        return RK_ENOMEM;
    }
    return RK_OK;
}

void
rk__ctx_fini(rk_ctx *ctx)
{
    free(ctx->buf);
    free(ctx->lens);
    ctx->buf = NULL;
    ctx->lens = NULL;
}

static uint32_t
load_cmd(const rk_ctx *ctx)
{
    /* Acquire pairs with the release store of cmd in the backend. */
    return atomic_load_explicit(&ctx->inst->control.cmd, memory_order_acquire);
}

/* Parks while cmd == c; returns the new command. */
static uint32_t
wait_while(rk_ctx *ctx, uint32_t c)
{
    const rk__backend *be = ctx->inst->k->rt->be;

    for (;;) {
        /* Acquire pairs with the release bump in the backend's command():
         * seq is read before cmd, so a command posted after this load
         * changes wake_seq and the park returns at once. */
        uint32_t seq = rk__ec_prepare(&ctx->inst->control.wake);
        uint32_t now = load_cmd(ctx);
        if (now != c) {
            rk__ec_cancel(&ctx->inst->control.wake);
            return now;
        }
        be->park(ctx->bi, seq, UINT64_MAX);
    }
}

/* The safe point: parks while DEACTIVATED. Returns the command in force. */
static uint32_t
safe_point(rk_ctx *ctx)
{
    uint32_t c = load_cmd(ctx);

    if (rk__unlikely(c == RK__CMD_PAUSE)) {
        const rk__backend *be = ctx->inst->k->rt->be;
        be->report(ctx->bi, RK__ACK_PAUSED);
        c = wait_while(ctx, RK__CMD_PAUSE);
        be->report(ctx->bi, RK__ACK_RUNNING);
    }
    return c;
}

/* The message in flight is done. */
static void
complete_current(rk_ctx *ctx)
{
    if (ctx->cur >= 0) {
        rk__counter_add_sw(&ctx->inst->kc.processed, 1);
        ctx->cur = -1;
    }
}

/*
 * Records n equal latency values. The single-writer form of
 * rk__hist_record (telemetry/histogram.h) with a count: same fields, same
 * relaxed load-and-store updates, only the kernel thread writes.
 */
static void
hist_record_n(rk__hist *h, uint64_t v, uint64_t n)
{
#if RK_TELEMETRY
    _Atomic uint64_t *b = &h->bucket[rk__hist_index(v)];
    uint64_t clamped = v < RK_HISTOGRAM_MAX_NS ? v : RK_HISTOGRAM_MAX_NS;

    atomic_store_explicit(b, atomic_load_explicit(b, memory_order_relaxed) + n,
        memory_order_relaxed);
    atomic_store_explicit(&h->sum,
        atomic_load_explicit(&h->sum, memory_order_relaxed) + clamped * n,
        memory_order_relaxed);
    if (v > atomic_load_explicit(&h->max, memory_order_relaxed))
        atomic_store_explicit(&h->max, v, memory_order_relaxed);
    if (~v > atomic_load_explicit(&h->min_c, memory_order_relaxed))
        atomic_store_explicit(&h->min_c, ~v, memory_order_relaxed);
#else
    (void)h;
    (void)v;
    (void)n;
#endif
}

/* Records the pending run of equal latencies. */
static void
lat_flush(rk_ctx *ctx)
{
    if (ctx->run_n != 0) {
        hist_record_n(&ctx->inst->latency, ctx->run_v, ctx->run_n);
        ctx->run_n = 0;
    }
}

static const unsigned char *
frame_at(const rk_ctx *ctx, size_t i)
{
    return ctx->frames + i * ctx->stride;
}

static size_t
frame_len(const rk_ctx *ctx, size_t i)
{
    uint32_t plen;

    if (!ctx->in_place)
        return ctx->lens[i];
    memcpy(&plen, frame_at(ctx, i) + offsetof(rk_msg_header, payload_len),
        sizeof(plen));
    /* The lane's producer refused frames over the slot size. */
    RK_ASSERT(RK_MSG_HEADER_SIZE + (size_t)plen <= ctx->stride);
    return RK_MSG_HEADER_SIZE + (size_t)plen;
}

/* Gives the lane slots of the last batch back (nothing is in flight). */
static void
release_held(rk_ctx *ctx)
{
    if (ctx->held != 0) {
        rk__inq_release(&ctx->inst->in, ctx->held);
        ctx->held = 0;
    }
}

/* Takes the next batch without waiting (results as rk__inq_take). */
static int
next_batch(rk_ctx *ctx)
{
    rk__inst *inst = ctx->inst;
    rk__inq_batch b;
    int rc;

    release_held(ctx);
    /* Lane slots are lent, not copied, to handlers and actors alike: a
     * view is valid until the next receive, and the batch goes back when
     * the next one is taken (or before a safe point with nothing left in
     * it, see fetch). Held slots do not take room from the lane (it
     * counts what the kernel has not taken, rk__inq_init's hold), so a
     * paused kernel's lane still queues its whole capacity. */
    rc = rk__inq_take(
        &inst->in, ctx->buf, stride_of(inst), ctx->lens, ctx->batch, &b);
    if (rc != RK_OK || b.n == 0)
        return rc == RK_OK ? RK_EEMPTY : rc;
    ctx->frames = b.frames;
    ctx->stride = b.stride;
    ctx->in_place = b.in_place;
    ctx->held = b.in_place ? b.n : 0;
    ctx->n = b.n;
    ctx->pos = 0;
    return RK_OK;
}

/*
 * Makes sure a prefetched message is waiting at ctx->pos: spins, then
 * parks (see rk__control for the handshake with senders). RK_OK,
 * RK_ETIMEDOUT, or RK_ECLOSED once terminating and drained.
 */
static int
fetch(rk_ctx *ctx, int64_t timeout_ns)
{
    rk__inst *inst = ctx->inst;
    const rk__backend *be;
    uint32_t spin, spins = 0;
    uint64_t deadline = 0;

    if (ctx->pos < ctx->n) {
        (void)safe_point(ctx);
        return RK_OK;
    }
    be = inst->k->rt->be;
    spin = inst->k->def.config.spin;
    lat_flush(ctx);
    /* Nothing is in flight: give the lane its slots back before the safe
     * point, so a paused kernel holds none of its input's room. */
    release_held(ctx);
    for (;;) {
        uint32_t c = safe_point(ctx), seq;
        int rc = next_batch(ctx);

        if (rc == RK_OK) {
            size_t n = ctx->n;
            /* One clock read per batch: latency is send -> dequeue. A
             * kernel that keeps up takes tiny batches, where a clock read
             * each would dominate, so small batches are sampled: one in
             * SAMPLE_SMALL is timed (fetch_ns 0: not recorded). */
            ctx->fetch_ns = 0;
            if (rk__telemetry_on(inst->telemetry)
                && (n >= SAMPLE_SMALL
                    || ctx->small_fetches++ % SAMPLE_SMALL == 0))
                ctx->fetch_ns = rk_now_ns();
            return RK_OK;
        }
        if (rc == RK_ECLOSED || c == RK__CMD_STOP)
            return RK_ECLOSED;
        if (timeout_ns == RK_NO_WAIT)
            return RK_ETIMEDOUT;
        if (spins < spin) {
            /* Spin, but yield now and then: on a busy machine the sender
             * may be waiting for this very CPU. */
            if (++spins % RK__SPIN_YIELD == 0)
                sched_yield();
            else
                rk__cpu_relax();
            continue;
        }
        if (deadline == 0)
            deadline = rk__deadline(timeout_ns);
        if (deadline != UINT64_MAX && rk_now_ns() >= deadline)
            return RK_ETIMEDOUT;
        /* Park: read wake_seq, publish parked, re-check, sleep. The
         * seq_cst store and fence pair with the fence in the backend's
         * wake(): either this re-check sees the message or the sender
         * sees parked and wakes us. */
        seq = rk__ec_prepare(&inst->control.wake);
        if (rk__inq_depth(&inst->in) == 0 && load_cmd(ctx) == c)
            be->park(ctx->bi, seq, deadline);
        else
            rk__ec_cancel(&inst->control.wake);
        spins = spin / 2;
    }
}

/* Hands out the message at pos as the one in flight. */
static void
take(rk_ctx *ctx, rk_msg_view *out)
{
    const unsigned char *frame = frame_at(ctx, ctx->pos);
    const rk_msg_header *h = (const rk_msg_header *)(const void *)frame;
    size_t flen = frame_len(ctx, ctx->pos);

    ctx->cur = (long)ctx->pos++;
    out->hdr = h;
    out->data = frame + RK_MSG_HEADER_SIZE;
    out->len = flen >= RK_MSG_HEADER_SIZE ? flen - RK_MSG_HEADER_SIZE : 0;
    if (ctx->fetch_ns != 0 && h->send_ns != 0) {
        uint64_t v
            = ctx->fetch_ns > h->send_ns ? ctx->fetch_ns - h->send_ns : 0;
        /* A batch sent at one instant and taken at one instant has one
         * latency value: count runs and record each run once. */
        if (v == ctx->run_v && ctx->run_n != 0) {
            ctx->run_n++;
        } else {
            lat_flush(ctx);
            ctx->run_v = v;
            ctx->run_n = 1;
        }
    }
}

bool
rk_should_terminate(rk_ctx *ctx)
{
    /* Held lane slots count in the depth but were handed out already
     * (the view of the last one may still be in use, so no release). */
    return safe_point(ctx) == RK__CMD_STOP && ctx->pos == ctx->n
        && rk__inq_depth(&ctx->inst->in) == ctx->held;
}

int
rk_ctx_recv(rk_ctx *ctx, rk_msg_view *out, int64_t timeout_ns)
{
    int rc;

    if (ctx == NULL || out == NULL)
        return rk__fail(RK_EINVAL, "rk_ctx_recv: NULL argument");
    if (ctx->in_handler)
        return rk__fail(RK_EINVAL,
            "rk_ctx_recv: kernel '%s' is a handler; the runtime receives",
            ctx->inst->k->id);
    complete_current(ctx);
    rc = fetch(ctx, timeout_ns);
    if (rc != RK_OK)
        return rc;
    take(ctx, out);
    return RK_OK;
}

/* Records the latencies of the n handed-out frames at f (send -> take,
 * as take() does for an actor), merging runs of equal values. Frames of
 * one send batch share send_ns, so the common step is one compare. */
static void
lat_batch(rk_ctx *ctx, const unsigned char *f, size_t stride, size_t n)
{
    uint64_t fetch = ctx->fetch_ns, last = 0;
    uint64_t run_v = ctx->run_v, run_n = ctx->run_n;

    if (fetch == 0)
        return;
    for (size_t i = 0; i < n; i++, f += stride) {
        uint64_t s = ((const rk_msg_header *)(const void *)f)->send_ns, v;
        if (s == last) {
            run_n += s != 0; /* same value as the last one's */
            continue;
        }
        last = s;
        if (s == 0)
            continue;
        v = fetch > s ? fetch - s : 0;
        if (v == run_v && run_n != 0) {
            run_n++;
        } else {
            if (run_n != 0)
                hist_record_n(&ctx->inst->latency, run_v, run_n);
            run_v = v;
            run_n = 1;
        }
    }
    ctx->run_v = run_v;
    ctx->run_n = run_n;
}

/*
 * Runs the handler over the rest of the prefetched batch (fetch passed the
 * safe point of the first). The per-message work is the safe point, the
 * view and the call; the processed counter and the latencies are booked
 * once per batch. On a failure the failing message stays in flight
 * (ctx->cur) for the caller to dead-letter; those before it count.
 */
static int
handle_batch(rk_ctx *ctx, rk_handler_fn fn)
{
    size_t start = ctx->pos, n = ctx->n, stride = ctx->stride, i;
    const unsigned char *f = frame_at(ctx, start);
    bool in_place = ctx->in_place;
    rk_msg_view v;
    int rc = RK_OK;

    for (i = start; i < n; i++, f += stride) {
        if (i != start)
            (void)safe_point(ctx);
        ctx->cur = (long)i;
        ctx->pos = i + 1;
        v.hdr = (const rk_msg_header *)(const void *)f;
        v.data = f + RK_MSG_HEADER_SIZE;
        if (in_place) {
            /* A lane frame: its length is in its header (frame_len). */
            uint32_t plen;
            memcpy(
                &plen, f + offsetof(rk_msg_header, payload_len), sizeof(plen));
            v.len = plen;
            RK_ASSERT(RK_MSG_HEADER_SIZE + v.len <= stride);
        } else {
            size_t flen = ctx->lens[i];
            v.len = flen >= RK_MSG_HEADER_SIZE ? flen - RK_MSG_HEADER_SIZE : 0;
        }
        if ((rc = fn(ctx, &v)) != RK_OK)
            break;
    }
    lat_batch(ctx, frame_at(ctx, start), stride, (i < n ? i + 1 : n) - start);
    rk__counter_add_sw(&ctx->inst->kc.processed, i - start);
    if (rc == RK_OK)
        ctx->cur = -1;
    return rc;
}

static int
handler_loop(rk_ctx *ctx)
{
    rk_handler_fn fn = ctx->inst->k->def.handler;
    int rc;

    ctx->in_handler = true;
    for (;;) {
        complete_current(ctx);
        rc = fetch(ctx, RK_WAIT_FOREVER);
        if (rc == RK_ECLOSED)
            return RK_OK;
        if (rc != RK_OK)
            return rc;
        if ((rc = handle_batch(ctx, fn)) != RK_OK)
            return rc;
    }
}

static void
dead_letter_frame(rk_ctx *ctx, size_t i, rk_dead_reason why, int err)
{
    rk__inst *inst = ctx->inst;

    rk__dead_letter(
        inst->k->rt, inst, why, err, frame_at(ctx, i), frame_len(ctx, i));
}

/* Everything still queued or prefetched goes to the dead-letter queue, so
 * no message is ever lost silently. */
static void
drain_to_dead_letters(rk_ctx *ctx, rk_dead_reason why, int err)
{
    rk__inst *inst = ctx->inst;

    rk__inq_close(&inst->in);
    for (;;) {
        while (ctx->pos < ctx->n)
            dead_letter_frame(ctx, ctx->pos++, why, err);
        if (next_batch(ctx) != RK_OK)
            break;
    }
}

/* Sleeps for the restart backoff; a STOP cuts it short. */
static void
backoff_sleep(rk_ctx *ctx, int64_t ns)
{
    rk__inst *inst = ctx->inst;
    uint64_t deadline = rk__deadline(ns);

    for (;;) {
        uint32_t seq = rk__ec_prepare(&inst->control.wake);
        if (load_cmd(ctx) == RK__CMD_STOP || rk_now_ns() >= deadline) {
            rk__ec_cancel(&inst->control.wake);
            return;
        }
        inst->k->rt->be->park(ctx->bi, seq, deadline);
    }
}

void
rk__kernel_body(rk__backend_inst *bi, void *arg)
{
    rk__inst *inst = arg;
    rk__kernel *k = inst->k;
    const rk__backend *be = k->rt->be;
    const rk_supervision *sv = &k->def.config.supervision;
    rk_ctx *ctx = &inst->ctx;
    int64_t backoff = sv->backoff_ns;
    uint32_t restarts = 0;
    bool failed = false;
    int rc = RK_OK;

    ctx->bi = bi;
    be->report(bi, RK__ACK_HELD);
    /* A STOP that overtook the first RUN still drains: an activated
     * kernel processes what was queued before terminate. */
    if (wait_while(ctx, RK__CMD_HOLD) != RK__CMD_STOP
        || atomic_load_explicit(
            &inst->control.activated, memory_order_acquire)) {
        atomic_store_explicit(
            &inst->start_ns, rk_now_ns(), memory_order_relaxed);
        be->report(bi, RK__ACK_RUNNING);
        for (;;) {
            rc = k->def.actor ? k->def.actor(ctx) : handler_loop(ctx);
            if (rc == RK_ECLOSED && load_cmd(ctx) == RK__CMD_STOP)
                rc = RK_OK; /* "terminating and drained" passed back up */
            if (rc == RK_OK) {
                complete_current(ctx);
                break;
            }
            rk__counter_add_sw(&inst->kc.errors, 1);
            if (ctx->cur >= 0) {
                dead_letter_frame(ctx, (size_t)ctx->cur, RK_DEAD_FAILED, rc);
                ctx->cur = -1;
            }
            if (sv->policy == RK_SUPERVISE_RESTART
                && restarts < sv->max_restarts
                && load_cmd(ctx) != RK__CMD_STOP) {
                restarts++;
                rk__counter_add_sw(&inst->kc.restarts, 1);
                backoff_sleep(ctx, backoff);
                backoff = backoff > sv->backoff_max_ns / 2 ? sv->backoff_max_ns
                                                           : backoff * 2;
                continue;
            }
            failed = true;
            break;
        }
    }
    lat_flush(ctx);
    drain_to_dead_letters(ctx, failed ? RK_DEAD_ABANDONED : RK_DEAD_TERMINATED,
        failed ? rc : RK_OK);
    atomic_store_explicit(&inst->control.exit_code, rc, memory_order_relaxed);
    rk__kernel_ended(k, failed);
    be->report(bi, RK__ACK_EXITED);
}

/* ------------------------------------------------------ sending */

static int
ctx_emit(rk_ctx *ctx, rk_msg_header *h, const void *payload, size_t len)
{
    rk__inst *inst = ctx->inst;
    /* Acquire pairs with the release store in rk_connect. */
    rk__kernel *to
        = atomic_load_explicit(&inst->k->route, memory_order_acquire);
    int rc;

    if (to != NULL) {
        rc = rk__deliver(to, h, payload, len, RK_WAIT_FOREVER);
    } else {
        if (len > inst->k->def.config.max_payload)
            return rk__fail(RK_EMSGSIZE,
                "kernel '%s': %zu-byte payload exceeds "
                "max_payload %u",
                inst->k->id, len, inst->k->def.config.max_payload);
        rc = rk__outq_send(&inst->out, h, sizeof(*h), payload, len);
    }
    if (rc == RK_OK)
        rk__counter_add_sw(&inst->kc.sent, 1);
    return rc;
}

static uint8_t
ctx_priority(const rk_ctx *ctx)
{
    if (ctx->priority != RK_CTX_PRIORITY_INHERIT)
        return (uint8_t)ctx->priority;
    if (ctx->cur >= 0) {
        const rk_msg_header *h = (const void *)frame_at(ctx, (size_t)ctx->cur);
        return h->priority;
    }
    return RK_MSG_PRIORITY_DEFAULT;
}

static void
ctx_header(rk_ctx *ctx, rk_msg_header *h, uint32_t type_id)
{
    rk__inst *inst = ctx->inst;

    rk__header(h, type_id, ctx_priority(ctx),
        inst->telemetry ? rk_now_ns() : 0, inst->k->slot + 1);
    if (inst->k->def.config.output_type != NULL
        && inst->k->def.config.output_type->id == type_id)
        h->type_version = inst->k->def.config.output_type->version;
}

int
rk_ctx_send(rk_ctx *ctx, uint32_t type_id, const void *payload, size_t len)
{
    rk_msg_header h;

    if (ctx == NULL || (payload == NULL && len != 0))
        return rk__fail(RK_EINVAL, "rk_ctx_send: NULL argument");
    ctx_header(ctx, &h, type_id);
    h.payload_len = (uint32_t)len;
    return ctx_emit(ctx, &h, payload, len);
}

int
rk_ctx_reply(rk_ctx *ctx, const rk_msg_view *req, uint32_t type_id,
    const void *payload, size_t len)
{
    rk_msg_header h;

    if (ctx == NULL || req == NULL || req->hdr == NULL
        || (payload == NULL && len != 0))
        return rk__fail(RK_EINVAL, "rk_ctx_reply: NULL argument");
    ctx_header(ctx, &h, type_id);
    h.payload_len = (uint32_t)len;
    h.priority = req->hdr->priority;
    rk_msg_reply(&h, req->hdr);
    return ctx_emit(ctx, &h, payload, len);
}

int
rk_ctx_send_to(rk_ctx *ctx, rk_kernel target, uint32_t type_id,
    const void *payload, size_t len)
{
    rk__kernel *to;
    rk_msg_header h;
    int rc;

    if (ctx == NULL || (payload == NULL && len != 0))
        return rk__fail(RK_EINVAL, "rk_ctx_send_to: NULL argument");
    if ((rc = rk__resolve(ctx->inst->k->rt, target, &to)) != RK_OK)
        return rc;
    ctx_header(ctx, &h, type_id);
    h.payload_len = (uint32_t)len;
    rc = rk__deliver(to, &h, payload, len, RK_WAIT_FOREVER);
    if (rc == RK_OK)
        rk__counter_add_sw(&ctx->inst->kc.sent, 1);
    return rc;
}

int
rk_ctx_publish(rk_ctx *ctx, const char *topic, uint32_t type_id,
    const void *payload, size_t len)
{
    rk_msg_header h;
    size_t n = 0;
    int rc;

    if (ctx == NULL || topic == NULL || (payload == NULL && len != 0))
        return rk__fail(RK_EINVAL, "rk_ctx_publish: NULL argument");
    ctx_header(ctx, &h, type_id);
    h.payload_len = (uint32_t)len;
    rc = rk__publish(
        ctx->inst->k->rt, topic, &h, payload, len, RK_WAIT_FOREVER, &n);
    rk__counter_add_sw(&ctx->inst->kc.sent, n);
    return rc;
}

int
rk_ctx_set_priority(rk_ctx *ctx, int priority)
{
    if (ctx == NULL
        || (priority != RK_CTX_PRIORITY_INHERIT
            && (priority < 0 || priority > 255)))
        return rk__fail(RK_EINVAL,
            "rk_ctx_set_priority: %d is not 0..255 or "
            "RK_CTX_PRIORITY_INHERIT",
            priority);
    ctx->priority = priority;
    return RK_OK;
}

void *
rk_ctx_user(rk_ctx *ctx)
{
    return ctx ? ctx->user : NULL;
}

const char *
rk_ctx_kernel_id(rk_ctx *ctx)
{
    return ctx ? ctx->inst->k->id : NULL;
}

rk_runtime *
rk_ctx_runtime(rk_ctx *ctx)
{
    return ctx ? ctx->inst->k->rt : NULL;
}
