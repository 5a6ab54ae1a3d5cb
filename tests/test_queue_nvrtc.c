/*
 * ring_proto.h compiled as CUDA device code by NVRTC, loaded with dlopen.
 * NVRTC needs no GPU; without NVRTC the test skips.
 *
 * The kernel below is the device half of a host<->GPU echo: it consumes
 * from one ring and produces into another with the header's device-side
 * functions. The test checks that it compiles, that the layout NVRTC sees
 * matches the host's (static assertions in the kernel), and that the PTX
 * uses system-scope acquire loads and release stores and no atomic RMW.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringkernel/ring_proto.h"

typedef int nvrtc_result; /* NVRTC_SUCCESS == 0 */
typedef struct nvrtc_prog *nvrtc_program;

static struct {
    void *lib;
    nvrtc_result (*create)(nvrtc_program *, const char *, const char *, int,
        const char *const *, const char *const *);
    nvrtc_result (*compile)(nvrtc_program, int, const char *const *);
    nvrtc_result (*log_size)(nvrtc_program, size_t *);
    nvrtc_result (*log)(nvrtc_program, char *);
    nvrtc_result (*ptx_size)(nvrtc_program, size_t *);
    nvrtc_result (*ptx)(nvrtc_program, char *);
    nvrtc_result (*destroy)(nvrtc_program *);
} nv;

static const char kernel_src[]
    = "#include \"ringkernel/ring_proto.h\"\n"
      "static_assert(sizeof(rk_ring_ctrl) == 3 * RK_RING_LINE, \"size\");\n"
      "static_assert(sizeof(((rk_ring_ctrl *)0)->tail) == 8, \"tail\");\n"
      "static_assert(sizeof(((rk_ring_ctrl *)0)->pad0) == 56, \"pad0\");\n"
      "static_assert(sizeof(((rk_ring_ctrl *)0)->pad1) == 56, \"pad1\");\n"
      "static_assert(sizeof(((rk_ring_ctrl *)0)->pad2) == 48, \"pad2\");\n"
      "static_assert(alignof(rk_ring_ctrl) == 64, \"align\");\n"
      "extern \"C\" __global__ void\n"
      "rk_echo(rk_ring_ctrl *in, unsigned char *in_slots, rk_ring_ctrl *out,\n"
      "        unsigned char *out_slots, unsigned long long n)\n"
      "{\n"
      "    if (threadIdx.x != 0 || blockIdx.x != 0)\n"
      "        return;\n"
      "    rk_ring_side c, p;\n"
      "    rk_ring_cons_attach(in, &c, in_slots);\n"
      "    rk_ring_prod_attach(out, &p, out_slots);\n"
      "    for (unsigned long long i = 0; i < n; i++) {\n"
      "        while (rk_ring_cons_avail(in, &c, 1) == 0)\n"
      "            __nanosleep(200);\n"
      "        while (rk_ring_prod_space(out, &p, 1) == 0)\n"
      "            __nanosleep(200);\n"
      "        const unsigned char *src = rk_ring_slot(&c, c.pos);\n"
      "        unsigned char *dst = rk_ring_slot(&p, p.pos);\n"
      "        for (unsigned j = 0; j < c.slot_size && j < p.slot_size; j++)\n"
      "            dst[j] = src[j];\n"
      "        rk_ring_prod_publish(out, &p, 1);\n"
      "        rk_ring_cons_release(in, &c, 1);\n"
      "    }\n"
      "}\n";

/* The control block's device half: a persistent loop's safe point,
 * acknowledgement, counters and exit, through ctl_proto.h only. */
static const char ctl_src[]
    = "#include \"ringkernel/ctl_proto.h\"\n"
      "static_assert(sizeof(rk_ctl) == 3 * RK_RING_LINE, \"size\");\n"
      "static_assert(sizeof(((rk_ctl *)0)->pad0) == 52, \"line 0\");\n"
      "static_assert(sizeof(((rk_ctl *)0)->pad1) == 44, \"line 1\");\n"
      "static_assert(alignof(rk_ctl) == 64, \"align\");\n"
      "extern \"C\" __global__ void\n"
      "rk_ctl_loop(rk_ctl *c)\n"
      "{\n"
      "    if (threadIdx.x != 0 || blockIdx.x != 0)\n"
      "        return;\n"
      "    rk_ctl_ack(c, RK_CTL_ACK_HELD);\n"
      "    unsigned cmd;\n"
      "    while ((cmd = rk_ctl_cmd(c)) == RK_CTL_HOLD)\n"
      "        __nanosleep(1000);\n"
      "    rk_ctl_ack(c, RK_CTL_ACK_RUNNING);\n"
      "    while ((cmd = rk_ctl_cmd(c)) != RK_CTL_STOP) {\n"
      "        if (cmd == RK_CTL_PAUSE) {\n"
      "            rk_ctl_ack(c, RK_CTL_ACK_PAUSED);\n"
      "            while (rk_ctl_cmd(c) == RK_CTL_PAUSE)\n"
      "                __nanosleep(1000);\n"
      "            rk_ctl_ack(c, RK_CTL_ACK_RUNNING);\n"
      "        }\n"
      "        rk_ctl_count(&c->processed, 1);\n"
      "    }\n"
      "    rk_ctl_exit(c, 0, 0);\n"
      "}\n";

static int
load_nvrtc(void)
{
    static const char *const names[] = {
        "libnvrtc.so",
        "libnvrtc.so.13",
        "libnvrtc.so.12",
        "/usr/local/cuda/lib64/libnvrtc.so",
        "/usr/local/cuda-13.0/lib/libnvrtc.so",
        "/usr/local/cuda-13.0/lib64/libnvrtc.so",
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !nv.lib; i++)
        nv.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (nv.lib == NULL)
        return 0;
#define SYM(field, name)                                                      \
    do {                                                                      \
        *(void **)&nv.field = dlsym(nv.lib, name);                            \
        if (nv.field == NULL)                                                 \
            return 0;                                                         \
    } while (0)
    SYM(create, "nvrtcCreateProgram");
    SYM(compile, "nvrtcCompileProgram");
    SYM(log_size, "nvrtcGetProgramLogSize");
    SYM(log, "nvrtcGetProgramLog");
    SYM(ptx_size, "nvrtcGetPTXSize");
    SYM(ptx, "nvrtcGetPTX");
    SYM(destroy, "nvrtcDestroyProgram");
#undef SYM
    return 1;
}

/* Compiles the kernel for arch; returns the PTX (caller frees) or fails
 * the test with NVRTC's log. */
static char *
compile_src(const char *src, const char *name, const char *arch)
{
    nvrtc_program prog;
    assert_int_equal(nv.create(&prog, src, name, 0, NULL, NULL), 0);
    const char *opts[]
        = { "-I" RK_SOURCE_DIR "/include", arch, "--std=c++17" };
    nvrtc_result rc = nv.compile(prog, 3, opts);
    size_t n = 0;
    nv.log_size(prog, &n);
    char *log = malloc(n + 1);
    assert_non_null(log);
    log[0] = '\0';
    if (n > 0)
        nv.log(prog, log);
    if (rc != 0)
        fail_msg("NVRTC (%s) failed:\n%s", arch, log);
    free(log);
    assert_int_equal(nv.ptx_size(prog, &n), 0);
    char *ptx = malloc(n + 1);
    assert_non_null(ptx);
    assert_int_equal(nv.ptx(prog, ptx), 0);
    ptx[n] = '\0';
    nv.destroy(&prog);
    return ptx;
}

static void
test_ring_proto_compiles_as_device_code(void **state)
{
    (void)state;
    if (!load_nvrtc()) {
        fprintf(stderr, "NVRTC not found: %s\n", dlerror());
        skip();
    }
    char *ptx = compile_src(
        kernel_src, "rk_echo.cu", "--gpu-architecture=compute_75");
    assert_non_null(strstr(ptx, ".entry rk_echo"));
    /* The protocol is system-scope acquire/release ... */
    assert_non_null(strstr(ptx, "ld.acquire.sys"));
    assert_non_null(strstr(ptx, "st.release.sys"));
    /* ... and never an atomic read-modify-write across PCIe. */
    assert_null(strstr(ptx, "atom."));
    assert_null(strstr(ptx, "red."));
    free(ptx);
}

static void
test_ctl_proto_compiles_as_device_code(void **state)
{
    (void)state;
    if (!load_nvrtc()) {
        fprintf(stderr, "NVRTC not found: %s\n", dlerror());
        skip();
    }
    char *ptx = compile_src(
        ctl_src, "rk_ctl_loop.cu", "--gpu-architecture=compute_75");
    assert_non_null(strstr(ptx, ".entry rk_ctl_loop"));
    /* 32-bit system-scope acquire loads and release stores ... */
    assert_non_null(strstr(ptx, "ld.acquire.sys.u32"));
    assert_non_null(strstr(ptx, "st.release.sys.u32"));
    /* ... and no atomic read-modify-write on the block. */
    assert_null(strstr(ptx, "atom."));
    assert_null(strstr(ptx, "red."));
    free(ptx);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_proto_compiles_as_device_code),
        cmocka_unit_test(test_ctl_proto_compiles_as_device_code),
    };
    /* NVRTC stays loaded: LeakSanitizer must still be able to name its
     * modules at exit for the suppressions below. */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
