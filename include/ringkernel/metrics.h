/** @file
 * ringkernel/metrics.h - the runtime's figures for Prometheus and for
 * scripts: an optional HTTP endpoint and the renderers behind it.
 *
 * A metrics collector (rk_metrics) reads a runtime through the public
 * telemetry calls (rk_kernel_stats_get, rk_kernel_telemetry,
 * rk_topic_stats_get) and the GPU monitor, and renders what it read as
 *
 *   - the Prometheus text exposition format (version 0.0.4), names
 *     ringkernel_*, one `kernel` label per kernel series, `topic` per
 *     topic series, `gpu` per GPU series (docs/metrics.md lists them all);
 *   - one JSON object with the same figures.
 *
 * The collector can also serve both over HTTP (GET or HEAD of /metrics and
 * /stats.json) with libmicrohttpd. The endpoint is optional twice over: it
 * is off until rk_metrics_serve() (or rk_metrics_listen()) is called, and
 * it is compiled in only when the build found libmicrohttpd; without it the
 * listen calls return RK_ENOTSUP with a detail saying how to enable it,
 * and the renderers still work. rk_metrics_serve_env() starts it from the
 * RK_METRICS_ADDR environment variable.
 *
 * Ownership and threads: the caller owns the collector and destroys it
 * with rk_metrics_destroy() BEFORE rk_runtime_destroy() of its runtime (the
 * server thread reads the runtime on every scrape). Every call is
 * thread-safe except that a collector must not be destroyed while another
 * thread uses it. The endpoint runs on one server thread of its own.
 */
#ifndef RINGKERNEL_METRICS_H
#define RINGKERNEL_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringkernel/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An opaque metrics collector and optional HTTP server; the caller owns it.
 */
typedef struct rk_metrics rk_metrics;

/** Where the endpoint listens when no address is given. */
#define RK_METRICS_DEFAULT_ADDR "127.0.0.1:9464"
/** The environment variable rk_metrics_serve_env() reads. */
#define RK_METRICS_ENV "RK_METRICS_ADDR"

/** What a collector reports and how its server behaves; zeroed fields mean the
 * defaults shown. */
typedef struct rk_metrics_config {
    /** Kernels to report: a NULL-terminated list of ids, or NULL to report
     * every kernel registered at the time of each scrape. */
    const char *const *kernels;
    /** Topics to report (NULL-terminated), or NULL to report every topic
     * the runtime has at each scrape (rk_runtime_topic_names) unless some
     * are added later with rk_metrics_add_topic(). */
    const char *const *topics;
    bool no_gpu_monitor;  /**< skip the NVML gauges even when NVML is there */
    uint32_t max_request; /**< largest request head accepted, bytes (0: 8192);
                             a larger one is refused by the server */
    uint32_t max_clients; /**< connections at once (0: 16) */
} rk_metrics_config;

/** Output formats of rk_metrics_render. */
typedef enum rk_metrics_format {
    RK_METRICS_PROMETHEUS = 0, /**< text/plain; version=0.0.4 */
    RK_METRICS_JSON = 1        /**< application/json, one object */
} rk_metrics_format;

/** Creates a collector for rt (cfg NULL or zeroed: the defaults). No server
 * yet. The lists in cfg are copied. On success the caller owns *out.
 * RK_EINVAL, RK_ENOMEM. */
int rk_metrics_create(
    rk_metrics **out, rk_runtime *rt, const rk_metrics_config *cfg);

/** Stops the endpoint if it runs (waits for the scrape in progress) and
 * frees the collector. NULL is a no-op. */
void rk_metrics_destroy(rk_metrics *m);

/** Adds a topic to the report (copied; a second add of the same name does
 * nothing). RK_EINVAL for NULL, or a name that is empty, longer than
 * RK_ID_MAX or not valid UTF-8. */
int rk_metrics_add_topic(rk_metrics *m, const char *topic);

/**
 * Renders the current figures. On success *out is a NUL-terminated string
 * the caller frees with free(), and *len (may be NULL) its length.
 * RK_EINVAL, RK_ENOMEM. A kernel that disappears while the report is made
 * is left out; a named topic that does not exist yet is left out.
 */
int rk_metrics_render(
    rk_metrics *m, rk_metrics_format fmt, char **out, size_t *len);

/**
 * Starts the HTTP endpoint on addr: "HOST:PORT" with HOST an IPv4 address
 * or "localhost" ("0.0.0.0" for every interface); NULL means
 * RK_METRICS_DEFAULT_ADDR, loopback. PORT 0 picks a free port
 * (rk_metrics_port says which). RK_ENOTSUP when the library was built
 * without libmicrohttpd, RK_EINVAL for a malformed address, RK_EALREADY
 * when this collector already listens, RK_EBUSY when the port cannot be
 * bound (detail: the reason).
 */
int rk_metrics_listen(rk_metrics *m, const char *addr);

/** The port the endpoint listens on, 0 when it does not. */
uint16_t rk_metrics_port(const rk_metrics *m);

/** The one call: rk_metrics_create with the defaults, then
 * rk_metrics_listen(addr). On failure *out is NULL and nothing is left
 * running. */
int rk_metrics_serve(rk_runtime *rt, const char *addr, rk_metrics **out);

/** rk_metrics_serve at $RK_METRICS_ADDR when that variable is set and not
 * empty; otherwise RK_OK with *out NULL (metrics off). */
int rk_metrics_serve_env(rk_runtime *rt, rk_metrics **out);

/** True when this build of the library has the HTTP endpoint. */
bool rk_metrics_http_available(void);

#ifdef __cplusplus
}
#endif

#endif /* RINGKERNEL_METRICS_H */
