// elementwise.cu: pointwise kernels. Each thread owns 8 consecutive elements, moved as
// 16-byte vectors; the last partial group goes element by element.
#include "elementwise.cuh"
#include "../utils.h"

static const int EW_THREADS = 256;

static void check_aligned(const void *p, const char *what) {
    if (((uintptr_t)p & 15) != 0) {
        die("elementwise: %s pointer %p is not 16-byte aligned", what, p);
    }
}

static unsigned int ew_blocks(size_t n) { return (unsigned int)ceil_div(ceil_div(n, 8), EW_THREADS); }

__global__ void gelu_forward_kernel(bf16 *out, const bf16 *inp, size_t n) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i + 8 <= n) {
        bf16x8 x = load16_cs(inp + i), y;
        for (int k = 0; k < 8; k++) y.v[k] = f2bf(gelu_tanh(bf2f(x.v[k])));
        store16(out + i, y);
    } else {
        for (; i < n; i++) out[i] = f2bf(gelu_tanh(bf2f(inp[i])));
    }
}

__global__ void gelu_backward_inplace_kernel(bf16 *d, const bf16 *pre, size_t n) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i + 8 <= n) {
        bf16x8 g = load16(d + i), x = load16_cs(pre + i);
        for (int k = 0; k < 8; k++) g.v[k] = f2bf(bf2f(g.v[k]) * gelu_tanh_grad(bf2f(x.v[k])));
        store16(d + i, g);
    } else {
        for (; i < n; i++) d[i] = f2bf(bf2f(d[i]) * gelu_tanh_grad(bf2f(pre[i])));
    }
}

__global__ void cast_f32_to_bf16_kernel(bf16 *out, const float *inp, size_t n) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i + 8 <= n) {
        f32x4 a = load16_cs(inp + i), b = load16_cs(inp + i + 4);
        bf16x8 y;
        for (int k = 0; k < 4; k++) { y.v[k] = f2bf(a.v[k]); y.v[k + 4] = f2bf(b.v[k]); }
        store16(out + i, y);
    } else {
        for (; i < n; i++) out[i] = f2bf(inp[i]);
    }
}

__global__ void cast_bf16_to_f32_kernel(float *out, const bf16 *inp, size_t n) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i + 8 <= n) {
        bf16x8 x = load16_cs(inp + i);
        f32x4 a, b;
        for (int k = 0; k < 4; k++) { a.v[k] = bf2f(x.v[k]); b.v[k] = bf2f(x.v[k + 4]); }
        store16(out + i, a);
        store16(out + i + 4, b);
    } else {
        for (; i < n; i++) out[i] = bf2f(inp[i]);
    }
}

__global__ void accumulate_f32_kernel(float *acc, const float *x, size_t n) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i + 8 <= n) {
        for (int h = 0; h < 8; h += 4) {
            f32x4 a = load16(acc + i + h), b = load16(x + i + h);
            for (int k = 0; k < 4; k++) a.v[k] += b.v[k];
            store16(acc + i + h, a);
        }
    } else {
        for (; i < n; i++) acc[i] += x[i];
    }
}

void gelu_forward(bf16 *out, const bf16 *inp, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    check_aligned(out, "gelu out");
    check_aligned(inp, "gelu in");
    gelu_forward_kernel<<<ew_blocks(n), EW_THREADS, 0, stream>>>(out, inp, n);
    CUDA_LAUNCH_CHECK();
}

void gelu_backward_inplace(bf16 *d, const bf16 *pre, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    check_aligned(d, "gelu grad");
    check_aligned(pre, "gelu input");
    gelu_backward_inplace_kernel<<<ew_blocks(n), EW_THREADS, 0, stream>>>(d, pre, n);
    CUDA_LAUNCH_CHECK();
}

void cast_f32_to_bf16(bf16 *out, const float *inp, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    check_aligned(out, "cast out");
    check_aligned(inp, "cast in");
    cast_f32_to_bf16_kernel<<<ew_blocks(n), EW_THREADS, 0, stream>>>(out, inp, n);
    CUDA_LAUNCH_CHECK();
}

void cast_bf16_to_f32(float *out, const bf16 *inp, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    check_aligned(out, "cast out");
    check_aligned(inp, "cast in");
    cast_bf16_to_f32_kernel<<<ew_blocks(n), EW_THREADS, 0, stream>>>(out, inp, n);
    CUDA_LAUNCH_CHECK();
}

void accumulate_f32(float *acc, const float *x, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    check_aligned(acc, "accumulate acc");
    check_aligned(x, "accumulate x");
    accumulate_f32_kernel<<<ew_blocks(n), EW_THREADS, 0, stream>>>(acc, x, n);
    CUDA_LAUNCH_CHECK();
}
