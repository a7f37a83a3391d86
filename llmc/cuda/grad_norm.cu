// grad_norm.cu: the gradient norm of grad_norm.h on the device. One kernel sums the
// blocks, a warp per 32 blocks (adamw_sumsq_warp, the routine zero/'s CUDA backend runs
// too); a second adds each slice's block sums in order, one thread per slice, then one
// thread adds the slice sums in order and derives the norm and the clip scale. The
// float work goes through adamw.h's rounded intrinsics and PTX, which this file's
// --use_fast_math cannot rewrite.
#include "grad_norm.cuh"
#include "../utils.h"

#define GN_WARPS 4          // warps per block of the block-sum kernel
#define GN_FINAL_THREADS 256

void grad_norm_plan_init(GradNormPlan *plan, void *mem, const GPT2Slice *slices, int n, cudaStream_t stream) {
    GradNormSpan *host = (GradNormSpan *)malloc((size_t)(n > 0 ? n : 1) * sizeof(GradNormSpan));
    if (!host) {
        die("grad_norm_plan_init: out of host memory for %d slices", n);
    }
    plan->nblocks = grad_norm_spans(slices, n, host);
    plan->nspans = n;
    plan->spans = (GradNormSpan *)mem;
    plan->partials = (double *)((char *)mem + round_up((size_t)n * sizeof(GradNormSpan), 256));
    // a pageable source: the copy may read it until it is done ("might be synchronous"), so
    // it is freed after the stream's wait (once, at start-up)
    CUDA_CHECK(cudaMemcpyAsync(plan->spans, host, (size_t)n * sizeof(GradNormSpan), cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    free(host);
}

__global__ void __launch_bounds__(GN_WARPS * 32)
grad_block_sums_kernel(double *partials, const float *g, const GradNormSpan *spans, int nspans, size_t nblocks) {
    __shared__ AdamWSumsqTile tiles[GN_WARPS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t first = ((size_t)blockIdx.x * GN_WARPS + warp) * 32;
    if (first >= nblocks) return;   // uniform per warp; no block-wide barrier follows
    const size_t b = first + lane;
    const float *block = NULL;
    int len = 0;
    if (b < nblocks) {
        size_t lo;
        grad_norm_block(spans, nspans, b, &lo, &len);
        block = g + lo;
    }
    const double sum = adamw_sumsq_warp(block, len, &tiles[warp]);
    if (b < nblocks) partials[b] = sum;
}

__global__ void __launch_bounds__(GN_FINAL_THREADS)
grad_norm_final_kernel(float *out, double *partials, const GradNormSpan *spans, int nspans, size_t nblocks,
                       float grad_clip) {
    double *slice_sums = partials + nblocks;
    for (int k = threadIdx.x; k < nspans; k += blockDim.x) {
        const size_t end = k + 1 < nspans ? spans[k + 1].first_block : nblocks;
        double s = 0.0;
        for (size_t b = spans[k].first_block; b < end; b++) s = __dadd_rn(s, partials[b]);
        slice_sums[k] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (int k = 0; k < nspans; k++) total = __dadd_rn(total, slice_sums[k]);
        const float norm = adamw_norm(total);
        out[0] = norm;
        out[1] = adamw_clip_scale(norm, grad_clip);
    }
}

void grad_norm_clip(float *out, const float *g, const GradNormPlan *plan, float grad_clip, cudaStream_t stream) {
    if (plan->nblocks > 0) {
        const size_t grid = ceil_div(plan->nblocks, (size_t)32 * GN_WARPS);
        if (grid > 0x7fffffffu) {
            die("grad_norm_clip: %zu norm blocks need a grid of %zu, above CUDA's limit", plan->nblocks, grid);
        }
        grad_block_sums_kernel<<<(unsigned)grid, GN_WARPS * 32, 0, stream>>>(plan->partials, g, plan->spans,
                                                                            plan->nspans, plan->nblocks);
        CUDA_LAUNCH_CHECK();
    }
    grad_norm_final_kernel<<<1, GN_FINAL_THREADS, 0, stream>>>(out, plan->partials, plan->spans, plan->nspans,
                                                               plan->nblocks, grad_clip);
    CUDA_LAUNCH_CHECK();
}
