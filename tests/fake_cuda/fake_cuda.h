/*
 * tests/fake_cuda/fake_cuda.h - what the stand-in driver's files share
 * (test-only; see fake_cuda.c).
 */
#ifndef RK_TESTS_FAKE_CUDA_H
#define RK_TESTS_FAKE_CUDA_H

#include <stddef.h>
#include <stdlib.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

#define OK                  0
#define E_INVALID_VALUE     1
#define E_OUT_OF_MEMORY     2
#define E_INVALID_IMAGE     200
#define E_NO_BINARY_FOR_GPU 209
#define E_INVALID_PTX       218
#define E_NOT_FOUND         500
#define E_NOT_READY         600
#define E_COOP_TOO_LARGE    720
#define E_INVALID_HANDLE    400
#define E_INVALID_DEVICE    101
#define E_INVALID_CONTEXT   201
/* Peer access (cuCtxEnablePeerAccess). */
#define E_PEER_UNSUPPORTED     217
#define E_PEER_ALREADY_ENABLED 704
#define E_TOO_MANY_PEERS       711
/* What a trap leaves sticky in the context (rk_dev_trap; the stand-in's
 * default, FAKE_CUDA_TRAP_ERROR chooses another). */
#define E_ILLEGAL_ADDRESS 700
#define E_ASSERT          710
#define E_LAUNCH_FAILED   719
/* Not a CUDA code: a call that would never return on a GPU (it waits for
 * a grid that does not end). */
#define E_WOULD_HANG 9999

#define EXPORT __attribute__((visibility("default")))

static inline int
env_int(const char *name, int def)
{
    const char *s = getenv(name);
    return s != NULL && s[0] != '\0' ? atoi(s) : def;
}

/* Devices: FAKE_CUDA_DEVICES (default 2), at most FAKE_MAX_DEVICES. */
#define FAKE_MAX_DEVICES 8
static inline int
fake_devices(void)
{
    int n = env_int("FAKE_CUDA_DEVICES", 2);
    return n < 0 ? 0 : n > FAKE_MAX_DEVICES ? FAKE_MAX_DEVICES : n;
}

/* fake_cuda.c: the device of the calling thread's current context, or -1
 * when none is current. */
int fake_cur_dev(void);

/* fake_cuda.c: the device whose primary context ctx is, or -1. */
int fake_ctx_dev(const void *ctx);

/* fake_cuda.c: the regions' protection again (fake_arena_protect under
 * the launch code's lock), after peer access changed. */
void fake_reprotect(void);

/* fake_cuda.c: a lost context's sticky error (OK: none). */
CUresult fake_sticky(void);

/* fake_cuda.c: waits until no grid runs on any device, as the driver's
 * frees do (bounded: FAKE_CUDA_HANG_MS, then E_WOULD_HANG); a lost
 * context's error once every grid stopped. */
CUresult fake_wait_idle(const char *what);

/* Every call that touches the device needs a current context, as with the
 * real driver; NEED_CTX also returns a lost context's error. */
#define NEED_CTX_ONLY()                                                       \
    do {                                                                      \
        if (fake_cur_dev() < 0)                                               \
            return 201; /* CUDA_ERROR_INVALID_CONTEXT */                      \
    } while (0)
#define NEED_CTX()                                                            \
    do {                                                                      \
        NEED_CTX_ONLY();                                                      \
        if (fake_sticky() != OK)                                              \
            return fake_sticky();                                             \
    } while (0)

/* fake_devmem.c: device d's memory is readable while a grid runs on d
 * (its blocks are CPU threads) or on a device that enabled peer access to
 * d, and PROT_NONE otherwise. grids_on[d]: grids running on device d
 * (FAKE_MAX_DEVICES entries). Called by the launch code under its lock
 * whenever a grid starts or ends. */
void fake_arena_protect(const int *grids_on);

/* fake_mem.c: frees p if it is managed memory (1), else 0. */
int fake_managed_free(CUdeviceptr p);

/* fake_info.c: an image the driver would accept (cubin or PTX). */
CUresult fake_check_image(const unsigned char *img, size_t *size, int *is_ptx);

#endif /* RK_TESTS_FAKE_CUDA_H */
