/*
 * tests/kernels/numba_kernels.cu - the host build of the loop around a
 * Numba handler (ringkernel/dev_numba.h), for the stand-in driver.
 *
 * On a GPU the kernel rk_numba_kernel comes from the source the runtime
 * generates (python/ringkernel/numba_device.py) linked with Numba's PTX.
 * The stand-in runs this host build instead, with the handler a test set
 * through fake_cuda_numba_set(): a numba.cfunc's address (the Python
 * tests) or a C function of the same signature (the C tests), and the
 * message sizes and reply type the generated source would carry.
 */
#include "ringkernel/dev_numba.h"

#if !defined(RK_DEV_CUDA)
/* Written before the launch that runs the kernel (thread creation orders
 * it before the blocks' reads). */
static struct {
    rk_dev_numba_fn fn;
    rk_dev_u32 in_size, out_size, out_type;
} fake_numba;

RK_DEV_NUMBA_KERNEL(rk_numba_kernel, fake_numba.in_size, fake_numba.out_size,
    fake_numba.out_type, fake_numba.fn)
#endif
