/*
 * The cuda backend's robustness found in review (issue 24, item 5), each
 * case a regression test, under the stand-in driver (tests/fake_cuda):
 *   - the watchdog judges each block: one hung block among many that
 *     poll is caught, and a block whose lane's head moves is not hung;
 *   - a fired watchdog gives back the kernel's residency once the kernel
 *     returned: code loads again, and frees deferred meanwhile run;
 *   - the relay never waits forever on a routed target's full inbox: it
 *     keeps serving its kernel's commands, and what the target could not
 *     take yet arrives later, in order, with nothing refused or lost; a
 *     kernel terminated while its target stays full dead-letters what
 *     has no room after a bounded wait;
 *   - co-residency is device-wide: two kernels that fit alone but not
 *     together are refused at the second launch, naming both;
 *   - rk_buffer device memory freed while a kernel is resident is freed
 *     only once none is (the stand-in reports a free that would hang).
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
#include <time.h>

#include "backend/cuda/devhost.h"
#include "common/common.h"
#include "cuda_helpers.h"
#include "device/cuda_driver.h"
#include "memory/mem.h"
#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

#define T_LONG RT_LONG

static char *kernels_src;
static unsigned (*hangs)(void);


static rk_runtime *
cuda_runtime(void)
{
    rk_runtime *rt = NULL;
    /* A broken case fails within seconds instead of hanging. */
    rk_runtime_config cfg = { .no_static_kernels = true,
        .backend = "cuda",
        .control_timeout_ns = 3000000000ll,
        .terminate_timeout_ns = 10000000000ll };
    assert_int_equal(rk_runtime_create(&rt, &cfg), RK_OK);
    return rt;
}

static void
reg(rk_runtime *rt, const char *id, const char *entry, uint32_t grid,
    uint32_t in_cap, const char *src)
{
    rk_kernel_def def = { .id = id, .handler = rt_ignore_handler };
    def.config.device_source = src ? src : kernels_src;
    def.config.device_entry = entry;
    def.config.device_source_name = "test_kernels.cu";
    def.config.grid_size = grid;
    def.config.block_size = 64;
    def.config.batch = 8;
    def.config.max_payload = 64;
    def.config.input_capacity = in_cap;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
}

static void
pause_ms(long ms) /* a poll's interval, never a synchronisation */
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static uint64_t
deadline(void)
{
    return rk_now_ns() + 30ull * 1000000000ull;
}

/* ------------------------------------------------------ the watchdog */

/* Three blocks' regions, driven by hand: no device runs, the test plays
 * the blocks (acks, heartbeats, lane heads). */
static void
set_blk(rk__dh *d, uint32_t b, uint32_t ack, uint32_t beat)
{
    atomic_store_explicit(&d->ctl->blk[b].ack, ack, memory_order_release);
    atomic_store_explicit(
        &d->ctl->blk[b].heartbeat, beat, memory_order_relaxed);
}

static void
test_watchdog_per_block(void **state)
{
    rk__dh_cfg c = { .nblocks = 3,
        .nin = 1,
        .capacity = 4,
        .slot_size = 128,
        .batch = 1,
        .kernel_id = 1 };
    rk_msg_header h = { .magic = RK_MSG_MAGIC, .type_id = 1 };
    size_t n = rk__dh_size(&c);
    void *mem = aligned_alloc(64, (n + 63) & ~(size_t)63);
    rk__dh d;
    rk_ring_side cons;
    rk__dh_host_lane *l;
    (void)state;

    assert_non_null(mem);
    assert_int_equal(rk__dh_place(&d, &c, mem, (uintptr_t)mem, NULL), RK_OK);
    for (uint32_t b = 0; b < 3; b++) {
        set_blk(&d, b, RK_DEV_ACK_RUNNING, 1);
        assert_int_equal(rk__dh_send(&d, b, &h, "x", 1), RK_OK);
        assert_int_equal(rk__dh_send(&d, b, &h, "y", 1), RK_OK);
    }
    assert_int_equal(rk__dh_watchdog(&d, "wd"), RK_OK); /* records */
    /* Blocks 0 and 2 poll (their heartbeats move); block 1 is stuck with
     * two messages queued: the sum of the heartbeats moved, block 1 not. */
    set_blk(&d, 0, RK_DEV_ACK_RUNNING, 2);
    set_blk(&d, 2, RK_DEV_ACK_RUNNING, 2);
    assert_int_equal(rk__dh_watchdog(&d, "wd"), RK_ETIMEDOUT);
    assert_non_null(strstr(rk_errdetail(), "'wd'"));
    assert_non_null(strstr(rk_errdetail(), "block 1 of 3"));
    assert_non_null(strstr(rk_errdetail(), "2 message"));

    /* A long handler: block 1's heartbeat stands still, but it hands a
     * message back between checks (its lane's head moves): not hung. */
    l = &d.in[1];
    rk_ring_cons_attach(l->ctrl, &cons,
        (unsigned char *)(void *)l->ctrl + sizeof(rk_ring_ctrl));
    assert_true(rk_ring_cons_avail(l->ctrl, &cons, 1) == 1);
    rk_ring_cons_release(l->ctrl, &cons, 1);
    set_blk(&d, 0, RK_DEV_ACK_RUNNING, 3);
    set_blk(&d, 2, RK_DEV_ACK_RUNNING, 3);
    assert_int_equal(rk__dh_watchdog(&d, "wd"), RK_OK);
    /* ... and when it then stops moving, it is. */
    set_blk(&d, 0, RK_DEV_ACK_RUNNING, 4);
    set_blk(&d, 2, RK_DEV_ACK_RUNNING, 4);
    assert_int_equal(rk__dh_watchdog(&d, "wd"), RK_ETIMEDOUT);
    /* A paused block is not hung, nor is a faulted one. */
    set_blk(&d, 0, RK_DEV_ACK_RUNNING, 5);
    set_blk(&d, 2, RK_DEV_ACK_RUNNING, 5);
    set_blk(&d, 1, RK_DEV_ACK_PAUSED, 1);
    assert_int_equal(rk__dh_watchdog(&d, "wd"), RK_OK);
    set_blk(&d, 0, RK_DEV_ACK_RUNNING, 6);
    set_blk(&d, 2, RK_DEV_ACK_RUNNING, 6);
    set_blk(&d, 1, RK_DEV_ACK_FAULTED, 1);
    assert_int_equal(rk__dh_watchdog(&d, "wd"), RK_OK);
    /* Nor are blocks 0 and 2 when they stop with nothing queued. */
    for (uint32_t b = 0; b < 3; b += 2) {
        l = &d.in[b];
        rk_ring_cons_attach(l->ctrl, &cons,
            (unsigned char *)(void *)l->ctrl + sizeof(rk_ring_ctrl));
        assert_true(rk_ring_cons_avail(l->ctrl, &cons, 2) == 2);
        rk_ring_cons_release(l->ctrl, &cons, 2);
    }
    assert_int_equal(rk__dh_watchdog(&d, "wd"), RK_OK);
    assert_int_equal(rk__dh_watchdog(&d, "wd"), RK_OK);
    rk__dh_fini(&d);
    free(mem);
}

/* ------------------------------------------- a hung kernel's residency */

static const char late_src[]
    = "RK_DEV_HANDLER(late_h)(rk_dev_ctx *x, const rk_dev_msg *m)\n"
      "{\n"
      "    return rk_dev_reply(x, m, 7, m->data, m->len);\n"
      "}\n"
      "RK_DEV_KERNEL(rk_echo, late_h)\n";

static void
test_watchdog_releases_residency(void **state)
{
    rk_runtime *rt;
    rk_kernel k;
    rk_kernel_stats st;
    rk_buffer *buf;
    rk_buffer_config bc
        = { .dtype = RK_DTYPE_U8, .dims = { 4096 }, .device = RK_DEVICE_CUDA };
    unsigned char spin = 60; /* 600 ms */
    void *dptr;
    uint64_t dl;
    unsigned hangs0;
    int rc;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    hangs0 = hangs();
    setenv("RK_CUDA_WATCHDOG_MS", "50", 1);
    rt = cuda_runtime();
    reg(rt, "slow", "rk_spin", 1, 0, NULL);
    assert_int_equal(rk_buffer_create(&buf, &bc), RK_OK);
    assert_int_equal(rk_buffer_device(buf, RK_ACCESS_DISCARD, &dptr), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "slow", &k), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "slow"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "slow"), RK_OK);
    assert_int_equal(rk_send(rt, k, 1, &spin, 1, 128, T_LONG), RK_OK);
    /* The watchdog reports the block that does not move. */
    assert_int_equal(rk_kernel_wait(rt, "slow", T_LONG), RK_OK);
    assert_int_equal(rk_kernel_stats_get(rt, "slow", &st), RK_OK);
    assert_int_equal(st.state, RK_KERNEL_FAILED);
    /* Freed while the kernel may still be resident: deferred. */
    rk_buffer_destroy(buf);
    assert_true(rk__mem_deferred() >= 1);
    /* A kernel registered now cannot have its code loaded while the
     * hung one is resident (RK_EBUSY); once that one returned (its
     * handler ends, and the watchdog told it to stop), the count is
     * given back: the code loads and the deferred free ran. */
    reg(rt, "late", "rk_echo", 1, 0, late_src);
    dl = deadline();
    while ((rc = rk_kernel_launch(rt, "late")) == RK_EBUSY && rk_now_ns() < dl)
        pause_ms(20);
    assert_int_equal(rc, RK_OK);
    assert_int_equal(rk__mem_deferred(), 0);
    assert_int_equal(rk_kernel_terminate(rt, "late", T_LONG), RK_OK);
    rk_runtime_destroy(rt);
    unsetenv("RK_CUDA_WATCHDOG_MS");
    assert_int_equal(hangs(), hangs0);
}

/* ------------------------------------------ the relay and a full target */

/* Kernel `from` (rk_echo) routed to `to` (a cpu echo actor, BLOCK, 4
 * slots, held: its inbox fills; a route between two cuda kernels runs on
 * the device, test_cuda_k2k, so the relay's side of a full target is a
 * route to a host kernel), 8 messages sent to `from`, returned once its
 * device handled them all: 4 fill `to`'s inbox, the relay could not hand
 * over the 5th, 3 more wait in `from`'s device output lane (8 slots), so
 * its device is idle at a safe point. */
static void
route_to_full_target(rk_runtime *rt, const char *from, const char *to)
{
    rk_kernel k;
    rk_kernel_stats st;
    uint64_t dl = deadline();

    rk_kernel_def def = { .id = to, .actor = rt_echo_actor };

    def.config.backend = "cpu";
    def.config.max_payload = 64;
    def.config.input_capacity = 4;
    reg(rt, from, "rk_echo", 1, 64, NULL);
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_connect(rt, from, to), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, from, &k), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, from), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, to), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, from), RK_OK);
    for (unsigned char i = 0; i < 8; i++)
        assert_int_equal(rk_send(rt, k, 1, &i, 1, 128, T_LONG), RK_OK);
    do {
        assert_true(rk_now_ns() < dl);
        pause_ms(5);
        assert_int_equal(rk_kernel_stats_get(rt, from, &st), RK_OK);
    } while (st.processed < 8);
    do {
        assert_true(rk_now_ns() < dl);
        pause_ms(5);
        assert_int_equal(rk_kernel_stats_get(rt, to, &st), RK_OK);
    } while (st.queue_depth < 4);
}

static void
test_relay_full_route_target(void **state)
{
    rk_runtime *rt;
    rk_kernel b;
    rk_kernel_stats st;
    unsigned char buf[128];
    size_t len;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    rt = cuda_runtime();
    route_to_full_target(rt, "a", "b");
    /* The relay is not stuck on the 5th: it forwards a's commands. */
    assert_int_equal(rk_kernel_deactivate(rt, "a"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "a"), RK_OK);
    /* b runs: everything arrives, in order, nothing refused or lost. */
    assert_int_equal(rk_kernel_lookup(rt, "b", &b), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "b"), RK_OK);
    for (unsigned char i = 0; i < 8; i++) {
        assert_int_equal(
            rk_recv(rt, b, NULL, buf, sizeof(buf), &len, T_LONG), RK_OK);
        assert_int_equal(len, 1);
        assert_int_equal(buf[0], i);
    }
    assert_int_equal(rk_kernel_stats_get(rt, "b", &st), RK_OK);
    assert_int_equal(st.rejected, 0);
    assert_int_equal(rk_kernel_stats_get(rt, "a", &st), RK_OK);
    assert_int_equal(st.errors, 0);
    assert_int_equal(st.dead_lettered, 0);
    assert_int_equal(rk_kernel_terminate(rt, "a", T_LONG), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "b", T_LONG), RK_OK);
    rk_runtime_destroy(rt);
}

/* A kernel terminated while its route's target stays full: what its
 * device sent and the target never took is dead-lettered (RK_ETIMEDOUT)
 * after a bounded wait, and the terminate returns. */
static void
test_relay_exit_full_target(void **state)
{
    rk_runtime *rt;
    rk_kernel_stats st;
    rk_dead_letter dl;
    unsigned char buf[128];
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    rt = cuda_runtime();
    route_to_full_target(rt, "src", "sink"); /* sink is never activated */
    assert_int_equal(rk_kernel_terminate(rt, "src", T_LONG), RK_OK);
    assert_int_equal(rk_kernel_stats_get(rt, "src", &st), RK_OK);
    assert_int_equal(st.errors, 4); /* 4 went in, 4 had no room */
    for (int i = 0; i < 4; i++) {
        assert_int_equal(
            rk_dead_letter_recv(rt, &dl, buf, sizeof(buf), T_LONG), RK_OK);
        assert_int_equal(dl.error, RK_ETIMEDOUT);
        assert_string_equal(dl.kernel_id, "src");
    }
    assert_int_equal(rk_kernel_stats_get(rt, "sink", &st), RK_OK);
    assert_int_equal(st.queue_depth, 4);
    assert_int_equal(st.rejected, 0);
    rk_runtime_destroy(rt);
}

/* -------------------------------------------- device-wide co-residency */

static void
test_coresidency_device_wide(void **state)
{
    rk_runtime *rt;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    /* The stand-in: 2 SMs x 2 blocks = 4 resident blocks. */
    rt = cuda_runtime();
    reg(rt, "left", "rk_echo", 3, 0, NULL);
    reg(rt, "right", "rk_sum", 3, 0, NULL);
    reg(rt, "small", "rk_echo", 1, 0, NULL);
    assert_int_equal(rk_kernel_launch(rt, "left"), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "right"), RK_ENOTSUP);
    assert_non_null(strstr(rk_errdetail(), "'right'"));
    assert_non_null(strstr(rk_errdetail(), "'left'"));
    assert_non_null(strstr(rk_errdetail(), "together"));
    assert_int_equal(rk_kernel_launch(rt, "small"), RK_OK); /* 3 + 1 */
    assert_int_equal(rk_kernel_terminate(rt, "left", T_LONG), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "right"), RK_OK); /* 1 + 3 */
    assert_int_equal(rk_kernel_terminate(rt, "right", T_LONG), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "small", T_LONG), RK_OK);
    rk_runtime_destroy(rt);
}

/* ---------------------------------------- rk_buffer frees while resident */

static void
test_buffer_free_deferred(void **state)
{
    rk_runtime *rt;
    rk_buffer *buf;
    rk_buffer_config bc
        = { .dtype = RK_DTYPE_F32, .dims = { 256 }, .device = RK_DEVICE_CUDA };
    float in[256], out[256];
    void *dptr;
    unsigned hangs0 = hangs();
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    for (int i = 0; i < 256; i++)
        in[i] = (float)i;
    rt = cuda_runtime();
    reg(rt, "res", "rk_echo", 1, 0, NULL);
    assert_int_equal(rk_buffer_create(&buf, &bc), RK_OK);
    assert_int_equal(rk_buffer_copy_from(buf, in, sizeof(in)), RK_OK);
    assert_int_equal(rk_buffer_device(buf, RK_ACCESS_READ, &dptr), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "res"), RK_OK);
    /* A CUDA free now would wait for the persistent kernel: deferred
     * (the stand-in would report a free that waits: FAKE_CUDA_HANG_MS). */
    setenv("FAKE_CUDA_HANG_MS", "200", 1);
    rk_buffer_destroy(buf);
    assert_int_equal(hangs(), hangs0);
    assert_true(rk__mem_deferred() >= 1); /* the device side at least */
    unsetenv("FAKE_CUDA_HANG_MS");
    /* Buffers still work beside a resident kernel (copies do not wait). */
    assert_int_equal(rk_buffer_create(&buf, &bc), RK_OK);
    assert_int_equal(rk_buffer_copy_from(buf, in, sizeof(in)), RK_OK);
    assert_int_equal(rk_buffer_device(buf, RK_ACCESS_READ, &dptr), RK_OK);
    assert_int_equal(rk_buffer_copy_to(buf, out, sizeof(out)), RK_OK);
    assert_memory_equal(in, out, sizeof(in));
    /* The kernel returns: the deferred frees run. */
    assert_int_equal(rk_kernel_terminate(rt, "res", T_LONG), RK_OK);
    assert_int_equal(rk__mem_deferred(), 0);
    rk_buffer_destroy(buf);
    assert_int_equal(hangs(), hangs0);
    rk_runtime_destroy(rt);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_watchdog_per_block),
        cmocka_unit_test(test_watchdog_releases_residency),
        cmocka_unit_test(test_relay_full_route_target),
        cmocka_unit_test(test_relay_exit_full_target),
        cmocka_unit_test(test_coresidency_device_wide),
        cmocka_unit_test(test_buffer_free_deferred),
    };
    const struct rk__cuda_driver *drv;
    char cache_dir[64] = "/tmp/rk-robust-XXXXXX", cmd[128];
    int rc;

    if (getenv("RK_TEST_CUDA_REAL") != NULL) {
        printf("test_cuda_robust: stand-in only, skipped on a GPU\n");
        return 0;
    }
    setenv("RK_CUDA_DRIVER", FAKE_CUDA_LIB, 1);
    if (mkdtemp(cache_dir) == NULL)
        return 1;
    setenv("RK_KERNEL_CACHE_DIR", cache_dir, 1);
    kernels_src = cuda_slurp("tests/kernels/test_kernels.cu");
    if (kernels_src == NULL || rk__cuda_driver(&drv) != RK_OK)
        return 1;
    *(void **)&hangs = dlsym(drv->lib, "fake_cuda_hangs");
    if (hangs == NULL)
        return 1;
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(kernels_src);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cache_dir);
    if (system(cmd) != 0)
        rc = 1;
    return rc;
}
