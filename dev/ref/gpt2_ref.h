// gpt2_ref.h: reads the PyTorch ground truth dev/ref/gpt2_ref.bin (written by
// gpt2_reference.py; README.md has the format) and measures a model's numbers against it.
// Header-only, C and C++ alike: the CPU test (dev/test/test_gpt2_ref.c) and the CUDA test
// (test_gpt2_zero.cu) both use it.
#ifndef GPT2_REF_H
#define GPT2_REF_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../llmc/model/gpt2_config.h"

#define GPT2_REF_MAGIC 0x46455247   // "GREF" as a little-endian int32
#define GPT2_REF_VERSION 1
#define GPT2_REF_HEADER_BYTES 256
#define GPT2_REF_MAX_STEPS 8
// The file's folder, relative to the repository root (where the tests run).
#define GPT2_REF_DIR "dev/ref"

typedef struct {
    GPT2Config config;
    int B, T, steps;
    size_t num_params;
    float lr, beta1, beta2, eps, weight_decay, grad_clip;  // AdamW as the trainers take it
    int32_t *inputs, *targets;           // (B, T)
    float *logits;                       // (B, T, Vp) at the initial parameters
    float *loss, *norm;                  // [steps]: mean loss, gradient norm before each step
    float *grads;                        // the gradient of the mean loss at the initial parameters
    float *params[GPT2_REF_MAX_STEPS];   // the parameters after step 1, 2, ...
    void *data;                          // one allocation behind all of the above
} GPT2Ref;

// Loads path into r; 0, or -1 with the reason in err.
static inline int gpt2_ref_load(GPT2Ref *r, const char *path, char *err, size_t errlen) {
    memset(r, 0, sizeof(*r));
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open '%s' (run from the repository root)", path);
        return -1;
    }
    int32_t h[GPT2_REF_HEADER_BYTES / 4];
    if (fread(h, 1, sizeof(h), f) != sizeof(h) || h[0] != GPT2_REF_MAGIC || h[1] != GPT2_REF_VERSION) {
        snprintf(err, errlen, "'%s' is not a version %d reference file", path, GPT2_REF_VERSION);
        fclose(f);
        return -1;
    }
    // fields 2-11 are ints, 16-21 floats (README.md)
    GPT2Config *c = &r->config;
    int *ints[] = {&c->max_seq_len, &c->vocab_size, &c->num_layers, &c->num_heads, &c->channels,
                   &c->padded_vocab_size, &r->B, &r->T, &r->steps};
    float *floats[] = {&r->lr, &r->beta1, &r->beta2, &r->eps, &r->weight_decay, &r->grad_clip};
    for (int i = 0; i < 9; i++) *ints[i] = h[2 + i];
    r->num_params = (size_t)h[11];
    for (int i = 0; i < 6; i++) memcpy(floats[i], &h[16 + i], 4);
    char why[256];
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    if (gpt2_config_validate(c, why, sizeof(why)) != 0 || r->B <= 0 || r->B > 64 || r->T <= 0 || r->T > c->max_seq_len ||
        r->steps < 1 || r->steps > GPT2_REF_MAX_STEPS || gpt2_param_sizes(c, sizes) != r->num_params) {
        snprintf(err, errlen, "'%s': a header that does not describe a model (B %d, T %d, steps %d)", path, r->B, r->T,
                 r->steps);
        fclose(f);
        return -1;
    }
    const size_t BT = (size_t)r->B * r->T;
    const size_t words = 2 * BT + BT * c->padded_vocab_size + 2 * (size_t)r->steps + (1 + (size_t)r->steps) * r->num_params;
    r->data = malloc(words * 4);
    const int short_read = r->data == NULL || fread(r->data, 4, words, f) != words || fgetc(f) != EOF;
    fclose(f);
    if (short_read) {
        snprintf(err, errlen, "'%s' is not %zu bytes long, as its header says", path, GPT2_REF_HEADER_BYTES + words * 4);
        free(r->data);
        r->data = NULL;
        return -1;
    }
    r->inputs = (int32_t *)r->data;
    r->targets = r->inputs + BT;
    r->logits = (float *)(r->targets + BT);
    r->loss = r->logits + BT * c->padded_vocab_size;
    r->norm = r->loss + r->steps;
    r->grads = r->norm + r->steps;
    for (int t = 0; t < r->steps; t++) r->params[t] = r->grads + (size_t)(t + 1) * r->num_params;
    return 0;
}

static inline void gpt2_ref_free(GPT2Ref *r) {
    free(r->data);
    memset(r, 0, sizeof(*r));
}

// How far got[0, n) is from the reference want[0, n): the largest absolute difference, it
// divided by the largest |want| (the tensor's own scale, which a near-zero element's
// relative error would not be), and the relative L2 norm of the difference.
typedef struct {
    double max_abs, scaled, rel_l2;
} GPT2RefDiff;

static inline GPT2RefDiff gpt2_ref_diff(const float *got, const float *want, size_t n) {
    double top = 0, dd = 0, ww = 0;
    GPT2RefDiff d = {0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)got[i] - (double)want[i]);
        d.max_abs = e > d.max_abs ? e : d.max_abs;
        top = fabs((double)want[i]) > top ? fabs((double)want[i]) : top;
        dd += e * e;
        ww += (double)want[i] * want[i];
    }
    d.scaled = top > 0 ? d.max_abs / top : d.max_abs;
    d.rel_l2 = ww > 0 ? sqrt(dd / ww) : sqrt(dd);
    return d;
}

// The parameters got after AdamW step s (1-based) against the reference's, element by
// element, within the bound base + rel |p| + lr u, p the reference parameter, g its
// reference gradient and delta = grad_tol max |g'| (the largest of its tensor) the error the
// tested gradient may have. A step moves an element by lr mhat / (sqrt(vhat) + eps) (and the
// decay, which a gradient error does not touch):
//  - step 1: lr c g / (c |g| + eps), c the clip scale; a gradient off by delta < |g| keeps
//    its sign and moves this by at most u = eps delta / (c |g| (|g| - delta));
//  - later: a function of the ratios of the element's gradients at the steps, which delta
//    moves by about u = s delta / |g|.
// u is capped at 2.5: a step moves an element by about lr at most (|mhat| / sqrt(vhat) <= 1
// at step 1, <= 1.0002 at step 2 with betas 0.9 and 0.95, by Cauchy-Schwarz), so that two
// copies part by at most about 2 lr a step; that is what an element whose gradient the
// error can reach, or whose gradient is zero in exact arithmetic, gets (rounding noise
// takes a step of either sign). base and rel: the tested copy's own rounding. Returns the
// largest |difference| / bound; *large gets the largest |difference| among the elements
// whose |g| is at least a tenth of max |g'|.
static inline double gpt2_ref_params_vs_bound(const GPT2Ref *r, const float *got, int s, double grad_tol, double base,
                                              double rel, double *large) {
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    gpt2_param_sizes(&r->config, sizes);
    const float *want = r->params[s - 1], *g = r->grads;
    const double c = r->grad_clip > 0 && r->norm[0] > r->grad_clip ? (double)r->grad_clip / r->norm[0] : 1.0;
    double worst = 0;
    *large = 0;
    for (int t = 0; t < GPT2_NUM_PARAM_TENSORS; t++) {
        double top = 0;
        for (size_t i = 0; i < sizes[t]; i++) top = fmax(top, fabs((double)g[i]));
        const double delta = grad_tol * top;
        for (size_t i = 0; i < sizes[t]; i++) {
            const double e = fabs((double)got[i] - (double)want[i]), a = fabs((double)g[i]);
            double u = s == 1 ? (a > delta ? r->eps * delta / (c * a * (a - delta)) : 2.5) : s * delta / a;
            const double bound = base + rel * fabs((double)want[i]) + r->lr * fmin(2.5 * s, u);
            if (!(e / bound <= worst)) worst = e / bound;   // a NaN is the worst
            if (a >= 0.1 * top) *large = fmax(*large, e);
        }
        got += sizes[t];
        want += sizes[t];
        g += sizes[t];
    }
    return worst;
}

#endif
