/*
 * src/cluster/mpi_wake.c - how an idle progress thread waits and who
 * wakes it (docs/cluster.md "Batching, idle, threads"). Open MPI gives
 * the thread nothing to block on, so it parks in ppoll on two
 * descriptors of its own: an eventfd that local producers write while it
 * sleeps (rk__cl_wake_progress), and a UDP socket that a peer sends one
 * byte to with its first batch after a quiet spell (rk__cl_sent_to). With
 * both, an idle thread may park for idle_park_ns without a message
 * waiting for the end of its nap; a rank that some peer cannot poke (no
 * socket somewhere, or peers on other hosts and no non-loopback IPv4
 * address to give them) keeps naps of idle_sleep_max_ns.
 */
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cluster/cluster_int.h"
#include "cluster/mpi_wake.h"

/* What each rank tells the others at the join. */
typedef struct poke_rec {
    uint64_t host; /* hash of the host name: same host, loopback */
    int64_t poll_ns;
    uint32_t ip;   /* network order; 0 or loopback: none to give */
    uint16_t port; /* network order; 0: no socket */
    uint16_t pad;
} poke_rec;

static uint64_t
host_hash(void)
{
    char name[256] = { 0 };
    uint64_t h = 1469598103934665603ull; /* FNV-1a */

    if (gethostname(name, sizeof(name) - 1) != 0)
        return 0;
    for (const char *c = name; *c; c++)
        h = (h ^ (uint8_t)*c) * 1099511628211ull;
    return h;
}

/* The first IPv4 address of an interface that is up and not loopback
 * (network order), or 0. */
static uint32_t
own_ip(void)
{
    struct ifaddrs *all, *a;
    uint32_t ip = 0;

    if (getifaddrs(&all) != 0)
        return 0;
    for (a = all; a != NULL && ip == 0; a = a->ifa_next)
        if (a->ifa_addr != NULL && a->ifa_addr->sa_family == AF_INET
            && (a->ifa_flags & IFF_UP) && !(a->ifa_flags & IFF_LOOPBACK))
            ip = ((struct sockaddr_in *)(void *)a->ifa_addr)->sin_addr.s_addr;
    freeifaddrs(all);
    return ip;
}

static bool
is_loopback(uint32_t ip)
{
    return ip == 0 || (ntohl(ip) >> 24) == 127;
}

/* Rank r can be poked by everyone: every rank has a socket, and each
 * other rank is on r's host or r has an address to give. */
static bool
reachable(const poke_rec *rec, int size, int r)
{
    for (int q = 0; q < size; q++) {
        if (rec[q].port == 0)
            return false;
        if (q != r && rec[q].host != rec[r].host && is_loopback(rec[r].ip))
            return false;
    }
    return true;
}

/* Makes the eventfd (an error without it: nothing could wake the
 * progress thread) and the poke socket (without it, naps stay short),
 * and exchanges the sockets' addresses: collective, every rank calls it
 * once peers exist. */
int
rk__cl_wake_setup(rk_cluster *cl)
{
    poke_rec me = { 0 }, *rec;
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    int rc = RK_OK, mrc;

    cl->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (cl->wake_fd < 0)
        rc = rk__fail(RK_EINTERNAL, "cluster: eventfd: %s", strerror(errno));
    cl->poke_fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (cl->poke_fd >= 0
        && (bind(cl->poke_fd, (struct sockaddr *)&a, sizeof(a)) != 0
            || getsockname(cl->poke_fd, (struct sockaddr *)&a, &alen) != 0)) {
        close(cl->poke_fd);
        cl->poke_fd = -1;
    }
    me.host = host_hash();
    me.poll_ns = cl->cfg.poll_ns;
    me.ip = own_ip();
    me.port = cl->poke_fd >= 0 ? a.sin_port : 0;
    rec = calloc((size_t)cl->size, sizeof(*rec));
    {
        /* Every rank gathers or none does. */
        int bad = rec == NULL, any = 1;
        MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, cl->comm);
        if (any) {
            free(rec);
            return rc != RK_OK ? rc
                               : rk__fail(RK_ENOMEM, "cluster: wake-up");
        }
    }
    mrc = MPI_Allgather(
        &me, sizeof(me), MPI_BYTE, rec, sizeof(me), MPI_BYTE, cl->comm);
    if (mrc != MPI_SUCCESS) {
        free(rec);
        return rc != RK_OK ? rc : rk__cl_mpi_fail(mrc, "MPI_Allgather");
    }
    for (int r = 0; r < cl->size; r++) {
        struct sockaddr_in *to = &cl->peers[r].poke_to;

        memset(to, 0, sizeof(*to));
        if (r == cl->rank || !reachable(rec, cl->size, r))
            continue; /* port 0: not poked */
        to->sin_family = AF_INET;
        to->sin_port = rec[r].port;
        to->sin_addr.s_addr
            = rec[r].host == me.host ? htonl(INADDR_LOOPBACK) : rec[r].ip;
    }
    cl->pokeable = reachable(rec, cl->size, cl->rank);
    /* The shortest poll window of any rank decides when a batch to it
     * needs a poke (rk__cl_sent_to). */
    cl->poke_gap_ns = (uint64_t)cl->cfg.poll_ns / 2;
    for (int r = 0; r < cl->size; r++)
        if ((uint64_t)rec[r].poll_ns / 2 < cl->poke_gap_ns)
            cl->poke_gap_ns = (uint64_t)rec[r].poll_ns / 2;
    free(rec);
    return rc;
}

void
rk__cl_wake_close(rk_cluster *cl)
{
    if (cl->wake_fd >= 0)
        close(cl->wake_fd);
    if (cl->poke_fd >= 0)
        close(cl->poke_fd);
    cl->wake_fd = cl->poke_fd = -1;
}

/* A local producer saw the progress thread asleep. */
void
rk__cl_wake_fd(rk_cluster *cl)
{
    uint64_t one = 1;

    if (cl->wake_fd >= 0 && write(cl->wake_fd, &one, sizeof(one)) < 0) {
        /* EAGAIN: the count is full, the thread wakes anyway */
    }
}

/* Wakes rank's progress thread: one datagram, lost or not (a lost one
 * costs the wait until its nap ends). Any thread. */
void
rk__cl_poke(rk_cluster *cl, int rank)
{
    const struct sockaddr_in *to = &cl->peers[rank].poke_to;
    uint8_t b = 1;

    if (to->sin_port == 0 || cl->poke_fd < 0)
        return;
    (void)sendto(cl->poke_fd, &b, 1, MSG_DONTWAIT, (const struct sockaddr *)to,
        sizeof(*to));
}

/* The progress thread waits up to ns for a producer or a peer. True if
 * one woke it: the thread then polls again for poll_ns, since a poke
 * can come before its batch (over TCP, the datagram may overtake it). */
bool
rk__cl_idle_wait(rk_cluster *cl, int64_t ns)
{
    bool woken = false;

    /* seq_cst store of sleeping and exchange of work: pair with
     * rk__cl_wake_progress's store of work and load of sleeping (a
     * Dekker handshake: either we see its work or it sees us asleep and
     * writes the eventfd, whose count ppoll then sees). */
    atomic_store(&cl->sleeping, 1);
    if (!atomic_exchange(&cl->work, 0) && !atomic_load(&cl->stop)) {
        struct pollfd fds[2];
        struct timespec ts = { (time_t)(ns / 1000000000),
            (long)(ns % 1000000000) };
        nfds_t n = 0;
        uint64_t cnt;
        uint8_t junk[16];

        if (cl->wake_fd >= 0)
            fds[n++] = (struct pollfd) { cl->wake_fd, POLLIN, 0 };
        if (cl->poke_fd >= 0)
            fds[n++] = (struct pollfd) { cl->poke_fd, POLLIN, 0 };
        PSTAT(cl, idle_sleeps, 1);
        if (ppoll(fds, n, &ts, NULL) > 0) {
            woken = true;
            if (cl->wake_fd >= 0)
                (void)!read(cl->wake_fd, &cnt, sizeof(cnt));
            while (cl->poke_fd >= 0
                && recv(cl->poke_fd, junk, sizeof(junk), MSG_DONTWAIT) > 0) {
            }
        }
    }
    atomic_store(&cl->sleeping, 0);
    return woken;
}
