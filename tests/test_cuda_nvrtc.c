/*
 * Every device header and the persistent loop compiled by NVRTC through
 * the backend's own loader (src/backend/cuda/nvrtc.c), with checks on the
 * PTX: the entry points exist, host<->device words use system-scope
 * acquire/release, K2K helpers GPU scope, and no instruction is an atomic
 * read-modify-write (atom./red.), which PCIe would not make atomic. Also:
 * the cubin/PTX choice per architecture, compile errors as RK_ECOMPILE
 * naming the user's file:line, and a missing NVRTC as RK_ENVRTC.
 *
 * NVRTC needs no GPU. Without NVRTC the tests skip (the ctest entry is
 * still run, so the skip shows).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/cuda/nvrtc.h"
#include "cuda_helpers.h"
#include "ringkernel/ringkernel.h"

#define compile_ptx cuda_compile_ptx

/* Each header alone: it must compile with nothing before it. */
static void
test_headers_compile_alone(void **state)
{
    static const char *const headers[] = { "ringkernel/rk_dev.h",
        "ringkernel/dev_ctl.h", "ringkernel/dev_kernel.h",
        "ringkernel/ring_proto.h", "ringkernel/ring_ll.h",
        "ringkernel/dev_ll.h", "ringkernel/dev_warp.h", "ringkernel/dev_send.h",
        "ringkernel/ctl_proto.h", "ringkernel/rk_atomic.h",
        "ringkernel/dev_k2k.h" };
    char src[256], name[32];
    (void)state;
    if (!cuda_have_nvrtc())
        skip();
    for (size_t i = 0; i < sizeof(headers) / sizeof(headers[0]); i++) {
        snprintf(name, sizeof(name), "alone_%zu.cu", i);
        snprintf(src, sizeof(src),
            "#include \"%s\"\n"
            "extern \"C\" __global__ void probe(unsigned *p) { p[0] = 1; }\n",
            headers[i]);
        char *ptx = compile_ptx(name, src, 90, 1);
        assert_non_null(strstr(ptx, ".entry probe"));
        free(ptx);
    }
}

/* The persistent loop and the actor API, through the test kernels. */
static void
test_loop_ptx(void **state)
{
    char *src, *ptx;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();
    src = cuda_slurp("tests/kernels/test_kernels.cu");
    assert_non_null(src);
    ptx = compile_ptx("test_kernels.cu", src, 90, 1);
    assert_non_null(strstr(ptx, ".visible .entry rk_echo("));
    assert_non_null(strstr(ptx, ".visible .entry rk_fwd("));
    assert_non_null(strstr(ptx, ".visible .entry rk_sum("));
    assert_non_null(strstr(ptx, ".visible .entry rk_fail("));
    assert_non_null(strstr(ptx, ".visible .entry rk_count("));
    assert_non_null(strstr(ptx, ".visible .entry rk_wecho("));
    /* Control block and lanes: system scope, 32-bit control words. */
    assert_true(cuda_count_op(ptx, "ld.acquire.sys.u32") > 0);
    assert_true(cuda_count_op(ptx, "st.release.sys.u32") > 0);
    assert_true(cuda_count_op(ptx, "ld.acquire.sys.u64") > 0);
    /* Lanes: the host's are LL lanes, read and written in flagged 16-byte
     * lines at system scope with no release (ring_ll.h); K2K lanes hand
     * back and publish with GPU-scope releases. */
    assert_true(cuda_count_op(ptx, "ld.relaxed.sys.v2.u64") > 0);
    assert_true(cuda_count_op(ptx, "st.relaxed.sys.v2.u64") > 0);
    assert_true(cuda_count_op(ptx, "st.release.gpu.u64") > 0);
    /* The block's writers and readers fence at system scope before the
     * sync that precedes thread 0's release. */
    assert_true(cuda_count_op(ptx, "membar.sys")
            + cuda_count_op(ptx, "fence.sc.sys")
            + cuda_count_op(ptx, "fence.acq_rel.sys")
        > 0);
    /* LL lanes: a batch is swept and a reply written with 16-byte
     * relaxed system-scope accesses of two flagged words. */
    assert_true(cuda_count_op(ptx, "ld.relaxed.sys.v2.u64") > 0);
    assert_true(cuda_count_op(ptx, "st.relaxed.sys.v2.u64") > 0);
    /* Back-off, block sync, the device clock. */
    assert_true(cuda_count_op(ptx, "nanosleep") > 0);
    assert_true(cuda_count_op(ptx, "bar.sync") > 0
        || cuda_count_op(ptx, "barrier.sync") > 0);
    assert_non_null(strstr(ptx, "%globaltimer"));
    /* rk_dev_trap is __trap(): PTX trap; (rk_trap, tests/test_cuda_trap). */
    assert_non_null(strstr(ptx, ".visible .entry rk_trap("));
    assert_true(cuda_count_op(ptx, "trap;") > 0);
    /* The shared ctx lives in shared memory. */
    assert_non_null(strstr(ptx, ".shared"));
    /* Never a read-modify-write. */
    assert_int_equal(cuda_count_op(ptx, "atom."), 0);
    assert_int_equal(cuda_count_op(ptx, "red."), 0);
    free(ptx);
    free(src);
}

/* The fast path (issue 24): a kernel whose lanes are all LL lanes (the
 * host's lanes; RK_DEV_LL_ONLY drops the K2K ring-lane branches) takes
 * requests and publishes replies with no system fence at all: no
 * membar.sys / fence.sc.sys / fence.acq_rel.sys anywhere in its PTX (the
 * argument is in docs/cuda-data-path.md, "One read per message"). The sweep and the
 * reply are the 16-byte relaxed accesses, and ptxas accepts them (an
 * sm_90 cubin). */
static void
test_fast_path_ptx(void **state)
{
    static const char src[]
        = "#define RK_DEV_LL_ONLY 1\n"
          "#include \"ringkernel/dev_kernel.h\"\n"
          "RK_DEV_HANDLER(echo_h)(rk_dev_ctx *x, const rk_dev_msg *m)\n"
          "{ return rk_dev_reply(x, m, m->hdr->type_id, m->data, m->len); }\n"
          "RK_DEV_KERNEL(rk_echo_ll, echo_h)\n";
    rk__nvrtc_src s = { .name = "fast.cu", .source = src, .cc = 90, .raw = 1 };
    rk__nvrtc_image img;
    char *ptx;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();
    ptx = compile_ptx("fast.cu", src, 90, 1);
    assert_non_null(strstr(ptx, ".visible .entry rk_echo_ll("));
    assert_true(cuda_count_op(ptx, "ld.relaxed.sys.v2.u64") > 0);
    assert_true(cuda_count_op(ptx, "st.relaxed.sys.v2.u64") > 0);
    cuda_assert_no_ops(
        ptx, (const char *const[]) { CUDA_NO_SYS_FENCE, "membar.gl", NULL });
    free(ptx);
    assert_int_equal(rk__nvrtc_compile(&s, &img), RK_OK);
    assert_int_equal(img.kind, RK__IMG_CUBIN);
    rk__nvrtc_image_free(&img);
}

/* The GPU-scope helpers compile to .gpu orders (K2K in device memory). */
static void
test_gpu_scope_ptx(void **state)
{
    static const char src[]
        = "extern \"C\" __global__ void k2k(unsigned *a, "
          "unsigned long long *b) {\n"
          "  unsigned v = rk_dev_ld_acquire_gpu32(a);\n"
          "  rk_dev_st_release_gpu64(b, v + rk_dev_ld_acquire_gpu64(b));\n"
          "  rk_dev_st_release_gpu32(a + 1, v);\n"
          "}\n";
    (void)state;
    if (!cuda_have_nvrtc())
        skip();
    char *ptx = compile_ptx("k2k.cu", src, 80, 0);
    assert_true(cuda_count_op(ptx, "ld.acquire.gpu.u32") > 0);
    assert_true(cuda_count_op(ptx, "ld.acquire.gpu.u64") > 0);
    assert_true(cuda_count_op(ptx, "st.release.gpu.u32") > 0);
    assert_true(cuda_count_op(ptx, "st.release.gpu.u64") > 0);
    assert_int_equal(cuda_count_op(ptx, "atom."), 0);
    free(ptx);
}

/* The K2K path (dev_k2k.h: both attaches, room, publish, receive, hand
 * back, close) on device-memory lanes is GPU scope: ld.acquire.gpu /
 * st.release.gpu. A lane between two GPUs (peer access, RK_RING_F_SYS,
 * chosen per lane at attach: test_cuda_peer) needs system scope, the one
 * that covers both (docs/cuda-devices.md): the same acquire and release
 * at .sys are compiled in beside them, and they are the path's only
 * system-scope operations: no other system-scope access, no fence. The
 * loop's kernels use it for routes (rk_fwd). */
static void
test_k2k_ptx(void **state)
{
    static const char src[]
        = "#include \"ringkernel/dev_k2k.h\"\n"
          "extern \"C\" __global__ void k2k_path(rk_ring_ctrl *in,\n"
          "    rk_ring_ctrl *out, unsigned char *slots,\n"
          "    unsigned long long *res) {\n"
          "  rk_ring_side a, b; int closed = 0; unsigned n;\n"
          "  rk_k2k_cons_attach(in, &a, slots);\n"
          "  rk_k2k_prod_attach(out, &b, slots);\n"
          "  n = rk_k2k_cons_avail(in, &a, 4);\n"
          "  if (rk_k2k_prod_space(out, &b, 1, &closed) != 0) {\n"
          "    slots[0] = (unsigned char)n;\n"
          "    rk_k2k_prod_publish(out, &b, 1);\n"
          "  }\n"
          "  rk_k2k_cons_release(in, &a, n);\n"
          "  rk_k2k_close(in, &a);\n"
          "  res[0] = (unsigned long long)closed;\n"
          "}\n";
    char *ptx, *src2;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();
    ptx = compile_ptx("k2k_path.cu", src, 90, 1);
    assert_true(cuda_count_op(ptx, "ld.acquire.gpu.u64") > 0);
    assert_true(cuda_count_op(ptx, "st.release.gpu.u64") > 0);
    assert_true(cuda_count_op(ptx, "ld.acquire.sys.u64") > 0);
    assert_true(cuda_count_op(ptx, "st.release.sys.u64") > 0);
    assert_int_equal(cuda_count_lines_with(ptx, ".sys"),
        cuda_count_op(ptx, "ld.acquire.sys.u64")
            + cuda_count_op(ptx, "st.release.sys.u64"));
    assert_int_equal(cuda_count_op(ptx, "fence"), 0);
    assert_int_equal(cuda_count_op(ptx, "membar"), 0);
    assert_int_equal(cuda_count_op(ptx, "atom."), 0);
    free(ptx);
    /* The loop's route sends and K2K receives are compiled in. */
    src2 = cuda_slurp("tests/kernels/test_kernels.cu");
    assert_non_null(src2);
    ptx = compile_ptx("test_kernels.cu", src2, 90, 1);
    assert_true(cuda_count_op(ptx, "ld.acquire.gpu.u64") > 0);
    assert_true(cuda_count_op(ptx, "st.release.gpu.u64") > 0);
    free(ptx);
    free(src2);
}

/* The device's own sm_XX gives a cubin (an ELF image); an architecture
 * NVRTC does not know falls back to PTX of the newest one below it; one
 * below sm_70 is refused. */
static void
test_cubin_or_ptx(void **state)
{
    static const char src[] = "RK_DEV_HANDLER(h)(rk_dev_ctx *x, "
                              "const rk_dev_msg *m) { return "
                              "rk_dev_send(x, 1, m->data, m->len); }\n"
                              "RK_DEV_KERNEL(my_kernel, h)\n";
    rk__nvrtc_src s = { .name = "mine.cu", .source = src, .cc = 90 };
    rk__nvrtc_image img;
    int arch, kind;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();
    assert_int_equal(rk__nvrtc_compile(&s, &img), RK_OK);
    assert_int_equal(img.kind, RK__IMG_CUBIN);
    assert_int_equal(img.arch, 90);
    assert_true(img.size > 4);
    assert_memory_equal(img.data, "\177ELF", 4);
    assert_non_null(memmem(img.data, img.size, "my_kernel", 9));
    rk__nvrtc_image_free(&img);

    assert_int_equal(rk__nvrtc_target(91, &arch, &kind), RK_OK);
    assert_int_equal(kind, RK__IMG_PTX);
    assert_int_equal(arch, 90);

    s.cc = 61;
    assert_int_equal(rk__nvrtc_compile(&s, &img), RK_ENOTSUP);
    assert_non_null(strstr(rk_errdetail(), "6.1"));
}

/* A user error: RK_ECOMPILE, detail with the user's file and line (the
 * header include before it does not shift the numbering). */
static void
test_compile_error_names_line(void **state)
{
    static const char src[] = "// my handler\n"
                              "RK_DEV_HANDLER(h)(rk_dev_ctx *x, "
                              "const rk_dev_msg *m) {\n"
                              "    return undefined_thing(x, m);\n"
                              "}\n";
    rk__nvrtc_src s = { .name = "broken.cu", .source = src, .cc = 90 };
    rk__nvrtc_image img;
    (void)state;
    if (!cuda_have_nvrtc())
        skip();
    assert_int_equal(rk__nvrtc_compile(&s, &img), RK_ECOMPILE);
    assert_non_null(strstr(rk_errdetail(), "broken.cu:3: error"));
    assert_non_null(strstr(rk_errdetail(), "undefined_thing"));
    assert_non_null(img.log);
    assert_non_null(strstr(img.log, "broken.cu(3)"));
    assert_null(img.data);
    rk__nvrtc_image_free(&img);
}

/* The headers embedded in the library are the source tree's, and a
 * compile with an include directory instead gives the same PTX. */
static void
test_embedded_headers(void **state)
{
    static const char src[] = "RK_DEV_HANDLER(h)(rk_dev_ctx *x, "
                              "const rk_dev_msg *m) { return "
                              "rk_dev_send(x, 1, m->data, m->len); }\n"
                              "RK_DEV_KERNEL(emb_kernel, h)\n";
    rk__nvrtc_src s
        = { .name = "emb.cu", .source = src, .cc = 90, .want_ptx = 1 };
    rk__nvrtc_image a, b;
    (void)state;

    assert_true(rk__dev_header_count >= 5);
    for (size_t i = 0; i < rk__dev_header_count; i++) {
        char rel[128];
        char *text;
        snprintf(rel, sizeof(rel), "include/%s", rk__dev_header_names[i]);
        text = cuda_slurp(rel);
        assert_non_null(text);
        assert_string_equal(text, rk__dev_header_texts[i]);
        free(text);
    }
    if (!cuda_have_nvrtc())
        skip();
    assert_null(rk__nvrtc_include_dir(&s));
    assert_int_equal(rk__nvrtc_compile(&s, &a), RK_OK);
    s.include_dir = RK_SOURCE_DIR "/include";
    assert_int_equal(rk__nvrtc_compile(&s, &b), RK_OK);
    assert_int_equal(a.size, b.size);
    assert_memory_equal(a.data, b.data, a.size);
    rk__nvrtc_image_free(&a);
    rk__nvrtc_image_free(&b);
    s.include_dir = "/nonexistent";
    assert_int_equal(rk__nvrtc_compile(&s, &a), RK_ECOMPILE);
    assert_non_null(strstr(rk_errdetail(), "dev_kernel.h"));
    rk__nvrtc_image_free(&a);
}

/* No NVRTC: RK_ENVRTC with the loader's reason. NVRTC is loaded once per
 * process, so this runs the test binary again with RK_NVRTC_LIBRARY set
 * (main's child mode below). */
static int
missing_nvrtc_child(void)
{
    int a, b;
    rk__nvrtc_src s = { .name = "x.cu", .source = "", .cc = 90 };
    rk__nvrtc_image img;
    if (rk__nvrtc_version(&a, &b) != RK_ENVRTC
        || strstr(rk_errdetail(), "cannot load NVRTC") == NULL
        || rk__nvrtc_compile(&s, &img) != RK_ENVRTC)
        return 1;
    return 0;
}

static void
test_missing_nvrtc(void **state)
{
    pid_t pid;
    int status;
    (void)state;

    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("RK_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so", 1);
        execl("/proc/self/exe", "test_cuda_nvrtc", "--missing-nvrtc-child",
            (char *)NULL);
        _exit(2);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int
main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--missing-nvrtc-child") == 0)
        return missing_nvrtc_child();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_headers_compile_alone),
        cmocka_unit_test(test_loop_ptx),
        cmocka_unit_test(test_gpu_scope_ptx),
        cmocka_unit_test(test_fast_path_ptx),
        cmocka_unit_test(test_k2k_ptx),
        cmocka_unit_test(test_cubin_or_ptx),
        cmocka_unit_test(test_compile_error_names_line),
        cmocka_unit_test(test_embedded_headers),
        cmocka_unit_test(test_missing_nvrtc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
