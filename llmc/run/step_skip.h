// step_skip.h: the two reasons a trainer leaves a step's update unapplied, and what they
// remember across steps.
//  --nan-skip: a loss or gradient norm that is not finite (without it the run stops);
//              --nan-skip-limit such steps in a row stop the run all the same.
//  -sl/-sg:    llm.c's outlier detector (its llmc/outlier_detector.h): the z-score of the
//              loss or the norm against a window of the last OUTLIER_WINDOW steps' values.
// That memory (the streak, the windows) is StepSkipState: a checkpoint carries it, so a
// resumed run judges every step as the uninterrupted run would have.
#ifndef LLMC_STEP_SKIP_H
#define LLMC_STEP_SKIP_H

#include <stddef.h>
#include <stdint.h>

#include "train_config.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OUTLIER_WINDOW 128

// The last OUTLIER_WINDOW values with running sums in double. Until the window is full
// count grows and next stays 0; then next is the slot the next value replaces.
typedef struct {
    double buf[OUTLIER_WINDOW], sum, sum_sq;
    int32_t count, next;
} OutlierWindow;

// Plain data with no implicit padding: checkpoints store it as it is in memory.
typedef struct {
    OutlierWindow loss, norm;   // -sl/-sg (filled whenever -sl or -sg is on)
    int32_t nan_in_a_row;       // --nan-skip: non-finite steps in a row up to the last one checked
    int32_t reserved;           // 0
} StepSkipState;

// Checks a step's loss and gradient norm (step: 0-based, printed 1-based like the step
// lines). Both finite: returns 0. Otherwise by default the run stops: rank 0 prints which
// step and why, every rank exits 1 (call it before anything of the step is saved). With
// --nan-skip it prints that the step is skipped and returns 1: the caller must not apply
// the update (under ZeRO, zero_step already skipped a non-finite norm); the
// --nan-skip-limit-th such step in a row stops the run like one without --nan-skip.
// It counts the steps it sees and skips over the process's run (one run per process).
int nonfinite_step(const TrainConfig *cfg, int step, float loss, float norm, int rank);
// At the run's end, with --nan-skip: prints how many of its steps were skipped.
void nonfinite_summary(const TrainConfig *cfg);
// -sl/-sg (off unless given): feeds the step's loss and gradient norm (finite ones only:
// the others are nonfinite_step's) to windows of the last OUTLIER_WINDOW steps'. Returns 1,
// after rank 0 prints why, when the loss's z-score is above -sl or the norm's above -sg:
// the caller must not apply the update. Every rank must pass the same values (all-reduced)
// so that all decide alike.
int outlier_step(const TrainConfig *cfg, int step, float loss, float norm, int rank);
// Whether the last outlier_step call skipped (for a caller that asked through a hook).
int outlier_skipped_last(void);
// At the run's end, with -sl or -sg: rank 0 prints how many updates were skipped.
void outlier_summary(const TrainConfig *cfg, int rank);

// The detectors' memory now, for a checkpoint.
void step_skip_get(StepSkipState *s);
// Restores a checkpoint's. A state no run can reach (a window count or slot out of range,
// a non-finite sum, a negative streak: a crafted file) is refused: returns -1 with why;
// 0 when applied.
int step_skip_set(const StepSkipState *s, char *why, size_t len);

#ifdef __cplusplus
}
#endif
#endif
