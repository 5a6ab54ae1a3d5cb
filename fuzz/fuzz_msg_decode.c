/*
 * libFuzzer: typed msgpack decode (rk_msg_decode) of untrusted frames.
 * The first byte picks the type and strictness; the rest is the frame.
 * A frame that decodes must re-encode and decode to the same values.
 */
#include <stdlib.h>
#include <string.h>

#include "../tests/support/msg_test_types.c"
#include "ringkernel/ringkernel.h"

static void
check_roundtrip(const rk_msgtype *t, void *obj)
{
    static unsigned char buf[1 << 16];
    unsigned char *again = malloc(t->size);
    size_t len;

    if (rk_msg_encode(t, NULL, obj, buf, sizeof(buf), &len) != RK_OK)
        abort();
    if (rk_msg_decode(t, buf, len, again, NULL, RK_MSG_STRICT) != RK_OK)
        abort();
    rk_msg_free(t, again);
    free(again);
}

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static const rk_msgtype *const types[] = {
        &rkt_all_msgtype, &rkt_point_msgtype, &rkt_particle_msgtype,
        &rkt_mixed_msgtype
    };
    const rk_msgtype *t;
    rk_msg_header h;
    void *obj;
    unsigned sel;

    if (size < 1)
        return 0;
    sel = data[0];
    t = types[sel % 4];
    obj = malloc(t->size);
    if (rk_msg_decode(t, data + 1, size - 1, obj, &h,
                      (sel & 4) ? RK_MSG_STRICT : 0)
        == RK_OK) {
        check_roundtrip(t, obj);
        rk_msg_free(t, obj);
    }
    free(obj);
    return 0;
}
