// test_zero_wire.c: zero/kernels/wire.c's ZeRO++ wire kernels (pack, unpack, reduce_pack, reduce)
// beyond their bits against the reference (test_backend_ops.c, on every backend): the record
// sizes written out by hand (wire_ref.h); the slice order of the ZeRO++ paper's equation 2,
// listed as the paper lists it; the round trip within half a step; all-zero slices; NaN and
// infinity reaching the output as NaN; the same bits at 1 and 2 threads and through the host
// backend's queued streams; bad arguments refused with a message.
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
#include "wire_ref.h"
#include "../common/test_util.h"

#define HALF_STEP_BOUND (0.5 + 0x1p-16)   // quant.h's bound
#define POISON 0xa5                       // what output buffers hold before a kernel runs

static const ZeroWire wires[] = {ZERO_WIRE_RAW, ZERO_WIRE_INT8, ZERO_WIRE_INT4};
static const ZeroDType dtypes[] = {ZERO_F32, ZERO_BF16};
static const char *dt_name(ZeroDType dt) { return dt == ZERO_BF16 ? "bf16" : "fp32"; }

static void *xmalloc(size_t bytes) {
    void *p = aligned_alloc(64, ref_up16(bytes ? bytes : 1) + 64);
    assert_non_null(p);
    return p;
}
static void *poisoned(size_t bytes) {
    void *p = xmalloc(bytes);
    memset(p, POISON, bytes);
    return p;
}

// nslices slices of n values of dtype dt, slice j from quant_cases.h's case j % QCASE_COUNT.
static void *make_slices(ZeroDType dt, int nslices, size_t n, int block, uint64_t seed) {
    uint8_t *x = xmalloc((size_t)nslices * n * ref_esz(dt));
    for (int j = 0; j < nslices; j++) {
        void *s = x + (size_t)j * n * ref_esz(dt);
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
                    assert_int_equal(zero_wire_scales_offset(w, dt, n), ref_up16(ref_payload(w, dt, n)));
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
    ref_eq2_order(2, 2, order);
    assert_true(order[0] == 0 && order[1] == 2 && order[2] == 1 && order[3] == 3);
    for (size_t k = 0; k < sizeof XY / sizeof XY[0]; k++) {
        const int X = XY[k][0], Y = XY[k][1], ns = X * Y;
        float x[64];
        for (int j = 0; j < ns; j++) x[j] = (float)j;
        const size_t R = zero_wire_record_bytes(ZERO_WIRE_RAW, ZERO_F32, 1, 2);
        uint8_t *rec = poisoned((size_t)ns * R);
        zero_wire_pack_cpu(ZERO_WIRE_RAW, 2, x, ZERO_F32, 1, ns, X, rec);
        ref_eq2_order(X, Y, order);
        for (int p = 0; p < ns; p++) {
            float got;
            memcpy(&got, rec + (size_t)p * R, sizeof got);
            if (got != (float)order[p])
                fail_msg("X=%d Y=%d: record %d holds slice %g, equation 2 says %d", X, Y, p, (double)got, order[p]);
        }
        free(rec);
    }
}

// ---------------------------------------------------------------- unpack

// The round trip: every value within half a step of its block (quant.h's bound), raw exact.
static void check_round_trip(ZeroWire w, int block, size_t n, int ns, uint64_t seed) {
    char label[160];
    snprintf(label, sizeof label, "round trip %s block %d, %d slices of %zu", zero_wire_name(w), block, ns, n);
    const size_t R = zero_wire_record_bytes(w, ZERO_F32, n, block);
    float *x = make_slices(ZERO_F32, ns, n, block, seed), *f = poisoned((size_t)ns * n * sizeof(float));
    uint8_t *rec = xmalloc((size_t)ns * R);
    zero_wire_pack_cpu(w, block, x, ZERO_F32, n, ns, 1, rec);
    zero_wire_unpack_cpu(w, block, rec, n, ns, f, ZERO_F32);
    for (int p = 0; p < ns; p++)
        for (size_t i = 0; i < n; i++) {
            const float xi = x[(size_t)p * n + i], yi = f[(size_t)p * n + i];
            if (w == ZERO_WIRE_RAW) { assert_true(bits_of(xi) == bits_of(yi)); continue; }
            const float s = ref_scales(w, ZERO_F32, n, rec + (size_t)p * R)[i / (size_t)block];
            if (!(fabs((double)xi - (double)yi) <= (double)s * HALF_STEP_BOUND))
                fail_msg("%s: slice %d value %zu: %a reads back as %a (scale %a)", label, p, i, (double)xi, (double)yi,
                         (double)s);
        }
    free(x); free(rec); free(f);
}

static void round_trip_shape(ZeroWire w, ZeroDType dt, int block, size_t n, size_t k) {
    if (dt == ZERO_F32) check_round_trip(w, block, n, 7, 3 + k);
}
static void test_unpack_round_trip(void **state) { (void)state; for_each_shape(round_trip_shape); }

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
                void *vals = xmalloc(2 * n * ref_esz(dt));
                zero_wire_pack_cpu(w, B, x, dt, n, 2, 1, rec);
                zero_wire_unpack_cpu(w, B, rec, n, 2, vals, dt);   // raw records read back in their dtype
                for (size_t i = 0; i < 2 * n; i++) back[i] = ref_value_at(vals, dt, i);
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
            const size_t R = zero_wire_record_bytes(w, dt, n, B), vb = (size_t)ns * n * ref_esz(dt);
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
                assert_same_bytes(out[t], out[0], vb, n * ref_esz(dt), label);
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
        cmocka_unit_test(test_unpack_round_trip),
        cmocka_unit_test(test_all_zero_slices),
        cmocka_unit_test(test_nonfinite_reaches_output),
        cmocka_unit_test(test_threads_and_streams_same_bits),
        cmocka_unit_test(test_bad_arguments_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
