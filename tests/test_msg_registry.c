/* The type registry's look-ups by name (issue 10, defect 5). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "message/message_internal.h"
#include "msg_test_types.h"
#include "ringkernel/ringkernel.h"

/* registry.c's by-name table: FNV-1a of the name, 2 * RK_MSGTYPE_MAX
 * slots. The test needs a name that hashes to a registered type's slot. */
static uint32_t
slot_of(const char *s, size_t n)
{
    return (uint32_t)rk__fnv1a(UINT64_C(0xcbf29ce484222325), s, n)
        & (2 * RK_MSGTYPE_MAX - 1);
}

/*
 * A wire "__type__" may hold NUL bytes. "Point\0<8 bytes>" whose hash
 * lands on Point's slot made the old look-up compare with strncmp (equal
 * up to the NUL) and then read "Point"[13], past the end of the name
 * (ASan: global-buffer-overflow); it must simply not match.
 */
static void
test_embedded_nul_reads_nothing_past_the_name(void **state)
{
    char probe[5 + 1 + 8];
    uint32_t want = slot_of("Point", 5);
    uint64_t k;

    (void)state;
    assert_int_equal(rk_msgtype_register(&rkt_point_msgtype), RK_OK);
    memcpy(probe, "Point", 6); /* with its NUL */
    for (k = 0;; k++) {
        memcpy(probe + 6, &k, 8);
        if (slot_of(probe, sizeof(probe)) == want)
            break;
    }
    assert_null(rk_msgtype_by_name_n(probe, sizeof(probe)));
    /* Every prefix and extension of the name misses too. */
    for (size_t n = 0; n <= sizeof(probe); n++)
        if (n != 5)
            assert_null(rk_msgtype_by_name_n(probe, n));
    assert_ptr_equal(rk_msgtype_by_name_n(probe, 5), &rkt_point_msgtype);
}

static void
test_lookups(void **state)
{
    (void)state;
    assert_int_equal(rk_msgtype_register(&rkt_all_msgtype), RK_OK);
    assert_int_equal(rk_msgtype_register(&rkt_all_msgtype), RK_OK);
    assert_ptr_equal(rk_msgtype_by_name("AllTypes"), &rkt_all_msgtype);
    assert_ptr_equal(rk_msgtype_by_name_n("AllTypesXYZ", 8), &rkt_all_msgtype);
    assert_null(rk_msgtype_by_name_n("AllTypes", 7));
    assert_null(rk_msgtype_by_name("alltypes"));
    assert_null(rk_msgtype_by_name(NULL));
    assert_null(rk_msgtype_by_name_n(NULL, 8));
    assert_ptr_equal(rk_msgtype_by_id(rkt_all_msgtype.id), &rkt_all_msgtype);
    assert_null(rk_msgtype_by_id(0));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embedded_nul_reads_nothing_past_the_name),
        cmocka_unit_test(test_lookups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
