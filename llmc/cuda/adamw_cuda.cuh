// adamw_cuda.cuh: the AdamW step on fp32 master weights and moments, and the refresh of
// the bf16 working copy by stochastic rounding. Each element goes through adamw_element()
// (llmc/numerics/adamw.h), the same IEEE operations as the CPU model, so the fp32 results are
// bit-identical to the host's for identical inputs.
#ifndef LLMC_ADAMW_CUDA_CUH
#define LLMC_ADAMW_CUDA_CUH

#include "../numerics/adamw.h"
#include "cuda_utils.cuh"

// Updates elements [0, n) of master, m, v from grads; these are elements
// [global_offset, global_offset + n) of the model's parameter vector as the caller numbers
// it, which is what the rounding noise is keyed on: bf16 element i after step t is
// adamw_round_bf16_at(master[i], seed, t, global_offset + i) (llmc/numerics/adamw.h, the rule zero/'s
// refresh uses too), so it does not depend on how the vector is split (ZeRO shards).
// grad_scale: device pointer to the clip scale (overrides hp.grad_scale), or NULL.
// params: the bf16 copy to refresh, or NULL.
void adamw_update(float *master, bf16 *params, const float *grads, float *m, float *v, size_t n,
                  uint64_t global_offset, AdamWParams hp, int decay, const float *grad_scale, uint64_t seed,
                  int step, cudaStream_t stream);

// params (bf16) = stochastic rounding of master with the noise adamw_update() uses at `step`
// (step 0: the initial copy).
void round_stochastic(bf16 *params, const float *master, size_t n, uint64_t global_offset, uint64_t seed,
                      int step, cudaStream_t stream);

#endif
