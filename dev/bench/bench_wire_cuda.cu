// bench_wire_cuda.cu: zero/cuda/wire_cuda.cu's ZeRO++ wire kernels in GB/s against a
// device-to-device cudaMemcpy of the same bytes on the same GPU: pack (qwZ's int8 weights
// from fp32 and bf16, qgZ's int4 gradients in eq. 1-2 order), unpack int8 -> bf16 (qwZ's
// receive side), the fused dequantize-sum-quantize reduce_pack of G = 2, 4, 8 runs of int4
// records (qgZ's middle hop) and reduce of N = 2, 4, 8 int4 records onto an fp32
// accumulator (qgZ's last hop).
//   make bench_wire_cuda && ./bench_wire_cuda [elements=67108864] [repeats=20] [block=2048]
// GB/s counts the bytes a kernel reads plus the bytes it writes; the copy moves half that
// many bytes (read + write = the same traffic), so "vs copy" is the kernel's share of what
// moving its bytes alone would take. Each figure is the best of the repeats (CUDA events).
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../zero/kernels/wire.h"
#include "../../zero/cuda/wire_cuda.h"

#define SLICES 4   // pack, unpack and reduce_pack: n values as 4 records of n / 4

static void ck(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return;
    fprintf(stderr, "bench_wire_cuda: %s: %s\n", what, cudaGetErrorString(e));
    exit(1);
}

enum Kind { PACK, UNPACK, REDUCE_PACK, REDUCE };

struct Op {
    const char *name;
    Kind kind;
    ZeroWire w;
    ZeroDType dt;   // the values' dtype (pack input, unpack output)
    int count;      // runs (reduce_pack) or records (reduce)
    int group;      // pack's eq. 1-2 group
};

struct Bufs {
    size_t n;
    int block;
    void *vals, *vals_out;   // n values (fp32-sized)
    void *rec, *rec_out;     // 8 runs' records of n values, and one
    float *acc;
};

static size_t slice_of(const Op &op, size_t n) { return op.kind == REDUCE ? n : n / SLICES; }
static size_t records_bytes(const Op &op, const Bufs &b) {
    const size_t sn = slice_of(op, b.n);
    return (b.n / sn) * zero_wire_record_bytes(op.w, op.dt, sn, b.block);
}

static int run(const Op &op, Bufs &b, cudaStream_t s) {
    const size_t sn = slice_of(op, b.n);
    switch (op.kind) {
    case PACK: return zero_wire_pack_cuda(op.w, b.block, b.vals, op.dt, sn, SLICES, op.group, b.rec_out, s);
    case UNPACK: return zero_wire_unpack_cuda(op.w, b.block, b.rec, sn, SLICES, b.vals_out, op.dt, s);
    case REDUCE_PACK:
        return zero_wire_reduce_pack_cuda(op.w, b.block, b.rec, op.dt, sn, op.count, SLICES, b.rec_out, s);
    case REDUCE: return zero_wire_reduce_cuda(op.w, b.block, b.rec, op.dt, sn, op.count, b.n, b.acc, 1, s);
    }
    return -1;
}

// Bytes read + written by one run.
static double op_bytes(const Op &op, const Bufs &b) {
    const double rec = (double)records_bytes(op, b), vals = (double)b.n * (op.dt == ZERO_BF16 ? 2 : 4);
    switch (op.kind) {
    case PACK: return vals + rec;
    case UNPACK: return rec + vals;
    case REDUCE_PACK: return (op.count + 1) * rec;
    case REDUCE: return op.count * rec + 8.0 * (double)b.n;
    }
    return 0;
}

// Real records for op in every run's slot: the test values packed.
static void fill_records(const Op &op, Bufs &b, cudaStream_t s) {
    const size_t sn = slice_of(op, b.n), per = b.n / sn, R = zero_wire_record_bytes(op.w, op.dt, sn, b.block);
    for (int r = 0; r < 8; r++)
        if (zero_wire_pack_cuda(op.w, b.block, b.vals, op.dt, sn, (int)per, 1, (char *)b.rec + (size_t)r * per * R, s))
            exit(1);
}

template <typename F> static float best_ms(F f, int repeats, cudaStream_t s) {
    cudaEvent_t a, z;
    ck(cudaEventCreate(&a), "cudaEventCreate");
    ck(cudaEventCreate(&z), "cudaEventCreate");
    float best = 1e30f;
    for (int r = 0; r < repeats; r++) {
        ck(cudaEventRecord(a, s), "cudaEventRecord");
        f();
        ck(cudaEventRecord(z, s), "cudaEventRecord");
        ck(cudaEventSynchronize(z), "cudaEventSynchronize");
        float ms;
        ck(cudaEventElapsedTime(&ms, a, z), "cudaEventElapsedTime");
        if (ms < best) best = ms;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(z);
    return best;
}

// Each fp32 value's two halves are small finite bf16 values, so the buffer reads as n
// finite fp32 values or 2n finite bf16 ones.
__global__ void fill_kernel(unsigned *x, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const unsigned h = (unsigned)(i * 2654435761u);
        const unsigned hi = 0x3c00u | (h & 0x807fu), lo = 0x3b80u | ((h >> 16) & 0x807fu);   // |x| in [2^-8, 2^-6)
        x[i] = hi << 16 | lo;
    }
}

int main(int argc, char **argv) {
    const size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)64 << 20;
    const int repeats = argc > 2 ? atoi(argv[2]) : 20;
    const int block = argc > 3 ? atoi(argv[3]) : 2048;
    if (n < SLICES || repeats < 1 || block < 2 || block % 2) {
        fprintf(stderr, "usage: bench_wire_cuda [elements >= 4] [repeats >= 1] [block: even, >= 2]\n");
        return 1;
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("bench_wire_cuda: no CUDA device\n");
        return 0;
    }
    cudaStream_t s;
    ck(cudaStreamCreate(&s), "cudaStreamCreate");
    Bufs b = {n, block, NULL, NULL, NULL, NULL, NULL};
    const size_t rec_max = zero_wire_record_bytes(ZERO_WIRE_RAW, ZERO_F32, n, block) + SLICES * 32;
    ck(cudaMalloc(&b.vals, n * 4), "cudaMalloc");
    ck(cudaMalloc(&b.vals_out, n * 4), "cudaMalloc");
    ck(cudaMalloc(&b.rec, 8 * rec_max), "cudaMalloc");
    ck(cudaMalloc(&b.rec_out, rec_max), "cudaMalloc");
    ck(cudaMalloc(&b.acc, n * 4), "cudaMalloc");
    ck(cudaMemsetAsync(b.acc, 0, n * 4, s), "cudaMemset");
    fill_kernel<<<1024, 256, 0, s>>>((unsigned *)b.vals, n);
    char *csrc, *cdst;
    const size_t copy_max = 8 * rec_max + 8 * n;
    ck(cudaMalloc(&csrc, copy_max), "cudaMalloc");
    ck(cudaMalloc(&cdst, copy_max), "cudaMalloc");

    const Op ops[] = {
        {"pack fp32 -> raw (copy)", PACK, ZERO_WIRE_RAW, ZERO_F32, 1, 1},
        {"pack fp32 -> int8", PACK, ZERO_WIRE_INT8, ZERO_F32, 1, 1},
        {"pack bf16 -> int8", PACK, ZERO_WIRE_INT8, ZERO_BF16, 1, 1},
        {"pack fp32 -> int4, group 2", PACK, ZERO_WIRE_INT4, ZERO_F32, 1, 2},
        {"unpack int8 -> bf16", UNPACK, ZERO_WIRE_INT8, ZERO_BF16, 1, 1},
        {"unpack int8 -> fp32", UNPACK, ZERO_WIRE_INT8, ZERO_F32, 1, 1},
        {"reduce_pack int4, G=2", REDUCE_PACK, ZERO_WIRE_INT4, ZERO_F32, 2, 1},
        {"reduce_pack int4, G=4", REDUCE_PACK, ZERO_WIRE_INT4, ZERO_F32, 4, 1},
        {"reduce_pack int4, G=8", REDUCE_PACK, ZERO_WIRE_INT4, ZERO_F32, 8, 1},
        {"reduce_pack raw bf16, G=4", REDUCE_PACK, ZERO_WIRE_RAW, ZERO_BF16, 4, 1},
        {"reduce int4, N=2", REDUCE, ZERO_WIRE_INT4, ZERO_F32, 2, 1},
        {"reduce int4, N=4", REDUCE, ZERO_WIRE_INT4, ZERO_F32, 4, 1},
        {"reduce int4, N=8", REDUCE, ZERO_WIRE_INT4, ZERO_F32, 8, 1},
        {"reduce int8, N=4", REDUCE, ZERO_WIRE_INT8, ZERO_F32, 4, 1},
    };
    cudaDeviceProp prop;
    ck(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    printf("bench_wire_cuda: %s, %zu elements, block %d, best of %d; GB/s = (bytes read + written) / s\n", prop.name, n,
           block, repeats);
    printf("%-28s %10s %12s %9s %10s\n", "kernel", "GB/s", "copy GB/s", "vs copy", "Gelem/s");
    for (const Op &op : ops) {
        if (op.kind != PACK) fill_records(op, b, s);
        if (run(op, b, s)) return 1;   // warm, and the launch checked
        const double bytes = op_bytes(op, b);
        const float ms = best_ms([&] { run(op, b, s); }, repeats, s);
        const size_t half = (size_t)(bytes / 2);
        const float cms = best_ms([&] { ck(cudaMemcpyAsync(cdst, csrc, half, cudaMemcpyDeviceToDevice, s), "copy"); },
                                  repeats, s);
        const double gbs = bytes / (ms * 1e-3) / 1e9, cgbs = bytes / (cms * 1e-3) / 1e9;
        printf("%-28s %10.1f %12.1f %8.0f%% %10.2f\n", op.name, gbs, cgbs, 100.0 * gbs / cgbs, (double)n / (ms * 1e-3) / 1e9);
    }
    ck(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    cudaFree(b.vals); cudaFree(b.vals_out); cudaFree(b.rec); cudaFree(b.rec_out); cudaFree(b.acc);
    cudaFree(csrc); cudaFree(cdst);
    return 0;
}
