// offload.c: ZeRO-Offload and ZeRO-Infinity. The optimizer states of this rank's shard
// (fp32 master, AdamW m and v, and the fp32 reduced gradient they are updated from) live
// in host memory or in the NVMe swap file instead of on the device, and the optimizer runs
// on the CPU; at stage 3 the working-parameter shard that gathers read from may live there
// too. zero.c, reduce.c and gather.c call in at fixed points:
//
//   backward  each reduced bucket: the reduce stream sums the received slices on the device
//             (sum_slices), copies the sums to a host slot, and the host stream adds them
//             into the offloaded accumulator (tensor by tensor; on NVMe by tiles, read,
//             added, written back). In the step's last micro-step it also takes each
//             tensor's sum of squares: the norm is ready when backward ends.
//   step      on the calling thread, tile by tile: AdamW on the CPU (the same element
//             function, the same bits as on the device), the refreshed working parameters
//             rounded on the CPU and sent where they live (the device's working buffer,
//             host memory or NVMe); on NVMe the reads of tile k+1 and the writes of tile
//             k-1 are in flight while tile k computes.
//   gathers   stage 3: this rank's part of a tensor comes up from host memory (a copy on
//             the gather stream) or from NVMe (read on the host stream, then copied), the
//             nc -> cg -> gg pipeline, issued ahead of use by stage 3's prefetch. The
//             backward's NVMe reads run on a read stream with an engine of their own, beside
//             the accumulation on the host stream instead of behind it (settle).
//
//   delayed   (cfg.dpu_from, host memory) from step N on, the step's AdamW and rounding run
//             on a host stream of their own beside the next step's forward and backward,
//             which train on the parameters one update behind; the next step lands them
//             (ZeRO-Offload's one-step delayed parameter update: the CPU's step hidden
//             behind the GPU's, at the price of a gradient one step stale).
//   tied      stages 2-3: a tensor read by two units (tied wte) parks its first unit's partial
//             gradient in the parameters' tier (else the optimizer's) until its second unit's
//             backward, instead of holding a pool block through the whole pass.
//
// Every value goes through the operations it would on the device, in the same order, so
// offloading is bit-identical to the same stage without it (the delayed update excepted:
// it changes which parameters a gradient is taken at, by design).
#include "offload.h"

#include "kernels/host_kernels.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_TILE ((size_t)1 << 20)   // elements per NVMe transfer
#define NVME_QUEUE 8
#define NVME_SETS 3                      // tile buffer sets in flight in the step (read, compute, write)
_Static_assert(NVME_SETS == sizeof(((ZeroOffload *)0)->step_write) / sizeof(uint64_t), "ZeroOffload.step_write");

static char *byte_at(void *base, size_t elems, size_t es) { return (char *)base + elems * es; }
static uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }
static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

const char *zero_tier_name(ZeroTier t) { return t == ZERO_TIER_HOST ? "cpu" : t == ZERO_TIER_NVME ? "nvme" : "device"; }

int zero_offload_optimizer(const Zero *z) { return z->off.opt != ZERO_TIER_DEVICE; }
int zero_offload_holds(const Zero *z, int ti) { return ti >= z->off.opt_first; }

// Tensor ti's place in the host buffers of the optimizer's kinds (they start at opt_base).
static size_t host_at(const Zero *z, int ti) { return z->t[ti].lay->shard_off - z->off.opt_base; }

void zero_offload_plan(Zero *z) {
    ZeroOffload *o = &z->off;
    o->opt = z->cfg.optimizer_tier;
    o->opt_first = 0;
    o->opt_base = 0;
    if (o->opt == ZERO_TIER_DEVICE) {
        o->opt_first = z->num_tensors;
        o->opt_base = z->layout.shard_total;
        return;
    }
    const double r = z->cfg.optimizer_ratio;
    if (r <= 0.0 || r >= 1.0) return;
    // The device keeps the first tensors whose whole sizes fit (1 - r) of the model's, the
    // same line on every rank; at least the last tensor is offloaded.
    const double keep = (1.0 - r) * (double)z->layout.padded_total;
    size_t kept = 0;
    int k = 0;
    while (k < z->num_tensors - 1 && (double)(kept + z->t[k].lay->split.padded) <= keep) kept += z->t[k++].lay->split.padded;
    o->opt_first = k;
    o->opt_base = z->t[k].lay->shard_off;
    if (k == 0 && z->rank == 0 && !z->b->counts_only) {   // not what was asked: say so (the dry run says it too)
        const double first = (double)z->t[0].lay->split.padded / (double)z->layout.padded_total;
        printf("zero: note: optimizer ratio %g keeps nothing on the device: the first tensor, %s, is %.1f%% of the model "
               "by itself; a ratio of at most %.2f keeps it there\n", r, z->t[0].name, 100.0 * first,
               floor((1.0 - first) * 100.0) / 100.0);
    }
}

static int counts_only(const Zero *z) { return z->b->counts_only; }
static void catch_up(Zero *z, int ti, void *dst);   // a deferred update, where the tensor is read next
static void writes_drained(Zero *z);                // every write a deferred update left in flight, done

int zero_offload_validate(const ZeroConfig *c, int rank) {
    if (c->optimizer_tier < ZERO_TIER_DEVICE || c->optimizer_tier > ZERO_TIER_NVME || c->param_tier < ZERO_TIER_DEVICE ||
        c->param_tier > ZERO_TIER_NVME) {
        return zero_refuse(rank, "unknown offload tier (optimizer %d, parameters %d)", (int)c->optimizer_tier,
                (int)c->param_tier);
    }
    if (c->optimizer_tier != ZERO_TIER_DEVICE && c->stage < 1) {
        return zero_refuse(rank, "offloading the optimizer (to %s) needs stage 1, 2 or 3: stage 0 keeps every "
                "state on every rank", zero_tier_name(c->optimizer_tier));
    }
    if (c->param_tier != ZERO_TIER_DEVICE && c->stage != 3) {
        return zero_refuse(rank, "offloading parameters (to %s) needs stage 3: stages 0-2 keep whole parameters "
                "on every rank", zero_tier_name(c->param_tier));
    }
    if (!(c->optimizer_ratio >= 0.0 && c->optimizer_ratio <= 1.0)) {
        return zero_refuse(rank, "optimizer ratio %g: the fraction of the optimizer states offloaded is in [0, 1] (0 or 1: all)",
                c->optimizer_ratio);
    }
    if (c->optimizer_ratio > 0.0 && c->optimizer_ratio < 1.0) {   // a partial offload
        if (c->optimizer_tier != ZERO_TIER_HOST) {
            return zero_refuse(rank, "an optimizer ratio of %g offloads part of the optimizer states to host memory: it "
                    "needs --offload-optimizer cpu (got %s)", c->optimizer_ratio, zero_tier_name(c->optimizer_tier));
        }
        if (c->stage == 3 && c->param_tier != ZERO_TIER_DEVICE) {
            return zero_refuse(rank, "an optimizer ratio of %g with --offload-param %s is not supported: the tensors "
                    "updated on the device keep their working parameters there", c->optimizer_ratio,
                    zero_tier_name(c->param_tier));
        }
    }
    if (c->dpu_from < 0) return zero_refuse(rank, "--dpu %d: the first delayed step is 1 or later (0: off)", c->dpu_from);
    if (c->dpu_from > 0 && c->optimizer_tier != ZERO_TIER_HOST) {
        return zero_refuse(rank, "--dpu %d delays the CPU optimizer's update of host memory: it needs --offload-optimizer "
                "cpu (got %s)", c->dpu_from, zero_tier_name(c->optimizer_tier));
    }
    if (c->dpu_from > 0 && c->stage == 3 && c->param_tier != ZERO_TIER_DEVICE) {
        return zero_refuse(rank, "--dpu %d with --offload-param %s is not supported: the delayed update's parameters "
                "land on the device", c->dpu_from, zero_tier_name(c->param_tier));
    }
    if ((c->optimizer_tier == ZERO_TIER_NVME || c->param_tier == ZERO_TIER_NVME) && (!c->nvme_path || !*c->nvme_path)) {
        return zero_refuse(rank, "offloading to nvme needs a folder for the swap file (--nvme-path DIR)");
    }
    return 0;
}

// ---------------------------------------------------------------- NVMe layout and tiles

// Per kind, each tensor's own range at an aligned file offset: kinds one after another.
static void nvme_layout(Zero *z) {
    ZeroOffload *o = &z->off;
    uint64_t at = 0;
    for (int k = 0; k < ZK_KINDS; k++) {
        int on_nvme = k == ZK_PARAM ? o->param == ZERO_TIER_NVME : o->opt == ZERO_TIER_NVME;
        if (!on_nvme) continue;
        size_t es = k == ZK_PARAM ? z->param_size : sizeof(float);
        o->file_off[k] = malloc((size_t)z->num_tensors * sizeof(uint64_t));
        if (!o->file_off[k]) zero_fail(z, "out of host memory for the NVMe layout");
        if (k == ZK_PARAM && o->param_is_master) {   // the master's ranges are the parameters'
            memcpy(o->file_off[k], o->file_off[ZK_MASTER], (size_t)z->num_tensors * sizeof(uint64_t));
            continue;
        }
        uint64_t start = at;
        for (int i = 0; i < z->num_tensors; i++) {
            o->file_off[k][i] = at;
            at += align_up((uint64_t)z->t[i].lay->own_count * es, ZERO_NVME_ALIGN);
        }
        int use = k == ZK_MASTER ? ZERO_USE_MASTER : k == ZK_GRAD ? ZERO_USE_GRADS : k == ZK_PARAM ? ZERO_USE_PARAMS
                                                                                                    : ZERO_USE_OPTIM;
        z->acct.mem_nvme[use] += (size_t)(at - start);
    }
    if (o->park == ZERO_TIER_NVME) {   // tied tensors' parked gradients: the whole tensor each
        uint64_t start = at;
        for (int i = 0; i < z->num_tensors; i++)
            if (z->t[i].num_units > 1) {
                o->park_at[i] = at;
                at += align_up((uint64_t)z->t[i].lay->split.padded * z->grad_size, ZERO_NVME_ALIGN);
            }
        z->acct.mem_nvme[ZERO_USE_GRADS] += (size_t)(at - start);
    }
    o->file_bytes = at;
    if (o->opt == ZERO_TIER_NVME && !(o->state_write = calloc((size_t)z->num_tensors, sizeof(uint64_t))))
        zero_fail(z, "out of host memory for the NVMe write tickets");
    if (o->opt == ZERO_TIER_NVME) {   // the step's tiles, in order, listed once
        for (int i = 0; i < z->num_tensors; i++) o->ntiles += (z->t[i].lay->own_count + o->tile - 1) / o->tile;
        o->tiles = malloc((o->ntiles ? o->ntiles : 1) * sizeof(OffTile));
        o->tile_first = malloc(((size_t)z->num_tensors + 1) * sizeof(size_t));
        if (!o->tiles || !o->tile_first) zero_fail(z, "out of host memory for the NVMe step's tile list");
        size_t k = 0;
        for (int i = 0; i < z->num_tensors; i++) {
            o->tile_first[i] = k;
            for (size_t c = 0; c < z->t[i].lay->own_count; c += o->tile)
                o->tiles[k++] = (OffTile){i, c, min_sz(o->tile, z->t[i].lay->own_count - c)};
        }
        o->tile_first[z->num_tensors] = k;
    }
    if (o->param == ZERO_TIER_NVME) {
        o->reads = malloc((size_t)z->num_tensors * sizeof(OffRead));
        if (!o->reads) zero_fail(z, "out of host memory for the NVMe parameter reads");
        for (int i = 0; i < z->num_tensors; i++) {
            o->reads[i].z = z;
            o->reads[i].ti = i;
            o->reads[i].dst = NULL;
            atomic_init(&o->reads[i].busy, 0);
        }
    }
}

static void *nvme_alloc(void *ctx, size_t bytes) {
    Zero *z = ctx;
    return z->b->alloc(z->b, ZERO_MEM_HOST, bytes);   // page-aligned (backend.h), pinned under CUDA
}
static void nvme_free(void *ctx, void *p) {
    Zero *z = ctx;
    z->b->free(z->b, ZERO_MEM_HOST, p);
}

// Buffers of the engine's pool: NVME_SETS sets of master, m, v, grad for the step, then
// three for the host stream: the accumulation's two (one filled while the other's write is
// in flight), parameter reads.
enum { BUF_STEP = 0, BUF_HS = NVME_SETS * 4, BUF_COUNT = NVME_SETS * 4 + 3 };
#define BUF_HS_READ (BUF_HS + 2)   // parameter reads and parked gradients

// The engine's messages start "rank R: " for callers without a prefix; zero_fail has one.
static const char *engine_msg(const char *m) {
    const char *c = strncmp(m, "rank ", 5) == 0 ? strstr(m, ": ") : NULL;
    return c ? c + 2 : m;
}

static void nvme_open(Zero *z) {
    ZeroOffload *o = &z->off;
    if (!o->file_bytes) return;
    // the pools are pinned host memory held for the run (a dry run counts them without the
    // file): the main engine's, and the read stream's one buffer
    const int read_buffers = o->param == ZERO_TIER_NVME;
    z->acct.mem_host[ZERO_USE_BUFFERS] += (size_t)(BUF_COUNT + read_buffers) * o->tile * sizeof(float);
    if (counts_only(z)) return;
    ZeroNvmeConfig nc = {z->cfg.nvme_path, z->rank, o->file_bytes, o->tile * sizeof(float), BUF_COUNT,
                         z->cfg.nvme_queue_depth ? z->cfg.nvme_queue_depth : NVME_QUEUE, nvme_alloc, nvme_free, z,
                         z->cfg.nvme_block_bytes};
    char err[512];
    if (!(o->nvme = zero_nvme_open(&nc, err, sizeof err))) zero_fail(z, "NVMe offload: %s", engine_msg(err));
    nc.num_buffers = read_buffers;
    if (read_buffers && !(o->read_nvme = zero_nvme_open_sibling(o->nvme, &nc, err, sizeof err)))
        zero_fail(z, "NVMe offload: %s", engine_msg(err));
    if (z->rank == 0)
        printf("zero: NVMe swap files, one per rank; rank 0's: %s%s, %.2f GiB; engine %s\n", zero_nvme_path(o->nvme),
               zero_nvme_unnamed(o->nvme) ? " (unnamed)" : "", (double)o->file_bytes / (1024.0 * 1024.0 * 1024.0),
               zero_nvme_engine_note(o->nvme));
}

// rc from engine nv (the main one, or the read stream's): its first failure says why.
// A failed wait covers every request before the ticket too: the engine's message names the
// request that failed (its offset in the swap file), which may be another tensor's.
static void nvme_check_on(Zero *z, ZeroNvme *nv, int rc, const char *what, int ti) {
    if (rc != 0)
        zero_fail(z, "NVMe offload: %s%s%s stopped: a request to the swap file failed: %s", what, ti >= 0 ? " of " : "",
                  ti >= 0 ? z->t[ti].name : "", engine_msg(zero_nvme_error(nv)));
}
static void nvme_check(Zero *z, int rc, const char *what, int ti) { nvme_check_on(z, z->off.nvme, rc, what, ti); }

// A read or write of tensor ti's master, m or v comes after the writes of them an update left in flight.
static void state_writes_done(Zero *z, int ti) {
    ZeroOffload *o = &z->off;
    if (o->state_write && o->state_write[ti]) {
        nvme_check(z, zero_nvme_wait(o->nvme, o->state_write[ti]), "an optimizer write", ti);
        o->state_write[ti] = 0;
    }
}

// The accumulation leaves its last gradient writes in flight; whatever reads the gradient
// (the optimizer, the accumulation of a later micro-step) waits for them first: the engine
// does not order a read after a write of the same bytes.
static void gradient_write_done(Zero *z, int b2, int ti) {   // the one from buffer b2 (ti: the tensor, or -1)
    ZeroOffload *o = &z->off;
    if (o->grad_write[b2]) nvme_check(z, zero_nvme_wait(o->nvme, o->grad_write[b2]), "a gradient write", ti);
    o->grad_write[b2] = 0;
}
static void gradient_writes_done(Zero *z) {
    for (int b2 = 0; b2 < 2; b2++) gradient_write_done(z, b2, -1);
}

// Where element off of tensor ti's kind-k range lies in the swap file (each range starts
// aligned; the bytes a request moves, io_bytes, end aligned: the range's tail padding is its own).
static uint64_t file_at(const Zero *z, int k, int ti, size_t off, size_t es) {
    return z->off.file_off[k][ti] + (uint64_t)off * es;
}
static size_t io_bytes(size_t n, size_t es) { return (size_t)align_up((uint64_t)n * es, ZERO_NVME_ALIGN); }

// ---------------------------------------------------------------- a dry run's NVMe traffic

// A dry run moves no byte through the swap file. Where a live run reads or writes it, the
// dry run adds the bytes the live run's request would move (io_bytes) to dry_read and
// dry_written, on the live run's schedule: the deferred update's catch-ups and settle, the
// accumulation's tiles, the parks. The step's NVMe figures are then taken from them.

// The rounded working parameters' write of a tile of len elements (send_params): where they
// live on NVMe apart from the master.
static uint64_t dry_param_write(const Zero *z, size_t len) {
    const ZeroOffload *o = &z->off;
    return z->stage == 3 && o->param == ZERO_TIER_NVME && !o->param_is_master ? io_bytes(len, z->param_size) : 0;
}

// update_tiles over tensor ti's tiles: a tile's reads (master, m, v and gradient; a refresh
// alone the master), the update's writes of master, m and v, and the parameters' write.
static void dry_update_tiles(Zero *z, int ti, int update) {
    ZeroOffload *o = &z->off;
    const size_t n = z->t[ti].lay->own_count;
    for (size_t c = 0; c < n; c += o->tile) {
        const size_t len = min_sz(o->tile, n - c);
        o->dry_read += (update ? 4 : 1) * io_bytes(len, sizeof(float));
        if (update) o->dry_written += 3 * io_bytes(len, sizeof(float));
        o->dry_written += dry_param_write(z, len);
    }
}

static void dry_catch_up(Zero *z, int ti) {
    if (!z->off.defer || !z->off.stale[ti]) return;
    dry_update_tiles(z, ti, 1);
    z->off.stale[ti] = 0;
}

static void dry_catch_up_all(Zero *z) {
    for (int i = 0; i < z->num_tensors; i++) dry_catch_up(z, i);
}

// zero_offload_update's I/O
static void dry_update(Zero *z, int update) {
    ZeroOffload *o = &z->off;
    o->settled = 0;
    if (update && o->defer) {
        dry_catch_up_all(z);
        memset(o->stale, 1, (size_t)z->num_tensors);
    } else if (!update && o->param_is_master) {
    } else if (o->opt == ZERO_TIER_NVME) {
        for (int i = 0; i < z->num_tensors; i++) dry_update_tiles(z, i, update);
    } else {   // update_host (from opt_first) or refresh_from_device (every tensor): the parameters' writes
        for (int i = o->opt == ZERO_TIER_HOST ? o->opt_first : 0; i < z->num_tensors; i++)
            for (size_t c = 0; c < z->t[i].lay->own_count; c += o->tile)
                o->dry_written += dry_param_write(z, min_sz(o->tile, z->t[i].lay->own_count - c));
    }
}

// zero_offload_shard's read of tensor ti's NVMe parameters (settle first on the step's first
// backward read; a stale tensor read before that takes its deferred update instead)
static void dry_shard(Zero *z, int ti, int bwd) {
    ZeroOffload *o = &z->off;
    const size_t n = z->t[ti].lay->own_count;
    if (bwd && !o->settled) {
        dry_catch_up_all(z);
        o->settled = 1;
    }
    if (!o->settled && o->defer && o->stale[ti]) {
        dry_catch_up(z, ti);
        return;
    }
    for (size_t c = 0; c < n; c += o->tile) o->dry_read += io_bytes(min_sz(o->tile, n - c), z->param_size);
}

// accumulate's tiles of a bucket's tensors (the optimizer on NVMe): read unless the step's
// first, written back
static void dry_accumulate(Zero *z, const OffJob *j) {
    ZeroOffload *o = &z->off;
    if (o->opt != ZERO_TIER_NVME) return;
    for (int k = 0; k < j->n; k++) {
        const int ti = j->tensors[k];
        const size_t n = z->t[ti].lay->own_count;
        dry_catch_up(z, ti);
        for (size_t c = 0; c < n; c += o->tile) {
            const size_t bytes = io_bytes(min_sz(o->tile, n - c), sizeof(float));
            if (!j->first) o->dry_read += bytes;
            o->dry_written += bytes;
        }
    }
}

// park_io on NVMe: the whole gradient block out or back, in the engine buffer's chunks
static void dry_park(Zero *z, const OffPark *r) {
    ZeroOffload *o = &z->off;
    if (o->park != ZERO_TIER_NVME) return;
    const size_t bytes = z->t[r->ti].lay->split.padded * z->grad_size, chunk = o->tile * sizeof(float);
    for (size_t c = 0; c < bytes; c += chunk) *(r->out ? &o->dry_written : &o->dry_read) += io_bytes(min_sz(chunk, bytes - c), 1);
}

// ---------------------------------------------------------------- init and free

int zero_offload_parks_tied(const ZeroConfig *c) {
    return c->stage >= 2 && (c->optimizer_tier != ZERO_TIER_DEVICE || (c->stage == 3 && c->param_tier != ZERO_TIER_DEVICE));
}

// Where tied tensors' partial gradients park: the parameters' tier when they are offloaded
// (the memory they free is the same kind), else the optimizer's. The NVMe file places them
// in nvme_layout; host memory here.
static void park_init(Zero *z) {
    ZeroOffload *o = &z->off;
    o->park = o->param != ZERO_TIER_DEVICE ? o->param : o->opt;
    o->parks = calloc(2 * (size_t)z->num_tensors, sizeof(OffPark));
    o->park_at = calloc((size_t)z->num_tensors, sizeof(uint64_t));
    if (!o->parks || !o->park_at) zero_fail(z, "out of host memory for the tied gradients' park records");
    size_t bytes = 0;
    for (int i = 0; i < z->num_tensors; i++) {
        for (int d = 0; d < 2; d++) {
            OffPark *r = &o->parks[2 * i + d];
            r->z = z;
            r->ti = i;
            r->out = d == 0;
            atomic_init(&r->busy, 0);
        }
        if (z->t[i].num_units < 2 || o->park != ZERO_TIER_HOST) continue;
        o->park_at[i] = bytes;
        bytes += z->t[i].lay->split.padded * z->grad_size;
    }
    if (o->park == ZERO_TIER_HOST && bytes)
        o->park_host = zero_alloc(z, ZERO_MEM_HOST, ZERO_USE_GRADS, bytes, "parked tied gradients (host)");
}

static int cmp_size(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

// The most tensors one bucket can list: reduce.c fills a bucket while the tensors' padded
// gradients fit the staging buffer, so at most as many as the smallest ones that fit
// together (at least one). A record per bucket then costs that, not every tensor.
static int bucket_tensors_max(Zero *z) {
    size_t *size = malloc((size_t)z->num_tensors * sizeof(size_t));
    if (!size) zero_fail(z, "out of host memory sizing offload's bucket records");
    for (int i = 0; i < z->num_tensors; i++) size[i] = z->t[i].lay->split.padded;
    qsort(size, (size_t)z->num_tensors, sizeof(size_t), cmp_size);
    size_t used = 0;
    int n = 0;
    while (n < z->num_tensors && (n == 0 || used + size[n] <= z->reduce.staging_elems)) used += size[n++];
    free(size);
    return n;
}

// The delayed update's stream, lock and the buffer its working parameters wait in.
static void dpu_init(Zero *z, size_t elems) {
    ZeroOffload *o = &z->off;
    const ZeroBackend *b = z->b;
    o->dpu_work = zero_alloc(z, ZERO_MEM_HOST, ZERO_USE_PARAMS, elems * z->param_size,
                             "working parameters of the delayed update (host)");
    o->dpu_done = z->num_tensors;   // none in flight: every accumulation may go ahead
    if (!(o->dpu_items = malloc((size_t)z->num_tensors * sizeof *o->dpu_items))) zero_fail(z, "out of host memory for the delayed update");
    for (int i = 0; i < z->num_tensors; i++) o->dpu_items[i] = (OffDpu){z, i};
    if (pthread_mutex_init(&o->dpu_lock, NULL) != 0 || pthread_cond_init(&o->dpu_moved, NULL) != 0)
        zero_fail(z, "the delayed update's lock could not be made");
    if (!(o->dpu_stream = b->stream_create_host(b))) zero_fail(z, "the %s backend could not create the delayed update's stream", b->name);
    if (b->stream_name) b->stream_name(b, o->dpu_stream, "delayed-update stream (offload: the CPU's AdamW beside the next step)");
}

void zero_offload_init(Zero *z, int park_tied) {
    ZeroOffload *o = &z->off;
    const ZeroBackend *b = z->b;
    o->park_tied = park_tied;
    o->param = z->stage == 3 ? z->cfg.param_tier : ZERO_TIER_DEVICE;
    if (o->opt == ZERO_TIER_DEVICE && o->param == ZERO_TIER_DEVICE) return;
    o->param_is_master = z->cfg.param_dtype == ZERO_F32 && o->param == o->opt;
    // the step's update waits for each tensor's next read (update_tiles): its I/O then runs
    // beside the next forward's compute instead of between two steps
    o->defer = o->param_is_master && o->opt == ZERO_TIER_NVME;
    if (o->defer && !(o->stale = calloc((size_t)z->num_tensors, 1))) zero_fail(z, "out of host memory for the deferred update");
    if (o->park_tied) park_init(z);
    const size_t Sh = z->layout.shard_total, Soff = Sh - o->opt_base;   // Soff: the offloaded part of the shard
    // whole blocks of the norm's sums (each tile's sum of squares is then the device's, bit for
    // bit), and whole 4 KiB pages of a bf16 tile on NVMe
    _Static_assert(ZERO_SUMSQ_BLOCK % (ZERO_NVME_ALIGN / 2) == 0, "a norm block is whole bf16 NVMe pages");
    o->tile = z->cfg.nvme_tile_elems ? zero_round_up(z->cfg.nvme_tile_elems, ZERO_SUMSQ_BLOCK) : DEFAULT_TILE;
    o->host_stream = b->stream_create_host(b);
    o->upload_stream = b->stream_create_copy(b);
    o->host_mark = b->event_create(b);
    o->upload_mark = b->event_create(b);
    if (!o->host_stream || !o->upload_stream || !o->host_mark || !o->upload_mark) zero_fail(z, "the %s backend could not create offload's streams", b->name);
    if (b->stream_name) {
        b->stream_name(b, o->host_stream, "host stream (offload: accumulation, NVMe)");
        b->stream_name(b, o->upload_stream, "upload stream");
    }
    if (o->param == ZERO_TIER_NVME) {
        o->read_stream = b->stream_create_host(b);
        o->read_upload = b->stream_create_copy(b);
        o->read_mark = b->event_create(b);
        o->settled_mark = b->event_create(b);
        if (!o->read_stream || !o->read_upload || !o->read_mark || !o->settled_mark)
            zero_fail(z, "the %s backend could not create offload's read stream", b->name);
        if (b->stream_name) {
            b->stream_name(b, o->read_stream, "read stream (offload: NVMe parameter reads once the step settles)");
            b->stream_name(b, o->read_upload, "read upload stream");
        }
    }
    if (o->opt == ZERO_TIER_HOST) {
        static const int use[4] = {ZERO_USE_MASTER, ZERO_USE_OPTIM, ZERO_USE_OPTIM, ZERO_USE_GRADS};
        static const char *what[4] = {"fp32 master (host)", "AdamW m (host)", "AdamW v (host)", "fp32 gradient (host)"};
        for (int k = ZK_MASTER; k <= ZK_GRAD; k++) o->host[k] = zero_alloc(z, ZERO_MEM_HOST, use[k], Soff * sizeof(float), what[k]);
    }
    if (z->cfg.dpu_from > 0) dpu_init(z, Soff);
    if (o->param == ZERO_TIER_HOST)
        o->host[ZK_PARAM] = o->param_is_master ? o->host[ZK_MASTER]
                         : zero_alloc(z, ZERO_MEM_HOST, ZERO_USE_PARAMS, Sh * z->param_size, "working-parameter shard (host)");
    if (z->stage == 3 && o->opt != ZERO_TIER_DEVICE && o->param == ZERO_TIER_DEVICE)
        o->dev_work = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_PARAMS, Soff * z->param_size, "working-parameter shard");
    if (o->opt != ZERO_TIER_DEVICE) {
        // a bucket's sums: at most one bucket's shards (the staging buffer's elements)
        o->slot_elems = z->reduce.staging_elems;
        o->dev_sums = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_BUFFERS, o->slot_elems * sizeof(float), "reduced bucket sums");
        for (int s = 0; s < OFF_SLOTS; s++) {
            o->slot[s] = zero_alloc(z, ZERO_MEM_HOST, ZERO_USE_BUFFERS, o->slot_elems * sizeof(float), "reduced sums (host)");
            o->slot_full[s] = b->event_create(b);
            o->slot_free[s] = b->event_create(b);
            if (!o->slot_full[s] || !o->slot_free[s]) zero_fail(z, "the %s backend could not create offload's events", b->name);
        }
        o->job_cap = bucket_tensors_max(z);
        for (int k = 0; k < OFF_JOBS; k++) {
            o->job[k].z = z;
            atomic_init(&o->job[k].busy, 0);
            o->job[k].tensors = malloc((size_t)o->job_cap * sizeof(int));
            o->job[k].at = malloc((size_t)o->job_cap * sizeof(size_t));
            if (!o->job[k].tensors || !o->job[k].at) zero_fail(z, "out of host memory for offload's bucket records");
        }
    }
    o->stage = zero_alloc(z, ZERO_MEM_HOST, ZERO_USE_BUFFERS, o->tile * sizeof(float), "parameter upload staging");
    if (o->opt == ZERO_TIER_DEVICE)
        o->down = zero_alloc(z, ZERO_MEM_HOST, ZERO_USE_BUFFERS, o->tile * sizeof(float), "master download staging");
    nvme_layout(z);
    nvme_open(z);
}

void zero_offload_free(Zero *z) {
    ZeroOffload *o = &z->off;
    const ZeroBackend *b = z->b;
    if (o->dpu_stream) b->stream_sync(b, o->dpu_stream);   // first: an accumulation may wait for it
    if (o->host_stream) b->stream_sync(b, o->host_stream);
    if (o->upload_stream) b->stream_sync(b, o->upload_stream);
    if (o->read_stream) b->stream_sync(b, o->read_stream);
    if (o->read_upload) b->stream_sync(b, o->read_upload);
    if (o->dpu_stream) {   // no stream uses the lock any more
        b->stream_destroy(b, o->dpu_stream);
        pthread_mutex_destroy(&o->dpu_lock);
        pthread_cond_destroy(&o->dpu_moved);
    }
    if (o->read_nvme) zero_nvme_close(o->read_nvme);
    if (o->nvme) zero_nvme_close(o->nvme);
    for (int s = 0; s < OFF_SLOTS; s++) {
        if (o->slot_full[s]) b->event_destroy(b, o->slot_full[s]);
        if (o->slot_free[s]) b->event_destroy(b, o->slot_free[s]);
    }
    for (int k = 0; k < OFF_JOBS; k++) {
        free(o->job[k].tensors);
        free(o->job[k].at);
    }
    if (o->host_mark) b->event_destroy(b, o->host_mark);
    if (o->upload_mark) b->event_destroy(b, o->upload_mark);
    if (o->read_mark) b->event_destroy(b, o->read_mark);
    if (o->settled_mark) b->event_destroy(b, o->settled_mark);
    if (o->host_stream) b->stream_destroy(b, o->host_stream);
    if (o->upload_stream) b->stream_destroy(b, o->upload_stream);
    if (o->read_stream) b->stream_destroy(b, o->read_stream);
    if (o->read_upload) b->stream_destroy(b, o->read_upload);
    for (int k = 0; k < ZK_KINDS; k++) free(o->file_off[k]);
    free(o->tiles);
    free(o->tile_first);
    free(o->stale);
    free(o->dpu_items);
    free(o->state_write);
    free(o->reads);
    free(o->parks);
    free(o->park_at);
    memset(o, 0, sizeof *o);
}

// ---------------------------------------------------------------- state access (checkpoints)

// The host-side buffer of a kind, or NULL when it is not in host memory.
static float *host_of(Zero *z, int kind) { return z->off.opt == ZERO_TIER_HOST ? z->off.host[kind] : NULL; }

static float *device_of(Zero *z, int kind, int ti) {
    const ZeroTensorLayout *l = z->t[ti].lay;
    float *base = kind == ZK_MASTER ? z->step.master : kind == ZK_M ? z->step.m : z->step.v;
    return z->stage == 0 ? base + l->full_off + l->own_begin : base + l->shard_off;
}

// NVMe: elements [off, off + n) through the step's first buffer, a tile at a time. write:
// a piece that does not cover its whole aligned span keeps the span's other bytes (read
// first).
static void nvme_state(Zero *z, int kind, int ti, size_t off, size_t n, float *data, int write) {
    ZeroOffload *o = &z->off;
    const size_t per = ZERO_NVME_ALIGN / sizeof(float), own = z->t[ti].lay->own_count;
    float *buf = zero_nvme_buffer(o->nvme, BUF_STEP);
    for (size_t done = 0; done < n;) {
        size_t a = (off + done) / per * per;            // aligned element where this piece's span starts
        size_t span_end = min_sz(a + o->tile, zero_round_up(own, per));
        size_t piece = min_sz(span_end - (off + done), n - done);
        size_t lead = off + done - a, span = io_bytes(span_end - a, sizeof(float));
        uint64_t at = file_at(z, kind, ti, a, sizeof(float));
        int partial = lead > 0 || off + done + piece < min_sz(span_end, own);
        if (!write || partial)
            nvme_check(z, zero_nvme_wait(o->nvme, zero_nvme_read(o->nvme, buf, at, span)), "a checkpoint read", ti);
        if (write) {
            memcpy(buf + lead, data + done, piece * sizeof(float));
            nvme_check(z, zero_nvme_wait(o->nvme, zero_nvme_write(o->nvme, buf, at, span)), "a checkpoint write", ti);
        } else {
            memcpy(data + done, buf + lead, piece * sizeof(float));
        }
        done += piece;
    }
}

static void state_io(Zero *z, int kind, int ti, size_t off, size_t n, float *data, int write) {
    if (z->off.dpu_stream) {   // a delayed update in flight writes the states: after it
        z->b->stream_sync(z->b, z->off.dpu_stream);
        if (write) z->off.dpu_t = 0;   // a load replaces what it computed (zero_refresh_after_load rounds it)
    }
    if (n == 0) return;
    const ZeroBackend *b = z->b;
    if (!zero_offload_holds(z, ti)) {
        float *d = device_of(z, kind, ti) + off;
        if (write) b->copy(b, d, ZERO_MEM_DEVICE, data, ZERO_MEM_HOST, n * sizeof(float), z->main);
        else b->copy(b, data, ZERO_MEM_HOST, d, ZERO_MEM_DEVICE, n * sizeof(float), z->main);
        b->stream_sync(b, z->main);
    } else if (z->off.opt == ZERO_TIER_HOST) {
        float *h = host_of(z, kind) + host_at(z, ti) + off;
        if (write) memcpy(h, data, n * sizeof(float));
        else memcpy(data, h, n * sizeof(float));
    } else {
        zero_offload_wait(z);   // the engine serves one thread at a time: the host stream idles
        catch_up(z, ti, NULL);  // a checkpoint or an export reads (or replaces) the state after the step
        // nvme_state moves the bytes through the step's first buffer, from which another
        // tensor's deferred update (run by a forward's gather) may still be writing
        writes_drained(z);
        nvme_state(z, kind, ti, off, n, data, write);
    }
}

void zero_state_read(Zero *z, int kind, int ti, size_t off, size_t n, float *out) { state_io(z, kind, ti, off, n, out, 0); }
void zero_state_write(Zero *z, int kind, int ti, size_t off, size_t n, const float *in) {
    state_io(z, kind, ti, off, n, (float *)in, 1);
}

// The owned fp32 master's initial values, written where it lives: straight into host memory,
// or tile by tile to NVMe with NVME_SETS writes in flight (m and v start as the swap file's
// zeros: it is created empty).
void zero_offload_init_master(Zero *z, ZeroInitFn init, void *ctx) {
    ZeroOffload *o = &z->off;
    ZeroTicket busy[NVME_SETS] = {0};
    size_t k = 0;
    if (counts_only(z)) return;
    for (int i = o->opt_first; i < z->num_tensors; i++) {
        const ZeroTensorLayout *l = z->t[i].lay;
        if (o->opt == ZERO_TIER_HOST) {
            if (l->own_count) init(ctx, i, l->own_begin, l->own_count, o->host[ZK_MASTER] + host_at(z, i));
            continue;
        }
        for (size_t c = 0; c < l->own_count; c += o->tile, k++) {
            int set = (int)(k % NVME_SETS);
            size_t n = min_sz(o->tile, l->own_count - c);
            float *buf = zero_nvme_buffer(o->nvme, BUF_STEP + set);
            if (busy[set]) nvme_check(z, zero_nvme_wait(o->nvme, busy[set]), "an initial master write", i);
            init(ctx, i, l->own_begin + c, n, buf);
            busy[set] = zero_nvme_write(o->nvme, buf, file_at(z, ZK_MASTER, i, c, sizeof(float)), io_bytes(n, sizeof(float)));
            if (!busy[set]) nvme_check(z, -1, "queueing an initial master write", i);
        }
    }
    if (o->nvme) nvme_check(z, zero_nvme_drain(o->nvme), "the initial master writes", -1);
}

// ---------------------------------------------------------------- backward: accumulation

// Host stream: the delayed update in flight has read tensor ti's gradient (it goes through the
// tensors from the last, the order backward brings them in).
static void dpu_wait_past(Zero *z, int ti) {
    ZeroOffload *o = &z->off;
    pthread_mutex_lock(&o->dpu_lock);
    if (ti < z->num_tensors - o->dpu_done) {
        double t0 = zero_clock();
        while (ti < z->num_tensors - o->dpu_done) pthread_cond_wait(&o->dpu_moved, &o->dpu_lock);
        atomic_fetch_add_explicit(&o->dpu_stall_ns, (uint64_t)((zero_clock() - t0) * 1e9), memory_order_relaxed);
    }
    pthread_mutex_unlock(&o->dpu_lock);
}

// Host stream: adds a slot's sums into the accumulator, tensor by tensor (the first
// micro-step of a step starts it from zero: the device's memset and +=, the same bits),
// and in the last micro-step takes each tensor's sum of squares for the norm.
static void accumulate(void *arg) {
    OffJob *j = arg;
    Zero *z = j->z;
    ZeroOffload *o = &z->off;
    const uint64_t n0 = zero_trace_on ? zero_trace_now() : 0;
    const float *slot = o->slot[j->slot];
    for (int k = 0; k < j->n; k++) {
        int ti = j->tensors[k];
        const ZeroTensorLayout *l = z->t[ti].lay;
        const float *sum = slot + j->at[k];
        size_t n = l->own_count;
        if (o->opt == ZERO_TIER_HOST) {
            float *acc = o->host[ZK_GRAD] + host_at(z, ti);
            if (o->dpu_stream) dpu_wait_past(z, ti);
            if (j->first) memset(acc, 0, n * sizeof(float));
            zero_cpu_slices(acc, sum, 0, 1, n, ZERO_F32, 1);
            if (j->last) z->step.sumsq[ti] = zero_cpu_sum_squares(0.0, acc, n);
            continue;
        }
        // NVMe: by tiles through the host stream's two buffers: read (unless starting), add,
        // write, the write left in flight while the next tile fills the other buffer. A
        // deferred update of the tensor reads the old gradient: it goes first. The writes in
        // flight before the tensor's first tile may be of its own bytes (an earlier
        // micro-step's): its reads come after them; inside the loop they are its other tiles'.
        catch_up(z, ti, NULL);
        if (!j->first) gradient_writes_done(z);
        double sq = 0.0;
        for (size_t c = 0; c < n; c += o->tile) {
            size_t len = min_sz(o->tile, n - c);
            uint64_t at = file_at(z, ZK_GRAD, ti, c, sizeof(float));
            size_t bytes = io_bytes(len, sizeof(float));
            const int b2 = (int)(o->grad_writes++ & 1);
            float *buf = zero_nvme_buffer(o->nvme, BUF_HS + b2);
            gradient_write_done(z, b2, ti);   // before the buffer is filled again
            if (j->first) memset(buf, 0, len * sizeof(float));
            else nvme_check(z, zero_nvme_wait(o->nvme, zero_nvme_read(o->nvme, buf, at, bytes)), "a gradient read", ti);
            zero_cpu_slices(buf, sum + c, 0, 1, len, ZERO_F32, 1);
            if (j->last) sq = zero_cpu_sum_squares(sq, buf, len);
            if (!(o->grad_write[b2] = zero_nvme_write(o->nvme, buf, at, bytes))) nvme_check(z, -1, "queueing a gradient write", ti);
        }
        if (j->last) z->step.sumsq[ti] = sq;
    }
    if (zero_trace_on) zero_trace_span(o->opt == ZERO_TIER_HOST ? "accumulate gradients" : "accumulate gradients (nvme)",
                                       j->n ? z->t[j->tensors[0]].name : "", n0, zero_trace_now());
    atomic_store_explicit(&j->busy, 0, memory_order_release);
}

void zero_offload_reduce(Zero *z, const int *list, int n, const void *received) {
    ZeroOffload *o = &z->off;
    const ZeroBackend *b = z->b;
    int mine = 0;   // a partial offload: the bucket's tensors on the device are reduce.c's
    for (int k = 0; k < n; k++) mine += zero_offload_holds(z, list[k]);
    if (mine == 0) return;
    const uint64_t k = o->jobs_queued++;
    const int s = (int)(k % OFF_SLOTS);
    OffJob *j = &o->job[k % OFF_JOBS];
    // the host stream is OFF_JOBS buckets behind: wait until it has run this record's last
    // use (backpressure from a CPU slower than the reductions)
    while (atomic_load_explicit(&j->busy, memory_order_acquire)) sched_yield();
    atomic_store_explicit(&j->busy, !counts_only(z), memory_order_relaxed);   // a dry run runs no host call
    j->slot = s;
    // the slot's previous bucket must have been added before it is overwritten
    b->stream_wait(b, z->reduce.stream, o->slot_free[s]);
    if (mine > o->job_cap) zero_fail(z, "internal: a bucket of %d tensors, where at most %d fit the staging buffer", mine, o->job_cap);
    size_t at = 0, off = 0;
    int m = 0;
    for (int k = 0; k < n; off += z->t[list[k]].lay->split.padded, k++) {
        const ZeroTensorLayout *l = z->t[list[k]].lay;
        if (!zero_offload_holds(z, list[k])) continue;
        b->sum_slices(b, o->dev_sums + at, byte_at((void *)received, off, z->grad_size), l->split.shard, z->world, l->own_count,
                      z->cfg.grad_dtype, z->reduce.stream);
        j->tensors[m] = list[k];
        j->at[m++] = at;
        at += l->own_count;
    }
    if (at > o->slot_elems) zero_fail(z, "internal: a bucket's %zu sums exceed the %zu of a slot", at, o->slot_elems);
    b->copy(b, o->slot[s], ZERO_MEM_HOST, o->dev_sums, ZERO_MEM_DEVICE, at * sizeof(float), z->reduce.stream);
    b->event_record(b, o->slot_full[s], z->reduce.stream);
    j->n = m;
    j->first = z->stage <= 1 || z->reduce.micro == 0;   // stages 0-1 reduce only in the last micro-step
    j->last = z->reduce.micro == z->step.grad_accum - 1;
    b->stream_wait(b, o->host_stream, o->slot_full[s]);
    if (counts_only(z)) dry_accumulate(z, j);   // a dry run runs no host call
    b->host_call(b, o->host_stream, accumulate, j);
    b->event_record(b, o->slot_free[s], o->host_stream);
}

void zero_offload_wait(Zero *z) {
    if (z->off.host_stream) z->b->stream_sync(z->b, z->off.host_stream);
    if (z->off.read_stream) z->b->stream_sync(z->b, z->off.read_stream);
}

// ---------------------------------------------------------------- the step

// The CPU AdamW's time since t0 (zero_clock), on the calling thread or the host stream's.
static void add_adamw_time(ZeroOffload *o, double t0) {
    atomic_fetch_add_explicit(&o->adamw_ns, (uint64_t)((zero_clock() - t0) * 1e9), memory_order_relaxed);
}

// Where tensor ti's refreshed working parameters go: the own slot of the device's working
// tensor (stages 1-2), the device's working shard (stage 3, parameters on the device), the
// host shard, or NVMe (returns NULL then).
static void *param_target(Zero *z, int ti, int *device) {
    ZeroOffload *o = &z->off;
    const ZeroTensorLayout *l = z->t[ti].lay;
    *device = 1;
    if (z->stage <= 2) return byte_at(z->t[ti].work, (size_t)z->rank * l->split.shard, z->param_size);
    if (o->param == ZERO_TIER_HOST) { *device = 0; return byte_at(o->host[ZK_PARAM], l->shard_off, z->param_size); }
    if (o->param == ZERO_TIER_NVME) { *device = 0; return NULL; }
    return byte_at(o->dev_work, host_at(z, ti), z->param_size);
}

// Rounds master[0, n) (elements c.. of tensor ti) at step t and sends them where the
// working parameters live: straight into the host shard; into nvme_buf, then written to
// NVMe (returns the write's ticket: nvme_buf is busy until it completes); or up to the
// device through the staging buffer (its previous copy is waited for first).
static ZeroTicket send_params(Zero *z, int ti, size_t c, const float *master, size_t n, int t, void *nvme_buf) {
    ZeroOffload *o = &z->off;
    const ZeroBackend *b = z->b;
    const ZeroTensorLayout *l = z->t[ti].lay;
    uint64_t gidx = l->global_off + l->own_begin + c;
    int device;
    void *dst = param_target(z, ti, &device);
    if (o->param_is_master) return 0;   // the master just written is the working parameters
    if (!device && dst) {
        zero_cpu_refresh(byte_at(dst, c, z->param_size), z->cfg.param_dtype, master, n, z->cfg.seed, t, gidx);
        return 0;
    }
    if (!dst) {
        zero_cpu_refresh(nvme_buf, z->cfg.param_dtype, master, n, z->cfg.seed, t, gidx);
        ZeroTicket tk = zero_nvme_write(o->nvme, nvme_buf, file_at(z, ZK_PARAM, ti, c, z->param_size), io_bytes(n, z->param_size));
        if (!tk) nvme_check(z, -1, "queueing a parameter write", ti);
        return tk;
    }
    b->stream_sync(b, o->upload_stream);
    zero_cpu_refresh(o->stage, z->cfg.param_dtype, master, n, z->cfg.seed, t, gidx);
    b->copy(b, byte_at(dst, c, z->param_size), ZERO_MEM_DEVICE, o->stage, ZERO_MEM_HOST, n * z->param_size, o->upload_stream);
    return 0;
}

// The step on host memory: AdamW on each tensor's shard, then its refresh.
static void update_host(Zero *z, const AdamWParams *p, int update, int t) {
    ZeroOffload *o = &z->off;
    ZeroTicket busy[NVME_SETS] = {0};
    size_t k = 0;
    for (int i = o->opt_first; i < z->num_tensors; i++) {
        const ZeroTensorLayout *l = z->t[i].lay;
        size_t n = l->own_count, off = host_at(z, i);
        if (update) {
            double t0 = zero_clock();
            zero_cpu_adamw(o->host[ZK_MASTER] + off, o->host[ZK_GRAD] + off, o->host[ZK_M] + off, o->host[ZK_V] + off, n, p,
                           z->t[i].decay);
            add_adamw_time(o, t0);
        }
        for (size_t c = 0; c < n; c += o->tile, k++) {   // NVMe parameters: NVME_SETS writes in flight
            int set = (int)(k % NVME_SETS);
            if (busy[set]) nvme_check(z, zero_nvme_wait(o->nvme, busy[set]), "a parameter write", i);
            busy[set] = send_params(z, i, c, o->host[ZK_MASTER] + off + c, min_sz(o->tile, n - c), t,
                                    o->nvme ? zero_nvme_buffer(o->nvme, BUF_STEP + set) : NULL);
        }
    }
    if (o->nvme) nvme_check(z, zero_nvme_drain(o->nvme), "the step's parameter writes", -1);
}

// The step on NVMe, tile by tile over tiles[k0, k1) (every tensor's shard, o->tiles, or one
// tensor's): tile k+1's reads and tile k-1's writes are in flight while tile k computes
// (NVME_SETS sets of buffers). dst (one tensor's range, the deferred update): the fresh
// master of each tile also goes there (a gather's slot, working dtype fp32).
static void update_tiles(Zero *z, const AdamWParams *p, int update, int t, size_t k0, size_t k1, void *dst,
                         int leave_writes) {
    ZeroOffload *o = &z->off;
    const ZeroBackend *b = z->b;
    ZeroNvme *nv = o->nvme;
    const OffTile *tiles = o->tiles;
    const int kinds = update ? 4 : 1;   // master, m, v, grad; a refresh alone reads the master
    ZeroTicket *last_write = o->step_write, reads[NVME_SETS] = {0};
    const uint64_t set0 = o->step_sets;   // the sets go on rotating from the last call's
    if (update) gradient_writes_done(z);
    for (size_t k2 = k0; k2 <= k1; k2++) {
        // issue tile k2's reads (into its set, once the set's last writes are done, and after
        // the writes of the tensor's state an earlier call, a deferred update, left in flight:
        // waited for at the tensor's first tile only, since this call's writes of its earlier
        // tiles hold other bytes and stay in flight while the next tiles compute)
        if (k2 < k1) {
            int set = (int)((set0 + k2 - k0) % NVME_SETS);
            if (last_write[set]) nvme_check(z, zero_nvme_wait(nv, last_write[set]), "an optimizer write", tiles[k2].ti);
            if (k2 == k0 || tiles[k2].ti != tiles[k2 - 1].ti) state_writes_done(z, tiles[k2].ti);
            for (int kind = 0; kind < kinds; kind++) {
                float *buf = zero_nvme_buffer(nv, BUF_STEP + set * 4 + kind);
                ZeroTicket tk = zero_nvme_read(nv, buf, file_at(z, kind, tiles[k2].ti, tiles[k2].c, sizeof(float)),
                                               io_bytes(tiles[k2].n, sizeof(float)));
                if (!tk) nvme_check(z, -1, "queueing an optimizer read", tiles[k2].ti);
                reads[set] = tk;
            }
        }
        if (k2 == k0) continue;
        // compute tile k2-1, then queue its writes
        size_t kc = k2 - 1;
        int set = (int)((set0 + kc - k0) % NVME_SETS), ti = tiles[kc].ti;
        nvme_check(z, zero_nvme_wait(nv, reads[set]), "an optimizer read", ti);
        float *mb = zero_nvme_buffer(nv, BUF_STEP + set * 4 + ZK_MASTER);
        float *m = zero_nvme_buffer(nv, BUF_STEP + set * 4 + ZK_M), *v = zero_nvme_buffer(nv, BUF_STEP + set * 4 + ZK_V);
        float *g = zero_nvme_buffer(nv, BUF_STEP + set * 4 + ZK_GRAD);
        size_t n = tiles[kc].n, c = tiles[kc].c;
        if (update) {
            double t0 = zero_clock();
            uint64_t n0 = zero_trace_on ? zero_trace_now() : 0;
            zero_cpu_adamw(mb, g, m, v, n, p, z->t[ti].decay);
            add_adamw_time(o, t0);
            if (zero_trace_on)
                zero_trace_span(dst ? "adamw (cpu, fused with the gather)" : "adamw (cpu, a tile from nvme)", z->t[ti].name,
                                n0, zero_trace_now());
            float *bufs[3] = {mb, m, v};
            for (int kind = 0; kind < 3; kind++) {
                ZeroTicket tk = zero_nvme_write(nv, bufs[kind], file_at(z, kind, ti, c, sizeof(float)), io_bytes(n, sizeof(float)));
                if (!tk) nvme_check(z, -1, "queueing an optimizer write", ti);
                last_write[set] = o->state_write[ti] = tk;
            }
        }
        if (dst) {   // the gather takes the fresh values from here: no read of them from NVMe
            b->copy(b, byte_at(dst, c, z->param_size), ZERO_MEM_DEVICE, mb, ZERO_MEM_HOST, n * z->param_size, o->upload_stream);
            b->stream_sync(b, o->upload_stream);
        }
        // the gradient buffer is free now: the NVMe parameter tier rounds into it, and the
        // set is reused only after that write too (the latest ticket)
        ZeroTicket tk = send_params(z, ti, c, mb, n, t, g);
        if (tk) last_write[set] = tk;
    }
    o->step_sets = set0 + (k1 - k0);
    // leave_writes (one tensor's deferred update): the writes stay in flight beside the next
    // tensor's reads; state_writes_done orders whatever touches those bytes again
    // (a rank owning no element has no engine)
    if (!leave_writes && nv) nvme_check(z, zero_nvme_drain(nv), "the step's writes", -1);
}

static void update_nvme(Zero *z, const AdamWParams *p, int update, int t) {
    update_tiles(z, p, update, t, 0, z->off.ntiles, NULL, 0);
}

// A deferred update of tensor ti, if it still waits: its tiles through AdamW now (dst: the
// fresh master there too). Called where the tensor is read next, on the host stream, or by
// the calling thread with the host stream idle.
static void catch_up(Zero *z, int ti, void *dst) {
    ZeroOffload *o = &z->off;
    if (!o->defer || !o->stale[ti]) return;
    ZeroNvmeStats before = {0}, after = {0};   // the main engine is this thread's alone meanwhile
    if (o->nvme) zero_nvme_stats(o->nvme, &before);   // (a rank owning no element has none)
    update_tiles(z, &o->pend, 1, o->pend_t, o->tile_first[ti], o->tile_first[ti + 1], dst, 1);
    if (o->nvme) zero_nvme_stats(o->nvme, &after);
    atomic_fetch_add_explicit(&o->caught_read, after.read_asked - before.read_asked, memory_order_relaxed);
    atomic_fetch_add_explicit(&o->caught_written, after.write_asked - before.write_asked, memory_order_relaxed);
    o->stale[ti] = 0;
}

// Every write the deferred updates left in flight, done: whatever tensor they belong to,
// their buffers (the step's sets) and bytes may be touched again.
static void writes_drained(Zero *z) {
    ZeroOffload *o = &z->off;
    if (o->nvme) nvme_check(z, zero_nvme_drain(o->nvme), "the deferred update's writes", -1);
    if (o->state_write) memset(o->state_write, 0, (size_t)z->num_tensors * sizeof(uint64_t));
}

// Every deferred update that still waits, run, and the main engine's writes drained: no
// byte of the swap file is stale or being written after it (on the host stream, or with it idle).
static void catch_up_all(Zero *z) {
    for (int i = 0; i < z->num_tensors; i++) catch_up(z, i, NULL);
    writes_drained(z);
}

void zero_offload_flush(Zero *z) {
    if (!z->off.defer) return;
    if (counts_only(z)) {
        dry_catch_up_all(z);
        return;
    }
    zero_offload_wait(z);
    catch_up_all(z);
}

// The optimizer on the device, stage 3's parameters offloaded: the new working shard is
// rounded from the device master, brought down a tile at a time.
static void refresh_from_device(Zero *z, int t) {
    ZeroOffload *o = &z->off;
    const ZeroBackend *b = z->b;
    float *m = o->nvme ? zero_nvme_buffer(o->nvme, BUF_STEP) : o->down;
    for (int i = 0; i < z->num_tensors; i++) {
        const ZeroTensorLayout *l = z->t[i].lay;
        for (size_t c = 0; c < l->own_count; c += o->tile) {
            size_t n = min_sz(o->tile, l->own_count - c);
            b->copy(b, m, ZERO_MEM_HOST, z->step.master + l->shard_off + c, ZERO_MEM_DEVICE, n * sizeof(float), z->main);
            b->stream_sync(b, z->main);
            ZeroTicket tk = send_params(z, i, c, m, n, t, o->nvme ? zero_nvme_buffer(o->nvme, BUF_STEP + 1) : NULL);
            if (tk) nvme_check(z, zero_nvme_wait(o->nvme, tk), "a parameter write", i);
        }
    }
}

// ---------------------------------------------------------------- the delayed update

// The delayed update's stream, one operation per offloaded tensor, from the last (the order
// backward's accumulations come in, which wait for it: dpu_wait_past): AdamW, then the
// rounding into dpu_work, where the next step's landing finds it.
static void dpu_update(void *arg) {
    OffDpu *d = arg;
    Zero *z = d->z;
    ZeroOffload *o = &z->off;
    const int i = d->ti;
    const ZeroTensorLayout *l = z->t[i].lay;
    const size_t n = l->own_count, off = host_at(z, i);
    const uint64_t n0 = zero_trace_on ? zero_trace_now() : 0;
    double t0 = zero_clock();
    zero_cpu_adamw(o->host[ZK_MASTER] + off, o->host[ZK_GRAD] + off, o->host[ZK_M] + off, o->host[ZK_V] + off, n,
                   &o->dpu_p, z->t[i].decay);
    add_adamw_time(o, t0);
    pthread_mutex_lock(&o->dpu_lock);   // its gradient is free for the next step's accumulation
    o->dpu_done = z->num_tensors - i;
    pthread_cond_broadcast(&o->dpu_moved);
    pthread_mutex_unlock(&o->dpu_lock);
    zero_cpu_refresh(byte_at(o->dpu_work, off, z->param_size), z->cfg.param_dtype, o->host[ZK_MASTER] + off, n,
                     z->cfg.seed, o->dpu_t, l->global_off + l->own_begin);
    if (zero_trace_on) zero_trace_span("delayed update (AdamW, rounding)", z->t[i].name, n0, zero_trace_now());
}

// The update left running lands: once it is done, its working parameters go up where the
// device reads them (on the upload stream, behind the main stream's work on the old ones).
// 0 when none was in flight.
static int dpu_land(Zero *z) {
    ZeroOffload *o = &z->off;
    const ZeroBackend *b = z->b;
    if (!o->dpu_t) return 0;
    double t0 = zero_clock();
    b->stream_sync(b, o->dpu_stream);
    o->dpu_wait_ns += (uint64_t)((zero_clock() - t0) * 1e9);
    for (int i = o->opt_first; i < z->num_tensors; i++) {
        int device;
        void *dst = param_target(z, i, &device);   // stages 1-2: the own slot; 3: the device's shard
        b->copy(b, dst, ZERO_MEM_DEVICE, byte_at(o->dpu_work, host_at(z, i), z->param_size), ZERO_MEM_HOST,
                z->t[i].lay->own_count * z->param_size, o->upload_stream);
    }
    o->dpu_t = 0;
    return 1;
}

// Step t's update starts on the delayed-update stream, after the landing's uploads that read
// dpu_work (no accumulation is queued: the step waited for the host stream).
static void dpu_start(Zero *z, const AdamWParams *p, int t) {
    ZeroOffload *o = &z->off;
    const ZeroBackend *b = z->b;
    o->dpu_p = *p;
    o->dpu_t = t;
    pthread_mutex_lock(&o->dpu_lock);
    o->dpu_done = 0;
    pthread_mutex_unlock(&o->dpu_lock);
    b->event_record(b, o->upload_mark, o->upload_stream);
    b->stream_wait(b, o->dpu_stream, o->upload_mark);
    for (int i = z->num_tensors - 1; i >= o->opt_first; i--) b->host_call(b, o->dpu_stream, dpu_update, &o->dpu_items[i]);
}

int zero_offload_land(Zero *z) {
    ZeroOffload *o = &z->off;
    const ZeroBackend *b = z->b;
    if (!o->dpu_t) return 0;
    const uint64_t waited = o->dpu_wait_ns;   // a wait between steps is not a step's
    zero_stream_waits_main(z, o->upload_stream);
    dpu_land(z);
    o->dpu_wait_ns = waited;
    b->event_record(b, o->upload_mark, o->upload_stream);
    b->stream_wait(b, z->gather.stream, o->upload_mark);
    b->stream_wait(b, z->main, o->upload_mark);
    return 1;
}

void zero_offload_update(Zero *z, const AdamWParams *p, int update, int t) {
    ZeroOffload *o = &z->off;
    const ZeroBackend *b = z->b;
    if (o->opt == ZERO_TIER_DEVICE && o->param == ZERO_TIER_DEVICE) return;
    if (counts_only(z)) {
        dry_update(z, update);
        return;
    }
    zero_offload_wait(z);   // no accumulation or parameter read runs beside the step's I/O
    o->settled = 0;         // what the step writes, a read stream's read must not pass
    // The uploads overwrite working parameters that work queued on the main stream may still
    // read (and, at init, that zero_alloc's memsets on it have yet to clear): after it. On
    // the host backend the main stream is the calling thread, so only a GPU shows this.
    zero_stream_waits_main(z, o->upload_stream);
    const int delayed = update && o->dpu_stream && t >= z->cfg.dpu_from;
    if (o->dpu_stream) dpu_land(z);   // the step before's update goes up (this one's starts from its master)
    if (delayed) {
        dpu_start(z, p, t);
    } else if (update && o->defer) {   // each tensor's AdamW waits for its next read (catch_up)
        zero_offload_flush(z);  // none still waits from the step before (each was read since)
        memset(o->stale, 1, (size_t)z->num_tensors);
        o->pend = *p;
        o->pend_t = t;
    } else if (!update && o->param_is_master) {}   // a refresh alone: the stored master is the parameters
    else if (o->opt == ZERO_TIER_HOST) update_host(z, p, update, t);
    else if (o->opt == ZERO_TIER_NVME) update_nvme(z, p, update, t);
    else refresh_from_device(z, t);
    // the uploads land before the gathers and the model read them
    b->event_record(b, o->upload_mark, o->upload_stream);
    b->stream_wait(b, z->gather.stream, o->upload_mark);
    b->stream_wait(b, z->main, o->upload_mark);
}

// ---------------------------------------------------------------- stage 3 gathers


// Host stream, or (r->settled) the read stream: tensor ti's working parameters from NVMe, a
// tile at a time through the stream's engine buffer, copied up into the gather buffer's own
// slot (nc -> cg).
static void read_params(void *arg) {
    OffRead *r = arg;
    Zero *z = r->z;
    ZeroOffload *o = &z->off;
    const ZeroBackend *b = z->b;
    const size_t n = z->t[r->ti].lay->own_count;
    const uint64_t n0 = zero_trace_on ? zero_trace_now() : 0;
    if (!r->settled && o->defer && o->stale[r->ti]) {   // the step's update of this tensor, its result the gather's
        catch_up(z, r->ti, r->dst);
        if (zero_trace_on) zero_trace_span("deferred update (nvme, read into the gather)", z->t[r->ti].name, n0, zero_trace_now());
        atomic_store_explicit(&r->busy, 0, memory_order_release);
        return;
    }
    ZeroNvme *nv = r->settled ? o->read_nvme : o->nvme;
    ZeroStream *up = r->settled ? o->read_upload : o->upload_stream;
    void *buf = zero_nvme_buffer(nv, r->settled ? 0 : BUF_HS_READ);
    if (!r->settled && o->param_is_master) state_writes_done(z, r->ti);   // the parameters are the master's bytes
    for (size_t c = 0; c < n; c += o->tile) {
        size_t len = min_sz(o->tile, n - c);
        nvme_check_on(z, nv, zero_nvme_wait(nv, zero_nvme_read(nv, buf, file_at(z, ZK_PARAM, r->ti, c, z->param_size),
                                                               io_bytes(len, z->param_size))), "a parameter read", r->ti);
        b->copy(b, byte_at(r->dst, c, z->param_size), ZERO_MEM_DEVICE, buf, ZERO_MEM_HOST, len * z->param_size, up);
        b->stream_sync(b, up);   // buf is reused by the next tile
    }
    if (zero_trace_on) zero_trace_span(r->settled ? "nvme read (parameters, read stream)" : "nvme read (parameters)",
                                       z->t[r->ti].name, n0, zero_trace_now());
    atomic_store_explicit(&r->busy, 0, memory_order_release);
}

// Host stream, once per step before the read stream's first read: every tensor the forward
// did not read is caught up, and the deferred update's writes are drained. After it no byte
// the read stream reads is stale or being written until the next update (which waits for
// both streams), so the two streams' engines need no ordering with each other.
static void settle(void *arg) {
    Zero *z = arg;
    const uint64_t n0 = zero_trace_on ? zero_trace_now() : 0;
    catch_up_all(z);
    if (zero_trace_on) zero_trace_span("settle (before the read stream's reads)", "", n0, zero_trace_now());
}

void zero_offload_unwaited_gather(Zero *z) { z->off.unwaited_gather = 1; }

void *zero_offload_shard(Zero *z, int ti, void *mine, int bwd) {
    ZeroOffload *o = &z->off;
    const ZeroBackend *b = z->b;
    const ZeroTensorLayout *l = z->t[ti].lay;
    if (o->param == ZERO_TIER_DEVICE)   // the uploaded shard of an offloaded tensor, else the device master's
        return o->dev_work && zero_offload_holds(z, ti) ? byte_at(o->dev_work, host_at(z, ti), z->param_size) : NULL;
    if (l->split.shard > l->own_count)   // a recycled block's padding: zero like everywhere else
        b->memset0(b, byte_at(mine, l->own_count, z->param_size), (l->split.shard - l->own_count) * z->param_size, z->gather.stream);
    if (o->param == ZERO_TIER_HOST) {
        b->copy(b, mine, ZERO_MEM_DEVICE, byte_at(o->host[ZK_PARAM], l->shard_off, z->param_size), ZERO_MEM_HOST,
                l->own_count * z->param_size, z->gather.stream);
        return mine;
    }
    if (l->own_count == 0) return mine;
    if (counts_only(z)) {
        dry_shard(z, ti, bwd);
        return mine;
    }
    // NVMe: read on the host stream once the model no longer reads the recycled block (and no
    // earlier gather writes it: below). The
    // tensor's record is free again once its previous read has run (the host stream is in
    // order, so that read was queued before this gather's and needs nothing from it).
    OffRead *r = &o->reads[ti];
    while (atomic_load_explicit(&r->busy, memory_order_acquire)) sched_yield();
    atomic_store_explicit(&r->busy, 1, memory_order_relaxed);
    r->dst = mine;
    if (bwd && !o->settled) {   // the first backward read since the update: settle first
        b->host_call(b, o->host_stream, settle, z);
        b->event_record(b, o->settled_mark, o->host_stream);
        b->stream_wait(b, o->read_stream, o->settled_mark);
        o->settled = 1;
    }
    // settled, every read (the recompute's, the next micro-step's forward) takes the read stream
    r->settled = o->settled;
    ZeroStream *s = r->settled ? o->read_stream : o->host_stream;
    ZeroEvent *done = r->settled ? o->read_mark : o->host_mark;
    b->event_record(b, z->main_mark, z->main);
    b->stream_wait(b, s, z->main_mark);
    // ...and, when a block was freed whose all-gather nothing has waited for (a prefetched
    // tensor evicted before any use: gather.c's drop), once the gather stream's queued work
    // is done: that all-gather, still waiting for a peer, could write over this read
    if (o->unwaited_gather) {
        b->event_record(b, z->gather.mark, z->gather.stream);
        b->stream_wait(b, s, z->gather.mark);
        o->unwaited_gather = 0;
    }
    b->host_call(b, s, read_params, r);
    b->event_record(b, done, s);
    b->stream_wait(b, z->gather.stream, done);
    return mine;
}

// ---------------------------------------------------------------- tied gradients

// Host stream: a tied tensor's whole gradient block out to its park or back, through
// the upload stream's copies (and on NVMe the host stream's engine buffer, a tile at a time).
static void park_io(void *arg) {
    OffPark *r = arg;
    Zero *z = r->z;
    ZeroOffload *o = &z->off;
    const ZeroBackend *b = z->b;
    const size_t bytes = z->t[r->ti].lay->split.padded * z->grad_size;
    const uint64_t n0 = zero_trace_on ? zero_trace_now() : 0;
    if (o->park == ZERO_TIER_HOST) {
        char *h = o->park_host + o->park_at[r->ti];
        if (r->out) b->copy(b, h, ZERO_MEM_HOST, r->dev, ZERO_MEM_DEVICE, bytes, o->upload_stream);
        else b->copy(b, r->dev, ZERO_MEM_DEVICE, h, ZERO_MEM_HOST, bytes, o->upload_stream);
        b->stream_sync(b, o->upload_stream);
    } else {
        void *buf = zero_nvme_buffer(o->nvme, BUF_HS_READ);
        const size_t chunk = zero_nvme_buffer_bytes(o->nvme);
        for (size_t c = 0; c < bytes; c += chunk) {
            size_t len = min_sz(chunk, bytes - c);
            uint64_t at = o->park_at[r->ti] + c;
            if (r->out) {
                b->copy(b, buf, ZERO_MEM_HOST, byte_at(r->dev, c, 1), ZERO_MEM_DEVICE, len, o->upload_stream);
                b->stream_sync(b, o->upload_stream);
                nvme_check(z, zero_nvme_wait(o->nvme, zero_nvme_write(o->nvme, buf, at, io_bytes(len, 1))),
                           "a parked gradient's write", r->ti);
            } else {
                nvme_check(z, zero_nvme_wait(o->nvme, zero_nvme_read(o->nvme, buf, at, io_bytes(len, 1))),
                           "a parked gradient's read", r->ti);
                b->copy(b, byte_at(r->dev, c, 1), ZERO_MEM_DEVICE, buf, ZERO_MEM_HOST, len, o->upload_stream);
                b->stream_sync(b, o->upload_stream);
            }
        }
    }
    if (zero_trace_on) zero_trace_span(r->out ? "park tied gradient" : "unpark tied gradient", z->t[r->ti].name, n0,
                                       zero_trace_now());
    atomic_store_explicit(&r->busy, 0, memory_order_release);
}

// Queues record r's transfer on the host stream after the main stream's work so far.
static void park_queue(Zero *z, OffPark *r, void *grad) {
    ZeroOffload *o = &z->off;
    const ZeroBackend *b = z->b;
    while (atomic_load_explicit(&r->busy, memory_order_acquire)) sched_yield();
    atomic_store_explicit(&r->busy, !counts_only(z), memory_order_relaxed);   // a dry run runs no host call
    r->dev = grad;
    b->event_record(b, z->main_mark, z->main);
    b->stream_wait(b, o->host_stream, z->main_mark);
    if (counts_only(z)) dry_park(z, r);
    b->host_call(b, o->host_stream, park_io, r);
}

void zero_offload_park(Zero *z, int ti, void *grad, ZeroEvent *done) {
    park_queue(z, &z->off.parks[2 * ti], grad);
    z->b->event_record(z->b, done, z->off.host_stream);
}

void zero_offload_unpark(Zero *z, int ti, void *grad) {
    ZeroOffload *o = &z->off;
    park_queue(z, &o->parks[2 * ti + 1], grad);
    z->b->event_record(z->b, o->host_mark, o->host_stream);
    z->b->stream_wait(z->b, z->main, o->host_mark);
}

// ---------------------------------------------------------------- accounting

// A step's NVMe bytes are those of the requests it made (the engines' read_asked and
// write_asked), not of those completed by its end: a deferred update's writes stay in
// flight past it (stage 3's persistent tensors, caught up at the step's end), and when
// they land depends on the disk and the machine's load. The dry run adds up the same
// requests. A deferred update run between two steps (a validation's gather, a checkpoint or
// an export read the tensor first) is counted in the next step, so that the updates' bytes
// are in the figures whatever else the run does between its steps.

// Both engines' totals (the busy seconds are already the file's, both engines counted once).
static void engine_stats(Zero *z, ZeroNvmeStats *st) {
    zero_nvme_stats(z->off.nvme, st);
    if (!z->off.read_nvme) return;
    ZeroNvmeStats r;
    zero_nvme_stats(z->off.read_nvme, &r);
    st->bytes_read += r.bytes_read;
    st->bytes_written += r.bytes_written;
    st->read_asked += r.read_asked;
    st->write_asked += r.write_asked;
    st->reads += r.reads;
    st->writes += r.writes;
}

// The engines' totals, or a dry run's (its swap file exists only there)
static int io_totals(Zero *z, ZeroNvmeStats *st) {
    if (counts_only(z) && z->off.file_bytes) {
        memset(st, 0, sizeof *st);
        st->read_asked = z->off.dry_read;
        st->write_asked = z->off.dry_written;
        return 1;
    }
    if (!z->off.nvme) return 0;
    engine_stats(z, st);
    return 1;
}

void zero_offload_step_begin(Zero *z) {
    ZeroNvmeStats st;
    if (!io_totals(z, &st)) return;
    ZeroOffload *o = &z->off;
    o->mark_read = st.read_asked - (atomic_load(&o->caught_read) - o->caught_mark_read);
    o->mark_written = st.write_asked - (atomic_load(&o->caught_written) - o->caught_mark_written);
    o->mark_busy = st.busy_s;
}

void zero_offload_step_end(Zero *z) {
    // A skipped update waited for none of the gradient writes; the next step's first write of
    // the same bytes would not wait for them either (the engine does not order writes), and
    // AdamW would read the skipped step's gradient.
    if (z->off.nvme) gradient_writes_done(z);
    ZeroNvmeStats st;
    if (!io_totals(z, &st)) return;
    z->off.last_read = st.read_asked - z->off.mark_read;
    z->off.last_written = st.write_asked - z->off.mark_written;
    z->off.step_read += z->off.last_read;
    z->off.step_written += z->off.last_written;
    z->off.step_busy += st.busy_s - z->off.mark_busy;
    z->off.caught_mark_read = atomic_load(&z->off.caught_read);
    z->off.caught_mark_written = atomic_load(&z->off.caught_written);
}
