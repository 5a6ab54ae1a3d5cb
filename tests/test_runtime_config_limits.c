/*
 * Kernel and runtime size limits (issue 10, defect 1, and "config errors
 * at register"): every size field is checked at rk_runtime_register (or
 * rk_runtime_create) against the limits in runtime.h, and refused with
 * RK_EINVAL and a detail naming the field and its limit. (Defect 7, slot
 * alignment, is in test_runtime_alignment.c.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

#define BIG_SEND 4096

/* Sends BIG_SEND bytes at once, then echoes until told to stop. The issue's
 * reproducer: with max_payload = UINT32_MAX the output ring's slots were
 * 63 bytes (64 + max_payload truncated to 32 bits) and this send wrote
 * 4096 bytes into a 256-byte ring. */
static int
big_sender(rk_ctx *ctx)
{
    static unsigned char buf[BIG_SEND];
    int rc;

    memset(buf, 0x5a, sizeof(buf));
    if ((rc = rk_ctx_send(ctx, 0, buf, sizeof(buf))) != RK_OK)
        return rc;
    return rt_echo_actor(ctx);
}

/* Asserts that the last failure's detail names field, and a and b unless
 * they are NULL. */
static void
expect_detail(const char *field, const char *a, const char *b)
{
    const char *d = rk_errdetail();

    if (strstr(d, field) == NULL || (a != NULL && strstr(d, a) == NULL)
        || (b != NULL && strstr(d, b) == NULL))
        fail_msg("detail '%s' does not name '%s' / '%s' / '%s'", d, field,
            a ? a : "", b ? b : "");
}

static void
test_huge_max_payload_refused(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "huge", .actor = big_sender };
    int rc;

    (void)state;
    def.config.max_payload = UINT32_MAX;
    def.config.batch = 1;
    def.config.output_capacity = 4;
    rc = rk_runtime_register(rt, &def);
    if (rc == RK_OK) {
        /* Accepted: run the reproducer, which ASan reports as a
         * heap-buffer-overflow in the output queue (and a release build
         * may answer RK_OK and crash later). */
        unsigned char got[BIG_SEND];
        size_t len = 0;
        int rrc;

        assert_int_equal(rk_kernel_launch(rt, "huge"), RK_OK);
        assert_int_equal(rk_kernel_activate(rt, "huge"), RK_OK);
        rrc = rk_recv_id(rt, "huge", NULL, got, sizeof(got), &len, RT_LONG);
        fail_msg("max_payload UINT32_MAX was accepted; the 4096-byte send "
                 "then gave %s (len %zu) instead of a refusal at register",
            rk_err_name(rrc), len);
    }
    assert_int_equal(rc, RK_EINVAL);
    expect_detail("max_payload", "16777216", NULL);
    {
        rk_kernel k;
        assert_int_equal(rk_kernel_lookup(rt, "huge", &k), RK_ENOTFOUND);
    }
    rk_runtime_destroy(rt);
}

typedef struct size_case {
    const char *what;  /* for the failure message */
    const char *field; /* the detail must name it ... */
    const char *limit; /* ... and this (the limit, or the rule) */
    uint32_t in_cap, out_cap, max_payload, batch;
} size_case;

static const size_case size_cases[] = {
    { "input_capacity over the limit", "input_capacity", "16777216",
        UINT32_C(1) << 25, 0, 8, 0 },
    { "input_capacity 2^31", "input_capacity", "16777216", UINT32_C(1) << 31,
        0, 8, 0 },
    { "input_capacity UINT32_MAX", "input_capacity", "16777216", UINT32_MAX,
        0, 0, 0 },
    { "input_capacity one over", "input_capacity", "16777216",
        (UINT32_C(1) << 24) + 1, 0, 0, 0 },
    { "output_capacity over the limit", "output_capacity", "16777216", 0,
        UINT32_C(1) << 25, 8, 0 },
    { "output_capacity UINT32_MAX", "output_capacity", "16777216", 0,
        UINT32_MAX, 0, 0 },
    { "output_capacity one over", "output_capacity", "16777216", 0,
        (UINT32_C(1) << 24) + 1, 0, 0 },
    { "max_payload UINT32_MAX", "max_payload", "16777216", 4, 4, UINT32_MAX,
        1 },
    { "max_payload wrapping the slot to 0", "max_payload", "16777216", 4, 4,
        UINT32_MAX - 63, 1 },
    { "max_payload wrapping the slot to 1", "max_payload", "16777216", 4, 4,
        UINT32_MAX - 62, 1 },
    { "max_payload one over", "max_payload", "16777216", 4, 4,
        (UINT32_C(1) << 24) + 1, 1 },
    { "batch over the limit", "batch", "65536", 0, 0, 0, UINT32_C(65536) + 1 },
    { "batch UINT32_MAX", "batch", "65536", 0, 0, 0, UINT32_MAX },
    /* Each within its own limit, together too large for one queue. */
    { "input queue bytes", "input_capacity", "1073741824", UINT32_C(1) << 24,
        4, UINT32_C(1) << 16, 1 },
    { "output queue bytes", "output_capacity", "1073741824", 4,
        UINT32_C(1) << 24, UINT32_C(1) << 16, 1 },
};

static void
test_size_fields_refused_at_register(void **state)
{
    rk_runtime *rt = rt_new_runtime();

    (void)state;
    for (size_t i = 0; i < sizeof(size_cases) / sizeof(size_cases[0]); i++) {
        const size_case *c = &size_cases[i];
        rk_kernel_def def = { .id = "sized", .actor = rt_echo_actor };
        rk_kernel k;
        int rc;

        def.config.input_capacity = c->in_cap;
        def.config.output_capacity = c->out_cap;
        def.config.max_payload = c->max_payload;
        def.config.batch = c->batch;
        rc = rk_runtime_register(rt, &def);
        if (rc != RK_EINVAL)
            fail_msg("%s: rk_runtime_register gave %s, want RK_EINVAL",
                c->what, rk_err_name(rc));
        expect_detail(c->field, c->limit, "'sized'");
        assert_int_equal(rk_kernel_lookup(rt, "sized", &k), RK_ENOTFOUND);
    }
    rk_runtime_destroy(rt);
}

/* The interop item (the seeds' queue_size=1000): a capacity that is not a
 * power of two registers and launches (issue 27; it used to be refused at
 * register), and so does a large odd one. */
static void
test_input_capacity_any_value_at_register(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "cap", .actor = rt_echo_actor };

    (void)state;
    def.config.input_capacity = 1000;
    def.config.output_capacity = 1000;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "cap"), RK_OK);
    /* Registered only (it would allocate nearly 1 GiB). */
    def.id = "big";
    def.config.input_capacity = RK_KERNEL_MAX_CAPACITY / 2 - 1;
    def.config.output_capacity = 5;
    def.config.max_payload = 64;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    rk_runtime_destroy(rt);
}

static void
test_runtime_sizes_refused_at_create(void **state)
{
    rk_runtime *rt = NULL;
    rk_runtime_config cfg = { .no_static_kernels = true };

    (void)state;
    cfg.max_kernels = RK_RUNTIME_MAX_KERNELS + 1;
    assert_int_equal(rk_runtime_create(&rt, &cfg), RK_EINVAL);
    assert_null(rt);
    expect_detail("max_kernels", "65536", NULL);
    cfg.max_kernels = UINT32_MAX;
    assert_int_equal(rk_runtime_create(&rt, &cfg), RK_EINVAL);
    expect_detail("max_kernels", "65536", NULL);
    cfg.max_kernels = 0;
    cfg.dead_letter_capacity = RK_RUNTIME_MAX_DEAD_LETTERS + 1;
    assert_int_equal(rk_runtime_create(&rt, &cfg), RK_EINVAL);
    expect_detail("dead_letter_capacity", "1048576", NULL);
    /* The limits themselves are accepted. */
    cfg.max_kernels = RK_RUNTIME_MAX_KERNELS;
    cfg.dead_letter_capacity = RK_RUNTIME_MAX_DEAD_LETTERS;
    assert_int_equal(rk_runtime_create(&rt, &cfg), RK_OK);
    rk_runtime_destroy(rt);
}

/* Values at the limits register; a large payload within them goes through
 * both queues intact. */
static void
test_limits_accepted(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "edge", .actor = rt_echo_actor };
    static unsigned char out[65536 + 1], in[65536];
    rk_msg_header hdr;
    rk_kernel k;
    size_t len = 0;

    (void)state;
    /* 2^23 slots of 128 bytes: exactly RK_KERNEL_MAX_QUEUE_BYTES. Only
     * registered, never launched (it would allocate 1 GiB). */
    def.config.input_capacity = RK_KERNEL_MAX_CAPACITY / 2;
    def.config.output_capacity = 4;
    def.config.max_payload = 64;
    def.config.batch = RK_KERNEL_MAX_BATCH;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    def.id = "edge2";
    def.config.input_capacity = 4;
    def.config.batch = 1;
    def.config.max_payload = RK_KERNEL_MAX_PAYLOAD;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);

    /* This one runs: 64 KiB messages, 4-slot queues, batch 1. */
    def.id = "big";
    def.actor = big_sender;
    def.config.max_payload = sizeof(in);
    def.config.output_capacity = 4;
    def.config.input_capacity = 4;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "big"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "big"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "big", &k), RK_OK);
    assert_int_equal(
        rk_recv(rt, k, &hdr, in, sizeof(in), &len, RT_LONG), RK_OK);
    assert_int_equal(len, BIG_SEND);
    for (size_t i = 0; i < BIG_SEND; i++)
        assert_int_equal(in[i], 0x5a);
    for (size_t i = 0; i < sizeof(out); i++)
        out[i] = (unsigned char)(i * 7u);
    assert_int_equal(rk_send(rt, k, 0, out, sizeof(in), 128, RT_LONG), RK_OK);
    assert_int_equal(
        rk_recv(rt, k, &hdr, in, sizeof(in), &len, RT_LONG), RK_OK);
    assert_int_equal(len, sizeof(in));
    assert_memory_equal(in, out, sizeof(in));
    /* One byte over max_payload is refused at the send, naming it. */
    assert_int_equal(
        rk_send(rt, k, 0, out, sizeof(in) + 1, 128, RT_LONG), RK_EMSGSIZE);
    expect_detail("max_payload", "65536", NULL);
    rk_runtime_destroy(rt);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_huge_max_payload_refused),
        cmocka_unit_test(test_size_fields_refused_at_register),
        cmocka_unit_test(test_input_capacity_any_value_at_register),
        cmocka_unit_test(test_runtime_sizes_refused_at_create),
        cmocka_unit_test(test_limits_accepted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
