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

/* The CUDA C twin of the sample Numba handler
 * (python/tests/test_numba_device.py, tests/data/numba_sample.ptx), the
 * baseline of bench_cuda_numba: the same arithmetic on the same 40-byte
 * struct, written in C. Compiled for both builds. */
typedef struct rk_numba_sample {
    float x;
    int n;
    double v[4];
} rk_numba_sample;

RK_DEV_HANDLER(rk_numba_twin_h)(rk_dev_ctx *x, const rk_dev_msg *m)
{
    RK_DEV_SHARED rk_dev_u64 out[sizeof(rk_numba_sample) / 8];
    rk_numba_sample *r = (rk_numba_sample *)out;
    const rk_numba_sample *q = (const rk_numba_sample *)m->data;

    if (m->len != sizeof(rk_numba_sample))
        return RK_EINVAL;
    if (rk_dev_thread0()) {
        r->x = q->x * 2.0f;
        r->n = q->n + 1;
        for (int i = 0; i < 4; i++)
            r->v[i] = q->v[i] / 2;
    }
    rk_dev_sync_block();
    if (q->n < 0)
        return RK_EINVAL;
    if (q->n == 7)
        return RK_OK;
    return rk_dev_reply(x, m, m->hdr->type_id, out, sizeof(rk_numba_sample));
}
RK_DEV_KERNEL(rk_numba_twin, rk_numba_twin_h)

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
