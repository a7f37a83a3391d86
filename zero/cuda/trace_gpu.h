/*
trace_gpu.h: a GPU stream's work on the --trace timeline (trace.h). The host only learns
when a stream ran something after the fact, so each span is a pair of CUDA events recorded
around the work; once the second has completed the pair becomes a span on the stream's own
track, in the step it was queued in, its times the events' elapsed times from a reference
event whose host time is known.

    int track = zero_trace_gpu_track("GPU: the model's stream");   // -1 with the trace off
    int span = zero_trace_gpu_begin(stream, track);                // -1: nothing recorded
    ... kernels, collectives on `stream` ...
    zero_trace_gpu_end(span, stream, "forward pass", label);
    zero_trace_finish();       // waits for every queued span, then writes the file

    ZeroTracePass p = zero_trace_pass_begin(stream, track);   // a trainer's pass, host and GPU
    ...
    zero_trace_pass_end(p, stream, "forward pass");

Off, every call returns after one test. On, at most ZERO_TRACE_GPU_PENDING spans wait for
their events; a begin that finds them all taken waits for the oldest (without the lock that
other threads' spans take), or, when the oldest is still open, records nothing and says so
once. Spans of one stream
must nest or follow each other (a stream runs in order); begins and ends come from one host
thread at a time per stream (the stream's owner).
*/
#ifndef ZERO_TRACE_GPU_H
#define ZERO_TRACE_GPU_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "../trace.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef ZERO_TRACE_GPU_PENDING
#define ZERO_TRACE_GPU_PENDING 4096
#endif

int zero_trace_gpu_track(const char *name);
int zero_trace_gpu_begin(cudaStream_t s, int track);
void zero_trace_gpu_end(int span, cudaStream_t s, const char *name, const char *label);
// Turns completed pairs into spans, oldest first; wait: also waits for the rest.
void zero_trace_gpu_drain(int wait);
void zero_trace_gpu_free(void);   // after the last drain; before the device is reset

// A trainer's pass (forward, backward, the optimizer step) as the host queued it (a span on
// the calling thread's track) and as the GPU ran it (on `track`).
typedef struct {
    uint64_t t0;
    int gpu;
} ZeroTracePass;
static inline ZeroTracePass zero_trace_pass_begin(cudaStream_t s, int track) {
    ZeroTracePass p = {zero_trace_begin(), zero_trace_gpu_begin(s, track)};
    return p;
}
static inline void zero_trace_pass_end(ZeroTracePass p, cudaStream_t s, const char *name) {
    zero_trace_gpu_end(p.gpu, s, name, "");
    zero_trace_end(name, p.t0);
}

#ifdef __cplusplus
}
#endif
#endif
