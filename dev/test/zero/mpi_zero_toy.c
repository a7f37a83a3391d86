/*
mpi_zero_toy.c: drives zero/ the way a trainer does, with a toy model that is not GPT-2,
and checks every stage against an unsharded reference computed on every rank.

The model: a residual tanh MLP whose first and last layers share one weight E (H x D),
so E is used by two units, like GPT-2's wte:
  unit 0      h0 = tanh(E x + b0)
  unit i      h_i = h_{i-1} + g_i * tanh(W_i h_{i-1} + b_i)         i = 1..L
  unit L+1    o = s * (E^T h_L) + c,   loss = 0.5 |o - y|^2 / (global samples)
Tensor sizes (377, 29, 841, 13, 1) are not multiples of 16 and some are smaller than the
world. Every rank trains on its own samples.

The reference (every rank, full fp32, no zero/), in the two orders the stages sum in:
stages 2-3 reduce every micro-step (per micro-step the sum over ranks in rank order of each
rank's gradient, accumulated over micro-steps); stages 0-1 reduce once per step (each rank
accumulates its micro-steps into its gradient buffer, then the ranks are summed in rank
order). The norm follows the documented order (per-shard sums of squares in blocks, shards
in rank order); AdamW is llmc/numerics/adamw.h's adamw_element. Every stage must match its order's
reference bit for bit.

Modes: (none) train and check every configuration; kernels: what the host kernels'
references do not show (unbiased rounding, thread counts); edges: offload where a rank holds
little (nothing at all; one tile, after a skipped step), and a gradient pool that holds every
gradient at once with blocks returned out of order; errors: bad tables and configs are
refused; timeout: one rank stalls inside a collective, the watchdog must end the job;
timeout_open: the same while opening a stream's communicators; misuse,
misuse_bwd: a hook out of order must end the job; step_t0: so must zero_step with t 0;
bigcount: so must a reduce-scatter whose count x ranks exceeds MPI's int count.
*/
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <errno.h>

#include "../../../zero/backend.h"
#include "../../../zero/host/backend_host.h"
#include "../../../zero/comm.h"
#include "../../../zero/partition.h"
#include "../../../zero/zero.h"

#include "zero_toy_model.h"

enum { STEPS = 4 };

// ---------------------------------------------------------------- checks


// ---------------------------------------------------------------- the toy model (zero_toy_model.h)

static void run_forward(const Toy *toy, int u, void *const *params, ZeroDType pdt, ToyActs *A) {
    float *p[3];
    toy_upcast(toy, u, params, pdt, p);
    toy_forward_unit(u, p, A);
}

static size_t dsize(ZeroDType dt) { return dt == ZERO_BF16 ? 2 : 4; }
static float dget(const void *p, ZeroDType dt, size_t i) {
    return dt == ZERO_BF16 ? zero_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

// ---------------------------------------------------------------- the reference

typedef struct {
    int accum;
    int accumulate_first;   // stages 0-1: each rank accumulates its micro-steps, then ranks are summed
    int dpu;                // the delayed update's first step (0: none)
    ZeroDType pdt, gdt;
    float *p[TOY_NT], *m[TOY_NT], *v[TOY_NT];   // fp32 master and AdamW state
    void *work[TOY_NT];                 // what the model reads (the master itself when fp32)
    float norms[STEPS];
    double losses[STEPS];
} Ref;

// The documented norm order: blocks of ZERO_SUMSQ_BLOCK summed left to right.
static double sumsq_blocks(const float *x, size_t n) {
    double total = 0.0;
    for (size_t lo = 0; lo < n; lo += ZERO_SUMSQ_BLOCK) {
        size_t hi = lo + ZERO_SUMSQ_BLOCK < n ? lo + ZERO_SUMSQ_BLOCK : n;
        double s = 0.0;
        for (size_t i = lo; i < hi; i++) s += (double)x[i] * (double)x[i];
        total += s;
    }
    return total;
}

// bf16 working params: the master stochastically rounded, keyed by (seed, step, global index);
// fp32 ones a copy of it, where they are kept apart (the delayed update)
static void ref_refresh(const Toy *toy, Ref *R, int t_step) {
    uint64_t gidx = 0;
    for (int t = 0; t < TOY_NT; t++) {
        if (R->pdt == ZERO_F32 && R->work[t] != (void *)R->p[t]) memcpy(R->work[t], R->p[t], toy->t[t].numel * sizeof(float));
        if (R->pdt == ZERO_BF16)
            for (size_t i = 0; i < toy->t[t].numel; i++)
                ((uint16_t *)R->work[t])[i] = adamw_round_bf16_at(R->p[t][i], TOY_SEED, (uint64_t)t_step, gidx + i);
        gidx += toy->t[t].numel;
    }
}

// One rank's micro-step: its gradient added (+=, in the gradient dtype) into g; returns the loss.
static double ref_micro(const Toy *toy, Ref *R, void **g, int step, int micro, int r, int world, float inv) {
    static ToyActs A;
    toy_load_data(&A, step, micro, r, world, R->accum);
    for (int u = 0; u < TOY_NU; u++) {
        void *pp[3];
        for (int i = 0; i < toy->unit_n[u]; i++) pp[i] = R->work[toy->unit_tensors[u][i]];
        run_forward(toy, u, pp, R->pdt, &A);
    }
    double loss = toy_loss(&A, inv);
    for (int u = TOY_NU - 1; u >= 0; u--) {
        void *pp[3], *gg[3];
        for (int i = 0; i < toy->unit_n[u]; i++) {
            pp[i] = R->work[toy->unit_tensors[u][i]];
            gg[i] = g[toy->unit_tensors[u][i]];
        }
        toy_run_backward(toy, u, pp, gg, R->pdt, R->gdt, &A, inv);
    }
    return loss;
}

// Rank r's gradient added into the running rank-order sum s (fp32).
static void ref_add_rank(const Toy *toy, float **s, void *const *g, ZeroDType gdt, int r) {
    for (int t = 0; t < TOY_NT; t++)
        for (size_t i = 0; i < toy->t[t].numel; i++) s[t][i] = r == 0 ? dget(g[t], gdt, i) : s[t][i] + dget(g[t], gdt, i);
}

static void run_reference(const Toy *toy, int world, int accum, int accumulate_first, ZeroDType pdt, ZeroDType gdt,
                          int dpu, Ref *R) {
    float *G[TOY_NT], *s[TOY_NT];
    void *g[TOY_NT];
    R->accum = accum;
    R->accumulate_first = accumulate_first;
    R->pdt = pdt;
    R->gdt = gdt;
    R->dpu = dpu;
    for (int t = 0; t < TOY_NT; t++) {
        size_t n = toy->t[t].numel;
        R->p[t] = malloc(n * sizeof(float));
        R->m[t] = calloc(n, sizeof(float));
        R->v[t] = calloc(n, sizeof(float));
        R->work[t] = pdt == ZERO_F32 && !dpu ? (void *)R->p[t] : malloc(n * dsize(pdt));
        G[t] = malloc(n * sizeof(float));
        s[t] = malloc(n * sizeof(float));
        g[t] = malloc(n * dsize(gdt));
        for (size_t i = 0; i < n; i++) R->p[t][i] = toy_init_value(toy, t, i);
    }
    ref_refresh(toy, R, 0);
    float inv = 1.0f / (float)(world * accum * TOY_B);
    double mloss[8][64];   // [micro][rank]
    for (int step = 0; step < STEPS; step++) {
        for (int t = 0; t < TOY_NT; t++) memset(G[t], 0, toy->t[t].numel * sizeof(float));
        // G = 0 + (sum over ranks), once per step or once per micro-step, as zero/'s reduce_slices
        if (accumulate_first) {
            for (int r = 0; r < world; r++) {
                for (int t = 0; t < TOY_NT; t++) memset(g[t], 0, toy->t[t].numel * dsize(gdt));
                for (int micro = 0; micro < accum; micro++) mloss[micro][r] = ref_micro(toy, R, g, step, micro, r, world, inv);
                ref_add_rank(toy, s, g, gdt, r);
            }
            for (int t = 0; t < TOY_NT; t++)
                for (size_t i = 0; i < toy->t[t].numel; i++) G[t][i] += s[t][i];
        } else {
            for (int micro = 0; micro < accum; micro++) {
                for (int r = 0; r < world; r++) {
                    for (int t = 0; t < TOY_NT; t++) memset(g[t], 0, toy->t[t].numel * dsize(gdt));
                    mloss[micro][r] = ref_micro(toy, R, g, step, micro, r, world, inv);
                    ref_add_rank(toy, s, g, gdt, r);
                }
                for (int t = 0; t < TOY_NT; t++)
                    for (size_t i = 0; i < toy->t[t].numel; i++) G[t][i] += s[t][i];
            }
        }
        double loss = 0.0;
        for (int micro = 0; micro < accum; micro++) {
            double ml = 0.0;   // same order as the trainer's all-reduce: rank order
            for (int r = 0; r < world; r++) ml = r == 0 ? mloss[micro][0] : ml + mloss[micro][r];
            loss += ml;
        }
        double total = 0.0;
        for (int r = 0; r < world; r++) {
            double part = 0.0;
            for (int t = 0; t < TOY_NT; t++) {
                ZeroSplit sp;
                zero_split(toy->t[t].numel, world, &sp);
                part += sumsq_blocks(G[t] + zero_owned_begin(&sp, r), zero_owned_count(&sp, r));
            }
            total = r == 0 ? part : total + part;
        }
        float norm = (float)sqrt(total);
        float clip = (TOY_CLIP > 0 && norm > TOY_CLIP) ? TOY_CLIP / norm : 1.0f;
        AdamWParams ap = adamw_params(TOY_LR, TOY_B1, TOY_B2, TOY_EPS, TOY_WD, clip, step + 1);
        // delayed (ZeRO-Offload's DPU): the next step trains on the master before this update
        const int delayed = dpu > 0 && step + 1 >= dpu;
        if (delayed) ref_refresh(toy, R, step);
        for (int t = 0; t < TOY_NT; t++)
            for (size_t i = 0; i < toy->t[t].numel; i++)
                R->p[t][i] = adamw_element(R->p[t][i], G[t][i], &R->m[t][i], &R->v[t][i], &ap, toy->t[t].decay);
        if (!delayed) ref_refresh(toy, R, step + 1);
        R->norms[step] = norm;
        R->losses[step] = loss;
    }
    for (int t = 0; t < TOY_NT; t++) { free(G[t]); free(s[t]); free(g[t]); }
}

static void free_reference(Ref *R) {
    for (int t = 0; t < TOY_NT; t++) {
        if (R->work[t] != (void *)R->p[t]) free(R->work[t]);
        free(R->p[t]); free(R->m[t]); free(R->v[t]);
    }
}

// ---------------------------------------------------------------- driving zero/

typedef struct {
    const Toy *toy;
    int rank, world;
    size_t inited[TOY_NT];
    int bad_calls;
} InitCtx;

// The model's init that also records which ranges were asked for (partition at init).
static void counted_init(void *ctx, int t, size_t offset, size_t count, float *out) {
    InitCtx *c = ctx;
    ZeroSplit sp;
    zero_split(c->toy->t[t].numel, c->world, &sp);
    size_t b = zero_owned_begin(&sp, c->rank), n = zero_owned_count(&sp, c->rank);
    if (offset < b || offset + count > b + n) c->bad_calls++;   // partition at init: owned only
    c->inited[t] += count;
    for (size_t i = 0; i < count; i++) out[i] = toy_init_value(c->toy, t, offset + i);
}

static const ZeroBackend *host_b;   // the process's host backend (main makes it)
static long n_allocs;
static void *counting_alloc(const ZeroBackend *b, ZeroMemKind k, size_t n) {
    n_allocs++;
    return host_b->alloc(b, k, n);
}

typedef struct {
    const char *name;
    int stage, accum;
    size_t bucket, prefetch, max_live, persist;
    int exact_bytes;   // the formula is exact (no prefetch) rather than an upper bound
    int detour;        // stage 3: in micro-step 1, fetch units out of the recorded order first
    ZeroDType pdt, gdt;
    ZeroTier opt_tier, param_tier;   // offload: where the optimizer states and (stage 3) parameters live
    double opt_ratio;                // a partial optimizer offload: the fraction offloaded (0: all)
    int dpu;                         // the delayed update's first step (0: none)
} Variant;

// The folder offload variants keep their NVMe swap files in (made by run_training).
static char nvme_dir[64];

static uint64_t sent_total(const ZeroComm *c, int op, int inter) {
    return inter ? c->sent[op].inter_bytes : c->sent[op].intra_bytes;
}

static void run_variant(ZeroComm *comm, const ZeroBackend *backend, const Toy *toy, const Variant *V,
                        const Ref *R, int node_size) {
    const int N = comm->world, G = V->accum;
    ZeroConfig cfg;
    zero_config_defaults(&cfg);
    cfg.stage = V->stage;
    cfg.bucket_elems = V->bucket;
    cfg.prefetch_elems = V->prefetch;
    cfg.max_live_elems = V->max_live;
    cfg.persist_elems = V->persist;
    cfg.node_size = node_size;
    cfg.timeout_s = 30.0;
    cfg.seed = TOY_SEED;
    cfg.param_dtype = V->pdt;
    cfg.grad_dtype = V->gdt;
    cfg.optimizer_tier = V->opt_tier;
    cfg.optimizer_ratio = V->opt_ratio;
    cfg.param_tier = V->param_tier;
    cfg.dpu_from = V->dpu;
    cfg.nvme_path = nvme_dir;
    const int offloaded = V->opt_tier != ZERO_TIER_DEVICE || V->param_tier != ZERO_TIER_DEVICE;
    const size_t pes = dsize(V->pdt), ges = dsize(V->gdt);
    InitCtx ic = {toy, comm->rank, N, {0}, 0};
    long allocs_before = n_allocs;
    Zero *z = zero_init(toy->t, TOY_NT, TOY_NU, &cfg, comm, backend, counted_init, &ic);
    check(z != NULL, "%s: zero_init failed", V->name);
    if (!z) return;
    long allocs_at_init = n_allocs;
    check(allocs_at_init > allocs_before, "%s: the counting backend saw no allocation", V->name);
    check(ic.bad_calls == 0, "%s: init called %d times outside this rank's owned range", V->name, ic.bad_calls);
    for (int t = 0; t < TOY_NT; t++) {
        ZeroSplit sp;
        zero_split(toy->t[t].numel, N, &sp);
        check(ic.inited[t] == zero_owned_count(&sp, comm->rank), "%s: tensor %s: init covered %zu elements, owns %zu",
              V->name, toy->t[t].name, ic.inited[t], zero_owned_count(&sp, comm->rank));
    }

    static ToyActs A;
    float inv = 1.0f / (float)(N * G * TOY_B);
    ZeroStepArgs args = {TOY_LR, TOY_B1, TOY_B2, TOY_EPS, TOY_WD, TOY_CLIP, 0};
    uint64_t before[ZERO_COLL_NUM][2], after[ZERO_COLL_NUM][2];
    int norms_equal = 1, losses_equal = 1;
    float worst_norm_rel = 0.0f;
    for (int step = 0; step < STEPS; step++) {
        for (int op = 0; op < ZERO_COLL_NUM; op++)
            for (int k = 0; k < 2; k++) before[op][k] = sent_total(comm, op, k);
        zero_begin_step(z, G);
        double loss = 0.0;
        for (int micro = 0; micro < G; micro++) {
            toy_load_data(&A, step, micro, comm->rank, N, G);
            if (V->detour && micro == 1)   // e.g. a probe pass: off the recorded order
                for (int u = TOY_NU - 1; u >= 0; u--) {
                    zero_fetch(z, u, 0);
                    zero_release(z, u, 0);
                }
            for (int u = 0; u < TOY_NU; u++) {
                const ZeroUnitView *v = zero_fetch(z, u, 0);
                run_forward(toy, u, v->params, V->pdt, &A);
                zero_release(z, u, 0);
            }
            loss += toy_loss(&A, inv);
            for (int u = TOY_NU - 1; u >= 0; u--) {
                const ZeroUnitView *v = zero_fetch(z, u, 1);
                toy_run_backward(toy, u, v->params, v->grads, V->pdt, V->gdt, &A, inv);
                zero_grads_ready(z, u);
                zero_release(z, u, 1);
            }
        }
        args.t = step + 1;
        float norm = zero_step(z, &args);
        for (int op = 0; op < ZERO_COLL_NUM; op++)
            for (int k = 0; k < 2; k++) after[op][k] = sent_total(comm, op, k);
        // the loss through the plugin's all-reduce: rank order, like the reference
        // (which sums micro-steps of all ranks, then steps: the same for accum 1)
        zero_allreduce_sum_f64(z, &loss, 1);
        if (G == 1 && loss != R->losses[step]) losses_equal = 0;
        if (norm != R->norms[step]) norms_equal = 0;
        float rel = fabsf(norm - R->norms[step]) / R->norms[step];
        if (rel > worst_norm_rel) worst_norm_rel = rel;
    }
    check(n_allocs == allocs_at_init, "%s: %ld allocations after zero_init", V->name, n_allocs - allocs_at_init);

    // working parameters the model sees equal the master (fp32 on the host), also through
    // a stage-3 on-demand gather outside a step. Before the master is read: with both on
    // NVMe, these gathers run the step's deferred updates, whose writes stay in flight, and
    // the reads below must wait for them (ZERO_NVME_JITTER delays them)
    int views_ok = 1;
    for (int u = 0; u < TOY_NU; u++) {
        const ZeroUnitView *v = zero_fetch(z, u, 0);
        for (int i = 0; i < v->count; i++)
            if (memcmp(v->params[i], R->work[v->tensors[i]], toy->t[v->tensors[i]].numel * pes) != 0)
                views_ok = 0;
        zero_release(z, u, 0);
    }
    check(views_ok, "%s: working parameters seen through zero_fetch differ from the master", V->name);

    // final master weights against the reference
    int bit_identical = 1;
    double max_rel = 0.0;
    for (int t = 0; t < TOY_NT; t++) {
        size_t n = toy->t[t].numel;
        float *got = malloc(n * sizeof(float));
        zero_gather_master(z, t, got);
        if (memcmp(got, R->p[t], n * sizeof(float)) != 0) bit_identical = 0;
        double scale = 0.0, diff = 0.0;
        for (size_t i = 0; i < n; i++) {
            scale = fmax(scale, fabs((double)R->p[t][i]));
            diff = fmax(diff, fabs((double)got[i] - (double)R->p[t][i]));
        }
        if (scale > 0 && diff / scale > max_rel) max_rel = diff / scale;
        free(got);
    }
    check(bit_identical, "%s: master weights differ from the reference (max rel %.3g)", V->name, max_rel);
    check(norms_equal, "%s: gradient norms differ from the reference (worst rel %.3g)", V->name, worst_norm_rel);
    if (G == 1) check(losses_equal, "%s: all-reduced losses differ from the reference", V->name);

    // bytes sent in the last step against the formulas (per peer, fp32)
    size_t Sh = 0, Sunit_pool = 0, Spersist = 0, P = 0, shared = 0, max_grad_need = 0, max_padded = 0;
    size_t persist_padded = 0, max_pool_need = 0;
    for (int t = 0; t < TOY_NT; t++) {
        ZeroSplit sp;
        zero_split(toy->t[t].numel, N, &sp);
        int persistent = V->stage == 3 && V->persist > 0 && toy->t[t].numel <= V->persist;
        Sh += sp.shard;
        P += sp.padded;
        if (sp.padded > max_padded) max_padded = sp.padded;
        if (toy->t[t].num_units > 1) shared += sp.padded;
        if (persistent) { Spersist += sp.shard; persist_padded += sp.padded; }
        else Sunit_pool += sp.shard * (size_t)toy->t[t].num_units;   // gathered once per unit using it
    }
    for (int u = 0; u < TOY_NU; u++) {
        size_t need = 0, pool = 0;
        for (int i = 0; i < toy->unit_n[u]; i++) {
            int t = toy->unit_tensors[u][i];
            ZeroSplit sp;
            zero_split(toy->t[t].numel, N, &sp);
            if (toy->t[t].num_units == 1) need += sp.padded;   // tied gradients: in `shared`
            if (!(V->stage == 3 && V->persist > 0 && toy->t[t].numel <= V->persist)) pool += sp.padded;
        }
        if (need > max_grad_need) max_grad_need = need;
        if (pool > max_pool_need) max_pool_need = pool;
    }
    // gradients travel in their dtype, once per step at stages 0-1 and once per micro-step
    // at stages 2-3; stage 0 gathers the fp32 reduced gradient, stages 1-3 working parameters
    uint64_t a2a = (uint64_t)(V->stage <= 1 ? 1 : G) * Sh * ges;
    uint64_t ag = V->stage == 3 ? (toy_stage3_gathered(toy, N, V->persist, G, 0) + Spersist) * pes
                                : Sh * (V->stage == 0 ? 4 : pes);
    // the detour: an extra forward pass, and off the recorded order nothing is kept: bound it
    // by gathering every fetch's tensors
    if (V->detour) ag = ((uint64_t)G * 2 * Sunit_pool + Sunit_pool + Spersist) * pes;
    uint64_t ar = 8;   // the norm's partial sums
    uint64_t expect[ZERO_COLL_NUM] = {ag, a2a, ar, 0};
    const uint64_t peers[2] = {(uint64_t)comm->local_size - 1, (uint64_t)(N - comm->local_size)};
    uint64_t got_total = 0, want_total = 0;
    for (int op = 0; op < ZERO_COLL_NUM; op++)
        for (int k = 0; k < 2; k++) {
            uint64_t got = after[op][k] - before[op][k], want = expect[op] * peers[k];
            got_total += got;
            want_total += want;
            if (V->exact_bytes || op != ZERO_COLL_ALL_GATHER)
                check(got == want, "%s: %s %s bytes in a step: %llu, formula %llu", V->name, zero_coll_name(op),
                      k ? "inter-node" : "intra-node", (unsigned long long)got, (unsigned long long)want);
            else
                check(got <= want, "%s: %s %s bytes in a step: %llu, above the no-prefetch %llu", V->name,
                      zero_coll_name(op), k ? "inter-node" : "intra-node", (unsigned long long)got,
                      (unsigned long long)want);
        }

    // memory by use against the formulas (bytes, fp32 everywhere)
    ZeroStats st;
    zero_stats(z, &st);
    size_t bucket = V->bucket < P ? V->bucket : P;   // clamped to the model
    size_t gpool = (bucket + 2 * max_grad_need + shared + 15) / 16 * 16;     // capacities are
    size_t ppool = ((V->max_live ? V->max_live : max_pool_need + V->prefetch) + 15) / 16 * 16;  // 16-aligned
    // ... and never more than the model can need: every gradient, every pooled tensor at once
    if (gpool > P) gpool = P;
    if (ppool > P - persist_padded) ppool = P - persist_padded;
    size_t staging = (bucket > max_padded ? bucket : max_padded) * ges;
    if (max_padded * 4 > staging) staging = max_padded * 4;
    size_t want_mem[ZERO_USE_KINDS];
    want_mem[ZERO_USE_PARAMS] = V->stage <= 2 ? pes * P
                                : pes * (persist_padded + ppool);
    want_mem[ZERO_USE_GRADS] = 4 * Sh + (V->stage <= 1 ? ges * P : ges * gpool) +
                               (V->stage == 0 && V->gdt != ZERO_F32 ? 4 * P : 0);
    want_mem[ZERO_USE_MASTER] = 4 * (V->stage == 0 ? P : Sh);
    want_mem[ZERO_USE_OPTIM] = 8 * (V->stage == 0 ? P : Sh);
    want_mem[ZERO_USE_BUFFERS] = staging;
    static const char *use_names[] = {"params", "grads", "master", "optim", "buffers"};
    for (int k = 0; k < ZERO_USE_KINDS && !offloaded; k++)   // offload moves bytes to other tiers
        check(st.device[k] == want_mem[k], "%s: %s memory %zu bytes, formula %zu", V->name, use_names[k],
              st.device[k], want_mem[k]);
    if (V->opt_tier != ZERO_TIER_DEVICE && V->opt_ratio == 0.0)
        check(st.device[ZERO_USE_MASTER] == 0 && st.device[ZERO_USE_OPTIM] == 0,
              "%s: the offloaded optimizer still holds %zu + %zu device bytes", V->name, st.device[ZERO_USE_MASTER],
              st.device[ZERO_USE_OPTIM]);
    if (V->opt_ratio > 0.0)   // a partial offload: the master split between the two, nothing twice
        check(st.device[ZERO_USE_MASTER] > 0 && st.host[ZERO_USE_MASTER] > 0 &&
              st.device[ZERO_USE_MASTER] + st.host[ZERO_USE_MASTER] == want_mem[ZERO_USE_MASTER] &&
              st.device[ZERO_USE_OPTIM] + st.host[ZERO_USE_OPTIM] == want_mem[ZERO_USE_OPTIM],
              "%s: master %zu on the device + %zu on the host, m and v %zu + %zu; formula %zu and %zu", V->name,
              st.device[ZERO_USE_MASTER], st.host[ZERO_USE_MASTER], st.device[ZERO_USE_OPTIM], st.host[ZERO_USE_OPTIM],
              want_mem[ZERO_USE_MASTER], want_mem[ZERO_USE_OPTIM]);
    if (V->stage >= 2)
        check(st.grad_pool_peak <= st.grad_pool_elems && st.grad_pool_peak > 0, "%s: gradient pool peak %zu of %zu",
              V->name, st.grad_pool_peak, st.grad_pool_elems);
    if (V->stage == 3) {
        check(st.param_pool_peak <= st.param_pool_elems, "%s: gather pool peak %zu over its %zu", V->name,
              st.param_pool_peak, st.param_pool_elems);
        if (V->detour) {
            check(st.evictions > 0 && st.gather_hits > 0, "%s: the detour neither evicted nor hit (%llu, %llu)",
                  V->name, (unsigned long long)st.evictions, (unsigned long long)st.gather_hits);
        } else {
            // in the recorded order every gathered tensor is used before it goes
            check(st.wasted_gathers == 0 && st.evictions == 0, "%s: %llu gathers wasted, %llu evictions", V->name,
                  (unsigned long long)st.wasted_gathers, (unsigned long long)st.evictions);
            if (V->prefetch > 0 && !V->max_live)
                check(st.gather_hits > 0 && st.prefetches > 0, "%s: prefetch: %llu prefetches, %llu hits", V->name,
                      (unsigned long long)st.prefetches, (unsigned long long)st.gather_hits);
            else if (V->max_live)   // a tight pool still keeps the last forward unit for the backward
                check(st.gather_hits > 0, "%s: tight pool: no hits", V->name);
            else   // no prefetch: only what the very next fetch uses is kept
                check(st.prefetches == 0 && st.gather_hits > 0, "%s: prefetch 0: %llu prefetches, %llu hits", V->name,
                      (unsigned long long)st.prefetches, (unsigned long long)st.gather_hits);
        }
    }
    // model states (params + grads + master + m + v) per rank; stage 3 fp32 is 16 Psi / N
    size_t states = st.device[ZERO_USE_PARAMS] + st.device[ZERO_USE_GRADS] + st.device[ZERO_USE_MASTER] +
                    st.device[ZERO_USE_OPTIM];
    if (comm->rank == 0)
        printf("  %-34s N=%d  %s  sent/step %8llu B (formula %8llu)  model states %7zu B = %.2f x 4P/N  "
               "buckets %llu  gathers %llu prefetches %llu hits %llu evictions %llu wasted %llu\n",
               V->name, N, bit_identical ? "bit-identical" : "DIFFERENT",
               (unsigned long long)got_total, (unsigned long long)want_total, states,
               (double)states / (4.0 * (double)P / N),
               (unsigned long long)st.buckets, (unsigned long long)st.gathers, (unsigned long long)st.prefetches,
               (unsigned long long)st.gather_hits, (unsigned long long)st.evictions,
               (unsigned long long)st.wasted_gathers);
    zero_free(z);
}

static int run_training(ZeroComm *comm) {
    Toy toy;
    toy_table(&toy);
    static ZeroBackend counted;
    counted = *host_b;
    counted.alloc = counting_alloc;
    // node layout: at 4 ranks two logical nodes of 2, so intra and inter bytes both show
    int node_size = comm->world == 4 ? 2 : 0;
    const size_t big = (size_t)1 << 20;
    const ZeroDType F = ZERO_F32, BF = ZERO_BF16;
    const ZeroTier DEV = ZERO_TIER_DEVICE, CPU = ZERO_TIER_HOST, NVME = ZERO_TIER_NVME;
    // name, stage, accum, bucket, prefetch, max_live, persist, exact bytes, detour, dtypes.
    // The tight caps (1100, 1500) hold the largest unit (a layer: <= 1024 padded at <= 4 ranks).
    const Variant variants[] = {
        {"stage 0, accum 1", 0, 1, 4096, 0, 0, 0, 1, 0, F, F, DEV, DEV, 0, 0},
        {"stage 0, accum 2", 0, 2, 4096, 0, 0, 0, 1, 0, F, F, DEV, DEV, 0, 0},
        {"stage 1, accum 1", 1, 1, 4096, 0, 0, 0, 1, 0, F, F, DEV, DEV, 0, 0},
        {"stage 1, accum 2", 1, 2, 4096, 0, 0, 0, 1, 0, F, F, DEV, DEV, 0, 0},
        {"stage 2, bucket 0 (per unit)", 2, 2, 0, 0, 0, 0, 1, 0, F, F, DEV, DEV, 0, 0},
        {"stage 2, bucket 1000", 2, 2, 1000, 0, 0, 0, 1, 0, F, F, DEV, DEV, 0, 0},
        {"stage 2, one bucket", 2, 2, big, 0, 0, 0, 1, 0, F, F, DEV, DEV, 0, 0},
        {"stage 3, no prefetch", 3, 2, 1000, 0, 0, 0, 1, 0, F, F, DEV, DEV, 0, 0},
        {"stage 3, no prefetch, persist", 3, 2, 1000, 0, 0, 40, 1, 0, F, F, DEV, DEV, 0, 0},
        {"stage 3, prefetch", 3, 2, 1000, 1500, 0, 40, 0, 0, F, F, DEV, DEV, 0, 0},
        {"stage 3, prefetch, tight cap", 3, 2, 0, big, 1500, 0, 0, 0, F, F, DEV, DEV, 0, 0},
        {"stage 3, detour, tight cap", 3, 2, 0, big, 1100, 0, 0, 1, F, F, DEV, DEV, 0, 0},
        {"stage 3, accum 1", 3, 1, 4096, 2000, 0, 40, 0, 0, F, F, DEV, DEV, 0, 0},
        {"stage 0, accum 1, bf16 p+g", 0, 1, 4096, 0, 0, 0, 1, 0, BF, BF, DEV, DEV, 0, 0},
        {"stage 1, bf16 params", 1, 2, 4096, 0, 0, 0, 1, 0, BF, F, DEV, DEV, 0, 0},
        {"stage 1, bf16 p+g", 1, 2, 4096, 0, 0, 0, 1, 0, BF, BF, DEV, DEV, 0, 0},
        {"stage 2, bf16 p+g", 2, 2, 1000, 0, 0, 0, 1, 0, BF, BF, DEV, DEV, 0, 0},
        {"stage 3, bf16 p+g, no prefetch", 3, 2, 1000, 0, 0, 40, 1, 0, BF, BF, DEV, DEV, 0, 0},
        {"stage 3, bf16 params, prefetch", 3, 2, 1000, 1500, 0, 40, 0, 0, BF, F, DEV, DEV, 0, 0},
        // offload: the same bits as on the device, with the CPU optimizer's host streams
        // and the NVMe engine in the picture (and their waits on the device streams)
        {"stage 1, optimizer on cpu", 1, 2, 4096, 0, 0, 0, 1, 0, F, F, CPU, DEV, 0, 0},
        {"stage 2, optimizer on nvme", 2, 2, 1000, 0, 0, 0, 1, 0, F, F, NVME, DEV, 0, 0},
        {"stage 3, optimizer and params on cpu", 3, 2, 1000, 1500, 0, 40, 0, 0, F, F, CPU, CPU, 0, 0},
        {"stage 3, optimizer and params on nvme", 3, 2, 1000, 0, 0, 0, 1, 0, F, F, NVME, NVME, 0, 0},
        // the detour with room to prefetch: evictions and hits with the NVMe reads in the picture
        {"stage 3, detour, params on nvme", 3, 2, 0, big, 2200, 0, 0, 1, F, F, DEV, NVME, 0, 0},
        {"stage 3, bf16, optimizer on cpu", 3, 2, 1000, 1500, 0, 40, 0, 0, BF, F, CPU, DEV, 0, 0},
        // a partial offload: the first tensors' optimizer on the device, the rest on the CPU
        {"stage 1, half the optimizer on cpu", 1, 2, 4096, 0, 0, 0, 1, 0, F, F, CPU, DEV, 0.5, 0},
        {"stage 2, half the optimizer on cpu", 2, 2, 1000, 0, 0, 0, 1, 0, BF, BF, CPU, DEV, 0.5, 0},
        {"stage 3, bf16, half the optimizer on cpu", 3, 2, 1000, 1500, 0, 40, 0, 0, BF, F, CPU, DEV, 0.5, 0},
        // the delayed update (from step 2 of 4): the next step's backward accumulates into the
        // gradient the update still reads, tensor by tensor, and its parameters land a step late
        {"stage 1, optimizer on cpu, delayed", 1, 2, 4096, 0, 0, 0, 1, 0, F, F, CPU, DEV, 0, 2},
        {"stage 2, optimizer on cpu, delayed", 2, 2, 1000, 0, 0, 0, 1, 0, F, F, CPU, DEV, 0, 2},
        {"stage 3, bf16, optimizer on cpu, delayed", 3, 2, 1000, 1500, 0, 40, 0, 0, BF, F, CPU, DEV, 0, 2},
    };
    const int nv = (int)(sizeof variants / sizeof variants[0]);
    snprintf(nvme_dir, sizeof nvme_dir, "/tmp/zero_toy_nvme.%d.%d", (int)getpid(), comm->rank);
    if (mkdir(nvme_dir, 0700) != 0 && errno != EEXIST) check(0, "cannot make %s for the NVMe variants", nvme_dir);
    Ref *refs = calloc((size_t)nv, sizeof(Ref));
    int nrefs = 0;
    for (int i = 0; i < nv; i++) {
        const Variant *V = &variants[i];
        if (V->max_live && comm->world > 4) continue;   // the tight caps assume <= 4 ranks
        // stages 0-1 reduce once per step: with accumulation they sum in the other order
        int acc_first = V->stage <= 1 && V->accum > 1;
        Ref *R = NULL;
        for (int k = 0; k < nrefs && !R; k++)
            if (refs[k].accum == V->accum && refs[k].pdt == V->pdt && refs[k].gdt == V->gdt &&
                refs[k].accumulate_first == acc_first && refs[k].dpu == V->dpu)
                R = &refs[k];
        if (!R) {
            R = &refs[nrefs++];
            run_reference(&toy, comm->world, V->accum, acc_first, V->pdt, V->gdt, V->dpu, R);
            if (comm->rank == 0) {
                printf("reference: %d ranks, %d tensors in %d units, %d steps, accum %d%s, %s params, %s grads; norms:",
                       comm->world, TOY_NT, TOY_NU, STEPS, V->accum, acc_first ? " (accumulated, then reduced)" : "",
                       V->pdt == BF ? "bf16" : "fp32", V->gdt == BF ? "bf16" : "fp32");
                for (int s = 0; s < STEPS; s++) printf(" %.4f%s", R->norms[s], R->norms[s] > TOY_CLIP ? " (clipped)" : "");
                printf("\n");
            }
        }
        run_variant(comm, &counted, &toy, V, R, node_size);
    }
    for (int k = 0; k < nrefs; k++) free_reference(&refs[k]);
    free(refs);
    rmdir(nvme_dir);
    return 0;
}

// ---------------------------------------------------------------- kernels: what a reference does not show
// (each kernel's bits against its C reference: test_backend_ops.c)

static int run_kernels(void) {
    const ZeroBackend *b = host_b;
    ZeroStream *s = b->main_stream(b);
    // stochastic rounding: values land on a neighbour with the right odds (unbiased), the
    // bits are a function of (seed, t, index) only
    {
        const size_t n = 200000;
        float *x = malloc(n * sizeof(float));
        uint16_t *r1 = malloc(n * 2), *r2 = malloc(n * 2), *r3 = malloc(n * 2);
        float frac = 0.3f;   // 1 + 0.3 ulp(bf16) above 1.0
        for (size_t i = 0; i < n; i++) x[i] = 1.0f + frac * 0.0078125f;
        b->refresh(b, r1, ZERO_BF16, x, n, 7, 3, 1000, s);
        double mean = 0.0;
        int only_neighbours = 1;
        for (size_t i = 0; i < n; i++) {
            float v = zero_bf16_to_f32(r1[i]);
            if (v != 1.0f && v != 1.0078125f) only_neighbours = 0;
            mean += v;
        }
        mean /= (double)n;
        double expect = 1.0 + frac * 0.0078125;   // E[round] = x when unbiased
        // std of the mean: ulp * sqrt(p (1-p) / n) ~ 8e-6; allow 5 sigma
        check(only_neighbours, "kernels: stochastic rounding left the two bf16 neighbours");
        check(fabs(mean - expect) < 5 * 0.0078125 * sqrt(0.21 / (double)n), "kernels: rounding is biased: mean %.9f, x %.9f",
              mean, expect);
        // a shard rounds like the whole: elements keyed by global index
        b->refresh(b, r2, ZERO_BF16, x, n / 2, 7, 3, 1000, s);
        b->refresh(b, r2 + n / 2, ZERO_BF16, x + n / 2, n - n / 2, 7, 3, 1000 + n / 2, s);
        check(memcmp(r1, r2, n * 2) == 0, "kernels: rounding of two halves differs from the whole");
        b->refresh(b, r3, ZERO_BF16, x, n, 7, 4, 1000, s);
        check(memcmp(r1, r3, n * 2) != 0, "kernels: rounding does not change with the step");
        free(x); free(r1); free(r2); free(r3);
    }
    // threads do not change sum_squares (its bits against the block order: test_backend_ops.c)
    {
        static const size_t ns[] = {0, 1, 4095, 4096, 4097, 100003, 1000000};
        float *x = malloc(1000000 * sizeof(float));
        for (size_t i = 0; i < 1000000; i++) x[i] = rng_normal(3, 9, i) * (i % 7 == 0 ? 1e3f : 1e-2f);
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            double got1, got2;
            omp_set_num_threads(1);
            b->sum_squares(b, x, ns[k], &got1, s);
            omp_set_num_threads(2);
            b->sum_squares(b, x, ns[k], &got2, s);
            check(memcmp(&got1, &got2, sizeof got1) == 0, "kernels: sum_squares(%zu) = %.17g at 1 thread, %.17g at 2",
                  ns[k], got1, got2);
        }
        free(x);
    }
    return 0;
}

// ---------------------------------------------------------------- edges: offload where a rank holds little

static void edge_init(void *ctx, int t, size_t off, size_t n, float *out) {
    (void)ctx;
    for (size_t i = 0; i < n; i++) out[i] = 0.01f * (float)(t + 1) * (float)((off + i) % 13 + 1);
}

// Trains `steps` steps of `accum` micro-steps, each unit adding to its tensors' gradients a
// fixed function of (step, micro-step, unit, tensor, index) that is infinite at step inf_step
// (so that step is skipped), and gathers every tensor's master into out, one after the other.
static void edge_run(ZeroComm *comm, const ZeroTensor *t, int nt, int nu, const ZeroConfig *cfg, int steps,
                     int accum, int inf_step, float *out, const char *what) {
    Zero *z = zero_init(t, nt, nu, cfg, comm, host_b, edge_init, NULL);
    check(z != NULL, "edges: %s: zero_init failed", what);
    if (!z) return;
    ZeroStepArgs a = {1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f, 0.0f, 0};
    for (int s = 1; s <= steps; s++) {
        zero_begin_step(z, accum);
        for (int m = 0; m < accum; m++) {
            for (int u = 0; u < nu; u++) {
                zero_fetch(z, u, 0);
                zero_release(z, u, 0);
            }
            for (int u = nu - 1; u >= 0; u--) {
                const ZeroUnitView *v = zero_fetch(z, u, 1);
                for (int k = 0; k < v->count; k++) {
                    float *g = v->grads[k];
                    for (size_t i = 0; i < t[v->tensors[k]].numel; i++)
                        g[i] += s == inf_step ? INFINITY
                                              : 0.05f * (float)(s + v->tensors[k] + 3 * m + u) * (float)(i % 5 + 1);
                }
                zero_grads_ready(z, u);
                zero_release(z, u, 1);
            }
        }
        a.t = s;
        zero_step(z, &a);
    }
    for (int i = 0; i < nt; i++) {
        zero_gather_master(z, i, out);
        out += t[i].numel;
    }
    zero_free(z);
}

// edge_run with ref's settings, then with cfg's: the same master bits, or a failed check
// naming `against`.
static void same_master(ZeroComm *comm, const ZeroTensor *t, int nt, int nu, const ZeroConfig *ref,
                        const ZeroConfig *cfg, int steps, int accum, int inf_step, const char *what, const char *against) {
    size_t total = 0;
    for (int i = 0; i < nt; i++) total += t[i].numel;
    float *want = malloc(total * sizeof(float)), *got = malloc(total * sizeof(float));
    edge_run(comm, t, nt, nu, ref, steps, accum, inf_step, want, what);
    edge_run(comm, t, nt, nu, cfg, steps, accum, inf_step, got, what);
    size_t diff = 0;
    for (size_t i = 0; i < total; i++) diff += memcmp(&want[i], &got[i], sizeof(float)) != 0;
    check(diff == 0, "edges: %s: %zu of %zu master values differ from %s (first: %g, not %g)", what, diff, total,
          against, got[0], want[0]);
    free(want);
    free(got);
}

static ZeroConfig edge_config(int stage) {
    ZeroConfig cfg;
    zero_config_defaults(&cfg);
    cfg.stage = stage;
    cfg.param_dtype = ZERO_F32;
    cfg.grad_dtype = ZERO_F32;
    cfg.timeout_s = 30.0;
    cfg.nvme_path = nvme_dir;
    return cfg;
}

// The same model and steps with the optimizer (and at stage 3 the parameters) offloaded as
// on the device: the same master bits.
static void edge_case(ZeroComm *comm, const ZeroTensor *t, int nt, int nu, int stage, ZeroTier opt, ZeroTier param,
                      int steps, int inf_step, const char *what) {
    ZeroConfig ref = edge_config(stage), cfg = ref;
    cfg.optimizer_tier = opt;
    cfg.param_tier = param;
    same_master(comm, t, nt, nu, &ref, &cfg, steps, 1, inf_step, what, "the run without offload");
}

// A gradient pool that holds every gradient at once (a bucket near the model's size): with
// two micro-steps and a tied tensor, buckets come back out of order and first fit split the
// pool into holes each too small for the next tensor ("cannot place t2" at 3 ranks). Against
// the automatic bucket, whose smaller pool places first fit: the same master bits (a bucket
// groups tensors into collectives; each element's sum is the same).
static void pool_case(ZeroComm *comm, const ZeroTensor *t, int nt, int nu, int stage, size_t bucket, int qgz,
                      const char *what) {
    ZeroConfig ref = edge_config(stage), cfg;
    ref.qgz = qgz;
    ref.node_size = qgz ? 1 : 0;   // qgZ's two hops: across "nodes" of one rank
    cfg = ref;
    cfg.bucket_elems = bucket;
    same_master(comm, t, nt, nu, &ref, &cfg, 3, 2, 0, what, "the automatic bucket's");
}

static int run_edges(ZeroComm *comm) {
    const ZeroTensor fragments[9] = {
        {"t0", 944, 1, {0}, 1}, {"t1", 20, 1, {0}, 1}, {"t2", 2967, 1, {0}, 1}, {"t3", 4, 1, {1}, 1},
        {"t4", 2752, 1, {1}, 1}, {"t5", 1589, 1, {1}, 1}, {"t6", 789, 1, {2}, 1}, {"t7", 5, 1, {2}, 1},
        {"tied", 721, 1, {0, 2}, 2}};
    for (int stage = 2; stage <= 3; stage++) {
        char what[96];
        snprintf(what, sizeof what, "stage %d, bucket 3940, two micro-steps, a tied tensor", stage);
        pool_case(comm, fragments, 9, 3, stage, 3940, 0, what);
    }
    // qgZ's staged records round each tensor up, so a bucket of the whole model still splits
    const ZeroTensor qgz_split[6] = {{"t0", 1412, 1, {0}, 1}, {"t1", 20, 1, {1}, 1}, {"t2", 8, 1, {1}, 1},
                                     {"t3", 2352, 1, {1}, 1}, {"t4", 11, 1, {2}, 1}, {"tied", 1827, 1, {0, 2}, 2}};
    pool_case(comm, qgz_split, 6, 3, 3, (size_t)1 << 20, 1, "stage 3, qgZ, bucket 2^20, a tied tensor");
    snprintf(nvme_dir, sizeof nvme_dir, "/tmp/zero_toy_nvme.%d.%d", (int)getpid(), comm->rank);
    if (mkdir(nvme_dir, 0700) != 0 && errno != EEXIST) check(0, "cannot make %s for the NVMe cases", nvme_dir);
    const ZeroTier DEV = ZERO_TIER_DEVICE, NVME = ZERO_TIER_NVME;
    // Tensors of at most one 16-element shard: from the second rank on, a rank owns nothing and
    // its NVMe swap file is empty (no engine): every stage still steps.
    const ZeroTensor tiny[2] = {{"a", 10, 1, {0}, 1}, {"b", 12, 0, {1}, 1}};
    if (comm->world >= 2) {
        edge_case(comm, tiny, 2, 2, 1, NVME, DEV, 2, 0, "stage 1, optimizer on nvme, a rank owning nothing");
        edge_case(comm, tiny, 2, 2, 2, NVME, DEV, 2, 0, "stage 2, optimizer on nvme, a rank owning nothing");
        edge_case(comm, tiny, 2, 2, 3, NVME, NVME, 2, 0, "stage 3, optimizer and params on nvme, a rank owning nothing");
    }
    // A step skipped for an infinite norm leaves its last gradient writes to NVMe unwaited;
    // the next step's first write of the same bytes (one tile a rank) must not pass them, or
    // AdamW reads the skipped step's infinities. Under random transfer delays, seed by seed.
    const ZeroTensor one[1] = {{"w", 1000, 0, {0}, 1}};
    const char *had = getenv("ZERO_NVME_JITTER");
    char keep[32];
    snprintf(keep, sizeof keep, "%s", had ? had : "");
    int before = fails;
    for (int seed = 1; seed <= 16 && fails == before; seed++) {
        char val[16], what[96];
        snprintf(val, sizeof val, "%d", seed);
        setenv("ZERO_NVME_JITTER", val, 1);
        snprintf(what, sizeof what, "stage 2, optimizer on nvme, step 1 skipped, jitter seed %d", seed);
        edge_case(comm, one, 1, 1, 2, NVME, DEV, 2, 1, what);
    }
    if (had) setenv("ZERO_NVME_JITTER", keep, 1);
    else unsetenv("ZERO_NVME_JITTER");
    rmdir(nvme_dir);
    return 0;
}

// ---------------------------------------------------------------- refusals

static int run_errors(ZeroComm *comm) {
    Toy toy;
    toy_table(&toy);
    InitCtx ic = {&toy, comm->rank, comm->world, {0}, 0};
    const ZeroBackend *b = host_b;
    ZeroConfig cfg;
    zero_config_defaults(&cfg);
    cfg.stage = 5;
    check(zero_init(toy.t, TOY_NT, TOY_NU, &cfg, comm, b, counted_init, &ic) == NULL, "errors: stage 5 accepted");
    zero_config_defaults(&cfg);
    ZeroTensor bad[TOY_NT];
    memcpy(bad, toy.t, sizeof bad);
    bad[3].units[0] = TOY_NU;   // no such unit
    check(zero_init(bad, TOY_NT, TOY_NU, &cfg, comm, b, counted_init, &ic) == NULL, "errors: unit out of range accepted");
    memcpy(bad, toy.t, sizeof bad);
    bad[0].units[1] = bad[0].units[0];   // the same unit twice
    check(zero_init(bad, TOY_NT, TOY_NU, &cfg, comm, b, counted_init, &ic) == NULL, "errors: duplicate unit accepted");
    memcpy(bad, toy.t, sizeof bad);
    bad[4].name = bad[1].name;   // two tensors of one name: two weights where one was meant
    Zero *dup = zero_init(bad, TOY_NT, TOY_NU, &cfg, comm, b, counted_init, &ic);
    check(dup == NULL, "errors: two tensors named %s accepted", bad[1].name);
    zero_free(dup);
    memcpy(bad, toy.t, sizeof bad);
    bad[2].name = NULL;        // called tensor2 ...
    bad[3].name = "tensor2";   // ... as this one is
    dup = zero_init(bad, TOY_NT, TOY_NU, &cfg, comm, b, counted_init, &ic);
    check(dup == NULL, "errors: a tensor named tensor2 beside a nameless tensor 2 accepted");
    zero_free(dup);
    memcpy(bad, toy.t, sizeof bad);
    bad[0].num_units = 3;
    check(zero_init(bad, TOY_NT, TOY_NU, &cfg, comm, b, counted_init, &ic) == NULL, "errors: 3 units per tensor accepted");
    cfg.stage = 3;
    cfg.persist_elems = 0;      // (the default would keep every toy tensor whole)
    cfg.max_live_elems = 100;   // smaller than a layer
    check(zero_init(toy.t, TOY_NT, TOY_NU, &cfg, comm, b, counted_init, &ic) == NULL, "errors: max_live below a unit accepted");
    zero_config_defaults(&cfg);
    cfg.node_size = 3;
    if (comm->world % 3 != 0)
        check(zero_init(toy.t, TOY_NT, TOY_NU, &cfg, comm, b, counted_init, &ic) == NULL, "errors: node size 3 accepted");
    zero_comm_set_layout(comm, 0, 0);
    return 0;
}

// ---------------------------------------------------------------- deaths (run by the script)

static int run_timeout(ZeroComm *comm) {
    Toy toy;
    toy_table(&toy);
    InitCtx ic = {&toy, comm->rank, comm->world, {0}, 0};
    ZeroConfig cfg;
    zero_config_defaults(&cfg);
    cfg.stage = 2;
    cfg.timeout_s = 1.0;
    Zero *z = zero_init(toy.t, TOY_NT, TOY_NU, &cfg, comm, host_b, counted_init, &ic);
    if (!z) return 1;
    if (comm->rank == comm->world - 1) zero_comm_inject_stall(comm, 60.0);   // a hung peer
    double x = 1.0;
    zero_allreduce_sum_f64(z, &x, 1);
    printf("rank %d: the stalled all-reduce returned: the watchdog did not fire\n", comm->rank);
    return 0;
}

// One rank stalls while the ranks open a stream's communicators (a collective over the
// world): the watchdog must end the job there too.
static int run_timeout_open(ZeroComm *comm) {
    if (zero_comm_set_timeout(comm, 1.0) != 0) return 1;
    if (comm->rank == comm->world - 1) zero_comm_inject_stall(comm, 60.0);   // a hung peer
    ZeroChannel *ch = zero_comm_channel_open(comm);
    printf("rank %d: opening a channel returned: the watchdog did not fire\n", comm->rank);
    zero_comm_channel_close(comm, ch);
    return 1;
}

// A reduce-scatter whose whole send buffer, count x ranks elements, exceeds MPI's int count
// must end the job before MPI sees it (the buffers are never read: a single element each).
static int run_bigcount(ZeroComm *comm) {
    float send = 0.0f, recv = 0.0f;
    ZeroCollPart part = {&send, &recv, (size_t)INT_MAX / (size_t)comm->world + 1};
    zero_mpi_reduce_scatter(comm, NULL, ZERO_GROUP_WORLD, &part, 1, ZERO_F32, "bucket 7");
    printf("rank %d: a reduce-scatter of %zu elements per rank x %d ranks went to MPI\n", comm->rank, part.count,
           comm->world);
    return 1;
}

// A hook out of order must end the job. misuse: zero_step with one unit's grads ready;
// misuse_bwd: zero_step after a complete micro-step and one more backward fetch of unit 1
// whose grads_ready never came; step_t0: zero_step with t 0 after a complete micro-step (a
// loop counter from 0 passed for the 1-based step: AdamW's bias corrections would be 0,
// every weight NaN under a finite norm).
typedef enum { MISUSE_PARTIAL, MISUSE_EXTRA_BACKWARD, MISUSE_T0 } Misuse;

static int run_misuse(ZeroComm *comm, Misuse how) {
    Toy toy;
    toy_table(&toy);
    InitCtx ic = {&toy, comm->rank, comm->world, {0}, 0};
    ZeroConfig cfg;
    zero_config_defaults(&cfg);
    cfg.stage = 3;
    Zero *z = zero_init(toy.t, TOY_NT, TOY_NU, &cfg, comm, host_b, counted_init, &ic);
    if (!z) return 1;
    zero_begin_step(z, 1);
    const int whole = how != MISUSE_PARTIAL;   // every unit's backward: a complete micro-step
    for (int u = whole ? TOY_NU - 1 : 2; u >= (whole ? 0 : 2); u--) {
        zero_fetch(z, u, 1);
        zero_grads_ready(z, u);
        zero_release(z, u, 1);
    }
    if (how == MISUSE_EXTRA_BACKWARD) {
        zero_fetch(z, 1, 1);
        zero_release(z, 1, 1);
    }
    ZeroStepArgs a = {TOY_LR, TOY_B1, TOY_B2, TOY_EPS, TOY_WD, TOY_CLIP, how == MISUSE_T0 ? 0 : 1};
    zero_step(z, &a);   // must stop here
    printf("rank %d: zero_step accepted %s\n", comm->rank, how == MISUSE_T0 ? "t 0" : "an incomplete micro-step");
    zero_free(z);
    return 1;
}

int main(int argc, char **argv) {
    ZeroComm *comm = zero_comm_init(&argc, &argv);
    if (!comm) return 1;
    rank_g = comm->rank;
    host_b = zero_backend_host(comm);
    if (!host_b) return 1;
    const char *mode = argc > 1 ? argv[1] : "train";
    int rc = 0;
    if (!strcmp(mode, "train")) rc = run_training(comm);
    else if (!strcmp(mode, "kernels")) rc = run_kernels();
    else if (!strcmp(mode, "edges")) rc = run_edges(comm);
    else if (!strcmp(mode, "errors")) rc = run_errors(comm);
    else if (!strcmp(mode, "timeout")) rc = run_timeout(comm);
    else if (!strcmp(mode, "misuse")) rc = run_misuse(comm, MISUSE_PARTIAL);
    else if (!strcmp(mode, "misuse_bwd")) rc = run_misuse(comm, MISUSE_EXTRA_BACKWARD);
    else if (!strcmp(mode, "step_t0")) rc = run_misuse(comm, MISUSE_T0);
    else if (!strcmp(mode, "bigcount")) rc = run_bigcount(comm);
    else if (!strcmp(mode, "timeout_open")) rc = run_timeout_open(comm);
    else {
        fprintf(stderr, "usage: %s [train|kernels|edges|errors|timeout|timeout_open|misuse|misuse_bwd|step_t0|bigcount]\n",
                argv[0]);
        rc = 2;
    }
    // every rank learns whether any rank failed
    double f[2] = {(double)fails, (double)passes};
    zero_mpi_allreduce_sum_f64(comm, f, 2, "test summary");
    if (comm->rank == 0) printf("mpi_zero_toy %s: %d ranks, %.0f checks passed, %.0f failed\n", mode, comm->world, f[1], f[0]);
    zero_backend_host_free(host_b);
    zero_comm_free(comm);
    return rc ? rc : (f[0] > 0 ? 1 : 0);
}
