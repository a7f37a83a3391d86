// bootstrap_tcp.c: zero_comm_share_blob over TCP, for launches without MPI where the ranks
// share no file system (ZERO_BOOTSTRAP_TCP=host:port). Rank 0 listens on port; every other
// rank connects to host:port, says who it is, and receives rank 0's bytes. Every wait has
// a deadline (ZERO_BOOTSTRAP_TIMEOUT seconds, default 600), so a missing rank ends in a
// message instead of a hang. Plain POSIX: part of the host build.
#include "../comm.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BOOT_MAGIC 0x5a45524f424f4f54ull   // "ZEROBOOT": not a stray connection
#define HELLO_S 10.0                        // a connected peer must introduce itself this fast

// Sent by each rank on connecting, and echoed by rank 0 (with its own rank) before the bytes.
typedef struct {
    uint64_t magic;
    uint32_t rank, world;
    uint64_t bytes;
} Hello;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

double zero_bootstrap_timeout(void) {
    const char *s = getenv("ZERO_BOOTSTRAP_TIMEOUT");
    double t = s && *s ? atof(s) : 600.0;
    return t > 0 ? t : 600.0;
}

// Waits until fd is ready for events or the deadline passes: 1 ready, 0 timed out, -1 error.
static int wait_fd(int fd, short events, double deadline) {
    for (;;) {
        double left = deadline - now_s();
        if (left <= 0) return 0;
        struct pollfd p = {fd, events, 0};
        int r = poll(&p, 1, left > 1000.0 ? 1000000 : (int)(left * 1000.0) + 1);
        if (r > 0) return 1;   // errors and hang-ups show up in the read or write that follows
        if (r < 0 && errno != EINTR) return -1;
    }
}

// Moves exactly n bytes (a non-blocking socket); 0, or -1 with errno set.
static int io_full(int fd, void *buf, size_t n, int writing, double deadline) {
    char *p = buf;
    for (size_t done = 0; done < n;) {
        int w = wait_fd(fd, writing ? POLLOUT : POLLIN, deadline);
        if (w <= 0) {
            if (w == 0) errno = ETIMEDOUT;
            return -1;
        }
        ssize_t k = writing ? send(fd, p + done, n - done, MSG_NOSIGNAL) : recv(fd, p + done, n - done, 0);
        if (k < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
            return -1;
        }
        if (k == 0) {   // the other side closed before sending everything
            errno = ECONNRESET;
            return -1;
        }
        done += (size_t)k;
    }
    return 0;
}

// Splits "host:port" (host may be "[v6 address]"); 0 or -1.
static int parse_spec(const char *spec, char *host, size_t hcap, char *port, size_t pcap) {
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec || !colon[1] || strlen(colon + 1) >= pcap) return -1;
    const char *h = spec;
    size_t hl = (size_t)(colon - spec);
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') { h++; hl -= 2; }
    if (hl == 0 || hl >= hcap) return -1;
    memcpy(host, h, hl);
    host[hl] = 0;
    snprintf(port, pcap, "%s", colon + 1);
    for (const char *q = port; *q; q++)
        if (*q < '0' || *q > '9') return -1;
    return 0;
}

static int listen_on(const char *port, char *err, size_t errlen) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;   // every local address: host names rank 0 for the others only
    int rc = getaddrinfo(NULL, port, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "getaddrinfo(port %s): %s", port, gai_strerror(rc));
        return -1;
    }
    int fd = -1;
    snprintf(err, errlen, "no address to listen on");
    // IPv6 first when offered: a dual-stack socket also takes IPv4 peers
    for (int pass = 0; pass < 2 && fd < 0; pass++)
        for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
            if ((pass == 0) != (a->ai_family == AF_INET6)) continue;
            fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
            if (fd < 0) continue;
            int one = 1, zero = 0;
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);   // a quick rerun on the same port
            if (a->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
            if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 128) != 0) {
                snprintf(err, errlen, "bind/listen on port %s: %s", port, strerror(errno));
                close(fd);
                fd = -1;
            }
        }
    freeaddrinfo(res);
    return fd;
}

static int serve(ZeroComm *c, const char *spec, const char *port, const void *blob, size_t bytes,
                 const char *what, double timeout) {
    char err[256];
    int lfd = listen_on(port, err, sizeof err);
    if (lfd < 0) {
        fprintf(stderr, "zero: rank 0: cannot share %s over ZERO_BOOTSTRAP_TCP=%s: %s\n", what, spec, err);
        return -1;
    }
    unsigned char *seen = calloc((size_t)c->world, 1);
    if (!seen) {
        close(lfd);
        fprintf(stderr, "zero: rank 0: out of host memory in the TCP bootstrap\n");
        return -1;
    }
    double deadline = now_s() + timeout;
    int served = 0, rc = 0;
    while (served < c->world - 1) {
        int w = wait_fd(lfd, POLLIN, deadline);
        if (w <= 0) {
            char missing[256] = "";
            size_t len = 0;
            for (int r = 1; r < c->world && len < sizeof missing - 16; r++)
                if (!seen[r]) len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%d", len ? ", " : "", r);
            fprintf(stderr, "zero: rank 0: %s: only %d of %d ranks connected to port %s within %.0f s (missing: %s)%s%s\n",
                    what, served, c->world - 1, port, timeout, missing, w < 0 ? ": " : "", w < 0 ? strerror(errno) : "");
            rc = -1;
            break;
        }
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) continue;   // the peer gave up between poll and accept, or EINTR
        Hello h, me = {BOOT_MAGIC, 0, (uint32_t)c->world, (uint64_t)bytes};
        double hd = now_s() + HELLO_S < deadline ? now_s() + HELLO_S : deadline;
        if (io_full(fd, &h, sizeof h, 0, hd) != 0 || h.magic != BOOT_MAGIC) {
            fprintf(stderr, "zero: rank 0: ignoring a connection to the bootstrap port %s that is not a rank of this job\n", port);
            close(fd);
            continue;
        }
        // Answer even a mismatched rank, so it can say what is wrong; send the bytes only to a good one.
        int good = h.world == (uint32_t)c->world && h.bytes == bytes && h.rank > 0 && h.rank < (uint32_t)c->world &&
                   !seen[h.rank];
        if (io_full(fd, &me, sizeof me, 1, hd) == 0 && good && io_full(fd, (void *)blob, bytes, 1, hd) == 0) {
            seen[h.rank] = 1;
            served++;
        } else if (!good) {
            fprintf(stderr, "zero: rank 0: bootstrap connection from rank %u of WORLD_SIZE=%u (%llu bytes) refused: "
                    "this job has WORLD_SIZE=%d, %zu bytes%s\n", h.rank, h.world, (unsigned long long)h.bytes, c->world,
                    bytes, h.rank < (uint32_t)c->world && h.rank > 0 && seen[h.rank] ? ", and that rank already connected" : "");
        }
        close(fd);
    }
    free(seen);
    close(lfd);
    return rc;
}

static int fetch(ZeroComm *c, const char *spec, const char *host, const char *port, void *blob, size_t bytes,
                 const char *what, double timeout) {
    double deadline = now_s() + timeout;
    char last[256] = "no attempt";
    while (now_s() < deadline) {
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        int g = getaddrinfo(host, port, &hints, &res);
        if (g != 0) {
            snprintf(last, sizeof last, "cannot resolve %.128s: %s", host, gai_strerror(g));
            sleep_s(0.2);
            continue;
        }
        int fd = -1;
        for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
            fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
            if (fd < 0) continue;
            int ok = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
            if (!ok && errno == EINPROGRESS) {
                double cd = now_s() + 2.0 < deadline ? now_s() + 2.0 : deadline;
                int soerr = 0;
                socklen_t sl = sizeof soerr;
                if (wait_fd(fd, POLLOUT, cd) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0) {
                    ok = soerr == 0;
                    if (!ok) errno = soerr;
                } else {
                    errno = ETIMEDOUT;
                }
            }
            if (!ok) {
                snprintf(last, sizeof last, "connect: %s", strerror(errno));
                close(fd);
                fd = -1;
            }
        }
        freeaddrinfo(res);
        if (fd < 0) {   // rank 0 is not listening yet: try again
            sleep_s(0.1);
            continue;
        }
        Hello me = {BOOT_MAGIC, (uint32_t)c->rank, (uint32_t)c->world, (uint64_t)bytes}, h;
        if (io_full(fd, &me, sizeof me, 1, deadline) != 0 || io_full(fd, &h, sizeof h, 0, deadline) != 0) {
            snprintf(last, sizeof last, "connected, then %s", strerror(errno));
            close(fd);
            sleep_s(0.1);
            continue;
        }
        if (h.magic != BOOT_MAGIC || h.world != (uint32_t)c->world || h.bytes != bytes) {
            close(fd);
            fprintf(stderr, "zero: rank %d: the process at ZERO_BOOTSTRAP_TCP=%s is not rank 0 of this job "
                    "(it has WORLD_SIZE=%u and shares %llu bytes; this rank has WORLD_SIZE=%d and wants %zu for %s)\n",
                    c->rank, spec, h.world, (unsigned long long)h.bytes, c->world, bytes, what);
            return -1;
        }
        int rc = io_full(fd, blob, bytes, 0, deadline);
        int e = errno;
        close(fd);
        if (rc == 0) return 0;
        fprintf(stderr, "zero: rank %d: rank 0 at ZERO_BOOTSTRAP_TCP=%s refused this rank or broke off sending %s: %s "
                "(see rank 0's message)\n", c->rank, spec, what, strerror(e));
        return -1;
    }
    fprintf(stderr, "zero: rank %d: could not get %s from rank 0 at ZERO_BOOTSTRAP_TCP=%s within %.0f s (last: %s); "
            "is rank 0 running, and is host:port its address?\n", c->rank, what, spec, timeout, last);
    return -1;
}

int zero_share_blob_tcp(ZeroComm *c, const char *spec, void *blob, size_t bytes, const char *what) {
    if (c->world == 1) return 0;
    char host[256], port[16];
    if (parse_spec(spec, host, sizeof host, port, sizeof port) != 0) {
        fprintf(stderr, "zero: rank %d: ZERO_BOOTSTRAP_TCP=%s is not host:port\n", c->rank, spec);
        return -1;
    }
    double timeout = zero_bootstrap_timeout();
    return c->rank == 0 ? serve(c, spec, port, blob, bytes, what, timeout)
                        : fetch(c, spec, host, port, blob, bytes, what, timeout);
}
