/*
 * src/common/futex.h - the parking primitive under every blocking call.
 *
 * A thin wrapper over Linux futex(2) on a 32-bit word. The lost-wake-up
 * protocol (check state, publish "I am sleeping", re-check, wait) belongs to
 * the caller; rk__futex_wait() only sleeps while *addr still equals expected.
 */
#ifndef RK_SRC_FUTEX_H
#define RK_SRC_FUTEX_H

#include <stdatomic.h>
#include <stdint.h>

/* Sleeps while *addr == expected, until woken or until the absolute
 * rk_now_ns() deadline (UINT64_MAX: none). Returns RK_OK when woken or when
 * *addr had already changed, RK_ETIMEDOUT at the deadline. Spurious
 * wake-ups return RK_OK; callers re-check their condition. */
int
rk__futex_wait(_Atomic uint32_t *addr, uint32_t expected, uint64_t deadline);

/* Wakes up to n waiters (INT32_MAX: all) sleeping on addr. */
void
rk__futex_wake(_Atomic uint32_t *addr, int n);

#endif /* RK_SRC_FUTEX_H */
