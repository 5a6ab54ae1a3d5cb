/*
 * module.c - ringkernel._core: the module's own methods and its init,
 * which calls each part's init (common.c first).
 *
 * Errors: ringkernel/errors.py builds one exception class per RK_E* code
 * (grouped in families) and hands the extension a factory through
 * _set_error_factory(); every failure here calls it with the code, its C
 * name, its message and the detail text, so the C error name and the
 * detail (rk_errdetail()) reach the user unchanged.
 */
#include "rkpy.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static PyObject *
set_error_factory(PyObject *self, PyObject *f)
{
    (void)self;
    rkpy_set_error_factory(f);
    Py_RETURN_NONE;
}

static PyObject *
err_names(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyObject *d = PyDict_New();
    for (int i = 0; d != NULL && i < RK__ERR_COUNT; i++) {
        PyObject *k = PyLong_FromLong(i);
        PyObject *v = Py_BuildValue("(ss)", rk_err_name(i), rk_strerror(i));
        if (k == NULL || v == NULL || PyDict_SetItem(d, k, v) < 0) {
            Py_XDECREF(k);
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(k);
        Py_DECREF(v);
    }
    return d;
}

static PyObject *
version(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyUnicode_FromString(rk_version());
}

static PyObject *
now_ns(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromUnsignedLongLong(rk_now_ns());
}

static PyMethodDef module_methods[] = {
    { "_set_error_factory", set_error_factory, METH_O,
        "Installs the callable that builds exceptions from RK_E* codes." },
    { "_set_type_registry", rkpy_set_type_registry, METH_O,
        "Installs {type id: MsgType}: how untyped receives decode." },
    { "err_names", err_names, METH_NOARGS,
        "{code: (name, message)} for every RK_E* code." },
    { "uuid7", rkpy_uuid7, METH_NOARGS,
        "A new UUID v7 from rk_uuid_v7() (a message id)." },
    { "version", version, METH_NOARGS, "The C library's version string." },
    { "now_ns", now_ns, METH_NOARGS, "rk_now_ns(): the runtime's clock." },
    { "_gil_spin_us", rkpy_gil_spin_us, METH_O,
        "_gil_spin_us(us or None) -> previous: the GIL hand-off spin's "
        "maximum (RINGKERNEL_GIL_SPIN_US; 0: off). For benchmarks." },
    { NULL, NULL, 0, NULL },
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "ringkernel._core",
    "The C layer of ringkernel (see docs/python.md).",
    -1,
    module_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__core(void);

PyMODINIT_FUNC
PyInit__core(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    if (rkpy_common_init() < 0)
        goto fail;
    if (rkpy_msgtype_init(m) < 0 || rkpy_runtime_init(m) < 0
        || rkpy_buffer_init(m) < 0 || rkpy_oneshot_init(m) < 0
        || rkpy_dlpack_init(m) < 0)
        goto fail;
    if (PyModule_AddIntConstant(m, "WAIT_FOREVER", -1) < 0
        || PyModule_AddIntConstant(m, "ID_MAX", RK_ID_MAX) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
