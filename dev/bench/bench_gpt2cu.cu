// bench_gpt2cu.cu: training-step throughput of the CUDA GPT-2 (llmc/cuda/gpt2_cuda.h) on random
// tokens: tokens/s, ms/step, MFU and device memory, for GPT-2 124M (d12) and 350M (d24,
// C=1024, NH=16) at T=1024, with and without recompute, cuDNN attention. A step is
// zero_grad, forward, backward, AdamW update and the stats sync, as in training; warmup
// steps are not timed. B starts at 64 and halves until the model fits.
// -e on|off|both: cuBLASLt's fused epilogues (GELU, DGELU, bias gradient) on [default], off,
// or each in turn. -k: after each configuration, one more step timed by phase (forward,
// backward, update) on the GPU, and the LayerNorm kernels alone at the model's shapes, with
// the bytes they move per second against a device-to-device copy of the same size.
// -c LIST: the attention paths to run, as the trainers' --cudnn: 0 plain kernels, 1 cuDNN with
// its deterministic backward [default], 2 cuDNN with atomic dQ accumulation (llm.c's); "1,2"
// runs each configuration with both, the price of deterministic attention.
//
//   ./bench_gpt2cu [-B batch] [-T seq] [-s timed steps] [-w warmup steps] [-m d12,d24c1024h16]
//                  [-e on|off|both] [-c 0|1|2[,...]] [-k]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../llmc/cuda/cuda_utils.cuh"
#include "../../llmc/model/gpt2_config.h"
#include "../../llmc/cuda/gpt2_cuda.h"
#include "../../llmc/cuda/layernorm.cuh"
#include "../../llmc/cuda/mfu.h"
#include "../../llmc/numerics/rand.h"

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void usage(const char *argv0) {
    fprintf(stderr, "usage: %s [-B batch] [-T seq] [-s timed steps] [-w warmup steps] [-m model[,model...]] "
                    "[-e on|off|both] [-c 0|1|2[,...]] [-k]\n", argv0);
    exit(EXIT_FAILURE);
}

// Milliseconds of the work launch() queues on stream, averaged over reps after one untimed run.
template <typename F> static float time_ms(cudaStream_t stream, int reps, F launch) {
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    launch();
    CUDA_CHECK(cudaEventRecord(a, stream));
    for (int i = 0; i < reps; i++) launch();
    CUDA_CHECK(cudaEventRecord(b, stream));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
    return ms / reps;
}

static void print_kernel(const char *what, float ms, double bytes, double copy_gbs) {
    double gbs = bytes / (ms * 1e-3) / 1e9;
    printf("  %-34s %9.1f us %8.1f GB/s %5.0f%% of the copy\n", what, 1000.0 * ms, gbs,
           copy_gbs > 0 ? 100.0 * gbs / copy_gbs : 0.0);
}

// The phases of one training step, each timed on the model's stream, then the LayerNorm
// kernels at (B*T, C) against a device-to-device copy that reads and writes as many bytes.
static void bench_parts(GPT2Cuda *m, const int *inputs, const int *targets, int B, int T, int step) {
    cudaEvent_t ev[4];
    for (int i = 0; i < 4; i++) CUDA_CHECK(cudaEventCreate(&ev[i]));
    gpt2_cuda_zero_grad(m);
    CUDA_CHECK(cudaEventRecord(ev[0], m->stream));
    gpt2_cuda_forward(m, inputs, targets, B, T);
    CUDA_CHECK(cudaEventRecord(ev[1], m->stream));
    gpt2_cuda_backward(m, 1.0f / (B * T));
    CUDA_CHECK(cudaEventRecord(ev[2], m->stream));
    gpt2_cuda_update(m, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, step);
    CUDA_CHECK(cudaEventRecord(ev[3], m->stream));
    CUDA_CHECK(cudaEventSynchronize(ev[3]));
    float f = 0, b = 0, u = 0;
    CUDA_CHECK(cudaEventElapsedTime(&f, ev[0], ev[1]));
    CUDA_CHECK(cudaEventElapsedTime(&b, ev[1], ev[2]));
    CUDA_CHECK(cudaEventElapsedTime(&u, ev[2], ev[3]));
    printf("  phases: forward %.2f ms, backward %.2f ms, update %.2f ms\n", f, b, u);
    for (int i = 0; i < 4; i++) CUDA_CHECK(cudaEventDestroy(ev[i]));

    const int N = B * T, C = m->config.channels, reps = 20;
    const size_t nc = (size_t)N * C;
    bf16 *x, *y, *dout, *dinp, *w, *bias;
    float *mean, *rstd, *dw, *db, *scratch;
    CUDA_CHECK(cudaMalloc(&x, nc * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&y, nc * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&dout, nc * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&dinp, nc * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&w, C * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&bias, C * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&mean, N * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&rstd, N * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dw, C * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&db, C * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&scratch, layernorm_backward_scratch_floats(N, C) * sizeof(float)));
    // the model's own bf16 parameters and activations as data: finite values of a real scale
    CUDA_CHECK(cudaMemcpy(x, m->acts.residual, nc * sizeof(bf16), cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaMemcpy(dout, m->acts.residual, nc * sizeof(bf16), cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaMemset(dinp, 0, nc * sizeof(bf16)));
    CUDA_CHECK(cudaMemcpy(w, m->w[GPT2_LN1W][0], C * sizeof(bf16), cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaMemcpy(bias, m->w[GPT2_LN1B][0], C * sizeof(bf16), cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaMemset(dw, 0, C * sizeof(float)));
    CUDA_CHECK(cudaMemset(db, 0, C * sizeof(float)));
    CUDA_CHECK(cudaDeviceSynchronize());   // the copies and memsets above ran on stream 0, which m->stream does not wait for
    cudaStream_t s = m->stream;
    const double row_bytes = (double)nc * sizeof(bf16);
    float copy = time_ms(s, reps, [&] {
        CUDA_CHECK(cudaMemcpyAsync(y, x, nc * sizeof(bf16), cudaMemcpyDeviceToDevice, s));
    });
    const double copy_gbs = 2 * row_bytes / (copy * 1e-3) / 1e9;
    printf("  kernels at N=%d rows of C=%d (mean of %d runs):\n", N, C, reps);
    print_kernel("device-to-device copy", copy, 2 * row_bytes, copy_gbs);
    float fwd = time_ms(s, reps, [&] { layernorm_forward(y, mean, rstd, x, w, bias, N, C, s); });
    print_kernel("layernorm_forward", fwd, 2 * row_bytes + 8.0 * N, copy_gbs);
    for (int acc = 0; acc <= 1; acc++) {
        float bwd = time_ms(s, reps, [&] {
            layernorm_backward(dinp, dw, db, dout, x, mean, rstd, w, N, C, acc, scratch, s);
        });
        // x, dout (and dinp when accumulating) read, dinp written; partials written and read
        const double partials = 2.0 * sizeof(float) * layernorm_backward_scratch_floats(N, C);
        print_kernel(acc ? "layernorm_backward (accumulate)" : "layernorm_backward", bwd,
                     (3 + acc) * row_bytes + 8.0 * N + partials, copy_gbs);
    }
    void *bufs[] = {x, y, dout, dinp, w, bias, mean, rstd, dw, db, scratch};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) CUDA_CHECK(cudaFree(bufs[i]));
}

static void bench(const char *desc, int B0, int T, int recompute, int fused, int cudnn, int parts, int steps,
                  int warmup, double peak) {
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
    opt.use_cudnn = cudnn;
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
    m.matmul_fused = fused;

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
    printf("%-12s L=%-2d C=%-4d B=%-3d T=%d recompute %d attention %-8s epilogues %-5s | %8.1f ms/step %10.0f tok/s  MFU %s | "
           "model %.2f GiB, peak device in use %.2f GiB of %.2f | loss %.4f norm %.3f\n",
           desc, c.num_layers, c.channels, B, T, recompute, gpt2_cuda_attention_name(m.use_cudnn),
           fused ? "fused" : "apart", 1000.0 * elapsed / steps,
           tok_s, mfu_text, m.device_bytes / 1073741824.0, (total_b - free_b) / 1073741824.0, total_b / 1073741824.0, loss,
           norm);
    fflush(stdout);   // the result line stays when a deadline stops the parts below
    if (parts) bench_parts(&m, inputs, targets, B, T, warmup + steps + 1);
    fflush(stdout);
    gpt2_cuda_free(&m);
    free(inputs);
    free(targets);
}

int main(int argc, char **argv) {
    int B = 64, T = 1024, steps = 10, warmup = 3, parts = 0, fused_from = 1, fused_to = 1;
    int cudnn[3] = {GPT2_CUDNN_ON}, ncudnn = 1;
    char models[256] = "d12,d24c1024h16";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-k")) {
            parts = 1;
            continue;
        }
        if (i + 1 >= argc) usage(argv[0]);
        if (!strcmp(argv[i], "-B")) B = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-T")) T = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-s")) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-w")) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-m")) snprintf(models, sizeof(models), "%s", argv[++i]);
        else if (!strcmp(argv[i], "-e")) {
            const char *e = argv[++i];
            if (!strcmp(e, "on")) fused_from = fused_to = 1;
            else if (!strcmp(e, "off")) fused_from = fused_to = 0;
            else if (!strcmp(e, "both")) fused_from = 1, fused_to = 0;
            else usage(argv[0]);
        }
        else if (!strcmp(argv[i], "-c")) {
            // a comma-separated list of --cudnn values
            const char *p = argv[++i];
            ncudnn = 0;
            for (;;) {
                if (*p < '0' || *p > '2' || ncudnn == 3) usage(argv[0]);
                cudnn[ncudnn++] = *p++ - '0';
                if (*p == '\0') break;
                if (*p++ != ',') usage(argv[0]);
            }
        }
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
        for (int recompute = 0; recompute <= 2; recompute += 2)
            for (int fused = fused_from; fused >= fused_to; fused--)
                for (int a = 0; a < ncudnn; a++)
                    bench(tok, B, T, recompute, fused, cudnn[a], parts, steps, warmup, peak);
    return 0;
}
