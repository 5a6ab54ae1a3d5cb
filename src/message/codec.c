/*
 * src/message/codec.c - msgpack maps -> typed messages, and rk_msg_free.
 *
 * rk_msg_decode() has msgpack-c's parser (tape.c) turn the frame into a
 * token tape on its stack, then walks the tape against the type's field
 * table. Keys are matched with inline compares against the field the
 * previous key matched plus one (the right one for frames we or the
 * reference wrote, which put the fields first), then the envelope keys by
 * length, then every field. Values are checked and copied into the
 * struct; variable-length values are copied to fresh heap memory, so
 * nothing points into the frame. Encoding is in encode.c.
 */
#include <float.h>
#include <stdbool.h>
#include <string.h>

#include "common/common.h"
#include "message_internal.h"
#include "ringkernel/message.h"

/* ------------------------------------------------------------- kinds */

const struct rk__kind_info rk__kinds[RK_FK_DOUBLE + 1] = {
    [RK_FK_BOOL] = { "bool", "b1", 1, 4 },
    [RK_FK_INT8] = { "int8", "i1", 1, 4 },
    [RK_FK_INT16] = { "int16", "i2", 2, 5 },
    [RK_FK_INT32] = { "int32", "i4", 4, 5 },
    [RK_FK_INT64] = { "int64", "i8", 8, 5 },
    [RK_FK_UINT8] = { "uint8", "u1", 1, 5 },
    [RK_FK_UINT16] = { "uint16", "u2", 2, 6 },
    [RK_FK_UINT32] = { "uint32", "u4", 4, 6 },
    [RK_FK_UINT64] = { "uint64", "u8", 8, 6 },
    [RK_FK_FLOAT] = { "float32", "f4", 4, 7 },
    [RK_FK_DOUBLE] = { "float64", "f8", 8, 7 },
};

/* a[0..n) == b[0..n). Inline for the short keys of a message: two
 * overlapping loads cover 1-16 bytes, and no load leaves either range. */
static inline bool
bytes_eq(const char *a, const char *b, size_t n)
{
    if (n >= 8) {
        uint64_t a0, a1, b0, b1;

        if (n > 16)
            return memcmp(a, b, n) == 0;
        memcpy(&a0, a, 8);
        memcpy(&b0, b, 8);
        memcpy(&a1, a + n - 8, 8);
        memcpy(&b1, b + n - 8, 8);
        return ((a0 ^ b0) | (a1 ^ b1)) == 0;
    }
    if (n >= 4) {
        uint32_t a0, a1, b0, b1;

        memcpy(&a0, a, 4);
        memcpy(&b0, b, 4);
        memcpy(&a1, a + n - 4, 4);
        memcpy(&b1, b + n - 4, 4);
        return ((a0 ^ b0) | (a1 ^ b1)) == 0;
    }
    if (n == 0)
        return true;
    return a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1];
}

static bool
str_eq(const char *p, size_t n, const char *lit)
{
    return strlen(lit) == n && bytes_eq(p, lit, n);
}

/* dtype name ("float32") or typestr ("<f4", "|u1", "=i8") -> kind; want
 * (the field's kind, what a frame we wrote says) is tried first. */
static int
parse_dtype(unsigned want, const char *p, size_t n)
{
    if (want <= RK_FK_DOUBLE && n == rk__kinds[want].dtype_len
        && bytes_eq(p, rk__kinds[want].dtype, n))
        return (int)want;
    for (int k = 0; k <= RK_FK_DOUBLE; k++) {
        if (n == rk__kinds[k].dtype_len && bytes_eq(p, rk__kinds[k].dtype, n))
            return k;
        if (n == 3 && (p[0] == '<' || p[0] == '|' || p[0] == '=')
            && memcmp(p + 1, rk__kinds[k].typestr, 2) == 0)
            return k;
    }
    return -1;
}

/* ----------------------------------------------------------- numbers */

/* Scalars are rk_fnum (message.h): read from a token (tok_num) or from
 * memory (rk_fkind_load), stored by store_num. */

/* Stores n as kind at dst. NULL on success, else why not. */
static const char *
store_num(unsigned kind, void *dst, const rk_fnum *n)
{
    int64_t lo = 0;
    uint64_t hi = 0;

    if (kind == RK_FK_BOOL) {
        if (n->tag != RK_FNUM_BOOL)
            return "expected bool";
        *(bool *)dst = n->v.b;
        return NULL;
    }
    if (n->tag == RK_FNUM_BOOL)
        return "expected a number, got bool";
    if (kind == RK_FK_FLOAT || kind == RK_FK_DOUBLE) {
        double d = n->tag == RK_FNUM_FLOAT ? n->v.d
            : n->tag == RK_FNUM_INT        ? (double)n->v.i
                                       : (double)n->v.u;

        if (kind == RK_FK_DOUBLE) {
            *(double *)dst = d;
            return NULL;
        }
        if (d > FLT_MAX || d < -FLT_MAX) {
            if (d == d && d - d == d - d) /* finite */
                return "value out of float32 range";
        }
        *(float *)dst = (float)d;
        return NULL;
    }
    if (n->tag == RK_FNUM_FLOAT)
        return "expected an integer, got float";
    rk_fkind_range((int)kind, &lo, &hi);
    if (n->tag == RK_FNUM_INT ? n->v.i < lo : n->v.u > hi)
        return "integer out of range";
    /* In range: a RK_FNUM_UINT bound for a signed kind fits v.i as well. */
    rk_fkind_store_int((int)kind, dst, n->v.i, n->v.u);
    return NULL;
}

/* ------------------------------------------------------------ decode */

struct dctx {
    const struct rk__tok *tk; /* the tape */
    unsigned flags;
};

#define FAIL_FIELD(err, t, f, fmt, ...)                                       \
    rk__fail(err, "%s.%s: " fmt, (t)->name, (f)->name, __VA_ARGS__)

static const char *const tok_names[] = {
    [RK__T_NIL] = "nil",
    [RK__T_BOOL] = "bool",
    [RK__T_UINT] = "int",
    [RK__T_NINT] = "int",
    [RK__T_F32] = "float",
    [RK__T_F64] = "float",
    [RK__T_STR] = "str",
    [RK__T_BIN] = "bin",
    [RK__T_EXT] = "ext",
    [RK__T_ARRAY] = "array",
    [RK__T_MAP] = "map",
};

static const char *
tok_type_name(const struct rk__tok *k)
{
    return tok_names[k->type];
}

/* The index just past token i and everything inside it. */
static inline uint32_t
tok_next(const struct rk__tok *tk, uint32_t i)
{
    return tk[i].type >= RK__T_ARRAY ? tk[i].v.end : i + 1;
}

#define TOK_KEY_EQ(k, lit)                                                    \
    ((k)->type == RK__T_STR && (k)->n == sizeof(lit) - 1                      \
        && bytes_eq((k)->v.p, lit, sizeof(lit) - 1))

static int
tok_num(const struct rk__tok *k, rk_fnum *n)
{
    switch (k->type) {
    case RK__T_BOOL:
        n->tag = RK_FNUM_BOOL;
        n->v.b = k->v.b;
        return 0;
    case RK__T_UINT:
        n->tag = RK_FNUM_UINT;
        n->v.u = k->v.u;
        return 0;
    case RK__T_NINT:
        n->tag = RK_FNUM_INT;
        n->v.i = k->v.i;
        return 0;
    case RK__T_F32:
    case RK__T_F64:
        n->tag = RK_FNUM_FLOAT;
        n->v.d = k->v.d;
        return 0;
    default:
        return -1;
    }
}

/* An array value in either form: ndarray map or list. Sets n, and either
 * raw and raw_kind (ndarray) or list (n scalar tokens, if they are
 * scalars: the first that is not ends the walk with an error). */
struct arr_src {
    uint64_t n;
    uint32_t ndim; /* ndarray: entries in shape (0 for a numpy scalar) */
    const unsigned char *raw;
    int raw_kind;
    const struct rk__tok *list;
};

static int
array_source(const struct dctx *c, const rk_msgtype *t, const rk_msgfield *f,
    uint32_t oi, struct arr_src *a)
{
    const struct rk__tok *tk = c->tk, *o = &tk[oi];
    const struct rk__tok *data = NULL, *dtype = NULL, *shape = NULL;
    uint32_t pos = oi + 1;

    if (o->type == RK__T_ARRAY) {
        a->n = o->n;
        a->ndim = 1;
        a->list = o + 1;
        a->raw = NULL;
        return RK_OK;
    }
    if (o->type != RK__T_MAP)
        return FAIL_FIELD(RK_EFIELDTYPE, t, f, "expected an array, got %s",
            tok_type_name(o));
    /* The order we and the reference write: no search. The bin and str
     * values are one token each, so the keys are at o[1], o[3], o[5]. */
    if (o->n == 3 && TOK_KEY_EQ(&o[1], "__ndarray__") && o[2].type == RK__T_BIN
        && TOK_KEY_EQ(&o[3], "dtype") && o[4].type == RK__T_STR
        && TOK_KEY_EQ(&o[5], "shape")) {
        data = &o[2];
        dtype = &o[4];
        shape = &o[6];
        o = NULL; /* found */
    }
    for (uint32_t i = 0; o != NULL && i < o->n; i++) {
        const struct rk__tok *k = &tk[pos];
        uint32_t vi = pos + 1;

        pos = tok_next(tk, vi);
        if (TOK_KEY_EQ(k, "__ndarray__"))
            data = &tk[vi];
        else if (TOK_KEY_EQ(k, "dtype"))
            dtype = &tk[vi];
        else if (TOK_KEY_EQ(k, "shape"))
            shape = &tk[vi];
    }
    if (data == NULL || data->type != RK__T_BIN || dtype == NULL
        || dtype->type != RK__T_STR || shape == NULL
        || shape->type != RK__T_ARRAY)
        return FAIL_FIELD(RK_EFIELDTYPE, t, f, "%s",
            "expected an ndarray map (__ndarray__ bin, dtype "
            "str, shape array)");
    a->raw_kind = parse_dtype(f->kind, dtype->v.p, dtype->n);
    if (a->raw_kind < 0)
        return FAIL_FIELD(RK_EFIELDTYPE, t, f, "unsupported dtype '%.*s'",
            (int)dtype->n, dtype->v.p);
    a->n = 1;
    a->ndim = shape->n;
    for (uint32_t i = 0; i < shape->n; i++) {
        const struct rk__tok *d = &shape[1 + i]; /* scalars so far */

        if (d->type != RK__T_UINT)
            return FAIL_FIELD(
                RK_EFIELDTYPE, t, f, "%s", "shape holds a non-integer");
        /* Bounded by the bin size check below; avoid overflow first. */
        if (d->v.u > UINT32_MAX || a->n * d->v.u > UINT32_MAX)
            return FAIL_FIELD(RK_ETOOBIG, t, f, "%s", "shape too large");
        a->n *= d->v.u;
    }
    if (a->n * rk__kinds[a->raw_kind].size != data->n)
        return FAIL_FIELD(RK_EDECODE, t, f,
            "ndarray has %u bytes, shape and dtype say %llu", data->n,
            (unsigned long long)(a->n * rk__kinds[a->raw_kind].size));
    a->raw = (const unsigned char *)data->v.p;
    a->list = NULL;
    return RK_OK;
}

/* Fills n elements of f's kind at dst from a. */
static int
array_fill(const rk_msgtype *t, const rk_msgfield *f, const struct arr_src *a,
    unsigned char *dst)
{
    size_t es = f->elem_size;
    rk_fnum n;
    const char *why;

    if (a->raw != NULL && a->raw_kind == f->kind) {
        if (f->kind == RK_FK_BOOL) {
            for (uint64_t i = 0; i < a->n; i++)
                if (a->raw[i] > 1)
                    return FAIL_FIELD(RK_EFIELDTYPE, t, f,
                        "bool element %llu is %u", (unsigned long long)i,
                        a->raw[i]);
        }
        memcpy(dst, a->raw, (size_t)a->n * es);
        return RK_OK;
    }
    for (uint64_t i = 0; i < a->n; i++) {
        if (a->raw != NULL) {
            n = rk_fkind_load(
                a->raw_kind, a->raw + i * rk__kinds[a->raw_kind].size);
        } else if (tok_num(&a->list[i], &n) != 0) {
            return FAIL_FIELD(RK_EFIELDTYPE, t, f,
                "element %llu: expected %s, got %s", (unsigned long long)i,
                rk__kinds[f->kind].dtype, tok_type_name(&a->list[i]));
        }
        why = store_num(f->kind, dst + i * es, &n);
        if (why != NULL)
            return FAIL_FIELD(RK_EFIELDTYPE, t, f, "element %llu: %s",
                (unsigned long long)i, why);
    }
    return RK_OK;
}

/* A numpy scalar in a scalar field: PyDotCompute's encoder sends
 * np.float32(1.5) or np.int64(3) as a 0-d ndarray map (shape []). The
 * element converts as an array element does (store_num: range-checked,
 * no float into an integer field, bool only into bool). */
static int
scalar_ndarray(const struct dctx *c, const rk_msgtype *t, const rk_msgfield *f,
    uint32_t oi, char *p)
{
    struct arr_src a;
    rk_fnum n;
    const char *why;
    int rc;

    if ((rc = array_source(c, t, f, oi, &a)) != RK_OK)
        return rc;
    if (a.ndim != 0)
        return FAIL_FIELD(RK_EFIELDTYPE, t, f,
            "expected %s or a 0-d ndarray, got %u-d", rk__kinds[f->kind].dtype,
            a.ndim);
    n = rk_fkind_load(a.raw_kind, a.raw);
    if (f->kind == RK_FK_BOOL && a.raw_kind == RK_FK_BOOL && a.raw[0] > 1)
        return FAIL_FIELD(
            RK_EFIELDTYPE, t, f, "bool element 0 is %u", a.raw[0]);
    why = store_num(f->kind, p, &n);
    if (why != NULL)
        return FAIL_FIELD(RK_EFIELDTYPE, t, f, "%s", why);
    return RK_OK;
}

static int decode_map(const struct dctx *c, const rk_msgtype *t, uint32_t mi,
    char *base, rk_msg_header *hdr, int depth);

static int
decode_field(const struct dctx *c, const rk_msgtype *t, const rk_msgfield *f,
    uint32_t oi, char *base, int depth)
{
    const struct rk__tok *o = &c->tk[oi];
    char *p = base + f->offset;
    void *mem;
    struct arr_src a;
    rk_fnum n;
    const char *why;
    int rc;

    switch (f->cls) {
    case RK_FC_SCALAR:
        /* What we and the reference write for the two widest kinds. */
        if (f->kind == RK_FK_DOUBLE && o->type == RK__T_F64) {
            memcpy(p, &o->v.d, sizeof(double));
            return RK_OK;
        }
        if (f->kind == RK_FK_UINT64 && o->type == RK__T_UINT) {
            memcpy(p, &o->v.u, sizeof(uint64_t));
            return RK_OK;
        }
        if (o->type == RK__T_MAP)
            return scalar_ndarray(c, t, f, oi, p);
        if (tok_num(o, &n) != 0)
            return FAIL_FIELD(RK_EFIELDTYPE, t, f, "expected %s, got %s",
                rk__kinds[f->kind].dtype, tok_type_name(o));
        why = store_num(f->kind, p, &n);
        if (why != NULL)
            return FAIL_FIELD(RK_EFIELDTYPE, t, f, "%s", why);
        return RK_OK;
    case RK_FC_ARRAY:
        if ((rc = array_source(c, t, f, oi, &a)) != RK_OK)
            return rc;
        if (a.n != f->count)
            return FAIL_FIELD(RK_EFIELDTYPE, t, f,
                "expected %u elements, got %llu", f->count,
                (unsigned long long)a.n);
        return array_fill(t, f, &a, (unsigned char *)p);
    case RK_FC_VLA:
        if ((rc = array_source(c, t, f, oi, &a)) != RK_OK)
            return rc;
        if (a.n > f->count)
            return FAIL_FIELD(RK_ETOOBIG, t, f,
                "%llu elements exceed maximum %u", (unsigned long long)a.n,
                f->count);
        if (a.n == 0)
            return RK_OK;
        mem = malloc((size_t)a.n * f->elem_size);
        if (mem == NULL)
            return rk__fail(
                RK_ENOMEM, "%s.%s: out of memory", t->name, f->name);
        rk__set_var(p, mem, (uint32_t)a.n); /* owned by obj from here on */
        return array_fill(t, f, &a, mem);
    case RK_FC_BYTES:
    case RK_FC_STRING: {
        int is_str = f->cls == RK_FC_STRING;
        uint32_t want = is_str ? RK__T_STR : RK__T_BIN;
        uint32_t sz = o->n;
        const char *src = o->v.p;

        if (o->type != want)
            return FAIL_FIELD(RK_EFIELDTYPE, t, f, "expected %s, got %s",
                is_str ? "str" : "bin", tok_type_name(o));
        if (sz > f->count)
            return FAIL_FIELD(RK_ETOOBIG, t, f, "length %u exceeds maximum %u",
                sz, f->count);
        if (is_str && !rk__utf8_valid(src, sz))
            return FAIL_FIELD(
                RK_EFIELDTYPE, t, f, "%s", "string is not valid UTF-8");
        if (sz == 0 && !is_str)
            return RK_OK;
        mem = malloc(sz + (size_t)is_str);
        if (mem == NULL)
            return rk__fail(
                RK_ENOMEM, "%s.%s: out of memory", t->name, f->name);
        memcpy(mem, src, sz);
        if (is_str)
            ((char *)mem)[sz] = '\0';
        rk__set_var(p, mem, sz);
        return RK_OK;
    }
    default:
        if (o->type != RK__T_MAP)
            return FAIL_FIELD(RK_EFIELDTYPE, t, f, "expected a %s map, got %s",
                f->nested->name, tok_type_name(o));
        return decode_map(c, f->nested, oi, p, NULL, depth + 1);
    }
}

/* message_id / correlation_id in any form the reference accepts. */
static int
decode_uuid(const struct dctx *c, const rk_msgtype *t, const char *key,
    uint32_t oi, rk_uuid *u)
{
    const struct rk__tok *o = &c->tk[oi], *v = o;

    if (o->type == RK__T_NIL) {
        memset(u, 0, sizeof(*u));
        return RK_OK;
    }
    if (o->type == RK__T_MAP && o->n == 1) {
        const struct rk__tok *k = o + 1, *val = &c->tk[oi + 2];

        if (TOK_KEY_EQ(k, "__uuid_bin__") && val->type == RK__T_BIN)
            v = val;
        else if (TOK_KEY_EQ(k, "__uuid__") && val->type == RK__T_STR)
            v = val;
    }
    if (v->type == RK__T_BIN && v->n == 16) {
        memcpy(u->b, v->v.p, 16);
        return RK_OK;
    }
    if (v->type == RK__T_STR) {
        if (rk_uuid_parse(v->v.p, v->n, u) == RK_OK)
            return RK_OK;
        return rk__fail(
            RK_EFIELDTYPE, "%s.%s: malformed uuid string", t->name, key);
    }
    return rk__fail(RK_EFIELDTYPE, "%s.%s: expected a uuid, got %s", t->name,
        key, tok_type_name(o));
}

/* The keys the envelope writes itself (never field names). */
enum { ENV_NONE, ENV_TYPE, ENV_MESSAGE_ID, ENV_PRIORITY, ENV_CORRELATION_ID };

static inline int
envelope_key(const char *k, uint32_t n)
{
    switch (n) {
    case 8:
        if (bytes_eq(k, "__type__", 8))
            return ENV_TYPE;
        return bytes_eq(k, "priority", 8) ? ENV_PRIORITY : ENV_NONE;
    case 10:
        return bytes_eq(k, "message_id", 10) ? ENV_MESSAGE_ID : ENV_NONE;
    case 14:
        return bytes_eq(k, "correlation_id", 14) ? ENV_CORRELATION_ID
                                                 : ENV_NONE;
    default:
        return ENV_NONE;
    }
}

static int
decode_envelope(const struct dctx *c, const rk_msgtype *t, int env,
    uint32_t vi, rk_msg_header *hdr)
{
    const struct rk__tok *val = &c->tk[vi];
    rk_uuid u;
    int rc;

    switch (env) {
    case ENV_TYPE:
        if (val->type != RK__T_STR)
            return rk__fail(RK_EFIELDTYPE, "%s.__type__: expected str, got %s",
                t->name, tok_type_name(val));
        if (!str_eq(val->v.p, val->n, t->name))
            return rk__fail(RK_ETYPE, "expected %s, got %.*s", t->name,
                (int)val->n, val->v.p);
        return RK_OK;
    case ENV_PRIORITY:
        if (val->type != RK__T_UINT || val->v.u > 255)
            return rk__fail(
                RK_EFIELDTYPE, "%s.priority: expected an int 0-255", t->name);
        if (hdr != NULL)
            hdr->priority = (uint8_t)val->v.u;
        return RK_OK;
    case ENV_MESSAGE_ID:
        if ((rc = decode_uuid(c, t, "message_id", vi, &u)) != RK_OK)
            return rc;
        if (hdr != NULL)
            hdr->message_id = u;
        return RK_OK;
    default:
        if ((rc = decode_uuid(c, t, "correlation_id", vi, &u)) != RK_OK)
            return rc;
        if (hdr != NULL)
            hdr->correlation_id = u;
        return RK_OK;
    }
}

static int
decode_map(const struct dctx *c, const rk_msgtype *t, uint32_t mi, char *base,
    rk_msg_header *hdr, int depth)
{
    const struct rk__tok *tk = c->tk;
    const rk_msgfield *f;
    uint64_t seen = 0, all;
    uint32_t pos = mi + 1, npairs = tk[mi].n;
    unsigned hint = 0, nf = t->nfields;
    int rc;

    if (depth > RK__MSG_MAX_DEPTH)
        return rk__fail(RK_EDECODE, "%s: types nest too deeply", t->name);
    /* Unregistered types get here too: seen holds at most 64 fields.
     * rk_msg_decode() checked the top-level type already. */
    if (depth > 0 && rk__unlikely((rc = rk__msgtype_check_fields(t)) != RK_OK))
        return rc;
    f = t->fields();
    for (uint32_t i = 0; i < npairs; i++) {
        const struct rk__tok *k = &tk[pos];
        uint32_t vi = pos + 1;
        unsigned idx = nf;
        int env = ENV_NONE;

        pos = tok_next(tk, vi);
        if (k->type == RK__T_STR) {
            uint32_t kl = k->n;
            const char *kp = k->v.p;

            /* Frames we or the reference wrote list the fields in
             * declaration order, before the envelope keys. */
            if (hint < nf && f[hint].name_len == kl
                && bytes_eq(f[hint].name, kp, kl)) {
                idx = hint;
            } else if ((env = envelope_key(kp, kl)) == ENV_NONE) {
                for (unsigned j = 0; j < nf; j++) {
                    if (f[j].name_len == kl && bytes_eq(f[j].name, kp, kl)) {
                        idx = j;
                        break;
                    }
                }
            }
        }
        if (idx < nf) {
            if (seen & (UINT64_C(1) << idx))
                return rk__fail(
                    RK_EDECODE, "%s.%s: duplicate key", t->name, f[idx].name);
            rc = decode_field(c, t, &f[idx], vi, base, depth);
            if (rc != RK_OK)
                return rc;
            seen |= UINT64_C(1) << idx;
            hint = idx + 1;
        } else if (env != ENV_NONE) {
            if ((rc = decode_envelope(c, t, env, vi, hdr)) != RK_OK)
                return rc;
        } else if (c->flags & RK_MSG_STRICT) {
            if (k->type == RK__T_STR)
                return rk__fail(RK_EFIELDUNKNOWN, "%s: unknown field '%.*s'",
                    t->name, (int)k->n, k->v.p);
            return rk__fail(RK_EFIELDUNKNOWN, "%s: unknown %s key", t->name,
                tok_type_name(k));
        }
    }
    all = nf == 64 ? UINT64_MAX : (UINT64_C(1) << nf) - 1;
    if (seen != all) {
        for (unsigned j = 0; j < nf; j++)
            if (!(seen & (UINT64_C(1) << j)))
                return rk__fail(
                    RK_EFIELDMISSING, "%s.%s: missing", t->name, f[j].name);
    }
    return RK_OK;
}

int
rk_msg_decode(const rk_msgtype *t, const void *buf, size_t len, void *obj,
    rk_msg_header *h_out, unsigned flags)
{
    struct rk__tok stack[RK__TAPE_STACK];
    struct rk__tape tp;
    struct dctx c;
    rk_msg_header h;
    int rc;

    if (t == NULL || obj == NULL || (buf == NULL && len != 0))
        return rk__fail(RK_EINVAL, "rk_msg_decode: NULL argument");
    memset(obj, 0, t->size);
    if (rk__unlikely((rc = rk__msgtype_check_fields(t)) != RK_OK))
        return rc;
    rc = rk__tape_parse(&tp, stack, RK__TAPE_STACK, buf, len, t->name);
    if (rc == RK_OK && tp.tok[0].type != RK__T_MAP)
        rc = rk__fail(RK_EDECODE, "%s: message is a %s, not a map", t->name,
            tok_type_name(&tp.tok[0]));
    if (rc == RK_OK) {
        c = (struct dctx) { tp.tok, flags };
        memset(&h.message_id, 0, sizeof(h.message_id));
        memset(&h.correlation_id, 0, sizeof(h.correlation_id));
        h.priority = RK_MSG_PRIORITY_DEFAULT;
        rc = decode_map(&c, t, 0, obj, &h, 0);
    }
    rk__tape_release(&tp);
    if (rc != RK_OK) {
        rk_msg_free(t, obj);
        memset(obj, 0, t->size);
        return rc;
    }
    if (h_out != NULL) {
        h_out->message_id = h.message_id;
        h_out->correlation_id = h.correlation_id;
        h_out->priority = h.priority;
    }
    return RK_OK;
}

static void
free_obj(const rk_msgtype *t, char *base, int depth)
{
    const rk_msgfield *f;

    /* A malformed nested type stopped decode before it wrote anything. */
    if (t->fixed_size != 0 || depth > RK__MSG_MAX_DEPTH || t->fields == NULL)
        return;
    f = t->fields();
    for (unsigned i = 0; i < t->nfields; i++) {
        char *p = base + f[i].offset;

        if (f[i].cls == RK_FC_NESTED) {
            free_obj(f[i].nested, p, depth + 1);
        } else if (f[i].cls >= RK_FC_VLA) {
            free(rk__get_var(p).ptr);
            rk__set_var(p, NULL, 0);
        }
    }
}

void
rk_msg_free(const rk_msgtype *t, void *obj)
{
    if (t != NULL && obj != NULL)
        free_obj(t, obj, 0);
}
