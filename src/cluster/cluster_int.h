/*
 * src/cluster/cluster_int.h - the MPI cluster's private types and the
 * helpers its files share (design in docs/cluster.md). Only the files
 * built with MPI include it; cluster_none.c stands in for them all
 * without MPI.
 *
 * Who does what:
 *   - proxies (mpi_proxy.c): one local actor kernel per remote kernel
 *     ("R/id", and "id" when no local kernel has the name) and per remote
 *     topic member ("R/#topic"). A proxy forwards each message it
 *     receives as a frame into its peer's staging buffer (mpi_stage.c),
 *     and puts replies the progress thread injects (flag RK__CL_F_INJECT)
 *     out on its own output queue with rk_ctx_reply, so rk_request on the
 *     proxy sees them.
 *   - ingress threads (mpi_ingress.c): one per exported BLOCK kernel;
 *     they send, with a wait, the frames the progress thread could not
 *     put in at once.
 *   - the progress thread: the only thread that calls MPI after the join,
 *     but for requesting threads' own requests (mpi_request.c). Its loop
 *     (mpi_progress.c) reads the output of exported kernels (drain_poll:
 *     a reply to a peer's request goes back to that peer, anything else
 *     to the local mailbox read with rk_cluster_recv), moves staged
 *     frames into per-peer batches (within the peer's credits) and sends
 *     them with MPI_Isend (mpi_send.c), receives with persistent
 *     MPI_Recv_init requests and delivers frames to local kernels, one
 *     handler per frame kind, holding them while a BLOCK kernel is full
 *     (mpi_recv.c), returns credits, sends heartbeats, declares silent
 *     peers dead, and runs the goodbye.
 *   - the control kernel "rk.cluster" (mpi_join.c): an actor that only
 *     waits; when rk_runtime_destroy terminates it, it stops the threads
 *     above, so nothing outlives the runtime.
 *   - the progress thread's idle wait and its wake-ups: an eventfd for
 *     local producers, a UDP poke from peers (mpi_wake.c).
 *   - the join (mpi_join.c), the handle's references and free
 *     (mpi_handle.c), MPI errors (mpi_error.c), the id maps
 *     (mpi_idmap.c), and the public calls after the join (cluster_mpi.c).
 *
 * Locks: each peer's lock guards its staging buffers; a mailbox lock per
 * export; one lock per id map; a lock per rk_cluster_request slot;
 * export_lock serialises adding exports after the join. No lock is held
 * while calling the runtime or MPI, and no two of these are ever held
 * together, except stop_lock (rk__cl_stop) then export_lock.
 */
#ifndef RK_SRC_CLUSTER_CLUSTER_INT_H
#define RK_SRC_CLUSTER_CLUSTER_INT_H

#include "ringkernel/cluster.h"

#include <mpi.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cluster/wire.h"
#include "common/common.h"

/* Envelope flag bits the cluster sets on what it forwards (the runtime's
 * bits 8-31 of rk_msg_header.flags; users' sends never carry them). */
#define RK__CL_F_INJECT 0x80000000u /* a reply for a proxy to put out */
#define RK__CL_F_REMOTE 0x40000000u /* a publish that came from a peer */
/* The envelope flags a frame carries across: the encoding, and whether
 * the sender waits for a reply (only those get a route back). */
#define CL_WIRE_FLAGS (RK_MSG_F_ENCODING_MASK | RK_MSG_F_REQUEST)

#define CL_TAG        0x524b /* one tag for every batch */
#define CL_NSEND      4      /* send buffers per peer */
#define CL_NRECV      4      /* receives kept posted */
#define CL_IDMAP      65536  /* correlation entries kept (power of 2) */
#define CL_MAILBOX    4096   /* local outputs kept per export */
#define CL_CONTROL_ID "rk.cluster"
/* rk_cluster_request: requests in flight at once (one bit each of a
 * 64-bit map), and the mark in a frame's aux (echoed back as its reply's
 * target) that names a waiting slot instead of a proxy. */
#define CL_NWAIT  64
#define CL_DIRECT 0x40000000u
/* With CL_DIRECT: the requesting thread sent the request itself (a CALL
 * frame) and waits for the answer on rcomm, tag = the slot. */
#define CL_BYMPI     0x20000000u
#define CL_SLOT_MASK 0xffffu
/* Requests up to this size (frame and batch header included) go by the
 * requesting thread's own MPI_Isend: small enough to be sent eagerly, so
 * the send completes without the receiver. Answers up to this size come
 * back into the receive it posted; a bigger one is staged and handed over
 * by its progress thread. */
#define CL_CALL_MAX 4096u
/* Kernels a rank may export after the join (rk_cluster_announce); room
 * is kept for them, and for their proxies on every peer. */
#define CL_LATE 64

enum { PEER_LIVE = 0, PEER_GONE, PEER_DEAD };

/* ThreadSanitizer and the buffers MPI reads and writes. With
 * MPI_THREAD_MULTIPLE any thread that calls MPI drives its progress, so
 * Open MPI may fill the progress thread's receive buffer, or read a send
 * buffer, on a requesting thread; the buffer changes hands through Open
 * MPI's request completion, which TSan cannot see (Open MPI is not
 * instrumented). Only these buffers are marked, once, when allocated;
 * they live until cluster_free. */
#if defined(__SANITIZE_THREAD__)
#define CL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CL_TSAN 1
#endif
#endif
#ifdef CL_TSAN
void AnnotateBenignRaceSized(const char *file, int line,
    const volatile void *mem, size_t size, const char *desc);
#define CL_MPI_BUFFER(p, n)                                                   \
    AnnotateBenignRaceSized(__FILE__, __LINE__, (p), (n),                     \
        "handed over by MPI request completion")
#else
#define CL_MPI_BUFFER(p, n) ((void)0)
#endif

/* ------------------------------------------------------------ buffers */

typedef struct cl_buf {
    uint8_t *p;
    size_t len, cap, off; /* bytes [off, len) are unread */
} cl_buf;

/* ------------------------------------------------------------- id map */

/* message id -> (rank, proxy index), bounded: the oldest entry is
 * overwritten when full (a reply that late is then kept locally). */
typedef struct cl_ident {
    rk_uuid id;
    int32_t rank;
    uint32_t proxy;
    int32_t next; /* bucket chain, -1 ends */
    uint8_t priority;
    bool used;
} cl_ident;

typedef struct cl_idmap {
    pthread_mutex_t lock;
    cl_ident *ent;
    int32_t *bucket;
    uint32_t head;
    uint32_t n; /* entries in use (under lock) */
} cl_idmap;

/* ------------------------------------------------------------ objects */

typedef struct cl_mail {
    rk_msg_header hdr;
    size_t len;
    uint8_t *data;
} cl_mail;

typedef struct cl_export {
    char id[RK_ID_MAX + 1];
    rk_cluster_export cfg;
    rk_cluster *cl;
    uint8_t *obuf; /* an output's payload (progress thread) */
    size_t ocap;
    /* mailbox: outputs not for a peer, read by rk_cluster_recv */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    cl_mail *mail;
    uint32_t mhead, mcount;
    _Atomic uint32_t mfill; /* mcount, for the progress thread's look */
    /* ingress (BLOCK exports): frames the progress thread hands over, each
     * after its source rank (4 bytes), sent by this export's ingress
     * thread with blocking sends; under lock, signalled by cond */
    cl_buf in;
    pthread_t ingress;
    bool ingress_started;
    /* frames handed to the ingress thread and not yet sent: while there
     * are any, later frames queue behind them (order) */
    _Atomic uint32_t in_pending;
    bool in_waiting; /* the ingress thread waits on cond (under lock) */
    /* the kernel's handle as the ingress thread last looked it up */
    rk_kernel ik;
    bool ik_ok;
    /* room the kernel's input had at the last look, less what the progress
     * thread sent since (the kernel only frees more) */
    uint64_t room;
    /* the kernel's handle, looked up again when stale (progress thread) */
    rk_kernel k;
    bool k_ok;
    /* the kernel takes direct calls: the progress thread runs its handler
     * (rk_kernel_call) when it is idle, instead of queueing */
    bool direct_calls;
} cl_export;

typedef struct cl_proxy {
    char id[RK_ID_MAX + 1];
    rk_cluster *cl;
    int rank;        /* owning rank */
    uint32_t target; /* export or topic index there */
    uint32_t index;  /* this proxy's index here */
    bool topic;
    _Atomic bool exited;
    rk_kernel k; /* the proxy's handle (progress thread), when k_ok */
    bool k_ok;
} cl_proxy;

/* A host thread waiting in rk_cluster_request for a reply. The caller
 * fills it and sets state WAITING under lock; an answerer claims it
 * (WAITING -> BUSY, a compare-and-swap), copies the reply into the
 * caller's buffers and sets DONE. The progress thread answers under lock
 * only while the state is WAITING and the id matches, so a caller that
 * gave up (state back to FREE, under lock) is never written to; the
 * requesting thread claims an answer it received itself without the
 * lock (mpi_request.c). */
enum { W_FREE = 0, W_WAITING, W_BUSY, W_DONE };

typedef struct cl_waiter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    _Atomic int state;
    rk_uuid id;
    int rank;
    rk_msg_header *hdr; /* the caller's, while WAITING (may be NULL) */
    void *buf;
    size_t cap;
    size_t len;
    int rc;
    bool sleeping; /* the caller waits on cond (under lock) */
    /* The caller's own MPI traffic (rk_cluster_request by MPI): the
     * request's batch and the buffer the answer is received into. Used
     * only by the thread holding the slot. */
    uint8_t *sbuf, *rbuf; /* one allocation: rbuf = sbuf + CL_CALL_MAX */
    MPI_Request sreq, rreq;
    /* Requests sent and replies received that way, counted by the thread
     * holding the slot, its only writer (rk_cluster_stats_get). */
    _Atomic uint64_t sent_by_mpi, replies_by_mpi;
} cl_waiter;

typedef struct cl_sendbuf {
    uint8_t *p;
    size_t len;
    uint32_t nframes;
    uint32_t ncredited; /* of those, DATA and TOPIC (cl_peer.unsent) */
    MPI_Request req;
} cl_sendbuf;

typedef struct cl_peer {
    /* shared: producers append, the progress thread swaps out */
    pthread_mutex_t lock;
    pthread_cond_t room;
    cl_buf stage[2]; /* 0: DATA/TOPIC (credited), 1: REPLY/ERROR */
    /* Bit c set (under lock) when stage[c] got frames, cleared (under
     * lock) when the progress thread takes them: it takes the lock only
     * when a bit is set. A bit it reads late is seen next round. */
    _Atomic uint32_t staged;
    _Atomic int state;
    /* progress thread only */
    cl_buf backlog[2];
    cl_buf held; /* frames from this peer waiting for a full kernel */
    uint32_t credits, window;
    uint32_t owed;               /* credits to return to this peer */
    _Atomic uint32_t owed_async; /* the same, from ingress threads */
    cl_sendbuf sb[CL_NSEND];
    unsigned cur;
    /* Credited frames (DATA, TOPIC) staged for this peer and not yet
     * handed to MPI_Isend: producers add under lock, the progress thread
     * subtracts after the send (release). A thread that reads 0 (acquire)
     * sends after every frame it staged before, so MPI's non-overtaking
     * rule keeps its own request behind them (rk_cluster_request). */
    _Atomic uint32_t unsent;
    uint64_t last_heard, last_sent;
    bool bye_sent, bye_got;
    /* Wake-ups (mpi_wake.c): when any thread of ours last sent this
     * peer's progress thread a batch (relaxed: a stale value only costs
     * or saves one poke), and where its poke socket is. */
    _Atomic uint64_t last_tx;
    struct sockaddr_in poke_to;
} cl_peer;

struct rk_cluster {
    rk_runtime *rt;
    MPI_Comm comm;
    MPI_Comm rcomm; /* answers to requests sent by the requesting thread */
    int rank, size;
    bool mpi_ours;
    bool multiple; /* MPI_THREAD_MULTIPLE: host threads may call MPI */
    rk_cluster_config cfg;
    uint32_t batch_bytes;
    size_t stage_limit;

    /* exports and proxies: entries are filled before the count that
     * covers them is raised (seq_cst), so a reader that loads the count
     * sees them; entries never move (room for CL_LATE more is kept).
     * Exports grow under export_lock (rk_cluster_announce), proxies only
     * on the joining thread and then the progress thread. */
    cl_export *exports;
    _Atomic size_t n_exports;
    size_t exports_cap;
    pthread_mutex_t export_lock;
    char (*topics)[RK_ID_MAX + 1];
    size_t n_topics;
    cl_proxy *proxies;
    _Atomic size_t n_proxies;
    size_t proxies_cap;
    cl_peer *peers;

    cl_idmap served; /* messages from peers: id -> (rank, proxy) */
    cl_idmap fwd;    /* messages sent to peers, not yet answered */

    uint8_t *rbuf[CL_NRECV];
    MPI_Request rreq[CL_NRECV];
    int rnext; /* the receive posted first (progress thread) */

    pthread_t progress;
    bool progress_started;
    _Atomic bool stop;    /* progress thread: leave and exit */
    _Atomic bool stopped; /* progress thread has exited */
    _Atomic bool drain_stop;
    pthread_mutex_t stop_lock; /* serialises rk__cl_stop */
    bool stop_done;
    bool leaving; /* rk_cluster_leave is running (control kernel) */
    bool clean;   /* every peer said goodbye */

    /* The progress thread's idle wait (mpi_wake.c): it parks in ppoll on
     * wake_fd (an eventfd local producers write while it sleeps) and
     * poke_fd (a UDP socket peers send a datagram to with their first
     * batch after a quiet spell). pokeable: every peer pokes us, so an
     * idle park may last idle_park_ns. */
    int wake_fd, poke_fd;
    bool pokeable;
    uint64_t poke_gap_ns; /* half the shortest poll_ns of any rank */
    _Atomic int sleeping;
    _Atomic int work;

    _Atomic int refs;

    /* rk_cluster_request's waiters: a set bit of wfree is a free slot */
    cl_waiter wait[CL_NWAIT];
    _Atomic uint64_t wfree;
    _Atomic uint32_t wspin_ns; /* adapted spin before a waiter parks */
    _Atomic int driving;       /* threads polling MPI in request_by_mpi */

    /* The counters: st counts what any thread does, pst what only the
     * progress thread does (PSTAT) and each waiter slot what the thread
     * holding it sent and received by MPI; rk_cluster_stats_get adds
     * them up. */
    struct cl_stats {
        _Atomic uint64_t forwarded, sent_frames, sent_batches, received,
            delivered, rejected, dropped, replies_sent, replies_received,
            remote_errors, unreachable, credit_stalls, idle_sleeps,
            late_replies, proxy_wakeups;
    } st, pst;
};

#define STAT(cl, f, n)                                                        \
    atomic_fetch_add_explicit(&(cl)->st.f, (n), memory_order_relaxed)
/* A counter of a waiter slot's, written by the thread holding it. */
#define WSTAT(w, f)                                                           \
    atomic_store_explicit(&(w)->f,                                            \
        atomic_load_explicit(&(w)->f, memory_order_relaxed) + 1,              \
        memory_order_relaxed)
/* A counter of the progress thread's, its only writer: no locked add. */
#define PSTAT(cl, f, n)                                                       \
    atomic_store_explicit(&(cl)->pst.f,                                       \
        atomic_load_explicit(&(cl)->pst.f, memory_order_relaxed) + (n),       \
        memory_order_relaxed)

/* ------------------------------------------------- helpers, inline */

/* Small helpers of the hot paths, inline here so that splitting the
 * cluster into files adds no call to them. */

static inline void
rk__cl_buf_reset(cl_buf *b)
{
    b->len = b->off = 0;
}

static inline void
rk__cl_buf_swap(cl_buf *a, cl_buf *b)
{
    cl_buf t = *a;
    *a = *b;
    *b = t;
}

static inline uint64_t
rk__cl_ns_since(uint64_t then, uint64_t now)
{
    return now > then ? now - then : 0;
}

/* A frame (kind, target and aux left 0) for a message with header h and
 * a len-byte payload. */
static inline void
rk__cl_frame_from_header(rk__cl_frame *f, const rk_msg_header *h, size_t len)
{
    memset(f, 0, sizeof(*f));
    f->priority = h->priority;
    f->type_version = h->type_version;
    f->type_id = h->type_id;
    f->flags = h->flags & CL_WIRE_FLAGS;
    f->len = (uint32_t)len;
    f->send_ns = h->send_ns;
    f->id = h->message_id;
    f->corr = h->correlation_id;
}

/* The envelope a frame's message goes into a local kernel with. */
static inline rk_msg_header
rk__cl_frame_header(const rk__cl_frame *f)
{
    rk_msg_header h;

    memset(&h, 0, sizeof(h));
    h.priority = f->priority;
    h.type_id = f->type_id;
    h.type_version = f->type_version;
    h.flags = f->flags & CL_WIRE_FLAGS;
    h.message_id = f->id;
    h.correlation_id = f->corr;
    return h;
}

/* What became of a rank that is no longer live, for error details. */
static inline const char *
rk__cl_peer_fate(rk_cluster *cl, int rank)
{
    return atomic_load(&cl->peers[rank].state) == PEER_GONE
        ? "left the cluster"
        : "died";
}

/* This rank's export named id, or NULL. */
static inline cl_export *
rk__cl_export_named(rk_cluster *cl, const char *id)
{
    for (size_t i = 0; i < cl->n_exports; i++)
        if (strcmp(cl->exports[i].id, id) == 0)
            return &cl->exports[i];
    return NULL;
}

/* The remote kernel's proxy named id (not a topic's), or NULL. */
static inline const cl_proxy *
rk__cl_proxy_named(const rk_cluster *cl, const char *id)
{
    for (size_t i = 0; i < cl->n_proxies; i++)
        if (!cl->proxies[i].topic && strcmp(cl->proxies[i].id, id) == 0)
            return &cl->proxies[i];
    return NULL;
}

/* ------------------------------------------ functions shared by files */

/* mpi_idmap.c: message id -> (rank, proxy), bounded: the oldest entry is
 * overwritten when full. Each call takes the map's lock. */
int rk__cl_idmap_init(cl_idmap *m);
void rk__cl_idmap_free(cl_idmap *m);
void rk__cl_idmap_put(
    cl_idmap *m, const rk_uuid *id, int rank, uint32_t proxy, uint8_t prio);
/* Removes id's entry; true (and its rank and proxy, where not NULL) if
 * there was one. */
bool rk__cl_idmap_take(
    cl_idmap *m, const rk_uuid *id, int *rank, uint32_t *proxy);
cl_ident *rk__cl_idmap_take_proxy(
    cl_idmap *m, int rank, uint32_t proxy, size_t *n);

/* mpi_stage.c: buffers, and frames staged for a peer's progress thread
 * (under the peer's lock; each wakes the progress thread). */
int rk__cl_buf_append(cl_buf *b, size_t n, uint8_t **where);
/* Called with p->lock held. */
int rk__cl_stage_reserve(rk_cluster *cl, cl_peer *p, int rank, int cls,
    size_t len, uint64_t deadline, uint8_t **dst);
int rk__cl_stage_frame(rk_cluster *cl, int rank, int cls,
    const rk__cl_frame *f, const void *payload, int64_t timeout_ns);
int rk__cl_stage_bytes(
    rk_cluster *cl, int rank, const uint8_t *bytes, size_t len, uint32_t n);

/* mpi_proxy.c: the cluster's kernels (joining thread, then the progress
 * thread). */
int rk__cl_start_kernel(rk_cluster *cl, const char *id, rk_actor_fn fn,
    rk_handler_fn call, void *user, const rk__cl_dir_export *e);
int rk__cl_proxy_start(
    rk_cluster *cl, int r, uint32_t i, const rk__cl_dir_export *e, bool bare);
int rk__cl_topic_proxy_start(rk_cluster *cl, int r, const rk__cl_dir_topic *t);

/* mpi_ingress.c: BLOCK exports' ingress threads. */
void *rk__cl_ingress_main(void *arg);
int rk__cl_ingress_hand(cl_export *e, int src, const rk__cl_frame *f);

/* mpi_send.c: the progress thread's sends. */
void rk__cl_reply_out(rk_cluster *cl, int rank, uint32_t proxy,
    const rk_msg_header *h, const void *payload, size_t len);
void rk__cl_send_error(rk_cluster *cl, int src, const rk__cl_frame *f, int rc);
void rk__cl_peer_down(rk_cluster *cl, int rank, int state);
void rk__cl_sendbuf_reap(rk_cluster *cl);
bool rk__cl_flush(rk_cluster *cl, cl_peer *p, uint16_t flags, uint64_t now);
bool rk__cl_pump(rk_cluster *cl, cl_peer *p, uint64_t now);

/* mpi_recv.c: the progress thread's receives. */
bool rk__cl_poll_recv(rk_cluster *cl, uint64_t now);
bool rk__cl_retry_held(rk_cluster *cl, int src);

/* mpi_progress.c: the progress thread, and stopping it. */
void *rk__cl_progress_main(void *arg);
uint32_t rk__cl_idmap_size(cl_idmap *m);
void rk__cl_stop(rk_cluster *cl);

/* mpi_request.c */
bool rk__cl_waiter_answer(
    rk_cluster *cl, uint32_t i, const rk__cl_frame *f, int rc, int rank);
int rk__cl_request_call(rk_cluster *cl, const cl_proxy *px,
    const rk_msg_header *h, const void *req, size_t len, uint64_t deadline,
    rk_msg_header *reply_hdr, void *reply, size_t cap, size_t *reply_len);

/* mpi_handle.c: drops a reference to the handle (the last one frees
 * it). */
void rk__cl_unref(rk_cluster *cl);

/* mpi_error.c: an MPI error code as RK_EINTERNAL with MPI's words for it. */
int rk__cl_mpi_fail(int mrc, const char *what);

/* mpi_join.c: exports (at the join, and rk_cluster_announce's). */
int rk__cl_export_fill(
    rk_cluster *cl, cl_export *e, const rk_cluster_export *x);
void rk__cl_export_locks_init(cl_export *e);
int rk__cl_export_start(cl_export *e);
bool rk__cl_export_by_default(const char *id);

#endif /* RK_SRC_CLUSTER_CLUSTER_INT_H */
