/*
offload.h: the tiers other than the device (offload.c): where the optimizer states and the
stage-3 working-parameter shard live (host memory, NVMe) and the CPU optimizer that
updates them. The layer below the phases: gather.c, reduce.c, checkpoint.c and zero.c ask
it; it asks only state.c and the NVMe engine.
*/
#ifndef ZERO_OFFLOAD_H
#define ZERO_OFFLOAD_H

#include "state.h"

// zero_offload_* are no-ops without offload.
int zero_offload_validate(const ZeroConfig *cfg, int rank);   // 0, or -1 after printing why
// Buffers, streams, the NVMe file; park_tied: tied gradients park in the offload tier
// between their units (zero_init decides from the pool sizes: zero_offload_parks_tied).
void zero_offload_init(Zero *z, int park_tied);
void zero_offload_free(Zero *z);
// Where each tensor's optimizer states live (before the step's buffers are made): all on
// the device, all offloaded, or (optimizer_ratio < 1) the layout's first tensors on the
// device and the rest offloaded (ZeroOffload.opt_first, opt_base).
void zero_offload_plan(Zero *z);
int zero_offload_optimizer(const Zero *z);         // 1 when any tensor's optimizer states are off the device
int zero_offload_holds(const Zero *z, int ti);     // 1 when tensor ti's are
void zero_offload_init_master(Zero *z, ZeroInitFn init, void *ctx);   // the owned master, where it lives
// A bucket's reduction: the sums of tensors list[0..n) land in the offloaded accumulator
// (called by reduce.c after the all-to-all, on the reduce stream's order).
void zero_offload_reduce(Zero *z, const int *list, int n, const void *received);
// The step's norm partials are in z->step.sumsq; runs AdamW on the CPU (skipped when skip) and
// refreshes the working parameters at step t (no AdamW with update 0: init, after a load).
void zero_offload_update(Zero *z, const AdamWParams *p, int update, int t);
void zero_offload_wait(Zero *z);                   // every queued accumulation has landed
// cfg.dpu_from: zero_offload_update from that step on lands the update the step before
// left running (its parameters go up) and starts its own on the delayed-update stream. This
// lands the one in flight between steps (zero_land_update); 1 when there was one.
int zero_offload_land(Zero *z);
// The optimizer and fp32 parameters on NVMe: zero_offload_update leaves each tensor's AdamW
// to its next read (its next gather gets the fresh values without reading them back, the
// I/O runs beside the next forward); this runs what still waits (zero_offload_update calls
// it before the next update).
void zero_offload_flush(Zero *z);
// Stage 3's pool freed a block whose all-gather nothing has waited for (a prefetched tensor
// evicted before use): the next NVMe parameter read, from another stream, first waits for
// the gather stream's queued work, which may still write that block.
void zero_offload_unwaited_gather(Zero *z);
// Stage 3 gathers and qwZ's packing: this rank's shard of tensor ti in the working dtype,
// brought into `mine` on the gather stream (or used where it lives, the uploaded device
// shard); returns where it is, or NULL when offload does not hold the parameters. From NVMe
// the read waits for the main stream (and the backward's settle; after an unwaited gather,
// zero_offload_unwaited_gather, for the gather stream), not for the gather stream's other
// work: `mine` must be a slot the gather stream does not read before (a gather block's own slot). bwd: for a backward use. From the step's first
// backward read on, NVMe reads run on the read stream, beside the gradient accumulation
// (with hpZ the backward gathers from the secondary copy and reads none: every read then
// stays on the host stream).
void *zero_offload_shard(Zero *z, int ti, void *mine, int bwd);
// The optimizer state of kind ZK_MASTER/ZK_M/ZK_V, elements [off, off + n) of tensor ti's
// owned range, to or from host memory (checkpoints, consolidation). Blocking.
void zero_state_read(Zero *z, int kind, int ti, size_t off, size_t n, float *out);
void zero_state_write(Zero *z, int kind, int ti, size_t off, size_t n, const float *in);
// Tied tensors (read by two units) and offload, stages 2-3: the first unit's partial
// gradient leaves the pool for the offload tier (park: queued after the main stream's work;
// `done` is recorded once it has left `grad`) and comes back into a fresh block at the second
// unit's backward fetch (unpark: the main stream's later work waits for it). 1 when the
// config allows it (offload at stage 2 or 3); zero_init decides (ZeroOffload.park_tied).
int zero_offload_parks_tied(const ZeroConfig *cfg);
void zero_offload_park(Zero *z, int ti, void *grad, ZeroEvent *done);
void zero_offload_unpark(Zero *z, int ti, void *grad);
void zero_offload_step_begin(Zero *z);             // NVMe byte counters
void zero_offload_step_end(Zero *z);

#endif
