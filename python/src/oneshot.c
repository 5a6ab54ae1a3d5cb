/*
 * oneshot.c - OneShot (an rk_oneshot: a one-shot kernel of CUDA C and/or a
 * Python host fallback) and Launch (an rk_oneshot_done: a started launch
 * to wait on). ringkernel/oneshot.py wraps them as RawKernel; a Python
 * actor's Ctx.execute_kernel (ctx.c) launches through rkpy_oneshot_launch
 * here, over rk_ctx_execute_kernel.
 *
 * The host fallback is a Python callable, called by the C trampoline
 * host_tramp with the GIL taken, on the thread the cpu backend runs the
 * launch on (the caller's, or a started launch's own). On the cpu backend
 * the launch's by-value arguments are an 8-byte token, the Python layer's
 * key for the launch's Python arguments, not a device struct: the cpu
 * backend hands them to the fallback unread (oneshot.py packs them).
 *
 * Ownership: a OneShot owns its rk_oneshot. A Launch holds references to
 * its OneShot and to the launch's Buffer objects, and counts itself as a
 * user of each (Buffer.free() refuses while one is counted), so nothing a
 * launch reads is freed before it completed. Every launch releases the
 * GIL while it runs or waits.
 */
#include "rkpy.h"

#include <string.h>

typedef struct rkpy_oneshot {
    PyObject_HEAD rk_oneshot *k;
    PyObject *host; /* host(token, grid, block) -> int, or NULL */
} rkpy_oneshot;

typedef struct rkpy_launch {
    PyObject_HEAD rk_oneshot_done *d;
    PyObject *kernel; /* the OneShot */
    PyObject *bufs;   /* tuple of the Buffers, counted as in use */
} rkpy_launch;

static PyTypeObject OneShot_Type;
static PyTypeObject Launch_Type;

/* The cpu backend's call of a Python fallback: host(token, grid, block)
 * must return an RK_* code (oneshot.py's wrapper keeps the fallback's
 * exception for the caller and returns RK_EINTERNAL for it). */
static int
host_tramp(const rk_oneshot_host_args *a)
{
    rkpy_oneshot *o = a->user;
    unsigned long long token = 0;
    int rc = RK_EINTERNAL;

    if (a->args_len == sizeof(token))
        memcpy(&token, a->args, sizeof(token));
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *r = PyObject_CallFunction(o->host, "KII", token,
        (unsigned int)a->grid, (unsigned int)a->block);
    if (r != NULL && PyLong_Check(r))
        rc = (int)PyLong_AsLong(r);
    if (PyErr_Occurred())
        PyErr_WriteUnraisable(o->host);
    Py_XDECREF(r);
    PyGILState_Release(g);
    return rc;
}

/* OneShot(name, source=None, entry=None, source_name=None, host=None,
 *         backend=None, cooperative=False, device=0): rk_oneshot_create,
 * which picks the backend and (cuda) compiles and loads the code on CUDA
 * device `device` (0: RK_CUDA_DEVICE's, else 0), GIL released. */
static int
oneshot_init(PyObject *self, PyObject *args, PyObject *kw)
{
    rkpy_oneshot *o = (rkpy_oneshot *)self;
    static char *kwlist[] = { "name", "source", "entry", "source_name",
        "host", "backend", "cooperative", "device", NULL };
    const char *name, *source = NULL, *entry = NULL, *sname = NULL;
    const char *backend = NULL;
    PyObject *host = Py_None;
    int coop = 0, rc, device = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|zzzOzpi", kwlist, &name,
            &source, &entry, &sname, &host, &backend, &coop, &device))
        return -1;
    if (o->k != NULL) {
        PyErr_SetString(PyExc_TypeError, "OneShot is already initialised");
        return -1;
    }
    if (host != Py_None && !PyCallable_Check(host)) {
        PyErr_SetString(PyExc_TypeError, "host must be callable or None");
        return -1;
    }
    Py_XSETREF(o->host, host != Py_None ? Py_NewRef(host) : NULL);
    rk_oneshot_def d = { .name = name,
        .source = source,
        .entry = entry,
        .source_name = sname,
        .cooperative = coop != 0,
        .host = o->host != NULL ? host_tramp : NULL,
        .user = o,
        .backend = backend,
        .device = device };
    rk_oneshot *k = NULL;
    Py_BEGIN_ALLOW_THREADS rc = rk_oneshot_create(&d, &k);
    Py_END_ALLOW_THREADS if (rc != RK_OK)
    {
        rkpy_raise(rc, NULL);
        return -1;
    }
    o->k = k;
    return 0;
}

static void
oneshot_dealloc(PyObject *self)
{
    rkpy_oneshot *o = (rkpy_oneshot *)self;
    rk_oneshot_destroy(o->k); /* every Launch of it holds a reference */
    Py_XDECREF(o->host);
    Py_TYPE(self)->tp_free(self);
}

/* k's rk_oneshot, or NULL with TypeError for another object. */
static rk_oneshot *
oneshot_of(PyObject *k)
{
    if (!PyObject_TypeCheck(k, &OneShot_Type)) {
        PyErr_Format(PyExc_TypeError, "a OneShot needed, not %s",
            Py_TYPE(k)->tp_name);
        return NULL;
    }
    return ((rkpy_oneshot *)k)->k;
}

static PyObject *
oneshot_backend(PyObject *self, PyObject *k)
{
    (void)self;
    rk_oneshot *o = oneshot_of(k);
    return o != NULL ? PyUnicode_FromString(rk_oneshot_backend(o)) : NULL;
}

static PyObject *
oneshot_device(PyObject *self, PyObject *k)
{
    (void)self;
    rk_oneshot *o = oneshot_of(k);
    return o != NULL ? PyLong_FromLong(rk_oneshot_device(o)) : NULL;
}

/* Gives back the buffers of a launch (rkpy_buffer_use). */
static void
bufs_release(PyObject *bufs)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(bufs); i++)
        rkpy_buffer_use(PyTuple_GET_ITEM(bufs, i), -1, NULL);
}

/* The launch's buffers as a tuple, each counted as in use, with their
 * rk_buffers in out (at most RK_ONESHOT_MAX_BUFS: oneshot.py refuses more
 * first, naming the kernel). */
static PyObject *
bufs_take(PyObject *seq, rk_buffer **out, size_t *n)
{
    PyObject *t = PySequence_Tuple(seq);
    if (t == NULL)
        return NULL;
    Py_ssize_t len = PyTuple_GET_SIZE(t), i;
    if (len > RK_ONESHOT_MAX_BUFS) {
        Py_DECREF(t);
        return rkpy_raisef(RK_EINVAL,
            "a one-shot launch passes at most %d buffers, not %zd",
            RK_ONESHOT_MAX_BUFS, len);
    }
    for (i = 0; i < len; i++)
        if (rkpy_buffer_use(PyTuple_GET_ITEM(t, i), 1, &out[i]) < 0)
            break;
    if (i < len) {
        while (i-- > 0)
            rkpy_buffer_use(PyTuple_GET_ITEM(t, i), -1, NULL);
        Py_DECREF(t);
        return NULL;
    }
    *n = (size_t)len;
    return t;
}

PyObject *
rkpy_oneshot_launch(rk_ctx *ctx, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = { "kernel", "grid", "block", "args", "bufs",
        "start", NULL };
    unsigned int grid, block;
    Py_buffer a;
    PyObject *kernel, *seq, *bufs;
    int start = 0, rc;
    rk_buffer *b[RK_ONESHOT_MAX_BUFS];
    rk_oneshot_done *d = NULL;
    rk_oneshot_launch l;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!IIy*O|p", kwlist,
            &OneShot_Type, &kernel, &grid, &block, &a, &seq, &start))
        return NULL;
    memset(&l, 0, sizeof(l));
    if ((bufs = bufs_take(seq, b, &l.nbuf)) == NULL) {
        PyBuffer_Release(&a);
        return NULL;
    }
    l.grid = grid;
    l.block = block;
    l.args = a.buf;
    l.args_len = (size_t)a.len;
    l.bufs = b;
    rk_oneshot *k = ((rkpy_oneshot *)kernel)->k;
    /* A started launch copies the arguments; a run is over when it
     * returns: either way a is not needed afterwards. */
    Py_BEGIN_ALLOW_THREADS if (ctx != NULL) rc
        = rk_ctx_execute_kernel(ctx, k, &l, start ? &d : NULL);
    else rc = start ? rk_oneshot_start(k, &l, &d) : rk_oneshot_run(k, &l);
    Py_END_ALLOW_THREADS PyBuffer_Release(&a);
    if (rc != RK_OK || !start) {
        bufs_release(bufs);
        Py_DECREF(bufs);
        if (rc != RK_OK)
            return rkpy_raise(rc, NULL);
        Py_RETURN_NONE;
    }
    rkpy_launch *r = PyObject_New(rkpy_launch, &Launch_Type);
    if (r == NULL) {
        Py_BEGIN_ALLOW_THREADS rk_oneshot_done_free(d);
        Py_END_ALLOW_THREADS bufs_release(bufs);
        Py_DECREF(bufs);
        return NULL;
    }
    r->d = d;
    r->kernel = Py_NewRef(kernel);
    r->bufs = bufs;
    return (PyObject *)r;
}

static PyTypeObject OneShot_Type = {
    RKPY_TYPE_HEAD("OneShot", rkpy_oneshot,
        "A one-shot kernel (rk_oneshot): CUDA C and/or a host fallback."),
    RKPY_TYPE_NEW(oneshot_init, oneshot_dealloc),
};

/* ============================================================ Launch */

/* oneshot_wait(launch, timeout_ns=None): the launch's result (None, or its
 * error raised); QueueTimeoutError (RK_ETIMEDOUT) while it still runs. */
static PyObject *
launch_wait(PyObject *self, PyObject *args)
{
    PyObject *l, *to = Py_None;
    int64_t t;
    int rc;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!|O", &Launch_Type, &l, &to)
        || rkpy_timeout(to, &t) < 0)
        return NULL;
    rkpy_launch *r = (rkpy_launch *)l;
    Py_BEGIN_ALLOW_THREADS rc = rk_oneshot_wait(r->d, t);
    Py_END_ALLOW_THREADS if (rc != RK_OK) return rkpy_raise(rc, NULL);
    Py_RETURN_NONE;
}

static void
launch_dealloc(PyObject *self)
{
    rkpy_launch *r = (rkpy_launch *)self;
    /* Waits for the launch (a host fallback it runs takes the GIL). */
    Py_BEGIN_ALLOW_THREADS rk_oneshot_done_free(r->d);
    Py_END_ALLOW_THREADS bufs_release(r->bufs);
    Py_DECREF(r->bufs);
    Py_DECREF(r->kernel);
    PyObject_Free(self);
}

static PyTypeObject Launch_Type = {
    RKPY_TYPE_HEAD("Launch", rkpy_launch,
        "A started one-shot launch (rk_oneshot_done): oneshot_wait(it)."),
    .tp_dealloc = launch_dealloc,
};

/* oneshot_launch(kernel, grid, block, args, bufs, start=False):
 * rk_oneshot_run (None), or rk_oneshot_start and a Launch. */
static PyObject *
oneshot_launch(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    return rkpy_oneshot_launch(NULL, args, kw);
}

static PyMethodDef oneshot_functions[] = {
    { "oneshot_backend", oneshot_backend, METH_O,
        "oneshot_backend(kernel): the backend that runs it (\"cpu\", "
        "\"cuda\")." },
    { "oneshot_device", oneshot_device, METH_O,
        "oneshot_device(kernel): the CUDA device ordinal that runs it, or "
        "-1 (cpu)." },
    { "oneshot_launch", RKPY_KW(oneshot_launch),
        "oneshot_launch(kernel, grid, block, args, bufs, start=False): "
        "runs it (None), or starts it (a Launch)." },
    { "oneshot_wait", launch_wait, METH_VARARGS,
        "oneshot_wait(launch, timeout_ns=None): the launch's result; "
        "RK_ETIMEDOUT while it runs." },
    { NULL, NULL, 0, NULL },
};

int
rkpy_oneshot_init(PyObject *m)
{
    return rkpy_module_add(m, &Launch_Type, &OneShot_Type, oneshot_functions);
}
