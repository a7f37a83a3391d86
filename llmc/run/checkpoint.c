// checkpoint.c: atomic, verified training checkpoints.
#include "checkpoint.h"

#include <glob.h>
#include <string.h>

#include "../atomic_file.h"
#include "../model/gpt2_model_file.h"
#include "../utils.h"

enum { HEADER_BYTES = 1024 };
#define CKPT_END 0x21444e45u // "END!"

// On-disk header (first bytes of the 1024-byte header block; the rest is zero).
typedef struct {
    uint64_t magic;
    uint32_t version, header_bytes;
    int32_t step, B, T, world;
    int32_t maxT, V, Vp, L, NH, C;
    uint64_t seed, data_epoch;
    int64_t data_next_window, tokens_per_step;
    uint64_t num_params;
} CkptHeader;

typedef struct {
    uint32_t crc; // CRC-32 of header and body
    uint32_t end_magic;
} CkptTrailer;

static void ckpt_path(char *buf, size_t n, const char *dir, const char *what, int step) {
    snprintf(buf, n, "%s/%s_%08d.bin", dir, what, step);
}

static long body_bytes(size_t n) { return (long)(HEADER_BYTES + 3 * n * sizeof(float)); }

int checkpoint_latest(const char *out_dir) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/latest", out_dir);
    FILE *f = fopen(path, "r");
    if (f == NULL) return -1;
    int step = -1;
    if (fscanf(f, "%d", &step) != 1 || step < 0) die("'%s' is corrupt: expected a step number", path);
    fclose(f);
    return step;
}

// Calls fn(path, step, ctx) for each OUT/KIND_SSSSSSSS.bin (model_final.bin is no step).
static void for_each_step(const char *out_dir, const char *kind, void (*fn)(const char *, int, void *), void *ctx) {
    char pattern[4096], fmt[32];
    snprintf(pattern, sizeof(pattern), "%s/%s_*.bin", out_dir, kind);
    snprintf(fmt, sizeof(fmt), "/%s_%%d.bin", kind);
    glob_t g;
    if (glob(pattern, 0, NULL, &g) != 0) return;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        const char *name = strrchr(g.gl_pathv[i], '/');
        int step;
        if (name && sscanf(name, fmt, &step) == 1) fn(g.gl_pathv[i], step, ctx);
    }
    globfree(&g);
}

static void remove_unless_kept(const char *path, int step, void *keep) {
    const int *k = (const int *)keep;
    if (step != k[0] && step != k[1]) remove(path);
}

// Removes ckpt/model files of steps other than keep_a and keep_b.
static void prune(const char *out_dir, int keep_a, int keep_b) {
    int keep[2] = {keep_a, keep_b};
    for_each_step(out_dir, "ckpt", remove_unless_kept, keep);
    for_each_step(out_dir, "model", remove_unless_kept, keep);
}

void checkpoint_model_path(char *buf, size_t len, const char *out_dir, int step) {
    if (step < 0) snprintf(buf, len, "%s/model_final.bin", out_dir);
    else ckpt_path(buf, len, out_dir, "model", step);
}

// The `keep` highest steps seen, highest first (-1: none yet).
typedef struct { int keep, top[8]; } TopSteps;

static void note_step(const char *path, int step, void *ctx) {
    (void)path;
    TopSteps *t = (TopSteps *)ctx;
    for (int i = 0; i < t->keep; i++) {
        if (step == t->top[i]) return;
        if (step > t->top[i]) {
            memmove(&t->top[i + 1], &t->top[i], (size_t)(t->keep - 1 - i) * sizeof(int));
            t->top[i] = step;
            return;
        }
    }
}

static void remove_below(const char *path, int step, void *lowest_kept) {
    if (step < *(const int *)lowest_kept) remove(path);
}

// Removes the model_SSSSSSSS.bin files of out_dir but those of the `keep` (1 to 8) highest steps.
static void prune_model_exports(const char *out_dir, int keep) {
    TopSteps t = {keep, {-1, -1, -1, -1, -1, -1, -1, -1}};
    for_each_step(out_dir, "model", note_step, &t);
    int lowest = t.top[t.keep - 1];
    for_each_step(out_dir, "model", remove_below, &lowest);
}

void checkpoint_export_model(const char *out_dir, int step, int rank, const GPT2Config *c, GPT2SliceFetch fetch,
                             void *ctx) {
    char path[4096];
    checkpoint_model_path(path, sizeof(path), out_dir, step);
    gpt2_model_file_export(rank == 0 ? path : NULL, c, GPT2_MODEL_FP32, fetch, ctx);
    if (rank != 0) return;
    if (step >= 0) prune_model_exports(out_dir, 2);
    printf("wrote %s\n", path);
}

void checkpoint_save(const char *out_dir, const TrainState *st, const float *params,
                     const float *m, const float *v, size_t n) {
    char path[4096];
    ckpt_path(path, sizeof(path), out_dir, "ckpt", st->step);
    unsigned char header[HEADER_BYTES] = {0};
    const GPT2Config *c = &st->config;
    CkptHeader h = {CKPT_MAGIC, CKPT_VERSION, HEADER_BYTES, st->step, st->B, st->T, st->world,
                    c->max_seq_len, c->vocab_size, c->padded_vocab_size, c->num_layers,
                    c->num_heads, c->channels, st->seed, st->data_epoch, st->data_next_window,
                    st->tokens_per_step, n};
    memcpy(header, &h, sizeof(h));
    AtomicFile af;
    atomic_file_open(&af, path);
    atomic_file_write(&af, header, sizeof(header));
    atomic_file_write(&af, params, n * sizeof(float));
    atomic_file_write(&af, m, n * sizeof(float));
    atomic_file_write(&af, v, n * sizeof(float));
    CkptTrailer tr = {af.crc, CKPT_END};
    atomic_file_write(&af, &tr, sizeof(tr));
    atomic_file_commit(&af);
    // Read back what reached the disk before anyone is told it exists.
    uint32_t disk = file_crc32(path, 0, body_bytes(n), NULL);
    if (disk != tr.crc)
        die("checkpoint '%s' failed verification: CRC %08x on disk, %08x written", path, disk, tr.crc);
    int previous = checkpoint_latest(out_dir);
    char latest[4096], text[32];
    snprintf(latest, sizeof(latest), "%s/latest", out_dir);
    int len = snprintf(text, sizeof(text), "%d\n", st->step);
    atomic_file_open(&af, latest);
    atomic_file_write(&af, text, (size_t)len);
    atomic_file_commit(&af);
    // The model file is an export: written after `latest` names the verified checkpoint,
    // so an export that fails (disk full, a bad path) never hides a good checkpoint.
    char model[4096];
    ckpt_path(model, sizeof(model), out_dir, "model", st->step);
    gpt2_model_file_write(model, c, params, GPT2_MODEL_FP32);
    prune(out_dir, st->step, previous);
}

void checkpoint_load(const char *out_dir, int step, TrainState *st, float *params, float *m,
                     float *v, size_t n) {
    char path[4096];
    ckpt_path(path, sizeof(path), out_dir, "ckpt", step);
    FILE *f = fopen_check(path, "rb");
    long size = file_size_check(f, path);
    if (size < HEADER_BYTES) die("checkpoint '%s' is truncated: %ld bytes", path, size);
    unsigned char header[HEADER_BYTES];
    fread_check(header, 1, HEADER_BYTES, f, path);
    CkptHeader h;
    memcpy(&h, header, sizeof(h));
    if (h.magic != CKPT_MAGIC) die("'%s' is not a training checkpoint (bad magic)", path);
    if (h.version != CKPT_VERSION) die("checkpoint '%s' has version %u, this build reads %d", path, h.version, CKPT_VERSION);
    if (h.num_params != n)
        die("checkpoint '%s' holds %llu parameters, the model has %zu (another model?)", path,
            (unsigned long long)h.num_params, n);
    long expect = body_bytes(n) + (long)sizeof(CkptTrailer);
    if (size != expect) die("checkpoint '%s' is %ld bytes, expected %ld (truncated?)", path, size, expect);
    fread_check(params, sizeof(float), n, f, path);
    fread_check(m, sizeof(float), n, f, path);
    fread_check(v, sizeof(float), n, f, path);
    CkptTrailer tr;
    fread_check(&tr, sizeof(tr), 1, f, path);
    fclose(f);
    if (tr.end_magic != CKPT_END) die("checkpoint '%s' has a damaged trailer", path);
    uint32_t crc = file_crc32(path, 0, body_bytes(n), NULL);
    if (crc != tr.crc) die("checkpoint '%s' is corrupt: CRC %08x, recorded %08x", path, crc, tr.crc);
    st->step = h.step;
    st->B = h.B;
    st->T = h.T;
    st->world = h.world;
    st->config = (GPT2Config){h.maxT, h.V, h.Vp, h.L, h.NH, h.C};
    st->seed = h.seed;
    st->data_epoch = h.data_epoch;
    st->data_next_window = h.data_next_window;
    st->tokens_per_step = h.tokens_per_step;
}

void checkpoint_check_compatible(const TrainState *s, const TrainState *now, const char *what) {
    if (memcmp(&s->config, &now->config, sizeof(GPT2Config)) != 0)
        die("%s: saved model is L=%d C=%d NH=%d V=%d maxT=%d, this run has L=%d C=%d NH=%d V=%d maxT=%d",
            what, s->config.num_layers, s->config.channels, s->config.num_heads, s->config.vocab_size,
            s->config.max_seq_len, now->config.num_layers, now->config.channels,
            now->config.num_heads, now->config.vocab_size, now->config.max_seq_len);
    if (s->T != now->T) die("%s: saved with sequence length %d, this run uses %d", what, s->T, now->T);
    if (s->tokens_per_step != now->tokens_per_step)
        die("%s: saved with %lld tokens per step, this run uses %lld (change -d/-b to match)", what,
            (long long)s->tokens_per_step, (long long)now->tokens_per_step);
    if (s->seed != now->seed)
        die("%s: saved with seed %llu, this run uses %llu", what, (unsigned long long)s->seed,
            (unsigned long long)now->seed);
}
