// gather.c: stage-3 parameters. Each rank keeps only its shard; a unit's tensors are
// all-gathered into blocks of a fixed pool when the unit is fetched, and the block goes
// back when no fetched unit uses the tensor any more.
//
// The order of fetches is recorded during the first micro-step (ZeRO-Infinity 6.2's
// operator-sequence map). Afterwards the look-ahead window -- the tensors of the coming
// fetches, in order, up to prefetch_elems elements -- is gathered ahead of use, and a
// released tensor stays gathered if it is in the window (the last unit of the forward is
// the first of the backward). The pool size (max_live_elems) caps everything; when a
// fetch finds no room, gathered tensors that no fetched unit holds are evicted, the one
// needed furthest ahead first. Tensors of at most persist_elems elements are gathered once
// per step into their own buffer and never released.
#include "zero_internal.h"

#include <limits.h>
#include <stdio.h>

static char *byte_at(void *base, size_t elems, size_t es) { return (char *)base + elems * es; }

void *zero_gather_src(Zero *z, int ti, void *full, int t_step, ZeroStream *s) {
    void *offloaded = zero_offload_gather_src(z, ti, full);   // host, NVMe, or the uploaded shard
    if (offloaded) return offloaded;
    const ZeroTensorLayout *l = z->t[ti].lay;
    if (z->cfg.param_dtype == ZERO_F32) return z->master + l->shard_off;
    // bf16: round this rank's slot of the destination from the master, then gather in place
    // (no bf16 copy of the shard is kept between steps)
    char *mine = byte_at(full, (size_t)z->rank * l->split.shard, z->pes);
    z->b->refresh(z->b, mine, z->cfg.param_dtype, z->master + l->shard_off, l->own_count, z->cfg.seed, t_step,
                  l->global_off + l->own_begin, s);
    if (l->split.shard > l->own_count)   // a recycled block's padding: zero like everywhere else
        z->b->memset0(z->b, byte_at(mine, l->own_count, z->pes), (l->split.shard - l->own_count) * z->pes, s);
    return mine;
}

static int in_pool(const ZT *t) { return !t->persistent && t->lay->split.padded > 0; }

// Number of trace entries ahead: the rest of this micro-step, and the next micro-step's
// when this step has one (params do not change between micro-steps, only at the step).
static int lookahead_len(const Zero *z) {
    if (!z->in_step || z->trace_state != TRACE_READY || z->pos < 0 || z->micro >= z->grad_accum) return 0;
    int n = z->trace_len - z->pos;
    if (z->micro + 1 < z->grad_accum) n = z->trace_len;
    return n;
}

static int lookahead_unit(const Zero *z, int k) { return z->trace[(z->pos + k) % z->trace_len] >> 1; }

// Walks the window: distinct pool tensors of the coming fetches while their padded sizes
// add up to at most prefetch_elems, and to no more than the pool holds beside the tensors
// fetched units hold (a larger window would only keep or prefetch what gets evicted). A
// tensor larger than prefetch_elems on its own can never be gathered ahead: the walk steps
// over it (it is gathered on demand) rather than ending there.
// Calls visit(z, tensor, arg) for each; a non-zero return stops the walk. Returns 1 if
// stopped by visit.
static int walk_window(Zero *z, int (*visit)(Zero *, int, void *), void *arg) {
    int n = lookahead_len(z);
    size_t cum = 0, room = z->parena.capacity - z->held_elems;
    size_t budget = z->cfg.prefetch_elems < room ? z->cfg.prefetch_elems : room;
    z->stamp++;
    for (int k = 0; k < n; k++) {
        const ZU *U = &z->u[lookahead_unit(z, k)];
        for (int i = 0; i < U->n; i++) {
            ZT *t = &z->t[U->tensors[i]];
            if (!in_pool(t) || t->stamp == z->stamp) continue;
            t->stamp = z->stamp;
            if (t->lay->split.padded > z->cfg.prefetch_elems) continue;
            cum += t->lay->split.padded;
            if (cum > budget) return 0;
            if (visit(z, U->tensors[i], arg)) return 1;
        }
    }
    return 0;
}

static int is_target(Zero *z, int ti, void *arg) { (void)z; return ti == *(int *)arg; }

static int in_window(Zero *z, int ti) { return walk_window(z, is_target, &ti); }

// Trace entries until tensor ti is next used (INT_MAX: not in the look-ahead).
static int next_use(const Zero *z, int ti) {
    int n = lookahead_len(z);
    for (int k = 0; k < n; k++) {
        const ZU *U = &z->u[lookahead_unit(z, k)];
        for (int i = 0; i < U->n; i++)
            if (U->tensors[i] == ti) return k;
    }
    return INT_MAX;
}

static void drop(Zero *z, int ti) {
    ZT *t = &z->t[ti];
    if (t->issued && !t->used) z->n_wasted++;
    if (zero_arena_release(&z->parena, t->block) != 0)
        zero_fail(z, "internal: gather pool block of %s at %zu was not allocated", t->name, t->block);
    t->block = ZERO_ARENA_FULL;
    t->issued = 0;
    t->work = NULL;
}

static int place(Zero *z, int ti) {
    ZT *t = &z->t[ti];
    size_t off = zero_arena_alloc(&z->parena, t->lay->split.padded, t->num_units > 1);
    if (off == ZERO_ARENA_FULL) return -1;
    t->block = off;
    t->work = byte_at(z->ppool, off, z->pes);
    t->issued = 0;
    return 0;
}

static int uses(const ZU *U, int ti) {
    for (int i = 0; i < U->n; i++)
        if (U->tensors[i] == ti) return 1;
    return 0;
}

// Evicts the unheld pool tensor of another unit that is needed furthest ahead.
// Returns 0 if there was none.
static int evict_other(Zero *z, int unit) {
    int best = -1, best_use = -1;
    for (int i = 0; i < z->nt; i++) {
        ZT *t = &z->t[i];
        if (t->block == ZERO_ARENA_FULL || t->holders > 0 || uses(&z->u[unit], i)) continue;
        int d = next_use(z, i);
        if (d > best_use) { best = i; best_use = d; }
    }
    if (best < 0) return 0;
    if (z->t[best].issued) z->n_evictions++;
    drop(z, best);
    return 1;
}

// Drops every unheld block of unit's own tensors, so they can be placed again in order
// (a prefetched block may sit where it fragments the pool).
static void evict_own(Zero *z, int unit) {
    const ZU *U = &z->u[unit];
    for (int i = 0; i < U->n; i++) {
        ZT *t = &z->t[U->tensors[i]];
        if (t->block == ZERO_ARENA_FULL || t->holders > 0) continue;
        if (t->issued) z->n_evictions++;
        drop(z, U->tensors[i]);
    }
}

// Enqueues one all-gather for tensors list[0..n), already placed.
static void issue(Zero *z, const int *list, int n, const char *why) {
    if (n == 0) return;
    const ZeroBackend *b = z->b;
    zero_after_main(z, z->gs);   // a recycled block may still be read by the model's queued work
    for (int k = 0; k < n; k++) {
        ZT *t = &z->t[list[k]];
        z->parts[k].send = zero_gather_src(z, list[k], t->work, z->last_t, z->gs);
        z->parts[k].recv = t->work;
        z->parts[k].count = t->lay->split.shard;
    }
    b->all_gather(b, z->comm, ZERO_GROUP_WORLD, z->parts, n, z->cfg.param_dtype, z->gs, zero_label(z, why, list, n));
    uint64_t id = ++z->gathers_issued;
    for (int k = 0; k < n; k++) {
        ZT *t = &z->t[list[k]];
        b->event_record(b, t->ready, z->gs);
        t->issued = 1;
        t->used = 0;
        t->gather_id = id;
    }
}

static void advance_trace(Zero *z, int unit, int is_backward) {
    if (!z->in_step) return;   // evaluation between steps: gather on demand only
    int code = unit * 2 + (is_backward ? 1 : 0);
    if (z->trace_state == TRACE_RECORDING) {
        if (z->trace_len < z->trace_cap) {
            z->trace[z->trace_len++] = code;
        } else {
            z->trace_state = TRACE_INVALID;
            fprintf(stderr, "zero: rank %d: more than %d fetches in one micro-step; stage-3 prefetch is off\n",
                    z->rank, z->trace_cap);
        }
        return;
    }
    if (z->trace_state != TRACE_READY || z->pos < 0) return;
    int j = z->pos;
    while (j < z->trace_len && z->trace[j] != code) j++;
    if (j < z->trace_len && z->micro < z->grad_accum) {
        z->pos = j + 1;
        return;
    }
    z->pos = -1;   // off the recorded order: no look-ahead until the next micro-step
    if (!z->warned_order) {
        z->warned_order = 1;
        fprintf(stderr, "zero: rank %d: %s fetch of unit %d is not in the order recorded in the first micro-step; "
                "stage-3 prefetch pauses until the next micro-step\n", z->rank, is_backward ? "backward" : "forward", unit);
    }
}

static int collect_prefetch(Zero *z, int ti, void *arg) {
    int *n = arg;
    ZT *t = &z->t[ti];
    if (t->block != ZERO_ARENA_FULL) return 0;
    if (place(z, ti) != 0) return 1;   // the pool is full: prefetch what fitted
    z->batch[(*n)++] = ti;
    return 0;
}

void zero_gather_fetch(Zero *z, int unit, int is_backward) {
    ZU *U = &z->u[unit];
    advance_trace(z, unit, is_backward);
    for (int i = 0; i < U->n; i++) {
        ZT *t = &z->t[U->tensors[i]];
        if (!t->persistent && t->lay->split.padded == 0) t->work = z->ppool;   // empty: never read
    }
    // place what is missing; evict other units' blocks, then our own, until it fits
    for (int own_evicted = 0;;) {
        int failed = -1;
        for (int i = 0; i < U->n && failed < 0; i++) {
            int ti = U->tensors[i];
            if (in_pool(&z->t[ti]) && z->t[ti].block == ZERO_ARENA_FULL && place(z, ti) != 0) failed = ti;
        }
        if (failed < 0) break;
        if (evict_other(z, unit)) continue;
        if (!own_evicted) { evict_own(z, unit); own_evicted = 1; continue; }
        zero_fail(z, "gather pool of %zu elements cannot hold unit %d (needs %zu; %s needs %zu more) with %zu "
                  "elements held by other fetched units; raise max_live_elems", z->parena.capacity, unit,
                  U->pool_need, z->t[failed].name, z->t[failed].lay->split.padded, z->parena.in_use);
    }
    int n = 0;
    for (int i = 0; i < U->n; i++) {
        ZT *t = &z->t[U->tensors[i]];
        if (!in_pool(t)) continue;
        if (t->issued) z->n_hits++;
        else z->batch[n++] = U->tensors[i];
    }
    z->n_gathers += (uint64_t)n;
    issue(z, z->batch, n, is_backward ? "params (backward):" : "params:");
    uint64_t waited = 0;   // tensors of one all-gather share one wait
    for (int i = 0; i < U->n; i++) {
        ZT *t = &z->t[U->tensors[i]];
        if (!in_pool(t)) continue;
        if (t->holders++ == 0) z->held_elems += t->lay->split.padded;
        t->used = 1;
        if (t->gather_id != waited) {
            z->b->stream_wait(z->b, z->main, t->ready);
            waited = t->gather_id;
        }
    }
    // then gather ahead along the recorded order
    if (z->cfg.prefetch_elems > 0) {
        int np = 0;
        walk_window(z, collect_prefetch, &np);
        z->n_prefetches += (uint64_t)np;
        issue(z, z->batch, np, "prefetch params:");
    }
}

void zero_gather_release(Zero *z, int unit) {
    ZU *U = &z->u[unit];
    for (int i = 0; i < U->n; i++) {   // first let go, so the window sees the room
        ZT *t = &z->t[U->tensors[i]];
        if (!in_pool(t)) continue;
        if (t->holders <= 0) zero_fail(z, "internal: %s released more often than fetched", t->name);
        if (--t->holders == 0) z->held_elems -= t->lay->split.padded;
    }
    for (int i = 0; i < U->n; i++) {
        int ti = U->tensors[i];
        ZT *t = &z->t[ti];
        if (!in_pool(t) || t->holders > 0 || t->block == ZERO_ARENA_FULL) continue;
        // kept when the window holds it, or the very next fetch needs it (the last unit of
        // the forward is the first of the backward) whatever its size
        if (in_window(z, ti) || next_use(z, ti) == 0) t->used = 0;   // kept: wasted unless fetched again
        else drop(z, ti);
    }
}

void zero_gather_micro_end(Zero *z) {
    if (z->trace_state == TRACE_RECORDING) z->trace_state = z->trace_len > 0 ? TRACE_READY : TRACE_INVALID;
    z->pos = 0;
}

void zero_gather_reset(Zero *z) {
    for (int i = 0; i < z->nt; i++) {
        ZT *t = &z->t[i];
        if (t->block == ZERO_ARENA_FULL) continue;
        if (t->holders > 0) zero_fail(z, "internal: %s still held at the step", t->name);
        drop(z, i);
    }
    z->pos = 0;
}
