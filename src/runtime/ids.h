/*
 * src/runtime/ids.h - message ids and headers for new messages, inline on
 * every send's path (ids.c has the out-of-line parts).
 */
#ifndef RK_SRC_RUNTIME_IDS_H
#define RK_SRC_RUNTIME_IDS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/common.h"
#include "ringkernel/message.h"

/* Reserves up to want (>= 1) consecutive ids of this thread and returns
 * how many. They share *first but for its last 4 bytes, a big-endian
 * counter that is *seq for the first: id i of the run is *first with
 * rk__id_put(&id.b[12], *seq + i). Batch senders stamp a run per copy. */
uint32_t rk__id_run(uint32_t want, rk_uuid *first, uint32_t *seq);

/* Writes n frames at dst, stride bytes apart: *h with a fresh id each
 * (h->message_id is left as the last one's), then payload i, len bytes at
 * src + i * len. flagged: the slots are a lane's, with ready flags
 * (queue/slotflag.h): each frame is written up to its flag, which is
 * then stored READY with release; otherwise the whole envelope is
 * copied. */
void rk__fill_frames(unsigned char *dst, size_t stride, rk_msg_header *h,
    const unsigned char *src, size_t len, size_t n, bool flagged);

static inline void
rk__id_put(uint8_t *low4, uint32_t n)
{
    low4[0] = (uint8_t)(n >> 24);
    low4[1] = (uint8_t)(n >> 16);
    low4[2] = (uint8_t)(n >> 8);
    low4[3] = (uint8_t)n;
}
/*
 * Message ids. rk_uuid_v7() costs a clock read and a random draw; the
 * runtime takes one every RK__ID_BLOCK ids per thread and numbers the
 * block in its low 32 (random) bits. The (time, counter) prefix of every
 * base is unique on its thread, so ids stay unique and increase on each
 * thread; across threads they are as unique as v7 counters seeded at
 * random. The state is per thread (no lock, no atomic); the common case
 * is inline, on every send's path.
 */
#define RK__ID_BLOCK 4096u

typedef struct rk__idgen {
    rk_uuid base;
    uint32_t next;
} rk__idgen;

/* Hidden: not part of the library's ABI, and a hidden TLS variable is
 * reached without a symbol lookup from inside the shared library. */
extern _Thread_local rk__idgen rk__id_gen
    __attribute__((visibility("hidden")));

/* Starts this thread's next block (out of line: once per RK__ID_BLOCK). */
void rk__id_refill(void);

/* In a forked child: the forking thread's copy, the only thread there,
 * would go on numbering its parent's block (the same ids); it starts a
 * new one. Called by the runtime's atfork handler (calls.c), registered
 * at the first rk_runtime_create, before any id is drawn. */
static inline void
rk__id_fork_child(void)
{
    rk__id_gen.next = RK__ID_BLOCK;
}

/* A fresh message id. */
static inline rk_uuid
rk__next_id(void)
{
    rk_uuid u;

    if (rk__unlikely(rk__id_gen.next == RK__ID_BLOCK))
        rk__id_refill();
    u = rk__id_gen.base;
    rk__id_put(&u.b[12], rk__id_gen.next++);
    return u;
}

/* Fills a header for a new message. send_ns 0 leaves no timestamp. */
static inline void
rk__header(rk_msg_header *h, uint32_t type_id, uint8_t prio, uint64_t send_ns,
    uint32_t sender)
{
    memset(h, 0, sizeof(*h));
    h->magic = RK_MSG_MAGIC;
    h->version = RK_MSG_VERSION;
    h->priority = prio;
    h->type_id = type_id;
    h->message_id = rk__next_id();
    h->send_ns = send_ns;
    h->sender = sender;
}

/* A forwarded message's envelope (rk_send_frame, rk_publish_frame): the
 * caller's h, made valid for a payload of len bytes and stamped send_ns. */
static inline void
rk__forwarded_header(
    rk_msg_header *out, const rk_msg_header *h, size_t len, uint64_t send_ns)
{
    *out = *h;
    out->magic = RK_MSG_MAGIC;
    out->version = RK_MSG_VERSION;
    out->payload_len = (uint32_t)len;
    out->send_ns = send_ns;
    out->sender = 0;
    out->reserved = 0;
}

#endif /* RK_SRC_RUNTIME_IDS_H */
