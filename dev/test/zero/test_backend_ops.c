/*
test_backend_ops.c: every kernel of zero/backend.h's ZeroBackend against its C reference,
on every backend of the build, from one table (in the manner of ggml's test-backend-ops).
Each row of `ops` is a kernel: its number of cases, a case generator (inputs, a pure
function of the case number), the C reference written here (or, for the wire records,
wire_ref.h's, built from quant.c's tensor calls), how the backend is called, and a
tolerance in units in the last place (0 everywhere: backend.h's contract is the same bits
on every backend; a NaN must meet a NaN, whatever its payload, since the GPU makes
canonical NaNs).

Kernels: memset0, copy, reduce_slices, sum_slices, adamw, refresh (bf16 stochastic and
fp32), sum_squares, their many-range forms (adamw_parts, refresh_parts, sum_squares_parts, reduce_slices_parts:
the host backend through zero_adamw_parts' one-range loop), wire_pack, wire_unpack, wire_reduce_pack, wire_reduce. Inputs reach a
backend through its own alloc and copy (device memory, staged in its ZERO_MEM_HOST
memory) at byte offsets that break vector alignment, so both the vector and the scalar
paths run.

Builds (the same source):
  host            build/tests/test_backend_ops (make; make test runs it)
  host + CUDA     build/gpu_backend_ops (-DZERO_TEST_CUDA; make cuda): without a GPU it
                  prints "SKIP: no CUDA device" and exits 0
  host + emulated build/emu/gpu_backend_ops (make emu): the CUDA backend on the emulated device
One line per kernel, backend and case; then "[  PASSED  ] N test(s)." (and "[  FAILED  ]
N test(s)." when any failed) and "N passed, N failed". Arguments: kernel names to run
only those. ZERO_GPU_TEST_SMALL=1 leaves out the 1 GiB norm (two passes of the CUDA
sum of squares; never run on the host backend).
*/
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../zero/backend.h"
#include "../../../zero/comm.h"
#include "../../../zero/host/backend_host.h"
#ifdef ZERO_TEST_CUDA
#include <cuda_runtime_api.h>

#include "../../../zero/cuda/backend_cuda.h"
#endif
#include "quant_cases.h"
#include "wire_ref.h"

// ---------------------------------------------------------------- a case

enum { MAXARG = 4 };
typedef enum { CMP_BYTES, CMP_F32, CMP_BF16, CMP_RECORDS } Cmp;

// One buffer argument of a kernel: its bytes before the call (h), where it starts in the
// backend's allocation (off), and, for an output, what the reference left there (want).
typedef struct {
    void *h, *want;
    size_t bytes, off;
    Cmp cmp;
} Arg;

typedef struct {
    char label[200];
    Arg a[MAXARG];
    int na;
    // the kernel's scalar arguments
    ZeroDType dt;
    ZeroWire w;
    int block, nslices, group, ngroups, nout, accumulate, decay, t, nsteps, inplace;
    size_t n, stride, slice_n, m;
    uint64_t seed, gidx0;
    AdamWParams steps[3];
    // sum_squares: nres results, result j over x[start[j], start[j] + len[j]); the *_parts
    // kernels: nparts ranges [start[j], start[j] + len[j])
    int nres, nparts, large;
    size_t *start, *len;
    double *res_want;
} Case;

typedef struct {
    const char *name;
    int ncases;
    void (*gen)(int c, Case *k);                      // inputs and scalar arguments of case c
    void (*ref)(Case *k);                             // fills want of every output
    void (*call)(const ZeroBackend *b, const Case *k, void *const *d, double *res, ZeroStream *s);
    unsigned ulps;                                    // tolerance on floats, units in the last place
} Op;

static void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) { fprintf(stderr, "test_backend_ops: out of memory (%zu bytes)\n", bytes); exit(1); }
    return p;
}
static void *dup_bytes(const void *p, size_t bytes) { return memcpy(xmalloc(bytes), p, bytes); }

// Adds an argument of `bytes` at byte offset `off`; returns its host bytes to fill.
static void *arg(Case *k, size_t bytes, size_t off, Cmp cmp) {
    Arg *a = &k->a[k->na++];
    a->h = xmalloc(bytes);
    memset(a->h, 0xa5, bytes);   // poison: an output must overwrite what was there
    a->want = NULL;
    a->bytes = bytes;
    a->off = off;
    a->cmp = cmp;
    return a->h;
}
// The reference's output buffer of argument i: a copy of its input, to change in place.
static void *want(Case *k, int i) { return k->a[i].want = dup_bytes(k->a[i].h, k->a[i].bytes); }

static void case_free(Case *k) {
    for (int i = 0; i < k->na; i++) { free(k->a[i].h); free(k->a[i].want); }
    free(k->start); free(k->len); free(k->res_want);
}

static const char *dt_name(ZeroDType dt) { return dt == ZERO_BF16 ? "bf16" : "fp32"; }
static float bf16f(uint16_t h) { return ref_float((uint32_t)h << 16); }
static uint16_t to_bf16(float v) { return (uint16_t)(ref_bits(v) >> 16); }

// Awkward floats: normals over many scales, subnormals, zeros of both signs, huge values.
static float odd_float(uint64_t seed, uint64_t i) {
    uint32_t r = rng_u32(seed, 77, i);
    switch (r % 16) {
    case 0: return ref_float(r & 0x807fffffu);                   // subnormal (or a zero)
    case 1: return (r & 16) ? -0.0f : 0.0f;
    case 2: return rng_normal(seed, 78, i) * 1e30f;
    case 3: return rng_normal(seed, 78, i) * 1e-30f;
    case 4: {   // exactly representable in bf16 (a NaN pattern becomes 1)
        float b = bf16f((uint16_t)(r >> 16));
        return isnan(b) ? 1.0f : b;
    }
    default: return rng_normal(seed, 78, i) * ((r >> 8) % 3 == 0 ? 1e3f : 1e-2f);
    }
}

// Lengths around the vector width, a block of the norm and many blocks.
static const size_t lens[] = {1, 3, 4, 17, 4096 + 5, 100003};
#define NLENS ((int)(sizeof lens / sizeof lens[0]))

// ---------------------------------------------------------------- memset0, copy

static const size_t byte_lens[] = {1, 3, 64, 4099, 100003};
#define NBYTE_LENS ((int)(sizeof byte_lens / sizeof byte_lens[0]))

static void gen_bytes(int c, Case *k) {
    const size_t n = byte_lens[c / 2], off = (size_t)(c % 2);
    snprintf(k->label, sizeof k->label, "%zu bytes, offset %zu", n, off);
    k->n = n;
    uint8_t *src = arg(k, n, off, CMP_BYTES);
    for (size_t i = 0; i < n; i++) src[i] = (uint8_t)rng_u32(c, 1, i);
    arg(k, n, 1 - off, CMP_BYTES);   // copy's destination
}
static void ref_memset0(Case *k) { memset(want(k, 0), 0, k->n); }
static void call_memset0(const ZeroBackend *b, const Case *k, void *const *d, double *res, ZeroStream *s) {
    (void)res;
    b->memset0(b, d[0], k->n, s);
}
static void ref_copy(Case *k) { memcpy(want(k, 1), k->a[0].h, k->n); }
static void call_copy(const ZeroBackend *b, const Case *k, void *const *d, double *res, ZeroStream *s) {
    (void)res;
    b->copy(b, d[1], ZERO_MEM_DEVICE, d[0], ZERO_MEM_DEVICE, k->n, s);
}

// ---------------------------------------------------------------- reduce_slices, sum_slices

// lens x offsets x slices {1, 3, 5} x {fp32, bf16} x {stride padded to 16, odd stride}
static void gen_slices(int c, Case *k) {
    const int layout = c % 2, dti = c / 2 % 2, qi = c / 4 % 3, off = c / 12 % 2, li = c / 24;
    const size_t n = lens[li], es = dti ? 2 : 4;
    k->dt = dti ? ZERO_BF16 : ZERO_F32;
    k->nslices = 1 + 2 * qi;
    k->n = n;
    k->stride = layout == 0 ? (n + 15) / 16 * 16 : n + 3 - (size_t)dti * 2;
    k->seed = 20 + (uint64_t)c;
    snprintf(k->label, sizeof k->label, "%s, %d slices of %zu, stride %zu, offset %d", dt_name(k->dt), k->nslices, n,
             k->stride, off);
    const size_t srcn = (size_t)k->nslices * k->stride;
    uint8_t *src = arg(k, srcn * es, (size_t)off * es * (layout ? 1 : 16), CMP_BYTES);
    for (size_t i = 0; i < srcn; i++) {
        // order-sensitive magnitudes: 1e8 next to 1 loses the 1 in one order, not another
        float v = (i % 5 == 0 ? 1e8f : 1.0f) * (rng_normal(k->seed, 4, i) + 0.5f);
        if (i % 11 == 0) v = odd_float(k->seed, i);
        if (isnan(v) || isinf(v)) v = 2.0f;
        if (dti) ((uint16_t *)(void *)src)[i] = to_bf16(v);
        else ((float *)(void *)src)[i] = v;
    }
    float *acc = arg(k, n * 4, (size_t)off * 4, CMP_F32);
    for (size_t i = 0; i < n; i++) acc[i] = rng_normal(k->seed, 5, i);
}
// out[i] (+)= ((s_0[i] + s_1[i]) + ...) + s_{q-1}[i] in fp32
static void ref_slices(Case *k, int accumulate) {
    float *out = want(k, 1);
    for (size_t i = 0; i < k->n; i++) {
        float sum = 0.0f;
        for (int q = 0; q < k->nslices; q++) {
            const size_t j = (size_t)q * k->stride + i;
            const float v = k->dt == ZERO_BF16 ? bf16f(((const uint16_t *)k->a[0].h)[j]) : ((const float *)k->a[0].h)[j];
            sum = q == 0 ? v : sum + v;
        }
        out[i] = accumulate ? out[i] + sum : sum;
    }
}
static void ref_reduce_slices(Case *k) { ref_slices(k, 1); }
static void ref_sum_slices(Case *k) { ref_slices(k, 0); }
static void call_reduce_slices(const ZeroBackend *b, const Case *k, void *const *d, double *res, ZeroStream *s) {
    (void)res;
    b->reduce_slices(b, d[1], d[0], k->stride, k->nslices, k->n, k->dt, s);
}
static void call_sum_slices(const ZeroBackend *b, const Case *k, void *const *d, double *res, ZeroStream *s) {
    (void)res;
    b->sum_slices(b, d[1], d[0], k->stride, k->nslices, k->n, k->dt, s);
}

// ---------------------------------------------------------------- adamw

// AdamW's inputs of n elements at float offset off (both forms), and three steps with
// three parameter sets
static void adamw_inputs(Case *k, size_t n, int off) {
    k->nsteps = 3;
    k->steps[0] = adamw_params(1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 1);
    k->steps[1] = adamw_params(3e-4f, 0.9f, 0.999f, 1e-6f, 0.01f, 0.37f, 1000);
    k->steps[2] = adamw_params(1.0f, 0.5f, 0.5f, 1e-30f, 0.0f, 3.0f, 7);
    float *p = arg(k, n * 4, (size_t)off * 4, CMP_F32), *g = arg(k, n * 4, (size_t)off * 4, CMP_BYTES);
    float *m = arg(k, n * 4, (size_t)off * 4, CMP_F32), *v = arg(k, n * 4, (size_t)off * 4, CMP_F32);
    for (size_t i = 0; i < n; i++) {
        p[i] = rng_normal(k->seed, 1, i) * 0.1f;
        g[i] = i % 13 == 0 ? 0.0f : odd_float(k->seed, i);
        m[i] = rng_normal(k->seed, 2, i) * 1e-3f;
        v[i] = rng_uniform(k->seed, 3, i) * 1e-4f;
    }
}

// lens x offsets: three steps with three parameter sets; decay alternates
static void gen_adamw(int c, Case *k) {
    const int off = c % 2, li = c / 2;
    const size_t n = lens[li];
    k->n = n;
    k->decay = (li + off) & 1;
    k->seed = 10 + (uint64_t)li;
    snprintf(k->label, sizeof k->label, "n %zu, offset %d, decay %d, 3 steps", n, off, k->decay);
    adamw_inputs(k, n, off);
}
static void ref_adamw(Case *k) {
    float *p = want(k, 0), *m = want(k, 2), *v = want(k, 3);
    const float *g = k->a[1].h;
    for (int t = 0; t < k->nsteps; t++)
        for (size_t i = 0; i < k->n; i++) p[i] = adamw_element(p[i], g[i], &m[i], &v[i], &k->steps[t], k->decay);
}
static void call_adamw(const ZeroBackend *b, const Case *k, void *const *d, double *res, ZeroStream *s) {
    (void)res;
    for (int t = 0; t < k->nsteps; t++) b->adamw(b, d[0], d[1], d[2], d[3], k->n, &k->steps[t], k->decay, s);
}

// ---------------------------------------------------------------- refresh

// lens x offsets x {bf16, fp32 copy}; then a step count in the high bits; then fp32 in place
#define REFRESH_GRID (NLENS * 2 * 2)
static void gen_refresh(int c, Case *k) {
    static const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, 3.4028235e38f, -3.4028235e38f, 1.0f, -0.0f};
    const int grid = c < REFRESH_GRID, off = c % 2, li = grid ? c / 4 : 0;
    k->dt = grid && c / 2 % 2 ? ZERO_F32 : ZERO_BF16;
    k->inplace = c == REFRESH_GRID + 1;
    if (k->inplace) k->dt = ZERO_F32;
    k->n = grid ? lens[li] : (size_t)1 << 20;
    k->seed = 7 + (uint64_t)li;
    k->t = grid ? li * 1000 + 1 : 1 << 20;
    k->gidx0 = grid ? (off ? ((uint64_t)1 << 39) + 5 : (uint64_t)li * 12345) : 77;
    snprintf(k->label, sizeof k->label, "%s%s, n %zu, offset %d, t %d, gidx0 %llu", dt_name(k->dt),
             k->inplace ? " in place" : "", k->n, off, k->t, (unsigned long long)k->gidx0);
    float *x = arg(k, k->n * 4, (size_t)off * 4, k->inplace ? CMP_F32 : CMP_BYTES);
    for (size_t i = 0; i < k->n; i++) x[i] = i % 97 < 8 ? specials[i % 97] : odd_float(k->seed, i);
    if (!k->inplace) arg(k, k->n * ref_esz(k->dt), (size_t)off * ref_esz(k->dt), k->dt == ZERO_BF16 ? CMP_BF16 : CMP_BYTES);
}
static uint16_t ref_round_bf16(float x, uint64_t seed, int t, uint64_t gidx) {
    const uint32_t u = ref_bits(x);
    const uint32_t bits = rng_u32(seed, RNG_STREAM_ROUNDING, (uint64_t)t << 40 | gidx);
    return (u & 0x7f800000u) == 0x7f800000u ? (uint16_t)((u >> 16) | ((u & 0x7fffffu) ? 0x40 : 0))
                                            : (uint16_t)((u + (bits & 0xffffu)) >> 16);
}
// bf16: (u + (bits & 0xFFFF)) >> 16 with bits = rng_u32(seed, ROUNDING, t << 40 | gidx), NaN
// and infinity truncated (NaN stays NaN); fp32: a copy (in place: nothing changes)
static void ref_refresh(Case *k) {
    const float *x = k->a[0].h;
    if (k->inplace) { want(k, 0); return; }
    void *out = want(k, 1);
    for (size_t i = 0; i < k->n; i++) {
        if (k->dt == ZERO_F32) ((float *)out)[i] = x[i];
        else ((uint16_t *)out)[i] = ref_round_bf16(x[i], k->seed, k->t, k->gidx0 + i);
    }
}
static void call_refresh(const ZeroBackend *b, const Case *k, void *const *d, double *res, ZeroStream *s) {
    (void)res;
    b->refresh(b, k->inplace ? d[0] : d[1], k->dt, d[0], k->n, k->seed, k->t, k->gidx0, s);
}

// ---------------------------------------------------------------- sum_squares

static const size_t sumsq_lens[] = {0, 1, 31, 33, 4095, 4096, 4097, 32 * 4096, 32 * 4096 + 1, 40 * 4096 + 76};
#define NSUMSQ_LENS ((int)(sizeof sumsq_lens / sizeof sumsq_lens[0]))
enum { SUMSQ_MANY = 5000 };   // more results than a CUDA stream holds before it syncs

// Whether this run takes the 1 GiB case (a CUDA backend, no ZERO_GPU_TEST_SMALL).
static int large_ok;

// lens x offsets {0, 1}; an infinity; a NaN; 5000 norms before one stream_sync; 1 GiB
static void gen_sumsq(int c, Case *k) {
    const int grid = c < 2 * NSUMSQ_LENS, extra = c - 2 * NSUMSQ_LENS;
    const size_t n = grid ? sumsq_lens[c / 2] : extra == 3 ? (size_t)65536 * 4096 + 3 * 4096 + 11 : 40 * 4096 + 77;
    k->large = extra == 3;
    if (k->large && !large_ok) {
        snprintf(k->label, sizeof k->label, "n %zu, two passes (1 GiB): left out (host only, or ZERO_GPU_TEST_SMALL)", n);
        return;
    }
    k->nres = extra == 2 ? SUMSQ_MANY : 1;
    k->start = calloc((size_t)k->nres, sizeof *k->start);
    k->len = calloc((size_t)k->nres, sizeof *k->len);
    k->res_want = calloc((size_t)k->nres, sizeof *k->res_want);
    if (!k->start || !k->len || !k->res_want) { fprintf(stderr, "test_backend_ops: out of memory\n"); exit(1); }
    float *x = arg(k, (n + 1) * 4, 0, CMP_BYTES);
    for (size_t i = 0; i <= n; i++)
        x[i] = k->large ? (float)((i * 2654435761u) % 2001) * 1e-3f - 1.0f : odd_float(61, i);
    for (int j = 0; j < k->nres; j++) {
        k->start[j] = extra == 2 ? 10000 + (size_t)j : (size_t)(grid ? c % 2 : 0);
        k->len[j] = extra == 2 ? 1 + (size_t)j * 7 % 9000 : n;
    }
    if (extra == 0) x[5000] = INFINITY;
    if (extra == 1) x[5000] = NAN;
    const char *what[] = {"an infinity", "a NaN", "5000 norms before one stream_sync", "two passes (1 GiB)"};
    if (grid) snprintf(k->label, sizeof k->label, "n %zu, offset %d", n, c % 2);
    else snprintf(k->label, sizeof k->label, "n %zu, %s", n, what[extra]);
}
// in double: blocks of ZERO_SUMSQ_BLOCK, each summed left to right, the block sums left to right
static void ref_sumsq(Case *k) {
    const float *x = k->a[0].h;
    for (int j = 0; j < k->nres; j++) {
        double total = 0.0;
        for (size_t lo = 0; lo < k->len[j]; lo += ZERO_SUMSQ_BLOCK) {
            const size_t hi = lo + ZERO_SUMSQ_BLOCK < k->len[j] ? lo + ZERO_SUMSQ_BLOCK : k->len[j];
            double sum = 0.0;
            for (size_t i = lo; i < hi; i++) sum += (double)x[k->start[j] + i] * (double)x[k->start[j] + i];
            total += sum;
        }
        k->res_want[j] = total;
    }
}
static void call_sumsq(const ZeroBackend *b, const Case *k, void *const *d, double *res, ZeroStream *s) {
    for (int j = 0; j < k->nres; j++) b->sum_squares(b, (const float *)d[0] + k->start[j], k->len[j], &res[j], s);
}

// ---------------------------------------------------------------- many ranges (*_parts)

// Ranges of one buffer, in the order of the call: lengths around the vector width, a
// block of the norm, empty ones, gaps of 0-3 elements (so their alignments vary), handed
// over out of order; layout 1 has more ranges than one CUDA launch takes (48), layout 2 a
// range of many blocks among them. Returns the buffer's length.
static const size_t part_lens[] = {1, 3, 4, 5, 0, 7, 1023, 1024, 1025, 4096 + 5, 12, 2, 33};
#define NPART_LENS ((int)(sizeof part_lens / sizeof part_lens[0]))
static size_t gen_ranges(Case *k, int layout) {
    const int np = layout == 0 ? 5 : layout == 1 ? 130 : 60;
    k->nparts = np;
    k->start = calloc((size_t)np, sizeof *k->start);
    k->len = calloc((size_t)np, sizeof *k->len);
    if (!k->start || !k->len) { fprintf(stderr, "test_backend_ops: out of memory\n"); exit(1); }
    size_t pos = 0;
    for (int j = 0; j < np; j++) {
        const int r = (j * 37) % np;   // 37 is prime to every np: a permutation
        pos += (size_t)(j % 4);
        k->start[r] = pos;
        k->len[r] = layout == 2 && j == 17 ? 300001 : part_lens[(j * 7 + layout) % NPART_LENS];
        pos += k->len[r];
    }
    return pos + 3;
}
static int part_decay(const Case *k, int j) { return ((uint64_t)j * 5 + k->seed) % 3 != 0; }
static uint64_t part_gidx0(int j) { return ((uint64_t)j << 33) + 12345u * (uint64_t)j; }

// layouts x offsets {0, 1}: three steps as adamw's cases
static void gen_adamw_parts(int c, Case *k) {
    const int off = c % 2, layout = c / 2;
    k->seed = 40 + (uint64_t)c;
    const size_t n = gen_ranges(k, layout);
    k->n = n;
    snprintf(k->label, sizeof k->label, "%d ranges over %zu, offset %d, 3 steps", k->nparts, n, off);
    adamw_inputs(k, n, off);
}
// each range as adamw's reference with its own decay; the gaps untouched
static void ref_adamw_parts(Case *k) {
    float *p = want(k, 0), *m = want(k, 2), *v = want(k, 3);
    const float *g = k->a[1].h;
    for (int t = 0; t < k->nsteps; t++)
        for (int j = 0; j < k->nparts; j++)
            for (size_t i = k->start[j]; i < k->start[j] + k->len[j]; i++)
                p[i] = adamw_element(p[i], g[i], &m[i], &v[i], &k->steps[t], part_decay(k, j));
}
static void call_adamw_parts(const ZeroBackend *b, const Case *k, void *const *d, double *res, ZeroStream *s) {
    (void)res;
    const int np = k->nparts;
    ZeroAdamwPart *parts = xmalloc((size_t)np * sizeof *parts);
    for (int j = 0; j < np; j++) {
        const size_t o = k->start[j];
        parts[j] = (ZeroAdamwPart){(float *)d[0] + o, (const float *)d[1] + o, (float *)d[2] + o, (float *)d[3] + o,
                                   k->len[j], part_decay(k, j)};
    }
    for (int t = 0; t < k->nsteps; t++) zero_adamw_parts(b, parts, np, &k->steps[t], s);
    free(parts);
}

// layouts x offsets {0, 1} in bf16, then each layout's fp32 copy
static void gen_refresh_parts(int c, Case *k) {
    const int off = c < 6 ? c % 2 : 1, layout = c < 6 ? c / 2 : c - 6;
    k->dt = c < 6 ? ZERO_BF16 : ZERO_F32;
    k->seed = 50 + (uint64_t)c;
    k->t = 1000 * c + 3;
    const size_t n = gen_ranges(k, layout);
    k->n = n;
    snprintf(k->label, sizeof k->label, "%s, %d ranges over %zu, offset %d, t %d", dt_name(k->dt), k->nparts, n, off, k->t);
    float *x = arg(k, n * 4, (size_t)off * 4, CMP_BYTES);
    for (size_t i = 0; i < n; i++) x[i] = odd_float(k->seed, i);
    arg(k, n * ref_esz(k->dt), (size_t)off * ref_esz(k->dt), k->dt == ZERO_BF16 ? CMP_BF16 : CMP_BYTES);
}
static void ref_refresh_parts(Case *k) {
    const float *x = k->a[0].h;
    void *out = want(k, 1);
    for (int j = 0; j < k->nparts; j++)
        for (size_t i = k->start[j]; i < k->start[j] + k->len[j]; i++) {
            if (k->dt == ZERO_F32) ((float *)out)[i] = x[i];
            else ((uint16_t *)out)[i] = ref_round_bf16(x[i], k->seed, k->t, part_gidx0(j) + (i - k->start[j]));
        }
}
static void call_refresh_parts(const ZeroBackend *b, const Case *k, void *const *d, double *res, ZeroStream *s) {
    (void)res;
    const int np = k->nparts;
    ZeroRefreshPart *parts = xmalloc((size_t)np * sizeof *parts);
    for (int j = 0; j < np; j++)
        parts[j] = (ZeroRefreshPart){(char *)d[1] + k->start[j] * ref_esz(k->dt), (const float *)d[0] + k->start[j],
                                     k->len[j], part_gidx0(j)};
    zero_refresh_parts(b, parts, np, k->dt, k->seed, k->t, s);
    free(parts);
}

// layouts x offsets x {fp32, bf16} x {1, 3 slices} x {stride padded to 16, odd stride}
static void gen_reduce_parts(int c, Case *k) {
    const int off = c % 2, dti = c / 2 % 2, qi = c / 4 % 2, odd = c / 8 % 2, layout = c / 16;
    const size_t es = dti ? 2 : 4;
    k->dt = dti ? ZERO_BF16 : ZERO_F32;
    k->nslices = 1 + 2 * qi;
    k->seed = 60 + (uint64_t)c;
    const size_t n = gen_ranges(k, layout);
    k->n = n;
    k->stride = odd ? n + 3 - (size_t)dti * 2 : (n + 15) / 16 * 16;
    snprintf(k->label, sizeof k->label, "%s, %d ranges over %zu, %d slices, stride %zu, offset %d", dt_name(k->dt),
             k->nparts, n, k->nslices, k->stride, off);
    const size_t srcn = (size_t)k->nslices * k->stride;
    uint8_t *src = arg(k, srcn * es, (size_t)off * es, CMP_BYTES);
    for (size_t i = 0; i < srcn; i++) {
        float v = (i % 5 == 0 ? 1e8f : 1.0f) * (rng_normal(k->seed, 4, i) + 0.5f);
        if (dti) ((uint16_t *)(void *)src)[i] = to_bf16(v);
        else ((float *)(void *)src)[i] = v;
    }
    float *acc = arg(k, n * 4, (size_t)off * 4, CMP_F32);
    for (size_t i = 0; i < n; i++) acc[i] = rng_normal(k->seed, 5, i);
}
// each range's elements as reduce_slices's reference; the gaps untouched
static void ref_reduce_parts(Case *k) {
    float *out = want(k, 1);
    for (int j = 0; j < k->nparts; j++)
        for (size_t i = k->start[j]; i < k->start[j] + k->len[j]; i++) {
            float sum = 0.0f;
            for (int q = 0; q < k->nslices; q++) {
                const size_t e = (size_t)q * k->stride + i;
                const float v = k->dt == ZERO_BF16 ? bf16f(((const uint16_t *)k->a[0].h)[e]) : ((const float *)k->a[0].h)[e];
                sum = q == 0 ? v : sum + v;
            }
            out[i] += sum;
        }
}
static void call_reduce_parts(const ZeroBackend *b, const Case *k, void *const *d, double *res, ZeroStream *s) {
    (void)res;
    ZeroReducePart *parts = xmalloc((size_t)k->nparts * sizeof *parts);
    for (int j = 0; j < k->nparts; j++)
        parts[j] = (ZeroReducePart){(float *)d[1] + k->start[j], (const char *)d[0] + k->start[j] * ref_esz(k->dt),
                                    k->stride, k->len[j]};
    zero_reduce_slices_parts(b, parts, k->nparts, k->nslices, k->dt, s);
    free(parts);
}

// sum_squares's cases that differ for many ranges (one range: odd offsets, a norm block and
// one over, several passes of the warp's tiles, non-finite values; 5000 ranges: many
// launches and more results than a stream holds), each range's result from one call
static void gen_sumsq_parts(int c, Case *k) {
    static const int picks[] = {3, 13, 17, 19, 2 * NSUMSQ_LENS, 2 * NSUMSQ_LENS + 1, 2 * NSUMSQ_LENS + 2};
    gen_sumsq(picks[c], k);
}
// sum_squares's cases, each range's result from one many-range call
static void call_sumsq_parts(const ZeroBackend *b, const Case *k, void *const *d, double *res, ZeroStream *s) {
    ZeroSumsqPart *parts = xmalloc((size_t)(k->nres ? k->nres : 1) * sizeof *parts);
    for (int j = 0; j < k->nres; j++) parts[j] = (ZeroSumsqPart){(const float *)d[0] + k->start[j], k->len[j], &res[j]};
    zero_sum_squares_parts(b, parts, k->nres, s);
    free(parts);
}

// ---------------------------------------------------------------- wire kernels

// Shapes: format x dtype x block x slice length, and for each shape `variants` cases.
static const ZeroWire wires[] = {ZERO_WIRE_RAW, ZERO_WIRE_INT8, ZERO_WIRE_INT4};
static const int wire_blocks[] = {2, 8, 36, 64, 2048, 6144};   // 36: vectors of 4, not 8; 6144: past registers
#define NWBLOCKS ((int)(sizeof wire_blocks / sizeof wire_blocks[0]))
#define WIRE_SHAPES (3 * 2 * NWBLOCKS * 5)
// (slices, group): group 1 (identity), X=2 Y=2, X=4 Y=2, X=3 Y=5, one group of all.
static const int groupings[][2] = {{1, 1}, {4, 1}, {4, 2}, {8, 4}, {15, 3}, {6, 6}};
#define NGROUPINGS ((int)(sizeof groupings / sizeof groupings[0]))
static const int runs[] = {1, 2, 3, 4, 8};          // reduce_pack's runs
#define NRUNS ((int)(sizeof runs / sizeof runs[0]))
static const int recs[] = {1, 2, 5, 8};             // reduce's records
#define NRECS ((int)(sizeof recs / sizeof recs[0]))

// Case c's shape (and variant c % variants); the slice lengths around the block.
static int wire_shape(int c, int variants, Case *k) {
    int s = c / variants;
    k->w = wires[s % 3];
    s /= 3;
    k->dt = s % 2 ? ZERO_BF16 : ZERO_F32;
    s /= 2;
    k->block = wire_blocks[s % NWBLOCKS];
    s /= NWBLOCKS;
    // many blocks (40 and more of the small ones: past one GPU block's span), a partial last block
    const size_t B = (size_t)k->block, wlens[] = {1, B - 1, B, 3 * B + 1, B > 64 ? 5 * B + 3 : 40 * B + 8};
    k->slice_n = wlens[s];
    k->seed = 300 + (uint64_t)c;
    return c % variants;
}
// nslices slices of slice_n values (slice j from quant_cases.h's case j % QCASE_COUNT), at
// an offset of one value when odd; nonfinite: a NaN and an infinity planted.
static void wire_slices(Case *k, int nslices, int odd, int nonfinite) {
    const size_t n = k->slice_n, e = ref_esz(k->dt), total = (size_t)nslices * n;
    uint8_t *x = arg(k, total * e, odd ? e : 0, CMP_BYTES);
    for (int j = 0; j < nslices; j++) {
        void *sl = x + (size_t)j * n * e;
        if (k->dt == ZERO_BF16) quant_case_fill_bf16(j % QCASE_COUNT, k->seed + (uint64_t)j, sl, n, k->block);
        else quant_case_fill(j % QCASE_COUNT, k->seed + (uint64_t)j, sl, n, k->block);
    }
    if (nonfinite && n > 2) {
        if (k->dt == ZERO_BF16) { ((uint16_t *)(void *)x)[n / 2] = 0x7fc0; ((uint16_t *)(void *)x)[total - 1] = 0xff80; }
        else { ((float *)(void *)x)[n / 2] = NAN; ((float *)(void *)x)[total - 1] = -INFINITY; }
    }
}
static size_t rec_bytes(const Case *k) { return ref_record(k->w, k->dt, k->slice_n, k->block); }
// nrec records made by the reference from fresh slices, 4 bytes into the allocation when odd
// (aligned for the scales, not for vectors)
static void wire_records(Case *k, int nrec, int odd, int nonfinite) {
    wire_slices(k, nrec, 0, nonfinite);
    const size_t R = rec_bytes(k), e = ref_esz(k->dt);
    uint8_t *x = k->a[--k->na].h;   // the slices make way for their records
    uint8_t *rec = arg(k, (size_t)nrec * R, odd ? 4 : 0, CMP_BYTES);
    for (int r = 0; r < nrec; r++)
        ref_pack_one(k->w, k->dt, k->block, x + (size_t)r * k->slice_n * e, k->slice_n, rec + (size_t)r * R);
    free(x);
}
static void wire_label(Case *k, const char *what) {
    snprintf(k->label, sizeof k->label, "%s %s, block %d, slice %zu, %s, offsets %zu/%zu", zero_wire_name(k->w),
             dt_name(k->dt), k->block, k->slice_n, what, k->a[0].off, k->na > 1 ? k->a[1].off : 0);
}

// pack: every grouping, and one case of non-finite input
static void gen_wire_pack(int c, Case *k) {
    const int v = wire_shape(c, NGROUPINGS + 1, k), nonfinite = v == NGROUPINGS, g = nonfinite ? 2 : v;
    k->nslices = groupings[g][0];
    k->group = groupings[g][1];
    wire_slices(k, k->nslices, c % 2, nonfinite);
    arg(k, (size_t)k->nslices * rec_bytes(k), (size_t)(c / 2 % 2) * 4, CMP_BYTES);
    char what[64];
    snprintf(what, sizeof what, "%d slices, group %d%s", k->nslices, k->group, nonfinite ? ", NaN/inf" : "");
    wire_label(k, what);
}
// record p holds slice (p % Y) * X + p / Y: equation 2's order with X = group
static void ref_wire_pack(Case *k) {
    uint8_t *rec = want(k, 1);
    int order[64];
    ref_eq2_order(k->group, k->nslices / k->group, order);
    for (int p = 0; p < k->nslices; p++)
        ref_pack_one(k->w, k->dt, k->block, (const uint8_t *)k->a[0].h + (size_t)order[p] * k->slice_n * ref_esz(k->dt),
                     k->slice_n, rec + (size_t)p * rec_bytes(k));
}
static void call_wire_pack(const ZeroBackend *b, const Case *k, void *const *d, double *res, ZeroStream *s) {
    (void)res;
    b->wire_pack(b, k->w, k->block, d[0], k->dt, k->slice_n, k->nslices, k->group, d[1], s);
}

// unpack: 7 records, aligned and not; and records of non-finite input
static void gen_wire_unpack(int c, Case *k) {
    const int v = wire_shape(c, 3, k);
    k->nslices = 7;
    wire_records(k, k->nslices, v == 1, v == 2);
    arg(k, (size_t)k->nslices * k->slice_n * ref_esz(k->dt), v == 1 ? ref_esz(k->dt) : 0,
        k->dt == ZERO_BF16 ? CMP_BF16 : CMP_F32);
    wire_label(k, v == 2 ? "7 records, NaN/inf" : "7 records");
}
static void ref_wire_unpack(Case *k) {
    uint8_t *out = want(k, 1);
    for (int p = 0; p < k->nslices; p++)
        ref_unpack_one(k->w, k->dt, k->block, (const uint8_t *)k->a[0].h + (size_t)p * rec_bytes(k), k->slice_n,
                       out + (size_t)p * k->slice_n * ref_esz(k->dt));
}
static void call_wire_unpack(const ZeroBackend *b, const Case *k, void *const *d, double *res, ZeroStream *s) {
    (void)res;
    b->wire_unpack(b, k->w, k->block, d[0], k->slice_n, k->nslices, d[1], k->dt, s);
}

// reduce_pack: 1, 2, 3, 4 or 8 runs of 2 or 3 records
static void gen_wire_reduce_pack(int c, Case *k) {
    const int v = wire_shape(c, NRUNS, k);
    k->ngroups = runs[v];
    k->nout = v % 2 ? 3 : 2;
    wire_records(k, k->ngroups * k->nout, c % 2, 0);
    arg(k, (size_t)k->nout * rec_bytes(k), (size_t)(c / 2 % 2) * 4, CMP_RECORDS);
    char what[64];
    snprintf(what, sizeof what, "%d runs of %d records", k->ngroups, k->nout);
    wire_label(k, what);
}
// out record k = pack of ((v_0[k] + v_1[k]) + ...) in fp32, v_g[k] record k of run g
static void ref_wire_reduce_pack(Case *k) {
    uint8_t *out = want(k, 1);
    const size_t R = rec_bytes(k);
    float *sum = xmalloc(k->slice_n * sizeof(float));
    for (int o = 0; o < k->nout; o++) {
        ref_sum(k->w, k->dt, k->block, (const uint8_t *)k->a[0].h + (size_t)o * R, (size_t)k->nout * R, k->ngroups,
                k->slice_n, k->slice_n, sum);
        ref_pack_sums(k->w, k->dt, k->block, sum, k->slice_n, out + (size_t)o * R);
    }
    free(sum);
}
static void call_wire_reduce_pack(const ZeroBackend *b, const Case *k, void *const *d, double *res, ZeroStream *s) {
    (void)res;
    b->wire_reduce_pack(b, k->w, k->block, d[0], k->dt, k->slice_n, k->ngroups, k->nout, d[1], s);
}

// reduce: 1, 2, 5 or 8 records, into a fresh accumulator or onto one, over all of the
// slice or a prefix (the last hop reads only the rank's own part)
static void gen_wire_reduce(int c, Case *k) {
    const int v = wire_shape(c, NRECS * 4, k);
    k->nslices = recs[v / 4];
    k->accumulate = v % 2;
    k->m = v / 2 % 2 ? k->slice_n / 2 + 1 : k->slice_n;
    wire_records(k, k->nslices, c / 4 % 2, 0);
    float *acc = arg(k, (k->slice_n + 1) * 4, (size_t)(c / 8 % 2) * 4, CMP_F32);   // past m: untouched
    for (size_t i = 0; i <= k->slice_n; i++) acc[i] = 0.01f * rng_normal(k->seed, 5, i);
    char what[80];
    snprintf(what, sizeof what, "%d records, n %zu, accumulate %d", k->nslices, k->m, k->accumulate);
    wire_label(k, what);
}
static void ref_wire_reduce(Case *k) {
    float *acc = want(k, 1), *sum = xmalloc((k->slice_n + 1) * sizeof(float));
    ref_sum(k->w, k->dt, k->block, k->a[0].h, rec_bytes(k), k->nslices, k->slice_n, k->m, sum);
    for (size_t i = 0; i < k->m; i++) acc[i] = k->accumulate ? acc[i] + sum[i] : sum[i];
    free(sum);
}
static void call_wire_reduce(const ZeroBackend *b, const Case *k, void *const *d, double *res, ZeroStream *s) {
    (void)res;
    b->wire_reduce(b, k->w, k->block, d[0], k->dt, k->slice_n, k->nslices, k->m, d[1], k->accumulate, s);
}

// ---------------------------------------------------------------- the table

static const Op ops[] = {
    {"memset0", NBYTE_LENS * 2, gen_bytes, ref_memset0, call_memset0, 0},
    {"copy", NBYTE_LENS * 2, gen_bytes, ref_copy, call_copy, 0},
    {"reduce_slices", NLENS * 24, gen_slices, ref_reduce_slices, call_reduce_slices, 0},
    {"sum_slices", NLENS * 24, gen_slices, ref_sum_slices, call_sum_slices, 0},
    {"adamw", NLENS * 2, gen_adamw, ref_adamw, call_adamw, 0},
    {"refresh", REFRESH_GRID + 2, gen_refresh, ref_refresh, call_refresh, 0},
    {"sum_squares", 2 * NSUMSQ_LENS + 4, gen_sumsq, ref_sumsq, call_sumsq, 0},
    {"adamw_parts", 6, gen_adamw_parts, ref_adamw_parts, call_adamw_parts, 0},
    {"refresh_parts", 9, gen_refresh_parts, ref_refresh_parts, call_refresh_parts, 0},
    {"sum_squares_parts", 7, gen_sumsq_parts, ref_sumsq, call_sumsq_parts, 0},
    {"reduce_slices_parts", 48, gen_reduce_parts, ref_reduce_parts, call_reduce_parts, 0},
    {"wire_pack", WIRE_SHAPES * (NGROUPINGS + 1), gen_wire_pack, ref_wire_pack, call_wire_pack, 0},
    {"wire_unpack", WIRE_SHAPES * 3, gen_wire_unpack, ref_wire_unpack, call_wire_unpack, 0},
    {"wire_reduce_pack", WIRE_SHAPES * NRUNS, gen_wire_reduce_pack, ref_wire_reduce_pack, call_wire_reduce_pack, 0},
    {"wire_reduce", WIRE_SHAPES * NRECS * 4, gen_wire_reduce, ref_wire_reduce, call_wire_reduce, 0},
};
#define NOPS ((int)(sizeof ops / sizeof ops[0]))

// ---------------------------------------------------------------- comparing

// Floats within ulps units in the last place (NaN meets any NaN); the first index that is not.
static long first_float_diff(const void *got, const void *exp, size_t n, int bf16, unsigned ulps) {
    for (size_t i = 0; i < n; i++) {
        const float a = bf16 ? bf16f(((const uint16_t *)got)[i]) : ((const float *)got)[i];
        const float b = bf16 ? bf16f(((const uint16_t *)exp)[i]) : ((const float *)exp)[i];
        if (isnan(a) || isnan(b)) { if (isnan(a) && isnan(b)) continue; return (long)i; }
        const int64_t ua = ref_bits(a), ub = ref_bits(b);
        if (ua == ub) continue;
        if ((ua ^ ub) >> 31 || (uint64_t)llabs(ua - ub) >> (bf16 ? 16 : 0) > ulps) return (long)i;
    }
    return -1;
}
static long first_byte_diff(const uint8_t *a, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++) if (a[i] != b[i]) return (long)i;
    return -1;
}

// Output argument i of k against the reference; fills why when they differ.
static int same(const Case *k, int i, const void *got, unsigned ulps, char *why, size_t cap) {
    const Arg *a = &k->a[i];
    long d = -1;
    switch (a->cmp) {
    case CMP_BYTES: d = first_byte_diff(got, a->want, a->bytes); break;
    case CMP_F32: d = first_float_diff(got, a->want, a->bytes / 4, 0, ulps); break;
    case CMP_BF16: d = first_float_diff(got, a->want, a->bytes / 2, 1, ulps); break;
    case CMP_RECORDS: {   // raw records compare as values, the padding as bytes
        const size_t R = rec_bytes(k), vb = k->w == ZERO_WIRE_RAW ? k->slice_n * ref_esz(k->dt) : 0;
        for (size_t p = 0; p * R < a->bytes && d < 0; p++) {
            const uint8_t *x = (const uint8_t *)got + p * R, *y = (const uint8_t *)a->want + p * R;
            d = first_float_diff(x, y, vb / ref_esz(k->dt), k->dt == ZERO_BF16, ulps);
            if (d >= 0) { d = (long)(p * R) + d * (long)ref_esz(k->dt); break; }
            d = first_byte_diff(x + vb, y + vb, R - vb);
            if (d >= 0) d += (long)(p * R + vb);
        }
        break;
    }
    }
    if (d < 0) return 1;
    if (a->cmp == CMP_F32 || a->cmp == CMP_BF16) {
        const int bf = a->cmp == CMP_BF16;
        const float g = bf ? bf16f(((const uint16_t *)got)[d]) : ((const float *)got)[d];
        const float w = bf ? bf16f(((const uint16_t *)a->want)[d]) : ((const float *)a->want)[d];
        snprintf(why, cap, "argument %d, value %ld of %zu: %a, the reference %a", i, d, a->bytes / (bf ? 2 : 4),
                 (double)g, (double)w);
    } else {
        const uint8_t *g = got, *w = a->want;
        snprintf(why, cap, "argument %d, byte %ld of %zu: %02x, the reference %02x", i, d, a->bytes, g[d], w[d]);
    }
    return 0;
}

// ---------------------------------------------------------------- running a case on a backend

static int npassed, nfailed;

static void *backend_alloc(const ZeroBackend *b, ZeroMemKind kind, size_t bytes) {
    void *p = b->alloc(b, kind, bytes);
    if (!p) { fprintf(stderr, "test_backend_ops: %s: allocation of %zu bytes failed\n", b->name, bytes); exit(1); }
    return p;
}

// k's inputs copied into b's memory, the kernel queued on b's main stream, the outputs read
// back and compared. Returns 1 when every output matches.
static int run_case(const Op *op, const ZeroBackend *b, const Case *k, char *why, size_t cap) {
    ZeroStream *s = b->main_stream(b);
    void *dev[MAXARG], *stage[MAXARG], *d[MAXARG];
    for (int i = 0; i < k->na; i++) {
        const Arg *a = &k->a[i];
        const size_t total = a->off + a->bytes;
        dev[i] = backend_alloc(b, ZERO_MEM_DEVICE, total);
        stage[i] = backend_alloc(b, ZERO_MEM_HOST, total);
        memset(stage[i], 0x5a, a->off);
        memcpy((char *)stage[i] + a->off, a->h, a->bytes);
        b->copy(b, dev[i], ZERO_MEM_DEVICE, stage[i], ZERO_MEM_HOST, total, s);
        d[i] = (char *)dev[i] + a->off;
    }
    double *res = calloc((size_t)(k->nres ? k->nres : 1), sizeof *res);
    if (!res) { fprintf(stderr, "test_backend_ops: out of memory\n"); exit(1); }
    b->stream_sync(b, s);
    op->call(b, k, d, res, s);
    for (int i = 0; i < k->na; i++)
        if (k->a[i].want) b->copy(b, stage[i], ZERO_MEM_HOST, dev[i], ZERO_MEM_DEVICE, k->a[i].off + k->a[i].bytes, s);
    b->stream_sync(b, s);
    int ok = 1;
    for (int i = 0; i < k->na && ok; i++)
        if (k->a[i].want) ok = same(k, i, (char *)stage[i] + k->a[i].off, op->ulps, why, cap);
    for (int j = 0; j < k->nres && ok; j++)
        if (memcmp(&res[j], &k->res_want[j], sizeof(double)) && !(isnan(res[j]) && isnan(k->res_want[j]))) {
            snprintf(why, cap, "result %d: %.17g, the reference %.17g", j, res[j], k->res_want[j]);
            ok = 0;
        }
    for (int i = 0; i < k->na; i++) {
        b->free(b, ZERO_MEM_DEVICE, dev[i]);
        b->free(b, ZERO_MEM_HOST, stage[i]);
    }
    free(res);
    return ok;
}

static int wanted(const char *name, int argc, char **argv) {
    if (argc < 2) return 1;
    for (int i = 1; i < argc; i++) if (!strcmp(argv[i], name)) return 1;
    return 0;
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        int known = 0;
        for (int o = 0; o < NOPS; o++) known |= !strcmp(argv[i], ops[o].name);
        if (!known) { fprintf(stderr, "usage: %s [kernel...]: %s is no kernel of the table\n", argv[0], argv[i]); return 2; }
    }
#ifdef ZERO_TEST_CUDA
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("SKIP: no CUDA device\n");
        return 0;
    }
#endif
    ZeroComm *comm = zero_comm_init(NULL, NULL);   // no launcher: a world of one
    if (!comm) return 1;
    const ZeroBackend *backends[2];
    int nb = 0;
    backends[nb++] = zero_backend_host(comm);
    if (!backends[0]) return 1;
#ifdef ZERO_TEST_CUDA
    cudaStream_t stream;
    if (zero_cuda_select_device(comm) < 0 || cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess)
        return 1;
    backends[nb] = zero_backend_cuda(comm, stream);
    if (!backends[nb++]) return 1;
#endif
    large_ok = nb > 1 && !getenv("ZERO_GPU_TEST_SMALL");
    for (int o = 0; o < NOPS; o++) {
        const Op *op = &ops[o];
        if (!wanted(op->name, argc, argv)) continue;
        int op_failed = 0;
        for (int c = 0; c < op->ncases; c++) {
            Case k;
            memset(&k, 0, sizeof k);
            op->gen(c, &k);
            if (k.large && !large_ok) {
                printf("%-16s %-5s %s\n", op->name, "-", k.label);
                case_free(&k);
                continue;
            }
            op->ref(&k);
            for (int bi = 0; bi < nb; bi++) {
                const ZeroBackend *b = backends[bi];
                if (k.large && bi == 0) continue;   // the host's sum of squares has no passes
                char why[256] = "";
                const int ok = run_case(op, b, &k, why, sizeof why);
                printf("%-16s %-5s %s: %s%s\n", op->name, b->name, k.label, ok ? "ok" : "FAIL: ", why);
                if (ok) npassed++;
                else { nfailed++; op_failed++; }
            }
            case_free(&k);
        }
        if (op_failed) fprintf(stderr, "%s: %d case(s) failed\n", op->name, op_failed);
    }
    for (int bi = nb - 1; bi >= 0; bi--) {
#ifdef ZERO_TEST_CUDA
        if (bi == 1) { zero_backend_cuda_free(backends[bi]); continue; }
#endif
        zero_backend_host_free(backends[bi]);
    }
    zero_comm_free(comm);
    printf("[  PASSED  ] %d test(s).\n", npassed);
    if (nfailed) printf("[  FAILED  ] %d test(s).\n", nfailed);
    printf("%d passed, %d failed\n", npassed, nfailed);
    return nfailed ? 1 : 0;
}
