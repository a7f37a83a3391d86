/*
trace.h: a timeline of what each thread of a rank did and waited on, written as a Chrome
trace (Perfetto and chrome://tracing read it): spans (a name, a label such as the tensors a
collective moves, a start and a duration) on the track of the thread that ran them, and
counters (bytes in flight, pool occupancy). The plugin records its hooks, collectives,
host-stream work, NVMe transfers and waits; a trainer adds its own spans (forward,
backward, the optimizer step, validation, checkpoints).

  zero_trace_start(path, rank, world, keep_steps)  on: memory for the last keep_steps steps
                                                   (-1 when rank 0's file cannot be written)
  zero_trace_step(step)                            a step begins (the ring keeps whole steps)
  zero_trace_span(name, label, t0, t1)             t0, t1 from zero_trace_now() (ns)
  zero_trace_enter(name, label) .. zero_trace_exit()  the same, and while it lasts the span
                                                   is the thread's open one: a file written
                                                   meanwhile (a watchdog's) shows it, "open"
  zero_trace_counter(name, value)
  zero_trace_thread(name)                          names the calling thread's track
  t0 = zero_trace_begin() .. zero_trace_end(name, t0)   a trainer's span
  zero_trace_track(name), zero_trace_span_on(..)   a track not tied to a thread (a GPU
                                                   stream: cuda/trace_gpu.h) and its spans
  zero_trace_write()                               PATH.rankR.json; also on a watchdog timeout
  zero_trace_finish()                              the run's end: flush, write, say where, stop

Off (never started) every call returns after one test of a flag: zero cost. On, events go
to a fixed ring of ZERO_TRACE_EVENTS (a few MB) that forgets whole steps from the oldest
when it fills, so memory stays bounded however long the run. Thread-safe. Times are
CLOCK_MONOTONIC nanoseconds; each file records its rank's clock at start beside the world's
(zero_trace_sync), so scripts/trace_merge.py lines the ranks up on one timeline.
*/
#ifndef ZERO_TRACE_H
#define ZERO_TRACE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZERO_TRACE_EVENTS (1 << 16)   // the ring: 65536 events (about 6 MB)

extern int zero_trace_on;             // set by zero_trace_start: test it before building a label

// Starts recording for rank `rank` of `world`; the file is PATH.rankRRRRR.json. keep_steps:
// the ring forgets steps older than the last keep_steps (0: as many as fit). Returns 0, or
// -1 with the reason printed (path too long, out of memory).
int zero_trace_start(const char *path, int rank, int world, int keep_steps);
// The offset of this rank's clock against rank 0's, measured by the caller at a barrier
// (ns to add to this rank's times); 0 on one machine, where CLOCK_MONOTONIC is shared.
void zero_trace_sync(int64_t offset_ns);
uint64_t zero_trace_now(void);
void zero_trace_step(int step);
void zero_trace_span(const char *name, const char *label, uint64_t t0, uint64_t t1);
// One open span per thread at a time (a stream's running operation): enter starts it, exit
// records it.
void zero_trace_enter(const char *name, const char *label);
void zero_trace_exit(void);
void zero_trace_counter(const char *name, double value);
void zero_trace_thread(const char *name);
// A track of its own, named: its id, or -1 when the trace is off or the tracks are used up.
int zero_trace_track(const char *name);
// A span on `track` that belongs to step `step` (work timed after the fact: a GPU stream's).
void zero_trace_span_on(int track, int step, const char *name, const char *label, uint64_t t0, uint64_t t1);
int zero_trace_current_step(void);
// A trainer's own span: t0 = zero_trace_begin() (0 with the trace off), then
// zero_trace_end(name, t0) records it on the calling thread's track.
static inline uint64_t zero_trace_begin(void) { return zero_trace_on ? zero_trace_now() : 0; }
static inline void zero_trace_end(const char *name, uint64_t t0) {
    if (zero_trace_on) zero_trace_span(name, "", t0, zero_trace_now());
}
// Writes the file (every rank its own). Returns 0, or -1 after printing why. Safe to call
// from a watchdog thread while others record.
int zero_trace_write(void);
void zero_trace_stop(void);   // frees the ring
// The end of a traced run: what records spans after the fact finishes them (a GPU's pending
// events: zero_trace_flush_with), the file is written, a line says where, the ring is freed.
// Returns zero_trace_write's result; 0 with the trace off.
int zero_trace_finish(void);
void zero_trace_flush_with(void (*flush)(void));

#ifdef __cplusplus
}
#endif
#endif
