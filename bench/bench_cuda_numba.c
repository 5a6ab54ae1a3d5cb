/*
 * bench_cuda_numba - a handler written in Python and compiled by Numba,
 * against the same handler written in CUDA C, in the same persistent loop
 * (docs/python.md, "Device handlers in Python").
 *
 * Rows (JSON lines, bench.h), for "handler": "numba" and "cuda_c":
 *   cuda_handler_rtt_p50 / _p99   host -> persistent kernel -> host round
 *                                 trip (rk_send, rk_recv) of the 40-byte
 *                                 sample message, ns
 *   cuda_handler_load_ms          register + launch of the kernel with a
 *                                 cold kernel cache (NVRTC, and for numba
 *                                 the -rdc compile and the nvJitLink link),
 *                                 ms
 * The Numba handler is tests/data/numba_sample.ptx (Numba's PTX for
 * python/tests/test_numba_device.py's sample_handler; RK_NUMBA_PTX names
 * another file), the CUDA C one tests/kernels/numba_kernels.cu's
 * rk_numba_twin: the same arithmetic on the same struct. The two kernels
 * run one after the other in one process, each after 100 warm-ups.
 *
 * impl: "cuda" on a GPU; "cuda_sim" under the stand-in driver, where both
 * are host C on CPU threads (the Numba row then calls a C twin through
 * the loop's function pointer: it measures the link and the loop, never
 * Numba's code or a GPU). Without a usable CUDA backend, or without the
 * PTX file, one "skipped" row with the reason.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/support/numba_sample.h"
#include "bench.h"
#include "ringkernel/ringkernel.h"

#define SAMPLE_TYPE NUMBA_SAMPLE_TYPE
#define T_LONG      INT64_C(30000000000)

typedef numba_sample sample;

static int
noop_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    (void)ctx;
    (void)m;
    return RK_OK;
}

/* A file of the source tree, read relative to the working directory
 * (tools/gpu-check.sh runs from the repository root) or RK_SOURCE_DIR. */
static char *
slurp(const char *rel)
{
    const char *root = getenv("RK_SOURCE_DIR");
    char path[600];
    FILE *f;
    char *s = NULL;
    long n;

    snprintf(
        path, sizeof(path), "%s%s%s", root ? root : "", root ? "/" : "", rel);
    if ((f = fopen(path, "rb")) == NULL)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0
        && fseek(f, 0, SEEK_SET) == 0 && (s = calloc(1, (size_t)n + 1)) != NULL
        && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    fclose(f);
    return s;
}

/* Registers and launches kernel id (timing it), runs n round trips and
 * prints its rows. 0, or -1 with the reason on stderr. */
static int
run(rk_runtime *rt, rk_kernel_def *def, const char *handler, size_t n,
    const char *impl, const char *gpu)
{
    char extra[400];
    uint64_t t0 = bench_now_ns(), *rtt;
    sample q = { .x = 1.5f, .n = 2, .v = { 1, 2, 3, 4 } }, r;
    size_t len;
    rk_kernel k;

    if (rk_runtime_register(rt, def) != RK_OK
        || rk_kernel_launch(rt, def->id) != RK_OK
        || rk_kernel_lookup(rt, def->id, &k) != RK_OK) {
        fprintf(stderr, "bench_cuda_numba: %s: %s\n", def->id, rk_errdetail());
        return -1;
    }
    snprintf(extra, sizeof(extra), "\"handler\":\"%s\",\"gpu\":\"%s\"",
        handler, gpu);
    bench_emit("cuda", "cuda_handler_load_ms", impl,
        (double)(bench_now_ns() - t0) / 1e6, "ms", extra);
    if (rk_kernel_activate(rt, def->id) != RK_OK
        || (rtt = malloc(n * sizeof(*rtt))) == NULL)
        return -1;
    for (size_t i = 0; i < n + 100; i++) {
        uint64_t s0 = bench_now_ns();
        if (rk_send(rt, k, SAMPLE_TYPE, &q, sizeof(q), 128, T_LONG) != RK_OK
            || rk_recv(rt, k, NULL, &r, sizeof(r), &len, T_LONG) != RK_OK
            || len != sizeof(r) || r.n != 3 || r.x != 3.0f || r.v[3] != 2.0) {
            fprintf(stderr, "bench_cuda_numba: %s: round trip: %s\n", def->id,
                rk_errdetail());
            free(rtt);
            return -1;
        }
        if (i >= 100)
            rtt[i - 100] = bench_now_ns() - s0;
    }
    bench_emit("cuda", "cuda_handler_rtt_p50", impl,
        (double)bench_percentile(rtt, n, 50), "ns", extra);
    bench_emit("cuda", "cuda_handler_rtt_p99", impl,
        (double)bench_percentile(rtt, n, 99), "ns", extra);
    free(rtt);
    return rk_kernel_terminate(rt, def->id, T_LONG) == RK_OK ? 0 : -1;
}

int
main(void)
{
    rk_runtime_config cfg = { .no_static_kernels = true, .backend = "cuda" };
    rk_kernel_def numba = { .id = "numba", .handler = noop_handler };
    rk_kernel_def twin = { .id = "cuda_c", .handler = noop_handler };
    const char *env_ptx = getenv("RK_NUMBA_PTX");
    const char *drv = getenv("RK_CUDA_DRIVER");
    char cache[64];
    char *ptx, *twin_src;
    rk_runtime *rt = NULL;
    size_t n = (size_t)(20000 * bench_scale());
    int sim, rc;

    ptx = env_ptx ? slurp(env_ptx) : slurp("tests/data/numba_sample.ptx");
    twin_src = slurp("tests/kernels/numba_kernels.cu");
    if (ptx == NULL || twin_src == NULL) {
        bench_skip("cuda", "cuda_handler_rtt_p50",
            "tests/data/numba_sample.ptx or tests/kernels/numba_kernels.cu "
            "not found (run from the repository root or set RK_SOURCE_DIR)");
        return 0;
    }
    if (rk_runtime_create(&rt, &cfg) != RK_OK) {
        bench_skip("cuda", "cuda_handler_rtt_p50", rk_errdetail());
        return 0;
    }
    /* The load rows time a cold compile: a fresh cache directory. */
    snprintf(cache, sizeof(cache), "/tmp/rk_bench_numba_XXXXXX");
    if (mkdtemp(cache) != NULL)
        setenv("RK_KERNEL_CACHE_DIR", cache, 1);
    sim = drv != NULL && strstr(drv, "fake") != NULL;
    if (sim) {
        void (*set)(void *, unsigned, unsigned, unsigned);
        void *lib = dlopen(drv, RTLD_NOW | RTLD_NOLOAD);
        *(void **)&set = lib ? dlsym(lib, "fake_cuda_numba_set") : NULL;
        if (set == NULL) {
            bench_skip("cuda", "cuda_handler_rtt_p50",
                "the stand-in driver lacks fake_cuda_numba_set");
            return 0;
        }
        set((void *)(uintptr_t)numba_sample_c, sizeof(sample), sizeof(sample),
            SAMPLE_TYPE);
    }
    numba.config.device_source = NUMBA_SAMPLE_LOOP_SRC;
    numba.config.device_entry = "rk_numba_kernel";
    numba.config.device_link_ptx = ptx;
    twin.config.device_source = twin_src;
    twin.config.device_source_name = "numba_kernels.cu";
    twin.config.device_entry = "rk_numba_twin";
    numba.config.block_size = twin.config.block_size = 32;
    numba.config.max_payload = twin.config.max_payload = 64;
    if (n < 100)
        n = 100;
    rc = run(rt, &numba, "numba", n, sim ? "cuda_sim" : "cuda",
             sim ? "none (stand-in driver, CPU threads)" : "device 0")
            != 0
        || run(rt, &twin, "cuda_c", n, sim ? "cuda_sim" : "cuda",
               sim ? "none (stand-in driver, CPU threads)" : "device 0")
            != 0;
    rk_runtime_destroy(rt);
    free(ptx);
    free(twin_src);
    return rc;
}
