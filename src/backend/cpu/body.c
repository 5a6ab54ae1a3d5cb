/*
 * src/backend/cpu/body.c - what a CPU backend thread runs: the persistent
 * loop (safe points, faults, the drain on STOP), the receive side of the
 * actor API (the context's ops: recv, should_terminate) and direct calls.
 *
 * The loop decides nothing about the kernel's fate: it acknowledges
 * commands, reports a failure (FAULTED, with the failed frame in the fail
 * slot) and waits for the runtime's verdict, and at its end reports
 * EXITED with the frames it did not process. It sees the runtime only
 * through what launch handed it (backend.h: rk__backend_io, the actor's
 * rk_ctx); what the actor sends goes through the runtime's actor API
 * (rk_ctx_send, ..., runtime/actor.c), which decides where it goes.
 *
 * Input is taken in batches (io->take) into the loop state and
 * handed out one message at a time, so actor-style and handler-style
 * kernels both pay the queue's costs once per batch. A message handed out
 * is "in flight" until the next receive (processed) or until the actor
 * fails (dead-lettered). Before every hand-out the kernel passes a safe
 * point: it reads cmd and parks there while DEACTIVATED.
 */
#include <sched.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "common/common.h"
#include "queue/inbox.h"
#include "telemetry/histogram.h"
#include "telemetry/stats.h"

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

static const rk__ctx_ops cpu_ctx_ops;

int
rk__cpu_ctx_init(rk__backend_inst *bi, const rk__backend_launch *spec)
{
    rk__cpu_loop *ctx = &bi->loop;
    const rk__backend_io *io = spec->io;
    const rk_kernel_config *c = &io->def->config;

    memset(ctx, 0, sizeof(*ctx));
    ctx->pub = spec->ctx;
    ctx->io = io;
    ctx->bi = bi;
    ctx->ctl = bi->ctl;
    ctx->wake = bi->wake;
    ctx->batch = c->batch;
    ctx->cur = -1;
    ctx->spin_budget = c->spin;
    ctx->direct = c->direct_calls && io->def->handler != NULL;
    ctx->pub->ops = &cpu_ctx_ops;
    ctx->pub->be = ctx;
    atomic_store_explicit(&bi->owner, RK__OWN_KERNEL, memory_order_relaxed);
    atomic_store_explicit(&bi->want, 0, memory_order_relaxed);
    ctx->buf = aligned_alloc(STRIDE_ALIGN, io->stride);
    if (ctx->buf == NULL) {
        rk__cpu_ctx_fini(bi);
        return RK_ENOMEM;
    }
    return RK_OK;
}

void
rk__cpu_ctx_fini(rk__backend_inst *bi)
{
    free(bi->loop.buf);
    bi->loop.buf = NULL;
}

void
rk__cpu_ack(rk__backend_inst *bi, uint32_t ack)
{
    rk__ec *events = bi->events;

    rk_ctl_ack(bi->ctl, ack);
    rk__ec_notify_all(bi->ack);
    /* After an EXITED ack the host may destroy bi once it has joined the
     * thread, which cannot happen before this function returns. */
    if (ack == RK_CTL_ACK_FAULTED || ack == RK_CTL_ACK_EXITED)
        rk__ec_notify_all(events);
}

static uint32_t
load_cmd(const rk__cpu_loop *ctx)
{
    /* Acquire pairs with the release store in rk_ctl_post. */
    return rk_ctl_cmd(ctx->ctl);
}

/* Parks while cmd == c; returns the new command. A command is posted
 * before the backend's signal() notifies wake, so the re-check after
 * rk__ec_prepare either sees it or the wait is woken (common/ec.h). */
static uint32_t
wait_while(rk__cpu_loop *ctx, uint32_t c)
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
safe_point(rk__cpu_loop *ctx)
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
complete_current(rk__cpu_loop *ctx)
{
    if (ctx->cur >= 0) {
        rk_ctl_count(&ctx->ctl->processed, 1);
        ctx->cur = -1;
        ctx->pub->cur = NULL;
    }
}

/* Records the pending run of equal latencies. */
static void
lat_flush(rk__cpu_loop *ctx)
{
    if (ctx->run_n != 0) {
        rk__hist_record_n(ctx->io->latency, ctx->run_v, ctx->run_n);
        ctx->run_n = 0;
    }
}

static const unsigned char *
frame_at(const rk__cpu_loop *ctx, size_t i)
{
    return ctx->frames + i * ctx->stride;
}

static size_t
frame_len(const rk__cpu_loop *ctx, size_t i)
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
release_held(rk__cpu_loop *ctx)
{
    if (ctx->held != 0) {
        ctx->io->release(ctx->io->in, ctx->held);
        ctx->held = 0;
    }
}

/* Takes the next batch without waiting (results as rk__inbox_take). */
static int
next_batch(rk__cpu_loop *ctx)
{
    const rk__backend_io *io = ctx->io;
    rk__inbox_batch b;
    int rc;

    release_held(ctx);
    /* Lane slots are lent, not copied, to handlers and actors alike: a
     * view is valid until the next receive, and the batch goes back when
     * the next one is taken (or before a safe point with nothing left in
     * it, see fetch). Held slots do not take room from the lane (it
     * counts what the kernel has not taken, rk__inbox_create's hold), so a
     * paused kernel's lane still queues its whole capacity. */
    rc = io->take(io->in, ctx->batch, &b);
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
batch_stamped(const rk__cpu_loop *ctx, size_t n)
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
spin_found(rk__cpu_loop *ctx, uint32_t max)
{
    ctx->spin_budget = max;
}

static void
spin_parked(rk__cpu_loop *ctx, uint32_t max)
{
    uint32_t floor = max < RK__SPIN_FLOOR ? max : RK__SPIN_FLOOR;
    uint32_t b = ctx->spin_budget / 2;

    ctx->spin_budget = b > floor ? b : floor;
}

/* Direct calls: the kernel thread takes its context back from a caller
 * (who holds it for one handler call) and gives it up while it waits.
 * Acquire/release: what the caller did with the context comes before the
 * kernel's next use, and the other way round. While a caller holds it the
 * thread says so (want: no new call starts) and parks on wake until the
 * caller lets go: a forwarding handler (the MPI cluster's proxies) holds
 * it for a whole round trip, and back-to-back calls leave a spinning
 * thread almost no moment to take it (it would burn a core meanwhile). */
static void
own(rk__cpu_loop *ctx)
{
    _Atomic uint32_t *o = &ctx->bi->owner;

    for (;;) {
        uint32_t free_ = RK__OWN_FREE, key;
        if (atomic_compare_exchange_weak_explicit(o, &free_, RK__OWN_KERNEL,
                memory_order_acquire, memory_order_relaxed)) {
            atomic_store_explicit(&ctx->bi->want, 0, memory_order_relaxed);
            return;
        }
        if (free_ == RK__OWN_FREE)
            continue; /* a weak CAS's spurious failure */
        /* seq_cst store, then (after prepare) seq_cst load: pairs with
         * the caller's seq_cst store of FREE and load of want in
         * call_release, so that either it sees want and notifies, or
         * this sees FREE. */
        atomic_store_explicit(&ctx->bi->want, 1, memory_order_seq_cst);
        key = rk__ec_prepare(ctx->wake);
        if (atomic_load_explicit(o, memory_order_seq_cst) == RK__OWN_FREE) {
            rk__ec_cancel(ctx->wake);
            continue;
        }
        (void)rk__ec_wait(ctx->wake, key, UINT64_MAX);
    }
}

static void
disown(rk__cpu_loop *ctx)
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
wanted(rk__cpu_loop *ctx, uint32_t c)
{
    return ctx->io->depth(ctx->io->in) != 0 || load_cmd(ctx) != c
        || atomic_load(&ctx->handback) != RK_OK;
}

/*
 * Makes sure a prefetched message is waiting at ctx->pos: spins (for the
 * adaptive budget above), then parks (see rk__control for the handshake
 * with senders). RK_OK, RK_ETIMEDOUT, or RK_ECLOSED once terminating and
 * drained.
 */
static int
fetch(rk__cpu_loop *ctx, int64_t timeout_ns)
{
    const rk__backend_io *io = ctx->io;
    uint32_t spin, max, spins = 0;
    uint64_t deadline = 0;
    bool parked = false;
    bool mine = true; /* the context is the thread's (see direct calls) */
    uint32_t c = 0;   /* the command seen at the last safe point */

    if (ctx->pos < ctx->n) {
        (void)safe_point(ctx);
        return RK_OK;
    }
    max = io->def->config.spin;
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
                if (rk__telemetry_on(io->telemetry) && batch_stamped(ctx, n))
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
take(rk__cpu_loop *ctx, rk_msg_view *out)
{
    const unsigned char *frame = frame_at(ctx, ctx->pos);
    const rk_msg_header *h = (const rk_msg_header *)(const void *)frame;
    size_t flen = frame_len(ctx, ctx->pos);

    ctx->cur = (long)ctx->pos++;
    ctx->pub->cur = h;
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

/* rk_should_terminate (the context's op). */
static bool
cpu_should_terminate(rk_ctx *pub)
{
    rk__cpu_loop *ctx = pub->be;

    /* Held lane slots count in the depth but were handed out already
     * (the view of the last one may still be in use, so no release). */
    return safe_point(ctx) == RK_CTL_STOP && ctx->pos == ctx->n
        && ctx->io->depth(ctx->io->in) == ctx->held;
}

/* rk_ctx_recv (the context's op; the runtime checked the arguments and
 * that the kernel is an actor). */
static int
cpu_recv(rk_ctx *pub, rk_msg_view *out, int64_t timeout_ns)
{
    rk__cpu_loop *ctx = pub->be;
    int rc;

    complete_current(ctx);
    rc = fetch(ctx, timeout_ns);
    if (rc != RK_OK)
        return rc;
    take(ctx, out);
    return RK_OK;
}

static const rk__ctx_ops cpu_ctx_ops = {
    .recv = cpu_recv,
    .should_terminate = cpu_should_terminate,
};

/* Records the latencies of the n handed-out frames at f (send -> take,
 * as take() does for an actor), merging runs of equal values. Frames of
 * one send batch share send_ns, so the common step is one compare. */
static void
lat_batch(rk__cpu_loop *ctx, const unsigned char *f, size_t stride, size_t n)
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
                rk__hist_record_n(ctx->io->latency, run_v, run_n);
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
handle_batch(rk__cpu_loop *ctx, rk_handler_fn fn)
{
    size_t start = ctx->pos, n = ctx->n, stride = ctx->stride, i;
    const unsigned char *f = frame_at(ctx, start);
    rk_ctx *pub = ctx->pub;
    bool in_place = ctx->in_place;
    rk_msg_view v;
    int rc = RK_OK;

    for (i = start; i < n; i++, f += stride) {
        if (i != start)
            (void)safe_point(ctx);
        ctx->cur = (long)i;
        ctx->pos = i + 1;
        v.hdr = (const rk_msg_header *)(const void *)f;
        pub->cur = v.hdr;
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
        if ((rc = fn(pub, &v)) != RK_OK)
            break;
    }
    lat_batch(ctx, frame_at(ctx, start), stride, (i < n ? i + 1 : n) - start);
    rk_ctl_count(&ctx->ctl->processed, i - start);
    if (rc == RK_OK) {
        ctx->cur = -1;
        pub->cur = NULL;
    }
    return rc;
}

static int
handler_loop(rk__cpu_loop *ctx)
{
    rk_handler_fn fn = ctx->io->def->handler;
    int rc;

    ctx->pub->in_handler = true;
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

/* A caller gives the context back, and wakes the thread if it waits
 * for it (own). The store releases the context's uses (pairs with the
 * acquire CAS in own() or a caller's); seq_cst with the load of want,
 * see own(). */
static void
call_release(rk__backend_inst *bi, rk__cpu_loop *ctx)
{
    atomic_store_explicit(&bi->owner, RK__OWN_FREE, memory_order_seq_cst);
    if (atomic_load_explicit(&bi->want, memory_order_seq_cst) != 0)
        rk__ec_notify_all(ctx->wake);
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
    rk__cpu_loop *ctx = &bi->loop;
    const rk__backend_io *io = bi->io;
    uint32_t free_ = RK__OWN_FREE;
    unsigned char *f;
    int rc;

    if (!ctx->direct)
        return rk__fail(RK_ENOTSUP,
            "rk_kernel_call: kernel '%s' does not take direct calls",
            io->def->id);
    if (RK_MSG_HEADER_SIZE + len > io->stride)
        return rk__fail(RK_EMSGSIZE,
            "rk_kernel_call: %zu-byte payload exceeds kernel '%s''s slot", len,
            io->def->id);
    /* Acquire: pairs with disown() (and a caller's release below). */
    if (!atomic_compare_exchange_strong_explicit(&bi->owner, &free_,
            RK__OWN_CALLER, memory_order_acquire, memory_order_relaxed))
        return RK_EBUSY;
    /* Idle: running, nothing prefetched or handed back, nothing queued
     * (a queued message goes first: the caller then queues behind it),
     * and the thread is not waiting to take its context back (own). */
    if (load_cmd(ctx) != RK_CTL_RUN || ctx->pos < ctx->n
        || atomic_load_explicit(&ctx->handback, memory_order_relaxed) != 0
        || io->depth(io->in) != 0
        || atomic_load_explicit(&bi->want, memory_order_relaxed) != 0) {
        call_release(bi, ctx);
        return RK_EBUSY;
    }
    f = ctx->buf;
    memcpy(f, h, RK_MSG_HEADER_SIZE);
    if (len != 0)
        memcpy(f + RK_MSG_HEADER_SIZE, payload, len);
    ctx->frames = f;
    ctx->stride = io->stride;
    ctx->in_place = false;
    ctx->lens[0] = RK_MSG_HEADER_SIZE + len;
    ctx->n = 1;
    ctx->pos = 0;
    ctx->fetch_ns = 0;
    if (rk__telemetry_on(io->telemetry) && h->send_ns != 0)
        ctx->fetch_ns = rk_now_ns();
    ctx->pub->capture = reply;
    ctx->pub->capture_id = h->message_id;
    rc = handle_batch(ctx, io->def->handler);
    ctx->pub->capture = NULL;
    lat_flush(ctx);
    if (rc != RK_OK) {
        /* In flight (cur 0): the kernel's thread takes the context back,
         * finds handback and faults with it (fetch). */
        atomic_store(&ctx->handback, rc);
        call_release(bi, ctx);
        rk__ec_notify_all(ctx->wake);
        return RK_OK;
    }
    call_release(bi, ctx);
    return RK_OK;
}

/* Copies frame i of the batch to dst (a spill slot); returns its length. */
static size_t
spill_frame(rk__cpu_loop *ctx, size_t i, unsigned char *dst)
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
fault(rk__cpu_loop *ctx, int rc)
{
    unsigned char *fail_slot = ctx->io->spill + ctx->io->stride * ctx->batch;
    size_t flen = 0;
    uint32_t n;

    rk_ctl_count(&ctx->ctl->errors, 1);
    if (ctx->cur >= 0) {
        flen = spill_frame(ctx, (size_t)ctx->cur, fail_slot);
        ctx->cur = -1;
        ctx->pub->cur = NULL;
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
spill_rest(rk__cpu_loop *ctx)
{
    unsigned char *spill = ctx->io->spill;
    uint32_t left = 0;

    while (ctx->pos < ctx->n) {
        (void)spill_frame(ctx, ctx->pos++, spill + left * ctx->io->stride);
        left++;
    }
    release_held(ctx);
    return left;
}

void *
rk__cpu_body(void *arg)
{
    rk__backend_inst *bi = arg;
    const rk_kernel_def *def = bi->io->def;
    rk__cpu_loop *ctx = &bi->loop;
    int rc = RK_OK;

    rk__cpu_ack(bi, RK_CTL_ACK_HELD);
    /* A STOP that overtook the first RUN still drains: an activated
     * kernel processes what was queued before terminate. */
    if (wait_while(ctx, RK_CTL_HOLD) != RK_CTL_STOP
        || rk_ctl_was_activated(ctx->ctl)) {
        rk__cpu_ack(bi, RK_CTL_ACK_RUNNING);
        for (;;) {
            rc = def->actor ? def->actor(ctx->pub) : handler_loop(ctx);
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

