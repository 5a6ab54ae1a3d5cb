/*
 * tests/test_cuda_jitlink.c - a handler compiled by Numba, linked into the
 * persistent loop (src/backend/cuda/jitlink.c, ringkernel/dev_numba.h).
 *
 * Offline, with NVRTC and nvJitLink (no GPU): the loop compiled as
 * relocatable code and Numba's PTX for a sample handler
 * (tests/data/numba_sample.ptx, made by
 * python/ringkernel/numba_device.py; RK_TEST_NUMBA_PTX names another
 * file, which the Python tests use to link the PTX Numba just produced)
 * link into an sm_90 cubin: an ELF that defines the entry and the
 * handler's symbol. The loop alone does not link (the handler is
 * unresolved), nor does bad PTX; the cache keys both inputs.
 *
 * Under the stand-in driver (RK_CUDA_DRIVER): the whole runtime path, a
 * cuda kernel whose device_link_ptx is that PTX, the stand-in running the
 * host build of the same loop with a C twin of the sample handler. With
 * RK_TEST_CUDA_REAL=1 (tools/gpu-check.sh) the same case runs Numba's
 * PTX on the GPU.
 *
 * The sample (python/tests/test_numba_device.py, sample_handler):
 *     Sample { float32 x; int32 n; float64 v[4]; }   (40 bytes)
 *     resp.x = 2 req.x; resp.n = req.n + 1; resp.v[i] = req.v[i] / 2;
 *     n < 0: failure (-1); n == 7: no reply (1); else reply (0).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <dlfcn.h>
#include <elf.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/jitlink.h"
#include "backend/cuda/kcache.h"
#include "backend/cuda/nvrtc.h"
#include "cuda_helpers.h"
#include "numba_sample.h"
#include "ringkernel/ringkernel.h"

typedef numba_sample sample;
#define SAMPLE_TYPE NUMBA_SAMPLE_TYPE

static const char loop_src[] = NUMBA_SAMPLE_LOOP_SRC;

static char *
sample_ptx(void)
{
    const char *env = getenv("RK_TEST_NUMBA_PTX");
    if (env != NULL && env[0] != '\0')
        return cuda_slurp_path(env);
    return cuda_slurp("tests/data/numba_sample.ptx");
}

/* RK_TEST_CUDA_REAL=1 (tools/gpu-check.sh): the real driver; the Numba
 * handler's PTX runs on the GPU, and nothing may be skipped. */
static int
real_gpu(void)
{
    const char *e = getenv("RK_TEST_CUDA_REAL");
    return e != NULL && strcmp(e, "1") == 0;
}

static int
have_tools(void)
{
    unsigned a, b;
    if (!cuda_have_nvrtc()) {
        if (real_gpu())
            fail_msg("no NVRTC on the GPU machine");
        return 0;
    }
    if (rk__jitlink_version(&a, &b) != RK_OK) {
        print_message("nvJitLink not available: %s\n", rk_errdetail());
        if (real_gpu())
            fail_msg("no nvJitLink on the GPU machine");
        return 0;
    }
    return 1;
}

/* The symbol `name` in an ELF64 image: 1 defined, 0 undefined, -1 none. */
static int
elf_symbol(const unsigned char *img, size_t size, const char *name)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
    const Elf64_Shdr *sh;
    int found = -1;

    assert_true(size > sizeof(*eh));
    assert_memory_equal(img, ELFMAG, SELFMAG);
    assert_int_equal(img[EI_CLASS], ELFCLASS64);
    assert_true(eh->e_shoff + (size_t)eh->e_shnum * sizeof(*sh) <= size);
    sh = (const Elf64_Shdr *)(img + eh->e_shoff);
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        const Elf64_Sym *sym;
        const char *str;
        if (sh[i].sh_type != SHT_SYMTAB)
            continue;
        assert_true(sh[i].sh_link < eh->e_shnum);
        assert_true(sh[i].sh_offset + sh[i].sh_size <= size);
        sym = (const Elf64_Sym *)(img + sh[i].sh_offset);
        str = (const char *)img + sh[sh[i].sh_link].sh_offset;
        for (size_t k = 0; k < sh[i].sh_size / sizeof(*sym); k++)
            if (strcmp(str + sym[k].st_name, name) == 0)
                found = sym[k].st_shndx != SHN_UNDEF ? 1 : 0;
    }
    return found;
}

static rk__kcache *
temp_cache(char *dir, size_t cap)
{
    rk__kcache *c = NULL;
    rk__kcache_cfg cfg = { 0 };
    snprintf(dir, cap, "/tmp/rk_jitlink_XXXXXX");
    assert_non_null(mkdtemp(dir));
    cfg.dir = dir;
    assert_int_equal(rk__kcache_open(&c, &cfg), RK_OK);
    return c;
}

static void
rm_dir(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void
links_numba_ptx_into_the_loop(void **state)
{
    char dir[64];
    rk__nvrtc_src src = { .name = "numba.cu", .source = loop_src, .cc = 90 };
    rk__nvrtc_image img;
    rk__kcache *c;
    char *ptx;
    int how;

    (void)state;
    if (!have_tools())
        skip();
    ptx = sample_ptx();
    assert_non_null(ptx);
    /* Numba's output: a visible C-ABI device function, no kernel. */
    assert_non_null(strstr(ptx, ".visible .func"));
    assert_non_null(strstr(ptx, "rk_numba_handler("));
    assert_null(strstr(ptx, ".entry"));
    src.link_ptx = ptx;
    src.link_ptx_size = strlen(ptx) + 1;
    c = temp_cache(dir, sizeof(dir));
    assert_int_equal(rk__jitlink_compile(c, &src, NULL, &img, &how), RK_OK);
    assert_int_equal(how, RK__KC_MISS);
    assert_int_equal(img.kind, RK__IMG_CUBIN);
    assert_int_equal(img.arch, 90);
    /* An ELF for sm_90 that defines the entry, the loop's handler and
     * Numba's function (resolved: not an undefined reference). */
    assert_int_equal(elf_symbol(img.data, img.size, "rk_numba_kernel"), 1);
    assert_int_equal(elf_symbol(img.data, img.size, "rk_numba_handler"), 1);
    rk__nvrtc_image_free(&img);

    /* A hit for the same two inputs ... */
    assert_int_equal(rk__jitlink_compile(c, &src, NULL, &img, &how), RK_OK);
    assert_int_equal(how, RK__KC_MEM);
    rk__nvrtc_image_free(&img);
    /* ... a miss when only the PTX changed (a comment is enough). */
    {
        size_t n = strlen(ptx);
        char *other = malloc(n + 32);
        assert_non_null(other);
        snprintf(other, n + 32, "%s\n// changed\n", ptx);
        src.link_ptx = other;
        src.link_ptx_size = strlen(other) + 1;
        assert_int_equal(
            rk__jitlink_compile(c, &src, NULL, &img, &how), RK_OK);
        assert_int_equal(how, RK__KC_MISS);
        rk__nvrtc_image_free(&img);
        free(other);
    }
    rk__kcache_close(c);
    rm_dir(dir);
    free(ptx);
}

static void
unresolved_handler_and_bad_ptx_are_clear_errors(void **state)
{
    static const char bad[] = ".version 9.0\n.target sm_90\nnot ptx at all\n";
    char dir[64];
    const char *opts[1] = { "-rdc=true" };
    rk__nvrtc_src src = { .name = "numba.cu",
        .source = loop_src,
        .cc = 90,
        .opts = opts,
        .nopts = 1 };
    rk__nvrtc_image loop, img;
    rk__kcache *c;
    int how;

    (void)state;
    if (!have_tools())
        skip();
    /* The loop alone: the handler is an undefined reference. */
    assert_int_equal(rk__nvrtc_compile(&src, &loop), RK_OK);
    assert_int_equal(elf_symbol(loop.data, loop.size, "rk_numba_handler"), 0);
    assert_int_equal(rk__jitlink_link(&loop, 1, 90, NULL, &img), RK_ECOMPILE);
    print_message("unresolved: %s\n", rk_errdetail());
    assert_non_null(strstr(rk_errdetail(), "rk_numba_handler"));
    rk__nvrtc_image_free(&img);
    rk__nvrtc_image_free(&loop);

    /* PTX that does not assemble. */
    src.opts = NULL;
    src.nopts = 0;
    src.link_ptx = bad;
    src.link_ptx_size = sizeof(bad);
    c = temp_cache(dir, sizeof(dir));
    assert_int_equal(
        rk__jitlink_compile(c, &src, NULL, &img, &how), RK_ECOMPILE);
    print_message("bad ptx: %s\n", rk_errdetail());
    assert_non_null(strstr(rk_errdetail(), "sm_90"));
    rk__nvrtc_image_free(&img);
    /* Without its NUL the PTX is refused before any tool runs. */
    src.link_ptx_size = sizeof(bad) - 1;
    assert_int_equal(
        rk__jitlink_compile(c, &src, NULL, &img, &how), RK_EINVAL);
    rk__kcache_close(c);
    rm_dir(dir);
}

/* --------------------------------------------------- under the stand-in */

#define T_LONG 30000000000LL /* 30 s, in ns */

static int
ignore_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    (void)ctx;
    (void)m;
    return RK_OK; /* the cpu fallback; never runs under "cuda" */
}

static void
runs_under_the_stand_in(void **state)
{
    void (*set)(void *, unsigned, unsigned, unsigned);
    const char *drv = getenv("RK_CUDA_DRIVER");
    char dir[64];
    rk_runtime *rt = NULL;
    rk_kernel_def def = { 0 };
    rk_kernel k;
    void *lib = NULL;
    char *ptx;

    (void)state;
    if (!have_tools() || (drv == NULL && !real_gpu()))
        skip();
    ptx = sample_ptx();
    assert_non_null(ptx);
    if (drv != NULL) {
        /* The stand-in: its host build of the loop calls the C twin. */
        lib = dlopen(drv, RTLD_NOW | RTLD_GLOBAL);
        assert_non_null(lib);
        *(void **)&set = dlsym(lib, "fake_cuda_numba_set");
        assert_non_null(set);
        set((void *)(uintptr_t)numba_sample_c, sizeof(sample), sizeof(sample),
            SAMPLE_TYPE);
    }
    snprintf(dir, sizeof(dir), "/tmp/rk_jitlink_rt_XXXXXX");
    assert_non_null(mkdtemp(dir));
    setenv("RK_KERNEL_CACHE_DIR", dir, 1);

    {
        rk_runtime_config cfg = { .no_static_kernels = true };
        assert_int_equal(rk_runtime_create(&rt, &cfg), RK_OK);
    }
    def.id = "numba";
    def.handler = ignore_handler;
    def.config.backend = "cuda";
    def.config.device_source = loop_src;
    def.config.device_source_name = "numba.cu";
    def.config.device_entry = "rk_numba_kernel";
    def.config.device_link_ptx = ptx;
    def.config.grid_size = 1;
    def.config.block_size = 32;
    def.config.max_payload = 128;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "numba", &k), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "numba"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "numba"), RK_OK);
    for (int i = 0; i < 20; i++) {
        sample q = { .x = (float)i, .n = i, .v = { i, 2.0 * i, -1, 0.5 } };
        sample r;
        rk_msg_header h;
        size_t len = 0;
        assert_int_equal(
            rk_send(rt, k, SAMPLE_TYPE, &q, sizeof(q), 128, T_LONG), RK_OK);
        if (i == 7)
            continue; /* the handler sends nothing for n == 7 */
        assert_int_equal(
            rk_recv(rt, k, &h, &r, sizeof(r), &len, T_LONG), RK_OK);
        assert_int_equal(len, sizeof(r));
        assert_int_equal(h.type_id, SAMPLE_TYPE);
        assert_true(r.x == 2.0f * (float)i);
        assert_int_equal(r.n, i + 1);
        assert_true(r.v[0] == i / 2.0 && r.v[1] == (double)i);
        assert_true(r.v[2] == -0.5 && r.v[3] == 0.25);
    }
    /* A payload of the wrong size and a failing message each fault the
     * block: dead-lettered as failed with RK_EINVAL (no supervision: the
     * kernel ends FAILED at the first). */
    {
        sample q = { .n = -3 };
        rk_dead_letter dl;
        unsigned char buf[128];
        rk_kernel_state st;
        assert_int_equal(
            rk_send(rt, k, SAMPLE_TYPE, &q, sizeof(q), 128, T_LONG), RK_OK);
        assert_int_equal(rk_kernel_wait(rt, "numba", T_LONG), RK_OK);
        assert_int_equal(rk_kernel_state_get(rt, "numba", &st), RK_OK);
        assert_int_equal(st, RK_KERNEL_FAILED);
        assert_int_equal(
            rk_dead_letter_recv(rt, &dl, buf, sizeof(buf), T_LONG), RK_OK);
        assert_int_equal(dl.reason, RK_DEAD_FAILED);
        assert_int_equal(dl.error, RK_EINVAL);
        assert_int_equal(dl.len, sizeof(q));
    }
    rk_runtime_destroy(rt);
    rm_dir(dir);
    free(ptx);
    if (lib != NULL)
        dlclose(lib);
}

/* ------------------------------------------- the driver's linker */

/* A recording stand-in for cuLinkCreate / AddData / Complete / Destroy:
 * what jitlink.c hands the driver when nvJitLink is missing. */
static struct {
    int created, destroyed, types[4], n;
    int fail; /* complete fails, with a log */
    unsigned char cubin[16];
} drv_rec;

static int
drv_create(unsigned n, int *opt, void **val, void **st)
{
    /* The error log buffer (CU_JIT_ERROR_LOG_BUFFER = 5) is passed. */
    assert_int_equal(n, 2);
    assert_int_equal(opt[0], 5);
    drv_rec.created++;
    *st = val[0]; /* the log buffer */
    return 0;
}

static int
drv_add(void *st, int type, void *data, size_t size, const char *name,
    unsigned n, int *o, void **v)
{
    (void)st, (void)data, (void)name, (void)n, (void)o, (void)v;
    assert_true(size > 0);
    drv_rec.types[drv_rec.n++ & 3] = type;
    return 0;
}

static int
drv_complete(void *st, void **cubin, size_t *size)
{
    if (drv_rec.fail) {
        strcpy((char *)st, "error   : stand-in link refused");
        return 218;
    }
    memcpy(drv_rec.cubin, ELFMAG, SELFMAG);
    *cubin = drv_rec.cubin;
    *size = sizeof(drv_rec.cubin);
    return 0;
}

static int
drv_destroy(void *st)
{
    (void)st;
    drv_rec.destroyed++;
    return 0;
}

/* Run with RK_NVJITLINK_LIBRARY=/nonexistent (ctest
 * test_cuda_jitlink_driver_linker): without nvJitLink the link is an
 * RK_ENVRTC naming it, or goes to the driver's linker when one is given,
 * which gets the loop as a cubin and the handler as PTX and whose image
 * is copied before its state is destroyed; its failure is RK_ECOMPILE
 * with its log. */
static void
driver_linker_without_nvjitlink(void **state)
{
    const rk__jitlink_drv drv
        = { drv_create, drv_add, drv_complete, drv_destroy };
    static const char ptx[] = ".version 9.0\n";
    rk__nvrtc_image in[2] = { { 0 } }, out;
    unsigned char loop[8] = { 0x7f };
    unsigned a, b;

    (void)state;
    if (getenv("RK_NVJITLINK_LIBRARY") == NULL)
        skip(); /* the plain run has nvJitLink (the other cases) */
    assert_int_equal(rk__jitlink_version(&a, &b), RK_ENVRTC);
    assert_non_null(strstr(rk_errdetail(), "cannot load nvJitLink"));
    in[0].data = loop;
    in[0].size = sizeof(loop);
    in[0].kind = RK__IMG_CUBIN;
    in[1].data = (unsigned char *)(uintptr_t)ptx;
    in[1].size = sizeof(ptx);
    in[1].kind = RK__IMG_PTX;
    assert_int_equal(rk__jitlink_link(in, 2, 90, NULL, &out), RK_ENVRTC);

    assert_int_equal(rk__jitlink_link(in, 2, 90, &drv, &out), RK_OK);
    assert_int_equal(drv_rec.created, 1);
    assert_int_equal(drv_rec.destroyed, 1);
    assert_int_equal(drv_rec.n, 2);
    assert_int_equal(drv_rec.types[0], 0); /* CU_JIT_INPUT_CUBIN */
    assert_int_equal(drv_rec.types[1], 1); /* CU_JIT_INPUT_PTX */
    assert_int_equal(out.kind, RK__IMG_CUBIN);
    assert_int_equal(out.arch, 90);
    assert_int_equal(out.size, sizeof(drv_rec.cubin));
    assert_true(out.data != drv_rec.cubin); /* a copy */
    assert_memory_equal(out.data, ELFMAG, SELFMAG);
    rk__nvrtc_image_free(&out);

    drv_rec.fail = 1;
    assert_int_equal(rk__jitlink_link(in, 2, 90, &drv, &out), RK_ECOMPILE);
    assert_non_null(strstr(rk_errdetail(), "stand-in link refused"));
    assert_int_equal(drv_rec.destroyed, 2);
    rk__nvrtc_image_free(&out);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(links_numba_ptx_into_the_loop),
        cmocka_unit_test(unresolved_handler_and_bad_ptx_are_clear_errors),
        cmocka_unit_test(runs_under_the_stand_in),
        cmocka_unit_test(driver_linker_without_nvjitlink),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
