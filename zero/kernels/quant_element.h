// quant_element.h: the element rules of zero/'s block quantization (ZeRO++ qwZ int8, qgZ
// int4), shared by the C kernels (quant.c) and the CUDA kernels (quant_cuda.cu) so both
// give the same bits. Every float operation is a separately rounded IEEE op from
// llmc/numerics/adamw.h (plain C under -ffp-contract=off on the host, _rn PTX on the device), and
// the order statistics are integer comparisons of float bits, so no compiler or fast-math
// setting can change a result.
//
// A block of values x with m = max|x| gets one fp32 scale s and integers q in [-Q, Q]
// (Q = 127 for int8, 7 for int4): s = m / Q (see quant_scale for the two ends of the
// range), q = round-to-nearest-even(x / s), and x is read back as q * s. An all-zero block
// has s = 0 and q = 0 and reads back as exact zeros.
#ifndef ZERO_QUANT_ELEMENT_H
#define ZERO_QUANT_ELEMENT_H

#include <stdint.h>

#include "../../llmc/numerics/adamw.h"

#ifdef __CUDACC__
#define QUANT_HD __host__ __device__
#else
#define QUANT_HD
#endif

#define QUANT_INT8_MAX 127
#define QUANT_INT4_MAX 7

// |x|'s bits: for non-negative floats the unsigned order of the bits is the float order,
// and every bit pattern from 0x7f800000 up is infinity or a NaN.
#define QUANT_ABS_BITS(u) ((u) & 0x7fffffffu)
#define QUANT_NONFINITE_BITS 0x7f800000u

static inline QUANT_HD uint32_t quant_bits_of(float x) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(x);
#else
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
#endif
}
static inline QUANT_HD float quant_float_of(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
#endif
}

// bf16 bits widened to fp32 (exact).
static inline QUANT_HD float quant_bf16_to_f32(uint16_t h) { return quant_float_of((uint32_t)h << 16); }

// fp32 to bf16, round to nearest even; a NaN stays a (quiet) NaN with its sign.
static inline QUANT_HD uint16_t quant_f32_to_bf16(float x) {
    uint32_t u = quant_bits_of(x);
    if (QUANT_ABS_BITS(u) > QUANT_NONFINITE_BITS) return (uint16_t)((u >> 16) | 0x0040u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// The scale of a block whose max|x| has bits amax_bits (finite). s is m / Q rounded to
// nearest, moved by one ulp at the two ends of the range where that is not enough:
// - s below FLT_MIN (m < Q * 2^-126) has fewer than 24 bits; when Q * s < m the largest
//   values would be clamped by up to Q/2 steps, so s goes up one ulp (then Q * s >= m);
// - m near FLT_MAX: Q * s may round to infinity; s goes down one ulp (the clamp then
//   costs at most Q ulps of s, far below half a step).
// The comparisons are exact: s * Q in double is exact (24 + 7 bits).
static inline QUANT_HD float quant_scale(uint32_t amax_bits, int qmax) {
    if (amax_bits == 0) return 0.0f;
    const float m = quant_float_of(amax_bits), fq = (float)qmax;
    float s = adamw_div(m, fq);
    uint32_t sb = quant_bits_of(s);
    if (sb < 0x00800000u) {
#ifdef __CUDA_ARCH__
        const double top = __dmul_rn(adamw_f64(s), (double)qmax);
#else
        const double top = (double)s * (double)qmax;
#endif
        if (top < adamw_f64(m)) sb += 1;
    } else if (QUANT_ABS_BITS(quant_bits_of(adamw_mul(fq, s))) >= QUANT_NONFINITE_BITS) {
        sb -= 1;
    }
    return quant_float_of(sb);
}

// 1.5 * 2^23: for |y| < 2^22, (y + MAGIC) - MAGIC is y rounded to the nearest integer,
// ties to even (the sum lands where the float spacing is 1 and IEEE addition rounds to
// nearest even), in two rounded additions that no compiler may fold.
#define QUANT_RNE_MAGIC 12582912.0f

// q for x in a block of scale s > 0: round-to-nearest-even(x / s), clamped to
// [-qmax, qmax]. x is finite. (Branch-free, so that host loops over it vectorize.)
static inline QUANT_HD int quant_round(float x, float s, int qmax) {
    const float y = adamw_div(x, s);
    const int q = (int)adamw_add(adamw_add(y, QUANT_RNE_MAGIC), -QUANT_RNE_MAGIC);
    return q > qmax ? qmax : (q < -qmax ? -qmax : q);
}

// The same for any block: s = 0 (an all-zero block) and s = NaN (a refused block) give 0.
static inline QUANT_HD int quant_element(float x, float s, int qmax) {
    return s > 0.0f ? quant_round(x, s, qmax) : 0;
}

// x read back: q * s.
static inline QUANT_HD float dequant_element(int q, float s) { return adamw_mul((float)q, s); }

// int4 storage: two's complement nibbles, element 2k in the low nibble of byte k and
// element 2k+1 in the high nibble.
static inline QUANT_HD uint8_t quant_pack_int4(int lo, int hi) {
    return (uint8_t)(((unsigned)lo & 0xfu) | (((unsigned)hi & 0xfu) << 4));
}
// nibble 0 (low) or 1 (high) of a byte, sign-extended.
static inline QUANT_HD int quant_unpack_int4(uint8_t byte, int high) {
    const int v = high ? (byte >> 4) : (byte & 0xf);
    return v >= 8 ? v - 16 : v;
}

#endif
