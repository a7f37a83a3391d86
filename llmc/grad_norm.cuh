// grad_norm.cuh: global gradient norm and the clip scale, computed and kept on the device.
#ifndef LLMC_GRAD_NORM_CUH
#define LLMC_GRAD_NORM_CUH

#include "cuda_kernel_sizes.h"   // grad_norm_scratch_floats(): the scratch grad_norm_clip() needs
#include "cuda_utils.cuh"

// out[0] = sqrt(sum of g[i]^2), out[1] = grad_clip / out[0] when grad_clip > 0 and the
// norm exceeds it, else 1 (so grads * out[1] has norm <= grad_clip). A fixed grid and
// fixed summation order make the result the same on every run and every GPU model.
void grad_norm_clip(float *out, const float *g, size_t n, float grad_clip, float *scratch, cudaStream_t stream);

#endif
