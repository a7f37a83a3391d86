// gpt2_cuda.h: GPT-2 on one GPU in bf16 mixed precision: the same model as the CPU
// reference (llmc/cpu/gpt2_cpu.h) with an API of the same shape, so one trainer loop reads the
// same for both.
//
// Precision: bf16 working parameters and activations (the residual stream included),
// fp32 accumulation in every matmul, fp32 LayerNorm statistics, softmax and loss;
// fp32 gradients (accumulated across micro-steps in fp32); fp32 master weights and AdamW
// moments; the bf16 copy is refreshed from the master by stochastic rounding, at build
// too (llmc/numerics/adamw.h: the rule and keys zero/ uses, elements numbered in slice order).
//
// Memory: everything (parameters, optimizer state, gradients, activations for the built
// (B, T), workspaces) is allocated by gpt2_cuda_build, once, in the sizes gpt2_cuda_memory.h
// computes (so a dry run predicts them without a GPU). forward/backward/update never
// allocate, never synchronize the device, and queue all work on the model's own stream;
// gpt2_cuda_step_stats is the one sync point per step.
#ifndef LLMC_GPT2_CUDA_H
#define LLMC_GPT2_CUDA_H

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "../model/gpt2_config.h"
#include "../model/gpt2_cuda_memory.h"   // GPT2CudaOptions; the buffer sizes, computable without a GPU
#include "../model/grad_norm.h"

// Activations, carved from one allocation. Per-layer arrays hold L slices one after
// another; with recompute, some are a single slice reused by every layer, and with
// act_checkpoint all of them are (the residual stream keeps the block inputs).
typedef struct {
    __nv_bfloat16 *residual;   // (L+1, B, T, C): [0] embeddings, [l+1] output of block l;
                               // act_offload: 2 slots, block l reads slot l % 2
    __nv_bfloat16 *residual2;  // (L, B, T, C): block input + attention branch
    __nv_bfloat16 *ln1, *ln2;  // (L or 1, B, T, C) LayerNorm outputs
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd; // (L, B, T)
    __nv_bfloat16 *qkv;        // (L, B, T, 3C)
    __nv_bfloat16 *atty;       // (L, B, T, C) attention output before the projection
    float *att_stats;          // (L, B, NH, T) cuDNN softmax statistics
    __nv_bfloat16 *fch;        // (L, B, T, 4C) MLP pre-activation
    __nv_bfloat16 *fch_gelu;   // (L or 1, B, T, 4C) GELU output
    __nv_bfloat16 *lnf;        // (B, T, C)
    float *lnf_mean, *lnf_rstd; // (B, T)
    __nv_bfloat16 *logits;     // (B, T, Vp); after a forward with targets: unscaled dlogits
    float *losses;             // (B, T)
    // backward scratch
    __nv_bfloat16 *dresidual;  // (B, T, C) gradient of the residual stream
    __nv_bfloat16 *dbuf;       // (B, T, C) gradient of a LayerNorm output / attention output
    __nv_bfloat16 *dqkv;       // (B, T, 3C)
    float *tile_acc;           // (B, T, 4C) fp32 (vocabulary tiles alone: (B, T, C)), tiles only: a linear's
                               // or the classifier's input gradient summed over its tiles
} GPT2CudaActs;

typedef struct {
    GPT2Config config;
    GPT2CudaOptions opt;
    int B, T;                      // the built shape: forward accepts B*T <= this B*T, T <= this T
    int cur_B, cur_T;              // shape of the last forward
    size_t param_sizes[GPT2_NUM_PARAM_TENSORS];
    size_t param_offsets[GPT2_NUM_PARAM_TENSORS];
    size_t num_parameters;
    GPT2Slice *slices;             // gpt2_slices(): the order that keys the bf16 rounding
    int num_slices;
    // Flat device buffers, all 16 tensors in llm.c order.
    __nv_bfloat16 *params;         // bf16 working copy
    float *master;                 // fp32 master weights
    float *m, *v;                  // AdamW moments
    float *grads;                  // fp32 gradients
    float *grads_micro;            // opt.micro_grads: one micro-batch's gradient, added to grads
    int micro_in_step;             // backwards since zero_grad (micro_grads: the first writes grads)
    // Pointer tables: w[t][l] / g[t][l] = layer l of tensor t (l = 0 for the 4 tensors that
    // are not per layer); tiled, [l * K + k] is tile k of layer l of a tiled tensor
    // (gpt2_param_tiles). The model reads parameters and writes gradients only through these.
    __nv_bfloat16 **w[GPT2_NUM_PARAM_TENSORS];
    float **g[GPT2_NUM_PARAM_TENSORS];
    GPT2Hooks hooks;               // a parameter manager's (gpt2_config.h); zeroed: none
    GPT2CudaActs acts;
    cudaStream_t stream;
    int use_cudnn;                 // the attention path in use
    int att_shapes[8][2];          // the (B, T) this model prepared cuDNN plans for: the build's
    int num_att_shapes;            // first, then each other shape a forward ran (released at free)
    int matmul_fused;              // 1: cuBLASLt epilogues (tests may clear it)
    // Attention workspaces: cuDNN's, or the fallback's score and probability matrices.
    void *cudnn_workspace;
    size_t cudnn_workspace_bytes;
    float *att_scores;             // (B, NH, T, T), fallback only
    __nv_bfloat16 *att_probs;      // (B, NH, T, T), fallback only
    float *reduce_scratch;         // partial sums of the deterministic reductions
    size_t reduce_scratch_floats;
    // Tokens: pinned staging (two slots, so the host fills one while the last copy from
    // the other may still be queued) copied to one device buffer. Layout of a slot and of
    // the device buffer: inputs | targets | positions | unique tokens | bucket starts.
    int *host_tokens[2];
    cudaEvent_t tokens_copied[2];
    int token_slot;
    int *dev_tokens;
    int *token_counts;             // host scratch (V) for the encoder buckets
    int num_unique;                // encoder buckets of the last forward with targets
    int have_targets;              // the last forward had targets (backward allowed)
    // Loss and norm bookkeeping (device), read by gpt2_cuda_step_stats.
    double *loss_sum;              // sum of per-token losses since gpt2_cuda_zero_grad
    float *norm_clip;              // [0] grad norm of the last update, [1] its clip scale
    GradNormPlan norm_plan;        // the norm's slice table and partial sums (grad_norm.cuh)
    int norm_current;              // norm_clip holds the current gradients' norm and the
    float norm_current_clip;       // clip scale for this grad_clip (set by grad_norm, cleared
                                   // by zero_grad and backward): update reuses them
    long long loss_tokens;         // tokens counted into loss_sum (host)
    double *host_loss_sum;         // pinned
    float *host_norm;              // pinned
    cudaEvent_t stats_ready;
    __nv_bfloat16 *host_logits_bf16; // pinned (Vp)
    float *host_logits;            // pinned (Vp)
    // act_offload: pinned host slots of block inputs 0..L-2 and the copy stream that moves
    // them; offloaded[l]: block l's input is in its host slot (its device slot may be
    // overwritten); restored[l]: it is back on the device; block_done, slot_free: points of
    // the main stream the copies wait for.
    __nv_bfloat16 *host_acts;
    size_t host_act_bytes;
    cudaStream_t copy_stream;
    cudaEvent_t *offloaded, *restored;
    cudaEvent_t block_done, slot_free;
    size_t device_bytes;           // all device memory this model allocated
    void *dev_blocks[8];           // the allocations, for gpt2_cuda_free
    int num_dev_blocks;
} GPT2Cuda;

// Builds the model from host fp32 parameters (all 16 tensors, llm.c order) for batches of
// up to B sequences of T tokens, and prints a one-line memory summary. Exits on any
// error, out of memory included.
void gpt2_cuda_build(GPT2Cuda *model, const GPT2Config *config, const float *host_params, int B, int T,
                     const GPT2CudaOptions *opt);
// The same, but returns -1 (with nothing left allocated) when device memory runs out,
// so a caller can retry with a smaller B; 0 on success.
int gpt2_cuda_try_build(GPT2Cuda *model, const GPT2Config *config, const float *host_params, int B, int T,
                        const GPT2CudaOptions *opt);
void gpt2_cuda_free(GPT2Cuda *model);
// The model's parameter slots (bf16 weights, fp32 gradients), for a parameter manager that
// owns them (opt.external_params): gpt2_config.h's GPT2Slots.
GPT2Slots gpt2_cuda_slots(GPT2Cuda *model);

// inputs, targets: host (B, T) token ids in [0, V); targets may be NULL (no loss; the
// logits stay readable through gpt2_cuda_logits_row). B*T <= built B*T and T <= built T.
// Copies the tokens from pinned staging with cudaMemcpyAsync on the model's stream.
void gpt2_cuda_forward(GPT2Cuda *model, const int *inputs, const int *targets, int B, int T);
// Zeroes the gradients and the loss accumulator.
void gpt2_cuda_zero_grad(GPT2Cuda *model);
// Zeroes only the loss accumulator (for evaluation passes between training steps).
void gpt2_cuda_reset_loss(GPT2Cuda *model);
// Accumulates into the gradients the gradient of loss_scale * (sum over the last forward's
// tokens of the per-token loss). Training: loss_scale = 1 / (B*T*grad_accum_steps).
// opt.micro_grads: each backward after the first since zero_grad computes the gradient in
// the zeroed micro buffer, then adds it to the gradients element by element in fp32.
void gpt2_cuda_backward(GPT2Cuda *model, float loss_scale);
// AdamW step t (1-based): gradient norm and clip scale min(1, grad_clip / norm) on the
// device (grad_clip <= 0: no clipping; the norm in llmc/model/grad_norm.h's slice order, the
// bits zero/ computes), update of the fp32 master with weight decay on the tensors
// gpt2_param_decays() names, bf16 refresh by stochastic rounding. No host sync. Reuses
// the norm of a gpt2_cuda_grad_norm with the same grad_clip since the last backward or
// zero_grad (a caller writing model->grads directly must call gpt2_cuda_grad_norm again).
void gpt2_cuda_update(GPT2Cuda *model, float lr, float beta1, float beta2, float eps, float weight_decay,
                      float grad_clip, int t);
// The gradient norm of the accumulated gradients, computed on the device as
// gpt2_cuda_update does (same bits): gpt2_cuda_step_stats then reports it before the
// update, so a trainer can refuse a step whose loss or norm is not finite. No host sync.
void gpt2_cuda_grad_norm(GPT2Cuda *model, float grad_clip);
// The step's one sync point: mean loss over all tokens forwarded with targets since the
// last zero_grad / reset_loss (-1 if none), and the norm of the last update's (or gpt2_cuda_grad_norm's) gradients.
void gpt2_cuda_step_stats(GPT2Cuda *model, float *mean_loss, float *grad_norm);
// After a forward without targets: the first V logits of position (b, t), as floats in a
// pinned host buffer that the next call overwrites. Synchronizes.
const float *gpt2_cuda_logits_row(GPT2Cuda *model, int b, int t);

// Checkpoints and tests (all synchronize). Host buffers hold num_parameters floats.
void gpt2_cuda_get_master(GPT2Cuda *model, float *host_params);
void gpt2_cuda_get_opt_state(GPT2Cuda *model, float *host_m, float *host_v);
// Sets master weights and moments (m, v NULL: zeros); the bf16 copy is the one a freshly
// built model has (stochastic rounding of step 0).
void gpt2_cuda_set_state(GPT2Cuda *model, const float *host_params, const float *host_m, const float *host_v);
// The same for resuming after update step `step` (>= 0): the bf16 copy is the stochastic
// rounding that step left (same seed, same noise), so the run continues bit for bit.
// step 0 is gpt2_cuda_set_state.
void gpt2_cuda_set_state_at(GPT2Cuda *model, const float *host_params, const float *host_m, const float *host_v,
                            int step);
void gpt2_cuda_get_grads(GPT2Cuda *model, float *host_grads);
// The bf16 working copy widened to fp32 (tests).
void gpt2_cuda_get_params_bf16(GPT2Cuda *model, float *host_params);

#endif
