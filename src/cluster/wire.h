/*
 * src/cluster/wire.h - the cluster's wire format: a batch header and
 * frames, every field little-endian whatever the host (docs/cluster.md).
 *
 *   batch:  off size
 *             0    4 magic "RKCL" (0x4C434B52)
 *             4    2 version (1)
 *             6    2 flags (RK__CL_B_*)
 *             8    4 frames that follow
 *            12    4 credits returned to the receiver of this batch
 *   frame:    0    1 kind (RK__CL_DATA ...)
 *             1    1 priority
 *             2    2 type_version
 *             4    4 target: export index (DATA), proxy index (REPLY,
 *                    ERROR), topic index (TOPIC) on the receiving rank;
 *                    the new export's index on the sender (ANNOUNCE)
 *             8    4 type_id
 *            12    4 envelope flags
 *            16    4 payload length
 *            20    4 aux: sending proxy index (DATA), error (ERROR)
 *            24    8 send_ns (the sender's clock; informative)
 *            32   16 message id
 *            48   16 correlation id
 *            64    n payload, then zero padding to a multiple of 8
 *
 * The decoder takes bytes from another process: every length is checked
 * against the buffer (fuzz/fuzz_cluster_wire.c).
 */
#ifndef RK_SRC_CLUSTER_WIRE_H
#define RK_SRC_CLUSTER_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "ringkernel/message.h"
#include "ringkernel/queue.h"

#define RK__CL_MAGIC     0x4C434B52u
#define RK__CL_VERSION   1u
#define RK__CL_BATCH_HDR 16u
#define RK__CL_FRAME_HDR 64u
#define RK__CL_NAME_MAX  63u /* RK_ID_MAX */

/* Batch flags. */
#define RK__CL_B_BYE 0x1u /* the sender initiates nothing more */

/* Frame kinds. */
enum {
    RK__CL_DATA = 1, /* a message for an exported kernel (uses a credit) */
    RK__CL_REPLY,    /* a kernel's reply, for the requesting proxy */
    RK__CL_ERROR,    /* a message could not be delivered: aux is why */
    RK__CL_TOPIC,    /* a publish for the receiver's subscribers (credit) */
    RK__CL_ANNOUNCE, /* a kernel exported after the join: the payload is a
                        directory with that one export */
    RK__CL_CALL,     /* a request the requesting thread sent itself (no
                        credit): as DATA, answered on the reply
                        communicator with the waiting slot as tag */
    RK__CL_KIND_MAX = RK__CL_CALL
};

typedef struct rk__cl_batch {
    uint16_t version;
    uint16_t flags;
    uint32_t nframes;
    uint32_t credits;
} rk__cl_batch;

typedef struct rk__cl_frame {
    uint8_t kind;
    uint8_t priority;
    uint16_t type_version;
    uint32_t target;
    uint32_t type_id;
    uint32_t flags;
    uint32_t len;
    int32_t aux;
    uint64_t send_ns;
    rk_uuid id;
    rk_uuid corr;
    const uint8_t *payload; /* decoded: points into the batch buffer */
} rk__cl_frame;

/* Bytes a frame with a len-byte payload takes on the wire. */
static inline size_t
rk__cl_frame_size(size_t len)
{
    return RK__CL_FRAME_HDR + ((len + 7u) & ~(size_t)7u);
}

void rk__cl_batch_write(
    uint8_t *dst, uint16_t flags, uint32_t nframes, uint32_t credits);
/* Writes f's header and payload (f->len bytes) at dst, padded;
 * rk__cl_frame_size(f->len) bytes. */
void rk__cl_frame_write(
    uint8_t *dst, const rk__cl_frame *f, const void *payload);

/* RK_OK, or RK_ETRUNCATED / RK_EDECODE with a detail. */
int rk__cl_batch_parse(const uint8_t *buf, size_t len, rk__cl_batch *out);
/* The frame at *off (starting at RK__CL_BATCH_HDR); advances *off.
 * RK_EEMPTY at the end of buf; RK_ETRUNCATED / RK_EDECODE on a bad frame
 * (unknown kind, length past the buffer, non-zero padding). */
int rk__cl_frame_next(
    const uint8_t *buf, size_t len, size_t *off, rk__cl_frame *out);

/*
 * The directory a rank contributes at join (little-endian):
 *   header  16: magic "RKDR", exports, topics, credits it grants a sender
 *   export  80: id (64 bytes, NUL-padded), capacity, max payload,
 *               backpressure, priority bands
 *   topic   68: name (64 bytes, NUL-padded), index in its topic list
 */
#define RK__CL_DIR_MAGIC  0x52444B52u
#define RK__CL_DIR_HDR    16u
#define RK__CL_DIR_EXPORT 80u
#define RK__CL_DIR_TOPIC  68u

typedef struct rk__cl_dir_export {
    char id[RK__CL_NAME_MAX + 1];
    uint32_t capacity, max_payload, backpressure, bands;
} rk__cl_dir_export;

typedef struct rk__cl_dir_topic {
    char name[RK__CL_NAME_MAX + 1];
    uint32_t index;
} rk__cl_dir_topic;

typedef struct rk__cl_dir {
    uint32_t n_exports, n_topics, credits;
    const uint8_t *exports, *topics; /* records, decoded one by one */
} rk__cl_dir;

size_t rk__cl_dir_size(uint32_t n_exports, uint32_t n_topics);
void rk__cl_dir_header_write(
    uint8_t *dst, uint32_t n_exports, uint32_t n_topics, uint32_t credits);
void rk__cl_dir_export_write(uint8_t *dst, const rk__cl_dir_export *e);
void rk__cl_dir_topic_write(uint8_t *dst, const rk__cl_dir_topic *t);
/* Checks the header and that the records fit in len bytes exactly. */
int rk__cl_dir_parse(const uint8_t *buf, size_t len, rk__cl_dir *out);
/* Record i; RK_EDECODE for a name without NUL, empty, or a bad policy. */
int rk__cl_dir_export_get(
    const rk__cl_dir *d, uint32_t i, rk__cl_dir_export *out);
int rk__cl_dir_topic_get(
    const rk__cl_dir *d, uint32_t i, rk__cl_dir_topic *out);

/* Little-endian stores and loads, whatever the host. */
static inline void
rk__cl_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline uint32_t
rk__cl_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16
        | (uint32_t)p[3] << 24;
}

#endif /* RK_SRC_CLUSTER_WIRE_H */
