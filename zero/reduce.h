/*
reduce.h: gradient reduction (reduce.c): buckets, the flat all-to-all and the two hops.
A phase: zero.c calls it; it calls state.c and offload.c, never gather.c.
*/
#ifndef ZERO_REDUCE_H
#define ZERO_REDUCE_H

#include "state.h"

// The phase's stream and bucket events, the stage 2-3 gradient pool of pool_elems
// elements, the staging buffer, the bucket lists, the two-hop path's buffers.
void zero_reduce_init(Zero *z, size_t pool_elems);
void zero_reduce_free(Zero *z);
void zero_reduce_begin_step(Zero *z);        // no micro-step done, no unit ready
void zero_grad_acquire(Zero *z, int ti);     // stage 2/3: a pool buffer for tensor ti, zeroed by
void zero_grads_clear(Zero *z);              //   this (one memset for buffers side by side)
void zero_grads_flush(Zero *z);              // reduce the pending tensors now
int zero_grads_release_oldest(Zero *z);      // oldest bucket in flight: wait, return its blocks (0: none)
void zero_grads_drain(Zero *z);              // every bucket: the main stream waits for all reductions

// A unit's gradients are ready (zero_grads_ready's work after its checks): complete
// tensors join the bucket, full buckets are reduced. Returns 1 when this call completed
// the micro-step (every unit ready; what was left is reduced and the marks are reset).
int zero_reduce_unit_ready(Zero *z, int unit);

#endif
