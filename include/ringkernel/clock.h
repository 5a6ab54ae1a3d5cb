/** @file
 * ringkernel/clock.h - the library's one clock.
 *
 * Message send timestamps, timeouts and latency telemetry all use this
 * monotonic nanosecond clock, so values from different subsystems compare.
 */
#ifndef RINGKERNEL_CLOCK_H
#define RINGKERNEL_CLOCK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Timeout values accepted by every blocking call in the library. */
#define RK_NO_WAIT ((int64_t)0)      /**< fail at once instead of waiting */
#define RK_WAIT_FOREVER ((int64_t)-1) /**< wait with no deadline */

/** Nanoseconds on CLOCK_MONOTONIC. */
uint64_t
rk_now_ns(void);

#ifdef __cplusplus
}
#endif

#endif /* RINGKERNEL_CLOCK_H */
