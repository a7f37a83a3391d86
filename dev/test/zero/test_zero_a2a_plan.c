// test_zero_a2a_plan.c: the NCCL all-to-all's call plan (zero/cuda/a2a_plan.c), checked for
// every rank of a simulated world, up to thousands of ranks: no group exceeds NCCL's
// limit, every rank sends each peer each part's slice exactly once and receives likewise,
// and every send meets its receive in the group with the same index on the other rank
// (groups complete in order, so a send in another group would hang). Included directly so
// the test builds with the plain test rule.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../../zero/cuda/a2a_plan.c"

#define NCCL_GROUP_LIMIT 2048   // NCCL's documented maximum of calls per group

typedef struct {
    int world, rank, nparts;
    int group, in_group, open, max_in_group, errors;
    // per (part, peer): group index of the send to / receive from that peer, -1 if none
    int *send_group, *recv_group;
} Trace;

static void visit(void *arg, ZeroA2AOp op, int part, int to, int from) {
    Trace *t = arg;
    if (op == ZERO_A2A_GROUP_START) {
        if (t->open) t->errors++;
        t->open = 1;
        t->in_group = 0;
        return;
    }
    if (op == ZERO_A2A_GROUP_END) {
        if (!t->open) t->errors++;
        t->open = 0;
        t->group++;
        return;
    }
    if (!t->open || to == t->rank || from == t->rank || to < 0 || from < 0 || to >= t->world || from >= t->world) t->errors++;
    t->in_group += 2;
    if (t->in_group > t->max_in_group) t->max_in_group = t->in_group;
    size_t s = (size_t)part * (size_t)t->world + (size_t)to, r = (size_t)part * (size_t)t->world + (size_t)from;
    if (t->send_group[s] != -1 || t->recv_group[r] != -1) t->errors++;   // twice
    t->send_group[s] = t->group;
    t->recv_group[r] = t->group;
}

static void trace_rank(Trace *t, int world, int rank, const ZeroCollPart *parts, int nparts, int max_calls) {
    memset(t, 0, sizeof *t);
    t->world = world;
    t->rank = rank;
    t->nparts = nparts;
    size_t n = (size_t)nparts * (size_t)world;
    t->send_group = malloc(n * sizeof(int));
    t->recv_group = malloc(n * sizeof(int));
    assert_non_null(t->send_group);
    assert_non_null(t->recv_group);
    memset(t->send_group, 0xff, n * sizeof(int));
    memset(t->recv_group, 0xff, n * sizeof(int));
    zero_a2a_plan(world, rank, parts, nparts, max_calls, visit, t);
}

static void trace_free(Trace *t) {
    free(t->send_group);
    free(t->recv_group);
}

// Checks ranks `ranks[0..nranks)` of a world (all of them when ranks is NULL).
static void check_world(int world, const int *ranks, int nranks, const ZeroCollPart *parts, int nparts, int max_calls) {
    int n = ranks ? nranks : world;
    Trace *tr = calloc((size_t)world, sizeof(Trace));
    assert_non_null(tr);
    for (int i = 0; i < n; i++) {
        int r = ranks ? ranks[i] : i;
        trace_rank(&tr[r], world, r, parts, nparts, max_calls);
        Trace *t = &tr[r];
        assert_int_equal(t->errors, 0);
        assert_false(t->open);
        assert_true(t->max_in_group <= max_calls);
        assert_true(t->max_in_group <= NCCL_GROUP_LIMIT);
        for (int p = 0; p < nparts; p++)
            for (int q = 0; q < world; q++) {
                int expect = parts[p].count > 0 && q != r;   // each peer once per non-empty part
                assert_int_equal(t->send_group[(size_t)p * world + q] >= 0, expect);
                assert_int_equal(t->recv_group[(size_t)p * world + q] >= 0, expect);
            }
    }
    // every send of a traced rank meets the traced peer's receive in the same group
    for (int i = 0; i < n; i++) {
        int a = ranks ? ranks[i] : i;
        for (int j = 0; j < n; j++) {
            int b = ranks ? ranks[j] : j;
            if (a == b) continue;
            for (int p = 0; p < nparts; p++)
                assert_int_equal(tr[a].send_group[(size_t)p * world + b], tr[b].recv_group[(size_t)p * world + a]);
        }
    }
    for (int i = 0; i < n; i++) trace_free(&tr[ranks ? ranks[i] : i]);
    free(tr);
}

static void test_small_worlds_every_rank(void **state) {
    (void)state;
    ZeroCollPart parts[5] = {{0, 0, 7}, {0, 0, 0}, {0, 0, 1}, {0, 0, 3}, {0, 0, 0}};   // empty parts skipped
    for (int world = 1; world <= 9; world++) check_world(world, NULL, 0, parts, 5, 6);
    check_world(37, NULL, 0, parts, 5, 1024);
}

static void test_groups_split_inside_a_part(void **state) {
    (void)state;
    // one part whose peers alone need more calls than a group holds
    ZeroCollPart parts[2] = {{0, 0, 5}, {0, 0, 5}};
    check_world(600, NULL, 0, parts, 2, 1024);
}

static void test_thousands_of_ranks(void **state) {
    (void)state;
    // 4096 ranks: each part needs 8190 calls, four groups of at most 1024 calls and more;
    // a spread of ranks (neighbours, the ends, strides) checked pairwise
    ZeroCollPart parts[3] = {{0, 0, 16}, {0, 0, 0}, {0, 0, 2}};
    static const int ranks[] = {0, 1, 2, 511, 512, 1023, 1024, 2047, 2048, 3000, 4094, 4095};
    check_world(4096, ranks, (int)(sizeof ranks / sizeof ranks[0]), parts, 3, 1024);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_worlds_every_rank),
        cmocka_unit_test(test_groups_split_inside_a_part),
        cmocka_unit_test(test_thousands_of_ranks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
