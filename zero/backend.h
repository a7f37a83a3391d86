/*
backend.h: everything zero.c asks of a machine, as a table of function pointers.

The orchestration (which bytes move where, and when) is the same on every machine; a
backend supplies memory, ordering, collectives and the few numeric kernels:
  host  (backend_host.c): host memory, MPI collectives, OpenMP C kernels, and real streams:
        the main stream is the calling thread (the model computes there, so work queued on
        it runs at once), every other stream is a worker thread that runs its queue in order.
  CUDA  (backend_cuda.cu, backend_cuda.h): device memory, NCCL on its own streams
        (comm_nccl.cu), CUDA kernels giving the same bits as the host's.

Ordering model (both backends implement it; zero.c must follow it, or results go wrong):
  - Work is enqueued on streams and runs in order per stream. The model computes on
    main_stream(); zero.c creates two more: one for parameter all-gathers, one for
    gradient reductions, so that a gather the model waits for never queues behind a
    reduction. Each created stream has its own communicator (MPI duplicate or NCCL split).
  - event_record(e, s) marks what s has queued so far; stream_wait(s2, e) makes work
    queued on s2 afterwards wait for that mark (the latest record at the time of the wait,
    as in CUDA: re-recording e later does not change an earlier wait).
  - Collectives and the kernels that consume their results (reduce_slices after an
    all_to_all) go on their stream; an event recorded after them is what the main stream
    waits on before it reads a gathered parameter or reuses a gradient buffer.
  - Before a collective reads what the model wrote (gradients) or overwrites memory the
    model read (a recycled gather buffer), zero.c makes its stream wait on an event
    recorded on the main stream.
  - Results a kernel leaves in host memory (sum_squares) are valid after stream_sync.
  - ZERO_HOST_JITTER=SEED makes the host backend sleep a random short while before every
    queued operation, so a missing wait in zero.c shows up as different bits (tests).

Numerics are part of the contract: every backend must produce the same bits.
  reduce_slices  acc[i] += (((s_0[i] + s_1[i]) + s_2[i]) + ... + s_{n-1}[i]), slices summed
                 in rank order in fp32, then added to the accumulator.
  adamw          adamw_element() of llmc/numerics/adamw.h on each element.
  refresh        fp32: a copy. bf16: adamw_round_bf16_at(master, seed, t, global index) of
                 llmc/numerics/adamw.h, the stochastic rounding train_gpt2cu uses too: with u the
                 float's bits and bits = rng_u32(seed, RNG_STREAM_ROUNDING, t << 40 | global
                 index), the bf16 is (u + (bits & 0xFFFF)) >> 16 (a carry with probability
                 lower half / 65536: unbiased). NaN and infinity truncate (NaN stays NaN).
  sum_slices     out[i] = ((s_0[i] + s_1[i]) + ...) + s_{n-1}[i]: reduce_slices's sum, so that
                 acc += sum on the host gives reduce_slices's bits.
  sum_squares    in double: x split into blocks of ZERO_SUMSQ_BLOCK elements; each block
                 summed left to right; block sums added left to right. The order is
                 llmc/numerics/adamw.h's (adamw_sumsq, adamw_sumsq_add, adamw_sumsq_warp on the
                 device), which train_gpt2cu's norm follows over the same slice table, so
                 at 1 rank both clip by the same bits.
*/
#ifndef ZERO_BACKEND_H
#define ZERO_BACKEND_H

#include <stddef.h>
#include <stdint.h>

// The AdamW element update, the gradient norm's order and the counter RNG are the numeric
// contract shared with the trainers (bit-identical results sharded or not). Both headers
// are self-contained; they are the only files zero/ takes from llmc/.
#include "../llmc/numerics/adamw.h"
#include "../llmc/numerics/rand.h"
#include "comm.h"
#include "kernels/host_kernels.h"   // ZERO_SUMSQ_BLOCK, zero_bf16_to_f32
#include "kernels/wire.h"
#include "zero.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ZeroStream ZeroStream;   // backend-defined; opaque to zero.c
typedef struct ZeroEvent ZeroEvent;

// One range of a many-range kernel call (the fields are the one-range kernel's arguments).
typedef struct {
    float *param;
    const float *grad;
    float *m, *v;
    size_t n;
    int decay;
} ZeroAdamwPart;
typedef struct {
    void *dst;
    const float *master;
    size_t n;
    uint64_t gidx0;
} ZeroRefreshPart;
typedef struct {
    const float *x;
    size_t n;
    double *out;
} ZeroSumsqPart;
typedef struct {
    float *acc;
    const void *src;
    size_t stride, n;
} ZeroReducePart;

typedef enum {
    ZERO_MEM_DEVICE = 0,   // where the model computes (host memory for the host backend)
    ZERO_MEM_HOST = 1,     // host memory the device can reach quickly (pinned under CUDA)
} ZeroMemKind;

struct ZeroBackend {
    const char *name;
    void *ctx;              // backend-private state
    int needs_mpi;          // collectives need an MPI launch when world > 1
    int counts_only;        // a dry run's backend: nothing real happens (no files are opened either)

    // Memory. alloc returns 64-byte aligned memory (ZERO_MEM_HOST: 4096-byte aligned, which
    // the NVMe engine's O_DIRECT transfers need) or NULL; bytes may be 0.
    void *(*alloc)(const ZeroBackend *b, ZeroMemKind kind, size_t bytes);
    void (*free)(const ZeroBackend *b, ZeroMemKind kind, void *p);
    void (*memset0)(const ZeroBackend *b, void *p, size_t bytes, ZeroStream *s);
    void (*copy)(const ZeroBackend *b, void *dst, ZeroMemKind dst_kind, const void *src,
                 ZeroMemKind src_kind, size_t bytes, ZeroStream *s);

    // Ordering.
    ZeroStream *(*main_stream)(const ZeroBackend *b);
    ZeroStream *(*stream_create)(const ZeroBackend *b);
    // A device stream for copies, memsets and events only: no collective may be issued on
    // it, so it costs no communicators (offload's uploads).
    ZeroStream *(*stream_create_copy)(const ZeroBackend *b);
    // A stream whose work runs on CPU threads over host memory (ZERO_MEM_HOST buffers): the
    // CPU optimizer of offloaded states and the NVMe traffic. Events order it against the
    // device streams both ways. On the host backend every stream is one.
    ZeroStream *(*stream_create_host)(const ZeroBackend *b);
    void (*stream_destroy)(const ZeroBackend *b, ZeroStream *s);
    void (*stream_sync)(const ZeroBackend *b, ZeroStream *s);
    ZeroEvent *(*event_create)(const ZeroBackend *b);
    void (*event_destroy)(const ZeroBackend *b, ZeroEvent *e);
    void (*event_record)(const ZeroBackend *b, ZeroEvent *e, ZeroStream *s);
    void (*stream_wait)(const ZeroBackend *b, ZeroStream *s, ZeroEvent *e);

    // Collectives on device buffers inside group g (comm.h's ZeroGroup), enqueued on s
    // (ZeroCollPart: see comm.h). `what` names the tensors for error and timeout messages.
    void (*all_gather)(const ZeroBackend *b, ZeroComm *c, ZeroGroup g, const ZeroCollPart *parts, int nparts,
                       ZeroDType dt, ZeroStream *s, const char *what);
    void (*all_to_all)(const ZeroBackend *b, ZeroComm *c, ZeroGroup g, const ZeroCollPart *parts, int nparts,
                       ZeroDType dt, ZeroStream *s, const char *what);
    // The library's own sum (NCCL, MPI; --fast-reduce): each part's send holds N slices of
    // count elements, slice q for member q; recv gets the sum over members of the slices for
    // this rank, in dt (bf16: rounded as the library's buffers are), in the library's order.
    // Fewer bytes and faster than all_to_all + reduce_slices, but not the same bits across
    // rank counts or libraries.
    void (*reduce_scatter)(const ZeroBackend *b, ZeroComm *c, ZeroGroup g, const ZeroCollPart *parts, int nparts,
                           ZeroDType dt, ZeroStream *s, const char *what);
    // Host doubles, blocking; the sum runs in rank order (same bits everywhere).
    void (*allreduce_sum_f64)(const ZeroBackend *b, ZeroComm *c, double *values, int n, const char *what);
    // Host doubles, blocking: rank 0 receives every rank's values[0..n) into all (rank q's
    // at all[q*n]; all may be NULL elsewhere). The other ranks send O(n) bytes each, where
    // an all-reduce of per-rank slots would send O(n * world) (metadata at thousands of ranks).
    void (*gather_f64)(const ZeroBackend *b, ZeroComm *c, const double *values, int n, double *all, const char *what);

    // Kernels, enqueued on s: over device buffers on a device stream, host buffers on a
    // host stream.
    // acc[i] += sum over q in 0..nslices-1 (in order) of src[q*stride + i], i < n.
    void (*reduce_slices)(const ZeroBackend *b, float *acc, const void *src, size_t stride,
                          int nslices, size_t n, ZeroDType dt, ZeroStream *s);
    // out[i] = that sum alone (no accumulator): what an offloaded accumulator adds on the host.
    void (*sum_slices)(const ZeroBackend *b, float *out, const void *src, size_t stride, int nslices, size_t n,
                       ZeroDType dt, ZeroStream *s);
    void (*adamw)(const ZeroBackend *b, float *param, const float *grad, float *m, float *v,
                  size_t n, const AdamWParams *p, int decay, ZeroStream *s);
    // dst[i] (dtype dt) = master[i], rounded as above; element i has global index gidx0 + i.
    void (*refresh)(const ZeroBackend *b, void *dst, ZeroDType dt, const float *master, size_t n,
                    uint64_t seed, int t, uint64_t gidx0, ZeroStream *s);
    // *out (host) = sum of x[i]^2 in the fixed order above; valid after stream_sync(s).
    void (*sum_squares)(const ZeroBackend *b, const float *x, size_t n, double *out, ZeroStream *s);
    // Optional (NULL: zero_adamw_parts and its siblings below call the one-range kernel
    // per part): the same kernels over many ranges in one call, the same bits, so that a
    // step costs a device a few launches instead of several per tensor. Parts may come in
    // any order and must not overlap.
    void (*adamw_parts)(const ZeroBackend *b, const ZeroAdamwPart *parts, int nparts, const AdamWParams *p,
                        ZeroStream *s);
    void (*refresh_parts)(const ZeroBackend *b, const ZeroRefreshPart *parts, int nparts, ZeroDType dt,
                          uint64_t seed, int t, ZeroStream *s);
    void (*sum_squares_parts)(const ZeroBackend *b, const ZeroSumsqPart *parts, int nparts, ZeroStream *s);
    void (*reduce_slices_parts)(const ZeroBackend *b, const ZeroReducePart *parts, int nparts, int nslices,
                                ZeroDType dt, ZeroStream *s);
    // ZeRO++ wire kernels (wire.h: the record layout and the rules; the host versions are
    // wire.c's, the CUDA ones wire_cuda.cu's, the same bits), enqueued on s. A record holds
    // one slice of slice_n values in format w (ZERO_WIRE_RAW: the values in dtype dt). The
    // `block` is the quantization block (ignored for RAW).
    // pack: nslices slices of slice_n values of dtype dt at src -> nslices records at rec;
    //   record p holds slice (p % Y) * X + p / Y with X = group, Y = nslices / group
    //   (ZeRO++ eq. 1-2: the slices bound for one member of the intra-node hop side by side;
    //   group 1 keeps the order).
    void (*wire_pack)(const ZeroBackend *b, ZeroWire w, int block, const void *src, ZeroDType dt, size_t slice_n,
                      int nslices, int group, void *rec, ZeroStream *s);
    // unpack: nslices records -> nslices * slice_n values of dtype dt at out (in order).
    void (*wire_unpack)(const ZeroBackend *b, ZeroWire w, int block, const void *rec, size_t slice_n, int nslices,
                        void *out, ZeroDType dt, ZeroStream *s);
    // reduce_pack: `in` holds ngroups runs of nout records; out record k = pack of
    //   (((v_0[k] + v_1[k]) + ...) + v_{ngroups-1}[k]) in fp32, v_g[k] the unpacked record k
    //   of run g (RAW bf16: rounded to nearest even).
    void (*wire_reduce_pack)(const ZeroBackend *b, ZeroWire w, int block, const void *in, ZeroDType dt,
                             size_t slice_n, int ngroups, int nout, void *out, ZeroStream *s);
    // reduce: acc[i] (+)= ((v_0[i] + v_1[i]) + ...) + v_{nrec-1}[i] for i < n (n <= slice_n),
    //   v_k the unpacked record k, summed in fp32 then added (accumulate) or stored (0): the
    //   bits of reduce_slices / sum_slices over the unpacked values.
    void (*wire_reduce)(const ZeroBackend *b, ZeroWire w, int block, const void *rec, ZeroDType dt, size_t slice_n,
                        int nrec, size_t n, float *acc, int accumulate, ZeroStream *s);
    // Runs fn(arg) on host stream s when the stream reaches it (CPU work in stream order:
    // the offloaded optimizer's tiles, NVMe reads and writes). arg must live until then.
    void (*host_call)(const ZeroBackend *b, ZeroStream *s, void (*fn)(void *arg), void *arg);
    // Optional (NULL: none): what a trace calls the thread that runs stream s's work (a
    // string that lives as long as the process).
    void (*stream_name)(const ZeroBackend *b, ZeroStream *s, const char *name);
    // Optional (NULL: the calling thread's spans say it all): with a trace, a span of the
    // work queued on stream s between begin and end, as the device runs it. begin returns
    // the handle end takes (-1: none).
    int (*trace_begin)(const ZeroBackend *b, ZeroStream *s);
    void (*trace_end)(const ZeroBackend *b, ZeroStream *s, int span, const char *name, const char *label);
};

// The many-range kernels through the backend's own, or one call per part.
static inline void zero_adamw_parts(const ZeroBackend *b, const ZeroAdamwPart *parts, int nparts,
                                    const AdamWParams *p, ZeroStream *s) {
    if (b->adamw_parts) return b->adamw_parts(b, parts, nparts, p, s);
    for (int i = 0; i < nparts; i++)
        b->adamw(b, parts[i].param, parts[i].grad, parts[i].m, parts[i].v, parts[i].n, p, parts[i].decay, s);
}
static inline void zero_refresh_parts(const ZeroBackend *b, const ZeroRefreshPart *parts, int nparts, ZeroDType dt,
                                      uint64_t seed, int t, ZeroStream *s) {
    if (b->refresh_parts) return b->refresh_parts(b, parts, nparts, dt, seed, t, s);
    for (int i = 0; i < nparts; i++) b->refresh(b, parts[i].dst, dt, parts[i].master, parts[i].n, seed, t, parts[i].gidx0, s);
}
static inline void zero_sum_squares_parts(const ZeroBackend *b, const ZeroSumsqPart *parts, int nparts,
                                          ZeroStream *s) {
    if (b->sum_squares_parts) return b->sum_squares_parts(b, parts, nparts, s);
    for (int i = 0; i < nparts; i++) b->sum_squares(b, parts[i].x, parts[i].n, parts[i].out, s);
}
static inline void zero_reduce_slices_parts(const ZeroBackend *b, const ZeroReducePart *parts, int nparts, int nslices,
                                            ZeroDType dt, ZeroStream *s) {
    if (b->reduce_slices_parts) return b->reduce_slices_parts(b, parts, nparts, nslices, dt, s);
    for (int i = 0; i < nparts; i++)
        b->reduce_slices(b, parts[i].acc, parts[i].src, parts[i].stride, nslices, parts[i].n, dt, s);
}

#ifdef __cplusplus
}
#endif
#endif
