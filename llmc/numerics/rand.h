// rand.h: counter-based random numbers. Every random decision in the project is a
// pure function of (seed, stream, index): no hidden state, so the same numbers come
// out whatever the number of ranks, threads or the memory layout. Usable from C and CUDA.
#ifndef LLMC_RAND_H
#define LLMC_RAND_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define RNG_HD __host__ __device__
#else
#define RNG_HD
#endif

// Streams keep unrelated uses of one seed apart.
enum {
    RNG_STREAM_INIT = 1,       // parameter initialization; index = tensor_id << 40 | element
    RNG_STREAM_SHUFFLE = 2,    // data order; index = epoch << 32 | shard or window
    RNG_STREAM_SAMPLE = 3,     // text sampling; index = step << 32 | position
    RNG_STREAM_ROUNDING = 4,   // stochastic rounding; index = step << 40 | global element
};

// splitmix64 finalizer: a bijective 64-bit mixer with full avalanche.
static inline RNG_HD uint64_t rng_mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static inline RNG_HD uint64_t rng_u64(uint64_t seed, uint64_t stream, uint64_t index) {
    return rng_mix64(rng_mix64(seed ^ rng_mix64(stream + 0x9e3779b97f4a7c15ULL)) + index);
}

static inline RNG_HD uint32_t rng_u32(uint64_t seed, uint64_t stream, uint64_t index) {
    return (uint32_t)(rng_u64(seed, stream, index) >> 32);
}

// Uniform in [0, 1) with 24 random bits (exact in float).
static inline RNG_HD float rng_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
    return (float)(rng_u64(seed, stream, index) >> 40) * (1.0f / 16777216.0f);
}

// Standard normal by Box-Muller from two uniforms; index picks one normal.
static inline RNG_HD float rng_normal(uint64_t seed, uint64_t stream, uint64_t index) {
    uint64_t bits = rng_u64(seed, stream, index);
    double u1 = ((double)(bits >> 40) + 1.0) * (1.0 / 16777217.0); // (0, 1]
    double u2 = (double)(bits & 0xffffffULL) * (1.0 / 16777216.0); // [0, 1)
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

// Uniform integer in [0, n) (n > 0), without modulo bias worth caring about for n < 2^32.
static inline RNG_HD uint64_t rng_below(uint64_t seed, uint64_t stream, uint64_t index, uint64_t n) {
    return (uint64_t)(((unsigned __int128)rng_u64(seed, stream, index) * n) >> 64);
}

#endif // LLMC_RAND_H
