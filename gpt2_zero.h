/*
gpt2_zero.h: GPT-2 on the ZeRO plugin, the glue both ZeRO trainers share: train_gpt2.c
under -z (the fp32 CPU model, host backend) and train_gpt2_zero.cu (the bf16 CUDA model,
CUDA backend). It is what a fork of an llm.c-style trainer writes once:

  - the model's parameter slices (gpt2_slices) become the plugin's tensor table;
  - each rank initializes only the elements it owns, from a model file or the seeded init;
  - the model's unit hooks fetch and release parameters and hand over finished gradients,
    pointing the model's slots at the plugin's buffers (GPT2Slots: the same for an fp32
    and a bf16 model);
  - the command line's ZeRO knobs become a ZeroConfig, and --dry-run a prediction.

This file knows GPT-2 and ZeRO; llmc/ knows no ZeRO and zero/ knows no GPT-2.
*/
#ifndef GPT2_ZERO_H
#define GPT2_ZERO_H

#include "llmc/model/gpt2_config.h"
#include "llmc/model/gpt2_model_file.h"
#include "llmc/run/train_config.h"
#include "llmc/run/train_state.h"
#include "zero/comm.h"
#include "zero/zero.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    Zero *z;
    int rank, world;
    GPT2Config config;
    GPT2Slice *slices;     // the plugin's tensor table, in its order: gpt2_slices_tiled(tiles, vocab_tiles)
    int num_slices;
    int tiles;             // the model's --tile-linear K
    int vocab_tiles;       // the model's --tile-vocab KV
    GPT2SliceInit init;    // where initial values come from (used inside gpt2_zero_attach)
    GPT2Slots slots;       // the model's pointer tables and hooks
    GPT2ModelSource model; // the model file's values, tile by tile from the shards (checkpoint_export_model)
} GPT2Zero;

// The world of a ZeRO run: every rank of mpirun / srun, or RANK / WORLD_SIZE from the
// environment. Only rank 0 keeps stdout (every rank prints its errors), and rank 0 locks the
// output folder and removes the temp files a crash left there before anything is written
// (run_lock.h; the others wait for it in zero_init's collectives). On failure the plugin has printed why and the
// process exits with that message as the last line.
ZeroComm *gpt2_zero_world(int *argc, char ***argv, const TrainConfig *cfg);

// The plugin's config from the command line (ZeRO flags or --deepspeed), with working
// parameters and gradients in the model's dtypes.
ZeroConfig gpt2_zero_config(const TrainConfig *cfg, ZeroDType param_dtype, ZeroDType grad_dtype);

// Starts the plugin for a model of shape c and installs its hooks in the model's slots
// (their tiles choose the tensor table: gpt2_slices_tiled).
// Each rank initializes only what it owns: from file (positioned reads; the bytes every
// rank read are printed) when not NULL, else the init seeded with seed. On failure the
// plugin has printed why, and the process exits with that message as the last line.
void gpt2_zero_attach(GPT2Zero *g, const GPT2Config *c, const ZeroConfig *zc, ZeroComm *comm,
                      const ZeroBackend *backend, uint64_t seed, GPT2ModelFile *file, GPT2Slots slots);
void gpt2_zero_free(GPT2Zero *g);


// With resume (-y 1): whether out_dir holds a sharded checkpoint to resume from: rank 0 looks
// and every rank gets its answer (collective); a malformed latest_zero counts as one
// (zero_load says why). Without: 0. Checkpoints that a fresh start (or a new run) would lose
// (checkpoint_fresh_start_refused): rank 0 says what is there and every rank exits 1.
int gpt2_zero_have_checkpoint(GPT2Zero *g, const char *out_dir, int resume);
// -y 1: loads the checkpoint latest_zero names into the plugin (any saved world and stage)
// and its TrainState into *saved (collective). Exits on every rank when it cannot, after
// saying why; for a checkpoint of format 1, whose trainer state lacks what a bit-exact
// resume needs, naming the model file to start a new run from. The checkpoint's folder goes
// into ckpt (cap bytes), for what the resume says.
void gpt2_zero_load_checkpoint(GPT2Zero *g, const char *out_dir, TrainState *saved, char *ckpt, size_t cap);

// A double summed over the ranks in rank order (ctx: the GPT2Zero; collective).
double gpt2_zero_sum(void *ctx, double x);
// n doubles summed element-wise over the ranks, in place (validation.h's SumRanks).
void gpt2_zero_sum_ranks(void *ctx, double *values, int n);

// One optimizer step after the micro-steps' backward: *loss (this rank's mean over its
// micro-steps) becomes the mean over ranks, then the plugin clips and updates, or skips
// the update when the loss or the norm is not finite, or (-sl/-sg) an outlier
// (outlier_skipped_last() says so). Returns the norm (collective).
float gpt2_zero_step(GPT2Zero *g, const TrainConfig *cfg, int step, float lr, double *loss);

// Writes OUT/zero_report.json (collective), with the activation bytes the model holds on
// the device and in host memory (activation checkpoints offloaded there).
void gpt2_zero_write_report(GPT2Zero *g, const char *out_dir, size_t act_device, size_t act_host);

// --dry-run: the plugin's prediction of every rank's memory and traffic for cfg->model at
// cfg->dry_run_world ranks (with cfg->tile_linear's and cfg->tile_vocab's tensor table), with activation_bytes
// per rank on the device and *host_bytes in host memory (what the trainer's model would
// allocate; a trainer prints its own breakdown). Writes OUT/zero_report.json and prints a
// summary and the dry run's own time and memory. runtime_bytes: NULL where the device is a
// GPU; on the CPU trainer, whose device memory is host memory, what the process holds
// besides the plugin and the activations, so that --gpu-mem checks the whole process (the
// host tier too). Returns the process's exit status: 2 when a rank does not fit --gpu-mem
// or the swap files do not fit the disk under --nvme-path, else 0.
// *file_bytes: what the model's own swap file reserves under --nvme-path per rank (0: none).
typedef size_t (*GPT2ActivationBytes)(const GPT2Config *c, const TrainConfig *cfg, size_t *host_bytes, size_t *file_bytes);
typedef size_t (*GPT2RuntimeBytes)(const TrainConfig *cfg);
int gpt2_zero_dry_run(TrainConfig *cfg, ZeroDType param_dtype, ZeroDType grad_dtype,
                      GPT2ActivationBytes activation_bytes, GPT2RuntimeBytes runtime_bytes);

#ifdef __cplusplus
}
#endif
#endif
