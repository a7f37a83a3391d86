// validation.c: the validation loss, dealt to ranks by batch number (validation.h).
#include "validation.h"

#include <math.h>
#include <stdlib.h>

#include "../utils.h"

int validation_batches(const DataLoader *val, int max_batches) {
    int64_t available = val->total_windows / val->B;
    return (max_batches < 0 || max_batches > available) ? (int)available : max_batches;
}

float validation_loss(DataLoader *val, int max_batches, BatchLoss loss, void *model, SumRanks sum, void *ctx) {
    int n = validation_batches(val, max_batches);
    if (n <= 0) return NAN;   // nothing to evaluate (-m 0)
    double *slot = (double *)calloc_check((size_t)n, sizeof(double));
    // Every rank runs the same number of forwards: under ZeRO-3 a forward is collective
    // (it gathers parameters), so a rank without a batch of its own in the last round
    // evaluates batch 0 again and drops the result.
    int rounds = (n + val->world - 1) / val->world;
    for (int i = 0; i < rounds; i++) {
        int g = i * val->world + val->rank;
        dataloader_load_batch(val, g < n ? g : 0);
        float l = loss(model, val);
        if (g < n) slot[g] = l;
    }
    if (sum) sum(ctx, slot, n);
    double total = 0.0;
    for (int g = 0; g < n; g++) total += slot[g];
    free(slot);
    return (float)(total / n);
}
