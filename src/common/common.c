#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "ringkernel/version.h"

#define RK__STR2(x) #x
#define RK__STR(x) RK__STR2(x)

static const char *const err_msgs[] = {
#define RK__ERR_MSG(name, msg) msg,
    RK_ERRNO_MAP(RK__ERR_MSG)
#undef RK__ERR_MSG
};

static const char *const err_names[] = {
#define RK__ERR_NAME(name, msg) "RK_" #name,
    RK_ERRNO_MAP(RK__ERR_NAME)
#undef RK__ERR_NAME
};

const char *
rk_strerror(int err)
{
    if (err < 0 || err >= RK__ERR_COUNT)
        return "unknown error";
    return err_msgs[err];
}

const char *
rk_err_name(int err)
{
    if (err < 0 || err >= RK__ERR_COUNT)
        return "RK_E?";
    return err_names[err];
}

static _Thread_local char detail[512];
/* A detail not yet formatted (rk__fail_s): fmt with one %s, and its
 * argument. Formatted when read. */
static _Thread_local const char *lazy_fmt;
static _Thread_local char lazy_arg[128];

const char *
rk_errdetail(void)
{
    if (lazy_fmt != NULL) {
        snprintf(detail, sizeof(detail), lazy_fmt, lazy_arg);
        lazy_fmt = NULL;
    }
    return detail;
}

void
rk__clear_detail(void)
{
    lazy_fmt = NULL;
    detail[0] = '\0';
}

int
rk__fail_s(int err, const char *fmt, const char *arg)
{
    size_t n = strlen(arg);

    if (n >= sizeof(lazy_arg))
        n = sizeof(lazy_arg) - 1;
    memcpy(lazy_arg, arg, n);
    lazy_arg[n] = '\0';
    lazy_fmt = fmt;
    return err;
}

int
rk__fail(int err, const char *fmt, ...)
{
    char buf[sizeof(detail)];
    va_list ap;

    /* Formatted aside first: callers wrap the detail they were given
     * (rk__fail(rc, "kernel '%s': %s", id, rk_errdetail())), which must not
     * be overwritten while it is read. */
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    lazy_fmt = NULL;
    memcpy(detail, buf, sizeof(detail));
    return err;
}

size_t
rk__utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0], lo = 0x80, hi = 0xbf;
    size_t k;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        k = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
        k = 2;
        if (c == 0xe0)
            lo = 0xa0; /* overlong */
        else if (c == 0xed)
            hi = 0x9f; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        k = 3;
        if (c == 0xf0)
            lo = 0x90; /* overlong */
        else if (c == 0xf4)
            hi = 0x8f; /* above U+10FFFF */
    } else {
        return 0;
    }
    if (k > n - 1 || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t j = 2; j <= k; j++)
        if ((s[j] & 0xc0) != 0x80)
            return 0;
    return k + 1;
}

size_t
rk__utf8_prefix(const void *p, size_t n)
{
    const unsigned char *s = p;
    size_t i = 0;

    while (i < n) {
        size_t k;

        if (s[i] < 0x80) { /* ASCII runs: the common case */
            i++;
            continue;
        }
        if ((k = rk__utf8_seq(s + i, n - i)) == 0)
            return i;
        i += k;
    }
    return n;
}

int
rk__utf8_valid(const void *p, size_t n)
{
    return rk__utf8_prefix(p, n) == n;
}

/* How many of the first n bytes of the valid UTF-8 at s to quote in a
 * detail: at most cap, never ending inside a sequence. */
static int
quote_len(const char *s, size_t n, size_t cap)
{
    if (n <= cap)
        return (int)n;
    while (cap > 0 && ((unsigned char)s[cap] & 0xc0) == 0x80)
        cap--;
    return (int)cap;
}

int
rk__check_name(
    const char *what, const char *kind, const char *name, size_t max)
{
    size_t n, ok;

    if (name == NULL || name[0] == '\0')
        return rk__fail(RK_EINVAL, "%s: empty %s", what, kind);
    n = strlen(name);
    ok = rk__utf8_prefix(name, n);
    if (ok < n)
        return rk__fail(RK_EINVAL,
            "%s: %s is not valid UTF-8 at byte %zu (0x%02x, after '%.*s')",
            what, kind, ok, (unsigned)(unsigned char)name[ok],
            quote_len(name, ok, 40), name);
    if (n > max)
        return rk__fail(RK_EINVAL, "%s: %s '%.*s...' is %zu bytes (max %zu)",
            what, kind, quote_len(name, n, 20), name, n, max);
    return RK_OK;
}

const char *
rk_version(void)
{
    return RK__STR(RK_VERSION_MAJOR) "." RK__STR(
        RK_VERSION_MINOR) "." RK__STR(RK_VERSION_PATCH);
}

unsigned
rk_version_number(void)
{
    return RK_VERSION_NUMBER;
}

uint64_t
rk_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t
rk__deadline(int64_t timeout_ns)
{
    if (timeout_ns < 0)
        return UINT64_MAX;
    return rk_now_ns() + (uint64_t)timeout_ns;
}

void *
rk__dlopen_env(
    const char *env, const char *dflt, const char **path, const char **err)
{
    const char *p = getenv(env);
    void *lib;

    if (p == NULL || p[0] == '\0')
        p = dflt;
    *path = p;
    dlerror();
    lib = dlopen(p, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *e = dlerror();
        *err = e != NULL ? e : p;
    }
    return lib;
}

void
rk__cond_init_mono(pthread_cond_t *c)
{
    pthread_condattr_t a;

    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
}
