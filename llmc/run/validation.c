// validation.c: the validation loss, dealt to ranks by batch number (validation.h).
#include "validation.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "../utils.h"

int validation_batches(const DataLoader *val, int max_batches) {
    int64_t available = val->total_windows / val->B;
    if (available > INT_MAX) available = INT_MAX;   // -m -1 over 2^31 batches: as many as an int counts
    return (max_batches < 0 || max_batches > available) ? (int)available : max_batches;
}

float validation_loss(DataLoader *val, int max_batches, BatchLoss loss, void *model, SumRanks sum, void *ctx) {
    int n = validation_batches(val, max_batches);
    if (n <= 0) return NAN;   // nothing to evaluate (-m 0)
    double *slot = (double *)calloc_check((size_t)n, sizeof(double));
    // Every rank runs the same number of forwards: under ZeRO-3 a forward is collective
    // (it gathers parameters), so a rank without a batch of its own in the last round
    // evaluates batch 0 again and drops the result.
    int64_t rounds = ((int64_t)n + val->world - 1) / val->world;
    for (int64_t i = 0; i < rounds; i++) {
        int64_t g = i * val->world + val->rank;
        dataloader_load_batch(val, g < n ? (int)g : 0);
        float l = loss(model, val);
        if (g < n) slot[g] = l;
    }
    if (sum) sum(ctx, slot, n);
    double total = 0.0;
    for (int g = 0; g < n; g++) total += slot[g];
    free(slot);
    return (float)(total / n);
}
