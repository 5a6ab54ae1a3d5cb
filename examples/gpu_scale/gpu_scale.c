/*
 * gpu_scale - one ring kernel written for both backends: a handler in
 * CUDA C (device_source, compiled at launch with NVRTC; each thread block
 * is an actor and its threads scale the vector together) and the same
 * handler in C for the CPU. It runs on the cuda backend when a GPU, its
 * driver and NVRTC are there, and on the CPU otherwise, and checks every
 * reply against the host computation.
 *
 *   ./gpu_scale          (RK_EXAMPLE_BACKEND=cpu forces the CPU)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringkernel/ringkernel.h"

#define N      64 /* floats per message */
#define ROUNDS 200

static const char device_src[]
    = "RK_DEV_HANDLER(scale)(rk_dev_ctx *x, const rk_dev_msg *m)\n"
      "{\n"
      "    RK_DEV_SHARED float out[64];\n"
      "    const float *in = (const float *)(const void *)m->data;\n"
      "    rk_dev_u32 n = m->len / 4 > 64 ? 64 : m->len / 4;\n"
      "    for (rk_dev_u32 i = rk_dev_thread_idx(); i < n;\n"
      "         i += rk_dev_block_dim())\n"
      "        out[i] = 2.0f * in[i] + 1.0f;\n"
      "    rk_dev_sync_block();\n"
      "    return rk_dev_reply(x, m, m->hdr->type_id, out, n * 4);\n"
      "}\n"
      "RK_DEV_KERNEL(scale_kernel, scale)\n";

/* The CPU backend's handler: the same computation. */
static int
scale_cpu(rk_ctx *ctx, const rk_msg_view *m)
{
    float in[N], out[N];
    size_t n = m->len / 4 > N ? N : m->len / 4;

    memcpy(in, m->data, n * 4);
    for (size_t i = 0; i < n; i++)
        out[i] = 2.0f * in[i] + 1.0f;
    return rk_ctx_reply(ctx, m, m->hdr->type_id, out, n * 4);
}

static int
start(rk_runtime *rt, const char *backend)
{
    rk_kernel_def def = { .id = "scale", .handler = scale_cpu };
    int rc;

    def.config.backend = backend;
    def.config.device_source = device_src;
    def.config.device_entry = "scale_kernel";
    def.config.device_source_name = "gpu_scale.cu";
    /* Threads per block on a GPU; the cpu backend runs one thread and
     * refuses a block size above 1. */
    def.config.block_size = strcmp(backend, "cuda") == 0 ? 64 : 0;
    def.config.max_payload = N * 4;
    if ((rc = rk_runtime_register(rt, &def)) != RK_OK)
        return rc;
    if ((rc = rk_kernel_launch(rt, "scale")) != RK_OK)
        return rc;
    return rk_kernel_activate(rt, "scale");
}

int
main(void)
{
    rk_runtime *rt = NULL;
    rk_runtime_config cfg = { .no_static_kernels = true };
    const char *want = getenv("RK_EXAMPLE_BACKEND");
    const char *used = "cuda";
    float in[N], out[N];
    rk_kernel k;
    size_t len;

    if (rk_runtime_create(&rt, &cfg) != RK_OK)
        return 1;
    if (want != NULL && strcmp(want, "cpu") == 0) {
        used = "cpu";
    } else if (start(rt, "cuda") != RK_OK) {
        printf("cuda backend unavailable: %s\nrunning on the cpu backend\n",
            rk_errdetail());
        rk_runtime_destroy(rt);
        if (rk_runtime_create(&rt, &cfg) != RK_OK)
            return 1;
        used = "cpu";
    }
    if (strcmp(used, "cpu") == 0 && start(rt, "cpu") != RK_OK) {
        fprintf(stderr, "gpu_scale: %s\n", rk_errdetail());
        return 1;
    }
    if (rk_kernel_lookup(rt, "scale", &k) != RK_OK)
        return 1;
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < N; i++)
            in[i] = (float)(r * N + i);
        if (rk_send(rt, k, 1, in, sizeof(in), 128, 5000000000) != RK_OK
            || rk_recv(rt, k, NULL, out, sizeof(out), &len, 5000000000)
                != RK_OK
            || len != sizeof(out)) {
            fprintf(stderr, "gpu_scale: round %d: %s\n", r, rk_errdetail());
            return 1;
        }
        for (int i = 0; i < N; i++)
            if (out[i] != 2.0f * in[i] + 1.0f) {
                fprintf(stderr, "gpu_scale: wrong value at %d/%d\n", r, i);
                return 1;
            }
    }
    printf("gpu_scale: %d messages of %d floats scaled on the %s backend, "
           "all correct\n",
        ROUNDS, N, used);
    rk_kernel_terminate(rt, "scale", 5000000000);
    rk_runtime_destroy(rt);
    return 0;
}
