/*
 * src/queue/vring.c - rk_mpsc and rk_mpmc on the vring engine (vring.h).
 */
#include "queue/vring.h"

#include <stdlib.h>
#include <string.h>

#include "ringkernel/queue.h"

int
rk__vring_init(
    rk__vring *r, uint32_t capacity, uint32_t slot_size, const char *what)
{
    int rc = rk__queue_check_geometry(capacity, slot_size, what);
    if (rc != RK_OK)
        return rc;
    /* With one slot, "holds the message of pos" (seq == pos + 1) and "free
     * for pos + 1" would be the same sequence value. */
    if (capacity < 2)
        return rk__fail(RK_EINVAL, "%s: capacity must be at least 2", what);
    if (slot_size > UINT32_MAX - 2 * RK__VSLOT_HDR)
        return rk__fail(
            RK_EINVAL, "%s: slot_size %u too large", what, slot_size);
    /* Header + payload, rounded to the header's alignment. */
    uint32_t stride = (RK__VSLOT_HDR + slot_size + RK__VSLOT_HDR - 1)
        & ~(RK__VSLOT_HDR - 1);
    size_t bytes = (size_t)capacity * stride;
    bytes = (bytes + RK_CACHELINE - 1) & ~(size_t)(RK_CACHELINE - 1);
    memset(r, 0, sizeof(*r));
    r->slots = aligned_alloc(RK_CACHELINE, bytes);
    if (r->slots == NULL)
        return rk__fail(RK_ENOMEM, "%s: %zu bytes of slots", what, bytes);
    r->mask = capacity - 1;
    r->slot_size = slot_size;
    r->stride = stride;
    for (uint64_t i = 0; i < capacity; i++) {
        rk__vslot *s = rk__vring_slot(r, i);
        atomic_init(&s->seq, i);
        atomic_init(&s->len, 0);
        s->pad = 0;
    }
    atomic_init(&r->tail, 0);
    atomic_init(&r->head, 0);
    return RK_OK;
}

void
rk__vring_fini(rk__vring *r)
{
    free(r->slots);
    r->slots = NULL;
}

/* ---------------------------------------------------------------- batch */

/* Takes up to n consecutive ready positions (several consumers: CAS). */
static uint32_t
vring_take_batch(rk__vring *r, uint32_t n, uint64_t *first, bool mc)
{
    uint64_t p = atomic_load_explicit(&r->head, memory_order_relaxed);
    for (;;) {
        uint32_t k = 0;
        while (k < n) {
            /* Acquire pairs with rk__vring_publish (payload visible). */
            uint64_t seq = atomic_load_explicit(
                &rk__vring_slot(r, p + k)->seq, memory_order_acquire);
            if (seq != p + k + 1)
                break;
            k++;
        }
        if (!mc) {
            if (k > 0)
                atomic_store_explicit(&r->head, p + k, memory_order_relaxed);
            *first = p;
            return k;
        }
        if (k == 0) {
            uint64_t seq = atomic_load_explicit(
                &rk__vring_slot(r, p)->seq, memory_order_relaxed);
            if ((int64_t)(seq - (p + 1)) < 0)
                return 0; /* empty */
            p = atomic_load_explicit(&r->head, memory_order_relaxed);
            continue;
        }
        if (atomic_compare_exchange_weak_explicit(&r->head, &p, p + k,
                memory_order_relaxed, memory_order_relaxed)) {
            *first = p;
            return k;
        }
    }
}

static uint32_t
vring_enqueue_batch(rk__vring *r, const void *elems, uint32_t n)
{
    uint64_t p;
    uint32_t k = n ? rk__vring_claim_batch_mp(r, n, &p) : 0;
    const unsigned char *src = elems;
    for (uint32_t i = 0; i < k; i++)
        memcpy(rk__vslot_data(rk__vring_slot(r, p + i)),
            src + (size_t)i * r->slot_size, r->slot_size);
    for (uint32_t i = 0; i < k; i++)
        rk__vring_publish(r, p + i);
    return k;
}

static uint32_t
vring_dequeue_batch(rk__vring *r, void *elems, uint32_t n, bool mc)
{
    uint64_t p;
    uint32_t k = n ? vring_take_batch(r, n, &p, mc) : 0;
    unsigned char *dst = elems;
    for (uint32_t i = 0; i < k; i++) {
        memcpy(dst + (size_t)i * r->slot_size,
            rk__vslot_data(rk__vring_slot(r, p + i)), r->slot_size);
        rk__vring_free(r, p + i);
    }
    return k;
}

/* ---------------------------------------------------------------- MPSC */

struct rk_mpsc {
    rk__vring r;
};
struct rk_mpmc {
    rk__vring r;
};

/* Allocates the wrapper and its ring; both queue kinds share this. */
static int
vring_create(void **out, size_t size, uint32_t capacity, uint32_t slot_size,
    const char *what)
{
    if (out == NULL)
        return rk__fail(RK_EINVAL, "%s: NULL out", what);
    *out = NULL;
    rk__vring *r = aligned_alloc(RK_CACHELINE, size);
    if (r == NULL)
        return rk__fail(RK_ENOMEM, "%s: queue", what);
    int rc = rk__vring_init(r, capacity, slot_size, what);
    if (rc != RK_OK) {
        free(r);
        return rc;
    }
    *out = r;
    return RK_OK;
}

static void *
vring_reserve(rk__vring *r, uint64_t *ticket)
{
    uint64_t p;
    if (ticket == NULL || !rk__vring_claim_mp(r, &p))
        return NULL;
    *ticket = p;
    return rk__vslot_data(rk__vring_slot(r, p));
}

static int
vring_try_enqueue(rk__vring *r, const void *elem)
{
    uint64_t p;
    if (!rk__vring_claim_mp(r, &p))
        return RK_EFULL;
    memcpy(rk__vslot_data(rk__vring_slot(r, p)), elem, r->slot_size);
    rk__vring_publish(r, p);
    return RK_OK;
}

int
rk_mpsc_create(rk_mpsc **out, uint32_t capacity, uint32_t slot_size)
{
    return vring_create(
        (void **)out, sizeof(rk_mpsc), capacity, slot_size, "rk_mpsc");
}

void
rk_mpsc_destroy(rk_mpsc *q)
{
    if (q == NULL)
        return;
    rk__vring_fini(&q->r);
    free(q);
}

int
rk_mpsc_try_enqueue(rk_mpsc *q, const void *elem)
{
    return vring_try_enqueue(&q->r, elem);
}

int
rk_mpsc_try_dequeue(rk_mpsc *q, void *elem)
{
    uint64_t p;
    if (!rk__vring_take_sc(&q->r, &p))
        return RK_EEMPTY;
    memcpy(elem, rk__vslot_data(rk__vring_slot(&q->r, p)), q->r.slot_size);
    rk__vring_free(&q->r, p);
    return RK_OK;
}

uint32_t
rk_mpsc_enqueue_batch(rk_mpsc *q, const void *elems, uint32_t n)
{
    return vring_enqueue_batch(&q->r, elems, n);
}

uint32_t
rk_mpsc_dequeue_batch(rk_mpsc *q, void *elems, uint32_t n)
{
    return vring_dequeue_batch(&q->r, elems, n, false);
}

void *
rk_mpsc_reserve(rk_mpsc *q, uint64_t *ticket)
{
    return vring_reserve(&q->r, ticket);
}

void
rk_mpsc_commit(rk_mpsc *q, uint64_t ticket)
{
    rk__vring_publish(&q->r, ticket);
}

size_t
rk_mpsc_depth(const rk_mpsc *q)
{
    return (size_t)rk__vring_depth(&q->r);
}

/* ---------------------------------------------------------------- MPMC */

int
rk_mpmc_create(rk_mpmc **out, uint32_t capacity, uint32_t slot_size)
{
    return vring_create(
        (void **)out, sizeof(rk_mpmc), capacity, slot_size, "rk_mpmc");
}

void
rk_mpmc_destroy(rk_mpmc *q)
{
    if (q == NULL)
        return;
    rk__vring_fini(&q->r);
    free(q);
}

int
rk_mpmc_try_enqueue(rk_mpmc *q, const void *elem)
{
    return vring_try_enqueue(&q->r, elem);
}

int
rk_mpmc_try_dequeue(rk_mpmc *q, void *elem)
{
    uint64_t p;
    if (!rk__vring_take_mc(&q->r, &p))
        return RK_EEMPTY;
    memcpy(elem, rk__vslot_data(rk__vring_slot(&q->r, p)), q->r.slot_size);
    rk__vring_free(&q->r, p);
    return RK_OK;
}

uint32_t
rk_mpmc_enqueue_batch(rk_mpmc *q, const void *elems, uint32_t n)
{
    return vring_enqueue_batch(&q->r, elems, n);
}

uint32_t
rk_mpmc_dequeue_batch(rk_mpmc *q, void *elems, uint32_t n)
{
    return vring_dequeue_batch(&q->r, elems, n, true);
}

void *
rk_mpmc_reserve(rk_mpmc *q, uint64_t *ticket)
{
    return vring_reserve(&q->r, ticket);
}

void
rk_mpmc_commit(rk_mpmc *q, uint64_t ticket)
{
    rk__vring_publish(&q->r, ticket);
}

size_t
rk_mpmc_depth(const rk_mpmc *q)
{
    return (size_t)rk__vring_depth(&q->r);
}
