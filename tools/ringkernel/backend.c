/*
 * tools/ringkernel/backend.c - what --backend means for the command.
 *
 * MERGE: the runtime does not take a backend name yet (the lead is adding
 * one to rk_runtime_config: "cpu", "cuda", "auto"). Until then the CPU
 * backend is the only one a runtime can run, so "auto" resolves to it and
 * "cuda" is reported unavailable whether or not a GPU is present. Wiring
 * the new field is a change to this function only: set the config's
 * backend name from `name` where the callers create their runtimes
 * (anomaly.c, pagerank.c), and let "auto" pick cuda when rk_cuda_probe()
 * says RK_CUDA_AVAILABLE.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int
cli_backend_pick(
    const char *name, const char **chosen, char *why, size_t whylen)
{
    const char *detail = "";
    rk_cuda_status cs;

    why[0] = '\0';
    if (name == NULL || strcmp(name, "auto") == 0
        || strcmp(name, "cpu") == 0) {
        *chosen = "cpu";
        return CLI_OK;
    }
    if (strcmp(name, "cuda") != 0) {
        snprintf(why, whylen,
            "unknown backend '%s' (choose cpu, cuda or auto)", name);
        return CLI_USAGE;
    }
    cs = rk_cuda_probe(&detail);
    snprintf(why, whylen,
        "backend 'cuda' is not available: this build's runtime runs kernels "
        "on the CPU backend only (CUDA driver: %s%s%s); use --backend cpu "
        "or auto",
        rk_cuda_status_name(cs), detail && *detail ? ", " : "",
        detail ? detail : "");
    return CLI_UNAVAILABLE;
}
