/*
train_gpt2.c: the CPU fp32 reference trainer for GPT-2.

Reads top to bottom as the training loop: parse flags, build the model, open the
data, then per step: (validate, sample, checkpoint,) accumulate gradients over
micro-batches, clip, AdamW. Everything it uses lives in llmc/.

With -z STAGE the same loop runs data parallel under mpirun with the ZeRO plugin
(zero/, host backend): the "ZeRO glue" section below is all a trainer adds — the
model's unit hooks call the plugin, which owns parameters, gradients and optimizer.
*/
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llmc/atomic_file.h"
#include "llmc/run/checkpoint.h"
#include "llmc/data/dataloader.h"
#include "llmc/model/gpt2_config.h"
#include "llmc/cpu/gpt2_cpu.h"
#include "llmc/model/gpt2_model_file.h"
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
#include "llmc/run/train_common.h"
#include "llmc/run/train_args.h"
#include "llmc/run/train_config.h"
#include "llmc/utils.h"
#include "gpt2_zero.h"
#include "zero/backend.h"
#include "zero/host/backend_host.h"
#include "zero/comm.h"
#include "zero/trace.h"
#include "zero/zero.h"

// ----------------------------------------------------------------------------
// ZeRO: the GPT-2 glue (gpt2_zero.h) is shared with train_gpt2_zero.cu; this trainer adds
// the host backend and what the CPU model allocates.

_Static_assert((int)TRAIN_ACT_OFFLOAD_NVME == (int)GPT2_ACT_OFFLOAD_FILE, "--act-offload nvme is the CPU model's swap-file tier");

// The model's options from the flags (--act-checkpoint, --act-offload, --tile-linear, --tile-vocab, --micro-grads).
static GPT2CpuOptions cpu_options(const TrainConfig *cfg) {
    return (GPT2CpuOptions){cfg->act_checkpoint, cfg->act_offload, cfg->tile_linear, cfg->micro_grads, cfg->tile_vocab,
                            cfg->nvme_path};
}

// What the model holds now for activations and their gradients (the report's measured
// figures): the model's buffers, and act_offload's host tier apart.
static size_t activation_bytes(const GPT2 *model) { return (model->act_capacity + model->grad_act_capacity) * sizeof(float); }
static size_t activation_host_bytes(const GPT2 *model) { return model->act_host_capacity * sizeof(float); }

// The activations and their gradients a step of B x T allocates, known before it.
static size_t cpu_activation_bytes(const GPT2Config *c, const TrainConfig *cfg, size_t *host_bytes) {
    check_tiles(cfg, c);
    GPT2CpuOptions o = cpu_options(cfg);
    size_t bytes = gpt2_cpu_activation_bytes(c, cfg->B, cfg->T, &o);
    *host_bytes = gpt2_cpu_activation_host_bytes(c, cfg->B, cfg->T, &o);
    printf("activations and their gradients for B=%d T=%d: %.2f MiB per rank", cfg->B, cfg->T, bytes / 1048576.0);
    if (cfg->act_offload == TRAIN_ACT_OFFLOAD_NVME)
        printf(", and the block inputs (%.2f MiB) in a swap file under %s, through a host slot of %.2f MiB",
               (double)(c->num_layers - 1) * cfg->B * cfg->T * c->channels * 4 / 1048576.0, cfg->nvme_path,
               *host_bytes / 1048576.0);
    else if (*host_bytes)
        printf(", and %.2f MiB of offloaded block inputs in host memory", *host_bytes / 1048576.0);
    printf("\n");
    return bytes;
}

// ----------------------------------------------------------------------------

// What a CPU training process holds besides the model's buffers (or the plugin's): its
// code, the C and OpenMP runtimes (under ZeRO also MPI's and the plugin's stream threads),
// their stacks and heaps, and the data loaders' shards. The fixed part is measured: the peak
// resident set less the reported buffers, 6 MiB unsharded and 14 MiB under ZeRO (Debian 12,
// glibc 2.36, Open MPI 4.1); the shards follow from the data.
static size_t cpu_runtime_bytes(const TrainConfig *cfg) {
    return (size_t)(cfg->zero_stage >= 0 ? 14 : 6) * 1048576 + train_data_bytes(cfg);
}

// The unsharded model's memory in the layout of the ZeRO table: all of it is host RAM. The
// AdamW moments and the activations are allocated by the first step (the activations'
// sizes for B x T; validation takes no more, a sample fewer). With --act-offload the block
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
    model_ram[MEMORY_ACTS] = gpt2_cpu_activation_bytes(c, cfg->B, cfg->T, opt);
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
    memory_table_write_json(cfg->out_dir, "train_gpt2", &j);
}

// --dry-run without -z: the unsharded run's memory and the process's peak (its buffers and
// its runtime), against --gpu-mem when given; exit status 2 when it does not fit.
static int unsharded_dry_run(const TrainConfig *cfg) {
    GPT2Config mc;
    GPT2ModelFile file;
    if (resolve_model_open(cfg->model, &mc, &file)) gpt2_model_file_close(&file);   // the shape is all it needs
    check_tiles(cfg, &mc);
    GPT2CpuOptions opt = cpu_options(cfg);
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
    if (!t.budget) return 0;
    if (peak <= t.budget) {
        printf("fits: %.2f GiB of a budget of %.2f GiB (%.2f GiB free)\n", peak / 1073741824.0, t.budget / 1073741824.0,
               (t.budget - peak) / 1073741824.0);
        return 0;
    }
    printf("does not fit: %.2f GiB in a budget of %.2f GiB (%.2f GiB over)\n", peak / 1073741824.0,
           t.budget / 1073741824.0, (peak - t.budget) / 1073741824.0);
    return 2;
}

// Validation (validation.h): the same batches and the same sum for any number of ranks.
static float batch_loss(void *model, const DataLoader *val) {
    GPT2 *m = (GPT2 *)model;
    gpt2_cpu_forward(m, val->inputs, val->targets, val->B, val->T);
    return m->mean_loss;
}

// Generates gen_tokens after an EOT prompt; the coins depend only on (seed, step).
// Under ZeRO every rank runs the forward (it gathers), rank 0 prints.
static void sample_text(GPT2 *model, const Tokenizer *tok, int gen_tokens, uint64_t seed, int step, int rank) {
    int T = model->config.max_seq_len;
    if (gen_tokens + 1 > T) gen_tokens = T - 1;
    int *tokens = (int *)malloc_check((size_t)(gen_tokens + 1) * sizeof(int));
    tokens[0] = GPT2_EOT;
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
    if (cfg.zero_stage < 0)
        launch_env_refuse_ranks(argv[0], "Add -z STAGE to train data parallel with ZeRO (mpirun -np N ./train_gpt2 -z 1 "
                                "...), or start one process.");
    // The host backend's device memory is host memory: fp32 working weights and gradients.
    if (cfg.dry_run) {
        threads_apply(cfg.threads, 1, NULL, 0);
        if (cfg.zero_stage < 0) return unsharded_dry_run(&cfg);
        return gpt2_zero_dry_run(&cfg, ZERO_F32, ZERO_F32, cpu_activation_bytes, cpu_runtime_bytes);
    }

    // The world: a single process, or every rank of mpirun / srun with -z (only rank 0
    // prints; it also locks the output folder and removes the temp files a crash left,
    // before anything is written: run_lock.h).
    ZeroComm *comm = cfg.zero_stage >= 0 ? gpt2_zero_world(&argc, &argv, &cfg) : NULL;
    const int rank = comm ? comm->rank : 0, world = comm ? comm->world : 1;
    if (!comm) run_lock_take(cfg.out_dir, 0);
    // OpenMP threads: cores / ranks on this node unless --threads or OMP_NUM_THREADS says
    // (threads.h); before the host backend's streams copy the setting.
    threads_apply(cfg.threads, comm ? comm->local_size : 1,
                  comm && comm->launch == ZERO_LAUNCH_MPI ? "MPI_COMM_TYPE_SHARED" : "LOCAL_WORLD_SIZE or WORLD_SIZE", rank == 0);
    // --trace: recording starts before the plugin, which names its streams' tracks
    if (cfg.trace_path && zero_trace_start(cfg.trace_path, rank, world, cfg.trace_steps) != 0) exit(EXIT_FAILURE);
    zero_trace_thread("main (the model)");

    // The model: a descriptor builds a fresh init, anything else is an llm.c model file.
    GPT2 model;
    GPT2Config mc;
    GPT2ModelFile file;
    int from_file = resolve_model_open(cfg.model, &mc, &file);
    if (comm) {
        // Under ZeRO the plugin owns the parameters: each rank initializes only its shards,
        // reading just those ranges of a model file.
        gpt2_cpu_build_external(&model, &mc);
    } else if (from_file) {
        gpt2_cpu_build_from_file(&model, cfg.model);
    } else {
        gpt2_cpu_build(&model, &mc, cfg.seed);
    }
    if (cfg.T > mc.max_seq_len) die("-t %d exceeds the model's maximum sequence length %d", cfg.T, mc.max_seq_len);
    check_tiles(&cfg, &mc);
    GPT2CpuOptions model_opt = cpu_options(&cfg);
    gpt2_cpu_set_options(&model, &model_opt);
    GPT2Zero glue;
    const ZeroBackend *backend = NULL;
    Zero *z = NULL;
    if (comm) {
        // host backend: MPI collectives, OpenMP kernels, stream threads
        if (!(backend = zero_backend_host(comm))) exit(EXIT_FAILURE);   // it printed why
        ZeroConfig zc = gpt2_zero_config(&cfg, ZERO_F32, ZERO_F32);
        gpt2_zero_attach(&glue, &mc, &zc, comm, backend, cfg.seed, from_file ? &file : NULL, gpt2_cpu_slots(&model));
        z = glue.z;
    }
    if (from_file) gpt2_model_file_close(&file);
    printf("host memory after loading the model: peak %.1f MiB\n", host_memory_peak() / 1048576.0);

    // Batch geometry: tokens per step = B * T * world * grad_accum.
    int grad_accum = resolve_grad_accum(&cfg, world);

    DataLoader train, val;
    int have_val = open_data(&cfg, &train, &val, rank, world, grad_accum, mc.vocab_size);

    Tokenizer tok;
    int have_tok = load_sampling_tokenizer(&tok, &cfg);

    printf("GPT-2 CPU trainer: %d layers, %d channels, %d heads, vocab %d (padded %d), %zu parameters, %d threads\n",
           mc.num_layers, mc.channels, mc.num_heads, mc.vocab_size, mc.padded_vocab_size,
           model.num_parameters, omp_get_max_threads());
    printf("train: %d shard(s), %lld windows; val: %s\n", train.num_shards, (long long)train.total_windows,
           have_val ? cfg.val_pattern : "off");
    train_config_print(&cfg, grad_accum, world);

    // Resume: parameters, AdamW moments, step and data position from the latest checkpoint.
    TrainState state = {0, mc, cfg.seed, 0, 0, cfg.B, cfg.T, world, cfg.total_batch_tokens};
    int start_step = 0;
    if (cfg.resume && !(z ? gpt2_zero_have_checkpoint(&glue, cfg.out_dir) : checkpoint_latest(cfg.out_dir) >= 0)) {
        printf("-y 1: no checkpoint in '%s' yet: starting fresh\n", cfg.out_dir);
        cfg.resume = 0;
    }
    if (cfg.resume && z) {
        // Sharded: every rank reads the element ranges it owns now (any saved world/stage).
        TrainState saved;
        if (zero_load(z, cfg.out_dir, -1, &saved, sizeof(saved)) != 0)
            die("rank %d: cannot resume from '%s' (see above)", rank, cfg.out_dir);
        checkpoint_check_compatible(&saved, &state, "resume");
        dataloader_set_state(&train, saved.data_epoch, saved.data_next_window);
        start_step = saved.step;
        printf("resumed from '%s' at step %d (saved by %d ranks), run %s\n", cfg.out_dir, start_step, saved.world,
               zero_run_id(z));
    } else if (cfg.resume) {
        int latest = checkpoint_latest(cfg.out_dir);
        // The update allocates the moments lazily; resume needs them now.
        if (model.m == NULL) {
            model.m = (float *)calloc_check(model.num_parameters, sizeof(float));
            model.v = (float *)calloc_check(model.num_parameters, sizeof(float));
        }
        TrainState saved;
        checkpoint_load(cfg.out_dir, latest, &saved, model.params, model.m, model.v, model.num_parameters);
        checkpoint_check_compatible(&saved, &state, "resume");
        dataloader_set_state(&train, saved.data_epoch, saved.data_next_window);
        start_step = saved.step;
        printf("resumed from '%s' at step %d\n", cfg.out_dir, start_step);
    }
    if (z && !cfg.resume) printf("run %s (a new run id: sharded checkpoints of this run carry it)\n", zero_run_id(z));
    if (z) {
        // The activations a step allocates, known before it: the host backend's device is
        // host memory, where the model computes.
        zero_report_set_activation_bytes(z, gpt2_cpu_activation_bytes(&mc, cfg.B, cfg.T, &model_opt),
                                         gpt2_cpu_activation_host_bytes(&mc, cfg.B, cfg.T, &model_opt));
        zero_report_print(z);
    } else {
        MemoryTable mem = unsharded_memory(&mc, &model.opt, &cfg, grad_accum);
        print_memory(&mem, &cfg);
    }
    Logger logger = {0};
    if (rank == 0) logger_open(&logger, cfg.out_dir, cfg.resume ? start_step : -1);
    RunInfo run_info;   // OUT/run.json: what compare_runs.py checks before comparing runs
    run_info_start(&run_info, argv[0], &cfg, grad_accum, world, rank, cfg.resume ? start_step : -1);

    double flops_per_step = gpt2_flops_per_token(&mc, cfg.T) * (double)cfg.total_batch_tokens;
    Progress progress;
    progress_begin(&progress, start_step, cfg.max_steps);
    for (int step = start_step; step <= cfg.max_steps; step++) {
        int last = step == cfg.max_steps;
        zero_trace_step(step);

        if (have_val && (step % cfg.val_every == 0 || last)) {
            uint64_t s0 = zero_trace_begin();
            float vl = validation_loss(&val, cfg.val_max_steps, batch_loss, &model, z ? gpt2_zero_sum_ranks : NULL, &glue);
            zero_trace_end("validation", s0);
            printf("val loss %f\n", vl);
            logger_val(&logger, step, vl);
        }
        if (cfg.sample_every > 0 && step > 0 && (step % cfg.sample_every == 0 || last))
            sample_text(&model, have_tok ? &tok : NULL, cfg.gen_tokens, cfg.seed, step, rank);
        if (cfg.checkpoint_every > 0 && step > start_step && (step % cfg.checkpoint_every == 0 || last)) {
            uint64_t s0 = zero_trace_begin();
            TrainState st = state;
            st.step = step;
            dataloader_get_state(&train, &st.data_epoch, &st.data_next_window);
            gpt2_cpu_release_activations(&model);   // idle between steps: the save uses their memory
            if (z) {
                if (zero_save(z, cfg.out_dir, step, &st, sizeof(st)) != 0)
                    die("rank %d: checkpoint at step %d failed (see above); the previous one is intact", rank, step);
                zero_prune(z, cfg.out_dir, cfg.ckpt_keep, cfg.ckpt_major);   // -nk, -nm
                printf("saved checkpoint %s/zero_%d/\n", cfg.out_dir, step);
                checkpoint_export_model(cfg.out_dir, step, rank, &mc, &glue.model, cfg.ckpt_keep,
                                        cfg.ckpt_major);
            } else {
                if (model.m == NULL) die("checkpoint at step %d before any update", step);
                checkpoint_save(cfg.out_dir, &st, model.params, model.m, model.v, model.num_parameters, cfg.ckpt_keep,
                                cfg.ckpt_major);
                printf("saved checkpoint %s/ckpt_%08d.bin and the model %s/model_%08d.bin\n", cfg.out_dir, step,
                       cfg.out_dir, step);
            }
            zero_trace_end("checkpoint", s0);
        }
        if (last) break;

        // One optimizer step: accumulate gradients over grad_accum micro-batches.
        double t0 = now_seconds();
        if (cfg.overfit_batch) dataloader_set_state(&train, 0, 0);   // -a 1: the first batch again
        if (z) zero_begin_step(z, grad_accum);
        else gpt2_cpu_zero_grad(&model);
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
        float lr = lr_schedule(cfg.lr_schedule, cfg.lr, step, cfg.warmup_steps, cfg.max_steps, cfg.final_lr_frac);
        float norm;
        int skipped;   // a NaN or infinite loss or norm stops the run, or with --nan-skip skips the update
        uint64_t s_opt = zero_trace_begin();
        if (z) {
            loss /= grad_accum;
            norm = gpt2_zero_step(&glue, &cfg, step, lr, &loss);   // mean loss over ranks; may skip
            skipped = nonfinite_step(&cfg, step, (float)loss, norm, rank) || outlier_skipped_last();
        } else {
            loss /= grad_accum;
            norm = gpt2_cpu_grad_norm(&model);
            skipped = nonfinite_step(&cfg, step, (float)loss, norm, rank) || outlier_step(&cfg, step, (float)loss, norm, rank);
            float clip = (cfg.grad_clip > 0 && norm > cfg.grad_clip) ? cfg.grad_clip / norm : 1.0f;
            if (!skipped)
                gpt2_cpu_update(&model, lr, cfg.beta1, cfg.beta2, cfg.adam_eps, cfg.weight_decay, clip, step + 1);
        }
        zero_trace_end("optimizer step", s_opt);
        double dt = now_seconds() - t0;
        char eta[96];
        progress_text(&progress, step, eta, sizeof(eta));
        if (!skipped)
            printf("step %4d/%d | loss %f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s | %.1f GFLOP/s | %s\n",
                   step + 1, cfg.max_steps, loss, norm, lr, 1e3 * dt, cfg.total_batch_tokens / dt,
                   flops_per_step / dt * 1e-9, eta);
        logger_train(&logger, step, (float)loss, lr, norm);
        if (z && step == start_step)
            gpt2_zero_write_report(&glue, cfg.out_dir, activation_bytes(&model), activation_host_bytes(&model));
        run_info_step(&run_info, dt);
    }

    nonfinite_summary(&cfg);   // --nan-skip: how many steps were skipped
    outlier_summary(&cfg, rank);   // -sl/-sg: how many updates were skipped
    // The final parameters: OUT/model_final.bin, as every trainer writes it (in the memory
    // the activations held: the export never needs more than training did).
    if (z) gpt2_zero_write_report(&glue, cfg.out_dir, activation_bytes(&model), activation_host_bytes(&model));
    gpt2_cpu_release_activations(&model);
    uint64_t s_export = zero_trace_begin();
    if (z) {
        size_t before = host_memory_now();
        int measured = host_memory_reset_peak() == 0;
        checkpoint_export_model(cfg.out_dir, -1, rank, &mc, &glue.model, 0, 0);
        if (measured)
            printf("host memory during the export: peak %.1f MiB, %.1f MiB resident before it\n",
                   host_memory_peak() / 1048576.0, before / 1048576.0);
    } else {
        char path[4096];
        checkpoint_model_path(path, sizeof(path), cfg.out_dir, -1);
        gpt2_model_file_write(path, &mc, model.params, GPT2_MODEL_FP32);
        printf("wrote %s\n", path);
    }
    zero_trace_end("model export", s_export);
    if (zero_trace_finish() != 0) die("rank %d: the trace could not be written (see above)", rank);

    run_info_finish(&run_info);
    logger_close(&logger);
    if (have_tok) tokenizer_free(&tok);
    if (have_val) dataloader_free(&val);
    dataloader_free(&train);
    if (z) {
        gpt2_zero_free(&glue);
        zero_backend_host_free(backend);
        zero_comm_free(comm);
    }
    gpt2_cpu_free(&model);
    return 0;
}
