// gpt2_zero_cpu.c: the CPU trainer's ZeRO hooks (gpt2_zero_cpu.h): the glue of gpt2_zero.h,
// the host backend, and what the CPU model allocates.
#include "gpt2_zero_cpu.h"

#include <stdio.h>
#include <stdlib.h>

#include "gpt2_zero.h"
#include "llmc/run/step_skip.h"
#include "llmc/run/train_state.h"
#include "llmc/run/train_common.h"
#include "llmc/utils.h"
#include "zero/backend.h"
#include "zero/host/backend_host.h"

_Static_assert((int)TRAIN_ACT_OFFLOAD_NVME == (int)GPT2_ACT_OFFLOAD_FILE, "--act-offload nvme is the CPU model's swap-file tier");

GPT2CpuOptions gpt2_cpu_options(const TrainConfig *cfg) {
    return (GPT2CpuOptions){cfg->act_checkpoint, cfg->act_offload, cfg->tile_linear, cfg->micro_grads, cfg->tile_vocab,
                            cfg->nvme_path};
}

// The ZeRO side of a run (CpuTrainer's zero).
typedef struct {
    ZeroComm *comm;
    const ZeroBackend *backend;   // host backend: MPI collectives, OpenMP kernels, stream threads
    GPT2Zero glue;
} ZeroCpu;

static ZeroCpu *side(const CpuTrainer *t) { return (ZeroCpu *)t->zero; }

// What -s's samples add to the activations (a forward of up to 1 x -g tokens).
static size_t sample_extra(const GPT2Config *c, const TrainConfig *cfg, const GPT2CpuOptions *o) {
    return cfg->sample_every > 0 ? gpt2_cpu_sample_extra_bytes(c, cfg->B, cfg->T, cfg->gen_tokens, o) : 0;
}

// The activations and their gradients a step of B x T allocates (and a sample), known before it.
static size_t cpu_activation_bytes(const GPT2Config *c, const TrainConfig *cfg, size_t *host_bytes,
                                   size_t *file_bytes) {
    check_tiles(cfg, c);
    GPT2CpuOptions o = gpt2_cpu_options(cfg);
    size_t bytes = gpt2_cpu_activation_bytes(c, cfg->B, cfg->T, &o) + sample_extra(c, cfg, &o);
    *host_bytes = gpt2_cpu_activation_host_bytes(c, cfg->B, cfg->T, &o);
    *file_bytes = gpt2_cpu_activation_file_bytes(c, cfg->B, cfg->T, &o);
    printf("activations and their gradients for B=%d T=%d: %.2f MiB per rank", cfg->B, cfg->T, bytes / 1048576.0);
    if (*file_bytes)
        printf(", and the block inputs (%.2f MiB) in a swap file under %s, through a host slot of %.2f MiB",
               *file_bytes / 1048576.0, cfg->nvme_path, *host_bytes / 1048576.0);
    else if (*host_bytes)
        printf(", and %.2f MiB of offloaded block inputs in host memory", *host_bytes / 1048576.0);
    printf("\n");
    return bytes;
}

// What a ZeRO CPU process holds besides the plugin's buffers and the activations: its code,
// the C, OpenMP and MPI runtimes, the plugin's stream threads, their stacks and heaps (14 MiB
// measured: the peak resident set less the reported buffers; Debian 12, glibc 2.36, Open MPI
// 4.1), and the data loaders' shards.
static size_t sharded_runtime_bytes(const TrainConfig *cfg) { return (size_t)14 * 1048576 + train_data_bytes(cfg); }

// The host backend's device memory is host memory: fp32 working weights and gradients.
static int sharded_dry_run(TrainConfig *cfg) {
    return gpt2_zero_dry_run(cfg, ZERO_F32, ZERO_F32, cpu_activation_bytes, sharded_runtime_bytes);
}

// Every rank of mpirun / srun; only rank 0 prints (gpt2_zero_world).
static void sharded_start(CpuTrainer *t, int *argc, char ***argv) {
    ZeroCpu *s = (ZeroCpu *)calloc_check(1, sizeof(ZeroCpu));
    s->comm = gpt2_zero_world(argc, argv, t->cfg);
    t->zero = s;
    t->rank = s->comm->rank;
    t->world = s->comm->world;
    t->local_ranks = s->comm->local_size;
    t->local_ranks_from =
        s->comm->launch == ZERO_LAUNCH_MPI ? "MPI_COMM_TYPE_SHARED" : "LOCAL_WORLD_SIZE or WORLD_SIZE";
}

// The plugin owns the parameters: the model gets none (attach reads each rank's shards).
static void sharded_build(CpuTrainer *t, GPT2ModelFile *file) {
    (void)file;
    gpt2_cpu_build_external(t->model, &t->config);
}

static void sharded_attach(CpuTrainer *t, GPT2ModelFile *file) {
    ZeroCpu *s = side(t);
    if (!(s->backend = zero_backend_host(s->comm))) exit(EXIT_FAILURE);   // it printed why
    ZeroConfig zc = gpt2_zero_config(t->cfg, ZERO_F32, ZERO_F32);
    gpt2_zero_attach(&s->glue, &t->config, &zc, s->comm, s->backend, t->cfg->seed, file, gpt2_cpu_slots(t->model));
}

static int sharded_have_checkpoint(CpuTrainer *t) {
    return gpt2_zero_have_checkpoint(&side(t)->glue, t->cfg->out_dir, t->cfg->resume);
}

// Sharded: every rank reads the element ranges it owns now (any saved world/stage).
static int sharded_begin_run(CpuTrainer *t, TrainState *state, DataLoader *train) {
    Zero *z = side(t)->glue.z;
    if (!t->cfg->resume) {
        printf("run %s (a new run id: sharded checkpoints of this run carry it)\n", zero_run_id(z));
        return 0;
    }
    TrainState saved;
    char ckpt[4200];
    gpt2_zero_load_checkpoint(&side(t)->glue, t->cfg->out_dir, &saved, ckpt, sizeof(ckpt));
    int step = train_state_resume(state, &saved, t->cfg->max_steps, train, ckpt);
    printf("resumed from '%s' at step %d (saved by %d ranks), run %s\n", t->cfg->out_dir, step, saved.world,
           zero_run_id(z));
    return step;
}

// The activations a step allocates, known before it: the host backend's device is host
// memory, where the model computes.
static void sharded_print_memory(CpuTrainer *t, int grad_accum) {
    (void)grad_accum;
    const TrainConfig *cfg = t->cfg;
    GPT2CpuOptions o = gpt2_cpu_options(cfg);
    Zero *z = side(t)->glue.z;
    size_t acts = gpt2_cpu_activation_bytes(&t->config, cfg->B, cfg->T, &o) + sample_extra(&t->config, cfg, &o);
    zero_report_set_activation_bytes(z, acts, gpt2_cpu_activation_host_bytes(&t->config, cfg->B, cfg->T, &o));
    zero_report_print(z);
}

static void sharded_sum_ranks(void *ctx, double *values, int n) {
    gpt2_zero_sum_ranks(&side((const CpuTrainer *)ctx)->glue, values, n);
}

static void sharded_begin_step(CpuTrainer *t, int grad_accum) { zero_begin_step(side(t)->glue.z, grad_accum); }

static float sharded_step(CpuTrainer *t, int step, float lr, double *loss, int *skipped) {
    float norm = gpt2_zero_step(&side(t)->glue, t->cfg, step, lr, loss);   // mean loss over ranks; may skip
    *skipped = nonfinite_step(t->cfg, step, (float)*loss, norm, t->rank) || outlier_skipped_last();
    return norm;
}

static void sharded_land(CpuTrainer *t) { zero_land_update(side(t)->glue.z); }

static void sharded_save(CpuTrainer *t, const TrainState *st) {
    const TrainConfig *cfg = t->cfg;
    GPT2Zero *g = &side(t)->glue;
    if (zero_save(g->z, cfg->out_dir, st->step, st, sizeof(*st)) != 0)
        die("rank %d: checkpoint at step %d failed (see above); the previous one is intact", t->rank, st->step);
    zero_prune(g->z, cfg->out_dir, cfg->ckpt_keep, cfg->ckpt_major);   // -nk, -nm
    printf("saved checkpoint %s/zero_%d/\n", cfg->out_dir, st->step);
    checkpoint_export_model(cfg->out_dir, st->step, t->rank, &t->config, &g->model, cfg->ckpt_keep, cfg->ckpt_major);
}

// The most the model has held for activations and their gradients (the report's measured
// figures; a checkpoint's release leaves them): its buffers, and act_offload's host tier apart.
static void sharded_report(CpuTrainer *t) {
    const GPT2 *m = t->model;
    gpt2_zero_write_report(&side(t)->glue, t->cfg->out_dir, m->act_peak * sizeof(float), m->act_host_peak * sizeof(float));
}

// The model file streamed from the shards, tile by tile; with the host memory it took.
static void sharded_export(CpuTrainer *t) {
    size_t before = host_memory_now();
    int measured = host_memory_reset_peak() == 0;
    checkpoint_export_model(t->cfg->out_dir, -1, t->rank, &t->config, &side(t)->glue.model, 0, 0);
    if (measured)
        printf("host memory during the export: peak %.1f MiB, %.1f MiB resident before it\n",
               host_memory_peak() / 1048576.0, before / 1048576.0);
}

static void sharded_free(CpuTrainer *t) {
    ZeroCpu *s = side(t);
    gpt2_zero_free(&s->glue);
    zero_backend_host_free(s->backend);
    zero_comm_free(s->comm);
    free(s);
    t->zero = NULL;
}

CpuHooks gpt2_zero_cpu_hooks(void) {
    return (CpuHooks){sharded_dry_run, sharded_start, sharded_build, sharded_attach, sharded_have_checkpoint,
                      sharded_begin_run, sharded_print_memory, sharded_sum_ranks, sharded_begin_step, sharded_step,
                      sharded_land, sharded_save, sharded_report, sharded_export, sharded_free};
}
