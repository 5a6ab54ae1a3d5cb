/*
 * src/cluster/cluster_mpi.c - ringkernel across MPI ranks (design in
 * docs/cluster.md).
 *
 * Who does what:
 *   - proxies: one local actor kernel per remote kernel ("R/id", and "id"
 *     when no local kernel has the name) and per remote topic member
 *     ("R/#topic"). A proxy forwards each message it receives as a frame
 *     into its peer's staging buffer, and puts replies the progress
 *     thread injects (flag RK__CL_F_INJECT) out on its own output queue
 *     with rk_ctx_reply, so rk_request on the proxy sees them.
 *   - ingress threads: one per exported BLOCK kernel; they send, with a
 *     wait, the frames the progress thread could not put in at once.
 *   - the progress thread: the only thread that calls MPI after the join.
 *     It reads the output of exported kernels (drain_poll: a reply to a
 *     peer's request goes back to that peer, anything else to the local
 *     mailbox read with rk_cluster_recv), moves staged frames into
 *     per-peer batches (within the peer's
 *     credits), sends them with MPI_Isend, receives with persistent
 *     MPI_Recv_init requests, delivers frames to local kernels (holding
 *     them while a BLOCK kernel is full), returns credits, sends
 *     heartbeats, declares silent peers dead, and runs the goodbye.
 *   - the control kernel "rk.cluster": an actor that only waits; when
 *     rk_runtime_destroy terminates it, it stops the threads above, so
 *     nothing outlives the runtime.
 *
 * Locks: each peer's lock guards its staging buffers; a mailbox lock per
 * export; one lock per id map; wake_lock pairs the progress thread's
 * sleep with producers' wake-ups; a lock per rk_cluster_request slot;
 * export_lock serialises adding exports after the join. No lock is held
 * while calling the runtime or MPI, and no two of these are ever held
 * together, except stop_lock (cluster_stop) then export_lock.
 */
#include "ringkernel/cluster.h"

#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster/wire.h"
#include "common/common.h"
#include "runtime/ids.h"

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
/* While a thread waits for its answer by polling MPI itself
 * (request_by_mpi), an idle progress thread naps this long between
 * rounds instead of polling: the two would share the rank's core. */
#ifndef CL_DRIVEN_NAP_NS
#define CL_DRIVEN_NAP_NS 200000
#endif
/* The progress thread's polling yields the CPU every this many idle
 * rounds. */
#ifndef CL_POLL_YIELD
#define CL_POLL_YIELD 8
#endif
/* An idle polling round ends with this many tests of the receives
 * alone: a whole round (every export's output, every peer) takes a few
 * hundred ns, a test tens, and a batch that comes is seen at the next
 * test. */
#ifndef CL_HOT_POLLS
#define CL_HOT_POLLS 4
#endif
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

static int
buf_append(cl_buf *b, size_t n, uint8_t **where)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        uint8_t *p;

        while (cap < b->len + n)
            cap *= 2;
        if ((p = realloc(b->p, cap)) == NULL)
            return rk__fail(RK_ENOMEM, "cluster: staging buffer of %zu", cap);
        b->p = p;
        b->cap = cap;
    }
    *where = b->p + b->len;
    b->len += n;
    return RK_OK;
}

static void
buf_reset(cl_buf *b)
{
    b->len = b->off = 0;
}

static void
buf_swap(cl_buf *a, cl_buf *b)
{
    cl_buf t = *a;
    *a = *b;
    *b = t;
}

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
} cl_idmap;

/* The ids of one thread differ only in a few bytes (the runtime numbers
 * a block of v7 ids in their low 32 bits): mix all 128 bits (the
 * murmur3 finaliser) so that they spread over every bucket. */
static uint32_t
id_hash(const rk_uuid *u)
{
    uint64_t a, b, x;

    memcpy(&a, u->b, 8);
    memcpy(&b, u->b + 8, 8);
    x = a ^ (b * 0x9E3779B97F4A7C15ull);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (uint32_t)x & (CL_IDMAP - 1);
}

static int
idmap_init(cl_idmap *m)
{
    pthread_mutex_init(&m->lock, NULL);
    m->ent = calloc(CL_IDMAP, sizeof(*m->ent));
    m->bucket = malloc(CL_IDMAP * sizeof(*m->bucket));
    if (m->ent == NULL || m->bucket == NULL)
        return rk__fail(RK_ENOMEM, "cluster: id map");
    memset(m->bucket, 0xff, CL_IDMAP * sizeof(*m->bucket));
    return RK_OK;
}

static void
idmap_free(cl_idmap *m)
{
    free(m->ent);
    free(m->bucket);
    pthread_mutex_destroy(&m->lock);
}

static void
idmap_unlink(cl_idmap *m, int32_t i)
{
    int32_t *pp = &m->bucket[id_hash(&m->ent[i].id)];

    while (*pp != -1 && *pp != i)
        pp = &m->ent[*pp].next;
    if (*pp == i)
        *pp = m->ent[i].next;
    m->ent[i].used = false;
}

static void
idmap_put(
    cl_idmap *m, const rk_uuid *id, int rank, uint32_t proxy, uint8_t prio)
{
    int32_t i;
    uint32_t h = id_hash(id);

    pthread_mutex_lock(&m->lock);
    i = (int32_t)m->head;
    m->head = (m->head + 1) & (CL_IDMAP - 1);
    if (m->ent[i].used)
        idmap_unlink(m, i);
    m->ent[i] = (cl_ident) { *id, rank, proxy, m->bucket[h], prio, true };
    m->bucket[h] = i;
    pthread_mutex_unlock(&m->lock);
}

static bool
idmap_take(cl_idmap *m, const rk_uuid *id, int *rank, uint32_t *proxy)
{
    int32_t i;

    pthread_mutex_lock(&m->lock);
    for (i = m->bucket[id_hash(id)]; i != -1; i = m->ent[i].next)
        if (memcmp(m->ent[i].id.b, id->b, 16) == 0)
            break;
    if (i != -1) {
        if (rank != NULL)
            *rank = m->ent[i].rank;
        if (proxy != NULL)
            *proxy = m->ent[i].proxy;
        idmap_unlink(m, i);
    }
    pthread_mutex_unlock(&m->lock);
    return i != -1;
}

/* Takes every entry of rank (and of proxy, unless UINT32_MAX) in one
 * pass; *n of them in a malloc'd array the caller frees (NULL when none,
 * or out of memory: then dropped). */
static cl_ident *
idmap_take_proxy(cl_idmap *m, int rank, uint32_t proxy, size_t *n)
{
    cl_ident *out = NULL;
    size_t cnt = 0, cap = 0;

    pthread_mutex_lock(&m->lock);
    for (int32_t i = 0; i < CL_IDMAP; i++) {
        if (!m->ent[i].used || m->ent[i].rank != rank
            || (proxy != UINT32_MAX && m->ent[i].proxy != proxy))
            continue;
        if (cnt == cap) {
            cl_ident *grown;
            cap = cap ? cap * 2 : 64;
            if ((grown = realloc(out, cap * sizeof(*out))) == NULL)
                cap = cnt; /* keep what we have; the rest is dropped */
            else
                out = grown;
        }
        if (cnt < cap)
            out[cnt++] = m->ent[i];
        idmap_unlink(m, i);
    }
    pthread_mutex_unlock(&m->lock);
    *n = cnt;
    return out;
}

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
 * fills it and sets state WAITING under lock; the progress thread answers
 * (copies the reply into the caller's buffers, sets DONE, signals) under
 * lock only while the state is WAITING and the id matches, so a caller
 * that gave up (state back to FREE, under lock) is never written to. */
enum { W_FREE = 0, W_WAITING, W_DONE };

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
    pthread_mutex_t stop_lock; /* serialises cluster_stop */
    bool stop_done;
    bool leaving; /* rk_cluster_leave is running (control kernel) */
    bool clean;   /* every peer said goodbye */

    pthread_mutex_t wake_lock;
    pthread_cond_t wake;
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
            late_replies;
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

static void cluster_free(rk_cluster *cl);

/* Condition variables here wait with CLOCK_MONOTONIC deadlines (the
 * clock rk_now_ns reads). */
static void
cond_init_mono(pthread_cond_t *c)
{
    pthread_condattr_t a;

    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
}
static void cluster_stop(rk_cluster *cl);
struct rk__cl_dir_export;
static int proxy_start(rk_cluster *cl, int r, uint32_t i,
    const struct rk__cl_dir_export *e, bool bare);

static void
unref(rk_cluster *cl)
{
    /* acq_rel: the last one out sees every other user's writes. */
    if (atomic_fetch_sub_explicit(&cl->refs, 1, memory_order_acq_rel) == 1)
        cluster_free(cl);
}

static int
mpi_fail(int mrc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int n = 0;

    if (MPI_Error_string(mrc, msg, &n) != MPI_SUCCESS)
        snprintf(msg, sizeof(msg), "MPI error %d", mrc);
    return rk__fail(RK_EINTERNAL, "cluster: %s failed: %s", what, msg);
}

/* Wakes the progress thread if it sleeps. The seq_cst store of work and
 * load of sleeping pair with the progress thread's seq_cst store of
 * sleeping and load of work (a Dekker handshake: one of the two sees the
 * other). */
static void
wake_progress(rk_cluster *cl)
{
    atomic_store(&cl->work, 1);
    if (atomic_load(&cl->sleeping)) {
        pthread_mutex_lock(&cl->wake_lock);
        pthread_cond_signal(&cl->wake);
        pthread_mutex_unlock(&cl->wake_lock);
    }
}

static void
frame_from_header(rk__cl_frame *f, const rk_msg_header *h, size_t len)
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

/* Appends a frame to peer's staging class cls. Class 0 waits (up to the
 * timeout) while the stage is over its limit: a slow peer slows its
 * proxies, whose own queues then apply their backpressure. */
static int
stage_reserve(rk_cluster *cl, cl_peer *p, int rank, int cls, size_t len,
    uint64_t deadline, uint8_t **dst)
{
    while (cls == 0 && p->stage[0].len >= cl->stage_limit
        && atomic_load(&p->state) == PEER_LIVE && !atomic_load(&cl->stopped)) {
        struct timespec ts;
        uint64_t now = rk_now_ns(), t;

        if (now >= deadline)
            return rk__fail(
                RK_ETIMEDOUT, "cluster: rank %d is not keeping up", rank);
        t = deadline - now < 10000000 ? deadline : now + 10000000;
        ts.tv_sec = (time_t)(t / 1000000000u);
        ts.tv_nsec = (long)(t % 1000000000u);
        pthread_cond_timedwait(&p->room, &p->lock, &ts);
    }
    if (atomic_load(&p->state) != PEER_LIVE || atomic_load(&cl->stopped))
        return rk__fail(RK_EUNREACHABLE, "cluster: rank %d is %s", rank,
            atomic_load(&p->state) == PEER_DEAD ? "dead" : "gone");
    atomic_fetch_or_explicit(&p->staged, 1u << cls, memory_order_relaxed);
    return buf_append(&p->stage[cls], len, dst);
}

static int
stage_frame(rk_cluster *cl, int rank, int cls, const rk__cl_frame *f,
    const void *payload, int64_t timeout_ns)
{
    cl_peer *p = &cl->peers[rank];
    uint8_t *dst = NULL;
    int rc;

    pthread_mutex_lock(&p->lock);
    rc = stage_reserve(cl, p, rank, cls, rk__cl_frame_size(f->len),
        rk__deadline(timeout_ns), &dst);
    if (rc == RK_OK) {
        rk__cl_frame_write(dst, f, payload);
        if (cls == 0)
            atomic_fetch_add_explicit(&p->unsent, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&p->lock);
    if (rc == RK_OK)
        wake_progress(cl);
    return rc;
}

/* Appends frames already encoded (a proxy's run) under one lock. */
static int
stage_bytes(
    rk_cluster *cl, int rank, const uint8_t *bytes, size_t len, uint32_t n)
{
    cl_peer *p = &cl->peers[rank];
    uint8_t *dst = NULL;
    int rc;

    pthread_mutex_lock(&p->lock);
    rc = stage_reserve(cl, p, rank, 0, len, UINT64_MAX, &dst);
    if (rc == RK_OK) {
        memcpy(dst, bytes, len);
        atomic_fetch_add_explicit(&p->unsent, n, memory_order_relaxed);
    }
    pthread_mutex_unlock(&p->lock);
    if (rc == RK_OK)
        wake_progress(cl);
    return rc;
}

/* ------------------------------------------------------------ proxies */

/* What became of a rank that is no longer live, for error details. */
static const char *
peer_fate(rk_cluster *cl, int rank)
{
    return atomic_load(&cl->peers[rank].state) == PEER_GONE
        ? "left the cluster"
        : "died";
}

static int
proxy_error_reply(rk_ctx *ctx, const rk_msg_header *req, int err)
{
    rk_msg_view v = { req, NULL, 0 };
    cl_proxy *px = rk_ctx_user(ctx);
    char why[160];

    if (err == RK_EUNREACHABLE)
        snprintf(why, sizeof(why), "kernel '%s': rank %d %s", px->id, px->rank,
            peer_fate(px->cl, px->rank));
    else
        snprintf(
            why, sizeof(why), "kernel '%s': %s", px->id, rk_strerror(err));
    return rk_ctx_reply_error(ctx, &v, err, why);
}

/* The peer of px died or left: every request it forwarded and that was
 * not answered fails with RK_EUNREACHABLE (once, on the proxy's thread,
 * so nothing it forwards later is missed: later frames fail in
 * proxy_flush). */
static void
proxy_fail_pending(rk_ctx *ctx, cl_proxy *px)
{
    size_t n = 0;
    cl_ident *lost = idmap_take_proxy(&px->cl->fwd, px->rank, px->index, &n);

    for (size_t i = 0; i < n; i++) {
        rk_msg_header h;

        STAT(px->cl, unreachable, 1);
        memset(&h, 0, sizeof(h));
        h.message_id = lost[i].id;
        h.priority = lost[i].priority;
        proxy_error_reply(ctx, &h, RK_EUNREACHABLE);
    }
    free(lost);
}

/* Hands a proxy's run of frames to its peer; on failure each message
 * gets its error reply. */
static void
proxy_flush(rk_ctx *ctx, cl_proxy *px, cl_buf *run, uint32_t n)
{
    rk_cluster *cl = px->cl;
    int rc;

    if (n == 0)
        return;
    rc = stage_bytes(cl, px->rank, run->p, run->len, n);
    if (rc == RK_OK) {
        STAT(cl, forwarded, n);
    } else {
        rk__cl_frame f;
        size_t off = 0;

        while (rk__cl_frame_next(run->p, run->len, &off, &f) == RK_OK) {
            rk_msg_header h;

            STAT(cl, unreachable, 1);
            if (px->topic || !(f.flags & RK_MSG_F_REQUEST))
                continue; /* nobody waits for an answer */
            idmap_take(&cl->fwd, &f.id, NULL, NULL);
            memset(&h, 0, sizeof(h));
            h.message_id = f.id;
            h.priority = f.priority;
            proxy_error_reply(ctx, &h, rc);
        }
    }
    buf_reset(run);
}

/* A proxy takes what is queued for it (up to 256 messages or 16 KiB)
 * before handing it over under one lock, and waits only when it has
 * nothing left to hand over. */
static int
proxy_actor(rk_ctx *ctx)
{
    cl_proxy *px = rk_ctx_user(ctx);
    rk_cluster *cl = px->cl;
    cl_buf run = { 0 };
    uint32_t n = 0;
    bool failed = false;
    rk_msg_view m;

    for (;;) {
        int rc = rk_ctx_recv(ctx, &m, n != 0 ? RK_NO_WAIT : 100 * 1000000);

        bool poke = rc == RK_OK && m.hdr->type_id == RK_CLUSTER_TYPE_INJECT
            && (m.hdr->flags & RK__CL_F_INJECT);

        /* A poke: the progress thread is taking the peer down and sets
         * its state in a moment (peer_down). */
        while (poke && atomic_load(&cl->peers[px->rank].state) == PEER_LIVE)
            sched_yield();
        if (!failed && atomic_load(&cl->peers[px->rank].state) != PEER_LIVE) {
            /* The run first: frames that went in before the peer went
             * down are still in the id map; later ones fail here. */
            proxy_flush(ctx, px, &run, n);
            n = 0;
            proxy_fail_pending(ctx, px);
            failed = true;
        }
        if (poke)
            continue;
        if (rc == RK_OK && (m.hdr->flags & RK__CL_F_INJECT)) {
            /* A reply (or an error) from the owning rank: put it out as
             * the answer to the message whose id it correlates. */
            rk_msg_header req = *m.hdr;
            rk_msg_view v = { &req, NULL, 0 };

            req.message_id = m.hdr->correlation_id;
            rk_ctx_reply(ctx, &v, m.hdr->type_id, m.data, m.len);
            continue;
        }
        if (rc == RK_OK && (m.hdr->flags & RK__CL_F_REMOTE))
            continue; /* a publish that came from a peer: not back out */
        if (rc == RK_OK) {
            rk__cl_frame f;
            uint8_t *dst = NULL;

            frame_from_header(&f, m.hdr, m.len);
            f.kind = px->topic ? RK__CL_TOPIC : RK__CL_DATA;
            f.target = px->target;
            f.aux = (int32_t)px->index;
            if (buf_append(&run, rk__cl_frame_size(f.len), &dst) != RK_OK) {
                STAT(cl, unreachable, 1);
                if (!px->topic && (m.hdr->flags & RK_MSG_F_REQUEST))
                    proxy_error_reply(ctx, m.hdr, RK_ENOMEM);
                continue;
            }
            rk__cl_frame_write(dst, &f, m.data);
            if (!px->topic && (m.hdr->flags & RK_MSG_F_REQUEST))
                idmap_put(&cl->fwd, &f.id, px->rank, px->index, f.priority);
            if (++n < 1024 && run.len < 65536)
                continue;
        }
        proxy_flush(ctx, px, &run, n);
        n = 0;
        if (rc != RK_OK && rc != RK_ETIMEDOUT)
            break;
    }
    free(run.p);
    if (!atomic_exchange(&px->exited, true))
        unref(cl);
    return RK_OK;
}

static int
control_actor(rk_ctx *ctx)
{
    rk_cluster *cl = rk_ctx_user(ctx);
    rk_msg_view m;
    bool leaving;

    while (!rk_should_terminate(ctx)) {
        int rc = rk_ctx_recv(ctx, &m, 1000 * 1000000);
        if (rc != RK_OK && rc != RK_ETIMEDOUT)
            break;
    }
    cluster_stop(cl);
    pthread_mutex_lock(&cl->stop_lock);
    leaving = cl->leaving;
    pthread_mutex_unlock(&cl->stop_lock);
    if (!leaving)
        unref(cl); /* rk_runtime_destroy without leave: the handle's ref */
    unref(cl);
    return RK_OK;
}

/* ------------------------------------------------------------- drains */

/* Puts an output in e's mailbox (progress thread; the caller saw room:
 * only this thread adds). */
static void
mail_put(cl_export *e, const rk_msg_header *h, const void *data, size_t len)
{
    cl_mail *slot;
    uint8_t *copy = malloc(len ? len : 1);

    if (copy == NULL)
        return;
    memcpy(copy, data, len);
    pthread_mutex_lock(&e->lock);
    slot = &e->mail[(e->mhead + e->mcount) % CL_MAILBOX];
    slot->hdr = *h;
    slot->len = len;
    slot->data = copy;
    e->mcount++;
    atomic_store_explicit(&e->mfill, e->mcount, memory_order_relaxed);
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

static cl_sendbuf *sendbuf(rk_cluster *cl, cl_peer *p);
static bool waiter_answer(
    rk_cluster *cl, uint32_t i, const rk__cl_frame *f, int rc, int rank);
static cl_export *export_named(rk_cluster *cl, const char *id);
static bool flush(rk_cluster *cl, cl_peer *p, uint16_t flags, uint64_t now);
static void peer_down(rk_cluster *cl, int rank, int state);

/* Sends answer f (a REPLY to a request its sender sent itself, CL_BYMPI)
 * as a batch of its own on rcomm, tagged with the waiting slot, where the
 * requesting thread receives it (rk_cluster_request). It uses the peer's
 * send buffers (an open batch goes out first, on comm). False if none is
 * free or the answer does not fit one or the requester's receive
 * (CL_CALL_MAX): the caller stages it then, and the
 * peer's progress thread hands it over (the waiter looks at both).
 * Progress thread. */
static bool
answer_by_mpi(rk_cluster *cl, int rank, rk__cl_frame *f, const void *payload)
{
    cl_peer *p = &cl->peers[rank];
    size_t size = RK__CL_BATCH_HDR + rk__cl_frame_size(f->len);
    cl_sendbuf *b;
    int mrc;

    /* The requester's receive holds CL_CALL_MAX bytes. */
    if (atomic_load(&p->state) != PEER_LIVE || size > cl->batch_bytes
        || size > CL_CALL_MAX || (b = sendbuf(cl, p)) == NULL)
        return false;
    if (b->nframes != 0
        && (!flush(cl, p, 0, rk_now_ns()) || (b = sendbuf(cl, p)) == NULL))
        return false;
    rk__cl_batch_write(b->p, 0, 1, 0);
    rk__cl_frame_write(b->p + RK__CL_BATCH_HDR, f, payload);
    mrc = MPI_Isend(b->p, (int)size, MPI_BYTE, rank,
        (int)(f->target & CL_SLOT_MASK), cl->rcomm, &b->req);
    if (mrc != MPI_SUCCESS) {
        peer_down(cl, rank, PEER_DEAD);
        return false;
    }
    PSTAT(cl, sent_batches, 1);
    PSTAT(cl, sent_frames, 1);
    b->len = 0;
    p->cur = (p->cur + 1) % CL_NSEND;
    return true;
}

/* Sends kernel output h (its payload, len bytes), a reply to a request
 * from rank, back there: to the waiting thread's receive (proxy has
 * CL_BYMPI: a slot of rk_cluster_request) or staged for rank's progress
 * thread (a slot or a proxy). Progress thread. */
static void
reply_out(rk_cluster *cl, int rank, uint32_t proxy, const rk_msg_header *h,
    const void *payload, size_t len)
{
    rk__cl_frame f;

    frame_from_header(&f, h, len);
    f.kind = RK__CL_REPLY;
    f.target = proxy;
    if (rank == cl->rank) {
        /* A request of this rank's own (request_local): to its slot. */
        f.payload = payload;
        if (!waiter_answer(cl, proxy & CL_SLOT_MASK, &f, RK_OK, rank))
            PSTAT(cl, late_replies, 1);
        return;
    }
    if (((proxy & CL_BYMPI) && answer_by_mpi(cl, rank, &f, payload))
        || stage_frame(cl, rank, 1, &f, payload, RK_NO_WAIT) == RK_OK)
        PSTAT(cl, replies_sent, 1);
}

/* Takes what e's kernel put out, without waiting (progress thread, which
 * polls while it is active and at each idle wake-up): a reply to a
 * request from a peer goes back to it, anything else to the mailbox
 * (rk_cluster_recv) while it has room; a full mailbox leaves the output
 * queued, so the kernel feels it. No thread of its own: the round trip
 * saves a hand-off. True if it took anything. */
static bool
drain_poll(rk_cluster *cl, cl_export *e)
{
    rk_msg_header h;
    size_t len;
    int rc = RK_OK;
    bool did = false;

    for (int i = 0; i < 64 && e->obuf != NULL; i++) {
        int rank;
        uint32_t proxy;

        if (atomic_load_explicit(&e->mfill, memory_order_relaxed)
            >= CL_MAILBOX)
            break;
        if (!e->k_ok) {
            if (rk_kernel_lookup(cl->rt, e->id, &e->k) != RK_OK)
                break;
            e->k_ok = true;
        }
        rc = rk_recv(cl->rt, e->k, &h, e->obuf, e->ocap, &len, RK_NO_WAIT);
        if (rc == RK_ESTALE)
            e->k_ok = false;
        if (rc == RK_EMSGSIZE && len > e->ocap) {
            /* Bigger than the export said: the output stays first in
             * line; take it with a buffer that fits. */
            uint8_t *grown = realloc(e->obuf, len);
            if (grown == NULL)
                break;
            e->obuf = grown;
            e->ocap = len;
            i--;
            continue;
        }
        if (rc != RK_OK)
            break;
        did = true;
        if (!rk_uuid_is_nil(&h.correlation_id)
            && idmap_take(&cl->served, &h.correlation_id, &rank, &proxy)) {
            reply_out(cl, rank, proxy, &h, e->obuf, len);
            continue;
        }
        mail_put(e, &h, e->obuf, len);
    }
    return did;
}

/* Tells src that the message of frame f was refused with rc. */
static void
send_error(rk_cluster *cl, int src, const rk__cl_frame *f, int rc)
{
    rk__cl_frame err;

    memset(&err, 0, sizeof(err));
    err.kind = RK__CL_ERROR;
    err.priority = f->priority;
    err.target = (uint32_t)f->aux;
    err.aux = rc;
    err.corr = f->id;
    err.id = rk__next_id();
    stage_frame(cl, src, 1, &err, NULL, RK_NO_WAIT);
}

static rk_msg_header
frame_header(const rk__cl_frame *f)
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

/* The ingress thread of a BLOCK export: sends what the progress thread
 * handed over, waiting while the kernel is full (in steps of a second, so
 * that a leave is never stuck behind a kernel that stopped taking input;
 * a step that expires is not counted by the kernel: rk_send_frame_try).
 * A frame given up at a leave or a peer's death is counted rejected by
 * the cluster and answered with an error. */
static void
ingress_one(rk_cluster *cl, cl_export *e, int src, const rk__cl_frame *f)
{
    rk_msg_header h = frame_header(f);
    bool serve = !e->cfg.local_output && (f->flags & RK_MSG_F_REQUEST);
    rk_kernel k;
    int rc;

    STAT(cl, delivered, 1); /* first: see deliver(); undone below */
    for (;;) {
        if ((rc = rk_kernel_lookup(cl->rt, e->id, &k)) != RK_OK)
            break;
        if (serve)
            idmap_put(&cl->served, &f->id, src, (uint32_t)f->aux, f->priority);
        rc = rk_send_frame_try(
            cl->rt, k, &h, f->payload, f->len, 1000 * 1000000);
        if (rc != RK_OK && serve)
            idmap_take(&cl->served, &f->id, NULL, NULL);
        if (rc != RK_ETIMEDOUT || atomic_load(&cl->drain_stop)
            || atomic_load(&cl->peers[src].state) != PEER_LIVE)
            break;
    }
    if (rc != RK_OK) {
        STAT(cl, delivered, (uint64_t)-1);
        STAT(cl, rejected, 1);
        send_error(cl, src, f, rc);
    }
    if (f->kind == RK__CL_DATA) /* a CALL took no credit */
        atomic_fetch_add(&cl->peers[src].owed_async, 1);
    wake_progress(cl);
}

static void *
ingress_main(void *arg)
{
    cl_export *e = arg;
    rk_cluster *cl = e->cl;
    cl_buf work = { 0 };

    for (;;) {
        pthread_mutex_lock(&e->lock);
        while (e->in.len == 0 && !atomic_load(&cl->drain_stop))
            pthread_cond_wait(&e->cond, &e->lock);
        if (e->in.len == 0) {
            pthread_mutex_unlock(&e->lock);
            break;
        }
        buf_swap(&e->in, &work);
        pthread_mutex_unlock(&e->lock);
        uint32_t done = 0;
        for (size_t off = 0; off + 4 <= work.len; done++) {
            int src = (int)rk__cl_get32(work.p + off);
            size_t at = off + 4;
            rk__cl_frame f;

            if (rk__cl_frame_next(work.p, work.len, &at, &f) != RK_OK)
                break; /* cannot happen: the progress thread wrote it */
            if (src >= 0 && src < cl->size)
                ingress_one(cl, e, src, &f);
            off = at;
        }
        /* Release: the progress thread that sees none pending sees these
         * sends done (it then sends directly, after them). */
        atomic_fetch_sub_explicit(&e->in_pending, done, memory_order_release);
        buf_reset(&work);
    }
    free(work.p);
    return NULL;
}

/* rk_send_frame_try without waiting, to a kernel by a cached handle:
 * looked up once, and again when the handle went stale (a relaunch). A
 * BLOCK kernel that is full returns RK_EFULL uncounted, since the frame
 * is then held or handed to the ingress thread, not lost. Progress
 * thread. */
static int
send_cached(rk_cluster *cl, const char *id, rk_kernel *k, bool *ok,
    const rk_msg_header *h, const void *data, size_t len)
{
    int rc;

    for (int tries = 0; tries < 2; tries++) {
        if (!*ok) {
            if ((rc = rk_kernel_lookup(cl->rt, id, k)) != RK_OK)
                return rc;
            *ok = true;
        }
        rc = rk_send_frame_try(cl->rt, *k, h, data, len, RK_NO_WAIT);
        if (rc != RK_ESTALE)
            return rc;
        *ok = false;
    }
    return rc;
}

/* Answers waiting slot i: with reply frame f (rc RK_OK), or with error
 * rc (f NULL: every waiter on rank, else the one f's correlation id
 * names). True if a waiter took it. Progress thread. */
static bool
waiter_answer(
    rk_cluster *cl, uint32_t i, const rk__cl_frame *f, int rc, int rank)
{
    cl_waiter *w = &cl->wait[i];
    bool took = false;

    if (i >= CL_NWAIT
        || atomic_load_explicit(&w->state, memory_order_relaxed) != W_WAITING)
        return false;
    pthread_mutex_lock(&w->lock);
    if (atomic_load_explicit(&w->state, memory_order_relaxed) == W_WAITING
        && (f != NULL ? memcmp(w->id.b, f->corr.b, 16) == 0
                      : w->rank == rank)) {
        w->rc = rc;
        if (f != NULL && rc == RK_OK) {
            w->len = f->len;
            if (f->len > w->cap)
                w->rc = RK_EMSGSIZE;
            else if (f->len != 0)
                memcpy(w->buf, f->payload, f->len);
            if (w->hdr != NULL) {
                *w->hdr = frame_header(f);
                w->hdr->payload_len = f->len;
                w->hdr->send_ns = f->send_ns;
            }
        }
        /* Release: the caller that sees DONE sees the reply. */
        atomic_store_explicit(&w->state, W_DONE, memory_order_release);
        if (w->sleeping)
            pthread_cond_signal(&w->cond);
        took = true;
    }
    pthread_mutex_unlock(&w->lock);
    return took;
}

/* ------------------------------------------------------ progress: send */

static uint64_t
ns_since(uint64_t then, uint64_t now)
{
    return now > then ? now - then : 0;
}

/* Declares a peer dead (or gone) and fails what waits on it (progress
 * thread only). */
static void
peer_down(rk_cluster *cl, int rank, int state)
{
    cl_peer *p = &cl->peers[rank];
    size_t n = 0;
    char why[96];

    if (atomic_load(&p->state) != PEER_LIVE)
        return;
    /* Its proxies are poked (to look at the state at once), then refuse
     * every later send with RK_EUNREACHABLE; once the state says so, each
     * fails the requests it forwarded that were not answered. In this
     * order a request is either refused or was admitted before and is
     * failed by its proxy. A proxy whose queue had no room for the poke
     * is busy and looks at the state after each message (and every
     * 100 ms when idle). */
    for (size_t i = 0; i < cl->n_proxies; i++) {
        rk_msg_header h;
        rk_kernel k;

        if (cl->proxies[i].rank != rank
            || rk_kernel_lookup(cl->rt, cl->proxies[i].id, &k) != RK_OK)
            continue;
        memset(&h, 0, sizeof(h));
        h.type_id = RK_CLUSTER_TYPE_INJECT;
        h.flags = RK__CL_F_INJECT;
        (void)rk_send_frame(cl->rt, k, &h, NULL, 0, RK_NO_WAIT);
    }
    snprintf(why, sizeof(why), "rank %d %s", rank,
        state == PEER_DEAD ? "died" : "left the cluster");
    for (size_t i = 0; i < cl->n_proxies; i++)
        if (cl->proxies[i].rank == rank)
            rk_kernel_refuse(cl->rt, cl->proxies[i].id, RK_EUNREACHABLE, why);
    atomic_store(&p->state, state);
    pthread_mutex_lock(&p->lock);
    buf_reset(&p->stage[0]);
    buf_reset(&p->stage[1]);
    pthread_cond_broadcast(&p->room);
    pthread_mutex_unlock(&p->lock);
    buf_reset(&p->backlog[0]);
    buf_reset(&p->backlog[1]);
    buf_reset(&p->held);
    /* Replies owed to it can no longer be sent. */
    free(idmap_take_proxy(&cl->served, rank, UINT32_MAX, &n));
    /* Direct requests waiting on it fail (those staged after this see the
     * state and fail in stage_reserve). */
    for (int i = 0; i < CL_NWAIT; i++)
        waiter_answer(cl, (uint32_t)i, NULL, RK_EUNREACHABLE, rank);
}

/* True once the last send of p's next send buffer has completed (its
 * request is then MPI_REQUEST_NULL); a failed test declares p dead. */
static bool
sendbuf_free(rk_cluster *cl, cl_peer *p)
{
    cl_sendbuf *b = &p->sb[p->cur];
    int done = 0;

    if (b->req == MPI_REQUEST_NULL)
        return true;
    if (MPI_Test(&b->req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        peer_down(cl, (int)(p - cl->peers), PEER_DEAD);
        return false;
    }
    return done != 0;
}

/* The send buffer to fill next, or NULL while all are in flight. */
static cl_sendbuf *
sendbuf(rk_cluster *cl, cl_peer *p)
{
    cl_sendbuf *b = &p->sb[p->cur];

    if (!sendbuf_free(cl, p))
        return NULL;
    /* Allocated on first use: a peer this rank never sends to costs no
     * send buffers (out of memory: tried again next time). */
    if (b->p == NULL) {
        if ((b->p = malloc(cl->batch_bytes)) == NULL)
            return NULL;
        CL_MPI_BUFFER(b->p, cl->batch_bytes);
    }
    if (b->len == 0)
        b->len = RK__CL_BATCH_HDR;
    return b;
}

/* Completes, if it is done, each peer's next send buffer's last send
 * (an idle progress thread): an answer that goes out in it next finds it
 * free without testing it then. */
static void
sendbuf_reap(rk_cluster *cl)
{
    for (int r = 0; r < cl->size; r++)
        if (r != cl->rank && atomic_load(&cl->peers[r].state) == PEER_LIVE)
            (void)sendbuf_free(cl, &cl->peers[r]);
}

/* Sends the current buffer (with flags, and the credits owed). */
static bool
flush(rk_cluster *cl, cl_peer *p, uint16_t flags, uint64_t now)
{
    cl_sendbuf *b = sendbuf(cl, p);
    int rank = (int)(p - cl->peers);
    int mrc;

    if (b == NULL)
        return false;
    rk__cl_batch_write(b->p, flags, b->nframes, p->owed);
    mrc = MPI_Isend(
        b->p, (int)b->len, MPI_BYTE, rank, CL_TAG, cl->comm, &b->req);
    if (mrc != MPI_SUCCESS) {
        peer_down(cl, rank, PEER_DEAD);
        return false;
    }
    PSTAT(cl, sent_batches, 1);
    PSTAT(cl, sent_frames, b->nframes);
    /* Release: a thread that reads the count these bring to 0 sends after
     * this send (see cl_peer.unsent). */
    if (b->ncredited != 0)
        atomic_fetch_sub_explicit(
            &p->unsent, b->ncredited, memory_order_release);
    p->owed = 0;
    p->last_sent = now;
    b->len = 0;
    b->nframes = 0;
    b->ncredited = 0;
    p->cur = (p->cur + 1) % CL_NSEND;
    return true;
}

/* Moves staged frames into batches and sends them. True if it did
 * anything. */
static bool
pump(rk_cluster *cl, cl_peer *p, uint64_t now)
{
    bool did = false, more = false;

    if (atomic_load(&p->state) != PEER_LIVE)
        return false;
    for (int cls = 0; cls < 2; cls++) {
        if (p->backlog[cls].off == p->backlog[cls].len) {
            buf_reset(&p->backlog[cls]);
            if (!(atomic_load_explicit(&p->staged, memory_order_relaxed)
                    & (1u << cls)))
                continue;
            pthread_mutex_lock(&p->lock);
            atomic_fetch_and_explicit(
                &p->staged, ~(1u << cls), memory_order_relaxed);
            if (p->stage[cls].len != 0) {
                buf_swap(&p->stage[cls], &p->backlog[cls]);
                if (cls == 0)
                    pthread_cond_broadcast(&p->room);
            }
            pthread_mutex_unlock(&p->lock);
        }
    }
    /* Replies and errors first: they never wait for credits. */
    for (int cls = 1; cls >= 0; cls--) {
        cl_buf *bl = &p->backlog[cls];

        while (bl->off < bl->len) {
            const uint8_t *fr = bl->p + bl->off;
            size_t size = rk__cl_frame_size(rk__cl_get32(fr + 16));
            cl_sendbuf *b;

            if (cls == 0 && p->credits == 0) {
                PSTAT(cl, credit_stalls, 1);
                more = true;
                break;
            }
            if ((b = sendbuf(cl, p)) == NULL) {
                more = true;
                break;
            }
            if (b->len + size > cl->batch_bytes) {
                if (!flush(cl, p, 0, now)) {
                    more = true;
                    break;
                }
                continue;
            }
            memcpy(b->p + b->len, fr, size);
            b->len += size;
            b->nframes++;
            bl->off += size;
            if (cls == 0) {
                p->credits--;
                b->ncredited++;
            }
            did = true;
        }
    }
    /* The batch goes as soon as nothing more can join it now; frames
     * that keep coming while the buffers are in flight join it for up to
     * batch_window_ns. Owed credits go once half a window is owed, or
     * when the thread has nothing else to do; a quiet link gets a
     * heartbeat every heartbeat_ns / 4. */
    {
        cl_sendbuf *b = &p->sb[p->cur];
        uint64_t quiet = ns_since(p->last_sent, now);
        bool go = b->nframes != 0
            && (!more || quiet >= (uint64_t)cl->cfg.batch_window_ns);

        if (go || p->owed >= p->window / 2 || (p->owed != 0 && !did)
            || quiet >= (uint64_t)cl->cfg.heartbeat_ns / 4)
            did |= flush(cl, p, 0, now);
    }
    return did;
}

/* --------------------------------------------------- progress: receive */

/* Sends frame f from rank src straight into export e's kernel, without
 * waiting (send_cached). The delivered count (and the reply route, serve,
 * for a message the kernel's thread will handle) goes first, because the
 * kernel's host may read the counters as soon as the kernel has the
 * message; both are undone if the send fails. Progress thread. */
static int
send_direct(rk_cluster *cl, cl_export *e, int src, const rk__cl_frame *f,
    const rk_msg_header *h, bool serve)
{
    int rc = RK_EBUSY;

    PSTAT(cl, delivered, 1);
    if (e->direct_calls && e->k_ok) {
        /* The kernel's handler on this thread, if it is idle: no queue,
         * no wake-up. The reply it makes meanwhile goes straight back;
         * any other (too big for obuf, or made later) comes out of its
         * output queue to drain_poll, which finds the route in served:
         * only this thread reads the outputs, so the route may follow. */
        rk_call_reply r = { .buf = e->obuf, .cap = e->obuf ? e->ocap : 0 };

        rc = rk_kernel_call_reply(cl->rt, e->k, h, f->payload, f->len, &r);
        if (rc == RK_OK && serve) {
            if (r.got)
                reply_out(cl, src, (uint32_t)f->aux, &r.hdr, e->obuf, r.len);
            else
                idmap_put(
                    &cl->served, &f->id, src, (uint32_t)f->aux, f->priority);
        }
        if (rc == RK_ESTALE)
            e->k_ok = false;
        if (rc == RK_ENOTSUP) /* its backend runs no calls: queue */
            e->direct_calls = false;
    }
    if (rc == RK_EBUSY || rc == RK_ESTALE || rc == RK_ENOTSUP) {
        if (serve)
            idmap_put(&cl->served, &f->id, src, (uint32_t)f->aux, f->priority);
        rc = send_cached(cl, e->id, &e->k, &e->k_ok, h, f->payload, f->len);
        if (rc != RK_OK && serve)
            idmap_take(&cl->served, &f->id, NULL, NULL);
    }
    if (rc != RK_OK)
        PSTAT(cl, delivered, (uint64_t)-1);
    return rc;
}

/* One frame from a peer. Returns false if it must be held (a BLOCK
 * kernel is full) and tried again later. */
static bool
deliver(rk_cluster *cl, int src, const rk__cl_frame *f)
{
    cl_peer *p = &cl->peers[src];
    rk_msg_header h = frame_header(f);
    int rc;

    switch (f->kind) {
    case RK__CL_CALL:
    case RK__CL_DATA: {
        cl_export *e
            = f->target < cl->n_exports ? &cl->exports[f->target] : NULL;
        /* A CALL took no credit: none goes back for it. */
        uint32_t credit = f->kind == RK__CL_DATA;
        bool serve = e != NULL && !e->cfg.local_output
            && (f->flags & RK_MSG_F_REQUEST);

        if (e != NULL && e->cfg.backpressure == RK_BP_BLOCK) {
            /* A BLOCK kernel that is full must make the sender wait, not
             * refuse: its ingress thread sends with a wait, and the credit
             * goes back once the kernel took the message. While nothing
             * waits there, a frame the kernel takes at once goes in from
             * here (no hand-off). */
            uint8_t *dst = NULL;
            bool idle
                = atomic_load_explicit(&e->in_pending, memory_order_acquire)
                == 0;
            if (idle && e->room == 0 && !e->cfg.priority_bands) {
                /* Looked up again only when the last look is used up:
                 * a direct send that finds the queue full costs a try
                 * (uncounted) and a hand-over to the ingress thread. */
                rk_kernel_stats ks;
                uint64_t cap
                    = e->cfg.input_capacity ? e->cfg.input_capacity : 1024;
                /* Half of what looks free: slots the kernel holds while
                 * it handles a batch may not show in the depth. */
                if (rk_kernel_stats_get(cl->rt, e->id, &ks) == RK_OK
                    && ks.queue_depth < cap)
                    e->room = (cap - ks.queue_depth) / 2;
            }
            if (idle && e->room != 0) {
                e->room--;
                PSTAT(cl, received, 1); /* first, as send_direct's */
                rc = send_direct(cl, e, src, f, &h, serve);
                if (rc != RK_ETIMEDOUT && rc != RK_EFULL) {
                    p->owed += credit;
                    if (rc != RK_OK) {
                        PSTAT(cl, rejected, 1);
                        send_error(cl, src, f, rc);
                    }
                    return true;
                }
                PSTAT(cl, received, (uint64_t)-1);
            }
            pthread_mutex_lock(&e->lock);
            rc = buf_append(&e->in, 4 + rk__cl_frame_size(f->len), &dst);
            if (rc == RK_OK) {
                /* The ingress thread's sends take room too: look again
                 * once it is done. */
                e->room = 0;
                atomic_fetch_add(&e->in_pending, 1);
                rk__cl_put32(dst, (uint32_t)src);
                rk__cl_frame_write(dst + 4, f, f->payload);
                pthread_cond_broadcast(&e->cond);
            }
            pthread_mutex_unlock(&e->lock);
            if (rc == RK_OK) {
                PSTAT(cl, received, 1);
                return true;
            }
            return false; /* out of memory: try again later */
        }
        if (e == NULL) {
            rc = rk__fail(RK_ENOTFOUND, "cluster: no export %u", f->target);
        } else {
            rc = send_direct(cl, e, src, f, &h, serve);
        }
        if (rc == RK_ETIMEDOUT || rc == RK_EFULL)
            return false;
        PSTAT(cl, received, 1);
        p->owed += credit;
        if (rc == RK_OK) {
            /* counted above */
        } else if (rc == RK_EDROPPED) {
            PSTAT(cl, dropped, 1);
        } else {
            PSTAT(cl, rejected, 1);
            send_error(cl, src, f, rc);
        }
        return true;
    }
    case RK__CL_TOPIC:
        PSTAT(cl, received, 1);
        p->owed++;
        if (f->target >= cl->n_topics) {
            PSTAT(cl, rejected, 1);
            return true;
        }
        h.flags |= RK__CL_F_REMOTE;
        /* A subscriber that is full misses it: counted failed in the
         * topic's stats here, as a local publish would be. */
        (void)rk_publish_frame(cl->rt, cl->topics[f->target], &h, f->payload,
            f->len, RK_NO_WAIT, NULL);
        PSTAT(cl, delivered, 1);
        return true;
    case RK__CL_REPLY:
    case RK__CL_ERROR: {
        uint8_t le[4];
        const void *data = f->payload;
        size_t len = f->len;
        cl_proxy *px;

        if (f->target & CL_DIRECT) {
            /* The answer to an rk_cluster_request: straight to the waiting
             * host thread (counted first, as below; undone if it gave up).
             */
            bool err = f->kind == RK__CL_ERROR;
            if (err)
                PSTAT(cl, remote_errors, 1);
            else
                PSTAT(cl, replies_received, 1);
            if (!waiter_answer(cl, f->target & CL_SLOT_MASK, f,
                    err ? f->aux : RK_OK, src)) {
                if (err)
                    PSTAT(cl, remote_errors, (uint64_t)-1);
                else
                    PSTAT(cl, replies_received, (uint64_t)-1);
                PSTAT(cl, late_replies, 1);
            }
            return true;
        }
        if (f->target >= cl->n_proxies)
            return true;
        if (f->kind == RK__CL_ERROR) {
            h.type_id = RK_CLUSTER_TYPE_ERROR;
            h.flags = 0;
            rk__cl_put32(le, (uint32_t)f->aux);
            data = le;
            len = sizeof(le);
        }
        h.flags |= RK__CL_F_INJECT;
        /* Counted first: the requester may read the reply (and the
         * counters) before this thread gets back from the send. */
        if (f->kind == RK__CL_ERROR)
            PSTAT(cl, remote_errors, 1);
        else
            PSTAT(cl, replies_received, 1);
        px = &cl->proxies[f->target];
        rc = send_cached(cl, px->id, &px->k, &px->k_ok, &h, data, len);
        if (rc == RK_ENOTFOUND) {
            if (f->kind == RK__CL_ERROR)
                PSTAT(cl, remote_errors, (uint64_t)-1);
            else
                PSTAT(cl, replies_received, (uint64_t)-1);
            return true;
        }
        if (rc == RK_ETIMEDOUT || rc == RK_EFULL || rc == RK_EREJECTED) {
            if (f->kind == RK__CL_ERROR)
                PSTAT(cl, remote_errors, (uint64_t)-1);
            else
                PSTAT(cl, replies_received, (uint64_t)-1);
            return false;
        }
        idmap_take(&cl->fwd, &f->corr, NULL, NULL);
        return true;
    }
    case RK__CL_ANNOUNCE: {
        /* A kernel src exported after the join (rk_cluster_announce): its
         * proxies, as the join makes them. Without room, or if the
         * runtime refuses one, that kernel stays unreachable from here
         * (its "R/id" is missing). */
        rk__cl_dir d;
        rk__cl_dir_export e;

        if (rk__cl_dir_parse(f->payload, f->len, &d) == RK_OK
            && d.n_exports == 1 && rk__cl_dir_export_get(&d, 0, &e) == RK_OK
            && proxy_start(cl, src, f->target, &e, false) == RK_OK)
            (void)proxy_start(cl, src, f->target, &e, true);
        return true;
    }
    default:
        return true;
    }
}

/* Frames from held (oldest first) while they go in. True if any did. */
static bool
retry_held(rk_cluster *cl, int src)
{
    cl_peer *p = &cl->peers[src];
    bool did = false;

    while (p->held.off < p->held.len) {
        rk__cl_frame f;
        size_t off = p->held.off;

        if (rk__cl_frame_next(p->held.p, p->held.len, &off, &f) != RK_OK) {
            buf_reset(&p->held); /* cannot happen: we wrote them */
            break;
        }
        if (!deliver(cl, src, &f))
            break;
        p->held.off = off;
        did = true;
    }
    if (p->held.off == p->held.len)
        buf_reset(&p->held);
    return did;
}

static void
batch_in(rk_cluster *cl, int src, const uint8_t *buf, size_t len, uint64_t now)
{
    cl_peer *p = &cl->peers[src];
    rk__cl_batch b;
    rk__cl_frame f;
    size_t off = RK__CL_BATCH_HDR;
    int rc;

    if (rk__cl_batch_parse(buf, len, &b) != RK_OK)
        return; /* not ours or corrupt: nothing in it can be trusted */
    p->last_heard = now;
    p->credits += b.credits;
    if (b.flags & RK__CL_B_BYE)
        p->bye_got = true;
    if (atomic_load(&p->state) != PEER_LIVE)
        return;
    while ((rc = rk__cl_frame_next(buf, len, &off, &f)) == RK_OK) {
        size_t start = off - rk__cl_frame_size(f.len);
        uint8_t *dst = NULL;

        if (p->held.len == 0 && deliver(cl, src, &f))
            continue;
        /* Keep this frame and every later one, in order. */
        if (buf_append(&p->held, len - start, &dst) == RK_OK)
            memcpy(dst, buf + start, len - start);
        break;
    }
}

/* Receives complete in the order they were posted, and a restarted
 * persistent receive goes to the back of that order: testing only the
 * oldest one keeps every peer's batches in the order it sent them (MPI's
 * non-overtaking rule); MPI_Testsome's index order would not. */
static bool
poll_recv(rk_cluster *cl, uint64_t now)
{
    bool did = false;

    for (int k = 0; k < CL_NRECV; k++) {
        int i = cl->rnext, done = 0, count = 0, src;
        MPI_Status st;

        if (MPI_Test(&cl->rreq[i], &done, &st) != MPI_SUCCESS || !done)
            break;
        src = st.MPI_SOURCE;
        MPI_Get_count(&st, MPI_BYTE, &count);
        if (src >= 0 && src < cl->size && src != cl->rank && count > 0)
            batch_in(cl, src, cl->rbuf[i], (size_t)count, now);
        MPI_Start(&cl->rreq[i]);
        cl->rnext = (cl->rnext + 1) % CL_NRECV;
        did = true;
    }
    return did;
}

/* ------------------------------------------------------ progress: main */

static void
idle_sleep(rk_cluster *cl, int64_t ns)
{
    struct timespec ts;

    pthread_mutex_lock(&cl->wake_lock);
    atomic_store(&cl->sleeping, 1);
    if (!atomic_exchange(&cl->work, 0) && !atomic_load(&cl->stop)) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += ns;
        while (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        PSTAT(cl, idle_sleeps, 1);
        pthread_cond_timedwait(&cl->wake, &cl->wake_lock, &ts);
    }
    atomic_store(&cl->sleeping, 0);
    pthread_mutex_unlock(&cl->wake_lock);
}

static bool
all_quiet(rk_cluster *cl)
{
    for (int r = 0; r < cl->size; r++) {
        cl_peer *p = &cl->peers[r];
        if (r == cl->rank || atomic_load(&p->state) != PEER_LIVE)
            continue;
        if (!p->bye_got || p->held.len != 0)
            return false;
    }
    return true;
}

static void *
progress_main(void *arg)
{
    rk_cluster *cl = arg;
    uint64_t last_act = rk_now_ns(), leave_by = 0;
    int64_t nap = 2000;
    uint32_t idle_rounds = 0;

    for (int i = 0; i < CL_NRECV; i++)
        MPI_Start(&cl->rreq[i]);
    for (;;) {
        uint64_t now = rk_now_ns();
        bool did = poll_recv(cl, now);

        for (size_t i = 0; i < cl->n_exports; i++)
            if (!cl->exports[i].cfg.local_output)
                did |= drain_poll(cl, &cl->exports[i]);

        atomic_store_explicit(&cl->work, 0, memory_order_relaxed);
        for (int r = 0; r < cl->size; r++) {
            cl_peer *p = &cl->peers[r];

            if (r == cl->rank || atomic_load(&p->state) != PEER_LIVE)
                continue;
            if (atomic_load_explicit(&p->owed_async, memory_order_relaxed))
                p->owed += atomic_exchange(&p->owed_async, 0);
            if (p->held.len != 0)
                did |= retry_held(cl, r);
            did |= pump(cl, p, now);
            if (!p->bye_got
                && ns_since(p->last_heard, now)
                    > (uint64_t)cl->cfg.heartbeat_ns)
                peer_down(cl, r, PEER_DEAD);
        }
        if (atomic_load(&cl->stop)) {
            if (leave_by == 0)
                leave_by = now + (uint64_t)cl->cfg.leave_timeout_ns;
            for (int r = 0; r < cl->size; r++) {
                cl_peer *p = &cl->peers[r];
                bool empty;

                pthread_mutex_lock(&p->lock); /* producers append to stage */
                empty = p->backlog[0].off == p->backlog[0].len
                    && p->stage[0].len == 0;
                pthread_mutex_unlock(&p->lock);

                if (r == cl->rank || p->bye_sent
                    || atomic_load(&p->state) != PEER_LIVE)
                    continue;
                if ((empty
                        || now > leave_by
                                - (uint64_t)cl->cfg.leave_timeout_ns / 2)
                    && flush(cl, p, RK__CL_B_BYE, now))
                    p->bye_sent = true;
            }
            bool sent_all = true;
            for (int r = 0; r < cl->size; r++)
                if (r != cl->rank && !cl->peers[r].bye_sent
                    && atomic_load(&cl->peers[r].state) == PEER_LIVE)
                    sent_all = false;
            if ((sent_all && all_quiet(cl)) || now > leave_by)
                break;
        }
        if (did) {
            last_act = now;
            nap = 2000;
            continue;
        }
        if (atomic_load_explicit(&cl->driving, memory_order_relaxed) > 0) {
            idle_sleep(cl, CL_DRIVEN_NAP_NS);
            continue;
        }
        if (ns_since(last_act, now) < (uint64_t)cl->cfg.poll_ns) {
            /* Poll, yielding the CPU every few rounds (a round is a few
             * hundred ns of MPI tests): a yield per round would add a
             * system call to the time a request waits here. */
            if (++idle_rounds % CL_POLL_YIELD == 0)
                sched_yield();
            sendbuf_reap(cl);
            for (int j = 0; j < CL_HOT_POLLS; j++)
                if (poll_recv(cl, now))
                    break;
            continue;
        }
        idle_sleep(cl, nap);
        nap = nap * 2 > cl->cfg.idle_sleep_max_ns ? cl->cfg.idle_sleep_max_ns
                                                  : nap * 2;
    }
    cl->clean = true;
    for (int r = 0; r < cl->size; r++) {
        cl_peer *p = &cl->peers[r];
        if (r == cl->rank)
            continue;
        if (atomic_load(&p->state) == PEER_DEAD || !p->bye_got)
            cl->clean = false;
        peer_down(cl, r, PEER_GONE);
    }
    /* Our last sends: wait for them briefly, then give up on them. */
    for (int r = 0; r < cl->size; r++) {
        for (int i = 0; i < CL_NSEND; i++) {
            MPI_Request *q = &cl->peers[r].sb[i].req;
            uint64_t until = rk_now_ns() + 100000000;
            int done = 0;

            while (*q != MPI_REQUEST_NULL && !done && rk_now_ns() < until)
                if (MPI_Test(q, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
                    break;
            if (*q != MPI_REQUEST_NULL && !done) {
                cl->clean = false;
                MPI_Request_free(q);
            }
        }
    }
    for (int i = 0; i < CL_NRECV; i++) {
        MPI_Cancel(&cl->rreq[i]);
        MPI_Wait(&cl->rreq[i], MPI_STATUS_IGNORE);
        MPI_Request_free(&cl->rreq[i]);
    }
    atomic_store(&cl->stopped, true);
    return NULL;
}

/* Stops the progress and ingress threads (once; later calls wait for the
 * first). */
static void
cluster_stop(rk_cluster *cl)
{
    pthread_mutex_lock(&cl->stop_lock);
    if (!cl->stop_done) {
        atomic_store(&cl->stop, true);
        wake_progress(cl);
        if (cl->progress_started)
            pthread_join(cl->progress, NULL);
        atomic_store(&cl->stopped, true);
        /* Under export_lock: no export (and ingress thread) is added
         * after this (rk_cluster_announce checks it there). */
        pthread_mutex_lock(&cl->export_lock);
        atomic_store(&cl->drain_stop, true);
        pthread_mutex_unlock(&cl->export_lock);
        for (size_t i = 0; i < cl->n_exports; i++) {
            cl_export *e = &cl->exports[i];
            pthread_mutex_lock(&e->lock);
            pthread_cond_broadcast(&e->cond);
            pthread_mutex_unlock(&e->lock);
            if (e->ingress_started)
                pthread_join(e->ingress, NULL);
        }
        for (int r = 0; cl->peers != NULL && r < cl->size; r++) {
            pthread_mutex_lock(&cl->peers[r].lock);
            pthread_cond_broadcast(&cl->peers[r].room);
            pthread_mutex_unlock(&cl->peers[r].lock);
        }
        cl->stop_done = true;
    }
    pthread_mutex_unlock(&cl->stop_lock);
}

/* ---------------------------------------------------------------- join */

static void
cluster_free(rk_cluster *cl)
{
    if (cl->peers != NULL) {
        for (int r = 0; r < cl->size; r++) {
            cl_peer *p = &cl->peers[r];
            for (int c = 0; c < 2; c++) {
                free(p->stage[c].p);
                free(p->backlog[c].p);
            }
            free(p->held.p);
            for (int i = 0; i < CL_NSEND; i++)
                free(p->sb[i].p);
            pthread_mutex_destroy(&p->lock);
            pthread_cond_destroy(&p->room);
        }
    }
    for (size_t i = 0; i < cl->n_exports; i++) {
        cl_export *e = &cl->exports[i];
        for (uint32_t j = 0; j < e->mcount; j++)
            free(e->mail[(e->mhead + j) % CL_MAILBOX].data);
        free(e->mail);
        free(e->in.p);
        free(e->obuf);
        pthread_mutex_destroy(&e->lock);
        pthread_cond_destroy(&e->cond);
    }
    for (int i = 0; i < CL_NRECV; i++)
        free(cl->rbuf[i]);
    for (int i = 0; i < CL_NWAIT; i++) {
        free(cl->wait[i].sbuf);
        pthread_mutex_destroy(&cl->wait[i].lock);
        pthread_cond_destroy(&cl->wait[i].cond);
    }
    idmap_free(&cl->served);
    idmap_free(&cl->fwd);
    free(cl->peers);
    free(cl->exports);
    free(cl->topics);
    free(cl->proxies);
    pthread_mutex_destroy(&cl->stop_lock);
    pthread_mutex_destroy(&cl->export_lock);
    pthread_mutex_destroy(&cl->wake_lock);
    pthread_cond_destroy(&cl->wake);
    free(cl);
}

static int
mpi_setup(rk_cluster *cl, const void *comm)
{
    int init = 0, level = 0, mrc;

    MPI_Initialized(&init);
    if (!init) {
        mrc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &level);
        if (mrc != MPI_SUCCESS)
            return mpi_fail(mrc, "MPI_Init_thread");
        cl->mpi_ours = true;
    } else {
        int fin = 0;
        MPI_Finalized(&fin);
        if (fin)
            return rk__fail(RK_EINVAL, "rk_cluster_mpi: MPI is finalized");
        MPI_Query_thread(&level);
    }
    if (level < MPI_THREAD_SERIALIZED)
        return rk__fail(RK_ENOTSUP,
            "rk_cluster_mpi: MPI thread level %d; the cluster needs "
            "MPI_THREAD_SERIALIZED (initialise MPI with MPI_Init_thread)",
            level);
    mrc = MPI_Comm_dup(
        comm != NULL ? *(const MPI_Comm *)comm : MPI_COMM_WORLD, &cl->comm);
    if (mrc != MPI_SUCCESS)
        return mpi_fail(mrc, "MPI_Comm_dup");
    MPI_Comm_set_errhandler(cl->comm, MPI_ERRORS_RETURN);
    mrc = MPI_Comm_dup(cl->comm, &cl->rcomm);
    if (mrc != MPI_SUCCESS)
        return mpi_fail(mrc, "MPI_Comm_dup");
    MPI_Comm_set_errhandler(cl->rcomm, MPI_ERRORS_RETURN);
    cl->multiple = level >= MPI_THREAD_MULTIPLE;
    MPI_Comm_rank(cl->comm, &cl->rank);
    MPI_Comm_size(cl->comm, &cl->size);
    return RK_OK;
}

static void
config_defaults(rk_cluster_config *c)
{
    if (c->batch_bytes == 0)
        c->batch_bytes = 256 * 1024;
    if (c->batch_bytes < 4096)
        c->batch_bytes = 4096;
    if (c->batch_window_ns <= 0)
        c->batch_window_ns = 20000;
    if (c->credits == 0)
        c->credits = 8192;
    if (c->heartbeat_ns <= 0)
        c->heartbeat_ns = 3000000000LL;
    if (c->poll_ns <= 0)
        c->poll_ns = 1000000;
    if (c->idle_sleep_max_ns <= 0)
        c->idle_sleep_max_ns = 1000000;
    if (c->leave_timeout_ns <= 0)
        c->leave_timeout_ns = 2000000000LL;
}

/* Our directory record: exports and the topics we have subscribers for. */
static int
directory_local(rk_cluster *cl, uint8_t **out, size_t *len)
{
    uint32_t nt = 0;
    bool *has = calloc(cl->n_topics + 1, sizeof(bool));
    uint8_t *d, *p;

    if (has == NULL)
        return rk__fail(RK_ENOMEM, "cluster: directory");
    for (size_t i = 0; i < cl->n_topics; i++) {
        rk_topic_stats ts;
        if (rk_topic_stats_get(cl->rt, cl->topics[i], &ts) == RK_OK
            && ts.subscribers > 0) {
            has[i] = true;
            nt++;
        }
    }
    *len = rk__cl_dir_size((uint32_t)cl->n_exports, nt);
    if ((d = malloc(*len)) == NULL) {
        free(has);
        return rk__fail(RK_ENOMEM, "cluster: directory");
    }
    rk__cl_dir_header_write(d, (uint32_t)cl->n_exports, nt, cl->cfg.credits);
    p = d + RK__CL_DIR_HDR;
    for (size_t i = 0; i < cl->n_exports; i++, p += RK__CL_DIR_EXPORT) {
        const rk_cluster_export *x = &cl->exports[i].cfg;
        rk__cl_dir_export e;
        snprintf(e.id, sizeof(e.id), "%s", cl->exports[i].id);
        e.capacity = x->input_capacity;
        e.max_payload = x->max_payload;
        e.backpressure = (uint32_t)x->backpressure;
        e.bands = x->priority_bands;
        rk__cl_dir_export_write(p, &e);
    }
    for (size_t i = 0; i < cl->n_topics; i++) {
        rk__cl_dir_topic t;
        if (!has[i])
            continue;
        snprintf(t.name, sizeof(t.name), "%s", cl->topics[i]);
        t.index = (uint32_t)i;
        rk__cl_dir_topic_write(p, &t);
        p += RK__CL_DIR_TOPIC;
    }
    free(has);
    *out = d;
    return RK_OK;
}

static int
proxy_add(
    rk_cluster *cl, const char *id, int rank, uint32_t target, bool topic)
{
    cl_proxy *px;

    if (cl->n_proxies == cl->proxies_cap)
        return rk__fail(RK_EFULL, "cluster: proxy table full");
    px = &cl->proxies[cl->n_proxies];
    if (snprintf(px->id, sizeof(px->id), "%s", id) >= (int)sizeof(px->id))
        return rk__fail(RK_EINVAL, "cluster: proxy id '%s' is too long", id);
    px->cl = cl;
    px->rank = rank;
    px->target = target;
    px->index = (uint32_t)cl->n_proxies;
    px->topic = topic;
    cl->n_proxies++;
    return RK_OK;
}

/* Registers, launches and activates one kernel of the cluster. */
static int
start_kernel(rk_cluster *cl, const char *id, rk_actor_fn fn, void *user,
    const rk__cl_dir_export *e)
{
    rk_kernel_def def;
    int rc;

    memset(&def, 0, sizeof(def));
    def.id = id;
    def.actor = fn;
    def.config.user = user;
    def.config.backend = "cpu";
    /* Proxies park at once: on shared cores a spinning proxy holds the
     * CPU the thread it waits for needs (round trip 118 us against 130 us
     * with 200 spins, 171 us with 5000, on 2 cores). */
    def.config.spin = 1;
    if (e != NULL) {
        def.config.input_capacity = e->capacity;
        def.config.max_payload = e->max_payload;
        def.config.backpressure = (rk_backpressure)e->backpressure;
        def.config.priority_bands = e->bands != 0;
    }
    if ((rc = rk_runtime_register(cl->rt, &def)) != RK_OK)
        return rc;
    if ((rc = rk_kernel_launch(cl->rt, id)) != RK_OK)
        return rc;
    return rk_kernel_activate(cl->rt, id);
}

/* The proxies of rank r's export i (record e): "r/id", and "id" when
 * bare and no local kernel (or earlier proxy) has the name. Each running
 * proxy holds a reference to the cluster. */
static int
proxy_start(rk_cluster *cl, int r, uint32_t i,
    const struct rk__cl_dir_export *e, bool bare)
{
    char id[2 * (RK_ID_MAX + 1) + 16];
    rk_kernel_state s;
    int rc;

    if (bare)
        snprintf(id, sizeof(id), "%s", e->id);
    else
        snprintf(id, sizeof(id), "%d/%s", r, e->id);
    if (bare && rk_kernel_state_get(cl->rt, id, &s) == RK_OK)
        return RK_OK; /* a local kernel (or earlier proxy) */
    if ((rc = proxy_add(cl, id, r, i, false)) != RK_OK)
        return rc;
    if ((rc = start_kernel(
             cl, id, proxy_actor, &cl->proxies[cl->n_proxies - 1], e))
        != RK_OK)
        return rc;
    atomic_fetch_add(&cl->refs, 1);
    return RK_OK;
}

static int
directory_exchange(rk_cluster *cl)
{
    uint8_t *mine = NULL, *all = NULL;
    size_t len = 0, total = 0, cap = 0;
    int *lens = NULL, *displs = NULL, mrc, rc;
    rk__cl_dir *dirs = NULL;

    if ((rc = directory_local(cl, &mine, &len)) != RK_OK)
        return rc;
    lens = calloc((size_t)cl->size, sizeof(int));
    displs = calloc((size_t)cl->size, sizeof(int));
    dirs = calloc((size_t)cl->size, sizeof(*dirs));
    if (lens == NULL || displs == NULL || dirs == NULL) {
        rc = rk__fail(RK_ENOMEM, "cluster: directory");
        goto out;
    }
    int mylen = (int)len;
    if ((mrc = MPI_Allgather(&mylen, 1, MPI_INT, lens, 1, MPI_INT, cl->comm))
        != MPI_SUCCESS) {
        rc = mpi_fail(mrc, "MPI_Allgather");
        goto out;
    }
    for (int r = 0; r < cl->size; r++) {
        displs[r] = (int)total;
        total += (size_t)lens[r];
    }
    if ((all = malloc(total)) == NULL) {
        rc = rk__fail(RK_ENOMEM, "cluster: directory of %zu bytes", total);
        goto out;
    }
    mrc = MPI_Allgatherv(
        mine, mylen, MPI_BYTE, all, lens, displs, MPI_BYTE, cl->comm);
    if (mrc != MPI_SUCCESS) {
        rc = mpi_fail(mrc, "MPI_Allgatherv");
        goto out;
    }
    /* Every rank agrees on the largest batch (receive buffers). */
    uint32_t bb = cl->cfg.batch_bytes;
    mrc = MPI_Allreduce(
        &bb, &cl->batch_bytes, 1, MPI_UINT32_T, MPI_MAX, cl->comm);
    if (mrc != MPI_SUCCESS) {
        rc = mpi_fail(mrc, "MPI_Allreduce");
        goto out;
    }
    cl->stage_limit = (size_t)cl->batch_bytes * 4;
    for (int r = 0; r < cl->size; r++) {
        rc = rk__cl_dir_parse(all + displs[r], (size_t)lens[r], &dirs[r]);
        if (rc != RK_OK)
            goto out;
        if (r != cl->rank)
            cap += 2 * dirs[r].n_exports + dirs[r].n_topics;
        cl->peers[r].credits = cl->peers[r].window = dirs[r].credits;
    }
    /* Room for the proxies of exports announced later: two per export
     * of each peer. */
    cl->proxies_cap = cap + 2 * CL_LATE * (size_t)(cl->size - 1);
    if ((cl->proxies = calloc(cl->proxies_cap + 1, sizeof(*cl->proxies)))
        == NULL) {
        rc = rk__fail(RK_ENOMEM, "cluster: proxies");
        goto out;
    }
    /* Proxies: "R/id" for every remote export, "id" for the first rank
     * exporting a name no local kernel has, "R/#topic" for remote topic
     * members. */
    for (int pass = 0; pass < 3; pass++) {
        for (int r = 0; r < cl->size; r++) {
            if (r == cl->rank)
                continue;
            uint32_t n = pass < 2 ? dirs[r].n_exports : dirs[r].n_topics;
            for (uint32_t i = 0; i < n; i++) {
                char id[2 * (RK_ID_MAX + 1) + 16];
                rk__cl_dir_export e;
                rk__cl_dir_topic t;

                if (pass < 2) {
                    if ((rc = rk__cl_dir_export_get(&dirs[r], i, &e)) != RK_OK
                        || (rc = proxy_start(cl, r, i, &e, pass == 1))
                            != RK_OK)
                        goto out;
                    continue;
                }
                if ((rc = rk__cl_dir_topic_get(&dirs[r], i, &t)) != RK_OK)
                    goto out;
                snprintf(id, sizeof(id), "%d/#%s", r, t.name);
                if ((rc = proxy_add(cl, id, r, t.index, true)) != RK_OK)
                    goto out;
                if ((rc = start_kernel(cl, id, proxy_actor,
                         &cl->proxies[cl->n_proxies - 1], NULL))
                    != RK_OK)
                    goto out;
                if ((rc = rk_subscribe(cl->rt, id, t.name)) != RK_OK)
                    goto out;
                atomic_fetch_add(&cl->refs, 1);
            }
        }
    }
    rc = RK_OK;
out:
    free(mine);
    free(all);
    free(lens);
    free(displs);
    free(dirs);
    return rc;
}

/* Every rank's verdict on a step of the join: rc if this rank failed,
 * RK_EINTERNAL if another did, else RK_OK. Collective. */
static int
agree(rk_cluster *cl, int rc)
{
    int bad = rc != RK_OK, any = 0;
    char detail[512];

    snprintf(detail, sizeof(detail), "%s", rk_errdetail());
    if (MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, cl->comm)
        != MPI_SUCCESS)
        any = 1;
    if (rc != RK_OK)
        return rk__fail(rc, "%s", detail);
    if (any)
        return rk__fail(
            RK_EINTERNAL, "rk_cluster_mpi: another rank failed to join");
    return RK_OK;
}

/* Fills export e from x, as the kernel id names it now (what the
 * proxies mirror is read from its registration): everything but its lock
 * and condition (export_locks_init). RK_EINVAL for a bad id, RK_ENOTFOUND
 * for no such kernel, RK_ENOMEM. Calls the runtime: no lock held. */
static int
export_fill(rk_cluster *cl, cl_export *e, const rk_cluster_export *x)
{
    rk_kernel_state s;
    rk_kernel_config kc;
    int rc;

    e->cl = cl;
    e->cfg = *x;
    e->cfg.id = NULL;
    if (x->id == NULL || strlen(x->id) > RK_ID_MAX)
        return rk__fail(RK_EINVAL, "cluster: export with a bad id");
    snprintf(e->id, sizeof(e->id), "%s", x->id);
    if ((rc = rk_kernel_state_get(cl->rt, e->id, &s)) != RK_OK)
        return rc;
    if ((rc = rk_kernel_config_get(cl->rt, e->id, &kc)) != RK_OK)
        return rc;
    e->cfg.input_capacity = kc.input_capacity;
    e->cfg.max_payload = kc.max_payload;
    e->cfg.backpressure = kc.backpressure;
    e->cfg.priority_bands = kc.priority_bands;
    e->direct_calls = kc.direct_calls;
    if ((e->mail = calloc(CL_MAILBOX, sizeof(*e->mail))) == NULL)
        return rk__fail(RK_ENOMEM, "cluster: export mailbox");
    return RK_OK;
}

static void
export_locks_init(cl_export *e)
{
    pthread_mutex_init(&e->lock, NULL);
    cond_init_mono(&e->cond);
}

/* Starts what serves export e: its ingress thread (BLOCK) and the buffer
 * the progress thread reads its output into. */
static int
export_start(cl_export *e)
{
    if (!e->cfg.local_output) {
        e->ocap = e->cfg.max_payload ? e->cfg.max_payload : 192;
        if ((e->obuf = malloc(e->ocap)) == NULL)
            return rk__fail(RK_ENOMEM, "cluster: output buffer");
    }
    /* Last: a failure before it leaves no thread running. */
    if (e->cfg.backpressure == RK_BP_BLOCK) {
        if (pthread_create(&e->ingress, NULL, ingress_main, e) != 0)
            return rk__fail(RK_ENOMEM, "cluster: ingress thread");
        e->ingress_started = true;
    }
    return RK_OK;
}

/* Whether a kernel registered at the join is exported when the
 * configuration names none: not the cluster's own kernels (the control
 * kernel, and proxies, whose ids hold a '/': "R/id", "R/#topic"), nor
 * any other id with a '/', which would read as a remote name. */
static bool
export_by_default(const char *id)
{
    return strcmp(id, CL_CONTROL_ID) != 0 && strchr(id, '/') == NULL;
}

/* export_all in the configuration: every kernel registered now
 * (export_by_default), with the defaults of rk_cluster_export, in *out
 * (malloc'd, the caller frees it and *ids) and *n. */
static int
exports_all(rk_runtime *rt, rk_cluster_export **out,
    char (**ids)[RK_ID_MAX + 1], size_t *n)
{
    char(*all)[RK_ID_MAX + 1] = NULL;
    size_t total = 0, cap = 0, k = 0;
    int rc;

    *out = NULL;
    *ids = NULL;
    *n = 0;
    /* Kernels registered meanwhile: ask again with room for them. */
    for (;;) {
        if ((rc = rk_runtime_kernel_ids(rt, all, cap, &total)) != RK_OK) {
            free(all);
            return rc;
        }
        if (total <= cap)
            break;
        free(all);
        cap = total;
        if ((all = malloc(cap * sizeof(*all))) == NULL)
            return rk__fail(RK_ENOMEM, "rk_cluster_mpi: kernel list");
    }
    if ((*out = calloc(total + 1, sizeof(**out))) == NULL) {
        free(all);
        return rk__fail(RK_ENOMEM, "rk_cluster_mpi: kernel list");
    }
    for (size_t i = 0; i < total; i++)
        if (export_by_default(all[i]))
            (*out)[k++].id = all[i];
    *ids = all;
    *n = k;
    return RK_OK;
}

int
rk_cluster_mpi(rk_runtime *rt, const void *comm, const rk_cluster_config *cfg,
    rk_cluster **out)
{
    rk_cluster *cl;
    rk_cluster_config c;
    rk_cluster_export *all = NULL; /* export_all: every kernel */
    char(*all_ids)[RK_ID_MAX + 1] = NULL;
    const rk_cluster_export *xs;
    int rc;

    if (out != NULL)
        *out = NULL;
    if (rt == NULL || out == NULL)
        return rk__fail(RK_EINVAL, "rk_cluster_mpi: NULL argument");
    memset(&c, 0, sizeof(c));
    if (cfg != NULL)
        c = *cfg;
    if ((c.n_exports != 0 && c.exports == NULL)
        || (c.n_topics != 0 && c.topics == NULL))
        return rk__fail(RK_EINVAL, "rk_cluster_mpi: NULL export/topic list");
    if (c.export_all && c.exports != NULL)
        return rk__fail(RK_EINVAL,
            "rk_cluster_mpi: export_all with an export list (pass one)");
    if (c.export_all
        && (rc = exports_all(rt, &all, &all_ids, &c.n_exports)) != RK_OK)
        return rc;
    xs = all != NULL ? all : c.exports;
    config_defaults(&c);
    if ((cl = calloc(1, sizeof(*cl))) == NULL) {
        free(all);
        free(all_ids);
        return rk__fail(RK_ENOMEM, "rk_cluster_mpi");
    }
    cl->rt = rt;
    cl->cfg = c;
    cl->cfg.exports = NULL;
    cl->cfg.topics = NULL;
    cl->comm = MPI_COMM_NULL;
    cl->rcomm = MPI_COMM_NULL;
    atomic_init(&cl->refs, 1);
    pthread_mutex_init(&cl->stop_lock, NULL);
    pthread_mutex_init(&cl->export_lock, NULL);
    pthread_mutex_init(&cl->wake_lock, NULL);
    cond_init_mono(&cl->wake);
    for (int i = 0; i < CL_NRECV; i++)
        cl->rreq[i] = MPI_REQUEST_NULL;
    for (int i = 0; i < CL_NWAIT; i++) {
        pthread_mutex_init(&cl->wait[i].lock, NULL);
        cond_init_mono(&cl->wait[i].cond);
        cl->wait[i].sreq = MPI_REQUEST_NULL;
        cl->wait[i].rreq = MPI_REQUEST_NULL;
    }
    atomic_init(&cl->wfree, UINT64_MAX);
    if ((rc = idmap_init(&cl->served)) != RK_OK
        || (rc = idmap_init(&cl->fwd)) != RK_OK)
        goto fail;

    /* Local exports and topics. A rank that finds a mistake here still
     * takes part in the vote below, so that no other rank is left waiting
     * in a collective. */
    cl->exports_cap = c.n_exports + CL_LATE;
    cl->exports = calloc(cl->exports_cap, sizeof(*cl->exports));
    cl->topics = calloc(c.n_topics + 1, sizeof(*cl->topics));
    if (cl->exports == NULL || cl->topics == NULL) {
        rc = rk__fail(RK_ENOMEM, "rk_cluster_mpi");
        goto checked;
    }
    for (size_t i = 0; i < c.n_exports; i++) {
        /* Counted at once: cluster_free destroys its lock and condition,
         * and frees what the fill got, whatever the outcome. */
        export_locks_init(&cl->exports[i]);
        cl->n_exports++;
        rc = export_fill(cl, &cl->exports[i], &xs[i]);
        if (rc != RK_OK) {
            char why[256];
            snprintf(why, sizeof(why), "%s", rk_errdetail());
            rc = rk__fail(rc, "rk_cluster_mpi: export %zu: %s", i, why);
            goto checked;
        }
    }
    for (size_t i = 0; i < c.n_topics; i++) {
        if (c.topics[i] == NULL || strlen(c.topics[i]) > RK_ID_MAX) {
            rc = rk__fail(RK_EINVAL, "rk_cluster_mpi: topic %zu: bad name", i);
            goto checked;
        }
        snprintf(cl->topics[i], sizeof(cl->topics[i]), "%s", c.topics[i]);
        cl->n_topics++;
    }

checked:
    free(all);
    free(all_ids);
    all = NULL;
    all_ids = NULL;
    {
        int mrc = mpi_setup(cl, comm);
        if (mrc != RK_OK) {
            rc = rc != RK_OK ? rc : mrc; /* without MPI, no vote */
            goto fail;
        }
    }
    if ((rc = agree(cl, rc)) != RK_OK)
        goto fail;

    if ((cl->peers = calloc((size_t)cl->size, sizeof(*cl->peers))) == NULL) {
        rc = rk__fail(RK_ENOMEM, "rk_cluster_mpi");
        goto fail;
    }
    for (int r = 0; r < cl->size; r++) {
        cl_peer *p = &cl->peers[r];

        pthread_mutex_init(&p->lock, NULL);
        cond_init_mono(&p->room);
        for (int i = 0; i < CL_NSEND; i++)
            p->sb[i].req = MPI_REQUEST_NULL;
        p->last_heard = p->last_sent = rk_now_ns();
    }
    rc = directory_exchange(cl);
    if ((rc = agree(cl, rc)) != RK_OK)
        goto fail;
    for (int i = 0; i < CL_NRECV; i++) {
        if ((cl->rbuf[i] = malloc(cl->batch_bytes)) == NULL) {
            rc = rk__fail(RK_ENOMEM, "rk_cluster_mpi");
            goto fail;
        }
        CL_MPI_BUFFER(cl->rbuf[i], cl->batch_bytes);
        int mrc = MPI_Recv_init(cl->rbuf[i], (int)cl->batch_bytes, MPI_BYTE,
            MPI_ANY_SOURCE, CL_TAG, cl->comm, &cl->rreq[i]);
        if (mrc != MPI_SUCCESS) {
            rc = mpi_fail(mrc, "MPI_Recv_init");
            goto fail;
        }
    }
    /* The control kernel: rk_runtime_destroy stops the cluster through it. */
    atomic_fetch_add(&cl->refs, 1);
    if ((rc = start_kernel(cl, CL_CONTROL_ID, control_actor, cl, NULL))
        != RK_OK) {
        atomic_fetch_sub(&cl->refs, 1);
        goto fail;
    }
    for (size_t i = 0; i < cl->n_exports; i++)
        if ((rc = export_start(&cl->exports[i])) != RK_OK)
            goto fail;
    /* Everyone's proxies exist before anyone's progress thread sends. */
    MPI_Barrier(cl->comm);
    if (pthread_create(&cl->progress, NULL, progress_main, cl) != 0) {
        rc = rk__fail(RK_ENOMEM, "rk_cluster_mpi: progress thread");
        goto fail;
    }
    cl->progress_started = true;
    *out = cl;
    return RK_OK;

fail:
    /* A failed join: stop what started, end the kernels we registered. */
    free(all);
    free(all_ids);
    {
        char detail[512];
        snprintf(detail, sizeof(detail), "%s", rk_errdetail());
        cluster_stop(cl);
        pthread_mutex_lock(&cl->stop_lock);
        cl->leaving = true;
        pthread_mutex_unlock(&cl->stop_lock);
        for (size_t i = 0; i < cl->n_proxies; i++)
            rk_kernel_terminate(rt, cl->proxies[i].id, 1000000000);
        rk_kernel_terminate(rt, CL_CONTROL_ID, 1000000000);
        if (cl->comm != MPI_COMM_NULL) {
            for (int i = 0; i < CL_NRECV; i++)
                if (cl->rreq[i] != MPI_REQUEST_NULL)
                    MPI_Request_free(&cl->rreq[i]);
            MPI_Comm_free(&cl->comm);
        }
        /* MPI stays initialised (a later call may try again); a program
         * that gives up calls MPI_Finalize itself. */
        unref(cl);
        return rk__fail(rc, "%s", detail);
    }
}

int
rk_cluster_leave(rk_cluster *cl)
{
    bool clean, ours;
    int64_t t;

    if (cl == NULL)
        return RK_OK;
    pthread_mutex_lock(&cl->stop_lock);
    cl->leaving = true;
    pthread_mutex_unlock(&cl->stop_lock);
    cluster_stop(cl);
    clean = cl->clean;
    ours = cl->mpi_ours;
    t = cl->cfg.leave_timeout_ns;
    for (size_t i = 0; i < cl->n_proxies; i++)
        rk_kernel_terminate(cl->rt, cl->proxies[i].id, t);
    rk_kernel_terminate(cl->rt, CL_CONTROL_ID, t);
    if (clean)
        MPI_Comm_free(&cl->comm);
    unref(cl);
    if (ours && clean) {
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin)
            MPI_Finalize();
    }
    return clean ? RK_OK
                 : rk__fail(RK_EUNREACHABLE,
                     "rk_cluster_leave: a peer died or did not say goodbye");
}

int
rk_cluster_rank(const rk_cluster *cl)
{
    return cl != NULL ? cl->rank : -1;
}

int
rk_cluster_size(const rk_cluster *cl)
{
    return cl != NULL ? cl->size : 0;
}

int
rk_cluster_peer_status(const rk_cluster *cl, int rank)
{
    if (cl == NULL || rank < 0 || rank >= cl->size)
        return rk__fail(RK_EINVAL, "rk_cluster_peer_status: rank %d", rank);
    if (rank == cl->rank)
        return atomic_load(&cl->stopped)
            ? rk__fail(RK_EUNREACHABLE, "this rank has left")
            : RK_OK;
    switch (atomic_load(&cl->peers[rank].state)) {
    case PEER_LIVE:
        return RK_OK;
    case PEER_DEAD:
        return rk__fail(RK_EUNREACHABLE, "rank %d died", rank);
    default:
        return rk__fail(RK_EUNREACHABLE, "rank %d left", rank);
    }
}

int
rk_cluster_recv(rk_cluster *cl, const char *id, rk_msg_header *hdr, void *buf,
    size_t cap, size_t *len, int64_t timeout_ns)
{
    cl_export *e = NULL;
    uint64_t deadline = rk__deadline(timeout_ns);
    cl_mail *m;

    if (cl == NULL || id == NULL || len == NULL || (buf == NULL && cap != 0))
        return rk__fail(RK_EINVAL, "rk_cluster_recv: NULL argument");
    e = export_named(cl, id);
    if (e == NULL || e->cfg.local_output)
        return rk_recv_id(cl->rt, id, hdr, buf, cap, len, timeout_ns);
    pthread_mutex_lock(&e->lock);
    while (e->mcount == 0) {
        struct timespec ts;
        uint64_t now = rk_now_ns();
        if (now >= deadline) {
            pthread_mutex_unlock(&e->lock);
            return RK_ETIMEDOUT;
        }
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t abs = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec
            + (deadline - now < 50000000 ? deadline - now : 50000000);
        ts.tv_sec = (time_t)(abs / 1000000000u);
        ts.tv_nsec = (long)(abs % 1000000000u);
        pthread_cond_timedwait(&e->cond, &e->lock, &ts);
    }
    m = &e->mail[e->mhead];
    *len = m->len;
    if (m->len > cap) {
        pthread_mutex_unlock(&e->lock);
        return rk__fail(RK_EMSGSIZE,
            "rk_cluster_recv: %zu-byte payload, %zu "
            "-byte buffer",
            m->len, cap);
    }
    if (hdr != NULL)
        *hdr = m->hdr;
    memcpy(buf, m->data, m->len);
    free(m->data);
    e->mhead = (e->mhead + 1) % CL_MAILBOX;
    e->mcount--;
    atomic_store_explicit(&e->mfill, e->mcount, memory_order_relaxed);
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    return RK_OK;
}

int
rk_cluster_announce(rk_cluster *cl, const rk_cluster_export *ex)
{
    uint8_t dir[RK__CL_DIR_HDR + RK__CL_DIR_EXPORT];
    rk__cl_dir_export rec;
    rk__cl_frame f;
    cl_export *e, tmp;
    size_t n;
    int rc = RK_OK;

    if (cl == NULL || ex == NULL || ex->id == NULL)
        return rk__fail(RK_EINVAL, "rk_cluster_announce: NULL argument");
    if (!export_by_default(ex->id))
        return rk__fail(RK_EINVAL,
            "rk_cluster_announce: '%s' is the cluster's, or holds a '/'",
            ex->id);
    /* The runtime's view of the kernel first, with no lock held. */
    memset(&tmp, 0, sizeof(tmp));
    if ((rc = export_fill(cl, &tmp, ex)) != RK_OK) {
        free(tmp.mail);
        return rc;
    }
    pthread_mutex_lock(&cl->export_lock);
    n = cl->n_exports;
    if (atomic_load(&cl->drain_stop) || atomic_load(&cl->stop))
        rc = rk__fail(RK_ECLOSED, "rk_cluster_announce: leaving the cluster");
    for (size_t i = 0; rc == RK_OK && i < n; i++)
        if (strcmp(cl->exports[i].id, ex->id) == 0)
            rc = rk__fail(
                RK_EEXIST, "rk_cluster_announce: '%s' is exported", ex->id);
    if (rc == RK_OK && n == cl->exports_cap)
        rc = rk__fail(RK_EFULL,
            "rk_cluster_announce: at most %d kernels exported after the join",
            CL_LATE);
    if (rc != RK_OK) {
        pthread_mutex_unlock(&cl->export_lock);
        free(tmp.mail);
        return rc;
    }
    e = &cl->exports[n];
    *e = tmp; /* before its lock exists: nothing else sees this slot yet */
    export_locks_init(e);
    if ((rc = export_start(e)) != RK_OK) {
        /* Not published: nothing else has seen it. */
        free(e->mail);
        free(e->obuf);
        pthread_mutex_destroy(&e->lock);
        pthread_cond_destroy(&e->cond);
        memset(e, 0, sizeof(*e));
        pthread_mutex_unlock(&cl->export_lock);
        return rc;
    }
    cl->n_exports = n + 1; /* seq_cst: published to the progress thread */
    pthread_mutex_unlock(&cl->export_lock);

    /* Tell every peer (a dead or departed one needs nothing). */
    memset(&rec, 0, sizeof(rec));
    snprintf(rec.id, sizeof(rec.id), "%s", e->id);
    rec.capacity = e->cfg.input_capacity;
    rec.max_payload = e->cfg.max_payload;
    rec.backpressure = (uint32_t)e->cfg.backpressure;
    rec.bands = e->cfg.priority_bands;
    rk__cl_dir_header_write(dir, 1, 0, cl->cfg.credits);
    rk__cl_dir_export_write(dir + RK__CL_DIR_HDR, &rec);
    memset(&f, 0, sizeof(f));
    f.kind = RK__CL_ANNOUNCE;
    f.target = (uint32_t)n;
    f.len = sizeof(dir);
    f.id = rk__next_id();
    for (int r = 0; r < cl->size; r++)
        if (r != cl->rank)
            (void)stage_frame(cl, r, 1, &f, dir, RK_NO_WAIT);
    return RK_OK;
}

/* This rank's export named id, or NULL. */
static cl_export *
export_named(rk_cluster *cl, const char *id)
{
    for (size_t i = 0; i < cl->n_exports; i++)
        if (strcmp(cl->exports[i].id, id) == 0)
            return &cl->exports[i];
    return NULL;
}

/* The remote kernel's proxy named id (not a topic's), or NULL. */
static const cl_proxy *
proxy_named(const rk_cluster *cl, const char *id)
{
    for (size_t i = 0; i < cl->n_proxies; i++)
        if (!cl->proxies[i].topic && strcmp(cl->proxies[i].id, id) == 0)
            return &cl->proxies[i];
    return NULL;
}

/* Takes a free waiting slot: its index, or -1 when all are in use. */
static int
waiter_get(rk_cluster *cl)
{
    uint64_t m = atomic_load_explicit(&cl->wfree, memory_order_relaxed);

    while (m != 0) {
        int i = __builtin_ctzll(m);
        /* acq_rel: the slot's last user's writes (under its lock as
         * well) come before ours. */
        if (atomic_compare_exchange_weak_explicit(&cl->wfree, &m,
                m & ~(UINT64_C(1) << i), memory_order_acq_rel,
                memory_order_relaxed))
            return i;
    }
    return -1;
}

static void
waiter_put(rk_cluster *cl, int i)
{
    /* Release: pairs with the acq_rel take in waiter_get. */
    atomic_fetch_or_explicit(
        &cl->wfree, UINT64_C(1) << i, memory_order_release);
}

/* How long a waiter spins before it parks: adapted as the runtime's own
 * waits are (full after a spin that found the reply, halved after one
 * that ran out): a ping-pong with a peer that takes a whole round trip
 * parks at once and leaves the core to the threads that answer. */
#define CL_WSPIN_MAX_NS   20000u
#define CL_WSPIN_FLOOR_NS 1000u

static int
waiter_wait(rk_cluster *cl, cl_waiter *w, uint64_t deadline)
{
    uint32_t b = atomic_load_explicit(&cl->wspin_ns, memory_order_relaxed);
    uint64_t budget = b != 0 ? b : CL_WSPIN_MAX_NS, t0 = rk_now_ns();
    int rc;

    for (uint32_t i = 1;; i++) {
        /* Acquire: pairs with the release store of DONE (waiter_answer). */
        if (atomic_load_explicit(&w->state, memory_order_acquire) == W_DONE) {
            if (i > 1 && b != 0)
                atomic_store_explicit(&cl->wspin_ns, 0, memory_order_relaxed);
            break;
        }
        if (i % 64 == 0) {
            uint64_t now = rk_now_ns();
            if (now - t0 >= budget || now >= deadline) {
                uint32_t half = (uint32_t)(budget / 2);
                atomic_store_explicit(&cl->wspin_ns,
                    half < CL_WSPIN_FLOOR_NS ? CL_WSPIN_FLOOR_NS : half,
                    memory_order_relaxed);
                break;
            }
            sched_yield();
        }
        rk__cpu_relax();
    }
    pthread_mutex_lock(&w->lock);
    while (atomic_load_explicit(&w->state, memory_order_relaxed) == W_WAITING
        && rk_now_ns() < deadline) {
        struct timespec ts;
        w->sleeping = true;
        ts.tv_sec = (time_t)(deadline / 1000000000u);
        ts.tv_nsec = (long)(deadline % 1000000000u);
        if (deadline == UINT64_MAX) {
            pthread_cond_wait(&w->cond, &w->lock);
        } else {
            pthread_cond_timedwait(&w->cond, &w->lock, &ts);
        }
        w->sleeping = false;
    }
    if (atomic_load_explicit(&w->state, memory_order_relaxed) == W_DONE) {
        rc = w->rc;
    } else {
        rc = RK_ETIMEDOUT; /* a reply now finds the slot free: ignored */
    }
    atomic_store_explicit(&w->state, W_FREE, memory_order_relaxed);
    pthread_mutex_unlock(&w->lock);
    return rc;
}

/* Posts the receive of slot i's answer from rank (requesting thread):
 * posted before the request goes, the answer lands in it directly, as a
 * blocking MPI_Recv's would, instead of waiting in MPI's unexpected
 * queue for a probe and a second copy. */
static int
answer_post(rk_cluster *cl, int i, int rank)
{
    cl_waiter *w = &cl->wait[i];
    int mrc = MPI_Irecv(
        w->rbuf, CL_CALL_MAX, MPI_BYTE, rank, i, cl->rcomm, &w->rreq);

    if (mrc != MPI_SUCCESS) {
        w->rreq = MPI_REQUEST_NULL;
        return mpi_fail(mrc, "MPI_Irecv");
    }
    return RK_OK;
}

/* Takes the answer that came on rcomm for slot i, if it is there: true
 * once the slot is answered (by this or by the progress thread). An
 * answer for an earlier request of the slot (one that timed out) is
 * dropped and the receive posted again. Requesting thread. */
static bool
mpi_answer(rk_cluster *cl, int i, int rank)
{
    cl_waiter *w = &cl->wait[i];
    MPI_Status st;
    int done = 0, count = 0;
    rk__cl_batch b;
    rk__cl_frame f;
    size_t off = RK__CL_BATCH_HDR;

    if (w->rreq == MPI_REQUEST_NULL
        || MPI_Test(&w->rreq, &done, &st) != MPI_SUCCESS || !done)
        return false;
    w->rreq = MPI_REQUEST_NULL;
    MPI_Get_count(&st, MPI_BYTE, &count);
    if (count > 0 && rk__cl_batch_parse(w->rbuf, (size_t)count, &b) == RK_OK
        && rk__cl_frame_next(w->rbuf, (size_t)count, &off, &f) == RK_OK
        && (f.kind == RK__CL_REPLY || f.kind == RK__CL_ERROR)) {
        bool err = f.kind == RK__CL_ERROR;

        if (!waiter_answer(cl, (uint32_t)i, &f, err ? f.aux : RK_OK, rank))
            STAT(cl, late_replies, 1);
        else if (err)
            STAT(cl, remote_errors, 1);
        else
            WSTAT(w, replies_by_mpi);
    }
    if (atomic_load_explicit(&w->state, memory_order_acquire) == W_DONE)
        return true;
    answer_post(cl, i, rank); /* that one was not ours: wait on */
    return false;
}

/*
 * rk_cluster_request by the requesting thread's own MPI calls (MPI
 * THREAD_MULTIPLE, a small request, nothing of this process's staged for
 * the peer): the request goes as a one-frame batch (a CALL, no credit)
 * on comm, where the peer's progress thread takes it like any batch, and
 * the answer comes back on rcomm tagged with the slot. No progress thread
 * hand-off on this side. The wait polls MPI (Open MPI has nothing to
 * block on): the adaptive spin of waiter_wait, then polling that yields
 * the CPU for poll_ns, then naps growing to idle_sleep_max_ns, as the
 * progress thread waits. An answer the progress thread hands over (an
 * error staged by the peer, a peer declared dead) ends the wait too.
 * The slot is WAITING; returns as waiter_wait, with the slot FREE.
 */
static int
request_by_mpi(rk_cluster *cl, int slot, int rank, rk__cl_frame *f,
    const void *req, int64_t timeout_ns)
{
    cl_waiter *w = &cl->wait[slot];
    size_t size = RK__CL_BATCH_HDR + rk__cl_frame_size(f->len);
    uint32_t b = atomic_load_explicit(&cl->wspin_ns, memory_order_relaxed);
    uint64_t spin = b != 0 ? b : CL_WSPIN_MAX_NS, t0, now, deadline,
             nap = 2000;
    bool answered = false;
    int rc, mrc, posted, sent = 0;

    if (w->sbuf == NULL) {
        if ((w->sbuf = malloc(2 * CL_CALL_MAX)) == NULL) {
            rc = rk__fail(RK_ENOMEM, "rk_cluster_request: MPI buffers");
            goto out;
        }
        CL_MPI_BUFFER(w->sbuf, 2 * CL_CALL_MAX);
        w->rbuf = w->sbuf + CL_CALL_MAX;
    }
    f->kind = RK__CL_CALL;
    f->aux = (int32_t)(CL_DIRECT | CL_BYMPI | (uint32_t)slot);
    rk__cl_batch_write(w->sbuf, 0, 1, 0);
    rk__cl_frame_write(w->sbuf + RK__CL_BATCH_HDR, f, req);
    mrc = MPI_Isend(
        w->sbuf, (int)size, MPI_BYTE, rank, CL_TAG, cl->comm, &w->sreq);
    if (mrc != MPI_SUCCESS) {
        w->sreq = MPI_REQUEST_NULL;
        rc = mpi_fail(mrc, "MPI_Isend");
        goto out;
    }
    WSTAT(w, sent_by_mpi);
    /* The answer's receive is posted while the request travels (an
     * answer quicker than that waits in MPI's unexpected queue and still
     * matches it). */
    posted = answer_post(cl, slot, rank);
    /* This thread makes MPI progress now: the progress thread naps. */
    atomic_fetch_add_explicit(&cl->driving, 1, memory_order_relaxed);
    now = t0 = rk_now_ns();
    deadline = timeout_ns < 0 ? UINT64_MAX : t0 + (uint64_t)timeout_ns;
    for (uint32_t i = 1; posted == RK_OK; i++) {
        if (!sent
            && MPI_Test(&w->sreq, &sent, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            sent = 1; /* the peer's failure shows in its state */
        if (mpi_answer(cl, slot, rank)
            || atomic_load_explicit(&w->state, memory_order_acquire)
                == W_DONE) {
            answered = true;
            break;
        }
        /* Each try is a few hundred ns of MPI: the clock and the peer's
         * state are read every 8th. */
        if (i % 8 != 0)
            continue;
        if (atomic_load(&cl->peers[rank].state) != PEER_LIVE) {
            waiter_answer(cl, (uint32_t)slot, NULL, RK_EUNREACHABLE, rank);
            answered = true;
            break;
        }
        now = rk_now_ns();
        if (now >= deadline)
            break;
        if (now - t0 < spin) {
            if (i % 64 == 0)
                sched_yield();
        } else if (now - t0 < spin + (uint64_t)cl->cfg.poll_ns) {
            sched_yield();
        } else {
            struct timespec ts = { 0, (long)nap };
            nanosleep(&ts, NULL);
            if (nap * 2 <= (uint64_t)cl->cfg.idle_sleep_max_ns)
                nap *= 2;
        }
    }
    atomic_fetch_sub_explicit(&cl->driving, 1, memory_order_relaxed);
    /* The spin adapts as waiter_wait's does: full after an answer found
     * while spinning, halved after one that ran out. */
    if (answered && now - t0 < spin) {
        if (b != 0)
            atomic_store_explicit(&cl->wspin_ns, 0, memory_order_relaxed);
    } else {
        uint32_t half = (uint32_t)(spin / 2);
        atomic_store_explicit(&cl->wspin_ns,
            half < CL_WSPIN_FLOOR_NS ? CL_WSPIN_FLOOR_NS : half,
            memory_order_relaxed);
    }
    /* The request is small enough to go eagerly: its send completes
     * locally. Should it not, the buffers are left to MPI (the slot gets
     * new ones). */
    if (!sent) {
        uint64_t until = rk_now_ns() + 100000000;
        while (!sent && rk_now_ns() < until)
            if (MPI_Test(&w->sreq, &sent, MPI_STATUS_IGNORE) != MPI_SUCCESS)
                sent = 1;
        if (!sent) {
            MPI_Request_free(&w->sreq);
            w->sbuf = NULL;
        }
    }
    w->sreq = MPI_REQUEST_NULL;
    /* Not answered: an answer now finds the slot free and is dropped. */
    rc = posted != RK_OK ? posted : RK_ETIMEDOUT;
out:
    if (w->rreq != MPI_REQUEST_NULL) {
        /* No answer by MPI (a time-out, an error the progress thread
         * handed over): withdraw the receive. One that matched after all
         * is a late answer, dropped. */
        MPI_Cancel(&w->rreq);
        MPI_Wait(&w->rreq, MPI_STATUS_IGNORE);
        w->rreq = MPI_REQUEST_NULL;
    }
    pthread_mutex_lock(&w->lock);
    if (atomic_load_explicit(&w->state, memory_order_relaxed) == W_DONE)
        rc = w->rc;
    atomic_store_explicit(&w->state, W_FREE, memory_order_relaxed);
    pthread_mutex_unlock(&w->lock);
    return rc;
}

/* Fills slot i's waiter for a request with id to rank (the caller's
 * reply buffers) and marks it WAITING. */
static void
waiter_arm(rk_cluster *cl, int i, const rk_uuid *id, int rank,
    rk_msg_header *reply_hdr, void *reply, size_t cap)
{
    cl_waiter *w = &cl->wait[i];

    pthread_mutex_lock(&w->lock);
    w->id = *id;
    w->rank = rank;
    w->hdr = reply_hdr;
    w->buf = reply;
    w->cap = cap;
    w->len = 0;
    w->rc = RK_OK;
    atomic_store_explicit(&w->state, W_WAITING, memory_order_relaxed);
    pthread_mutex_unlock(&w->lock);
}

/*
 * rk_cluster_request to a kernel of this rank that the cluster exports
 * (without local_output): the progress thread reads its outputs
 * (drain_poll), so an rk_request of its own would race it for the reply.
 * The request goes in with its route back recorded as a remote one's is
 * (served: this rank and slot), and drain_poll hands the reply to the
 * slot (reply_out). The slot is taken; returns as waiter_wait, with the
 * slot given back.
 */
static int
request_local(rk_cluster *cl, cl_export *e, int slot,
    const rk_request_options *opts, const void *req, size_t req_len,
    rk_msg_header *reply_hdr, void *reply, size_t cap, size_t *reply_len)
{
    cl_waiter *w = &cl->wait[slot];
    uint64_t deadline = rk__deadline(opts->timeout_ns);
    rk__cl_frame f;
    rk_msg_header h;
    rk_kernel k;
    int rc;

    memset(&f, 0, sizeof(f));
    f.priority = opts->priority;
    f.type_id = opts->type_id;
    f.flags = RK_MSG_F_REQUEST;
    f.id = rk__next_id();
    h = frame_header(&f);
    waiter_arm(cl, slot, &f.id, cl->rank, reply_hdr, reply, cap);
    idmap_put(
        &cl->served, &f.id, cl->rank, CL_DIRECT | (uint32_t)slot, f.priority);
    rc = rk_kernel_lookup(cl->rt, e->id, &k);
    if (rc == RK_OK)
        rc = rk_send_frame(cl->rt, k, &h, req, req_len, opts->timeout_ns);
    if (rc == RK_OK) {
        wake_progress(cl); /* it polls while the kernel answers */
        rc = waiter_wait(cl, w, deadline);
    } else {
        idmap_take(&cl->served, &f.id, NULL, NULL);
        pthread_mutex_lock(&w->lock);
        atomic_store_explicit(&w->state, W_FREE, memory_order_relaxed);
        pthread_mutex_unlock(&w->lock);
    }
    *reply_len = w->len;
    waiter_put(cl, slot);
    return rc;
}

int
rk_cluster_request(rk_cluster *cl, const char *id,
    const rk_request_options *opts, const void *req, size_t req_len,
    rk_msg_header *reply_hdr, void *reply, size_t cap, size_t *reply_len)
{
    static const rk_request_options defaults = RK_REQUEST_OPTIONS_INIT;
    const cl_proxy *px;
    rk__cl_frame f;
    cl_waiter *w;
    uint64_t deadline = 0;
    int slot, rc;
    rk_kernel k;

    if (cl == NULL || id == NULL || reply_len == NULL
        || (req == NULL && req_len != 0) || (reply == NULL && cap != 0))
        return rk__fail(RK_EINVAL, "rk_cluster_request: NULL argument");
    if (opts == NULL)
        opts = &defaults;
    /* Not a remote kernel, or every slot busy: the ordinary request (to a
     * local kernel, or through the proxy). */
    if ((px = proxy_named(cl, id)) == NULL) {
        cl_export *e = export_named(cl, id);
        if (e != NULL && !e->cfg.local_output
            && (slot = waiter_get(cl)) >= 0) {
            rc = request_local(cl, e, slot, opts, req, req_len, reply_hdr,
                reply, cap, reply_len);
            goto done;
        }
    }
    if (px == NULL || (slot = waiter_get(cl)) < 0) {
        if ((rc = rk_kernel_lookup(cl->rt, id, &k)) != RK_OK)
            return rc;
        return rk_request_opts(
            cl->rt, k, opts, req, req_len, reply_hdr, reply, cap, reply_len);
    }
    memset(&f, 0, sizeof(f));
    f.kind = RK__CL_DATA;
    f.priority = opts->priority;
    f.type_id = opts->type_id;
    f.flags = RK_MSG_F_REQUEST;
    f.len = (uint32_t)req_len;
    f.target = px->target;
    f.aux = (int32_t)(CL_DIRECT | (uint32_t)slot);
    f.id = rk__next_id();
    w = &cl->wait[slot];
    waiter_arm(cl, slot, &f.id, px->rank, reply_hdr, reply, cap);
    if (req_len > UINT32_MAX) {
        rc = rk__fail(
            RK_EMSGSIZE, "rk_cluster_request: %zu-byte request", req_len);
    } else if (cl->multiple
        && RK__CL_BATCH_HDR + rk__cl_frame_size(f.len) <= CL_CALL_MAX
        && atomic_load_explicit(
               &cl->peers[px->rank].unsent, memory_order_acquire)
            == 0) {
        /* Nothing this process staged for the peer is waiting to be
         * sent: this request cannot overtake one. */
        rc = request_by_mpi(cl, slot, px->rank, &f, req, opts->timeout_ns);
        *reply_len = w->len;
        waiter_put(cl, slot);
        goto done;
    } else {
        deadline = rk__deadline(opts->timeout_ns);
        rc = stage_frame(cl, px->rank, 0, &f, req, opts->timeout_ns);
    }
    if (rc == RK_OK) {
        STAT(cl, forwarded, 1);
        rc = waiter_wait(cl, w, deadline);
        *reply_len = w->len;
    } else {
        pthread_mutex_lock(&w->lock);
        atomic_store_explicit(&w->state, W_FREE, memory_order_relaxed);
        pthread_mutex_unlock(&w->lock);
    }
    waiter_put(cl, slot);
done:
    switch (rc) {
    case RK_OK:
        return RK_OK;
    case RK_ETIMEDOUT:
        return rk__fail(
            rc, "rk_cluster_request: no reply from '%s' in time", id);
    case RK_EUNREACHABLE:
        if (px == NULL) /* not from request_local; nothing to add */
            return rc;
        return rk__fail(rc, "rk_cluster_request: kernel '%s': rank %d %s", id,
            px->rank, peer_fate(cl, px->rank));
    case RK_EMSGSIZE:
        return rk__fail(rc,
            "rk_cluster_request: %zu-byte reply from '%s', %zu-byte buffer",
            *reply_len, id, cap);
    default:
        if (px == NULL) /* request_local: the runtime's refusal and detail */
            return rc;
        return rk__fail(rc, "rk_cluster_request: kernel '%s' on rank %d: %s",
            id, px->rank, rk_strerror(rc));
    }
}

/* Frames staged per lock hold: the stage's limit is checked between
 * chunks, so a long batch waits for room as a proxy's runs do. */
#define CL_SEND_CHUNK 256

int
rk_cluster_send_batch(rk_cluster *cl, const char *id, uint32_t type_id,
    const void *base, size_t len, size_t n, uint8_t priority,
    int64_t timeout_ns, size_t *sent)
{
    const uint8_t *src = base;
    const cl_proxy *px;
    uint64_t deadline;
    rk__cl_frame f;
    rk_kernel k;
    size_t done = 0;
    int rc = RK_OK;

    if (sent != NULL)
        *sent = 0;
    if (cl == NULL || id == NULL || sent == NULL || (base == NULL && n != 0))
        return rk__fail(RK_EINVAL, "rk_cluster_send_batch: NULL argument");
    if ((px = proxy_named(cl, id)) == NULL) {
        if ((rc = rk_kernel_lookup(cl->rt, id, &k)) != RK_OK)
            return rc;
        return rk_send_batch(
            cl->rt, k, type_id, base, len, n, priority, timeout_ns, sent);
    }
    if (len > UINT32_MAX)
        return rk__fail(
            RK_EMSGSIZE, "rk_cluster_send_batch: %zu-byte message", len);
    deadline = rk__deadline(timeout_ns);
    memset(&f, 0, sizeof(f));
    f.kind = RK__CL_DATA;
    f.priority = priority;
    f.type_id = type_id;
    f.len = (uint32_t)len;
    f.target = px->target;
    f.aux = (int32_t)px->index; /* refusals go where a proxied send's go */
    while (done < n && rc == RK_OK) {
        size_t m = n - done < CL_SEND_CHUNK ? n - done : CL_SEND_CHUNK;
        size_t one = rk__cl_frame_size(f.len);
        cl_peer *p = &cl->peers[px->rank];
        uint8_t *dst = NULL;

        pthread_mutex_lock(&p->lock);
        rc = stage_reserve(cl, p, px->rank, 0, one * m, deadline, &dst);
        if (rc == RK_OK) {
            uint64_t now = rk_now_ns();
            for (size_t i = 0; i < m; i++) {
                f.id = rk__next_id();
                f.send_ns = now;
                rk__cl_frame_write(dst + i * one, &f, src + (done + i) * len);
            }
            atomic_fetch_add_explicit(
                &p->unsent, (uint32_t)m, memory_order_relaxed);
        }
        pthread_mutex_unlock(&p->lock);
        if (rc != RK_OK)
            break;
        wake_progress(cl);
        STAT(cl, forwarded, m);
        done += m;
    }
    *sent = done;
    if (rc == RK_EUNREACHABLE)
        return rk__fail(rc, "rk_cluster_send_batch: kernel '%s': rank %d %s",
            id, px->rank, peer_fate(cl, px->rank));
    return rc;
}

int
rk_cluster_stats_get(const rk_cluster *cl, rk_cluster_stats *out)
{
    if (cl == NULL || out == NULL)
        return rk__fail(RK_EINVAL, "rk_cluster_stats_get: NULL argument");
#define GET(f)                                                                \
    out->f = atomic_load_explicit(&cl->st.f, memory_order_relaxed)            \
        + atomic_load_explicit(&cl->pst.f, memory_order_relaxed)
    GET(forwarded);
    GET(sent_frames);
    GET(sent_batches);
    GET(received);
    GET(delivered);
    GET(rejected);
    GET(dropped);
    GET(replies_sent);
    GET(replies_received);
    GET(remote_errors);
    GET(unreachable);
    GET(credit_stalls);
    GET(idle_sleeps);
    GET(late_replies);
#undef GET
    for (int i = 0; i < CL_NWAIT; i++) {
        uint64_t sent = atomic_load_explicit(
                     &cl->wait[i].sent_by_mpi, memory_order_relaxed),
                 got = atomic_load_explicit(
                     &cl->wait[i].replies_by_mpi, memory_order_relaxed);
        /* A request by MPI is one frame in a batch of its own. */
        out->forwarded += sent;
        out->sent_batches += sent;
        out->sent_frames += sent;
        out->replies_received += got;
    }
    return RK_OK;
}
