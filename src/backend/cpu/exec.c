/*
 * src/backend/cpu/exec.c - one-shot kernels on the cpu backend: the
 * kernel's host fallback runs the whole launch on the calling thread, with
 * the buffers made current on the host first and marked host-dirty after.
 * A kernel without a fallback is refused (the cpu cannot run CUDA C).
 */
#include <stdio.h>

#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "common/common.h"
#include "ringkernel/oneshot.h"

int
rk__cpu_exec(rk__exec_kernel *k, const rk_oneshot_launch *l)
{
    const rk_oneshot_def *def = k->def;
    void *ptr[RK_ONESHOT_MAX_BUFS];
    rk_oneshot_host_args a;
    int rc;

    if (def->host == NULL)
        return rk__fail(RK_ENOTSUP,
            "one-shot kernel '%s': no host fallback, and the cpu backend "
            "cannot run CUDA C (give rk_oneshot_def.host, or run it on cuda)",
            def->name);
    for (size_t i = 0; i < l->nbuf; i++)
        if ((rc = rk_buffer_host(l->bufs[i], RK_ACCESS_WRITE, &ptr[i]))
            != RK_OK) {
            char why[300];
            snprintf(why, sizeof(why), "%s", rk_errdetail());
            return rk__fail(rc, "one-shot kernel '%s': buffer %zu: %s",
                def->name, i, why);
        }
    a = (rk_oneshot_host_args) { .name = def->name,
        .grid = l->grid,
        .block = l->block,
        .bufs = ptr,
        .nbuf = l->nbuf,
        .args = l->args,
        .args_len = l->args_len,
        .user = def->user };
    rk__clear_detail();
    rc = def->host(&a);
    if (rc != RK_OK && rk_errdetail()[0] == '\0')
        return rk__fail(rc, "one-shot kernel '%s': the host fallback failed",
            def->name);
    return rc;
}
