/*
 * The device persistent loop (ringkernel/dev_kernel.h), compiled as host C
 * from the same source NVRTC compiles (tests/kernels/test_kernels.cu), run
 * on CPU threads (one per block) against real ring_proto.h lanes and the
 * control block, driven by the backend's host half (devhost.c).
 *
 * What this proves: the loop's protocol (HOLD/RUN/PAUSE/STOP safe points,
 * drain on STOP, failure exit, counters, K2K routes and lanes at GPU
 * scope between two kernels, publish) and its
 * memory orders under the C11 model (TSan build). What it cannot prove:
 * the PTX memory model, PCIe ordering, or a block of more than one thread
 * (docs/cuda.md).
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

/* The two envelopes must be one layout. */
#define SAME(f)                                                               \
    _Static_assert(                                                           \
        offsetof(rk_dev_msg_header, f) == offsetof(rk_msg_header, f), #f)
SAME(magic);
SAME(version);
SAME(priority);
SAME(type_id);
SAME(flags);
SAME(payload_len);
SAME(message_id);
SAME(correlation_id);
SAME(send_ns);
SAME(sender);
SAME(type_version);
SAME(reserved);
_Static_assert(sizeof(rk_dev_msg_header) == RK_MSG_HEADER_SIZE, "hdr");
_Static_assert(sizeof(rk_dev_ctl_host) == 64, "host line");
_Static_assert(sizeof(rk_dev_ctl_block) == 64, "block line");
_Static_assert(offsetof(rk_dev_ctl, blk) == 64, "first block line");
_Static_assert(
    RK_DEV_CMD_STOP == RK_CTL_STOP && RK_DEV_CMD_PAUSE == RK_CTL_PAUSE,
    "cmd values");
_Static_assert(RK_DEV_ACK_EXITED == RK_CTL_ACK_EXITED
        && RK_DEV_ACK_PAUSED == RK_CTL_ACK_PAUSED,
    "ack values");

#include "dev_host.h"

static void
test_echo_lifecycle(void **state)
{
    inst in;
    unsigned char buf[256];
    rk__dh_status st;
    size_t len;
    (void)state;

    inst_make(&in, &rk_dev_host_kernel_rk_echo, 1, 1, 0, 8, 4);
    inst_start(&in, 1);
    assert_int_equal(
        rk__dh_wait_ack(&in.d, RK_DEV_ACK_HELD, deadline()), RK_OK);
    /* Held: a message queued now is not taken until RUN. */
    send_bytes(&in, 0, 11, "abc", 3);
    rk__dh_status_get(&in.d, &st);
    assert_int_equal(st.ack, RK_DEV_ACK_HELD);
    assert_int_equal(rk__dh_pending(&in.d, 0), 1);
    assert_int_equal(rk__dh_recv(&in.d, 0, buf, sizeof(buf), &len), RK_EEMPTY);

    rk__dh_post(&in.d, RK_DEV_CMD_RUN);
    len = recv_frame(&in, 0, buf, sizeof(buf));
    rk_msg_header h;
    memcpy(&h, buf, sizeof(h));
    assert_int_equal(len, 64 + 3);
    assert_int_equal(h.magic, RK_MSG_MAGIC);
    assert_int_equal(h.type_id, 11);
    assert_int_equal(h.sender, 7);
    assert_int_equal(h.priority, 9);
    assert_int_equal(h.correlation_id.b[0], 11); /* the request's id */
    assert_int_equal(h.correlation_id.b[15], 0x5a);
    assert_memory_equal(buf + 64, "abc", 3);

    /* PAUSE: acknowledged; input waits in the lane. */
    rk__dh_post(&in.d, RK_DEV_CMD_PAUSE);
    assert_int_equal(
        rk__dh_wait_ack(&in.d, RK_DEV_ACK_PAUSED, deadline()), RK_OK);
    send_bytes(&in, 0, 12, "de", 2);
    assert_int_equal(rk__dh_pending(&in.d, 0), 1);
    rk__dh_status_get(&in.d, &st);
    assert_int_equal(st.ack, RK_DEV_ACK_PAUSED);
    assert_int_equal(st.processed, 1);

    /* RUN again: the queued message is handled. */
    rk__dh_post(&in.d, RK_DEV_CMD_RUN);
    len = recv_frame(&in, 0, buf, sizeof(buf));
    assert_int_equal(len, 66);
    assert_memory_equal(buf + 64, "de", 2);

    inst_stop(&in);
    rk__dh_status_get(&in.d, &st);
    assert_int_equal(st.exit_code, 0);
    assert_int_equal(st.processed, 2);
    assert_int_equal(st.sent, 2);
    assert_int_equal(st.errors, 0);
    inst_join(&in);
}

/* STOP drains: everything queued before terminate is handled. The lane
 * holds fewer slots than messages, so the drain must keep taking. */
static void
test_stop_drains(void **state)
{
    inst in;
    unsigned char buf[256];
    rk__dh_status st;
    uint32_t sent = 0, got = 0;
    size_t len;
    (void)state;

    inst_make(&in, &rk_dev_host_kernel_rk_echo, 1, 1, 0, 4, 3);
    inst_start(&in, 1);
    rk__dh_post(&in.d, RK_DEV_CMD_RUN);
    while (sent < 100) {
        rk_msg_header h;
        unsigned char v = (unsigned char)sent;
        memset(&h, 0, sizeof(h));
        if (rk__dh_send(&in.d, 0, &h, &v, 1) == RK_OK)
            sent++;
        while (rk__dh_recv(&in.d, 0, buf, sizeof(buf), &len) == RK_OK) {
            assert_int_equal(buf[64], (unsigned char)got);
            got++;
        }
    }
    rk__dh_post(&in.d, RK_DEV_CMD_STOP);
    while (got < sent) {
        len = recv_frame(&in, 0, buf, sizeof(buf));
        assert_int_equal(buf[64], (unsigned char)got);
        got++;
    }
    assert_int_equal(
        rk__dh_wait_ack(&in.d, RK_DEV_ACK_EXITED, deadline()), RK_OK);
    rk__dh_status_get(&in.d, &st);
    assert_int_equal(st.processed, 100);
    assert_int_equal(rk__dh_pending(&in.d, 0), 0);
    inst_join(&in);
}

/* STOP before any RUN: the block exits without taking anything. */
static void
test_stop_before_run(void **state)
{
    inst in;
    rk__dh_status st;
    (void)state;

    inst_make(&in, &rk_dev_host_kernel_rk_echo, 1, 1, 0, 4, 1);
    send_bytes(&in, 0, 1, "x", 1);
    inst_start(&in, 1);
    inst_stop(&in);
    rk__dh_status_get(&in.d, &st);
    assert_int_equal(st.processed, 0);
    assert_int_equal(rk__dh_pending(&in.d, 0), 1);
    inst_join(&in);
}

/* RUN then STOP before the block saw RUN: activated makes it drain. */
static void
test_stop_overtakes_run(void **state)
{
    inst in;
    unsigned char buf[256];
    rk__dh_status st;
    (void)state;

    inst_make(&in, &rk_dev_host_kernel_rk_echo, 1, 1, 0, 4, 1);
    send_bytes(&in, 0, 1, "x", 1);
    rk__dh_post(&in.d, RK_DEV_CMD_RUN);
    rk__dh_post(&in.d, RK_DEV_CMD_STOP);
    inst_start(&in, 1);
    assert_int_equal(
        rk__dh_wait_ack(&in.d, RK_DEV_ACK_EXITED, deadline()), RK_OK);
    rk__dh_status_get(&in.d, &st);
    assert_int_equal(st.processed, 1);
    assert_int_equal(recv_frame(&in, 0, buf, sizeof(buf)), 65);
    inst_join(&in);
}

/* A failing handler is a fault: FAULTED with the failed message at the
 * head of the lane; a restart verdict skips it and goes on, GIVE_UP ends
 * the block with the handler's code, the messages after it left queued. */
static void
test_handler_fault_and_verdicts(void **state)
{
    inst in;
    unsigned char buf[256];
    rk__dh_status st;
    const unsigned char bad = 0xff;
    uint32_t n;
    int32_t err;
    (void)state;

    inst_make(&in, &rk_dev_host_kernel_rk_fail, 1, 1, 0, 8, 8);
    send_bytes(&in, 0, 1, "a", 1);
    send_bytes(&in, 0, 1, &bad, 1);
    send_bytes(&in, 0, 1, "b", 1);
    inst_start(&in, 1);
    rk__dh_post(&in.d, RK_DEV_CMD_RUN);
    assert_int_equal(
        rk__dh_wait_ack(&in.d, RK_DEV_ACK_FAULTED, deadline()), RK_OK);
    assert_int_equal(rk__dh_fault_of(&in.d, 0, &n, &err), 1);
    assert_int_equal(n, 1);
    assert_int_equal(err, RK_EINVAL);
    assert_int_equal(rk__dh_peek_failed(&in.d, 0, buf, sizeof(buf)), 65);
    assert_int_equal(buf[64], 0xff);
    rk__dh_status_get(&in.d, &st);
    assert_int_equal(st.processed, 1);
    assert_int_equal(st.errors, 1);
    assert_int_equal(rk__dh_pending(&in.d, 0), 2); /* failed one + "b" */

    /* A verdict for another block or fault number is not this one's. */
    rk__dh_verdict(&in.d, RK_DEV_VERDICT(1, 1));
    rk__dh_verdict(&in.d, RK_DEV_VERDICT(0, 1)); /* restart */
    assert_int_equal(recv_frame(&in, 0, buf, sizeof(buf)), 65);
    assert_int_equal(buf[64], 'a');
    assert_int_equal(recv_frame(&in, 0, buf, sizeof(buf)), 65);
    assert_int_equal(buf[64], 'b'); /* the failed one was skipped */

    /* Second fault: give up. */
    send_bytes(&in, 0, 1, &bad, 1);
    send_bytes(&in, 0, 1, "c", 1);
    assert_int_equal(
        rk__dh_wait_ack(&in.d, RK_DEV_ACK_FAULTED, deadline()), RK_OK);
    assert_int_equal(rk__dh_fault_of(&in.d, 0, &n, &err), 1);
    assert_int_equal(n, 2);
    rk__dh_verdict(&in.d, RK_DEV_GIVE_UP);
    assert_int_equal(
        rk__dh_wait_ack(&in.d, RK_DEV_ACK_EXITED, deadline()), RK_OK);
    rk__dh_status_get(&in.d, &st);
    assert_int_equal(st.exit_code, RK_EINVAL);
    assert_int_equal(st.exited, 1);
    assert_int_equal(st.processed, 2);
    assert_int_equal(st.errors, 2);
    assert_int_equal(rk__dh_pending(&in.d, 0), 1); /* "c" */
    assert_int_equal(rk__dh_take_left(&in.d, buf, sizeof(buf), 4), 1);
    assert_int_equal(buf[64], 'c');
    inst_join(&in);
}

/* STOP while faulted ends the block. */
static void
test_stop_while_faulted(void **state)
{
    inst in;
    rk__dh_status st;
    const unsigned char bad = 0xff;
    (void)state;

    inst_make(&in, &rk_dev_host_kernel_rk_fail, 1, 1, 0, 8, 8);
    send_bytes(&in, 0, 1, &bad, 1);
    inst_start(&in, 1);
    rk__dh_post(&in.d, RK_DEV_CMD_RUN);
    assert_int_equal(
        rk__dh_wait_ack(&in.d, RK_DEV_ACK_FAULTED, deadline()), RK_OK);
    inst_stop(&in);
    rk__dh_status_get(&in.d, &st);
    assert_int_equal(st.exit_code, RK_EINVAL);
    inst_join(&in);
}

/* An actor kernel: its own loop keeps state across messages; a fault
 * holding a message restarts the actor (state lost, as on the CPU), and
 * the actor ends the block itself with RK_OK. */
static void
test_actor_kernel(void **state)
{
    inst in;
    unsigned char buf[256], bad = 0xff, end = 0xfe;
    rk__dh_status st;
    (void)state;

    inst_make(&in, &rk_dev_host_kernel_rk_count, 1, 1, 0, 8, 4);
    inst_start(&in, 1);
    rk__dh_post(&in.d, RK_DEV_CMD_RUN);
    for (int i = 1; i <= 3; i++) {
        send_bytes(&in, 0, 1, "x", 1);
        assert_int_equal(recv_frame(&in, 0, buf, sizeof(buf)), 65);
        assert_int_equal(buf[64], i);
    }
    send_bytes(&in, 0, 1, &bad, 1);
    assert_int_equal(
        rk__dh_wait_ack(&in.d, RK_DEV_ACK_FAULTED, deadline()), RK_OK);
    assert_int_equal(rk__dh_peek_failed(&in.d, 0, buf, sizeof(buf)), 65);
    assert_int_equal(buf[64], 0xff);
    rk__dh_verdict(&in.d, RK_DEV_VERDICT(0, 1));
    send_bytes(&in, 0, 1, "y", 1);
    assert_int_equal(recv_frame(&in, 0, buf, sizeof(buf)), 65);
    assert_int_equal(buf[64], 1); /* a new actor: its count starts again */
    send_bytes(&in, 0, 1, &end, 1);
    send_bytes(&in, 0, 1, "z", 1);
    assert_int_equal(
        rk__dh_wait_ack(&in.d, RK_DEV_ACK_EXITED, deadline()), RK_OK);
    rk__dh_status_get(&in.d, &st);
    assert_int_equal(st.exit_code, RK_OK);
    assert_int_equal(st.errors, 1);
    assert_int_equal(rk__dh_pending(&in.d, 0), 1); /* "z" left */
    inst_join(&in);
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

/* Three blocks, three actors, each on its own lanes; the handler is
 * data-parallel (block-shared sum). */
static void
test_blocks_are_actors(void **state)
{
    inst in;
    unsigned char buf[256], p[100];
    (void)state;

    for (int i = 0; i < 100; i++)
        p[i] = (unsigned char)i;
    inst_make(&in, &rk_dev_host_kernel_rk_sum, 3, 1, 0, 8, 4);
    inst_start(&in, 3);
    rk__dh_post(&in.d, RK_DEV_CMD_RUN);
    for (uint32_t b = 0; b < 3; b++)
        send_bytes(&in, b, 2, p, 10 + b);
    for (uint32_t b = 0; b < 3; b++) {
        uint32_t want = 0, got;
        for (uint32_t i = 0; i < 10 + b; i++)
            want += i;
        assert_int_equal(recv_frame(&in, b, buf, sizeof(buf)), 68);
        got = (uint32_t)buf[64] | (uint32_t)buf[65] << 8;
        assert_int_equal(got, want);
    }
    inst_stop(&in);
    inst_join(&in);
}

/* The watchdog: a block that never runs while input waits is reported;
 * a running one is not. */
static void
test_watchdog(void **state)
{
    inst in;
    rk__dh_status st;
    uint32_t beat;
    (void)state;

    inst_make(&in, &rk_dev_host_kernel_rk_echo, 1, 1, 0, 4, 1);
    send_bytes(&in, 0, 1, "x", 1);
    rk__dh_post(&in.d, RK_DEV_CMD_RUN);
    assert_int_equal(rk__dh_watchdog(&in.d, "wd"), RK_OK); /* records */
    assert_int_equal(rk__dh_watchdog(&in.d, "wd"), RK_ETIMEDOUT);
    assert_non_null(strstr(rk_errdetail(), "'wd'"));
    assert_non_null(strstr(rk_errdetail(), "1 message"));

    /* Now it runs: once the heartbeat moves the watchdog is quiet. */
    inst_start(&in, 1);
    rk__dh_status_get(&in.d, &st);
    beat = st.heartbeat;
    do {
        sched_yield();
        rk__dh_status_get(&in.d, &st);
    } while (st.heartbeat == beat);
    assert_int_equal(rk__dh_watchdog(&in.d, "wd"), RK_OK);
    inst_stop(&in);
    inst_join(&in);
}

/* Staging: the host writes a batch and publishes it once; the block
 * stages it, and its outputs (two per message, more than its output stage
 * and its lane hold) go out in order through mid-batch flushes. */
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
    assert_int_equal(rk__dh_pending(&in.d, 0), 0); /* written, unpublished */
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

    mem = aligned_alloc(64, (rk__dh_size(&cfg) + 63) & ~(size_t)63);
    assert_non_null(mem);
    assert_int_equal(rk__dh_place(&d, &cfg, mem, 0, NULL), RK_OK);
    assert_true(d.kargs.stage_bytes <= RK__DH_STAGE_BYTES);
    assert_int_equal(d.kargs.batch, 1);
    assert_int_equal(d.kargs.stage_out, 2);
    rk__dh_fini(&d);
    cfg.slot_size = 256;
    cfg.batch = 64; /* the output lane (4 slots) bounds the output stage */
    free(mem);
    mem = aligned_alloc(64, (rk__dh_size(&cfg) + 63) & ~(size_t)63);
    assert_non_null(mem);
    assert_int_equal(rk__dh_place(&d, &cfg, mem, 0, NULL), RK_OK);
    assert_int_equal(d.kargs.batch, 64);
    assert_int_equal(d.kargs.stage_out, 4);
    assert_int_equal(d.kargs.stage_bytes, 68 * 256);
    rk__dh_fini(&d);
    free(mem);
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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_echo_lifecycle),
        cmocka_unit_test(test_stop_drains),
        cmocka_unit_test(test_stop_before_run),
        cmocka_unit_test(test_stop_overtakes_run),
        cmocka_unit_test(test_handler_fault_and_verdicts),
        cmocka_unit_test(test_stop_while_faulted),
        cmocka_unit_test(test_actor_kernel),
        cmocka_unit_test(test_k2k_and_publish),
        cmocka_unit_test(test_blocks_are_actors),
        cmocka_unit_test(test_watchdog),
        cmocka_unit_test(test_staged_batch),
        cmocka_unit_test(test_stage_plan),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_k2k_ping_pong),
        cmocka_unit_test(test_k2k_send_route),
        cmocka_unit_test(test_k2k_stopped_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
