/*
gpu_zero_toy.c: the CUDA backend (zero/cuda/backend_cuda.cu, zero/cuda/comm_nccl.cu) against the host
backend and against mpi_zero_toy.c's unsharded reference. The backend's kernels against
their C references: test_backend_ops.c. Modes:
  collectives  all_gather (in place, out of place, bf16, 0-element parts, more parts than
               one NCCL group takes), all_to_all, allreduce_sum_f64 against their
               definitions, and the bytes counted; then groups.
  groups       all_gather and all_to_all in the ZeRO++ groups (world, node, across, hpz) at
               every layout of the run's world (each node size and hpZ size dividing it),
               fp32, bf16 and u8, against zero_group_cases.h: each tagged element where it
               belongs, and the intra- and inter-node bytes counted.
  train        mpi_zero_toy.c's stage 0-3 variants on the CUDA backend, with the same checks
               (bit-identical to the reference, bytes per step, memory by use). The toy model
               computes on the host, so a fetched unit's tensors are copied to the host on
               the main stream, and its gradients copied back before grads_ready: the
               ordering a model running on the main stream gets.
  errors, timeout, misuse   mpi_zero_toy.c's refusals and deaths on the CUDA backend.
  queued       an all-gather queued behind 4 s of earlier work on its stream, under a 2 s
               watchdog: not stuck (its clock starts when that work is done), it completes.
  ring         the watchdog's ring of collectives filled twice behind one queued like that,
               with one more unfinished in between that then stalls: still watched (1 s),
               it ends the job.
  bootstrap    zero_comm_share_blob across ranks (MPI, file or TCP); needs no GPU.
  all          collectives, train (the default).
Launch with mpirun -np N, or as N processes with RANK / WORLD_SIZE / LOCAL_RANK and
ZERO_BOOTSTRAP_FILE or ZERO_BOOTSTRAP_TCP (dev/test/zero/gpu_zero.sh does both). Several ranks
on one GPU need a distinct NCCL_HOSTID each and NCCL_SOCKET_IFNAME=lo (NCCL < 2.30), or
NCCL_MULTI_RANK_GPU_ENABLE=1 (NCCL >= 2.30). Without a GPU: "SKIP: no CUDA device", exit 0.
Ends with the line "N passed, N failed" (all ranks together).
*/
#include <cuda_runtime_api.h>
#include <math.h>
#include <nccl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../zero/backend.h"
#include "../../../zero/host/backend_host.h"
#include "../../../zero/cuda/backend_cuda.h"
#include "../../../zero/comm.h"
#include "../../../zero/partition.h"
#include "../../../zero/zero.h"
#include "zero_group_cases.h"

// ---------------------------------------------------------------- mpi_zero_toy.c on the GPU

// mpi_zero_toy.c is included with its backend and its hooks redirected: the backend is the
// CUDA one, and the hooks that hand device memory to the model go through host mirrors.
static const ZeroBackend *gpu_b;
static cudaStream_t gpu_main;
static const ZeroBackend *toy_backend(void) { return gpu_b; }
static Zero *toy_zero_init(const ZeroTensor *tensors, int nt, int nu, const ZeroConfig *cfg, ZeroComm *comm,
                           const ZeroBackend *b, ZeroInitFn init, void *ctx);
static const ZeroUnitView *toy_fetch(Zero *z, int unit, int is_backward);
static void toy_release(Zero *z, int unit, int is_backward);
static void toy_grads_ready(Zero *z, int unit);

#define zero_backend_host(c) toy_backend()
#define zero_backend_host_free(b) ((void)(b))   // the CUDA backend is freed below
#define zero_init toy_zero_init
#define zero_fetch toy_fetch
#define zero_release toy_release
#define zero_grads_ready toy_grads_ready
#define main mpi_zero_toy_main
#include "mpi_zero_toy.c"
#undef main
#undef zero_grads_ready
#undef zero_release
#undef zero_fetch
#undef zero_init
#undef zero_backend_host
#undef zero_backend_host_free

static void cuda_or_die(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return;
    fprintf(stderr, "FAIL rank %d: %s: %s\n", rank_g, what, cudaGetErrorString(e));
    exit(1);
}

// Copies on the main stream, where the model's own kernels would run.
static void copy_on_main(void *dst, const void *src, size_t bytes) {
    if (bytes) cuda_or_die(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, gpu_main), "cudaMemcpyAsync");
}
static void sync_main(void) { cuda_or_die(cudaStreamSynchronize(gpu_main), "cudaStreamSynchronize(main)"); }

typedef struct {
    void *p[3], *g[3];          // pinned host copies of the unit's tensors
    void *params[3], *grads[3]; // the view the toy sees
    void *dev_grads[3];         // where the gradients go back to
    int dirty;                  // host gradients not yet copied back
    ZeroUnitView view;
} Mirror;

static Toy toy_sizes;
static Mirror mirrors[TOY_NU];
static size_t toy_pes = 4, toy_ges = 4;

static void mirrors_init(void) {
    toy_table(&toy_sizes);
    for (int u = 0; u < TOY_NU; u++)
        for (int i = 0; i < 3; i++) {
            cuda_or_die(cudaMallocHost(&mirrors[u].p[i], TOY_H * TOY_H * sizeof(float)), "cudaMallocHost (mirror)");
            cuda_or_die(cudaMallocHost(&mirrors[u].g[i], TOY_H * TOY_H * sizeof(float)), "cudaMallocHost (mirror)");
        }
}

static void mirrors_free(void) {
    for (int u = 0; u < TOY_NU; u++)
        for (int i = 0; i < 3; i++) {
            cudaFreeHost(mirrors[u].p[i]);
            cudaFreeHost(mirrors[u].g[i]);
        }
}

static Zero *toy_zero_init(const ZeroTensor *tensors, int nt, int nu, const ZeroConfig *cfg, ZeroComm *comm,
                           const ZeroBackend *b, ZeroInitFn init, void *ctx) {
    toy_pes = cfg->param_dtype == ZERO_BF16 ? 2 : 4;
    toy_ges = cfg->grad_dtype == ZERO_BF16 ? 2 : 4;
    return zero_init(tensors, nt, nu, cfg, comm, b, init, ctx);
}

static const ZeroUnitView *toy_fetch(Zero *z, int unit, int is_backward) {
    const ZeroUnitView *v = zero_fetch(z, unit, is_backward);
    Mirror *M = &mirrors[unit];
    for (int i = 0; i < v->count; i++) {
        size_t n = toy_sizes.t[v->tensors[i]].numel;
        copy_on_main(M->p[i], v->params[i], n * toy_pes);
        M->params[i] = M->p[i];
        M->grads[i] = NULL;
        if (is_backward) {
            copy_on_main(M->g[i], v->grads[i], n * toy_ges);   // the model adds to what is there
            M->grads[i] = M->g[i];
            M->dev_grads[i] = v->grads[i];
        }
    }
    sync_main();
    M->dirty = is_backward;
    M->view = *v;
    M->view.params = M->params;
    M->view.grads = is_backward ? M->grads : NULL;
    return &M->view;
}

static void push_grads(int unit) {
    Mirror *M = &mirrors[unit];
    if (!M->dirty) return;
    for (int i = 0; i < M->view.count; i++)
        copy_on_main(M->dev_grads[i], M->g[i], toy_sizes.t[M->view.tensors[i]].numel * toy_ges);
    M->dirty = 0;   // later copies into the mirror queue behind these on the same stream
}

static void toy_grads_ready(Zero *z, int unit) {
    if (unit >= 0 && unit < TOY_NU) push_grads(unit);
    zero_grads_ready(z, unit);
}

static void toy_release(Zero *z, int unit, int is_backward) {
    if (is_backward && unit >= 0 && unit < TOY_NU) push_grads(unit);
    zero_release(z, unit, is_backward);
}

// ---------------------------------------------------------------- device buffers

static void *dev_alloc(size_t bytes) {
    void *p = gpu_b->alloc(gpu_b, ZERO_MEM_DEVICE, bytes);
    if (!p) { fprintf(stderr, "FAIL rank %d: device allocation of %zu bytes\n", rank_g, bytes); exit(1); }
    return p;
}
static void dev_free(void *p) { gpu_b->free(gpu_b, ZERO_MEM_DEVICE, p); }

// Bit equality, or NaN against NaN.
static int same_f64(double a, double b) { return memcmp(&a, &b, 8) == 0 || (isnan(a) && isnan(b)); }

// ---------------------------------------------------------------- collectives

// The layout the group collectives are checked against (zero_group_cases.h): what the test
// set, or at start-up the comm's own nodes.
static GcLayout coll_layout;

static uint64_t sent_bytes(const ZeroComm *c, ZeroCollOp op) { return c->sent[op].intra_bytes + c->sent[op].inter_bytes; }

// The counters one collective moved against this rank's members on its node and off it.
static void coll_bytes(const ZeroComm *c, ZeroGroup g, ZeroCollOp op, ZeroCollBytes before, uint64_t per_peer,
                       const char *what) {
    uint64_t intra, inter;
    gc_bytes(coll_layout, g, c->rank, per_peer, &intra, &inter);
    const ZeroCollBytes *now = &c->sent[op];
    check(now->intra_bytes - before.intra_bytes == intra && now->inter_bytes - before.inter_bytes == inter,
          "collectives: %s in the %s group (node size %d, hpz %d) counted %llu intra and %llu inter bytes, expected "
          "%llu and %llu", what, zero_group_name(g), coll_layout.node_size, coll_layout.hpz,
          (unsigned long long)(now->intra_bytes - before.intra_bytes),
          (unsigned long long)(now->inter_bytes - before.inter_bytes), (unsigned long long)intra, (unsigned long long)inter);
}

// nparts parts of counts[k % ncounts] elements each, as one all_gather in group g; in_place:
// send is this rank's slot of recv. Members, their order and the bytes: zero_group_cases.h.
static void coll_gather(ZeroComm *c, ZeroStream *s, ZeroGroup g, ZeroDType dt, const size_t *counts, int ncounts,
                        int nparts, int in_place) {
    int *members = malloc((size_t)c->world * sizeof(int)), index = -1;
    const int n = gc_members(coll_layout, g, c->rank, members, &index);
    size_t *pc = malloc((size_t)nparts * sizeof *pc);
    for (int k = 0; k < nparts; k++) pc[k] = counts[k % ncounts];
    GcShape S = {nparts, pc};
    size_t es = zero_dtype_size(dt), total = gc_total(S);
    char *hsend = malloc(total * es + 1), *hrecv = malloc(total * (size_t)n * es + 1);
    char *dsend = dev_alloc(total * es), *drecv = dev_alloc(total * (size_t)n * es);
    ZeroCollPart *parts = malloc((size_t)nparts * sizeof *parts);
    memset(hrecv, 0xA5, total * (size_t)n * es);   // what was there before must not survive
    if (in_place) gc_gather_place(hrecv, dt, S, n, index, c->rank);
    else gc_gather_send(hsend, dt, S, c->rank);
    size_t so = 0, ro = 0;
    for (int k = 0; k < nparts; k++) {
        parts[k].recv = drecv + ro * es;
        parts[k].send = in_place ? drecv + (ro + (size_t)index * pc[k]) * es : dsend + so * es;
        parts[k].count = pc[k];
        so += pc[k];
        ro += pc[k] * (size_t)n;
    }
    if (!in_place) copy_on_main(dsend, hsend, total * es);
    copy_on_main(drecv, hrecv, total * (size_t)n * es);
    sync_main();
    char what[96], why[256];
    snprintf(what, sizeof what, "all_gather (%s, %d parts, %s)", gc_dtype_name(dt), nparts,
             in_place ? "in place" : "out of place");
    ZeroCollBytes before = c->sent[ZERO_COLL_ALL_GATHER];
    gpu_b->all_gather(gpu_b, c, g, parts, nparts, dt, s, "test all_gather");
    gpu_b->stream_sync(gpu_b, s);
    coll_bytes(c, g, ZERO_COLL_ALL_GATHER, before, total * es, what);
    copy_on_main(hrecv, drecv, total * (size_t)n * es);
    sync_main();
    check(!gc_gather_wrong(hrecv, dt, S, members, n, why, sizeof why), "collectives: %s in the %s group (node size %d, "
          "hpz %d): %s", what, zero_group_name(g), coll_layout.node_size, coll_layout.hpz, why);
    dev_free(dsend); dev_free(drecv);
    free(hsend); free(hrecv); free(parts); free(pc); free(members);
}

// The same for one all_to_all in group g: slice r of each part goes to member r.
static void coll_all_to_all(ZeroComm *c, ZeroStream *s, ZeroGroup g, ZeroDType dt, const size_t *counts, int ncounts,
                            int nparts) {
    int *members = malloc((size_t)c->world * sizeof(int)), index = -1;
    const int n = gc_members(coll_layout, g, c->rank, members, &index);
    size_t *pc = malloc((size_t)nparts * sizeof *pc);
    for (int k = 0; k < nparts; k++) pc[k] = counts[k % ncounts];
    GcShape S = {nparts, pc};
    size_t es = zero_dtype_size(dt), total = gc_total(S) * (size_t)n;
    char *hsend = malloc(total * es + 1), *hrecv = malloc(total * es + 1);
    char *dsend = dev_alloc(total * es), *drecv = dev_alloc(total * es);
    ZeroCollPart *parts = malloc((size_t)nparts * sizeof *parts);
    memset(hrecv, 0xA5, total * es);
    gc_a2a_send(hsend, dt, S, members, n, c->rank);
    size_t o = 0;
    for (int k = 0; k < nparts; k++) {
        parts[k] = (ZeroCollPart){dsend + o * es, drecv + o * es, pc[k]};
        o += pc[k] * (size_t)n;
    }
    copy_on_main(dsend, hsend, total * es);
    copy_on_main(drecv, hrecv, total * es);
    sync_main();
    char what[96], why[256];
    snprintf(what, sizeof what, "all_to_all (%s, %d parts)", gc_dtype_name(dt), nparts);
    ZeroCollBytes before = c->sent[ZERO_COLL_ALL_TO_ALL];
    gpu_b->all_to_all(gpu_b, c, g, parts, nparts, dt, s, "test all_to_all");
    gpu_b->stream_sync(gpu_b, s);
    coll_bytes(c, g, ZERO_COLL_ALL_TO_ALL, before, gc_total(S) * es, what);
    copy_on_main(hrecv, drecv, total * es);
    sync_main();
    check(!gc_a2a_wrong(hrecv, dt, S, members, n, c->rank, why, sizeof why), "collectives: %s in the %s group (node "
          "size %d, hpz %d): %s", what, zero_group_name(g), coll_layout.node_size, coll_layout.hpz, why);
    dev_free(dsend); dev_free(drecv);
    free(hsend); free(hrecv); free(parts); free(pc); free(members);
}

static void coll_allreduce(ZeroComm *c, int n) {
    double *v = malloc((size_t)n * 8), *want = malloc((size_t)n * 8);
    for (int i = 0; i < n; i++) {
        // rank 0 holds 1e16: the small terms survive only in rank order
        for (int r = 0; r < c->world; r++) {
            double x = (r == 0 ? 1e16 : 1.0 + 0.25 * r) * (double)(i + 1);
            want[i] = r == 0 ? x : want[i] + x;
            if (r == c->rank) v[i] = x;
        }
    }
    uint64_t before = sent_bytes(c, ZERO_COLL_ALL_REDUCE);
    gpu_b->allreduce_sum_f64(gpu_b, c, v, n, "test all-reduce");
    int ok = 1;
    for (int i = 0; i < n; i++) ok &= same_f64(v[i], want[i]);
    check(ok, "collectives: allreduce_sum_f64 of %d values is not the rank-order sum", n);
    check(sent_bytes(c, ZERO_COLL_ALL_REDUCE) - before == (uint64_t)n * 8 * (uint64_t)(c->world - 1),
          "collectives: allreduce_sum_f64 counted %llu bytes", (unsigned long long)(sent_bytes(c, ZERO_COLL_ALL_REDUCE) - before));
    free(v); free(want);
}

// Every group at every layout of the world (each node size and hpZ size dividing it), on a
// stream opened after the layout is set (its NCCL group communicators follow that layout):
// all_gather out of place and in place and all_to_all, fp32, bf16 and u8, and more parts
// than one NCCL group takes. Leaves the start-up layout in force.
static void run_groups(ZeroComm *c) {
    static const size_t counts[] = {7, 0, 333, 1, 64};
    static const size_t tiny[] = {1, 2, 3};
    static const ZeroDType dts[3] = {ZERO_F32, ZERO_BF16, ZERO_U8};
    const GcLayout start = coll_layout;
    const int W = c->world;
    for (int ns = 1; ns <= W; ns++)
        for (int h = 1; h <= W; h++) {
            if (W % ns || W % h) continue;
            int rc = zero_comm_set_layout(c, ns, h);
            check(rc == 0, "groups: zero_comm_set_layout(node size %d, hpz %d) at world %d refused", ns, h, W);
            if (rc != 0) continue;
            coll_layout = (GcLayout){W, ns, h};
            ZeroStream *s = gpu_b->stream_create(gpu_b);
            check(s != NULL, "groups: stream_create at node size %d, hpz %d failed", ns, h);
            if (!s) continue;
            for (int gi = 0; gi < ZERO_GROUP_KINDS; gi++) {
                for (int d = 0; d < 3; d++) {
                    coll_gather(c, s, gc_groups[gi], dts[d], counts, 5, 5, 0);
                    coll_gather(c, s, gc_groups[gi], dts[d], counts, 5, 5, 1);
                    coll_all_to_all(c, s, gc_groups[gi], dts[d], counts, 5, 5);
                }
            }
            coll_gather(c, s, ZERO_GROUP_HPZ, ZERO_BF16, tiny, 3, 2100, 1);   // more than one NCCL group
            coll_all_to_all(c, s, ZERO_GROUP_ACROSS, ZERO_U8, tiny, 3, 700);
            gpu_b->stream_destroy(gpu_b, s);
        }
    check(zero_comm_set_layout(c, 0, 0) == 0, "groups: restoring the start-up layout failed");
    coll_layout = start;
}

// A host function stands in for a long backward pass queued before a collective: it
// sleeps secs, then sets *done.
typedef struct {
    unsigned secs;
    atomic_int *done;
} SlowWork;
static void CUDART_CB sleep_then_flag(void *arg) {
    const SlowWork *w = (const SlowWork *)arg;
    sleep(w->secs);
    atomic_store(w->done, 1);
}

// The all-gather runs on a comm stream made to wait (an event) for the main stream, where
// the slow work is: as zero/'s reductions wait for the model's backward.
static void run_queued(ZeroComm *c) {
    const size_t n = 64;
    ZeroStream *s = gpu_b->stream_create(gpu_b);
    ZeroEvent *e = gpu_b->event_create(gpu_b);
    check(s != NULL && e != NULL, "queued: stream_create or event_create failed");
    if (!s || !e) {
        if (e) gpu_b->event_destroy(gpu_b, e);
        if (s) gpu_b->stream_destroy(gpu_b, s);
        return;
    }
    float *h = malloc(n * (size_t)c->world * sizeof(float)), *d = dev_alloc(n * (size_t)c->world * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = (float)(1000 * c->rank + (int)i);
    copy_on_main(d + (size_t)c->rank * n, h, n * sizeof(float));
    sync_main();
    // the ranks line up before the 2 s watchdog starts (each one's 4 s of work starts now; a
    // rank that a busy machine holds back up to 2 s more does not look stuck)
    ZeroCollPart warm = {d + (size_t)c->rank * n, d, n};
    gpu_b->all_gather(gpu_b, c, ZERO_GROUP_WORLD, &warm, 1, ZERO_F32, s, "queued: the start");
    gpu_b->stream_sync(gpu_b, s);
    check(zero_comm_set_timeout(c, 2.0) == 0, "queued: starting the watchdog failed");
    static atomic_int done;
    static SlowWork four = {4, &done};
    cuda_or_die(cudaLaunchHostFunc(gpu_main, sleep_then_flag, &four), "cudaLaunchHostFunc");
    gpu_b->event_record(gpu_b, e, gpu_b->main_stream(gpu_b));
    gpu_b->stream_wait(gpu_b, s, e);
    ZeroCollPart part = {d + (size_t)c->rank * n, d, n};
    gpu_b->all_gather(gpu_b, c, ZERO_GROUP_WORLD, &part, 1, ZERO_F32, s, "an all-gather queued behind 4 s of work");
    gpu_b->stream_sync(gpu_b, s);
    copy_on_main(h, d, n * (size_t)c->world * sizeof(float));
    sync_main();
    int wrong = 0;
    for (int q = 0; q < c->world; q++)
        for (size_t i = 0; i < n; i++) wrong += h[(size_t)q * n + i] != (float)(1000 * q + (int)i);
    check(wrong == 0, "queued: %d elements of the all-gather behind slow work are wrong", wrong);
    gpu_b->event_destroy(gpu_b, e);
    gpu_b->stream_destroy(gpu_b, s);
    dev_free(d);
    free(h);
    check(zero_comm_set_timeout(c, 0) == 0, "queued: stopping the watchdog failed");
}

// The watchdog's ring (256 collectives, zero/cuda/comm_nccl.cu) filled twice around
// unfinished collectives:
//   stream A: an all-gather waiting for 40 s of work on the main stream (the ring's front),
//             queued behind a gate;
//   stream B: 300 small all-gathers, which finish (waited for): the ring fills, and only
//             dropping the finished ones behind the front (compaction) makes room for what
//             comes next;
//   stream C: on the last rank only, an all-gather waiting for the gate, which no other
//             rank joins (watched only if compaction made room for it);
//   stream B: 300 more: the ring fills again, and compaction must keep both unfinished ones.
// The small ones run under a 30 s timeout (a loaded machine may stall a rank for a second);
// then the timeout drops to 1 s and the gate opens: the lone all-gather starts and, still
// watched, ends the job within seconds naming it. The other ranks sleep 60 s, then wait for
// the last rank in the summary's all-reduce: their watchdog firing there (a "test summary"
// timeout) means the lone all-gather went unwatched (no compaction, or one that dropped it).
static atomic_int ring_gate;
static void CUDART_CB wait_for_gate(void *arg) {
    (void)arg;
    while (!atomic_load(&ring_gate)) usleep(1000);
}
static void run_ring(ZeroComm *c) {
    enum { SMALL = 300 };
    static atomic_int long_done;
    static SlowWork then = {40, &long_done};
    const size_t n = 4, bytes = n * (size_t)c->world * sizeof(float);
    ZeroStream *a = gpu_b->stream_create(gpu_b), *b = gpu_b->stream_create(gpu_b), *cs = gpu_b->stream_create(gpu_b);
    ZeroEvent *gate = gpu_b->event_create(gpu_b), *after_work = gpu_b->event_create(gpu_b);
    float *da = dev_alloc(bytes), *db = dev_alloc(bytes), *dc = dev_alloc(bytes);
    check(a && b && cs && gate && after_work, "ring: stream_create or event_create failed");
    if (!a || !b || !cs || !gate || !after_work) exit(1);
    ZeroCollPart pa = {da + (size_t)c->rank * n, da, n}, pb = {db + (size_t)c->rank * n, db, n},
                 pc = {dc + (size_t)c->rank * n, dc, n};
    // the ranks line up before the watchdog starts timing the small all-gathers
    gpu_b->all_gather(gpu_b, c, ZERO_GROUP_WORLD, &pb, 1, ZERO_F32, b, "ring: the start");
    gpu_b->stream_sync(gpu_b, b);
    check(zero_comm_set_timeout(c, 30.0) == 0, "ring: starting the watchdog failed");
    cuda_or_die(cudaLaunchHostFunc(gpu_main, wait_for_gate, NULL), "cudaLaunchHostFunc");
    gpu_b->event_record(gpu_b, gate, gpu_b->main_stream(gpu_b));
    cuda_or_die(cudaLaunchHostFunc(gpu_main, sleep_then_flag, &then), "cudaLaunchHostFunc");
    gpu_b->event_record(gpu_b, after_work, gpu_b->main_stream(gpu_b));
    gpu_b->stream_wait(gpu_b, a, after_work);
    gpu_b->all_gather(gpu_b, c, ZERO_GROUP_WORLD, &pa, 1, ZERO_F32, a, "the all-gather queued behind 40 s of work");
    for (int i = 0; i < SMALL; i++)
        gpu_b->all_gather(gpu_b, c, ZERO_GROUP_WORLD, &pb, 1, ZERO_F32, b, "one of 600 small all-gathers");
    // done before the lone one is issued: the full ring has finished ones for compaction to
    // drop, however far a loaded machine's streams lag behind the issuing thread (with TRACK
    // unfinished a newer collective goes unwatched, by design)
    gpu_b->stream_sync(gpu_b, b);
    const int last = c->rank == c->world - 1;
    gpu_b->stream_wait(gpu_b, cs, gate);
    if (last)
        gpu_b->all_gather(gpu_b, c, ZERO_GROUP_WORLD, &pc, 1, ZERO_F32, cs,
                          "the all-gather only the last rank joins, queued behind a gate");
    for (int i = 0; i < SMALL; i++)
        gpu_b->all_gather(gpu_b, c, ZERO_GROUP_WORLD, &pb, 1, ZERO_F32, b, "one of 600 small all-gathers");
    gpu_b->stream_sync(gpu_b, b);
    check(zero_comm_set_timeout(c, 1.0) == 0, "ring: shortening the watchdog's timeout failed");
    atomic_store(&ring_gate, 1);
    if (!last) {
        sleep(60);
        return;
    }
    gpu_b->stream_sync(gpu_b, cs);
    printf("rank %d: the lone all-gather returned: the watchdog did not fire\n", c->rank);
    exit(1);
}

static void run_collectives(ZeroComm *c) {
    ZeroStream *s = gpu_b->stream_create(gpu_b);
    check(s != NULL, "collectives: stream_create failed");
    if (!s) return;
    static const size_t counts[] = {0, 5, 333, 16, 1};
    static const size_t tiny[] = {1, 2, 3};
    for (int dt = 0; dt < 2; dt++) {
        ZeroDType d = dt ? ZERO_BF16 : ZERO_F32;
        coll_gather(c, s, ZERO_GROUP_WORLD, d, counts, 5, 5, 0);
        coll_gather(c, s, ZERO_GROUP_WORLD, d, counts, 5, 5, 1);
        coll_all_to_all(c, s, ZERO_GROUP_WORLD, d, counts, 5, 5);
    }
    coll_gather(c, s, ZERO_GROUP_WORLD, ZERO_F32, tiny, 3, 2100, 1);   // more than one NCCL group
    coll_all_to_all(c, s, ZERO_GROUP_WORLD, ZERO_F32, tiny, 3, 700);
    coll_allreduce(c, 1);
    coll_allreduce(c, 130);   // more than one chunk
    gpu_b->stream_destroy(gpu_b, s);
    coll_allreduce(c, 3);     // after the collectives' stream is gone
    run_groups(c);
}

// ---------------------------------------------------------------- bootstrap (no GPU)

static int run_bootstrap(ZeroComm *c) {
    unsigned char blob[128], want[128];
    for (int i = 0; i < 128; i++) want[i] = (unsigned char)(i * 37 + 11);
    memset(blob, 0, sizeof blob);
    if (c->rank == 0) memcpy(blob, want, sizeof blob);
    int rc = zero_comm_share_blob(c, blob, sizeof blob, "the test blob");
    check(rc == 0 && memcmp(blob, want, sizeof blob) == 0, "bootstrap: sharing rank 0's bytes failed on rank %d", c->rank);
    printf("bootstrap rank %d of %d: %s\n", c->rank, c->world, fails ? "FAILED" : "ok");
    return fails ? 1 : 0;
}

// ---------------------------------------------------------------- main

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "all";
    ZeroComm *comm = zero_comm_init(&argc, &argv);
    if (!comm) return 1;
    rank_g = comm->rank;
    if (!strcmp(mode, "bootstrap")) {
        int rc = run_bootstrap(comm);
        zero_comm_free(comm);
        return rc;
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        if (comm->rank == 0) printf("SKIP: no CUDA device\n");
        zero_comm_free(comm);
        return 0;
    }
    if (zero_cuda_select_device(comm) < 0) return 1;
    cuda_or_die(cudaStreamCreateWithFlags(&gpu_main, cudaStreamNonBlocking), "creating the main stream");
    gpu_b = zero_backend_cuda(comm, gpu_main);
    if (!gpu_b) return 1;
    host_b = gpu_b;   // what mpi_zero_toy.c's own main would set: its runs go to the CUDA backend
    mirrors_init();
    coll_layout = (GcLayout){comm->world, comm->local_size, comm->hpz_size};
    if (comm->rank == 0) {
        int dev = 0, rt = 0, nv = 0;
        struct cudaDeviceProp prop;
        cudaGetDevice(&dev);
        cudaGetDeviceProperties(&prop, dev);
        cudaRuntimeGetVersion(&rt);
        ncclGetVersion(&nv);
        printf("gpu_zero_toy %s: %d ranks on %s (%d devices), CUDA runtime %d, NCCL %d\n", mode, comm->world, prop.name,
               ndev, rt, nv);
    }
    if (comm->world > 1) {   // connect NCCL before any watchdog runs with a short timeout
        static const size_t one[] = {4};
        ZeroStream *s = gpu_b->stream_create(gpu_b);
        coll_gather(comm, s, ZERO_GROUP_WORLD, ZERO_F32, one, 1, 1, 0);
        coll_all_to_all(comm, s, ZERO_GROUP_WORLD, ZERO_F32, one, 1, 1);
        gpu_b->stream_destroy(gpu_b, s);
    }
    int rc = 0, all = !strcmp(mode, "all");
    if (all || !strcmp(mode, "collectives") || getenv("C")) run_collectives(comm);
    if (!strcmp(mode, "groups")) run_groups(comm);
    if (all || !strcmp(mode, "train")) rc |= run_training(comm);
    if (!strcmp(mode, "errors")) rc |= run_errors(comm);
    if (!strcmp(mode, "timeout")) rc |= run_timeout(comm);
    if (!strcmp(mode, "misuse")) rc |= run_misuse(comm, MISUSE_PARTIAL);
    if (!strcmp(mode, "queued")) run_queued(comm);
    if (!strcmp(mode, "ring")) run_ring(comm);
    if (!all && strcmp(mode, "collectives") && strcmp(mode, "groups") && strcmp(mode, "train") &&
        strcmp(mode, "errors") && strcmp(mode, "timeout") && strcmp(mode, "misuse") && strcmp(mode, "queued") &&
        strcmp(mode, "ring") && strcmp(mode, "teardown")) {
        fprintf(stderr, "usage: %s [all|collectives|groups|train|errors|timeout|misuse|queued|ring|teardown|bootstrap]\n",
                argv[0]);
        rc = 2;
    }
    double f[2] = {(double)fails, (double)passes};   // every rank learns whether any failed
    gpu_b->allreduce_sum_f64(gpu_b, comm, f, 2, "test summary");
    if (comm->rank == 0)   // the last line in the form dev/test/run_tests.sh reads
        printf("gpu_zero_toy %s: %d ranks\n%.0f passed, %.0f failed\n", mode, comm->world, f[1], f[0]);
    mirrors_free();
    if (!strcmp(mode, "teardown")) {   // the last rank hangs in the communicators' teardown, as behind a dead peer
        zero_comm_set_timeout(comm, 1.0);
        if (comm->rank == comm->world - 1) zero_comm_inject_stall(comm, 60.0);
    }
    zero_backend_cuda_free(gpu_b);
    cudaStreamDestroy(gpu_main);
    zero_comm_free(comm);
    return rc ? rc : (f[0] > 0 ? 1 : 0);
}
