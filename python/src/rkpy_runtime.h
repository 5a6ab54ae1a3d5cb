/*
 * rkpy_runtime.h - private to the Runtime's files of the extension:
 * runtime.c (the Runtime type, its life cycle and wiring, the helpers
 * below), ctx.c (Ctx and the Python actor trampoline) and runtime_io.c
 * (the Runtime's message calls). Nothing here is part of the module's
 * interface; rkpy.h has what the other files share.
 */
#ifndef RKPY_RUNTIME_H
#define RKPY_RUNTIME_H

#include "rkpy.h"

#include <stdatomic.h>
#include <stdlib.h>

typedef struct pyactor {
    PyObject *fn;     /* called as fn(ctx) on the kernel's thread */
    PyObject *in_mt;  /* MsgType or None */
    PyObject *out_mt; /* MsgType or None */
    /* a device actor's CUDA C handler, entry and file name (owned copies;
     * NULL for a Python-only actor) */
    char *dev_src, *dev_entry, *dev_name;
    char *dev_ptx; /* a Numba handler's PTX linked into the loop, or NULL */
    char *dev_bar; /* the named device barrier it shares, or NULL */
    struct pyactor *next;
} pyactor;

/* Frees a pyactor's device strings. */
static inline void
pyactor_free_strings(pyactor *pa)
{
    free(pa->dev_src);
    free(pa->dev_entry);
    free(pa->dev_name);
    free(pa->dev_ptx);
    free(pa->dev_bar);
}

typedef struct rkpy_runtime {
    PyObject_HEAD rk_runtime *rt;
    pid_t pid;
    atomic_int inflight; /* calls inside rk_* without the GIL */
    atomic_bool closing;
    pyactor *actors;
    PyObject *weakrefs;
} rkpy_runtime;

/* Encodes obj with mt, or takes it as raw bytes when mt is None. */
typedef struct outmsg {
    const void *p;
    size_t len;
    uint32_t type_id;
    uint8_t prio;
    rk_uuid id, corr;
    Py_buffer view;
    int have_view;
} outmsg;

/* --------------------------------------------------------- runtime.c */

/* Thread-local receive buffer (rkpy_rbuf, rkpy_rcap bytes), grown on
 * RK_EMSGSIZE by rkpy_rgrow (0, or -1 with MemoryError set). */
extern _Thread_local char *rkpy_rbuf;
extern _Thread_local size_t rkpy_rcap;
int rkpy_rgrow(size_t need);
/* Checks the runtime is usable; on success counts the caller in (0), else
 * -1 with an exception set. rkpy_rt_leave counts it out again. */
int rkpy_rt_enter(rkpy_runtime *self);
void rkpy_rt_leave(rkpy_runtime *self);
/* A kernel id (str) as UTF-8, or NULL with TypeError set. */
const char *rkpy_kid(PyObject *o);
/* In a method of the Runtime taking a kernel id (idobj): calls
 * get(rt, id, out) with the caller counted in (rkpy_rt_enter/leave) and
 * returns NULL from the method, with the exception set, when the id, the
 * runtime or get fails. */
#define RKPY_KERNEL_GET(self, idobj, get, out)                                \
    do {                                                                      \
        rkpy_runtime *rkpy_r_ = (rkpy_runtime *)(self);                       \
        const char *rkpy_id_ = rkpy_kid(idobj);                               \
        if (rkpy_id_ == NULL || rkpy_rt_enter(rkpy_r_) < 0)                   \
            return NULL;                                                      \
        int rkpy_rc_ = get(rkpy_r_->rt, rkpy_id_, out);                       \
        rkpy_rt_leave(rkpy_r_);                                               \
        if (rkpy_rc_ != RK_OK)                                                \
            return rkpy_raise(rkpy_rc_, NULL);                                \
    } while (0)
/* A payload as a Python value: decoded with mt (or the MsgType registered
 * for h's type id), else bytes; raw: (bytes, header dict). */
PyObject *rkpy_payload_value(
    PyObject *mt, const rk_msg_header *h, const char *buf, size_t len, int raw);
/* 0 if mt is None or an initialised MsgType, else -1 with TypeError. */
int rkpy_check_mt(PyObject *mt);
/* The MsgType of obj's class (__rk_msgtype__) or None; borrowed. */
PyObject *rkpy_auto_mt(PyObject *obj);
/* Fills m from obj (encoded with mt, or its buffer when mt is None);
 * prio >= 0 overrides the priority. 0, or -1 with an exception set;
 * rkpy_out_release frees what it holds. */
int rkpy_out_prepare(outmsg *m, PyObject *mt, PyObject *obj, int prio);
void rkpy_out_release(outmsg *m);

/* ------------------------------------------------------------- ctx.c */

extern PyTypeObject rkpy_Ctx_Type;
/* The runtime whose kernel thread this is (NULL on other threads). */
extern _Thread_local rk_runtime *rkpy_tls_kernel_rt;

/* The actor function of every Python kernel (its user data: a pyactor). */
int rkpy_py_actor(rk_ctx *ctx);

/* ------------------------------------------------------ runtime_io.c */

/* The Runtime's methods of the same names (runtime.c's method table). */
PyObject *rkpy_runtime_send(PyObject *self, PyObject *args, PyObject *kw);
PyObject *rkpy_runtime_send_batch(
    PyObject *self, PyObject *args, PyObject *kw);
PyObject *rkpy_runtime_recv(PyObject *self, PyObject *args, PyObject *kw);
PyObject *rkpy_runtime_recv_raw(PyObject *self, PyObject *args, PyObject *kw);
PyObject *rkpy_runtime_send_recv(
    PyObject *self, PyObject *args, PyObject *kw);
PyObject *rkpy_runtime_request(PyObject *self, PyObject *args, PyObject *kw);
PyObject *rkpy_runtime_stats(PyObject *self, PyObject *idobj);
PyObject *rkpy_runtime_telemetry(PyObject *self, PyObject *idobj);
PyObject *rkpy_runtime_publish(PyObject *self, PyObject *args, PyObject *kw);
PyObject *rkpy_runtime_dead_letter(PyObject *self, PyObject *args);

#endif
