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

// 1 when the library's rules allow the fused attention for this runtime cuDNN, sequence
// length T and head size HS; else 0 with why (cap bytes). What needs the device (sm_80 or
// newer) and what only building the plans shows are decided by attention_cudnn_prepare, which
// applies these rules first; a dry run without a GPU applies them alone.
static inline int attention_cudnn_rules(size_t cudnn_version, int T, int HS, char *why, size_t cap) {
    char name[32];
    attention_cudnn_version_name(cudnn_version, name, sizeof name);
    if (cudnn_version < 90000)
        snprintf(why, cap, "runtime cuDNN %zu is older than 9.0", cudnn_version);
    else if (!attention_cudnn_backward_ok(cudnn_version))
        snprintf(why, cap, "runtime cuDNN %s (%zu) has a known bad bf16 attention backward; the plain kernels run "
                 "instead (cuDNN 9.10.2 or newer is fine)", name, cudnn_version);
    else if (HS % 8 != 0)
        snprintf(why, cap, "head size must be a multiple of 8 (16-byte aligned rows)");
    // before 9.15.1 the fused backward needed an explicit padding mask when the key length is
    // not a multiple of 128; that variant is not built here
    else if (cudnn_version < 91501 && T % 128 != 0)
        snprintf(why, cap, "runtime cuDNN %zu needs T %% 128 == 0 for the fused backward (T=%d)", cudnn_version, T);
    else
        return 1;
    return 0;
}

#endif
