/*
 * src/cluster/inject.c - envelope-preserving sends for the cluster (see
 * inject.h). The only file of src/cluster/ that includes a runtime
 * internal header; it uses rk__resolve, rk__deliver and rk__publish as
 * rk_send and rk_publish do, and changes nothing in the runtime.
 */
#include "cluster/inject.h"

#include "common/common.h"
#include "runtime/internal.h"

static void
envelope(rk_msg_header *out, const rk_msg_header *h, size_t len, bool stamp)
{
    *out = *h;
    out->magic = RK_MSG_MAGIC;
    out->version = RK_MSG_VERSION;
    out->payload_len = (uint32_t)len;
    out->send_ns = stamp ? rk_now_ns() : 0;
    out->sender = 0;
    out->reserved = 0;
}

int
rk__cluster_send_frame(rk_runtime *rt, rk_kernel kh, const rk_msg_header *h,
    const void *payload, size_t len, int64_t timeout_ns)
{
    rk__kernel *k;
    rk_msg_header out;
    int rc;

    if (h == NULL || (payload == NULL && len != 0))
        return rk__fail(RK_EINVAL, "rk__cluster_send_frame: NULL argument");
    if ((rc = rk__resolve(rt, kh, &k)) != RK_OK)
        return rc;
    envelope(&out, h, len, rk__stamp(k));
    return rk__deliver(k, &out, payload, len, timeout_ns);
}

int
rk__cluster_publish_frame(rk_runtime *rt, const char *topic,
    const rk_msg_header *h, const void *payload, size_t len,
    int64_t timeout_ns, size_t *delivered)
{
    rk_msg_header out;

    if (rt == NULL || topic == NULL || h == NULL
        || (payload == NULL && len != 0))
        return rk__fail(RK_EINVAL, "rk__cluster_publish_frame: NULL argument");
    envelope(&out, h, len, true);
    return rk__publish(rt, topic, &out, payload, len, timeout_ns, delivered);
}
