// attention_fallback.cuh: causal self-attention from plain pieces, for when cuDNN's
// flash attention is unavailable: cuBLASLt strided-batched matmuls for QK^T and PV, and a
// causal softmax kernel. It materializes the (B, NH, T, T) score matrix (fp32) and the
// probabilities (bf16) in caller-provided scratch; backward recomputes both rather than
// keeping one per layer.
//
// Layouts as in attention_cudnn.h: qkv (B, T, 3, NH, HS), out (B, T, NH, HS); scale 1/sqrt(HS).
#ifndef LLMC_ATTENTION_FALLBACK_CUH
#define LLMC_ATTENTION_FALLBACK_CUH

#include "cuda_utils.cuh"

// scores: B*NH*T*T floats, probs: B*NH*T*T bf16.
void attention_fallback_forward(bf16 *out, float *scores, bf16 *probs, const bf16 *qkv, int B, int T, int NH,
                                int HS, cudaStream_t stream);
// dqkv (B, T, 3C) is overwritten.
void attention_fallback_backward(bf16 *dqkv, float *scores, bf16 *probs, const bf16 *dout, const bf16 *qkv,
                                 int B, int T, int NH, int HS, cudaStream_t stream);

#endif
