/*
 * bench/bench_capacity_cost.c - the send and receive paths' cost at a
 * queue capacity that is or is not a power of two (issue 27, item 1), and
 * the runtime's send before and after time-based latency sampling (item
 * 3), as instructions per message.
 *
 * Wall clock on the shared 2-vCPU VM cannot show a difference of a few
 * per cent, so each case here is a fixed, repeatable run of one path that
 * tools/capacity-instructions.sh counts under
 * `valgrind --tool=callgrind --toggle-collect=FUNCTION` (exact: the same
 * run gives the same count). The program itself times nothing; it prints
 * one JSON line per case saying what it ran (messages, calls), which the
 * script divides the count by.
 *
 *   bench_capacity_cost CASE CAPACITY [ROUNDS]
 *   bench_capacity_cost              every case once at 1000 and 1024
 *                                    (make bench's smoke run; no figure)
 *
 * Inbox cases (src/queue/inbox.h, 64-byte payloads, the runtime's hold of
 * 64 = its default batch, so the rings are the runtime's):
 *   send         lanes_send into room (BLOCK policy), cap messages a
 *                round, then drained untimed
 *   send_batch   lanes_send_fill of 256 into room, drained after each
 *   recv         lanes_take(1) + lanes_release(1) of a full queue
 *   recv_batch   lanes_take(64) + lanes_release of a full queue
 *   block_full   lanes_send_fill of 256 into a full BLOCK queue, with a
 *                consumer thread that takes 64 each time the queue is full
 *                (what the runtime's kernel takes per dequeue): the
 *                producer waits for room 4 times per call at any size,
 *                and at a capacity not a multiple of 64 its call is
 *                written in 5 runs instead of 4 (the room comes in 64s
 *                that no longer line up with its batches). The wait itself
 *                (rk__spin_wait, rk__ec_wait, rk_now_ns) is not counted:
 *                it is time, not work, and happens as often at both sizes
 *   block_full_single  the same with single lanes_send calls
 *   drop_oldest  mq_send into a full DROP_OLDEST queue (each evicts one)
 * Runtime cases (public API; they build at older commits too):
 *   rt_send       rk_send of cap - 1 messages to a kernel whose actor
 *                 waits until they are all queued (no wait, no wake-up)
 *   rt_send_batch rk_send_batch of 256 at a time, the same way
 *   rt_recv       rk_ctx_recv of those messages in the actor
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#include "bench.h"
#include "ringkernel/runtime.h"
#ifndef RK_CAPCOST_RUNTIME_ONLY
#include "queue/inbox.h"
#include "queue/slotflag.h"
#endif

#define SUITE   "capacity_cost"
#define PAYLOAD 64u
#define HOLD    64u  /* the runtime's default batch (runtime.c) */
#define BATCH   256u /* rk_send_batch's batch in make bench */

static void
check(int rc, const char *what)
{
    if (rc != RK_OK) {
        fprintf(stderr, "bench_capacity_cost: %s: %s (%s)\n", what,
            rk_strerror(rc), rk_errdetail());
        exit(1);
    }
}

static void
emit(const char *c, uint32_t cap, uint64_t msgs, uint64_t calls)
{
    char extra[200];

    snprintf(extra, sizeof(extra),
        "\"case\":\"%s\",\"capacity\":%u,\"calls\":%llu", c, cap,
        (unsigned long long)calls);
    bench_emit(SUITE, "messages", "ringkernel", (double)msgs, "msgs", extra);
}

#ifndef RK_CAPCOST_RUNTIME_ONLY
/* ------------------------------------------------------------- inbox */

static rk_msg_header hdr;
static unsigned char payload[PAYLOAD];

static rk__inbox *
new_inbox(uint32_t cap, rk_backpressure bp, rk__ec *wake)
{
    rk_mqueue_config cfg = { .capacity = cap,
        .slot_size = RK_MSG_HEADER_SIZE + PAYLOAD,
        .backpressure = bp };
    rk__inbox *q;

    hdr.payload_len = PAYLOAD;
    rk__ec_init(wake);
    check(rk__inbox_create(&q, &cfg, HOLD, wake, NULL), "inbox");
    return q;
}

/* send_fill's writer: the frames as rk_send_batch writes them. */
static void
fill(void *arg, size_t first, unsigned char *dst, size_t stride, size_t k,
    bool flagged)
{
    (void)arg;
    (void)first;
    for (size_t i = 0; i < k; i++, dst += stride) {
        if (flagged) {
            rk__slot_write(dst, &hdr, payload, PAYLOAD);
        } else {
            memcpy(dst, &hdr, sizeof(hdr));
            memcpy(dst + sizeof(hdr), payload, PAYLOAD);
        }
    }
}

/* Takes and releases everything queued (max per take). */
static uint64_t
drain(rk__inbox *q, size_t max)
{
    rk__inbox_batch b;
    uint64_t n = 0;

    while (rk__inbox_take(q, max, &b) == RK_OK) {
        n += b.n;
        rk__inbox_release(q, b.n);
    }
    return n;
}

static void
one(rk__inbox *q)
{
    check(rk__inbox_send(
              q, &hdr, sizeof(hdr), payload, PAYLOAD, 128, RK_NO_WAIT, false),
        "send");
}

/* Fills the queue with the operation the case does not count: single
 * sends where it counts batches, batches otherwise. */
static void
fill_up(rk__inbox *q, uint32_t cap, bool singles)
{
    size_t sent;

    if (singles) {
        for (uint32_t i = 0; i < cap; i++)
            one(q);
        return;
    }
    for (size_t i = 0; i < cap; i += sent)
        check(rk__inbox_send_fill(q, 128, RK_MSG_HEADER_SIZE + PAYLOAD,
                  cap - i < BATCH ? cap - i : BATCH, fill, NULL, RK_NO_WAIT,
                  &sent),
            "fill");
}

/* The consumer of block_full: each time the queue is full (the producer
 * waits or is about to), it takes one runtime batch and gives it back. */
struct consumer {
    rk__inbox *q;
    uint32_t cap;
    _Atomic bool done;
    uint64_t taken;
};

static void *
consume(void *arg)
{
    struct consumer *c = arg;
    rk__inbox_batch b;

    for (;;) {
        /* Acquire pairs with the release store of done in inbox_case. */
        bool done = atomic_load_explicit(&c->done, memory_order_acquire);
        if (rk__inbox_depth(c->q) >= c->cap || done) {
            int rc = rk__inbox_take(c->q, HOLD, &b);
            if (rc == RK_OK) {
                c->taken += b.n;
                rk__inbox_release(c->q, b.n);
            } else if (done) {
                return NULL;
            }
        }
        sched_yield();
    }
}

static void
inbox_case(const char *c, uint32_t cap, unsigned rounds)
{
    rk__ec wake;
    bool blocking = strncmp(c, "block_full", 10) == 0;
    bool batched = strcmp(c, "block_full") == 0;
    rk__inbox *q = new_inbox(cap,
        strcmp(c, "drop_oldest") == 0 ? RK_BP_DROP_OLDEST : RK_BP_BLOCK,
        &wake);
    uint64_t msgs = 0, calls = 0;
    rk__inbox_batch b;
    size_t sent;

    if (strcmp(c, "send") == 0) {
        for (unsigned r = 0; r < rounds; r++) {
            for (uint32_t i = 0; i < cap; i++, msgs++, calls++)
                one(q);
            drain(q, HOLD);
        }
    } else if (strcmp(c, "send_batch") == 0) {
        /* Enough calls to wrap the ring several times. */
        for (unsigned r = 0; r < rounds * 16; r++, calls++) {
            check(rk__inbox_send_fill(q, 128, RK_MSG_HEADER_SIZE + PAYLOAD,
                      BATCH, fill, NULL, RK_NO_WAIT, &sent),
                "send_fill");
            msgs += sent;
            drain(q, HOLD);
        }
    } else if (strcmp(c, "recv") == 0 || strcmp(c, "recv_batch") == 0) {
        size_t max = strcmp(c, "recv") == 0 ? 1 : HOLD;
        for (unsigned r = 0; r < rounds; r++) {
            fill_up(q, cap, false);
            while (rk__inbox_take(q, max, &b) == RK_OK) {
                msgs += b.n;
                calls++;
                rk__inbox_release(q, b.n);
            }
        }
    } else if (strcmp(c, "drop_oldest") == 0) {
        fill_up(q, cap, false);
        for (unsigned r = 0; r < rounds; r++)
            for (uint32_t i = 0; i < cap; i++, msgs++, calls++)
                one(q);
    } else if (blocking) {
        struct consumer con = { .q = q, .cap = cap };
        pthread_t t;
        uint64_t total = (uint64_t)rounds * 16 * BATCH;

        /* Queued as a stream of batches from empty leaves it: the whole
         * batches that fit, so the first counted call finds the room of
         * cap % 256 (a split call when that is not 0) and every call
         * after it meets a full queue in the phase a long stream has. */
        fill_up(q, batched ? cap / BATCH * BATCH : cap, batched);
        atomic_init(&con.done, false);
        if (pthread_create(&t, NULL, consume, &con) != 0)
            check(RK_ENOMEM, "thread");
        while (msgs < total) {
            if (batched) {
                check(rk__inbox_send_fill(q, 128,
                          RK_MSG_HEADER_SIZE + PAYLOAD, BATCH, fill, NULL,
                          RK_WAIT_FOREVER, &sent),
                    "send_fill");
                msgs += sent;
            } else {
                check(rk__inbox_send(q, &hdr, sizeof(hdr), payload, PAYLOAD,
                          128, RK_WAIT_FOREVER, false),
                    "send");
                msgs++;
            }
            calls++;
        }
        /* Release pairs with the acquire load in consume. */
        atomic_store_explicit(&con.done, true, memory_order_release);
        pthread_join(t, NULL);
    } else {
        fprintf(stderr, "bench_capacity_cost: unknown case '%s'\n", c);
        exit(2);
    }
    rk__inbox_destroy(q);
    emit(c, cap, msgs, calls);
}
#endif /* RK_CAPCOST_RUNTIME_ONLY */

/* ----------------------------------------------------------- runtime */

static _Atomic bool gate;     /* the host queued everything */
static _Atomic uint64_t got;  /* messages the actor received */
static bool rt_batch;

static int
gated_actor(rk_ctx *ctx)
{
    rk_msg_view m;
    int rc;

    /* Acquire pairs with the release store of gate in rt_case. */
    while (!atomic_load_explicit(&gate, memory_order_acquire))
        sched_yield();
    while ((rc = rk_ctx_recv(ctx, &m, RK_NO_WAIT)) == RK_OK)
        atomic_fetch_add_explicit(&got, 1, memory_order_relaxed);
    /* Wait for the stop without another receive (its wait would be
     * counted with the receives). */
    while (!rk_should_terminate(ctx))
        sched_yield();
    return RK_OK;
}

static void
rt_case(const char *c, uint32_t cap, unsigned rounds)
{
    rk_runtime_config rc_cfg = { .no_static_kernels = true };
    rk_kernel_def def = { .id = "sink", .actor = gated_actor };
    static unsigned char buf[BATCH * PAYLOAD];
    uint64_t msgs = 0, calls = 0;
    uint32_t n = cap - 1; /* never full: the send path never waits */
    rk_runtime *rt;
    rk_kernel k;

    (void)rounds; /* one kernel, one round: the counts are exact */
    rt_batch = strcmp(c, "rt_send_batch") == 0;
    def.config.input_capacity = cap;
    check(rk_runtime_create(&rt, &rc_cfg), "create");
    check(rk_runtime_register(rt, &def), "register");
    check(rk_kernel_launch(rt, def.id), "launch");
    check(rk_kernel_activate(rt, def.id), "activate");
    check(rk_kernel_lookup(rt, def.id, &k), "lookup");
    while (msgs < n) {
        if (rt_batch) {
            size_t want = n - msgs < BATCH ? n - msgs : BATCH, sent = 0;
            check(rk_send_batch(rt, k, 0, buf, PAYLOAD, want, 128,
                      RK_NO_WAIT, &sent),
                "send_batch");
            msgs += sent;
        } else {
            check(rk_send(rt, k, 0, buf, PAYLOAD, 128, RK_NO_WAIT), "send");
            msgs++;
        }
        calls++;
    }
    /* Release pairs with the acquire load in gated_actor. */
    atomic_store_explicit(&gate, true, memory_order_release);
    while (atomic_load_explicit(&got, memory_order_relaxed) < msgs)
        sched_yield();
    rk_runtime_destroy(rt);
    emit(c, cap, msgs, calls);
    if (strcmp(c, "rt_send") == 0) /* the actor's receives of the same run */
        emit("rt_recv", cap, msgs, msgs);
}

static void
run(const char *c, uint32_t cap, unsigned rounds)
{
    if (strncmp(c, "rt_", 3) == 0) {
        rt_case(c, cap, rounds);
        return;
    }
#ifndef RK_CAPCOST_RUNTIME_ONLY
    inbox_case(c, cap, rounds);
#else
    fprintf(stderr, "bench_capacity_cost: built for the rt_ cases only\n");
    exit(2);
#endif
}

int
main(int argc, char **argv)
{
    static const char *const all[] = { "send", "send_batch", "recv",
        "recv_batch", "block_full", "block_full_single", "drop_oldest",
        "rt_send", "rt_send_batch" };

    if (argc >= 3) {
        long cap = strtol(argv[2], NULL, 10);
        long rounds = argc > 3 ? strtol(argv[3], NULL, 10) : 4;
        if (cap < 2 || cap > (1L << 20) || rounds < 1 || rounds > 1000) {
            fprintf(stderr, "usage: %s CASE CAPACITY [ROUNDS]\n", argv[0]);
            return 2;
        }
        run(argv[1], (uint32_t)cap, (unsigned)rounds);
        return 0;
    }
    /* make bench: every case once, small (the figures come from
     * tools/capacity-instructions.sh under callgrind). */
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
#ifdef RK_CAPCOST_RUNTIME_ONLY
        if (strncmp(all[i], "rt_", 3) != 0)
            continue;
#endif
        run(all[i], 1000, 1);
        atomic_store(&gate, false);
        atomic_store(&got, 0);
    }
    return 0;
}
