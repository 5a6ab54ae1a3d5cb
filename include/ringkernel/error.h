/** @file
 * ringkernel/error.h - the library's error codes.
 *
 * Every function that can fail returns an int: RK_OK (0) on success or one
 * of the RK_E* codes below. The codes come from one X-macro list, which also
 * produces rk_strerror() and rk_err_name(), so a code, its name and its
 * message can never drift apart.
 *
 * Many failures also leave a human-readable detail for the calling thread
 * (for example the name of the field that failed to decode, or the list of
 * kernel ids that do exist). rk_errdetail() returns it.
 */
#ifndef RINGKERNEL_ERROR_H
#define RINGKERNEL_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/**
 * X(NAME, message). Codes are numbered in list order starting at 0, so new
 * codes go at the end of their section and a released code is never
 * renumbered within an ABI version.
 */
#define RK_ERRNO_MAP(X)                                                       \
    /* general */                                                             \
    X(OK, "success")                                                          \
    X(EINVAL, "invalid argument")                                             \
    X(ENOMEM, "out of memory")                                                \
    X(ETIMEDOUT, "timed out")                                                 \
    X(ENOTSUP, "operation not supported")                                     \
    X(EBUSY, "resource busy")                                                 \
    X(EINTERNAL, "internal error")                                            \
    /* queues */                                                              \
    X(EFULL, "queue is full")                                                 \
    X(EEMPTY, "queue is empty")                                               \
    X(EREJECTED, "message rejected by backpressure policy")                   \
    X(EDROPPED, "message dropped by backpressure policy")                     \
    X(ECLOSED, "queue or kernel is closed")                                   \
    X(EMSGSIZE, "message does not fit in a queue slot")                       \
    /* messages and serialization */                                          \
    X(EDECODE, "malformed message")                                           \
    X(ETRUNCATED, "message frame is truncated")                               \
    X(EFIELDMISSING, "required message field is missing")                     \
    X(EFIELDTYPE, "message field has the wrong type")                         \
    X(EFIELDUNKNOWN, "message has an unknown field")                          \
    X(ETOOBIG, "length exceeds the allowed maximum")                          \
    X(ETYPE, "wrong message type")                                            \
    X(EENCODE, "message could not be encoded")                                \
    /* runtime and kernels */                                                 \
    X(ENOTFOUND, "no such kernel, type or topic")                             \
    X(EEXIST, "id already registered")                                        \
    X(ESTALE, "handle refers to a kernel that no longer exists")              \
    X(ESTATE, "operation invalid in the kernel's current state")              \
    X(ENOTLAUNCHED, "kernel has not been launched")                           \
    X(EALREADY, "kernel is already in the requested state")                   \
    X(ENOTACTIVE, "kernel is not active")                                     \
    X(ETERMINATED, "kernel is terminating or terminated")                     \
    X(EFAILED, "kernel has failed and was stopped by its supervisor")         \
    X(EFORKED, "runtime belongs to the parent of this forked process")        \
    /* devices and memory */                                                  \
    X(ENODEV, "no such device (no CUDA driver or no GPU)")                    \
    X(ECUDA, "CUDA driver call failed")                                       \
    X(ENVRTC, "NVRTC compilation failed")                                     \
    X(ENVML, "NVML call failed")                                              \
    X(ELIMIT, "memory limit exceeded")                                        \
    X(ECOMPILE, "device source did not compile")                             \
    /* cluster */                                                             \
    X(EUNREACHABLE, "kernel is on a rank that died or left the cluster")

/** The error codes: RK_OK and the RK_E* codes of RK_ERRNO_MAP, in list order.
 * RK__ERR_COUNT is one past the last. */
typedef enum rk_err {
#define RK__ERR_ENUM(name, msg) RK_##name,
    RK_ERRNO_MAP(RK__ERR_ENUM)
#undef RK__ERR_ENUM
        RK__ERR_COUNT
} rk_err;

/** A static, human-readable message for err ("timed out"). Never NULL; an
 * unknown code gives "unknown error". */
const char *
rk_strerror(int err);

/** The code's symbolic name ("RK_ETIMEDOUT"). Never NULL; an unknown code
 * gives "RK_E?". */
const char *
rk_err_name(int err);

/** Detail about the most recent failure on the calling thread, or "" when
 * the failing call left none. The string is thread-local and is overwritten
 * by the next failing call on this thread. */
const char *
rk_errdetail(void);

#ifdef __cplusplus
}
#endif

#endif /* RINGKERNEL_ERROR_H */
