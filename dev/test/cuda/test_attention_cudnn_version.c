// test_attention_cudnn_version.c: which runtime cuDNN versions the cuDNN attention accepts
// (llmc/cuda/attention_cudnn_version.h, decided without a GPU) and the mask value it binds.
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "../../../llmc/cuda/attention_cudnn_version.h"

// cuDNN 9 numbering: major * 10000 + minor * 100 + patch.
static size_t v9(size_t minor, size_t patch) { return 90000 + minor * 100 + patch; }

static void test_known_bad_backward_refused(void **state) {
    (void)state;
    assert_int_equal(v9(10, 0), 91000);
    assert_false(attention_cudnn_backward_ok(v9(10, 0)));
    assert_false(attention_cudnn_backward_ok(v9(10, 1)));
}

static void test_neighbours_accepted(void **state) {
    (void)state;
    const size_t good[] = {v9(0, 0), v9(9, 0), v9(9, 1), v9(9, 99), v9(10, 2), v9(10, 3), v9(11, 0),
                           v9(11, 1), v9(15, 1), v9(19, 0)};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        if (!attention_cudnn_backward_ok(good[i])) fail_msg("cuDNN %zu refused", good[i]);
}

// Every cuDNN 9 version: refused exactly when (minor, patch) is (10, 0) or (10, 1).
static void test_all_of_cudnn_9(void **state) {
    (void)state;
    int refused = 0;
    for (size_t minor = 0; minor < 100; minor++)
        for (size_t patch = 0; patch < 100; patch++) {
            int bad = minor == 10 && patch <= 1;
            if (attention_cudnn_backward_ok(v9(minor, patch)) == bad)
                fail_msg("cuDNN 9.%zu.%zu: backward_ok %d", minor, patch, attention_cudnn_backward_ok(v9(minor, patch)));
            refused += bad;
        }
    assert_int_equal(refused, 2);
}

static void test_version_name(void **state) {
    (void)state;
    char buf[32];
    attention_cudnn_version_name(91001, buf, sizeof buf);
    assert_string_equal(buf, "9.10.1");
    attention_cudnn_version_name(90900, buf, sizeof buf);
    assert_string_equal(buf, "9.9.0");
    attention_cudnn_version_name(91501, buf, sizeof buf);
    assert_string_equal(buf, "9.15.1");
}

// The rules a dry run applies without a GPU, case by case: cuDNN 8, the bad backward, a head
// size off 16-byte rows, and T off 128 before 9.15.1; each refusal says why.
static void test_rules(void **state) {
    (void)state;
    const struct { size_t version; int T, HS, ok; const char *why; } cases[] = {
        {8907, 1024, 64, 0, "older than 9.0"},
        {v9(10, 0), 1024, 64, 0, "known bad bf16 attention backward"},
        {v9(10, 1), 1024, 64, 0, "9.10.1"},
        {v9(10, 2), 1024, 64, 1, ""},
        {v9(19, 0), 1024, 60, 0, "multiple of 8"},
        {v9(19, 0), 1024, 8, 1, ""},
        {v9(14, 0), 64, 64, 0, "T % 128 == 0"},
        {v9(15, 0), 1000, 64, 0, "(T=1000)"},
        {v9(15, 0), 256, 64, 1, ""},
        {v9(15, 1), 64, 64, 1, ""},
        {v9(19, 0), 63, 128, 1, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char why[256] = "";
        int ok = attention_cudnn_rules(cases[i].version, cases[i].T, cases[i].HS, why, sizeof why);
        if (ok != cases[i].ok || (!ok && !strstr(why, cases[i].why)))
            fail_msg("cuDNN %zu, T=%d, HS=%d: %d (%s), want %d (%s)", cases[i].version, cases[i].T, cases[i].HS, ok, why,
                     cases[i].ok, cases[i].why);
    }
}

// One finite mask value for every version: the lowest float, whose softmax weight is 0.
static void test_mask_value_is_lowest_finite_float(void **state) {
    (void)state;
    const float mask = ATTENTION_CUDNN_MASK_VALUE;
    assert_true(isfinite(mask));
    assert_true(mask == -FLT_MAX);
    assert_true(expf(mask - 30.0f) == 0.0f);
    assert_true(expf(mask + 30.0f) == 0.0f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_bad_backward_refused),
        cmocka_unit_test(test_neighbours_accepted),
        cmocka_unit_test(test_all_of_cudnn_9),
        cmocka_unit_test(test_version_name),
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_mask_value_is_lowest_finite_float),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
