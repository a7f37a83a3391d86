// gpu_attention_cudnn.cu: checks llmc/cuda/attention_cudnn.cu (cuDNN fused causal attention) against a
// plain host reference computed in double precision from the same bf16 inputs.
//
//   nvcc -O3 -std=c++17 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
//        -Illmc -I. dev/test/cuda/gpu_attention_cudnn.cu llmc/cuda/attention_cudnn.cu
//        -L/usr/local/cuda/lib64 -lcudnn -o gpu_attention_cudnn      (one command line)
//
// Output: one "PASS name ..." / "FAIL name ..." line per check, then "N passed, N failed"; exit
// status 1 when anything failed. Without a usable GPU it prints "SKIP: ..." and exits 0.
//
// What is checked, per shape: out (B, T, NH, HS), stats (B, NH, T) log-sum-exp, and the three
// slots of dqkv (B, T, 3, NH, HS). Errors are max |gpu - ref| / max |ref| over each tensor (stats:
// absolute error over max(1, max |ref|)); bf16 outputs and bf16 P / dS inside the fused kernels
// make 2e-2 a comfortable bound. Outputs are pre-filled with NaN so an unwritten element fails.
// Each shape runs the deterministic backward (the trainers' default), whose second run must
// give the first's dqkv bit for bit; the first shape also runs the atomic one (--cudnn 2).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../llmc/cuda/attention_cudnn.h"
#include "../../../llmc/cuda/attention_cudnn_version.h"
#include "../../../llmc/utils.h"

#define CUDA_CHECK(call)                                                                                   \
    do {                                                                                                   \
        cudaError_t err_ = (call);                                                                         \
        if (err_ != cudaSuccess) die("CUDA error in %s: %s", #call, cudaGetErrorString(err_));              \
    } while (0)

static int g_passed = 0, g_failed = 0;

static uint64_t g_rng = 0x2545F4914F6CDD1DULL;
static float uniform(float amp) {  // xorshift64*, uniform in [-amp, amp)
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    uint64_t r = g_rng * 0x2545F4914F6CDD1DULL;
    return amp * (2.0f * (float)((r >> 40) * (1.0 / 16777216.0)) - 1.0f);
}

static void report(const char *name, const char *what, double err, double tol, int nan_count) {
    if (nan_count == 0 && err < tol) {
        printf("PASS %s %s (err %.3e < %.1e)\n", name, what, err, tol);
        g_passed++;
    } else {
        printf("FAIL %s %s: err %.3e (tol %.1e), %d non-finite values\n", name, what, err, tol, nan_count);
        g_failed++;
    }
}

// Reference causal attention for one (b, h), in double. q/k/v/dout read from the (B, T, 3, NH, HS)
// and (B, T, NH, HS) layouts; results written to the same layouts.
static void reference(const float *qkv, const float *dout, int B, int T, int NH, int HS, double *out, double *lse,
                      double *dqkv) {
    const int C = NH * HS;
    const double scale = 1.0 / sqrt((double)HS);
    // (b, h) pairs write disjoint columns: one per thread, each with its own rows p and dp
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            double *p = (double *)malloc_check(sizeof(double) * T);
            double *dp = (double *)malloc_check(sizeof(double) * T);
            const float *base = qkv + (size_t)b * T * 3 * C + (size_t)h * HS;
#define Q(t) (base + (size_t)(t) * 3 * C)
#define K(t) (base + (size_t)(t) * 3 * C + C)
#define V(t) (base + (size_t)(t) * 3 * C + 2 * C)
            double *dbase = dqkv + (size_t)b * T * 3 * C + (size_t)h * HS;
#define DQ(t) (dbase + (size_t)(t) * 3 * C)
#define DK(t) (dbase + (size_t)(t) * 3 * C + C)
#define DV(t) (dbase + (size_t)(t) * 3 * C + 2 * C)
            for (int i = 0; i < T; i++) {
                // forward row i
                double m = -INFINITY;
                for (int j = 0; j <= i; j++) {
                    double s = 0;
                    for (int d = 0; d < HS; d++) s += (double)Q(i)[d] * K(j)[d];
                    p[j] = s * scale;
                    if (p[j] > m) m = p[j];
                }
                double z = 0;
                for (int j = 0; j <= i; j++) {
                    p[j] = exp(p[j] - m);
                    z += p[j];
                }
                for (int j = 0; j <= i; j++) p[j] /= z;
                lse[((size_t)b * NH + h) * T + i] = m + log(z);
                double *o = out + ((size_t)b * T + i) * C + (size_t)h * HS;
                for (int d = 0; d < HS; d++) {
                    double acc = 0;
                    for (int j = 0; j <= i; j++) acc += p[j] * V(j)[d];
                    o[d] = acc;
                }
                // backward row i: dP_ij = dO_i . v_j ; D_i = dO_i . O_i ; dS_ij = P_ij (dP_ij - D_i)
                const float *g = dout + ((size_t)b * T + i) * C + (size_t)h * HS;
                double D = 0;
                for (int d = 0; d < HS; d++) D += (double)g[d] * o[d];
                for (int j = 0; j <= i; j++) {
                    double s = 0;
                    for (int d = 0; d < HS; d++) s += (double)g[d] * V(j)[d];
                    dp[j] = p[j] * (s - D) * scale;  // dS scaled, w.r.t. the raw q.k products
                }
                for (int j = 0; j <= i; j++) {
                    for (int d = 0; d < HS; d++) {
                        DQ(i)[d] += dp[j] * K(j)[d];
                        DK(j)[d] += dp[j] * Q(i)[d];
                        DV(j)[d] += p[j] * g[d];
                    }
                }
            }
#undef Q
#undef K
#undef V
#undef DQ
#undef DK
#undef DV
            free(p);
            free(dp);
        }
    }
}

// max |gpu - ref| / max |ref| over a strided set of slots; counts non-finite gpu values.
struct Err {
    double err;
    int nan_count;
};
static Err compare_bf16(const __nv_bfloat16 *gpu, const double *ref, size_t rows, size_t row_stride, size_t offset,
                        size_t width, bool absolute_floor_one) {
    double max_diff = 0, max_ref = 0;
    int nans = 0;
    for (size_t r = 0; r < rows; r++) {
        for (size_t c = 0; c < width; c++) {
            size_t idx = r * row_stride + offset + c;
            double g = (double)__bfloat162float(gpu[idx]);
            if (!isfinite(g)) {
                nans++;
                continue;
            }
            double d = fabs(g - ref[idx]);
            if (d > max_diff) max_diff = d;
            if (fabs(ref[idx]) > max_ref) max_ref = fabs(ref[idx]);
        }
    }
    if (absolute_floor_one && max_ref < 1) max_ref = 1;
    Err e = {max_ref > 0 ? max_diff / max_ref : max_diff, nans};
    return e;
}

static void run_case(const char *shape, int B, int T, int NH, int HS, int atomic_dq) {
    char name[96];
    snprintf(name, sizeof(name), "%s%s", shape, atomic_dq ? " atomic dQ" : "");
    const int C = NH * HS;
    const size_t n_qkv = (size_t)B * T * 3 * C, n_out = (size_t)B * T * C, n_stats = (size_t)B * NH * T;

    size_t ws_bytes = 0;
    const int built = attention_cudnn_prepare(B, T, NH, HS, atomic_dq, &ws_bytes);
    if (built && built != 1 + atomic_dq) {
        printf("FAIL %s: attention_cudnn_prepare built the %s backward (returned %d)\n", name,
               built == 2 ? "atomic" : "deterministic", built);
        g_failed++;
    }
    if (!built) {
        if (cudnnGetVersion() < 91501 && T % 128 != 0) {
            printf("case %s skipped: cuDNN %zu runtime needs T %% 128 == 0 for the fused backward\n", name,
                   (size_t)cudnnGetVersion());
            return;
        }
        printf("FAIL %s: attention_cudnn_prepare returned 0 (reason printed above)\n", name);
        g_failed++;
        return;
    }

    // inputs: q, k in [-2, 2) for a peaked softmax, v and dout in [-1, 1); rounded to bf16 once,
    // and the reference reads exactly those rounded values
    __nv_bfloat16 *h_qkv = (__nv_bfloat16 *)malloc_check(n_qkv * sizeof(__nv_bfloat16));
    __nv_bfloat16 *h_dout = (__nv_bfloat16 *)malloc_check(n_out * sizeof(__nv_bfloat16));
    float *f_qkv = (float *)malloc_check(n_qkv * sizeof(float));
    float *f_dout = (float *)malloc_check(n_out * sizeof(float));
    for (size_t i = 0; i < n_qkv; i++) {
        const int slot = (int)((i / C) % 3);  // 0 q, 1 k, 2 v
        h_qkv[i] = __float2bfloat16(uniform(slot == 2 ? 1.0f : 2.0f));
        f_qkv[i] = __bfloat162float(h_qkv[i]);
    }
    for (size_t i = 0; i < n_out; i++) {
        h_dout[i] = __float2bfloat16(uniform(1.0f));
        f_dout[i] = __bfloat162float(h_dout[i]);
    }

    __nv_bfloat16 *d_qkv, *d_out, *d_dout, *d_dqkv;
    float *d_stats;
    void *d_ws;
    CUDA_CHECK(cudaMalloc(&d_qkv, n_qkv * sizeof(__nv_bfloat16)));
    CUDA_CHECK(cudaMalloc(&d_dqkv, n_qkv * sizeof(__nv_bfloat16)));
    CUDA_CHECK(cudaMalloc(&d_out, n_out * sizeof(__nv_bfloat16)));
    CUDA_CHECK(cudaMalloc(&d_dout, n_out * sizeof(__nv_bfloat16)));
    CUDA_CHECK(cudaMalloc(&d_stats, n_stats * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_ws, ws_bytes > 0 ? ws_bytes : 16));
    CUDA_CHECK(cudaMemcpy(d_qkv, h_qkv, n_qkv * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_dout, h_dout, n_out * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice));
    // all-ones bytes: NaN in both bf16 and fp32, so anything left unwritten shows up
    CUDA_CHECK(cudaMemset(d_out, 0xFF, n_out * sizeof(__nv_bfloat16)));
    CUDA_CHECK(cudaMemset(d_dqkv, 0xFF, n_qkv * sizeof(__nv_bfloat16)));
    CUDA_CHECK(cudaMemset(d_stats, 0xFF, n_stats * sizeof(float)));
    CUDA_CHECK(cudaMemset(d_ws, 0xFF, ws_bytes > 0 ? ws_bytes : 16));
    // cudaMemset runs on the legacy default stream, which a non-blocking stream does not wait for
    CUDA_CHECK(cudaDeviceSynchronize());

    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    attention_cudnn_forward(d_out, d_stats, d_qkv, B, T, NH, HS, atomic_dq, d_ws, stream);
    attention_cudnn_backward(d_dqkv, d_dout, d_qkv, d_out, d_stats, B, T, NH, HS, atomic_dq, d_ws, stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaGetLastError());

    __nv_bfloat16 *g_out = (__nv_bfloat16 *)malloc_check(n_out * sizeof(__nv_bfloat16));
    __nv_bfloat16 *g_dqkv = (__nv_bfloat16 *)malloc_check(n_qkv * sizeof(__nv_bfloat16));
    float *g_stats = (float *)malloc_check(n_stats * sizeof(float));
    CUDA_CHECK(cudaMemcpy(g_out, d_out, n_out * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(g_dqkv, d_dqkv, n_qkv * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(g_stats, d_stats, n_stats * sizeof(float), cudaMemcpyDeviceToHost));
    if (!atomic_dq) {   // the deterministic backward again, over a NaN-filled dqkv: the same bits
        __nv_bfloat16 *again = (__nv_bfloat16 *)malloc_check(n_qkv * sizeof(__nv_bfloat16));
        CUDA_CHECK(cudaMemsetAsync(d_dqkv, 0xFF, n_qkv * sizeof(__nv_bfloat16), stream));
        attention_cudnn_backward(d_dqkv, d_dout, d_qkv, d_out, d_stats, B, T, NH, HS, 0, d_ws, stream);
        CUDA_CHECK(cudaStreamSynchronize(stream));
        CUDA_CHECK(cudaMemcpy(again, d_dqkv, n_qkv * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
        size_t differ = 0;
        for (size_t i = 0; i < n_qkv; i++) differ += memcmp(&again[i], &g_dqkv[i], sizeof(again[i])) != 0;
        if (differ == 0) {
            printf("PASS %s dqkv the same bits in a second backward\n", name);
            g_passed++;
        } else {
            printf("FAIL %s dqkv: a second backward differs in %zu of %zu elements\n", name, differ, n_qkv);
            g_failed++;
        }
        free(again);
    }

    double *r_out = (double *)calloc_check(n_out, sizeof(double));
    double *r_lse = (double *)calloc_check(n_stats, sizeof(double));
    double *r_dqkv = (double *)calloc_check(n_qkv, sizeof(double));
    reference(f_qkv, f_dout, B, T, NH, HS, r_out, r_lse, r_dqkv);

    const double tol = 2e-2;
    Err e_out = compare_bf16(g_out, r_out, (size_t)B * T, C, 0, C, false);
    report(name, "out", e_out.err, tol, e_out.nan_count);

    double max_diff = 0, max_ref = 1;
    int nans = 0;
    for (size_t i = 0; i < n_stats; i++) {
        if (!isfinite(g_stats[i])) {
            nans++;
            continue;
        }
        max_diff = fmax(max_diff, fabs((double)g_stats[i] - r_lse[i]));
        max_ref = fmax(max_ref, fabs(r_lse[i]));
    }
    report(name, "stats", max_diff / max_ref, tol, nans);

    const char *slot_names[3] = {"dq", "dk", "dv"};
    for (int slot = 0; slot < 3; slot++) {
        Err e = compare_bf16(g_dqkv, r_dqkv, (size_t)B * T, (size_t)3 * C, (size_t)slot * C, C, false);
        report(name, slot_names[slot], e.err, tol, e.nan_count);
    }

    CUDA_CHECK(cudaStreamDestroy(stream));
    CUDA_CHECK(cudaFree(d_qkv));
    CUDA_CHECK(cudaFree(d_dqkv));
    CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaFree(d_dout));
    CUDA_CHECK(cudaFree(d_stats));
    CUDA_CHECK(cudaFree(d_ws));
    free(h_qkv);
    free(h_dout);
    free(f_qkv);
    free(f_dout);
    free(g_out);
    free(g_dqkv);
    free(g_stats);
    free(r_out);
    free(r_lse);
    free(r_dqkv);
}

int main(void) {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        printf("SKIP: no CUDA device (%s)\n", err != cudaSuccess ? cudaGetErrorString(err) : "device count 0");
        return 0;
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    if (prop.major < 8) {
        printf("SKIP: cuDNN fused attention needs sm_80 or newer (device 0 is sm_%d%d)\n", prop.major, prop.minor);
        return 0;
    }
    CUDA_CHECK(cudaSetDevice(0));
    printf("device: %s (sm_%d%d), cuDNN runtime %zu, compiled against %d\n", prop.name, prop.major, prop.minor,
           (size_t)cudnnGetVersion(), (int)CUDNN_VERSION);
    if (!attention_cudnn_backward_ok(cudnnGetVersion())) {
        // a runtime with a known bad backward: prepare must refuse it (the model falls back)
        size_t ws = 0;
        int refused = !attention_cudnn_prepare(2, 128, 4, 64, 0, &ws);
        printf("%s cuDNN %zu refused by attention_cudnn_prepare (known bad bf16 backward)\n",
               refused ? "PASS" : "FAIL", (size_t)cudnnGetVersion());
        attention_cudnn_destroy();
        printf("%d passed, %d failed\n", refused, !refused);
        return refused ? 0 : 1;
    }

    run_case("B2_T64_NH4_HS64", 2, 64, 4, 64, 0);
    run_case("B2_T64_NH4_HS64", 2, 64, 4, 64, 1);
    run_case("B4_T256_NH12_HS64", 4, 256, 12, 64, 0);
    run_case("B1_T1024_NH12_HS64", 1, 1024, 12, 64, 0);
    // the heads of the larger models the GPU runs train (d48: 25 of 64; d50c4096h32: 32 of
    // 128), on a GPU only: on the emulated device the shapes above cover the same code
    if (strstr(prop.name, "CUDA emulator")) {
        printf("left out on the emulated device: B1_T1024_NH25_HS64, B1_T1024_NH32_HS128\n");
    } else {
        run_case("B1_T1024_NH25_HS64", 1, 1024, 25, 64, 0);
        run_case("B1_T1024_NH32_HS128", 1, 1024, 32, 128, 0);
    }

    attention_cudnn_destroy();
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed == 0 ? 0 : 1;
}
