/*
 * The cuda backend end to end through the public runtime API.
 *
 * By default it runs on the test-only stand-in driver; with
 * RK_TEST_CUDA_REAL=1 (tools/gpu-check.sh, on a machine with an NVIDIA
 * GPU) the same tests run on the real driver and GPU, skipping the few
 * that steer the stand-in's device attributes.
 *
 * Stand-in mode: the cuda backend's real host code (cuda.c: probe,
 * NVRTC compile through the cache, module load, co-residency, mapped
 * memory, launch, the host relay, commands, acks, teardown) driven through
 * the public runtime API, with the test-only stand-in driver
 * (tests/fake_cuda, loaded through RK_CUDA_DRIVER) running the host build
 * of the same kernel source on CPU threads, one per block.
 *
 * NVRTC is real: the stand-in accepts only images NVRTC produced and
 * finds an entry only if the image defines it. Nothing here ran on a GPU;
 * see docs/cuda-robustness.md for what only a GPU can show.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/nvrtc.h"
#include "cuda_helpers.h"
#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

#define T_LONG RT_LONG

static char *kernels_src;
static int real_gpu; /* RK_TEST_CUDA_REAL=1: the real driver */

static void
reg(rk_runtime *rt, const char *id, const char *entry, uint32_t grid,
    const char *src)
{
    rk_kernel_def def = { .id = id, .handler = rt_ignore_handler };
    def.config.device_source = src ? src : kernels_src;
    def.config.device_entry = entry;
    def.config.device_source_name = "test_kernels.cu";
    def.config.grid_size = grid;
    def.config.block_size = 64;
    def.config.batch = 8;
    def.config.max_payload = 128;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
}

static void
test_probe_and_devices(void **state)
{
    const char *detail;
    rk_device_list *list;
    const rk_device_info *gpu;
    (void)state;

    assert_int_equal(rk_cuda_probe(&detail), RK_CUDA_AVAILABLE);
    assert_int_equal(rk_devices_query(&list), RK_OK);
    assert_int_equal(rk_device_select(list, RK_DEVICE_CUDA, 0, &gpu), RK_OK);
    if (real_gpu) {
        /* Whatever the GPU is, it is not the stand-in, and it can run
         * persistent kernels (compute capability 7.0 or newer). */
        assert_null(strstr(gpu->name, "fake"));
        assert_true(gpu->cc_major >= 7);
        assert_true(gpu->multiprocessors > 0);
    } else {
        assert_non_null(strstr(gpu->name, "fake"));
        assert_int_equal(gpu->cc_major, 9);
        assert_int_equal(gpu->multiprocessors, 2);
    }
    rk_device_list_free(list);
}

/* The lifecycle and the rings: HELD processes nothing, RUN echoes,
 * DEACTIVATE holds input in the inbox, TERMINATE drains. */
static void
test_echo_lifecycle(void **state)
{
    rk_runtime *rt;
    rk_kernel k;
    rk_msg_header h;
    rk_kernel_stats st;
    rk_kernel_state s;
    char buf[128];
    size_t len;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    rt = cuda_test_runtime();
    reg(rt, "echo", "rk_echo", 1, NULL);
    k = cuda_start(rt, "echo");
    for (int i = 0; i < 50; i++) {
        char msg[16];
        int n = snprintf(msg, sizeof(msg), "m%d", i);
        assert_int_equal(
            rk_send(rt, k, 3, msg, (size_t)n, 128, T_LONG), RK_OK);
        assert_int_equal(
            rk_recv(rt, k, &h, buf, sizeof(buf), &len, T_LONG), RK_OK);
        assert_int_equal(len, (size_t)n);
        assert_memory_equal(buf, msg, len);
        assert_int_equal(h.type_id, 3);
        assert_int_equal(h.magic, RK_MSG_MAGIC);
    }
    assert_int_equal(rk_kernel_deactivate(rt, "echo"), RK_OK);
    assert_int_equal(rk_kernel_state_get(rt, "echo", &s), RK_OK);
    assert_int_equal(s, RK_KERNEL_DEACTIVATED);
    assert_int_equal(rk_send(rt, k, 3, "late", 4, 128, T_LONG), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "echo"), RK_OK);
    assert_int_equal(
        rk_recv(rt, k, &h, buf, sizeof(buf), &len, T_LONG), RK_OK);
    assert_memory_equal(buf, "late", 4);
    for (int i = 0; i < 20; i++)
        assert_int_equal(rk_send(rt, k, 3, "x", 1, 128, T_LONG), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "echo", T_LONG), RK_OK);
    assert_int_equal(rk_kernel_state_get(rt, "echo", &s), RK_OK);
    assert_int_equal(s, RK_KERNEL_TERMINATED);
    assert_int_equal(rk_kernel_stats_get(rt, "echo", &st), RK_OK);
    assert_int_equal(st.processed, 71); /* terminate drained all 20 */
    assert_int_equal(st.sent, 71);
    rk_runtime_destroy(rt);
}

/* LL lanes end to end (issue 24): messages shorter and longer than the
 * 256-byte poll window (the rest is a second sweep), sent in bursts so
 * the blocks take whole batches with wide loads, come back whole and in
 * order; on a GPU (tools/gpu-check.sh) this is the PTX path. */
static void
test_ll_message_sizes(void **state)
{
    static const size_t lens[]
        = { 0, 1, 7, 191, 192, 193, 200, 500, 1000, 1999, 2000, 3 };
    static unsigned char p[2048 + 16], buf[2048];
    const size_t nl = sizeof(lens) / sizeof(lens[0]);
    rk_runtime *rt;
    rk_kernel k;
    rk_kernel_def def = { .id = "sizes", .handler = cuda_ignore_handler };
    size_t len;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    for (size_t i = 0; i < sizeof(p); i++)
        p[i] = (unsigned char)(i * 13 + 5);
    rt = cuda_test_runtime();
    def.config.device_source = kernels_src;
    def.config.device_entry = "rk_echo";
    def.config.grid_size = 1;
    def.config.block_size = 64;
    def.config.batch = 8;
    def.config.max_payload = 2000;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "sizes", &k), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "sizes"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "sizes"), RK_OK);
    for (int round = 0; round < 4; round++) {
        for (size_t i = 0; i < nl; i++)
            assert_int_equal(
                rk_send(rt, k, 4, p + i, lens[i], 128, T_LONG), RK_OK);
        for (size_t i = 0; i < nl; i++) {
            assert_int_equal(
                rk_recv(rt, k, NULL, buf, sizeof(buf), &len, T_LONG), RK_OK);
            assert_int_equal(len, lens[i]);
            assert_memory_equal(buf, p + i, lens[i]);
        }
    }
    assert_int_equal(rk_kernel_terminate(rt, "sizes", T_LONG), RK_OK);
    rk_runtime_destroy(rt);
}

/* One message per warp (rk_wecho, blocks of 2 warps on a GPU): bursts
 * come back whole and in message order. */
static void
test_warp_kernel(void **state)
{
    unsigned char reply[128];
    size_t len;
    rk_runtime *rt;
    rk_kernel k;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    rt = cuda_test_runtime();
    reg(rt, "wecho", "rk_wecho", 1, NULL);
    k = cuda_start(rt, "wecho");
    for (int round = 0; round < 5; round++) {
        for (unsigned char i = 0; i < 20; i++) {
            unsigned char msg[3] = { i, (unsigned char)round, 7 };
            assert_int_equal(
                rk_send(rt, k, 5, msg, 1 + i % 3, 128, T_LONG), RK_OK);
        }
        for (unsigned char i = 0; i < 20; i++) {
            assert_int_equal(
                rk_recv(rt, k, NULL, reply, sizeof(reply), &len, T_LONG),
                RK_OK);
            assert_int_equal(len, 1 + i % 3);
            assert_int_equal(reply[0], i);
        }
    }
    assert_int_equal(rk_kernel_terminate(rt, "wecho", T_LONG), RK_OK);
    rk_runtime_destroy(rt);
}

/* TERMINATE of a deactivated kernel still handles everything queued,
 * more than the device lanes hold at once. */
static void
test_terminate_paused_drains(void **state)
{
    rk_runtime *rt;
    rk_kernel k;
    rk_kernel_stats st;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    rt = cuda_test_runtime();
    reg(rt, "pz", "rk_echo", 1, NULL);
    assert_int_equal(rk_kernel_lookup(rt, "pz", &k), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "pz"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "pz"), RK_OK);
    assert_int_equal(rk_kernel_deactivate(rt, "pz"), RK_OK);
    for (int i = 0; i < 40; i++)
        assert_int_equal(rk_send(rt, k, 1, "p", 1, 128, T_LONG), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "pz", T_LONG), RK_OK);
    assert_int_equal(rk_kernel_stats_get(rt, "pz", &st), RK_OK);
    assert_int_equal(st.processed, 40);
    assert_int_equal(st.dead_lettered, 0);
    assert_int_equal(st.sent, 40);
    rk_runtime_destroy(rt);
}

/* A grid of three blocks: three actors share the kernel's inbox. */
static void
test_grid_of_actors(void **state)
{
    rk_runtime *rt;
    rk_kernel k;
    unsigned char p[40], buf[128];
    uint32_t want = 0, got;
    size_t len;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    for (int i = 0; i < 40; i++) {
        p[i] = (unsigned char)i;
        want += (uint32_t)i;
    }
    rt = cuda_test_runtime();
    reg(rt, "sum", "rk_sum", 3, NULL);
    assert_int_equal(rk_kernel_lookup(rt, "sum", &k), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "sum"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "sum"), RK_OK);
    for (int i = 0; i < 30; i++)
        assert_int_equal(rk_send(rt, k, 1, p, 40, 128, T_LONG), RK_OK);
    for (int i = 0; i < 30; i++) {
        assert_int_equal(
            rk_recv(rt, k, NULL, buf, sizeof(buf), &len, T_LONG), RK_OK);
        assert_int_equal(len, 4);
        got = (uint32_t)buf[0] | (uint32_t)buf[1] << 8;
        assert_int_equal(got, want);
    }
    assert_int_equal(rk_kernel_terminate(rt, "sum", T_LONG), RK_OK);
    rk_runtime_destroy(rt);
}

/* A route between two device kernels (carried on the device since issue
 * 24: test_cuda_k2k checks that no frame goes through the relay). */
static void
test_route_through_relay(void **state)
{
    rk_runtime *rt;
    rk_kernel a, b;
    char buf[128];
    size_t len;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    rt = cuda_test_runtime();
    reg(rt, "a", "rk_echo", 1, NULL);
    reg(rt, "b", "rk_echo", 1, NULL);
    assert_int_equal(rk_connect(rt, "a", "b"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "a", &a), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "b", &b), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "a"), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "b"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "a"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "b"), RK_OK);
    assert_int_equal(rk_send(rt, a, 9, "hop", 3, 128, T_LONG), RK_OK);
    assert_int_equal(
        rk_recv(rt, b, NULL, buf, sizeof(buf), &len, T_LONG), RK_OK);
    assert_int_equal(len, 3);
    assert_memory_equal(buf, "hop", 3);
    assert_int_equal(rk_kernel_terminate(rt, "a", T_LONG), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "b", T_LONG), RK_OK);
    rk_runtime_destroy(rt);
}

/* rk_dev_publish: an index the kernel's device_topics names reaches the
 * topic's subscribers (a cpu echo actor), one the list does not name is
 * dead-lettered with RK_ENOTFOUND and counted in the kernel's errors, and
 * a bad name is refused at register. The frame's publish flag must not be
 * taken for a request either (it once shared RK_MSG_F_REQUEST's bit). */
static void
test_device_publish(void **state)
{
    static const char *const topics[] = { "t0" };
    static const char *const bad[] = { "" };
    rk_kernel_def def = { .id = "pub", .handler = rt_ignore_handler };
    rk_kernel_def sd = { .id = "s", .actor = rt_echo_actor };
    rk_runtime *rt;
    rk_kernel p, s;
    rk_kernel_stats st;
    rk_dead_letter dl;
    unsigned char buf[128], msg[3] = { 0, 7, 9 }, odd[2] = { 5, 1 };
    size_t len;
    uint64_t until;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    rt = cuda_test_runtime();
    def.config.device_source = kernels_src;
    def.config.device_entry = "rk_pub";
    def.config.device_source_name = "test_kernels.cu";
    def.config.grid_size = 1;
    def.config.block_size = 64;
    def.config.max_payload = 128;
    def.config.device_topics = bad;
    def.config.ndevice_topics = 1;
    assert_int_equal(rk_runtime_register(rt, &def), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "topic name"));
    def.config.device_topics = topics;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    sd.config.backend = "cpu";
    assert_int_equal(rk_runtime_register(rt, &sd), RK_OK);
    assert_int_equal(rk_subscribe(rt, "s", "t0"), RK_OK);
    s = cuda_start(rt, "s");
    p = cuda_start(rt, "pub");

    assert_int_equal(rk_send(rt, p, 4, msg, 3, 128, T_LONG), RK_OK);
    assert_int_equal(
        rk_recv(rt, s, NULL, buf, sizeof(buf), &len, T_LONG), RK_OK);
    assert_int_equal(len, 3);
    assert_memory_equal(buf, msg, 3);

    assert_int_equal(rk_send(rt, p, 4, odd, 2, 128, T_LONG), RK_OK);
    assert_int_equal(
        rk_dead_letter_recv(rt, &dl, buf, sizeof(buf), T_LONG), RK_OK);
    assert_string_equal(dl.kernel_id, "pub");
    assert_int_equal(dl.reason, RK_DEAD_FAILED);
    assert_int_equal(dl.error, RK_ENOTFOUND);
    until = rk_now_ns() + (uint64_t)T_LONG;
    do {
        assert_int_equal(rk_kernel_stats_get(rt, "pub", &st), RK_OK);
        assert_true(rk_now_ns() < until);
    } while (st.errors < 1 && sched_yield() == 0);
    /* Nothing published reached the kernel's own output. */
    assert_int_equal(rk_recv(rt, p, NULL, buf, sizeof(buf), &len, RK_NO_WAIT),
        RK_ETIMEDOUT);
    cuda_finish(rt, (const char *const[]) { "pub", "s", NULL });
}

/* A device handler error: the kernel FAILS, the failing message is dead
 * lettered with the handler's code. */
static void
test_handler_failure(void **state)
{
    rk_runtime *rt;
    rk_kernel k;
    rk_kernel_state s;
    rk_dead_letter dl;
    unsigned char bad = 0xff, buf[128];
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    rt = cuda_test_runtime();
    reg(rt, "fail", "rk_fail", 1, NULL);
    assert_int_equal(rk_kernel_lookup(rt, "fail", &k), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "fail"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "fail"), RK_OK);
    assert_int_equal(rk_send(rt, k, 1, &bad, 1, 128, T_LONG), RK_OK);
    assert_int_equal(rk_kernel_wait(rt, "fail", T_LONG), RK_OK);
    assert_int_equal(rk_kernel_state_get(rt, "fail", &s), RK_OK);
    assert_int_equal(s, RK_KERNEL_FAILED);
    assert_int_equal(
        rk_dead_letter_recv(rt, &dl, buf, sizeof(buf), T_LONG), RK_OK);
    assert_string_equal(dl.kernel_id, "fail");
    assert_int_equal(dl.reason, RK_DEAD_FAILED);
    assert_int_equal(dl.error, RK_EINVAL);
    assert_int_equal(dl.len, 1);
    assert_int_equal(buf[0], 0xff);
    rk_runtime_destroy(rt);
}

/* A device actor (RK_DEV_ACTOR_KERNEL) under supervision: a restart
 * calls the actor again, so its state starts over; the failed message is
 * dead-lettered. */
static void
test_device_actor_restart(void **state)
{
    rk_runtime *rt;
    rk_kernel k;
    rk_dead_letter dl;
    unsigned char bad = 0xff, buf[128];
    size_t len;
    rk_kernel_def def = { .id = "count", .handler = rt_ignore_handler };
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    rt = cuda_test_runtime();
    def.config.device_source = kernels_src;
    def.config.device_entry = "rk_count";
    def.config.supervision.policy = RK_SUPERVISE_RESTART;
    def.config.supervision.max_restarts = 1;
    def.config.supervision.backoff_ns = 1000;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "count", &k), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "count"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "count"), RK_OK);
    for (int i = 1; i <= 2; i++) {
        assert_int_equal(rk_send(rt, k, 1, "x", 1, 128, T_LONG), RK_OK);
        assert_int_equal(
            rk_recv(rt, k, NULL, buf, sizeof(buf), &len, T_LONG), RK_OK);
        assert_int_equal(buf[0], i);
    }
    assert_int_equal(rk_send(rt, k, 1, &bad, 1, 128, T_LONG), RK_OK);
    assert_int_equal(rk_send(rt, k, 1, "y", 1, 128, T_LONG), RK_OK);
    assert_int_equal(
        rk_recv(rt, k, NULL, buf, sizeof(buf), &len, T_LONG), RK_OK);
    assert_int_equal(buf[0], 1); /* restarted: the count starts again */
    assert_int_equal(
        rk_dead_letter_recv(rt, &dl, buf, sizeof(buf), T_LONG), RK_OK);
    assert_int_equal(dl.reason, RK_DEAD_FAILED);
    assert_int_equal(buf[0], 0xff);
    assert_int_equal(rk_kernel_terminate(rt, "count", T_LONG), RK_OK);
    rk_runtime_destroy(rt);
}

/* Device output longer than max_payload is refused by the relay (dead
 * letter, RK_EMSGSIZE), never written past a host slot. */
static void
test_oversized_device_output(void **state)
{
    rk_runtime *rt;
    rk_kernel k;
    rk_kernel_stats st;
    rk_dead_letter dl;
    unsigned char buf[128];
    size_t len;
    rk_kernel_def def = { .id = "big", .handler = rt_ignore_handler };
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    rt = cuda_test_runtime();
    def.config.device_source = kernels_src;
    def.config.device_entry = "rk_sum"; /* replies with 4 bytes */
    def.config.max_payload = 2;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "big", &k), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "big"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "big"), RK_OK);
    assert_int_equal(rk_send(rt, k, 1, "ab", 2, 128, T_LONG), RK_OK);
    assert_int_equal(
        rk_dead_letter_recv(rt, &dl, buf, sizeof(buf), T_LONG), RK_OK);
    assert_int_equal(dl.error, RK_EMSGSIZE);
    assert_int_equal(
        rk_recv(rt, k, NULL, buf, sizeof(buf), &len, 0), RK_ETIMEDOUT);
    assert_int_equal(rk_kernel_terminate(rt, "big", T_LONG), RK_OK);
    assert_int_equal(rk_kernel_stats_get(rt, "big", &st), RK_OK);
    assert_int_equal(st.errors, 1);
    rk_runtime_destroy(rt);
}

/* Supervision restarts a faulted device kernel: the failing message is
 * dead-lettered, the kernel goes on with the next ones, and after
 * max_restarts it fails. */
static void
test_supervised_restart(void **state)
{
    rk_runtime *rt;
    rk_kernel k;
    rk_kernel_state s;
    rk_kernel_stats st;
    unsigned char bad = 0xff;
    (void)state;

    k = cuda_start_failing(&rt, "sup", kernels_src, 2);
    for (int round = 0; round < 2; round++)
        cuda_fail_round(rt, k, 1);
    assert_int_equal(rk_kernel_stats_get(rt, "sup", &st), RK_OK);
    assert_int_equal(st.restarts, 2);
    /* The third fault is past max_restarts: FAILED. */
    assert_int_equal(rk_send(rt, k, 1, &bad, 1, 128, T_LONG), RK_OK);
    assert_int_equal(rk_kernel_wait(rt, "sup", T_LONG), RK_OK);
    assert_int_equal(rk_kernel_state_get(rt, "sup", &s), RK_OK);
    assert_int_equal(s, RK_KERNEL_FAILED);
    rk_runtime_destroy(rt);
}

/* Bad input at launch: each a clear error, nothing left running, and the
 * kernel can be launched again once fixed. */
static void
test_launch_errors(void **state)
{
    rk_runtime *rt;
    rk_kernel_state s;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    rt = cuda_test_runtime();
    /* A source that does not compile: RK_ECOMPILE naming file:line. */
    reg(rt, "broken", "rk_echo", 1,
        "RK_DEV_HANDLER(h)(rk_dev_ctx *x, const rk_dev_msg *m)\n"
        "{\n    return nonsense(x);\n}\n");
    assert_int_equal(rk_kernel_launch(rt, "broken"), RK_ECOMPILE);
    assert_non_null(strstr(rk_errdetail(), "broken"));
    assert_int_equal(rk_kernel_state_get(rt, "broken", &s), RK_OK);
    assert_int_equal(s, RK_KERNEL_CREATED);

    /* An entry the source does not define. */
    reg(rt, "noentry", "no_such_kernel", 1, NULL);
    assert_int_equal(rk_kernel_launch(rt, "noentry"), RK_ENOTFOUND);
    assert_non_null(strstr(rk_errdetail(), "no_such_kernel"));

    /* A grid that cannot be resident (stand-in: 2 SMs x 2 blocks; a GPU:
     * far fewer than 65535 blocks of 1024 threads). */
    reg(rt, "huge", "rk_echo", real_gpu ? 65535 : 5, NULL);
    assert_int_equal(rk_kernel_launch(rt, "huge"), RK_ENOTSUP);
    assert_non_null(strstr(rk_errdetail(), "resident"));
    reg(rt, "fits", "rk_echo", 4, NULL);
    assert_int_equal(rk_kernel_launch(rt, "fits"), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "fits", T_LONG), RK_OK);

    /* Lanes the device cannot hold (issue 24): not a power of two, less
     * than two batches of a block (batch 8), more mapped memory than a
     * lane may take; each RK_EINVAL at launch naming the numbers, with
     * nothing left running. Two batches exactly is fine. */
    {
        static const struct {
            const char *id;
            uint32_t cap;
            int rc;
            const char *detail;
        } lanes[] = {
            { "lane3", 3, RK_EINVAL, "power of two" },
            { "lane8", 8, RK_EINVAL, "twice the batch of 8" },
            { "lanebig", 1u << 20, RK_EINVAL, "mapped memory per lane" },
            { "lane16", 16, RK_OK, NULL },
        };
        for (size_t i = 0; i < sizeof(lanes) / sizeof(lanes[0]); i++) {
            rk_kernel_def def
                = { .id = lanes[i].id, .handler = cuda_ignore_handler };
            def.config.device_source = kernels_src;
            def.config.device_entry = "rk_echo";
            def.config.grid_size = 1;
            def.config.block_size = 64;
            def.config.batch = 8;
            def.config.max_payload = lanes[i].cap == (1u << 20) ? 4096 : 128;
            def.config.lane_capacity = lanes[i].cap;
            assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
            if (lanes[i].detail != NULL) {
                cuda_assert_refused(
                    rt, lanes[i].id, lanes[i].rc, lanes[i].detail);
            } else {
                assert_int_equal(rk_kernel_launch(rt, lanes[i].id), RK_OK);
                assert_int_equal(
                    rk_kernel_terminate(rt, lanes[i].id, T_LONG), RK_OK);
            }
        }
    }

    if (real_gpu) {
        rk_runtime_destroy(rt);
        return; /* the rest steers the stand-in's attributes */
    }
    /* The display watchdog. */
    setenv("FAKE_CUDA_EXEC_TIMEOUT", "1", 1);
    reg(rt, "watched", "rk_echo", 1, NULL);
    assert_int_equal(rk_kernel_launch(rt, "watched"), RK_ENOTSUP);
    assert_non_null(strstr(rk_errdetail(), "watchdog"));
    unsetenv("FAKE_CUDA_EXEC_TIMEOUT");
    assert_int_equal(rk_kernel_launch(rt, "watched"), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "watched", T_LONG), RK_OK);

    /* A device below sm_70. */
    setenv("FAKE_CUDA_CC", "61", 1);
    reg(rt, "old", "rk_echo", 1, NULL);
    assert_int_equal(rk_kernel_launch(rt, "old"), RK_ENOTSUP);
    assert_non_null(strstr(rk_errdetail(), "6.1"));
    unsetenv("FAKE_CUDA_CC");

    /* No device source at all. */
    {
        rk_kernel_def def = { .id = "nosrc", .handler = rt_ignore_handler };
        assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
        assert_int_equal(rk_kernel_launch(rt, "nosrc"), RK_EINVAL);
        assert_non_null(strstr(rk_errdetail(), "device_source"));
    }
    rk_runtime_destroy(rt);
}

/* A STOP before the first RUN: the instance exits without processing;
 * what was queued is dead-lettered as terminated. */
static void
test_terminate_unactivated(void **state)
{
    rk_runtime *rt;
    rk_kernel k;
    rk_kernel_stats st;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    rt = cuda_test_runtime();
    reg(rt, "idle", "rk_echo", 1, NULL);
    assert_int_equal(rk_kernel_lookup(rt, "idle", &k), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "idle"), RK_OK);
    assert_int_equal(rk_send(rt, k, 1, "q", 1, 128, T_LONG), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "idle", T_LONG), RK_OK);
    assert_int_equal(rk_kernel_stats_get(rt, "idle", &st), RK_OK);
    assert_int_equal(st.processed, 0);
    assert_int_equal(st.dead_lettered, 1);
    rk_runtime_destroy(rt);
}

/* CUDA cannot load code while a persistent kernel runs (the load waits
 * for it): a kernel's code is loaded when it is registered, and a kernel
 * registered while another runs cannot launch (RK_EBUSY, never a hang)
 * until none does. */
static void
test_register_after_launch(void **state)
{
    static const char late_src[]
        = "RK_DEV_HANDLER(late_h)(rk_dev_ctx *x, const rk_dev_msg *m)\n"
          "{\n"
          "    return rk_dev_reply(x, m, 5, m->data, m->len);\n"
          "}\n"
          "RK_DEV_KERNEL(rk_echo, late_h)\n";
    rk_runtime *rt;
    rk_kernel_state s;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    rt = cuda_test_runtime();
    reg(rt, "first", "rk_echo", 1, NULL);
    assert_int_equal(rk_kernel_launch(rt, "first"), RK_OK);
    reg(rt, "late", "rk_echo", 1, late_src);
    assert_int_equal(rk_kernel_launch(rt, "late"), RK_EBUSY);
    assert_non_null(strstr(rk_errdetail(), "kernel 'late'"));
    assert_non_null(strstr(rk_errdetail(), "register every cuda kernel"));
    assert_int_equal(rk_kernel_state_get(rt, "late", &s), RK_OK);
    assert_int_equal(s, RK_KERNEL_CREATED); /* nothing was started */
    assert_int_equal(rk_kernel_terminate(rt, "first", T_LONG), RK_OK);
    /* Nothing runs now: the late kernel's code loads at its launch. */
    assert_int_equal(rk_kernel_launch(rt, "late"), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "late", T_LONG), RK_OK);
    rk_runtime_destroy(rt);
}

/* Last: nothing the backend did in this program called the driver in a
 * way that waits for a running persistent kernel (a module load, a free,
 * a context synchronise while one was resident), which on a GPU never
 * returns; the stand-in counts such calls (fake_cuda_hangs). */
CUDA_TEST_NO_HANG(real_gpu)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe_and_devices),
        cmocka_unit_test(test_echo_lifecycle),
        cmocka_unit_test(test_ll_message_sizes),
        cmocka_unit_test(test_warp_kernel),
        cmocka_unit_test(test_terminate_paused_drains),
        cmocka_unit_test(test_grid_of_actors),
        cmocka_unit_test(test_route_through_relay),
        cmocka_unit_test(test_device_publish),
        cmocka_unit_test(test_handler_failure),
        cmocka_unit_test(test_supervised_restart),
        cmocka_unit_test(test_oversized_device_output),
        cmocka_unit_test(test_device_actor_restart),
        cmocka_unit_test(test_launch_errors),
        cmocka_unit_test(test_terminate_unactivated),
        cmocka_unit_test(test_register_after_launch),
        cmocka_unit_test(test_no_call_would_hang),
    };
    return cuda_sim_run("test_cuda_backend", tests,
        sizeof(tests) / sizeof(tests[0]), FAKE_CUDA_LIB, "tests/kernels/test_kernels.cu", &kernels_src, &real_gpu);
}
