/*
 * src/backend/cuda/direct.c - the lanes' owner word, output lanes -> the
 * runtime, and the caller's own path into an idle device instance (see
 * direct.h; the relay is cuda.c's).
 */
#include <sched.h>
#include <string.h>

#include "backend/cuda/direct.h"
#include "common/common.h"

/* How long a direct call polls for the device to take its message and
 * answer before it leaves the rest to the relay (the call still returns
 * RK_OK: the message is in the lane; a reply then comes through the
 * output queue). Bounds how long a caller holds the lanes when a block
 * is slow or hung; other senders and commands end the wait at once. */
#define DIRECT_WAIT_NS 100000000ull

bool
rk__lanes_take(rk__cuda_lanes *l, uint32_t who)
{
    uint32_t free_ = RK__LANES_FREE;

    /* Acquire pairs with the release store in rk__lanes_give: the lanes'
     * host sides, held and rr as the last holder left them. */
    return atomic_compare_exchange_strong_explicit(
        &l->owner, &free_, who, memory_order_acquire, memory_order_relaxed);
}

void
rk__lanes_give(rk__cuda_lanes *l)
{
    /* Release pairs with the acquire CAS in rk__lanes_take. */
    atomic_store_explicit(&l->owner, RK__LANES_FREE, memory_order_release);
}

void
rk__lanes_relax(uint32_t *spins)
{
    if (++*spins % 64 == 0)
        sched_yield();
    else
        rk__cpu_relax();
}

void
rk__lanes_close(rk__cuda_lanes *l)
{
    uint32_t spins = 0;

    for (;;) {
        uint32_t o = atomic_load_explicit(&l->owner, memory_order_relaxed);
        if (o == RK__LANES_CLOSED)
            return;
        /* Acquire: as rk__lanes_take (what a caller did is visible). The
         * relay itself may hold them (it closes from its own pass). */
        if ((o == RK__LANES_FREE || o == RK__LANES_RELAY)
            && atomic_compare_exchange_weak_explicit(&l->owner, &o,
                RK__LANES_CLOSED, memory_order_acquire, memory_order_relaxed))
            return;
        rk__lanes_relax(&spins);
    }
}

_Static_assert(RK_DEV_MSG_F_TOPIC == RK_MSG_F_TOPIC,
    "the device's publish flag is the host's");

/* A device publish (RK_DEV_MSG_F_TOPIC): the topic index and the masks
 * of the subscribers its K2K lanes reached (the header's reserved word:
 * carried, then dropped, rk_dev_publish) go to the runtime's fan-out,
 * which names the topic (RK_ENOTFOUND for an index with no name) and
 * delivers to the others; the frame goes on with those cleared. */
static int
publish_one(const rk__backend_io *io, rk_msg_header *h, const void *payload,
    size_t len)
{
    uint32_t i = h->flags >> RK_DEV_MSG_TOPIC_SHIFT;
    uint32_t carried = h->reserved & 0xffu, dropped = h->reserved >> 8;

    h->flags &= (1u << RK_DEV_MSG_TOPIC_SHIFT) - 1u;
    h->flags &= ~RK_DEV_MSG_F_TOPIC;
    h->reserved = 0;
    return io->publish_device(io->rt, i, h, payload, len, carried, dropped);
}

/* One output frame to the runtime. Returns 0 when a route's target had
 * no room in timeout_ns under BLOCK, or the output queue had none (it
 * never waits longer for a receiver while the lanes are held): the caller
 * keeps the frame and tries again. An output the runtime refuses otherwise (over max_payload, a
 * target that is gone or whose REJECT or DROP_NEW policy refused it)
 * cannot be handed back to the block that sent it: it is dead-lettered
 * with the refusal's code and counted in the kernel's errors, so none is
 * lost uncounted. */
static int
out_one(rk__cuda_lanes *l, unsigned char *f, size_t len, int64_t timeout_ns,
    struct rk_call_reply *reply, const rk_uuid *call_id)
{
    const rk__backend_io *io = l->io;
    size_t plen = len > RK_MSG_HEADER_SIZE ? len - RK_MSG_HEADER_SIZE : 0;
    rk_msg_header h;
    int rc;

    memcpy(&h, f, sizeof(h));
    if ((h.flags & RK_DEV_MSG_F_TOPIC) != 0) {
        /* The masks are the relay's alone: a refused publish is
         * dead-lettered with reserved 0 (the topic flag and index kept:
         * which topic it was), and never held to be retried (the fan-out
         * has delivered it to the others). */
        memset(f + offsetof(rk_msg_header, reserved), 0, sizeof(h.reserved));
        rc = publish_one(io, &h, f + RK_MSG_HEADER_SIZE, plen);
    } else {
        rc = reply != NULL
            ? io->emit_call(
                io->rt, reply, call_id, &h, f + RK_MSG_HEADER_SIZE, plen)
            : io->emit_wait(
                io->rt, &h, f + RK_MSG_HEADER_SIZE, plen, timeout_ns);
        if (rc == RK_EFULL || rc == RK_ETIMEDOUT)
            return 0;
    }
    if (rc != RK_OK) {
        atomic_fetch_add_explicit(&l->out_errors, 1, memory_order_relaxed);
        io->dead_letter(io->rt, RK_DEAD_FAILED, rc, f,
            len <= io->slot_size ? len : RK_MSG_HEADER_SIZE);
    }
    return 1;
}

_Static_assert(RK__TOPIC_OUT_MAX <= RK_DEV_CTL_TOPICS,
    "a topic_out bit has a count in the blocks' topic lines");

void
rk__lanes_topics(rk__cuda_lanes *l)
{
    const rk_dev_kargs *a = &l->d->kargs;

    for (uint32_t r = 0; l->d->topics != NULL && r < a->nroutes; r++) {
        uint32_t j = a->topic_bit[r];
        uint64_t n;
        if (a->topic_of[r] == 0 || j >= RK_DEV_CTL_TOPICS
            || l->io->topic_device == NULL
            || (n = rk__dh_topic_count(l->d, j)) == l->tfolded[j])
            continue;
        /* A block's count only grows within a launch; one that starts
         * again from 0 (a region laid out anew) counts from there. */
        l->io->topic_device(
            l->io->rt, j, n > l->tfolded[j] ? n - l->tfolded[j] : n);
        l->tfolded[j] = n;
    }
}

size_t
rk__lanes_out(rk__cuda_lanes *l, int64_t timeout_ns, size_t max,
    struct rk_call_reply *reply, const rk_uuid *call_id)
{
    size_t moved = 0, len;
    size_t held = atomic_load_explicit(&l->held_len, memory_order_relaxed);
    unsigned char *f = l->buf;

    if (held != 0 && max != 0) {
        if (!out_one(l, l->held, held, timeout_ns, reply, call_id))
            return 0;
        atomic_store_explicit(&l->held_len, 0, memory_order_relaxed);
        moved++;
    }
    for (uint32_t b = 0; b < l->d->cfg.nblocks && moved < max; b++) {
        while (moved < max
            && rk__dh_recv(l->d, b, f, l->io->stride, &len) == RK_OK) {
            if (!out_one(l, f, len, timeout_ns, reply, call_id)) {
                memcpy(l->held, f, len);
                atomic_store_explicit(&l->held_len, len, memory_order_relaxed);
                return moved;
            }
            moved++;
        }
    }
    return moved;
}

/* ------------------------------------------------- the caller's path */

/* Takes the lanes for a caller: true, or false with *rc RK_EBUSY (the
 * relay or another caller holds them) or RK_ECLOSED (the device ended). */
static bool
enter(rk__cuda_lanes *l, int *rc)
{
    *rc = RK_EBUSY;
    if (l->off)
        return false;
    if (rk__lanes_take(l, RK__LANES_CALLER))
        return true;
    if (atomic_load_explicit(&l->owner, memory_order_relaxed)
        == RK__LANES_CLOSED)
        *rc = rk__fail(RK_ECLOSED,
            "kernel '%s': its device instance has ended (its lanes are "
            "closed)",
            l->id);
    else
        *rc = RK_EBUSY;
    return false;
}

/* Leaves the lanes; the relay is woken when the device still holds
 * input or output it must take over. */
static void
leave(rk__cuda_lanes *l)
{
    bool work = rk__dh_out_pending(l->d)
        || atomic_load_explicit(&l->held_len, memory_order_relaxed) != 0;

    for (uint32_t b = 0; !work && b < l->d->cfg.nblocks; b++)
        work = rk__dh_pending(l->d, b) != 0;
    rk__lanes_give(l);
    if (work)
        rk__ec_notify_all(l->wake);
}

/* Idle, for a caller that holds the lanes: the runtime and the relay both
 * say RUN (the relay posts commands only while it holds the lanes, so the
 * device's command cannot change under the caller), every block runs,
 * nothing is queued in the inbox or held for a route. */
static bool
idle(rk__cuda_lanes *l)
{
    rk__dh_status st;

    /* Acquire pairs with the runtime's release in rk_ctl_post. */
    if (rk_ctl_cmd(l->ctl) != RK_CTL_RUN
        || atomic_load_explicit(&l->d->ctl->host.cmd, memory_order_relaxed)
            != RK_DEV_CMD_RUN
        || atomic_load_explicit(&l->held_len, memory_order_relaxed) != 0
        || l->io->depth(l->io->in) != 0)
        return false;
    rk__dh_status_get(l->d, &st);
    return st.ack == RK_DEV_ACK_RUNNING && st.faulted == 0 && st.exited == 0;
}

/* Writes one message to the next block with room (round robin) without
 * publishing it: *blk is that block. RK_OK, RK_EBUSY (every lane full),
 * RK_EMSGSIZE. */
static int
write_one(rk__cuda_lanes *l, const rk_msg_header *h, const void *payload,
    size_t len, uint32_t *blk)
{
    uint32_t nb = l->d->cfg.nblocks;

    for (uint32_t t = 0; t < nb; t++) {
        uint32_t b = l->rr;
        int rc;

        l->rr = (l->rr + 1) % nb;
        rc = rk__dh_write(l->d, b, h, payload, len);
        if (rc == RK_OK) {
            *blk = b;
            return RK_OK;
        }
        if (rc != RK_EFULL)
            return rc;
    }
    return RK_EBUSY;
}

int
rk__cuda_direct_send(
    rk__cuda_lanes *l, const rk_msg_header *h, const void *payload, size_t len)
{
    uint32_t b;
    int rc = RK_EBUSY;

    if (!enter(l, &rc))
        return rc;
    if (idle(l) && (rc = write_one(l, h, payload, len, &b)) == RK_OK)
        rk__dh_publish(l->d, b);
    leave(l); /* wakes the relay: the answer may be routed */
    return rc;
}

int
rk__cuda_direct_call(rk__cuda_lanes *l, const rk_msg_header *h,
    const void *payload, size_t len, struct rk_call_reply *reply)
{
    uint64_t deadline = rk_now_ns() + DIRECT_WAIT_NS;
    uint32_t b, spins = 0;
    int rc = RK_EBUSY;

    if (!enter(l, &rc))
        return rc;
    if (!idle(l) || (rc = write_one(l, h, payload, len, &b)) != RK_OK) {
        leave(l);
        return rc;
    }
    rk__dh_publish(l->d, b);
    if (reply != NULL && reply->deadline_ns != 0
        && reply->deadline_ns < deadline)
        deadline = reply->deadline_ns;
    /* Poll the output lanes for the answer. The block publishes its
     * output before it hands its input back (rk_dev__commit), so once
     * block b holds no input, everything it answered is in its lane. */
    for (;;) {
        bool done = rk__dh_pending(l->d, b) == 0;
        uint32_t ack;

        (void)rk__lanes_out(l, RK_NO_WAIT, SIZE_MAX, reply, &h->message_id);
        if (done || (reply != NULL && reply->got)
            || atomic_load_explicit(&l->held_len, memory_order_relaxed) != 0)
            break;
        /* Acquire pairs with the block's release of its ack. */
        ack = atomic_load_explicit(
            &l->d->ctl->blk[b].ack, memory_order_acquire);
        /* A fault is the relay's to report; other senders and a new
         * command are the relay's to serve: the rest of the answer then
         * comes through the output queue. */
        if (ack != RK_DEV_ACK_RUNNING || l->io->depth(l->io->in) != 0
            || rk_ctl_cmd(l->ctl) != RK_CTL_RUN || rk_now_ns() >= deadline)
            break;
        rk__lanes_relax(&spins);
    }
    leave(l);
    return RK_OK;
}

int
rk__cuda_direct_batch(rk__cuda_lanes *l, size_t n,
    void (*frame)(void *arg, size_t i, rk_msg_header *h, const void **payload),
    void *arg, size_t *done)
{
    size_t i = 0, room;
    int rc = RK_EBUSY;

    *done = 0;
    if (!enter(l, &rc))
        return rc;
    if (!idle(l)) {
        leave(l);
        return RK_EBUSY;
    }
    room = rk__dh_room(l->d);
    for (rc = RK_OK; i < n && i < room && rc == RK_OK; i++) {
        rk_msg_header h;
        const void *p;
        uint32_t b;

        frame(arg, i, &h, &p);
        if ((rc = write_one(l, &h, p, h.payload_len, &b)) != RK_OK)
            break;
    }
    /* One release of each lane's tail for the whole batch. */
    for (uint32_t b = 0; b < l->d->cfg.nblocks; b++)
        rk__dh_publish(l->d, b);
    leave(l);
    *done = i;
    return i != 0 ? RK_OK : rc == RK_OK ? RK_EBUSY : rc;
}

size_t
rk__cuda_direct_pull(rk__cuda_lanes *l, size_t max)
{
    size_t n = 0;

    if (l->off || !rk__dh_out_pending(l->d)
        || !rk__lanes_take(l, RK__LANES_CALLER))
        return 0;
    n = rk__lanes_out(l, RK_NO_WAIT, max, NULL, NULL);
    rk__lanes_give(l);
    return n;
}
