/*
 * dlpack.c - DLPack capsules over a buffer's memory, for
 * UnifiedBuffer.__dlpack__ (ringkernel/buffers.py decides which side,
 * device and dtype; this file only builds the capsule).
 *
 * The structs are DLPack's ABI (dlpack.h, v1.0; the legacy unversioned
 * DLManagedTensor too), declared here so the build needs no dlpack.h. A
 * capsule is named "dltensor" (or "dltensor_versioned"); a consumer renames
 * it "used_..." and from then on owns the tensor and calls its deleter. A
 * capsule nobody consumed calls the deleter when it is destroyed.
 *
 * dlpack_import is the consumer's side: a producer's capsule (a CuPy or
 * PyTorch tensor's) read into its address, shape, strides, type and
 * device, the tensor kept by a holder capsule that calls the producer's
 * deleter when the holder goes (after the launch that used the memory).
 *
 * Ownership: the tensor holds a reference to its owner (the Buffer whose
 * memory it points into, counted as in use so Buffer.free() refuses, or a
 * numpy view of it), dropped by the deleter, which any thread may call:
 * it takes the GIL.
 */
#include "rkpy.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t device_type;
    int32_t device_id;
} DLDevice;

typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} DLDataType;

typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides; /* in elements */
    uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1ULL << 0)

typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

/* One allocation per export: the tensor, its owner, shape and strides. */
typedef struct dl_export {
    union {
        DLManagedTensor m;
        DLManagedTensorVersioned v;
    } t;
    PyObject *owner;
    int counted; /* owner is a Buffer counted as in use (rkpy_buffer_use) */
    int64_t dims[]; /* shape[ndim], then strides[ndim] */
} dl_export;

static void
export_free(dl_export *e)
{
    if (Py_IsInitialized()) {
        PyGILState_STATE g = PyGILState_Ensure();
        if (e->counted)
            rkpy_buffer_use(e->owner, -1, NULL);
        Py_XDECREF(e->owner);
        PyGILState_Release(g);
    }
    free(e);
}

static void
delete_legacy(DLManagedTensor *t)
{
    export_free(t->manager_ctx);
}

static void
delete_versioned(DLManagedTensorVersioned *t)
{
    export_free(t->manager_ctx);
}

/* A capsule destroyed unconsumed still owns its tensor. */
static void
capsule_destructor(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, "dltensor")) {
        DLManagedTensor *t = PyCapsule_GetPointer(cap, "dltensor");
        t->deleter(t);
    } else if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        DLManagedTensorVersioned *t
            = PyCapsule_GetPointer(cap, "dltensor_versioned");
        t->deleter(t);
    }
}

/* dlpack(owner, ptr, shape, strides, code, bits, lanes, device_type,
 *        device_id, versioned, readonly) -> capsule */
static PyObject *
dlpack(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *owner, *shape, *strides;
    unsigned long long ptr;
    unsigned char code, bits;
    unsigned short lanes;
    int dtype, did, versioned, readonly;
    if (!PyArg_ParseTuple(args, "OKO!O!bbHiipp", &owner, &ptr, &PyTuple_Type,
            &shape, &PyTuple_Type, &strides, &code, &bits, &lanes, &dtype,
            &did, &versioned, &readonly))
        return NULL;
    Py_ssize_t nd = PyTuple_GET_SIZE(shape);
    if (nd != PyTuple_GET_SIZE(strides) || nd > 64)
        return rkpy_raisef(RK_EINVAL,
            "dlpack: shape and strides of 0 to 64 dimensions, equal in "
            "number (%zd, %zd)",
            nd, PyTuple_GET_SIZE(strides));
    dl_export *e = calloc(1, sizeof(*e) + 2 * (size_t)nd * sizeof(int64_t));
    if (e == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < nd; i++) {
        e->dims[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
        e->dims[nd + i] = PyLong_AsLongLong(PyTuple_GET_ITEM(strides, i));
    }
    if (PyErr_Occurred()) {
        free(e);
        return NULL;
    }
    DLTensor dt = { .data = (void *)(uintptr_t)ptr,
        .device = { .device_type = dtype, .device_id = did },
        .ndim = (int32_t)nd,
        .dtype = { .code = code, .bits = bits, .lanes = lanes },
        .shape = e->dims,
        .strides = e->dims + nd,
        .byte_offset = 0 };
    PyObject *cap;
    if (versioned) {
        e->t.v.version = (DLPackVersion) { 1, 0 };
        e->t.v.manager_ctx = e;
        e->t.v.deleter = delete_versioned;
        e->t.v.flags = readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
        e->t.v.dl_tensor = dt;
        cap = PyCapsule_New(&e->t.v, "dltensor_versioned", capsule_destructor);
    } else {
        e->t.m.dl_tensor = dt;
        e->t.m.manager_ctx = e;
        e->t.m.deleter = delete_legacy;
        cap = PyCapsule_New(&e->t.m, "dltensor", capsule_destructor);
    }
    if (cap == NULL) {
        free(e);
        return NULL;
    }
    /* A Buffer cannot be freed while a consumer holds its memory. */
    rk_buffer *unused;
    if (rkpy_buffer_use(owner, 1, &unused) == 0)
        e->counted = 1;
    else
        PyErr_Clear();
    e->owner = Py_NewRef(owner);
    return cap;
}

/* ------------------------------------------------------------ import */

/* The holder of an imported tensor: a capsule named "rk_dltensor" (or
 * "rk_dltensor_versioned") whose destructor calls the producer's
 * deleter, so the memory lives exactly as long as the holder. */
static void
holder_destructor(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, "rk_dltensor")) {
        DLManagedTensor *t = PyCapsule_GetPointer(cap, "rk_dltensor");
        if (t->deleter != NULL)
            t->deleter(t);
    } else if (PyCapsule_IsValid(cap, "rk_dltensor_versioned")) {
        DLManagedTensorVersioned *t
            = PyCapsule_GetPointer(cap, "rk_dltensor_versioned");
        if (t->deleter != NULL)
            t->deleter(t);
    }
}

/* A tuple of n int64s (NULL: None). */
static PyObject *
int64s(const int64_t *v, int32_t n)
{
    if (v == NULL)
        Py_RETURN_NONE;
    PyObject *t = PyTuple_New(n);
    for (int32_t i = 0; t != NULL && i < n; i++) {
        PyObject *x = PyLong_FromLongLong(v[i]);
        if (x == NULL) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

/* dlpack_import(capsule) -> (holder, ptr, shape, strides or None,
 * (code, bits, lanes), (device_type, device_id), readonly): consumes a
 * producer's capsule ("dltensor" or "dltensor_versioned", renamed
 * "used_..." as DLPack asks) into a holder that calls its deleter when
 * it goes; ptr includes byte_offset. */
static PyObject *
dlpack_import(PyObject *self, PyObject *cap)
{
    (void)self;
    const DLTensor *t;
    void *mt;
    const char *used, *hold;
    int readonly = 0;
    if (PyCapsule_IsValid(cap, "dltensor")) {
        DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
        mt = m;
        t = &m->dl_tensor;
        used = "used_dltensor";
        hold = "rk_dltensor";
    } else if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        DLManagedTensorVersioned *v
            = PyCapsule_GetPointer(cap, "dltensor_versioned");
        if (v->version.major != 1) {
            return rkpy_raisef(RK_ENOTSUP,
                "DLPack %u.%u tensor: ringkernel reads version 1",
                (unsigned)v->version.major, (unsigned)v->version.minor);
        }
        mt = v;
        t = &v->dl_tensor;
        readonly = (v->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
        used = "used_dltensor_versioned";
        hold = "rk_dltensor_versioned";
    } else {
        PyErr_SetString(PyExc_TypeError,
            "dlpack_import: an unconsumed DLPack capsule (\"dltensor\" or "
            "\"dltensor_versioned\") needed");
        return NULL;
    }
    PyObject *shape = int64s(t->shape, t->ndim);
    PyObject *strides = shape != NULL ? int64s(t->strides, t->ndim) : NULL;
    PyObject *holder = strides != NULL
        ? PyCapsule_New(mt, hold, holder_destructor)
        : NULL;
    if (holder == NULL) {
        Py_XDECREF(shape);
        Py_XDECREF(strides);
        return NULL;
    }
    /* Consumed: the producer's capsule no longer owns the tensor. */
    if (PyCapsule_SetName(cap, used) < 0) {
        PyCapsule_SetDestructor(holder, NULL);
        Py_DECREF(holder);
        Py_DECREF(shape);
        Py_DECREF(strides);
        return NULL;
    }
    return Py_BuildValue("(NKNN(iii)(ii)O)", holder,
        (unsigned long long)((uintptr_t)t->data + t->byte_offset), shape,
        strides, (int)t->dtype.code, (int)t->dtype.bits, (int)t->dtype.lanes,
        (int)t->device.device_type, (int)t->device.device_id,
        readonly ? Py_True : Py_False);
}

static PyMethodDef dlpack_methods[] = {
    { "dlpack_import", dlpack_import, METH_O,
        "dlpack_import(capsule) -> (holder, ptr, shape, strides, (code, "
        "bits, lanes), (device_type, device_id), readonly): consumes a "
        "producer's capsule; holder calls its deleter when it goes." },
    { "dlpack", dlpack, METH_VARARGS,
        "dlpack(owner, ptr, shape, strides, code, bits, lanes, device_type, "
        "device_id, versioned, readonly) -> a DLPack capsule over ptr that "
        "keeps owner alive." },
    { NULL, NULL, 0, NULL },
};

int
rkpy_dlpack_init(PyObject *m)
{
    return PyModule_AddFunctions(m, dlpack_methods);
}
