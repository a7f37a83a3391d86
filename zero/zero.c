// zero.c: the plugin's life cycle: init (partition, allocate every buffer, initialize
// the owned shards), the fetch/release views, begin_step and the optimizer step.
// Gradient buckets are in reduce.c, stage-3 gathering in gather.c, the tiers in offload.c;
// what they share is in state.c.
#include "state.h"

#include "gather.h"
#include "offload.h"
#include "reduce.h"

#include <math.h>

#include "kernels/quant.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INIT_CHUNK 65536   // floats per ZeroInitFn call (host staging for device masters)
#define AUTO_BUCKET_MAX ((size_t)1 << 22)   // auto bucket: at most 4M elements (16 MB in fp32)

void zero_config_defaults(ZeroConfig *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->stage = 0;
    cfg->param_dtype = ZERO_F32;
    cfg->grad_dtype = ZERO_F32;
    cfg->bucket_elems = ZERO_AUTO;     // sized from the model by zero_init (choose_sizes)
    cfg->prefetch_elems = ZERO_AUTO;
    cfg->max_live_elems = 0;       // 0: the largest unit plus prefetch_elems
    cfg->persist_elems = ZERO_AUTO;    // 65536, none with the parameters on NVMe (world_init)
    cfg->seed = 1337;
    cfg->node_size = 0;
    cfg->timeout_s = 600.0;
    cfg->optimizer_tier = ZERO_TIER_DEVICE;
    cfg->param_tier = ZERO_TIER_DEVICE;
}

static char *byte_at(void *base, size_t elems, size_t es) { return (char *)base + elems * es; }

// A tensor's name as zero_init keeps it: its own, or "tensor<i>" when it has none (made up
// in a buffer apart from the array that is sorted).
typedef struct {
    const char *name;
    int index;
} NamedTensor;

// Tensors by name, equal names in table order (validate's duplicate check).
static int by_name(const void *a, const void *b) {
    const NamedTensor *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

// Two tensors of one name would be two independent weights that drift apart (a tensor
// shared by units is one entry listing them) and a checkpoint could not tell them apart; a
// tensor named "tensor3" beside a nameless tensor 3 is two of one name too. Sorted rather
// than compared pairwise: the dry run validates the table once per rank.
static int refuse_duplicate_names(const ZeroTensor *tensors, int num_tensors, int r) {
    NamedTensor *named = malloc((size_t)num_tensors * sizeof *named);
    char(*made)[24] = malloc((size_t)num_tensors * sizeof *made);
    if (!named || !made) {
        free(named);
        free(made);
        return zero_refuse(r, "out of host memory checking the names of %d tensors", num_tensors);
    }
    for (int i = 0; i < num_tensors; i++) {
        named[i].index = i;
        snprintf(made[i], sizeof made[i], "tensor%d", i);
        named[i].name = tensors[i].name ? tensors[i].name : made[i];
    }
    qsort(named, (size_t)num_tensors, sizeof *named, by_name);
    int rc = 0;
    for (int k = 1; k < num_tensors && rc == 0; k++)
        if (strcmp(named[k - 1].name, named[k].name) == 0)
            rc = zero_refuse(r, "tensors %d and %d are both named \"%s\"%s: a tensor read by two units is one entry "
                             "listing both (units, num_units)", named[k - 1].index, named[k].index, named[k].name,
                             tensors[named[k - 1].index].name && tensors[named[k].index].name ? ""
                                                                                            : " (a tensor without a name is called tensor<i>)");
    free(named);
    free(made);
    return rc;
}

// Checks that do not need the buffers; prints and returns -1 on a bad table or config.
static int validate(const ZeroTensor *tensors, int num_tensors, int num_units, const ZeroConfig *cfg, ZeroComm *comm,
                    const ZeroBackend *b) {
    int r = comm ? comm->rank : -1;
    if (!comm || !b || !cfg || !tensors) {
        return zero_refuse(r, "zero_init needs a tensor table, a config, a comm and a backend");
    }
    if (num_tensors < 1 || num_units < 1) {
        return zero_refuse(r, "zero_init with %d tensors and %d units (need at least one of each)", num_tensors, num_units);
    }
    if (cfg->stage < 0 || cfg->stage > 3) {
        return zero_refuse(r, "stage %d is not one of 0, 1, 2, 3", cfg->stage);
    }
    if ((cfg->param_dtype != ZERO_F32 && cfg->param_dtype != ZERO_BF16) ||
        (cfg->grad_dtype != ZERO_F32 && cfg->grad_dtype != ZERO_BF16)) {
        return zero_refuse(r, "unknown dtype (param %d, grad %d)", (int)cfg->param_dtype, (int)cfg->grad_dtype);
    }
    if (zero_offload_validate(cfg, r) != 0) return -1;
    if (b->needs_mpi && comm->world > 1 && comm->launch != ZERO_LAUNCH_MPI) {
        return zero_refuse(r, "the %s backend moves data with MPI, but WORLD_SIZE=%d was set without "
                "an MPI launcher: start with mpirun or srun", b->name, comm->world);
    }
    for (int i = 0; i < num_tensors; i++) {
        const ZeroTensor *t = &tensors[i];
        const char *name = t->name ? t->name : "(unnamed)";
        if (t->num_units < 1 || t->num_units > ZERO_MAX_TENSOR_UNITS) {
            return zero_refuse(r, "tensor %d (%s) is used by %d units (1 to %d allowed)", i, name,
                    t->num_units, ZERO_MAX_TENSOR_UNITS);
        }
        for (int k = 0; k < t->num_units; k++) {
            if (t->units[k] < 0 || t->units[k] >= num_units || (k == 1 && t->units[1] == t->units[0])) {
                return zero_refuse(r, "tensor %d (%s) names unit %d%s (units are 0..%d)", i, name,
                        t->units[k], k == 1 && t->units[1] == t->units[0] ? " twice" : "", num_units - 1);
            }
        }
    }
    return refuse_duplicate_names(tensors, num_tensors, r);
}

// The ZeRO++ switches, once the node layout is known.
static int validate_pp(const ZeroConfig *cfg, const ZeroComm *comm) {
    int r = comm->rank;
    const char *which = cfg->qwz ? "--qwz (zero_quantized_weights)" : "--hpz (zero_hpz_partition_size)";
    if ((cfg->qwz || cfg->hpz > 1) && cfg->stage != 3) {
        return zero_refuse(r, "%s needs stage 3 (-z 3): below it parameters are not gathered before each use", which);
    }
    if (cfg->qwz && cfg->param_tier == ZERO_TIER_NVME) {   // its packing would read NVMe into a gather-stream buffer
        return zero_refuse(r, "--qwz with --offload-param nvme is not supported yet");
    }
    const char *hwhich = cfg->qgz ? "--qgz (zero_quantized_gradients)" : "--hier-reduce";
    if ((cfg->qgz || cfg->hier_reduce) && cfg->optimizer_tier != ZERO_TIER_DEVICE) {
        return zero_refuse(r, "%s with --offload-optimizer is not supported yet", hwhich);
    }
    if (cfg->fast_reduce && (cfg->qgz || cfg->hier_reduce || cfg->optimizer_tier != ZERO_TIER_DEVICE)) {
        return zero_refuse(r, "--fast-reduce sums whole gradients by the library's reduce-scatter in bf16; it does not "
                "combine with %s", cfg->qgz ? "--qgz" : cfg->hier_reduce ? "--hier-reduce" : "--offload-optimizer");
    }
    if ((cfg->qgz || cfg->hier_reduce || cfg->hpz > 1) && !comm->consecutive) {
        return zero_refuse(r, "%s needs the ranks of each node numbered consecutively (this rank is local rank "
                "%d of node %d with %d ranks per node); launch with ranks mapped by slot, or give --node-size", cfg->hpz > 1 ? "--hpz" : hwhich, comm->local_rank, comm->node, comm->local_size);
    }
    if (cfg->hpz < 0) {
        return zero_refuse(r, "--hpz %d: the secondary partition size must be >= 1", cfg->hpz);
    }
    // hpZ's point is a backward gather inside the node; a group that spans nodes still
    // trains the same bits (and crosses fewer nodes than the world's gather), so it is allowed
    if (cfg->hpz > 1 && comm->local_size % cfg->hpz != 0 && r == 0)
        zero_say_rank(r, "warning: --hpz %d: a group of %d consecutive ranks spans nodes of %d ranks, so the backward "
                      "gathers cross nodes; hpZ keeps them inside one node when N divides the node size (--node-size "
                      "sets a logical one)", cfg->hpz, cfg->hpz, comm->local_size);
    if ((cfg->qwz_block && quant_check_block(cfg->qwz_block, "the qwZ block size") != 0) ||
        (cfg->qgz_block && quant_check_block(cfg->qgz_block, "the qgZ block size") != 0))
        return -1;
    return 0;
}

// Fills [dst, dst + count) with the initial values of elements [begin, begin + count) of
// tensor ti, through a host chunk so that the master may live in device memory.
static void init_range(Zero *z, ZeroInitFn init, void *ctx, float *chunk, int ti, size_t begin, size_t count, float *dst) {
    for (size_t done = 0; done < count; done += INIT_CHUNK) {
        size_t n = count - done < INIT_CHUNK ? count - done : INIT_CHUNK;
        init(ctx, ti, begin + done, n, chunk);
        z->b->copy(z->b, dst + done, ZERO_MEM_DEVICE, chunk, ZERO_MEM_HOST, n * sizeof(float), z->main);
        z->b->stream_sync(z->b, z->main);   // the chunk is reused
    }
}

// Stages 1-2: refresh this rank's slot of the full working params from the master
// shard and all-gather every tensor in place. Stage 0 refreshes the full tensors. Stage 3
// gathers its persistent tensors (the others are gathered when fetched). With offload the
// refreshed values come from the CPU (zero_offload_update, before this) and are only
// gathered here.
static void gather_working(Zero *z, int t_step) {
    const ZeroBackend *b = z->b;
    if (z->stage == 3) {   // the others are gathered when fetched
        zero_gather_persistent(z, t_step);
        return;
    }
    for (int i = 0; i < z->num_tensors; i++) {
        const ZeroTensorLayout *l = z->t[i].lay;
        z->parts[i].send = byte_at(z->t[i].work, (size_t)z->rank * l->split.shard, z->param_size);
        z->parts[i].recv = z->t[i].work;
        z->parts[i].count = l->split.shard;
    }
    zero_stream_waits_main(z, z->gather.stream);
    b->all_gather(b, z->comm, ZERO_GROUP_WORLD, z->parts, z->num_tensors, z->cfg.param_dtype, z->gather.stream, "working params (all tensors)");
    for (int i = 0; i < z->num_tensors; i++) zero_flow_add(z, ZERO_FLOW_STEP_GATHER, ZERO_GROUP_WORLD, z->parts[i].count * z->param_size);
    zero_main_waits_stream(z, z->gather.stream);
}

// Stages 1-2: this rank's slot of each tensor whose master is on the device (all of them
// without offload, the first ones with a partial offload), rounded from it.
static void refresh_device(Zero *z, int t_step) {
    ZeroRefreshPart *parts = z->step.refresh_parts;
    int n = 0;
    for (int i = 0; i < z->num_tensors && z->stage <= 2 && !zero_offload_holds(z, i); i++) {
        const ZeroTensorLayout *l = z->t[i].lay;
        void *mine = byte_at(z->t[i].work, (size_t)z->rank * l->split.shard, z->param_size);
        parts[n++] = (ZeroRefreshPart){mine, z->step.master + l->shard_off, l->own_count, l->global_off + l->own_begin};
    }
    zero_refresh_parts(z->b, parts, n, z->cfg.param_dtype, z->cfg.seed, t_step, z->main);
}

static void refresh_working(Zero *z, int t_step) {
    if (z->stage == 0) {
        ZeroRefreshPart *parts = z->step.refresh_parts;
        for (int i = 0; i < z->num_tensors; i++) {
            const ZeroTensorLayout *l = z->t[i].lay;
            parts[i] = (ZeroRefreshPart){z->t[i].work, z->step.master + l->full_off, l->split.numel, l->global_off};
        }
        zero_refresh_parts(z->b, parts, z->num_tensors, z->cfg.param_dtype, z->cfg.seed, t_step, z->main);
        return;
    }
    refresh_device(z, t_step);
    if (zero_offload_optimizer(z) || z->off.param != ZERO_TIER_DEVICE)
        zero_offload_update(z, NULL, 0, t_step);   // rounded on the CPU, sent where they live
    gather_working(z, t_step);
}

static void build_units(Zero *z) {
    for (int u = 0; u < z->num_units; u++) {
        ZeroUnitState *U = &z->u[u];
        U->fetched = -1;
        for (int i = 0; i < z->num_tensors; i++)
            for (int k = 0; k < z->t[i].num_units; k++)
                if (z->t[i].units[k] == u) U->n++;
        U->tensors = zero_host_alloc(z, (size_t)U->n * sizeof(int), "unit tensor lists");
        U->params = zero_host_alloc(z, (size_t)U->n * sizeof(void *), "unit views");
        U->grads = zero_host_alloc(z, (size_t)U->n * sizeof(void *), "unit views");
        int j = 0;
        for (int i = 0; i < z->num_tensors; i++)
            for (int k = 0; k < z->t[i].num_units; k++)
                if (z->t[i].units[k] == u) {
                    U->tensors[j++] = i;
                    // tied tensors sit in the pool's top part (shared_padded), once, unless parked
                    if (z->t[i].num_units == 1) U->grad_need += z->t[i].lay->split.padded;
                    else U->grad_tied += z->t[i].lay->split.padded;
                    if (!z->t[i].persistent) U->pool_need += z->t[i].lay->split.padded;
                }
        snprintf(U->label, sizeof U->label, "u%d %s", u, U->n ? z->t[U->tensors[0]].name : "");
        U->view.count = U->n;
        U->view.tensors = U->tensors;
        U->view.params = U->params;
        U->view.grads = U->grads;
    }
}

static size_t sub_or_zero(size_t a, size_t b) { return a > b ? a - b : 0; }

// The sizes left to the plugin (ZERO_AUTO), from the model, so that at these defaults a
// higher stage never holds more model-state bytes per rank than a lower one:
//  - bucket: stage 2 holds a gradient pool of bucket + 2 x the largest unit + the tied
//    tensors where stage 1 holds every gradient: the bucket takes at most half of the
//    difference, and at most AUTO_BUCKET_MAX (big enough for full-speed collectives).
//  - prefetch: one typical unit ahead (the median unit's gathered elements; with the
//    parameters offloaded, at least the largest tensor), as long as the gather pool and the
//    persistent tensors stay within half of what stage 2's whole working parameters leave
//    above the largest unit.
static void choose_sizes(Zero *z, size_t max_pool_need, size_t max_grad_need, size_t shared_padded) {
    const size_t P = z->layout.padded_total;
    if (z->cfg.bucket_elems == ZERO_AUTO) {
        size_t room = sub_or_zero(P, 2 * max_grad_need + shared_padded + ZERO_ALIGN_ELEMS);
        size_t b = room / 2 < AUTO_BUCKET_MAX ? room / 2 : AUTO_BUCKET_MAX;
        z->cfg.bucket_elems = b / ZERO_ALIGN_ELEMS * ZERO_ALIGN_ELEMS;
    }
    if (z->cfg.prefetch_elems == ZERO_AUTO) {
        size_t *need = zero_host_alloc(z, (size_t)z->num_units * sizeof(size_t), "unit sizes");
        for (int u = 0; u < z->num_units; u++) {   // insertion sort: a few hundred units at most
            size_t v = z->u[u].pool_need;
            int k = u;
            for (; k > 0 && need[k - 1] > v; k--) need[k] = need[k - 1];
            need[k] = v;
        }
        size_t median = need[z->num_units / 2], persist = 0, largest = 0;
        free(need);
        for (int i = 0; i < z->num_tensors; i++) {
            if (z->t[i].persistent) persist += z->t[i].lay->split.padded;
            else if (z->t[i].lay->split.padded > largest) largest = z->t[i].lay->split.padded;
        }
        // parameters offloaded: a gather is a read from host memory or disk, and a tensor
        // larger than the window is read only when the model asks for it, with the model
        // waiting; the window takes the largest tensor so that every read can go ahead
        size_t want = z->stage == 3 && z->cfg.param_tier != ZERO_TIER_DEVICE && largest > median ? largest : median;
        size_t room = sub_or_zero(P, max_pool_need + persist + ZERO_ALIGN_ELEMS);
        z->cfg.prefetch_elems = want < room / 2 ? want : room / 2;
    }
}

// The world: who this rank is, the tensor and unit tables, the main stream. NULL (after
// saying why) on a layout the comm cannot take or a bad ZeRO++ setting.
static Zero *world_init(const ZeroTensor *tensors, int num_tensors, int num_units, const ZeroConfig *cfg,
                        ZeroComm *comm, const ZeroBackend *backend) {
    if (((cfg->node_size != comm->node_size || (cfg->hpz > 1 ? cfg->hpz : 1) != comm->hpz_size) &&
         zero_comm_set_layout(comm, cfg->node_size, cfg->hpz) != 0) ||
        zero_comm_set_timeout(comm, cfg->timeout_s) != 0 || validate_pp(cfg, comm) != 0)
        return NULL;
    Zero *z = calloc(1, sizeof(Zero));
    if (!z) { zero_say_rank(comm->rank, "out of host memory"); return NULL; }
    z->cfg = *cfg;
    z->comm = comm;
    z->b = backend;
    z->stage = cfg->stage;
    z->rank = comm->rank;
    z->world = comm->world;
    z->num_tensors = num_tensors;
    z->num_units = num_units;
    z->param_size = zero_dtype_size(cfg->param_dtype);
    z->grad_size = zero_dtype_size(cfg->grad_dtype);
    if (z->cfg.persist_elems == ZERO_AUTO)
        z->cfg.persist_elems = z->stage == 3 && cfg->param_tier == ZERO_TIER_NVME ? 0 : (size_t)1 << 16;
    char err[256];
    if (zero_layout_build(&z->layout, tensors, num_tensors, z->world, z->rank, err, sizeof err) != 0) {
        zero_say(z, "%s", err);
        free(z);
        return NULL;
    }
    z->t = zero_host_alloc(z, (size_t)z->num_tensors * sizeof(ZeroTensorState), "the tensor table");
    z->u = zero_host_alloc(z, (size_t)z->num_units * sizeof(ZeroUnitState), "the unit table");
    for (int i = 0; i < z->num_tensors; i++) {
        ZeroTensorState *t = &z->t[i];
        char buf[32];
        if (!tensors[i].name) snprintf(buf, sizeof buf, "tensor%d", i);
        const char *name = tensors[i].name ? tensors[i].name : buf;
        t->name = zero_host_alloc(z, strlen(name) + 1, "tensor names");
        memcpy(t->name, name, strlen(name) + 1);
        t->decay = tensors[i].decay != 0;
        t->num_units = tensors[i].num_units;
        for (int k = 0; k < t->num_units; k++) t->units[k] = tensors[i].units[k];
        t->lay = &z->layout.t[i];
        t->persistent = z->stage == 3 && z->cfg.persist_elems > 0 && t->lay->split.numel <= z->cfg.persist_elems;
    }
    build_units(z);
    z->parts = zero_host_alloc(z, (size_t)z->num_tensors * sizeof(ZeroCollPart), "collective part lists");
    z->main = z->b->main_stream(z->b);
    if (!z->main) zero_fail(z, "the %s backend has no main stream", z->b->name);
    if (z->b->stream_name) z->b->stream_name(z->b, z->main, "main (the model)");   // a trace's track name
    z->main_mark = zero_new_event(z, "main-stream hand-offs");
    return z;
}

// The pools' sizes: the gather pool (stage 3) and the gradient pool (stages 2-3), whether
// tied gradients park off the device between their units, and the sizes left to the
// plugin (choose_sizes). -1 (after saying why) when max_live_elems cannot hold a unit.
typedef struct { size_t gather_pool, grad_pool; int park_tied; } PoolPlan;

static int plan_pools(Zero *z, PoolPlan *plan) {
    size_t max_pool_need = 0, max_grad_need = 0, max_grad_all = 0, shared_padded = 0, pooled = 0;
    int big_unit = 0;
    for (int i = 0; i < z->num_tensors; i++) {
        if (z->t[i].num_units > 1) shared_padded += z->t[i].lay->split.padded;
        if (!z->t[i].persistent) pooled += z->t[i].lay->split.padded;   // all gathered at once
    }
    for (int u = 0; u < z->num_units; u++) {
        const ZeroUnitState *U = &z->u[u];
        if (U->pool_need > max_pool_need) { max_pool_need = U->pool_need; big_unit = u; }
        if (U->grad_need > max_grad_need) max_grad_need = U->grad_need;
        if (U->grad_need + U->grad_tied > max_grad_all) max_grad_all = U->grad_need + U->grad_tied;
    }
    // With offload, tied tensors' partial gradients may park off the device between their
    // two units (offload.c): then a unit's tied gradients cycle through the pool like its
    // own, and nothing stays in it across units. Only where that makes the pool smaller
    // (tiled: a vocabulary tile is small, the whole embedding is not).
    plan->park_tied = zero_offload_parks_tied(&z->cfg) && shared_padded > 0 &&
                      2 * max_grad_all < 2 * max_grad_need + shared_padded;
    if (plan->park_tied) {
        max_grad_need = max_grad_all;
        shared_padded = 0;
    }
    choose_sizes(z, max_pool_need, max_grad_need, shared_padded);
    const size_t P = z->layout.padded_total;
    // a bucket never holds more than the whole model: do not size buffers beyond it
    if (z->cfg.bucket_elems > P) z->cfg.bucket_elems = P;
    // Every pool is min(what the settings ask for, what the model can ever need), so that
    // DeepSpeed's sizes written for billions of parameters (stage3_max_live_parameters 1e9)
    // reserve no more than the model: the gather pool never holds more than every pooled
    // (non-persistent) tensor at once, the gradient pool never more than every gradient.
    plan->gather_pool = 0;
    if (z->stage == 3) {
        size_t want = z->cfg.max_live_elems ? z->cfg.max_live_elems : max_pool_need + z->cfg.prefetch_elems;
        want = zero_round_up(want, ZERO_ALIGN_ELEMS);   // aligned top placements
        if (want < max_pool_need)
            return zero_refuse(z->rank, "max_live_elems %zu is smaller than unit %d, which needs %zu gathered elements "
                               "at once; raise max_live_elems to at least %zu", z->cfg.max_live_elems, big_unit,
                               max_pool_need, max_pool_need);
        plan->gather_pool = want < pooled ? want : pooled;   // a multiple of ZERO_ALIGN_ELEMS, like every padded size
    }
    // Live at once in the gradient pool: the pending bucket (< bucket_elems before the unit
    // that tips it), tied gradients waiting for their other unit, and the unit being
    // back-propagated. Rounded up so blocks placed from the top (tied tensors) stay aligned.
    plan->grad_pool = 0;
    if (z->stage >= 2) {
        size_t want = zero_round_up(z->cfg.bucket_elems + 2 * max_grad_need + shared_padded, ZERO_ALIGN_ELEMS);
        plan->grad_pool = want < P ? want : P;   // every gradient at once (P: a multiple of ZERO_ALIGN_ELEMS)
    }
    return 0;
}

// The step's buffers on the device: master, m and v (stage 0 whole, else the shard; none
// when offloaded), the reduced shard gradient, and at stages 0-2 the whole working
// parameters (at 0-1 the whole gradients) the model reads and writes in place.
static void step_init(Zero *z) {
    const size_t P = z->layout.padded_total;
    ZeroStep *s = &z->step;
    // offloaded, the device keeps the shard's prefix whose optimizer stays (none: opt_base 0)
    const size_t dev_shard = z->off.opt_base;
    size_t opt_elems = z->stage == 0 ? P : dev_shard;
    if (dev_shard) {
        s->master = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_MASTER, opt_elems * sizeof(float), "fp32 master weights");
        s->m = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_OPTIM, opt_elems * sizeof(float), "AdamW m");
        s->v = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_OPTIM, opt_elems * sizeof(float), "AdamW v");
        s->shard_grad = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_GRADS, dev_shard * sizeof(float), "fp32 reduced gradient shard");
    }
    if (z->stage <= 2) {
        s->work_full = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_PARAMS, P * z->param_size, "working parameters");
        for (int i = 0; i < z->num_tensors; i++) z->t[i].work = byte_at(s->work_full, z->t[i].lay->full_off, z->param_size);
    }
    if (z->stage <= 1) {
        s->grad_full = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_GRADS, P * z->grad_size, "gradients");
        for (int i = 0; i < z->num_tensors; i++) z->t[i].grad = byte_at(s->grad_full, z->t[i].lay->full_off, z->grad_size);
    }
    if (z->stage == 0)
        s->reduced_full = z->cfg.grad_dtype == ZERO_F32 ? (float *)s->grad_full
                          : zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_GRADS, P * sizeof(float), "fp32 reduced gradients");
    if (z->stage == 0 && z->cfg.fast_reduce)
        s->reduced_bf16 = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_GRADS, P * 2, "bf16 reduced gradients");
    s->sumsq = zero_host_alloc(z, (size_t)z->num_tensors * sizeof(double), "norm partials");
    s->adamw_parts = zero_host_alloc(z, (size_t)z->num_tensors * sizeof *s->adamw_parts, "kernel parts");
    s->refresh_parts = zero_host_alloc(z, (size_t)z->num_tensors * sizeof *s->refresh_parts, "kernel parts");
    s->sumsq_parts = zero_host_alloc(z, (size_t)z->num_tensors * sizeof *s->sumsq_parts, "kernel parts");
}

// Partition at init: this rank initializes only the elements it owns (an offloaded master
// where it lives, host memory or NVMe); stage 0 then gathers the whole master everywhere.
static void init_master(Zero *z, ZeroInitFn init, void *init_ctx) {
    if (zero_offload_optimizer(z)) zero_offload_init_master(z, init, init_ctx);   // the tensors it holds
    if (!zero_offload_holds(z, 0)) {
        float *chunk = z->b->alloc(z->b, ZERO_MEM_HOST, INIT_CHUNK * sizeof(float));
        if (!chunk) zero_fail(z, "out of host memory for the init chunk");
        for (int i = 0; i < z->num_tensors && !zero_offload_holds(z, i); i++) {
            const ZeroTensorLayout *l = z->t[i].lay;
            float *dst = z->stage == 0 ? z->step.master + l->full_off + l->own_begin : z->step.master + l->shard_off;
            init_range(z, init, init_ctx, chunk, i, l->own_begin, l->own_count, dst);
        }
        z->b->free(z->b, ZERO_MEM_HOST, chunk);
    }
    // zero_alloc's memsets are on the main stream; init_range syncs it only when this rank owns
    // elements, and the stage-0 gather below writes the master on the gather stream.
    z->b->stream_sync(z->b, z->main);
    if (z->stage != 0) return;
    for (int i = 0; i < z->num_tensors; i++) {
        const ZeroTensorLayout *l = z->t[i].lay;
        z->parts[i].send = z->step.master + l->full_off + (size_t)z->rank * l->split.shard;
        z->parts[i].recv = z->step.master + l->full_off;
        z->parts[i].count = l->split.shard;
    }
    z->b->all_gather(z->b, z->comm, ZERO_GROUP_WORLD, z->parts, z->num_tensors, ZERO_F32, z->gather.stream,
                     "initial master weights");
    z->b->stream_sync(z->b, z->gather.stream);
}

Zero *zero_init(const ZeroTensor *tensors, int num_tensors, int num_units, const ZeroConfig *cfg,
                ZeroComm *comm, const ZeroBackend *backend, ZeroInitFn init, void *init_ctx) {
    if (validate(tensors, num_tensors, num_units, cfg, comm, backend) != 0) return NULL;
    if (!init) {
        zero_say_rank(comm->rank, "zero_init needs an init function for the parameters");
        return NULL;
    }
    Zero *z = world_init(tensors, num_tensors, num_units, cfg, comm, backend);
    if (!z) return NULL;
    PoolPlan plan = {0};
    if (plan_pools(z, &plan) != 0) {
        zero_free(z);
        return NULL;
    }
    // each phase its streams, events and buffers (the streams in this order on every rank:
    // each gets its own communicator)
    zero_gather_init(z, plan.gather_pool);
    zero_reduce_init(z, plan.grad_pool);
    zero_offload_plan(z);
    step_init(z);
    zero_offload_init(z, plan.park_tied);
    init_master(z, init, init_ctx);
    refresh_working(z, 0);
    zero_sync_streams(z);
    zero_run_id_init(z);
    zero_alloc_close(z);
    return z;
}

void zero_free(Zero *z) {
    if (!z) return;
    if (z->main && z->gather.stream && z->reduce.stream) zero_sync_streams(z);
    zero_offload_free(z);   // its streams and the NVMe file go before the buffers they use
    zero_free_buffers(z);
    zero_gather_free(z);
    zero_reduce_free(z);
    free(z->step.sumsq);
    free(z->step.adamw_parts);
    free(z->step.refresh_parts);
    free(z->step.sumsq_parts);
    if (z->main_mark) z->b->event_destroy(z->b, z->main_mark);
    if (z->t)
        for (int i = 0; i < z->num_tensors; i++) free(z->t[i].name);
    if (z->u)
        for (int u = 0; u < z->num_units; u++) {
            free(z->u[u].tensors);
            free(z->u[u].params);
            free(z->u[u].grads);
        }
    free(z->t);
    free(z->u);
    free(z->parts);
    zero_layout_free(&z->layout);
    free(z);
}

void zero_begin_step(Zero *z, int grad_accum) {
    if (z->step.open) zero_fail(z, "zero_begin_step called twice without a zero_step in between");
    if (grad_accum < 1) zero_fail(z, "zero_begin_step with grad_accum %d (must be >= 1)", grad_accum);
    for (int u = 0; u < z->num_units; u++)
        if (z->u[u].fetched >= 0) zero_fail(z, "zero_begin_step while unit %d is still fetched", u);
    z->step.open = 1;
    z->step.begin = zero_clock();
    z->step.grad_accum = grad_accum;
    zero_reduce_begin_step(z);
    // stages 0-1 accumulate every micro-step into whole gradients; stages 2-3 clear each
    // pool block when it is handed out
    if (z->step.shard_grad) z->b->memset0(z->b, z->step.shard_grad, z->off.opt_base * sizeof(float), z->main);
    if (z->stage <= 1) z->b->memset0(z->b, z->step.grad_full, z->layout.padded_total * z->grad_size, z->main);
    zero_offload_step_begin(z);
    zero_gather_begin_step(z);
    memcpy(z->step.sent_mark, z->comm->sent, sizeof z->step.sent_mark);   // per-step byte accounting
}

static const ZeroUnitView *fetch_unit(Zero *z, int unit, int is_backward) {
    if (unit < 0 || unit >= z->num_units) zero_fail(z, "zero_fetch of unit %d: units are 0..%d", unit, z->num_units - 1);
    ZeroUnitState *U = &z->u[unit];
    if (U->fetched >= 0)
        zero_fail(z, "zero_fetch of unit %d (%s) while its %s fetch was not released", unit,
                  is_backward ? "backward" : "forward", U->fetched ? "backward" : "forward");
    if (is_backward) {
        if (!z->step.open) zero_fail(z, "backward zero_fetch of unit %d outside zero_begin_step .. zero_step", unit);
        if (U->bwd_done) zero_fail(z, "backward zero_fetch of unit %d twice in one micro-step", unit);
        U->bwd_done = 1;
    }
    if (z->stage == 3) zero_gather_fetch(z, unit, is_backward);
    for (int i = 0; i < U->n; i++) {
        ZeroTensorState *t = &z->t[U->tensors[i]];
        U->params[i] = t->work;
        U->grads[i] = NULL;
        if (!is_backward) continue;
        if (z->stage >= 2) zero_grad_acquire(z, U->tensors[i]);
        U->grads[i] = t->grad;
    }
    if (is_backward && z->stage >= 2) zero_grads_clear(z);
    U->fetched = is_backward ? 1 : 0;
    return &U->view;
}

static void unit_grads_ready(Zero *z, int unit) {
    if (unit < 0 || unit >= z->num_units) zero_fail(z, "zero_grads_ready of unit %d: units are 0..%d", unit, z->num_units - 1);
    ZeroUnitState *U = &z->u[unit];
    if (!z->step.open) zero_fail(z, "zero_grads_ready of unit %d outside zero_begin_step .. zero_step", unit);
    if (!U->bwd_done) zero_fail(z, "zero_grads_ready of unit %d before its backward zero_fetch", unit);
    if (U->ready_done) zero_fail(z, "zero_grads_ready of unit %d twice in one micro-step", unit);
    // the micro-step is complete once every unit's gradients are: stage 3 then forgets
    // what this micro-step's gathers left behind
    if (zero_reduce_unit_ready(z, unit) && z->stage == 3) zero_gather_micro_end(z);
}

static void release_unit(Zero *z, int unit, int is_backward) {
    if (unit < 0 || unit >= z->num_units) zero_fail(z, "zero_release of unit %d: units are 0..%d", unit, z->num_units - 1);
    ZeroUnitState *U = &z->u[unit];
    if (U->fetched != (is_backward ? 1 : 0))
        zero_fail(z, "zero_release of unit %d (%s) without a matching zero_fetch", unit, is_backward ? "backward" : "forward");
    if (z->stage == 3) zero_gather_release(z, unit);
    U->fetched = -1;
}

// The hooks, timed: inside a step, what the calling thread spends in them (waits for
// gathers, pool room, parked gradients) is the plugin's share of the step.
// With a trace, each hook's time is a span ("fetch": waiting for the unit's parameters),
// and so is the model's work on the unit between its fetch and its release.
const ZeroUnitView *zero_fetch(Zero *z, int unit, int is_backward) {
    double t0 = zero_clock();
    uint64_t n0 = zero_trace_on ? zero_trace_now() : 0;
    const ZeroUnitView *v = fetch_unit(z, unit, is_backward);
    if (z->step.open) z->step.hook_s += zero_clock() - t0;
    if (zero_trace_on) {
        ZeroUnitState *U = &z->u[unit];
        U->t_open = zero_trace_now();
        zero_trace_span(is_backward ? "fetch (backward)" : "fetch", U->label, n0, U->t_open);
        U->gpu_span = z->b->trace_begin ? z->b->trace_begin(z->b, z->main) : -1;
        if (z->stage == 3) zero_trace_counter("gather pool in use (elements)", (double)z->gather.arena.in_use);
    }
    return v;
}

void zero_grads_ready(Zero *z, int unit) {
    double t0 = zero_clock();
    uint64_t n0 = zero_trace_on ? zero_trace_now() : 0;
    unit_grads_ready(z, unit);
    z->step.hook_s += zero_clock() - t0;   // only inside a step (it checks)
    if (zero_trace_on) {
        zero_trace_span("grads_ready", z->u[unit].label, n0, zero_trace_now());
        if (z->stage >= 2) zero_trace_counter("gradient pool in use (elements)", (double)z->reduce.arena.in_use);
    }
}

void zero_release(Zero *z, int unit, int is_backward) {
    double t0 = zero_clock();
    if (zero_trace_on && unit >= 0 && unit < z->num_units) {   // release_unit refuses another
        ZeroUnitState *U = &z->u[unit];
        zero_trace_span(is_backward ? "backward" : "forward", U->label, U->t_open, zero_trace_now());
        if (z->b->trace_end) z->b->trace_end(z->b, z->main, U->gpu_span, is_backward ? "backward" : "forward", U->label);
    }
    release_unit(z, unit, is_backward);
    if (z->step.open) z->step.hook_s += zero_clock() - t0;
}

// Stage 0: the last micro-step reduced the accumulated gradient into the shard like
// stage 1; every rank then gathers every shard (together: an all-reduce) and updates all.
// With fast_reduce the gather moves the bf16 sums, which every rank widens to fp32 alike.
static void stage0_gather_grads(Zero *z) {
    const ZeroBackend *b = z->b;
    const int fast = z->cfg.fast_reduce;
    for (int i = 0; i < z->num_tensors; i++) {
        const ZeroTensorLayout *l = z->t[i].lay;
        z->parts[i].send = fast ? byte_at(z->step.reduced_bf16, l->full_off + (size_t)z->rank * l->split.shard, 2)
                                : (void *)(z->step.shard_grad + l->shard_off);
        z->parts[i].recv = fast ? byte_at(z->step.reduced_bf16, l->full_off, 2) : (void *)(z->step.reduced_full + l->full_off);
        z->parts[i].count = l->split.shard;
    }
    b->all_gather(b, z->comm, ZERO_GROUP_WORLD, z->parts, z->num_tensors, fast ? ZERO_BF16 : ZERO_F32, z->reduce.stream,
                  "reduced gradients (all tensors)");
    for (int i = 0; i < z->num_tensors && fast; i++) {
        const ZeroTensorLayout *l = z->t[i].lay;
        b->sum_slices(b, z->step.reduced_full + l->full_off, z->parts[i].recv, l->split.padded, 1, l->split.padded,
                      ZERO_BF16, z->reduce.stream);
    }
}

float zero_step(Zero *z, const ZeroStepArgs *a) { return zero_step_maybe_skip(z, a, 0); }

float zero_step_maybe_skip(Zero *z, const ZeroStepArgs *a, int skip_anyway) {
    return zero_step_veto(z, a, skip_anyway, NULL, NULL);
}

float zero_step_veto(Zero *z, const ZeroStepArgs *a, int skip_anyway, int (*veto)(float norm, void *ctx), void *ctx) {
    const ZeroBackend *b = z->b;
    const double t0 = zero_clock();
    const uint64_t n0 = zero_trace_on ? zero_trace_now() : 0;
    if (!z->step.open) zero_fail(z, "zero_step without zero_begin_step");
    // AdamW's bias corrections 1 - beta^t are 0 at t 0: every weight would become NaN while
    // the norm stays finite, so no later check would catch it
    if (a->t < 1) zero_fail(z, "zero_step with t %d: t is the 1-based optimizer step (the first step is 1)", a->t);
    if (z->reduce.units_ready != 0 || z->reduce.micro != z->step.grad_accum)
        zero_fail(z, "zero_step after %d complete micro-steps and %d of %d units' grads_ready in the next; "
                  "zero_begin_step announced %d", z->reduce.micro, z->reduce.units_ready, z->num_units, z->step.grad_accum);
    for (int u = 0; u < z->num_units; u++) {
        if (z->u[u].fetched >= 0) zero_fail(z, "zero_step while unit %d is still fetched", u);
        // a backward begun after the last complete micro-step, its grads never made ready
        if (z->u[u].bwd_done)
            zero_fail(z, "zero_step after a backward zero_fetch of unit %d whose zero_grads_ready never came "
                      "(%d complete micro-steps before it)", u, z->reduce.micro);
    }
    if (z->stage == 0) stage0_gather_grads(z);
    // The update needs every reduction, and no gather may still read the shard it rewrites
    // (a stage-3 prefetch the last micro-step did not use).
    zero_grads_drain(z);
    zero_main_waits_stream(z, z->reduce.stream);
    zero_main_waits_stream(z, z->gather.stream);

    // Global norm: per-tensor sums of squares of this rank's shard, added in tensor
    // order, then the N partial sums added in rank order: the same bits on every rank
    // and at every stage (stage 0 uses the shard it would own). An offloaded optimizer
    // took its tensors' as the last micro-step's gradients landed on the host.
    const int offloaded = zero_offload_optimizer(z);
    if (offloaded) zero_offload_wait(z);
    int ndev = 0;   // the tensors whose optimizer is on the device: a prefix
    while (ndev < z->num_tensors && !zero_offload_holds(z, ndev)) ndev++;
    for (int i = 0; i < ndev; i++) {
        const ZeroTensorLayout *l = z->t[i].lay;
        z->step.sumsq_parts[i] = (ZeroSumsqPart){z->step.shard_grad + l->shard_off, l->own_count, &z->step.sumsq[i]};
    }
    zero_sum_squares_parts(b, z->step.sumsq_parts, ndev, z->main);
    if (ndev > 0) b->stream_sync(b, z->main);
    double total = 0.0;
    for (int i = 0; i < z->num_tensors; i++) total += z->step.sumsq[i];
    b->allreduce_sum_f64(b, z->comm, &total, 1, "gradient norm");
    float norm = (float)sqrt(total);
    float clip = (a->grad_clip > 0 && norm > a->grad_clip) ? a->grad_clip / norm : 1.0f;
    AdamWParams p = adamw_params(a->lr, a->beta1, a->beta2, a->eps, a->weight_decay, clip, a->t);
    // the same decision on every rank: the norm is the same bits everywhere, and so must
    // skip_anyway be; a non-finite update would poison the weights for good
    const int skip = skip_anyway || !isfinite(norm) || (veto && veto(norm, ctx));

    for (int i = 0; i < ndev && !skip; i++) {
        const ZeroTensorLayout *l = z->t[i].lay;
        const int d = z->t[i].decay;
        z->step.adamw_parts[i] = z->stage == 0
            ? (ZeroAdamwPart){z->step.master + l->full_off, z->step.reduced_full + l->full_off, z->step.m + l->full_off,
                              z->step.v + l->full_off, l->split.numel, d}
            : (ZeroAdamwPart){z->step.master + l->shard_off, z->step.shard_grad + l->shard_off, z->step.m + l->shard_off,
                              z->step.v + l->shard_off, l->own_count, d};
    }
    if (!skip) zero_adamw_parts(b, z->step.adamw_parts, ndev, &p, z->main);
    if (z->stage == 3 && !skip) zero_gather_reset(z);   // gathered copies are stale now
    if (!skip && offloaded) {   // AdamW on the CPU, then the refreshed parameters go up
        refresh_device(z, a->t);   // a partial offload's tensors on the device
        zero_offload_update(z, &p, 1, a->t);
        gather_working(z, a->t);
    } else if (!skip) {
        refresh_working(z, a->t);
    }
    // What comes next on any stream follows the update by a device wait; the host waits only
    // for what it reads itself: offload's host buffers and the NVMe engine's counts.
    if (offloaded || z->off.param != ZERO_TIER_DEVICE || z->off.park != ZERO_TIER_DEVICE) {
        zero_sync_streams(z);
    } else {
        zero_stream_waits_main(z, z->gather.stream);
        zero_stream_waits_main(z, z->reduce.stream);
    }
    zero_offload_step_end(z);
    z->step.open = 0;
    if (!skip) z->step.last_t = a->t;   // a skipped step leaves the weights of the last applied one
    for (int op = 0; op < ZERO_COLL_NUM; op++) {
        z->step.sent[op].calls += z->comm->sent[op].calls - z->step.sent_mark[op].calls;
        z->step.sent[op].intra_bytes += z->comm->sent[op].intra_bytes - z->step.sent_mark[op].intra_bytes;
        z->step.sent[op].inter_bytes += z->comm->sent[op].inter_bytes - z->step.sent_mark[op].inter_bytes;
    }
    z->step.done++;
    const double t1 = zero_clock();
    z->step.step_s += t1 - t0;
    z->step.wall_s += t1 - z->step.begin;
    if (zero_trace_on) zero_trace_span("zero_step", skip ? "skipped" : "", n0, zero_trace_now());
    return norm;
}

void zero_land_update(Zero *z) {
    if (z->step.open) zero_fail(z, "zero_land_update inside a step (call it between steps)");
    if (!zero_offload_land(z)) return;
    if (z->stage == 3) zero_gather_reset(z);   // gathered copies hold the parameters one update behind
    gather_working(z, z->step.last_t);
    zero_sync_streams(z);
}

void zero_refresh_after_load(Zero *z, int t, long long step) {
    if (z->stage == 3) zero_gather_reset(z);   // gathered copies hold the old weights
    refresh_working(z, t);
    zero_sync_streams(z);
    z->step.last_t = t;
    z->step.before = (int64_t)step - (int64_t)z->step.done;   // --fast-reduce's draws go on from the saved step
}

void zero_allreduce_sum_f64(Zero *z, double *values, int n) {
    ZeroCollBytes before[ZERO_COLL_NUM];
    memcpy(before, z->comm->sent, sizeof before);
    z->b->allreduce_sum_f64(z->b, z->comm, values, n, "zero_allreduce_sum_f64");
    if (!z->step.open) return;
    // the trainer's own traffic inside a step is not the plugin's: move the mark past it
    // (only the all-reduce: the stream threads may be counting their collectives meanwhile)
    const int op = ZERO_COLL_ALL_REDUCE;
    z->step.sent_mark[op].calls += z->comm->sent[op].calls - before[op].calls;
    z->step.sent_mark[op].intra_bytes += z->comm->sent[op].intra_bytes - before[op].intra_bytes;
    z->step.sent_mark[op].inter_bytes += z->comm->sent[op].inter_bytes - before[op].inter_bytes;
}

void zero_gather_master(Zero *z, int tensor, float *out) {
    if (tensor < 0 || tensor >= z->num_tensors) zero_fail(z, "zero_gather_master of tensor %d: tensors are 0..%d", tensor, z->num_tensors - 1);
    if (z->step.open) zero_fail(z, "zero_gather_master of %s inside a step (call it between steps)", z->t[tensor].name);
    zero_land_update(z);   // the master the delayed update holds, and the parameters with it
    const ZeroBackend *b = z->b;
    const ZeroTensorLayout *l = z->t[tensor].lay;
    if (z->stage == 0) {
        b->copy(b, out, ZERO_MEM_HOST, z->step.master + l->full_off, ZERO_MEM_DEVICE, l->split.numel * sizeof(float), z->main);
        b->stream_sync(b, z->main);
        return;
    }
    ZeroCollPart part = {z->step.master + l->shard_off, z->reduce.staging, l->split.shard};
    if (zero_offload_holds(z, tensor)) {
        // this rank's part comes from the host or NVMe into its slot of the staging buffer
        // (through out, which holds the whole tensor in the end anyway), then in place
        float *mine = (float *)z->reduce.staging + (size_t)z->rank * l->split.shard;
        zero_state_read(z, ZK_MASTER, tensor, 0, l->own_count, out + l->own_begin);
        b->memset0(b, mine, l->split.shard * sizeof(float), z->gather.stream);
        b->copy(b, mine, ZERO_MEM_DEVICE, out + l->own_begin, ZERO_MEM_HOST, l->own_count * sizeof(float), z->gather.stream);
        b->stream_sync(b, z->gather.stream);   // out is overwritten below
        part.send = mine;
    }
    b->all_gather(b, z->comm, ZERO_GROUP_WORLD, &part, 1, ZERO_F32, z->gather.stream, z->t[tensor].name);
    b->copy(b, out, ZERO_MEM_HOST, z->reduce.staging, ZERO_MEM_DEVICE, l->split.numel * sizeof(float), z->gather.stream);
    b->stream_sync(b, z->gather.stream);
}

void zero_stats(const Zero *z, ZeroStats *s) {
    memset(s, 0, sizeof *s);
    for (int k = 0; k < ZERO_USE_KINDS; k++) {
        s->device[k] = z->acct.mem_dev[k];
        s->host[k] = z->acct.mem_host[k];
        s->nvme[k] = z->acct.mem_nvme[k];
    }
    s->param_pool_elems = z->gather.arena.capacity;
    s->param_pool_peak = z->gather.arena.peak;
    s->grad_pool_elems = z->reduce.arena.capacity;
    s->grad_pool_peak = z->reduce.arena.peak;
    s->gathers = z->gather.gathers;
    s->prefetches = z->gather.prefetches;
    s->gather_hits = z->gather.hits;
    s->evictions = z->gather.evictions;
    s->wasted_gathers = z->gather.wasted;
    s->buckets = z->reduce.buckets;
    s->qwz_gathers = z->gather.qwz_gathers;
    s->hpz_gathers = z->gather.hpz_gathers;
    s->secondary_bytes = z->gather.hpz_copy ? z->gather.hpz_copy_elems * z->param_size : 0;
    s->nvme_read = z->off.step_read;
    s->nvme_written = z->off.step_written;
    s->nvme_busy_s = z->off.step_busy;
}
