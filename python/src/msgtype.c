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
 *
 * Encoding is in msgtype_encode.c, decoding in msgtype_decode.c;
 * rkpy_msgtype.h has what the three files share.
 */
#include "rkpy.h"
#include "rkpy_msgtype.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* Shared by the MsgType files (rkpy_msgtype.h); the objects are made by
 * rkpy_msgtype_init. */
const uint8_t rkpy_kind_size[] = { 1, 1, 2, 4, 8, 1, 2, 4, 8, 4, 8, 0 };
const char *const rkpy_kind_dtype[]
    = { "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
          "uint64", "float32", "float64", "?" };
PyObject *rkpy_zero;       /* the int 0 */
PyObject *rkpy_empty_args; /* () */
PyObject *rkpy_str_message_id, *rkpy_str_correlation_id, *rkpy_str_priority;
PyObject *rkpy_str_dict; /* "__dict__" */

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
            size = al = es = rkpy_kind_size[kind];
            nbools += kind == RK_FK_BOOL;
            break;
        case RK_FC_ARRAY:
            al = es = rkpy_kind_size[kind];
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
            es = cls_ == RK_FC_VLA ? rkpy_kind_size[kind] : 1;
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
    RKPY_TYPE_HEAD("MsgType", rkpy_msgtype,
        "A message type's C descriptor (built from a @message class)."),
    RKPY_TYPE_NEW(msgtype_init, msgtype_dealloc),
    .tp_methods = msgtype_methods,
    .tp_getset = msgtype_getset,
};

int
rkpy_msgtype_init(PyObject *m)
{
    rkpy_str_message_id = PyUnicode_InternFromString("message_id");
    rkpy_str_correlation_id = PyUnicode_InternFromString("correlation_id");
    rkpy_str_priority = PyUnicode_InternFromString("priority");
    rkpy_zero = PyLong_FromLong(0);
    rkpy_empty_args = PyTuple_New(0);
    rkpy_str_dict = PyUnicode_InternFromString("__dict__");
    if (rkpy_str_message_id == NULL || rkpy_str_correlation_id == NULL
        || rkpy_str_priority == NULL || rkpy_zero == NULL
        || rkpy_empty_args == NULL || rkpy_str_dict == NULL)
        return -1;
    return PyModule_AddType(m, &rkpy_MsgType_Type);
}