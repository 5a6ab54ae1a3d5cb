/*
 * src/backend/cuda/devhost.h - the host half of a device kernel instance's
 * shared region: control block, lanes, and the launch argument.
 *
 * One region per instance holds, in this order, the rk_dev_ctl (host line
 * plus one line per block), the lane tables the kernel reads at start
 * (rk_dev_lane arrays), and every lane (ring_proto.h control lines plus
 * slots). On a GPU the region is mapped pinned host memory and
 * rk__dh_place() is given the device address of its first byte; every
 * pointer the kernel reads is that address plus an offset. In tests and in
 * the stand-in driver the region is ordinary memory and both addresses are
 * the same.
 *
 * Lanes: each block's host lane (input lane 0) and its output lane are
 * LL lanes (ringkernel/ring_ll.h: every 8-byte word carries 4 bytes and
 * the slot's sequence, so the block finds and validates a message with
 * one read and publishes a reply with no fence); K2K input lanes (1..)
 * are ring_proto.h rings. Every lane is sized as an LL lane.
 *
 * Host protocol (the kernel side is dev_kernel.h): commands are a release
 * store of cmd (activated first, for RUN), mirrored into each host lane's
 * free head slot (the block's poll reads it there); acknowledgements are
 * polled with acquire loads of each block's ack, with back-off and a deadline
 * (there is nothing to sleep on: a GPU cannot wake a futex). Host
 * producers on a block's host lane are serialised by a mutex (the lane is
 * SPSC); so are host consumers of its output lane.
 *
 * Ownership: the caller owns the region's memory and must keep it until
 * every block has EXITED and the kernel returned; rk__dh owns nothing but
 * its mutexes (rk__dh_fini).
 */
#ifndef RK_SRC_BACKEND_CUDA_DEVHOST_H
#define RK_SRC_BACKEND_CUDA_DEVHOST_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringkernel/dev_kernel.h"
#include "ringkernel/message.h"

/* Staging memory a block gets without opting in to more (the launch's
 * dynamic shared memory; kargs.stage_bytes). */
#define RK__DH_STAGE_BYTES (48u * 1024u)

typedef struct rk__dh_cfg {
    uint32_t nblocks;   /* grid size: one actor per block */
    uint32_t nin;       /* input lanes per block: 1 host + K2K lanes */
    uint32_t nroutes;   /* K2K routes per block */
    uint32_t capacity;  /* slots per lane, a power of two */
    uint32_t slot_size; /* bytes per slot: 64-byte header + payload */
    uint32_t batch;     /* messages per receive on the device */
    uint32_t kernel_id; /* sender id stamped by the device */
} rk__dh_cfg;

typedef struct rk__dh_host_lane {
    rk_ring_ctrl *ctrl;
    rk_ring_side side;
    uint32_t staged; /* producer ring lanes: slots written, not published */
    int ll;          /* an LL lane (ring_ll.h): input lane 0, output */
} rk__dh_host_lane;

typedef struct rk__dh {
    rk__dh_cfg cfg;
    unsigned char *base; /* host address of the region */
    uint64_t dev_base;   /* device address of the same byte */
    size_t size;
    rk_dev_ctl *ctl;          /* host address */
    rk_dev_lane *in_tab;      /* host addresses of the tables the kernel */
    rk_dev_lane *out_tab;     /* reads (their entries hold device */
    rk_dev_lane *route_tab;   /* addresses) */
    rk_dev_ctl_topics *topics; /* [nblocks] topic counts, or NULL */
    rk__dh_host_lane *in;     /* [nblocks * nin]: host's producer sides */
    rk__dh_host_lane *out;    /* [nblocks]: host's consumer sides */
    pthread_mutex_t *in_lock; /* [nblocks] for lane 0 of each block */
    pthread_mutex_t *out_lock;
    rk_dev_kargs kargs; /* device addresses: the launch argument; its
                           stage_bytes is the launch's shared memory */
    /* rk__dh_watchdog, per block: the heartbeat and the input lanes'
     * heads (summed) seen at the previous call. */
    uint32_t *wd_beat;
    uint64_t *wd_head;
    int wd_armed;
} rk__dh;

/* Lane capacity for blocks taking up to `batch` messages per receive
 * (clipped to RK_DEV_MAX_BATCH and to what the stage holds) of slot_size
 * bytes: `want` when it is a power of two >= 2x that batch and the lane
 * fits in RK__DH_MAX_LANE_BYTES, else RK_EINVAL naming the numbers; for
 * want 0, 2x the batch rounded up to a power of two, at least
 * RK__DH_MIN_LANE while the lane stays within RK__DH_DEFAULT_LANE_BYTES. */
#define RK__DH_MIN_LANE           16u
#define RK__DH_DEFAULT_LANE_BYTES (64u << 20)
#define RK__DH_MAX_LANE_BYTES     (1ull << 30)
int rk__dh_lane_capacity(
    uint32_t batch, uint32_t slot_size, uint32_t want, uint32_t *capacity);

/* Bytes the region needs for cfg, or 0 when cfg is invalid (detail set
 * by rk__dh_check). */
size_t rk__dh_size(const rk__dh_cfg *cfg);
int rk__dh_check(const rk__dh_cfg *cfg);

/* Lays the region out at base (64-byte aligned, rk__dh_size bytes, the
 * device sees it at dev_base), initialises every ring and the control
 * block (cmd HOLD), and fills d->kargs. RK_OK, RK_EINVAL or RK_ENOMEM. */
int rk__dh_place(rk__dh *d, const rk__dh_cfg *cfg, void *base,
    uint64_t dev_base, void *user);
void rk__dh_fini(rk__dh *d);

/* Wires route r of block b of `from` to input lane `lane` (>= 1) of block
 * tb of `to`. Before either kernel starts. RK_OK or RK_EINVAL. */
int rk__dh_connect(rk__dh *from, uint32_t b, uint32_t r, rk__dh *to,
    uint32_t tb, uint32_t lane);

/* Posts a command (RK_DEV_CMD_*). RUN also sets activated. */
void rk__dh_post(rk__dh *d, uint32_t cmd);

/* Polls until every block acknowledges `want` (or EXITED) or the absolute
 * deadline (rk_now_ns; UINT64_MAX none) passes. RK_OK or RK_ETIMEDOUT. */
int rk__dh_wait_ack(rk__dh *d, uint32_t want, uint64_t deadline);

typedef struct rk__dh_status {
    uint32_t ack;      /* lowest ack over blocks (EXITED when all are) */
    int32_t exit_code; /* first non-zero exit code of an exited block */
    uint64_t processed, sent, errors;
    uint32_t heartbeat; /* sum over blocks (wraps) */
    uint32_t exited;    /* blocks that acknowledged EXITED */
    uint32_t faulted;   /* blocks waiting in FAULTED */
} rk__dh_status;

void rk__dh_status_get(rk__dh *d, rk__dh_status *st);
/* The publishes carried wholly on the device on the lanes of carried-mask
 * bit j (below RK_DEV_CTL_TOPICS), summed over the blocks (relaxed: a
 * statistic, each block's count only grows). */
uint64_t rk__dh_topic_count(rk__dh *d, uint32_t j);

/* Posts a verdict for a faulted block (RK_DEV_VERDICT(b, n) or
 * RK_DEV_GIVE_UP), with release: the host copied the failed message
 * before. */
void rk__dh_verdict(rk__dh *d, uint32_t v);

/* Block b's fault count and error when it is FAULTED (1), else 0. */
int rk__dh_fault_of(rk__dh *d, uint32_t b, uint32_t *n, int32_t *err);

/* For a FAULTED block: l + 1 when its failed message is at the head of
 * its input lane l, 0 when it is not faulted or holds none (an actor that
 * failed between messages). */
uint32_t rk__dh_failed_lane(rk__dh *d, uint32_t b);

/* For a FAULTED block that holds its failed message on its host lane
 * (lane 0): copies that frame to dst (cap bytes) and returns its length;
 * 0 otherwise (on a K2K lane the frame is in device memory: k2k.h's
 * rk__k2k_peek_failed copies it). */
size_t rk__dh_peek_failed(
    rk__dh *d, uint32_t b, unsigned char *dst, size_t cap);

/* After the block's context was lost while it was FAULTED holding a
 * failed message on its host lane, a message already dead-lettered from
 * the fail slot: moves the lane's head past it, so rk__dh_take_left does
 * not dead-letter it a second time. */
void rk__dh_drop_failed(rk__dh *d, uint32_t b);

/* Host -> block b's host lane. RK_OK, RK_EFULL (no room now) or
 * RK_EMSGSIZE. h is copied with payload_len set to len. */
int rk__dh_send(rk__dh *d, uint32_t b, const rk_msg_header *h,
    const void *payload, size_t len);

/* As rk__dh_send, but on a ring lane the slot is only written:
 * rk__dh_publish(d, b) makes it, and every slot written before it,
 * visible to the block with one release of the tail (rk__dh_send
 * publishes them too). The host lanes are LL lanes (ring_ll.h), where a
 * written slot is visible at once: there rk__dh_write publishes and
 * rk__dh_publish has nothing left to do. */
int rk__dh_write(rk__dh *d, uint32_t b, const rk_msg_header *h,
    const void *payload, size_t len);
void rk__dh_publish(rk__dh *d, uint32_t b);

/* Free slots over the blocks' host lanes (what rk__dh_send can take now
 * without RK_EFULL, if this thread is their only producer). */
uint32_t rk__dh_room(rk__dh *d);

/* Block b's output lane -> host: copies one frame (header + payload) into
 * buf (cap bytes) and sets *len. RK_OK, RK_EEMPTY or RK_EMSGSIZE (buf too
 * small; the frame stays queued). */
int rk__dh_recv(rk__dh *d, uint32_t b, void *buf, size_t cap, size_t *len);

/* After every block has EXITED: copies up to max frames still queued on
 * the blocks' input lanes (oldest first per lane; the failed message of a
 * block that ended on an error is the first of its lane) to dst, stride
 * bytes apart, and returns how many. */
uint32_t rk__dh_take_left(
    rk__dh *d, unsigned char *dst, size_t stride, uint32_t max);
/* The same, after the first `skip` of those frames: the lanes hold more
 * than one spill area's worth (two batches per block), so a caller takes
 * them in turns. */
uint32_t rk__dh_take_left_from(
    rk__dh *d, uint64_t skip, unsigned char *dst, size_t stride, uint32_t max);

/* Messages queued on block b's input lanes and not yet taken. */
uint64_t rk__dh_pending(rk__dh *d, uint32_t b);

/* True when some block's output lane holds a frame the host has not
 * taken (a peek at the indices: any thread, no lock). */
bool rk__dh_out_pending(rk__dh *d);

/*
 * The host watchdog, called periodically by one thread; it judges each
 * block alone. Returns RK_ETIMEDOUT (detail names `who` and the block)
 * when a block with input pending has moved neither its heartbeat nor its
 * input lanes' head since the previous call, and is not paused, held,
 * faulted or exited (a block busy in a long handler still moves its head
 * between batches; one hung block among many that poll is caught); RK_OK
 * otherwise. The first call only records.
 */
int rk__dh_watchdog(rk__dh *d, const char *who);

#endif /* RK_SRC_BACKEND_CUDA_DEVHOST_H */
