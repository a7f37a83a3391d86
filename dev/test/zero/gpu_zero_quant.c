/*
gpu_zero_quant.c: zero/cuda/quant_cuda.cu's kernels against the C reference (zero/kernels/quant.c), bit
for bit: quantize (int8 and int4, fp32 and bf16 input), dequantize (fp32 and bf16 output)
and the rank-order dequantize-reduce (1 to 8 ranks), on quant_cases.h's random and edge
inputs (all-zero blocks, one huge value, subnormals, FLT_MAX, ties), lengths with a partial
last block, odd device offsets, and non-finite input (the refused blocks and the reported
first index must agree), and the wire kernels' refusals (zero/cuda/wire_cuda.cu; their bits
are test_backend_ops.c's, through the backend). NaN payloads are not compared (the GPU
makes canonical NaNs): a NaN must meet a NaN. Without a GPU: "SKIP: no CUDA device", exit 0. Ends with the
line "N passed, N failed".
*/
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../zero/kernels/quant.h"
#include "../../../zero/cuda/quant_cuda.h"
#include "../../../zero/kernels/wire.h"
#include "../../../zero/cuda/wire_cuda.h"
#include "quant_cases.h"

static int npassed, nfailed;
static cudaStream_t stream;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...) {
    if (ok) { npassed++; return; }
    nfailed++;
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

static void cuda_or_die(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return;
    printf("FAIL: %s: %s\n", what, cudaGetErrorString(e));
    exit(1);
}

static void *dev_alloc(size_t bytes) {
    void *p;
    cuda_or_die(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
    return p;
}
// On the test's stream and waited for: a plain cudaMemcpy from pageable memory may return
// before its DMA lands, and the non-blocking stream's kernels would not wait for it (on an
// H200 they read zeros where the input had not arrived yet)
static void to_dev(void *d, const void *h, size_t bytes) {
    cuda_or_die(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync to device");
    cuda_or_die(cudaStreamSynchronize(stream), "cudaStreamSynchronize after the copy to device");
}
static void to_host(void *h, const void *d, size_t bytes) {
    cuda_or_die(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    cuda_or_die(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
}

// The first index where two 32-bit (or 16-bit bf16) float arrays differ, NaN meeting NaN
// counting as equal; -1 when none.
static long first_f32_diff(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u, v;
        memcpy(&u, a + i, 4);
        memcpy(&v, b + i, 4);
        if (u != v && !(isnan(a[i]) && isnan(b[i]))) return (long)i;
    }
    return -1;
}
static long first_bf16_diff(const uint16_t *a, const uint16_t *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int nan_a = (a[i] & 0x7fff) > 0x7f80, nan_b = (b[i] & 0x7fff) > 0x7f80;
        if (a[i] != b[i] && !(nan_a && nan_b)) return (long)i;
    }
    return -1;
}
static long first_byte_diff(const uint8_t *a, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++) if (a[i] != b[i]) return (long)i;
    return -1;
}

// One input through quantize and both dequantizes on the CPU and the GPU. nonfinite:
// plant a NaN and an infinity. The device copy of x starts `offset` elements into its
// allocation (odd offsets: no kernel may assume alignment).
static void check_one(QuantFormat f, QuantDtype in, int c, size_t n, int block, int nonfinite, size_t offset) {
    const size_t esz = in == QUANT_BF16 ? 2 : 4, nb = quant_nblocks(n, block), qb = quant_bytes(f, n);
    char label[160];
    snprintf(label, sizeof label, "%s from %s, case '%s'%s, n=%zu, block=%d, offset %zu", quant_format_name(f),
             in == QUANT_BF16 ? "bf16" : "fp32", quant_case_names[c], nonfinite ? " with NaN/inf" : "", n, block, offset);
    void *x = malloc(n * esz);
    if (in == QUANT_BF16) quant_case_fill_bf16(c, 42 + n, x, n, block);
    else quant_case_fill(c, 42 + n, x, n, block);
    if (nonfinite && n > 2) {
        if (in == QUANT_BF16) { ((uint16_t *)x)[n / 2] = 0x7fc0; ((uint16_t *)x)[n - 1] = 0xff80; }
        else { ((float *)x)[n / 2] = NAN; ((float *)x)[n - 1] = -INFINITY; }
    }
    uint8_t *qc = malloc(qb + 1), *qg = malloc(qb + 1);
    float *sc = malloc(nb * 4 + 4), *sg = malloc(nb * 4 + 4), *dc = malloc(n * 4), *dg = malloc(n * 4);
    uint16_t *hc = malloc(n * 2), *hg = malloc(n * 2);
    QuantBad bad;
    int rc = quant_quantize(f, in, x, n, block, qc, sc, &bad);

    char *dx = dev_alloc((n + offset) * esz);
    uint8_t *dq = dev_alloc(qb + offset);
    float *ds = dev_alloc(nb * 4), *dd = dev_alloc(n * 4);
    uint16_t *dh = dev_alloc(n * 2);
    unsigned long long *dbad = dev_alloc(sizeof *dbad), first_bad;
    to_dev(dx + offset * esz, x, n * esz);
    check(quant_cuda_quantize(f, in, dx + offset * esz, n, block, dq + offset, ds, dbad, stream) == QUANT_OK, "%s: launch", label);
    to_host(qg, dq + offset, qb);
    to_host(sg, ds, nb * 4);
    to_host(&first_bad, dbad, sizeof first_bad);
    long d = first_byte_diff(qc, qg, qb);
    check(d < 0, "%s: payload byte %ld: CPU %02x, GPU %02x", label, d, d < 0 ? 0 : qc[d], d < 0 ? 0 : qg[d]);
    d = first_f32_diff(sc, sg, nb);
    check(d < 0, "%s: scale %ld: CPU %a, GPU %a", label, d, d < 0 ? 0.0 : (double)sc[d], d < 0 ? 0.0 : (double)sg[d]);
    unsigned long long want_bad = rc == QUANT_NONFINITE ? (unsigned long long)bad.index : ~0ull;
    check(first_bad == want_bad && (rc == QUANT_NONFINITE) == !!nonfinite,
          "%s: first non-finite index: CPU %llu (status %d), GPU %llu", label, want_bad, rc, first_bad);

    // dequantize the CPU's payload on both sides (a payload difference is reported above)
    to_dev(dq, qc, qb);
    to_dev(ds, sc, nb * 4);
    quant_dequantize(f, qc, sc, n, block, QUANT_F32, dc);
    quant_dequantize(f, qc, sc, n, block, QUANT_BF16, hc);
    check(quant_cuda_dequantize(f, dq, ds, n, block, QUANT_F32, dd, stream) == QUANT_OK &&
          quant_cuda_dequantize(f, dq, ds, n, block, QUANT_BF16, dh, stream) == QUANT_OK, "%s: dequantize launch", label);
    to_host(dg, dd, n * 4);
    to_host(hg, dh, n * 2);
    d = first_f32_diff(dc, dg, n);
    check(d < 0, "%s: dequantize to fp32 [%ld]: CPU %a, GPU %a", label, d, d < 0 ? 0.0 : (double)dc[d], d < 0 ? 0.0 : (double)dg[d]);
    d = first_bf16_diff(hc, hg, n);
    check(d < 0, "%s: dequantize to bf16 [%ld]: CPU %04x, GPU %04x", label, d, d < 0 ? 0 : hc[d], d < 0 ? 0 : hg[d]);

    cudaFree(dx); cudaFree(dq); cudaFree(ds); cudaFree(dd); cudaFree(dh); cudaFree(dbad);
    free(x); free(qc); free(qg); free(sc); free(sg); free(dc); free(dg); free(hc); free(hg);
}

// N ranks' payloads (each from another case, padded strides) summed on both sides.
static void check_reduce(QuantFormat f, int nranks, size_t n, int block) {
    const size_t nb = quant_nblocks(n, block), qstride = quant_bytes(f, n) + 5, sstride = nb + 3;
    uint8_t *q = calloc((size_t)nranks, qstride);
    float *s = calloc((size_t)nranks * sstride, 4), *x = malloc(n * 4), *oc = malloc(n * 4), *og = malloc(n * 4);
    for (int r = 0; r < nranks; r++) {
        quant_case_fill(r % QCASE_COUNT, 1000 + (uint64_t)r, x, n, block);
        quant_quantize(f, QUANT_F32, x, n, block, q + (size_t)r * qstride, s + (size_t)r * sstride, NULL);
    }
    quant_dequant_reduce(f, q, qstride, s, sstride, nranks, n, block, oc);
    uint8_t *dq = dev_alloc((size_t)nranks * qstride);
    float *ds = dev_alloc((size_t)nranks * sstride * 4), *dout = dev_alloc(n * 4);
    to_dev(dq, q, (size_t)nranks * qstride);
    to_dev(ds, s, (size_t)nranks * sstride * 4);
    int ok = quant_cuda_dequant_reduce(f, dq, qstride, ds, sstride, nranks, n, block, dout, stream) == QUANT_OK;
    to_host(og, dout, n * 4);
    long d = first_f32_diff(oc, og, n);
    check(ok && d < 0, "%s dequant-reduce, %d ranks, n=%zu, block=%d: [%ld] CPU %a, GPU %a", quant_format_name(f), nranks, n,
          block, d, d < 0 ? 0.0 : (double)oc[d], d < 0 ? 0.0 : (double)og[d]);
    cudaFree(dq); cudaFree(ds); cudaFree(dout);
    free(q); free(s); free(x); free(oc); free(og);
}

// ---------------------------------------------------------------- wire kernels

// The wire kernels' bits against the C reference: test_backend_ops.c, through the backend.
static void check_wire_refusals(void) {
    // refusals come back as QUANT_BAD_BLOCK before anything is queued
    check(zero_wire_pack_cuda(ZERO_WIRE_INT4, 3, NULL, ZERO_F32, 8, 1, 1, NULL, stream) == QUANT_BAD_BLOCK &&
          zero_wire_pack_cuda(ZERO_WIRE_RAW, 2, NULL, ZERO_F32, 8, 6, 4, NULL, stream) == QUANT_BAD_BLOCK &&
          zero_wire_unpack_cuda(ZERO_WIRE_INT8, 2, (void *)2, 8, 1, NULL, ZERO_F32, stream) == QUANT_BAD_BLOCK &&
          zero_wire_reduce_cuda(ZERO_WIRE_INT8, 4, NULL, ZERO_F32, 4, 1, 5, NULL, 0, stream) == QUANT_BAD_BLOCK,
          "wire: bad block, group, alignment and length refused");
}

int main(void) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("SKIP: no CUDA device\n");
        return 0;
    }
    cuda_or_die(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    // The non-finite cases first: each quantize kernel's first launch is then one whose two
    // non-finite values sit in two thread blocks (the emulator's race check watches the first
    // launch of each kernel and block shape: first_bad's update between blocks).
    for (int f = 0; f < 2; f++)
        for (int in = 0; in < 2; in++) check_one((QuantFormat)f, (QuantDtype)in, QCASE_NORMAL, 5000, 64, 1, 1);
    const int blocks[] = {2, 64, 2048};
    for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++) {
        const size_t B = (size_t)blocks[bi];
        const size_t lens[] = {1, B + 1, 7 * B - 1, 300 * B + 3};
        for (int f = 0; f < 2; f++)
            for (int in = 0; in < 2; in++)
                for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
                    for (int c = 0; c < QCASE_COUNT; c++)
                        check_one((QuantFormat)f, (QuantDtype)in, c, lens[li], blocks[bi], 0, (size_t)(c % 2));
    }
    const int ranks[] = {1, 2, 3, 4, 8};
    for (int f = 0; f < 2; f++)
        for (size_t r = 0; r < sizeof ranks / sizeof ranks[0]; r++) {
            check_reduce((QuantFormat)f, ranks[r], 64 * 1000 + 17, 64);
            check_reduce((QuantFormat)f, ranks[r], 3 * 2048 + 1, 2048);
        }
    // the block size is refused before anything is queued
    check(quant_cuda_quantize(QUANT_INT4, QUANT_F32, NULL, 8, 3, NULL, NULL, NULL, stream) == QUANT_BAD_BLOCK &&
          quant_cuda_dequantize(QUANT_INT8, NULL, NULL, 8, 0, QUANT_F32, NULL, stream) == QUANT_BAD_BLOCK &&
          quant_cuda_dequant_reduce(QUANT_INT8, NULL, 8, NULL, 1, 0, 8, 2, NULL, stream) == QUANT_BAD_BLOCK,
          "bad block sizes and rank counts refused");
    check_wire_refusals();
    cuda_or_die(cudaStreamSynchronize(stream), "final cudaStreamSynchronize");
    printf("gpu_zero_quant\n%d passed, %d failed\n", npassed, nfailed);
    return nfailed ? 1 : 0;
}
