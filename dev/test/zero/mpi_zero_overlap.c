/*
mpi_zero_overlap.c: what the model's stream waits for, read from a recording backend
(zero_recorder.h) wrapped around the host backend.

A synthetic GPT-2-shaped table (embeddings tied with the classifier, L blocks of the 12
GPT-2 tensors, a final LayerNorm) is trained for a few steps with stand-in compute; the
recorder logs every stream wait. The property checked, for stages 1-3 and several bucket
sizes: during backward, the main stream never waits on a gradient reduction issued for
the unit it has just finished before the next unit's backward has run (such a reduction is
not overlapped with any compute). Stage 3 also must not make a parameter gather wait behind
a reduction. The figures (reductions, how many were waited for at once) are printed.

Run under mpirun with any number of ranks, or alone.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../zero/backend.h"
#include "../../../zero/host/backend_host.h"
#include "../../../zero/comm.h"
#include "../../../zero/zero.h"

#include "zero_recorder.h"

enum { C = 64, L = 6, V = 2048, MAXT = 64, STEPS = 3 };
#define NU (L + 3)
#define NT (4 + 12 * L)

static int rank_g, passes, fails;
static void check(int ok, const char *what) {
    if (ok) { passes++; return; }
    fails++;
    fprintf(stderr, "FAIL rank %d: %s\n", rank_g, what);
}

typedef struct {
    ZeroTensor t[NT];
    char names[NT][16];
} Table;

static void add(Table *tb, int *k, const char *name, int layer, size_t n, int decay, int u0, int u1, int nu) {
    if (layer >= 0) snprintf(tb->names[*k], sizeof tb->names[*k], "%s.%d", name, layer);
    else snprintf(tb->names[*k], sizeof tb->names[*k], "%s", name);
    tb->t[*k] = (ZeroTensor){tb->names[*k], n, decay, {u0, u1}, nu};
    (*k)++;
}

// Units: 0 embeddings (wte, wpe), 1..L blocks, L+1 final LayerNorm, L+2 classifier (wte).
static void build_table(Table *tb) {
    int k = 0;
    add(tb, &k, "wte", -1, (size_t)V * C, 1, 0, L + 2, 2);
    add(tb, &k, "wpe", -1, (size_t)MAXT * C, 1, 0, 0, 1);
    for (int l = 0; l < L; l++) {
        int u = l + 1;
        add(tb, &k, "ln1w", l, C, 0, u, 0, 1);
        add(tb, &k, "ln1b", l, C, 0, u, 0, 1);
        add(tb, &k, "qkvw", l, (size_t)3 * C * C, 1, u, 0, 1);
        add(tb, &k, "qkvb", l, 3 * C, 0, u, 0, 1);
        add(tb, &k, "attprojw", l, (size_t)C * C, 1, u, 0, 1);
        add(tb, &k, "attprojb", l, C, 0, u, 0, 1);
        add(tb, &k, "ln2w", l, C, 0, u, 0, 1);
        add(tb, &k, "ln2b", l, C, 0, u, 0, 1);
        add(tb, &k, "fcw", l, (size_t)4 * C * C, 1, u, 0, 1);
        add(tb, &k, "fcb", l, 4 * C, 0, u, 0, 1);
        add(tb, &k, "fcprojw", l, (size_t)4 * C * C, 1, u, 0, 1);
        add(tb, &k, "fcprojb", l, C, 0, u, 0, 1);
    }
    add(tb, &k, "lnfw", -1, C, 0, L + 1, 0, 1);
    add(tb, &k, "lnfb", -1, C, 0, L + 1, 0, 1);
}

static void init_fn(void *ctx, int t, size_t off, size_t n, float *out) {
    (void)ctx;
    for (size_t i = 0; i < n; i++) out[i] = 0.01f * (float)((t * 131 + (int)((off + i) % 97)) % 17) - 0.08f;
}

// Stand-in compute: reads every parameter, adds into every gradient.
static float touch(const ZeroTensor *t, const ZeroUnitView *v, int k, int backward) {
    const float *p = v->params[k];
    float s = 0.0f;
    size_t n = t->numel;
    for (size_t i = 0; i < n; i++) s += p[i];
    if (backward) {
        float *g = v->grads[k];
        for (size_t i = 0; i < n; i++) g[i] += 1e-3f * p[i] + 1e-4f;
    }
    return s;
}

typedef struct {
    const char *name;
    int stage, accum;
    size_t bucket, prefetch;
} Config;

// One training run; returns 0 if the overlap property holds.
static const ZeroBackend *host_b;   // the process's host backend (main makes it)

static void run(ZeroComm *comm, const Table *tb, const Config *cf) {
    ZeroConfig zc;
    zero_config_defaults(&zc);
    zc.stage = cf->stage;
    if (cf->bucket) zc.bucket_elems = cf->bucket;
    zc.prefetch_elems = cf->prefetch;
    zc.timeout_s = 120;
    static Recorder rec;
    const ZeroBackend *b = rec_init(&rec, host_b);
    Zero *z = zero_init(tb->t, NT, NU, &zc, comm, b, init_fn, NULL);
    if (!z) { check(0, "zero_init"); return; }
    volatile float sink = 0.0f;
    ZeroStepArgs a = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 0};
    for (int step = 0; step < STEPS; step++) {
        zero_begin_step(z, cf->accum);
        for (int m = 0; m < cf->accum; m++) {
            for (int u = 0; u < NU; u++) {
                rec_phase(&rec, PH_FWD, m, u);
                const ZeroUnitView *v = zero_fetch(z, u, 0);
                for (int k = 0; k < v->count; k++) sink += touch(&tb->t[v->tensors[k]], v, k, 0);
                zero_release(z, u, 0);
            }
            for (int u = NU - 1; u >= 0; u--) {
                const ZeroUnitView *v = zero_fetch(z, u, 1);
                rec_phase(&rec, PH_BWD_COMPUTE, m, u);
                for (int k = 0; k < v->count; k++) sink += touch(&tb->t[v->tensors[k]], v, k, 1);
                rec_phase(&rec, PH_BWD_AFTER, m, u);
                zero_grads_ready(z, u);
                zero_release(z, u, 1);
            }
        }
        rec_phase(&rec, PH_STEP, 0, -1);
        a.t = step + 1;
        zero_step(z, &a);
    }
    zero_free(z);
    // Reductions issued from a unit's grads_ready while more backward compute followed
    // (not after the last unit, unit 0, where the micro-step ends).
    int issued = 0, immediate = 0, tail = 0;
    for (int si = 0; si < rec.ns; si++)
        for (int k = 0; k < rec.s[si].n; k++) {
            const RecOp *o = &rec.s[si].ops[k];
            if (o->kind != REC_OP_COLL_REDUCE) continue;
            if (o->phase_kind != PH_BWD_AFTER || o->unit == 0) { tail++; continue; }
            issued++;
            if (o->covered_phase == o->issued_phase) immediate++;
        }
    if (comm->rank == 0)
        printf("%-34s %d streams; reductions during backward %3d, waited for before the next unit's compute %3d "
               "(%.0f%%); at the end of backward %d; main-stream waits %ld\n",
               cf->name, rec.ns, issued, immediate, issued ? 100.0 * immediate / issued : 0.0, tail, rec.main_waits);
    char what[256];
    snprintf(what, sizeof what, "%s: %d of %d reductions issued during backward were waited for before the next unit ran",
             cf->name, immediate, issued);
    check(immediate == 0, what);
    int unordered = rec_unordered_collectives(&rec);
    snprintf(what, sizeof what, "%s: %d collectives did not wait for the main stream's earlier work", cf->name, unordered);
    check(unordered == 0, what);
    rec_free_all(&rec);
}

int main(int argc, char **argv) {
    ZeroComm *comm = zero_comm_init(&argc, &argv);
    if (!comm) return 1;
    rank_g = comm->rank;
    host_b = zero_backend_host(comm);
    if (!host_b) return 1;
    Table tb;
    build_table(&tb);
    const size_t block = 12 * C * C + 13 * C;   // one block's elements
    const Config configs[] = {
        {"stage 1, accum 1", 1, 1, block, 0},
        {"stage 1, accum 2", 1, 2, block, 0},
        {"stage 2, bucket = 1 block", 2, 1, block, 0},
        {"stage 2, bucket = 1/3 block", 2, 1, block / 3, 0},
        {"stage 2, bucket = 2 blocks, accum 2", 2, 2, 2 * block, 0},
        {"stage 3, bucket = 1 block", 3, 1, block, 0},
        {"stage 3, bucket = 1 block, prefetch", 3, 1, block, 2 * block},
        {"stage 3, bucket = 1/3 block, prefetch", 3, 2, block / 3, block},
    };
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) run(comm, &tb, &configs[i]);
    double f[2] = {(double)fails, (double)passes};
    zero_mpi_allreduce_sum_f64(comm, f, 2, "test summary");
    if (comm->rank == 0) printf("mpi_zero_overlap: %d ranks, %.0f checks passed, %.0f failed\n", comm->world, f[1], f[0]);
    zero_backend_host_free(host_b);
    zero_comm_free(comm);
    return f[0] > 0 ? 1 : 0;
}
