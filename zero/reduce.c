// reduce.c: gradient reduction. A tensor's gradient is complete once every unit that
// reads it has called grads_ready in the micro-step (a tied tensor: after the last of its
// two units). Complete tensors wait in a bucket; when the bucket holds bucket_elems (or
// the micro-step ends) it is reduced on the reduce stream: one all-to-all sends slice r of
// each gradient to rank r, and rank r adds the N slices it received in rank order into its
// fp32 shard gradient. The order of that sum is fixed, so the result does not depend on
// bucketing.
//
// When: stages 2 and 3 reduce every micro-step (their gradient buffers are transient);
// stages 0 and 1 keep whole gradients, accumulate the micro-steps into them, and reduce
// once per optimizer step, during the last micro-step's backward.
//
// Overlap: the model's stream waits for a reduction only when a gradient needs its room.
// Stage 2/3 pool blocks go back to the pool bucket by bucket, oldest first, and only when
// an allocation needs the room: the wait is then for the oldest reduction in flight. (A
// pool of every gradient at once gives each tensor its own place: a tensor whose previous
// micro-step's block is still being reduced waits for that reduction and the older ones.)
//
// Two hops (--hier-reduce; qgZ: the same with int4 records, ZeRO++ 3.3). With X ranks per
// node and Y nodes, the slice of a gradient bound for rank n*X + l goes first to local
// rank l of the sender's node (all-to-all inside the node), which sums the X it received
// for each of its Y destinations, then to node n (all-to-all among the ranks with local
// rank l), which sums the Y partial sums. Each rank sends (X-1)*Y slices inside its node
// and Y-1 across nodes, where the flat all-to-all sends N-X across: X times fewer. Packing
// the slices bound for one local rank side by side is ZeRO++'s slice reordering (eq. 1-2),
// done by wire_pack. The sum is (sum over nodes m in order of (sum over local ranks q in
// order of g_{m*X+q})) in fp32: fixed, but not the flat path's rank order except with one
// node or one rank per node, where it is the same sum. Unquantized bf16 gradients travel
// the second hop as bf16 too: the node's partial sum is rounded to nearest even there.
//
// Fast (--fast-reduce, what llm.c does): each gradient is rounded to bf16 and the library
// sums the ranks' slices itself (one reduce-scatter: NCCL's rings or trees, in-network
// reduction where the fabric has it); each rank adds its slice of the sum to its fp32
// shard gradient. Half the bytes of fp32 on the wire, but the order of the sum, and the
// bf16 roundings inside it, are the library's: the bits depend on the rank count.
#include "reduce.h"

#include "offload.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"

static char *byte_at(void *base, size_t elems, size_t es) { return (char *)base + elems * es; }

static size_t wire_rec(const Zero *z, const ZeroTensorState *t) {
    return zero_wire_record_bytes(z->reduce.wire, z->cfg.grad_dtype, t->lay->split.shard, z->reduce.qgz_block);
}

static int by_size(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

// The most bytes the records of a group of at most S padded elements take (reduce_list's
// groups): one record of the group's share a rank, and up to 24 bytes more per tensor slice
// (shards are multiples of 16 elements: a payload pads at most 8 bytes to 16, the scales
// 12, and a partial block adds one scale), in as many tensors as fit in S, smallest first.
// Every rank's slices of a tensor, or the largest tensor's, when that is more.
static size_t group_records_bound(Zero *z, size_t S) {
    const size_t N = (size_t)z->world;
    size_t *padded = zero_host_alloc(z, (size_t)z->num_tensors * sizeof(size_t), "bucket lists");
    size_t largest = 0, count = 0, sum = 0;
    for (int i = 0; i < z->num_tensors; i++) {
        padded[i] = z->t[i].lay->split.padded;
        size_t b = N * wire_rec(z, &z->t[i]);
        if (b > largest) largest = b;
    }
    qsort(padded, (size_t)z->num_tensors, sizeof(size_t), by_size);
    while (count < (size_t)z->num_tensors && sum + padded[count] <= S) sum += padded[count++];
    free(padded);
    size_t bound = N * zero_wire_record_bytes(z->reduce.wire, z->cfg.grad_dtype, (S + N - 1) / N, z->reduce.qgz_block) +
                   24 * N * count;
    return bound > largest ? bound : largest;
}

static void init_pp(Zero *z) {
    size_t hop2 = z->reduce.hop_bytes / (size_t)z->comm->local_size + 64;   // a bucket's share for one local rank
    z->reduce.hop1_send = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_BUFFERS, z->reduce.hop_bytes, "gradient records (first hop)");
    if (z->comm->num_nodes > 1 && z->comm->local_size > 1)   // else hop 2 sends hop 1's packing or nothing
        z->reduce.hop2_send = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_BUFFERS, hop2, "gradient records (second hop, sent)");
    if (z->comm->num_nodes > 1)
        z->reduce.hop2_recv = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_BUFFERS, hop2, "gradient records (second hop, received)");
}

// The two hops for tensors list[0..n) (they fit the staging buffer), on the reduce stream;
// the sums land in the shard gradient.
static void reduce_two_hops(Zero *z, const int *list, int n, const char *what) {
    const ZeroBackend *b = z->b;
    const int X = z->comm->local_size, Y = z->comm->num_nodes, blk = z->reduce.qgz_block;
    const ZeroWire w = z->reduce.wire;
    const ZeroDType dt = z->cfg.grad_dtype;
    size_t off = 0;
    for (int k = 0; k < n; k++) {   // hop 1: the Y slices bound for local rank l side by side
        const ZeroTensorState *t = &z->t[list[k]];
        size_t R = wire_rec(z, t);
        b->wire_pack(b, w, blk, t->grad, dt, t->lay->split.shard, z->world, X, byte_at(z->reduce.hop1_send, off, 1), z->reduce.stream);
        z->parts[k].send = byte_at(z->reduce.hop1_send, off, 1);
        z->parts[k].recv = byte_at(z->reduce.staging, off, 1);
        z->parts[k].count = (size_t)Y * R;
        zero_flow_add(z, ZERO_FLOW_GRAD_HOP1, ZERO_GROUP_NODE, (uint64_t)Y * R);
        off += (size_t)z->world * R;
    }
    if (off > z->reduce.hop_bytes)
        zero_fail(z, "internal: the records of %s (%zu bytes) exceed the first hop's buffer (%zu bytes)", what, off,
                  z->reduce.hop_bytes);
    if (X > 1) b->all_to_all(b, z->comm, ZERO_GROUP_NODE, z->parts, n, ZERO_U8, z->reduce.stream, what);
    const char *hop1 = X > 1 ? z->reduce.staging : z->reduce.hop1_send;   // X runs (one per local sender) of Y records
    off = 0;
    size_t off2 = 0;
    for (int k = 0; k < n; k++) {
        const ZeroTensorState *t = &z->t[list[k]];
        const ZeroTensorLayout *l = t->lay;
        size_t R = wire_rec(z, t);
        if (Y == 1) {   // one node: hop 1 brought every slice for this rank
            b->wire_reduce(b, w, blk, hop1 + off, dt, l->split.shard, X, l->own_count, z->step.shard_grad + l->shard_off, 1,
                           z->reduce.stream);
        } else if (X > 1) {   // sum the node's X contributions per destination node, packed again
            b->wire_reduce_pack(b, w, blk, hop1 + off, dt, l->split.shard, X, Y, byte_at(z->reduce.hop2_send, off2, 1), z->reduce.stream);
        }
        if (Y > 1) {   // the second hop's buffers exist only across nodes
            z->parts[k].send = X > 1 ? byte_at(z->reduce.hop2_send, off2, 1) : (char *)hop1 + off;
            z->parts[k].recv = byte_at(z->reduce.hop2_recv, off2, 1);
            z->parts[k].count = R;
            zero_flow_add(z, ZERO_FLOW_GRAD_HOP2, ZERO_GROUP_ACROSS, R);
        }
        off += (size_t)z->world * R;
        off2 += (size_t)Y * R;
    }
    if (Y == 1) return;
    b->all_to_all(b, z->comm, ZERO_GROUP_ACROSS, z->parts, n, ZERO_U8, z->reduce.stream, what);
    off2 = 0;
    for (int k = 0; k < n; k++) {   // hop 2: the Y nodes' partial sums, in node order
        const ZeroTensorState *t = &z->t[list[k]];
        const ZeroTensorLayout *l = t->lay;
        b->wire_reduce(b, w, blk, byte_at(z->reduce.hop2_recv, off2, 1), dt, l->split.shard, Y, l->own_count,
                       z->step.shard_grad + l->shard_off, 1, z->reduce.stream);
        off2 += (size_t)Y * wire_rec(z, t);
    }
}

// One all-to-all of every rank's slices for tensors list[0..n), then each rank's N slices
// summed in rank order into its shard gradient (or handed to the offloaded optimizer).
// A world of one receives in place (the all-to-all copies nothing) and sums from the pool.
static void reduce_flat(Zero *z, const int *list, int n, const char *what) {
    const ZeroBackend *b = z->b;
    const int in_place = z->world == 1 && !zero_offload_optimizer(z);
    size_t off = 0;
    for (int k = 0; k < n; k++) {
        ZeroTensorState *t = &z->t[list[k]];
        z->parts[k].send = t->grad;
        z->parts[k].recv = in_place ? t->grad : byte_at(z->reduce.staging, off, z->grad_size);
        z->parts[k].count = t->lay->split.shard;
        zero_flow_add(z, ZERO_FLOW_GRAD, ZERO_GROUP_WORLD, t->lay->split.shard * z->grad_size);
        off += t->lay->split.padded;
    }
    b->all_to_all(b, z->comm, ZERO_GROUP_WORLD, z->parts, n, z->cfg.grad_dtype, z->reduce.stream, what);
    // the sums of offloaded tensors go to the host (or NVMe), where the optimizer accumulates them
    if (zero_offload_optimizer(z)) zero_offload_reduce(z, list, n, z->reduce.staging);
    int ns = 0;
    for (int k = 0; k < n; k++) {
        const ZeroTensorLayout *l = z->t[list[k]].lay;
        if (zero_offload_holds(z, list[k])) continue;
        z->reduce.sums[ns++] = (ZeroReducePart){z->step.shard_grad + l->shard_off, z->parts[k].recv, l->split.shard, l->own_count};
    }
    zero_reduce_slices_parts(b, z->reduce.sums, ns, z->world, z->cfg.grad_dtype, z->reduce.stream);
}

// --fast-reduce: the bf16 copies (stochastic rounding, unbiased: refresh's rule under a key
// of its own, drawn again every micro-step) and the reduce-scatter's slices share the staging
// buffer, padded * 2 + shard * 2 bytes per tensor: within its padded * grad_size.
#define FAST_REDUCE_KEY 0x6772616473ull   // "grads": not the weights' rounding bits
static void reduce_fast(Zero *z, const int *list, int n, const char *what) {
    const ZeroBackend *b = z->b;
    // the run's micro-step count: a resumed run draws what the uninterrupted one would
    const int draw = (int)(((int64_t)z->step.done + z->step.before) * z->step.grad_accum) + z->reduce.micro;
    size_t off = 0;   // bytes
    for (int k = 0; k < n; k++) {
        const ZeroTensorState *t = &z->t[list[k]];
        const ZeroTensorLayout *l = t->lay;
        const void *send = t->grad;
        if (z->cfg.grad_dtype != ZERO_BF16) {
            send = byte_at(z->reduce.staging, off, 1);
            b->refresh(b, (void *)send, ZERO_BF16, t->grad, l->split.padded,
                       z->cfg.seed ^ FAST_REDUCE_KEY, draw, l->global_off, z->reduce.stream);
            off += l->split.padded * 2;
        }
        z->parts[k].send = send;
        if (z->stage == 0) {   // the sums stay for the step's gather (zero.c: stage0_gather_grads)
            z->parts[k].recv = byte_at(z->step.reduced_bf16, l->full_off + (size_t)z->rank * l->split.shard, 2);
        } else {
            z->parts[k].recv = byte_at(z->reduce.staging, off, 1);
            off += l->split.shard * 2;
        }
        z->parts[k].count = l->split.shard;
        zero_flow_add(z, ZERO_FLOW_GRAD, ZERO_GROUP_WORLD, l->split.shard * 2);
    }
    b->reduce_scatter(b, z->comm, ZERO_GROUP_WORLD, z->parts, n, ZERO_BF16, z->reduce.stream, what);
    for (int k = 0; k < n; k++) {
        const ZeroTensorLayout *l = z->t[list[k]].lay;
        z->reduce.sums[k] = (ZeroReducePart){z->step.shard_grad + l->shard_off, z->parts[k].recv, l->split.shard, l->own_count};
    }
    zero_reduce_slices_parts(b, z->reduce.sums, n, 1, ZERO_BF16, z->reduce.stream);
}

// Reduces tensors list[0..n) (their gradients live at z->t[i].grad) in groups of at most
// staging_elems padded elements (or one larger tensor), one bucket (and event) per group,
// whatever the wire: the two hops' buffers hold any such group's records.
static void reduce_list(Zero *z, const int *list, int n) {
    const ZeroBackend *b = z->b;
    for (int g0 = 0; g0 < n;) {
        size_t used = 0, bytes = 0, cap = z->reduce.staging_elems;
        int g1 = g0;
        while (g1 < n) {   // (two hops: within cap elements the records fit, group_records_bound)
            const ZeroTensorState *t = &z->t[list[g1]];
            size_t e = t->lay->split.padded, r = z->reduce.two_hops ? (size_t)z->world * wire_rec(z, t) : 0;
            if (g1 > g0 && (used + e > cap || bytes + r > z->reduce.hop_bytes)) break;
            used += e;
            bytes += r;
            g1++;
        }
        // a free event slot, and room in the deferred list for this group's blocks
        while (z->reduce.bucket_next - z->reduce.bucket_done == (uint64_t)z->reduce.bucket_slots ||
               (z->stage >= 2 && z->reduce.num_deferred + (g1 - g0) > z->reduce.deferred_cap))
            zero_grads_release_oldest(z);
        zero_stream_waits_main(z, z->reduce.stream);   // the model wrote these gradients on the main stream
        const char *what = zero_label(z, "gradients of", list + g0, g1 - g0);
        if (z->reduce.two_hops) reduce_two_hops(z, list + g0, g1 - g0, what);
        else if (z->cfg.fast_reduce) reduce_fast(z, list + g0, g1 - g0, what);
        else reduce_flat(z, list + g0, g1 - g0, what);
        uint64_t bucket = z->reduce.bucket_next++;
        b->event_record(b, z->reduce.bucket_events[bucket % (uint64_t)z->reduce.bucket_slots], z->reduce.stream);
        if (z->stage >= 2)
            for (int k = g0; k < g1; k++) {
                ZeroTensorState *t = &z->t[list[k]];
                // back to the pool once this bucket has read it (zero_grads_release_oldest)
                if (t->lay->split.padded > 0) {
                    z->reduce.deferred[z->reduce.num_deferred].off = t->reduce.grad_block;
                    z->reduce.deferred[z->reduce.num_deferred].bucket = bucket;
                    z->reduce.num_deferred++;
                }
                t->grad = NULL;
                t->reduce.grad_block = ZERO_ARENA_FULL;
            }
        z->reduce.buckets++;
        g0 = g1;
    }
}

void zero_grads_flush(Zero *z) {
    if (z->reduce.num_pending == 0) return;
    reduce_list(z, z->reduce.pending, z->reduce.num_pending);
    z->reduce.num_pending = 0;
    z->reduce.pending_elems = 0;
}

int zero_grads_release_oldest(Zero *z) {
    if (z->reduce.bucket_done == z->reduce.bucket_next) return 0;
    uint64_t bucket = z->reduce.bucket_done++;
    // the main stream will write the recycled memory: wait for the reduction's read
    z->b->stream_wait(z->b, z->main, z->reduce.bucket_events[bucket % (uint64_t)z->reduce.bucket_slots]);
    int kept = 0;
    for (int i = 0; i < z->reduce.num_deferred; i++) {
        if (z->reduce.deferred[i].bucket != bucket) {
            z->reduce.deferred[kept++] = z->reduce.deferred[i];
            continue;
        }
        if (zero_arena_release(&z->reduce.arena, z->reduce.deferred[i].off) != 0)
            zero_fail(z, "internal: gradient pool block at %zu was not allocated", z->reduce.deferred[i].off);
    }
    z->reduce.num_deferred = kept;
    return 1;
}

void zero_grads_drain(Zero *z) {
    while (zero_grads_release_oldest(z)) {}
}

void zero_grad_acquire(Zero *z, int ti) {
    ZeroTensorState *t = &z->t[ti];
    if (t->grad) return;   // a tied tensor: its other unit already opened it this micro-step
    size_t size = t->lay->split.padded;
    if (size == 0) {       // an empty tensor: any valid pointer, never touched
        t->grad = z->reduce.pool;
        return;
    }
    // a tied tensor that stays in the pool lives across units: out of the cycling space
    int top = t->num_units > 1 && z->off.park == ZERO_TIER_DEVICE;
    // A pool that holds every gradient at once gives each tensor its own place, its offset in
    // the full padded buffers: first fit there could split the space into holes each too small
    const int own_place = z->reduce.arena.capacity >= z->layout.padded_total;
    size_t off;
    // make room from the oldest reduction in flight, then by reducing what is pending
    while ((off = own_place ? zero_arena_place(&z->reduce.arena, t->lay->full_off, size)
                            : zero_arena_alloc(&z->reduce.arena, size, top)) == ZERO_ARENA_FULL) {
        if (zero_grads_release_oldest(z)) continue;
        if (z->reduce.num_pending == 0) break;
        zero_grads_flush(z);
    }
    if (off == ZERO_ARENA_FULL)
        zero_fail(z, "gradient pool of %zu elements cannot place %s (%zu elements): %zu in use in %d blocks; "
                  "raise bucket_elems", z->reduce.arena.capacity, t->name, size, z->reduce.arena.in_use, z->reduce.arena.n);
    t->reduce.grad_block = off;
    t->grad = byte_at(z->reduce.pool, off, z->grad_size);
    if (t->reduce.parked) {   // its first unit's partial sum, back from the park: the model adds to it
        zero_offload_unpark(z, ti, t->grad);
        t->reduce.parked = 0;
    } else {   // the model accumulates (+=): zeroed, with the unit's next blocks when they follow on
        char *at = (char *)t->grad;
        if (z->reduce.clear_bytes && at != (char *)z->reduce.clear_at + z->reduce.clear_bytes) zero_grads_clear(z);
        if (!z->reduce.clear_bytes) z->reduce.clear_at = at;
        z->reduce.clear_bytes += size * z->grad_size;
    }
}

void zero_grads_clear(Zero *z) {
    if (z->reduce.clear_bytes) z->b->memset0(z->b, z->reduce.clear_at, z->reduce.clear_bytes, z->main);
    z->reduce.clear_bytes = 0;
}

// A tied tensor whose first unit is done and whose other unit does not hold it: its
// partial gradient parks in the offload tier and its block returns to the pool once the
// copy has read it, through the same deferred list as a reduced bucket's blocks.
static void park_tied(Zero *z, int ti, int unit) {
    ZeroTensorState *t = &z->t[ti];
    for (int k = 0; k < t->num_units; k++)
        if (t->units[k] != unit && z->u[t->units[k]].fetched == 1) return;
    if (!t->grad || t->lay->split.padded == 0) return;
    while (z->reduce.bucket_next - z->reduce.bucket_done == (uint64_t)z->reduce.bucket_slots || z->reduce.num_deferred == z->reduce.deferred_cap)
        zero_grads_release_oldest(z);
    uint64_t done = z->reduce.bucket_next++;
    zero_offload_park(z, ti, t->grad, z->reduce.bucket_events[done % (uint64_t)z->reduce.bucket_slots]);
    z->reduce.deferred[z->reduce.num_deferred++] = (ZeroDeferredBlock){t->reduce.grad_block, done};
    t->grad = NULL;
    t->reduce.grad_block = ZERO_ARENA_FULL;
    t->reduce.parked = 1;
}

void zero_reduce_begin_step(Zero *z) {
    z->reduce.micro = 0;
    z->reduce.units_ready = 0;
}

int zero_reduce_unit_ready(Zero *z, int unit) {
    ZeroUnitState *U = &z->u[unit];
    U->ready_done = 1;
    // stages 0-1 hold whole gradients: reduce only what the last micro-step completes
    int reduce_now = z->stage >= 2 || z->reduce.micro == z->step.grad_accum - 1;
    for (int i = 0; i < U->n; i++) {
        ZeroTensorState *t = &z->t[U->tensors[i]];
        if (++t->reduce.grads_seen < t->num_units) {
            if (z->stage >= 2 && z->off.park != ZERO_TIER_DEVICE) park_tied(z, U->tensors[i], unit);
            continue;
        }
        t->reduce.grads_seen = 0;
        if (!reduce_now) continue;
        z->reduce.pending[z->reduce.num_pending++] = U->tensors[i];
        z->reduce.pending_elems += t->lay->split.padded;
    }
    if (reduce_now && z->reduce.pending_elems >= z->cfg.bucket_elems) zero_grads_flush(z);
    if (++z->reduce.units_ready < z->num_units) return 0;
    // micro-step complete: reduce what is left, reset the per-micro-step marks
    zero_grads_flush(z);
    for (int u = 0; u < z->num_units; u++) z->u[u].bwd_done = z->u[u].ready_done = 0;
    for (int i = 0; i < z->num_tensors; i++)
        if (z->t[i].reduce.grads_seen)
            zero_fail(z, "internal: tensor %s saw %d of its %d units' grads_ready in a micro-step", z->t[i].name,
                      z->t[i].reduce.grads_seen, z->t[i].num_units);
    z->reduce.units_ready = 0;
    z->reduce.micro++;
    return 1;
}

// ---------------------------------------------------------------- init and free

void zero_reduce_init(Zero *z, size_t pool_elems) {
    ZeroReduce *r = &z->reduce;
    r->stream = z->b->stream_create(z->b);
    if (!r->stream) zero_fail(z, "the %s backend could not create the reduce stream", z->b->name);
    if (z->b->stream_name) z->b->stream_name(z->b, r->stream, "reduce stream");
    r->mark = zero_new_event(z, "reduce-stream hand-offs");
    for (int i = 0; i < z->num_tensors; i++) z->t[i].reduce.grad_block = ZERO_ARENA_FULL;
    r->bucket_slots = z->num_tensors + 2;
    r->bucket_events = zero_host_alloc(z, (size_t)r->bucket_slots * sizeof(ZeroEvent *), "reduction events");
    for (int i = 0; i < r->bucket_slots; i++) r->bucket_events[i] = zero_new_event(z, "gradient reductions");
    r->qgz_block = z->cfg.qgz_block ? z->cfg.qgz_block : QGZ_BLOCK_DEFAULT;
    r->two_hops = z->cfg.qgz || z->cfg.hier_reduce;
    r->wire = z->cfg.qgz ? ZERO_WIRE_INT4 : ZERO_WIRE_RAW;
    if (z->stage >= 2) {
        r->pool = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_GRADS, pool_elems * z->grad_size, "stage-2/3 gradient pool");
        if (zero_arena_init(&r->arena, pool_elems, z->num_tensors) != 0)
            zero_fail(z, "out of host memory for the gradient pool table");
    }
    const size_t largest = z->layout.max_padded;
    r->staging_elems = z->cfg.bucket_elems > largest ? z->cfg.bucket_elems : largest;
    size_t staging_bytes = r->staging_elems * z->grad_size;
    if (largest * sizeof(float) > staging_bytes) staging_bytes = largest * sizeof(float);
    // two hops: the first hop's records of a group land here (as large as the gradient or
    // less, except int4 at blocks under 4 of bf16 gradients)
    r->hop_bytes = r->two_hops ? group_records_bound(z, r->staging_elems) : 0;
    if (r->hop_bytes > staging_bytes) staging_bytes = r->hop_bytes;
    r->staging = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_BUFFERS, staging_bytes, "collective staging buffer");
    r->pending = zero_host_alloc(z, (size_t)z->num_tensors * sizeof(int), "bucket lists");
    r->sums = zero_host_alloc(z, (size_t)z->num_tensors * sizeof *r->sums, "bucket lists");
    r->deferred_cap = 2 * z->num_tensors;
    r->deferred = zero_host_alloc(z, (size_t)r->deferred_cap * sizeof(ZeroDeferredBlock), "deferred frees");
    if (r->two_hops) init_pp(z);
}

void zero_reduce_free(Zero *z) {
    ZeroReduce *r = &z->reduce;
    const ZeroBackend *b = z->b;
    if (r->bucket_events)
        for (int i = 0; i < r->bucket_slots; i++)
            if (r->bucket_events[i]) b->event_destroy(b, r->bucket_events[i]);
    free(r->bucket_events);
    if (r->mark) b->event_destroy(b, r->mark);
    if (r->stream) b->stream_destroy(b, r->stream);
    zero_arena_free_all(&r->arena);
    free(r->pending);
    free(r->sums);
    free(r->deferred);
}
