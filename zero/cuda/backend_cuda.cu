// backend_cuda.cu: the CUDA backend (backend_cuda.h): device and pinned memory, streams
// and events, NCCL collectives (comm_nccl.cu), and the numeric kernels of backend.h.
//
// The kernels give backend_host.c's bits: every float operation is a separately rounded
// intrinsic (__fadd_rn, __dmul_rn, ...; adamw_element uses them too), elements are
// independent (so vector width and grid size cannot change a result), and sum_squares
// keeps the host's order: each ZERO_SUMSQ_BLOCK block summed left to right by one thread,
// then the block sums added left to right by one thread. Flush-to-zero would break this,
// so zero_backend_cuda checks on the device that subnormals survive.
#include "backend_cuda.h"
#include "../host/backend_host.h"
#include "comm_nccl.h"
#include "last_error.h"
#include "trace_gpu.h"
#include "wire_cuda.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 256
#define MAX_GRID 65535u      // grid-stride loops cover the rest
#define SQ_WARPS 4           // warps per sum_squares block; a warp sums 32 norm blocks
#define SQ_PASS 65536        // norm blocks per pass: the partials scratch holds this many
#define SLOTS 4096           // sum_squares results a stream holds until stream_sync

struct ZeroStream {
    ZeroStream *host;        // a host stream: the host backend's stream that runs its work (else NULL)
    // A host stream's progress as device streams see it: *done_h counts the event records
    // its CPU thread has passed (pinned, mapped at done_d); `recorded` counts those queued.
    unsigned long long *done_h, *done_d, recorded;
    cudaStream_t s;
    int owned;               // created here (the main stream belongs to the trainer)
    double *slots;           // pinned, device-mapped: sum_squares results
    double *dslots;          // the same memory as the device sees it
    double **outs;           // where slot i goes at stream_sync
    int npending;
    double *partials;        // device: SQ_PASS block sums, then a running total
    int track;               // --trace: a device stream's GPU track (-1: none)
};

// --trace: the device work one backend call queues on stream s is a span on its GPU track
// (the same names as the host backend's spans).
struct GpuSpan {
    ZeroStream *s;
    const char *name, *label;
    int span;
    GpuSpan(ZeroStream *s_, const char *name_, const char *label_)
        : s(s_), name(name_), label(label_), span(zero_trace_gpu_begin(s_->s, s_->track)) {}
    ~GpuSpan() { zero_trace_gpu_end(span, s->s, name, label); }
};
#define GPU_SPAN(s, name, label) GpuSpan gpu_span_(s, name, label)

// One record of a device event, as a host stream waits for it: a CUDA event of its own, so
// that the wait binds to the record current when it was queued (backend.h, CUDA's rule),
// however often the owner records again meanwhile. refs: host waits queued on it, dropped by
// the host stream's CPU thread once passed; a record is reused only at refs 0.
typedef struct DevRecord {
    cudaEvent_t ev;
    int refs;                // atomic
    struct Ctx *x;
} DevRecord;

#define EVENT_RECORDS 64     // records of one event that host waits may hold at once

struct ZeroEvent {
    DevRecord *rec[EVENT_RECORDS];   // created on demand
    DevRecord *cur;          // the latest device record (NULL: none yet)
    ZeroEvent *host;         // its twin for records on host streams
    int on_host;             // the latest record was on a host stream
    ZeroStream *hs;          // that host stream, and the count its record completes
    unsigned long long hseq;
    struct Ctx *x;
};

typedef struct Ctx {
    ZeroComm *c;
    ZeroNccl *nccl;
    int device;
    ZeroStream main;
    const ZeroBackend *hostb; // runs the host streams (CPU threads) and their kernels
    ZeroBackend table;
} Ctx;

static Ctx *ctx_of(const ZeroBackend *b) { return (Ctx *)b->ctx; }

static void fail(const Ctx *x, const char *call, cudaError_t e, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 4, 5)));
static void fail(const Ctx *x, const char *call, cudaError_t e, const char *fmt, ...) {
    char msg[1024];
    int len = snprintf(msg, sizeof msg, "zero: rank %d: ", x->c->rank);
    va_list ap;
    va_start(ap, fmt);
    len += vsnprintf(msg + len, sizeof msg - (size_t)len, fmt, ap);
    va_end(ap);
    if (len < (int)sizeof msg)
        snprintf(msg + len, sizeof msg - (size_t)len, ": %s failed: %s (%s)", call, cudaGetErrorString(e), cudaGetErrorName(e));
    zero_comm_park_if_ending();     // an error caused by the watchdog's abort: it says why
    fprintf(stderr, "%s\n", msg);   // one write: lines of several ranks do not interleave
    zero_comm_abort(x->c, 1);
}

#define CK(x, call, ...)                                              \
    do {                                                              \
        cudaError_t e_ = (call);                                      \
        if (e_ != cudaSuccess) fail((x), #call, e_, __VA_ARGS__);     \
    } while (0)
// after a launch: a bad configuration (or an earlier asynchronous fault) shows here
#define LAUNCHED(x, ...) CK(x, cudaGetLastError(), __VA_ARGS__)

static unsigned grid_for(size_t work) {
    size_t g = (work + THREADS - 1) / THREADS;
    return g == 0 ? 1u : g > MAX_GRID ? MAX_GRID : (unsigned)g;
}

static int aligned(const void *p, size_t a) { return ((uintptr_t)p % a) == 0; }

// ---------------------------------------------------------------- kernels

#define GRID_LOOP(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

__device__ __forceinline__ float elem(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float elem(const uint16_t *p, size_t i) { return __uint_as_float((uint32_t)p[i] << 16); }

// Four consecutive elements from a 4-element-aligned address.
__device__ __forceinline__ void elem4(const float *p, float r[4]) {
    float4 v = *reinterpret_cast<const float4 *>(p);
    r[0] = v.x; r[1] = v.y; r[2] = v.z; r[3] = v.w;
}
__device__ __forceinline__ void elem4(const uint16_t *p, float r[4]) {
    uint2 v = *reinterpret_cast<const uint2 *>(p);   // little-endian: element 0 in the low half
    r[0] = __uint_as_float(v.x << 16); r[1] = __uint_as_float(v.x & 0xffff0000u);
    r[2] = __uint_as_float(v.y << 16); r[3] = __uint_as_float(v.y & 0xffff0000u);
}

// acc[i] += ((s_0 + s_1) + s_2) + ...: the host's order, one element per thread (ACC
// false: acc[i] = the sum, sum_slices).

// Elements i..i+3 of that, with vector loads (acc, src and stride aligned).
template <typename T, bool ACC>
__device__ __forceinline__ void reduce_four(float *acc, const T *src, size_t stride, int nslices, size_t i) {
    float s[4], y[4];
    elem4(src + i, s);
    for (int q = 1; q < nslices; q++) {
        elem4(src + (size_t)q * stride + i, y);
        for (int k = 0; k < 4; k++) s[k] = __fadd_rn(s[k], y[k]);
    }
    float4 a = ACC ? *reinterpret_cast<float4 *>(acc + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    a.x = ACC ? __fadd_rn(a.x, s[0]) : s[0]; a.y = ACC ? __fadd_rn(a.y, s[1]) : s[1];
    a.z = ACC ? __fadd_rn(a.z, s[2]) : s[2]; a.w = ACC ? __fadd_rn(a.w, s[3]) : s[3];
    *reinterpret_cast<float4 *>(acc + i) = a;
}

// Element i of reduce_slices (ACC: added to the accumulator).
template <typename T, bool ACC>
__device__ __forceinline__ void reduce_one(float *acc, const T *src, size_t stride, int nslices, size_t i) {
    float sum = elem(src, i);
    for (int q = 1; q < nslices; q++) sum = __fadd_rn(sum, elem(src, (size_t)q * stride + i));
    acc[i] = ACC ? __fadd_rn(acc[i], sum) : sum;
}

template <typename T, bool ACC>
__global__ void reduce_slices_kernel(float *acc, const T *src, size_t stride, int nslices, size_t n) {
    GRID_LOOP(i, n) reduce_one<T, ACC>(acc, src, stride, nslices, i);
}

// The same, four elements per thread with vector loads (acc, src and stride aligned).
template <typename T, bool ACC>
__global__ void reduce_slices_vec4(float *acc, const T *src, size_t stride, int nslices, size_t n4) {
    GRID_LOOP(g, n4) reduce_four<T, ACC>(acc, src, stride, nslices, 4 * g);
}

__device__ __forceinline__ void adamw_one(float *p, const float *g, float *m, float *v, size_t i, const AdamWParams *a,
                                          int decay) {
    float mi = m[i], vi = v[i];
    p[i] = adamw_element(p[i], g[i], &mi, &vi, a, decay);
    m[i] = mi;
    v[i] = vi;
}

// Elements i..i+3, with vector loads and stores (the four arrays 16-byte aligned, i % 4 == 0).
__device__ __forceinline__ void adamw_four(float *p, const float *g, float *m, float *v, size_t i, const AdamWParams *a,
                                           int decay) {
    float4 pp = *(float4 *)(p + i), gg = *(const float4 *)(g + i), mm = *(float4 *)(m + i), vv = *(float4 *)(v + i);
    pp.x = adamw_element(pp.x, gg.x, &mm.x, &vv.x, a, decay);
    pp.y = adamw_element(pp.y, gg.y, &mm.y, &vv.y, a, decay);
    pp.z = adamw_element(pp.z, gg.z, &mm.z, &vv.z, a, decay);
    pp.w = adamw_element(pp.w, gg.w, &mm.w, &vv.w, a, decay);
    *(float4 *)(p + i) = pp;
    *(float4 *)(m + i) = mm;
    *(float4 *)(v + i) = vv;
}

// Elements i..i+3 of the bf16 refresh (dst 8-byte and master 16-byte aligned, i % 4 == 0);
// element j is element gidx0 + j of the model.
__device__ __forceinline__ void refresh_four(uint16_t *dst, const float *master, size_t i, uint64_t seed, int t,
                                             uint64_t gidx0) {
    const float4 x = *(const float4 *)(master + i);
    const uint64_t g = gidx0 + i;
    const uint32_t r0 = adamw_round_bf16_at(x.x, seed, (uint64_t)t, g);
    const uint32_t r1 = adamw_round_bf16_at(x.y, seed, (uint64_t)t, g + 1);
    const uint32_t r2 = adamw_round_bf16_at(x.z, seed, (uint64_t)t, g + 2);
    const uint32_t r3 = adamw_round_bf16_at(x.w, seed, (uint64_t)t, g + 3);
    *(uint2 *)(dst + i) = make_uint2(r0 | (r1 << 16), r2 | (r3 << 16));
}


// Norm blocks [blk0, blk0 + nblk) of x: lane l of a warp sums block first + l left to
// right (llmc/numerics/adamw.h's adamw_sumsq_warp, the routine train_gpt2cu's norm runs too).
__global__ void __launch_bounds__(SQ_WARPS * 32)
sumsq_blocks_kernel(const float *x, size_t n, size_t blk0, size_t nblk, double *partials) {
    __shared__ AdamWSumsqTile tiles[SQ_WARPS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t first = blk0 + ((size_t)blockIdx.x * SQ_WARPS + warp) * 32;
    if (first >= blk0 + nblk) return;   // uniform per warp; no block-wide barrier follows
    const size_t blk = first + lane, lo = blk * ZERO_SUMSQ_BLOCK;
    const int mine = blk < blk0 + nblk;
    const int len = !mine ? 0 : n - lo < ZERO_SUMSQ_BLOCK ? (int)(n - lo) : ZERO_SUMSQ_BLOCK;
    const double sum = adamw_sumsq_warp(mine ? x + lo : NULL, len, &tiles[warp]);
    if (mine) partials[blk - blk0] = sum;
}

// total = (((start + p_0) + p_1) + ...) by one thread, start = 0 on the first pass; the
// other threads only stage partials into shared memory. Writes *out on the last pass.
__global__ void sumsq_total_kernel(const double *partials, size_t np, double *total, int first_pass, double *out) {
    __shared__ double buf[1024];
    double acc = first_pass ? 0.0 : *total;
    for (size_t base = 0; base < np; base += 1024) {
        size_t m = np - base < 1024 ? np - base : 1024;
        for (size_t i = threadIdx.x; i < m; i += blockDim.x) buf[i] = partials[base + i];
        __syncthreads();
        if (threadIdx.x == 0)
            for (size_t k = 0; k < m; k++) acc = __dadd_rn(acc, buf[k]);
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        if (out) *out = acc;
        else *total = acc;
    }
}

// Many-range kernels (backend.h's *_parts): a launch takes up to PART_BATCH ranges in its
// parameters (under CUDA's 4 KB), so the step's hundred-odd tensors cost a few launches and
// no table in device memory. Range k owns blocks [first[k], first[k+1]); a block finds its
// range by binary search. Each block covers PART_ELEMS elements of its range, four per
// thread: a float4 at 4 * thread where the range's pointers allow, else elements
// thread + j * THREADS. The per-element work is the one-range kernels', so the bits are too.
#define PART_BATCH 48
#define PART_ELEMS (THREADS * 4)
#define PART_VEC 2           // flags: bit 0 decay, bit 1 the vector path

struct AdamwBatch {
    int n;
    unsigned first[PART_BATCH + 1];
    float *p[PART_BATCH], *m[PART_BATCH], *v[PART_BATCH];
    const float *g[PART_BATCH];
    size_t len[PART_BATCH];
    unsigned char flags[PART_BATCH];
};

struct ReduceBatch {
    int n;
    unsigned first[PART_BATCH + 1];
    float *acc[PART_BATCH];
    const void *src[PART_BATCH];
    size_t stride[PART_BATCH], len[PART_BATCH];
    unsigned char flags[PART_BATCH];
};

struct RefreshBatch {
    int n;
    unsigned first[PART_BATCH + 1];
    uint16_t *dst[PART_BATCH];
    const float *master[PART_BATCH];
    size_t len[PART_BATCH];
    uint64_t gidx0[PART_BATCH];
    unsigned char flags[PART_BATCH];
};

// first[k]: norm blocks (ZERO_SUMSQ_BLOCK elements) before range k; the partials scratch
// holds them all (at most SQ_PASS a launch).
struct SumsqBatch {
    int n, slot0;
    unsigned first[PART_BATCH + 1];
    const float *x[PART_BATCH];
    size_t len[PART_BATCH];
};

// The range that owns block blk: the last k with first[k] <= blk (ranges are never empty).
__device__ __forceinline__ int part_of(const unsigned *first, int n, unsigned blk) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (first[mid] <= blk) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

__global__ void __launch_bounds__(THREADS) adamw_parts_kernel(AdamwBatch bt, AdamWParams a) {
    const int k = part_of(bt.first, bt.n, blockIdx.x), decay = bt.flags[k] & 1;
    const size_t base = (size_t)(blockIdx.x - bt.first[k]) * PART_ELEMS, len = bt.len[k];
    float *p = bt.p[k], *m = bt.m[k], *v = bt.v[k];
    const float *g = bt.g[k];
    if (bt.flags[k] & PART_VEC) {
        const size_t i = base + 4 * threadIdx.x;
        if (i + 4 <= len) adamw_four(p, g, m, v, i, &a, decay);
        else
            for (size_t e = i; e < len; e++) adamw_one(p, g, m, v, e, &a, decay);   // the range's partial last four
        return;
    }
    for (int j = 0; j < 4; j++) {
        const size_t e = base + threadIdx.x + (size_t)j * THREADS;
        if (e < len) adamw_one(p, g, m, v, e, &a, decay);
    }
}

template <typename T>
__global__ void __launch_bounds__(THREADS) reduce_parts_kernel(ReduceBatch bt, int nslices) {
    const int k = part_of(bt.first, bt.n, blockIdx.x);
    const size_t base = (size_t)(blockIdx.x - bt.first[k]) * PART_ELEMS, len = bt.len[k], stride = bt.stride[k];
    float *acc = bt.acc[k];
    const T *src = (const T *)bt.src[k];
    if (bt.flags[k] & PART_VEC) {
        const size_t i = base + 4 * threadIdx.x;
        if (i + 4 <= len) reduce_four<T, true>(acc, src, stride, nslices, i);
        else
            for (size_t e = i; e < len; e++) reduce_one<T, true>(acc, src, stride, nslices, e);
        return;
    }
    for (int j = 0; j < 4; j++) {
        const size_t e = base + threadIdx.x + (size_t)j * THREADS;
        if (e < len) reduce_one<T, true>(acc, src, stride, nslices, e);
    }
}

__global__ void __launch_bounds__(THREADS) refresh_parts_kernel(RefreshBatch bt, uint64_t seed, int t) {
    const int k = part_of(bt.first, bt.n, blockIdx.x);
    const size_t base = (size_t)(blockIdx.x - bt.first[k]) * PART_ELEMS, len = bt.len[k];
    uint16_t *dst = bt.dst[k];
    const float *master = bt.master[k];
    const uint64_t g0 = bt.gidx0[k];
    if (bt.flags[k] & PART_VEC) {
        const size_t i = base + 4 * threadIdx.x;
        if (i + 4 <= len) refresh_four(dst, master, i, seed, t, g0);
        else
            for (size_t e = i; e < len; e++) dst[e] = adamw_round_bf16_at(master[e], seed, (uint64_t)t, g0 + e);
        return;
    }
    for (int j = 0; j < 4; j++) {
        const size_t e = base + threadIdx.x + (size_t)j * THREADS;
        if (e < len) dst[e] = adamw_round_bf16_at(master[e], seed, (uint64_t)t, g0 + e);
    }
}

// sumsq_blocks_kernel over the batch's norm blocks, a lane per block
__global__ void __launch_bounds__(SQ_WARPS * 32) sumsq_parts_blocks_kernel(SumsqBatch bt, double *partials) {
    __shared__ AdamWSumsqTile tiles[SQ_WARPS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned total = bt.first[bt.n];
    const unsigned first = (blockIdx.x * SQ_WARPS + warp) * 32;
    if (first >= total) return;   // uniform per warp; no block-wide barrier follows
    const unsigned blk = first + lane;
    const float *row = NULL;
    int len = 0;
    if (blk < total) {
        const int k = part_of(bt.first, bt.n, blk);
        const size_t lo = (size_t)(blk - bt.first[k]) * ZERO_SUMSQ_BLOCK;
        row = bt.x[k] + lo;
        len = bt.len[k] - lo < ZERO_SUMSQ_BLOCK ? (int)(bt.len[k] - lo) : ZERO_SUMSQ_BLOCK;
    }
    const double sum = adamw_sumsq_warp(row, len, &tiles[warp]);
    if (blk < total) partials[blk] = sum;
}

// a thread per range: its block sums left to right from 0, as sumsq_total_kernel adds them
__global__ void sumsq_parts_total_kernel(SumsqBatch bt, const double *partials, double *slots) {
    const int k = threadIdx.x;
    if (k >= bt.n) return;
    double acc = 0.0;
    for (unsigned b = bt.first[k]; b < bt.first[k + 1]; b++) acc = __dadd_rn(acc, partials[b]);
    slots[bt.slot0 + k] = acc;
}

// Subnormal results and inputs, as a flush-to-zero build would lose them.
__global__ void ftz_probe_kernel(float normal_min, float half, float subnormal, double *out) {
    out[0] = (double)__fmul_rn(normal_min, half);
    out[1] = (double)subnormal;
    out[2] = (double)__fadd_rn(subnormal, subnormal);
}

// ---------------------------------------------------------------- memory

// Host memory is page-aligned (backend.h: the NVMe engine's O_DIRECT buffers come from here),
// which cudaMallocHost does not promise: page-aligned memory from the C library, then pinned
// with cudaHostRegister.
static void *c_alloc(const ZeroBackend *b, ZeroMemKind kind, size_t bytes) {
    Ctx *x = ctx_of(b);
    size_t a = kind == ZERO_MEM_HOST ? 4096 : 64, n = (bytes + a - 1) / a * a;
    if (n == 0) n = a;
    void *p = NULL;
    cudaError_t e;
    if (kind == ZERO_MEM_HOST) {
        if (posix_memalign(&p, a, n) != 0) {
            fprintf(stderr, "zero: rank %d: out of host memory allocating %zu bytes\n", x->c->rank, n);
            return NULL;
        }
        e = cudaHostRegister(p, n, cudaHostRegisterDefault);
        if (e != cudaSuccess) free(p);
    } else {
        e = cudaMalloc(&p, n);
    }
    if (e != cudaSuccess) {
        fprintf(stderr, "zero: rank %d: %s of %zu bytes on device %d failed: %s\n", x->c->rank,
                kind == ZERO_MEM_HOST ? "cudaHostRegister" : "cudaMalloc", n, x->device, cudaGetErrorString(e));
        zero_cuda_take_back(e);   // not sticky: keep it from being blamed on the next launch
        return NULL;
    }
    return p;
}

static void c_free(const ZeroBackend *b, ZeroMemKind kind, void *p) {
    if (!p) return;
    Ctx *x = ctx_of(b);
    cudaError_t e = kind == ZERO_MEM_HOST ? cudaHostUnregister(p) : cudaFree(p);
    if (e != cudaSuccess)
        fprintf(stderr, "zero: rank %d: warning: %s failed: %s\n", x->c->rank,
                kind == ZERO_MEM_HOST ? "cudaHostUnregister" : "cudaFree", cudaGetErrorString(e));
    if (kind == ZERO_MEM_HOST) free(p);
}

static void c_memset0(const ZeroBackend *b, void *p, size_t bytes, ZeroStream *s) {
    Ctx *x = ctx_of(b);
    if (s->host) return x->hostb->memset0(x->hostb, p, bytes, s->host);
    if (bytes == 0) return;
    GPU_SPAN(s, "memset", "");
    CK(x, cudaMemsetAsync(p, 0, bytes, s->s), "memset0 of %zu bytes", bytes);
}

// On a host stream both sides are host memory (a CPU copy); on a device stream either side
// may be device or pinned host memory (unified addressing tells the runtime which).
static void c_copy(const ZeroBackend *b, void *dst, ZeroMemKind dk, const void *src, ZeroMemKind sk, size_t bytes,
                   ZeroStream *s) {
    Ctx *x = ctx_of(b);
    if (s->host) return x->hostb->copy(x->hostb, dst, dk, src, sk, bytes, s->host);
    if (bytes == 0 || dst == src) return;
    GPU_SPAN(s, "copy", "");
    CK(x, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s->s), "copy of %zu bytes", bytes);
}

// ---------------------------------------------------------------- ordering

static cudaError_t stream_buffers(ZeroStream *s) {
    cudaError_t e = cudaHostAlloc((void **)&s->slots, SLOTS * sizeof(double), cudaHostAllocMapped);
    if (e == cudaSuccess) e = cudaHostGetDevicePointer((void **)&s->dslots, s->slots, 0);
    if (e == cudaSuccess) e = cudaMalloc((void **)&s->partials, (SQ_PASS + 1) * sizeof(double));
    if (e == cudaSuccess && !(s->outs = (double **)malloc(SLOTS * sizeof(double *)))) e = cudaErrorMemoryAllocation;
    return e;
}

// A device stream waiting for a host stream: one thread spins (sleeping) until the host
// stream's count of passed records reaches target. A host function that blocks would be
// simpler, but CUDA forbids a host function to wait for work that itself depends on CUDA
// (the host stream's work calls cudaEventSynchronize), and may run every host function on
// one thread: a deadlock.
__global__ void wait_host_count(const volatile unsigned long long *count, unsigned long long target) {
    while (*count < target) __nanosleep(2000);
    __threadfence_system();   // what the host wrote before counting is seen after
}

static void stream_release(ZeroStream *s) {
    if (s->slots) cudaFreeHost(s->slots);
    if (s->partials) cudaFree(s->partials);
    free(s->outs);
    s->slots = s->dslots = s->partials = NULL;
    s->outs = NULL;
}

static ZeroStream *c_main_stream(const ZeroBackend *b) { return &ctx_of(b)->main; }

// collectives: the stream gets its own communicators (stream_create), or none (stream_create_copy)
static ZeroStream *make_stream(const ZeroBackend *b, int collectives) {
    Ctx *x = ctx_of(b);
    ZeroStream *s = (ZeroStream *)calloc(1, sizeof *s);
    if (!s) return NULL;
    s->track = -1;
    int least = 0, greatest = 0;
    // collectives first: a gather the model waits for should not queue behind its kernels
    cudaError_t e = cudaDeviceGetStreamPriorityRange(&least, &greatest);
    if (e == cudaSuccess) e = cudaStreamCreateWithPriority(&s->s, cudaStreamNonBlocking, greatest);
    if (e == cudaSuccess) {
        s->owned = 1;
        e = stream_buffers(s);
    }
    if (e != cudaSuccess) {
        fprintf(stderr, "zero: rank %d: creating a stream and its buffers on device %d failed: %s\n", x->c->rank,
                x->device, cudaGetErrorString(e));
        stream_release(s);
        if (s->owned) cudaStreamDestroy(s->s);
        free(s);
        return NULL;
    }
    // its own NCCL communicator: a gather on one stream never queues behind a reduction on
    // another inside NCCL (which runs one communicator's operations in order)
    if (collectives && zero_nccl_stream_open(x->nccl, s->s) != 0) {
        stream_release(s);
        cudaStreamDestroy(s->s);
        free(s);
        return NULL;
    }
    return s;
}

static ZeroStream *c_stream_create(const ZeroBackend *b) { return make_stream(b, 1); }
static ZeroStream *c_stream_create_copy(const ZeroBackend *b) { return make_stream(b, 0); }

static void set_device(void *arg) { cudaSetDevice(((Ctx *)arg)->device); }

// A host stream: the host backend's stream, with which CPU threads run its work. Its
// thread's current device is this backend's (its work may call the CUDA runtime).
static ZeroStream *c_stream_create_host(const ZeroBackend *b) {
    Ctx *x = ctx_of(b);
    ZeroStream *s = (ZeroStream *)calloc(1, sizeof *s);
    if (!s) return NULL;
    s->track = -1;
    if (!(s->host = x->hostb->stream_create_host(x->hostb))) {
        free(s);
        return NULL;
    }
    cudaError_t e = cudaHostAlloc((void **)&s->done_h, sizeof *s->done_h, cudaHostAllocMapped);
    if (e == cudaSuccess) e = cudaHostGetDevicePointer((void **)&s->done_d, s->done_h, 0);
    if (e != cudaSuccess) {
        fprintf(stderr, "zero: rank %d: the progress counter of a host stream: %s\n", x->c->rank, cudaGetErrorString(e));
        x->hostb->stream_destroy(x->hostb, s->host);
        if (s->done_h) cudaFreeHost(s->done_h);
        free(s);
        return NULL;
    }
    *s->done_h = 0;
    x->hostb->host_call(x->hostb, s->host, set_device, x);
    return s;
}

static void c_stream_sync(const ZeroBackend *b, ZeroStream *s) {
    if (s->host) return ctx_of(b)->hostb->stream_sync(ctx_of(b)->hostb, s->host);
    CK(ctx_of(b), cudaStreamSynchronize(s->s), "stream_sync");
    zero_comm_park_if_ending();   // released by the watchdog's abort: no results here
    zero_trace_gpu_drain(0);
    for (int i = 0; i < s->npending; i++) *s->outs[i] = s->slots[i];
    s->npending = 0;
}

static void c_stream_destroy(const ZeroBackend *b, ZeroStream *s) {
    if (!s || s == &ctx_of(b)->main) return;
    if (s->host) {
        ctx_of(b)->hostb->stream_destroy(ctx_of(b)->hostb, s->host);
        cudaFreeHost(s->done_h);
        free(s);
        return;
    }
    c_stream_sync(b, s);
    zero_nccl_forget_stream(ctx_of(b)->nccl, s->s);
    stream_release(s);
    cudaStreamDestroy(s->s);
    free(s);
}

static ZeroEvent *c_event_create(const ZeroBackend *b) {
    Ctx *x = ctx_of(b);
    ZeroEvent *e = (ZeroEvent *)calloc(1, sizeof *e);
    if (!e) return NULL;
    e->x = x;
    if (!(e->host = x->hostb->event_create(x->hostb))) {
        free(e);
        return NULL;
    }
    return e;
}

static void c_event_destroy(const ZeroBackend *b, ZeroEvent *e) {
    if (!e) return;
    for (int i = 0; i < EVENT_RECORDS && e->rec[i]; i++) {
        cudaEventDestroy(e->rec[i]->ev);
        free(e->rec[i]);
    }
    ctx_of(b)->hostb->event_destroy(ctx_of(b)->hostb, e->host);
    free(e);
}

// A record no host wait holds (reused, or made): where the next device record goes.
static DevRecord *free_record(Ctx *x, ZeroEvent *e) {
    for (int i = 0; i < EVENT_RECORDS; i++) {
        DevRecord *r = e->rec[i];
        if (r && __atomic_load_n(&r->refs, __ATOMIC_ACQUIRE) == 0) return r;
        if (r) continue;
        r = (DevRecord *)calloc(1, sizeof *r);
        if (!r) fail(x, "calloc", cudaErrorMemoryAllocation, "an event record");
        r->x = x;
        CK(x, cudaEventCreateWithFlags(&r->ev, cudaEventDisableTiming), "an event record");
        e->rec[i] = r;
        return r;
    }
    fail(x, "event_record", cudaErrorNotReady, "%d host-stream waits hold every record of one event", EVENT_RECORDS);
}

static void bump_done(void *arg) {   // on the host stream's thread, at a record
    ZeroStream *s = (ZeroStream *)arg;
    __atomic_add_fetch(s->done_h, 1ull, __ATOMIC_RELEASE);
}

// A wait sees the latest record at the time it is enqueued (backend.h, as in CUDA).
static void c_event_record(const ZeroBackend *b, ZeroEvent *e, ZeroStream *s) {
    Ctx *x = ctx_of(b);
    e->on_host = s->host != NULL;
    if (s->host) {
        x->hostb->event_record(x->hostb, e->host, s->host);   // for host streams' waits
        e->hs = s;                                            // and device streams' (wait_host_count)
        e->hseq = ++s->recorded;
        x->hostb->host_call(x->hostb, s->host, bump_done, s);
        return;
    }
    DevRecord *r = free_record(x, e);
    CK(x, cudaEventRecord(r->ev, s->s), "event_record");
    e->cur = r;
}

// A host stream waiting for a device record: its CPU thread (not a CUDA callback: it may
// call CUDA) waits for that record's own event, then lets the record be reused.
static void wait_device_record(void *arg) {
    DevRecord *r = (DevRecord *)arg;
    cudaSetDevice(r->x->device);   // this CPU thread's current device
    CK(r->x, cudaEventSynchronize(r->ev), "a host stream's wait for a device event");
    zero_comm_park_if_ending();   // the host work after it must not run on aborted data
    __atomic_sub_fetch(&r->refs, 1, __ATOMIC_RELEASE);
}

static void c_stream_wait(const ZeroBackend *b, ZeroStream *s, ZeroEvent *e) {
    Ctx *x = ctx_of(b);
    if (s->host && e->on_host) return x->hostb->stream_wait(x->hostb, s->host, e->host);
    if (s->host) {
        if (!e->cur) return;   // never recorded: nothing to wait for
        __atomic_add_fetch(&e->cur->refs, 1, __ATOMIC_ACQ_REL);
        return x->hostb->host_call(x->hostb, s->host, wait_device_record, e->cur);
    }
    if (!e->on_host) {
        if (e->cur) CK(x, cudaStreamWaitEvent(s->s, e->cur->ev, 0), "stream_wait");
        return;
    }
    if (__atomic_load_n(e->hs->done_h, __ATOMIC_ACQUIRE) >= e->hseq) return;   // passed already
    wait_host_count<<<1, 1, 0, s->s>>>(e->hs->done_d, e->hseq);
    LAUNCHED(x, "a device stream's wait for a host stream");
}

static void c_host_call(const ZeroBackend *b, ZeroStream *s, void (*fn)(void *), void *arg) {
    Ctx *x = ctx_of(b);
    if (!s->host) {
        fprintf(stderr, "zero: rank %d: host_call on a device stream\n", x->c->rank);
        zero_comm_abort(x->c, 1);
    }
    x->hostb->host_call(x->hostb, s->host, fn, arg);
}

// A trace names the threads that run host streams, and gives each device stream a GPU
// track of its own.
static void c_stream_name(const ZeroBackend *b, ZeroStream *s, const char *name) {
    Ctx *x = ctx_of(b);
    if (s->host) {
        if (x->hostb->stream_name) x->hostb->stream_name(x->hostb, s->host, name);
        return;
    }
    char track[64];
    snprintf(track, sizeof track, "GPU: %s", name);
    s->track = zero_trace_gpu_track(track);
}

static int c_trace_begin(const ZeroBackend *b, ZeroStream *s) {
    (void)b;
    return s->host ? -1 : zero_trace_gpu_begin(s->s, s->track);
}

static void c_trace_end(const ZeroBackend *b, ZeroStream *s, int span, const char *name, const char *label) {
    (void)b;
    if (!s->host) zero_trace_gpu_end(span, s->s, name, label);
}

// ---------------------------------------------------------------- collectives

static Ctx *coll_ctx(const ZeroBackend *b, ZeroComm *c, const char *op) {
    Ctx *x = ctx_of(b);
    if (c != x->c) {
        fprintf(stderr, "zero: rank %d: %s on a communicator other than the one the CUDA backend was made for\n",
                x->c->rank, op);
        zero_comm_abort(x->c, 1);
    }
    return x;
}

static void c_all_gather(const ZeroBackend *b, ZeroComm *c, ZeroGroup g, const ZeroCollPart *parts, int nparts, ZeroDType dt,
                         ZeroStream *s, const char *what) {
    GPU_SPAN(s, "all_gather", what);
    zero_nccl_all_gather(coll_ctx(b, c, "all_gather")->nccl, g, parts, nparts, dt, s->s, what);
}

static void c_all_to_all(const ZeroBackend *b, ZeroComm *c, ZeroGroup g, const ZeroCollPart *parts, int nparts, ZeroDType dt,
                         ZeroStream *s, const char *what) {
    GPU_SPAN(s, "all_to_all", what);
    zero_nccl_all_to_all(coll_ctx(b, c, "all_to_all")->nccl, g, parts, nparts, dt, s->s, what);
}

static void c_reduce_scatter(const ZeroBackend *b, ZeroComm *c, ZeroGroup g, const ZeroCollPart *parts, int nparts,
                             ZeroDType dt, ZeroStream *s, const char *what) {
    GPU_SPAN(s, "reduce_scatter", what);
    zero_nccl_reduce_scatter(coll_ctx(b, c, "reduce_scatter")->nccl, g, parts, nparts, dt, s->s, what);
}

static void c_allreduce_sum_f64(const ZeroBackend *b, ZeroComm *c, double *values, int n, const char *what) {
    zero_nccl_allreduce_sum_f64(coll_ctx(b, c, "allreduce_sum_f64")->nccl, values, n, what);
}

static void c_gather_f64(const ZeroBackend *b, ZeroComm *c, const double *values, int n, double *all, const char *what) {
    zero_nccl_gather_f64(coll_ctx(b, c, "gather_f64")->nccl, values, n, all, what);
}

// ---------------------------------------------------------------- kernel launches

template <typename T, bool ACC>
static void launch_reduce(Ctx *x, float *acc, const T *src, size_t stride, int nslices, size_t n, cudaStream_t s) {
    size_t done = 0;
    if (aligned(acc, 16) && aligned(src, 4 * sizeof(T)) && stride % 4 == 0) {
        size_t n4 = n / 4;
        if (n4) {
            reduce_slices_vec4<T, ACC><<<grid_for(n4), THREADS, 0, s>>>(acc, src, stride, nslices, n4);
            LAUNCHED(x, "reduce_slices of %zu elements x %d slices", n, nslices);
        }
        done = 4 * n4;
    }
    if (done < n) {
        reduce_slices_kernel<T, ACC><<<grid_for(n - done), THREADS, 0, s>>>(acc + done, src + done, stride, nslices, n - done);
        LAUNCHED(x, "reduce_slices of %zu elements x %d slices", n, nslices);
    }
}

static void c_reduce_slices(const ZeroBackend *b, float *acc, const void *src, size_t stride, int nslices, size_t n,
                            ZeroDType dt, ZeroStream *s) {
    Ctx *x = ctx_of(b);
    if (s->host) return x->hostb->reduce_slices(x->hostb, acc, src, stride, nslices, n, dt, s->host);
    if (nslices <= 0 || n == 0) return;
    GPU_SPAN(s, "reduce", "");
    if (dt == ZERO_F32) launch_reduce<float, true>(x, acc, (const float *)src, stride, nslices, n, s->s);
    else launch_reduce<uint16_t, true>(x, acc, (const uint16_t *)src, stride, nslices, n, s->s);
}

static void c_sum_slices(const ZeroBackend *b, float *out, const void *src, size_t stride, int nslices, size_t n,
                         ZeroDType dt, ZeroStream *s) {
    Ctx *x = ctx_of(b);
    if (s->host) return x->hostb->sum_slices(x->hostb, out, src, stride, nslices, n, dt, s->host);
    if (nslices <= 0 || n == 0) return;
    GPU_SPAN(s, "sum", "");
    if (dt == ZERO_F32) launch_reduce<float, false>(x, out, (const float *)src, stride, nslices, n, s->s);
    else launch_reduce<uint16_t, false>(x, out, (const uint16_t *)src, stride, nslices, n, s->s);
}

// One range: the many-range kernel with one part (adamw_parts_kernel).
static void c_adamw_parts(const ZeroBackend *b, const ZeroAdamwPart *parts, int nparts, const AdamWParams *p,
                          ZeroStream *s);
static void c_refresh_parts(const ZeroBackend *b, const ZeroRefreshPart *parts, int nparts, ZeroDType dt,
                            uint64_t seed, int t, ZeroStream *s);

static void c_adamw(const ZeroBackend *b, float *param, const float *grad, float *m, float *v, size_t n,
                    const AdamWParams *p, int decay, ZeroStream *s) {
    const ZeroAdamwPart one = {param, grad, m, v, n, decay};
    c_adamw_parts(b, &one, 1, p, s);
}

static void c_refresh(const ZeroBackend *b, void *dst, ZeroDType dt, const float *master, size_t n, uint64_t seed,
                      int t, uint64_t gidx0, ZeroStream *s) {
    Ctx *x = ctx_of(b);
    if (s->host) return x->hostb->refresh(x->hostb, dst, dt, master, n, seed, t, gidx0, s->host);
    if (n == 0) return;
    if (dt == ZERO_F32) {   // a copy
        GPU_SPAN(s, "refresh", "");
        if (dst != master)
            CK(x, cudaMemcpyAsync(dst, master, n * sizeof(float), cudaMemcpyDeviceToDevice, s->s),
               "refresh of %zu fp32 elements", n);
        return;
    }
    const ZeroRefreshPart one = {dst, master, n, gidx0};
    c_refresh_parts(b, &one, 1, dt, seed, t, s);
}

static void c_sum_squares(const ZeroBackend *b, const float *xv, size_t n, double *out, ZeroStream *s) {
    Ctx *x = ctx_of(b);
    if (s->host) return x->hostb->sum_squares(x->hostb, xv, n, out, s->host);
    GPU_SPAN(s, "sum_squares", "");
    if (s->npending == SLOTS) c_stream_sync(b, s);   // only after SLOTS results without a sync
    int slot = s->npending;
    if (n == 0) {
        s->slots[slot] = 0.0;   // the device never writes this slot
    } else {
        size_t nblk = (n + ZERO_SUMSQ_BLOCK - 1) / ZERO_SUMSQ_BLOCK;
        double *total = s->partials + SQ_PASS;
        for (size_t b0 = 0; b0 < nblk; b0 += SQ_PASS) {
            size_t nb = nblk - b0 < SQ_PASS ? nblk - b0 : SQ_PASS;
            unsigned blocks = (unsigned)((nb + 32 * SQ_WARPS - 1) / (32 * SQ_WARPS));
            sumsq_blocks_kernel<<<blocks, SQ_WARPS * 32, 0, s->s>>>(xv, n, b0, nb, s->partials);
            LAUNCHED(x, "sum_squares of %zu elements (blocks %zu..%zu)", n, b0, b0 + nb);
            int last = b0 + nb == nblk;
            sumsq_total_kernel<<<1, THREADS, 0, s->s>>>(s->partials, nb, total, b0 == 0, last ? s->dslots + slot : NULL);
            LAUNCHED(x, "sum_squares of %zu elements (adding %zu block sums)", n, nb);
        }
    }
    s->outs[slot] = out;
    s->npending++;
}

// Blocks a range of n elements takes in a many-range launch (a launch's grid stays under
// 2^31 blocks: 2^41 elements; a range past that is not a model's).
static unsigned part_blocks(const Ctx *x, size_t n, size_t per_block) {
    const size_t blocks = (n + per_block - 1) / per_block;
    if (blocks > 0x7fffffffu) {
        fprintf(stderr, "zero: rank %d: a kernel range of %zu elements needs %zu blocks: past CUDA's grid\n",
                x->c->rank, n, blocks);
        zero_comm_abort(x->c, 1);
    }
    return (unsigned)blocks;
}

// Adds a range of n elements to batch bt, launching what bt holds first when it is full;
// returns the range's index in bt, or -1 for an empty range (nothing to do).
template <class Batch, class Launch>
static int batch_add(const Ctx *x, Batch &bt, size_t n, Launch launch) {
    if (n == 0) return -1;
    const unsigned nb = part_blocks(x, n, PART_ELEMS);
    if (bt.n == PART_BATCH || nb > 0x7fffffffu - bt.first[bt.n]) {
        launch();
        bt.n = 0;
    }
    const int k = bt.n++;
    bt.first[k + 1] = bt.first[k] + nb;
    return k;
}

static void c_adamw_parts(const ZeroBackend *b, const ZeroAdamwPart *parts, int nparts, const AdamWParams *p,
                          ZeroStream *s) {
    Ctx *x = ctx_of(b);
    if (s->host) return zero_adamw_parts(x->hostb, parts, nparts, p, s->host);
    GPU_SPAN(s, "adamw", "parts");
    AdamwBatch bt;
    bt.n = 0;
    bt.first[0] = 0;
    auto launch = [&] {
        adamw_parts_kernel<<<bt.first[bt.n], THREADS, 0, s->s>>>(bt, *p);
        LAUNCHED(x, "adamw of %d ranges (%u blocks)", bt.n, bt.first[bt.n]);
    };
    for (int i = 0; i < nparts; i++) {
        const ZeroAdamwPart *q = &parts[i];
        const int k = batch_add(x, bt, q->n, launch);
        if (k < 0) continue;
        bt.p[k] = q->param; bt.g[k] = q->grad; bt.m[k] = q->m; bt.v[k] = q->v;
        bt.len[k] = q->n;
        const int vec = aligned(q->param, 16) && aligned(q->grad, 16) && aligned(q->m, 16) && aligned(q->v, 16);
        bt.flags[k] = (unsigned char)((q->decay ? 1 : 0) | (vec ? PART_VEC : 0));
    }
    if (bt.n > 0) launch();
}

static void c_refresh_parts(const ZeroBackend *b, const ZeroRefreshPart *parts, int nparts, ZeroDType dt,
                            uint64_t seed, int t, ZeroStream *s) {
    Ctx *x = ctx_of(b);
    if (s->host) return zero_refresh_parts(x->hostb, parts, nparts, dt, seed, t, s->host);
    if (dt == ZERO_F32) {   // copies, one per range
        for (int i = 0; i < nparts; i++) c_refresh(b, parts[i].dst, dt, parts[i].master, parts[i].n, seed, t, parts[i].gidx0, s);
        return;
    }
    GPU_SPAN(s, "refresh", "parts");
    RefreshBatch bt;
    bt.n = 0;
    bt.first[0] = 0;
    auto launch = [&] {
        refresh_parts_kernel<<<bt.first[bt.n], THREADS, 0, s->s>>>(bt, seed, t);
        LAUNCHED(x, "refresh of %d bf16 ranges (%u blocks)", bt.n, bt.first[bt.n]);
    };
    for (int i = 0; i < nparts; i++) {
        const ZeroRefreshPart *q = &parts[i];
        const int k = batch_add(x, bt, q->n, launch);
        if (k < 0) continue;
        bt.dst[k] = (uint16_t *)q->dst;
        bt.master[k] = q->master;
        bt.len[k] = q->n;
        bt.gidx0[k] = q->gidx0;
        bt.flags[k] = aligned(q->dst, 8) && aligned(q->master, 16) ? PART_VEC : 0;
    }
    if (bt.n > 0) launch();
}

static void c_reduce_slices_parts(const ZeroBackend *b, const ZeroReducePart *parts, int nparts, int nslices,
                                  ZeroDType dt, ZeroStream *s) {
    Ctx *x = ctx_of(b);
    if (s->host || nslices <= 0) {
        for (int i = 0; i < nparts; i++) c_reduce_slices(b, parts[i].acc, parts[i].src, parts[i].stride, nslices, parts[i].n, dt, s);
        return;
    }
    GPU_SPAN(s, "reduce", "parts");
    ReduceBatch bt;
    bt.n = 0;
    bt.first[0] = 0;
    auto launch = [&] {
        if (dt == ZERO_F32) reduce_parts_kernel<float><<<bt.first[bt.n], THREADS, 0, s->s>>>(bt, nslices);
        else reduce_parts_kernel<uint16_t><<<bt.first[bt.n], THREADS, 0, s->s>>>(bt, nslices);
        LAUNCHED(x, "reduce_slices of %d ranges x %d slices (%u blocks)", bt.n, nslices, bt.first[bt.n]);
    };
    const size_t es = dt == ZERO_F32 ? 4 : 2;
    for (int i = 0; i < nparts; i++) {
        const ZeroReducePart *q = &parts[i];
        const int k = batch_add(x, bt, q->n, launch);
        if (k < 0) continue;
        bt.acc[k] = q->acc;
        bt.src[k] = q->src;
        bt.stride[k] = q->stride;
        bt.len[k] = q->n;
        bt.flags[k] = aligned(q->acc, 16) && aligned(q->src, 4 * es) && q->stride % 4 == 0 ? PART_VEC : 0;
    }
    if (bt.n > 0) launch();
}

static void launch_sumsq_parts(const ZeroBackend *b, SumsqBatch *bt, const ZeroSumsqPart *const *outs, ZeroStream *s) {
    Ctx *x = ctx_of(b);
    if (s->npending + bt->n > SLOTS) c_stream_sync(b, s);
    bt->slot0 = s->npending;
    const unsigned blocks = (bt->first[bt->n] + 32 * SQ_WARPS - 1) / (32 * SQ_WARPS);
    sumsq_parts_blocks_kernel<<<blocks, SQ_WARPS * 32, 0, s->s>>>(*bt, s->partials);
    LAUNCHED(x, "sum_squares of %d ranges (%u norm blocks)", bt->n, bt->first[bt->n]);
    sumsq_parts_total_kernel<<<1, PART_BATCH, 0, s->s>>>(*bt, s->partials, s->dslots);
    LAUNCHED(x, "sum_squares of %d ranges (adding their block sums)", bt->n);
    for (int k = 0; k < bt->n; k++) s->outs[s->npending++] = outs[k]->out;
    bt->n = 0;
}

// Ranges of more than SQ_PASS norm blocks, and empty ones, take the one-range kernel.
static void c_sum_squares_parts(const ZeroBackend *b, const ZeroSumsqPart *parts, int nparts, ZeroStream *s) {
    if (s->host) {
        for (int i = 0; i < nparts; i++) c_sum_squares(b, parts[i].x, parts[i].n, parts[i].out, s);
        return;
    }
    GPU_SPAN(s, "sum_squares", "parts");
    SumsqBatch bt;
    const ZeroSumsqPart *outs[PART_BATCH];
    bt.n = 0;
    bt.first[0] = 0;
    for (int i = 0; i < nparts; i++) {
        const ZeroSumsqPart *q = &parts[i];
        const size_t nb = (q->n + ZERO_SUMSQ_BLOCK - 1) / ZERO_SUMSQ_BLOCK;
        if (nb == 0 || nb > SQ_PASS) {
            c_sum_squares(b, q->x, q->n, q->out, s);
            continue;
        }
        if (bt.n == PART_BATCH || bt.first[bt.n] + nb > SQ_PASS) launch_sumsq_parts(b, &bt, outs, s);
        outs[bt.n] = q;
        bt.x[bt.n] = q->x;
        bt.len[bt.n] = q->n;
        bt.first[bt.n + 1] = bt.first[bt.n] + (unsigned)nb;
        bt.n++;
    }
    if (bt.n > 0) launch_sumsq_parts(b, &bt, outs, s);
}

// ZeRO++ wire kernels: wire_cuda.cu's on a device stream, the host backend's (wire.c) on a
// host stream. A refusal or launch error is printed by the kernel's launcher, then fatal.
static void wire_done(const Ctx *x, int rc, const char *what, int records, size_t slice_n) {
    if (rc == 0) return;
    fprintf(stderr, "zero: rank %d: %s of %d records of %zu values failed (see above)\n", x->c->rank, what, records,
            slice_n);
    zero_comm_abort(x->c, 1);
}

static void c_wire_pack(const ZeroBackend *b, ZeroWire w, int block, const void *src, ZeroDType dt, size_t slice_n,
                        int nslices, int group, void *rec, ZeroStream *s) {
    Ctx *x = ctx_of(b);
    if (s->host) return x->hostb->wire_pack(x->hostb, w, block, src, dt, slice_n, nslices, group, rec, s->host);
    GPU_SPAN(s, "wire_pack", "");
    wire_done(x, zero_wire_pack_cuda(w, block, src, dt, slice_n, nslices, group, rec, s->s), "wire_pack", nslices, slice_n);
}

static void c_wire_unpack(const ZeroBackend *b, ZeroWire w, int block, const void *rec, size_t slice_n, int nslices,
                          void *out, ZeroDType dt, ZeroStream *s) {
    Ctx *x = ctx_of(b);
    if (s->host) return x->hostb->wire_unpack(x->hostb, w, block, rec, slice_n, nslices, out, dt, s->host);
    GPU_SPAN(s, "wire_unpack", "");
    wire_done(x, zero_wire_unpack_cuda(w, block, rec, slice_n, nslices, out, dt, s->s), "wire_unpack", nslices, slice_n);
}

static void c_wire_reduce_pack(const ZeroBackend *b, ZeroWire w, int block, const void *in, ZeroDType dt,
                               size_t slice_n, int ngroups, int nout, void *out, ZeroStream *s) {
    Ctx *x = ctx_of(b);
    if (s->host) return x->hostb->wire_reduce_pack(x->hostb, w, block, in, dt, slice_n, ngroups, nout, out, s->host);
    GPU_SPAN(s, "wire_reduce_pack", "");
    wire_done(x, zero_wire_reduce_pack_cuda(w, block, in, dt, slice_n, ngroups, nout, out, s->s), "wire_reduce_pack",
              ngroups * nout, slice_n);
}

static void c_wire_reduce(const ZeroBackend *b, ZeroWire w, int block, const void *rec, ZeroDType dt, size_t slice_n,
                          int nrec, size_t n, float *acc, int accumulate, ZeroStream *s) {
    Ctx *x = ctx_of(b);
    if (s->host) return x->hostb->wire_reduce(x->hostb, w, block, rec, dt, slice_n, nrec, n, acc, accumulate, s->host);
    GPU_SPAN(s, "wire_reduce", "");
    wire_done(x, zero_wire_reduce_cuda(w, block, rec, dt, slice_n, nrec, n, acc, accumulate, s->s), "wire_reduce", nrec,
              slice_n);
}

// ---------------------------------------------------------------- life cycle

int zero_cuda_select_device(ZeroComm *comm) { return zero_nccl_select_device(comm); }

// 0 when subnormals survive on the device, as the bit-for-bit contract needs.
static int check_no_ftz(Ctx *x) {
    double *r = x->main.slots, *d = x->main.dslots;
    r[0] = r[1] = r[2] = -1.0;
    ftz_probe_kernel<<<1, 1, 0, x->main.s>>>(ldexpf(1.0f, -126), 0.5f, ldexpf(1.0f, -130), d);
    CK(x, cudaGetLastError(), "checking the device's subnormal handling");
    CK(x, cudaStreamSynchronize(x->main.s), "checking the device's subnormal handling");
    if (r[0] == ldexp(1.0, -127) && r[1] == ldexp(1.0, -130) && r[2] == ldexp(1.0, -129)) return 0;
    fprintf(stderr, "zero: rank %d: backend_cuda.cu was built with flush-to-zero (--use_fast_math or -ftz=true): its "
            "kernels would not give the host backend's bits; rebuild it without those flags\n", x->c->rank);
    return -1;
}

const ZeroBackend *zero_backend_cuda(ZeroComm *comm, cudaStream_t main_stream) {
    Ctx *x = (Ctx *)calloc(1, sizeof *x);
    if (!x) {
        fprintf(stderr, "zero: rank %d: out of host memory for the CUDA backend\n", comm->rank);
        return NULL;
    }
    x->c = comm;
    cudaError_t e = cudaGetDevice(&x->device);
    if (e == cudaSuccess) {
        x->main.s = main_stream;
        x->main.track = -1;
        e = stream_buffers(&x->main);
    }
    if (e != cudaSuccess) {
        fprintf(stderr, "zero: rank %d: setting up the CUDA backend failed: %s\n", comm->rank, cudaGetErrorString(e));
        stream_release(&x->main);
        free(x);
        return NULL;
    }
    if (check_no_ftz(x) != 0 || !(x->nccl = zero_nccl_init(comm, x->device)) ||
        !(x->hostb = zero_backend_host(comm))) {
        if (x->nccl) zero_nccl_free(x->nccl);
        stream_release(&x->main);
        free(x);
        return NULL;
    }
    ZeroBackend *t = &x->table;
    t->name = "cuda";
    t->ctx = x;
    t->needs_mpi = 0;   // NCCL, bootstrapped without MPI when need be
    t->alloc = c_alloc;
    t->free = c_free;
    t->memset0 = c_memset0;
    t->copy = c_copy;
    t->main_stream = c_main_stream;
    t->stream_create = c_stream_create;
    t->stream_create_copy = c_stream_create_copy;
    t->stream_create_host = c_stream_create_host;
    t->stream_destroy = c_stream_destroy;
    t->stream_sync = c_stream_sync;
    t->event_create = c_event_create;
    t->event_destroy = c_event_destroy;
    t->event_record = c_event_record;
    t->stream_wait = c_stream_wait;
    t->all_gather = c_all_gather;
    t->all_to_all = c_all_to_all;
    t->reduce_scatter = c_reduce_scatter;
    t->allreduce_sum_f64 = c_allreduce_sum_f64;
    t->gather_f64 = c_gather_f64;
    t->reduce_slices = c_reduce_slices;
    t->sum_slices = c_sum_slices;
    t->adamw = c_adamw;
    t->refresh = c_refresh;
    t->sum_squares = c_sum_squares;
    t->adamw_parts = c_adamw_parts;
    t->refresh_parts = c_refresh_parts;
    t->sum_squares_parts = c_sum_squares_parts;
    t->reduce_slices_parts = c_reduce_slices_parts;
    t->wire_pack = c_wire_pack;
    t->wire_unpack = c_wire_unpack;
    t->wire_reduce_pack = c_wire_reduce_pack;
    t->wire_reduce = c_wire_reduce;
    t->host_call = c_host_call;
    t->stream_name = c_stream_name;
    t->trace_begin = c_trace_begin;
    t->trace_end = c_trace_end;
    return t;
}

void zero_backend_cuda_free(const ZeroBackend *b) {
    if (!b) return;
    Ctx *x = ctx_of(b);
    c_stream_sync(b, &x->main);
    zero_nccl_free(x->nccl);
    zero_backend_host_free(x->hostb);
    stream_release(&x->main);
    free(x);
}
