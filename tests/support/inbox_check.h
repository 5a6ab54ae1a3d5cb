/*
 * tests/support/inbox_check.h - fixtures shared by test_queue_inbox and
 * test_queue_inbox_layout (the kernel's inbox, src/queue/inbox.h, and
 * output queue, src/runtime/outq.h): queue configurations, sending and
 * taking 8-byte frames. Header-only; one copy per test program; include
 * it after <cmocka.h>.
 */
#ifndef RK_TEST_INBOX_CHECK_H
#define RK_TEST_INBOX_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/common.h"
#include "ringkernel/message.h"
#include "queue/inbox.h"

#ifdef RK_DEBUG
#define SCALE 1u
#else
#define SCALE 10u
#endif

/* The three kinds: a single-producer lane, the general inbox (lanes
 * behind the lock, four with bands) and DROP_OLDEST's rk_mqueue. */
static inline rk_mqueue_config
cfg_of(uint32_t cap, rk_backpressure bp, bool bands, bool sp)
{
    rk_mqueue_config c = { .capacity = cap,
        .slot_size = RK_MSG_HEADER_SIZE + 8,
        .backpressure = bp,
        .priority_bands = bands,
        .single_producer = sp };
    return c;
}

/* Sends a frame whose payload is v (8 bytes) at priority prio. */
static inline int
send_u64(rk__inbox *q, uint64_t v, uint8_t prio, int64_t timeout)
{
    rk_msg_header h;

    memset(&h, 0, sizeof(h));
    h.priority = prio;
    h.payload_len = 8;
    return rk__inbox_send(q, &h, sizeof(h), &v, 8, prio, timeout, false);
}

/* rk_send_batch's way in: n frames, each h with a fresh id and payload i
 * of len bytes at base, written in place (inbox.h, send_fill). */
typedef struct many {
    rk_msg_header *h;
    const unsigned char *src;
    size_t len;
} many;

static inline void
fill_many(void *arg, size_t first, unsigned char *dst, size_t stride,
    size_t k, bool flagged)
{
    many *m = arg;

    rk__fill_frames(
        dst, stride, m->h, m->src + first * m->len, m->len, k, flagged);
}

static inline int
send_many(rk__inbox *q, rk_msg_header *h, const void *base, size_t len,
    size_t n, int64_t timeout_ns, size_t *sent)
{
    many m = { h, base, len };

    return rk__inbox_send_fill(q, h->priority,
        (uint32_t)(RK_MSG_HEADER_SIZE + len), n, fill_many, &m, timeout_ns,
        sent);
}

static inline uint64_t
frame_u64(const rk__inbox_batch *b, size_t i)
{
    const unsigned char *f = b->frames + i * b->stride;
    uint64_t v;
    uint32_t plen;

    memcpy(&plen, f + offsetof(rk_msg_header, payload_len), 4);
    assert_int_equal(plen, 8);
    memcpy(&v, f + RK_MSG_HEADER_SIZE, 8);
    return v;
}

/* Takes one batch (up to max), checks it is in place and aligned, returns
 * its size. */
static inline size_t
take(rk__inbox *q, size_t max, rk__inbox_batch *b)
{
    assert_int_equal(rk__inbox_take(q, max, b), RK_OK);
    assert_true(b->in_place);
    assert_true(b->n >= 1 && b->n <= max);
    /* Headers are 8-byte aligned at least, lanes 64 (issue 10, 7). */
    assert_int_equal((uintptr_t)b->frames % 8, 0);
    assert_int_equal(b->stride % 8, 0);
    return b->n;
}


#endif /* RK_TEST_INBOX_CHECK_H */
