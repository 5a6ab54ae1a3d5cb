/*
 * libFuzzer: envelope parse (rk_msg_header_parse) of untrusted slots.
 * A header that parses must write back to the same 64 bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "ringkernel/ringkernel.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    rk_msg_header h;
    unsigned char back[RK_MSG_HEADER_SIZE];

    if (rk_msg_header_parse(data, size, &h) != RK_OK)
        return 0;
    if (h.payload_len > size - RK_MSG_HEADER_SIZE)
        abort();
    if (rk_msg_header_write(&h, back, sizeof(back)) != RK_OK
        || memcmp(back, data, sizeof(back)) != 0)
        abort();
    return 0;
}
