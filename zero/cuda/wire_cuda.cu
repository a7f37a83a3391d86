// wire_cuda.cu: the GPU kernels of wire_cuda.h. As in wire.c a record is cut into pieces
// (its quantization blocks, or RAW_PIECE values for RAW) and one thread block takes one
// (record, piece) pair at a time (grid-stride over the pairs). To quantize, each thread
// keeps its first REG_VECS vectors of the piece in registers (the values, or for
// reduce_pack their fp32 sums over the runs) while the block's max |x| is found, so a block
// of up to REG_VECS * V * threads values is read from memory once and no sum is stored
// outside registers; a longer block reads (and sums) its tail again. Values go through
// quant_element.h's functions and adamw_add in wire.c's order, so the bits are wire.c's.
#include <string.h>

#include "wire_cuda.h"
#include "../kernels/quant.h"
#include "../kernels/quant_element.h"

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#define MAX_THREADS 256
#define MAX_WARPS (MAX_THREADS / 32)
#define MAX_GRID 65535u   // grid-stride loops cover the rest
#define REG_VECS 2        // vectors per thread held while a block's scale is found
#define RAW_PIECE 4096    // values per piece of a RAW record (any size gives the same bits)

enum { RAW = ZERO_WIRE_RAW, INT8 = ZERO_WIRE_INT8, INT4 = ZERO_WIRE_INT4 };

// A record's geometry (wire.h), as wire.c's Layout.
struct Geo {
    size_t slice_n, piece, npieces, payload, soff, R;
};

__device__ __forceinline__ float *scales_of(uint8_t *rec, const Geo &g) { return reinterpret_cast<float *>(rec + g.soff); }
__device__ __forceinline__ const float *scales_of(const uint8_t *rec, const Geo &g) {
    return reinterpret_cast<const float *>(rec + g.soff);
}

// ---------------------------------------------------------------- vector access

template <int N> struct VecOf;
template <> struct VecOf<2> { typedef uint16_t T; };
template <> struct VecOf<4> { typedef uint32_t T; };
template <> struct VecOf<8> { typedef uint2 T; };
template <> struct VecOf<16> { typedef uint4 T; };

// N bytes between an N-aligned (at most 16-aligned) address and a local array, in accesses
// of up to 16 bytes.
template <int N> __device__ __forceinline__ void vcopy(void *dst, const void *src) {
    constexpr int C = N < 16 ? N : 16;
    typedef typename VecOf<C>::T T;
#pragma unroll
    for (int c = 0; c < N / C; c++) static_cast<T *>(dst)[c] = static_cast<const T *>(src)[c];
}

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(uint16_t h) { return quant_bf16_to_f32(h); }
template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ uint16_t from_f32<uint16_t>(float x) { return quant_f32_to_bf16(x); }

// Every access below moves V consecutive values starting at index i (V even, i a multiple
// of V from an even start): one vector access when VEC and all V lie below hi, else value
// by value, values at or past hi left alone (loads give 0 for them).

template <typename T, int V, bool VEC>
__device__ __forceinline__ void load_vals(const T *x, size_t i, size_t hi, float (&v)[V]) {
    if (VEC && i + V <= hi) {
        alignas(16) T buf[V];
        vcopy<V * sizeof(T)>(buf, x + i);
#pragma unroll
        for (int k = 0; k < V; k++) v[k] = to_f32(buf[k]);
    } else {
#pragma unroll
        for (int k = 0; k < V; k++) v[k] = i + k < hi ? to_f32(x[i + k]) : 0.0f;
    }
}

template <typename T, int V, bool VEC>
__device__ __forceinline__ void store_vals(T *x, size_t i, size_t hi, const float (&v)[V]) {
    alignas(16) T buf[V];
#pragma unroll
    for (int k = 0; k < V; k++) buf[k] = from_f32<T>(v[k]);
    if (VEC && i + V <= hi) {
        vcopy<V * sizeof(T)>(x + i, buf);
    } else {
#pragma unroll
        for (int k = 0; k < V; k++) if (i + k < hi) x[i + k] = buf[k];
    }
}

// RAW pack and unpack: the bits as they are (a bf16 NaN keeps its payload).
template <typename T, int V, bool VEC>
__device__ __forceinline__ void copy_vals(T *dst, const T *src, size_t i, size_t hi) {
    if (VEC && i + V <= hi) {
        alignas(16) T buf[V];
        vcopy<V * sizeof(T)>(buf, src + i);
        vcopy<V * sizeof(T)>(dst + i, buf);
    } else {
#pragma unroll
        for (int k = 0; k < V; k++) if (i + k < hi) dst[i + k] = src[i + k];
    }
}

// Quantized values of a payload (value i at byte i, or in nibble i % 2 of byte i / 2).
template <int W, int V, bool VEC>
__device__ __forceinline__ void load_q(const uint8_t *pay, size_t i, size_t hi, int (&q)[V]) {
    constexpr int N = W == INT4 ? V / 2 : V;
    if (VEC && i + V <= hi) {
        alignas(16) uint8_t b[N];
        vcopy<N>(b, pay + (W == INT4 ? i / 2 : i));
#pragma unroll
        for (int k = 0; k < V; k++) q[k] = W == INT4 ? quant_unpack_int4(b[k / 2], k & 1) : (int)(int8_t)b[k];
    } else {
#pragma unroll
        for (int k = 0; k < V; k++)
            q[k] = i + k >= hi ? 0
                 : W == INT4 ? quant_unpack_int4(pay[(i + k) / 2], k & 1) : (int)(int8_t)pay[i + k];
    }
}

// int4: a byte is written when its low value is below hi (its high nibble is then q of a
// value past hi, which the callers make 0, as quant.c's padding nibble).
template <int W, int V, bool VEC>
__device__ __forceinline__ void store_q(uint8_t *pay, size_t i, size_t hi, const int (&q)[V]) {
    constexpr int N = W == INT4 ? V / 2 : V;
    alignas(16) uint8_t b[N];
#pragma unroll
    for (int k = 0; k < N; k++) b[k] = W == INT4 ? quant_pack_int4(q[2 * k], q[2 * k + 1]) : (uint8_t)(int8_t)q[k];
    uint8_t *p = pay + (W == INT4 ? i / 2 : i);
    if (VEC && i + V <= hi) {
        vcopy<N>(p, b);
    } else {
#pragma unroll
        for (int k = 0; k < N; k++) if (i + (W == INT4 ? 2 * k : k) < hi) p[k] = b[k];
    }
}

// ---------------------------------------------------------------- value sources

// The values of a slice (pack).
template <typename T, int V, bool VEC> struct DenseSrc {
    const T *x;
    __device__ __forceinline__ void operator()(size_t i, size_t hi, float (&v)[V]) const { load_vals<T, V, VEC>(x, i, hi, v); }
};

// ((v_0 + v_1) + ...) + v_{n-1} over piece k of the records at rec + r * stride (r < n): the
// fp32 sums of reduce_pack and reduce, 0 past hi.
template <int W, typename T, int V, bool VEC> struct SumSrc {
    const uint8_t *rec;
    size_t stride;
    int n;
    Geo g;
    size_t k;
    __device__ __forceinline__ void operator()(size_t i, size_t hi, float (&v)[V]) const {
#pragma unroll
        for (int j = 0; j < V; j++) v[j] = 0.0f;
        if (i >= hi) return;
        for (int r = 0; r < n; r++) {
            const uint8_t *p = rec + (size_t)r * stride;
            float d[V];
            if constexpr (W == RAW) {
                load_vals<T, V, VEC>(reinterpret_cast<const T *>(p), i, hi, d);
            } else {
                int q[V];
                load_q<W, V, VEC>(p, i, hi, q);
                const float s = scales_of(p, g)[k];
#pragma unroll
                for (int j = 0; j < V; j++) d[j] = dequant_element(q[j], s);
            }
#pragma unroll
            for (int j = 0; j < V; j++) v[j] = r == 0 ? d[j] : adamw_add(v[j], d[j]);
        }
#pragma unroll
        for (int j = 0; j < V; j++) if (i + j >= hi) v[j] = 0.0f;   // a NaN scale must not reach the padding
    }
};

// ---------------------------------------------------------------- block pieces

// The max of m over the thread block, for every thread (warp_max: one shared slot per warp).
__device__ __forceinline__ uint32_t block_max(uint32_t m, uint32_t *warp_max) {
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x / 32] = m;
    __syncthreads();
    m = 0;
    for (unsigned w = 0; w < blockDim.x / 32; w++) m = max(m, warp_max[w]);
    __syncthreads();   // the slots are reused by the next piece
    return m;
}

template <int V> __device__ __forceinline__ uint32_t amax_bits(uint32_t m, const float (&v)[V]) {
#pragma unroll
    for (int k = 0; k < V; k++) m = max(m, QUANT_ABS_BITS(quant_bits_of(v[k])));
    return m;
}

// Quantizes the values [lo, hi) that src gives into payload pay and *scale: quant.c's
// quant_block_quantize (scale NaN for a non-finite value, 0 for an all-zero block).
template <int W, int V, bool VEC, typename Src>
__device__ void quantize_piece(const Src &src, size_t lo, size_t hi, uint8_t *pay, float *scale, uint32_t *warp_max) {
    constexpr int Q = W == INT4 ? QUANT_INT4_MAX : QUANT_INT8_MAX;
    const size_t stride = (size_t)blockDim.x * V, first = lo + (size_t)threadIdx.x * V, rest = first + REG_VECS * stride;
    float v[REG_VECS][V];
    uint32_t m = 0;
#pragma unroll
    for (int r = 0; r < REG_VECS; r++) {
        src(first + r * stride, hi, v[r]);
        m = amax_bits<V>(m, v[r]);
    }
    for (size_t i = rest; i < hi; i += stride) {
        float w[V];
        src(i, hi, w);
        m = amax_bits<V>(m, w);
    }
    m = block_max(m, warp_max);
    const float s = m >= QUANT_NONFINITE_BITS ? quant_float_of(0x7fc00000u) : quant_scale(m, Q);
    if (threadIdx.x == 0) *scale = s;
    int q[V];
#pragma unroll
    for (int r = 0; r < REG_VECS; r++) {
        const size_t i = first + r * stride;
        if (i >= hi) break;
#pragma unroll
        for (int k = 0; k < V; k++) q[k] = quant_element(v[r][k], s, Q);
        store_q<W, V, VEC>(pay, i, hi, q);
    }
    for (size_t i = rest; i < hi; i += stride) {
        float w[V];
        src(i, hi, w);
#pragma unroll
        for (int k = 0; k < V; k++) q[k] = quant_element(w[k], s, Q);
        store_q<W, V, VEC>(pay, i, hi, q);
    }
}

// The bytes of a record no piece writes are zeros (wire.c's zero_padding).
template <int W> __device__ __forceinline__ void zero_padding(uint8_t *rec, const Geo &g) {
    const size_t end = W == RAW ? g.soff : g.soff + 4 * g.npieces;
    for (size_t b = g.payload + threadIdx.x; b < g.soff; b += blockDim.x) rec[b] = 0;
    for (size_t b = end + threadIdx.x; b < g.R; b += blockDim.x) rec[b] = 0;
}

// ---------------------------------------------------------------- kernels

// Record p holds slice (p % Y) * X + p / Y (ZeRO++ eq. 1-2).
template <int W, typename T, bool VEC>
__global__ void __launch_bounds__(MAX_THREADS)
pack_kernel(const T *src, Geo g, size_t nslices, size_t X, size_t Y, uint8_t *rec) {
    constexpr int V = 16 / sizeof(T);
    __shared__ uint32_t warp_max[MAX_WARPS];
    for (size_t t = blockIdx.x; t < nslices * g.npieces; t += gridDim.x) {
        const size_t p = t / g.npieces, k = t % g.npieces, j = (p % Y) * X + p / Y;
        const size_t lo = k * g.piece, hi = lo + g.piece < g.slice_n ? lo + g.piece : g.slice_n;
        const T *x = src + j * g.slice_n;
        uint8_t *r = rec + p * g.R;
        if constexpr (W == RAW) {
            for (size_t i = lo + (size_t)threadIdx.x * V; i < hi; i += (size_t)blockDim.x * V)
                copy_vals<T, V, VEC>(reinterpret_cast<T *>(r), x, i, hi);
        } else {
            quantize_piece<W, V, VEC>(DenseSrc<T, V, VEC>{x}, lo, hi, r, scales_of(r, g) + k, warp_max);
        }
        if (k == 0) zero_padding<W>(r, g);
    }
}

template <int W, typename T, bool VEC>
__global__ void __launch_bounds__(MAX_THREADS) unpack_kernel(const uint8_t *rec, Geo g, size_t nslices, T *out) {
    constexpr int V = 16 / sizeof(T);
    for (size_t t = blockIdx.x; t < nslices * g.npieces; t += gridDim.x) {
        const size_t p = t / g.npieces, k = t % g.npieces;
        const size_t lo = k * g.piece, hi = lo + g.piece < g.slice_n ? lo + g.piece : g.slice_n;
        const uint8_t *r = rec + p * g.R;
        T *o = out + p * g.slice_n;
        for (size_t i = lo + (size_t)threadIdx.x * V; i < hi; i += (size_t)blockDim.x * V) {
            if constexpr (W == RAW) {
                copy_vals<T, V, VEC>(o, reinterpret_cast<const T *>(r), i, hi);
            } else {
                const float s = scales_of(r, g)[k];
                int q[V];
                float v[V];
                load_q<W, V, VEC>(r, i, hi, q);
#pragma unroll
                for (int j = 0; j < V; j++) v[j] = dequant_element(q[j], s);
                store_vals<T, V, VEC>(o, i, hi, v);
            }
        }
    }
}

// Out record p: the sum over the runs of their record p, packed (run g's at in + g * run).
template <int W, typename T, bool VEC>
__global__ void __launch_bounds__(MAX_THREADS)
reduce_pack_kernel(const uint8_t *in, Geo g, int ngroups, size_t nout, uint8_t *out) {
    constexpr int V = W == RAW ? 16 / sizeof(T) : 8;
    __shared__ uint32_t warp_max[MAX_WARPS];
    for (size_t t = blockIdx.x; t < nout * g.npieces; t += gridDim.x) {
        const size_t p = t / g.npieces, k = t % g.npieces;
        const size_t lo = k * g.piece, hi = lo + g.piece < g.slice_n ? lo + g.piece : g.slice_n;
        const SumSrc<W, T, V, VEC> sum{in + p * g.R, nout * g.R, ngroups, g, k};
        uint8_t *o = out + p * g.R;
        if constexpr (W == RAW) {
            for (size_t i = lo + (size_t)threadIdx.x * V; i < hi; i += (size_t)blockDim.x * V) {
                float v[V];
                sum(i, hi, v);
                store_vals<T, V, VEC>(reinterpret_cast<T *>(o), i, hi, v);
            }
        } else {
            quantize_piece<W, V, VEC>(sum, lo, hi, o, scales_of(o, g) + k, warp_max);
        }
        if (k == 0) zero_padding<W>(o, g);
    }
}

// acc[i] = (ACC ? acc[i] + s : s), s the sum over the records, for i < n.
template <int W, typename T, bool VEC, bool ACC>
__global__ void __launch_bounds__(MAX_THREADS) reduce_kernel(const uint8_t *rec, Geo g, int nrec, size_t n, float *acc) {
    constexpr int V = 4;
    const size_t pieces = (n + g.piece - 1) / g.piece;
    for (size_t k = blockIdx.x; k < pieces; k += gridDim.x) {
        const size_t lo = k * g.piece, hi = lo + g.piece < n ? lo + g.piece : n;
        const SumSrc<W, T, V, VEC> sum{rec, g.R, nrec, g, k};
        for (size_t i = lo + (size_t)threadIdx.x * V; i < hi; i += (size_t)blockDim.x * V) {
            float s[V], a[V];
            sum(i, hi, s);
            if (ACC) {
                load_vals<float, V, VEC>(acc, i, hi, a);
#pragma unroll
                for (int j = 0; j < V; j++) a[j] = adamw_add(a[j], s[j]);
            } else {
#pragma unroll
                for (int j = 0; j < V; j++) a[j] = s[j];
            }
            store_vals<float, V, VEC>(acc, i, hi, a);
        }
    }
}

// ---------------------------------------------------------------- launches

static int launched(const char *fn) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return 0;
    fprintf(stderr, "zero: %s: kernel launch failed: %s (%s)\n", fn, cudaGetErrorString(e), cudaGetErrorName(e));
    return -1;
}

static bool aligned(const void *p, size_t a) { return (uintptr_t)p % a == 0; }
static size_t esize(ZeroDType dt) { return dt == ZERO_BF16 ? 2 : 4; }

// wire.c's checks and the geometry of its layout_of.
static int geo_of(const char *fn, ZeroWire w, int block, ZeroDType dt, size_t slice_n, const void *rec, Geo *g) {
    if (zero_wire_check(fn, w, block, dt, rec)) return QUANT_BAD_BLOCK;
    g->slice_n = slice_n;
    g->piece = w == ZERO_WIRE_RAW ? RAW_PIECE : (size_t)block;
    g->npieces = (slice_n + g->piece - 1) / g->piece;
    g->payload = zero_wire_payload_bytes(w, dt, slice_n);
    g->soff = zero_wire_scales_offset(w, dt, slice_n);
    g->R = zero_wire_record_bytes(w, dt, slice_n, block);
    return 0;
}

static unsigned grid_for(size_t pairs) { return pairs > MAX_GRID ? MAX_GRID : (unsigned)pairs; }

// Whole warps, enough for one vector per thread of a piece, at most MAX_THREADS.
static unsigned threads_for(size_t piece, int V) {
    const size_t t = ((piece + (size_t)V - 1) / (size_t)V + 31) / 32 * 32;
    return t > MAX_THREADS ? MAX_THREADS : (unsigned)t;
}

template <int W, typename T>
static void launch_pack(const void *src, const Geo &g, size_t nslices, size_t X, size_t Y, void *rec, bool vec,
                        cudaStream_t st) {
    const unsigned grid = grid_for(nslices * g.npieces), threads = threads_for(g.piece, 16 / sizeof(T));
    const T *x = static_cast<const T *>(src);
    uint8_t *r = static_cast<uint8_t *>(rec);
    if (vec) pack_kernel<W, T, true><<<grid, threads, 0, st>>>(x, g, nslices, X, Y, r);
    else pack_kernel<W, T, false><<<grid, threads, 0, st>>>(x, g, nslices, X, Y, r);
}

extern "C" int zero_wire_pack_cuda(ZeroWire w, int block, const void *src, ZeroDType dt, size_t slice_n, int nslices,
                                   int group, void *rec, cudaStream_t stream) {
    const char *fn = "zero_wire_pack_cuda";
    Geo g;
    if (geo_of(fn, w, block, dt, slice_n, rec, &g)) return QUANT_BAD_BLOCK;
    if (nslices < 0 || group < 1 || nslices % group) {
        fprintf(stderr, "zero: %s: %d slices do not split into groups of %d\n", fn, nslices, group);
        return QUANT_BAD_BLOCK;
    }
    if (nslices == 0 || g.npieces == 0) return 0;
    const size_t e = esize(dt), X = (size_t)group, Y = (size_t)(nslices / group);
    const bool vec = aligned(src, 16) && aligned(rec, 16) && slice_n * e % 16 == 0 && g.piece * e % 16 == 0;
    const bool bf16 = dt == ZERO_BF16;
    if (w == ZERO_WIRE_RAW) bf16 ? launch_pack<RAW, uint16_t>(src, g, nslices, X, Y, rec, vec, stream)
                                 : launch_pack<RAW, float>(src, g, nslices, X, Y, rec, vec, stream);
    if (w == ZERO_WIRE_INT8) bf16 ? launch_pack<INT8, uint16_t>(src, g, nslices, X, Y, rec, vec, stream)
                                  : launch_pack<INT8, float>(src, g, nslices, X, Y, rec, vec, stream);
    if (w == ZERO_WIRE_INT4) bf16 ? launch_pack<INT4, uint16_t>(src, g, nslices, X, Y, rec, vec, stream)
                                  : launch_pack<INT4, float>(src, g, nslices, X, Y, rec, vec, stream);
    return launched(fn);
}

template <int W, typename T>
static void launch_unpack(const void *rec, const Geo &g, size_t nslices, void *out, bool vec, cudaStream_t st) {
    const unsigned grid = grid_for(nslices * g.npieces), threads = threads_for(g.piece, 16 / sizeof(T));
    const uint8_t *r = static_cast<const uint8_t *>(rec);
    T *o = static_cast<T *>(out);
    if (vec) unpack_kernel<W, T, true><<<grid, threads, 0, st>>>(r, g, nslices, o);
    else unpack_kernel<W, T, false><<<grid, threads, 0, st>>>(r, g, nslices, o);
}

extern "C" int zero_wire_unpack_cuda(ZeroWire w, int block, const void *rec, size_t slice_n, int nslices, void *out,
                                     ZeroDType dt, cudaStream_t stream) {
    const char *fn = "zero_wire_unpack_cuda";
    Geo g;
    if (geo_of(fn, w, block, dt, slice_n, rec, &g)) return QUANT_BAD_BLOCK;
    if (nslices <= 0 || g.npieces == 0) return 0;
    const size_t e = esize(dt);
    const bool vec = aligned(out, 16) && aligned(rec, 16) && slice_n * e % 16 == 0 && g.piece * e % 16 == 0;
    const bool bf16 = dt == ZERO_BF16;
    const size_t ns = (size_t)nslices;
    if (w == ZERO_WIRE_RAW) bf16 ? launch_unpack<RAW, uint16_t>(rec, g, ns, out, vec, stream)
                                 : launch_unpack<RAW, float>(rec, g, ns, out, vec, stream);
    if (w == ZERO_WIRE_INT8) bf16 ? launch_unpack<INT8, uint16_t>(rec, g, ns, out, vec, stream)
                                  : launch_unpack<INT8, float>(rec, g, ns, out, vec, stream);
    if (w == ZERO_WIRE_INT4) bf16 ? launch_unpack<INT4, uint16_t>(rec, g, ns, out, vec, stream)
                                  : launch_unpack<INT4, float>(rec, g, ns, out, vec, stream);
    return launched(fn);
}

// INT records do not depend on the dtype: T is only RAW's.
template <int W, typename T>
static void launch_reduce_pack(const void *in, const Geo &g, int ngroups, size_t nout, void *out, bool vec,
                               cudaStream_t st) {
    const unsigned grid = grid_for(nout * g.npieces), threads = threads_for(g.piece, W == RAW ? 16 / sizeof(T) : 8);
    const uint8_t *i = static_cast<const uint8_t *>(in);
    uint8_t *o = static_cast<uint8_t *>(out);
    if (vec) reduce_pack_kernel<W, T, true><<<grid, threads, 0, st>>>(i, g, ngroups, nout, o);
    else reduce_pack_kernel<W, T, false><<<grid, threads, 0, st>>>(i, g, ngroups, nout, o);
}

extern "C" int zero_wire_reduce_pack_cuda(ZeroWire w, int block, const void *in, ZeroDType dt, size_t slice_n,
                                          int ngroups, int nout, void *out, cudaStream_t stream) {
    const char *fn = "zero_wire_reduce_pack_cuda";
    Geo g;
    if (geo_of(fn, w, block, dt, slice_n, in, &g)) return QUANT_BAD_BLOCK;
    if (zero_wire_check(fn, w, block, dt, out)) return QUANT_BAD_BLOCK;
    if (ngroups < 1 || nout < 0) {
        fprintf(stderr, "zero: %s: %d runs of %d records (need at least one run)\n", fn, ngroups, nout);
        return QUANT_BAD_BLOCK;
    }
    if (nout == 0 || g.npieces == 0) return 0;
    // INT: 8 values a vector (8 bytes of int8, 4 of int4), so blocks must start on 8 values
    const bool vec = aligned(in, 16) && aligned(out, 16) && (w == ZERO_WIRE_RAW || g.piece % 8 == 0);
    const size_t no = (size_t)nout;
    if (w == ZERO_WIRE_RAW) dt == ZERO_BF16 ? launch_reduce_pack<RAW, uint16_t>(in, g, ngroups, no, out, vec, stream)
                                            : launch_reduce_pack<RAW, float>(in, g, ngroups, no, out, vec, stream);
    if (w == ZERO_WIRE_INT8) launch_reduce_pack<INT8, float>(in, g, ngroups, no, out, vec, stream);
    if (w == ZERO_WIRE_INT4) launch_reduce_pack<INT4, float>(in, g, ngroups, no, out, vec, stream);
    return launched(fn);
}

template <int W, typename T>
static void launch_reduce(const void *rec, const Geo &g, int nrec, size_t n, float *acc, int accumulate, bool vec,
                          cudaStream_t st) {
    const size_t pieces = (n + g.piece - 1) / g.piece;
    const unsigned grid = grid_for(pieces), threads = threads_for(g.piece, 4);
    const uint8_t *r = static_cast<const uint8_t *>(rec);
    if (vec && accumulate) reduce_kernel<W, T, true, true><<<grid, threads, 0, st>>>(r, g, nrec, n, acc);
    if (vec && !accumulate) reduce_kernel<W, T, true, false><<<grid, threads, 0, st>>>(r, g, nrec, n, acc);
    if (!vec && accumulate) reduce_kernel<W, T, false, true><<<grid, threads, 0, st>>>(r, g, nrec, n, acc);
    if (!vec && !accumulate) reduce_kernel<W, T, false, false><<<grid, threads, 0, st>>>(r, g, nrec, n, acc);
}

extern "C" int zero_wire_reduce_cuda(ZeroWire w, int block, const void *rec, ZeroDType dt, size_t slice_n, int nrec,
                                     size_t n, float *acc, int accumulate, cudaStream_t stream) {
    const char *fn = "zero_wire_reduce_cuda";
    Geo g;
    if (geo_of(fn, w, block, dt, slice_n, rec, &g)) return QUANT_BAD_BLOCK;
    if (n > slice_n) {
        fprintf(stderr, "zero: %s: %zu values asked of records of %zu\n", fn, n, slice_n);
        return QUANT_BAD_BLOCK;
    }
    if (nrec <= 0 || n == 0) return 0;
    // 4 values a vector: 16 bytes of acc, 4 (int8), 2 (int4), 8 (bf16) or 16 (fp32) of a record
    const bool vec = aligned(acc, 16) && aligned(rec, 16) && g.piece % 4 == 0;
    if (w == ZERO_WIRE_RAW) dt == ZERO_BF16 ? launch_reduce<RAW, uint16_t>(rec, g, nrec, n, acc, accumulate, vec, stream)
                                            : launch_reduce<RAW, float>(rec, g, nrec, n, acc, accumulate, vec, stream);
    if (w == ZERO_WIRE_INT8) launch_reduce<INT8, float>(rec, g, nrec, n, acc, accumulate, vec, stream);
    if (w == ZERO_WIRE_INT4) launch_reduce<INT4, float>(rec, g, nrec, n, acc, accumulate, vec, stream);
    return launched(fn);
}
