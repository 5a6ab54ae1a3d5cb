/*
 * tools/ringkernel/backend.c - what --backend means for the command.
 *
 * The command's kernels (the anomaly pipeline, the PageRank actors) are
 * host C actors, so they run on the cpu backend; "auto" picks it. For
 * "cuda" the runtime's registry says whether the backend could run here
 * (rk_backend_probe, with the reason when not); even where it could, these
 * kernels have no device version, which is said plainly rather than
 * falling back in silence. PageRank alone also has a device kernel
 * (pr_dev.h): `pagerank --backend` and `bench pagerank` ask
 * cli_cuda_usable (pr_cuda.c) for it instead.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int
cli_backend_pick(
    const char *name, const char **chosen, char *why, size_t whylen)
{
    why[0] = '\0';
    if (name == NULL || strcmp(name, "auto") == 0
        || strcmp(name, "cpu") == 0) {
        *chosen = "cpu";
        return CLI_OK;
    }
    if (rk_backend_probe(name) == RK_ENOTFOUND) {
        snprintf(why, whylen, "unknown backend '%s': %s", name,
            rk_errdetail());
        return CLI_USAGE;
    }
    if (rk_backend_probe(name) != RK_OK) {
        snprintf(why, whylen, "backend '%s' is not available: %s", name,
            rk_errdetail());
        return CLI_UNAVAILABLE;
    }
    snprintf(why, whylen,
        "backend '%s' is not available for this command: its kernels are "
        "host C actors with no device version; use --backend cpu or auto",
        name);
    return CLI_UNAVAILABLE;
}
