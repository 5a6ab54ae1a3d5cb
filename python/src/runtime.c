/*
 * runtime.c - Runtime: the C runtime seen from Python. Ctx and the Python
 * actor trampoline are in ctx.c, the Runtime's message calls (send,
 * receive, request, publish, stats) in runtime_io.c; rkpy_runtime.h has
 * what the three share.
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
#include "rkpy_runtime.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static PyTypeObject Runtime_Type;

/* Thread-local receive buffer, grown on RK_EMSGSIZE. */
_Thread_local char *rkpy_rbuf;
_Thread_local size_t rkpy_rcap;

int
rkpy_rgrow(size_t need)
{
    if (need <= rkpy_rcap)
        return 0;
    size_t n = rkpy_rcap ? rkpy_rcap : 65536;
    while (n < need)
        n *= 2;
    char *p = realloc(rkpy_rbuf, n);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    rkpy_rbuf = p;
    rkpy_rcap = n;
    return 0;
}

/* Checks the runtime is usable; on success counts the caller in. */
int
rkpy_rt_enter(rkpy_runtime *self)
{
    if (rkpy_forked(self->pid))
        return -1;
    if (self->rt == NULL || atomic_load(&self->closing)) {
        rkpy_raise(RK_ECLOSED, "the runtime is closed");
        return -1;
    }
    if (rkpy_rgrow(65536) < 0)
        return -1;
    atomic_fetch_add(&self->inflight, 1);
    return 0;
}

void
rkpy_rt_leave(rkpy_runtime *self)
{
    atomic_fetch_sub(&self->inflight, 1);
}

const char *
rkpy_kid(PyObject *o)
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

/* The payload in rkpy_rbuf as a Python value: decoded with mt, else bytes. */
PyObject *
rkpy_payload_value(
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

int
rkpy_check_mt(PyObject *mt)
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
PyObject *
rkpy_auto_mt(PyObject *obj)
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

int
rkpy_out_prepare(outmsg *m, PyObject *mt, PyObject *obj, int prio)
{
    m->have_view = 0;
    memset(&m->corr, 0, sizeof(m->corr));
    if (rkpy_check_mt(mt) < 0)
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

void
rkpy_out_release(outmsg *m)
{
    if (m->have_view)
        PyBuffer_Release(&m->view);
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
    if (rkpy_tls_kernel_rt == r->rt)
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
        pyactor_free_strings(pa);
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
        "telemetry_off", "spin", "backend", "device_source", "device_entry",
        "device_source_name", "grid_size", "block_size", "device_link_ptx",
        "device", "device_barrier", "device_barrier_parties", NULL };
    const char *id, *backend = NULL, *dsrc = NULL, *dentry = NULL;
    const char *dname = NULL, *dptx = NULL, *dbar = NULL;
    PyObject *fn, *in_mt = Py_None, *out_mt = Py_None;
    unsigned int icap = 0, ocap = 0, maxp = 0, mr = 0, spin = 0;
    unsigned int grid = 0, block = 0, parties = 0;
    int bp = 0, wi = 0, restart = 0, bands = 0, toff = 0, device = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO|OOIIIiiiIppIzzzzIIzizI",
            kwlist, &id, &fn, &in_mt, &out_mt, &icap, &ocap, &maxp, &bp, &wi,
            &restart, &mr, &bands, &toff, &spin, &backend, &dsrc, &dentry,
            &dname, &grid, &block, &dptx, &device, &dbar, &parties))
        return NULL;
    if (rkpy_check_mt(in_mt) < 0 || rkpy_check_mt(out_mt) < 0)
        return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "fn must be callable");
        return NULL;
    }
    if (rkpy_rt_enter(r) < 0)
        return NULL;
    pyactor *pa = calloc(1, sizeof(*pa));
    if (pa == NULL) {
        rkpy_rt_leave(r);
        return PyErr_NoMemory();
    }
    rk_kernel_def def;
    memset(&def, 0, sizeof(def));
    def.id = id;
    def.actor = rkpy_py_actor;
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
    /* A device actor (docs/python.md): its CUDA C handler runs on the
     * cuda backend, fn on the cpu one. The runtime keeps pointers to the
     * strings, so the pyactor owns copies until the runtime is closed. */
    def.config.backend = backend;
    def.config.grid_size = grid;
    def.config.block_size = block;
    /* The device ordinal and the named barrier: the cuda backend's (the
     * cpu backend ignores them); the barrier's name is kept like the
     * source. */
    def.config.device = device;
    def.config.device_barrier_parties = parties;
    int rc = RK_OK;
    if ((dsrc != NULL
            && ((pa->dev_src = strdup(dsrc)) == NULL
                || (dentry != NULL
                    && (pa->dev_entry = strdup(dentry)) == NULL)
                || (dname != NULL && (pa->dev_name = strdup(dname)) == NULL)
                || (dptx != NULL && (pa->dev_ptx = strdup(dptx)) == NULL)))
        || (dbar != NULL && (pa->dev_bar = strdup(dbar)) == NULL)) {
        rc = RK_ENOMEM;
        rkpy_raise(rc, "no memory for the device source");
    }
    def.config.device_barrier = pa->dev_bar;
    def.config.device_source = pa->dev_src;
    def.config.device_entry = pa->dev_entry;
    def.config.device_source_name = pa->dev_name;
    def.config.device_link_ptx = pa->dev_ptx;
    if (rc == RK_OK && (rc = rk_runtime_register(r->rt, &def)) != RK_OK)
        rkpy_raise(rc, NULL);
    rkpy_rt_leave(r);
    if (rc != RK_OK) {
        pyactor_free_strings(pa);
        free(pa);
        return NULL;
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
    const char *id = rkpy_kid(idobj);
    if (id == NULL || rkpy_rt_enter(r) < 0)
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
    Py_END_ALLOW_THREADS rkpy_rt_leave(r);
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
    rk_kernel_state st;
    RKPY_KERNEL_GET(self, idobj, rk_kernel_state_get, &st);
    return PyLong_FromLong((long)st);
}

/* The backend that runs the kernel ("cpu", "cuda"): the one its
 * registration chose (rk_kernel_config_get). */
static PyObject *
runtime_backend(PyObject *self, PyObject *idobj)
{
    rk_kernel_config cfg;
    RKPY_KERNEL_GET(self, idobj, rk_kernel_config_get, &cfg);
    return PyUnicode_FromString(cfg.backend != NULL ? cfg.backend : "");
}

static PyObject *
runtime_lookup(PyObject *self, PyObject *idobj)
{
    rk_kernel k;
    RKPY_KERNEL_GET(self, idobj, rk_kernel_lookup, &k);
    return Py_BuildValue("(II)", k.slot, k.gen);
}

static PyObject *
runtime_pair(PyObject *self, PyObject *args, int op)
{
    rkpy_runtime *r = (rkpy_runtime *)self;
    const char *a, *b = NULL;
    if (!PyArg_ParseTuple(args, op == 1 ? "s" : "ss", &a, &b)
        || rkpy_rt_enter(r) < 0)
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
    rkpy_rt_leave(r);
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    Py_RETURN_NONE;
}

BY_OP(runtime_connect, runtime_pair, 0)
BY_OP(runtime_disconnect, runtime_pair, 1)
BY_OP(runtime_subscribe, runtime_pair, 2)
BY_OP(runtime_unsubscribe, runtime_pair, 3)

static PyObject *runtime_output_arm(PyObject *self, PyObject *idobj);

static PyMethodDef runtime_methods[] = {
    { "close", runtime_close, METH_NOARGS,
        "Terminates every kernel and destroys the runtime." },
    { "register_actor", RKPY_KW(runtime_register_actor),
        "Registers a Python actor kernel." },
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
    { "send", RKPY_KW(rkpy_runtime_send), "Host -> kernel." },
    { "send_batch", RKPY_KW(rkpy_runtime_send_batch),
        "Host -> kernel, n fixed payloads." },
    { "recv", RKPY_KW(rkpy_runtime_recv), "Kernel -> host, decoded." },
    { "recv_raw", RKPY_KW(rkpy_runtime_recv_raw),
        "Kernel -> host: (bytes, header)." },
    { "send_recv", RKPY_KW(rkpy_runtime_send_recv),
        "A send and the next receive under one GIL release." },
    { "request", RKPY_KW(rkpy_runtime_request),
        "Send and wait for the reply." },
    { "stats", rkpy_runtime_stats, METH_O, "rk_kernel_stats as a dict" },
    { "telemetry", rkpy_runtime_telemetry, METH_O,
        "rk_kernel_telemetry dict" },
    { "connect", runtime_connect, METH_VARARGS, "connect(from, to)" },
    { "disconnect", runtime_disconnect, METH_VARARGS, "disconnect(from)" },
    { "subscribe", runtime_subscribe, METH_VARARGS, "subscribe(id, topic)" },
    { "unsubscribe", runtime_unsubscribe, METH_VARARGS,
        "unsubscribe(id, topic)" },
    { "publish", RKPY_KW(rkpy_runtime_publish),
        "publish(topic, obj, mt=None)" },
    { "dead_letter", rkpy_runtime_dead_letter, METH_VARARGS,
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
    RKPY_TYPE_HEAD("Runtime", rkpy_runtime,
        "An rk_runtime (see ringkernel.RingKernelRuntime)."),
    RKPY_TYPE_NEW(runtime_init, runtime_dealloc),
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
    const char *id = rkpy_kid(idobj);
    if (id == NULL || rkpy_rt_enter(r) < 0)
        return NULL;
    rk_kernel k;
    int fd = -1;
    int rc = rk_kernel_lookup(r->rt, id, &k);
    if (rc == RK_OK)
        rc = rk_kernel_output_arm(r->rt, k, &fd);
    rkpy_rt_leave(r);
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
    return rkpy_module_add(m, &Runtime_Type, &rkpy_Ctx_Type, extra_methods);
}