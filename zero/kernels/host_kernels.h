/*
host_kernels.h: the element kernels over host memory, called on the calling thread. The
host backend runs them for its stream operations and offload.c inside its CPU optimizer,
so both give the same bits (backend.h states each kernel's order of operations).
*/
#ifndef ZERO_HOST_KERNELS_H
#define ZERO_HOST_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "../../llmc/numerics/adamw.h"
#include "../zero.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZERO_SUMSQ_BLOCK ADAMW_SUMSQ_BLOCK   // defined with the order in llmc/numerics/adamw.h

static inline float zero_bf16_to_f32(uint16_t h) {
    union { uint32_t u; float f; } v = {(uint32_t)h << 16};
    return v.f;
}

// out[i] (+)= s_0[i] + s_1[i] + ... in slice order (slice q at src + q * stride elements):
// accumulate 1 adds the sum into out (reduce_slices), 0 stores it (sum_slices).
void zero_cpu_slices(float *out, const void *src, size_t stride, int nslices, size_t n, ZeroDType dt, int accumulate);
void zero_cpu_adamw(float *param, const float *grad, float *m, float *v, size_t n, const AdamWParams *p, int decay);
void zero_cpu_refresh(void *dst, ZeroDType dt, const float *master, size_t n, uint64_t seed, int t, uint64_t gidx0);
// total plus x's block sums in order: a range summed in pieces that start at block
// boundaries gives sum_squares's bits.
double zero_cpu_sum_squares(double total, const float *x, size_t n);

#ifdef __cplusplus
}
#endif
#endif
