// ds_config.h: DeepSpeed's config file (--deepspeed ds_config.json) read into the
// trainers' TrainConfig, with DeepSpeed's key names. The ZeRO keys land in the zero_*
// fields, which the ZeRO trainers map to zero/'s ZeroConfig (llmc/ knows nothing of zero/).
//
// - A key this trainer implements sets its TrainConfig field; the string "auto" (as
//   Hugging Face's templates write) keeps the flag's value or the default.
// - A flag given on the command line that the file contradicts is an error naming both.
// - A key of a feature not built yet is accepted only with its "off" value and refused by
//   name ("not supported yet") otherwise; a detail without effect here (pin_memory, aio's
//   thread_count) is accepted with its JSON type.
// - DeepSpeed's deprecated cpu_offload / cpu_offload_param(s) map to the offload devices as
//   DeepSpeed maps them (with a note); fp16 / bf16 "enabled": true get a message of their own.
// - Any other key is ignored with one warning that names them all.
// - Before any key applies, the whole file is checked where a plain JSON reader lets
//   things through: a NUL byte, nesting past cJSON's limit, a key twice in one object (a
//   hash set per object: linear), a number that overflows a double.
#ifndef LLMC_DS_CONFIG_H
#define LLMC_DS_CONFIG_H

#include <stdio.h>

#include "train_config.h"

#ifdef __cplusplus
extern "C" {
#endif

// Reads the file at path into c (after the command line was parsed into it: c->given
// says which flags were explicit, c->T is final). Warnings and errors go to `log`, one
// line each, naming the file and the key. Returns 0, or -1 on an error (c may then be
// partly filled in).
int ds_config_apply(TrainConfig *c, const char *path, FILE *log);

// DeepSpeed's batch rule, once the world is known: train_batch_size =
// train_micro_batch_size_per_gpu x gradient_accumulation_steps x world. Whatever the file
// gave of the three is checked against (or fills in) c->B and c->total_batch_tokens
// (train_batch_size x T); with train_batch_size and the accumulation given and no micro
// batch anywhere, the micro batch is inferred, as DeepSpeed does. Does nothing when the
// file gave neither train_batch_size nor gradient_accumulation_steps. Returns 0, or -1
// after printing to `log` which values disagree.
int ds_config_resolve_batch(TrainConfig *c, int world, FILE *log);

// The keys it reads, one line each after `indent`, for -h.
void ds_config_usage(FILE *out, const char *indent);

#ifdef __cplusplus
}
#endif
#endif
