// trace_gpu.cu: GPU spans by event pairs (trace_gpu.h). Pending pairs sit in a ring in the
// order they were begun; a drain resolves them from the oldest while the oldest's end has
// completed, so a slow stream holds back the others' spans a while, never loses them.
#include "trace_gpu.h"
#include "../trace.h"
#include "last_error.h"

#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define LABEL 48

typedef struct {
    cudaEvent_t e0, e1;      // created on first use, reused after the pair is resolved
    const char *name;        // NULL until ended
    char label[LABEL];
    int track, step;
} Pair;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    Pair ring[ZERO_TRACE_GPU_PENDING];
    unsigned long long head, tail;   // pending pairs: [head, tail)
    cudaEvent_t base;                // completed at host time base_ns
    uint64_t base_ns;
    int have_base, broken, said_full;
} G;

// A failed event call ends the GPU tracks (the host tracks go on): what is pending is dropped.
// Its error is taken back from cudart's last error (where it is the last), so the trainer's
// next launch check does not read it as a failed launch.
static int ok(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return 1;
    zero_cuda_take_back(e);
    if (!G.broken) fprintf(stderr, "zero: --trace: %s failed: %s; the GPU tracks stop here\n", what, cudaGetErrorString(e));
    G.broken = 1;
    G.head = G.tail;
    return 0;
}

// The reference: an event on the legacy default stream, which waits for and holds back
// every blocking stream, completed before the host reads its clock. Its error is the
// synchronization's latency, microseconds.
static int have_base(void) {
    if (G.have_base) return 1;
    if (!ok(cudaEventCreate(&G.base), "cudaEventCreate") || !ok(cudaEventRecord(G.base, 0), "cudaEventRecord") ||
        !ok(cudaEventSynchronize(G.base), "cudaEventSynchronize"))
        return 0;
    G.base_ns = zero_trace_now();
    G.have_base = 1;
    return 1;
}

static void drain_all(void) { zero_trace_gpu_drain(1); }

// The first GPU track asks the trace to wait for the pending spans before its file is written.
int zero_trace_gpu_track(const char *name) {
    if (!zero_trace_on) return -1;
    zero_trace_flush_with(drain_all);
    return zero_trace_track(name);
}

static uint64_t host_ns(cudaEvent_t e) {
    float ms = 0;
    ok(cudaEventElapsedTime(&ms, G.base, e), "cudaEventElapsedTime");
    return G.base_ns + (uint64_t)((double)ms * 1e6 > 0 ? (double)ms * 1e6 : 0);
}

// mu held. Resolves the oldest pair once its end completed (or waits for it).
static int resolve_oldest(int wait) {
    if (G.head == G.tail) return 0;
    Pair *p = &G.ring[G.head % ZERO_TRACE_GPU_PENDING];
    if (!p->name) return 0;   // begun, not yet ended
    cudaError_t q = wait ? cudaEventSynchronize(p->e1) : zero_event_query(p->e1);   // polled on the trainer's thread
    if (q == cudaErrorNotReady) return 0;
    if (!ok(q, "waiting for a span's end event")) return 0;
    uint64_t t0 = host_ns(p->e0), t1 = host_ns(p->e1);
    if (G.broken) return 0;
    zero_trace_span_on(p->track, p->step, p->name, p->label, t0, t1);
    p->name = NULL;
    G.head++;
    return 1;
}

int zero_trace_gpu_begin(cudaStream_t s, int track) {
    if (!zero_trace_on || track < 0 || G.broken) return -1;
    pthread_mutex_lock(&mu);
    int span = -1;
    if (have_base()) {
        while (G.tail - G.head >= ZERO_TRACE_GPU_PENDING && !G.broken) {
            // Full: wait for the oldest span's end with the lock released; a thread the GPU's
            // work may be waiting for (a host stream's) must not be held at its own span.
            const Pair *p = &G.ring[G.head % ZERO_TRACE_GPU_PENDING];
            if (!p->name) break;   // begun, not yet ended: nothing to wait for
            cudaEvent_t end = p->e1;
            pthread_mutex_unlock(&mu);
            cudaError_t q = cudaEventSynchronize(end);
            pthread_mutex_lock(&mu);
            if (!ok(q, "waiting for a span's end event")) break;
            while (resolve_oldest(0)) {}
        }
        if (G.tail - G.head < ZERO_TRACE_GPU_PENDING) {
            Pair *p = &G.ring[G.tail % ZERO_TRACE_GPU_PENDING];
            if ((p->e0 || ok(cudaEventCreate(&p->e0), "cudaEventCreate")) &&
                (p->e1 || ok(cudaEventCreate(&p->e1), "cudaEventCreate")) && ok(cudaEventRecord(p->e0, s), "cudaEventRecord")) {
                p->name = NULL;
                p->track = track;
                p->step = zero_trace_current_step();
                span = (int)(G.tail++ % ZERO_TRACE_GPU_PENDING);
            }
        } else if (!G.broken && !G.said_full) {
            G.said_full = 1;
            fprintf(stderr, "zero: --trace: %d GPU spans pending behind one still open; spans begun while it is open "
                    "are left off the GPU tracks\n", ZERO_TRACE_GPU_PENDING);
        }
    }
    pthread_mutex_unlock(&mu);
    return span;
}

void zero_trace_gpu_end(int span, cudaStream_t s, const char *name, const char *label) {
    if (span < 0) return;
    pthread_mutex_lock(&mu);
    Pair *p = &G.ring[span];
    if (!G.broken && ok(cudaEventRecord(p->e1, s), "cudaEventRecord")) {
        snprintf(p->label, LABEL, "%s", label ? label : "");
        p->name = name;
        while (resolve_oldest(0)) {}
    }
    pthread_mutex_unlock(&mu);
}

void zero_trace_gpu_drain(int wait) {
    if (!zero_trace_on) return;
    pthread_mutex_lock(&mu);
    while (resolve_oldest(wait)) {}
    pthread_mutex_unlock(&mu);
}

void zero_trace_gpu_free(void) {
    pthread_mutex_lock(&mu);
    for (int i = 0; i < ZERO_TRACE_GPU_PENDING; i++) {
        if (G.ring[i].e0) cudaEventDestroy(G.ring[i].e0);
        if (G.ring[i].e1) cudaEventDestroy(G.ring[i].e1);
        G.ring[i].e0 = G.ring[i].e1 = NULL;
    }
    if (G.have_base) cudaEventDestroy(G.base);
    G.have_base = 0;
    G.head = G.tail = 0;
    G.broken = G.said_full = 0;
    pthread_mutex_unlock(&mu);
}
