// matmul_cublaslt.h: the model's matrix multiplications through cuBLASLt: bf16 inputs,
// fp32 accumulation, bf16 or fp32 outputs, with fused epilogues (bias, GELU with its
// input kept for backward, GELU gradient, bias gradient). When cuBLASLt has no algorithm
// for a fused epilogue, the same result comes from a plain matmul plus our own kernels.
//
// Row-major convention of the model: a linear layer maps inp (rows, in_dim) to
// out (rows, out_dim) = inp @ weight^T + bias, with weight (out_dim, in_dim).
#ifndef LLMC_MATMUL_CUBLASLT_H
#define LLMC_MATMUL_CUBLASLT_H

#include <cublasLt.h>

#include "../model/cuda_kernel_sizes.h"   // MATMUL_WORKSPACE_BYTES, matmul_backward_scratch_floats()
#include "cuda_utils.cuh"

// Creates the cuBLASLt handle and the one workspace (idempotent); matmul_destroy frees them.
void matmul_init(void);
void matmul_destroy(void);
size_t matmul_workspace_bytes(void);
// 0 forces the unfused paths (tests compare both); 1 (default) uses fused epilogues
// wherever cuBLASLt offers an algorithm.
void matmul_set_fused_epilogues(int enable);

// One cuBLASLt call in its own column-major terms: D (m x n) = alpha * op(A) op(B) + beta * C,
// then the epilogue. A, B bf16; C and D bf16, or fp32 when d_fp32. batch > 1: strided batches.
typedef struct {
    int transa, transb;               // 1: op(X) = X^T
    int m, n, k;
    const bf16 *A; int lda; long long stride_a;
    const bf16 *B; int ldb; long long stride_b;
    const void *C;                    // NULL: C = D (read only when beta != 0)
    void *D; int ldd; long long stride_d;
    int d_fp32;
    int batch;                        // 0 or 1: a single matmul
    float alpha, beta;
    cublasLtEpilogue_t epilogue;      // 0 means CUBLASLT_EPILOGUE_DEFAULT
    const void *bias;                 // BIAS input (D's type), or BGRADB output
    void *aux; long long aux_ld;      // GELU input: written by GELU_AUX*, read by DGELU
} MatmulArgs;
// Returns 1 when run, 0 when cuBLASLt has no algorithm for it (nothing launched).
// Any other failure exits with the call, the shape and the status.
int matmul_lt(const MatmulArgs *a, cudaStream_t stream);

// out (rows, out_dim) = inp (rows, in_dim) @ weight^T [+ bias] [+ residual].
// gelu_pre != NULL: gelu_pre receives the pre-activation and out = gelu(gelu_pre)
// (no residual then). residual may alias nothing else; out must differ from inp.
void matmul_forward(bf16 *out, const bf16 *inp, const bf16 *weight, const bf16 *bias,
                    const bf16 *residual, bf16 *gelu_pre, int rows, int in_dim, int out_dim,
                    cudaStream_t stream);
// dinp (rows, in_dim) = alpha * dout (rows, out_dim) @ weight, overwritten;
// gelu_pre != NULL: multiplied by gelu'(gelu_pre) (the layer's input was gelu(gelu_pre)).
void matmul_backward_input(bf16 *dinp, const bf16 *dout, const bf16 *weight, const bf16 *gelu_pre,
                           float alpha, int rows, int in_dim, int out_dim, cudaStream_t stream);
// dweight (out_dim, in_dim) fp32 += alpha * dout^T @ inp; dbias (out_dim) fp32, if not
// NULL, += alpha * column sums of dout. scratch: matmul_backward_scratch_floats() floats
// (cuda_kernel_sizes.h).
void matmul_backward_weight(float *dweight, float *dbias, const bf16 *dout, const bf16 *inp,
                            float alpha, int rows, int in_dim, int out_dim, float *scratch,
                            cudaStream_t stream);

// Tiles of a linear (gpt2_cuda.cu with tile_linear K > 1): the same products on a block of
// out_dim columns of row-major matrices whose rows are ld apart -- a tile of W (out_dim
// rows of the full weight) writes its column block of out and reads that of dout. Pointers
// and pitches must keep 16-byte alignment (multiples of 8 elements).
// out (rows ld_out apart) = inp @ weight^T [+ bias] [+ residual (rows ld_out apart)].
void matmul_forward_tile(bf16 *out, int ld_out, const bf16 *inp, const bf16 *weight, const bf16 *bias,
                         const bf16 *residual, int rows, int in_dim, int out_dim, cudaStream_t stream);
// dinp (rows, in_dim) fp32 = alpha * dout (rows ld_dout apart) @ weight, added to dinp when
// accumulate: the tiles' contributions sum in fp32, rounded to bf16 once by the caller.
void matmul_backward_input_tile(float *dinp, int accumulate, const bf16 *dout, int ld_dout, const bf16 *weight,
                                float alpha, int rows, int in_dim, int out_dim, cudaStream_t stream);
// dweight (out_dim, in_dim) += alpha * dout^T @ inp, dbias += alpha * column sums of dout
// (rows ld_dout apart).
void matmul_backward_weight_tile(float *dweight, float *dbias, const bf16 *dout, int ld_dout, const bf16 *inp,
                                 float alpha, int rows, int in_dim, int out_dim, float *scratch, cudaStream_t stream);

#endif
