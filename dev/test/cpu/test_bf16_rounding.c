// test_bf16_rounding.c: the one stochastic rounding of fp32 master weights to the bf16
// working copy (llmc/numerics/adamw.h), which train_gpt2cu's AdamW kernels and zero/'s refresh
// (host and CUDA backends) all call. Edge cases and the carry probability are checked
// against values derived here from the float's bits; then zero's host backend refresh is
// checked against the trainer's element function and against an independent spelling of
// the rule on the same (x, bits). Links libzero.a (its own Makefile rule).
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../../llmc/numerics/adamw.h"
#include "../../../llmc/model/gpt2_config.h"
#include "../../../llmc/numerics/rand.h"
#include "../../../zero/backend.h"
#include "../../../zero/host/backend_host.h"
#include "../../../zero/comm.h"
#include "../../../zero/partition.h"
#include "../common/test_util.h"

static float widen(uint16_t h) { return float_of((uint32_t)h << 16); }

// The rule written out again with wide integers: upper half, plus one when the two low
// halves together reach 2^16. Finite inputs only.
static uint16_t spec_round(float x, uint32_t bits) {
    uint64_t u = bits_of(x);
    return (uint16_t)((u + (bits & 0xffffu)) >> 16);
}

static const uint32_t some_bits[] = {0, 1, 0x7fff, 0x8000, 0xfffe, 0xffff, 0x10000, 0xdeadbeef, 0xffffffffu};
#define NBITS (sizeof some_bits / sizeof some_bits[0])

// Values that are already bf16 (low half zero) never move, whatever the bits.
static void test_exact_bf16_values_stay(void **state) {
    (void)state;
    const uint32_t exact[] = {0x00000000u, 0x80000000u, 0x3f800000u, 0xc0200000u, 0x00010000u,
                              0x80010000u, 0x7f7f0000u, 0xff7f0000u, 0x3eaa0000u};
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        for (size_t k = 0; k < NBITS; k++)
            assert_int_equal(adamw_round_bf16(float_of(exact[i]), some_bits[k]), exact[i] >> 16);
}

// Infinity stays infinity; NaN stays NaN (also one whose payload is only in the low half,
// which plain truncation would turn into infinity) and keeps its sign.
static void test_nan_and_inf_stay(void **state) {
    (void)state;
    const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff80ffffu, 0x7fffffffu, 0x7fa00000u};
    for (size_t k = 0; k < NBITS; k++) {
        assert_int_equal(adamw_round_bf16(INFINITY, some_bits[k]), 0x7f80);
        assert_int_equal(adamw_round_bf16(-INFINITY, some_bits[k]), 0xff80);
        for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
            uint16_t h = adamw_round_bf16(float_of(nans[i]), some_bits[k]);
            assert_true(isnan(widen(h)));
            assert_int_equal(h >> 15, nans[i] >> 31);
        }
    }
}

// Over all 2^16 values of the random bits, x rounds up (in magnitude) exactly (low half)
// times and down otherwise: the carry probability is low / 65536, so E[round(x)] = x.
static void test_carry_count_is_the_low_half(void **state) {
    (void)state;
    const uint32_t xs[] = {0x3f800001u, 0x3f801234u, 0x3f808000u, 0x3f80ffffu, 0xbf80abcdu,
                           0x00005555u, 0x80000001u, 0x4b7f7fffu, 0x7f7effffu};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        const uint32_t u = xs[i], low = u & 0xffffu, hi = u >> 16;
        uint32_t ups = 0;
        for (uint32_t r = 0; r < 0x10000u; r++) {
            uint16_t h = adamw_round_bf16(float_of(u), r);
            assert_true(h == hi || h == hi + 1);
            ups += h == hi + 1;
            // the random bits above the low 16 do not matter
            assert_int_equal(adamw_round_bf16(float_of(u), r | 0xabcd0000u), h);
        }
        assert_int_equal(ups, low);
    }
}

// Past the largest finite bf16 the carry lands on infinity, with the same probability.
static void test_overflow_carries_to_inf(void **state) {
    (void)state;
    assert_int_equal(adamw_round_bf16(FLT_MAX, 0), 0x7f7f);
    assert_int_equal(adamw_round_bf16(FLT_MAX, 0x0001), 0x7f80);
    assert_int_equal(adamw_round_bf16(-FLT_MAX, 0), 0xff7f);
    assert_int_equal(adamw_round_bf16(-FLT_MAX, 0xffff), 0xff80);
}

// The keyed bits, as documented: rng_u32(seed, RNG_STREAM_ROUNDING, t << 40 | index).
// With them the mean of many roundings of one value approaches it (unbiased), for both
// signs and a subnormal.
static void test_keyed_rounding_is_unbiased(void **state) {
    (void)state;
    for (uint64_t g = 0; g < 1000; g++)
        assert_int_equal(adamw_rounding_bits(42, 7, g), rng_u32(42, RNG_STREAM_ROUNDING, ((uint64_t)7 << 40) | g));
    assert_int_not_equal(adamw_rounding_bits(42, 7, 5), adamw_rounding_bits(42, 8, 5));
    assert_int_not_equal(adamw_rounding_bits(42, 7, 5), adamw_rounding_bits(43, 7, 5));

    const float xs[] = {1.0f + 1.0f / 3.0f / 128.0f, -3.14159f, 1e-3f, float_of(0x00001234u)};
    const size_t n = 400000;
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        const float x = xs[i];
        const uint32_t u = bits_of(x);
        const double down = widen((uint16_t)(u >> 16)), up = widen((uint16_t)((u >> 16) + 1));
        const double ulp = fabs(up - down), p = (double)(u & 0xffffu) / 65536.0;
        double sum = 0.0;
        for (size_t g = 0; g < n; g++) sum += widen(adamw_round_bf16_at(x, 1337, 3, g));
        const double mean = sum / (double)n;
        const double sigma = ulp * sqrt(p * (1.0 - p) / (double)n);
        if (fabs(mean - x) > 5.0 * sigma)
            fail_msg("x = %.9g: mean of %zu roundings %.9g, |mean - x| %.3g > 5 sigma (%.3g)", x, n, mean,
                     fabs(mean - x), 5.0 * sigma);
    }
}

// zero/'s host backend refresh gives, element for element, what train_gpt2cu's AdamW path
// (adamw_cuda.cu: adamw_round_bf16_at on each element) and the rule written out above give
// for the same master values, seed, step and global index.
static void test_zero_refresh_is_the_trainer_rule(void **state) {
    (void)state;
    ZeroComm *comm = zero_comm_init(NULL, NULL);   // no launcher: a world of one
    assert_non_null(comm);
    const ZeroBackend *b = zero_backend_host(comm);
    assert_non_null(b);
    const size_t n = 100003;
    const uint64_t seed = 4242, gidx0 = 123457;
    const int t = 9;
    float *master = malloc(n * sizeof(float));
    uint16_t *out = malloc(n * sizeof(uint16_t));
    assert_non_null(master);
    assert_non_null(out);
    for (size_t i = 0; i < n; i++) master[i] = 0.05f * rng_normal(11, 77, i);
    master[0] = 1.0f;        // a few exact and special values among them
    master[1] = -INFINITY;
    master[2] = NAN;
    ZeroStream *s = b->main_stream(b);
    b->refresh(b, out, ZERO_BF16, master, n, seed, t, gidx0, s);
    b->stream_sync(b, s);
    size_t not_trainer = 0, not_spec = 0, first_bad = n;
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = rng_u32(seed, RNG_STREAM_ROUNDING, ((uint64_t)t << 40) | (gidx0 + i));
        if (out[i] != adamw_round_bf16_at(master[i], seed, (uint64_t)t, gidx0 + i)) not_trainer++;
        int finite = isfinite(master[i]);
        if (finite ? out[i] != spec_round(master[i], bits) : out[i] != adamw_round_bf16(master[i], bits)) {
            if (first_bad == n) first_bad = i;
            not_spec++;
        }
    }
    if (not_trainer || not_spec)
        fail_msg("zero host refresh: %zu/%zu elements differ from train_gpt2cu's rounding, %zu from the rule "
                 "(first at %zu: x bits 0x%08x, got 0x%04x)", not_trainer, n, not_spec, first_bad,
                 first_bad < n ? bits_of(master[first_bad]) : 0, first_bad < n ? out[first_bad] : 0);
    assert_true(isnan(widen(out[2])));
    free(master);
    free(out);
    zero_backend_host_free(b);
    zero_comm_free(comm);
}

// The global index zero/ keys each element with is its position when the tensor table is
// laid end to end; train_gpt2_zero's table is gpt2_slices() in order, and gpt2_cuda.cu keys
// train_gpt2cu's elements the same way (slice order, not llm.c's tensor order).
static void test_gpt2_slice_order_is_zero_global_index(void **state) {
    (void)state;
    GPT2Config c;
    char err[256];
    assert_int_equal(gpt2_config_from_descriptor("d4", &c, err, sizeof err), 0);
    int ns = gpt2_num_slices(&c);
    GPT2Slice *sl = malloc((size_t)ns * sizeof(GPT2Slice));
    ZeroTensor *zt = calloc((size_t)ns, sizeof(ZeroTensor));
    assert_non_null(sl);
    assert_non_null(zt);
    gpt2_slices(&c, sl);
    for (int k = 0; k < ns; k++) {
        zt[k].name = sl[k].name;
        zt[k].numel = sl[k].numel;
    }
    for (int world = 1; world <= 8; world *= 2) {
        ZeroLayout lay;
        assert_int_equal(zero_layout_build(&lay, zt, ns, world, world - 1, err, sizeof err), 0);
        uint64_t key = 0;
        int moved = 0;
        for (int k = 0; k < ns; k++) {
            assert_int_equal(lay.t[k].global_off, key);
            moved |= key != sl[k].offset;   // slice order is not llm.c order
            key += sl[k].numel;
        }
        assert_true(moved);
        zero_layout_free(&lay);
    }
    free(sl);
    free(zt);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_bf16_values_stay),
        cmocka_unit_test(test_nan_and_inf_stay),
        cmocka_unit_test(test_carry_count_is_the_low_half),
        cmocka_unit_test(test_overflow_carries_to_inf),
        cmocka_unit_test(test_keyed_rounding_is_unbiased),
        cmocka_unit_test(test_zero_refresh_is_the_trainer_rule),
        cmocka_unit_test(test_gpt2_slice_order_is_zero_global_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
