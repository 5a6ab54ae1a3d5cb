#include <stdarg.h>
#include <stdio.h>
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

const char *
rk_errdetail(void)
{
    return detail;
}

void
rk__clear_detail(void)
{
    detail[0] = '\0';
}

int
rk__fail(int err, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    return err;
}

_Noreturn void
rk__panic(const char *file, int line, const char *what)
{
    fprintf(stderr, "ringkernel: invariant broken at %s:%d: %s\n", file, line,
            what);
    abort();
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
