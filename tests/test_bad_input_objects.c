/*
 * The bad-input table (issue 10, see test_bad_input.c) for buffer.h, pool.h, device.h,
 * clock.h, error.h, log.h and version.h:
 * NULL, zero, huge, stale and garbage arguments, each row with the code
 * it must return. Runs under ASan and UBSan in CI (make asan).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bad_input.h"
#include "common/common.h"
#include "msg_test_types.h"
#include "ringkernel/ringkernel.h"

/* ------------------------------------------------------------ buffer */

static int
dtype_garbage(void)
{
    return rk_dtype_size((rk_dtype)99) == 0
            && rk_dtype_name((rk_dtype)99) != NULL
            && rk_buffer_state_name((rk_buffer_state)99) != NULL
        ? RK_OK
        : WRONG;
}
static int
buffer_create_null(void)
{
    rk_buffer_config c = { .dims = { 4 } };
    return rk_buffer_create(NULL, &c);
}
static int
buffer_create_zero(void)
{
    rk_buffer *b = NULL;
    return rk_buffer_create(&b, NULL); /* no dims */
}
static int
buffer_create_huge(void)
{
    rk_buffer *b = NULL;
    rk_buffer_config c
        = { .dtype = RK_DTYPE_F64, .dims = { SIZE_MAX / 2, 4, 0 } };
    return rk_buffer_create(&b, &c);
}
static int
buffer_create_garbage_dtype(void)
{
    rk_buffer *b = NULL;
    rk_buffer_config c = { .dtype = (rk_dtype)99, .dims = { 4 } };
    return rk_buffer_create(&b, &c);
}
static int
buffer_create_garbage_device(void)
{
    rk_buffer *b = NULL;
    rk_buffer_config c = { .device = (rk_device_kind)99, .dims = { 4 } };
    return rk_buffer_create(&b, &c);
}
static int
buffer_create_bad_elem_size(void)
{
    rk_buffer *b = NULL;
    rk_buffer_config c
        = { .dtype = RK_DTYPE_F32, .elem_size = 3, .dims = { 4 } };
    return rk_buffer_create(&b, &c);
}
static int
buffer_null_calls(void)
{
    void *p;
    char e[8] = { 0 };
    rk_buffer_stats s;

    rk_buffer_destroy(NULL);
    rk_buffer_stats_get(NULL, &s);
    rk_buffer_stats_reset(NULL);
    if (rk_buffer_host(NULL, RK_ACCESS_READ, &p) != RK_EINVAL
        || rk_buffer_device(NULL, RK_ACCESS_READ, &p) != RK_EINVAL
        || rk_buffer_mark_host_dirty(NULL) != RK_EINVAL
        || rk_buffer_mark_device_dirty(NULL) != RK_EINVAL
        || rk_buffer_ensure_host(NULL, NULL) != RK_EINVAL
        || rk_buffer_ensure_device(NULL, NULL) != RK_EINVAL
        || rk_buffer_copy_from(NULL, e, 1) != RK_EINVAL
        || rk_buffer_copy_to(NULL, e, 1) != RK_EINVAL
        || rk_buffer_fill(NULL, e) != RK_EINVAL)
        return WRONG;
    if (rk_buffer_elem_size(NULL) != 0 || rk_buffer_ndim(NULL) != 0
        || rk_buffer_dim(NULL, 0) != 1 || rk_buffer_count(NULL) != 0
        || rk_buffer_bytes(NULL) != 0 || rk_buffer_is_pinned(NULL))
        return WRONG;
    (void)rk_buffer_get_state(NULL);
    (void)rk_buffer_dtype(NULL);
    (void)rk_buffer_device_kind(NULL);
    return rk_buffer_zeros(NULL);
}
static int
buffer_garbage_args(void)
{
    rk_buffer *b = NULL;
    rk_buffer_config c = { .dtype = RK_DTYPE_U8, .dims = { 16 } };
    char src[16] = { 0 };
    void *p;
    int rc = RK_OK;

    if (rk_buffer_create(&b, &c) != RK_OK)
        return WRONG;
    if (rk_buffer_host(b, (rk_access)9, &p) != RK_EINVAL
        || rk_buffer_host(b, RK_ACCESS_READ, NULL) != RK_EINVAL
        || rk_buffer_copy_from(b, NULL, 16) != RK_EINVAL
        || rk_buffer_copy_from(b, src, SIZE_MAX) == RK_OK
        || rk_buffer_copy_to(b, NULL, 16) != RK_EINVAL
        || rk_buffer_copy_to(b, src, SIZE_MAX) == RK_OK
        || rk_buffer_fill(b, NULL) != RK_EINVAL || rk_buffer_dim(b, 99) != 1)
        rc = WRONG;
    rk_buffer_stats_get(b, NULL);
    rk_buffer_destroy(b);
    return rc;
}

/* -------------------------------------------------------------- pool */

static int
pool_create_bad(void)
{
    rk_pool *p = NULL;
    rk_pool_config c = { .kind = (rk_pool_kind)99 };

    if (rk_pool_create(NULL, NULL) != RK_EINVAL
        || rk_pool_create(&p, &c) != RK_EINVAL)
        return WRONG;
    c.kind = RK_POOL_HOST;
    c.min_block = 3;
    if (rk_pool_create(&p, &c) != RK_EINVAL)
        return WRONG;
    c.min_block = 128;
    c.max_block = 64;
    if (rk_pool_create(&p, &c) != RK_EINVAL)
        return WRONG;
    c.max_block = SIZE_MAX / 2 + 1;
    if (rk_pool_create(&p, &c) != RK_EINVAL)
        return WRONG;
    c.max_block = 0;
    c.checks = (rk_pool_checks)99;
    return rk_pool_create(&p, &c);
}
static int
pool_null_calls(void)
{
    rk_pool_stats s;
    void *x;

    rk_pool_destroy(NULL);
    rk_pool_trim(NULL, 0);
    rk_pool_free_all(NULL);
    memset(&s, 0xff, sizeof(s));
    rk_pool_stats_get(NULL, &s);
    if (s.used_bytes != 0 || rk_pool_get_kind(NULL) != RK_POOL_HOST
        || rk_pool_block_size(NULL, 5) != 5 || rk_pool_checking(NULL))
        return WRONG;
    if (rk_pool_alloc(NULL, 8, &x) != RK_EINVAL)
        return WRONG;
    return rk_pool_free(NULL, &s, 8);
}
static int
pool_zero_huge_stale(void)
{
    rk_pool *p = NULL;
    rk_pool_config c = { .checks = RK_POOL_CHECKS_ON };
    void *x = NULL;
    int rc = RK_OK;

    if (rk_pool_create(&p, &c) != RK_OK)
        return WRONG;
    rk_pool_stats_get(p, NULL);
    if (rk_pool_alloc(p, 0, &x) != RK_EINVAL
        || rk_pool_alloc(p, 8, NULL) != RK_EINVAL
        || rk_pool_alloc(p, SIZE_MAX, &x) != RK_ENOMEM
        || rk_pool_free(p, NULL, 8) != RK_OK)
        rc = WRONG;
    if (rc == RK_OK && rk_pool_alloc(p, 64, &x) == RK_OK) {
        if (rk_pool_free(p, x, 64) != RK_OK
            || rk_pool_free(p, x, 64) != RK_EINVAL /* stale: freed */
            || rk_pool_free(p, (char *)x + 1, 64) != RK_EINVAL)
            rc = WRONG;
    }
    rk_pool_destroy(p);
    return rc;
}

/* ------------------------------------------------------------ device */

static int
device_null_calls(void)
{
    const rk_device_info *info = NULL;
    const char *d = NULL;

    rk_device_list_free(NULL);
    if (rk_device_list_count(NULL) != 0 || rk_device_list_get(NULL, 0) != NULL
        || rk_cuda_status_name((rk_cuda_status)99) == NULL
        || rk_device_list_cuda_driver_version(NULL) != 0)
        return WRONG;
    (void)rk_device_list_cuda_status(NULL, &d);
    (void)rk_device_list_cuda_status(NULL, NULL);
    (void)rk_cuda_probe(NULL);
    if (rk_device_select(NULL, RK_DEVICE_CPU, 0, &info) != RK_EINVAL)
        return WRONG;
    return rk_devices_query(NULL);
}
static int
device_garbage_args(void)
{
    rk_device_list *l = NULL;
    const rk_device_info *info = NULL;
    int rc = RK_OK;

    if (rk_devices_query(&l) != RK_OK)
        return WRONG;
    if (rk_device_list_get(l, SIZE_MAX) != NULL
        || rk_device_list_get(l, rk_device_list_count(l)) != NULL
        || rk_device_select(l, (rk_device_kind)99, 0, &info) == RK_OK
        || rk_device_select(l, RK_DEVICE_CPU, -5, &info) == RK_OK
        || rk_device_select(l, RK_DEVICE_CPU, 0, NULL) != RK_EINVAL)
        rc = WRONG;
    rk_device_list_free(l);
    return rc;
}
static int
monitor_null_calls(void)
{
    rk_gpu_reading r;
    const char *d;

    rk_gpu_monitor_close(NULL);
    (void)rk_gpu_monitor_status(NULL, &d);
    (void)rk_gpu_monitor_status(NULL, NULL);
    if (rk_gpu_monitor_count(NULL) != 0
        || rk_gpu_monitor_read(NULL, 0, &r) == RK_OK)
        return WRONG;
    return rk_gpu_monitor_open(NULL);
}
static int
monitor_garbage_index(void)
{
    rk_gpu_monitor *m = NULL;
    rk_gpu_reading r;
    int rc;

    if (rk_gpu_monitor_open(&m) != RK_OK)
        return WRONG;
    rc = rk_gpu_monitor_read(m, UINT32_MAX, &r);
    if (rc != RK_OK && rk_gpu_monitor_read(m, 0, NULL) == RK_OK)
        rc = WRONG;
    rk_gpu_monitor_close(m);
    return rc;
}

/* ------------------------------------ clock, error, log, version */

static int
error_garbage_codes(void)
{
    if (strcmp(rk_strerror(-1), "unknown error") != 0
        || strcmp(rk_strerror(INT32_MAX), "unknown error") != 0
        || strcmp(rk_err_name(-5), "RK_E?") != 0
        || strcmp(rk_err_name(RK__ERR_COUNT), "RK_E?") != 0
        || rk_errdetail() == NULL)
        return WRONG;
    return RK_OK;
}
static int
clock_and_version(void)
{
    uint64_t a = rk_now_ns(), b = rk_now_ns();

    if (b < a || rk_version() == NULL
        || rk_version_number() != RK_VERSION_NUMBER)
        return WRONG;
    return RK_OK;
}
static int
log_garbage_level(void)
{
    if (rk_set_log_level((rk_log_level)-1) != RK_EINVAL
        || strcmp(rk_log_level_name((rk_log_level)99), "?") != 0)
        return WRONG;
    rk_set_log(NULL, NULL);
    return rk_set_log_level((rk_log_level)99);
}

/* -------------------------------------------------------------- table */

static const struct row rows[] = {
    /* buffer.h */
    ROW(dtype_garbage, RK_OK),
    ROW(buffer_create_null, RK_EINVAL),
    ROW(buffer_create_zero, RK_EINVAL),
    ROW(buffer_create_huge, RK_ETOOBIG),
    ROW(buffer_create_garbage_dtype, RK_EINVAL),
    ROW(buffer_create_garbage_device, RK_EINVAL),
    ROW(buffer_create_bad_elem_size, RK_EINVAL),
    ROW(buffer_null_calls, RK_EINVAL),
    ROW(buffer_garbage_args, RK_OK),
    /* pool.h */
    ROW(pool_create_bad, RK_EINVAL),
    ROW(pool_null_calls, RK_EINVAL),
    ROW(pool_zero_huge_stale, RK_OK),
    /* device.h */
    ROW(device_null_calls, RK_EINVAL),
    ROW(device_garbage_args, RK_OK),
    ROW(monitor_null_calls, RK_EINVAL),
    ROW(monitor_garbage_index, ANY_ERROR),
    /* clock.h, error.h, log.h, version.h */
    ROW(error_garbage_codes, RK_OK),
    ROW(clock_and_version, RK_OK),
    ROW(log_garbage_level, RK_EINVAL),
};

int
main(void)
{
    return run_rows("bad_input_objects", rows, sizeof(rows) / sizeof(rows[0]));
}
