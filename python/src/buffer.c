/*
 * buffer.c - Buffer: an rk_buffer (lazily synchronised host/device memory)
 * whose host side Python reads and writes through the buffer protocol
 * (numpy arrays over it without a copy). ringkernel/buffers.py wraps it
 * as the seeds' UnifiedBuffer.
 *
 * Ownership: the Buffer object owns its rk_buffer; every exported view
 * holds a reference to the object, so the memory outlives the views, and
 * free() refuses while views exist. A buffer is not thread-safe (as
 * rk_buffer); calls keep the GIL, which serialises them.
 */
#include "rkpy.h"

#include <stdint.h>
#include <string.h>

typedef struct rkpy_buffer {
    PyObject_HEAD rk_buffer *buf;
    PyObject *owner; /* a wrapped buffer's memory's owner (kept alive) */
    Py_ssize_t shape[3];
    Py_ssize_t strides[3];
    int ndim;
    char format[2];
    Py_ssize_t exports;
    Py_ssize_t uses; /* launches and DLPack exports (rkpy_buffer_use) */
    int write_mode; /* 1: exports are RK_ACCESS_WRITE; 2: writable READ */
} rkpy_buffer;

static const struct {
    char fmt;
    rk_dtype dt;
} fmts[] = { { 'B', RK_DTYPE_U8 }, { 'b', RK_DTYPE_I8 }, { 'H', RK_DTYPE_U16 },
    { 'h', RK_DTYPE_I16 }, { 'I', RK_DTYPE_U32 }, { 'i', RK_DTYPE_I32 },
    { 'Q', RK_DTYPE_U64 }, { 'q', RK_DTYPE_I64 }, { 'f', RK_DTYPE_F32 },
    { 'd', RK_DTYPE_F64 } };

/* self's rk_buffer, or NULL with RK_ECLOSED raised once it is freed. */
static rk_buffer *
buffer_live(PyObject *self)
{
    rk_buffer *buf = ((rkpy_buffer *)self)->buf;
    if (buf == NULL)
        rkpy_raise(RK_ECLOSED, "the buffer has been freed");
    return buf;
}

/* The config of shape (a tuple of 1-3 positive ints, also stored in b)
 * and fmt (a struct format character); -1 with an exception set. */
static int
buffer_shape(rkpy_buffer *b, PyObject *shape, const char *fmt,
    rk_buffer_config *cfg)
{
    int found = 0;
    memset(cfg, 0, sizeof(*cfg));
    for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++)
        if (fmt[0] == fmts[i].fmt && fmt[1] == '\0') {
            cfg->dtype = fmts[i].dt;
            found = 1;
        }
    Py_ssize_t nd = PyTuple_GET_SIZE(shape);
    if (!found || nd < 1 || nd > 3) {
        rkpy_raisef(RK_EINVAL,
            "a buffer needs 1-3 dimensions and a numeric dtype (got %zd "
            "dimensions, format '%s')",
            nd, fmt);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nd; i++) {
        Py_ssize_t d = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
        if (d == -1 && PyErr_Occurred())
            return -1;
        if (d <= 0) {
            rkpy_raise(RK_EINVAL, "every dimension must be positive");
            return -1;
        }
        cfg->dims[i] = (size_t)d;
        b->shape[i] = d;
    }
    b->ndim = (int)nd;
    b->format[0] = fmt[0];
    b->format[1] = '\0';
    return 0;
}

/* C-order strides of b's shape, once its rk_buffer exists. */
static void
buffer_strides(rkpy_buffer *b)
{
    Py_ssize_t st = (Py_ssize_t)rk_buffer_elem_size(b->buf);
    for (int i = b->ndim - 1; i >= 0; i--) {
        b->strides[i] = st;
        st *= b->shape[i];
    }
}

/* Buffer(shape: tuple of 1-3 ints, format: struct char, device=0,
 *        ordinal=0, managed=False, pinned=False) */
static int
buffer_init(PyObject *self, PyObject *args, PyObject *kw)
{
    rkpy_buffer *b = (rkpy_buffer *)self;
    static char *kwlist[] = { "shape", "format", "device", "ordinal",
        "managed", "pinned", NULL };
    PyObject *shape;
    const char *fmt;
    int device = RK_DEVICE_CPU, ordinal = 0, managed = 0, pinned = 0;
    rk_buffer_config cfg;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!s|iipp", kwlist,
            &PyTuple_Type, &shape, &fmt, &device, &ordinal, &managed,
            &pinned))
        return -1;
    if (b->buf != NULL) {
        PyErr_SetString(PyExc_TypeError, "Buffer is already initialised");
        return -1;
    }
    if (buffer_shape(b, shape, fmt, &cfg) < 0)
        return -1;
    cfg.device = (rk_device_kind)device;
    cfg.ordinal = ordinal;
    cfg.flags = (managed ? RK_BUFFER_MANAGED : 0u)
        | (pinned ? RK_BUFFER_PINNED : 0u);
    int rc = rk_buffer_create(&b->buf, &cfg);
    if (rc != RK_OK) {
        b->buf = NULL;
        rkpy_raise(rc, NULL);
        return -1;
    }
    buffer_strides(b);
    return 0;
}

static void
buffer_dealloc(PyObject *self)
{
    rkpy_buffer *b = (rkpy_buffer *)self;
    rk_buffer_destroy(b->buf);
    Py_XDECREF(b->owner);
    Py_TYPE(self)->tp_free(self);
}

/* An export in write mode (or a writable request) is RK_ACCESS_WRITE:
 * the host copy becomes the current one; else RK_ACCESS_READ. Both sync
 * first. numpy asks for read-only exports, so the mode is set beforehand
 * by set_mode(). */
static int
buffer_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    rkpy_buffer *b = (rkpy_buffer *)self;
    if (buffer_live(self) == NULL)
        return -1;
    void *p;
    /* write_mode 2: a writable view that reads (PyDotCompute's `host`:
     * the state does not change; writes are declared with
     * mark_host_dirty). */
    int writable = b->write_mode || (flags & PyBUF_WRITABLE) != 0;
    int rc = rk_buffer_host(b->buf,
        writable && b->write_mode != 2 ? RK_ACCESS_WRITE : RK_ACCESS_READ, &p);
    if (rc != RK_OK) {
        rkpy_raise(rc, NULL);
        return -1;
    }
    view->buf = p;
    view->obj = Py_NewRef(self);
    view->len = (Py_ssize_t)rk_buffer_bytes(b->buf);
    view->readonly = !writable;
    view->itemsize = (Py_ssize_t)rk_buffer_elem_size(b->buf);
    view->format = (flags & PyBUF_FORMAT) ? b->format : NULL;
    view->ndim = b->ndim;
    view->shape = (flags & PyBUF_ND) ? b->shape : NULL;
    view->strides
        = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? b->strides : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    b->exports++;
    return 0;
}

static void
buffer_releasebuffer(PyObject *self, Py_buffer *view)
{
    (void)view;
    ((rkpy_buffer *)self)->exports--;
}

static PyBufferProcs buffer_as_buffer = {
    buffer_getbuffer,
    buffer_releasebuffer,
};

static PyObject *
buffer_call(PyObject *self, PyObject *arg)
{
    rkpy_buffer *b = (rkpy_buffer *)self;
    if (buffer_live(self) == NULL)
        return NULL;
    const char *op = PyUnicode_AsUTF8(arg);
    if (op == NULL)
        return NULL;
    int rc;
    void *p = NULL;
    if (strcmp(op, "ensure_host") == 0)
        rc = rk_buffer_ensure_host(b->buf, NULL);
    else if (strcmp(op, "ensure_device") == 0)
        rc = rk_buffer_ensure_device(b->buf, NULL);
    else if (strcmp(op, "mark_host_dirty") == 0)
        rc = rk_buffer_mark_host_dirty(b->buf);
    else if (strcmp(op, "mark_device_dirty") == 0)
        rc = rk_buffer_mark_device_dirty(b->buf);
    else if (strcmp(op, "zeros") == 0)
        rc = rk_buffer_zeros(b->buf);
    else if (strcmp(op, "device_read") == 0)
        rc = rk_buffer_device(b->buf, RK_ACCESS_READ, &p);
    else if (strcmp(op, "device_write") == 0)
        rc = rk_buffer_device(b->buf, RK_ACCESS_WRITE, &p);
    else
        return rkpy_raisef(RK_EINVAL, "unknown buffer operation '%s'", op);
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    if (p != NULL)
        return PyLong_FromVoidPtr(p);
    Py_RETURN_NONE;
}

static PyObject *
buffer_state(PyObject *self, PyObject *unused)
{
    (void)unused;
    rk_buffer *buf = buffer_live(self);
    if (buf == NULL)
        return NULL;
    return PyLong_FromLong((long)rk_buffer_get_state(buf));
}

static PyObject *
buffer_stats(PyObject *self, PyObject *unused)
{
    (void)unused;
    rk_buffer *buf = buffer_live(self);
    if (buf == NULL)
        return NULL;
    rk_buffer_stats s;
    rk_buffer_stats_get(buf, &s);
    return Py_BuildValue("{sKsKsKsKsK}", "h2d_transfers",
        (unsigned long long)s.h2d_transfers, "d2h_transfers",
        (unsigned long long)s.d2h_transfers, "h2d_bytes",
        (unsigned long long)s.h2d_bytes, "d2h_bytes",
        (unsigned long long)s.d2h_bytes, "transfers_avoided",
        (unsigned long long)s.transfers_avoided);
}

static PyObject *
buffer_free(PyObject *self, PyObject *unused)
{
    (void)unused;
    rkpy_buffer *b = (rkpy_buffer *)self;
    if (b->exports > 0)
        return rkpy_raise(
            RK_EBUSY, "numpy arrays or memoryviews still use this buffer");
    if (b->uses > 0)
        return rkpy_raise(
            RK_EBUSY, "a one-shot kernel launch or a DLPack consumer still "
                      "uses this buffer");
    rk_buffer_destroy(b->buf);
    b->buf = NULL;
    Py_CLEAR(b->owner);
    Py_RETURN_NONE;
}

/* prefetch(side): rk_buffer_prefetch to side (0 host, 1 device), on the
 * legacy stream, then waits for it: the pages are there on return. */
static PyObject *
buffer_prefetch(PyObject *self, PyObject *arg)
{
    rk_buffer *buf = buffer_live(self);
    long side = buf != NULL ? PyLong_AsLong(arg) : -1;
    int rc;
    if (buf == NULL || (side == -1 && PyErr_Occurred()))
        return NULL;
    rc = rk_buffer_prefetch(buf, (rk_buffer_side)side, NULL);
    if (rc == RK_OK && rk_buffer_device_kind(buf) == RK_DEVICE_CUDA) {
        Py_BEGIN_ALLOW_THREADS rc = rk_buffer_wait_stream(buf, 1);
        Py_END_ALLOW_THREADS
    }
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    Py_RETURN_NONE;
}

/* advise(advice, side): rk_buffer_advise. */
static PyObject *
buffer_advise(PyObject *self, PyObject *args)
{
    rk_buffer *buf = buffer_live(self);
    int advice, side;
    if (buf == NULL || !PyArg_ParseTuple(args, "ii", &advice, &side))
        return NULL;
    int rc = rk_buffer_advise(buf, (rk_mem_advice)advice, (rk_buffer_side)side);
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    Py_RETURN_NONE;
}

static PyObject *
buffer_set_mode(PyObject *self, PyObject *arg)
{
    long w = PyLong_AsLong(arg);
    if (w == -1 && PyErr_Occurred())
        return NULL;
    if (w < 0 || w > 2)
        return rkpy_raisef(RK_EINVAL, "set_mode: 0, 1 or 2, not %ld", w);
    ((rkpy_buffer *)self)->write_mode = (int)w;
    Py_RETURN_NONE;
}

static PyMethodDef buffer_methods[] = {
    { "set_mode", buffer_set_mode, METH_O,
        "set_mode(m): how the next exports access the host copy: 0 read "
        "(read-only view), 1 write (the host copy becomes current), 2 read "
        "(writable view, state unchanged)" },
    { "op", buffer_call, METH_O,
        "op(name): ensure_host, ensure_device, mark_host_dirty, "
        "mark_device_dirty, zeros, device_read, device_write" },
    { "state", buffer_state, METH_NOARGS, "rk_buffer_state" },
    { "stats", buffer_stats, METH_NOARGS, "transfer counters" },
    { "free", buffer_free, METH_NOARGS, "destroys the rk_buffer" },
    { "prefetch", buffer_prefetch, METH_O,
        "prefetch(side): a managed buffer's pages to the host (0) or its "
        "device (1), waited for" },
    { "advise", buffer_advise, METH_VARARGS,
        "advise(advice, side): rk_buffer_advise on a managed buffer" },
    { NULL, NULL, 0, NULL },
};

static PyTypeObject Buffer_Type = {
    RKPY_TYPE_HEAD("Buffer", rkpy_buffer,
        "An rk_buffer; its host side through the buffer protocol."),
    RKPY_TYPE_NEW(buffer_init, buffer_dealloc),
    .tp_methods = buffer_methods,
    .tp_as_buffer = &buffer_as_buffer,
};

int
rkpy_buffer_use(PyObject *o, int delta, rk_buffer **out)
{
    if (!PyObject_TypeCheck(o, &Buffer_Type)) {
        PyErr_Format(PyExc_TypeError,
            "a launch's buffers must be ringkernel Buffers, not %s",
            Py_TYPE(o)->tp_name);
        return -1;
    }
    rkpy_buffer *b = (rkpy_buffer *)o;
    if (delta > 0) {
        if (buffer_live(o) == NULL)
            return -1;
        *out = b->buf;
    }
    b->uses += delta;
    return 0;
}

/* wrap_device(ptr, nbytes, ordinal, owner, stream=None) -> a Buffer of
 * nbytes bytes over device memory at ptr on CUDA device ordinal
 * (rk_buffer_wrap_device), keeping owner alive until it is freed; with
 * a stream (a CUstream handle, 1 or 2), that stream's work is waited for
 * first (rk_buffer_wait_stream). */
static PyObject *
wrap_device(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = { "ptr", "nbytes", "ordinal", "owner", "stream",
        NULL };
    unsigned long long ptr, stream = 0;
    Py_ssize_t nbytes;
    int ordinal, rc;
    PyObject *owner, *st = Py_None;
    rk_buffer_config cfg;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "KniO|O", kwlist, &ptr,
            &nbytes, &ordinal, &owner, &st))
        return NULL;
    if (st != Py_None) {
        stream = PyLong_AsUnsignedLongLong(st);
        if (PyErr_Occurred())
            return NULL;
        if (stream == 0)
            return rkpy_raise(RK_EINVAL,
                "stream 0 is ambiguous (the CUDA Array Interface and DLPack "
                "refuse it): None, 1, 2 or a stream handle");
    }
    rkpy_buffer *b = (rkpy_buffer *)PyType_GenericNew(&Buffer_Type, NULL, NULL);
    if (b == NULL)
        return NULL;
    PyObject *shape = Py_BuildValue("(n)", nbytes);
    if (shape == NULL || buffer_shape(b, shape, "B", &cfg) < 0) {
        Py_XDECREF(shape);
        Py_DECREF(b);
        return NULL;
    }
    Py_DECREF(shape);
    cfg.device = RK_DEVICE_CUDA;
    cfg.ordinal = ordinal;
    Py_BEGIN_ALLOW_THREADS rc = rk_buffer_wrap_device(
        &b->buf, &cfg, (void *)(uintptr_t)ptr);
    if (rc == RK_OK && stream != 0)
        rc = rk_buffer_wait_stream(b->buf, (uintptr_t)stream);
    Py_END_ALLOW_THREADS if (rc != RK_OK)
    {
        Py_DECREF(b);
        return rkpy_raise(rc, NULL);
    }
    buffer_strides(b);
    b->owner = Py_NewRef(owner);
    return (PyObject *)b;
}

static PyMethodDef buffer_functions[] = {
    { "wrap_device", RKPY_KW(wrap_device),
        "wrap_device(ptr, nbytes, ordinal, owner, stream=None): a Buffer "
        "over another library's device memory (no copy), keeping owner "
        "alive." },
    { NULL, NULL, 0, NULL },
};

int
rkpy_buffer_init(PyObject *m)
{
    if (PyModule_AddType(m, &Buffer_Type) < 0)
        return -1;
    return PyModule_AddFunctions(m, buffer_functions);
}
