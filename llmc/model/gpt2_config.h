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

// The parameters as a parameter manager sees them: one slice per (tensor, layer[, tile]),
// each read by one or two units (a wte slice by an embedding and a classifier unit).
//
// Memory-centric tiling (ZeRO-Infinity 5.1.3), so that a parameter manager gathers one tile
// at a time instead of a whole block or the whole vocabulary (K = KV = 1: none):
//  - K linear tiles: each of a block's four linears (qkvw, attprojw, fcw, fcprojw, each with
//    its bias) is split along its output rows into K tiles, each a contiguous range of the
//    llm.c tensor and a unit of its own. K must divide C (and so 3C and 4C).
//  - KV vocabulary tiles: wte is split along its Vp rows into KV tiles of Vp/KV rows, each
//    a contiguous range read by two units of its own, "embedding tile k" and "classifier
//    tile k". KV must divide Vp. wpe goes with the last embedding tile.
// Units, in forward order, with U = gpt2_block_units(K) (1 when K = 1, else 2 + 4K):
//   k, k = 0..KV-1             embedding tile k (wte rows [k Vp/KV, (k+1) Vp/KV); wpe in k = KV-1)
//   block l, from b = KV + l * U:
//     K = 1: b                 the whole block (its 12 tensors)
//     K > 1: b                 ln1w, ln1b
//            b + 1 + k         tile k of qkvw and qkvb (rows [k 3C/K, (k+1) 3C/K)), k = 0..K-1
//            b + 1 + K + k     tile k of attprojw and attprojb (rows [k C/K, (k+1) C/K))
//            b + 1 + 2K        ln2w, ln2b
//            b + 2 + 2K + k    tile k of fcw and fcb (rows [k 4C/K, (k+1) 4C/K))
//            b + 2 + 3K + k    tile k of fcprojw and fcprojb (rows [k C/K, (k+1) C/K))
//   KV + L U                   final LayerNorm (lnfw, lnfb)
//   KV + L U + 1 + k           classifier tile k (reads wte tile k, tied with embedding tile k)
// With K = KV = 1 that is 0, 1..L, L+1, L+2: the untiled numbering.
typedef struct {
    char name[24];      // "qkvw.3", "wte"; a tile: "fcw.3.t1", "wte.t2"
    int tensor, layer;  // which of the 16 tensors, which layer (0 if not per layer)
    int tile;           // which of the layer's tiles of a tiled tensor (0 otherwise)
    size_t offset;      // element offset in the flat llm.c parameter buffer
    size_t numel;
    int units[2];
    int num_units;
    int decay;          // weight decay applies
} GPT2Slice;

#define GPT2_MAX_TILES 4096
// 1 for the eight tensors linear tiling splits: the weights and biases of the four linears.
int gpt2_param_is_tiled(int tensor);
// Tiles per layer of tensor t with K linear and KV vocabulary tiles: K for a linear's
// tensor, KV for wte, else 1. A model's pointer tables hold an entry layer * tiles + tile
// for each (gpt2_cpu.h, gpt2_cuda.h).
static inline int gpt2_param_tiles(int tensor, int K, int KV) {
    return gpt2_param_is_tiled(tensor) ? K : tensor == GPT2_WTE ? KV : 1;
}
// 0 when K linear tiles fit the shape (1 <= K <= GPT2_MAX_TILES, C divisible by K); else -1
// with the reason, naming K and C, in err.
int gpt2_tile_check(const GPT2Config *c, int K, char *err, size_t errlen);
// The same for KV vocabulary tiles: 1 <= KV <= GPT2_MAX_TILES, Vp divisible by KV; the
// message names KV and Vp.
int gpt2_vocab_tile_check(const GPT2Config *c, int KV, char *err, size_t errlen);

static inline int gpt2_block_units(int K) { return K > 1 ? 2 + 4 * K : 1; }
static inline int gpt2_num_units_tiled(const GPT2Config *c, int K, int KV) {
    return c->num_layers * gpt2_block_units(K) + 1 + 2 * KV;
}
static inline int gpt2_num_units(const GPT2Config *c) { return gpt2_num_units_tiled(c, 1, 1); }
// The unit of block l that reads tile k of per-layer tensor t (k = 0 for the LayerNorms);
// with K = 1 the block's one unit.
int gpt2_block_unit(int K, int KV, int l, int tensor, int k);
static inline int gpt2_unit_embedding(int KV, int k) { (void)KV; return k; }
static inline int gpt2_unit_lnf(const GPT2Config *c, int K, int KV) { return KV + c->num_layers * gpt2_block_units(K); }
static inline int gpt2_unit_classifier(const GPT2Config *c, int K, int KV, int k) {
    return gpt2_unit_lnf(c, K, KV) + 1 + k;
}

static inline int gpt2_num_slices_tiled(const GPT2Config *c, int K, int KV) {
    return 3 + KV + (4 + 8 * K) * c->num_layers;
}
static inline int gpt2_num_slices(const GPT2Config *c) { return gpt2_num_slices_tiled(c, 1, 1); }
// Fills gpt2_num_slices_tiled(c, K, KV) entries. Untiled (K = KV = 1) the table is ordered
// by unit (embeddings, blocks, final LN); tiled, each tiled slice of that table is replaced
// in place by its tiles in order, so the table lists the same elements in the same order
// whatever K and KV: a manager's element numbering (bf16 rounding keys) and a consolidated
// checkpoint (zero_to_model) do not depend on tiling. Exits on a K or KV the checks refuse.
void gpt2_slices_tiled(const GPT2Config *c, int K, int KV, GPT2Slice *out);
void gpt2_slices(const GPT2Config *c, GPT2Slice *out);   // K = KV = 1

// Hook points for a parameter manager (ZeRO), the same for the CPU and the CUDA model.
// Before a unit runs (forward or backward) the model calls fetch, which may repoint the
// unit's parameter slots (GPT2Slots); after, release; after a unit's backward has written
// (CUDA: queued) all its gradients, grads_ready, before that unit's backward release. All
// three may be NULL. With U units (gpt2_num_units_tiled):
// Forward:  fetch/release(u, 0) for u = 0, 1, ..., U-1.
// Backward: fetch(u, 1), grads_ready(u), release(u, 1) for u = U-1, ..., 1, 0, each once.
// Vocabulary tiles run as units of their own in that order: classifier tile KV-1 down to 0,
// ..., embedding tile KV-1 (with wpe) down to 0. Tied wte tile k's gradient is complete at
// embedding tile k's grads_ready; from classifier tile k's it waits with the manager.
// Activation checkpointing (the models' act_checkpoint option) recomputes block l's forward
// just before its backward. Untiled, that runs inside the block unit's backward window: the
// parameters fetched for the backward serve both, and the sequence is the one above. Tiled,
// the recompute's parts precede their backward windows, so it fetches them as a forward
// does -- fetch/release(u, 0) of block l's units in forward order but the fcproj tiles,
// which the recompute does not need -- before the block's first backward fetch. The CUDA
// model at recompute level 2 (-r 2), tiled, also fetches the LN2 unit (u, 0) before the fc
// tiles' backward and the LN1 unit before the qkv tiles', to recompute the LayerNorm
// outputs their weight gradients read.
typedef struct {
    void *ctx;
    void (*fetch)(void *ctx, int unit, int is_backward);
    void (*release)(void *ctx, int unit, int is_backward);
    void (*grads_ready)(void *ctx, int unit);
} GPT2Hooks;

// A model's parameter slots whatever its element types (fp32 on the CPU; bf16 weights and
// fp32 gradients on the GPU): set() points slice s's entries of the model's pointer tables
// at a manager's buffers (grads NULL: the parameters only), and hooks is where the manager
// installs its GPT2Hooks. tiles and vocab_tiles are the model's K and KV: the manager's
// table is gpt2_slices_tiled(c, tiles, vocab_tiles), whose units the hooks see. With these
// a manager needs nothing else of the model.
typedef struct {
    void *model;
    void (*set)(void *model, const GPT2Slice *s, void *params, void *grads);
    GPT2Hooks *hooks;
    int tiles, vocab_tiles;
} GPT2Slots;

// bf16 conversions shared by the host code (round to nearest even; NaN kept NaN).
uint16_t gpt2_f32_to_bf16(float x);
float gpt2_bf16_to_f32(uint16_t b);

#ifdef __cplusplus
}
#endif
#endif // LLMC_GPT2_CONFIG_H
