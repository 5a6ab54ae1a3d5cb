/*
 * src/cluster/mpi_error.c - an MPI call's failure as an RK_E* code with a
 * detail, for every file of the cluster (a leaf: it calls nothing of
 * theirs).
 */
#include <stdio.h>

#include "cluster/cluster_int.h"

int
rk__cl_mpi_fail(int mrc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int n = 0;

    if (MPI_Error_string(mrc, msg, &n) != MPI_SUCCESS)
        snprintf(msg, sizeof(msg), "MPI error %d", mrc);
    return rk__fail(RK_EINTERNAL, "cluster: %s failed: %s", what, msg);
}
