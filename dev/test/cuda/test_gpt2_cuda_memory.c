// test_gpt2_cuda_memory.c: the CUDA model's device bytes, computed on the host without a
// GPU (llmc/model/gpt2_cuda_memory.h: what gpt2_cuda_build carves, and what train_gpt2_zero's
// dry run predicts), against a count made here from the shapes gpt2_cuda.h documents for
// each buffer; the shape checks the build applies; overflow stops with a message.
// (On a GPU, gpt2_cuda_try_build itself compares its allocation with these numbers.)
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "../../../llmc/model/cuda_kernel_sizes.h"
#include "../../../llmc/model/gpt2_config.h"
#include "../../../llmc/model/gpt2_cuda_memory.h"
#include "../common/test_util.h"

static GPT2Config small_config(void) {
    GPT2Config c = {64, 100, 128, 2, 4, 64};   // maxT, V, Vp, L, NH, C: head size 16
    return c;
}

static size_t p256(size_t n) { return (n + 255) / 256 * 256; }

// gpt2_cuda.h's GPT2CudaActs, buffer by buffer (bf16 = 2 bytes, fp32 = 4); act_checkpoint
// keeps one block's buffers (S = 1), act_offload two residual slots (R = 2), tiles add an
// fp32 (B, T, 4C) accumulator
static size_t acts_reference(const GPT2Config *c, int B, int T, int recompute, int cudnn, int ckpt, int offload,
                             int tiles) {
    const size_t L = c->num_layers, C = c->channels, NH = c->num_heads, Vp = c->padded_vocab_size;
    const size_t BT = (size_t)B * T, row = BT * C * 2, S = ckpt ? 1 : L, R = offload ? 2 : L + 1;
    size_t s = p256(R * row) + p256(S * row);                             // residual, residual2
    s += recompute >= 2 ? p256(row) : 2 * p256(S * row);                  // ln1, ln2 (one shared scratch)
    s += 4 * p256(S * BT * 4);                                            // ln1/ln2 mean and rstd
    s += p256(3 * S * row) + p256(S * row);                               // qkv, atty
    s += cudnn ? p256(S * (size_t)B * NH * T * 4) : 0;                    // att_stats
    s += p256(4 * S * row) + p256(4 * (recompute >= 1 ? 1 : S) * row);   // fch, fch_gelu
    s += p256(row) + 2 * p256(BT * 4) + p256(BT * Vp * 2) + p256(BT * 4); // lnf, its stats, logits, losses
    s += 2 * p256(row) + p256(3 * row);                                   // dresidual, dbuf, dqkv
    s += tiles > 1 ? p256(BT * 4 * C * 4) : 0;                            // tile_acc
    return s;
}

static void test_regions_match_documented_shapes(void **state) {
    (void)state;
    const GPT2Config c = small_config();
    const int shapes[][2] = {{1, 1}, {3, 40}, {8, 64}};
    for (int s = 0; s < 3; s++)
        for (int recompute = 0; recompute <= 2; recompute++)
            for (int cudnn = 0; cudnn <= 1; cudnn++)
                for (int external = 0; external <= 1; external++) {
                    const int B = shapes[s][0], T = shapes[s][1];
                    const size_t BT = (size_t)B * T, C = 64, NH = 4, ws = 12345;
                    GPT2CudaOptions opt = {recompute, cudnn, 1, external, 0, 0, 0, 0, 0};
                    GPT2CudaMemory m;
                    gpt2_cuda_memory(&c, B, T, &opt, cudnn, ws, &m);
                    assert_int_equal(m.activations, acts_reference(&c, B, T, recompute, cudnn, 0, 0, 1));
                    assert_int_equal(m.host_activations, 0);
                    for (int offload = 0; offload <= 1; offload++) {   // act_checkpoint, with and without offload
                        const int tiles = offload ? 4 : 1;
                        GPT2CudaOptions ck = {recompute, cudnn, 1, external, 1, offload, tiles, 0, 0};
                        GPT2CudaMemory mk;
                        gpt2_cuda_memory(&c, B, T, &ck, cudnn, ws, &mk);
                        assert_int_equal(mk.activations, acts_reference(&c, B, T, recompute, cudnn, 1, offload, tiles));
                        // pinned host slots of block inputs 0..L-2, bf16
                        assert_int_equal(mk.host_activations, offload ? (c.num_layers - 1) * BT * C * 2 : 0);
                    }
                    size_t sizes[GPT2_NUM_PARAM_TENSORS], n = gpt2_param_sizes(&c, sizes);
                    assert_int_equal(m.params, external ? 0 : p256(2 * n) + 4 * p256(4 * n));
                    // by use, as the unsharded trainer's memory table shows them
                    assert_int_equal(m.weights, external ? 0 : p256(2 * n));
                    assert_int_equal(m.grads, external ? 0 : p256(4 * n));
                    assert_int_equal(m.optimizer, external ? 0 : 3 * p256(4 * n));
                    // one scratch shared by LayerNorm backward and the three bias widths of the
                    // blocks, then loss, norm and clip, the norm's plan (a 24-byte span per
                    // slice, 256-aligned, then a double per 4096-element block and per slice)
                    // when the model owns its gradients, tokens
                    size_t red = 0, plan = 0;
                    if (!external) {
                        GPT2Slice sl[4 + 12 * 2];
                        gpt2_slices(&c, sl);
                        size_t blocks = 0, ns = (size_t)gpt2_num_slices(&c);
                        for (size_t k = 0; k < ns; k++) blocks += (sl[k].numel + 4095) / 4096;
                        plan = p256(p256(24 * ns) + 8 * (blocks + ns));
                    }
                    const size_t cand[] = {layernorm_backward_scratch_floats((int)BT, (int)C),
                                           matmul_backward_scratch_floats((int)BT, (int)(3 * C)),
                                           matmul_backward_scratch_floats((int)BT, (int)C),
                                           matmul_backward_scratch_floats((int)BT, (int)(4 * C))};
                    for (int i = 0; i < 4; i++) red = cand[i] > red ? cand[i] : red;
                    assert_int_equal(m.scratch, p256(4 * red) + p256(8) + p256(8) + plan + p256(4 * (5 * BT + 1)));
                    const size_t scores = (size_t)B * NH * T * T;
                    assert_int_equal(m.attention, cudnn ? p256(ws) : p256(4 * scores) + p256(2 * scores));
                    assert_int_equal(m.cublaslt, (size_t)32 << 20);
                    assert_int_equal(m.total, m.params + m.activations + m.scratch + m.attention + m.cublaslt);
                    if (!external) {   // micro_grads: a second fp32 gradient buffer, in grads and params
                        GPT2CudaOptions mo = opt;
                        mo.micro_grads = 1;
                        GPT2CudaMemory mm;
                        gpt2_cuda_memory(&c, B, T, &mo, cudnn, ws, &mm);
                        assert_int_equal(mm.grads, 2 * p256(4 * n));
                        assert_int_equal(mm.optimizer, m.optimizer);
                        assert_int_equal(mm.params, m.params + p256(4 * n));
                        assert_int_equal(mm.total, m.total + p256(4 * n));
                    }
                }
}

// Recompute trades exactly the documented buffers: level 1 the per-layer GELU outputs
// (L slices become 1), level 2 also both LayerNorm outputs (2L slices become 1).
// The options the CUDA model refuses, each with a message naming the value.
static void test_options_refused(void **state) {
    (void)state;
    const GPT2Config c = small_config();   // C = 64
    char err[256];
    const struct { GPT2CudaOptions o; const char *needle; } bad[] = {
        {{3, 0, 1, 0, 0, 0, 0, 0, 0}, "recompute 3"},
        {{1, 3, 1, 0, 0, 0, 0, 0, 0}, "use_cudnn 3"},
        {{1, -1, 1, 0, 0, 0, 0, 0, 0}, "use_cudnn -1"},
        {{1, 0, 1, 0, 0, 1, 0, 0, 0}, "needs act_checkpoint 1"},
        {{1, 0, 1, 0, 0, 0, 3, 0, 0}, "K = 3 do not divide the channels C = 64"},
        {{1, 0, 1, 0, 0, 0, 16, 0, 0}, "C/K = 4"},
        {{1, 0, 1, 0, 0, 0, 1, 5, 0}, "KV = 5 do not divide the padded vocabulary Vp"},
        {{1, 0, 1, 0, 0, 0, 1, 32, 0}, "Vp/KV = 4"},
        {{1, 0, 1, 0, 0, 0, 1, 1, 2}, "micro_grads 2"},
        {{1, 0, 1, 1, 0, 0, 1, 1, 1}, "micro_grads needs the model's own gradients"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(gpt2_cuda_check_options(&c, &bad[i].o, err, sizeof(err)), -1);
        if (!strstr(err, bad[i].needle)) fail_msg("refusal %zu: '%s' lacks '%s'", i, err, bad[i].needle);
    }
    const GPT2CudaOptions good = {2, 1, 1, 1, 1, 1, 8, 8, 0}, atomic = {2, 2, 1, 1, 1, 1, 8, 8, 0};
    assert_int_equal(gpt2_cuda_check_options(&c, &good, err, sizeof(err)), 0);
    assert_int_equal(gpt2_cuda_check_options(&c, &atomic, err, sizeof(err)), 0);
}

static void test_recompute_savings(void **state) {
    (void)state;
    const GPT2Config c = small_config();
    const int B = 4, T = 32;
    const size_t L = 2, row = (size_t)B * T * 64 * 2;
    GPT2CudaOptions o0 = {0, 0, 1, 1, 0, 0, 0, 0, 0}, o1 = {1, 0, 1, 1, 0, 0, 0, 0, 0}, o2 = {2, 0, 1, 1, 0, 0, 0, 0, 0};
    GPT2CudaMemory m0, m1, m2;
    gpt2_cuda_memory(&c, B, T, &o0, 0, 0, &m0);
    gpt2_cuda_memory(&c, B, T, &o1, 0, 0, &m1);
    gpt2_cuda_memory(&c, B, T, &o2, 0, 0, &m2);
    assert_int_equal(m0.activations - m1.activations, p256(4 * L * row) - p256(4 * row));
    assert_int_equal(m1.activations - m2.activations, 2 * p256(L * row) - p256(row));
}

// cuDNN's workspace without cuDNN: the model's own part of the backward workspace (Dsum
// rows, and with --cudnn 2 the fp32 dQ accumulator of the atomic backward), engine plan 0.
static void test_cudnn_workspace_estimate(void **state) {
    (void)state;
    const GPT2Config c = small_config();
    const int B = 3, T = 40;
    const size_t rows = (size_t)B * 4 * T;
    assert_int_equal(gpt2_cuda_cudnn_workspace_estimate(&c, B, T, GPT2_CUDNN_ON), p256(rows * 4));
    assert_int_equal(gpt2_cuda_cudnn_workspace_estimate(&c, B, T, GPT2_CUDNN_ATOMIC),
                     p256(rows * 4) + p256(rows * 16 * 4));
    // the layout attention_cudnn.cu binds: plan workspace, then Dsum, then dQ
    AttentionCudnnBwdWorkspace w = attention_cudnn_bwd_workspace(1000, B, T, 4, 16, 1);
    assert_int_equal(w.dsum_offset, 1024);
    assert_int_equal(w.dq_accum_offset, 1024 + p256(rows * 4));
    assert_int_equal(w.bytes, w.dq_accum_offset + p256(rows * 16 * 4));
}

static void test_shape_checks(void **state) {
    (void)state;
    char err[256];
    GPT2Config c = small_config();
    assert_int_equal(gpt2_cuda_check_shape(&c, 4, 64, err, sizeof err), 0);
    assert_int_equal(gpt2_cuda_check_shape(&c, 4, 65, err, sizeof err), -1);   // T > maxT
    assert_non_null(strstr(err, "T=65"));
    GPT2Config wide = c;   // 5120 channels (a 13 B shape): wider than the LayerNorm kernels take
    wide.channels = 5120;
    wide.num_heads = 40;
    assert_int_equal(gpt2_cuda_check_shape(&wide, 1, 64, err, sizeof err), -1);
    assert_non_null(strstr(err, "channels 5120 exceed 4096"));
    wide.channels = 4096;  // the widest they take
    wide.num_heads = 32;
    assert_int_equal(gpt2_cuda_check_shape(&wide, 1, 64, err, sizeof err), 0);
    GPT2Config heads = c;  // head size 4
    heads.num_heads = 16;
    assert_int_equal(gpt2_cuda_check_shape(&heads, 1, 64, err, sizeof err), -1);
    assert_non_null(strstr(err, "head size 4"));
    GPT2Config longT = c;  // rows beyond the kernels' int
    longT.max_seq_len = 1 << 20;
    assert_int_equal(gpt2_cuda_check_shape(&longT, 1 << 12, 1 << 20, err, sizeof err), -1);
    assert_non_null(strstr(err, "B*T"));
    // B*T fits an int, B*T*heads (the attention rows) does not: 2^26 * 64 heads
    longT.num_heads = 64;
    longT.channels = 64 * 8;
    assert_int_equal(gpt2_cuda_check_shape(&longT, 1 << 6, 1 << 20, err, sizeof err), -1);
    assert_non_null(strstr(err, "B*T*heads"));
    assert_int_equal(gpt2_cuda_check_shape(&longT, 1 << 4, 1 << 20, err, sizeof err), 0);   // 2^30 rows
}

static void huge_acts(void *arg) {
    (void)arg;
    GPT2Config c = {1 << 20, 50257, 50304, 1024, 1024, 65536};
    size_t bytes[GPT2_CUDA_NUM_ACTS];
    gpt2_cuda_act_bytes(&c, 1 << 20, 1 << 20, &(GPT2CudaOptions){0, 1, 1, 0, 0, 0, 0, 0, 0}, 1, bytes);
}

// layernorm_backward's scratch, sized for the built rows N, holds the partials of every
// smaller batch the model may run (N' <= N): counted here launch by launch, block by block,
// as the kernel lays them out (one partial of 2 * ceil(C / 256) * 256 floats per block).
static void test_layernorm_scratch_covers_smaller_batches(void **state) {
    (void)state;
    const int widths[] = {64, 200, 768, 1600};
    for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++) {
        const int C = widths[w];
        const size_t partial = 2 * (size_t)((C + 255) / 256) * 256;
        size_t most = 0;
        for (int N = 1; N <= 70000; N++) {
            const size_t rows = layernorm_backward_rows(N);
            assert_true(rows >= 4 && rows <= 64 && rows % 4 == 0);   // whole warps of a 4-warp block
            const size_t blocks = ((size_t)N + rows - 1) / rows;
            if (blocks * partial > most) most = blocks * partial;
            if (layernorm_backward_scratch_floats(N, C) < most) {
                fail_msg("C=%d N=%d: scratch %zu floats, a batch of at most N rows needs %zu", C, N,
                         layernorm_backward_scratch_floats(N, C), most);
            }
        }
    }
}

static void test_overflow_dies(void **state) {
    (void)state;
    expect_death(huge_acts, NULL, DEATH_ANY_STATUS, "GPT-2 CUDA buffer sizes", NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_regions_match_documented_shapes),
        cmocka_unit_test(test_recompute_savings),
        cmocka_unit_test(test_layernorm_scratch_covers_smaller_batches),
        cmocka_unit_test(test_options_refused),
        cmocka_unit_test(test_cudnn_workspace_estimate),
        cmocka_unit_test(test_shape_checks),
        cmocka_unit_test(test_overflow_dies),
    };
    return cmocka_run_group_tests_name("gpt2_cuda_memory", tests, NULL, NULL);
}
