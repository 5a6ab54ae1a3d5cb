/*
 * src/common/common.h - internals shared by every subsystem.
 *
 * Nothing here is installed. Names shared across files use the rk__ prefix.
 */
#ifndef RK_SRC_COMMON_H
#define RK_SRC_COMMON_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ringkernel/clock.h"
#include "ringkernel/error.h"
#include "ringkernel/log.h"
#include "ringkernel/rk_atomic.h"

#define RK_CACHELINE 64

#if defined(__GNUC__)
#define rk__likely(x) __builtin_expect(!!(x), 1)
#define rk__unlikely(x) __builtin_expect(!!(x), 0)
#define RK__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define rk__likely(x) (x)
#define rk__unlikely(x) (x)
#define RK__PRINTF(a, b)
#endif

#define RK__ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/*
 * Assertions guard internal invariants, never inputs: a bad input returns an
 * error code. They stay on in debug and sanitizer builds (RK_DEBUG).
 */
#ifdef RK_DEBUG
#define RK_ASSERT(cond)                                                       \
    do {                                                                      \
        if (rk__unlikely(!(cond)))                                            \
            rk__panic(__FILE__, __LINE__, #cond);                             \
    } while (0)
#else
#define RK_ASSERT(cond) ((void)0)
#endif

/* Reports a broken invariant and aborts. Only RK_ASSERT calls this. */
_Noreturn void
rk__panic(const char *file, int line, const char *what);

/*
 * Records a printf-style detail for the calling thread's rk_errdetail() and
 * returns err, so a failure path reads: return rk__fail(RK_EINVAL, "...").
 */
int
rk__fail(int err, const char *fmt, ...) RK__PRINTF(2, 3);
/* rk__fail for a detail of one string argument (at most 127 bytes of it
 * kept), formatted only if rk_errdetail() reads it: for failures a
 * polling caller expects and ignores (an empty receive without waiting).
 * fmt must be a string literal with exactly one %s. */
int rk__fail_s(int err, const char *fmt, const char *arg);

/*
 * Passes one printf-style message to the application's log callback
 * (rk_set_log), if one is installed and level passes the filter
 * (RK_LOG_FATAL always does). The library's only way to report an event
 * nobody asked about: never fprintf(stderr) from src/ (log.c).
 */
void
rk__log(rk_log_level level, const char *fmt, ...) RK__PRINTF(2, 3);

/* True if a message at level would be delivered past the level filter. */
int
rk__log_enabled(rk_log_level level);

/*
 * Valid UTF-8 as Python's strict decoder takes it (no overlong forms, no
 * surrogates, nothing above U+10FFFF): the length of the sequence that
 * starts at s[0] (1-4, within n), or 0 if it is not a valid one.
 */
size_t
rk__utf8_seq(const unsigned char *s, size_t n);

/* True if all n bytes at s are valid UTF-8 (rk__utf8_seq throughout). */
int
rk__utf8_valid(const void *s, size_t n);

/* The offset of the first byte at s that does not start a valid UTF-8
 * sequence within n bytes; n if all of it is valid. */
size_t
rk__utf8_prefix(const void *s, size_t n);

/*
 * Checks a name the runtime keeps and reports (a kernel id, a topic name):
 * not NULL, not empty, at most max bytes, valid UTF-8 (the exposition and
 * JSON carry it). RK_OK, or RK_EINVAL with a detail that starts "what: "
 * and calls the name kind ("id", "topic name"); a name that is not UTF-8
 * is named by its valid prefix and the offset of its first bad byte.
 */
int
rk__check_name(const char *what, const char *kind, const char *name,
    size_t max);

/* Initialises c to wait with CLOCK_MONOTONIC deadlines, the clock
 * rk_now_ns and rk__deadline read. */
void
rk__cond_init_mono(pthread_cond_t *c);

/* *p read under mu: a count another thread changes under that lock. */
static inline uint32_t
rk__locked_read_u32(pthread_mutex_t *mu, const uint32_t *p)
{
    uint32_t v;

    pthread_mutex_lock(mu);
    v = *p;
    pthread_mutex_unlock(mu);
    return v;
}

/* Clears the calling thread's detail. */
void
rk__clear_detail(void);

/* Absolute deadline (rk_now_ns based) for a relative timeout in ns;
 * RK_WAIT_FOREVER maps to UINT64_MAX and RK_NO_WAIT to "now". */
uint64_t
rk__deadline(int64_t timeout_ns);

/* True if x is a non-zero power of two. */
static inline int
rk__is_pow2(uint64_t x)
{
    return x != 0 && (x & (x - 1)) == 0;
}

/* dlopen (RTLD_NOW | RTLD_LOCAL) of the library the environment variable
 * env names, or of dflt when it is unset or empty. *path is the one tried;
 * on failure NULL, with dlerror's text (or the path) in *err. */
void *
rk__dlopen_env(const char *env, const char *dflt, const char **path,
    const char **err);

/* The least power of two >= x (1 for 0), for x <= 2^63: the size of a
 * ring that holds x (the queues' rings are powers of two; what a queue
 * admits is counted against its capacity, not the ring). */
static inline uint64_t
rk__pow2_at_least(uint64_t x)
{
    uint64_t r = 1;

    while (r < x)
        r <<= 1;
    return r;
}

/* Relax hint for spin loops (pause, yield): the atomics layer's. */
#define rk__cpu_relax rk_atomic_cpu_relax

#endif /* RK_SRC_COMMON_H */
