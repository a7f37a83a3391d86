// run_info.h: OUT/run.json, what a run was: trainer, data, seed, batch geometry, world,
// ZeRO stage, model, schedule, and at the end the time of each optimizer step. It is how
// scripts/compare_runs.py knows that two runs saw the same data in the same batches.
// Written atomically by rank 0 at start (without timing) and again at the end.
//
// A resumed run (-y 1) keeps the record of its first part: the top-level settings and
// timing stay the first part's, and each resume appends to "resumes" an entry
// {"step": S, "changed": {"lr": {"from": 0.0003, "to": 0.0001}, ...}, "timing": {...}}
// with every setting that differs from the one in force before it (each change is also
// printed), and "lr_at_step": {"from": F, "to": T} when the changes move the learning rate
// of the step it resumes at (-x, -l, -u, -q, -k). A missing run.json is started again from the resumed part's settings (its entry
// notes it); one that is not a run record is kept aside as run.json.unreadable.
#ifndef LLMC_RUN_INFO_H
#define LLMC_RUN_INFO_H

#include "train_config.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    void *json;          // the document (cJSON); NULL on ranks other than 0
    void *part;          // a resumed part's entry in "resumes" (cJSON; NULL for a first part)
    char path[4096];
    double *step_seconds;
    int num_steps, capacity;
    long tokens_per_step;
} RunInfo;

// trainer: the program's name (argv[0]; its folder is dropped). Call after the batch
// geometry and the step count are resolved (resolve_grad_accum, open_data). resume_step:
// the step a -y 1 run resumed at, -1 for a fresh start.
void run_info_start(RunInfo *ri, const char *trainer, const TrainConfig *cfg, int grad_accum, int world, int rank,
                    int resume_step);
// The wall time of one optimizer step (what the step line prints).
void run_info_step(RunInfo *ri, double seconds);
// Adds "timing" (every step's seconds, and tokens per second over the steps after the
// first, which pays for warm-up; all of them when there is one) and rewrites the file.
void run_info_finish(RunInfo *ri);

#ifdef __cplusplus
}
#endif
#endif
