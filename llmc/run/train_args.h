// train_args.h: the trainers' command line, in its three steps: the flags
// (train_config.c), then a DeepSpeed file (--deepspeed: ds_config.c applies its keys onto
// what the flags gave), then the checks of the whole (train_config.c). train_config and
// ds_config never call each other; this file calls both.
#ifndef LLMC_TRAIN_ARGS_H
#define LLMC_TRAIN_ARGS_H

#include "train_config.h"

#ifdef __cplusplus
extern "C" {
#endif

// Fills c for the given trainer ("cpu", "cuda" or "cuda-zero") from argv and the file it
// names. Prints usage (the DeepSpeed keys last) and exits 0 on -h; prints what is wrong and
// exits 1 on a bad flag, value, file or combination.
void train_args_parse(TrainConfig *c, int argc, char **argv, const char *flavour);

#ifdef __cplusplus
}
#endif
#endif
