/*
 * src/cluster/inject.h - the two runtime entry points the cluster needs
 * that the public API does not have: delivering a message with a given
 * envelope (message id, correlation id, priority, type, flags), as
 * rk_send does with a fresh one, and publishing one. They are the only
 * place src/cluster/ reaches into src/runtime/ (inject.c); the public
 * forms proposed for the core are in docs/cluster.md ("Core hooks").
 */
#ifndef RK_SRC_CLUSTER_INJECT_H
#define RK_SRC_CLUSTER_INJECT_H

#include "ringkernel/runtime.h"

/* Envelope flag bits the cluster sets on what it injects (the runtime's
 * bits 8-31 of rk_msg_header.flags; users' sends never carry them). */
#define RK__CL_F_INJECT 0x80000000u /* a reply for a proxy to put out */
#define RK__CL_F_REMOTE 0x40000000u /* a publish that came from a peer */

/* Like rk_send, but the envelope's message id, correlation id, priority,
 * type id, type version and flags come from h (magic, version, length,
 * timestamp and sender are set here). */
int rk__cluster_send_frame(rk_runtime *rt, rk_kernel k, const rk_msg_header *h,
    const void *payload, size_t len, int64_t timeout_ns);

/* Like rk_publish with the envelope taken from h, as above. */
int rk__cluster_publish_frame(rk_runtime *rt, const char *topic,
    const rk_msg_header *h, const void *payload, size_t len,
    int64_t timeout_ns, size_t *delivered);

#endif /* RK_SRC_CLUSTER_INJECT_H */
