// attention_cudnn_version.h: which runtime cuDNN versions the cuDNN attention
// (attention_cudnn.cu) accepts, and the masked-score value it binds. Pure C with no CUDA
// or cuDNN headers, so the CPU tests check these decisions without a GPU.
//
// Versions are cudnnGetVersion()'s numbers: for cuDNN 9, major * 10000 + minor * 100 +
// patch (9.10.1 is 91001).
#ifndef LLMC_ATTENTION_CUDNN_VERSION_H
#define LLMC_ATTENTION_CUDNN_VERSION_H

#include <float.h>
#include <stddef.h>
#include <stdio.h>

// The value written over masked (future) scores before the softmax, for every cuDNN
// version: the lowest finite float. exp() of it minus the row maximum is 0 as with -inf,
// and no infinity ever enters the fused kernels' arithmetic.
#define ATTENTION_CUDNN_MASK_VALUE (-FLT_MAX)

// 1 when the bf16 attention backward of this runtime cuDNN can be used; 0 for 9.10.0 and
// 9.10.1, whose backward is known to give bad gradients (the model then runs the plain
// kernels of attention_fallback.cu for the whole attention).
static inline int attention_cudnn_backward_ok(size_t cudnn_version) {
    return !(cudnn_version >= 91000 && cudnn_version <= 91001);
}

// "9.10.1" for 91001 (cuDNN 9 numbering).
static inline void attention_cudnn_version_name(size_t cudnn_version, char *buf, size_t cap) {
    snprintf(buf, cap, "%zu.%zu.%zu", cudnn_version / 10000, cudnn_version / 100 % 100, cudnn_version % 100);
}

#endif
