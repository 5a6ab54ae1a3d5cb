/*
 * python/src/runtime_device.c - the device half of a kernel registered
 * from Python: register_actor(..., device=(source, entry, link_ptx, grid,
 * block)) runs the kernel on the cuda backend with that device code
 * instead of the Python actor (docs/python.md, "Device handlers in
 * Python"). link_ptx is a Numba handler's PTX (or None for a handler in
 * CUDA C alone).
 */
#include "rkpy.h"
#include "rkpy_runtime.h"

#include <string.h>

int
rkpy_device_config(PyObject *device, rk_kernel_config *c)
{
    PyObject *src, *entry, *ptx;
    unsigned int grid = 0, block = 0;

    if (!PyTuple_Check(device)
        || !PyArg_ParseTuple(
            device, "SSOII", &src, &entry, &ptx, &grid, &block)) {
        PyErr_SetString(PyExc_TypeError,
            "device must be (source: bytes, entry: bytes, link_ptx: bytes "
            "or None, grid_size: int, block_size: int)");
        return -1;
    }
    if (ptx != Py_None && !PyBytes_Check(ptx)) {
        PyErr_SetString(
            PyExc_TypeError, "device link_ptx must be bytes or None");
        return -1;
    }
    /* Borrowed from the tuple, which the kernel's pyactor keeps alive for
     * as long as the runtime (the runtime does not copy these strings). */
    c->backend = "cuda";
    c->device_source = PyBytes_AS_STRING(src);
    c->device_entry = PyBytes_AS_STRING(entry);
    c->device_link_ptx = ptx != Py_None ? PyBytes_AS_STRING(ptx) : NULL;
    c->grid_size = grid;
    c->block_size = block;
    return 0;
}
