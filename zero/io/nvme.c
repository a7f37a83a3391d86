// nvme.c: the NVMe engine (see nvme.h). Requests occupy slots (at most queue_depth); each
// completes through one function, complete_locked, whichever engine moved the bytes: the
// io_uring engine has a reaper thread waiting on the completion queue, the fallback has
// worker threads doing pread/pwrite. Waiters sleep on a condition variable until every
// ticket up to theirs is done, so completions are handled (and short transfers
// resubmitted) as soon as they happen, not when the caller next looks.
// ZERO_NVME_JITTER=SEED (tests) takes the threads engine and sleeps a random while before
// half of its transfers, so that requests complete late and out of order, as a busy disk
// lets them: a caller that reuses a buffer or reads bytes without waiting for the ticket
// that covers them gets wrong bytes.
#include "nvme.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "../../llmc/numerics/rand.h"

// io_uring where liburing's header is found (the Makefile links -luring then);
// -DZERO_NVME_URING=0 builds the thread engine alone.
#ifndef ZERO_NVME_URING
#if defined(__has_include) && __has_include(<liburing.h>)
#define ZERO_NVME_URING 1
#else
#define ZERO_NVME_URING 0
#endif
#endif
#if ZERO_NVME_URING
#include <liburing.h>
#endif

#define NVME_MAX_DEPTH ZERO_NVME_MAX_DEPTH
#define NVME_MAX_CHUNK ZERO_NVME_MAX_BLOCK   // one pread/SQE moves at most this (or block_bytes); the rest follows
#define NVME_JITTER_MAX_US 2000   // longest ZERO_NVME_JITTER sleep
// A transfer interrupted or refused for now (EINTR, EAGAIN: a kernel short of block-layer
// tags answers a large O_DIRECT transfer so, to be issued again) goes again, 1 ms apart after
// NVME_QUICK_TRIES in a row, until NVME_RETRY_S seconds have passed since the first; a busy
// io_uring submit likewise, for about a second a round (NVME_SUBMIT_TRIES). Past that the
// request fails naming the error, instead of spinning forever.
#define NVME_QUICK_TRIES 8
#define NVME_RETRY_S 5.0
#define NVME_SUBMIT_TRIES 1000

enum { OP_READ, OP_WRITE };
enum { ENGINE_THREADS, ENGINE_URING };

// Wall time with a request in flight on any engine of one file (an engine and its siblings
// share it, so the time is not counted twice where they overlap). Taken under an engine's
// lock, then this one's; never the other way.
typedef struct {
    pthread_mutex_t mu;
    int in_flight, refs;
    double since, busy_s;
} NvmeClock;

typedef struct {
    ZeroTicket ticket;   // 0: the slot is free
    int op;
    char *buf;
    uint64_t offset;
    size_t bytes, done;  // asked for; moved so far
    int retries;         // tries in a row interrupted or refused (EINTR, EAGAIN), since retry_since
    double retry_since;
} NvmeSlot;

struct ZeroNvme {
    int fd, rank, engine, depth;
    int unnamed;   // O_TMPFILE: path is the name it would have had
    uint64_t file_bytes;
    size_t max_chunk;
    char path[PATH_MAX + 64], note[256], err[1024];
    char *pool;
    size_t buffer_bytes;
    int num_buffers;
    ZeroNvmeFree free_fn;
    void *alloc_ctx;

    pthread_mutex_t mu;
    pthread_cond_t done;   // a request finished: a slot is free, a ticket may be complete
    pthread_cond_t work;   // threads engine: a slot was queued, or stop
    NvmeSlot *slots;
    int in_flight;
    ZeroTicket issued, fail_ticket;   // fail_ticket: the first failed ticket (0: none)
    int *queue, q_head, q_len;        // threads engine: slots waiting for a worker
    pthread_t *threads;
    int nthreads, stop;
    int jitter;                       // ZERO_NVME_JITTER set (threads engine)
    uint64_t jitter_seed;
    int reaper_started;
    pthread_t reaper;
#if ZERO_NVME_URING
    int ring_ok;
    struct io_uring ring;
#endif
    ZeroNvmeStats stats;   // busy_s comes from the clock
    NvmeClock *clock;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// A request started (+1) or ended (-1) on an engine of the clock's file.
static void clock_tick(NvmeClock *c, int d) {
    pthread_mutex_lock(&c->mu);
    if (d > 0 && c->in_flight++ == 0) c->since = now_s();
    if (d < 0 && --c->in_flight == 0) c->busy_s += now_s() - c->since;
    pthread_mutex_unlock(&c->mu);
}

static NvmeClock *clock_share(NvmeClock *c) {
    if (!c) {
        if (!(c = calloc(1, sizeof *c))) return NULL;
        pthread_mutex_init(&c->mu, NULL);
    }
    pthread_mutex_lock(&c->mu);
    c->refs++;
    pthread_mutex_unlock(&c->mu);
    return c;
}

static void clock_drop(NvmeClock *c) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    int last = --c->refs == 0;
    pthread_mutex_unlock(&c->mu);
    if (!last) return;
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

// Records a failure at ticket t (the mutex is held). The first message is kept.
static void fail_locked(ZeroNvme *n, ZeroTicket t, const char *fmt, ...) {
    if (!n->fail_ticket) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(n->err, sizeof n->err, fmt, ap);
        va_end(ap);
    }
    if (!n->fail_ticket || t < n->fail_ticket) n->fail_ticket = t;
}

static const char *op_name(int op) { return op == OP_READ ? "read" : "write"; }

// Every ticket <= the returned one has completed.
static ZeroTicket low_water_locked(const ZeroNvme *n) {
    ZeroTicket lowest = n->issued + 1;
    for (int i = 0; i < n->depth; i++)
        if (n->slots[i].ticket && n->slots[i].ticket < lowest) lowest = n->slots[i].ticket;
    return lowest - 1;
}

// One transfer of slot s moved res bytes (or failed with -errno). Returns 1 when the
// rest must be issued again (the mutex is held).
static int complete_locked(ZeroNvme *n, NvmeSlot *s, long res) {
    size_t want = s->bytes - s->done;
    if (res == -EINTR || res == -EAGAIN) {
        double t = now_s();
        if (s->retries == 0) s->retry_since = t;
        if (t - s->retry_since < NVME_RETRY_S) {
            s->retries++;
            return 1;
        }
    }
    if (res > 0 && (size_t)res < want && res % ZERO_NVME_ALIGN == 0) {
        s->done += (size_t)res;
        s->retries = 0;
        return 1;
    }
    if (res > 0 && (size_t)res == want) {
        if (s->op == OP_READ) { n->stats.bytes_read += s->bytes; n->stats.reads++; }
        else { n->stats.bytes_written += s->bytes; n->stats.writes++; }
    } else if (res < 0) {
        char moved[128] = "";   // where it stopped, when part of it went through, and how often it was tried
        if (s->done) snprintf(moved, sizeof moved, " after %zu bytes", s->done);
        if (s->retries)
            snprintf(moved + strlen(moved), sizeof moved - strlen(moved), " (%d tries in a row over %.1f s)",
                     s->retries + 1, now_s() - s->retry_since);
        fail_locked(n, s->ticket, "rank %d: %s of %zu bytes at offset %" PRIu64 " in %s failed%s: %s",
                    n->rank, op_name(s->op), s->bytes, s->offset, n->path, moved, strerror((int)-res));
    } else {
        // the file ended (or the transfer stopped off the alignment, which only the end does)
        struct stat st;
        long long size = fstat(n->fd, &st) == 0 ? (long long)st.st_size : -1;
        fail_locked(n, s->ticket, "rank %d: short %s of %zu of %zu bytes at offset %" PRIu64
                    " in %s (the file holds %lld bytes)", n->rank, op_name(s->op),
                    s->done + (size_t)(res > 0 ? res : 0), s->bytes, s->offset, n->path, size);
    }
    s->ticket = 0;
    n->in_flight--;
    clock_tick(n->clock, -1);
    pthread_cond_broadcast(&n->done);
    return 0;
}

// Before a request's next try: a pause of 1 ms once it has been refused NVME_QUICK_TRIES
// times in a row (retries: its count, read under the mutex; the pause is taken outside it).
static void retry_pause(int retries) {
    if (retries <= NVME_QUICK_TRIES) return;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
}

static size_t chunk_of(const ZeroNvme *n, const NvmeSlot *s) {
    size_t want = s->bytes - s->done;
    return want < n->max_chunk ? want : n->max_chunk;
}

// ---------------------------------------------------------------------------------------
// threads engine: workers take queued slots and move them with pread/pwrite

// ZERO_NVME_JITTER: half of the transfers start at once, the others after 0..NVME_JITTER_MAX_US.
static void jitter(const ZeroNvme *n, ZeroTicket t, size_t done) {
    uint64_t r = rng_mix64(n->jitter_seed ^ rng_mix64(((uint64_t)n->rank << 48) ^ (t << 8) ^ done));
    if (r & 1) return;
    struct timespec ts = {0, (long)((r >> 8) % NVME_JITTER_MAX_US) * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static void *worker_main(void *arg) {
    ZeroNvme *n = arg;
    pthread_mutex_lock(&n->mu);
    for (;;) {
        while (n->q_len == 0 && !n->stop) pthread_cond_wait(&n->work, &n->mu);
        if (n->q_len == 0) break;   // stopping, nothing left
        NvmeSlot *s = &n->slots[n->queue[n->q_head]];
        n->q_head = (n->q_head + 1) % n->depth;
        n->q_len--;
        int again;
        do {
            size_t len = chunk_of(n, s);
            char *p = s->buf + s->done;
            off_t off = (off_t)(s->offset + s->done);
            int op = s->op;
            ZeroTicket t = s->ticket;
            size_t done = s->done;
            int retries = s->retries;
            n->stats.transfers++;
            pthread_mutex_unlock(&n->mu);
            retry_pause(retries);
            if (n->jitter) jitter(n, t, done);
            ssize_t r = op == OP_READ ? pread(n->fd, p, len, off) : pwrite(n->fd, p, len, off);
            long res = r < 0 ? -(long)errno : (long)r;
            pthread_mutex_lock(&n->mu);
            again = complete_locked(n, s, res);
        } while (again);
    }
    pthread_mutex_unlock(&n->mu);
    return NULL;
}

static void threads_issue_locked(ZeroNvme *n, NvmeSlot *s) {
    n->queue[(n->q_head + n->q_len) % n->depth] = (int)(s - n->slots);
    n->q_len++;
    pthread_cond_signal(&n->work);
}

// ---------------------------------------------------------------------------------------
// io_uring engine: the caller's thread submits, a reaper thread takes completions

#if ZERO_NVME_URING
// io_uring_submit, again while the ring is busy or the call interrupted, up to
// NVME_SUBMIT_TRIES times: its result (a refused submit leaves the entries queued), and in
// *tries how many calls it took.
static int submit_bounded(ZeroNvme *n, int *tries) {
    int r = 0;
    for (*tries = 1;; ++*tries) {
        if ((r = io_uring_submit(&n->ring)) >= 0 || (r != -EINTR && r != -EAGAIN && r != -EBUSY)) return r;
        if (*tries == NVME_SUBMIT_TRIES) return r;
        retry_pause(*tries);
    }
}

static void uring_issue_locked(ZeroNvme *n, NvmeSlot *s) {
    for (;;) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&n->ring);
        if (!sqe) { complete_locked(n, s, -EBUSY); return; }   // cannot happen: depth + 1 entries
        size_t len = chunk_of(n, s);
        if (s->op == OP_READ) io_uring_prep_read(sqe, n->fd, s->buf + s->done, (unsigned)len, s->offset + s->done);
        else io_uring_prep_write(sqe, n->fd, s->buf + s->done, (unsigned)len, s->offset + s->done);
        io_uring_sqe_set_data(sqe, s);
        n->stats.transfers++;
        double began = now_s();
        int tries, r = submit_bounded(n, &tries);
        if (r >= 0) return;
        // not taken: make the queued entry a no-op the reaper ignores, so no later submit
        // moves bytes for a request that has already failed
        io_uring_prep_nop(sqe);
        io_uring_sqe_set_data(sqe, &n->ring);
        if (r == -EBUSY) r = -EAGAIN;   // busy for a second: tried again like a refused transfer
        if (r == -EAGAIN || r == -EINTR) {
            if (s->retries == 0) s->retry_since = began;
            s->retries += tries - 1;
        }
        if (!complete_locked(n, s, r)) return;
    }
}

// The ring itself failed with r: every request it holds ends as failed, so no waiter hangs,
// and later ones are refused, which nothing would reap. The requests end with ECANCELED, not
// r: a refused wait (EAGAIN) is what complete_locked retries, and would keep their slots.
static void ring_failed_locked(ZeroNvme *n, int r) {
    fail_locked(n, n->issued + 1, "rank %d: the io_uring completion queue of %s failed: %s", n->rank, n->path,
                strerror(-r));
    for (int i = 0; i < n->depth; i++)
        if (n->slots[i].ticket) {
            n->slots[i].done = 0;
            complete_locked(n, &n->slots[i], -ECANCELED);
        }
    pthread_cond_broadcast(&n->done);
}

static void *reaper_main(void *arg) {
    ZeroNvme *n = arg;
    double refused_since = 0;   // when the waits began to be refused (EAGAIN), or 0
    for (;;) {
        struct io_uring_cqe *cqe;
        int r = io_uring_wait_cqe(&n->ring, &cqe);
        if (r == -EINTR) continue;
        if (r == -EAGAIN) {   // refused for now: again, 1 ms apart, for NVME_RETRY_S at most
            if (refused_since == 0) refused_since = now_s();
            if (now_s() - refused_since < NVME_RETRY_S) {
                retry_pause(NVME_QUICK_TRIES + 1);
                continue;
            }
        }
        refused_since = 0;
        if (r < 0) {
            pthread_mutex_lock(&n->mu);
            ring_failed_locked(n, r);
            pthread_mutex_unlock(&n->mu);
            return NULL;
        }
        NvmeSlot *s = io_uring_cqe_get_data(cqe);
        long res = cqe->res;
        io_uring_cqe_seen(&n->ring, cqe);
        if (!s) return NULL;   // the no-op zero_nvme_close sends
        if ((void *)s == &n->ring) continue;   // an entry withdrawn by uring_issue_locked
        pthread_mutex_lock(&n->mu);
        int again = complete_locked(n, s, res), retries = s->retries;
        pthread_mutex_unlock(&n->mu);
        if (!again) continue;
        retry_pause(retries);   // the slot stays this request's while it waits
        pthread_mutex_lock(&n->mu);
        uring_issue_locked(n, s);
        pthread_mutex_unlock(&n->mu);
    }
}
#endif

// ---------------------------------------------------------------------------------------
// requests

static ZeroTicket submit(ZeroNvme *n, int op, void *buf, uint64_t offset, size_t bytes) {
    pthread_mutex_lock(&n->mu);
    ZeroTicket t = 0;
    if (n->fail_ticket) goto out;   // stopped at the first failure, whose message stays
    if ((uintptr_t)buf % ZERO_NVME_ALIGN || offset % ZERO_NVME_ALIGN || bytes % ZERO_NVME_ALIGN || bytes == 0) {
        fail_locked(n, n->issued + 1, "rank %d: %s of %zu bytes at offset %" PRIu64 " (buffer %p) in %s "
                    "refused: buffer, offset and size must be non-zero multiples of %d", n->rank,
                    op_name(op), bytes, offset, buf, n->path, ZERO_NVME_ALIGN);
        goto out;
    }
    if (offset > n->file_bytes || bytes > n->file_bytes - offset) {
        fail_locked(n, n->issued + 1, "rank %d: %s of %zu bytes at offset %" PRIu64 " in %s refused: "
                    "it goes past the %" PRIu64 " bytes reserved", n->rank, op_name(op), bytes,
                    offset, n->path, n->file_bytes);
        goto out;
    }
    while (n->in_flight == n->depth && !n->fail_ticket) pthread_cond_wait(&n->done, &n->mu);
    if (n->fail_ticket) goto out;
    NvmeSlot *s = n->slots;
    while (s->ticket) s++;
    t = ++n->issued;
    *(op == OP_READ ? &n->stats.read_asked : &n->stats.write_asked) += bytes;
    *s = (NvmeSlot){t, op, buf, offset, bytes, 0, 0, 0};
    n->in_flight++;
    clock_tick(n->clock, +1);
#if ZERO_NVME_URING
    if (n->engine == ENGINE_URING) uring_issue_locked(n, s);
    else
#endif
        threads_issue_locked(n, s);
out:
    pthread_mutex_unlock(&n->mu);
    return t;
}

ZeroTicket zero_nvme_read(ZeroNvme *n, void *buf, uint64_t offset, size_t bytes) {
    return submit(n, OP_READ, buf, offset, bytes);
}

ZeroTicket zero_nvme_write(ZeroNvme *n, const void *buf, uint64_t offset, size_t bytes) {
    return submit(n, OP_WRITE, (void *)buf, offset, bytes);
}

int zero_nvme_wait(ZeroNvme *n, ZeroTicket t) {
    pthread_mutex_lock(&n->mu);
    if (t == 0 || t > n->issued) {
        fail_locked(n, n->issued + 1, "rank %d: wait on ticket %" PRIu64 " of %s, which was never issued "
                    "(the last one is %" PRIu64 "; 0 is a refused request)", n->rank, t, n->path, n->issued);
        pthread_mutex_unlock(&n->mu);
        return -1;
    }
    while (low_water_locked(n) < t) pthread_cond_wait(&n->done, &n->mu);
    int rc = n->fail_ticket && n->fail_ticket <= t ? -1 : 0;
    pthread_mutex_unlock(&n->mu);
    return rc;
}

int zero_nvme_drain(ZeroNvme *n) {
    pthread_mutex_lock(&n->mu);
    while (n->in_flight > 0) pthread_cond_wait(&n->done, &n->mu);
    int rc = n->fail_ticket ? -1 : 0;
    pthread_mutex_unlock(&n->mu);
    return rc;
}

// ---------------------------------------------------------------------------------------
// open and close

// The swap file's space, reserved up front, so that a full disk shows at start-up.
static int reserve_space(ZeroNvme *n, const char *dir, char *err, size_t errlen) {
    if (fallocate(n->fd, 0, 0, (off_t)n->file_bytes) != 0) {
        int e = errno;
        double gib = (double)n->file_bytes / (1 << 30);
        if (e == ENOSPC) {
            struct statvfs vs;
            unsigned long long avail = fstatvfs(n->fd, &vs) == 0 ? (unsigned long long)vs.f_bavail * vs.f_frsize : 0;
            set_err(err, errlen, "rank %d: disk full: cannot reserve %" PRIu64 " bytes (%.2f GiB) for the swap "
                    "file under %s: %llu bytes (%.2f GiB) are free there", n->rank, n->file_bytes, gib, dir,
                    avail, (double)avail / (1 << 30));
        } else if (e == EFBIG) {
            struct rlimit rl;
            char lim[64] = "unlimited";
            if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
                snprintf(lim, sizeof lim, "%llu bytes", (unsigned long long)rl.rlim_cur);
            set_err(err, errlen, "rank %d: cannot reserve %" PRIu64 " bytes (%.2f GiB) for the swap file under %s: "
                    "file too large for the file system or the process (RLIMIT_FSIZE %s)", n->rank,
                    n->file_bytes, gib, dir, lim);
        } else if (e == EOPNOTSUPP) {
            set_err(err, errlen, "rank %d: the file system under %s cannot reserve space (fallocate is not "
                    "supported), so a full disk would only show in the middle of training", n->rank, dir);
        } else {
            set_err(err, errlen, "rank %d: cannot reserve %" PRIu64 " bytes for the swap file under %s: %s",
                    n->rank, n->file_bytes, dir, strerror(e));
        }
        return -1;
    }
    return 0;
}

// The swap file: an unnamed file in dir (O_TMPFILE: no crash can leave it behind), or where
// the file system has none, one created O_DIRECT and unlinked at once; its space reserved.
// n->path names it in messages.
static int open_swap_file(ZeroNvme *n, const char *dir, char *err, size_t errlen) {
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (errno == ENOENT)
            set_err(err, errlen, "rank %d: the NVMe folder %s does not exist", n->rank, dir);
        else if (errno == ENOTDIR)
            set_err(err, errlen, "rank %d: the NVMe folder %s is not a folder (part of its path is a file)", n->rank, dir);
        else
            set_err(err, errlen, "rank %d: the NVMe folder %s: %s", n->rank, dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        set_err(err, errlen, "rank %d: the NVMe folder %s is not a folder", n->rank, dir);
        return -1;
    }
    snprintf(n->path, sizeof n->path, "%s/zero_swap_rank%d_%ld.bin", dir, n->rank, (long)getpid());
#ifdef O_TMPFILE
    // any refusal here is explained by the named file's open below, which meets it again
    // O_EXCL: it can never be given a name (linkat through /proc)
    n->fd = open(dir, O_TMPFILE | O_EXCL | O_RDWR | O_DIRECT | O_CLOEXEC, 0600);
    if (n->fd >= 0) {
        n->unnamed = 1;
        return reserve_space(n, dir, err, errlen);
    }
#endif
    n->fd = open(n->path, O_RDWR | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0600);
    if (n->fd < 0) {
        int e = errno;
        if (e == EINVAL) {   // some kernels create the file before refusing O_DIRECT
            unlink(n->path);
            set_err(err, errlen, "rank %d: the file system under %s does not support O_DIRECT (direct I/O, "
                    "which keeps the swap file out of the page cache): choose a folder on a local disk",
                    n->rank, dir);
        } else if (e == EACCES || e == EPERM || e == EROFS) {
            set_err(err, errlen, "rank %d: the NVMe folder %s is not writable: cannot create %s: %s",
                    n->rank, dir, n->path, strerror(e));
        } else {
            set_err(err, errlen, "rank %d: cannot create the swap file %s: %s", n->rank, n->path, strerror(e));
        }
        return -1;
    }
    if (unlink(n->path) != 0) {
        set_err(err, errlen, "rank %d: cannot unlink the swap file %s right after creating it: %s",
                n->rank, n->path, strerror(errno));
        return -1;
    }
    return reserve_space(n, dir, err, errlen);
}


// io_uring, or the reason it is not used (in reason). 1: in use, 0: not, -1: error.
static int start_uring(ZeroNvme *n, char *reason, size_t len) {
#if ZERO_NVME_URING
    int r = io_uring_queue_init((unsigned)n->depth + 1, &n->ring, 0);   // + 1: close's no-op
    if (r < 0) {
        snprintf(reason, len, "io_uring_queue_init: %s", strerror(-r));
        return 0;
    }
    // IORING_OP_READ and _WRITE came with Linux 5.6; a ring from 5.1-5.5 would refuse each
    // request with EINVAL at the first transfer
    struct io_uring_probe *probe = io_uring_get_probe_ring(&n->ring);
    const int ops = probe && io_uring_opcode_supported(probe, IORING_OP_READ) &&
                    io_uring_opcode_supported(probe, IORING_OP_WRITE) && io_uring_opcode_supported(probe, IORING_OP_NOP);
    if (probe) io_uring_free_probe(probe);
    if (!ops) {
        io_uring_queue_exit(&n->ring);
        snprintf(reason, len, "the kernel's io_uring lacks IORING_OP_READ or IORING_OP_WRITE (Linux 5.6)");
        return 0;
    }
    // a ring that sets up may still refuse its requests (a seccomp filter on io_uring_enter
    // alone): one no-op goes through it before it is trusted
    struct io_uring_sqe *sqe = io_uring_get_sqe(&n->ring);
    struct io_uring_cqe *cqe = NULL;
    r = -EBUSY;
    if (sqe) {
        io_uring_prep_nop(sqe);
        io_uring_sqe_set_data64(sqe, 0);
        for (int tries = 0; tries < 100 && (r = io_uring_submit_and_wait(&n->ring, 1)) == -EINTR; tries++) {}
        if (r >= 0) r = io_uring_wait_cqe(&n->ring, &cqe);
        if (r == 0) {
            r = cqe->res < 0 ? cqe->res : 0;
            io_uring_cqe_seen(&n->ring, cqe);
        }
    }
    if (r < 0) {
        io_uring_queue_exit(&n->ring);
        snprintf(reason, len, "a first request through io_uring: %s", strerror(-r));
        return 0;
    }
    n->ring_ok = 1;
    if (pthread_create(&n->reaper, NULL, reaper_main, n) != 0) {
        snprintf(reason, len, "cannot start the io_uring completion thread");
        return -1;
    }
    n->reaper_started = 1;
    return 1;
#else
    (void)n;
    snprintf(reason, len, "built without liburing");
    return 0;
#endif
}

static int start_threads(ZeroNvme *n, char *err, size_t errlen) {
    n->queue = malloc((size_t)n->depth * sizeof(int));
    n->threads = malloc((size_t)n->depth * sizeof(pthread_t));
    if (!n->queue || !n->threads) {
        set_err(err, errlen, "rank %d: out of memory for %d NVMe worker threads", n->rank, n->depth);
        return -1;
    }
    for (; n->nthreads < n->depth; n->nthreads++)
        if (pthread_create(&n->threads[n->nthreads], NULL, worker_main, n) != 0) {
            set_err(err, errlen, "rank %d: cannot start NVMe worker thread %d of %d", n->rank, n->nthreads + 1, n->depth);
            return -1;
        }
    return 0;
}

static size_t round_up(uint64_t x) {
    return (size_t)((x + ZERO_NVME_ALIGN - 1) / ZERO_NVME_ALIGN * ZERO_NVME_ALIGN);
}

// of: NULL to create the swap file under cfg->dir, else an open engine whose file this one
// shares (cfg's dir and file_bytes are then not used).
static ZeroNvme *engine_open(const ZeroNvmeConfig *cfg, const ZeroNvme *of, char *err, size_t errlen) {
    set_err(err, errlen, "%s", "");
    if (!of && (!cfg->dir || !cfg->dir[0])) { set_err(err, errlen, "rank %d: no NVMe folder given", cfg->rank); return NULL; }
    if ((!of && cfg->file_bytes == 0) || cfg->queue_depth < 1 || cfg->queue_depth > NVME_MAX_DEPTH || cfg->num_buffers < 0
        || (cfg->num_buffers > 0 && cfg->buffer_bytes == 0) || (cfg->alloc == NULL) != (cfg->free == NULL)
        || cfg->block_bytes % ZERO_NVME_ALIGN || cfg->block_bytes > NVME_MAX_CHUNK) {
        set_err(err, errlen, "rank %d: bad NVMe engine settings for %s: file_bytes %" PRIu64 " (> 0), queue_depth %d "
                "(1..%d), block_bytes %zu (0, or a multiple of %d up to %zu), %d buffers of %zu bytes, allocator and "
                "free both given or neither", cfg->rank, of ? of->path : cfg->dir, cfg->file_bytes, cfg->queue_depth, NVME_MAX_DEPTH,
                cfg->block_bytes, ZERO_NVME_ALIGN, NVME_MAX_CHUNK, cfg->num_buffers, cfg->buffer_bytes);
        return NULL;
    }
    // a file-size limit (ulimit -f) must fail a write with EFBIG and a message like a full
    // disk, not kill the process with SIGXFSZ before it can say which file
    signal(SIGXFSZ, SIG_IGN);
    const char *want = getenv("ZERO_NVME_ENGINE");
    if (want && !*want) want = NULL;   // set but empty: the automatic choice
    if (want && strcmp(want, "threads") != 0 && strcmp(want, "io_uring") != 0) {
        set_err(err, errlen, "rank %d: ZERO_NVME_ENGINE=%s: expected threads or io_uring", cfg->rank, want);
        return NULL;
    }
    const char *jit = getenv("ZERO_NVME_JITTER");
    unsigned long long jitter_seed = 0;
    if (jit && *jit) {
        char *end;
        errno = 0;
        jitter_seed = strtoull(jit, &end, 10);
        if (errno || *end || *jit == '-') {
            set_err(err, errlen, "rank %d: ZERO_NVME_JITTER='%s' is not a seed (a non-negative integer)", cfg->rank, jit);
            return NULL;
        }
        if (want && strcmp(want, "io_uring") == 0) {
            set_err(err, errlen, "rank %d: ZERO_NVME_JITTER needs the threads engine, not ZERO_NVME_ENGINE=io_uring", cfg->rank);
            return NULL;
        }
        want = "threads";
    }
    ZeroNvme *n = calloc(1, sizeof *n);
    if (!n) { set_err(err, errlen, "rank %d: out of memory for the NVMe engine", cfg->rank); return NULL; }
    n->fd = -1;
    n->jitter = jit && *jit;
    n->jitter_seed = jitter_seed;
    n->rank = cfg->rank;
    n->depth = cfg->queue_depth;
    n->file_bytes = of ? of->file_bytes : round_up(cfg->file_bytes);
    n->max_chunk = cfg->block_bytes ? cfg->block_bytes : NVME_MAX_CHUNK;
    n->buffer_bytes = cfg->num_buffers > 0 ? round_up(cfg->buffer_bytes) : 0;
    n->num_buffers = cfg->num_buffers;
    n->free_fn = cfg->free;
    n->alloc_ctx = cfg->alloc_ctx;
    pthread_mutex_init(&n->mu, NULL);
    pthread_cond_init(&n->done, NULL);
    pthread_cond_init(&n->work, NULL);
    n->slots = calloc((size_t)n->depth, sizeof(NvmeSlot));
    n->clock = clock_share(of ? of->clock : NULL);
    if (!n->slots || !n->clock) { set_err(err, errlen, "rank %d: out of memory for the NVMe engine", n->rank); goto fail; }

    // the engine first: a forced but refused io_uring fails before any file exists
    char reason[160] = "";
    int uring = want && strcmp(want, "threads") == 0 ? 0 : start_uring(n, reason, sizeof reason);
    if (uring < 0) { set_err(err, errlen, "rank %d: %s", n->rank, reason); goto fail; }
    if (uring) {
        n->engine = ENGINE_URING;
        snprintf(n->note, sizeof n->note, "io_uring, queue depth %d", n->depth);
    } else if (want && strcmp(want, "io_uring") == 0) {
        set_err(err, errlen, "rank %d: ZERO_NVME_ENGINE=io_uring, but io_uring is not available (%s)", n->rank, reason);
        goto fail;
    } else {
        n->engine = ENGINE_THREADS;
        if (n->jitter)
            snprintf(n->note, sizeof n->note, "threads (%d): forced by ZERO_NVME_JITTER=%llu (a random sleep of up to %d us "
                     "before half of the transfers)", n->depth, jitter_seed, NVME_JITTER_MAX_US);
        else if (want) snprintf(n->note, sizeof n->note, "threads (%d): forced by ZERO_NVME_ENGINE=threads", n->depth);
        else if (!ZERO_NVME_URING) snprintf(n->note, sizeof n->note, "threads (%d): %s", n->depth, reason);
        else snprintf(n->note, sizeof n->note, "threads (%d): io_uring refused (%s)", n->depth, reason);
        if (start_threads(n, err, errlen) != 0) goto fail;
    }
    if (cfg->block_bytes) {   // not the default: say so beside the engine
        size_t len = strlen(n->note);
        snprintf(n->note + len, sizeof n->note - len, "; blocks of at most %zu bytes", n->max_chunk);
    }

    if (of) {   // the same open file: its reads and writes are positioned, so nothing is shared but the bytes
        snprintf(n->path, sizeof n->path, "%s", of->path);
        n->unnamed = of->unnamed;
        if ((n->fd = fcntl(of->fd, F_DUPFD_CLOEXEC, 0)) < 0) {
            set_err(err, errlen, "rank %d: cannot open a second engine on the swap file %s: %s", n->rank, n->path,
                    strerror(errno));
            goto fail;
        }
    } else if (open_swap_file(n, cfg->dir, err, errlen) != 0) goto fail;

    if (n->num_buffers > 0) {
        if (n->buffer_bytes > SIZE_MAX / (size_t)n->num_buffers) {
            set_err(err, errlen, "rank %d: an NVMe pool of %d buffers of %zu bytes does not fit in memory",
                    n->rank, n->num_buffers, n->buffer_bytes);
            goto fail;
        }
        size_t total = n->buffer_bytes * (size_t)n->num_buffers;
        n->pool = cfg->alloc ? cfg->alloc(cfg->alloc_ctx, total) : aligned_alloc(ZERO_NVME_ALIGN, total);
        if (!n->pool) {
            set_err(err, errlen, "rank %d: cannot allocate the NVMe buffer pool: %d buffers of %zu bytes",
                    n->rank, n->num_buffers, n->buffer_bytes);
            goto fail;
        }
        if ((uintptr_t)n->pool % ZERO_NVME_ALIGN) {
            set_err(err, errlen, "rank %d: the NVMe buffer pool at %p is not aligned to %d bytes (the allocator's fault)",
                    n->rank, (void *)n->pool, ZERO_NVME_ALIGN);
            goto fail;
        }
    }
    return n;
fail:
    zero_nvme_close(n);
    return NULL;
}

ZeroNvme *zero_nvme_open(const ZeroNvmeConfig *cfg, char *err, size_t errlen) { return engine_open(cfg, NULL, err, errlen); }

ZeroNvme *zero_nvme_open_sibling(const ZeroNvme *of, const ZeroNvmeConfig *cfg, char *err, size_t errlen) {
    return engine_open(cfg, of, err, errlen);
}

void zero_nvme_close(ZeroNvme *n) {
    if (!n) return;
    pthread_mutex_lock(&n->mu);
    while (n->in_flight > 0) pthread_cond_wait(&n->done, &n->mu);
    n->stop = 1;
    pthread_cond_broadcast(&n->work);
    pthread_mutex_unlock(&n->mu);
    for (int i = 0; i < n->nthreads; i++) pthread_join(n->threads[i], NULL);
#if ZERO_NVME_URING
    if (n->reaper_started) {   // a no-op wakes the completion thread, which then ends
        struct io_uring_sqe *sqe = io_uring_get_sqe(&n->ring);   // free: nothing is in flight
        int r = -EBUSY;
        if (sqe) {
            io_uring_prep_nop(sqe);
            io_uring_sqe_set_data(sqe, NULL);
            int tries;
            r = submit_bounded(n, &tries);
        }
        if (r >= 0) pthread_join(n->reaper, NULL);
        else {   // it cannot be woken: left waiting on the ring, which stays mapped for it
            fprintf(stderr, "zero: rank %d: warning: the io_uring of %s could not be stopped (%s); its completion "
                    "thread is left behind\n", n->rank, n->path, strerror(-r));
            pthread_detach(n->reaper);
            n->ring_ok = 0;
        }
    }
    if (n->ring_ok) io_uring_queue_exit(&n->ring);
#endif
    if (n->fd >= 0) close(n->fd);   // the file is unlinked: its space goes back now
    if (n->pool) {
        if (n->free_fn) n->free_fn(n->alloc_ctx, n->pool);
        else free(n->pool);
    }
    pthread_cond_destroy(&n->work);
    pthread_cond_destroy(&n->done);
    pthread_mutex_destroy(&n->mu);
    clock_drop(n->clock);
    free(n->threads);
    free(n->queue);
    free(n->slots);
    free(n);
}

// ---------------------------------------------------------------------------------------
// accessors

void *zero_nvme_buffer(ZeroNvme *n, int i) {
    return i >= 0 && i < n->num_buffers ? n->pool + (size_t)i * n->buffer_bytes : NULL;
}

size_t zero_nvme_buffer_bytes(const ZeroNvme *n) { return n->buffer_bytes; }
const char *zero_nvme_error(const ZeroNvme *n) { return n->err; }
const char *zero_nvme_engine(const ZeroNvme *n) { return n->engine == ENGINE_URING ? "io_uring" : "threads"; }
const char *zero_nvme_engine_note(const ZeroNvme *n) { return n->note; }
const char *zero_nvme_path(const ZeroNvme *n) { return n->path; }
int zero_nvme_unnamed(const ZeroNvme *n) { return n->unnamed; }

void zero_nvme_stats(const ZeroNvme *n, ZeroNvmeStats *out) {
    ZeroNvme *m = (ZeroNvme *)n;   // the lock is not part of the engine's value
    pthread_mutex_lock(&m->mu);
    *out = m->stats;
    pthread_mutex_unlock(&m->mu);
    pthread_mutex_lock(&m->clock->mu);
    out->busy_s = m->clock->busy_s + (m->clock->in_flight > 0 ? now_s() - m->clock->since : 0.0);
    pthread_mutex_unlock(&m->clock->mu);
}
