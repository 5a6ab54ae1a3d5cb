/*
 * libFuzzer: rk_msg_header_check (and rk_msg_header_parse before it) on
 * untrusted envelopes against each type of msg_types.c (the first byte
 * picks it; the next 64 are the header, zero-padded). RK_OK exactly when
 * type id and version match the expected type; otherwise RK_ETYPE with a
 * detail. Half of the registered types are registered, so unknown ids
 * and known-but-other types are both reached.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_support.h"
#include "msg_types.c"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static int registered;
    struct fz_in in = { data, size };
    const rk_msgtype *t;
    rk_msg_header h, parsed;
    unsigned char raw[RK_MSG_HEADER_SIZE];
    int rc;

    if (!registered) {
        registered = 1;
        for (size_t i = 0; i < FZ_NTYPES; i += 2)
            if (fz_types[i] != &fz_d17_msgtype
                && rk_msgtype_register(fz_types[i]) != RK_OK)
                abort();
    }
    t = fz_types[fz_byte(&in) % FZ_NTYPES];
    fz_bytes(&in, raw, sizeof(raw));
    memcpy(&h, raw, sizeof(h));
    /* Steer half the inputs to the expected id. */
    if (in.n > 0 && (fz_byte(&in) & 1))
        h.type_id = t->id;
    rk__clear_detail();
    rc = rk_msg_header_check(&h, t);
    if (rc == RK_OK) {
        if (h.type_id != t->id || h.type_version != t->version)
            abort();
    } else if (rc != RK_ETYPE || rk_errdetail()[0] == '\0'
        || (h.type_id == t->id && h.type_version == t->version)) {
        abort();
    }
    if (rk_msg_header_parse(raw, sizeof(raw), &parsed) == RK_OK
        && memcmp(&parsed, raw, sizeof(raw)) != 0)
        abort();
    return 0;
}
