/*
 * src/runtime/actor.c - where a kernel's output goes, and the actor API.
 *
 * Every message an instance sends, whatever backend runs it, comes here:
 * an actor or handler on a host backend through the rk_ctx_* calls, a
 * device instance's relay through the rk__backend_io it was handed at
 * launch (io_emit, io_publish, io_dead_letter). So the decision where a
 * kernel's output goes is written once (emit): its rk_connect route if it
 * has one, else a direct call's reply buffer when the output answers the
 * call, else the output queue; and a payload over max_payload is refused
 * the same way for both.
 *
 * The receive side of the actor API (rk_ctx_recv, rk_should_terminate)
 * belongs to the backend that runs the loop: the calls here check their
 * arguments and hand over to the ops the backend put in the context.
 */
#include <string.h>

#include "runtime/internal.h"

static rk__inst *
inst_of(rk__io *rt)
{
    return (rk__inst *)(void *)rt;
}

static rk__io *
io_of(rk__inst *inst)
{
    return (rk__io *)(void *)inst;
}

/* In a direct call with a reply buffer r: takes the reply to the call's
 * message (id), the first one that fits (rk_kernel_call_reply). */
static bool
capture(rk_call_reply *r, const rk_uuid *id, const rk_msg_header *h,
    const void *payload, size_t len)
{
    if (r->got || len > r->cap || memcmp(h->correlation_id.b, id->b, 16) != 0)
        return false;
    if (len != 0)
        memcpy(r->buf, payload, len);
    r->hdr = *h;
    r->len = len;
    r->got = true;
    return true;
}

/* The one place a kernel's output is routed (see the top of the file).
 * reply, id: a direct call's reply buffer and the call's message id (the
 * actor's context's capture, or a device caller's, io_emit_call), or
 * NULL. count: what went out is counted in the instance's sent (the
 * actor's thread is the instance; a device counts its own sends).
 * timeout_ns bounds the wait on a route's target under BLOCK, and on
 * the output queue (RK_EFULL, RK_ETIMEDOUT when it has no room):
 * RK_WAIT_FOREVER for an actor, as rk_ctx_send promises; a relay or a
 * caller on a device's lanes, which keeps the message and retries, passes
 * less (io_emit_wait, io_emit_call), so it never waits on a receiver
 * while it holds the lanes. */
static int
route(rk__inst *inst, rk_call_reply *reply, const rk_uuid *id, bool count,
    const rk_msg_header *h, const void *payload, size_t len,
    int64_t timeout_ns)
{
    /* Acquire pairs with the release store in rk_connect. */
    rk__kernel *to
        = atomic_load_explicit(&inst->k->route, memory_order_acquire);
    int rc;

    /* A message flagged for the host (a device kernel's
     * rk_dev_reply_host) is output even where the kernel is routed. */
    if (h->flags & RK_MSG_F_HOST)
        to = NULL;
    if (to != NULL && timeout_ns == RK_WAIT_FOREVER) {
        rc = rk__deliver(to, h, payload, len, RK_WAIT_FOREVER, "send");
    } else if (to != NULL) {
        rc = rk__deliver_try(to, h, payload, len, timeout_ns, "send");
    } else {
        if (len > inst->k->def.config.max_payload)
            return rk__fail(RK_EMSGSIZE,
                "kernel '%s': %zu-byte payload exceeds "
                "max_payload %u",
                inst->k->id, len, inst->k->def.config.max_payload);
        if (reply != NULL && capture(reply, id, h, payload, len))
            rc = RK_OK;
        else
            rc = rk__outq_send_until(
                &inst->out, h, sizeof(*h), payload, len, timeout_ns);
    }
    if (rc == RK_OK && count)
        rk_ctl_count(&inst->ctl->sent, 1);
    return rc;
}

/* route() for an actor's context (ctx) or a device relay (NULL). */
static int
emit(rk__inst *inst, rk_ctx *ctx, const rk_msg_header *h, const void *payload,
    size_t len, int64_t timeout_ns)
{
    return route(inst, ctx != NULL ? ctx->capture : NULL,
        ctx != NULL ? &ctx->capture_id : NULL, ctx != NULL, h, payload, len,
        timeout_ns);
}

/* ---------------------------------------------- rk__backend_io */

static int
io_emit(rk__io *rt, const rk_msg_header *h, const void *payload, size_t len)
{
    return emit(inst_of(rt), NULL, h, payload, len, RK_WAIT_FOREVER);
}

static int
io_emit_wait(rk__io *rt, const rk_msg_header *h, const void *payload,
    size_t len, int64_t timeout_ns)
{
    return emit(inst_of(rt), NULL, h, payload, len, timeout_ns);
}

static int
io_emit_call(rk__io *rt, rk_call_reply *reply, const rk_uuid *call_id,
    const rk_msg_header *h, const void *payload, size_t len)
{
    return route(
        inst_of(rt), reply, call_id, false, h, payload, len, RK_NO_WAIT);
}

static int
io_publish(rk__io *rt, const char *topic, const rk_msg_header *h,
    const void *payload, size_t len, size_t *delivered)
{
    rk__inst *inst = inst_of(rt);
    size_t n = 0;
    int rc = rk__publish(
        inst->k->rt, topic, h, payload, len, RK_WAIT_FOREVER, &n);

    if (delivered != NULL)
        *delivered = n;
    return rc;
}

static int
io_publish_device(rk__io *rt, uint32_t index, const rk_msg_header *h,
    const void *payload, size_t len, uint32_t carried, uint32_t dropped)
{
    return rk__publish_device(
        inst_of(rt), index, h, payload, len, carried, dropped);
}

static void
io_topic_device(rk__io *rt, uint32_t bit, uint64_t n)
{
    rk__topic_device_count(inst_of(rt), bit, n);
}

static void
io_dead_letter(rk__io *rt, rk_dead_reason reason, int error, const void *frame,
    size_t len)
{
    rk__inst *inst = inst_of(rt);

    rk__dead_letter(inst->k->rt, inst, reason, error, frame, len);
}

void
rk__io_init(rk__inst *inst)
{
    rk__kernel *k = inst->k;

    inst->io = (rk__backend_io) {
        .def = &k->def,
        .sender = k->slot + 1,
        .slot_size = inst->slot_size,
        .stride = inst->stride,
        .spill = inst->spill_mem.host,
        .telemetry = inst->telemetry,
        .latency = &inst->latency,
        /* The inbox's own entries: one indirect call each, no wrapper. */
        .in = inst->in,
        .take = inst->in->ops->take,
        .release = inst->in->ops->release,
        .depth = inst->in->ops->depth,
        .rt = io_of(inst),
        .emit = io_emit,
        .emit_wait = io_emit_wait,
        .emit_call = io_emit_call,
        .publish = io_publish,
        .publish_device = io_publish_device,
        .topic_device = io_topic_device,
        .dead_letter = io_dead_letter,
    };
    inst->ctx = (rk_ctx) {
        .io = &inst->io,
        .rt = io_of(inst),
        .user = k->def.config.user,
        .priority = RK_CTX_PRIORITY_INHERIT,
    };
}

/* -------------------------------------------------- the actor API */

bool
rk_should_terminate(rk_ctx *ctx)
{
    if (ctx == NULL)
        return true; /* no kernel to run for */
    return ctx->ops->should_terminate(ctx);
}

int
rk_ctx_recv(rk_ctx *ctx, rk_msg_view *out, int64_t timeout_ns)
{
    if (ctx == NULL || out == NULL)
        return rk__fail(RK_EINVAL, "rk_ctx_recv: NULL argument");
    if (ctx->in_handler)
        return rk__fail(RK_EINVAL,
            "rk_ctx_recv: kernel '%s' is a handler; the runtime receives",
            ctx->io->def->id);
    return ctx->ops->recv(ctx, out, timeout_ns);
}

static uint8_t
ctx_priority(const rk_ctx *ctx)
{
    if (ctx->priority != RK_CTX_PRIORITY_INHERIT)
        return (uint8_t)ctx->priority;
    if (ctx->cur != NULL)
        return ctx->cur->priority;
    return RK_MSG_PRIORITY_DEFAULT;
}

static void
ctx_header(rk_ctx *ctx, rk_msg_header *h, uint32_t type_id)
{
    rk__inst *inst = inst_of(ctx->rt);
    const rk_kernel_config *c = &inst->k->def.config;

    /* An output is stamped when the message it answers was (sampling
     * follows a message through a pipeline), or, sent outside any
     * message, as the kernel's sends are sampled. */
    uint64_t stamp = 0;
    if (inst->telemetry) {
        if (ctx->cur != NULL)
            stamp = ctx->cur->send_ns ? rk_now_ns() : 0;
        else
            stamp = rk__send_stamp(inst->k);
    }
    rk__header(h, type_id, ctx_priority(ctx), stamp, inst->k->slot + 1);
    if (c->output_type != NULL && c->output_type->id == type_id)
        h->type_version = c->output_type->version;
}

/* The kernel declared what it sends (output_type): anything else is
 * refused, as rk_send refuses what a kernel does not take. */
static int
check_output(rk_ctx *ctx, uint32_t type_id, const char *op)
{
    const rk_kernel_def *def = ctx->io->def;
    const rk_msgtype *ot = def->config.output_type;

    if (ot == NULL || ot->id == type_id || type_id == RK_MSG_TYPE_ERROR)
        return RK_OK;
    return rk__fail(RK_ETYPE, "%s: kernel '%s' sends %s (id %u), not id %u",
        op, def->id, ot->name, ot->id, type_id);
}

int
rk_ctx_send(rk_ctx *ctx, uint32_t type_id, const void *payload, size_t len)
{
    rk_msg_header h;
    int rc;

    if (ctx == NULL || (payload == NULL && len != 0))
        return rk__fail(RK_EINVAL, "rk_ctx_send: NULL argument");
    if ((rc = check_output(ctx, type_id, "rk_ctx_send")) != RK_OK)
        return rc;
    ctx_header(ctx, &h, type_id);
    h.payload_len = (uint32_t)len;
    return emit(inst_of(ctx->rt), ctx, &h, payload, len, RK_WAIT_FOREVER);
}

int
rk_ctx_reply(rk_ctx *ctx, const rk_msg_view *req, uint32_t type_id,
    const void *payload, size_t len)
{
    rk_msg_header h;
    int rc;

    if (ctx == NULL || req == NULL || req->hdr == NULL
        || (payload == NULL && len != 0))
        return rk__fail(RK_EINVAL, "rk_ctx_reply: NULL argument");
    if ((rc = check_output(ctx, type_id, "rk_ctx_reply")) != RK_OK)
        return rc;
    ctx_header(ctx, &h, type_id);
    h.payload_len = (uint32_t)len;
    h.priority = req->hdr->priority;
    rk_msg_reply(&h, req->hdr);
    return emit(inst_of(ctx->rt), ctx, &h, payload, len, RK_WAIT_FOREVER);
}

int
rk_ctx_reply_error(
    rk_ctx *ctx, const rk_msg_view *req, int err, const char *detail)
{
    unsigned char p[4 + 256];
    size_t n = detail != NULL ? strnlen(detail, 256) : 0, max;

    if (ctx == NULL)
        return rk__fail(RK_EINVAL, "rk_ctx_reply_error: NULL argument");
    if (err <= RK_OK || err >= RK__ERR_COUNT)
        return rk__fail(RK_EINVAL,
            "rk_ctx_reply_error: %d is not an RK_E* error code", err);
    /* The detail is cut to what an output slot holds. */
    max = ctx->io->def->config.max_payload;
    if (max >= 4 && n > max - 4)
        n = max - 4;
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)((uint32_t)err >> (8 * i));
    if (n != 0)
        memcpy(p + 4, detail, n);
    return rk_ctx_reply(ctx, req, RK_MSG_TYPE_ERROR, p, 4 + n);
}

int
rk_ctx_send_to(rk_ctx *ctx, rk_kernel target, uint32_t type_id,
    const void *payload, size_t len)
{
    rk__inst *inst;
    rk__kernel *to;
    rk_msg_header h;
    int rc;

    if (ctx == NULL || (payload == NULL && len != 0))
        return rk__fail(RK_EINVAL, "rk_ctx_send_to: NULL argument");
    inst = inst_of(ctx->rt);
    if ((rc = rk__resolve(inst->k->rt, target, &to)) != RK_OK)
        return rc;
    ctx_header(ctx, &h, type_id);
    h.payload_len = (uint32_t)len;
    rc = rk__deliver(to, &h, payload, len, RK_WAIT_FOREVER, "send");
    if (rc == RK_OK)
        rk_ctl_count(&inst->ctl->sent, 1);
    return rc;
}

int
rk_ctx_publish(rk_ctx *ctx, const char *topic, uint32_t type_id,
    const void *payload, size_t len)
{
    rk_msg_header h;
    size_t n = 0;
    int rc;

    if (ctx == NULL || topic == NULL || (payload == NULL && len != 0))
        return rk__fail(RK_EINVAL, "rk_ctx_publish: NULL argument");
    ctx_header(ctx, &h, type_id);
    h.payload_len = (uint32_t)len;
    rc = io_publish(ctx->rt, topic, &h, payload, len, &n);
    rk_ctl_count(&inst_of(ctx->rt)->ctl->sent, n);
    return rc;
}

int
rk_ctx_set_priority(rk_ctx *ctx, int priority)
{
    if (ctx == NULL
        || (priority != RK_CTX_PRIORITY_INHERIT
            && (priority < 0 || priority > 255)))
        return rk__fail(RK_EINVAL,
            "rk_ctx_set_priority: %d is not 0..255 or "
            "RK_CTX_PRIORITY_INHERIT",
            priority);
    ctx->priority = priority;
    return RK_OK;
}

void *
rk_ctx_user(rk_ctx *ctx)
{
    return ctx ? ctx->user : NULL;
}

const char *
rk_ctx_kernel_id(rk_ctx *ctx)
{
    return ctx ? ctx->io->def->id : NULL;
}

const rk_call_reply *
rk_ctx_call(rk_ctx *ctx)
{
    return ctx ? ctx->capture : NULL;
}

rk_runtime *
rk_ctx_runtime(rk_ctx *ctx)
{
    return ctx ? inst_of(ctx->rt)->k->rt : NULL;
}
