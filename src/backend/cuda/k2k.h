/*
 * src/backend/cuda/k2k.h - rk_connect routes between two cuda kernels,
 * carried on the device: K2K lanes (ringkernel/dev_k2k.h) in device
 * memory, GPU-scope acquire/release, no host hop (docs/cuda.md,
 * "Kernel-to-kernel on the device").
 *
 * A route from kernel A (grid ga) to kernel B (grid gb) is one link: one
 * cuMemAlloc holding gb * ceil(ga / gb) lanes. Block b of A sends on the
 * lane of block b % gb of B, its (b / gb)-th K2K input lane, so every lane
 * has one producer block and one consumer block (SPSC) and every block of
 * A has a lane. Each lane holds RK__K2K_CAPACITY slots of B's slot size.
 * Whichever of the two kernels launches first makes the link (and fills
 * its control lines with an async copy on a stream of its own, finished
 * before the launch); the other attaches to it. The sender's route table
 * entries are written only once the target has launched (before, the
 * sender's output goes through the relay, where the runtime decides), and
 * a sender whose target exited sends through the relay again. The link is freed when
 * both instances are gone and their kernels returned; what was left in
 * its lanes is copied out then and dead-lettered (RK_DEAD_TERMINATED,
 * RK_ECLOSED), so no frame is lost uncounted. The free goes through the
 * memory layer, deferred while any persistent kernel is resident.
 *
 * Threads: launch and destroy of one instance are serialised by its
 * kernel's lock; the links are shared under this file's mutex.
 */
#ifndef RK_SRC_BACKEND_CUDA_K2K_H
#define RK_SRC_BACKEND_CUDA_K2K_H

#include "backend/backend.h"
#include "backend/cuda/devhost.h"
#include "backend/cuda/devwide.h"

#define RK__K2K_CAPACITY 16u /* slots per K2K lane */

typedef struct rk__k2k_link rk__k2k_link;

#define RK__K2K_IN_MAX (RK__ROUTES_IN_MAX + RK__TOPIC_IN_MAX)

/* One instance's device routes and topic lanes. */
typedef struct rk__k2k {
    rk__k2k_link *out; /* its own route, or NULL */
    /* Topic lanes it publishes on: route tfirst + q is the lane of
     * spec->topic_out[tout_j[q]]'s subscriber. */
    rk__k2k_link *tout[RK_DEV_MAX_ROUTES];
    uint32_t tout_j[RK_DEV_MAX_ROUTES];
    uint32_t ntout, tfirst;
    /* Links into it: routes (tag 0) and topics (tag: index + 1). */
    rk__k2k_link *in[RK__K2K_IN_MAX];
    const rk__backend_peer *in_peer[RK__K2K_IN_MAX];
    uint32_t in_tag[RK__K2K_IN_MAX];
    uint32_t lanes[RK__K2K_IN_MAX]; /* K2K lanes per block, each */
    uint32_t nin;                   /* entries of in[] */
    rk__cu_partner partners[1 + RK_DEV_MAX_ROUTES + RK__K2K_IN_MAX];
    uint32_t npartners;
    int ordinal; /* the instance's device: only peers on it are joined */
} rk__k2k;

/* Before the region is placed: which of spec's routes and device topic
 * subscriptions run on the device (both ends cuda kernels on this
 * device), and the input lanes and routes per block they add to dc (nin,
 * nroutes). RK_ENOTSUP, naming both kernels, when a block of this kernel
 * would need more than RK_DEV_MAX_IN - 1 K2K input lanes for its routes;
 * a topic subscription that finds no lane or route left stays on the
 * host relay. Allocates nothing. */
int rk__k2k_plan(rk__k2k *k, int ordinal, const rk__backend_launch *spec,
    uint32_t grid,
    rk__dh_cfg *dc);

/* After the region is placed: makes or joins each link and points the
 * kernel's lane tables (d) at its lanes; sets d->kargs.send_route for the
 * kernel's own route and the topic fields (topic_of, topic_bit,
 * topic_drop, topic_relay). RK_OK, RK_ENOMEM or RK_ECUDA (nothing
 * kept). */
int rk__k2k_wire(rk__k2k *k, int ordinal, const rk__backend_launch *spec,
    rk__dh *d);

/* The kernel was launched: the routes into it are wired into their
 * senders' tables (a sender launched before it starts using its lanes;
 * until then its output went through the relay). */
void rk__k2k_started(rk__k2k *k);

/* The kernels joined to this one, for the co-residency check: their grid
 * and blocks per SM (occupancy of their entry; own_per_sm where their
 * code cannot be looked at). */
void rk__k2k_partners(rk__k2k *k, const struct rk__cuda_driver *drv,
    const struct rk__cuda_ext *ext, const rk__backend_launch *spec, int cc,
    uint32_t sms, uint32_t own_per_sm);

/* True while the instance's own route is wired on the device (its target
 * has launched and not been destroyed): rk__backend.route_live. */
int rk__k2k_route_live(rk__k2k *k);

/* For a FAULTED block of instance d (on device ordinal) whose failed
 * message is at the head of a K2K input lane (device memory): copies that
 * frame out (a copy on a stream of its own, done on return) to dst, cap
 * bytes at most, and returns its length; 0 when the block holds none
 * there or the copy failed. */
size_t rk__k2k_peek_failed(
    int ordinal, rk__dh *d, uint32_t b, unsigned char *dst, size_t cap);

/* The instance is gone and its kernel returned (or never ran): drops its
 * links; the last user of a link dead-letters what was left in it
 * through io (may be NULL) and frees it. */
void rk__k2k_release(rk__k2k *k, const rk__backend_io *io, int ordinal);

#endif /* RK_SRC_BACKEND_CUDA_K2K_H */
