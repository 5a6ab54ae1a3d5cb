/*
 * src/metrics/conn_guard.h - keeps slow clients from holding the metrics
 * endpoint's connection slots.
 *
 * libmicrohttpd's idle timeout closes a connection that sends nothing,
 * but a client that sends one byte a second is never idle, so a handful
 * of them could hold every slot for as long as they liked and no scrape
 * would be answered. The guard bounds the time to a complete request
 * instead:
 *
 *  - a connection must deliver a complete request head within head_ns
 *    of being accepted (or of its previous request's end, on a
 *    kept-alive connection), and a request must be answered and sent
 *    within request_ns of its head (a client that reads its answer a byte
 *    at a time); the guard's thread shuts down the socket of one that has
 *    not, and libmicrohttpd then closes it;
 *  - at the soft limit (max_clients connections that are not already
 *    being closed), a new connection is admitted by shutting down the
 *    connection that has waited longest for its request head; when every
 *    connection is in a request, the newcomer is refused.
 *
 * The server reports each connection's life to the guard: started (with
 * its socket), head (a complete request head arrived), idle (the request
 * ended; the next head is awaited), closed. The guard only ever calls
 * shutdown(2) on a socket, never close(2), and only while the connection
 * is in its table: "closed" must be reported before the server closes the
 * socket (libmicrohttpd's MHD_CONNECTION_NOTIFY_CLOSED is), and both take
 * the guard's lock, so a socket number is never shut down after reuse.
 *
 * Threads: every call may come from any thread; one mutex guards the
 * table, and the guard's own thread sleeps until the earliest deadline
 * (or indefinitely while no connection waits).
 */
#ifndef RK_SRC_METRICS_CONN_GUARD_H
#define RK_SRC_METRICS_CONN_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rk__conn_guard rk__conn_guard;

/* A guard for at most cap connections at once (the server's own hard
 * limit), soft of them admitted before one is shut down for a newcomer.
 * RK_OK, RK_ENOMEM, or RK_EINTERNAL when its thread cannot start. */
int rk__guard_create(rk__conn_guard **out, size_t soft, size_t cap,
    uint64_t head_ns, uint64_t request_ns);
/* Stops the thread and frees the guard (after the server has stopped). */
void rk__guard_destroy(rk__conn_guard *g);

/* Whether a new connection may be accepted now (see above). */
bool rk__guard_admit(rk__conn_guard *g);
/* The connection conn (any unique pointer) was accepted on socket fd and
 * awaits its request head. False if the table is full (then the server
 * should close it). */
bool rk__guard_started(rk__conn_guard *g, const void *conn, int fd);
void rk__guard_head(rk__conn_guard *g, const void *conn);
void rk__guard_idle(rk__conn_guard *g, const void *conn);
void rk__guard_closed(rk__conn_guard *g, const void *conn);

#endif /* RK_SRC_METRICS_CONN_GUARD_H */
