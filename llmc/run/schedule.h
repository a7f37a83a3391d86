// schedule.h: learning rate: linear warmup to the peak, then one of llm.c's schedules
// (its llmc/schedulers.h) towards final_frac * peak, which it reaches at step max_steps, one
// past the last trained (llm.c's loop runs step = max_steps without training).
#ifndef LLMC_SCHEDULE_H
#define LLMC_SCHEDULE_H

#include <math.h>

#include "train_config.h"   // TRAIN_LR_*

static inline float lr_cosine(float peak, int step, int warmup, int max_steps, float final_frac) {
    if (step < warmup) return peak * (float)(step + 1) / (float)warmup;
    float lo = peak * final_frac;
    if (max_steps <= warmup) return peak;
    double progress = (double)(step - warmup) / (double)(max_steps - warmup);
    if (progress > 1.0) progress = 1.0;
    return lo + 0.5f * (peak - lo) * (float)(1.0 + cos(3.141592653589793 * progress));
}

static inline float lr_linear(float peak, int step, int warmup, int max_steps, float final_frac) {
    if (step < warmup) return peak * (float)(step + 1) / (float)warmup;
    if (max_steps <= warmup) return peak;
    double progress = (double)(step - warmup) / (double)(max_steps - warmup);
    if (progress > 1.0) progress = 1.0;
    return peak - (float)progress * (peak - peak * final_frac);
}

// Warmup, the peak until 80% of the steps, then 1 - sqrt decay to final_frac * peak
// (Hägele et al. 2024, arXiv:2405.18392; llm.c's "wsd").
static inline float lr_wsd(float peak, int step, int warmup, int max_steps, float final_frac) {
    int decay_from = (int)(0.8f * (float)max_steps);
    if (step < warmup) return peak * (float)(step + 1) / (float)warmup;
    if (step < decay_from || max_steps <= decay_from) return peak;
    double progress = (double)(step - decay_from) / (double)(max_steps - decay_from);
    if (progress > 1.0) progress = 1.0;
    float lo = peak * final_frac;
    return lo + (float)(1.0 - sqrt(progress)) * (peak - lo);
}

// kind: -k's TRAIN_LR_*; constant has no warmup, as in llm.c.
static inline float lr_schedule(int kind, float peak, int step, int warmup, int max_steps, float final_frac) {
    switch (kind) {
    case TRAIN_LR_LINEAR: return lr_linear(peak, step, warmup, max_steps, final_frac);
    case TRAIN_LR_CONSTANT: return peak;
    case TRAIN_LR_WSD: return lr_wsd(peak, step, warmup, max_steps, final_frac);
    default: return lr_cosine(peak, step, warmup, max_steps, final_frac);
    }
}

#endif
