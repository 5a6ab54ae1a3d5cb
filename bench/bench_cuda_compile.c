/*
 * bench_cuda_compile - NVRTC compile time of a ring-kernel handler, cold
 * and through the compiled-kernel cache (src/backend/cuda/kcache.c).
 *
 * NVRTC runs on the CPU, so these are real figures on any machine with
 * the toolkit (no GPU involved). Rows (median of rounds, milliseconds):
 *   nvrtc_compile_cold_cubin  a cache miss: NVRTC to an sm_90 cubin
 *   nvrtc_compile_cold_ptx    a cache miss: NVRTC to compute_90 PTX
 *   nvrtc_compile_disk_hit    a fresh cache (a new process) on the same
 *                             directory: the entry read and checked
 *   nvrtc_compile_mem_hit     the same cache again: the in-memory LRU
 * Every round checks the hit returned the miss's exact bytes and that
 * the cache said where it came from; a mismatch aborts the benchmark.
 * Without NVRTC it prints one "skipped" row.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda/kcache.h"
#include "bench.h"
#include "ringkernel/ringkernel.h"

static const char handler_src[]
    = "RK_DEV_HANDLER(h)(rk_dev_ctx *x, const rk_dev_msg *m)\n"
      "{\n"
      "    return rk_dev_reply(x, m, m->hdr->type_id, m->data, m->len);\n"
      "}\n"
      "RK_DEV_KERNEL(bench_echo, h)\n";

static double
ms_since(uint64_t t0)
{
    return (double)(bench_now_ns() - t0) / 1e6;
}

static void
check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "bench_cuda_compile: %s (%s)\n", what, rk_errdetail());
        exit(1);
    }
}

int
main(void)
{
    int major, minor, rounds = (int)(5 * bench_scale());
    double cold_cubin[16], cold_ptx[16], disk[16], mem[16];
    char dir[128], extra[160], cmd[200];

    if (rounds < 1)
        rounds = 1;
    if (rounds > 16)
        rounds = 16;
    if (rk__nvrtc_version(&major, &minor) != RK_OK) {
        bench_emit("cuda", "nvrtc_compile", "skipped", 0, "ms",
            "\"reason\":\"no NVRTC\"");
        return 0;
    }
    for (int r = 0; r < rounds; r++) {
        for (int ptx = 0; ptx < 2; ptx++) {
            rk__nvrtc_src s = { .name = "bench_echo.cu",
                .source = handler_src,
                .cc = 90,
                .want_ptx = ptx };
            rk__kcache_cfg cfg = { .dir = dir };
            rk__nvrtc_image a, b;
            rk__kcache *c;
            uint64_t t0;
            int how;

            snprintf(dir, sizeof(dir), "/tmp/rk-bench-kcache-XXXXXX");
            check(mkdtemp(dir) != NULL, "mkdtemp");
            check(rk__kcache_open(&c, &cfg) == RK_OK, "open");
            t0 = bench_now_ns();
            check(rk__kcache_compile(c, &s, &a, &how) == RK_OK, "compile");
            (ptx ? cold_ptx : cold_cubin)[r] = ms_since(t0);
            check(how == RK__KC_MISS, "first compile not a miss");
            if (!ptx) {
                rk__kcache_close(c);
                check(rk__kcache_open(&c, &cfg) == RK_OK, "reopen");
                t0 = bench_now_ns();
                check(rk__kcache_compile(c, &s, &b, &how) == RK_OK, "disk");
                disk[r] = ms_since(t0);
                check(how == RK__KC_DISK, "second compile not a disk hit");
                check(a.size == b.size && !memcmp(a.data, b.data, a.size),
                    "disk hit differs");
                rk__nvrtc_image_free(&b);
                t0 = bench_now_ns();
                check(rk__kcache_compile(c, &s, &b, &how) == RK_OK, "mem");
                mem[r] = ms_since(t0);
                check(how == RK__KC_MEM, "third compile not a memory hit");
                check(a.size == b.size && !memcmp(a.data, b.data, a.size),
                    "memory hit differs");
                rk__nvrtc_image_free(&b);
            }
            rk__nvrtc_image_free(&a);
            rk__kcache_close(c);
            snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
            check(system(cmd) == 0, "cleanup");
        }
    }
    snprintf(extra, sizeof(extra),
        "\"nvrtc\":\"%d.%d\",\"arch\":\"sm_90\",\"rounds\":%d,\"gpu\":false",
        major, minor, rounds);
    bench_emit("cuda", "nvrtc_compile_cold_cubin", "nvrtc",
        bench_median(cold_cubin, (size_t)rounds), "ms", extra);
    bench_emit("cuda", "nvrtc_compile_cold_ptx", "nvrtc",
        bench_median(cold_ptx, (size_t)rounds), "ms", extra);
    bench_emit("cuda", "nvrtc_compile_disk_hit", "kcache",
        bench_median(disk, (size_t)rounds), "ms", extra);
    bench_emit("cuda", "nvrtc_compile_mem_hit", "kcache",
        bench_median(mem, (size_t)rounds), "ms", extra);
    return 0;
}
