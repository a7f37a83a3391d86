// classifier.cu: fused classifier. A block owns a row. Pass 1 keeps a running
// (max, sum of exp(x - max)) per thread over 16-byte vectors, combined across the block
// in a fixed butterfly order; pass 2 re-reads the row (mostly from L2) and writes the
// gradient over it.
#include "classifier.cuh"
#include "../utils.h"

#include <float.h>

#define CLS_THREADS 1024 // few rows in flight per SM, so pass 2 finds its row in L2

// Merge two (max, sum) pairs. Symmetric in its arguments bit for bit, so butterfly
// partners end up with identical values.
__device__ __forceinline__ void softmax_merge(float &m, float &s, float m2, float s2) {
    float mn = fmaxf(m, m2);
    s = s * __expf(m - mn) + s2 * __expf(m2 - mn);
    m = mn;
}

__global__ void __launch_bounds__(CLS_THREADS)
classifier_kernel(bf16 *logits, float *losses, const int *targets, int V, int Vp) {
    __shared__ float shm[32], shs[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    bf16 *x = logits + (size_t)blockIdx.x * Vp;
    const int target = targets[blockIdx.x];
    float xt = 0.0f;
    if (threadIdx.x == 0) xt = bf2f(x[target]); // read before the barrier; writes come after

    // -FLT_MAX (not -inf) so merging two empty pairs gives 0 * exp(0), not NaN.
    float m = -FLT_MAX, s = 0.0f;
    for (int c = threadIdx.x * 8; c < V; c += blockDim.x * 8) {
        bf16x8 v = load16(x + c);
        float z[8], vmax = -FLT_MAX;
        for (int k = 0; k < 8; k++) {
            z[k] = c + k < V ? bf2f(v.v[k]) : -FLT_MAX;
            vmax = fmaxf(vmax, z[k]);
        }
        if (vmax > m) {
            s *= __expf(m - vmax);
            m = vmax;
        }
        for (int k = 0; k < 8; k++)
            if (c + k < V) s += __expf(z[k] - m);
    }
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        softmax_merge(m, s, m2, s2);
    }
    if (lane == 0) { shm[warp] = m; shs[warp] = s; }
    __syncthreads();
    // Every warp reduces the same per-warp values the same way: all threads agree.
    m = lane < nwarps ? shm[lane] : -FLT_MAX;
    s = lane < nwarps ? shs[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        softmax_merge(m, s, m2, s2);
    }
    const float lse = m + __logf(s);
    if (threadIdx.x == 0) losses[blockIdx.x] = lse - xt;

    for (int c = threadIdx.x * 8; c < Vp; c += blockDim.x * 8) {
        bf16x8 v, d;
        if (c < V) v = load16(x + c);
        for (int k = 0; k < 8; k++) {
            int i = c + k;
            float g = 0.0f;
            if (i < V) g = __expf(bf2f(v.v[k]) - lse) - (i == target ? 1.0f : 0.0f);
            d.v[k] = f2bf(g);
        }
        store16(x + c, d);
    }
}

void classifier_forward_backward(bf16 *logits, float *losses, const int *targets, int N, int V, int Vp,
                                 cudaStream_t stream) {
    if (Vp % 8 != 0 || V > Vp || ((uintptr_t)logits & 15)) {
        die("classifier: Vp=%d must be a multiple of 8 and >= V=%d, logits 16-byte aligned", Vp, V);
    }
    if (N <= 0) return;
    classifier_kernel<<<N, CLS_THREADS, 0, stream>>>(logits, losses, targets, V, Vp);
    CUDA_LAUNCH_CHECK();
}

__global__ void loss_accumulate_kernel(double *loss_sum, const float *losses, int N) {
    __shared__ float shared[32];
    float acc = 0.0f;
    for (int i = threadIdx.x; i < N; i += blockDim.x) acc += losses[i];
    float total = block_sum(acc, shared);
    if (threadIdx.x == 0) *loss_sum += (double)total;
}

void loss_accumulate(double *loss_sum, const float *losses, int N, cudaStream_t stream) {
    if (N <= 0) return;
    loss_accumulate_kernel<<<1, 1024, 0, stream>>>(loss_sum, losses, N);
    CUDA_LAUNCH_CHECK();
}
