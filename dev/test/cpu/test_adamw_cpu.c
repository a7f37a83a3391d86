// test_adamw_cpu.c: the host's AdamW array kernel (llmc/numerics/adamw_cpu.h) against the element
// function it must reproduce bit for bit (llmc/numerics/adamw.h's adamw_element, run one element
// at a time here): every SIMD path this CPU has (plain and AVX2 here, AVX-512 where
// present), awkward lengths and unaligned starts, decay on and off, gradients and moments
// over the whole float range with zeros of both signs, subnormals, infinities and NaNs,
// and any OpenMP thread count. The same checker is shown to catch kernels that cut
// corners (FMA, rsqrt, a reciprocal multiply, flushed subnormals), so the data can tell.
#include <float.h>
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../../llmc/numerics/adamw_cpu.h"
#include "../../../llmc/numerics/rand.h"
#include "../common/test_util.h"

// The same bits, or both NaN. Which NaN comes out of an op on two NaNs is left to the
// implementation (x86 keeps the first operand's), and the compiler may swap the operands
// of a commutative op: adamw_element itself gives NaNs of either sign or payload at two
// call sites (seen here). The GPU gives its one canonical NaN.
static int same_value(float x, float y) { return bits_of(x) == bits_of(y) || (isnan(x) && isnan(y)); }

typedef void (*Update)(float *p, const float *g, float *m, float *v, size_t n, const AdamWParams *a, int decay);

static void via_plain(float *p, const float *g, float *m, float *v, size_t n, const AdamWParams *a, int decay) {
    adamw_update_array_on(ADAMW_CPU_PLAIN, p, g, m, v, n, a, decay);
}
static void via_avx2(float *p, const float *g, float *m, float *v, size_t n, const AdamWParams *a, int decay) {
    adamw_update_array_on(ADAMW_CPU_AVX2, p, g, m, v, n, a, decay);
}
static void via_avx512(float *p, const float *g, float *m, float *v, size_t n, const AdamWParams *a, int decay) {
    adamw_update_array_on(ADAMW_CPU_AVX512, p, g, m, v, n, a, decay);
}

static const struct {
    AdamWCpuPath path;
    Update update;
} paths[] = {{ADAMW_CPU_PLAIN, via_plain}, {ADAMW_CPU_AVX2, via_avx2}, {ADAMW_CPU_AVX512, via_avx512}};
#define NPATHS (sizeof paths / sizeof paths[0])

// Values a step can meet at the edges of float: both zeros, the smallest and largest
// subnormals, the smallest normal, values whose squares under- or overflow, the largest
// finite, infinities, NaNs (the default one and one with a payload).
static const uint32_t specials[] = {
    0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x007fffffu, 0x807fffffu, 0x00800000u, 0x80800000u,
    0x0da24260u /* 1e-30 */, 0x7149f2cau /* 1e30 */, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u,
    0x7fc00000u, 0xffc00000u, 0x7fa5a5a5u, 0x3f800000u, 0xbf800000u};
#define NSPECIALS (sizeof specials / sizeof specials[0])

// Element i of one of the four inputs (stream 1..4): one in eight a special value, else a
// normal deviate scaled by 2^[lo, lo + span). v's ordinary values are non-negative.
static float input(uint64_t seed, int stream, size_t i, int lo, int span) {
    if (rng_below(seed, 100 + stream, i, 8) == 0) return float_of(specials[rng_below(seed, 200 + stream, i, NSPECIALS)]);
    float x = ldexpf(rng_normal(seed, stream, i), lo + (int)rng_below(seed, 300 + stream, i, (uint64_t)span));
    return stream == 4 ? fabsf(x) : x;
}

// Hyperparameter sets: a GPT-2 step 1, a late step with a clip scale, and an extreme one
// (eps a subnormal, tiny grad scale, lr 1) where rounding differences show most.
static AdamWParams params_set(int k) {
    switch (k) {
    case 0: return adamw_params(1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 1);
    case 1: return adamw_params(3e-4f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.37f, 1000);
    default: return adamw_params(1.0f, 0.5f, 0.75f, FLT_TRUE_MIN, 2.0f, 1e-20f, 3);
    }
}
#define NPARAMS 3

// Buffers with a guard band of GUARD floats on each side of the n elements used, which
// start at offset off (0..3) past a 64-byte boundary.
#define GUARD 32
#define GUARD_BITS 0x7f8dead1u   // a NaN no step produces
typedef struct {
    float *base[4];   // p, g, m, v allocations
    float *x[4];      // their used ranges
    size_t n;
} Arrays;

static void arrays_make(Arrays *A, size_t n, const int off[4], uint64_t seed) {
    static const int lo[4] = {-40, -70, -60, -100}, span[4] = {50, 100, 80, 110};
    A->n = n;
    for (int k = 0; k < 4; k++) {
        const size_t total = n + 2 * GUARD + 16;
        A->base[k] = aligned_alloc(64, ((total * sizeof(float) + 63) / 64) * 64);
        assert_non_null(A->base[k]);
        for (size_t i = 0; i < total; i++) A->base[k][i] = float_of(GUARD_BITS);
        A->x[k] = A->base[k] + GUARD + off[k];
        for (size_t i = 0; i < n; i++) A->x[k][i] = input(seed, k + 1, i, lo[k], span[k]);
    }
}

static void arrays_free(Arrays *A) {
    for (int k = 0; k < 4; k++) free(A->base[k]);
}

// Runs update on A and the element function on a copy; returns the number of elements
// whose p, m or v differ (same_value; reporting the first), and fails on any write
// outside the n elements. A's inputs are restored afterwards.
static int quiet;   // no report of the first difference (the corner-cutting kernels)

static size_t mismatches(Update update, const Arrays *A, const AdamWParams *a, int decay, const char *what) {
    const size_t n = A->n;
    float *ref[4], *in[4];
    for (int k = 0; k < 4; k++) {
        ref[k] = malloc((n + 1) * sizeof(float));
        assert_non_null(ref[k]);
        if (n) memcpy(ref[k], A->x[k], n * sizeof(float));
    }
    for (size_t i = 0; i < n; i++) ref[0][i] = adamw_element(ref[0][i], ref[1][i], &ref[2][i], &ref[3][i], a, decay);

    // the kernel runs on A's own buffers (guard bands included); in keeps the inputs
    for (int k = 0; k < 4; k++) {
        in[k] = malloc((n + 1) * sizeof(float));
        assert_non_null(in[k]);
        if (n) memcpy(in[k], A->x[k], n * sizeof(float));
    }
    update(A->x[0], A->x[1], A->x[2], A->x[3], n, a, decay);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        int same = 1;
        for (int k = 0; k < 4; k++) same &= same_value(A->x[k][i], ref[k][i]);
        if (!same && bad++ == 0 && !quiet)
            print_message("%s, decay %d: element %zu of %zu: p %08x g %08x m %08x v %08x -> want p %08x m %08x v %08x, "
                          "got p %08x m %08x v %08x\n", what, decay, i, n, bits_of(in[0][i]), bits_of(in[1][i]),
                          bits_of(in[2][i]), bits_of(in[3][i]), bits_of(ref[0][i]), bits_of(ref[2][i]),
                          bits_of(ref[3][i]), bits_of(A->x[0][i]), bits_of(A->x[2][i]), bits_of(A->x[3][i]));
    }
    for (int k = 0; k < 4; k++) {
        for (float *q = A->base[k]; q < A->x[k]; q++)
            if (bits_of(*q) != GUARD_BITS) fail_msg("%s: array %d written %td elements before its start", what, k, A->x[k] - q);
        for (size_t i = n; i < n + GUARD; i++)
            if (bits_of(A->x[k][i]) != GUARD_BITS) fail_msg("%s: array %d written at element %zu of %zu", what, k, i, n);
        if (n) memcpy(A->x[k], in[k], n * sizeof(float));
        free(ref[k]);
        free(in[k]);
    }
    return bad;
}

static const size_t lengths[] = {0, 1, 7, 15, 16, 17, 1000003};
#define NLENGTHS (sizeof lengths / sizeof lengths[0])
static const int offsets[][4] = {{0, 0, 0, 0}, {1, 1, 1, 1}, {3, 1, 2, 0}};
#define NOFFSETS (sizeof offsets / sizeof offsets[0])

// Every path this machine has, every length, start offset, hyperparameter set and decay.
static void test_every_path_matches_element(void **state) {
    (void)state;
    int tested = 0;
    for (size_t q = 0; q < NPATHS; q++) {
        if (!adamw_cpu_path_supported(paths[q].path)) {
            print_message("path %s: not on this CPU, skipped\n", adamw_cpu_path_name(paths[q].path));
            continue;
        }
        tested++;
        for (size_t l = 0; l < NLENGTHS; l++)
            for (size_t o = 0; o < NOFFSETS; o++) {
                Arrays A;
                arrays_make(&A, lengths[l], offsets[o], 1000 + l);
                for (int s = 0; s < NPARAMS; s++) {
                    const AdamWParams a = params_set(s);
                    for (int decay = 0; decay <= 1; decay++) {
                        char what[128];
                        snprintf(what, sizeof what, "path %s, n %zu, offsets %d%d%d%d, params %d",
                                 adamw_cpu_path_name(paths[q].path), lengths[l], offsets[o][0], offsets[o][1],
                                 offsets[o][2], offsets[o][3], s);
                        const size_t bad = mismatches(paths[q].update, &A, &a, decay, what);
                        if (bad) fail_msg("%s, decay %d: %zu elements differ from adamw_element", what, decay, bad);
                    }
                }
                arrays_free(&A);
            }
    }
    assert_true(tested >= 1 + (adamw_cpu_path_supported(ADAMW_CPU_AVX2) ? 1 : 0));
}

// Every pairing of special values for (p, g, m, v), so none of them is left to chance.
static void test_special_value_grid(void **state) {
    (void)state;
    const size_t n = NSPECIALS * NSPECIALS * NSPECIALS * NSPECIALS;
    Arrays A;
    const int off[4] = {0, 0, 0, 0};
    arrays_make(&A, n, off, 7);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0, r = i; k < 4; k++, r /= NSPECIALS) A.x[k][i] = float_of(specials[r % NSPECIALS]);
    for (size_t q = 0; q < NPATHS; q++) {
        if (!adamw_cpu_path_supported(paths[q].path)) continue;
        for (int s = 0; s < NPARAMS; s++) {
            const AdamWParams a = params_set(s);
            for (int decay = 0; decay <= 1; decay++) {
                const size_t bad = mismatches(paths[q].update, &A, &a, decay, adamw_cpu_path_name(paths[q].path));
                if (bad) fail_msg("path %s, params %d, decay %d: %zu of %zu special-value elements differ",
                                  adamw_cpu_path_name(paths[q].path), s, decay, bad, n);
            }
        }
    }
    arrays_free(&A);
}

// 1, 2, 3 and 5 threads (more than this machine's cores, too) give the element function's bits.
static void test_thread_count_independent(void **state) {
    (void)state;
    const int saved = omp_get_max_threads();
    const int counts[] = {1, 2, 3, 5};
    const int off[4] = {2, 2, 2, 2};
    Arrays A;
    arrays_make(&A, 1000003, off, 99);
    const AdamWParams a = params_set(1);
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        omp_set_num_threads(counts[c]);
        for (size_t q = 0; q < NPATHS; q++) {
            if (!adamw_cpu_path_supported(paths[q].path)) continue;
            char what[64];
            snprintf(what, sizeof what, "path %s, %d threads", adamw_cpu_path_name(paths[q].path), counts[c]);
            const size_t bad = mismatches(paths[q].update, &A, &a, 1, what);
            if (bad) fail_msg("%s: %zu elements differ", what, bad);
        }
    }
    omp_set_num_threads(saved);
    arrays_free(&A);
}

// Subnormal results come out as IEEE says (checked against products worked out in double,
// exact for two floats, then rounded once), and the kernel leaves the FPU's mode alone.
static void test_subnormals_kept(void **state) {
    (void)state;
    const size_t n = 64;
    float p[64], g[64], m[64], v[64];
    const AdamWParams a = adamw_params(1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, 1);
    for (size_t q = 0; q < NPATHS; q++) {
        if (!adamw_cpu_path_supported(paths[q].path)) continue;
        for (size_t i = 0; i < n; i++) {
            p[i] = 1.0f;
            g[i] = 0.0f;
            m[i] = ldexpf(1.0f, -126 - (int)(i % 20));   // FLT_MIN and subnormals below it
            v[i] = ldexpf(1.0f, -126 - (int)(i % 23));
        }
#ifdef ADAMW_CPU_X86
        const unsigned csr = _mm_getcsr();
#endif
        paths[q].update(p, g, m, v, n, &a, 0);
#ifdef ADAMW_CPU_X86
        assert_int_equal(_mm_getcsr(), csr);
#endif
        for (size_t i = 0; i < n; i++) {
            const float want_m = (float)((double)a.beta1 * (double)ldexpf(1.0f, -126 - (int)(i % 20)));
            const float want_v = (float)((double)a.beta2 * (double)ldexpf(1.0f, -126 - (int)(i % 23)));
            if (bits_of(m[i]) != bits_of(want_m) || bits_of(v[i]) != bits_of(want_v) || m[i] == 0.0f)
                fail_msg("path %s, element %zu: m %a v %a, want %a %a", adamw_cpu_path_name(paths[q].path), i,
                         (double)m[i], (double)v[i], (double)want_m, (double)want_v);
        }
    }
}

// ADAMW_CPU_PATH picks the path of adamw_update_array; a name it does not know, or a path
// the CPU lacks, stops the program with a message rather than running something else.
static void use_env_path(void *arg) {
    setenv("ADAMW_CPU_PATH", (const char *)arg, 1);
    float p = 1, g = 1, m = 0, v = 0;
    const AdamWParams a = params_set(0);
    adamw_update_array(&p, &g, &m, &v, 1, &a, 1);
}
static void use_avx512(void *arg) {
    (void)arg;
    float p = 1, g = 1, m = 0, v = 0;
    const AdamWParams a = params_set(0);
    adamw_update_array_on(ADAMW_CPU_AVX512, &p, &g, &m, &v, 1, &a, 1);
}

static void test_path_choice(void **state) {
    (void)state;
    unsetenv("ADAMW_CPU_PATH");
    const AdamWCpuPath best = adamw_cpu_path_supported(ADAMW_CPU_AVX512) ? ADAMW_CPU_AVX512
                              : adamw_cpu_path_supported(ADAMW_CPU_AVX2) ? ADAMW_CPU_AVX2 : ADAMW_CPU_PLAIN;
    assert_int_equal(adamw_cpu_auto_path(), best);
    setenv("ADAMW_CPU_PATH", "plain", 1);
    assert_int_equal(adamw_cpu_auto_path(), ADAMW_CPU_PLAIN);
    unsetenv("ADAMW_CPU_PATH");
    expect_death(use_env_path, "sse9", DEATH_ANY_STATUS, "ADAMW_CPU_PATH=sse9", "plain, avx2, avx512", NULL);
    if (!adamw_cpu_path_supported(ADAMW_CPU_AVX512)) {
        expect_death(use_env_path, "avx512", DEATH_ANY_STATUS, "ADAMW_CPU_PATH=avx512", "lacks avx512", NULL);
        expect_death(use_avx512, NULL, DEATH_ANY_STATUS, "path avx512", "not supported", NULL);
    }
}

#ifdef ADAMW_CPU_X86
// Kernels that cut corners, each one shortcut away from the AVX2 path; the checker above
// must find elements that differ in each (what makes its data worth trusting).
typedef enum { CUT_FMA, CUT_RSQRT, CUT_RECIPROCAL, CUT_FLUSH } Cut;
static Cut cut;

__attribute__((target("avx2,fma")))
static void cut_corners(float *p, const float *g, float *m, float *v, size_t n, const AdamWParams *a, int decay) {
    const unsigned csr = _mm_getcsr();
    if (cut == CUT_FLUSH) _mm_setcsr(csr | 0x8040);   // FTZ and DAZ
    const __m256 b1 = _mm256_set1_ps(a->beta1), c1 = _mm256_set1_ps(1.0f - a->beta1);
    const __m256 b2 = _mm256_set1_ps(a->beta2), c2 = _mm256_set1_ps(1.0f - a->beta2);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 gr = _mm256_mul_ps(_mm256_loadu_ps(g + i), _mm256_set1_ps(a->grad_scale));
        const __m256 m0 = _mm256_loadu_ps(m + i), v0 = _mm256_loadu_ps(v + i), p0 = _mm256_loadu_ps(p + i);
        const __m256 cg = _mm256_mul_ps(c1, gr), c2gg = _mm256_mul_ps(_mm256_mul_ps(c2, gr), gr);
        const __m256 mt = cut == CUT_FMA ? _mm256_fmadd_ps(b1, m0, cg) : _mm256_add_ps(_mm256_mul_ps(b1, m0), cg);
        const __m256 vt = cut == CUT_FMA ? _mm256_fmadd_ps(b2, v0, c2gg) : _mm256_add_ps(_mm256_mul_ps(b2, v0), c2gg);
        _mm256_storeu_ps(m + i, mt);
        _mm256_storeu_ps(v + i, vt);
        __m256 mhat, vhat;
        if (cut == CUT_RECIPROCAL) {
            mhat = _mm256_mul_ps(mt, _mm256_set1_ps(1.0f / a->bias_correction1));
            vhat = _mm256_mul_ps(vt, _mm256_set1_ps(1.0f / a->bias_correction2));
        } else {
            mhat = _mm256_div_ps(mt, _mm256_set1_ps(a->bias_correction1));
            vhat = _mm256_div_ps(vt, _mm256_set1_ps(a->bias_correction2));
        }
        // rsqrt: sqrt(x) as x * rsqrt(x) with one Newton step, the usual fast spelling
        __m256 root = _mm256_sqrt_ps(vhat);
        if (cut == CUT_RSQRT) {
            const __m256 r = _mm256_rsqrt_ps(vhat);
            const __m256 nr = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), r),
                                            _mm256_sub_ps(_mm256_set1_ps(3.0f), _mm256_mul_ps(vhat, _mm256_mul_ps(r, r))));
            root = _mm256_mul_ps(vhat, nr);
        }
        __m256 upd = _mm256_div_ps(mhat, _mm256_add_ps(root, _mm256_set1_ps(a->eps)));
        if (decay) upd = _mm256_add_ps(upd, _mm256_mul_ps(_mm256_set1_ps(a->weight_decay), p0));
        const __m256 step = _mm256_mul_ps(_mm256_set1_ps(a->lr), upd);
        _mm256_storeu_ps(p + i, cut == CUT_FMA ? _mm256_fnmadd_ps(_mm256_set1_ps(a->lr), upd, p0)
                                               : _mm256_add_ps(p0, _mm256_xor_ps(step, _mm256_set1_ps(-0.0f))));
    }
    adamw_cpu_plain(p + i, g + i, m + i, v + i, n - i, a, decay);
    _mm_setcsr(csr);
}
#endif

static void test_checker_catches_cut_corners(void **state) {
    (void)state;
#ifdef ADAMW_CPU_X86
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        print_message("no AVX2 and FMA: the corner-cutting kernels cannot run here\n");
        skip();
    }
    const int off[4] = {0, 0, 0, 0};
    Arrays A;
    arrays_make(&A, 1000003, off, 1006);
    const char *names[] = {"FMA", "rsqrt", "reciprocal", "flushed subnormals"};
    quiet = 1;
    for (cut = CUT_FMA; cut <= CUT_FLUSH; cut++) {
        size_t bad = 0;
        for (int s = 0; s < NPARAMS; s++) {
            const AdamWParams a = params_set(s);
            bad += mismatches(cut_corners, &A, &a, 1, names[cut]);
        }
        print_message("kernel with %s: %zu elements differ (want > 0)\n", names[cut], bad);
        if (bad == 0) fail_msg("the checker does not notice a kernel with %s", names[cut]);
    }
    quiet = 0;
    arrays_free(&A);
    // the same kernel without a cut corner passes: the differences are the shortcuts'
    cut = (Cut)-1;
    const int off1[4] = {1, 2, 3, 0};
    arrays_make(&A, 100003, off1, 1007);
    const AdamWParams a = params_set(2);
    assert_int_equal(mismatches(cut_corners, &A, &a, 1, "no cut"), 0);
    arrays_free(&A);
#else
    skip();
#endif
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_path_matches_element),
        cmocka_unit_test(test_special_value_grid),
        cmocka_unit_test(test_thread_count_independent),
        cmocka_unit_test(test_subnormals_kept),
        cmocka_unit_test(test_path_choice),
        cmocka_unit_test(test_checker_catches_cut_corners),
    };
    return cmocka_run_group_tests_name("adamw_cpu", tests, NULL, NULL);
}
