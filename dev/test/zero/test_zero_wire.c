// test_zero_wire.c: zero/kernels/wire.c's ZeRO++ wire kernels (pack, unpack, reduce_pack, reduce)
// against references built here from quant.c's tensor calls (quant_quantize,
// quant_dequantize) and plain loops: the record sizes written out by hand; the slice order
// of the ZeRO++ paper's equation 2, listed as the paper lists it; every record byte
// (padding included) for raw, int8 and int4 records of fp32 and bf16 slices whose length is
// and is not a multiple of the block; the round trip within half a step; the fp32 sums in
// run and record order bit for bit (and, for raw records, reduce_slices's bits); all-zero
// slices; NaN and infinity reaching the output as NaN; the same bits at 1 and 2 threads and
// through the host backend's queued streams; bad arguments refused with a message.
// Links libzero.a (its own Makefile rule).
#include <float.h>
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../../zero/backend.h"
#include "../../../zero/host/backend_host.h"
#include "../../../zero/kernels/quant.h"
#include "../../../zero/kernels/wire.h"
#include "quant_cases.h"
#include "../common/test_util.h"

#define HALF_STEP_BOUND (0.5 + 0x1p-16)   // quant.h's bound
#define POISON 0xa5                       // what output buffers hold before a kernel runs

static const ZeroWire wires[] = {ZERO_WIRE_RAW, ZERO_WIRE_INT8, ZERO_WIRE_INT4};
static const ZeroDType dtypes[] = {ZERO_F32, ZERO_BF16};

static size_t esz(ZeroDType dt) { return dt == ZERO_BF16 ? 2 : 4; }
static QuantFormat fmt(ZeroWire w) { return w == ZERO_WIRE_INT4 ? QUANT_INT4 : QUANT_INT8; }
static QuantDtype qdt(ZeroDType dt) { return dt == ZERO_BF16 ? QUANT_BF16 : QUANT_F32; }
static const char *dt_name(ZeroDType dt) { return dt == ZERO_BF16 ? "bf16" : "fp32"; }
static size_t up16(size_t b) { return (b + 15) / 16 * 16; }

// wire.h's layout, written out: payload, then scales from the next 16-byte boundary.
static size_t ref_payload(ZeroWire w, ZeroDType dt, size_t n) {
    return w == ZERO_WIRE_RAW ? n * esz(dt) : w == ZERO_WIRE_INT8 ? n : (n + 1) / 2;
}
static size_t ref_record(ZeroWire w, ZeroDType dt, size_t n, int block) {
    size_t nb = (n + (size_t)block - 1) / (size_t)block;
    return up16(ref_payload(w, dt, n)) + (w == ZERO_WIRE_RAW ? 0 : up16(4 * nb));
}
static float *ref_scales(ZeroWire w, ZeroDType dt, size_t n, uint8_t *rec) {
    return (float *)(void *)(rec + up16(ref_payload(w, dt, n)));
}

static void *xmalloc(size_t bytes) {
    void *p = aligned_alloc(64, up16(bytes ? bytes : 1) + 64);
    assert_non_null(p);
    return p;
}
static void *poisoned(size_t bytes) {
    void *p = xmalloc(bytes);
    memset(p, POISON, bytes);
    return p;
}

// bf16 nearest-even of v by comparing distances in double (NaN: quiet, sign and top bits kept).
static uint16_t ref_bf16(float v) {
    uint32_t u = bits_of(v);
    if (isnan(v)) return (uint16_t)((u >> 16) | 0x40);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    double dlo = fabs((double)v - (double)float_of((uint32_t)lo << 16));
    double dhi = fabs((double)v - (double)float_of((uint32_t)hi << 16));
    if (isinf(v) || dlo < dhi) return lo;
    if (dhi < dlo) return hi;
    return (lo & 1) ? hi : lo;
}

// x[i] as fp32 (x holds values of dtype dt).
static float value_at(const void *x, ZeroDType dt, size_t i) {
    if (dt == ZERO_F32) return ((const float *)x)[i];
    return float_of((uint32_t)((const uint16_t *)x)[i] << 16);
}

// The record of one slice x (dtype dt), made with quant_quantize / memcpy into zeros.
static void ref_pack_one(ZeroWire w, ZeroDType dt, int block, const void *x, size_t n, uint8_t *rec) {
    memset(rec, 0, ref_record(w, dt, n, block));
    if (w == ZERO_WIRE_RAW) memcpy(rec, x, n * esz(dt));
    else quant_quantize(fmt(w), qdt(dt), x, n, block, rec, ref_scales(w, dt, n, rec), NULL);
}

// The record of fp32 sums: quantized, or stored in dtype dt (bf16 nearest even).
static void ref_pack_sums(ZeroWire w, ZeroDType dt, int block, const float *s, size_t n, uint8_t *rec) {
    memset(rec, 0, ref_record(w, dt, n, block));
    if (w != ZERO_WIRE_RAW) quant_quantize(fmt(w), QUANT_F32, s, n, block, rec, ref_scales(w, dt, n, rec), NULL);
    else if (dt == ZERO_F32) memcpy(rec, s, n * sizeof(float));
    else for (size_t i = 0; i < n; i++) ((uint16_t *)(void *)rec)[i] = ref_bf16(s[i]);
}

// The fp32 values of a record.
static void ref_values(ZeroWire w, ZeroDType dt, int block, const uint8_t *rec, size_t n, float *v) {
    if (w == ZERO_WIRE_RAW) for (size_t i = 0; i < n; i++) v[i] = value_at(rec, dt, i);
    else quant_dequantize(fmt(w), rec, ref_scales(w, dt, n, (uint8_t *)rec), n, block, QUANT_F32, v);
}

// The paper's equation 2 for X GPUs per node and Y nodes:
// [0, X, 2X, ..., (Y-1)X, 1, X+1, ..., (Y-1)X+1, ..., X-1, ..., YX-1].
static void eq2_order(int X, int Y, int *order) {
    int k = 0;
    for (int c = 0; c < X; c++)
        for (int r = 0; r < Y; r++) order[k++] = r * X + c;
}

// nslices slices of n values of dtype dt, slice j from quant_cases.h's case j % QCASE_COUNT.
static void *make_slices(ZeroDType dt, int nslices, size_t n, int block, uint64_t seed) {
    uint8_t *x = xmalloc((size_t)nslices * n * esz(dt));
    for (int j = 0; j < nslices; j++) {
        void *s = x + (size_t)j * n * esz(dt);
        int c = (int)((seed + (uint64_t)j) % QCASE_COUNT);
        if (dt == ZERO_BF16) quant_case_fill_bf16(c, seed * 31 + (uint64_t)j, s, n, block);
        else quant_case_fill(c, seed * 31 + (uint64_t)j, s, n, block);
    }
    return x;
}

// The first differing byte of two buffers, or -1.
static long first_diff(const void *a, const void *b, size_t n) {
    const uint8_t *x = a, *y = b;
    for (size_t i = 0; i < n; i++) if (x[i] != y[i]) return (long)i;
    return -1;
}

static void assert_same_bytes(const void *got, const void *want, size_t n, size_t R, const char *label) {
    long d = first_diff(got, want, n);
    if (d >= 0)
        fail_msg("%s: byte %ld (record %ld, offset %ld of %zu) is %02x, the reference %02x", label, d, d / (long)R,
                 d % (long)R, R, ((const uint8_t *)got)[d], ((const uint8_t *)want)[d]);
}

static const int blocks[] = {2, 8, 64, 2048, 6144};   // 6144: past the kernels' stack buffer
#define NBLOCKS (sizeof blocks / sizeof blocks[0])
#define MAX_LEN 8192

// Calls fn for every format, dtype, block size and quant_case_lengths() slice length (k:
// the length's index, a seed), lengths up to MAX_LEN (test_threads_and_streams_same_bits
// runs the long ones).
static void for_each_shape(void (*fn)(ZeroWire w, ZeroDType dt, int block, size_t n, size_t k)) {
    size_t lens[8];
    for (size_t wi = 0; wi < 3; wi++)
        for (size_t di = 0; di < 2; di++)
            for (size_t bi = 0; bi < NBLOCKS; bi++)
                for (size_t li = 0, nl = quant_case_lengths(blocks[bi], lens); li < nl; li++)
                    if (lens[li] <= MAX_LEN) fn(wires[wi], dtypes[di], blocks[bi], lens[li], li);
}

// (slices, group): group 1 (identity), X=2 Y=2, X=4 Y=2, X=3 Y=5, one group of all.
static const int groupings[][2] = {{1, 1}, {4, 1}, {4, 2}, {8, 4}, {15, 3}, {6, 6}};
#define NGROUPINGS (sizeof groupings / sizeof groupings[0])

// ---------------------------------------------------------------- layout

static void test_record_layout(void **state) {
    (void)state;
    // by hand: int4, 5 values, block 4: 3 payload bytes -> scales at 16, 2 scales -> 32 bytes
    assert_int_equal(zero_wire_payload_bytes(ZERO_WIRE_INT4, ZERO_F32, 5), 3);
    assert_int_equal(zero_wire_scales_offset(ZERO_WIRE_INT4, ZERO_F32, 5), 16);
    assert_int_equal(zero_wire_record_bytes(ZERO_WIRE_INT4, ZERO_BF16, 5, 4), 32);
    // int8, 2048 values, block 2048: 2048 + 16 (one scale, padded)
    assert_int_equal(zero_wire_record_bytes(ZERO_WIRE_INT8, ZERO_F32, 2048, 2048), 2064);
    // int8, 100 values, block 8: payload 100 -> 112, 13 scales = 52 -> 64: 176
    assert_int_equal(zero_wire_record_bytes(ZERO_WIRE_INT8, ZERO_F32, 100, 8), 176);
    // raw: the values padded to 16, no scales
    assert_int_equal(zero_wire_record_bytes(ZERO_WIRE_RAW, ZERO_BF16, 9, 64), 32);
    assert_int_equal(zero_wire_record_bytes(ZERO_WIRE_RAW, ZERO_F32, 8, 64), 32);
    assert_int_equal(zero_wire_record_bytes(ZERO_WIRE_RAW, ZERO_F32, 0, 64), 0);
    assert_int_equal(zero_wire_record_bytes(ZERO_WIRE_INT4, ZERO_F32, 0, 64), 0);
    for (size_t wi = 0; wi < 3; wi++)
        for (size_t di = 0; di < 2; di++)
            for (size_t n = 0; n < 300; n += 7)
                for (size_t bi = 0; bi < NBLOCKS; bi++) {
                    ZeroWire w = wires[wi];
                    ZeroDType dt = dtypes[di];
                    size_t R = zero_wire_record_bytes(w, dt, n, blocks[bi]);
                    assert_int_equal(zero_wire_payload_bytes(w, dt, n), ref_payload(w, dt, n));
                    assert_int_equal(zero_wire_scales_offset(w, dt, n), up16(ref_payload(w, dt, n)));
                    assert_int_equal(R, ref_record(w, dt, n, blocks[bi]));
                    assert_int_equal(R % 16, 0);
                }
    assert_string_equal(zero_wire_name(ZERO_WIRE_RAW), "raw");
    assert_string_equal(zero_wire_name(ZERO_WIRE_INT8), "int8");
    assert_string_equal(zero_wire_name(ZERO_WIRE_INT4), "int4");
}

// ---------------------------------------------------------------- pack

// Raw fp32 slices of one value each, the slice's index: record p must hold the p-th entry
// of the paper's list.
static void test_pack_order_is_equation_2(void **state) {
    (void)state;
    const int XY[][2] = {{2, 2}, {4, 2}, {3, 5}, {2, 4}, {1, 3}, {5, 1}};
    // Figure 9's 2x2 example: slices 1 and 2 swap places
    int order[64];
    eq2_order(2, 2, order);
    assert_true(order[0] == 0 && order[1] == 2 && order[2] == 1 && order[3] == 3);
    for (size_t k = 0; k < sizeof XY / sizeof XY[0]; k++) {
        const int X = XY[k][0], Y = XY[k][1], ns = X * Y;
        float x[64];
        for (int j = 0; j < ns; j++) x[j] = (float)j;
        const size_t R = zero_wire_record_bytes(ZERO_WIRE_RAW, ZERO_F32, 1, 2);
        uint8_t *rec = poisoned((size_t)ns * R);
        zero_wire_pack_cpu(ZERO_WIRE_RAW, 2, x, ZERO_F32, 1, ns, X, rec);
        eq2_order(X, Y, order);
        for (int p = 0; p < ns; p++) {
            float got;
            memcpy(&got, rec + (size_t)p * R, sizeof got);
            if (got != (float)order[p])
                fail_msg("X=%d Y=%d: record %d holds slice %g, equation 2 says %d", X, Y, p, (double)got, order[p]);
        }
        free(rec);
    }
}

static void check_pack(ZeroWire w, ZeroDType dt, int block, size_t n, int ns, int group, uint64_t seed) {
    char label[160];
    snprintf(label, sizeof label, "pack %s %s block %d, %d slices of %zu, group %d", zero_wire_name(w), dt_name(dt),
             block, ns, n, group);
    const size_t R = zero_wire_record_bytes(w, dt, n, block);
    void *x = make_slices(dt, ns, n, block, seed);
    uint8_t *got = poisoned((size_t)ns * R), *want = xmalloc((size_t)ns * R);
    int order[64];
    eq2_order(group, ns / group, order);
    for (int p = 0; p < ns; p++)
        ref_pack_one(w, dt, block, (uint8_t *)x + (size_t)order[p] * n * esz(dt), n, want + (size_t)p * R);
    zero_wire_pack_cpu(w, block, x, dt, n, ns, group, got);
    assert_same_bytes(got, want, (size_t)ns * R, R, label);
    free(x); free(got); free(want);
}

static void pack_shape(ZeroWire w, ZeroDType dt, int block, size_t n, size_t k) {
    for (size_t g = 0; g < NGROUPINGS; g++) check_pack(w, dt, block, n, groupings[g][0], groupings[g][1], k + g);
}
static void test_pack_matches_reference(void **state) { (void)state; for_each_shape(pack_shape); }

// ---------------------------------------------------------------- unpack

static void check_unpack(ZeroWire w, ZeroDType dt, int block, size_t n, int ns, uint64_t seed) {
    char label[160];
    snprintf(label, sizeof label, "unpack %s %s block %d, %d slices of %zu", zero_wire_name(w), dt_name(dt), block, ns, n);
    const size_t R = zero_wire_record_bytes(w, dt, n, block), vb = (size_t)ns * n * esz(dt);
    void *x = make_slices(dt, ns, n, block, seed);
    uint8_t *rec = xmalloc((size_t)ns * R), *got = poisoned(vb), *want = xmalloc(vb);
    float *f = poisoned((size_t)ns * n * sizeof(float));
    zero_wire_pack_cpu(w, block, x, dt, n, ns, 1, rec);
    for (int p = 0; p < ns; p++) {
        const uint8_t *r = rec + (size_t)p * R;
        void *o = want + (size_t)p * n * esz(dt);
        if (w == ZERO_WIRE_RAW) memcpy(o, r, n * esz(dt));
        else quant_dequantize(fmt(w), r, ref_scales(w, dt, n, (uint8_t *)r), n, block, qdt(dt), o);
    }
    zero_wire_unpack_cpu(w, block, rec, n, ns, got, dt);
    assert_same_bytes(got, want, vb, n * esz(dt), label);
    if (dt == ZERO_F32) {   // the round trip: within half a step of its block, raw exact
        zero_wire_unpack_cpu(w, block, rec, n, ns, f, ZERO_F32);
        for (int p = 0; p < ns; p++)
            for (size_t i = 0; i < n; i++) {
                const float xi = value_at(x, dt, (size_t)p * n + i), yi = f[(size_t)p * n + i];
                if (w == ZERO_WIRE_RAW) { assert_true(bits_of(xi) == bits_of(yi)); continue; }
                const float s = ref_scales(w, dt, n, rec + (size_t)p * R)[i / (size_t)block];
                if (!(fabs((double)xi - (double)yi) <= (double)s * HALF_STEP_BOUND))
                    fail_msg("%s: slice %d value %zu: %a reads back as %a (scale %a)", label, p, i, (double)xi,
                             (double)yi, (double)s);
            }
    }
    free(x); free(rec); free(got); free(want); free(f);
}

static void unpack_shape(ZeroWire w, ZeroDType dt, int block, size_t n, size_t k) { check_unpack(w, dt, block, n, 7, 3 + k); }
static void test_unpack_matches_reference(void **state) { (void)state; for_each_shape(unpack_shape); }

// ---------------------------------------------------------------- reduce_pack and reduce

// ngroups * nout records of random slices (made by the reference), run g's record k at
// index g * nout + k.
static uint8_t *make_records(ZeroWire w, ZeroDType dt, int block, size_t n, int nrec, uint64_t seed) {
    const size_t R = zero_wire_record_bytes(w, dt, n, block);
    void *x = make_slices(dt, nrec, n, block, seed);
    uint8_t *rec = xmalloc((size_t)nrec * R);
    for (int r = 0; r < nrec; r++) ref_pack_one(w, dt, block, (uint8_t *)x + (size_t)r * n * esz(dt), n, rec + (size_t)r * R);
    free(x);
    return rec;
}

// sum[i] = ((v_0[i] + v_1[i]) + ...) for i < n over nrec records rec + r * stride.
static void ref_sum(ZeroWire w, ZeroDType dt, int block, const uint8_t *rec, size_t stride, int nrec, size_t slice_n,
                    size_t n, float *sum) {
    float *v = xmalloc(slice_n * sizeof(float));
    for (int r = 0; r < nrec; r++) {
        ref_values(w, dt, block, rec + (size_t)r * stride, slice_n, v);
        for (size_t i = 0; i < n; i++) sum[i] = r == 0 ? v[i] : sum[i] + v[i];
    }
    free(v);
}

static void check_reduce_pack(ZeroWire w, ZeroDType dt, int block, size_t n, int ngroups, int nout, uint64_t seed) {
    char label[160];
    snprintf(label, sizeof label, "reduce_pack %s %s block %d, %d runs of %d records of %zu", zero_wire_name(w),
             dt_name(dt), block, ngroups, nout, n);
    const size_t R = zero_wire_record_bytes(w, dt, n, block);
    uint8_t *in = make_records(w, dt, block, n, ngroups * nout, seed);
    uint8_t *got = poisoned((size_t)nout * R), *want = xmalloc((size_t)nout * R);
    float *sum = xmalloc(n * sizeof(float));
    for (int k = 0; k < nout; k++) {
        ref_sum(w, dt, block, in + (size_t)k * R, (size_t)nout * R, ngroups, n, n, sum);
        ref_pack_sums(w, dt, block, sum, n, want + (size_t)k * R);
    }
    zero_wire_reduce_pack_cpu(w, block, in, dt, n, ngroups, nout, got);
    assert_same_bytes(got, want, (size_t)nout * R, R, label);
    free(in); free(got); free(want); free(sum);
}

static void reduce_pack_shape(ZeroWire w, ZeroDType dt, int block, size_t n, size_t k) {
    const int runs[] = {1, 2, 3, 4, 8};
    for (size_t g = 0; g < sizeof runs / sizeof runs[0]; g++) check_reduce_pack(w, dt, block, n, runs[g], g % 2 ? 3 : 2, k + g);
}
static void test_reduce_pack_matches_reference(void **state) { (void)state; for_each_shape(reduce_pack_shape); }

static void check_reduce(ZeroWire w, ZeroDType dt, int block, size_t slice_n, size_t n, int nrec, int accumulate,
                         uint64_t seed) {
    char label[160];
    snprintf(label, sizeof label, "reduce %s %s block %d, %d records of %zu, n %zu, accumulate %d", zero_wire_name(w),
             dt_name(dt), block, nrec, slice_n, n, accumulate);
    const size_t R = zero_wire_record_bytes(w, dt, slice_n, block);
    uint8_t *rec = make_records(w, dt, block, slice_n, nrec, seed);
    float *acc0 = xmalloc((slice_n + 1) * sizeof(float)), *got = xmalloc((slice_n + 1) * sizeof(float));
    float *want = xmalloc((slice_n + 1) * sizeof(float)), *sum = xmalloc((slice_n + 1) * sizeof(float));
    for (size_t i = 0; i <= slice_n; i++) acc0[i] = 0.01f * rng_normal(seed, 5, i);
    ref_sum(w, dt, block, rec, R, nrec, slice_n, n, sum);
    memcpy(want, acc0, (slice_n + 1) * sizeof(float));   // past n: untouched
    for (size_t i = 0; i < n; i++) want[i] = accumulate ? acc0[i] + sum[i] : sum[i];
    memcpy(got, acc0, (slice_n + 1) * sizeof(float));
    zero_wire_reduce_cpu(w, block, rec, dt, slice_n, nrec, n, got, accumulate);
    assert_same_bytes(got, want, (slice_n + 1) * sizeof(float), (slice_n + 1) * sizeof(float), label);
    if (w == ZERO_WIRE_RAW) {   // reduce_slices / sum_slices over the records' values
        memcpy(want, acc0, (slice_n + 1) * sizeof(float));
        zero_cpu_slices(want, rec, R / esz(dt), nrec, n, dt, accumulate);
        assert_same_bytes(got, want, (slice_n + 1) * sizeof(float), (slice_n + 1) * sizeof(float), label);
    }
    free(rec); free(acc0); free(got); free(want); free(sum);
}

// n = slice_n and n < slice_n (the last hop reads only the rank's own part).
static void reduce_shape(ZeroWire w, ZeroDType dt, int block, size_t n, size_t k) {
    const int recs[] = {1, 2, 5, 8};
    for (size_t r = 0; r < sizeof recs / sizeof recs[0]; r++)
        for (int acc = 0; acc < 2; acc++) {
            check_reduce(w, dt, block, n, n, recs[r], acc, k + r);
            check_reduce(w, dt, block, n, n / 2 + 1, recs[r], acc, k + r + 9);
        }
}
static void test_reduce_matches_reference(void **state) { (void)state; for_each_shape(reduce_shape); }

// ---------------------------------------------------------------- edges

// All-zero slices (+0 and -0): scale +0, payload 0, exact +0 back; their sums likewise.
static void test_all_zero_slices(void **state) {
    (void)state;
    const size_t n = 2 * 64 + 10;
    for (size_t wi = 1; wi < 3; wi++) {
        const ZeroWire w = wires[wi];
        const size_t R = zero_wire_record_bytes(w, ZERO_F32, n, 64), nb = 3;
        float x[2 * (2 * 64 + 10)], back[2 * (2 * 64 + 10)];
        for (size_t i = 0; i < 2 * n; i++) x[i] = (i % 3) ? 0.0f : -0.0f;
        uint8_t *rec = poisoned(2 * R), *red = poisoned(R);
        zero_wire_pack_cpu(w, 64, x, ZERO_F32, n, 2, 1, rec);
        for (size_t p = 0; p < 2; p++) {
            for (size_t b = 0; b < R; b++) if (b < zero_wire_scales_offset(w, ZERO_F32, n)) assert_int_equal(rec[p * R + b], 0);
            for (size_t b = 0; b < nb; b++) assert_int_equal(bits_of(ref_scales(w, ZERO_F32, n, rec + p * R)[b]), 0);
        }
        zero_wire_unpack_cpu(w, 64, rec, n, 2, back, ZERO_F32);
        for (size_t i = 0; i < 2 * n; i++) assert_int_equal(bits_of(back[i]), 0);
        zero_wire_reduce_pack_cpu(w, 64, rec, ZERO_F32, n, 2, 1, red);
        assert_memory_equal(red, rec, R);   // the sum of zeros packs as zeros
        zero_wire_reduce_cpu(w, 64, rec, ZERO_F32, n, 2, n, back, 0);
        for (size_t i = 0; i < n; i++) assert_int_equal(bits_of(back[i]), 0);
        free(rec); free(red);
    }
}

// A NaN or an infinity in a slice travels as scale NaN and reads back as NaNs over its
// block (raw: the value itself); sums and reductions over it give NaN there, never numbers.
static void test_nonfinite_reaches_output(void **state) {
    (void)state;
    const int B = 64;
    const size_t n = 3 * 64 + 5;
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (size_t wi = 0; wi < 3; wi++)
        for (size_t di = 0; di < 2; di++)
            for (size_t v = 0; v < 3; v++) {
                const ZeroWire w = wires[wi];
                const ZeroDType dt = dtypes[di];
                const size_t R = zero_wire_record_bytes(w, dt, n, B), at = 64 + 17;   // slice 1, block 1
                uint8_t *x = make_slices(dt, 2, n, B, 1);
                if (dt == ZERO_F32) ((float *)(void *)x)[n + at] = bad[v];
                else ((uint16_t *)(void *)x)[n + at] = (uint16_t)(bits_of(bad[v]) >> 16);
                uint8_t *rec = xmalloc(2 * R), *red = xmalloc(R);
                float *back = xmalloc(2 * n * sizeof(float)), *acc = xmalloc(n * sizeof(float));
                void *vals = xmalloc(2 * n * esz(dt));
                zero_wire_pack_cpu(w, B, x, dt, n, 2, 1, rec);
                zero_wire_unpack_cpu(w, B, rec, n, 2, vals, dt);   // raw records read back in their dtype
                for (size_t i = 0; i < 2 * n; i++) back[i] = value_at(vals, dt, i);
                zero_wire_reduce_pack_cpu(w, B, rec, dt, n, 2, 1, red);
                for (size_t i = 0; i < n; i++) acc[i] = 1.0f;
                zero_wire_reduce_cpu(w, B, red, dt, n, 1, n, acc, 1);
                for (size_t i = 0; i < n; i++) {
                    const int in_block = i / B == at / B, hit = w == ZERO_WIRE_RAW ? i == at : in_block;
                    const float b1 = back[n + i];
                    if (w != ZERO_WIRE_RAW || v == 0) {
                        if (hit != !!isnan(b1))
                            fail_msg("%s %s bad value %g: slice 1 value %zu reads back as %g", zero_wire_name(w),
                                     dt_name(dt), (double)bad[v], i, (double)b1);
                    } else if (hit) {
                        assert_true(isinf(b1));   // raw: the infinity itself
                    }
                    assert_true(isfinite(back[i]));   // slice 0 untouched
                    // reduce_pack summed slice 0 and slice 1; reduce added that to 1
                    const int nan_want = w == ZERO_WIRE_RAW ? (i == at && v == 0) : in_block;
                    if (nan_want && !isnan(acc[i]))
                        fail_msg("%s %s bad value %g: the reduced value %zu is %g, not NaN", zero_wire_name(w),
                                 dt_name(dt), (double)bad[v], i, (double)acc[i]);
                    if (!in_block) assert_true(isfinite(acc[i]));
                }
                if (w != ZERO_WIRE_RAW) assert_true(isnan(ref_scales(w, dt, n, red)[1]));
                free(x); free(rec); free(red); free(back); free(acc); free(vals);
            }
}

// ---------------------------------------------------------------- threads and streams

// Large enough for threads (several blocks per record, many records): 1 and 2 threads,
// and the host backend's queued ops on a worker stream, give the same bytes.
static void test_threads_and_streams_same_bits(void **state) {
    (void)state;
    ZeroComm *comm = zero_comm_init(NULL, NULL);   // no launcher: a world of one
    assert_non_null(comm);
    const ZeroBackend *be = zero_backend_host(comm);
    assert_non_null(be);
    ZeroStream *st = be->stream_create(be);
    assert_non_null(st);
    const size_t n = 20000 + 7;
    const int ns = 8, group = 2, B = 2048;
    for (size_t wi = 0; wi < 3; wi++)
        for (size_t di = 0; di < 2; di++) {
            const ZeroWire w = wires[wi];
            const ZeroDType dt = dtypes[di];
            const size_t R = zero_wire_record_bytes(w, dt, n, B), vb = (size_t)ns * n * esz(dt);
            void *x = make_slices(dt, ns, n, B, 77);
            uint8_t *rec[3], *red[3], *out[3];
            float *acc[3];
            for (int t = 0; t < 3; t++) {
                rec[t] = poisoned((size_t)ns * R);
                red[t] = poisoned(2 * R);
                out[t] = poisoned(vb);
                acc[t] = xmalloc(n * sizeof(float));
                for (size_t i = 0; i < n; i++) acc[t][i] = (float)i;
                if (t < 2) {
                    omp_set_num_threads(t + 1);
                    zero_wire_pack_cpu(w, B, x, dt, n, ns, group, rec[t]);
                    zero_wire_unpack_cpu(w, B, rec[t], n, ns, out[t], dt);
                    zero_wire_reduce_pack_cpu(w, B, rec[t], dt, n, 4, 2, red[t]);
                    zero_wire_reduce_cpu(w, B, rec[t], dt, n, ns, n, acc[t], 1);
                } else {
                    be->wire_pack(be, w, B, x, dt, n, ns, group, rec[t], st);
                    be->wire_unpack(be, w, B, rec[t], n, ns, out[t], dt, st);
                    be->wire_reduce_pack(be, w, B, rec[t], dt, n, 4, 2, red[t], st);
                    be->wire_reduce(be, w, B, rec[t], dt, n, ns, n, acc[t], 1, st);
                    be->stream_sync(be, st);
                }
            }
            for (int t = 1; t < 3; t++) {
                char label[96];
                snprintf(label, sizeof label, "%s %s, %s", zero_wire_name(w), dt_name(dt),
                         t == 1 ? "2 threads against 1" : "host backend stream against direct");
                assert_same_bytes(rec[t], rec[0], (size_t)ns * R, R, label);
                assert_same_bytes(out[t], out[0], vb, n * esz(dt), label);
                assert_same_bytes(red[t], red[0], 2 * R, R, label);
                assert_same_bytes(acc[t], acc[0], n * sizeof(float), n * sizeof(float), label);
            }
            for (int t = 0; t < 3; t++) { free(rec[t]); free(red[t]); free(out[t]); free(acc[t]); }
            free(x);
        }
    omp_set_num_threads(2);
    be->stream_destroy(be, st);
    zero_backend_host_free(be);
    zero_comm_free(comm);
}

// ---------------------------------------------------------------- refusals

static void pack_odd_block(void *arg) {
    (void)arg;
    float x[8] = {0}, rec[16];
    zero_wire_pack_cpu(ZERO_WIRE_INT4, 3, x, ZERO_F32, 8, 1, 1, rec);
}
static void pack_bad_group(void *arg) {
    (void)arg;
    float x[6] = {0}, rec[64];
    zero_wire_pack_cpu(ZERO_WIRE_RAW, 2, x, ZERO_F32, 1, 6, 4, rec);
}
static void reduce_too_many(void *arg) {
    (void)arg;
    float rec[16] = {0}, acc[8];
    zero_wire_reduce_cpu(ZERO_WIRE_INT8, 4, rec, ZERO_F32, 4, 1, 5, acc, 0);
}
static void unpack_u8(void *arg) {
    (void)arg;
    float rec[16] = {0}, out[8];
    zero_wire_unpack_cpu(ZERO_WIRE_RAW, 4, rec, 4, 1, out, ZERO_U8);
}

static void test_bad_arguments_refused(void **state) {
    (void)state;
    struct { void (*fn)(void *); const char *msg; } cases[] = {
        {pack_odd_block, "zero_wire_pack_cpu: quantization block size 3 is not a positive even number"},
        {pack_bad_group, "zero: zero_wire_pack_cpu: 6 slices do not split into groups of 4"},
        {reduce_too_many, "zero: zero_wire_reduce_cpu: 5 values asked of records of 4"},
        {unpack_u8, "zero: zero_wire_unpack_cpu: values of dtype 2 (fp32 or bf16 only)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char msg[2048];
        int rc = run_in_child(cases[k].fn, NULL, msg, sizeof msg);
        if (rc == 0 || !strstr(msg, cases[k].msg))
            fail_msg("expected a stop with \"%s\"; exit %d, stderr: %s", cases[k].msg, rc, msg);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_layout),
        cmocka_unit_test(test_pack_order_is_equation_2),
        cmocka_unit_test(test_pack_matches_reference),
        cmocka_unit_test(test_unpack_matches_reference),
        cmocka_unit_test(test_reduce_pack_matches_reference),
        cmocka_unit_test(test_reduce_matches_reference),
        cmocka_unit_test(test_all_zero_slices),
        cmocka_unit_test(test_nonfinite_reaches_output),
        cmocka_unit_test(test_threads_and_streams_same_bits),
        cmocka_unit_test(test_bad_arguments_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
