/*
 * src/backend/cuda/cuda.c - the CUDA backend: each kernel instance is one
 * persistent GPU kernel (ringkernel/dev_kernel.h) whose thread blocks are
 * actors polling ring_proto.h lanes in mapped pinned host memory.
 *
 * What runs where:
 *   - the device: the persistent loop, one actor per block, reading its
 *     input lanes and writing its output lane and K2K routes, reporting on
 *     its own line of the device control block (dev_ctl.h);
 *   - the host relay (one thread per instance, here): the runtime's
 *     inbox (rk__inbox, which needs CAS and stays on the host) -> the
 *     blocks' input lanes; their output lanes -> the runtime's output
 *     queue or rk_connect route; the runtime's rk_ctl commands -> the
 *     device control block; the blocks' acks, counters and exit -> rk_ctl
 *     (the relay is the instance's single writer of rk_ctl's instance
 *     lines); the heartbeat watchdog.
 *   - host callers (direct.c), when the relay is idle: the caller's own
 *     path writes an input lane and reads the output lanes on the calling
 *     thread; a host-only ownership word (rk__cuda_lanes.owner) says
 *     whether the relay or one caller works the lanes, and the relay
 *     takes it only for a pass with work for them;
 *   - nothing crosses PCIe but loads and stores (no host<->device RMW).
 *
 * Memory: the runtime's rk_ctl and spill area come from cuda_alloc
 * (cuMemHostAlloc, DEVICEMAP|PORTABLE). launch allocates the device region
 * (control block + lanes) the same way, before the kernel starts, and
 * destroy frees it only after the kernel has returned: freeing or a
 * synchronous copy on the legacy stream while a persistent kernel is
 * resident can block forever (the memory layer defers every pinned and
 * device free while one is: memory/mem.h). A kernel that has not returned
 * at destroy (watchdog, detach) keeps its memory until it does
 * (devwide.h's zombies). What is per device (modules, the resident
 * kernels, co-residency) is devwide.c's.
 *
 * Threads: launch/destroy under the kernel's lock (backend.h); send,
 * call, send_batch, pull and relayed from any host thread. Whoever holds
 * the lanes (the relay or a caller, direct.h) works their host sides; the
 * relay alone writes rk_ctl's instance lines.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/cuda/devhost.h"
#include "backend/cuda/devwide.h"
#include "backend/cuda/direct.h"
#include "backend/cuda/exec.h"
#include "backend/cuda/k2k.h"
#include "backend/cuda/nvrtc.h"
#include "common/common.h"
#include "device/cuda_driver.h"
#include "memory/mem.h"
#include "queue/inbox.h"

#define CU_ATTR_KERNEL_EXEC_TIMEOUT     17
#define CU_FUNC_ATTR_MAX_DYNAMIC_SHARED 8

#define RELAY_IDLE_MAX_NS 200000u /* longest relay park when idle */
/* How long the relay keeps polling after its last traffic before it
 * parks: a request-reply client sends its next message within this, and
 * a parked relay costs a futex wake-up on the round trip. */
#define RELAY_SPIN_NS 50000u
/* At exit, how long one output frame may wait for a full target. */
#define RELAY_EXIT_WAIT_NS 1000000000ll
#define WATCHDOG_NS        2000000000ull /* RK_CUDA_WATCHDOG_MS overrides */
/* How often the relay asks its stream whether the context still works. */
#define RELAY_QUERY_NS 1000000ull
/* Longest relay park while a caller holds the lanes. */
#define RELAY_BLOCKED_NS 20000u

struct rk__backend_inst {
    const struct rk__cuda_driver *drv;
    struct rk__cuda_ext ext;
    const rk__backend_io *io; /* the runtime's side (launch spec) */
    rk_ctl *ctl;
    rk__ec *wake, *events;
    rk__ec *ack; /* notified when the relay publishes an ack */
    char id[RK_ID_MAX + 1];
    int ordinal;

    rk__placed region; /* control block + lanes (devhost) */
    rk__dh d;
    rk__cu_module mod;
    rk__cu_stream stream;
    int launched;         /* cuLaunchKernel succeeded */
    int counted;          /* counted in `resident` (until returned()) */
    rk__cu_res *res;      /* devwide's entry while counted */
    uint32_t per_sm, sms; /* co_resident(): its blocks per SM, the SMs */

    pthread_t relay;
    int relay_started;
    _Atomic uint32_t relay_stop;
    _Atomic uint32_t hung; /* the watchdog fired: never free the region */
    /* The lanes' host sides, held by the relay or by a caller on the
     * caller's own path (direct.h), with the output frame buffers. */
    rk__cuda_lanes lanes;
    uint32_t batch;
    uint32_t last_cmd;
    /* Faults, one at a time: 1 reported on rk_ctl, 2 verdict forwarded
     * to the device (until the block leaves FAULTED). */
    int fault_state;
    uint32_t fault_blk, fault_n, fault_code;
    int gave_up;
    uint32_t *handled;   /* per block: faults already reported */
    uint32_t *touched;   /* relay_in: the block each frame went to */
    rk__k2k k2k;         /* rk_connect routes carried on the device */
};

/* ------------------------------------------------------------ probe */

static int
cuda_probe(void)
{
    const struct rk__cuda_driver *d;
    int rc, a, b;

    if ((rc = rk__cuda_driver(&d)) != RK_OK)
        return rc; /* RK_ENODEV with the loader's reason */
    if (rk__cuda_ext() == NULL)
        return rk__fail(RK_ENODEV,
            "the CUDA driver lacks "
            "cuModuleLoadDataEx or the occupancy API");
    if (rk__nvrtc_version(&a, &b) != RK_OK)
        return rk__fail(
            RK_ENODEV, "no NVRTC to compile device code: %s", rk_errdetail());
    return RK_OK;
}

static int
cuda_check(const rk__backend_launch *spec)
{
    if (spec->grid_size > 65535 || spec->block_size > 1024)
        return rk__fail(RK_EINVAL,
            "kernel '%s': grid %u x block %u (at most 65535 x 1024)",
            spec->kernel_id, spec->grid_size, spec->block_size);
    return RK_OK;
}

/* ------------------------------------------------------------ memory */

static int
cuda_alloc(size_t size, rk__placed *out)
{
    const struct rk__cuda_driver *d;
    void *p = NULL;
    rk__cu_dptr dev = 0;
    size_t n = (size + 63) & ~(size_t)63;
    rk__cu_ctx cur = NULL;
    int rc;

    /* Any device's context: PORTABLE memory is every context's, and with
     * unified addressing its device address is the same in each. The
     * calling thread's current context is kept (a launch has entered its
     * kernel's device). */
    if ((rc = rk__cuda_driver(&d)) != RK_OK)
        return rc;
    if ((d->cuCtxGetCurrent(&cur) != RK__CUDA_SUCCESS || cur == NULL)
        && (rc = rk__cuda_enter(rk__cu_ordinal(NULL), &d)) != RK_OK)
        return rc;
    /* Pinned and mapped: the device reads and writes it over PCIe with
     * system-scope loads and stores; PORTABLE: every context sees it. */
    rc = rk__cuda_check(
        d->cuMemHostAlloc(&p, n ? n : 64,
            RK__CU_MEMHOSTALLOC_DEVICEMAP | RK__CU_MEMHOSTALLOC_PORTABLE),
        "cuMemHostAlloc");
    if (rc != RK_OK)
        return rk__cu_lost(rc); /* a lost context says so */
    if (((uintptr_t)p & 63u) != 0) {
        d->cuMemFreeHost(p);
        return rk__fail(RK_ECUDA, "cuMemHostAlloc returned unaligned memory");
    }
    rc = rk__cuda_check(
        d->cuMemHostGetDevicePointer(&dev, p, 0), "cuMemHostGetDevicePointer");
    if (rc != RK_OK) {
        d->cuMemFreeHost(p);
        return rc;
    }
    memset(p, 0, n ? n : 64);
    *out = (rk__placed) { .host = p, .dev = dev, .size = size };
    return RK_OK;
}

/* Freed by the memory layer, which defers it while any persistent kernel
 * is resident (a free may wait for them forever). */
static void
cuda_release(rk__placed *p)
{
    if (p->host != NULL)
        rk__mem_release(
            RK__MEM_PINNED, rk__cu_ordinal(NULL), NULL, p->host, p->size);
    p->host = NULL;
}

/* The device's compute capability (major * 10 + minor), or 0. */
static int
device_cc(const struct rk__cuda_driver *d, int ord)
{
    rk__cu_device dev;
    int major = 0, minor = 0;

    if (d->cuDeviceGet(&dev, ord) != RK__CUDA_SUCCESS)
        return 0;
    d->cuDeviceGetAttribute(&major, RK__CU_ATTR_COMPUTE_CAPABILITY_MAJOR, dev);
    d->cuDeviceGetAttribute(&minor, RK__CU_ATTR_COMPUTE_CAPABILITY_MINOR, dev);
    return major * 10 + minor;
}

/* At registration: load the kernel's module while nothing blocks the
 * load. Errors are left for launch to report. */
static void
cuda_prepare(const char *kernel_id, const rk_kernel_config *c)
{
    const struct rk__cuda_driver *d;
    rk__cu_module mod;
    rk__cu_bar *bar;
    uint64_t dbar;
    int cc, ord;

    if (c->device_source == NULL || rk__cu_device_of(kernel_id, c, &ord)
        || rk__cuda_enter(ord, &d) != RK_OK)
        return;
    if (rk__cuda_ext() == NULL || (cc = device_cc(d, ord)) < RK__NVRTC_MIN_CC)
        return;
    (void)rk__cu_module_get(d, kernel_id, c, cc, ord, &mod);
    (void)rk__cu_bar_get(kernel_id, c, ord, &bar, &dbar); /* placed now */
}

/* The instance's kernel returns (every block acknowledged EXITED, or the
 * stream was synchronised): one fewer resident; with none left, the
 * frees deferred meanwhile run. Once per launch. */
static void
returned(rk__backend_inst *bi)
{
    if (!bi->counted)
        return;
    bi->counted = 0;
    (void)rk__cuda_enter(bi->ordinal, NULL);
    rk__cu_res_returned(bi->res);
    bi->res = NULL;
}

/* ------------------------------------------------------------ relay */

/* Publishes an ack on rk_ctl (the relay is the instance's writer). */
static void
relay_ack(rk__backend_inst *bi, uint32_t ack)
{
    rk_ctl_ack(bi->ctl, ack);
    rk__ec_notify_all(bi->ack);
    if (ack == RK_CTL_ACK_EXITED || ack == RK_CTL_ACK_FAULTED)
        rk__ec_notify_all(bi->events);
}

/* Runtime inbox -> device lanes, never more than the lanes have room
 * for (so nothing taken from the inbox ever waits). Each lane written is
 * published once, after the whole take: a block sees the take as one
 * batch. Returns frames moved. */
static size_t
relay_in(rk__backend_inst *bi)
{
    uint32_t *rr = &bi->lanes.rr;
    rk__inbox_batch b;
    size_t i, max = rk__dh_room(&bi->d);
    uint32_t nb = bi->d.cfg.nblocks;

    if (max > bi->batch)
        max = bi->batch;
    if (max == 0 || bi->io->take(bi->io->in, max, &b) != RK_OK)
        return 0;
    for (i = 0; i < b.n; i++) {
        const unsigned char *f = b.frames + i * b.stride;
        rk_msg_header h;
        size_t len;
        /* The inbox lends its slots: the length is in the header. */
        memcpy(&h, f, sizeof(h));
        len = h.payload_len;
        /* Round robin over the blocks with room (there is room: max). */
        for (uint32_t t = 0; t < nb; t++, *rr = (*rr + 1) % nb)
            if (rk__dh_write(&bi->d, *rr, &h, f + RK_MSG_HEADER_SIZE, len)
                == RK_OK)
                break;
        bi->touched[i] = *rr;
        *rr = (*rr + 1) % nb;
    }
    for (i = 0; i < b.n; i++)
        rk__dh_publish(&bi->d, bi->touched[i]);
    bi->io->release(bi->io->in, b.n);
    return b.n;
}

/* Faults: a block's FAULTED becomes rk_ctl's (with the failed message in
 * the fail slot, for the supervisor to dead-letter); the supervisor's
 * verdict goes back to that block. Returns 1 while one is in progress. */
static int
relay_fault(rk__backend_inst *bi)
{
    unsigned char *fail_slot = bi->io->spill + bi->io->stride * bi->batch;
    uint32_t n, v;
    int32_t err;

    if (bi->fault_state == 0) {
        for (uint32_t b = 0; b < bi->d.cfg.nblocks; b++) {
            size_t flen;
            if (!rk__dh_fault_of(&bi->d, b, &n, &err) || n <= bi->handled[b])
                continue;
            bi->handled[b] = n;
            flen = rk__dh_peek_failed(&bi->d, b, fail_slot, bi->io->stride);
            if (flen == 0) /* on a K2K lane, in device memory */
                flen = rk__k2k_peek_failed(
                    bi->ordinal, &bi->d, b, fail_slot, bi->io->stride);
            bi->fault_blk = b;
            bi->fault_code = RK_DEV_VERDICT(b, n);
            /* Release (FAULTED) pairs with the supervisor's acquire: the
             * fail slot is written first. */
            bi->fault_n = rk_ctl_fault(bi->ctl, (uint32_t)err, (uint32_t)flen);
            bi->fault_state = 1;
            rk__ec_notify_all(bi->ack);
            rk__ec_notify_all(bi->events);
            return 1;
        }
        return 0;
    }
    if (bi->fault_state == 1) {
        /* Acquire pairs with rk_ctl_verdict_post. */
        v = rk_ctl_verdict_get(bi->ctl);
        if (v == bi->fault_n) {
            rk__dh_verdict(&bi->d, bi->fault_code);
            bi->fault_state = 2;
        } else if (v == RK_CTL_GIVE_UP) {
            /* The instance ends as failed: the faulted block exits and
             * the others are stopped; no more input goes in. */
            rk__dh_verdict(&bi->d, RK_DEV_GIVE_UP);
            rk__dh_post(&bi->d, RK_DEV_CMD_STOP);
            bi->gave_up = 1;
            bi->fault_state = 2;
        }
        return 1;
    }
    /* The block has not seen the verdict yet while it still reports the
     * fault it was for; a later fault (a message a caller wrote into its
     * lane right after the verdict) is a new one, reported next pass. */
    if (rk__dh_fault_of(&bi->d, bi->fault_blk, &n, &err)
        && n == bi->handled[bi->fault_blk])
        return 1;
    bi->fault_state = 0;
    return 0;
}

/* Device counters -> rk_ctl line 2. */
static void
relay_counters(rk__backend_inst *bi, const rk__dh_status *st)
{
    uint64_t refused
        = atomic_load_explicit(&bi->lanes.out_errors, memory_order_relaxed);

    rk_ring_store_relaxed_u64(&bi->ctl->processed, st->processed);
    rk_ring_store_relaxed_u64(&bi->ctl->errors, st->errors + refused);
    /* What the runtime refused (rk__lanes_out) was sent by the device but
     * never went anywhere: it counts as an error, not as sent. */
    rk_ring_store_relaxed_u64(
        &bi->ctl->sent, st->sent > refused ? st->sent - refused : 0);
    rk__lanes_topics(&bi->lanes);
}

/* The device ended: what it did not process is dead-lettered, oldest
 * first, as the runtime does with a spill area (abandoned after an
 * error, terminated otherwise), then EXITED with nothing spilled. The
 * lanes hold up to two batches per block, more than the spill area's one
 * batch, so the relay hands them over itself, a batch at a time through
 * its frame buffer (batch + 1 frames). */
static void
relay_exit(rk__backend_inst *bi, int32_t code)
{
    rk__dh_status st;
    uint64_t done = 0;
    uint32_t got;
    rk_dead_reason why
        = code != RK_OK ? RK_DEAD_ABANDONED : RK_DEAD_TERMINATED;

    rk__dh_status_get(&bi->d, &st);
    relay_counters(bi, &st);
    /* A block that was FAULTED when its context was lost still holds a
     * failed message the supervisor dead-letters from the fail slot. */
    for (uint32_t b = 0; b < bi->d.cfg.nblocks; b++) {
        uint32_t n;
        int32_t e;
        if (rk__dh_fault_of(&bi->d, b, &n, &e) && n == bi->handled[b])
            rk__dh_drop_failed(&bi->d, b);
    }
    while ((got = rk__dh_take_left_from(
                &bi->d, done, bi->lanes.buf, bi->io->stride, bi->batch))
        != 0) {
        for (uint32_t i = 0; i < got; i++) {
            const unsigned char *f = bi->lanes.buf + (size_t)i * bi->io->stride;
            uint32_t plen;
            memcpy(
                &plen, f + offsetof(rk_msg_header, payload_len), sizeof(plen));
            bi->io->dead_letter(bi->io->rt, why, code, f,
                RK_MSG_HEADER_SIZE + (size_t)plen <= bi->io->stride
                    ? RK_MSG_HEADER_SIZE + (size_t)plen
                    : bi->io->stride);
        }
        done += got;
    }
    rk_ctl_exit(bi->ctl, (uint32_t)code, 0);
    rk__ec_notify_all(bi->ack);
    rk__ec_notify_all(bi->events);
}

/* True while a block has input it has not taken yet: replies are coming
 * and the relay polls rather than parks. (A batch already taken but not
 * yet answered is not seen here; the relay's first parks are short.) */
static int
inflight(rk__backend_inst *bi)
{
    for (uint32_t b = 0; b < bi->d.cfg.nblocks; b++)
        if (rk__dh_pending(&bi->d, b) != 0)
            return 1;
    return 0;
}

/* RK_CUDA_DIRECT=0 when a kernel launches: no caller's own path for it,
 * every message through the relay (benchmarks compare the two). */
static bool
direct_off(void)
{
    const char *s = getenv("RK_CUDA_DIRECT");
    return s != NULL && strcmp(s, "0") == 0;
}

/* The watchdog's period: RK_CUDA_WATCHDOG_MS, else WATCHDOG_NS. */
static uint64_t
watchdog_ns(void)
{
    const char *s = getenv("RK_CUDA_WATCHDOG_MS");
    long ms = s != NULL ? atol(s) : 0;
    return ms > 0 ? (uint64_t)ms * 1000000ull : WATCHDOG_NS;
}

/* The relay's work on the lanes, done while it holds them (direct.h):
 * input from the inbox, the device command, output to the runtime.
 * Returns the frames it moved. */
static size_t
relay_lanes(rk__backend_inst *bi, uint32_t cmd, int *stop_posted)
{
    size_t moved = 0;

    /* Input first, so a STOP reaches the device after everything the
     * runtime queued before terminate. */
    if (cmd != RK_CTL_HOLD && cmd != RK_CTL_PAUSE && !bi->gave_up)
        moved += relay_in(bi);
    if (cmd != bi->last_cmd && !*stop_posted) {
        if (cmd == RK_CTL_STOP && rk_ctl_was_activated(bi->ctl)
            && bi->fault_state == 0 && !bi->gave_up
            && (moved != 0 || bi->io->depth(bi->io->in) != 0)) {
            /* An activated kernel drains: the inbox goes to the device
             * before STOP does. A paused device is let run for it,
             * as the CPU body leaves PAUSED on STOP. */
            if (bi->last_cmd != RK_CTL_RUN) {
                rk__dh_post(&bi->d, RK_CTL_RUN);
                bi->last_cmd = RK_CTL_RUN;
            }
        } else {
            /* STOP during a fault ends the instance (as the CPU body
             * does); the rest of the inbox is the runtime's to
             * dead-letter. */
            if (cmd == RK_CTL_STOP && rk_ctl_was_activated(bi->ctl))
                atomic_store_explicit(
                    &bi->d.ctl->host.activated, 1, memory_order_release);
            rk__dh_post(&bi->d, cmd);
            bi->last_cmd = cmd;
            *stop_posted = cmd == RK_CTL_STOP;
        }
    }
    moved += rk__lanes_out(&bi->lanes, RK_NO_WAIT, SIZE_MAX, NULL, NULL);
    return moved;
}

/* Does this pass have work for the lanes? Only then does the relay take
 * them, so that a caller finds them free while the relay polls. */
static int
wants_lanes(rk__backend_inst *bi, uint32_t cmd, int stop_posted)
{
    return bi->io->depth(bi->io->in) != 0
        || atomic_load_explicit(&bi->lanes.held_len, memory_order_relaxed) != 0
        || (cmd != bi->last_cmd && !stop_posted) || rk__dh_out_pending(&bi->d);
}

/* Relay hand-offs: frames the relay moved (single writer). */
static void
relayed(rk__backend_inst *bi, size_t n)
{
    if (n != 0)
        atomic_store_explicit(&bi->lanes.relayed,
            atomic_load_explicit(&bi->lanes.relayed, memory_order_relaxed) + n,
            memory_order_relaxed);
}

static void *
relay_main(void *arg)
{
    rk__backend_inst *bi = arg;
    uint32_t acked = RK_CTL_ACK_NONE, idle_ns = 0;
    uint64_t wd_ns = watchdog_ns(), next_wd = rk_now_ns() + wd_ns, busy_at = 0;
    uint64_t next_q = 0, now;
    uint32_t spins = 0;
    int stop_posted = 0, lost = 0;

    for (;;) {
        uint32_t key = rk__ec_prepare(bi->wake);
        uint32_t cmd = rk_ctl_cmd(bi->ctl);
        size_t moved = 0;
        int blocked = 0;
        rk__dh_status st;

        if (atomic_load_explicit(&bi->relay_stop, memory_order_acquire)) {
            rk__ec_cancel(bi->wake);
            break;
        }
        if (wants_lanes(bi, cmd, stop_posted)) {
            if (rk__lanes_take(&bi->lanes, RK__LANES_RELAY)) {
                moved = relay_lanes(bi, cmd, &stop_posted);
                rk__lanes_give(&bi->lanes);
                relayed(bi, moved);
            } else {
                blocked = 1; /* a caller holds them (direct.c) */
            }
        }
        rk__dh_status_get(&bi->d, &st);
        relay_counters(bi, &st);
        if ((now = rk_now_ns()) >= next_q || now >= next_wd) {
            /* A trap anywhere in the context ended the grid: one
             * host-side query (devwide.h), before every watchdog check
             * so a lost context is never taken for a hang. */
            next_q = now + RELAY_QUERY_NS;
            lost = rk__cu_res_check(bi->drv, bi->res) != RK_OK;
        }
        if (st.exited == bi->d.cfg.nblocks || lost) {
            rk__ec_cancel(bi->wake);
            /* No caller writes a lane again (direct.h). */
            rk__lanes_close(&bi->lanes);
            /* The device is done: what it sent goes out. Each frame
             * waits up to RELAY_EXIT_WAIT_NS for room in a full target;
             * once one did not get it, it is dead-lettered
             * (RK_ETIMEDOUT), and so is every later one without room. */
            {
                int64_t wait = RELAY_EXIT_WAIT_NS;
                rk__cuda_lanes *l = &bi->lanes;
                size_t n;
                while ((n = rk__lanes_out(l, wait, SIZE_MAX, NULL, NULL)) != 0
                    || atomic_load_explicit(&l->held_len, memory_order_relaxed)
                        != 0) {
                    size_t held = atomic_load_explicit(
                        &l->held_len, memory_order_relaxed);
                    relayed(bi, n);
                    if (held != 0) {
                        atomic_fetch_add_explicit(
                            &l->out_errors, 1, memory_order_relaxed);
                        bi->io->dead_letter(bi->io->rt, RK_DEAD_FAILED,
                            RK_ETIMEDOUT, l->held, held);
                        atomic_store_explicit(
                            &l->held_len, 0, memory_order_relaxed);
                        wait = RK_NO_WAIT;
                    }
                }
            }
            /* Its blocks are returning: counted out before EXITED is
             * published, so whoever sees EXITED may launch another. */
            returned(bi);
            relay_exit(
                bi, st.exited == bi->d.cfg.nblocks ? st.exit_code : RK_ECUDA);
            return NULL;
        }
        if (relay_fault(bi)) {
            acked = RK_CTL_ACK_FAULTED; /* rk_ctl says FAULTED meanwhile */
        } else if (st.ack != acked && st.ack != RK_DEV_ACK_NONE
            && st.ack != RK_DEV_ACK_EXITED && st.ack != RK_DEV_ACK_FAULTED) {
            /* The lowest ack over the live blocks: HELD, RUNNING, PAUSED
             * have the same values on rk_ctl. */
            acked = st.ack;
            relay_ack(bi, st.ack);
        }
        if (rk_now_ns() >= next_wd) {
            next_wd = rk_now_ns() + wd_ns;
            if (rk__dh_watchdog(&bi->d, bi->id) == RK_ETIMEDOUT) {
                /* The device stopped responding with work queued: report
                 * the failure. The kernel may still be resident: it is
                 * told to stop (a slow block that comes back ends), and
                 * destroy keeps its memory until it returned. */
                rk__ec_cancel(bi->wake);
                rk__lanes_close(&bi->lanes); /* callers leave in bounds */
                rk__dh_post(&bi->d, RK_DEV_CMD_STOP);
                rk__cu_res_hung(bi->res); /* counted out once returned */
                atomic_store_explicit(&bi->hung, 1, memory_order_release);
                rk_ctl_exit(bi->ctl, RK_ETIMEDOUT, 0);
                rk__ec_notify_all(bi->ack);
                rk__ec_notify_all(bi->events);
                return NULL;
            }
        }
        if (blocked) {
            /* A caller holds the lanes for one message; it wakes the
             * relay when it leaves work behind (direct.c). Bounded all
             * the same. */
            (void)rk__ec_wait(bi->wake, key, rk_now_ns() + RELAY_BLOCKED_NS);
            continue;
        }
        if (moved != 0 || inflight(bi)) {
            /* Work on the device: its replies come without a wake-up, so
             * poll instead of parking. */
            rk__ec_cancel(bi->wake);
            idle_ns = 0;
            busy_at = 0;
            if (moved == 0)
                rk__lanes_relax(&spins);
            continue;
        }
        if (busy_at == 0)
            busy_at = rk_now_ns();
        if (rk_now_ns() - busy_at < RELAY_SPIN_NS) {
            /* Recent traffic: a reply may still come from a batch the
             * device took, or the next request from a client. */
            rk__ec_cancel(bi->wake);
            rk__lanes_relax(&spins);
            continue;
        }
        /* Idle: park on the instance's wake (senders and signal notify
         * it); the device cannot notify, so the park is bounded. */
        idle_ns = idle_ns == 0 ? 2000 : idle_ns * 2;
        if (idle_ns > RELAY_IDLE_MAX_NS)
            idle_ns = RELAY_IDLE_MAX_NS;
        (void)rk__ec_wait(bi->wake, key, rk_now_ns() + idle_ns);
    }
    return NULL;
}

/* ------------------------------------------------------------ launch */

/* The relay's host memory (never mapped by the kernel). */
static void
free_host_side(rk__backend_inst *bi)
{
    free(bi->lanes.buf);
    free(bi->lanes.held);
    free(bi->handled);
    free(bi->touched);
    bi->lanes.buf = NULL;
    bi->lanes.held = NULL;
    bi->handled = NULL;
    bi->touched = NULL;
}

static void
undo_launch(rk__backend_inst *bi)
{
    rk__k2k_release(&bi->k2k, bi->io, bi->ordinal);
    if (bi->stream != NULL)
        bi->drv->cuStreamDestroy(bi->stream);
    if (bi->region.host != NULL) {
        rk__dh_fini(&bi->d);
        cuda_release(&bi->region);
    }
    free_host_side(bi);
    bi->stream = NULL;
    bi->mod = NULL;
}

/* Co-residency: every block of a persistent kernel must be resident at
 * once, or blocks that never start leave their lanes unserved. Each block
 * needs its staging memory (dynamic shared memory), beyond the default
 * 48 KB only by opting in. */
static int
co_resident(rk__backend_inst *bi, rk__cu_function fn, uint32_t grid,
    uint32_t block, int sms)
{
    uint32_t smem = bi->d.kargs.stage_bytes;
    int per_sm = 0;
    rk__cu_result r;

    if (smem > RK__DH_STAGE_BYTES
        && (bi->ext.func_set_attr == NULL
            || bi->ext.func_set_attr(
                   fn, CU_FUNC_ATTR_MAX_DYNAMIC_SHARED, (int)smem)
                != RK__CUDA_SUCCESS))
        return rk__fail(RK_ENOTSUP,
            "kernel '%s': a block stages %u bytes of messages in shared "
            "memory, more than the device allows; lower max_payload",
            bi->id, smem);
    r = bi->ext.occupancy(&per_sm, fn, (int)block, smem);
    if (r != RK__CUDA_SUCCESS || per_sm <= 0
        || (uint64_t)per_sm * (uint64_t)sms < grid)
        return rk__fail(RK_ENOTSUP,
            "kernel '%s': %u blocks of %u threads cannot all be resident "
            "(%d per SM x %d SMs); a persistent kernel would hang",
            bi->id, grid, block, per_sm, sms);
    bi->per_sm = (uint32_t)per_sm;
    bi->sms = (uint32_t)sms;
    return RK_OK;
}

/* The launch itself, under devwide's device lock (rk__cu_res_launch). */
struct launch_args {
    rk__backend_inst *bi;
    rk__cu_function fn;
    uint32_t grid, block;
};

static int
launch_now(void *arg)
{
    struct launch_args *la = arg;
    rk__backend_inst *bi = la->bi;
    void *params[1] = { &bi->d.kargs };
    int rc = rk__cuda_check(
        bi->drv->cuLaunchKernel(la->fn, la->grid, 1, 1, la->block, 1, 1,
            bi->d.kargs.stage_bytes, bi->stream, params, NULL),
        "cuLaunchKernel");

    return rc == RK_OK
        ? RK_OK
        : rk__fail(rc, "kernel '%s': %s", bi->id, rk_errdetail());
}

static int
cuda_launch(rk__backend_inst *bi, const rk__backend_launch *spec)
{
    const rk_kernel_config *c = &spec->io->def->config;
    uint32_t grid = spec->grid_size ? spec->grid_size : 1;
    uint32_t block = spec->block_size ? spec->block_size : 128;
    rk__cu_device dev;
    rk__cu_function fn;
    rk__cu_bar *bar;
    uint64_t dbar;
    rk__dh_cfg dc;
    int cc, timeout = 0, sms = 0, rc;
    size_t sz;

    memset(bi, 0, sizeof(*bi));
    snprintf(bi->id, sizeof(bi->id), "%s", spec->kernel_id);
    bi->io = spec->io;
    bi->ctl = spec->ctl.host;
    bi->wake = spec->wake;
    bi->events = spec->events;
    bi->ack = spec->ack;
    if (c->device_source == NULL || c->device_entry == NULL)
        return rk__fail(RK_EINVAL,
            "kernel '%s': the cuda backend needs device_source and "
            "device_entry in its config",
            bi->id);
    if ((rc = rk__cu_device_of(bi->id, c, &bi->ordinal)) != RK_OK
        || (rc = rk__cuda_enter(bi->ordinal, &bi->drv)) != RK_OK)
        return rc;
    if (rk__cuda_ext() == NULL)
        return rk__fail(
            RK_ENODEV, "kernel '%s': driver lacks entry points", bi->id);
    bi->ext = *rk__cuda_ext();
    bi->drv->cuDeviceGet(&dev, bi->ordinal);
    cc = device_cc(bi->drv, bi->ordinal);
    bi->drv->cuDeviceGetAttribute(&timeout, CU_ATTR_KERNEL_EXEC_TIMEOUT, dev);
    bi->drv->cuDeviceGetAttribute(&sms, RK__CU_ATTR_MULTIPROCESSOR_COUNT, dev);
    if (cc < RK__NVRTC_MIN_CC)
        return rk__fail(RK_ENOTSUP,
            "kernel '%s': device %d has compute capability %d.%d; "
            "persistent kernels need 7.0 or newer",
            bi->id, bi->ordinal, cc / 10, cc % 10);
    if (timeout && getenv("RK_CUDA_ALLOW_WATCHDOG") == NULL)
        return rk__fail(RK_ENOTSUP,
            "kernel '%s': device %d has the display watchdog "
            "(KERNEL_EXEC_TIMEOUT) on, which kills a persistent kernel; "
            "set RK_CUDA_ALLOW_WATCHDOG=1 to try anyway",
            bi->id, bi->ordinal);
    if ((rc = rk__cu_module_get(bi->drv, bi->id, c, cc, bi->ordinal, &bi->mod))
            != RK_OK
        || (rc = rk__cu_bar_get(bi->id, c, bi->ordinal, &bar, &dbar))
            != RK_OK)
        return rc;
    if (bi->drv->cuModuleGetFunction(&fn, bi->mod, c->device_entry)
        != RK__CUDA_SUCCESS) {
        undo_launch(bi);
        return rk__fail(RK_ENOTFOUND,
            "kernel '%s': the device source has no entry '%s' "
            "(RK_DEV_KERNEL(%s, handler))",
            bi->id, c->device_entry, c->device_entry);
    }

    bi->batch = c->batch ? c->batch : 64;
    dc = (rk__dh_cfg) { .nblocks = grid,
        .nin = 1,
        .nroutes = 0,
        .slot_size = (uint32_t)bi->io->stride,
        .batch = bi->batch > RK_DEV_MAX_BATCH ? RK_DEV_MAX_BATCH : bi->batch,
        .kernel_id = bi->io->sender };
    /* Each block's lanes hold at least two of its batches: the host
     * refills one while the block works on the other. */
    if ((rc = rk__dh_lane_capacity(
             dc.batch, dc.slot_size, c->lane_capacity, &dc.capacity))
        != RK_OK) {
        undo_launch(bi);
        return rk__fail(rc, "kernel '%s': %s", bi->id, rk_errdetail());
    }
    if ((rc = rk__k2k_plan(&bi->k2k, bi->ordinal, spec, grid, &dc)) != RK_OK) {
        undo_launch(bi);
        return rc;
    }
    if ((sz = rk__dh_size(&dc)) == 0) {
        undo_launch(bi);
        return rk__fail(RK_EINVAL, "kernel '%s': %s", bi->id, rk_errdetail());
    }
    bi->lanes = (rk__cuda_lanes) { .d = &bi->d,
        .io = bi->io,
        .ctl = bi->ctl,
        .wake = bi->wake,
        .id = bi->id,
        .buf = aligned_alloc(64, bi->io->stride * (bi->batch + 1)),
        .held = malloc(bi->io->stride),
        .off = direct_off() };
    bi->handled = calloc(grid, sizeof(*bi->handled));
    bi->touched = calloc(bi->batch, sizeof(*bi->touched));
    if (bi->lanes.buf == NULL || bi->lanes.held == NULL || bi->handled == NULL
        || bi->touched == NULL
        || (rc = cuda_alloc(sz, &bi->region)) != RK_OK) {
        undo_launch(bi);
        return bi->lanes.buf == NULL || bi->lanes.held == NULL
                || bi->handled == NULL || bi->touched == NULL
            ? rk__fail(RK_ENOMEM, "kernel '%s': no memory", bi->id)
            : rc;
    }
    if ((rc = rk__dh_place(&bi->d, &dc, bi->region.host, bi->region.dev, NULL))
        != RK_OK) {
        cuda_release(&bi->region);
        undo_launch(bi);
        return rc;
    }
    bi->d.kargs.barrier = dbar; /* the named barrier's device address */
    bi->d.kargs.barrier_parties = c->device_barrier_parties;
    if ((rc = rk__k2k_wire(&bi->k2k, bi->ordinal, spec, &bi->d)) != RK_OK
        || (rc = co_resident(bi, fn, grid, block, sms)) != RK_OK) {
        undo_launch(bi);
        return rc;
    }
    rk__k2k_partners(
        &bi->k2k, bi->drv, &bi->ext, spec, cc, bi->sms, bi->per_sm);
    rc = rk__cuda_check(
        bi->drv->cuStreamCreate(&bi->stream, RK__CU_STREAM_NON_BLOCKING),
        "cuStreamCreate");
    if (rc == RK_OK) {
        struct launch_args la = { bi, fn, grid, block };
        rc = rk__cu_res_launch_with(bi->drv, bi->id, bi->ordinal, grid,
            bi->per_sm, bi->sms, bar, bi->stream, bi->k2k.partners,
            bi->k2k.npartners, launch_now, &la, &bi->res);
        bi->counted = rc == RK_OK;
        if (rc != RK_OK) {
            undo_launch(bi);
            return rc; /* the detail names the kernel */
        }
    }
    if (rc != RK_OK) {
        undo_launch(bi);
        return rk__fail(rc, "kernel '%s': %s", bi->id, rk_errdetail());
    }
    bi->launched = 1;
    rk__k2k_started(&bi->k2k);
    rc = pthread_create(&bi->relay, NULL, relay_main, bi);
    if (rc != 0) {
        /* The kernel runs: stop it before anything is freed. */
        rk__dh_post(&bi->d, RK_DEV_CMD_STOP);
        bi->drv->cuStreamSynchronize(bi->stream);
        returned(bi);
        undo_launch(bi);
        return rk__fail(RK_ENOMEM, "kernel '%s': no relay thread", bi->id);
    }
    bi->relay_started = 1;
    return RK_OK;
}

static void
cuda_destroy(rk__backend_inst *bi, int detach)
{
    int keep;

    (void)rk__cuda_enter(bi->ordinal, NULL);
    if (detach && bi->launched)
        rk__dh_post(&bi->d, RK_DEV_CMD_STOP); /* let it end by itself */
    if (bi->relay_started) {
        atomic_store_explicit(&bi->relay_stop, 1, memory_order_release);
        rk__ec_notify_all(bi->wake);
        pthread_join(bi->relay, NULL);
        bi->relay_started = 0;
    }
    if (bi->launched)
        rk__lanes_close(&bi->lanes); /* no caller is left (backend.h) */
    keep = detach || atomic_load_explicit(&bi->hung, memory_order_acquire);
    /* A kernel reported hung (or let go) may have returned since, or a
     * lost context ended it (its stream reports the error). */
    if (keep && bi->launched
        && bi->drv->cuStreamQuery(bi->stream) != RK__CUDA_ERROR_NOT_READY)
        keep = 0;
    if (keep && bi->counted) {
        /* It may still run: its region stays mapped and it stays counted,
         * as a zombie that launch and registration reap (count out, free)
         * once its stream says it returned; unless a reap saw it return
         * meanwhile. */
        if (rk__cu_res_zombie(bi->res, &bi->region)) {
            bi->res = NULL;
            bi->counted = 0;
        } else {
            keep = 0;
        }
    }
    if (!keep && bi->launched) {
        /* EXITED was acked: the kernel is returning; wait for it before
         * freeing what it maps. */
        rk__cuda_enter(bi->ordinal, NULL);
        bi->drv->cuStreamSynchronize(bi->stream);
        returned(bi);
    }
    if (keep) {
        free_host_side(bi);
        if (bi->launched)
            rk__dh_fini(&bi->d);
        return;
    }
    undo_launch(bi);
}

/* ------------------------------------------- the caller's own path */

/* The entries below run on a host caller's thread (direct.c); between
 * launch and destroy, any thread. */
static int
cuda_send(rk__backend_inst *bi, const rk_msg_header *h, const void *payload,
    size_t len)
{
    return rk__cuda_direct_send(&bi->lanes, h, payload, len);
}

static int
cuda_call(rk__backend_inst *bi, const rk_msg_header *h, const void *payload,
    size_t len, rk_call_reply *reply)
{
    return rk__cuda_direct_call(&bi->lanes, h, payload, len, reply);
}

static int
cuda_send_batch(rk__backend_inst *bi, size_t n,
    void (*frame)(void *arg, size_t i, rk_msg_header *h, const void **payload),
    void *arg, size_t *done)
{
    return rk__cuda_direct_batch(&bi->lanes, n, frame, arg, done);
}

static size_t
cuda_pull(rk__backend_inst *bi, size_t max)
{
    return rk__cuda_direct_pull(&bi->lanes, max);
}

static uint64_t
cuda_relayed(rk__backend_inst *bi)
{
    return atomic_load_explicit(&bi->lanes.relayed, memory_order_relaxed);
}

static int
cuda_route_live(rk__backend_inst *bi)
{
    return rk__k2k_route_live(&bi->k2k);
}

const rk__backend rk__backend_cuda = {
    .abi_version = RK__BACKEND_ABI,
    .name = "cuda",
    .inst_size = sizeof(rk__backend_inst),
    .code = RK__CODE_DEVICE,
    .event_poll_ns = 0,
    .probe = cuda_probe,
    .prepare = cuda_prepare,
    .check = cuda_check,
    .alloc = cuda_alloc,
    .release = cuda_release,
    .launch = cuda_launch,
    .destroy = cuda_destroy,
    .call = cuda_call,
    .send = cuda_send,
    .send_batch = cuda_send_batch,
    .pull = cuda_pull,
    .relayed = cuda_relayed,
    .route_live = cuda_route_live,
    .exec_load = rk__cuda_exec_load,
    .exec = rk__cuda_exec,
    .exec_unload = rk__cuda_exec_unload,
};
