/*
mpi_zero_ckpt.c: sharded checkpoints, consolidation, the accounting report and the dry
run of zero/, with the toy model of zero_toy_model.h. Run by test_zero_ckpt.sh, one mode
per process group (a resume is a fresh mpirun, as after a crash):

  save BASE     every variant: train 6 steps, saving at step 3; keep the gathered master
                (and the working weights) at the save and at the end; a second run
                without the save must end identical
  resume BASE   a fresh group loads step 3 and trains to 6: the master equals the saved
                one right after the load, the working weights (bf16: stochastically
                rounded with the saved t) equal the saved ones, the end equals the
                uninterrupted run (memcmp)
  cross BASE    load the 4-rank stage-3 checkpoint at 2 ranks stage 1 or 1 rank stage 0:
                master equal; m and v equal after a re-save (consolidated); on 1 rank also
                consolidation of the stage-3 checkpoint against the stage-0 run
  errors BASE   a different model, a corrupt, truncated or missing rank file, a bad
                manifest, a wrong extra size, no checkpoint, an unwritable folder, a rank
                file copied in from another run or from another step of the same run:
                refused on every rank, nothing changed; an interrupted save leaves
                latest_zero alone
  skip BASE     a step whose gradient norm is NaN (one rank's gradient poisoned), and a
                step the trainer rejects (zero_step_maybe_skip), change nothing: master,
                AdamW m and v, working weights and the t a save records; training goes on
  report BASE   stages 0-3, fp32 and bf16: the JSON report parsed back against zero_stats
                and zero_predict (every rank, exact), the dry-run JSON equal to the live
                one, the model-state formula with explicit padding, bytes per step; the
                bytes the report's and the checkpoint's metadata exchanges send per rank
                (a gather to rank 0 plus one-double agreements, not world-sized slots)

Also in save: every manifest's crc32 is its rank file's body CRC (zlib over the file less
its 4-byte trailer, computed here), and they differ between ranks.
*/
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "../../../zero/comm.h"
#include "../../../zero/host/backend_host.h"
#include "zero_toy_model.h"

enum { STEPS = 6, SAVE_AT = 3 };


typedef struct {
    const char *name;
    int stage, accum;
    size_t bucket, prefetch, persist;
    ZeroDType pdt, gdt;
} Variant;

#define F ZERO_F32
#define BF ZERO_BF16
static const Variant variants[] = {
    {"s0", 0, 1, 4096, 0, 0, F, F},
    {"s1", 1, 2, 4096, 0, 0, F, F},
    {"s2", 2, 2, 1000, 0, 0, F, F},
    {"s3", 3, 1, 1000, 1500, 40, F, F},
    {"s3bf", 3, 2, 1000, 1500, 40, BF, BF},
    {"s1bf", 1, 2, 4096, 0, 0, BF, F},
};
#define NVAR ((int)(sizeof variants / sizeof variants[0]))

typedef struct {
    uint32_t magic;
    int32_t step;
    uint64_t position;
    char tag[16];
} Extra;

static const ZeroBackend *host_b;   // the process's host backend (main makes it)

static void config_of(ZeroConfig *cfg, const Variant *V, int node_size) {
    zero_config_defaults(cfg);
    cfg->stage = V->stage;
    cfg->bucket_elems = V->bucket;
    cfg->prefetch_elems = V->prefetch;
    cfg->persist_elems = V->persist;
    cfg->param_dtype = V->pdt;
    cfg->grad_dtype = V->gdt;
    cfg->seed = TOY_SEED;
    cfg->node_size = node_size;
    cfg->timeout_s = 60.0;
}

static Zero *make(ZeroComm *comm, Toy *toy, const Variant *V) {
    ZeroConfig cfg;
    config_of(&cfg, V, 0);
    Zero *z = zero_init(toy->t, TOY_NT, TOY_NU, &cfg, comm, host_b, toy_init, toy);
    if (!z) {
        fprintf(stderr, "rank %d: zero_init of %s failed\n", comm->rank, V->name);
        zero_comm_abort(comm, 1);
    }
    return z;
}

static void path_of(char *out, size_t cap, const char *base, int world, const char *variant, const char *file) {
    snprintf(out, cap, "%s/np%d/%s%s%s", base, world, variant, file ? "/" : "", file ? file : "");
}

static int write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(p, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = 0;
    return ok ? 0 : -1;
}

static int read_file(const char *path, void *p, size_t n) {
    FILE *f = fopen(path, "rb");
    int ok = f && fread(p, 1, n, f) == n && fgetc(f) == EOF;
    if (f) fclose(f);
    return ok ? 0 : -1;
}

static int copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    int ok = a && b;
    char buf[65536];
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof buf, a)) > 0) ok = fwrite(buf, 1, n, b) == n;
    if (a) fclose(a);
    if (b && fclose(b) != 0) ok = 0;
    return ok ? 0 : -1;
}

// The working weights the model would read now, every unit's tensors in unit order
// (a tensor of two units twice). Forward fetches between steps (stage 3 gathers them).
static size_t views_bytes(const Toy *toy, ZeroDType pdt) {
    size_t n = 0;
    for (int u = 0; u < TOY_NU; u++)
        for (int i = 0; i < toy->unit_n[u]; i++) n += toy->t[toy->unit_tensors[u][i]].numel;
    return n * (pdt == BF ? 2 : 4);
}

static void views(Zero *z, const Toy *toy, ZeroDType pdt, unsigned char *out) {
    size_t es = pdt == BF ? 2 : 4, off = 0;
    for (int u = 0; u < TOY_NU; u++) {
        const ZeroUnitView *v = zero_fetch(z, u, 0);
        for (int i = 0; i < v->count; i++) {
            size_t n = toy->t[v->tensors[i]].numel * es;
            memcpy(out + off, v->params[i], n);
            off += n;
        }
        zero_release(z, u, 0);
    }
}

static void barrier(ZeroComm *comm) { zero_comm_barrier(comm); }

// ---------------------------------------------------------------- save / resume

static Extra extra_for(int world, const Variant *V) {
    Extra e;
    memset(&e, 0, sizeof e);
    e.magic = 0x5a45524fu;
    e.step = SAVE_AT;
    e.position = 1000003ull * (uint64_t)world + (uint64_t)V->stage;
    snprintf(e.tag, sizeof e.tag, "%s", V->name);
    return e;
}

static cJSON *parse_file(const char *path);

// The manifest's crc32 of each rank file against zlib's CRC-32 of the file's body (all
// but the 4-byte trailer, which must hold the same value); CRCs must differ between ranks.
static void check_manifest_crcs(const char *dir, int step, int W, const char *name) {
    char path[4300];
    snprintf(path, sizeof path, "%s/zero_%d/manifest.json", dir, step);
    cJSON *js = parse_file(path);
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(js, "ranks");
    check(cJSON_GetArraySize(ranks) == W, "%s: manifest %s lists %d rank files", name, path, cJSON_GetArraySize(ranks));
    uint32_t crcs[64];
    for (int q = 0; q < W && q < 64 && ranks; q++) {
        const cJSON *e = cJSON_GetArrayItem(ranks, q), *c = cJSON_GetObjectItemCaseSensitive(e, "crc32");
        snprintf(path, sizeof path, "%s/zero_%d/rank_%05d.bin", dir, step, q);
        FILE *f = fopen(path, "rb");
        static unsigned char buf[1 << 20];
        size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
        if (f) fclose(f);
        check(n > 4 && n < sizeof buf, "%s: reading %s (%zu bytes)", name, path, n);
        if (n <= 4) continue;
        uint32_t body = (uint32_t)crc32(0L, buf, (uInt)(n - 4));
        uint32_t trailer = (uint32_t)buf[n - 4] | (uint32_t)buf[n - 3] << 8 | (uint32_t)buf[n - 2] << 16 | (uint32_t)buf[n - 1] << 24;
        crcs[q] = cJSON_IsNumber(c) ? (uint32_t)c->valuedouble : 0;
        check(cJSON_IsNumber(c) && crcs[q] == body && trailer == body,
              "%s: manifest crc32 of %s is 0x%08x; its body's CRC-32 is 0x%08x, its trailer 0x%08x", name, path, crcs[q],
              body, trailer);
        for (int k = 0; k < q; k++)
            check(crcs[k] != crcs[q], "%s: manifest gives rank files %d and %d the same crc32 0x%08x", name, k, q, crcs[q]);
    }
    cJSON_Delete(js);
}

static int run_save(ZeroComm *comm, const char *base) {
    Toy toy;
    toy_table(&toy);
    const int W = comm->world;
    const size_t N = toy_numel_total(&toy);
    float *master = malloc(N * sizeof(float)), *plain = malloc(N * sizeof(float));
    for (int vi = 0; vi < NVAR; vi++) {
        const Variant *V = &variants[vi];
        char dir[4096], path[4200];
        path_of(dir, sizeof dir, base, W, V->name, NULL);
        Zero *z = make(comm, &toy, V);
        toy_train(z, &toy, comm->rank, W, V->accum, V->pdt, V->gdt, 0, SAVE_AT);
        Extra e = extra_for(W, V);
        check(zero_save(z, dir, SAVE_AT, &e, sizeof e) == 0, "%s: zero_save failed", V->name);
        check(zero_latest(dir) == SAVE_AT, "%s: latest_zero says %d, not %d", V->name, zero_latest(dir), SAVE_AT);
        if (comm->rank == 0) check_manifest_crcs(dir, SAVE_AT, W, V->name);
        toy_gather_all(z, &toy, master);
        size_t vb = views_bytes(&toy, V->pdt);
        unsigned char *work = malloc(vb);
        views(z, &toy, V->pdt, work);
        if (comm->rank == 0) {
            path_of(path, sizeof path, base, W, V->name, "at_save.f32");
            check(write_file(path, master, N * sizeof(float)) == 0, "writing %s", path);
            path_of(path, sizeof path, base, W, V->name, "work_at_save.bin");
            check(write_file(path, work, vb) == 0, "writing %s", path);
            if (V->pdt == BF) {
                // the resume test is only sharp if rounding with another t gives other bits
                uint64_t g = 0;
                size_t differ = 0;
                for (size_t i = 0; i < N; i++, g++)
                    differ += adamw_round_bf16_at(master[i], TOY_SEED, SAVE_AT, g) !=
                              adamw_round_bf16_at(master[i], TOY_SEED, SAVE_AT + 1, g);
                check(differ > 0, "%s: rounding with t=%d and t=%d agrees everywhere", V->name, SAVE_AT, SAVE_AT + 1);
                printf("  %s: bf16 weights rounded with t=%d differ from t=%d in %zu of %zu elements\n", V->name, SAVE_AT,
                       SAVE_AT + 1, differ, N);
            }
        }
        free(work);
        toy_train(z, &toy, comm->rank, W, V->accum, V->pdt, V->gdt, SAVE_AT, STEPS);
        toy_gather_all(z, &toy, master);
        zero_free(z);
        // the same run without a save in the middle
        z = make(comm, &toy, V);
        toy_train(z, &toy, comm->rank, W, V->accum, V->pdt, V->gdt, 0, STEPS);
        toy_gather_all(z, &toy, plain);
        zero_free(z);
        check(memcmp(master, plain, N * sizeof(float)) == 0, "%s: saving changed the run", V->name);
        if (comm->rank == 0) {
            path_of(path, sizeof path, base, W, V->name, "final.f32");
            check(write_file(path, master, N * sizeof(float)) == 0, "writing %s", path);
        }
    }
    free(master);
    free(plain);
    return 0;
}

static int run_resume(ZeroComm *comm, const char *base) {
    Toy toy;
    toy_table(&toy);
    const int W = comm->world;
    const size_t N = toy_numel_total(&toy);
    float *got = malloc(N * sizeof(float)), *want = malloc(N * sizeof(float));
    for (int vi = 0; vi < NVAR; vi++) {
        const Variant *V = &variants[vi];
        char dir[4096], path[4200];
        path_of(dir, sizeof dir, base, W, V->name, NULL);
        Zero *z = make(comm, &toy, V);
        Extra e, saved = extra_for(W, V);
        memset(&e, 0, sizeof e);
        check(zero_load(z, dir, -1, &e, sizeof e) == 0, "%s: zero_load failed", V->name);
        check(memcmp(&e, &saved, sizeof e) == 0, "%s: the trainer's extra data did not come back", V->name);
        toy_gather_all(z, &toy, got);
        path_of(path, sizeof path, base, W, V->name, "at_save.f32");
        check(read_file(path, want, N * sizeof(float)) == 0, "reading %s", path);
        check(memcmp(got, want, N * sizeof(float)) == 0, "%s: master after the load differs from the saved one", V->name);
        size_t vb = views_bytes(&toy, V->pdt);
        unsigned char *w1 = malloc(vb), *w2 = malloc(vb);
        views(z, &toy, V->pdt, w1);
        path_of(path, sizeof path, base, W, V->name, "work_at_save.bin");
        check(read_file(path, w2, vb) == 0, "reading %s", path);
        check(memcmp(w1, w2, vb) == 0, "%s: working weights after the load differ from the saved run's", V->name);
        free(w1);
        free(w2);
        toy_train(z, &toy, comm->rank, W, V->accum, V->pdt, V->gdt, SAVE_AT, STEPS);
        toy_gather_all(z, &toy, got);
        path_of(path, sizeof path, base, W, V->name, "final.f32");
        check(read_file(path, want, N * sizeof(float)) == 0, "reading %s", path);
        int same = memcmp(got, want, N * sizeof(float)) == 0;
        check(same, "%s: resumed run differs from the uninterrupted one", V->name);
        if (comm->rank == 0)
            printf("  resume %-5s stage %d, %d ranks, accum %d, %s: %s\n", V->name, V->stage, W, V->accum,
                   V->pdt == BF ? "bf16" : "fp32", same ? "bit-identical to the uninterrupted run" : "DIFFERENT");
        zero_free(z);
    }
    free(got);
    free(want);
    return 0;
}

// ---------------------------------------------------------------- other world, other stage

static int run_cross(ZeroComm *comm, const char *base) {
    Toy toy;
    toy_table(&toy);
    const int W = comm->world;
    const size_t N = toy_numel_total(&toy);
    char src[4096], path[4200], again[4096];
    path_of(src, sizeof src, base, 4, "s3", NULL);
    Variant V = {"cross", W == 1 ? 0 : 1, 1, 4096, 0, 0, F, F};
    Zero *z = make(comm, &toy, &V);
    Extra e;
    check(zero_load(z, src, SAVE_AT, &e, sizeof e) == 0, "cross: loading the 4-rank stage-3 checkpoint at %d ranks failed", W);
    float *got = malloc(N * sizeof(float)), *want = malloc(N * sizeof(float)), *a = malloc(N * sizeof(float)),
          *b = malloc(N * sizeof(float));
    toy_gather_all(z, &toy, got);
    path_of(path, sizeof path, base, 4, "s3", "at_save.f32");
    check(read_file(path, want, N * sizeof(float)) == 0, "reading %s", path);
    int same = memcmp(got, want, N * sizeof(float)) == 0;
    check(same, "cross: master loaded at %d ranks stage %d differs from the 4-rank stage-3 one", W, V.stage);
    // the model sees the loaded weights
    size_t vb = views_bytes(&toy, F), off = 0;
    unsigned char *w = malloc(vb);
    views(z, &toy, F, w);
    int views_ok = 1;
    for (int u = 0; u < TOY_NU; u++)
        for (int i = 0; i < toy.unit_n[u]; i++) {
            int t = toy.unit_tensors[u][i];
            size_t toff = 0;
            for (int k = 0; k < t; k++) toff += toy.t[k].numel;
            if (memcmp(w + off, got + toff, toy.t[t].numel * 4) != 0) views_ok = 0;
            off += toy.t[t].numel * 4;
        }
    check(views_ok, "cross: working weights after the load are not the loaded master");
    free(w);
    // m and v travelled too: save again here and compare all three states
    snprintf(again, sizeof again, "%s/cross_np%d", base, W);
    check(zero_save(z, again, SAVE_AT, NULL, 0) == 0, "cross: re-save failed");
    if (comm->rank == 0) {
        static const char *kind[3] = {"master", "m", "v"};
        for (int k = 0; k < 3; k++) {
            int ok = zero_consolidate_state(src, SAVE_AT, k, a, N) == 0 && zero_consolidate_state(again, SAVE_AT, k, b, N) == 0;
            check(ok && memcmp(a, b, N * sizeof(float)) == 0, "cross: %s of the re-saved checkpoint differs", kind[k]);
        }
        printf("  cross: 4 ranks stage 3 -> %d rank%s stage %d: master %s; master, m, v identical after a re-save\n", W,
               W == 1 ? "" : "s", V.stage, same ? "identical" : "DIFFERENT");
    }
    // training goes on from there
    toy_train(z, &toy, comm->rank, W, 1, F, F, SAVE_AT, SAVE_AT + 2);
    zero_free(z);
    // the fp32 checkpoint into a run with bf16 working weights: loaded, and said (the shell checks the line)
    Variant Vbf = {"cross bf16", V.stage, 1, 4096, 0, 0, BF, BF};
    z = make(comm, &toy, &Vbf);
    check(zero_load(z, src, SAVE_AT, &e, sizeof e) == 0, "cross: loading the fp32 checkpoint into a bf16 run failed");
    toy_gather_all(z, &toy, got);
    check(memcmp(got, want, N * sizeof(float)) == 0, "cross: the fp32 master loaded into a bf16 run differs");
    zero_free(z);
    if (W == 1) {
        // consolidation (no MPI involved) of the stage-3 checkpoint equals the stage-0
        // run's gathered master at the same step and world (accum 1: bit-identical)
        check(zero_consolidate(src, SAVE_AT, a, N) == 0, "consolidate: failed");
        path_of(path, sizeof path, base, 4, "s0", "at_save.f32");
        check(read_file(path, b, N * sizeof(float)) == 0, "reading %s", path);
        int eq0 = memcmp(a, b, N * sizeof(float)) == 0, eq3 = memcmp(a, want, N * sizeof(float)) == 0;
        check(eq0, "consolidate: stage-3 checkpoint differs from the stage-0 run's master");
        check(eq3, "consolidate: stage-3 checkpoint differs from its own run's gathered master");
        check(zero_consolidate(src, SAVE_AT, a, N - 1) == -1, "consolidate: a wrong output size was accepted");
        ZeroCheckpointInfo info;
        int ok = zero_checkpoint_info(src, -1, &info) == 0;
        check(ok && info.world == 4 && info.stage == 3 && info.step == SAVE_AT && info.last_t == SAVE_AT &&
                  info.num_tensors == TOY_NT && info.numel_total == N && info.extra_bytes == sizeof(Extra),
              "consolidate: checkpoint info is wrong");
        for (int t = 0; ok && t < TOY_NT; t++)
            check(!strcmp(info.names[t], toy.t[t].name) && info.numel[t] == toy.t[t].numel, "info: tensor %d", t);
        if (ok) zero_checkpoint_info_free(&info);
        printf("  consolidate: 4-rank stage-3 checkpoint == stage-0 run's master: %s; == its own run's: %s\n",
               eq0 ? "yes" : "NO", eq3 ? "yes" : "NO");
    }
    free(got); free(want); free(a); free(b);
    return 0;
}

// ---------------------------------------------------------------- refusals

static void copy_ckpt(const char *from_dir, const char *to_dir, int world) {
    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s/zero_%d", to_dir, SAVE_AT);
    char cmd[8600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", a);
    if (system(cmd) != 0) fprintf(stderr, "mkdir %s failed\n", a);
    const char *files[] = {"manifest.json", "extra.bin"};
    for (int i = 0; i < 2 + world; i++) {
        char name[64];
        if (i < 2) snprintf(name, sizeof name, "%s", files[i]);
        else snprintf(name, sizeof name, "rank_%05d.bin", i - 2);
        snprintf(a, sizeof a, "%s/zero_%d/%s", from_dir, SAVE_AT, name);
        snprintf(b, sizeof b, "%s/zero_%d/%s", to_dir, SAVE_AT, name);
        check(copy_file(a, b) == 0, "copying %s", a);
    }
    snprintf(a, sizeof a, "%s/latest_zero", from_dir);
    snprintf(b, sizeof b, "%s/latest_zero", to_dir);
    check(copy_file(a, b) == 0, "copying %s", a);
}

static void expect_refused(Zero *z, const Toy *toy, const float *before, const char *dir, void *extra, size_t eb,
                           const char *what) {
    size_t N = toy_numel_total(toy);
    float *after = malloc(N * sizeof(float));
    int rc = zero_load(z, dir, -1, extra, eb);
    check(rc == -1, "errors: %s: zero_load returned %d", what, rc);
    toy_gather_all(z, toy, after);
    check(memcmp(before, after, N * sizeof(float)) == 0, "errors: %s: the refused load changed the weights", what);
    free(after);
}

static int run_errors(ZeroComm *comm, const char *base) {
    Toy toy;
    toy_table(&toy);
    const int W = comm->world;
    const size_t N = toy_numel_total(&toy);
    char src[4096], dir[4096], path[4200];
    path_of(src, sizeof src, base, W, "s2", NULL);
    const Variant V = {"s2", 2, 2, 1000, 0, 0, F, F};
    float *before = malloc(N * sizeof(float));
    Extra e;

    // a different model: one tensor one element longer
    Toy other;
    toy_table(&other);
    other.t[TOY_NT - 2].numel = TOY_D + 1;   // "c"
    Zero *z = make(comm, &other, &V);
    int rc = zero_load(z, src, -1, NULL, 0);
    check(rc == -1, "errors: a checkpoint of another model was accepted (%d)", rc);
    zero_free(z);

    // rank files of another run (same model, world and step label, other weights), and of
    // another step of one run (saved at SAVE_AT and SAVE_AT + 1 in one folder)
    char other_run[4096], steps[4096];
    Extra e0 = extra_for(W, &V);
    snprintf(other_run, sizeof other_run, "%s/other_run", base);
    z = make(comm, &toy, &V);
    toy_train(z, &toy, comm->rank, W, 2, F, F, 0, SAVE_AT + 1);
    check(zero_save(z, other_run, SAVE_AT, &e0, sizeof e0) == 0, "errors: saving %s", other_run);
    if (comm->rank == 0) printf("  ids: other run %s\n", zero_run_id(z));
    zero_free(z);
    snprintf(steps, sizeof steps, "%s/two_steps", base);
    z = make(comm, &toy, &V);
    toy_train(z, &toy, comm->rank, W, 2, F, F, 0, SAVE_AT);
    check(zero_save(z, steps, SAVE_AT, &e0, sizeof e0) == 0, "errors: saving %s step %d", steps, SAVE_AT);
    toy_train(z, &toy, comm->rank, W, 2, F, F, SAVE_AT, SAVE_AT + 1);
    check(zero_save(z, steps, SAVE_AT + 1, &e0, sizeof e0) == 0, "errors: saving %s step %d", steps, SAVE_AT + 1);
    if (comm->rank == 0) printf("  ids: two-step run %s\n", zero_run_id(z));
    zero_free(z);
    if (comm->rank == 0) {
        ZeroCheckpointInfo info;
        check(zero_checkpoint_info(src, -1, &info) == 0, "errors: zero_checkpoint_info of %s", src);
        printf("  ids: checkpoint run %s\n", info.run_id);
        zero_checkpoint_info_free(&info);
    }

    z = make(comm, &toy, &V);
    toy_train(z, &toy, comm->rank, W, 2, F, F, 0, 1);   // weights unlike the checkpoint's
    toy_gather_all(z, &toy, before);
    if (comm->rank == 0) {
        snprintf(dir, sizeof dir, "%s/bad_corrupt", base);
        copy_ckpt(src, dir, W);
        snprintf(path, sizeof path, "%s/zero_%d/rank_%05d.bin", dir, SAVE_AT, W - 1);
        FILE *f = fopen(path, "r+b");
        long size = 0;
        if (f && fseek(f, 0, SEEK_END) == 0) size = ftell(f);
        int c = -1;
        if (f && fseek(f, size / 2, SEEK_SET) == 0) c = fgetc(f);
        if (f && c >= 0 && fseek(f, size / 2, SEEK_SET) == 0) fputc(c ^ 0x10, f);   // one bit in the data
        check(f && c >= 0, "errors: could not flip a byte of %s", path);
        if (f) fclose(f);

        snprintf(dir, sizeof dir, "%s/bad_trunc", base);
        copy_ckpt(src, dir, W);
        snprintf(path, sizeof path, "%s/zero_%d/rank_00000.bin", dir, SAVE_AT);
        struct stat st;
        check(stat(path, &st) == 0 && truncate(path, st.st_size - 7) == 0, "errors: truncating %s", path);

        snprintf(dir, sizeof dir, "%s/bad_missing", base);
        copy_ckpt(src, dir, W);
        snprintf(path, sizeof path, "%s/zero_%d/rank_%05d.bin", dir, SAVE_AT, W - 1);
        check(remove(path) == 0, "errors: removing %s", path);

        snprintf(dir, sizeof dir, "%s/bad_manifest", base);
        copy_ckpt(src, dir, W);
        snprintf(path, sizeof path, "%s/zero_%d/manifest.json", dir, SAVE_AT);
        check(write_file(path, "{\"format\": \"zero-sharded", 24) == 0, "errors: writing %s", path);

        // the last rank's file swapped for another run's, or for the next step's of its run
        snprintf(dir, sizeof dir, "%s/bad_other_run", base);
        copy_ckpt(src, dir, W);
        char from[4300];
        snprintf(from, sizeof from, "%s/zero_%d/rank_%05d.bin", other_run, SAVE_AT, W - 1);
        snprintf(path, sizeof path, "%s/zero_%d/rank_%05d.bin", dir, SAVE_AT, W - 1);
        check(copy_file(from, path) == 0, "errors: copying %s", from);
        snprintf(dir, sizeof dir, "%s/bad_other_step", base);
        copy_ckpt(steps, dir, W);
        snprintf(path, sizeof path, "%s/latest_zero", dir);
        check(write_file(path, "3\n", 2) == 0, "errors: writing %s", path);
        snprintf(from, sizeof from, "%s/zero_%d/rank_%05d.bin", steps, SAVE_AT + 1, W - 1);
        snprintf(path, sizeof path, "%s/zero_%d/rank_%05d.bin", dir, SAVE_AT, W - 1);
        check(copy_file(from, path) == 0, "errors: copying %s", from);

        // a save that died before its manifest: latest_zero still names the old one
        snprintf(dir, sizeof dir, "%s/bad_partial", base);
        copy_ckpt(src, dir, W);
        snprintf(path, sizeof path, "%s/zero_9", dir);
        mkdir(path, 0755);
        snprintf(path, sizeof path, "%s/zero_9/rank_00000.bin.tmp.12345", dir);
        check(write_file(path, "half", 4) == 0, "errors: writing %s", path);
    }
    barrier(comm);
    snprintf(dir, sizeof dir, "%s/bad_corrupt", base);
    expect_refused(z, &toy, before, dir, &e, sizeof e, "corrupt rank file");
    snprintf(dir, sizeof dir, "%s/bad_trunc", base);
    expect_refused(z, &toy, before, dir, &e, sizeof e, "truncated rank file");
    snprintf(dir, sizeof dir, "%s/bad_missing", base);
    expect_refused(z, &toy, before, dir, &e, sizeof e, "missing rank file");
    snprintf(dir, sizeof dir, "%s/bad_manifest", base);
    expect_refused(z, &toy, before, dir, &e, sizeof e, "malformed manifest");
    snprintf(dir, sizeof dir, "%s/bad_other_run", base);
    expect_refused(z, &toy, before, dir, &e, sizeof e, "a rank file of another run");
    snprintf(dir, sizeof dir, "%s/bad_other_step", base);
    expect_refused(z, &toy, before, dir, &e, sizeof e, "a rank file of another step");
    expect_refused(z, &toy, before, src, &e, sizeof e + 1, "wrong extra size");
    snprintf(dir, sizeof dir, "%s/nothing_here", base);
    check(zero_latest(dir) == -1, "errors: zero_latest of an empty folder is %d", zero_latest(dir));
    expect_refused(z, &toy, before, dir, NULL, 0, "no checkpoint");
    snprintf(dir, sizeof dir, "%s/bad_latest", base);
    if (comm->rank == 0) {
        mkdir(dir, 0755);
        snprintf(path, sizeof path, "%s/latest_zero", dir);
        check(write_file(path, "step three\n", 11) == 0, "errors: writing %s", path);
    }
    barrier(comm);
    check(zero_latest(dir) == -2, "errors: zero_latest of a malformed latest_zero is %d, not -2", zero_latest(dir));
    expect_refused(z, &toy, before, dir, NULL, 0, "malformed latest_zero");
    snprintf(dir, sizeof dir, "%s/bad_partial", base);
    check(zero_latest(dir) == SAVE_AT, "errors: an interrupted save moved latest_zero to %d", zero_latest(dir));
    check(zero_load(z, dir, -1, &e, sizeof e) == 0, "errors: the checkpoint before an interrupted save does not load");
    check(zero_load(z, steps, SAVE_AT, &e, sizeof e) == 0, "errors: the two-step run's own step %d does not load", SAVE_AT);
    // a save that cannot be written fails on every rank and publishes nothing
    rc = zero_save(z, "/proc/zero_cannot_write_here", 5, NULL, 0);
    check(rc == -1, "errors: a save into /proc returned %d", rc);
    zero_free(z);
    free(before);
    if (comm->rank == 0) printf("  errors: every refusal returned -1 on every rank and left the weights alone\n");
    return 0;
}

// ---------------------------------------------------------------- skipped steps

// One optimizer step of the toy model (step 0-based). poison: rank 0 writes a NaN into a
// gradient of unit 1 in the first micro-step; reject: zero_step_maybe_skip's skip.
static float toy_step(Zero *z, const Toy *toy, int rank, int W, const Variant *V, int step, int poison, int reject) {
    static ToyActs A;
    float inv = 1.0f / (float)(W * V->accum * TOY_B);
    zero_begin_step(z, V->accum);
    for (int micro = 0; micro < V->accum; micro++) {
        toy_load_data(&A, step, micro, rank, W, V->accum);
        for (int u = 0; u < TOY_NU; u++) {
            const ZeroUnitView *v = zero_fetch(z, u, 0);
            float *p[3];
            toy_upcast(toy, u, v->params, V->pdt, p);
            toy_forward_unit(u, p, &A);
            zero_release(z, u, 0);
        }
        for (int u = TOY_NU - 1; u >= 0; u--) {
            const ZeroUnitView *v = zero_fetch(z, u, 1);
            toy_run_backward(toy, u, v->params, v->grads, V->pdt, V->gdt, &A, inv);
            if (poison && rank == 0 && micro == 0 && u == 1) {
                if (V->gdt == F) ((float *)v->grads[0])[5] = NAN;
                else ((uint16_t *)v->grads[0])[5] = 0x7fc0;   // bf16 NaN
            }
            zero_grads_ready(z, u);
            zero_release(z, u, 1);
        }
    }
    ZeroStepArgs a = {TOY_LR, TOY_B1, TOY_B2, TOY_EPS, TOY_WD, TOY_CLIP, step + 1};
    return zero_step_maybe_skip(z, &a, reject);
}

// What a skipped step must leave alone: the gathered master, the working weights (bf16:
// their rounding), and (saved, consolidated by rank 0) AdamW m and v and the saved t.
typedef struct {
    float *master, *m, *v;
    unsigned char *work;
    int last_t;
} ToyState;

static void capture(Zero *z, const Toy *toy, const Variant *V, int rank, const char *dir, int step, ToyState *st) {
    size_t N = toy_numel_total(toy);
    st->master = malloc(N * sizeof(float));
    st->m = malloc(N * sizeof(float));
    st->v = malloc(N * sizeof(float));
    st->work = malloc(views_bytes(toy, V->pdt));
    st->last_t = -1;
    toy_gather_all(z, toy, st->master);
    views(z, toy, V->pdt, st->work);
    check(zero_save(z, dir, step, NULL, 0) == 0, "skip %s: saving %s", V->name, dir);
    if (rank == 0) {
        ZeroCheckpointInfo info;
        check(zero_consolidate_state(dir, step, 1, st->m, N) == 0 && zero_consolidate_state(dir, step, 2, st->v, N) == 0 &&
              zero_checkpoint_info(dir, step, &info) == 0, "skip %s: reading back %s", V->name, dir);
        st->last_t = info.last_t;
        zero_checkpoint_info_free(&info);
    }
}

static int same_state(const Toy *toy, const Variant *V, int rank, const ToyState *a, const ToyState *b) {
    size_t N = toy_numel_total(toy);
    int same = memcmp(a->master, b->master, N * sizeof(float)) == 0 && memcmp(a->work, b->work, views_bytes(toy, V->pdt)) == 0;
    if (rank == 0)
        same = same && memcmp(a->m, b->m, N * sizeof(float)) == 0 && memcmp(a->v, b->v, N * sizeof(float)) == 0 &&
               a->last_t == b->last_t;
    return same;
}

static void release_state(ToyState *st) {
    free(st->master); free(st->m); free(st->v); free(st->work);
}

static int run_skip(ZeroComm *comm, const char *base) {
    Toy toy;
    toy_table(&toy);
    const int W = comm->world, R = comm->rank;
    for (int vi = 0; vi < NVAR; vi++) {
        const Variant *V = &variants[vi];
        char dir[4096];
        ToyState s0, s1, s2, s3;
        Zero *z = make(comm, &toy, V);
        toy_train(z, &toy, R, W, V->accum, V->pdt, V->gdt, 0, 2);
        snprintf(dir, sizeof dir, "%s/skip_np%d_%s_a", base, W, V->name);
        capture(z, &toy, V, R, dir, 2, &s0);
        float n1 = toy_step(z, &toy, R, W, V, 2, 1, 0);   // NaN gradient on rank 0
        snprintf(dir, sizeof dir, "%s/skip_np%d_%s_b", base, W, V->name);
        capture(z, &toy, V, R, dir, 3, &s1);
        float n2 = toy_step(z, &toy, R, W, V, 3, 0, 1);   // finite, rejected by the caller
        snprintf(dir, sizeof dir, "%s/skip_np%d_%s_c", base, W, V->name);
        capture(z, &toy, V, R, dir, 4, &s2);
        float n3 = toy_step(z, &toy, R, W, V, 4, 0, 0);   // applied
        snprintf(dir, sizeof dir, "%s/skip_np%d_%s_d", base, W, V->name);
        capture(z, &toy, V, R, dir, 5, &s3);
        check(isnan(n1), "skip %s: a NaN gradient gave the norm %g", V->name, n1);
        check(same_state(&toy, V, R, &s0, &s1), "skip %s: the step with a NaN norm changed the state", V->name);
        check(isfinite(n2) && same_state(&toy, V, R, &s0, &s2), "skip %s: a rejected step (norm %g) changed the state",
              V->name, n2);
        check(isfinite(n3) && memcmp(s0.master, s3.master, toy_numel_total(&toy) * sizeof(float)) != 0 &&
              (R != 0 || s3.last_t == 5), "skip %s: the step after the skipped ones did not train (norm %g, t %d)", V->name,
              n3, s3.last_t);
        if (R == 0)
            printf("  skip %-5s stage %d: NaN norm (%g) and a rejected step left master, m, v, working weights and t=%d "
                   "alone; the next step trained (t=%d)\n", V->name, V->stage, n1, s2.last_t, s3.last_t);
        release_state(&s0); release_state(&s1); release_state(&s2); release_state(&s3);
        zero_free(z);
    }
    return 0;
}

// ---------------------------------------------------------------- report and dry run

static double jnum(const cJSON *o, const char *a, const char *b, const char *c) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
    if (b) x = cJSON_GetObjectItemCaseSensitive(x, b);
    if (c) x = cJSON_GetObjectItemCaseSensitive(x, c);
    return cJSON_IsNumber(x) ? x->valuedouble : -1.0;
}

static int has_key_containing(const cJSON *o, const char *part) {
    for (const cJSON *c = o ? o->child : NULL; c; c = c->next)
        if (c->string && strstr(c->string, part)) return 1;
    return 0;
}

static cJSON *parse_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return cJSON_Parse(buf);
}

static int figures_equal(const ZeroFigures *a, const ZeroFigures *b, char *why, size_t cap) {
    #define SAME(field) if (a->field != b->field) { snprintf(why, cap, "%s: %llu vs %llu", #field, \
        (unsigned long long)a->field, (unsigned long long)b->field); return 0; }
    for (int k = 0; k < ZERO_USE_KINDS; k++) { SAME(device[k]); SAME(host[k]); }
    SAME(act_device); SAME(act_host); SAME(param_pool_elems); SAME(param_pool_peak); SAME(grad_pool_elems);
    SAME(grad_pool_peak); SAME(gathers); SAME(prefetches); SAME(gather_hits); SAME(evictions); SAME(wasted_gathers);
    SAME(buckets); SAME(local_size); SAME(num_nodes); SAME(grad_accum); SAME(steps);
    for (int op = 0; op < ZERO_NUM_COLLS; op++) { SAME(calls[op]); SAME(intra_bytes[op]); SAME(inter_bytes[op]); }
    #undef SAME
    return 1;
}

// What this rank sent since `before`, split into gathers, all-reduces and the rest.
typedef struct { uint64_t gather, allreduce, allreduce_calls, other; } Sent;

static Sent sent_since(const ZeroComm *comm, const ZeroCollBytes *before) {
    Sent s = {0, 0, 0, 0};
    for (int op = 0; op < ZERO_COLL_NUM; op++) {
        uint64_t b = comm->sent[op].intra_bytes + comm->sent[op].inter_bytes - before[op].intra_bytes - before[op].inter_bytes;
        if (op == ZERO_COLL_GATHER) s.gather += b;
        else if (op == ZERO_COLL_ALL_REDUCE) { s.allreduce += b; s.allreduce_calls += comm->sent[op].calls - before[op].calls; }
        else s.other += b;
    }
    return s;
}

// The metadata exchanges of zero_report_write and zero_save: rank 0 gathers a fixed
// number of doubles from each rank and every rank agrees on failure with one double, so
// a rank sends O(1) bytes plus 8 bytes per peer per agreement, never world-sized slots.
static void check_exchange(ZeroComm *comm, const char *what, Sent s, uint64_t payload_max) {
    const int W = comm->world, R = comm->rank;
    uint64_t peers = (uint64_t)W - 1;
    check(s.other == 0, "%s: rank %d sent %llu bytes by collectives other than a gather and all-reduces", what, R,
          (unsigned long long)s.other);
    check(s.allreduce == s.allreduce_calls * 8 * peers && s.allreduce_calls <= 2,
          "%s: rank %d sent %llu bytes in %llu all-reduces; one-double agreements send %llu each", what, R,
          (unsigned long long)s.allreduce, (unsigned long long)s.allreduce_calls, (unsigned long long)(8 * peers));
    if (R == 0 || W == 1) check(s.gather == 0, "%s: rank %d (the root) sent %llu gather bytes", what, R, (unsigned long long)s.gather);
    else check(s.gather > 0 && s.gather <= payload_max, "%s: rank %d sent %llu gather bytes (at most %llu expected)", what, R,
               (unsigned long long)s.gather, (unsigned long long)payload_max);
    // every non-root rank sends the same payload: compare with rank 1's
    double g[2] = {R == 1 ? (double)s.gather : 0.0, R >= 1 ? (double)s.gather : 0.0};
    zero_mpi_allreduce_sum_f64(comm, g, 2, "exchange check");
    check(W < 2 || g[1] == g[0] * (W - 1), "%s: non-root ranks sent different gather payloads", what);
    printf("  exchange %s: rank %d of %d sent %llu B: gather %llu B + %llu agreement(s) of one double, %llu B each "
           "(the same payload in world-sized all-reduce slots: %llu B; at 1000 ranks %llu B)\n", what, R, W,
           (unsigned long long)(s.gather + s.allreduce), (unsigned long long)s.gather, (unsigned long long)s.allreduce_calls,
           (unsigned long long)(8 * peers), (unsigned long long)((uint64_t)g[0] * W * peers),
           (unsigned long long)((uint64_t)g[0] * 1000 * 999));
    fflush(stdout);
}

static int run_report(ZeroComm *comm, const char *base) {
    Toy toy;
    toy_table(&toy);
    const int W = comm->world, G = 2, S = 3;
    const int node_size = W == 4 ? 2 : 0;
    const Variant R[] = {
        {"r0", 0, G, 4096, 0, 0, F, F}, {"r1", 1, G, 4096, 0, 0, F, F}, {"r2", 2, G, 1000, 0, 0, F, F},
        {"r3", 3, G, 1000, 0, 40, F, F}, {"r0bf", 0, G, 4096, 0, 0, BF, BF}, {"r1bf", 1, G, 4096, 0, 0, BF, BF},
        {"r2bf", 2, G, 1000, 0, 0, BF, BF}, {"r3bf", 3, G, 1000, 0, 40, BF, BF}, {"r3pf", 3, G, 1000, 1500, 0, F, F},
    };
    const int nr = (int)(sizeof R / sizeof R[0]);
    ZeroPrediction *pred = calloc((size_t)W, sizeof(ZeroPrediction));
    char extra[128];
    snprintf(extra, sizeof extra, "{\"trainer\": \"toy\", \"ranks_check\": %d}", W);
    if (comm->rank == 0) printf("  report, %d rank%s: rank 0 device bytes  (model states = A*(Psi+pad) + B*(Psi+pad)/N + pools)\n", W, W == 1 ? "" : "s");
    for (int vi = 0; vi < nr; vi++) {
        const Variant *V = &R[vi];
        ZeroConfig cfg;
        config_of(&cfg, V, node_size);
        Zero *z = zero_init(toy.t, TOY_NT, TOY_NU, &cfg, comm, host_b, toy_init, &toy);
        check(z != NULL, "%s: zero_init", V->name);
        if (!z) continue;
        zero_report_set_activation_bytes(z, 1000 + (size_t)comm->rank, 77);
        if (vi == 0 && W == 4) zero_report_print(z);
        toy_train(z, &toy, comm->rank, W, V->accum, V->pdt, V->gdt, 0, S);
        char path[4200], dry[4200];
        snprintf(path, sizeof path, "%s/report_np%d_%s.json", base, W, V->name);
        snprintf(dry, sizeof dry, "%s/dry_np%d_%s.json", base, W, V->name);
        ZeroCollBytes before[ZERO_COLL_NUM];
        memcpy(before, comm->sent, sizeof before);
        check(zero_report_write(z, path, extra) == 0, "%s: zero_report_write", V->name);
        if (vi == 0) {
            // the figures as doubles: at most one per 4 bytes of ZeroFigures
            check_exchange(comm, "report", sent_since(comm, before), 2 * sizeof(ZeroFigures));
            char dir[4200];
            snprintf(dir, sizeof dir, "%s/exchange_np%d", base, W);
            memcpy(before, comm->sent, sizeof before);
            check(zero_save(z, dir, S, NULL, 0) == 0, "%s: zero_save", V->name);
            check_exchange(comm, "save", sent_since(comm, before), 2 * sizeof(double));   // a file's size and CRC
        }
        // the dry run, on every rank, for every rank
        check(zero_predict(toy.t, TOY_NT, TOY_NU, &cfg, W, G, S, pred) == 0, "%s: zero_predict", V->name);
        for (int r = 0; r < W; r++) { pred[r].act_device = 1000 + (size_t)r; pred[r].act_host = 77; }
        ZeroFigures live;
        zero_figures(z, &live);
        char why[256] = "";
        check(figures_equal(&live, &pred[comm->rank], why, sizeof why), "%s: dry run differs from the live figures: %s",
              V->name, why);
        ZeroStats st;
        zero_stats(z, &st);
        if (comm->rank == 0) {
            check(zero_predict_write(dry, toy.t, TOY_NT, TOY_NU, &cfg, W, G, S, pred, extra) == 0, "%s: zero_predict_write",
                  V->name);
            cJSON *js = parse_file(path), *jd = parse_file(dry);
            check(js && jd, "%s: the reports do not parse", V->name);
            const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(js, "ranks");
            check(cJSON_GetArraySize(ranks) == W, "%s: %d rank entries", V->name, cJSON_GetArraySize(ranks));
            check(jnum(js, "stage", NULL, NULL) == V->stage && jnum(js, "world_size", NULL, NULL) == W &&
                      jnum(js, "ranks_check", NULL, NULL) == W && jnum(js, "steps", NULL, NULL) == S,
                  "%s: top-level fields", V->name);
            for (int r = 0; r < W && ranks; r++) {
                const cJSON *e = cJSON_GetArrayItem(ranks, r);
                const ZeroFigures *p = &pred[r];
                const cJSON *dev = cJSON_GetObjectItemCaseSensitive(e, "device");
                check(has_key_containing(dev, "optimizer") && cJSON_GetObjectItemCaseSensitive(dev, "optimizer_states"),
                      "%s: no optimizer key", V->name);
                check(jnum(e, "device", "parameters", NULL) == (double)p->device[ZERO_USE_PARAMS] &&
                          jnum(e, "device", "gradients", NULL) == (double)p->device[ZERO_USE_GRADS] &&
                          jnum(e, "device", "optimizer_states", NULL) ==
                              (double)(p->device[ZERO_USE_MASTER] + p->device[ZERO_USE_OPTIM]) &&
                          jnum(e, "device", "activations", NULL) == (double)(1000 + r) &&
                          jnum(e, "device", "buffers", NULL) == (double)p->device[ZERO_USE_BUFFERS] &&
                          jnum(e, "host", "activations", NULL) == 77 && jnum(e, "host", "parameters", NULL) == 0,
                      "%s: rank %d memory in the report differs from the dry run", V->name, r);
                for (int op = 0; op < ZERO_COLL_NUM; op++) {
                    const char *on = zero_coll_name((ZeroCollOp)op);
                    check(jnum(e, "sent_total", on, "intra_node_bytes") == (double)p->intra_bytes[op] &&
                              jnum(e, "sent_total", on, "inter_node_bytes") == (double)p->inter_bytes[op] &&
                              jnum(e, "sent_per_step", on, "intra_node_bytes") == (double)p->intra_bytes[op] / S &&
                              jnum(e, "sent_per_step", on, "inter_node_bytes") == (double)p->inter_bytes[op] / S,
                          "%s: rank %d %s bytes in the report differ from the dry run", V->name, r, on);
                }
            }
            const cJSON *e0 = cJSON_GetArrayItem(ranks, 0);
            check(jnum(e0, "device", "parameters", NULL) == (double)st.device[ZERO_USE_PARAMS] &&
                      jnum(e0, "device", "gradients", NULL) == (double)st.device[ZERO_USE_GRADS] &&
                      jnum(e0, "optimizer_states_split", "device_fp32_master", NULL) == (double)st.device[ZERO_USE_MASTER] &&
                      jnum(e0, "optimizer_states_split", "device_adam_m_v", NULL) == (double)st.device[ZERO_USE_OPTIM] &&
                      jnum(e0, "pools", "param_pool_elems", NULL) == (double)st.param_pool_elems &&
                      jnum(e0, "events", "gathers", NULL) == (double)st.gathers,
                  "%s: rank 0's report differs from zero_stats", V->name);
            // the dry-run file is the live one but for "source" and the seconds a step took
            if (js && jd) {
                cJSON_DeleteItemFromObjectCaseSensitive(js, "source");
                cJSON_DeleteItemFromObjectCaseSensitive(jd, "source");
                for (cJSON *e = cJSON_GetObjectItemCaseSensitive(js, "ranks")->child; e; e = e->next)
                    cJSON_DeleteItemFromObjectCaseSensitive(e, "seconds_per_step");
                for (cJSON *e = cJSON_GetObjectItemCaseSensitive(jd, "ranks")->child; e; e = e->next)
                    cJSON_DeleteItemFromObjectCaseSensitive(e, "seconds_per_step");
                check(cJSON_Compare(js, jd, 1), "%s: the dry-run JSON differs from the live report", V->name);
            }

            // The ZeRO formula with explicit padding: Psi real parameters, pad the zeros the
            // split adds; A bytes per parameter replicated, B per parameter sharded.
            const size_t pes = V->pdt == BF ? 2 : 4, ges = V->gdt == BF ? 2 : 4;
            size_t psi = 0, padded = 0, shard = 0, persist = 0, shared = 0, max_unit = 0, max_pool = 0;
            for (int t = 0; t < TOY_NT; t++) {
                ZeroSplit sp;
                zero_split(toy.t[t].numel, W, &sp);
                psi += sp.numel;
                padded += sp.padded;
                shard += sp.shard;
                if (V->stage == 3 && V->persist && sp.numel <= V->persist) persist += sp.padded;
                if (toy.t[t].num_units > 1) shared += sp.padded;
            }
            for (int u = 0; u < TOY_NU; u++) {
                size_t need = 0, pool = 0;
                for (int i = 0; i < toy.unit_n[u]; i++) {
                    ZeroSplit sp;
                    int t = toy.unit_tensors[u][i];
                    zero_split(toy.t[t].numel, W, &sp);
                    if (toy.t[t].num_units == 1) need += sp.padded;   // tied ones: in `shared`
                    if (!(V->stage == 3 && V->persist && sp.numel <= V->persist)) pool += sp.padded;
                }
                if (need > max_unit) max_unit = need;
                if (pool > max_pool) max_pool = pool;
            }
            const size_t pad = padded - psi;
            const size_t bucket = V->bucket < padded ? V->bucket : padded;
            // pool capacities are rounded up to 16 elements (aligned top placements)
            // ... and never above what the model can need: every gradient, every pooled tensor
            size_t gpool_elems = (bucket + 2 * max_unit + shared + 15) / 16 * 16;
            size_t ppool_elems = (max_pool + V->prefetch + 15) / 16 * 16;
            if (gpool_elems > padded) gpool_elems = padded;
            if (ppool_elems > padded - persist) ppool_elems = padded - persist;
            const size_t gpool = ges * gpool_elems;
            const size_t ppool = pes * (ppool_elems + persist);
            size_t A, B, pools;
            switch (V->stage) {
            case 0: A = pes + ges + 12 + (ges == 2 ? 4 : 0); B = 4; pools = 0; break;   // + fp32 reduced grads if bf16
            case 1: A = pes + ges; B = 4 + 12; pools = 0; break;
            case 2: A = pes; B = 4 + 12; pools = gpool; break;
            default: A = 0; B = 4 + 12; pools = gpool + ppool; break;   // bf16 rounded straight into the gather pool
            }
            size_t states = st.device[ZERO_USE_PARAMS] + st.device[ZERO_USE_GRADS] + st.device[ZERO_USE_MASTER] +
                            st.device[ZERO_USE_OPTIM];
            size_t formula = A * (psi + pad) + B * (psi + pad) / (size_t)W + pools;
            check((psi + pad) % (size_t)W == 0 && shard * (size_t)W == psi + pad, "%s: padding arithmetic", V->name);
            check(states == formula, "%s: model states %zu B, formula %zu*(%zu+%zu) + %zu*(%zu+%zu)/%d + %zu = %zu", V->name,
                  states, A, psi, pad, B, psi, pad, W, pools, formula);
            check(jnum(e0, "formula", "model_states_bytes", NULL) == (double)formula &&
                      jnum(e0, "model_states_bytes", NULL, NULL) == (double)states,
                  "%s: the report's formula disagrees", V->name);
            // bytes sent over the run (per peer, times peers), without prefetch the formula exactly
            size_t sp_ = 0;
            for (int t = 0; t < TOY_NT; t++) {
                ZeroSplit sp;
                zero_split(toy.t[t].numel, W, &sp);
                if (V->stage == 3 && V->persist && sp.numel <= V->persist) sp_ += sp.shard;
            }
            const uint64_t S = live.steps, peers = (uint64_t)W - 1;
            uint64_t a2a = S * (uint64_t)(V->stage <= 1 ? 1 : G) * shard * ges;   // stages 0-1: once per step
            uint64_t ag = V->stage == 3 ? (toy_stage3_gathered(&toy, W, V->persist, G, 1) +
                                           (S - 1) * toy_stage3_gathered(&toy, W, V->persist, G, 0) + S * sp_) * pes
                                        : S * shard * (V->stage == 0 ? 4 : pes);
            uint64_t got_ag = live.intra_bytes[0] + live.inter_bytes[0], got_a2a = live.intra_bytes[1] + live.inter_bytes[1];
            uint64_t per_step = S ? got_ag / S : 0, a2a_step = S ? got_a2a / S : 0;
            if (V->prefetch == 0)
                check(got_ag == ag * peers && got_a2a == a2a * peers,
                      "%s: bytes in %llu steps: all_gather %llu (formula %llu), all_to_all %llu (formula %llu)", V->name,
                      (unsigned long long)S, (unsigned long long)got_ag, (unsigned long long)(ag * peers),
                      (unsigned long long)got_a2a, (unsigned long long)(a2a * peers));
            else
                check(got_ag <= ag * peers, "%s: prefetch sent more than the no-prefetch formula", V->name);
            printf("    %-5s stage %d %s: params %6zu grads %6zu optimizer %6zu buffers %6zu | states %6zu = %2zu*(%zu+%zu) + "
                   "%2zu*(%zu+%zu)/%d + pools %5zu | paper %7.0f | sent/step: all_gather %6llu all_to_all %6llu B\n",
                   V->name, V->stage, V->pdt == BF ? "bf16" : "fp32", st.device[ZERO_USE_PARAMS], st.device[ZERO_USE_GRADS],
                   st.device[ZERO_USE_MASTER] + st.device[ZERO_USE_OPTIM], st.device[ZERO_USE_BUFFERS], states, A, psi, pad,
                   B, psi, pad, W, pools, jnum(e0, "formula", "paper_mixed_precision_bytes", NULL),
                   (unsigned long long)per_step, (unsigned long long)a2a_step);
            cJSON_Delete(js);
            cJSON_Delete(jd);
        }
        zero_free(z);
    }
    free(pred);
    return 0;
}

int main(int argc, char **argv) {
    ZeroComm *comm = zero_comm_init(&argc, &argv);
    if (!comm) return 1;
    rank_g = comm->rank;
    host_b = zero_backend_host(comm);
    if (!host_b) return 1;
    if (argc != 3) {
        if (comm->rank == 0) fprintf(stderr, "usage: %s save|resume|cross|errors|skip|report BASE\n", argv[0]);
        zero_comm_free(comm);
        return 2;
    }
    const char *mode = argv[1], *base = argv[2];
    int rc = 0;
    if (!strcmp(mode, "save")) rc = run_save(comm, base);
    else if (!strcmp(mode, "resume")) rc = run_resume(comm, base);
    else if (!strcmp(mode, "cross")) rc = run_cross(comm, base);
    else if (!strcmp(mode, "errors")) rc = run_errors(comm, base);
    else if (!strcmp(mode, "report")) rc = run_report(comm, base);
    else if (!strcmp(mode, "skip")) rc = run_skip(comm, base);
    else { fprintf(stderr, "unknown mode %s\n", mode); rc = 2; }
    double f[2] = {(double)fails, (double)passes};
    zero_mpi_allreduce_sum_f64(comm, f, 2, "test summary");
    if (comm->rank == 0) printf("mpi_zero_ckpt %s: %d ranks, %.0f checks passed, %.0f failed\n", mode, comm->world, f[1], f[0]);
    zero_backend_host_free(host_b);
    zero_comm_free(comm);
    return rc ? rc : (f[0] > 0 ? 1 : 0);
}
