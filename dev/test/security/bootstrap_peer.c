// bootstrap_peer.c: the parties of dev/test/security/test_bootstrap_security.sh, honest and not.
//
//   bootstrap_peer share SEED
//       a rank started without MPI (RANK / WORLD_SIZE / ZERO_BOOTSTRAP_* from the environment):
//       zero_comm_init, then zero_comm_share_blob of 128 bytes. Rank 0 offers pattern(SEED);
//       every other rank must end up with exactly that. Prints one line and exits
//           0  "rank R: blob ok"                    (rank 0: shared it)
//           1  "rank R: refused"                    (zero_comm_share_blob returned -1)
//           2  "rank R: WRONG blob accepted (...)"  (success, but not rank 0's bytes)
//       A rank 0 with another secret and another SEED is a rogue listener; a rank R with
//       another secret is an impersonator.
//   bootstrap_peer silent HOST PORT SECONDS
//       connects (retrying until something listens), sends nothing, holds the connection
//       SECONDS and says whether and when the other side closed it.
//   bootstrap_peer garbage HOST PORT SECONDS
//       the same after sending the start of an HTTP request (shorter than any greeting).
//   bootstrap_peer junk HOST PORT
//       connects, sends 256 bytes of junk, then counts the bytes that come back until closed.
//   bootstrap_peer probe HOST PORT
//       one connection attempt: "connected" (exit 0) or "refused: REASON" (exit 1).
//   bootstrap_peer forger PORT SEED SECONDS
//       a rogue rank 0 that speaks the wire protocol of zero/comm/bootstrap_tcp.c but has no
//       secret: it listens on 127.0.0.1:PORT, answers each HELLO with a nonce, takes any
//       PROOF and sends back status 0, a made-up proof and pattern(SEED) as the blob.
//   bootstrap_peer relay LPORT HOST PORT SEED SECONDS
//       an on-path relay: listens on 127.0.0.1:LPORT and forwards one connection to HOST:PORT
//       until it closes (or SECONDS pass), then says whether pattern(SEED) crossed it in the
//       clear (exit 2) or not (exit 0).
//
// Every line starts with the mode, so the test can tell the parties apart in its logs.
#include "zero/comm.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BLOB 128

static void pattern(int seed, unsigned char *b) {
    for (int i = 0; i < BLOB; i++) b[i] = (unsigned char)(seed * 131 + i * 37 + 11);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void nap(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static int run_share(int seed) {
    ZeroComm *c = zero_comm_init(NULL, NULL);
    if (!c) return 1;
    unsigned char blob[BLOB], want[BLOB];
    pattern(seed, want);
    if (c->rank == 0) memcpy(blob, want, BLOB);
    else memset(blob, 0, BLOB);
    int rc = zero_comm_share_blob(c, blob, BLOB, "the test blob");
    int r = c->rank, out = 0;
    if (rc != 0) {
        printf("share: rank %d: refused\n", r);
        out = 1;
    } else if (memcmp(blob, want, BLOB) != 0) {
        int from = -1;
        for (int s = 0; s < 256 && from < 0; s++) {
            unsigned char p[BLOB];
            pattern(s, p);
            if (!memcmp(p, blob, BLOB)) from = s;
        }
        printf("share: rank %d: WRONG blob accepted (the pattern of seed %d, wanted seed %d)\n", r, from, seed);
        out = 2;
    } else {
        printf("share: rank %d: blob ok\n", r);
    }
    zero_comm_free(c);
    return out;
}

// One connection attempt to host:port: the socket, or -1 with the reason in err.
static int dial(const char *host, const char *port, char *err, size_t errlen) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int g = getaddrinfo(host, port, &hints, &res);
    if (g != 0) {
        snprintf(err, errlen, "%s", gai_strerror(g));
        return -1;
    }
    int fd = -1;
    snprintf(err, errlen, "no address");
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            snprintf(err, errlen, "%s", strerror(errno));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    return fd;
}

static int dial_retry(const char *mode, const char *host, const char *port) {
    char err[128];
    for (double end = now_s() + 30; now_s() < end; nap(0.05)) {
        int fd = dial(host, port, err, sizeof err);
        if (fd >= 0) {
            printf("%s: connected to %s:%s\n", mode, host, port);
            fflush(stdout);
            return fd;
        }
    }
    printf("%s: could not connect to %s:%s within 30 s: %s\n", mode, host, port, err);
    return -1;
}

// Holds fd open for seconds; says whether the other side closed it first (and when).
static int hold(const char *mode, int fd, double seconds) {
    double t0 = now_s(), end = t0 + seconds;
    size_t back = 0;
    while (now_s() < end) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0) continue;
        char buf[512];
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k > 0) { back += (size_t)k; continue; }
        printf("%s: closed by the other side after %.1f s, %zu bytes received\n", mode, now_s() - t0, back);
        close(fd);
        return 0;
    }
    printf("%s: still open after %.1f s, %zu bytes received\n", mode, seconds, back);
    close(fd);
    return 0;
}

static int run_stray(const char *mode, const char *host, const char *port, double seconds) {
    int fd = dial_retry(mode, host, port);
    if (fd < 0) return 1;
    if (!strcmp(mode, "garbage")) {
        static const char line[] = "GET / HTTP/1.0\r\n";
        if (send(fd, line, sizeof line - 1, MSG_NOSIGNAL) < 0) printf("%s: send: %s\n", mode, strerror(errno));
    } else if (!strcmp(mode, "junk")) {
        char junk[256];
        for (int i = 0; i < 256; i++) junk[i] = (char)(i * 7 + 3);
        if (send(fd, junk, sizeof junk, MSG_NOSIGNAL) < 0) printf("%s: send: %s\n", mode, strerror(errno));
    }
    return hold(mode, fd, seconds);
}

static int run_probe(const char *host, const char *port) {
    char err[128];
    int fd = dial(host, port, err, sizeof err);
    if (fd < 0) {
        printf("probe: %s:%s refused: %s\n", host, port, err);
        return 1;
    }
    printf("probe: %s:%s connected\n", host, port);
    close(fd);
    return 0;
}

// Copies what is readable on from to to (and the log); 0, or -1 when from closed.
static int pump(int from, int to, unsigned char *log, size_t *nlog, size_t cap) {
    unsigned char buf[4096];
    ssize_t k = recv(from, buf, sizeof buf, 0);
    if (k <= 0) return -1;
    size_t n = (size_t)k < cap - *nlog ? (size_t)k : cap - *nlog;
    memcpy(log + *nlog, buf, n);
    *nlog += n;
    return send(to, buf, (size_t)k, MSG_NOSIGNAL) == k ? 0 : -1;
}

// Listens on 127.0.0.1:port; the socket, or -1 after saying why.
static int listen_local(const char *mode, const char *port) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo("127.0.0.1", port, &hints, &res) != 0) return -1;
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 16) != 0) {
        printf("%s: cannot listen on 127.0.0.1:%s: %s\n", mode, port, strerror(errno));
        close(fd);
        fd = -1;
    } else {
        printf("%s: listening on 127.0.0.1:%s\n", mode, port);
    }
    freeaddrinfo(res);
    return fd;
}

static int recv_all(int fd, unsigned char *p, size_t n) {
    for (size_t got = 0; got < n;) {
        ssize_t k = recv(fd, p + got, n - got, 0);
        if (k <= 0) return -1;
        got += (size_t)k;
    }
    return 0;
}

// The wire format of bootstrap_tcp.c (version 2), as a stranger would learn it from the source.
#define W_HELLO 56
#define W_CHAL 40
#define W_PROOF 32

static int run_forger(const char *port, int seed, double seconds) {
    int lfd = listen_local("forger", port);
    if (lfd < 0) return 1;
    for (double end = now_s() + seconds; now_s() < end;) {
        struct pollfd p = {lfd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0) continue;
        int fd = accept(lfd, NULL, NULL);
        unsigned char hello[W_HELLO], chal[W_CHAL], proof[W_PROOF], res[16 + 32 + BLOB + 16];
        memcpy(chal, "ZEROBOT2", 8);
        for (int i = 8; i < W_CHAL; i++) chal[i] = (unsigned char)rand();
        if (recv_all(fd, hello, W_HELLO) != 0 || send(fd, chal, W_CHAL, MSG_NOSIGNAL) != W_CHAL ||
            recv_all(fd, proof, W_PROOF) != 0) {
            printf("forger: a peer broke off the handshake\n");
            close(fd);
            continue;
        }
        memset(res, 0, 4);                  // status: ok
        memcpy(res + 4, hello + 12, 4);     // its world
        memcpy(res + 8, hello + 16, 8);     // its byte count
        for (int i = 16; i < 48; i++) res[i] = (unsigned char)rand();   // no secret: a made-up proof
        pattern(seed, res + 48);
        for (int i = 48 + BLOB; i < (int)sizeof res; i++) res[i] = (unsigned char)rand();
        ssize_t k = send(fd, res, sizeof res, MSG_NOSIGNAL);
        printf("forger: took a proof from a rank and sent it a forged blob (%zd bytes)\n", k);
        close(fd);
    }
    close(lfd);
    return 0;
}

static int run_relay(const char *lport, const char *host, const char *port, int seed, double seconds) {
    int lfd = listen_local("relay", lport);
    if (lfd < 0) return 1;
    printf("relay: forwarding to %s:%s\n", host, port);
    size_t cap = 1 << 20, nlog = 0;
    unsigned char *log = malloc(cap);
    int a = -1, b = -1, done = 0;
    for (double end = now_s() + seconds; !done && now_s() < end;) {
        struct pollfd p[3] = {{lfd, POLLIN, 0}, {a, POLLIN, 0}, {b, POLLIN, 0}};
        if (poll(p, 3, 100) <= 0) continue;
        if ((p[1].revents || p[2].revents) &&
            ((p[1].revents && pump(a, b, log, &nlog, cap) != 0) || (p[2].revents && pump(b, a, log, &nlog, cap) != 0))) {
            close(a);
            close(b);
            a = b = -1;
            done = 1;
        }
        if (p[0].revents && a < 0) {
            char err[128];
            a = accept(lfd, NULL, NULL);
            b = dial(host, port, err, sizeof err);
            if (b < 0) {
                printf("relay: forwarding failed: %s\n", err);
                close(a);
                a = -1;
            }
        }
    }
    unsigned char want[BLOB];
    pattern(seed, want);
    int clear = nlog >= BLOB && memmem(log, nlog, want, BLOB) != NULL;
    printf("relay: %zu bytes crossed; rank 0's blob %s\n", nlog, clear ? "crossed IN THE CLEAR" : "was not among them");
    free(log);
    close(lfd);
    return clear ? 2 : 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(mode, "share") && argc == 3) return run_share(atoi(argv[2]));
    if ((!strcmp(mode, "silent") || !strcmp(mode, "garbage")) && argc == 5)
        return run_stray(mode, argv[2], argv[3], atof(argv[4]));
    if (!strcmp(mode, "junk") && argc == 4) return run_stray(mode, argv[2], argv[3], 30.0);
    if (!strcmp(mode, "probe") && argc == 4) return run_probe(argv[2], argv[3]);
    if (!strcmp(mode, "forger") && argc == 5) return run_forger(argv[2], atoi(argv[3]), atof(argv[4]));
    if (!strcmp(mode, "relay") && argc == 7) return run_relay(argv[2], argv[3], argv[4], atoi(argv[5]), atof(argv[6]));
    fprintf(stderr, "usage: see the top of dev/test/security/bootstrap_peer.c\n");
    return 64;
}
