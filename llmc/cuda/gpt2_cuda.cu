// gpt2_cuda.cu: the GPT-2 model on one GPU. Build (all allocation), forward, backward,
// AdamW update, and the host accessors. Kernels live in their own files; this file only
// decides what runs, in which order, on which buffers.
//
// One block, forward (rows = B*T):
//   ln1   = LayerNorm(residual[l])
//   qkv   = ln1 @ qkvw^T + qkvb
//   atty  = attention(qkv)
//   residual2[l] = residual[l] + atty @ attprojw^T + attprojb    (residual fused in the matmul)
//   ln2   = LayerNorm(residual2[l])
//   fch   = ln2 @ fcw^T + fcb;  fch_gelu = gelu(fch)              (one matmul, GELU epilogue)
//   residual[l+1] = residual2[l] + fch_gelu @ fcprojw^T + fcprojb
// and backward runs the same steps in reverse, with one bf16 buffer for the gradient of
// the residual stream that each LayerNorm backward adds into.
#include "gpt2_cuda.h"
#include "../utils.h"

#include <string.h>

#include "adamw_cuda.cuh"
#include "attention_cudnn.h"
#include "attention_fallback.cuh"
#include "classifier.cuh"
#include "cuda_utils.cuh"
#include "elementwise.cuh"
#include "encoder.cuh"
#include "grad_norm.cuh"
#include "layernorm.cuh"
#include "matmul_cublaslt.h"

// The model's own failures: die's line, naming the model and the caller's source line.
#define gpt2_cuda_die(msg) die("gpt2_cuda: %s", (msg))

// ----------------------------------------------------------------------------
// Memory layout. Each region is carved from one allocation in 256-byte aligned pieces;
// run with base 0 it only measures. The sizes come from gpt2_cuda_memory.c, which a dry
// run calls without a GPU.

static void *carve(uintptr_t base, size_t *at, size_t bytes) {
    if (bytes == 0) return NULL;
    void *p = (void *)(base + *at);
    *at += gpt2_cuda_piece_bytes(bytes);
    return p;
}
#define CARVE(ptr, type, count) ((ptr) = (type *)carve(base, &at, (size_t)(count) * sizeof(type)))

static size_t layout_params(GPT2Cuda *m, uintptr_t base) {
    size_t at = 0, n = m->opt.external_params ? 0 : m->num_parameters;
    CARVE(m->params, bf16, n);
    CARVE(m->master, float, n);
    CARVE(m->m, float, n);
    CARVE(m->v, float, n);
    CARVE(m->grads, float, n);
    CARVE(m->grads_micro, float, m->opt.micro_grads ? n : 0);
    return at;
}

static size_t layout_acts(GPT2Cuda *m, uintptr_t base) {
    size_t bytes[GPT2_CUDA_NUM_ACTS];
    gpt2_cuda_act_bytes(&m->config, m->B, m->T, &m->opt, m->use_cudnn, bytes);
    void *p[GPT2_CUDA_NUM_ACTS];
    size_t at = 0;
    for (int i = 0; i < GPT2_CUDA_NUM_ACTS; i++) p[i] = carve(base, &at, bytes[i]);
    GPT2CudaActs *a = &m->acts;
    a->residual = (bf16 *)p[GPT2_CUDA_RESIDUAL];
    a->residual2 = (bf16 *)p[GPT2_CUDA_RESIDUAL2];
    a->ln1 = (bf16 *)p[GPT2_CUDA_LN1];
    // recompute 2: one LayerNorm scratch, refilled before each use
    a->ln2 = m->opt.recompute >= 2 ? a->ln1 : (bf16 *)p[GPT2_CUDA_LN2];
    a->ln1_mean = (float *)p[GPT2_CUDA_LN1_MEAN];
    a->ln1_rstd = (float *)p[GPT2_CUDA_LN1_RSTD];
    a->ln2_mean = (float *)p[GPT2_CUDA_LN2_MEAN];
    a->ln2_rstd = (float *)p[GPT2_CUDA_LN2_RSTD];
    a->qkv = (bf16 *)p[GPT2_CUDA_QKV];
    a->atty = (bf16 *)p[GPT2_CUDA_ATTY];
    a->att_stats = (float *)p[GPT2_CUDA_ATT_STATS];
    a->fch = (bf16 *)p[GPT2_CUDA_FCH];
    a->fch_gelu = (bf16 *)p[GPT2_CUDA_FCH_GELU];
    a->lnf = (bf16 *)p[GPT2_CUDA_LNF];
    a->lnf_mean = (float *)p[GPT2_CUDA_LNF_MEAN];
    a->lnf_rstd = (float *)p[GPT2_CUDA_LNF_RSTD];
    a->logits = (bf16 *)p[GPT2_CUDA_LOGITS];
    a->losses = (float *)p[GPT2_CUDA_LOSSES];
    a->dresidual = (bf16 *)p[GPT2_CUDA_DRESIDUAL];
    a->dbuf = (bf16 *)p[GPT2_CUDA_DBUF];
    a->dqkv = (bf16 *)p[GPT2_CUDA_DQKV];
    a->tile_acc = (float *)p[GPT2_CUDA_TILE_ACC];
    return at;
}

static size_t token_ints(const GPT2Cuda *m) { return gpt2_cuda_token_ints(m->B, m->T); }

static size_t layout_scratch(GPT2Cuda *m, uintptr_t base) {
    size_t at = 0;
    m->reduce_scratch_floats = gpt2_cuda_reduce_scratch_floats(&m->config, m->B, m->T);
    CARVE(m->reduce_scratch, float, m->reduce_scratch_floats);
    CARVE(m->loss_sum, double, 1);
    CARVE(m->norm_clip, float, 2);
    // the norm's slice table and partial sums, laid out by grad_norm_plan_init after allocation
    m->norm_plan.spans = (GradNormSpan *)carve(
        base, &at, m->opt.external_params ? 0 : grad_norm_plan_bytes(m->slices, m->num_slices));
    CARVE(m->dev_tokens, int, token_ints(m));
    return at;
}

static size_t layout_attention(GPT2Cuda *m, uintptr_t base) {
    size_t at = 0;
    if (m->use_cudnn) {
        m->cudnn_workspace = carve(base, &at, m->cudnn_workspace_bytes);
    } else {
        size_t n = (size_t)m->B * m->config.num_heads * m->T * m->T;
        CARVE(m->att_scores, float, n);
        CARVE(m->att_probs, bf16, n);
    }
    return at;
}

// Allocates one region; -1 when the device is out of memory (the error is cleared).
static int alloc_region(GPT2Cuda *m, size_t (*layout)(GPT2Cuda *, uintptr_t), size_t *bytes_out) {
    size_t bytes = layout(m, 0);
    *bytes_out = bytes;
    if (bytes == 0) return 0;
    void *p = NULL;
    cudaError_t err = cudaMalloc(&p, bytes);
    if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        fprintf(stderr, "gpt2_cuda: out of device memory allocating %.1f MiB\n", bytes / 1048576.0);
        return -1;
    }
    CUDA_CHECK(err);
    m->dev_blocks[m->num_dev_blocks++] = p;
    m->device_bytes += bytes;
    layout(m, (uintptr_t)p);
    return 0;
}

// ----------------------------------------------------------------------------
// Build and free

static void check_shape(const GPT2Config *c, int B, int T) {
    char err[256];
    if (gpt2_cuda_check_shape(c, B, T, err, sizeof(err)) != 0) gpt2_cuda_die(err);
    // what the shape asks of this device: the LayerNorm backward's shared memory per block
    int dev = 0, optin = 0, major = 0, minor = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    const size_t need = layernorm_backward_smem_bytes(c->channels), per256 = layernorm_backward_smem_bytes(256);
    if (need > (size_t)optin) {
        snprintf(err, sizeof(err), "C=%d: the LayerNorm backward needs %zu bytes of shared memory a block, and this "
                 "GPU (compute capability %d.%d) allows %d: C up to %zu trains on it", c->channels, need, major, minor,
                 optin, (size_t)optin / per256 * 256);
        gpt2_cuda_die(err);
    }
}

// The bf16 copy after update step t (0: the initial copy) is the stochastic rounding of
// the master (llmc/numerics/adamw.h), each element keyed by its position in slice order
// (gpt2_slices: by unit, then tensor). That is how zero/ numbers the same elements (its
// tensor table is that slice list), so train_gpt2cu and train_gpt2_zero draw the same
// random bits for the same element and step.
static void refresh_bf16(GPT2Cuda *m, int t, cudaStream_t s) {
    round_stochastic_slices(m->params, m->master, m->slices, m->num_slices, m->opt.seed, t, s);
}

static void free_device(GPT2Cuda *m) {
    for (int i = 0; i < m->num_dev_blocks; i++) CUDA_CHECK(cudaFree(m->dev_blocks[i]));
    m->num_dev_blocks = 0;
    m->device_bytes = 0;
}

// Entries of tensor t's pointer tables: one per layer and tile.
static int table_entries(const GPT2Cuda *m, int t) {
    return (gpt2_param_is_per_layer(t) ? m->config.num_layers : 1) *
           gpt2_param_tiles(t, m->opt.tile_linear, m->opt.tile_vocab);
}

// The gradient tables into a flat buffer laid out as grads (NULL: all entries NULL).
static void point_grads(GPT2Cuda *m, float *base) {
    for (int t = 0; t < GPT2_NUM_PARAM_TENSORS; t++) {
        const int n = table_entries(m, t);
        const size_t per = m->param_sizes[t] / n;
        for (int i = 0; i < n; i++) m->g[t][i] = base ? base + m->param_offsets[t] + i * per : NULL;
    }
}

// Whether this model's cuDNN attention may accumulate dQ atomically (--cudnn 2): its plans
// are prepared and looked up under that choice.
static int atomic_dq(const GPT2Cuda *m) { return m->opt.use_cudnn == GPT2_CUDNN_ATOMIC; }

// Gives back the cuDNN plans this model prepared (attention_cudnn.h: references).
static void release_attention_shapes(GPT2Cuda *m) {
    const int NH = m->config.num_heads, HS = m->config.channels / NH;
    for (int i = 0; i < m->num_att_shapes; i++)
        attention_cudnn_release(m->att_shapes[i][0], m->att_shapes[i][1], NH, HS, atomic_dq(m));
    m->num_att_shapes = 0;
}

int gpt2_cuda_try_build(GPT2Cuda *m, const GPT2Config *config, const float *host_params, int B, int T,
                        const GPT2CudaOptions *opt) {
    check_shape(config, B, T);
    memset(m, 0, sizeof(*m));
    m->config = *config;
    if (opt) m->opt = *opt;
    char why[256];
    if (gpt2_cuda_check_options(config, &m->opt, why, sizeof(why)) != 0) gpt2_cuda_die(why);
    m->opt.tile_linear = gpt2_cuda_tiles(&m->opt);
    m->opt.tile_vocab = gpt2_cuda_vocab_tiles(&m->opt);
    m->B = B;
    m->T = T;
    m->num_parameters = gpt2_param_sizes(config, m->param_sizes);
    gpt2_param_offsets(config, m->param_offsets);
    m->num_slices = gpt2_num_slices(config);
    m->slices = (GPT2Slice *)malloc((size_t)m->num_slices * sizeof(GPT2Slice));
    if (!m->slices) gpt2_cuda_die("out of host memory");
    gpt2_slices(config, m->slices);
    m->matmul_fused = 1;
    const int L = config->num_layers, NH = config->num_heads, C = config->channels;

    matmul_init();
    matmul_set_fused_epilogues(1);
    CUDA_CHECK(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));

    m->use_cudnn = 0;
    if (m->opt.use_cudnn) {
        size_t ws = 0;
        // prepare's 1 and 2 (the backward it built) are GPT2_CUDNN_ON and _ATOMIC; the plans
        // stay keyed by what was asked (atomic_dq)
        m->use_cudnn = attention_cudnn_prepare(B, T, NH, C / NH, atomic_dq(m), &ws);
        m->cudnn_workspace_bytes = ws;
        m->att_shapes[0][0] = B, m->att_shapes[0][1] = T, m->num_att_shapes = 1;
    }

    size_t bytes_params, bytes_acts, bytes_scratch, bytes_att;
    if (alloc_region(m, layout_params, &bytes_params) || alloc_region(m, layout_acts, &bytes_acts) ||
        alloc_region(m, layout_scratch, &bytes_scratch) || alloc_region(m, layout_attention, &bytes_att)) {
        release_attention_shapes(m);   // a caller halving B until it fits would fill the cache
        free_device(m);
        CUDA_CHECK(cudaStreamDestroy(m->stream));
        free(m->slices);
        memset(m, 0, sizeof(*m));
        return -1;
    }
    // The dry run predicts these bytes on the host (gpt2_cuda_memory.c): the two must agree.
    GPT2CudaMemory predicted;
    gpt2_cuda_memory(config, B, T, &m->opt, m->use_cudnn, m->cudnn_workspace_bytes, &predicted);
    if (predicted.params != bytes_params || predicted.activations != bytes_acts || predicted.scratch != bytes_scratch ||
        predicted.attention != bytes_att || predicted.cublaslt != matmul_workspace_bytes()) {
        die("gpt2_cuda: allocated params %zu, activations %zu, scratch %zu, attention %zu, cuBLASLt "
            "%zu bytes, but gpt2_cuda_memory predicts %zu, %zu, %zu, %zu, %zu: fix gpt2_cuda_memory.c",
            bytes_params, bytes_acts, bytes_scratch, bytes_att, matmul_workspace_bytes(), predicted.params,
            predicted.activations, predicted.scratch, predicted.attention, predicted.cublaslt);
    }

    // Parameters: master from the host, its bf16 copy of step 0, zero moments and grads.
    const size_t n = m->num_parameters;
    const int own = !m->opt.external_params;
    if (own) {
        CUDA_CHECK(cudaMemcpyAsync(m->master, host_params, n * sizeof(float), cudaMemcpyHostToDevice, m->stream));
        refresh_bf16(m, 0, m->stream);
        CUDA_CHECK(cudaMemsetAsync(m->m, 0, n * sizeof(float), m->stream));
        CUDA_CHECK(cudaMemsetAsync(m->v, 0, n * sizeof(float), m->stream));
        CUDA_CHECK(cudaMemsetAsync(m->grads, 0, n * sizeof(float), m->stream));
    }
    CUDA_CHECK(cudaMemsetAsync(m->loss_sum, 0, sizeof(double), m->stream));
    CUDA_CHECK(cudaMemsetAsync(m->norm_clip, 0, 2 * sizeof(float), m->stream));
    if (own) grad_norm_plan_init(&m->norm_plan, m->norm_plan.spans, m->slices, m->num_slices, m->stream);

    // Pointer tables into the flat buffers (NULL until a hook fills them when external), an
    // entry per layer and tile.
    for (int t = 0; t < GPT2_NUM_PARAM_TENSORS; t++) {
        const int n = table_entries(m, t);
        const size_t per = m->param_sizes[t] / n;
        m->w[t] = (bf16 **)malloc(n * sizeof(bf16 *));
        m->g[t] = (float **)malloc(n * sizeof(float *));
        if (!m->w[t] || !m->g[t]) gpt2_cuda_die("out of host memory");
        for (int i = 0; i < n; i++) m->w[t][i] = own ? m->params + m->param_offsets[t] + i * per : NULL;
    }
    point_grads(m, own ? m->grads : NULL);

    // act_offload: the pinned host tier, its copy stream and events.
    m->host_act_bytes = gpt2_cuda_act_host_bytes(config, B, T, &m->opt);
    if (m->opt.act_offload) {
        if (m->host_act_bytes) CUDA_CHECK(cudaMallocHost((void **)&m->host_acts, m->host_act_bytes));
        CUDA_CHECK(cudaStreamCreateWithFlags(&m->copy_stream, cudaStreamNonBlocking));
        m->offloaded = (cudaEvent_t *)calloc(L, sizeof(cudaEvent_t));
        m->restored = (cudaEvent_t *)calloc(L, sizeof(cudaEvent_t));
        if (!m->offloaded || !m->restored) gpt2_cuda_die("out of host memory");
        for (int l = 0; l < L; l++) {
            CUDA_CHECK(cudaEventCreateWithFlags(&m->offloaded[l], cudaEventDisableTiming));
            CUDA_CHECK(cudaEventCreateWithFlags(&m->restored[l], cudaEventDisableTiming));
        }
        CUDA_CHECK(cudaEventCreateWithFlags(&m->block_done, cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&m->slot_free, cudaEventDisableTiming));
    }

    // Host side: pinned token staging, stats and logits rows; events.
    for (int s = 0; s < 2; s++) {
        CUDA_CHECK(cudaMallocHost((void **)&m->host_tokens[s], token_ints(m) * sizeof(int)));
        memset(m->host_tokens[s], 0, token_ints(m) * sizeof(int));
        CUDA_CHECK(cudaEventCreateWithFlags(&m->tokens_copied[s], cudaEventDisableTiming));
    }
    CUDA_CHECK(cudaMallocHost((void **)&m->host_loss_sum, sizeof(double)));
    CUDA_CHECK(cudaMallocHost((void **)&m->host_norm, sizeof(float)));
    CUDA_CHECK(cudaMallocHost((void **)&m->host_logits_bf16, config->padded_vocab_size * sizeof(bf16)));
    CUDA_CHECK(cudaMallocHost((void **)&m->host_logits, config->padded_vocab_size * sizeof(float)));
    CUDA_CHECK(cudaEventCreateWithFlags(&m->stats_ready, cudaEventDisableTiming));
    m->token_counts = (int *)malloc((size_t)config->vocab_size * sizeof(int));
    if (!m->token_counts) gpt2_cuda_die("out of host memory");
    CUDA_CHECK(cudaStreamSynchronize(m->stream));

    const double MiB = 1048576.0;
    printf("gpt2_cuda: %zu params, B=%d T=%d, attention %s, recompute %d%s%s, tiles %d, vocabulary tiles %d | device memory: params+master+m+v+"
           "grads %.0f MiB, activations %.0f MiB, attention workspace %.0f MiB, scratch %.0f MiB, cuBLASLt %.0f MiB | "
           "total %.2f GiB | pinned host: offloaded block inputs %.1f MiB\n",
           n, B, T, gpt2_cuda_attention_name(m->use_cudnn), m->opt.recompute, m->opt.act_checkpoint ? ", checkpointed" : "",
           m->opt.act_offload ? " and offloaded" : "", m->opt.tile_linear, m->opt.tile_vocab, bytes_params / MiB,
           bytes_acts / MiB, bytes_att / MiB,
           bytes_scratch / MiB, matmul_workspace_bytes() / MiB,
           (m->device_bytes + matmul_workspace_bytes()) / (1024.0 * MiB), m->host_act_bytes / MiB);
    return 0;
}

void gpt2_cuda_build(GPT2Cuda *m, const GPT2Config *config, const float *host_params, int B, int T,
                     const GPT2CudaOptions *opt) {
    if (gpt2_cuda_try_build(m, config, host_params, B, T, opt) != 0) {
        die("gpt2_cuda: out of device memory for B=%d T=%d (try a smaller batch or recompute)",
            B, T);
    }
}

static void set_slot(void *model, const GPT2Slice *s, void *params, void *grads) {
    GPT2Cuda *m = (GPT2Cuda *)model;
    const int i = s->layer * gpt2_param_tiles(s->tensor, m->opt.tile_linear, m->opt.tile_vocab) + s->tile;
    m->w[s->tensor][i] = (bf16 *)params;
    if (grads) m->g[s->tensor][i] = (float *)grads;
}

GPT2Slots gpt2_cuda_slots(GPT2Cuda *m) {
    return GPT2Slots{m, set_slot, &m->hooks, m->opt.tile_linear, m->opt.tile_vocab};
}

void gpt2_cuda_free(GPT2Cuda *m) {
    if (m->stream == NULL) return;
    CUDA_CHECK(cudaStreamSynchronize(m->stream));
    free_device(m);
    free(m->slices);
    for (int t = 0; t < GPT2_NUM_PARAM_TENSORS; t++) {
        free(m->w[t]);
        free(m->g[t]);
    }
    for (int s = 0; s < 2; s++) {
        CUDA_CHECK(cudaFreeHost(m->host_tokens[s]));
        CUDA_CHECK(cudaEventDestroy(m->tokens_copied[s]));
    }
    CUDA_CHECK(cudaFreeHost(m->host_loss_sum));
    CUDA_CHECK(cudaFreeHost(m->host_norm));
    CUDA_CHECK(cudaFreeHost(m->host_logits_bf16));
    CUDA_CHECK(cudaFreeHost(m->host_logits));
    CUDA_CHECK(cudaEventDestroy(m->stats_ready));
    if (m->opt.act_offload) {
        CUDA_CHECK(cudaStreamSynchronize(m->copy_stream));
        for (int l = 0; l < m->config.num_layers; l++) {
            CUDA_CHECK(cudaEventDestroy(m->offloaded[l]));
            CUDA_CHECK(cudaEventDestroy(m->restored[l]));
        }
        CUDA_CHECK(cudaEventDestroy(m->block_done));
        CUDA_CHECK(cudaEventDestroy(m->slot_free));
        CUDA_CHECK(cudaStreamDestroy(m->copy_stream));
        if (m->host_acts) CUDA_CHECK(cudaFreeHost(m->host_acts));
        free(m->offloaded);
        free(m->restored);
    }
    CUDA_CHECK(cudaStreamDestroy(m->stream));
    free(m->token_counts);
    release_attention_shapes(m);
    memset(m, 0, sizeof(*m));
}

// ----------------------------------------------------------------------------
// Hooks

static void fetch(GPT2Cuda *m, int unit, int bwd) {
    if (m->hooks.fetch) m->hooks.fetch(m->hooks.ctx, unit, bwd);
}
static void release(GPT2Cuda *m, int unit, int bwd) {
    if (m->hooks.release) m->hooks.release(m->hooks.ctx, unit, bwd);
}
static void grads_ready(GPT2Cuda *m, int unit) {
    if (m->hooks.grads_ready) m->hooks.grads_ready(m->hooks.ctx, unit);
}

// ----------------------------------------------------------------------------
// Forward

// Per-layer slices are spaced by the built B*T, so any smaller batch uses the same slots.
static size_t rows_max(const GPT2Cuda *m) { return (size_t)m->B * m->T; }

// Fills a staging slot and queues its copy. The slot's previous copy (two forwards ago)
// must be done before the host overwrites it; normally it is long finished.
static void upload_tokens(GPT2Cuda *m, const int *inputs, const int *targets, int n) {
    const int V = m->config.vocab_size;
    const size_t cap = rows_max(m);
    const int slot = m->token_slot;
    m->token_slot ^= 1;
    CUDA_CHECK(cudaEventSynchronize(m->tokens_copied[slot]));
    int *h = m->host_tokens[slot];
    for (int i = 0; i < n; i++) {
        if (inputs[i] < 0 || inputs[i] >= V || (targets && (targets[i] < 0 || targets[i] >= V))) {
            die("gpt2_cuda_forward: token %d at position %d is outside [0, %d)",
                inputs[i] < 0 || inputs[i] >= V ? inputs[i] : targets[i], i, V);
        }
    }
    memcpy(h, inputs, (size_t)n * sizeof(int));
    m->num_unique = 0;
    if (targets) {
        memcpy(h + cap, targets, (size_t)n * sizeof(int));
        m->num_unique = encoder_buckets_build(h + 3 * cap, h + 4 * cap, h + 2 * cap, inputs, n, V, m->token_counts);
    }
    CUDA_CHECK(cudaMemcpyAsync(m->dev_tokens, h, token_ints(m) * sizeof(int), cudaMemcpyHostToDevice, m->stream));
    CUDA_CHECK(cudaEventRecord(m->tokens_copied[slot], m->stream));
}

// cuDNN plans are built for the build shape; another shape gets its own plan on first
// use (cached by attention_cudnn_prepare), which must fit the workspace we have.
static void attention_check_shape(GPT2Cuda *m, int B, int T) {
    if (!m->use_cudnn) return;
    for (int i = 0; i < m->num_att_shapes; i++)
        if (m->att_shapes[i][0] == B && m->att_shapes[i][1] == T) return;   // checked before
    const int max_shapes = (int)(sizeof(m->att_shapes) / sizeof(m->att_shapes[0]));
    if (m->num_att_shapes == max_shapes)
        die("gpt2_cuda: a forward of B=%d T=%d would be this model's %dth attention shape (cuDNN plans for "
            "at most %d: the build's, validation's, sampling's)", B, T, max_shapes + 1, max_shapes);
    size_t ws = 0;
    const int NH = m->config.num_heads, HS = m->config.channels / NH;
    int ok = attention_cudnn_prepare(B, T, NH, HS, atomic_dq(m), &ws);
    m->att_shapes[m->num_att_shapes][0] = B, m->att_shapes[m->num_att_shapes][1] = T, m->num_att_shapes++;
    if (!ok || ws > m->cudnn_workspace_bytes) {
        die("gpt2_cuda: cuDNN attention cannot run B=%d T=%d within the workspace built for "
            "B=%d T=%d; build the model for this shape", B, T, m->B, m->T);
    }
}

// Block l's activations: its slots of the per-layer arrays (one slot reused by every
// block under act_checkpoint; LayerNorm outputs and the GELU output under recompute).
typedef struct {
    bf16 *res_in, *res_mid, *res_out, *ln1, *ln2, *qkv, *atty, *fch, *gelu;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd, *att_stats;
} BlockActs;

// Slot i of the residual stream: i = l is block l's input, i = L the last output; act_offload
// keeps two slots taken in turn.
static bf16 *res_slot(const GPT2Cuda *m, int i) {
    return m->acts.residual + (size_t)(m->opt.act_offload ? i % 2 : i) * rows_max(m) * m->config.channels;
}

// act_offload's host slot of block l's input (l < L-1).
static bf16 *host_slot(const GPT2Cuda *m, int l) { return m->host_acts + (size_t)l * m->B * m->T * m->config.channels; }

static BlockActs block_acts(const GPT2Cuda *m, int l) {
    const GPT2CudaActs *a = &m->acts;
    const size_t cap = rows_max(m), C = (size_t)m->config.channels, NH = (size_t)m->config.num_heads;
    const size_t k = m->opt.act_checkpoint ? 0 : (size_t)l;
    BlockActs b;
    b.res_in = res_slot(m, l);
    b.res_out = res_slot(m, l + 1);
    b.res_mid = a->residual2 + k * cap * C;
    b.ln1 = m->opt.recompute >= 2 ? a->ln1 : a->ln1 + k * cap * C;
    b.ln2 = m->opt.recompute >= 2 ? a->ln2 : a->ln2 + k * cap * C;
    b.qkv = a->qkv + k * cap * 3 * C;
    b.atty = a->atty + k * cap * C;
    b.fch = a->fch + k * cap * 4 * C;
    b.gelu = m->opt.recompute >= 1 ? a->fch_gelu : a->fch_gelu + k * cap * 4 * C;
    b.ln1_mean = a->ln1_mean + k * cap;
    b.ln1_rstd = a->ln1_rstd + k * cap;
    b.ln2_mean = a->ln2_mean + k * cap;
    b.ln2_rstd = a->ln2_rstd + k * cap;
    b.att_stats = a->att_stats ? a->att_stats + k * gpt2_cuda_att_stats_floats(cap, NH) : NULL;
    return b;
}

// A block's parts (its LayerNorms, each linear's tiles) are units of their own when tiled,
// each fetched around its part; untiled one window around the whole block encloses them.
static void part_fetch(GPT2Cuda *m, int unit, int bwd) {
    if (m->opt.tile_linear > 1) fetch(m, unit, bwd);
}
static void part_done(GPT2Cuda *m, int unit, int bwd) {
    if (m->opt.tile_linear == 1) return;
    if (bwd) grads_ready(m, unit);
    release(m, unit, bwd);
}
static int ln_unit(const GPT2Cuda *m, int l, int t) {
    return gpt2_block_unit(m->opt.tile_linear, m->opt.tile_vocab, l, t, 0);
}
// The untiled block l's one unit.
static int block_unit(const GPT2Cuda *m, int l) { return gpt2_block_unit(1, m->opt.tile_vocab, l, GPT2_LN1W, 0); }

// Block l's linear with weight tensor wt (its bias is wt + 1): out (rows OC apart) = inp @
// W^T + bias [+ residual] [GELU epilogue with gelu_pre: untiled only]. Tiled, tile after
// tile, each writing its column block of out.
static void linear_forward(GPT2Cuda *m, int l, int wt, bf16 *out, const bf16 *inp, const bf16 *residual,
                           bf16 *gelu_pre, int BT, int IC, int OC) {
    const int K = m->opt.tile_linear, R = OC / K;
    if (K == 1) {
        matmul_forward(out, inp, m->w[wt][l], m->w[wt + 1][l], residual, gelu_pre, BT, IC, OC, m->stream);
        return;
    }
    for (int k = 0; k < K; k++) {
        const int unit = gpt2_block_unit(K, m->opt.tile_vocab, l, wt, k), i = l * K + k;
        part_fetch(m, unit, 0);
        matmul_forward_tile(out + (size_t)k * R, OC, inp, m->w[wt][i], m->w[wt + 1][i],
                            residual ? residual + (size_t)k * R : NULL, BT, IC, R, m->stream);
        part_done(m, unit, 0);
    }
}

// Its backward: weight and bias gradients added into g, dinp (bf16) = dout @ W, then GELU's
// backward on it with gelu_pre. Tiled, tiles in reverse order, each complete in its window;
// their input-gradient contributions add up in fp32 (tile_acc), rounded to bf16 once.
static void linear_backward(GPT2Cuda *m, int l, int wt, bf16 *dinp, const bf16 *gelu_pre, const bf16 *dout,
                            const bf16 *inp, int BT, int IC, int OC) {
    const int K = m->opt.tile_linear, R = OC / K;
    cudaStream_t s = m->stream;
    if (K == 1) {
        matmul_backward_weight(m->g[wt][l], m->g[wt + 1][l], dout, inp, 1.0f, BT, IC, OC, m->reduce_scratch, s);
        matmul_backward_input(dinp, dout, m->w[wt][l], gelu_pre, 1.0f, BT, IC, OC, s);
        return;
    }
    for (int k = K - 1; k >= 0; k--) {
        const int unit = gpt2_block_unit(K, m->opt.tile_vocab, l, wt, k), i = l * K + k;
        part_fetch(m, unit, 1);
        matmul_backward_weight_tile(m->g[wt][i], m->g[wt + 1][i], dout + (size_t)k * R, OC, inp, 1.0f, BT, IC, R,
                                    m->reduce_scratch, s);
        matmul_backward_input_tile(m->acts.tile_acc, k < K - 1, dout + (size_t)k * R, OC, m->w[wt][i], 1.0f, BT, IC,
                                   R, s);
        part_done(m, unit, 1);
    }
    cast_f32_to_bf16(dinp, m->acts.tile_acc, (size_t)BT * IC, s);
    if (gelu_pre) gelu_backward_inplace(dinp, gelu_pre, (size_t)BT * IC, s);
}

// Block l's forward (untiled: in the caller's fetch window). A recompute (act_checkpoint, in
// backward) runs the same kernels on the same input and stops before the MLP's output
// projection, which backward does not read (and whose output slot act_offload is refilling).
static void block_forward(GPT2Cuda *m, int l, int B, int T, int recompute) {
    const int C = m->config.channels, NH = m->config.num_heads, HS = C / NH, BT = B * T;
    const BlockActs b = block_acts(m, l);
    cudaStream_t s = m->stream;
    part_fetch(m, ln_unit(m, l, GPT2_LN1W), 0);
    layernorm_forward(b.ln1, b.ln1_mean, b.ln1_rstd, b.res_in, m->w[GPT2_LN1W][l], m->w[GPT2_LN1B][l], BT, C, s);
    part_done(m, ln_unit(m, l, GPT2_LN1W), 0);
    linear_forward(m, l, GPT2_QKVW, b.qkv, b.ln1, NULL, NULL, BT, C, 3 * C);
    if (m->use_cudnn)
        attention_cudnn_forward(b.atty, b.att_stats, b.qkv, B, T, NH, HS, atomic_dq(m), m->cudnn_workspace, s);
    else
        attention_fallback_forward(b.atty, m->att_scores, m->att_probs, b.qkv, B, T, NH, HS, s);
    linear_forward(m, l, GPT2_ATTPROJW, b.res_mid, b.atty, b.res_in, NULL, BT, C, C);
    part_fetch(m, ln_unit(m, l, GPT2_LN2W), 0);
    layernorm_forward(b.ln2, b.ln2_mean, b.ln2_rstd, b.res_mid, m->w[GPT2_LN2W][l], m->w[GPT2_LN2B][l], BT, C, s);
    part_done(m, ln_unit(m, l, GPT2_LN2W), 0);
    if (m->opt.recompute >= 1 || m->opt.tile_linear > 1) {
        // Backward recomputes gelu_forward(fch) (recompute >= 1); cuBLASLt's GELU epilogue
        // works on the unrounded fp32 pre-activation, so use the same kernel here to get the
        // same bits. Tiles write their column blocks of fch, GELU follows over all of it.
        linear_forward(m, l, GPT2_FCW, b.fch, b.ln2, NULL, NULL, BT, C, 4 * C);
        gelu_forward(b.gelu, b.fch, (size_t)BT * 4 * C, s);
    } else {
        linear_forward(m, l, GPT2_FCW, b.gelu, b.ln2, NULL, b.fch, BT, C, 4 * C);
    }
    if (recompute) return;
    // act_offload: the output slot held block l-1's input until its copy to the host was done
    if (m->opt.act_offload && l > 0 && m->have_targets) CUDA_CHECK(cudaStreamWaitEvent(s, m->offloaded[l - 1], 0));
    linear_forward(m, l, GPT2_FCPROJW, b.res_out, b.gelu, b.res_mid, NULL, BT, 4 * C, C);
}

// Block l's backward: dres holds d(loss)/d(block output) and becomes d/d(block input).
// Untiled, one backward window around the block encloses the act_checkpoint recompute;
// tiled, each part has its own (gpt2_config.h: GPT2Hooks), and recompute level 2 refills a
// LayerNorm output inside a forward window of its LayerNorm's unit.
static void block_backward(GPT2Cuda *m, int l, int B, int T, bf16 *dres) {
    const int C = m->config.channels, NH = m->config.num_heads, HS = C / NH, BT = B * T, L = m->config.num_layers;
    GPT2CudaActs *a = &m->acts;
    cudaStream_t s = m->stream;
    float *scratch = m->reduce_scratch;
    if (m->opt.tile_linear == 1) fetch(m, block_unit(m, l), 1);
    if (m->opt.act_offload && l < L - 1) CUDA_CHECK(cudaStreamWaitEvent(s, m->restored[l], 0));
    // act_offload: block l-1's input comes back into the slot of block l's output (read by
    // nothing any more) once block l+1's backward, which read that slot, is done
    if (m->opt.act_offload && l > 0) {
        CUDA_CHECK(cudaEventRecord(m->slot_free, s));
        CUDA_CHECK(cudaStreamWaitEvent(m->copy_stream, m->slot_free, 0));
        CUDA_CHECK(cudaMemcpyAsync(res_slot(m, l - 1), host_slot(m, l - 1), (size_t)BT * C * sizeof(bf16),
                                   cudaMemcpyHostToDevice, m->copy_stream));
        CUDA_CHECK(cudaEventRecord(m->restored[l - 1], m->copy_stream));
    }
    if (m->opt.act_checkpoint) block_forward(m, l, B, T, 1);
    const BlockActs b = block_acts(m, l);

    // MLP. dres is the gradient of this block's output, also that of residual2 (identity path).
    if (m->opt.recompute >= 1) gelu_forward(b.gelu, b.fch, (size_t)BT * 4 * C, s);
    bf16 *dfch = b.gelu; // GELU output no longer needed once the weight gradients read it: it takes d(fch)
    linear_backward(m, l, GPT2_FCPROJW, dfch, b.fch, dres, b.gelu, BT, 4 * C, C);
    if (m->opt.recompute >= 2) {
        part_fetch(m, ln_unit(m, l, GPT2_LN2W), 0);
        layernorm_forward(b.ln2, NULL, NULL, b.res_mid, m->w[GPT2_LN2W][l], m->w[GPT2_LN2B][l], BT, C, s);
        part_done(m, ln_unit(m, l, GPT2_LN2W), 0);
    }
    linear_backward(m, l, GPT2_FCW, a->dbuf, NULL, dfch, b.ln2, BT, C, 4 * C);
    part_fetch(m, ln_unit(m, l, GPT2_LN2W), 1);
    layernorm_backward(dres, m->g[GPT2_LN2W][l], m->g[GPT2_LN2B][l], a->dbuf, b.res_mid, b.ln2_mean, b.ln2_rstd,
                       m->w[GPT2_LN2W][l], BT, C, 1, scratch, s);
    part_done(m, ln_unit(m, l, GPT2_LN2W), 1);

    // Attention. dres is now the gradient of residual2, also that of the block input.
    linear_backward(m, l, GPT2_ATTPROJW, a->dbuf, NULL, dres, b.atty, BT, C, C);
    if (m->use_cudnn)
        attention_cudnn_backward(a->dqkv, a->dbuf, b.qkv, b.atty, b.att_stats, B, T, NH, HS, atomic_dq(m),
                                 m->cudnn_workspace, s);
    else
        attention_fallback_backward(a->dqkv, m->att_scores, m->att_probs, a->dbuf, b.qkv, B, T, NH, HS, s);
    if (m->opt.recompute >= 2) {
        part_fetch(m, ln_unit(m, l, GPT2_LN1W), 0);
        layernorm_forward(b.ln1, NULL, NULL, b.res_in, m->w[GPT2_LN1W][l], m->w[GPT2_LN1B][l], BT, C, s);
        part_done(m, ln_unit(m, l, GPT2_LN1W), 0);
    }
    linear_backward(m, l, GPT2_QKVW, a->dbuf, NULL, a->dqkv, b.ln1, BT, C, 3 * C);
    part_fetch(m, ln_unit(m, l, GPT2_LN1W), 1);
    layernorm_backward(dres, m->g[GPT2_LN1W][l], m->g[GPT2_LN1B][l], a->dbuf, b.res_in, b.ln1_mean, b.ln1_rstd,
                       m->w[GPT2_LN1W][l], BT, C, 1, scratch, s);
    part_done(m, ln_unit(m, l, GPT2_LN1W), 1);
    if (m->opt.tile_linear == 1) {
        grads_ready(m, block_unit(m, l));
        release(m, block_unit(m, l), 1);
    }
}

void gpt2_cuda_forward(GPT2Cuda *m, const int *inputs, const int *targets, int B, int T) {
    const GPT2Config *c = &m->config;
    const int L = c->num_layers, C = c->channels;
    const int V = c->vocab_size, Vp = c->padded_vocab_size;
    if (B <= 0 || T <= 0 || (size_t)B * T > rows_max(m) || T > m->T) {
        die("gpt2_cuda_forward: B=%d T=%d does not fit the model built for B=%d T=%d", B, T,
            m->B, m->T);
    }
    attention_check_shape(m, B, T);
    const int BT = B * T;
    const size_t cap = rows_max(m);
    cudaStream_t s = m->stream;
    GPT2CudaActs *a = &m->acts;
    m->cur_B = B;
    m->cur_T = T;
    m->have_targets = targets != NULL;
    matmul_set_fused_epilogues(m->matmul_fused);
    upload_tokens(m, inputs, targets, BT);
    const int *d_inputs = m->dev_tokens, *d_targets = m->dev_tokens + cap;

    // embedding tiles in order, wpe with the last
    const int K = m->opt.tile_linear, KV = m->opt.tile_vocab, RV = Vp / KV;
    for (int k = 0; k < KV; k++) {
        fetch(m, gpt2_unit_embedding(KV, k), 0);
        encoder_forward_tile(a->residual, d_inputs, m->w[GPT2_WTE][k], k == KV - 1 ? m->w[GPT2_WPE][0] : NULL, k * RV,
                             (k + 1) * RV, B, T, C, s);
        release(m, gpt2_unit_embedding(KV, k), 0);
    }

    for (int l = 0; l < L; l++) {
        if (K == 1) fetch(m, block_unit(m, l), 0);   // tiled: each part fetches its unit
        block_forward(m, l, B, T, 0);
        if (K == 1) release(m, block_unit(m, l), 0);
        // act_offload: block l's input goes to the host tier (the next block writes over it)
        if (m->opt.act_offload && targets && l < L - 1) {
            CUDA_CHECK(cudaEventRecord(m->block_done, s));
            CUDA_CHECK(cudaStreamWaitEvent(m->copy_stream, m->block_done, 0));
            CUDA_CHECK(cudaMemcpyAsync(host_slot(m, l), res_slot(m, l), (size_t)BT * C * sizeof(bf16),
                                       cudaMemcpyDeviceToHost, m->copy_stream));
            CUDA_CHECK(cudaEventRecord(m->offloaded[l], m->copy_stream));
        }
    }

    fetch(m, gpt2_unit_lnf(c, K, KV), 0);
    layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, res_slot(m, L), m->w[GPT2_LNFW][0],
                      m->w[GPT2_LNFB][0], BT, C, s);
    release(m, gpt2_unit_lnf(c, K, KV), 0);

    // classifier tiles in order, each writing its column block of the logits; the softmax
    // and loss read no parameters and follow in the last tile's window
    for (int k = 0; k < KV; k++) {
        fetch(m, gpt2_unit_classifier(c, K, KV, k), 0);
        if (KV == 1) matmul_forward(a->logits, a->lnf, m->w[GPT2_WTE][0], NULL, NULL, NULL, BT, C, Vp, s);
        else matmul_forward_tile(a->logits + (size_t)k * RV, Vp, a->lnf, m->w[GPT2_WTE][k], NULL, NULL, BT, C, RV, s);
        if (targets && k == KV - 1) {
            classifier_forward_backward(a->logits, a->losses, d_targets, BT, V, Vp, s);
            loss_accumulate(m->loss_sum, a->losses, BT, s);
            m->loss_tokens += BT;
        }
        release(m, gpt2_unit_classifier(c, K, KV, k), 0);
    }
}

// ----------------------------------------------------------------------------
// Backward

void gpt2_cuda_zero_grad(GPT2Cuda *m) {
    // Under a parameter manager the gradients are its buffers, zeroed by it.
    if (!m->opt.external_params)
        CUDA_CHECK(cudaMemsetAsync(m->grads, 0, m->num_parameters * sizeof(float), m->stream));
    m->micro_in_step = 0;
    m->norm_current = 0;
    gpt2_cuda_reset_loss(m);
}

void gpt2_cuda_reset_loss(GPT2Cuda *m) {
    CUDA_CHECK(cudaMemsetAsync(m->loss_sum, 0, sizeof(double), m->stream));
    m->loss_tokens = 0;
}

static void backward_into_tables(GPT2Cuda *m, float loss_scale);

// The first micro-batch's gradient goes straight into the zeroed sum (0 + g is g); each
// later one into a zeroed buffer of its own, then sum += it, element by element: the sum
// of whole micro-batch gradients in order, as ZeRO's rank-order reduction forms it.
void gpt2_cuda_backward(GPT2Cuda *m, float loss_scale) {
    if (!m->have_targets) gpt2_cuda_die("backward needs a forward with targets first");
    if (!m->opt.micro_grads || m->micro_in_step++ == 0) {
        backward_into_tables(m, loss_scale);
        return;
    }
    const size_t n = m->num_parameters;
    CUDA_CHECK(cudaMemsetAsync(m->grads_micro, 0, n * sizeof(float), m->stream));
    point_grads(m, m->grads_micro);
    backward_into_tables(m, loss_scale);
    point_grads(m, m->grads);
    accumulate_f32(m->grads, m->grads_micro, n, m->stream);
}

static void backward_into_tables(GPT2Cuda *m, float loss_scale) {
    const GPT2Config *c = &m->config;
    const int L = c->num_layers, C = c->channels, Vp = c->padded_vocab_size;
    const int B = m->cur_B, T = m->cur_T, BT = B * T;
    const size_t cap = rows_max(m);
    cudaStream_t s = m->stream;
    GPT2CudaActs *a = &m->acts;
    float *scratch = m->reduce_scratch;
    matmul_set_fused_epilogues(m->matmul_fused);
    m->norm_current = 0;   // the gradients change

    // Classifier: the logits buffer holds softmax - onehot; loss_scale enters as alpha.
    // Tiled, tiles in reverse order, each tile's dwte complete in its window (the embedding
    // adds to it later); their input gradients add up in fp32 (tile_acc), rounded once.
    const int K = m->opt.tile_linear, KV = m->opt.tile_vocab, RV = Vp / KV;
    for (int k = KV - 1; k >= 0; k--) {
        const int unit = gpt2_unit_classifier(c, K, KV, k);
        fetch(m, unit, 1);
        if (KV == 1) {
            matmul_backward_input(a->dbuf, a->logits, m->w[GPT2_WTE][0], NULL, loss_scale, BT, C, Vp, s);
            matmul_backward_weight(m->g[GPT2_WTE][0], NULL, a->logits, a->lnf, loss_scale, BT, C, Vp, scratch, s);
        } else {
            matmul_backward_weight_tile(m->g[GPT2_WTE][k], NULL, a->logits + (size_t)k * RV, Vp, a->lnf, loss_scale,
                                        BT, C, RV, scratch, s);
            matmul_backward_input_tile(a->tile_acc, k < KV - 1, a->logits + (size_t)k * RV, Vp, m->w[GPT2_WTE][k],
                                       loss_scale, BT, C, RV, s);
        }
        grads_ready(m, unit);
        release(m, unit, 1);
    }
    if (KV > 1) cast_f32_to_bf16(a->dbuf, a->tile_acc, (size_t)BT * C, s);

    fetch(m, gpt2_unit_lnf(c, K, KV), 1);
    layernorm_backward(a->dresidual, m->g[GPT2_LNFW][0], m->g[GPT2_LNFB][0], a->dbuf, res_slot(m, L),
                       a->lnf_mean, a->lnf_rstd, m->w[GPT2_LNFW][0], BT, C, 0, scratch, s);
    grads_ready(m, gpt2_unit_lnf(c, K, KV));
    release(m, gpt2_unit_lnf(c, K, KV), 1);

    bf16 *dres = a->dresidual;
    for (int l = L - 1; l >= 0; l--) block_backward(m, l, B, T, dres);

    EncoderBuckets buckets;
    buckets.num_unique = m->num_unique;
    buckets.positions = m->dev_tokens + 2 * cap;
    buckets.unique_tokens = m->dev_tokens + 3 * cap;
    buckets.starts = m->dev_tokens + 4 * cap;
    // embedding tiles in reverse order, dwpe with the last
    for (int k = KV - 1; k >= 0; k--) {
        const int unit = gpt2_unit_embedding(KV, k);
        fetch(m, unit, 1);
        encoder_backward_tile(m->g[GPT2_WTE][k], k == KV - 1 ? m->g[GPT2_WPE][0] : NULL, dres, &buckets, k * RV,
                              (k + 1) * RV, B, T, C, s);
        grads_ready(m, unit);
        release(m, unit, 1);
    }
}

// ----------------------------------------------------------------------------
// Update and stats

// The functions below work on the model's own parameter buffers.
static void require_own_params(const GPT2Cuda *m, const char *fn) {
    if (m->opt.external_params) {
        char msg[256];
        snprintf(msg, sizeof(msg), "%s: parameters are managed externally (ZeRO)", fn);
        gpt2_cuda_die(msg);
    }
}

void gpt2_cuda_update(GPT2Cuda *m, float lr, float beta1, float beta2, float eps, float weight_decay,
                      float grad_clip, int t) {
    require_own_params(m, __func__);
    if (t < 1) gpt2_cuda_die("update step t must be >= 1");
    cudaStream_t s = m->stream;
    if (!m->norm_current || m->norm_current_clip != grad_clip) gpt2_cuda_grad_norm(m, grad_clip);
    AdamWParams hp = adamw_params(lr, beta1, beta2, eps, weight_decay, 1.0f, t);
    // Over the slice table, so the rounding is keyed in slice order (see refresh_bf16).
    adamw_update_slices(m->master, m->params, m->grads, m->m, m->v, m->slices, m->num_slices, hp, m->norm_clip + 1,
                        m->opt.seed, t, s);
}

void gpt2_cuda_grad_norm(GPT2Cuda *m, float grad_clip) {
    require_own_params(m, __func__);
    grad_norm_clip(m->norm_clip, m->grads, &m->norm_plan, grad_clip, m->stream);
    m->norm_current = 1;
    m->norm_current_clip = grad_clip;
}

void gpt2_cuda_step_stats(GPT2Cuda *m, float *mean_loss, float *grad_norm) {
    CUDA_CHECK(cudaMemcpyAsync(m->host_loss_sum, m->loss_sum, sizeof(double), cudaMemcpyDeviceToHost, m->stream));
    CUDA_CHECK(cudaMemcpyAsync(m->host_norm, m->norm_clip, sizeof(float), cudaMemcpyDeviceToHost, m->stream));
    CUDA_CHECK(cudaEventRecord(m->stats_ready, m->stream));
    CUDA_CHECK(cudaEventSynchronize(m->stats_ready));
    if (mean_loss) *mean_loss = m->loss_tokens > 0 ? (float)(*m->host_loss_sum / (double)m->loss_tokens) : -1.0f;
    if (grad_norm) *grad_norm = *m->host_norm;
}

const float *gpt2_cuda_logits_row(GPT2Cuda *m, int b, int t) {
    if (m->have_targets) gpt2_cuda_die("logits_row needs a forward without targets (targets overwrite logits)");
    if (b < 0 || b >= m->cur_B || t < 0 || t >= m->cur_T) gpt2_cuda_die("logits_row: position outside the last forward");
    const int V = m->config.vocab_size, Vp = m->config.padded_vocab_size;
    const bf16 *row = m->acts.logits + ((size_t)b * m->cur_T + t) * Vp;
    CUDA_CHECK(cudaMemcpyAsync(m->host_logits_bf16, row, V * sizeof(bf16), cudaMemcpyDeviceToHost, m->stream));
    CUDA_CHECK(cudaStreamSynchronize(m->stream));
    const uint16_t *bits = (const uint16_t *)m->host_logits_bf16;
    for (int i = 0; i < V; i++) m->host_logits[i] = gpt2_bf16_to_f32(bits[i]);
    return m->host_logits;
}

// ----------------------------------------------------------------------------
// Host accessors (synchronous)

static void copy_to_host(GPT2Cuda *m, void *dst, const void *src, size_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, m->stream));
    CUDA_CHECK(cudaStreamSynchronize(m->stream));
}

void gpt2_cuda_get_master(GPT2Cuda *m, float *host_params) {
    require_own_params(m, __func__);
    copy_to_host(m, host_params, m->master, m->num_parameters * sizeof(float));
}

void gpt2_cuda_get_opt_state(GPT2Cuda *m, float *host_m, float *host_v) {
    require_own_params(m, __func__);
    if (host_m) copy_to_host(m, host_m, m->m, m->num_parameters * sizeof(float));
    if (host_v) copy_to_host(m, host_v, m->v, m->num_parameters * sizeof(float));
}

void gpt2_cuda_get_grads(GPT2Cuda *m, float *host_grads) {
    require_own_params(m, __func__);
    copy_to_host(m, host_grads, m->grads, m->num_parameters * sizeof(float));
}

void gpt2_cuda_get_params_bf16(GPT2Cuda *m, float *host_params) {
    require_own_params(m, __func__);
    const size_t n = m->num_parameters;
    uint16_t *tmp = (uint16_t *)malloc(n * sizeof(uint16_t));
    if (!tmp) gpt2_cuda_die("out of host memory");
    copy_to_host(m, tmp, m->params, n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) host_params[i] = gpt2_bf16_to_f32(tmp[i]);
    free(tmp);
}

void gpt2_cuda_set_state(GPT2Cuda *m, const float *host_params, const float *host_m, const float *host_v) {
    gpt2_cuda_set_state_at(m, host_params, host_m, host_v, 0);
}

void gpt2_cuda_set_state_at(GPT2Cuda *m, const float *host_params, const float *host_m, const float *host_v,
                            int step) {
    require_own_params(m, __func__);
    if (step < 0) gpt2_cuda_die("set_state_at: negative step");
    const size_t bytes = m->num_parameters * sizeof(float);
    cudaStream_t s = m->stream;
    CUDA_CHECK(cudaMemcpyAsync(m->master, host_params, bytes, cudaMemcpyHostToDevice, s));
    if (host_m) CUDA_CHECK(cudaMemcpyAsync(m->m, host_m, bytes, cudaMemcpyHostToDevice, s));
    else CUDA_CHECK(cudaMemsetAsync(m->m, 0, bytes, s));
    if (host_v) CUDA_CHECK(cudaMemcpyAsync(m->v, host_v, bytes, cudaMemcpyHostToDevice, s));
    else CUDA_CHECK(cudaMemsetAsync(m->v, 0, bytes, s));
    refresh_bf16(m, step, s);
    CUDA_CHECK(cudaStreamSynchronize(s)); // the host buffers may be freed once we return
}
