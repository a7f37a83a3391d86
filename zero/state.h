/*
state.h: the plugin's state (struct Zero, one entry per tensor and unit) and the helpers
every module of the orchestration shares (state.c). It sits below them all: offload.c,
gather.c, reduce.c, zero.c and the modules on top of zero.c include it, and it calls
nothing of theirs. Not for trainers.
*/
#ifndef ZERO_STATE_H
#define ZERO_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "arena.h"
#include "backend.h"
#include "comm.h"
#include "io/nvme.h"
#include "partition.h"
#include "trace.h"
#include "zero.h"

// n rounded up to a multiple of m (m > 0).
static inline size_t zero_round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }


// One tensor of the table: what the world knows of it, the views the model reads and
// writes, and each phase's own marks (written by that phase's file alone).
typedef struct {
    char *name;
    int decay, num_units;
    int units[ZERO_MAX_TENSOR_UNITS];
    const ZeroTensorLayout *lay;
    int persistent;            // stage 3: kept gathered for good
    // the views: working parameters (padded, lay->split.padded elements) and the gradient
    // buffer the model accumulates into
    void *work;                // stages 0-2 and persistent: fixed; stage 3: a pool block or NULL
    void *grad;                // NULL when none is live
    struct {                   // gather.c (stage 3)
        size_t block;          // pool offset, ZERO_ARENA_FULL when not placed
        int issued;            // its all-gather is enqueued (work holds this step's values)
        int used;              // a fetch used it since it was gathered
        int main_waited;       // the main stream waits for its gather (a fetch did)
        int holders;           // fetched units using it now
        ZeroEvent *ready;      // recorded on the gather stream after its gather
        uint64_t gather_id;    // which all-gather filled it (tensors of one share a wait)
        uint64_t stamp;        // visit mark for look-ahead walks
        int val;               // what work holds once issued (VAL_EXACT, VAL_QWZ)
        size_t qrec_off;       // qwZ: this rank's int8 record of its shard in gather.qwz_own (bytes)
        size_t sec_off;        // hpZ: its secondary slice in gather.hpz_copy (elements)
        uint64_t sec_version;  // hpZ: the gather.param_version its secondary slice holds (0: none)
        int sec_val;           // hpZ: and what kind of values (VAL_*)
    } gather;
    struct {                   // reduce.c
        size_t grad_block;     // stages 2-3: gradient pool offset, ZERO_ARENA_FULL when none
        int grads_seen;        // units of this tensor whose grads_ready came this micro-step
        int parked;            // tied, offload: its first unit's partial gradient waits in the offload tier
    } reduce;
} ZeroTensorState;

// One unit.
typedef struct {
    int n;
    int *tensors;
    void **params, **grads;
    ZeroUnitView view;
    int fetched;               // -1 none, 0 forward, 1 backward
    int bwd_done, ready_done;  // this micro-step
    size_t pool_need;          // stage 3: padded elements of its non-persistent tensors
    size_t grad_need;          // padded elements of its unshared tensors' gradients
    size_t grad_tied;          // and of its tied ones' (read by another unit too)
    uint64_t t_open;           // with a trace: when its fetch returned (its work's span starts)
    int gpu_span;              // with a trace on a device backend: its work's span on the main stream
    char label[40];            // with a trace: "u12 h3.fcw.t1", the unit and its first tensor
} ZeroUnitState;

// Stage 3: what a gathered block holds: the working parameters themselves, or qwZ's
// dequantized int8 copy of them (forward only; see gather.c).
enum { VAL_EXACT = 0, VAL_QWZ = 1 };

// Stages 2-3: a pool block whose gradient a reduction in flight still reads; it returns to
// the pool once bucket `bucket` (a sequence number, see ZeroReduce.bucket_events) has finished.
typedef struct { size_t off; uint64_t bucket; } ZeroDeferredBlock;

enum { ORDER_NONE = 0, ORDER_RECORDING, ORDER_READY, ORDER_INVALID };

// Offload (offload.c): the kinds of per-tensor shard state it keeps off the device.
enum { ZK_MASTER = 0, ZK_M, ZK_V, ZK_GRAD, ZK_PARAM, ZK_KINDS };
#define OFF_SLOTS 3      // host slots a bucket's reduced sums are copied into, in turn
#define OFF_JOBS 16      // bucket descriptions the host stream may lag behind the caller by

// One bucket's reduced sums in a host slot, for the host stream to add into the offloaded
// gradient accumulator. Written by the calling thread when the bucket is queued and read
// by the host stream when it runs, so a record is reused only once `busy` is clear.
typedef struct {
    Zero *z;
    atomic_int busy;         // queued, not yet run
    int slot, first, last;   // first: the accumulator starts from zero; last: take norm partials
    int n;
    int *tensors;            // ZeroOffload.job_cap capacity
    size_t *at;              // each tensor's place in the slot
} OffJob;

// The delayed update's operation on tensor ti (ZeroOffload.dpu_items[ti]).
typedef struct { Zero *z; int ti; } OffDpu;

// One tile of the NVMe step: elements [c, c + n) of tensor ti's shard.
typedef struct OffTile { int ti; size_t c, n; } OffTile;

// A stage-3 gather's read of tensor ti's parameters from NVMe, run by the host stream into
// dst (the gather buffer's own slot); reused once `busy` is clear, like OffJob.
typedef struct OffRead {
    Zero *z;
    int ti;
    atomic_int busy;
    int settled;             // run by the read stream: nothing of ti is stale or being written
    void *dst;
} OffRead;

// A tied tensor's partial gradient on its way to the park (out) or back (offload.c), run by
// the host stream; one record per tensor and direction, reused once `busy` is clear.
typedef struct OffPark {
    Zero *z;
    int ti, out;
    atomic_int busy;
    void *dev;               // the gradient pool block
} OffPark;

typedef struct {
    ZeroTier opt, param;
    // A partial offload (optimizer_ratio < 1): tensors [0, opt_first) keep their optimizer
    // states on the device, the rest are offloaded. The device holds the shard layout's
    // prefix [0, opt_base), so its offsets are the unsharded step's; the host buffers hold
    // [opt_base, shard_total). Whole offload: 0 and 0; none: num_tensors and shard_total.
    int opt_first;
    size_t opt_base;
    int park_tied;           // tied gradients park in the offload tier between their units
    ZeroTier park;           // stages 2-3 with offload: where tied tensors' partial gradients wait
                             //   between their two units (DEVICE: they stay in the pool)
    OffPark *parks;          // 2 per tensor: [2 ti] out, [2 ti + 1] back
    char *park_host;         // HOST park: every tied tensor's gradient, park_at[ti] bytes in
    uint64_t *park_at;       // per tensor: its place in park_host, or its file offset (NVME park)
    int param_is_master;     // fp32 working parameters in the optimizer's tier: the master is them
                             //   (a refresh copies them bit for bit), so it is stored once
    ZeroStream *host_stream; // host stream: gradient accumulation, NVMe reads of parameters
    ZeroStream *upload_stream;   // device stream: uploads of refreshed working parameters
    // NVMe parameters: from the step's first backward read on, reads run on a stream and
    // engine of their own, so that they do not queue behind the accumulation's reads and
    // writes of the gradient
    ZeroStream *read_stream, *read_upload;   // host stream; device stream of its uploads
    ZeroNvme *read_nvme;     // a second engine on the same swap file, one buffer
    ZeroEvent *read_mark, *settled_mark;
    int unwaited_gather;       // a pool block was freed whose all-gather nothing waited for yet
    int settled;             // main thread: the host stream has caught every tensor up and
                             //   drained their writes since the last update (settle)
    float *host[ZK_KINDS];   // the HOST tier's arrays, in shard layout (ZK_PARAM: working dtype)
    void *dev_work;          // stage 3, optimizer offloaded, parameters on the device: the working shard
    float *dev_sums;         // device: a bucket's reduced sums (one slot's worth)
    float *slot[OFF_SLOTS];  // host: where they are copied
    size_t slot_elems;
    ZeroEvent *slot_full[OFF_SLOTS], *slot_free[OFF_SLOTS], *host_mark, *upload_mark;
    OffJob job[OFF_JOBS];
    int job_cap;             // tensors a record holds: the most one bucket can list
    uint64_t jobs_queued;    // job k uses job[k % OFF_JOBS] and slot k % OFF_SLOTS
    void *stage;             // pinned: refreshed parameters on their way up (a tile)
    float *down;             // pinned: a tile of the device master on its way down (optimizer on the device)
    // NVME tiers
    ZeroNvme *nvme;
    uint64_t *file_off[ZK_KINDS];   // file offset of each tensor's own range, per kind
    struct OffTile *tiles;   // the NVMe step's tiles over every tensor's shard, in order
    size_t ntiles;
    size_t *tile_first;      // tensor ti's tiles are tiles[tile_first[ti] .. tile_first[ti + 1])
    // The update folded into the next gather (optimizer and fp32 parameters on NVMe): the step
    // leaves each tensor `stale`, and its next read (a gather, an accumulation, a checkpoint)
    // runs its AdamW tiles first, handing the fresh master straight to the gather.
    int defer;
    unsigned char *stale;
    AdamWParams pend;        // the deferred step's AdamW settings and t
    int pend_t;
    // The delayed parameter update (cfg.dpu_from): the step's AdamW and rounding run on their
    // own host stream, an operation per tensor from the last (backward's order), beside the
    // next step's forward and backward; its working parameters wait in `dpu_work` until the
    // next step lands them. An accumulation of tensor ti waits until the update is past it
    // (dpu_done counts finished tensors from the top), since both use host[ZK_GRAD].
    ZeroStream *dpu_stream;
    OffDpu *dpu_items;
    void *dpu_work;          // pinned: the update's working parameters (working dtype, host layout)
    int dpu_t;               // the update in flight's step t (0: none to land)
    AdamWParams dpu_p;
    pthread_mutex_t dpu_lock;
    pthread_cond_t dpu_moved;
    int dpu_done;            // under dpu_lock: tensors [num_tensors - dpu_done, num_tensors) updated
    uint64_t dpu_wait_ns;    // the calling thread's waits for it (zero_step)
    _Atomic uint64_t dpu_stall_ns;   // the host stream's waits for it (accumulation)
    struct OffRead *reads;   // NVMe parameters: one read record per tensor, reused gather to gather
    uint64_t file_bytes;
    size_t tile;             // elements per transfer (a multiple of ZERO_SUMSQ_BLOCK and of 2048)
    _Atomic uint64_t adamw_ns;   // the CPU AdamW's nanoseconds, summed over steps (also a deferred
                                 // update's, on the host stream)
    uint64_t mark_read, mark_written;   // engine totals at zero_begin_step
    _Atomic uint64_t caught_read, caught_written;   // the deferred updates' requests, summed
    uint64_t caught_mark_read, caught_mark_written; // those sums at the last step's end
    uint64_t step_read, step_written;   // summed over steps
    uint64_t last_read, last_written;   // the last step's (a deferred update moves I/O into the next step)
    uint64_t step_write[3];  // the step's buffer sets' last writes (update_tiles), left in flight
    uint64_t step_sets;      // tiles the step has read (which set is next)
    uint64_t *state_write;   // per tensor: the last write of its master, m or v (a read waits for it)
    uint64_t grad_write[2];  // the gradient's two buffers' last writes, left in flight by accumulate
    uint64_t grad_writes;    // gradient tiles written (which buffer is next)
    double mark_busy, step_busy;        // the engine's busy seconds, likewise
    uint64_t dry_read, dry_written;     // a dry run: the bytes a live run's engines would have moved
} ZeroOffload;

// Stage 3's gathering (gather.c): the pool the unit's tensors are gathered into, the fetch
// order recorded in the first micro-step, ZeRO++'s qwZ records and hpZ copy, its counters.
typedef struct {
    ZeroStream *stream;        // the parameter all-gathers' stream
    ZeroEvent *mark;           // hand-offs to the main stream, waited on right after each record
    void *persist;             // persistent tensors, gathered once per step
    void *pool;                // the gather pool
    ZeroArena arena;           // its blocks
    uint64_t issued;           // all-gathers enqueued (ZeroTensorState.gather_id)
    ZeroRefreshPart *roundings;// num_tensors: the bf16 roundings of shards a gather sends, queued
    int nroundings;            //   by work_shard, issued as one call before the gather
    int *batch;                // num_tensors entries each: tensors to gather (tensor << 1 | backward),
    int *by_kind, *tensors;    //   those of one kind, and the bare tensors of one all-gather
    // the order of fetches (unit << 1 | backward), recorded during the first micro-step
    int *order, order_len, order_cap, order_state, order_pos;
    int warned_order;          // a fetch left the recorded order (said once)
    uint64_t stamp;            // visit mark for look-ahead walks
    size_t held_elems;         // pool elements of tensors some fetched unit holds
    // ZeRO++
    int qwz_block;
    size_t qwz_own_bytes;      // qwZ: the size of qwz_own
    void *qwz_own;             // qwZ: int8 records of this rank's shard of every pool tensor
    void *qwz_land;            // qwZ: where gathered records land before they are unpacked
    size_t qwz_land_bytes;
    void *hpz_copy;            // hpZ: the secondary partition (param dtype)
    size_t hpz_copy_elems;
    uint64_t param_version;    // bumped whenever the working parameters change
    uint64_t gathers, prefetches, hits, evictions, wasted, qwz_gathers, hpz_gathers;
} ZeroGather;

// Gradient reduction (reduce.c): buckets in flight, the stage 2-3 gradient pool, the
// staging buffer, the two-hop path, and when a micro-step's gradients are all ready.
typedef struct {
    ZeroStream *stream;        // the gradient reductions' stream
    ZeroEvent *mark;           // hand-offs to the main stream
    // Reductions in flight, oldest first: bucket k's event is bucket_events[k % bucket_slots],
    // recorded on the stream after it; buckets [bucket_done, bucket_next) are not yet released.
    ZeroEvent **bucket_events;
    int bucket_slots;
    uint64_t bucket_next, bucket_done;
    void *pool;                // stages 2-3: the gradient pool
    ZeroArena arena;
    void *staging;             // all-to-all receive buffer; zero_gather_master's landing buffer
    size_t staging_elems;      // in gradient elements
    int *pending, num_pending; // tensors complete this micro-step, not yet reduced
    ZeroReducePart *sums;      // num_tensors: a bucket's reduce_slices ranges (backend.h)
    void *clear_at;            // acquired pool buffers not zeroed yet: one run of clear_bytes
    size_t clear_bytes;
    size_t pending_elems;
    ZeroDeferredBlock *deferred;   // stages 2-3: reduced gradient blocks not yet back in the pool
    int num_deferred, deferred_cap;
    int units_ready, micro;    // units whose gradients are ready this micro-step; micro-steps done
    // ZeRO++: gradients reduced in two hops (--hier-reduce or qgZ)
    int two_hops;
    ZeroWire wire;             // and in which format (RAW or INT4)
    int qgz_block;
    void *hop1_send;           // hop 1's packed send (hop 1 lands in staging)
    void *hop2_send, *hop2_recv;
    size_t hop_bytes;          // capacity of hop1_send (staging holds as much or more), in bytes
    uint64_t buckets;
} ZeroReduce;

// The optimizer step (zero.c): the fp32 master and AdamW's moments where they live on the
// device, the gradients the step reads, and the step's own marks and times.
typedef struct {
    float *master, *m, *v;     // stage 0: full padded; else the shard (NULL: offloaded)
    float *shard_grad;         // fp32 reduced gradient of this rank's shard
    void *work_full;           // stages 0-2: all working params, padded
    void *grad_full;           // stages 0-1: all gradients, padded
    float *reduced_full;       // stage 0: the reduced full gradient (aliases grad_full when fp32)
    void *reduced_bf16;        // stage 0 with fast_reduce: the bf16 sums, this rank's slices reduced
                               //   into place, then gathered (an all-reduce in its two halves)
    double *sumsq;             // num_tensors per-tensor sums of squares of the shard's gradient
    // num_tensors each: the step's many-range kernel calls (backend.h), filled per call
    ZeroAdamwPart *adamw_parts;
    ZeroRefreshPart *refresh_parts;
    ZeroSumsqPart *sumsq_parts;
    int open, grad_accum;      // inside zero_begin_step .. zero_step, and its micro-steps
    int last_t;                // t of the last applied zero_step (0 after init): keys bf16 rounding
    uint64_t done;             // steps taken
    int64_t before;            // the run's steps before this process's first (a loaded checkpoint's step - done)
    ZeroCollBytes sent_mark[ZERO_COLL_NUM];// comm->sent at zero_begin_step, moved past trainer collectives
    ZeroCollBytes sent[ZERO_COLL_NUM];     // sent inside begin_step .. zero_step, summed over steps
    // where the calling thread's time went inside steps, summed over them (seconds): in the
    // hooks (fetch, release, grads_ready: waits for gathers and pool room), in zero_step, and
    // the whole of zero_begin_step .. zero_step (the rest is the model's own work)
    double begin, hook_s, step_s, wall_s;
} ZeroStep;

// What the plugin holds and has moved (state.c; report.c sets the activation bytes): every
// buffer zero_alloc made, bytes by use and flow, and the run's identity.
typedef struct {
    size_t mem_dev[ZERO_USE_KINDS], mem_host[ZERO_USE_KINDS], mem_nvme[ZERO_USE_KINDS];
    struct { void *p; ZeroMemKind kind; } allocs[48];
    int nallocs;
    int init_done;             // set at the end of zero_init: allocating after it is a bug
    uint64_t flow_intra[ZERO_FLOWS], flow_inter[ZERO_FLOWS];   // inside steps, summed
    size_t act_dev, act_host;  // activation bytes the trainer reported
    uint8_t run_id[16];        // the run's identity (zckpt.h's ZCK_RUN_ID_BYTES)
    char run_id_hex[ZERO_RUN_ID_HEX];
    char label[192];           // scratch for collective labels
} ZeroAccount;

// The plugin's state. The world (the fields up to `parts`) is set by zero_init in zero.c
// and only read afterwards; each phase's sub-struct is written by its own file alone
// (dev/tools/check_layout.py checks it).
struct Zero {
    ZeroConfig cfg;
    ZeroComm *comm;
    const ZeroBackend *b;
    int stage, rank, world, num_tensors, num_units;
    size_t param_size, grad_size;   // bytes per element of working params and of gradients
    ZeroLayout layout;
    ZeroTensorState *t;
    ZeroUnitState *u;
    ZeroStream *main;          // the model's stream (the backend's)
    ZeroEvent *main_mark;      // main-stream hand-offs to the other streams
    ZeroCollPart *parts;       // scratch for any phase's collective: num_tensors parts

    ZeroGather gather;         // gather.c
    ZeroReduce reduce;         // reduce.c
    ZeroOffload off;           // offload.c: tiers other than the device
    ZeroStep step;             // zero.c
    ZeroAccount acct;          // state.c
};


// Errors, one style: "zero: rank R: message" on stderr in one write. zero_fail then ends
// the job (a broken invariant or resource at run time); zero_refuse returns -1 (a bad input
// the caller reports: config, table, a checkpoint); zero_say only tells (warnings).
// zero_say_rank and zero_refuse serve where no Zero exists yet (zero_init's checks).
void zero_say(const Zero *z, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void zero_fail(const Zero *z, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
void zero_say_rank(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int zero_refuse(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Ordering (backend.h): work queued on s from now on runs after the main stream's work so
// far; and the main stream's next work runs after what s has queued so far.
void zero_stream_waits_main(Zero *z, ZeroStream *s);
void zero_main_waits_stream(Zero *z, ZeroStream *s);
// Waits (host-side) until every stream has run everything queued on it.
void zero_sync_streams(Zero *z);
// Counts a collective's bytes by what it carries (ZeroFlow), inside steps only.
void zero_flow_add(Zero *z, ZeroFlow f, ZeroGroup g, uint64_t bytes_per_peer);
// Comma-separated tensor names for messages, truncated to fit z->acct.label.
const char *zero_label(Zero *z, const char *prefix, const int *tensors, int n);

// Monotonic seconds, for the time accounting above.
double zero_clock(void);

// Every buffer comes from here, during zero_init only; zero_free_buffers frees them all.
void *zero_alloc(Zero *z, ZeroMemKind kind, ZeroUse use, size_t bytes, const char *what);
void zero_free_buffers(Zero *z);
void zero_alloc_close(Zero *z);   // the end of zero_init: allocating after it fails the job
// Host bookkeeping (zeroed; plain free), and the backend's events; both fail the job when out.
void *zero_host_alloc(Zero *z, size_t bytes, const char *what);
ZeroEvent *zero_new_event(Zero *z, const char *what);
// The run identity. From zero_init (collective): rank 0 draws 128 bits, every rank gets
// them. zero_run_id_set: a loaded checkpoint's (a resumed run keeps its first identity).
void zero_run_id_init(Zero *z);
void zero_run_id_set(Zero *z, const uint8_t id[16]);

// zero.c, for the modules built on the orchestrator (checkpoint.c): after a load replaced
// the master, drop stage-3 gathered copies and refresh the working parameters exactly as
// zero_step(t) does; the run goes on from the checkpoint's step.
void zero_refresh_after_load(Zero *z, int t, long long step);

#endif
