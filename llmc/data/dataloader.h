// dataloader.h: llm.c token shards (256 int32 header: magic 20240520, version 1,
// token count; then uint16 tokens) read as windows of T+1 tokens.
//
// The data order is global and rank-independent: an epoch is a sequence of windows
// (shards in order, or in a seeded permutation when shuffling; inside a shard the
// windows at offsets k*T, likewise permuted). Every rank walks the same sequence; in
// each micro-step the world consumes B*world consecutive windows and rank r takes the
// r-th group of B. So the windows that make up one optimizer step depend only on
// (seed, B*world*grad_accum), never on how they are split across ranks.
//
// Exactly: in epoch e the shard order is the identity, or (shuffle) a Fisher-Yates
// permutation drawing rng_below(seed, RNG_STREAM_SHUFFLE, e << 32 | i, i + 1) at
// position i. Shard s's windows are likewise permuted, drawing from the sub-seed
// rng_u64(seed, RNG_STREAM_SHUFFLE, e << 32 | 1 << 31 | s) with index = position.
// Micro-batch i of the epoch covers sequence windows [i*B*world, (i+1)*B*world);
// rank r takes [i*B*world + r*B, +B). A train loader told the gradient accumulation
// (dataloader_set_accum) ends the epoch where fewer than B*world*accum windows are left
// at the start of an optimizer step; any other where fewer than B*world are left: those
// last windows of the epoch's order are skipped and the next epoch starts (with
// shuffling a fresh order, so different windows are skipped each epoch; without, the same). So an optimizer step's windows,
// and the micro-batch each belongs to in a split over ranks (micro-batch m of rank r is
// the step's (m * world + r)-th group of B), depend only on (seed, B, world * accum).
#ifndef LLMC_DATALOADER_H
#define LLMC_DATALOADER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER_INTS 256

typedef struct {
    char **paths;          // shard files, sorted by name (glob order)
    int num_shards;
    int64_t *num_windows;  // windows of T+1 tokens per shard: (ntok - 1) / T, 0 below T+1 tokens
    int64_t total_windows; // sum over shards
    int B, T, rank, world;
    int accum;             // micro-batches per optimizer step (dataloader_set_accum; default 1)
    int vocab_size;        // every token id must be below it
    int shuffle;
    uint64_t seed;
    // position in the global window sequence (the only state needed to resume)
    uint64_t epoch;
    int64_t next_window;   // index into this epoch's sequence of the world's next micro-batch
    // current shard, kept open/mapped
    int cur_shard;         // index into paths, -1 if none loaded
    uint16_t *shard_tokens;
    int64_t shard_ntok;
    int64_t *window_perm;  // permutation of the current shard's windows (NULL if not shuffling)
    int *shard_perm;       // this epoch's shard order
    int64_t *slot_first;   // num_shards+1: sequence index where each slot of shard_perm starts
    uint64_t perm_epoch;   // epoch that shard_perm, slot_first and window_perm belong to
    // outputs of next_batch: B*T each
    int *inputs;
    int *targets;
} DataLoader;

// pattern is a glob (e.g. "data/fineweb_train_*.bin"). Every matching shard's header
// and size are checked up front; a bad shard or no match exits with a message naming the
// file and the problem. A shard shorter than one window (T+1 tokens, as tokenize's last
// shard may be) holds none: rank 0 warns, naming it. Also exits when all shards together
// hold fewer than B windows (not one batch, which evaluation needs); training needs an
// optimizer step's B*world*accum, which dataloader_set_accum and next_batch check.
// Token ids must be < vocab_size (1..65536): each shard's tokens are scanned when it is
// first read into memory (before any of its windows is handed out), and an id outside
// the vocabulary exits naming the shard, the token's index and byte offset.
void dataloader_init(DataLoader *dl, const char *pattern, int B, int T, int vocab_size, int rank, int world,
                     int shuffle, uint64_t seed);
// Fills dl->inputs and dl->targets with this rank's next B windows; wraps to a new
// epoch (new permutation) when the sequence is exhausted. Exits naming the shards when
// they hold fewer windows than an optimizer step.
void dataloader_next_batch(DataLoader *dl);
// Fills inputs and targets with the epoch's batch number `batch` (windows [batch*B,
// batch*B + B) of the current epoch's sequence), whatever the rank: validation splits
// its batches over ranks by number. Exits naming the data when the batch is past the end.
void dataloader_load_batch(DataLoader *dl, int64_t batch);
// Micro-batches per optimizer step (default 1), for the epoch's end (above): a step never
// straddles two epochs, however it is split across ranks and micro-batches. Exits naming
// the shards when they hold fewer than B*world*accum windows.
void dataloader_set_accum(DataLoader *dl, int accum);
// Back to the start of epoch 0 (used for validation passes).
void dataloader_reset(DataLoader *dl);
// Resume support: the position is (epoch, next_window). set_state exits if
// next_window is outside [0, total_windows] or not an optimizer step's start (a multiple
// of B*world*accum, which every saved position is): call it after dataloader_set_accum.
void dataloader_get_state(const DataLoader *dl, uint64_t *epoch, int64_t *next_window);
void dataloader_set_state(DataLoader *dl, uint64_t epoch, int64_t next_window);
// Which data this is, for a resume to compare: CRC-32 of every shard's file name (without its
// folder, so moved data still matches) and window count, in order. The position
// (epoch, next_window) means the same windows only over the same fingerprint, T and shuffle.
uint32_t dataloader_fingerprint(const DataLoader *dl);
void dataloader_free(DataLoader *dl);

// Writes a shard atomically (header + uint16 tokens). Exits on error, on a token
// that does not fit uint16 (naming its index and value), or on ntok outside int32.
void shard_write(const char *path, const int32_t *tokens, int64_t ntok);

#ifdef __cplusplus
}
#endif
#endif
