// cuda_utils.cuh: error checks, bf16 helpers, 16-byte vector loads/stores, warp and
// block reductions, and the device properties. Included by every CUDA file of the model.
#ifndef LLMC_CUDA_UTILS_CUH
#define LLMC_CUDA_UTILS_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef __nv_bfloat16 bf16;

// ----------------------------------------------------------------------------
// Checks: every failing call prints where it was, what it was and why, then exits.

static inline void cuda_check_at(cudaError_t err, const char *call, const char *file, int line) {
    if (err != cudaSuccess) {
        fprintf(stderr, "CUDA error at %s:%d: %s failed: %s (%s)\n", file, line, call,
                cudaGetErrorString(err), cudaGetErrorName(err));
        fflush(stderr);
        exit(EXIT_FAILURE);
    }
}
#define CUDA_CHECK(call) cuda_check_at((call), #call, __FILE__, __LINE__)
// After a kernel launch: catches bad launch configurations at the launch site.
#define CUDA_LAUNCH_CHECK() cuda_check_at(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

// ----------------------------------------------------------------------------
// Small integer helpers

static inline size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }
static inline size_t round_up(size_t a, size_t b) { return ceil_div(a, b) * b; }

// Properties of the current device, read once per translation unit.
static inline const cudaDeviceProp *cuda_device_props(void) {
    static cudaDeviceProp props;
    static int have = 0;
    if (!have) {
        int dev;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaGetDeviceProperties(&props, dev));
        have = 1;
    }
    return &props;
}

// ----------------------------------------------------------------------------
// 16-byte vectors: 8 bf16 or 4 floats moved with one load/store instruction.
// Pointers must be 16-byte aligned (the model keeps every row a multiple of 8 bf16).

template <typename T>
struct alignas(16) Vec16 {
    static constexpr int N = 16 / sizeof(T);
    T v[N];
};
typedef Vec16<bf16> bf16x8;
typedef Vec16<float> f32x4;

template <typename T>
__device__ __forceinline__ Vec16<T> load16(const T *p) {
    Vec16<T> r;
    *reinterpret_cast<int4 *>(&r) = *reinterpret_cast<const int4 *>(p);
    return r;
}
// Streaming load: data read once, so it should not displace reused lines in L1/L2.
template <typename T>
__device__ __forceinline__ Vec16<T> load16_cs(const T *p) {
    Vec16<T> r;
    *reinterpret_cast<int4 *>(&r) = __ldcs(reinterpret_cast<const int4 *>(p));
    return r;
}
template <typename T>
__device__ __forceinline__ void store16(T *p, const Vec16<T> &x) {
    *reinterpret_cast<int4 *>(p) = *reinterpret_cast<const int4 *>(&x);
}
template <typename T>
__device__ __forceinline__ void store16_cs(T *p, const Vec16<T> &x) {
    __stcs(reinterpret_cast<int4 *>(p), *reinterpret_cast<const int4 *>(&x));
}

__device__ __forceinline__ float bf2f(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ bf16 f2bf(float x) { return __float2bfloat16_rn(x); }

// ----------------------------------------------------------------------------
// Reductions. xor-butterflies leave the same bits in every lane (float add is
// commutative), and block reductions combine warps in a fixed order: results do not
// depend on scheduling.

__device__ __forceinline__ float warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}
__device__ __forceinline__ float warp_max(float x) {
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the
// result. `shared` holds at least 32 floats; the call ends with a barrier so it may be reused.
__device__ __forceinline__ float block_sum(float x, float *shared) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    x = warp_sum(x);
    if (lane == 0) shared[warp] = x;
    __syncthreads();
    float y = lane < nwarps ? shared[lane] : 0.0f;
    y = warp_sum(y);
    __syncthreads();
    return y;
}

// The second pass of a two-pass column sum: partials (blocks, width) fp32, summed over the
// blocks for column j = 32 blockIdx.x + threadIdx.x % 32, in a fixed order. The block is
// 32 x PARTIAL_ROWS threads: row y adds partials y, y + PARTIAL_ROWS, ..., then row 0 adds
// the rows in order. Returns the column's sum in row 0 (its j < width), 0 elsewhere. Every
// thread of a block of exactly 32 x PARTIAL_ROWS must call it, once per kernel (its shared
// rows have no barrier after their last read).
#define PARTIAL_ROWS 16
__device__ __forceinline__ float sum_partials(const float *partial, int blocks, int width) {
    __shared__ float rows[PARTIAL_ROWS][33];
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    const int j = blockIdx.x * 32 + tx;
    float t = 0.0f;
    if (j < width)
        for (int b = ty; b < blocks; b += PARTIAL_ROWS) t += partial[(size_t)b * width + j];
    rows[ty][tx] = t;
    __syncthreads();
    if (ty != 0) return 0.0f;
    for (int y = 1; y < PARTIAL_ROWS; y++) t += rows[y][tx];
    return t;
}

#endif // LLMC_CUDA_UTILS_CUH
