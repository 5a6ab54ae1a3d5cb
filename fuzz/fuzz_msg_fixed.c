/*
 * libFuzzer: fixed-layout read (rk_msg_fixed_read) of untrusted slot bytes.
 * A form that reads must write back to the same bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "../tests/support/msg_test_types.c"
#include "ringkernel/ringkernel.h"

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    rkt_particle p;
    unsigned char back[sizeof(rkt_particle)];

    if (rk_msg_fixed_read(&rkt_particle_msgtype, data, size, &p) != RK_OK)
        return 0;
    if (rk_msg_fixed_write(&rkt_particle_msgtype, &p, back, sizeof(back))
            != RK_OK
        || memcmp(back, data, sizeof(back)) != 0)
        abort();
    return 0;
}
