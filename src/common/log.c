/*
 * src/common/log.c - the process-wide log callback (ringkernel/log.h).
 *
 * The callback and its user pointer change together under log_lock; a
 * message copies both under the lock and calls the callback outside it,
 * so a slow callback never blocks rk_set_log() and a callback may log
 * again. The level filter is a relaxed atomic read first, so a message
 * below the level costs one load and no formatting.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "ringkernel/log.h"

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static rk_log_fn log_fn; /* under log_lock */
static void *log_user;   /* under log_lock */
static _Atomic int log_min = RK_LOG_INFO;

void
rk_set_log(rk_log_fn fn, void *user)
{
    pthread_mutex_lock(&log_lock);
    log_fn = fn;
    log_user = user;
    pthread_mutex_unlock(&log_lock);
}

int
rk_set_log_level(rk_log_level min_level)
{
    if ((int)min_level < RK_LOG_DEBUG || (int)min_level > RK_LOG_FATAL)
        return rk__fail(RK_EINVAL,
            "rk_set_log_level: level %d is not "
            "RK_LOG_DEBUG..RK_LOG_FATAL",
            (int)min_level);
    atomic_store_explicit(&log_min, (int)min_level, memory_order_relaxed);
    return RK_OK;
}

const char *
rk_log_level_name(rk_log_level level)
{
    switch (level) {
    case RK_LOG_DEBUG:
        return "debug";
    case RK_LOG_INFO:
        return "info";
    case RK_LOG_WARN:
        return "warn";
    case RK_LOG_ERROR:
        return "error";
    case RK_LOG_FATAL:
        return "fatal";
    }
    return "?";
}

int
rk__log_enabled(rk_log_level level)
{
    return (int)level >= atomic_load_explicit(&log_min, memory_order_relaxed);
}

void
rk__log(rk_log_level level, const char *fmt, ...)
{
    char msg[512];
    rk_log_fn fn;
    void *user;
    va_list ap;

    if (!rk__log_enabled(level) && level != RK_LOG_FATAL)
        return;
    pthread_mutex_lock(&log_lock);
    fn = log_fn;
    user = log_user;
    pthread_mutex_unlock(&log_lock);
    if (fn == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fn(level, msg, user);
}

_Noreturn void
rk__panic(const char *file, int line, const char *what)
{
    /* The one message the library writes itself (log.h): the process is
     * about to abort, so a quiet default would hide why. */
    rk__log(RK_LOG_FATAL, "invariant broken at %s:%d: %s", file, line, what);
    fprintf(stderr, "ringkernel: invariant broken at %s:%d: %s\n", file, line,
            what);
    abort();
}
