// gpt2_cuda_memory.c: the sizes of the CUDA model's device buffers (gpt2_cuda_memory.h).
#include "gpt2_cuda_memory.h"

#include <limits.h>
#include <stdio.h>

#include "cuda_kernel_sizes.h"
#include "grad_norm.h"
#include "../utils.h"

#define WHAT "GPT-2 CUDA buffer sizes"

static size_t mul(size_t a, size_t b) { return size_mul(a, b, WHAT); }
static size_t add(size_t a, size_t b) { return size_add(a, b, WHAT); }

size_t gpt2_cuda_piece_bytes(size_t bytes) { return add(bytes, GPT2_CUDA_ALIGN - 1) / GPT2_CUDA_ALIGN * GPT2_CUDA_ALIGN; }
static size_t piece(size_t bytes) { return gpt2_cuda_piece_bytes(bytes); }

size_t gpt2_cuda_att_stats_floats(size_t BT, size_t NH) { return add(mul(BT, NH), 3) / 4 * 4; }

void gpt2_cuda_act_bytes(const GPT2Config *c, int B, int T, const GPT2CudaOptions *opt, int use_cudnn,
                         size_t bytes[GPT2_CUDA_NUM_ACTS]) {
    const size_t L = (size_t)c->num_layers, C = (size_t)c->channels, NH = (size_t)c->num_heads;
    const size_t Vp = (size_t)c->padded_vocab_size, BT = mul((size_t)B, (size_t)T);
    const size_t h = 2, f = 4;   // bf16, fp32
    const int recompute = opt->recompute;
    // per-block buffers: one slot per layer, or the one block a checkpointed model holds
    const size_t S = opt->act_checkpoint ? 1 : L, R = opt->act_offload ? 2 : L + 1;
    const size_t row = mul(BT, C) * h, n_ln = recompute >= 2 ? 1 : S, n_gelu = recompute >= 1 ? 1 : S;
    bytes[GPT2_CUDA_RESIDUAL] = mul(R, row);
    bytes[GPT2_CUDA_RESIDUAL2] = mul(S, row);
    bytes[GPT2_CUDA_LN1] = mul(n_ln, row);
    bytes[GPT2_CUDA_LN2] = recompute >= 2 ? 0 : mul(S, row);   // one scratch, refilled before each use
    bytes[GPT2_CUDA_LN1_MEAN] = bytes[GPT2_CUDA_LN1_RSTD] = bytes[GPT2_CUDA_LN2_MEAN] = bytes[GPT2_CUDA_LN2_RSTD] =
        mul(mul(S, BT), f);
    bytes[GPT2_CUDA_QKV] = mul(mul(S, row), 3);
    bytes[GPT2_CUDA_ATTY] = mul(S, row);
    bytes[GPT2_CUDA_ATT_STATS] = use_cudnn ? mul(mul(S, gpt2_cuda_att_stats_floats(BT, NH)), f) : 0;
    bytes[GPT2_CUDA_FCH] = mul(mul(S, row), 4);
    bytes[GPT2_CUDA_FCH_GELU] = mul(mul(n_gelu, row), 4);
    bytes[GPT2_CUDA_LNF] = row;
    bytes[GPT2_CUDA_LNF_MEAN] = bytes[GPT2_CUDA_LNF_RSTD] = mul(BT, f);
    bytes[GPT2_CUDA_LOGITS] = mul(mul(BT, Vp), h);
    bytes[GPT2_CUDA_LOSSES] = mul(BT, f);
    bytes[GPT2_CUDA_DRESIDUAL] = bytes[GPT2_CUDA_DBUF] = row;
    bytes[GPT2_CUDA_DQKV] = mul(row, 3);
    // tiles: the widest input gradient (the MLP projection's 4C; the classifier's C) summed
    // over tiles in fp32
    const size_t acc_cols = gpt2_cuda_tiles(opt) > 1 ? 4 * C : gpt2_cuda_vocab_tiles(opt) > 1 ? C : 0;
    bytes[GPT2_CUDA_TILE_ACC] = mul(mul(BT, acc_cols), f);
}

size_t gpt2_cuda_act_host_bytes(const GPT2Config *c, int B, int T, const GPT2CudaOptions *opt) {
    if (!opt->act_offload || c->num_layers < 2) return 0;
    return mul(mul((size_t)c->num_layers - 1, mul((size_t)B, (size_t)T)), mul((size_t)c->channels, 2));
}

size_t gpt2_cuda_reduce_scratch_floats(const GPT2Config *c, int B, int T) {
    if (mul((size_t)B, (size_t)T) > INT_MAX) die("%s: B*T = %d*%d rows exceed the kernels' int range", WHAT, B, T);
    const int BT = B * T, C = c->channels;
    size_t n = layernorm_backward_scratch_floats(BT, C), x;
    const int widths[3] = {3 * C, C, 4 * C};
    for (int i = 0; i < 3; i++) {
        x = matmul_backward_scratch_floats(BT, widths[i]);
        if (x > n) n = x;
    }
    return n;
}

size_t gpt2_cuda_token_ints(int B, int T) { return add(mul(5, mul((size_t)B, (size_t)T)), 1); }

void gpt2_cuda_memory(const GPT2Config *c, int B, int T, const GPT2CudaOptions *opt, int use_cudnn,
                      size_t cudnn_workspace, GPT2CudaMemory *out) {
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    const size_t n = opt->external_params ? 0 : gpt2_param_sizes(c, sizes);
    // bf16 working copy, then fp32 master, m, v and gradients
    out->weights = n ? piece(mul(n, 2)) : 0;
    const size_t fp32 = n ? piece(mul(n, 4)) : 0;
    out->grads = opt->micro_grads ? mul(2, fp32) : fp32;
    out->optimizer = mul(3, fp32);
    out->params = add(add(out->weights, out->grads), out->optimizer);
    size_t act[GPT2_CUDA_NUM_ACTS];
    gpt2_cuda_act_bytes(c, B, T, opt, use_cudnn, act);
    out->activations = 0;
    for (int i = 0; i < GPT2_CUDA_NUM_ACTS; i++) out->activations = add(out->activations, piece(act[i]));
    // the gradient norm's plan (slice table and partial sums) exists when the model owns its gradients
    size_t norm_plan = 0;
    if (!opt->external_params) {
        int ns = gpt2_num_slices(c);
        GPT2Slice *slices = (GPT2Slice *)malloc_check((size_t)ns * sizeof(GPT2Slice));
        gpt2_slices(c, slices);
        norm_plan = piece(grad_norm_plan_bytes(slices, ns));
        free(slices);
    }
    out->scratch = add(add(piece(mul(gpt2_cuda_reduce_scratch_floats(c, B, T), 4)), piece(sizeof(double))),
                       add(add(piece(2 * sizeof(float)), norm_plan), piece(mul(gpt2_cuda_token_ints(B, T), sizeof(int)))));
    if (use_cudnn) {
        out->attention = piece(cudnn_workspace);
    } else {   // fp32 scores and bf16 probabilities, (B, NH, T, T) each
        const size_t s = mul(mul(mul((size_t)B, (size_t)c->num_heads), (size_t)T), (size_t)T);
        out->attention = add(piece(mul(s, 4)), piece(mul(s, 2)));
    }
    out->cublaslt = MATMUL_WORKSPACE_BYTES;
    out->total = add(add(add(out->params, out->activations), add(out->scratch, out->attention)), out->cublaslt);
    out->host_activations = gpt2_cuda_act_host_bytes(c, B, T, opt);
}

size_t gpt2_cuda_cudnn_workspace_estimate(const GPT2Config *c, int B, int T, int use_cudnn) {
    const int NH = c->num_heads, HS = c->channels / NH;
    return attention_cudnn_bwd_workspace(0, B, T, NH, HS, use_cudnn == GPT2_CUDNN_ATOMIC).bytes;
}

int gpt2_cuda_check_shape(const GPT2Config *c, int B, int T, char *err, size_t errlen) {
    if (gpt2_config_validate(c, err, errlen) != 0) return -1;
    const int C = c->channels, HS = C / c->num_heads;
    if (C % 8 != 0 || HS % 8 != 0) {
        snprintf(err, errlen, "channels %d and head size %d must be multiples of 8 (16-byte vectors)", C, HS);
        return -1;
    }
    if (C > LAYERNORM_MAX_C) {
        snprintf(err, errlen, "channels %d exceed %d, the widest row the LayerNorm kernels keep in registers", C,
                 LAYERNORM_MAX_C);
        return -1;
    }
    if (c->padded_vocab_size % 8 != 0) {
        snprintf(err, errlen, "padded vocabulary %d must be a multiple of 8", c->padded_vocab_size);
        return -1;
    }
    if (B <= 0 || T <= 0 || T > c->max_seq_len || (size_t)B * (size_t)T > INT_MAX) {
        snprintf(err, errlen, "batch B=%d T=%d must be positive with T <= max_seq_len %d and B*T <= %d", B, T,
                 c->max_seq_len, INT_MAX);
        return -1;
    }
    if ((size_t)B * (size_t)T * (size_t)c->num_heads > INT_MAX) {   // the attention kernels' rows, one per head
        snprintf(err, errlen, "batch B=%d T=%d with %d heads: B*T*heads must be <= %d", B, T, c->num_heads, INT_MAX);
        return -1;
    }
    return 0;
}

int gpt2_cuda_check_options(const GPT2Config *c, const GPT2CudaOptions *opt, char *err, size_t errlen) {
    if (opt->recompute < 0 || opt->recompute > 2) {
        snprintf(err, errlen, "recompute %d must be 0, 1 or 2", opt->recompute);
        return -1;
    }
    if (opt->use_cudnn < GPT2_CUDNN_OFF || opt->use_cudnn > GPT2_CUDNN_ATOMIC) {
        snprintf(err, errlen, "use_cudnn %d must be 0 (plain kernels), 1 (cuDNN) or 2 (cuDNN, atomic dQ)",
                 opt->use_cudnn);
        return -1;
    }
    if ((opt->act_checkpoint | opt->act_offload) & ~1) {
        snprintf(err, errlen, "act_checkpoint %d and act_offload %d must be 0 or 1", opt->act_checkpoint,
                 opt->act_offload);
        return -1;
    }
    if (opt->act_offload && !opt->act_checkpoint) {
        snprintf(err, errlen, "act_offload moves the block inputs act_checkpoint keeps: it needs act_checkpoint 1");
        return -1;
    }
    if (opt->micro_grads & ~1) {
        snprintf(err, errlen, "micro_grads %d must be 0 or 1", opt->micro_grads);
        return -1;
    }
    if (opt->micro_grads && opt->external_params) {
        snprintf(err, errlen, "micro_grads needs the model's own gradients: with external_params they are the "
                 "parameter manager's");
        return -1;
    }
    const int K = gpt2_cuda_tiles(opt);
    if (gpt2_tile_check(c, K, err, errlen) != 0) return -1;
    if ((c->channels / K) % 8 != 0) {
        snprintf(err, errlen, "tiles K = %d give C/K = %d rows per attention or MLP projection tile; the CUDA "
                 "matmuls need a multiple of 8 (16-byte column blocks)", K, c->channels / K);
        return -1;
    }
    const int KV = gpt2_cuda_vocab_tiles(opt);
    if (gpt2_vocab_tile_check(c, KV, err, errlen) != 0) return -1;
    if ((c->padded_vocab_size / KV) % 8 != 0) {
        snprintf(err, errlen, "vocabulary tiles KV = %d give Vp/KV = %d rows of wte per tile; the CUDA matmuls "
                 "need a multiple of 8 (16-byte column blocks of the logits)", KV, c->padded_vocab_size / KV);
        return -1;
    }
    return 0;
}
