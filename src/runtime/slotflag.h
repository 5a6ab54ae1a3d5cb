/*
 * src/runtime/slotflag.h - the per-slot ready flag of the runtime's own
 * rings (a kernel's input lanes, inq.c, and its output ring, outq.c).
 *
 * Why. A consumer of a ring_proto.h ring polls the producer's tail line,
 * then reads the slot: per message the tail line and the slot's lines
 * cross cores. A runtime frame is a 64-byte envelope and its payload, so
 * that is three lines each way where an 8-byte ck_ring ping-pong moves
 * two. Here the producer also marks each slot ready inside the slot's
 * first line, and the host-side consumers (rk__inq_take, rk__outq_peek)
 * poll that flag instead of tail, so the tail line stays in the
 * producer's cache and a round trip moves the frame's lines only. The
 * consumer never writes a slot (as before): its reads leave the lines
 * shared, and the producer's next write of a slot takes it back once.
 *
 * The flag is the envelope's `reserved` field (bytes 62-63 of the slot,
 * the end of the first line), which users must see as 0. So READY is 0,
 * the value a delivered envelope carries anyway, and EMPTY is a non-zero
 * marker that only a slot not (yet) holding its current frame carries.
 * The producer, and only it, writes the flag:
 *
 *   init      slots 0 and 1 EMPTY (before either side runs).
 *   producer  for position q: writes the payload, then the envelope up to
 *             the flag, then stores the flag READY with release (then
 *             tail, as ring_proto.h says: a consumer that reads tail
 *             instead, such as the closed paths and stats, sees READY
 *             too); after that it stores EMPTY (relaxed) into the flag of
 *             slot q + 2. A run of frames stores the EMPTY flags of the
 *             slots two past each frame before it writes the run.
 *   consumer  at position c, loads slot c's flag with acquire: READY
 *             means frame c is complete; it reads the frame in place and
 *             gives the slot back through the ring's room word as before.
 *
 * The ring keeps two slots of slack past what the producer may fill (a
 * lane's ring holds capacity + hold + 2, the output ring capacity + 2),
 * so slot q + 2 was given back before the producer writes position q:
 * its EMPTY store never touches a frame the consumer still reads (the
 * consumer's reads happen-before, through the room word's release and
 * the producer's acquire).
 *
 * No message lost, doubled or read early: slot c's EMPTY store (after
 * READY(c - 2), or init for c < 2) precedes READY(c - 1) in the
 * producer's program order, and the consumer polls slot c only after its
 * acquire load saw READY(c - 1). So by coherence it reads EMPTY or a
 * later value, that is READY(c), never the READY of the frame the slot
 * held a lap earlier; and READY(c), by release/acquire, comes with all
 * of frame c. The consumer takes only a contiguous run of READY slots
 * from its position, in order, so frames come out in publication order.
 *
 * The producer never writes the flag bytes with a plain store (the
 * envelope is copied up to the flag), because the consumer may be
 * polling them at that moment. The atomics are GCC/Clang __atomic
 * builtins on the plain uint16_t of the envelope: the slot memory is not
 * declared _Atomic (users read it through rk_msg_header), and these are
 * the C11 operations on an object of that size.
 */
#ifndef RK_SRC_RUNTIME_SLOTFLAG_H
#define RK_SRC_RUNTIME_SLOTFLAG_H

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

/* Producer (or init): the slot holds no frame of the current lap.
 * Relaxed: ordered before the consumer's poll of the slot by the release
 * store of the preceding slot's READY (see the top of the file). */
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
 * with the flag, so a consumer polling it takes it once. The caller then
 * marks the slot two positions on EMPTY (after tail: off the critical
 * path of this frame). */
static inline void
rk__slot_write(
    unsigned char *slot, const void *hdr, const void *payload, size_t len)
{
    if (len != 0)
        memcpy(slot + RK_MSG_HEADER_SIZE, payload, len);
    memcpy(slot, hdr, RK__SLOT_FLAG_OFF);
    rk__slot_publish(slot);
}

/* Slots of slack the producer keeps past what it may fill. */
#define RK__SLOT_SLACK 2u

/* Init: the first two slots EMPTY (the producer marks the others). */
static inline void
rk__slots_init(unsigned char *base, size_t stride)
{
    rk__slot_empty(base);
    rk__slot_empty(base + stride);
}

#endif /* RK_SRC_RUNTIME_SLOTFLAG_H */
