// schedule.h: learning rate: linear warmup to the peak, then cosine decay to
// final_frac * peak at the last step.
#ifndef LLMC_SCHEDULE_H
#define LLMC_SCHEDULE_H

#include <math.h>

static inline float lr_cosine(float peak, int step, int warmup, int max_steps, float final_frac) {
    if (step < warmup) return peak * (float)(step + 1) / (float)warmup;
    float lo = peak * final_frac;
    if (max_steps <= warmup) return peak;
    double progress = (double)(step - warmup) / (double)(max_steps - warmup);
    if (progress > 1.0) progress = 1.0;
    return lo + 0.5f * (peak - lo) * (float)(1.0 + cos(3.141592653589793 * progress));
}

#endif
