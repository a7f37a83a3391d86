// quant_cuda.cu: the GPU kernels of quant_cuda.h. Every value goes through
// quant_element.h's functions, as in quant.c, and a block's max |x| is an integer max of
// float bits (order-free), so the grid shape cannot change a bit.
#include "quant_cuda.h"
#include "../kernels/quant_element.h"

#include <cuda_runtime.h>
#include <stdio.h>

#define THREADS 256
#define WARPS (THREADS / 32)
#define MAX_GRID 65535u   // grid-stride loops cover the rest

static unsigned grid_for(size_t work) {
    size_t g = (work + THREADS - 1) / THREADS;
    return g == 0 ? 1u : g > MAX_GRID ? MAX_GRID : (unsigned)g;
}

static int launched(const char *what) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return QUANT_OK;
    fprintf(stderr, "zero: %s: kernel launch failed: %s (%s)\n", what, cudaGetErrorString(e), cudaGetErrorName(e));
    return -1;
}

template <QuantDtype IN>
__device__ __forceinline__ float load(const void *x, size_t i) {
    if (IN == QUANT_BF16) return quant_bf16_to_f32(static_cast<const uint16_t *>(x)[i]);
    return static_cast<const float *>(x)[i];
}

template <QuantFormat F>
__device__ __forceinline__ int load_q(const void *q, size_t i) {
    if (F == QUANT_INT8) return static_cast<const int8_t *>(q)[i];
    return quant_unpack_int4(static_cast<const uint8_t *>(q)[i / 2], (int)(i & 1));
}

// One thread block per quantization block (grid-stride over blocks): the block's max |x|
// bits by warp shuffles and shared memory, its scale from thread 0, then the values.
template <QuantFormat F, QuantDtype IN>
__global__ void __launch_bounds__(THREADS)
quantize_kernel(const void *x, size_t n, size_t B, size_t nb, void *q, float *scales, unsigned long long *first_bad) {
    __shared__ uint32_t warp_max[WARPS];
    __shared__ float scale;
    const int Q = F == QUANT_INT4 ? QUANT_INT4_MAX : QUANT_INT8_MAX;
    for (size_t b = blockIdx.x; b < nb; b += gridDim.x) {
        const size_t lo = b * B, hi = lo + B < n ? lo + B : n;
        uint32_t m = 0;
        for (size_t i = lo + threadIdx.x; i < hi; i += THREADS) m = max(m, QUANT_ABS_BITS(quant_bits_of(load<IN>(x, i))));
        for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
        if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x / 32] = m;
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int w = 0; w < WARPS; w++) m = max(m, warp_max[w]);
            scale = m >= QUANT_NONFINITE_BITS ? quant_float_of(0x7fc00000u) : quant_scale(m, Q);
            scales[b] = scale;
        }
        __syncthreads();
        const float s = scale;   // NaN (refused) and 0 (all zero) give q = 0
        if (s != s && first_bad) {
            for (size_t i = lo + threadIdx.x; i < hi; i += THREADS)
                if (QUANT_ABS_BITS(quant_bits_of(load<IN>(x, i))) >= QUANT_NONFINITE_BITS) atomicMin(first_bad, (unsigned long long)i);
        }
        if (F == QUANT_INT8) {
            int8_t *q8 = static_cast<int8_t *>(q);
            for (size_t i = lo + threadIdx.x; i < hi; i += THREADS) q8[i] = (int8_t)quant_element(load<IN>(x, i), s, Q);
        } else {
            uint8_t *q4 = static_cast<uint8_t *>(q);
            for (size_t i = lo + 2 * threadIdx.x; i < hi; i += 2 * THREADS) {
                const int a = quant_element(load<IN>(x, i), s, Q);
                const int c = i + 1 < hi ? quant_element(load<IN>(x, i + 1), s, Q) : 0;
                q4[i / 2] = quant_pack_int4(a, c);
            }
        }
        __syncthreads();   // warp_max and scale are reused by the next block
    }
}

template <QuantFormat F, QuantDtype OUT>
__global__ void dequantize_kernel(const void *q, const float *scales, size_t n, size_t B, void *out) {
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < n; i += (size_t)gridDim.x * THREADS) {
        const float d = dequant_element(load_q<F>(q, i), scales[i / B]);
        if (OUT == QUANT_BF16) static_cast<uint16_t *>(out)[i] = quant_f32_to_bf16(d);
        else static_cast<float *>(out)[i] = d;
    }
}

// out[i] = d_0[i] + d_1[i] + ... in rank order, one element per thread.
template <QuantFormat F>
__global__ void dequant_reduce_kernel(const char *q, size_t q_stride, const float *scales, size_t scale_stride,
                                      int nranks, size_t n, size_t B, float *out) {
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < n; i += (size_t)gridDim.x * THREADS) {
        const size_t b = i / B;
        float acc = dequant_element(load_q<F>(q, i), scales[b]);
        for (int r = 1; r < nranks; r++)
            acc = adamw_add(acc, dequant_element(load_q<F>(q + (size_t)r * q_stride, i), scales[(size_t)r * scale_stride + b]));
        out[i] = acc;
    }
}

template <QuantFormat F, QuantDtype IN>
static void launch_quantize(const void *x, size_t n, size_t B, void *q, float *scales, unsigned long long *first_bad,
                            cudaStream_t stream) {
    const size_t nb = (n + B - 1) / B;
    const unsigned grid = nb == 0 ? 1u : nb > MAX_GRID ? MAX_GRID : (unsigned)nb;
    quantize_kernel<F, IN><<<grid, THREADS, 0, stream>>>(x, n, B, nb, q, scales, first_bad);
}

extern "C" int quant_cuda_quantize(QuantFormat f, QuantDtype in, const void *x, size_t n, int block,
                                   void *q, float *scales, unsigned long long *first_bad, cudaStream_t stream) {
    if (quant_check_block(block, "quant_cuda_quantize")) return QUANT_BAD_BLOCK;
    if (first_bad) {
        cudaError_t e = cudaMemsetAsync(first_bad, 0xff, sizeof *first_bad, stream);
        if (e != cudaSuccess) {
            fprintf(stderr, "zero: quant_cuda_quantize: cudaMemsetAsync of first_bad failed: %s\n", cudaGetErrorString(e));
            return -1;
        }
    }
    if (n == 0) return QUANT_OK;
    const size_t B = (size_t)block;
    if (f == QUANT_INT8 && in == QUANT_F32) launch_quantize<QUANT_INT8, QUANT_F32>(x, n, B, q, scales, first_bad, stream);
    if (f == QUANT_INT8 && in == QUANT_BF16) launch_quantize<QUANT_INT8, QUANT_BF16>(x, n, B, q, scales, first_bad, stream);
    if (f == QUANT_INT4 && in == QUANT_F32) launch_quantize<QUANT_INT4, QUANT_F32>(x, n, B, q, scales, first_bad, stream);
    if (f == QUANT_INT4 && in == QUANT_BF16) launch_quantize<QUANT_INT4, QUANT_BF16>(x, n, B, q, scales, first_bad, stream);
    return launched("quant_cuda_quantize");
}

extern "C" int quant_cuda_dequantize(QuantFormat f, const void *q, const float *scales, size_t n, int block,
                                     QuantDtype out_type, void *out, cudaStream_t stream) {
    if (quant_check_block(block, "quant_cuda_dequantize")) return QUANT_BAD_BLOCK;
    if (n == 0) return QUANT_OK;
    const size_t B = (size_t)block;
    const unsigned g = grid_for(n);
    if (f == QUANT_INT8 && out_type == QUANT_F32) dequantize_kernel<QUANT_INT8, QUANT_F32><<<g, THREADS, 0, stream>>>(q, scales, n, B, out);
    if (f == QUANT_INT8 && out_type == QUANT_BF16) dequantize_kernel<QUANT_INT8, QUANT_BF16><<<g, THREADS, 0, stream>>>(q, scales, n, B, out);
    if (f == QUANT_INT4 && out_type == QUANT_F32) dequantize_kernel<QUANT_INT4, QUANT_F32><<<g, THREADS, 0, stream>>>(q, scales, n, B, out);
    if (f == QUANT_INT4 && out_type == QUANT_BF16) dequantize_kernel<QUANT_INT4, QUANT_BF16><<<g, THREADS, 0, stream>>>(q, scales, n, B, out);
    return launched("quant_cuda_dequantize");
}

extern "C" int quant_cuda_dequant_reduce(QuantFormat f, const void *q, size_t q_stride, const float *scales,
                                         size_t scale_stride, int nranks, size_t n, int block, float *out,
                                         cudaStream_t stream) {
    if (quant_check_block(block, "quant_cuda_dequant_reduce")) return QUANT_BAD_BLOCK;
    if (nranks < 1) {
        fprintf(stderr, "zero: quant_cuda_dequant_reduce: %d ranks (need at least 1)\n", nranks);
        return QUANT_BAD_BLOCK;
    }
    if (n == 0) return QUANT_OK;
    const char *qc = static_cast<const char *>(q);
    const unsigned g = grid_for(n);
    if (f == QUANT_INT8)
        dequant_reduce_kernel<QUANT_INT8><<<g, THREADS, 0, stream>>>(qc, q_stride, scales, scale_stride, nranks, n, (size_t)block, out);
    else
        dequant_reduce_kernel<QUANT_INT4><<<g, THREADS, 0, stream>>>(qc, q_stride, scales, scale_stride, nranks, n, (size_t)block, out);
    return launched("quant_cuda_dequant_reduce");
}
