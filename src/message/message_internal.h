/*
 * src/message/message_internal.h - shared by the message sources.
 */
#ifndef RK_SRC_MESSAGE_INTERNAL_H
#define RK_SRC_MESSAGE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ringkernel/message.h"

/* FNV-1a over n bytes, continuing from h. */
static inline uint64_t
rk__fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

/* Checks a descriptor (recursively, depth-limited): RK_EINVAL with a
 * detail on a malformed one. */
int rk__msgtype_validate(const rk_msgtype *t, int depth);

/* The part of rk__msgtype_validate() that encode and decode repeat on
 * every type they walk, since they accept unregistered types: a field
 * table, 1..RK_MSG_MAX_FIELDS fields (decode tracks them in a 64-bit
 * mask) and no field whose wire key is a reserved envelope key. O(fields)
 * length compares, no string scans. RK_EINVAL with a detail. */
int rk__msgtype_check_fields(const rk_msgtype *t);

/* Deepest nesting of message types accepted. */
#define RK__MSG_MAX_DEPTH 16

#endif /* RK_SRC_MESSAGE_INTERNAL_H */
