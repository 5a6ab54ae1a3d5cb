/*
 * src/backend/cuda/peer.h - rk_connect routes between cuda kernels on two
 * CUDA devices, carried peer-to-peer where the driver allows it
 * (docs/cuda-devices.md, "Peer-to-peer routes").
 *
 * Two devices are peer-linked when the driver says each can reach the
 * other's memory (cuDeviceCanAccessPeer both ways) and access is enabled
 * both ways between their primary contexts (cuCtxEnablePeerAccess; the
 * driver's "already enabled" counts as done). A device route (k2k.h)
 * between kernels on peer-linked devices is carried on the device: its
 * lanes live in the target's memory, the sender's blocks write them over
 * the link, and both sides order the lane's index words at system scope
 * (RK_RING_F_SYS, ringkernel/dev_k2k.h), the one scope that covers two
 * GPUs. Between devices that are not peer-linked (a driver without the
 * calls, cuDeviceCanAccessPeer 0, or RK_CUDA_NO_PEER=1) the route stays
 * on the host relay, as every cross-device route did before.
 *
 * Threads: any; the state is under this file's mutex. Every call leaves
 * the calling thread's current context as it found it.
 */
#ifndef RK_SRC_BACKEND_CUDA_PEER_H
#define RK_SRC_BACKEND_CUDA_PEER_H

#include <stdint.h>

#include "backend/backend.h"

/* Before a kernel on device `ordinal` places its lanes: every route of
 * spec with a cuda kernel at the other end on another device is checked
 * and decided. The other kernel's device must exist (RK_ENODEV, or
 * RK_EINVAL for a negative ordinal, naming the route and the device
 * count). Where the driver says the two devices can reach each other,
 * access is enabled both ways (RK_ENOTSUP or RK_ECUDA naming both kernels,
 * both devices and the driver's error when that fails); otherwise, or
 * with RK_CUDA_NO_PEER=1, the pair is not linked and the route goes
 * through the host relay. The kernel's own route (route_to) is counted
 * once per launch, as peer-to-peer or relayed (rk__cu_peer_counts). */
int rk__cu_peer_plan(int ordinal, const rk__backend_launch *spec);

/* 1 when kernels on devices a and b share K2K lanes: the same device, or
 * two devices the last rk__cu_peer_plan for them found peer-linked. */
int rk__cu_peer_linked(int a, int b);

/* Enables access from device src's primary context to device dst's
 * memory (src != dst). The driver's CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
 * is success. RK_ENOTSUP when the driver lacks peer access or refuses it
 * for the pair (CUDA_ERROR_PEER_ACCESS_UNSUPPORTED), RK_ENODEV for a
 * device it does not have, RK_ECUDA with the driver's error otherwise;
 * the detail names both devices. */
int rk__cu_peer_enable(int src, int dst);

/* Process-wide counts of cross-device routes launched: carried
 * peer-to-peer, left on the host relay, and peer enables that succeeded
 * (each direction of a pair, each time a plan asked). */
typedef struct rk__cu_peer_counts {
    uint64_t p2p;
    uint64_t relayed;
    uint64_t enables;
} rk__cu_peer_counts;

void rk__cu_peer_counts_get(rk__cu_peer_counts *out);

#endif /* RK_SRC_BACKEND_CUDA_PEER_H */
