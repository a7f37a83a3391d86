// attention_fallback.cu: attention as matmuls + causal softmax.
//
// For one sequence b, head h (row-major, i = query, j = key):
//   S = scale * Q K^T,  P = causal_softmax(S),  out = P V
// backward:
//   dV = P^T dout,  dP = dout V^T,  dS = scale * P o (dP - rowsum(P o dP)),
//   dQ = dS K,  dK = dS^T Q
// Heads of one sequence sit HS apart in qkv, so each matmul runs as one strided batch over
// the NH heads, once per sequence. In cuBLASLt's column-major terms a row-major (T, T)
// matrix M is M^T, and a head's (T, HS) slice of qkv is a (HS, T) matrix with ld 3C.
#include "attention_fallback.cuh"
#include "../utils.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "matmul_cublaslt.h"

static void run_required(const MatmulArgs *a, cudaStream_t stream) {
    if (!matmul_lt(a, stream)) {
        die("attention fallback: cuBLASLt has no algorithm (m=%d n=%d k=%d)", a->m, a->n, a->k);
    }
}

// A batch over the heads of one sequence: operands advance by the given strides per head.
static MatmulArgs head_batch(int NH) {
    MatmulArgs a;
    memset(&a, 0, sizeof(a));
    a.batch = NH;
    a.alpha = 1.0f;
    return a;
}

// scores (T x T, row-major per head) = scale * Q K^T; as column-major: D = K Q^T.
static void scores_matmul(float *scores, const bf16 *qkv_b, int T, int NH, int HS, cudaStream_t stream) {
    const int C = NH * HS;
    MatmulArgs a = head_batch(NH);
    a.transa = 1; a.transb = 0;
    a.m = T; a.n = T; a.k = HS;
    a.A = qkv_b + C; a.lda = 3 * C; a.stride_a = HS;      // K
    a.B = qkv_b; a.ldb = 3 * C; a.stride_b = HS;          // Q
    a.D = scores; a.ldd = T; a.stride_d = (long long)T * T;
    a.d_fp32 = 1;
    a.alpha = 1.0f / sqrtf((float)HS);
    run_required(&a, stream);
}

// One warp per row of scores: row r is query i = r % T of its head.
__global__ void causal_softmax_kernel(bf16 *probs, const float *scores, int rows, int T) {
    const int lane = threadIdx.x % 32;
    const int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (r >= rows) return;
    const int i = r % T;
    const float *s = scores + (size_t)r * T;
    bf16 *p = probs + (size_t)r * T;
    float m = -FLT_MAX;
    for (int j = lane; j <= i; j += 32) m = fmaxf(m, s[j]);
    m = warp_max(m);
    float sum = 0.0f;
    for (int j = lane; j <= i; j += 32) sum += __expf(s[j] - m);
    const float inv = 1.0f / warp_sum(sum);
    for (int j = lane; j < T; j += 32) p[j] = f2bf(j <= i ? __expf(s[j] - m) * inv : 0.0f);
}

// dS = scale * P o (dP - rowsum(P o dP)) over the causal part, written over P.
__global__ void causal_softmax_backward_kernel(bf16 *probs, const float *dprobs, int rows, int T, float scale) {
    const int lane = threadIdx.x % 32;
    const int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (r >= rows) return;
    const int i = r % T;
    const float *dp = dprobs + (size_t)r * T;
    bf16 *p = probs + (size_t)r * T;
    float dot = 0.0f;
    for (int j = lane; j <= i; j += 32) dot += bf2f(p[j]) * dp[j];
    dot = warp_sum(dot); // every lane has read its p[j] before any lane writes below
    for (int j = lane; j < T; j += 32) {
        float v = j <= i ? scale * bf2f(p[j]) * (dp[j] - dot) : 0.0f;
        p[j] = f2bf(v);
    }
}

static void check_shape(int T, int NH, int HS, const bf16 *qkv) {
    if (T <= 0 || NH <= 0 || HS <= 0 || ((uintptr_t)qkv & 15) != 0 || HS % 8 != 0) {
        die("attention_fallback: bad shape T=%d NH=%d HS=%d (HS must be a multiple of 8)", T, NH, HS);
    }
}

static void scores_and_probs(float *scores, bf16 *probs, const bf16 *qkv, int B, int T, int NH, int HS,
                             cudaStream_t stream) {
    const int C = NH * HS;
    const size_t TT = (size_t)T * T;
    for (int b = 0; b < B; b++)
        scores_matmul(scores + (size_t)b * NH * TT, qkv + (size_t)b * T * 3 * C, T, NH, HS, stream);
    const int rows = B * NH * T;
    causal_softmax_kernel<<<(unsigned)ceil_div(rows, 8), 256, 0, stream>>>(probs, scores, rows, T);
    CUDA_LAUNCH_CHECK();
}

void attention_fallback_forward(bf16 *out, float *scores, bf16 *probs, const bf16 *qkv, int B, int T, int NH,
                                int HS, cudaStream_t stream) {
    check_shape(T, NH, HS, qkv);
    const int C = NH * HS;
    const size_t TT = (size_t)T * T;
    scores_and_probs(scores, probs, qkv, B, T, NH, HS, stream);
    for (int b = 0; b < B; b++) {
        // out_h (T x HS) = P V; column-major: out^T (HS x T) = V^T P^T.
        MatmulArgs a = head_batch(NH);
        a.transa = 0; a.transb = 0;
        a.m = HS; a.n = T; a.k = T;
        a.A = qkv + (size_t)b * T * 3 * C + 2 * C; a.lda = 3 * C; a.stride_a = HS;
        a.B = probs + (size_t)b * NH * TT; a.ldb = T; a.stride_b = (long long)TT;
        a.D = out + (size_t)b * T * C; a.ldd = C; a.stride_d = HS;
        run_required(&a, stream);
    }
}

void attention_fallback_backward(bf16 *dqkv, float *scores, bf16 *probs, const bf16 *dout, const bf16 *qkv,
                                 int B, int T, int NH, int HS, cudaStream_t stream) {
    check_shape(T, NH, HS, qkv);
    const int C = NH * HS;
    const size_t TT = (size_t)T * T;
    const float scale = 1.0f / sqrtf((float)HS);
    scores_and_probs(scores, probs, qkv, B, T, NH, HS, stream);
    for (int b = 0; b < B; b++) {
        const bf16 *v = qkv + (size_t)b * T * 3 * C + 2 * C;
        const bf16 *dy = dout + (size_t)b * T * C;
        bf16 *dv = dqkv + (size_t)b * T * 3 * C + 2 * C;
        bf16 *pb = probs + (size_t)b * NH * TT;
        float *sb = scores + (size_t)b * NH * TT;

        // dV (T x HS) = P^T dout; column-major: dV^T (HS x T) = dout^T P.
        MatmulArgs a = head_batch(NH);
        a.transa = 0; a.transb = 1;
        a.m = HS; a.n = T; a.k = T;
        a.A = dy; a.lda = C; a.stride_a = HS;
        a.B = pb; a.ldb = T; a.stride_b = (long long)TT;
        a.D = dv; a.ldd = 3 * C; a.stride_d = HS;
        run_required(&a, stream);

        // dP (T x T) = dout V^T, fp32 over this sequence's scores; column-major: dP^T = V dout^T.
        a = head_batch(NH);
        a.transa = 1; a.transb = 0;
        a.m = T; a.n = T; a.k = HS;
        a.A = v; a.lda = 3 * C; a.stride_a = HS;
        a.B = dy; a.ldb = C; a.stride_b = HS;
        a.D = sb; a.ldd = T; a.stride_d = (long long)TT;
        a.d_fp32 = 1;
        run_required(&a, stream);
    }
    const int rows = B * NH * T;
    causal_softmax_backward_kernel<<<(unsigned)ceil_div(rows, 8), 256, 0, stream>>>(probs, scores, rows, T, scale);
    CUDA_LAUNCH_CHECK();
    for (int b = 0; b < B; b++) {
        const bf16 *q = qkv + (size_t)b * T * 3 * C, *k = q + C;
        bf16 *dq = dqkv + (size_t)b * T * 3 * C, *dk = dq + C;
        const bf16 *ds = probs + (size_t)b * NH * TT;

        // dQ (T x HS) = dS K; column-major: dQ^T (HS x T) = K^T dS^T.
        MatmulArgs a = head_batch(NH);
        a.transa = 0; a.transb = 0;
        a.m = HS; a.n = T; a.k = T;
        a.A = k; a.lda = 3 * C; a.stride_a = HS;
        a.B = ds; a.ldb = T; a.stride_b = (long long)TT;
        a.D = dq; a.ldd = 3 * C; a.stride_d = HS;
        run_required(&a, stream);

        // dK (T x HS) = dS^T Q; column-major: dK^T (HS x T) = Q^T dS.
        a.transb = 1;
        a.A = q;
        a.D = dk;
        run_required(&a, stream);
    }
}
