// layernorm.cuh: LayerNorm over the last dimension (eps 1e-5), bf16 data with fp32
// statistics. One warp per row; C must be a multiple of 8 and at most LAYERNORM_MAX_C.
#ifndef LLMC_LAYERNORM_CUH
#define LLMC_LAYERNORM_CUH

#include "../model/cuda_kernel_sizes.h"   // LAYERNORM_MAX_C, layernorm_backward_scratch_floats()
#include "cuda_utils.cuh"

#define LAYERNORM_EPS 1e-5f

// out = (inp - mean) * rstd * weight + bias for each of N rows of C. mean and rstd (N)
// are written when not NULL (backward needs them; a recompute in backward passes NULL).
void layernorm_forward(bf16 *out, float *mean, float *rstd, const bf16 *inp, const bf16 *weight,
                       const bf16 *bias, int N, int C, cudaStream_t stream);

// dinp = (accumulate ? dinp : 0) + dLN/dinp . dout; dweight, dbias (C, fp32) +=.
// Deterministic: weight and bias gradients are summed per chunk of rows, then over chunks,
// in a fixed order.
void layernorm_backward(bf16 *dinp, float *dweight, float *dbias, const bf16 *dout, const bf16 *inp,
                        const float *mean, const float *rstd, const bf16 *weight, int N, int C,
                        int accumulate, float *scratch, cudaStream_t stream);

#endif
