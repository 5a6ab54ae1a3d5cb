/*
 * The stand-in driver (tests/fake_cuda) fails where the real one fails.
 *
 * Driven directly through the driver table (src/device/cuda_driver.h),
 * the way the backend and the memory layer call it:
 *   - device memory (cuMemAlloc) is not host memory: a host read of a
 *     device pointer crashes, the copies translate, mapped pinned memory
 *     stays host-readable;
 *   - a module load, cuMemFree, cuMemFreeHost and cuCtxSynchronize wait
 *     for the running grids; with a persistent grid resident they would
 *     never return, and the stand-in reports that (FAKE_ERROR_WOULD_HANG
 *     and fake_cuda_hangs()) instead of hanging the suite;
 *   - a second launch on a stream starts only when the first grid ended;
 *   - a block that traps loses the context: every grid of it stops, and
 *     its error is sticky on every stream and call (the last case: the
 *     process's context stays lost).
 * The grids are the host build of tests/kernels/test_kernels.cu's rk_echo,
 * launched from a real NVRTC image, on regions laid out by devhost.
 *
 * Stand-in only: there is nothing to learn from it on a real GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/cuda/devhost.h"
#include "common/common.h"
#include "cuda_helpers.h"
#include "device/cuda_driver.h"
#include "ringkernel/ringkernel.h"

#define WOULD_HANG 9999 /* fake_cuda.c's FAKE_ERROR_WOULD_HANG */

static const struct rk__cuda_driver *drv;
static unsigned (*hangs)(void);
static const char *(*last_hang)(void);
static char *kernels_src;

static void
enter(void)
{
    assert_int_equal(rk__cuda_enter(0, &drv), RK_OK);
}

/* One persistent rk_echo grid of one block on `stream`, on a region of
 * mapped pinned memory. */
typedef struct grid {
    void *mem;
    rk__dh d;
} grid;

static rk__cu_function
echo_fn(rk__cu_module *mod, rk__nvrtc_image *img)
{
    rk__nvrtc_src src
        = { .name = "test_kernels.cu", .source = kernels_src, .cc = 90 };
    rk__cu_function fn;

    assert_int_equal(rk__nvrtc_compile(&src, img), RK_OK);
    assert_int_equal(drv->cuModuleLoadData(mod, img->data), 0);
    assert_int_equal(drv->cuModuleGetFunction(&fn, *mod, "rk_echo"), 0);
    return fn;
}

/* Polls the stream until it no longer says NOT_READY; its result. */
static rk__cu_result
stream_settles(rk__cu_stream st, uint64_t dl)
{
    rk__cu_result r;
    while ((r = drv->cuStreamQuery(st)) == 600) {
        assert_true(rk_now_ns() < dl);
        sched_yield();
    }
    return r;
}

static void
grid_launch(grid *g, rk__cu_function fn, rk__cu_stream st)
{
    rk__dh_cfg c = { .nblocks = 1,
        .nin = 1,
        .capacity = 4,
        .slot_size = 128,
        .batch = 1,
        .kernel_id = 1 };
    size_t n = rk__dh_size(&c);
    rk__cu_dptr dev;
    void *params[1];

    assert_true(n != 0);
    assert_int_equal(drv->cuMemHostAlloc(&g->mem, n, 3), 0);
    assert_int_equal(drv->cuMemHostGetDevicePointer(&dev, g->mem, 0), 0);
    assert_int_equal(rk__dh_place(&g->d, &c, g->mem, dev, NULL), RK_OK);
    params[0] = &g->d.kargs;
    assert_int_equal(drv->cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1,
                         g->d.kargs.stage_bytes, st, params, NULL),
        0);
}

static uint64_t
deadline(void)
{
    return rk_now_ns() + 30ull * 1000000000ull;
}

/* One request through the grid's lanes, and its echo back. */
static void
round_trip(grid *g, unsigned char v)
{
    rk_msg_header h = { .magic = RK_MSG_MAGIC, .type_id = 1 };
    unsigned char buf[128];
    size_t len;
    uint64_t dl = deadline();

    assert_int_equal(rk__dh_send(&g->d, 0, &h, &v, 1), RK_OK);
    while (rk__dh_recv(&g->d, 0, buf, sizeof(buf), &len) != RK_OK) {
        assert_true(rk_now_ns() < dl);
        sched_yield();
    }
    assert_int_equal(len, RK_MSG_HEADER_SIZE + 1);
    assert_int_equal(buf[RK_MSG_HEADER_SIZE], v);
}

static uint32_t
ack_of(grid *g)
{
    return atomic_load_explicit(&g->d.ctl->blk[0].ack, memory_order_acquire);
}

/* cuMemAlloc's addresses are the device's: the host cannot read them;
 * the copies and memset reach them; pinned memory is the host's. */
static void
test_device_memory_is_not_host_memory(void **state)
{
    rk__cu_dptr d;
    unsigned char in[300], out[300];
    unsigned char *pinned;
    pid_t pid;
    int status;
    (void)state;

    enter();
    for (int i = 0; i < 300; i++)
        in[i] = (unsigned char)(i * 7);
    assert_int_equal(drv->cuMemAlloc(&d, sizeof(in)), 0);
    assert_int_equal(drv->cuMemcpyHtoD(d, in, sizeof(in)), 0);
    memset(out, 0, sizeof(out));
    assert_int_equal(drv->cuMemcpyDtoH(out, d, sizeof(out)), 0);
    assert_memory_equal(in, out, sizeof(in));
    assert_int_equal(drv->cuMemsetD8(d + 10, 0xab, 5), 0);
    assert_int_equal(drv->cuMemcpyDtoH(out, d, sizeof(out)), 0);
    assert_int_equal(out[9], in[9]);
    assert_int_equal(out[10], 0xab);
    assert_int_equal(out[14], 0xab);
    assert_int_equal(out[15], in[15]);

    /* A host read of the device address dies (in a child: the test goes
     * on). Under ASan the child reports the SEGV and aborts. */
    fflush(NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        volatile unsigned char c = *(volatile unsigned char *)(uintptr_t)d;
        (void)c;
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_false(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* Mapped pinned memory: the host reads and writes it directly, and its
     * device address is the host address (unified addressing). */
    assert_int_equal(drv->cuMemHostAlloc((void **)&pinned, 64, 3), 0);
    pinned[3] = 42;
    assert_int_equal(
        drv->cuMemcpyDtoH(out, (rk__cu_dptr)(uintptr_t)pinned, 4), 0);
    assert_int_equal(out[3], 42);
    assert_int_equal(drv->cuMemFreeHost(pinned), 0);
    assert_int_equal(drv->cuMemFree(d), 0);
    /* Not a device allocation (any more): refused. */
    assert_int_not_equal(drv->cuMemFree(d), 0);
}

/* While a persistent grid runs, the calls that wait for the device's work
 * would never return: the stand-in reports each; launches on one stream
 * run in order; once the grids end the same calls succeed. */
static void
test_waits_and_stream_order(void **state)
{
    rk__cu_module mod, mod2;
    rk__cu_function fn;
    rk__cu_stream st;
    rk__cu_dptr d;
    rk__nvrtc_image img;
    grid a, b;
    unsigned before;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    assert_non_null(hangs); /* the stand-in's test-only queries */
    assert_non_null(last_hang);
    enter();
    fn = echo_fn(&mod, &img);
    assert_int_equal(drv->cuStreamCreate(&st, 1), 0);
    assert_int_equal(drv->cuMemAlloc(&d, 256), 0);
    grid_launch(&a, fn, st);
    grid_launch(&b, fn, st); /* behind a on the same stream */
    assert_int_equal(
        rk__dh_wait_ack(&a.d, RK_DEV_ACK_HELD, deadline()), RK_OK);
    rk__dh_post(&a.d, RK_DEV_CMD_RUN);
    for (int i = 0; i < 20; i++) {
        round_trip(&a, (unsigned char)i);
        assert_int_equal(ack_of(&b), RK_DEV_ACK_NONE); /* not started */
    }
    assert_int_equal(drv->cuStreamQuery(st), 600); /* CUDA_ERROR_NOT_READY */

    /* Each of these waits for a grid that does not end. */
    setenv("FAKE_CUDA_HANG_MS", "100", 1);
    before = hangs();
    assert_int_equal(drv->cuModuleLoadData(&mod2, img.data), WOULD_HANG);
    assert_non_null(strstr(last_hang(), "cuModuleLoadData"));
    assert_int_equal(drv->cuMemFree(d), WOULD_HANG);
    assert_non_null(strstr(last_hang(), "cuMemFree"));
    assert_int_equal(drv->cuCtxSynchronize(), WOULD_HANG);
    assert_non_null(strstr(last_hang(), "cuCtxSynchronize"));
    assert_int_equal(drv->cuMemFreeHost(b.mem), WOULD_HANG);
    assert_int_equal(drv->cuStreamSynchronize(st), WOULD_HANG);
    assert_int_equal(hangs(), before + 5);
    unsetenv("FAKE_CUDA_HANG_MS");

    /* a ends: b starts (it acknowledges HELD), and runs. */
    rk__dh_post(&a.d, RK_DEV_CMD_STOP);
    assert_int_equal(
        rk__dh_wait_ack(&a.d, RK_DEV_ACK_EXITED, deadline()), RK_OK);
    assert_int_equal(
        rk__dh_wait_ack(&b.d, RK_DEV_ACK_HELD, deadline()), RK_OK);
    rk__dh_post(&b.d, RK_DEV_CMD_RUN);
    round_trip(&b, 99);
    rk__dh_post(&b.d, RK_DEV_CMD_STOP);
    assert_int_equal(drv->cuStreamSynchronize(st), 0);
    assert_int_equal(drv->cuStreamQuery(st), 0);

    /* Nothing runs: the same calls return at once. */
    before = hangs();
    assert_int_equal(drv->cuCtxSynchronize(), 0);
    assert_int_equal(drv->cuMemFree(d), 0);
    rk__dh_fini(&a.d);
    rk__dh_fini(&b.d);
    assert_int_equal(drv->cuMemFreeHost(a.mem), 0);
    assert_int_equal(drv->cuMemFreeHost(b.mem), 0);
    assert_int_equal(drv->cuStreamDestroy(st), 0);
    assert_int_equal(drv->cuModuleLoadData(&mod2, img.data), 0);
    assert_int_equal(drv->cuModuleUnload(mod2), 0);
    assert_int_equal(drv->cuModuleUnload(mod), 0);
    rk__nvrtc_image_free(&img);
    assert_int_equal(hangs(), before);
}

/* A block traps (rk_trap on 0xee): its grid and the other stream's grid
 * stop, and the context's error (FAKE_CUDA_TRAP_ERROR, here 710
 * CUDA_ERROR_ASSERT) is sticky on every stream and call that touches the
 * context; frees release what they are given and report it; nothing
 * waits. Last: the context stays lost. */
static void
test_trap_loses_context(void **state)
{
    rk__cu_module mod, mod2;
    rk__cu_function echo, trap;
    rk__cu_stream s1, s2;
    rk__cu_dptr d, d2;
    rk__nvrtc_image img;
    rk_msg_header h = { .magic = RK_MSG_MAGIC, .type_id = 1 };
    unsigned char bad = 0xee, buf[16] = { 0 };
    void *params[1], *p;
    grid a, b;
    unsigned before;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();

    enter();
    setenv("FAKE_CUDA_TRAP_ERROR", "710", 1);
    echo = echo_fn(&mod, &img);
    assert_int_equal(drv->cuModuleGetFunction(&trap, mod, "rk_trap"), 0);
    assert_int_equal(drv->cuStreamCreate(&s1, 1), 0);
    assert_int_equal(drv->cuStreamCreate(&s2, 1), 0);
    assert_int_equal(drv->cuMemAlloc(&d, 256), 0);
    grid_launch(&a, trap, s1);
    grid_launch(&b, echo, s2);
    assert_int_equal(
        rk__dh_wait_ack(&a.d, RK_DEV_ACK_HELD, deadline()), RK_OK);
    assert_int_equal(
        rk__dh_wait_ack(&b.d, RK_DEV_ACK_HELD, deadline()), RK_OK);
    rk__dh_post(&a.d, RK_DEV_CMD_RUN);
    rk__dh_post(&b.d, RK_DEV_CMD_RUN);
    round_trip(&a, 1);
    round_trip(&b, 2);
    before = hangs();

    assert_int_equal(rk__dh_send(&a.d, 0, &h, &bad, 1), RK_OK);
    /* Both streams report it once every grid stopped. */
    assert_int_equal(stream_settles(s1, deadline()), 710);
    assert_int_equal(stream_settles(s2, deadline()), 710);
    /* Neither grid ended by itself: no EXITED, and the trap's message
     * is still at a's lane head, b's input untaken. */
    assert_int_not_equal(ack_of(&a), RK_DEV_ACK_EXITED);
    assert_int_not_equal(ack_of(&b), RK_DEV_ACK_EXITED);
    assert_int_equal(rk__dh_pending(&a.d, 0), 1);
    /* Sticky: every call on the context fails with it, at once. */
    assert_int_equal(drv->cuStreamSynchronize(s2), 710);
    assert_int_equal(drv->cuCtxSynchronize(), 710);
    assert_int_equal(drv->cuMemcpyHtoD(d, buf, sizeof(buf)), 710);
    assert_int_equal(drv->cuMemcpyDtoH(buf, d, sizeof(buf)), 710);
    assert_int_equal(drv->cuMemcpyHtoDAsync(d, buf, sizeof(buf), s1), 710);
    assert_int_equal(drv->cuMemsetD8(d, 0, 16), 710);
    assert_int_equal(drv->cuMemAlloc(&d2, 256), 710);
    assert_int_equal(drv->cuMemHostAlloc(&p, 64, 3), 710);
    assert_int_equal(drv->cuModuleLoadData(&mod2, img.data), 710);
    params[0] = &b.d.kargs;
    assert_int_equal(drv->cuLaunchKernel(echo, 1, 1, 1, 32, 1, 1,
                         b.d.kargs.stage_bytes, s2, params, NULL),
        710);
    /* Frees and destroys report it too, having released what they got
     * (under ASan nothing leaks); none of them waited. */
    rk__dh_fini(&a.d);
    rk__dh_fini(&b.d);
    assert_int_equal(drv->cuMemFree(d), 710);
    assert_int_equal(drv->cuMemFreeHost(a.mem), 710);
    assert_int_equal(drv->cuMemFreeHost(b.mem), 710);
    assert_int_equal(drv->cuStreamDestroy(s1), 710);
    assert_int_equal(drv->cuStreamDestroy(s2), 710);
    assert_int_equal(drv->cuModuleUnload(mod), 710);
    assert_int_equal(hangs(), before);
    rk__nvrtc_image_free(&img);
    unsetenv("FAKE_CUDA_TRAP_ERROR");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_memory_is_not_host_memory),
        cmocka_unit_test(test_waits_and_stream_order),
        cmocka_unit_test(test_trap_loses_context), /* last: ctx lost */
    };
    char cache_dir[64] = "/tmp/rk-standin-XXXXXX";
    int rc;

    if (getenv("RK_TEST_CUDA_REAL") != NULL) {
        printf("test_cuda_standin: stand-in only, skipped on a GPU\n");
        return 0;
    }
    setenv("RK_CUDA_DRIVER", FAKE_CUDA_LIB, 1);
    if (mkdtemp(cache_dir) == NULL)
        return 1;
    setenv("RK_KERNEL_CACHE_DIR", cache_dir, 1);
    if (rk__cuda_driver(&drv) != RK_OK) {
        fprintf(stderr, "no stand-in driver: %s\n", rk_errdetail());
        return 1;
    }
    *(void **)&hangs = dlsym(drv->lib, "fake_cuda_hangs");
    *(void **)&last_hang = dlsym(drv->lib, "fake_cuda_last_hang");
    kernels_src = cuda_slurp("tests/kernels/test_kernels.cu");
    if (kernels_src == NULL)
        return 1;
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(kernels_src);
    rmdir(cache_dir);
    return rc;
}
