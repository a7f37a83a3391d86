// layernorm.cu: LayerNorm forward and backward.
//
// Each warp owns a row and keeps it in registers as 16-byte vectors: lane l holds
// columns [8(l + 32i), 8(l + 32i) + 8) for i < MAXV, so a row is read from memory once.
// MAXV = ceil(C / 256) is a template parameter so registers match the width. Up to C = 4096
// (MAXV 16): from MAXV 14 the backward's three rows of vectors exceed the 255 registers a
// thread has and spill to local memory (at 16, 148 bytes stored and 436 loaded a thread on
// sm_80; slower, the same bits), and its shared memory is 128 KiB a block.
#include "layernorm.cuh"
#include "../utils.h"

#define LN_FWD_WARPS 4
#define LNB_WARPS 4
#define LNB_ROWS LAYERNORM_BWD_ROWS // cuda_kernel_sizes.h: one partial weight/bias gradient per block

static void layernorm_check(int C, const void *a, const void *b, const char *who) {
    if (C % 8 != 0 || C > LAYERNORM_MAX_C || ((uintptr_t)a & 15) || ((uintptr_t)b & 15)) {
        die("%s: C=%d must be a multiple of 8 and <= %d, rows 16-byte aligned", who, C,
            LAYERNORM_MAX_C);
    }
}

template <int MAXV>
__global__ void __launch_bounds__(32 * LN_FWD_WARPS)
layernorm_forward_kernel(bf16 *out, float *mean, float *rstd, const bf16 *inp, const bf16 *weight,
                         const bf16 *bias, int N, int C) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * LN_FWD_WARPS + threadIdx.x / 32;
    if (row >= N) return; // whole warps leave together
    const bf16 *x = inp + (size_t)row * C;
    bf16x8 xv[MAXV] = {};   // the rows past C stay unread; zeros keep every compiler sure of that
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < MAXV; i++) {
        int c = (i * 32 + lane) * 8;
        if (c < C) {
            xv[i] = load16_cs(x + c);
            for (int k = 0; k < 8; k++) sum += bf2f(xv[i].v[k]);
        }
    }
    const float m = warp_sum(sum) / (float)C;
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < MAXV; i++) {
        int c = (i * 32 + lane) * 8;
        if (c < C)
            for (int k = 0; k < 8; k++) {
                float d = bf2f(xv[i].v[k]) - m;
                ss += d * d;
            }
    }
    const float s = rsqrtf(warp_sum(ss) / (float)C + LAYERNORM_EPS);
    bf16 *o = out + (size_t)row * C;
#pragma unroll
    for (int i = 0; i < MAXV; i++) {
        int c = (i * 32 + lane) * 8;
        if (c < C) {
            bf16x8 w = load16(weight + c), b = load16(bias + c), y;
            for (int k = 0; k < 8; k++)
                y.v[k] = f2bf((bf2f(xv[i].v[k]) - m) * s * bf2f(w.v[k]) + bf2f(b.v[k]));
            store16(o + c, y);
        }
    }
    if (lane == 0) {
        if (mean) mean[row] = m;
        if (rstd) rstd[row] = s;
    }
}

void layernorm_forward(bf16 *out, float *mean, float *rstd, const bf16 *inp, const bf16 *weight,
                       const bf16 *bias, int N, int C, cudaStream_t stream) {
    layernorm_check(C, out, inp, "layernorm_forward");
    if (N <= 0) return;
    unsigned blocks = (unsigned)ceil_div(N, LN_FWD_WARPS);
    switch (ceil_div(C, 256)) {
#define LN_FWD_CASE(V)                                                                                   \
    case V:                                                                                              \
        layernorm_forward_kernel<V><<<blocks, 32 * LN_FWD_WARPS, 0, stream>>>(out, mean, rstd, inp, weight, \
                                                                              bias, N, C);               \
        break;
        LN_FWD_CASE(1) LN_FWD_CASE(2) LN_FWD_CASE(3) LN_FWD_CASE(4)
        LN_FWD_CASE(5) LN_FWD_CASE(6) LN_FWD_CASE(7) LN_FWD_CASE(8)
        LN_FWD_CASE(9) LN_FWD_CASE(10) LN_FWD_CASE(11) LN_FWD_CASE(12)
        LN_FWD_CASE(13) LN_FWD_CASE(14) LN_FWD_CASE(15) LN_FWD_CASE(16)
#undef LN_FWD_CASE
    }
    CUDA_LAUNCH_CHECK();
}

// ----------------------------------------------------------------------------
// Backward. With xhat = (x - mean) * rstd and g = dout * weight:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//   dweight += sum over rows of dout * xhat,  dbias += sum over rows of dout.
// Each warp adds its rows' dweight/dbias terms into its own shared-memory slice (lanes
// own disjoint columns, so no atomics); the block then sums its warps in order into one
// partial per block, and a second kernel sums the partials in block order.

template <int MAXV>
__global__ void __launch_bounds__(32 * LNB_WARPS)
layernorm_backward_kernel(bf16 *dinp, float *partial, const bf16 *dout, const bf16 *inp,
                          const float *mean, const float *rstd, const bf16 *weight, int N, int C,
                          int accumulate) {
    extern __shared__ float shared[]; // [LNB_WARPS][2][C]: dweight then dbias terms
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float *my_dw = shared + (size_t)warp * 2 * C;
    float *my_db = my_dw + C;
    for (int c = lane; c < 2 * C; c += 32) my_dw[c] = 0.0f;
    __syncwarp();

    bf16x8 wv[MAXV];
#pragma unroll
    for (int i = 0; i < MAXV; i++) {
        int c = (i * 32 + lane) * 8;
        if (c < C) wv[i] = load16(weight + c);
    }
    const int row0 = blockIdx.x * LNB_ROWS;
    const int row1 = min(row0 + LNB_ROWS, N);
    for (int row = row0 + warp; row < row1; row += LNB_WARPS) {
        const bf16 *x = inp + (size_t)row * C;
        const bf16 *dy = dout + (size_t)row * C;
        const float m = mean[row], s = rstd[row];
        bf16x8 xv[MAXV], dv[MAXV];
        float sum_g = 0.0f, sum_gx = 0.0f;
#pragma unroll
        for (int i = 0; i < MAXV; i++) {
            int c = (i * 32 + lane) * 8;
            if (c < C) {
                xv[i] = load16_cs(x + c);
                dv[i] = load16_cs(dy + c);
                for (int k = 0; k < 8; k++) {
                    float g = bf2f(dv[i].v[k]) * bf2f(wv[i].v[k]);
                    sum_g += g;
                    sum_gx += g * (bf2f(xv[i].v[k]) - m) * s;
                }
            }
        }
        const float mean_g = warp_sum(sum_g) / (float)C;
        const float mean_gx = warp_sum(sum_gx) / (float)C;
        bf16 *dx = dinp + (size_t)row * C;
#pragma unroll
        for (int i = 0; i < MAXV; i++) {
            int c = (i * 32 + lane) * 8;
            if (c < C) {
                bf16x8 old, res;
                if (accumulate) old = load16(dx + c);
                for (int k = 0; k < 8; k++) {
                    float d = bf2f(dv[i].v[k]);
                    float xhat = (bf2f(xv[i].v[k]) - m) * s;
                    float g = d * bf2f(wv[i].v[k]);
                    float v = s * (g - mean_g - xhat * mean_gx);
                    if (accumulate) v += bf2f(old.v[k]);
                    res.v[k] = f2bf(v);
                    my_dw[c + k] += d * xhat;
                    my_db[c + k] += d;
                }
                store16(dx + c, res);
            }
        }
    }
    __syncthreads();
    float *out = partial + (size_t)blockIdx.x * 2 * C;
    for (int j = threadIdx.x; j < 2 * C; j += blockDim.x) {
        float t = 0.0f;
        for (int w = 0; w < LNB_WARPS; w++) t += shared[(size_t)w * 2 * C + j];
        out[j] = t;
    }
}

__global__ void layernorm_backward_final_kernel(float *dweight, float *dbias, const float *partial,
                                                int blocks, int C) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= 2 * C) return;
    float t = 0.0f;
    for (int b = 0; b < blocks; b++) t += partial[(size_t)b * 2 * C + j];
    if (j < C) dweight[j] += t;
    else dbias[j - C] += t;
}

void layernorm_backward(bf16 *dinp, float *dweight, float *dbias, const bf16 *dout, const bf16 *inp,
                        const float *mean, const float *rstd, const bf16 *weight, int N, int C,
                        int accumulate, float *scratch, cudaStream_t stream) {
    layernorm_check(C, dinp, dout, "layernorm_backward");
    layernorm_check(C, inp, weight, "layernorm_backward");
    if (N <= 0) return;
    int blocks = (int)ceil_div(N, LNB_ROWS);
    size_t smem = (size_t)LNB_WARPS * 2 * C * sizeof(float);
    switch (ceil_div(C, 256)) {
#define LN_BWD_CASE(V)                                                                                   \
    case V:                                                                                              \
        if (smem > 48 * 1024)                                                                            \
            CUDA_CHECK(cudaFuncSetAttribute(layernorm_backward_kernel<V>,                                \
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));    \
        layernorm_backward_kernel<V><<<blocks, 32 * LNB_WARPS, smem, stream>>>(dinp, scratch, dout, inp,  \
                                                                               mean, rstd, weight, N, C, \
                                                                               accumulate);              \
        break;
        LN_BWD_CASE(1) LN_BWD_CASE(2) LN_BWD_CASE(3) LN_BWD_CASE(4)
        LN_BWD_CASE(5) LN_BWD_CASE(6) LN_BWD_CASE(7) LN_BWD_CASE(8)
        LN_BWD_CASE(9) LN_BWD_CASE(10) LN_BWD_CASE(11) LN_BWD_CASE(12)
        LN_BWD_CASE(13) LN_BWD_CASE(14) LN_BWD_CASE(15) LN_BWD_CASE(16)
#undef LN_BWD_CASE
    }
    CUDA_LAUNCH_CHECK();
    layernorm_backward_final_kernel<<<(unsigned)ceil_div(2 * C, 256), 256, 0, stream>>>(dweight, dbias, scratch,
                                                                                      blocks, C);
    CUDA_LAUNCH_CHECK();
}
