/*
 * src/queue/slotflag.h - the per-slot ready flag of the runtime's own
 * rings (a kernel's inbox lanes, queue/inbox_lanes.c, and its output
 * ring, runtime/outq.c).
 *
 * Why. A consumer of a ring_proto.h ring polls the producer's tail line,
 * then reads the slot: per message the tail line and the slot's lines
 * cross cores. A runtime frame is a 64-byte envelope and its payload, so
 * that is three lines each way where an 8-byte ck_ring ping-pong moves
 * two. Here the producer also marks each slot ready inside the slot's
 * first line, and the host-side consumers (the lanes' take, rk__outq_peek)
 * poll that flag instead of tail, so the tail line stays in the
 * producer's cache and a round trip moves the frame's lines only.
 *
 * The flag is the envelope's `reserved` field (bytes 62-63 of the slot,
 * the end of the first line), which users must see as 0. So READY is 0,
 * the value a delivered envelope carries anyway, and EMPTY is a non-zero
 * marker that only an unconsumed slot ever holds:
 *
 *   init      every slot EMPTY (before either side runs).
 *   producer  writes the payload, then the envelope except the flag, then
 *             stores the flag READY with release, then publishes tail
 *             (release) as ring_proto.h says: a consumer that reads tail
 *             instead (the closed paths, stats, a device) sees READY too.
 *   consumer  frames below a tail it read (acquire) are complete; at
 *             its position past that, it loads the slot's flag with
 *             acquire: READY means the whole frame is written (the
 *             release store above). It reads frames in place. When it
 *             hands a slot back it stores EMPTY (relaxed), before the
 *             release store that gives the room back (head for the
 *             output ring, `dequeued` for a lane).
 *
 * No lost or doubled message: the producer writes position p only after
 * an acquire load of the consumer's room word shows that p's slot was
 * given back (p - ring was released), and the EMPTY store is sequenced
 * before that release, so it happens-before the producer's READY store:
 * in the flag's modification order EMPTY (for p - ring) comes before
 * READY (for p). The consumer at p therefore reads either EMPTY (not yet
 * written; it never reads an older READY, because its own EMPTY store
 * is earlier in its program order) or READY for p, never p - ring's.
 * Within a lap the slot's flag changes only EMPTY -> READY (producer)
 * and READY -> EMPTY (consumer, after use), so each side waits for the
 * other and no frame is read twice or overwritten before it is read.
 * Order: the consumer takes frames in position order, each one known
 * complete by the tail it read or by its own flag, so frames come out in
 * the order they were published. A consumer that reads tail as well may
 * find it behind what the flags showed (the flag is stored first): it
 * keeps its cached tail at least its position (inbox_lanes.c, lane_backlog).
 *
 * The producer never writes the flag bytes with a plain store (the
 * envelope is copied up to the flag), because the consumer may be
 * polling them at that moment. The atomics are GCC/Clang __atomic
 * builtins on the plain uint16_t of the envelope: the slot memory is not
 * declared _Atomic (users read it through rk_msg_header), and these are
 * the C11 operations on an object of that size.
 */
#ifndef RK_SRC_QUEUE_SLOTFLAG_H
#define RK_SRC_QUEUE_SLOTFLAG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ringkernel/message.h"

/* Offset of the flag in a slot: the envelope's reserved field. */
#define RK__SLOT_FLAG_OFF offsetof(rk_msg_header, reserved)
/* A slot with no unconsumed frame (any non-zero value would do). */
#define RK__SLOT_EMPTY 0xFFFFu
#define RK__SLOT_READY 0u

_Static_assert(RK__SLOT_FLAG_OFF == RK_MSG_HEADER_SIZE - 2,
    "the flag is the last field of the envelope's line");

static inline uint16_t *
rk__slot_flag(unsigned char *slot)
{
    return (uint16_t *)(void *)(slot + RK__SLOT_FLAG_OFF);
}

/* Consumer: true when the slot holds a published frame. */
static inline bool
rk__slot_ready(const unsigned char *slot)
{
    /* Acquire pairs with the release store in rk__slot_write: the frame
     * is complete before the flag reads READY. */
    return __atomic_load_n(
               (const uint16_t *)(const void *)(slot + RK__SLOT_FLAG_OFF),
               __ATOMIC_ACQUIRE)
        == RK__SLOT_READY;
}

/* Consumer (or init): the slot is free again. Relaxed: ordered before the
 * producer's next write of the slot by the release store that gives the
 * room back (see the top of the file). */
static inline void
rk__slot_empty(unsigned char *slot)
{
    __atomic_store_n(rk__slot_flag(slot), RK__SLOT_EMPTY, __ATOMIC_RELAXED);
}

/* Producer: marks a slot whose payload and envelope (but its flag) are
 * written. */
static inline void
rk__slot_publish(unsigned char *slot)
{
    /* Release pairs with the acquire load in rk__slot_ready. */
    __atomic_store_n(rk__slot_flag(slot), RK__SLOT_READY, __ATOMIC_RELEASE);
}

/* Producer: writes one frame (a 64-byte envelope and len payload bytes)
 * into slot and publishes it. The payload first, then the envelope up to
 * the flag, then the flag: the envelope's line is written in one burst
 * with the flag, so a consumer polling it takes it once. */
static inline void
rk__slot_write(
    unsigned char *slot, const void *hdr, const void *payload, size_t len)
{
    if (len != 0)
        memcpy(slot + RK_MSG_HEADER_SIZE, payload, len);
    memcpy(slot, hdr, RK__SLOT_FLAG_OFF);
    rk__slot_publish(slot);
}

/* Init: every one of n slots, stride bytes apart, EMPTY. */
static inline void
rk__slots_init(unsigned char *base, size_t stride, size_t n)
{
    for (size_t i = 0; i < n; i++)
        rk__slot_empty(base + i * stride);
}

#endif /* RK_SRC_QUEUE_SLOTFLAG_H */
