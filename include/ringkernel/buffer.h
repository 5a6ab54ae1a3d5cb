/** @file
 * ringkernel/buffer.h - typed host/device buffers with lazy synchronisation.
 *
 * A buffer is a 1-, 2- or 3-dimensional array of one element type that can
 * live on the host, on a device, or on both. It tracks which copy is
 * current and copies only when the side being accessed is stale:
 *
 *   UNINITIALIZED  nothing allocated, no data yet
 *   HOST_ONLY      the host copy is current; no device copy exists
 *   DEVICE_ONLY    the device copy is current; no host copy exists
 *   SYNCHRONIZED   both copies exist and are equal
 *   HOST_DIRTY     both exist; the host copy is newer
 *   DEVICE_DIRTY   both exist; the device copy is newer
 *
 * docs/memory.md has the full table of every operation in every state,
 * with the transfers each one makes; tests/test_buffer_states.c checks it
 * entry by entry. Data that was never written reads as zeros.
 *
 * The device side is a CUDA allocation on a CUDA device, and a separate
 * host allocation on the CPU "device", so the state machine and its
 * transfer counts behave (and are tested) identically without a GPU.
 *
 * A managed buffer (RK_BUFFER_MANAGED) has one allocation that both sides
 * address: cuMemAllocManaged on a CUDA device (the driver migrates its
 * pages), one host allocation on the CPU device. Once allocated it is
 * always SYNCHRONIZED and never copies; rk_buffer_prefetch() and
 * rk_buffer_advise() steer where its pages live. It is never made larger
 * than what the device has free (RK_ENOMEM).
 *
 * Threads: a buffer is not thread-safe; one thread at a time may use it.
 * Ownership: the caller owns the buffer; pointers from rk_buffer_host() /
 * rk_buffer_device() are borrowed and valid until rk_buffer_destroy().
 * Pools given in the config must outlive the buffer.
 */
#ifndef RINGKERNEL_BUFFER_H
#define RINGKERNEL_BUFFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringkernel/device.h"
#include "ringkernel/pool.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Element type of a buffer. */
typedef enum rk_dtype {
    RK_DTYPE_U8 = 0, /**< uint8_t */
    RK_DTYPE_I8,     /**< int8_t */
    RK_DTYPE_U16,    /**< uint16_t */
    RK_DTYPE_I16,    /**< int16_t */
    RK_DTYPE_U32,    /**< uint32_t */
    RK_DTYPE_I32,    /**< int32_t */
    RK_DTYPE_U64,    /**< uint64_t */
    RK_DTYPE_I64,    /**< int64_t */
    RK_DTYPE_F32,    /**< float */
    RK_DTYPE_F64,    /**< double */
    RK_DTYPE_OPAQUE  /**< fixed-size records; elem_size in the config */
} rk_dtype;

/** Element size in bytes; 0 for RK_DTYPE_OPAQUE and unknown values. */
size_t rk_dtype_size(rk_dtype t);

/** "f32", "opaque", ... Never NULL. */
const char *rk_dtype_name(rk_dtype t);

/** Which copy of a buffer is current (the table in the file comment). */
typedef enum rk_buffer_state {
    RK_BUFFER_UNINITIALIZED = 0, /**< nothing allocated, no data yet */
    RK_BUFFER_HOST_ONLY,   /**< the host copy is current; no device copy exists
                            */
    RK_BUFFER_DEVICE_ONLY, /**< the device copy is current; no host copy exists
                            */
    RK_BUFFER_SYNCHRONIZED, /**< both copies exist and are equal */
    RK_BUFFER_HOST_DIRTY,   /**< both exist; the host copy is newer */
    RK_BUFFER_DEVICE_DIRTY  /**< both exist; the device copy is newer */
} rk_buffer_state;

/** "HOST_DIRTY", ... Never NULL. */
const char *rk_buffer_state_name(rk_buffer_state s);

/** How an accessor will use the memory it returns. */
typedef enum rk_access {
    RK_ACCESS_READ = 0,   /**< read only: sync if stale, state stays clean */
    RK_ACCESS_WRITE = 1,  /**< read and modify: sync if stale, then this side
                             becomes the only current copy */
    RK_ACCESS_DISCARD = 2 /**< overwrite everything: no sync at all; this
                             side becomes the only current copy */
} rk_access;

enum {
    /** Host side in page-locked, device-mapped memory (CUDA devices only;
     * ignored for the CPU device). Makes async transfers truly async. */
    RK_BUFFER_PINNED = 1u << 0,
    /** One managed allocation for both sides (cuMemAllocManaged on a CUDA
     * device; one host allocation on the CPU device). Not with
     * RK_BUFFER_PINNED or pools. Creation fails with RK_ENOMEM when the
     * buffer is larger than the CUDA device has free (cuMemGetInfo), and
     * RK_ENOTSUP when the device has no managed memory. */
    RK_BUFFER_MANAGED = 1u << 1
};

/** A side of a buffer: where rk_buffer_prefetch() moves a managed
 * buffer's pages, and the location rk_buffer_advise() names. */
typedef enum rk_buffer_side {
    RK_SIDE_HOST = 0,  /**< host memory */
    RK_SIDE_DEVICE = 1 /**< the buffer's device */
} rk_buffer_side;

/** Advice on a managed buffer's use (cuMemAdvise; the values are
 * CUmem_advise's). */
typedef enum rk_mem_advice {
    RK_ADVISE_READ_MOSTLY = 1,       /**< read-only copies on each side */
    RK_ADVISE_UNSET_READ_MOSTLY = 2, /**< undo RK_ADVISE_READ_MOSTLY */
    RK_ADVISE_PREFERRED_LOCATION = 3, /**< keep the pages on the side */
    RK_ADVISE_UNSET_PREFERRED_LOCATION = 4, /**< undo the above */
    RK_ADVISE_ACCESSED_BY = 5,       /**< the side maps the pages */
    RK_ADVISE_UNSET_ACCESSED_BY = 6  /**< undo RK_ADVISE_ACCESSED_BY */
} rk_mem_advice;

/** Zeroed fields mean the defaults in parentheses. */
typedef struct rk_buffer_config {
    rk_dtype dtype;        /**< (RK_DTYPE_U8) */
    size_t elem_size;      /**< only for RK_DTYPE_OPAQUE; else 0 or equal to
                              rk_dtype_size(dtype) */
    size_t dims[3];        /**< dims[0] > 0 required; trailing zeros end the
                              shape, so {4,3,0} is 4x3 */
    rk_device_kind device; /**< (RK_DEVICE_CPU); RK_DEVICE_ANY: CUDA 0 when
                              present, else the CPU */
    int ordinal;           /**< CUDA device ordinal (0) */
    unsigned flags;        /**< RK_BUFFER_* */
    rk_pool *host_pool;    /**< host memory from here (HOST/PINNED/MALLOC) */
    rk_pool *device_pool;  /**< device memory from here: a DEVICE pool for
                              CUDA, a host-memory pool for the CPU device */
} rk_buffer_config;

/** Transfer counters since creation (or the last reset). */
typedef struct rk_buffer_stats {
    uint64_t h2d_transfers; /**< host-to-device copies made */
    uint64_t d2h_transfers; /**< device-to-host copies made */
    uint64_t h2d_bytes;     /**< bytes copied host to device */
    uint64_t d2h_bytes;     /**< bytes copied device to host */
    /** Sync checks (READ/WRITE accessors, ensure_*, copy_to) that found the
     * wanted side already current and copied nothing. */
    uint64_t transfers_avoided;
} rk_buffer_stats;

/** An opaque buffer; the caller owns it (rk_buffer_create, rk_buffer_destroy).
 */
typedef struct rk_buffer rk_buffer;

/** Creates a buffer in RK_BUFFER_UNINITIALIZED; memory is allocated on
 * first use of each side. RK_EINVAL for a bad shape/type/pool, RK_ENODEV
 * for a CUDA device that is not there, RK_ETOOBIG when the byte size
 * overflows or exceeds PTRDIFF_MAX. The caller owns *out. */
int rk_buffer_create(rk_buffer **out, const rk_buffer_config *cfg);

/**
 * Wraps device memory that another library allocated (CuPy, PyTorch,
 * Numba, a cuMemAlloc of the caller's) as a buffer, without a copy: its
 * device side is [dptr, dptr + the config's byte size) on CUDA device
 * cfg->ordinal, current from the start (RK_BUFFER_DEVICE_ONLY). The
 * buffer never frees that memory: rk_buffer_destroy() frees only a host
 * side it may have been given since (rk_buffer_host(), ensure_host copy
 * the data there as for any buffer).
 *
 * Lifetime: the caller keeps the memory alive, and does not free or
 * reuse it, until the buffer is destroyed and every launch given it has
 * completed (a started one-shot launch: until rk_oneshot_wait returned).
 * Work another library queued on a stream of its own is not waited for:
 * call rk_buffer_wait_stream() first.
 *
 * cfg gives the element type and shape as for rk_buffer_create();
 * cfg->device must be RK_DEVICE_CUDA, and neither RK_BUFFER_MANAGED nor a
 * device pool may be given. Errors: RK_EINVAL for a NULL dptr or a bad
 * config; RK_ENODEV (naming the ordinal and the device count) for a
 * device the driver does not have; RK_EINVAL naming both devices when
 * the driver reports dptr as another device's memory (where it can say:
 * cuPointerGetAttribute; otherwise dptr is taken as cfg->ordinal's).
 */
int rk_buffer_wrap_device(
    rk_buffer **out, const rk_buffer_config *cfg, void *dptr);

/** True for a buffer made by rk_buffer_wrap_device() (it does not own its
 * device memory). */
bool rk_buffer_is_wrapped(const rk_buffer *buf);

/**
 * Waits until the work queued on stream has completed: stream is a
 * CUstream of the buffer's CUDA device on which another library writes
 * memory that a launch is to read (the CUDA Array Interface v3's
 * "stream", the stream a DLPack producer was asked to order its work
 * on), or 1 (the legacy default stream) or 2 (the per-thread default
 * stream), as those interfaces number them. ringkernel's own kernels run
 * on non-blocking streams, so this never waits for a resident one.
 * RK_EINVAL for stream 0 (ambiguous in both interfaces) or a buffer not
 * on a CUDA device.
 */
int rk_buffer_wait_stream(rk_buffer *buf, uintptr_t stream);

/** Frees both sides. NULL is ignored. */
void rk_buffer_destroy(rk_buffer *buf);

/** The buffer's current state (RK_BUFFER_UNINITIALIZED for NULL). */
rk_buffer_state rk_buffer_get_state(const rk_buffer *buf);

/** Host pointer to the elements, synchronised per mode (see rk_access). */
int rk_buffer_host(rk_buffer *buf, rk_access mode, void **ptr);

/** Device pointer (a CUDA device address, or the CPU device's separate
 * allocation), synchronised per mode. Synchronous. */
int rk_buffer_device(rk_buffer *buf, rk_access mode, void **dptr);

/** Declare that the host (device) copy was modified through a pointer
 * obtained earlier: that side becomes the only current copy. RK_ESTATE
 * when that side holds no memory yet. */
int rk_buffer_mark_host_dirty(rk_buffer *buf);

/** The device-side counterpart of rk_buffer_mark_host_dirty(). */
int rk_buffer_mark_device_dirty(rk_buffer *buf);

/**
 * Make the host (device) copy current, copying only when it is stale.
 * stream is a CUstream for CUDA buffers (NULL: copy synchronously); with
 * a stream the copy is queued and the data is there once the stream has
 * completed, and the other side must not be modified until then. The CPU
 * device ignores stream and copies with memcpy.
 */
int rk_buffer_ensure_host(rk_buffer *buf, void *stream);

/** The device-side counterpart of rk_buffer_ensure_host(): makes the device
 * copy current, with the same stream rules. */
int rk_buffer_ensure_device(rk_buffer *buf, void *stream);

/** Replace the whole contents from src (bytes must equal
 * rk_buffer_bytes()). Written on the host side; no sync needed. */
int rk_buffer_copy_from(rk_buffer *buf, const void *src, size_t bytes);

/** Copy the whole contents to dst (bytes == rk_buffer_bytes()), syncing
 * the host side first if it is stale. */
int rk_buffer_copy_to(rk_buffer *buf, void *dst, size_t bytes);

/** Set every element to *elem (elem_size bytes). Host side, no sync. */
int rk_buffer_fill(rk_buffer *buf, const void *elem);

/** Sets every byte of the contents to zero. Host side, no sync. */
int rk_buffer_zeros(rk_buffer *buf);

/**
 * Managed buffers only: moves the pages to side `to` (the buffer's device
 * or the host) on stream (a CUstream; NULL: the legacy stream), without
 * waiting; the pages are there once the stream has completed. Allocates
 * (zeroed) on first use. On the CPU device it only allocates. RK_EINVAL
 * for a buffer that is not managed, RK_ENOTSUP where the driver lacks
 * the call.
 */
int rk_buffer_prefetch(rk_buffer *buf, rk_buffer_side to, void *stream);

/**
 * Managed buffers only: gives the driver advice on the whole buffer;
 * side names the location for PREFERRED_LOCATION and ACCESSED_BY (and
 * is ignored for READ_MOSTLY). Allocates (zeroed) on first use. On the
 * CPU device it only allocates. RK_EINVAL for a buffer that is not
 * managed or an unknown advice.
 */
int rk_buffer_advise(
    rk_buffer *buf, rk_mem_advice advice, rk_buffer_side side);

/** Copies the transfer counters into *out (caller-owned). */
void rk_buffer_stats_get(const rk_buffer *buf, rk_buffer_stats *out);

/** Sets every transfer counter back to zero. */
void rk_buffer_stats_reset(rk_buffer *buf);

/** Shape and type. rk_buffer_dim() gives 1 for i >= ndim. For a NULL buf
 * these (and rk_buffer_get_state, rk_buffer_is_pinned) give the neutral
 * answer: 0, 1 for rk_buffer_dim, false, the enum's zero value; every
 * function returning int gives RK_EINVAL for a NULL buf. */
rk_dtype rk_buffer_dtype(const rk_buffer *buf);

/** Bytes per element (the config's elem_size for RK_DTYPE_OPAQUE). */
size_t rk_buffer_elem_size(const rk_buffer *buf);

/** Number of dimensions, 1 to 3. */
unsigned rk_buffer_ndim(const rk_buffer *buf);

/** Extent of dimension i (1 for i >= ndim). */
size_t rk_buffer_dim(const rk_buffer *buf, unsigned i);

/** Number of elements: the product of the dimensions. */
size_t rk_buffer_count(const rk_buffer *buf);

/** Size of the contents in bytes: count times element size. */
size_t rk_buffer_bytes(const rk_buffer *buf);

/** The kind of device the device side lives on. */
rk_device_kind rk_buffer_device_kind(const rk_buffer *buf);

/** The CUDA device ordinal the device side lives on (0 for the CPU
 * device). */
int rk_buffer_ordinal(const rk_buffer *buf);

/** True when the host side is (or will be) pinned memory. */
bool rk_buffer_is_pinned(const rk_buffer *buf);

/** True for a managed buffer (RK_BUFFER_MANAGED). */
bool rk_buffer_is_managed(const rk_buffer *buf);

#ifdef __cplusplus
}
#endif

#endif /* RINGKERNEL_BUFFER_H */
