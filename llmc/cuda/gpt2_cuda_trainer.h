// gpt2_cuda_trainer.h: what both CUDA trainers (train_gpt2.cu, train_gpt2_zero.cu) do with
// the CUDA model besides the training step: validation, text samples, and the figures of
// its memory (the unsharded table, and a dry run's prediction without a GPU).
#ifndef LLMC_GPT2_CUDA_TRAINER_H
#define LLMC_GPT2_CUDA_TRAINER_H

#include "../run/checkpoint.h"
#include "../data/dataloader.h"
#include "gpt2_cuda.h"
#include "../data/tokenizer.h"
#include "../run/validation.h"
#include "../run/train_config.h"

#ifdef __cplusplus
extern "C" {
#endif

// Exit status of a CUDA trainer that finds no usable CUDA device (no driver, a driver older
// than the runtime, no GPU): EX_UNAVAILABLE of sysexits.h, so that a script can tell it from
// a failed run and train on the CPU instead (scripts/train.sh).
#define GPT2_CUDA_EXIT_NO_DEVICE 69
// The number of CUDA devices; exits with GPT2_CUDA_EXIT_NO_DEVICE, saying why, when the CUDA
// runtime finds none.
int gpt2_cuda_require_device(void);

// Waits for all the device's queued work (a step's update, before its time is taken).
void gpt2_cuda_wait_device(void);

// Mean loss over the first max_batches (< 0: all) validation batches of B sequences, dealt
// to the ranks by number and added in batch order (../run/validation.h): every world size
// gives the same bits. sum_ranks sums the per-batch slots over ranks; NULL: one rank.
float gpt2_cuda_validate(GPT2Cuda *model, DataLoader *val, int max_batches, SumRanks sum_ranks, void *ctx);

// Generates gen_tokens after an <|endoftext|> prompt (eot) and prints them when `print` (every rank of a
// ZeRO run runs the forward: stage 3 gathers). The coins depend only on (seed, step).
void gpt2_cuda_sample(GPT2Cuda *model, const Tokenizer *tok, int eot, int gen_tokens, uint64_t seed, int step, int print);

// The unsharded trainer's checkpoints (llmc/run/checkpoint.h: fp32 master, AdamW moments and
// the training state in one file, and model_STEP.bin beside it), through host copies made
// for the call. Loading re-derives the bf16 weights with the rounding of the last applied
// update (TrainState.last_t: a skipped step leaves the weights of the one before).
void gpt2_cuda_checkpoint_save(GPT2Cuda *model, const char *out_dir, const TrainState *st, int keep, int major);
void gpt2_cuda_checkpoint_load(GPT2Cuda *model, const char *out_dir, int step, TrainState *saved);
// OUT/model_final.bin from the fp32 master, as every trainer writes it.
void gpt2_cuda_export_final(GPT2Cuda *model, const char *out_dir);

// The unsharded model's memory in the layout of the ZeRO table. Device: gpt2_cuda_build's
// buffers (activations with the model's workspaces: attention, reduction scratch, cuBLASLt,
// as the ZeRO trainer counts them). Host: act_offload's pinned block inputs (a checkpoint's
// save or load holds host copies of the master and moments, 12 bytes a parameter, only
// while it lasts).
void gpt2_cuda_print_memory(const GPT2Cuda *model, const TrainConfig *cfg);

// The model flags (-r, --act-checkpoint, --act-offload, --tile-linear) against the model's
// shape (gpt2_cuda_check_options): exits naming the flags and the reason when they do not fit.
void gpt2_cuda_check_flags(const GPT2Config *c, const GPT2CudaOptions *opt);

// Everything the model holds on the device besides parameters, gradients and optimizer
// state (activations, workspaces, cuBLASLt): what a ZeRO report counts as activations.
size_t gpt2_cuda_activation_bytes(const GPT2Cuda *model);

// The same, predicted without a GPU for cfg's B, T, recompute and attention, with a line
// that breaks it down (a dry run); *host_bytes: activations in pinned host memory (act_offload).
// cuDNN is assumed to take every shape it is asked for with head sizes that are multiples of 8.
// *file_bytes: 0 (the CUDA model keeps no swap file).
size_t gpt2_cuda_predicted_activation_bytes(const GPT2Config *c, const TrainConfig *cfg, size_t *host_bytes,
                                            size_t *file_bytes);

#ifdef __cplusplus
}
#endif
#endif
