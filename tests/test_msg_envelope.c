/* UUID v7 ids and the 64-byte message header. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ringkernel/ringkernel.h"

static void
test_uuid_v7_bits(void **state)
{
    (void)state;
    for (int i = 0; i < 1000; i++) {
        rk_uuid u = rk_uuid_v7();

        assert_int_equal(u.b[6] >> 4, 7); /* version */
        assert_int_equal(u.b[8] >> 6, 2); /* variant 10 */
        assert_false(rk_uuid_is_nil(&u));
    }
}

static void
test_uuid_v7_monotonic(void **state)
{
    rk_uuid prev = rk_uuid_v7();

    (void)state;
    for (int i = 0; i < 200000; i++) {
        rk_uuid u = rk_uuid_v7();

        assert_int_equal(rk_uuid_cmp(&prev, &u), -1);
        prev = u;
    }
}

static void
test_uuid_v7_timestamp(void **state)
{
    struct timespec ts;
    rk_uuid u;
    uint64_t ms = 0, now;

    (void)state;
    clock_gettime(CLOCK_REALTIME, &ts);
    now = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    u = rk_uuid_v7();
    for (int i = 0; i < 6; i++)
        ms = (ms << 8) | u.b[i];
    /* The id's millisecond is the clock's (it may run ahead only on
     * counter overflow, impossible in one call here). */
    assert_true(ms >= now && ms <= now + 1000);
}

#define NTHREADS   4
#define PER_THREAD 20000

static rk_uuid ids[NTHREADS * PER_THREAD];

static void *
gen_ids(void *arg)
{
    rk_uuid *out = arg;

    for (int i = 0; i < PER_THREAD; i++)
        out[i] = rk_uuid_v7();
    return NULL;
}

static int
cmp_uuid(const void *a, const void *b)
{
    return rk_uuid_cmp(a, b);
}

static void
test_uuid_v7_threads_unique(void **state)
{
    pthread_t th[NTHREADS];

    (void)state;
    for (int i = 0; i < NTHREADS; i++)
        assert_int_equal(
            pthread_create(&th[i], NULL, gen_ids, &ids[i * PER_THREAD]), 0);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    for (int t = 0; t < NTHREADS; t++)
        for (int i = 1; i < PER_THREAD; i++)
            assert_int_equal(rk_uuid_cmp(&ids[t * PER_THREAD + i - 1],
                                 &ids[t * PER_THREAD + i]),
                -1);
    qsort(ids, NTHREADS * PER_THREAD, sizeof(rk_uuid), cmp_uuid);
    for (int i = 1; i < NTHREADS * PER_THREAD; i++)
        assert_int_not_equal(rk_uuid_cmp(&ids[i - 1], &ids[i]), 0);
}

static void
test_uuid_text(void **state)
{
    static const char *forms[] = {
        "01890a5d-ac96-774b-bcce-b302099a8057",
        "01890A5D-AC96-774B-BCCE-B302099A8057",
        "01890a5dac96774bbcceb302099a8057",
        "{01890a5d-ac96-774b-bcce-b302099a8057}",
        "urn:uuid:01890a5d-ac96-774b-bcce-b302099a8057",
        "0-1890a5dac96774bbcceb302099a8057-",
    };
    static const uint8_t want[16] = { 0x01, 0x89, 0x0a, 0x5d, 0xac, 0x96, 0x77,
        0x4b, 0xbc, 0xce, 0xb3, 0x02, 0x09, 0x9a, 0x80, 0x57 };
    static const char *bad[] = {
        "",
        "01890a5d-ac96-774b-bcce-b302099a805",
        "01890a5d-ac96-774b-bcce-b302099a80577",
        "01890a5d-ac96-774b-bcce-b302099a805g",
        "01890a5d ac96-774b-bcce-b302099a8057",
    };
    char text[RK_UUID_STRLEN + 1];
    rk_uuid u;

    (void)state;
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        memset(&u, 0, sizeof(u));
        assert_int_equal(rk_uuid_parse(forms[i], strlen(forms[i]), &u), RK_OK);
        assert_memory_equal(u.b, want, 16);
    }
    rk_uuid_format(&u, text);
    assert_string_equal(text, forms[0]);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        /* A failed parse leaves *out exactly as it was, even when the bad
         * character comes after many good digits. */
        rk_uuid before;

        memset(&u, 0xa5, sizeof(u));
        before = u;
        assert_int_equal(
            rk_uuid_parse(bad[i], strlen(bad[i]), &u), RK_EDECODE);
        assert_memory_equal(u.b, before.b, 16);
    }
    for (int i = 0; i < 100; i++) {
        rk_uuid a = rk_uuid_v7(), b;

        rk_uuid_format(&a, text);
        assert_int_equal(strlen(text), RK_UUID_STRLEN);
        assert_int_equal(rk_uuid_parse(text, RK_UUID_STRLEN, &b), RK_OK);
        assert_int_equal(rk_uuid_cmp(&a, &b), 0);
    }
}

static void
test_header_init_reply(void **state)
{
    rk_msg_header req, rep;
    uint64_t t0 = rk_now_ns();

    (void)state;
    rk_msg_header_init(&req, 42, 200);
    assert_int_equal(req.magic, RK_MSG_MAGIC);
    assert_int_equal(req.version, RK_MSG_VERSION);
    assert_int_equal(req.type_id, 42);
    assert_int_equal(req.priority, 200);
    assert_true(rk_uuid_is_nil(&req.correlation_id));
    assert_false(rk_uuid_is_nil(&req.message_id));
    assert_true(req.send_ns >= t0 && req.send_ns <= rk_now_ns());
    rk_msg_header_init(&rep, 43, RK_MSG_PRIORITY_DEFAULT);
    rk_msg_reply(&rep, &req);
    assert_memory_equal(&rep.correlation_id, &req.message_id, 16);
    assert_int_not_equal(rk_uuid_cmp(&rep.message_id, &req.message_id), 0);
    rk_msg_with_correlation(&rep, NULL);
    assert_true(rk_uuid_is_nil(&rep.correlation_id));
    rk_msg_with_correlation(&rep, &req.message_id);
    assert_memory_equal(&rep.correlation_id, &req.message_id, 16);
}

static void
test_header_wire(void **state)
{
    unsigned char slot[128];
    rk_msg_header h, back;

    (void)state;
    memset(slot, 0xAA, sizeof(slot));
    rk_msg_header_init(&h, 0x01020304, 9);
    h.flags = RK_MSG_F_FIXED | (5u << RK_MSG_F_USER_SHIFT);
    h.payload_len = 64;
    h.sender = 0x0a0b0c0d;
    h.type_version = 0x0102;
    h.send_ns = 0x1122334455667788ull;
    assert_int_equal(rk_msg_header_write(&h, slot, 63), RK_EMSGSIZE);
    assert_int_equal(rk_msg_header_write(&h, slot, sizeof(slot)), RK_OK);
    /* Pinned little-endian layout (docs/wire-format.md). */
    assert_int_equal(slot[0], 'R');
    assert_int_equal(slot[1], 'K');
    assert_int_equal(slot[2], 1);
    assert_int_equal(slot[3], 9);
    assert_int_equal(slot[4], 0x04);
    assert_int_equal(slot[7], 0x01);
    assert_int_equal(slot[8], 0x02);
    assert_int_equal(slot[9], 0x05);
    assert_int_equal(slot[12], 64);
    assert_memory_equal(slot + 16, h.message_id.b, 16);
    assert_int_equal(slot[48], 0x88);
    assert_int_equal(slot[55], 0x11);
    assert_int_equal(slot[56], 0x0d);
    assert_int_equal(slot[60], 0x02);
    assert_int_equal(slot[62], 0);
    assert_int_equal(slot[64], 0xAA);
    assert_int_equal(rk_msg_header_parse(slot, 128, &back), RK_OK);
    assert_memory_equal(&back, &h, sizeof(h));
    /* payload_len beyond the slot */
    assert_int_equal(rk_msg_header_parse(slot, 127, &back), RK_ETRUNCATED);
    assert_int_equal(rk_msg_header_parse(slot, 63, &back), RK_ETRUNCATED);
    slot[0] = 'X';
    assert_int_equal(rk_msg_header_parse(slot, 128, &back), RK_EDECODE);
    slot[0] = 'R';
    slot[2] = 2;
    assert_int_equal(rk_msg_header_parse(slot, 128, &back), RK_ENOTSUP);
    slot[2] = 1;
    slot[8] = 3;
    assert_int_equal(rk_msg_header_parse(slot, 128, &back), RK_EDECODE);
    slot[8] = 0x80;
    assert_int_equal(rk_msg_header_parse(slot, 128, &back), RK_EDECODE);
    slot[8] = 1;
    slot[63] = 1;
    assert_int_equal(rk_msg_header_parse(slot, 128, &back), RK_EDECODE);
    slot[63] = 0;
    assert_int_equal(rk_msg_header_parse(slot, 128, &back), RK_OK);
}

/* A forked child must not draw the ids its parent draws next: both start
 * from the same per-thread generator state, so without the reseed at fork
 * the child's next id equals the parent's (same millisecond, counter and
 * random tail). */
static void
test_uuid_v7_after_fork(void **state)
{
    int fds[2];
    rk_uuid mine, child;
    pid_t pid;
    int status;

    (void)state;
    (void)rk_uuid_v7(); /* this thread's generator is seeded */
    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        rk_uuid u = rk_uuid_v7();
        _exit(write(fds[1], &u, sizeof(u)) == (ssize_t)sizeof(u) ? 0 : 1);
    }
    mine = rk_uuid_v7();
    assert_int_equal(read(fds[0], &child, sizeof(child)), sizeof(child));
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(fds[0]);
    close(fds[1]);
    assert_memory_not_equal(&mine, &child, sizeof(mine));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uuid_v7_bits),
        cmocka_unit_test(test_uuid_v7_after_fork),
        cmocka_unit_test(test_uuid_v7_monotonic),
        cmocka_unit_test(test_uuid_v7_timestamp),
        cmocka_unit_test(test_uuid_v7_threads_unique),
        cmocka_unit_test(test_uuid_text),
        cmocka_unit_test(test_header_init_reply),
        cmocka_unit_test(test_header_wire),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
