/*
 * src/backend/ack.c - waiting for an instance's acknowledgement, for
 * backends whose instance (or its host relay) notifies an eventcount after
 * storing each ack (see backend.h).
 */
#include "backend/backend.h"
#include "common/common.h"

int
rk__ack_wait(rk__ec *ack, const rk_ctl *ctl, uint32_t mask, uint64_t deadline)
{
    mask |= 1u << RK_CTL_ACK_EXITED;
    for (;;) {
        uint32_t key = rk__ec_prepare(ack);
        /* Acquire pairs with the instance's release store of its ack
         * (rk_ctl_ack), made before it notified. */
        if (mask & (1u << rk_ctl_ack_get(ctl))) {
            rk__ec_cancel(ack);
            return RK_OK;
        }
        if (rk__ec_wait(ack, key, deadline) == RK_ETIMEDOUT)
            return mask & (1u << rk_ctl_ack_get(ctl)) ? RK_OK : RK_ETIMEDOUT;
    }
}
