// grad_norm.c: the host gradient norm of grad_norm.h: block sums in parallel, then the
// ordered additions on one thread.
#include "grad_norm.h"

#include <stdlib.h>

#include "../utils.h"

size_t grad_norm_spans(const GPT2Slice *slices, int n, GradNormSpan *spans) {
    size_t blocks = 0;
    for (int k = 0; k < n; k++) {
        spans[k].offset = slices[k].offset;
        spans[k].numel = slices[k].numel;
        spans[k].first_block = blocks;
        blocks += (slices[k].numel + ADAMW_SUMSQ_BLOCK - 1) / ADAMW_SUMSQ_BLOCK;
    }
    return blocks;
}

size_t grad_norm_plan_bytes(const GPT2Slice *slices, int n) {
    size_t nblocks = 0;
    for (int k = 0; k < n; k++) nblocks += (slices[k].numel + ADAMW_SUMSQ_BLOCK - 1) / ADAMW_SUMSQ_BLOCK;
    // the span table (256-aligned), then a double per block and per slice
    return ((size_t)n * sizeof(GradNormSpan) + 255) / 256 * 256 + (nblocks + (size_t)n) * sizeof(double);
}

double grad_norm_sumsq(const float *g, const GPT2Slice *slices, int n) {
    if (n <= 0) return 0.0;
    GradNormSpan *spans = (GradNormSpan *)malloc_check((size_t)n * sizeof(GradNormSpan));
    const size_t nblocks = grad_norm_spans(slices, n, spans);
    double *part = (double *)malloc_check((nblocks ? nblocks : 1) * sizeof(double));
    #pragma omp parallel for schedule(static)
    for (size_t b = 0; b < nblocks; b++) {
        size_t lo;
        int len;
        grad_norm_block(spans, n, b, &lo, &len);
        double sum = 0.0;
        for (int i = 0; i < len; i++) sum = adamw_sumsq_add(sum, g[lo + (size_t)i]);
        part[b] = sum;
    }
    double total = 0.0;
    for (int k = 0; k < n; k++) {
        const size_t end = k + 1 < n ? spans[k + 1].first_block : nblocks;
        double slice = 0.0;
        for (size_t b = spans[k].first_block; b < end; b++) slice += part[b];
        total += slice;
    }
    free(part);
    free(spans);
    return total;
}
