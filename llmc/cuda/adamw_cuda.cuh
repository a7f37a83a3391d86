// adamw_cuda.cuh: the AdamW step on fp32 master weights and moments, and the refresh of
// the bf16 working copy by stochastic rounding. Each element goes through adamw_element()
// (llmc/numerics/adamw.h), the same IEEE operations as the CPU model, so the fp32 results are
// bit-identical to the host's for identical inputs.
#ifndef LLMC_ADAMW_CUDA_CUH
#define LLMC_ADAMW_CUDA_CUH

#include "../model/gpt2_config.h"
#include "../numerics/adamw.h"
#include "cuda_utils.cuh"

// The AdamW step over a table of slices (gpt2_slices: a model's tensors, in any offset
// order): slice k is elements [offset, offset + numel) of master, m, v, grads and params,
// with its decay flag. Rounding noise is keyed on each element's position when the slices
// are laid end to end in table order: bf16 element i of slice k after step t is
// adamw_round_bf16_at(master[offset + i], seed, t, key + i), key = the numel of slices 0..k-1
// (llmc/numerics/adamw.h, the rule zero/'s refresh uses too), so it does not depend on how
// the vector is split (ZeRO shards). A few launches for any table, no host sync.
// grad_scale: device pointer to the clip scale (overrides hp.grad_scale), or NULL.
// params: the bf16 copy to refresh, or NULL.
void adamw_update_slices(float *master, bf16 *params, const float *grads, float *m, float *v,
                         const GPT2Slice *slices, int n, AdamWParams hp, const float *grad_scale, uint64_t seed,
                         int step, cudaStream_t stream);

// params (bf16) = stochastic rounding of master over the same table, with the noise
// adamw_update_slices() uses at `step` (step 0: the initial copy).
void round_stochastic_slices(bf16 *params, const float *master, const GPT2Slice *slices, int n, uint64_t seed,
                             int step, cudaStream_t stream);

#endif
