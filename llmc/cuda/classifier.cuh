// classifier.cuh: the fused softmax + cross-entropy + its gradient, one pass per row,
// without materializing probabilities.
#ifndef LLMC_CLASSIFIER_CUH
#define LLMC_CLASSIFIER_CUH

#include "cuda_utils.cuh"

// For each of N rows of logits (N, Vp) over the first V columns (Vp % 8 == 0):
//   losses[row] = logsumexp(logits[row]) - logits[row][target]
// and the row is overwritten in place by the unscaled gradient of that loss:
//   softmax(logits[row]) - onehot(target), with zeros in the padding columns [V, Vp).
// The backward matmuls apply the loss scale as their alpha.
void classifier_forward_backward(bf16 *logits, float *losses, const int *targets, int N, int V, int Vp,
                                 cudaStream_t stream);

// *loss_sum += sum of losses[0..N), summed in a fixed order.
void loss_accumulate(double *loss_sum, const float *losses, int N, cudaStream_t stream);

#endif
