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
void zero_gather_micro_end(Zero *z);
void zero_gather_reset(Zero *z);             // drop every pool block (params changed)
void zero_gather_init_pp(Zero *z);           // qwZ and hpZ buffers (zero_init)
void zero_qwz_refresh(Zero *z, int t_step);  // qwZ: this rank's int8 records of the new working shard
// What this rank sends in the all-gather of tensor ti into `full` (its padded working
// tensor): the fp32 master shard, or (bf16) its slot of `full`, rounded there on stream s
// with step t_step's rounding.
void *zero_gather_src(Zero *z, int ti, void *full, int t_step, ZeroStream *s);

#endif
