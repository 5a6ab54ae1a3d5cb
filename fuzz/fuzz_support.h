/*
 * fuzz/fuzz_support.h - shared by the message fuzz targets: build a typed
 * object from fuzz bytes by walking its field table (fz_fill), compare
 * two objects field by field (fz_equal), and an arena for the memory a
 * filled object's variable-length fields point to. Static functions; each
 * target is its own program.
 */
#ifndef RK_FUZZ_SUPPORT_H
#define RK_FUZZ_SUPPORT_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "message/message_internal.h"
#include "ringkernel/ringkernel.h"

/* Fuzz bytes, consumed from the front; zeros once they run out. */
struct fz_in {
    const unsigned char *p;
    size_t n;
};

static unsigned
fz_byte(struct fz_in *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

static void
fz_bytes(struct fz_in *in, void *dst, size_t n)
{
    size_t k = n < in->n ? n : in->n;

    memcpy(dst, in->p, k);
    memset((char *)dst + k, 0, n - k);
    in->p += k;
    in->n -= k;
}

/* Heap blocks a filled object points to; freed together. */
struct fz_arena {
    void *blk[256];
    size_t n;
};

static void *
fz_alloc(struct fz_arena *a, size_t n)
{
    void *p;

    if (a->n == sizeof(a->blk) / sizeof(a->blk[0]))
        return NULL;
    p = malloc(n ? n : 1);
    if (p != NULL)
        a->blk[a->n++] = p;
    return p;
}

static void
fz_arena_free(struct fz_arena *a)
{
    while (a->n > 0)
        free(a->blk[--a->n]);
}

/* Fills elements of kind at dst from in; bools become 0 or 1. */
static void
fz_fill_elems(struct fz_in *in, unsigned kind, void *dst, size_t count)
{
    size_t es = rk__kinds[kind].size;

    fz_bytes(in, dst, count * es);
    if (kind == RK_FK_BOOL)
        for (size_t i = 0; i < count; i++)
            ((unsigned char *)dst)[i] &= 1;
}

/*
 * Fills obj (t->size bytes, zeroed first) from in. Variable-length fields
 * get a length from one byte (at most max, at most 40) and their bytes
 * from in; with ascii, string bytes are masked to 7 bits so they are
 * valid UTF-8. Returns false if the arena ran out.
 */
static bool
fz_fill(struct fz_in *in, const rk_msgtype *t, void *obj, bool ascii,
    struct fz_arena *a, int depth)
{
    const rk_msgfield *f = t->fields();
    char *base = obj;

    if (depth == 0)
        memset(obj, 0, t->size);
    for (unsigned i = 0; i < t->nfields; i++) {
        char *p = base + f[i].offset;
        uint32_t len, cap;
        void *mem;

        switch (f[i].cls) {
        case RK_FC_SCALAR:
            fz_fill_elems(in, f[i].kind, p, 1);
            break;
        case RK_FC_ARRAY:
            fz_fill_elems(in, f[i].kind, p, f[i].count);
            break;
        case RK_FC_NESTED:
            if (!fz_fill(in, f[i].nested, p, ascii, a, depth + 1))
                return false;
            break;
        default:
            cap = f[i].count < 40 ? f[i].count : 40;
            len = fz_byte(in) % (cap + 1);
            if (f[i].cls == RK_FC_VLA) {
                mem = fz_alloc(a, (size_t)len * f[i].elem_size);
                if (mem == NULL)
                    return false;
                fz_fill_elems(in, f[i].kind, mem, len);
            } else {
                mem = fz_alloc(a, (size_t)len + 1);
                if (mem == NULL)
                    return false;
                fz_bytes(in, mem, len);
                ((char *)mem)[len] = '\0';
                if (ascii && f[i].cls == RK_FC_STRING)
                    for (uint32_t k = 0; k < len; k++)
                        ((unsigned char *)mem)[k] &= 0x7f;
            }
            rk__set_var(
                p, len != 0 || f[i].cls == RK_FC_STRING ? mem : NULL, len);
            break;
        }
    }
    return true;
}

/* One element equal: floats widen to float64 on the wire and back, so
 * NaN compares as NaN (its payload may be quieted); everything else by
 * bits. */
static bool
fz_elem_eq(unsigned kind, const unsigned char *x, const unsigned char *y)
{
    if (kind == RK_FK_FLOAT) {
        float a, b;

        memcpy(&a, x, 4);
        memcpy(&b, y, 4);
        if (isnan(a) || isnan(b))
            return isnan(a) && isnan(b);
    }
    if (kind == RK_FK_BOOL)
        return (x[0] != 0) == (y[0] != 0);
    return memcmp(x, y, rk__kinds[kind].size) == 0;
}

static bool
fz_elems_eq(unsigned kind, const void *x, const void *y, size_t count)
{
    size_t es = rk__kinds[kind].size;

    for (size_t i = 0; i < count; i++)
        if (!fz_elem_eq(kind, (const unsigned char *)x + i * es,
                (const unsigned char *)y + i * es))
            return false;
    return true;
}

/* x and y (objects of t) hold the same field values. */
static bool
fz_equal(const rk_msgtype *t, const void *x, const void *y)
{
    const rk_msgfield *f = t->fields();

    for (unsigned i = 0; i < t->nfields; i++) {
        const char *px = (const char *)x + f[i].offset;
        const char *py = (const char *)y + f[i].offset;
        struct var_head vx, vy;

        switch (f[i].cls) {
        case RK_FC_SCALAR:
            if (!fz_elems_eq(f[i].kind, px, py, 1))
                return false;
            break;
        case RK_FC_ARRAY:
            if (!fz_elems_eq(f[i].kind, px, py, f[i].count))
                return false;
            break;
        case RK_FC_NESTED:
            if (!fz_equal(f[i].nested, px, py))
                return false;
            break;
        default:
            vx = rk__get_var(px);
            vy = rk__get_var(py);
            if (vx.len != vy.len)
                return false;
            if (f[i].cls == RK_FC_VLA) {
                if (!fz_elems_eq(f[i].kind, vx.ptr, vy.ptr, vx.len))
                    return false;
            } else if (vx.len != 0 && memcmp(vx.ptr, vy.ptr, vx.len) != 0) {
                return false;
            }
            break;
        }
    }
    return true;
}

/* True if some string field of obj (nested ones included) is not valid
 * UTF-8: the one reason a well-formed object may fail to encode. */
static bool
fz_has_bad_utf8(const rk_msgtype *t, const void *obj)
{
    const rk_msgfield *f = t->fields();

    for (unsigned i = 0; i < t->nfields; i++) {
        const char *p = (const char *)obj + f[i].offset;

        if (f[i].cls == RK_FC_NESTED && fz_has_bad_utf8(f[i].nested, p))
            return true;
        if (f[i].cls == RK_FC_STRING) {
            struct var_head v = rk__get_var(p);
            if (!rk__utf8_valid(v.ptr, v.len))
                return true;
        }
    }
    return false;
}

#endif /* RK_FUZZ_SUPPORT_H */
