// bias_grad.cu: column sums of a (rows, cols) bf16 matrix into an fp32 vector.
//
// Pass 1: block (x, y) covers 256 columns (8 per lane, one 16-byte load) and a chunk of
// BG_ROWS rows; its 4 warps stride over the chunk's rows, and the warps' sums are added
// in warp order. Pass 2 (sum_partials): 16 threads per column add the chunks' partial sums,
// each every 16th chunk, then the 16 sums in order.
#include "bias_grad.cuh"
#include "../utils.h"

#define BG_ROWS BIAS_GRAD_ROWS   // cuda_kernel_sizes.h: one partial column sum per chunk
#define BG_WARPS 4

__global__ void __launch_bounds__(32 * BG_WARPS)
bias_grad_partial_kernel(float *partial, const bf16 *dout, int rows, int cols, int ld) {
    __shared__ float sums[BG_WARPS][256];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    // chunks on x (up to 2^31 - 1 of them), the 256-column groups on y (a few dozen)
    const int col = blockIdx.y * 256 + lane * 8;
    const int row0 = blockIdx.x * BG_ROWS;
    const int row1 = min(row0 + BG_ROWS, rows);
    float acc[8] = {0};
    if (col < cols) {
        for (int r = row0 + warp; r < row1; r += BG_WARPS) {
            bf16x8 x = load16(dout + (size_t)r * ld + col);
            for (int k = 0; k < 8; k++) acc[k] += bf2f(x.v[k]);
        }
    }
    for (int k = 0; k < 8; k++) sums[warp][lane * 8 + k] = acc[k];
    __syncthreads();
    for (int j = threadIdx.x; j < 256; j += blockDim.x) {
        int c = blockIdx.y * 256 + j;
        if (c >= cols) continue;
        float s = 0.0f;
        for (int w = 0; w < BG_WARPS; w++) s += sums[w][j];
        partial[(size_t)blockIdx.x * cols + c] = s;
    }
}

__global__ void __launch_bounds__(32 * PARTIAL_ROWS)
bias_grad_final_kernel(float *dbias, const float *partial, int chunks, int cols, float alpha) {
    const float s = sum_partials(partial, chunks, cols);
    const int c = blockIdx.x * 32 + threadIdx.x;
    if (threadIdx.x < 32 && c < cols) dbias[c] += alpha * s;
}

void bias_grad(float *dbias, const bf16 *dout, int rows, int cols, int ld, float alpha, float *scratch,
               cudaStream_t stream) {
    if (cols % 8 != 0 || ld % 8 != 0 || ld < cols || ((uintptr_t)dout & 15) != 0) {
        die("bias_grad: cols (%d) and row pitch ld (%d >= cols) must be multiples of 8 and dout 16-byte "
            "aligned", cols, ld);
    }
    if (rows <= 0) return;
    int chunks = (int)ceil_div(rows, BG_ROWS);
    dim3 grid((unsigned)chunks, (unsigned)ceil_div(cols, 256));
    bias_grad_partial_kernel<<<grid, 32 * BG_WARPS, 0, stream>>>(scratch, dout, rows, cols, ld);
    CUDA_LAUNCH_CHECK();
    bias_grad_final_kernel<<<(unsigned)ceil_div(cols, 32), 32 * PARTIAL_ROWS, 0, stream>>>(dbias, scratch, chunks,
                                                                                      cols, alpha);
    CUDA_LAUNCH_CHECK();
}
