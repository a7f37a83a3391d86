// gpt2_cpu.h: the fp32 CPU reference GPT-2 (OpenMP). Forward, backward, AdamW.
// Results are bitwise independent of the number of OpenMP threads: every reduction
// runs in a fixed order (parallel loops only split independent outputs).
#ifndef LLMC_GPT2_CPU_H
#define LLMC_GPT2_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "../model/gpt2_config.h"

#ifdef __cplusplus
extern "C" {
#endif

// How the model runs; gpt2_cpu_set_options changes them (defaults: all 0, tile_linear 1,
// micro_grads 1, tile_vocab 1).
typedef struct {
    int act_checkpoint; // 1: forward keeps only each block's input (the residual stream entering
                        // it); backward recomputes the block's forward just before its backward.
                        // The same operations on the same inputs: gradients are bit-identical.
    int act_offload;    // 1 (needs act_checkpoint): the block inputs go to a host tier of their
                        // own after each block's forward and come back ahead of its backward;
                        // the model keeps two residual-stream slots. On the CPU the tier is a
                        // separate buffer, counted apart (gpt2_cpu_activation_host_bytes).
                        // 2: the tier is a swap file under act_swap_dir (GPT2_ACT_OFFLOAD_FILE),
                        // so that the block inputs, which grow with depth, take no memory.
    int tile_linear;    // K >= 1: each block's four linears run as K tiles along their output
                        // rows, each tile its own unit (gpt2_config.h); K must divide C. The
                        // forward is bit-identical; backward adds the tiles' input gradients in
                        // reverse tile order, so gradients match within float rounding.
    int micro_grads;    // 1: with the model's own gradients, each backward after the first since
                        // gpt2_cpu_zero_grad computes its micro-batch's gradient in a buffer of
                        // its own (one more gradient-sized buffer) and adds it to the sum, so that
                        // accumulating N micro-batches gives the bits of ZeRO on N ranks, which
                        // add whole per-rank gradients in rank order. 0: backward adds into the
                        // sum inside its kernels (no buffer; the sum differs in the last bits).
    int tile_vocab;     // KV >= 1: the token embedding and the classifier run as KV tiles of
                        // wte's rows, each tile's two parts units of their own (gpt2_config.h);
                        // KV must divide Vp. The forward is bit-identical; the classifier's
                        // input gradient adds the tiles in reverse order, so it and what flows
                        // from it (every other gradient, wte's and wpe's among them) match
                        // within float rounding.
    const char *act_swap_dir;   // act_offload 2: the folder of the swap file
} GPT2CpuOptions;
enum { GPT2_ACT_OFFLOAD_FILE = 2 };

typedef struct {
    GPT2Config config;
    GPT2CpuOptions opt;
    size_t param_sizes[GPT2_NUM_PARAM_TENSORS];
    size_t num_parameters;
    float *params;       // all 16 tensors, contiguous, llm.c order
    float *grads;        // same layout
    float *grads_micro;  // opt.micro_grads: one micro-batch's gradient (allocated by the first use)
    int micro_in_step;   // backwards since gpt2_cpu_zero_grad
    float *m, *v;        // AdamW moments (allocated lazily by the first update)
    // Pointer tables: w[t][l] is layer l of tensor t (l = 0 for the 4 non-layer tensors);
    // tiled, w[t][l * K + k] is tile k of layer l of a tiled tensor, w[GPT2_WTE][k] tile k of
    // wte (gpt2_param_tiles). The
    // model reads parameters and writes gradients only through these.
    float **w[GPT2_NUM_PARAM_TENSORS];
    float **g[GPT2_NUM_PARAM_TENSORS];
    GPT2Hooks hooks;     // a parameter manager's (gpt2_config.h); zeroed: none
    // activations for the current (B, T), reallocated only when they outgrow the buffer
    int B, T;
    size_t act_capacity;      // floats in acts
    size_t grad_act_capacity; // floats in grad_acts (allocated by the first backward)
    float *acts;         // one allocation; the model carves its activations from it
    float *grad_acts;    // backward scratch, reused by every layer
    float *act_host;     // act_offload: the host tier of block inputs 0..L-2 (the last stays)
    size_t act_host_capacity; // floats in act_host
    size_t act_peak;          // the most floats acts and grad_acts held at once (a release keeps it)
    size_t act_host_peak;     // the same for act_host
    int act_fd;          // act_offload 2: the swap file (already unlinked), -1 until the first use
    size_t act_slot_bytes;    // its slot per block input (a multiple of 4096)
    int act_direct;      // opened O_DIRECT (through the aligned act_bounce) or not
    char act_path[4096]; // its name, for messages
    float *logits_or_probs; // (B, T, Vp): logits; probabilities after a forward with targets
    const int *inputs;   // the model's own copies of the forward's tokens (B*T each)
    const int *targets;  // NULL after a forward without targets
    int *token_buf;      // storage behind inputs/targets
    size_t token_capacity;
    int backward_ready;  // 1 after a forward with targets, until backward consumes the probs
    float *scratch;      // matmul packing buffers
    size_t scratch_capacity;
    float mean_loss;     // forward with targets sets it; -1 without
    float *losses;       // (B, T) per-token losses
} GPT2;

// Builds from a descriptor ("d12") with gpt2_init_params(seed), or from a model file.
void gpt2_cpu_build(GPT2 *m, const GPT2Config *c, uint64_t seed);
void gpt2_cpu_build_from_file(GPT2 *m, const char *path);
// No parameter or gradient buffers: a parameter manager (ZeRO) owns them and its hooks
// fill w / g per unit. zero_grad, grad_norm and update are then not available.
void gpt2_cpu_build_external(GPT2 *m, const GPT2Config *c);
// Sets the options (NULL: the defaults), after a build and before the first forward or a
// manager's attach (the pointer tables are rebuilt for the tiles; activations are laid out
// anew by the next forward). Exits naming the option on one the config cannot take.
void gpt2_cpu_set_options(GPT2 *m, const GPT2CpuOptions *opt);
// The model's parameter slots, for a parameter manager (gpt2_config.h: GPT2Slots).
GPT2Slots gpt2_cpu_slots(GPT2 *m);
void gpt2_cpu_free(GPT2 *m);
// Between steps: gives the activations' memory back to the system (the next forward lays
// them out anew), so that a model export or checkpoint after a step needs no memory beyond
// what the step held.
void gpt2_cpu_release_activations(GPT2 *m);
// Bytes of activations and activation gradients (acts + grad_acts) a forward and backward
// of B x T sequences allocate with these options (NULL: defaults): what a dry run predicts
// without building the model. Overflow-checked (a shape whose sizes overflow size_t stops
// with a message). The host tier of act_offload apart: gpt2_cpu_activation_host_bytes.
size_t gpt2_cpu_activation_bytes(const GPT2Config *c, int B, int T, const GPT2CpuOptions *opt);
size_t gpt2_cpu_activation_host_bytes(const GPT2Config *c, int B, int T, const GPT2CpuOptions *opt);
// What sampling gen_tokens tokens (forwards of 1 x t for t up to gen_tokens, at most
// maxT - 1, without targets) adds to B x T's activation bytes: 0 when its layout fits theirs.
size_t gpt2_cpu_sample_extra_bytes(const GPT2Config *c, int B, int T, int gen_tokens, const GPT2CpuOptions *opt);
// act_offload 2: the bytes its swap file reserves under act_swap_dir (0 without it).
size_t gpt2_cpu_activation_file_bytes(const GPT2Config *c, int B, int T, const GPT2CpuOptions *opt);

// inputs, targets: (B, T) token ids in [0, V); targets may be NULL (no loss). T <= maxT.
// Logits over the padded vocabulary are computed; softmax and loss use the first V.
// The tokens are copied, so the caller's buffers may change before backward.
void gpt2_cpu_forward(GPT2 *m, const int *inputs, const int *targets, int B, int T);
// Access to the forward's logits (B, T, Vp), for sampling (forward without targets;
// after a forward with targets the buffer holds the probabilities, zero past V).
const float *gpt2_cpu_logits(const GPT2 *m);
void gpt2_cpu_zero_grad(GPT2 *m);
// Accumulates into m->grads the gradient of loss_scale * sum over tokens of the
// per-token loss of the last forward. Training uses loss_scale = 1 / (B*T*grad_accum).
// Needs a forward with targets before each call (it turns the probabilities into
// dlogits in place); exits with a message otherwise.
void gpt2_cpu_backward(GPT2 *m, float loss_scale);
// grad_norm, update and zero_grad work on the flat m->params / m->grads buffers.
// sqrt of the sum of squares of all gradients, in llmc/model/grad_norm.h's slice order (zero/'s).
float gpt2_cpu_grad_norm(const GPT2 *m);
// AdamW with bias correction at step t (1-based); weight decay only on the tensors
// gpt2_param_decays() names; grads multiplied by grad_scale first (clipping).
void gpt2_cpu_update(GPT2 *m, float lr, float beta1, float beta2, float eps, float weight_decay,
                     float grad_scale, int t);

#ifdef __cplusplus
}
#endif
#endif
