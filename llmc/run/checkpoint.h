// checkpoint.h: training state of the unsharded trainers (CPU and CUDA), enough to
// continue bit-exactly: fp32 parameters, AdamW moments and the TrainState (train_state.h).
//
// OUT/ckpt_SSSSSSSS.bin  4096-byte header (the TrainState), params, m, v (fp32), then a
//                        trailer with the CRC-32 of everything before it. Written
//                        atomically and read back to verify before it is declared the
//                        latest. Version 1 files (a 1024-byte header without the last
//                        applied step, the skip detectors and the data identity) are refused
//                        with a message saying so.
// OUT/latest             text: the step of the newest verified checkpoint.
// OUT/model_SSSSSSSS.bin the parameters as an llm.c model file (fp32, version 3), written
//                        after `latest`: a failed export never hides a good checkpoint.
// OUT/model_final.bin    the parameters at the end of a run.
// Every trainer names its model files so: the sharded ones export model_SSSSSSSS.bin
// beside each checkpoint OUT/zero_S/ too.
// The previous checkpoint is kept until the next one is verified, so a crash during
// a save never loses the last good state. Pruning removes only regular files named exactly
// so (ckpt_5.bin, a symbolic link or a folder named like one are left alone), and the
// sharded trainers' pruning (zero/checkpoint.c) only the files its format writes.
// Loading checks the step inside a checkpoint against its name.
#ifndef LLMC_CHECKPOINT_H
#define LLMC_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "../model/gpt2_config.h"
#include "../model/gpt2_model_file.h"
#include "train_state.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CKPT_MAGIC 0x54504b4332545047ULL // "GPT2CKPT" little-endian
#define CKPT_VERSION 2


// Saves step's checkpoint into out_dir, verifies it, updates "latest", then exports the
// model file and prunes (-nk, -nm): of the checkpoints and model files at or below this
// step the `keep` newest stay (0: all), and those whose step is a multiple of `major`
// (0: none); any above it go.
void checkpoint_save(const char *out_dir, const TrainState *st, const float *params,
                     const float *m, const float *v, size_t n, int keep, int major);
// For -y 1: the step of the newest checkpoint named by out_dir/latest, or -1 when there is
// none and nothing else either. When there is no `latest` but out_dir holds checkpoints all
// the same (the sharded trainers' zero_S/ and latest_zero, or ckpt_ files whose `latest` was
// deleted) it exits saying what is there: a fresh start would lose them (see below).
int checkpoint_latest(const char *out_dir);
// Which trainers' checkpoints a -y 1 run resumes: these (ckpt_, latest) or the sharded
// ones (zero_S/, latest_zero).
typedef enum { CHECKPOINT_UNSHARDED, CHECKPOINT_SHARDED } CheckpointKind;
// Whether a run may start in out_dir, which holds checkpoints of either kind: returns 1 with
// a message saying what is there in why when it may not, 0 to resume or start. With resume
// (-y 1): when out_dir has no pointer file of `kind` (latest, latest_zero) to resume from, a
// fresh start would truncate main.log and overwrite their model files. Without: a new run
// would do that and remove (or, without -n, leave for a later -y 1 to mistake for its own)
// the earlier run's checkpoints.
int checkpoint_fresh_start_refused(const char *out_dir, CheckpointKind kind, int resume, char *why, size_t len);
// A run without -y 1: exits saying what is there when out_dir holds checkpoints of either kind.
void checkpoint_new_run_check(const char *out_dir);
// Loads and verifies (magic, version, sizes, CRC); exits naming the file on any
// mismatch. params/m/v must hold n floats where n is the model's parameter count.
void checkpoint_load(const char *out_dir, int step, TrainState *st, float *params, float *m,
                     float *v, size_t n);
// OUT/ckpt_SSSSSSSS.bin into buf.
void checkpoint_path(char *buf, size_t len, const char *out_dir, int step);
// OUT/model_SSSSSSSS.bin (step >= 0) or OUT/model_final.bin (step < 0) into buf.
void checkpoint_model_path(char *buf, size_t len, const char *out_dir, int step);
// 1 when OUT/model_SSSSSSSS.bin (its path into path) does not exist: the run that saved the
// step's checkpoint was stopped before its export, which comes after `latest` or `latest_zero`
// moves. Resuming writes it (checkpoint_load; gpt2_zero_load_checkpoint).
int checkpoint_model_missing(const char *out_dir, int step, char *path, size_t len);
// The sharded trainers' model file of a step's checkpoint (step >= 0; the model files are
// then pruned with keep and major as checkpoint_save does) or of the end
// (step < 0), streamed piece by piece from src (gpt2_model_file_export). Collective:
// every rank calls it, rank 0 writes and prints its name.
void checkpoint_export_model(const char *out_dir, int step, int rank, const GPT2Config *c, const GPT2ModelSource *src,
                             int keep, int major);

#ifdef __cplusplus
}
#endif
#endif
