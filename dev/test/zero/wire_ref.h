// wire_ref.h: the C reference of zero/kernels/wire.h's records, built from quant.c's tensor
// calls (quant_quantize, quant_dequantize) and plain loops: the record sizes written out by
// hand, the slice order of the ZeRO++ paper's equation 2 as the paper lists it, records of
// slices and of fp32 sums, and the fp32 sums in record order. Used by test_backend_ops.c
// (every backend's wire kernels against it) and test_zero_wire.c (the layout and the edges).
// Header-only.
#ifndef WIRE_REF_H
#define WIRE_REF_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../../zero/kernels/quant.h"
#include "../../../zero/kernels/wire.h"

static inline size_t ref_esz(ZeroDType dt) { return dt == ZERO_BF16 ? 2 : 4; }
static inline QuantFormat ref_fmt(ZeroWire w) { return w == ZERO_WIRE_INT4 ? QUANT_INT4 : QUANT_INT8; }
static inline QuantDtype ref_qdt(ZeroDType dt) { return dt == ZERO_BF16 ? QUANT_BF16 : QUANT_F32; }
static inline size_t ref_up16(size_t b) { return (b + 15) / 16 * 16; }
static inline uint32_t ref_bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static inline float ref_float(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

// wire.h's layout, written out: payload, then scales from the next 16-byte boundary.
static inline size_t ref_payload(ZeroWire w, ZeroDType dt, size_t n) {
    return w == ZERO_WIRE_RAW ? n * ref_esz(dt) : w == ZERO_WIRE_INT8 ? n : (n + 1) / 2;
}
static inline size_t ref_record(ZeroWire w, ZeroDType dt, size_t n, int block) {
    size_t nb = (n + (size_t)block - 1) / (size_t)block;
    return ref_up16(ref_payload(w, dt, n)) + (w == ZERO_WIRE_RAW ? 0 : ref_up16(4 * nb));
}
static inline float *ref_scales(ZeroWire w, ZeroDType dt, size_t n, uint8_t *rec) {
    return (float *)(void *)(rec + ref_up16(ref_payload(w, dt, n)));
}

// bf16 nearest-even of v by comparing distances in double (NaN: quiet, sign and top bits kept).
static inline uint16_t ref_bf16(float v) {
    uint32_t u = ref_bits(v);
    if (isnan(v)) return (uint16_t)((u >> 16) | 0x40);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    double dlo = fabs((double)v - (double)ref_float((uint32_t)lo << 16));
    double dhi = fabs((double)v - (double)ref_float((uint32_t)hi << 16));
    if (isinf(v) || dlo < dhi) return lo;
    if (dhi < dlo) return hi;
    return (lo & 1) ? hi : lo;
}

// x[i] as fp32 (x holds values of dtype dt).
static inline float ref_value_at(const void *x, ZeroDType dt, size_t i) {
    if (dt == ZERO_F32) return ((const float *)x)[i];
    return ref_float((uint32_t)((const uint16_t *)x)[i] << 16);
}

// The record of one slice x (dtype dt), made with quant_quantize / memcpy into zeros.
static inline void ref_pack_one(ZeroWire w, ZeroDType dt, int block, const void *x, size_t n, uint8_t *rec) {
    memset(rec, 0, ref_record(w, dt, n, block));
    if (w == ZERO_WIRE_RAW) memcpy(rec, x, n * ref_esz(dt));
    else quant_quantize(ref_fmt(w), ref_qdt(dt), x, n, block, rec, ref_scales(w, dt, n, rec), NULL);
}

// The record of fp32 sums: quantized, or stored in dtype dt (bf16 nearest even).
static inline void ref_pack_sums(ZeroWire w, ZeroDType dt, int block, const float *s, size_t n, uint8_t *rec) {
    memset(rec, 0, ref_record(w, dt, n, block));
    if (w != ZERO_WIRE_RAW) quant_quantize(ref_fmt(w), QUANT_F32, s, n, block, rec, ref_scales(w, dt, n, rec), NULL);
    else if (dt == ZERO_F32) memcpy(rec, s, n * sizeof(float));
    else for (size_t i = 0; i < n; i++) ((uint16_t *)(void *)rec)[i] = ref_bf16(s[i]);
}

// The fp32 values of a record.
static inline void ref_values(ZeroWire w, ZeroDType dt, int block, const uint8_t *rec, size_t n, float *v) {
    if (w == ZERO_WIRE_RAW) for (size_t i = 0; i < n; i++) v[i] = ref_value_at(rec, dt, i);
    else quant_dequantize(ref_fmt(w), rec, ref_scales(w, dt, n, (uint8_t *)rec), n, block, QUANT_F32, v);
}

// The values of dtype dt a record reads back as (unpack's definition).
static inline void ref_unpack_one(ZeroWire w, ZeroDType dt, int block, const uint8_t *rec, size_t n, void *out) {
    if (w == ZERO_WIRE_RAW) memcpy(out, rec, n * ref_esz(dt));
    else quant_dequantize(ref_fmt(w), rec, ref_scales(w, dt, n, (uint8_t *)rec), n, block, ref_qdt(dt), out);
}

// The paper's equation 2 for X GPUs per node and Y nodes:
// [0, X, 2X, ..., (Y-1)X, 1, X+1, ..., (Y-1)X+1, ..., X-1, ..., YX-1].
static inline void ref_eq2_order(int X, int Y, int *order) {
    int k = 0;
    for (int c = 0; c < X; c++)
        for (int r = 0; r < Y; r++) order[k++] = r * X + c;
}

// sum[i] = ((v_0[i] + v_1[i]) + ...) for i < n over nrec records rec + r * stride.
static inline void ref_sum(ZeroWire w, ZeroDType dt, int block, const uint8_t *rec, size_t stride, int nrec,
                           size_t slice_n, size_t n, float *sum) {
    float *v = malloc((slice_n ? slice_n : 1) * sizeof(float));
    if (!v) abort();
    for (int r = 0; r < nrec; r++) {
        ref_values(w, dt, block, rec + (size_t)r * stride, slice_n, v);
        for (size_t i = 0; i < n; i++) sum[i] = r == 0 ? v[i] : sum[i] + v[i];
    }
    free(v);
}

#endif
