// gpt2_zero.c: GPT-2 on the ZeRO plugin (gpt2_zero.h), shared by both ZeRO trainers.
#include "gpt2_zero.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "llmc/run/checkpoint.h"
#include "llmc/run/run_lock.h"
#include "llmc/run/step_skip.h"
#include "llmc/run/train_common.h"
#include "llmc/utils.h"
#include "zero/io/nvme.h"
#include "zero/kernels/quant.h"

ZeroComm *gpt2_zero_world(int *argc, char ***argv, const TrainConfig *cfg) {
    ZeroComm *comm = zero_comm_init(argc, argv);
    if (comm == NULL) exit(EXIT_FAILURE);
    if (comm->rank != 0 && freopen("/dev/null", "w", stdout) == NULL) die("rank %d: cannot silence stdout", comm->rank);
    run_lock_take(cfg->out_dir, comm->rank);   // rank 0 locks the folder, then removes stale temp files
    return comm;
}

_Static_assert(TRAIN_OFFLOAD_NONE == (int)ZERO_TIER_DEVICE && TRAIN_OFFLOAD_CPU == (int)ZERO_TIER_HOST &&
                   TRAIN_OFFLOAD_NVME == (int)ZERO_TIER_NVME, "--offload-* values are ZeroTier's");

_Static_assert(TRAIN_QUANT_BLOCK_DEFAULT == QUANT_BLOCK_DEFAULT, "--qwz-block's documented default");
_Static_assert(TRAIN_QGZ_BLOCK_DEFAULT == QGZ_BLOCK_DEFAULT, "--qgz-block's documented default");

_Static_assert(TRAIN_AIO_MAX_QUEUE_DEPTH == ZERO_NVME_MAX_DEPTH && TRAIN_AIO_MAX_BLOCK == ZERO_NVME_MAX_BLOCK &&
                   TRAIN_AIO_ALIGN == ZERO_NVME_ALIGN, "aio.queue_depth's and aio.block_size's limits are the engine's");

ZeroConfig gpt2_zero_config(const TrainConfig *cfg, ZeroDType param_dtype, ZeroDType grad_dtype) {
    ZeroConfig zc;
    zero_config_defaults(&zc);
    zc.stage = cfg->zero_stage;
    zc.param_dtype = param_dtype;
    zc.grad_dtype = grad_dtype;
    // -1: left to the plugin, which sizes them from the model (ZERO_AUTO)
    zc.bucket_elems = cfg->zero_bucket < 0 ? ZERO_AUTO : (size_t)cfg->zero_bucket;
    zc.prefetch_elems = cfg->zero_prefetch < 0 ? ZERO_AUTO : (size_t)cfg->zero_prefetch;
    zc.max_live_elems = (size_t)cfg->zero_max_live;
    zc.persist_elems = cfg->zero_persist < 0 ? ZERO_AUTO : (size_t)cfg->zero_persist;
    zc.node_size = cfg->node_size;
    zc.timeout_s = cfg->zero_timeout;
    zc.seed = cfg->seed;
    zc.optimizer_tier = (ZeroTier)cfg->offload_optimizer;   // TRAIN_OFFLOAD_* are ZeroTier's order
    zc.optimizer_ratio = cfg->offload_ratio;
    zc.param_tier = (ZeroTier)cfg->offload_param;
    zc.nvme_path = cfg->nvme_path;
    zc.nvme_queue_depth = cfg->aio_queue_depth;   // DeepSpeed's aio section (0: the engine's defaults)
    zc.nvme_block_bytes = (size_t)cfg->aio_block_size;
    zc.qwz = cfg->qwz;
    zc.hpz = cfg->hpz;
    zc.qgz = cfg->qgz;
    zc.hier_reduce = cfg->hier_reduce;
    zc.fast_reduce = cfg->fast_reduce;
    zc.dpu_from = cfg->dpu;
    zc.qwz_block = cfg->qwz_block;
    zc.qgz_block = cfg->qgz_block;
    return zc;
}

// The plugin's tensor table: one tensor per slice of K linear and KV vocabulary tiles, read
// by the slice's unit(s) (a wte tile by its embedding and its classifier unit: ZeRO-Infinity's
// shared parameters).
static ZeroTensor *tensor_table(GPT2Zero *g, const GPT2Config *c, int K, int KV) {
    g->config = *c;
    g->tiles = K;
    g->vocab_tiles = KV;
    g->num_slices = gpt2_num_slices_tiled(c, K, KV);
    g->slices = (GPT2Slice *)malloc_check((size_t)g->num_slices * sizeof(GPT2Slice));
    gpt2_slices_tiled(c, K, KV, g->slices);
    ZeroTensor *t = (ZeroTensor *)calloc_check((size_t)g->num_slices, sizeof(ZeroTensor));
    for (int i = 0; i < g->num_slices; i++) {
        const GPT2Slice *s = &g->slices[i];
        t[i] = (ZeroTensor){s->name, s->numel, s->decay, {s->units[0], s->units[1]}, s->num_units};
    }
    return t;
}

// The fp32 master of one tensor (a tile) of the plugin's table, gathered from the shards
// (collective): the model file's source, one tile's buffer at a time.
static void gather_tensor(void *ctx, int tensor, float *out) { zero_gather_master(((GPT2Zero *)ctx)->z, tensor, out); }

// The model's unit hooks: fetch points the unit's slots at the plugin's buffers (full
// working parameters; in backward also gradient buffers the model adds into).
static void hook_fetch(void *ctx, int unit, int is_backward) {
    GPT2Zero *g = (GPT2Zero *)ctx;
    const ZeroUnitView *v = zero_fetch(g->z, unit, is_backward);
    for (int k = 0; k < v->count; k++)
        g->slots.set(g->slots.model, &g->slices[v->tensors[k]], v->params[k], is_backward ? v->grads[k] : NULL);
}

static void hook_release(void *ctx, int unit, int is_backward) { zero_release(((GPT2Zero *)ctx)->z, unit, is_backward); }

static void hook_grads_ready(void *ctx, int unit) { zero_grads_ready(((GPT2Zero *)ctx)->z, unit); }

void gpt2_zero_attach(GPT2Zero *g, const GPT2Config *c, const ZeroConfig *zc, ZeroComm *comm,
                      const ZeroBackend *backend, uint64_t seed, GPT2ModelFile *file, GPT2Slots slots) {
    ZeroTensor *tensors = tensor_table(g, c, slots.tiles, slots.vocab_tiles);
    g->rank = comm->rank;
    g->world = comm->world;
    g->slots = slots;
    gpt2_slice_init_setup(&g->init, c, g->slices, seed, file);
    g->z = zero_init(tensors, g->num_slices, gpt2_num_units_tiled(c, g->tiles, g->vocab_tiles), zc, comm, backend, gpt2_slice_init,
                     &g->init);
    free(tensors);
    if (g->z == NULL) exit(EXIT_FAILURE);   // the plugin printed why: its message stays last
    g->init.file = NULL;                    // read only during zero_init
    if (file) {   // partition at init: every rank read only what it owns
        double read_all = (double)file->bytes_read;
        zero_allreduce_sum_f64(g->z, &read_all, 1);
        print_model_file_read(file, read_all);
    }
    *slots.hooks = (GPT2Hooks){g, hook_fetch, hook_release, hook_grads_ready};
    g->model = (GPT2ModelSource){g->slices, g->num_slices, gather_tensor, g};
}

void gpt2_zero_free(GPT2Zero *g) {
    zero_free(g->z);
    free(g->slices);
    g->z = NULL;
    g->slices = NULL;
}

int gpt2_zero_have_checkpoint(GPT2Zero *g, const char *out_dir, int resume) {
    double found = 0;   // rank 0: 1 a checkpoint, 0 none, -1 none but others a fresh start would lose
    char why[2048];
    if (g->rank == 0 && resume && zero_latest(out_dir) != -1) found = 1;
    else if (g->rank == 0 && checkpoint_fresh_start_refused(out_dir, CHECKPOINT_SHARDED, resume, why, sizeof(why))) {
        fprintf(stderr, "error: %s\n", why);
        found = -1;
    }
    zero_allreduce_sum_f64(g->z, &found, 1);
    if (found < 0) exit(EXIT_FAILURE);   // every rank, after rank 0 said why
    return found != 0;
}

void gpt2_zero_load_checkpoint(GPT2Zero *g, const char *out_dir, TrainState *saved, char *ckpt, size_t cap) {
    ZeroCheckpointInfo info;
    if (zero_load(g->z, out_dir, -1, saved, sizeof(*saved)) == 0) {
        // The weights were refreshed with the manifest's last update; the trainer goes on from
        // the blob's step and last update: one save writes both alike (every rank reads the
        // same files, so every rank decides alike)
        if (zero_checkpoint_info(out_dir, -1, &info) != 0) die("rank %d: cannot reread '%s' (see above)", g->rank, out_dir);
        const long long step = info.step;
        const int last_t = info.last_t;
        zero_checkpoint_info_free(&info);
        if (saved->step != step || saved->last_t != last_t)
            die("rank %d: '%s/zero_%lld': its trainer state says step %d with the last update at %d, its manifest step "
                "%lld with the last update at %d: the two are not from one save", g->rank, out_dir, step, saved->step,
                saved->last_t, step, last_t);
        snprintf(ckpt, cap, "%s/zero_%lld", out_dir, step);
        // The model file is exported after `latest_zero` moves: a run killed in between left none
        char model[4096];
        double missing = g->rank == 0 && checkpoint_model_missing(out_dir, saved->step, model, sizeof(model));
        zero_allreduce_sum_f64(g->z, &missing, 1);
        if (missing > 0) {
            if (g->rank == 0) printf("model file %s is missing (the run that saved step %d stopped before it):\n", model, saved->step);
            checkpoint_export_model(out_dir, saved->step, g->rank, &saved->config, &g->model, 0, 0);
        }
        return;
    }
    // zero_load said why; a trainer state of format 1 is worth a word more
    if (g->rank == 0 && zero_checkpoint_info(out_dir, -1, &info) == 0) {
        if (info.extra_bytes == TRAIN_STATE_V1_BYTES)
            fprintf(stderr, "error: '%s/zero_%lld' holds the trainer state of format 1 (%d bytes), which lacks what a "
                    "bit-exact resume needs (the last applied update, the skip detectors' windows, the data identity). "
                    "Resume it with the build that wrote it, or start a new run from its model file "
                    "%s/model_%08lld.bin (-e)\n", out_dir, info.step, TRAIN_STATE_V1_BYTES, out_dir, info.step);
        zero_checkpoint_info_free(&info);
    }
    die("rank %d: cannot resume from '%s' (see above)", g->rank, out_dir);
}

double gpt2_zero_sum(void *ctx, double x) {
    zero_allreduce_sum_f64(((GPT2Zero *)ctx)->z, &x, 1);
    return x;
}

void gpt2_zero_sum_ranks(void *ctx, double *values, int n) {
    zero_allreduce_sum_f64(((GPT2Zero *)ctx)->z, values, n);
}

// -sl/-sg inside the step: the norm exists only there, before the update.
typedef struct { const TrainConfig *cfg; int step, rank; float loss; } OutlierVeto;
static int outlier_veto(float norm, void *ctx) {
    const OutlierVeto *v = (const OutlierVeto *)ctx;
    return outlier_step(v->cfg, v->step, v->loss, norm, v->rank);
}

float gpt2_zero_step(GPT2Zero *g, const TrainConfig *cfg, int step, float lr, double *loss) {
    *loss = gpt2_zero_sum(g, *loss) / g->world;
    ZeroStepArgs a = {lr, cfg->beta1, cfg->beta2, cfg->adam_eps, cfg->weight_decay, cfg->grad_clip, step + 1};
    OutlierVeto v = {cfg, step, g->rank, (float)*loss};
    (void)outlier_step(cfg, step, NAN, NAN, v.rank);   // clears outlier_skipped_last for a step the veto never sees
    return zero_step_veto(g->z, &a, !isfinite(*loss), outlier_veto, &v);   // skips a non-finite norm itself
}

void gpt2_zero_write_report(GPT2Zero *g, const char *out_dir, size_t act_device, size_t act_host) {
    zero_report_set_activation_bytes(g->z, act_device, act_host);
    char path[4096];
    snprintf(path, sizeof(path), "%s/zero_report.json", out_dir);
    if (zero_report_write(g->z, path, NULL) != 0) die("cannot write '%s' (see above)", path);
}

int gpt2_zero_dry_run(TrainConfig *cfg, ZeroDType param_dtype, ZeroDType grad_dtype,
                      GPT2ActivationBytes activation_bytes, GPT2RuntimeBytes runtime_bytes) {
    double t0 = now_seconds();
    GPT2Config mc;
    GPT2ModelFile file;
    if (resolve_model_open(cfg->model, &mc, &file)) gpt2_model_file_close(&file);  // the shape is all it needs
    check_seq_len(cfg, &mc);
    int grad_accum = resolve_grad_accum(cfg, cfg->dry_run_world);
    // the model's figures first: its predictor also checks the options against the shape
    size_t act_host = 0, act_file = 0, act_device = activation_bytes(&mc, cfg, &act_host, &act_file);
    GPT2Zero g;
    ZeroTensor *tensors = tensor_table(&g, &mc, cfg->tile_linear, cfg->tile_vocab);
    ZeroConfig zc = gpt2_zero_config(cfg, param_dtype, grad_dtype);
    run_lock_take(cfg->out_dir, 0);   // it writes OUT/zero_report.json: the folder is its while it runs
    char path[4096];
    snprintf(path, sizeof(path), "%s/zero_report.json", cfg->out_dir);
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    printf("model %s: %zu parameters\n", cfg->model, gpt2_param_sizes(&mc, sizes));
    // where the model computes in host memory (runtime_bytes given), the model export's buffer
    // of the largest slice (every rank's, gpt2_model_file_export) takes the released
    // activations' place, and more when it is larger
    size_t runtime = runtime_bytes ? runtime_bytes(cfg) : 0, largest = 0;
    for (int i = 0; i < g.num_slices; i++)
        if (g.slices[i].numel > largest) largest = g.slices[i].numel;
    if (runtime_bytes && largest * sizeof(float) > act_device) runtime += largest * sizeof(float) - act_device;
    ZeroDryRunModel model = {act_device, act_host, (size_t)cfg->gpu_mem, runtime_bytes != NULL, runtime,
                             (size_t)cfg->host_mem, act_file, cfg->max_steps > 0 ? cfg->max_steps : 0};
    int rc = zero_dry_run(tensors, g.num_slices, gpt2_num_units_tiled(&mc, g.tiles, g.vocab_tiles), &zc, cfg->dry_run_world,
                          grad_accum, &model, path);
    if (rc < 0) die("dry run failed (see above)");
    free(tensors);
    free(g.slices);
    print_cost("the dry run", t0);
    return rc == 1 ? 2 : 0;
}
