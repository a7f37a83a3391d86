/*
gather.h: stage-3 parameter gathering (gather.c): fetch and release, prefetch along the
recorded order, the pool, qwZ and hpZ. A phase: zero.c calls it; it calls state.c and
offload.c, never reduce.c.
*/
#ifndef ZERO_GATHER_H
#define ZERO_GATHER_H

#include "state.h"

void zero_gather_fetch(Zero *z, int unit, int is_backward);
void zero_gather_release(Zero *z, int unit);
void zero_gather_begin_step(Zero *z);        // back to the start of the recorded order
void zero_gather_micro_end(Zero *z);
void zero_gather_reset(Zero *z);             // drop every pool block (params changed)
// The phase's stream and lists; at stage 3 the persistent tensors' buffer, the gather
// pool of pool_elems elements, the fetch order's record, qwZ's and hpZ's buffers.
void zero_gather_init(Zero *z, size_t pool_elems);
void zero_gather_free(Zero *z);
// Stage 3, after each update: the persistent tensors gathered, qwZ's int8 records of the
// new working shard packed.
void zero_gather_persistent(Zero *z, int t_step);

#endif
