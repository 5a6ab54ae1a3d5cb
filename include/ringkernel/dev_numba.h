/** @file
 * ringkernel/dev_numba.h - the persistent loop around a handler written in
 * Python and compiled by Numba (docs/cuda-programming.md, "Handlers in Python").
 *
 * numba-cuda compiles the user's function to PTX as a device function with
 * the C ABI (numba.cuda.compile(..., device=True, abi="c")):
 *
 *     int rk_numba_handler(const void *in, void *out);
 *
 * in points at the request's payload (the input type's fixed layout, the C
 * struct numpy's Cls.dtype describes), out at a zeroed reply of the output
 * type's fixed layout. It returns 0 to send out as the reply, a positive
 * value to send nothing, a negative value for a failure (the block
 * faults with RK_EINVAL and supervision decides, as for a C handler).
 *
 * RK_DEV_NUMBA_KERNEL defines the kernel: RK_DEV_KERNEL over a handler
 * that checks the payload's size, runs the Numba function on the block's
 * thread 0 (it is scalar code) and replies for the block. The source the
 * runtime generates (python/ringkernel/numba_device.py) is
 *
 *     #include "ringkernel/dev_numba.h"
 *     RK_DEV_NUMBA_EXTERN(rk_numba_handler)
 *     RK_DEV_NUMBA_KERNEL(rk_numba_kernel, 20u, 20u, 0x1234u,
 *                         rk_numba_handler)
 *
 * compiled by NVRTC as relocatable code (-rdc) and linked with Numba's PTX
 * by nvJitLink (src/backend/cuda/jitlink.c). The host build (the stand-in
 * driver, tests) names a function pointer instead: a numba.cfunc's address
 * or a C function of the same signature, and sizes that are expressions.
 */
#ifndef RINGKERNEL_DEV_NUMBA_H
#define RINGKERNEL_DEV_NUMBA_H

#include "ringkernel/dev_kernel.h"

/** The largest reply (bytes) a Numba handler may produce: the block's
 * reply buffer in shared memory. */
#define RK_DEV_NUMBA_MAX_OUT 4096u

/** A Numba handler's C signature (the host build's function pointer). */
typedef int (*rk_dev_numba_fn)(const void *in, void *out);

/** What the trampoline needs to know of the message types. */
typedef struct rk_dev_numba_sig {
    rk_dev_u32 in_size;  /**< the input type's fixed size */
    rk_dev_u32 out_size; /**< the output type's fixed size */
    rk_dev_u32 out_type; /**< the reply's type id */
} rk_dev_numba_sig;

#if defined(RK_DEV_CUDA)
/** Declares the Numba handler (defined in Numba's PTX, resolved by the
 * link). */
#define RK_DEV_NUMBA_EXTERN(sym)                                              \
    extern "C" __device__ int sym(const void *in, void *out);
#else
/** The host build: the handler is a function pointer, nothing to declare. */
#define RK_DEV_NUMBA_EXTERN(sym)
#endif

/**
 * One message through a Numba handler fn, with out (RK_DEV_NUMBA_MAX_OUT
 * bytes of block-shared, 8-byte aligned memory) as the reply. A payload of
 * another size than the input type's is refused (RK_EINVAL: the block
 * faults and the message is dead-lettered). Collective.
 */
RK_DEV_FN int
rk_dev_numba_call(rk_dev_ctx *x, const rk_dev_msg *m,
    const rk_dev_numba_sig *s, rk_dev_numba_fn fn, unsigned char *out)
{
    int rc;

    if (m->len != s->in_size || s->out_size > RK_DEV_NUMBA_MAX_OUT)
        return RK_EINVAL;
    if (rk_dev_thread0()) {
        for (rk_dev_u32 i = 0; i < s->out_size; i++)
            out[i] = 0;
        x->rc = fn(m->data, out);
    }
    rk_dev_sync_block();
    rc = x->rc;
    /* Every thread has read x->rc before the loop's thread 0 writes it. */
    rk_dev_sync_block();
    if (rc == 0)
        return rk_dev_reply(x, m, s->out_type, out, s->out_size);
    return rc > 0 ? RK_OK : RK_EINVAL;
}

/** A persistent kernel entry `name` whose handler is the Numba function fn
 * (a symbol on the device, a function pointer expression on the host);
 * in_size, out_size and out_type as in rk_dev_numba_sig. */
#define RK_DEV_NUMBA_KERNEL(name, in_size, out_size, out_type, fn)            \
    RK_DEV_HANDLER(name##_numba)(rk_dev_ctx * x, const rk_dev_msg *m)         \
    {                                                                         \
        RK_DEV_SHARED rk_dev_u64 out_[RK_DEV_NUMBA_MAX_OUT / 8];              \
        rk_dev_numba_sig s_ = { (in_size), (out_size), (out_type) };          \
        return rk_dev_numba_call(                                             \
            x, m, &s_, (rk_dev_numba_fn)(fn), (unsigned char *)out_);         \
    }                                                                         \
    RK_DEV_KERNEL(name, name##_numba)

#endif /* RINGKERNEL_DEV_NUMBA_H */
