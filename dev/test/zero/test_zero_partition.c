// test_zero_partition.c: the padded, aligned per-tensor split of zero/partition.c.
// The source is included directly so this test builds with the plain test rule
// (no MPI needed: partition.c is pure arithmetic).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../../zero/partition.c"

static size_t ceil_div(size_t a, size_t b) { return a / b + (a % b != 0); }

// The properties every split must have, checked for one (numel, world).
static void check_split(size_t numel, int world) {
    ZeroSplit s = {0};
    assert_int_equal(zero_split(numel, world, &s), 0);
    assert_int_equal(s.numel, numel);
    assert_int_equal(s.world, world);
    assert_int_equal(s.shard % ZERO_ALIGN_ELEMS, 0);
    assert_int_equal(s.padded, s.shard * (size_t)world);
    assert_true(s.padded >= numel);
    // smallest aligned slot that holds ceil(numel / N)
    assert_true(s.shard >= ceil_div(numel, (size_t)world));
    if (s.shard > 0) assert_true(s.shard - ZERO_ALIGN_ELEMS < ceil_div(numel, (size_t)world));
    else assert_int_equal(numel, 0);
    // ranks own consecutive, disjoint ranges that cover [0, numel) exactly
    size_t next = 0;
    for (int r = 0; r < world; r++) {
        size_t b = zero_owned_begin(&s, r), c = zero_owned_count(&s, r);
        assert_true(c <= s.shard);
        if (c > 0) {
            assert_int_equal(b, (size_t)r * s.shard);  // the owned range starts the slot
            assert_int_equal(b, next);
        }
        assert_true(b <= numel);
        next = b + c > next ? b + c : next;
    }
    assert_int_equal(next, numel);
}

static void test_many_sizes(void **state) {
    (void)state;
    static const size_t sizes[] = {0, 1, 2, 3, 7, 15, 16, 17, 31, 33, 63, 64, 65, 100, 127, 129, 255, 1000,
                                   1023, 1025, 4095, 50257, 65536, 768 * 3 * 768 + 1, 38597376};
    static const int worlds[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 31, 64, 100};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (size_t j = 0; j < sizeof worlds / sizeof worlds[0]; j++) check_split(sizes[i], worlds[j]);
    for (size_t n = 0; n < 300; n++)
        for (int w = 1; w <= 10; w++) check_split(n, w);
}

static void test_exact_figures(void **state) {
    (void)state;
    ZeroSplit s = {0};
    // divisible and aligned: four slots of 16
    assert_int_equal(zero_split(64, 4, &s), 0);
    assert_int_equal(s.shard, 16);
    for (int r = 0; r < 4; r++) assert_int_equal(zero_owned_count(&s, r), 16);
    // 65 over 4: ceil 17 rounds up to 32; owners 32, 32, 1, 0
    assert_int_equal(zero_split(65, 4, &s), 0);
    assert_int_equal(s.shard, 32);
    assert_int_equal(s.padded, 128);
    assert_int_equal(zero_owned_count(&s, 0), 32);
    assert_int_equal(zero_owned_count(&s, 1), 32);
    assert_int_equal(zero_owned_count(&s, 2), 1);
    assert_int_equal(zero_owned_count(&s, 3), 0);
    assert_int_equal(zero_owned_begin(&s, 3), 65);   // clamped: owns nothing
    // 100 over 3: ceil 34 -> 48; owners 48, 48, 4
    assert_int_equal(zero_split(100, 3, &s), 0);
    assert_int_equal(s.shard, 48);
    assert_int_equal(zero_owned_count(&s, 2), 4);
    // numel < N: rank 0 owns all of it, the others hold only padding
    assert_int_equal(zero_split(3, 4, &s), 0);
    assert_int_equal(s.shard, 16);
    assert_int_equal(zero_owned_count(&s, 0), 3);
    for (int r = 1; r < 4; r++) assert_int_equal(zero_owned_count(&s, r), 0);
    // a scalar on one rank
    assert_int_equal(zero_split(1, 1, &s), 0);
    assert_int_equal(s.shard, 16);
    // empty tensor
    assert_int_equal(zero_split(0, 8, &s), 0);
    assert_int_equal(s.shard, 0);
    assert_int_equal(s.padded, 0);
    assert_int_equal(zero_owned_count(&s, 5), 0);
}

static void test_bad_requests(void **state) {
    (void)state;
    ZeroSplit s = {0};
    assert_int_equal(zero_split(10, 0, &s), -1);
    assert_int_equal(zero_split(10, -3, &s), -1);
    assert_int_equal(zero_split(SIZE_MAX, 2, &s), -1);          // padding overflows
    assert_int_equal(zero_split(SIZE_MAX - 5, 1, &s), -1);
    ZeroLayout l = {0};
    char err[256];
    ZeroTensor t[1] = {{"huge", SIZE_MAX, 0, {0}, 1}};
    assert_int_equal(zero_layout_build(&l, t, 1, 4, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "huge"));
    assert_int_equal(zero_layout_build(&l, t, 1, 4, 4, err, sizeof err), -1);  // rank out of range
    assert_int_equal(zero_layout_build(&l, t, 0, 4, 0, err, sizeof err), -1);  // no tensors
}

static void test_layout_offsets(void **state) {
    (void)state;
    ZeroTensor t[5] = {
        {"a", 377, 1, {0}, 1}, {"b", 29, 0, {1}, 1}, {"c", 1, 0, {1}, 1}, {"d", 0, 0, {2}, 1}, {"e", 841, 1, {2}, 1},
    };
    for (int world = 1; world <= 6; world++)
        for (int rank = 0; rank < world; rank++) {
            ZeroLayout l = {0};
            char err[128];
            assert_int_equal(zero_layout_build(&l, t, 5, world, rank, err, sizeof err), 0);
            size_t sh = 0, full = 0, maxp = 0;
            uint64_t g = 0;
            for (int i = 0; i < 5; i++) {
                const ZeroTensorLayout *x = &l.t[i];
                assert_int_equal(x->shard_off, sh);
                assert_int_equal(x->full_off, full);
                assert_int_equal(x->global_off, g);
                // every buffer offset stays a whole number of aligned vectors
                assert_int_equal(x->shard_off % ZERO_ALIGN_ELEMS, 0);
                assert_int_equal(x->full_off % ZERO_ALIGN_ELEMS, 0);
                assert_int_equal(x->own_begin, zero_owned_begin(&x->split, rank));
                assert_int_equal(x->own_count, zero_owned_count(&x->split, rank));
                sh += x->split.shard;
                full += x->split.padded;
                g += t[i].numel;
                if (x->split.padded > maxp) maxp = x->split.padded;
            }
            assert_int_equal(l.shard_total, sh);
            assert_int_equal(l.padded_total, full);
            assert_int_equal(l.padded_total, (size_t)world * l.shard_total);
            assert_int_equal(l.numel_total, 377 + 29 + 1 + 0 + 841);
            assert_int_equal(l.max_padded, maxp);
            zero_layout_free(&l);
        }
}

// Builds every rank's slot the way the plugin does (owned values, then zero padding),
// concatenates the slots as an all-gather would, and checks that the real tensor comes
// back in place with zero padding behind it.
static void test_slots_reassemble_with_zero_padding(void **state) {
    (void)state;
    static const size_t sizes[] = {1, 3, 17, 100, 377, 841, 1000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int world = 1; world <= 8; world++) {
            size_t numel = sizes[i];
            ZeroSplit s = {0};
            assert_int_equal(zero_split(numel, world, &s), 0);
            float *tensor = malloc(numel * sizeof(float));
            for (size_t k = 0; k < numel; k++) tensor[k] = (float)k + 0.5f;
            float *gathered = malloc(s.padded * sizeof(float));
            memset(gathered, 0xff, s.padded * sizeof(float));   // NaN garbage: must be overwritten
            for (int r = 0; r < world; r++) {
                float *slot = calloc(s.shard ? s.shard : 1, sizeof(float));
                memcpy(slot, tensor + zero_owned_begin(&s, r), zero_owned_count(&s, r) * sizeof(float));
                memcpy(gathered + (size_t)r * s.shard, slot, s.shard * sizeof(float));
                free(slot);
            }
            assert_memory_equal(gathered, tensor, numel * sizeof(float));
            for (size_t k = numel; k < s.padded; k++) assert_true(gathered[k] == 0.0f);
            free(tensor);
            free(gathered);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_sizes),
        cmocka_unit_test(test_exact_figures),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_layout_offsets),
        cmocka_unit_test(test_slots_reassemble_with_zero_padding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
