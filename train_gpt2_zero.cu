/*
train_gpt2_zero.cu: train_gpt2.cu with the ZeRO plugin (zero/), data parallel over ranks
(mpirun, srun, or RANK/WORLD_SIZE with ZERO_BOOTSTRAP_TCP/FILE). `diff train_gpt2.cu
train_gpt2_zero.cu` is the guide for a fork: start the ranks, build the model without
parameters (the plugin owns them, their gradients and AdamW state), attach the plugin
(gpt2_zero.h), step with the plugin, save sharded checkpoints.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llmc/atomic_file.h"
#include "llmc/run/checkpoint.h"
#include "llmc/data/dataloader.h"
#include "llmc/model/gpt2_config.h"
#include "llmc/cuda/gpt2_cuda.h"
#include "llmc/cuda/gpt2_cuda_trainer.h"
#include "llmc/model/gpt2_model_file.h"
#include "llmc/run/logger.h"
#include "llmc/cuda/mfu.h"
#include "llmc/run/progress.h"
#include "llmc/numerics/rand.h"
#include "llmc/run/run_info.h"
#include "llmc/run/sampler.h"
#include "llmc/run/schedule.h"
#include "llmc/run/threads.h"
#include "llmc/data/tokenizer.h"
#include "llmc/run/step_skip.h"
#include "llmc/run/train_state.h"
#include "llmc/run/train_common.h"
#include "llmc/run/train_args.h"
#include "llmc/run/train_config.h"
#include "llmc/utils.h"
#include "gpt2_zero.h"
#include "zero/cuda/backend_cuda.h"
#include "zero/cuda/trace_gpu.h"

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);   // progress shows as it happens, also in a file or pipe
    TrainConfig cfg;
    train_args_parse(&cfg, argc, argv, "cuda-zero");
    // bf16 working parameters (refreshed from the fp32 master by stochastic rounding), and
    // the fp32 gradients the model's matmuls accumulate
    if (cfg.dry_run) return gpt2_zero_dry_run(&cfg, ZERO_BF16, ZERO_F32, gpt2_cuda_predicted_activation_bytes, NULL);
    const int num_devices = gpt2_cuda_require_device();   // else exit 69: scripts/train.sh then trains on the CPU
    ZeroComm *comm = gpt2_zero_world(&argc, &argv, &cfg);   // ranks; only rank 0 prints
    const int rank = comm->rank, world = comm->world;
    // OpenMP threads (host AdamW of the offload tiers): cores / ranks on this node unless
    // OMP_NUM_THREADS says (llmc/run/threads.h)
    threads_apply(cfg.threads, comm->local_size,
                  comm->launch == ZERO_LAUNCH_MPI ? "MPI_COMM_TYPE_SHARED" : "LOCAL_WORLD_SIZE or WORLD_SIZE", rank == 0);
    if (zero_cuda_select_device(comm) < 0) exit(EXIT_FAILURE);   // it printed why
    // MFU is per GPU: ranks of a machine share its GPUs round-robin (local rank % devices).
    const int ranks_per_gpu = comm->local_size > num_devices ? (comm->local_size + num_devices - 1) / num_devices : 1;

    // --trace: recording starts before the model and the plugin, which name their tracks
    if (cfg.trace_path && zero_trace_start(cfg.trace_path, rank, world, cfg.trace_steps) != 0) exit(EXIT_FAILURE);
    zero_trace_thread("main (the model)");
    const int gpu_track = zero_trace_gpu_track("GPU: the model's passes");

    // The model: a descriptor builds a fresh init, anything else is an llm.c model file.
    GPT2Config mc;
    GPT2ModelFile file;
    int from_file = resolve_model_open(cfg.model, &mc, &file);
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    size_t num_params = gpt2_param_sizes(&mc, sizes);
    check_seq_len(&cfg, &mc);
    int grad_accum = resolve_grad_accum(&cfg, world);

    DataLoader train, val;
    int have_val = open_data(&cfg, &train, &val, rank, world, grad_accum, mc.vocab_size);
    Tokenizer tok;
    int eot;   // where samples start: the tokenizer's <|endoftext|>
    int have_tok = load_sampling_tokenizer(&tok, &cfg, mc.vocab_size, &eot);

    // micro_grads 0: the gradients are the plugin's (its stages 2-3 add whole micro-step gradients)
    GPT2CudaOptions opt = {cfg.recompute, cfg.use_cudnn, cfg.seed, 1, cfg.act_checkpoint, cfg.act_offload,
                           cfg.tile_linear, cfg.tile_vocab, 0};
    gpt2_cuda_check_flags(&mc, &opt);
    GPT2Cuda model;
    gpt2_cuda_build(&model, &mc, NULL, cfg.B, cfg.T, &opt);
    const ZeroBackend *backend = zero_backend_cuda(comm, model.stream);
    if (backend == NULL) exit(EXIT_FAILURE);
    GPT2Zero glue;
    ZeroConfig zc = gpt2_zero_config(&cfg, ZERO_BF16, ZERO_F32);
    gpt2_zero_attach(&glue, &mc, &zc, comm, backend, cfg.seed, from_file ? &file : NULL, gpt2_cuda_slots(&model));
    Zero *z = glue.z;
    if (from_file) gpt2_model_file_close(&file);
    printf("GPT-2 CUDA trainer: %d layers, %d channels, %d heads, vocab %d (padded %d), %zu parameters\n",
           mc.num_layers, mc.channels, mc.num_heads, mc.vocab_size, mc.padded_vocab_size, num_params);
    printf("ZeRO stage %d on %d ranks\n", cfg.zero_stage, world);
    printf("train: %d shard(s), %lld windows; val: %s; attention: %s\n", train.num_shards,
           (long long)train.total_windows, have_val ? cfg.val_pattern : "off",
           gpt2_cuda_attention_name(model.use_cudnn));
    train_config_print(&cfg, grad_accum, world);

    // Resume: every rank reads the element ranges it owns now (any saved world/stage).
    TrainState state = train_state_new(&mc, &cfg, world, &train);
    int start_step = 0;
    if (!gpt2_zero_have_checkpoint(&glue, cfg.out_dir, cfg.resume) && cfg.resume) {
        printf("-y 1: no checkpoint in '%s' yet: starting fresh\n", cfg.out_dir);
        cfg.resume = 0;
    }
    if (cfg.resume) {
        TrainState saved;
        char ckpt[4200];
        gpt2_zero_load_checkpoint(&glue, cfg.out_dir, &saved, ckpt, sizeof(ckpt));
        start_step = train_state_resume(&state, &saved, cfg.max_steps, &train, ckpt);
        printf("resumed from '%s' at step %d (saved by %d ranks), run %s\n", cfg.out_dir, start_step, saved.world,
               zero_run_id(z));
    } else {
        printf("run %s (a new run id: sharded checkpoints of this run carry it)\n", zero_run_id(z));
    }
    zero_report_set_activation_bytes(z, gpt2_cuda_activation_bytes(&model), model.host_act_bytes);
    zero_report_print(z);
    Logger logger;
    memset(&logger, 0, sizeof(logger));
    if (rank == 0) logger_open(&logger, cfg.out_dir, cfg.resume ? start_step : -1);
    RunInfo run_info;   // OUT/run.json: what compare_runs.py checks before comparing runs
    run_info_start(&run_info, argv[0], &cfg, grad_accum, world, rank, cfg.resume ? start_step : -1);

    double flops_per_token = gpt2_flops_per_token(&mc, cfg.T);
    char gpu_name[256];
    double peak = mfu_peak_bf16_flops(gpu_name);
    printf("GPU: %s, peak bf16 %.0f TFLOP/s%s\n", gpu_name, peak * 1e-12, peak > 0 ? "" : " (unknown: no MFU)");
    Progress progress;
    progress_begin(&progress, start_step, cfg.max_steps);
    for (int step = start_step; step <= cfg.max_steps; step++) {
        int last = step == cfg.max_steps;
        if (!last) zero_trace_step(step);   // the last pass (final validation, export) counts in the last step

        int save = cfg.checkpoint_every > 0 && step > start_step && (step % cfg.checkpoint_every == 0 || last);
        if (save || last) zero_land_update(z);   // --dpu: the parameters a resume from here starts with
        if (have_val && (step % cfg.val_every == 0 || last)) {
            float vl = gpt2_cuda_validate(&model, &val, cfg.val_max_steps, gpt2_zero_sum_ranks, &glue);
            printf("val loss %f\n", vl);
            logger_val(&logger, step, vl);
        }
        if (cfg.sample_every > 0 && step > 0 && (step % cfg.sample_every == 0 || last))
            gpt2_cuda_sample(&model, have_tok ? &tok : NULL, eot, cfg.gen_tokens, cfg.seed, step, rank == 0);
        if (save) {
            TrainState st = train_state_at(&state, step, &train);
            if (zero_save(z, cfg.out_dir, step, &st, sizeof(st)) != 0)
                die("rank %d: checkpoint at step %d failed (see above); the previous one is intact", rank, step);
            zero_prune(z, cfg.out_dir, cfg.ckpt_keep, cfg.ckpt_major);   // -nk, -nm
            printf("saved checkpoint %s/zero_%d/\n", cfg.out_dir, step);
            checkpoint_export_model(cfg.out_dir, step, rank, &mc, &glue.model, cfg.ckpt_keep,
                                    cfg.ckpt_major);
        }
        if (last) break;

        // One optimizer step: accumulate gradients over grad_accum micro-batches.
        double t0 = now_seconds();
        if (cfg.overfit_batch) dataloader_set_state(&train, 0, 0);   // -a 1: the first batch again
        zero_begin_step(z, grad_accum);
        gpt2_cuda_zero_grad(&model);  // the loss accumulator; gradients belong to the plugin
        float loss_scale = 1.0f / ((float)cfg.total_batch_tokens);
        for (int micro = 0; micro < grad_accum; micro++) {
            dataloader_next_batch(&train);
            ZeroTracePass fwd = zero_trace_pass_begin(model.stream, gpu_track);
            gpt2_cuda_forward(&model, train.inputs, train.targets, cfg.B, cfg.T);
            zero_trace_pass_end(fwd, model.stream, "forward pass");
            ZeroTracePass bwd = zero_trace_pass_begin(model.stream, gpu_track);
            gpt2_cuda_backward(&model, loss_scale);
            zero_trace_pass_end(bwd, model.stream, "backward pass");
        }
        float lr = lr_schedule(cfg.lr_schedule, cfg.lr, step, cfg.warmup_steps, cfg.max_steps, cfg.final_lr_frac);
        // The loss before the update: a NaN or infinite loss or norm stops the run, or with
        // --nan-skip skips the update (zero_step skips a non-finite norm itself).
        float local_loss, unused;
        gpt2_cuda_step_stats(&model, &local_loss, &unused);
        double mean_loss = local_loss;
        ZeroTracePass opt_span = zero_trace_pass_begin(model.stream, gpu_track);
        float norm = gpt2_zero_step(&glue, &cfg, step, lr, &mean_loss);
        zero_trace_pass_end(opt_span, model.stream, "optimizer step");
        float loss = (float)mean_loss;
        int skipped = nonfinite_step(&cfg, step, loss, norm, rank) || outlier_skipped_last();
        train_state_stepped(&state, step, skipped);
        gpt2_cuda_wait_device();   // the step's time holds its own queued update, as llm.c's does
        double dt = now_seconds() - t0;
        double tok_s = cfg.total_batch_tokens / dt;
        char eta[96];
        progress_text(&progress, step, eta, sizeof(eta));
        if (!skipped)
            printf("step %4d/%d | loss %f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s | MFU %.1f%% | %s\n",
                   step + 1, cfg.max_steps, loss, norm, lr, 1e3 * dt, tok_s,
                   100.0 * mfu(flops_per_token, tok_s * ranks_per_gpu / world, peak), eta);
        logger_train(&logger, step, loss, lr, norm);
        if (step == start_step) gpt2_zero_write_report(&glue, cfg.out_dir, gpt2_cuda_activation_bytes(&model), model.host_act_bytes);
        run_info_step(&run_info, dt);
    }

    nonfinite_summary(&cfg);   // --nan-skip: how many steps were skipped
    outlier_summary(&cfg, rank);   // -sl/-sg: how many updates were skipped
    // The final parameters: OUT/model_final.bin, as every trainer writes it.
    gpt2_zero_write_report(&glue, cfg.out_dir, gpt2_cuda_activation_bytes(&model), model.host_act_bytes);
    ZeroTracePass export_span = zero_trace_pass_begin(model.stream, gpu_track);
    checkpoint_export_model(cfg.out_dir, -1, rank, &mc, &glue.model, 0, 0);
    zero_trace_pass_end(export_span, model.stream, "model export");
    if (zero_trace_finish() != 0) die("rank %d: the trace could not be written (see above)", rank);

    run_info_finish(&run_info);
    logger_close(&logger);
    if (have_tok) tokenizer_free(&tok);
    if (have_val) dataloader_free(&val);
    dataloader_free(&train);
    gpt2_zero_free(&glue);
    // The backend's main stream is model.stream: free the backend (it syncs that stream)
    // before gpt2_cuda_free destroys it.
    zero_backend_cuda_free(backend);
    gpt2_cuda_free(&model);
    zero_comm_free(comm);
    return 0;
}
