// checkpoint.c: atomic, verified training checkpoints.
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../atomic_file.h"
#include "../model/gpt2_model_file.h"
#include "../utils.h"

enum { HEADER_BYTES = 4096, HEADER_BYTES_V1 = 1024 };
#define CKPT_END 0x21444e45u // "END!"

// On-disk header (first bytes of the 4096-byte header block; the rest is zero). Every
// member is naturally aligned with no padding between them, as it is stored.
typedef struct {
    uint64_t magic;
    uint32_t version, header_bytes;
    int32_t step, B, T, world;
    int32_t maxT, V, Vp, L, NH, C;
    uint64_t seed, data_epoch;
    int64_t data_next_window, tokens_per_step;
    uint64_t num_params;
    int32_t last_t, reserved;
    DataIdentity data;
    StepSkipState skip;
} CkptHeader;
_Static_assert(sizeof(CkptHeader) <= HEADER_BYTES, "the checkpoint header outgrew its block");

typedef struct {
    uint32_t crc; // CRC-32 of header and body
    uint32_t end_magic;
} CkptTrailer;

static void ckpt_path(char *buf, size_t n, const char *dir, const char *what, int step) {
    snprintf(buf, n, "%s/%s_%08d.bin", dir, what, step);
}

static long body_bytes(size_t n) { return (long)(HEADER_BYTES + 3 * n * sizeof(float)); }

// What a file of this st_mode is, for a message.
static const char *file_kind(mode_t mode) {
    return S_ISLNK(mode) ? "a symbolic link" : S_ISDIR(mode) ? "a folder" : S_ISFIFO(mode) ? "a FIFO (named pipe)"
         : S_ISCHR(mode) ? "a character device" : S_ISBLK(mode) ? "a block device" : S_ISSOCK(mode) ? "a socket"
         : "not a regular file";
}

// The step a pointer file OUT/NAME (latest, latest_zero) names: -1 when it is missing, -2
// when it is malformed or cannot be read, with the reason in why (if not NULL). Only a
// regular file is read: a symbolic link is not followed (one to /dev/zero reads without
// end), and a FIFO opens without waiting for a writer (O_NONBLOCK) and is refused.
static int read_step_file(const char *out_dir, const char *name, char *why, size_t cap) {
    char path[4096], scratch[8];
    if (why == NULL) why = scratch, cap = sizeof(scratch);
    snprintf(path, sizeof(path), "%s/%s", out_dir, name);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 && errno == ENOENT) return -1;
    if (fd < 0) {
        int e = errno;
        char to[256];
        ssize_t k = e == ELOOP && lstat(path, &st) == 0 && S_ISLNK(st.st_mode) ? readlink(path, to, sizeof(to) - 1) : -1;
        if (k >= 0)
            snprintf(why, cap, "'%s' is a symbolic link (to %.*s), which is not followed (the trainer writes a regular "
                     "file there)", path, (int)k, to);
        else snprintf(why, cap, "cannot open '%s': %s", path, strerror(e));
        return -2;
    }
    if (fstat(fd, &st) != 0) {
        snprintf(why, cap, "cannot examine '%s': %s", path, strerror(errno));
        close(fd);
        return -2;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, cap, "'%s' is %s, not a regular file holding a step number", path, file_kind(st.st_mode));
        close(fd);
        return -2;
    }
    char text[32] = {0};   // what the writer puts there: the step in decimal, then a newline
    ssize_t got;
    do got = read(fd, text, sizeof(text) - 1);
    while (got < 0 && errno == EINTR);
    char more;
    int longer = got > 0 && read(fd, &more, 1) == 1;
    close(fd);
    char *end;
    errno = 0;
    long step = strtol(text, &end, 10);
    if (longer || got <= 0 || end == text || text[0] < '0' || text[0] > '9' || errno != 0 || step > INT_MAX ||
        (strcmp(end, "\n") != 0 && *end != '\0')) {
        snprintf(why, cap, "'%s' is corrupt: expected a step number, found %lld bytes%s", path, (long long)st.st_size,
                 got < 0 ? " that cannot be read" : "");
        return -2;
    }
    return (int)step;
}

// OUT/latest as a step, -1 when it is missing; exits when it is malformed.
static int read_latest(const char *out_dir) {
    char why[4400];
    int step = read_step_file(out_dir, "latest", why, sizeof(why));
    if (step == -2) die("%s", why);
    return step;
}

// The step of a file named exactly as ckpt_path names it (KIND_SSSSSSSS.bin: no sign, no
// other padding), or -1: ckpt_5.bin or model_7_notes.bin are someone else's files.
static int step_of(const char *name, const char *kind) {
    size_t k = strlen(kind);
    if (strncmp(name, kind, k) != 0 || name[k] != '_' || name[k + 1] < '0' || name[k + 1] > '9') return -1;
    long step = strtol(name + k + 1, NULL, 10);
    if (step < 0 || step > INT_MAX) return -1;
    char back[64];
    snprintf(back, sizeof(back), "%s_%08ld.bin", kind, step);
    return strcmp(back, name) == 0 ? (int)step : -1;
}

typedef struct {
    char name[256];
    int step;
} StepFile;

// The regular files OUT/KIND_SSSSSSSS.bin (a symbolic link or a folder of that name is not
// one: it is never followed nor removed), in *files (caller frees); returns how many.
static int list_steps(const char *out_dir, const char *kind, StepFile **files) {
    *files = NULL;
    DIR *d = opendir(out_dir);
    if (d == NULL) return 0;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int step = step_of(e->d_name, kind);
        struct stat st;
        if (step < 0 || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            *files = (StepFile *)realloc(*files, (size_t)cap * sizeof(StepFile));
            if (*files == NULL) die("out of host memory listing '%s'", out_dir);
        }
        snprintf((*files)[n].name, sizeof((*files)[n].name), "%s", e->d_name);
        (*files)[n++].step = step;
    }
    closedir(d);
    return n;
}

// Removes OUT/KIND_SSSSSSSS.bin for the steps keep(step, ctx) rejects; nothing else.
static void remove_steps(const char *out_dir, const char *kind, int (*keep)(int step, void *ctx), void *ctx) {
    StepFile *files;
    int n = list_steps(out_dir, kind, &files);
    int dir = open(out_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (int i = 0; i < n && dir >= 0; i++)
        if (!keep(files[i].step, ctx)) unlinkat(dir, files[i].name, 0);   // the link itself, were it one now
    if (dir >= 0) close(dir);
    free(files);
}

// What out_dir holds of both kinds of checkpoint.
typedef struct {
    int latest, latest_zero;            // the steps the two pointer files name (-1: none, -2: malformed)
    int ckpts, ckpt_lo, ckpt_hi;        // ckpt_SSSSSSSS.bin files and their lowest and highest step
    int zeros;                          // zero_S/ folders holding a manifest.json
    long long zero_lo, zero_hi;
} Found;

static void look(const char *out_dir, Found *f) {
    memset(f, 0, sizeof(*f));
    f->latest = read_step_file(out_dir, "latest", NULL, 0);
    f->latest_zero = read_step_file(out_dir, "latest_zero", NULL, 0);
    StepFile *files;
    f->ckpts = list_steps(out_dir, "ckpt", &files);
    for (int i = 0; i < f->ckpts; i++) {
        if (i == 0 || files[i].step < f->ckpt_lo) f->ckpt_lo = files[i].step;
        if (i == 0 || files[i].step > f->ckpt_hi) f->ckpt_hi = files[i].step;
    }
    free(files);
    DIR *d = opendir(out_dir);
    if (d == NULL) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end, folder[4400], manifest[4420];
        if (strncmp(e->d_name, "zero_", 5) != 0 || e->d_name[5] < '0' || e->d_name[5] > '9') continue;
        long long s = strtoll(e->d_name + 5, &end, 10);
        char canonical[32];   // zero_S as the format names it (zero_007 is someone else's)
        snprintf(canonical, sizeof(canonical), "%lld", s);
        snprintf(folder, sizeof(folder), "%s/%s", out_dir, e->d_name);
        snprintf(manifest, sizeof(manifest), "%s/manifest.json", folder);
        struct stat st, fst;   // a folder of the format's, not a link to one (pruning never follows those)
        if (*end || strcmp(canonical, e->d_name + 5) != 0 || lstat(folder, &fst) != 0 || !S_ISDIR(fst.st_mode) ||
            lstat(manifest, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (f->zeros == 0 || s < f->zero_lo) f->zero_lo = s;
        if (f->zeros == 0 || s > f->zero_hi) f->zero_hi = s;
        f->zeros++;
    }
    closedir(d);
}

int checkpoint_fresh_start_refused(const char *out_dir, CheckpointKind kind, int resume, char *why, size_t len) {
    Found f;
    look(out_dir, &f);
    char what[1024] = "";
    size_t at = 0;
#define SAY(...) at += (size_t)snprintf(what + at, at < sizeof(what) ? sizeof(what) - at : 0, __VA_ARGS__)
    const char *sep = "";
    if (f.latest != -1) SAY("'latest' (%s)", f.latest >= 0 ? "a step number" : "malformed"), sep = ", ";
    if (f.ckpts == 1) SAY("%sthe unsharded checkpoint ckpt_%08d.bin", sep, f.ckpt_lo), sep = ", ";
    if (f.ckpts > 1) SAY("%s%d unsharded checkpoints (ckpt_%08d.bin to ckpt_%08d.bin)", sep, f.ckpts, f.ckpt_lo, f.ckpt_hi), sep = ", ";
    if (f.latest_zero != -1) SAY("%s'latest_zero' (%s)", sep, f.latest_zero >= 0 ? "a step number" : "malformed"), sep = ", ";
    if (f.zeros == 1) SAY("%sthe sharded checkpoint zero_%lld/", sep, f.zero_lo);
    if (f.zeros > 1) SAY("%s%d sharded checkpoints (zero_%lld/ to zero_%lld/)", sep, f.zeros, f.zero_lo, f.zero_hi);
#undef SAY
    if (at == 0) return 0;   // nothing to lose
    if (!resume) {
        snprintf(why, len, "'%s' holds %s of an earlier run. A new run there would truncate its main.log, overwrite its "
                 "model files and remove or mix with its checkpoints, so this run stops: resume it with -y 1, remove "
                 "them, or choose another -o", out_dir, what);
        return 1;
    }
    const char *own = kind == CHECKPOINT_SHARDED ? "latest_zero" : "latest";
    if ((kind == CHECKPOINT_SHARDED ? f.latest_zero : f.latest) != -1) return 0;   // resumable
    int other = kind == CHECKPOINT_SHARDED ? f.latest != -1 || f.ckpts : f.latest_zero != -1 || f.zeros;
    snprintf(why, len, "-y 1: '%s' has no '%s' naming a%s checkpoint to resume, but it holds %s. Starting fresh would "
             "truncate main.log and overwrite the model files there, so this run stops: %srestore '%s/%s' if it was "
             "deleted, or choose another -o", out_dir, own, kind == CHECKPOINT_SHARDED ? " sharded" : "n unsharded", what,
             !other ? "" : kind == CHECKPOINT_SHARDED ? "resume with the unsharded trainer that wrote them (without -z), "
                                                      : "resume with a sharded trainer (-z, or train_gpt2_zero), ",
             out_dir, own);
    return 1;
}

int checkpoint_latest(const char *out_dir) {
    int step = read_latest(out_dir);
    char why[2048];
    if (step < 0 && checkpoint_fresh_start_refused(out_dir, CHECKPOINT_UNSHARDED, 1, why, sizeof(why))) die("%s", why);
    return step;
}

void checkpoint_new_run_check(const char *out_dir) {
    char why[2048];
    if (checkpoint_fresh_start_refused(out_dir, CHECKPOINT_UNSHARDED, 0, why, sizeof(why))) die("%s", why);
}

void checkpoint_path(char *buf, size_t len, const char *out_dir, int step) { ckpt_path(buf, len, out_dir, "ckpt", step); }

void checkpoint_model_path(char *buf, size_t len, const char *out_dir, int step) {
    if (step < 0) snprintf(buf, len, "%s/model_final.bin", out_dir);
    else ckpt_path(buf, len, out_dir, "model", step);
}

// -nk/-nm: of the steps at or below `current`, the `keep` highest and the multiples of
// `major` stay; steps above it (an abandoned run's, past the step `latest` names) go.
typedef struct { int current, lowest, major; } KeepPolicy;

static int is_kept(int step, void *ctx) {
    const KeepPolicy *k = (const KeepPolicy *)ctx;
    if (step > k->current) return 0;
    return step >= k->lowest || (k->major > 0 && step % k->major == 0);
}

static int higher_first(const void *a, const void *b) {
    int x = ((const StepFile *)a)->step, y = ((const StepFile *)b)->step;
    return (x < y) - (x > y);
}

// Removes OUT/KIND_SSSSSSSS.bin files the policy does not keep; keep 0 keeps all.
static void prune_kind(const char *out_dir, const char *kind, int current, int keep, int major) {
    if (keep <= 0) return;
    StepFile *files;
    int n = list_steps(out_dir, kind, &files);
    qsort(files, (size_t)n, sizeof(StepFile), higher_first);
    KeepPolicy k = {current, INT_MIN, major};
    int seen = 0;
    for (int i = 0; i < n; i++)
        if (files[i].step <= current && ++seen == keep) k.lowest = files[i].step;
    free(files);
    remove_steps(out_dir, kind, is_kept, &k);
}

void checkpoint_export_model(const char *out_dir, int step, int rank, const GPT2Config *c, const GPT2ModelSource *src,
                             int keep, int major) {
    char path[4096];
    checkpoint_model_path(path, sizeof(path), out_dir, step);
    gpt2_model_file_export(rank == 0 ? path : NULL, c, GPT2_MODEL_FP32, src);
    if (rank != 0) return;
    if (step >= 0) prune_kind(out_dir, "model", step, keep, major);
    printf("wrote %s\n", path);
}

void checkpoint_save(const char *out_dir, const TrainState *st, const float *params,
                     const float *m, const float *v, size_t n, int keep, int major) {
    char path[4096];
    ckpt_path(path, sizeof(path), out_dir, "ckpt", st->step);
    unsigned char header[HEADER_BYTES] = {0};
    const GPT2Config *c = &st->config;
    CkptHeader h = {CKPT_MAGIC, CKPT_VERSION, HEADER_BYTES, st->step, st->B, st->T, st->world,
                    c->max_seq_len, c->vocab_size, c->padded_vocab_size, c->num_layers,
                    c->num_heads, c->channels, st->seed, st->data_epoch, st->data_next_window,
                    st->tokens_per_step, n, st->last_t, 0, st->data, st->skip};
    memcpy(header, &h, sizeof(h));
    AtomicFile af;
    atomic_file_open(&af, path);
    atomic_file_write(&af, header, sizeof(header));
    atomic_file_write(&af, params, n * sizeof(float));
    atomic_file_write(&af, m, n * sizeof(float));
    atomic_file_write(&af, v, n * sizeof(float));
    CkptTrailer tr = {af.crc, CKPT_END};
    atomic_file_write(&af, &tr, sizeof(tr));
    atomic_file_commit_verified(&af, "checkpoint");   // all of it read back before it takes its name
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
    prune_kind(out_dir, "ckpt", st->step, keep, major);
    prune_kind(out_dir, "model", st->step, keep, major);
}

void checkpoint_load(const char *out_dir, int step, TrainState *st, float *params, float *m,
                     float *v, size_t n) {
    char path[4096];
    ckpt_path(path, sizeof(path), out_dir, "ckpt", step);
    FILE *f = fopen_check(path, "rb");
    long size = file_size_check(f, path);
    // the size a checkpoint of this model has: a file of another size is cut short or another model's
    long expect = body_bytes(n) + (long)sizeof(CkptTrailer);
    if (size < HEADER_BYTES_V1)
        die("checkpoint '%s' is truncated: %ld bytes, shorter than a header; a checkpoint of this model is %ld", path,
            size, expect);
    unsigned char header[HEADER_BYTES];
    fread_check(header, 1, HEADER_BYTES_V1, f, path);
    CkptHeader h;
    memcpy(&h, header, 32);   // magic, version, header size, step
    // these fields are read before the CRC can vouch for them (it needs the layout they
    // give): one that does not fit may be a damaged byte as well as another file
    if (h.magic != CKPT_MAGIC)
        die("'%s' is corrupt, or not a training checkpoint: its magic is %016llx, a checkpoint's %016llx (%ld bytes; a "
            "checkpoint of this model is %ld)", path, (unsigned long long)h.magic, (unsigned long long)CKPT_MAGIC, size,
            expect);
    if (h.version == 1)
        die("checkpoint '%s' is corrupt, or has version 1, which lacks what a bit-exact resume needs (the last applied "
            "step, the skip detectors' windows, the data identity); this build reads version %d. Resume it with the "
            "build that wrote it, or start a new run from its model file %s/model_%08d.bin (-e)", path, CKPT_VERSION,
            out_dir, step);
    if (h.version != CKPT_VERSION)
        die("checkpoint '%s' is corrupt, or has version %u: this build reads version %d (%ld bytes; a checkpoint of "
            "this model is %ld)", path, h.version, CKPT_VERSION, size, expect);
    if (h.header_bytes != HEADER_BYTES)
        die("checkpoint '%s' is corrupt, or has a %u-byte header: version %d's is %d", path, h.header_bytes,
            CKPT_VERSION, HEADER_BYTES);
    if (size < HEADER_BYTES + (long)sizeof(CkptTrailer))
        die("checkpoint '%s' is truncated: %ld bytes, shorter than its header and trailer; a checkpoint of this model "
            "is %ld", path, size, expect);
    fread_check(header + HEADER_BYTES_V1, 1, HEADER_BYTES - HEADER_BYTES_V1, f, path);
    memcpy(&h, header, sizeof(h));
    // the whole file against its trailer before any field is believed: a damaged byte in the
    // header would otherwise read as another step or another model
    CkptTrailer tr;
    if (fseek(f, size - (long)sizeof(tr), SEEK_SET) != 0) die("cannot seek in checkpoint '%s': %s", path, strerror(errno));
    fread_check(&tr, sizeof(tr), 1, f, path);
    if (tr.end_magic != CKPT_END)
        die("checkpoint '%s' has a damaged trailer: it is %ld bytes, a checkpoint of this model is %ld (%s)", path, size,
            expect, size < expect ? "cut short" : size > expect ? "another model's, or with bytes past its end"
                                                                : "its last bytes are damaged");
    uint32_t crc = file_crc32(path, 0, size - (long)sizeof(tr), NULL);
    if (crc != tr.crc) die("checkpoint '%s' is corrupt: CRC %08x, recorded %08x", path, crc, tr.crc);
    if (fseek(f, HEADER_BYTES, SEEK_SET) != 0) die("cannot seek in checkpoint '%s': %s", path, strerror(errno));
    if (h.step != step)   // e.g. ckpt_00000002.bin copied over ckpt_00000004.bin: 'latest' and the file disagree
        die("checkpoint '%s' holds step %d, but its name (and '%s/latest') says step %d: was another step's checkpoint "
            "copied over it?", path, h.step, out_dir, step);
    if (h.num_params != n)
        die("checkpoint '%s' holds %llu parameters, the model has %zu (another model?)", path,
            (unsigned long long)h.num_params, n);
    if (size != expect) die("checkpoint '%s' is %ld bytes, a checkpoint of this model is %ld (truncated?)", path, size, expect);
    fread_check(params, sizeof(float), n, f, path);
    fread_check(m, sizeof(float), n, f, path);
    fread_check(v, sizeof(float), n, f, path);
    fclose(f);
    memset(st, 0, sizeof(*st));
    st->step = h.step;
    st->B = h.B;
    st->T = h.T;
    st->world = h.world;
    st->config = (GPT2Config){h.maxT, h.V, h.Vp, h.L, h.NH, h.C};
    st->seed = h.seed;
    st->data_epoch = h.data_epoch;
    st->data_next_window = h.data_next_window;
    st->tokens_per_step = h.tokens_per_step;
    if (h.last_t < 0 || h.last_t > h.step)   // it keys the bf16 rounding of the loaded weights
        die("checkpoint '%s' says its last update was step %d, outside 0..%d (its step)", path, h.last_t, h.step);
    st->last_t = h.last_t;
    st->data = h.data;
    st->skip = h.skip;
    // The model file is written after `latest` moves: a run killed in between left none
    char model[4096];
    if (checkpoint_model_missing(out_dir, step, model, sizeof(model))) {
        gpt2_model_file_write(model, &st->config, params, GPT2_MODEL_FP32);
        printf("wrote %s (the run that saved step %d stopped before it)\n", model, step);
    }
}

int checkpoint_model_missing(const char *out_dir, int step, char *path, size_t len) {
    checkpoint_model_path(path, len, out_dir, step);
    struct stat sb;
    if (stat(path, &sb) == 0) return 0;
    if (errno != ENOENT) die("cannot look at model file '%s': %s", path, strerror(errno));
    return 1;
}
