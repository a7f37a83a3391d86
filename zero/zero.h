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
  Gradient buffers handed out in backward are zero when the step (stages 0-1) or the
  micro-step (stages 2-3) begins; the model adds (+=) into them and never clears them.

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
bucketing. Stages 0 and 1 reduce once per step, during the last micro-step's backward
(each rank accumulates its micro-steps first: sent per step Psi + Psi whatever the
accumulation); stages 2 and 3 reduce every micro-step. At equal world size stages 0 and 1
are bit-identical, 2 and 3 are bit-identical, and all four are without accumulation.
The bf16 refresh of master weights uses stochastic rounding keyed by (seed, step,
global element index). The global gradient norm is the same bits on every rank and at
every stage: per-shard sums of squares in a fixed order, then added in rank order.

ZeRO++ (ZeroConfig's qwz, hpz, qgz, hier_reduce; zero/README.md): int8 forward gathers,
a secondary partition for backward gathers inside a group, gradients in two hops (int4
with qgZ). wire.h has what they send, gather.c and reduce.c the paths.

Files (each folder's README.md says what it may use; dev/tools/check_layout.py holds
the order, lowest first):
  zero.h           this header: all a trainer needs, with comm.h (the world) and
                   backend.h (what a machine provides, as a table of functions)
  partition.c, arena.c   the split of every tensor, pool placement
  kernels/         element code both backends run: block quantization and the ZeRO++
                   wire records (CUDA twins in cuda/), the host kernels (AdamW, sums)
  io/              the NVMe engine, checkpoint file formats, consolidation
  comm/            the world: start-up (MPI or environment), groups, MPI collectives,
                   byte counts, the watchdog, the bootstrap without MPI
  host/            the host backend;   cuda/: the CUDA backend, NCCL, the _cuda kernels
  state.c          the state the orchestration shares, its helpers (fail, alloc, order)
  offload.c        the tiers: optimizer states and parameters on the host or NVMe
  gather.c, reduce.c   stage-3 gathering; gradient buckets (phases: never call each other)
  zero.c           the orchestrator: init, the hooks, the step
  checkpoint.c, report.c, dryrun.c   built on zero.c: save/load, figures, the dry run
zero/README.md shows how to plug it in.
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

// ZERO_U8: raw bytes (ZeRO++'s quantized records, wire.h); only collectives move them.
typedef enum { ZERO_F32 = 0, ZERO_BF16 = 1, ZERO_U8 = 2 } ZeroDType;

// Where a kind of state lives (ZeRO-Offload: HOST; ZeRO-Infinity: NVME as well).
typedef enum { ZERO_TIER_DEVICE = 0, ZERO_TIER_HOST = 1, ZERO_TIER_NVME = 2 } ZeroTier;
const char *zero_tier_name(ZeroTier t);   // "device", "cpu", "nvme" (DeepSpeed's names)

typedef struct {
    const char *name;                     // unique (zero_init refuses a second tensor of one name)
    size_t numel;
    int decay;                            // AdamW weight decay applies to this tensor
    int units[ZERO_MAX_TENSOR_UNITS];     // units that read it
    int num_units;
} ZeroTensor;

#define ZERO_AUTO ((size_t)-1)   // a size zero_init chooses from the model (the default)

typedef struct {
    int stage;                  // 0..3
    ZeroDType param_dtype;      // working parameters the model reads (bf16: stochastically rounded)
    ZeroDType grad_dtype;       // gradients the model writes
    size_t bucket_elems;        // gradients reduced in buckets of about this many elements
                                //   (ZERO_AUTO: sized so that stage 2 holds less than stage 1)
    size_t prefetch_elems;      // stage 3: gather ahead up to this many elements
                                //   (ZERO_AUTO: one typical unit, within what stage 3 saves)
    size_t max_live_elems;      // stage 3: at most this many gathered elements alive at once
                                //   (0: the largest unit plus prefetch_elems)
    size_t persist_elems;       // stage 3: tensors at most this big stay gathered (ZERO_AUTO: 65536;
                                //   with the parameters on NVMe none: each is read with its unit, so
                                //   memory does not grow with the model's depth)
    uint64_t seed;              // stochastic rounding
    int node_size;              // ranks per (logical) node, for intra/inter byte counts
    double timeout_s;           // a collective taking longer ends the run with a message
    ZeroTier optimizer_tier;    // stages 1-3: fp32 master, AdamW m and v and the fp32 reduced gradient
                                //   shard; the optimizer then runs on the CPU (offload.c)
    double optimizer_ratio;     // with optimizer_tier cpu: the fraction of the parameters whose optimizer
                                //   states are offloaded (0 or 1: all; DeepSpeed's offload_optimizer.ratio).
                                //   The tensors of the layout's first (1 - ratio) stay on the device.
    int dpu_from;               // with optimizer_tier cpu: from optimizer step N on, step t's CPU AdamW
                                //   runs beside step t+1's forward and backward, which train on the
                                //   parameters of step t-1 (ZeRO-Offload's one-step delayed parameter
                                //   update); 0: off. Changes the math by design (offload.c)
    ZeroTier param_tier;        // stage 3: the working-parameter shard gathers read from
    const char *nvme_path;      // folder for the NVMe swap file (a NVME tier)
    size_t nvme_tile_elems;     // elements per NVMe transfer of a tensor (0: 1M)
    int nvme_queue_depth;       // NVMe requests in flight at most (0: 8; DeepSpeed's aio queue_depth)
    size_t nvme_block_bytes;    // the most bytes one NVMe read or write call moves, a multiple of 4096
                                //   (0: 1 GiB; DeepSpeed's aio block_size)
    // ZeRO++ (each switch on its own; wire.h has the formats, gather.c and reduce.c the paths)
    int qwz;                    // stage 3: forward all-gathers move int8 blocks (qwZ)
    int hpz;                    // stage 3: ranks per secondary partition (hpZ); 0 or 1: off
    int qgz;                    // gradients reduced in two hops, int4 blocks on the wire (qgZ)
    int hier_reduce;            // the same two hops with the gradients as they are
    int fast_reduce;            // gradients rounded to bf16 and summed by the library's reduce-scatter
                                //   (NCCL, MPI) in its own order: fewer bytes, faster, but the bits depend
                                //   on the rank count and the library (reduce.c)
    int qwz_block, qgz_block;   // values per quantization block (0: QUANT_BLOCK_DEFAULT, QGZ_BLOCK_DEFAULT)
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
    int t;                      // 1-based optimizer step (bias correction, rounding seed); < 1 ends the run
} ZeroStepArgs;

// Reduces what is left, computes the global gradient norm across shards, clips, runs
// AdamW on the local shard, refreshes working parameters. Returns the norm (pre-clip).
// A NaN or infinite norm skips the step: nothing is applied (master weights, AdamW m and
// v, the working parameters and the t a later save records stay as before it), on every
// rank alike since the norm is the same bits everywhere. The caller sees the non-finite
// norm and decides whether to go on. The host waits inside it only for the norm (and, with
// offload, for the host's part of the step); the update runs on after it returns, ahead of
// whatever the caller queues next on the main stream (the plugin's own streams wait for it).
float zero_step(Zero *z, const ZeroStepArgs *args);
// zero_step that skips whatever the norm (returned all the same): for a step the trainer
// rejects for another reason, e.g. a non-finite loss. `skip` must be the same on every
// rank (derive it from all-reduced values); it is an argument so that every rank makes
// the same collective calls either way.
float zero_step_maybe_skip(Zero *z, const ZeroStepArgs *args, int skip);
// zero_step_maybe_skip that also skips when veto(norm, ctx) returns nonzero (a trainer's
// outlier check on the norm, which only the step knows): veto must decide alike on every
// rank given the same norm. It is called only for a finite norm and skip 0.
float zero_step_veto(Zero *z, const ZeroStepArgs *args, int skip, int (*veto)(float norm, void *ctx), void *ctx);
// dpu_from: the update a step left running on the CPU (delayed parameter update) lands: the
// working parameters become its result, as the next step's update would have made them.
// Collective, between steps; zero_save and zero_gather_master call it first, so a
// checkpoint holds, and a resumed run continues from, exactly what the running one does. A
// trainer calls it before whatever else it does at a checkpoint step (validation, samples),
// so that the resumed run, which starts landed, sees the same parameters there. Nothing to
// do without a delayed update in flight.
void zero_land_update(Zero *z);

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
    size_t nvme[ZERO_USE_KINDS];    // and in the NVMe swap file (offload)
    uint64_t nvme_read, nvme_written;  // bytes moved to and from NVMe, all steps so far
    double nvme_busy_s;                // time with NVMe requests in flight, all steps so far
    size_t param_pool_elems, param_pool_peak;  // stage 3 gather pool: capacity, most ever live
    size_t grad_pool_elems, grad_pool_peak;    // stage 2/3 gradient pool
    // stage 3's events count inside zero_begin_step .. zero_step only, as the bytes sent do
    uint64_t gathers;       // stage 3: tensors all-gathered on demand at fetch
    uint64_t prefetches;    // stage 3: tensors all-gathered ahead of their fetch
    uint64_t gather_hits;   // stage 3: fetches of a tensor still gathered (kept or prefetched)
    uint64_t evictions;     // stage 3: gathered tensors dropped to make room before use
    uint64_t wasted_gathers;// stage 3: tensors prefetched or kept, then dropped before a fetch used them
    uint64_t buckets;       // gradient reductions (an all-to-all each; the two-hop path: one per hop)
    uint64_t qwz_gathers;   // stage 3: tensors gathered as int8 records (qwZ)
    uint64_t hpz_gathers;   // stage 3: tensors gathered inside the hpZ group (backward)
    size_t secondary_bytes; // hpZ: this rank's secondary partition (counted under parameters)
} ZeroStats;

void zero_stats(const Zero *z, ZeroStats *out);

// Sums a few doubles across ranks (losses, counters); result on every rank.
void zero_allreduce_sum_f64(Zero *z, double *values, int n);

// Copies the full fp32 master of tensor t into out (gathered from all ranks; every rank
// must call it). For tests and consolidation.
void zero_gather_master(Zero *z, int tensor, float *out);

/* ==================================================================================
   Checkpoints, accounting and the dry run
   (checkpoint.c, consolidate.c, report.c, dryrun.c; the file format is in zckpt.h)
   ================================================================================== */

// The run's identity: 128 random bits, drawn by rank 0 in zero_init and shared with every
// rank, as 32 hex digits. zero_load replaces it with the loaded checkpoint's, so a resumed
// run keeps the identity of its first start. Every rank file and manifest records it with
// the step, and a load refuses a rank file of another run or of another step.
#define ZERO_RUN_ID_HEX 33   // 32 hex digits and a NUL
const char *zero_run_id(const Zero *z);

// Sharded checkpoint of the optimizer state (fp32 master, AdamW m and v) between steps.
// Collective. Rank 0 first removes a manifest.json an earlier save of STEP left in
// DIR/zero_STEP (synced), then every rank writes DIR/zero_STEP/rank_RRRRR.bin (its owned
// elements, run id and step, CRC-32; temp file + fsync + rename); rank 0 then writes extra.bin (rank 0's
// `extra` blob, may be NULL/0), manifest.json (run id, step, world, stage, tensor table,
// every file's size and body CRC) and last DIR/latest_zero. Returns 0 on every rank, or
// -1 on every rank after the failing rank printed why (nothing of the new checkpoint is
// then referenced by latest_zero). Rank 0 collects the files' sizes and CRCs by a gather:
// every other rank sends O(1) bytes, whatever the world size.
int zero_save(Zero *z, const char *dir, int step, const void *extra, size_t extra_bytes);
// Loads DIR/zero_STEP (step < 0: the one latest_zero names). Collective. The tensor table
// (names, sizes) must match; the world size and stage may differ: each rank reads its own
// ranges from whichever saved rank files hold them, verifying their CRCs. Working
// parameters are then refreshed as after the saved step (same t for bf16 rounding), so a
// resumed run is bit-identical (a checkpoint of another working-parameter precision loads
// too, saying so in one line). extra receives the saved blob (extra_bytes must equal its
// size). Returns 0, or -1 on every rank (nothing changed) after printing which file or
// tensor is wrong (a rank file of another run or step is named with both run ids and
// steps). On success the run adopts the checkpoint's run id.
int zero_load(Zero *z, const char *dir, int step, void *extra, size_t extra_bytes);
// The step DIR/latest_zero names; -1 when there is none (no checkpoint yet), -2 when the
// file exists but is malformed, or is no regular file (zero_load then says why).
int zero_latest(const char *dir);
// Rank 0 removes all but the newest `keep` published checkpoints in dir and those whose
// step is a multiple of major (> 0) (others no-op; keep < 1: nothing is removed). Published:
// a manifest, and every file it names there at its size (a folder whose manifest this build
// cannot read is left alone and not counted). A folder's manifest is
// removed (and synced) before its other files, so a prune cut short leaves none that looks published.
int zero_prune(Zero *z, const char *dir, int keep, long long major);

// Consolidation without MPI or a Zero: the fp32 master weights of a checkpoint, every
// tensor in table order, padding left out (n must be the total element count). `which`
// in zero_consolidate_state: 0 master, 1 AdamW m, 2 AdamW v. Return 0, or -1 after
// printing why.
int zero_consolidate(const char *ckpt_dir, int step, float *out_full_params, size_t n);
// The trainer's opaque blob saved with a checkpoint (CRC-checked; its size must match).
int zero_checkpoint_extra(const char *ckpt_dir, int step, void *extra, size_t extra_bytes);
int zero_consolidate_state(const char *ckpt_dir, int step, int which, float *out, size_t n);
// The checkpoint's tensor table and settings (step < 0: latest). Free with _free.
typedef struct {
    int world, stage, last_t, num_tensors;
    long long step;
    ZeroDType param_dtype;
    uint64_t seed;
    char run_id[ZERO_RUN_ID_HEX];
    char **names;
    size_t *numel;
    size_t numel_total;
    size_t extra_bytes;
} ZeroCheckpointInfo;
int zero_checkpoint_info(const char *ckpt_dir, int step, ZeroCheckpointInfo *out);
void zero_checkpoint_info_free(ZeroCheckpointInfo *info);

// Accounting: what one rank holds and sent. The live figures (zero_figures) and the dry
// run's (zero_predict) are the same record, so they can be compared field by field.
#define ZERO_NUM_COLLS 6   // all_gather, all_to_all, all_reduce, broadcast, gather, reduce_scatter (comm.h's order)
// What the plugin's collectives carry, for the bytes per switch (ZeRO++ 3.4's table):
typedef enum {
    ZERO_FLOW_FWD_GATHER = 0,   // stage 3: forward all-gathers of parameters (qwZ: int8 records)
    ZERO_FLOW_BWD_GATHER,       // stage 3: backward all-gathers (hpZ: inside the secondary group)
    ZERO_FLOW_STEP_GATHER,      // working parameters gathered at the step (stages 0-2; persistent ones)
    ZERO_FLOW_GRAD,             // gradients in one flat collective (all-to-all; reduce-scatter with fast_reduce)
    ZERO_FLOW_GRAD_HOP1,        // gradients: the intra-node hop (--hier-reduce, qgZ)
    ZERO_FLOW_GRAD_HOP2,        // gradients: the inter-node hop
    ZERO_FLOWS
} ZeroFlow;
const char *zero_flow_name(ZeroFlow f);   // "forward_param_gather", ...
typedef struct {
    size_t device[ZERO_USE_KINDS], host[ZERO_USE_KINDS], nvme[ZERO_USE_KINDS];   // bytes by use, as zero_stats
    uint64_t nvme_read, nvme_written;   // NVMe traffic inside the steps, summed over them
    double nvme_busy_s;                 // and the time it had requests in flight
    uint64_t nvme_last_read, nvme_last_written;   // the last step's alone (steady state after the first)
    size_t act_device, act_host;        // activations: the trainer's figures
    size_t param_pool_elems, param_pool_peak, grad_pool_elems, grad_pool_peak;
    uint64_t gathers, prefetches, gather_hits, evictions, wasted_gathers, buckets;
    int local_size, num_nodes;          // the node layout the byte counts used
    int grad_accum;                     // of the last step
    uint64_t steps;                     // optimizer steps the sums below cover
    // sent by this rank inside zero_begin_step .. zero_step (the trainer's own
    // zero_allreduce_sum_f64 calls excluded), summed over those steps
    uint64_t calls[ZERO_NUM_COLLS], intra_bytes[ZERO_NUM_COLLS], inter_bytes[ZERO_NUM_COLLS];
    // the same bytes by what they carry (ZeroFlow), summed over those steps
    uint64_t flow_intra[ZERO_FLOWS], flow_inter[ZERO_FLOWS];
    uint64_t qwz_gathers, hpz_gathers;
    size_t secondary_bytes;
    // the calling thread's seconds inside steps, summed over them: in the hooks (waits for
    // gathers, pool room), in zero_step (reduction tail, norm, optimizer, refresh), and from
    // zero_begin_step to the end of zero_step; what is left is the model's own work
    double hook_s, step_s, wall_s;
    double optimizer_s;    // offload: the CPU AdamW's own seconds (its arithmetic): inside zero_step, or for
                           // a deferred update on the host stream during the next forward, or for a
                           // delayed one (dpu_from) on its own stream beside the next step
    double update_wait_s;  // dpu_from: the calling thread's seconds waiting, in zero_step, for the update
                           // it left running a step earlier (0 when the CPU's step is hidden)
    double accum_wait_s;   // and the host stream's, accumulating a gradient the update still read
} ZeroFigures;
typedef ZeroFigures ZeroPrediction;

void zero_figures(const Zero *z, ZeroFigures *out);           // this rank, no communication
void zero_report_set_activation_bytes(Zero *z, size_t device_bytes, size_t host_bytes);
// Collective: gathers every rank's figures to rank 0 (O(1) bytes sent per other rank),
// which writes path atomically as JSON (bytes by kind on device and host,
// "optimizer_states" = fp32 master + m + v, bytes sent per collective per step, the ZeRO
// formula). extra_json_fields: NULL or a JSON object whose
// fields are added at the top level. With anything on NVMe, rank 0 also prints its swap
// file's bytes read and written per step. Returns 0, or -1 on every rank.
int zero_report_write(Zero *z, const char *path_json, const char *extra_json_fields);
// Rank 0 prints a short table of its figures (not collective).
void zero_report_print(const Zero *z);

// Dry run: the figures every rank of `world` would show after `steps` optimizer steps of
// grad_accum micro-steps, each a forward over units 0..U-1 and a backward over U-1..0
// (grads_ready before release), without MPI and without allocating model memory:
// zero_init and the hooks run against a backend that only reserves address space and
// counts bytes, so the numbers are the live ones by construction. cfg->node_size 0 means
// one node (or LOCAL_WORLD_SIZE). out_per_rank: world entries. Returns 0 or -1.
int zero_predict(const ZeroTensor *tensors, int n, int num_units, const ZeroConfig *cfg, int world,
                 int grad_accum, int steps, ZeroPrediction *out_per_rank);
// Writes the same JSON as zero_report_write for the prediction (per_rank: world entries
// from zero_predict, activations filled in by the caller; NULL: predicted here).
int zero_predict_write(const char *path_json, const ZeroTensor *tensors, int n, int num_units,
                       const ZeroConfig *cfg, int world, int grad_accum, int steps,
                       const ZeroPrediction *per_rank, const char *extra_json_fields);
// What the trainer adds to the whole dry run: the activation bytes its model allocates on
// each rank (the plugin knows nothing of the model; every rank runs the same one) and the
// device memory a rank has, to check every rank's total against.
typedef struct {
    size_t act_device, act_host;   // as zero_report_set_activation_bytes
    size_t device_budget;          // bytes per rank; 0: no check
    int device_is_host;            // the backend's device memory is host memory (the CPU trainer):
                                   //   the budget then covers the host tier too, and the process
    size_t runtime_bytes;          // with device_is_host: what the process holds besides the plugin's
                                   //   buffers and the activations (code, libraries, MPI, the data)
    size_t host_budget;            // a GPU's dry run: host bytes per rank for offload's host tier, the
                                   //   pinned buffers and host activations; 0: no check
    size_t act_nvme;               // bytes per rank of the model's own swap file under cfg->nvme_path
    int steps;                     // the run's optimizer steps: the bytes sent are their average, as
                                   //   the live report's; 0: a step after the first (the steady state)
} ZeroDryRunModel;
// The whole dry run: predicts, writes the report JSON to path_json, prints a summary. With
// a budget, each rank's device total (model states, buffers and activations; with
// device_is_host also the host tier and runtime_bytes: the process's peak) is compared
// with it: printed per group of ranks alike, and in the JSON ("device_budget_bytes", per
// rank "device_budget": fits, headroom and the bytes counted; "process_peak_bytes").
// With a host budget, each rank's host total likewise ("host_budget_bytes", per rank
// "host_budget"); with both budgets and the optimizer in host memory, when a rank does not
// fit, the largest optimizer_ratio (in steps of 0.05) that fits both is printed, or that none does.
// When anything lives on NVMe (the plugin's states or model->act_nvme), the swap files of
// the ranks that share a machine are compared with the free space under cfg->nvme_path
// (where that folder exists here).
// model may be NULL (no activations, no budget).
// Returns 0 (all ranks fit, or no budget), 1 (some rank or the disk does not fit), -1 (error).
int zero_dry_run(const ZeroTensor *tensors, int n, int num_units, const ZeroConfig *cfg, int world,
                 int grad_accum, const ZeroDryRunModel *model, const char *path_json);
// A dry run's swap files (what: which, bytes in all) against the free space under dir, as
// one printed line "disk: WHAT, X GiB under DIR, which has Y GiB free: fits" (or "does not
// fit"; "not checked" where dir is not here). Returns 1 when they do not fit, else 0.
int zero_check_disk(const char *what, uint64_t bytes, const char *dir);

#ifdef __cplusplus
}
#endif
#endif
