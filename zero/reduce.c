// reduce.c: gradient reduction. A tensor's gradient is complete once every unit that
// reads it has called grads_ready in the micro-step (a tied tensor: after the last of its
// two units). Complete tensors wait in a bucket; when the bucket holds bucket_elems (or
// the micro-step ends) it is reduced: one all-to-all sends slice r of each gradient to
// rank r, and rank r adds the N slices it received in rank order into its fp32 shard
// gradient. The order of that sum is fixed, so the result does not depend on bucketing.
#include "zero_internal.h"

#include <string.h>

static char *byte_at(void *base, size_t elems, size_t es) { return (char *)base + elems * es; }

// Reduces tensors list[0..n) (their gradients live at z->t[i].grad) in groups that fit
// the staging buffer.
static void reduce_list(Zero *z, const int *list, int n) {
    const ZeroBackend *b = z->b;
    for (int g0 = 0; g0 < n;) {
        size_t used = 0;
        int g1 = g0;
        while (g1 < n && (g1 == g0 || used + z->t[list[g1]].lay->split.padded <= z->staging_elems))
            used += z->t[list[g1++]].lay->split.padded;
        // the model wrote these gradients on the main stream
        ZeroEvent *e = zero_next_event(z);
        b->event_record(b, e, z->main);
        b->stream_wait(b, z->cs, e);
        size_t off = 0;
        for (int k = g0; k < g1; k++) {
            ZT *t = &z->t[list[k]];
            z->parts[k - g0].send = t->grad;
            z->parts[k - g0].recv = byte_at(z->staging, off, z->ges);
            z->parts[k - g0].count = t->lay->split.shard;
            off += t->lay->split.padded;
        }
        b->all_to_all(b, z->comm, z->parts, g1 - g0, z->cfg.grad_dtype, z->cs,
                      zero_label(z, "gradients of", list + g0, g1 - g0));
        off = 0;
        for (int k = g0; k < g1; k++) {
            const ZeroTensorLayout *l = z->t[list[k]].lay;
            b->reduce_slices(b, z->shard_grad + l->shard_off, byte_at(z->staging, off, z->ges), l->split.shard,
                             z->world, l->own_count, z->cfg.grad_dtype, z->cs);
            off += l->split.padded;
        }
        ZeroEvent *done = zero_next_event(z);
        b->event_record(b, done, z->cs);
        for (int k = g0; k < g1; k++) {
            ZT *t = &z->t[list[k]];
            t->grad_done = done;
            if (z->stage == 1) t->needs_zero = 1;
            if (z->stage >= 2) {
                // back to the pool once the reduction has read it (zero_grads_drain)
                if (t->lay->split.padded > 0) {
                    if (z->ndeferred == z->deferred_cap) zero_grads_drain(z);
                    z->deferred[z->ndeferred].off = t->grad_block;
                    z->deferred[z->ndeferred].ev = done;
                    z->ndeferred++;
                }
                t->grad = NULL;
                t->grad_block = ZERO_ARENA_FULL;
            }
        }
        z->n_buckets++;
        g0 = g1;
    }
}

void zero_grads_flush(Zero *z) {
    if (z->npending == 0) return;
    reduce_list(z, z->pending, z->npending);
    z->npending = 0;
    z->pending_elems = 0;
}

void zero_grads_drain(Zero *z) {
    for (int i = 0; i < z->ndeferred; i++) {
        // the main stream will write the recycled memory: wait for the reduction's read
        z->b->stream_wait(z->b, z->main, z->deferred[i].ev);
        if (zero_arena_release(&z->garena, z->deferred[i].off) != 0)
            zero_fail(z, "internal: gradient pool block at %zu was not allocated", z->deferred[i].off);
    }
    z->ndeferred = 0;
}

void zero_reduce_all(Zero *z) {
    for (int i = 0; i < z->nt; i++) z->batch[i] = i;
    reduce_list(z, z->batch, z->nt);
}

void zero_grad_acquire(Zero *z, int ti) {
    ZT *t = &z->t[ti];
    if (t->grad) return;   // a tied tensor: its other unit already opened it this micro-step
    size_t size = t->lay->split.padded;
    if (size == 0) {       // an empty tensor: any valid pointer, never touched
        t->grad = z->gpool;
        return;
    }
    int top = t->num_units > 1;   // lives across units: keep it out of the cycling space
    size_t off = zero_arena_alloc(&z->garena, size, top);
    if (off == ZERO_ARENA_FULL) {
        zero_grads_drain(z);
        off = zero_arena_alloc(&z->garena, size, top);
    }
    if (off == ZERO_ARENA_FULL) {
        zero_grads_flush(z);
        zero_grads_drain(z);
        off = zero_arena_alloc(&z->garena, size, top);
    }
    if (off == ZERO_ARENA_FULL)
        zero_fail(z, "gradient pool of %zu elements cannot place %s (%zu elements): %zu in use in %d blocks; "
                  "raise bucket_elems", z->garena.capacity, t->name, size, z->garena.in_use, z->garena.n);
    t->grad_block = off;
    t->grad = byte_at(z->gpool, off, z->ges);
    z->b->memset0(z->b, t->grad, size * z->ges, z->main);   // the model accumulates (+=)
}

void zero_grads_ready(Zero *z, int unit) {
    if (unit < 0 || unit >= z->nu) zero_fail(z, "zero_grads_ready of unit %d: units are 0..%d", unit, z->nu - 1);
    ZU *U = &z->u[unit];
    if (!z->in_step) zero_fail(z, "zero_grads_ready of unit %d outside zero_begin_step .. zero_step", unit);
    if (!U->bwd_done) zero_fail(z, "zero_grads_ready of unit %d before its backward zero_fetch", unit);
    if (U->ready_done) zero_fail(z, "zero_grads_ready of unit %d twice in one micro-step", unit);
    U->ready_done = 1;
    if (z->stage >= 1) {
        for (int i = 0; i < U->n; i++) {
            ZT *t = &z->t[U->tensors[i]];
            if (++t->grads_seen < t->num_units) continue;
            t->grads_seen = 0;
            z->pending[z->npending++] = U->tensors[i];
            z->pending_elems += t->lay->split.padded;
        }
        if (z->pending_elems >= z->cfg.bucket_elems) zero_grads_flush(z);
    }
    if (++z->units_ready < z->nu) return;
    // micro-step complete: reduce what is left, reset the per-micro-step marks
    if (z->stage >= 1) zero_grads_flush(z);
    if (z->stage >= 2 && z->ndeferred > z->nt) zero_grads_drain(z);
    for (int u = 0; u < z->nu; u++) z->u[u].bwd_done = z->u[u].ready_done = 0;
    for (int i = 0; i < z->nt; i++)
        if (z->t[i].grads_seen)
            zero_fail(z, "internal: tensor %s saw %d of its %d units' grads_ready in a micro-step", z->t[i].name,
                      z->t[i].grads_seen, z->t[i].num_units);
    z->units_ready = 0;
    z->micro++;
    if (z->stage == 3) zero_gather_micro_end(z);
}
