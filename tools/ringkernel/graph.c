/*
 * tools/ringkernel/graph.c - graphs for PageRank: SNAP edge lists and
 * synthetic power-law graphs, stored as in-edges by destination (CSC) so
 * that an iteration pulls each node's rank from its in-neighbours and a
 * partition of nodes writes only its own ranks.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cli.h"

/* Arrays of 2 MiB or more are aligned to 2 MiB and offered to the kernel
 * for transparent huge pages: PageRank gathers from random places in
 * megabytes of contrib, and with 4 KiB pages most of those gathers also
 * miss the TLB. free() releases the result either way. */
void *
cli_big_alloc(size_t bytes, bool zero)
{
    const size_t huge = (size_t)2 << 20;
    void *p = NULL;

    if (bytes < huge)
        p = malloc(bytes ? bytes : 1);
    else if (posix_memalign(&p, huge, (bytes + huge - 1) & ~(huge - 1)) != 0)
        p = NULL;
#ifdef MADV_HUGEPAGE
    else
        (void)madvise(p, (bytes + huge - 1) & ~(huge - 1), MADV_HUGEPAGE);
#endif
    if (p && zero)
        memset(p, 0, bytes);
    return p;
}

/* Builds g's CSC from m edges src[i] -> dst[i] on n nodes. */
static int
build(cli_graph *g, uint32_t n, uint64_t m, const uint32_t *src,
    const uint32_t *dst)
{
    uint64_t *fill;

    g->n = n;
    g->m = m;
    g->in_off = cli_big_alloc(((size_t)n + 1) * sizeof(*g->in_off), true);
    /* CLI_PR_PREFETCH zeroed slots past the end, read by the prefetch of
     * the last edges (pr.c). */
    g->in_src
        = cli_big_alloc((m + CLI_PR_PREFETCH) * sizeof(*g->in_src), true);
    g->outdeg = cli_big_alloc((size_t)n * sizeof(*g->outdeg), true);
    fill = malloc(((size_t)n + 1) * sizeof(*fill));
    if (!g->in_off || !g->in_src || !g->outdeg || !fill) {
        free(fill);
        return RK_ENOMEM;
    }
    for (uint64_t i = 0; i < m; i++) {
        g->in_off[dst[i] + 1]++;
        g->outdeg[src[i]]++;
    }
    for (uint32_t v = 0; v < n; v++)
        g->in_off[v + 1] += g->in_off[v];
    memcpy(fill, g->in_off, ((size_t)n + 1) * sizeof(*fill));
    for (uint64_t i = 0; i < m; i++)
        g->in_src[fill[dst[i]]++] = src[i];
    free(fill);
    return RK_OK;
}

void
cli_graph_free(cli_graph *g)
{
    free(g->in_off);
    free(g->in_src);
    free(g->outdeg);
    free(g->orig);
    memset(g, 0, sizeof(*g));
}

int
cli_graph_synthetic(uint64_t m, uint64_t seed, cli_graph *g)
{
    uint64_t n64 = m / 10 > 16 ? m / 10 : 16;
    uint32_t n = (uint32_t)n64;
    uint32_t *src = malloc(m * sizeof(*src)), *dst = malloc(m * sizeof(*dst));
    int rc = RK_ENOMEM;

    memset(g, 0, sizeof(*g));
    if (n64 > UINT32_MAX || m == 0)
        rc = RK_EINVAL;
    else if (src && dst) {
        /* Sources uniform; destinations skewed towards low ids by u^3,
         * which gives a heavy-tailed in-degree distribution. */
        for (uint64_t i = 0; i < m; i++) {
            double u = cli_uniform(&seed);
            src[i] = (uint32_t)(cli_splitmix64(&seed) % n);
            dst[i] = (uint32_t)((double)n * u * u * u);
            if (dst[i] >= n)
                dst[i] = n - 1;
        }
        rc = build(g, n, m, src, dst);
    }
    free(src);
    free(dst);
    if (rc != RK_OK)
        cli_graph_free(g);
    return rc;
}

/* Open-addressing map from file ids to compact node numbers. */
typedef struct idmap {
    uint64_t *key;
    uint32_t *val;
    size_t cap, len;
} idmap;

static int
idmap_get(idmap *mp, uint64_t key, uint32_t *out)
{
    if (2 * (mp->len + 1) > mp->cap) {
        idmap old = *mp;
        mp->cap = old.cap ? 2 * old.cap : 1024;
        mp->key = malloc(mp->cap * sizeof(*mp->key));
        mp->val = malloc(mp->cap * sizeof(*mp->val));
        if (!mp->key || !mp->val) {
            free(mp->key);
            free(mp->val);
            *mp = old;
            return RK_ENOMEM;
        }
        memset(mp->val, 0xff, mp->cap * sizeof(*mp->val));
        mp->len = 0;
        for (size_t i = 0; i < old.cap; i++)
            if (old.val[i] != UINT32_MAX) {
                size_t h = (size_t)(old.key[i] * UINT64_C(0x9E3779B97F4A7C15))
                    & (mp->cap - 1);
                while (mp->val[h] != UINT32_MAX)
                    h = (h + 1) & (mp->cap - 1);
                mp->key[h] = old.key[i];
                mp->val[h] = old.val[i];
                mp->len++;
            }
        free(old.key);
        free(old.val);
    }
    size_t h = (size_t)(key * UINT64_C(0x9E3779B97F4A7C15)) & (mp->cap - 1);
    while (mp->val[h] != UINT32_MAX) {
        if (mp->key[h] == key) {
            *out = mp->val[h];
            return RK_OK;
        }
        h = (h + 1) & (mp->cap - 1);
    }
    if (mp->len >= UINT32_MAX - 1)
        return RK_ETOOBIG;
    mp->key[h] = key;
    *out = mp->val[h] = (uint32_t)mp->len++;
    return RK_OK;
}

/* Appends v to a growing array. */
static int
push(void **a, size_t *cap, size_t len, size_t size, const void *v)
{
    if (len == *cap) {
        size_t nc = *cap ? 2 * *cap : 4096;
        void *p = realloc(*a, nc * size);
        if (p == NULL)
            return RK_ENOMEM;
        *a = p;
        *cap = nc;
    }
    memcpy((char *)*a + len * size, v, size);
    return RK_OK;
}

int
cli_graph_load(const char *path, cli_graph *g, char *why, size_t wl)
{
    FILE *f = fopen(path, "r");
    int rc;

    memset(g, 0, sizeof(*g));
    if (f == NULL) {
        snprintf(why, wl, "%s: %s", path, strerror(errno));
        return RK_ENOTFOUND;
    }
    rc = cli_graph_parse(f, path, g, why, wl);
    fclose(f);
    return rc;
}

int
cli_graph_parse(FILE *f, const char *path, cli_graph *g, char *why, size_t wl)
{
    idmap mp = { 0 };
    uint32_t *src = NULL, *dst = NULL;
    uint64_t *orig = NULL;
    size_t m = 0, cs = 0, cd = 0, co = 0, lineno = 0;
    char line[512];
    int rc = RK_OK;

    memset(g, 0, sizeof(*g));
    while (rc == RK_OK && fgets(line, sizeof(line), f)) {
        char *p = line, *end;
        uint64_t a, b;
        uint32_t ia, ib;
        lineno++;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '#' || *p == '\n' || *p == '\r' || *p == '\0')
            continue;
        errno = 0;
        a = strtoull(p, &end, 10);
        if (end == p || errno || (*end != ' ' && *end != '\t')) {
            snprintf(why, wl, "%s:%zu: expected \"src dst\"", path, lineno);
            rc = RK_EDECODE;
            break;
        }
        p = end;
        b = strtoull(p, &end, 10);
        while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
            end++;
        if (end == p || errno || *end != '\0' || strchr(line, '-')) {
            snprintf(why, wl, "%s:%zu: expected \"src dst\"", path, lineno);
            rc = RK_EDECODE;
            break;
        }
        size_t before = mp.len;
        if ((rc = idmap_get(&mp, a, &ia)) != RK_OK)
            break;
        if (mp.len > before)
            rc = push((void **)&orig, &co, mp.len - 1, sizeof(a), &a);
        before = mp.len;
        if (rc == RK_OK && (rc = idmap_get(&mp, b, &ib)) == RK_OK
            && mp.len > before)
            rc = push((void **)&orig, &co, mp.len - 1, sizeof(b), &b);
        if (rc == RK_OK)
            rc = push((void **)&src, &cs, m, sizeof(ia), &ia);
        if (rc == RK_OK)
            rc = push((void **)&dst, &cd, m, sizeof(ib), &ib);
        m++;
    }
    if (rc == RK_OK && m == 0) {
        snprintf(why, wl, "%s: no edges", path);
        rc = RK_EDECODE;
    }
    if (rc == RK_OK)
        rc = build(g, (uint32_t)mp.len, m, src, dst);
    if (rc == RK_ENOMEM)
        snprintf(why, wl, "%s: out of memory", path);
    free(mp.key);
    free(mp.val);
    free(src);
    free(dst);
    if (rc != RK_OK) {
        free(orig);
        cli_graph_free(g);
        return rc;
    }
    g->orig = orig;
    return RK_OK;
}
