// progress.h: the elapsed time and the ETA a step line ends with, "elapsed 1m05s | ETA 3m10s".
#ifndef LLMC_PROGRESS_H
#define LLMC_PROGRESS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double start;        // now_seconds() when the loop began
    double warm_end;     // when the run's first reported step ended (0: not yet)
    int warm_done;       // steps of this run done by then
    int first_step;      // the step the run began at (> 0 after a resume)
    int max_steps;
} Progress;

// Call once, just before the training loop.
void progress_begin(Progress *p, int first_step, int max_steps);
// After step `step` (0-based) has finished: "elapsed E | ETA R" into buf (returned).
// E is the wall time since progress_begin; R the remaining steps times the mean wall time
// of a step since the run's first step ended: the first step warms caches and allocates,
// so it is left out (validation, samples and checkpoints are in, as they take their share
// of the time left). At the first step, with nothing else to go by, R uses its time.
const char *progress_text(Progress *p, int step, char *buf, size_t len);
// A duration for people: "12.3s", "4m05s", "2h07m".
const char *progress_duration(double seconds, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
