/*
 * src/queue/inbox.c - the inbox's one choice (see inbox.h): which
 * implementation a configuration gets. Everything after that goes
 * through the table of operations.
 */
#include "queue/inbox.h"
#include "common/common.h"

/* Slot strides are multiples of this: every frame header 64-byte aligned
 * (issue 10, defect 7: a stride of 64 + 3 put headers at odd addresses). */
#define SLOT_ALIGN 64u

uint32_t
rk__inbox_lane_count(const rk_mqueue_config *cfg)
{
    if (cfg == NULL || cfg->backpressure == RK_BP_DROP_OLDEST)
        return 0;
    return cfg->priority_bands ? RK_BAND_COUNT : 1;
}

uint32_t
rk__inbox_stride(uint32_t slot_size)
{
    uint64_t st
        = ((uint64_t)slot_size + SLOT_ALIGN - 1) & ~(uint64_t)(SLOT_ALIGN - 1);

    if (slot_size == 0 || st > UINT32_MAX) {
        rk__fail(RK_EINVAL,
            "input slot_size (64 + max_payload) %u is out of range [1, %u]",
            slot_size, UINT32_MAX - SLOT_ALIGN + 1);
        return 0;
    }
    return (uint32_t)st;
}

size_t
rk__inbox_placed_bytes(const rk_mqueue_config *cfg, uint32_t hold)
{
    return rk__inbox_lane_count(cfg) == 0 ? 0
                                          : rk__inbox_lanes_bytes(cfg, hold);
}

int
rk__inbox_create(rk__inbox **out, const rk_mqueue_config *cfg, uint32_t hold,
    rk__ec *wake, void *mem)
{
    RK_ASSERT(out != NULL && cfg != NULL && wake != NULL);
    *out = NULL;
    if (cfg->capacity == 0)
        return rk__fail(RK_EINVAL, "input_capacity must be at least 1");
    if (rk__inbox_stride(cfg->slot_size) == 0)
        return RK_EINVAL;
    if (rk__inbox_lane_count(cfg) == 0)
        return rk__inbox_mqueue_create(out, cfg, hold, wake);
    return rk__inbox_lanes_create(out, cfg, hold, wake, mem);
}
