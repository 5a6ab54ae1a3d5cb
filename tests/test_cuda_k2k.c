/*
 * rk_connect between two cuda kernels, carried on the device (K2K lanes in
 * device memory, src/backend/cuda/k2k.c), through the public runtime API
 * and the backend's real host code. By default on the test-only stand-in
 * driver (tests/fake_cuda: the host build of the same kernels on CPU
 * threads, device memory that the host cannot read); with
 * RK_TEST_CUDA_REAL=1 on the real driver (tools/gpu-check.sh).
 *
 * What it proves: a request goes A -> B -> host and A -> B -> A with no
 * relay hop (the target's inbox is never offered a frame: stats.offered
 * stays 0 while it processes every one); a route whose kernels cannot be
 * resident together is refused at launch naming both, with nothing left
 * running; a sender to a target that was terminated is refused and
 * counts it (errors), never waiting forever; a handler that fails on a
 * message that came on a K2K lane (device memory) has that message
 * dead-lettered, copied out of device memory, like any failed message;
 * rk_disconnect of a route carried on the device by running kernels is
 * refused (RK_EBUSY), and takes effect once one end has ended.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_helpers.h"
#include "memory/mem.h"
#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

#define T_LONG RT_LONG

static char *kernels_src;
static int real_gpu;


static rk_runtime *
pair(const char *ea, uint32_t ga, const char *eb, uint32_t gb, int back)
{
    rk_runtime *rt = NULL;
    rk_runtime_config cfg = { .no_static_kernels = true, .backend = "cuda" };
    const char *ids[2] = { "a", "b" }, *entry[2] = { ea, eb };
    uint32_t grid[2] = { ga, gb };

    assert_int_equal(rk_runtime_create(&rt, &cfg), RK_OK);
    for (int i = 0; i < 2; i++) {
        rk_kernel_def def = { .id = ids[i], .handler = rt_ignore_handler };
        def.config.device_source = kernels_src;
        def.config.device_entry = entry[i];
        def.config.device_source_name = "test_kernels.cu";
        def.config.grid_size = grid[i];
        def.config.block_size = 64;
        def.config.batch = 8;
        def.config.max_payload = 128;
        assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    }
    assert_int_equal(rk_connect(rt, "a", "b"), RK_OK);
    if (back)
        assert_int_equal(rk_connect(rt, "b", "a"), RK_OK);
    return rt;
}

/* pair(), both launched (a first) and activated; *a is kernel a. */
static rk_runtime *
running(const char *ea, uint32_t ga, const char *eb, uint32_t gb, int back,
    rk_kernel *a)
{
    rk_runtime *rt = pair(ea, ga, eb, gb, back);

    assert_int_equal(rk_kernel_launch(rt, "a"), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "b"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "a"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "b"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "a", a), RK_OK);
    return rt;
}

/* Waits (deadline, no timing) until kernel id processed n. */
static void
wait_processed(rk_runtime *rt, const char *id, uint64_t n)
{
    uint64_t dl = rk_now_ns() + (uint64_t)T_LONG;
    while (rt_stats(rt, id).processed < n) {
        assert_true(rk_now_ns() < dl);
        sched_yield();
    }
}

/* A (rk_echo) -> B (rk_echo) -> host: every request A answers goes to B
 * on the device; B's answers reach the host in order. B's inbox never
 * saw one (offered 0): the relay forwarded none. A's output is empty. */
static void
test_a_b_host(void **state)
{
    rk_runtime *rt;
    rk_kernel a, b;
    unsigned char buf[128];
    size_t len;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    rt = running("rk_echo", 1, "rk_echo", 1, 0, &a);
    assert_int_equal(rk_kernel_lookup(rt, "b", &b), RK_OK);
    for (unsigned char i = 0; i < 40; i++)
        assert_int_equal(rk_send(rt, a, 9, &i, 1, 128, T_LONG), RK_OK);
    for (unsigned char i = 0; i < 40; i++) {
        assert_int_equal(
            rk_recv(rt, b, NULL, buf, sizeof(buf), &len, T_LONG), RK_OK);
        assert_int_equal(len, 1);
        assert_int_equal(buf[0], i);
    }
    assert_int_equal(
        rk_recv(rt, a, NULL, buf, sizeof(buf), &len, 0), RK_ETIMEDOUT);
    /* Counters are final once the kernels exited. */
    assert_int_equal(rk_kernel_terminate(rt, "a", T_LONG), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "b", T_LONG), RK_OK);
    assert_int_equal(rt_stats(rt, "a").processed, 40);
    assert_int_equal(rt_stats(rt, "a").sent, 40);
    assert_int_equal(rt_stats(rt, "b").processed, 40);
    assert_int_equal(rt_stats(rt, "b").offered, 0); /* no relay hop */
    rk_runtime_destroy(rt);
}

/* A <-> B (rk_pong both ways, grids of 2): a message fed to A bounces
 * between the two kernels' blocks on the device 2 x 50 times and comes
 * back to the host from A (rk_dev_reply_host: for the host although A's
 * output is routed), the hop count spent and the device timestamps in
 * order. Only the host's sends were offered to A; none to B. */
static void
test_a_b_a(void **state)
{
    rk_runtime *rt;
    rk_kernel a;
    unsigned char p[20] = { 100 }, buf[128];
    size_t len;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    rt = running("rk_pong", 2, "rk_pong", 2, 1, &a);
    for (int i = 0; i < 4; i++)
        assert_int_equal(rk_send(rt, a, 5, p, 20, 128, T_LONG), RK_OK);
    for (int i = 0; i < 4; i++) {
        uint64_t t0 = 0, t1 = 0;
        assert_int_equal(
            rk_recv(rt, a, NULL, buf, sizeof(buf), &len, T_LONG), RK_OK);
        assert_int_equal(len, 20);
        assert_int_equal(buf[0], 0);
        for (int k = 7; k >= 0; k--) {
            t0 = t0 << 8 | buf[4 + k];
            t1 = t1 << 8 | buf[12 + k];
        }
        assert_true(t0 != 0 && t1 >= t0);
    }
    assert_int_equal(rk_kernel_terminate(rt, "a", T_LONG), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "b", T_LONG), RK_OK);
    assert_int_equal(rt_stats(rt, "a").offered, 4);
    assert_int_equal(rt_stats(rt, "a").processed, 4 * 51);
    assert_int_equal(rt_stats(rt, "b").offered, 0);
    assert_int_equal(rt_stats(rt, "b").processed, 4 * 50);
    rk_runtime_destroy(rt);
}

/* Bad input: a route whose kernels fit the device alone but not together
 * (the stand-in: 2 SMs x 2 blocks). Launching either end is refused with
 * RK_ENOTSUP naming both, nothing running or allocated: the other then
 * launches alone, and after the runtime is gone no free is left waiting
 * for a resident kernel. */
static void
test_route_not_coresident(void **state)
{
    rk_runtime *rt;
    const char *d;
    (void)state;
    if (!cuda_have_nvrtc() || real_gpu)
        skip(); /* the stand-in's device size */

    rt = pair("rk_echo", 3, "rk_echo", 2, 0);
    assert_int_equal(rk_kernel_launch(rt, "a"), RK_ENOTSUP);
    d = rk_errdetail();
    assert_non_null(strstr(d, "'a'"));
    assert_non_null(strstr(d, "'b'"));
    assert_non_null(strstr(d, "device route"));
    assert_int_equal(rk_kernel_launch(rt, "b"), RK_ENOTSUP);
    assert_non_null(strstr(rk_errdetail(), "'a'"));
    assert_int_equal(rk_disconnect(rt, "a"), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "b"), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "b", T_LONG), RK_OK);
    rk_runtime_destroy(rt);
    assert_int_equal(rk__mem_deferred(), 0);
}

/* The target was terminated (it drained and exited, closing its lane):
 * A's output fills the K2K lane (16 slots, dead-lettered at teardown),
 * then goes through the relay, where the runtime refuses it (the target
 * is terminated): 4 dead letters with the refusal's code, counted in A's
 * errors and not as sent. A never waits forever and terminates. */
static void
test_send_to_terminated_target(void **state)
{
    rk_runtime *rt;
    rk_kernel a;
    rk_dead_letter dl;
    unsigned char p[20] = { 1 }, buf[128];
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    rt = running("rk_echo", 1, "rk_echo", 1, 0, &a);
    assert_int_equal(rk_kernel_terminate(rt, "b", T_LONG), RK_OK);
    for (int i = 0; i < 20; i++)
        assert_int_equal(rk_send(rt, a, 5, p, 20, 128, T_LONG), RK_OK);
    wait_processed(rt, "a", 20);
    assert_int_equal(rk_kernel_terminate(rt, "a", T_LONG), RK_OK);
    assert_int_equal(rt_stats(rt, "a").sent, 16);
    assert_int_equal(rt_stats(rt, "a").errors, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(
            rk_dead_letter_recv(rt, &dl, buf, sizeof(buf), T_LONG), RK_OK);
        assert_string_equal(dl.kernel_id, "a");
        assert_int_equal(dl.reason, RK_DEAD_FAILED);
        assert_int_not_equal(dl.error, RK_OK);
    }
    assert_int_equal(
        rk_dead_letter_recv(rt, &dl, buf, sizeof(buf), 0), RK_ETIMEDOUT);
    rk_runtime_destroy(rt);
}

/* A (rk_echo) -> B (rk_fail) on the device: B fails on the message A
 * forwarded (first byte 0xff). It is in B's K2K lane, in device memory:
 * the host copies it out and it is dead-lettered once, with B's error,
 * as a message that failed on the host lane is. */
static void
test_k2k_failed_dead_lettered(void **state)
{
    rk_runtime *rt;
    rk_kernel a;
    rk_dead_letter dl;
    unsigned char bad[3] = { 0xff, 1, 2 }, buf[128];
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    rt = running("rk_echo", 1, "rk_fail", 1, 0, &a);
    assert_int_equal(rk_send(rt, a, 5, bad, 3, 128, T_LONG), RK_OK);
    assert_int_equal(rk_kernel_wait(rt, "b", T_LONG), RK_OK);
    rt_expect_dead(rt, "b", RK_DEAD_FAILED, RK_EINVAL, bad, 3);
    assert_int_equal(rt_stats(rt, "b").dead_lettered, 1);
    assert_int_equal(rk_kernel_terminate(rt, "a", T_LONG), RK_OK);
    assert_int_equal(
        rk_dead_letter_recv(rt, &dl, buf, sizeof(buf), 0), RK_ETIMEDOUT);
    rk_runtime_destroy(rt);
}

/* rk_disconnect of a route the device carries between running kernels
 * would leave the sender writing its target's lane: refused with
 * RK_EBUSY naming both, and the route still works; once the target has
 * ended, the disconnect is taken and A's output goes to the host. */
static void
test_disconnect_running(void **state)
{
    rk_runtime *rt;
    rk_kernel a, b;
    unsigned char p = 7, buf[128];
    size_t len;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    rt = running("rk_echo", 1, "rk_echo", 1, 0, &a);
    assert_int_equal(rk_disconnect(rt, "a"), RK_EBUSY);
    assert_non_null(strstr(rk_errdetail(), "'a' -> 'b'"));
    /* Still wired: A's answer reaches the host from B. */
    assert_int_equal(rk_kernel_lookup(rt, "b", &b), RK_OK);
    assert_int_equal(rk_send(rt, a, 5, &p, 1, 128, T_LONG), RK_OK);
    assert_int_equal(rk_recv(rt, b, NULL, buf, 128, &len, T_LONG), RK_OK);
    assert_int_equal(buf[0] + len, 8);
    assert_int_equal(rk_kernel_terminate(rt, "b", T_LONG), RK_OK);
    assert_int_equal(rk_disconnect(rt, "a"), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "a", T_LONG), RK_OK);
    rk_runtime_destroy(rt);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_b_host),
        cmocka_unit_test(test_a_b_a),
        cmocka_unit_test(test_route_not_coresident),
        cmocka_unit_test(test_send_to_terminated_target),
        cmocka_unit_test(test_k2k_failed_dead_lettered),
        cmocka_unit_test(test_disconnect_running),
    };
    return cuda_sim_run("test_cuda_k2k", tests,
        sizeof(tests) / sizeof(tests[0]), FAKE_CUDA_LIB, "tests/kernels/test_kernels.cu", &kernels_src, &real_gpu);
}
