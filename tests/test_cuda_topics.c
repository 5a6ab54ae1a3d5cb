/*
 * Device topics (docs/cuda-k2k.md, "Device topics"): a cuda kernel's
 * rk_dev_publish reaches the topic's cuda subscribers on the same device
 * over K2K lanes in device memory (GPU scope, no host hop), and its other
 * subscribers through the host relay, each exactly once. Through the
 * public runtime API and the backend's real host code, on the test-only
 * stand-in driver (tests/fake_cuda: the host build of the same kernels on
 * CPU threads) or, with RK_TEST_CUDA_REAL=1, on a GPU
 * (tools/gpu-check.sh).
 *
 * What it proves:
 *   - fan_out: a publish to a topic whose subscribers are all cuda
 *     kernels makes no relay hand-off (the publisher's relay moves only
 *     the host's sends into it) and never touches a subscriber's inbox;
 *     one with a cpu subscriber too makes one hand-off per publish, for
 *     the cpu subscriber alone; every subscriber gets every message once
 *     and in order; a cuda kernel that subscribes after the publisher
 *     launched gets the next publishes through the relay, once each; a
 *     cpu kernel that subscribes to a topic carried wholly on the device
 *     gets its publishes from the publisher's next launch on;
 *   - policy: a subscriber whose policy drops (DROP_NEW) and whose lane
 *     is full has the publish counted as dropped (received + dropped =
 *     published), one whose policy is BLOCK gets every one (the
 *     publisher waits for room);
 *   - ptx: the device side of the fan-out (rk_dev__topic_fan) uses GPU
 *     scope: no system-scope fence or atomic, and no system-scope
 *     acquire or release but the peer-lane branch of dev_k2k.h's
 *     scope-chosen ones (never taken on a topic lane);
 *   - stats: rk_topic_stats counts the publishes carried wholly on the
 *     device (folded by the relay from the blocks' counts), while the
 *     publisher runs and at its end, drops as failed;
 *   - dead letter: a relayed publish a subscriber refuses is
 *     dead-lettered with reserved 0 (no carried/dropped masks);
 *   - unsubscribe: a lane subscriber keeps its lane until the
 *     publisher's next launch, a relayed one stops at once, nothing is
 *     lost or doubled.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_helpers.h"
#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

#define T_LONG RT_LONG

static char *kernels_src;
static int real_gpu;

/* A cuda kernel: entry on one block; with topics, rk_pub's topic list. */
static void
reg(rk_runtime *rt, const char *id, const char *entry,
    const char *const *topics, uint32_t ntopics, rk_backpressure bp)
{
    rk_kernel_def def = { .id = id, .handler = rt_ignore_handler };
    def.config.device_source = kernels_src;
    def.config.device_entry = entry;
    def.config.device_source_name = "test_kernels.cu";
    def.config.grid_size = 1;
    def.config.block_size = 64;
    def.config.batch = 8;
    def.config.max_payload = 128;
    def.config.backpressure = bp;
    def.config.device_topics = topics;
    def.config.ndevice_topics = ntopics;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
}

/* Frames the publisher's host side moved: through its relay, or into its
 * lane by the caller's own path. */
static uint64_t
moved(rk_runtime *rt, const char *id)
{
    rk_kernel_stats s = rt_stats(rt, id);
    return s.relay_handoffs + s.direct_calls;
}

/* Terminates each kernel of ids (NULL-ended): their counters are final. */
static void
end_all(rk_runtime *rt, const char *const *ids)
{
    for (; *ids != NULL; ids++)
        assert_int_equal(rk_kernel_terminate(rt, *ids, T_LONG), RK_OK);
}

/* Publishes n messages on topic index t through p (rk_pub publishes its
 * input on the index in its first byte), the second byte from seq0 on. */
static void
publish(rk_runtime *rt, rk_kernel p, unsigned char t, unsigned seq0, int n)
{
    for (int i = 0; i < n; i++) {
        unsigned char m[2] = { t, (unsigned char)(seq0 + (unsigned)i) };
        assert_int_equal(rk_send(rt, p, 4, m, 2, 128, T_LONG), RK_OK);
    }
}

/* The next n answers of subscriber s (echoes) are topic t's messages
 * seq0.., in order. */
static void
expect(rk_runtime *rt, rk_kernel s, unsigned char t, unsigned seq0, int n)
{
    unsigned char buf[128];
    size_t len;

    for (int i = 0; i < n; i++) {
        assert_int_equal(
            rk_recv(rt, s, NULL, buf, sizeof(buf), &len, T_LONG), RK_OK);
        assert_int_equal(len, 2);
        assert_int_equal(buf[0], t);
        if (buf[1] != (unsigned char)(seq0 + (unsigned)i))
            fail_msg("topic %u: got %u, want %u", t, buf[1], seq0 + (unsigned)i);
    }
}

/* The topics' cast, started subscribers first (the publisher's lanes to
 * them are wired before its blocks start): k[0] "pub" (rk_pub on
 * topics), k[1] "s1" and k[2] "s2" (cuda echoes), k[3] "c" (a cpu
 * echo); subs: kernel, topic pairs, NULL-ended, subscribed first.
 * Skips the test without NVRTC. */
static rk_runtime *
cast(const char *const *topics, uint32_t ntopics, const char *const *subs,
    rk_kernel k[4])
{
    rk_kernel_def cd = { .id = "c", .actor = rt_echo_actor };
    rk_runtime *rt;

    if (!cuda_have_nvrtc())
        skip();
    rt = cuda_test_runtime();
    reg(rt, "pub", "rk_pub", topics, ntopics, RK_BP_BLOCK);
    reg(rt, "s1", "rk_echo", NULL, 0, RK_BP_BLOCK);
    reg(rt, "s2", "rk_echo", NULL, 0, RK_BP_BLOCK);
    cd.config.backend = "cpu";
    assert_int_equal(rk_runtime_register(rt, &cd), RK_OK);
    for (; *subs != NULL; subs += 2)
        assert_int_equal(rk_subscribe(rt, subs[0], subs[1]), RK_OK);
    k[1] = cuda_start(rt, "s1");
    k[2] = cuda_start(rt, "s2");
    k[3] = cuda_start(rt, "c");
    k[0] = cuda_start(rt, "pub");
    return rt;
}

static void
test_fan_out(void **state)
{
    static const char *const topics[] = { "d", "m" };
    rk_runtime *rt;
    rk_kernel k[4], p, s1, s2, c;
    rk_topic_stats ts;
    uint64_t before;
    enum { N = 24, M = 12, K = 6 };
    (void)state;
    rt = cast(topics, 2,
        (const char *const[]) { "s1", "d", "s2", "d", "s1", "m", "c", "m",
            NULL },
        k);
    p = k[0], s1 = k[1], s2 = k[2], c = k[3];

    /* "d": cuda subscribers only. No relay hand-off but the sends in. */
    before = moved(rt, "pub");
    publish(rt, p, 0, 0, N);
    expect(rt, s1, 0, 0, N);
    expect(rt, s2, 0, 0, N);
    assert_int_equal(moved(rt, "pub") - before, N);
    assert_int_equal(rt_stats(rt, "s1").offered, 0);
    assert_int_equal(rt_stats(rt, "s2").offered, 0);

    /* "m": s1 on its lane, c through the relay: one hand-off each. */
    before = moved(rt, "pub");
    publish(rt, p, 1, 0, M);
    expect(rt, s1, 1, 0, M);
    expect(rt, c, 1, 0, M);
    assert_int_equal(moved(rt, "pub") - before, 2 * M);
    assert_int_equal(rt_stats(rt, "s1").offered, 0);
    assert_int_equal(rk_topic_stats_get(rt, "m", &ts), RK_OK);
    assert_int_equal(ts.published, M);
    assert_int_equal(ts.delivered, 2 * M); /* s1's counted as carried */
    assert_int_equal(ts.failed, 0);

    /* s2 subscribes to "m" after the publisher launched: the relay's
     * fan-out (live) takes it to s2's inbox; s1 still on its lane. */
    assert_int_equal(rk_subscribe(rt, "s2", "m"), RK_OK);
    publish(rt, p, 1, M, M);
    expect(rt, s1, 1, M, M);
    expect(rt, c, 1, M, M);
    expect(rt, s2, 1, M, M);
    assert_int_equal(rt_stats(rt, "s2").offered, M);
    assert_int_equal(rt_stats(rt, "s1").offered, 0);

    /* c subscribes to "d", whose subscribers were all carried on the
     * device at the publisher's launch: no relay frame, so c gets the
     * publisher's "d" publishes from its next launch on. */
    assert_int_equal(rk_subscribe(rt, "c", "d"), RK_OK);
    before = moved(rt, "pub");
    publish(rt, p, 0, N, K);
    expect(rt, s1, 0, N, K);
    expect(rt, s2, 0, N, K);
    assert_int_equal(moved(rt, "pub") - before, K);
    assert_int_equal(rt_stats(rt, "c").processed, 2 * M);
    assert_int_equal(rk_kernel_terminate(rt, "pub", T_LONG), RK_OK);
    p = cuda_start(rt, "pub");
    publish(rt, p, 0, N + K, K);
    expect(rt, s1, 0, N + K, K);
    expect(rt, s2, 0, N + K, K);
    expect(rt, c, 0, N + K, K);
    assert_int_equal(rt_stats(rt, "s1").offered, 0);

    /* Exactly once: the final counts, every instance ended. */
    end_all(rt, (const char *const[]) { "pub", "s1", "s2", "c", NULL });
    assert_int_equal(rt_stats(rt, "pub").processed, K); /* this launch's */
    assert_int_equal(rt_stats(rt, "s1").processed, N + 2 * M + 2 * K);
    assert_int_equal(rt_stats(rt, "s2").processed, N + M + 2 * K);
    assert_int_equal(rt_stats(rt, "c").processed, 2 * M + K);
    assert_int_equal(rt_stats(rt, "s1").dead_lettered, 0);
    /* The topic's statistics count the publishes carried wholly on the
     * device too (the relay folds the blocks' counts): "d" had N + K of
     * them on two lanes, then K on two lanes and the relay for c. */
    assert_int_equal(rk_topic_stats_get(rt, "d", &ts), RK_OK);
    assert_int_equal(ts.published, N + 2 * K);
    assert_int_equal(ts.delivered, 2 * (N + K) + 3 * K);
    assert_int_equal(ts.failed, 0);
    rk_runtime_destroy(rt);
}

/* Topic stats of t once published reaches n (the relay folds the device's
 * counts at its passes: a deadline, no timing). */
static rk_topic_stats
topic_stats_at(rk_runtime *rt, const char *t, uint64_t n)
{
    uint64_t until = rk_now_ns() + (uint64_t)T_LONG;
    rk_topic_stats ts;

    do {
        assert_true(rk_now_ns() < until);
        sched_yield();
        assert_int_equal(rk_topic_stats_get(rt, t, &ts), RK_OK);
    } while (ts.published < n);
    return ts;
}

/* Counted while the publisher runs: a topic carried wholly on the
 * device has its publishes in rk_topic_stats (published once, delivered
 * once per subscriber) without the publisher ending. */
static void
test_device_stats(void **state)
{
    static const char *const topics[] = { "d" };
    rk_runtime *rt;
    rk_kernel k[4], p, s1, s2;
    rk_topic_stats ts;
    enum { N = 20 };
    (void)state;
    rt = cast(topics, 1, (const char *const[]) { "s1", "d", "s2", "d", NULL },
        k);
    p = k[0], s1 = k[1], s2 = k[2];
    publish(rt, p, 0, 0, N);
    expect(rt, s1, 0, 0, N);
    expect(rt, s2, 0, 0, N);
    ts = topic_stats_at(rt, "d", N);
    assert_int_equal(ts.published, N);
    assert_int_equal(ts.delivered, 2 * N);
    assert_int_equal(ts.failed, 0);
    assert_int_equal(moved(rt, "pub"), N); /* still no relay hand-off */
    end_all(rt, (const char *const[]) { "pub", "s1", "s2", "c", NULL });
    assert_int_equal(rk_topic_stats_get(rt, "d", &ts), RK_OK);
    assert_int_equal(ts.published, N);
    assert_int_equal(ts.delivered, 2 * N);
    rk_runtime_destroy(rt);
}

/* A relayed publish that a subscriber refuses (c, a cpu kernel, is
 * terminated) is dead-lettered with its header's reserved word 0: the
 * carried mask (s1 had it on its lane) is the relay's, never the
 * user's. The topic flag and index stay (which topic it was). */
static void
test_refused_dead_letter(void **state)
{
    static const char *const topics[] = { "d", "m" };
    rk_runtime *rt;
    rk_kernel k[4], p, s1;
    rk_dead_letter dl;
    rk_topic_stats ts;
    unsigned char buf[128];
    enum { N = 3 };
    (void)state;
    rt = cast(topics, 2, (const char *const[]) { "s1", "m", "c", "m", NULL },
        k);
    p = k[0], s1 = k[1];
    assert_int_equal(rk_kernel_terminate(rt, "c", T_LONG), RK_OK);
    publish(rt, p, 1, 0, N);
    expect(rt, s1, 1, 0, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(
            rk_dead_letter_recv(rt, &dl, buf, sizeof(buf), T_LONG), RK_OK);
        assert_string_equal(dl.kernel_id, "pub");
        assert_int_equal(dl.reason, RK_DEAD_FAILED);
        assert_int_not_equal(dl.error, RK_OK);
        assert_int_equal(dl.hdr.reserved, 0);
        assert_int_equal(dl.hdr.flags & RK_MSG_F_TOPIC, RK_MSG_F_TOPIC);
        assert_int_equal(dl.hdr.flags >> 16, 1);
        assert_int_equal(dl.len, 2);
        assert_int_equal(buf[0], 1);
        assert_int_equal(buf[1], i);
    }
    end_all(rt, (const char *const[]) { "pub", "s1", "s2", NULL });
    assert_int_equal(
        rk_dead_letter_recv(rt, &dl, buf, sizeof(buf), 0), RK_ETIMEDOUT);
    assert_int_equal(rk_topic_stats_get(rt, "m", &ts), RK_OK);
    assert_int_equal(ts.published, N);
    assert_int_equal(ts.delivered, N); /* s1's, on its lane */
    assert_int_equal(ts.failed, N);    /* c's refusals */
    rk_runtime_destroy(rt);
}

/* rk_unsubscribe (docs/cuda-k2k.md, "Subscriptions after launch"): a
 * subscriber carried on a lane (s2) keeps getting the publisher's
 * publishes until the publisher's next launch, a relayed one (c) stops
 * at once; nobody gets one twice or loses one, and the topic counts what
 * each lane carried. */
static void
test_unsubscribe(void **state)
{
    static const char *const topics[] = { "d" };
    rk_runtime *rt;
    rk_kernel k[4], p, s1, s2, c;
    rk_topic_stats ts;
    enum { N = 10, K = 6 };
    (void)state;
    rt = cast(topics, 1,
        (const char *const[]) { "s1", "d", "s2", "d", "c", "d", NULL }, k);
    p = k[0], s1 = k[1], s2 = k[2], c = k[3];
    publish(rt, p, 0, 0, N);
    expect(rt, s1, 0, 0, N);
    expect(rt, s2, 0, 0, N);
    expect(rt, c, 0, 0, N);

    assert_int_equal(rk_unsubscribe(rt, "s2", "d"), RK_OK);
    assert_int_equal(rk_unsubscribe(rt, "c", "d"), RK_OK);
    publish(rt, p, 0, N, K);
    expect(rt, s1, 0, N, K);
    expect(rt, s2, 0, N, K); /* its lane: until the next launch */

    assert_int_equal(rk_kernel_terminate(rt, "pub", T_LONG), RK_OK);
    p = cuda_start(rt, "pub");
    publish(rt, p, 0, N + K, K);
    expect(rt, s1, 0, N + K, K);

    end_all(rt, (const char *const[]) { "pub", "s1", "s2", "c", NULL });
    assert_int_equal(rt_stats(rt, "s1").processed, N + 2 * K);
    assert_int_equal(rt_stats(rt, "s2").processed, N + K);
    assert_int_equal(rt_stats(rt, "c").processed, N);
    assert_int_equal(rt_stats(rt, "s2").offered, 0);
    assert_int_equal(rt_stats(rt, "s2").dead_lettered, 0);
    /* N with a relay part (c), K still relayed (c's bit was set at
     * launch) with s1 and s2 carried, K wholly on s1's lane. */
    assert_int_equal(rk_topic_stats_get(rt, "d", &ts), RK_OK);
    assert_int_equal(ts.published, N + 2 * K);
    assert_int_equal(ts.delivered, 3 * N + 2 * K + K);
    assert_int_equal(ts.failed, 0);
    rk_runtime_destroy(rt);
}

/* Policies on a full lane: the publisher sends 40 on topic index 2 to a
 * subscriber (rk_spin: 20 ms per message) whose lane holds 16. */
static void
policy_case(rk_backpressure bp)
{
    static const char *const topics[] = { "x", "y", "slow" };
    rk_runtime *rt;
    rk_kernel p, s;
    rk_kernel_stats st;
    rk_topic_stats ts;
    uint64_t until;
    enum { N = 40 };

    rt = cuda_test_runtime();
    reg(rt, "pub", "rk_pub", topics, 3, RK_BP_BLOCK);
    reg(rt, "s", "rk_spin", NULL, 0, bp);
    assert_int_equal(rk_subscribe(rt, "s", "slow"), RK_OK);
    s = cuda_start(rt, "s");
    p = cuda_start(rt, "pub");
    (void)s;
    publish(rt, p, 2, 0, N);
    /* Every publish has been dealt with: processed or counted dropped. */
    until = rk_now_ns() + (uint64_t)T_LONG;
    do {
        assert_true(rk_now_ns() < until);
        sched_yield();
        st = rt_stats(rt, "s");
    } while (st.processed + st.dropped < N);
    end_all(rt, (const char *const[]) { "pub", "s", NULL });
    st = rt_stats(rt, "s");
    assert_int_equal(rk_topic_stats_get(rt, "slow", &ts), RK_OK);
    rk_runtime_destroy(rt);
    /* The topic counts every publish: carried (delivered) or dropped on
     * the lane (failed, and in the subscriber's dropped). */
    assert_int_equal(ts.published, N);
    assert_int_equal(ts.delivered, st.processed);
    assert_int_equal(ts.failed, st.dropped);
    assert_int_equal(st.processed + st.dropped, N);
    assert_int_equal(st.offered, 0);
    if (bp == RK_BP_BLOCK)
        assert_int_equal(st.dropped, 0);
    else
        assert_true(st.dropped > 0); /* 40 x 20 ms against 16 slots */
}

static void
test_policy_drop(void **state)
{
    (void)state;
    if (!cuda_have_nvrtc())
        skip();
    policy_case(RK_BP_DROP_NEW);
}

static void
test_policy_block(void **state)
{
    (void)state;
    if (!cuda_have_nvrtc())
        skip();
    policy_case(RK_BP_BLOCK);
}

/* The device side of a publish to device subscribers: GPU-scope
 * acquire/release on the K2K lanes, and no system-scope fence, acquire,
 * release or read-modify-write anywhere in it (the fan-out reads only the
 * block's own state and the lanes; wiring is looked at elsewhere,
 * rk_dev__topics_poll). */
static void
test_fan_ptx(void **state)
{
    static const char src[]
        = "#include \"ringkernel/dev_kernel.h\"\n"
          "extern \"C\" __global__ void fan_path(rk_dev_kargs a,\n"
          "    const unsigned char *p, unsigned *res) {\n"
          "  __shared__ rk_dev_ctx x;\n"
          "  rk_dev_u32 want = 0;\n"
          "  if (threadIdx.x == 0) { x.a = a; x.nroutes = a.nroutes;\n"
          "    for (unsigned r = 0; r < RK_DEV_MAX_ROUTES; r++)\n"
          "      x.route_ctrl[r] = a.routes[r].ctrl; }\n"
          "  __syncthreads();\n"
          "  res[0] = rk_dev__topic_fan(&x, 0, 1, p, 16, &want);\n"
          "  res[1] = want;\n"
          "}\n";
    char *ptx;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();
    ptx = cuda_compile_ptx("fan.cu", src, 90, 0);
    assert_non_null(strstr(ptx, ".visible .entry fan_path("));
    assert_true(cuda_count_op(ptx, "st.release.gpu.u64") > 0);
    assert_true(cuda_count_op(ptx, "ld.acquire.gpu.u64") > 0);
    /* Its only system-scope operations are the K2K lane's acquire and
     * release at system scope (dev_k2k.h: chosen at attach from the lane's
     * flags, RK_RING_F_SYS only on a route between two GPUs; a topic lane
     * is always on one device, so they are compiled in, never taken). */
    assert_int_equal(cuda_count_op(ptx, "ld.acquire.sys")
            + cuda_count_op(ptx, "st.release.sys"),
        cuda_count_lines_with(ptx, ".sys"));
    cuda_assert_no_ops(ptx, (const char *const[]) { CUDA_NO_SYS_FENCE,
                                 "ld.relaxed.sys", "st.relaxed.sys", NULL });
    free(ptx);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fan_out),
        cmocka_unit_test(test_device_stats),
        cmocka_unit_test(test_refused_dead_letter),
        cmocka_unit_test(test_unsubscribe),
        cmocka_unit_test(test_policy_drop),
        cmocka_unit_test(test_policy_block),
        cmocka_unit_test(test_fan_ptx),
    };
    return cuda_sim_run("test_cuda_topics", tests,
        sizeof(tests) / sizeof(tests[0]), FAKE_CUDA_LIB,
        "tests/kernels/test_kernels.cu", &kernels_src, &real_gpu);
}
