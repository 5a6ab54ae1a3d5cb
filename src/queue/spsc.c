/*
 * src/queue/spsc.c - the out-of-line parts of rk_spsc. The hot paths are
 * static inline in ringkernel/queue.h, on top of ringkernel/ring_proto.h.
 */
#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "queue/vring.h"
#include "ringkernel/queue.h"

/* The control block layout is part of the host/GPU contract: pin it. */
_Static_assert(sizeof(rk_ring_ctrl) == 3 * RK_RING_LINE, "ctrl size");
_Static_assert(offsetof(rk_ring_ctrl, tail) == 0, "tail offset");
_Static_assert(offsetof(rk_ring_ctrl, head) == RK_RING_LINE, "head offset");
_Static_assert(offsetof(rk_ring_ctrl, magic) == 2 * RK_RING_LINE, "magic");
_Static_assert(sizeof(_Atomic uint64_t) == 8 && alignof(_Atomic uint64_t) == 8,
    "atomic u64 must be a plain u64 in memory");
_Static_assert(offsetof(rk_spsc, prod) % RK_RING_LINE == 0, "prod line");
_Static_assert(offsetof(rk_spsc, cons) % RK_RING_LINE == 0, "cons line");

int
rk__queue_check_geometry(
    uint32_t capacity, uint32_t slot_size, const char *what)
{
    if (!rk__is_pow2(capacity) || capacity > (UINT32_C(1) << 31))
        return rk__fail(RK_EINVAL,
            "%s: capacity %u is not a power of two in [1, 2^31]", what,
            capacity);
    if (slot_size == 0)
        return rk__fail(RK_EINVAL, "%s: slot_size must be > 0", what);
    if ((uint64_t)capacity * slot_size > RK__QUEUE_MAX_BYTES)
        return rk__fail(RK_EINVAL, "%s: %u slots of %u bytes is too large",
            what, capacity, slot_size);
    return RK_OK;
}

size_t
rk_spsc_buffer_size(uint32_t capacity, uint32_t slot_size)
{
    uint64_t n = (uint64_t)capacity * slot_size;
    return n > RK__QUEUE_MAX_BYTES ? 0 : (size_t)n;
}

int
rk_spsc_init(rk_spsc *q, void *buffer, uint32_t capacity, uint32_t slot_size)
{
    if (q == NULL || buffer == NULL)
        return rk__fail(RK_EINVAL, "rk_spsc_init: NULL %s",
            q == NULL ? "queue" : "buffer");
    int rc = rk__queue_check_geometry(capacity, slot_size, "rk_spsc");
    if (rc != RK_OK)
        return rc;
    memset(q, 0, sizeof(*q));
    rk_ring_init(&q->ctrl, capacity, slot_size);
    rk_ring_prod_attach(&q->ctrl, &q->prod, buffer);
    rk_ring_cons_attach(&q->ctrl, &q->cons, buffer);
    q->prod_limit = q->prod.peer + capacity;
    return RK_OK;
}

int
rk_spsc_create(rk_spsc **out, uint32_t capacity, uint32_t slot_size)
{
    if (out == NULL)
        return rk__fail(RK_EINVAL, "rk_spsc_create: NULL out");
    *out = NULL;
    int rc = rk__queue_check_geometry(capacity, slot_size, "rk_spsc");
    if (rc != RK_OK)
        return rc;
    size_t bytes = rk_spsc_buffer_size(capacity, slot_size);
    bytes = (bytes + RK_CACHELINE - 1) & ~(size_t)(RK_CACHELINE - 1);
    rk_spsc *q = aligned_alloc(RK_CACHELINE, sizeof(*q));
    void *buf = aligned_alloc(RK_CACHELINE, bytes);
    if (q == NULL || buf == NULL) {
        free(q);
        free(buf);
        return rk__fail(RK_ENOMEM, "rk_spsc_create: %zu bytes", bytes);
    }
    rk_spsc_init(q, buf, capacity, slot_size);
    q->owned = buf;
    *out = q;
    return RK_OK;
}

void
rk_spsc_destroy(rk_spsc *q)
{
    if (q == NULL)
        return;
    free(q->owned);
    free(q);
}

uint32_t
rk_spsc_enqueue_batch(rk_spsc *q, const void *elems, uint32_t n)
{
    if (q == NULL || elems == NULL || n == 0)
        return 0; /* nothing to move; memcpy must not see NULL */
    rk_ring_side *s = &q->prod;
    uint32_t k = rk_ring_prod_space(&q->ctrl, s, n);
    const unsigned char *src = elems;
    /* Copy in at most two runs: up to the end of the array, then from 0. */
    uint64_t first = s->mask + 1 - (s->pos & s->mask);
    uint32_t run = k < first ? k : (uint32_t)first;
    memcpy(rk_ring_slot(s, s->pos), src, (size_t)run * s->slot_size);
    if (k > run)
        memcpy(s->base, src + (size_t)run * s->slot_size,
            (size_t)(k - run) * s->slot_size);
    if (k > 0)
        rk_ring_prod_publish(&q->ctrl, s, k);
    return k;
}

uint32_t
rk_spsc_dequeue_batch(rk_spsc *q, void *elems, uint32_t n)
{
    if (q == NULL || elems == NULL || n == 0)
        return 0;
    rk_ring_side *s = &q->cons;
    rk__spsc_sync_cons(q); /* single-element calls keep no cons.pos */
    uint32_t k = rk_ring_cons_avail(&q->ctrl, s, n);
    unsigned char *dst = elems;
    uint64_t first = s->mask + 1 - (s->pos & s->mask);
    uint32_t run = k < first ? k : (uint32_t)first;
    memcpy(dst, rk_ring_slot(s, s->pos), (size_t)run * s->slot_size);
    if (k > run)
        memcpy(dst + (size_t)run * s->slot_size, s->base,
            (size_t)(k - run) * s->slot_size);
    if (k > 0)
        rk_ring_cons_release(&q->ctrl, s, k);
    return k;
}

int
rk_spsc_check_slot(const rk_spsc *q, size_t size, size_t align)
{
    if (q == NULL)
        return rk__fail(RK_EINVAL, "rk_spsc_check_slot: NULL queue");
    if (q->ctrl.magic != RK_RING_MAGIC)
        return rk__fail(RK_EINVAL, "rk_spsc_check_slot: not initialised");
    if (q->ctrl.slot_size != size)
        return rk__fail(RK_EINVAL,
            "rk_spsc: slot_size %u is not the element size %zu",
            q->ctrl.slot_size, size);
    if (align != 0 && (uintptr_t)q->prod.base % align != 0)
        return rk__fail(
            RK_EINVAL, "rk_spsc: slot array not aligned to %zu bytes", align);
    return RK_OK;
}

size_t
rk_spsc_depth(const rk_spsc *q)
{
    if (q == NULL)
        return 0;
    uint64_t h = rk_ring_load_relaxed(&q->ctrl.head);
    uint64_t t = rk_ring_load_relaxed(&q->ctrl.tail);
    return t > h ? (size_t)(t - h) : 0;
}
