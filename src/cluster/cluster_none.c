/*
 * src/cluster/cluster_none.c - the cluster API in a build without MPI:
 * every call says how to get it (docs/cluster.md).
 */
#include "ringkernel/cluster.h"

#include "common/common.h"

/* Every function here answers the same way whatever it is given: its
 * parameters are there to match cluster.h. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

static int
no_mpi(const char *what)
{
    return rk__fail(RK_ENOTSUP,
        "%s: ringkernel was built without MPI; install an MPI (Debian: "
        "libopenmpi-dev openmpi-bin, see tools/deps.sh) and rebuild, CMake "
        "finds it (-DRK_WITH_MPI=ON makes it required)",
        what);
}

int
rk_cluster_mpi(rk_runtime *rt, const void *comm, const rk_cluster_config *cfg,
    rk_cluster **out)
{
    if (out != NULL)
        *out = NULL;
    return no_mpi("rk_cluster_mpi");
}

int
rk_cluster_rank(const rk_cluster *cl)
{
    return -1;
}

int
rk_cluster_size(const rk_cluster *cl)
{
    return 0;
}

int
rk_cluster_leave(rk_cluster *cl)
{
    return RK_OK;
}

int
rk_cluster_peer_status(const rk_cluster *cl, int rank)
{
    return no_mpi("rk_cluster_peer_status");
}

int
rk_cluster_recv(rk_cluster *cl, const char *id, rk_msg_header *hdr, void *buf,
    size_t cap, size_t *len, int64_t timeout_ns)
{
    return no_mpi("rk_cluster_recv");
}

int
rk_cluster_announce(rk_cluster *cl, const rk_cluster_export *ex)
{
    return no_mpi("rk_cluster_announce");
}

int
rk_cluster_request(rk_cluster *cl, const char *id,
    const rk_request_options *opts, const void *req, size_t req_len,
    rk_msg_header *reply_hdr, void *reply, size_t cap, size_t *reply_len)
{
    return no_mpi("rk_cluster_request");
}

int
rk_cluster_send_batch(rk_cluster *cl, const char *id, uint32_t type_id,
    const void *base, size_t len, size_t n, uint8_t priority,
    int64_t timeout_ns, size_t *sent)
{
    if (sent != NULL)
        *sent = 0;
    return no_mpi("rk_cluster_send_batch");
}

int
rk_cluster_stats_get(const rk_cluster *cl, rk_cluster_stats *out)
{
    return no_mpi("rk_cluster_stats_get");
}
