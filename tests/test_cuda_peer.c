/*
 * rk_connect routes between cuda kernels on two CUDA devices, carried
 * peer-to-peer where the driver allows it (src/backend/cuda/peer.c,
 * docs/cuda-devices.md). By default on the stand-in driver, which offers
 * two devices and models peer access (FAKE_CUDA_PEER, tests/fake_cuda);
 * RK_TEST_CUDA_REAL=1 runs it on the real driver (tools/gpu-check.sh),
 * where the two-device cases need two GPUs that can reach each other and
 * skip otherwise, and the stand-in's knobs are not there to turn.
 *
 * What it proves:
 *   - a K2K lane between two GPUs orders its index words at system scope:
 *     each side reads the lane's flag at attach (host build here; the PTX
 *     of both scopes is checked in test_cuda_nvrtc's test_k2k_ptx);
 *   - the stand-in's model: a grid on device 0 that touches device 1's
 *     memory crashes unless peer access from 0 to 1 was enabled;
 *   - with peer access, a request crossing devices goes device to device:
 *     the target's inbox is never offered a frame and the sender's relay
 *     moves only the host's sends (RK_CUDA_DIRECT=0: each of those is one
 *     relay hand-off);
 *   - without it (the driver says no, or RK_CUDA_NO_PEER=1) the same
 *     route goes through the host relay and every message still arrives;
 *   - the driver's "already enabled" is success; an enable the driver
 *     refuses, and a route to a device that does not exist, are refused
 *     at launch with RK_ECUDA / RK_ENODEV naming both kernels.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/cuda/nvrtc.h"
#include "backend/cuda/peer.h"
#include "cuda_helpers.h"
#include "device/cuda_driver.h"
#include "ringkernel/dev_k2k.h"
#include "ringkernel/dev_oneshot.h"
#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

extern char **environ;

static char *kernels_src;
static int real_gpu;

#define N_MSG 20

/* CUDA devices the driver reports. */
static int
cuda_devices(void)
{
    const struct rk__cuda_driver *d;
    return rk__cuda_driver(&d) == RK_OK ? d->device_count : 0;
}

/* Skips unless two devices are there (and, on a GPU, reach each other). */
static void
need_two(int peer)
{
    const struct rk__cuda_driver *d;
    int ab = 0, ba = 0;

    cuda_require_nvrtc();
    if (cuda_devices() < 2) {
        print_message("one CUDA device: the peer routes need two\n");
        skip();
    }
    if (real_gpu && peer) {
        assert_int_equal(rk__cuda_driver(&d), RK_OK);
        if (d->cuDeviceCanAccessPeer == NULL
            || d->cuDeviceCanAccessPeer(&ab, 0, 1) != RK__CUDA_SUCCESS
            || d->cuDeviceCanAccessPeer(&ba, 1, 0) != RK__CUDA_SUCCESS || !ab
            || !ba) {
            print_message("devices 0 and 1 cannot reach each other\n");
            skip();
        }
    }
}

/* The stand-in's peer-access record: 1 if device a enabled access to b;
 * *calls and *again as fake_cuda_peer_query. -1 on a GPU. */
static int
fake_peer(int a, int b, unsigned *calls, unsigned *again)
{
    int (*fn)(int, int, unsigned *, unsigned *);
    *calls = *again = 0;
    if (real_gpu)
        return -1;
    *(void **)&fn = cuda_fake_sym(FAKE_CUDA_LIB, "fake_cuda_peer_query");
    assert_non_null(fn);
    return fn(a, b, calls, again);
}

/* a (rk_echo, device 0) -> b (rk_echo, device dev_b); both registered,
 * nothing launched. */
static rk_runtime *
pair(int dev_b)
{
    rk_runtime *rt = cuda_test_runtime();
    cuda_kdef a = { .id = "a",
        .src = kernels_src,
        .src_name = "test_kernels.cu",
        .entry = "rk_echo",
        .grid = 1,
        .max_payload = 128,
        .device = 0 };
    cuda_kdef b = a;
    b.id = "b";
    b.device = dev_b;
    cuda_register(rt, &a);
    cuda_register(rt, &b);
    assert_int_equal(rk_connect(rt, "a", "b"), RK_OK);
    return rt;
}

/* a -> b across devices 0 and 1: N_MSG messages sent to a come out of b,
 * in order. Returns the final stats of a and b. */
static void
cross(rk__cu_peer_counts *before, rk_kernel_stats *sa, rk_kernel_stats *sb)
{
    rk_runtime *rt;
    rk_kernel a, b;

    setenv("RK_CUDA_DIRECT", "0", 1); /* every host send is a hand-off */
    rk__cu_peer_counts_get(before);
    rt = pair(1);
    a = cuda_start(rt, "a");
    b = cuda_start(rt, "b");
    cuda_hops(rt, a, b, N_MSG);
    /* Counters are final once the kernels exited. */
    assert_int_equal(rk_kernel_terminate(rt, "a", RT_LONG), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "b", RT_LONG), RK_OK);
    *sa = rt_stats(rt, "a");
    *sb = rt_stats(rt, "b");
    rk_runtime_destroy(rt);
    unsetenv("RK_CUDA_DIRECT");
}

/* ------------------------------------------------------------ scope */

/* Host build: each side takes the lane's scope from its control block at
 * attach, and a system-scope lane carries messages as a GPU-scope one. */
static void
test_lane_scope_attach(void **state)
{
    RK_PROTO_ALIGN64 rk_ring_ctrl c;
    unsigned char slots[4 * 64];
    rk_ring_side p, q;
    int closed;
    (void)state;

    for (unsigned sys = 0; sys < 2; sys++) {
        rk_ring_init(&c, 4, 64);
        assert_int_equal(c.flags, 0);
        c.flags = sys ? RK_RING_F_SYS : 0;
        rk_k2k_cons_attach(&c, &q, slots);
        rk_k2k_prod_attach(&c, &p, slots);
        assert_int_equal(p.sys, sys);
        assert_int_equal(q.sys, sys);
        assert_int_equal(rk_k2k_prod_space(&c, &p, 1, &closed), 1);
        slots[0] = (unsigned char)(0x40 + sys);
        rk_k2k_prod_publish(&c, &p, 1);
        assert_int_equal(rk_k2k_cons_avail(&c, &q, 4), 1);
        assert_int_equal(slots[0], 0x40 + sys);
        rk_k2k_cons_release(&c, &q, 1);
        rk_k2k_close(&c, &q); /* the producer learns it at its next look */
        assert_int_equal(rk_k2k_prod_space(&c, &p, 4, &closed), 4);
        assert_int_equal(closed, 1);
    }
}

/* ------------------------------------------------------------ the model */

/* The child of test_standin_peer_fault (this program run again with
 * --probe P): rk_os_vadd on device 0 reads buffer x of device 1, after
 * enabling peer access from 0 to 1 when P is 1. Exit 0 when the sums are
 * right; a crash where the grid may not reach x. */
static int
probe(int peer)
{
    const struct rk__cuda_driver *d;
    rk__nvrtc_src s
        = { .name = "oneshot_kernels.cu", .cc = 90, .want_ptx = 1 };
    rk__nvrtc_image img;
    rk__cu_dptr x, y, z;
    rk__cu_module m;
    rk__cu_function f;
    rk__cu_stream st;
    rk_dev_oneshot_args args;
    uint32_t hx[64], hy[64], hz[64], n = 64;
    void *params[1] = { &args };
    char *src = cuda_slurp("tests/kernels/oneshot_kernels.cu");

    for (uint32_t i = 0; i < n; i++) {
        hx[i] = i;
        hy[i] = 1000 * i;
    }
    s.source = src;
    if (src == NULL || rk__nvrtc_compile(&s, &img) != RK_OK)
        return 2;
    if (rk__cuda_enter(1, &d) != RK_OK || d->cuMemAlloc(&x, sizeof(hx)) != 0
        || d->cuMemcpyHtoD(x, hx, sizeof(hx)) != 0)
        return 3;
    if (rk__cuda_enter(0, &d) != RK_OK || d->cuMemAlloc(&y, sizeof(hy)) != 0
        || d->cuMemAlloc(&z, sizeof(hz)) != 0
        || d->cuMemcpyHtoD(y, hy, sizeof(hy)) != 0
        || d->cuModuleLoadData(&m, img.data) != 0
        || d->cuModuleGetFunction(&f, m, "rk_os_vadd") != 0
        || d->cuStreamCreate(&st, RK__CU_STREAM_NON_BLOCKING) != 0)
        return 4;
    if (peer && rk__cu_peer_enable(0, 1) != RK_OK)
        return 5;
    memset(&args, 0, sizeof(args));
    args.buf[0] = x;
    args.buf[1] = y;
    args.buf[2] = z;
    args.nbuf = 3;
    args.arg_len = sizeof(n);
    memcpy(args.arg, &n, sizeof(n));
    fprintf(stderr,
        "probe: launching on device 0 with device 1's buffer "
        "(peer access %s)\n",
        peer ? "on" : "off");
    if (d->cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, st, params, NULL) != 0
        || d->cuStreamSynchronize(st) != 0
        || d->cuMemcpyDtoH(hz, z, sizeof(hz)) != 0)
        return 6;
    for (uint32_t i = 0; i < n; i++)
        if (hz[i] != 1001 * i)
            return 7;
    /* Everything back, so a leak check at exit has nothing to say. */
    if (d->cuStreamDestroy(st) != 0 || d->cuModuleUnload(m) != 0
        || d->cuMemFree(y) != 0 || d->cuMemFree(z) != 0
        || d->cuMemFree(x) != 0)
        return 8;
    rk__nvrtc_image_free(&img);
    free(src);
    return 0;
}

/* Runs the probe child; its wait status. */
static int
run_probe(int peer)
{
    char *argv[] = { "test_cuda_peer", "--probe", peer ? "1" : "0", NULL };
    pid_t pid;
    int ws = 0;

    setenv("FAKE_CUDA_PEER", "1", 1); /* the driver says it can */
    assert_int_equal(
        posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ), 0);
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    unsetenv("FAKE_CUDA_PEER");
    return ws;
}

/* The stand-in fails where a GPU fails: device 1's memory is out of
 * reach of a grid on device 0 until peer access from 0 to 1 is enabled
 * (the child crashes), and within reach after (the sums are right). */
static void
test_standin_peer_fault(void **state)
{
    int ws;
    (void)state;
    cuda_require_nvrtc();
    if (real_gpu)
        skip(); /* the stand-in's model; a GPU would lose its context */

    ws = run_probe(0);
    assert_false(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    assert_false(WIFEXITED(ws) && WEXITSTATUS(ws) > 1 && WEXITSTATUS(ws) < 9);
    ws = run_probe(1);
    assert_true(WIFEXITED(ws));
    assert_int_equal(WEXITSTATUS(ws), 0);
}

/* ------------------------------------------------------------ routes */

/* With peer access the route is carried on the devices: b's inbox is
 * never offered a frame, a's relay moves only the host's N_MSG sends
 * (through the relay, the answers would be N_MSG more), and the route is
 * counted peer-to-peer. Access is enabled both ways. */
static void
test_route_peer_to_peer(void **state)
{
    rk__cu_peer_counts before, after;
    rk_kernel_stats sa, sb;
    unsigned calls, again;
    (void)state;
    need_two(1);

    if (!real_gpu)
        setenv("FAKE_CUDA_PEER", "1", 1);
    cross(&before, &sa, &sb);
    rk__cu_peer_counts_get(&after);
    assert_int_equal(after.p2p, before.p2p + 1);
    assert_int_equal(after.relayed, before.relayed);
    assert_true(after.enables >= before.enables + 2);
    assert_int_equal(sa.processed, N_MSG);
    assert_int_equal(sa.sent, N_MSG);
    assert_int_equal(sb.processed, N_MSG);
    assert_int_equal(sb.offered, 0);            /* no relay hop */
    assert_int_equal(sa.relay_handoffs, N_MSG); /* the host's sends */
    assert_int_equal(sb.relay_handoffs, N_MSG); /* b's answers */
    if (!real_gpu) {
        assert_int_equal(fake_peer(0, 1, &calls, &again), 1);
        assert_int_equal(fake_peer(1, 0, &calls, &again), 1);
        unsetenv("FAKE_CUDA_PEER");
    }
}

/* Without peer access (the driver says no; then RK_CUDA_NO_PEER=1 where
 * it says yes) the same route goes through the host relay: b's inbox is
 * offered every frame, a's relay moves them twice as often, and the route
 * is counted relayed. No enable is asked for. */
static void
test_route_relayed(void **state)
{
    rk__cu_peer_counts before, after;
    rk_kernel_stats sa, sb;
    unsigned calls0, calls1, again;
    (void)state;
    need_two(0);

    for (int round = 0; round < 2; round++) {
        if (round == 0 && real_gpu)
            continue; /* the driver's answer is not ours to choose */
        if (round == 0) {
            setenv("FAKE_CUDA_PEER", "0", 1);
        } else { /* the driver would, the user says no */
            setenv("FAKE_CUDA_PEER", "1", 1);
            setenv("RK_CUDA_NO_PEER", "1", 1);
        }
        (void)fake_peer(0, 1, &calls0, &again);
        cross(&before, &sa, &sb);
        (void)fake_peer(0, 1, &calls1, &again);
        rk__cu_peer_counts_get(&after);
        assert_int_equal(after.relayed, before.relayed + 1);
        assert_int_equal(after.p2p, before.p2p);
        assert_int_equal(after.enables, before.enables);
        assert_int_equal(calls1, calls0);
        assert_int_equal(sb.processed, N_MSG);
        assert_int_equal(sb.offered, N_MSG); /* each through the relay */
        assert_int_equal(sa.relay_handoffs, 2 * N_MSG);
        unsetenv("FAKE_CUDA_PEER");
        unsetenv("RK_CUDA_NO_PEER");
    }
}

/* The driver's CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED is success (a
 * second enable for the same pair); where it says the pair cannot reach
 * each other, the enable is RK_ENOTSUP naming both devices and the
 * driver's error. */
static void
test_enable_twice_and_unsupported(void **state)
{
    unsigned calls, again0, again1;
    (void)state;
    need_two(1);

    if (!real_gpu)
        setenv("FAKE_CUDA_PEER", "1", 1);
    assert_int_equal(rk__cu_peer_enable(1, 0), RK_OK);
    (void)fake_peer(1, 0, &calls, &again0);
    assert_int_equal(rk__cu_peer_enable(1, 0), RK_OK);
    (void)fake_peer(1, 0, &calls, &again1);
    if (real_gpu)
        return;
    assert_int_equal(again1, again0 + 1); /* the driver said "already" */

    setenv("FAKE_CUDA_PEER", "0", 1);
    assert_int_equal(rk__cu_peer_enable(0, 1), RK_ENOTSUP);
    assert_non_null(strstr(rk_errdetail(), "CUDA device 0"));
    assert_non_null(strstr(rk_errdetail(), "device 1"));
    assert_non_null(
        strstr(rk_errdetail(), "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED"));
    assert_int_equal(rk__cu_peer_enable(0, 0), RK_EINVAL);
    unsetenv("FAKE_CUDA_PEER");
}

/* An enable the driver refuses (CUDA_ERROR_TOO_MANY_PEERS) fails the
 * launch of either end: RK_ECUDA naming both kernels, both devices and
 * the driver's error; nothing runs. */
static void
test_enable_refused(void **state)
{
    rk_runtime *rt;
    (void)state;
    need_two(1);
    if (real_gpu)
        skip(); /* a real driver cannot be made to refuse */

    setenv("FAKE_CUDA_PEER", "1", 1);
    setenv("FAKE_CUDA_PEER_FAIL", "711", 1);
    rt = pair(1);
    cuda_assert_refused(rt, "a", RK_ECUDA, "CUDA_ERROR_TOO_MANY_PEERS");
    assert_non_null(strstr(rk_errdetail(), "route 'a' -> 'b'"));
    assert_non_null(strstr(rk_errdetail(), "CUDA device 0 -> 1"));
    cuda_assert_refused(rt, "b", RK_ECUDA, "route 'a' -> 'b'");
    rk_runtime_destroy(rt);
    unsetenv("FAKE_CUDA_PEER_FAIL");
    unsetenv("FAKE_CUDA_PEER");
}

/* A route to a kernel on a device the driver does not have: the sender's
 * launch is refused with RK_ENODEV naming the route and the device
 * count (the target's own launch is refused as before). */
static void
test_route_to_missing_device(void **state)
{
    char want[96];
    int n;
    rk_runtime *rt;
    (void)state;
    cuda_require_nvrtc();

    n = cuda_devices();
    rt = pair(n);
    snprintf(want, sizeof(want),
        "kernel 'b' names CUDA device %d, but the driver has %d device(s)", n,
        n);
    cuda_assert_refused(rt, "a", RK_ENODEV, want);
    assert_non_null(strstr(rk_errdetail(), "route 'a' -> 'b'"));
    cuda_assert_refused(rt, "b", RK_ENODEV, "CUDA device");
    rk_runtime_destroy(rt);
}

CUDA_TEST_NO_HANG(real_gpu)

int
main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lane_scope_attach),
        cmocka_unit_test(test_standin_peer_fault),
        cmocka_unit_test(test_route_peer_to_peer),
        cmocka_unit_test(test_route_relayed),
        cmocka_unit_test(test_enable_twice_and_unsupported),
        cmocka_unit_test(test_enable_refused),
        cmocka_unit_test(test_route_to_missing_device),
        cmocka_unit_test(test_no_call_would_hang),
    };
    if (argc == 3 && strcmp(argv[1], "--probe") == 0)
        return probe(atoi(argv[2]));
    return cuda_sim_run("test_cuda_peer", tests,
        sizeof(tests) / sizeof(tests[0]), FAKE_CUDA_LIB,
        "tests/kernels/test_kernels.cu", &kernels_src, &real_gpu);
}
