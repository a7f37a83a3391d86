/*
zero_recorder.h: a recording backend for the zero/ tests. It wraps another backend (the
host backend), passes every call through, and logs the ordering calls: which stream each
collective and kernel went to, every event record, every stream wait and sync. From the
log it works out what the main stream (the model) really waited for: a wait on an event
covers everything its stream had queued when the event was recorded, and, transitively,
whatever that stream had itself waited on.

The test marks phases ("backward compute of unit u") with rec_phase(); for every gradient
reduction (an all_to_all labelled "gradients of ...") the recorder notes the phase in which
it was issued and the phase in which the main stream first waited for it. A reduction the
main stream waits for before the next unit's backward compute has started was not
overlapped with any compute.
Header-only; single-threaded callers (zero.c calls the backend from the trainer's thread).
*/
#ifndef ZERO_RECORDER_H
#define ZERO_RECORDER_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../zero/backend.h"

enum { REC_MAX_STREAMS = 8, REC_MAX_EVENTS = 256, REC_MAX_OPS = 1 << 16 };

enum { REC_OP_COLL_GATHER, REC_OP_COLL_REDUCE, REC_OP_KERNEL, REC_OP_WAIT };

// PH_BWD_COMPUTE: the model computes unit u's backward; PH_BWD_AFTER: from unit u's
// grads_ready up to the start of unit u-1's compute (its release and u-1's fetch).
typedef enum { PH_OTHER = 0, PH_FWD, PH_BWD_COMPUTE, PH_BWD_AFTER, PH_STEP } RecPhaseKind;

typedef struct {
    int kind;
    int issued_phase;       // phase index when it was enqueued
    int covered_phase;      // phase index when the main stream first waited for it (-1: not yet)
    int wait_stream, wait_seq;   // REC_OP_WAIT: the other stream's ops [0, wait_seq) must finish first
    int phase_kind, unit;   // the phase's kind (RecPhaseKind) and unit at issue
    int main_seq;           // ops the main stream had queued when this one was
} RecOp;

typedef struct {
    ZeroStream *handle;
    RecOp *ops;
    int n, covered;         // ops [0, covered) are known finished before the main stream goes on
} RecStream;

typedef struct {
    ZeroBackend table;      // what zero_init gets (ctx points back here)
    const ZeroBackend *inner;
    RecStream s[REC_MAX_STREAMS];
    int ns;
    struct { ZeroEvent *handle; int stream, seq; } ev[REC_MAX_EVENTS];
    int nev;
    int phase;              // phase index, bumped by rec_phase
    RecPhaseKind kind;
    int micro, unit;
    long main_waits, main_syncs;
} Recorder;

static inline Recorder *rec_of(const ZeroBackend *b) { return (Recorder *)b->ctx; }

static inline int rec_stream(Recorder *r, ZeroStream *h) {
    for (int i = 0; i < r->ns; i++)
        if (r->s[i].handle == h) return i;
    if (r->ns == REC_MAX_STREAMS) { fprintf(stderr, "recorder: too many streams\n"); exit(2); }
    RecStream *s = &r->s[r->ns];
    s->handle = h;
    s->ops = calloc(REC_MAX_OPS, sizeof(RecOp));
    return r->ns++;
}

static inline int rec_event(Recorder *r, ZeroEvent *h) {
    for (int i = 0; i < r->nev; i++)
        if (r->ev[i].handle == h) return i;
    if (r->nev == REC_MAX_EVENTS) { fprintf(stderr, "recorder: too many events\n"); exit(2); }
    r->ev[r->nev].handle = h;
    r->ev[r->nev].stream = -1;
    return r->nev++;
}

static inline void rec_push(Recorder *r, ZeroStream *h, int kind, int wait_stream, int wait_seq) {
    int si = rec_stream(r, h);
    RecStream *s = &r->s[si];
    if (s->n == REC_MAX_OPS) { fprintf(stderr, "recorder: op log full\n"); exit(2); }
    s->ops[s->n++] = (RecOp){kind, r->phase, -1, wait_stream, wait_seq, (int)r->kind, r->unit, r->s[0].n};
}

// The main stream will not go on before ops [0, seq) of stream si have finished.
static inline void rec_cover(Recorder *r, int si, int seq) {
    RecStream *s = &r->s[si];
    if (seq > s->n) seq = s->n;
    for (int k = s->covered; k < seq; k++) {
        if (s->ops[k].covered_phase < 0) s->ops[k].covered_phase = r->phase;
        if (s->ops[k].kind == REC_OP_WAIT) rec_cover(r, s->ops[k].wait_stream, s->ops[k].wait_seq);
    }
    if (seq > s->covered) s->covered = seq;
}

static inline int rec_is_main(Recorder *r, ZeroStream *h) { return h == r->inner->main_stream(r->inner); }

// ---- pass-through calls (the inner backend sees itself as b)
static void *rec_alloc(const ZeroBackend *b, ZeroMemKind k, size_t n) { const ZeroBackend *i = rec_of(b)->inner; return i->alloc(i, k, n); }
static void rec_free(const ZeroBackend *b, ZeroMemKind k, void *p) { const ZeroBackend *i = rec_of(b)->inner; i->free(i, k, p); }
static void rec_memset0(const ZeroBackend *b, void *p, size_t n, ZeroStream *s) {
    Recorder *r = rec_of(b);
    rec_push(r, s, REC_OP_KERNEL, 0, 0);
    r->inner->memset0(r->inner, p, n, s);
}
static void rec_copy(const ZeroBackend *b, void *d, ZeroMemKind dk, const void *src, ZeroMemKind sk, size_t n, ZeroStream *s) {
    Recorder *r = rec_of(b);
    rec_push(r, s, REC_OP_KERNEL, 0, 0);
    r->inner->copy(r->inner, d, dk, src, sk, n, s);
}
static ZeroStream *rec_main_stream(const ZeroBackend *b) { const ZeroBackend *i = rec_of(b)->inner; return i->main_stream(i); }
static ZeroStream *rec_stream_create(const ZeroBackend *b) {
    Recorder *r = rec_of(b);
    ZeroStream *s = r->inner->stream_create(r->inner);
    if (s) rec_stream(r, s);
    return s;
}
static ZeroStream *rec_stream_create_copy(const ZeroBackend *b) {
    Recorder *r = rec_of(b);
    ZeroStream *s = r->inner->stream_create_copy(r->inner);
    if (s) rec_stream(r, s);
    return s;
}
static ZeroStream *rec_stream_create_host(const ZeroBackend *b) {
    Recorder *r = rec_of(b);
    ZeroStream *s = r->inner->stream_create_host(r->inner);
    if (s) rec_stream(r, s);
    return s;
}
static void rec_stream_destroy(const ZeroBackend *b, ZeroStream *s) { const ZeroBackend *i = rec_of(b)->inner; i->stream_destroy(i, s); }
static void rec_stream_sync(const ZeroBackend *b, ZeroStream *s) {
    Recorder *r = rec_of(b);
    int si = rec_stream(r, s);
    r->main_syncs++;
    rec_cover(r, si, r->s[si].n);
    r->inner->stream_sync(r->inner, s);
}
static ZeroEvent *rec_event_create(const ZeroBackend *b) {
    Recorder *r = rec_of(b);
    ZeroEvent *e = r->inner->event_create(r->inner);
    if (e) rec_event(r, e);
    return e;
}
static void rec_event_destroy(const ZeroBackend *b, ZeroEvent *e) { const ZeroBackend *i = rec_of(b)->inner; i->event_destroy(i, e); }
static void rec_event_record(const ZeroBackend *b, ZeroEvent *e, ZeroStream *s) {
    Recorder *r = rec_of(b);
    int ei = rec_event(r, e), si = rec_stream(r, s);
    r->ev[ei].stream = si;
    r->ev[ei].seq = r->s[si].n;
    r->inner->event_record(r->inner, e, s);
}
static void rec_stream_wait(const ZeroBackend *b, ZeroStream *s, ZeroEvent *e) {
    Recorder *r = rec_of(b);
    int ei = rec_event(r, e);
    if (r->ev[ei].stream >= 0) {
        if (rec_is_main(r, s)) {
            r->main_waits++;
            rec_cover(r, r->ev[ei].stream, r->ev[ei].seq);
        } else {
            rec_push(r, s, REC_OP_WAIT, r->ev[ei].stream, r->ev[ei].seq);
        }
    }
    r->inner->stream_wait(r->inner, s, e);
}
static void rec_all_gather(const ZeroBackend *b, ZeroComm *c, ZeroGroup g, const ZeroCollPart *p, int n, ZeroDType dt, ZeroStream *s,
                           const char *what) {
    Recorder *r = rec_of(b);
    rec_push(r, s, REC_OP_COLL_GATHER, 0, 0);
    r->inner->all_gather(r->inner, c, g, p, n, dt, s, what);
}
static void rec_all_to_all(const ZeroBackend *b, ZeroComm *c, ZeroGroup g, const ZeroCollPart *p, int n, ZeroDType dt, ZeroStream *s,
                           const char *what) {
    Recorder *r = rec_of(b);
    rec_push(r, s, strncmp(what, "gradients", 9) == 0 ? REC_OP_COLL_REDUCE : REC_OP_KERNEL, 0, 0);
    r->inner->all_to_all(r->inner, c, g, p, n, dt, s, what);
}
static void rec_allreduce(const ZeroBackend *b, ZeroComm *c, double *v, int n, const char *what) {
    const ZeroBackend *i = rec_of(b)->inner;
    i->allreduce_sum_f64(i, c, v, n, what);
}
static void rec_reduce_slices(const ZeroBackend *b, float *acc, const void *src, size_t stride, int ns, size_t n, ZeroDType dt,
                              ZeroStream *s) {
    Recorder *r = rec_of(b);
    rec_push(r, s, REC_OP_KERNEL, 0, 0);
    r->inner->reduce_slices(r->inner, acc, src, stride, ns, n, dt, s);
}
static void rec_sum_slices(const ZeroBackend *b, float *out, const void *src, size_t stride, int ns, size_t n, ZeroDType dt,
                           ZeroStream *s) {
    Recorder *r = rec_of(b);
    rec_push(r, s, REC_OP_KERNEL, 0, 0);
    r->inner->sum_slices(r->inner, out, src, stride, ns, n, dt, s);
}
static void rec_host_call(const ZeroBackend *b, ZeroStream *s, void (*fn)(void *), void *arg) {
    Recorder *r = rec_of(b);
    rec_push(r, s, REC_OP_KERNEL, 0, 0);
    r->inner->host_call(r->inner, s, fn, arg);
}
static void rec_adamw(const ZeroBackend *b, float *p, const float *g, float *m, float *v, size_t n, const AdamWParams *a,
                      int decay, ZeroStream *s) {
    Recorder *r = rec_of(b);
    rec_push(r, s, REC_OP_KERNEL, 0, 0);
    r->inner->adamw(r->inner, p, g, m, v, n, a, decay, s);
}
static void rec_refresh(const ZeroBackend *b, void *dst, ZeroDType dt, const float *master, size_t n, uint64_t seed, int t,
                        uint64_t gidx0, ZeroStream *s) {
    Recorder *r = rec_of(b);
    rec_push(r, s, REC_OP_KERNEL, 0, 0);
    r->inner->refresh(r->inner, dst, dt, master, n, seed, t, gidx0, s);
}
static void rec_sum_squares(const ZeroBackend *b, const float *x, size_t n, double *out, ZeroStream *s) {
    Recorder *r = rec_of(b);
    rec_push(r, s, REC_OP_KERNEL, 0, 0);
    r->inner->sum_squares(r->inner, x, n, out, s);
}

static void rec_wire_pack(const ZeroBackend *b, ZeroWire w, int block, const void *src, ZeroDType dt, size_t slice_n,
                          int nslices, int group, void *rec, ZeroStream *s) {
    Recorder *r = rec_of(b);
    rec_push(r, s, REC_OP_KERNEL, 0, 0);
    r->inner->wire_pack(r->inner, w, block, src, dt, slice_n, nslices, group, rec, s);
}
static void rec_wire_unpack(const ZeroBackend *b, ZeroWire w, int block, const void *rec, size_t slice_n, int nslices,
                            void *out, ZeroDType dt, ZeroStream *s) {
    Recorder *r = rec_of(b);
    rec_push(r, s, REC_OP_KERNEL, 0, 0);
    r->inner->wire_unpack(r->inner, w, block, rec, slice_n, nslices, out, dt, s);
}
static void rec_wire_reduce_pack(const ZeroBackend *b, ZeroWire w, int block, const void *in, ZeroDType dt,
                                 size_t slice_n, int ngroups, int nout, void *out, ZeroStream *s) {
    Recorder *r = rec_of(b);
    rec_push(r, s, REC_OP_KERNEL, 0, 0);
    r->inner->wire_reduce_pack(r->inner, w, block, in, dt, slice_n, ngroups, nout, out, s);
}
static void rec_wire_reduce(const ZeroBackend *b, ZeroWire w, int block, const void *rec, ZeroDType dt, size_t slice_n,
                            int nrec, size_t n, float *acc, int accumulate, ZeroStream *s) {
    Recorder *r = rec_of(b);
    rec_push(r, s, REC_OP_KERNEL, 0, 0);
    r->inner->wire_reduce(r->inner, w, block, rec, dt, slice_n, nrec, n, acc, accumulate, s);
}

// A trace's track names: the inner backend's streams are the recorder's handles.
static void rec_stream_name(const ZeroBackend *b, ZeroStream *s, const char *name) {
    Recorder *r = rec_of(b);
    if (r->inner->stream_name) r->inner->stream_name(r->inner, s, name);
}

static inline const ZeroBackend *rec_init(Recorder *r, const ZeroBackend *inner) {
    memset(r, 0, sizeof *r);
    r->inner = inner;
    r->table = *inner;
    r->table.name = "recording";
    r->table.ctx = r;
    r->table.alloc = rec_alloc;
    r->table.free = rec_free;
    r->table.memset0 = rec_memset0;
    r->table.copy = rec_copy;
    r->table.main_stream = rec_main_stream;
    r->table.stream_create = rec_stream_create;
    r->table.stream_create_host = rec_stream_create_host;
    r->table.stream_create_copy = rec_stream_create_copy;
    r->table.sum_slices = rec_sum_slices;
    r->table.host_call = rec_host_call;
    r->table.stream_name = rec_stream_name;
    r->table.stream_destroy = rec_stream_destroy;
    r->table.stream_sync = rec_stream_sync;
    r->table.event_create = rec_event_create;
    r->table.event_destroy = rec_event_destroy;
    r->table.event_record = rec_event_record;
    r->table.stream_wait = rec_stream_wait;
    r->table.all_gather = rec_all_gather;
    r->table.all_to_all = rec_all_to_all;
    r->table.allreduce_sum_f64 = rec_allreduce;
    r->table.reduce_slices = rec_reduce_slices;
    r->table.adamw = rec_adamw;
    r->table.refresh = rec_refresh;
    r->table.sum_squares = rec_sum_squares;
    // many-range calls go through the one-range ops above, each recorded
    r->table.adamw_parts = NULL;
    r->table.refresh_parts = NULL;
    r->table.sum_squares_parts = NULL;
    r->table.reduce_slices_parts = NULL;
    r->table.wire_pack = rec_wire_pack;
    r->table.wire_unpack = rec_wire_unpack;
    r->table.wire_reduce_pack = rec_wire_reduce_pack;
    r->table.wire_reduce = rec_wire_reduce;
    rec_stream(r, inner->main_stream(inner));   // stream 0: the model's
    return &r->table;
}

static inline void rec_free_all(Recorder *r) {
    for (int i = 0; i < r->ns; i++) free(r->s[i].ops);
}

// Collectives queued on a side stream during phases > 0 that were not preceded, on their
// stream, by a wait for everything the main stream had queued before them. (On the host
// backend the main stream runs at once, so such a missing wait changes no bits there; on
// a GPU the collective could read gradients the model is still writing.)
static inline int rec_unordered_collectives(const Recorder *r) {
    int bad = 0;
    for (int si = 1; si < r->ns; si++) {
        const RecStream *s = &r->s[si];
        int covered_main = 0;   // main-stream ops this stream has waited for so far
        for (int k = 0; k < s->n; k++) {
            const RecOp *o = &s->ops[k];
            if (o->kind == REC_OP_WAIT && o->wait_stream == 0 && o->wait_seq > covered_main) covered_main = o->wait_seq;
            if ((o->kind == REC_OP_COLL_GATHER || o->kind == REC_OP_COLL_REDUCE) && o->issued_phase > 0 &&
                covered_main < o->main_seq)
                bad++;
        }
    }
    return bad;
}

// The test says where the model is: each call starts a new phase.
static inline void rec_phase(Recorder *r, RecPhaseKind kind, int micro, int unit) {
    r->phase++;
    r->kind = kind;
    r->micro = micro;
    r->unit = unit;
}

#endif
