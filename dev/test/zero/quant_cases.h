// quant_cases.h: the input tensors the quantization tests run on (test_zero_quant.c on the
// CPU, gpu_zero_quant.c against the GPU): random data and the edges of the float range,
// each a pure function of (case, seed, index). Header-only.
#ifndef QUANT_CASES_H
#define QUANT_CASES_H

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../../../llmc/numerics/rand.h"

enum {
    QCASE_NORMAL,       // N(0, 1) scaled per block by 2^[-20, 20)
    QCASE_ZERO_BLOCKS,  // every other block all zeros (some -0.0), the rest random
    QCASE_ONE_HUGE,     // per block one value 1e30, the others ~1e-3 (they quantize to 0)
    QCASE_TINY,         // subnormal and near-FLT_MIN magnitudes, down to 2^-149
    QCASE_HUGE,         // near FLT_MAX (one block holds FLT_MAX itself) and bf16's max
    QCASE_TIES,         // integers and half-integers up to 127 (the block max): exact ties
    QCASE_COUNT
};

static const char *const quant_case_names[QCASE_COUNT] = {
    "normal", "zero blocks", "one huge", "tiny", "huge", "ties"};

static inline float quant_case_value(int c, uint64_t seed, size_t i, int block) {
    const uint64_t stream = 0x9a17u + (uint64_t)c;
    const size_t b = i / (size_t)block, k = i % (size_t)block;
    const float g = rng_normal(seed, stream, i);
    switch (c) {
    case QCASE_NORMAL:
        return ldexpf(g, (int)rng_below(seed, stream + 100, b, 40) - 20);
    case QCASE_ZERO_BLOCKS:
        if (b % 2 == 0) return (k % 3 == 0) ? -0.0f : 0.0f;
        return g;
    case QCASE_ONE_HUGE:
        return k == (size_t)(b * 7 % (size_t)block) ? (b % 2 ? -1e30f : 1e30f) : 1e-3f * g;
    case QCASE_TINY: {
        // per block a different top: from 2^-149 (one ulp of 0) to FLT_MIN * 200
        const int e = -149 + (int)(b % 30) * 4 + (int)rng_below(seed, stream, i, 4);
        return ldexpf(g, e > -120 ? -120 : e);
    }
    case QCASE_HUGE: {
        if (b % 3 == 0 && k == 0) return FLT_MAX;
        if (b % 3 == 1 && k == 1) return -3.3895313892515355e38f;   // bf16's largest, 0xff7f
        return ldexpf(fminf(fmaxf(g, -7.9f), 7.9f), 124);   // below FLT_MAX
    }
    case QCASE_TIES:
        if (k == 0) return 127.0f;    // block max 127: scale 1, q = x / 1 exactly
        return (float)((int)rng_below(seed, stream, i, 253) - 126) * (rng_below(seed, stream + 1, i, 2) ? 0.5f : 1.0f);
    default:
        return 0.0f;
    }
}

// Tensor lengths around a block size: one value, a partial block, exact blocks, partial
// last blocks. Returns how many (at most 5) it wrote to out.
static inline size_t quant_case_lengths(int block, size_t *out) {
    size_t B = (size_t)block, k = 0;
    out[k++] = 1;
    out[k++] = B > 2 ? B - 1 : 3;
    out[k++] = B;
    out[k++] = 3 * B + 1;
    out[k++] = 9 * B - 1;
    return k;
}

static inline void quant_case_fill(int c, uint64_t seed, float *x, size_t n, int block) {
    for (size_t i = 0; i < n; i++) x[i] = quant_case_value(c, seed, i, block);
}

// The bf16 version of a case: the fp32 value truncated to its upper half (any bf16 value
// is an input like another; truncation keeps FLT_MAX-ish values finite).
static inline void quant_case_fill_bf16(int c, uint64_t seed, uint16_t *x, size_t n, int block) {
    for (size_t i = 0; i < n; i++) {
        float v = quant_case_value(c, seed, i, block);
        uint32_t u;
        memcpy(&u, &v, sizeof u);
        x[i] = (uint16_t)(u >> 16);
    }
}

#endif
