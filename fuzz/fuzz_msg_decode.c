/*
 * libFuzzer: typed msgpack decode (rk_msg_decode) of untrusted frames.
 * The first byte picks the type (msg_types.c: every element kind in
 * variable-length arrays, every fixed kind, 64 fields, nesting to the
 * limit and past it) in its low four bits and strict mode in bit 4; the
 * rest is the frame. A frame that decodes must re-encode (unless a string
 * is not UTF-8, which the decoder refuses, so never) and decode again to
 * the same values; the nesting chain one level too deep never decodes.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_support.h"
#include "msg_types.c"

static void
check_roundtrip(const rk_msgtype *t, const void *obj)
{
    static unsigned char buf[1 << 16];
    unsigned char *again = malloc(t->size);
    size_t len;

    if (rk_msg_encode(t, NULL, obj, buf, sizeof(buf), &len) != RK_OK)
        abort();
    if (rk_msg_decode(t, buf, len, again, NULL, RK_MSG_STRICT) != RK_OK)
        abort();
    if (!fz_equal(t, obj, again))
        abort();
    rk_msg_free(t, again);
    free(again);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const rk_msgtype *t;
    rk_msg_header h;
    void *obj;
    unsigned sel;

    if (size < 1)
        return 0;
    sel = data[0];
    t = fz_types[(sel & 15) % FZ_NTYPES];
    obj = malloc(t->size);
    if (rk_msg_decode(
            t, data + 1, size - 1, obj, &h, (sel & 16) ? RK_MSG_STRICT : 0)
        == RK_OK) {
        if (t == &fz_d17_msgtype)
            abort(); /* deeper than RK__MSG_MAX_DEPTH */
        check_roundtrip(t, obj);
        rk_msg_free(t, obj);
    }
    free(obj);
    return 0;
}
