// watchdog.c: collective bracketing: byte accounting (intra- vs inter-node) and a timer
// thread that ends the job when one collective stays in flight longer than timeout_s.
// A hung collective otherwise hangs every rank silently until the scheduler kills the job.
// Collectives may run on several threads at once (the host backend's streams): each
// thread has its own slot, and the deadline is that of the oldest collective in flight.
// With a device library attached (comm->dev: NCCL, whose collectives return before they
// run), the thread also polls it every poll_s seconds, and aborts it before ending the job.
// It calls nothing of the communicator: it ends the job through comm->end_job.
#include "../comm.h"
#include "../trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WATCH_SLOTS 16   // threads with a collective in flight at once

typedef struct {
    pthread_t owner;
    int depth;             // collectives in flight on the owner thread (nesting); 0: slot free
    double start;          // CLOCK_MONOTONIC seconds when the outermost one began
    ZeroCollOp op;
    uint64_t bytes;
    char what[128];
} WatchSlot;

struct ZeroWatchdog {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;     // signalled when a collective's deadline comes before `wake`, or to stop
    ZeroComm *comm;
    double timeout_s;
    double wake;           // when the thread wakes next (now_s() time); -1: only when signalled
    int stop;
    WatchSlot slot[WATCH_SLOTS];
};

const char *zero_coll_name(ZeroCollOp op) {
    switch (op) {
    case ZERO_COLL_ALL_GATHER: return "all_gather";
    case ZERO_COLL_ALL_TO_ALL: return "all_to_all";
    case ZERO_COLL_ALL_REDUCE: return "all_reduce";
    case ZERO_COLL_BROADCAST: return "broadcast";
    case ZERO_COLL_GATHER: return "gather";
    case ZERO_COLL_REDUCE_SCATTER: return "reduce_scatter";
    default: return "?";
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static struct timespec abs_time(double t) {
    struct timespec ts;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    return ts;
}

// Set, for good, when the watchdog starts ending the job. Aborting the device library ends
// the stalled collective, so waits on it return before the exit below: what they return is
// not a collective's result, and a thread that went on would compute, print or save from it.
static int g_ending;

int zero_comm_ending(void) { return __atomic_load_n(&g_ending, __ATOMIC_ACQUIRE); }

void zero_comm_park_if_ending(void) {
    if (!zero_comm_ending()) return;
    for (;;) pause();   // the watchdog's exit (or MPI_Abort) ends the process
}

// Ends the job from the watchdog thread, with w->mu held to the end: a teardown that detaches
// the device library (zero_comm_attach_device, under w->mu) then waits, so the abort below
// never runs on communicators being destroyed. Other threads' collectives block in
// zero_coll_begin/end meanwhile, which the exit ends.
static void watchdog_end_job(ZeroComm *c) __attribute__((noreturn));
static void watchdog_end_job(ZeroComm *c) {
    __atomic_store_n(&g_ending, 1, __ATOMIC_RELEASE);   // before the abort releases any wait
    if (c->dev && c->dev->abort) c->dev->abort(c);   // frees peers stuck in the device library
    zero_trace_write();   // with --trace: the timeline shows who waited on what
    fflush(stdout);
    fflush(stderr);
    if (c->end_job) c->end_job(c, 3);   // the communicator's way (MPI_Abort), when it has one
    _exit(3);  // else MPI may not be called from this thread: the launcher reaps the others
}

static void *watch(void *arg) {
    struct ZeroWatchdog *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        ZeroCommDevice *dev = w->comm->dev;   // stable while we hold mu (zero_comm_attach_device)
        if (dev && dev->poll(w->comm, w->timeout_s)) {   // it printed what failed
            fflush(stderr);
            watchdog_end_job(w->comm);
        }
        double t = now_s(), wake = dev ? t + dev->poll_s : -1.0;
        const WatchSlot *old = NULL;   // the collective in flight the longest
        for (int i = 0; i < WATCH_SLOTS; i++)
            if (w->slot[i].depth > 0 && (!old || w->slot[i].start < old->start)) old = &w->slot[i];
        if (old) {
            double deadline = old->start + w->timeout_s;
            if (t >= deadline) {
                // Timed out: say what hung, then take the whole job down (the other ranks
                // are most likely blocked in the same collective and would wait forever).
                if (old->op == ZERO_COLL_NUM)
                    fprintf(stderr, "rank %d: %s timed out after %.1f s (waiting on the other ranks: one may have "
                            "died)\n", w->comm->rank, old->what, t - old->start);
                else
                    fprintf(stderr, "rank %d: collective %s on %llu bytes timed out after %.1f s (%s)\n",
                            w->comm->rank, zero_coll_name(old->op), (unsigned long long)old->bytes, t - old->start,
                            old->what);
                fflush(stderr);
                watchdog_end_job(w->comm);
            }
            if (wake < 0 || deadline < wake) wake = deadline;
        }
        w->wake = wake;
        if (wake < 0) {
            pthread_cond_wait(&w->cv, &w->mu);
        } else {
            struct timespec ts = abs_time(wake);
            pthread_cond_timedwait(&w->cv, &w->mu, &ts);
        }
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

void zero_comm_attach_device(ZeroComm *c, ZeroCommDevice *dev) {
    struct ZeroWatchdog *w = c->watchdog;
    if (!w) { c->dev = dev; return; }
    pthread_mutex_lock(&w->mu);   // the thread polls only while holding mu
    c->dev = dev;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

int zero_comm_set_timeout(ZeroComm *c, double timeout_s) {
    struct ZeroWatchdog *w = c->watchdog;
    if (timeout_s <= 0) {
        if (w) {
            pthread_mutex_lock(&w->mu);
            w->stop = 1;
            pthread_cond_signal(&w->cv);
            pthread_mutex_unlock(&w->mu);
            pthread_join(w->thread, NULL);
            pthread_cond_destroy(&w->cv);
            pthread_mutex_destroy(&w->mu);
            free(w);
            c->watchdog = NULL;
        }
        return 0;
    }
    if (w) {
        pthread_mutex_lock(&w->mu);
        w->timeout_s = timeout_s;
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
        return 0;
    }
    w = calloc(1, sizeof *w);
    if (!w) { fprintf(stderr, "zero: rank %d: out of host memory for the watchdog\n", c->rank); return -1; }
    w->comm = c;
    w->timeout_s = timeout_s;
    w->wake = -1.0;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);  // deadlines immune to clock changes
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&w->mu, NULL);
    int rc = pthread_create(&w->thread, NULL, watch, w);
    if (rc != 0) {
        fprintf(stderr, "zero: rank %d: starting the collective watchdog thread failed: %s\n", c->rank, strerror(rc));
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return -1;
    }
    c->watchdog = w;
    return 0;
}

// The calling thread's slot (taking a free one if it has none); NULL when all are taken,
// which only costs that collective its timeout. Called with w->mu held.
static WatchSlot *slot_of(struct ZeroWatchdog *w, int take) {
    pthread_t me = pthread_self();
    WatchSlot *free_slot = NULL;
    for (int i = 0; i < WATCH_SLOTS; i++) {
        if (w->slot[i].depth > 0 && pthread_equal(w->slot[i].owner, me)) return &w->slot[i];
        if (w->slot[i].depth == 0 && !free_slot) free_slot = &w->slot[i];
    }
    if (take && free_slot) free_slot->owner = me;
    return take ? free_slot : NULL;
}

// Arms the calling thread's watchdog slot (op ZERO_COLL_NUM: waiting on the peers outside a
// collective) and runs the stall test hook.
static void watch_begin(ZeroComm *c, ZeroCollOp op, uint64_t bytes, const char *what) {
    struct ZeroWatchdog *w = c->watchdog;
    if (w) {
        pthread_mutex_lock(&w->mu);
        WatchSlot *sl = slot_of(w, 1);
        if (sl && sl->depth++ == 0) {
            sl->start = now_s();
            sl->op = op;
            sl->bytes = bytes;
            snprintf(sl->what, sizeof sl->what, "%s", what ? what : "");
            // Woken only when it would sleep past this deadline: with a device attached it
            // polls every poll_s anyway, and a wake per collective would run a whole device
            // poll (under the device's lock the trainer needs) for each one.
            if (w->wake < 0 || sl->start + w->timeout_s < w->wake) pthread_cond_signal(&w->cv);
        }
        pthread_mutex_unlock(&w->mu);
    }
    double stall, none = 0.0;
    __atomic_exchange(&c->stall_s, &none, &stall, __ATOMIC_ACQ_REL);
    if (stall > 0) {  // test hook: hang inside the collective, as a stuck peer would
        struct timespec ts = abs_time(stall);
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
    }
}

// Counts the bytes (atomically: collectives run on several threads), then watch_begin.
static void coll_begin(ZeroComm *c, ZeroCollOp op, uint64_t intra, uint64_t inter, const char *what) {
    ZeroCollBytes *s = &c->sent[op];
    __atomic_fetch_add(&s->calls, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&s->intra_bytes, intra, __ATOMIC_RELAXED);
    __atomic_fetch_add(&s->inter_bytes, inter, __ATOMIC_RELAXED);
    watch_begin(c, op, intra + inter, what);
}

void zero_watch_begin(ZeroComm *c, const char *what) { watch_begin(c, ZERO_COLL_NUM, 0, what); }

void zero_coll_begin(ZeroComm *c, ZeroCollOp op, uint64_t bytes_per_peer, const char *what) {
    zero_coll_begin_group(c, ZERO_GROUP_WORLD, op, bytes_per_peer, what);
}

void zero_coll_begin_group(ZeroComm *c, ZeroGroup g, ZeroCollOp op, uint64_t bytes_per_peer, const char *what) {
    uint64_t intra, inter;
    zero_group_peers(c, g, &intra, &inter);
    coll_begin(c, op, bytes_per_peer * intra, bytes_per_peer * inter, what);
}

void zero_group_peers(const ZeroComm *c, ZeroGroup g, uint64_t *intra, uint64_t *inter) {
    *intra = c->peers_intra[g];   // counted by zero_comm_set_layout
    *inter = c->peers_inter[g];
}

void zero_coll_begin_to_root(ZeroComm *c, ZeroCollOp op, uint64_t bytes, const char *what) {
    uint64_t mine = c->rank == 0 ? 0 : bytes;
    coll_begin(c, op, c->node == 0 ? mine : 0, c->node == 0 ? 0 : mine, what);
}

void zero_coll_end(ZeroComm *c) {
    struct ZeroWatchdog *w = c->watchdog;
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    WatchSlot *sl = slot_of(w, 0);
    if (sl && sl->depth > 0) sl->depth--;
    pthread_mutex_unlock(&w->mu);
}

void zero_comm_inject_stall(ZeroComm *c, double seconds) { __atomic_store(&c->stall_s, &seconds, __ATOMIC_RELEASE); }
