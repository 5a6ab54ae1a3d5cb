/*
 * ctx.c - Ctx, a Python actor's kernel context (rk_ctx), and the actor
 * trampoline rkpy_py_actor that every Python kernel runs: it takes the
 * GIL and calls the actor's callable with a Ctx whose blocking calls
 * release the GIL again (runtime.c has the whole picture).
 */
#include "rkpy.h"
#include "rkpy_runtime.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* =============================================================== Ctx */

typedef struct rkpy_ctx {
    PyObject_HEAD rk_ctx *ctx; /* NULL once the actor call returned */
    pyactor *pa;
    rk_msg_view last; /* the last received message (for replies) */
    int have_last;
    rk_uuid last_pid; /* its payload's message id (nil: none) */
} rkpy_ctx;

/* An input message as a Python value; remembers the payload's own message
 * id, which the actor's reply may carry as its correlation id (decoded
 * messages keep their sender's ids, docs/python.md). */
static PyObject *
ctx_value(rkpy_ctx *c, const rk_msg_view *v, int raw)
{
    rkpy_last_payload_id = (rk_uuid) { 0 };
    PyObject *r
        = rkpy_payload_value(c->pa->in_mt, v->hdr, v->data, v->len, raw);
    c->last_pid = rkpy_last_payload_id;
    return r;
}

static int
ctx_ok(rkpy_ctx *c)
{
    if (c->ctx != NULL)
        return 1;
    rkpy_raise(RK_ECLOSED, "this kernel context has ended");
    return 0;
}

static PyObject *
ctx_recv(PyObject *self, PyObject *args, PyObject *kw)
{
    rkpy_ctx *c = (rkpy_ctx *)self;
    static char *kwlist[] = { "timeout_ns", "raw", NULL };
    PyObject *to = Py_None;
    int raw = 0;
    int64_t t;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|Op", kwlist, &to, &raw)
        || rkpy_timeout(to, &t) < 0 || !ctx_ok(c))
        return NULL;
    rk_msg_view v;
    int rc;
    c->have_last = 0;
    RKPY_WAIT_BEGIN rc = rk_ctx_recv(c->ctx, &v, t);
    RKPY_WAIT_END if (rc != RK_OK) return rkpy_raise(rc, NULL);
    c->last = v;
    c->have_last = 1;
    return ctx_value(c, &v, raw);
}

static PyObject *
ctx_should_terminate(PyObject *self, PyObject *unused)
{
    (void)unused;
    rkpy_ctx *c = (rkpy_ctx *)self;
    if (!ctx_ok(c))
        return NULL;
    bool r;
    Py_BEGIN_ALLOW_THREADS r = rk_should_terminate(c->ctx);
    Py_END_ALLOW_THREADS return PyBool_FromLong(r);
}

/* Prepares obj as an actor's output message (mt NULL: chosen by obj's
 * type; None for an object that is not a buffer: the actor's output type)
 * and says whether it answers the input being handled: its correlation id
 * is that input's message id, the envelope's or the payload's own (a
 * decoded message keeps its sender's ids, ctx_value). */
static int
ctx_out(rkpy_ctx *c, PyObject *obj, PyObject *mt, outmsg *m, int *reply)
{
    if (mt == NULL)
        mt = rkpy_auto_mt(obj);
    if (mt == Py_None && !PyObject_CheckBuffer(obj))
        mt = c->pa->out_mt;
    if (rkpy_out_prepare(m, mt, obj, -1) < 0)
        return -1;
    *reply = c->have_last && !rk_uuid_is_nil(&m->corr)
        && (rk_uuid_cmp(&m->corr, &c->last.hdr->message_id) == 0
            || rk_uuid_cmp(&m->corr, &c->last_pid) == 0);
    return 0;
}

/* Sends m (ctx_out, rkpy_out_prepare): to kernel *k when k is set, else
 * to topic when that is set, else to the kernel's output, as rk_ctx_reply
 * when it answers the last input (reply), else rk_ctx_send. Called without
 * the GIL. */
static int
ctx_emit(rkpy_ctx *c, const outmsg *m, const rk_kernel *k, const char *topic,
    int reply)
{
    if (k != NULL)
        return rk_ctx_send_to(c->ctx, *k, m->type_id, m->p, m->len);
    if (topic != NULL)
        return rk_ctx_publish(c->ctx, topic, m->type_id, m->p, m->len);
    return reply ? rk_ctx_reply(c->ctx, &c->last, m->type_id, m->p, m->len)
                 : rk_ctx_send(c->ctx, m->type_id, m->p, m->len);
}

/* ctx_emit with the GIL released, then releases m: None, or NULL with
 * the error raised. */
static PyObject *
ctx_deliver(
    rkpy_ctx *c, outmsg *m, const rk_kernel *k, const char *topic, int reply)
{
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = ctx_emit(c, m, k, topic, reply);
    Py_END_ALLOW_THREADS rkpy_out_release(m);
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    Py_RETURN_NONE;
}

/* send(obj, mt=None, priority=-1, raw_type_id=0): to the kernel's output
 * (its route, or the host). A message whose correlation id is the last
 * received message's id goes out as rk_ctx_reply, so rk_request on the
 * host finds it. */
static PyObject *
ctx_send(PyObject *self, PyObject *args, PyObject *kw)
{
    rkpy_ctx *c = (rkpy_ctx *)self;
    static char *kwlist[] = { "obj", "mt", "type_id", NULL };
    PyObject *obj, *mt = NULL;
    unsigned long type_id = 0;
    if (!PyArg_ParseTupleAndKeywords(
            args, kw, "O|Ok", kwlist, &obj, &mt, &type_id)
        || !ctx_ok(c))
        return NULL;
    outmsg m;
    int reply;
    if (ctx_out(c, obj, mt, &m, &reply) < 0)
        return NULL;
    if (m.type_id == 0)
        m.type_id = (uint32_t)type_id;
    return ctx_deliver(c, &m, NULL, NULL, reply);
}

/* send_recv(obj, mt=None, timeout_ns=None, raw=False): send (or reply,
 * as ctx_send) then take the next input, under one GIL release. Between
 * a separate send and receive the actor takes the GIL back just when the
 * host, woken by the reply, wants it; one release avoids that handoff. */
static PyObject *
ctx_send_recv(PyObject *self, PyObject *args, PyObject *kw)
{
    rkpy_ctx *c = (rkpy_ctx *)self;
    static char *kwlist[] = { "obj", "mt", "timeout_ns", "raw", NULL };
    PyObject *obj, *mt = NULL, *to = Py_None;
    int raw = 0;
    int64_t t;
    if (!PyArg_ParseTupleAndKeywords(
            args, kw, "O|OOp", kwlist, &obj, &mt, &to, &raw)
        || rkpy_timeout(to, &t) < 0 || !ctx_ok(c))
        return NULL;
    outmsg m;
    int rc, reply, sent = 0;
    rk_msg_view v;
    if (ctx_out(c, obj, mt, &m, &reply) < 0)
        return NULL;
    RKPY_WAIT_BEGIN rc = ctx_emit(c, &m, NULL, NULL, reply);
    if (rc == RK_OK) {
        sent = 1;
        rc = rk_ctx_recv(c->ctx, &v, t);
    }
    RKPY_WAIT_END rkpy_out_release(&m);
    if (sent)
        c->have_last = 0;
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    c->last = v;
    c->have_last = 1;
    return ctx_value(c, &v, raw);
}

static PyObject *
ctx_send_to(PyObject *self, PyObject *args, PyObject *kw)
{
    rkpy_ctx *c = (rkpy_ctx *)self;
    static char *kwlist[] = { "kernel_id", "obj", "mt", NULL };
    PyObject *idobj, *obj, *mt = Py_None;
    if (!PyArg_ParseTupleAndKeywords(
            args, kw, "OO|O", kwlist, &idobj, &obj, &mt)
        || !ctx_ok(c))
        return NULL;
    const char *id = rkpy_kid(idobj);
    if (id == NULL)
        return NULL;
    rk_kernel k;
    int rc = rk_kernel_lookup(rk_ctx_runtime(c->ctx), id, &k);
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    outmsg m;
    if (rkpy_out_prepare(&m, mt, obj, -1) < 0)
        return NULL;
    return ctx_deliver(c, &m, &k, NULL, 0);
}

static PyObject *
ctx_publish(PyObject *self, PyObject *args, PyObject *kw)
{
    rkpy_ctx *c = (rkpy_ctx *)self;
    static char *kwlist[] = { "topic", "obj", "mt", NULL };
    const char *topic;
    PyObject *obj, *mt = Py_None;
    if (!PyArg_ParseTupleAndKeywords(
            args, kw, "sO|O", kwlist, &topic, &obj, &mt)
        || !ctx_ok(c))
        return NULL;
    outmsg m;
    if (rkpy_out_prepare(&m, mt, obj, -1) < 0)
        return NULL;
    return ctx_deliver(c, &m, NULL, topic, 0);
}

/* execute_kernel(kernel, grid, block, args, bufs, start=False): a one-shot
 * kernel from the actor (rk_ctx_execute_kernel, oneshot.c): None once it
 * ran, or a Launch to wait on when started. */
static PyObject *
ctx_execute_kernel(PyObject *self, PyObject *args, PyObject *kw)
{
    rkpy_ctx *c = (rkpy_ctx *)self;
    return ctx_ok(c) ? rkpy_oneshot_launch(c->ctx, args, kw) : NULL;
}

static PyObject *
ctx_kernel_id(PyObject *self, void *closure)
{
    (void)closure;
    rkpy_ctx *c = (rkpy_ctx *)self;
    if (!ctx_ok(c))
        return NULL;
    return PyUnicode_FromString(rk_ctx_kernel_id(c->ctx));
}

static PyMethodDef ctx_methods[] = {
    { "recv", RKPY_KW(ctx_recv),
        "recv(timeout_ns=None, raw=False): the next input message." },
    { "should_terminate", ctx_should_terminate, METH_NOARGS,
        "rk_should_terminate (a safe point: parks while deactivated)." },
    { "send", RKPY_KW(ctx_send), "send(obj, mt=None, type_id=0)." },
    { "send_recv", RKPY_KW(ctx_send_recv),
        "send_recv(obj, mt=None, timeout_ns=None, raw=False)." },
    { "send_to", RKPY_KW(ctx_send_to), "send_to(kernel_id, obj, mt=None)." },
    { "publish", RKPY_KW(ctx_publish), "publish(topic, obj, mt=None)." },
    { "execute_kernel", RKPY_KW(ctx_execute_kernel),
        "execute_kernel(kernel, grid, block, args, bufs, start=False): a "
        "one-shot kernel, run (None) or started (a Launch)." },
    { NULL, NULL, 0, NULL },
};

static PyGetSetDef ctx_getset[] = {
    { "kernel_id", ctx_kernel_id, NULL, "this kernel's id", NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject rkpy_Ctx_Type = {
    RKPY_TYPE_HEAD("Ctx", rkpy_ctx,
        "A Python actor's kernel context (valid during its call)."),
    .tp_methods = ctx_methods,
    .tp_getset = ctx_getset,
};

/* The runtime whose kernel thread this is (NULL on other threads): a
 * kernel must not destroy its own runtime (destroy joins its thread). */
_Thread_local rk_runtime *rkpy_tls_kernel_rt;

/* The actor function of every Python kernel: runs on the kernel thread. */
int
rkpy_py_actor(rk_ctx *ctx)
{
    pyactor *pa = rk_ctx_user(ctx);
    int rc = RK_OK;
    rkpy_tls_kernel_rt = rk_ctx_runtime(ctx);
    PyGILState_STATE g = PyGILState_Ensure();
    rkpy_ctx *c = PyObject_New(rkpy_ctx, &rkpy_Ctx_Type);
    if (c == NULL) {
        PyErr_Clear();
        PyGILState_Release(g);
        return RK_ENOMEM;
    }
    c->ctx = ctx;
    c->pa = pa;
    c->have_last = 0;
    rkpy_running_begin();
    PyObject *r = PyObject_CallOneArg(pa->fn, (PyObject *)c);
    rkpy_running_end();
    c->ctx = NULL;
    if (r == NULL) {
        /* The wrapper in kernels.py has logged the exception and returns
         * normally on a clean end; an exception here is a failure for
         * supervision. */
        PyErr_Clear();
        rc = RK_EINTERNAL;
    } else if (PyLong_Check(r)) {
        rc = (int)PyLong_AsLong(r);
    }
    Py_XDECREF(r);
    Py_DECREF(c);
    PyGILState_Release(g);
    return rc;
}
