// encoder.cuh: token + position embeddings, forward and backward.
#ifndef LLMC_ENCODER_CUH
#define LLMC_ENCODER_CUH

#include "cuda_utils.cuh"

// out (B, T, C) = wte[tokens[b, t]] + wpe[t]. C % 8 == 0.
void encoder_forward(bf16 *out, const int *tokens, const bf16 *wte, const bf16 *wpe, int B, int T, int C,
                     cudaStream_t stream);
// The same for a tile of wte's rows [v0, v1) (wte points at row v0): out = wte[token] for
// the tokens in it; with wpe (the last tile) every row of out gets + wpe[t], the tile's own
// rows in one rounding and the others' onto what their tiles wrote (bf16, exact): the
// untiled bits.
void encoder_forward_tile(bf16 *out, const int *tokens, const bf16 *wte, const bf16 *wpe, int v0, int v1, int B,
                          int T, int C, cudaStream_t stream);

// Positions grouped by token, prepared on the host (encoder_buckets_build) so the
// backward scatter needs no atomics: for u < num_unique, token unique_tokens[u] occurs at
// the flattened positions positions[starts[u] .. starts[u + 1]), in increasing order.
typedef struct {
    int num_unique;
    const int *unique_tokens; // (num_unique) device
    const int *starts;        // (num_unique + 1) device
    const int *positions;     // (B * T) device
} EncoderBuckets;

// Host side: fills unique_tokens, starts, positions (each sized as above) from tokens
// (n of them, each in [0, V)); counts is scratch of V ints. Returns num_unique.
int encoder_buckets_build(int *unique_tokens, int *starts, int *positions, const int *tokens, int n, int V,
                          int *counts);

// dwte[token] += sum of dout over the token's positions; dwpe[t] += sum over b of dout[b, t].
// Fixed summation order, so the result is deterministic.
void encoder_backward(float *dwte, float *dwpe, const bf16 *dout, const EncoderBuckets *buckets, int B, int T,
                      int C, cudaStream_t stream);
// The same for a tile of wte's rows [v0, v1) (dwte points at row v0; dwpe NULL but in the
// last tile): each row's sum is untiled's.
void encoder_backward_tile(float *dwte, float *dwpe, const bf16 *dout, const EncoderBuckets *buckets, int v0, int v1,
                           int B, int T, int C, cudaStream_t stream);

#endif
