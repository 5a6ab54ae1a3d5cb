/*
 * src/metrics/metrics_internal.h - the collector shared by the renderers
 * (render.c) and the HTTP endpoint (http.c). Not installed.
 *
 * Ownership: the collector owns its copies of the kernel and topic lists,
 * the GPU monitor it opened and, while it listens, the server (http.c).
 * The topic list may grow while a scrape reads it, so it is read and
 * written under lock.
 */
#ifndef RK_SRC_METRICS_INTERNAL_H
#define RK_SRC_METRICS_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "ringkernel/device.h"
#include "ringkernel/metrics.h"

struct rk__metrics_server; /* http.c; NULL while not listening */

struct rk_metrics {
    rk_runtime *rt;
    char **kernels; /* NULL: discover at each scrape */
    size_t nkernels;
    pthread_mutex_t lock; /* guards topics and ntopics */
    char **topics;
    size_t ntopics, captopics;
    rk_gpu_monitor *mon; /* NULL with no_gpu_monitor */
    rk_metrics_config cfg;
    struct rk__metrics_server *server;
    /* Stops and frees server; set by http.c while it listens, so the
     * collector (render.c) releases an attached server without calling
     * up into the endpoint's code. */
    void (*server_stop)(rk_metrics *m);
};

/* Stops and frees m->server (http.c); no-op when it is NULL. */
void rk__metrics_server_stop(rk_metrics *m);

#endif /* RK_SRC_METRICS_INTERNAL_H */
