/*
 * runtime_io.c - the Runtime's message calls: send, send_batch, recv,
 * recv_raw, send_recv, request, publish, the dead-letter queue and the
 * kernel stats and telemetry. Every call that waits releases the GIL; a
 * blocking receive waits in slices of RKPY_SLICE_NS and checks for
 * signals between them (runtime.c has the whole picture).
 */
#include "rkpy.h"
#include "rkpy_runtime.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RKPY_SLICE_NS ((int64_t)50 * 1000 * 1000)

/* The start of a call that sends obj to kernel idobj: *id, m prepared
 * (rkpy_out_prepare with mt and prio) and the caller counted in
 * (rkpy_rt_enter). 0, or -1 with an exception set and nothing held. */
static int
out_begin(rkpy_runtime *r, PyObject *idobj, PyObject *obj, PyObject *mt,
    int prio, const char **id, outmsg *m)
{
    *id = rkpy_kid(idobj);
    if (*id == NULL || rkpy_rt_enter(r) < 0)
        return -1;
    if (rkpy_out_prepare(m, mt, obj, prio) < 0) {
        rkpy_rt_leave(r);
        return -1;
    }
    return 0;
}

/* send(kernel_id, obj, mt=None, priority=-1, timeout_ns=None, type_id=0) */
PyObject *
rkpy_runtime_send(PyObject *self, PyObject *args, PyObject *kw)
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
        mt = rkpy_auto_mt(obj);
    const char *id;
    outmsg m;
    if (out_begin(r, idobj, obj, mt, prio, &id, &m) < 0)
        return NULL;
    if (m.type_id == 0)
        m.type_id = (uint32_t)type_id;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc
        = rk_send_id(r->rt, id, m.type_id, m.p, m.len, m.prio, t);
    Py_END_ALLOW_THREADS rkpy_out_release(&m);
    rkpy_rt_leave(r);
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    Py_RETURN_NONE;
}

/* send_batch(kernel_id, data, itemsize, type_id=0, priority=128,
 * timeout_ns=None) -> number sent: n payloads back to back in one buffer
 * (a numpy structured array of a fixed-layout type), one wake-up. */
PyObject *
rkpy_runtime_send_batch(PyObject *self, PyObject *args, PyObject *kw)
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
    const char *id = rkpy_kid(idobj);
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
    if (rkpy_rt_enter(r) < 0) {
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
    rkpy_rt_leave(r);
    PyBuffer_Release(&v);
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    return PyLong_FromSize_t(sent);
}

/*
 * Receives into rkpy_rbuf in slices, checking signals between slices. Returns
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
        char *buf = rkpy_rbuf;
        size_t cap = rkpy_rcap;
        if (slice == RK_NO_WAIT) {
            /* Never blocks: no GIL release (and no hand-off) needed. */
            rc = rk_recv_id(r->rt, id, h, buf, cap, len, RK_NO_WAIT);
        } else {
            RKPY_WAIT_BEGIN rc
                = rk_recv_id(r->rt, id, h, buf, cap, len, slice);
            RKPY_WAIT_END
        }
        if (rc == RK_EMSGSIZE) {
            if (rkpy_rgrow(*len) < 0)
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
        || rkpy_timeout(to, &t) < 0 || rkpy_check_mt(mt) < 0)
        return NULL;
    const char *id = rkpy_kid(idobj);
    if (id == NULL || rkpy_rt_enter(r) < 0)
        return NULL;
    rk_msg_header h;
    size_t len = 0;
    int rc = recv_sliced(r, id, &h, &len, t);
    rkpy_rt_leave(r);
    if (rc < 0)
        return NULL;
    if ((rc == RK_ETIMEDOUT || rc == RK_EEMPTY) && none_on_timeout)
        Py_RETURN_NONE;
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    return rkpy_payload_value(mt, &h, rkpy_rbuf, len, raw);
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
PyObject *
rkpy_runtime_send_recv(PyObject *self, PyObject *args, PyObject *kw)
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
        || rkpy_check_mt(rmt) < 0)
        return NULL;
    const char *id;
    outmsg m;
    if (out_begin(r, idobj, obj, mt, -1, &id, &m) < 0)
        return NULL;
    rk_msg_header h;
    size_t len = 0;
    int rc, sent = 0;
    char *buf = rkpy_rbuf;
    size_t cap = rkpy_rcap;
    int64_t first = rt_ < 0 || rt_ > RKPY_SLICE_NS ? RKPY_SLICE_NS : rt_;
    RKPY_WAIT_BEGIN rc
        = rk_send_id(r->rt, id, m.type_id, m.p, m.len, m.prio, t);
    if (rc == RK_OK) {
        sent = 1;
        rc = rk_recv_id(r->rt, id, &h, buf, cap, &len, first);
    }
    RKPY_WAIT_END rkpy_out_release(&m);
    if (sent && (rc == RK_EMSGSIZE || (rc == RK_ETIMEDOUT && first != rt_))) {
        /* the rest of the wait, in slices, checking signals */
        int64_t rest = rt_ < 0 ? rt_ : rt_ - first;
        rc = recv_sliced(r, id, &h, &len, rest);
    }
    rkpy_rt_leave(r);
    if (rc < 0)
        return NULL;
    if (sent && (rc == RK_ETIMEDOUT || rc == RK_EEMPTY) && none_on_timeout)
        Py_RETURN_NONE;
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    return rkpy_payload_value(rmt, &h, rkpy_rbuf, len, 0);
}

PyObject *
rkpy_runtime_recv(PyObject *self, PyObject *args, PyObject *kw)
{
    return do_recv(self, args, kw, 0);
}

PyObject *
rkpy_runtime_recv_raw(PyObject *self, PyObject *args, PyObject *kw)
{
    return do_recv(self, args, kw, 1);
}

/* request(kernel_id, obj, mt, reply_mt, timeout_ns=None) */
PyObject *
rkpy_runtime_request(PyObject *self, PyObject *args, PyObject *kw)
{
    rkpy_runtime *r = (rkpy_runtime *)self;
    static char *kwlist[]
        = { "kernel_id", "obj", "mt", "reply_mt", "timeout_ns", NULL };
    PyObject *idobj, *obj, *mt = Py_None, *rmt = Py_None, *to = Py_None;
    int64_t t;
    if (!PyArg_ParseTupleAndKeywords(
            args, kw, "OO|OOO", kwlist, &idobj, &obj, &mt, &rmt, &to)
        || rkpy_timeout(to, &t) < 0 || rkpy_check_mt(rmt) < 0)
        return NULL;
    const char *id = rkpy_kid(idobj);
    if (id == NULL || rkpy_rt_enter(r) < 0)
        return NULL;
    rk_kernel k;
    int rc = rk_kernel_lookup(r->rt, id, &k);
    if (rc != RK_OK) {
        rkpy_rt_leave(r);
        return rkpy_raise(rc, NULL);
    }
    outmsg m;
    if (rkpy_out_prepare(&m, mt, obj, -1) < 0) {
        rkpy_rt_leave(r);
        return NULL;
    }
    rk_msg_header h;
    size_t len = 0;
    for (;;) {
        char *buf = rkpy_rbuf;
        size_t cap = rkpy_rcap;
        RKPY_WAIT_BEGIN rc = rk_request(
            r->rt, k, m.type_id, m.p, m.len, &h, buf, cap, &len, t);
        RKPY_WAIT_END if (rc != RK_EMSGSIZE || rkpy_rgrow(len) < 0) break;
        /* The reply is kept for a later call; fetch it with a receive. */
        rc = recv_sliced(r, id, &h, &len, t);
        break;
    }
    rkpy_out_release(&m);
    rkpy_rt_leave(r);
    if (rc < 0)
        return NULL;
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    return rkpy_payload_value(rmt, &h, rkpy_rbuf, len, 0);
}

PyObject *
rkpy_runtime_stats(PyObject *self, PyObject *idobj)
{
    rk_kernel_stats s;
    RKPY_KERNEL_GET(self, idobj, rk_kernel_stats_get, &s);
    return Py_BuildValue("{sssKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsdsKsKsKsKsK}",
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
        (unsigned long long)s.output_capacity, "direct_calls",
        (unsigned long long)s.direct_calls, "relay_handoffs",
        (unsigned long long)s.relay_handoffs);
}

PyObject *
rkpy_runtime_telemetry(PyObject *self, PyObject *idobj)
{
    rkpy_runtime *r = (rkpy_runtime *)self;
    const char *id = rkpy_kid(idobj);
    if (id == NULL || rkpy_rt_enter(r) < 0)
        return NULL;
    rk_stats *s = malloc(sizeof(*s));
    if (s == NULL) {
        rkpy_rt_leave(r);
        return PyErr_NoMemory();
    }
    int rc = rk_kernel_telemetry(r->rt, id, s);
    rkpy_rt_leave(r);
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

PyObject *
rkpy_runtime_publish(PyObject *self, PyObject *args, PyObject *kw)
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
        || rkpy_timeout(to, &t) < 0 || rkpy_rt_enter(r) < 0)
        return NULL;
    outmsg m;
    if (rkpy_out_prepare(&m, mt, obj, prio) < 0) {
        rkpy_rt_leave(r);
        return NULL;
    }
    size_t delivered = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = rk_publish(
        r->rt, topic, m.type_id, m.p, m.len, m.prio, t, &delivered);
    Py_END_ALLOW_THREADS rkpy_out_release(&m);
    rkpy_rt_leave(r);
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    return PyLong_FromSize_t(delivered);
}

PyObject *
rkpy_runtime_dead_letter(PyObject *self, PyObject *args)
{
    rkpy_runtime *r = (rkpy_runtime *)self;
    PyObject *to = NULL;
    int64_t t = RK_NO_WAIT;
    if (!PyArg_ParseTuple(args, "|O", &to))
        return NULL;
    if (to != NULL && rkpy_timeout(to, &t) < 0)
        return NULL;
    if (rkpy_rt_enter(r) < 0)
        return NULL;
    rk_dead_letter dl;
    char *buf = rkpy_rbuf;
    size_t cap = rkpy_rcap;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = rk_dead_letter_recv(r->rt, &dl, buf, cap, t);
    Py_END_ALLOW_THREADS rkpy_rt_leave(r);
    if (rc == RK_ETIMEDOUT)
        Py_RETURN_NONE;
    if (rc != RK_OK)
        return rkpy_raise(rc, NULL);
    size_t n = dl.len < cap ? dl.len : cap;
    return Py_BuildValue("{sssisssIsy#}", "kernel_id", dl.kernel_id, "reason",
        (int)dl.reason, "error", rk_err_name(dl.error), "type_id",
        dl.hdr.type_id, "payload", buf, (Py_ssize_t)n);
}
