/*
 * tests/support/numba_sample.h - the sample message and the host C twin of
 * the sample Numba handler (python/tests/test_numba_device.py's
 * sample_handler, whose PTX is tests/data/numba_sample.ptx): what the
 * stand-in's host build of the loop calls where the GPU runs Numba's
 * code. Used by test_cuda_jitlink and bench_cuda_numba. Header-only.
 */
#ifndef RK_TEST_NUMBA_SAMPLE_H
#define RK_TEST_NUMBA_SAMPLE_H

#include <stdint.h>

/* The reply's type id in the C tests and the bench (the loop's source
 * carries it, not Numba's PTX). */
#define NUMBA_SAMPLE_TYPE 23101u

typedef struct numba_sample {
    float x;
    int32_t n;
    double v[4];
} numba_sample;

_Static_assert(sizeof(numba_sample) == 40, "the sample is 40 bytes");

/* The loop around the sample handler: what numba_device.py generates for
 * it (sizes 40, reply type NUMBA_SAMPLE_TYPE). */
#define NUMBA_SAMPLE_LOOP_SRC                                                 \
    "#include \"ringkernel/dev_numba.h\"\n"                                   \
    "RK_DEV_NUMBA_EXTERN(rk_numba_handler)\n"                                 \
    "RK_DEV_NUMBA_KERNEL(rk_numba_kernel, 40u, 40u, 23101u, "                 \
    "rk_numba_handler)\n"

/* resp.x = 2 req.x; resp.n = req.n + 1; resp.v[i] = req.v[i] / 2;
 * n < 0: failure (-1); n == 7: no reply (1); else reply (0). */
static inline int
numba_sample_c(const void *in, void *out)
{
    const numba_sample *q = in;
    numba_sample *r = out;
    r->x = q->x * 2.0f;
    r->n = q->n + 1;
    for (int i = 0; i < 4; i++)
        r->v[i] = q->v[i] / 2;
    if (q->n < 0)
        return -1;
    return q->n == 7 ? 1 : 0;
}

#endif /* RK_TEST_NUMBA_SAMPLE_H */
