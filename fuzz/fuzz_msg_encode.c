/*
 * libFuzzer: rk_msg_encode round-tripped through rk_msg_decode. The fuzz
 * bytes build an object of one of msg_types.c's types field by field
 * (first byte: type in the low four bits; bit 4 masks strings to ASCII);
 * the rest fills scalars, arrays, lengths and contents). The two must
 * agree: an object encodes unless a string is not UTF-8 (then
 * RK_EENCODE), the frame it encodes to decodes, strictly, to the same
 * values and message id, measuring gives the same length, and a buffer
 * one byte short is RK_EMSGSIZE. Any disagreement aborts.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_support.h"
#include "msg_types.c"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static unsigned char buf[1 << 16];
    struct fz_in in = { data, size };
    struct fz_arena arena = { { 0 }, 0 };
    const rk_msgtype *t;
    rk_msg_header h, got;
    unsigned sel = fz_byte(&in);
    size_t len = 0, mlen = 0, short_len;
    void *obj, *back;
    int rc;

    t = fz_types[(sel & 15) % FZ_NTYPES];
    obj = malloc(t->size);
    back = malloc(t->size);
    if (!fz_fill(&in, t, obj, (sel & 16) != 0, &arena, 0))
        goto out;
    rk_msg_header_init(&h, t->id, (uint8_t)fz_byte(&in));
    fz_bytes(&in, h.correlation_id.b, sizeof(h.correlation_id.b));
    rc = rk_msg_encode(t, &h, obj, buf, sizeof(buf), &len);
    if (t == &fz_d17_msgtype) {
        if (rc != RK_EENCODE)
            abort(); /* deeper than the decoder takes */
        goto out;
    }
    if (rc == RK_EENCODE && fz_has_bad_utf8(t, obj))
        goto out;
    if (rc != RK_OK)
        abort();
    if (rk_msg_encode(t, &h, obj, NULL, 0, &mlen) != RK_OK || mlen != len)
        abort();
    short_len = len - 1;
    if (rk_msg_encode(t, &h, obj, buf, short_len, &mlen) != RK_EMSGSIZE
        || mlen != len)
        abort();
    rk_msg_encode(t, &h, obj, buf, sizeof(buf), &len);
    if (rk_msg_decode(t, buf, len, back, &got, RK_MSG_STRICT) != RK_OK)
        abort();
    if (!fz_equal(t, obj, back)
        || memcmp(&got.message_id, &h.message_id, 16) != 0
        || memcmp(&got.correlation_id, &h.correlation_id, 16) != 0
        || got.priority != h.priority)
        abort();
    rk_msg_free(t, back);
out:
    fz_arena_free(&arena);
    free(obj);
    free(back);
    return 0;
}
