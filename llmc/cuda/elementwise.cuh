// elementwise.cuh: memory-bound pointwise kernels: tanh-GELU forward and backward (for
// recompute and for matmuls whose fused epilogue cuBLASLt declines), dtype casts, and
// fp32 accumulation. Pointers must be 16-byte aligned; any n is fine.
#ifndef LLMC_ELEMENTWISE_CUH
#define LLMC_ELEMENTWISE_CUH

#include "cuda_utils.cuh"

// out = gelu(inp), tanh approximation.
void gelu_forward(bf16 *out, const bf16 *inp, size_t n, cudaStream_t stream);
// d = d * gelu'(pre): turns the gradient w.r.t. GELU's output into the gradient w.r.t. its input.
void gelu_backward_inplace(bf16 *d, const bf16 *pre, size_t n, cudaStream_t stream);
// Round to nearest even.
void cast_f32_to_bf16(bf16 *out, const float *inp, size_t n, cudaStream_t stream);
void cast_bf16_to_f32(float *out, const bf16 *inp, size_t n, cudaStream_t stream);
// acc += x
void accumulate_f32(float *acc, const float *x, size_t n, cudaStream_t stream);

// The GELU formulas, shared by the kernels and the host references in the tests.
#define GELU_SCALE 0.7978845608028654f // sqrt(2 / pi)
__host__ __device__ __forceinline__ float gelu_tanh(float x) {
    float cube = 0.044715f * x * x * x;
    return 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + cube)));
}
__host__ __device__ __forceinline__ float gelu_tanh_grad(float x) {
    float cube = 0.044715f * x * x * x;
    float t = tanhf(GELU_SCALE * (x + cube));
    float dt = GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dt;
}

#endif
