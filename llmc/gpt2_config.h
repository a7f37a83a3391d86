// gpt2_config.h: the GPT-2 model shape and its parameter table, shared by the CPU
// reference, the CUDA trainers and the checkpoint code. Parameters are 16 tensors in
// llm.c order; per-layer tensors are stored layer after layer inside each tensor.
#ifndef LLMC_GPT2_CONFIG_H
#define LLMC_GPT2_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int max_seq_len;       // maxT: rows of the position embedding
    int vocab_size;        // V: real tokens (50257 for GPT-2)
    int padded_vocab_size; // Vp: V rounded up to a multiple of 128 (50304), rows of wte
    int num_layers;        // L
    int num_heads;         // NH
    int channels;          // C
} GPT2Config;

enum {
    GPT2_WTE, GPT2_WPE, GPT2_LN1W, GPT2_LN1B, GPT2_QKVW, GPT2_QKVB, GPT2_ATTPROJW, GPT2_ATTPROJB,
    GPT2_LN2W, GPT2_LN2B, GPT2_FCW, GPT2_FCB, GPT2_FCPROJW, GPT2_FCPROJB, GPT2_LNFW, GPT2_LNFB,
    GPT2_NUM_PARAM_TENSORS
};

#define GPT2_EOT 50256
#define GPT2_VOCAB 50257

// Limits on every shape field (model files, descriptors, checkpoints). They are far
// above GPT-2 XL (L 48, C 1600, NH 25, maxT 1024, Vp 50304) and models 10x larger
// (GPT-3 175B: L 96, C 12288, NH 96, maxT 2048), and low enough that every size
// computed from a valid config fits size_t with room to spare (12 L C^2 < 2^56).
#define GPT2_MAX_LAYERS 1024
#define GPT2_MAX_CHANNELS 65536
#define GPT2_MAX_HEADS 4096
#define GPT2_MAX_SEQ_LEN (1 << 20)
#define GPT2_MAX_VOCAB 65536          // token shards hold uint16 ids
#define GPT2_MAX_PADDED_VOCAB 131072

// Elements of each of the 16 tensors (all layers together); returns the total.
// Overflow-checked: exits (naming the shape) rather than wrap.
size_t gpt2_param_sizes(const GPT2Config *c, size_t sizes[GPT2_NUM_PARAM_TENSORS]);
// Element offset of each tensor inside one flat buffer holding all 16 in order.
void gpt2_param_offsets(const GPT2Config *c, size_t offsets[GPT2_NUM_PARAM_TENSORS]);
const char *gpt2_param_name(int tensor);
// 1 for the 12 per-layer tensors (their size is L times the per-layer size).
int gpt2_param_is_per_layer(int tensor);
// 1 for tensors that take weight decay: the 2D ones (embeddings and matmul weights).
int gpt2_param_decays(int tensor);

// "d12" -> 12 layers, 768 channels, 12 heads (llm.c's rule: C = 64 L, NH = L),
// maxT 1024, GPT-2 vocabulary. Also accepts "d4c128h4t256" style overrides for
// tiny models (c: channels, h: heads, t: max sequence length). Returns 0 on
// success, -1 (with a message in err) on a malformed or out-of-limits descriptor.
int gpt2_config_from_descriptor(const char *desc, GPT2Config *c, char *err, size_t errlen);
// Checks every field against the limits above and the shape invariants (C divisible by
// NH, V <= Vp); same return, the message names the field and its value.
int gpt2_config_validate(const GPT2Config *c, char *err, size_t errlen);
// Floating point operations per token for forward+backward (6N + attention), for MFU.
double gpt2_flops_per_token(const GPT2Config *c, int T);

// llm.c model files (reading, partitioned reading, streamed writing) are in
// gpt2_model_file.h.

// GPT-2 initialization, a pure function of (seed, tensor, element): N(0, 0.02) for
// weights and embeddings, 0.02/sqrt(2L) for the two residual projections, zeros for
// biases and the padded wte rows, ones for LayerNorm weights.
void gpt2_init_params(const GPT2Config *c, float *params, uint64_t seed);

// Initial values of elements [offset, offset+count) of tensor t (offsets within the
// whole tensor, all layers): the same numbers gpt2_init_params writes there. Lets a
// sharded trainer initialize only what it owns.
void gpt2_init_range(const GPT2Config *c, int t, size_t offset, size_t count, float *out, uint64_t seed);

// The parameters as a parameter manager sees them: one slice per (tensor, layer), each
// read by one or two units. Units: 0 = embeddings (wte, wpe), 1..L = blocks, L+1 = final
// LayerNorm, L+2 = classifier (reads wte, tied with the embedding).
typedef struct {
    char name[24];      // "qkvw.3", "wte"
    int tensor, layer;  // which of the 16 tensors, which layer (0 if not per layer)
    size_t offset;      // element offset in the flat llm.c parameter buffer
    size_t numel;
    int units[2];
    int num_units;
    int decay;          // weight decay applies
} GPT2Slice;

static inline int gpt2_num_units(const GPT2Config *c) { return c->num_layers + 3; }
static inline int gpt2_num_slices(const GPT2Config *c) { return 4 + 12 * c->num_layers; }
// Fills gpt2_num_slices(c) entries, ordered by unit (embeddings, blocks, final LN).
void gpt2_slices(const GPT2Config *c, GPT2Slice *out);

// Hook points for a parameter manager (ZeRO), the same for the CPU and the CUDA model.
// Before a unit runs (forward or backward) the model calls fetch, which may repoint the
// unit's parameter slots (GPT2Slots); after, release; after a unit's backward has written
// (CUDA: queued) all its gradients, grads_ready, before that unit's backward release. All
// three may be NULL.
// Forward:  fetch/release(u, 0) for u = 0, 1..L, L+1, L+2.
// Backward: fetch(u, 1), grads_ready(u), release(u, 1) for u = L+2, L+1, L..1, 0.
typedef struct {
    void *ctx;
    void (*fetch)(void *ctx, int unit, int is_backward);
    void (*release)(void *ctx, int unit, int is_backward);
    void (*grads_ready)(void *ctx, int unit);
} GPT2Hooks;

// A model's parameter slots whatever its element types (fp32 on the CPU; bf16 weights and
// fp32 gradients on the GPU): set() points slice s's entries of the model's pointer tables
// at a manager's buffers (grads NULL: the parameters only), and hooks is where the manager
// installs its GPT2Hooks. With these a manager needs nothing else of the model.
typedef struct {
    void *model;
    void (*set)(void *model, const GPT2Slice *s, void *params, void *grads);
    GPT2Hooks *hooks;
} GPT2Slots;

// bf16 conversions shared by the host code (round to nearest even; NaN kept NaN).
uint16_t gpt2_f32_to_bf16(float x);
float gpt2_bf16_to_f32(uint16_t b);

#ifdef __cplusplus
}
#endif
#endif // LLMC_GPT2_CONFIG_H
