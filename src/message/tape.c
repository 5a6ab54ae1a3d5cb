/*
 * src/message/tape.c - msgpack-c's parser, building a token tape.
 *
 * msgpack-c ships its parser as a template: msgpack/unpack_template.h is
 * the state machine (every tag byte, length field and nesting rule of the
 * format), parameterised by macros that name the object type, the user
 * state and one callback per kind of object. msgpack-c's own unpack.c
 * instantiates it to build msgpack_object trees in a zone. We instantiate
 * the same header once here, so the grammar stays msgpack-c's and only
 * what is built differs: a flat array of 16-byte tokens in pre-order (a
 * container's token comes before its elements and records the index just
 * past its last descendant, so a subtree is skipped in O(1)). An object is
 * a uint32_t token index, so the parser's stack copies 4 bytes, not a
 * 24-byte msgpack_object, and nothing is allocated while the tokens fit in
 * the caller's array.
 *
 * Bounds: every msgpack object takes at least one byte, so a frame of len
 * bytes holds at most len objects. The container callbacks keep a count of
 * the objects declared so far (the root plus every container's elements;
 * two per map pair) and refuse a header that would take it past len before
 * anything is stored. The tape therefore never holds more than len tokens,
 * and it only grows as objects are actually read.
 */
#include <msgpack/unpack.h> /* msgpack_unpack_return */
#include <msgpack/unpack_define.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "message_internal.h"

struct tape_user {
    struct rk__tok *tok; /* tp->tok, cached */
    uint32_t n, cap;
    uint64_t declared; /* objects declared so far, at most len */
    size_t len;
    struct rk__tape *tp;
    int err; /* an RK_ code when a callback failed, else 0 */
};

/* Out of line: the caller's array is full; move to (or grow) a heap one. */
static int
tape_grow(struct tape_user *u)
{
    struct rk__tape *tp = u->tp;
    uint64_t cap = (uint64_t)u->cap * 2;
    struct rk__tok *p;

    if (cap > u->len + 1)
        cap = u->len + 1; /* enough for every object the frame can hold */
    if (cap <= u->cap || cap > UINT32_MAX
        || cap > SIZE_MAX / sizeof(struct rk__tok)) {
        u->err = RK_ENOMEM;
        return -1;
    }
    if (tp->heap == NULL) {
        p = malloc((size_t)cap * sizeof(*p));
        if (p != NULL)
            memcpy(p, u->tok, (size_t)u->n * sizeof(*p));
    } else {
        p = realloc(tp->heap, (size_t)cap * sizeof(*p));
    }
    if (p == NULL) {
        u->err = RK_ENOMEM;
        return -1;
    }
    tp->heap = p;
    u->tok = p;
    u->cap = (uint32_t)cap;
    return 0;
}

/* Appends a token; *o receives its index. NULL when memory ran out. */
static inline struct rk__tok *
tape_push(struct tape_user *u, uint32_t *o)
{
    if (rk__unlikely(u->n == u->cap) && tape_grow(u) != 0)
        return NULL;
    *o = u->n;
    return &u->tok[u->n++];
}

/* A container of n elements (objects) starts: refuse it if the frame
 * cannot hold them. */
static inline int
tape_container(
    struct tape_user *u, uint32_t type, uint32_t n, uint64_t objs, uint32_t *o)
{
    struct rk__tok *k;

    if (rk__unlikely(objs > u->len - u->declared)) {
        u->err = RK_ETRUNCATED;
        return -1;
    }
    u->declared += objs;
    if ((k = tape_push(u, o)) == NULL)
        return -1;
    k->type = type;
    k->n = n;
    k->v.end = u->n; /* moved on by every element */
    return 0;
}

/* The callbacks msgpack-c's template calls (msgpack_unpack_callback). */
static inline uint32_t
tape_cb_root(struct tape_user *u)
{
    (void)u;
    return 0;
}

#define TAPE_SCALAR(name, argtype, T, member)                                 \
    static inline int tape_cb_##name(                                         \
        struct tape_user *u, argtype d, uint32_t *o)                          \
    {                                                                         \
        struct rk__tok *k = tape_push(u, o);                                  \
                                                                              \
        if (k == NULL)                                                        \
            return -1;                                                        \
        k->type = (T);                                                        \
        k->v.member = d;                                                      \
        return 0;                                                             \
    }
/* Signed encodings of non-negative values are positive integers, as in
 * msgpack-c's own callbacks. */
#define TAPE_SIGNED(name, argtype)                                            \
    TAPE_SCALAR(name, argtype, d < 0 ? RK__T_NINT : RK__T_UINT, i)

TAPE_SCALAR(uint8, uint8_t, RK__T_UINT, u)
TAPE_SCALAR(uint16, uint16_t, RK__T_UINT, u)
TAPE_SCALAR(uint32, uint32_t, RK__T_UINT, u)
TAPE_SCALAR(uint64, uint64_t, RK__T_UINT, u)
TAPE_SIGNED(int8, int8_t)
TAPE_SIGNED(int16, int16_t)
TAPE_SIGNED(int32, int32_t)
TAPE_SIGNED(int64, int64_t)
TAPE_SCALAR(float, float, RK__T_F32, d)
TAPE_SCALAR(double, double, RK__T_F64, d)

static inline int
tape_cb_nil(struct tape_user *u, uint32_t *o)
{
    struct rk__tok *k = tape_push(u, o);

    if (k == NULL)
        return -1;
    k->type = RK__T_NIL;
    return 0;
}

static inline int
tape_cb_bool(struct tape_user *u, bool b, uint32_t *o)
{
    struct rk__tok *k = tape_push(u, o);

    if (k == NULL)
        return -1;
    k->type = RK__T_BOOL;
    k->v.b = b;
    return 0;
}

static inline int
tape_cb_true(struct tape_user *u, uint32_t *o)
{
    return tape_cb_bool(u, true, o);
}

static inline int
tape_cb_false(struct tape_user *u, uint32_t *o)
{
    return tape_cb_bool(u, false, o);
}

static inline int
tape_cb_array(struct tape_user *u, unsigned n, uint32_t *o)
{
    return tape_container(u, RK__T_ARRAY, n, n, o);
}

static inline int
tape_cb_map(struct tape_user *u, unsigned n, uint32_t *o)
{
    return tape_container(u, RK__T_MAP, n, 2 * (uint64_t)n, o);
}

static inline int
tape_cb_array_item(struct tape_user *u, uint32_t *c, uint32_t o)
{
    (void)o;
    u->tok[*c].v.end = u->n;
    return 0;
}

static inline int
tape_cb_map_item(struct tape_user *u, uint32_t *c, uint32_t k, uint32_t v)
{
    (void)k;
    (void)v;
    u->tok[*c].v.end = u->n;
    return 0;
}

/* str, bin and ext point into the frame; ext keeps its type byte first. */
#define TAPE_BYTES(name, T)                                                   \
    static inline int tape_cb_##name(struct tape_user *u, const char *b,      \
        const char *p, unsigned l, uint32_t *o)                               \
    {                                                                         \
        struct rk__tok *k = tape_push(u, o);                                  \
                                                                              \
        (void)b;                                                              \
        if (k == NULL)                                                        \
            return -1;                                                        \
        k->type = (T);                                                        \
        k->n = l;                                                             \
        k->v.p = p;                                                           \
        return 0;                                                             \
    }
TAPE_BYTES(str, RK__T_STR)
TAPE_BYTES(bin, RK__T_BIN)
TAPE_BYTES(ext, RK__T_EXT)

/* The instantiation (compare msgpack-c's unpack.c). The template is
 * msgpack-c's code, so our stricter warnings are off inside it. */
#define msgpack_unpack_func(ret, name) static ret tape##name
#define msgpack_unpack_callback(name)  tape_cb##name
#define msgpack_unpack_struct(name)    struct tape##name
#define msgpack_unpack_object          uint32_t
#define msgpack_unpack_user            struct tape_user

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <msgpack/unpack_template.h>
#pragma GCC diagnostic pop

int
rk__tape_parse(struct rk__tape *tp, struct rk__tok *stack, uint32_t stack_cap,
    const void *buf, size_t len, const char *what)
{
    struct tape_context ctx;
    size_t off = 0;
    int ret;

    tp->tok = stack;
    tp->n = 0;
    tp->heap = NULL;
    if (len == 0)
        return rk__fail(RK_ETRUNCATED, "%s: empty frame", what);
    ctx.user = (struct tape_user) { stack, 0, stack_cap, 1, len, tp, 0 };
    tape_init(&ctx);
    ret = tape_execute(&ctx, buf, len, &off);
    tp->tok = ctx.user.tok;
    tp->n = ctx.user.n;
    if (rk__likely(ret > 0)) {
        if (rk__unlikely(off != len))
            return rk__fail(RK_EDECODE,
                "%s: %zu trailing bytes after the message", what, len - off);
        return RK_OK;
    }
    if (ret == 0)
        return rk__fail(RK_ETRUNCATED, "%s: frame is truncated", what);
    switch (ctx.user.err) {
    case RK_ETRUNCATED:
        return rk__fail(RK_ETRUNCATED,
            "%s: a container at byte %zu declares more objects than the "
            "%zu-byte frame holds",
            what, off, len);
    case RK_ENOMEM:
        return rk__fail(
            RK_ENOMEM, "%s: out of memory for %u tokens", what, ctx.user.n);
    default:
        break;
    }
    if (ret == MSGPACK_UNPACK_NOMEM_ERROR) /* the template's stack */
        return rk__fail(RK_EDECODE, "%s: nested deeper than %d levels", what,
            MSGPACK_EMBED_STACK_SIZE);
    if (off >= len)
        return rk__fail(RK_EDECODE, "%s: malformed msgpack", what);
    return rk__fail(RK_EDECODE, "%s: byte 0x%02x at %zu is not msgpack", what,
        ((const unsigned char *)buf)[off], off);
}

void
rk__tape_release(struct rk__tape *tp)
{
    free(tp->heap);
    tp->heap = NULL;
}
