// dataloader.c: token shards -> (inputs, targets) windows in a global, rank-independent
// order. See dataloader.h for the exact order; the state is just (epoch, next_window).
#include "dataloader.h"

#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <string.h>
#include <zlib.h>

#include "../atomic_file.h"
#include "../numerics/rand.h"
#include "../utils.h"

#define SHARD_HEADER_BYTES ((long)(SHARD_HEADER_INTS * sizeof(int32_t)))

// Checks a shard's header and size against each other and returns its token count.
static int64_t shard_check(const char *path) {
    FILE *f = fopen_check(path, "rb");
    long size = file_size_check(f, path);
    if (size < SHARD_HEADER_BYTES)
        die("shard '%s' is %ld bytes, smaller than the %ld-byte header", path, size, SHARD_HEADER_BYTES);
    int32_t header[SHARD_HEADER_INTS];
    fread_check(header, sizeof(int32_t), SHARD_HEADER_INTS, f, path);
    fclose(f);
    if (header[0] != SHARD_MAGIC)
        die("shard '%s' has bad magic %d (expected %d)", path, header[0], SHARD_MAGIC);
    if (header[1] != SHARD_VERSION)
        die("shard '%s' has unsupported version %d (expected %d)", path, header[1], SHARD_VERSION);
    int64_t ntok = header[2];
    if (ntok < 0) die("shard '%s' has negative token count %" PRId64, path, ntok);
    long expected = SHARD_HEADER_BYTES + 2 * (long)ntok;
    if (size != expected)
        die("shard '%s' has size %ld bytes, expected %ld (header says %" PRId64 " tokens)",
            path, size, expected, ntok);
    return ntok;
}

// The windows of T+1 tokens (overlapping by one) a shard of ntok tokens holds.
static int64_t windows_of(int64_t ntok, int T) { return ntok > T ? (ntok - 1) / T : 0; }

// Seeded Fisher-Yates over perm[0..n); draws are (seed, SHUFFLE, base | i) so the result
// depends only on those keys.
static void fisher_yates_i64(int64_t *perm, int64_t n, uint64_t seed, uint64_t base) {
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)rng_below(seed, RNG_STREAM_SHUFFLE, base | (uint64_t)i, (uint64_t)i + 1);
        int64_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
}

// Window order of shard s in the current epoch (identity when not shuffling).
static void make_window_perm(DataLoader *dl, int s) {
    free(dl->window_perm);
    dl->window_perm = NULL;
    if (!dl->shuffle) return;
    // sub-seed per (epoch, shard); bit 31 keeps these keys apart from the shard-order draws
    uint64_t key = dl->perm_epoch << 32 | 1ULL << 31 | (uint64_t)s;
    uint64_t sub = rng_u64(dl->seed, RNG_STREAM_SHUFFLE, key);
    dl->window_perm = malloc_check((size_t)dl->num_windows[s] * sizeof(int64_t));
    fisher_yates_i64(dl->window_perm, dl->num_windows[s], sub, 0);
}

// Makes shard_perm, slot_first (and the loaded shard's window_perm) those of dl->epoch.
static void ensure_epoch(DataLoader *dl) {
    if (dl->perm_epoch == dl->epoch) return;
    dl->perm_epoch = dl->epoch;
    int n = dl->num_shards;
    int64_t *order = malloc_check((size_t)n * sizeof(int64_t));
    if (dl->shuffle) fisher_yates_i64(order, n, dl->seed, dl->epoch << 32);
    else for (int i = 0; i < n; i++) order[i] = i;
    dl->slot_first[0] = 0;
    for (int i = 0; i < n; i++) {
        dl->shard_perm[i] = (int)order[i];
        dl->slot_first[i + 1] = dl->slot_first[i] + dl->num_windows[order[i]];
    }
    free(order);
    if (dl->cur_shard >= 0) make_window_perm(dl, dl->cur_shard);
}

// Every token id of a loaded shard must index the model's vocabulary. One branch-free
// pass for the largest id (vectorized), a second only to name the first offender.
static void check_token_ids(const char *path, const uint16_t *tok, int64_t ntok, int vocab_size) {
    uint16_t largest = 0;
    for (int64_t i = 0; i < ntok; i++) largest = tok[i] > largest ? tok[i] : largest;
    if (largest < vocab_size) return;
    for (int64_t i = 0; i < ntok; i++)
        if (tok[i] >= vocab_size)
            die("shard '%s': token %" PRId64 " (byte offset %ld) is %u, outside the vocabulary [0, %d)", path, i,
                SHARD_HEADER_BYTES + 2 * (long)i, tok[i], vocab_size);
}

// Reads shard s into memory (the only one held) unless it is already there.
static void load_shard(DataLoader *dl, int s) {
    if (dl->cur_shard == s) return;
    const char *path = dl->paths[s];
    int64_t ntok = shard_check(path); // the file may have changed since init
    if (windows_of(ntok, dl->T) != dl->num_windows[s])
        die("shard '%s' changed since start-up: now %" PRId64 " windows, was %" PRId64,
            path, windows_of(ntok, dl->T), dl->num_windows[s]);
    if (ntok != dl->shard_ntok || dl->shard_tokens == NULL) {
        free(dl->shard_tokens);
        dl->shard_tokens = malloc_check((size_t)ntok * sizeof(uint16_t));
    }
    FILE *f = fopen_check(path, "rb");
    fseek_check(f, SHARD_HEADER_BYTES, SEEK_SET, path);
    fread_check(dl->shard_tokens, sizeof(uint16_t), (size_t)ntok, f, path);
    (void)posix_fadvise(fileno(f), 0, 0, POSIX_FADV_DONTNEED);   // held in memory now: no cached copy
    fclose(f);
    check_token_ids(path, dl->shard_tokens, ntok, dl->vocab_size);
    dl->shard_ntok = ntok;
    dl->cur_shard = s;
    make_window_perm(dl, s);
}

void dataloader_init(DataLoader *dl, const char *pattern, int B, int T, int vocab_size, int rank, int world,
                     int shuffle, uint64_t seed) {
    memset(dl, 0, sizeof(*dl));
    if (B <= 0 || T <= 0) die("dataloader '%s': B=%d and T=%d must be positive", pattern, B, T);
    if (vocab_size <= 0 || vocab_size > 65536)
        die("dataloader '%s': vocab size %d is outside [1, 65536] (token ids are uint16)", pattern, vocab_size);
    if (world <= 0 || rank < 0 || rank >= world)
        die("dataloader '%s': rank %d is not in [0, world=%d)", pattern, rank, world);
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g); // glob sorts the names
    if (rc == GLOB_NOMATCH) die("no shard files match '%s'", pattern);
    if (rc != 0) die("glob of '%s' failed (code %d)", pattern, rc);
    dl->num_shards = (int)g.gl_pathc;
    dl->paths = malloc_check(g.gl_pathc * sizeof(char *));
    dl->num_windows = malloc_check(g.gl_pathc * sizeof(int64_t));
    for (size_t i = 0; i < g.gl_pathc; i++) {
        dl->paths[i] = strdup(g.gl_pathv[i]);
        if (dl->paths[i] == NULL) die("out of memory copying path '%s'", g.gl_pathv[i]);
        const int64_t ntok = shard_check(dl->paths[i]);
        dl->num_windows[i] = windows_of(ntok, T);
        dl->total_windows += dl->num_windows[i];
        // tokenize's last shard holds what is left over: it may be shorter than a window
        if (dl->num_windows[i] == 0 && rank == 0)
            fprintf(stderr, "warning: shard '%s' has %" PRId64 " tokens, fewer than T+1 = %d: it holds no window "
                    "and is skipped\n", dl->paths[i], ntok, T + 1);
    }
    globfree(&g);
    // One batch of B windows is what evaluation needs; training needs a whole optimizer step
    // (dataloader_set_accum, dataloader_next_batch).
    if (dl->total_windows < (int64_t)B)
        die("shards matching '%s' hold %" PRId64 " windows of T+1=%d tokens, fewer than one batch of B = %d",
            pattern, dl->total_windows, T + 1, B);
    dl->B = B; dl->T = T; dl->rank = rank; dl->world = world; dl->accum = 1;
    dl->vocab_size = vocab_size;
    dl->shuffle = shuffle;
    dl->seed = seed;
    dl->cur_shard = -1;
    dl->shard_perm = malloc_check((size_t)dl->num_shards * sizeof(int));
    dl->slot_first = malloc_check(((size_t)dl->num_shards + 1) * sizeof(int64_t));
    dl->inputs = malloc_check((size_t)B * T * sizeof(int));
    dl->targets = malloc_check((size_t)B * T * sizeof(int));
    dl->epoch = 0;
    dl->next_window = 0;
    dl->perm_epoch = UINT64_MAX; // nothing computed yet
    ensure_epoch(dl);
}

// An optimizer step's windows, B*world*accum, which must fit in an epoch: next_batch wraps
// to a new epoch only at a step's start.
static int64_t windows_per_step(const DataLoader *dl) { return (int64_t)dl->B * dl->world * dl->accum; }

static void need_one_step(const DataLoader *dl) {
    if (dl->total_windows >= windows_per_step(dl)) return;
    char which[1200];
    if (dl->num_shards == 1) snprintf(which, sizeof which, "shard '%s' holds", dl->paths[0]);
    else snprintf(which, sizeof which, "the %d shards '%s' ... '%s' hold", dl->num_shards, dl->paths[0],
                  dl->paths[dl->num_shards - 1]);
    die("%s %" PRId64 " windows of T+1=%d tokens, fewer than one optimizer step of B*ranks*accum = %d*%d*%d windows: "
        "give more data, or a smaller -b, -d or -t", which, dl->total_windows, dl->T + 1, dl->B, dl->world, dl->accum);
}

void dataloader_set_accum(DataLoader *dl, int accum) {
    if (accum < 1) die("dataloader '%s': accumulation %d must be >= 1", dl->paths[0], accum);
    dl->accum = accum;
    need_one_step(dl);
}

// Fills inputs and targets with the B windows of this epoch's sequence from position first.
static void fill_windows(DataLoader *dl, int64_t first) {
    int T = dl->T;
    int slot = 0;
    for (int b = 0; b < dl->B; b++) {
        int64_t p = first + b;
        // the windows are consecutive, so the slot only moves forward
        while (dl->slot_first[slot + 1] <= p) slot++;
        int s = dl->shard_perm[slot];
        load_shard(dl, s);
        int64_t j = p - dl->slot_first[slot];
        int64_t k = dl->window_perm ? dl->window_perm[j] : j;
        const uint16_t *w = dl->shard_tokens + k * T;
        for (int t = 0; t < T; t++) {
            dl->inputs[(size_t)b * T + t] = w[t];
            dl->targets[(size_t)b * T + t] = w[t + 1];
        }
    }
}

void dataloader_next_batch(DataLoader *dl) {
    int64_t step = (int64_t)dl->B * dl->world, per_opt_step = windows_per_step(dl);
    need_one_step(dl);
    // the tail of the epoch is skipped where a whole optimizer step no longer fits
    if (dl->next_window % per_opt_step == 0 && dl->next_window + per_opt_step > dl->total_windows) {
        dl->epoch++;
        dl->next_window = 0;
    }
    ensure_epoch(dl);
    fill_windows(dl, dl->next_window + (int64_t)dl->rank * dl->B);
    dl->next_window += step;
}

void dataloader_load_batch(DataLoader *dl, int64_t batch) {
    if (batch < 0 || (batch + 1) * dl->B > dl->total_windows) {
        die("batch %" PRId64 " of %d windows is past the %" PRId64 " windows of '%s'%s", batch, dl->B,
            dl->total_windows, dl->paths[0], dl->num_shards > 1 ? " and the shards after it" : "");
    }
    ensure_epoch(dl);
    fill_windows(dl, batch * dl->B);
}

void dataloader_reset(DataLoader *dl) {
    dl->epoch = 0;
    dl->next_window = 0;
    ensure_epoch(dl);
}

void dataloader_get_state(const DataLoader *dl, uint64_t *epoch, int64_t *next_window) {
    *epoch = dl->epoch;
    *next_window = dl->next_window;
}

void dataloader_set_state(DataLoader *dl, uint64_t epoch, int64_t next_window) {
    if (next_window < 0 || next_window > dl->total_windows)
        die("dataloader state: next_window %" PRId64 " is outside [0, %" PRId64 "] "
            "(shards '%s' ... '%s')", next_window, dl->total_windows, dl->paths[0],
            dl->paths[dl->num_shards - 1]);
    // a saved position is an optimizer step's start: anything else is not from this data's run
    if (next_window % windows_per_step(dl) != 0)
        die("dataloader state: next_window %" PRId64 " is not a multiple of an optimizer step's B*ranks*accum = "
            "%d*%d*%d windows (shards '%s' ... '%s')", next_window, dl->B, dl->world, dl->accum, dl->paths[0],
            dl->paths[dl->num_shards - 1]);
    dl->epoch = epoch;
    dl->next_window = next_window;
    ensure_epoch(dl);
}

uint32_t dataloader_fingerprint(const DataLoader *dl) {
    uLong crc = crc32(0L, Z_NULL, 0);
    for (int i = 0; i < dl->num_shards; i++) {
        const char *slash = strrchr(dl->paths[i], '/');
        const char *name = slash ? slash + 1 : dl->paths[i];
        unsigned char windows[8];
        for (int b = 0; b < 8; b++) windows[b] = (unsigned char)((uint64_t)dl->num_windows[i] >> (8 * b));
        crc = crc32(crc, (const Bytef *)name, (uInt)strlen(name) + 1);   // with its NUL: "ab","c" is not "a","bc"
        crc = crc32(crc, windows, sizeof(windows));
    }
    return (uint32_t)crc;
}

void dataloader_free(DataLoader *dl) {
    for (int i = 0; i < dl->num_shards; i++) free(dl->paths[i]);
    free(dl->paths);
    free(dl->num_windows);
    free(dl->shard_tokens);
    free(dl->window_perm);
    free(dl->shard_perm);
    free(dl->slot_first);
    free(dl->inputs);
    free(dl->targets);
    memset(dl, 0, sizeof(*dl));
    dl->cur_shard = -1;
}

void shard_write(const char *path, const int32_t *tokens, int64_t ntok) {
    if (ntok < 0 || ntok > INT32_MAX)
        die("shard '%s': token count %" PRId64 " does not fit the int32 header", path, ntok);
    for (int64_t i = 0; i < ntok; i++)
        if (tokens[i] < 0 || tokens[i] > 65535)
            die("shard '%s': token %" PRId64 " has value %d, outside uint16 [0, 65535]",
                path, i, tokens[i]);
    int32_t header[SHARD_HEADER_INTS] = {SHARD_MAGIC, SHARD_VERSION, (int32_t)ntok};
    AtomicFile af;
    atomic_file_open(&af, path);
    atomic_file_write(&af, header, sizeof(header));
    uint16_t buf[4096];
    for (int64_t i = 0; i < ntok; i += 4096) {
        int64_t n = ntok - i < 4096 ? ntok - i : 4096;
        for (int64_t j = 0; j < n; j++) buf[j] = (uint16_t)tokens[i + j];
        atomic_file_write(&af, buf, (size_t)n * sizeof(uint16_t));
    }
    atomic_file_commit(&af);
}
