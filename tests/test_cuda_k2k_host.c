/*
 * Kernel-to-kernel lanes (ringkernel/dev_k2k.h) between two device
 * kernels, run as host C on CPU threads (one per block) like
 * test_cuda_loop_host: the same loop and test kernels NVRTC compiles,
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
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/devhost.h"
#include "ringkernel/ringkernel.h"

#include "../tests/kernels/test_kernels.cu"

#include "dev_host.h"

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

static void
stop(inst *in)
{
    rk__dh_post(&in->d, RK_DEV_CMD_STOP);
    assert_int_equal(
        rk__dh_wait_ack(&in->d, RK_DEV_ACK_EXITED, deadline()), RK_OK);
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
    stop(&a);
    stop(&b);
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
    stop(&a);
    stop(&b);
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
    stop(&b);
    for (int i = 0; i < 3; i++)
        assert_int_equal(recv_frame(&b, 0, buf, sizeof(buf)), 64 + 20);
    rk__dh_status_get(&b.d, &st);
    assert_int_equal(st.processed, 3);

    for (int i = 0; i < 10; i++)
        send_wait(&a, 8, p, 20);
    wait_processed(&a, 13);
    stop(&a);
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
        cmocka_unit_test(test_k2k_ping_pong),
        cmocka_unit_test(test_k2k_send_route),
        cmocka_unit_test(test_k2k_stopped_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
