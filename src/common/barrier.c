/*
 * src/common/barrier.c - membarrier registration (see barrier.h).
 */
#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/barrier.h"

_Atomic bool rk__barrier_asym;

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void
do_init(void)
{
#if defined(SYS_membarrier) && !defined(RK_NO_MEMBARRIER)
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);

    if (cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED)
        && syscall(
               SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0)
            == 0)
        atomic_store_explicit(&rk__barrier_asym, true, memory_order_relaxed);
#endif
}

void
rk__barrier_init(void)
{
    /* pthread_once orders this store before every later caller's loads;
     * kernel threads are created after it (pthread_create orders too). */
    pthread_once(&once, do_init);
}

void
rk__heavy_barrier(void)
{
    if (atomic_load_explicit(&rk__barrier_asym, memory_order_relaxed)) {
#if defined(SYS_membarrier)
        if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0)
            == 0)
            return;
#endif
    }
    atomic_thread_fence(memory_order_seq_cst);
}
