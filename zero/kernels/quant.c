// quant.c: the C block quantization kernels of quant.h, the reference that quant_cuda.cu
// matches bit for bit. One block per loop trip, OpenMP over blocks: blocks are
// independent, so the thread count cannot change a result.
#include "quant.h"

#include <stdio.h>
#include <string.h>

#include "quant_element.h"

#ifdef __FAST_MATH__
#error "quant.c must build without -ffast-math: its rounding relies on IEEE additions"
#endif

const char *quant_format_name(QuantFormat f) { return f == QUANT_INT4 ? "int4" : "int8"; }
int quant_qmax(QuantFormat f) { return f == QUANT_INT4 ? QUANT_INT4_MAX : QUANT_INT8_MAX; }
size_t quant_nblocks(size_t n, int block) { return block > 0 ? (n + (size_t)block - 1) / (size_t)block : 0; }
size_t quant_bytes(QuantFormat f, size_t n) { return f == QUANT_INT4 ? (n + 1) / 2 : n; }

int quant_check_block(int block, const char *what) {
    if (block > 0 && block % 2 == 0) return QUANT_OK;
    fprintf(stderr, "zero: %s: quantization block size %d is not a positive even number\n", what, block);
    return QUANT_BAD_BLOCK;
}

static float load(const void *x, QuantDtype in, size_t i) {
    return in == QUANT_BF16 ? quant_bf16_to_f32(((const uint16_t *)x)[i]) : ((const float *)x)[i];
}

// Byte offset of value i in a payload (i even for int4: blocks and chunks start on bytes).
static size_t payload_offset(QuantFormat f, size_t i) { return f == QUANT_INT4 ? i / 2 : i; }

// max |x| over x[0, len) as bits (>= QUANT_NONFINITE_BITS when a value is inf or NaN).
static uint32_t block_amax_bits(const void *x, QuantDtype in, size_t len) {
    uint32_t m = 0;
    if (in == QUANT_BF16) {
        const uint16_t *h = (const uint16_t *)x;
        for (size_t i = 0; i < len; i++) { uint32_t a = (uint32_t)(h[i] & 0x7fffu) << 16; m = a > m ? a : m; }
    } else {
        const uint32_t *u = (const uint32_t *)x;
        for (size_t i = 0; i < len; i++) { uint32_t a = QUANT_ABS_BITS(u[i]); m = a > m ? a : m; }
    }
    return m;
}

// The host loops work through CHUNK values at a time in small stack buffers (bf16
// widened to fp32, int4 rounded to int8 before packing), so each inner loop is a plain
// array loop the compiler vectorizes. CHUNK is even: chunks start on int4 bytes.
#define CHUNK 256

// values [lo, lo + len) of x as fp32: x itself, or widened into tmp.
static const float *as_f32(const void *x, QuantDtype in, size_t lo, size_t len, float *tmp) {
    if (in == QUANT_F32) return (const float *)x + lo;
    const uint16_t *h = (const uint16_t *)x + lo;
    for (size_t k = 0; k < len; k++) tmp[k] = quant_bf16_to_f32(h[k]);
    return tmp;
}

static void round_chunk(const float *x, size_t len, float s, int qmax, int8_t *q) {
    for (size_t k = 0; k < len; k++) q[k] = (int8_t)quant_round(x[k], s, qmax);
}

// Quantizes x[0, len) with scale s > 0; int4 pads an odd len with a 0 nibble.
static void quantize_values(QuantFormat f, QuantDtype in, const void *x, size_t len, float s, void *q) {
    float wide[CHUNK];
    int8_t q8[CHUNK + 1];
    for (size_t c = 0; c < len; c += CHUNK) {
        const size_t cl = len - c < CHUNK ? len - c : CHUNK;
        const float *xs = as_f32(x, in, c, cl, wide);
        if (f == QUANT_INT8) { round_chunk(xs, cl, s, QUANT_INT8_MAX, (int8_t *)q + c); continue; }
        round_chunk(xs, cl, s, QUANT_INT4_MAX, q8);
        q8[cl] = 0;
        uint8_t *q4 = (uint8_t *)q + c / 2;
        for (size_t j = 0; j < (cl + 1) / 2; j++) q4[j] = quant_pack_int4(q8[2 * j], q8[2 * j + 1]);
    }
}

float quant_block_quantize(QuantFormat f, QuantDtype in, const void *x, size_t len, void *q) {
    const uint32_t amax = block_amax_bits(x, in, len);
    const float s = amax >= QUANT_NONFINITE_BITS ? quant_float_of(0x7fc00000u)   // NaN: refused
                                                 : quant_scale(amax, quant_qmax(f));
    if (s > 0.0f) quantize_values(f, in, x, len, s, q);
    else memset(q, 0, quant_bytes(f, len));   // all zero (s = 0) or refused (NaN)
    return s;
}

int quant_quantize(QuantFormat f, QuantDtype in, const void *x, size_t n, int block,
                   void *q, float *scales, QuantBad *bad) {
    if (quant_check_block(block, "quant_quantize")) return QUANT_BAD_BLOCK;
    const size_t nb = quant_nblocks(n, block), B = (size_t)block, esz = in == QUANT_BF16 ? 2 : 4;
    size_t first_bad = (size_t)-1;
#pragma omp parallel for schedule(static) reduction(min : first_bad) if (nb > 1)
    for (size_t b = 0; b < nb; b++) {
        const size_t lo = b * B, hi = lo + B < n ? lo + B : n;
        const float s = quant_block_quantize(f, in, (const char *)x + lo * esz, hi - lo, (char *)q + payload_offset(f, lo));
        scales[b] = s;
        if (s == s) continue;
        size_t i = lo;
        while (QUANT_ABS_BITS(quant_bits_of(load(x, in, i))) < QUANT_NONFINITE_BITS) i++;
        if (i < first_bad) first_bad = i;
    }
    if (first_bad == (size_t)-1) return QUANT_OK;
    if (bad) {
        bad->block = first_bad / B;
        bad->index = first_bad;
        bad->value = load(x, in, first_bad);
    }
    return QUANT_NONFINITE;
}

// dst[k] = q_k * s for k < len (q: int8 values), or dst[k] += q_k * s when add.
static void dequant_chunk(const int8_t *q, size_t len, float s, float *dst, int add) {
    if (add) for (size_t k = 0; k < len; k++) dst[k] = adamw_add(dst[k], dequant_element(q[k], s));
    else for (size_t k = 0; k < len; k++) dst[k] = dequant_element(q[k], s);
}

// dst[k] = q_k * s for k < len (q: the payload of value 0), or dst[k] += q_k * s when add.
static void dequant_values(QuantFormat f, const void *q, float s, size_t len, float *dst, int add) {
    if (f == QUANT_INT8) { dequant_chunk((const int8_t *)q, len, s, dst, add); return; }
    int8_t q8[CHUNK];
    for (size_t c = 0; c < len; c += CHUNK) {
        const size_t cl = len - c < CHUNK ? len - c : CHUNK;
        const uint8_t *q4 = (const uint8_t *)q + c / 2;
        for (size_t j = 0; j < cl / 2; j++) {
            q8[2 * j] = (int8_t)quant_unpack_int4(q4[j], 0);
            q8[2 * j + 1] = (int8_t)quant_unpack_int4(q4[j], 1);
        }
        if (cl % 2) q8[cl - 1] = (int8_t)quant_unpack_int4(q4[cl / 2], 0);
        dequant_chunk(q8, cl, s, dst + c, add);
    }
}

void quant_block_dequantize(QuantFormat f, const void *q, float s, size_t len, QuantDtype out_type, void *out) {
    if (out_type == QUANT_F32) { dequant_values(f, q, s, len, (float *)out, 0); return; }
    float tmp[CHUNK];   // bf16: through a small fp32 buffer, rounded once
    uint16_t *o = (uint16_t *)out;
    for (size_t c = 0; c < len; c += CHUNK) {
        const size_t cl = len - c < CHUNK ? len - c : CHUNK;
        dequant_values(f, (const char *)q + payload_offset(f, c), s, cl, tmp, 0);
        for (size_t k = 0; k < cl; k++) o[c + k] = quant_f32_to_bf16(tmp[k]);
    }
}

void quant_block_dequant_add(QuantFormat f, const void *q, float s, size_t len, float *acc) {
    dequant_values(f, q, s, len, acc, 1);
}

int quant_dequantize(QuantFormat f, const void *q, const float *scales, size_t n, int block,
                     QuantDtype out_type, void *out) {
    if (quant_check_block(block, "quant_dequantize")) return QUANT_BAD_BLOCK;
    const size_t nb = quant_nblocks(n, block), B = (size_t)block, esz = out_type == QUANT_BF16 ? 2 : 4;
#pragma omp parallel for schedule(static) if (nb > 1)
    for (size_t b = 0; b < nb; b++) {
        const size_t lo = b * B, hi = lo + B < n ? lo + B : n;
        quant_block_dequantize(f, (const char *)q + payload_offset(f, lo), scales[b], hi - lo, out_type,
                               (char *)out + lo * esz);
    }
    return QUANT_OK;
}

int quant_dequant_reduce(QuantFormat f, const void *q, size_t q_stride, const float *scales,
                         size_t scale_stride, int nranks, size_t n, int block, float *out) {
    if (quant_check_block(block, "quant_dequant_reduce")) return QUANT_BAD_BLOCK;
    if (nranks < 1) {
        fprintf(stderr, "zero: quant_dequant_reduce: %d ranks (need at least 1)\n", nranks);
        return QUANT_BAD_BLOCK;
    }
    const size_t nb = quant_nblocks(n, block), B = (size_t)block;
#pragma omp parallel for schedule(static) if (nb > 1)
    for (size_t b = 0; b < nb; b++) {
        const size_t lo = b * B, hi = lo + B < n ? lo + B : n;
        // rank 0 writes the block, ranks 1..N-1 add to it: each element sums in rank order
        for (int r = 0; r < nranks; r++)
            dequant_values(f, (const char *)q + (size_t)r * q_stride + payload_offset(f, lo),
                           scales[(size_t)r * scale_stride + b], hi - lo, out + lo, r > 0);
    }
    return QUANT_OK;
}

void quant_report_bad(FILE *fp, const char *what, int rank, QuantFormat f, const QuantBad *bad) {
    fprintf(fp, "zero: rank %d: cannot quantize %s to %s: element %zu (block %zu) is %g; "
                "quantization refuses infinities and NaNs (check the loss scale and the data)\n",
            rank, what, quant_format_name(f), bad->index, bad->block, (double)bad->value);
}
