/*
 * rkpy.h - shared declarations of the CPython extension ringkernel._core.
 *
 * The extension is a thin layer over the public C API (include/ringkernel):
 * it owns no queue and no lifecycle of its own. Files:
 *   module.c   module init, the error bridge (RK_E* -> Python exception
 *              classes made by ringkernel/errors.py), fork checks, helpers
 *   msgtype.c  MsgType: an rk_msgtype descriptor built at run time from a
 *              @message class; msgtype_encode.c and msgtype_decode.c:
 *              encode/decode through the C codec (they share
 *              rkpy_msgtype.h)
 *   buffer.c   Buffer: an rk_buffer whose host side is a Python buffer
 *   dlpack.c   DLPack capsules over a buffer's memory (__dlpack__)
 *   oneshot.c  OneShot, Launch: one-shot kernels (rk_oneshot) and their
 *              started launches; Ctx.execute_kernel launches through it
 *   runtime.c  Runtime (rk_runtime): life cycle, wiring, output_arm
 *              (async receive: the kernel output's eventfd,
 *              rk_kernel_output_arm); with ctx.c (Ctx, a Python actor's
 *              rk_ctx, and the actor trampoline) and runtime_io.c (the
 *              Runtime's message calls), sharing rkpy_runtime.h
 *
 * common.c also has the fork check and the GIL hand-off hint (the
 * RKPY_WAIT_BEGIN/END macros below).
 *
 * Ownership: Python objects own their C state; an rk_runtime belongs to the
 * Runtime object that created it and is destroyed by its close() or
 * deallocation. Every call that can block releases the GIL.
 */
#ifndef RKPY_H
#define RKPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <sys/types.h>

#include "ringkernel/ringkernel.h"

/* ---------------------------------------------------------- common.c */

/* Sets a Python exception for rc (an RK_E* code) with detail (NULL: the
 * thread's rk_errdetail()). Returns NULL for convenience. */
PyObject *rkpy_raise(int rc, const char *detail);
/* The same with a formatted detail. */
PyObject *rkpy_raisef(int rc, const char *fmt, ...);
/* True (and a ForkError set) when called in a process other than pid. */
int rkpy_forked(pid_t pid);
/* Python timeout in ns (int; negative: forever) -> int64. */
int rkpy_timeout(PyObject *o, int64_t *out);
/* uuid.UUID from 16 bytes; NULL for a nil id when nil_none. */
PyObject *rkpy_uuid_new(const rk_uuid *u, int nil_none);
/* 16 bytes from a uuid.UUID (or None when allow_none: nil). */
int rkpy_uuid_get(PyObject *o, rk_uuid *out, int allow_none);
/* The module's exception classes for a kernel end (ECLOSED) signal. */
extern PyObject *rkpy_numpy_frombuffer; /* numpy.frombuffer or NULL */
/* uuid7() of the module: a new message id. */
PyObject *rkpy_uuid7(PyObject *self, PyObject *unused);
/* Sets up the shared objects above (once, from PyInit__core). */
int rkpy_common_init(void);

/* Adds the types a and b and the functions fns (NULL-terminated) to the
 * module m; -1 with an exception set on failure. */
int rkpy_module_add(
    PyObject *m, PyTypeObject *a, PyTypeObject *b, PyMethodDef *fns);
/* The exception factory errors.py installs. */
void rkpy_set_error_factory(PyObject *f);

/* GIL hand-offs (common.c): a call that waits in C (for a message)
 * releases the GIL with RKPY_WAIT_BEGIN / RKPY_WAIT_END instead of
 * Py_BEGIN/END_ALLOW_THREADS. Before it takes the GIL back, it spins for a
 * bounded time while another thread that the extension knows to run Python
 * has not reached a wait of its own, so that hand-offs between the host and
 * a Python actor do not sleep on the GIL. Short releases that do not wait
 * use the ordinary macros. */
PyThreadState *rkpy_wait_begin(void);
void rkpy_wait_end(PyThreadState *ts);
/* This thread runs Python from now on (a Python actor's start) / stops
 * running it for a while (an actor's end, an event loop about to park). */
void rkpy_running_begin(void);
void rkpy_running_end(void);
/* _gil_spin_us(us or None) -> the previous maximum (benchmarks' A/B). */
PyObject *rkpy_gil_spin_us(PyObject *self, PyObject *arg);
#define RKPY_WAIT_BEGIN                                                       \
    {                                                                         \
        PyThreadState *rkpy_ts_ = rkpy_wait_begin();
#define RKPY_WAIT_END                                                         \
    rkpy_wait_end(rkpy_ts_);                                                  \
    }

/* The head of one of the module's static types: ringkernel._core.<name>,
 * an instance of C type ctype, documented by doc. */
/* clang-format off */
#define RKPY_TYPE_HEAD(name, ctype, doc)                                      \
    PyVarObject_HEAD_INIT(NULL, 0)                                            \
    .tp_name = "ringkernel._core." name, .tp_basicsize = sizeof(ctype),       \
    .tp_flags = Py_TPFLAGS_DEFAULT, .tp_doc = (doc)
/* clang-format on */

/* The slots of a type that Python code instantiates: generic allocation,
 * then init; dealloc releases what init made. */
#define RKPY_TYPE_NEW(init, dealloc)                                          \
    .tp_new = PyType_GenericNew, .tp_init = (init), .tp_dealloc = (dealloc)

/* A PyMethodDef's function and flags for a method taking (args, kwargs). */
#define RKPY_KW(fn)                                                           \
    (PyCFunction)(void (*)(void))(fn), METH_VARARGS | METH_KEYWORDS

/* ------------------------------------- msgtype.c, msgtype_*code.c */

typedef struct rkpy_msgtype rkpy_msgtype;
extern PyTypeObject rkpy_MsgType_Type;
int rkpy_msgtype_init(PyObject *module);

#define RKPY_MsgType_Check(o) PyObject_TypeCheck(o, &rkpy_MsgType_Type)

/* The C descriptor of a MsgType. */
const rk_msgtype *rkpy_msgtype_desc(PyObject *mt);

/* Encodes obj (an instance of mt's class) into a thread-local buffer:
 * *out and *len stay valid until the next encode on this thread. *prio gets
 * obj.priority, *msg_id and *corr its ids (corr nil when None). */
int rkpy_encode(PyObject *mt, PyObject *obj, const void **out, size_t *len,
    uint8_t *prio, rk_uuid *msg_id, rk_uuid *corr);

/* Decodes a payload of mt (msgpack, or mt's fixed form when it is one)
 * into a new instance; the envelope hdr (may be NULL) gives message_id,
 * correlation_id and priority. */
PyObject *rkpy_decode(
    PyObject *mt, const rk_msg_header *hdr, const void *buf, size_t len);

/* The payload message id of the last rkpy_decode on this thread (nil
 * when the payload had none). */
extern _Thread_local rk_uuid rkpy_last_payload_id;
/* The MsgType registered for an envelope type id (borrowed), or NULL:
 * what an untyped receive decodes with. */
PyObject *rkpy_msgtype_by_id(uint32_t id);
/* _set_type_registry({type id: MsgType}) */
PyObject *rkpy_set_type_registry(PyObject *self, PyObject *d);

/* --------------------------------------------------------- runtime.c */

int rkpy_runtime_init(PyObject *module);

/* ---------------------------------------------------------- buffer.c */

int rkpy_buffer_init(PyObject *module);
/* delta 1: o (a Buffer) is used by a launch (or a DLPack export) from
 * now on, *out its
 * rk_buffer (RK_ECLOSED once freed; TypeError for another object);
 * delta -1: no longer. free() refuses while a use is counted. */
int rkpy_buffer_use(PyObject *o, int delta, rk_buffer **out);

/* --------------------------------------------------------- oneshot.c */

int rkpy_oneshot_init(PyObject *module);
/* Launches (kernel: a OneShot, grid, block, args, bufs, start=False):
 * from an actor's handler when ctx is set (rk_ctx_execute_kernel), else
 * rk_oneshot_run / rk_oneshot_start. None, or a Launch when started. */
PyObject *rkpy_oneshot_launch(rk_ctx *ctx, PyObject *args, PyObject *kw);

/* ---------------------------------------------------------- dlpack.c */

int rkpy_dlpack_init(PyObject *module);

#endif
