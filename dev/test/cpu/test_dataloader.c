// test_dataloader.c: exact window contents, glob order, shuffling, rank independence,
// resume, shard_write, and that every kind of bad shard (token ids outside the
// vocabulary included) stops the process naming it.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../../llmc/data/dataloader.h"
#include "../common/test_util.h"

// Vocabulary size under which every uint16 token id is valid (tests not about ids).
#define ALL_IDS 65536

static char g_root[256]; // mkdtemp dir holding one subdirectory per test

// A fresh empty directory for one test.
static const char *test_dir(const char *name) {
    static char dir[512];
    snprintf(dir, sizeof(dir), "%s/%s", g_root, name);
    assert_int_equal(mkdir(dir, 0755), 0);
    return dir;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(path);
}

static int group_setup(void **state) {
    (void)state;
    snprintf(g_root, sizeof(g_root), "/tmp/test_dataloader_XXXXXX");
    return mkdtemp(g_root) ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    return nftw(g_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

// Shard whose tokens are first, first+1, ..., so a window is identified by its first token.
static void write_seq_shard(const char *path, int first, int64_t ntok) {
    int32_t *tok = malloc((size_t)ntok * sizeof(int32_t));
    for (int64_t i = 0; i < ntok; i++) tok[i] = first + (int32_t)i;
    shard_write(path, tok, ntok);
    free(tok);
}

// Hand-made shard: any header, any number of tokens actually written.
static void write_raw_shard(const char *path, int32_t magic, int32_t version, int32_t header_ntok,
                            int64_t written) {
    int32_t header[SHARD_HEADER_INTS] = {magic, version, header_ntok};
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(header, sizeof(header), 1, f), 1);
    for (int64_t i = 0; i < written; i++) {
        uint16_t t = (uint16_t)i;
        assert_int_equal(fwrite(&t, 2, 1, f), 1);
    }
    fclose(f);
}

// Appends the first token of each of this batch's windows to ids and checks that each
// window is consecutive tokens with targets = inputs shifted by one.
static void collect_ids(const DataLoader *dl, int *ids) {
    for (int b = 0; b < dl->B; b++) {
        const int *in = dl->inputs + (size_t)b * dl->T, *tg = dl->targets + (size_t)b * dl->T;
        for (int t = 0; t < dl->T; t++) {
            assert_int_equal(in[t], in[0] + t);
            assert_int_equal(tg[t], in[0] + t + 1);
        }
        ids[b] = in[0];
    }
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

typedef struct { const char *pattern; int B, T, world; } InitArgs;
// A train loader of B windows of T=8 at rank 0 of world, told accum, then micro_batches
// next_batch calls.
typedef struct { const char *pattern; int B, world, accum, micro_batches; } StepArgs;

static void train_steps(void *p) {
    const StepArgs *a = p;
    DataLoader dl;
    dataloader_init(&dl, a->pattern, a->B, 8, ALL_IDS, 0, a->world, 0, 0);
    dataloader_set_accum(&dl, a->accum);
    for (int i = 0; i < a->micro_batches; i++) dataloader_next_batch(&dl);
    dataloader_free(&dl);
}

static void init_and_free(void *p) {
    const InitArgs *a = p;
    DataLoader dl;
    dataloader_init(&dl, a->pattern, a->B, a->T, ALL_IDS, 0, a->world, 0, 0);
    dataloader_free(&dl);
}

// ----------------------------------------------------------------------------------

// Irregular token values; check every input and target against the array.
static void test_known_tokens(void **state) {
    (void)state;
    const char *dir = test_dir("known");
    char path[600];
    snprintf(path, sizeof(path), "%s/a.bin", dir);
    enum { N = 23, T = 5 }; // (23 - 1) / 5 = 4 windows, 2 tokens left over
    int32_t tok[N];
    for (int i = 0; i < N; i++) tok[i] = (i * 7919 + 11) % 65536;
    tok[3] = 65535; // the top of the range survives
    tok[4] = 0;
    shard_write(path, tok, N);

    DataLoader dl;
    dataloader_init(&dl, path, 2, T, ALL_IDS, 0, 1, 0, 0);
    assert_int_equal(dl.num_shards, 1);
    assert_int_equal(dl.num_windows[0], 4);
    assert_int_equal(dl.total_windows, 4);
    // windows 0,1 | 2,3 | (epoch 1) 0,1
    const int expect_win[3][2] = {{0, 1}, {2, 3}, {0, 1}};
    for (int step = 0; step < 3; step++) {
        dataloader_next_batch(&dl);
        for (int b = 0; b < 2; b++) {
            int k = expect_win[step][b];
            for (int t = 0; t < T; t++) {
                assert_int_equal(dl.inputs[b * T + t], tok[k * T + t]);
                assert_int_equal(dl.targets[b * T + t], tok[k * T + t + 1]);
            }
        }
    }
    assert_int_equal(dl.epoch, 1);
    dataloader_free(&dl);

    // B=3: one micro-batch per epoch, the 4th window is the skipped remainder
    dataloader_init(&dl, path, 3, T, ALL_IDS, 0, 1, 0, 0);
    for (int step = 0; step < 3; step++) {
        dataloader_next_batch(&dl);
        assert_int_equal(dl.epoch, (uint64_t)step);
        assert_int_equal(dl.next_window, 3);
        for (int i = 0; i < 3 * T; i++) {
            assert_int_equal(dl.inputs[i], tok[i]);
            assert_int_equal(dl.targets[i], tok[(i / T) * T + i % T + 1]);
        }
    }
    dataloader_free(&dl);
}

// Shards are taken in sorted name order whatever the creation order; files the pattern
// does not match are ignored; windows never straddle shards.
static void test_glob_order(void **state) {
    (void)state;
    const char *dir = test_dir("glob");
    char path[600], pattern[600];
    const int order[3] = {2, 0, 1}, ntok[3] = {11, 21, 16}; // 2, 4, 3 windows at T=5
    for (int i = 0; i < 3; i++) {
        int s = order[i];
        snprintf(path, sizeof(path), "%s/s_%d.bin", dir, s);
        write_seq_shard(path, s * 10000, ntok[s]);
    }
    snprintf(path, sizeof(path), "%s/other.bin", dir);
    write_seq_shard(path, 50000, 100);
    snprintf(pattern, sizeof(pattern), "%s/s_*.bin", dir);

    DataLoader dl;
    dataloader_init(&dl, pattern, 1, 5, ALL_IDS, 0, 1, 0, 0);
    assert_int_equal(dl.num_shards, 3);
    for (int s = 0; s < 3; s++) {
        snprintf(path, sizeof(path), "%s/s_%d.bin", dir, s);
        assert_string_equal(dl.paths[s], path);
        assert_int_equal(dl.num_windows[s], (ntok[s] - 1) / 5);
    }
    assert_int_equal(dl.total_windows, 9);
    const int expect[9] = {0, 5, 10000, 10005, 10010, 10015, 20000, 20005, 20010};
    for (int round = 0; round < 2; round++) // and again in epoch 1
        for (int i = 0; i < 9; i++) {
            int id;
            dataloader_next_batch(&dl);
            collect_ids(&dl, &id);
            assert_int_equal(id, expect[i]);
        }
    assert_int_equal(dl.epoch, 1);
    dataloader_free(&dl);
}

// Shards for the shuffle / rank / resume tests: 7 + 13 + 5 + 10 = 35 windows at T=4.
enum { SH_T = 4, SH_SHARDS = 4, SH_TOTAL = 35 };
static const char *make_shuffle_shards(const char *name) {
    static char pattern[600];
    const char *dir = test_dir(name);
    const int windows[SH_SHARDS] = {7, 13, 5, 10}, extra[SH_SHARDS] = {0, 3, 1, 2};
    char path[600];
    for (int s = 0; s < SH_SHARDS; s++) {
        snprintf(path, sizeof(path), "%s/train_%02d.bin", dir, s);
        write_seq_shard(path, s * 10000, windows[s] * SH_T + 1 + extra[s]);
    }
    snprintf(pattern, sizeof(pattern), "%s/train_*.bin", dir);
    return pattern;
}

// One epoch of window ids with B=1, world=1 (no remainder, so the whole epoch).
static void shuffled_epochs(const char *pattern, uint64_t seed, int epochs, int *ids) {
    DataLoader dl;
    dataloader_init(&dl, pattern, 1, SH_T, ALL_IDS, 0, 1, 1, seed);
    for (int i = 0; i < epochs * SH_TOTAL; i++) {
        dataloader_next_batch(&dl);
        assert_int_equal(dl.epoch, (uint64_t)(i / SH_TOTAL));
        collect_ids(&dl, &ids[i]);
    }
    dataloader_free(&dl);
}

static void test_shuffle(void **state) {
    (void)state;
    const char *pattern = make_shuffle_shards("shuffle");
    int all[SH_TOTAL], n = 0;
    const int windows[SH_SHARDS] = {7, 13, 5, 10};
    for (int s = 0; s < SH_SHARDS; s++)
        for (int k = 0; k < windows[s]; k++) all[n++] = s * 10000 + k * SH_T;

    enum { E = 8 };
    int a[E * SH_TOTAL], b[E * SH_TOTAL], a2[E * SH_TOTAL];
    shuffled_epochs(pattern, 1234, E, a);
    shuffled_epochs(pattern, 1234, E, a2);
    shuffled_epochs(pattern, 99, E, b);
    assert_memory_equal(a, a2, sizeof(a)); // deterministic in the seed
    for (int e = 0; e < E; e++) {
        int sorted[SH_TOTAL];
        memcpy(sorted, a + e * SH_TOTAL, sizeof(sorted));
        qsort(sorted, SH_TOTAL, sizeof(int), cmp_int);
        assert_memory_equal(sorted, all, sizeof(all)); // every window exactly once
        // a shard is consumed in one run: the shard changes exactly SH_SHARDS-1 times
        int changes = 0;
        for (int i = 1; i < SH_TOTAL; i++)
            changes += a[e * SH_TOTAL + i] / 10000 != a[e * SH_TOTAL + i - 1] / 10000;
        assert_int_equal(changes, SH_SHARDS - 1);
    }
    assert_memory_not_equal(a, all, sizeof(all));                   // not the file order
    assert_memory_not_equal(a, a + SH_TOTAL, sizeof(all));          // epochs differ
    assert_memory_not_equal(a + SH_TOTAL, a + 2 * SH_TOTAL, sizeof(all));
    assert_memory_not_equal(a, b, sizeof(all));                     // seeds differ

    // both levels move with the epoch: the shard order, and the order inside a shard
    int shard_order[E][SH_SHARDS], inner[E][SH_TOTAL];
    for (int e = 0; e < E; e++) {
        int m = 0;
        for (int i = 0; i < SH_TOTAL; i++) {
            int id = a[e * SH_TOTAL + i];
            if (i == 0 || id / 10000 != a[e * SH_TOTAL + i - 1] / 10000)
                shard_order[e][m++] = id / 10000;
        }
        m = 0; // windows regrouped by shard, each shard's in its epoch order
        for (int s = 0; s < SH_SHARDS; s++)
            for (int i = 0; i < SH_TOTAL; i++)
                if (a[e * SH_TOTAL + i] / 10000 == s) inner[e][m++] = a[e * SH_TOTAL + i];
    }
    int shard_moves = 0, inner_moves = 0;
    for (int e = 1; e < E; e++) {
        shard_moves += memcmp(shard_order[e], shard_order[0], sizeof(shard_order[0])) != 0;
        inner_moves += memcmp(inner[e], inner[0], sizeof(inner[0])) != 0;
    }
    assert_true(shard_moves > 0);
    assert_int_equal(inner_moves, E - 1);

    // shuffle=0 is the file order, epoch after epoch
    DataLoader dl;
    dataloader_init(&dl, pattern, 1, SH_T, ALL_IDS, 0, 1, 0, 1234);
    for (int i = 0; i < 2 * SH_TOTAL; i++) {
        int id;
        dataloader_next_batch(&dl);
        collect_ids(&dl, &id);
        assert_int_equal(id, all[i % SH_TOTAL]);
    }
    dataloader_free(&dl);
}

// The world's windows per micro-batch (ranks concatenated) depend only on B*world.
static void world_sequence(const char *pattern, int B, int world, int steps, int *ids,
                           uint64_t *epochs) {
    for (int r = 0; r < world; r++) {
        DataLoader dl;
        dataloader_init(&dl, pattern, B, SH_T, ALL_IDS, r, world, 1, 7);
        for (int i = 0; i < steps; i++) {
            dataloader_next_batch(&dl);
            collect_ids(&dl, ids + (size_t)i * B * world + (size_t)r * B);
            epochs[i] = dl.epoch;
        }
        dataloader_free(&dl);
    }
}

static void test_rank_independence(void **state) {
    (void)state;
    const char *pattern = make_shuffle_shards("ranks");
    enum { STEPS = 20, GLOBAL = 8 }; // 35 windows: 4 micro-batches an epoch, 3 skipped
    const int worlds[4] = {1, 2, 4, 8};
    int ref[STEPS * GLOBAL], ids[STEPS * GLOBAL];
    uint64_t ref_ep[STEPS], ep[STEPS];
    world_sequence(pattern, GLOBAL, 1, STEPS, ref, ref_ep);
    for (int i = 0; i < STEPS; i++) assert_int_equal(ref_ep[i], (uint64_t)(i / 4));
    for (int w = 1; w < 4; w++) {
        world_sequence(pattern, GLOBAL / worlds[w], worlds[w], STEPS, ids, ep);
        assert_memory_equal(ids, ref, sizeof(ref));
        assert_memory_equal(ep, ref_ep, sizeof(ref_ep));
    }
    // within an epoch no window repeats, and the first 32 of the epoch's order are used
    int one[SH_TOTAL];
    shuffled_epochs(pattern, 7, 1, one);
    assert_memory_equal(ref, one, 4 * GLOBAL * sizeof(int));
}

// Resuming from any saved state reproduces the uninterrupted run, across epochs.
static void test_resume_and_reset(void **state) {
    (void)state;
    const char *pattern = make_shuffle_shards("resume");
    enum { B = 3, WORLD = 2, RANK = 1, STEPS = 30 }; // 5 micro-batches an epoch
    const size_t n = (size_t)B * SH_T;
    int *ref_in = malloc(STEPS * n * sizeof(int)), *ref_tg = malloc(STEPS * n * sizeof(int));
    DataLoader dl;
    dataloader_init(&dl, pattern, B, SH_T, ALL_IDS, RANK, WORLD, 1, 42);
    for (int i = 0; i < STEPS; i++) {
        dataloader_next_batch(&dl);
        memcpy(ref_in + i * n, dl.inputs, n * sizeof(int));
        memcpy(ref_tg + i * n, dl.targets, n * sizeof(int));
    }
    dataloader_free(&dl);

    const int stops[5] = {0, 4, 5, 11, 29};
    for (int si = 0; si < 5; si++) {
        uint64_t epoch;
        int64_t next;
        dataloader_init(&dl, pattern, B, SH_T, ALL_IDS, RANK, WORLD, 1, 42);
        for (int i = 0; i < stops[si]; i++) dataloader_next_batch(&dl);
        dataloader_get_state(&dl, &epoch, &next);
        dataloader_free(&dl);

        dataloader_init(&dl, pattern, B, SH_T, ALL_IDS, RANK, WORLD, 1, 42);
        dataloader_next_batch(&dl); // some unrelated position and loaded shard first
        dataloader_set_state(&dl, epoch, next);
        for (int i = stops[si]; i < STEPS; i++) {
            dataloader_next_batch(&dl);
            assert_memory_equal(dl.inputs, ref_in + i * n, n * sizeof(int));
            assert_memory_equal(dl.targets, ref_tg + i * n, n * sizeof(int));
        }
        dataloader_free(&dl);
    }

    // reset: back to epoch 0 window 0 after running into a later epoch
    dataloader_init(&dl, pattern, B, SH_T, ALL_IDS, RANK, WORLD, 1, 42);
    for (int i = 0; i < 13; i++) dataloader_next_batch(&dl);
    dataloader_reset(&dl);
    assert_int_equal(dl.epoch, 0);
    assert_int_equal(dl.next_window, 0);
    for (int i = 0; i < 7; i++) {
        dataloader_next_batch(&dl);
        assert_memory_equal(dl.inputs, ref_in + i * n, n * sizeof(int));
        assert_memory_equal(dl.targets, ref_tg + i * n, n * sizeof(int));
    }
    dataloader_free(&dl);
    free(ref_in);
    free(ref_tg);
}

// The bytes on disk are exactly the format, and no temp file is left behind.
static void test_shard_write_format(void **state) {
    (void)state;
    const char *dir = test_dir("write");
    char path[600];
    snprintf(path, sizeof(path), "%s/w.bin", dir);
    enum { N = 10000 }; // more than one internal chunk
    int32_t *tok = malloc(N * sizeof(int32_t));
    for (int i = 0; i < N; i++) tok[i] = (i * 40503) % 65536;
    tok[0] = 65535;
    shard_write(path, tok, N);

    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    int32_t header[SHARD_HEADER_INTS];
    assert_int_equal(fread(header, sizeof(header), 1, f), 1);
    assert_int_equal(header[0], SHARD_MAGIC);
    assert_int_equal(header[1], SHARD_VERSION);
    assert_int_equal(header[2], N);
    for (int i = 3; i < SHARD_HEADER_INTS; i++) assert_int_equal(header[i], 0);
    uint16_t *got = malloc(N * sizeof(uint16_t));
    assert_int_equal(fread(got, sizeof(uint16_t), N, f), N);
    for (int i = 0; i < N; i++) assert_int_equal(got[i], tok[i]);
    assert_int_equal(fgetc(f), EOF);
    fclose(f);
    free(got);
    free(tok);

    char cmd[700];
    snprintf(cmd, sizeof(cmd), "test \"$(ls -A '%s')\" = w.bin", dir);
    assert_int_equal(system(cmd), 0);
}

typedef struct { const char *path; int32_t bad; int at; } WriteArgs;

static void write_bad_token(void *p) {
    const WriteArgs *a = p;
    int32_t tok[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    tok[a->at] = a->bad;
    shard_write(a->path, tok, 8);
}

static void test_shard_write_bad_token(void **state) {
    (void)state;
    const char *dir = test_dir("write_bad");
    char path[600];
    snprintf(path, sizeof(path), "%s/bad.bin", dir);
    WriteArgs a = {path, -1, 3};
    expect_death(write_bad_token, &a, DEATH_ANY_STATUS, path, "token 3 has value -1", NULL);
    WriteArgs b = {path, 65536, 6};
    expect_death(write_bad_token, &b, DEATH_ANY_STATUS, path, "token 6 has value 65536", NULL);
    assert_int_equal(access(path, F_OK), -1); // nothing written
}

// Each bad shard sits beside a good one; init must exit naming the bad file.
static void test_bad_shards(void **state) {
    (void)state;
    const char *dir = test_dir("bad");
    char good[700], bad[700], pattern[700];
    InitArgs a = {pattern, 1, 8, 1};
    struct { const char *name, *needle; int32_t magic, version, ntok; int64_t written; } cases[] = {
        {"magic", "bad magic 20240521", SHARD_MAGIC + 1, SHARD_VERSION, 100, 100},
        {"version", "unsupported version 2", SHARD_MAGIC, 2, 100, 100},
        {"truncated", "size 1222 bytes, expected 1224", SHARD_MAGIC, SHARD_VERSION, 100, 99},
        {"overlong", "size 1226 bytes, expected 1224", SHARD_MAGIC, SHARD_VERSION, 100, 101},
        {"negative", "negative token count -5", SHARD_MAGIC, SHARD_VERSION, -5, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char sub[600];
        snprintf(sub, sizeof(sub), "%s/%s", dir, cases[i].name);
        assert_int_equal(mkdir(sub, 0755), 0);
        snprintf(good, sizeof(good), "%s/a_good.bin", sub);
        snprintf(bad, sizeof(bad), "%s/b_%s.bin", sub, cases[i].name);
        snprintf(pattern, sizeof(pattern), "%s/*.bin", sub);
        write_seq_shard(good, 0, 100);
        write_raw_shard(bad, cases[i].magic, cases[i].version, cases[i].ntok, cases[i].written);
        expect_death(init_and_free, &a, DEATH_ANY_STATUS, bad, cases[i].needle, NULL);
    }
    // shorter than one window (tokenize's last shard may be): a warning naming it, no
    // windows of its own; the good shard's 12 are all there
    {
        char sub[600], msg[4096];
        snprintf(sub, sizeof(sub), "%s/short", dir);
        assert_int_equal(mkdir(sub, 0755), 0);
        snprintf(good, sizeof(good), "%s/a_good.bin", sub);
        snprintf(bad, sizeof(bad), "%s/b_short.bin", sub);
        snprintf(pattern, sizeof(pattern), "%s/*.bin", sub);
        write_seq_shard(good, 0, 100);
        write_raw_shard(bad, SHARD_MAGIC, SHARD_VERSION, 8, 8);
        int rc = run_in_child(init_and_free, &a, msg, sizeof(msg));
        if (rc != 0 || !strstr(msg, bad) || !strstr(msg, "8 tokens, fewer than T+1 = 9: it holds no window"))
            fail_msg("a shard shorter than a window: status %d, output: %s", rc, msg);
        DataLoader dl;
        dataloader_init(&dl, pattern, 1, 8, ALL_IDS, 1, 2, 0, 0);   // rank 1: no warning to print
        assert_int_equal(dl.total_windows, 12);
        assert_int_equal(dl.num_windows[1], 0);
        dataloader_set_accum(&dl, 1);
        for (int i = 0; i < 12; i++) dataloader_next_batch(&dl);   // 2 epochs of 6 steps, all from a_good
        dataloader_free(&dl);
    }
    // shorter than the header itself
    snprintf(bad, sizeof(bad), "%s/tiny.bin", dir);
    FILE *f = fopen(bad, "wb");
    assert_non_null(f);
    fputs("not a shard", f);
    fclose(f);
    snprintf(pattern, sizeof(pattern), "%s", bad);
    expect_death(init_and_free, &a, DEATH_ANY_STATUS, bad, "smaller than the 1024-byte header", NULL);
}

typedef struct { const char *pattern; int vocab; int batches; } ReadArgs;

// Reads `batches` micro-batches of B=1, T=8 with the given vocabulary.
static void read_batches(void *p) {
    const ReadArgs *a = p;
    DataLoader dl;
    dataloader_init(&dl, a->pattern, 1, 8, a->vocab, 0, 1, 0, 0);
    for (int i = 0; i < a->batches; i++) dataloader_next_batch(&dl);
    dataloader_free(&dl);
}

// A token id the model has no embedding row for (GPT-2: V = 50257) is refused when its
// shard is first read, naming the shard, the token's index and its byte offset; ids up
// to V-1 pass. The good shard comes first, so the bad one is only read mid-epoch.
static void test_token_ids_outside_vocab(void **state) {
    (void)state;
    const char *dir = test_dir("vocab");
    char good[600], bad[600], pattern[600];
    snprintf(good, sizeof(good), "%s/a_good.bin", dir);
    snprintf(bad, sizeof(bad), "%s/b_bad.bin", dir);
    snprintf(pattern, sizeof(pattern), "%s/*.bin", dir);
    enum { V = 50257, N = 2001 };  // 250 windows of T=8 per shard
    int32_t tok[N];
    for (int i = 0; i < N; i++) tok[i] = (i * 7919) % V;
    tok[17] = V - 1;  // the largest valid id
    shard_write(good, tok, N);
    tok[1234] = 50300;
    shard_write(bad, tok, N);
    // the good shard alone: a whole epoch and more reads fine
    ReadArgs ok = {good, V, 300};
    char msg[4096];
    int rc = run_in_child(read_batches, &ok, msg, sizeof(msg));
    if (rc != 0) fail_msg("the good shard was refused (status %d): %s", rc, msg);
    // both: refused as soon as the second shard is read, before any of its windows
    ReadArgs both = {pattern, V, 251};
    expect_death(read_batches, &both, DEATH_ANY_STATUS, bad, "token 1234 (byte offset 3492) is 50300",
                 "vocabulary [0, 50257)", NULL);
    ReadArgs first = {pattern, V, 250};  // the good shard's 250 windows are served
    rc = run_in_child(read_batches, &first, msg, sizeof(msg));
    if (rc != 0) fail_msg("windows of the good shard were refused (status %d): %s", rc, msg);
    // the boundary: with V = 50300 that token is still one too large, with 50301 it is fine
    ReadArgs edge = {pattern, 50300, 251};
    expect_death(read_batches, &edge, DEATH_ANY_STATUS, bad, "token 1234", NULL);
    ReadArgs wide = {pattern, 50301, 500};
    rc = run_in_child(read_batches, &wide, msg, sizeof(msg));
    if (rc != 0) fail_msg("V = 50301 refused token 50300 (status %d): %s", rc, msg);
}

static void test_bad_setup(void **state) {
    (void)state;
    const char *dir = test_dir("setup");
    char pattern[600], path[600];
    snprintf(pattern, sizeof(pattern), "%s/nothing_*.bin", dir);
    InitArgs a = {pattern, 1, 8, 1};
    expect_death(init_and_free, &a, DEATH_ANY_STATUS, pattern, "no shard files match", NULL);

    // 3 windows of T=8: not one batch of B=4; enough for evaluation's B=2 at 2 ranks (a
    // batch each round), not to train B*world = 2*2
    snprintf(path, sizeof(path), "%s/small.bin", dir);
    write_seq_shard(path, 0, 3 * 8 + 1);
    InitArgs b = {path, 4, 8, 1};
    expect_death(init_and_free, &b, DEATH_ANY_STATUS, path, "fewer than one batch of B = 4", NULL);
    InitArgs c = {path, 2, 8, 2};
    init_and_free(&c);
    StepArgs d = {path, 2, 2, 1, 0};
    expect_death(train_steps, &d, DEATH_ANY_STATUS, path, "3 windows of T+1=9 tokens, fewer than one optimizer step",
                 "2*2*1", NULL);
    StepArgs e = {path, 1, 3, 1, 5};   // exactly enough is fine
    train_steps(&e);
    // 10 windows, B=4 at 1 rank: two micro-batches fit, an optimizer step of 4 does not
    snprintf(path, sizeof(path), "%s/ten.bin", dir);
    write_seq_shard(path, 0, 10 * 8 + 1);
    StepArgs f = {path, 4, 1, 4, 3};
    expect_death(train_steps, &f, DEATH_ANY_STATUS, path, "fewer than one optimizer step", "4*1*4", NULL);
    StepArgs g = {path, 4, 1, 2, 9};   // 8 windows a step: one step an epoch, 2 windows skipped
    train_steps(&g);
}

static void set_bad_state(void *p) {
    DataLoader dl;
    dataloader_init(&dl, (const char *)p, 1, 8, ALL_IDS, 0, 1, 0, 0);
    dataloader_set_state(&dl, 0, dl.total_windows + 1);
}

// 100 windows, B=4 at 1 rank with accumulation 2: a position inside a step (97, or 4)
// is none a run saves; resumed there, the next batch would read past the last window.
static void set_unaligned_state(void *p) {
    DataLoader dl;
    dataloader_init(&dl, (const char *)p, 4, 8, ALL_IDS, 0, 1, 0, 0);
    dataloader_set_accum(&dl, 2);
    dataloader_set_state(&dl, 0, 16);   // a step's start: fine
    dataloader_set_state(&dl, 0, 96);   // the last step's end: fine (the next batch starts a new epoch)
    dataloader_set_state(&dl, 0, 97);
}

static void test_bad_state(void **state) {
    (void)state;
    const char *dir = test_dir("state");
    char path[600];
    snprintf(path, sizeof(path), "%s/s.bin", dir);
    write_seq_shard(path, 0, 3 * 8 + 1);
    expect_death(set_bad_state, path, DEATH_ANY_STATUS, path, "next_window 4 is outside [0, 3]", NULL);
    snprintf(path, sizeof(path), "%s/hundred.bin", dir);
    write_seq_shard(path, 0, 100 * 8 + 1);
    expect_death(set_unaligned_state, path, DEATH_ANY_STATUS, path,
                 "next_window 97 is not a multiple of an optimizer step's B*ranks*accum = 4*1*2", NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_tokens),
        cmocka_unit_test(test_glob_order),
        cmocka_unit_test(test_shuffle),
        cmocka_unit_test(test_rank_independence),
        cmocka_unit_test(test_resume_and_reset),
        cmocka_unit_test(test_shard_write_format),
        cmocka_unit_test(test_shard_write_bad_token),
        cmocka_unit_test(test_bad_shards),
        cmocka_unit_test(test_token_ids_outside_vocab),
        cmocka_unit_test(test_bad_setup),
        cmocka_unit_test(test_bad_state),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
