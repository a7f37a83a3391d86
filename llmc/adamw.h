// adamw.h: the one AdamW element update and the one stochastic rounding of its fp32
// result to the bf16 working copy, shared by the CPU model, the CUDA kernels and zero/'s
// sharded optimizers (host and CUDA backends). Each operation is spelled out as a
// separately rounded IEEE op (no FMA contraction: host code builds with -ffp-contract=off,
// device code uses the _rn intrinsics), so CPU and GPU give bit-identical parameters.
#ifndef LLMC_ADAMW_H
#define LLMC_ADAMW_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "rand.h"

#ifdef __CUDACC__
#define ADAMW_HD __host__ __device__
#else
#define ADAMW_HD
#endif

static inline ADAMW_HD float adamw_mul(float a, float b) {
#ifdef __CUDA_ARCH__
    float r;
    asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    return a * b;
#endif
}
static inline ADAMW_HD float adamw_add(float a, float b) {
#ifdef __CUDA_ARCH__
    float r;
    asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    return a + b;
#endif
}
static inline ADAMW_HD float adamw_div(float a, float b) {
#ifdef __CUDA_ARCH__
    float r;
    asm("div.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    return a / b;
#endif
}
static inline ADAMW_HD float adamw_sqrt(float a) {
#ifdef __CUDA_ARCH__
    float r;
    asm("sqrt.rn.f32 %0, %1;" : "=f"(r) : "f"(a));
    return r;
#else
    return sqrtf(a);
#endif
}

// Per-step scalars, computed once on the host: bias corrections 1 - beta^t.
typedef struct {
    float lr, beta1, beta2, eps, weight_decay, grad_scale;
    float bias_correction1, bias_correction2;
} AdamWParams;

static inline AdamWParams adamw_params(float lr, float beta1, float beta2, float eps,
                                       float weight_decay, float grad_scale, int t) {
    AdamWParams a;
    a.lr = lr; a.beta1 = beta1; a.beta2 = beta2; a.eps = eps;
    a.weight_decay = weight_decay; a.grad_scale = grad_scale;
    a.bias_correction1 = (float)(1.0 - pow((double)beta1, (double)t));
    a.bias_correction2 = (float)(1.0 - pow((double)beta2, (double)t));
    return a;
}

// Updates *m and *v in place and returns the new parameter. decay is 0 or 1.
static inline ADAMW_HD float adamw_element(float param, float grad, float *m, float *v,
                                           const AdamWParams *a, int decay) {
    float g = adamw_mul(grad, a->grad_scale);
    float mt = adamw_add(adamw_mul(a->beta1, *m), adamw_mul(1.0f - a->beta1, g));
    float vt = adamw_add(adamw_mul(a->beta2, *v), adamw_mul(adamw_mul(1.0f - a->beta2, g), g));
    *m = mt;
    *v = vt;
    float mhat = adamw_div(mt, a->bias_correction1);
    float vhat = adamw_div(vt, a->bias_correction2);
    float upd = adamw_div(mhat, adamw_add(adamw_sqrt(vhat), a->eps));
    if (decay) upd = adamw_add(upd, adamw_mul(a->weight_decay, param));
    return adamw_add(param, -adamw_mul(a->lr, upd));
}

// ----------------------------------------------------------------------------
// The bf16 working copy: stochastic rounding of the fp32 master, one rule for every
// trainer and backend, so that sharded and unsharded runs can give the same bits.

// The random bits (the low 16 are used) that round element gidx of the model's parameter
// vector after optimizer step t (t = 0: the copy made at initialization). gidx < 2^40.
static inline ADAMW_HD uint32_t adamw_rounding_bits(uint64_t seed, uint64_t t, uint64_t gidx) {
    return rng_u32(seed, RNG_STREAM_ROUNDING, (t << 40) | gidx);
}

// bf16 bits of x: the random bits are added below bf16's last kept bit, then the low half
// is dropped. The magnitude carries into the next bf16 with probability (low half of x) /
// 65536, so the rounding is unbiased; exact bf16 values never move. A finite value may
// carry past the largest finite bf16 into infinity (with that same probability). Infinity
// stays infinity and NaN stays a (quiet) NaN.
static inline ADAMW_HD uint16_t adamw_round_bf16(float x, uint32_t bits) {
    uint32_t u;
#ifdef __CUDA_ARCH__
    u = __float_as_uint(x);
#else
    memcpy(&u, &x, sizeof(u));
#endif
    if ((u & 0x7f800000u) == 0x7f800000u)   // inf or NaN: truncate, keep a NaN a NaN
        return (uint16_t)((u >> 16) | ((u & 0x007fffffu) ? 0x0040u : 0u));
    return (uint16_t)((u + (bits & 0xffffu)) >> 16);
}

// The bf16 working copy of master element gidx after step t.
static inline ADAMW_HD uint16_t adamw_round_bf16_at(float x, uint64_t seed, uint64_t t, uint64_t gidx) {
    return adamw_round_bf16(x, adamw_rounding_bits(seed, t, gidx));
}

#endif
