/*
 * One-shot kernels without a GPU (ringkernel/oneshot.h, dev_oneshot.h):
 *   - the cpu backend runs a kernel's host fallback, here the host build
 *     of the same device source (tests/kernels/oneshot_kernels.cu) run
 *     one thread per block, with rk_buffers: synchronously, started with
 *     a completion, and from an actor's handler (rk_ctx_execute_kernel);
 *   - a kernel with CUDA C only is refused on the cpu backend, naming it;
 *   - bad launches (grid, block, arguments, buffers) are RK_EINVAL naming
 *     the kernel, with nothing run;
 *   - the grid barrier's host twin is a real barrier across the block
 *     threads (a two-phase grid sum, many rounds, reused without reset),
 *     and in a non-cooperative launch it does not wait and records the
 *     misuse;
 *   - the warp helpers' host twins are those of a warp of one lane.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/oneshot_kernels.cu"
#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

/* ---------------------------------------------------------- host grids */

typedef struct blk_arg {
    const rk_dev_host_kernel *k;
    const rk_dev_oneshot_args *a;
    rk_dev_u32 b, n;
} blk_arg;

static void *
blk_main(void *p)
{
    blk_arg *ba = p;
    ba->k->run(ba->a, ba->b, ba->n);
    return NULL;
}

/* Runs k over grid blocks, one thread each, as the stand-in does. */
static void
host_grid(const rk_dev_host_kernel *k, const rk_dev_oneshot_args *a,
    uint32_t grid)
{
    pthread_t th[64];
    blk_arg ba[64];
    assert_true(grid <= 64);
    for (uint32_t b = 0; b < grid; b++) {
        ba[b] = (blk_arg) { k, a, b, grid };
        assert_int_equal(pthread_create(&th[b], NULL, blk_main, &ba[b]), 0);
    }
    for (uint32_t b = 0; b < grid; b++)
        pthread_join(th[b], NULL);
}

/* The host fallback of every kernel here: its host build (user names the
 * rk_dev_host_kernel) over the launch's grid. */
static int
fallback(const rk_oneshot_host_args *h)
{
    rk_dev_oneshot_args a;
    rk_dev_barrier bar;

    memset(&a, 0, sizeof(a));
    memset(&bar, 0, sizeof(bar));
    for (size_t i = 0; i < h->nbuf; i++)
        a.buf[i] = (rk_dev_u64)(uintptr_t)h->bufs[i];
    a.nbuf = (rk_dev_u32)h->nbuf;
    a.grid_bar = (rk_dev_u64)(uintptr_t)&bar;
    a.coop = 1;
    memcpy(a.arg, h->args, h->args_len);
    a.arg_len = (rk_dev_u32)h->args_len;
    host_grid((const rk_dev_host_kernel *)h->user, &a, h->grid);
    return RK_OK;
}

static rk_buffer *
u32_buffer(size_t n)
{
    rk_buffer *b = NULL;
    rk_buffer_config c = { .dtype = RK_DTYPE_U32, .dims = { n } };
    assert_int_equal(rk_buffer_create(&b, &c), RK_OK);
    return b;
}

static void
fill(rk_buffer *b, size_t n, uint32_t mul, uint32_t add)
{
    uint32_t *p;
    assert_int_equal(rk_buffer_host(b, RK_ACCESS_DISCARD, (void **)&p), RK_OK);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint32_t)i * mul + add;
}

#define N 1000

static rk_oneshot *
vadd_kernel(void)
{
    rk_oneshot *k = NULL;
    rk_oneshot_def d = { .name = "vadd",
        .entry = "rk_os_vadd",
        .host = fallback,
        .user = (void *)&rk_dev_host_kernel_rk_os_vadd,
        .backend = "cpu" };
    assert_int_equal(rk_oneshot_create(&d, &k), RK_OK);
    assert_string_equal(rk_oneshot_backend(k), "cpu");
    return k;
}

static void
check_vadd(rk_buffer *c)
{
    uint32_t *p;
    assert_int_equal(rk_buffer_host(c, RK_ACCESS_READ, (void **)&p), RK_OK);
    for (size_t i = 0; i < N; i++)
        assert_int_equal(p[i], 3 * i + 7);
}

static void
test_vadd_sync_and_started(void **state)
{
    (void)state;
    rk_oneshot *k = vadd_kernel();
    rk_buffer *b[3] = { u32_buffer(N), u32_buffer(N), u32_buffer(N) };
    rk_os_n n = { N };
    rk_oneshot_launch l = { .grid = 3, .block = 1, .args = &n,
        .args_len = sizeof(n), .bufs = b, .nbuf = 3 };
    rk_oneshot_done *d = NULL;

    fill(b[0], N, 1, 3);
    fill(b[1], N, 2, 4);
    assert_int_equal(rk_oneshot_run(k, &l), RK_OK);
    check_vadd(b[2]);

    assert_int_equal(rk_buffer_zeros(b[2]), RK_OK);
    n.n = N; /* the launch copied the arguments: changing them is safe */
    assert_int_equal(rk_oneshot_start(k, &l, &d), RK_OK);
    n.n = 1;
    assert_int_equal(rk_oneshot_wait(d, RK_WAIT_FOREVER), RK_OK);
    assert_int_equal(rk_oneshot_wait(d, RK_NO_WAIT), RK_OK); /* repeatable */
    rk_oneshot_done_free(d);
    check_vadd(b[2]);
    for (int i = 0; i < 3; i++)
        rk_buffer_destroy(b[i]);
    rk_oneshot_destroy(k);
}

static int
failing(const rk_oneshot_host_args *h)
{
    (void)h;
    return RK_EINTERNAL;
}

/* A fallback's failure is the launch's result, also through a completion,
 * with a detail naming the kernel. */
static void
test_fallback_failure(void **state)
{
    (void)state;
    rk_oneshot *k = NULL;
    rk_oneshot_def d = { .name = "breaks", .host = failing };
    rk_oneshot_launch l = { .grid = 1, .block = 1 };
    rk_oneshot_done *done = NULL;

    assert_int_equal(rk_oneshot_create(&d, &k), RK_OK);
    assert_int_equal(rk_oneshot_run(k, &l), RK_EINTERNAL);
    assert_non_null(strstr(rk_errdetail(), "'breaks'"));
    assert_int_equal(rk_oneshot_start(k, &l, &done), RK_OK);
    assert_int_equal(rk_oneshot_wait(done, RK_WAIT_FOREVER), RK_EINTERNAL);
    assert_non_null(strstr(rk_errdetail(), "'breaks'"));
    rk_oneshot_done_free(done);
    rk_oneshot_destroy(k);
}

static void
test_cpu_refuses_cuda_only(void **state)
{
    (void)state;
    rk_oneshot *k = NULL;
    rk_oneshot_def d = { .name = "gpu_only",
        .source = "RK_DEV_ONESHOT(gpu_only, x)",
        .backend = "cpu" };
    assert_int_equal(rk_oneshot_create(&d, &k), RK_ENOTSUP);
    assert_null(k);
    assert_non_null(strstr(rk_errdetail(), "'gpu_only'"));
    assert_non_null(strstr(rk_errdetail(), "no host fallback"));

    d = (rk_oneshot_def) { .name = "nothing" };
    assert_int_equal(rk_oneshot_create(&d, &k), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "'nothing'"));
    d = (rk_oneshot_def) { .host = fallback };
    assert_int_equal(rk_oneshot_create(&d, &k), RK_EINVAL);
    d = (rk_oneshot_def) { .name = "x", .host = fallback, .backend = "tpu" };
    assert_int_equal(rk_oneshot_create(&d, &k), RK_ENOTFOUND);
    assert_non_null(strstr(rk_errdetail(), "'x'"));
}

static void
test_bad_launches(void **state)
{
    (void)state;
    rk_oneshot *k = vadd_kernel();
    rk_buffer *b[9] = { u32_buffer(4) };
    unsigned char big[RK_ONESHOT_ARG_MAX + 1] = { 0 };
    rk_oneshot_launch ok = { .grid = 1, .block = 1, .bufs = b, .nbuf = 1 };
    rk_oneshot_launch l;
    rk_oneshot_done *d = NULL;

    for (int i = 1; i < 9; i++)
        b[i] = b[0];
    l = ok, l.grid = 0;
    assert_int_equal(rk_oneshot_run(k, &l), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "'vadd'"));
    l = ok, l.grid = 65536;
    assert_int_equal(rk_oneshot_run(k, &l), RK_EINVAL);
    l = ok, l.block = 1025;
    assert_int_equal(rk_oneshot_start(k, &l, &d), RK_EINVAL);
    assert_null(d);
    assert_non_null(strstr(rk_errdetail(), "1..1024"));
    l = ok, l.args = big, l.args_len = sizeof(big);
    assert_int_equal(rk_oneshot_run(k, &l), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "at most 256"));
    l = ok, l.args_len = 4; /* args NULL */
    assert_int_equal(rk_oneshot_run(k, &l), RK_EINVAL);
    l = ok, l.nbuf = 9;
    assert_int_equal(rk_oneshot_run(k, &l), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "at most 8"));
    b[1] = NULL;
    l = ok, l.nbuf = 2;
    assert_int_equal(rk_oneshot_run(k, &l), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "buffer 1 is NULL"));
    assert_int_equal(rk_oneshot_run(NULL, &ok), RK_EINVAL);
    assert_int_equal(rk_oneshot_run(k, NULL), RK_EINVAL);
    assert_int_equal(rk_oneshot_wait(NULL, 0), RK_EINVAL);
    assert_int_equal(rk_ctx_execute_kernel(NULL, k, &ok, NULL), RK_EINVAL);
    rk_oneshot_done_free(NULL);
    rk_oneshot_destroy(NULL);
    rk_buffer_destroy(b[0]);
    rk_oneshot_destroy(k);
}

/* ---------------------------------------------------------- from a handler */

static rk_oneshot *h_kernel;
static rk_buffer *h_bufs[3];

/* Runs vadd over the buffers (payload: 1 = synchronously, 2 = started,
 * then waited) and replies with the launch's result. */
static int
h_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    rk_os_n n = { N };
    rk_oneshot_launch l = { .grid = 2, .block = 1, .args = &n,
        .args_len = sizeof(n), .bufs = h_bufs, .nbuf = 3 };
    rk_oneshot_done *d = NULL;
    int32_t rc;

    if (((const unsigned char *)m->data)[0] == 1) {
        rc = rk_ctx_execute_kernel(ctx, h_kernel, &l, NULL);
    } else {
        rc = rk_ctx_execute_kernel(ctx, h_kernel, &l, &d);
        if (rc == RK_OK)
            rc = rk_oneshot_wait(d, RK_WAIT_FOREVER);
        rk_oneshot_done_free(d);
    }
    return rk_ctx_reply(ctx, m, 0, &rc, sizeof(rc));
}

static void
test_execute_from_handler(void **state)
{
    (void)state;
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "runner", .handler = h_handler };
    rk_kernel k;
    rk_msg_header rh;
    int32_t rc = -1;
    size_t len = 0;

    h_kernel = vadd_kernel();
    for (int i = 0; i < 3; i++)
        h_bufs[i] = u32_buffer(N);
    def.config.backend = "cpu";
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "runner"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "runner"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "runner", &k), RK_OK);
    for (unsigned char how = 1; how <= 2; how++) {
        fill(h_bufs[0], N, 1, 3);
        fill(h_bufs[1], N, 2, 4);
        assert_int_equal(rk_buffer_zeros(h_bufs[2]), RK_OK);
        assert_int_equal(rk_request(rt, k, 0, &how, 1, &rh, &rc, sizeof(rc),
                             &len, RT_LONG),
            RK_OK);
        assert_int_equal(len, sizeof(rc));
        assert_int_equal(rc, RK_OK);
        check_vadd(h_bufs[2]);
    }
    rk_runtime_destroy(rt);
    for (int i = 0; i < 3; i++)
        rk_buffer_destroy(h_bufs[i]);
    rk_oneshot_destroy(h_kernel);
}

/* ---------------------------------------------------------- host twins */

/* The grid barrier across 8 block threads: the total is only right, in
 * every block's copy, if no block passes a barrier before all arrived;
 * many rounds on one barrier (generations, no reset). */
static void
test_grid_barrier_host_twin(void **state)
{
    (void)state;
    enum { G = 8, M = 4096 };
    static uint32_t in[M], part[G], out[1 + G];
    rk_dev_oneshot_args a;
    rk_dev_barrier bar;
    uint64_t want = 0;

    memset(&a, 0, sizeof(a));
    memset(&bar, 0, sizeof(bar));
    a.buf[0] = (rk_dev_u64)(uintptr_t)in;
    a.buf[1] = (rk_dev_u64)(uintptr_t)part;
    a.buf[2] = (rk_dev_u64)(uintptr_t)out;
    a.grid_bar = (rk_dev_u64)(uintptr_t)&bar;
    a.coop = 1;
    {
        rk_os_n n = { M };
        memcpy(a.arg, &n, sizeof(n));
    }
    for (int round = 0; round < 50 * RT_SCALE; round++) {
        want = 0;
        for (uint32_t i = 0; i < M; i++) {
            in[i] = (uint32_t)(i * 7u + (uint32_t)round);
            want += in[i];
        }
        memset(out, 0, sizeof(out));
        memset(part, 0, sizeof(part));
        host_grid(&rk_dev_host_kernel_rk_os_gridsum, &a, G);
        for (uint32_t b = 0; b <= G; b++)
            assert_int_equal(out[b], (uint32_t)want);
    }
    assert_int_equal(atomic_load(&bar.count), 0);
    assert_int_equal(atomic_load(&bar.gen), 2u * 50u * RT_SCALE);
    assert_int_equal(atomic_load(&bar.misuse), 0);
}

/* Not cooperative: rk_dev_sync_grid returns at once (0) in every block
 * and records the misuse; nothing waits. */
static void
test_grid_barrier_misuse_host(void **state)
{
    (void)state;
    static uint32_t out[4] = { 7, 7, 7, 7 };
    rk_dev_oneshot_args a;
    rk_dev_barrier bar;

    memset(&a, 0, sizeof(a));
    memset(&bar, 0, sizeof(bar));
    a.buf[0] = (rk_dev_u64)(uintptr_t)out;
    a.grid_bar = (rk_dev_u64)(uintptr_t)&bar;
    host_grid(&rk_dev_host_kernel_rk_os_nocoop, &a, 4);
    for (int b = 0; b < 4; b++)
        assert_int_equal(out[b], 0);
    assert_int_equal(atomic_load(&bar.misuse), 1);
    assert_int_equal(atomic_load(&bar.count), 0);
}

static void
test_warp_host_twins(void **state)
{
    (void)state;
    static uint32_t out[8];
    rk_dev_oneshot_args a;

    memset(&a, 0, sizeof(a));
    a.buf[0] = (rk_dev_u64)(uintptr_t)out;
    host_grid(&rk_dev_host_kernel_rk_os_warp, &a, 2);
    for (int b = 0; b < 2; b++) {
        assert_int_equal(out[4 * b], 1);     /* sum over one lane of 1 */
        assert_int_equal(out[4 * b + 1], 1); /* lane 0 is even */
        assert_int_equal(out[4 * b + 2], 1); /* all(1) */
        assert_int_equal(out[4 * b + 3], 0); /* any(lane == 1): none */
    }
    assert_int_equal(rk_dev_warp_size(), 1);
    assert_int_equal(rk_dev_shfl_xor32(5, 1), 5);
    assert_int_equal(rk_dev_shfl_down32(9, 1), 9);
    assert_int_equal(rk_dev_ballot(0), 0);
    assert_int_equal(rk_dev_vote_all(0), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vadd_sync_and_started),
        cmocka_unit_test(test_fallback_failure),
        cmocka_unit_test(test_cpu_refuses_cuda_only),
        cmocka_unit_test(test_bad_launches),
        cmocka_unit_test(test_execute_from_handler),
        cmocka_unit_test(test_grid_barrier_host_twin),
        cmocka_unit_test(test_grid_barrier_misuse_host),
        cmocka_unit_test(test_warp_host_twins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
