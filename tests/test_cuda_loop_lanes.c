/*
 * The device persistent loop's data path, compiled as host C from the
 * same source NVRTC compiles (tests/kernels/test_kernels.cu) and run on
 * CPU threads (one per block) against real LL and ring_proto.h lanes,
 * driven by the backend's host half (devhost.c); test_cuda_loop_host.c
 * holds the loop's protocol (lifecycle, faults, watchdog).
 *
 * This file: a batch staged in shared memory and its stage plan, LL
 * lanes (messages around the poll window, the PCIe counts of a round
 * trip), one message per warp, lane capacity and bad configurations, and
 * kernel-to-kernel lanes at GPU scope between two kernels (routes,
 * publish, a full lane, send_route, a stopped target).
 *
 * What this proves: the data path's protocol and its memory orders under
 * the C11 model (TSan build). What it cannot prove: the PTX memory model,
 * PCIe ordering, or a block of more than one thread
 * (docs/cuda-robustness.md, "What ran on a GPU, and what did not").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/devhost.h"
#include "ringkernel/ringkernel.h"

/* The kernels, as host C. */
#include "../tests/kernels/test_kernels.cu"

#include "dev_host.h"

/* Staging: the host writes a batch; the block stages it, and its outputs (two
 * per message, more than its output stage and its lane hold) go out in order
 * through mid-batch flushes. */
static void
test_staged_batch(void **state)
{
    inst in;
    unsigned char buf[256];
    rk__dh_status st;
    rk_msg_header h, r;
    (void)state;

    inst_make(&in, &rk_dev_host_kernel_rk_twice, 1, 1, 0, 4, 4);
    assert_int_equal(in.d.kargs.batch, 4);
    assert_int_equal(in.d.kargs.stage_out, 4);
    assert_int_equal(in.d.kargs.stage_bytes, 8 * 256);
    for (unsigned char i = 0; i < 4; i++) {
        memset(&h, 0, sizeof(h));
        h.type_id = 7;
        h.message_id.b[0] = (uint8_t)(0x10 + i);
        assert_int_equal(rk__dh_write(&in.d, 0, &h, &i, 1), RK_OK);
    }
    memset(&h, 0, sizeof(h));
    assert_int_equal(rk__dh_write(&in.d, 0, &h, "x", 1), RK_EFULL);
    /* The host lane is an LL lane: a written slot is visible at once. */
    assert_int_equal(rk__dh_pending(&in.d, 0), 4);
    rk__dh_publish(&in.d, 0);
    assert_int_equal(rk__dh_pending(&in.d, 0), 4);
    inst_start(&in, 1);
    rk__dh_post(&in.d, RK_DEV_CMD_RUN);
    for (unsigned char i = 0; i < 4; i++) {
        assert_int_equal(recv_frame(&in, 0, buf, sizeof(buf)), 65);
        memcpy(&r, buf, sizeof(r));
        assert_int_equal(r.type_id, 7); /* the reply */
        assert_int_equal(r.correlation_id.b[0], 0x10 + i);
        assert_int_equal(buf[64], i);
        assert_int_equal(recv_frame(&in, 0, buf, sizeof(buf)), 65);
        memcpy(&r, buf, sizeof(r));
        assert_int_equal(r.type_id, 2); /* the second send */
        assert_int_equal(buf[64], i);
    }
    inst_stop(&in);
    rk__dh_status_get(&in.d, &st);
    assert_int_equal(st.processed, 4);
    assert_int_equal(st.sent, 8);
    inst_join(&in);
}

/* Places d for cfg in new host memory, which the caller frees after
 * rk__dh_fini. */
static void *
place(rk__dh *d, const rk__dh_cfg *cfg)
{
    void *mem = aligned_alloc(64, (rk__dh_size(cfg) + 63) & ~(size_t)63);

    assert_non_null(mem);
    assert_int_equal(rk__dh_place(d, cfg, mem, 0, NULL), RK_OK);
    return mem;
}

/* The stage plan fits the default shared memory, and never stages more
 * outputs than the output lane holds. */
static void
test_stage_plan(void **state)
{
    rk__dh_cfg cfg = { .nblocks = 1,
        .nin = 1,
        .capacity = 4,
        .slot_size = 16384,
        .batch = 8,
        .kernel_id = 1 };
    rk__dh d;
    void *mem;
    (void)state;

    mem = place(&d, &cfg);
    assert_true(d.kargs.stage_bytes <= RK__DH_STAGE_BYTES);
    assert_int_equal(d.kargs.batch, 1);
    assert_int_equal(d.kargs.stage_out, 2);
    rk__dh_fini(&d);
    cfg.slot_size = 256;
    cfg.batch = 64; /* the output lane (4 slots) bounds the output stage */
    free(mem);
    mem = place(&d, &cfg);
    assert_int_equal(d.kargs.batch, 64);
    assert_int_equal(d.kargs.stage_out, 4);
    assert_int_equal(d.kargs.stage_bytes, 68 * 256);
    rk__dh_fini(&d);
    free(mem);
}

/* One message per warp (RK_DEV_WARP_KERNEL): a batch written before the
 * block runs comes back in message order, a message without a reply
 * leaves no gap, and a failing message faults the block with it held at
 * the head, the replies before it published; a restart skips it. */
static void
test_warp_kernel(void **state)
{
    inst in;
    unsigned char buf[256], v;
    rk__dh_status st;
    rk_msg_header h, r;
    uint32_t n;
    int32_t err;
    (void)state;

    inst_make(&in, &rk_dev_host_kernel_rk_wecho, 1, 1, 0, 16, 8);
    for (unsigned char i = 0; i < 8; i++) {
        memset(&h, 0, sizeof(h));
        h.message_id.b[0] = (uint8_t)(0x20 + i);
        v = i == 3 ? 0xfe : i; /* 3: no reply */
        assert_int_equal(rk__dh_send(&in.d, 0, &h, &v, 1), RK_OK);
    }
    inst_start(&in, 1);
    rk__dh_post(&in.d, RK_DEV_CMD_RUN);
    for (unsigned char i = 0; i < 8; i++) {
        if (i == 3)
            continue;
        assert_int_equal(recv_frame(&in, 0, buf, sizeof(buf)), 65);
        memcpy(&r, buf, sizeof(r));
        assert_int_equal(r.correlation_id.b[0], 0x20 + i);
        assert_int_equal(buf[64], i);
    }
    send_bytes(&in, 0, 1, "a", 1);
    v = 0xff;
    send_bytes(&in, 0, 1, &v, 1);
    send_bytes(&in, 0, 1, "b", 1);
    assert_int_equal(
        rk__dh_wait_ack(&in.d, RK_DEV_ACK_FAULTED, deadline()), RK_OK);
    assert_int_equal(rk__dh_fault_of(&in.d, 0, &n, &err), 1);
    assert_int_equal(err, RK_EINVAL);
    assert_int_equal(rk__dh_peek_failed(&in.d, 0, buf, sizeof(buf)), 65);
    assert_int_equal(buf[64], 0xff);
    assert_int_equal(recv_frame(&in, 0, buf, sizeof(buf)), 65);
    assert_int_equal(buf[64], 'a');
    rk__dh_verdict(&in.d, RK_DEV_VERDICT(0, n));
    assert_int_equal(recv_frame(&in, 0, buf, sizeof(buf)), 65);
    assert_int_equal(buf[64], 'b');
    inst_stop_st(&in, &st);
    assert_int_equal(st.processed, 10);
    assert_int_equal(st.sent, 9);
    assert_int_equal(st.errors, 1);
    inst_join(&in);
}

/* Waits (deadline: a hang fails) until block b's PCIe counts say `msgs`
 * messages were handed back and at least `polls` idle polls ran. */
static void
pcie_wait(uint32_t b, rk_dev_u64 msgs, rk_dev_u64 polls, rk_dev_u64 out[5])
{
    uint64_t end = deadline();
    for (;;) {
        rk_dev_pcie_get(b, out);
        if (out[1] >= msgs && out[2] >= polls)
            return;
        assert_true(rk_now_ns() < end);
        sched_yield();
    }
}

/* LL lanes with slots larger than the poll window (256 bytes): messages
 * of every length around the window and the slot's end come back whole
 * (the rest of a long one is a second sweep), in batches that wrap the
 * lane, and a long one costs two reads. */
static void
test_ll_long_messages(void **state)
{
    inst in;
    static unsigned char p[1024], buf[1024]; /* p: 16 offsets + 960 */
    static const uint32_t lens[] = { 0, 1, 3, 4, 5, 188, 191, 192, 193, 196,
        200, 255, 256, 257, 500, 959, 960 };
    const uint32_t n = sizeof(lens) / sizeof(lens[0]);
    rk_dev_u64 a[5], b[5];
    (void)state;

    for (size_t i = 0; i < sizeof(p); i++)
        p[i] = (unsigned char)(i * 7 + 1);
    inst_make_slots(&in, &rk_dev_host_kernel_rk_echo, 1, 1, 0, 8, 4, 1024);
    inst_start(&in, 1);
    rk__dh_post(&in.d, RK_DEV_CMD_RUN);
    for (int round = 0; round < 3; round++) {
        uint32_t sent = 0, got = 0;
        while (got < n) {
            /* Up to the lane's 8 slots ahead (sweeps wrap the lane); a
             * slot whose reply came may not be handed back yet: then the
             * next send waits. */
            while (sent < n && sent - got < 8) {
                rk_msg_header h;
                memset(&h, 0, sizeof(h));
                h.type_id = 3;
                int rc = rk__dh_send(&in.d, 0, &h, p + sent, lens[sent]);
                if (rc == RK_EFULL)
                    break;
                assert_int_equal(rc, RK_OK);
                sent++;
            }
            size_t len = recv_frame(&in, 0, buf, sizeof(buf));
            assert_int_equal(len, 64 + lens[got]);
            assert_memory_equal(buf + 64, p + got, lens[got]);
            got++;
        }
    }
    inst_end(&in);

    /* One long message alone: the window sweep, then its rest. 64 slots:
     * the block never re-reads the output lane's head here, so the count
     * is the input's alone. */
    inst_make_slots(&in, &rk_dev_host_kernel_rk_echo, 1, 1, 0, 64, 4, 1024);
    inst_start(&in, 1);
    rk__dh_post(&in.d, RK_DEV_CMD_RUN);
    send_bytes(&in, 0, 3, p, 64);
    assert_int_equal(recv_frame(&in, 0, buf, sizeof(buf)), 128);
    rk_dev_pcie_get(0, b);
    pcie_wait(0, b[1], b[2] + 2, a);
    send_bytes(&in, 0, 3, p, 900);
    assert_int_equal(recv_frame(&in, 0, buf, sizeof(buf)), 964);
    assert_memory_equal(buf + 64, p, 900);
    pcie_wait(0, a[1] + 1, 0, b);
    assert_int_equal(b[0] - a[0], 2);
    assert_int_equal(b[4] - a[4], 0);
    inst_end(&in);
}

/* PCIe accounting (issue 24, docs/cuda-data-path.md, "Counting"): after a
 * warm-up, one request and its reply on an idle block cost at most one
 * device read of host-mapped memory and no system fence (the old
 * protocol: 2 or 3 reads, the tail, the slot and at times the command,
 * and 1 fence); an idle poll costs one read (old: 1.125); 64 round trips
 * cost one read each plus the output lane's head, re-read once per lap,
 * and the command where messages came back to back (old: 144 reads, 64
 * fences). */
static void
test_pcie_round_trip(void **state)
{
    inst in;
    unsigned char buf[256];
    rk_dev_u64 a[5], b[5];
    const uint32_t cap = 8;
    (void)state;

    inst_make(&in, &rk_dev_host_kernel_rk_echo, 1, 1, 0, cap, 4);
    inst_start(&in, 1);
    rk__dh_post(&in.d, RK_DEV_CMD_RUN);
    rk_dev_pcie_get(0, a);
    for (int i = 0; i < 3; i++) {
        send_bytes(&in, 0, 1, "w", 1);
        assert_int_equal(recv_frame(&in, 0, buf, sizeof(buf)), 65);
    }
    /* Idle again: the passes after the warm-up's last message are over. */
    pcie_wait(0, a[1] + 3, 0, b);
    pcie_wait(0, b[1], b[2] + 2, a);

    send_bytes(&in, 0, 1, "r", 1);
    assert_int_equal(recv_frame(&in, 0, buf, sizeof(buf)), 65);
    pcie_wait(0, a[1] + 1, 0, b);
    print_message("one round trip: %llu device read(s) of mapped memory, "
                  "%llu system fence(s)\n",
        (unsigned long long)(b[0] - a[0]), (unsigned long long)(b[4] - a[4]));
    assert_true(b[0] - a[0] <= 1);
    assert_int_equal(b[4] - a[4], 0);

    /* Idle: every poll is one read (the command comes with it). */
    pcie_wait(0, b[1], b[2] + 64, a);
    print_message("idle: %llu poll(s), %llu read(s)\n",
        (unsigned long long)(a[2] - b[2]), (unsigned long long)(a[3] - b[3]));
    assert_true(a[3] - b[3] <= a[2] - b[2]);
    assert_int_equal(a[4], b[4]);

    /* Many: the output lane's head is re-read once per lap at most. */
    for (int i = 0; i < 64; i++) {
        send_bytes(&in, 0, 1, "m", 1);
        assert_int_equal(recv_frame(&in, 0, buf, sizeof(buf)), 65);
    }
    pcie_wait(0, a[1] + 64, 0, b);
    print_message("64 round trips: %llu read(s), %llu fence(s)\n",
        (unsigned long long)(b[0] - a[0]), (unsigned long long)(b[4] - a[4]));
    /* One read each, the output head once per lap, and the command word
     * once per RK_DEV_CMD_EVERY messages that came back to back (no idle
     * poll between them brought the command). */
    assert_true(b[0] - a[0] <= 64 + 64 / cap + 64 / RK_DEV_CMD_EVERY + 1);
    assert_int_equal(b[4] - a[4], 0);

    inst_end(&in);
}

/* Lane capacity (issue 24): by default at least two of a block's batches
 * (at least 16 slots while a lane stays small); an explicit one must be a
 * power of two holding two batches, in bounded memory. */
static void
test_lane_capacity(void **state)
{
    uint32_t cap = 0;
    (void)state;
    assert_int_equal(rk__dh_lane_capacity(64, 256, 0, &cap), RK_OK);
    assert_int_equal(cap, 128);
    assert_int_equal(rk__dh_lane_capacity(4, 256, 0, &cap), RK_OK);
    assert_int_equal(cap, 16);
    /* 16 KB slots: the stage holds a batch of 1 per block. */
    assert_int_equal(rk__dh_lane_capacity(64, 16384, 0, &cap), RK_OK);
    assert_int_equal(cap, 16);
    /* 16 MB slots: two slots, the least that holds two batches. */
    assert_int_equal(rk__dh_lane_capacity(64, 16u << 20, 0, &cap), RK_OK);
    assert_int_equal(cap, 2);
    assert_int_equal(rk__dh_lane_capacity(8, 256, 32, &cap), RK_OK);
    assert_int_equal(cap, 32);
    assert_int_equal(rk__dh_lane_capacity(8, 256, 24, &cap), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "power of two"));
    assert_int_equal(rk__dh_lane_capacity(8, 256, 8, &cap), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "at least 16"));
    assert_int_equal(
        rk__dh_lane_capacity(1, 16u << 20, 1u << 6, &cap), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "per lane"));
}

static void
test_bad_config(void **state)
{
    rk__dh_cfg cfg
        = { .nblocks = 1, .nin = 1, .capacity = 3, .slot_size = 128 };
    (void)state;
    assert_int_equal(rk__dh_size(&cfg), 0);
    assert_non_null(strstr(rk_errdetail(), "power of two"));
    cfg.capacity = 4;
    cfg.slot_size = 64;
    assert_int_equal(rk__dh_check(&cfg), RK_EINVAL);
    cfg.slot_size = 128;
    cfg.nin = RK_DEV_MAX_IN + 1;
    assert_int_equal(rk__dh_check(&cfg), RK_EINVAL);
    cfg.nin = 1;
    assert_int_equal(rk__dh_check(&cfg), RK_OK);
}

/* ------------------------------------------------ kernel to kernel */
/*
 * Kernel-to-kernel lanes (ringkernel/dev_k2k.h) between two device
 * kernels on CPU threads: the same loop and test kernels NVRTC compiles,
 * with K2K lanes whose index words use the GPU-scope orders (the same
 * C11 acquire/release here, so TSan checks the protocol).
 *
 * What it proves: messages cross between two kernels' blocks through K2K
 * lanes in both directions with no host hop (the host only feeds the
 * first hop and reads the last); a full lane holds the sender back
 * (BLOCK) without losing or reordering anything; kargs.send_route sends a
 * kernel's replies on its route; a STOPped target drains its K2K lanes;
 * a sender to a target that exited is refused and counts it, and what it
 * queued before it learnt is counted from the lane (none silently lost).
 */

_Static_assert(RK_DEV_MSG_F_HOST == RK_MSG_F_HOST, "host flag");

#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define SLOW_BUILD 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLOW_BUILD 1
#endif
#if defined(SLOW_BUILD)
#define HOPS 200u
#else
#define HOPS 1000u
#endif

/* A pong payload: hop count, first and last device timestamps. */
static void
pong_payload(unsigned char p[20], uint32_t hops)
{
    memset(p, 0, 20);
    p[0] = (unsigned char)hops;
    p[1] = (unsigned char)(hops >> 8);
    p[2] = (unsigned char)(hops >> 16);
    p[3] = (unsigned char)(hops >> 24);
}

static uint64_t
le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Sends on block 0's host lane, waiting (with a deadline) for room. */
static void
send_wait(inst *in, uint32_t type, const void *p, size_t n)
{
    rk_msg_header h;
    uint64_t dl = deadline();
    int rc;

    memset(&h, 0, sizeof(h));
    h.magic = RK_MSG_MAGIC;
    h.version = RK_MSG_VERSION;
    h.type_id = type;
    while ((rc = rk__dh_send(&in->d, 0, &h, p, n)) == RK_EFULL) {
        assert_true(rk_now_ns() < dl);
        sched_yield();
    }
    assert_int_equal(rc, RK_OK);
}

static void
wait_processed(inst *in, uint64_t n)
{
    rk__dh_status st;
    uint64_t dl = deadline();

    for (;;) {
        rk__dh_status_get(&in->d, &st);
        if (st.processed >= n)
            return;
        assert_true(rk_now_ns() < dl);
        sched_yield();
    }
}

/* A (ka) with route 0 wired to input lane 1 of B (kb), both started and
 * running: 1 block each, lanes of 4 slots, batches of 2. back: B's route
 * 0 is wired to A's lane 1 too. */
static void
pair_start(inst *a, const rk_dev_host_kernel *ka, inst *b,
    const rk_dev_host_kernel *kb, int back, uint32_t send_route)
{
    inst_make(a, ka, 1, back ? 2 : 1, 1, 4, 2);
    inst_make(b, kb, 1, 2, back ? 1 : 0, 4, 2);
    assert_int_equal(rk__dh_connect(&a->d, 0, 0, &b->d, 0, 1), RK_OK);
    if (back)
        assert_int_equal(rk__dh_connect(&b->d, 0, 0, &a->d, 0, 1), RK_OK);
    a->d.kargs.send_route = send_route;
    inst_start(a, 1);
    inst_start(b, 1);
    rk__dh_post(&a->d, RK_DEV_CMD_RUN);
    rk__dh_post(&b->d, RK_DEV_CMD_RUN);
}

/* Two rk_pong kernels, each one's route 0 wired to the other's input
 * lane 1: four messages (two fed to each) bounce HOPS times between
 * them, through lanes of 4 slots, so the lanes run full and the senders
 * wait. Each message comes back to the host exactly once, from the
 * kernel it was fed to, with its device timestamps in order. (A cycle of
 * routes is a cycle of bounded queues: with batches of 2, six messages in
 * flight can fill both lanes while each block holds a handled message of
 * its batch, and both senders would wait forever; docs/cuda.md.) */
static void
test_k2k_ping_pong(void **state)
{
    inst a, b;
    unsigned char p[20], buf[256];
    rk__dh_status st;
    (void)state;

    pair_start(&a, &rk_dev_host_kernel_rk_pong, &b, &rk_dev_host_kernel_rk_pong,
        1, 0);
    pong_payload(p, HOPS);
    for (int i = 0; i < 2; i++) {
        p[19] = (unsigned char)i; /* not overwritten: t1 is bytes 12..19 */
        send_wait(&a, 40 + (uint32_t)i, p, 20);
        send_wait(&b, 50 + (uint32_t)i, p, 20);
    }
    for (int k = 0; k < 2; k++) {
        inst *in = k == 0 ? &a : &b;
        int seen[2] = { 0, 0 };
        for (int i = 0; i < 2; i++) {
            rk_msg_header h;
            assert_int_equal(recv_frame(in, 0, buf, sizeof(buf)), 64 + 20);
            memcpy(&h, buf, sizeof(h));
            uint32_t t = h.type_id - (k == 0 ? 40u : 50u);
            assert_true(t < 2);
            assert_true(h.flags & RK_MSG_F_HOST); /* rk_dev_reply_host */
            seen[t]++;
            assert_int_equal(buf[64], 0); /* every hop spent */
            assert_int_equal(buf[65], 0);
            uint64_t t0 = le64(buf + 68), t1 = le64(buf + 76);
            assert_true(t0 != 0);
            assert_true(t1 >= t0);
        }
        assert_true(seen[0] == 1 && seen[1] == 1);
    }
    inst_stop(&a);
    inst_stop(&b);
    /* Each block handled every message of both groups on its turns. */
    rk__dh_status_get(&a.d, &st);
    assert_int_equal(st.processed, 2 * (HOPS + 1));
    assert_int_equal(st.sent, st.processed);
    assert_int_equal(st.errors, 0);
    rk__dh_status_get(&b.d, &st);
    assert_int_equal(st.processed, 2 * (HOPS + 1));
    assert_int_equal(st.errors, 0);
    inst_join(&a);
    inst_join(&b);
}

/* kargs.send_route: A (rk_echo) replies on its route, so what the host
 * sends to A comes back from B; A's output lane stays empty. In order. */
static void
test_k2k_send_route(void **state)
{
    inst a, b;
    unsigned char buf[256];
    size_t len;
    rk__dh_status st;
    (void)state;

    pair_start(&a, &rk_dev_host_kernel_rk_echo, &b, &rk_dev_host_kernel_rk_echo,
        0, 1);
    for (unsigned char i = 0; i < 30; i++) {
        send_wait(&a, 3, &i, 1);
        assert_int_equal(recv_frame(&b, 0, buf, sizeof(buf)), 65);
        assert_int_equal(buf[64], i);
    }
    inst_stop(&a);
    inst_stop(&b);
    assert_int_equal(rk__dh_recv(&a.d, 0, buf, sizeof(buf), &len), RK_EEMPTY);
    rk__dh_status_get(&a.d, &st);
    assert_int_equal(st.sent, 30);
    inst_join(&a);
    inst_join(&b);
}

/* A STOPped target drains its K2K lane (what A forwarded while B was
 * paused is answered before B exits); then B is gone: A's next sends fill
 * the lane (4 slots) and the rest are refused and counted in A's errors.
 * The 4 left in the lane are what the host counts at teardown
 * (rk_k2k_left): 4 + 6 = the 10 sent, none silently lost. */
static void
test_k2k_stopped_target(void **state)
{
    inst a, b;
    unsigned char p[20], buf[256];
    rk__dh_status st;
    (void)state;

    pair_start(&a, &rk_dev_host_kernel_rk_pong, &b, &rk_dev_host_kernel_rk_echo,
        0, 0);
    rk__dh_post(&b.d, RK_DEV_CMD_PAUSE);
    assert_int_equal(
        rk__dh_wait_ack(&b.d, RK_DEV_ACK_PAUSED, deadline()), RK_OK);
    pong_payload(p, 1);
    for (int i = 0; i < 3; i++)
        send_wait(&a, 7, p, 20);
    wait_processed(&a, 3); /* the three wait in B's K2K lane */
    inst_stop(&b);
    for (int i = 0; i < 3; i++)
        assert_int_equal(recv_frame(&b, 0, buf, sizeof(buf)), 64 + 20);
    rk__dh_status_get(&b.d, &st);
    assert_int_equal(st.processed, 3);

    for (int i = 0; i < 10; i++)
        send_wait(&a, 8, p, 20);
    wait_processed(&a, 13);
    inst_stop(&a);
    rk__dh_status_get(&a.d, &st);
    assert_int_equal(st.sent, 3 + 4);
    assert_int_equal(st.errors, 6);
    {
        /* Both kernels returned: the lane may be read (on a GPU, copied
         * out of device memory). */
        rk_ring_ctrl *c = b.d.in[1].ctrl;
        uint64_t head = rk_ring_load_acquire(&c->head);
        uint64_t tail = rk_ring_load_acquire(&c->tail);
        assert_true((head & RK_K2K_CLOSED) != 0);
        assert_int_equal(rk_k2k_left(head, tail), 4);
    }
    inst_join(&a);
    inst_join(&b);
}

/* K2K: rk_fwd (A) sends on route 0 into input lane 1 of rk_echo (B); B
 * replies to the host. A's publish goes to its output lane with the topic
 * bits. Oversized payloads are refused with RK_EMSGSIZE, not written. */
static void
test_k2k_and_publish(void **state)
{
    inst a, b;
    unsigned char buf[256], p[3] = { 0x7f, 1, 2 };
    rk_msg_header h;
    rk__dh_status st;
    (void)state;

    inst_make(&a, &rk_dev_host_kernel_rk_fwd, 1, 1, 1, 4, 2);
    inst_make(&b, &rk_dev_host_kernel_rk_echo, 1, 2, 0, 4, 2);
    assert_int_equal(rk__dh_connect(&a.d, 0, 0, &b.d, 0, 0), RK_EINVAL);
    assert_int_equal(rk__dh_connect(&a.d, 0, 0, &b.d, 0, 1), RK_OK);
    inst_start(&a, 1);
    inst_start(&b, 1);
    rk__dh_post(&a.d, RK_DEV_CMD_RUN);
    rk__dh_post(&b.d, RK_DEV_CMD_RUN);
    for (int i = 0; i < 20; i++) {
        p[1] = (unsigned char)i;
        send_bytes(&a, 0, 5, p, 3);
        assert_int_equal(recv_frame(&b, 0, buf, sizeof(buf)), 67);
        assert_int_equal(buf[64], 0x80); /* A added 1 */
        assert_int_equal(buf[65], i);
        memcpy(&h, buf, sizeof(h));
        assert_int_equal(h.type_id, 5);
        assert_int_equal(recv_frame(&a, 0, buf, sizeof(buf)), 67);
        memcpy(&h, buf, sizeof(h));
        assert_true(h.flags & RK_DEV_MSG_F_TOPIC);
        assert_int_equal(h.flags >> RK_DEV_MSG_TOPIC_SHIFT, 3);
        assert_int_equal(buf[65], i);
    }
    inst_stop(&a);
    inst_stop(&b);
    rk__dh_status_get(&a.d, &st);
    assert_int_equal(st.processed, 20);
    assert_int_equal(st.sent, 40);
    rk__dh_status_get(&b.d, &st);
    assert_int_equal(st.processed, 20);
    inst_join(&a);
    inst_join(&b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_k2k_and_publish),
        cmocka_unit_test(test_staged_batch),
        cmocka_unit_test(test_stage_plan),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_lane_capacity),
        cmocka_unit_test(test_pcie_round_trip),
        cmocka_unit_test(test_ll_long_messages),
        cmocka_unit_test(test_warp_kernel),
        cmocka_unit_test(test_k2k_ping_pong),
        cmocka_unit_test(test_k2k_send_route),
        cmocka_unit_test(test_k2k_stopped_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
