// grad_norm.cuh: the global gradient norm and the clip scale, computed and kept on the
// device, in grad_norm.h's order: the same bits as the host version (grad_norm_sumsq) and
// as zero/ on the same slice table, whatever the GPU.
#ifndef LLMC_GRAD_NORM_CUH
#define LLMC_GRAD_NORM_CUH

#include "cuda_utils.cuh"
#include "../model/grad_norm.h"

// Lays the plan out in mem (grad_norm_plan_bytes of device memory, 256-byte aligned) and
// queues the upload of the span table on stream (slices may be freed on return).
void grad_norm_plan_init(GradNormPlan *plan, void *mem, const GPT2Slice *slices, int n, cudaStream_t stream);
// out[0] = norm of g over the plan's slices, out[1] = adamw_clip_scale(norm, grad_clip):
// grad_clip / norm when grad_clip > 0 and the norm exceeds it, else 1 (so grads * out[1]
// has norm <= grad_clip). One pass over g, two launches, no host sync.
void grad_norm_clip(float *out, const float *g, const GradNormPlan *plan, float grad_clip, cudaStream_t stream);

#endif
