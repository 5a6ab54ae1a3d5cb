/*
 * src/message/encode.c - typed messages -> msgpack maps (through msgpack-c).
 *
 * msgpack-c's packer is a template too: msgpack/pack_template.h holds every
 * msgpack_pack_* function, parameterised by the user type and by
 * msgpack_pack_append_buffer, the one place bytes are written. msgpack.h
 * instantiates it with a msgpack_packer whose write callback is called
 * through a function pointer once per tag and once per body. We
 * instantiate it again (as wpack_*) with a struct wbuf cursor over the
 * caller's buffer and an inline bounds-checked copy, so every tag, length
 * and number is still laid out by msgpack-c's code, but each one costs a
 * few stores: the copies have constant sizes (keys are literals, tags
 * 1-9 bytes) and the compiler turns them into plain moves. Nothing is
 * allocated.
 */
#include <msgpack/pack_define.h>
#include <msgpack/timestamp.h>
#include <pthread.h>
#include <string.h>

#include "common/common.h"
#include "message_internal.h"
#include "ringkernel/message.h"

/* The caller's buffer: bytes go to cur while they fit before end; once
 * one write does not fit, end is pulled to cur and every later write only
 * counts into over, so the total (cur - start + over) is still exact. */
struct wbuf {
    char *cur, *end;
    char *start;
    size_t over;
};

/* Out of line: copying past the room, or measuring only. */
static void
wbuf_slow(struct wbuf *w, size_t n)
{
    w->over += n;
    w->end = w->cur;
}

/* Copies n bytes; small variable sizes (field names, dtype names) with
 * two overlapping moves that stay inside both ranges, not a memcpy call. */
static inline void
copy_small(char *d, const char *s, size_t n)
{
    if (n >= 8 && n <= 16) {
        uint64_t a, b;

        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + n - 8, &b, 8);
    } else if (n >= 4 && n < 8) {
        uint32_t a, b;

        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        memcpy(d, &a, 4);
        memcpy(d + n - 4, &b, 4);
    } else if (n > 16 && n <= 32) {
        char a[16], b[16];

        memcpy(a, s, 16);
        memcpy(b, s + n - 16, 16);
        memcpy(d, a, 16);
        memcpy(d + n - 16, b, 16);
    } else if (n > 32) {
        memcpy(d, s, n);
    } else if (n > 0) {
        d[0] = s[0];
        d[n / 2] = s[n / 2];
        d[n - 1] = s[n - 1];
    }
}

static inline int
wbuf_put(struct wbuf *w, const void *src, size_t n)
{
    char *d = w->cur;

    if (rk__unlikely(n > (size_t)(w->end - d))) {
        wbuf_slow(w, n);
        return 0;
    }
    w->cur = d + n;
    if (__builtin_constant_p(n))
        memcpy(d, src, n); /* a few moves */
    else
        copy_small(d, src, n);
    return 0;
}

/* The instantiation (compare msgpack.h's, which packs through a
 * msgpack_packer). _timestamp, which we never call, calls _ext by its
 * msgpack-c name. */
#define msgpack_pack_inline_func(name) static inline int wpack##name
#define msgpack_pack_user              struct wbuf *
#define msgpack_pack_append_buffer(user, buf, len)                            \
    return wbuf_put(user, buf, len)
#define msgpack_pack_ext wpack_ext

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wsign-compare"
#include <msgpack/pack_template.h>
#pragma GCC diagnostic pop
#undef msgpack_pack_ext

/* A string key or value from a literal: constant sizes, a few moves. */
#define PACK_LIT(w, lit)                                                      \
    do {                                                                      \
        wpack_str(w, sizeof(lit) - 1);                                        \
        wpack_str_body(w, lit, sizeof(lit) - 1);                              \
    } while (0)

static inline void
pack_str(struct wbuf *w, const char *s, size_t n)
{
    wpack_str(w, n);
    wpack_str_body(w, s, n);
}

/*
 * Runs of bytes that are the same in every frame (keys, the one-key uuid
 * map and its bin16 header, the ndarray map's keys, each dtype name with
 * the one-element shape header), packed once by the functions above and
 * then copied as one piece each: a frame of a 256-byte type needs 16
 * appends instead of 31. Built once per process (pthread_once); read-only
 * after.
 */
struct run {
    uint8_t len;
    char b[32];
};

static struct {
    struct run mid;     /* "message_id": {"__uuid_bin__": <bin16 header> */
    struct run prio;    /* "priority": */
    struct run corr;    /* "correlation_id": */
    struct run uuid;    /* {"__uuid_bin__": <bin16 header> */
    struct run nd_head; /* {"__ndarray__": (a 3-map) */
    struct run nd_tail[RK_FK_DOUBLE + 1]; /* "dtype": "<name>", "shape": [ */
} runs;
static pthread_once_t runs_once = PTHREAD_ONCE_INIT;

/* Packs into r->b with the same wpack_* code; asserts the run fits. */
static struct wbuf
run_begin(struct run *r)
{
    return (struct wbuf) { r->b, r->b + sizeof(r->b), r->b, 0 };
}

static void
run_end(struct run *r, const struct wbuf *w)
{
    RK_ASSERT(w->over == 0);
    r->len = (uint8_t)(w->cur - w->start);
}

static void
runs_init(void)
{
    struct wbuf w;

    w = run_begin(&runs.uuid);
    wpack_map(&w, 1);
    PACK_LIT(&w, "__uuid_bin__");
    wpack_bin(&w, 16);
    run_end(&runs.uuid, &w);
    w = run_begin(&runs.mid);
    PACK_LIT(&w, "message_id");
    wbuf_put(&w, runs.uuid.b, runs.uuid.len);
    run_end(&runs.mid, &w);
    w = run_begin(&runs.prio);
    PACK_LIT(&w, "priority");
    run_end(&runs.prio, &w);
    w = run_begin(&runs.corr);
    PACK_LIT(&w, "correlation_id");
    run_end(&runs.corr, &w);
    w = run_begin(&runs.nd_head);
    wpack_map(&w, 3);
    PACK_LIT(&w, "__ndarray__");
    run_end(&runs.nd_head, &w);
    for (unsigned k = 0; k <= RK_FK_DOUBLE; k++) {
        w = run_begin(&runs.nd_tail[k]);
        PACK_LIT(&w, "dtype");
        pack_str(&w, rk__kinds[k].dtype, rk__kinds[k].dtype_len);
        PACK_LIT(&w, "shape");
        wpack_array(&w, 1);
        run_end(&runs.nd_tail[k], &w);
    }
}

static inline void
put_run(struct wbuf *w, const struct run *r)
{
    wbuf_put(w, r->b, r->len);
}

static inline void
pack_uuid_body(struct wbuf *w, const rk_uuid *u)
{
    wpack_bin_body(w, u->b, 16);
}

static inline void
pack_scalar(struct wbuf *w, unsigned kind, const void *p)
{
    rk_fnum n = rk_fkind_load((int)kind, p);

    switch (n.tag) {
    case RK_FNUM_BOOL:
        if (n.v.b)
            wpack_true(w);
        else
            wpack_false(w);
        break;
    case RK_FNUM_INT:
        wpack_int64(w, n.v.i);
        break;
    case RK_FNUM_UINT:
        wpack_uint64(w, n.v.u);
        break;
    default: /* Python floats are float64; widening a float32 is exact */
        wpack_double(w, n.v.d);
        break;
    }
}

/* Numeric arrays go out in numpy's form: {"__ndarray__": raw LE bytes,
 * "dtype": name, "shape": [n]}. */
static inline void
pack_ndarray(struct wbuf *w, unsigned kind, const void *p, uint32_t n)
{
    size_t bytes = (size_t)n * rk__kinds[kind].size;

    put_run(w, &runs.nd_head);
    wpack_bin(w, bytes);
    wpack_bin_body(w, p, bytes);
    put_run(w, &runs.nd_tail[kind]);
    wpack_uint32(w, n);
}

static int
check_var(const rk_msgtype *t, const rk_msgfield *f, const struct var_head *v)
{
    if (rk__unlikely(v->len > f->count))
        return rk__fail(RK_ETOOBIG, "%s.%s: length %u exceeds maximum %u",
            t->name, f->name, v->len, f->count);
    if (rk__unlikely(v->ptr == NULL && v->len != 0))
        return rk__fail(RK_EINVAL, "%s.%s: NULL pointer with length %u",
            t->name, f->name, v->len);
    return RK_OK;
}

static int
encode_obj(struct wbuf *wp, const rk_msgtype *t, const rk_msg_header *h,
    const char *base, int top, int depth)
{
    /* A private copy of the cursor, written back before returning or
     * recursing: the buffer is char, which may alias *wp, so writing
     * through wp would reload the cursor after every store. */
    struct wbuf lw = *wp, *w = &lw;
    const rk_msgfield *f;
    int rc;

    if (depth > RK__MSG_MAX_DEPTH)
        return rk__fail(RK_EENCODE, "%s: types nest too deeply", t->name);
    /* Unregistered types get here too: a reserved key would be written
     * twice. */
    if (rk__unlikely((rc = rk__msgtype_check_fields(t)) != RK_OK))
        return rc;
    f = t->fields();
    /* PyDotCompute's order (the @message decorator's dataclass): the
     * fields, then the envelope keys, then "__type__", which serialize()
     * adds last. Nested maps end with "__type__" too. */
    wpack_map(w, t->nfields + 1u + (top ? 3u : 0u));
    for (unsigned i = 0; i < t->nfields; i++) {
        const char *p = base + f[i].offset;
        struct var_head v = { NULL, 0 };

        if (f[i].cls >= RK_FC_VLA && f[i].cls <= RK_FC_STRING) {
            v = rk__get_var(p);
            if ((rc = check_var(t, &f[i], &v)) != RK_OK)
                return rc;
        }
        pack_str(w, f[i].name, f[i].name_len);
        switch (f[i].cls) {
        case RK_FC_SCALAR:
            pack_scalar(w, f[i].kind, p);
            break;
        case RK_FC_ARRAY:
            pack_ndarray(w, f[i].kind, p, f[i].count);
            break;
        case RK_FC_VLA:
            pack_ndarray(w, f[i].kind, v.ptr, v.len);
            break;
        case RK_FC_BYTES:
            wpack_bin(w, v.len);
            wpack_bin_body(w, v.ptr, v.len);
            break;
        case RK_FC_STRING:
            /* The decoder (and Python) refuse what is not UTF-8, so the
             * encoder must not write it. */
            if (rk__unlikely(!rk__utf8_valid(v.ptr, v.len)))
                return rk__fail(RK_EENCODE,
                    "%s.%s: string is not valid "
                    "UTF-8",
                    t->name, f[i].name);
            wpack_str(w, v.len);
            wpack_str_body(w, v.ptr, v.len);
            break;
        default:
            *wp = lw;
            rc = encode_obj(wp, f[i].nested, NULL, p, 0, depth + 1);
            if (rc != RK_OK)
                return rc;
            lw = *wp;
            break;
        }
    }
    if (top) {
        rk_uuid fresh;
        const rk_uuid *mid = h ? &h->message_id : &fresh;

        if (h == NULL)
            fresh = rk_uuid_v7();
        put_run(w, &runs.mid);
        pack_uuid_body(w, mid);
        put_run(w, &runs.prio);
        wpack_uint8(w, h ? h->priority : RK_MSG_PRIORITY_DEFAULT);
        put_run(w, &runs.corr);
        if (h == NULL || rk_uuid_is_nil(&h->correlation_id)) {
            wpack_nil(w);
        } else {
            put_run(w, &runs.uuid);
            pack_uuid_body(w, &h->correlation_id);
        }
    }
    PACK_LIT(w, "__type__");
    pack_str(w, t->name, strlen(t->name));
    *wp = lw;
    return RK_OK;
}

int
rk_msg_encode(const rk_msgtype *t, const rk_msg_header *h, const void *obj,
    void *buf, size_t cap, size_t *len)
{
    char none[1]; /* measuring only: an empty buffer that is not NULL */
    char *start = buf != NULL ? buf : none;
    struct wbuf w = { start, start + (buf != NULL ? cap : 0), start, 0 };
    size_t total;
    int rc;

    if (t == NULL || obj == NULL || len == NULL)
        return rk__fail(RK_EINVAL, "rk_msg_encode: NULL argument");
    pthread_once(&runs_once, runs_init);
    rc = encode_obj(&w, t, h, obj, 1, 0);
    if (rc != RK_OK)
        return rc;
    total = (size_t)(w.cur - w.start) + w.over;
    *len = total;
    if (buf != NULL && total > cap)
        return rk__fail(RK_EMSGSIZE, "%s encodes to %zu bytes, buffer has %zu",
            t->name, total, cap);
    return RK_OK;
}
