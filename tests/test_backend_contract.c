/*
 * The backend contract suite: the same cases against every backend built
 * in (rk_backend_name), as nng runs one platform test against every
 * platform. A backend that is built in but cannot run here (no GPU, no
 * driver) is reported and skipped; on a machine where it can run, it
 * joins without any change to this file.
 *
 * The cases' kernels are host C functions; on a backend that runs device
 * code only (rk__backend.code: cuda) each has a device twin from
 * tests/kernels/test_kernels.cu (rk_echo, rk_fail), written once, which
 * the kernel's config names (device_source/device_entry). Two cases need
 * a kernel that blocks on the test's own state (a gate, a flag), which a
 * device kernel cannot share: on a device backend the drain case runs
 * without its gate, and the never-acknowledging instance is left to the
 * host backends. Without a GPU, ctest runs the cuda backend here under
 * the stand-in driver (test_backend_contract_cuda_sim).
 *
 * The cases reach the backend through the runtime, which is how a
 * backend is driven: lifecycle commands and their acknowledgements, a
 * STOP that overtakes the first RUN, the drain on STOP, a wake that races
 * with a park, an instance that exits with an error, an instance that
 * never acknowledges (the timeout paths), and the refusals at launch.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "cuda_helpers.h"
#include "rt_helpers.h"

#define MS INT64_C(1000000)

static const char *backend; /* the one under test */
static bool device;         /* it runs device code only: use the twins */
static char *kernels_src;   /* tests/kernels/test_kernels.cu */

/* Gives def the device twin entry (a kernel of test_kernels.cu) when the
 * backend under test runs device code only. */
static void
twin(rk_kernel_def *def, const char *entry)
{
    if (!device)
        return;
    def->config.device_source = kernels_src;
    def->config.device_entry = entry;
    def->config.device_source_name = "test_kernels.cu";
}

static rk_runtime *
new_rt(int64_t control_timeout_ns)
{
    rk_runtime *rt = NULL;
    rk_runtime_config cfg = {
        .no_static_kernels = true,
        .backend = backend,
        .control_timeout_ns = control_timeout_ns,
    };

    assert_int_equal(rk_runtime_create(&rt, &cfg), RK_OK);
    return rt;
}

static uint64_t
processed(rk_runtime *rt, const char *id)
{
    rk_kernel_stats s;

    assert_int_equal(rk_kernel_stats_get(rt, id, &s), RK_OK);
    return s.processed;
}

static int
count_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    (void)ctx;
    (void)m;
    return RK_OK;
}

static void
reg_handler(rk_runtime *rt, const char *id, rk_handler_fn fn)
{
    rk_kernel_def def = { .id = id, .handler = fn };

    twin(&def, "rk_echo"); /* counts like fn; its replies go unread */
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
}

static void
send_n(rk_runtime *rt, const char *id, int n)
{
    uint32_t v = 0;

    for (int i = 0; i < n; i++) {
        v = (uint32_t)i;
        assert_int_equal(
            rk_send_id(rt, id, 0, &v, sizeof(v), 128, RT_LONG), RK_OK);
    }
}

/* ------------------------------------------------------------ cases */
/* Replies with what it got, and fails with the reply's error: a refused
 * output reaches the instance as an error, which it reports as a fault
 * (the device twin cannot be told: its relay dead-letters the output). */
static int
echo_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    return rk_ctx_reply(ctx, m, m->hdr->type_id, m->data, m->len);
}

static void
reg_echo(rk_runtime *rt, const char *id)
{
    rk_kernel_def def = { .id = id, .handler = echo_handler };

    twin(&def, "rk_echo");
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
}

/* The kernel's sent count once it reaches n (bounded by RT_LONG): an
 * instance counts a send after the runtime took it, so the receiver may
 * see the message a moment before the count moves. */
static uint64_t
sent_reaching(rk_runtime *rt, const char *id, uint64_t n)
{
    uint64_t until = rk_now_ns() + (uint64_t)RT_LONG;
    rk_kernel_stats s;

    for (;;) {
        assert_int_equal(rk_kernel_stats_get(rt, id, &s), RK_OK);
        if (s.sent >= n || rk_now_ns() >= until)
            return s.sent;
        sched_yield();
    }
}


/* LAUNCHED holds (nothing processed), ACTIVE runs, DEACTIVATED stops at a
 * safe point (its acknowledgement is what deactivate waits for, so a
 * message sent after it stays queued), reactivation resumes. */
static void
test_lifecycle_commands_and_acks(void **state)
{
    rk_runtime *rt = new_rt(0);
    rk_kernel_stats s;
    (void)state;

    reg_handler(rt, "k", count_handler);
    assert_int_equal(rk_kernel_launch(rt, "k"), RK_OK);
    send_n(rt, "k", 3);
    assert_int_equal(processed(rt, "k"), 0); /* HOLD: nothing runs */
    assert_int_equal(rk_kernel_activate(rt, "k"), RK_OK);
    assert_int_equal(rk_kernel_deactivate(rt, "k"), RK_OK);
    /* PAUSED was acknowledged: the instance is at a safe point. */
    assert_int_equal(rk_kernel_stats_get(rt, "k", &s), RK_OK);
    send_n(rt, "k", 2);
    assert_int_equal(processed(rt, "k"), s.processed);
    assert_int_equal(rk_kernel_activate(rt, "k"), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "k", RT_LONG), RK_OK);
    assert_int_equal(rt_state(rt, "k"), RK_KERNEL_TERMINATED);
    assert_int_equal(processed(rt, "k"), 5);
    rk_runtime_destroy(rt);
}

/* Where an instance's output goes is the runtime's decision, the same
 * whichever backend runs it: without a route, to the host's output queue
 * (each reply answers its request); after rk_connect, into the target's
 * input and nowhere else. Counted as sent either way. */
static void
test_output_goes_where_the_runtime_says(void **state)
{
    rk_runtime *rt = new_rt(0);
    rk_msg_header h;
    rk_kernel src;
    uint32_t v = 0;
    (void)state;

    reg_echo(rt, "src");
    reg_handler(rt, "dst", count_handler);
    assert_int_equal(rk_kernel_launch(rt, "src"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "src"), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "dst"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "dst"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "src", &src), RK_OK);
    for (uint32_t i = 0; i < 5; i++) {
        uint32_t got = 0;
        size_t len = 0;
        assert_int_equal(rk_request(rt, src, 0, &i, sizeof(i), &h, &got,
                             sizeof(got), &len, RT_LONG),
            RK_OK);
        assert_int_equal(len, sizeof(got));
        assert_int_equal(got, i);
    }
    assert_int_equal(sent_reaching(rt, "src", 5), 5);
    assert_int_equal(rk_connect(rt, "src", "dst"), RK_OK);
    send_n(rt, "src", 7);
    assert_int_equal(rt_wait_processed(rt, "dst", 7), 7);
    assert_int_equal(sent_reaching(rt, "src", 12), 12);
    /* Nothing of the routed seven reached the output queue. */
    assert_int_equal(
        rk_recv_id(rt, "src", &h, &v, sizeof(v), NULL, RK_NO_WAIT),
        RK_ETIMEDOUT);
    assert_int_equal(rk_kernel_terminate(rt, "src", RT_LONG), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "dst", RT_LONG), RK_OK);
    rk_runtime_destroy(rt);
}

/* An output the runtime refuses (its route's target was never launched)
 * is never lost uncounted: a host instance gets the refusal back and
 * fails with it, a device instance's relay dead-letters the output; on
 * both, one dead letter, FAILED, with the refusal's code. */
static void
test_refused_output_is_dead_lettered(void **state)
{
    rk_runtime *rt = new_rt(0);
    rk_dead_letter dl;
    unsigned char buf[64];
    int dead = 0;
    (void)state;

    reg_echo(rt, "src");
    reg_handler(rt, "idle", count_handler); /* registered, not launched */
    assert_int_equal(rk_connect(rt, "src", "idle"), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "src"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "src"), RK_OK);
    send_n(rt, "src", 1);
    assert_int_equal(
        rk_dead_letter_recv(rt, &dl, buf, sizeof(buf), RT_LONG), RK_OK);
    assert_string_equal(dl.kernel_id, "src");
    assert_int_equal(dl.reason, RK_DEAD_FAILED);
    assert_int_equal(dl.error, RK_ENOTLAUNCHED);
    dead++;
    (void)rk_kernel_terminate(rt, "src", RT_LONG);
    while (rk_dead_letter_recv(rt, &dl, buf, sizeof(buf), RK_NO_WAIT) == RK_OK)
        dead++;
    assert_int_equal(dead, 1);
    /* The instance has ended: its counts are final. */
    assert_int_equal(sent_reaching(rt, "src", 0), 0);
    rk_runtime_destroy(rt);
}

/* A STOP posted right after the first RUN, before the instance could have
 * acted on RUN, still drains what was queued; a STOP with no RUN ever
 * posted processes nothing and dead-letters the input. */
static void
test_stop_overtakes_first_run(void **state)
{
    rk_runtime *rt = new_rt(0);
    rk_dead_letter dl;
    uint32_t buf;
    int dead = 0;
    (void)state;

    reg_handler(rt, "ran", count_handler);
    assert_int_equal(rk_kernel_launch(rt, "ran"), RK_OK);
    send_n(rt, "ran", 10);
    assert_int_equal(rk_kernel_activate(rt, "ran"), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "ran", RT_LONG), RK_OK);
    assert_int_equal(processed(rt, "ran"), 10);

    reg_handler(rt, "never", count_handler);
    assert_int_equal(rk_kernel_launch(rt, "never"), RK_OK);
    send_n(rt, "never", 4);
    assert_int_equal(rk_kernel_terminate(rt, "never", RT_LONG), RK_OK);
    assert_int_equal(processed(rt, "never"), 0);
    while (
        rk_dead_letter_recv(rt, &dl, &buf, sizeof(buf), RK_NO_WAIT) == RK_OK) {
        assert_string_equal(dl.kernel_id, "never");
        assert_int_equal(dl.reason, RK_DEAD_TERMINATED);
        dead++;
    }
    assert_int_equal(dead, 4);
    rk_runtime_destroy(rt);
}

static rt_gate drain_gate;

static int
gated_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    (void)ctx;
    (void)m;
    rt_gate_pass(&drain_gate);
    return RK_OK;
}

/* Terminate while the instance is busy with input queued behind: every
 * queued message is processed before EXITED, none dead-lettered. */
static void
test_drain_on_stop(void **state)
{
    rk_runtime *rt = new_rt(0);
    rk_dead_letter dl;
    uint32_t buf;
    (void)state;

    rt_gate_init(&drain_gate);
    reg_handler(rt, "d", gated_handler);
    assert_int_equal(rk_kernel_launch(rt, "d"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "d"), RK_OK);
    send_n(rt, "d", 50);
    if (!device)
        rt_gate_wait_for(&drain_gate, 1); /* busy in the first message */
    rt_gate_open(&drain_gate);
    assert_int_equal(rk_kernel_terminate(rt, "d", RT_LONG), RK_OK);
    assert_int_equal(processed(rt, "d"), 50);
    assert_int_equal(
        rk_dead_letter_recv(rt, &dl, &buf, sizeof(buf), RK_NO_WAIT),
        RK_ETIMEDOUT);
    rk_runtime_destroy(rt);
    rt_gate_fini(&drain_gate);
}

/* Request/reply with a kernel that parks after every message (spin 1):
 * each send races the kernel's park. A lost wake-up hangs here (ctest's
 * timeout fails it). */
static void
test_wake_races_park(void **state)
{
    rk_runtime *rt = new_rt(0);
    rk_kernel_def def = { .id = "echo", .actor = rt_echo_actor };
    rk_kernel h;
    (void)state;

    def.config.spin = 1;
    twin(&def, "rk_echo");
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "echo"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "echo"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "echo", &h), RK_OK);
    for (uint32_t i = 0; i < 2000u * RT_SCALE; i++) {
        uint32_t out = 0;
        size_t len = 0;
        rk_msg_header rh;
        assert_int_equal(rk_request(rt, h, 0, &i, sizeof(i), &rh, &out,
                             sizeof(out), &len, RT_LONG),
            RK_OK);
        assert_int_equal(out, i);
    }
    assert_int_equal(rk_kernel_terminate(rt, "echo", RT_LONG), RK_OK);
    rk_runtime_destroy(rt);
}

static int
failing_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    uint32_t v;

    memcpy(&v, m->data, sizeof(v));
    if (v == 0xff) /* rk_fail's rule: first byte 0xff */
        return RK_EINVAL;
    return rk_ctx_reply(ctx, m, 0, &v, sizeof(v));
}

/* Sends 0, 1, 0xff, 3, 4: the third fails. */
static void
send_with_failure(rk_runtime *rt, const char *id)
{
    for (uint32_t i = 0; i < 5; i++) {
        uint32_t v = i == 2 ? 0xff : i;
        assert_int_equal(
            rk_send_id(rt, id, 0, &v, sizeof(v), 128, RT_LONG), RK_OK);
    }
}

/* An instance that fails reports the fault; the runtime dead-letters the
 * failed frame, and (policy STOP) gives up: FAILED, the rest of the input
 * dead-lettered as abandoned. With RESTART the runtime answers the fault
 * and the same instance goes on with the next message. */
static void
test_instance_exits_with_error(void **state)
{
    rk_runtime *rt = new_rt(0);
    rk_kernel_def def = { .id = "f", .handler = failing_handler };
    rk_kernel_stats s;
    rk_dead_letter dl;
    uint32_t buf;
    int failed = 0, abandoned = 0;
    (void)state;

    def.config.batch = 1;
    twin(&def, "rk_fail");
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "f"), RK_OK);
    send_with_failure(rt, "f");
    assert_int_equal(rk_kernel_activate(rt, "f"), RK_OK);
    assert_int_equal(rk_kernel_wait(rt, "f", RT_LONG), RK_OK);
    assert_int_equal(rt_state(rt, "f"), RK_KERNEL_FAILED);
    while (
        rk_dead_letter_recv(rt, &dl, &buf, sizeof(buf), RK_NO_WAIT) == RK_OK) {
        if (dl.reason == RK_DEAD_FAILED) {
            assert_int_equal(buf, 0xff);
            assert_int_equal(dl.error, RK_EINVAL);
            failed++;
        } else {
            assert_int_equal(dl.reason, RK_DEAD_ABANDONED);
            abandoned++;
        }
    }
    assert_int_equal(failed, 1);
    assert_int_equal(abandoned, 2);
    assert_int_equal(rk_kernel_stats_get(rt, "f", &s), RK_OK);
    assert_int_equal(s.processed, 2);
    assert_int_equal(s.errors, 1);

    def.id = "r";
    def.config.supervision.policy = RK_SUPERVISE_RESTART;
    def.config.supervision.max_restarts = 1;
    def.config.supervision.backoff_ns = 1;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "r"), RK_OK);
    send_with_failure(rt, "r");
    assert_int_equal(rk_kernel_activate(rt, "r"), RK_OK);
    /* The replies to 0, 1, 3, 4: the restart happened before 3. */
    for (uint32_t want = 0; want < 5; want++) {
        rk_msg_header rh;
        size_t len;
        if (want == 2)
            continue;
        assert_int_equal(
            rk_recv_id(rt, "r", &rh, &buf, sizeof(buf), &len, RT_LONG), RK_OK);
        assert_int_equal(buf, want);
    }
    assert_int_equal(rk_kernel_terminate(rt, "r", RT_LONG), RK_OK);
    assert_int_equal(rt_state(rt, "r"), RK_KERNEL_TERMINATED);
    assert_int_equal(rk_kernel_stats_get(rt, "r", &s), RK_OK);
    assert_int_equal(s.processed, 4);
    assert_int_equal(s.errors, 1);
    assert_int_equal(s.restarts, 1);
    assert_int_equal(s.dead_lettered, 1);
    rk_runtime_destroy(rt);
}

static _Atomic int stuck_release;
static _Atomic int stuck_entered;

static int
stuck_actor(rk_ctx *ctx)
{
    (void)ctx;
    atomic_store(&stuck_entered, 1);
    /* Busy in its own code: no safe point until released. */
    while (!atomic_load(&stuck_release))
        sched_yield();
    return RK_OK;
}

/* An instance that does not acknowledge: deactivate and terminate come
 * back with RK_ETIMEDOUT at their deadlines and leave the kernel in the
 * state they moved it to; once it acknowledges, terminate completes. */
static void
test_instance_never_acknowledges(void **state)
{
    rk_runtime *rt;
    rk_kernel_def def = { .id = "s", .actor = stuck_actor };
    (void)state;

    if (device)
        skip(); /* the instance blocks on the test's flag: host only */
    rt = new_rt(20 * MS);
    atomic_store(&stuck_release, 0);
    atomic_store(&stuck_entered, 0);
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "s"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "s"), RK_OK);
    assert_int_equal(rk_kernel_deactivate(rt, "s"), RK_ETIMEDOUT);
    assert_int_equal(rt_state(rt, "s"), RK_KERNEL_DEACTIVATED);
    assert_int_equal(rk_kernel_terminate(rt, "s", 20 * MS), RK_ETIMEDOUT);
    assert_int_equal(rt_state(rt, "s"), RK_KERNEL_TERMINATING);
    atomic_store(&stuck_release, 1);
    assert_int_equal(rk_kernel_terminate(rt, "s", RT_LONG), RK_OK);
    assert_int_equal(rt_state(rt, "s"), RK_KERNEL_TERMINATED);
    rk_runtime_destroy(rt);
}

/* ------------------------------------------------------ selection */

static void
test_unknown_backend_is_refused(void **state)
{
    rk_runtime *rt = NULL;
    rk_runtime_config cfg = { .no_static_kernels = true, .backend = "tpu" };
    rk_kernel_def def = { .id = "x", .handler = count_handler };
    (void)state;

    assert_int_equal(rk_runtime_create(&rt, &cfg), RK_ENOTFOUND);
    assert_null(rt);
    assert_non_null(strstr(rk_errdetail(), "no backend 'tpu'"));
    assert_non_null(strstr(rk_errdetail(), "cpu")); /* lists what exists */
    assert_int_equal(rk_backend_probe("tpu"), RK_ENOTFOUND);
    assert_int_equal(rk_backend_probe("cpu"), RK_OK);
    assert_int_equal(rk_backend_probe("auto"), RK_OK);

    rt = rt_new_runtime();
    def.config.backend = "tpu";
    assert_int_equal(rk_runtime_register(rt, &def), RK_ENOTFOUND);
    assert_non_null(strstr(rk_errdetail(), "kernel 'x'"));
    /* A backend built in but unusable here (cuda without a driver or a
     * GPU): refused at register with the probe's code and reason. */
    for (size_t i = 0; i < rk_backend_count(); i++) {
        const char *name = rk_backend_name(i);
        int why = rk_backend_probe(name);
        char detail[256];
        if (why == RK_OK)
            continue;
        snprintf(detail, sizeof(detail), "%s", rk_errdetail());
        def.config.backend = name;
        assert_int_equal(rk_runtime_register(rt, &def), why);
        assert_non_null(strstr(rk_errdetail(), "kernel 'x'"));
        assert_non_null(strstr(rk_errdetail(), name));
        assert_true(strlen(detail) > 0);
    }
    rk_runtime_destroy(rt);
}

/* A config the backend cannot honour fails at launch, and leaves nothing
 * allocated (LeakSanitizer checks) and the kernel CREATED. */
static void
test_cpu_refuses_a_grid(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "g", .handler = count_handler };
    (void)state;

    def.config.backend = "cpu";
    def.config.grid_size = 4;
    def.config.block_size = 128;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "g"), RK_ENOTSUP);
    assert_non_null(strstr(rk_errdetail(), "grid_size 4"));
    assert_int_equal(rt_state(rt, "g"), RK_KERNEL_CREATED);
    rk_runtime_destroy(rt);
}

/* Every name listed is distinct and "cpu" is among them. */
static void
test_backend_list(void **state)
{
    size_t n = rk_backend_count();
    bool cpu = false;
    (void)state;

    assert_true(n >= 1);
    assert_null(rk_backend_name(n));
    for (size_t i = 0; i < n; i++) {
        assert_non_null(rk_backend_name(i));
        cpu |= strcmp(rk_backend_name(i), "cpu") == 0;
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(rk_backend_name(i), rk_backend_name(j));
    }
    assert_true(cpu);
}

int
main(void)
{
    const struct CMUnitTest per_backend[] = {
        cmocka_unit_test(test_lifecycle_commands_and_acks),
        cmocka_unit_test(test_stop_overtakes_first_run),
        cmocka_unit_test(test_drain_on_stop),
        cmocka_unit_test(test_wake_races_park),
        cmocka_unit_test(test_instance_exits_with_error),
        cmocka_unit_test(test_instance_never_acknowledges),
        cmocka_unit_test(test_output_goes_where_the_runtime_says),
        cmocka_unit_test(test_refused_output_is_dead_lettered),
    };
    const struct CMUnitTest general[] = {
        cmocka_unit_test(test_unknown_backend_is_refused),
        cmocka_unit_test(test_cpu_refuses_a_grid),
        cmocka_unit_test(test_backend_list),
    };
    int fails = 0, ran = 0;

    for (size_t i = 0; i < rk_backend_count(); i++) {
        backend = rk_backend_name(i);
        device = !(rk__backends[i]->code & RK__CODE_HOST);
        if (rk_backend_probe(backend) != RK_OK) {
            printf("backend '%s' skipped: %s\n", backend, rk_errdetail());
            continue;
        }
        if (device && kernels_src == NULL
            && (!cuda_have_nvrtc()
                || (kernels_src = cuda_slurp("tests/kernels/test_kernels.cu"))
                    == NULL)) {
            /* Not "skipped": like the other stand-in tests, a machine
             * without NVRTC cannot build device code, which is not the
             * backend's failure. */
            printf("backend '%s' not run: no NVRTC or no device kernels\n",
                backend);
            continue;
        }
        printf("backend '%s'\n", backend);
        fails += _cmocka_run_group_tests(backend, per_backend,
            sizeof(per_backend) / sizeof(per_backend[0]), NULL, NULL);
        ran++;
    }
    free(kernels_src);
    if (ran == 0)
        return 1; /* the CPU backend at least must run */
    return fails + cmocka_run_group_tests(general, NULL, NULL);
}
