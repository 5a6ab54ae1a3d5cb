/*
 * src/cluster/wire.c - encoding and decoding of cluster batches and
 * frames (layout in wire.h). Pure functions over caller buffers; built
 * with or without MPI, so the decoder is tested and fuzzed everywhere.
 */
#include "cluster/wire.h"

#include <string.h>

#include "common/common.h"

static void
put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static uint16_t
get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static void
put64(uint8_t *p, uint64_t v)
{
    rk__cl_put32(p, (uint32_t)v);
    rk__cl_put32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t
get64(const uint8_t *p)
{
    return (uint64_t)rk__cl_get32(p) | (uint64_t)rk__cl_get32(p + 4) << 32;
}

void
rk__cl_batch_write(
    uint8_t *dst, uint16_t flags, uint32_t nframes, uint32_t credits)
{
    rk__cl_put32(dst, RK__CL_MAGIC);
    put16(dst + 4, RK__CL_VERSION);
    put16(dst + 6, flags);
    rk__cl_put32(dst + 8, nframes);
    rk__cl_put32(dst + 12, credits);
}

void
rk__cl_frame_write(uint8_t *dst, const rk__cl_frame *f, const void *payload)
{
    size_t padded = rk__cl_frame_size(f->len) - RK__CL_FRAME_HDR;

    dst[0] = f->kind;
    dst[1] = f->priority;
    put16(dst + 2, f->type_version);
    rk__cl_put32(dst + 4, f->target);
    rk__cl_put32(dst + 8, f->type_id);
    rk__cl_put32(dst + 12, f->flags);
    rk__cl_put32(dst + 16, f->len);
    rk__cl_put32(dst + 20, (uint32_t)f->aux);
    put64(dst + 24, f->send_ns);
    memcpy(dst + 32, f->id.b, 16);
    memcpy(dst + 48, f->corr.b, 16);
    if (f->len != 0)
        memcpy(dst + RK__CL_FRAME_HDR, payload, f->len);
    memset(dst + RK__CL_FRAME_HDR + f->len, 0, padded - f->len);
}

int
rk__cl_batch_parse(const uint8_t *buf, size_t len, rk__cl_batch *out)
{
    if (len < RK__CL_BATCH_HDR)
        return rk__fail(RK_ETRUNCATED,
            "cluster batch: %zu bytes, header is %u", len, RK__CL_BATCH_HDR);
    if (rk__cl_get32(buf) != RK__CL_MAGIC)
        return rk__fail(
            RK_EDECODE, "cluster batch: bad magic 0x%08x", rk__cl_get32(buf));
    out->version = get16(buf + 4);
    if (out->version != RK__CL_VERSION)
        return rk__fail(RK_EDECODE, "cluster batch: version %u, expected %u",
            out->version, RK__CL_VERSION);
    out->flags = get16(buf + 6);
    out->nframes = rk__cl_get32(buf + 8);
    out->credits = rk__cl_get32(buf + 12);
    if (out->nframes > (len - RK__CL_BATCH_HDR) / RK__CL_FRAME_HDR)
        return rk__fail(RK_ETRUNCATED,
            "cluster batch: %u frames cannot fit in %zu bytes", out->nframes,
            len);
    return RK_OK;
}

int
rk__cl_frame_next(
    const uint8_t *buf, size_t len, size_t *off, rk__cl_frame *out)
{
    const uint8_t *p;
    size_t at = *off, size;

    if (at >= len)
        return RK_EEMPTY;
    if (len - at < RK__CL_FRAME_HDR)
        return rk__fail(RK_ETRUNCATED, "cluster frame at %zu: %zu bytes left",
            at, len - at);
    p = buf + at;
    out->kind = p[0];
    if (out->kind < RK__CL_DATA || out->kind > RK__CL_KIND_MAX)
        return rk__fail(
            RK_EDECODE, "cluster frame at %zu: kind %u", at, out->kind);
    out->priority = p[1];
    out->type_version = get16(p + 2);
    out->target = rk__cl_get32(p + 4);
    out->type_id = rk__cl_get32(p + 8);
    out->flags = rk__cl_get32(p + 12);
    out->len = rk__cl_get32(p + 16);
    out->aux = (int32_t)rk__cl_get32(p + 20);
    out->send_ns = get64(p + 24);
    memcpy(out->id.b, p + 32, 16);
    memcpy(out->corr.b, p + 48, 16);
    if (out->len > len - at - RK__CL_FRAME_HDR)
        return rk__fail(RK_ETRUNCATED,
            "cluster frame at %zu: %u-byte payload, %zu bytes left", at,
            out->len, len - at - RK__CL_FRAME_HDR);
    size = rk__cl_frame_size(out->len);
    if (size > len - at)
        return rk__fail(
            RK_ETRUNCATED, "cluster frame at %zu: padding cut", at);
    for (size_t i = RK__CL_FRAME_HDR + out->len; i < size; i++)
        if (p[i] != 0)
            return rk__fail(RK_EDECODE, "cluster frame at %zu: padding", at);
    out->payload = p + RK__CL_FRAME_HDR;
    *off = at + size;
    return RK_OK;
}

/* ------------------------------------------------------------ directory */

size_t
rk__cl_dir_size(uint32_t n_exports, uint32_t n_topics)
{
    return RK__CL_DIR_HDR + (size_t)n_exports * RK__CL_DIR_EXPORT
        + (size_t)n_topics * RK__CL_DIR_TOPIC;
}

void
rk__cl_dir_header_write(
    uint8_t *dst, uint32_t n_exports, uint32_t n_topics, uint32_t credits)
{
    rk__cl_put32(dst, RK__CL_DIR_MAGIC);
    rk__cl_put32(dst + 4, n_exports);
    rk__cl_put32(dst + 8, n_topics);
    rk__cl_put32(dst + 12, credits);
}

static void
name_write(uint8_t *dst, const char *name)
{
    size_t n = strnlen(name, RK__CL_NAME_MAX);

    memset(dst, 0, RK__CL_NAME_MAX + 1);
    memcpy(dst, name, n);
}

/* A name field must be non-empty and NUL-terminated within 64 bytes. */
static int
name_read(const uint8_t *src, char *out, const char *what, uint32_t i)
{
    size_t n = strnlen((const char *)src, RK__CL_NAME_MAX + 1);

    if (n == 0 || n > RK__CL_NAME_MAX)
        return rk__fail(
            RK_EDECODE, "cluster directory: %s %u has a bad name", what, i);
    memcpy(out, src, n + 1);
    return RK_OK;
}

void
rk__cl_dir_export_write(uint8_t *dst, const rk__cl_dir_export *e)
{
    name_write(dst, e->id);
    rk__cl_put32(dst + 64, e->capacity);
    rk__cl_put32(dst + 68, e->max_payload);
    rk__cl_put32(dst + 72, e->backpressure);
    rk__cl_put32(dst + 76, e->bands);
}

void
rk__cl_dir_topic_write(uint8_t *dst, const rk__cl_dir_topic *t)
{
    name_write(dst, t->name);
    rk__cl_put32(dst + 64, t->index);
}

int
rk__cl_dir_parse(const uint8_t *buf, size_t len, rk__cl_dir *out)
{
    if (len < RK__CL_DIR_HDR)
        return rk__fail(RK_ETRUNCATED, "cluster directory: %zu bytes", len);
    if (rk__cl_get32(buf) != RK__CL_DIR_MAGIC)
        return rk__fail(RK_EDECODE, "cluster directory: bad magic");
    out->n_exports = rk__cl_get32(buf + 4);
    out->n_topics = rk__cl_get32(buf + 8);
    out->credits = rk__cl_get32(buf + 12);
    /* Both counts are below 2^32, so the 64-bit size cannot overflow. */
    if ((uint64_t)out->n_exports * RK__CL_DIR_EXPORT
            + (uint64_t)out->n_topics * RK__CL_DIR_TOPIC
        != (uint64_t)(len - RK__CL_DIR_HDR))
        return rk__fail(RK_EDECODE,
            "cluster directory: %u exports and %u topics in %zu bytes",
            out->n_exports, out->n_topics, len);
    out->exports = buf + RK__CL_DIR_HDR;
    out->topics = out->exports + (size_t)out->n_exports * RK__CL_DIR_EXPORT;
    return RK_OK;
}

int
rk__cl_dir_export_get(const rk__cl_dir *d, uint32_t i, rk__cl_dir_export *out)
{
    const uint8_t *p = d->exports + (size_t)i * RK__CL_DIR_EXPORT;
    int rc;

    if (i >= d->n_exports)
        return rk__fail(RK_EINVAL, "cluster directory: no export %u", i);
    if ((rc = name_read(p, out->id, "export", i)) != RK_OK)
        return rc;
    out->capacity = rk__cl_get32(p + 64);
    out->max_payload = rk__cl_get32(p + 68);
    out->backpressure = rk__cl_get32(p + 72);
    out->bands = rk__cl_get32(p + 76);
    if (out->backpressure > RK_BP_DROP_NEW || out->bands > 1)
        return rk__fail(RK_EDECODE,
            "cluster directory: export '%s' has policy %u, bands %u", out->id,
            out->backpressure, out->bands);
    return RK_OK;
}

int
rk__cl_dir_topic_get(const rk__cl_dir *d, uint32_t i, rk__cl_dir_topic *out)
{
    const uint8_t *p = d->topics + (size_t)i * RK__CL_DIR_TOPIC;
    int rc;

    if (i >= d->n_topics)
        return rk__fail(RK_EINVAL, "cluster directory: no topic %u", i);
    if ((rc = name_read(p, out->name, "topic", i)) != RK_OK)
        return rc;
    out->index = rk__cl_get32(p + 64);
    return RK_OK;
}
