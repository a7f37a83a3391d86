// sampler.h: draw a token from logits (softmax over the first V entries) with a
// uniform coin from the counter RNG, so samples depend only on (seed, step, position).
#ifndef LLMC_SAMPLER_H
#define LLMC_SAMPLER_H

#include <math.h>

static inline int sample_from_logits(const float *logits, int V, float coin) {
    float maxv = logits[0];
    for (int i = 1; i < V; i++) maxv = logits[i] > maxv ? logits[i] : maxv;
    double sum = 0.0;
    for (int i = 0; i < V; i++) sum += exp((double)(logits[i] - maxv));
    double target = coin * sum, cdf = 0.0;
    for (int i = 0; i < V; i++) {
        cdf += exp((double)(logits[i] - maxv));
        if (target < cdf) return i;
    }
    return V - 1; // rounding: coin * sum landed past the last bucket
}

#endif
