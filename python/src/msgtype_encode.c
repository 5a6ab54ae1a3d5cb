/*
 * msgtype_encode.c - MsgType encoding: fills a C struct of the type from
 * the object's attributes (strings, bytes and matching numpy buffers are
 * borrowed in place, not copied) and hands it to rk_msg_encode()
 * (rkpy_encode; msgtype.c has the whole picture).
 */
#include "rkpy.h"
#include "rkpy_msgtype.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
        int neg = PyObject_RichCompareBool(ix, rkpy_zero, Py_LT);
        if (neg == 0)
            u = PyLong_AsUnsignedLongLong(ix);
        ovf = neg != 0 || (u == (unsigned long long)-1 && PyErr_Occurred())
            || u > hi;
    }
    Py_DECREF(ix);
    if (ovf) {
        PyErr_Clear();
        rkpy_raisef(RK_EFIELDTYPE, "%s.%s: value out of range for %s",
            tname(mt), PyUnicode_AsUTF8(f->name), rkpy_kind_dtype[kind]);
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
    size_t es = rkpy_kind_size[f->kind];
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

/* An optional attribute: NULL with no error when obj lacks it. */
static PyObject *
opt_attr(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL && PyErr_ExceptionMatches(PyExc_AttributeError))
        PyErr_Clear();
    return v;
}

/* Reads obj.<name>, a uuid.UUID or None, into *out when obj has it (else
 * leaves *out). 0, or -1 with an exception set. */
static int
opt_uuid_attr(PyObject *obj, PyObject *name, rk_uuid *out)
{
    PyObject *v = opt_attr(obj, name);
    if (v == NULL)
        return PyErr_Occurred() ? -1 : 0;
    int r = rkpy_uuid_get(v, out, 1);
    Py_DECREF(v);
    return r;
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

    if ((v = opt_attr(obj, rkpy_str_priority)) != NULL) {
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
    if (opt_uuid_attr(obj, rkpy_str_message_id, &h.message_id) < 0
        || opt_uuid_attr(obj, rkpy_str_correlation_id, &h.correlation_id) < 0)
        return -1;
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
