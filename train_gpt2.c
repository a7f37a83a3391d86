/*
train_gpt2.c: the CPU fp32 reference trainer for GPT-2.

Reads top to bottom as the training loop: parse flags, build the model, open the
data, then per step: (validate, sample, checkpoint,) accumulate gradients over
micro-batches, clip, AdamW. Everything it uses lives in llmc/.

With -z STAGE the same loop runs data parallel under mpirun with the ZeRO plugin (zero/,
host backend): where the two differ main calls a hook (CpuHooks, gpt2_zero_cpu.h); the
unsharded hooks are below, the ZeRO ones in gpt2_zero_cpu.c.
*/
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llmc/run/checkpoint.h"
#include "llmc/data/dataloader.h"
#include "llmc/model/gpt2_config.h"
#include "llmc/cpu/gpt2_cpu.h"
#include "llmc/model/gpt2_model_file.h"
#include "llmc/numerics/adamw_cpu.h"
#include "llmc/run/launch_env.h"
#include "llmc/run/logger.h"
#include "llmc/run/memory_table.h"
#include "llmc/run/progress.h"
#include "llmc/numerics/rand.h"
#include "llmc/run/run_info.h"
#include "llmc/run/run_lock.h"
#include "llmc/run/sampler.h"
#include "llmc/run/validation.h"
#include "llmc/run/schedule.h"
#include "llmc/run/threads.h"
#include "llmc/data/tokenizer.h"
#include "llmc/run/step_skip.h"
#include "llmc/run/train_state.h"
#include "llmc/run/train_common.h"
#include "llmc/run/train_args.h"
#include "llmc/run/train_config.h"
#include "llmc/utils.h"
#include "gpt2_zero_cpu.h"
#include "zero/trace.h"
#include "zero/zero.h"   // zero_check_disk

// ----------------------------------------------------------------------------
// The unsharded trainer's hooks: the model holds its parameters, gradients and moments.

// What an unsharded CPU training process holds besides the model's buffers: its code, the C
// and OpenMP runtimes, their stacks and heaps (6 MiB measured: the peak resident set less the
// reported buffers; Debian 12, glibc 2.36), and the data loaders' shards.
static size_t cpu_runtime_bytes(const TrainConfig *cfg) { return (size_t)6 * 1048576 + train_data_bytes(cfg); }

// The unsharded model's memory in the layout of the ZeRO table: all of it is host RAM. The
// AdamW moments and the activations are allocated by the first step (the activations'
// sizes for B x T; validation takes no more; a sample of -g tokens may, by its forward's). With --act-offload the block
// inputs in the host tier get a column of their own. --micro-grads 1 with accumulation adds
// a second gradient-sized buffer (one micro-batch's gradient), allocated by the first step.
// The same figures before anything is allocated are the unsharded --dry-run's.
static MemoryTable unsharded_memory(const GPT2Config *c, const GPT2CpuOptions *opt, const TrainConfig *cfg, int grad_accum) {
    MemoryTable t = {{0}, {0}, 0, 0};
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    uint64_t p = (uint64_t)gpt2_param_sizes(c, sizes) * sizeof(float);
    uint64_t tier = gpt2_cpu_activation_host_bytes(c, cfg->B, cfg->T, opt);
    uint64_t *model_ram = tier ? t.device : t.host;
    model_ram[MEMORY_PARAMS] = p;
    model_ram[MEMORY_GRADS] = (grad_accum > 1 && opt->micro_grads ? 2 : 1) * p;
    model_ram[MEMORY_OPTIM] = 2 * p;   // AdamW m and v
    if (cfg->dpu > 0) model_ram[MEMORY_PARAMS] += p;   // --dpu: the master one update ahead
    model_ram[MEMORY_ACTS] = gpt2_cpu_activation_bytes(c, cfg->B, cfg->T, opt);
    if (cfg->sample_every > 0) model_ram[MEMORY_ACTS] += gpt2_cpu_sample_extra_bytes(c, cfg->B, cfg->T, cfg->gen_tokens, opt);
    t.host[MEMORY_ACTS] += tier;
    return t;
}

static void print_memory(const MemoryTable *t, const TrainConfig *cfg) {
    int tier = t->host[MEMORY_ACTS] && t->device[MEMORY_PARAMS];
    memory_table_print("unsharded fp32 model on the CPU", t, tier ? "host RAM (the model)" : NULL,
                       tier ? "host tier (offloaded block inputs)" : "host RAM");
    // as the ZeRO report counts the host backend: "device" is where the model computes
    MemoryTable j = *t;
    for (int k = 0; k < MEMORY_KINDS; k++) {
        j.device[k] = tier ? t->device[k] : t->host[k];
        j.host[k] = tier ? t->host[k] : 0;
    }
    memory_table_write_json(cfg->out_dir, "train_gpt2", cfg->dry_run ? "dry_run" : "live", &j);
}

// --dry-run without -z: the unsharded run's memory and the process's peak (its buffers and
// its runtime), against --gpu-mem when given, and --act-offload nvme's swap file against the
// disk; exit status 2 when either does not fit.
static int unsharded_dry_run(TrainConfig *cfg) {
    GPT2Config mc;
    GPT2ModelFile file;
    if (resolve_model_open(cfg->model, &mc, &file)) gpt2_model_file_close(&file);   // the shape is all it needs
    check_seq_len(cfg, &mc);
    check_tiles(cfg, &mc);
    GPT2CpuOptions opt = gpt2_cpu_options(cfg);
    TrainConfig c = *cfg;
    int grad_accum = resolve_grad_accum(&c, 1);
    MemoryTable t = unsharded_memory(&mc, &opt, &c, grad_accum);
    t.runtime = cpu_runtime_bytes(cfg);
    t.budget = (uint64_t)cfg->gpu_mem;
    run_lock_take(cfg->out_dir, 0);   // it writes OUT/memory_report.json
    print_memory(&t, cfg);
    uint64_t peak = memory_table_process_bytes(&t);
    printf("dry run: the unsharded trainer, gradient accumulation %d: process peak (predicted) %.2f MiB = the table's "
           "total + %.2f MiB of runtime (code, libraries, the data)\n", grad_accum, peak / 1048576.0, t.runtime / 1048576.0);
    uint64_t act_file = gpt2_cpu_activation_file_bytes(&mc, c.B, c.T, &opt);
    int rc = act_file && zero_check_disk("the activation swap file", act_file, cfg->nvme_path) ? 2 : 0;
    if (!t.budget) return rc;
    if (peak <= t.budget) {
        printf("fits: %.2f GiB of a budget of %.2f GiB (%.2f GiB free)\n", peak / 1073741824.0, t.budget / 1073741824.0,
               (t.budget - peak) / 1073741824.0);
        return rc;
    }
    printf("does not fit: %.2f GiB in a budget of %.2f GiB (%.2f GiB over)\n", peak / 1073741824.0,
           t.budget / 1073741824.0, (peak - t.budget) / 1073741824.0);
    return 2;
}

static void unsharded_start(CpuTrainer *t, int *argc, char ***argv) {
    (void)argc, (void)argv;
    t->rank = 0, t->world = 1, t->local_ranks = 1, t->local_ranks_from = "LOCAL_WORLD_SIZE or WORLD_SIZE";
    run_lock_take(t->cfg->out_dir, 0);   // the output folder is this run's; temp files a crash left go
}

// The model: a descriptor builds a fresh init, anything else is an llm.c model file.
static void unsharded_build(CpuTrainer *t, GPT2ModelFile *file) {
    if (file) gpt2_cpu_build_from_file(t->model, t->cfg->model);
    else gpt2_cpu_build(t->model, &t->config, t->cfg->seed);
}

static void unsharded_attach(CpuTrainer *t, GPT2ModelFile *file) { (void)t, (void)file; }

static int unsharded_have_checkpoint(CpuTrainer *t) {
    if (t->cfg->resume) return checkpoint_latest(t->cfg->out_dir) >= 0;
    checkpoint_new_run_check(t->cfg->out_dir);
    return 0;
}

// The update allocates the AdamW moments lazily (zero); a resume, or a checkpoint before
// any update was applied (every step so far skipped), needs them now.
static void ensure_moments(GPT2 *model) {
    if (model->m != NULL) return;
    model->m = (float *)calloc_check(model->num_parameters, sizeof(float));
    model->v = (float *)calloc_check(model->num_parameters, sizeof(float));
}

// Resume: parameters, AdamW moments, step and data position from the latest checkpoint.
static int unsharded_begin_run(CpuTrainer *t, TrainState *state, DataLoader *train) {
    if (!t->cfg->resume) return 0;
    GPT2 *model = t->model;
    int latest = checkpoint_latest(t->cfg->out_dir);
    ensure_moments(model);
    TrainState saved;
    checkpoint_load(t->cfg->out_dir, latest, &saved, model->params, model->m, model->v, model->num_parameters);
    char ckpt[4200];
    checkpoint_path(ckpt, sizeof(ckpt), t->cfg->out_dir, latest);
    int step = train_state_resume(state, &saved, t->cfg->max_steps, train, ckpt);
    printf("resumed from '%s' at step %d\n", t->cfg->out_dir, step);
    return step;
}

static void unsharded_print_memory(CpuTrainer *t, int grad_accum) {
    MemoryTable mem = unsharded_memory(&t->config, &t->model->opt, t->cfg, grad_accum);
    print_memory(&mem, t->cfg);
}

static void unsharded_begin_step(CpuTrainer *t, int grad_accum) { (void)grad_accum, gpt2_cpu_zero_grad(t->model); }

// --dpu N unsharded, the reference for ZeRO-Offload's delayed update (zero/offload.c): from
// step N on, AdamW advances the master (`ahead`) with gradients taken at the parameters one
// update behind it, which the model trains on until the next step. A skipped step changes
// neither. Landing (before a checkpoint step's validation and save, and at the end) makes
// the parameters the master.
static void swap_floats(float *a, float *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float x = a[i];
        a[i] = b[i];
        b[i] = x;
    }
}

static void delayed_update(CpuTrainer *t, float lr, float clip, int step) {
    const TrainConfig *cfg = t->cfg;
    GPT2 *model = t->model;
    size_t bytes = model->num_parameters * sizeof(float);
    if (!t->ahead) t->ahead = (float *)memcpy(malloc_check(bytes), model->params, bytes);   // none in flight
    memcpy(model->params, t->ahead, bytes);   // the master, which this step's gradients update
    gpt2_cpu_update(model, lr, cfg->beta1, cfg->beta2, cfg->adam_eps, cfg->weight_decay, clip, step + 1);
    swap_floats(model->params, t->ahead, model->num_parameters);   // the model trains on the master before it
}

static void unsharded_land(CpuTrainer *t) {
    if (!t->ahead) return;
    memcpy(t->model->params, t->ahead, t->model->num_parameters * sizeof(float));
    free(t->ahead);
    t->ahead = NULL;
}

static float unsharded_step(CpuTrainer *t, int step, float lr, double *loss, int *skipped) {
    const TrainConfig *cfg = t->cfg;
    float norm = gpt2_cpu_grad_norm(t->model);
    *skipped = nonfinite_step(cfg, step, (float)*loss, norm, 0) || outlier_step(cfg, step, (float)*loss, norm, 0);
    float clip = (cfg->grad_clip > 0 && norm > cfg->grad_clip) ? cfg->grad_clip / norm : 1.0f;
    if (*skipped) return norm;
    if (cfg->dpu > 0 && step + 1 >= cfg->dpu) delayed_update(t, lr, clip, step);
    else gpt2_cpu_update(t->model, lr, cfg->beta1, cfg->beta2, cfg->adam_eps, cfg->weight_decay, clip, step + 1);
    return norm;
}

static void unsharded_save(CpuTrainer *t, const TrainState *st) {
    const TrainConfig *cfg = t->cfg;
    GPT2 *model = t->model;
    ensure_moments(model);
    unsharded_land(t);
    checkpoint_save(cfg->out_dir, st, model->params, model->m, model->v, model->num_parameters, cfg->ckpt_keep,
                    cfg->ckpt_major);
    printf("saved checkpoint %s/ckpt_%08d.bin and the model %s/model_%08d.bin\n", cfg->out_dir, st->step,
           cfg->out_dir, st->step);
}

static void unsharded_report(CpuTrainer *t) { (void)t; }

static void unsharded_export(CpuTrainer *t) {
    char path[4096];
    unsharded_land(t);
    checkpoint_model_path(path, sizeof(path), t->cfg->out_dir, -1);
    gpt2_model_file_write(path, &t->config, t->model->params, GPT2_MODEL_FP32);
    printf("wrote %s\n", path);
}

static void unsharded_free(CpuTrainer *t) { free(t->ahead); }

// The hooks of the run: the ZeRO plugin's under -z, else the unsharded model's (one
// process: a launch of several ranks without -z is refused).
static CpuHooks choose_hooks(const TrainConfig *cfg, const char *prog) {
    if (cfg->zero_stage >= 0) return gpt2_zero_cpu_hooks();
    launch_env_refuse_ranks(prog, "Add -z STAGE to train data parallel with ZeRO (mpirun -np N ./train_gpt2 -z 1 "
                            "...), or start one process.");
    return (CpuHooks){unsharded_dry_run, unsharded_start, unsharded_build, unsharded_attach, unsharded_have_checkpoint,
                      unsharded_begin_run, unsharded_print_memory, NULL, unsharded_begin_step, unsharded_step,
                      unsharded_land, unsharded_save, unsharded_report, unsharded_export, unsharded_free};
}

// ----------------------------------------------------------------------------
// The loop's parts.

// Validation (validation.h): the same batches and the same sum for any number of ranks.
static float batch_loss(void *model, const DataLoader *val) {
    GPT2 *m = (GPT2 *)model;
    gpt2_cpu_forward(m, val->inputs, val->targets, val->B, val->T);
    return m->mean_loss;
}

// Generates gen_tokens after an <|endoftext|> prompt (eot); the coins depend only on (seed, step).
// Under ZeRO every rank runs the forward (it gathers), rank 0 prints.
static void sample_text(GPT2 *model, const Tokenizer *tok, int eot, int gen_tokens, uint64_t seed, int step, int rank) {
    int T = model->config.max_seq_len;
    if (gen_tokens + 1 > T) gen_tokens = T - 1;
    int *tokens = (int *)malloc_check((size_t)(gen_tokens + 1) * sizeof(int));
    tokens[0] = eot;
    if (rank == 0) printf("generating:\n---\n");
    for (int t = 1; t <= gen_tokens; t++) {
        gpt2_cpu_forward(model, tokens, NULL, 1, t);
        const float *logits = gpt2_cpu_logits(model) + (size_t)(t - 1) * model->config.padded_vocab_size;
        float coin = rng_uniform(seed, RNG_STREAM_SAMPLE, ((uint64_t)step << 32) | (uint64_t)t);
        tokens[t] = sample_from_logits(logits, model->config.vocab_size, coin);
        if (rank == 0) print_token(tok, tokens[t]);
        fflush(stdout);
    }
    if (rank == 0) printf("\n---\n");
    free(tokens);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);   // progress shows as it happens, also in a file or pipe
    TrainConfig cfg;
    train_args_parse(&cfg, argc, argv, "cpu");
    const CpuHooks run = choose_hooks(&cfg, argv[0]);
    if (cfg.dry_run) {
        threads_apply(cfg.threads, 1, NULL, 0);
        return run.dry_run(&cfg);
    }

    // The world: a single process, or every rank of mpirun / srun with -z (only rank 0
    // prints; it also locks the output folder and removes the temp files a crash left,
    // before anything is written: run_lock.h).
    GPT2 model;
    CpuTrainer t = {.cfg = &cfg, .model = &model};
    run.start(&t, &argc, &argv);
    const int rank = t.rank, world = t.world;
    // OpenMP threads: cores / ranks on this node unless --threads or OMP_NUM_THREADS says
    // (threads.h); before the host backend's streams copy the setting.
    threads_apply(cfg.threads, t.local_ranks, t.local_ranks_from, rank == 0);
    // --trace: recording starts before the plugin, which names its streams' tracks
    if (cfg.trace_path && zero_trace_start(cfg.trace_path, rank, world, cfg.trace_steps) != 0) exit(EXIT_FAILURE);
    zero_trace_thread("main (the model)");

    // The model, of a descriptor's shape or an llm.c model file's: built with its parameters,
    // or under ZeRO without them until attach has each rank initialize its shards.
    GPT2ModelFile file;
    GPT2ModelFile *from_file = resolve_model_open(cfg.model, &t.config, &file) ? &file : NULL;
    const GPT2Config mc = t.config;
    run.build(&t, from_file);
    check_seq_len(&cfg, &mc);
    check_tiles(&cfg, &mc);
    GPT2CpuOptions model_opt = gpt2_cpu_options(&cfg);
    gpt2_cpu_set_options(&model, &model_opt);
    run.attach(&t, from_file);
    if (from_file) gpt2_model_file_close(&file);
    printf("host memory after loading the model: peak %.1f MiB\n", host_memory_peak() / 1048576.0);

    // Batch geometry: tokens per step = B * T * world * grad_accum.
    int grad_accum = resolve_grad_accum(&cfg, world);

    DataLoader train, val;
    int have_val = open_data(&cfg, &train, &val, rank, world, grad_accum, mc.vocab_size);

    Tokenizer tok;
    int eot;   // where samples start: the tokenizer's <|endoftext|>
    int have_tok = load_sampling_tokenizer(&tok, &cfg, mc.vocab_size, &eot);

    printf("GPT-2 CPU trainer: %d layers, %d channels, %d heads, vocab %d (padded %d), %zu parameters, %d threads, "
           "AdamW kernel %s\n", mc.num_layers, mc.channels, mc.num_heads, mc.vocab_size, mc.padded_vocab_size,
           model.num_parameters, omp_get_max_threads(), adamw_cpu_path_name(adamw_cpu_auto_path()));
    printf("train: %d shard(s), %lld windows; val: %s\n", train.num_shards, (long long)train.total_windows,
           have_val ? cfg.val_pattern : "off");
    train_config_print(&cfg, grad_accum, world);

    // Resume from the latest checkpoint, or start fresh.
    TrainState state = train_state_new(&mc, &cfg, world, &train);
    if (!run.have_checkpoint(&t) && cfg.resume) {
        printf("-y 1: no checkpoint in '%s' yet: starting fresh\n", cfg.out_dir);
        cfg.resume = 0;
    }
    int start_step = run.begin_run(&t, &state, &train);
    run.print_memory(&t, grad_accum);
    Logger logger = {0};
    if (rank == 0) logger_open(&logger, cfg.out_dir, cfg.resume ? start_step : -1);
    RunInfo run_info;   // OUT/run.json: what compare_runs.py checks before comparing runs
    run_info_start(&run_info, argv[0], &cfg, grad_accum, world, rank, cfg.resume ? start_step : -1);

    double flops_per_step = gpt2_flops_per_token(&mc, cfg.T) * (double)cfg.total_batch_tokens;
    Progress progress;
    progress_begin(&progress, start_step, cfg.max_steps);
    for (int step = start_step; step <= cfg.max_steps; step++) {
        int last = step == cfg.max_steps;
        if (!last) zero_trace_step(step);   // the last pass (final validation, export) counts in the last step

        int save = cfg.checkpoint_every > 0 && step > start_step && (step % cfg.checkpoint_every == 0 || last);
        if (save || last) run.land(&t);   // --dpu: the parameters a resume from here starts with
        if (have_val && (step % cfg.val_every == 0 || last)) {
            uint64_t s0 = zero_trace_begin();
            float vl = validation_loss(&val, cfg.val_max_steps, batch_loss, &model, run.sum_ranks, &t);
            zero_trace_end("validation", s0);
            printf("val loss %f\n", vl);
            logger_val(&logger, step, vl);
        }
        if (cfg.sample_every > 0 && step > 0 && (step % cfg.sample_every == 0 || last))
            sample_text(&model, have_tok ? &tok : NULL, eot, cfg.gen_tokens, cfg.seed, step, rank);
        if (save) {
            uint64_t s0 = zero_trace_begin();
            TrainState st = train_state_at(&state, step, &train);
            gpt2_cpu_release_activations(&model);   // idle between steps: the save uses their memory
            run.save(&t, &st);
            zero_trace_end("checkpoint", s0);
        }
        if (last) break;

        // One optimizer step: accumulate gradients over grad_accum micro-batches.
        double t0 = now_seconds();
        if (cfg.overfit_batch) dataloader_set_state(&train, 0, 0);   // -a 1: the first batch again
        run.begin_step(&t, grad_accum);
        double loss = 0.0;
        float loss_scale = 1.0f / ((float)cfg.total_batch_tokens);
        for (int micro = 0; micro < grad_accum; micro++) {
            dataloader_next_batch(&train);
            uint64_t s0 = zero_trace_begin();
            gpt2_cpu_forward(&model, train.inputs, train.targets, cfg.B, cfg.T);
            uint64_t s1 = zero_trace_begin();
            zero_trace_end("forward pass", s0);
            gpt2_cpu_backward(&model, loss_scale);
            zero_trace_end("backward pass", s1);
            loss += model.mean_loss;
        }
        loss /= grad_accum;
        float lr = lr_schedule(cfg.lr_schedule, cfg.lr, step, cfg.warmup_steps, cfg.max_steps, cfg.final_lr_frac);
        int skipped;   // a NaN or infinite loss or norm stops the run, or with --nan-skip skips the update
        uint64_t s_opt = zero_trace_begin();
        float norm = run.step(&t, step, lr, &loss, &skipped);
        train_state_stepped(&state, step, skipped);
        zero_trace_end("optimizer step", s_opt);
        double dt = now_seconds() - t0;
        char eta[96];
        progress_text(&progress, step, eta, sizeof(eta));
        if (!skipped)
            printf("step %4d/%d | loss %f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s | %.1f GFLOP/s | %s\n",
                   step + 1, cfg.max_steps, loss, norm, lr, 1e3 * dt, cfg.total_batch_tokens / dt,
                   flops_per_step / dt * 1e-9, eta);
        logger_train(&logger, step, (float)loss, lr, norm);
        if (step == start_step) run.report(&t);
        run_info_step(&run_info, dt);
    }

    nonfinite_summary(&cfg);   // --nan-skip: how many steps were skipped
    outlier_summary(&cfg, rank);   // -sl/-sg: how many updates were skipped
    // The final parameters: OUT/model_final.bin, as every trainer writes it, in the memory the
    // activations held (sharded, a rank's buffer of the largest slice may need more: the dry
    // run counts it).
    run.report(&t);
    gpt2_cpu_release_activations(&model);
    uint64_t s_export = zero_trace_begin();
    run.export_model(&t);
    zero_trace_end("model export", s_export);
    if (zero_trace_finish() != 0) die("rank %d: the trace could not be written (see above)", rank);

    run_info_finish(&run_info);
    logger_close(&logger);
    if (have_tok) tokenizer_free(&tok);
    if (have_val) dataloader_free(&val);
    dataloader_free(&train);
    run.free(&t);
    gpt2_cpu_free(&model);
    return 0;
}
