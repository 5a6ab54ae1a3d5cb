/*
 * runtime.c - Runtime and Ctx: the C runtime seen from Python.
 *
 * Runtime owns one rk_runtime. Every call that can block (send with
 * backpressure, receive, request, lifecycle changes that wait, destroy)
 * runs with the GIL released. A blocking receive waits in slices of
 * RKPY_SLICE_NS and checks for signals between slices, so Ctrl-C raises
 * KeyboardInterrupt promptly. Calls that released the GIL are counted in
 * `inflight`; close() sets `closing` and waits for them to leave before it
 * destroys the runtime, so no thread is inside rk_* on a freed runtime.
 *
 * A Python actor (@ring_kernel) is an ordinary actor-style C kernel whose
 * actor function (py_actor) takes the GIL and calls the Python callable
 * with a Ctx; the Ctx's blocking calls release the GIL again. The
 * callable belongs to the pyactor record, which the Runtime frees after
 * rk_runtime_destroy (no kernel thread runs then).
 *
 * Async receive has no thread of its own: output_arm arms the kernel
 * output's eventfd (rk_kernel_output_arm), which the event loop watches
 * with add_reader; the loop then receives with RK_NO_WAIT. Idle, nothing
 * runs: the loop sits in its select.
 *
 * Calls that wait for a message release the GIL with RKPY_WAIT_BEGIN/END
 * (rkpy.h), which spin briefly before taking it back while another Python
 * thread (the host, or a Python actor) is about to reach a wait of its
 * own: the hand-offs of a round trip then do not sleep on the GIL.
 */
#include "rkpy.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RKPY_SLICE_NS ((int64_t)50 * 1000 * 1000)

typedef struct pyactor {
    PyObject *fn;     /* called as fn(ctx) on the kernel's thread */
    PyObject *in_mt;  /* MsgType or None */
    PyObject *out_mt; /* MsgType or None */
    struct pyactor *next;
} pyactor;

typedef struct rkpy_runtime {
    PyObject_HEAD rk_runtime *rt;
    pid_t pid;
    atomic_int inflight; /* calls inside rk_* without the GIL */
    atomic_bool closing;
    pyactor *actors;
    PyObject *weakrefs;
} rkpy_runtime;

static PyTypeObject Runtime_Type;
static PyTypeObject Ctx_Type;

/* Thread-local receive buffer, grown on RK_EMSGSIZE. */
static _Thread_local char *rbuf;
static _Thread_local size_t rcap;

static int
rgrow(size_t need)
{
    if (need <= rcap)
        return 0;
    size_t n = rcap ? rcap : 65536;
    while (n < need)
        n *= 2;
    char *p = realloc(rbuf, n);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    rbuf = p;
    rcap = n;
    return 0;
}

/* Checks the runtime is usable; on success counts the caller in. */
static int
enter(rkpy_runtime *self)
{
    if (rkpy_forked(self->pid))
        return -1;
    if (self->rt == NULL || atomic_load(&self->closing)) {
        rkpy_raise(RK_ECLOSED, "the runtime is closed");
        return -1;
    }
    if (rgrow(65536) < 0)
        return -1;
    atomic_fetch_add(&self->inflight, 1);
    return 0;
}

static void
leave(rkpy_runtime *self)
{
    atomic_fetch_sub(&self->inflight, 1);
}

static const char *
kid(PyObject *o)
{
    if (!PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "kernel id must be str, not %s",
            Py_TYPE(o)->tp_name);
        return NULL;
    }
    return PyUnicode_AsUTF8(o);
}

static PyObject *
hdr_dict(const rk_msg_header *h, size_t len)
{
    PyObject *id = rkpy_uuid_new(&h->message_id, 1);
    PyObject *corr = id ? rkpy_uuid_new(&h->correlation_id, 1) : NULL;
    PyObject *d = corr ? Py_BuildValue("{sIsIsIsOsOsKsIsn}", "type_id",
                      h->type_id, "priority", (unsigned)h->priority, "flags",
                      h->flags, "message_id", id, "correlation_id", corr,
                      "send_ns", (unsigned long long)h->send_ns, "sender",
                      h->sender, "len", (Py_ssize_t)len)
                       : NULL;
    Py_XDECREF(id);
    Py_XDECREF(corr);
    return d;
}

/* The payload in rbuf as a Python value: decoded with mt, else bytes. */
static PyObject *
payload_value(
    PyObject *mt, const rk_msg_header *h, const char *buf, size_t len, int raw)
{
    if (!raw && (mt == NULL || mt == Py_None) && h != NULL)
        mt = rkpy_msgtype_by_id(h->type_id); /* an untyped kernel */
    if (mt != NULL && mt != Py_None && !raw)
        return rkpy_decode(mt, h, buf, len);
    PyObject *b = PyBytes_FromStringAndSize(buf, (Py_ssize_t)len);
    if (b == NULL || !raw)
        return b;
    PyObject *hd = hdr_dict(h, len);
    PyObject *r = hd ? PyTuple_Pack(2, b, hd) : NULL;
    Py_DECREF(b);
    Py_XDECREF(hd);
    return r;
}

static int
check_mt(PyObject *mt)
{
    if (mt == NULL || mt == Py_None)
        return 0;
    if (RKPY_MsgType_Check(mt)) {
        if (rkpy_msgtype_desc(mt) != NULL)
            return 0;
        PyErr_SetString(PyExc_TypeError, "MsgType is not initialised");
        return -1;
    }
    PyErr_Format(
        PyExc_TypeError, "expected a MsgType, got %s", Py_TYPE(mt)->tp_name);
    return -1;
}

/* The MsgType of obj's class (its __rk_msgtype__, set by @message), or
 * None for anything else; borrowed. The last class seen is remembered
 * (under the GIL), which saves an attribute lookup per send. */
static PyObject *
auto_mt(PyObject *obj)
{
    static PyObject *name;
    static PyTypeObject *last_cls;
    static PyObject *last_mt;
    PyTypeObject *t = Py_TYPE(obj);

    if (t == last_cls)
        return last_mt;
    if (name == NULL
        && (name = PyUnicode_InternFromString("__rk_msgtype__")) == NULL) {
        PyErr_Clear();
        return Py_None;
    }
    PyObject *mt = PyObject_GetAttr((PyObject *)t, name);
    if (mt == NULL) {
        PyErr_Clear();
        mt = Py_NewRef(Py_None);
    }
    Py_INCREF(t);
    Py_XDECREF(last_cls);
    Py_XDECREF(last_mt);
    last_cls = t;
    last_mt = mt;
    return mt;
}

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

static int
out_prepare(outmsg *m, PyObject *mt, PyObject *obj, int prio)
{
    m->have_view = 0;
    memset(&m->corr, 0, sizeof(m->corr));
    if (check_mt(mt) < 0)
        return -1;
    if (mt != NULL && mt != Py_None) {
        if (rkpy_encode(mt, obj, &m->p, &m->len, &m->prio, &m->id, &m->corr)
            < 0)
            return -1;
        m->type_id = rkpy_msgtype_desc(mt)->id;
    } else {
        if (PyObject_GetBuffer(obj, &m->view, PyBUF_C_CONTIGUOUS) < 0)
            return -1;
        m->have_view = 1;
        m->p = m->view.buf;
        m->len = (size_t)m->view.len;
        m->type_id = 0;
        m->prio = RK_MSG_PRIORITY_DEFAULT;
    }
    if (prio >= 0)
        m->prio = (uint8_t)(prio > 255 ? 255 : prio);
    return 0;
}

static void
out_release(outmsg *m)
{
    if (m->have_view)
        PyBuffer_Release(&m->view);
}

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
    PyObject *r = payload_value(c->pa->in_mt, v->hdr, v->data, v->len, raw);
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
        mt = auto_mt(obj);
    if (mt == Py_None && !PyObject_CheckBuffer(obj))
        mt = c->pa->out_mt;
    if (out_prepare(m, mt, obj, -1) < 0)
        return -1;
    *reply = c->have_last && !rk_uuid_is_nil(&m->corr)
        && (rk_uuid_cmp(&m->corr, &c->last.hdr->message_id) == 0
            || rk_uuid_cmp(&m->corr, &c->last_pid) == 0);
    return 0;
}

/* Sends m (ctx_out) to the kernel's output: as rk_ctx_reply when it
 * answers the last input, else rk_ctx_send. Called without the GIL. */
static int
ctx_emit(rkpy_ctx *c, const outmsg *m, int reply)
{
    return reply ? rk_ctx_reply(c->ctx, &c->last, m->type_id, m->p, m->len)
                 : rk_ctx_send(c->ctx, m->type_id, m->p, m->len);
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
    int rc, reply;
    if (ctx_out(c, obj, mt, &m, &reply) < 0)
        return NULL;
    if (m.type_id == 0)
        m.type_id = (uint32_t)type_id;
    Py_BEGIN_ALLOW_THREADS rc = ctx_emit(c, &m, reply);
    Py_END_ALLOW_THREADS out_release(&m);
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    Py_RETURN_NONE;
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
    RKPY_WAIT_BEGIN rc = ctx_emit(c, &m, reply);
    if (rc == RK_OK) {
        sent = 1;
        rc = rk_ctx_recv(c->ctx, &v, t);
    }
    RKPY_WAIT_END out_release(&m);
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
    const char *id = kid(idobj);
    if (id == NULL)
        return NULL;
    rk_kernel k;
    int rc = rk_kernel_lookup(rk_ctx_runtime(c->ctx), id, &k);
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    outmsg m;
    if (out_prepare(&m, mt, obj, -1) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS rc
        = rk_ctx_send_to(c->ctx, k, m.type_id, m.p, m.len);
    Py_END_ALLOW_THREADS out_release(&m);
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    Py_RETURN_NONE;
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
    if (out_prepare(&m, mt, obj, -1) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc
        = rk_ctx_publish(c->ctx, topic, m.type_id, m.p, m.len);
    Py_END_ALLOW_THREADS out_release(&m);
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    Py_RETURN_NONE;
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
    { "recv", (PyCFunction)(void (*)(void))ctx_recv,
        METH_VARARGS | METH_KEYWORDS,
        "recv(timeout_ns=None, raw=False): the next input message." },
    { "should_terminate", ctx_should_terminate, METH_NOARGS,
        "rk_should_terminate (a safe point: parks while deactivated)." },
    { "send", (PyCFunction)(void (*)(void))ctx_send,
        METH_VARARGS | METH_KEYWORDS, "send(obj, mt=None, type_id=0)." },
    { "send_recv", (PyCFunction)(void (*)(void))ctx_send_recv,
        METH_VARARGS | METH_KEYWORDS,
        "send_recv(obj, mt=None, timeout_ns=None, raw=False)." },
    { "send_to", (PyCFunction)(void (*)(void))ctx_send_to,
        METH_VARARGS | METH_KEYWORDS, "send_to(kernel_id, obj, mt=None)." },
    { "publish", (PyCFunction)(void (*)(void))ctx_publish,
        METH_VARARGS | METH_KEYWORDS, "publish(topic, obj, mt=None)." },
    { NULL, NULL, 0, NULL },
};

static PyGetSetDef ctx_getset[] = {
    { "kernel_id", ctx_kernel_id, NULL, "this kernel's id", NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static void
ctx_dealloc(PyObject *self)
{
    Py_TYPE(self)->tp_free(self);
}

static PyTypeObject Ctx_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ringkernel._core.Ctx",
    .tp_basicsize = sizeof(rkpy_ctx),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A Python actor's kernel context (valid during its call).",
    .tp_dealloc = ctx_dealloc,
    .tp_methods = ctx_methods,
    .tp_getset = ctx_getset,
};

/* The runtime whose kernel thread this is (NULL on other threads): a
 * kernel must not destroy its own runtime (destroy joins its thread). */
static _Thread_local rk_runtime *tls_kernel_rt;

/* The actor function of every Python kernel: runs on the kernel thread. */
static int
py_actor(rk_ctx *ctx)
{
    pyactor *pa = rk_ctx_user(ctx);
    int rc = RK_OK;
    tls_kernel_rt = rk_ctx_runtime(ctx);
    PyGILState_STATE g = PyGILState_Ensure();
    rkpy_ctx *c = PyObject_New(rkpy_ctx, &Ctx_Type);
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

/* ============================================================ Runtime */

static int
runtime_init(PyObject *self, PyObject *args, PyObject *kw)
{
    rkpy_runtime *r = (rkpy_runtime *)self;
    static char *kwlist[] = { "max_kernels", "dead_letter_capacity",
        "terminate_timeout_ns", "control_timeout_ns", "host_spin_ns",
        "no_static_kernels", "backend", NULL };
    rk_runtime_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    unsigned int mk = 0, dl = 0;
    long long tt = 0, ct = 0, hs = 0;
    int nostatic = 0;
    const char *backend = NULL; /* read by rk_runtime_create only */
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|IILLLpz", kwlist, &mk, &dl,
            &tt, &ct, &hs, &nostatic, &backend))
        return -1;
    if (r->rt != NULL) {
        PyErr_SetString(PyExc_TypeError, "Runtime is already initialised");
        return -1;
    }
    cfg.max_kernels = mk;
    cfg.dead_letter_capacity = dl;
    cfg.terminate_timeout_ns = tt;
    cfg.control_timeout_ns = ct;
    cfg.host_spin_ns = hs;
    cfg.no_static_kernels = nostatic != 0;
    cfg.backend = backend;
    int rc = rk_runtime_create(&r->rt, &cfg);
    if (rc != RK_OK) {
        r->rt = NULL;
        rkpy_raise(rc, NULL);
        return -1;
    }
    r->pid = getpid();
    atomic_init(&r->inflight, 0);
    atomic_init(&r->closing, false);
    return 0;
}

/* 0 on success (or nothing to do); -1 when called from one of the
 * runtime's own kernel threads, which destroy would have to join. */
static int
runtime_do_close(rkpy_runtime *r)
{
    if (r->rt == NULL || getpid() != r->pid) {
        /* A forked child must not touch the parent's threads. */
        r->rt = NULL;
        return 0;
    }
    if (tls_kernel_rt == r->rt)
        return -1;
    atomic_store(&r->closing, true);
    rk_runtime *rt = r->rt;
    Py_BEGIN_ALLOW_THREADS while (atomic_load(&r->inflight) > 0)
    {
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL); /* only while closing: sliced calls leave */
    }
    rk_runtime_destroy(rt);
    Py_END_ALLOW_THREADS r->rt = NULL;
    while (r->actors != NULL) {
        pyactor *pa = r->actors;
        r->actors = pa->next;
        Py_XDECREF(pa->fn);
        Py_XDECREF(pa->in_mt);
        Py_XDECREF(pa->out_mt);
        free(pa);
    }
    return 0;
}

static PyObject *
runtime_close(PyObject *self, PyObject *unused)
{
    (void)unused;
    if (runtime_do_close((rkpy_runtime *)self) < 0)
        return rkpy_raise(RK_EBUSY,
            "a kernel cannot close its own runtime (close it from the host)");
    Py_RETURN_NONE;
}

static void
runtime_dealloc(PyObject *self)
{
    rkpy_runtime *r = (rkpy_runtime *)self;
    if (r->weakrefs != NULL)
        PyObject_ClearWeakRefs(self);
    if (runtime_do_close(r) < 0) {
        /* Dropped last on one of its own kernel threads: destroying would
         * join this thread. Leave the runtime running rather than hang. */
        PyErr_WarnEx(PyExc_ResourceWarning,
            "ringkernel runtime released on its own kernel thread; it is "
            "left running (close runtimes from the host)",
            1);
        PyErr_Clear();
    }
    Py_TYPE(self)->tp_free(self);
}

static PyObject *
runtime_register_actor(PyObject *self, PyObject *args, PyObject *kw)
{
    rkpy_runtime *r = (rkpy_runtime *)self;
    static char *kwlist[] = { "kernel_id", "fn", "in_mt", "out_mt",
        "input_capacity", "output_capacity", "max_payload", "backpressure",
        "when_inactive", "restart", "max_restarts", "priority_bands",
        "telemetry_off", "spin", NULL };
    const char *id;
    PyObject *fn, *in_mt = Py_None, *out_mt = Py_None;
    unsigned int icap = 0, ocap = 0, maxp = 0, mr = 0, spin = 0;
    int bp = 0, wi = 0, restart = 0, bands = 0, toff = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO|OOIIIiiiIppI", kwlist, &id,
            &fn, &in_mt, &out_mt, &icap, &ocap, &maxp, &bp, &wi, &restart, &mr,
            &bands, &toff, &spin))
        return NULL;
    if (check_mt(in_mt) < 0 || check_mt(out_mt) < 0)
        return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "fn must be callable");
        return NULL;
    }
    if (enter(r) < 0)
        return NULL;
    pyactor *pa = calloc(1, sizeof(*pa));
    if (pa == NULL) {
        leave(r);
        return PyErr_NoMemory();
    }
    rk_kernel_def def;
    memset(&def, 0, sizeof(def));
    def.id = id;
    def.actor = py_actor;
    def.config.input_type = in_mt != Py_None ? rkpy_msgtype_desc(in_mt) : NULL;
    def.config.output_type
        = out_mt != Py_None ? rkpy_msgtype_desc(out_mt) : NULL;
    def.config.input_capacity = icap;
    def.config.output_capacity = ocap;
    def.config.max_payload = maxp;
    def.config.backpressure = (rk_backpressure)bp;
    def.config.when_inactive = (rk_inactive_policy)wi;
    def.config.supervision.policy = (rk_restart_policy)restart;
    def.config.supervision.max_restarts = mr;
    def.config.priority_bands = bands != 0;
    def.config.telemetry_off = toff != 0;
    def.config.spin = spin;
    def.config.user = pa;
    int rc = rk_runtime_register(r->rt, &def);
    leave(r);
    if (rc != RK_OK) {
        free(pa);
        return rkpy_raise(rc, NULL);
    }
    pa->fn = Py_NewRef(fn);
    pa->in_mt = Py_NewRef(in_mt);
    pa->out_mt = Py_NewRef(out_mt);
    pa->next = r->actors;
    r->actors = pa;
    Py_RETURN_NONE;
}

/* Lifecycle calls by id, each with the GIL released. */
enum { OP_LAUNCH, OP_ACTIVATE, OP_DEACTIVATE, OP_TERMINATE, OP_WAIT };

static PyObject *
lifecycle(PyObject *self, PyObject *args, int op)
{
    rkpy_runtime *r = (rkpy_runtime *)self;
    PyObject *idobj, *to = Py_None;
    int64_t t;
    if (!PyArg_ParseTuple(args, "O|O", &idobj, &to)
        || rkpy_timeout(to, &t) < 0)
        return NULL;
    const char *id = kid(idobj);
    if (id == NULL || enter(r) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS switch (op)
    {
    case OP_LAUNCH:
        rc = rk_kernel_launch(r->rt, id);
        break;
    case OP_ACTIVATE:
        rc = rk_kernel_activate(r->rt, id);
        break;
    case OP_DEACTIVATE:
        rc = rk_kernel_deactivate(r->rt, id);
        break;
    case OP_TERMINATE:
        rc = rk_kernel_terminate(r->rt, id, t);
        break;
    default:
        rc = rk_kernel_wait(r->rt, id, t);
    }
    Py_END_ALLOW_THREADS leave(r);
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    Py_RETURN_NONE;
}

/* The methods that differ only in the op they pass on. */
#define BY_OP(name, fn, op)                                                   \
    static PyObject *name(PyObject *s, PyObject *a)                           \
    {                                                                         \
        return fn(s, a, op);                                                  \
    }
BY_OP(runtime_launch, lifecycle, OP_LAUNCH)
BY_OP(runtime_activate, lifecycle, OP_ACTIVATE)
BY_OP(runtime_deactivate, lifecycle, OP_DEACTIVATE)
BY_OP(runtime_terminate, lifecycle, OP_TERMINATE)
BY_OP(runtime_wait, lifecycle, OP_WAIT)

static PyObject *
runtime_state(PyObject *self, PyObject *idobj)
{
    rkpy_runtime *r = (rkpy_runtime *)self;
    const char *id = kid(idobj);
    if (id == NULL || enter(r) < 0)
        return NULL;
    rk_kernel_state st;
    int rc = rk_kernel_state_get(r->rt, id, &st);
    leave(r);
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    return PyLong_FromLong((long)st);
}

/* The backend that runs the kernel ("cpu", "cuda"): the one its
 * registration chose (rk_kernel_config_get). */
static PyObject *
runtime_backend(PyObject *self, PyObject *idobj)
{
    rkpy_runtime *r = (rkpy_runtime *)self;
    const char *id = kid(idobj);
    if (id == NULL || enter(r) < 0)
        return NULL;
    rk_kernel_config cfg;
    int rc = rk_kernel_config_get(r->rt, id, &cfg);
    leave(r);
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    return PyUnicode_FromString(cfg.backend != NULL ? cfg.backend : "");
}

static PyObject *
runtime_lookup(PyObject *self, PyObject *idobj)
{
    rkpy_runtime *r = (rkpy_runtime *)self;
    const char *id = kid(idobj);
    if (id == NULL || enter(r) < 0)
        return NULL;
    rk_kernel k;
    int rc = rk_kernel_lookup(r->rt, id, &k);
    leave(r);
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    return Py_BuildValue("(II)", k.slot, k.gen);
}

/* send(kernel_id, obj, mt=None, priority=-1, timeout_ns=None, type_id=0) */
static PyObject *
runtime_send(PyObject *self, PyObject *args, PyObject *kw)
{
    rkpy_runtime *r = (rkpy_runtime *)self;
    static char *kwlist[] = { "kernel_id", "obj", "mt", "priority",
        "timeout_ns", "type_id", NULL };
    PyObject *idobj, *obj, *mt = NULL, *to = Py_None;
    int prio = -1;
    unsigned long type_id = 0;
    int64_t t;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OiOk", kwlist, &idobj, &obj,
            &mt, &prio, &to, &type_id)
        || rkpy_timeout(to, &t) < 0)
        return NULL;
    if (mt == NULL) /* not given: the message's own type */
        mt = auto_mt(obj);
    const char *id = kid(idobj);
    if (id == NULL || enter(r) < 0)
        return NULL;
    outmsg m;
    if (out_prepare(&m, mt, obj, prio) < 0) {
        leave(r);
        return NULL;
    }
    if (m.type_id == 0)
        m.type_id = (uint32_t)type_id;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc
        = rk_send_id(r->rt, id, m.type_id, m.p, m.len, m.prio, t);
    Py_END_ALLOW_THREADS out_release(&m);
    leave(r);
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    Py_RETURN_NONE;
}

/* send_batch(kernel_id, data, itemsize, type_id=0, priority=128,
 * timeout_ns=None) -> number sent: n payloads back to back in one buffer
 * (a numpy structured array of a fixed-layout type), one wake-up. */
static PyObject *
runtime_send_batch(PyObject *self, PyObject *args, PyObject *kw)
{
    rkpy_runtime *r = (rkpy_runtime *)self;
    static char *kwlist[] = { "kernel_id", "data", "itemsize", "type_id",
        "priority", "timeout_ns", NULL };
    PyObject *idobj, *data, *to = Py_None;
    Py_ssize_t itemsize;
    unsigned long type_id = 0;
    int prio = RK_MSG_PRIORITY_DEFAULT;
    int64_t t;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOn|kiO", kwlist, &idobj,
            &data, &itemsize, &type_id, &prio, &to)
        || rkpy_timeout(to, &t) < 0)
        return NULL;
    const char *id = kid(idobj);
    if (id == NULL)
        return NULL;
    if (itemsize <= 0)
        return rkpy_raise(RK_EINVAL, "itemsize must be positive");
    Py_buffer v;
    if (PyObject_GetBuffer(data, &v, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (v.len % itemsize != 0) {
        PyBuffer_Release(&v);
        return rkpy_raisef(RK_EINVAL,
            "buffer of %zd bytes is not a whole number of %zd-byte items",
            v.len, itemsize);
    }
    if (enter(r) < 0) {
        PyBuffer_Release(&v);
        return NULL;
    }
    rk_kernel k;
    size_t sent = 0;
    int rc = rk_kernel_lookup(r->rt, id, &k);
    if (rc == RK_OK) {
        Py_BEGIN_ALLOW_THREADS rc = rk_send_batch(r->rt, k, (uint32_t)type_id,
            v.buf, (size_t)itemsize, (size_t)(v.len / itemsize), (uint8_t)prio,
            t, &sent);
        Py_END_ALLOW_THREADS
    }
    leave(r);
    PyBuffer_Release(&v);
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    return PyLong_FromSize_t(sent);
}

/*
 * Receives into rbuf in slices, checking signals between slices. Returns
 * RK_OK, an RK_E* code, or -1 with a Python exception set (a signal
 * handler raised, e.g. KeyboardInterrupt).
 */
static int
recv_sliced(rkpy_runtime *r, const char *id, rk_msg_header *h, size_t *len,
    int64_t timeout)
{
    int64_t deadline = timeout < 0 ? -1 : (int64_t)rk_now_ns() + timeout;
    for (;;) {
        int64_t slice = RKPY_SLICE_NS;
        if (deadline >= 0) {
            int64_t rem = deadline - (int64_t)rk_now_ns();
            slice = rem <= 0 ? RK_NO_WAIT : rem < slice ? rem : slice;
        }
        int rc;
        char *buf = rbuf;
        size_t cap = rcap;
        if (slice == RK_NO_WAIT) {
            /* Never blocks: no GIL release (and no hand-off) needed. */
            rc = rk_recv_id(r->rt, id, h, buf, cap, len, RK_NO_WAIT);
        } else {
            RKPY_WAIT_BEGIN rc
                = rk_recv_id(r->rt, id, h, buf, cap, len, slice);
            RKPY_WAIT_END
        }
        if (rc == RK_EMSGSIZE) {
            if (rgrow(*len) < 0)
                return -1;
            continue;
        }
        if (rc != RK_ETIMEDOUT && rc != RK_EEMPTY)
            return rc;
        if (PyErr_CheckSignals() < 0)
            return -1;
        if (deadline >= 0 && (int64_t)rk_now_ns() >= deadline)
            return RK_ETIMEDOUT;
        if (atomic_load(&r->closing))
            return RK_ECLOSED;
    }
}

static PyObject *
do_recv(PyObject *self, PyObject *args, PyObject *kw, int raw)
{
    rkpy_runtime *r = (rkpy_runtime *)self;
    static char *kwlist[]
        = { "kernel_id", "mt", "timeout_ns", "none_on_timeout", NULL };
    PyObject *idobj, *mt = Py_None, *to = Py_None;
    int none_on_timeout = 0;
    int64_t t;
    if (!PyArg_ParseTupleAndKeywords(
            args, kw, "O|OOp", kwlist, &idobj, &mt, &to, &none_on_timeout)
        || rkpy_timeout(to, &t) < 0 || check_mt(mt) < 0)
        return NULL;
    const char *id = kid(idobj);
    if (id == NULL || enter(r) < 0)
        return NULL;
    rk_msg_header h;
    size_t len = 0;
    int rc = recv_sliced(r, id, &h, &len, t);
    leave(r);
    if (rc < 0)
        return NULL;
    if ((rc == RK_ETIMEDOUT || rc == RK_EEMPTY) && none_on_timeout)
        Py_RETURN_NONE;
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    return payload_value(mt, &h, rbuf, len, raw);
}

/*
 * send_recv(kernel_id, obj, mt, reply_mt, timeout_ns=None,
 *           recv_timeout_ns=timeout_ns, none_on_timeout=False):
 * a send and the next receive under one GIL release, so the host does not
 * take the GIL back between them while a Python actor wants it. With
 * none_on_timeout, a receive that timed out (after a successful send)
 * returns None instead of raising: the async API then waits on its
 * eventfd.
 */
static PyObject *
runtime_send_recv(PyObject *self, PyObject *args, PyObject *kw)
{
    rkpy_runtime *r = (rkpy_runtime *)self;
    static char *kwlist[] = { "kernel_id", "obj", "mt", "reply_mt",
        "timeout_ns", "recv_timeout_ns", "none_on_timeout", NULL };
    PyObject *idobj, *obj, *mt = Py_None, *rmt = Py_None, *to = Py_None;
    PyObject *rto = NULL;
    int none_on_timeout = 0;
    int64_t t, rt_;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OOOOp", kwlist, &idobj,
            &obj, &mt, &rmt, &to, &rto, &none_on_timeout)
        || rkpy_timeout(to, &t) < 0 || rkpy_timeout(rto ? rto : to, &rt_) < 0
        || check_mt(rmt) < 0)
        return NULL;
    const char *id = kid(idobj);
    if (id == NULL || enter(r) < 0)
        return NULL;
    outmsg m;
    if (out_prepare(&m, mt, obj, -1) < 0) {
        leave(r);
        return NULL;
    }
    rk_msg_header h;
    size_t len = 0;
    int rc, sent = 0;
    char *buf = rbuf;
    size_t cap = rcap;
    int64_t first = rt_ < 0 || rt_ > RKPY_SLICE_NS ? RKPY_SLICE_NS : rt_;
    RKPY_WAIT_BEGIN rc
        = rk_send_id(r->rt, id, m.type_id, m.p, m.len, m.prio, t);
    if (rc == RK_OK) {
        sent = 1;
        rc = rk_recv_id(r->rt, id, &h, buf, cap, &len, first);
    }
    RKPY_WAIT_END out_release(&m);
    if (sent && (rc == RK_EMSGSIZE || (rc == RK_ETIMEDOUT && first != rt_))) {
        /* the rest of the wait, in slices, checking signals */
        int64_t rest = rt_ < 0 ? rt_ : rt_ - first;
        rc = recv_sliced(r, id, &h, &len, rest);
    }
    leave(r);
    if (rc < 0)
        return NULL;
    if (sent && (rc == RK_ETIMEDOUT || rc == RK_EEMPTY) && none_on_timeout)
        Py_RETURN_NONE;
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    return payload_value(rmt, &h, rbuf, len, 0);
}

static PyObject *
runtime_recv(PyObject *self, PyObject *args, PyObject *kw)
{
    return do_recv(self, args, kw, 0);
}

static PyObject *
runtime_recv_raw(PyObject *self, PyObject *args, PyObject *kw)
{
    return do_recv(self, args, kw, 1);
}

/* request(kernel_id, obj, mt, reply_mt, timeout_ns=None) */
static PyObject *
runtime_request(PyObject *self, PyObject *args, PyObject *kw)
{
    rkpy_runtime *r = (rkpy_runtime *)self;
    static char *kwlist[]
        = { "kernel_id", "obj", "mt", "reply_mt", "timeout_ns", NULL };
    PyObject *idobj, *obj, *mt = Py_None, *rmt = Py_None, *to = Py_None;
    int64_t t;
    if (!PyArg_ParseTupleAndKeywords(
            args, kw, "OO|OOO", kwlist, &idobj, &obj, &mt, &rmt, &to)
        || rkpy_timeout(to, &t) < 0 || check_mt(rmt) < 0)
        return NULL;
    const char *id = kid(idobj);
    if (id == NULL || enter(r) < 0)
        return NULL;
    rk_kernel k;
    int rc = rk_kernel_lookup(r->rt, id, &k);
    if (rc != RK_OK) {
        leave(r);
        return rkpy_raise(rc, NULL);
    }
    outmsg m;
    if (out_prepare(&m, mt, obj, -1) < 0) {
        leave(r);
        return NULL;
    }
    rk_msg_header h;
    size_t len = 0;
    for (;;) {
        char *buf = rbuf;
        size_t cap = rcap;
        RKPY_WAIT_BEGIN rc = rk_request(
            r->rt, k, m.type_id, m.p, m.len, &h, buf, cap, &len, t);
        RKPY_WAIT_END if (rc != RK_EMSGSIZE || rgrow(len) < 0) break;
        /* The reply is kept for a later call; fetch it with a receive. */
        rc = recv_sliced(r, id, &h, &len, t);
        break;
    }
    out_release(&m);
    leave(r);
    if (rc < 0)
        return NULL;
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    return payload_value(rmt, &h, rbuf, len, 0);
}

static PyObject *
runtime_stats(PyObject *self, PyObject *idobj)
{
    rkpy_runtime *r = (rkpy_runtime *)self;
    const char *id = kid(idobj);
    if (id == NULL || enter(r) < 0)
        return NULL;
    rk_kernel_stats s;
    int rc = rk_kernel_stats_get(r->rt, id, &s);
    leave(r);
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    return Py_BuildValue("{sssKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsdsKsKsK}",
        "state",
        rk_kernel_state_name(s.state), "offered",
        (unsigned long long)s.offered, "processed",
        (unsigned long long)s.processed, "dropped",
        (unsigned long long)s.dropped, "rejected",
        (unsigned long long)s.rejected, "dead_lettered",
        (unsigned long long)s.dead_lettered, "pending",
        (unsigned long long)s.pending, "errors", (unsigned long long)s.errors,
        "restarts", (unsigned long long)s.restarts, "sent",
        (unsigned long long)s.sent, "queue_depth",
        (unsigned long long)s.queue_depth, "queue_high_water",
        (unsigned long long)s.queue_high_water, "latency_count",
        (unsigned long long)s.latency_count, "latency_p50_ns",
        (unsigned long long)s.latency_p50_ns, "latency_p99_ns",
        (unsigned long long)s.latency_p99_ns, "latency_p999_ns",
        (unsigned long long)s.latency_p999_ns, "latency_max_ns",
        (unsigned long long)s.latency_max_ns, "uptime_ns",
        (unsigned long long)s.uptime_ns, "throughput", s.throughput,
        "cpu_time_ns", (unsigned long long)s.cpu_time_ns, "queue_capacity",
        (unsigned long long)s.queue_capacity, "output_capacity",
        (unsigned long long)s.output_capacity);
}

static PyObject *
runtime_telemetry(PyObject *self, PyObject *idobj)
{
    rkpy_runtime *r = (rkpy_runtime *)self;
    const char *id = kid(idobj);
    if (id == NULL || enter(r) < 0)
        return NULL;
    rk_stats *s = malloc(sizeof(*s));
    if (s == NULL) {
        leave(r);
        return PyErr_NoMemory();
    }
    int rc = rk_kernel_telemetry(r->rt, id, s);
    leave(r);
    if (rc != RK_OK) {
        free(s);
        return rkpy_raise(rc, NULL);
    }
    PyObject *d = Py_BuildValue("{sssKsK}", "label", s->label, "start_ns",
        (unsigned long long)s->start_ns, "taken_ns",
        (unsigned long long)s->taken_ns);
    for (size_t i = 0; d != NULL && i < s->ncounters; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(s->counter[i].value);
        if (v == NULL
            || PyDict_SetItemString(d, s->counter[i].desc->name, v) < 0)
            Py_CLEAR(d);
        Py_XDECREF(v);
    }
    for (size_t i = 0; d != NULL && i < s->nlatencies; i++) {
        const rk_latency_summary *l = &s->latency[i].summary;
        PyObject *v = Py_BuildValue("{sKsKsKsKsKsKsKsd}", "count",
            (unsigned long long)l->count, "min_ns",
            (unsigned long long)l->min_ns, "max_ns",
            (unsigned long long)l->max_ns, "p50_ns",
            (unsigned long long)l->p50_ns, "p90_ns",
            (unsigned long long)l->p90_ns, "p99_ns",
            (unsigned long long)l->p99_ns, "p999_ns",
            (unsigned long long)l->p999_ns, "mean_ns", l->mean_ns);
        if (v == NULL
            || PyDict_SetItemString(d, s->latency[i].desc->name, v) < 0)
            Py_CLEAR(d);
        Py_XDECREF(v);
    }
    free(s);
    return d;
}

static PyObject *
runtime_pair(PyObject *self, PyObject *args, int op)
{
    rkpy_runtime *r = (rkpy_runtime *)self;
    const char *a, *b = NULL;
    if (!PyArg_ParseTuple(args, op == 1 ? "s" : "ss", &a, &b) || enter(r) < 0)
        return NULL;
    int rc;
    switch (op) {
    case 0:
        rc = rk_connect(r->rt, a, b);
        break;
    case 1:
        rc = rk_disconnect(r->rt, a);
        break;
    case 2:
        rc = rk_subscribe(r->rt, a, b);
        break;
    default:
        rc = rk_unsubscribe(r->rt, a, b);
    }
    leave(r);
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    Py_RETURN_NONE;
}

BY_OP(runtime_connect, runtime_pair, 0)
BY_OP(runtime_disconnect, runtime_pair, 1)
BY_OP(runtime_subscribe, runtime_pair, 2)
BY_OP(runtime_unsubscribe, runtime_pair, 3)

static PyObject *
runtime_publish(PyObject *self, PyObject *args, PyObject *kw)
{
    rkpy_runtime *r = (rkpy_runtime *)self;
    static char *kwlist[]
        = { "topic", "obj", "mt", "priority", "timeout_ns", NULL };
    const char *topic;
    PyObject *obj, *mt = Py_None, *to = Py_None;
    int prio = -1;
    int64_t t;
    if (!PyArg_ParseTupleAndKeywords(
            args, kw, "sO|OiO", kwlist, &topic, &obj, &mt, &prio, &to)
        || rkpy_timeout(to, &t) < 0 || enter(r) < 0)
        return NULL;
    outmsg m;
    if (out_prepare(&m, mt, obj, prio) < 0) {
        leave(r);
        return NULL;
    }
    size_t delivered = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = rk_publish(
        r->rt, topic, m.type_id, m.p, m.len, m.prio, t, &delivered);
    Py_END_ALLOW_THREADS out_release(&m);
    leave(r);
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    return PyLong_FromSize_t(delivered);
}

static PyObject *
runtime_dead_letter(PyObject *self, PyObject *args)
{
    rkpy_runtime *r = (rkpy_runtime *)self;
    PyObject *to = NULL;
    int64_t t = RK_NO_WAIT;
    if (!PyArg_ParseTuple(args, "|O", &to))
        return NULL;
    if (to != NULL && rkpy_timeout(to, &t) < 0)
        return NULL;
    if (enter(r) < 0)
        return NULL;
    rk_dead_letter dl;
    char *buf = rbuf;
    size_t cap = rcap;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = rk_dead_letter_recv(r->rt, &dl, buf, cap, t);
    Py_END_ALLOW_THREADS leave(r);
    if (rc == RK_ETIMEDOUT)
        Py_RETURN_NONE;
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    size_t n = dl.len < cap ? dl.len : cap;
    return Py_BuildValue("{sssisssIsy#}", "kernel_id", dl.kernel_id, "reason",
        (int)dl.reason, "error", rk_err_name(dl.error), "type_id",
        dl.hdr.type_id, "payload", buf, (Py_ssize_t)n);
}

static PyObject *runtime_output_arm(PyObject *self, PyObject *idobj);

static PyMethodDef runtime_methods[] = {
    { "close", runtime_close, METH_NOARGS,
        "Terminates every kernel and destroys the runtime." },
    { "register_actor", (PyCFunction)(void (*)(void))runtime_register_actor,
        METH_VARARGS | METH_KEYWORDS, "Registers a Python actor kernel." },
    { "launch", runtime_launch, METH_VARARGS, "launch(id)" },
    { "activate", runtime_activate, METH_VARARGS, "activate(id)" },
    { "deactivate", runtime_deactivate, METH_VARARGS, "deactivate(id)" },
    { "terminate", runtime_terminate, METH_VARARGS,
        "terminate(id, timeout_ns)" },
    { "wait", runtime_wait, METH_VARARGS, "wait(id, timeout_ns)" },
    { "state", runtime_state, METH_O, "state(id) -> rk_kernel_state" },
    { "backend", runtime_backend, METH_O,
        "backend(id) -> the name of the backend that runs the kernel" },
    { "lookup", runtime_lookup, METH_O, "lookup(id) -> (slot, gen)" },
    { "send", (PyCFunction)(void (*)(void))runtime_send,
        METH_VARARGS | METH_KEYWORDS, "Host -> kernel." },
    { "send_batch", (PyCFunction)(void (*)(void))runtime_send_batch,
        METH_VARARGS | METH_KEYWORDS, "Host -> kernel, n fixed payloads." },
    { "recv", (PyCFunction)(void (*)(void))runtime_recv,
        METH_VARARGS | METH_KEYWORDS, "Kernel -> host, decoded." },
    { "recv_raw", (PyCFunction)(void (*)(void))runtime_recv_raw,
        METH_VARARGS | METH_KEYWORDS, "Kernel -> host: (bytes, header)." },
    { "send_recv", (PyCFunction)(void (*)(void))runtime_send_recv,
        METH_VARARGS | METH_KEYWORDS,
        "A send and the next receive under one GIL release." },
    { "request", (PyCFunction)(void (*)(void))runtime_request,
        METH_VARARGS | METH_KEYWORDS, "Send and wait for the reply." },
    { "stats", runtime_stats, METH_O, "rk_kernel_stats as a dict" },
    { "telemetry", runtime_telemetry, METH_O, "rk_kernel_telemetry dict" },
    { "connect", runtime_connect, METH_VARARGS, "connect(from, to)" },
    { "disconnect", runtime_disconnect, METH_VARARGS, "disconnect(from)" },
    { "subscribe", runtime_subscribe, METH_VARARGS, "subscribe(id, topic)" },
    { "unsubscribe", runtime_unsubscribe, METH_VARARGS,
        "unsubscribe(id, topic)" },
    { "publish", (PyCFunction)(void (*)(void))runtime_publish,
        METH_VARARGS | METH_KEYWORDS, "publish(topic, obj, mt=None)" },
    { "dead_letter", runtime_dead_letter, METH_VARARGS,
        "dead_letter(timeout_ns=0) -> dict or None" },
    { "output_arm", runtime_output_arm, METH_O,
        "output_arm(id) -> eventfd to wait on (armed), or None: receive" },
    { NULL, NULL, 0, NULL },
};

static PyObject *
runtime_closed(PyObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(((rkpy_runtime *)self)->rt == NULL);
}

static PyGetSetDef runtime_getset[] = {
    { "closed", runtime_closed, NULL, "True after close()", NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject Runtime_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ringkernel._core.Runtime",
    .tp_basicsize = sizeof(rkpy_runtime),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An rk_runtime (see ringkernel.RingKernelRuntime).",
    .tp_new = PyType_GenericNew,
    .tp_init = runtime_init,
    .tp_dealloc = runtime_dealloc,
    .tp_methods = runtime_methods,
    .tp_getset = runtime_getset,
    .tp_weaklistoffset = offsetof(rkpy_runtime, weakrefs),
};

/* ====================================================== async receive */

/*
 * output_arm(kernel_id) -> eventfd or None: the async receive's wait
 * (rk_kernel_output_arm). An int means armed: the event loop waits for the
 * eventfd to be readable (add_reader), reads it and receives with
 * RK_NO_WAIT. None means output is there (or the kernel ended): receive
 * now. Armed, this thread is about to sit in the loop's select, so it no
 * longer counts as running Python for the GIL hint (common.c). Never
 * blocks on the kernel (the consumer lock for at most a few ms).
 */
static PyObject *
runtime_output_arm(PyObject *self, PyObject *idobj)
{
    rkpy_runtime *r = (rkpy_runtime *)self;
    const char *id = kid(idobj);
    if (id == NULL || enter(r) < 0)
        return NULL;
    rk_kernel k;
    int fd = -1;
    int rc = rk_kernel_lookup(r->rt, id, &k);
    if (rc == RK_OK)
        rc = rk_kernel_output_arm(r->rt, k, &fd);
    leave(r);
    if (rc == RK_EALREADY || rc == RK_ESTALE) /* ESTALE: it just ended */
        Py_RETURN_NONE;
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    rkpy_running_end();
    return PyLong_FromLong(fd);
}

/* ---------------------------------------------------------- C kernels */

#include <dlfcn.h>

/* load_library(path): dlopen with RTLD_GLOBAL, so RK_RING_KERNEL
 * definitions in it register with runtimes created afterwards. */
static PyObject *
load_library(PyObject *self, PyObject *arg)
{
    (void)self;
    PyObject *b;
    if (!PyUnicode_FSConverter(arg, &b))
        return NULL;
    void *h;
    const char *path = PyBytes_AS_STRING(b);
    Py_BEGIN_ALLOW_THREADS h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    Py_END_ALLOW_THREADS Py_DECREF(b);
    if (h == NULL)
        return rkpy_raisef(RK_ENOTFOUND, "dlopen: %s", dlerror());
    Py_RETURN_NONE;
}

static PyMethodDef extra_methods[] = {
    { "load_library", load_library, METH_O,
        "dlopen(path, RTLD_GLOBAL): registers its RK_RING_KERNELs." },
    { NULL, NULL, 0, NULL },
};

int
rkpy_runtime_init(PyObject *m)
{
    PyTypeObject *types[] = { &Runtime_Type, &Ctx_Type };
    const char *names[] = { "Runtime", "Ctx" };
    for (int i = 0; i < 2; i++) {
        if (PyType_Ready(types[i]) < 0)
            return -1;
        Py_INCREF(types[i]);
        if (PyModule_AddObject(m, names[i], (PyObject *)types[i]) < 0) {
            Py_DECREF(types[i]);
            return -1;
        }
    }
    return PyModule_AddFunctions(m, extra_methods);
}
