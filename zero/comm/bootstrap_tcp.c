// bootstrap_tcp.c: zero_comm_share_blob for launches without MPI: over TCP
// (ZERO_BOOTSTRAP_TCP=host:port, ranks that share no file system) or through a shared file
// (ZERO_BOOTSTRAP_FILE=path). The blob is the NCCL id: whoever holds it can join the job's
// collectives, so both ways are bound to the job by a per-job secret that the launcher
// gives every rank (ZERO_BOOTSTRAP_SECRET, or ZERO_BOOTSTRAP_SECRET_FILE naming a file of
// mode 0600; scripts/launch_ranks.sh draws one per job). Without one, neither starts.
//
// Keys: K = HMAC-SHA256(secret, "zero-boot-v2 job key"); MAC(L, x) = HMAC-SHA256(K, L || x).
//
// TCP. Rank 0 listens on host:port only (not on every interface) and serves connections
// side by side (poll), each with its own HANDSHAKE_S deadline, so silent or slow peers
// cannot hold it. Every other rank connects to host:port:
//   rank r -> 0  HELLO      "ZEROBOT2" | r | world | bytes | nonce_r (32 random bytes)
//   0 -> rank r  CHALLENGE  "ZEROBOT2" | nonce_0 (32 random bytes)
//   rank r -> 0  PROOF      MAC("rank proof", HELLO | CHALLENGE)
//   0 -> rank r  RESULT     status | world | bytes | MAC("rank 0 proof", HELLO | CHALLENGE | status..bytes)
//                           | the blob sealed with AES-256-GCM (only when status is 0) | tag
// Rank 0 answers a HELLO with nothing but a fresh nonce, and first bytes that are not the
// greeting, or a wrong PROOF, with a closed connection: a stranger learns nothing, and its
// connection costs rank 0 a table slot for at most HANDSHAKE_S. Rank r accepts the blob only after rank 0's proof
// and the GCM tag check out, so a process that took the port first (or another job's rank
// 0) cannot hand it a wrong id. Both proofs cover both fresh nonces and everything said
// before (no replay, no reflection: the labels differ). The blob is encrypted under
// MAC("session key", HELLO | CHALLENGE), a key used once, so a relay or an eavesdropper on
// the path sees no id either.
//
// File. Rank 0 writes "ZEROBTF2" | world | 0 | bytes | salt (32 random bytes) | the blob sealed
// under MAC("file key", header) with the header as associated data | tag, to a temporary
// file created exclusively (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600, a random name), then
// renames it onto the path. The others poll the path and take only a file that opens under
// this job's key: a stale file of an earlier job (another secret) or a planted one is
// refused with a message, and they keep waiting for this job's.
//
// Every wait has a deadline (ZERO_BOOTSTRAP_TIMEOUT seconds, default 600), so a missing
// rank ends in a message instead of a hang. POSIX and OpenSSL's libcrypto (HMAC-SHA256,
// AES-256-GCM, RAND_bytes): part of the host build.
#include "../comm.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HANDSHAKE_S 10.0   // a connected peer must finish its part of the handshake this fast
#define MAX_CONNS 256      // connections rank 0 handshakes at once (more wait in the backlog)
#define MAX_LISTEN 8       // addresses host may resolve to
#define MAX_NOTES 20       // stray connections rank 0 describes one by one (then it counts them)
#define MIN_SECRET 16      // bytes
#define KEYB 32            // HMAC-SHA256
#define NONCEB 32
#define TAGB 16            // AES-GCM
#define HELLO_LEN (8 + 4 + 4 + 8 + NONCEB)
#define CHAL_LEN (8 + NONCEB)
#define PROOF_LEN KEYB
#define RHDR_LEN (4 + 4 + 8)
#define FHDR_LEN (8 + 4 + 4 + 8 + NONCEB)

static const unsigned char TCP_MAGIC[8] = {'Z', 'E', 'R', 'O', 'B', 'O', 'T', '2'};
static const unsigned char FILE_MAGIC[8] = {'Z', 'E', 'R', 'O', 'B', 'T', 'F', '2'};

// RESULT status: what rank 0 says to a rank that proved itself
enum { ST_OK = 0, ST_MISMATCH = 1, ST_BAD_RANK = 2, ST_DUPLICATE = 3 };

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

#define BOOTSTRAP_TIMEOUT_MAX 1e6   // seconds (11.6 days): any deadline stays a number a timespec holds

// ZERO_BOOTSTRAP_TIMEOUT's seconds, or -1 when it is not a number in (0, BOOTSTRAP_TIMEOUT_MAX].
static double parse_timeout(const char *s) {
    char *end;
    errno = 0;
    double t = strtod(s, &end);
    return errno == 0 && end != s && *end == '\0' && t > 0 && t <= BOOTSTRAP_TIMEOUT_MAX ? t : -1;
}

double zero_bootstrap_timeout(void) {
    const char *s = getenv("ZERO_BOOTSTRAP_TIMEOUT");
    double t = s && *s ? parse_timeout(s) : 600.0;
    return t > 0 ? t : 600.0;   // zero_bootstrap_timeout_check refused a malformed one at start
}

int zero_bootstrap_timeout_check(int rank) {
    const char *s = getenv("ZERO_BOOTSTRAP_TIMEOUT");
    if (!s || !*s || parse_timeout(s) > 0) return 0;
    fprintf(stderr, "zero: rank %d: ZERO_BOOTSTRAP_TIMEOUT=%s is not a number of seconds in (0, %.0f]\n", rank, s,
            BOOTSTRAP_TIMEOUT_MAX);
    return -1;
}

// ---------------------------------------------------------------- bytes on the wire

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static uint64_t get64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

// The first bytes of what a peer sent, in hex, for a message.
static const char *hex_head(const unsigned char *p, size_t n, char *out, size_t cap) {
    size_t len = 0;
    out[0] = 0;
    for (size_t i = 0; i < n && i < 8 && len + 4 < cap; i++) len += (size_t)snprintf(out + len, cap - len, "%s%02x", i ? " " : "", p[i]);
    return out;
}

// ---------------------------------------------------------------- the job's key

// K from ZERO_BOOTSTRAP_SECRET or the file ZERO_BOOTSTRAP_SECRET_FILE names; 0, or -1 after
// printing why (and how to set one). how: the way the blob travels, for the message.
static int job_key(const ZeroComm *c, const char *how, const char *what, unsigned char key[KEYB]) {
    const char *s = getenv("ZERO_BOOTSTRAP_SECRET"), *f = getenv("ZERO_BOOTSTRAP_SECRET_FILE");
    int has_s = s && *s, has_f = f && *f;
    if (!has_s && !has_f) {
        fprintf(stderr, "zero: rank %d: sharing %s over %s across WORLD_SIZE=%d ranks without MPI needs a per-job "
                "secret, so that only this job's ranks take part: set ZERO_BOOTSTRAP_SECRET to the same fresh random "
                "string of at least %d characters in every rank's environment (e.g. export ZERO_BOOTSTRAP_SECRET="
                "$(od -An -tx1 -N32 /dev/urandom | tr -d ' \\n')), or ZERO_BOOTSTRAP_SECRET_FILE to a file of mode "
                "0600 that holds it; scripts/launch_ranks.sh draws one for every job it starts\n",
                c->rank, what, how, c->world, MIN_SECRET);
        return -1;
    }
    if (has_s && has_f) {
        fprintf(stderr, "zero: rank %d: both ZERO_BOOTSTRAP_SECRET and ZERO_BOOTSTRAP_SECRET_FILE=%s are set: "
                "set only one\n", c->rank, f);
        return -1;
    }
    unsigned char buf[4096];
    size_t n = 0;
    if (has_s) {
        n = strlen(s);
        if (n > sizeof buf) n = sizeof buf;   // longer adds nothing to a 256-bit key
        memcpy(buf, s, n);
    } else {
        // O_NONBLOCK: a FIFO planted at the name opens at once (and is refused below), never
        // waits for a writer
        int fd = open(f, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat st;
        const char *why = NULL;
        char wb[160];
        if (fd < 0) why = strerror(errno);
        else if (fstat(fd, &st) != 0) why = strerror(errno);
        else if (!S_ISREG(st.st_mode)) why = "not a regular file";
        else if (st.st_uid != geteuid()) {
            snprintf(wb, sizeof wb, "owned by uid %u, not by this process's uid %u", (unsigned)st.st_uid, (unsigned)geteuid());
            why = wb;
        } else if (st.st_mode & 077) {
            snprintf(wb, sizeof wb, "its mode is %04o: others than its owner may read it (chmod 600 it)",
                     (unsigned)(st.st_mode & 07777));
            why = wb;
        } else {
            ssize_t k;
            while (n < sizeof buf && (k = read(fd, buf + n, sizeof buf - n)) != 0) {
                if (k < 0 && errno == EINTR) continue;
                if (k < 0) { why = strerror(errno); break; }
                n += (size_t)k;
            }
            while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t')) n--;
        }
        if (fd >= 0) close(fd);
        if (why) {
            fprintf(stderr, "zero: rank %d: cannot take the bootstrap secret from ZERO_BOOTSTRAP_SECRET_FILE=%s: %s\n",
                    c->rank, f, why);
            OPENSSL_cleanse(buf, sizeof buf);
            return -1;
        }
    }
    if (n < MIN_SECRET) {
        fprintf(stderr, "zero: rank %d: the bootstrap secret (%s) is %zu bytes; it needs at least %d random ones "
                "(e.g. $(od -An -tx1 -N32 /dev/urandom | tr -d ' \\n'))\n",
                c->rank, has_s ? "ZERO_BOOTSTRAP_SECRET" : f, n, MIN_SECRET);
        OPENSSL_cleanse(buf, sizeof buf);
        return -1;
    }
    static const char label[] = "zero-boot-v2 job key";
    int ok = HMAC(EVP_sha256(), buf, (int)n, (const unsigned char *)label, sizeof label - 1, key, NULL) != NULL;
    OPENSSL_cleanse(buf, sizeof buf);
    if (!ok) fprintf(stderr, "zero: rank %d: HMAC-SHA256 of the bootstrap secret failed (libcrypto)\n", c->rank);
    return ok ? 0 : -1;
}

// out = HMAC-SHA256(key, label || a || b || d); 0 or -1.
static int mac(const unsigned char key[KEYB], const char *label, const unsigned char *a, size_t na,
               const unsigned char *b, size_t nb, const unsigned char *d, size_t nd, unsigned char out[KEYB]) {
    unsigned char msg[64 + HELLO_LEN + CHAL_LEN + RHDR_LEN + FHDR_LEN];
    size_t nl = strlen(label);
    if (nl + na + nb + nd > sizeof msg) return -1;
    memcpy(msg, label, nl);
    if (na) memcpy(msg + nl, a, na);
    if (nb) memcpy(msg + nl + na, b, nb);
    if (nd) memcpy(msg + nl + na + nb, d, nd);
    return HMAC(EVP_sha256(), key, KEYB, msg, nl + na + nb + nd, out, NULL) ? 0 : -1;
}

// AES-256-GCM with a key used for this one message (so a fixed IV): out = E(in), tag; 0 or -1.
static int seal(const unsigned char key[KEYB], const unsigned char *aad, size_t naad, const void *in, size_t n,
                unsigned char *out, unsigned char tag[TAGB]) {
    static const unsigned char iv[12];
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int la = 0, lo = 0, lf = 0;
    int ok = x && n <= (size_t)INT32_MAX && EVP_EncryptInit_ex(x, EVP_aes_256_gcm(), NULL, key, iv) == 1 &&
             EVP_EncryptUpdate(x, NULL, &la, aad, (int)naad) == 1 &&
             (n == 0 || EVP_EncryptUpdate(x, out, &lo, in, (int)n) == 1) && EVP_EncryptFinal_ex(x, out + lo, &lf) == 1 &&
             EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_GET_TAG, TAGB, tag) == 1;
    EVP_CIPHER_CTX_free(x);
    return ok ? 0 : -1;
}

// The inverse, in place (buf: n sealed bytes, then the tag): 0 when the tag checks out and
// buf holds the plaintext, else -1 (buf is then garbage: use it only after a 0).
static int unseal(const unsigned char key[KEYB], const unsigned char *aad, size_t naad, unsigned char *buf, size_t n) {
    static const unsigned char iv[12];
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int la = 0, lo = 0, lf = 0;
    int ok = x && n <= (size_t)INT32_MAX && EVP_DecryptInit_ex(x, EVP_aes_256_gcm(), NULL, key, iv) == 1 &&
             EVP_DecryptUpdate(x, NULL, &la, aad, (int)naad) == 1 &&
             (n == 0 || EVP_DecryptUpdate(x, buf, &lo, buf, (int)n) == 1) &&
             EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_TAG, TAGB, buf + n) == 1 && EVP_DecryptFinal_ex(x, buf + lo, &lf) == 1;
    EVP_CIPHER_CTX_free(x);
    return ok ? 0 : -1;
}

// ---------------------------------------------------------------- sockets

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

static void addr_str(const struct sockaddr *sa, socklen_t len, char *out, size_t cap) {
    char h[NI_MAXHOST], s[NI_MAXSERV];
    if (getnameinfo(sa, len, h, sizeof h, s, sizeof s, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        snprintf(out, cap, "an unknown address");
        return;
    }
    snprintf(out, cap, sa->sa_family == AF_INET6 ? "[%.64s]:%.8s" : "%.64s:%.8s", h, s);
}

// The TCP addresses of host:port (IPv4 and IPv6): 0, or -1 with the reason in err.
static int resolve(const char *host, const char *port, struct addrinfo **res, char *err, size_t errlen) {
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    *res = NULL;
    int rc = getaddrinfo(host, port, &hints, res);
    if (rc == 0) return 0;
    snprintf(err, errlen, "cannot resolve %.128s: %s", host, gai_strerror(rc));
    return -1;
}

static int is_loopback(const struct sockaddr *sa) {
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family != AF_INET6) return 0;
    const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(a6) || (IN6_IS_ADDR_V4MAPPED(a6) && a6->s6_addr[12] == 127);
}

// Listens on every address host resolves to (only those: not on every interface); the
// number of sockets in fds, or -1 after filling err. remote: ranks run on other machines,
// which a loopback address (Debian maps the hostname to 127.0.1.1) never reaches: refused
// at once rather than waited on for the bootstrap timeout. An address this machine does not
// have (EADDRNOTAVAIL) or whose family it lacks (EAFNOSUPPORT: IPv6 off) is passed over,
// said, as long as another one listens.
static int listen_on(const char *host, const char *port, int remote, int fds[MAX_LISTEN], char *err, size_t errlen) {
    struct addrinfo *res;
    if (resolve(host, port, &res, err, errlen) != 0) return -1;
    int loopback = 1;
    for (struct addrinfo *a = res; a; a = a->ai_next) loopback &= is_loopback(a->ai_addr);
    if (remote && loopback && res) {
        char as[80];
        addr_str(res->ai_addr, res->ai_addrlen, as, sizeof as);
        snprintf(err, errlen, "%.128s resolves only to loopback addresses (%s%s), which the ranks on other machines "
                 "cannot reach (LOCAL_WORLD_SIZE=%s of WORLD_SIZE=%s); give an address of this machine that they "
                 "reach (its IP address on their network, or a name that resolves to it)", host, as,
                 res->ai_next ? ", ..." : "", getenv("LOCAL_WORLD_SIZE"), getenv("WORLD_SIZE"));
        freeaddrinfo(res);
        return -1;
    }
    char skipped[256] = "";
    int n = 0, outside = 0;   // outside: sockets on addresses other machines can reach
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        int dup = 0;   // a name listed twice (/etc/hosts) resolves to the same address twice
        for (struct addrinfo *b = res; b != a && !dup; b = b->ai_next)
            dup = b->ai_addrlen == a->ai_addrlen && !memcmp(b->ai_addr, a->ai_addr, a->ai_addrlen);
        if (dup) continue;
        char as[80];
        addr_str(a->ai_addr, a->ai_addrlen, as, sizeof as);
        if (n == MAX_LISTEN) {
            snprintf(err, errlen, "%s resolves to more than %d addresses", host, MAX_LISTEN);
            break;
        }
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        int one = 1, e = 0;
        if (fd < 0) e = errno;
        else {
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);   // a quick rerun on the same port
            if (a->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
            if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 128) != 0) e = errno;
        }
        if ((e == EADDRNOTAVAIL || e == EAFNOSUPPORT) && (n > 0 || a->ai_next)) {
            size_t len = strlen(skipped);
            snprintf(skipped + len, sizeof skipped - len, "%s%s (%s)", len ? ", " : "", as, strerror(e));
            if (fd >= 0) close(fd);
            continue;
        }
        if (e) {
            snprintf(err, errlen, "cannot listen on %s: %.100s%s", as, strerror(e),
                     e == EADDRINUSE ? " (another process holds the port: another job, or one that must not get "
                                       "the id; this job's ranks will refuse it)"
                     : e == EADDRNOTAVAIL ? " (host must be an address of rank 0's machine, the one the other "
                                            "ranks connect to)" : "");
            if (fd >= 0) close(fd);
            break;
        }
        fds[n++] = fd;
        outside += !is_loopback(a->ai_addr);
    }
    freeaddrinfo(res);
    if (!err[0] && n > 0 && remote && !outside)   // its other addresses passed over: only loopback listens
        snprintf(err, errlen, "%.128s: of its addresses only loopback ones take connections here (not %s), which the "
                 "ranks on other machines cannot reach (LOCAL_WORLD_SIZE=%s of WORLD_SIZE=%s); give an address of "
                 "this machine that they reach", host, skipped, getenv("LOCAL_WORLD_SIZE"), getenv("WORLD_SIZE"));
    if (err[0] || n == 0) {
        for (int i = 0; i < n; i++) close(fds[i]);
        if (!err[0] && skipped[0])
            snprintf(err, errlen, "cannot listen on any address of %.128s: %s (host must be an address of rank 0's "
                     "machine, the one the other ranks connect to)", host, skipped);
        else if (!err[0]) snprintf(err, errlen, "%s resolves to no address", host);
        return -1;
    }
    if (skipped[0])
        fprintf(stderr, "zero: rank 0: bootstrap host %.128s: not listening on %s; listening on its other "
                "address(es)\n", host, skipped);
    return n;
}

// ---------------------------------------------------------------- rank 0

typedef enum { C_HELLO, C_PROOF, C_RESULT } ConnState;

typedef struct {
    int fd;
    ConnState st;
    double deadline;
    unsigned char hello[HELLO_LEN], chal[CHAL_LEN], in[HELLO_LEN];
    size_t got;              // bytes of the current message read into in
    unsigned char *out;      // what is being sent, and how far
    size_t out_len, out_done;
    int rank;                // the rank this connection is being served as, or -1
    char peer[80];
} Conn;

typedef struct {
    ZeroComm *c;
    const char *spec, *what;
    const void *blob;
    size_t bytes;
    const unsigned char *key;
    unsigned char *seen;     // ranks served or being served
    int served, notes, strays;
} Server;

// A line about a stray connection; the first MAX_NOTES, then only counted.
static void note(Server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(Server *s, const char *fmt, ...) {
    s->strays++;
    if (s->notes >= MAX_NOTES) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "zero: rank 0: bootstrap port %s: %s\n", s->spec, msg);
    if (++s->notes == MAX_NOTES)
        fprintf(stderr, "zero: rank 0: (further stray bootstrap connections are counted, not described)\n");
}

static void conn_close(Server *s, Conn *k) {
    if (k->rank >= 0) s->seen[k->rank] = 0;   // not served after all
    close(k->fd);
    free(k->out);
    k->fd = -1;
    k->out = NULL;
}

static int conn_send(Conn *k, const void *p, size_t n) {
    k->out = malloc(n);
    if (!k->out) return -1;
    memcpy(k->out, p, n);
    k->out_len = n;
    k->out_done = 0;
    return 0;
}

// The first bytes of a HELLO, as soon as they come: 0, or -1 (said why) when they cannot
// begin the greeting, so a peer speaking anything else is refused at once.
static int check_greeting(Server *s, Conn *k) {
    size_t n = k->got < 8 ? k->got : 8;
    if (memcmp(k->in, TCP_MAGIC, n) == 0) return 0;
    char hx[40];
    note(s, "a connection from %s is not a rank of this job (its first bytes %s are not the bootstrap greeting); "
         "closed without an answer", k->peer, hex_head(k->in, n, hx, sizeof hx));
    return -1;
}

// A complete HELLO: answer it with a nonce. 0, or -1 to drop the connection.
static int on_hello(Conn *k) {
    memcpy(k->hello, k->in, HELLO_LEN);
    memcpy(k->chal, TCP_MAGIC, 8);
    if (RAND_bytes(k->chal + 8, NONCEB) != 1 || conn_send(k, k->chal, CHAL_LEN) != 0) {
        fprintf(stderr, "zero: rank 0: drawing a bootstrap nonce failed (libcrypto or host memory)\n");
        return -1;
    }
    k->st = C_PROOF;
    k->got = 0;
    return 0;
}

// A complete PROOF: check it, then send the RESULT. 0, or -1 to drop the connection.
static int on_proof(Server *s, Conn *k) {
    ZeroComm *c = s->c;
    uint32_t r = get32(k->hello + 8), w = get32(k->hello + 12);
    uint64_t b = get64(k->hello + 16);
    unsigned char want[KEYB];
    if (mac(s->key, "zero-boot-v2 rank proof", k->hello, HELLO_LEN, k->chal, CHAL_LEN, NULL, 0, want) != 0 ||
        CRYPTO_memcmp(want, k->in, KEYB) != 0) {
        note(s, "refused a connection from %s claiming rank %u of WORLD_SIZE=%u: its proof does not match this job's "
             "bootstrap secret (a process without ZERO_BOOTSTRAP_SECRET, or a rank of another job); it got nothing",
             k->peer, r, w);
        return -1;
    }
    int st = ST_OK;
    if (w != (uint32_t)c->world || b != s->bytes) st = ST_MISMATCH;
    else if (r == 0 || r >= (uint32_t)c->world) st = ST_BAD_RANK;
    else if (s->seen[r]) st = ST_DUPLICATE;
    if (st != ST_OK)
        fprintf(stderr, "zero: rank 0: bootstrap connection from %s (rank %u of WORLD_SIZE=%u, %llu bytes) refused: %s\n",
                k->peer, r, w, (unsigned long long)b,
                st == ST_MISMATCH ? "this job has another WORLD_SIZE or blob size (see that rank's message)"
                : st == ST_BAD_RANK ? "no such rank in this job" : "that rank already joined");
    size_t n = st == ST_OK ? s->bytes : 0, len = RHDR_LEN + KEYB + n + TAGB;
    unsigned char *m = malloc(len), skey[KEYB];
    if (!m) return -1;
    put32(m, (uint32_t)st);
    put32(m + 4, (uint32_t)c->world);
    put64(m + 8, (uint64_t)s->bytes);
    int ok = mac(s->key, "zero-boot-v2 rank 0 proof", k->hello, HELLO_LEN, k->chal, CHAL_LEN, m, RHDR_LEN,
                 m + RHDR_LEN) == 0 &&
             mac(s->key, "zero-boot-v2 session key", k->hello, HELLO_LEN, k->chal, CHAL_LEN, NULL, 0, skey) == 0 &&
             seal(skey, m, RHDR_LEN, s->blob, n, m + RHDR_LEN + KEYB, m + RHDR_LEN + KEYB + n) == 0;
    OPENSSL_cleanse(skey, sizeof skey);
    if (!ok) {
        free(m);
        fprintf(stderr, "zero: rank 0: sealing %s for %s failed (libcrypto)\n", s->what, k->peer);
        return -1;
    }
    free(k->out);
    k->out = m;
    k->out_len = len;
    k->out_done = 0;
    k->st = C_RESULT;
    if (st == ST_OK) {
        k->rank = (int)r;
        s->seen[r] = 1;
    }
    return 0;
}

// Moves what fd is ready for; 1 when the connection is done (served or refused and told),
// 0 to go on, -1 to drop it.
static int conn_step(Server *s, Conn *k) {
    if (k->out_done < k->out_len) {
        ssize_t m = send(k->fd, k->out + k->out_done, k->out_len - k->out_done, MSG_NOSIGNAL);
        if (m < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (m < 0) {
            note(s, "a connection from %s broke off: %s", k->peer, strerror(errno));
            return -1;
        }
        k->out_done += (size_t)m;
        if (k->out_done < k->out_len) return 0;
        free(k->out);
        k->out = NULL;
        k->out_len = k->out_done = 0;
        if (k->st != C_RESULT) return 0;
        if (k->rank >= 0) {
            s->served++;
            k->rank = -1;   // keep it marked as served
        }
        return 1;
    }
    size_t need = k->st == C_HELLO ? HELLO_LEN : PROOF_LEN;
    ssize_t m = recv(k->fd, k->in + k->got, need - k->got, 0);
    if (m < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (m <= 0) {
        char hx[40];
        note(s, "a connection from %s %s after %zu bytes of its %s%s%s, without proving it is a rank of this job; "
             "ignored", k->peer, m == 0 ? "closed" : strerror(errno), k->got, k->st == C_HELLO ? "greeting" : "proof",
             k->got ? ": " : "", k->got ? hex_head(k->in, k->got, hx, sizeof hx) : "");
        return -1;
    }
    k->got += (size_t)m;
    if (k->st == C_HELLO && check_greeting(s, k) != 0) return -1;
    if (k->got < need) return 0;
    return (k->st == C_HELLO ? on_hello(k) : on_proof(s, k)) == 0 ? 0 : -1;
}

static int serve(ZeroComm *c, const char *spec, const char *host, const char *port, const void *blob, size_t bytes,
                 const char *what, const unsigned char *key, double timeout) {
    char err[768] = "";
    int lfd[MAX_LISTEN];
    // ranks on other machines: LOCAL_WORLD_SIZE (the ranks on each machine, checked at start-up)
    // below the world
    const char *lw = getenv("LOCAL_WORLD_SIZE");
    const int remote = lw && *lw && atoi(lw) < c->world;
    int nl = listen_on(host, port, remote, lfd, err, sizeof err);
    if (nl < 0) {
        fprintf(stderr, "zero: rank 0: cannot share %s over ZERO_BOOTSTRAP_TCP=%s: %s\n", what, spec, err);
        return -1;
    }
    Server s = {c, spec, what, blob, bytes, key, calloc((size_t)c->world, 1), 0, 0, 0};
    Conn *conns = calloc(MAX_CONNS, sizeof(Conn));
    struct pollfd *pf = calloc(MAX_CONNS + MAX_LISTEN, sizeof(struct pollfd));
    int nconn = 0, rc = 0;
    if (!s.seen || !conns || !pf) {
        fprintf(stderr, "zero: rank 0: out of host memory in the TCP bootstrap\n");
        rc = -1;
    }
    double deadline = now_s() + timeout;
    while (rc == 0 && s.served < c->world - 1) {
        double t = now_s(), wake = deadline;
        if (t >= deadline) {
            char missing[256] = "";
            size_t len = 0;
            for (int r = 1; r < c->world && len < sizeof missing - 16; r++)
                if (!s.seen[r]) len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%d", len ? ", " : "", r);
            fprintf(stderr, "zero: rank 0: %s: only %d of %d ranks joined at ZERO_BOOTSTRAP_TCP=%s within %.0f s "
                    "(missing: %s)\n", what, s.served, c->world - 1, spec, timeout, missing);
            rc = -1;
            break;
        }
        // drop connections past their deadline; poll the rest, and the listeners while there is room
        int np = 0;
        for (int i = 0; i < nconn;) {
            Conn *k = &conns[i];
            if (t >= k->deadline) {
                char hx[40];
                note(&s, "dropped a connection from %s that sent %zu bytes%s%s%s and no complete %s within %.0f s "
                     "(not a rank of this job, or a stalled one)", k->peer, k->got, k->got ? " (" : "",
                     k->got ? hex_head(k->in, k->got, hx, sizeof hx) : "", k->got ? ")" : "",
                     k->st == C_HELLO ? "greeting" : k->st == C_PROOF ? "proof" : "read of its answer", HANDSHAKE_S);
                conn_close(&s, k);
                conns[i] = conns[--nconn];
                continue;
            }
            if (k->deadline < wake) wake = k->deadline;
            pf[np++] = (struct pollfd){k->fd, k->out_done < k->out_len ? POLLOUT : POLLIN, 0};
            i++;
        }
        int room = nconn < MAX_CONNS;
        for (int j = 0; room && j < nl; j++) pf[nconn + j] = (struct pollfd){lfd[j], POLLIN, 0};
        double left = wake - t;
        int pr = poll(pf, (nfds_t)(nconn + (room ? nl : 0)), left > 1000.0 ? 1000000 : (int)(left * 1000.0) + 1);
        if (pr < 0 && errno != EINTR) {
            fprintf(stderr, "zero: rank 0: poll on the bootstrap port %s failed: %s\n", spec, strerror(errno));
            rc = -1;
            break;
        }
        if (pr <= 0) continue;
        for (int i = nconn - 1; i >= 0; i--) {   // from the back: a finished connection takes the last one's place
            if (!pf[i].revents) continue;
            int st = conn_step(&s, &conns[i]);
            if (st != 0) {
                conn_close(&s, &conns[i]);
                conns[i] = conns[--nconn];
            }
        }
        for (int j = 0; room && j < nl; j++) {
            if (!pf[np + j].revents) continue;
            while (nconn < MAX_CONNS) {
                struct sockaddr_storage sa;
                socklen_t sl = sizeof sa;
                int fd = accept4(lfd[j], (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {   // no descriptor left: let the table drain
                    note(&s, "cannot accept a connection: %s", strerror(errno));
                    sleep_s(0.1);
                }
                if (fd < 0) break;   // nothing more waiting (or the peer gave up)
                Conn *k = &conns[nconn++];
                memset(k, 0, sizeof *k);
                k->fd = fd;
                k->st = C_HELLO;
                k->rank = -1;
                k->deadline = now_s() + HANDSHAKE_S;
                addr_str((struct sockaddr *)&sa, sl, k->peer, sizeof k->peer);
            }
        }
    }
    if (nconn > 0) {
        char list[256] = "";
        size_t len = 0;
        for (int i = 0; i < nconn && len < sizeof list - 64; i++)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", conns[i].peer);
        fprintf(stderr, "zero: rank 0: bootstrap port %s: closing %d connection%s that never proved %s a rank of this "
                "job (from %s%s)\n", spec, nconn, nconn > 1 ? "s" : "", nconn > 1 ? "themselves" : "itself", list,
                len >= sizeof list - 64 ? ", ..." : "");
        s.strays += nconn;
    }
    for (int i = 0; i < nconn; i++) conn_close(&s, &conns[i]);
    if (s.strays > s.notes)
        fprintf(stderr, "zero: rank 0: bootstrap port %s: %d stray connections in all were refused\n", spec, s.strays);
    for (int j = 0; j < nl; j++) close(lfd[j]);
    free(pf);
    free(conns);
    free(s.seen);
    return rc;
}

// ---------------------------------------------------------------- the other ranks

// One attempt to connect to host:port before the deadline: the socket, or -1 (reason in last).
static int dial(const char *host, const char *port, double deadline, char *last, size_t lastlen) {
    struct addrinfo *res;
    if (resolve(host, port, &res, last, lastlen) != 0) return -1;
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
            snprintf(last, lastlen, "connect: %s", strerror(errno));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    return fd;
}

// One handshake with whatever listens on fd: 0 with the blob, 1 to try again (a broken
// connection before anything was proved), -1 after printing why this rank refuses.
static int handshake(ZeroComm *c, const char *spec, int fd, void *blob, size_t bytes, const char *what,
                     const unsigned char *key, double deadline, char *last, size_t lastlen) {
    unsigned char hello[HELLO_LEN], chal[CHAL_LEN], proof[KEYB], hdr[RHDR_LEN + KEYB], want[KEYB], skey[KEYB];
    memcpy(hello, TCP_MAGIC, 8);
    put32(hello + 8, (uint32_t)c->rank);
    put32(hello + 12, (uint32_t)c->world);
    put64(hello + 16, (uint64_t)bytes);
    if (RAND_bytes(hello + 24, NONCEB) != 1) {
        fprintf(stderr, "zero: rank %d: drawing a bootstrap nonce failed (libcrypto)\n", c->rank);
        return -1;
    }
    // rank 0 may be busy with other connections: give it a handshake's time before trying anew
    double hd = now_s() + 2 * HANDSHAKE_S < deadline ? now_s() + 2 * HANDSHAKE_S : deadline;
    if (io_full(fd, hello, HELLO_LEN, 1, hd) != 0 || io_full(fd, chal, CHAL_LEN, 0, hd) != 0) {
        snprintf(last, lastlen, "connected, then %s", strerror(errno));
        return 1;
    }
    if (memcmp(chal, TCP_MAGIC, 8) != 0) {
        char hx[40];
        fprintf(stderr, "zero: rank %d: the process at ZERO_BOOTSTRAP_TCP=%s is not rank 0 of this job: it does not "
                "speak the bootstrap protocol (it answered %s); refusing to take %s from it\n", c->rank, spec,
                hex_head(chal, 8, hx, sizeof hx), what);
        return -1;
    }
    if (mac(key, "zero-boot-v2 rank proof", hello, HELLO_LEN, chal, CHAL_LEN, NULL, 0, proof) != 0) return -1;
    if (io_full(fd, proof, KEYB, 1, deadline) != 0 || io_full(fd, hdr, sizeof hdr, 0, deadline) != 0) {
        fprintf(stderr, "zero: rank %d: the process at ZERO_BOOTSTRAP_TCP=%s broke off after this rank's proof (%s): it "
                "does not accept this job's bootstrap secret (ZERO_BOOTSTRAP_SECRET differs from rank 0's, or another "
                "job or process holds the port; see rank 0's message)\n", c->rank, spec, strerror(errno));
        return -1;
    }
    uint32_t st = get32(hdr), w = get32(hdr + 4);
    uint64_t b = get64(hdr + 8);
    if (mac(key, "zero-boot-v2 rank 0 proof", hello, HELLO_LEN, chal, CHAL_LEN, hdr, RHDR_LEN, want) != 0 ||
        CRYPTO_memcmp(want, hdr + RHDR_LEN, KEYB) != 0) {
        fprintf(stderr, "zero: rank %d: the process at ZERO_BOOTSTRAP_TCP=%s is not rank 0 of this job: its proof does "
                "not match this job's bootstrap secret (another job's rank 0, or a process that took the port); "
                "refusing %s from it\n", c->rank, spec, what);
        return -1;
    }
    if (st == ST_OK && b != bytes) {
        fprintf(stderr, "zero: rank %d: rank 0 at ZERO_BOOTSTRAP_TCP=%s offers %llu bytes for %s, this rank wants %zu\n",
                c->rank, spec, (unsigned long long)b, what, bytes);
        return -1;
    }
    size_t n = st == ST_OK ? bytes : 0;
    unsigned char *sealed = malloc(n + TAGB);
    int rc = -1;
    if (!sealed) fprintf(stderr, "zero: rank %d: out of host memory in the TCP bootstrap\n", c->rank);
    else if (io_full(fd, sealed, n + TAGB, 0, deadline) != 0)
        fprintf(stderr, "zero: rank %d: rank 0 at ZERO_BOOTSTRAP_TCP=%s broke off sending %s: %s\n", c->rank, spec, what,
                strerror(errno));
    else if (mac(key, "zero-boot-v2 session key", hello, HELLO_LEN, chal, CHAL_LEN, NULL, 0, skey) != 0 ||
             unseal(skey, hdr, RHDR_LEN, sealed, n) != 0)
        fprintf(stderr, "zero: rank %d: %s from ZERO_BOOTSTRAP_TCP=%s does not decrypt under this job's key (altered "
                "on the way?); refusing it\n", c->rank, what, spec);
    else if (st == ST_OK) {
        memcpy(blob, sealed, bytes);
        rc = 0;
    } else if (st == ST_MISMATCH)
        fprintf(stderr, "zero: rank %d: rank 0 at ZERO_BOOTSTRAP_TCP=%s refused this rank: it has WORLD_SIZE=%u and "
                "shares %llu bytes; this rank has WORLD_SIZE=%d and wants %zu for %s\n", c->rank, spec, w,
                (unsigned long long)b, c->world, bytes, what);
    else
        fprintf(stderr, "zero: rank %d: rank 0 at ZERO_BOOTSTRAP_TCP=%s refused this rank: %s (status %u)\n", c->rank,
                spec, st == ST_DUPLICATE ? "a process with this RANK already joined" :
                st == ST_BAD_RANK ? "it has no such rank" : "for a reason this version does not know", st);
    OPENSSL_cleanse(skey, sizeof skey);
    free(sealed);
    return rc;
}

static int fetch(ZeroComm *c, const char *spec, const char *host, const char *port, void *blob, size_t bytes,
                 const char *what, const unsigned char *key, double timeout) {
    double deadline = now_s() + timeout;
    char last[256] = "no attempt";
    while (now_s() < deadline) {
        int fd = dial(host, port, deadline, last, sizeof last);
        if (fd < 0) {   // rank 0 is not listening yet: try again
            sleep_s(0.1);
            continue;
        }
        int rc = handshake(c, spec, fd, blob, bytes, what, key, deadline, last, sizeof last);
        close(fd);
        if (rc <= 0) return rc;
        sleep_s(0.1);
    }
    fprintf(stderr, "zero: rank %d: could not get %s from rank 0 at ZERO_BOOTSTRAP_TCP=%s within %.0f s (last: %s); "
            "is rank 0 running, and is host:port its address?\n", c->rank, what, spec, timeout, last);
    return -1;
}

int zero_share_blob_tcp(ZeroComm *c, const char *spec, void *blob, size_t bytes, const char *what) {
    if (c->world == 1) return 0;
    char host[256], port[16], how[320];
    if (parse_spec(spec, host, sizeof host, port, sizeof port) != 0) {
        fprintf(stderr, "zero: rank %d: ZERO_BOOTSTRAP_TCP=%s is not host:port\n", c->rank, spec);
        return -1;
    }
    if (bytes > (size_t)INT32_MAX) {
        fprintf(stderr, "zero: rank %d: %s is %zu bytes, too large for the bootstrap\n", c->rank, what, bytes);
        return -1;
    }
    unsigned char key[KEYB];
    snprintf(how, sizeof how, "ZERO_BOOTSTRAP_TCP=%s", spec);
    if (job_key(c, how, what, key) != 0) return -1;
    double timeout = zero_bootstrap_timeout();
    int rc = c->rank == 0 ? serve(c, spec, host, port, blob, bytes, what, key, timeout)
                          : fetch(c, spec, host, port, blob, bytes, what, key, timeout);
    OPENSSL_cleanse(key, sizeof key);
    return rc;
}

// ---------------------------------------------------------------- the shared file

// Rank 0: the sealed blob to a fresh temporary file beside path, renamed onto it.
static int publish(ZeroComm *c, const char *path, const void *blob, size_t bytes, const char *what,
                   const unsigned char *key) {
    size_t len = FHDR_LEN + bytes + TAGB;
    unsigned char *f = malloc(len), fkey[KEYB], rnd[8];
    char tmp[4200] = "";
    const char *step = "out of host memory";
    int fd = -1, ok = 0;
    if (f) {
        memcpy(f, FILE_MAGIC, 8);
        put32(f + 8, (uint32_t)c->world);
        put32(f + 12, 0);
        put64(f + 16, (uint64_t)bytes);
        step = "libcrypto";
        if (RAND_bytes(f + 24, NONCEB) == 1 && RAND_bytes(rnd, sizeof rnd) == 1 &&
            mac(key, "zero-boot-v2 file key", f, FHDR_LEN, NULL, 0, NULL, 0, fkey) == 0 &&
            seal(fkey, f, FHDR_LEN, blob, bytes, f + FHDR_LEN, f + FHDR_LEN + bytes) == 0) {
            // a name nobody can guess, created only if nothing (no planted link) is there
            snprintf(tmp, sizeof tmp, "%s.tmp.%02x%02x%02x%02x%02x%02x%02x%02x", path, rnd[0], rnd[1], rnd[2], rnd[3],
                     rnd[4], rnd[5], rnd[6], rnd[7]);
            step = "creating a temporary file";
            fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
            if (fd >= 0) {
                step = "writing";
                ssize_t w = write(fd, f, len);
                ok = w == (ssize_t)len;
                if (!ok && w >= 0) errno = ENOSPC;   // a short write of a regular file: no room left
                if (ok) { step = "fsync"; ok = fsync(fd) == 0; }
                if (close(fd) != 0 && ok) { step = "close"; ok = 0; }
                if (ok) { step = "renaming it into place"; ok = rename(tmp, path) == 0; }
            }
        }
    }
    int e = errno;
    if (fd >= 0 && !ok) unlink(tmp);
    OPENSSL_cleanse(fkey, sizeof fkey);
    free(f);
    if (!ok)
        fprintf(stderr, "zero: rank 0: writing %s to ZERO_BOOTSTRAP_FILE=%s failed (%s): %s\n", what, path, step,
                strerror(e));
    return ok ? 0 : -1;
}

// The other ranks: 1 when path holds this job's blob (now in blob), 0 when there is no file
// yet, -1 when the file there is not this job's or cannot be opened now (why in why), -2
// when path cannot be opened for a reason rank 0's file would not change (a folder in it
// that is a file, no permission, a name too long).
static int take(ZeroComm *c, const char *path, void *blob, size_t bytes, const unsigned char *key, char *why,
                size_t whylen) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);   // a FIFO: refused below, not waited on
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        if (errno == ENOTDIR || errno == EACCES || errno == ENAMETOOLONG || errno == EPERM) {
            snprintf(why, whylen, "%s", strerror(errno));   // no file of rank 0's can change these
            return -2;
        }
        if (errno != ELOOP) {   // perhaps passing (a socket or FIFO rank 0's rename replaces, ESTALE)
            snprintf(why, whylen, "%s", strerror(errno));
            return -1;
        }
        snprintf(why, whylen, "it is a symbolic link (rank 0 writes a regular file)");
        return -1;
    }
    size_t len = FHDR_LEN + bytes + TAGB;
    unsigned char *f = malloc(len + 1), fkey[KEYB];
    struct stat st;
    ssize_t got = -1;
    int rc = -1;
    if (!f) snprintf(why, whylen, "out of host memory");
    else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) snprintf(why, whylen, "not a regular file");
    else if ((got = read(fd, f, len + 1)) != (ssize_t)len)
        snprintf(why, whylen, "it is %lld bytes, where this job's would be %zu", (long long)st.st_size, len);
    else if (memcmp(f, FILE_MAGIC, 8) != 0)
        snprintf(why, whylen, "it is not a bootstrap file of this version");
    else if (get32(f + 8) != (uint32_t)c->world || get64(f + 16) != bytes)
        snprintf(why, whylen, "it was written for WORLD_SIZE=%u and %llu bytes, this job has WORLD_SIZE=%d and %zu",
                 get32(f + 8), (unsigned long long)get64(f + 16), c->world, bytes);
    else if (mac(key, "zero-boot-v2 file key", f, FHDR_LEN, NULL, 0, NULL, 0, fkey) != 0 ||
             unseal(fkey, f, FHDR_LEN, f + FHDR_LEN, bytes) != 0)
        snprintf(why, whylen, "it does not verify against this job's bootstrap secret (a file of an earlier job, or "
                 "written by a process without ZERO_BOOTSTRAP_SECRET)");
    else {
        memcpy(blob, f + FHDR_LEN, bytes);
        rc = 1;
    }
    close(fd);
    OPENSSL_cleanse(fkey, sizeof fkey);
    free(f);
    return rc;
}

int zero_share_blob_file(ZeroComm *c, const char *path, void *blob, size_t bytes, const char *what) {
    if (c->world == 1) return 0;
    char how[4200];
    if (bytes > (size_t)INT32_MAX) {
        fprintf(stderr, "zero: rank %d: %s is %zu bytes, too large for the bootstrap\n", c->rank, what, bytes);
        return -1;
    }
    if (strlen(path) > 4096) {
        fprintf(stderr, "zero: rank %d: ZERO_BOOTSTRAP_FILE is %zu characters long, more than 4096\n", c->rank,
                strlen(path));
        return -1;
    }
    unsigned char key[KEYB];
    snprintf(how, sizeof how, "ZERO_BOOTSTRAP_FILE=%s", path);
    if (job_key(c, how, what, key) != 0) return -1;
    if (c->rank == 0) {
        int rc = publish(c, path, blob, bytes, what, key);
        OPENSSL_cleanse(key, sizeof key);
        return rc;
    }
    const double limit = zero_bootstrap_timeout();
    char why[256] = "", said[256] = "";
    int rc = 0;
    for (double end = now_s() + limit; rc != 1 && now_s() < end; ) {
        rc = take(c, path, blob, bytes, key, why, sizeof why);
        if (rc == -2) {
            OPENSSL_cleanse(key, sizeof key);
            fprintf(stderr, "zero: rank %d: cannot open ZERO_BOOTSTRAP_FILE=%s: %s\n", c->rank, path, why);
            return -1;
        }
        if (rc < 0 && strcmp(why, said) != 0) {   // each new reason once
            fprintf(stderr, "zero: rank %d: ignoring ZERO_BOOTSTRAP_FILE=%s: %s; waiting for this job's rank 0 to "
                    "replace it\n", c->rank, path, why);
            snprintf(said, sizeof said, "%s", why);
        }
        if (rc != 1) sleep_s(0.05);
    }
    OPENSSL_cleanse(key, sizeof key);
    if (rc == 1) return 0;
    if (rc < 0)
        fprintf(stderr, "zero: rank %d: refusing ZERO_BOOTSTRAP_FILE=%s: after %.0f s it still holds a file this job's "
                "rank 0 did not write (%s); a stale file of an earlier job, or a planted one: remove it or use a fresh "
                "path\n", c->rank, path, limit, why);
    else
        fprintf(stderr, "zero: rank %d: %s did not appear in ZERO_BOOTSTRAP_FILE=%s within %.0f s (is rank 0 running, "
                "with the same path on a file system both see?)\n", c->rank, what, path, limit);
    return -1;
}
