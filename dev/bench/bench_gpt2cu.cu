// bench_gpt2cu.cu: training-step throughput of the CUDA GPT-2 (llmc/cuda/gpt2_cuda.h) on random
// tokens: tokens/s, ms/step, MFU and device memory, for GPT-2 124M (d12) and 350M (d24,
// C=1024, NH=16) at T=1024, with and without recompute, cuDNN attention. A step is
// zero_grad, forward, backward, AdamW update and the stats sync, as in training; warmup
// steps are not timed. B starts at 64 and halves until the model fits.
//
//   ./bench_gpt2cu [-B batch] [-T seq] [-s timed steps] [-w warmup steps] [-m d12,d24c1024h16]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../llmc/cuda/cuda_utils.cuh"
#include "../../llmc/model/gpt2_config.h"
#include "../../llmc/cuda/gpt2_cuda.h"
#include "../../llmc/cuda/mfu.h"
#include "../../llmc/numerics/rand.h"

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void usage(const char *argv0) {
    fprintf(stderr, "usage: %s [-B batch] [-T seq] [-s timed steps] [-w warmup steps] [-m model[,model...]]\n", argv0);
    exit(EXIT_FAILURE);
}

static void bench(const char *desc, int B0, int T, int recompute, int steps, int warmup, double peak) {
    GPT2Config c;
    char err[256];
    if (gpt2_config_from_descriptor(desc, &c, err, sizeof(err)) != 0) {
        fprintf(stderr, "error: %s\n", err);
        exit(EXIT_FAILURE);
    }
    if (T > c.max_seq_len) T = c.max_seq_len;
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    size_t n = gpt2_param_sizes(&c, sizes);
    float *params = (float *)malloc(n * sizeof(float));
    if (!params) { fprintf(stderr, "error: out of host memory\n"); exit(EXIT_FAILURE); }
    gpt2_init_params(&c, params, 1);

    GPT2CudaOptions opt;
    memset(&opt, 0, sizeof(opt)); // external_params and any later field: off
    opt.recompute = recompute;
    opt.use_cudnn = 1;
    opt.seed = 1;
    GPT2Cuda m;
    int B = B0;
    while (gpt2_cuda_try_build(&m, &c, params, B, T, &opt) != 0) {
        if (B == 1) {
            printf("%s recompute %d: does not fit even at B=1\n", desc, recompute);
            free(params);
            return;
        }
        printf("%s recompute %d: B=%d does not fit, trying B=%d\n", desc, recompute, B, B / 2);
        B /= 2;
    }
    free(params);

    const int BT = B * T;
    int *inputs = (int *)malloc(BT * sizeof(int)), *targets = (int *)malloc(BT * sizeof(int));
    for (int i = 0; i < BT; i++) {
        inputs[i] = (int)rng_below(5, 1, i, c.vocab_size);
        targets[i] = (int)rng_below(5, 2, i, c.vocab_size);
    }
    float loss = 0, norm = 0;
    double t0 = 0;
    for (int step = 1; step <= warmup + steps; step++) {
        if (step == warmup + 1) t0 = now_seconds();
        gpt2_cuda_zero_grad(&m);
        gpt2_cuda_forward(&m, inputs, targets, B, T);
        gpt2_cuda_backward(&m, 1.0f / BT);
        gpt2_cuda_update(&m, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, step);
        gpt2_cuda_step_stats(&m, &loss, &norm);
    }
    double elapsed = now_seconds() - t0;
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    double tok_s = (double)BT * steps / elapsed;
    double u = mfu(gpt2_flops_per_token(&c, T), tok_s, peak);
    char mfu_text[32];
    if (peak > 0) snprintf(mfu_text, sizeof(mfu_text), "%.1f%%", 100.0 * u);
    else snprintf(mfu_text, sizeof(mfu_text), "unknown (GPU not in table)");
    printf("%-12s L=%-2d C=%-4d B=%-3d T=%d recompute %d attention %-8s | %8.1f ms/step %10.0f tok/s  MFU %s | "
           "model %.2f GiB, peak device in use %.2f GiB of %.2f | loss %.4f norm %.3f\n",
           desc, c.num_layers, c.channels, B, T, recompute, m.use_cudnn ? "cuDNN" : "fallback", 1000.0 * elapsed / steps,
           tok_s, mfu_text, m.device_bytes / 1073741824.0, (total_b - free_b) / 1073741824.0, total_b / 1073741824.0, loss,
           norm);
    fflush(stdout);
    gpt2_cuda_free(&m);
    free(inputs);
    free(targets);
}

int main(int argc, char **argv) {
    int B = 64, T = 1024, steps = 10, warmup = 3;
    char models[256] = "d12,d24c1024h16";
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) usage(argv[0]);
        if (!strcmp(argv[i], "-B")) B = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-T")) T = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-s")) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-w")) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-m")) snprintf(models, sizeof(models), "%s", argv[++i]);
        else usage(argv[0]);
    }
    if (B <= 0 || T <= 0 || steps <= 0 || warmup < 0) usage(argv[0]);
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        printf("SKIP: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "device count is 0");
        return 0;
    }
    char name[256];
    double peak = mfu_peak_bf16_flops(name);
    if (peak > 0) printf("device: %s, peak bf16 dense %.0f TFLOP/s\n", name, peak / 1e12);
    else printf("device: %s, peak bf16 unknown (MFU not reported)\n", name);
    printf("timed steps %d after %d warmup steps; random tokens\n", steps, warmup);

    for (char *tok = strtok(models, ","); tok; tok = strtok(NULL, ","))
        for (int recompute = 0; recompute <= 2; recompute += 2) bench(tok, B, T, recompute, steps, warmup, peak);
    return 0;
}
