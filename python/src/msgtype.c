/*
 * msgtype.c - MsgType: the C descriptor of a Python @message class.
 *
 * The C codec (src/message) reads a type through an rk_msgtype: name, id,
 * size, and a field table returned by a fields() function taking no
 * argument. A Python class is declared at run time, so this file builds the
 * descriptor at run time: it lays the fields out as the C compiler would
 * lay out the generated struct (natural alignment, docs/wire-format.md),
 * and gives each type one of RKPY_MAX_TYPES static trampoline functions
 * that returns its table. Descriptors are registered with
 * rk_msgtype_register() and, as the registry requires, live for the rest
 * of the process (they are never freed).
 *
 * Encoding fills a C struct of the type from the object's attributes
 * (strings, bytes and matching numpy buffers are borrowed in place, not
 * copied) and hands it to rk_msg_encode(); decoding runs rk_msg_decode()
 * or rk_msg_fixed_read() and builds the Python object from the struct. So
 * the wire format is the C codec's, byte for byte.
 */
#include "rkpy.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* How a field is presented in Python (set by ringkernel/messages.py). */
enum { PRESENT_DEFAULT = 0, PRESENT_LIST = 1, PRESENT_UUID = 2 };

typedef struct fieldinfo {
    PyObject *name; /* interned str */
    uint8_t cls;    /* rk_fclass */
    uint8_t kind;   /* rk_fkind */
    uint8_t present;
    uint32_t offset;
    uint32_t count;
    uint32_t elem_size;
    PyObject *nested; /* MsgType, NESTED only */
} fieldinfo;

struct rkpy_msgtype {
    PyObject_HEAD const rk_msgtype *desc; /* process lifetime */
    PyObject *cls;                        /* the Python class, or None */
    int fast; /* build instances without __init__ (set by @message) */
    uint32_t align;
    int nf;
    fieldinfo *f;
    /* A type the C codec cannot describe (a plain list, a dict, no field
     * at all): encode(obj) -> bytes and decode(bytes) -> field dict, in
     * Python (PyDotCompute's msgpack); NULL for C-codec types. */
    PyObject *py_enc, *py_dec;
};

/* {type id: MsgType}: what an untyped receive decodes by the envelope's
 * type id (set by ringkernel/messages.py); NULL until set. */
static PyObject *types_by_id;

_Thread_local rk_uuid rkpy_last_payload_id;

PyObject *
rkpy_msgtype_by_id(uint32_t id)
{
    if (types_by_id == NULL || id == 0)
        return NULL;
    PyObject *k = PyLong_FromUnsignedLong(id);
    PyObject *mt = k ? PyDict_GetItemWithError(types_by_id, k) : NULL;
    Py_XDECREF(k);
    if (mt == NULL)
        PyErr_Clear();
    return mt; /* borrowed */
}

PyObject *
rkpy_set_type_registry(PyObject *self, PyObject *d)
{
    (void)self;
    if (!PyDict_Check(d)) {
        PyErr_SetString(PyExc_TypeError, "expected a dict");
        return NULL;
    }
    Py_XSETREF(types_by_id, Py_NewRef(d));
    Py_RETURN_NONE;
}

/* --------------------------------------------------------- trampolines */

#define RKPY_MAX_TYPES 256
static const rk_msgfield *tables[RKPY_MAX_TYPES];
static int ntables;

#define TR(a, b, c, d)                                                        \
    static const rk_msgfield *tr_##a##b##c##d(void)                           \
    {                                                                         \
        return tables[a * 64 + b * 16 + c * 4 + d];                           \
    }
#define TR4(a, b, c)                                                          \
    TR(a, b, c, 0) TR(a, b, c, 1) TR(a, b, c, 2) TR(a, b, c, 3)
#define TR16(a, b) TR4(a, b, 0) TR4(a, b, 1) TR4(a, b, 2) TR4(a, b, 3)
#define TR64(a)    TR16(a, 0) TR16(a, 1) TR16(a, 2) TR16(a, 3)
TR64(0)
TR64(1)
TR64(2)
TR64(3)
#undef TR
#define TR(a, b, c, d) tr_##a##b##c##d,
static const rk_msgfield *(*const tramp[RKPY_MAX_TYPES])(void)
    = { TR64(0) TR64(1) TR64(2) TR64(3) };

/* ------------------------------------------------------------ helpers */

static const uint8_t kind_size[] = { 1, 1, 2, 4, 8, 1, 2, 4, 8, 4, 8, 0 };
static const char *const kind_dtype[]
    = { "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
          "uint64", "float32", "float64", "?" };

static const char *
tname(const rkpy_msgtype *mt)
{
    return mt->desc->name;
}

/* The rk_fkind of a buffer's element format, or -1. */
static int
fmt_kind(const char *fmt, Py_ssize_t itemsize)
{
    if (fmt == NULL)
        return RK_FK_UINT8;
    if (*fmt == '@' || *fmt == '=' || *fmt == '<')
        fmt++;
    if (fmt[0] == '\0' || fmt[1] != '\0')
        return -1;
    switch (fmt[0]) {
    case '?':
        return itemsize == 1 ? RK_FK_BOOL : -1;
    case 'b':
        return RK_FK_INT8;
    case 'B':
    case 'c':
        return RK_FK_UINT8;
    case 'h':
        return RK_FK_INT16;
    case 'H':
        return RK_FK_UINT16;
    case 'i':
    case 'l':
    case 'q':
        return itemsize == 4 ? RK_FK_INT32 : itemsize == 8 ? RK_FK_INT64 : -1;
    case 'I':
    case 'L':
    case 'Q':
        return itemsize == 4 ? RK_FK_UINT32
            : itemsize == 8  ? RK_FK_UINT64
                             : -1;
    case 'f':
        return RK_FK_FLOAT;
    case 'd':
        return RK_FK_DOUBLE;
    default:
        return -1;
    }
}

/* Buffers one encode may borrow or allocate (variable-length fields,
 * nested ones included). */
#define RKPY_SCRATCH 64

/* What an encode borrowed or allocated, released after rk_msg_encode. */
typedef struct scratch {
    PyObject *objs[64];
    int nobj;
    PyObject *more; /* list for objects beyond objs */
    Py_buffer views[RKPY_SCRATCH];
    int nview;
    void *mem[RKPY_SCRATCH];
    int nmem;
} scratch;

static int
keep_obj(scratch *sc, PyObject *o)
{
    if (sc->nobj < 64) {
        sc->objs[sc->nobj++] = o;
        return 0;
    }
    if (sc->more == NULL && (sc->more = PyList_New(0)) == NULL) {
        Py_DECREF(o);
        return -1;
    }
    int r = PyList_Append(sc->more, o);
    Py_DECREF(o);
    return r;
}

static Py_buffer *
keep_view(const rkpy_msgtype *mt, const fieldinfo *f, scratch *sc)
{
    if (sc->nview == RKPY_SCRATCH) {
        rkpy_raisef(RK_EINVAL,
            "%s.%s: more than %d bytes or array fields in one message",
            tname(mt), PyUnicode_AsUTF8(f->name), RKPY_SCRATCH);
        return NULL;
    }
    return &sc->views[sc->nview];
}

static void *
keep_mem(scratch *sc, size_t n)
{
    if (sc->nmem == RKPY_SCRATCH) {
        rkpy_raisef(RK_EINVAL,
            "more than %d list or UUID fields in one message", RKPY_SCRATCH);
        return NULL;
    }
    void *p = calloc(1, n ? n : 1);
    if (p == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    sc->mem[sc->nmem++] = p;
    return p;
}

static void
scratch_free(scratch *sc)
{
    for (int i = 0; i < sc->nobj; i++)
        Py_DECREF(sc->objs[i]);
    Py_XDECREF(sc->more);
    for (int i = 0; i < sc->nview; i++)
        PyBuffer_Release(&sc->views[i]);
    for (int i = 0; i < sc->nmem; i++)
        free(sc->mem[i]);
}

static int
field_err(const rkpy_msgtype *mt, const fieldinfo *f, int rc, const char *what,
    PyObject *v)
{
    rkpy_raisef(rc, "%s.%s: %s, got %s", tname(mt), PyUnicode_AsUTF8(f->name),
        what, v ? Py_TYPE(v)->tp_name : "nothing");
    return -1;
}

static PyObject *zero;       /* the int 0, made at init */
static PyObject *empty_args; /* () */

/* Stores one Python number v as an element of kind at dst. */
static int
store_scalar(const rkpy_msgtype *mt, const fieldinfo *f, int kind, PyObject *v,
    void *dst)
{
    if (kind == RK_FK_BOOL) {
        int b;
        if (PyBool_Check(v))
            b = v == Py_True;
        else if (strncmp(Py_TYPE(v)->tp_name, "numpy.bool", 10) == 0)
            b = PyObject_IsTrue(v);
        else
            return field_err(mt, f, RK_EFIELDTYPE, "expected bool", v);
        *(bool *)dst = b != 0;
        return 0;
    }
    if (kind == RK_FK_FLOAT || kind == RK_FK_DOUBLE) {
        if (PyUnicode_Check(v) || PyBytes_Check(v)
            || !(PyFloat_Check(v) || PyLong_Check(v) || PyNumber_Check(v)))
            return field_err(mt, f, RK_EFIELDTYPE, "expected float", v);
        double d = PyFloat_AsDouble(v);
        if (d == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return field_err(mt, f, RK_EFIELDTYPE, "expected float", v);
        }
        if (kind == RK_FK_DOUBLE) {
            *(double *)dst = d;
            return 0;
        }
        if (isfinite(d) && fabs(d) > FLT_MAX) {
            rkpy_raisef(RK_EFIELDTYPE, "%s.%s: %g is out of float32 range",
                tname(mt), PyUnicode_AsUTF8(f->name), d);
            return -1;
        }
        *(float *)dst = (float)d;
        return 0;
    }
    PyObject *ix = PyFloat_Check(v) ? NULL : PyNumber_Index(v);
    if (ix == NULL) {
        PyErr_Clear();
        return field_err(mt, f, RK_EFIELDTYPE, "expected int", v);
    }
    /* Signed kinds read x, unsigned ones u; either is range-checked
     * against the kind (rk_fkind_range), then narrowed into dst. */
    int ovf = 0;
    long long x = 0;
    unsigned long long u = 0;
    int64_t lo;
    uint64_t hi;
    rk_fkind_range(kind, &lo, &hi);
    if (kind <= RK_FK_INT64) {
        x = PyLong_AsLongLongAndOverflow(ix, &ovf);
        ovf = ovf || x < lo || (x > 0 && (unsigned long long)x > hi);
    } else {
        int neg = PyObject_RichCompareBool(ix, zero, Py_LT);
        if (neg == 0)
            u = PyLong_AsUnsignedLongLong(ix);
        ovf = neg != 0 || (u == (unsigned long long)-1 && PyErr_Occurred())
            || u > hi;
    }
    Py_DECREF(ix);
    if (ovf) {
        PyErr_Clear();
        rkpy_raisef(RK_EFIELDTYPE, "%s.%s: value out of range for %s",
            tname(mt), PyUnicode_AsUTF8(f->name), kind_dtype[kind]);
        return -1;
    }
    rk_fkind_store_int(kind, dst, x, u);
    return 0;
}

/*
 * Elements of an array (ARRAY: exactly f->count, inline at dst) or a
 * variable array (VLA: an rk_vla_* at dst). A C-contiguous buffer of the
 * field's element type is used in place (VLA) or copied (ARRAY); anything
 * else is read as a sequence of numbers (flattened first if it has
 * ravel(), as a numpy array does).
 */
static int
fill_elems(const rkpy_msgtype *mt, const fieldinfo *f, PyObject *v, char *dst,
    scratch *sc)
{
    size_t es = kind_size[f->kind];
    if (PyObject_CheckBuffer(v) && !PyUnicode_Check(v)) {
        Py_buffer *view = keep_view(mt, f, sc);
        if (view == NULL)
            return -1;
        if (PyObject_GetBuffer(v, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
            == 0) {
            if (fmt_kind(view->format, view->itemsize) == f->kind
                && (size_t)view->itemsize == es) {
                size_t n = (size_t)view->len / es;
                sc->nview++;
                if (f->cls == RK_FC_ARRAY) {
                    if (n != f->count) {
                        rkpy_raisef(RK_EFIELDTYPE,
                            "%s.%s: expected %u elements, got %zu", tname(mt),
                            PyUnicode_AsUTF8(f->name), f->count, n);
                        return -1;
                    }
                    memcpy(dst, view->buf, n * es);
                } else {
                    rk_vla_u8 *vla = (rk_vla_u8 *)dst;
                    vla->ptr = n ? view->buf : NULL;
                    vla->len = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
                }
                return 0;
            }
            PyBuffer_Release(view);
        } else {
            PyErr_Clear();
        }
    }
    PyObject *flat = NULL;
    if (!PyList_Check(v) && !PyTuple_Check(v)
        && PyObject_HasAttrString(v, "ravel")) {
        flat = PyObject_CallMethod(v, "ravel", NULL);
        if (flat == NULL)
            return -1;
        v = flat;
    }
    PyObject *seq = PySequence_Fast(v, "");
    Py_XDECREF(flat);
    if (seq == NULL) {
        PyErr_Clear();
        return field_err(
            mt, f, RK_EFIELDTYPE, "expected a list or numpy array", v);
    }
    if (keep_obj(sc, seq) < 0)
        return -1;
    size_t n = (size_t)PySequence_Fast_GET_SIZE(seq);
    char *out = dst;
    if (f->cls == RK_FC_ARRAY) {
        if (n != f->count) {
            rkpy_raisef(RK_EFIELDTYPE, "%s.%s: expected %u elements, got %zu",
                tname(mt), PyUnicode_AsUTF8(f->name), f->count, n);
            return -1;
        }
    } else {
        if (n > f->count) {
            rkpy_raisef(RK_ETOOBIG, "%s.%s: %zu elements exceed maximum %u",
                tname(mt), PyUnicode_AsUTF8(f->name), n, f->count);
            return -1;
        }
        if ((out = keep_mem(sc, n * es)) == NULL)
            return -1;
        rk_vla_u8 *vla = (rk_vla_u8 *)dst;
        vla->ptr = n ? (uint8_t *)out : NULL;
        vla->len = (uint32_t)n;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (size_t i = 0; i < n; i++)
        if (store_scalar(mt, f, f->kind, items[i], out + i * es) < 0)
            return -1;
    return 0;
}

static int fill(
    const rkpy_msgtype *mt, PyObject *obj, char *base, scratch *sc);

static int
fill_field(const rkpy_msgtype *mt, const fieldinfo *f, PyObject *v, char *dst,
    scratch *sc)
{
    switch (f->cls) {
    case RK_FC_SCALAR:
        return store_scalar(mt, f, f->kind, v, dst);
    case RK_FC_ARRAY:
    case RK_FC_VLA:
        return fill_elems(mt, f, v, dst, sc);
    case RK_FC_BYTES: {
        if (PyUnicode_Check(v) || !PyObject_CheckBuffer(v))
            return field_err(mt, f, RK_EFIELDTYPE, "expected bytes", v);
        Py_buffer *view = keep_view(mt, f, sc);
        if (view == NULL)
            return -1;
        if (PyObject_GetBuffer(v, view, PyBUF_C_CONTIGUOUS) < 0)
            return -1;
        sc->nview++;
        rk_bytes *b = (rk_bytes *)dst;
        b->ptr = view->len ? view->buf : NULL;
        b->len = (size_t)view->len > UINT32_MAX ? UINT32_MAX
                                                : (uint32_t)view->len;
        return 0;
    }
    case RK_FC_STRING: {
        if (!PyUnicode_Check(v))
            return field_err(mt, f, RK_EFIELDTYPE, "expected str", v);
        Py_ssize_t n;
        const char *p = PyUnicode_AsUTF8AndSize(v, &n);
        if (p == NULL)
            return -1;
        rk_str *s = (rk_str *)dst;
        s->ptr = (char *)p;
        s->len = (size_t)n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
        return 0;
    }
    case RK_FC_NESTED: {
        const rkpy_msgtype *nt = (const rkpy_msgtype *)f->nested;
        if (f->present == PRESENT_UUID) {
            uint8_t *id = keep_mem(sc, 16);
            if (id == NULL)
                return -1;
            if (rkpy_uuid_get(v, (rk_uuid *)id, 0) < 0) {
                PyObject *t, *val, *tb;
                PyErr_Fetch(&t, &val, &tb);
                Py_XDECREF(t);
                Py_XDECREF(val);
                Py_XDECREF(tb);
                return field_err(
                    mt, f, RK_EFIELDTYPE, "expected uuid.UUID", v);
            }
            rk_bytes *b = (rk_bytes *)dst; /* UUID's only field */
            b->ptr = id;
            b->len = 16;
            return 0;
        }
        return fill(nt, v, dst, sc);
    }
    default:
        return rkpy_raise(RK_EINTERNAL, "bad field class") ? 0 : -1;
    }
}

static int
fill(const rkpy_msgtype *mt, PyObject *obj, char *base, scratch *sc)
{
    for (int i = 0; i < mt->nf; i++) {
        const fieldinfo *f = &mt->f[i];
        PyObject *v = PyObject_GetAttr(obj, f->name);
        if (v == NULL) {
            PyErr_Clear();
            rkpy_raisef(RK_EFIELDMISSING, "%s.%s: missing", tname(mt),
                PyUnicode_AsUTF8(f->name));
            return -1;
        }
        if (keep_obj(sc, v) < 0)
            return -1;
        if (fill_field(mt, f, v, base + f->offset, sc) < 0)
            return -1;
    }
    return 0;
}

/* Thread-local buffers: the encoded bytes and the struct being filled. */
static _Thread_local char *enc_buf;
static _Thread_local size_t enc_cap;
static _Thread_local char *obj_buf;
static _Thread_local size_t obj_cap;

static int
grow(char **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 4096;
    while (n < need)
        n *= 2;
    char *q = realloc(*p, n);
    if (q == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *p = q;
    *cap = n;
    return 0;
}

static PyObject *str_message_id, *str_correlation_id, *str_priority;

/* An optional attribute: NULL with no error when obj lacks it. */
static PyObject *
opt_attr(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL && PyErr_ExceptionMatches(PyExc_AttributeError))
        PyErr_Clear();
    return v;
}

int
rkpy_encode(PyObject *mtobj, PyObject *obj, const void **out, size_t *len,
    uint8_t *prio, rk_uuid *msg_id, rk_uuid *corr)
{
    const rkpy_msgtype *mt = (const rkpy_msgtype *)mtobj;
    const rk_msgtype *t = mt->desc;
    rk_msg_header h;
    uint8_t p = RK_MSG_PRIORITY_DEFAULT;
    PyObject *v;

    if ((v = opt_attr(obj, str_priority)) != NULL) {
        long x = PyLong_Check(v) ? PyLong_AsLong(v) : -1;
        Py_DECREF(v);
        if (x < 0 || x > 255) {
            PyErr_Clear();
            rkpy_raisef(
                RK_EFIELDTYPE, "%s.priority: must be an int 0-255", t->name);
            return -1;
        }
        p = (uint8_t)x;
    } else if (PyErr_Occurred()) {
        return -1;
    }
    rk_msg_header_init(&h, t->id, p);
    if ((v = opt_attr(obj, str_message_id)) != NULL) {
        int r = rkpy_uuid_get(v, &h.message_id, 1);
        Py_DECREF(v);
        if (r < 0)
            return -1;
    } else if (PyErr_Occurred()) {
        return -1;
    }
    if ((v = opt_attr(obj, str_correlation_id)) != NULL) {
        int r = rkpy_uuid_get(v, &h.correlation_id, 1);
        Py_DECREF(v);
        if (r < 0)
            return -1;
    } else if (PyErr_Occurred()) {
        return -1;
    }
    if (mt->py_enc != NULL) {
        PyObject *b = PyObject_CallOneArg(mt->py_enc, obj);
        if (b == NULL)
            return -1;
        if (!PyBytes_Check(b)) {
            Py_DECREF(b);
            rkpy_raisef(RK_EENCODE, "%s: the encoder did not return bytes",
                t->name);
            return -1;
        }
        size_t n = (size_t)PyBytes_GET_SIZE(b);
        if (grow(&enc_buf, &enc_cap, n ? n : 1) < 0) {
            Py_DECREF(b);
            return -1;
        }
        memcpy(enc_buf, PyBytes_AS_STRING(b), n);
        Py_DECREF(b);
        *out = enc_buf;
        *len = n;
        if (prio)
            *prio = p;
        if (msg_id)
            *msg_id = h.message_id;
        if (corr)
            *corr = h.correlation_id;
        return 0;
    }
    if (grow(&obj_buf, &obj_cap, t->size) < 0)
        return -1;
    memset(obj_buf, 0, t->size);
    scratch sc;
    sc.nobj = sc.nview = sc.nmem = 0;
    sc.more = NULL;
    int rc = fill(mt, obj, obj_buf, &sc);
    if (rc == 0) {
        if (grow(&enc_buf, &enc_cap, 256) < 0) {
            scratch_free(&sc);
            return -1;
        }
        size_t n = 0;
        int e = rk_msg_encode(t, &h, obj_buf, enc_buf, enc_cap, &n);
        if (e == RK_EMSGSIZE) {
            e = rk_msg_encode(t, &h, obj_buf, NULL, 0, &n);
            if (e == RK_OK || e == RK_EMSGSIZE) {
                if (grow(&enc_buf, &enc_cap, n) < 0) {
                    scratch_free(&sc);
                    return -1;
                }
                e = rk_msg_encode(t, &h, obj_buf, enc_buf, enc_cap, &n);
            }
        }
        if (e != RK_OK) {
            rkpy_raise(e, NULL);
            rc = -1;
        } else {
            *out = enc_buf;
            *len = n;
        }
    }
    scratch_free(&sc);
    if (rc == 0) {
        if (prio)
            *prio = p;
        if (msg_id)
            *msg_id = h.message_id;
        if (corr)
            *corr = h.correlation_id;
    }
    return rc;
}

/* ------------------------------------------------------------- decode */

static PyObject *build(const rkpy_msgtype *mt, const char *base);

static PyObject *
scalar_value(int kind, const char *e)
{
    switch (kind) {
    case RK_FK_BOOL:
        return PyBool_FromLong(*(const bool *)e);
    case RK_FK_INT8:
        return PyLong_FromLong(*(const int8_t *)e);
    case RK_FK_INT16:
        return PyLong_FromLong(*(const int16_t *)e);
    case RK_FK_INT32:
        return PyLong_FromLong(*(const int32_t *)e);
    case RK_FK_INT64:
        return PyLong_FromLongLong(*(const int64_t *)e);
    case RK_FK_UINT8:
        return PyLong_FromUnsignedLong(*(const uint8_t *)e);
    case RK_FK_UINT16:
        return PyLong_FromUnsignedLong(*(const uint16_t *)e);
    case RK_FK_UINT32:
        return PyLong_FromUnsignedLong(*(const uint32_t *)e);
    case RK_FK_UINT64:
        return PyLong_FromUnsignedLongLong(*(const uint64_t *)e);
    case RK_FK_FLOAT:
        return PyFloat_FromDouble(*(const float *)e);
    default:
        return PyFloat_FromDouble(*(const double *)e);
    }
}

static PyObject *
elems_value(const fieldinfo *f, const void *p, size_t n)
{
    size_t es = kind_size[f->kind];
    if (f->present == PRESENT_LIST) {
        PyObject *l = PyList_New((Py_ssize_t)n);
        for (size_t i = 0; l != NULL && i < n; i++) {
            const char *e = (const char *)p + i * es;
            PyObject *x = scalar_value(f->kind, e);
            if (x == NULL) {
                Py_DECREF(l);
                return NULL;
            }
            PyList_SET_ITEM(l, (Py_ssize_t)i, x);
        }
        return l;
    }
    /* A writable numpy array over a fresh bytearray (one copy). */
    PyObject *ba = PyByteArray_FromStringAndSize(
        n ? (const char *)p : NULL, (Py_ssize_t)(n * es));
    if (ba == NULL)
        return NULL;
    PyObject *arr = PyObject_CallFunction(
        rkpy_numpy_frombuffer, "Os", ba, kind_dtype[f->kind]);
    Py_DECREF(ba);
    return arr;
}

static PyObject *
field_value(const fieldinfo *f, const char *p)
{
    switch (f->cls) {
    case RK_FC_SCALAR:
        return scalar_value(f->kind, p);
    case RK_FC_ARRAY:
        return elems_value(f, p, f->count);
    case RK_FC_VLA: {
        const rk_vla_u8 *v = (const rk_vla_u8 *)p;
        return elems_value(f, v->ptr, v->len);
    }
    case RK_FC_BYTES: {
        const rk_bytes *b = (const rk_bytes *)p;
        return PyBytes_FromStringAndSize((const char *)b->ptr, b->len);
    }
    case RK_FC_STRING: {
        const rk_str *s = (const rk_str *)p;
        return PyUnicode_DecodeUTF8(s->len ? s->ptr : "", s->len, "strict");
    }
    case RK_FC_NESTED: {
        if (f->present == PRESENT_UUID) {
            const rk_bytes *b = (const rk_bytes *)p;
            if (b->len != 16)
                return rkpy_raisef(RK_EFIELDTYPE,
                    "%s: a UUID needs 16 bytes, got %u",
                    PyUnicode_AsUTF8(f->name), b->len);
            return rkpy_uuid_new((const rk_uuid *)b->ptr, 0);
        }
        return build((const rkpy_msgtype *)f->nested, p);
    }
    default:
        return rkpy_raise(RK_EINTERNAL, "bad field class");
    }
}

static PyObject *
build_kwargs(const rkpy_msgtype *mt, const char *base)
{
    PyObject *kw = PyDict_New();
    for (int i = 0; kw != NULL && i < mt->nf; i++) {
        PyObject *v = field_value(&mt->f[i], base + mt->f[i].offset);
        if (v == NULL || PyDict_SetItem(kw, mt->f[i].name, v) < 0) {
            Py_XDECREF(v);
            Py_CLEAR(kw);
            break;
        }
        Py_DECREF(v);
    }
    return kw;
}

static PyObject *str_dict;

static PyObject *
call_cls(const rkpy_msgtype *mt, PyObject *kw)
{
    if (mt->cls == NULL || mt->cls == Py_None) {
        Py_INCREF(kw);
        return kw; /* no class: the field dict */
    }
    if (mt->fast && PyType_Check(mt->cls)) {
        /* A plain @message dataclass: its __init__ only stores the
         * fields, which the decoder has checked; store them directly
         * (as pickle does), about 1 us cheaper per message. */
        PyObject *o = PyBaseObject_Type.tp_new(
            (PyTypeObject *)mt->cls, empty_args, NULL);
        if (o != NULL && PyObject_GenericSetAttr(o, str_dict, kw) < 0)
            Py_CLEAR(o);
        if (o != NULL) {
            /* the instance now owns kw as its __dict__ */
            return o;
        }
        return NULL;
    }
    PyObject *args = PyTuple_New(0);
    PyObject *r = args ? PyObject_Call(mt->cls, args, kw) : NULL;
    Py_XDECREF(args);
    return r;
}

static PyObject *
build(const rkpy_msgtype *mt, const char *base)
{
    PyObject *kw = build_kwargs(mt, base);
    if (kw == NULL)
        return NULL;
    PyObject *r = call_cls(mt, kw);
    Py_DECREF(kw);
    return r;
}

static int
set_envelope(PyObject *kw, const rk_msg_header *h)
{
    PyObject *id = rkpy_uuid_new(&h->message_id, 1);
    PyObject *corr = id ? rkpy_uuid_new(&h->correlation_id, 1) : NULL;
    PyObject *prio = corr ? PyLong_FromLong(h->priority) : NULL;
    int r = -1;
    if (prio != NULL
        && (id == Py_None || PyDict_SetItem(kw, str_message_id, id) == 0)
        && PyDict_SetItem(kw, str_correlation_id, corr) == 0
        && PyDict_SetItem(kw, str_priority, prio) == 0)
        r = 0;
    Py_XDECREF(id);
    Py_XDECREF(corr);
    Py_XDECREF(prio);
    return r;
}

static int
is_msgpack_map(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    return len > 0 && ((p[0] & 0xf0) == 0x80 || p[0] == 0xde || p[0] == 0xdf);
}

/* A Python-codec type: py_dec(bytes) gives the field dict (envelope keys
 * as the map had them); the envelope, when there is one, overrides them
 * as for C-codec types. */
/* kw[key] into *out when it is a UUID (left alone when absent or None). */
static int
kw_uuid(PyObject *kw, PyObject *key, rk_uuid *out)
{
    PyObject *v = PyDict_GetItemWithError(kw, key);
    if (v == NULL)
        return PyErr_Occurred() ? -1 : 0;
    return v == Py_None ? 0 : rkpy_uuid_get(v, out, 1);
}

static PyObject *
py_decode(const rkpy_msgtype *mt, const rk_msg_header *hdr, const void *buf,
    size_t len)
{
    PyObject *b = PyBytes_FromStringAndSize(buf, (Py_ssize_t)len);
    PyObject *kw = b ? PyObject_CallOneArg(mt->py_dec, b) : NULL;
    Py_XDECREF(b);
    if (kw == NULL)
        return NULL;
    if (!PyDict_Check(kw)) {
        Py_DECREF(kw);
        return rkpy_raisef(
            RK_EDECODE, "%s: the decoder did not return a dict", mt->desc->name);
    }
    if (hdr != NULL) {
        /* As for C-codec types: the payload's ids win, the envelope fills
         * in (and gives the priority). */
        rk_msg_header e = *hdr;
        if (kw_uuid(kw, str_correlation_id, &e.correlation_id) < 0
            || kw_uuid(kw, str_message_id, &e.message_id) < 0) {
            Py_DECREF(kw);
            return NULL;
        }
        rkpy_last_payload_id = e.message_id;
        if (set_envelope(kw, &e) < 0) {
            Py_DECREF(kw);
            return NULL;
        }
    }
    PyObject *r = call_cls(mt, kw);
    Py_DECREF(kw);
    return r;
}

PyObject *
rkpy_decode(
    PyObject *mtobj, const rk_msg_header *hdr, const void *buf, size_t len)
{
    const rkpy_msgtype *mt = (const rkpy_msgtype *)mtobj;
    const rk_msgtype *t = mt->desc;
    if (mt->py_dec != NULL)
        return py_decode(mt, hdr, buf, len);
    char *obj = calloc(1, t->size);
    if (obj == NULL)
        return PyErr_NoMemory();
    rk_msg_header h;
    memset(&h, 0, sizeof(h));
    h.priority = RK_MSG_PRIORITY_DEFAULT;
    int rc, fixed = 0;
    if (t->fixed_size && len == t->fixed_size && !is_msgpack_map(buf, len)) {
        rc = rk_msg_fixed_read(t, buf, len, obj);
        fixed = 1;
    } else {
        rc = rk_msg_decode(t, buf, len, obj, &h, 0);
    }
    if (rc != RK_OK) {
        free(obj);
        return rkpy_raise(rc, NULL);
    }
    PyObject *r = NULL;
    PyObject *kw = build_kwargs(mt, obj);
    if (!fixed)
        rk_msg_free(t, obj);
    free(obj);
    if (kw == NULL)
        return NULL;
    /* A message keeps its sender's ids (the payload's copies, as
     * PyDotCompute passes the object itself); the envelope's fill in what
     * the payload lacks, and its priority is the one the message was sent
     * with. Request/reply matching in C uses the envelope ids
     * (docs/python.md). */
    rkpy_last_payload_id = h.message_id;
    if (hdr != NULL) {
        rk_msg_header e = *hdr;
        if (!rk_uuid_is_nil(&h.message_id))
            e.message_id = h.message_id;
        if (!rk_uuid_is_nil(&h.correlation_id))
            e.correlation_id = h.correlation_id;
        h = e;
    }
    if (set_envelope(kw, &h) == 0)
        r = call_cls(mt, kw);
    Py_DECREF(kw);
    return r;
}

const rk_msgtype *
rkpy_msgtype_desc(PyObject *mt)
{
    return ((rkpy_msgtype *)mt)->desc;
}

/* ------------------------------------------------------ the MsgType type */

/*
 * MsgType(name, type_id, fields, cls=None): fields is a list of
 * (name, rk_fclass, rk_fkind, count, nested MsgType or None, present).
 */
static int
msgtype_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    rkpy_msgtype *mt = (rkpy_msgtype *)self;
    static char *kwlist[] = { "name", "type_id", "fields", "cls", "pycodec",
        "register", NULL };
    const char *name;
    unsigned long type_id;
    PyObject *fields, *cls = Py_None, *pycodec = Py_None;
    PyObject *py_enc = NULL, *py_dec = NULL;
    int do_register = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "skO!|OOp", kwlist, &name,
            &type_id, &PyList_Type, &fields, &cls, &pycodec, &do_register))
        return -1;
    if (pycodec != Py_None
        && (!PyArg_ParseTuple(pycodec, "OO", &py_enc, &py_dec)
            || !PyCallable_Check(py_enc) || !PyCallable_Check(py_dec))) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError,
            "pycodec must be (encode, decode), two callables");
        return -1;
    }
    if (mt->desc != NULL) {
        PyErr_SetString(PyExc_TypeError, "MsgType is already initialised");
        return -1;
    }
    Py_ssize_t nf = PyList_GET_SIZE(fields);
    if (nf < 1 || nf > RK_MSG_MAX_FIELDS) {
        rkpy_raisef(RK_EINVAL, "%s: a message type needs 1 to %d fields", name,
            RK_MSG_MAX_FIELDS);
        return -1;
    }
    if (type_id == 0 || type_id > UINT32_MAX) {
        rkpy_raisef(RK_EINVAL, "%s: type id must be 1..2^32-1", name);
        return -1;
    }
    if (ntables == RKPY_MAX_TYPES) {
        rkpy_raisef(RK_ENOMEM,
            "%s: at most %d Python message types per process", name,
            RKPY_MAX_TYPES);
        return -1;
    }
    fieldinfo *fi = calloc((size_t)nf, sizeof(*fi));
    rk_msgfield *tab = calloc((size_t)nf, sizeof(*tab));
    rk_msgtype *t = calloc(1, sizeof(*t));
    if (fi == NULL || tab == NULL || t == NULL) {
        free(fi);
        free(tab);
        free(t);
        PyErr_NoMemory();
        return -1;
    }
    uint32_t off = 0, align = 1, nbools = 0;
    int var = 0;
    for (Py_ssize_t i = 0; i < nf; i++) {
        PyObject *fname, *nested;
        int cls_, kind, present;
        unsigned long count;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(fields, i), "UiikOi", &fname,
                &cls_, &kind, &count, &nested, &present))
            goto fail;
        if (cls_ < RK_FC_SCALAR || cls_ > RK_FC_NESTED || kind < 0
            || kind > RK_FK_NONE || count > UINT32_MAX
            || (cls_ == RK_FC_NESTED
                && (!RKPY_MsgType_Check(nested)
                    || ((rkpy_msgtype *)nested)->desc == NULL))
            || (cls_ != RK_FC_NESTED && kind == RK_FK_NONE
                && cls_ != RK_FC_BYTES && cls_ != RK_FC_STRING)
            || (cls_ != RK_FC_SCALAR && cls_ != RK_FC_NESTED && count == 0)) {
            rkpy_raisef(RK_EINVAL, "%s: bad field spec #%zd", name, i);
            goto fail;
        }
        uint32_t size, al, es;
        switch (cls_) {
        case RK_FC_SCALAR:
            size = al = es = kind_size[kind];
            nbools += kind == RK_FK_BOOL;
            break;
        case RK_FC_ARRAY:
            al = es = kind_size[kind];
            size = es * (uint32_t)count;
            nbools += kind == RK_FK_BOOL ? (uint32_t)count : 0;
            break;
        case RK_FC_NESTED: {
            rkpy_msgtype *n = (rkpy_msgtype *)nested;
            size = es = n->desc->size;
            al = n->align;
            var |= n->desc->fixed_size == 0;
            nbools += n->desc->nbools;
            break;
        }
        default: /* VLA, BYTES, STRING: { ptr; uint32_t len; } */
            size = (uint32_t)sizeof(rk_str);
            al = (uint32_t) _Alignof(rk_str);
            es = cls_ == RK_FC_VLA ? kind_size[kind] : 1;
            var = 1;
        }
        off = (off + al - 1) / al * al;
        fi[i].name = Py_NewRef(fname);
        PyUnicode_InternInPlace(&fi[i].name);
        fi[i].cls = (uint8_t)cls_;
        fi[i].kind = (uint8_t)kind;
        fi[i].present = (uint8_t)present;
        fi[i].offset = off;
        fi[i].count = (uint32_t)count;
        fi[i].elem_size = es;
        fi[i].nested = cls_ == RK_FC_NESTED ? Py_NewRef(nested) : NULL;
        Py_ssize_t nlen;
        const char *s = PyUnicode_AsUTF8AndSize(fname, &nlen);
        if (s == NULL || (tab[i].name = strdup(s)) == NULL)
            goto fail;
        tab[i].name_len = (uint32_t)nlen;
        tab[i].cls = (uint8_t)cls_;
        tab[i].kind = (uint8_t)(cls_ == RK_FC_BYTES || cls_ == RK_FC_STRING
                    || cls_ == RK_FC_NESTED
                ? RK_FK_NONE
                : kind);
        tab[i].elem_size = es;
        tab[i].offset = off;
        tab[i].count = cls_ == RK_FC_SCALAR || cls_ == RK_FC_NESTED
            ? 0
            : (uint32_t)count;
        tab[i].nested = fi[i].nested ? ((rkpy_msgtype *)nested)->desc : NULL;
        off += size;
        if (al > align)
            align = al;
    }
    off = (off + align - 1) / align * align;
    t->name = strdup(name);
    t->id = (uint32_t)type_id;
    t->version = 1;
    t->nfields = (uint16_t)nf;
    t->size = off;
    t->fixed_size = var ? 0 : off;
    t->nbools = nbools;
    tables[ntables] = tab;
    t->fields = tramp[ntables];
    if (t->name == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    /* register=False: a second class with a name the registry has (with
     * another layout) gets a descriptor of its own, outside the registry
     * (it keeps its wire name; messages.py gives it another id). */
    int rc = do_register ? rk_msgtype_register(t) : RK_OK;
    if (rc == RK_EEXIST) {
        /* The same class declared again (a reloaded module): reuse the
         * registered descriptor when its layout is the same. */
        const rk_msgtype *old = rk_msgtype_by_name(name);
        if (old != NULL && old->id == t->id
            && rk_msgtype_layout_hash(old) == rk_msgtype_layout_hash(t)) {
            rc = RK_OK;
            t = (rk_msgtype *)old; /* ours leaks: bounded by RKPY_MAX_TYPES */
        }
    }
    if (rc != RK_OK) {
        rkpy_raise(rc, NULL);
        goto fail;
    }
    ntables++;
    mt->desc = t;
    mt->align = align;
    mt->nf = (int)nf;
    mt->f = fi;
    mt->cls = Py_NewRef(cls);
    mt->py_enc = py_enc ? Py_NewRef(py_enc) : NULL;
    mt->py_dec = py_dec ? Py_NewRef(py_dec) : NULL;
    return 0;
fail:
    for (Py_ssize_t i = 0; i < nf; i++) {
        Py_XDECREF(fi[i].name);
        Py_XDECREF(fi[i].nested);
        free((char *)tab[i].name);
    }
    free(fi);
    free(tab);
    if (t != NULL && t->fields != NULL)
        tables[ntables] = NULL;
    free(t);
    return -1;
}

static void
msgtype_dealloc(PyObject *self)
{
    rkpy_msgtype *mt = (rkpy_msgtype *)self;
    for (int i = 0; i < mt->nf; i++) {
        Py_XDECREF(mt->f[i].name);
        Py_XDECREF(mt->f[i].nested);
    }
    free(mt->f);
    Py_XDECREF(mt->cls);
    Py_XDECREF(mt->py_enc);
    Py_XDECREF(mt->py_dec);
    Py_TYPE(self)->tp_free(self);
}

static int
ready(rkpy_msgtype *mt)
{
    if (mt->desc != NULL)
        return 1;
    PyErr_SetString(PyExc_TypeError, "MsgType is not initialised");
    return 0;
}

static PyObject *
msgtype_encode(PyObject *self, PyObject *obj)
{
    const void *p;
    size_t n;
    if (!ready((rkpy_msgtype *)self)
        || rkpy_encode(self, obj, &p, &n, NULL, NULL, NULL) < 0)
        return NULL;
    return PyBytes_FromStringAndSize(p, (Py_ssize_t)n);
}

static PyObject *
msgtype_decode(PyObject *self, PyObject *data)
{
    Py_buffer v;
    if (!ready((rkpy_msgtype *)self)
        || PyObject_GetBuffer(data, &v, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *r = rkpy_decode(self, NULL, v.buf, (size_t)v.len);
    PyBuffer_Release(&v);
    return r;
}

static PyObject *
msgtype_layout(PyObject *self, void *closure)
{
    (void)closure;
    rkpy_msgtype *mt = (rkpy_msgtype *)self;
    if (!ready(mt))
        return NULL;
    PyObject *l = PyList_New(mt->nf);
    for (int i = 0; l != NULL && i < mt->nf; i++) {
        const fieldinfo *f = &mt->f[i];
        PyObject *x
            = Py_BuildValue("(OIiiIO)", f->name, f->offset, (int)f->cls,
                (int)f->kind, f->count, f->nested ? f->nested : Py_None);
        if (x == NULL) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, i, x);
    }
    return l;
}

static PyObject *
msgtype_get(PyObject *self, void *closure)
{
    rkpy_msgtype *mt = (rkpy_msgtype *)self;
    if (!ready(mt))
        return NULL;
    switch ((int)(intptr_t)closure) {
    case 0:
        return PyUnicode_FromString(mt->desc->name);
    case 1:
        return PyLong_FromUnsignedLong(mt->desc->id);
    case 2:
        return PyLong_FromUnsignedLong(mt->desc->size);
    case 3:
        return PyLong_FromUnsignedLong(mt->desc->fixed_size);
    case 4:
        return PyLong_FromUnsignedLong(mt->align);
    default:
        return PyLong_FromUnsignedLongLong(rk_msgtype_layout_hash(mt->desc));
    }
}

static PyObject *
msgtype_get_cls(PyObject *self, void *closure)
{
    (void)closure;
    rkpy_msgtype *mt = (rkpy_msgtype *)self;
    return Py_NewRef(mt->cls ? mt->cls : Py_None);
}

static int
msgtype_set_cls(PyObject *self, PyObject *v, void *closure)
{
    (void)closure;
    if (v == NULL) {
        PyErr_SetString(PyExc_TypeError, "cannot delete cls");
        return -1;
    }
    Py_XSETREF(((rkpy_msgtype *)self)->cls, Py_NewRef(v));
    return 0;
}

static PyObject *
msgtype_get_fast(PyObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(((rkpy_msgtype *)self)->fast);
}

static int
msgtype_set_fast(PyObject *self, PyObject *v, void *closure)
{
    (void)closure;
    int b = v ? PyObject_IsTrue(v) : 0;
    if (b < 0)
        return -1;
    ((rkpy_msgtype *)self)->fast = b;
    return 0;
}

static PyMethodDef msgtype_methods[] = {
    { "encode", msgtype_encode, METH_O,
        "Encodes an instance as the PyDotCompute msgpack map (C codec)." },
    { "decode", msgtype_decode, METH_O,
        "Decodes msgpack (or the fixed form) into an instance." },
    { NULL, NULL, 0, NULL },
};

static PyGetSetDef msgtype_getset[] = {
    { "name", msgtype_get, NULL, "wire __type__", (void *)0 },
    { "type_id", msgtype_get, NULL, "envelope type id", (void *)1 },
    { "size", msgtype_get, NULL, "C struct size", (void *)2 },
    { "fixed_size", msgtype_get, NULL, "fixed form size (0: none)",
        (void *)3 },
    { "align", msgtype_get, NULL, "C struct alignment", (void *)4 },
    { "layout_hash", msgtype_get, NULL, "rk_msgtype_layout_hash", (void *)5 },
    { "layout", msgtype_layout, NULL,
        "[(name, offset, class, kind, count, nested)]", NULL },
    { "cls", msgtype_get_cls, msgtype_set_cls, "the Python class", NULL },
    { "fast", msgtype_get_fast, msgtype_set_fast,
        "decode without calling __init__ (a plain dataclass)", NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject rkpy_MsgType_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ringkernel._core.MsgType",
    .tp_basicsize = sizeof(rkpy_msgtype),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A message type's C descriptor (built from a @message class).",
    .tp_new = PyType_GenericNew,
    .tp_init = msgtype_init,
    .tp_dealloc = msgtype_dealloc,
    .tp_methods = msgtype_methods,
    .tp_getset = msgtype_getset,
};

int
rkpy_msgtype_init(PyObject *m)
{
    str_message_id = PyUnicode_InternFromString("message_id");
    str_correlation_id = PyUnicode_InternFromString("correlation_id");
    str_priority = PyUnicode_InternFromString("priority");
    zero = PyLong_FromLong(0);
    empty_args = PyTuple_New(0);
    str_dict = PyUnicode_InternFromString("__dict__");
    if (str_message_id == NULL || str_correlation_id == NULL
        || str_priority == NULL || PyType_Ready(&rkpy_MsgType_Type) < 0)
        return -1;
    Py_INCREF(&rkpy_MsgType_Type);
    if (PyModule_AddObject(m, "MsgType", (PyObject *)&rkpy_MsgType_Type) < 0) {
        Py_DECREF(&rkpy_MsgType_Type);
        return -1;
    }
    return 0;
}
