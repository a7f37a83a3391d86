// backend_host.c: the host backend: host memory, MPI collectives, OpenMP kernels.
// Every call completes before it returns, so streams and events are no-ops. Kernels only
// split independent elements across threads (sum_squares splits fixed-size blocks and
// adds them in order), so results never depend on the thread count.
#include "backend.h"

#include <stdlib.h>
#include <string.h>

#define PAR_MIN 32768   // below this many elements threads cost more than they save

// Streams and events only need distinct non-NULL handles.
struct ZeroStream { int unused; };
struct ZeroEvent { int unused; };
static struct ZeroStream host_main_stream, host_comm_stream;
static struct ZeroEvent host_event;

static void *h_alloc(const ZeroBackend *b, ZeroMemKind kind, size_t bytes) {
    (void)b; (void)kind;
    size_t n = (bytes + 63) / 64 * 64;
    return aligned_alloc(64, n ? n : 64);
}
static void h_free(const ZeroBackend *b, ZeroMemKind kind, void *p) { (void)b; (void)kind; free(p); }
static void h_memset0(const ZeroBackend *b, void *p, size_t bytes, ZeroStream *s) {
    (void)b; (void)s;
    if (bytes) memset(p, 0, bytes);
}
static void h_copy(const ZeroBackend *b, void *dst, ZeroMemKind dk, const void *src, ZeroMemKind sk,
                   size_t bytes, ZeroStream *s) {
    (void)b; (void)dk; (void)sk; (void)s;
    if (bytes && dst != src) memmove(dst, src, bytes);
}

static ZeroStream *h_main_stream(const ZeroBackend *b) { (void)b; return &host_main_stream; }
static ZeroStream *h_stream_create(const ZeroBackend *b) { (void)b; return &host_comm_stream; }
static void h_stream_destroy(const ZeroBackend *b, ZeroStream *s) { (void)b; (void)s; }
static void h_stream_sync(const ZeroBackend *b, ZeroStream *s) { (void)b; (void)s; }
static ZeroEvent *h_event_create(const ZeroBackend *b) { (void)b; return &host_event; }
static void h_event_destroy(const ZeroBackend *b, ZeroEvent *e) { (void)b; (void)e; }
static void h_event_record(const ZeroBackend *b, ZeroEvent *e, ZeroStream *s) { (void)b; (void)e; (void)s; }
static void h_stream_wait(const ZeroBackend *b, ZeroStream *s, ZeroEvent *e) { (void)b; (void)e; (void)s; }

static void h_all_gather(const ZeroBackend *b, ZeroComm *c, const ZeroCollPart *parts, int nparts,
                         ZeroDType dt, ZeroStream *s, const char *what) {
    (void)b; (void)s;
    zero_mpi_all_gather(c, parts, nparts, dt, what);
}
static void h_all_to_all(const ZeroBackend *b, ZeroComm *c, const ZeroCollPart *parts, int nparts,
                         ZeroDType dt, ZeroStream *s, const char *what) {
    (void)b; (void)s;
    zero_mpi_all_to_all(c, parts, nparts, dt, what);
}
static void h_allreduce_sum_f64(const ZeroBackend *b, ZeroComm *c, double *values, int n, const char *what) {
    (void)b;
    zero_mpi_allreduce_sum_f64(c, values, n, what);
}

static void h_gather_f64(const ZeroBackend *b, ZeroComm *c, const double *values, int n, double *all, const char *what) {
    (void)b;
    zero_mpi_gather_f64(c, values, n, all, what);
}

static void h_reduce_slices(const ZeroBackend *b, float *acc, const void *src, size_t stride, int nslices,
                            size_t n, ZeroDType dt, ZeroStream *s) {
    (void)b; (void)s;
    if (nslices <= 0) return;
    if (dt == ZERO_F32) {
        const float *x = src;
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
        for (size_t i = 0; i < n; i++) {
            float sum = x[i];
            for (int q = 1; q < nslices; q++) sum += x[(size_t)q * stride + i];
            acc[i] += sum;
        }
    } else {
        const uint16_t *x = src;
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
        for (size_t i = 0; i < n; i++) {
            float sum = zero_bf16_to_f32(x[i]);
            for (int q = 1; q < nslices; q++) sum += zero_bf16_to_f32(x[(size_t)q * stride + i]);
            acc[i] += sum;
        }
    }
}

static void h_adamw(const ZeroBackend *b, float *param, const float *grad, float *m, float *v, size_t n,
                    const AdamWParams *p, int decay, ZeroStream *s) {
    (void)b; (void)s;
    AdamWParams a = *p;
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) param[i] = adamw_element(param[i], grad[i], &m[i], &v[i], &a, decay);
}

static void h_refresh(const ZeroBackend *b, void *dst, ZeroDType dt, const float *master, size_t n,
                      uint64_t seed, int t, uint64_t gidx0, ZeroStream *s) {
    (void)b; (void)s;
    if (dt == ZERO_F32) {
        if (n && dst != master) memmove(dst, master, n * sizeof(float));
        return;
    }
    uint16_t *out = dst;
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++)
        out[i] = zero_bf16_round_stochastic(master[i], zero_rounding_bits(seed, t, gidx0 + i));
}

static void h_sum_squares(const ZeroBackend *b, const float *x, size_t n, double *out, ZeroStream *s) {
    (void)b; (void)s;
    size_t nblocks = (n + ZERO_SUMSQ_BLOCK - 1) / ZERO_SUMSQ_BLOCK;
    double total = 0.0;
    // Blocks in parallel chunks of 64, each chunk's block sums then added in block order.
    enum { CHUNK = 64 };
    double part[CHUNK];
    for (size_t c0 = 0; c0 < nblocks; c0 += CHUNK) {
        size_t cn = nblocks - c0 < CHUNK ? nblocks - c0 : CHUNK;
#pragma omp parallel for schedule(static) if (cn * ZERO_SUMSQ_BLOCK >= PAR_MIN)
        for (size_t k = 0; k < cn; k++) {
            size_t lo = (c0 + k) * ZERO_SUMSQ_BLOCK, hi = lo + ZERO_SUMSQ_BLOCK < n ? lo + ZERO_SUMSQ_BLOCK : n;
            double sum = 0.0;
            for (size_t i = lo; i < hi; i++) sum += (double)x[i] * (double)x[i];
            part[k] = sum;
        }
        for (size_t k = 0; k < cn; k++) total += part[k];
    }
    *out = total;
}

static const ZeroBackend host_backend = {
    .name = "host",
    .ctx = NULL,
    .needs_mpi = 1,
    .alloc = h_alloc,
    .free = h_free,
    .memset0 = h_memset0,
    .copy = h_copy,
    .main_stream = h_main_stream,
    .stream_create = h_stream_create,
    .stream_destroy = h_stream_destroy,
    .stream_sync = h_stream_sync,
    .event_create = h_event_create,
    .event_destroy = h_event_destroy,
    .event_record = h_event_record,
    .stream_wait = h_stream_wait,
    .all_gather = h_all_gather,
    .all_to_all = h_all_to_all,
    .allreduce_sum_f64 = h_allreduce_sum_f64,
    .gather_f64 = h_gather_f64,
    .reduce_slices = h_reduce_slices,
    .adamw = h_adamw,
    .refresh = h_refresh,
    .sum_squares = h_sum_squares,
};

const ZeroBackend *zero_backend_host(void) { return &host_backend; }
