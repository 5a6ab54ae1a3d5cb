/** @file
 * ringkernel/log.h - where the library's own diagnostics go.
 *
 * The library never writes to stderr (or anywhere else) on its own. The
 * few events worth telling an operator about that are not the result of a
 * call (a kernel that ignored its terminate timeout, for example) are
 * passed to one process-wide callback that the application installs with
 * rk_set_log(). Without one they are dropped: the default is quiet.
 *
 * The single exception is a broken internal invariant (an RK_ASSERT in a
 * debug or sanitizer build): the library then writes one line to stderr
 * as well as calling the callback at RK_LOG_FATAL, and aborts.
 */
#ifndef RINGKERNEL_LOG_H
#define RINGKERNEL_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

/** Severity of a library log message. */
typedef enum rk_log_level {
    RK_LOG_DEBUG = 0, /**< detail for developers */
    RK_LOG_INFO = 1,  /**< normal events worth noting */
    RK_LOG_WARN = 2,  /**< something went wrong but the library carried on */
    RK_LOG_ERROR = 3, /**< an operation failed */
    RK_LOG_FATAL = 4  /**< a broken invariant; the process aborts */
} rk_log_level;

/**
 * The callback receives the level, one formatted message (no trailing
 * newline, NUL-terminated, at most 511 bytes; the library owns it and it
 * is valid only during the call) and the user pointer given to
 * rk_set_log(). It may be called from any thread, including kernel
 * threads, concurrently with itself; it must not call back into the
 * runtime.
 */
typedef void (*rk_log_fn)(rk_log_level level, const char *msg, void *user);

/**
 * Installs fn with its user pointer (fn NULL: drop every message, the
 * default). Thread-safe; a message being delivered while the callback
 * changes goes to the old or the new one, never to a mix of the two.
 */
void rk_set_log(rk_log_fn fn, void *user);

/** Messages below min_level are not formatted or delivered (default
 * RK_LOG_INFO). Returns RK_OK, or RK_EINVAL for a level outside
 * RK_LOG_DEBUG..RK_LOG_FATAL. */
int rk_set_log_level(rk_log_level min_level);

/** "debug", "info", "warn", "error", "fatal"; "?" for anything else. */
const char *rk_log_level_name(rk_log_level level);

#ifdef __cplusplus
}
#endif

#endif /* RINGKERNEL_LOG_H */
