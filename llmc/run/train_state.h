// train_state.h: what a checkpoint holds besides the weights and the AdamW moments.
//  - where the run is: the step and the data position;
//  - what the run must match to go on: the model's shape, T, tokens per step, the seed and
//    the training data (which shards, which windows, shuffled or not);
//  - what decides its next steps bit for bit: the t of the last applied update (bf16
//    weights are a stochastic rounding keyed by it, so a skipped last step matters) and
//    the skip detectors' memory (step_skip.h).
// Every trainer builds one at start, records each step's verdict in it, saves a copy with
// each checkpoint (the unsharded format field by field, the sharded ones as zero_save's
// trainer blob) and resumes through train_state_resume.
#ifndef LLMC_TRAIN_STATE_H
#define LLMC_TRAIN_STATE_H

#include <stdint.h>

#include "../data/dataloader.h"
#include "../model/gpt2_config.h"
#include "step_skip.h"
#include "train_config.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int32_t shards;          // train shards -i matched
    int32_t shuffle;         // --shuffle
    int64_t windows;         // their windows of T+1 tokens in all
    uint32_t fingerprint;    // dataloader_fingerprint
    uint32_t reserved;       // 0
} DataIdentity;

// Plain data with no implicit padding (the reserved fields are 0): the sharded trainers
// store its bytes as they are in memory.
typedef struct {
    int step;               // optimizer steps completed
    GPT2Config config;
    int32_t reserved0;
    uint64_t seed;
    uint64_t data_epoch;    // train loader position
    int64_t data_next_window;
    int B, T, world;
    int32_t reserved1;
    int64_t tokens_per_step;
    // Sharded checkpoints of format 1 hold the fields above only: TRAIN_STATE_V1_BYTES.
    int last_t;             // t of the last applied update (0: none yet); step minus trailing skips
    int32_t reserved2;
    DataIdentity data;
    StepSkipState skip;
} TrainState;
#define TRAIN_STATE_V1_BYTES 80

// The state of a run at step 0 over the train loader.
TrainState train_state_new(const GPT2Config *c, const TrainConfig *cfg, int world, const DataLoader *train);
// Records step's verdict (0-based step): an applied update's t is step + 1.
void train_state_stepped(TrainState *st, int step, int skipped);
// What a checkpoint at `step` saves: st with the step, the loader's position and the skip
// detectors' memory.
TrainState train_state_at(const TrainState *st, int step, const DataLoader *train);
// Resume: checks that saved (read from the checkpoint ckpt names: a file, or a sharded
// checkpoint's folder) can continue the run *run describes, which trains max_steps steps
// (-x), and exits naming ckpt and the differing field; then moves the loader to the saved
// position, restores the skip detectors and takes the saved step and last_t into *run.
// Returns the saved step.
int train_state_resume(TrainState *run, const TrainState *saved, int max_steps, DataLoader *train, const char *ckpt);

#ifdef __cplusplus
}
#endif
#endif
