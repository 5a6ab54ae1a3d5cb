/*
 * Lazily synchronised host/device buffer (see ringkernel/buffer.h and the
 * state table in docs/memory.md).
 *
 * The public state is not stored; it is derived from four facts, which
 * keeps every operation a small, checkable update:
 *   host / dev          whether that side has memory,
 *   host_ok / dev_ok    whether that side holds the current data.
 * Neither current -> UNINITIALIZED; both -> SYNCHRONIZED; only the host ->
 * HOST_DIRTY if the device side has memory, else HOST_ONLY; symmetrically
 * for the device. A side that becomes current without any data to copy
 * (first use) is zero-filled, so unwritten data always reads as zeros.
 *
 * A wrapped buffer's dev is memory the caller owns (rk_buffer_wrap_device):
 * never allocated or freed here, current from the start.
 *
 * A managed buffer has one allocation that host and dev both point to:
 * allocated, both sides are current (SYNCHRONIZED) and stay so, since
 * there is only one copy; nothing is ever copied.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "device/cuda_driver.h"
#include "memory/mem.h"
#include "ringkernel/buffer.h"

#define RK__BUF_ALIGN 64u

struct rk_buffer {
    rk_dtype dtype;
    size_t elem;
    size_t dims[3];
    unsigned ndim;
    size_t count;
    size_t bytes;
    rk_device_kind dev_kind; /* CPU or CUDA, never ANY */
    int ordinal;
    bool pinned;
    bool managed; /* host == dev: one managed allocation */
    bool wrapped; /* dev is the caller's (rk_buffer_wrap_device) */
    rk_pool *host_pool;
    rk_pool *dev_pool;
    void *host;
    void *dev;
    bool host_ok;
    bool dev_ok;
    rk_buffer_stats stats;
};

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    [RK_DTYPE_U8] = { "u8", 1 },
    [RK_DTYPE_I8] = { "i8", 1 },
    [RK_DTYPE_U16] = { "u16", 2 },
    [RK_DTYPE_I16] = { "i16", 2 },
    [RK_DTYPE_U32] = { "u32", 4 },
    [RK_DTYPE_I32] = { "i32", 4 },
    [RK_DTYPE_U64] = { "u64", 8 },
    [RK_DTYPE_I64] = { "i64", 8 },
    [RK_DTYPE_F32] = { "f32", 4 },
    [RK_DTYPE_F64] = { "f64", 8 },
    [RK_DTYPE_OPAQUE] = { "opaque", 0 },
};

size_t
rk_dtype_size(rk_dtype t)
{
    return (unsigned)t < RK__ARRAY_LEN(dtypes) ? dtypes[t].size : 0;
}

const char *
rk_dtype_name(rk_dtype t)
{
    return (unsigned)t < RK__ARRAY_LEN(dtypes) ? dtypes[t].name : "unknown";
}

const char *
rk_buffer_state_name(rk_buffer_state s)
{
    static const char *const names[] = {
        "UNINITIALIZED",
        "HOST_ONLY",
        "DEVICE_ONLY",
        "SYNCHRONIZED",
        "HOST_DIRTY",
        "DEVICE_DIRTY",
    };
    return (unsigned)s < RK__ARRAY_LEN(names) ? names[s] : "UNKNOWN";
}

rk_buffer_state
rk_buffer_get_state(const rk_buffer *b)
{
    if (b == NULL || (!b->host_ok && !b->dev_ok))
        return RK_BUFFER_UNINITIALIZED;
    if (b->host_ok && b->dev_ok)
        return RK_BUFFER_SYNCHRONIZED;
    if (b->host_ok)
        return b->dev ? RK_BUFFER_HOST_DIRTY : RK_BUFFER_HOST_ONLY;
    return b->host ? RK_BUFFER_DEVICE_DIRTY : RK_BUFFER_DEVICE_ONLY;
}

static bool
cuda(const rk_buffer *b)
{
    return b->dev_kind == RK_DEVICE_CUDA;
}

/* A managed buffer: no pools, not pinned, and on a CUDA device no larger
 * than what it has free. */
static int
check_managed(const rk_buffer_config *cfg, rk_device_kind kind, size_t bytes)
{
    if ((cfg->flags & RK_BUFFER_PINNED) != 0 || cfg->host_pool != NULL
        || cfg->device_pool != NULL)
        return rk__fail(RK_EINVAL,
            "rk_buffer_create: RK_BUFFER_MANAGED takes no pools and not "
            "RK_BUFFER_PINNED (one managed allocation serves both sides)");
    if (kind != RK_DEVICE_CUDA)
        return RK_OK;
    return rk__mem_managed_fits(cfg->ordinal, bytes, "rk_buffer_create");
}

static int
check_pools(const rk_buffer_config *cfg, rk_device_kind kind)
{
    if (cfg->host_pool != NULL
        && rk_pool_get_kind(cfg->host_pool) == RK_POOL_DEVICE)
        return rk__fail(
            RK_EINVAL, "rk_buffer_create: host_pool is a device pool");
    if (cfg->device_pool != NULL
        && (rk_pool_get_kind(cfg->device_pool) == RK_POOL_DEVICE)
            != (kind == RK_DEVICE_CUDA))
        return rk__fail(RK_EINVAL,
            "rk_buffer_create: device_pool must be a device pool "
            "exactly when the buffer is on a CUDA device");
    return RK_OK;
}

int
rk_buffer_create(rk_buffer **out, const rk_buffer_config *cfg)
{
    rk_buffer_config def = { 0 };
    rk_device_kind kind;
    size_t elem, count = 1;
    unsigned ndim = 0;
    rk_buffer *b;
    int rc;

    if (out == NULL)
        return rk__fail(RK_EINVAL, "rk_buffer_create: out is NULL");
    if (cfg == NULL)
        cfg = &def;
    if ((unsigned)cfg->dtype >= RK__ARRAY_LEN(dtypes))
        return rk__fail(
            RK_EINVAL, "rk_buffer_create: unknown dtype %d", (int)cfg->dtype);
    elem = rk_dtype_size(cfg->dtype);
    if (cfg->dtype == RK_DTYPE_OPAQUE)
        elem = cfg->elem_size;
    if (elem == 0 || (cfg->elem_size != 0 && cfg->elem_size != elem))
        return rk__fail(RK_EINVAL,
            "rk_buffer_create: elem_size %zu does not fit dtype %s",
            cfg->elem_size, rk_dtype_name(cfg->dtype));
    while (ndim < 3 && cfg->dims[ndim] != 0)
        ndim++;
    for (unsigned i = ndim; i < 3; i++)
        if (cfg->dims[i] != 0)
            return rk__fail(
                RK_EINVAL, "rk_buffer_create: dims[%u] set after a zero", i);
    if (ndim == 0)
        return rk__fail(RK_EINVAL, "rk_buffer_create: dims[0] is 0");
    for (unsigned i = 0; i < ndim; i++) {
        if (count > SIZE_MAX / cfg->dims[i])
            return rk__fail(RK_ETOOBIG, "rk_buffer_create: shape overflows");
        count *= cfg->dims[i];
    }
    /* No object may be larger than PTRDIFF_MAX bytes. */
    if (count > PTRDIFF_MAX / elem)
        return rk__fail(RK_ETOOBIG,
            "rk_buffer_create: %zu elements of %zu bytes is more than "
            "PTRDIFF_MAX bytes",
            count, elem);
    kind = cfg->device;
    if ((unsigned)kind > RK_DEVICE_ANY)
        return rk__fail(RK_EINVAL, "rk_buffer_create: unknown device kind");
    if (kind == RK_DEVICE_ANY)
        kind = rk_cuda_probe(NULL) == RK_CUDA_AVAILABLE ? RK_DEVICE_CUDA
                                                        : RK_DEVICE_CPU;
    if (kind == RK_DEVICE_CUDA && (rc = rk__cuda_enter(cfg->ordinal, NULL)))
        return rc;
    if ((rc = check_pools(cfg, kind)) != RK_OK)
        return rc;
    if ((cfg->flags & RK_BUFFER_MANAGED) != 0
        && (rc = check_managed(cfg, kind, count * elem)) != RK_OK)
        return rc;
    b = calloc(1, sizeof(*b));
    if (b == NULL)
        return rk__fail(RK_ENOMEM, "rk_buffer_create");
    b->dtype = cfg->dtype;
    b->elem = elem;
    b->ndim = ndim;
    for (unsigned i = 0; i < 3; i++)
        b->dims[i] = i < ndim ? cfg->dims[i] : 1;
    b->count = count;
    b->bytes = count * elem;
    b->dev_kind = kind;
    b->ordinal = kind == RK_DEVICE_CUDA ? cfg->ordinal : 0;
    b->managed = (cfg->flags & RK_BUFFER_MANAGED) != 0;
    b->pinned = kind == RK_DEVICE_CUDA && (cfg->flags & RK_BUFFER_PINNED)
        && cfg->host_pool == NULL && !b->managed;
    b->host_pool = cfg->host_pool;
    b->dev_pool = cfg->device_pool;
    *out = b;
    return RK_OK;
}

int
rk_buffer_wrap_device(
    rk_buffer **out, const rk_buffer_config *cfg, void *dptr)
{
    rk_buffer *b;
    int rc, owner = -1;

    if (out == NULL || cfg == NULL || dptr == NULL)
        return rk__fail(
            RK_EINVAL, "rk_buffer_wrap_device: out, cfg and dptr needed");
    *out = NULL;
    if (cfg->device != RK_DEVICE_CUDA || cfg->device_pool != NULL
        || (cfg->flags & RK_BUFFER_MANAGED) != 0)
        return rk__fail(RK_EINVAL,
            "rk_buffer_wrap_device: wraps CUDA device memory (device "
            "RK_DEVICE_CUDA, no device pool, not RK_BUFFER_MANAGED)");
    if ((rc = rk_buffer_create(&b, cfg)) != RK_OK)
        return rc;
    rc = rk__mem_device_of(b->ordinal, dptr, &owner);
    if (rc == RK_OK && owner != b->ordinal)
        rc = rk__fail(RK_EINVAL,
            "rk_buffer_wrap_device: %p is memory of CUDA device %d, not of "
            "device %d (the config's ordinal)",
            dptr, owner, b->ordinal);
    if (rc != RK_OK && rc != RK_ENOTSUP) {
        rk_buffer_destroy(b);
        return rc;
    }
    b->dev = dptr;
    b->dev_ok = true;
    b->wrapped = true;
    *out = b;
    return RK_OK;
}

bool
rk_buffer_is_wrapped(const rk_buffer *b)
{
    return b ? b->wrapped : false;
}

int
rk_buffer_wait_stream(rk_buffer *b, uintptr_t stream)
{
    if (b == NULL || !cuda(b) || stream == 0)
        return rk__fail(RK_EINVAL,
            "rk_buffer_wait_stream: a buffer on a CUDA device and a stream "
            "other than 0 needed");
    return rk__mem_stream_sync(b->ordinal, stream);
}

void
rk_buffer_destroy(rk_buffer *b)
{
    if (b == NULL)
        return;
    if (b->managed) {
        /* Deferred like device memory while a kernel is resident. */
        rk__mem_release(cuda(b) ? RK__MEM_MANAGED : RK__MEM_HOST, b->ordinal,
            NULL, b->host, b->bytes);
        free(b);
        return;
    }
    if (b->host_pool)
        rk_pool_free(b->host_pool, b->host, b->bytes);
    else
        rk__mem_release(b->pinned ? RK__MEM_PINNED : RK__MEM_HOST, b->ordinal,
            NULL, b->host, b->bytes);
    if (b->dev_pool)
        rk_pool_free(b->dev_pool, b->dev, b->bytes);
    else if (!b->wrapped)
        rk__mem_release(cuda(b) ? RK__MEM_DEVICE : RK__MEM_HOST, b->ordinal,
            NULL, b->dev, b->bytes);
    free(b);
}

/* ------------------------------------------------ sides and transfers */

/* A managed buffer's one allocation, both sides' memory. */
static int
alloc_managed(rk_buffer *b)
{
    int rc;

    if (b->host != NULL)
        return RK_OK;
    rc = rk__mem_alloc(cuda(b) ? RK__MEM_MANAGED : RK__MEM_HOST, b->ordinal,
        NULL, b->bytes, RK__BUF_ALIGN, &b->host);
    b->dev = b->host;
    return rc;
}

static int
alloc_host(rk_buffer *b)
{
    if (b->managed)
        return alloc_managed(b);
    if (b->host != NULL)
        return RK_OK;
    if (b->host_pool != NULL)
        return rk_pool_alloc(b->host_pool, b->bytes, &b->host);
    return rk__mem_alloc(b->pinned ? RK__MEM_PINNED : RK__MEM_HOST, b->ordinal,
        NULL, b->bytes, RK__BUF_ALIGN, &b->host);
}

static int
alloc_dev(rk_buffer *b)
{
    if (b->managed)
        return alloc_managed(b);
    if (b->dev != NULL)
        return RK_OK;
    if (b->dev_pool != NULL)
        return rk_pool_alloc(b->dev_pool, b->bytes, &b->dev);
    return rk__mem_alloc(cuda(b) ? RK__MEM_DEVICE : RK__MEM_HOST, b->ordinal,
        NULL, b->bytes, RK__BUF_ALIGN, &b->dev);
}

/* A managed buffer becomes current on both sides at its first use, zero
 * filled (through the host: managed memory is host-addressable). Returns
 * 1 when it was, 0 when it already was. */
static int
managed_first_use(rk_buffer *b)
{
    if (b->host_ok)
        return 0;
    memset(b->host, 0, b->bytes);
    b->host_ok = b->dev_ok = true;
    return 1;
}

/* Makes one side current (dev: the device side), copying from the other
 * if needed; a side neither side has written reads as zeros. */
static int
sync_side(rk_buffer *b, bool dev, void *stream)
{
    int rc = dev ? alloc_dev(b) : alloc_host(b);
    void *dst, *src;

    if (rc != RK_OK)
        return rc;
    if (b->managed && managed_first_use(b))
        return RK_OK;
    if (dev ? b->dev_ok : b->host_ok) {
        b->stats.transfers_avoided++;
        return RK_OK;
    }
    dst = dev ? b->dev : b->host;
    src = dev ? b->host : b->dev;
    if (!(dev ? b->host_ok : b->dev_ok)) { /* first use: zeros */
        if (dev && cuda(b))
            rc = rk__mem_zero_device(b->ordinal, dst, b->bytes);
        else
            memset(dst, 0, b->bytes);
    } else {
        if (cuda(b))
            rc = rk__mem_copy(b->ordinal, dst, src, b->bytes, stream, dev);
        else
            memcpy(dst, src, b->bytes);
        if (rc == RK_OK && dev) {
            b->stats.h2d_transfers++;
            b->stats.h2d_bytes += b->bytes;
        } else if (rc == RK_OK) {
            b->stats.d2h_transfers++;
            b->stats.d2h_bytes += b->bytes;
        }
    }
    if (rc != RK_OK)
        return rc;
    if (dev)
        b->dev_ok = true;
    else
        b->host_ok = true;
    return RK_OK;
}

/* The side just written (dev: the device side) becomes the only current
 * copy. */
static void
wins(rk_buffer *b, bool dev)
{
    b->dev_ok = dev || b->managed; /* managed: one copy, always current */
    b->host_ok = !dev || b->managed;
}

/* ---------------------------------------------------------- operations */

/* Shared body of rk_buffer_host and rk_buffer_device: dev is the side
 * asked for. */
static int
side_ptr(rk_buffer *b, rk_access mode, bool dev, void **ptr, const char *what)
{
    int rc;

    if (b == NULL || ptr == NULL || (unsigned)mode > RK_ACCESS_DISCARD)
        return rk__fail(RK_EINVAL, "%s: bad argument", what);
    if (mode == RK_ACCESS_DISCARD)
        rc = dev ? alloc_dev(b) : alloc_host(b);
    else
        rc = sync_side(b, dev, NULL);
    if (rc != RK_OK)
        return rc;
    if (mode != RK_ACCESS_READ)
        wins(b, dev);
    *ptr = dev ? b->dev : b->host;
    return RK_OK;
}

int
rk_buffer_host(rk_buffer *b, rk_access mode, void **ptr)
{
    return side_ptr(b, mode, false, ptr, "rk_buffer_host");
}

int
rk_buffer_device(rk_buffer *b, rk_access mode, void **dptr)
{
    return side_ptr(b, mode, true, dptr, "rk_buffer_device");
}

/* Shared body of the two mark-dirty calls: side is the side written. */
static int
mark_dirty(rk_buffer *b, bool dev, const char *what)
{
    if (b == NULL)
        return rk__fail(RK_EINVAL, "%s: NULL", what);
    if ((dev ? b->dev : b->host) == NULL)
        return rk__fail(RK_ESTATE,
            "%s: buffer is %s; the %s side has no memory to "
            "have been written",
            what, rk_buffer_state_name(rk_buffer_get_state(b)),
            dev ? "device" : "host");
    wins(b, dev);
    return RK_OK;
}

int
rk_buffer_mark_host_dirty(rk_buffer *b)
{
    return mark_dirty(b, false, "rk_buffer_mark_host_dirty");
}

int
rk_buffer_mark_device_dirty(rk_buffer *b)
{
    return mark_dirty(b, true, "rk_buffer_mark_device_dirty");
}

int
rk_buffer_ensure_host(rk_buffer *b, void *stream)
{
    if (b == NULL)
        return rk__fail(RK_EINVAL, "rk_buffer_ensure_host: NULL");
    return sync_side(b, false, stream);
}

int
rk_buffer_ensure_device(rk_buffer *b, void *stream)
{
    if (b == NULL)
        return rk__fail(RK_EINVAL, "rk_buffer_ensure_device: NULL");
    return sync_side(b, true, stream);
}

static int
whole(const rk_buffer *b, const void *p, size_t bytes, const char *what)
{
    if (b == NULL || p == NULL)
        return rk__fail(RK_EINVAL, "%s: NULL argument", what);
    if (bytes != b->bytes)
        return rk__fail(RK_EINVAL, "%s: %zu bytes given, the buffer holds %zu",
            what, bytes, b->bytes);
    return RK_OK;
}

int
rk_buffer_copy_from(rk_buffer *b, const void *src, size_t bytes)
{
    int rc = whole(b, src, bytes, "rk_buffer_copy_from");

    if (rc == RK_OK)
        rc = alloc_host(b);
    if (rc != RK_OK)
        return rc;
    memcpy(b->host, src, bytes);
    wins(b, false);
    return RK_OK;
}

int
rk_buffer_copy_to(rk_buffer *b, void *dst, size_t bytes)
{
    int rc = whole(b, dst, bytes, "rk_buffer_copy_to");

    if (rc == RK_OK)
        rc = sync_side(b, false, NULL);
    if (rc != RK_OK)
        return rc;
    memcpy(dst, b->host, bytes);
    return RK_OK;
}

int
rk_buffer_fill(rk_buffer *b, const void *elem)
{
    unsigned char *p;
    int rc;

    if (b == NULL || elem == NULL)
        return rk__fail(RK_EINVAL, "rk_buffer_fill: NULL argument");
    if ((rc = alloc_host(b)) != RK_OK)
        return rc;
    p = b->host;
    for (size_t i = 0; i < b->count; i++)
        memcpy(p + i * b->elem, elem, b->elem);
    wins(b, false);
    return RK_OK;
}

int
rk_buffer_zeros(rk_buffer *b)
{
    int rc;

    if (b == NULL)
        return rk__fail(RK_EINVAL, "rk_buffer_zeros: NULL");
    if ((rc = alloc_host(b)) != RK_OK)
        return rc;
    memset(b->host, 0, b->bytes);
    wins(b, false);
    return RK_OK;
}

void
rk__buffer_sides(const rk_buffer *b, void **host, void **dev)
{
    *host = b->host;
    *dev = b->dev;
}

/* Shared start of prefetch and advise: a managed buffer, allocated (and
 * zero-filled on first use). Returns 1 when the driver is to be called
 * (a CUDA buffer), 0 when there is nothing more to do, or an error < 0
 * in *rc. */
static int
managed_hint(rk_buffer *b, rk_buffer_side side, int *rc, const char *what)
{
    if (b == NULL || (unsigned)side > RK_SIDE_DEVICE) {
        *rc = rk__fail(RK_EINVAL, "%s: bad argument", what);
        return 0;
    }
    if (!b->managed) {
        *rc = rk__fail(RK_EINVAL,
            "%s: the buffer is not managed (RK_BUFFER_MANAGED); "
            "rk_buffer_ensure_host/_device make a side current",
            what);
        return 0;
    }
    if ((*rc = alloc_managed(b)) != RK_OK)
        return 0;
    (void)managed_first_use(b);
    return cuda(b);
}

int
rk_buffer_prefetch(rk_buffer *b, rk_buffer_side to, void *stream)
{
    int rc;

    if (!managed_hint(b, to, &rc, "rk_buffer_prefetch"))
        return rc;
    return rk__mem_hint(
        b->ordinal, b->host, b->bytes, 0, to == RK_SIDE_HOST, stream);
}

int
rk_buffer_advise(rk_buffer *b, rk_mem_advice advice, rk_buffer_side side)
{
    int rc;

    if ((unsigned)advice < RK_ADVISE_READ_MOSTLY
        || (unsigned)advice > RK_ADVISE_UNSET_ACCESSED_BY)
        return rk__fail(
            RK_EINVAL, "rk_buffer_advise: unknown advice %d", (int)advice);
    if (!managed_hint(b, side, &rc, "rk_buffer_advise"))
        return rc;
    return rk__mem_hint(b->ordinal, b->host, b->bytes, (int)advice,
        side == RK_SIDE_HOST, NULL);
}

void
rk_buffer_stats_get(const rk_buffer *b, rk_buffer_stats *out)
{
    if (out == NULL)
        return;
    if (b == NULL)
        memset(out, 0, sizeof(*out));
    else
        *out = b->stats;
}

void
rk_buffer_stats_reset(rk_buffer *b)
{
    if (b != NULL)
        memset(&b->stats, 0, sizeof(b->stats));
}

rk_dtype
rk_buffer_dtype(const rk_buffer *b)
{
    return b ? b->dtype : RK_DTYPE_U8;
}

size_t
rk_buffer_elem_size(const rk_buffer *b)
{
    return b ? b->elem : 0;
}

unsigned
rk_buffer_ndim(const rk_buffer *b)
{
    return b ? b->ndim : 0;
}

size_t
rk_buffer_dim(const rk_buffer *b, unsigned i)
{
    return b && i < 3 ? b->dims[i] : 1;
}

size_t
rk_buffer_count(const rk_buffer *b)
{
    return b ? b->count : 0;
}

size_t
rk_buffer_bytes(const rk_buffer *b)
{
    return b ? b->bytes : 0;
}

rk_device_kind
rk_buffer_device_kind(const rk_buffer *b)
{
    return b ? b->dev_kind : RK_DEVICE_CPU;
}

int
rk_buffer_ordinal(const rk_buffer *b)
{
    return b ? b->ordinal : 0;
}

bool
rk_buffer_is_pinned(const rk_buffer *b)
{
    return b ? b->pinned : false;
}

bool
rk_buffer_is_managed(const rk_buffer *b)
{
    return b ? b->managed : false;
}
