/*
train_gpt2.cu: the unsharded CUDA trainer for GPT-2 (bf16 mixed precision). It is the
baseline that train_gpt2_zero.cu is compared against, and the same loop as the CPU
reference train_gpt2.c: parse flags, build the model, open the data, then per step
(validate, sample, checkpoint,) accumulate gradients over micro-batches, clip, AdamW.
The model and its kernels live in llmc/cuda/gpt2_cuda.cu.
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
#include "llmc/run/launch_env.h"
#include "llmc/run/logger.h"
#include "llmc/cuda/mfu.h"
#include "llmc/run/progress.h"
#include "llmc/numerics/rand.h"
#include "llmc/run/run_info.h"
#include "llmc/run/run_lock.h"
#include "llmc/run/sampler.h"
#include "llmc/run/schedule.h"
#include "llmc/data/tokenizer.h"
#include "llmc/run/step_skip.h"
#include "llmc/run/threads.h"
#include "llmc/run/train_state.h"
#include "llmc/run/train_common.h"
#include "llmc/run/train_args.h"
#include "llmc/run/train_config.h"
#include "llmc/utils.h"
#include "zero/cuda/trace_gpu.h"

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);   // progress shows as it happens, also in a file or pipe
    TrainConfig cfg;
    train_args_parse(&cfg, argc, argv, "cuda");
    launch_env_refuse_ranks(argv[0], "Data parallel training with ZeRO is train_gpt2_zero (mpirun -np N "
                            "./train_gpt2_zero -z 1 ...); or start one process.");
    const int rank = 0, world = 1;
    threads_apply(cfg.threads, 1, "one process", 1);   // OpenMP threads of the host's work (llmc/run/threads.h)
    run_lock_take(cfg.out_dir, 0);   // the output folder is this run's; temp files a crash left go
    gpt2_cuda_require_device();   // else exit 69: scripts/train.sh then trains on the CPU

    // --trace: recording starts before the model and the plugin, which name their tracks
    if (cfg.trace_path && zero_trace_start(cfg.trace_path, rank, world, cfg.trace_steps) != 0) exit(EXIT_FAILURE);
    zero_trace_thread("main (the model)");
    const int gpu_track = zero_trace_gpu_track("GPU: the model's passes");

    // The model: a descriptor builds a fresh init, anything else is an llm.c model file.
    GPT2Config mc;
    float *params = resolve_model_params(cfg.model, cfg.seed, &mc);
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    size_t num_params = gpt2_param_sizes(&mc, sizes);
    check_seq_len(&cfg, &mc);
    int grad_accum = resolve_grad_accum(&cfg, world);

    DataLoader train, val;
    int have_val = open_data(&cfg, &train, &val, rank, world, grad_accum, mc.vocab_size);
    Tokenizer tok;
    int eot;   // where samples start: the tokenizer's <|endoftext|>
    int have_tok = load_sampling_tokenizer(&tok, &cfg, mc.vocab_size, &eot);

    GPT2CudaOptions opt = {cfg.recompute, cfg.use_cudnn, cfg.seed, 0, cfg.act_checkpoint, cfg.act_offload,
                           cfg.tile_linear, cfg.tile_vocab, cfg.micro_grads && grad_accum > 1};
    gpt2_cuda_check_flags(&mc, &opt);
    GPT2Cuda model;
    gpt2_cuda_build(&model, &mc, params, cfg.B, cfg.T, &opt);
    free(params);   // the model holds them now
    printf("GPT-2 CUDA trainer: %d layers, %d channels, %d heads, vocab %d (padded %d), %zu parameters\n",
           mc.num_layers, mc.channels, mc.num_heads, mc.vocab_size, mc.padded_vocab_size, num_params);
    printf("train: %d shard(s), %lld windows; val: %s; attention: %s\n", train.num_shards,
           (long long)train.total_windows, have_val ? cfg.val_pattern : "off",
           gpt2_cuda_attention_name(model.use_cudnn));
    train_config_print(&cfg, grad_accum, world);
    gpt2_cuda_print_memory(&model, &cfg);

    // Resume: fp32 master, AdamW moments, step and data position from the latest checkpoint.
    TrainState state = train_state_new(&mc, &cfg, world, &train);
    int start_step = 0;
    if (!cfg.resume) checkpoint_new_run_check(cfg.out_dir);
    if (cfg.resume && checkpoint_latest(cfg.out_dir) < 0) {
        printf("-y 1: no checkpoint in '%s' yet: starting fresh\n", cfg.out_dir);
        cfg.resume = 0;
    }
    if (cfg.resume) {
        TrainState saved;
        const int latest = checkpoint_latest(cfg.out_dir);
        gpt2_cuda_checkpoint_load(&model, cfg.out_dir, latest, &saved);
        char ckpt[4200];
        checkpoint_path(ckpt, sizeof(ckpt), cfg.out_dir, latest);
        start_step = train_state_resume(&state, &saved, cfg.max_steps, &train, ckpt);
        printf("resumed from '%s' at step %d\n", cfg.out_dir, start_step);
    }
    Logger logger;
    logger_open(&logger, cfg.out_dir, cfg.resume ? start_step : -1);
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

        if (have_val && (step % cfg.val_every == 0 || last)) {
            float vl = gpt2_cuda_validate(&model, &val, cfg.val_max_steps, NULL, NULL);
            printf("val loss %f\n", vl);
            logger_val(&logger, step, vl);
        }
        if (cfg.sample_every > 0 && step > 0 && (step % cfg.sample_every == 0 || last))
            gpt2_cuda_sample(&model, have_tok ? &tok : NULL, eot, cfg.gen_tokens, cfg.seed, step, 1);
        if (cfg.checkpoint_every > 0 && step > start_step && (step % cfg.checkpoint_every == 0 || last)) {
            TrainState st = train_state_at(&state, step, &train);
            gpt2_cuda_checkpoint_save(&model, cfg.out_dir, &st, cfg.ckpt_keep, cfg.ckpt_major);
        }
        if (last) break;

        // One optimizer step: accumulate gradients over grad_accum micro-batches.
        double t0 = now_seconds();
        if (cfg.overfit_batch) dataloader_set_state(&train, 0, 0);   // -a 1: the first batch again
        gpt2_cuda_zero_grad(&model);
        float loss_scale = 1.0f / ((float)cfg.B * cfg.T * grad_accum);
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
        // The loss and norm before the update: a NaN or infinite one stops the run, or with
        // --nan-skip skips the update.
        ZeroTracePass opt_span = zero_trace_pass_begin(model.stream, gpu_track);
        gpt2_cuda_grad_norm(&model, cfg.grad_clip);
        float loss, norm;
        gpt2_cuda_step_stats(&model, &loss, &norm);
        int skipped = nonfinite_step(&cfg, step, loss, norm, rank) || outlier_step(&cfg, step, loss, norm, rank);
        if (!skipped)
            gpt2_cuda_update(&model, lr, cfg.beta1, cfg.beta2, cfg.adam_eps, cfg.weight_decay, cfg.grad_clip, step + 1);
        train_state_stepped(&state, step, skipped);
        zero_trace_pass_end(opt_span, model.stream, "optimizer step");
        gpt2_cuda_wait_device();   // the step's time holds its own queued update, as llm.c's does
        double dt = now_seconds() - t0;
        double tok_s = cfg.total_batch_tokens / dt;
        char eta[96];
        progress_text(&progress, step, eta, sizeof(eta));
        if (!skipped)
            printf("step %4d/%d | loss %f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s | MFU %.1f%% | %s\n",
                   step + 1, cfg.max_steps, loss, norm, lr, 1e3 * dt, tok_s,
                   100.0 * mfu(flops_per_token, tok_s, peak), eta);
        logger_train(&logger, step, loss, lr, norm);
        run_info_step(&run_info, dt);
    }

    nonfinite_summary(&cfg);   // --nan-skip: how many steps were skipped
    outlier_summary(&cfg, rank);   // -sl/-sg: how many updates were skipped
    // The final parameters: OUT/model_final.bin, as every trainer writes it.
    ZeroTracePass export_span = zero_trace_pass_begin(model.stream, gpu_track);
    gpt2_cuda_export_final(&model, cfg.out_dir);
    zero_trace_pass_end(export_span, model.stream, "model export");
    if (zero_trace_finish() != 0) die("rank %d: the trace could not be written (see above)", rank);

    run_info_finish(&run_info);
    logger_close(&logger);
    if (have_tok) tokenizer_free(&tok);
    if (have_val) dataloader_free(&val);
    dataloader_free(&train);
    gpt2_cuda_free(&model);
    return 0;
}
