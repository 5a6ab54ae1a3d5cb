/*
 * tests/support/worker_check.h - checks in worker threads.
 *
 * cmocka's asserts are not thread-safe: a worker thread counts each failed
 * check in worker_errors instead, and the main thread asserts that the
 * count is zero after joining. Header-only; one copy per test program.
 */
#ifndef RK_TEST_WORKER_CHECK_H
#define RK_TEST_WORKER_CHECK_H

#include <stdatomic.h>
#include <stdint.h>

static _Atomic uint32_t worker_errors;

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond))                                                          \
            atomic_fetch_add(&worker_errors, 1);                              \
    } while (0)

#endif /* RK_TEST_WORKER_CHECK_H */
