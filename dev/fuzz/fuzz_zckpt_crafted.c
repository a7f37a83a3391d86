/*
fuzz_zckpt_crafted.c: a structure-aware fuzz target for zero/'s sharded checkpoint reader
(zero/io/zckpt.c, consolidate.c: what zero_load and the zero_consolidate tool run).

The fuzz bytes never become a file themselves: they choose a checkpoint (world, tensors and
their sizes: small, near 2^53, or counts picked so that 64-bit sums of sizes wrap;
stage, seed, last_t, step) and a few edits of it (a header byte, a manifest field, malformed
JSON, a data byte, the size, the trailer). The target writes manifest.json and the rank files
with valid CRC-32s, computed as zckpt does (body CRC in the trailer and in the manifest), so
inputs get past the CRC checks to the arithmetic and the checks behind them. Then it reads
the checkpoint back through the library and holds it to what a reader must do:
  - the manifest is read only if its element counts sum (exactly) to at most ZCK_MAX_ELEMS;
  - the rank files are verified only if each one's size is exactly what its header implies
    (computed here in 128 bits) and nothing was edited where a load must notice;
  - an unedited checkpoint small enough to hold consolidates, to the values written;
  - nothing reads or writes out of bounds (build with AddressSanitizer).
A broken rule abort()s, naming it.

libFuzzer (clang):
  clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -DZCK_FUZZ_LIBFUZZER -I. \
    dev/fuzz/fuzz_zckpt_crafted.c zero/io/consolidate.c zero/io/zckpt.c zero/io/zfile.c zero/partition.c -lcjson -lz
  ./a.out CORPUS_DIR
Plain driver (any C compiler; what dev/test/security/test_zckpt_crafted.sh runs under ASan):
  fuzz_zckpt_crafted [--generate N] [--seed S] [--write-corpus DIR] [FILE|DIR ...]
    --generate N      N inputs from a seeded generator (default 0, or 2000 without files)
    --write-corpus D  also write the generated inputs into D (a libFuzzer seed corpus)
    FILE|DIR          run these inputs (every file of a folder), e.g. a libFuzzer corpus
*/
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zero/io/zckpt.h"
#include "zero/io/zfile.h"
#include "zero/partition.h"
#include "zero/zero.h"

#define MAX_WORLD 4
#define MAX_TENSORS 1600
#define SMALL_BYTES (1u << 20)        // rank files up to this size are written whole
#define CONSOLIDATE_MAX (1u << 16)    // elements consolidated into a buffer of exactly that size

// ---------------------------------------------------------------- the fuzz bytes

typedef struct {
    const uint8_t *p;
    size_t n, i;
} Bytes;

static unsigned take8(Bytes *b) { return b->i < b->n ? b->p[b->i++] : 0; }
static uint32_t take32(Bytes *b) {
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) v = v << 8 | take8(b);
    return v;
}
static uint64_t take64(Bytes *b) { return (uint64_t)take32(b) << 32 | take32(b); }

// ---------------------------------------------------------------- the checkpoint

enum { MODE_SMALL, MODE_WRAP_TOTAL, MODE_HUGE, MODE_NEAR_BOUND, MODES };

enum {
    EDIT_HEADER_BYTE,       // any byte of a rank file's header: must be refused
    EDIT_MANIFEST_FIELD,    // a field of the manifest set to another valid-looking value: refused
    EDIT_MANIFEST_JUNK,     // a field of the manifest malformed: refused
    EDIT_DATA_BYTE,         // a data byte, CRCs recomputed: accepted (the values are not checked)
    EDIT_SIZE,              // bytes added or cut, CRCs recomputed: refused
    EDIT_TRAILER,           // the trailer's CRC: refused
    EDIT_STALE_CRC,         // body and trailer changed, the manifest's CRC not: refused
    EDITS
};

typedef struct {
    int mode, world, stage, last_t, dtype, nt;
    long long step;
    uint64_t seed;
    uint8_t run_id[ZCK_RUN_ID_BYTES];
    uint64_t numel[MAX_TENSORS];
    // what the target wrote
    unsigned char *file[MAX_WORLD];
    size_t file_bytes[MAX_WORLD];
    uint32_t crc[MAX_WORLD];          // body CRC the manifest names
    int must_refuse, data_edited;
    char manifest_edit[64];           // the manifest key to write differently ("" for none)
    int manifest_variant;
} Ckpt;

static char g_dir[4096];   // the checkpoint folder's parent, made once

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz_zckpt_crafted: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

static float value_of(int t, uint64_t idx, int kind) { return (float)((t * 131u + idx * 7u + (unsigned)kind * 1000u) % 4093u) - 2046.5f; }

// The tensor sizes of each mode.
static void plan_tensors(Ckpt *c, Bytes *b) {
    switch (c->mode) {
    case MODE_SMALL:
        c->nt = 1 + (int)(take8(b) % 6);
        for (int i = 0; i < c->nt; i++) {
            unsigned v = take8(b);
            c->numel[i] = v < 16 ? 0 : v < 200 ? v : v * 7u + take8(b);
        }
        break;
    case MODE_WRAP_TOTAL: {
        // a first tensor the reader reads, then 2^53s and a remainder so that the
        // total is j * 2^62 + small: total * 4 and 12 * total wrap to small numbers
        static const uint64_t firsts[] = {(uint64_t)1 << 40, (uint64_t)1 << 30, 16, 1000, (uint64_t)1 << 53};
        uint64_t first = firsts[take8(b) % 5], small = 1 + take8(b) % 64 * 4;
        unsigned j = 1 + take8(b) % 3;
        unsigned __int128 total = (unsigned __int128)j << 62 | small, rest = total - first;
        uint64_t q = (uint64_t)(rest >> 53), r = (uint64_t)(rest & (((uint64_t)1 << 53) - 1));
        c->nt = 0;
        c->numel[c->nt++] = first;
        for (uint64_t k = 0; k < q && c->nt < MAX_TENSORS - 1; k++) c->numel[c->nt++] = (uint64_t)1 << 53;
        c->numel[c->nt++] = r;
        if (take8(b) & 1) {   // the order matters to what is read first
            uint64_t t = c->numel[0];
            c->numel[0] = c->numel[c->nt - 1];
            c->numel[c->nt - 1] = t;
        }
        break;
    }
    case MODE_HUGE:
        c->nt = 1 + (int)(take8(b) % 40);
        for (int i = 0; i < c->nt; i++) {
            unsigned s = take8(b) % 54;
            c->numel[i] = ((uint64_t)1 << s) - (take8(b) & 3);
            if (c->numel[i] > (uint64_t)1 << 53) c->numel[i] = 0;
        }
        break;
    default: {   // MODE_NEAR_BOUND: 32 tensors of 2^53 are ZCK_MAX_ELEMS exactly; one more past it
        int n = 31 + (int)(take8(b) % 3);
        c->nt = 0;
        for (int i = 0; i < n; i++) c->numel[c->nt++] = (uint64_t)1 << 53;
        if (take8(b) & 1) c->numel[c->nt++] = take8(b) % 4;
        break;
    }
    }
}

// Rank q's file, as zero_save writes it (or, where the data cannot exist, as many data bytes
// as the header implies modulo 2^64 when that is small: a wrapped size, the crafted case).
static void build_rank_file(Ckpt *c, int q, Bytes *b) {
    uint64_t begin[MAX_TENSORS], count[MAX_TENSORS];
    unsigned __int128 exact = zck_header_size(c->nt);
    for (int i = 0; i < c->nt; i++) {
        ZeroSplit sp;
        if (zero_split((size_t)c->numel[i], c->world, &sp) != 0) die("zero_split failed");
        begin[i] = zero_owned_begin(&sp, q);
        count[i] = zero_owned_count(&sp, q);
        exact += (unsigned __int128)count[i] * 12;
    }
    size_t hs = zck_header_size(c->nt), data;
    uint64_t wrapped = (uint64_t)exact;
    int whole = exact <= SMALL_BYTES;
    if (whole) data = (size_t)exact - hs;
    else if (wrapped >= hs && wrapped - hs <= SMALL_BYTES) data = (size_t)(wrapped - hs);
    else data = take8(b) * 12u;
    size_t bytes = hs + data + 4;
    unsigned char *f = calloc(1, bytes);
    if (!f) die("out of memory");
    ZckHeader h = {q, c->world, c->stage, c->last_t, c->dtype, c->nt, c->step, c->seed, {0}};
    memcpy(h.run_id, c->run_id, ZCK_RUN_ID_BYTES);
    zck_header_encode(f, &h, c->numel, begin, count);
    if (whole) {
        float *out = (float *)(f + hs);   // hs is a multiple of 4
        for (int i = 0; i < c->nt; i++)
            for (int k = 0; k < ZCK_KINDS; k++)
                for (uint64_t e = 0; e < count[i]; e++) *out++ = value_of(i, begin[i] + e, k);
    } else {
        for (size_t k = 0; k < data; k++) f[hs + k] = (unsigned char)(k * 29u);
    }
    c->file[q] = f;
    c->file_bytes[q] = bytes;
    if (!whole) c->must_refuse = 1;   // its data is not all there
}

static void seal(Ckpt *c, int q) {   // trailer and manifest CRC of the body as it is now
    uint32_t crc = zfile_crc32(0, c->file[q], c->file_bytes[q] - 4);
    zle_put32(c->file[q] + c->file_bytes[q] - 4, crc);
    c->crc[q] = crc;
}

static const char *manifest_keys[] = {"step", "last_t", "stage", "seed", "param_dtype", "world_size", "numel", "bytes",
                                      "crc32", "file", "run_id"};

static void edit(Ckpt *c, Bytes *b) {
    int kind = (int)(take8(b) % EDITS), q = (int)(take8(b) % (unsigned)c->world);
    unsigned char *f = c->file[q];
    size_t n = c->file_bytes[q], hs = zck_header_size(c->nt);
    switch (kind) {
    case EDIT_HEADER_BYTE: {
        size_t at = take32(b) % hs;
        f[at] ^= (unsigned char)(1 + take8(b) % 255);
        seal(c, q);
        c->must_refuse = 1;
        break;
    }
    case EDIT_MANIFEST_FIELD:
    case EDIT_MANIFEST_JUNK:
        snprintf(c->manifest_edit, sizeof c->manifest_edit, "%s", manifest_keys[take8(b) % 11]);
        c->manifest_variant = kind == EDIT_MANIFEST_JUNK ? 1 + (int)(take8(b) % 4) : 0;
        c->must_refuse = 1;
        break;
    case EDIT_DATA_BYTE:
        if (n > hs + 4) {
            f[hs + take32(b) % (n - hs - 4)] ^= (unsigned char)(1 + take8(b) % 255);
            seal(c, q);
            c->data_edited = 1;
        }
        break;
    case EDIT_SIZE: {
        size_t delta = 1 + take8(b) % 16;
        size_t m = (take8(b) & 1) && n > delta + 4 ? n - delta : n + delta;
        unsigned char *g = realloc(f, m);
        if (!g) die("out of memory");
        if (m > n) memset(g + n, 0x5a, m - n);
        c->file[q] = g;
        c->file_bytes[q] = m;
        seal(c, q);
        c->must_refuse = 1;
        break;
    }
    case EDIT_TRAILER:
        f[n - 1 - take8(b) % 4] ^= (unsigned char)(1 + take8(b) % 255);
        c->must_refuse = 1;
        break;
    default: {   // EDIT_STALE_CRC
        uint32_t before = c->crc[q];
        f[take32(b) % (n - 4)] ^= (unsigned char)(1 + take8(b) % 255);
        seal(c, q);
        c->crc[q] = before;
        c->must_refuse = 1;
        break;
    }
    }
}

// A manifest field as written, after a comma: the real value, or where the input edits
// this field (and editable), another valid-looking one (variant 0) or a malformed one (1-4).
static void put_field(FILE *o, const Ckpt *c, const char *key, int editable, const char *real, const char *other) {
    static const char *junk[] = {"-1", "1.5", "\"12x\"", "9007199254740994"};
    fprintf(o, ", \"%s\": ", key);
    if (!editable || strcmp(c->manifest_edit, key) != 0) fputs(real, o);
    else if (c->manifest_variant == 0) fputs(other, o);
    else fputs(junk[c->manifest_variant - 1], o);
}

// The same for a number, or (quoted) a string of digits, as the manifest writes seeds.
static void put_number(FILE *o, const Ckpt *c, const char *key, int editable, int quoted, uint64_t real, uint64_t other) {
    char a[48], b[48];
    const char *q = quoted ? "\"" : "";
    snprintf(a, sizeof a, "%s%" PRIu64 "%s", q, real, q);
    snprintf(b, sizeof b, "%s%" PRIu64 "%s", q, other, q);
    put_field(o, c, key, editable, a, b);
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) die("cannot write %s: %s", path, strerror(errno));
}

static void write_checkpoint(const Ckpt *c, const char *folder) {
    char path[4300], a[64], o[64];
    for (int q = 0; q < c->world; q++) {
        snprintf(path, sizeof path, "%s/rank_%05d.bin", folder, q);
        write_file(path, c->file[q], c->file_bytes[q]);
    }
    snprintf(path, sizeof path, "%s/manifest.json", folder);
    FILE *m = fopen(path, "w");
    if (!m) die("cannot write %s", path);
    char run[2 * ZCK_RUN_ID_BYTES + 1];
    zck_run_id_hex(c->run_id, run);
    snprintf(a, sizeof a, "\"%s\"", run);
    snprintf(o, sizeof o, "\"%c%s\"", run[0] == '0' ? '1' : '0', run + 1);
    fprintf(m, "{\"format\": \"zero-sharded-checkpoint\", \"version\": 2");
    put_field(m, c, "run_id", 1, a, o);
    put_number(m, c, "step", 1, 0, (uint64_t)c->step, (uint64_t)c->step + 1);
    put_number(m, c, "last_t", 1, 0, (uint64_t)c->last_t, (uint64_t)c->last_t + 1);
    put_number(m, c, "world_size", 1, 0, (uint64_t)c->world, (uint64_t)c->world + 1);
    put_number(m, c, "stage", 1, 0, (uint64_t)c->stage, (uint64_t)(c->stage + 1) % 4);
    put_field(m, c, "param_dtype", 1, c->dtype ? "\"bf16\"" : "\"fp32\"", c->dtype ? "\"fp32\"" : "\"bf16\"");
    put_number(m, c, "seed", 1, 1, c->seed, c->seed ^ 1);
    fprintf(m, ", \"tensors\": [");
    for (int i = 0; i < c->nt; i++) {   // the edited numel is the last tensor's
        fprintf(m, "%s{\"name\": \"t%d\"", i ? ", " : "", i);
        put_number(m, c, "numel", i == c->nt - 1, 0, c->numel[i], c->numel[i] ^ 1);
        fputs("}", m);
    }
    fprintf(m, "], \"ranks\": [");
    for (int q = 0; q < c->world; q++) {   // the edited fields are the last rank's
        int mine = q == c->world - 1;
        fprintf(m, "%s{\"rank\": %d", q ? ", " : "", q);
        snprintf(a, sizeof a, "\"rank_%05d.bin\"", q);
        snprintf(o, sizeof o, "\"rank_%05d.bin\"", q + 1);
        put_field(m, c, "file", mine, a, o);
        put_number(m, c, "bytes", mine, 0, c->file_bytes[q], c->file_bytes[q] + 12);
        put_number(m, c, "crc32", mine, 0, c->crc[q], c->crc[q] ^ 1);
        fputs("}", m);
    }
    fprintf(m, "], \"extra\": null}\n");
    if (fclose(m) != 0) die("cannot write %s", path);
}

static void remove_checkpoint(const Ckpt *c, const char *folder) {
    char path[4300];
    for (int q = 0; q < c->world; q++) {
        snprintf(path, sizeof path, "%s/rank_%05d.bin", folder, q);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/manifest.json", folder);
    unlink(path);
    rmdir(folder);
    snprintf(path, sizeof path, "%s/latest_zero", g_dir);
    unlink(path);
}

static void cleanup(void) {
    if (g_dir[0]) rmdir(g_dir);
}

static void make_dir(void) {
    if (g_dir[0]) return;
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/fuzz_zckpt.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) die("cannot make a folder %s: %s", g_dir, strerror(errno));
    atexit(cleanup);
}

// ---------------------------------------------------------------- reading it back

// The library's verdict on a checkpoint, against what the target wrote.
static void check(const Ckpt *c) {
    unsigned __int128 total = 0;
    for (int i = 0; i < c->nt; i++) total += c->numel[i];
    int edited_manifest = c->manifest_edit[0] != 0;
    ZckManifest m;
    char err[1400];
    int rc = zck_manifest_read(g_dir, c->step, &m, err, sizeof err);
    // the total the reader finds: an edit of "numel" (variant 0) wrote the last tensor's count
    // with its lowest bit flipped (which can bring a total one past the bound within it), and
    // JSON numbers are read as doubles (2^53 + 1 reads as 2^53)
    unsigned __int128 stated = total;
    if (strcmp(c->manifest_edit, "numel") == 0 && c->manifest_variant == 0) {
        uint64_t last = c->numel[c->nt - 1];
        stated = total - last + (uint64_t)(double)(last ^ 1);
    }
    if (rc == 0 && stated > ZCK_MAX_ELEMS) die("a manifest of %" PRIu64 "*2^64 + %" PRIu64 " elements was read", (uint64_t)(stated >> 64), (uint64_t)stated);
    if (rc == 0 && !edited_manifest && m.numel_total != (uint64_t)total) die("the manifest's total is %" PRIu64, m.numel_total);
    if (rc != 0) {
        if (!c->must_refuse && total <= ZCK_MAX_ELEMS) die("a valid manifest was refused: %s", err);
        return;
    }
    // every rank file verified (size, CRC, header against the manifest and the partition)?
    ZckReader r;
    if (zck_reader_init(&r, &m) != 0) die("out of memory");
    int verified = 1;
    for (int i = 0; i < m.num_tensors && verified; i++)
        if (zck_reader_need(&r, i, 0, m.t[i].numel, err, sizeof err) != 0) verified = 0;
    if (verified && zck_reader_need_empty(&r, 0, 1, err, sizeof err) != 0) verified = 0;   // ranks owning nothing
    if (verified && c->must_refuse) die("a checkpoint that must be refused was verified (mode %d)", c->mode);
    if (!verified && !c->must_refuse) die("a valid checkpoint was refused: %s", err);
    zck_reader_free(&r);
    zck_manifest_free(&m);
    if (!verified || total > CONSOLIDATE_MAX) return;
    // the zero_consolidate tool's path, into a buffer of exactly the total (ASan: overruns)
    ZeroCheckpointInfo info;
    if (zero_checkpoint_info(g_dir, -1, &info) != 0) die("zero_checkpoint_info refused a verified checkpoint");
    if (info.numel_total != (size_t)total) die("zero_checkpoint_info: %zu elements, %zu written", info.numel_total, (size_t)total);
    float *buf = malloc(info.numel_total ? info.numel_total * sizeof(float) : 1);
    if (!buf) die("out of memory");
    for (int k = 0; k < ZCK_KINDS; k++) {
        if (zero_consolidate_state(g_dir, -1, k, buf, info.numel_total) != 0) die("consolidating a verified checkpoint failed");
        size_t off = 0;
        for (int i = 0; i < c->nt && !c->data_edited; i++)
            for (uint64_t e = 0; e < c->numel[i]; e++, off++)
                if (buf[off] != value_of(i, e, k)) die("tensor %d element %" PRIu64 " kind %d: %g, %g written", i, e, k, buf[off], value_of(i, e, k));
    }
    free(buf);
    zero_checkpoint_info_free(&info);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    make_dir();
    Bytes b = {data, size, 0};
    static Ckpt c;   // large: not on the stack
    memset(&c, 0, sizeof c);
    c.mode = (int)(take8(&b) % MODES);
    int edits = (int)(take8(&b) % 2);   // one edit at most: two could undo each other
    c.world = c.mode == MODE_WRAP_TOTAL ? 1 : 1 + (int)(take8(&b) % MAX_WORLD);
    c.stage = (int)(take8(&b) % 4);
    c.last_t = (int)(take32(&b) % 100000);
    c.dtype = (int)(take8(&b) & 1);
    c.step = take32(&b) % 100000;
    c.seed = take64(&b);
    for (int i = 0; i < ZCK_RUN_ID_BYTES; i++) c.run_id[i] = (uint8_t)take8(&b);
    plan_tensors(&c, &b);
    // tensor 0 spans more than one 16-element slot a rank (a rank past its end may still own
    // nothing: its file holds no element, and a reader must check it all the same)
    uint64_t spread = (uint64_t)c.world * ZERO_ALIGN_ELEMS + 1;
    if (c.mode != MODE_WRAP_TOTAL && c.numel[0] < spread) c.numel[0] = spread;
    for (int q = 0; q < c.world; q++) {
        build_rank_file(&c, q, &b);
        seal(&c, q);
    }
    if (edits) edit(&c, &b);
    char folder[4200], path[4300], text[32];
    zck_folder(folder, sizeof folder, g_dir, c.step);
    if (mkdir(folder, 0755) != 0 && errno != EEXIST) die("cannot make %s: %s", folder, strerror(errno));
    write_checkpoint(&c, folder);
    snprintf(path, sizeof path, "%s/latest_zero", g_dir);
    int len = snprintf(text, sizeof text, "%lld\n", c.step);
    write_file(path, text, (size_t)len);
    check(&c);
    remove_checkpoint(&c, folder);
    for (int q = 0; q < c.world; q++) free(c.file[q]);
    return 0;
}

#ifndef ZCK_FUZZ_LIBFUZZER
// ---------------------------------------------------------------- the plain driver

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static long run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot read %s", path);
    static uint8_t buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    return 1;
}

static long run_path(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) die("%s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return run_file(path);
    DIR *d = opendir(path);
    if (!d) die("cannot list %s", path);
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        n += run_file(p);
    }
    closedir(d);
    return n;
}

int main(int argc, char **argv) {
    long generate = -1;
    uint64_t seed = 17;
    const char *corpus = NULL;
    int files = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--generate") && a + 1 < argc) generate = atol(argv[++a]);
        else if (!strcmp(argv[a], "--seed") && a + 1 < argc) seed = strtoull(argv[++a], NULL, 10);
        else if (!strcmp(argv[a], "--write-corpus") && a + 1 < argc) corpus = argv[++a];
        else if (argv[a][0] == '-') {
            fprintf(stderr, "usage: %s [--generate N] [--seed S] [--write-corpus DIR] [FILE|DIR ...]\n", argv[0]);
            return 2;
        } else files = 1;
    }
    if (generate < 0) generate = files ? 0 : 2000;
    long ran = 0;
    for (int a = 1; a < argc; a++) {
        if (argv[a][0] == '-') { a++; continue; }
        ran += run_path(argv[a]);
    }
    uint64_t s = seed;
    for (long i = 0; i < generate; i++) {
        uint8_t in[512];
        size_t n = 24 + splitmix(&s) % (sizeof in - 24);
        for (size_t k = 0; k < n; k++) in[k] = (uint8_t)splitmix(&s);
        in[0] = (uint8_t)(i % MODES);        // every mode alike
        if (i % 3 == 0) in[1] = 0;           // a share of unedited checkpoints (the edit count's byte)
        if (corpus) {
            char p[4400];
            snprintf(p, sizeof p, "%s/gen_%06ld", corpus, i);
            write_file(p, in, n);
        }
        LLVMFuzzerTestOneInput(in, n);
        ran++;
    }
    printf("fuzz_zckpt_crafted: %ld inputs, every rule held\n", ran);
    return 0;
}
#endif
