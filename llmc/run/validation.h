// validation.h: the validation loss, the same bits for any number of ranks.
//
// The first n batches of the val set (batch g: windows [g*B, g*B + B) of epoch 0) are
// dealt to the ranks by number: rank r runs g = r, r + world, ... (every rank the same
// number of forwards, which ZeRO-3 gathers make collective). Each batch's mean loss
// goes into a slot of its own; the ranks sum their slot arrays (every slot has a single
// nonzero writer, so that sum is exact) and every rank adds the slots in batch order. An
// unsharded run adds the same numbers in the same order, so a ZeRO run on any number of
// ranks logs the unsharded run's validation loss bit for bit.
#ifndef LLMC_RUN_VALIDATION_H
#define LLMC_RUN_VALIDATION_H

#include "../data/dataloader.h"

#ifdef __cplusplus
extern "C" {
#endif

// The mean loss of the batch the loader holds (inputs, targets), computed by the model.
typedef float (*BatchLoss)(void *model, const DataLoader *val);
// Sums n doubles element-wise over all ranks, in place (collective); NULL: one rank.
typedef void (*SumRanks)(void *ctx, double *values, int n);

// How many batches a pass evaluates: max_batches (< 0: all), at most the val set's.
int validation_batches(const DataLoader *val, int max_batches);
// The mean of the first validation_batches(val, max_batches) batches' losses; the loader's
// rank and world decide this rank's share. Every rank must call it (sum is collective).
float validation_loss(DataLoader *val, int max_batches, BatchLoss loss, void *model, SumRanks sum, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
