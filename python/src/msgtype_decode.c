/*
 * msgtype_decode.c - MsgType decoding: rk_msg_decode() or
 * rk_msg_fixed_read() into a C struct of the type, then the Python object
 * built from it (rkpy_decode; msgtype.c has the whole picture).
 */
#include "rkpy.h"
#include "rkpy_msgtype.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static PyObject *build(const rkpy_msgtype *mt, const char *base);

static PyObject *
scalar_value(int kind, const char *e)
{
    rk_fnum n = rk_fkind_load(kind, e);

    switch (n.tag) {
    case RK_FNUM_BOOL:
        return PyBool_FromLong(n.v.b);
    case RK_FNUM_INT:
        return PyLong_FromLongLong(n.v.i);
    case RK_FNUM_UINT:
        return PyLong_FromUnsignedLongLong(n.v.u);
    default:
        return PyFloat_FromDouble(n.v.d);
    }
}

static PyObject *
elems_value(const fieldinfo *f, const void *p, size_t n)
{
    size_t es = rkpy_kind_size[f->kind];
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
        rkpy_numpy_frombuffer, "Os", ba, rkpy_kind_dtype[f->kind]);
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
            (PyTypeObject *)mt->cls, rkpy_empty_args, NULL);
        if (o != NULL && PyObject_GenericSetAttr(o, rkpy_str_dict, kw) < 0)
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
        && (id == Py_None || PyDict_SetItem(kw, rkpy_str_message_id, id) == 0)
        && PyDict_SetItem(kw, rkpy_str_correlation_id, corr) == 0
        && PyDict_SetItem(kw, rkpy_str_priority, prio) == 0)
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
        if (kw_uuid(kw, rkpy_str_correlation_id, &e.correlation_id) < 0
            || kw_uuid(kw, rkpy_str_message_id, &e.message_id) < 0) {
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
