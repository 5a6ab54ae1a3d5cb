/*
 * rk_kernel_output_arm: waiting for a kernel's output through an eventfd
 * (what the Python package's async receive uses with loop.add_reader).
 *
 * Each test fails if the feature breaks: a wake-up that never comes makes
 * poll() time out (RT_LONG, a backstop, never a measure), an eventfd
 * written while nobody armed it is readable when it must not be, and the
 * ping-pong loop counts every wait it needed so that it cannot pass
 * without exercising the arm. No test asserts on time.
 */
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

#define LONG_MS 30000 /* poll backstop: a lost wake-up fails here */

typedef struct fixture {
    rk_runtime *rt;
    rk_kernel k;
} fixture;

static void
start_echo(fixture *f)
{
    rk_kernel_def def = { .id = "echo", .actor = rt_echo_actor };

    f->rt = rt_new_runtime();
    assert_int_equal(rk_runtime_register(f->rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(f->rt, "echo"), RK_OK);
    assert_int_equal(rk_kernel_activate(f->rt, "echo"), RK_OK);
    assert_int_equal(rk_kernel_lookup(f->rt, "echo", &f->k), RK_OK);
}

/* 1 when fd is readable within ms milliseconds, 0 when not. */
static int
readable(int fd, int ms)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    int n;

    do
        n = poll(&p, 1, ms);
    while (n < 0);
    return n > 0 && (p.revents & POLLIN) != 0;
}

static void
reset(int fd)
{
    uint64_t v;

    assert_int_equal(read(fd, &v, sizeof(v)), (ssize_t)sizeof(v));
    assert_true(v >= 1);
}

/* Waits (armed, through the eventfd) until an output is there. Returns
 * how many times it had to wait on the eventfd. */
static int
wait_output(fixture *f)
{
    int waits = 0;

    for (;;) {
        int fd = -1;
        int rc = rk_kernel_output_arm(f->rt, f->k, &fd);
        if (rc == RK_EALREADY)
            return waits;
        assert_int_equal(rc, RK_OK);
        assert_true(fd >= 0);
        assert_true(readable(fd, LONG_MS)); /* else: lost wake-up */
        reset(fd);
        waits++;
    }
}

static void
test_arm_then_output_wakes(void **state)
{
    fixture f;
    int fd = -1, fd2 = -1;
    char buf[8];
    size_t len = 0;

    (void)state;
    start_echo(&f);
    assert_int_equal(rk_kernel_output_arm(f.rt, f.k, &fd), RK_OK);
    assert_true(fd >= 0);
    assert_false(readable(fd, 0)); /* armed, nothing sent */
    assert_int_equal(rk_send(f.rt, f.k, 0, "x", 1, 128, RT_LONG), RK_OK);
    assert_true(readable(fd, LONG_MS));
    reset(fd);
    assert_int_equal(
        rk_recv(f.rt, f.k, NULL, buf, sizeof(buf), &len, RK_NO_WAIT), RK_OK);
    assert_int_equal(len, 1);
    assert_memory_equal(buf, "x", 1);
    /* The same eventfd for the same instance. */
    assert_int_equal(rk_kernel_output_arm(f.rt, f.k, &fd2), RK_OK);
    assert_int_equal(fd2, fd);
    assert_false(readable(fd, 0));
    rk_runtime_destroy(f.rt);
}

static void
test_arm_with_output_there_is_already(void **state)
{
    fixture f;
    int fd = -1;
    char buf[8];
    size_t len = 0;

    (void)state;
    start_echo(&f);
    assert_int_equal(rk_send(f.rt, f.k, 0, "y", 1, 128, RT_LONG), RK_OK);
    (void)wait_output(&f); /* returns once an arm saw the output */
    /* Still there (nobody received): every arm says so, arms nothing. */
    assert_int_equal(rk_kernel_output_arm(f.rt, f.k, &fd), RK_EALREADY);
    assert_int_equal(rk_kernel_output_arm(f.rt, f.k, &fd), RK_EALREADY);
    assert_non_null(strstr(rk_errdetail(), "'echo'"));
    assert_int_equal(
        rk_recv(f.rt, f.k, NULL, buf, sizeof(buf), &len, RK_NO_WAIT), RK_OK);
    assert_memory_equal(buf, "y", 1);
    /* Drain a spurious readiness an arm racing the reply may have left,
     * then an unarmed eventfd must stay quiet (next test). */
    if (readable(fd, 0))
        reset(fd);
    assert_false(readable(fd, 0));
    rk_runtime_destroy(f.rt);
}

static void
test_unarmed_is_never_written(void **state)
{
    fixture f;
    int fd = -1;
    char buf[8];
    size_t len = 0;

    (void)state;
    start_echo(&f);
    /* Arm once to get the eventfd, and use the arm up. */
    assert_int_equal(rk_kernel_output_arm(f.rt, f.k, &fd), RK_OK);
    assert_int_equal(rk_send(f.rt, f.k, 0, "a", 1, 128, RT_LONG), RK_OK);
    assert_true(readable(fd, LONG_MS));
    reset(fd);
    assert_int_equal(
        rk_recv(f.rt, f.k, NULL, buf, sizeof(buf), &len, RT_LONG), RK_OK);
    /* Round trips with nobody armed: the kernel must not write. */
    for (int i = 0; i < 200; i++) {
        assert_int_equal(rk_send(f.rt, f.k, 0, "b", 1, 128, RT_LONG), RK_OK);
        assert_int_equal(
            rk_recv(f.rt, f.k, NULL, buf, sizeof(buf), &len, RT_LONG), RK_OK);
        assert_false(readable(fd, 0));
    }
    rk_runtime_destroy(f.rt);
}

static void
test_end_of_instance_wakes(void **state)
{
    fixture f;
    int fd = -1;
    char buf[8];
    size_t len = 0;

    (void)state;
    start_echo(&f);
    assert_int_equal(rk_kernel_output_arm(f.rt, f.k, &fd), RK_OK);
    assert_int_equal(rk_kernel_terminate(f.rt, "echo", RT_LONG), RK_OK);
    assert_true(readable(fd, LONG_MS));
    reset(fd);
    /* By id: the handle named the instance that ended (RK_ESTALE). */
    assert_int_equal(
        rk_recv_id(f.rt, "echo", NULL, buf, sizeof(buf), &len, RK_NO_WAIT),
        RK_ETERMINATED);
    rk_runtime_destroy(f.rt);
}

/*
 * The lost wake-up test: a ping-pong in which the host arms right after
 * each send, racing the echo's reply (its commit and its check of the arm
 * run on the kernel thread while the host arms and re-checks). Every
 * round must end with the reply received; a lost wake-up leaves poll()
 * waiting for the backstop and fails the test.
 */
static void
test_pingpong_no_lost_wakeup(void **state)
{
    fixture f;
    const int rounds = 5000 * RT_SCALE;
    int waits = 0, ready = 0;
    char buf[8];
    size_t len = 0;

    (void)state;
    start_echo(&f);
    for (int i = 0; i < rounds; i++) {
        char c = (char)('a' + i % 26);
        int w;
        assert_int_equal(rk_send(f.rt, f.k, 0, &c, 1, 128, RT_LONG), RK_OK);
        w = wait_output(&f);
        waits += w;
        ready += w == 0;
        assert_int_equal(
            rk_recv(f.rt, f.k, NULL, buf, sizeof(buf), &len, RK_NO_WAIT),
            RK_OK);
        assert_int_equal(len, 1);
        assert_int_equal(buf[0], c);
    }
    /* Both sides of the race were taken (the host slept on the eventfd at
     * least once): otherwise this test proved nothing. */
    printf("rounds %d, waits on the eventfd %d, already there %d\n", rounds,
        waits, ready);
    assert_true(waits > 0);
    rk_runtime_destroy(f.rt);
}

static void
test_bad_arguments(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "echo", .actor = rt_echo_actor };
    rk_kernel k, stale = { 0 };
    int fd = 7;

    (void)state;
    assert_int_equal(rk_kernel_output_arm(NULL, stale, &fd), RK_EINVAL);
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "echo", &k), RK_OK);
    assert_int_equal(rk_kernel_output_arm(rt, k, &fd), RK_ENOTLAUNCHED);
    assert_int_equal(fd, -1);
    assert_int_equal(rk_kernel_launch(rt, "echo"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "echo"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "echo", &k), RK_OK);
    assert_int_equal(rk_kernel_output_arm(rt, k, NULL), RK_OK); /* fd NULL */
    assert_int_equal(rk_kernel_terminate(rt, "echo", RT_LONG), RK_OK);
    /* The handle named the instance that ended. */
    assert_int_equal(rk_kernel_output_arm(rt, k, &fd), RK_ESTALE);
    stale.slot = 999;
    assert_int_equal(rk_kernel_output_arm(rt, stale, &fd), RK_ESTALE);
    rk_runtime_destroy(rt);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arm_then_output_wakes),
        cmocka_unit_test(test_arm_with_output_there_is_already),
        cmocka_unit_test(test_unarmed_is_never_written),
        cmocka_unit_test(test_end_of_instance_wakes),
        cmocka_unit_test(test_pingpong_no_lost_wakeup),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
