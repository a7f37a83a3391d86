// grad_norm.h: the global gradient norm of a flat gradient buffer taken slice by slice
// (the GPT-2 slices of gpt2_slices(), in table order), in llmc/numerics/adamw.h's order: each
// slice split into blocks of ADAMW_SUMSQ_BLOCK from its start, each block summed left to
// right in double, block sums added left to right into the slice's sum, slice sums added
// in table order. That is what zero/ computes on its tensor table (the same slices), so
// train_gpt2cu and a 1-rank train_gpt2_zero clip by the same bits. The host version
// lives here; the CUDA one (grad_norm.cuh) walks the same blocks with the same locator.
#ifndef LLMC_GRAD_NORM_H
#define LLMC_GRAD_NORM_H

#include <stddef.h>

#include "../numerics/adamw.h"
#include "gpt2_config.h"

#ifdef __cplusplus
extern "C" {
#endif

// A slice as the norm sees it: its place in the flat buffer and the index of its first
// block among the blocks of all slices (blocks numbered slice after slice).
typedef struct {
    size_t offset, numel;
    size_t first_block;
} GradNormSpan;

// The CUDA version's state (grad_norm.cuh): the span table on the device and room for the
// partial sums. Plain pointers, so that C headers (gpt2_cuda.h) can hold one.
typedef struct {
    GradNormSpan *spans;   // device: one per slice
    int nspans;
    size_t nblocks;        // blocks of all slices
    double *partials;      // device: nblocks block sums, then nspans slice sums
} GradNormPlan;

// Device bytes the CUDA version's plan needs for these slices (grad_norm_plan_init):
// host arithmetic, so the memory prediction (gpt2_cuda_memory.c) runs without a GPU.
size_t grad_norm_plan_bytes(const GPT2Slice *slices, int n);

// Fills spans[0, n) from slices[0, n); returns the number of blocks of all of them.
size_t grad_norm_spans(const GPT2Slice *slices, int n, GradNormSpan *spans);

// Block b (< the total) of spans[0, n): its first element in the flat buffer and its
// length (1..ADAMW_SUMSQ_BLOCK). The span is the last one starting at or before block b,
// which skips empty spans (they share their successor's first_block).
static inline ADAMW_HD void grad_norm_block(const GradNormSpan *spans, int n, size_t b, size_t *lo, int *len) {
    int a = 0, z = n - 1;
    while (a < z) {
        int mid = a + (z - a + 1) / 2;
        if (spans[mid].first_block <= b) a = mid;
        else z = mid - 1;
    }
    const size_t k = (b - spans[a].first_block) * ADAMW_SUMSQ_BLOCK, left = spans[a].numel - k;
    *lo = spans[a].offset + k;
    *len = left < ADAMW_SUMSQ_BLOCK ? (int)left : ADAMW_SUMSQ_BLOCK;
}

// The sum of squares of g over slices[0, n) in the order above. Blocks run on OpenMP
// threads; the result does not depend on their number.
double grad_norm_sumsq(const float *g, const GPT2Slice *slices, int n);

#ifdef __cplusplus
}
#endif
#endif
