// backend_host.c: the host backend: host memory, MPI collectives, OpenMP kernels, and real
// streams (backend.h's ordering model, carried out rather than assumed):
//
//   - The main stream is the calling thread. The model computes there synchronously, so
//     work zero.c queues on it runs at once, and a wait on it blocks the caller until the
//     event has fired.
//   - Every stream from stream_create is a worker thread with a FIFO queue. Collectives
//     run there on the stream's own MPI communicator (a ZeroChannel), so a gather and a
//     reduction can be in flight together, as on a GPU.
//   - An event record is a marker: queued on a worker it fires when the worker reaches
//     it; recorded on the main stream it has fired already. A wait captures the event's
//     latest marker when it is called (CUDA's rule) and holds its stream until it fires.
//
// So the host path overlaps communication with compute like the CUDA backend, and a wait
// missing in zero.c lets the model read a buffer a worker has not finished: wrong bits.
// ZERO_HOST_JITTER=SEED adds a random sleep (up to JITTER_MAX_US) before every queued
// operation, main stream included, to shake out such races in tests.
// ZERO_HOST_SLOW=WORD:US makes one stream lag on purpose: each operation of a stream whose name
// (stream_name) holds WORD waits US microseconds first, for a race whose one side must fall
// behind the other by more than jitter's sleeps (offload's delayed update behind the next
// step's backward).
//
// The kernels are zero/kernels/host_kernels.c's, run on the stream's thread.
#include "backend_host.h"

#include <errno.h>
#include <inttypes.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../kernels/host_kernels.h"
#include "../trace.h"

#define JITTER_MAX_US 400    // longest jitter sleep

typedef struct Marker {
    struct Marker *next_free;
    int fired;
    int refs;                // the event's pointer, queued records and waits
} Marker;

struct ZeroEvent {
    Marker *latest;          // NULL: never recorded
};

typedef enum { OP_MEMSET, OP_COPY, OP_ALL_GATHER, OP_ALL_TO_ALL, OP_REDUCE_SCATTER, OP_REDUCE, OP_SUM, OP_ADAMW, OP_REFRESH, OP_SUMSQ,
               OP_WIRE_PACK, OP_WIRE_UNPACK, OP_WIRE_REDUCE_PACK, OP_WIRE_REDUCE, OP_CALL, OP_RECORD, OP_WAIT } OpKind;

typedef struct Op {
    struct Op *next;
    OpKind kind;
    // collectives
    ZeroCollPart *parts;     // a copy: zero.c reuses its part list as soon as the call returns
    int nparts, parts_cap;
    ZeroDType dt;
    ZeroGroup group;           // collectives
    char what[192];
    // kernels and copies (the arguments of the backend call of the same name)
    void *dst;
    const void *src;
    size_t bytes, stride, n;
    int nslices, decay, t;
    float *acc, *param, *m, *v;
    const float *grad, *master;
    AdamWParams ap;
    uint64_t seed, gidx0;
    double *out;
    ZeroWire wire;           // wire kernels: nslices counts slices, runs (ngroups) or records (nrec)
    int block, pack_group, nout, accumulate;
    size_t slice_n;
    Marker *marker;          // OP_RECORD: fires it; OP_WAIT: waits for it
    void (*fn)(void *);      // OP_CALL
    void *arg;
} Op;

typedef struct Host Host;

struct ZeroStream {
    Host *h;
    int is_main;
    pthread_t thread;
    int index;                       // 0 main, then 1, 2, ... in creation order (same on every rank)
    ZeroChannel *ch;
    Op *head, *tail;                 // the queue; head is the op running now
    uint64_t queued, finished;
    uint64_t jitter_ops;             // operations run so far: the jitter's counter
    long slow_us;                    // ZERO_HOST_SLOW: the wait before each of its operations
    int omp_threads, omp_dynamic;    // the creating thread's OpenMP settings, for its kernels
    int stop;
};

struct Host {
    ZeroComm *comm;
    int jitter;                      // ZERO_HOST_JITTER set
    uint64_t jitter_seed;
    char slow_word[64];              // ZERO_HOST_SLOW: streams whose name holds it ...
    long slow_us;                    // ... wait this long before each operation
    pthread_mutex_t mu;              // every queue, marker and free list below
    pthread_cond_t cv;               // any queue grew, an op finished, a marker fired
    Marker *free_markers;
    Op *free_ops;
    int streams_made;
    struct ZeroStream main;          // the caller's thread
    ZeroBackend table;
};

static Host *host_of(const ZeroBackend *b) { return (Host *)b->ctx; }

// ---------------------------------------------------------------- markers, ops, jitter

static void marker_unref(Host *h, Marker *m) {   // h->mu held
    if (m && --m->refs == 0) {
        m->next_free = h->free_markers;
        h->free_markers = m;
    }
}

static Marker *marker_new(Host *h) {   // h->mu held
    Marker *m = h->free_markers;
    if (m) h->free_markers = m->next_free;
    else if (!(m = malloc(sizeof *m))) {
        fprintf(stderr, "zero: rank %d: host backend: out of host memory for an event\n", h->comm->rank);
        zero_comm_abort(h->comm, 1);
    }
    m->next_free = NULL;
    m->fired = 0;
    m->refs = 1;
    return m;
}

static void wait_fired(Host *h, Marker *m) {   // h->mu held
    while (!m->fired) pthread_cond_wait(&h->cv, &h->mu);
}

static uint64_t mix64(uint64_t x) {   // splitmix64's finalizer
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, us % 1000000 * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

// Half of the operations run at once, the others after 0..JITTER_MAX_US microseconds.
static void jitter(const Host *h, int stream, uint64_t op) {
    uint64_t r = mix64(h->jitter_seed ^ mix64(((uint64_t)h->comm->rank << 40) ^ ((uint64_t)stream << 32) ^ op));
    if (r & 1) return;
    sleep_us((long)((r >> 8) % JITTER_MAX_US));
}

static void run_op(Host *h, ZeroStream *s, Op *op) {
    switch (op->kind) {
    case OP_MEMSET: memset(op->dst, 0, op->bytes); break;
    case OP_COPY: memmove(op->dst, op->src, op->bytes); break;
    case OP_ALL_GATHER: zero_mpi_all_gather(h->comm, s->ch, op->group, op->parts, op->nparts, op->dt, op->what); break;
    case OP_ALL_TO_ALL: zero_mpi_all_to_all(h->comm, s->ch, op->group, op->parts, op->nparts, op->dt, op->what); break;
    case OP_REDUCE_SCATTER:
        zero_mpi_reduce_scatter(h->comm, s->ch, op->group, op->parts, op->nparts, op->dt, op->what);
        break;
    case OP_REDUCE: zero_cpu_slices(op->acc, op->src, op->stride, op->nslices, op->n, op->dt, 1); break;
    case OP_SUM: zero_cpu_slices(op->acc, op->src, op->stride, op->nslices, op->n, op->dt, 0); break;
    case OP_CALL: op->fn(op->arg); break;
    case OP_ADAMW: zero_cpu_adamw(op->param, op->grad, op->m, op->v, op->n, &op->ap, op->decay); break;
    case OP_REFRESH: zero_cpu_refresh(op->dst, op->dt, op->master, op->n, op->seed, op->t, op->gidx0); break;
    case OP_SUMSQ: *op->out = zero_cpu_sum_squares(0.0, op->grad, op->n); break;
    case OP_WIRE_PACK:
        zero_wire_pack_cpu(op->wire, op->block, op->src, op->dt, op->slice_n, op->nslices, op->pack_group, op->dst);
        break;
    case OP_WIRE_UNPACK: zero_wire_unpack_cpu(op->wire, op->block, op->src, op->slice_n, op->nslices, op->dst, op->dt); break;
    case OP_WIRE_REDUCE_PACK:
        zero_wire_reduce_pack_cpu(op->wire, op->block, op->src, op->dt, op->slice_n, op->nslices, op->nout, op->dst);
        break;
    case OP_WIRE_REDUCE:
        zero_wire_reduce_cpu(op->wire, op->block, op->src, op->dt, op->slice_n, op->nslices, op->n, op->acc,
                             op->accumulate);
        break;
    case OP_RECORD:
        pthread_mutex_lock(&h->mu);
        op->marker->fired = 1;
        marker_unref(h, op->marker);
        pthread_cond_broadcast(&h->cv);
        pthread_mutex_unlock(&h->mu);
        break;
    case OP_WAIT:
        pthread_mutex_lock(&h->mu);
        wait_fired(h, op->marker);
        marker_unref(h, op->marker);
        pthread_mutex_unlock(&h->mu);
        break;
    }
}

// What a trace calls an op; records and instant marks are not spans.
static const char *op_name(OpKind k) {
    static const char *names[] = {"memset", "copy", "all_gather", "all_to_all", "reduce_scatter", "reduce", "sum", "adamw", "refresh",
                                  "sum_squares", "wire_pack", "wire_unpack", "wire_reduce_pack", "wire_reduce", "host work",
                                  "record", "wait"};
    return names[k];
}

// run_op, and with a trace on its span on the running thread's track (collectives labelled
// with what they move, waits with how long they held the stream).
static void run_traced(Host *h, ZeroStream *s, Op *op) {
    if (!zero_trace_on || op->kind == OP_RECORD) {
        run_op(h, s, op);
        return;
    }
    zero_trace_enter(op_name(op->kind), op->what);
    run_op(h, s, op);
    zero_trace_exit();
}

static void *worker(void *arg) {
    ZeroStream *s = arg;
    Host *h = s->h;
    // OpenMP settings are per thread: give this stream's kernels the trainer's (--threads)
    omp_set_num_threads(s->omp_threads);
    omp_set_dynamic(s->omp_dynamic);
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (!s->head && !s->stop) pthread_cond_wait(&h->cv, &h->mu);
        if (!s->head) break;
        Op *op = s->head;   // stays queued while it runs: stream_sync waits for it
        uint64_t n = s->jitter_ops++;
        const long slow = s->slow_us;
        pthread_mutex_unlock(&h->mu);
        if (h->jitter) jitter(h, s->index, n);
        if (slow) sleep_us(slow);
        run_traced(h, s, op);
        pthread_mutex_lock(&h->mu);
        s->head = op->next;
        if (!s->head) s->tail = NULL;
        s->finished++;
        op->next = h->free_ops;
        h->free_ops = op;
        pthread_cond_broadcast(&h->cv);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

// An op to fill in: from the free list, its part list kept for reuse.
static Op *op_new(Host *h, OpKind kind) {
    pthread_mutex_lock(&h->mu);
    Op *op = h->free_ops;
    if (op) h->free_ops = op->next;
    pthread_mutex_unlock(&h->mu);
    if (!op && !(op = calloc(1, sizeof *op))) {
        fprintf(stderr, "zero: rank %d: host backend: out of host memory for a queued operation\n", h->comm->rank);
        zero_comm_abort(h->comm, 1);
    }
    ZeroCollPart *parts = op->parts;
    int cap = op->parts_cap;
    memset(op, 0, sizeof *op);
    op->parts = parts;
    op->parts_cap = cap;
    op->kind = kind;
    return op;
}

// Runs op now (main stream: the caller's thread) or appends it to s's queue.
static void submit(Host *h, ZeroStream *s, Op *op) {
    if (s->is_main) {
        if (h->jitter) jitter(h, 0, s->jitter_ops++);
        run_traced(h, s, op);
        pthread_mutex_lock(&h->mu);
        op->next = h->free_ops;
        h->free_ops = op;
        pthread_mutex_unlock(&h->mu);
        return;
    }
    pthread_mutex_lock(&h->mu);
    op->next = NULL;
    if (s->tail) s->tail->next = op;
    else s->head = op;
    s->tail = op;
    s->queued++;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

// ---------------------------------------------------------------- memory

// Host-tier memory is page aligned, as the NVMe engine's O_DIRECT buffers need.
// Touched at once, like pinned memory: every buffer the plugin holds is resident from init
// on, so a run over a memory limit fails at start and the report's bytes are resident ones.
static void *h_alloc(const ZeroBackend *b, ZeroMemKind kind, size_t bytes) {
    (void)b;
    size_t a = kind == ZERO_MEM_HOST ? 4096 : 64, n = (bytes + a - 1) / a * a;
    void *p = aligned_alloc(a, n ? n : a);
    if (p) memset(p, 0, n ? n : a);
    return p;
}
static void h_free(const ZeroBackend *b, ZeroMemKind kind, void *p) { (void)b; (void)kind; free(p); }
static void h_memset0(const ZeroBackend *b, void *p, size_t bytes, ZeroStream *s) {
    if (!bytes) return;
    Op *op = op_new(host_of(b), OP_MEMSET);
    op->dst = p;
    op->bytes = bytes;
    submit(host_of(b), s, op);
}
static void h_copy(const ZeroBackend *b, void *dst, ZeroMemKind dk, const void *src, ZeroMemKind sk, size_t bytes,
                   ZeroStream *s) {
    (void)dk; (void)sk;
    if (!bytes || dst == src) return;
    Op *op = op_new(host_of(b), OP_COPY);
    op->dst = dst;
    op->src = src;
    op->bytes = bytes;
    submit(host_of(b), s, op);
}

// ---------------------------------------------------------------- ordering

static ZeroStream *h_main_stream(const ZeroBackend *b) { return &host_of(b)->main; }

static ZeroStream *h_stream_create(const ZeroBackend *b) {
    Host *h = host_of(b);
    ZeroStream *s = calloc(1, sizeof *s);
    if (!s) { fprintf(stderr, "zero: rank %d: out of host memory for a stream\n", h->comm->rank); return NULL; }
    s->h = h;
    s->index = ++h->streams_made;
    s->omp_threads = omp_get_max_threads();
    s->omp_dynamic = omp_get_dynamic();
    if (!(s->ch = zero_comm_channel_open(h->comm))) { free(s); return NULL; }
    int rc = pthread_create(&s->thread, NULL, worker, s);
    if (rc != 0) {
        fprintf(stderr, "zero: rank %d: starting a stream thread failed: %s\n", h->comm->rank, strerror(rc));
        zero_comm_channel_close(h->comm, s->ch);
        free(s);
        return NULL;
    }
    return s;
}

static void h_stream_sync(const ZeroBackend *b, ZeroStream *s) {
    if (s->is_main) return;
    Host *h = host_of(b);
    pthread_mutex_lock(&h->mu);
    uint64_t target = s->queued;
    while (s->finished < target) pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
}

static void h_stream_destroy(const ZeroBackend *b, ZeroStream *s) {
    if (!s || s->is_main) return;
    Host *h = host_of(b);
    h_stream_sync(b, s);
    pthread_mutex_lock(&h->mu);
    s->stop = 1;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    pthread_join(s->thread, NULL);
    zero_comm_channel_close(h->comm, s->ch);
    free(s);
}

static ZeroEvent *h_event_create(const ZeroBackend *b) {
    (void)b;
    return calloc(1, sizeof(ZeroEvent));
}

static void h_event_destroy(const ZeroBackend *b, ZeroEvent *e) {
    if (!e) return;
    Host *h = host_of(b);
    pthread_mutex_lock(&h->mu);
    marker_unref(h, e->latest);
    pthread_mutex_unlock(&h->mu);
    free(e);
}

static void h_event_record(const ZeroBackend *b, ZeroEvent *e, ZeroStream *s) {
    Host *h = host_of(b);
    pthread_mutex_lock(&h->mu);
    Marker *m = marker_new(h);
    marker_unref(h, e->latest);
    e->latest = m;
    if (s->is_main) m->fired = 1;   // everything the caller queued on main has run
    else m->refs++;                 // the queued record holds it until it fires
    pthread_mutex_unlock(&h->mu);
    if (s->is_main) return;
    Op *op = op_new(h, OP_RECORD);
    op->marker = m;
    submit(h, s, op);
}

static void h_stream_wait(const ZeroBackend *b, ZeroStream *s, ZeroEvent *e) {
    Host *h = host_of(b);
    if (s->is_main && h->jitter) jitter(h, 0, s->jitter_ops++);
    pthread_mutex_lock(&h->mu);
    Marker *m = e->latest;
    if (!m || m->fired) { pthread_mutex_unlock(&h->mu); return; }
    if (s->is_main) {
        wait_fired(h, m);
        pthread_mutex_unlock(&h->mu);
        return;
    }
    m->refs++;   // the queued wait holds it
    pthread_mutex_unlock(&h->mu);
    Op *op = op_new(h, OP_WAIT);
    op->marker = m;
    submit(h, s, op);
}

// ---------------------------------------------------------------- collectives

static void coll(const ZeroBackend *b, OpKind kind, ZeroGroup g, const ZeroCollPart *parts, int nparts, ZeroDType dt, ZeroStream *s,
                 const char *what) {
    Host *h = host_of(b);
    Op *op = op_new(h, kind);
    if (nparts > op->parts_cap) {
        ZeroCollPart *p = realloc(op->parts, (size_t)nparts * sizeof *p);
        if (!p) {
            fprintf(stderr, "zero: rank %d: host backend: out of host memory queueing %s\n", h->comm->rank, what);
            zero_comm_abort(h->comm, 1);
        }
        op->parts = p;
        op->parts_cap = nparts;
    }
    if (nparts) memcpy(op->parts, parts, (size_t)nparts * sizeof *parts);
    op->nparts = nparts;
    op->dt = dt;
    op->group = g;
    snprintf(op->what, sizeof op->what, "%s", what ? what : "");
    submit(h, s, op);
}

static void h_all_gather(const ZeroBackend *b, ZeroComm *c, ZeroGroup g, const ZeroCollPart *parts, int nparts,
                         ZeroDType dt, ZeroStream *s, const char *what) {
    (void)c;
    coll(b, OP_ALL_GATHER, g, parts, nparts, dt, s, what);
}
static void h_all_to_all(const ZeroBackend *b, ZeroComm *c, ZeroGroup g, const ZeroCollPart *parts, int nparts,
                         ZeroDType dt, ZeroStream *s, const char *what) {
    (void)c;
    coll(b, OP_ALL_TO_ALL, g, parts, nparts, dt, s, what);
}
static void h_reduce_scatter(const ZeroBackend *b, ZeroComm *c, ZeroGroup g, const ZeroCollPart *parts, int nparts,
                             ZeroDType dt, ZeroStream *s, const char *what) {
    (void)c;
    coll(b, OP_REDUCE_SCATTER, g, parts, nparts, dt, s, what);
}
static void h_allreduce_sum_f64(const ZeroBackend *b, ZeroComm *c, double *values, int n, const char *what) {
    (void)b;
    zero_mpi_allreduce_sum_f64(c, values, n, what);   // blocking, on the caller's thread and the world
}
static void h_gather_f64(const ZeroBackend *b, ZeroComm *c, const double *values, int n, double *all, const char *what) {
    (void)b;
    zero_mpi_gather_f64(c, values, n, all, what);     // likewise
}

// ---------------------------------------------------------------- kernels

static void slices(const ZeroBackend *b, OpKind kind, float *acc, const void *src, size_t stride, int nslices, size_t n,
                   ZeroDType dt, ZeroStream *s) {
    Op *op = op_new(host_of(b), kind);
    op->acc = acc;
    op->src = src;
    op->stride = stride;
    op->nslices = nslices;
    op->n = n;
    op->dt = dt;
    submit(host_of(b), s, op);
}

static void h_reduce_slices(const ZeroBackend *b, float *acc, const void *src, size_t stride, int nslices, size_t n,
                            ZeroDType dt, ZeroStream *s) {
    slices(b, OP_REDUCE, acc, src, stride, nslices, n, dt, s);
}

static void h_sum_slices(const ZeroBackend *b, float *out, const void *src, size_t stride, int nslices, size_t n,
                         ZeroDType dt, ZeroStream *s) {
    slices(b, OP_SUM, out, src, stride, nslices, n, dt, s);
}

// The wire kernels (wire.c): one op kind each, arguments as in backend.h.
static Op *wire_op(const ZeroBackend *b, OpKind kind, ZeroWire w, int block, const void *src, ZeroDType dt,
                   size_t slice_n, int count, void *dst) {
    Op *op = op_new(host_of(b), kind);
    op->wire = w;
    op->block = block;
    op->src = src;
    op->dt = dt;
    op->slice_n = slice_n;
    op->nslices = count;
    op->dst = dst;
    return op;
}

static void h_wire_pack(const ZeroBackend *b, ZeroWire w, int block, const void *src, ZeroDType dt, size_t slice_n,
                        int nslices, int group, void *rec, ZeroStream *s) {
    Op *op = wire_op(b, OP_WIRE_PACK, w, block, src, dt, slice_n, nslices, rec);
    op->pack_group = group;
    submit(host_of(b), s, op);
}

static void h_wire_unpack(const ZeroBackend *b, ZeroWire w, int block, const void *rec, size_t slice_n, int nslices,
                          void *out, ZeroDType dt, ZeroStream *s) {
    submit(host_of(b), s, wire_op(b, OP_WIRE_UNPACK, w, block, rec, dt, slice_n, nslices, out));
}

static void h_wire_reduce_pack(const ZeroBackend *b, ZeroWire w, int block, const void *in, ZeroDType dt,
                               size_t slice_n, int ngroups, int nout, void *out, ZeroStream *s) {
    Op *op = wire_op(b, OP_WIRE_REDUCE_PACK, w, block, in, dt, slice_n, ngroups, out);
    op->nout = nout;
    submit(host_of(b), s, op);
}

static void h_wire_reduce(const ZeroBackend *b, ZeroWire w, int block, const void *rec, ZeroDType dt, size_t slice_n,
                          int nrec, size_t n, float *acc, int accumulate, ZeroStream *s) {
    Op *op = wire_op(b, OP_WIRE_REDUCE, w, block, rec, dt, slice_n, nrec, NULL);
    op->n = n;
    op->acc = acc;
    op->accumulate = accumulate;
    submit(host_of(b), s, op);
}

static void name_thread(void *name) { zero_trace_thread((const char *)name); }
static void h_stream_name(const ZeroBackend *b, ZeroStream *s, const char *name) {
    Host *h = host_of(b);
    if (h->slow_us && !s->is_main && strstr(name, h->slow_word)) {
        pthread_mutex_lock(&h->mu);   // the stream's thread reads it
        s->slow_us = h->slow_us;
        pthread_mutex_unlock(&h->mu);
        if (h->comm->rank == 0)
            printf("zero: host backend: each operation of the %s waits %ld us first (ZERO_HOST_SLOW)\n", name, h->slow_us);
    }
    Op *op = op_new(h, OP_CALL);   // the stream's own thread takes the name
    op->fn = name_thread;
    op->arg = (void *)name;
    submit(host_of(b), s, op);
}

static void h_host_call(const ZeroBackend *b, ZeroStream *s, void (*fn)(void *), void *arg) {
    Op *op = op_new(host_of(b), OP_CALL);
    op->fn = fn;
    op->arg = arg;
    submit(host_of(b), s, op);
}

static void h_adamw(const ZeroBackend *b, float *param, const float *grad, float *m, float *v, size_t n,
                    const AdamWParams *p, int decay, ZeroStream *s) {
    Op *op = op_new(host_of(b), OP_ADAMW);
    op->param = param;
    op->grad = grad;
    op->m = m;
    op->v = v;
    op->n = n;
    op->ap = *p;
    op->decay = decay;
    submit(host_of(b), s, op);
}

static void h_refresh(const ZeroBackend *b, void *dst, ZeroDType dt, const float *master, size_t n, uint64_t seed,
                      int t, uint64_t gidx0, ZeroStream *s) {
    Op *op = op_new(host_of(b), OP_REFRESH);
    op->dst = dst;
    op->dt = dt;
    op->master = master;
    op->n = n;
    op->seed = seed;
    op->t = t;
    op->gidx0 = gidx0;
    submit(host_of(b), s, op);
}

static void h_sum_squares(const ZeroBackend *b, const float *x, size_t n, double *out, ZeroStream *s) {
    Op *op = op_new(host_of(b), OP_SUMSQ);
    op->grad = x;
    op->n = n;
    op->out = out;
    submit(host_of(b), s, op);
}

// ---------------------------------------------------------------- set-up

static const ZeroBackend host_template = {
    .name = "host",
    .needs_mpi = 1,
    .alloc = h_alloc,
    .free = h_free,
    .memset0 = h_memset0,
    .copy = h_copy,
    .main_stream = h_main_stream,
    .stream_create = h_stream_create,
    .stream_create_copy = h_stream_create,
    .stream_create_host = h_stream_create,
    .stream_destroy = h_stream_destroy,
    .stream_sync = h_stream_sync,
    .event_create = h_event_create,
    .event_destroy = h_event_destroy,
    .event_record = h_event_record,
    .stream_wait = h_stream_wait,
    .all_gather = h_all_gather,
    .all_to_all = h_all_to_all,
    .reduce_scatter = h_reduce_scatter,
    .allreduce_sum_f64 = h_allreduce_sum_f64,
    .gather_f64 = h_gather_f64,
    .reduce_slices = h_reduce_slices,
    .sum_slices = h_sum_slices,
    .adamw = h_adamw,
    .refresh = h_refresh,
    .sum_squares = h_sum_squares,
    .wire_pack = h_wire_pack,
    .wire_unpack = h_wire_unpack,
    .wire_reduce_pack = h_wire_reduce_pack,
    .wire_reduce = h_wire_reduce,
    .host_call = h_host_call,
    .stream_name = h_stream_name,
};

const ZeroBackend *zero_backend_host(ZeroComm *comm) {
    if (!comm) { fprintf(stderr, "zero: zero_backend_host needs a communicator\n"); return NULL; }
    Host *h = calloc(1, sizeof(Host));
    if (!h) { fprintf(stderr, "zero: rank %d: out of host memory for the host backend\n", comm->rank); return NULL; }
    h->main.h = h;
    h->main.is_main = 1;
    h->comm = comm;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    const char *j = getenv("ZERO_HOST_JITTER");
    if (j && *j) {
        char *end;
        errno = 0;
        unsigned long long seed = strtoull(j, &end, 10);
        if (errno || *end) {
            fprintf(stderr, "zero: rank %d: ZERO_HOST_JITTER='%s' is not a seed (a non-negative integer)\n", comm->rank, j);
            free(h);
            return NULL;
        }
        h->jitter = 1;
        h->jitter_seed = seed;
        if (comm->rank == 0)
            printf("zero: host backend jitter is on (ZERO_HOST_JITTER=%llu): a random sleep of up to %d us before "
                   "half of the queued operations\n", seed, JITTER_MAX_US);
    }
    const char *slow = getenv("ZERO_HOST_SLOW");
    if (slow && *slow) {
        const char *colon = strrchr(slow, ':');
        char *end = NULL;
        errno = 0;
        long us = colon ? strtol(colon + 1, &end, 10) : 0;
        size_t len = colon ? (size_t)(colon - slow) : 0;
        if (!colon || errno || *end || us < 1 || us > 10000000 || len == 0 || len >= sizeof h->slow_word) {
            fprintf(stderr, "zero: rank %d: ZERO_HOST_SLOW='%s' is not WORD:US (a word of a stream's name, 1 to 63 "
                    "characters, and a wait of 1 to 10000000 microseconds)\n", comm->rank, slow);
            free(h);
            return NULL;
        }
        memcpy(h->slow_word, slow, len);
        h->slow_word[len] = '\0';
        h->slow_us = us;
    }
    h->table = host_template;
    h->table.ctx = h;
    return &h->table;
}

void zero_backend_host_free(const ZeroBackend *b) {
    if (!b) return;
    Host *h = host_of(b);
    while (h->free_markers) {
        Marker *m = h->free_markers;
        h->free_markers = m->next_free;
        free(m);
    }
    while (h->free_ops) {
        Op *op = h->free_ops;
        h->free_ops = op->next;
        free(op->parts);
        free(op);
    }
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
}
