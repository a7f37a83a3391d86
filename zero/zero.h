/*
zero.h: the ZeRO plugin's one public header. It knows nothing about GPT-2.

A trainer describes its parameters as a table of tensors, each used by one or more
"units" (a transformer block, the embeddings, ...), and calls the plugin at fixed points:

    z = zero_init(tensors, ntensors, nunits, &cfg, comm, backend, init_fn, init_ctx);
    per optimizer step:
      zero_begin_step(z, grad_accum)
      per micro-step m:
        forward:  for each unit u in order:   p = zero_fetch(z, u, 0) ... zero_release(z, u, 0)
        backward: for each unit u reversed:   p = zero_fetch(z, u, 1) ... zero_grads_ready(z, u);
                                             zero_release(z, u, 1)   (either order of the last two)
      norm = zero_step(z, &adamw_args)
  Forward-only passes (evaluation) may fetch/release between steps.
  Gradient buffers handed out in backward are zero when the step (stage 0) or the
  micro-step (stages 1-3) begins; the model adds (+=) into them and never clears them.

What each stage keeps on a rank (N ranks, Psi parameters; ZeRO paper section 5):
  0  full working params, full grads, full fp32 master + m + v (plain data parallel)
  1  full working params, full grads, 1/N of master + m + v
  2  full working params, grads only while a unit's backward needs them, 1/N of master+m+v
  3  working params only while a unit runs (gathered on fetch, prefetched along the
     fetch order recorded in the first micro-step), transient grads, 1/N of master + m + v
All buffers are allocated by zero_init (stage 2/3 gradients and stage 3 gathers come from
fixed pools); nothing is allocated afterwards.

Every tensor is split across all ranks (ZeRO-Infinity 6.1): rank r owns elements
[r*S, (r+1)*S) of the tensor padded to N*S, S a multiple of ZERO_ALIGN_ELEMS. Padding
is zero and excluded from norms.

Numerics: gradients are reduced by an all-to-all of each rank's slices followed by a
sum in rank order 0..N-1 (fp32), so the reduced value of an element never depends on
bucketing or stage: stages 1, 2 and 3 are bit-identical at equal world size. They
reduce every micro-step; stage 0 all-reduces once per step (same reduction, applied to
the accumulated gradient), so with gradient accumulation it differs by rounding only.
The bf16 refresh of master weights uses stochastic rounding keyed by (seed, step,
global element index). The global gradient norm is the same bits on every rank and at
every stage: per-shard sums of squares in a fixed order, then added in rank order.

Files: zero.c (life cycle, step), reduce.c (gradient buckets), gather.c (stage-3
gathering), partition.c (the split), arena.c (pool placement), backend.h and
backend_host.c (what a machine provides), comm.h, comm_mpi.c and watchdog.c (the world,
byte accounting, collective timeout). zero/README.md shows how to plug it in.
*/
#ifndef ZERO_ZERO_H
#define ZERO_ZERO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZERO_ALIGN_ELEMS 16       // shard sizes are multiples of this (64-byte fp32 vectors)
#define ZERO_MAX_TENSOR_UNITS 2   // a tensor may be shared by this many units (tied wte)

typedef enum { ZERO_F32 = 0, ZERO_BF16 = 1 } ZeroDType;

typedef struct {
    const char *name;
    size_t numel;
    int decay;                            // AdamW weight decay applies to this tensor
    int units[ZERO_MAX_TENSOR_UNITS];     // units that read it
    int num_units;
} ZeroTensor;

typedef struct {
    int stage;                  // 0..3
    ZeroDType param_dtype;      // working parameters the model reads (bf16: stochastically rounded)
    ZeroDType grad_dtype;       // gradients the model writes
    size_t bucket_elems;        // stages 1-3: gradients reduced in buckets of about this many elements
    size_t prefetch_elems;      // stage 3: gather ahead up to this many elements
    size_t max_live_elems;      // stage 3: at most this many gathered elements alive at once
                                //   (0: the largest unit plus prefetch_elems)
    size_t persist_elems;       // stage 3: tensors at most this big stay gathered
    uint64_t seed;              // stochastic rounding
    int node_size;              // ranks per (logical) node, for intra/inter byte counts
    double timeout_s;           // a collective taking longer ends the run with a message
} ZeroConfig;

void zero_config_defaults(ZeroConfig *cfg);

// Communication world (zero/comm.h has the details): rank, world, node layout, and the
// bytes each collective sent, intra- and inter-node apart.
typedef struct ZeroComm ZeroComm;
// Backend: memory, copies, collectives and the numeric kernels (zero/backend.h).
typedef struct ZeroBackend ZeroBackend;

// Fills out[0..count) with the initial fp32 values of elements [offset, offset+count)
// of tensor t. Called only for the ranges this rank owns, at every stage (partition at
// init: no rank initializes the full model; the rest arrives by all-gather).
typedef void (*ZeroInitFn)(void *ctx, int tensor, size_t offset, size_t count, float *out);

typedef struct Zero Zero;

Zero *zero_init(const ZeroTensor *tensors, int num_tensors, int num_units, const ZeroConfig *cfg,
                ZeroComm *comm, const ZeroBackend *backend, ZeroInitFn init, void *init_ctx);
void zero_free(Zero *z);

// What a unit's tensors look like to the model while it runs: pointers in the order the
// unit's tensors appear in the tensor table.
typedef struct {
    int count;
    const int *tensors;  // tensor indices
    void **params;       // working parameters (param_dtype), full tensors
    void **grads;        // gradient buffers (grad_dtype), full tensors; NULL in forward
} ZeroUnitView;

void zero_begin_step(Zero *z, int grad_accum);
const ZeroUnitView *zero_fetch(Zero *z, int unit, int is_backward);
void zero_release(Zero *z, int unit, int is_backward);
void zero_grads_ready(Zero *z, int unit);

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    float grad_clip;            // <= 0: no clipping
    int t;                      // 1-based optimizer step (bias correction, rounding seed)
} ZeroStepArgs;

// Reduces what is left, computes the global gradient norm across shards, clips, runs
// AdamW on the local shard, refreshes working parameters. Returns the norm (pre-clip).
float zero_step(Zero *z, const ZeroStepArgs *args);

// What this rank holds and did (for the start-up report, the JSON accounting and tests).
typedef enum {
    ZERO_USE_PARAMS = 0,   // working parameters: full (stages 0-2) or shard + persistent + gather pool (3)
    ZERO_USE_GRADS,        // gradient buffers the model writes (full or a pool) + the fp32 reduced shard
    ZERO_USE_MASTER,       // fp32 master weights (full at stage 0, the shard otherwise)
    ZERO_USE_OPTIM,        // AdamW m and v
    ZERO_USE_BUFFERS,      // communication staging
    ZERO_USE_KINDS
} ZeroUse;

typedef struct {
    size_t device[ZERO_USE_KINDS];  // bytes by use, in the backend's device memory
    size_t host[ZERO_USE_KINDS];    // and in host memory (offload)
    size_t param_pool_elems, param_pool_peak;  // stage 3 gather pool: capacity, most ever live
    size_t grad_pool_elems, grad_pool_peak;    // stage 2/3 gradient pool
    uint64_t gathers;       // stage 3: tensors all-gathered on demand at fetch
    uint64_t prefetches;    // stage 3: tensors all-gathered ahead of their fetch
    uint64_t gather_hits;   // stage 3: fetches of a tensor still gathered (kept or prefetched)
    uint64_t evictions;     // stage 3: gathered tensors dropped to make room before use
    uint64_t wasted_gathers;// stage 3: tensors prefetched or kept, then dropped before a fetch used them
    uint64_t buckets;       // gradient reductions (one all-to-all each)
} ZeroStats;

void zero_stats(const Zero *z, ZeroStats *out);

// Sums a few doubles across ranks (losses, counters); result on every rank.
void zero_allreduce_sum_f64(Zero *z, double *values, int n);

// Copies the full fp32 master of tensor t into out (gathered from all ranks; every rank
// must call it). For tests and consolidation.
void zero_gather_master(Zero *z, int tensor, float *out);

#ifdef __cplusplus
}
#endif
#endif
