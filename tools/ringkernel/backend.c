/*
 * tools/ringkernel/backend.c - what --backend means for the command.
 *
 * The command's CPU kernels (the anomaly pipeline, the PageRank actors)
 * run on the cpu backend; two of its kernels also have a device version
 * that runs on the cuda backend: PageRank (pr_dev.h) and the anomaly
 * pipeline's detector stage (anomaly_dev.h). `cpu` runs without them,
 * `cuda` runs them or is refused with the backend probe's reason
 * (rk_backend_probe: driver, device, NVRTC) where cuda is not usable
 * here, and `auto` runs them where cuda is usable and falls back to cpu,
 * saying why, where it is not: the same rule for `demo`, `bench` and
 * `pagerank`.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static int
pick(const char *name, bool *use_cuda, char *why, size_t whylen)
{
    bool auto_ = name == NULL || strcmp(name, "auto") == 0;

    why[0] = '\0';
    *use_cuda = false;
    if (!auto_ && strcmp(name, "cpu") == 0)
        return CLI_OK;
    if (!auto_ && strcmp(name, "cuda") != 0) {
        snprintf(why, whylen, "unknown backend '%s' (cpu, cuda, auto)", name);
        return CLI_USAGE;
    }
    if (cli_cuda_usable(why, whylen)) {
        *use_cuda = true;
        return CLI_OK;
    }
    if (auto_)
        return CLI_OK; /* why: the probe's reason */
    {
        char reason[400];
        snprintf(reason, sizeof(reason), "%s", why);
        snprintf(why, whylen, "backend 'cuda' is not available: %s", reason);
    }
    return CLI_UNAVAILABLE;
}

int
cli_backend_pick(const char *sub, const char *name, FILE *note, bool *use_cuda,
    char *why, size_t whylen)
{
    int rc = pick(name, use_cuda, why, whylen);

    if (rc != CLI_OK)
        fprintf(stderr, "ringkernel %s: %s\n", sub, why);
    else if (!*use_cuda && why[0] != '\0' && note != NULL)
        fprintf(note, "cuda: not usable (%s); running on cpu\n", why);
    return rc;
}
