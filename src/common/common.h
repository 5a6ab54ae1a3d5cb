/*
 * src/common/common.h - internals shared by every subsystem.
 *
 * Nothing here is installed. Names shared across files use the rk__ prefix.
 */
#ifndef RK_SRC_COMMON_H
#define RK_SRC_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ringkernel/clock.h"
#include "ringkernel/error.h"

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

/* Relax hint for spin loops. */
static inline void
rk__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif /* RK_SRC_COMMON_H */
