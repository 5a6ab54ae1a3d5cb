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
    const uint32_t align = RK__VSLOT_HDR;

    int rc = rk__queue_check_geometry(capacity, slot_size, what);
    if (rc != RK_OK)
        return rc;
    /* With one slot, "holds the message of pos" (seq == pos + 1) and "free
     * for pos + 1" would be the same sequence value. */
    if (capacity < 2)
        return rk__fail(RK_EINVAL, "%s: capacity must be at least 2", what);
    if (slot_size > UINT32_MAX - RK__VSLOT_HDR - align)
        return rk__fail(
            RK_EINVAL, "%s: slot_size %u too large", what, slot_size);
    /* Header + payload, rounded to the alignment. */
    uint32_t stride = (RK__VSLOT_HDR + slot_size + align - 1) & ~(align - 1);
    if ((uint64_t)capacity * stride > RK__QUEUE_MAX_BYTES)
        return rk__fail(RK_EINVAL, "%s: %u slots of %u bytes is too large",
            what, capacity, stride);
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
    atomic_init(&r->head_hint, 0);
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

/* ---------------------------------------------------------------- queues */

/*
 * rk_mpsc and rk_mpmc share one layout: the ring, then the counters that
 * are not positions (enqueued = tail and dequeued = head come for free).
 * The counter line is read by producers on every enqueue (the high-water
 * test) and written only on a failure or a possible new high.
 */
typedef struct vqueue {
    rk__vring r;
    _Alignas(RK_CACHELINE) _Atomic uint64_t rejected; /* failed enqueues */
    rk__hwmark hw;                                    /* removals: head */
} vqueue;

struct rk_mpsc {
    vqueue v;
};
struct rk_mpmc {
    vqueue v;
};

/* The handle's queue, or NULL (with a detail) for a NULL handle. */
#define VQ(q, what) ((q) != NULL ? &(q)->v : vq_null(what))

static vqueue *
vq_null(const char *what)
{
    rk__fail(RK_EINVAL, "%s: NULL queue", what);
    return NULL;
}

/* A producer claimed up to position total - 1: track the high water. */
static inline void
vq_note(vqueue *v, uint64_t total)
{
    if (rk__hw_maybe(&v->hw, total))
        rk__hw_raise(&v->hw, total,
            atomic_load_explicit(&v->r.head, memory_order_relaxed),
            v->r.mask + 1);
}

static void
vq_refused(vqueue *v, uint64_t n)
{
    atomic_fetch_add_explicit(&v->rejected, n, memory_order_relaxed);
}

/* Whether a batch call has work: a queue, n > 0 and a buffer. */
static bool
vq_batch_ok(const vqueue *v, const void *elems, uint32_t n, const char *what)
{
    if (v == NULL || n == 0)
        return false;
    if (elems == NULL)
        return rk__fail(RK_EINVAL, "%s: NULL elements", what) == RK_OK;
    return true;
}

static uint32_t
vq_enqueue_batch(vqueue *v, const void *elems, uint32_t n, const char *what)
{
    if (!vq_batch_ok(v, elems, n, what))
        return 0;
    rk__vring *r = &v->r;
    uint64_t p;
    uint32_t k = rk__vring_claim_batch_mp(r, n, &p);
    const unsigned char *src = elems;
    for (uint32_t i = 0; i < k; i++)
        memcpy(rk__vslot_data(rk__vring_slot(r, p + i)),
            src + (size_t)i * r->slot_size, r->slot_size);
    for (uint32_t i = 0; i < k; i++)
        rk__vring_publish(r, p + i);
    if (k > 0)
        vq_note(v, p + k);
    if (k < n)
        vq_refused(v, n - k);
    return k;
}

static uint32_t
vq_dequeue_batch(vqueue *v, void *elems, uint32_t n, bool mc, const char *what)
{
    if (!vq_batch_ok(v, elems, n, what))
        return 0;
    rk__vring *r = &v->r;
    uint64_t p;
    uint32_t k = vring_take_batch(r, n, &p, mc);
    unsigned char *dst = elems;
    for (uint32_t i = 0; i < k; i++) {
        memcpy(dst + (size_t)i * r->slot_size,
            rk__vslot_data(rk__vring_slot(r, p + i)), r->slot_size);
        rk__vring_free(r, p + i);
    }
    return k;
}

/* Allocates the wrapper and its ring; both queue kinds share this. */
static int
vq_create(void **out, uint32_t capacity, uint32_t slot_size, const char *what)
{
    if (out == NULL)
        return rk__fail(RK_EINVAL, "%s: NULL out", what);
    *out = NULL;
    vqueue *v = aligned_alloc(RK_CACHELINE, sizeof(*v));
    if (v == NULL)
        return rk__fail(RK_ENOMEM, "%s: queue", what);
    int rc = rk__vring_init(&v->r, capacity, slot_size, what);
    if (rc != RK_OK) {
        free(v);
        return rc;
    }
    atomic_init(&v->rejected, 0);
    atomic_init(&v->hw.high_water, 0);
    atomic_init(&v->hw.removed_hint, 0);
    *out = v;
    return RK_OK;
}

static void
vq_destroy(vqueue *v)
{
    if (v == NULL)
        return;
    rk__vring_fini(&v->r);
    free(v);
}

static void *
vq_reserve(vqueue *v, uint64_t *ticket, const char *what)
{
    uint64_t p;
    if (v == NULL)
        return NULL;
    if (ticket == NULL) {
        rk__fail(RK_EINVAL, "%s: NULL ticket", what);
        return NULL;
    }
    if (!rk__vring_claim_mp(&v->r, &p)) {
        vq_refused(v, 1);
        return NULL;
    }
    vq_note(v, p + 1);
    *ticket = p;
    return rk__vslot_data(rk__vring_slot(&v->r, p));
}

static void
vq_commit(vqueue *v, uint64_t ticket)
{
    if (v != NULL)
        rk__vring_publish(&v->r, ticket);
}

static int
vq_try_enqueue(vqueue *v, const void *elem, const char *what)
{
    uint64_t p;
    if (v == NULL || elem == NULL)
        return v == NULL ? RK_EINVAL
                         : rk__fail(RK_EINVAL, "%s: NULL element", what);
    if (!rk__vring_claim_mp(&v->r, &p)) {
        vq_refused(v, 1);
        return RK_EFULL;
    }
    memcpy(rk__vslot_data(rk__vring_slot(&v->r, p)), elem, v->r.slot_size);
    rk__vring_publish(&v->r, p);
    vq_note(v, p + 1);
    return RK_OK;
}

static int
vq_try_dequeue(vqueue *v, void *elem, bool mc, const char *what)
{
    uint64_t p;
    if (v == NULL || elem == NULL)
        return v == NULL ? RK_EINVAL
                         : rk__fail(RK_EINVAL, "%s: NULL element", what);
    if (!(mc ? rk__vring_take_mc(&v->r, &p) != NULL
             : rk__vring_take_sc(&v->r, &p)))
        return RK_EEMPTY;
    memcpy(elem, rk__vslot_data(rk__vring_slot(&v->r, p)), v->r.slot_size);
    rk__vring_free(&v->r, p);
    return RK_OK;
}

static size_t
vq_depth(const vqueue *v)
{
    return v == NULL ? 0 : (size_t)rk__vring_depth(&v->r);
}

static void
vq_stats(const vqueue *v, rk_queue_stats *out)
{
    if (out == NULL)
        return;
    memset(out, 0, sizeof(*out));
    if (v == NULL)
        return;
    /* Head first: it never passes tail, so depth stays >= 0. */
    out->dequeued = atomic_load_explicit(&v->r.head, memory_order_relaxed);
    out->enqueued = atomic_load_explicit(&v->r.tail, memory_order_relaxed);
    out->rejected = atomic_load_explicit(&v->rejected, memory_order_relaxed);
    out->high_water
        = atomic_load_explicit(&v->hw.high_water, memory_order_relaxed);
    out->depth
        = out->enqueued > out->dequeued ? out->enqueued - out->dequeued : 0;
}

/* ------------------------------------------------------- MPSC, MPMC */

/*
 * The public calls of both kinds, written once: they differ only in their
 * name and in whether several consumers take (mc: a CAS on head).
 */
#define VQ_API(kind, mc)                                                      \
    int rk_##kind##_create(                                                   \
        rk_##kind **out, uint32_t capacity, uint32_t slot_size)               \
    {                                                                         \
        return vq_create((void **)out, capacity, slot_size, "rk_" #kind);     \
    }                                                                         \
    void rk_##kind##_destroy(rk_##kind *q)                                    \
    {                                                                         \
        vq_destroy(q != NULL ? &q->v : NULL);                                 \
    }                                                                         \
    int rk_##kind##_try_enqueue(rk_##kind *q, const void *elem)               \
    {                                                                         \
        return vq_try_enqueue(VQ(q, "rk_" #kind), elem, "rk_" #kind);         \
    }                                                                         \
    int rk_##kind##_try_dequeue(rk_##kind *q, void *elem)                     \
    {                                                                         \
        return vq_try_dequeue(VQ(q, "rk_" #kind), elem, mc, "rk_" #kind);     \
    }                                                                         \
    uint32_t rk_##kind##_enqueue_batch(                                       \
        rk_##kind *q, const void *elems, uint32_t n)                          \
    {                                                                         \
        return vq_enqueue_batch(VQ(q, "rk_" #kind), elems, n, "rk_" #kind);   \
    }                                                                         \
    uint32_t rk_##kind##_dequeue_batch(rk_##kind *q, void *elems, uint32_t n) \
    {                                                                         \
        return vq_dequeue_batch(                                              \
            VQ(q, "rk_" #kind), elems, n, mc, "rk_" #kind);                   \
    }                                                                         \
    void *rk_##kind##_reserve(rk_##kind *q, uint64_t *ticket)                 \
    {                                                                         \
        return vq_reserve(VQ(q, "rk_" #kind), ticket, "rk_" #kind);           \
    }                                                                         \
    void rk_##kind##_commit(rk_##kind *q, uint64_t ticket)                    \
    {                                                                         \
        vq_commit(VQ(q, "rk_" #kind), ticket);                                \
    }                                                                         \
    size_t rk_##kind##_depth(const rk_##kind *q)                              \
    {                                                                         \
        return vq_depth(q != NULL ? &q->v : NULL);                            \
    }                                                                         \
    void rk_##kind##_stats(const rk_##kind *q, rk_queue_stats *out)           \
    {                                                                         \
        vq_stats(q != NULL ? &q->v : NULL, out);                              \
    }

VQ_API(mpsc, false)
VQ_API(mpmc, true)
