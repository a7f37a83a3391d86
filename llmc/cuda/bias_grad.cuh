// bias_grad.cuh: dbias += alpha * (column sums of dout), deterministic. Used for bias
// gradients when cuBLASLt's fused BGRADB epilogue is not available or not wanted.
#ifndef LLMC_BIAS_GRAD_CUH
#define LLMC_BIAS_GRAD_CUH

#include "../model/cuda_kernel_sizes.h"   // bias_grad_scratch_floats(): the scratch bias_grad() needs
#include "cuda_utils.cuh"

// dbias (cols) fp32 += alpha * sum over rows of dout (rows, cols) bf16, its rows ld apart
// (cols, or wider for a column block: a tile's). cols % 8 == 0, ld % 8 == 0, dout 16-byte
// aligned. Two passes (per-chunk partial sums, then a fixed-order sum of the chunks), so
// the bits do not depend on the GPU or on scheduling.
void bias_grad(float *dbias, const bf16 *dout, int rows, int cols, int ld, float alpha, float *scratch,
               cudaStream_t stream);

#endif
