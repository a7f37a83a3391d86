// adamw_cuda.cu: AdamW + stochastic rounding, four elements per thread.
#include "adamw_cuda.cuh"
#include "../utils.h"

#define ADAMW_THREADS 256

// The rule of llmc/numerics/adamw.h, shared with zero/'s refresh.
__device__ __forceinline__ bf16 round_element(float x, uint64_t seed, uint64_t step, uint64_t global_index) {
    return __ushort_as_bfloat16(adamw_round_bf16_at(x, seed, step, global_index));
}

__global__ void __launch_bounds__(ADAMW_THREADS)
adamw_kernel(float *master, bf16 *params, const float *grads, float *m, float *v, size_t n, uint64_t global_offset,
             AdamWParams hp, int decay, const float *grad_scale, uint64_t seed, uint64_t step, int vectorized) {
    if (grad_scale != NULL) hp.grad_scale = *grad_scale;
    size_t i0 = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (i0 >= n) return;
    if (vectorized && i0 + 4 <= n) {
        f32x4 p = load16_cs(master + i0), g = load16_cs(grads + i0), mm = load16_cs(m + i0), vv = load16_cs(v + i0);
        for (int k = 0; k < 4; k++) p.v[k] = adamw_element(p.v[k], g.v[k], &mm.v[k], &vv.v[k], &hp, decay);
        store16_cs(master + i0, p);
        store16_cs(m + i0, mm);
        store16_cs(v + i0, vv);
        if (params != NULL)
            for (int k = 0; k < 4; k++) params[i0 + k] = round_element(p.v[k], seed, step, global_offset + i0 + k);
        return;
    }
    for (size_t i = i0; i < n && i < i0 + 4; i++) {
        float mi = m[i], vi = v[i];
        float p = adamw_element(master[i], grads[i], &mi, &vi, &hp, decay);
        master[i] = p;
        m[i] = mi;
        v[i] = vi;
        if (params != NULL) params[i] = round_element(p, seed, step, global_offset + i);
    }
}

void adamw_update(float *master, bf16 *params, const float *grads, float *m, float *v, size_t n,
                  uint64_t global_offset, AdamWParams hp, int decay, const float *grad_scale, uint64_t seed,
                  int step, cudaStream_t stream) {
    if (n == 0) return;
    if (step < 0) {
        die("adamw_update: negative step %d", step);
    }
    int vectorized = (((uintptr_t)master | (uintptr_t)grads | (uintptr_t)m | (uintptr_t)v) & 15) == 0;
    unsigned blocks = (unsigned)ceil_div(ceil_div(n, 4), ADAMW_THREADS);
    adamw_kernel<<<blocks, ADAMW_THREADS, 0, stream>>>(master, params, grads, m, v, n, global_offset, hp, decay,
                                                       grad_scale, seed, (uint64_t)step, vectorized);
    CUDA_LAUNCH_CHECK();
}

__global__ void round_stochastic_kernel(bf16 *params, const float *master, size_t n, uint64_t global_offset,
                                        uint64_t seed, uint64_t step) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) params[i] = round_element(master[i], seed, step, global_offset + i);
}

void round_stochastic(bf16 *params, const float *master, size_t n, uint64_t global_offset, uint64_t seed,
                      int step, cudaStream_t stream) {
    if (n == 0) return;
    if (step < 0) {
        die("round_stochastic: negative step %d", step);
    }
    round_stochastic_kernel<<<(unsigned)ceil_div(n, 256), 256, 0, stream>>>(params, master, n, global_offset, seed,
                                                                          (uint64_t)step);
    CUDA_LAUNCH_CHECK();
}
