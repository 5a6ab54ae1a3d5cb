/*
 * tools/ringkernel/cuda_util.c - what the command's device kernels share:
 * whether the cuda backend is usable, which device it uses and how that
 * device's figures are labelled, and device buffers filled from the host
 * (PageRank: pr_cuda.c; the anomaly detector: anomaly_cuda.c).
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define DEFAULT_ORDINAL 0

bool
cli_cuda_usable(char *why, size_t whylen)
{
    if (rk_backend_probe("cuda") == RK_OK) {
        why[0] = '\0';
        return true;
    }
    snprintf(why, whylen, "%s", rk_errdetail());
    return false;
}

const char *
cli_cuda_label(bool simulated)
{
    return simulated ? "cuda_sim" : "cuda";
}

int
cli_cuda_device(cli_cuda_dev *out)
{
    const char *s = getenv("RK_CUDA_DEVICE");
    rk_device_list *list = NULL;
    const rk_device_info *gpu = NULL;
    int rc;

    memset(out, 0, sizeof(*out));
    /* The device the backend uses (RK_CUDA_DEVICE, as src/backend/cuda). */
    out->ordinal = s != NULL && s[0] != '\0' ? atoi(s) : DEFAULT_ORDINAL;
    if ((rc = rk_devices_query(&list)) == RK_OK
        && (rc = rk_device_select(list, RK_DEVICE_CUDA, out->ordinal, &gpu))
            == RK_OK) {
        snprintf(out->name, sizeof(out->name), "%s", gpu->name);
        /* bench/bench_cuda.c's test: the stand-in names its device
         * "fake". */
        out->simulated = strstr(gpu->name, "fake") != NULL;
        out->sms
            = gpu->multiprocessors > 0 ? (uint32_t)gpu->multiprocessors : 1;
    }
    rk_device_list_free(list);
    return rc;
}

int
cli_device_array(rk_buffer **b, rk_dtype t, size_t count, const void *host,
    int ordinal, uint64_t *dev)
{
    rk_buffer_config c = { .dtype = t,
        .dims = { count ? count : 1 }, /* a buffer is never empty */
        .device = RK_DEVICE_CUDA,
        .ordinal = ordinal };
    void *d = NULL;
    int rc = rk_buffer_create(b, &c);

    if (rc == RK_OK && host != NULL && count != 0)
        rc = rk_buffer_copy_from(*b, host, count * rk_dtype_size(t));
    if (rc == RK_OK)
        rc = rk_buffer_device(
            *b, host != NULL ? RK_ACCESS_READ : RK_ACCESS_DISCARD, &d);
    *dev = (uint64_t)(uintptr_t)d;
    return rc;
}

uint32_t
cli_pow2_at_least(uint32_t v)
{
    uint32_t p = 1;
    while (p < v)
        p <<= 1;
    return p;
}
