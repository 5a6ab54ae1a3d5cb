/*
 * src/backend/cuda/exec.h - one-shot kernels on the cuda backend: the
 * table's exec_load, exec and exec_unload entries (exec.c; backend.h says
 * what each must do).
 */
#ifndef RK_SRC_BACKEND_CUDA_EXEC_H
#define RK_SRC_BACKEND_CUDA_EXEC_H

#include "backend/backend.h"

int rk__cuda_exec_load(rk__exec_kernel *k);
int rk__cuda_exec(rk__exec_kernel *k, const struct rk_oneshot_launch *l);
void rk__cuda_exec_unload(rk__exec_kernel *k);

#endif /* RK_SRC_BACKEND_CUDA_EXEC_H */
