// adamw.h: the one AdamW element update, the one stochastic rounding of its fp32 result
// to the bf16 working copy, and the one order of the gradient norm that sets its clip
// scale, shared by the CPU model, the CUDA kernels and zero/'s sharded optimizers (host
// and CUDA backends). Each operation is spelled out as a separately rounded IEEE op (no
// FMA contraction: host code builds with -ffp-contract=off, device code uses the _rn
// intrinsics or PTX that --use_fast_math cannot rewrite), so CPU and GPU give
// bit-identical parameters.
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

// ----------------------------------------------------------------------------
// The global gradient norm and the clip scale AdamW's grad_scale takes, one order for
// every trainer and backend, so that sharded and unsharded runs clip by the same bits.
//
// sum of squares of a range of n elements, in double: the range split into blocks of
// ADAMW_SUMSQ_BLOCK elements from its start; each block summed left to right (x widened
// to double, squared, added: each op rounded once); the block sums added left to right.
// A list of ranges (the GPT-2 slices of gpt2_slices(), or one rank's shard of each) adds
// its range sums left to right, starting from 0.0. norm = (float)sqrt(total).

#define ADAMW_SUMSQ_BLOCK 4096

// Exact float -> double widening. nvcc's --use_fast_math turns a plain cast into
// cvt.ftz.f64.f32, which flushes subnormal gradients to zero; the asm keeps them.
static inline ADAMW_HD double adamw_f64(float x) {
#ifdef __CUDA_ARCH__
    double r;
    asm("cvt.f64.f32 %0, %1;" : "=d"(r) : "f"(x));
    return r;
#else
    return (double)x;
#endif
}

// acc + x^2, the step of every block sum.
static inline ADAMW_HD double adamw_sumsq_add(double acc, float x) {
    double v = adamw_f64(x);
#ifdef __CUDA_ARCH__
    return __dadd_rn(acc, __dmul_rn(v, v));   // never contracted into an fma
#else
    return acc + v * v;                        // host code builds with -ffp-contract=off
#endif
}

// The sum of squares of x[0, n) in the order above, on one thread: the definition the
// parallel versions (threads over blocks, warps over blocks) reproduce.
static inline double adamw_sumsq(const float *x, size_t n) {
    double total = 0.0;
    for (size_t lo = 0; lo < n; lo += ADAMW_SUMSQ_BLOCK) {
        size_t hi = n - lo < ADAMW_SUMSQ_BLOCK ? n : lo + ADAMW_SUMSQ_BLOCK;
        double block = 0.0;
        for (size_t i = lo; i < hi; i++) block = adamw_sumsq_add(block, x[i]);
        total += block;
    }
    return total;
}

// norm = (float)sqrt(total), correctly rounded on host and device alike.
static inline ADAMW_HD float adamw_norm(double total) {
#ifdef __CUDA_ARCH__
    float r;
    asm("cvt.rn.f32.f64 %0, %1;" : "=f"(r) : "d"(__dsqrt_rn(total)));
    return r;
#else
    return (float)sqrt(total);
#endif
}

// The clip scale: grad_clip / norm when grad_clip > 0 and the norm exceeds it, else 1 (a
// NaN norm too). Compared as doubles (exact for floats) so that fast math's flushing
// compares cannot change the decision; the division is IEEE (adamw_div).
static inline ADAMW_HD float adamw_clip_scale(float norm, float grad_clip) {
    const double n = adamw_f64(norm), c = adamw_f64(grad_clip);
    return (c > 0.0 && n > c) ? adamw_div(grad_clip, norm) : 1.0f;
}

#ifdef __CUDACC__
// One warp's share of the block sums: each lane passes one block (its first element and
// its length, <= ADAMW_SUMSQ_BLOCK; length 0 for none) and gets back that block's sum in
// the order above. The warp stages 32 x 32 tiles through shared memory so that global
// loads stay coalesced while each lane still walks its own block left to right; elements
// past a block's end count as 0, which leaves a sum of squares (+0 or more, or NaN)
// unchanged. All 32 lanes must call it, with their warp's own tile.
typedef struct {
    float v[32][33];          // 33: lanes read a row each without bank conflicts
    const float *row[32];
    int len[32];
} AdamWSumsqTile;

static __device__ double adamw_sumsq_warp(const float *block, int len, AdamWSumsqTile *tile) {
    const int lane = threadIdx.x & 31;
    tile->row[lane] = block;
    tile->len[lane] = len;
    int longest = len;
    for (int o = 16; o > 0; o >>= 1) longest = max(longest, __shfl_xor_sync(0xffffffffu, longest, o));
    __syncwarp();
    double sum = 0.0;
    for (int t = 0; t < longest; t += 32) {
        for (int r = 0; r < 32; r++) {
            const int i = t + lane;
            tile->v[r][lane] = i < tile->len[r] ? tile->row[r][i] : 0.0f;
        }
        __syncwarp();
#pragma unroll 8
        for (int k = 0; k < 32; k++) sum = adamw_sumsq_add(sum, tile->v[lane][k]);
        __syncwarp();
    }
    return sum;
}
#endif

// The array form for the host (SIMD and threads, the same bits) is adamw_cpu.h, which
// includes this file; host code that updates whole arrays includes that one.

#endif
