/*
 * src/queue/inbox_create.c - the inbox's one choice (see inbox.h): which
 * implementation a configuration gets. Everything after that goes
 * through the table of operations. (Not inbox.c: the implementations
 * use inbox.h, and this file uses them.)
 */
#include "queue/inbox.h"
#include "common/common.h"

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
