/*
 * libFuzzer: UUID text parse (rk_uuid_parse). A string that parses must
 * format and parse back to the same id.
 */
#include <stdlib.h>
#include <string.h>

#include "ringkernel/ringkernel.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    rk_uuid u, v;
    char text[RK_UUID_STRLEN + 1];

    if (rk_uuid_parse((const char *)data, size, &u) != RK_OK)
        return 0;
    rk_uuid_format(&u, text);
    if (rk_uuid_parse(text, RK_UUID_STRLEN, &v) != RK_OK
        || memcmp(&u, &v, sizeof(u)) != 0)
        abort();
    return 0;
}
