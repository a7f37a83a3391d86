// test_zero_quant.c: zero/kernels/quant.c's block quantization (int8 and int4, one scale per
// block) against references written out here: every value reads back within half a
// quantization step on random data and the edges of the float range (all-zero blocks, one
// huge value among tiny ones, subnormals, FLT_MAX, bf16's max, partial last blocks);
// ties round to even; int4 nibbles unpack as specified; non-finite input is refused with
// its block and index; the dequantize-reduce is the fp32 sum in rank order, bit for bit,
// whatever the thread count. Links libzero.a (its own Makefile rule).
#include <float.h>
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../../zero/kernels/quant.h"
#include "quant_cases.h"
#include "../common/test_util.h"

// The bound of quant.h: half a step plus the rounding of x / s and of q * s.
#define HALF_STEP_BOUND (0.5 + 0x1p-16)

static const int blocks[] = {2, 8, 64, 2048};
#define NBLOCKS (sizeof blocks / sizeof blocks[0])

// Reference unpacking of value i: the nibble, then 4-bit two's complement by hand.
static int ref_q(QuantFormat f, const void *q, size_t i) {
    if (f == QUANT_INT8) return ((const int8_t *)q)[i];
    uint8_t byte = ((const uint8_t *)q)[i / 2];
    int v = (i % 2) ? (byte >> 4) : (byte & 0x0f);
    return (v & 0x8) ? v - 16 : v;
}

static float ref_dequant(QuantFormat f, const void *q, const float *scales, size_t i, int block) {
    return (float)ref_q(f, q, i) * scales[i / (size_t)block];
}

static int qmax_of(QuantFormat f) { return f == QUANT_INT4 ? 7 : 127; }

// The worst |x - dequant| / scale seen per format (printed at the end for the notes).
static double worst[2];

// Quantizes x (fp32 or bf16 per `in`), checks every block's scale and every value's error
// against the definitions, and checks quant_dequantize against ref_dequant bit for bit.
static void check_roundtrip(QuantFormat f, QuantDtype in, const float *xf, const void *x, size_t n, int block,
                            const char *label) {
    const size_t nb = quant_nblocks(n, block);
    const int Q = qmax_of(f);
    void *q = malloc(quant_bytes(f, n) + 1);
    float *s = malloc(nb * sizeof(float));
    float *d = malloc(n * sizeof(float));
    QuantBad bad;
    assert_int_equal(quant_quantize(f, in, x, n, block, q, s, &bad), QUANT_OK);
    assert_int_equal(quant_dequantize(f, q, s, n, block, QUANT_F32, d), QUANT_OK);
    for (size_t b = 0; b < nb; b++) {
        size_t lo = b * (size_t)block, hi = lo + (size_t)block < n ? lo + (size_t)block : n;
        float m = 0.0f;
        size_t at = lo;
        for (size_t i = lo; i < hi; i++) if (fabsf(xf[i]) > m) { m = fabsf(xf[i]); at = i; }
        if (m == 0.0f) {
            assert_true(bits_of(s[b]) == 0);   // +0 exactly
        } else {
            // s is m / Q to within one ulp of s, and never so small that m is clamped away
            double ulp = (double)nextafterf(s[b], INFINITY) - (double)s[b];
            if (!(fabs((double)s[b] - (double)m / Q) <= ulp))
                fail_msg("%s: block %zu: scale %a is not max %a / %d", label, b, (double)s[b], (double)m, Q);
            if (s[b] >= FLT_MIN) assert_int_equal(abs(ref_q(f, q, at)), Q);
        }
        for (size_t i = lo; i < hi; i++) {
            int qi = ref_q(f, q, i);
            assert_true(qi >= -Q && qi <= Q);
            float want = ref_dequant(f, q, s, i, block);
            if (bits_of(d[i]) != bits_of(want))
                fail_msg("%s: dequantize[%zu] = %a, reference %a", label, i, (double)d[i], (double)want);
            double err = fabs((double)xf[i] - (double)d[i]);
            if (m == 0.0f) { assert_true(bits_of(d[i]) == 0); continue; }
            double rel = err / (double)s[b];
            if (rel > worst[f]) worst[f] = rel;
            if (!(rel <= HALF_STEP_BOUND))
                fail_msg("%s n=%zu block=%d: x[%zu] = %a reads back as %a: error %.9g steps of scale %a",
                         label, n, block, i, (double)xf[i], (double)d[i], rel, (double)s[b]);
        }
    }
    if (f == QUANT_INT4 && n % 2) assert_int_equal(((uint8_t *)q)[n / 2] >> 4, 0);   // padding nibble
    free(q); free(s); free(d);
}

static void run_cases(QuantFormat f, QuantDtype in) {
    size_t lens[8];
    for (size_t bi = 0; bi < NBLOCKS; bi++) {
        for (size_t li = 0, nl = quant_case_lengths(blocks[bi], lens); li < nl; li++) {
            size_t n = lens[li];
            for (int c = 0; c < QCASE_COUNT; c++) {
                float *xf = malloc(n * sizeof(float));
                uint16_t *xh = malloc(n * sizeof(uint16_t));
                char label[96];
                snprintf(label, sizeof label, "%s %s case '%s'", quant_format_name(f), in == QUANT_BF16 ? "bf16" : "fp32",
                         quant_case_names[c]);
                if (in == QUANT_BF16) {
                    quant_case_fill_bf16(c, 7 + (uint64_t)n, xh, n, blocks[bi]);
                    for (size_t i = 0; i < n; i++) xf[i] = float_of((uint32_t)xh[i] << 16);
                    check_roundtrip(f, in, xf, xh, n, blocks[bi], label);
                } else {
                    quant_case_fill(c, 7 + (uint64_t)n, xf, n, blocks[bi]);
                    check_roundtrip(f, in, xf, xf, n, blocks[bi], label);
                }
                free(xf); free(xh);
            }
        }
    }
}

static void test_int8_within_half_step(void **state) { (void)state; run_cases(QUANT_INT8, QUANT_F32); }
static void test_int4_within_half_step(void **state) { (void)state; run_cases(QUANT_INT4, QUANT_F32); }
static void test_bf16_input_within_half_step(void **state) {
    (void)state;
    run_cases(QUANT_INT8, QUANT_BF16);
    run_cases(QUANT_INT4, QUANT_BF16);
}

// Scale 1 (block max 127): q = x exactly for integers, ties go to the even neighbour.
static void test_ties_round_to_even(void **state) {
    (void)state;
    const float x[] = {127.0f, 0.5f, 1.5f, 2.5f, 3.5f, -0.5f, -1.5f, -2.5f, 126.5f, -126.5f, 0.25f, 0.75f, -0.75f, 5.0f};
    const int want[] = {127, 0, 2, 2, 4, 0, -2, -2, 126, -126, 0, 1, -1, 5};
    const size_t n = sizeof x / sizeof x[0];
    int8_t q[sizeof x / sizeof x[0]];
    float s;
    assert_int_equal(quant_quantize(QUANT_INT8, QUANT_F32, x, n, 64, q, &s, NULL), QUANT_OK);
    assert_true(s == 1.0f);
    for (size_t i = 0; i < n; i++)
        if (q[i] != want[i]) fail_msg("x = %g quantized to %d, round-to-nearest-even gives %d", (double)x[i], q[i], want[i]);
    // and on the random ties case: nearbyint (the C library's round to nearest even)
    float xs[2048];
    int8_t qs[2048];
    quant_case_fill(QCASE_TIES, 3, xs, 2048, 2048);
    assert_int_equal(quant_quantize(QUANT_INT8, QUANT_F32, xs, 2048, 2048, qs, &s, NULL), QUANT_OK);
    assert_true(s == 1.0f);
    for (size_t i = 0; i < 2048; i++) assert_int_equal(qs[i], (int)nearbyint((double)xs[i]));
}

// All-zero blocks (+0 and -0): scale +0, payload 0, exact +0 back, no division by zero.
static void test_zero_blocks_exact(void **state) {
    (void)state;
    for (int f = 0; f < 2; f++) {
        float x[24] = {0}, s[3], d[24];
        uint8_t q[24];
        memset(q, 0xa5, sizeof q);
        for (int i = 0; i < 24; i += 3) x[i] = -0.0f;
        x[12] = 3.0f;   // the middle block is not zero
        assert_int_equal(quant_quantize((QuantFormat)f, QUANT_F32, x, 24, 8, q, s, NULL), QUANT_OK);
        assert_true(bits_of(s[0]) == 0 && bits_of(s[2]) == 0 && s[1] > 0.0f);
        size_t bytes = quant_bytes((QuantFormat)f, 8);
        for (size_t k = 0; k < bytes; k++) {
            assert_int_equal(q[k], 0);
            assert_int_equal(q[2 * bytes + k], 0);
        }
        assert_int_equal(quant_dequantize((QuantFormat)f, q, s, 24, 8, QUANT_F32, d), QUANT_OK);
        for (int i = 0; i < 24; i++) if (i < 8 || i >= 16) assert_true(bits_of(d[i]) == 0);
        assert_true(fabs((double)d[12] - 3.0) <= (double)s[1] * HALF_STEP_BOUND);
    }
}

// Values past n are never read: poison after the tail changes nothing and is not refused.
static void test_padding_not_read(void **state) {
    (void)state;
    for (int f = 0; f < 2; f++) {
        const size_t n = 2 * 64 + 5;
        float x[2 * 64 + 8], s1[3], s2[3];
        uint8_t q1[2 * 64 + 8], q2[2 * 64 + 8];
        quant_case_fill(QCASE_NORMAL, 11, x, n, 64);
        memset(q1, 0x77, sizeof q1);
        memset(q2, 0x77, sizeof q2);
        x[n] = NAN; x[n + 1] = 1e30f; x[n + 2] = INFINITY;
        assert_int_equal(quant_quantize((QuantFormat)f, QUANT_F32, x, n, 64, q1, s1, NULL), QUANT_OK);
        x[n] = 0.0f; x[n + 1] = 0.0f; x[n + 2] = 0.0f;
        assert_int_equal(quant_quantize((QuantFormat)f, QUANT_F32, x, n, 64, q2, s2, NULL), QUANT_OK);
        assert_memory_equal(s1, s2, sizeof s1);
        size_t bytes = quant_bytes((QuantFormat)f, n);
        assert_memory_equal(q1, q2, bytes);
        assert_int_equal(q1[bytes], 0x77);   // nothing written past the payload
        float m = 0.0f;
        for (size_t i = 128; i < n; i++) m = fmaxf(m, fabsf(x[i]));
        assert_true(fabs((double)s1[2] - (double)m / qmax_of((QuantFormat)f)) <= (double)s1[2] * 0x1p-23);
    }
}

// int4 layout: element 2k in the low nibble of byte k, 2k+1 in the high nibble, two's
// complement; the bytes below are written out by hand.
static void test_int4_packing(void **state) {
    (void)state;
    const float x[] = {7, -7, 3, -3, 0, 1, -1, 2, -2, 5, -6, 4, 6};   // max 7: scale 1
    const uint8_t want[] = {0x97, 0xd3, 0x10, 0x2f, 0x5e, 0x4a, 0x06};
    uint8_t q[7];
    float s;
    assert_int_equal(quant_quantize(QUANT_INT4, QUANT_F32, x, 13, 16, q, &s, NULL), QUANT_OK);
    assert_true(s == 1.0f);
    assert_memory_equal(q, want, sizeof want);
    for (size_t i = 0; i < 13; i++) assert_int_equal(ref_q(QUANT_INT4, q, i), (int)x[i]);
}

static char *capture_report(const char *what, int rank, QuantFormat f, const QuantBad *bad) {
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    assert_non_null(fp);
    quant_report_bad(fp, what, rank, f, bad);
    fclose(fp);
    return buf;
}

// NaN and infinities are refused with the first bad element's block, index and value;
// that block gets scale NaN (so ignoring the return cannot give plausible numbers).
static void test_nonfinite_refused(void **state) {
    (void)state;
    const int B = 16;
    const size_t n = 8 * 16 + 3;
    float x[8 * 16 + 3], s[9], d[8 * 16 + 3];
    uint8_t q[8 * 16 + 3];
    const float bad_values[] = {NAN, INFINITY, -INFINITY, -NAN};
    for (int f = 0; f < 2; f++) {
        for (size_t v = 0; v < 4; v++) {
            quant_case_fill(QCASE_NORMAL, 5, x, n, B);
            x[3 * 16 + 7] = bad_values[v];
            x[3 * 16 + 9] = -INFINITY;  // later ones, in the same block and the next ones:
            x[4 * 16 + 2] = NAN;        // the first is reported
            x[5 * 16 + 1] = INFINITY;
            QuantBad bad = {0, 0, 0.0f};
            assert_int_equal(quant_quantize((QuantFormat)f, QUANT_F32, x, n, B, q, s, &bad), QUANT_NONFINITE);
            assert_int_equal(bad.block, 3);
            assert_int_equal(bad.index, 3 * 16 + 7);
            assert_int_equal(bits_of(bad.value), bits_of(bad_values[v]));
            assert_true(isnan(s[3]) && isnan(s[4]) && isnan(s[5]));
            for (int b = 0; b < 9; b++) if (b < 3 || b > 5) assert_true(isfinite(s[b]) && s[b] > 0.0f);
            assert_int_equal(quant_dequantize((QuantFormat)f, q, s, n, B, QUANT_F32, d), QUANT_OK);
            for (int i = 0; i < 16; i++) assert_true(isnan(d[3 * 16 + i]));
        }
    }
    // bf16 input, NaN in the partial last block
    uint16_t h[8 * 16 + 3];
    quant_case_fill_bf16(QCASE_NORMAL, 5, h, n, B);
    h[n - 1] = 0x7fc1;
    QuantBad bad;
    assert_int_equal(quant_quantize(QUANT_INT8, QUANT_BF16, h, n, B, q, s, &bad), QUANT_NONFINITE);
    assert_int_equal(bad.block, 8);
    assert_int_equal(bad.index, n - 1);
    assert_true(isnan(bad.value));
    char *msg = capture_report("gradient h.3.fc_w", 2, QUANT_INT8, &bad);
    if (!strstr(msg, "rank 2: cannot quantize gradient h.3.fc_w to int8: element 130 (block 8) is nan"))
        fail_msg("message: %s", msg);
    free(msg);
}

// Block sizes that are not positive and even are refused by every entry, with a message.
static void refuse_odd_block(void *arg) {
    (void)arg;
    float x[4] = {1, 2, 3, 4}, s[4], d[4];
    int8_t q[4];
    int bad = (quant_quantize(QUANT_INT8, QUANT_F32, x, 4, 3, q, s, NULL) == QUANT_BAD_BLOCK) +
              (quant_quantize(QUANT_INT4, QUANT_F32, x, 4, 0, q, s, NULL) == QUANT_BAD_BLOCK) +
              (quant_dequantize(QUANT_INT8, q, s, 4, -2, QUANT_F32, d) == QUANT_BAD_BLOCK) +
              (quant_dequant_reduce(QUANT_INT4, q, 2, s, 1, 1, 4, 7, d) == QUANT_BAD_BLOCK) +
              (quant_dequant_reduce(QUANT_INT8, q, 4, s, 1, 0, 4, 2, d) == QUANT_BAD_BLOCK);
    exit(bad == 5 ? 0 : 1);
}
static void test_bad_block_size_refused(void **state) {
    (void)state;
    char msg[2048];
    assert_int_equal(run_in_child(refuse_odd_block, NULL, msg, sizeof msg), 0);
    assert_non_null(strstr(msg, "quant_quantize: quantization block size 3 is not a positive even number"));
    assert_non_null(strstr(msg, "quant_dequantize: quantization block size -2"));
    assert_non_null(strstr(msg, "quant_dequant_reduce: 0 ranks"));
}

// The dequantize-reduce against the sum written out here: per element, rank 0's value,
// then ranks 1..N-1 added one by one in fp32. Same bits with 1 and 2 threads, twice.
static void test_dequant_reduce_rank_order(void **state) {
    (void)state;
    const int B = 64;
    const size_t n = 5 * 64 + 9;   // partial last block
    const int ranks[] = {1, 2, 3, 4, 8};
    for (int f = 0; f < 2; f++) {
        const size_t qstride = quant_bytes((QuantFormat)f, n) + 3, sstride = quant_nblocks(n, B) + 1;
        for (size_t ri = 0; ri < sizeof ranks / sizeof ranks[0]; ri++) {
            int N = ranks[ri];
            uint8_t *q = calloc((size_t)N, qstride);
            float *s = calloc((size_t)N * sstride, sizeof(float));
            float *x = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
            float *out1 = malloc(n * sizeof(float)), *out2 = malloc(n * sizeof(float));
            for (int r = 0; r < N; r++) {
                quant_case_fill((r % 2) ? QCASE_ONE_HUGE : QCASE_NORMAL, 100 + (uint64_t)r, x, n, B);
                if (r % 3 == 2) for (size_t i = 0; i < 64; i++) x[i] = 0.0f;   // a zero block
                assert_int_equal(quant_quantize((QuantFormat)f, QUANT_F32, x, n, B, q + (size_t)r * qstride,
                                                s + (size_t)r * sstride, NULL), QUANT_OK);
            }
            for (size_t i = 0; i < n; i++) {
                float acc = ref_dequant((QuantFormat)f, q, s, i, B);
                for (int r = 1; r < N; r++)
                    acc = acc + ref_dequant((QuantFormat)f, q + (size_t)r * qstride, s + (size_t)r * sstride, i, B);
                want[i] = acc;
            }
            omp_set_num_threads(1);
            assert_int_equal(quant_dequant_reduce((QuantFormat)f, q, qstride, s, sstride, N, n, B, out1), QUANT_OK);
            omp_set_num_threads(2);
            assert_int_equal(quant_dequant_reduce((QuantFormat)f, q, qstride, s, sstride, N, n, B, out2), QUANT_OK);
            for (size_t i = 0; i < n; i++)
                if (bits_of(out1[i]) != bits_of(want[i]))
                    fail_msg("%s, %d ranks: out[%zu] = %a, the rank-order sum is %a", quant_format_name((QuantFormat)f),
                             N, i, (double)out1[i], (double)want[i]);
            assert_memory_equal(out1, out2, n * sizeof(float));
            assert_int_equal(quant_dequant_reduce((QuantFormat)f, q, qstride, s, sstride, N, n, B, out2), QUANT_OK);
            assert_memory_equal(out1, out2, n * sizeof(float));
            free(q); free(s); free(x); free(want); free(out1); free(out2);
        }
    }
}

// bf16 output: the fp32 value q * s rounded to the nearer bf16, ties to the even one,
// chosen here by comparing distances in double.
static uint16_t ref_bf16(float v) {
    uint32_t u = bits_of(v);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    double dlo = fabs((double)v - (double)float_of((uint32_t)lo << 16));
    double dhi = fabs((double)v - (double)float_of((uint32_t)hi << 16));
    if (dlo < dhi) return lo;
    if (dhi < dlo) return hi;
    return (lo & 1) ? hi : lo;
}
static void test_dequantize_to_bf16(void **state) {
    (void)state;
    const int B = 64;
    const size_t n = 700;
    for (int f = 0; f < 2; f++) {
        for (int c = 0; c < QCASE_COUNT; c++) {
            float x[700], s[11];
            uint8_t q[700];
            uint16_t h[700];
            quant_case_fill(c, 9, x, n, B);
            assert_int_equal(quant_quantize((QuantFormat)f, QUANT_F32, x, n, B, q, s, NULL), QUANT_OK);
            assert_int_equal(quant_dequantize((QuantFormat)f, q, s, n, B, QUANT_BF16, h), QUANT_OK);
            for (size_t i = 0; i < n; i++) {
                float v = ref_dequant((QuantFormat)f, q, s, i, B);
                if (fabsf(v) > 3.38e38f) continue;   // would round past bf16's max: not compared by distance
                if (h[i] != ref_bf16(v)) fail_msg("case %s: bf16 of %a is %04x, nearest-even %04x",
                                                  quant_case_names[c], (double)v, h[i], ref_bf16(v));
            }
        }
    }
}

static void test_print_worst_error(void **state) {
    (void)state;
    assert_true(worst[QUANT_INT8] > 0.4 && worst[QUANT_INT4] > 0.4);   // the cases did reach the bound
    print_message("worst |x - dequant| / scale: int8 %.9f, int4 %.9f (bound %.9f)\n", worst[QUANT_INT8],
                  worst[QUANT_INT4], HALF_STEP_BOUND);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int8_within_half_step),
        cmocka_unit_test(test_int4_within_half_step),
        cmocka_unit_test(test_bf16_input_within_half_step),
        cmocka_unit_test(test_ties_round_to_even),
        cmocka_unit_test(test_zero_blocks_exact),
        cmocka_unit_test(test_padding_not_read),
        cmocka_unit_test(test_int4_packing),
        cmocka_unit_test(test_nonfinite_refused),
        cmocka_unit_test(test_bad_block_size_refused),
        cmocka_unit_test(test_dequant_reduce_rank_order),
        cmocka_unit_test(test_dequantize_to_bf16),
        cmocka_unit_test(test_print_worst_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
