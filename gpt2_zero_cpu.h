/*
gpt2_zero_cpu.h: the CPU trainer (train_gpt2.c) under -z STAGE, as the hooks of its loop.

train_gpt2.c's main is the unsharded training loop. Where a ZeRO run does something else
(who holds the parameters, gradients and AdamW moments: the model itself, or the plugin's
shards on the host backend) main calls a hook of a CpuHooks: train_gpt2.c's own hooks run
the unsharded trainer, gpt2_zero_cpu_hooks() the ZeRO one (gpt2_zero.h's glue, shared with
train_gpt2_zero.cu, plus the host backend and what the CPU model allocates).
*/
#ifndef GPT2_ZERO_CPU_H
#define GPT2_ZERO_CPU_H

#include "llmc/cpu/gpt2_cpu.h"
#include "llmc/data/dataloader.h"
#include "llmc/model/gpt2_model_file.h"
#include "llmc/run/checkpoint.h"
#include "llmc/run/train_config.h"
#include "llmc/run/validation.h"

// What the hooks share with main: the run's settings, the model, the world.
typedef struct {
    TrainConfig *cfg;
    GPT2 *model;
    GPT2Config config;          // the model's shape (from its descriptor or file)
    int rank, world;
    int local_ranks;            // ranks on this node (OpenMP threads: cores / local_ranks)
    const char *local_ranks_from;   // where local_ranks came from, for threads.h's line
    void *zero;                 // the ZeRO side's state; NULL unsharded
    float *ahead;               // unsharded --dpu: the master one update ahead of the parameters the
                                //   model trains on (NULL: none in flight)
} CpuTrainer;

// The loop's hooks, in the order main calls them. Collective under ZeRO.
typedef struct {
    // --dry-run: prints the run's predicted memory; returns the process's exit status.
    int (*dry_run)(TrainConfig *cfg);
    // The world (rank, world, local ranks); rank 0 locks the output folder (run_lock.h).
    void (*start)(CpuTrainer *t, int *argc, char ***argv);
    // Builds t->model of shape t->config: with its parameters (from file when not NULL,
    // else the seeded init), or without them under ZeRO (the plugin owns them).
    void (*build)(CpuTrainer *t, GPT2ModelFile *file);
    // After the model's options are set: ZeRO starts the plugin, each rank initializing
    // only its shards (from file when not NULL).
    void (*attach)(CpuTrainer *t, GPT2ModelFile *file);
    // -y 1: whether out_dir holds a checkpoint to resume from. Without: 0, after making sure
    // it holds no earlier run's checkpoints a new run would lose (else the run stops).
    int (*have_checkpoint)(CpuTrainer *t);
    // Starts the run: with t->cfg->resume from the latest checkpoint (train_state_resume
    // into *state: checked, train's position and the skip detectors restored), else
    // fresh. Returns the first step.
    int (*begin_run)(CpuTrainer *t, TrainState *state, DataLoader *train);
    // Prints the memory the run holds (and writes its report).
    void (*print_memory)(CpuTrainer *t, int grad_accum);
    // Validation's sum over ranks (validation.h; ctx: the CpuTrainer); NULL on one rank.
    SumRanks sum_ranks;
    // Before a step's micro-batches: the gradients start from zero.
    void (*begin_step)(CpuTrainer *t, int grad_accum);
    // After them: *loss (this rank's mean) becomes the step's loss, then the gradient norm,
    // clipping and AdamW, or a skipped update (*skipped: a non-finite loss or norm under
    // --nan-skip, or an outlier under -sl/-sg). Returns the norm.
    float (*step)(CpuTrainer *t, int step, float lr, double *loss, int *skipped);
    // --dpu: the update in flight lands (the parameters catch up with the master), before the
    // validation, sample and save of a checkpoint step and before the end, so that a resumed
    // run sees what the saving one did there.
    void (*land)(CpuTrainer *t);
    // Saves the checkpoint of st (and the model file of its step).
    void (*save)(CpuTrainer *t, const TrainState *st);
    // After the first step and at the end: the measured memory report (ZeRO's
    // OUT/zero_report.json; nothing unsharded).
    void (*report)(CpuTrainer *t);
    // Writes OUT/model_final.bin.
    void (*export_model)(CpuTrainer *t);
    void (*free)(CpuTrainer *t);
} CpuHooks;

// The CPU model's options from the flags (--act-checkpoint, --act-offload, --tile-linear,
// --tile-vocab, --micro-grads).
GPT2CpuOptions gpt2_cpu_options(const TrainConfig *cfg);

// The ZeRO trainer's hooks: data parallel over the ranks of mpirun / srun (or RANK and
// WORLD_SIZE), the plugin on the host backend.
CpuHooks gpt2_zero_cpu_hooks(void);

#endif
