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
//
// ZeRO++ (pool tensors only; persistent ones are small and always gathered as they are):
//  - qwZ: after each update every rank packs its shard of the working parameters into int8
//    records (wire.h) once; forward gathers move those records and unpack them into the
//    block. Backward gathers never move int8.
//  - hpZ: after a forward gather each rank copies its hpZ group's share of the tensor (the
//    slots of N/H ranks, its group index's) into the secondary partition; a backward gather
//    of the same parameter version then all-gathers inside the group only.
//  A block remembers what it holds (VAL_EXACT or VAL_QWZ): a fetch uses it only when that
//  is what the fetch wants (forward with qwZ: the int8 copy; backward: what the secondary
//  copy holds, else the exact parameters), else gathers again into the same block.
#include "gather.h"

#include "offload.h"

#include "kernels/quant.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

static char *byte_at(void *base, size_t elems, size_t es) { return (char *)base + elems * es; }

// This rank's working shard of tensor ti (S values, padding zero): where offload keeps it
// (brought into `mine`), the fp32 master itself, or (bf16) rounded from the master into
// `mine` on stream s with step t_step's rounding, once the caller issues the roundings
// queued (issue_roundings: one kernel call for a gather's tensors).
static void *work_shard(Zero *z, int ti, char *mine, ZeroStream *s, int bwd) {
    void *offloaded = zero_offload_shard(z, ti, mine, bwd);   // host, NVMe, or the uploaded shard
    if (offloaded) return offloaded;
    const ZeroTensorLayout *l = z->t[ti].lay;
    if (z->cfg.param_dtype == ZERO_F32) return z->step.master + l->shard_off;
    z->gather.roundings[z->gather.nroundings++] =
        (ZeroRefreshPart){mine, z->step.master + l->shard_off, l->own_count, l->global_off + l->own_begin};
    if (l->split.shard > l->own_count)   // a recycled block's padding: zero like everywhere else
        z->b->memset0(z->b, byte_at(mine, l->own_count, z->param_size), (l->split.shard - l->own_count) * z->param_size, s);
    return mine;
}

static void issue_roundings(Zero *z, int t_step, ZeroStream *s) {
    if (z->gather.nroundings == 0) return;
    zero_refresh_parts(z->b, z->gather.roundings, z->gather.nroundings, z->cfg.param_dtype, z->cfg.seed, t_step, s);
    z->gather.nroundings = 0;
}

// What this rank sends in the all-gather of tensor ti into `full` (its padded working
// tensor): the fp32 master shard, or (bf16) its slot of `full`, rounded there (gathered in
// place: no bf16 copy of the shard is kept between steps); issue_roundings before the gather.
// bwd: the gather is for a backward use.
static void *gather_src(Zero *z, int ti, void *full, ZeroStream *s, int bwd) {
    return work_shard(z, ti, byte_at(full, (size_t)z->rank * z->t[ti].lay->split.shard, z->param_size), s, bwd);
}

// ---------------------------------------------------------------- ZeRO++: qwZ and hpZ

static int in_pool(const ZeroTensorState *t);

static size_t qrec_bytes(const Zero *z, const ZeroTensorState *t) {
    return zero_wire_record_bytes(ZERO_WIRE_INT8, z->cfg.param_dtype, t->lay->split.shard, z->gather.qwz_block);
}

// hpZ: a group of H ranks holds the tensor in H pieces of N/H slots each; index h's piece.
static size_t sec_count(const Zero *z, const ZeroTensorState *t) { return t->lay->split.padded / (size_t)z->comm->hpz_size; }

static void init_pp(Zero *z) {
    size_t land = 0;
    for (int i = 0; i < z->num_tensors; i++) {
        ZeroTensorState *t = &z->t[i];
        if (!in_pool(t)) continue;
        t->gather.qrec_off = z->gather.qwz_own_bytes;
        z->gather.qwz_own_bytes += qrec_bytes(z, t);
        t->gather.sec_off = z->gather.hpz_copy_elems;
        z->gather.hpz_copy_elems += sec_count(z, t);
        // lands whole; and (bf16) the shard is rounded there before it is packed
        size_t need = (size_t)z->world * qrec_bytes(z, t);
        if (t->lay->split.shard * z->param_size > need) need = t->lay->split.shard * z->param_size;
        if (need > land) land = need;
    }
    if (z->cfg.qwz) {
        z->gather.qwz_own = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_PARAMS, z->gather.qwz_own_bytes, "qwZ int8 records of the shard");
        // room for a unit's records at once (fewer, larger all-gathers), at least the largest tensor's
        size_t unit_land = 0;
        for (int u = 0; u < z->num_units; u++) {
            size_t s = 0;
            for (int k = 0; k < z->u[u].n; k++)
                if (in_pool(&z->t[z->u[u].tensors[k]])) s += (size_t)z->world * qrec_bytes(z, &z->t[z->u[u].tensors[k]]);
            if (s > unit_land) unit_land = s;
        }
        z->gather.qwz_land_bytes = unit_land > land ? unit_land : land;
        z->gather.qwz_land = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_BUFFERS, z->gather.qwz_land_bytes, "qwZ landing buffer");
    }
    if (z->cfg.hpz > 1)
        z->gather.hpz_copy = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_PARAMS, z->gather.hpz_copy_elems * z->param_size, "hpZ secondary partition");
}

static void qwz_refresh(Zero *z, int t_step) {
    if (!z->gather.qwz_own) return;
    zero_stream_waits_main(z, z->gather.stream);   // the update ran on the main stream
    for (int i = 0; i < z->num_tensors; i++) {
        ZeroTensorState *t = &z->t[i];
        if (!in_pool(t)) continue;
        const void *src = work_shard(z, i, z->gather.qwz_land, z->gather.stream, 0);
        issue_roundings(z, t_step, z->gather.stream);   // the landing buffer is reused by the next tensor
        z->b->wire_pack(z->b, ZERO_WIRE_INT8, z->gather.qwz_block, src, z->cfg.param_dtype, t->lay->split.shard, 1, 1,
                        byte_at(z->gather.qwz_own, t->gather.qrec_off, 1), z->gather.stream);
    }
}

void zero_gather_persistent(Zero *z, int t_step) {
    const ZeroBackend *b = z->b;
    int np = 0;
    zero_stream_waits_main(z, z->gather.stream);
    for (int i = 0; i < z->num_tensors; i++) {
        if (!z->t[i].persistent) continue;
        z->parts[np].send = gather_src(z, i, z->t[i].work, z->gather.stream, 0);
        z->parts[np].recv = z->t[i].work;
        z->parts[np].count = z->t[i].lay->split.shard;
        z->gather.batch[np++] = i;
    }
    issue_roundings(z, t_step, z->gather.stream);
    if (np) {
        b->all_gather(b, z->comm, ZERO_GROUP_WORLD, z->parts, np, z->cfg.param_dtype, z->gather.stream,
                      zero_label(z, "persistent params:", z->gather.batch, np));
        for (int k = 0; k < np; k++)
            zero_flow_add(z, ZERO_FLOW_STEP_GATHER, ZERO_GROUP_WORLD, z->parts[k].count * z->param_size);
    }
    qwz_refresh(z, t_step);   // qwZ: the new shard's int8 records, once per step
    zero_main_waits_stream(z, z->gather.stream);
}

static int sec_valid(const Zero *z, const ZeroTensorState *t) { return z->gather.hpz_copy && t->gather.sec_version == z->gather.param_version; }

enum { GK_PLAIN = 0, GK_QWZ, GK_HPZ, GK_KINDS };   // how a tensor is gathered

static int gather_kind(const Zero *z, const ZeroTensorState *t, int bwd) {
    if (bwd) return sec_valid(z, t) ? GK_HPZ : GK_PLAIN;
    return z->cfg.qwz ? GK_QWZ : GK_PLAIN;
}

// What a gather of that kind leaves in the block.
static int kind_val(const ZeroTensorState *t, int kind) { return kind == GK_QWZ ? VAL_QWZ : kind == GK_HPZ ? t->gather.sec_val : VAL_EXACT; }

// What a fetch (forward or backward) needs the block to hold: what its gather would bring.
static int wanted(const Zero *z, const ZeroTensorState *t, int bwd) { return kind_val(t, gather_kind(z, t, bwd)); }

// The events (gathers, hits, evictions, ...) count inside a step only, as the bytes do
// (zero_flow_add): the trainer's forward passes between steps (evaluation, generation) are
// not the steps a dry run predicts.
static void count_event(const Zero *z, uint64_t *counter, uint64_t n) {
    if (z->step.open) *counter += n;
}

static int in_pool(const ZeroTensorState *t) { return !t->persistent && t->lay->split.padded > 0; }

// Number of trace entries ahead: the rest of this micro-step, and the next micro-step's
// when this step has one (params do not change between micro-steps, only at the step).
static int lookahead_len(const Zero *z) {
    if (!z->step.open || z->gather.order_state != ORDER_READY || z->gather.order_pos < 0 || z->reduce.micro >= z->step.grad_accum) return 0;
    int n = z->gather.order_len - z->gather.order_pos;
    if (z->reduce.micro + 1 < z->step.grad_accum) n = z->gather.order_len;
    return n;
}

static int lookahead_unit(const Zero *z, int k) { return z->gather.order[(z->gather.order_pos + k) % z->gather.order_len] >> 1; }

// Walks the window: distinct pool tensors of the coming fetches while their padded sizes
// add up to at most prefetch_elems, and to no more than the pool holds beside the tensors
// fetched units hold (a larger window would only keep or prefetch what gets evicted). A
// tensor larger than prefetch_elems on its own can never be gathered ahead: the walk steps
// over it (it is gathered on demand) rather than ending there.
// Calls visit(z, tensor, arg) for each; a non-zero return stops the walk. Returns 1 if
// stopped by visit.
static int walk_window(Zero *z, int (*visit)(Zero *, int, int, void *), void *arg) {
    int n = lookahead_len(z);
    size_t cum = 0, room = z->gather.arena.capacity - z->gather.held_elems;
    size_t budget = z->cfg.prefetch_elems < room ? z->cfg.prefetch_elems : room;
    z->gather.stamp++;
    for (int k = 0; k < n; k++) {
        const ZeroUnitState *U = &z->u[lookahead_unit(z, k)];
        int bwd = z->gather.order[(z->gather.order_pos + k) % z->gather.order_len] & 1;
        for (int i = 0; i < U->n; i++) {
            ZeroTensorState *t = &z->t[U->tensors[i]];
            if (!in_pool(t) || t->gather.stamp == z->gather.stamp) continue;
            t->gather.stamp = z->gather.stamp;
            if (t->lay->split.padded > z->cfg.prefetch_elems) continue;
            cum += t->lay->split.padded;
            if (cum > budget) return 0;
            if (visit(z, U->tensors[i], bwd, arg)) return 1;
        }
    }
    return 0;
}

static int is_target(Zero *z, int ti, int bwd, void *arg) { (void)z; (void)bwd; return ti == *(int *)arg; }

static int in_window(Zero *z, int ti) { return walk_window(z, is_target, &ti); }

// Trace entries until tensor ti is next used (INT_MAX: not in the look-ahead).
static int next_use(const Zero *z, int ti) {
    int n = lookahead_len(z);
    for (int k = 0; k < n; k++) {
        const ZeroUnitState *U = &z->u[lookahead_unit(z, k)];
        for (int i = 0; i < U->n; i++)
            if (U->tensors[i] == ti) return k;
    }
    return INT_MAX;
}

static void drop(Zero *z, int ti) {
    ZeroTensorState *t = &z->t[ti];
    if (t->gather.issued && !t->gather.used) count_event(z, &z->gather.wasted, 1);
    // its all-gather may still be queued: what is placed here next must not be written
    // before it runs by another stream than the gather stream (an NVMe read: offload.c)
    if (t->gather.issued && !t->gather.main_waited) zero_offload_unwaited_gather(z);
    if (zero_arena_release(&z->gather.arena, t->gather.block) != 0)
        zero_fail(z, "internal: gather pool block of %s at %zu was not allocated", t->name, t->gather.block);
    t->gather.block = ZERO_ARENA_FULL;
    t->gather.issued = 0;
    t->work = NULL;
}

static int place(Zero *z, int ti) {
    ZeroTensorState *t = &z->t[ti];
    size_t off = zero_arena_alloc(&z->gather.arena, t->lay->split.padded, t->num_units > 1);
    if (off == ZERO_ARENA_FULL) return -1;
    t->gather.block = off;
    t->work = byte_at(z->gather.pool, off, z->param_size);
    t->gather.issued = 0;
    return 0;
}

static int uses(const ZeroUnitState *U, int ti) {
    for (int i = 0; i < U->n; i++)
        if (U->tensors[i] == ti) return 1;
    return 0;
}

// Evicts the unheld pool tensor needed furthest ahead, if that is later than `after` trace
// entries, other than unit's tensors (-1: none) and tensor ti (-1: none). Returns 0 if
// there was none.
static int evict_furthest(Zero *z, int unit, int ti, int after) {
    int best = -1, best_use = after;
    for (int i = 0; i < z->num_tensors; i++) {
        ZeroTensorState *t = &z->t[i];
        if (i == ti || t->gather.block == ZERO_ARENA_FULL || t->gather.holders > 0 || (unit >= 0 && uses(&z->u[unit], i))) continue;
        int d = next_use(z, i);
        if (d > best_use) { best = i; best_use = d; }
    }
    if (best < 0) return 0;
    if (z->t[best].gather.issued) count_event(z, &z->gather.evictions, 1);
    drop(z, best);
    return 1;
}

// A fetch of unit: any other unit's block, furthest ahead first.
static int evict_other(Zero *z, int unit) { return evict_furthest(z, unit, -1, -1); }

// A prefetch of tensor ti: only what is needed later than ti (the window keeps what comes first).
static int evict_later(Zero *z, int ti) { return evict_furthest(z, -1, ti, next_use(z, ti)); }

// Drops every unheld block of unit's own tensors, so they can be placed again in order
// (a prefetched block may sit where it fragments the pool).
static void evict_own(Zero *z, int unit) {
    const ZeroUnitState *U = &z->u[unit];
    for (int i = 0; i < U->n; i++) {
        ZeroTensorState *t = &z->t[U->tensors[i]];
        if (t->gather.block == ZERO_ARENA_FULL || t->gather.holders > 0) continue;
        if (t->gather.issued) count_event(z, &z->gather.evictions, 1);
        drop(z, U->tensors[i]);
    }
}

// One all-gather of kind `kind` for the tensors coded[0..n) (tensor << 1 | for a backward
// use), already placed, then what makes the block usable: qwZ's unpack, and after a gather
// for the forward the hpZ group's share copied to the secondary partition.
static void gather_batch(Zero *z, int kind, const int *coded, int n, const char *why) {
    const ZeroBackend *b = z->b;
    const ZeroGroup g = kind == GK_HPZ ? ZERO_GROUP_HPZ : ZERO_GROUP_WORLD;
    size_t off = 0;
    for (int k = 0; k < n; k++) {
        int ti = coded[k] >> 1, bwd = coded[k] & 1;
        ZeroTensorState *t = &z->t[ti];
        ZeroCollPart *p = &z->parts[k];
        z->gather.tensors[k] = ti;
        if (kind == GK_QWZ) {
            p->send = byte_at(z->gather.qwz_own, t->gather.qrec_off, 1);
            p->recv = byte_at(z->gather.qwz_land, off, 1);
            p->count = qrec_bytes(z, t);
            off += (size_t)z->world * p->count;
        } else if (kind == GK_HPZ) {
            p->send = byte_at(z->gather.hpz_copy, t->gather.sec_off, z->param_size);
            p->recv = t->work;
            p->count = sec_count(z, t);
        } else {
            p->send = gather_src(z, ti, t->work, z->gather.stream, bwd);
            p->recv = t->work;
            p->count = t->lay->split.shard;
        }
        zero_flow_add(z, bwd ? ZERO_FLOW_BWD_GATHER : ZERO_FLOW_FWD_GATHER, g,
                      p->count * (kind == GK_QWZ ? 1 : z->param_size));
    }
    issue_roundings(z, z->step.last_t, z->gather.stream);
    b->all_gather(b, z->comm, g, z->parts, n, kind == GK_QWZ ? ZERO_U8 : z->cfg.param_dtype, z->gather.stream,
                  zero_label(z, why, z->gather.tensors, n));
    uint64_t id = ++z->gather.issued;
    off = 0;
    for (int k = 0; k < n; k++) {
        int ti = coded[k] >> 1, bwd = coded[k] & 1;
        ZeroTensorState *t = &z->t[ti];
        int val = kind_val(t, kind);
        if (kind == GK_QWZ) {
            b->wire_unpack(b, ZERO_WIRE_INT8, z->gather.qwz_block, byte_at(z->gather.qwz_land, off, 1), t->lay->split.shard, z->world,
                           t->work, z->cfg.param_dtype, z->gather.stream);
            off += (size_t)z->world * qrec_bytes(z, t);
            count_event(z, &z->gather.qwz_gathers, 1);
        }
        if (kind == GK_HPZ) count_event(z, &z->gather.hpz_gathers, 1);
        if (!bwd && z->gather.hpz_copy) {   // the backward will gather from here, inside the group
            size_t cnt = sec_count(z, t), h = (size_t)zero_group_index(z->comm, ZERO_GROUP_HPZ);
            b->copy(b, byte_at(z->gather.hpz_copy, t->gather.sec_off, z->param_size), ZERO_MEM_DEVICE, byte_at(t->work, h * cnt, z->param_size),
                    ZERO_MEM_DEVICE, cnt * z->param_size, z->gather.stream);
            t->gather.sec_version = z->gather.param_version;
            t->gather.sec_val = val;
        }
        t->gather.val = val;
    }
    // the tensors of one all-gather share one wait (zero_gather_fetch): every event after every unpack
    for (int k = 0; k < n; k++) {
        ZeroTensorState *t = &z->t[coded[k] >> 1];
        b->event_record(b, t->gather.ready, z->gather.stream);
        if (t->gather.issued && !t->gather.used) count_event(z, &z->gather.wasted, 1);   // gathered again before any use
        t->gather.issued = 1;
        t->gather.used = 0;
        t->gather.main_waited = 0;
        t->gather.gather_id = id;
    }
}

// Enqueues the all-gathers for tensors coded[0..n) (tensor << 1 | for a backward use),
// already placed: one per kind, qwZ's cut to what its landing buffer holds.
static void issue(Zero *z, const int *coded, int n, const char *why) {
    if (n == 0) return;
    zero_stream_waits_main(z, z->gather.stream);   // a recycled block may still be read by the model's queued work
    for (int kind = 0; kind < GK_KINDS; kind++) {
        int m = 0;
        for (int k = 0; k < n; k++)
            if (gather_kind(z, &z->t[coded[k] >> 1], coded[k] & 1) == kind) z->gather.by_kind[m++] = coded[k];
        for (int k0 = 0; k0 < m;) {
            int k1 = k0 + 1;
            if (kind == GK_QWZ) {
                size_t used = (size_t)z->world * qrec_bytes(z, &z->t[z->gather.by_kind[k0] >> 1]);
                while (k1 < m && used + (size_t)z->world * qrec_bytes(z, &z->t[z->gather.by_kind[k1] >> 1]) <= z->gather.qwz_land_bytes)
                    used += (size_t)z->world * qrec_bytes(z, &z->t[z->gather.by_kind[k1++] >> 1]);
            } else {
                k1 = m;
            }
            gather_batch(z, kind, z->gather.by_kind + k0, k1 - k0, why);
            k0 = k1;
        }
    }
}

static void advance_trace(Zero *z, int unit, int is_backward) {
    if (!z->step.open) return;   // evaluation between steps: gather on demand only
    int code = unit * 2 + (is_backward ? 1 : 0);
    if (z->gather.order_state == ORDER_RECORDING) {
        if (z->gather.order_len < z->gather.order_cap) {
            z->gather.order[z->gather.order_len++] = code;
        } else {
            z->gather.order_state = ORDER_INVALID;
            zero_say(z, "more than %d fetches in one micro-step; stage-3 prefetch is off", z->gather.order_cap);
        }
        return;
    }
    if (z->gather.order_state != ORDER_READY || z->gather.order_pos < 0) return;
    int j = z->gather.order_pos;
    while (j < z->gather.order_len && z->gather.order[j] != code) j++;
    if (j < z->gather.order_len && z->reduce.micro < z->step.grad_accum) {
        z->gather.order_pos = j + 1;
        return;
    }
    z->gather.order_pos = -1;   // off the recorded order: no look-ahead until the next micro-step
    if (!z->gather.warned_order) {
        z->gather.warned_order = 1;
        zero_say(z, "%s fetch of unit %d is not in the order recorded in the first micro-step; "
                "stage-3 prefetch pauses until the next micro-step", is_backward ? "backward" : "forward", unit);
    }
}

static int collect_prefetch(Zero *z, int ti, int bwd, void *arg) {
    int *n = arg;
    ZeroTensorState *t = &z->t[ti];
    if (t->gather.block != ZERO_ARENA_FULL) {
        // already gathered: again only for other values than that use wants, if nobody reads it
        if (t->gather.issued && t->gather.val != wanted(z, t, bwd) && t->gather.holders == 0) z->gather.batch[(*n)++] = ti << 1 | bwd;
        return 0;
    }
    while (place(z, ti) != 0)   // the pool is full: make room from what is needed later, else
        if (!evict_later(z, ti)) return 1;   // prefetch what fitted
    z->gather.batch[(*n)++] = ti << 1 | bwd;
    return 0;
}

void zero_gather_fetch(Zero *z, int unit, int is_backward) {
    ZeroUnitState *U = &z->u[unit];
    advance_trace(z, unit, is_backward);
    for (int i = 0; i < U->n; i++) {
        ZeroTensorState *t = &z->t[U->tensors[i]];
        if (!t->persistent && t->lay->split.padded == 0) t->work = z->gather.pool;   // empty: never read
    }
    // place what is missing; evict other units' blocks, then our own, until it fits
    for (int own_evicted = 0;;) {
        int failed = -1;
        for (int i = 0; i < U->n && failed < 0; i++) {
            int ti = U->tensors[i];
            if (in_pool(&z->t[ti]) && z->t[ti].gather.block == ZERO_ARENA_FULL && place(z, ti) != 0) failed = ti;
        }
        if (failed < 0) break;
        if (evict_other(z, unit)) continue;
        if (!own_evicted) { evict_own(z, unit); own_evicted = 1; continue; }
        zero_fail(z, "gather pool of %zu elements cannot hold unit %d (needs %zu; %s needs %zu more) with %zu "
                  "elements held by other fetched units; raise max_live_elems", z->gather.arena.capacity, unit,
                  U->pool_need, z->t[failed].name, z->t[failed].lay->split.padded, z->gather.arena.in_use);
    }
    int n = 0;
    for (int i = 0; i < U->n; i++) {
        ZeroTensorState *t = &z->t[U->tensors[i]];
        if (!in_pool(t)) continue;
        if (t->gather.issued && t->gather.val == wanted(z, t, is_backward)) {
            count_event(z, &z->gather.hits, 1);
            continue;
        }
        if (t->gather.issued && t->gather.holders > 0)
            zero_fail(z, "%s is fetched by unit %d for the %s while another fetched unit reads its other values "
                      "(qwZ/hpZ)", t->name, unit, is_backward ? "backward" : "forward");
        z->gather.batch[n++] = U->tensors[i] << 1 | (is_backward ? 1 : 0);
    }
    count_event(z, &z->gather.gathers, (uint64_t)n);
    issue(z, z->gather.batch, n, is_backward ? "params (backward):" : "params:");
    for (int i = 0; i < U->n; i++) {
        ZeroTensorState *t = &z->t[U->tensors[i]];
        if (!in_pool(t)) continue;
        if (t->gather.holders++ == 0) z->gather.held_elems += t->lay->split.padded;
        t->gather.used = 1;
    }
    // gather ahead along the recorded order before waiting for this unit: where the main
    // stream is the calling thread (the host backend) its wait blocks, and the next units'
    // reads queued only after it would leave the disk idle while the model computes
    if (z->cfg.prefetch_elems > 0) {
        int np = 0;
        walk_window(z, collect_prefetch, &np);
        count_event(z, &z->gather.prefetches, (uint64_t)np);
        issue(z, z->gather.batch, np, "prefetch params:");
    }
    uint64_t waited = 0;   // tensors of one all-gather share one wait
    for (int i = 0; i < U->n; i++) {
        ZeroTensorState *t = &z->t[U->tensors[i]];
        if (!in_pool(t)) continue;
        if (t->gather.gather_id != waited) {
            z->b->stream_wait(z->b, z->main, t->gather.ready);
            waited = t->gather.gather_id;
        }
        t->gather.main_waited = 1;
    }
}

void zero_gather_release(Zero *z, int unit) {
    ZeroUnitState *U = &z->u[unit];
    for (int i = 0; i < U->n; i++) {   // first let go, so the window sees the room
        ZeroTensorState *t = &z->t[U->tensors[i]];
        if (!in_pool(t)) continue;
        if (t->gather.holders <= 0) zero_fail(z, "internal: %s released more often than fetched", t->name);
        if (--t->gather.holders == 0) z->gather.held_elems -= t->lay->split.padded;
    }
    for (int i = 0; i < U->n; i++) {
        int ti = U->tensors[i];
        ZeroTensorState *t = &z->t[ti];
        if (!in_pool(t) || t->gather.holders > 0 || t->gather.block == ZERO_ARENA_FULL) continue;
        // kept when the window holds it, or the very next fetch needs it (the last unit of
        // the forward is the first of the backward) whatever its size
        if (in_window(z, ti) || next_use(z, ti) == 0) t->gather.used = 0;   // kept: wasted unless fetched again
        else drop(z, ti);
    }
}

void zero_gather_begin_step(Zero *z) {
    if (z->stage == 3 && z->gather.order_state == ORDER_NONE) {   // the first step records the order
        z->gather.order_state = ORDER_RECORDING;
        z->gather.order_len = 0;
    }
    z->gather.order_pos = 0;
}

void zero_gather_micro_end(Zero *z) {
    if (z->gather.order_state == ORDER_RECORDING) z->gather.order_state = z->gather.order_len > 0 ? ORDER_READY : ORDER_INVALID;
    z->gather.order_pos = 0;
}

void zero_gather_reset(Zero *z) {
    z->gather.param_version++;   // the secondary partition holds the old values now
    for (int i = 0; i < z->num_tensors; i++) {
        ZeroTensorState *t = &z->t[i];
        if (t->gather.block == ZERO_ARENA_FULL) continue;
        if (t->gather.holders > 0) zero_fail(z, "internal: %s still held at the step", t->name);
        drop(z, i);
    }
    z->gather.order_pos = 0;
}

// ---------------------------------------------------------------- init and free

void zero_gather_init(Zero *z, size_t pool_elems) {
    ZeroGather *g = &z->gather;
    g->stream = z->b->stream_create(z->b);
    if (!g->stream) zero_fail(z, "the %s backend could not create the gather stream", z->b->name);
    if (z->b->stream_name) z->b->stream_name(z->b, g->stream, "gather stream");
    g->mark = zero_new_event(z, "gather-stream hand-offs");
    g->batch = zero_host_alloc(z, (size_t)z->num_tensors * sizeof(int), "gather lists");
    g->roundings = zero_host_alloc(z, (size_t)z->num_tensors * sizeof *g->roundings, "gather lists");
    for (int i = 0; i < z->num_tensors; i++) z->t[i].gather.block = ZERO_ARENA_FULL;
    g->qwz_block = z->cfg.qwz_block ? z->cfg.qwz_block : QUANT_BLOCK_DEFAULT;
    if (z->stage != 3) return;
    g->by_kind = zero_host_alloc(z, (size_t)z->num_tensors * sizeof(int), "gather lists");
    g->tensors = zero_host_alloc(z, (size_t)z->num_tensors * sizeof(int), "gather lists");
    g->order_cap = 4 * z->num_units + 8;
    g->order = zero_host_alloc(z, (size_t)g->order_cap * sizeof(int), "the stage-3 fetch order");
    g->param_version = 1;   // no secondary slice holds it yet (sec_version 0)
    size_t persist_elems = 0;
    for (int i = 0; i < z->num_tensors; i++) {
        z->t[i].gather.ready = zero_new_event(z, z->t[i].name);
        if (z->t[i].persistent) persist_elems += z->t[i].lay->split.padded;
    }
    g->persist = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_PARAMS, persist_elems * z->param_size, "persistent parameters");
    size_t off = 0;
    for (int i = 0; i < z->num_tensors; i++)
        if (z->t[i].persistent) {
            z->t[i].work = byte_at(g->persist, off, z->param_size);
            off += z->t[i].lay->split.padded;
        }
    g->pool = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_PARAMS, pool_elems * z->param_size, "stage-3 gather pool");
    if (zero_arena_init(&g->arena, pool_elems, z->num_tensors) != 0) zero_fail(z, "out of host memory for the gather pool table");
    init_pp(z);
}

void zero_gather_free(Zero *z) {
    ZeroGather *g = &z->gather;
    const ZeroBackend *b = z->b;
    if (z->t)
        for (int i = 0; i < z->num_tensors; i++)
            if (z->t[i].gather.ready) b->event_destroy(b, z->t[i].gather.ready);
    if (g->mark) b->event_destroy(b, g->mark);
    if (g->stream) b->stream_destroy(b, g->stream);
    zero_arena_free_all(&g->arena);
    free(g->batch);
    free(g->roundings);
    free(g->by_kind);
    free(g->tensors);
    free(g->order);
}
