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
    cfg->persist_elems = (size_t)1 << 16;
    cfg->seed = 1337;
    cfg->node_size = 0;
    cfg->timeout_s = 600.0;
    cfg->optimizer_tier = ZERO_TIER_DEVICE;
    cfg->param_tier = ZERO_TIER_DEVICE;
}

static void *hmalloc(Zero *z, size_t bytes, const char *what) {
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) zero_fail(z, "out of host memory (%zu bytes) for %s", bytes, what);
    return p;
}

static char *byte_at(void *base, size_t elems, size_t es) { return (char *)base + elems * es; }

// Checks that do not need the buffers; prints and returns -1 on a bad table or config.
static int validate(const ZeroTensor *tensors, int nt, int nu, const ZeroConfig *cfg, ZeroComm *comm,
                    const ZeroBackend *b) {
    int r = comm ? comm->rank : -1;
    if (!comm || !b || !cfg || !tensors) {
        fprintf(stderr, "zero: rank %d: zero_init needs a tensor table, a config, a comm and a backend\n", r);
        return -1;
    }
    if (nt < 1 || nu < 1) {
        fprintf(stderr, "zero: rank %d: zero_init with %d tensors and %d units (need at least one of each)\n", r, nt, nu);
        return -1;
    }
    if (cfg->stage < 0 || cfg->stage > 3) {
        fprintf(stderr, "zero: rank %d: stage %d is not one of 0, 1, 2, 3\n", r, cfg->stage);
        return -1;
    }
    if ((cfg->param_dtype != ZERO_F32 && cfg->param_dtype != ZERO_BF16) ||
        (cfg->grad_dtype != ZERO_F32 && cfg->grad_dtype != ZERO_BF16)) {
        fprintf(stderr, "zero: rank %d: unknown dtype (param %d, grad %d)\n", r, (int)cfg->param_dtype, (int)cfg->grad_dtype);
        return -1;
    }
    if (zero_offload_validate(cfg, r) != 0) return -1;
    if (b->needs_mpi && comm->world > 1 && comm->launch != ZERO_LAUNCH_MPI) {
        fprintf(stderr, "zero: rank %d: the %s backend moves data with MPI, but WORLD_SIZE=%d was set without "
                "an MPI launcher: start with mpirun or srun\n", r, b->name, comm->world);
        return -1;
    }
    for (int i = 0; i < nt; i++) {
        const ZeroTensor *t = &tensors[i];
        const char *name = t->name ? t->name : "(unnamed)";
        if (t->num_units < 1 || t->num_units > ZERO_MAX_TENSOR_UNITS) {
            fprintf(stderr, "zero: rank %d: tensor %d (%s) is used by %d units (1 to %d allowed)\n", r, i, name,
                    t->num_units, ZERO_MAX_TENSOR_UNITS);
            return -1;
        }
        for (int k = 0; k < t->num_units; k++) {
            if (t->units[k] < 0 || t->units[k] >= nu || (k == 1 && t->units[1] == t->units[0])) {
                fprintf(stderr, "zero: rank %d: tensor %d (%s) names unit %d%s (units are 0..%d)\n", r, i, name,
                        t->units[k], k == 1 && t->units[1] == t->units[0] ? " twice" : "", nu - 1);
                return -1;
            }
        }
    }
    return 0;
}

// The ZeRO++ switches, once the node layout is known.
static int validate_pp(const ZeroConfig *cfg, const ZeroComm *comm) {
    int r = comm->rank;
    const char *which = cfg->qwz ? "--qwz (zero_quantized_weights)" : "--hpz (zero_hpz_partition_size)";
    if ((cfg->qwz || cfg->hpz > 1) && cfg->stage != 3) {
        fprintf(stderr, "zero: rank %d: %s needs stage 3 (-z 3): below it parameters are not gathered before each use\n",
                r, which);
        return -1;
    }
    if (cfg->qwz && cfg->param_tier == ZERO_TIER_NVME) {   // its packing would read NVMe into a gather-stream buffer
        fprintf(stderr, "zero: rank %d: --qwz with --offload-param nvme is not supported yet\n", r);
        return -1;
    }
    const char *hwhich = cfg->qgz ? "--qgz (zero_quantized_gradients)" : "--hier-reduce";
    if ((cfg->qgz || cfg->hier_reduce) && cfg->optimizer_tier != ZERO_TIER_DEVICE) {
        fprintf(stderr, "zero: rank %d: %s with --offload-optimizer is not supported yet\n", r, hwhich);
        return -1;
    }
    if ((cfg->qgz || cfg->hier_reduce || cfg->hpz > 1) && !comm->consecutive) {
        fprintf(stderr, "zero: rank %d: %s needs the ranks of each node numbered consecutively (this rank is local rank "
                "%d of node %d with %d ranks per node); launch with ranks mapped by slot, or give --node-size\n", r,
                cfg->hpz > 1 ? "--hpz" : hwhich, comm->local_rank, comm->node, comm->local_size);
        return -1;
    }
    if (cfg->hpz < 0) {
        fprintf(stderr, "zero: rank %d: --hpz %d: the secondary partition size must be >= 1\n", r, cfg->hpz);
        return -1;
    }
    if ((cfg->qwz_block && quant_check_block(cfg->qwz_block, "the qwZ block size") != 0) ||
        (cfg->qgz_block && quant_check_block(cfg->qgz_block, "the qgZ block size") != 0))
        return -1;
    return 0;
}

static ZeroEvent *new_event(Zero *z, const char *what) {
    ZeroEvent *e = z->b->event_create(z->b);
    if (!e) zero_fail(z, "the %s backend could not create an event for %s", z->b->name, what);
    return e;
}

// Streams (every rank creates them in the same order: each gets its own communicator) and
// the events whose owners are fixed for the whole run.
static void init_events(Zero *z) {
    z->main = z->b->main_stream(z->b);
    z->gs = z->b->stream_create(z->b);
    z->rs = z->b->stream_create(z->b);
    if (!z->main || !z->gs || !z->rs) zero_fail(z, "the %s backend could not create its streams", z->b->name);
    if (z->b->stream_name) {   // a trace's track names
        z->b->stream_name(z->b, z->main, "main (the model)");
        z->b->stream_name(z->b, z->gs, "gather stream");
        z->b->stream_name(z->b, z->rs, "reduce stream");
    }
    z->ev_main = new_event(z, "main-stream hand-offs");
    z->ev_gs = new_event(z, "gather-stream hand-offs");
    z->ev_rs = new_event(z, "reduce-stream hand-offs");
    z->bucket_cap = z->nt + 2;
    z->bucket_ev = hmalloc(z, (size_t)z->bucket_cap * sizeof(ZeroEvent *), "reduction events");
    for (int i = 0; i < z->bucket_cap; i++) z->bucket_ev[i] = new_event(z, "gradient reductions");
    if (z->stage == 3)
        for (int i = 0; i < z->nt; i++) z->t[i].ready = new_event(z, z->t[i].name);
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
    if (z->stage == 3) {
        int np = 0;
        zero_after_main(z, z->gs);
        for (int i = 0; i < z->nt; i++) {
            if (!z->t[i].persistent) continue;
            z->parts[np].send = zero_gather_src(z, i, z->t[i].work, t_step, z->gs);
            z->parts[np].recv = z->t[i].work;
            z->parts[np].count = z->t[i].lay->split.shard;
            z->batch[np++] = i;
        }
        if (np) {
            b->all_gather(b, z->comm, ZERO_GROUP_WORLD, z->parts, np, z->cfg.param_dtype, z->gs,
                          zero_label(z, "persistent params:", z->batch, np));
            for (int k = 0; k < np; k++)
                zero_flow_add(z, ZERO_FLOW_STEP_GATHER, ZERO_GROUP_WORLD, z->parts[k].count * z->pes);
        }
        zero_qwz_refresh(z, t_step);   // qwZ: the new shard's int8 records, once per step
        zero_main_after(z, z->gs);
        return;
    }
    for (int i = 0; i < z->nt; i++) {
        const ZeroTensorLayout *l = z->t[i].lay;
        z->parts[i].send = byte_at(z->t[i].work, (size_t)z->rank * l->split.shard, z->pes);
        z->parts[i].recv = z->t[i].work;
        z->parts[i].count = l->split.shard;
    }
    zero_after_main(z, z->gs);
    b->all_gather(b, z->comm, ZERO_GROUP_WORLD, z->parts, z->nt, z->cfg.param_dtype, z->gs, "working params (all tensors)");
    for (int i = 0; i < z->nt; i++) zero_flow_add(z, ZERO_FLOW_STEP_GATHER, ZERO_GROUP_WORLD, z->parts[i].count * z->pes);
    zero_main_after(z, z->gs);
}

static void refresh_working(Zero *z, int t_step) {
    const ZeroBackend *b = z->b;
    if (z->stage == 0) {
        for (int i = 0; i < z->nt; i++) {
            const ZeroTensorLayout *l = z->t[i].lay;
            b->refresh(b, z->t[i].work, z->cfg.param_dtype, z->master + l->full_off, l->split.numel,
                       z->cfg.seed, t_step, l->global_off, z->main);
        }
        return;
    }
    if (zero_offload_optimizer(z) || z->off.param != ZERO_TIER_DEVICE) {
        zero_offload_update(z, NULL, 0, t_step);   // rounded on the CPU, sent where they live
    } else if (z->stage <= 2) {
        for (int i = 0; i < z->nt; i++) {
            const ZeroTensorLayout *l = z->t[i].lay;
            void *mine = byte_at(z->t[i].work, (size_t)z->rank * l->split.shard, z->pes);
            b->refresh(b, mine, z->cfg.param_dtype, z->master + l->shard_off, l->own_count, z->cfg.seed, t_step,
                       l->global_off + l->own_begin, z->main);
        }
    }
    gather_working(z, t_step);
}

static void build_units(Zero *z) {
    for (int u = 0; u < z->nu; u++) {
        ZU *U = &z->u[u];
        U->fetched = -1;
        for (int i = 0; i < z->nt; i++)
            for (int k = 0; k < z->t[i].num_units; k++)
                if (z->t[i].units[k] == u) U->n++;
        U->tensors = hmalloc(z, (size_t)U->n * sizeof(int), "unit tensor lists");
        U->params = hmalloc(z, (size_t)U->n * sizeof(void *), "unit views");
        U->grads = hmalloc(z, (size_t)U->n * sizeof(void *), "unit views");
        int j = 0;
        for (int i = 0; i < z->nt; i++)
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
        size_t *need = hmalloc(z, (size_t)z->nu * sizeof(size_t), "unit sizes");
        for (int u = 0; u < z->nu; u++) {   // insertion sort: a few hundred units at most
            size_t v = z->u[u].pool_need;
            int k = u;
            for (; k > 0 && need[k - 1] > v; k--) need[k] = need[k - 1];
            need[k] = v;
        }
        size_t median = need[z->nu / 2], persist = 0, largest = 0;
        free(need);
        for (int i = 0; i < z->nt; i++) {
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

Zero *zero_init(const ZeroTensor *tensors, int num_tensors, int num_units, const ZeroConfig *cfg,
                ZeroComm *comm, const ZeroBackend *backend, ZeroInitFn init, void *init_ctx) {
    if (validate(tensors, num_tensors, num_units, cfg, comm, backend) != 0) return NULL;
    if (!init) {
        fprintf(stderr, "zero: rank %d: zero_init needs an init function for the parameters\n", comm->rank);
        return NULL;
    }
    Zero *z = calloc(1, sizeof(Zero));
    if (!z) { fprintf(stderr, "zero: rank %d: out of host memory\n", comm->rank); return NULL; }
    z->cfg = *cfg;
    z->comm = comm;
    z->b = backend;
    z->stage = cfg->stage;
    z->rank = comm->rank;
    z->world = comm->world;
    z->nt = num_tensors;
    z->nu = num_units;
    z->pes = zero_dtype_size(cfg->param_dtype);
    z->ges = zero_dtype_size(cfg->grad_dtype);

    if (((cfg->node_size != comm->node_size || (cfg->hpz > 1 ? cfg->hpz : 1) != comm->hpz_size) &&
         zero_comm_set_layout(comm, cfg->node_size, cfg->hpz) != 0) ||
        zero_comm_set_timeout(comm, cfg->timeout_s) != 0) {
        free(z);
        return NULL;
    }
    if (validate_pp(cfg, comm) != 0) {
        free(z);
        return NULL;
    }
    z->qwz_block = cfg->qwz_block ? cfg->qwz_block : QUANT_BLOCK_DEFAULT;
    z->qgz_block = cfg->qgz_block ? cfg->qgz_block : QGZ_BLOCK_DEFAULT;
    z->hier = cfg->qgz || cfg->hier_reduce;
    z->gwire = cfg->qgz ? ZERO_WIRE_INT4 : ZERO_WIRE_RAW;
    z->param_version = 1;   // no secondary slice holds it yet (sec_version 0)
    char err[256];
    if (zero_layout_build(&z->layout, tensors, num_tensors, z->world, z->rank, err, sizeof err) != 0) {
        fprintf(stderr, "zero: rank %d: %s\n", z->rank, err);
        free(z);
        return NULL;
    }
    z->t = hmalloc(z, (size_t)z->nt * sizeof(ZT), "the tensor table");
    z->u = hmalloc(z, (size_t)z->nu * sizeof(ZU), "the unit table");
    size_t shared_padded = 0;
    for (int i = 0; i < z->nt; i++) {
        ZT *t = &z->t[i];
        char buf[32];
        if (!tensors[i].name) snprintf(buf, sizeof buf, "tensor%d", i);
        const char *name = tensors[i].name ? tensors[i].name : buf;
        t->name = hmalloc(z, strlen(name) + 1, "tensor names");
        memcpy(t->name, name, strlen(name) + 1);
        t->decay = tensors[i].decay != 0;
        t->num_units = tensors[i].num_units;
        for (int k = 0; k < t->num_units; k++) t->units[k] = tensors[i].units[k];
        t->lay = &z->layout.t[i];
        t->persistent = z->stage == 3 && cfg->persist_elems > 0 && t->lay->split.numel <= cfg->persist_elems;
        t->block = t->grad_block = ZERO_ARENA_FULL;
        if (t->num_units > 1) shared_padded += t->lay->split.padded;
    }
    build_units(z);
    size_t max_pool_need = 0, max_grad_need = 0, max_grad_all = 0;
    int big_unit = 0;
    for (int u = 0; u < z->nu; u++) {
        if (z->u[u].pool_need > max_pool_need) { max_pool_need = z->u[u].pool_need; big_unit = u; }
        if (z->u[u].grad_need > max_grad_need) max_grad_need = z->u[u].grad_need;
        if (z->u[u].grad_need + z->u[u].grad_tied > max_grad_all) max_grad_all = z->u[u].grad_need + z->u[u].grad_tied;
    }
    // With offload, tied tensors' partial gradients may park off the device between their
    // two units (offload.c): then a unit's tied gradients cycle through the pool like its
    // own, and nothing stays in it across units. Only where that makes the pool smaller
    // (tiled: a vocabulary tile is small, the whole embedding is not).
    z->park_tied = zero_offload_parks_tied(cfg) && shared_padded > 0 && 2 * max_grad_all < 2 * max_grad_need + shared_padded;
    if (z->park_tied) {
        max_grad_need = max_grad_all;
        shared_padded = 0;
    }
    choose_sizes(z, max_pool_need, max_grad_need, shared_padded);
    // Every pool is min(what the settings ask for, what the model can ever need), so that
    // DeepSpeed's sizes written for billions of parameters (stage3_max_live_parameters 1e9)
    // reserve no more than the model: the gather pool never holds more than every pooled
    // (non-persistent) tensor at once, the gradient pool and the staging buffer never more
    // than every gradient.
    size_t ppool_elems = 0;
    if (z->stage == 3) {
        size_t pooled = 0;   // every tensor the pool may hold, all gathered at once
        for (int i = 0; i < z->nt; i++)
            if (!z->t[i].persistent) pooled += z->t[i].lay->split.padded;
        ppool_elems = cfg->max_live_elems ? cfg->max_live_elems : max_pool_need + z->cfg.prefetch_elems;
        ppool_elems = zero_round_up(ppool_elems, ZERO_ALIGN_ELEMS);   // aligned top placements
        if (ppool_elems < max_pool_need) {
            fprintf(stderr, "zero: rank %d: max_live_elems %zu is smaller than unit %d, which needs %zu gathered "
                    "elements at once; raise max_live_elems to at least %zu\n", z->rank, cfg->max_live_elems,
                    big_unit, max_pool_need, max_pool_need);
            zero_free(z);
            return NULL;
        }
        if (ppool_elems > pooled) ppool_elems = pooled;   // a multiple of ZERO_ALIGN_ELEMS, like every padded size
    }

    init_events(z);
    const size_t P = z->layout.padded_total, Sh = z->layout.shard_total;
    // a bucket never holds more than the whole model: do not size buffers beyond it
    if (z->cfg.bucket_elems > P) z->cfg.bucket_elems = P;
    // Stage 0 keeps everything whole; the others keep 1/N of master, m and v.
    size_t opt_elems = z->stage == 0 ? P : Sh;
    // (offloaded: on the host or NVMe instead, with the reduced gradient: offload.c)
    if (cfg->optimizer_tier == ZERO_TIER_DEVICE) {
        z->master = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_MASTER, opt_elems * sizeof(float), "fp32 master weights");
        z->m = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_OPTIM, opt_elems * sizeof(float), "AdamW m");
        z->v = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_OPTIM, opt_elems * sizeof(float), "AdamW v");
        z->shard_grad = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_GRADS, Sh * sizeof(float), "fp32 reduced gradient shard");
    }
    if (z->stage <= 2) {
        z->work_full = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_PARAMS, P * z->pes, "working parameters");
        for (int i = 0; i < z->nt; i++) z->t[i].work = byte_at(z->work_full, z->t[i].lay->full_off, z->pes);
    }
    if (z->stage <= 1) {
        z->grad_full = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_GRADS, P * z->ges, "gradients");
        for (int i = 0; i < z->nt; i++) z->t[i].grad = byte_at(z->grad_full, z->t[i].lay->full_off, z->ges);
    }
    if (z->stage == 0)
        z->red_full = cfg->grad_dtype == ZERO_F32 ? (float *)z->grad_full
                      : zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_GRADS, P * sizeof(float), "fp32 reduced gradients");
    if (z->stage == 3) {
        size_t persist_elems = 0;
        for (int i = 0; i < z->nt; i++)
            if (z->t[i].persistent) persist_elems += z->t[i].lay->split.padded;
        z->persist = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_PARAMS, persist_elems * z->pes, "persistent parameters");
        size_t off = 0;
        for (int i = 0; i < z->nt; i++)
            if (z->t[i].persistent) {
                z->t[i].work = byte_at(z->persist, off, z->pes);
                off += z->t[i].lay->split.padded;
            }
        z->ppool = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_PARAMS, ppool_elems * z->pes, "stage-3 gather pool");
        if (zero_arena_init(&z->parena, ppool_elems, z->nt) != 0) zero_fail(z, "out of host memory for the gather pool table");
    }
    if (z->stage >= 2) {
        // Live at once: the pending bucket (< bucket_elems before the unit that tips it),
        // tied gradients waiting for their other unit, and the unit being back-propagated.
        // Rounded up so blocks placed from the top (tied tensors) stay aligned like the rest.
        size_t gpool_elems = zero_round_up(z->cfg.bucket_elems + 2 * max_grad_need + shared_padded, ZERO_ALIGN_ELEMS);
        if (gpool_elems > P) gpool_elems = P;   // every gradient at once (P: a multiple of ZERO_ALIGN_ELEMS)
        z->gpool = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_GRADS, gpool_elems * z->ges, "stage-2/3 gradient pool");
        if (zero_arena_init(&z->garena, gpool_elems, z->nt) != 0) zero_fail(z, "out of host memory for the gradient pool table");
    }
    z->staging_elems = z->cfg.bucket_elems > z->layout.max_padded ? z->cfg.bucket_elems : z->layout.max_padded;
    size_t staging_bytes = z->staging_elems * z->ges;
    if (z->layout.max_padded * sizeof(float) > staging_bytes) staging_bytes = z->layout.max_padded * sizeof(float);
    z->staging = zero_alloc(z, ZERO_MEM_DEVICE, ZERO_USE_BUFFERS, staging_bytes, "collective staging buffer");
    z->hop_bytes = staging_bytes;   // the most the two-hop path may use (zero_reduce_init_pp)
    zero_reduce_init_pp(z);
    zero_gather_init_pp(z);

    z->parts = hmalloc(z, (size_t)z->nt * sizeof(ZeroCollPart), "collective part lists");
    z->sq = hmalloc(z, (size_t)z->nt * sizeof(double), "norm partials");
    z->pending = hmalloc(z, (size_t)z->nt * sizeof(int), "bucket lists");
    z->batch = hmalloc(z, (size_t)z->nt * sizeof(int), "gather lists");
    z->klist = hmalloc(z, (size_t)z->nt * sizeof(int), "gather lists");
    z->ilist = hmalloc(z, (size_t)z->nt * sizeof(int), "gather lists");
    z->deferred_cap = 2 * z->nt;
    z->deferred = hmalloc(z, (size_t)z->deferred_cap * sizeof(ZDeferred), "deferred frees");
    z->trace_cap = 4 * z->nu + 8;
    z->trace = hmalloc(z, (size_t)z->trace_cap * sizeof(int), "the stage-3 fetch trace");

    zero_offload_init(z);

    // Partition at init: this rank initializes only the elements it owns (an offloaded
    // master where it lives, host memory or NVMe).
    if (zero_offload_optimizer(z)) {
        zero_offload_init_master(z, init, init_ctx);
    } else {
        float *chunk = z->b->alloc(z->b, ZERO_MEM_HOST, INIT_CHUNK * sizeof(float));
        if (!chunk) zero_fail(z, "out of host memory for the init chunk");
        for (int i = 0; i < z->nt; i++) {
            const ZeroTensorLayout *l = z->t[i].lay;
            float *dst = z->stage == 0 ? z->master + l->full_off + l->own_begin : z->master + l->shard_off;
            init_range(z, init, init_ctx, chunk, i, l->own_begin, l->own_count, dst);
        }
        z->b->free(z->b, ZERO_MEM_HOST, chunk);
    }
    // zero_alloc's memsets are on the main stream; init_range syncs it only when this rank owns
    // elements, and the stage-0 gather below writes the master on the comm stream.
    z->b->stream_sync(z->b, z->main);
    if (z->stage == 0) {
        // every rank needs the whole fp32 master: gather the initialized slots
        for (int i = 0; i < z->nt; i++) {
            const ZeroTensorLayout *l = z->t[i].lay;
            z->parts[i].send = z->master + l->full_off + (size_t)z->rank * l->split.shard;
            z->parts[i].recv = z->master + l->full_off;
            z->parts[i].count = l->split.shard;
        }
        z->b->all_gather(z->b, z->comm, ZERO_GROUP_WORLD, z->parts, z->nt, ZERO_F32, z->gs, "initial master weights");
        z->b->stream_sync(z->b, z->gs);
    }
    refresh_working(z, 0);
    zero_sync_streams(z);
    zero_run_id_init(z);
    z->init_done = 1;
    return z;
}

void zero_free(Zero *z) {
    if (!z) return;
    const ZeroBackend *b = z->b;
    if (z->main && z->gs && z->rs) zero_sync_streams(z);
    zero_offload_free(z);   // its streams and the NVMe file go before the buffers they use
    for (int i = 0; i < z->nallocs; i++) b->free(b, z->allocs[i].kind, z->allocs[i].p);
    ZeroEvent *own[3] = {z->ev_main, z->ev_gs, z->ev_rs};
    for (int i = 0; i < 3; i++)
        if (own[i]) b->event_destroy(b, own[i]);
    if (z->bucket_ev)
        for (int i = 0; i < z->bucket_cap; i++)
            if (z->bucket_ev[i]) b->event_destroy(b, z->bucket_ev[i]);
    free(z->bucket_ev);
    if (z->t)
        for (int i = 0; i < z->nt; i++)
            if (z->t[i].ready) b->event_destroy(b, z->t[i].ready);
    if (z->gs) b->stream_destroy(b, z->gs);
    if (z->rs) b->stream_destroy(b, z->rs);
    zero_arena_free_all(&z->parena);
    zero_arena_free_all(&z->garena);
    if (z->t)
        for (int i = 0; i < z->nt; i++) free(z->t[i].name);
    if (z->u)
        for (int u = 0; u < z->nu; u++) {
            free(z->u[u].tensors);
            free(z->u[u].params);
            free(z->u[u].grads);
        }
    free(z->t);
    free(z->u);
    free(z->parts);
    free(z->sq);
    free(z->pending);
    free(z->batch);
    free(z->klist);
    free(z->ilist);
    free(z->deferred);
    free(z->trace);
    zero_layout_free(&z->layout);
    free(z);
}

void zero_begin_step(Zero *z, int grad_accum) {
    if (z->in_step) zero_fail(z, "zero_begin_step called twice without a zero_step in between");
    if (grad_accum < 1) zero_fail(z, "zero_begin_step with grad_accum %d (must be >= 1)", grad_accum);
    for (int u = 0; u < z->nu; u++)
        if (z->u[u].fetched >= 0) zero_fail(z, "zero_begin_step while unit %d is still fetched", u);
    z->in_step = 1;
    z->step_begin = zero_clock();
    z->grad_accum = grad_accum;
    z->micro = 0;
    z->units_ready = 0;
    // stages 0-1 accumulate every micro-step into whole gradients; stages 2-3 clear each
    // pool block when it is handed out
    if (z->shard_grad) z->b->memset0(z->b, z->shard_grad, z->layout.shard_total * sizeof(float), z->main);
    if (z->stage <= 1) z->b->memset0(z->b, z->grad_full, z->layout.padded_total * z->ges, z->main);
    zero_offload_step_begin(z);
    if (z->stage == 3 && z->trace_state == TRACE_NONE) {
        z->trace_state = TRACE_RECORDING;
        z->trace_len = 0;
    }
    z->pos = 0;
    memcpy(z->sent_mark, z->comm->sent, sizeof z->sent_mark);   // per-step byte accounting
}

static const ZeroUnitView *fetch_unit(Zero *z, int unit, int is_backward) {
    if (unit < 0 || unit >= z->nu) zero_fail(z, "zero_fetch of unit %d: units are 0..%d", unit, z->nu - 1);
    ZU *U = &z->u[unit];
    if (U->fetched >= 0)
        zero_fail(z, "zero_fetch of unit %d (%s) while its %s fetch was not released", unit,
                  is_backward ? "backward" : "forward", U->fetched ? "backward" : "forward");
    if (is_backward) {
        if (!z->in_step) zero_fail(z, "backward zero_fetch of unit %d outside zero_begin_step .. zero_step", unit);
        if (U->bwd_done) zero_fail(z, "backward zero_fetch of unit %d twice in one micro-step", unit);
        U->bwd_done = 1;
    }
    if (z->stage == 3) zero_gather_fetch(z, unit, is_backward);
    for (int i = 0; i < U->n; i++) {
        ZT *t = &z->t[U->tensors[i]];
        U->params[i] = t->work;
        U->grads[i] = NULL;
        if (!is_backward) continue;
        if (z->stage >= 2) zero_grad_acquire(z, U->tensors[i]);
        U->grads[i] = t->grad;
    }
    U->fetched = is_backward ? 1 : 0;
    return &U->view;
}

static void unit_grads_ready(Zero *z, int unit) {
    if (unit < 0 || unit >= z->nu) zero_fail(z, "zero_grads_ready of unit %d: units are 0..%d", unit, z->nu - 1);
    ZU *U = &z->u[unit];
    if (!z->in_step) zero_fail(z, "zero_grads_ready of unit %d outside zero_begin_step .. zero_step", unit);
    if (!U->bwd_done) zero_fail(z, "zero_grads_ready of unit %d before its backward zero_fetch", unit);
    if (U->ready_done) zero_fail(z, "zero_grads_ready of unit %d twice in one micro-step", unit);
    // the micro-step is complete once every unit's gradients are: stage 3 then forgets
    // what this micro-step's gathers left behind
    if (zero_reduce_unit_ready(z, unit) && z->stage == 3) zero_gather_micro_end(z);
}

static void release_unit(Zero *z, int unit, int is_backward) {
    if (unit < 0 || unit >= z->nu) zero_fail(z, "zero_release of unit %d: units are 0..%d", unit, z->nu - 1);
    ZU *U = &z->u[unit];
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
    if (z->in_step) z->hook_s += zero_clock() - t0;
    if (zero_trace_on) {
        ZU *U = &z->u[unit];
        U->t_open = zero_trace_now();
        zero_trace_span(is_backward ? "fetch (backward)" : "fetch", U->label, n0, U->t_open);
        U->gpu_span = z->b->trace_begin ? z->b->trace_begin(z->b, z->main) : -1;
        if (z->stage == 3) zero_trace_counter("gather pool in use (elements)", (double)z->parena.in_use);
    }
    return v;
}

void zero_grads_ready(Zero *z, int unit) {
    double t0 = zero_clock();
    uint64_t n0 = zero_trace_on ? zero_trace_now() : 0;
    unit_grads_ready(z, unit);
    z->hook_s += zero_clock() - t0;   // only inside a step (it checks)
    if (zero_trace_on) {
        zero_trace_span("grads_ready", z->u[unit].label, n0, zero_trace_now());
        if (z->stage >= 2) zero_trace_counter("gradient pool in use (elements)", (double)z->garena.in_use);
    }
}

void zero_release(Zero *z, int unit, int is_backward) {
    double t0 = zero_clock();
    if (zero_trace_on) {
        ZU *U = &z->u[unit];
        zero_trace_span(is_backward ? "backward" : "forward", U->label, U->t_open, zero_trace_now());
        if (z->b->trace_end) z->b->trace_end(z->b, z->main, U->gpu_span, is_backward ? "backward" : "forward", U->label);
    }
    release_unit(z, unit, is_backward);
    if (z->in_step) z->hook_s += zero_clock() - t0;
}

// Stage 0: the last micro-step reduced the accumulated gradient into the shard like
// stage 1; every rank then gathers every shard (together: an all-reduce) and updates all.
static void stage0_gather_grads(Zero *z) {
    const ZeroBackend *b = z->b;
    for (int i = 0; i < z->nt; i++) {
        const ZeroTensorLayout *l = z->t[i].lay;
        z->parts[i].send = z->shard_grad + l->shard_off;
        z->parts[i].recv = z->red_full + l->full_off;
        z->parts[i].count = l->split.shard;
    }
    b->all_gather(b, z->comm, ZERO_GROUP_WORLD, z->parts, z->nt, ZERO_F32, z->rs, "reduced gradients (all tensors)");
}

float zero_step(Zero *z, const ZeroStepArgs *a) { return zero_step_maybe_skip(z, a, 0); }

float zero_step_maybe_skip(Zero *z, const ZeroStepArgs *a, int skip_anyway) {
    return zero_step_veto(z, a, skip_anyway, NULL, NULL);
}

float zero_step_veto(Zero *z, const ZeroStepArgs *a, int skip_anyway, int (*veto)(float norm, void *ctx), void *ctx) {
    const ZeroBackend *b = z->b;
    const double t0 = zero_clock();
    const uint64_t n0 = zero_trace_on ? zero_trace_now() : 0;
    if (!z->in_step) zero_fail(z, "zero_step without zero_begin_step");
    if (z->units_ready != 0 || z->micro != z->grad_accum)
        zero_fail(z, "zero_step after %d complete micro-steps and %d of %d units' grads_ready in the next; "
                  "zero_begin_step announced %d", z->micro, z->units_ready, z->nu, z->grad_accum);
    for (int u = 0; u < z->nu; u++)
        if (z->u[u].fetched >= 0) zero_fail(z, "zero_step while unit %d is still fetched", u);
    if (z->stage == 0) stage0_gather_grads(z);
    // The update needs every reduction, and no gather may still read the shard it rewrites
    // (a stage-3 prefetch the last micro-step did not use).
    zero_grads_drain(z);
    zero_main_after(z, z->rs);
    zero_main_after(z, z->gs);

    // Global norm: per-tensor sums of squares of this rank's shard, added in tensor
    // order, then the N partial sums added in rank order: the same bits on every rank
    // and at every stage (stage 0 uses the shard it would own). An offloaded optimizer
    // took them as the last micro-step's gradients landed on the host.
    const int offloaded = zero_offload_optimizer(z);
    if (offloaded) {
        zero_offload_wait(z);
    } else {
        for (int i = 0; i < z->nt; i++) {
            const ZeroTensorLayout *l = z->t[i].lay;
            b->sum_squares(b, z->shard_grad + l->shard_off, l->own_count, &z->sq[i], z->main);
        }
        b->stream_sync(b, z->main);
    }
    double total = 0.0;
    for (int i = 0; i < z->nt; i++) total += z->sq[i];
    b->allreduce_sum_f64(b, z->comm, &total, 1, "gradient norm");
    float norm = (float)sqrt(total);
    float clip = (a->grad_clip > 0 && norm > a->grad_clip) ? a->grad_clip / norm : 1.0f;
    AdamWParams p = adamw_params(a->lr, a->beta1, a->beta2, a->eps, a->weight_decay, clip, a->t);
    // the same decision on every rank: the norm is the same bits everywhere, and so must
    // skip_anyway be; a non-finite update would poison the weights for good
    const int skip = skip_anyway || !isfinite(norm) || (veto && veto(norm, ctx));

    for (int i = 0; i < z->nt && !skip && !offloaded; i++) {
        const ZeroTensorLayout *l = z->t[i].lay;
        if (z->stage == 0)
            b->adamw(b, z->master + l->full_off, z->red_full + l->full_off, z->m + l->full_off, z->v + l->full_off,
                     l->split.numel, &p, z->t[i].decay, z->main);
        else
            b->adamw(b, z->master + l->shard_off, z->shard_grad + l->shard_off, z->m + l->shard_off,
                     z->v + l->shard_off, l->own_count, &p, z->t[i].decay, z->main);
    }
    if (z->stage == 3 && !skip) zero_gather_reset(z);   // gathered copies are stale now
    if (!skip && offloaded) {   // AdamW on the CPU, then the refreshed parameters go up
        zero_offload_update(z, &p, 1, a->t);
        gather_working(z, a->t);
    } else if (!skip) {
        refresh_working(z, a->t);
    }
    zero_sync_streams(z);
    zero_offload_step_end(z);
    z->in_step = 0;
    if (!skip) z->last_t = a->t;   // a skipped step leaves the weights of the last applied one
    for (int op = 0; op < ZERO_COLL_NUM; op++) {
        z->step_sent[op].calls += z->comm->sent[op].calls - z->sent_mark[op].calls;
        z->step_sent[op].intra_bytes += z->comm->sent[op].intra_bytes - z->sent_mark[op].intra_bytes;
        z->step_sent[op].inter_bytes += z->comm->sent[op].inter_bytes - z->sent_mark[op].inter_bytes;
    }
    z->steps_done++;
    const double t1 = zero_clock();
    z->step_s += t1 - t0;
    z->wall_s += t1 - z->step_begin;
    if (zero_trace_on) zero_trace_span("zero_step", skip ? "skipped" : "", n0, zero_trace_now());
    return norm;
}

void zero_refresh_after_load(Zero *z, int t) {
    if (z->stage == 3) zero_gather_reset(z);   // gathered copies hold the old weights
    refresh_working(z, t);
    zero_sync_streams(z);
    z->last_t = t;
}

void zero_allreduce_sum_f64(Zero *z, double *values, int n) {
    ZeroCollBytes before[ZERO_COLL_NUM];
    memcpy(before, z->comm->sent, sizeof before);
    z->b->allreduce_sum_f64(z->b, z->comm, values, n, "zero_allreduce_sum_f64");
    if (!z->in_step) return;
    // the trainer's own traffic inside a step is not the plugin's: move the mark past it
    // (only the all-reduce: the stream threads may be counting their collectives meanwhile)
    const int op = ZERO_COLL_ALL_REDUCE;
    z->sent_mark[op].calls += z->comm->sent[op].calls - before[op].calls;
    z->sent_mark[op].intra_bytes += z->comm->sent[op].intra_bytes - before[op].intra_bytes;
    z->sent_mark[op].inter_bytes += z->comm->sent[op].inter_bytes - before[op].inter_bytes;
}

void zero_gather_master(Zero *z, int tensor, float *out) {
    if (tensor < 0 || tensor >= z->nt) zero_fail(z, "zero_gather_master of tensor %d: tensors are 0..%d", tensor, z->nt - 1);
    if (z->in_step) zero_fail(z, "zero_gather_master of %s inside a step (call it between steps)", z->t[tensor].name);
    const ZeroBackend *b = z->b;
    const ZeroTensorLayout *l = z->t[tensor].lay;
    if (z->stage == 0) {
        b->copy(b, out, ZERO_MEM_HOST, z->master + l->full_off, ZERO_MEM_DEVICE, l->split.numel * sizeof(float), z->main);
        b->stream_sync(b, z->main);
        return;
    }
    ZeroCollPart part = {z->master + l->shard_off, z->staging, l->split.shard};
    if (zero_offload_optimizer(z)) {
        // this rank's part comes from the host or NVMe into its slot of the staging buffer
        // (through out, which holds the whole tensor in the end anyway), then in place
        float *mine = (float *)z->staging + (size_t)z->rank * l->split.shard;
        zero_state_read(z, ZK_MASTER, tensor, 0, l->own_count, out + l->own_begin);
        b->memset0(b, mine, l->split.shard * sizeof(float), z->gs);
        b->copy(b, mine, ZERO_MEM_DEVICE, out + l->own_begin, ZERO_MEM_HOST, l->own_count * sizeof(float), z->gs);
        b->stream_sync(b, z->gs);   // out is overwritten below
        part.send = mine;
    }
    b->all_gather(b, z->comm, ZERO_GROUP_WORLD, &part, 1, ZERO_F32, z->gs, z->t[tensor].name);
    b->copy(b, out, ZERO_MEM_HOST, z->staging, ZERO_MEM_DEVICE, l->split.numel * sizeof(float), z->gs);
    b->stream_sync(b, z->gs);
}

void zero_stats(const Zero *z, ZeroStats *s) {
    memset(s, 0, sizeof *s);
    for (int k = 0; k < ZERO_USE_KINDS; k++) {
        s->device[k] = z->mem_dev[k];
        s->host[k] = z->mem_host[k];
        s->nvme[k] = z->mem_nvme[k];
    }
    s->param_pool_elems = z->parena.capacity;
    s->param_pool_peak = z->parena.peak;
    s->grad_pool_elems = z->garena.capacity;
    s->grad_pool_peak = z->garena.peak;
    s->gathers = z->n_gathers;
    s->prefetches = z->n_prefetches;
    s->gather_hits = z->n_hits;
    s->evictions = z->n_evictions;
    s->wasted_gathers = z->n_wasted;
    s->buckets = z->n_buckets;
    s->qwz_gathers = z->n_qwz;
    s->hpz_gathers = z->n_hpz;
    s->secondary_bytes = z->sec ? z->sec_elems * z->pes : 0;
    s->nvme_read = z->off.step_read;
    s->nvme_written = z->off.step_written;
    s->nvme_busy_s = z->off.step_busy;
}
