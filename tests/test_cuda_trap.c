/*
 * A block that traps (issue 24, "Bad input"): __trap(), an illegal
 * address or a device assert loses the CUDA context, and with it every
 * kernel on it. Through the public runtime API, on the stand-in driver
 * (tests/fake_cuda: rk_trap's host build loses the context as a GPU
 * does) or, with RK_TEST_CUDA_REAL=1, on a GPU (tools/gpu-check.sh):
 *   - two_kernels: two cuda kernels resident, one traps on a message:
 *     both end FAILED promptly (the watchdog is set to ten minutes: no
 *     watchdog period is waited for), with the driver's error name and
 *     string in the log line that names each kernel; what was queued
 *     (the trap's message and those behind it in the lane, what waited
 *     in the paused kernel's inbox) is dead-lettered with RK_ECUDA and
 *     counted; the residency is given back (no deferred free is left);
 *     a relaunch is refused ("context lost"); rk_runtime_destroy
 *     returns;
 *   - restart: a kernel under a RESTART policy that traps, and one whose
 *     restart is pending when the context is lost, both end FAILED with
 *     no restart; no cuda kernel launches again (RK_ECUDA, "context
 *     lost", naming the driver's error and the kernel that first saw it;
 *     docs/cuda-robustness.md says why the context is not reset).
 * A lost context stays lost for the process, so each case runs in a
 * process of its own: without arguments the program runs itself once
 * per case.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/common.h"
#include "cuda_helpers.h"
#include "device/cuda_driver.h"
#include "memory/mem.h"
#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

#define T_LONG RT_LONG
#define TRAP   0xee /* rk_trap traps on this first byte */

static char *kernels_src;
static int real_gpu;
static unsigned (*hangs)(void); /* the stand-in's; NULL on a GPU */

/* ------------------------------------------------------------ the log */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[8192];

static void
log_sink(rk_log_level level, const char *msg, void *user)
{
    size_t at;
    (void)user;
    if (level < RK_LOG_ERROR)
        return;
    pthread_mutex_lock(&log_lock);
    at = strlen(log_text);
    snprintf(log_text + at, sizeof(log_text) - at, "%s\n", msg);
    pthread_mutex_unlock(&log_lock);
}

/* True when one logged line holds every one of the (NULL-ended) words. */
static int
logged(const char *first, ...)
{
    char copy[sizeof(log_text)];
    int found = 0;

    pthread_mutex_lock(&log_lock);
    memcpy(copy, log_text, sizeof(copy));
    pthread_mutex_unlock(&log_lock);
    for (char *line = strtok(copy, "\n"); line && !found;
         line = strtok(NULL, "\n")) {
        va_list ap;
        const char *w = first;
        found = 1;
        va_start(ap, first);
        for (; w != NULL && found; w = va_arg(ap, const char *))
            found = strstr(line, w) != NULL;
        va_end(ap);
    }
    return found;
}

/* ------------------------------------------------------------ helpers */

/* A runtime on the cuda backend (the case skips without NVRTC). */
static rk_runtime *
cuda_runtime(void)
{
    cuda_require_nvrtc();
    return cuda_test_runtime();
}

static void
reg(rk_runtime *rt, const char *id, const char *entry,
    rk_restart_policy policy)
{
    /* A restart would be due long after the test. */
    cuda_kdef k = { .id = id,
        .src = kernels_src,
        .src_name = "test_kernels.cu",
        .entry = entry,
        .grid = 1,
        .max_payload = 64,
        .supervision = { .policy = policy,
            .max_restarts = 3,
            .backoff_ns = 600ll * 1000000000ll,
            .backoff_max_ns = 600ll * 1000000000ll } };
    cuda_register(rt, &k);
}

static void
send1(rk_runtime *rt, rk_kernel k, unsigned char v)
{
    assert_int_equal(rk_send(rt, k, 1, &v, 1, 128, T_LONG), RK_OK);
}

static void
round_trip(rk_runtime *rt, rk_kernel k, unsigned char v)
{
    unsigned char buf[64];
    size_t len;

    send1(rt, k, v);
    assert_int_equal(
        rk_recv(rt, k, NULL, buf, sizeof(buf), &len, T_LONG), RK_OK);
    assert_int_equal(len, 1);
    assert_int_equal(buf[0], v);
}

/* Kernels ida (entry ea) and idb (eb), registered with policy p, then
 * launched, activated and answering: one round trip each. Every cuda
 * kernel is registered before the first launch (docs/cuda-robustness.md). */
static void
two_running(rk_runtime *rt, const char *ida, const char *ea, const char *idb,
    const char *eb, rk_restart_policy p, rk_kernel *a, rk_kernel *b)
{
    reg(rt, ida, ea, p);
    reg(rt, idb, eb, p);
    *a = cuda_start(rt, ida);
    *b = cuda_start(rt, idb);
    round_trip(rt, *a, 1);
    round_trip(rt, *b, 2);
}

/* The kernel ended (a state, waited for with a deadline) FAILED. */
static void
ended_failed(rk_runtime *rt, const char *id, rk_kernel_stats *st)
{
    assert_int_equal(rk_kernel_wait(rt, id, T_LONG), RK_OK);
    assert_int_equal(rk_kernel_stats_get(rt, id, st), RK_OK);
    assert_int_equal(st->state, RK_KERNEL_FAILED);
}

/* What the driver reports for the trap: the stand-in's code as chosen
 * (FAKE_CUDA_TRAP_ERROR), any CUDA error on a GPU. */
static const char *
trap_name(const char *sim)
{
    return real_gpu ? "CUDA_ERROR_" : sim;
}

/* ------------------------------------------------------------ the cases */

static void
test_two_kernels(void **state)
{
    rk_runtime *rt;
    rk_kernel a, b;
    rk_kernel_stats sa, sb;
    rk_dead_letter dl;
    unsigned char buf[64];
    unsigned n_a = 0, n_b = 0, hangs0;
    (void)state;

    rt = cuda_runtime();
    /* The stand-in's count of calls that would hang (NULL on a GPU). */
    *(void **)&hangs = cuda_fake_sym(FAKE_CUDA_LIB, "fake_cuda_hangs");
    hangs0 = hangs != NULL ? hangs() : 0;
    two_running(rt, "a", "rk_trap", "b", "rk_echo", RK_SUPERVISE_STOP, &a, &b);
    /* b paused with three messages in its inbox; a traps on the first of
     * four, the other three queued behind it. */
    assert_int_equal(rk_kernel_deactivate(rt, "b"), RK_OK);
    for (unsigned char i = 0; i < 3; i++)
        send1(rt, b, (unsigned char)(10 + i));
    send1(rt, a, TRAP);
    for (unsigned char i = 0; i < 3; i++)
        send1(rt, a, (unsigned char)(20 + i));

    /* Both end FAILED: each relay sees the context's error on its own
     * stream (the watchdog, at ten minutes, has no part in it). */
    ended_failed(rt, "a", &sa);
    ended_failed(rt, "b", &sb);
    assert_true(logged("kernel 'a'", "lost",
        trap_name("CUDA_ERROR_LAUNCH_"
                  "FAILED (unspecified "
                  "launch failure)"),
        NULL));
    assert_true(logged("kernel 'b'", "lost",
        trap_name("CUDA_ERROR_LAUNCH_"
                  "FAILED"),
        NULL));
    /* Nothing lost silently: a's trap message and the three behind it,
     * b's three, dead-lettered with RK_ECUDA and counted. */
    assert_int_equal(sa.processed, 1);
    assert_int_equal(sa.dead_lettered, 4);
    assert_int_equal(sb.processed, 1);
    assert_int_equal(sb.dead_lettered, 3);
    while (rk_dead_letter_recv(rt, &dl, buf, sizeof(buf), 0) == RK_OK) {
        assert_int_equal(dl.error, RK_ECUDA);
        assert_int_equal(dl.reason, RK_DEAD_ABANDONED);
        assert_int_equal(dl.len, 1);
        if (strcmp(dl.kernel_id, "a") == 0) {
            assert_true(buf[0] == TRAP || (buf[0] >= 20 && buf[0] < 23));
            n_a++;
        } else {
            assert_string_equal(dl.kernel_id, "b");
            assert_true(buf[0] >= 10 && buf[0] < 13);
            n_b++;
        }
    }
    assert_int_equal(n_a, 4);
    assert_int_equal(n_b, 3);
    /* The grids are gone: their residency is given back, so no free is
     * left waiting for them. */
    assert_int_equal(rk__mem_deferred(), 0);
    /* Sends are refused, and so is a relaunch into the lost context. */
    assert_int_equal(rk_kernel_lookup(rt, "a", &a), RK_OK);
    assert_int_equal(rk_send(rt, a, 1, buf, 1, 128, 0), RK_EFAILED);
    assert_int_equal(rk_kernel_launch(rt, "b"), RK_ECUDA);
    assert_non_null(strstr(rk_errdetail(), "context lost"));
    /* Either relay may have seen it first. */
    assert_non_null(strstr(rk_errdetail(), "first seen by kernel '"));
    rk_runtime_destroy(rt);
    if (hangs != NULL)
        assert_int_equal(hangs(), hangs0); /* nothing would have hung */
}

static void
test_restart(void **state)
{
    rk_runtime *rt;
    rk_kernel f, t;
    rk_kernel_stats sf, st;
    uint64_t dl;
    (void)state;

    rt = cuda_runtime();
    reg(rt, "late", "rk_echo", RK_SUPERVISE_STOP);
    two_running(
        rt, "f", "rk_fail", "t", "rk_trap", RK_SUPERVISE_RESTART, &f, &t);
    /* f faults; its restart is due in ten minutes. */
    send1(rt, f, 0xff);
    dl = rk_now_ns() + (uint64_t)T_LONG;
    do {
        assert_true(rk_now_ns() < dl);
        sched_yield();
        assert_int_equal(rk_kernel_stats_get(rt, "f", &sf), RK_OK);
    } while (sf.errors == 0 || sf.dead_lettered == 0);
    send1(rt, t, TRAP);

    /* Neither is restarted into the lost context. */
    ended_failed(rt, "t", &st);
    ended_failed(rt, "f", &sf);
    assert_int_equal(st.restarts, 0);
    assert_int_equal(sf.restarts, 0);
    assert_true(logged("kernel 't'",
        trap_name("CUDA_ERROR_ILLEGAL_ADDRESS "
                  "(an illegal memory access "
                  "was encountered)"),
        NULL));
    assert_true(
        logged("kernel 'f'", trap_name("CUDA_ERROR_ILLEGAL_ADDRESS"), NULL));
    /* No cuda kernel launches again, a new one included: a clear error
     * naming the driver's error and the kernel that first saw it. */
    assert_int_equal(rk_kernel_launch(rt, "t"), RK_ECUDA);
    assert_non_null(strstr(rk_errdetail(), "context lost"));
    assert_non_null(strstr(rk_errdetail(),
        trap_name("CUDA_ERROR_ILLEGAL_"
                  "ADDRESS")));
    assert_non_null(strstr(rk_errdetail(), "first seen by kernel '"));
    assert_int_equal(rk_kernel_launch(rt, "late"), RK_ECUDA);
    assert_non_null(strstr(rk_errdetail(), "context lost"));
    assert_int_equal(rk__mem_deferred(), 0);
    rk_runtime_destroy(rt);
}

/* ------------------------------------------------------------ main */

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_two_kernels),
    cmocka_unit_test(test_restart),
};

/* One case, in this process: the trap's error the stand-in reports
 * (FAKE_CUDA_TRAP_ERROR), a watchdog that never fires here, the log. */
static int
run_case(const char *name)
{
    setenv("RK_CUDA_WATCHDOG_MS", "600000", 1);
    if (strcmp(name, "test_restart") == 0)
        setenv("FAKE_CUDA_TRAP_ERROR", "700", 1);
    rk_set_log(log_sink, NULL);
    cmocka_set_test_filter(name);
    return cuda_sim_run("test_cuda_trap", tests,
        sizeof(tests) / sizeof(tests[0]), FAKE_CUDA_LIB,
        "tests/kernels/test_kernels.cu", &kernels_src, &real_gpu);
}

int
main(int argc, char **argv)
{
    int rc = 0;

    if (argc > 1)
        return run_case(argv[1]);
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
        int status;
        pid_t pid;

        fflush(NULL);
        pid = fork();
        if (pid < 0)
            return 1;
        if (pid == 0) {
            execl("/proc/self/exe", argv[0], tests[i].name, (char *)NULL);
            _exit(127);
        }
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)
            || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "test_cuda_trap: %s failed (status %d)\n",
                tests[i].name, status);
            rc = 1;
        }
    }
    return rc;
}
