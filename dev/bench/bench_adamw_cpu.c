// bench_adamw_cpu.c: the host AdamW array kernel (llmc/numerics/adamw_cpu.h) in GB/s, for each
// SIMD path this CPU has and each thread count 1..nproc, against a plain memory copy on
// the same buffers and thread count (target: at least 80% of the copy), and against
// PyTorch's CPU AdamW when python3 can import torch.
//   make bench_adamw_cpu && ./bench_adamw_cpu [elements=16777216] [repeats=10]
// Bytes per AdamW element: p, g, m, v read and p, m, v written, 28. The copy counts the
// bytes it reads plus the bytes it writes the same way; a third figure, "same traffic",
// is a loop with AdamW's exact access pattern and no arithmetic to speak of (p, m += g,
// v += |g|), the ceiling for this pattern. Each figure is the best of the repeats.
// Neither count includes the copy's hidden traffic: its stores first read the lines they
// fill (p and m, 8 bytes an element), while AdamW stores only to lines it has just read;
// that is why AdamW can beat the copy, and why "vs same" is the fairer ratio.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../llmc/numerics/adamw_cpu.h"
#include "../../llmc/numerics/rand.h"

typedef struct {
    float *p, *g, *m, *v;
    size_t n;
    AdamWParams hp;
} Buffers;

typedef void (*ChunkFn)(Buffers *b, size_t lo, size_t hi);

// Work split like the kernel's: fixed chunks, threads take whole ones (first touch too,
// so that each thread's pages are near it).
static void for_chunks(Buffers *b, ChunkFn fn) {
    const size_t chunks = (b->n + ADAMW_CPU_CHUNK - 1) / ADAMW_CPU_CHUNK;
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < chunks; c++) {
        const size_t lo = c * ADAMW_CPU_CHUNK;
        fn(b, lo, b->n - lo < ADAMW_CPU_CHUNK ? b->n : lo + ADAMW_CPU_CHUNK);
    }
}

// Weights ~0.02, gradients ~1e-3, fresh moments: a training step's values, no subnormals.
static void chunk_init(Buffers *b, size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; i++) {
        b->p[i] = 0.02f * rng_normal(1, 1, i);
        b->g[i] = 1e-3f * rng_normal(1, 2, i);
        b->m[i] = 0.0f;
        b->v[i] = 0.0f;
    }
}

// g -> p and v -> m: reads 8 bytes and writes 8 per element (and leaves valid AdamW inputs)
static void chunk_copy(Buffers *b, size_t lo, size_t hi) {
    memcpy(b->p + lo, b->g + lo, (hi - lo) * sizeof(float));
    memcpy(b->m + lo, b->v + lo, (hi - lo) * sizeof(float));
}

// AdamW's access pattern; v stays >= 0 (a NaN would send plain's sqrtf down its slow
// errno path) and nothing goes subnormal, so the values stay a training step's.
static void chunk_same_traffic(Buffers *b, size_t lo, size_t hi) {
    float *p = b->p, *m = b->m, *v = b->v;
    const float *g = b->g;
    for (size_t i = lo; i < hi; i++) {
        p[i] += g[i];
        m[i] += g[i];
        v[i] += fabsf(g[i]);
    }
}

static float *alloc_array(size_t n) {
    float *x = aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64);
    if (!x) {
        fprintf(stderr, "bench_adamw_cpu: out of memory for %zu floats\n", n);
        exit(EXIT_FAILURE);
    }
    return x;
}

// What seconds() times: a path's AdamW (an AdamWCpuPath other than AUTO) or a baseline.
enum { RUN_COPY = -1, RUN_SAME_TRAFFIC = -2 };

// Seconds of one run.
static double seconds(Buffers *b, int what) {
    const double t0 = omp_get_wtime();
    if (what == RUN_COPY) for_chunks(b, chunk_copy);
    else if (what == RUN_SAME_TRAFFIC) for_chunks(b, chunk_same_traffic);
    else adamw_update_array_on((AdamWCpuPath)what, b->p, b->g, b->m, b->v, b->n, &b->hp, 1);
    return omp_get_wtime() - t0;
}

static void cpu_name(char *out, size_t cap) {
    snprintf(out, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            snprintf(out, cap, "%s", colon + 2);
            out[strcspn(out, "\n")] = '\0';
            break;
        }
    }
    fclose(f);
}

// PyTorch's torch.optim.AdamW (foreach and fused, as its version has them), through
// dev/bench/bench_adamw_torch.py next to this program's source tree.
static void bench_torch(const char *argv0, size_t n, int repeats, int max_threads) {
    if (system("python3 -c 'import torch' > /dev/null 2>&1") != 0) {
        printf("\nPyTorch CPU AdamW: skipped (python3 -c 'import torch' failed: torch not installed)\n");
        return;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", argv0);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "python3 '%s/dev/bench/bench_adamw_torch.py' %zu %d %d", dir, n, repeats, max_threads);
    printf("\nPyTorch CPU AdamW (%s):\n", cmd);
    fflush(stdout);
    const int rc = system(cmd);
    if (rc != 0) printf("PyTorch CPU AdamW: %s exited with status %d\n", cmd, rc);
}

int main(int argc, char **argv) {
    const size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)1 << 24;
    const int repeats = argc > 2 ? atoi(argv[2]) : 10;
    if (n == 0 || repeats < 1) {
        fprintf(stderr, "usage: %s [elements > 0] [repeats >= 1] (got %s %s)\n", argv[0], argc > 1 ? argv[1] : "-",
                argc > 2 ? argv[2] : "-");
        return 1;
    }
    const int nproc = omp_get_num_procs();
    Buffers b = {alloc_array(n), alloc_array(n), alloc_array(n), alloc_array(n), n,
                 adamw_params(1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 1)};
    char cpu[256];
    cpu_name(cpu, sizeof cpu);
    printf("CPU AdamW: %zu elements (%.0f MiB in p, g, m, v), best of %d, %s, %d cores, best path %s\n", n,
           16.0 * (double)n / (1 << 20), repeats, cpu, nproc, adamw_cpu_path_name(adamw_cpu_auto_path()));
    printf("GB/s: AdamW 28 bytes/element; copy (g->p, v->m) 16; same traffic (p, m += g, v += |g|) 28\n\n");
    printf("%-8s %7s %10s %10s %10s %10s %10s\n", "path", "threads", "AdamW", "copy", "same-traf", "vs copy",
           "vs same");
    // The contenders take turns within each repeat, so that a busy machine slows them alike.
    for (int threads = 1; threads <= nproc; threads++) {
        omp_set_num_threads(threads);
        for_chunks(&b, chunk_init);
        double best[2 + ADAMW_CPU_AVX512 + 1];
        for (int w = 0; w <= 2 + ADAMW_CPU_AVX512; w++) best[w] = 1e30;
        for (int r = 0; r < repeats; r++)
            for (int w = RUN_SAME_TRAFFIC; w <= ADAMW_CPU_AVX512; w++) {
                if (w >= 0 && (w == ADAMW_CPU_AUTO || !adamw_cpu_path_supported((AdamWCpuPath)w))) continue;
                const double s = seconds(&b, w);
                if (s < best[w + 2]) best[w + 2] = s;
            }
        const double copy = 16.0 * (double)n / best[RUN_COPY + 2] / 1e9;
        const double same = 28.0 * (double)n / best[RUN_SAME_TRAFFIC + 2] / 1e9;
        for (AdamWCpuPath path = ADAMW_CPU_PLAIN; path <= ADAMW_CPU_AVX512; path++) {
            if (!adamw_cpu_path_supported(path)) {
                if (threads == 1) printf("%-8s (not on this CPU)\n", adamw_cpu_path_name(path));
                continue;
            }
            const double adamw = 28.0 * (double)n / best[path + 2] / 1e9;
            printf("%-8s %7d %10.2f %10.2f %10.2f %9.0f%% %9.0f%%\n", adamw_cpu_path_name(path), threads, adamw, copy,
                   same, 100.0 * adamw / copy, 100.0 * adamw / same);
        }
        fflush(stdout);
    }
    free(b.p);
    free(b.g);
    free(b.m);
    free(b.v);
    bench_torch(argv[0], n, repeats, nproc);
    return 0;
}
