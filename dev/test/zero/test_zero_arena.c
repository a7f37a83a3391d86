// test_zero_arena.c: placement in the fixed stage-2/3 pools (zero/arena.c), included
// directly so the test builds with the plain test rule.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "../../../zero/arena.c"

static void test_bottom_and_top(void **state) {
    (void)state;
    ZeroArena a;
    assert_int_equal(zero_arena_init(&a, 100, 8), 0);
    assert_int_equal(zero_arena_alloc(&a, 10, 0), 0);
    assert_int_equal(zero_arena_alloc(&a, 20, 0), 10);
    assert_int_equal(zero_arena_alloc(&a, 30, 1), 70);   // long-lived: from the top
    assert_int_equal(zero_arena_alloc(&a, 5, 1), 65);
    assert_int_equal(a.in_use, 65);
    assert_int_equal(zero_arena_alloc(&a, 36, 0), ZERO_ARENA_FULL);  // gap is 35
    assert_int_equal(zero_arena_alloc(&a, 35, 0), 30);
    assert_int_equal(a.in_use, 100);
    assert_int_equal(a.peak, 100);
    zero_arena_free_all(&a);
}

static void test_reuse_first_fit(void **state) {
    (void)state;
    ZeroArena a;
    assert_int_equal(zero_arena_init(&a, 64, 8), 0);
    size_t x = zero_arena_alloc(&a, 16, 0), y = zero_arena_alloc(&a, 16, 0), w = zero_arena_alloc(&a, 16, 0);
    assert_int_equal(x, 0);
    assert_int_equal(y, 16);
    assert_int_equal(w, 32);
    assert_int_equal(zero_arena_release(&a, y), 0);
    assert_int_equal(zero_arena_release(&a, y), -1);          // not allocated any more
    assert_int_equal(zero_arena_alloc(&a, 32, 0), ZERO_ARENA_FULL);   // two gaps of 16, none of 32
    assert_int_equal(zero_arena_alloc(&a, 8, 0), 16);          // first gap that fits
    assert_int_equal(zero_arena_alloc(&a, 16, 0), 48);
    assert_int_equal(zero_arena_release(&a, x), 0);
    assert_int_equal(zero_arena_release(&a, w), 0);
    assert_int_equal(a.in_use, 24);
    assert_int_equal(a.peak, 56);
    assert_int_equal(zero_arena_alloc(&a, 0, 0), ZERO_ARENA_FULL);    // empty blocks are not placed
    assert_int_equal(zero_arena_alloc(&a, 65, 0), ZERO_ARENA_FULL);
    zero_arena_free_all(&a);
}

static void test_block_limit_and_determinism(void **state) {
    (void)state;
    ZeroArena a, b;
    assert_int_equal(zero_arena_init(&a, 1000, 3), 0);
    assert_int_equal(zero_arena_init(&b, 1000, 3), 0);
    for (int i = 0; i < 3; i++) assert_int_equal(zero_arena_alloc(&a, 10, i & 1), zero_arena_alloc(&b, 10, i & 1));
    assert_int_equal(zero_arena_alloc(&a, 10, 0), ZERO_ARENA_FULL);   // table full
    assert_int_equal(zero_arena_release(&a, 990), 0);
    assert_int_equal(zero_arena_alloc(&a, 10, 0), 20);
    zero_arena_free_all(&a);
    zero_arena_free_all(&b);
}

// A block at a given offset: refused where it overlaps a live block (on either side) or
// passes the end; a freed place takes it again; the table stays sorted for first fit.
static void test_place_at(void **state) {
    (void)state;
    ZeroArena a;
    assert_int_equal(zero_arena_init(&a, 100, 8), 0);
    assert_int_equal(zero_arena_place(&a, 40, 20), 40);
    assert_int_equal(zero_arena_place(&a, 30, 11), ZERO_ARENA_FULL);   // its last element is 40
    assert_int_equal(zero_arena_place(&a, 59, 5), ZERO_ARENA_FULL);    // its first is 59
    assert_int_equal(zero_arena_place(&a, 45, 5), ZERO_ARENA_FULL);    // inside
    assert_int_equal(zero_arena_place(&a, 30, 10), 30);                // ends where the other starts
    assert_int_equal(zero_arena_place(&a, 60, 40), 60);                // starts where it ends, to the end
    assert_int_equal(zero_arena_place(&a, 100, 1), ZERO_ARENA_FULL);   // past the end
    assert_int_equal(zero_arena_place(&a, (size_t)-8, 16), ZERO_ARENA_FULL);   // off + size wraps
    assert_int_equal(zero_arena_place(&a, 0, 0), ZERO_ARENA_FULL);
    assert_int_equal(a.in_use, 70);
    assert_int_equal(zero_arena_alloc(&a, 30, 0), 0);                  // first fit sees the placed blocks
    assert_int_equal(zero_arena_alloc(&a, 1, 0), ZERO_ARENA_FULL);
    assert_int_equal(zero_arena_release(&a, 40), 0);
    assert_int_equal(zero_arena_place(&a, 40, 20), 40);
    zero_arena_free_all(&a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bottom_and_top),
        cmocka_unit_test(test_reuse_first_fit),
        cmocka_unit_test(test_block_limit_and_determinism),
        cmocka_unit_test(test_place_at),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
