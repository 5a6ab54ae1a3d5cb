/*
 * tests/test_cluster_wire.c - the cluster's wire codec (src/cluster/wire.c)
 * and rk_cluster_mpi outside mpirun: a cluster of one where MPI is built
 * in, RK_ENOTSUP with a how-to where it is not. The cross-rank behaviour
 * is tested under mpirun by tests/mpi/cluster_ranks.c.
 */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/wire.h"
#include "ringkernel/ringkernel.h"

static void
test_frame_roundtrip(void **state)
{
    (void)state;
    uint8_t buf[RK__CL_BATCH_HDR + 2 * RK__CL_FRAME_HDR + 64];
    const char payload[] = "hello"; /* 6 bytes: padded to 8 */
    rk__cl_frame f = { .kind = RK__CL_DATA,
        .priority = 200,
        .type_version = 3,
        .target = 7,
        .type_id = 0xA1B2C3D4u,
        .flags = RK_MSG_F_MSGPACK,
        .len = sizeof(payload),
        .aux = -5,
        .send_ns = 0x0102030405060708ull };
    rk__cl_frame g = { .kind = RK__CL_ERROR, .aux = RK_EREJECTED };
    rk__cl_batch b;
    rk__cl_frame out;
    size_t off = RK__CL_BATCH_HDR, len;

    f.id = rk_uuid_v7();
    f.corr = rk_uuid_v7();
    g.corr = f.id;
    len = RK__CL_BATCH_HDR + rk__cl_frame_size(f.len) + rk__cl_frame_size(0);
    assert_int_equal(rk__cl_frame_size(6), RK__CL_FRAME_HDR + 8);
    rk__cl_batch_write(buf, RK__CL_B_BYE, 2, 17);
    rk__cl_frame_write(buf + off, &f, payload);
    rk__cl_frame_write(buf + off + rk__cl_frame_size(f.len), &g, NULL);
    /* little-endian on the wire, whatever the host */
    assert_int_equal(buf[0], 0x52);
    assert_int_equal(buf[off + 8], 0xD4);
    assert_int_equal(buf[off + 24], 0x08);

    assert_int_equal(rk__cl_batch_parse(buf, len, &b), RK_OK);
    assert_int_equal(b.nframes, 2);
    assert_int_equal(b.credits, 17);
    assert_int_equal(b.flags, RK__CL_B_BYE);
    assert_int_equal(rk__cl_frame_next(buf, len, &off, &out), RK_OK);
    assert_int_equal(out.kind, RK__CL_DATA);
    assert_int_equal(out.priority, 200);
    assert_int_equal(out.type_version, 3);
    assert_int_equal(out.target, 7);
    assert_int_equal(out.type_id, 0xA1B2C3D4u);
    assert_int_equal(out.flags, RK_MSG_F_MSGPACK);
    assert_int_equal(out.aux, -5);
    assert_int_equal(out.send_ns, 0x0102030405060708ull);
    assert_int_equal(out.len, sizeof(payload));
    assert_memory_equal(out.payload, payload, sizeof(payload));
    assert_memory_equal(out.id.b, f.id.b, 16);
    assert_memory_equal(out.corr.b, f.corr.b, 16);
    assert_int_equal(rk__cl_frame_next(buf, len, &off, &out), RK_OK);
    assert_int_equal(out.kind, RK__CL_ERROR);
    assert_int_equal(out.aux, RK_EREJECTED);
    assert_memory_equal(out.corr.b, f.id.b, 16);
    assert_int_equal(rk__cl_frame_next(buf, len, &off, &out), RK_EEMPTY);
}

static void
test_frame_malformed(void **state)
{
    (void)state;
    uint8_t buf[RK__CL_BATCH_HDR + RK__CL_FRAME_HDR + 8];
    rk__cl_frame f = { .kind = RK__CL_REPLY, .len = 3 }, out;
    rk__cl_batch b;
    size_t off;

    rk__cl_batch_write(buf, 0, 1, 0);
    rk__cl_frame_write(buf + RK__CL_BATCH_HDR, &f, "abc");
    assert_int_equal(rk__cl_batch_parse(buf, 8, &b), RK_ETRUNCATED);
    /* more frames announced than can fit */
    rk__cl_batch_write(buf, 0, 5, 0);
    assert_int_equal(rk__cl_batch_parse(buf, sizeof(buf), &b), RK_ETRUNCATED);
    rk__cl_batch_write(buf, 0, 1, 0);
    buf[0] ^= 1;
    assert_int_equal(rk__cl_batch_parse(buf, sizeof(buf), &b), RK_EDECODE);
    buf[0] ^= 1;
    buf[4] = 9; /* version */
    assert_int_equal(rk__cl_batch_parse(buf, sizeof(buf), &b), RK_EDECODE);
    buf[4] = RK__CL_VERSION;
    /* a length past the buffer */
    off = RK__CL_BATCH_HDR;
    assert_int_equal(
        rk__cl_frame_next(buf, sizeof(buf) - 8, &off, &out), RK_ETRUNCATED);
    assert_int_equal(off, RK__CL_BATCH_HDR); /* not advanced */
    /* an unknown kind */
    buf[RK__CL_BATCH_HDR] = 0;
    assert_int_equal(
        rk__cl_frame_next(buf, sizeof(buf), &off, &out), RK_EDECODE);
    buf[RK__CL_BATCH_HDR] = RK__CL_KIND_MAX + 1;
    assert_int_equal(
        rk__cl_frame_next(buf, sizeof(buf), &off, &out), RK_EDECODE);
    buf[RK__CL_BATCH_HDR] = RK__CL_REPLY;
    /* padding must be zero */
    buf[sizeof(buf) - 1] = 1;
    assert_int_equal(
        rk__cl_frame_next(buf, sizeof(buf), &off, &out), RK_EDECODE);
    buf[sizeof(buf) - 1] = 0;
    assert_int_equal(rk__cl_frame_next(buf, sizeof(buf), &off, &out), RK_OK);
    assert_memory_equal(out.payload, "abc", 3);
}

static void
test_directory(void **state)
{
    (void)state;
    uint8_t buf[RK__CL_DIR_HDR + 2 * RK__CL_DIR_EXPORT + RK__CL_DIR_TOPIC];
    rk__cl_dir_export e = { "echo", 256, 512, RK_BP_REJECT, 1 }, eo;
    rk__cl_dir_export long_id;
    rk__cl_dir_topic t = { "news", 3 }, to;
    rk__cl_dir d;

    memset(&long_id, 0, sizeof(long_id));
    memset(long_id.id, 'x', RK__CL_NAME_MAX);
    assert_int_equal(rk__cl_dir_size(2, 1), sizeof(buf));
    rk__cl_dir_header_write(buf, 2, 1, 99);
    rk__cl_dir_export_write(buf + RK__CL_DIR_HDR, &e);
    rk__cl_dir_export_write(
        buf + RK__CL_DIR_HDR + RK__CL_DIR_EXPORT, &long_id);
    rk__cl_dir_topic_write(buf + RK__CL_DIR_HDR + 2 * RK__CL_DIR_EXPORT, &t);
    assert_int_equal(rk__cl_dir_parse(buf, sizeof(buf), &d), RK_OK);
    assert_int_equal(d.credits, 99);
    assert_int_equal(rk__cl_dir_export_get(&d, 0, &eo), RK_OK);
    assert_string_equal(eo.id, "echo");
    assert_int_equal(eo.capacity, 256);
    assert_int_equal(eo.max_payload, 512);
    assert_int_equal(eo.backpressure, RK_BP_REJECT);
    assert_int_equal(eo.bands, 1);
    assert_int_equal(rk__cl_dir_export_get(&d, 1, &eo), RK_OK);
    assert_int_equal(strlen(eo.id), RK__CL_NAME_MAX);
    assert_int_equal(rk__cl_dir_export_get(&d, 2, &eo), RK_EINVAL);
    assert_int_equal(rk__cl_dir_topic_get(&d, 0, &to), RK_OK);
    assert_string_equal(to.name, "news");
    assert_int_equal(to.index, 3);
    /* sizes that do not add up, names without a NUL, bad policies */
    assert_int_equal(rk__cl_dir_parse(buf, sizeof(buf) - 1, &d), RK_EDECODE);
    assert_int_equal(rk__cl_dir_parse(buf, 4, &d), RK_ETRUNCATED);
    rk__cl_dir_header_write(buf, 0xFFFFFFFFu, 0xFFFFFFFFu, 0);
    assert_int_equal(rk__cl_dir_parse(buf, sizeof(buf), &d), RK_EDECODE);
    rk__cl_dir_header_write(buf, 2, 1, 99);
    assert_int_equal(rk__cl_dir_parse(buf, sizeof(buf), &d), RK_OK);
    memset(buf + RK__CL_DIR_HDR, 'y', 64);
    assert_int_equal(rk__cl_dir_export_get(&d, 0, &eo), RK_EDECODE);
    rk__cl_dir_export_write(buf + RK__CL_DIR_HDR, &e);
    buf[RK__CL_DIR_HDR + 72] = 9;
    assert_int_equal(rk__cl_dir_export_get(&d, 0, &eo), RK_EDECODE);
    buf[RK__CL_DIR_HDR] = 0; /* empty name */
    assert_int_equal(rk__cl_dir_export_get(&d, 0, &eo), RK_EDECODE);
}

static void
test_error_code(void **state)
{
    (void)state;
    assert_string_equal(rk_err_name(RK_EUNREACHABLE), "RK_EUNREACHABLE");
    assert_int_equal(RK_EUNREACHABLE, RK__ERR_COUNT - 1); /* at the end */
}

/* Outside mpirun: a cluster of one where MPI is built in; without MPI
 * the call says how to get it. */
#ifdef RK_TEST_HAVE_MPI
static int
echo_h(rk_ctx *ctx, const rk_msg_view *m)
{
    return rk_ctx_reply(ctx, m, m->hdr->type_id, m->data, m->len);
}

/* A program written for one process keeps working after a join with the
 * zeroed configuration: nothing is exported, so the cluster does not
 * take its kernels' output and rk_recv still gets it. export_all with a
 * list is refused. */
static void
test_join_keeps_local_output(void **state)
{
    (void)state;
    rk_runtime *rt;
    rk_cluster *cl;
    rk_runtime_config rc = { .no_static_kernels = true };
    rk_kernel_def d = { .id = "echo", .handler = echo_h };
    rk_cluster_export ex = { .id = "echo" };
    rk_cluster_config both
        = { .exports = &ex, .n_exports = 1, .export_all = true };
    rk_kernel k;
    char back[8];
    size_t len = 0;

    assert_int_equal(rk_runtime_create(&rt, &rc), RK_OK);
    assert_int_equal(rk_runtime_register(rt, &d), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "echo"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "echo"), RK_OK);
    assert_int_equal(rk_cluster_mpi(rt, NULL, &both, &cl), RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), "export_all"));
    assert_int_equal(rk_cluster_mpi(rt, NULL, NULL, &cl), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "echo", &k), RK_OK);
    for (int i = 0; i < 8; i++)
        assert_int_equal(
            rk_send(rt, k, 7, "ping", 5, 128, 10 * 1000000000ll), RK_OK);
    /* Every reply is out before the leave, whose progress loop polls the
     * exports' output at least once: an exported echo would lose them. */
    for (uint64_t until = rk_now_ns() + 30 * 1000000000ull;;) {
        rk_kernel_stats ks;
        assert_int_equal(rk_kernel_stats_get(rt, "echo", &ks), RK_OK);
        if (ks.processed == 8)
            break;
        assert_true(rk_now_ns() < until);
        sched_yield();
    }
    assert_int_equal(rk_cluster_leave(cl), RK_OK);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(
            rk_recv(rt, k, NULL, back, sizeof(back), &len, RK_NO_WAIT), RK_OK);
        assert_int_equal(len, 5);
        assert_string_equal(back, "ping");
    }
    rk_runtime_destroy(rt);
}
#endif

static void
test_join_alone(void **state)
{
    (void)state;
    rk_runtime *rt;
    rk_cluster *cl = (rk_cluster *)&cl;
    rk_runtime_config rc = { .no_static_kernels = true };
    rk_cluster_export bad = { .id = "nope" };
    rk_cluster_config cfg = { .exports = &bad, .n_exports = 1 };

    assert_int_equal(rk_runtime_create(&rt, &rc), RK_OK);
    assert_int_equal(rk_cluster_mpi(NULL, NULL, NULL, &cl),
#ifdef RK_TEST_HAVE_MPI
        RK_EINVAL);
#else
        RK_ENOTSUP);
#endif
    assert_null(cl);
#ifdef RK_TEST_HAVE_MPI
    /* An export naming no kernel fails the join (after the ranks vote). */
    assert_int_equal(rk_cluster_mpi(rt, NULL, &cfg, &cl), RK_ENOTFOUND);
    assert_non_null(strstr(rk_errdetail(), "nope"));
    /* rk_runtime_destroy without a leave stops the cluster's threads
     * through its control kernel (under ASan: and frees it). */
    {
        rk_runtime *rt2;
        rk_cluster *cl2;
        assert_int_equal(rk_runtime_create(&rt2, &rc), RK_OK);
        assert_int_equal(rk_cluster_mpi(rt2, NULL, NULL, &cl2), RK_OK);
        rk_kernel_state st;
        assert_int_equal(rk_kernel_state_get(rt2, "rk.cluster", &st), RK_OK);
        assert_int_equal(st, RK_KERNEL_ACTIVE);
        rk_runtime_destroy(rt2);
    }
    assert_int_equal(rk_cluster_mpi(rt, NULL, NULL, &cl), RK_OK);
    assert_int_equal(rk_cluster_size(cl), 1);
    assert_int_equal(rk_cluster_rank(cl), 0);
    assert_int_equal(rk_cluster_peer_status(cl, 0), RK_OK);
    assert_int_equal(rk_cluster_peer_status(cl, 1), RK_EINVAL);
    assert_int_equal(rk_cluster_leave(cl), RK_OK);
#else
    (void)cfg;
    assert_int_equal(rk_cluster_mpi(rt, NULL, NULL, &cl), RK_ENOTSUP);
    assert_non_null(strstr(rk_errdetail(), "without MPI"));
    assert_non_null(strstr(rk_errdetail(), "libopenmpi-dev"));
    assert_int_equal(rk_cluster_leave(NULL), RK_OK);
#endif
    rk_runtime_destroy(rt);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_roundtrip),
        cmocka_unit_test(test_frame_malformed),
        cmocka_unit_test(test_directory),
        cmocka_unit_test(test_error_code),
        cmocka_unit_test(test_join_alone),
#ifdef RK_TEST_HAVE_MPI
        cmocka_unit_test(test_join_keeps_local_output),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
