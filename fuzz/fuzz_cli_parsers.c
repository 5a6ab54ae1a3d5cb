/*
 * fuzz/fuzz_cli_parsers.c - the two readers of external text in the
 * `ringkernel` command: the SNAP edge-list parser (`ringkernel pagerank
 * FILE`) and the /metrics reader of `ringkernel top`. The first input
 * byte picks the parser; the rest is the text. Neither may crash, leak or
 * read out of bounds, and a parsed graph must be consistent.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/ringkernel/cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text;

    if (size < 1)
        return 0;
    if ((text = malloc(size)) == NULL)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    if (data[0] & 1) {
        static cli_top_frame f;
        cli_prom_parse(text, &f);
        if (f.n > CLI_TOP_MAX_KERNELS)
            abort();
    } else {
        FILE *fp = fmemopen(text, size - 1 ? size - 1 : 1, "r");
        cli_graph g;
        char why[256];
        if (fp && cli_graph_parse(fp, "fuzz", &g, why, sizeof(why)) == 0) {
            if (g.in_off[g.n] != g.m)
                abort();
            for (uint64_t e = 0; e < g.m; e++)
                if (g.in_src[e] >= g.n)
                    abort();
            cli_graph_free(&g);
        }
        if (fp)
            fclose(fp);
    }
    free(text);
    return 0;
}
