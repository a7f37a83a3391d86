// comm_nccl.cu: NCCL set-up, collectives over device memory and the watchdog hooks for the
// CUDA backend (comm_nccl.h). Host code only: it is a .cu file so that the host build
// (zero/*.c, no CUDA) never sees nccl.h.
#include "comm_nccl.h"
#include "a2a_plan.h"
#include "last_error.h"

#include <errno.h>
#include <nccl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TRACK 256            // collectives watched at once (with that many unfinished, a newer one goes unwatched)
#define GROUP_OPS 1024       // NCCL calls per ncclGroupStart/End (NCCL allows 2048; a2a_plan.h)
#define ALLREDUCE_CHUNK 64   // doubles per all-gather in the f64 all-reduce, as in comm_mpi.c
#define POLL_S 0.2           // the watchdog's polling period
#define MAX_STREAM_COMMS 8   // streams with communicators of their own

// A collective's clock starts when the work queued before it on its stream is done (its
// start event), not when it was queued: a collective behind a long backward pass is not
// stuck. Collectives finish in any order across streams; every unfinished one is timed.
typedef struct {
    cudaEvent_t ev;          // recorded on the collective's stream right after it
    cudaEvent_t start;       // recorded on it right before it (note(), then swapped in by track())
    double since;            // when the watchdog first saw its start event done (0: not yet)
    ZeroCollOp op;
    uint64_t bytes;          // sent to all peers together, as the watchdog's message counts
    char what[160];
} Tracked;

// A stream's own communicators, one per group (comm.h's ZeroGroup): [WORLD] split from the
// world, the others split from it with key = rank, so that a member's NCCL rank is its group
// index. A group of one rank has none (its collectives are local copies), a group of every
// rank shares [WORLD], and without consecutive nodes only [WORLD] exists.
typedef struct {
    cudaStream_t s;
    ncclComm_t comm[ZERO_GROUP_KINDS];
    int size[ZERO_GROUP_KINDS];   // the group sizes when the stream opened (a later layout does not apply)
} StreamComms;

struct ZeroNccl {
    ZeroCommDevice hooks;    // first member: comm->dev points here
    ZeroComm *c;
    int device;
    ncclComm_t world, intra, inter;   // NULL at world 1
    StreamComms sc[MAX_STREAM_COMMS];
    int nsc;
    cudaStream_t own;        // the f64 all-reduce's stream (world communicator)
    double *dscratch, *hscratch;      // world * ALLREDUCE_CHUNK doubles: device, pinned host
    pthread_mutex_t mu;      // guards the ring below (the watchdog thread polls it)
    // Held around each NCCL call (NCCL_OK, the splits). The watchdog's abort takes it, waiting
    // ISSUE_WAIT_S at most for a call in progress (one blocked in NCCL is what the abort
    // frees), and keeps it: no call starts on a communicator the abort has freed.
    pthread_mutex_t issue;
    cudaEvent_t staged;      // the next collective's start event (NCCL calls come from one thread)
    Tracked ring[TRACK];
    int head, count;
    char last_what[192];     // the latest collective, for asynchronous-error messages
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void vdie(ZeroComm *c, const char *fmt, va_list ap) __attribute__((noreturn));
static void vdie(ZeroComm *c, const char *fmt, va_list ap) {
    char msg[1024];
    int len = snprintf(msg, sizeof msg, "zero: rank %d: ", c->rank);
    vsnprintf(msg + len, sizeof msg - (size_t)len - 1, fmt, ap);
    fprintf(stderr, "%s\n", msg);   // one write: lines of several ranks do not interleave
    zero_comm_abort(c, 1);
}

static void die(ZeroComm *c, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
static void die(ZeroComm *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vdie(c, fmt, ap);
}

// "<context>: <call> failed: <reason>" for a failed CUDA or NCCL call, then the job ends.
static void call_failed(ZeroComm *c, const char *call, const char *reason, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 4, 5)));
static void call_failed(ZeroComm *c, const char *call, const char *reason, const char *fmt, ...) {
    char ctx[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    die(c, "%s: %s failed: %s", ctx, call, reason);
}

static const char *nccl_reason(ncclResult_t r, ncclComm_t comm, char *buf, size_t cap) {
    const char *last = ncclGetLastError(comm);
    snprintf(buf, cap, "%s%s%s%s", ncclGetErrorString(r), last && *last ? " (" : "", last ? last : "",
             last && *last ? ")" : "");
    return buf;
}

// Both check zero_comm_park_if_ending() after the call: once the watchdog aborts NCCL, a
// stalled wait returns (or fails) with no collective's result, and the job is ending anyway.
#define CUDA_OK(c, call, ...)                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (call);                                                                \
        zero_comm_park_if_ending();                                                             \
        if (e_ != cudaSuccess) call_failed((c), #call, cudaGetErrorString(e_), __VA_ARGS__);    \
    } while (0)
#define NCCL_OK(n, call, ...)                                                                   \
    do {                                                                                        \
        zero_comm_park_if_ending();                                                             \
        pthread_mutex_lock(&(n)->issue);                                                        \
        ncclResult_t r_ = (call);                                                               \
        pthread_mutex_unlock(&(n)->issue);                                                      \
        zero_comm_park_if_ending();                                                             \
        if (r_ != ncclSuccess) {                                                                \
            char b_[512];                                                                       \
            call_failed((n)->c, #call, nccl_reason(r_, (n)->world, b_, sizeof b_), __VA_ARGS__); \
        }                                                                                       \
    } while (0)

// ---------------------------------------------------------------- device selection

// A non-negative int from the environment, or -1.
static int env_index(const char *name) {
    const char *s = getenv(name);
    if (!s || !*s) return -1;
    char *end;
    long v = strtol(s, &end, 10);
    return *end || v < 0 || v > 1 << 20 ? -1 : (int)v;
}

// This rank's index among the processes of its real machine.
static int machine_local_rank(const ZeroComm *c) {
    if (c->launch == ZERO_LAUNCH_ENV && env_index("LOCAL_RANK") >= 0) return env_index("LOCAL_RANK");
    if (c->node_size == 0) return c->local_rank;   // the layout is the real machines
    static const char *names[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "PMI_LOCAL_RANK"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (env_index(names[i]) >= 0) return env_index(names[i]);
    return c->local_rank;
}

int zero_nccl_select_device(ZeroComm *c) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count < 1) {
        fprintf(stderr, "zero: rank %d: no CUDA device for the CUDA backend (%s)\n", c->rank,
                e != cudaSuccess ? cudaGetErrorString(e) : "device count 0");
        return -1;
    }
    int local = machine_local_rank(c), dev = local % count;
    e = cudaSetDevice(dev);
    if (e != cudaSuccess) {
        fprintf(stderr, "zero: rank %d: cudaSetDevice(%d) (local rank %d of %d devices) failed: %s\n", c->rank, dev,
                local, count, cudaGetErrorString(e));
        return -1;
    }
    return dev;
}

// ---------------------------------------------------------------- watchdog hooks

static ZeroNccl *of(ZeroComm *c) { return (ZeroNccl *)(void *)c->dev; }

// Drops finished collectives from the front of the ring; returns the first error, if any.
static cudaError_t pop_finished(ZeroNccl *n) {
    while (n->count > 0) {
        cudaError_t e = zero_event_query(n->ring[n->head].ev);
        if (e == cudaErrorNotReady) return cudaSuccess;
        if (e != cudaSuccess) return e;
        n->head = (n->head + 1) % TRACK;
        n->count--;
    }
    return cudaSuccess;
}

// Makes room in a full ring: drops the finished collectives anywhere in it (pop_finished
// drops them only at its front), keeping the others in order. Slots are swapped, never
// copied, so each keeps events of its own.
static void compact(ZeroNccl *n) {
    int kept = 0;
    for (int i = 0; i < n->count; i++) {
        int from = (n->head + i) % TRACK, to = (n->head + kept) % TRACK;
        if (i > 0 && zero_event_query(n->ring[from].ev) == cudaSuccess) continue;   // the head is unfinished (pop_finished)
        if (to != from) {
            Tracked t = n->ring[to];
            n->ring[to] = n->ring[from];
            n->ring[from] = t;
        }
        kept++;
    }
    n->count = kept;
}

// Starts the clocks of the collectives whose earlier work is done; returns the oldest one
// running longer than timeout_s (NULL: none), or sets *e to a failed query's error.
static Tracked *overdue(ZeroNccl *n, double t, double timeout_s, cudaError_t *e) {
    for (int i = 0; i < n->count; i++) {
        Tracked *h = &n->ring[(n->head + i) % TRACK];
        cudaError_t done = i > 0 ? zero_event_query(h->ev) : cudaErrorNotReady;   // the head is unfinished (pop_finished)
        if (done == cudaSuccess) continue;
        if (done != cudaErrorNotReady) { *e = done; return h; }
        if (h->since == 0) {
            cudaError_t started = zero_event_query(h->start);
            if (started == cudaSuccess) h->since = t;
            else if (started != cudaErrorNotReady) { *e = started; return h; }
        }
        if (h->since > 0 && t - h->since > timeout_s) return h;
    }
    return NULL;
}

// 1 when group g of a stream has a communicator of its own (not [WORLD]'s, not none).
static int owns(const StreamComms *sc, int g) {
    return sc->comm[g] && (g == ZERO_GROUP_WORLD || sc->comm[g] != sc->comm[ZERO_GROUP_WORLD]);
}

// Ends a stream's communicators, the groups before the one they were split from.
static void end_stream_comms(StreamComms *sc, int abort) {
    for (int g = ZERO_GROUP_KINDS - 1; g >= 0; g--)
        if (owns(sc, g)) {
            if (abort) ncclCommAbort(sc->comm[g]);
            else ncclCommDestroy(sc->comm[g]);
        }
    memset(sc->comm, 0, sizeof sc->comm);
}

// 1 after printing the asynchronous error of comm, if it has one. Called with n->mu held.
static int async_failed(ZeroNccl *n, ncclComm_t comm, const char *label) {
    ncclResult_t ae = ncclSuccess;
    if (!comm || ncclCommGetAsyncError(comm, &ae) != ncclSuccess || ae == ncclSuccess || ae == ncclInProgress) return 0;
    char b[512];
    fprintf(stderr, "rank %d: NCCL asynchronous error on the %s communicator: %s; latest collective: %s\n", n->c->rank,
            label, nccl_reason(ae, comm, b, sizeof b), n->last_what);
    return 1;
}

static int poll_hook(ZeroComm *c, double timeout_s) {
    ZeroNccl *n = of(c);
    pthread_mutex_lock(&n->mu);
    int failed = async_failed(n, n->world, "world") || async_failed(n, n->intra, "intra-node") ||
                 async_failed(n, n->inter, "inter-node");
    for (int i = 0; i < n->nsc && !failed; i++)
        for (int g = 0; g < ZERO_GROUP_KINDS && !failed; g++) {
            if (!owns(&n->sc[i], g)) continue;
            char label[64];
            snprintf(label, sizeof label, "stream %d's %s-group", i, zero_group_name((ZeroGroup)g));
            failed = async_failed(n, n->sc[i].comm[g], label);
        }
    if (failed) {
        pthread_mutex_unlock(&n->mu);
        return 1;
    }
    cudaSetDevice(n->device);   // this thread's current device, for the event queries
    double t = now_s();
    cudaError_t e = pop_finished(n);
    Tracked *h = e == cudaSuccess ? overdue(n, t, timeout_s, &e) : &n->ring[n->head];
    int fire = 0;
    if (e != cudaSuccess) {
        fprintf(stderr, "rank %d: collective %s (%s) failed on the device: %s\n", c->rank, zero_coll_name(h->op),
                h->what, cudaGetErrorString(e));
        fire = 1;
    } else if (h) {
        // the same words as the host-side watchdog, so one pattern finds either
        fprintf(stderr, "rank %d: collective %s on %llu bytes timed out after %.1f s (%s; on the GPU)\n", c->rank,
                zero_coll_name(h->op), (unsigned long long)h->bytes, t - h->since, h->what);
        fire = 1;
    }
    pthread_mutex_unlock(&n->mu);
    return fire;
}

static void *abort_guard(void *arg) {
    ZeroComm *c = (ZeroComm *)arg;
    sleep(10);
    fprintf(stderr, "rank %d: ncclCommAbort did not return within 10 s; exiting without it\n", c->rank);
    _exit(3);
}

#define ISSUE_WAIT_S 2

// From the watchdog thread, which ends the process after it. Between the trainer's NCCL
// calls it aborts holding `issue` (never released); inside one (stalled in NCCL) it aborts
// after ISSUE_WAIT_S, and that call returns into NCCL_OK's park. n->mu keeps a stream's
// communicators from being forgotten (and destroyed) while they are aborted.
static void abort_hook(ZeroComm *c) {
    ZeroNccl *n = of(c);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);   // pthread_mutex_timedlock's clock
    until.tv_sec += ISSUE_WAIT_S;
    (void)pthread_mutex_timedlock(&n->issue, &until);
    pthread_t t;   // an abort stuck on a broken device must not keep the process alive
    if (pthread_create(&t, NULL, abort_guard, c) == 0) pthread_detach(t);
    pthread_mutex_lock(&n->mu);
    for (int i = 0; i < n->nsc; i++) end_stream_comms(&n->sc[i], 1);
    n->nsc = 0;
    if (n->inter) ncclCommAbort(n->inter);
    if (n->intra) ncclCommAbort(n->intra);
    if (n->world) ncclCommAbort(n->world);
    n->inter = n->intra = n->world = NULL;
    pthread_mutex_unlock(&n->mu);
}

// Records an event after the collective just enqueued on s (in group g), for the watchdog.
static void track(ZeroNccl *n, cudaStream_t s, ZeroGroup g, ZeroCollOp op, uint64_t bytes, const char *what) {
    pthread_mutex_lock(&n->mu);
    cudaError_t e = pop_finished(n);
    if (e == cudaSuccess && n->count == TRACK) compact(n);
    if (e == cudaSuccess && n->count == TRACK) {   // TRACK unfinished: they stay timed, this one goes unwatched
        pthread_mutex_unlock(&n->mu);
        return;
    }
    // The slot past the ring's end: the watchdog reads only [head, head + count), and its
    // pop_finished moves head and count together, so the slot stays this thread's until
    // count grows over it. Its event is recorded without the lock (note()).
    Tracked *k = &n->ring[(n->head + n->count) % TRACK];
    pthread_mutex_unlock(&n->mu);
    if (e == cudaSuccess) e = cudaEventRecord(k->ev, s);
    pthread_mutex_lock(&n->mu);
    if (e == cudaSuccess) {
        cudaEvent_t used = k->start;   // note() recorded the start: it becomes this slot's
        k->start = n->staged;
        n->staged = used;
        k->since = 0;
        k->op = op;
        k->bytes = bytes;
        if (g == ZERO_GROUP_WORLD) snprintf(k->what, sizeof k->what, "%s", what ? what : "");
        else snprintf(k->what, sizeof k->what, "%s in the %s group", what ? what : "", zero_group_name(g));
        n->count++;
    }
    pthread_mutex_unlock(&n->mu);
    if (e != cudaSuccess)
        call_failed(n->c, "cudaEventRecord/cudaEventQuery", cudaGetErrorString(e), "%s of %s (%llu bytes)",
                    zero_coll_name(op), what, (unsigned long long)bytes);
}

// ---------------------------------------------------------------- set-up

// Ends the process when NCCL's set-up hangs (a rank that never arrives would otherwise
// keep the others waiting inside ncclCommInitRank forever).
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    double timeout_s;
    const char *stage;
    ZeroComm *c;
} InitGuard;

static void *init_guard_main(void *arg) {
    InitGuard *g = (InitGuard *)arg;
    pthread_mutex_lock(&g->mu);
    double deadline = now_s() + g->timeout_s;
    while (!g->done) {
        double t = now_s();
        if (t >= deadline) {
            fprintf(stderr, "zero: rank %d: NCCL set-up (%s) did not finish within %.0f s: are all WORLD_SIZE=%d ranks "
                    "running and reachable? (NCCL_DEBUG=INFO says more)\n", g->c->rank, g->stage, g->timeout_s, g->c->world);
            fflush(stderr);
            _exit(3);
        }
        struct timespec ts;
        double w = deadline;
        ts.tv_sec = (time_t)w;
        ts.tv_nsec = (long)((w - (double)ts.tv_sec) * 1e9);
        pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

static void set_stage(InitGuard *g, const char *stage) {
    pthread_mutex_lock(&g->mu);
    g->stage = stage;
    pthread_mutex_unlock(&g->mu);
}

static void release(ZeroNccl *n) {
    for (int i = 0; i < n->nsc; i++) end_stream_comms(&n->sc[i], 0);
    if (n->inter) ncclCommDestroy(n->inter);
    if (n->intra) ncclCommDestroy(n->intra);
    if (n->world) ncclCommDestroy(n->world);
    for (int i = 0; i < TRACK; i++) {
        if (n->ring[i].ev) cudaEventDestroy(n->ring[i].ev);
        if (n->ring[i].start) cudaEventDestroy(n->ring[i].start);
    }
    if (n->staged) cudaEventDestroy(n->staged);
    if (n->own) cudaStreamDestroy(n->own);
    if (n->dscratch) cudaFree(n->dscratch);
    if (n->hscratch) cudaFreeHost(n->hscratch);
    pthread_mutex_destroy(&n->mu);
    pthread_mutex_destroy(&n->issue);
    free(n);
}

// Without MPI each rank places itself on its machine from LOCAL_WORLD_SIZE alone: ranks
// that disagree on it would split into nodes of different sizes, whose collectives mismatch.
// Every rank all-gathers every rank's figure, so all refuse together. 0, or -1 after saying
// which ranks differ.
static int same_machines(ZeroNccl *n) {
    ZeroComm *c = n->c;
    char b[512];
    n->hscratch[c->rank] = (double)c->local_size;
    cudaError_t e = cudaMemcpyAsync(n->dscratch + c->rank, n->hscratch + c->rank, sizeof(double), cudaMemcpyHostToDevice, n->own);
    ncclResult_t r = ncclSuccess;
    if (e == cudaSuccess) r = ncclAllGather(n->dscratch + c->rank, n->dscratch, 1, ncclDouble, n->world, n->own);
    if (e == cudaSuccess && r == ncclSuccess)
        e = cudaMemcpyAsync(n->hscratch, n->dscratch, (size_t)c->world * sizeof(double), cudaMemcpyDeviceToHost, n->own);
    if (e == cudaSuccess && r == ncclSuccess) e = cudaStreamSynchronize(n->own);
    if (e != cudaSuccess || r != ncclSuccess) {
        fprintf(stderr, "zero: rank %d: the all-gather of every rank's LOCAL_WORLD_SIZE failed: %s\n", c->rank,
                e != cudaSuccess ? cudaGetErrorString(e) : nccl_reason(r, n->world, b, sizeof b));
        return -1;
    }
    for (int q = 0; q < c->world; q++)
        if (n->hscratch[q] != (double)c->local_size) {
            fprintf(stderr, "zero: rank %d: the ranks disagree on how many ranks each machine runs: rank %d has "
                    "LOCAL_WORLD_SIZE %.0f, rank %d has %d; give every rank the same LOCAL_WORLD_SIZE (machines of "
                    "equal size, ranks numbered machine by machine)\n", c->rank, q, n->hscratch[q], c->rank,
                    c->local_size);
            return -1;
        }
    return 0;
}

// Joins the world communicator and splits the node ones; 0 or -1 after printing why.
static int join(ZeroNccl *n) {
    ZeroComm *c = n->c;
    InitGuard g;
    memset(&g, 0, sizeof g);
    pthread_mutex_init(&g.mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g.cv, &ca);
    pthread_condattr_destroy(&ca);
    g.timeout_s = zero_bootstrap_timeout() + 120.0;   // beyond the id exchange's own deadline
    g.stage = "sharing the ncclUniqueId";
    g.c = c;
    pthread_t gt;
    int have_guard = pthread_create(&gt, NULL, init_guard_main, &g) == 0;

    int rc = 0;
    char b[512];
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclResult_t r = c->rank == 0 ? ncclGetUniqueId(&id) : ncclSuccess;
    if (r != ncclSuccess) {
        fprintf(stderr, "zero: rank 0: ncclGetUniqueId failed: %s\n", nccl_reason(r, NULL, b, sizeof b));
        rc = -1;
    }
    if (rc == 0 && zero_comm_share_blob(c, &id, sizeof id, "the ncclUniqueId") != 0) rc = -1;
    const char *file = getenv("ZERO_BOOTSTRAP_FILE"), *tcp = getenv("ZERO_BOOTSTRAP_TCP");
    int by_file = c->launch == ZERO_LAUNCH_ENV && !(tcp && *tcp) && file && *file;
    if (rc == 0) {
        set_stage(&g, "ncclCommInitRank");
        r = ncclCommInitRank(&n->world, c->world, id, c->rank);
        if (r != ncclSuccess) {
            fprintf(stderr, "zero: rank %d: ncclCommInitRank (rank %d of %d, device %d) failed: %s%s%s\n", c->rank, c->rank,
                    c->world, n->device, nccl_reason(r, NULL, b, sizeof b),
                    by_file ? "; ranks take only a ZERO_BOOTSTRAP_FILE sealed under this job's secret, so an id from an "
                              "earlier job can reach them only if it had the same ZERO_BOOTSTRAP_SECRET: draw a "
                              "fresh secret per job" : "",
                    r == ncclInvalidUsage ? "; several ranks on one GPU need their own NCCL_HOSTID each and "
                                            "NCCL_SOCKET_IFNAME=lo (NCCL < 2.30), or NCCL_MULTI_RANK_GPU_ENABLE=1" : "");
            n->world = NULL;
            rc = -1;
        }
    }
    // every rank holds the id once the world communicator exists: a later run must not read it
    if (rc == 0 && by_file && c->rank == 0 && unlink(file) != 0 && errno != ENOENT)
        fprintf(stderr, "zero: rank 0: warning: could not remove ZERO_BOOTSTRAP_FILE %s: %s\n", file, strerror(errno));
    if (rc == 0 && !c->mpi) {
        set_stage(&g, "comparing the ranks' LOCAL_WORLD_SIZE");
        rc = same_machines(n);
    }
    if (rc == 0) {
        set_stage(&g, "ncclCommSplit");
        r = ncclCommSplit(n->world, c->node, c->rank, &n->intra, NULL);
        if (r == ncclSuccess) r = ncclCommSplit(n->world, c->local_rank, c->rank, &n->inter, NULL);
        if (r != ncclSuccess) {
            fprintf(stderr, "zero: rank %d: ncclCommSplit into node %d of %d (local rank %d of %d) failed: %s\n", c->rank,
                    c->node, c->num_nodes, c->local_rank, c->local_size, nccl_reason(r, n->world, b, sizeof b));
            rc = -1;
        }
    }
    if (have_guard) {
        pthread_mutex_lock(&g.mu);
        g.done = 1;
        pthread_cond_signal(&g.cv);
        pthread_mutex_unlock(&g.mu);
        pthread_join(gt, NULL);
    }
    pthread_cond_destroy(&g.cv);
    pthread_mutex_destroy(&g.mu);
    return rc;
}

ZeroNccl *zero_nccl_init(ZeroComm *c, int device) {
    if (c->dev) {
        fprintf(stderr, "zero: rank %d: the communicator already has device collectives attached\n", c->rank);
        return NULL;
    }
    ZeroNccl *n = (ZeroNccl *)calloc(1, sizeof *n);
    if (!n) {
        fprintf(stderr, "zero: rank %d: out of host memory for the NCCL state\n", c->rank);
        return NULL;
    }
    n->c = c;
    n->device = device;
    pthread_mutex_init(&n->mu, NULL);
    pthread_mutex_init(&n->issue, NULL);
    snprintf(n->last_what, sizeof n->last_what, "(none yet)");
    size_t scratch = (size_t)c->world * ALLREDUCE_CHUNK * sizeof(double);
    cudaError_t e = cudaStreamCreateWithFlags(&n->own, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaMalloc((void **)&n->dscratch, scratch);
    if (e == cudaSuccess) e = cudaMallocHost((void **)&n->hscratch, scratch);
    for (int i = 0; i < TRACK && e == cudaSuccess; i++) {
        e = cudaEventCreateWithFlags(&n->ring[i].ev, cudaEventDisableTiming);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&n->ring[i].start, cudaEventDisableTiming);
    }
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&n->staged, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        fprintf(stderr, "zero: rank %d: allocating the NCCL scratch (%zu bytes), stream and events on device %d failed: %s\n",
                c->rank, scratch, device, cudaGetErrorString(e));
        release(n);
        return NULL;
    }
    if (c->world > 1 && join(n) != 0) {
        release(n);
        return NULL;
    }
    n->hooks.poll_s = POLL_S;
    n->hooks.poll = poll_hook;
    n->hooks.abort = abort_hook;
    zero_comm_attach_device(c, &n->hooks);
    return n;
}

void zero_nccl_free(ZeroNccl *n) {
    if (!n) return;
    ZeroComm *c = n->c;
    if (c->dev == &n->hooks) zero_comm_attach_device(c, NULL);   // the watchdog lets go first
    // destroying a communicator finalizes it, which waits for its queued operations and so
    // for the peers: one that died would hold this rank here, so the watchdog times it
    zero_watch_begin(c, "releasing the NCCL communicators");
    CUDA_OK(c, cudaStreamSynchronize(n->own), "releasing the NCCL communicators");
    release(n);
    zero_coll_end(c);
}

// ---------------------------------------------------------------- collectives

int zero_nccl_stream_open(ZeroNccl *n, cudaStream_t s) {
    ZeroComm *c = n->c;
    if (!n->world) return 0;   // a world of one: no NCCL
    if (n->nsc == MAX_STREAM_COMMS) {
        fprintf(stderr, "zero: rank %d: more than %d streams with collectives\n", c->rank, MAX_STREAM_COMMS);
        return -1;
    }
    StreamComms sc;
    memset(&sc, 0, sizeof sc);
    sc.s = s;
    char b[512];
    zero_comm_park_if_ending();
    pthread_mutex_lock(&n->issue);
    ncclResult_t r = ncclCommSplit(n->world, 0, c->rank, &sc.comm[ZERO_GROUP_WORLD], NULL);
    pthread_mutex_unlock(&n->issue);
    zero_comm_park_if_ending();   // an abort during the split freed n->world: nothing more of it
    if (r != ncclSuccess) {
        fprintf(stderr, "zero: rank %d: ncclCommSplit for a stream's own communicator failed: %s\n", c->rank,
                nccl_reason(r, n->world, b, sizeof b));
        return -1;
    }
    sc.size[ZERO_GROUP_WORLD] = c->world;
    // Every rank takes the same branches: group sizes and `consecutive` are the same on all.
    const int colors[ZERO_GROUP_KINDS] = {0, c->node, c->local_rank, c->rank / c->hpz_size};
    for (int g = 1; g < ZERO_GROUP_KINDS; g++) {
        sc.size[g] = zero_group_size(c, (ZeroGroup)g);
        if (!c->consecutive || sc.size[g] == 1) continue;   // zero_init refuses the hierarchical switches then
        if (sc.size[g] == c->world) {
            sc.comm[g] = sc.comm[ZERO_GROUP_WORLD];
            continue;
        }
        pthread_mutex_lock(&n->issue);
        r = ncclCommSplit(sc.comm[ZERO_GROUP_WORLD], colors[g], c->rank, &sc.comm[g], NULL);
        pthread_mutex_unlock(&n->issue);
        zero_comm_park_if_ending();
        if (r != ncclSuccess) {
            fprintf(stderr, "zero: rank %d: ncclCommSplit of a stream's communicator into %s groups (%d ranks each; "
                    "this rank's group %d, index %d) failed: %s\n", c->rank, zero_group_name((ZeroGroup)g), sc.size[g],
                    colors[g], zero_group_index(c, (ZeroGroup)g), nccl_reason(r, sc.comm[ZERO_GROUP_WORLD], b, sizeof b));
            sc.comm[g] = NULL;
            end_stream_comms(&sc, 0);
            return -1;
        }
    }
    pthread_mutex_lock(&n->mu);   // the watchdog polls the list
    n->sc[n->nsc++] = sc;
    pthread_mutex_unlock(&n->mu);
    return 0;
}

void zero_nccl_forget_stream(ZeroNccl *n, cudaStream_t s) {
    if (!n) return;
    pthread_mutex_lock(&n->mu);
    for (int i = 0; i < n->nsc; i++)
        if (n->sc[i].s == s) {
            StreamComms gone = n->sc[i];
            n->sc[i] = n->sc[--n->nsc];
            pthread_mutex_unlock(&n->mu);
            zero_comm_park_if_ending();
            pthread_mutex_lock(&n->issue);   // an NCCL call like the others (NCCL_OK)
            end_stream_comms(&gone, 0);
            pthread_mutex_unlock(&n->issue);
            return;
        }
    pthread_mutex_unlock(&n->mu);
}

// The communicator of group g (of more than one rank) for stream s: the stream's own; for
// the world group of a stream without any, the world's. Ends the job when there is none.
static ncclComm_t comm_of(ZeroNccl *n, cudaStream_t s, ZeroGroup g, const char *op, const char *what) {
    ZeroComm *c = n->c;
    const StreamComms *sc = NULL;
    for (int i = 0; i < n->nsc && !sc; i++)
        if (n->sc[i].s == s) sc = &n->sc[i];
    if (g == ZERO_GROUP_WORLD) return sc ? sc->comm[g] : n->world;
    const char *gn = zero_group_name(g);
    if (!sc)
        die(c, "%s of %s in the %s group: the stream has no group communicators (only streams made by stream_create "
            "have them)", op, what, gn);
    if (sc->size[g] != zero_group_size(c, g))
        die(c, "%s of %s in the %s group: the layout changed after the stream opened (groups of %d ranks then, %d now); "
            "set the layout before creating streams", op, what, gn, sc->size[g], zero_group_size(c, g));
    if (!sc->comm[g])
        die(c, "%s of %s in the %s group: no such communicator (the ranks of a node are not consecutive)", op, what, gn);
    return sc->comm[g];
}

// Before a collective's calls on s: the note the watchdog prints, and its start event.
// No event record under n->mu (queries, which never block, are made under it): a record
// blocks while the device's launch queue is full (a stalled collective fills it), and the
// watchdog must still get the lock to see the stall.
static void note(ZeroNccl *n, cudaStream_t s, const char *op, ZeroGroup g, const char *what) {
    pthread_mutex_lock(&n->mu);   // the watchdog may be printing it
    snprintf(n->last_what, sizeof n->last_what, "%s of %s in the %s group", op, what ? what : "", zero_group_name(g));
    pthread_mutex_unlock(&n->mu);
    cudaError_t e = cudaEventRecord(n->staged, s);   // staged is this thread's alone (NCCL calls come from one)
    if (e != cudaSuccess) call_failed(n->c, "cudaEventRecord", cudaGetErrorString(e), "the start of %s", what ? what : "");
}

// What every collective of parts does first: the bytes it sends each peer (*per_peer), the
// note the watchdog prints, the group's communicator (NULL in a group of one) and the
// byte counters' bracket (zero_coll_end after the calls).
static ncclComm_t begin_parts(ZeroNccl *n, ZeroGroup g, const ZeroCollPart *parts, int nparts, size_t es, ZeroCollOp op,
                              cudaStream_t s, const char *what, uint64_t *per_peer) {
    const char *name = zero_coll_name(op);
    *per_peer = 0;
    for (int i = 0; i < nparts; i++) *per_peer += parts[i].count * es;
    note(n, s, name, g, what);
    ncclComm_t comm = zero_group_size(n->c, g) > 1 ? comm_of(n, s, g, name, what) : NULL;
    zero_coll_begin_group(n->c, g, op, *per_peer, what);
    return comm;
}

// A group of one: each part's count elements go from send to recv (this rank's slot), parts
// adjacent on both sides in one copy (a step's tensors lie side by side: one copy, not one each).
static void copy_alone(ZeroNccl *n, const ZeroCollPart *parts, int nparts, size_t es, cudaStream_t s, const char *op,
                       const char *what, const char *gn) {
    for (int i = 0; i < nparts;) {
        const char *src = (const char *)parts[i].send;
        char *dst = (char *)parts[i].recv;
        size_t bytes = parts[i].count * es;
        int j = i + 1;
        while (j < nparts && (const char *)parts[j].send == src + bytes && (char *)parts[j].recv == dst + bytes)
            bytes += parts[j++].count * es;
        if (bytes && src != dst)
            CUDA_OK(n->c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s), "%s of %s in the %s group (parts %d..%d, %zu bytes)",
                    op, what, gn, i, j - 1, bytes);
        i = j;
    }
}

void zero_nccl_all_gather(ZeroNccl *n, ZeroGroup g, const ZeroCollPart *parts, int nparts, ZeroDType dt, cudaStream_t s,
                          const char *what) {
    ZeroComm *c = n->c;
    size_t es = zero_dtype_size(dt);
    uint64_t per_peer;
    const int size = zero_group_size(c, g);
    const char *gn = zero_group_name(g);
    ncclComm_t comm = begin_parts(n, g, parts, nparts, es, ZERO_COLL_ALL_GATHER, s, what, &per_peer);
    int in_group = 0;
    if (size == 1) copy_alone(n, parts, nparts, es, s, "all_gather", what, gn);   // index 0: the slot is recv
    for (int i = 0; i < nparts && size > 1; i++) {
        const ZeroCollPart *p = &parts[i];
        size_t cb = p->count * es;
        if (cb == 0) continue;
        if (in_group == 0) NCCL_OK(n, ncclGroupStart(), "all_gather of %s in the %s group", what, gn);
        // bytes: no arithmetic happens, and bf16 needs no NCCL type of its own
        NCCL_OK(n, ncclAllGather(p->send, p->recv, cb, ncclUint8, comm, s),
                "all_gather of %s in the %s group (part %d of %d, %zu bytes per rank, %d ranks)", what, gn, i, nparts, cb,
                size);
        if (++in_group == GROUP_OPS) {
            NCCL_OK(n, ncclGroupEnd(), "all_gather of %s in the %s group (%d parts, %llu bytes per rank)", what, gn, nparts,
                    (unsigned long long)per_peer);
            in_group = 0;
        }
    }
    if (in_group)
        NCCL_OK(n, ncclGroupEnd(), "all_gather of %s in the %s group (%d parts, %llu bytes per rank)", what, gn, nparts,
                (unsigned long long)per_peer);
    zero_coll_end(c);
    if (size > 1 && per_peer > 0) track(n, s, g, ZERO_COLL_ALL_GATHER, per_peer * (uint64_t)(size - 1), what);
}

// One all-to-all's NCCL calls, issued in a2a_plan.h's order and groups. Peers are NCCL
// ranks of the group's communicator, i.e. group indices.
typedef struct {
    ZeroNccl *n;
    ncclComm_t comm;
    cudaStream_t s;
    ZeroGroup g;
    const ZeroCollPart *parts;
    int nparts;
    size_t es;
    const char *what;
} A2ACalls;

static void a2a_call(void *arg, ZeroA2AOp op, int part, int to, int from) {
    A2ACalls *a = (A2ACalls *)arg;
    ZeroNccl *n = a->n;
    const char *gn = zero_group_name(a->g);
    if (op == ZERO_A2A_GROUP_START) {
        NCCL_OK(n, ncclGroupStart(), "all_to_all of %s in the %s group (part %d of %d)", a->what, gn, part, a->nparts);
    } else if (op == ZERO_A2A_GROUP_END) {
        NCCL_OK(n, ncclGroupEnd(), "all_to_all of %s in the %s group (group ending at part %d of %d)", a->what, gn, part,
                a->nparts);
    } else {
        const ZeroCollPart *p = &a->parts[part];
        size_t cb = p->count * a->es;
        NCCL_OK(n, ncclSend((const char *)p->send + (size_t)to * cb, cb, ncclUint8, to, a->comm, a->s),
                "all_to_all of %s in the %s group (part %d, %zu bytes to member %d, rank %d)", a->what, gn, part, cb, to,
                zero_group_member(n->c, a->g, to));
        NCCL_OK(n, ncclRecv((char *)p->recv + (size_t)from * cb, cb, ncclUint8, from, a->comm, a->s),
                "all_to_all of %s in the %s group (part %d, %zu bytes from member %d, rank %d)", a->what, gn, part, cb,
                from, zero_group_member(n->c, a->g, from));
    }
}

void zero_nccl_all_to_all(ZeroNccl *n, ZeroGroup g, const ZeroCollPart *parts, int nparts, ZeroDType dt, cudaStream_t s,
                          const char *what) {
    ZeroComm *c = n->c;
    size_t es = zero_dtype_size(dt);
    uint64_t per_peer;
    const int size = zero_group_size(c, g), index = zero_group_index(c, g);
    ncclComm_t comm = begin_parts(n, g, parts, nparts, es, ZERO_COLL_ALL_TO_ALL, s, what, &per_peer);
    // this rank's own slice is a local copy
    for (int i = 0; i < nparts; i++) {
        size_t cb = parts[i].count * es, off = (size_t)index * cb;
        if (cb && (const char *)parts[i].send + off != (char *)parts[i].recv + off)
            CUDA_OK(c, cudaMemcpyAsync((char *)parts[i].recv + off, (const char *)parts[i].send + off, cb, cudaMemcpyDefault, s),
                    "all_to_all of %s in the %s group (own slice of part %d, %zu bytes)", what, zero_group_name(g), i, cb);
    }
    A2ACalls a = {n, comm, s, g, parts, nparts, es, what};
    zero_a2a_plan(size, index, parts, nparts, GROUP_OPS, a2a_call, &a);
    zero_coll_end(c);
    if (size > 1 && per_peer > 0) track(n, s, g, ZERO_COLL_ALL_TO_ALL, per_peer * (uint64_t)(size - 1), what);
}

void zero_nccl_reduce_scatter(ZeroNccl *n, ZeroGroup g, const ZeroCollPart *parts, int nparts, ZeroDType dt,
                              cudaStream_t s, const char *what) {
    ZeroComm *c = n->c;
    if (dt == ZERO_U8) die(c, "reduce_scatter of %s: raw bytes cannot be summed", what);
    size_t es = zero_dtype_size(dt);
    uint64_t per_peer;
    const int size = zero_group_size(c, g);
    const char *gn = zero_group_name(g);
    ncclComm_t comm = begin_parts(n, g, parts, nparts, es, ZERO_COLL_REDUCE_SCATTER, s, what, &per_peer);
    int in_group = 0;
    if (size == 1) copy_alone(n, parts, nparts, es, s, "reduce_scatter", what, gn);
    for (int i = 0; i < nparts && size > 1; i++) {
        const ZeroCollPart *p = &parts[i];
        size_t cb = p->count * es;
        if (cb == 0) continue;
        if (in_group == 0) NCCL_OK(n, ncclGroupStart(), "reduce_scatter of %s in the %s group", what, gn);
        NCCL_OK(n, ncclReduceScatter(p->send, p->recv, p->count, dt == ZERO_BF16 ? ncclBfloat16 : ncclFloat32, ncclSum, comm, s),
                "reduce_scatter of %s in the %s group (part %d of %d, %zu bytes per slice, %d ranks)", what, gn, i, nparts,
                cb, size);
        if (++in_group == GROUP_OPS) {
            NCCL_OK(n, ncclGroupEnd(), "reduce_scatter of %s in the %s group (%d parts)", what, gn, nparts);
            in_group = 0;
        }
    }
    if (in_group) NCCL_OK(n, ncclGroupEnd(), "reduce_scatter of %s in the %s group (%d parts)", what, gn, nparts);
    zero_coll_end(c);
    if (size > 1 && per_peer > 0) track(n, s, g, ZERO_COLL_REDUCE_SCATTER, per_peer * (uint64_t)(size - 1), what);
}

void zero_nccl_allreduce_sum_f64(ZeroNccl *n, double *values, int count, const char *what) {
    ZeroComm *c = n->c;
    if (c->world == 1 || count <= 0) return;
    cudaStream_t s = n->own;
    for (int base = 0; base < count; base += ALLREDUCE_CHUNK) {
        int k = count - base < ALLREDUCE_CHUNK ? count - base : ALLREDUCE_CHUNK;
        size_t kb = (size_t)k * sizeof(double);
        double *hmine = n->hscratch + (size_t)c->rank * k, *dmine = n->dscratch + (size_t)c->rank * k;
        memcpy(hmine, values + base, kb);
        CUDA_OK(c, cudaMemcpyAsync(dmine, hmine, kb, cudaMemcpyHostToDevice, s), "all-reduce of %s (%d doubles)", what, k);
        note(n, s, "all_reduce", ZERO_GROUP_WORLD, what);
        zero_coll_begin(c, ZERO_COLL_ALL_REDUCE, kb, what);
        NCCL_OK(n, ncclAllGather(dmine, n->dscratch, (size_t)k, ncclDouble, n->world, s),
                "all-reduce of %s (%d doubles per rank, %d ranks)", what, k, c->world);
        zero_coll_end(c);
        track(n, s, ZERO_GROUP_WORLD, ZERO_COLL_ALL_REDUCE, kb * (uint64_t)(c->world - 1), what);
        CUDA_OK(c, cudaMemcpyAsync(n->hscratch, n->dscratch, kb * (size_t)c->world, cudaMemcpyDeviceToHost, s),
                "all-reduce of %s (%d doubles)", what, k);
        // blocking by contract; the watchdog keeps polling the all-gather meanwhile
        CUDA_OK(c, cudaStreamSynchronize(s), "all-reduce of %s (%d doubles per rank, %d ranks)", what, k, c->world);
        for (int i = 0; i < k; i++) {   // rank order: the same bits on every rank
            double sum = n->hscratch[i];
            for (int q = 1; q < c->world; q++) sum += n->hscratch[(size_t)q * k + i];
            values[base + i] = sum;
        }
    }
}

void zero_nccl_gather_f64(ZeroNccl *n, const double *values, int count, double *all, const char *what) {
    ZeroComm *c = n->c;
    if (count <= 0) return;
    if (c->world == 1) {
        if (all != values) memmove(all, values, (size_t)count * sizeof(double));
        return;
    }
    cudaStream_t s = n->own;
    for (int base = 0; base < count; base += ALLREDUCE_CHUNK) {
        int k = count - base < ALLREDUCE_CHUNK ? count - base : ALLREDUCE_CHUNK;
        size_t kb = (size_t)k * sizeof(double);
        note(n, s, "gather", ZERO_GROUP_WORLD, what);
        zero_coll_begin_to_root(c, ZERO_COLL_GATHER, kb, what);
        if (c->rank == 0) {
            // rank q's chunk lands in slot q of the device scratch; groups stay within NCCL's limit
            for (int q0 = 1; q0 < c->world; q0 += GROUP_OPS) {
                int q1 = c->world - q0 < GROUP_OPS ? c->world : q0 + GROUP_OPS;
                NCCL_OK(n, ncclGroupStart(), "gather of %s", what);
                for (int q = q0; q < q1; q++)
                    NCCL_OK(n, ncclRecv(n->dscratch + (size_t)q * k, (size_t)k, ncclDouble, q, n->world, s),
                            "gather of %s (%d doubles from rank %d)", what, k, q);
                NCCL_OK(n, ncclGroupEnd(), "gather of %s (ranks %d..%d)", what, q0, q1 - 1);
            }
        } else {
            memcpy(n->hscratch, values + base, kb);
            CUDA_OK(c, cudaMemcpyAsync(n->dscratch, n->hscratch, kb, cudaMemcpyHostToDevice, s), "gather of %s (%d doubles)",
                    what, k);
            NCCL_OK(n, ncclSend(n->dscratch, (size_t)k, ncclDouble, 0, n->world, s), "gather of %s (%d doubles to rank 0)",
                    what, k);
        }
        zero_coll_end(c);
        track(n, s, ZERO_GROUP_WORLD, ZERO_COLL_GATHER, c->rank == 0 ? 0 : kb, what);
        if (c->rank == 0)   // slots 1.. (rank 0's own slot of the device scratch is never written)
            CUDA_OK(c, cudaMemcpyAsync(n->hscratch + k, n->dscratch + k, kb * (size_t)(c->world - 1), cudaMemcpyDeviceToHost, s),
                    "gather of %s (%d doubles)", what, k);
        // blocking by contract (the host buffers are reused); the watchdog polls meanwhile
        CUDA_OK(c, cudaStreamSynchronize(s), "gather of %s (%d doubles per rank, %d ranks)", what, k, c->world);
        if (c->rank != 0) continue;
        for (int q = 0; q < c->world; q++)
            memcpy(all + (size_t)q * count + base, q == 0 ? values + base : n->hscratch + (size_t)q * k, kb);
    }
}
