#include "futex.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

int
rk__futex_wait(_Atomic uint32_t *addr, uint32_t expected, uint64_t deadline)
{
    struct timespec ts, *tsp = NULL;

    if (deadline != UINT64_MAX) {
        uint64_t now = rk_now_ns();
        if (now >= deadline)
            return RK_ETIMEDOUT;
        uint64_t rel = deadline - now;
        ts.tv_sec = (time_t)(rel / 1000000000u);
        ts.tv_nsec = (long)(rel % 1000000000u);
        tsp = &ts;
    }
    /* Private futex: the word is never shared across processes. */
    long r = syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE,
                     expected, tsp, NULL, 0);
    if (r == -1 && errno == ETIMEDOUT)
        return RK_ETIMEDOUT;
    return RK_OK; /* woken, EAGAIN (value changed) or EINTR */
}

void
rk__futex_wake(_Atomic uint32_t *addr, int n)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL,
            0);
}
