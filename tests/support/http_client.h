/*
 * tests/support/http_client.h - a plain-socket HTTP/1.1 client for the
 * metrics endpoint tests: one request per connection, read until the
 * server closes. Header-only (static inline); include it after cmocka.h.
 */
#ifndef RK_TEST_HTTP_CLIENT_H
#define RK_TEST_HTTP_CLIENT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

typedef struct http_reply {
    int status;
    char *head; /* status line and headers */
    char *body;
    size_t body_len;
} http_reply;

/* Sends raw request bytes to 127.0.0.1:port and reads until the server
 * closes. Returns 0 and fills *r, or -1. */
static inline int
http_raw(uint16_t port, const char *req, size_t req_len, http_reply *r)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
    struct timeval tv = { 10, 0 };
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap + 1), *sep;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ssize_t n;

    memset(r, 0, sizeof(*r));
    assert_non_null(buf);
    assert_true(fd >= 0);
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        free(buf);
        return -1;
    }
    /* The server may answer and close before a long request is all sent
     * (the oversize case), so a short send is not an error here. */
    for (size_t off = 0; off < req_len;) {
        n = send(fd, req + off, req_len - off, MSG_NOSIGNAL);
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    while ((n = recv(fd, buf + len, cap - len, 0)) > 0) {
        len += (size_t)n;
        if (len == cap) {
            cap *= 2;
            assert_non_null(buf = realloc(buf, cap + 1));
        }
    }
    close(fd);
    buf[len] = '\0';
    if (len < 12 || strncmp(buf, "HTTP/1.", 7) != 0) {
        free(buf);
        return -1;
    }
    r->status = atoi(buf + 9);
    sep = strstr(buf, "\r\n\r\n");
    if (sep) {
        *sep = '\0';
        r->body = sep + 4;
        r->body_len = len - (size_t)(sep + 4 - buf);
    } else {
        r->body = buf + len;
    }
    r->head = buf;
    return 0;
}

static inline int
http_req(uint16_t port, const char *method, const char *path, http_reply *r)
{
    char req[512];
    int n = snprintf(req, sizeof(req),
        "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        method, path);

    return http_raw(port, req, (size_t)n, r);
}

static inline void
http_free(http_reply *r)
{
    free(r->head);
    memset(r, 0, sizeof(*r));
}

#endif /* RK_TEST_HTTP_CLIENT_H */
