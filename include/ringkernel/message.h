/** @file
 * ringkernel/message.h - message envelope, ids, typed messages, codecs.
 *
 * Every message that travels through a ringkernel queue is one slot holding
 * a fixed 64-byte envelope (rk_msg_header) followed by the payload. The
 * payload is either
 *   - a msgpack map, wire-compatible with PyDotCompute (docs/wire-format.md),
 *     produced by rk_msg_encode() and read by rk_msg_decode(); or
 *   - the fixed-layout form of a type without variable-length fields: the
 *     C struct's bytes, which GPU code reads in place (rk_msg_fixed_*).
 *
 * Message types are declared once, as an X-macro field list:
 *
 *     #define VEC_ADD_FIELDS(X)                  \
 *         X(a, RK_FLOAT)                         \
 *         X(b, RK_FLOAT)                         \
 *         X(weights, RK_ARRAY(RK_FLOAT, 4))      \
 *         X(samples, RK_VLA(RK_DOUBLE, 4096))    \
 *         X(label, RK_STRING(64))
 *
 *     RK_MSGTYPE_DECLARE(vec_add, VEC_ADD_FIELDS)          // in a header
 *     RK_MSGTYPE_DEFINE(vec_add, "VectorAdd", 42, VEC_ADD_FIELDS) // one .c
 *
 * which gives the struct `vec_add` and its descriptor `vec_add_msgtype`.
 * docs/messages.md explains the field types and the ownership rules.
 *
 * Everything here assumes a little-endian host (x86-64, aarch64, and every
 * CUDA GPU are); the build refuses a big-endian one.
 */
#ifndef RINGKERNEL_MESSAGE_H
#define RINGKERNEL_MESSAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ringkernel messages need a little-endian host"
#endif

/* ------------------------------------------------------------------ ids */

/** A 16-byte UUID in RFC 9562 byte order (big-endian fields, as printed). */
typedef struct rk_uuid {
    uint8_t b[16]; /**< the 16 bytes, most significant first */
} rk_uuid;

/** Length of the canonical text form "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
 */
#define RK_UUID_STRLEN 36

/**
 * A new UUID version 7: 48-bit Unix milliseconds, then a 42-bit per-thread
 * counter, then 32 random bits. Ids from one thread strictly increase; ids
 * from different threads sort by their millisecond. Lock-free: all state is
 * per-thread. Never fails.
 */
rk_uuid rk_uuid_v7(void);

/** True if every byte of u is zero (the "none" correlation id); u NULL
 * counts as nil. */
bool rk_uuid_is_nil(const rk_uuid *u);

/** memcmp order, which for v7 ids is time order. NULL sorts before any
 * id (and equals NULL). */
int rk_uuid_cmp(const rk_uuid *a, const rk_uuid *b);

/** Writes the 36-character lower-case form plus a NUL into out. u NULL
 * writes the nil id; out NULL does nothing. */
void rk_uuid_format(const rk_uuid *u, char out[RK_UUID_STRLEN + 1]);

/**
 * Parses the forms Python's uuid.UUID(str) accepts: 32 hex digits, hyphens
 * anywhere, optional "urn:uuid:" prefix, optional braces. s need not be NUL
 * terminated. RK_EDECODE (detail says why) on anything else, RK_EINVAL if
 * s or out is NULL; *out is written only on success.
 */
int rk_uuid_parse(const char *s, size_t len, rk_uuid *out);

/* ------------------------------------------------------------ envelope */

#define RK_MSG_HEADER_SIZE 64      /**< bytes of rk_msg_header on the wire */
#define RK_MSG_MAGIC       0x4B52u /**< bytes 'R','K' */
/** the envelope version this library writes */
#define RK_MSG_VERSION 1u
/** the priority of a message that sets none */
#define RK_MSG_PRIORITY_DEFAULT 128u

/** rk_msg_header.flags. Bits 0-7 belong to this layer; bits 8-31 are free
 * for the runtime (RK_MSG_F_USER_SHIFT). */
/** payload is a msgpack map (rk_msg_encode) */
#define RK_MSG_F_MSGPACK 0x1u
/** payload is a fixed layout (rk_msg_fixed_*) */
#define RK_MSG_F_FIXED         0x2u
#define RK_MSG_F_ENCODING_MASK 0x3u /**< the encoding bits */
#define RK_MSG_F_USER_SHIFT    8    /**< first bit free for the runtime */
/** set by rk_request: the sender waits for the reply by correlation id
 * (layers that forward messages keep a route back only for these) */
#define RK_MSG_F_REQUEST 0x100u
/** set by a device kernel (rk_dev_reply_host): the message is for the
 * host, so it goes to the kernel's output queue even when the kernel has
 * an rk_connect route (which the device carried itself) */
#define RK_MSG_F_HOST 0x200u
/** A device kernel's publish (rk_dev_publish, RK_DEV_MSG_F_TOPIC): the
 * topic index in bits 16..31, which the cuda relay maps to a name
 * (rk_kernel_config.device_topics) and clears before the fan-out. */
#define RK_MSG_F_TOPIC 0x400u

/**
 * The type id of an error reply (ids from 0xFFFFFF00 up are the
 * library's). Its payload is one little-endian int32, an RK_E* code,
 * then optionally a detail text (UTF-8, not NUL-terminated). An
 * rk_request answered with one returns that code, with the text as
 * rk_errdetail(); a plain rk_recv returns it as any other message.
 * Kernels send one with rk_ctx_reply_error.
 */
#define RK_MSG_TYPE_ERROR 0xFFFFFF00u

/**
 * The envelope at the front of every queue slot. Layout (all little-endian,
 * version 1; docs/wire-format.md):
 *
 *   off size field
 *     0    2 magic           0x4B52 ("RK")
 *     2    1 version         RK_MSG_VERSION
 *     3    1 priority        0-255, higher is more urgent, default 128
 *     4    4 type_id         rk_msgtype.id of the payload, 0 = untyped
 *     8    4 flags           RK_MSG_F_*
 *    12    4 payload_len     bytes of payload after this header
 *    16   16 message_id      UUID v7
 *    32   16 correlation_id  all zeros = none
 *    48    8 send_ns         rk_now_ns() when sent if the send was
 *                            sampled for latency telemetry, else 0
 *                            (see send_ns below)
 *    56    4 sender          sending kernel id, 0 = host or unknown
 *    60    2 type_version    rk_msgtype.version of the payload
 *    62    2 reserved        must be 0
 *
 * A plain value type: copy it freely; it owns nothing.
 */
typedef struct rk_msg_header {
    uint16_t magic;         /**< 0x4B52 ("RK") */
    uint8_t version;        /**< RK_MSG_VERSION */
    uint8_t priority;       /**< 0-255, higher is more urgent */
    uint32_t type_id;       /**< rk_msgtype.id of the payload, 0 = untyped */
    uint32_t flags;         /**< RK_MSG_F_* bits */
    uint32_t payload_len;   /**< bytes of payload after the header */
    rk_uuid message_id;     /**< UUID v7 */
    rk_uuid correlation_id; /**< all zeros = none */
    /** The sender's rk_now_ns() when the runtime sampled this send for
     * latency telemetry, else 0: a sending thread stamps one send in the
     * kernel's latency_sample (default 16) and, when its sends come 1 ms
     * or more apart, every send (docs/telemetry.md, "Latency sampling");
     * 0 always with telemetry_off. The receiving kernel times exactly the
     * messages with a non-zero send_ns. rk_msg_header_init sets it to
     * rk_now_ns(); rk_send_frame restamps it by the forwarding thread's
     * sampling. */
    uint64_t send_ns;
    uint32_t sender;        /**< sending kernel id, 0 = host or unknown */
    uint16_t type_version;  /**< rk_msgtype.version of the payload */
    uint16_t reserved;      /**< must be 0 */
} rk_msg_header;

#if !defined(__cplusplus)
_Static_assert(sizeof(rk_msg_header) == RK_MSG_HEADER_SIZE,
    "rk_msg_header must be 64 bytes");
_Static_assert(offsetof(rk_msg_header, message_id) == 16, "layout");
_Static_assert(offsetof(rk_msg_header, correlation_id) == 32, "layout");
_Static_assert(offsetof(rk_msg_header, send_ns) == 48, "layout");
_Static_assert(offsetof(rk_msg_header, type_version) == 60, "layout");
#endif

/**
 * Fills h: magic, version, a fresh rk_uuid_v7() message id, no correlation,
 * the given type id and priority, send_ns = rk_now_ns(), everything else 0.
 * h NULL does nothing (as for the two setters below).
 */
void rk_msg_header_init(rk_msg_header *h, uint32_t type_id, uint8_t priority);

/** Makes h a reply to orig: h's correlation id becomes orig's message id.
 * Either NULL: does nothing. */
void rk_msg_reply(rk_msg_header *h, const rk_msg_header *orig);

/** Sets h's correlation id to corr (NULL or nil clears it). */
void rk_msg_with_correlation(rk_msg_header *h, const rk_uuid *corr);

/**
 * Writes h as 64 wire bytes to dst. RK_EINVAL if h or dst is NULL,
 * RK_EMSGSIZE if cap < 64.
 */
int rk_msg_header_write(const rk_msg_header *h, void *dst, size_t cap);

/**
 * Parses and checks the envelope at the front of a slot of len bytes:
 * RK_ETRUNCATED if len < 64 or payload_len exceeds len - 64, RK_EDECODE on
 * a bad magic, non-zero reserved bits or both encodings flagged,
 * RK_ENOTSUP on an unknown version. On success *out holds the header and
 * the payload is at (const char *)buf + 64. RK_EINVAL if buf or out is
 * NULL.
 */
int rk_msg_header_parse(const void *buf, size_t len, rk_msg_header *out);

/* ------------------------------------------------------- type descriptor */

/** Element kinds (scalars and array elements). */
typedef enum rk_fkind {
    RK_FK_BOOL,
    RK_FK_INT8,
    RK_FK_INT16,
    RK_FK_INT32,
    RK_FK_INT64,
    RK_FK_UINT8,
    RK_FK_UINT16,
    RK_FK_UINT32,
    RK_FK_UINT64,
    RK_FK_FLOAT,
    RK_FK_DOUBLE,
    RK_FK_NONE /**< for string, bytes, nested */
} rk_fkind;

/** The values an integer kind holds: *lo the smallest (0 for the unsigned
 * kinds), *hi the largest. Returns 0 and sets both to 0 for a kind that is
 * not an integer (RK_FK_BOOL, the floating kinds, RK_FK_NONE). The C
 * codec and the Python package check a value against it before
 * rk_fkind_store_int. */
static inline int
rk_fkind_range(int kind, int64_t *lo, uint64_t *hi)
{
    static const struct {
        int64_t lo;
        uint64_t hi;
    } r[] = { /* RK_FK_INT8 .. RK_FK_UINT64, in the enum's order */
        { INT8_MIN, INT8_MAX }, { INT16_MIN, INT16_MAX },
        { INT32_MIN, INT32_MAX }, { INT64_MIN, INT64_MAX }, { 0, UINT8_MAX },
        { 0, UINT16_MAX }, { 0, UINT32_MAX }, { 0, UINT64_MAX } };
    int ok = kind >= RK_FK_INT8 && kind <= RK_FK_UINT64;

    *lo = ok ? r[kind - RK_FK_INT8].lo : 0;
    *hi = ok ? r[kind - RK_FK_INT8].hi : 0;
    return ok;
}

/** Every integer kind with its C type and the member of rk_fnum (and the
 * argument of rk_fkind_store_int) that holds it: i signed, u unsigned. */
#define RK_FK_INTEGERS(X)                                                     \
    X(RK_FK_INT8, int8_t, i)                                                  \
    X(RK_FK_INT16, int16_t, i)                                                \
    X(RK_FK_INT32, int32_t, i)                                                \
    X(RK_FK_INT64, int64_t, i)                                                \
    X(RK_FK_UINT8, uint8_t, u)                                                \
    X(RK_FK_UINT16, uint16_t, u)                                              \
    X(RK_FK_UINT32, uint32_t, u)                                              \
    X(RK_FK_UINT64, uint64_t, u)

/** Stores an integer at dst as kind (RK_FK_INT8..RK_FK_UINT64), narrowed
 * to the kind's width: the signed kinds take i, the unsigned kinds u. The
 * value must be within rk_fkind_range(kind); the caller checks. dst need
 * not be aligned. */
static inline void
rk_fkind_store_int(int kind, void *dst, int64_t i, uint64_t u)
{
#define RK__FK_STORE(k, T, m)                                                 \
    case k: {                                                                 \
        T t_ = (T)(m);                                                        \
        memcpy(dst, &t_, sizeof t_);                                          \
        break;                                                                \
    }
    switch (kind) {
        RK_FK_INTEGERS(RK__FK_STORE)
    default:
        break;
    }
#undef RK__FK_STORE
}

/** The tags of rk_fnum. */
enum { RK_FNUM_BOOL, RK_FNUM_INT, RK_FNUM_UINT, RK_FNUM_FLOAT };

/** One element as rk_fkind_load read it, widened without loss. */
typedef struct rk_fnum {
    int tag; /**< RK_FNUM_BOOL, _INT (always negative), _UINT or _FLOAT */
    union {
        bool b;     /**< RK_FNUM_BOOL */
        int64_t i;  /**< RK_FNUM_INT: a negative integer */
        uint64_t u; /**< RK_FNUM_UINT: a non-negative integer */
        double d;   /**< RK_FNUM_FLOAT: float32 widened (exact) or float64 */
    } v;            /**< the value, by tag */
} rk_fnum;

#define RK__FNUM_SET_i(n, x)                                                  \
    do {                                                                      \
        if ((x) < 0) {                                                        \
            (n).tag = RK_FNUM_INT;                                            \
            (n).v.i = (int64_t)(x);                                           \
        } else {                                                              \
            (n).tag = RK_FNUM_UINT;                                           \
            (n).v.u = (uint64_t)(x);                                          \
        }                                                                     \
    } while (0)
#define RK__FNUM_SET_u(n, x)                                                  \
    do {                                                                      \
        (n).tag = RK_FNUM_UINT;                                               \
        (n).v.u = (uint64_t)(x);                                              \
    } while (0)

/** Reads one element of kind (any rk_fkind but RK_FK_NONE) at p, which
 * need not be aligned: the one place that knows each kind's C type, for
 * the codec, the encoder and the Python package. */
static inline rk_fnum
rk_fkind_load(int kind, const void *p)
{
    rk_fnum n = { RK_FNUM_FLOAT, { 0 } };

#define RK__FK_LOAD(k, T, m)                                                  \
    case k: {                                                                 \
        T t_;                                                                 \
        memcpy(&t_, p, sizeof t_);                                            \
        RK__FNUM_SET_##m(n, t_);                                              \
        break;                                                                \
    }
    switch (kind) {
        RK_FK_INTEGERS(RK__FK_LOAD)
    case RK_FK_BOOL:
        n.tag = RK_FNUM_BOOL;
        n.v.b = *(const unsigned char *)p != 0;
        break;
    case RK_FK_FLOAT: {
        float f;
        memcpy(&f, p, sizeof f);
        n.v.d = f;
        break;
    }
    default:
        memcpy(&n.v.d, p, sizeof n.v.d);
        break;
    }
#undef RK__FK_LOAD
    return n;
}

/** Field shapes. */
typedef enum rk_fclass {
    RK_FC_SCALAR, /**< one element */
    RK_FC_ARRAY,  /**< count elements inline */
    RK_FC_VLA,    /**< rk_vla_*: up to count elements, heap */
    RK_FC_BYTES,  /**< rk_bytes: up to count bytes, heap */
    RK_FC_STRING, /**< rk_str: up to count bytes of UTF-8, heap */
    RK_FC_NESTED  /**< an inline struct of another message type */
} rk_fclass;

struct rk_msgtype;

/** One field of a message type. Static, produced by RK_MSGTYPE_DEFINE. */
typedef struct rk_msgfield {
    const char *name;   /**< C member name = wire key */
    uint32_t name_len;  /**< strlen(name) */
    uint8_t cls;        /**< rk_fclass */
    uint8_t kind;       /**< rk_fkind of the element */
    uint16_t reserved;  /**< 0 */
    uint32_t elem_size; /**< bytes of one element (NESTED: the struct) */
    uint32_t offset;    /**< offsetof(struct, member) */
    uint32_t count;     /**< ARRAY: length; VLA/BYTES/STRING: maximum length */
    const struct rk_msgtype *nested; /**< NESTED only */
} rk_msgfield;

/**
 * A message type. Static and immutable, produced by RK_MSGTYPE_DEFINE;
 * descriptors are compared by address.
 */
typedef struct rk_msgtype {
    const char *name;    /**< wire "__type__" (the Python class name) */
    uint32_t id;         /**< non-zero; rk_msg_header.type_id */
    uint16_t version;    /**< layout version, rk_msg_header.type_version */
    uint16_t nfields;    /**< entries in the field table */
    uint32_t size;       /**< sizeof the C struct */
    uint32_t fixed_size; /**< == size if fixed-layout capable, else 0 */
    uint32_t nbools;     /**< bool elements anywhere in the fixed form */
    const rk_msgfield *(*fields)(void); /**< the field table, nfields long */
} rk_msgtype;

/** The field table of t (t->nfields entries). */
static inline const rk_msgfield *
rk_msgtype_fields(const rk_msgtype *t)
{
    return t->fields();
}

/** Heap-owned variable-length values in decoded structs (see rk_msg_free). */
typedef struct rk_str {
    char *ptr;    /**< NUL-terminated after decode (len excludes the NUL) */
    uint32_t len; /**< length in bytes, without the NUL */
} rk_str;
/** A byte string, heap-owned after decode like rk_str. */
typedef struct rk_bytes {
    uint8_t *ptr; /**< the bytes, len of them */
    uint32_t len; /**< number of bytes */
} rk_bytes;
#define RK__VLA_TYPEDEF(T, ct)                                                \
    typedef struct T {                                                        \
        ct *ptr;      /**< the elements, len of them */                       \
        uint32_t len; /**< number of elements */                              \
    } T;
/** A heap-owned variable-length array of bool (an RK_VLA field after decode).
 */
RK__VLA_TYPEDEF(rk_vla_bool, bool)
/** A heap-owned variable-length array of int8_t (an RK_VLA field after
 * decode). */
RK__VLA_TYPEDEF(rk_vla_i8, int8_t)
/** A heap-owned variable-length array of int16_t (an RK_VLA field after
 * decode). */
RK__VLA_TYPEDEF(rk_vla_i16, int16_t)
/** A heap-owned variable-length array of int32_t (an RK_VLA field after
 * decode). */
RK__VLA_TYPEDEF(rk_vla_i32, int32_t)
/** A heap-owned variable-length array of int64_t (an RK_VLA field after
 * decode). */
RK__VLA_TYPEDEF(rk_vla_i64, int64_t)
/** A heap-owned variable-length array of uint8_t (an RK_VLA field after
 * decode). */
RK__VLA_TYPEDEF(rk_vla_u8, uint8_t)
/** A heap-owned variable-length array of uint16_t (an RK_VLA field after
 * decode). */
RK__VLA_TYPEDEF(rk_vla_u16, uint16_t)
/** A heap-owned variable-length array of uint32_t (an RK_VLA field after
 * decode). */
RK__VLA_TYPEDEF(rk_vla_u32, uint32_t)
/** A heap-owned variable-length array of uint64_t (an RK_VLA field after
 * decode). */
RK__VLA_TYPEDEF(rk_vla_u64, uint64_t)
/** A heap-owned variable-length array of float (an RK_VLA field after decode).
 */
RK__VLA_TYPEDEF(rk_vla_f32, float)
/** A heap-owned variable-length array of double (an RK_VLA field after
 * decode). */
RK__VLA_TYPEDEF(rk_vla_f64, double)

/* ------------------------------------------------ field-list vocabulary */
/**
 * Field specs for X(name, spec) entries. Each expands to a tuple
 * (class, kind, C type, count, nested type) that the RK_MSGTYPE_* macros
 * take apart; treat them as opaque.
 */
#define RK_BOOL (rk__scalar, rk__bool, bool, 0, rk__none)
/** a scalar int8_t */
#define RK_INT8 (rk__scalar, rk__i8, int8_t, 0, rk__none)
/** a scalar int16_t */
#define RK_INT16 (rk__scalar, rk__i16, int16_t, 0, rk__none)
/** a scalar int32_t */
#define RK_INT32 (rk__scalar, rk__i32, int32_t, 0, rk__none)
/** a scalar int64_t */
#define RK_INT64 (rk__scalar, rk__i64, int64_t, 0, rk__none)
/** a scalar uint8_t */
#define RK_UINT8 (rk__scalar, rk__u8, uint8_t, 0, rk__none)
/** a scalar uint16_t */
#define RK_UINT16 (rk__scalar, rk__u16, uint16_t, 0, rk__none)
/** a scalar uint32_t */
#define RK_UINT32 (rk__scalar, rk__u32, uint32_t, 0, rk__none)
/** a scalar uint64_t */
#define RK_UINT64 (rk__scalar, rk__u64, uint64_t, 0, rk__none)
/** a scalar float */
#define RK_FLOAT (rk__scalar, rk__f32, float, 0, rk__none)
/** a scalar double */
#define RK_DOUBLE (rk__scalar, rk__f64, double, 0, rk__none)
/** elem is one of the scalar specs above; n > 0. */
#define RK_ARRAY(elem, n)                                                     \
    (rk__array, RK__SPEC_KIND elem, RK__SPEC_CTYPE elem, n, rk__none)
/** Up to max elements (decode refuses more with RK_ETOOBIG). */
#define RK_VLA(elem, max)                                                     \
    (rk__vla, RK__SPEC_KIND elem, RK__SPEC_CTYPE elem, max, rk__none)
/** Up to max bytes (an rk_bytes member). */
#define RK_BYTES(max) (rk__bytes, rk__none, uint8_t, max, rk__none)
/** A string of up to max bytes (an rk_str member). */
#define RK_STRING(max) (rk__string, rk__none, char, max, rk__none)
/** T is another type declared with RK_MSGTYPE_DECLARE. */
#define RK_NESTED(T) (rk__nested, rk__none, T, 0, T)

#define RK__SPEC_KIND(c, k, t, n, x)  k
#define RK__SPEC_CTYPE(c, k, t, n, x) t
#define RK__UNPACK(...)               __VA_ARGS__
#define RK__APPLY(m, name, ...)       m(name, __VA_ARGS__)
/** RK__FIELD(m, name, spec) calls m(name, cls, kind, ctype, n, nested). */
#define RK__FIELD(m, name, spec) RK__APPLY(m, name, RK__UNPACK spec)

/** struct members */
#define RK__MEMBER(name, spec)               RK__FIELD(RK__MEMBER_I, name, spec)
#define RK__MEMBER_I(name, c, k, t, n, x)    RK__MEMBER_##c(name, k, t, n)
#define RK__MEMBER_rk__scalar(name, k, t, n) t name;
#define RK__MEMBER_rk__array(name, k, t, n)  t name[n];
#define RK__MEMBER_rk__vla(name, k, t, n)    RK__VLA_##k name;
#define RK__MEMBER_rk__bytes(name, k, t, n)  rk_bytes name;
#define RK__MEMBER_rk__string(name, k, t, n) rk_str name;
#define RK__MEMBER_rk__nested(name, k, t, n) t name;
#define RK__VLA_rk__bool                     rk_vla_bool
#define RK__VLA_rk__i8                       rk_vla_i8
#define RK__VLA_rk__i16                      rk_vla_i16
#define RK__VLA_rk__i32                      rk_vla_i32
#define RK__VLA_rk__i64                      rk_vla_i64
#define RK__VLA_rk__u8                       rk_vla_u8
#define RK__VLA_rk__u16                      rk_vla_u16
#define RK__VLA_rk__u32                      rk_vla_u32
#define RK__VLA_rk__u64                      rk_vla_u64
#define RK__VLA_rk__f32                      rk_vla_f32
#define RK__VLA_rk__f64                      rk_vla_f64

/** +1 if the field is variable-length (makes the type non-fixed) */
#define RK__ISVAR(name, spec)            RK__FIELD(RK__ISVAR_I, name, spec)
#define RK__ISVAR_I(name, c, k, t, n, x) +RK__ISVAR_##c(x)
#define RK__ISVAR_rk__scalar(x)          0
#define RK__ISVAR_rk__array(x)           0
#define RK__ISVAR_rk__vla(x)             1
#define RK__ISVAR_rk__bytes(x)           1
#define RK__ISVAR_rk__string(x)          1
#define RK__ISVAR_rk__nested(x)          x##__rk_var

/** number of bool elements in the fixed form */
#define RK__NBOOL(name, spec)            RK__FIELD(RK__NBOOL_I, name, spec)
#define RK__NBOOL_I(name, c, k, t, n, x) +RK__NBOOL_##c(k, n, x)
#define RK__NBOOL_rk__scalar(k, n, x)    RK__ISBOOL_##k
#define RK__NBOOL_rk__array(k, n, x)     (RK__ISBOOL_##k * (n))
#define RK__NBOOL_rk__vla(k, n, x)       0
#define RK__NBOOL_rk__bytes(k, n, x)     0
#define RK__NBOOL_rk__string(k, n, x)    0
#define RK__NBOOL_rk__nested(k, n, x)    x##__rk_nbools
#define RK__ISBOOL_rk__bool              1
#define RK__ISBOOL_rk__i8                0
#define RK__ISBOOL_rk__i16               0
#define RK__ISBOOL_rk__i32               0
#define RK__ISBOOL_rk__i64               0
#define RK__ISBOOL_rk__u8                0
#define RK__ISBOOL_rk__u16               0
#define RK__ISBOOL_rk__u32               0
#define RK__ISBOOL_rk__u64               0
#define RK__ISBOOL_rk__f32               0
#define RK__ISBOOL_rk__f64               0

#define RK__COUNT1(name, spec) +1

#ifdef __cplusplus
#define RK__STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define RK__STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/** descriptor entries; rk__self is a block-scope typedef of the struct */
#define RK__FENTRY(name, spec) RK__FIELD(RK__FENTRY_I, name, spec)
#define RK__FENTRY_I(name, c, k, t, n, x)                                     \
    { #name, (uint32_t)(sizeof(#name) - 1), (uint8_t)RK__FC_##c,              \
        (uint8_t)RK__FK_##k, 0, (uint32_t)sizeof(t),                          \
        (uint32_t)offsetof(rk__self, name), (uint32_t)(n),                    \
        RK__NESTED_##c(x) },
#define RK__FC_rk__scalar        RK_FC_SCALAR
#define RK__FC_rk__array         RK_FC_ARRAY
#define RK__FC_rk__vla           RK_FC_VLA
#define RK__FC_rk__bytes         RK_FC_BYTES
#define RK__FC_rk__string        RK_FC_STRING
#define RK__FC_rk__nested        RK_FC_NESTED
#define RK__FK_rk__bool          RK_FK_BOOL
#define RK__FK_rk__i8            RK_FK_INT8
#define RK__FK_rk__i16           RK_FK_INT16
#define RK__FK_rk__i32           RK_FK_INT32
#define RK__FK_rk__i64           RK_FK_INT64
#define RK__FK_rk__u8            RK_FK_UINT8
#define RK__FK_rk__u16           RK_FK_UINT16
#define RK__FK_rk__u32           RK_FK_UINT32
#define RK__FK_rk__u64           RK_FK_UINT64
#define RK__FK_rk__f32           RK_FK_FLOAT
#define RK__FK_rk__f64           RK_FK_DOUBLE
#define RK__FK_rk__none          RK_FK_NONE
#define RK__NESTED_rk__scalar(x) NULL
#define RK__NESTED_rk__array(x)  NULL
#define RK__NESTED_rk__vla(x)    NULL
#define RK__NESTED_rk__bytes(x)  NULL
#define RK__NESTED_rk__string(x) NULL
#define RK__NESTED_rk__nested(x) &x##_msgtype

/**
 * RK_MSGTYPE_DECLARE(T, FIELDS): the struct `T` (typedef'd), the extern
 * descriptor `T_msgtype`, and compile-time constants RK_MSGTYPE_FIXED(T)
 * (1 if the type has no variable-length field, so it has a fixed layout).
 * FIELDS(X) must list at least one X(name, spec).
 */
#define RK_MSGTYPE_DECLARE(T, FIELDS)                                         \
    typedef struct T {                                                        \
        FIELDS(RK__MEMBER)                                                    \
    } T;                                                                      \
    enum {                                                                    \
        T##__rk_var = (0 FIELDS(RK__ISVAR)) != 0,                             \
        T##__rk_nbools = 0 FIELDS(RK__NBOOL)                                  \
    };                                                                        \
    extern const rk_msgtype T##_msgtype

/** 1 if T (declared with RK_MSGTYPE_DECLARE) has a fixed layout, else 0; a
 * constant expression. */
#define RK_MSGTYPE_FIXED(T) (!T##__rk_var)

/**
 * RK_MSGTYPE_DEFINE(T, name, id, FIELDS): the descriptor, in exactly one
 * .c file. name is the wire "__type__" string, id a non-zero uint32 unique
 * among registered types. RK_MSGTYPE_DEFINE_V adds a layout version
 * (default 1) to bump when a fixed-layout type changes. More than
 * RK_MSG_MAX_FIELDS fields fail to compile; reserved field names
 * (__type__, message_id, correlation_id, priority) are refused at run time
 * by rk_msgtype_register(), rk_msg_encode() and rk_msg_decode().
 */
#define RK_MSGTYPE_DEFINE_V(T, tname, tid, tversion, FIELDS)                  \
    RK__STATIC_ASSERT((0 FIELDS(RK__COUNT1)) <= RK_MSG_MAX_FIELDS,            \
        "message type " #T " has more than RK_MSG_MAX_FIELDS fields");        \
    static const rk_msgfield *T##__rk_fields(void)                            \
    {                                                                         \
        typedef T rk__self;                                                   \
        static const rk_msgfield f[] = { FIELDS(RK__FENTRY) };                \
        return f;                                                             \
    }                                                                         \
    const rk_msgtype T##_msgtype = {                                          \
        tname,                                                                \
        (uint32_t)(tid),                                                      \
        (uint16_t)(tversion),                                                 \
        (uint16_t)(0 FIELDS(RK__COUNT1)),                                     \
        (uint32_t)sizeof(T),                                                  \
        T##__rk_var ? 0u : (uint32_t)sizeof(T),                               \
        (uint32_t)T##__rk_nbools,                                             \
        T##__rk_fields,                                                       \
    }
/** RK_MSGTYPE_DEFINE_V with layout version 1. */
#define RK_MSGTYPE_DEFINE(T, tname, tid, FIELDS)                              \
    RK_MSGTYPE_DEFINE_V(T, tname, tid, 1, FIELDS)

/** Most fields a type may have (decode tracks them in a 64-bit mask). */
#define RK_MSG_MAX_FIELDS 64

/* ------------------------------------------------------------ msgpack */

/** rk_msg_decode flags */
#define RK_MSG_STRICT 0x1u /**< an unknown key is RK_EFIELDUNKNOWN */

/**
 * Encodes obj (a struct of type t) and the envelope fields of h (message
 * id, correlation id, priority; h NULL = a fresh id, priority 128, no
 * correlation) as one msgpack map into buf[0..cap). *len receives the byte
 * count. buf NULL (with cap 0) only measures. RK_EMSGSIZE if cap is too
 * small, RK_ETOOBIG if a variable-length field exceeds its maximum,
 * RK_EINVAL on a NULL pointer with a non-zero length (detail names the
 * field) or a malformed descriptor (more than RK_MSG_MAX_FIELDS fields, a
 * reserved field name; checked here too, as t need not be registered),
 * RK_EINVAL if t, obj or len is NULL, RK_EENCODE if a string field is not
 * valid UTF-8 (the decoder, like Python, would refuse it).
 * The caller keeps ownership of everything.
 */
int rk_msg_encode(const rk_msgtype *t, const rk_msg_header *h, const void *obj,
    void *buf, size_t cap, size_t *len);

/**
 * Decodes the msgpack map in buf[0..len) into obj (a struct of type t,
 * overwritten entirely) and, if h_out is not NULL, its message id,
 * correlation id and priority into *h_out (other header fields untouched).
 * flags: RK_MSG_STRICT or 0.
 *
 * Errors (rk_errdetail() names the type and field): RK_ETRUNCATED,
 * RK_EDECODE (not msgpack, not a map, trailing bytes), RK_EFIELDMISSING,
 * RK_EFIELDTYPE (wrong type, out-of-range number, wrong array length),
 * RK_EFIELDUNKNOWN (strict only), RK_ETOOBIG (above a field's maximum),
 * RK_ETYPE ("__type__" names another type), RK_ENOMEM, RK_EINVAL (a
 * malformed descriptor, as for rk_msg_encode(); t or obj NULL, or buf
 * NULL with len > 0).
 *
 * Ownership: on success the variable-length fields of obj (rk_str,
 * rk_bytes, rk_vla_*, also inside nested fields) point to fresh malloc'd
 * memory that the caller owns and releases with rk_msg_free(). Strings are
 * NUL-terminated; empty bytes/arrays have ptr NULL. Nothing points into buf.
 * On failure obj is zeroed and owns nothing.
 */
int rk_msg_decode(const rk_msgtype *t, const void *buf, size_t len, void *obj,
    rk_msg_header *h_out, unsigned flags);

/**
 * Frees the variable-length fields of obj (as filled by rk_msg_decode, or
 * set by the caller to malloc'd memory) and sets them to NULL/0. Safe on a
 * zeroed struct and on a fixed-layout type (does nothing); t or obj NULL
 * does nothing.
 */
void rk_msg_free(const rk_msgtype *t, void *obj);

/* ------------------------------------------------------- fixed layout */

/*
 * The fixed-layout form of a type without variable-length fields is the
 * bytes of its C struct: natural alignment, little-endian, offsets as in
 * rk_msgtype_fields() (the layout descriptor), padding bytes unspecified.
 * GPU code compiled from the same declaration reads it in place.
 */

/** Size of t's fixed form, 0 if t has variable-length fields or is NULL. */
static inline size_t
rk_msg_fixed_size(const rk_msgtype *t)
{
    return t != NULL ? t->fixed_size : 0;
}

/** Copies obj's fixed form to dst. RK_EINVAL if t, obj or dst is NULL,
 * RK_ENOTSUP if t is not fixed-layout, RK_EMSGSIZE if
 * cap < rk_msg_fixed_size(t). */
int rk_msg_fixed_write(
    const rk_msgtype *t, const void *obj, void *dst, size_t cap);

/** Reads a fixed form of exactly len bytes from src into obj. RK_ENOTSUP if
 * t is not fixed-layout, RK_ETRUNCATED if len is short, RK_EDECODE if it is
 * long or a bool byte is neither 0 nor 1 (obj is then zeroed), RK_EINVAL
 * if t or obj is NULL, or src is NULL with len > 0 (obj untouched). */
int rk_msg_fixed_read(
    const rk_msgtype *t, const void *src, size_t len, void *obj);

/** A 64-bit fingerprint of t's layout (name, field names, kinds, offsets,
 * counts, nested layouts), for two programs to check they agree. 0 for
 * NULL. */
uint64_t rk_msgtype_layout_hash(const rk_msgtype *t);

/* ----------------------------------------------------------- registry */

/**
 * Registers t (which must stay valid for the life of the process; static
 * descriptors do). Thread-safe. Registering the same descriptor again is
 * RK_OK. RK_EEXIST if another type has t's id or name (detail names both),
 * RK_EINVAL if t is NULL or malformed, RK_ENOMEM when the registry
 * (RK_MSGTYPE_MAX types) is full.
 */
int rk_msgtype_register(const rk_msgtype *t);

#define RK_MSGTYPE_MAX 1024 /**< most types the registry holds */

/** Lock-free look-ups; NULL if not registered (or name is NULL). name need
 * not be NUL-terminated in the _n form, and may hold NUL bytes there (a
 * wire "__type__" can): only an exact match of all len bytes is found. */
const rk_msgtype *rk_msgtype_by_id(uint32_t id);
/** The registered type whose name is the NUL-terminated name. */
const rk_msgtype *rk_msgtype_by_name(const char *name);
/** The registered type whose name is exactly the len bytes at name. */
const rk_msgtype *rk_msgtype_by_name_n(const char *name, size_t len);

/**
 * RK_OK if got is expected (same descriptor), else RK_ETYPE with a detail
 * naming both ("expected VectorAdd (id 42), got Ping (id 7)"). got NULL is
 * also RK_ETYPE.
 */
int rk_msgtype_check(const rk_msgtype *expected, const rk_msgtype *got);

/** RK_OK if h carries a payload of type expected (type id and version),
 * else RK_ETYPE naming both types (the other looked up by id); RK_EINVAL if
 * either is NULL. */
int rk_msg_header_check(const rk_msg_header *h, const rk_msgtype *expected);

#ifdef __cplusplus
}
#endif

#endif /* RINGKERNEL_MESSAGE_H */
