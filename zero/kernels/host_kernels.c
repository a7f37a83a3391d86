// host_kernels.c: the element kernels over host memory (backend.h states their numerics).
// The host backend queues them on its streams; offload.c runs them inline in its CPU
// optimizer. Threads only split independent elements (sum_squares splits fixed-size
// blocks and adds their sums in order), so results never depend on the thread count.
#include "host_kernels.h"

#include <string.h>

#include "../../llmc/numerics/adamw_cpu.h"

#define PAR_MIN 32768   // below this many elements threads cost more than they save

// out[i] (+)= s_0[i] + s_1[i] + ... in slice order: accumulate adds the sum into out
// (reduce_slices), else stores it (sum_slices).
void zero_cpu_slices(float *out, const void *src, size_t stride, int nslices, size_t n, ZeroDType dt, int accumulate) {
    if (nslices <= 0) return;
    if (dt == ZERO_F32) {
        const float *x = src;
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
        for (size_t i = 0; i < n; i++) {
            float sum = x[i];
            for (int q = 1; q < nslices; q++) sum += x[(size_t)q * stride + i];
            out[i] = accumulate ? out[i] + sum : sum;
        }
    } else {
        const uint16_t *x = src;
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
        for (size_t i = 0; i < n; i++) {
            float sum = zero_bf16_to_f32(x[i]);
            for (int q = 1; q < nslices; q++) sum += zero_bf16_to_f32(x[(size_t)q * stride + i]);
            out[i] = accumulate ? out[i] + sum : sum;
        }
    }
}

// llmc/numerics/adamw_cpu.h's array kernel: SIMD lanes and threads, adamw_element's bits.
void zero_cpu_adamw(float *param, const float *grad, float *m, float *v, size_t n, const AdamWParams *p, int decay) {
    adamw_update_array(param, grad, m, v, n, p, decay);
}

void zero_cpu_refresh(void *dst, ZeroDType dt, const float *master, size_t n, uint64_t seed, int t, uint64_t gidx0) {
    if (dt == ZERO_F32) {
        if (n && dst != master) memmove(dst, master, n * sizeof(float));
        return;
    }
    uint16_t *out = dst;
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++)
        out[i] = adamw_round_bf16_at(master[i], seed, (uint64_t)t, gidx0 + i);
}

// total + the block sums of x in order (total 0: sum_squares; a later piece of a longer
// range, starting at a block boundary, continues its sum).
double zero_cpu_sum_squares(double total, const float *x, size_t n) {
    size_t nblocks = (n + ZERO_SUMSQ_BLOCK - 1) / ZERO_SUMSQ_BLOCK;
    // Blocks in parallel chunks of 64, each chunk's block sums then added in block order.
    enum { CHUNK = 64 };
    double part[CHUNK];
    for (size_t c0 = 0; c0 < nblocks; c0 += CHUNK) {
        size_t cn = nblocks - c0 < CHUNK ? nblocks - c0 : CHUNK;
#pragma omp parallel for schedule(static) if (cn * ZERO_SUMSQ_BLOCK >= PAR_MIN)
        for (size_t k = 0; k < cn; k++) {
            size_t lo = (c0 + k) * ZERO_SUMSQ_BLOCK, hi = lo + ZERO_SUMSQ_BLOCK < n ? lo + ZERO_SUMSQ_BLOCK : n;
            double sum = 0.0;
            for (size_t i = lo; i < hi; i++) sum = adamw_sumsq_add(sum, x[i]);
            part[k] = sum;
        }
        for (size_t k = 0; k < cn; k++) total += part[k];
    }
    return total;
}
