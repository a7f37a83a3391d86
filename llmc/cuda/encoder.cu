// encoder.cu: embedding lookup and its gradient. Each thread owns 8 channels.
#include "encoder.cuh"
#include "../utils.h"

#include <limits.h>
#include <string.h>

// Tile [v0, v1) of wte (wte at row v0); wpe NULL but in the last tile.
__global__ void encoder_forward_kernel(bf16 *out, const int *tokens, const bf16 *wte, const bf16 *wpe, int v0,
                                       int v1, int B, int T, int C) {
    const int groups = C / 8;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)B * T * groups) return;
    size_t bt = i / groups;
    int c = (int)(i % groups) * 8;
    int t = (int)(bt % T), token = tokens[bt];
    const int in = token >= v0 && token < v1;
    if (!in && !wpe) return;
    // another tile's row: what that tile wrote (bf16, exactly its wte row)
    bf16x8 a = in ? load16(wte + (size_t)(token - v0) * C + c) : load16(out + bt * C + c), y = a;
    if (wpe) {
        bf16x8 p = load16(wpe + (size_t)t * C + c);
        for (int k = 0; k < 8; k++) y.v[k] = f2bf(bf2f(a.v[k]) + bf2f(p.v[k]));
    }
    store16(out + bt * C + c, y);
}

void encoder_forward_tile(bf16 *out, const int *tokens, const bf16 *wte, const bf16 *wpe, int v0, int v1, int B,
                          int T, int C, cudaStream_t stream) {
    if (C % 8 != 0 || (((uintptr_t)out | (uintptr_t)wte | (uintptr_t)wpe) & 15)) {   // 16-byte rows
        die("encoder_forward: C=%d must be a multiple of 8, out, wte and wpe 16-byte aligned (%p, %p, %p)", C,
            (void *)out, (const void *)wte, (const void *)wpe);
    }
    size_t n = (size_t)B * T * (C / 8);
    if (n == 0) return;
    encoder_forward_kernel<<<(unsigned)ceil_div(n, 256), 256, 0, stream>>>(out, tokens, wte, wpe, v0, v1, B, T, C);
    CUDA_LAUNCH_CHECK();
}

void encoder_forward(bf16 *out, const int *tokens, const bf16 *wte, const bf16 *wpe, int B, int T, int C,
                     cudaStream_t stream) {
    encoder_forward_tile(out, tokens, wte, wpe, 0, INT_MAX, B, T, C, stream);
}

int encoder_buckets_build(int *unique_tokens, int *starts, int *positions, const int *tokens, int n, int V,
                          int *counts) {
    memset(counts, 0, (size_t)V * sizeof(int));
    for (int i = 0; i < n; i++) counts[tokens[i]]++;
    // counts[v] becomes the next free slot of token v; tokens listed in increasing id.
    int nu = 0, at = 0;
    for (int v = 0; v < V; v++) {
        if (counts[v] == 0) continue;
        unique_tokens[nu] = v;
        starts[nu++] = at;
        int c = counts[v];
        counts[v] = at;
        at += c;
    }
    starts[nu] = at;
    for (int i = 0; i < n; i++) positions[counts[tokens[i]]++] = i; // stable: increasing i
    return nu;
}

// Block per unique token (those outside the tile [v0, v1) return); threads stride over the
// channel groups.
__global__ void encoder_backward_wte_kernel(float *dwte, const bf16 *dout, const int *unique_tokens,
                                            const int *starts, const int *positions, int v0, int v1, int C) {
    const int u = blockIdx.x;
    const int token = unique_tokens[u], p0 = starts[u], p1 = starts[u + 1];
    if (token < v0 || token >= v1) return;
    for (int c = threadIdx.x * 8; c < C; c += blockDim.x * 8) {
        float acc[8] = {0};
        for (int p = p0; p < p1; p++) {
            bf16x8 d = load16(dout + (size_t)positions[p] * C + c);
            for (int k = 0; k < 8; k++) acc[k] += bf2f(d.v[k]);
        }
        float *dst = dwte + (size_t)(token - v0) * C + c;
        for (int h = 0; h < 8; h += 4) {
            f32x4 g = load16(dst + h);
            for (int k = 0; k < 4; k++) g.v[k] += acc[h + k];
            store16(dst + h, g);
        }
    }
}

// Thread per (t, channel group), summing over b in order.
__global__ void encoder_backward_wpe_kernel(float *dwpe, const bf16 *dout, int B, int T, int C) {
    const int groups = C / 8;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)T * groups) return;
    int t = (int)(i / groups), c = (int)(i % groups) * 8;
    float acc[8] = {0};
    for (int b = 0; b < B; b++) {
        bf16x8 d = load16(dout + ((size_t)b * T + t) * C + c);
        for (int k = 0; k < 8; k++) acc[k] += bf2f(d.v[k]);
    }
    float *dst = dwpe + (size_t)t * C + c;
    for (int h = 0; h < 8; h += 4) {
        f32x4 g = load16(dst + h);
        for (int k = 0; k < 4; k++) g.v[k] += acc[h + k];
        store16(dst + h, g);
    }
}

void encoder_backward(float *dwte, float *dwpe, const bf16 *dout, const EncoderBuckets *buckets, int B, int T,
                      int C, cudaStream_t stream) {
    encoder_backward_tile(dwte, dwpe, dout, buckets, 0, INT_MAX, B, T, C, stream);
}

void encoder_backward_tile(float *dwte, float *dwpe, const bf16 *dout, const EncoderBuckets *buckets, int v0, int v1,
                           int B, int T, int C, cudaStream_t stream) {
    if (C % 8 != 0 || (((uintptr_t)dwte | (uintptr_t)dwpe | (uintptr_t)dout) & 15)) {   // 16-byte rows
        die("encoder_backward: C=%d must be a multiple of 8, dwte, dwpe and dout 16-byte aligned (%p, %p, %p)", C,
            (void *)dwte, (void *)dwpe, (const void *)dout);
    }
    if (buckets->num_unique > 0) {
        int threads = (int)round_up(ceil_div(C, 8), 32);
        if (threads > 256) threads = 256;
        encoder_backward_wte_kernel<<<buckets->num_unique, threads, 0, stream>>>(
            dwte, dout, buckets->unique_tokens, buckets->starts, buckets->positions, v0, v1, C);
        CUDA_LAUNCH_CHECK();
    }
    if (!dwpe) return;
    size_t n = (size_t)T * (C / 8);
    encoder_backward_wpe_kernel<<<(unsigned)ceil_div(n, 256), 256, 0, stream>>>(dwpe, dout, B, T, C);
    CUDA_LAUNCH_CHECK();
}
