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
 * another path gets 404, another method 405 with an Allow header, and a
 * request head over max_request bytes is refused by libmicrohttpd itself
 * (414 or 431) because the connection's memory pool is that size.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "metrics/metrics_internal.h"

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
    uint16_t port;
};

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
    static int first_call;
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
    if (*state == NULL) {
        *state = &first_call;
        return MHD_YES;
    }
    *upload_size = 0;
    if (strcmp(url, "/metrics") == 0) {
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
    s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL,
        on_request, m, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)m->cfg.max_request,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)m->cfg.max_clients,
        MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    if (s->d == NULL) {
        free(s);
        return rk__fail(RK_EBUSY,
            "metrics endpoint could not listen on %s (port in use, or no "
            "permission)",
            addr ? addr : RK_METRICS_DEFAULT_ADDR);
    }
    info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : ntohs(sa.sin_port);
    m->server = s;
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
    MHD_stop_daemon(m->server->d);
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
