/*
 * common.c - what every part of ringkernel._core shares: the error bridge
 * (RK_E* code + detail -> the exception class errors.py builds), timeouts,
 * UUIDs, the fork check, numpy.frombuffer. Calls nothing of the parts
 * above it (module.c, runtime*.c, ctx.c, msgtype*.c, buffer.c).
 *
 * Errors: ringkernel/errors.py builds one exception class per RK_E* code
 * (grouped in families) and hands the extension a factory through
 * _set_error_factory(); every failure calls it with the code, its C name,
 * its message and the detail text, so the C error name and the detail
 * (rk_errdetail()) reach the user unchanged.
 */
#include "rkpy.h"

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static PyObject *error_factory; /* owned; set by errors.py */
static PyObject *uuid_class;    /* owned: uuid.UUID */
static PyObject *str_bytes;     /* owned: "bytes" */
static PyObject *str_int, *str_is_safe, *safe_unknown, *empty_tuple;
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

/* The GIL hand-off spin's settings (defined below with the spin). */
static _Atomic uint64_t gil_spin_max_ns;
static _Atomic uint64_t gil_budget_ns;
static pthread_key_t slot_key;
static void slot_release(void *v);

/* Forks into this process: getpid() is a system call (glibc no longer
 * caches it), so the per-call check compares pids only in a process that
 * was forked (the counter is incremented in the child). */
static _Atomic unsigned forks;

static void
forked_child(void)
{
    atomic_fetch_add_explicit(&forks, 1, memory_order_relaxed);
}

int
rkpy_forked(pid_t pid)
{
    if (atomic_load_explicit(&forks, memory_order_relaxed) == 0
        || getpid() == pid)
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
        /* The 128-bit int of the UUID, big-endian, in one call. */
#if PY_VERSION_HEX >= 0x030d0000
    PyObject *v = PyLong_FromUnsignedNativeBytes(u->b, sizeof(u->b),
        Py_ASNATIVEBYTES_BIG_ENDIAN | Py_ASNATIVEBYTES_UNSIGNED_BUFFER);
#else
    PyObject *v = _PyLong_FromByteArray(u->b, sizeof(u->b), 0, 0);
#endif
    PyObject *r = NULL;
    if (v != NULL) {
        r = PyBaseObject_Type.tp_new(
            (PyTypeObject *)uuid_class, empty_tuple, NULL);
        if (r != NULL
            && (PyObject_GenericSetAttr(r, str_int, v) < 0
                || PyObject_GenericSetAttr(r, str_is_safe, safe_unknown) < 0))
            Py_CLEAR(r);
    }
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
    const char *spin = getenv("RINGKERNEL_GIL_SPIN_US");
    if (spin != NULL && *spin != '\0') {
        atomic_store(
            &gil_spin_max_ns, (uint64_t)strtoull(spin, NULL, 10) * 1000);
        atomic_store(&gil_budget_ns, atomic_load(&gil_spin_max_ns));
    }
    if (pthread_key_create(&slot_key, slot_release) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "pthread_key_create failed");
        return -1;
    }
    if (pthread_atfork(NULL, NULL, forked_child) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "pthread_atfork failed");
        return -1;
    }
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
    if (uuid_class == NULL || str_bytes == NULL || safe_unknown == NULL
        || str_int == NULL || str_is_safe == NULL || empty_tuple == NULL)
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

/* ------------------------------------------------------ GIL hand-offs */

/*
 * Two Python threads that pass messages to each other (the host and a
 * Python actor) each need the GIL for their part of a round trip. When the
 * wait of one ends (its message came) while the other still runs Python,
 * PyEval_RestoreThread sleeps on the GIL's condition variable until the
 * holder releases it: a futex sleep and wake-up of several microseconds
 * on a VM, and often the holder takes the GIL straight back after a short
 * release, so the woken thread sleeps again (measured before this: 6.4
 * futex calls and 1.4 context switches per round trip of the seeds' actor
 * loop, 30-50 us; docs/python.md).
 *
 * So the extension keeps a hint of which threads run Python: a thread
 * counts from the end of one of its waits (rkpy_wait_end, or the start of
 * a Python actor) to the start of its next (rkpy_wait_begin). A thread
 * whose wait has ended spins, with the GIL still released, while another
 * counted thread runs, for at most a budget (adaptive, up to
 * RINGKERNEL_GIL_SPIN_US), and a thread counts only for that maximum
 * after it began to run; then it takes the GIL as always. Short GIL releases
 * that are not waits (a send, should_terminate) leave the count alone, so a
 * thread waiting for the GIL does not try to take it in the middle of them.
 *
 * The hint only decides whether to spin first. A wrong one costs at most
 * the bounded spin (a counted thread that went to sleep elsewhere, in
 * time.sleep or an event loop's select) or an ordinary GIL wait (a thread
 * the extension never saw). Relaxed atomics: nothing is published
 * through these counters.
 */
#define RKPY_GIL_SPIN_MIN_NS ((uint64_t)2000)

/* RINGKERNEL_GIL_SPIN_US (environment, read at import): the longest spin,
 * 50 us by default; 0 turns the spin off. */
static _Atomic uint64_t gil_spin_max_ns = 50000;
static _Atomic uint64_t gil_budget_ns = 50000; /* adapts, see below */

/* One slot per thread that has run Python through the extension (at most
 * RKPY_GIL_SLOTS; later threads are not tracked, so they never make
 * others spin): since is when it last started running, 0 while it waits.
 * A slot is freed when its thread exits (pthread key destructor). A
 * thread counted long ago (an idle executor thread) stops counting after
 * the spin's maximum, so it cannot keep others spinning. */
#define RKPY_GIL_SLOTS 64
static _Atomic uint64_t slot_since[RKPY_GIL_SLOTS];
static _Atomic uint32_t slot_used[RKPY_GIL_SLOTS];
static _Atomic int py_running;         /* slots with since != 0 */
static _Thread_local int my_slot = -1; /* -2: none was free */

static inline void
relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void
slot_stop(int i)
{
    if (atomic_exchange_explicit(&slot_since[i], 0, memory_order_relaxed) != 0)
        atomic_fetch_sub_explicit(&py_running, 1, memory_order_relaxed);
}

/* The key's destructor: the thread exits, its slot is free again. */
static void
slot_release(void *v)
{
    int i = (int)(intptr_t)v - 1;

    slot_stop(i);
    atomic_store_explicit(&slot_used[i], 0, memory_order_relaxed);
}

static int
slot_get(void)
{
    if (my_slot == -1) {
        my_slot = -2;
        for (int i = 0; i < RKPY_GIL_SLOTS; i++) {
            uint32_t z = 0;
            if (atomic_compare_exchange_strong_explicit(&slot_used[i], &z, 1,
                    memory_order_relaxed, memory_order_relaxed)) {
                my_slot = i;
                (void)pthread_setspecific(slot_key, (void *)(intptr_t)(i + 1));
                break;
            }
        }
    }
    return my_slot;
}

void
rkpy_running_begin(void)
{
    int i = slot_get();

    if (i >= 0
        && atomic_exchange_explicit(
               &slot_since[i], rk_now_ns(), memory_order_relaxed)
            == 0)
        atomic_fetch_add_explicit(&py_running, 1, memory_order_relaxed);
}

void
rkpy_running_end(void)
{
    if (my_slot >= 0)
        slot_stop(my_slot);
}

/* Another thread started running Python less than max ago. */
static bool
other_running(uint64_t now, uint64_t max)
{
    for (int i = 0; i < RKPY_GIL_SLOTS; i++) {
        uint64_t s;
        if (i == my_slot)
            continue;
        s = atomic_load_explicit(&slot_since[i], memory_order_relaxed);
        if (s != 0 && (s >= now || now - s < max))
            return true;
    }
    return false;
}

PyThreadState *
rkpy_wait_begin(void)
{
    rkpy_running_end();
    return PyEval_SaveThread();
}

void
rkpy_wait_end(PyThreadState *ts)
{
    uint64_t start = 0, now;
    uint64_t max
        = atomic_load_explicit(&gil_spin_max_ns, memory_order_relaxed);
    uint64_t budget
        = atomic_load_explicit(&gil_budget_ns, memory_order_relaxed);
    bool spun = false, free_now = false;

    if (budget > max)
        budget = max; /* lowered by _gil_spin_us meanwhile */
    for (uint32_t i = 0; budget != 0; i++) {
        if (atomic_load_explicit(&py_running, memory_order_relaxed) == 0) {
            free_now = true;
            break;
        }
        if (i % 64 == 0) {
            now = rk_now_ns();
            if (start == 0)
                start = now;
            if (!other_running(now, max)) {
                free_now = true;
                break;
            }
            if (now - start > budget)
                break;
        }
        spun = true;
        relax();
    }
    if (spun) {
        /* Adapt as common/spin.h does: a spin that saw the other thread
         * reach its wait raises the budget to twice what it needed; one
         * that ran out (the other thread ran long, or had no CPU on a
         * busy machine) lowers it by a quarter. */
        uint64_t took = rk_now_ns() - start;
        if (free_now)
            budget = took * 2 > budget ? took * 2 : budget;
        else
            budget = budget - budget / 4;
        if (budget > max)
            budget = max;
        if (budget < RKPY_GIL_SPIN_MIN_NS)
            budget = RKPY_GIL_SPIN_MIN_NS;
        atomic_store_explicit(&gil_budget_ns, budget, memory_order_relaxed);
    }
    PyEval_RestoreThread(ts);
    rkpy_running_begin();
}

PyObject *
rkpy_gil_spin_us(PyObject *self, PyObject *arg)
{
    (void)self;
    uint64_t old = atomic_load(&gil_spin_max_ns) / 1000;
    if (arg != Py_None) {
        long long us = PyLong_AsLongLong(arg);
        if (us < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "must be >= 0");
            return NULL;
        }
        atomic_store(&gil_spin_max_ns, (uint64_t)us * 1000);
        atomic_store(&gil_budget_ns, (uint64_t)us * 1000);
    }
    return PyLong_FromUnsignedLongLong(old);
}

int
rkpy_module_add(PyObject *m, PyTypeObject *a, PyTypeObject *b, PyMethodDef *fns)
{
    if (PyModule_AddType(m, a) < 0 || PyModule_AddType(m, b) < 0)
        return -1;
    return PyModule_AddFunctions(m, fns);
}
