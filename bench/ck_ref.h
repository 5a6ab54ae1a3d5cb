/*
 * bench/ck_ref.h - Concurrency Kit reference measurements, header only.
 *
 * The hardware floor other benchmarks compare against: a cross-thread
 * ping-pong over two ck_ring SPSC rings of pointers, each thread pinned to
 * its own CPU. bench_queue.c uses it for the "ck_ring" rows and the runtime
 * benchmarks may reuse it. Only available when RK_HAVE_CK is defined (the
 * build defines it when pkg-config finds ck).
 */
#ifndef RK_BENCH_CK_REF_H
#define RK_BENCH_CK_REF_H

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* Picks the idx-th CPU this process may run on (wrapping), or -1. */
static inline int
ck_ref_cpu(int idx)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return -1;
    int n = CPU_COUNT(&set);
    if (n <= 0)
        return -1;
    idx %= n;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set) && idx-- == 0)
            return c;
    return -1;
}

/* Pins the calling thread to cpu (ignored when cpu < 0). 0 on success. */
static inline int
ck_ref_pin(int cpu)
{
    if (cpu < 0)
        return -1;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static inline uint64_t
ck_ref_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#ifdef RK_HAVE_CK
#include <ck_ring.h>

#define CK_REF_RING_SIZE 1024u /* pow2; ck keeps one slot empty */

typedef struct ck_ref_pingpong {
    ck_ring_t ab, ba;
    ck_ring_buffer_t *buf_ab, *buf_ba;
    size_t rounds;
    int echo_cpu;
} ck_ref_pingpong;

static void *
ck_ref_echo(void *arg)
{
    ck_ref_pingpong *p = arg;
    ck_ref_pin(p->echo_cpu);
    for (size_t i = 0; i < p->rounds; i++) {
        void *v;
        while (!ck_ring_dequeue_spsc(&p->ab, p->buf_ab, &v))
            ;
        while (!ck_ring_enqueue_spsc(&p->ba, p->buf_ba, v))
            ;
    }
    return NULL;
}

/*
 * Runs `rounds` round trips main -> echo -> main and stores each one's
 * duration in rtt_ns[i] (includes one clock read). The caller's thread is
 * pinned to main_cpu, the echo thread to echo_cpu (-1: not pinned).
 * Returns 0, or -1 if the echo thread could not start.
 */
static inline int
ck_ref_pingpong_run(
    uint64_t *rtt_ns, size_t rounds, int main_cpu, int echo_cpu)
{
    ck_ref_pingpong p;
    p.buf_ab = aligned_alloc(64, CK_REF_RING_SIZE * sizeof(ck_ring_buffer_t));
    p.buf_ba = aligned_alloc(64, CK_REF_RING_SIZE * sizeof(ck_ring_buffer_t));
    if (p.buf_ab == NULL || p.buf_ba == NULL) {
        free(p.buf_ab);
        free(p.buf_ba);
        return -1;
    }
    ck_ring_init(&p.ab, CK_REF_RING_SIZE);
    ck_ring_init(&p.ba, CK_REF_RING_SIZE);
    p.rounds = rounds;
    p.echo_cpu = echo_cpu;
    ck_ref_pin(main_cpu);
    pthread_t t;
    if (pthread_create(&t, NULL, ck_ref_echo, &p) != 0) {
        free(p.buf_ab);
        free(p.buf_ba);
        return -1;
    }
    for (size_t i = 0; i < rounds; i++) {
        uint64_t t0 = ck_ref_now_ns();
        void *v = (void *)(uintptr_t)(i + 1);
        while (!ck_ring_enqueue_spsc(&p.ab, p.buf_ab, v))
            ;
        while (!ck_ring_dequeue_spsc(&p.ba, p.buf_ba, &v))
            ;
        rtt_ns[i] = ck_ref_now_ns() - t0;
    }
    pthread_join(t, NULL);
    free(p.buf_ab);
    free(p.buf_ba);
    return 0;
}
#endif /* RK_HAVE_CK */

#endif /* RK_BENCH_CK_REF_H */
