/*
 * tests/support/rt_fault.h - helpers of the reliability and fault tests
 * (tests/test_runtime_{shutdown,faults,fork,recv_deadline,soak}.c).
 *
 * Header-only (static inline), Linux only (/proc), like the tests.
 */
#ifndef RK_TEST_RT_FAULT_H
#define RK_TEST_RT_FAULT_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ringkernel/runtime.h"

static inline pid_t
rt_gettid(void)
{
    return (pid_t)syscall(SYS_gettid);
}

/* The scheduler state letter of thread tid of this process ('R', 'S',
 * 'D', ...), or '?' if it cannot be read (the thread is gone). */
static inline char
rt_thread_state(pid_t tid)
{
    char path[64], buf[512], *p;
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
    if ((f = fopen(path, "r")) == NULL)
        return '?';
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "tid (comm) S ...": the state follows the last ')'. */
    p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' ? p[2] : '?';
}

/*
 * A host call run on its own thread, so that a test can hold it blocked
 * inside the library: the thread publishes its tid and sets `calling`
 * immediately before the call; once it is then seen asleep ('S' or 'D'),
 * it can only be asleep inside that call (it has nothing else to wait
 * on). rt_call_wait_blocked() polls for that; it never sleeps for a
 * fixed time, so it synchronises rather than guesses.
 */
typedef struct rt_call {
    pthread_t thread;
    _Atomic pid_t tid;
    atomic_bool calling;
    atomic_bool done;
    int rc;
    /* What the call does (set by the test before rt_call_start). */
    int (*fn)(struct rt_call *c);
    rk_runtime *rt;
    rk_kernel k;
    const char *id;
    int64_t timeout_ns;
    unsigned char buf[256];
    size_t len;
    rk_msg_header hdr;
} rt_call;

static inline void *
rt_call_main(void *arg)
{
    rt_call *c = arg;

    atomic_store(&c->tid, rt_gettid());
    atomic_store(&c->calling, true);
    c->rc = c->fn(c);
    atomic_store(&c->done, true);
    return NULL;
}

static inline int
rt_call_start(rt_call *c)
{
    atomic_init(&c->tid, 0);
    atomic_init(&c->calling, false);
    atomic_init(&c->done, false);
    return pthread_create(&c->thread, NULL, rt_call_main, c);
}

/* Waits until c's thread is asleep inside its call. Returns false if the
 * call returned first (the caller then checks c->rc). */
static inline bool
rt_call_wait_blocked(rt_call *c)
{
    for (;;) {
        char st;
        if (atomic_load(&c->done))
            return false;
        if (!atomic_load(&c->calling)) {
            sched_yield();
            continue;
        }
        st = rt_thread_state(atomic_load(&c->tid));
        if (st == 'S' || st == 'D')
            return !atomic_load(&c->done);
        sched_yield();
    }
}

static inline int
rt_call_join(rt_call *c)
{
    pthread_join(c->thread, NULL);
    return c->rc;
}

/* Answers messages whose first byte is 'g' (go) with the same bytes and
 * takes the others silently: a kernel a test can keep from answering. */
static inline int
rt_gated_actor(rk_ctx *ctx)
{
    rk_msg_view m;
    int rc;

    while ((rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER)) == RK_OK) {
        if (m.len > 0 && ((const char *)m.data)[0] == 'g'
            && (rc = rk_ctx_reply(ctx, &m, 0, m.data, m.len)) != RK_OK)
            return rc;
    }
    return rc == RK_ECLOSED ? RK_OK : rc;
}

/* Common calls. */
static inline int
rt_call_recv(rt_call *c)
{
    return rk_recv(
        c->rt, c->k, &c->hdr, c->buf, sizeof(c->buf), &c->len, c->timeout_ns);
}

static inline int
rt_call_recv_id(rt_call *c)
{
    return rk_recv_id(
        c->rt, c->id, &c->hdr, c->buf, sizeof(c->buf), &c->len, c->timeout_ns);
}

#ifdef assert_int_equal /* cmocka.h was included first */
#include <stdlib.h>
/* RK_TEST_FILTER=pattern runs only the matching tests of a program (to
 * look at one failure at a time). */
static inline void
rt_test_filter(void)
{
    const char *f = getenv("RK_TEST_FILTER");
    if (f != NULL && f[0] != '\0')
        cmocka_set_test_filter(f);
}
#endif

/* Resident set size of this process in bytes (0 if unknown). */
static inline uint64_t
rt_rss_bytes(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f == NULL)
        return 0;
    if (fscanf(f, "%lu %lu", &size, &resident) != 2)
        resident = 0;
    fclose(f);
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* True when built with a sanitizer whose allocator keeps freed memory in
 * quarantine (RSS then says nothing about leaks). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RT_SANITIZED 1
#endif
#endif
#ifndef RT_SANITIZED
#define RT_SANITIZED 0
#endif
#if defined(__SANITIZE_THREAD__)
#define RT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RT_TSAN 1
#endif
#endif
#ifndef RT_TSAN
#define RT_TSAN 0
#endif

#endif /* RK_TEST_RT_FAULT_H */
