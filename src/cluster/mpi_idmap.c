/*
 * src/cluster/mpi_idmap.c - the cluster's id maps: message id -> (rank,
 * proxy), bounded (docs/cluster.md). The progress thread records where a
 * peer's request came from (served) and a proxy what it forwarded and
 * waits for (fwd); the oldest entry is overwritten when full (a reply
 * that late is then kept locally).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster_int.h"

/* The ids of one thread differ only in a few bytes (the runtime numbers
 * a block of v7 ids in their low 32 bits): mix all 128 bits (the
 * murmur3 finaliser) so that they spread over every bucket. */
static uint32_t
id_hash(const rk_uuid *u)
{
    uint64_t a, b, x;

    memcpy(&a, u->b, 8);
    memcpy(&b, u->b + 8, 8);
    x = a ^ (b * 0x9E3779B97F4A7C15ull);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (uint32_t)x & (CL_IDMAP - 1);
}

int
rk__cl_idmap_init(cl_idmap *m)
{
    pthread_mutex_init(&m->lock, NULL);
    m->ent = calloc(CL_IDMAP, sizeof(*m->ent));
    m->bucket = malloc(CL_IDMAP * sizeof(*m->bucket));
    if (m->ent == NULL || m->bucket == NULL)
        return rk__fail(RK_ENOMEM, "cluster: id map");
    memset(m->bucket, 0xff, CL_IDMAP * sizeof(*m->bucket));
    return RK_OK;
}

void
rk__cl_idmap_free(cl_idmap *m)
{
    free(m->ent);
    free(m->bucket);
    pthread_mutex_destroy(&m->lock);
}

static void
idmap_unlink(cl_idmap *m, int32_t i)
{
    int32_t *pp = &m->bucket[id_hash(&m->ent[i].id)];

    while (*pp != -1 && *pp != i)
        pp = &m->ent[*pp].next;
    if (*pp == i)
        *pp = m->ent[i].next;
    m->ent[i].used = false;
    m->n--;
}

void
rk__cl_idmap_put(
    cl_idmap *m, const rk_uuid *id, int rank, uint32_t proxy, uint8_t prio)
{
    int32_t i;
    uint32_t h = id_hash(id);

    pthread_mutex_lock(&m->lock);
    i = (int32_t)m->head;
    m->head = (m->head + 1) & (CL_IDMAP - 1);
    if (m->ent[i].used)
        idmap_unlink(m, i);
    m->ent[i] = (cl_ident) { *id, rank, proxy, m->bucket[h], prio, true };
    m->bucket[h] = i;
    m->n++;
    pthread_mutex_unlock(&m->lock);
}

uint32_t
rk__cl_idmap_size(cl_idmap *m)
{
    return rk__locked_read_u32(&m->lock, &m->n);
}

bool
rk__cl_idmap_take(cl_idmap *m, const rk_uuid *id, int *rank, uint32_t *proxy)
{
    int32_t i;

    pthread_mutex_lock(&m->lock);
    for (i = m->bucket[id_hash(id)]; i != -1; i = m->ent[i].next)
        if (memcmp(m->ent[i].id.b, id->b, 16) == 0)
            break;
    if (i != -1) {
        if (rank != NULL)
            *rank = m->ent[i].rank;
        if (proxy != NULL)
            *proxy = m->ent[i].proxy;
        idmap_unlink(m, i);
    }
    pthread_mutex_unlock(&m->lock);
    return i != -1;
}

/* Takes every entry of rank (and of proxy, unless UINT32_MAX) in one
 * pass; *n of them in a malloc'd array the caller frees (NULL when none,
 * or out of memory: then dropped). */
cl_ident *
rk__cl_idmap_take_proxy(cl_idmap *m, int rank, uint32_t proxy, size_t *n)
{
    cl_ident *out = NULL;
    size_t cnt = 0, cap = 0;

    pthread_mutex_lock(&m->lock);
    for (int32_t i = 0; i < CL_IDMAP; i++) {
        if (!m->ent[i].used || m->ent[i].rank != rank
            || (proxy != UINT32_MAX && m->ent[i].proxy != proxy))
            continue;
        if (cnt == cap) {
            cl_ident *grown;
            cap = cap ? cap * 2 : 64;
            if ((grown = realloc(out, cap * sizeof(*out))) == NULL)
                cap = cnt; /* keep what we have; the rest is dropped */
            else
                out = grown;
        }
        if (cnt < cap)
            out[cnt++] = m->ent[i];
        idmap_unlink(m, i);
    }
    pthread_mutex_unlock(&m->lock);
    *n = cnt;
    return out;
}
