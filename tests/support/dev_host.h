/*
 * tests/support/dev_host.h - runs a device kernel's host build (the same
 * source NVRTC compiles, included as host C) on CPU threads, one per
 * block, against real ring_proto.h lanes and the control block placed by
 * the backend's host half (src/backend/cuda/devhost.c). Shared by
 * test_cuda_loop_host, test_cuda_loop_lanes, test_cuda_pagerank and
 * test_cuda_anomaly.
 *
 * Header-only (static); include after cmocka.h, backend/cuda/devhost.h
 * and the kernels. Deadlines fail the test on a hang; nothing is timed.
 */
#ifndef RK_TEST_DEV_HOST_H
#define RK_TEST_DEV_HOST_H

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/devhost.h"
#include "ringkernel/ringkernel.h"

#define T_LONG                                                                \
    (30ull * 1000000000ull) /* deadline: a hang fails, never a                \
                               timing */

typedef struct inst {
    rk__dh d;
    void *mem;
    const rk_dev_host_kernel *k;
    pthread_t th[8];
    uint32_t started;
} inst;

typedef struct blk_arg {
    inst *in;
    uint32_t b;
} blk_arg;

static blk_arg args_store[64];
static uint32_t nargs;

static inline void *
block_main(void *p)
{
    blk_arg *a = p;
    a->in->k->run(&a->in->d.kargs, a->b, a->in->d.cfg.nblocks);
    return NULL;
}

/* As inst_make, with slots of slot_size bytes. */
static inline void
inst_make_slots(inst *in, const rk_dev_host_kernel *k, uint32_t nblocks,
    uint32_t nin, uint32_t nroutes, uint32_t capacity, uint32_t batch,
    uint32_t slot_size)
{
    rk__dh_cfg cfg = { .nblocks = nblocks,
        .nin = nin,
        .nroutes = nroutes,
        .capacity = capacity,
        .slot_size = slot_size,
        .batch = batch,
        .kernel_id = 7 };
    size_t sz = rk__dh_size(&cfg);
    assert_true(sz > 0);
    memset(in, 0, sizeof(*in));
    in->mem = aligned_alloc(64, (sz + 63) & ~(size_t)63);
    assert_non_null(in->mem);
    assert_int_equal(rk__dh_place(&in->d, &cfg, in->mem,
                         (uint64_t)(uintptr_t)in->mem, NULL),
        RK_OK);
    in->k = k;
}

/* An instance of kernel k placed in fresh memory (256-byte slots). */
static inline void
inst_make(inst *in, const rk_dev_host_kernel *k, uint32_t nblocks,
    uint32_t nin, uint32_t nroutes, uint32_t capacity, uint32_t batch)
{
    inst_make_slots(in, k, nblocks, nin, nroutes, capacity, batch, 256);
}

/* Starts blocks [0, upto) on their own threads. */
static inline void
inst_start(inst *in, uint32_t upto)
{
    for (uint32_t b = in->started; b < upto; b++) {
        blk_arg *a = &args_store[nargs++];
        a->in = in;
        a->b = b;
        assert_int_equal(pthread_create(&in->th[b], NULL, block_main, a), 0);
    }
    in->started = upto;
}

static inline void
inst_join(inst *in)
{
    for (uint32_t b = 0; b < in->started; b++)
        pthread_join(in->th[b], NULL);
    rk__dh_fini(&in->d);
    free(in->mem);
}

/* One message of `type` into block b's host lane: RK_OK, or RK_EFULL
 * when the lane has no room now. */
static inline int
try_send_bytes(inst *in, uint32_t b, uint32_t type, const void *p, size_t n)
{
    rk_msg_header h;
    memset(&h, 0, sizeof(h));
    h.magic = RK_MSG_MAGIC;
    h.version = RK_MSG_VERSION;
    h.priority = 9;
    h.type_id = type;
    h.message_id.b[0] = (uint8_t)type;
    h.message_id.b[15] = 0x5a;
    return rk__dh_send(&in->d, b, &h, p, n);
}

static inline void
send_bytes(inst *in, uint32_t b, uint32_t type, const void *p, size_t n)
{
    assert_int_equal(try_send_bytes(in, b, type, p, n), RK_OK);
}

/* Waits (polling, with a deadline that fails the test) for one frame. */
static inline size_t
recv_frame(inst *in, uint32_t b, unsigned char *buf, size_t cap)
{
    size_t len = 0;
    uint64_t deadline = rk_now_ns() + T_LONG;
    int rc;
    while ((rc = rk__dh_recv(&in->d, b, buf, cap, &len)) == RK_EEMPTY) {
        assert_true(rk_now_ns() < deadline);
        sched_yield();
    }
    assert_int_equal(rc, RK_OK);
    return len;
}

static inline uint64_t
deadline(void)
{
    return rk_now_ns() + T_LONG;
}

/* Posts STOP and waits (deadline) until every block of in has EXITED. */
static inline void
inst_stop(inst *in)
{
    rk__dh_post(&in->d, RK_DEV_CMD_STOP);
    assert_int_equal(
        rk__dh_wait_ack(&in->d, RK_DEV_ACK_EXITED, deadline()), RK_OK);
}

/* inst_stop, then the blocks' status in *st. */
static inline void
inst_stop_st(inst *in, rk__dh_status *st)
{
    inst_stop(in);
    rk__dh_status_get(&in->d, st);
}

/* inst_stop, then joins the blocks. */
static inline void
inst_end(inst *in)
{
    inst_stop(in);
    inst_join(in);
}

/* Waits (deadline: a hang fails) until block 0 reports its fault number
 * nf, and returns its error. */
static inline int32_t
inst_wait_fault(inst *in, uint32_t nf)
{
    uint64_t until = deadline();
    uint32_t n = 0;
    int32_t err = 0;
    while (rk__dh_fault_of(&in->d, 0, &n, &err) != 1 || n != nf) {
        assert_true(rk_now_ns() < until);
        sched_yield();
    }
    return err;
}

#endif /* RK_TEST_DEV_HOST_H */
