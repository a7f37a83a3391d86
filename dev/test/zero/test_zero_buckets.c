// test_zero_buckets.c: the gradient reduction's groups (zero/reduce.c) do not depend on the
// wire. A group holds at most the bucket's padded elements (or one larger tensor), one
// collective each; the two-hop paths (--hier-reduce, and qgZ's int4 records at any block,
// fp32 or bf16 gradients, whose records may be larger than the gradient at block 2) must
// form exactly the flat path's groups, so that their buffers, sized for the worst group,
// never split one nor overflow (which ends the run). Counted by the dry run (zero_predict)
// over tables of equal tensors and of mixed sizes, at several worlds, node sizes, stages and
// buckets.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "../../../zero/zero.h"

#define MAX_T 64

typedef struct {
    ZeroTensor t[MAX_T];
    char names[MAX_T][16];
    int n, units;
    size_t total;
} Table;

static void table(Table *tb, int n, const size_t *sizes, int nsizes, int per_unit) {
    memset(tb, 0, sizeof *tb);
    tb->n = n;
    tb->units = (n + per_unit - 1) / per_unit;
    for (int i = 0; i < n; i++) {
        snprintf(tb->names[i], sizeof tb->names[i], "t%d", i);
        tb->t[i].name = tb->names[i];
        tb->t[i].numel = sizes[i % nsizes];
        tb->t[i].units[0] = i / per_unit;
        tb->t[i].num_units = 1;
        tb->total += sizes[i % nsizes];
    }
}

// Buckets of a 2-step run on rank 0, or -1 when the prediction failed.
static long long buckets(const Table *tb, int stage, int world, int node, ZeroDType grad, int hier, int qgz, int block,
                         size_t bucket) {
    ZeroConfig c;
    zero_config_defaults(&c);
    c.stage = stage;
    c.param_dtype = grad == ZERO_BF16 ? ZERO_BF16 : ZERO_F32;
    c.grad_dtype = grad;
    c.node_size = node;
    c.hier_reduce = hier;
    c.qgz = qgz;
    c.qgz_block = block;
    c.bucket_elems = bucket;
    ZeroPrediction p[8];
    if (zero_predict(tb->t, tb->n, tb->units, &c, world, 1, 2, p) != 0) return -1;
    return (long long)p[0].buckets;
}

static void test_groups_do_not_depend_on_the_wire(void **state) {
    (void)state;
    static const size_t equal[] = {4096}, mixed[] = {1, 17, 4096, 100000, 64, 3000, 16, 50000};
    static const struct { int world, node; } layouts[] = {{4, 2}, {8, 4}, {8, 8}, {2, 1}};
    static const struct { int hier, qgz, block; } wires[] = {{1, 0, 0}, {0, 1, 2}, {0, 1, 4}, {0, 1, 64}, {0, 1, 2048}};
    static const ZeroDType grads[] = {ZERO_F32, ZERO_BF16};
    int checked = 0;
    for (int k = 0; k < 2; k++) {
        Table tb;
        if (k == 0) table(&tb, 64, equal, 1, 8);
        else table(&tb, 48, mixed, 8, 6);
        const size_t bucket_sizes[] = {4096, 40000, tb.total, tb.total + tb.total / 2};
        for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++)
            for (int stage = 1; stage <= 3; stage++)
                for (size_t g = 0; g < 2; g++)
                    for (size_t b = 0; b < sizeof bucket_sizes / sizeof bucket_sizes[0]; b++) {
                        const int W = layouts[l].world, X = layouts[l].node;
                        long long flat = buckets(&tb, stage, W, X, grads[g], 0, 0, 0, bucket_sizes[b]);
                        if (flat <= 0) fail_msg("table %d, stage %d, world %d: the flat prediction failed", k, stage, W);
                        for (size_t w = 0; w < sizeof wires / sizeof wires[0]; w++) {
                            long long got = buckets(&tb, stage, W, X, grads[g], wires[w].hier, wires[w].qgz, wires[w].block,
                                                    bucket_sizes[b]);
                            if (got != flat)
                                fail_msg("table %d, stage %d, world %d of nodes of %d, %s gradients, bucket %zu, %s block %d: "
                                         "%lld buckets in 2 steps, the flat path %lld", k, stage, W, X,
                                         grads[g] == ZERO_BF16 ? "bf16" : "fp32", bucket_sizes[b],
                                         wires[w].qgz ? "qgZ" : "two hops", wires[w].block, got, flat);
                            checked++;
                        }
                    }
    }
    print_message("%d configurations: the two-hop paths form the flat path's groups\n", checked);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_groups_do_not_depend_on_the_wire),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
