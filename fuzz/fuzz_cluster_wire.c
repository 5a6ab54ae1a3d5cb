/*
 * libFuzzer: the cluster's decoders of bytes from other ranks (batch and
 * frames, src/cluster/wire.c; the join directory, also as an ANNOUNCE
 * frame's payload). Every frame that
 * decodes must lie inside the input and re-encode to the same bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "cluster/wire.h"
#include "ringkernel/ringkernel.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    rk__cl_batch b;
    rk__cl_frame f;
    rk__cl_dir d;
    size_t off = RK__CL_BATCH_HDR;
    unsigned char *back;

    if (rk__cl_dir_parse(data, size, &d) == RK_OK) {
        rk__cl_dir_export e;
        rk__cl_dir_topic t;
        for (uint32_t i = 0; i < d.n_exports; i++)
            if (rk__cl_dir_export_get(&d, i, &e) == RK_OK
                && strlen(e.id) > RK__CL_NAME_MAX)
                abort();
        for (uint32_t i = 0; i < d.n_topics; i++)
            if (rk__cl_dir_topic_get(&d, i, &t) == RK_OK
                && strlen(t.name) > RK__CL_NAME_MAX)
                abort();
    }
    if (rk__cl_batch_parse(data, size, &b) != RK_OK)
        return 0;
    while (rk__cl_frame_next(data, size, &off, &f) == RK_OK) {
        size_t n = rk__cl_frame_size(f.len);
        if (off > size || f.payload + f.len > data + size)
            abort();
        if ((back = malloc(n)) == NULL)
            return 0;
        rk__cl_frame_write(back, &f, f.payload);
        if (memcmp(back, data + off - n, n) != 0)
            abort();
        free(back);
        /* An ANNOUNCE carries a one-export directory (read as the
         * progress thread reads it). */
        if (f.kind == RK__CL_ANNOUNCE
            && rk__cl_dir_parse(f.payload, f.len, &d) == RK_OK
            && d.n_exports == 1) {
            rk__cl_dir_export e;
            if (rk__cl_dir_export_get(&d, 0, &e) == RK_OK
                && strlen(e.id) > RK__CL_NAME_MAX)
                abort();
        }
    }
    return 0;
}
