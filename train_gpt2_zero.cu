/*
train_gpt2_zero.cu: the CUDA trainer for GPT-2 with the ZeRO plugin (zero/), data
parallel over ranks (mpirun, srun, or RANK/WORLD_SIZE with ZERO_BOOTSTRAP_TCP/FILE).

`diff train_gpt2.cu train_gpt2_zero.cu` is the guide for a fork: the "ZeRO glue"
section turns the model's parameter slices into the plugin's tensor table and its unit
hooks into fetch/release/grads_ready; the model is built without parameters of its own
(the plugin owns working params, gradients, master weights and AdamW state); the step
ends with zero_step instead of the model's update; checkpoints are sharded.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llmc/atomic_file.h"
#include "llmc/checkpoint.h"
#include "llmc/dataloader.h"
#include "llmc/gpt2_config.h"
#include "llmc/gpt2_cuda.h"
#include "llmc/gpt2_model_file.h"
#include "llmc/logger.h"
#include "llmc/matmul_cublaslt.h"
#include "llmc/mfu.h"
#include "llmc/progress.h"
#include "llmc/rand.h"
#include "llmc/run_info.h"
#include "llmc/sampler.h"
#include "llmc/schedule.h"
#include "llmc/tokenizer.h"
#include "llmc/train_common.h"
#include "llmc/train_config.h"
#include "llmc/utils.h"
#include "zero/backend_cuda.h"
#include "zero/comm.h"
#include "zero/zero.h"

// ----------------------------------------------------------------------------
// ZeRO glue: the model's parameter slices become the plugin's tensors, and the
// model's unit hooks fetch/release parameters and hand over finished gradients.

typedef struct {
    Zero *z;
    GPT2Cuda *model;
    GPT2Config config;
    GPT2Slice *slices;        // tensor table, in the plugin's order
    size_t tensor_offset[GPT2_NUM_PARAM_TENSORS];
    GPT2ModelFile *file;      // initial values from a model file, or NULL: fresh init
    uint64_t seed;
} ZeroGlue;

static void glue_fetch(void *ctx, int unit, int is_backward) {
    ZeroGlue *g = (ZeroGlue *)ctx;
    const ZeroUnitView *v = zero_fetch(g->z, unit, is_backward);
    for (int k = 0; k < v->count; k++) {
        const GPT2Slice *s = &g->slices[v->tensors[k]];
        g->model->w[s->tensor][s->layer] = (__nv_bfloat16 *)v->params[k];
        if (is_backward) g->model->g[s->tensor][s->layer] = (float *)v->grads[k];
    }
}

static void glue_release(void *ctx, int unit, int is_backward) {
    zero_release(((ZeroGlue *)ctx)->z, unit, is_backward);
}

static void glue_grads_ready(void *ctx, int unit) { zero_grads_ready(((ZeroGlue *)ctx)->z, unit); }

// Initial values of a range of one slice: only what this rank owns is ever asked for.
static void glue_init(void *ctx, int tensor, size_t offset, size_t count, float *out) {
    ZeroGlue *g = (ZeroGlue *)ctx;
    const GPT2Slice *s = &g->slices[tensor];
    if (g->file) {
        gpt2_model_file_read_range(g->file, s->offset + offset, count, out);
    } else {
        size_t within = s->offset - g->tensor_offset[s->tensor] + offset;
        gpt2_init_range(&g->config, s->tensor, within, count, out, g->seed);
    }
}

// The plugin's tensor table: one entry per GPT-2 parameter slice (g->slices).
static ZeroTensor *zero_tensor_table(ZeroGlue *g, const GPT2Config *c) {
    g->config = *c;
    gpt2_param_offsets(c, g->tensor_offset);
    int n = gpt2_num_slices(c);
    g->slices = (GPT2Slice *)malloc_check((size_t)n * sizeof(GPT2Slice));
    gpt2_slices(c, g->slices);
    ZeroTensor *tensors = (ZeroTensor *)calloc_check((size_t)n, sizeof(ZeroTensor));
    for (int i = 0; i < n; i++) {
        tensors[i].name = g->slices[i].name;
        tensors[i].numel = g->slices[i].numel;
        tensors[i].decay = g->slices[i].decay;
        tensors[i].num_units = g->slices[i].num_units;
        for (int u = 0; u < g->slices[i].num_units; u++) tensors[i].units[u] = g->slices[i].units[u];
    }
    return tensors;
}

// bf16 working parameters (refreshed from the fp32 master by stochastic rounding) and
// the fp32 gradients the model's matmuls accumulate.
static ZeroConfig zero_config_from(const TrainConfig *cfg) {
    ZeroConfig zc;
    zero_config_defaults(&zc);
    zc.stage = cfg->zero_stage;
    zc.param_dtype = ZERO_BF16;
    zc.grad_dtype = ZERO_F32;
    // -1: left to the plugin, which sizes them from the model (ZERO_AUTO)
    zc.bucket_elems = cfg->zero_bucket < 0 ? ZERO_AUTO : (size_t)cfg->zero_bucket;
    zc.prefetch_elems = cfg->zero_prefetch < 0 ? ZERO_AUTO : (size_t)cfg->zero_prefetch;
    zc.max_live_elems = (size_t)cfg->zero_max_live;
    zc.persist_elems = (size_t)cfg->zero_persist;
    zc.node_size = cfg->node_size;
    zc.timeout_s = cfg->zero_timeout;
    zc.seed = cfg->seed;
    return zc;
}

static Zero *zero_attach(ZeroGlue *g, GPT2Cuda *model, const TrainConfig *cfg, ZeroComm *comm,
                         const ZeroBackend *backend, GPT2ModelFile *file) {
    g->model = model;
    g->file = file;
    g->seed = cfg->seed;
    ZeroTensor *tensors = zero_tensor_table(g, &model->config);
    ZeroConfig zc = zero_config_from(cfg);
    g->z = zero_init(tensors, gpt2_num_slices(&g->config), gpt2_num_units(&g->config), &zc, comm, backend,
                     glue_init, g);
    free(tensors);
    if (g->z == NULL) exit(EXIT_FAILURE);   // zero_init printed why: that stays the last line
    g->file = NULL;  // read only during zero_init
    model->hooks = (GPT2CudaHooks){g, glue_fetch, glue_release, glue_grads_ready};
    return g->z;
}

// The fp32 master of one slice, gathered from the shards (collective): what the model
// export streams to the file one slice at a time.
static void glue_gather_slice(void *ctx, int slice, float *out) {
    zero_gather_master(((ZeroGlue *)ctx)->z, slice, out);
}

// "Activations": all the device memory the model holds (activations, workspaces, cuBLASLt).
static void set_activation_bytes(Zero *z, const GPT2Cuda *model) {
    zero_report_set_activation_bytes(z, model->device_bytes + matmul_workspace_bytes(), 0);
}

// OUT/zero_report.json: measured memory by kind and bytes sent per step (collective).
static void write_zero_report(Zero *z, const GPT2Cuda *model, const TrainConfig *cfg) {
    set_activation_bytes(z, model);
    char path[4096];
    snprintf(path, sizeof(path), "%s/zero_report.json", cfg->out_dir);
    if (zero_report_write(z, path, NULL) != 0) die("cannot write '%s' (see above)", path);
}

// What gpt2_cuda_build would allocate for this run (no GPU needed), printed. cuDNN is
// assumed to take every shape it is asked for with head sizes that are multiples of 8.
static size_t predicted_model_bytes(const GPT2Config *mc, const TrainConfig *cfg) {
    char why[256];
    if (gpt2_cuda_check_shape(mc, cfg->B, cfg->T, why, sizeof(why)) != 0)
        printf("warning: the CUDA model cannot run this: %s; a live run stops at start-up (the sizes below are "
               "what its buffers would take)\n", why);
    GPT2CudaOptions opt = {cfg->recompute, cfg->use_cudnn, cfg->seed, 1};
    int cudnn = cfg->use_cudnn && (mc->channels / mc->num_heads) % 8 == 0;
    size_t ws = cudnn ? gpt2_cuda_cudnn_workspace_estimate(mc, cfg->B, cfg->T) : 0;
    GPT2CudaMemory mem;
    gpt2_cuda_memory(mc, cfg->B, cfg->T, &opt, cudnn, ws, &mem);
    const double MiB = 1048576.0;
    printf("model memory for B=%d T=%d, recompute %d, %s attention: %.2f MiB per rank (activations %.2f, attention "
           "%.2f, scratch %.2f, cuBLASLt %.2f MiB)%s\n", cfg->B, cfg->T, cfg->recompute, cudnn ? "cuDNN" : "plain",
           mem.total / MiB, mem.activations / MiB, mem.attention / MiB, mem.scratch / MiB, mem.cublaslt / MiB,
           cudnn ? "; cuDNN's own engine workspace is known only at run time and not included" : "");
    return mem.total;
}

// --dry-run: the plugin's prediction of per-rank memory and traffic, without training,
// with what the model allocates. Returns the exit status: 2 when a rank does not fit
// --gpu-mem.
static int zero_dry_run_gpt2(TrainConfig *cfg) {
    double t0 = now_seconds();
    GPT2Config mc;
    GPT2ModelFile file;
    if (resolve_model_open(cfg->model, &mc, &file)) gpt2_model_file_close(&file);  // the shape is all it needs
    if (cfg->T > mc.max_seq_len) die("-t %d exceeds the model's maximum sequence length %d", cfg->T, mc.max_seq_len);
    int grad_accum = resolve_grad_accum(cfg, cfg->dry_run_world);
    ZeroGlue g;
    ZeroTensor *tensors = zero_tensor_table(&g, &mc);
    ZeroConfig zc = zero_config_from(cfg);
    make_dirs(cfg->out_dir);
    char path[4096];
    snprintf(path, sizeof(path), "%s/zero_report.json", cfg->out_dir);
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    printf("model %s: %zu parameters\n", cfg->model, gpt2_param_sizes(&mc, sizes));
    ZeroDryRunModel model = {predicted_model_bytes(&mc, cfg), 0, (size_t)cfg->gpu_mem};
    int rc = zero_dry_run(tensors, gpt2_num_slices(&mc), gpt2_num_units(&mc), &zc, cfg->dry_run_world, grad_accum,
                          &model, path);
    if (rc < 0) die("dry run failed (see above)");
    free(tensors);
    free(g.slices);
    print_cost("the dry run", t0);
    return rc == 1 ? 2 : 0;
}

// Whether out_dir holds a checkpoint to resume from: rank 0 looks and every rank gets its
// answer; a malformed latest_zero counts as one (zero_load then says why).
static int have_checkpoint(Zero *z, int rank, const char *out_dir) {
    double found = rank == 0 && zero_latest(out_dir) != -1;
    zero_allreduce_sum_f64(z, &found, 1);
    return found != 0;
}

// Mean loss over validation batches from the start of the val set. max_batches counts
// batches of B sequences over all ranks, so every world size sees the same windows.
static float validate(GPT2Cuda *model, DataLoader *val, int max_batches, Zero *z, int world) {
    dataloader_reset(val);
    int64_t available = val->total_windows / val->B;
    int n = (max_batches < 0 || max_batches > available) ? (int)available : max_batches;
    int local = n / world > 0 ? n / world : 1;
    gpt2_cuda_reset_loss(model);
    for (int i = 0; i < local; i++) {
        dataloader_next_batch(val);
        gpt2_cuda_forward(model, val->inputs, val->targets, val->B, val->T);
    }
    float loss, norm;
    gpt2_cuda_step_stats(model, &loss, &norm);
    double sum = loss;
    zero_allreduce_sum_f64(z, &sum, 1);
    return (float)(sum / world);
}

// Generates gen_tokens after an EOT prompt; the coins depend only on (seed, step).
// Every rank runs the forward (stage 3 gathers), rank 0 prints.
static void sample_text(GPT2Cuda *model, const Tokenizer *tok, int gen_tokens, uint64_t seed, int step, int rank) {
    int T = model->T;
    if (gen_tokens + 1 > T) gen_tokens = T - 1;
    int *tokens = (int *)calloc_check((size_t)T, sizeof(int));
    tokens[0] = GPT2_EOT;
    if (rank == 0) printf("generating:\n---\n");
    for (int t = 1; t <= gen_tokens; t++) {
        // One sequence; positions past t are ignored thanks to causal attention.
        gpt2_cuda_forward(model, tokens, NULL, 1, T);
        const float *logits = gpt2_cuda_logits_row(model, 0, t - 1);
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
    train_config_parse(&cfg, argc, argv, "cuda-zero");
    if (cfg.zero_stage < 0) cfg.zero_stage = 0;
    if (cfg.dry_run) return zero_dry_run_gpt2(&cfg);
    int num_devices = 0;
    cudaError_t dev_err = cudaGetDeviceCount(&num_devices);
    if (dev_err != cudaSuccess || num_devices == 0)
        die("no CUDA device (%s); ./train_gpt2 trains on the CPU",
            dev_err != cudaSuccess ? cudaGetErrorString(dev_err) : "0 devices");
    // The world: every rank of mpirun / srun, or RANK/WORLD_SIZE from the environment.
    // Start-up failures of the plugin: it has printed why, and its message stays the last line.
    ZeroComm *comm = zero_comm_init(&argc, &argv);
    if (comm == NULL) exit(EXIT_FAILURE);
    const int rank = comm->rank, world = comm->world;
    if (zero_cuda_select_device(comm) < 0) exit(EXIT_FAILURE);
    // MFU is per GPU: ranks of a machine share its GPUs round-robin (local rank % devices).
    const int ranks_per_gpu = comm->local_size > num_devices ? (comm->local_size + num_devices - 1) / num_devices : 1;
    // Only rank 0 prints the run's figures; every rank prints its errors.
    if (rank != 0 && freopen("/dev/null", "w", stdout) == NULL) die("rank %d: cannot silence stdout", rank);
    // Temp files a crash left in the output folder go before anything is written (rank 0
    // alone: the folder is shared, and the others wait for it in zero_init's collectives).
    if (rank == 0) atomic_file_remove_stale(cfg.out_dir);

    // The model: a descriptor builds a fresh init, anything else is an llm.c model file,
    // of which each rank reads only the ranges it owns (inside zero_init).
    GPT2Config mc;
    GPT2ModelFile file;
    int from_file = resolve_model_open(cfg.model, &mc, &file);
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    size_t num_params = gpt2_param_sizes(&mc, sizes);
    if (cfg.T > mc.max_seq_len) die("-t %d exceeds the model's maximum sequence length %d", cfg.T, mc.max_seq_len);
    int grad_accum = resolve_grad_accum(&cfg, world);

    DataLoader train, val;
    int have_val = open_data(&cfg, &train, &val, rank, world, grad_accum, mc.vocab_size);
    Tokenizer tok;
    int have_tok = load_sampling_tokenizer(&tok, &cfg);

    // The model keeps activations only; the plugin allocates everything per parameter.
    GPT2CudaOptions opt = {cfg.recompute, cfg.use_cudnn, cfg.seed, 1};
    GPT2Cuda model;
    gpt2_cuda_build(&model, &mc, NULL, cfg.B, cfg.T, &opt);
    const ZeroBackend *backend = zero_backend_cuda(comm, model.stream);
    if (backend == NULL) exit(EXIT_FAILURE);
    ZeroGlue glue;
    Zero *z = zero_attach(&glue, &model, &cfg, comm, backend, from_file ? &file : NULL);
    if (from_file) {
        double read_all = (double)file.bytes_read;
        zero_allreduce_sum_f64(z, &read_all, 1);
        print_model_file_read(&file, read_all);
        gpt2_model_file_close(&file);
    }
    printf("GPT-2 CUDA trainer with ZeRO stage %d on %d ranks: %d layers, %d channels, %d heads, vocab %d (padded %d), %zu parameters\n",
           cfg.zero_stage, world, mc.num_layers, mc.channels, mc.num_heads, mc.vocab_size, mc.padded_vocab_size,
           num_params);
    printf("train: %d shard(s), %lld windows; val: %s; attention: %s\n", train.num_shards,
           (long long)train.total_windows, have_val ? cfg.val_pattern : "off",
           model.use_cudnn ? "cuDNN" : "plain kernels");
    train_config_print(&cfg, grad_accum, world);

    // Resume: every rank reads the element ranges it owns now (any saved world/stage).
    TrainState state = {0, mc, cfg.seed, 0, 0, cfg.B, cfg.T, world, cfg.total_batch_tokens};
    int start_step = 0;
    if (cfg.resume && !have_checkpoint(z, rank, cfg.out_dir)) {
        printf("-y 1: no checkpoint in '%s' yet: starting fresh\n", cfg.out_dir);
        cfg.resume = 0;
    }
    if (cfg.resume) {
        TrainState saved;
        if (zero_load(z, cfg.out_dir, -1, &saved, sizeof(saved)) != 0)
            die("rank %d: cannot resume from '%s' (see above)", rank, cfg.out_dir);
        checkpoint_check_compatible(&saved, &state, "resume");
        dataloader_set_state(&train, saved.data_epoch, saved.data_next_window);
        start_step = saved.step;
        printf("resumed from '%s' at step %d (saved by %d ranks), run %s\n", cfg.out_dir, start_step, saved.world,
               zero_run_id(z));
    } else {
        printf("run %s (a new run id: sharded checkpoints of this run carry it)\n", zero_run_id(z));
    }
    set_activation_bytes(z, &model);
    zero_report_print(z);
    Logger logger;
    memset(&logger, 0, sizeof(logger));
    if (rank == 0) logger_open(&logger, cfg.out_dir, cfg.resume ? start_step : -1);
    RunInfo run_info;   // OUT/run.json: what compare_runs.py checks before comparing runs
    run_info_start(&run_info, argv[0], &cfg, grad_accum, world, rank);

    double flops_per_token = gpt2_flops_per_token(&mc, cfg.T);
    char gpu_name[256];
    double peak = mfu_peak_bf16_flops(gpu_name);
    printf("GPU: %s, peak bf16 %.0f TFLOP/s%s\n", gpu_name, peak * 1e-12, peak > 0 ? "" : " (unknown: no MFU)");
    Progress progress;
    progress_begin(&progress, start_step, cfg.max_steps);
    for (int step = start_step; step <= cfg.max_steps; step++) {
        int last = step == cfg.max_steps;

        if (have_val && (step % cfg.val_every == 0 || last)) {
            float vl = validate(&model, &val, cfg.val_max_steps, z, world);
            printf("val loss %f\n", vl);
            logger_val(&logger, step, vl);
        }
        if (cfg.sample_every > 0 && step > 0 && (step % cfg.sample_every == 0 || last))
            sample_text(&model, have_tok ? &tok : NULL, cfg.gen_tokens, cfg.seed, step, rank);
        if (cfg.checkpoint_every > 0 && step > start_step && (step % cfg.checkpoint_every == 0 || last)) {
            TrainState st = state;
            st.step = step;
            dataloader_get_state(&train, &st.data_epoch, &st.data_next_window);
            if (zero_save(z, cfg.out_dir, step, &st, sizeof(st)) != 0)
                die("rank %d: checkpoint at step %d failed (see above); the previous one is intact", rank, step);
            zero_prune(z, cfg.out_dir, 2);  // keep this one and the previous
            printf("saved checkpoint %s/zero_%d/\n", cfg.out_dir, step);
            checkpoint_export_model(cfg.out_dir, step, rank, &mc, glue_gather_slice, &glue);
        }
        if (last) break;

        // One optimizer step: accumulate gradients over grad_accum micro-batches.
        double t0 = now_seconds();
        zero_begin_step(z, grad_accum);
        gpt2_cuda_zero_grad(&model);  // the loss accumulator; gradients belong to the plugin
        float loss_scale = 1.0f / ((float)cfg.total_batch_tokens);
        for (int micro = 0; micro < grad_accum; micro++) {
            dataloader_next_batch(&train);
            gpt2_cuda_forward(&model, train.inputs, train.targets, cfg.B, cfg.T);
            gpt2_cuda_backward(&model, loss_scale);
        }
        float lr = lr_cosine(cfg.lr, step, cfg.warmup_steps, cfg.max_steps, cfg.final_lr_frac);
        // The loss before the update: a NaN or infinite loss or norm stops the run, or with
        // --nan-skip skips the update (zero_step skips a non-finite norm itself).
        float loss, unused;
        gpt2_cuda_step_stats(&model, &loss, &unused);
        double global_loss = loss;
        zero_allreduce_sum_f64(z, &global_loss, 1);
        loss = (float)(global_loss / world);
        ZeroStepArgs step_args = {lr, cfg.beta1, cfg.beta2, cfg.adam_eps, cfg.weight_decay, cfg.grad_clip, step + 1};
        float norm = zero_step_maybe_skip(z, &step_args, !isfinite(loss));
        int skipped = nonfinite_step(&cfg, step, loss, norm, rank);
        double dt = now_seconds() - t0;
        double tok_s = cfg.total_batch_tokens / dt;
        char eta[96];
        progress_text(&progress, step, eta, sizeof(eta));
        if (!skipped)
            printf("step %4d/%d | loss %f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s | MFU %.1f%% | %s\n",
                   step + 1, cfg.max_steps, loss, norm, lr, 1e3 * dt, tok_s,
                   100.0 * mfu(flops_per_token, tok_s * ranks_per_gpu / world, peak), eta);
        logger_train(&logger, step, loss, lr, norm);
        if (step == start_step) write_zero_report(z, &model, &cfg);
        run_info_step(&run_info, dt);
    }

    // The final parameters: OUT/model_final.bin, as every trainer writes it.
    write_zero_report(z, &model, &cfg);
    checkpoint_export_model(cfg.out_dir, -1, rank, &mc, glue_gather_slice, &glue);

    run_info_finish(&run_info);
    logger_close(&logger);
    if (have_tok) tokenizer_free(&tok);
    if (have_val) dataloader_free(&val);
    dataloader_free(&train);
    zero_free(z);
    free(glue.slices);
    // The backend's main stream is model.stream: free the backend (it syncs that stream)
    // before gpt2_cuda_free destroys it.
    zero_backend_cuda_free(backend);
    gpt2_cuda_free(&model);
    zero_comm_free(comm);
    return 0;
}
