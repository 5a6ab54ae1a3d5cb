/*
 * src/backend/cuda/devhost.c - host half of a device instance's shared
 * region (see devhost.h).
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/devhost.h"
#include "common/common.h"
#include "ringkernel/ring_ll.h"

#define RK__DH_MAX_SLOT (1u << 24)

static size_t
round64(size_t n)
{
    return (n + 63u) & ~(size_t)63u;
}

int
rk__dh_check(const rk__dh_cfg *c)
{
    if (c->nblocks == 0 || c->nblocks > 65535)
        return rk__fail(RK_EINVAL, "grid of %u blocks (1..65535)", c->nblocks);
    if (c->nin == 0 || c->nin > RK_DEV_MAX_IN)
        return rk__fail(RK_EINVAL, "%u input lanes per block (1..%u)", c->nin,
            RK_DEV_MAX_IN);
    if (c->nroutes > RK_DEV_MAX_ROUTES)
        return rk__fail(RK_EINVAL, "%u routes per block (0..%u)", c->nroutes,
            RK_DEV_MAX_ROUTES);
    if (!rk__is_pow2(c->capacity) || c->capacity > (1u << 20))
        return rk__fail(RK_EINVAL,
            "lane capacity %u is not a power of two <= 2^20", c->capacity);
    if (c->slot_size <= RK_MSG_HEADER_SIZE || c->slot_size > RK__DH_MAX_SLOT
        || c->slot_size % 8 != 0)
        return rk__fail(RK_EINVAL,
            "slot size %u: must be a multiple of 8 in (64, 2^24]",
            c->slot_size);
    if (c->batch > RK_DEV_MAX_BATCH)
        return rk__fail(
            RK_EINVAL, "batch %u (0..%u)", c->batch, RK_DEV_MAX_BATCH);
    return RK_OK;
}

/* Every lane is sized as an LL lane (twice the slots' bytes: a flag per
 * 4 bytes); K2K ring lanes use half of theirs. */
static size_t
lane_bytes(const rk__dh_cfg *c)
{
    return sizeof(rk_ring_ctrl)
        + round64((size_t)rk_ring_ll_bytes(c->capacity, c->slot_size));
}

/* Offsets of the region's parts. */
typedef struct layout {
    size_t ctl, in_tab, out_tab, route_tab, topics, lanes, size;
} layout;

static void
compute(const rk__dh_cfg *c, layout *l)
{
    size_t nb = c->nblocks;
    size_t nlanes = nb * c->nin + nb;

    l->ctl = 0;
    l->in_tab = round64(RK_DEV_CTL_SIZE(nb));
    l->out_tab = l->in_tab + round64(nb * c->nin * sizeof(rk_dev_lane));
    l->route_tab = l->out_tab + round64(nb * sizeof(rk_dev_lane));
    l->topics = l->route_tab
        + round64((c->nroutes ? nb * c->nroutes : 1) * sizeof(rk_dev_lane));
    /* The blocks' topic counts (rk_dev_ctl_topics), for a kernel that may
     * have topic lanes (routes) only. */
    l->lanes = l->topics + (c->nroutes ? nb * sizeof(rk_dev_ctl_topics) : 0);
    l->size = l->lanes + nlanes * lane_bytes(c);
}

size_t
rk__dh_size(const rk__dh_cfg *c)
{
    layout l;

    if (rk__dh_check(c) != RK_OK)
        return 0;
    compute(c, &l);
    return l.size;
}

/* Each block stages its batch and its unpublished output in its dynamic
 * shared memory (dev_kernel.h): batch + stage_out slots, within
 * RK__DH_STAGE_BYTES (what a launch gets without opting in) unless a single
 * slot of each is already more. stage_out never exceeds the output lane's
 * capacity, so a flush always finds room once the host drains the lane. */
static void
stage_plan(const rk__dh_cfg *c, rk_dev_kargs *a)
{
    uint32_t batch = c->batch ? c->batch : 1;
    uint32_t out = batch < c->capacity ? batch : c->capacity;
    uint32_t fit = RK__DH_STAGE_BYTES / c->slot_size;

    if (batch + out > fit) {
        batch = fit / 2 > 1 ? fit / 2 : 1;
        out = fit > batch + 1 ? fit - batch : 1;
        if (out > c->capacity)
            out = c->capacity;
    }
    a->batch = batch;
    a->stage_out = out;
    a->stage_bytes = (batch + out) * c->slot_size;
}

/* The batch a block takes: what stage_plan above gives when the lane
 * holds at least two batches (then the output stage is a batch too). */
static uint32_t
block_batch(uint32_t batch, uint32_t slot_size)
{
    uint32_t fit = RK__DH_STAGE_BYTES / slot_size;

    batch = batch == 0             ? 1
        : batch > RK_DEV_MAX_BATCH ? RK_DEV_MAX_BATCH
                                   : batch;
    if (2 * batch > fit)
        batch = fit / 2 > 1 ? fit / 2 : 1;
    return batch;
}

int
rk__dh_lane_capacity(
    uint32_t batch, uint32_t slot_size, uint32_t want, uint32_t *capacity)
{
    uint32_t b = block_batch(batch, slot_size), cap = 1;
    uint64_t ll = 2 * (uint64_t)slot_size;

    if (want == 0) {
        while (cap < 2 * b)
            cap *= 2;
        while (
            cap < RK__DH_MIN_LANE && 2 * cap * ll <= RK__DH_DEFAULT_LANE_BYTES)
            cap *= 2;
        *capacity = cap;
        return RK_OK;
    }
    if (!rk__is_pow2(want) || want > (1u << 20))
        return rk__fail(
            RK_EINVAL, "lane_capacity %u is not a power of two <= 2^20", want);
    if (want < 2 * b)
        return rk__fail(RK_EINVAL,
            "lane_capacity %u is less than twice the batch of %u a block "
            "takes (%u-byte slots): at least %u",
            want, b, slot_size, 2 * b);
    if ((uint64_t)want * ll > RK__DH_MAX_LANE_BYTES)
        return rk__fail(RK_EINVAL,
            "lane_capacity %u x %u-byte slots is %llu bytes of mapped "
            "memory per lane (flags included), over %llu",
            want, slot_size, (unsigned long long)((uint64_t)want * ll),
            (unsigned long long)RK__DH_MAX_LANE_BYTES);
    *capacity = want;
    return RK_OK;
}

/* Device address of a host address inside the region. */
static void *
dev_addr(const rk__dh *d, const void *host)
{
    return (void *)(uintptr_t)(d->dev_base
        + (uint64_t)((const unsigned char *)host - d->base));
}

/* ll: the lane is an LL lane (ring_ll.h): the host's lanes (input lane 0
 * and the output lane); K2K input lanes are rings. */
static void
init_lane(rk__dh *d, unsigned char *at, rk_dev_lane *tab_entry,
    rk__dh_host_lane *host, int host_is_producer, int ll)
{
    rk_ring_ctrl *ctrl = (rk_ring_ctrl *)(void *)at;
    unsigned char *slots = at + sizeof(rk_ring_ctrl);

    rk_ring_init(ctrl, d->cfg.capacity, d->cfg.slot_size);
    tab_entry->ctrl = dev_addr(d, ctrl);
    tab_entry->slots = dev_addr(d, slots);
    tab_entry->format = ll ? RK_DEV_LANE_LL : RK_DEV_LANE_RING;
    tab_entry->reserved = 0;
    if (host != NULL) {
        host->ctrl = ctrl;
        host->ll = ll;
        if (host_is_producer)
            rk_ring_prod_attach(ctrl, &host->side, slots);
        else
            rk_ring_cons_attach(ctrl, &host->side, slots);
    }
}

int
rk__dh_place(rk__dh *d, const rk__dh_cfg *cfg, void *base, uint64_t dev_base,
    void *user)
{
    layout l;
    uint32_t nb = cfg->nblocks, b, i;
    unsigned char *lane;
    int rc = rk__dh_check(cfg);

    if (rc != RK_OK)
        return rc;
    if (base == NULL || ((uintptr_t)base & 63u) != 0)
        return rk__fail(RK_EINVAL, "region must be 64-byte aligned");
    compute(cfg, &l);
    memset(d, 0, sizeof(*d));
    d->cfg = *cfg;
    d->base = base;
    d->dev_base = dev_base;
    d->size = l.size;
    d->in = calloc((size_t)nb * cfg->nin, sizeof(*d->in));
    d->out = calloc(nb, sizeof(*d->out));
    d->in_lock = calloc(nb, sizeof(*d->in_lock));
    d->out_lock = calloc(nb, sizeof(*d->out_lock));
    d->wd_beat = calloc(nb, sizeof(*d->wd_beat));
    d->wd_head = calloc(nb, sizeof(*d->wd_head));
    if (!d->in || !d->out || !d->in_lock || !d->out_lock || !d->wd_beat
        || !d->wd_head) {
        rk__dh_fini(d);
        return rk__fail(RK_ENOMEM, "no memory for the host lane state");
    }
    for (b = 0; b < nb; b++) {
        pthread_mutex_init(&d->in_lock[b], NULL);
        pthread_mutex_init(&d->out_lock[b], NULL);
    }
    memset(base, 0, l.size);
    d->ctl = (rk_dev_ctl *)(void *)(d->base + l.ctl);
    d->in_tab = (rk_dev_lane *)(void *)(d->base + l.in_tab);
    d->out_tab = (rk_dev_lane *)(void *)(d->base + l.out_tab);
    d->route_tab = (rk_dev_lane *)(void *)(d->base + l.route_tab);
    d->topics = cfg->nroutes != 0
        ? (rk_dev_ctl_topics *)(void *)(d->base + l.topics)
        : NULL;
    atomic_init(&d->ctl->host.cmd, RK_DEV_CMD_HOLD);
    d->ctl->host.nblocks = nb;

    lane = d->base + l.lanes;
    for (b = 0; b < nb; b++) {
        for (i = 0; i < cfg->nin; i++, lane += lane_bytes(cfg))
            init_lane(d, lane, &d->in_tab[b * cfg->nin + i],
                &d->in[b * cfg->nin + i], 1, i == 0);
        init_lane(d, lane, &d->out_tab[b], &d->out[b], 0, 1);
        lane += lane_bytes(cfg);
    }
    d->kargs.ctl = dev_addr(d, d->ctl);
    d->kargs.in = dev_addr(d, d->in_tab);
    d->kargs.out = dev_addr(d, d->out_tab);
    d->kargs.routes = dev_addr(d, d->route_tab);
    d->kargs.topics = d->topics != NULL ? dev_addr(d, d->topics) : NULL;
    d->kargs.nin = cfg->nin;
    d->kargs.nroutes = cfg->nroutes;
    d->kargs.kernel_id = cfg->kernel_id;
    stage_plan(cfg, &d->kargs);
    d->kargs.user = user;
    return RK_OK;
}

void
rk__dh_fini(rk__dh *d)
{
    if (d->in_lock != NULL && d->out_lock != NULL)
        for (uint32_t b = 0; b < d->cfg.nblocks; b++) {
            pthread_mutex_destroy(&d->in_lock[b]);
            pthread_mutex_destroy(&d->out_lock[b]);
        }
    free(d->in);
    free(d->out);
    free(d->in_lock);
    free(d->out_lock);
    free(d->wd_beat);
    free(d->wd_head);
    d->wd_beat = NULL;
    d->wd_head = NULL;
    d->in = d->out = NULL;
    d->in_lock = d->out_lock = NULL;
}

int
rk__dh_connect(rk__dh *from, uint32_t b, uint32_t r, rk__dh *to, uint32_t tb,
    uint32_t lane)
{
    if (b >= from->cfg.nblocks || r >= from->cfg.nroutes
        || tb >= to->cfg.nblocks || lane == 0 || lane >= to->cfg.nin)
        return rk__fail(RK_EINVAL,
            "route %u of block %u -> lane %u of block %u does not exist", r, b,
            lane, tb);
    if (from->cfg.slot_size > to->cfg.slot_size)
        return rk__fail(RK_EINVAL,
            "route slots (%u bytes) exceed the "
            "target's (%u)",
            from->cfg.slot_size, to->cfg.slot_size);
    from->route_tab[b * from->cfg.nroutes + r]
        = to->in_tab[tb * to->cfg.nin + lane];
    return RK_OK;
}

/* Stores the current command into the next free slot of host lane l (an
 * LL lane), if it is free; fresh: re-read the head when the cached one
 * says full. Under the lane's lock. */
static void
cmd_word(rk__dh *d, rk__dh_host_lane *l, int fresh)
{
    rk_ring_side *s = &l->side;
    /* Relaxed: the host is cmd's only writer. */
    uint32_t cmd
        = atomic_load_explicit(&d->ctl->host.cmd, memory_order_relaxed);

    if (!l->ll)
        return;
    if (fresh ? rk_ring_prod_space(l->ctrl, s, 1) != 0
              : s->pos - s->peer < (uint64_t)s->mask + 1)
        rk_ring_ll_cmd_put(s, s->pos, cmd);
}

void
rk__dh_post(rk__dh *d, uint32_t cmd)
{
    rk_dev_ctl_host *h = &d->ctl->host;

    /* The host is the only writer of its line. activated is released
     * before cmd so a kernel that acquires cmd == STOP also sees it. */
    if (cmd == RK_DEV_CMD_RUN)
        atomic_store_explicit(&h->activated, 1, memory_order_release);
    /* Release pairs with the kernel's acquire of cmd (rk_dev_ctl_cmd):
     * every message enqueued before the command is visible with it. */
    atomic_store_explicit(&h->cmd, cmd, memory_order_release);
    atomic_store_explicit(&h->wake_seq,
        atomic_load_explicit(&h->wake_seq, memory_order_relaxed) + 1,
        memory_order_release);
    /* The same command in each host lane's free head slot, where an idle
     * block's poll reads it (no separate read of cmd). */
    for (uint32_t b = 0; b < d->cfg.nblocks; b++) {
        pthread_mutex_lock(&d->in_lock[b]);
        cmd_word(d, &d->in[b * d->cfg.nin], 1);
        pthread_mutex_unlock(&d->in_lock[b]);
    }
}

static int
all_acked(rk__dh *d, uint32_t want)
{
    for (uint32_t b = 0; b < d->cfg.nblocks; b++) {
        /* Acquire pairs with the block's release in rk_dev_ctl_ack. */
        uint32_t a
            = atomic_load_explicit(&d->ctl->blk[b].ack, memory_order_acquire);
        if (a != want && a != RK_DEV_ACK_EXITED)
            return 0;
    }
    return 1;
}

int
rk__dh_wait_ack(rk__dh *d, uint32_t want, uint64_t deadline)
{
    long ns = 1000;

    for (;;) {
        if (all_acked(d, want))
            return RK_OK;
        if (rk_now_ns() >= deadline)
            return all_acked(d, want) ? RK_OK : RK_ETIMEDOUT;
        /* Poll with back-off: the device cannot wake a futex. */
        if (ns < 64000) {
            sched_yield();
            ns *= 2;
        } else {
            struct timespec ts = { 0, 50000 };
            nanosleep(&ts, NULL);
        }
    }
}

void
rk__dh_status_get(rk__dh *d, rk__dh_status *st)
{
    memset(st, 0, sizeof(*st));
    st->ack = RK_DEV_ACK_EXITED; /* lowest ack of a live, unfaulted block */
    for (uint32_t b = 0; b < d->cfg.nblocks; b++) {
        rk_dev_ctl_block *k = &d->ctl->blk[b];
        uint32_t a = atomic_load_explicit(&k->ack, memory_order_acquire);
        if (a == RK_DEV_ACK_EXITED)
            st->exited++;
        else if (a == RK_DEV_ACK_FAULTED)
            st->faulted++;
        else if (a < st->ack)
            st->ack = a;
        if (a == RK_DEV_ACK_EXITED && st->exit_code == 0)
            st->exit_code = (int32_t)atomic_load_explicit(
                &k->exit_code, memory_order_relaxed);
        st->processed
            += atomic_load_explicit(&k->processed, memory_order_relaxed);
        st->sent += atomic_load_explicit(&k->sent, memory_order_relaxed);
        st->errors += atomic_load_explicit(&k->errors, memory_order_relaxed);
        st->heartbeat
            += atomic_load_explicit(&k->heartbeat, memory_order_relaxed);
    }
    if (st->faulted != 0 && st->ack == RK_DEV_ACK_EXITED)
        st->ack = RK_DEV_ACK_FAULTED; /* every live block is faulted */
}

uint64_t
rk__dh_topic_count(rk__dh *d, uint32_t j)
{
    uint64_t n = 0;

    for (uint32_t b = 0; d->topics != NULL && b < d->cfg.nblocks; b++)
        n += atomic_load_explicit(
            &d->topics[b].carried[j], memory_order_relaxed);
    return n;
}

void
rk__dh_verdict(rk__dh *d, uint32_t v)
{
    /* Release pairs with the block's acquire in rk_dev_ctl_verdict: the
     * host's copy of the failed slot is done before the block frees it. */
    atomic_store_explicit(&d->ctl->host.verdict, v, memory_order_release);
}

int
rk__dh_fault_of(rk__dh *d, uint32_t b, uint32_t *n, int32_t *err)
{
    rk_dev_ctl_block *k = &d->ctl->blk[b];
    /* Acquire pairs with the release of FAULTED in rk_dev_ctl_fault. */
    if (atomic_load_explicit(&k->ack, memory_order_acquire)
        != RK_DEV_ACK_FAULTED)
        return 0;
    *n = atomic_load_explicit(&k->faults, memory_order_relaxed);
    *err = (int32_t)atomic_load_explicit(&k->exit_code, memory_order_relaxed);
    return 1;
}

/* Copies the frame at position pos of host lane l (published: pos <
 * tail) to dst, cap bytes at most, and returns its length. */
static size_t
frame_copy(rk__dh *d, rk__dh_host_lane *l, uint64_t pos, unsigned char *dst,
    size_t cap)
{
    uint32_t plen, room = d->cfg.slot_size - RK_MSG_HEADER_SIZE;
    size_t n;

    if (l->ll) {
        /* Written whole before the tail was published. */
        (void)rk_ring_ll_get(&l->side, pos, 0, dst, RK_MSG_HEADER_SIZE);
        memcpy(
            &plen, dst + offsetof(rk_msg_header, payload_len), sizeof(plen));
    } else {
        memcpy(&plen,
            rk_ring_slot(&l->side, pos) + offsetof(rk_msg_header, payload_len),
            sizeof(plen));
    }
    if (plen > room)
        plen = room;
    n = RK_MSG_HEADER_SIZE + (size_t)plen;
    if (n > cap)
        n = cap;
    if (l->ll)
        (void)rk_ring_ll_get(&l->side, pos, RK_MSG_HEADER_SIZE,
            dst + RK_MSG_HEADER_SIZE, (uint32_t)(n - RK_MSG_HEADER_SIZE));
    else
        memcpy(dst, rk_ring_slot(&l->side, pos), n);
    return n;
}

uint32_t
rk__dh_failed_lane(rk__dh *d, uint32_t b)
{
    /* Acquire pairs with the release of FAULTED: failed_held is its. */
    if (atomic_load_explicit(&d->ctl->blk[b].ack, memory_order_acquire)
        != RK_DEV_ACK_FAULTED)
        return 0;
    return atomic_load_explicit(&d->ctl->blk[b].failed_held,
        memory_order_relaxed);
}

size_t
rk__dh_peek_failed(rk__dh *d, uint32_t b, unsigned char *dst, size_t cap)
{
    rk__dh_host_lane *l = &d->in[b * d->cfg.nin];
    uint64_t head, tail;

    /* The block stopped on the failed message, at the head of the lane
     * it names; only the host's lane (0) is host memory. */
    if (rk__dh_failed_lane(d, b) != 1)
        return 0;
    head = rk_ring_load_acquire(&l->ctrl->head);
    tail = rk_ring_load_acquire(&l->ctrl->tail);
    return head != tail ? frame_copy(d, l, head, dst, cap) : 0;
}

void
rk__dh_drop_failed(rk__dh *d, uint32_t b)
{
    rk__dh_host_lane *l = &d->in[b * d->cfg.nin];
    uint64_t head = rk_ring_load_acquire(&l->ctrl->head);

    /* The block is gone (its context lost): the host moves its head past
     * the failed frame, which was dead-lettered when the fault was
     * reported, so the clean-up (rk__dh_take_left) does not take it
     * again. Release pairs with take_left's acquire of head. */
    if (rk__dh_failed_lane(d, b) == 1
        && head != rk_ring_load_acquire(&l->ctrl->tail))
        rk_ring_release_head(l->ctrl, head + 1);
}

/* Writes the next slot of LL lane l (room checked) and publishes it: a
 * slot whose words carry its flag is visible as it is written, so there
 * is nothing to hold back; the tail follows at once (the host's own
 * accounting: pending, leftovers, the watchdog). Then the current command
 * goes into the next slot, if free, for the block's next poll. */
static void
ll_write(rk__dh *d, rk__dh_host_lane *l, const rk_msg_header *h,
    const void *payload, uint32_t len)
{
    rk_ring_side *s = &l->side;
    uint32_t win = rk_ring_ll_window(s);
    /* Words end at a 4-byte boundary; the device reads 16-byte lines, so
     * zero words fill the last line, and a short message's window. */
    uint32_t end = RK_MSG_HEADER_SIZE + ((len + 3u) & ~3u);
    uint32_t line_end = (end + 7u) & ~7u;
    rk_msg_header hh = *h;

    hh.payload_len = len;
    if (end > win) {
        /* What lies beyond the poll window first, the window last: a
         * block that sees the window whole finds the rest written too
         * (x86 keeps stores in order), so a long message costs it two
         * reads, not a spin. The flags make any order correct. */
        uint32_t in_win = win - RK_MSG_HEADER_SIZE; /* a multiple of 8 */
        rk_ring_ll_put(s, s->pos, win, (const unsigned char *)payload + in_win,
            len - in_win);
        rk_ring_ll_pad(s, s->pos, end, line_end);
        len = in_win;
        end = line_end = win;
    }
    rk_ring_ll_put(s, s->pos, 0, &hh, RK_MSG_HEADER_SIZE);
    if (len != 0)
        rk_ring_ll_put(s, s->pos, RK_MSG_HEADER_SIZE, payload, len);
    rk_ring_ll_pad(s, s->pos, end, line_end > win ? line_end : win);
    s->pos += 1;
    rk_ring_publish_tail(l->ctrl, s->pos);
    cmd_word(d, l, 0);
}

/* Writes the next slot of block b's host lane; publishes it (and the
 * slots written before it) if publish. An LL lane publishes at once. */
static int
lane_write(rk__dh *d, uint32_t b, const rk_msg_header *h, const void *payload,
    size_t len, int publish)
{
    rk__dh_host_lane *l;
    rk_msg_header hh;
    unsigned char *slot;
    int rc = RK_OK;

    if (b >= d->cfg.nblocks)
        return rk__fail(RK_EINVAL, "no block %u", b);
    if (len > d->cfg.slot_size - RK_MSG_HEADER_SIZE)
        return rk__fail(RK_EMSGSIZE, "%zu-byte payload, slots hold %u", len,
            d->cfg.slot_size - RK_MSG_HEADER_SIZE);
    l = &d->in[b * d->cfg.nin];
    pthread_mutex_lock(&d->in_lock[b]);
    if (rk_ring_prod_space(l->ctrl, &l->side, l->staged + 1) <= l->staged) {
        rc = RK_EFULL;
    } else if (l->ll) {
        ll_write(d, l, h, payload, (uint32_t)len);
    } else {
        slot = rk_ring_slot(&l->side, l->side.pos + l->staged);
        hh = *h;
        hh.payload_len = (uint32_t)len;
        memcpy(slot, &hh, sizeof(hh));
        if (len != 0)
            memcpy(slot + RK_MSG_HEADER_SIZE, payload, len);
        l->staged += 1;
    }
    if (publish && l->staged != 0) {
        rk_ring_prod_publish(l->ctrl, &l->side, l->staged);
        l->staged = 0;
    }
    pthread_mutex_unlock(&d->in_lock[b]);
    return rc;
}

int
rk__dh_send(rk__dh *d, uint32_t b, const rk_msg_header *h, const void *payload,
    size_t len)
{
    return lane_write(d, b, h, payload, len, 1);
}

int
rk__dh_write(rk__dh *d, uint32_t b, const rk_msg_header *h,
    const void *payload, size_t len)
{
    return lane_write(d, b, h, payload, len, 0);
}

void
rk__dh_publish(rk__dh *d, uint32_t b)
{
    rk__dh_host_lane *l;

    if (b >= d->cfg.nblocks)
        return;
    l = &d->in[b * d->cfg.nin];
    pthread_mutex_lock(&d->in_lock[b]);
    if (l->staged != 0) {
        rk_ring_prod_publish(l->ctrl, &l->side, l->staged);
        l->staged = 0;
    }
    pthread_mutex_unlock(&d->in_lock[b]);
}

uint32_t
rk__dh_room(rk__dh *d)
{
    uint32_t n = 0;

    for (uint32_t b = 0; b < d->cfg.nblocks; b++) {
        rk__dh_host_lane *l = &d->in[b * d->cfg.nin];
        pthread_mutex_lock(&d->in_lock[b]);
        n += rk_ring_prod_space(l->ctrl, &l->side, d->cfg.capacity)
            - l->staged;
        pthread_mutex_unlock(&d->in_lock[b]);
    }
    return n;
}

/* One frame from LL output lane l: found by its flags (the device stores
 * no tail), copied, handed back. */
static int
ll_recv(rk__dh *d, rk__dh_host_lane *l, void *buf, size_t cap, size_t *len)
{
    rk_ring_side *s = &l->side;
    rk_msg_header hh;
    uint32_t plen, room = d->cfg.slot_size - RK_MSG_HEADER_SIZE;

    if (!rk_ring_ll_get(s, s->pos, 0, &hh, RK_MSG_HEADER_SIZE))
        return RK_EEMPTY;
    plen = hh.payload_len > room ? room : hh.payload_len; /* bad device */
    if (RK_MSG_HEADER_SIZE + (size_t)plen > cap)
        return rk__fail(RK_EMSGSIZE, "frame of %u bytes, buffer %zu",
            RK_MSG_HEADER_SIZE + plen, cap);
    if (!rk_ring_ll_get(s, s->pos, RK_MSG_HEADER_SIZE,
            (unsigned char *)buf + RK_MSG_HEADER_SIZE, plen))
        return RK_EEMPTY; /* the rest is on its way */
    memcpy(buf, &hh, sizeof(hh));
    *len = RK_MSG_HEADER_SIZE + (size_t)plen;
    /* Release pairs with the device's acquire of head (rk_ring_prod_space):
     * our reads of the slot come before it may overwrite it. */
    rk_ring_cons_release(l->ctrl, s, 1);
    return RK_OK;
}

int
rk__dh_recv(rk__dh *d, uint32_t b, void *buf, size_t cap, size_t *len)
{
    rk__dh_host_lane *l;
    int rc = RK_OK;

    if (b >= d->cfg.nblocks)
        return rk__fail(RK_EINVAL, "no block %u", b);
    l = &d->out[b];
    pthread_mutex_lock(&d->out_lock[b]);
    if (l->ll) {
        rc = ll_recv(d, l, buf, cap, len);
    } else if (rk_ring_cons_avail(l->ctrl, &l->side, 1) == 0) {
        rc = RK_EEMPTY;
    } else {
        const unsigned char *slot = rk_ring_slot(&l->side, l->side.pos);
        uint32_t plen;
        memcpy(
            &plen, slot + offsetof(rk_msg_header, payload_len), sizeof(plen));
        if (plen > d->cfg.slot_size - RK_MSG_HEADER_SIZE)
            plen = d->cfg.slot_size - RK_MSG_HEADER_SIZE; /* bad device */
        if (RK_MSG_HEADER_SIZE + (size_t)plen > cap) {
            rc = rk__fail(RK_EMSGSIZE, "frame of %u bytes, buffer %zu",
                RK_MSG_HEADER_SIZE + plen, cap);
        } else {
            memcpy(buf, slot, RK_MSG_HEADER_SIZE + (size_t)plen);
            *len = RK_MSG_HEADER_SIZE + (size_t)plen;
            rk_ring_cons_release(l->ctrl, &l->side, 1);
        }
    }
    pthread_mutex_unlock(&d->out_lock[b]);
    return rc;
}

uint32_t
rk__dh_take_left(rk__dh *d, unsigned char *dst, size_t stride, uint32_t max)
{
    return rk__dh_take_left_from(d, 0, dst, stride, max);
}

uint32_t
rk__dh_take_left_from(
    rk__dh *d, uint64_t skip, unsigned char *dst, size_t stride, uint32_t max)
{
    uint32_t n = 0;

    for (uint32_t i = 0; i < d->cfg.nblocks * d->cfg.nin && n < max; i++) {
        rk_ring_ctrl *c = d->in[i].ctrl;
        /* The blocks have exited (acquire of their EXITED ack): their
         * last head is visible; read from there to the tail. */
        uint64_t pos = rk_ring_load_acquire(&c->head);
        uint64_t tail = rk_ring_load_acquire(&c->tail);
        if (skip >= tail - pos) {
            skip -= tail - pos;
            continue;
        }
        pos += skip;
        skip = 0;
        for (; pos < tail && n < max; pos++, n++)
            (void)frame_copy(
                d, &d->in[i], pos, dst + (size_t)n * stride, stride);
    }
    return n;
}

uint64_t
rk__dh_pending(rk__dh *d, uint32_t b)
{
    uint64_t n = 0;

    for (uint32_t i = 0; i < d->cfg.nin; i++) {
        rk_ring_ctrl *c = d->in[b * d->cfg.nin + i].ctrl;
        /* Head first: head <= tail always holds for the values read. */
        uint64_t head = rk_ring_load_acquire(&c->head);
        uint64_t tail = rk_ring_load_acquire(&c->tail);
        n += tail - head;
    }
    return n;
}

bool
rk__dh_out_pending(rk__dh *d)
{
    for (uint32_t b = 0; b < d->cfg.nblocks; b++) {
        const rk__dh_host_lane *l = &d->out[b];
        rk_ring_ctrl *c = l->ctrl;
        /* head is the host consumer's own (any host thread may peek: its
         * acquire pairs with the consumer's release). */
        uint64_t head = rk_ring_load_acquire(&c->head);
        if (l->ll) {
            /* An LL lane has no tail: the slot at head is a message once
             * its word 0 carries the flag of that position (ring_ll.h). */
            uint64_t w = rk_ring_ll_word0(&l->side, head);
            if ((uint32_t)(w >> 32) == rk_ring_ll_flag(head))
                return true;
        } else if (rk_ring_load_acquire(&c->tail) != head) {
            /* Acquire pairs with the block's release of tail. */
            return true;
        }
    }
    return false;
}

int
rk__dh_watchdog(rk__dh *d, const char *who)
{
    int armed = d->wd_armed, hung = -1;
    uint64_t hung_pending = 0;

    d->wd_armed = 1;
    for (uint32_t b = 0; b < d->cfg.nblocks; b++) {
        rk_dev_ctl_block *k = &d->ctl->blk[b];
        /* Acquire pairs with the block's release in rk_dev_ctl_ack. */
        uint32_t a = atomic_load_explicit(&k->ack, memory_order_acquire);
        uint32_t beat
            = atomic_load_explicit(&k->heartbeat, memory_order_relaxed);
        uint64_t head = 0, pending = rk__dh_pending(d, b);
        int moved;

        for (uint32_t i = 0; i < d->cfg.nin; i++)
            head
                += rk_ring_load_acquire(&d->in[b * d->cfg.nin + i].ctrl->head);
        moved = beat != d->wd_beat[b] || head != d->wd_head[b];
        d->wd_beat[b] = beat;
        d->wd_head[b] = head;
        if (!armed || moved || pending == 0 || a == RK_DEV_ACK_PAUSED
            || a == RK_DEV_ACK_HELD || a == RK_DEV_ACK_FAULTED
            || a == RK_DEV_ACK_EXITED || hung >= 0)
            continue;
        hung = (int)b;
        hung_pending = pending;
    }
    if (hung < 0)
        return RK_OK;
    return rk__fail(RK_ETIMEDOUT,
        "kernel '%s': block %d of %u stopped (heartbeat %u, input head "
        "%llu unchanged) with %llu message(s) queued",
        who, hung, d->cfg.nblocks, d->wd_beat[hung],
        (unsigned long long)d->wd_head[hung],
        (unsigned long long)hung_pending);
}
