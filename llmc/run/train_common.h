// train_common.h: small pieces both trainer loops share: timing, batch geometry,
// model selection from -e, printing sampled tokens.
#ifndef LLMC_TRAIN_COMMON_H
#define LLMC_TRAIN_COMMON_H

#include "../data/dataloader.h"
#include "../model/gpt2_config.h"
#include "../model/gpt2_model_file.h"
#include "../data/tokenizer.h"
#include "train_config.h"

#ifdef __cplusplus
extern "C" {
#endif

double now_seconds(void);
int file_exists(const char *path);

// -e: fills *c from a descriptor and returns 0, or opens an llm.c model file into *file
// (header and size checked, no parameter read yet) and returns 1. Exits naming the
// argument otherwise. Sharded trainers read their own ranges from *file, then close it.
int resolve_model_open(const char *model, GPT2Config *c, GPT2ModelFile *file);
// After a sharded load: rank 0's bytes read from the model file against the file's
// parameter bytes, and all ranks' together (the caller's all-reduce of bytes_read).
void print_model_file_read(const GPT2ModelFile *file, double bytes_all_ranks);
// -e for an unsharded trainer: all the fp32 parameters in a new buffer (caller frees): the
// whole model file, or a descriptor's init seeded with seed (gpt2_init_params).
float *resolve_model_params(const char *model, uint64_t seed, GPT2Config *c);
// --tile-linear and --tile-vocab against the model's shape (gpt2_tile_check,
// gpt2_vocab_tile_check): exits naming the flag and K and C, or KV and Vp, when K does not
// divide C or KV does not divide Vp.
void check_tiles(const TrainConfig *cfg, const GPT2Config *c);
// Exits when -t is longer than the model's positions (its max_seq_len).
void check_seq_len(const TrainConfig *cfg, const GPT2Config *c);
// Fills in -d's default (or --deepspeed's train_batch_size / gradient_accumulation_steps,
// DeepSpeed's rule) and returns the gradient accumulation steps; exits when the total
// batch is not a multiple of B*T*world.
int resolve_grad_accum(TrainConfig *cfg, int world);
// The token bytes the data loaders hold at once: the largest train shard, and with
// validation on the largest val shard (a loader holds one shard in memory; header left out).
size_t train_data_bytes(const TrainConfig *cfg);
// Opens this rank's train loader (and the val loader when validation is on; returns 1
// then) and resolves -x -1 to one epoch; exits when the data holds less than one step.
// Token ids must be below vocab_size (the model's V); a shard holding one is refused.
int open_data(TrainConfig *cfg, DataLoader *train, DataLoader *val, int rank, int world, int grad_accum,
              int vocab_size);
// This process's resident host memory now, and its peak since the start or the last
// reset, in bytes (Linux /proc/self/status VmRSS, VmHWM; 0 where unavailable).
size_t host_memory_now(void);
size_t host_memory_peak(void);
// Starts a new peak from the current resident size (/proc/self/clear_refs); returns 0,
// or -1 where the kernel does not allow it.
int host_memory_reset_peak(void);
// "dry run took 2.10 s and at most 57.3 MiB of host memory": the wall time since t0
// (now_seconds()) and the process's peak resident memory, after `what`.
void print_cost(const char *what, double t0);
// Loads the tokenizer for the samples if the file exists and has the model's vocab_size
// tokens (samples print token ids otherwise, saying why); returns 1 when it did. Samples
// start from its <|endoftext|> (*eot), or GPT-2's (50256) without one; a model whose tokens
// lack it gets sampling turned off (cfg->sample_every 0) with a note.
int load_sampling_tokenizer(Tokenizer *tok, TrainConfig *cfg, int vocab_size, int *eot);
// Prints a sampled token's bytes (multi-byte characters may span tokens; the terminal
// joins them), or its id when tok is NULL.
void print_token(const Tokenizer *tok, int id);

#ifdef __cplusplus
}
#endif
#endif
