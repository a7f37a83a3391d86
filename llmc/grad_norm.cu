// grad_norm.cu: sum of squares per block over a fixed grid-stride pattern, then one
// block adds the block sums in order.
#include "grad_norm.cuh"

#define GN_BLOCKS GRAD_NORM_BLOCKS   // cuda_kernel_sizes.h: the scratch is one float per block
#define GN_THREADS 512

__global__ void __launch_bounds__(GN_THREADS)
grad_sumsq_kernel(float *partial, const float *g, size_t n, int vectorized) {
    __shared__ float shared[32];
    float acc = 0.0f;
    const size_t stride = (size_t)GN_BLOCKS * GN_THREADS;
    const size_t tid = (size_t)blockIdx.x * GN_THREADS + threadIdx.x;
    if (vectorized) {
        const size_t n4 = n / 4;
        for (size_t i = tid; i < n4; i += stride) {
            f32x4 x = load16_cs(g + i * 4);
            for (int k = 0; k < 4; k++) acc += x.v[k] * x.v[k];
        }
        for (size_t i = n4 * 4 + tid; i < n; i += stride) acc += g[i] * g[i];
    } else {
        for (size_t i = tid; i < n; i += stride) acc += g[i] * g[i];
    }
    float total = block_sum(acc, shared);
    if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

__global__ void __launch_bounds__(GN_BLOCKS)
grad_norm_final_kernel(float *out, const float *partial, float grad_clip) {
    __shared__ float shared[32];
    float total = block_sum(partial[threadIdx.x], shared);
    if (threadIdx.x == 0) {
        float norm = sqrtf(total);
        out[0] = norm;
        out[1] = (grad_clip > 0.0f && norm > grad_clip) ? grad_clip / norm : 1.0f;
    }
}

void grad_norm_clip(float *out, const float *g, size_t n, float grad_clip, float *scratch, cudaStream_t stream) {
    int vectorized = ((uintptr_t)g & 15) == 0;
    grad_sumsq_kernel<<<GN_BLOCKS, GN_THREADS, 0, stream>>>(scratch, g, n, vectorized);
    CUDA_LAUNCH_CHECK();
    grad_norm_final_kernel<<<1, GN_BLOCKS, 0, stream>>>(out, scratch, grad_clip);
    CUDA_LAUNCH_CHECK();
}
