/* A kernel's queue sizes through the public API (issue 10): a max_payload
 * whose slot does not fit 32 bits is refused at launch with a detail
 * naming the field (it used to be truncated and overflow the output ring);
 * capacities that are not powers of two are refused naming their field;
 * a 3-byte max_payload keeps every header aligned (UBSan checks the
 * kernel's and the handler's header reads); every inbox kind (single
 * producer, general, bands, DROP_OLDEST) round-trips in place. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

/* Launch of a kernel with cfg is refused with RK_EINVAL naming field. */
static void
expect_refused(const rk_kernel_config *cfg, const char *field)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "k", .actor = rt_echo_actor };

    def.config = *cfg;
    int rc = rk_runtime_register(rt, &def);
    if (rc == RK_OK)
        rc = rk_kernel_launch(rt, "k");
    assert_int_equal(rc, RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), field));
    rk_runtime_destroy(rt); /* ASan: nothing of the refused launch leaks */
}

static void
test_huge_max_payload_refused(void **state)
{
    rk_kernel_config c = { 0 };

    (void)state;
    /* The reproducer of issue 10, defect 1. */
    c.max_payload = UINT32_MAX;
    c.batch = 1;
    c.output_capacity = 4;
    expect_refused(&c, "max_payload");
    c.max_payload = UINT32_MAX - 64 - 10; /* fits 32 bits, not rounded */
    expect_refused(&c, "max_payload");
}

static void
test_capacities_name_their_field(void **state)
{
    rk_kernel_config c = { 0 };

    (void)state;
    c.input_capacity = 3;
    expect_refused(&c, "input_capacity");
    c.input_capacity = 0;
    c.output_capacity = 6;
    expect_refused(&c, "output_capacity");
}

/* Round trips of a 3-byte payload through every inbox kind. */
static void
test_tiny_payload_round_trips(void **state)
{
    (void)state;
    for (int kind = 0; kind < 4; kind++) {
        rk_runtime *rt = rt_new_runtime();
        rk_kernel_def def = { .id = "echo", .actor = rt_echo_actor };
        rk_kernel k;

        def.config.max_payload = 3;
        def.config.single_producer = kind == 0;
        def.config.priority_bands = kind == 2;
        def.config.backpressure = kind == 3 ? RK_BP_DROP_OLDEST : RK_BP_BLOCK;
        assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
        assert_int_equal(rk_kernel_launch(rt, "echo"), RK_OK);
        assert_int_equal(rk_kernel_activate(rt, "echo"), RK_OK);
        assert_int_equal(rk_kernel_lookup(rt, "echo", &k), RK_OK);
        for (int i = 0; i < 100; i++) {
            unsigned char msg[3] = { (unsigned char)i, 7, 9 }, back[3];
            rk_msg_header h;
            size_t len = 0;
            assert_int_equal(
                rk_send(rt, k, 5, msg, 3, (uint8_t)(i * 3), RT_LONG), RK_OK);
            assert_int_equal(
                rk_recv(rt, k, &h, back, sizeof(back), &len, RT_LONG), RK_OK);
            assert_int_equal(len, 3);
            assert_memory_equal(back, msg, 3);
            assert_int_equal(h.type_id, 5);
        }
        /* Four is more than the payload limit. */
        assert_int_equal(
            rk_send(rt, k, 5, "abcd", 4, 128, RK_NO_WAIT), RK_EMSGSIZE);
        rk_runtime_destroy(rt);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_huge_max_payload_refused),
        cmocka_unit_test(test_capacities_name_their_field),
        cmocka_unit_test(test_tiny_payload_round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
