// cuda_kernel_sizes.h: what host code must know of the CUDA kernels' memory and limits:
// the scratch floats of the deterministic reductions, the cuBLASLt workspace, the part of
// the cuDNN attention workspace the model lays out itself, the widest LayerNorm row.
// Plain C without CUDA headers: the kernels take their constants from here, and a dry run
// sizes the CUDA model from the same numbers on a machine without a GPU.
#ifndef LLMC_CUDA_KERNEL_SIZES_H
#define LLMC_CUDA_KERNEL_SIZES_H

#include <stddef.h>

// layernorm.cu's backward: each block sums its rows' weight and bias gradients into one
// partial; it takes LAYERNORM_BWD_ROWS rows, or fewer (down to LAYERNORM_BWD_MIN_ROWS) so
// that a small batch gives up to LAYERNORM_BWD_BLOCKS blocks to fill the multiprocessors.
// The count depends on N alone, never on the GPU, so the sums' order is the same everywhere.
#define LAYERNORM_BWD_ROWS 64
#define LAYERNORM_BWD_MIN_ROWS 16
#define LAYERNORM_BWD_BLOCKS 256
#define LAYERNORM_BWD_WARPS 4     // warps per block; a block's row count is a multiple of it
#define LAYERNORM_MAX_C 4096      // layernorm.cu: widest row a warp keeps in registers
#define BIAS_GRAD_ROWS 256        // bias_grad.cu: rows per chunk, one partial column sum each
// cuBLASLt's one workspace (matmul_init): what cuBLAS recommends for Hopper, enough for any
// split-k on Ampere too.
#define MATMUL_WORKSPACE_BYTES ((size_t)32 << 20)
#define ATTENTION_CUDNN_WORKSPACE_ALIGN 256

static inline size_t kernel_ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }
static inline size_t kernel_round_up(size_t a, size_t b) { return kernel_ceil_div(a, b) * b; }

// Rows per layernorm_backward() block for N rows.
static inline size_t layernorm_backward_rows(int N) {
    size_t r = kernel_round_up(kernel_ceil_div((size_t)N, LAYERNORM_BWD_BLOCKS), LAYERNORM_BWD_WARPS);
    return r < LAYERNORM_BWD_MIN_ROWS ? LAYERNORM_BWD_MIN_ROWS : r > LAYERNORM_BWD_ROWS ? LAYERNORM_BWD_ROWS : r;
}
// Floats of scratch layernorm_backward() needs for any N' <= N rows of C (a model built for
// N runs smaller batches in the same scratch): per block, the weight and bias partials of
// C rounded up to a whole 256 columns (a warp's 16-byte vectors). The block count is not
// monotone in N (4096 rows make 256 blocks of 16, 4097 make 205 of 20), so the most
// blocks of any N' <= N: min(ceil(N / MIN_ROWS), BLOCKS) covers every N' in the range where
// rows grow past MIN_ROWS, ceil(N / rows(N)) the rest.
static inline size_t layernorm_backward_scratch_floats(int N, int C) {
    size_t blocks = kernel_ceil_div((size_t)N, layernorm_backward_rows(N));
    size_t small = kernel_ceil_div((size_t)N, LAYERNORM_BWD_MIN_ROWS);
    if (small > LAYERNORM_BWD_BLOCKS) small = LAYERNORM_BWD_BLOCKS;
    return (blocks > small ? blocks : small) * 2 * kernel_round_up((size_t)C, 256);
}
// Bytes of dynamic shared memory a layernorm_backward() block takes for rows of C: each
// warp's weight and bias sums, C rounded up to a whole 256 columns. Past 48 KiB a block opts
// in (cudaFuncSetAttribute), up to the device's limit (99 KiB on compute capability 8.6 and
// 8.9, 163 on 8.0, 227 on 9.0).
static inline size_t layernorm_backward_smem_bytes(int C) {
    return (size_t)LAYERNORM_BWD_WARPS * 2 * kernel_round_up((size_t)C, 256) * sizeof(float);
}
// Floats of scratch bias_grad() needs for (rows, cols).
static inline size_t bias_grad_scratch_floats(int rows, int cols) {
    return kernel_ceil_div((size_t)rows, BIAS_GRAD_ROWS) * (size_t)cols;
}
// Floats of scratch matmul_backward_weight() needs: its bias gradient, or the padded
// fp32 vector of the fused epilogue.
static inline size_t matmul_backward_scratch_floats(int rows, int out_dim) {
    size_t a = kernel_round_up((size_t)out_dim, 64), b = bias_grad_scratch_floats(rows, out_dim);
    return a > b ? a : b;
}

// The cuDNN attention backward's workspace (attention_cudnn.cu): the engine's own plan
// workspace (only cuDNN knows it, at run time), then the softmax row sums Dsum (fp32,
// B*NH*T) and, unless the deterministic variant runs, the fp32 dQ accumulator (B*NH*T*HS).
typedef struct {
    size_t dsum_offset, dq_accum_offset, bytes;
} AttentionCudnnBwdWorkspace;

static inline AttentionCudnnBwdWorkspace attention_cudnn_bwd_workspace(size_t plan_bytes, int B, int T, int NH,
                                                                       int HS, int dq_accumulator) {
    const size_t a = ATTENTION_CUDNN_WORKSPACE_ALIGN, rows = (size_t)B * NH * T;
    AttentionCudnnBwdWorkspace w;
    w.dsum_offset = kernel_round_up(plan_bytes, a);
    w.bytes = w.dsum_offset + kernel_round_up(rows * sizeof(float), a);
    w.dq_accum_offset = 0;
    if (dq_accumulator) {
        w.dq_accum_offset = w.bytes;
        w.bytes += kernel_round_up(rows * (size_t)HS * sizeof(float), a);
    }
    return w;
}

#endif
