// adamw_cuda.cu: AdamW + stochastic rounding over a table of slices, four elements per
// thread. The table travels in the kernel's parameters, ADAMW_BATCH slices a launch, so a
// step of any model is a few launches with no table in device memory and no host sync.
#include "adamw_cuda.cuh"
#include "../utils.h"

#define ADAMW_THREADS 256
#define ADAMW_BLOCK_ELEMS (4 * ADAMW_THREADS)
#define ADAMW_BATCH 128   // slices a launch: the table below is 2.6 KB, under CUDA's 4 KB of parameters
#define ADAMW_MAX_GRID 0x7fffffffu

// ADAMW_BATCH consecutive slices of a table. Slice k covers elements [offset[k], offset[k] +
// key[k + 1] - key[k]) (keys run on through the table), keyed from key[k], and its blocks
// are [first_block[k], first_block[k + 1]); first_block[n] is the grid.
typedef struct {
    uint64_t offset[ADAMW_BATCH];
    uint64_t key[ADAMW_BATCH + 1];
    unsigned first_block[ADAMW_BATCH + 1];
    unsigned decay[ADAMW_BATCH / 32];   // bit k % 32 of word k / 32: slice k decays
    int n;
} AdamWBatch;
static_assert(sizeof(AdamWBatch) < 3 * 1024, "the slice table must leave the kernel's parameters under 4 KB");

// The rule of llmc/numerics/adamw.h, shared with zero/'s refresh.
__device__ __forceinline__ bf16 round_element(float x, uint64_t seed, uint64_t step, uint64_t global_index) {
    return __ushort_as_bfloat16(adamw_round_bf16_at(x, seed, step, global_index));
}

// This block's slice: the last k with first_block[k] <= blockIdx.x (never an empty one),
// and the block's first element in it.
__device__ __forceinline__ int block_slice(const AdamWBatch &b, size_t *i0) {
    int lo = 0, hi = b.n - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (b.first_block[mid] <= blockIdx.x) lo = mid;
        else hi = mid - 1;
    }
    *i0 = (size_t)(blockIdx.x - b.first_block[lo]) * ADAMW_BLOCK_ELEMS;
    return lo;
}

// The AdamW step, and the bf16 refresh when params is not NULL. vectorized: master, grads,
// m, v are 16-byte aligned (a slice whose offset keeps that takes the 16-byte path).
__global__ void __launch_bounds__(ADAMW_THREADS)
adamw_kernel(float *master, bf16 *params, const float *grads, float *m, float *v, const AdamWBatch b, AdamWParams hp,
             const float *grad_scale, uint64_t seed, uint64_t step, int vectorized) {
    size_t i0;
    const int k = block_slice(b, &i0);
    i0 += threadIdx.x * 4;
    const size_t n = b.key[k + 1] - b.key[k];
    if (i0 >= n) return;
    const size_t o = b.offset[k] + i0;
    const uint64_t key = b.key[k] + i0;
    const int decay = (b.decay[k / 32] >> (k % 32)) & 1;
    if (grad_scale != NULL) hp.grad_scale = *grad_scale;
    if (vectorized && b.offset[k] % 4 == 0 && i0 + 4 <= n) {
        f32x4 p = load16_cs(master + o), g = load16_cs(grads + o), mm = load16_cs(m + o), vv = load16_cs(v + o);
        for (int j = 0; j < 4; j++) p.v[j] = adamw_element(p.v[j], g.v[j], &mm.v[j], &vv.v[j], &hp, decay);
        store16_cs(master + o, p);
        store16_cs(m + o, mm);
        store16_cs(v + o, vv);
        if (params != NULL)
            for (int j = 0; j < 4; j++) params[o + j] = round_element(p.v[j], seed, step, key + j);
        return;
    }
    for (size_t j = 0; j < 4 && i0 + j < n; j++) {
        float mi = m[o + j], vi = v[o + j];
        float p = adamw_element(master[o + j], grads[o + j], &mi, &vi, &hp, decay);
        master[o + j] = p;
        m[o + j] = mi;
        v[o + j] = vi;
        if (params != NULL) params[o + j] = round_element(p, seed, step, key + j);
    }
}

__global__ void __launch_bounds__(ADAMW_THREADS)
round_stochastic_kernel(bf16 *params, const float *master, const AdamWBatch b, uint64_t seed, uint64_t step) {
    size_t i0;
    const int k = block_slice(b, &i0);
    i0 += threadIdx.x * 4;
    const size_t n = b.key[k + 1] - b.key[k];
    const size_t o = b.offset[k] + i0;
    const uint64_t key = b.key[k] + i0;
    for (size_t j = 0; j < 4 && i0 + j < n; j++) params[o + j] = round_element(master[o + j], seed, step, key + j);
}

// Slices [k0, k0 + b->n) of the table into b, their keys counted on from *key; returns the
// grid, which CUDA's limit bounds.
static unsigned plan_batch(const char *fn, AdamWBatch *b, const GPT2Slice *slices, int k0, int n, uint64_t *key) {
    memset(b, 0, sizeof(*b));
    b->n = n - k0 < ADAMW_BATCH ? n - k0 : ADAMW_BATCH;
    size_t blocks = 0;
    for (int k = 0; k < b->n; k++) {
        const GPT2Slice *sl = &slices[k0 + k];
        b->offset[k] = sl->offset;
        b->key[k] = *key;
        b->first_block[k] = (unsigned)blocks;
        if (sl->decay) b->decay[k / 32] |= 1u << (k % 32);
        *key += sl->numel;
        blocks += ceil_div(sl->numel, ADAMW_BLOCK_ELEMS);
        if (blocks > ADAMW_MAX_GRID) {
            die("%s: slices %d..%d need a grid of %zu blocks, above CUDA's limit", fn, k0, k0 + k, blocks);
        }
    }
    b->key[b->n] = *key;
    b->first_block[b->n] = (unsigned)blocks;
    return (unsigned)blocks;
}

void adamw_update_slices(float *master, bf16 *params, const float *grads, float *m, float *v,
                         const GPT2Slice *slices, int n, AdamWParams hp, const float *grad_scale, uint64_t seed,
                         int step, cudaStream_t stream) {
    if (step < 0) {
        die("adamw_update_slices: negative step %d", step);
    }
    const int vectorized = (((uintptr_t)master | (uintptr_t)grads | (uintptr_t)m | (uintptr_t)v) & 15) == 0;
    uint64_t key = 0;
    for (int k0 = 0; k0 < n; k0 += ADAMW_BATCH) {
        AdamWBatch b;
        const unsigned blocks = plan_batch(__func__, &b, slices, k0, n, &key);
        if (blocks == 0) continue;
        adamw_kernel<<<blocks, ADAMW_THREADS, 0, stream>>>(master, params, grads, m, v, b, hp, grad_scale, seed,
                                                           (uint64_t)step, vectorized);
        CUDA_LAUNCH_CHECK();
    }
}

void round_stochastic_slices(bf16 *params, const float *master, const GPT2Slice *slices, int n, uint64_t seed,
                             int step, cudaStream_t stream) {
    if (step < 0) {
        die("round_stochastic_slices: negative step %d", step);
    }
    uint64_t key = 0;
    for (int k0 = 0; k0 < n; k0 += ADAMW_BATCH) {
        AdamWBatch b;
        const unsigned blocks = plan_batch(__func__, &b, slices, k0, n, &key);
        if (blocks == 0) continue;
        round_stochastic_kernel<<<blocks, ADAMW_THREADS, 0, stream>>>(params, master, b, seed, (uint64_t)step);
        CUDA_LAUNCH_CHECK();
    }
}
