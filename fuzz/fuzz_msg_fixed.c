/*
 * libFuzzer: fixed-layout read (rk_msg_fixed_read) of untrusted slot
 * bytes, for every fixed layout in msg_types.c (the first byte picks
 * one). A form that reads must write back to the same bytes, except
 * padding, which the type's own field walk skips: compared field by field.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_support.h"
#include "msg_types.c"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const rk_msgtype *t;
    void *obj, *back, *again;
    int rc;

    if (size < 1)
        return 0;
    t = fz_fixed_types[data[0] % FZ_NFIXED];
    obj = malloc(t->size);
    back = malloc(t->size);
    again = malloc(t->size);
    memset(obj, 0x5a, t->size);
    rc = rk_msg_fixed_read(t, data + 1, size - 1, obj);
    if (rc == RK_OK) {
        if (size - 1 != rk_msg_fixed_size(t))
            abort();
        if (rk_msg_fixed_write(t, obj, back, t->size) != RK_OK
            || memcmp(back, data + 1, rk_msg_fixed_size(t)) != 0)
            abort();
        if (rk_msg_fixed_read(t, back, rk_msg_fixed_size(t), again) != RK_OK
            || !fz_equal(t, obj, again))
            abort();
    } else if (rc != RK_ETRUNCATED && rc != RK_EDECODE) {
        abort();
    }
    free(obj);
    free(back);
    free(again);
    return 0;
}
