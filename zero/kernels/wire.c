// wire.c: the host kernels of wire.h, the reference that wire_cuda.cu matches bit for bit.
// A record is cut into pieces: its quantization blocks (INT formats) or RAW_PIECE values
// (RAW). Every kernel is one loop over (record, piece) pairs with OpenMP over the pairs;
// pieces are independent, so the thread count cannot change a bit. A block is quantized and
// read back by quant.c's block functions (quant_element.h's rules), and sums are fp32
// additions in record order, held for one piece in a per-thread buffer.
#include "wire.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "quant_element.h"

#ifdef __FAST_MATH__
#error "wire.c must build without -ffast-math: its sums and rounding rely on IEEE operations"
#endif

#define RAW_PIECE 4096     // values per piece of a RAW record
#define PAR_MIN 16384      // fewer values than this: threads cost more than they save

const char *zero_wire_name(ZeroWire w) {
    switch (w) {
    case ZERO_WIRE_RAW: return "raw";
    case ZERO_WIRE_INT8: return "int8";
    case ZERO_WIRE_INT4: return "int4";
    }
    return "unknown";
}

static size_t dtype_bytes(ZeroDType dt) { return dt == ZERO_F32 ? 4 : dt == ZERO_BF16 ? 2 : 1; }
static size_t round16(size_t bytes) { return (bytes + 15) / 16 * 16; }
static QuantFormat format_of(ZeroWire w) { return w == ZERO_WIRE_INT4 ? QUANT_INT4 : QUANT_INT8; }
static QuantDtype quant_dtype(ZeroDType dt) { return dt == ZERO_BF16 ? QUANT_BF16 : QUANT_F32; }

size_t zero_wire_payload_bytes(ZeroWire w, ZeroDType dt, size_t n) {
    if (w == ZERO_WIRE_RAW) return n * dtype_bytes(dt);
    return quant_bytes(format_of(w), n);
}

size_t zero_wire_scales_offset(ZeroWire w, ZeroDType dt, size_t n) { return round16(zero_wire_payload_bytes(w, dt, n)); }

size_t zero_wire_record_bytes(ZeroWire w, ZeroDType dt, size_t n, int block) {
    const size_t soff = zero_wire_scales_offset(w, dt, n);
    return w == ZERO_WIRE_RAW ? soff : soff + round16(4 * quant_nblocks(n, block));
}

int zero_wire_check(const char *fn, ZeroWire w, int block, ZeroDType dt, const void *rec) {
    if (w != ZERO_WIRE_RAW && w != ZERO_WIRE_INT8 && w != ZERO_WIRE_INT4)
        fprintf(stderr, "zero: %s: unknown wire format %d\n", fn, (int)w);
    else if (dt != ZERO_F32 && dt != ZERO_BF16)
        fprintf(stderr, "zero: %s: values of dtype %d (fp32 or bf16 only)\n", fn, (int)dt);
    else if (w != ZERO_WIRE_RAW && quant_check_block(block, fn))
        ;   // quant_check_block said why
    else if ((uintptr_t)rec % 4)
        fprintf(stderr, "zero: %s: records at %p are not 4-byte aligned (their scales are floats)\n", fn, rec);
    else
        return 0;
    return -1;
}

// A call no caller may make: say what was wrong and stop.
static void refuse(const char *fn, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
static void refuse(const char *fn, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "zero: %s: %s\n", fn, msg);
    abort();
}

// Where a record's pieces are: values per piece, pieces per record, record size.
typedef struct {
    ZeroWire w;
    QuantFormat f;
    ZeroDType dt;
    size_t esz, slice_n, piece, npieces, payload, soff, R;
} Layout;

static Layout layout_of(const char *fn, ZeroWire w, int block, ZeroDType dt, size_t slice_n, const void *rec) {
    if (zero_wire_check(fn, w, block, dt, rec)) abort();
    Layout L = {.w = w, .f = format_of(w), .dt = dt, .esz = dtype_bytes(dt), .slice_n = slice_n};
    L.piece = w == ZERO_WIRE_RAW ? RAW_PIECE : (size_t)block;
    L.npieces = (slice_n + L.piece - 1) / L.piece;
    L.payload = zero_wire_payload_bytes(w, dt, slice_n);
    L.soff = zero_wire_scales_offset(w, dt, slice_n);
    L.R = zero_wire_record_bytes(w, dt, slice_n, block);
    return L;
}

static size_t piece_len(const Layout *L, size_t k, size_t n) {
    const size_t lo = k * L->piece;
    return n - lo < L->piece ? n - lo : L->piece;
}
// Byte offset of value lo (the first of a piece) in a record's payload.
static size_t payload_at(const Layout *L, size_t lo) {
    if (L->w == ZERO_WIRE_RAW) return lo * L->esz;
    return L->w == ZERO_WIRE_INT4 ? lo / 2 : lo;
}
static float *scales_of(const Layout *L, const char *rec) { return (float *)(uintptr_t)(rec + L->soff); }

// Threads only for enough values and more than one piece.
static int parallel(size_t pairs, size_t values) { return pairs > 1 && values >= PAR_MIN; }

// A thread's fp32 sums of one piece of a slice of n values: on its stack up to STACK_PIECE
// values (RAW pieces and blocks up to that size, the default 2048 among them: no allocation
// per call), else from the heap, as many as the longest piece has (a block larger than the
// slice takes no more) (free_piece_buffer gives it back).
#define STACK_PIECE 4096
static float *piece_buffer(const Layout *L, size_t n, const char *fn, float *stack) {
    const size_t len = L->piece < n ? L->piece : n;
    if (len <= STACK_PIECE) return stack;
    float *tmp = malloc(len * sizeof(float));
    if (!tmp) refuse(fn, "out of host memory for a buffer of %zu values", len);
    return tmp;
}
static void free_piece_buffer(float *tmp, const float *stack) {
    if (tmp != stack) free(tmp);
}

// The bytes of a record that no piece writes (padding to 16) are zeros: records are the
// same bytes on every run and every backend.
static void zero_padding(const Layout *L, char *rec) {
    const size_t end = L->w == ZERO_WIRE_RAW ? L->soff : L->soff + 4 * L->npieces;
    memset(rec + L->payload, 0, L->soff - L->payload);
    memset(rec + end, 0, L->R - end);
}

// Writes x[0, len) (type in) as piece k of rec: quantized, copied, or (fp32 into a bf16
// RAW record) rounded to nearest even.
static void put_piece(const Layout *L, const void *x, QuantDtype in, size_t k, size_t len, char *rec) {
    const size_t lo = k * L->piece;
    char *dst = rec + payload_at(L, lo);
    if (L->w != ZERO_WIRE_RAW) {
        scales_of(L, rec)[k] = quant_block_quantize(L->f, in, x, len, dst);
    } else if (in == quant_dtype(L->dt)) {
        memcpy(dst, x, len * L->esz);
    } else {
        const float *v = x;
        uint16_t *h = (uint16_t *)(uintptr_t)dst;
        for (size_t i = 0; i < len; i++) h[i] = quant_f32_to_bf16(v[i]);
    }
}

// tmp[i] = x[i] (add: tmp[i] += x[i]) in fp32 for i < len, x fp32 or bf16.
static void raw_values(ZeroDType dt, const void *x, size_t len, float *tmp, int add) {
    if (dt == ZERO_F32) {
        const float *v = x;
        if (add) for (size_t i = 0; i < len; i++) tmp[i] = adamw_add(tmp[i], v[i]);
        else memcpy(tmp, v, len * sizeof(float));
    } else {
        const uint16_t *h = x;
        if (add) for (size_t i = 0; i < len; i++) tmp[i] = adamw_add(tmp[i], quant_bf16_to_f32(h[i]));
        else for (size_t i = 0; i < len; i++) tmp[i] = quant_bf16_to_f32(h[i]);
    }
}

// tmp[0, len) = ((v_0 + v_1) + ...) + v_{nrec-1} over piece k, v_r the values of the
// record at rec + r * stride.
static void sum_piece(const Layout *L, const char *rec, size_t stride, int nrec, size_t k, size_t len, float *tmp) {
    const size_t at = payload_at(L, k * L->piece);
    for (int r = 0; r < nrec; r++) {
        const char *p = rec + (size_t)r * stride;
        if (L->w == ZERO_WIRE_RAW) raw_values(L->dt, p + at, len, tmp, r > 0);
        else if (r == 0) quant_block_dequantize(L->f, p + at, scales_of(L, p)[k], len, QUANT_F32, tmp);
        else quant_block_dequant_add(L->f, p + at, scales_of(L, p)[k], len, tmp);
    }
}

void zero_wire_pack_cpu(ZeroWire w, int block, const void *src, ZeroDType dt, size_t slice_n, int nslices, int group,
                        void *rec) {
    const char *fn = "zero_wire_pack_cpu";
    const Layout L = layout_of(fn, w, block, dt, slice_n, rec);
    if (nslices < 0 || group < 1 || nslices % group)
        refuse(fn, "%d slices do not split into groups of %d", nslices, group);
    const size_t X = (size_t)group, Y = (size_t)(nslices / group), pairs = (size_t)nslices * L.npieces;
#pragma omp parallel for schedule(static) if (parallel(pairs, (size_t)nslices * slice_n))
    for (size_t t = 0; t < pairs; t++) {
        const size_t p = t / L.npieces, k = t % L.npieces, j = (p % Y) * X + p / Y;   // ZeRO++ eq. 1-2
        char *r = (char *)rec + p * L.R;
        put_piece(&L, (const char *)src + (j * slice_n + k * L.piece) * L.esz, quant_dtype(dt), k,
                  piece_len(&L, k, slice_n), r);
        if (k == 0) zero_padding(&L, r);
    }
}

void zero_wire_unpack_cpu(ZeroWire w, int block, const void *rec, size_t slice_n, int nslices, void *out,
                          ZeroDType dt) {
    const Layout L = layout_of("zero_wire_unpack_cpu", w, block, dt, slice_n, rec);
    const size_t pairs = (size_t)(nslices > 0 ? nslices : 0) * L.npieces;
#pragma omp parallel for schedule(static) if (parallel(pairs, pairs * L.piece))
    for (size_t t = 0; t < pairs; t++) {
        const size_t p = t / L.npieces, k = t % L.npieces, lo = k * L.piece, len = piece_len(&L, k, slice_n);
        const char *r = (const char *)rec + p * L.R;
        char *o = (char *)out + (p * slice_n + lo) * L.esz;
        if (w == ZERO_WIRE_RAW) memcpy(o, r + payload_at(&L, lo), len * L.esz);
        else quant_block_dequantize(L.f, r + payload_at(&L, lo), scales_of(&L, r)[k], len, quant_dtype(dt), o);
    }
}

void zero_wire_reduce_pack_cpu(ZeroWire w, int block, const void *in, ZeroDType dt, size_t slice_n, int ngroups,
                               int nout, void *out) {
    const char *fn = "zero_wire_reduce_pack_cpu";
    const Layout L = layout_of(fn, w, block, dt, slice_n, in);
    if (zero_wire_check(fn, w, block, dt, out)) abort();
    if (ngroups < 1 || nout < 0) refuse(fn, "%d runs of %d records (need at least one run)", ngroups, nout);
    const size_t pairs = (size_t)nout * L.npieces, run = (size_t)nout * L.R;
#pragma omp parallel if (parallel(pairs, pairs * L.piece * (size_t)ngroups))
    {
        float stack[STACK_PIECE];
        float *tmp = pairs ? piece_buffer(&L, slice_n, fn, stack) : NULL;
#pragma omp for schedule(static)
        for (size_t t = 0; t < pairs; t++) {
            const size_t p = t / L.npieces, k = t % L.npieces, len = piece_len(&L, k, slice_n);
            char *o = (char *)out + p * L.R;
            sum_piece(&L, (const char *)in + p * L.R, run, ngroups, k, len, tmp);
            put_piece(&L, tmp, QUANT_F32, k, len, o);
            if (k == 0) zero_padding(&L, o);
        }
        free_piece_buffer(tmp, stack);
    }
}

void zero_wire_reduce_cpu(ZeroWire w, int block, const void *rec, ZeroDType dt, size_t slice_n, int nrec, size_t n,
                          float *acc, int accumulate) {
    const char *fn = "zero_wire_reduce_cpu";
    const Layout L = layout_of(fn, w, block, dt, slice_n, rec);
    if (n > slice_n) refuse(fn, "%zu values asked of records of %zu", n, slice_n);
    if (nrec <= 0) return;   // nothing to add (reduce_slices likewise)
    const size_t pieces = (n + L.piece - 1) / L.piece;
#pragma omp parallel if (parallel(pieces, n * (size_t)nrec))
    {
        float stack[STACK_PIECE];
        float *tmp = pieces ? piece_buffer(&L, n, fn, stack) : NULL;
#pragma omp for schedule(static)
        for (size_t k = 0; k < pieces; k++) {
            const size_t len = piece_len(&L, k, n);
            float *a = acc + k * L.piece;
            sum_piece(&L, rec, L.R, nrec, k, len, tmp);
            if (accumulate) for (size_t i = 0; i < len; i++) a[i] = adamw_add(a[i], tmp[i]);
            else memcpy(a, tmp, len * sizeof(float));
        }
        free_piece_buffer(tmp, stack);
    }
}
