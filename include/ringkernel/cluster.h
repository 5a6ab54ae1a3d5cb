/** @file
 * ringkernel/cluster.h - kernels on other MPI ranks, addressed like local
 * ones.
 *
 * rk_cluster_mpi() joins a runtime to an MPI communicator. At join the
 * ranks exchange a directory of the kernels each exports (and the topics
 * each has subscribers for); for every remote kernel the cluster
 * registers a local *proxy* kernel named "R/id" (R the owning rank) and,
 * when no local kernel has the name, also "id". rk_send, rk_request,
 * rk_connect (to a proxy), rk_subscribe/rk_publish then work across ranks
 * through the runtime's own admission, priorities and backpressure; a
 * proxy forwards what it receives to the owning rank through the
 * cluster's one progress thread. rk_cluster_request() is a request
 * without the proxy (the reply goes straight to the calling thread).
 * docs/cluster.md describes the design, the wire format, flow control, failure
 * handling and how to run it.
 *
 * Built when CMake finds MPI. Without MPI, rk_cluster_mpi() returns
 * RK_ENOTSUP with a detail saying how to enable it, and the rest of the
 * library is unchanged. This header never includes <mpi.h>.
 *
 * Ownership: the cluster copies every string in its configuration. The
 * rk_cluster belongs to the caller until rk_cluster_leave(); if the
 * runtime is destroyed first, rk_runtime_destroy leaves the cluster (its
 * proxies and its control kernel end with the others) and the handle
 * becomes invalid.
 *
 * Threads: every rk_cluster_* call is thread-safe. After the join the
 * progress thread calls MPI, and, with MPI_THREAD_MULTIPLE (what the
 * cluster asks for when it initialises MPI), so does a thread in
 * rk_cluster_request for its own request and answer. With only
 * MPI_THREAD_SERIALIZED every request goes through the progress thread.
 */
#ifndef RINGKERNEL_CLUSTER_H
#define RINGKERNEL_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringkernel/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An opaque cluster membership, owned by the caller until rk_cluster_leave()
 * (or rk_runtime_destroy()) ends it. */
typedef struct rk_cluster rk_cluster;

/**
 * A local kernel made reachable from other ranks. The fields the remote
 * proxies mirror (capacity, payload limit, policy, bands) are read from
 * the kernel's registration (rk_kernel_config_get) at the join; the ones
 * here are ignored (kept for source compatibility). Proxies take the same
 * capacity, policy and payload limit, so a full remote kernel is felt at
 * the proxy.
 */
typedef struct rk_cluster_export {
    const char *id;               /**< the kernel id (copied at the join) */
    uint32_t input_capacity;      /**< ignored: read from the kernel */
    uint32_t max_payload;         /**< ignored: read from the kernel */
    rk_backpressure backpressure; /**< ignored: read from the kernel */
    bool priority_bands;          /**< ignored: read from the kernel */
    /** false (default): the cluster reads this kernel's output, so that a
     * reply to a message from another rank goes back to that rank; other
     * output is kept for rk_cluster_recv(). true: the local host reads the
     * output with rk_recv as usual, and remote requests get no reply. */
    bool local_output;
} rk_cluster_export;

/** Cluster settings; zeroed fields mean the defaults shown. The arrays are
 * read during the join only. */
typedef struct rk_cluster_config {
    /** Local kernels other ranks reach; NULL (with n_exports 0) exports
     * none unless export_all is set. This is the directory built at the
     * join: a kernel registered later is exported with
     * rk_cluster_announce(). */
    const rk_cluster_export *exports;
    size_t n_exports; /**< entries in exports */
    /** true: export every kernel registered at the join, except the
     * cluster's own and ids holding a '/' (they read as remote names),
     * each with the defaults of rk_cluster_export. The cluster then reads
     * all their output (see local_output), so a rank that also reads some
     * of its kernels' output with rk_recv names its exports instead.
     * exports must then be NULL (RK_EINVAL otherwise). */
    bool export_all;
    /** Topics shared across ranks. A rank that has subscribers for one of
     * these at join tells the others, whose publishes then reach them. */
    const char *const *topics;
    size_t n_topics; /**< entries in topics */
    /** A batch to one rank is sent when full (batch_bytes, 0: 256 KiB), when
     * its oldest message is batch_window_ns old (0: 20 us), or as soon as
     * the progress thread has nothing more to take. */
    uint32_t batch_bytes;
    int64_t batch_window_ns; /**< see batch_bytes */
    /** Flow control: messages to one rank in flight before it confirms
     * delivery (0: 8192). */
    uint32_t credits;
    /** A peer silent for this long is declared dead (0: 3 s); peers are
     * sent a heartbeat every heartbeat_ns / 4 when otherwise quiet. */
    int64_t heartbeat_ns;
    /** After its last activity the progress thread keeps polling MPI (and
     * yielding the CPU) for poll_ns (0: 1 ms), then sleeps in doubling
     * steps up to idle_sleep_max_ns (0: 1 ms), or up to idle_park_ns
     * (0: 50 ms) while nothing is in hand (no peer's request in a
     * kernel, no send in flight) and every peer can wake it: a local
     * producer wakes it at once, and a peer's first batch after a quiet
     * spell comes with a UDP datagram that wakes it (docs/cluster.md).
     * Open MPI gives no file descriptor to wait on, so a message that
     * arrives without a wake-up waits for the end of the step. */
    int64_t poll_ns;
    int64_t idle_sleep_max_ns; /**< see poll_ns */
    /** rk_cluster_leave and the leave done by rk_runtime_destroy wait this
     * long for the peers' goodbyes (0: 2 s). */
    int64_t leave_timeout_ns;
    int64_t idle_park_ns; /**< see poll_ns */
} rk_cluster_config;

/**
 * Joins rt to the MPI communicator *comm (a pointer to an MPI_Comm; NULL:
 * MPI_COMM_WORLD). Collective: every rank of the communicator must call
 * it. Initialises MPI (MPI_THREAD_MULTIPLE asked, SERIALIZED needed) when
 * the program has not; started without mpirun, the program is a cluster
 * of one. The exported kernels (cfg->exports, or every kernel with
 * cfg->export_all) must be registered before the call. If
 * any rank fails its part, every rank's call fails (RK_EINTERNAL on the
 * others), so none is left waiting in a collective. MPI stays
 * initialised after a failed join (a program that gives up calls
 * MPI_Finalize itself).
 * Errors: RK_ENOTSUP (built without MPI, or MPI's thread level too low),
 * RK_ENOTFOUND (an export names no kernel), RK_EINVAL, RK_ENOMEM,
 * RK_EINTERNAL (an MPI call failed; the detail has MPI's message).
 */
int rk_cluster_mpi(rk_runtime *rt, const void *comm,
    const rk_cluster_config *cfg, rk_cluster **out);

/** This process's rank and the communicator's size. */
int rk_cluster_rank(const rk_cluster *cl);
/** The number of ranks in the communicator (see rk_cluster_rank()). */
int rk_cluster_size(const rk_cluster *cl);

/**
 * Leaves the cluster: stops forwarding, tells the peers, waits up to
 * leave_timeout_ns for their goodbyes, terminates the proxies and frees
 * cl. Not collective in the MPI sense: a rank that leaves early becomes
 * unreachable to the others. Finalises MPI if rk_cluster_mpi initialised
 * it and every peer said goodbye. NULL is a no-op.
 */
int rk_cluster_leave(rk_cluster *cl);

/**
 * The output of an exported kernel the cluster reads (local_output
 * false) that was not a reply to another rank: the same contract as
 * rk_recv_id. For a kernel exported with local_output, or not exported,
 * it is rk_recv_id.
 */
int rk_cluster_recv(rk_cluster *cl, const char *id, rk_msg_header *hdr,
    void *buf, size_t cap, size_t *len, int64_t timeout_ns);

/**
 * @brief Exports a kernel after the join: the other ranks make its
 * proxies ("R/id", and "id" where no local kernel has the name) when the
 * announcement reaches them.
 *
 * ex as in rk_cluster_config.exports (ex->id copied; what the proxies
 * mirror is read from the kernel's registration). The kernel must be
 * registered. The call returns once this rank serves the export and the
 * announcement is staged for every live peer; a peer can reach the
 * kernel once its progress thread has handled the announcement, so a
 * program that needs to know waits there until rk_kernel_state_get of
 * "R/id" says RK_KERNEL_ACTIVE (the progress thread registers, launches
 * and activates the proxy). Up to 64 kernels per rank may be exported this
 * way; peers without room for more proxies leave the kernel unreachable.
 * Thread-safe; not concurrently with rk_cluster_leave().
 * @return RK_OK; RK_EINVAL (NULL, an id holding '/' or the cluster's
 * own); RK_ENOTFOUND (no such kernel); RK_EEXIST (already exported);
 * RK_EFULL (64 already announced); RK_ECLOSED (the cluster is leaving);
 * RK_ENOMEM.
 */
int rk_cluster_announce(rk_cluster *cl, const rk_cluster_export *ex);

/**
 * @brief A request to a kernel on another rank, answered straight to the
 * calling thread: rk_request_opts() without the proxy.
 *
 * The same contract as rk_request_opts(rt, k, opts, ...) on the proxy
 * named id ("R/id", or the bare name of a remote kernel): the request
 * carries opts' type and priority and is flagged RK_MSG_F_REQUEST; the
 * reply (the output of the remote kernel whose correlation id is the
 * request's id) is copied into reply (cap bytes) and its header into
 * *reply_hdr (may be NULL); *reply_len is its length. What it saves: the
 * two thread hand-offs through the proxy kernel (host -> proxy, proxy ->
 * host) and, with MPI_THREAD_MULTIPLE, the two through this process's
 * progress thread: a request of up to 4 KiB (frame included) while
 * nothing this process staged for that rank is still unsent is sent by
 * the calling thread itself (MPI_Isend), and the answer comes back to it
 * on a communicator of its own (MPI_Improbe/MPI_Mrecv). Otherwise the
 * calling thread stages the request (taking one of the peer's credits,
 * waiting up to the timeout while the peer is not keeping up) and the
 * progress thread hands it the reply. Either way a request never
 * overtakes a message this process sent to that rank before it. On the
 * owning rank, a kernel registered with config.direct_calls is run by
 * the progress thread (rk_kernel_call) when idle, so no thread hand-off
 * is left there either. What it skips: the proxy's own admission (its
 * queue, policy and counters). The waiting thread spins (an adaptive
 * budget of at most 20 us), then parks, or, when it receives by MPI,
 * polls while yielding the CPU for poll_ns and then naps in steps
 * growing to idle_sleep_max_ns (Open MPI has nothing to block on).
 *
 * A kernel of this rank that the cluster exports (without local_output)
 * is asked the same way, its reply handed over by the progress thread,
 * which reads that kernel's outputs (an rk_request() of its own would
 * race it for the reply). Any other local id, or a call while 64 direct
 * requests are already waiting in this process, goes through
 * rk_request_opts() instead, with its semantics.
 *
 * Thread-safe; not concurrently with rk_cluster_leave() on the same
 * handle.
 * @return RK_OK; RK_ETIMEDOUT (no reply in time: a reply that comes later
 * is discarded); RK_EUNREACHABLE (the rank died or left, before or while
 * waiting); the remote side's refusal (RK_EREJECTED, RK_ENOTFOUND, ...);
 * RK_EMSGSIZE (reply bigger than cap: *reply_len says how big, nothing
 * copied); RK_ENOTFOUND (no kernel id); RK_EINVAL (NULL arguments).
 */
int rk_cluster_request(rk_cluster *cl, const char *id,
    const rk_request_options *opts, const void *req, size_t req_len,
    rk_msg_header *reply_hdr, void *reply, size_t cap, size_t *reply_len);

/**
 * @brief One-way messages to a kernel on another rank, staged by the
 * calling thread: rk_send_batch() without the proxy.
 *
 * Sends n payloads of len bytes each, laid out back to back at base, to
 * id ("R/id", or the bare name of a remote kernel), with type_id and
 * priority, as rk_send_batch() on the proxy would. The calling thread
 * encodes the frames straight into the peer's staging buffer under one
 * lock, so the proxy kernel's thread is not on the path (a stream then
 * keeps one thread fewer busy on the sender). Flow control is the same:
 * the frames take the peer's credits on the wire, and the call waits up
 * to timeout_ns while the peer's staging buffer is over its limit (a
 * receiver that does not keep up). On the owning rank each message meets
 * the kernel's backpressure policy as a proxied one does, and is counted
 * there (delivered, rejected or dropped). A refusal comes back as for a
 * proxied send: counted in remote_errors, and put out by the proxy as an
 * RK_CLUSTER_TYPE_ERROR message correlated with the refused message's
 * id. What it skips: the proxy's own queue and counters (the messages
 * count in forwarded).
 *
 * An id that is not a remote kernel goes through rk_send_batch() on that
 * kernel instead, with its semantics. Thread-safe (messages from one
 * thread stay in order); not concurrently with rk_cluster_leave() on the
 * same handle.
 * @return RK_OK with *sent == n; otherwise *sent is how many went (the
 * first *sent, in order) and: RK_EUNREACHABLE (the rank died or left),
 * RK_ETIMEDOUT (the peer did not make room in time), RK_EMSGSIZE (len
 * over 4 GiB), RK_ENOMEM, RK_ENOTFOUND (no kernel id), RK_EINVAL (NULL
 * arguments).
 */
int rk_cluster_send_batch(rk_cluster *cl, const char *id, uint32_t type_id,
    const void *base, size_t len, size_t n, uint8_t priority,
    int64_t timeout_ns, size_t *sent);

/** RK_OK if the rank is a live member; RK_EUNREACHABLE if it died or
 * left; RK_EINVAL if out of range. */
int rk_cluster_peer_status(const rk_cluster *cl, int rank);

/**
 * An error reply from the cluster: RK_MSG_TYPE_ERROR (payload: a
 * little-endian int32 RK_E* code, then a detail text). One comes out of a
 * proxy's output with the correlation id of a message the remote rank
 * refused (its kernel rejected it), or of a request pending when the rank
 * died or left; an rk_request waiting for it returns the code
 * (RK_EREJECTED, RK_EUNREACHABLE) instead of timing out.
 */
#define RK_CLUSTER_TYPE_ERROR RK_MSG_TYPE_ERROR
/** Used between the progress thread and proxies; never seen by users. */
#define RK_CLUSTER_TYPE_INJECT 0xFFFFFF02u

/** Counters of this process's side of the cluster (relaxed snapshot). */
/** Counters of a cluster since the join; a caller-owned snapshot. */
typedef struct rk_cluster_stats {
    uint64_t forwarded;        /**< messages proxies (and rk_cluster_request,
                                  rk_cluster_send_batch) handed to the
                                  network */
    uint64_t sent_frames;      /**< frames put on the wire (all kinds) */
    uint64_t sent_batches;     /**< MPI messages carrying them */
    uint64_t received;         /**< data frames received for local kernels */
    uint64_t delivered;        /**< of those, taken by the local kernel */
    uint64_t rejected;         /**< of those, refused (error sent back) */
    uint64_t dropped;          /**< of those, dropped by DROP_NEW */
    uint64_t replies_sent;     /**< replies returned to requesting ranks */
    uint64_t replies_received; /**< replies put out by local proxies or
                                  handed to rk_cluster_request */
    uint64_t remote_errors;    /**< error notices received from peers */
    uint64_t unreachable;      /**< messages failed because a rank died */
    uint64_t credit_stalls;    /**< times a rank had no credit left */
    uint64_t idle_sleeps;      /**< times the progress thread slept */
    uint64_t late_replies;     /**< replies that came after their
                                  rk_cluster_request gave up (timed out):
                                  dropped */
    uint64_t proxy_wakeups;    /**< times an idle proxy woke to look at its
                                  peer's state (100 ms after its queue ran
                                  dry, then ever less often) */
} rk_cluster_stats;

/** Fills *out (caller-owned) with the cluster's counters. RK_EINVAL for NULL.
 */
int rk_cluster_stats_get(const rk_cluster *cl, rk_cluster_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* RINGKERNEL_CLUSTER_H */
