// gpt2_cuda_memory.h: what gpt2_cuda_build allocates on the device for a config, a batch
// shape and the options, in plain C. gpt2_cuda.cu carves its buffers by these sizes, so a
// dry run on a machine without a GPU (no CUDA runtime, no cuDNN) predicts the same bytes.
#ifndef LLMC_GPT2_CUDA_MEMORY_H
#define LLMC_GPT2_CUDA_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "gpt2_config.h"

#ifdef __cplusplus
extern "C" {
#endif

// The attention's path (--cudnn).
enum {
    GPT2_CUDNN_OFF = 0,      // the fallback kernels
    GPT2_CUDNN_ON = 1,       // cuDNN, its deterministic backward
    GPT2_CUDNN_ATOMIC = 2,   // cuDNN, its backward allowed to add dQ's parts atomically
};

// How the trainers name an attention path in their logs.
static inline const char *gpt2_cuda_attention_name(int use_cudnn) {
    return use_cudnn == GPT2_CUDNN_ATOMIC ? "cuDNN (atomic dQ)" : use_cudnn ? "cuDNN" : "plain kernels";
}

typedef struct {
    int recompute;  // 0: keep all activations; 1: recompute the MLP's GELU output in
                    // backward; 2: also the two LayerNorm outputs of each block
    int use_cudnn;  // GPT2_CUDNN_*: cuDNN flash attention when it supports the shape, with
                    // its deterministic backward (as every other kernel: the same bits every
                    // run) or its atomic one (faster); or the fallback kernels.
    uint64_t seed;  // stochastic rounding of the bf16 parameters
    int external_params; // 1: a parameter manager (ZeRO) owns parameters, optimizer state
                         // and gradients: build allocates none of them (host_params may
                         // be NULL), w/g start NULL and the hooks fill them per unit;
                         // update, get/set_state and get_grads are then not available.
    int act_checkpoint;  // 1: keep only each block's input (the residual stream entering it);
                         // backward reruns the block's forward, with the same kernels, just
                         // before its backward. The per-block buffers shrink to one block's;
                         // the recompute level still says what that one block keeps.
    int act_offload;     // 1 (needs act_checkpoint): the block inputs go to pinned host memory
                         // after each block's forward (a copy stream, events) and come back
                         // ahead of its backward, during the next block's backward; the device
                         // keeps two residual-stream slots.
    int tile_linear;     // K (0 or 1: none): each block's four linears run as K tiles along
                         // their output rows, each tile a unit (gpt2_config.h); C/K must be a
                         // multiple of 8. The tiles' input gradients add up in an fp32 buffer.
    int tile_vocab;      // KV (0 or 1: none): the token embedding and the classifier run as KV
                         // tiles of wte's rows, each tile's two parts units (gpt2_config.h);
                         // Vp/KV must be a multiple of 8. The classifier tiles' input gradients
                         // add up in the same fp32 buffer.
    int micro_grads;     // 1 (own gradients only): one more fp32 gradient buffer; each backward
                         // after the first since zero_grad writes into it (zeroed), then adds it
                         // to the gradients, so accumulation N gives ZeRO's bits on N ranks (its
                         // reduction adds whole per-rank gradients). Only worth it with
                         // accumulation > 1: trainers set it only then.
} GPT2CudaOptions;

// The activation arrays (GPT2CudaActs, gpt2_cuda.h, has their shapes) in the order they
// are carved from one allocation.
enum {
    GPT2_CUDA_RESIDUAL, GPT2_CUDA_RESIDUAL2, GPT2_CUDA_LN1, GPT2_CUDA_LN2, GPT2_CUDA_LN1_MEAN,
    GPT2_CUDA_LN1_RSTD, GPT2_CUDA_LN2_MEAN, GPT2_CUDA_LN2_RSTD, GPT2_CUDA_QKV, GPT2_CUDA_ATTY,
    GPT2_CUDA_ATT_STATS, GPT2_CUDA_FCH, GPT2_CUDA_FCH_GELU, GPT2_CUDA_LNF, GPT2_CUDA_LNF_MEAN,
    GPT2_CUDA_LNF_RSTD, GPT2_CUDA_LOGITS, GPT2_CUDA_LOSSES, GPT2_CUDA_DRESIDUAL, GPT2_CUDA_DBUF,
    GPT2_CUDA_DQKV, GPT2_CUDA_TILE_ACC, GPT2_CUDA_NUM_ACTS
};

// Every device buffer is a 256-byte aligned piece of one of the regions below: the bytes
// a buffer of `bytes` takes in its region.
#define GPT2_CUDA_ALIGN 256
size_t gpt2_cuda_piece_bytes(size_t bytes);
// Floats of one layer's softmax statistics (the cuDNN attention's, BT x NH) in the
// per-layer buffer: rounded up to 4, so that every layer's slice starts 16-byte aligned,
// as the cuDNN tensors are declared, whatever B x T x NH is.
size_t gpt2_cuda_att_stats_floats(size_t BT, size_t NH);

// Bytes of each activation array for batches of B x T (0: not allocated; with recompute 2
// ln2 shares ln1's buffer, att_stats exists only for the cuDNN attention, the fp32 tile
// accumulator only with tiles). Sizes are overflow-checked: a shape whose sizes overflow
// size_t stops with a message.
void gpt2_cuda_act_bytes(const GPT2Config *c, int B, int T, const GPT2CudaOptions *opt, int use_cudnn,
                         size_t bytes[GPT2_CUDA_NUM_ACTS]);
// Pinned host bytes of act_offload's block inputs 0..L-2 (the last block's stays on the device).
size_t gpt2_cuda_act_host_bytes(const GPT2Config *c, int B, int T, const GPT2CudaOptions *opt);
// The options' tiles (tile_linear 0 means 1).
static inline int gpt2_cuda_tiles(const GPT2CudaOptions *opt) { return opt->tile_linear > 1 ? opt->tile_linear : 1; }
// The options' vocabulary tiles (tile_vocab 0 means 1).
static inline int gpt2_cuda_vocab_tiles(const GPT2CudaOptions *opt) { return opt->tile_vocab > 1 ? opt->tile_vocab : 1; }
// Floats of the one scratch buffer that every deterministic reduction of a step shares.
size_t gpt2_cuda_reduce_scratch_floats(const GPT2Config *c, int B, int T);
// Ints of the token buffer: inputs | targets | positions | unique tokens | bucket starts.
size_t gpt2_cuda_token_ints(int B, int T);

// The regions gpt2_cuda_build allocates (each the sum of its 256-byte pieces).
typedef struct {
    size_t params;       // bf16 params, fp32 master, m, v, grads (0 with external_params)
    size_t weights, grads, optimizer;   // params by use: the bf16 params; the fp32 grads
                                        // (and micro_grads' buffer);
                                        // the fp32 master, m and v
    size_t activations;  // GPT2CudaActs: forward activations and backward scratch
    size_t scratch;      // reduction partials, loss and norm, tokens
    size_t attention;    // the cuDNN workspace, or the fallback's scores and probabilities
    size_t cublaslt;     // cuBLASLt's workspace (matmul_init, once per process)
    size_t total;        // all of the above: the device memory the model holds
    size_t host_activations; // pinned host memory of act_offload's block inputs (not in total)
} GPT2CudaMemory;

// use_cudnn: whether the cuDNN attention runs (opt->use_cudnn is only the request), and
// then cudnn_workspace its workspace bytes (attention_cudnn_prepare's, or a prediction).
void gpt2_cuda_memory(const GPT2Config *c, int B, int T, const GPT2CudaOptions *opt, int use_cudnn,
                      size_t cudnn_workspace, GPT2CudaMemory *out);
// Without cuDNN at hand: the workspace attention_cudnn_prepare would report for use_cudnn
// (GPT2_CUDNN_ON or _ATOMIC), but for the engine's own plan workspace (only cuDNN knows it;
// taken as 0).
size_t gpt2_cuda_cudnn_workspace_estimate(const GPT2Config *c, int B, int T, int use_cudnn);

// 0 when gpt2_cuda_build accepts the config and batch shape; else -1 with the reason in err.
int gpt2_cuda_check_shape(const GPT2Config *c, int B, int T, char *err, size_t errlen);
// 0 when the options fit the config (recompute 0-2, use_cudnn 0-2, act flags 0 or 1, act_offload only with
// act_checkpoint, tiles dividing C with C/K a multiple of 8, vocabulary tiles dividing Vp with
// Vp/KV a multiple of 8, micro_grads 0 or 1 and not with external_params); else -1 with the
// reason in err.
int gpt2_cuda_check_options(const GPT2Config *c, const GPT2CudaOptions *opt, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
