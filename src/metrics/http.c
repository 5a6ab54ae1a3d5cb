/*
 * src/metrics/http.c - the metrics HTTP endpoint on libmicrohttpd.
 *
 * Built with the server when CMake found libmicrohttpd (RK_HAVE_MHD);
 * otherwise the listen calls return RK_ENOTSUP and say how to enable it.
 *
 * The daemon runs one internal polling thread (MHD_USE_INTERNAL_POLLING_
 * THREAD), so scrapes are served one at a time and the collector is only
 * read from that thread and from the caller's. Each response is rendered,
 * handed to libmicrohttpd (which frees it once sent) and never cached, so
 * memory is bounded by max_clients connections of max_request bytes each
 * plus one report per connection in flight.
 *
 * Requests: GET or HEAD of /metrics (Prometheus text) or /stats.json;
 * another path gets 404 (a path that decodes to one of the two followed
 * by a NUL, "/metrics%00.json", included: the URI callback sees the path
 * before libmicrohttpd decodes it), another method 405 with an Allow
 * header, and a request head over max_request bytes is refused by
 * libmicrohttpd itself (414 or 431) because the connection's memory pool
 * is that size.
 *
 * Slow clients: a connection has HEAD_DEADLINE to send a complete request
 * head and REQUEST_DEADLINE to be answered, and at max_clients
 * connections a newcomer displaces the one that has waited longest for
 * its head (conn_guard.h). libmicrohttpd's own limit is twice max_clients,
 * so that displaced connections, still closing, do not make it refuse the
 * newcomer first; memory stays bounded by that many connections.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "metrics/conn_guard.h"
#include "metrics/metrics_internal.h"

#define HEAD_DEADLINE_NS    (2 * 1000000000ull)
#define REQUEST_DEADLINE_NS (10 * 1000000000ull)

/*
 * Parses "HOST:PORT" (HOST: dotted IPv4, "localhost", or empty for
 * loopback) into sa. NULL means RK_METRICS_DEFAULT_ADDR.
 */
static int
parse_addr(const char *addr, struct sockaddr_in *sa)
{
    char host[64];
    const char *colon;
    char *end;
    unsigned long port;

    if (addr == NULL)
        addr = RK_METRICS_DEFAULT_ADDR;
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    colon = strrchr(addr, ':');
    if (colon == NULL || (size_t)(colon - addr) >= sizeof(host))
        return rk__fail(RK_EINVAL,
            "metrics address '%s' is not HOST:PORT (e.g. %s)", addr,
            RK_METRICS_DEFAULT_ADDR);
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    port = strtoul(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || port > 65535)
        return rk__fail(
            RK_EINVAL, "metrics address '%s': bad port '%s'", addr, colon + 1);
    sa->sin_port = htons((uint16_t)port);
    if (host[0] == '\0' || strcmp(host, "localhost") == 0)
        strcpy(host, "127.0.0.1");
    if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
        return rk__fail(RK_EINVAL,
            "metrics address '%s': host '%s' is not an IPv4 address", addr,
            host);
    return RK_OK;
}

int
rk_metrics_serve(rk_runtime *rt, const char *addr, rk_metrics **out)
{
    rk_metrics *m;
    int rc;

    if (out == NULL)
        return rk__fail(RK_EINVAL, "rk_metrics_serve: out is NULL");
    *out = NULL;
    if ((rc = rk_metrics_create(&m, rt, NULL)) != RK_OK)
        return rc;
    if ((rc = rk_metrics_listen(m, addr)) != RK_OK) {
        rk_metrics_destroy(m);
        return rc;
    }
    *out = m;
    return RK_OK;
}

int
rk_metrics_serve_env(rk_runtime *rt, rk_metrics **out)
{
    const char *addr = getenv(RK_METRICS_ENV);

    if (out == NULL)
        return rk__fail(RK_EINVAL, "rk_metrics_serve_env: out is NULL");
    *out = NULL;
    if (addr == NULL || *addr == '\0')
        return RK_OK;
    return rk_metrics_serve(rt, addr, out);
}

#ifdef RK_HAVE_MHD

#include <microhttpd.h>

#if MHD_VERSION >= 0x00097002
typedef enum MHD_Result mhd_result;
#else
typedef int mhd_result;
#endif

struct rk__metrics_server {
    struct MHD_Daemon *d;
    rk__conn_guard *guard;
    uint16_t port;
};

/* Request states in libmicrohttpd's per-request pointer (*state): set by
 * on_uri before the head is complete (whether the raw path holds an
 * encoded NUL), then by on_request's first call. */
static int uri_plain, uri_nul, head_plain, head_nul;

/* The raw request target, before libmicrohttpd decodes it: a "%00" in
 * its path decodes to a NUL, which would end the decoded path early. */
static void *
on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    size_t path = strcspn(uri, "?");

    (void)cls;
    (void)c;
    for (size_t i = 0; i + 2 < path; i++)
        if (uri[i] == '%' && uri[i + 1] == '0' && uri[i + 2] == '0')
            return &uri_nul;
    return &uri_plain;
}

static mhd_result
on_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
    (void)addr;
    (void)len;
    return rk__guard_admit(cls) ? MHD_YES : MHD_NO;
}

static void
on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
    enum MHD_ConnectionNotificationCode code)
{
    const union MHD_ConnectionInfo *info;

    (void)socket_ctx;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        rk__guard_closed(cls, c);
        return;
    }
    info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (info != NULL)
        (void)rk__guard_started(cls, c, info->connect_fd);
}

static void
on_completed(void *cls, struct MHD_Connection *c, void **state,
    enum MHD_RequestTerminationCode code)
{
    (void)state;
    (void)code;
    rk__guard_idle(cls, c);
}

bool
rk_metrics_http_available(void)
{
    return true;
}

static mhd_result
reply_text(struct MHD_Connection *c, unsigned status, const char *text,
    const char *allow)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        strlen(text), (void *)(uintptr_t)text, MHD_RESPMEM_PERSISTENT);
    mhd_result ok;

    if (r == NULL)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
    if (allow)
        MHD_add_response_header(r, "Allow", allow);
    ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static mhd_result
on_request(void *cls, struct MHD_Connection *c, const char *url,
    const char *method, const char *version, const char *upload,
    size_t *upload_size, void **state)
{
    rk_metrics *m = cls;
    rk_metrics_format fmt;
    const char *type;
    struct MHD_Response *r;
    char *body;
    size_t len;
    mhd_result ok;

    (void)version;
    (void)upload;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED,
            "only GET and HEAD are allowed\n", "GET, HEAD");
    /* libmicrohttpd calls once for the head, then again to answer; a GET
     * with a body is answered without reading the body. */
    if (*state != &head_plain && *state != &head_nul) {
        *state = *state == &uri_nul ? &head_nul : &head_plain;
        rk__guard_head(m->server->guard, c);
        return MHD_YES;
    }
    *upload_size = 0;
    if (*state == &head_nul) {
        return reply_text(c, MHD_HTTP_NOT_FOUND,
            "not found: try /metrics or /stats.json\n", NULL);
    } else if (strcmp(url, "/metrics") == 0) {
        fmt = RK_METRICS_PROMETHEUS;
        type = "text/plain; version=0.0.4; charset=utf-8";
    } else if (strcmp(url, "/stats.json") == 0) {
        fmt = RK_METRICS_JSON;
        type = "application/json";
    } else {
        return reply_text(c, MHD_HTTP_NOT_FOUND,
            "not found: try /metrics or /stats.json\n", NULL);
    }
    if (rk_metrics_render(m, fmt, &body, &len) != RK_OK)
        return reply_text(
            c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n", NULL);
    /* libmicrohttpd frees body with free() once it is sent. */
    r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (r == NULL) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

int
rk_metrics_listen(rk_metrics *m, const char *addr)
{
    struct sockaddr_in sa;
    struct rk__metrics_server *s;
    const union MHD_DaemonInfo *info;
    int rc;

    if (m == NULL)
        return rk__fail(RK_EINVAL, "rk_metrics_listen: NULL collector");
    if (m->server)
        return rk__fail(RK_EALREADY, "metrics endpoint already on port %u",
            (unsigned)m->server->port);
    if ((rc = parse_addr(addr, &sa)) != RK_OK)
        return rc;
    if ((s = calloc(1, sizeof(*s))) == NULL)
        return rk__fail(RK_ENOMEM, "rk_metrics_listen");
    if ((rc = rk__guard_create(&s->guard, m->cfg.max_clients,
             2 * (size_t)m->cfg.max_clients, HEAD_DEADLINE_NS,
             REQUEST_DEADLINE_NS))
        != RK_OK) {
        free(s);
        return rc;
    }
    /* on_request reads m->server->guard from the daemon's thread: set it
     * before the daemon starts. */
    m->server = s;
    s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, on_accept,
        s->guard, on_request, m, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)m->cfg.max_request,
        MHD_OPTION_CONNECTION_LIMIT, 2u * (unsigned)m->cfg.max_clients,
        MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_NOTIFY_CONNECTION,
        on_connection, s->guard, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
        s->guard, MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL, MHD_OPTION_END);
    if (s->d == NULL) {
        m->server = NULL;
        rk__guard_destroy(s->guard);
        free(s);
        return rk__fail(RK_EBUSY,
            "metrics endpoint could not listen on %s (port in use, or no "
            "permission)",
            addr ? addr : RK_METRICS_DEFAULT_ADDR);
    }
    info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : ntohs(sa.sin_port);
    m->server_stop = rk__metrics_server_stop;
    return RK_OK;
}

uint16_t
rk_metrics_port(const rk_metrics *m)
{
    return m && m->server ? m->server->port : 0;
}

void
rk__metrics_server_stop(rk_metrics *m)
{
    if (m->server == NULL)
        return;
    /* The daemon first: it reports every connection closed to the guard
     * before the guard's thread stops. */
    MHD_stop_daemon(m->server->d);
    rk__guard_destroy(m->server->guard);
    free(m->server);
    m->server = NULL;
    m->server_stop = NULL;
}

#else /* !RK_HAVE_MHD */

bool
rk_metrics_http_available(void)
{
    return false;
}

int
rk_metrics_listen(rk_metrics *m, const char *addr)
{
    struct sockaddr_in sa;
    int rc;

    if (m == NULL)
        return rk__fail(RK_EINVAL, "rk_metrics_listen: NULL collector");
    if ((rc = parse_addr(addr, &sa)) != RK_OK)
        return rc;
    return rk__fail(RK_ENOTSUP,
        "this build has no metrics endpoint: install libmicrohttpd-dev "
        "(tools/deps.sh does) and rebuild; rk_metrics_render still works");
}

uint16_t
rk_metrics_port(const rk_metrics *m)
{
    (void)m;
    return 0;
}

void
rk__metrics_server_stop(rk_metrics *m)
{
    (void)m;
}

#endif
