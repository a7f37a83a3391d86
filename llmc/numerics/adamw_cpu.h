// adamw_cpu.h: adamw_element over whole arrays on the host, at memory speed. SIMD lanes
// (AVX-512 or AVX2 where the CPU has them, chosen at run time; plain C always) and OpenMP
// threads over fixed chunks. Every lane does adamw_element's operations in its order, each
// a separately rounded IEEE op: mul, add, div and sqrt instructions, never an FMA, rsqrt
// or reciprocal, and the FPU's subnormal mode is left alone. So every path and every
// thread count gives adamw_element's bits. (A loop over adamw_element stays scalar
// because sqrtf must set errno; the intrinsics' sqrt need not.)
//
// Host only: zero/'s host kernels (zero/kernels/host_kernels.c) and the CPU model include
// it, so both share one kernel. Like adamw.h it relies on -ffp-contract=off: GCC's
// intrinsics are plain vector arithmetic.
#ifndef LLMC_ADAMW_CPU_H
#define LLMC_ADAMW_CPU_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adamw.h"

#if defined(__GNUC__) && defined(__x86_64__)
#define ADAMW_CPU_X86 1
#include <immintrin.h>
#endif

typedef enum {
    ADAMW_CPU_AUTO = 0,   // the widest the CPU has, or ADAMW_CPU_PATH's choice
    ADAMW_CPU_PLAIN,      // adamw_element in a loop (every build)
    ADAMW_CPU_AVX2,       // 8 lanes (x86-64 with AVX2)
    ADAMW_CPU_AVX512,     // 16 lanes (x86-64 with AVX-512F)
} AdamWCpuPath;

// Elements per OpenMP work item: 4 arrays x 64 KiB, big enough to amortize the schedule,
// small enough to balance two to a few dozen threads.
#define ADAMW_CPU_CHUNK 16384

static inline const char *adamw_cpu_path_name(AdamWCpuPath path) {
    switch (path) {
    case ADAMW_CPU_PLAIN: return "plain";
    case ADAMW_CPU_AVX2: return "avx2";
    case ADAMW_CPU_AVX512: return "avx512";
    default: return "auto";
    }
}

// Whether this build and this CPU can run the path (AUTO always can).
static inline int adamw_cpu_path_supported(AdamWCpuPath path) {
    switch (path) {
    case ADAMW_CPU_AUTO:
    case ADAMW_CPU_PLAIN: return 1;
#ifdef ADAMW_CPU_X86
    case ADAMW_CPU_AVX2: return __builtin_cpu_supports("avx2") != 0;
    case ADAMW_CPU_AVX512: return __builtin_cpu_supports("avx512f") != 0;
#endif
    default: return 0;
    }
}

// The path AUTO resolves to: the environment's ADAMW_CPU_PATH (plain, avx2 or avx512)
// when set, for comparing paths in whole runs; else the widest the CPU supports. A
// request the CPU cannot honour is an error, not a silent fallback.
static inline AdamWCpuPath adamw_cpu_auto_path(void) {
    const char *want = getenv("ADAMW_CPU_PATH");
    if (want && *want) {
        for (AdamWCpuPath p = ADAMW_CPU_PLAIN; p <= ADAMW_CPU_AVX512; p++) {
            if (strcmp(want, adamw_cpu_path_name(p)) != 0) continue;
            if (adamw_cpu_path_supported(p)) return p;
            fprintf(stderr, "adamw: ADAMW_CPU_PATH=%s, but this CPU or build lacks %s\n", want, want);
            exit(EXIT_FAILURE);
        }
        fprintf(stderr, "adamw: ADAMW_CPU_PATH=%s is not one of plain, avx2, avx512\n", want);
        exit(EXIT_FAILURE);
    }
    if (adamw_cpu_path_supported(ADAMW_CPU_AVX512)) return ADAMW_CPU_AVX512;
    if (adamw_cpu_path_supported(ADAMW_CPU_AVX2)) return ADAMW_CPU_AVX2;
    return ADAMW_CPU_PLAIN;
}

// One run of n elements on the calling thread, plain C: the definition itself.
static inline void adamw_cpu_plain(float *p, const float *g, float *m, float *v, size_t n,
                                   const AdamWParams *a, int decay) {
    for (size_t i = 0; i < n; i++) p[i] = adamw_element(p[i], g[i], &m[i], &v[i], a, decay);
}

#ifdef ADAMW_CPU_X86
// The SIMD paths: adamw_element line by line, one vector op per scalar op, written once
// for both widths (V the vector type, P the intrinsics' prefix, LANES its floats); the
// tail (fewer elements than lanes) goes through adamw_element itself.
#define ADAMW_CPU_LANES(V, P, LANES)                                                               \
    const V grad_scale = P##_set1_ps(a->grad_scale);                                               \
    const V beta1 = P##_set1_ps(a->beta1), one_minus_beta1 = P##_set1_ps(1.0f - a->beta1);         \
    const V beta2 = P##_set1_ps(a->beta2), one_minus_beta2 = P##_set1_ps(1.0f - a->beta2);         \
    const V bc1 = P##_set1_ps(a->bias_correction1), bc2 = P##_set1_ps(a->bias_correction2);        \
    const V eps = P##_set1_ps(a->eps), wd = P##_set1_ps(a->weight_decay), lr = P##_set1_ps(a->lr); \
    size_t i = 0;                                                                                  \
    for (; i + LANES <= n; i += LANES) {                                                           \
        const V gr = P##_mul_ps(P##_loadu_ps(g + i), grad_scale);                                  \
        const V mt = P##_add_ps(P##_mul_ps(beta1, P##_loadu_ps(m + i)), P##_mul_ps(one_minus_beta1, gr)); \
        const V vt = P##_add_ps(P##_mul_ps(beta2, P##_loadu_ps(v + i)),                           \
                                P##_mul_ps(P##_mul_ps(one_minus_beta2, gr), gr));                  \
        P##_storeu_ps(m + i, mt);                                                                  \
        P##_storeu_ps(v + i, vt);                                                                  \
        const V mhat = P##_div_ps(mt, bc1);                                                        \
        const V vhat = P##_div_ps(vt, bc2);                                                        \
        V upd = P##_div_ps(mhat, P##_add_ps(P##_sqrt_ps(vhat), eps));                              \
        const V param = P##_loadu_ps(p + i);                                                       \
        if (decay) upd = P##_add_ps(upd, P##_mul_ps(wd, param));                                   \
        P##_storeu_ps(p + i, P##_add_ps(param, adamw_cpu_neg##P(P##_mul_ps(lr, upd))));            \
    }                                                                                              \
    adamw_cpu_plain(p + i, g + i, m + i, v + i, n - i, a, decay)

// -x: the sign bit flipped, as the scalar negation does (AVX-512F has no float xor).
__attribute__((target("avx2")))
static inline __m256 adamw_cpu_neg_mm256(__m256 x) { return _mm256_xor_ps(x, _mm256_set1_ps(-0.0f)); }
__attribute__((target("avx512f")))
static inline __m512 adamw_cpu_neg_mm512(__m512 x) {
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u)));
}

__attribute__((target("avx2")))
static inline void adamw_cpu_avx2(float *p, const float *g, float *m, float *v, size_t n,
                                  const AdamWParams *a, int decay) {
    ADAMW_CPU_LANES(__m256, _mm256, 8);
}

__attribute__((target("avx512f")))
static inline void adamw_cpu_avx512(float *p, const float *g, float *m, float *v, size_t n,
                                    const AdamWParams *a, int decay) {
    ADAMW_CPU_LANES(__m512, _mm512, 16);
}
#endif

typedef void (*AdamWCpuKernel)(float *, const float *, float *, float *, size_t, const AdamWParams *, int);

// The kernel of a path; exits with a message for a path this CPU or build lacks.
static inline AdamWCpuKernel adamw_cpu_kernel(AdamWCpuPath path) {
    if (path == ADAMW_CPU_AUTO) path = adamw_cpu_auto_path();
    if (!adamw_cpu_path_supported(path)) {
        fprintf(stderr, "adamw: path %s (%d) is not supported by this CPU or build\n", adamw_cpu_path_name(path),
                (int)path);
        exit(EXIT_FAILURE);
    }
#ifdef ADAMW_CPU_X86
    if (path == ADAMW_CPU_AVX512) return adamw_cpu_avx512;
    if (path == ADAMW_CPU_AVX2) return adamw_cpu_avx2;
#endif
    return adamw_cpu_plain;
}

// p[i] = adamw_element(p[i], g[i], &m[i], &v[i], a, decay) for i < n, on the given path
// (ADAMW_CPU_AUTO: the best one). The work items are fixed by n and p's address alone:
// chunk boundaries fall on p's 64-byte lines, so full vectors stay aligned when the four
// arrays share an alignment. Threads take whole items; the thread count changes nothing.
static inline void adamw_update_array_on(AdamWCpuPath path, float *p, const float *g, float *m, float *v,
                                         size_t n, const AdamWParams *a, int decay) {
    if (n == 0) return;
    const AdamWCpuKernel kernel = adamw_cpu_kernel(path);
    const size_t head = ((64 - ((uintptr_t)p & 63)) & 63) / sizeof(float);   // elements before a line start
    const size_t shift = (ADAMW_CPU_CHUNK - head % ADAMW_CPU_CHUNK) % ADAMW_CPU_CHUNK;
    const size_t items = (shift + n + ADAMW_CPU_CHUNK - 1) / ADAMW_CPU_CHUNK;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (items > 1)
#endif
    for (size_t c = 0; c < items; c++) {
        const size_t lo = c == 0 ? 0 : c * ADAMW_CPU_CHUNK - shift;
        const size_t hi = (c + 1) * ADAMW_CPU_CHUNK - shift < n ? (c + 1) * ADAMW_CPU_CHUNK - shift : n;
        kernel(p + lo, g + lo, m + lo, v + lo, hi - lo, a, decay);
    }
}

// The same on the best path: what every trainer and zero/'s host backend call.
static inline void adamw_update_array(float *p, const float *g, float *m, float *v, size_t n,
                                      const AdamWParams *a, int decay) {
    adamw_update_array_on(ADAMW_CPU_AUTO, p, g, m, v, n, a, decay);
}

#endif
