// cuda_emu.h: force-included (g++ -include) into every .cu file built for the emulated
// device. It includes NVIDIA's own headers first (every type, enum value and host bf16
// function is the toolkit's), then supplies what nvcc supplies and a host compiler lacks:
// the built-in variables (threadIdx, blockIdx, blockDim, gridDim), the device intrinsics
// the project uses, __shared__ storage shared by a block, and the launch that
// rewrite_launch.py puts where `kernel<<<grid, block, smem, stream>>>(args)` was.
//
// The sources themselves are the ones nvcc builds: no #ifdef for the emulator in them.
// After the toolkit's headers this file defines __CUDACC__ (so __host__ __device__ code and
// device-only helpers compile), but not __CUDA_ARCH__: code under #ifdef __CUDA_ARCH__ is
// device-only, and the project's uses inline PTX (adamw.h's add.rn.f32 ...) that no host
// compiler runs, so their host twins (the same IEEE operations) run instead. That is the
// one part of the device code the emulator does not execute.
#ifndef CUDA_EMU_CUDA_EMU_H
#define CUDA_EMU_CUDA_EMU_H

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "device.h"

// What nvcc defines. Later includes of the toolkit's headers are no-ops (include guards).
#ifndef __CUDACC__
#define __CUDACC__ 1
#endif
#undef __global__
#define __global__
#undef __device__
#define __device__
#undef __host__
#define __host__
#undef __launch_bounds__
#define __launch_bounds__(...)
#undef __noinline__
#define __noinline__ __attribute__((noinline))
// Shared memory: rewrite_launch.py turns every __shared__ declaration inside a function
// into a reference to the running block's own copy (emu_dev::block_shared, dynamic_shared).
// What is left (a declaration at namespace scope) is static per host thread.
#undef __shared__
#define __shared__ thread_local

// ---------------------------------------------------------------- built-in variables

#define threadIdx (emu_dev::thread_idx())
#define blockIdx (emu_dev::block_idx())
#define blockDim (emu_dev::block_dim())
#define gridDim (emu_dev::grid_dim())
#ifndef warpSize
#define warpSize 32
#endif

// ---------------------------------------------------------------- synchronization

inline void __syncthreads() { emu_dev::barrier(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { emu_dev::warp_sync(mask); }
inline void __nanosleep(unsigned ns) {
    struct timespec ts = {0, (long)ns};
    nanosleep(&ts, nullptr);
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

template <typename T> inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a type up to 8 bytes");
    uint64_t v = 0;
    memcpy(&v, &var, sizeof(T));
    v = emu_dev::warp_shuffle(mask, v, emu_dev::SHFL_XOR, lane_mask, width);
    T out;
    memcpy(&out, &v, sizeof(T));
    return out;
}
template <typename T> inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32) {
    uint64_t v = 0;
    memcpy(&v, &var, sizeof(T));
    v = emu_dev::warp_shuffle(mask, v, emu_dev::SHFL_IDX, src_lane, width);
    T out;
    memcpy(&out, &v, sizeof(T));
    return out;
}
template <typename T> inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
    uint64_t v = 0;
    memcpy(&v, &var, sizeof(T));
    v = emu_dev::warp_shuffle(mask, v, emu_dev::SHFL_DOWN, (int)delta, width);
    T out;
    memcpy(&out, &v, sizeof(T));
    return out;
}
template <typename T> inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
    uint64_t v = 0;
    memcpy(&v, &var, sizeof(T));
    v = emu_dev::warp_shuffle(mask, v, emu_dev::SHFL_UP, (int)delta, width);
    T out;
    memcpy(&out, &v, sizeof(T));
    return out;
}
inline unsigned __ballot_sync(unsigned mask, int pred) { return emu_dev::warp_vote(mask, pred, emu_dev::VOTE_BALLOT); }
inline int __any_sync(unsigned mask, int pred) { return emu_dev::warp_vote(mask, pred, emu_dev::VOTE_ANY) != 0; }
inline int __all_sync(unsigned mask, int pred) { return emu_dev::warp_vote(mask, pred, emu_dev::VOTE_ALL) != 0; }

// ---------------------------------------------------------------- atomics (device-wide)

template <typename T> inline T emu_atomic_cas_loop(T *p, std::function<T(T)> f) {
    T old;
    __atomic_load(p, &old, __ATOMIC_SEQ_CST);
    for (;;) {
        T want = f(old);
        if (__atomic_compare_exchange(p, &old, &want, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) return old;
    }
}
inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicAdd(unsigned *p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) {
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
inline float atomicAdd(float *p, float v) {
    return emu_atomic_cas_loop<float>(p, [v](float o) { return o + v; });
}
inline double atomicAdd(double *p, double v) {
    return emu_atomic_cas_loop<double>(p, [v](double o) { return o + v; });
}
template <typename T> inline T emu_atomic_min(T *p, T v) {
    return emu_atomic_cas_loop<T>(p, [v](T o) { return v < o ? v : o; });
}
template <typename T> inline T emu_atomic_max(T *p, T v) {
    return emu_atomic_cas_loop<T>(p, [v](T o) { return v > o ? v : o; });
}
inline int atomicMin(int *p, int v) { return emu_atomic_min(p, v); }
inline unsigned atomicMin(unsigned *p, unsigned v) { return emu_atomic_min(p, v); }
inline unsigned long long atomicMin(unsigned long long *p, unsigned long long v) { return emu_atomic_min(p, v); }
inline long long atomicMin(long long *p, long long v) { return emu_atomic_min(p, v); }
inline int atomicMax(int *p, int v) { return emu_atomic_max(p, v); }
inline unsigned atomicMax(unsigned *p, unsigned v) { return emu_atomic_max(p, v); }
inline unsigned long long atomicMax(unsigned long long *p, unsigned long long v) { return emu_atomic_max(p, v); }
inline int atomicExch(int *p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicExch(unsigned *p, unsigned v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
inline int atomicCAS(int *p, int cmp, int v) {
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return cmp;
}
inline unsigned atomicCAS(unsigned *p, unsigned cmp, unsigned v) {
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return cmp;
}
inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long cmp, unsigned long long v) {
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return cmp;
}

// ---------------------------------------------------------------- intrinsics
// IEEE round-to-nearest operations are the host's (this build has -ffp-contract=off, so no
// contraction into FMA). The approximate intrinsics are not exact either here: each one
// is the exact value (in double, rounded once) moved by a number of ulps, or an absolute
// amount, within the maximum error the CUDA Programming Guide documents for it (the
// "Intrinsic Functions" table; rsqrtf: the single-precision table's 2 ulp), less the one
// rounding of the reference. The move is drawn from the input's bits and CUDA_EMU_MATH_SEED
// (default 1; 0: exact): the same input always gives the same result, as a GPU's function
// does, and a tolerance that holds only for exact results fails. Sources built with
// --use_fast_math (EMU_FAST_MATH, emu.mk) compile them to their .ftz forms on a GPU: here
// their subnormal inputs and results are flushed to zero too. (The rest of such a source's
// float arithmetic keeps subnormals here: the project's fast-math sources rely on inline
// PTX without .ftz for exact steps, whose host twins an SSE flush mode would break.)
namespace emu_dev {
uint64_t math_seed();
}
#ifdef EMU_FAST_MATH
#define EMU_FTZ true
#else
#define EMU_FTZ false
#endif
// (templates on FTZ: a source built with fast math and one without must not share one copy)
template <bool FTZ> inline float emu_flush(float x) { return FTZ && fabsf(x) < 1.17549435e-38f ? copysignf(0.0f, x) : x; }
// r moved by a number of ulps in [-k, k] drawn from (x's bits, which function, the seed),
// never across zero or past the largest finite value.
inline float emu_ulps(float r, uint64_t key, uint32_t fn, uint32_t k) {
    uint64_t seed = emu_dev::math_seed();
    if (!seed || !k || !(fabsf(r) <= 3.40282347e+38f) || r == 0.0f) return r;
    uint64_t h = (key * 0x9e3779b97f4a7c15ull) ^ (seed * 0xd1b54a32d192ed03ull) ^ ((uint64_t)fn << 56);
    h = (h ^ (h >> 31)) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    int64_t d = (int64_t)(h % (2 * (uint64_t)k + 1)) - (int64_t)k;
    uint32_t u;
    memcpy(&u, &r, 4);
    int64_t mag = (int64_t)(u & 0x7fffffffu) + d;
    if (mag < 0) mag = 0;
    if (mag > 0x7f7fffff) mag = 0x7f7fffff;
    u = (u & 0x80000000u) | (uint32_t)mag;
    memcpy(&r, &u, 4);
    return r;
}
inline uint64_t emu_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return sqrt(a); }
// __expf: "The maximum ulp error is 2 + floor(abs(1.173 * x))".
template <bool FTZ> inline float emu_expf(float x) {
    x = emu_flush<FTZ>(x);
    float r = (float)exp((double)x);
    return emu_flush<FTZ>(emu_ulps(r, emu_bits(x), 1, 1 + (uint32_t)fminf(floorf(fabsf(1.173f * x)), 1e6f)));
}
// __logf: "For x in [0.5, 2], the maximum absolute error is 2^-21.41, otherwise, the
// maximum ulp error is 3."
template <bool FTZ> inline float emu_logf(float x) {
    x = emu_flush<FTZ>(x);
    double e = log((double)x);
    if (x >= 0.5f && x <= 2.0f) {
        uint64_t seed = emu_dev::math_seed();
        if (!seed) return (float)e;
        uint64_t h = (emu_bits(x) * 0x9e3779b97f4a7c15ull) ^ (seed * 0xd1b54a32d192ed03ull) ^ (2ull << 56);
        h = (h ^ (h >> 31)) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 29;
        double u = (double)(h >> 11) / 9007199254740992.0 * 2.0 - 1.0;   // [-1, 1)
        // 0.9 of the bound, and the rounding to float (under 2^-25 here) stays inside it
        return emu_flush<FTZ>((float)(e + u * 0.9 * 3.5780e-7));
    }
    return emu_flush<FTZ>(emu_ulps((float)e, emu_bits(x), 2, 2));
}
// __fdividef: "For |y| in [2^-126, 2^126], the maximum ulp error is 2"; for 2^126 < |y| <
// 2^128 it delivers zero (the CUDA Programming Guide's note), NaN for an infinite x.
template <bool FTZ> inline float emu_fdividef(float a, float b) {
    a = emu_flush<FTZ>(a);
    b = emu_flush<FTZ>(b);
    float ab = fabsf(b);
    if (ab > 8.50705917e+37f && ab <= 3.40282347e+38f) return isinf(a) ? NAN : copysignf(0.0f, a) * copysignf(1.0f, b);
    float r = (float)((double)a / (double)b);
    return emu_flush<FTZ>(emu_ulps(r, emu_bits(a) << 32 | emu_bits(b), 3, 1));
}
// rsqrtf: 2 ulp.
template <bool FTZ> inline float emu_rsqrtf(float x) {
    x = emu_flush<FTZ>(x);
    return emu_flush<FTZ>(emu_ulps((float)(1.0 / sqrt((double)x)), emu_bits(x), 4, 1));
}
#define __expf(x) emu_expf<EMU_FTZ>(x)
#define __logf(x) emu_logf<EMU_FTZ>(x)
#define __fdividef(a, b) emu_fdividef<EMU_FTZ>(a, b)
#define rsqrtf(x) emu_rsqrtf<EMU_FTZ>(x)
inline float __saturatef(float x) { return x != x ? 0.0f : x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }

inline unsigned __float_as_uint(float x) { unsigned u; memcpy(&u, &x, 4); return u; }
inline float __uint_as_float(unsigned u) { float x; memcpy(&x, &u, 4); return x; }
inline int __float_as_int(float x) { int u; memcpy(&u, &x, 4); return u; }
inline float __int_as_float(int u) { float x; memcpy(&x, &u, 4); return x; }
inline long long __double_as_longlong(double x) { long long u; memcpy(&u, &x, 8); return u; }
inline double __longlong_as_double(long long u) { double x; memcpy(&x, &u, 8); return x; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }

// CUDA's integer and floating min/max overloads (math_functions.hpp declares them for
// device code): same-type pairs, and signed with unsigned as the usual conversions give.
#define EMU_MINMAX(T)                                          \
    inline T min(T a, T b) { return b < a ? b : a; }           \
    inline T max(T a, T b) { return a < b ? b : a; }
EMU_MINMAX(int)
EMU_MINMAX(unsigned)
EMU_MINMAX(long)
EMU_MINMAX(unsigned long)
EMU_MINMAX(long long)
EMU_MINMAX(unsigned long long)
#undef EMU_MINMAX
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline unsigned min(int a, unsigned b) { return min((unsigned)a, b); }
inline unsigned min(unsigned a, int b) { return min(a, (unsigned)b); }
inline unsigned max(int a, unsigned b) { return max((unsigned)a, b); }
inline unsigned max(unsigned a, int b) { return max(a, (unsigned)b); }

// Cache-hinted loads and stores: plain accesses.
template <typename T> inline T __ldg(const T *p) { return *p; }
template <typename T> inline T __ldcs(const T *p) { return *p; }
template <typename T> inline T __ldcg(const T *p) { return *p; }
template <typename T> inline void __stcs(T *p, T v) { *p = v; }
template <typename T> inline void __stcg(T *p, T v) { *p = v; }

// cuda_runtime.h's C++ overloads that take a kernel itself (it declares them for nvcc only).
template <class T> inline cudaError_t cudaFuncSetAttribute(T *entry, cudaFuncAttribute attr, int value) {
    return ::cudaFuncSetAttribute(reinterpret_cast<const void *>(entry), attr, value);
}
template <class T> inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *attr, T *entry) {
    return ::cudaFuncGetAttributes(attr, reinterpret_cast<const void *>(entry));
}

// ---------------------------------------------------------------- launches
// rewrite_launch.py turns `k<<<g, b, s, st>>>(a...)` into
// `emu_launch_kernel(k, "k", __FILE__, __LINE__, g, b, s, st, a...)`. The arguments are
// converted to the kernel's parameter types and copied now, as a launch does; each CUDA
// thread calls the kernel with its own copy.

namespace emu_dev {
// Calls k with its parameters copied from the launch's record, as a CUDA thread's parameters
// are the launch's bitwise copy. Not instrumented: the copy reads the launch's heap record,
// which is no device memory, and every load the kernels' own code makes is checked (emu.mk).
template <typename K, typename Params, size_t... I>
__attribute__((no_sanitize_thread)) inline void call_kernel(K k, const Params &p, std::index_sequence<I...>) {
    k(std::get<I>(p)...);
}
template <typename T> inline void note_ptr(emu::LaunchArg *out, int *n, const T &v) {
    if constexpr (std::is_pointer<T>::value) {
        out[*n].ptr = (const void *)v;
        out[*n].type = "pointer";
        ++*n;
    }
}
}  // namespace emu_dev

template <typename... P, typename... A>
inline void emu_launch_kernel(void (*k)(P...), const char *name, const char *file, int line, dim3 grid, dim3 block,
                              size_t smem, cudaStream_t stream, A &&...args) {
    static_assert(sizeof...(P) == sizeof...(A), "a launch with the wrong number of kernel arguments");
    auto params = std::make_shared<std::tuple<typename std::decay<P>::type...>>(
        static_cast<typename std::decay<P>::type>(std::forward<A>(args))...);
    emu::LaunchArg ptrs[sizeof...(P) + 1];
    int nptrs = 0;
    std::apply([&](const auto &...v) { (emu_dev::note_ptr(ptrs, &nptrs, v), ...); }, *params);
    // Each CUDA thread's parameters are k's by-value copy of the record (call_kernel) and no
    // other: a batched kernel's 2.6 KB table, copied per CUDA thread, costs more than its work
    emu_dev::launch((const void *)k, name, file, line, grid, block, smem, stream, ptrs, nptrs, [k, params]() {
        emu_dev::call_kernel(k, *params, std::index_sequence_for<P...>{});
    });
}
#endif
