/*
 * The unified buffer's state machine, checked exhaustively: every state x
 * every operation -> expected result code, next state, transfer counts
 * and data. Runs on the CPU device (whose "device" side is a distinct
 * allocation) everywhere, and on CUDA device 0 where one exists.
 *
 * RK_PRINT_BUFFER_TABLE=1 prints the expected table as the markdown that
 * docs/memory.md contains, so the document is generated from the test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "memory/mem.h"
#include "ringkernel/ringkernel.h"

enum { U, HO, DO, S, HD, DD, NSTATES };

enum op {
    OP_HOST_READ,
    OP_HOST_WRITE,
    OP_HOST_DISCARD,
    OP_DEV_READ,
    OP_DEV_WRITE,
    OP_DEV_DISCARD,
    OP_MARK_HOST_DIRTY,
    OP_MARK_DEV_DIRTY,
    OP_ENSURE_HOST,
    OP_ENSURE_DEV,
    OP_COPY_FROM,
    OP_COPY_TO,
    OP_FILL,
    OP_ZEROS,
    NOPS
};

static const char *const op_names[NOPS] = {
    "host(READ)",
    "host(WRITE)",
    "host(DISCARD)",
    "device(READ)",
    "device(WRITE)",
    "device(DISCARD)",
    "mark_host_dirty",
    "mark_device_dirty",
    "ensure_host",
    "ensure_device",
    "copy_from",
    "copy_to",
    "fill",
    "zeros",
};

struct expect {
    int rc;
    int next;
    int h2d, d2h, avoided;
};

#define E(rc, n, h, d, a)                                                     \
    {                                                                         \
        rc, n, h, d, a                                                        \
    }
#define OK RK_OK
#define ES RK_ESTATE

/* Rows: operations; columns: starting state U HO DO S HD DD. */
static const struct expect table[NOPS][NSTATES] = {
    [OP_HOST_READ]
    = { E(OK, HO, 0, 0, 0), E(OK, HO, 0, 0, 1), E(OK, S, 0, 1, 0),
        E(OK, S, 0, 0, 1), E(OK, HD, 0, 0, 1), E(OK, S, 0, 1, 0) },
    [OP_HOST_WRITE]
    = { E(OK, HO, 0, 0, 0), E(OK, HO, 0, 0, 1), E(OK, HD, 0, 1, 0),
        E(OK, HD, 0, 0, 1), E(OK, HD, 0, 0, 1), E(OK, HD, 0, 1, 0) },
    [OP_HOST_DISCARD]
    = { E(OK, HO, 0, 0, 0), E(OK, HO, 0, 0, 0), E(OK, HD, 0, 0, 0),
        E(OK, HD, 0, 0, 0), E(OK, HD, 0, 0, 0), E(OK, HD, 0, 0, 0) },
    [OP_DEV_READ]
    = { E(OK, DO, 0, 0, 0), E(OK, S, 1, 0, 0), E(OK, DO, 0, 0, 1),
        E(OK, S, 0, 0, 1), E(OK, S, 1, 0, 0), E(OK, DD, 0, 0, 1) },
    [OP_DEV_WRITE]
    = { E(OK, DO, 0, 0, 0), E(OK, DD, 1, 0, 0), E(OK, DO, 0, 0, 1),
        E(OK, DD, 0, 0, 1), E(OK, DD, 1, 0, 0), E(OK, DD, 0, 0, 1) },
    [OP_DEV_DISCARD]
    = { E(OK, DO, 0, 0, 0), E(OK, DD, 0, 0, 0), E(OK, DO, 0, 0, 0),
        E(OK, DD, 0, 0, 0), E(OK, DD, 0, 0, 0), E(OK, DD, 0, 0, 0) },
    [OP_MARK_HOST_DIRTY]
    = { E(ES, U, 0, 0, 0), E(OK, HO, 0, 0, 0), E(ES, DO, 0, 0, 0),
        E(OK, HD, 0, 0, 0), E(OK, HD, 0, 0, 0), E(OK, HD, 0, 0, 0) },
    [OP_MARK_DEV_DIRTY]
    = { E(ES, U, 0, 0, 0), E(ES, HO, 0, 0, 0), E(OK, DO, 0, 0, 0),
        E(OK, DD, 0, 0, 0), E(OK, DD, 0, 0, 0), E(OK, DD, 0, 0, 0) },
    [OP_ENSURE_HOST]
    = { E(OK, HO, 0, 0, 0), E(OK, HO, 0, 0, 1), E(OK, S, 0, 1, 0),
        E(OK, S, 0, 0, 1), E(OK, HD, 0, 0, 1), E(OK, S, 0, 1, 0) },
    [OP_ENSURE_DEV]
    = { E(OK, DO, 0, 0, 0), E(OK, S, 1, 0, 0), E(OK, DO, 0, 0, 1),
        E(OK, S, 0, 0, 1), E(OK, S, 1, 0, 0), E(OK, DD, 0, 0, 1) },
    [OP_COPY_FROM]
    = { E(OK, HO, 0, 0, 0), E(OK, HO, 0, 0, 0), E(OK, HD, 0, 0, 0),
        E(OK, HD, 0, 0, 0), E(OK, HD, 0, 0, 0), E(OK, HD, 0, 0, 0) },
    [OP_COPY_TO] = { E(OK, HO, 0, 0, 0), E(OK, HO, 0, 0, 1), E(OK, S, 0, 1, 0),
        E(OK, S, 0, 0, 1), E(OK, HD, 0, 0, 1), E(OK, S, 0, 1, 0) },
    [OP_FILL] = { E(OK, HO, 0, 0, 0), E(OK, HO, 0, 0, 0), E(OK, HD, 0, 0, 0),
        E(OK, HD, 0, 0, 0), E(OK, HD, 0, 0, 0), E(OK, HD, 0, 0, 0) },
    [OP_ZEROS] = { E(OK, HO, 0, 0, 0), E(OK, HO, 0, 0, 0), E(OK, HD, 0, 0, 0),
        E(OK, HD, 0, 0, 0), E(OK, HD, 0, 0, 0), E(OK, HD, 0, 0, 0) },
};

/* 16 u32 elements in a 8x2 shape. Every pattern fills all elements. */
#define N  16
#define VA 0xA1A1A1A1u /* first data written */
#define VB 0xB2B2B2B2u /* newer data on one side (dirty states) */
#define VC 0xC3C3C3C3u /* copy_from source */
#define VD 0xD4D4D4D4u /* written through an accessor by the op */
#define VF 0xF5F5F5F5u /* fill value */

static rk_device_kind kind_under_test;

/* Raw writes and reads of one side, bypassing the state machine. */
static void
side_set(rk_buffer *b, int dev, uint32_t v)
{
    uint32_t tmp[N];
    void *h, *d;

    for (int i = 0; i < N; i++)
        tmp[i] = v;
    rk__buffer_sides(b, &h, &d);
    if (!dev) {
        assert_non_null(h);
        memcpy(h, tmp, sizeof(tmp));
    } else {
        assert_non_null(d);
        if (kind_under_test == RK_DEVICE_CUDA)
            assert_int_equal(rk__mem_h2d(0, d, tmp, sizeof(tmp), NULL), 0);
        else
            memcpy(d, tmp, sizeof(tmp));
    }
}

static void
side_check(rk_buffer *b, int dev, uint32_t v)
{
    uint32_t tmp[N];
    void *h, *d;

    rk__buffer_sides(b, &h, &d);
    if (!dev) {
        memcpy(tmp, h, sizeof(tmp));
    } else if (kind_under_test == RK_DEVICE_CUDA) {
        assert_int_equal(rk__mem_d2h(0, tmp, d, sizeof(tmp), NULL), 0);
    } else {
        memcpy(tmp, d, sizeof(tmp));
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(tmp[i], v);
}

static rk_buffer *
make_buffer(void)
{
    rk_buffer_config cfg = {
        .dtype = RK_DTYPE_U32, .dims = { 8, 2, 0 }, .device = kind_under_test
    };
    rk_buffer *b = NULL;
    assert_int_equal(rk_buffer_create(&b, &cfg), RK_OK);
    assert_int_equal(rk_buffer_get_state(b), RK_BUFFER_UNINITIALIZED);
    return b;
}

/* Drives a fresh buffer into state s; returns the current content. */
static uint32_t
enter_state(rk_buffer *b, int s)
{
    uint32_t src[N];
    void *p;

    for (int i = 0; i < N; i++)
        src[i] = VA;
    switch (s) {
    case U:
        return 0;
    case DO:
        assert_int_equal(rk_buffer_device(b, RK_ACCESS_DISCARD, &p), 0);
        side_set(b, 1, VA);
        return VA;
    default:
        break;
    }
    /* HO, then S, then one side written for the dirty states. */
    assert_int_equal(rk_buffer_copy_from(b, src, sizeof(src)), 0);
    if (s == HO)
        return VA;
    assert_int_equal(rk_buffer_ensure_device(b, NULL), 0);
    if (s == S)
        return VA;
    if (s == HD)
        assert_int_equal(rk_buffer_host(b, RK_ACCESS_WRITE, &p), 0);
    else
        assert_int_equal(rk_buffer_device(b, RK_ACCESS_WRITE, &p), 0);
    side_set(b, s == DD, VB);
    return VB;
}

/* Applies op; returns its code and updates *content with what the buffer
 * must hold afterwards. Writes through accessors use VD. */
static int
apply(rk_buffer *b, int op, uint32_t *content)
{
    uint32_t tmp[N];
    uint32_t f = VF;
    void *p = NULL, *h, *d;
    int rc;

    switch (op) {
    case OP_HOST_READ:
    case OP_DEV_READ:
        rc = op == OP_HOST_READ ? rk_buffer_host(b, RK_ACCESS_READ, &p)
                                : rk_buffer_device(b, RK_ACCESS_READ, &p);
        assert_non_null(p);
        /* READ hands out a side that already holds the data. */
        if (rc == RK_OK)
            side_check(b, op == OP_DEV_READ, *content);
        return rc;
    case OP_HOST_WRITE:
    case OP_HOST_DISCARD:
        rc = rk_buffer_host(
            b, op == OP_HOST_WRITE ? RK_ACCESS_WRITE : RK_ACCESS_DISCARD, &p);
        if (rc == RK_OK && op == OP_HOST_WRITE)
            side_check(b, 0, *content); /* WRITE syncs before handing out */
        side_set(b, 0, VD);
        *content = VD;
        return rc;
    case OP_DEV_WRITE:
    case OP_DEV_DISCARD:
        rc = rk_buffer_device(
            b, op == OP_DEV_WRITE ? RK_ACCESS_WRITE : RK_ACCESS_DISCARD, &p);
        if (rc == RK_OK && op == OP_DEV_WRITE)
            side_check(b, 1, *content);
        side_set(b, 1, VD);
        *content = VD;
        return rc;
    case OP_MARK_HOST_DIRTY:
    case OP_MARK_DEV_DIRTY:
        /* Simulate a write made through an earlier pointer, then declare
         * it; with no memory on that side there is nothing to write. */
        rk__buffer_sides(b, &h, &d);
        if ((op == OP_MARK_HOST_DIRTY ? h : d) != NULL) {
            side_set(b, op == OP_MARK_DEV_DIRTY, VD);
            *content = VD;
        }
        return op == OP_MARK_HOST_DIRTY ? rk_buffer_mark_host_dirty(b)
                                        : rk_buffer_mark_device_dirty(b);
    case OP_ENSURE_HOST:
        return rk_buffer_ensure_host(b, NULL);
    case OP_ENSURE_DEV:
        return rk_buffer_ensure_device(b, NULL);
    case OP_COPY_FROM:
        for (int i = 0; i < N; i++)
            tmp[i] = VC;
        *content = VC;
        return rk_buffer_copy_from(b, tmp, sizeof(tmp));
    case OP_COPY_TO:
        memset(tmp, 0x5a, sizeof(tmp));
        rc = rk_buffer_copy_to(b, tmp, sizeof(tmp));
        for (int i = 0; i < N; i++)
            assert_int_equal(tmp[i], *content);
        return rc;
    case OP_FILL:
        *content = VF;
        return rk_buffer_fill(b, &f);
    case OP_ZEROS:
        *content = 0;
        return rk_buffer_zeros(b);
    }
    fail();
    return -1;
}

static void
run_matrix(void)
{
    for (int s = 0; s < NSTATES; s++) {
        for (int op = 0; op < NOPS; op++) {
            const struct expect *e = &table[op][s];
            rk_buffer *b = make_buffer();
            rk_buffer_stats st;
            uint32_t content = enter_state(b, s);
            uint32_t out[N];
            int rc;

            assert_int_equal(rk_buffer_get_state(b), s);
            rk_buffer_stats_reset(b);
            rc = apply(b, op, &content);
            if (rc != e->rc || (int)rk_buffer_get_state(b) != e->next)
                print_error("%s in %s: rc %s state %s\n", op_names[op],
                    rk_buffer_state_name((rk_buffer_state)s), rk_err_name(rc),
                    rk_buffer_state_name(rk_buffer_get_state(b)));
            assert_int_equal(rc, e->rc);
            assert_int_equal(rk_buffer_get_state(b), e->next);
            rk_buffer_stats_get(b, &st);
            assert_int_equal(st.h2d_transfers, e->h2d);
            assert_int_equal(st.d2h_transfers, e->d2h);
            assert_int_equal(st.h2d_bytes, e->h2d * sizeof(out));
            assert_int_equal(st.d2h_bytes, e->d2h * sizeof(out));
            assert_int_equal(st.transfers_avoided, e->avoided);
            /* Both sides, once synchronised, hold the expected data. */
            assert_int_equal(rk_buffer_copy_to(b, out, sizeof(out)), RK_OK);
            for (int i = 0; i < N; i++)
                assert_int_equal(out[i], content);
            assert_int_equal(rk_buffer_ensure_device(b, NULL), RK_OK);
            assert_int_equal(rk_buffer_get_state(b), RK_BUFFER_SYNCHRONIZED);
            side_check(b, 1, content);
            rk_buffer_destroy(b);
        }
    }
}

static void
test_state_matrix_cpu(void **state)
{
    (void)state;
    kind_under_test = RK_DEVICE_CPU;
    run_matrix();
}

static void
test_state_matrix_cuda(void **state)
{
    const char *why;
    (void)state;
    if (rk_cuda_probe(&why) != RK_CUDA_AVAILABLE) {
        print_message("no CUDA device (%s); skipping\n", why);
        skip();
    }
    kind_under_test = RK_DEVICE_CUDA;
    run_matrix();
}

static void
print_table(void)
{
    static const char *const sn[NSTATES] = { "UNINIT", "HOST_ONLY",
        "DEVICE_ONLY", "SYNC", "HOST_DIRTY", "DEVICE_DIRTY" };
    printf("| operation |");
    for (int s = 0; s < NSTATES; s++)
        printf(" %s |", sn[s]);
    printf("\n|---|");
    for (int s = 0; s < NSTATES; s++)
        printf("---|");
    printf("\n");
    for (int op = 0; op < NOPS; op++) {
        printf("| `%s` |", op_names[op]);
        for (int s = 0; s < NSTATES; s++) {
            const struct expect *e = &table[op][s];
            if (e->rc != RK_OK) {
                printf(" RK_ESTATE |");
                continue;
            }
            printf(" %s", sn[e->next]);
            if (e->h2d)
                printf(" +h2d");
            if (e->d2h)
                printf(" +d2h");
            if (e->avoided)
                printf(" (avoided)");
            printf(" |");
        }
        printf("\n");
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_matrix_cpu),
        cmocka_unit_test(test_state_matrix_cuda),
    };
    if (getenv("RK_PRINT_BUFFER_TABLE") != NULL) {
        print_table();
        return 0;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
