/*
 * src/message/envelope.c - the 64-byte message header.
 *
 * The header struct's memory is its wire form on the little-endian hosts
 * we support (message.h refuses others), so write and parse are copies
 * plus checks.
 */
#include <string.h>

#include "common/common.h"
#include "envelope.h"
#include "ringkernel/message.h"

void
rk_msg_header_init(rk_msg_header *h, uint32_t type_id, uint8_t priority)
{
    if (h != NULL)
        rk__msg_header_fill(h, type_id, priority, rk_uuid_v7(), rk_now_ns());
}

void
rk_msg_reply(rk_msg_header *h, const rk_msg_header *orig)
{
    if (h != NULL && orig != NULL)
        h->correlation_id = orig->message_id;
}

void
rk_msg_with_correlation(rk_msg_header *h, const rk_uuid *corr)
{
    if (h == NULL)
        return;
    if (corr == NULL)
        memset(&h->correlation_id, 0, sizeof(h->correlation_id));
    else
        h->correlation_id = *corr;
}

int
rk_msg_header_write(const rk_msg_header *h, void *dst, size_t cap)
{
    if (h == NULL || dst == NULL)
        return rk__fail(RK_EINVAL, "rk_msg_header_write: NULL %s",
            h == NULL ? "header" : "destination");
    if (cap < RK_MSG_HEADER_SIZE)
        return rk__fail(
            RK_EMSGSIZE, "header needs 64 bytes, slot has %zu", cap);
    memcpy(dst, h, RK_MSG_HEADER_SIZE);
    return RK_OK;
}

int
rk_msg_header_parse(const void *buf, size_t len, rk_msg_header *out)
{
    rk_msg_header h;

    if (buf == NULL || out == NULL)
        return rk__fail(RK_EINVAL, "rk_msg_header_parse: NULL argument");
    if (len < RK_MSG_HEADER_SIZE)
        return rk__fail(RK_ETRUNCATED, "header needs 64 bytes, got %zu", len);
    memcpy(&h, buf, sizeof(h));
    if (h.magic != RK_MSG_MAGIC)
        return rk__fail(RK_EDECODE, "bad header magic 0x%04x", h.magic);
    if (h.version != RK_MSG_VERSION)
        return rk__fail(RK_ENOTSUP, "header version %u, expected %u",
            h.version, RK_MSG_VERSION);
    if (h.reserved != 0)
        return rk__fail(
            RK_EDECODE, "header reserved field is 0x%04x", h.reserved);
    if ((h.flags & RK_MSG_F_ENCODING_MASK) == RK_MSG_F_ENCODING_MASK)
        return rk__fail(RK_EDECODE, "header flags both msgpack and fixed");
    if ((h.flags & 0xffu & ~RK_MSG_F_ENCODING_MASK) != 0)
        return rk__fail(
            RK_EDECODE, "header has unknown flags 0x%02x", h.flags & 0xffu);
    if (h.payload_len > len - RK_MSG_HEADER_SIZE)
        return rk__fail(RK_ETRUNCATED,
            "header says %u payload bytes, slot holds %zu", h.payload_len,
            len - RK_MSG_HEADER_SIZE);
    *out = h;
    return RK_OK;
}
