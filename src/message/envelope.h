/*
 * src/message/envelope.h - filling a new message's header, shared by
 * rk_msg_header_init (envelope.c) and, where it takes it up, the runtime's
 * rk__header (src/runtime/ids.h), which differ only in where the id and
 * the time come from.
 */
#ifndef RK_SRC_MESSAGE_ENVELOPE_H
#define RK_SRC_MESSAGE_ENVELOPE_H

#include <stdint.h>

#include "ringkernel/message.h"

/* Fills h for a new message of type_id at priority, with message id id and
 * send time send_ns (0: none); every other field zero (the header has no
 * padding: message.h checks its layout). */
static inline void
rk__msg_header_fill(rk_msg_header *h, uint32_t type_id, uint8_t priority,
    rk_uuid id, uint64_t send_ns)
{
    *h = (rk_msg_header) { .magic = RK_MSG_MAGIC,
        .version = RK_MSG_VERSION,
        .priority = priority,
        .type_id = type_id,
        .message_id = id,
        .send_ns = send_ns };
}

#endif /* RK_SRC_MESSAGE_ENVELOPE_H */
