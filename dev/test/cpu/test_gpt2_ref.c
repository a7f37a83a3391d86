// test_gpt2_ref.c: the fp32 CPU GPT-2 against a ground truth from outside the project's
// code: dev/ref/gpt2_ref.bin, which PyTorch computed in float64 (dev/ref/gpt2_reference.py)
// from the model file dev/ref/gpt2_ref_model.bin. Logits, loss, every gradient, the
// gradient norm, and the parameters, losses and norms of two AdamW steps with the file's
// settings. Then the same comparisons on a model that is slightly wrong must fail.
//
// Tolerances. The reference is exact to about 1e-15, so what is measured is the CPU
// model's own float32 rounding (unit roundoff u = 6e-8). Its sums run over at most 4C = 128
// terms of size about 1, through two blocks whose LayerNorms divide by standard deviations
// down to about 0.3; a few hundred u relative to each tensor's scale is what rounding can
// reach there (the worst measured is printed beside each bound):
//  - logits, gradients: max |difference| / max |reference| of the tensor <= 1e-5 (167 u);
//  - loss, gradient norm: relative difference <= 1e-6;
//  - parameters after each AdamW step: gpt2_ref_params_vs_bound's element-by-element bound
//    (dev/ref/gpt2_ref.h: what the gradient error above can do through AdamW), with the
//    gradient error delta = 1e-5 max |g| of the tensor and 1e-6 for the parameters' own
//    rounding (up to 1.4 in size: 1.2e-7). Where the gradient is a tenth of its tensor's
//    largest or more, that is about 1e-6 at step 1 and 3e-6 at step 2; a wrong formula is off
//    by lr wd |p| there (a decay on the wrong tensor: 1e-3 for a LayerNorm weight) or by a
//    sizeable part of lr = 1e-2 (bias correction, eps or the clip misplaced).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../llmc/cpu/gpt2_cpu.h"
#include "../../../llmc/model/gpt2_config.h"
#include "../../../llmc/numerics/adamw.h"
#include "../../ref/gpt2_ref.h"

#define TOL_VALUES 1e-5   // logits and gradients, relative to the tensor's largest |reference|
#define TOL_SCALAR 1e-6   // loss and gradient norm, relative
#define TOL_PARAMS 1e-6   // parameters after a step: the part of the bound rounding takes

static GPT2Ref ref;

static int group_setup(void **state) {
    (void)state;
    char err[512];
    if (gpt2_ref_load(&ref, GPT2_REF_DIR "/gpt2_ref.bin", err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    gpt2_ref_free(&ref);
    return 0;
}

static GPT2 *load_model(void) {
    GPT2 *m = calloc(1, sizeof(GPT2));
    assert_non_null(m);
    gpt2_cpu_build_from_file(m, GPT2_REF_DIR "/gpt2_ref_model.bin");
    assert_memory_equal(&m->config, &ref.config, sizeof(GPT2Config));
    return m;
}

static void free_model(GPT2 *m) {
    gpt2_cpu_free(m);
    free(m);
}

// One comparison: prints it, returns whether it holds.
static int check(int verbose, const char *what, double worst, double tol, const char *where) {
    const int ok = worst <= tol;   // a NaN fails
    if (verbose || !ok)
        printf("  %-4s %-34s %.3e (tolerance %.0e)%s%s\n", ok ? "ok" : "FAIL", what, worst, tol, where ? " at " : "",
               where ? where : "");
    return ok;
}

static double rel(double got, double want) { return fabs(got - want) / fabs(want); }

// The gradient tensor with the largest scaled difference; its name goes to *where.
static double worst_grad_tensor(const GPT2 *m, const char **where) {
    size_t off[GPT2_NUM_PARAM_TENSORS];
    gpt2_param_offsets(&m->config, off);
    double worst = 0;
    for (int t = 0; t < GPT2_NUM_PARAM_TENSORS; t++) {
        double e = gpt2_ref_diff(m->grads + off[t], ref.grads + off[t], m->param_sizes[t]).scaled;
        if (!(e <= worst)) {
            worst = e;
            *where = gpt2_param_name(t);
        }
    }
    return worst;
}

// Runs the reference's computations on m with AdamW's weight decay wd; returns how many
// comparisons fail (verbose: prints every comparison, else only the failures).
static int run_reference(GPT2 *m, float wd, int verbose) {
    const int B = ref.B, T = ref.T, BT = B * T, Vp = ref.config.padded_vocab_size;
    int failed = 0;
    const char *where = NULL;

    gpt2_cpu_forward(m, ref.inputs, NULL, B, T);
    GPT2RefDiff dl = gpt2_ref_diff(gpt2_cpu_logits(m), ref.logits, (size_t)BT * Vp);
    failed += !check(verbose, "logits: max |diff| / max |ref|", dl.scaled, TOL_VALUES, NULL);

    for (int s = 0; s < ref.steps; s++) {
        char what[64];
        gpt2_cpu_zero_grad(m);
        gpt2_cpu_forward(m, ref.inputs, ref.targets, B, T);
        snprintf(what, sizeof(what), "step %d loss: relative diff", s + 1);
        failed += !check(verbose, what, rel(m->mean_loss, ref.loss[s]), TOL_SCALAR, NULL);
        gpt2_cpu_backward(m, 1.0f / (float)BT);
        if (s == 0) {
            double e = worst_grad_tensor(m, &where);
            failed += !check(verbose, "gradients: max |diff| / max |ref|", e, TOL_VALUES, where);
        }
        const float norm = gpt2_cpu_grad_norm(m);
        snprintf(what, sizeof(what), "step %d grad norm: relative diff", s + 1);
        failed += !check(verbose, what, rel(norm, ref.norm[s]), TOL_SCALAR, NULL);
        gpt2_cpu_update(m, ref.lr, ref.beta1, ref.beta2, ref.eps, wd, adamw_clip_scale(norm, ref.grad_clip), s + 1);
        double large, worst = gpt2_ref_params_vs_bound(&ref, m->params, s + 1, TOL_VALUES, TOL_PARAMS, 0.0, &large);
        snprintf(what, sizeof(what), "params after step %d: |diff| / bound", s + 1);
        failed += !check(verbose, what, worst, 1.0, NULL);
        if (verbose) printf("       (max |diff| where |g| >= max |g| / 10: %.3e)\n", large);
    }
    return failed;
}

static void test_cpu_model_matches_pytorch(void **state) {
    (void)state;
    printf("  reference: L=%d C=%d NH=%d V=%d Vp=%d maxT=%d, B=%d T=%d, %zu parameters, %d AdamW steps\n",
           ref.config.num_layers, ref.config.channels, ref.config.num_heads, ref.config.vocab_size,
           ref.config.padded_vocab_size, ref.config.max_seq_len, ref.B, ref.T, ref.num_params, ref.steps);
    GPT2 *m = load_model();
    assert_int_equal(run_reference(m, ref.weight_decay, 1), 0);
    free_model(m);
}

// The comparisons can fail: one weight off by 1e-4 (of about 0.1) fails the logits, the
// gradients, the norm and the parameters; AdamW without its weight decay fails the
// parameters, and so the next step's loss and norm.
static void test_slightly_wrong_models_fail(void **state) {
    (void)state;
    GPT2 *m = load_model();
    size_t off[GPT2_NUM_PARAM_TENSORS];
    gpt2_param_offsets(&m->config, off);
    m->params[off[GPT2_FCW] + 7] += 1e-4f;
    const int failed = run_reference(m, ref.weight_decay, 0);
    printf("  one fcw element + 1e-4: %d comparisons fail\n", failed);
    assert_true(failed >= 3);
    free_model(m);

    m = load_model();
    const int failed_wd = run_reference(m, 0.0f, 0);
    printf("  AdamW without weight decay: %d comparisons fail\n", failed_wd);
    assert_true(failed_wd >= 2);
    free_model(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_model_matches_pytorch),
        cmocka_unit_test(test_slightly_wrong_models_fail),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
