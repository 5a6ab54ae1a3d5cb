/*
 * src/message/message_internal.h - shared by the message sources.
 */
#ifndef RK_SRC_MESSAGE_INTERNAL_H
#define RK_SRC_MESSAGE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ringkernel/message.h"

/* FNV-1a over n bytes, continuing from h. */
static inline uint64_t
rk__fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

/* Checks a descriptor (recursively, depth-limited): RK_EINVAL with a
 * detail on a malformed one. */
int rk__msgtype_validate(const rk_msgtype *t, int depth);

/* The part of rk__msgtype_validate() that encode and decode repeat on
 * every type they walk, since they accept unregistered types: a field
 * table, 1..RK_MSG_MAX_FIELDS fields (decode tracks them in a 64-bit
 * mask) and no field whose wire key is a reserved envelope key. O(fields)
 * length compares, no string scans. RK_EINVAL with a detail. */
int rk__msgtype_check_fields(const rk_msgtype *t);

/* Element kinds on the wire: numpy names and sizes (codec.c). */
struct rk__kind_info {
    const char *dtype;   /* numpy dtype name */
    const char *typestr; /* numpy typestr without the byte-order char */
    uint8_t size;
    uint8_t dtype_len; /* strlen(dtype) */
};

extern const struct rk__kind_info rk__kinds[RK_FK_DOUBLE + 1];

/* The {ptr, len} head shared by rk_str, rk_bytes and rk_vla_*; accessed
 * with memcpy so no struct type is punned. */
struct var_head {
    void *ptr;
    uint32_t len;
};

_Static_assert(offsetof(rk_str, len) == offsetof(struct var_head, len)
        && offsetof(rk_vla_f64, len) == offsetof(struct var_head, len),
    "variable-length heads share one layout");

static inline struct var_head
rk__get_var(const char *p)
{
    struct var_head v;

    memcpy(&v.ptr, p + offsetof(struct var_head, ptr), sizeof(v.ptr));
    memcpy(&v.len, p + offsetof(struct var_head, len), sizeof(v.len));
    return v;
}

static inline void
rk__set_var(char *p, void *ptr, uint32_t len)
{
    memcpy(p + offsetof(struct var_head, ptr), &ptr, sizeof(ptr));
    memcpy(p + offsetof(struct var_head, len), &len, sizeof(len));
}

/*
 * The token tape (tape.c): msgpack-c's parser template instantiated to
 * write one rk__tok per msgpack object, in pre-order. A container's token
 * holds its element count (map: pairs) and v.end, the index just past its
 * last descendant; its elements follow it (a map's as key, value, key,
 * ...). str, bin and ext tokens point into the frame (ext: type byte
 * first, n counts it).
 */
enum rk__tok_type {
    RK__T_NIL,
    RK__T_BOOL,
    RK__T_UINT, /* v.u */
    RK__T_NINT, /* v.i, always negative */
    RK__T_F32,  /* v.d, widened */
    RK__T_F64,
    RK__T_STR,
    RK__T_BIN,
    RK__T_EXT,
    RK__T_ARRAY, /* containers last: type >= RK__T_ARRAY */
    RK__T_MAP
};

struct rk__tok {
    uint32_t type; /* rk__tok_type */
    uint32_t n;    /* STR/BIN/EXT: bytes; ARRAY: elements; MAP: pairs */
    union {
        bool b;
        uint64_t u;
        int64_t i;
        double d;
        const char *p; /* STR/BIN/EXT */
        uint32_t end;  /* ARRAY/MAP */
    } v;
};

/* Tokens rk_msg_decode keeps on its stack before the tape moves to the
 * heap. */
#define RK__TAPE_STACK 128

/* A parsed frame: tok[0..n), in the caller's array or in heap (owned). */
struct rk__tape {
    struct rk__tok *tok;
    uint32_t n;
    struct rk__tok *heap;
};

/*
 * Parses exactly one msgpack object from buf[0..len) into tp, starting in
 * stack[0..stack_cap) and moving to the heap if it needs more. what (the
 * type name) prefixes error details. RK_ETRUNCATED (empty or cut short,
 * or a container declaring more objects than the frame can hold),
 * RK_EDECODE (not msgpack, trailing bytes, nested deeper than
 * MSGPACK_EMBED_STACK_SIZE), RK_ENOMEM. Call rk__tape_release() after,
 * whatever it returned.
 */
int rk__tape_parse(struct rk__tape *tp, struct rk__tok *stack,
    uint32_t stack_cap, const void *buf, size_t len, const char *what);
void rk__tape_release(struct rk__tape *tp);

/* Deepest nesting of message types accepted. */
#define RK__MSG_MAX_DEPTH 16

#endif /* RK_SRC_MESSAGE_INTERNAL_H */
