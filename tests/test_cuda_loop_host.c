/*
 * The device persistent loop (ringkernel/dev_kernel.h), compiled as host C
 * from the same source NVRTC compiles (tests/kernels/test_kernels.cu), run
 * on CPU threads (one per block) against real ring_proto.h lanes and the
 * control block, driven by the backend's host half (devhost.c).
 *
 * This file holds the loop's protocol: HOLD/RUN/PAUSE/STOP safe points,
 * drain on STOP, faults and verdicts, an actor kernel, blocks as actors
 * and the watchdog. test_cuda_loop_lanes.c runs the same loop for its data
 * path: staging, LL lanes and their PCIe counts, one message per warp,
 * lane capacity, and K2K routes and publish between two kernels.
 *
 * What this proves: the loop's protocol and its memory orders under the
 * C11 model (TSan build). What it cannot prove: the PTX memory model,
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

    inst_stop_st(&in, &st);
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
        cmocka_unit_test(test_blocks_are_actors),
        cmocka_unit_test(test_watchdog),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
