/*
 * src/message/fixed.c - the fixed-layout form, layout fingerprints and
 * descriptor checks.
 */
#include <stdbool.h>
#include <string.h>

#include "common/common.h"
#include "message_internal.h"
#include "ringkernel/message.h"

/* The element size of kind; 0 for a kind that is not one. */
static size_t
kind_size(unsigned kind)
{
    return kind <= RK_FK_DOUBLE ? rk__kinds[kind].size : 0;
}

/* True if the wire key k (n bytes) is one the envelope writes itself. */
static bool
reserved_key(const char *k, size_t n)
{
    switch (n) {
    case 8:
        return memcmp(k, "__type__", 8) == 0 || memcmp(k, "priority", 8) == 0;
    case 10:
        return memcmp(k, "message_id", 10) == 0;
    case 14:
        return memcmp(k, "correlation_id", 14) == 0;
    default:
        return false;
    }
}

int
rk__msgtype_check_fields(const rk_msgtype *t)
{
    const rk_msgfield *f;
    const char *name = t->name != NULL ? t->name : "(unnamed)";

    if (t->nfields == 0 || t->nfields > RK_MSG_MAX_FIELDS || !t->fields)
        return rk__fail(RK_EINVAL,
            "type %s has %u fields (1..%d allowed) or no field table", name,
            t->nfields, RK_MSG_MAX_FIELDS);
    f = t->fields();
    for (unsigned i = 0; i < t->nfields; i++) {
        if (f[i].name == NULL)
            return rk__fail(RK_EINVAL, "%s: field %u has no name", name, i);
        if (reserved_key(f[i].name, f[i].name_len))
            return rk__fail(
                RK_EINVAL, "%s.%s: reserved field name", name, f[i].name);
    }
    return RK_OK;
}

int
rk__msgtype_validate(const rk_msgtype *t, int depth)
{
    const rk_msgfield *f;
    int rc;

    if (depth > RK__MSG_MAX_DEPTH)
        return rk__fail(
            RK_EINVAL, "message types nest deeper than %d", RK__MSG_MAX_DEPTH);
    if (t->name == NULL || t->name[0] == '\0' || t->id == 0)
        return rk__fail(RK_EINVAL, "type needs a name and a non-zero id");
    if ((rc = rk__msgtype_check_fields(t)) != RK_OK)
        return rc;
    f = t->fields();
    for (unsigned i = 0; i < t->nfields; i++) {
        if (strlen(f[i].name) != f[i].name_len)
            return rk__fail(RK_EINVAL, "%s.%s: name_len is %u", t->name,
                f[i].name, f[i].name_len);
        for (unsigned j = 0; j < i; j++)
            if (strcmp(f[i].name, f[j].name) == 0)
                return rk__fail(RK_EINVAL, "%s.%s: duplicate field name",
                    t->name, f[i].name);
        if (f[i].cls > RK_FC_NESTED)
            return rk__fail(
                RK_EINVAL, "%s.%s: bad field class", t->name, f[i].name);
        if (f[i].cls == RK_FC_NESTED) {
            if (f[i].nested == NULL)
                return rk__fail(
                    RK_EINVAL, "%s.%s: no nested type", t->name, f[i].name);
            rc = rk__msgtype_validate(f[i].nested, depth + 1);
            if (rc != RK_OK)
                return rc;
        } else if (f[i].cls <= RK_FC_VLA
            && kind_size(f[i].kind) != f[i].elem_size) {
            return rk__fail(
                RK_EINVAL, "%s.%s: bad element kind", t->name, f[i].name);
        }
    }
    return RK_OK;
}

/* RK_OK if the call what can go ahead on t, obj and the fixed form's
 * buffer (no_buf: that buffer is missing; buf_name names it): RK_EINVAL
 * for a NULL argument, RK_ENOTSUP if t has variable-length fields,
 * RK_EINVAL if its descriptor does not add up. */
static int
check_fixed(const char *what, const rk_msgtype *t, const void *obj,
    bool no_buf, const char *buf_name)
{
    if (t == NULL || obj == NULL || no_buf)
        return rk__fail(RK_EINVAL, "%s: NULL %s", what,
            t == NULL         ? "type"
                : obj == NULL ? "object"
                              : buf_name);
    if (t->fixed_size == 0)
        return rk__fail(RK_ENOTSUP, "%s has variable-length fields", t->name);
    if (t->fixed_size > t->size || t->fields == NULL)
        return rk__fail(RK_EINVAL, "%s: malformed type descriptor", t->name);
    return RK_OK;
}

int
rk_msg_fixed_write(const rk_msgtype *t, const void *obj, void *dst, size_t cap)
{
    int rc;

    rc = check_fixed("rk_msg_fixed_write", t, obj, dst == NULL, "destination");
    if (rk__unlikely(rc != RK_OK))
        return rc;
    if (rk__unlikely(cap < t->fixed_size))
        return rk__fail(RK_EMSGSIZE, "%s needs %u bytes, slot has %zu",
            t->name, t->fixed_size, cap);
    memcpy(dst, obj, t->fixed_size);
    return RK_OK;
}

/* Checks every bool byte of a fixed form at base is 0 or 1. */
static int
check_bools(const rk_msgtype *t, const unsigned char *base)
{
    const rk_msgfield *f = t->fields();

    for (unsigned i = 0; i < t->nfields; i++) {
        if (f[i].cls == RK_FC_NESTED) {
            int rc = check_bools(f[i].nested, base + f[i].offset);
            if (rc != RK_OK)
                return rc;
        } else if (f[i].kind == RK_FK_BOOL) {
            uint32_t n = f[i].cls == RK_FC_ARRAY ? f[i].count : 1;

            for (uint32_t k = 0; k < n; k++)
                if (base[f[i].offset + k] > 1)
                    return rk__fail(RK_EDECODE,
                        "%s.%s: bool byte is %u, not 0 or 1", t->name,
                        f[i].name, base[f[i].offset + k]);
        }
    }
    return RK_OK;
}

int
rk_msg_fixed_read(const rk_msgtype *t, const void *src, size_t len, void *obj)
{
    int rc;

    rc = check_fixed(
        "rk_msg_fixed_read", t, obj, src == NULL && len != 0, "source");
    if (rk__unlikely(rc != RK_OK))
        return rc;
    if (rk__unlikely(len != t->fixed_size)) {
        memset(obj, 0, t->size);
        return rk__fail(len < t->fixed_size ? RK_ETRUNCATED : RK_EDECODE,
            "%s fixed form is %u bytes, got %zu", t->name, t->fixed_size, len);
    }
    /* Check the bytes before they become _Bool values in obj. */
    if (t->nbools != 0 && (rc = check_bools(t, src)) != RK_OK) {
        memset(obj, 0, t->size);
        return rc;
    }
    memcpy(obj, src, t->fixed_size);
    return RK_OK;
}

static uint64_t
layout_hash(const rk_msgtype *t, uint64_t h, int depth)
{
    const rk_msgfield *f = t->fields();

    if (depth > RK__MSG_MAX_DEPTH)
        return h;
    h = rk__fnv1a(h, t->name, strlen(t->name) + 1);
    h = rk__fnv1a(h, &t->size, sizeof(t->size));
    for (unsigned i = 0; i < t->nfields; i++) {
        uint32_t v[5]
            = { f[i].cls, f[i].kind, f[i].elem_size, f[i].offset, f[i].count };

        h = rk__fnv1a(h, f[i].name, f[i].name_len + 1);
        h = rk__fnv1a(h, v, sizeof(v));
        if (f[i].cls == RK_FC_NESTED)
            h = layout_hash(f[i].nested, h, depth + 1);
    }
    return h;
}

uint64_t
rk_msgtype_layout_hash(const rk_msgtype *t)
{
    if (t == NULL || t->name == NULL || t->fields == NULL)
        return 0;
    return layout_hash(t, UINT64_C(0xcbf29ce484222325), 0);
}
