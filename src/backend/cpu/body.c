/*
 * src/backend/cpu/body.c - what a CPU backend thread runs: the persistent
 * loop (safe points, faults, the drain on STOP) and the rk_ctx API actors
 * and handlers use.
 *
 * The loop decides nothing about the kernel's fate: it acknowledges
 * commands, reports a failure (FAULTED, with the failed frame in the fail
 * slot) and waits for the runtime's verdict, and at its end reports
 * EXITED with the frames it did not process. Sends go through the
 * runtime's delivery layer (rk__deliver, rk__publish), the same way a
 * host send does; nothing here calls the lifecycle or the supervisor.
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

#include "backend/cpu/cpu.h"
#include "runtime/internal.h"

#define STRIDE_ALIGN 64
/* Spins yield every RK__SPIN_YIELD tries (about a microsecond): on a
 * machine with fewer cores than busy threads, the thread this one waits
 * for, or the one that thread waits for, may need this very core. */
#ifndef RK__SPIN_YIELD
#define RK__SPIN_YIELD 32
#endif
/* The least a receive spins before parking, once its budget has adapted
 * down (fetch): 7-8 us here, a little more than a parked thread takes to
 * wake. A shorter floor lets a ping-pong in which both sides have adapted
 * down settle into both parking on every message, each giving up before
 * the other is back (common/spin.h says the same of producers). */
#define RK__SPIN_FLOOR 256u

static size_t
stride_of(const rk__inst *inst)
{
    return (inst->slot_size + STRIDE_ALIGN - 1) & ~(size_t)(STRIDE_ALIGN - 1);
}

int
rk__cpu_ctx_init(rk__backend_inst *bi)
{
    rk_ctx *ctx = &bi->ctx;
    rk__inst *inst = bi->inst;
    const rk_kernel_config *c = &inst->k->def.config;

    memset(ctx, 0, sizeof(*ctx));
    ctx->inst = inst;
    ctx->bi = bi;
    ctx->ctl = bi->ctl;
    ctx->wake = bi->wake;
    ctx->batch = c->batch;
    ctx->cur = -1;
    ctx->priority = RK_CTX_PRIORITY_INHERIT;
    ctx->user = c->user;
    ctx->spin_budget = c->spin;
    ctx->direct = c->direct_calls && inst->k->def.handler != NULL;
    atomic_store_explicit(&bi->owner, RK__OWN_KERNEL, memory_order_relaxed);
    ctx->buf = aligned_alloc(STRIDE_ALIGN, stride_of(inst) * ctx->batch);
    ctx->lens = calloc(ctx->batch, sizeof(*ctx->lens));
    if (ctx->buf == NULL || ctx->lens == NULL) {
        rk__cpu_ctx_fini(bi);
        return RK_ENOMEM;
    }
    return RK_OK;
}

void
rk__cpu_ctx_fini(rk__backend_inst *bi)
{
    free(bi->ctx.buf);
    free(bi->ctx.lens);
    bi->ctx.buf = NULL;
    bi->ctx.lens = NULL;
}

void
rk__cpu_ack(rk__backend_inst *bi, uint32_t ack)
{
    rk__ec *events = bi->events;

    rk_ctl_ack(bi->ctl, ack);
    rk__ec_notify_all(&bi->ack);
    /* After an EXITED ack the host may destroy bi once it has joined the
     * thread, which cannot happen before this function returns. */
    if (ack == RK_CTL_ACK_FAULTED || ack == RK_CTL_ACK_EXITED)
        rk__ec_notify_all(events);
}

static uint32_t
load_cmd(const rk_ctx *ctx)
{
    /* Acquire pairs with the release store in rk_ctl_post. */
    return rk_ctl_cmd(ctx->ctl);
}

/* Parks while cmd == c; returns the new command. A command is posted
 * before the backend's signal() notifies wake, so the re-check after
 * rk__ec_prepare either sees it or the wait is woken (common/ec.h). */
static uint32_t
wait_while(rk_ctx *ctx, uint32_t c)
{
    for (;;) {
        uint32_t key = rk__ec_prepare(ctx->wake);
        uint32_t now = load_cmd(ctx);
        if (now != c) {
            rk__ec_cancel(ctx->wake);
            return now;
        }
        (void)rk__ec_wait(ctx->wake, key, UINT64_MAX);
    }
}

/* The safe point: parks while DEACTIVATED. Returns the command in force. */
static uint32_t
safe_point(rk_ctx *ctx)
{
    uint32_t c = load_cmd(ctx);

    if (rk__unlikely(c == RK_CTL_PAUSE)) {
        rk__cpu_ack(ctx->bi, RK_CTL_ACK_PAUSED);
        c = wait_while(ctx, RK_CTL_PAUSE);
        rk__cpu_ack(ctx->bi, RK_CTL_ACK_RUNNING);
    }
    return c;
}

/* The message in flight is done. */
static void
complete_current(rk_ctx *ctx)
{
    if (ctx->cur >= 0) {
        rk_ctl_count(&ctx->ctl->processed, 1);
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
        rk__inbox_release(ctx->inst->in, ctx->held);
        ctx->held = 0;
    }
}

/* Takes the next batch without waiting (results as rk__inbox_take). */
static int
next_batch(rk_ctx *ctx)
{
    rk__inst *inst = ctx->inst;
    rk__inbox_batch b;
    int rc;

    release_held(ctx);
    /* Lane slots are lent, not copied, to handlers and actors alike: a
     * view is valid until the next receive, and the batch goes back when
     * the next one is taken (or before a safe point with nothing left in
     * it, see fetch). Held slots do not take room from the lane (it
     * counts what the kernel has not taken, rk__inbox_create's hold), so a
     * paused kernel's lane still queues its whole capacity. */
    rc = rk__inbox_take(inst->in, ctx->batch, &b);
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

/* True if one of the n frames of the batch just taken carries a send
 * timestamp. Reads each header's send_ns, which the hand-out reads soon
 * anyway; stops at the first. */
static bool
batch_stamped(const rk_ctx *ctx, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (((const rk_msg_header *)(const void *)frame_at(ctx, i))->send_ns
            != 0)
            return true;
    return false;
}

/*
 * The receive spin adapts to how the kernel is fed. A spin that found
 * input restores the full budget (config.spin): a kernel fed a stream
 * finds its next message within a few tries, and a park would cost its
 * sender a wake-up per message. A spin that ran out and parked halves the
 * budget (down to RK__SPIN_FLOOR, or config.spin if lower): a kernel that
 * answers a request and then waits a whole round trip for the next one (a
 * peer on another rank, a host that does other work between requests)
 * soon parks at once, instead of holding a core that the threads it waits
 * for may need.
 */
static void
spin_found(rk_ctx *ctx, uint32_t max)
{
    ctx->spin_budget = max;
}

static void
spin_parked(rk_ctx *ctx, uint32_t max)
{
    uint32_t floor = max < RK__SPIN_FLOOR ? max : RK__SPIN_FLOOR;
    uint32_t b = ctx->spin_budget / 2;

    ctx->spin_budget = b > floor ? b : floor;
}

/* Direct calls: the kernel thread takes its context back from a caller
 * (who holds it for one handler call) and gives it up while it waits.
 * Acquire/release: what the caller did with the context comes before the
 * kernel's next use, and the other way round. */
static void
own(rk_ctx *ctx)
{
    _Atomic uint32_t *o = &ctx->bi->owner;

    for (;;) {
        uint32_t free_ = RK__OWN_FREE;
        if (atomic_compare_exchange_weak_explicit(o, &free_, RK__OWN_KERNEL,
                memory_order_acquire, memory_order_relaxed))
            return;
        rk__cpu_relax();
    }
}

static void
disown(rk_ctx *ctx)
{
    atomic_store_explicit(&ctx->bi->owner, RK__OWN_FREE, memory_order_release);
}

/* Is there anything the waiting kernel must look at: input, a command
 * other than c, or a failure a direct call handed back? The parking
 * re-check after rk__ec_prepare (senders notify wake after queueing,
 * commands come through signal(), a caller notifies after storing
 * handback), and what a direct-call kernel waiting without its context
 * polls before taking it back. */
static bool
wanted(rk_ctx *ctx, uint32_t c)
{
    return rk__inbox_depth(ctx->inst->in) != 0 || load_cmd(ctx) != c
        || atomic_load(&ctx->handback) != RK_OK;
}

/*
 * Makes sure a prefetched message is waiting at ctx->pos: spins (for the
 * adaptive budget above), then parks (see rk__control for the handshake
 * with senders). RK_OK, RK_ETIMEDOUT, or RK_ECLOSED once terminating and
 * drained.
 */
static int
fetch(rk_ctx *ctx, int64_t timeout_ns)
{
    rk__inst *inst = ctx->inst;
    uint32_t spin, max, spins = 0;
    uint64_t deadline = 0;
    bool parked = false;
    bool mine = true; /* the context is the thread's (see direct calls) */
    uint32_t c = 0;   /* the command seen at the last safe point */

    if (ctx->pos < ctx->n) {
        (void)safe_point(ctx);
        return RK_OK;
    }
    max = inst->k->def.config.spin;
    spin = ctx->spin_budget;
    lat_flush(ctx);
    /* Nothing is in flight: give the lane its slots back before the safe
     * point, so a paused kernel holds none of its input's room. */
    release_held(ctx);
    for (;;) {
        uint32_t key;
        int rc;

        /* A direct-call kernel waits without its context (callers may
         * take it, rk__cpu_call) and takes it back only for input, a
         * command or a handed-back failure (wanted). */
        if (!mine && wanted(ctx, c)) {
            /* The safe point's ack (PAUSED) then comes with no call in
             * flight. */
            own(ctx);
            mine = true;
            if ((rc = atomic_exchange_explicit(
                     &ctx->handback, 0, memory_order_relaxed))
                != RK_OK)
                return rc; /* frame 0 of buf is in flight: the fault's */
        }
        if (mine) {
            c = safe_point(ctx);
            rc = next_batch(ctx);
            if (rc == RK_OK) {
                size_t n = ctx->n;

                if (spins != 0 && !parked)
                    spin_found(ctx, max);
                /* Latency is send -> dequeue, for the messages their
                 * sender stamped (one in latency_sample per sending
                 * thread, every one with 1): one clock read per batch
                 * that holds a stamped message, none otherwise (fetch_ns
                 * 0: nothing recorded). */
                ctx->fetch_ns = 0;
                if (rk__telemetry_on(inst->telemetry) && batch_stamped(ctx, n))
                    ctx->fetch_ns = rk_now_ns();
                return RK_OK;
            }
            if (rc == RK_ECLOSED || c == RK_CTL_STOP)
                return RK_ECLOSED;
            if (timeout_ns == RK_NO_WAIT)
                return RK_ETIMEDOUT;
            if (ctx->direct) {
                disown(ctx);
                mine = false;
            }
        }
        if (spins < spin) {
            /* Spin, but yield now and then: on a busy machine the sender
             * may be waiting for this very CPU. */
            if (++spins % RK__SPIN_YIELD == 0)
                sched_yield();
            else
                rk__cpu_relax();
            continue;
        }
        if (!parked)
            spin_parked(ctx, max);
        parked = true;
        if (deadline == 0)
            deadline = rk__deadline(timeout_ns);
        if (deadline != UINT64_MAX && rk_now_ns() >= deadline) {
            if (!mine)
                own(ctx);
            return RK_ETIMEDOUT;
        }
        /* Park on the wake eventcount: senders notify it after
         * queueing, commands through signal(), a caller that hands a
         * failure back after storing it. The re-check after prepare sees
         * any of them, or the wait is woken (common/ec.h). */
        key = rk__ec_prepare(ctx->wake);
        if (!wanted(ctx, c))
            (void)rk__ec_wait(ctx->wake, key, deadline);
        else
            rk__ec_cancel(ctx->wake);
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
    if (ctx == NULL)
        return true; /* no kernel to run for */
    /* Held lane slots count in the depth but were handed out already
     * (the view of the last one may still be in use, so no release). */
    return safe_point(ctx) == RK_CTL_STOP && ctx->pos == ctx->n
        && rk__inbox_depth(ctx->inst->in) == ctx->held;
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
    rk_ctl_count(&ctx->ctl->processed, i - start);
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

/*
 * A direct call (rk_kernel_call): runs the handler on one message on the
 * caller's thread while the kernel's thread waits without its context.
 * The message becomes a one-frame batch in the context's own buffer, so
 * everything after is the handler path the kernel's thread runs
 * (handle_batch: the view, the processed count, the latency), and a
 * failure leaves it in flight exactly where fault() looks for it: the
 * caller hands it back (handback) and the kernel's thread reports it.
 */
int
rk__cpu_call(rk__backend_inst *bi, const rk_msg_header *h, const void *payload,
    size_t len, rk_call_reply *reply)
{
    rk_ctx *ctx = &bi->ctx;
    rk__inst *inst = bi->inst;
    uint32_t free_ = RK__OWN_FREE;
    unsigned char *f;
    int rc;

    if (!ctx->direct)
        return rk__fail(RK_ENOTSUP,
            "rk_kernel_call: kernel '%s' does not take direct calls",
            inst->k->id);
    if (RK_MSG_HEADER_SIZE + len > stride_of(inst))
        return rk__fail(RK_EMSGSIZE,
            "rk_kernel_call: %zu-byte payload exceeds kernel '%s''s slot", len,
            inst->k->id);
    /* Acquire: pairs with disown() (and a caller's release below). */
    if (!atomic_compare_exchange_strong_explicit(&bi->owner, &free_,
            RK__OWN_CALLER, memory_order_acquire, memory_order_relaxed))
        return RK_EBUSY;
    /* Idle: running, nothing prefetched or handed back, nothing queued
     * (a queued message goes first: the caller then queues behind it). */
    if (load_cmd(ctx) != RK_CTL_RUN || ctx->pos < ctx->n
        || atomic_load_explicit(&ctx->handback, memory_order_relaxed) != 0
        || rk__inbox_depth(inst->in) != 0) {
        atomic_store_explicit(&bi->owner, RK__OWN_FREE, memory_order_release);
        return RK_EBUSY;
    }
    f = ctx->buf;
    memcpy(f, h, RK_MSG_HEADER_SIZE);
    if (len != 0)
        memcpy(f + RK_MSG_HEADER_SIZE, payload, len);
    ctx->frames = f;
    ctx->stride = stride_of(inst);
    ctx->in_place = false;
    ctx->lens[0] = RK_MSG_HEADER_SIZE + len;
    ctx->n = 1;
    ctx->pos = 0;
    ctx->fetch_ns = 0;
    if (rk__telemetry_on(inst->telemetry) && h->send_ns != 0)
        ctx->fetch_ns = rk_now_ns();
    rk__counter_add(&inst->direct, 1);
    ctx->capture = reply;
    ctx->capture_id = h->message_id;
    rc = handle_batch(ctx, inst->k->def.handler);
    ctx->capture = NULL;
    lat_flush(ctx);
    if (rc != RK_OK) {
        /* In flight (cur 0): the kernel's thread takes the context back,
         * finds handback and faults with it (fetch). */
        atomic_store(&ctx->handback, rc);
        atomic_store_explicit(&bi->owner, RK__OWN_FREE, memory_order_release);
        rk__ec_notify_all(ctx->wake);
        return RK_OK;
    }
    atomic_store_explicit(&bi->owner, RK__OWN_FREE, memory_order_release);
    return RK_OK;
}

/* Copies frame i of the batch to dst (a spill slot); returns its length. */
static size_t
spill_frame(rk_ctx *ctx, size_t i, unsigned char *dst)
{
    size_t len = frame_len(ctx, i);

    memcpy(dst, frame_at(ctx, i), len);
    return len;
}

/* The actor or handler failed with rc: the failed frame (if any) goes to
 * the fail slot, FAULTED is reported, and the runtime's verdict awaited
 * (the runtime always answers, at once when a STOP is posted). True to
 * restart, false to end as failed. */
static bool
fault(rk_ctx *ctx, int rc)
{
    rk__inst *inst = ctx->inst;
    unsigned char *fail_slot
        = (unsigned char *)inst->spill_mem.host + inst->stride * ctx->batch;
    size_t flen = 0;
    uint32_t n;

    rk_ctl_count(&ctx->ctl->errors, 1);
    if (ctx->cur >= 0) {
        flen = spill_frame(ctx, (size_t)ctx->cur, fail_slot);
        ctx->cur = -1;
    }
    n = rk_ctl_fault(ctx->ctl, (uint32_t)rc, (uint32_t)flen);
    rk__cpu_ack(ctx->bi, RK_CTL_ACK_FAULTED);
    for (;;) {
        uint32_t key = rk__ec_prepare(ctx->wake);
        /* Acquire pairs with rk_ctl_verdict_post: the host has read the
         * fail slot before it answers. */
        uint32_t v = rk_ctl_verdict_get(ctx->ctl);
        if (v == n || v == RK_CTL_GIVE_UP) {
            rk__ec_cancel(ctx->wake);
            return v == n;
        }
        (void)rk__ec_wait(ctx->wake, key, UINT64_MAX);
    }
}

/* At the end: the prefetched frames not handed out go to the spill area
 * for the runtime to dead-letter, and lane slots are given back. Returns
 * how many. */
static uint32_t
spill_rest(rk_ctx *ctx)
{
    unsigned char *spill = ctx->inst->spill_mem.host;
    uint32_t left = 0;

    while (ctx->pos < ctx->n) {
        (void)spill_frame(ctx, ctx->pos++, spill + left * ctx->inst->stride);
        left++;
    }
    release_held(ctx);
    return left;
}

void *
rk__cpu_body(void *arg)
{
    rk__backend_inst *bi = arg;
    rk__inst *inst = bi->inst;
    rk__kernel *k = inst->k;
    rk_ctx *ctx = &bi->ctx;
    int rc = RK_OK;

    rk__cpu_ack(bi, RK_CTL_ACK_HELD);
    /* A STOP that overtook the first RUN still drains: an activated
     * kernel processes what was queued before terminate. */
    if (wait_while(ctx, RK_CTL_HOLD) != RK_CTL_STOP
        || rk_ctl_was_activated(ctx->ctl)) {
        rk__cpu_ack(bi, RK_CTL_ACK_RUNNING);
        for (;;) {
            rc = k->def.actor ? k->def.actor(ctx) : handler_loop(ctx);
            if (rc == RK_ECLOSED && load_cmd(ctx) == RK_CTL_STOP)
                rc = RK_OK; /* "terminating and drained" passed back up */
            if (rc == RK_OK) {
                complete_current(ctx);
                break;
            }
            if (!fault(ctx, rc))
                break;
            rc = RK_OK;
            rk__cpu_ack(bi, RK_CTL_ACK_RUNNING);
        }
    }
    lat_flush(ctx);
    rk_ctl_exit(ctx->ctl, (uint32_t)rc, spill_rest(ctx));
    rk__cpu_ack(bi, RK_CTL_ACK_EXITED);
    return NULL;
}

/* ------------------------------------------------------ sending */

/* In a direct call with a reply buffer: takes the reply to the call's
 * message, the first one that fits (rk_kernel_call_reply). */
static bool
capture(rk_ctx *ctx, const rk_msg_header *h, const void *payload, size_t len)
{
    rk_call_reply *r = ctx->capture;

    if (r->got || len > r->cap
        || memcmp(h->correlation_id.b, ctx->capture_id.b, 16) != 0)
        return false;
    if (len != 0)
        memcpy(r->buf, payload, len);
    r->hdr = *h;
    r->len = len;
    r->got = true;
    return true;
}

static int
ctx_emit(rk_ctx *ctx, rk_msg_header *h, const void *payload, size_t len)
{
    rk__inst *inst = ctx->inst;
    /* Acquire pairs with the release store in rk_connect. */
    rk__kernel *to
        = atomic_load_explicit(&inst->k->route, memory_order_acquire);
    int rc;

    if (to != NULL) {
        rc = rk__deliver(to, h, payload, len, RK_WAIT_FOREVER, "send");
    } else {
        if (len > inst->k->def.config.max_payload)
            return rk__fail(RK_EMSGSIZE,
                "kernel '%s': %zu-byte payload exceeds "
                "max_payload %u",
                inst->k->id, len, inst->k->def.config.max_payload);
        if (ctx->capture != NULL && capture(ctx, h, payload, len))
            rc = RK_OK;
        else
            rc = rk__outq_send(&inst->out, h, sizeof(*h), payload, len);
    }
    if (rc == RK_OK)
        rk_ctl_count(&ctx->ctl->sent, 1);
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

    /* An output is stamped when the message it answers was (sampling
     * follows a message through a pipeline), or, sent outside any
     * message, as the kernel's sends are sampled. */
    uint64_t stamp = 0;
    if (inst->telemetry) {
        if (ctx->cur >= 0)
            stamp = ((const rk_msg_header *)(const void *)frame_at(
                         ctx, (size_t)ctx->cur))
                        ->send_ns
                ? rk_now_ns()
                : 0;
        else
            stamp = rk__send_stamp(inst->k);
    }
    rk__header(h, type_id, ctx_priority(ctx), stamp, inst->k->slot + 1);
    if (inst->k->def.config.output_type != NULL
        && inst->k->def.config.output_type->id == type_id)
        h->type_version = inst->k->def.config.output_type->version;
}

/* The kernel declared what it sends (output_type): anything else is
 * refused, as rk_send refuses what a kernel does not take. */
static int
check_output(rk_ctx *ctx, uint32_t type_id, const char *op)
{
    const rk_msgtype *ot = ctx->inst->k->def.config.output_type;

    if (ot == NULL || ot->id == type_id || type_id == RK_MSG_TYPE_ERROR)
        return RK_OK;
    return rk__fail(RK_ETYPE, "%s: kernel '%s' sends %s (id %u), not id %u",
        op, ctx->inst->k->id, ot->name, ot->id, type_id);
}

int
rk_ctx_send(rk_ctx *ctx, uint32_t type_id, const void *payload, size_t len)
{
    rk_msg_header h;
    int rc;

    if (ctx == NULL || (payload == NULL && len != 0))
        return rk__fail(RK_EINVAL, "rk_ctx_send: NULL argument");
    if ((rc = check_output(ctx, type_id, "rk_ctx_send")) != RK_OK)
        return rc;
    ctx_header(ctx, &h, type_id);
    h.payload_len = (uint32_t)len;
    return ctx_emit(ctx, &h, payload, len);
}

int
rk_ctx_reply(rk_ctx *ctx, const rk_msg_view *req, uint32_t type_id,
    const void *payload, size_t len)
{
    rk_msg_header h;
    int rc;

    if (ctx == NULL || req == NULL || req->hdr == NULL
        || (payload == NULL && len != 0))
        return rk__fail(RK_EINVAL, "rk_ctx_reply: NULL argument");
    if ((rc = check_output(ctx, type_id, "rk_ctx_reply")) != RK_OK)
        return rc;
    ctx_header(ctx, &h, type_id);
    h.payload_len = (uint32_t)len;
    h.priority = req->hdr->priority;
    rk_msg_reply(&h, req->hdr);
    return ctx_emit(ctx, &h, payload, len);
}

int
rk_ctx_reply_error(
    rk_ctx *ctx, const rk_msg_view *req, int err, const char *detail)
{
    unsigned char p[4 + 256];
    size_t n = detail != NULL ? strnlen(detail, 256) : 0, max;

    if (ctx == NULL)
        return rk__fail(RK_EINVAL, "rk_ctx_reply_error: NULL argument");
    if (err <= RK_OK || err >= RK__ERR_COUNT)
        return rk__fail(RK_EINVAL,
            "rk_ctx_reply_error: %d is not an RK_E* error code", err);
    /* The detail is cut to what an output slot holds. */
    max = ctx->inst->k->def.config.max_payload;
    if (max >= 4 && n > max - 4)
        n = max - 4;
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)((uint32_t)err >> (8 * i));
    if (n != 0)
        memcpy(p + 4, detail, n);
    return rk_ctx_reply(ctx, req, RK_MSG_TYPE_ERROR, p, 4 + n);
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
    rc = rk__deliver(to, &h, payload, len, RK_WAIT_FOREVER, "send");
    if (rc == RK_OK)
        rk_ctl_count(&ctx->ctl->sent, 1);
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
    rk_ctl_count(&ctx->ctl->sent, n);
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
