// bench_quant.c: zero/kernels/quant.c's block quantization kernels and zero/kernels/wire.c's ZeRO++ wire
// kernels in GB/s against a plain memory copy on the same machine and thread count (1 and
// 2 threads, or the ones given): quantize fp32/bf16 -> int8/int4, dequantize int8 -> bf16
// (qwZ's receive side), the dequantize-reduce of N = 2, 4, 8 ranks' int8/int4 payloads into
// fp32; then the wire records: pack (4 slices in eq. 1-2 order), unpack, the fused
// dequantize-sum-quantize reduce_pack of G = 2, 4, 8 runs of int4 records (qgZ's hop
// between its two all-to-alls; 4 records of n/4 values a run) and reduce of N = 2, 4, 8
// int8/int4 records of n values onto an fp32 accumulator (qgZ's last hop).
//   make bench_quant && ./bench_quant [elements=16777216] [repeats=5] [threads...]
// GB/s counts the bytes each kernel reads plus the bytes it writes (payload, scales,
// values); the copy (memcpy over thread chunks) is counted the same way, read + write, so
// "vs copy" is the kernel's share of what moving its bytes alone would take. Each figure
// is the best of the repeats; every buffer is touched before timing.
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../llmc/numerics/rand.h"
#include "../../zero/kernels/quant.h"
#include "../../zero/kernels/wire.h"

#define BLOCK QUANT_BLOCK_DEFAULT
#define COPY_CHUNK (1u << 20)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *alloc_touched(size_t bytes) {
    char *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) { fprintf(stderr, "bench_quant: out of memory allocating %zu bytes\n", bytes); exit(1); }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < bytes; i += 4096) p[i] = 0;
    memset(p, 0, bytes);
    return p;
}

static void copy_bytes(char *dst, const char *src, size_t bytes) {
    const size_t chunks = (bytes + COPY_CHUNK - 1) / COPY_CHUNK;
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < chunks; c++) {
        const size_t lo = c * COPY_CHUNK, len = bytes - lo < COPY_CHUNK ? bytes - lo : COPY_CHUNK;
        memcpy(dst + lo, src + lo, len);
    }
}

typedef struct {
    size_t n;
    float *x, *out;
    uint16_t *xh, *outh;
    void *q;             // 8 ranks' payloads, int8-sized strides
    float *scales;       // 8 ranks' scales
    size_t qstride, sstride;
    void *rec, *rec_out;  // wire records: 8 runs of n values in, n values out
} Bufs;

typedef struct {
    const char *name;
    int kind;            // 0 quantize, 1 dequantize to bf16, 2 dequant-reduce, 3.. wire (below)
    QuantFormat f;
    QuantDtype in;
    int nranks;          // ranks, runs (reduce_pack) or records (reduce)
    ZeroWire w;          // wire kernels' record format (unused by quant.c's)
} Op;

enum { WIRE_PACK = 3, WIRE_UNPACK, WIRE_REDUCE_PACK, WIRE_REDUCE };
#define WIRE_SLICES 4    // pack, unpack and reduce_pack: n values as 4 records of n/4

static size_t wire_slice(const Op *op, size_t n) { return op->kind == WIRE_REDUCE ? n : n / WIRE_SLICES; }
static size_t wire_record(const Op *op, size_t n) { return zero_wire_record_bytes(op->w, ZERO_F32, wire_slice(op, n), BLOCK); }

static void run_wire(const Op *op, Bufs *b) {
    const size_t sn = wire_slice(op, b->n);
    if (op->kind == WIRE_PACK) zero_wire_pack_cpu(op->w, BLOCK, b->x, ZERO_F32, sn, WIRE_SLICES, 2, b->rec_out);
    else if (op->kind == WIRE_UNPACK) zero_wire_unpack_cpu(op->w, BLOCK, b->rec, sn, WIRE_SLICES, b->outh, ZERO_BF16);
    else if (op->kind == WIRE_REDUCE_PACK)
        zero_wire_reduce_pack_cpu(op->w, BLOCK, b->rec, ZERO_F32, sn, op->nranks, WIRE_SLICES, b->rec_out);
    else zero_wire_reduce_cpu(op->w, BLOCK, b->rec, ZERO_F32, sn, op->nranks, b->n, b->out, 1);
}

// Input records of format w for op: n values packed again and again (8 runs' worth).
static void fill_records(Bufs *b, const Op *op) {
    const size_t sn = wire_slice(op, b->n), per = b->n / sn, R = wire_record(op, b->n);
    for (int r = 0; r < 8; r++)
        zero_wire_pack_cpu(op->w, BLOCK, b->x, ZERO_F32, sn, (int)per, 1, (char *)b->rec + (size_t)r * per * R);
}

static void run_op(const Op *op, Bufs *b) {
    int rc = QUANT_OK;
    if (op->kind >= WIRE_PACK) run_wire(op, b);
    else if (op->kind == 0)
        rc = quant_quantize(op->f, op->in, op->in == QUANT_BF16 ? (const void *)b->xh : (const void *)b->x, b->n, BLOCK,
                            b->q, b->scales, NULL);
    else if (op->kind == 1)
        rc = quant_dequantize(op->f, b->q, b->scales, b->n, BLOCK, QUANT_BF16, b->outh);
    else
        rc = quant_dequant_reduce(op->f, b->q, b->qstride, b->scales, b->sstride, op->nranks, b->n, BLOCK, b->out);
    if (rc != QUANT_OK) { fprintf(stderr, "bench_quant: %s failed (%d)\n", op->name, rc); exit(1); }
}

// Bytes read + written by one run of op.
static double op_bytes(const Op *op, size_t n) {
    if (op->kind >= WIRE_PACK) {
        const double rec = (double)(n / wire_slice(op, n)) * (double)wire_record(op, n);   // n values of records
        if (op->kind == WIRE_PACK) return 4.0 * (double)n + rec;
        if (op->kind == WIRE_UNPACK) return rec + 2.0 * (double)n;
        if (op->kind == WIRE_REDUCE_PACK) return (op->nranks + 1) * rec;
        return op->nranks * rec + 8.0 * (double)n;   // records, and the accumulator read and written
    }
    const double payload = (double)quant_bytes(op->f, n), scales = 4.0 * (double)quant_nblocks(n, BLOCK);
    if (op->kind == 0) return (op->in == QUANT_BF16 ? 2.0 : 4.0) * (double)n + payload + scales;
    if (op->kind == 1) return payload + scales + 2.0 * (double)n;
    return op->nranks * (payload + scales) + 4.0 * (double)n;
}

// Every rank's slot gets a real payload of format f (int4 uses the first half of a slot).
static void fill_payloads(Bufs *b, QuantFormat f) {
    for (int r = 0; r < 8; r++)
        if (quant_quantize(f, QUANT_F32, b->x, b->n, BLOCK, (char *)b->q + (size_t)r * b->qstride,
                           b->scales + (size_t)r * b->sstride, NULL)) exit(1);
}

static double best_seconds(const Op *op, Bufs *b, int repeats) {
    double best = 1e30;
    for (int r = 0; r < repeats; r++) {
        double t0 = now();
        run_op(op, b);
        double t = now() - t0;
        if (t < best) best = t;
    }
    return best;
}

static double copy_gbs(char *dst, const char *src, size_t bytes, int repeats) {
    double best = 1e30;
    for (int r = 0; r < repeats; r++) {
        double t0 = now();
        copy_bytes(dst, src, bytes);
        double t = now() - t0;
        if (t < best) best = t;
    }
    return 2.0 * (double)bytes / best / 1e9;
}

int main(int argc, char **argv) {
    const size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)16 << 20;
    const int repeats = argc > 2 ? atoi(argv[2]) : 5;
    int threads[16], nthreads = 0;
    for (int i = 3; i < argc && nthreads < 16; i++) threads[nthreads++] = atoi(argv[i]);
    if (nthreads == 0) { threads[0] = 1; threads[1] = 2; nthreads = 2; }
    if (n < 2 || repeats < 1) { fprintf(stderr, "usage: bench_quant [elements >= 2] [repeats >= 1] [threads...]\n"); return 1; }

    Bufs b = {.n = n};
    b.qstride = quant_bytes(QUANT_INT8, n);
    b.sstride = quant_nblocks(n, BLOCK);
    b.x = alloc_touched(n * 4);
    b.out = alloc_touched(n * 4);
    b.xh = alloc_touched(n * 2);
    b.outh = alloc_touched(n * 2);
    b.q = alloc_touched(8 * b.qstride);
    b.scales = alloc_touched(8 * b.sstride * sizeof(float));
    const size_t rec_max = zero_wire_record_bytes(ZERO_WIRE_INT8, ZERO_F32, n, BLOCK) + WIRE_SLICES * 16 * 2;
    b.rec = alloc_touched(8 * rec_max);
    b.rec_out = alloc_touched(rec_max);
    for (size_t i = 0; i < n; i++) {
        b.x[i] = 0.02f * rng_normal(3, 1, i);
        memcpy(&b.xh[i], (char *)&b.x[i] + 2, 2);   // the upper half: a bf16 of the same tensor
    }
    const size_t copy_max = 8 * rec_max + 8 * n;
    char *csrc = alloc_touched(copy_max), *cdst = alloc_touched(copy_max);

    const Op ops[] = {
        {"quantize fp32 -> int8", 0, QUANT_INT8, QUANT_F32, 1, ZERO_WIRE_RAW},
        {"quantize fp32 -> int4", 0, QUANT_INT4, QUANT_F32, 1, ZERO_WIRE_RAW},
        {"quantize bf16 -> int8", 0, QUANT_INT8, QUANT_BF16, 1, ZERO_WIRE_RAW},
        {"quantize bf16 -> int4", 0, QUANT_INT4, QUANT_BF16, 1, ZERO_WIRE_RAW},
        {"dequantize int8 -> bf16", 1, QUANT_INT8, QUANT_F32, 1, ZERO_WIRE_RAW},
        {"dequant-reduce int8, N=2", 2, QUANT_INT8, QUANT_F32, 2, ZERO_WIRE_RAW},
        {"dequant-reduce int8, N=4", 2, QUANT_INT8, QUANT_F32, 4, ZERO_WIRE_RAW},
        {"dequant-reduce int8, N=8", 2, QUANT_INT8, QUANT_F32, 8, ZERO_WIRE_RAW},
        {"dequant-reduce int4, N=2", 2, QUANT_INT4, QUANT_F32, 2, ZERO_WIRE_RAW},
        {"dequant-reduce int4, N=4", 2, QUANT_INT4, QUANT_F32, 4, ZERO_WIRE_RAW},
        {"dequant-reduce int4, N=8", 2, QUANT_INT4, QUANT_F32, 8, ZERO_WIRE_RAW},
        {"wire pack fp32 -> int4", WIRE_PACK, QUANT_INT4, QUANT_F32, 1, ZERO_WIRE_INT4},
        {"wire unpack int8 -> bf16", WIRE_UNPACK, QUANT_INT8, QUANT_F32, 1, ZERO_WIRE_INT8},
        {"wire reduce_pack int4, G=2", WIRE_REDUCE_PACK, QUANT_INT4, QUANT_F32, 2, ZERO_WIRE_INT4},
        {"wire reduce_pack int4, G=4", WIRE_REDUCE_PACK, QUANT_INT4, QUANT_F32, 4, ZERO_WIRE_INT4},
        {"wire reduce_pack int4, G=8", WIRE_REDUCE_PACK, QUANT_INT4, QUANT_F32, 8, ZERO_WIRE_INT4},
        {"wire reduce int8, N=2", WIRE_REDUCE, QUANT_INT8, QUANT_F32, 2, ZERO_WIRE_INT8},
        {"wire reduce int8, N=4", WIRE_REDUCE, QUANT_INT8, QUANT_F32, 4, ZERO_WIRE_INT8},
        {"wire reduce int8, N=8", WIRE_REDUCE, QUANT_INT8, QUANT_F32, 8, ZERO_WIRE_INT8},
        {"wire reduce int4, N=2", WIRE_REDUCE, QUANT_INT4, QUANT_F32, 2, ZERO_WIRE_INT4},
        {"wire reduce int4, N=4", WIRE_REDUCE, QUANT_INT4, QUANT_F32, 4, ZERO_WIRE_INT4},
        {"wire reduce int4, N=8", WIRE_REDUCE, QUANT_INT4, QUANT_F32, 8, ZERO_WIRE_INT4},
    };
    printf("bench_quant: %zu elements (%.1f MiB fp32), block %d, best of %d; GB/s = (bytes read + written) / s\n", n,
           (double)n * 4 / (1 << 20), BLOCK, repeats);
    printf("%-26s %7s %10s %12s %10s %9s\n", "kernel", "threads", "GB/s", "copy GB/s", "vs copy", "Gelem/s");
    for (int t = 0; t < nthreads; t++) {
        omp_set_num_threads(threads[t]);
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            if (ops[k].kind >= WIRE_PACK) fill_records(&b, &ops[k]);
            else if (ops[k].kind != 0) fill_payloads(&b, ops[k].f);
            const double bytes = op_bytes(&ops[k], n);
            run_op(&ops[k], &b);   // warm
            const double s = best_seconds(&ops[k], &b, repeats);
            const double copy = copy_gbs(cdst, csrc, (size_t)(bytes / 2), repeats);   // the same traffic
            printf("%-26s %7d %10.2f %12.2f %9.0f%% %9.3f\n", ops[k].name, threads[t], bytes / s / 1e9, copy,
                   100.0 * (bytes / s / 1e9) / copy, (double)n / s / 1e9);
        }
    }
    free(b.x); free(b.out); free(b.xh); free(b.outh); free(b.q); free(b.scales); free(b.rec); free(b.rec_out);
    free(csrc); free(cdst);
    return 0;
}
