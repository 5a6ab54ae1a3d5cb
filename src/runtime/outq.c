/*
 * src/runtime/outq.c - the output queue (see outq.h).
 *
 * Both sides wait with the eventcount of common/ec.h: the waiter prepares,
 * re-checks the ring (and closed), then waits or cancels; the other side
 * notifies after changing the ring. Producer (kernel) notifies cons_ec
 * after each commit; the consumer (host) notifies prod_ec after each
 * release; close notifies both.
 *
 * An event loop waits on an eventfd instead (rk_kernel_output_arm). The
 * handshake is the eventcount's (common/ec.h), with fd_armed in the role
 * of "waiters":
 *
 *   host (rk__outq_arm)                 kernel (rk__outq_send)
 *     fd_armed = 1                        commit the frame
 *     heavy barrier                       light barrier (in the notify)
 *     frame there or closed?              fd_armed set?
 *       yes: disarm, "ready", no wait       yes: exchange it to 0; if it
 *       no: wait for the eventfd                 was 1, write the eventfd
 *
 * The two barriers act as a full fence on both sides, so by the Dekker
 * argument either the host's re-check sees the frame or the kernel's load
 * sees fd_armed == 1 and writes. Close is the same with `closed` for the
 * frame (seq_cst store, then the exchange). The exchange makes the write
 * one-shot: one per arm, whoever of producer, close or the host's own
 * disarm gets there first; a write that races with a disarm leaves the
 * eventfd readable once more than needed, a spurious wake-up the host
 * handles like any other (it reads the eventfd and receives RK_EEMPTY).
 * With nobody armed the producer pays one load of a line it already
 * read and a predicted branch.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/common.h"
#include "common/ec.h"
#include "common/spin.h"
#include "queue/vring.h"
#include "ringkernel/message.h"
#include "runtime/outq.h"
#include "queue/slotflag.h"

#define SPIN_CHECK 64
#define SPIN_YIELD 128 /* about 4 us: see rk__outq_wait */
/* The least the host's spin adapts down to: a little more than a parked
 * kernel takes to wake and answer, so that a ping-pong with both sides
 * adapted down does not settle into both parking on every message. */
#define SPIN_FLOOR_NS 8000u
#define SLOT_ALIGN    64u

/* The ring for capacity: the power of two at or above it. The producer
 * admits exactly capacity frames beyond the consumer's head (out_reserve),
 * so any capacity is held exactly. */
static uint64_t
ring_slots(uint32_t capacity)
{
    return rk__pow2_at_least(capacity);
}

/* The ring's stride for slot_size, or 0 (with a detail) if out of range. */
static uint32_t
ring_stride(uint32_t capacity, size_t slot_size)
{
    uint64_t st;

    if (capacity == 0 || capacity > (UINT32_C(1) << 31)) {
        rk__fail(RK_EINVAL, "output_capacity %u is out of range [1, 2^31]",
            capacity);
        return 0;
    }
    if (slot_size == 0 || slot_size > UINT32_MAX - SLOT_ALIGN + 1) {
        rk__fail(RK_EINVAL,
            "output slot size (64 + max_payload) %zu is out of range [1, %u]",
            slot_size, UINT32_MAX - SLOT_ALIGN + 1);
        return 0;
    }
    st = ((uint64_t)slot_size + SLOT_ALIGN - 1) & ~(uint64_t)(SLOT_ALIGN - 1);
    if (ring_slots(capacity) * st > RK__QUEUE_MAX_BYTES) {
        rk__fail(RK_EINVAL,
            "output_capacity %u x slot size %llu is too large (limit %llu "
            "bytes)",
            capacity, (unsigned long long)st,
            (unsigned long long)RK__QUEUE_MAX_BYTES);
        return 0;
    }
    return (uint32_t)st;
}

size_t
rk__outq_ring_bytes(uint32_t capacity, size_t slot_size)
{
    uint32_t st = ring_stride(capacity, slot_size);

    return st == 0 ? 0 : RK__OUTQ_HDR + (size_t)ring_slots(capacity) * st;
}

int
rk__outq_init_at(rk__outq *q, void *mem, uint32_t capacity, size_t slot_size)
{
    uint32_t st, ring;
    int rc;

    memset(q, 0, sizeof(*q));
    atomic_init(&q->efd, -1);
    q->slot_size = slot_size;
    rk__ec_init(&q->cons_ec);
    rk__ec_init(&q->prod_ec);
    rk__spin_init(&q->prod_spin);
    if ((st = ring_stride(capacity, slot_size)) == 0)
        return RK_EINVAL;
    ring = (uint32_t)ring_slots(capacity);
    q->cap = capacity;
    if (mem == NULL) {
        size_t bytes = RK__OUTQ_HDR + (size_t)ring * st;
        if ((mem = aligned_alloc(SLOT_ALIGN, bytes)) == NULL)
            return rk__fail(RK_ENOMEM, "output queue: %zu bytes", bytes);
        q->owned = mem;
    }
    RK_ASSERT((uintptr_t)mem % SLOT_ALIGN == 0);
    q->ring = mem;
    rc = rk_spsc_init(q->ring, (unsigned char *)mem + RK__OUTQ_HDR, ring, st);
    if (rc != RK_OK) {
        free(q->owned);
        q->owned = NULL;
        q->ring = NULL;
        return rc;
    }
    /* Every slot EMPTY: the host polls the slots' ready flags
     * (queue/slotflag.h). */
    rk__slots_init((unsigned char *)mem + RK__OUTQ_HDR, st, ring);
    return RK_OK;
}

int
rk__outq_init(rk__outq *q, uint32_t capacity, size_t slot_size)
{
    return rk__outq_init_at(q, NULL, capacity, slot_size);
}

void
rk__outq_fini(rk__outq *q)
{
    int fd = atomic_load_explicit(&q->efd, memory_order_relaxed);

    if (fd >= 0)
        (void)close(fd);
    atomic_store_explicit(&q->efd, -1, memory_order_relaxed);
    free(q->owned); /* caller memory (init_at) is the caller's */
    q->owned = NULL;
    q->ring = NULL;
}

static bool
is_closed(rk__outq *q)
{
    /* Acquire pairs with the seq_cst store in rk__outq_close. */
    return atomic_load_explicit(&q->closed, memory_order_acquire) != 0;
}

/* The waiting side: sleeps unless ready() (re-checked after prepare) or
 * the queue closed. Returns RK_ETIMEDOUT at the deadline. */
static int
park(rk__outq *q, rk__ec *ec, bool (*ready)(rk__outq *), uint64_t deadline)
{
    uint32_t key = rk__ec_prepare(ec);

    if (ready(q) || is_closed(q)) {
        rk__ec_cancel(ec);
        return RK_OK;
    }
    return rk__ec_wait(ec, key, deadline);
}

/* Producer: the slot for the next frame, or NULL while capacity frames
 * are queued (ring_proto.h's room test, against capacity instead of the
 * ring's size: the ring may be larger). */
static unsigned char *
out_reserve(rk__outq *q)
{
    rk_spsc *r = q->ring;
    uint64_t pos = r->prod.pos; /* read before the acquire (ring_proto.h) */

    if (pos - r->prod.peer >= q->cap) {
        /* Acquire pairs with the consumer's release store of head
         * (rk__outq_release): its reads of the freed slots, and its EMPTY
         * flags there, are done before we overwrite them. */
        r->prod.peer = rk_ring_load_acquire(&r->ctrl.head);
        if (pos - r->prod.peer >= q->cap)
            return NULL;
    }
    return rk_ring_slot(&r->prod, pos);
}

static bool
has_room(rk__outq *q)
{
    return out_reserve(q) != NULL;
}

/* The consumer's oldest frame, or NULL: the slot at its position (head,
 * which only it writes) once that slot's flag reads READY. tail is not
 * read (queue/slotflag.h). */
static unsigned char *
ready_slot(rk__outq *q)
{
    rk_spsc *r = q->ring;
    uint64_t pos = rk__spsc_sync_cons(r);
    unsigned char *slot = rk_ring_slot(&r->cons, pos);

    if (!rk__slot_ready(slot))
        return NULL;
    /* ring_proto.h's cached tail stays no older than what we take. */
    if (r->cons.peer <= pos)
        r->cons.peer = pos + 1;
    return slot;
}

static bool
has_frame(rk__outq *q)
{
    return ready_slot(q) != NULL;
}

/* The producer's spin test (rk__spin_attempt). */
static int
room_or_closed(void *arg)
{
    rk__outq *q = arg;

    /* Acquire pairs with the seq_cst store in rk__outq_close. */
    return has_room(q)
        || atomic_load_explicit(&q->closed, memory_order_acquire);
}

/* The one write of an arm (see the top of the file). */
static void
fd_signal(rk__outq *q)
{
    /* seq_cst: after the close's seq_cst store of closed; the acquire
     * half pairs with the release store in rk__outq_arm, so efd is the
     * one the host armed. */
    if (atomic_exchange_explicit(&q->fd_armed, 0, memory_order_seq_cst)) {
        uint64_t one = 1;
        int fd = atomic_load_explicit(&q->efd, memory_order_relaxed);
        /* An eventfd write fails only when the counter would overflow,
         * and then it is readable anyway. */
        (void)!write(fd, &one, sizeof(one));
    }
}

int
rk__outq_send(
    rk__outq *q, const void *hdr, size_t hlen, const void *payload, size_t len)
{
    return rk__outq_send_until(q, hdr, hlen, payload, len, RK_WAIT_FOREVER);
}

int
rk__outq_send_until(rk__outq *q, const void *hdr, size_t hlen,
    const void *payload, size_t len, int64_t timeout_ns)
{
    unsigned char *slot;
    uint64_t deadline = 0;

    RK_ASSERT(hlen + len <= q->slot_size);
    for (;;) {
        /* Acquire pairs with the seq_cst store in rk__outq_close. */
        if (atomic_load_explicit(&q->closed, memory_order_acquire))
            return RK_ECLOSED;
        if ((slot = out_reserve(q)) != NULL)
            break;
        if (timeout_ns == RK_NO_WAIT)
            return RK_EFULL;
        if (deadline == 0)
            deadline = rk__deadline(timeout_ns);
        else if (rk_now_ns() >= deadline)
            return RK_ETIMEDOUT;
        /* Spin first: the host usually frees a slot within microseconds
         * (common/spin.h). */
        if (rk__spin_wait(&q->prod_spin, room_or_closed, q, 0, deadline))
            continue;
        (void)park(q, &q->prod_ec, has_room, deadline);
    }
    /* The frame and its ready flag (queue/slotflag.h), then tail. */
    RK_ASSERT(hlen == RK_MSG_HEADER_SIZE);
    (void)hlen; /* the envelope is always 64 bytes */
    rk__slot_write(slot, hdr, payload, len);
    rk_spsc_commit(q->ring);
    /* All: host receivers may be several (each takes one frame and
     * re-checks). After the publication (ec.h). */
    rk__ec_notify_all(&q->cons_ec);
    /* After notify_all's light barrier (see the top of the file). */
    if (rk__unlikely(
            atomic_load_explicit(&q->fd_armed, memory_order_relaxed) != 0))
        fd_signal(q);
    return RK_OK;
}

const unsigned char *
rk__outq_peek(rk__outq *q, size_t *flen)
{
    const unsigned char *slot = ready_slot(q);
    uint32_t plen;

    if (slot == NULL)
        return NULL;
    /* The frame length is in the header. */
    memcpy(&plen, slot + offsetof(rk_msg_header, payload_len), sizeof(plen));
    *flen = RK_MSG_HEADER_SIZE + (size_t)plen;
    RK_ASSERT(*flen <= q->slot_size);
    return slot;
}

void
rk__outq_release(rk__outq *q)
{
    rk_spsc *r = q->ring;

    /* EMPTY before the release store of head that frees the slot
     * (queue/slotflag.h). */
    rk__slot_empty(rk_ring_slot(&r->cons, rk__spsc_sync_cons(r)));
    rk_spsc_release(r);
    rk__ec_notify(&q->prod_ec); /* after the release (ec.h) */
}

/*
 * The host's spin adapts as a kernel's receive spin does (backend/cpu
 * body.c): a spin that found the frame restores the full spin_ns, one
 * that ran out halves the budget, down to SPIN_FLOOR_NS. A host whose
 * replies come within a few microseconds keeps spinning; one that waits
 * for a kernel that takes long, or for a peer on another rank, soon parks
 * after a short spin instead of holding a core the threads it waits for
 * may need; the spin yields every few microseconds for the same reason.
 */
int
rk__outq_wait(rk__outq *q, int64_t spin_ns, uint64_t deadline)
{
    uint64_t until = 0;
    uint32_t b = atomic_load_explicit(&q->cons_spin_ns, memory_order_relaxed);
    int64_t budget = b != 0 && (int64_t)b < spin_ns ? (int64_t)b : spin_ns;

    for (uint32_t i = 1; budget > 0; i++) {
        if (has_frame(q)) {
            if (i > 1 && b != 0)
                atomic_store_explicit(
                    &q->cons_spin_ns, 0, memory_order_relaxed);
            return RK_OK;
        }
        rk__cpu_relax();
        if (i % SPIN_CHECK == 0) {
            uint64_t now = rk_now_ns();
            if (until == 0)
                until = now + (uint64_t)budget;
            if (now >= until) {
                int64_t half = budget / 2;
                if (half < SPIN_FLOOR_NS)
                    half = SPIN_FLOOR_NS;
                if (half < spin_ns && half <= (int64_t)UINT32_MAX)
                    atomic_store_explicit(&q->cons_spin_ns, (uint32_t)half,
                        memory_order_relaxed);
                break;
            }
            if (now >= deadline)
                break;
            if (i % SPIN_YIELD == 0)
                sched_yield();
        }
    }
    for (;;) {
        if (has_frame(q))
            return RK_OK;
        if (atomic_load_explicit(&q->closed, memory_order_acquire))
            return has_frame(q) ? RK_OK : RK_ECLOSED;
        if (deadline == 0 || rk_now_ns() >= deadline) /* 0: no wait */
            return RK_ETIMEDOUT;
        (void)park(q, &q->cons_ec, has_frame, deadline);
    }
}

void
rk__outq_close(rk__outq *q)
{
    /* seq_cst pairs with the acquire loads of closed; the notifies wake
     * any waiting side (ec.h). */
    atomic_store_explicit(&q->closed, 1, memory_order_seq_cst);
    rk__ec_notify_all(&q->cons_ec);
    rk__ec_notify_all(&q->prod_ec);
    fd_signal(q);
}

int
rk__outq_fd(rk__outq *q, int *fd)
{
    int cur = atomic_load_explicit(&q->efd, memory_order_acquire), nfd;

    if (cur >= 0) {
        *fd = cur;
        return RK_OK;
    }
    nfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (nfd < 0)
        return rk__fail(errno == ENOMEM ? RK_ENOMEM : RK_EINTERNAL,
            "eventfd: %s", strerror(errno));
    /* acq_rel: the first host to install it publishes it; a loser takes
     * the winner's and closes its own. */
    if (!atomic_compare_exchange_strong_explicit(
            &q->efd, &cur, nfd, memory_order_acq_rel, memory_order_acquire)) {
        (void)close(nfd);
        nfd = cur;
    }
    *fd = nfd;
    return RK_OK;
}

bool
rk__outq_arm(rk__outq *q)
{
    /* Release pairs with the exchange in fd_signal (efd is set). */
    atomic_store_explicit(&q->fd_armed, 1, memory_order_release);
    /* Pairs with the light barrier after the producer's commit. */
    rk__heavy_barrier();
    if (!has_frame(q) && !is_closed(q))
        return true;
    /* Ready already: withdraw (a write that got in first leaves one
     * spurious wake-up). */
    atomic_store_explicit(&q->fd_armed, 0, memory_order_relaxed);
    return false;
}
