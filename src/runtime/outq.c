/*
 * src/runtime/outq.c - the output queue (see outq.h).
 *
 * Parking uses the same handshake as the kernel's input (backend.h): the
 * waiter reads its seq word, publishes parked = 1, issues a seq_cst fence,
 * re-checks the ring and only then sleeps on seq; the other side, after
 * changing the ring, issues a seq_cst fence and wakes the waiter only if it
 * sees parked set. One of the two always sees the other.
 */
#include <sched.h>
#include <string.h>

#include "common/barrier.h"
#include "common/common.h"
#include "common/futex.h"
#include "common/spin.h"
#include "ringkernel/message.h"
#include "runtime/outq.h"

#define SPIN_CHECK 64
#define SPIN_YIELD 1024

int
rk__outq_init(rk__outq *q, uint32_t capacity, size_t slot_size)
{
    memset(q, 0, sizeof(*q));
    q->slot_size = slot_size;
    rk__spin_init(&q->prod_spin);
    return rk_spsc_create(&q->ring, capacity, (uint32_t)slot_size);
}

void
rk__outq_fini(rk__outq *q)
{
    rk_spsc_destroy(q->ring);
    q->ring = NULL;
}

/* The changing side of the handshake: wakes the other side if it parked. */
static void
notify(_Atomic uint32_t *parked, _Atomic uint32_t *seq)
{
    /* Pairs with the fence in park(): orders our ring update before the
     * load of parked. */
    rk__light_barrier();
    if (atomic_load_explicit(parked, memory_order_relaxed)) {
        /* Release pairs with the acquire load of seq in park(). */
        atomic_fetch_add_explicit(seq, 1, memory_order_release);
        rk__futex_wake(seq, INT32_MAX);
    }
}

/* The waiting side: sleeps unless ready() (re-checked after publishing
 * parked) or the queue closed. Returns RK_ETIMEDOUT at the deadline. */
static int
park(rk__outq *q, _Atomic uint32_t *parked, _Atomic uint32_t *seq,
    bool (*ready)(rk__outq *), uint64_t deadline)
{
    /* Acquire pairs with the release bump in notify()/close. */
    uint32_t s = atomic_load_explicit(seq, memory_order_acquire);
    int rc = RK_OK;

    atomic_store_explicit(parked, 1, memory_order_seq_cst);
    rk__heavy_barrier();
    if (!ready(q) && !atomic_load_explicit(&q->closed, memory_order_acquire))
        rc = rk__futex_wait(seq, s, deadline);
    atomic_store_explicit(parked, 0, memory_order_relaxed);
    return rc;
}

static bool
has_room(rk__outq *q)
{
    return rk_spsc_reserve(q->ring) != NULL;
}

static bool
has_frame(rk__outq *q)
{
    return rk_spsc_peek(q->ring) != NULL;
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

int
rk__outq_send(
    rk__outq *q, const void *hdr, size_t hlen, const void *payload, size_t len)
{
    unsigned char *slot;

    RK_ASSERT(hlen + len <= q->slot_size);
    for (;;) {
        /* Acquire pairs with the seq_cst store in rk__outq_close. */
        if (atomic_load_explicit(&q->closed, memory_order_acquire))
            return RK_ECLOSED;
        if ((slot = rk_spsc_reserve(q->ring)) != NULL)
            break;
        /* Spin first: the host usually frees a slot within microseconds
         * (common/spin.h). */
        if (rk__spin_wait(&q->prod_spin, room_or_closed, q, 0, UINT64_MAX))
            continue;
        (void)park(q, &q->prod_parked, &q->prod_seq, has_room, UINT64_MAX);
    }
    if (rk__likely(hlen == RK_MSG_HEADER_SIZE))
        memcpy(slot, hdr, RK_MSG_HEADER_SIZE); /* inlined, no call */
    else
        memcpy(slot, hdr, hlen);
    if (len != 0)
        memcpy(slot + hlen, payload, len);
    rk_spsc_commit(q->ring);
    notify(&q->cons_parked, &q->cons_seq);
    return RK_OK;
}

const unsigned char *
rk__outq_peek(rk__outq *q, size_t *flen)
{
    const unsigned char *slot = rk_spsc_peek(q->ring);
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
    rk_spsc_release(q->ring);
    notify(&q->prod_parked, &q->prod_seq);
}

int
rk__outq_wait(rk__outq *q, int64_t spin_ns, uint64_t deadline)
{
    uint64_t until = 0;

    for (uint32_t i = 1; spin_ns > 0; i++) {
        if (has_frame(q))
            return RK_OK;
        rk__cpu_relax();
        if (i % SPIN_CHECK == 0) {
            uint64_t now = rk_now_ns();
            if (until == 0)
                until = now + (uint64_t)spin_ns;
            if (now >= until || now >= deadline)
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
        if (rk_now_ns() >= deadline)
            return RK_ETIMEDOUT;
        (void)park(q, &q->cons_parked, &q->cons_seq, has_frame, deadline);
    }
}

void
rk__outq_close(rk__outq *q)
{
    /* seq_cst pairs with the acquire loads of closed; the bumps wake any
     * parked side (their futex value changes). */
    atomic_store_explicit(&q->closed, 1, memory_order_seq_cst);
    atomic_fetch_add_explicit(&q->cons_seq, 1, memory_order_release);
    atomic_fetch_add_explicit(&q->prod_seq, 1, memory_order_release);
    rk__futex_wake(&q->cons_seq, INT32_MAX);
    rk__futex_wake(&q->prod_seq, INT32_MAX);
}
