/*
 * common.c - what every part of ringkernel._core shares: the error bridge
 * (RK_E* code + detail -> the exception class errors.py builds), timeouts,
 * UUIDs, the fork check, numpy.frombuffer. Calls nothing of the parts
 * above it (module.c, runtime.c, msgtype.c, buffer.c).
 *
 * Errors: ringkernel/errors.py builds one exception class per RK_E* code
 * (grouped in families) and hands the extension a factory through
 * _set_error_factory(); every failure calls it with the code, its C name,
 * its message and the detail text, so the C error name and the detail
 * (rk_errdetail()) reach the user unchanged.
 */
#include "rkpy.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static PyObject *error_factory; /* owned; set by errors.py */
static PyObject *uuid_class;    /* owned: uuid.UUID */
static PyObject *str_bytes;     /* owned: "bytes" */
static PyObject *str_int, *str_is_safe, *safe_unknown, *empty_tuple;
static PyObject *int64_obj; /* the int 64 */
PyObject *rkpy_numpy_frombuffer;

PyObject *
rkpy_raise(int rc, const char *detail)
{
    if (detail == NULL)
        detail = rk_errdetail();
    if (error_factory == NULL) {
        PyErr_Format(PyExc_RuntimeError, "%s: %s (%s)", rk_err_name(rc),
            rk_strerror(rc), detail);
        return NULL;
    }
    PyObject *exc = PyObject_CallFunction(
        error_factory, "isss", rc, rk_err_name(rc), rk_strerror(rc), detail);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

PyObject *
rkpy_raisef(int rc, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return rkpy_raise(rc, buf);
}

int
rkpy_forked(pid_t pid)
{
    if (getpid() == pid)
        return 0;
    rkpy_raise(RK_EINVAL,
        "this ringkernel runtime was created in another process; a forked "
        "child must create its own runtime");
    return 1;
}

int
rkpy_timeout(PyObject *o, int64_t *out)
{
    if (o == NULL || o == Py_None) {
        *out = RK_WAIT_FOREVER;
        return 0;
    }
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = v < 0 ? RK_WAIT_FOREVER : (int64_t)v;
    return 0;
}

/*
 * uuid.UUID(bytes=...) runs Python code (about 3 us); a message carries
 * one or two ids, so build the object directly instead, as pickle's
 * copyreg path does: object.__new__(UUID), then its two slots (int,
 * is_safe) through the generic setter (UUID.__setattr__ refuses writes).
 */
PyObject *
rkpy_uuid_new(const rk_uuid *u, int nil_none)
{
    if (nil_none && rk_uuid_is_nil(u))
        Py_RETURN_NONE;
    uint64_t hi = 0, lo = 0;
    for (int i = 0; i < 8; i++) {
        hi = hi << 8 | u->b[i];
        lo = lo << 8 | u->b[8 + i];
    }
    PyObject *r = NULL;
    PyObject *h = PyLong_FromUnsignedLongLong(hi);
    PyObject *l = PyLong_FromUnsignedLongLong(lo);
    PyObject *hs = h ? PyNumber_Lshift(h, int64_obj) : NULL;
    PyObject *v = hs && l ? PyNumber_Or(hs, l) : NULL;
    if (v != NULL) {
        r = PyBaseObject_Type.tp_new(
            (PyTypeObject *)uuid_class, empty_tuple, NULL);
        if (r != NULL
            && (PyObject_GenericSetAttr(r, str_int, v) < 0
                || PyObject_GenericSetAttr(r, str_is_safe, safe_unknown) < 0))
            Py_CLEAR(r);
    }
    Py_XDECREF(h);
    Py_XDECREF(l);
    Py_XDECREF(hs);
    Py_XDECREF(v);
    return r;
}

PyObject *
rkpy_uuid7(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    rk_uuid u = rk_uuid_v7();
    return rkpy_uuid_new(&u, 0);
}

int
rkpy_uuid_get(PyObject *o, rk_uuid *out, int allow_none)
{
    if (o == Py_None && allow_none) {
        memset(out, 0, sizeof(*out));
        return 0;
    }
    if (!PyObject_TypeCheck(o, (PyTypeObject *)uuid_class)) {
        rkpy_raisef(RK_EFIELDTYPE, "expected uuid.UUID%s, got %s",
            allow_none ? " or None" : "", Py_TYPE(o)->tp_name);
        return -1;
    }
    PyObject *b = PyObject_GetAttr(o, str_bytes);
    if (b == NULL)
        return -1;
    if (!PyBytes_Check(b) || PyBytes_GET_SIZE(b) != 16) {
        Py_DECREF(b);
        rkpy_raise(RK_EFIELDTYPE, "UUID.bytes is not 16 bytes");
        return -1;
    }
    memcpy(out->b, PyBytes_AS_STRING(b), 16);
    Py_DECREF(b);
    return 0;
}


/* The objects the helpers above use: uuid.UUID and its attribute names,
 * numpy.frombuffer. Called once by PyInit__core. */
int
rkpy_common_init(void)
{
    PyObject *uuid_mod = PyImport_ImportModule("uuid");
    if (uuid_mod == NULL)
        return -1;
    uuid_class = PyObject_GetAttrString(uuid_mod, "UUID");
    PyObject *safe = PyObject_GetAttrString(uuid_mod, "SafeUUID");
    Py_DECREF(uuid_mod);
    if (safe != NULL) {
        safe_unknown = PyObject_GetAttrString(safe, "unknown");
        Py_DECREF(safe);
    }
    str_bytes = PyUnicode_InternFromString("bytes");
    str_int = PyUnicode_InternFromString("int");
    str_is_safe = PyUnicode_InternFromString("is_safe");
    empty_tuple = PyTuple_New(0);
    int64_obj = PyLong_FromLong(64);
    if (uuid_class == NULL || str_bytes == NULL || safe_unknown == NULL
        || str_int == NULL || str_is_safe == NULL || empty_tuple == NULL
        || int64_obj == NULL)
        return -1;
    PyObject *np = PyImport_ImportModule("numpy");
    if (np != NULL) {
        rkpy_numpy_frombuffer = PyObject_GetAttrString(np, "frombuffer");
        Py_DECREF(np);
    }
    if (rkpy_numpy_frombuffer == NULL)
        return -1;
    return 0;
}

void
rkpy_set_error_factory(PyObject *f)
{
    Py_XSETREF(error_factory, Py_NewRef(f));
}
