/*
 * tools/ringkernel/top.c - `ringkernel top`: a live view of the kernels of
 * a running process, read from its metrics endpoint (/metrics, the
 * Prometheus text format), refreshed every --interval seconds. q or Ctrl-C
 * quits and restores the terminal.
 *
 * The client is a plain HTTP/1.0 GET over a socket (the endpoint is
 * ours and closes the connection after each answer); the parser reads
 * only the ringkernel_* series it shows.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"

#define MAX_BODY (16u << 20)

static volatile sig_atomic_t quit;

static void
on_signal(int sig)
{
    (void)sig;
    quit = 1;
}

/* GET path from host:port into a malloc'd body. 0 on success, else -1
 * with why filled. */
static int
http_get(const struct sockaddr_in *sa, const char *path, char **body,
    char *why, size_t wl)
{
    struct timeval tv = { 2, 0 };
    char req[256], *buf = NULL, *p;
    size_t len = 0, cap = 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0), rc = -1;
    ssize_t n;

    if (fd < 0) {
        snprintf(why, wl, "socket: %s", strerror(errno));
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) != 0) {
        snprintf(why, wl, "connect: %s", strerror(errno));
        goto out;
    }
    snprintf(req, sizeof(req),
        "GET %s HTTP/1.0\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        path);
    if (send(fd, req, strlen(req), MSG_NOSIGNAL) != (ssize_t)strlen(req)) {
        snprintf(why, wl, "send: %s", strerror(errno));
        goto out;
    }
    for (;;) {
        if (cap - len < 4096) {
            cap = cap ? 2 * cap : 65536;
            if (cap > MAX_BODY || (p = realloc(buf, cap + 1)) == NULL) {
                snprintf(why, wl, "answer too large");
                goto out;
            }
            buf = p;
        }
        n = recv(fd, buf + len, cap - len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(why, wl, "recv: %s", strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    if (buf == NULL) {
        snprintf(why, wl, "empty answer");
        goto out;
    }
    buf[len] = '\0';
    if (strncmp(buf, "HTTP/1.", 7) != 0 || strncmp(buf + 8, " 200", 4) != 0
        || (p = strstr(buf, "\r\n\r\n")) == NULL) {
        snprintf(why, wl, "unexpected answer: %.40s", buf);
        goto out;
    }
    memmove(buf, p + 4, len - (size_t)(p + 4 - buf) + 1);
    *body = buf;
    buf = NULL;
    rc = 0;
out:
    free(buf);
    close(fd);
    return rc;
}

static void
draw(FILE *out, const char *addr, const cli_top_frame *cur,
    const cli_top_frame *prev, bool live)
{
    double dt = prev ? (double)(cur->taken_ns - prev->taken_ns) / 1e9 : 0;

    if (live)
        fprintf(out, "\033[H\033[2J");
    fprintf(out, "ringkernel top - %s - %zu kernel(s)%s\n\n", addr, cur->n,
        live ? " - q or Ctrl-C quits" : "");
    fprintf(out, "%-16s %-11s %14s %12s %8s %8s %11s %11s %9s %8s\n", "KERNEL",
        "STATE", "PROCESSED", "PROC/S", "QUEUE", "HWM", "P50 US", "P99 US",
        "DROPS", "RESTARTS");
    for (size_t i = 0; i < cur->n; i++) {
        const cli_top_row *r = &cur->k[i];
        char rate[32] = "-";
        for (size_t j = 0; prev && dt > 0 && j < prev->n; j++)
            if (strcmp(prev->k[j].id, r->id) == 0)
                snprintf(rate, sizeof(rate), "%.0f",
                    (r->processed - prev->k[j].processed) / dt);
        fprintf(out,
            "%-16s %-11s %14.0f %12s %8.0f %8.0f %11.1f %11.1f %9.0f "
            "%8.0f\n",
            r->id, r->state, r->processed, rate, r->depth, r->hwm,
            r->p50 * 1e6, r->p99 * 1e6, r->dropped, r->restarts);
    }
    fflush(out);
}

static void
help(FILE *f)
{
    fprintf(f,
        "usage: ringkernel top [--addr HOST:PORT] [--interval SEC] "
        "[--once]\n\n"
        "A live view of the kernels of a running process, read from its\n"
        "metrics endpoint (a program calls rk_metrics_serve() or runs with\n"
        "RK_METRICS_ADDR set; `ringkernel demo --metrics ADDR` does too):\n"
        "state, processed and processed/s, queue depth and high-water "
        "mark,\np50/p99 queueing latency, drops and restarts. q or Ctrl-C "
        "quits.\n\n"
        "  --addr ADDR      the endpoint (default $RK_METRICS_ADDR, else "
        "%s)\n"
        "  --interval SEC   refresh period (default 1)\n"
        "  --once           print one table and exit (for scripts)\n\n"
        "exit status: 0 ok, 1 the endpoint could not be read, 2 bad "
        "command line.\n",
        RK_METRICS_DEFAULT_ADDR);
}

static bool
parse_addr(const char *addr, struct sockaddr_in *sa)
{
    char host[64];
    const char *colon = strrchr(addr, ':');
    char *end;
    unsigned long port;

    if (colon == NULL || (size_t)(colon - addr) >= sizeof(host))
        return false;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    port = strtoul(colon + 1, &end, 10);
    if (*end || colon[1] == '\0' || port == 0 || port > 65535)
        return false;
    if (!host[0] || strcmp(host, "localhost") == 0)
        snprintf(host, sizeof(host), "127.0.0.1");
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, host, &sa->sin_addr) == 1;
}

int
cli_top(int argc, char **argv)
{
    static const struct option opts[]
        = { { "addr", required_argument, 0, 'a' },
              { "interval", required_argument, 0, 'i' },
              { "once", no_argument, 0, 'o' }, { "help", no_argument, 0, 'h' },
              { 0, 0, 0, 0 } };
    cli_opts p = { "top", opts, help, 0, 0 };
    const char *addr = getenv(RK_METRICS_ENV);
    struct sockaddr_in sa;
    static cli_top_frame fr[2];
    double interval = 1.0;
    bool once = false, tty = isatty(0) && isatty(1), keys = true;
    struct termios saved, raw;
    char why[256], *body;
    int c, cur = 0, rc = CLI_OK, frames = 0, go;

    if (addr == NULL || !*addr)
        addr = RK_METRICS_DEFAULT_ADDR;
    while ((c = cli_opt_next(&p, argc, argv, &go)) != 0) {
        switch (c) {
        case 'a':
            addr = optarg;
            break;
        case 'i':
            if (!cli_parse_seconds(optarg, &interval))
                return cli_opt_bad(&p, NULL);
            break;
        case 'o':
            once = true;
            break;
        }
    }
    if (go != CLI_GO_ON)
        return go;
    if (!parse_addr(addr, &sa)) {
        fprintf(
            stderr, "ringkernel top: bad address (HOST:PORT) '%s'\n", addr);
        return CLI_USAGE;
    }
    if (once)
        tty = keys = false;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    if (tty && tcgetattr(0, &saved) == 0) {
        raw = saved;
        raw.c_lflag &= (tcflag_t) ~(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        tcsetattr(0, TCSANOW, &raw);
    } else {
        tty = false;
    }
    while (!quit) {
        if (http_get(&sa, "/metrics", &body, why, sizeof(why)) != 0) {
            if (quit)
                break; /* Ctrl-C during the request: a clean quit */
            if (frames == 0) {
                fprintf(stderr,
                    "ringkernel top: cannot read http://%s/metrics: %s\n"
                    "(is the process serving metrics? rk_metrics_serve(), "
                    "RK_METRICS_ADDR, or demo --metrics)\n",
                    addr, why);
                rc = CLI_FAILED;
                break;
            }
            printf("\r(endpoint unreachable: %s; retrying)", why);
            fflush(stdout);
        } else {
            fr[cur].taken_ns = rk_now_ns();
            cli_prom_parse(body, &fr[cur]);
            free(body);
            draw(stdout, addr, &fr[cur], frames ? &fr[cur ^ 1] : NULL, !once);
            cur ^= 1;
            frames++;
        }
        if (once)
            break;
        /* Wait for the next refresh, a key, or a signal (EINTR). Keys come
         * from the terminal in raw mode, or line by line from a pipe; at
         * the end of stdin (or /dev/null) only the clock and signals are
         * left. */
        struct pollfd pfd = { .fd = 0, .events = POLLIN };
        int pr = poll(&pfd, keys ? 1 : 0, (int)(interval * 1000));
        if (pr > 0) {
            char ch;
            ssize_t n = read(0, &ch, 1);
            if (n == 1 && (ch == 'q' || ch == 'Q'))
                break;
            if (n <= 0)
                keys = false;
        }
    }
    if (tty)
        tcsetattr(0, TCSANOW, &saved);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (!once && rc == CLI_OK)
        printf("\n");
    return rc;
}
