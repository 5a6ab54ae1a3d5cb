/** @file
 * ringkernel/ringkernel.h - the umbrella header: everything public.
 *
 * ringkernel is a C11 library for GPU-native actors: persistent kernels
 * (CPU threads, or CUDA kernels resident on the GPU) that exchange messages
 * through lock-free ring-buffer queues. docs/architecture.md maps each
 * header below to the subsystem under src/ that implements it.
 */
#ifndef RINGKERNEL_H
#define RINGKERNEL_H

#include "ringkernel/buffer.h"
#include "ringkernel/clock.h"
#include "ringkernel/cluster.h"
#include "ringkernel/device.h"
#include "ringkernel/error.h"
#include "ringkernel/log.h"
#include "ringkernel/message.h"
#include "ringkernel/metrics.h"
#include "ringkernel/oneshot.h"
#include "ringkernel/pool.h"
#include "ringkernel/queue.h"
#include "ringkernel/runtime.h"
#include "ringkernel/telemetry.h"
#include "ringkernel/version.h"

#endif /* RINGKERNEL_H */
