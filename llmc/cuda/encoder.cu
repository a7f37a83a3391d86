// encoder.cu: embedding lookup and its gradient. Each thread owns 8 channels.
#include "encoder.cuh"

#include <string.h>

__global__ void encoder_forward_kernel(bf16 *out, const int *tokens, const bf16 *wte, const bf16 *wpe, int B,
                                       int T, int C) {
    const int groups = C / 8;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)B * T * groups) return;
    size_t bt = i / groups;
    int c = (int)(i % groups) * 8;
    int t = (int)(bt % T);
    bf16x8 a = load16(wte + (size_t)tokens[bt] * C + c), p = load16(wpe + (size_t)t * C + c), y;
    for (int k = 0; k < 8; k++) y.v[k] = f2bf(bf2f(a.v[k]) + bf2f(p.v[k]));
    store16(out + bt * C + c, y);
}

void encoder_forward(bf16 *out, const int *tokens, const bf16 *wte, const bf16 *wpe, int B, int T, int C,
                     cudaStream_t stream) {
    if (C % 8 != 0) {
        fprintf(stderr, "encoder_forward: C=%d must be a multiple of 8\n", C);
        exit(EXIT_FAILURE);
    }
    size_t n = (size_t)B * T * (C / 8);
    if (n == 0) return;
    encoder_forward_kernel<<<(unsigned)ceil_div(n, 256), 256, 0, stream>>>(out, tokens, wte, wpe, B, T, C);
    CUDA_LAUNCH_CHECK();
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

// Block per unique token; threads stride over the channel groups.
__global__ void encoder_backward_wte_kernel(float *dwte, const bf16 *dout, const int *unique_tokens,
                                            const int *starts, const int *positions, int C) {
    const int u = blockIdx.x;
    const int token = unique_tokens[u], p0 = starts[u], p1 = starts[u + 1];
    for (int c = threadIdx.x * 8; c < C; c += blockDim.x * 8) {
        float acc[8] = {0};
        for (int p = p0; p < p1; p++) {
            bf16x8 d = load16(dout + (size_t)positions[p] * C + c);
            for (int k = 0; k < 8; k++) acc[k] += bf2f(d.v[k]);
        }
        float *dst = dwte + (size_t)token * C + c;
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
    if (C % 8 != 0) {
        fprintf(stderr, "encoder_backward: C=%d must be a multiple of 8\n", C);
        exit(EXIT_FAILURE);
    }
    if (buckets->num_unique > 0) {
        int threads = (int)round_up(ceil_div(C, 8), 32);
        if (threads > 256) threads = 256;
        encoder_backward_wte_kernel<<<buckets->num_unique, threads, 0, stream>>>(
            dwte, dout, buckets->unique_tokens, buckets->starts, buckets->positions, C);
        CUDA_LAUNCH_CHECK();
    }
    size_t n = (size_t)T * (C / 8);
    encoder_backward_wpe_kernel<<<(unsigned)ceil_div(n, 256), 256, 0, stream>>>(dwpe, dout, B, T, C);
    CUDA_LAUNCH_CHECK();
}
