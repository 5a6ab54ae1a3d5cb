/*
 * src/runtime/ids.c - message ids: per-thread blocks of UUID v7 ids (see
 * rk__id_gen in internal.h) and the frame filler that stamps a run of
 * ids into consecutive frames.
 */
#include <string.h>

#include "runtime/ids.h"
#include "queue/slotflag.h"

/* Message ids: see rk__id_gen in internal.h. */
_Thread_local rk__idgen rk__id_gen = { { { 0 } }, RK__ID_BLOCK };

void
rk__id_refill(void)
{
    rk__id_gen.base = rk_uuid_v7();
    rk__id_gen.next = 0;
}

uint32_t
rk__id_run(uint32_t want, rk_uuid *first, uint32_t *seq)
{
    uint32_t got;

    if (rk__unlikely(rk__id_gen.next == RK__ID_BLOCK))
        rk__id_refill();
    got = RK__ID_BLOCK - rk__id_gen.next;
    got = want < got ? want : got;
    *first = rk__id_gen.base;
    *seq = rk__id_gen.next;
    rk__id_put(&first->b[12], rk__id_gen.next);
    rk__id_gen.next += got;
    return got;
}

/* k frames of one id run (ids seq, seq + 1, ...). Inlined per payload
 * size, so the common sizes copy with a few vector moves, no call. A
 * flagged frame (a lane slot, queue/slotflag.h) is written payload
 * first, then the envelope up to its ready flag, then the flag. */
static inline void
fill_run(unsigned char *dst, size_t stride, const rk_msg_header *h,
    const unsigned char *src, size_t len, uint32_t seq, uint32_t k,
    bool flagged)
{
    for (uint32_t j = 0; j < k; j++, dst += stride, src += len) {
        /* The header is copied as it is and only the id's counter bytes
         * are patched per frame. */
        if (flagged) {
            if (len != 0)
                memcpy(dst + sizeof(*h), src, len);
            memcpy(dst, h, RK__SLOT_FLAG_OFF);
            rk__id_put(
                dst + offsetof(rk_msg_header, message_id) + 12, seq + j);
            rk__slot_publish(dst);
            continue;
        }
        memcpy(dst, h, sizeof(*h));
        rk__id_put(dst + offsetof(rk_msg_header, message_id) + 12, seq + j);
        if (len != 0)
            memcpy(dst + sizeof(*h), src, len);
    }
}

void
rk__fill_frames(unsigned char *dst, size_t stride, rk_msg_header *h,
    const unsigned char *src, size_t len, size_t n, bool flagged)
{
    while (n != 0) {
        uint32_t seq,
            k = rk__id_run(n > UINT32_MAX ? UINT32_MAX : (uint32_t)n,
                &h->message_id, &seq);
        if (len == 64)
            fill_run(dst, stride, h, src, 64, seq, k, flagged);
        else if (len == 32)
            fill_run(dst, stride, h, src, 32, seq, k, flagged);
        else
            fill_run(dst, stride, h, src, len, seq, k, flagged);
        dst += (size_t)k * stride;
        src += (size_t)k * len;
        n -= k;
    }
}
