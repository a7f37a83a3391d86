// layernorm.cu: LayerNorm forward and backward.
//
// Each warp owns a row and keeps it in registers as 16-byte vectors: lane l holds
// columns [8(l + 32i), 8(l + 32i) + 8) for i < MAXV, so a row is read from memory once.
// MAXV = ceil(C / 256) is a template parameter so registers match the width. Up to C = 4096
// (MAXV 16): for wide rows the backward's three rows of vectors exceed the 255 registers a
// thread has and spill to local memory (from MAXV 14 on sm_80, 144 bytes stored and 432
// loaded a thread at 16; from MAXV 10 on sm_90, 570 and 1768 at 16; slower, the same bits),
// and its shared memory is 128 KiB a block.
#include "layernorm.cuh"
#include "../utils.h"

#define LN_FWD_WARPS 4
#define LNB_WARPS LAYERNORM_BWD_WARPS // cuda_kernel_sizes.h: rows per block and the scratch follow from it

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
    layernorm_check(C, weight, bias, "layernorm_forward");
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
// Each warp adds its rows' dweight/dbias terms into its own shared-memory slice (lanes own
// disjoint columns, so no atomics). The slice is laid out by slot, not column: lane l's
// k-th column of vector i sits at slot 256 i + 32 k + l, so the 32 lanes of one update hit
// 32 consecutive words (one per bank) where column order would put 8 lanes on each bank.
// The block sums its warps in order into one partial per block, still by slot; a second
// kernel sums the partials in a fixed order (sum_partials) and writes each slot to its column.

#define LNB_SLOTS(MAXV) (2 * (MAXV) * 256) // a partial: weight terms, then bias terms

template <int MAXV>
__global__ void __launch_bounds__(32 * LNB_WARPS)
layernorm_backward_kernel(bf16 *dinp, float *partial, const bf16 *dout, const bf16 *inp,
                          const float *mean, const float *rstd, const bf16 *weight, int N, int C,
                          int rows_per_block, int accumulate) {
    extern __shared__ float shared[]; // [LNB_WARPS][LNB_SLOTS(MAXV)]
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float *my_dw = shared + (size_t)warp * LNB_SLOTS(MAXV) + lane; // + 256 i + 32 k
    float *my_db = my_dw + MAXV * 256;
    for (int j = lane; j < LNB_SLOTS(MAXV); j += 32) shared[(size_t)warp * LNB_SLOTS(MAXV) + j] = 0.0f;
    __syncwarp();

    bf16x8 wv[MAXV];
#pragma unroll
    for (int i = 0; i < MAXV; i++) {
        int c = (i * 32 + lane) * 8;
        if (c < C) wv[i] = load16(weight + c);
    }
    const int row0 = blockIdx.x * rows_per_block;
    const int row1 = min(row0 + rows_per_block, N);
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
                    my_dw[i * 256 + k * 32] += d * xhat;
                    my_db[i * 256 + k * 32] += d;
                }
                store16(dx + c, res);
            }
        }
    }
    __syncthreads();
    float *out = partial + (size_t)blockIdx.x * LNB_SLOTS(MAXV);
    for (int j = threadIdx.x; j < LNB_SLOTS(MAXV); j += blockDim.x) {
        float t = 0.0f;
        for (int w = 0; w < LNB_WARPS; w++) t += shared[(size_t)w * LNB_SLOTS(MAXV) + j];
        out[j] = t;
    }
}

// Each slot's sum over the partials (sum_partials), written to its column.
__global__ void __launch_bounds__(32 * PARTIAL_ROWS)
layernorm_backward_final_kernel(float *dweight, float *dbias, const float *partial, int blocks, int slots,
                                int C) {
    const float t = sum_partials(partial, blocks, slots);
    const int j = blockIdx.x * 32 + threadIdx.x;
    if (threadIdx.x >= 32 || j >= slots) return;
    const int half = slots / 2, q = j % half;       // q = 256 i + 32 k + lane
    const int col = (q / 256 * 32 + q % 32) * 8 + q % 256 / 32;
    if (col >= C) return;
    if (j < half) dweight[col] += t;
    else dbias[col] += t;
}

void layernorm_backward(bf16 *dinp, float *dweight, float *dbias, const bf16 *dout, const bf16 *inp,
                        const float *mean, const float *rstd, const bf16 *weight, int N, int C,
                        int accumulate, float *scratch, cudaStream_t stream) {
    layernorm_check(C, dinp, dout, "layernorm_backward");
    layernorm_check(C, inp, weight, "layernorm_backward");
    if (N <= 0) return;
    const int rows = (int)layernorm_backward_rows(N);
    const int blocks = (int)ceil_div(N, rows);
    const int maxv = (int)ceil_div(C, 256), slots = 2 * maxv * 256;   // LNB_SLOTS(maxv): what smem holds a warp
    const size_t smem = layernorm_backward_smem_bytes(C);
    switch (maxv) {
#define LN_BWD_CASE(V)                                                                                   \
    case V:                                                                                              \
        if (smem > 48 * 1024)                                                                            \
            CUDA_CHECK(cudaFuncSetAttribute(layernorm_backward_kernel<V>,                                \
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));    \
        layernorm_backward_kernel<V><<<blocks, 32 * LNB_WARPS, smem, stream>>>(dinp, scratch, dout, inp,  \
                                                                               mean, rstd, weight, N, C, \
                                                                               rows, accumulate);        \
        break;
        LN_BWD_CASE(1) LN_BWD_CASE(2) LN_BWD_CASE(3) LN_BWD_CASE(4)
        LN_BWD_CASE(5) LN_BWD_CASE(6) LN_BWD_CASE(7) LN_BWD_CASE(8)
        LN_BWD_CASE(9) LN_BWD_CASE(10) LN_BWD_CASE(11) LN_BWD_CASE(12)
        LN_BWD_CASE(13) LN_BWD_CASE(14) LN_BWD_CASE(15) LN_BWD_CASE(16)
#undef LN_BWD_CASE
    }
    CUDA_LAUNCH_CHECK();
    layernorm_backward_final_kernel<<<(unsigned)ceil_div(slots, 32), 32 * PARTIAL_ROWS, 0, stream>>>(dweight, dbias, scratch,
                                                                                           blocks, slots, C);
    CUDA_LAUNCH_CHECK();
}
