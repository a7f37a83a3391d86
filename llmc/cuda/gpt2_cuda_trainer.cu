// gpt2_cuda_trainer.cu: validation, samples and memory figures of the CUDA model, shared
// by both CUDA trainers (gpt2_cuda_trainer.h).
#include "gpt2_cuda_trainer.h"

#include <stdio.h>
#include <stdlib.h>

#include <cudnn.h>

#include "attention_cudnn_version.h"
#include "../model/gpt2_model_file.h"
#include "matmul_cublaslt.h"
#include "../run/memory_table.h"
#include "../numerics/rand.h"
#include "../run/sampler.h"
#include "../run/train_common.h"
#include "../utils.h"

static float batch_loss(void *model, const DataLoader *val) {
    GPT2Cuda *m = (GPT2Cuda *)model;
    gpt2_cuda_reset_loss(m);
    gpt2_cuda_forward(m, val->inputs, val->targets, val->B, val->T);
    float loss, norm;
    gpt2_cuda_step_stats(m, &loss, &norm);
    return loss;
}

float gpt2_cuda_validate(GPT2Cuda *model, DataLoader *val, int max_batches, SumRanks sum_ranks, void *ctx) {
    return validation_loss(val, max_batches, batch_loss, model, sum_ranks, ctx);
}

void gpt2_cuda_sample(GPT2Cuda *model, const Tokenizer *tok, int eot, int gen_tokens, uint64_t seed, int step, int print) {
    int T = model->T;
    if (gen_tokens + 1 > T) gen_tokens = T - 1;
    int *tokens = (int *)calloc_check((size_t)T, sizeof(int));
    tokens[0] = eot;
    if (print) printf("generating:\n---\n");
    for (int t = 1; t <= gen_tokens; t++) {
        // One sequence; positions past t are ignored thanks to causal attention.
        gpt2_cuda_forward(model, tokens, NULL, 1, T);
        const float *logits = gpt2_cuda_logits_row(model, 0, t - 1);
        float coin = rng_uniform(seed, RNG_STREAM_SAMPLE, ((uint64_t)step << 32) | (uint64_t)t);
        tokens[t] = sample_from_logits(logits, model->config.vocab_size, coin);
        if (print) print_token(tok, tokens[t]);
        fflush(stdout);
    }
    if (print) printf("\n---\n");
    free(tokens);
}

void gpt2_cuda_checkpoint_save(GPT2Cuda *model, const char *out_dir, const TrainState *st, int keep, int major) {
    size_t n = model->num_parameters;
    float *p = (float *)malloc_check(n * sizeof(float)), *m = (float *)malloc_check(n * sizeof(float));
    float *v = (float *)malloc_check(n * sizeof(float));
    gpt2_cuda_get_master(model, p);
    gpt2_cuda_get_opt_state(model, m, v);
    checkpoint_save(out_dir, st, p, m, v, n, keep, major);
    printf("saved checkpoint %s/ckpt_%08d.bin and the model %s/model_%08d.bin\n", out_dir, st->step, out_dir, st->step);
    free(p);
    free(m);
    free(v);
}

void gpt2_cuda_checkpoint_load(GPT2Cuda *model, const char *out_dir, int step, TrainState *saved) {
    size_t n = model->num_parameters;
    float *p = (float *)malloc_check(n * sizeof(float)), *m = (float *)malloc_check(n * sizeof(float));
    float *v = (float *)malloc_check(n * sizeof(float));
    checkpoint_load(out_dir, step, saved, p, m, v, n);
    gpt2_cuda_set_state_at(model, p, m, v, saved->last_t);   // the bf16 weights of its last applied update
    free(p);
    free(m);
    free(v);
}

void gpt2_cuda_export_final(GPT2Cuda *model, const char *out_dir) {
    char path[4096];
    checkpoint_model_path(path, sizeof(path), out_dir, -1);
    float *p = (float *)malloc_check(model->num_parameters * sizeof(float));
    gpt2_cuda_get_master(model, p);
    gpt2_model_file_write(path, &model->config, p, GPT2_MODEL_FP32);
    printf("wrote %s\n", path);
    free(p);
}

void gpt2_cuda_print_memory(const GPT2Cuda *model, const TrainConfig *cfg) {
    GPT2CudaMemory mem;
    gpt2_cuda_memory(&model->config, cfg->B, cfg->T, &model->opt, model->use_cudnn, model->cudnn_workspace_bytes, &mem);
    MemoryTable t = {{0}, {0}, 0, 0};
    t.device[MEMORY_PARAMS] = mem.weights;
    t.device[MEMORY_GRADS] = mem.grads;
    t.device[MEMORY_OPTIM] = mem.optimizer;
    t.device[MEMORY_ACTS] = mem.total - mem.params;
    t.host[MEMORY_ACTS] = mem.host_activations;   // act_offload's pinned block inputs
    memory_table_print("unsharded bf16 model (fp32 master weights and AdamW moments) on one GPU", &t, "device", "host");
    memory_table_write_json(cfg->out_dir, "train_gpt2cu", "live", &t);
}

int gpt2_cuda_require_device(void) {
    int num_devices = 0;
    cudaError_t err = cudaGetDeviceCount(&num_devices);
    if (err == cudaSuccess && num_devices > 0) return num_devices;
    fprintf(stderr, "error: no usable CUDA device (%s); ./train_gpt2 trains on the CPU\n",
            err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    fflush(stderr);
    exit(GPT2_CUDA_EXIT_NO_DEVICE);
}

void gpt2_cuda_wait_device(void) { CUDA_CHECK(cudaDeviceSynchronize()); }

void gpt2_cuda_check_flags(const GPT2Config *c, const GPT2CudaOptions *opt) {
    char why[256];
    if (gpt2_cuda_check_options(c, opt, why, sizeof(why)) != 0)
        die("-r %d --act-checkpoint %d --act-offload %d --tile-linear %d --tile-vocab %d: %s", opt->recompute,
            opt->act_checkpoint, opt->act_offload, opt->tile_linear, opt->tile_vocab, why);
}

size_t gpt2_cuda_activation_bytes(const GPT2Cuda *model) { return model->device_bytes + matmul_workspace_bytes(); }

size_t gpt2_cuda_predicted_activation_bytes(const GPT2Config *c, const TrainConfig *cfg, size_t *host_bytes,
                                            size_t *file_bytes) {
    *file_bytes = 0;
    char why[256];
    if (gpt2_cuda_check_shape(c, cfg->B, cfg->T, why, sizeof(why)) != 0)
        printf("warning: the CUDA model cannot run this: %s; a live run stops at start-up (the sizes below are "
               "what its buffers would take)\n", why);
    // micro_grads 0: the gradients are the plugin's (its stages 2-3 add whole micro-step gradients)
    GPT2CudaOptions opt = {cfg->recompute, cfg->use_cudnn, cfg->seed, 1, cfg->act_checkpoint, cfg->act_offload,
                           cfg->tile_linear, cfg->tile_vocab, 0};
    gpt2_cuda_check_flags(c, &opt);
    // cuDNN's attention where this runtime cuDNN's rules allow it (the device's, sm_80 or
    // newer, is assumed: a dry run may have no GPU)
    char no_cudnn[256] = "";
    int cudnn = attention_cudnn_rules(cudnnGetVersion(), cfg->T, c->channels / c->num_heads, no_cudnn, sizeof no_cudnn)
                    ? cfg->use_cudnn : GPT2_CUDNN_OFF;
    if (cfg->use_cudnn && !cudnn) printf("attention: the plain kernels, as a live run would take them: %s\n", no_cudnn);
    size_t ws = cudnn ? gpt2_cuda_cudnn_workspace_estimate(c, cfg->B, cfg->T, cudnn) : 0;
    GPT2CudaMemory mem;
    gpt2_cuda_memory(c, cfg->B, cfg->T, &opt, cudnn, ws, &mem);
    const double MiB = 1048576.0;
    printf("model memory for B=%d T=%d, recompute %d, attention by %s: %.2f MiB per rank (activations %.2f, attention "
           "%.2f, scratch %.2f, cuBLASLt %.2f MiB)%s\n", cfg->B, cfg->T, cfg->recompute, gpt2_cuda_attention_name(cudnn),
           mem.total / MiB, mem.activations / MiB, mem.attention / MiB, mem.scratch / MiB, mem.cublaslt / MiB,
           cudnn ? "; cuDNN's own engine workspace is known only at run time and not included" : "");
    *host_bytes = mem.host_activations;
    if (mem.host_activations) printf("offloaded block inputs in pinned host memory: %.2f MiB per rank\n", mem.host_activations / MiB);
    return mem.total;
}
