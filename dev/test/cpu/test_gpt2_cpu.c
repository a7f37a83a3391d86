// test_gpt2_cpu.c: the fp32 CPU GPT-2 against an independent double-precision
// forward (finite differences for every parameter tensor), plus gradient accumulation,
// thread-count invariance, AdamW, memorization, model files, hooks and error paths.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../../llmc/numerics/adamw.h"
#include "../../../llmc/model/gpt2_config.h"
#include "../../../llmc/cpu/gpt2_cpu.h"
#include "../../../llmc/model/gpt2_model_file.h"
#include "../../../llmc/numerics/rand.h"
#include "../common/test_util.h"

static GPT2Config make_config(int V, int Vp, int L, int C, int NH, int maxT) {
    GPT2Config c;
    c.vocab_size = V;
    c.padded_vocab_size = Vp;
    c.num_layers = L;
    c.channels = C;
    c.num_heads = NH;
    c.max_seq_len = maxT;
    return c;
}

static void random_tokens(int *x, int n, int V, uint64_t seed) {
    for (int i = 0; i < n; i++) x[i] = (int)rng_below(seed, 77, (uint64_t)i, (uint64_t)V);
}

// Parameters far from the init (which has zero biases and unit LayerNorm weights), so
// that every path of the gradient is exercised. The padded wte rows get non-zero
// values too: they must not leak into the softmax.
static void randomize_params(GPT2 *m, uint64_t seed) {
    size_t off[GPT2_NUM_PARAM_TENSORS];
    gpt2_param_offsets(&m->config, off);
    for (int t = 0; t < GPT2_NUM_PARAM_TENSORS; t++) {
        float *p = m->params + off[t];
        float scale = 0.25f, base = 0.0f;
        if (t == GPT2_LN1W || t == GPT2_LN2W || t == GPT2_LNFW) { base = 1.0f; scale = 0.2f; }
        else if (t == GPT2_WTE || t == GPT2_WPE) scale = 0.5f;
        else if (!gpt2_param_decays(t)) scale = 0.1f;
        for (size_t i = 0; i < m->param_sizes[t]; i++)
            p[i] = base + scale * rng_normal(seed, 99, ((uint64_t)t << 40) | i);
    }
}

// ---------------------------------------------------------------------------------
// independent double-precision reference forward

typedef struct {
    GPT2Config c;
    const double *p;
    size_t off[GPT2_NUM_PARAM_TENSORS], per[GPT2_NUM_PARAM_TENSORS];
} Ref;

static Ref ref_make(const GPT2Config *c, const double *p) {
    Ref r;
    r.c = *c;
    r.p = p;
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    gpt2_param_sizes(c, sizes);
    gpt2_param_offsets(c, r.off);
    for (int t = 0; t < GPT2_NUM_PARAM_TENSORS; t++)
        r.per[t] = sizes[t] / (gpt2_param_is_per_layer(t) ? (size_t)c->num_layers : 1);
    return r;
}

static const double *ref_param(const Ref *r, int t, int l) { return r->p + r->off[t] + (size_t)l * r->per[t]; }

static void ref_layernorm(double *out, const double *x, const double *w, const double *b, int N, int C) {
    for (int n = 0; n < N; n++) {
        const double *xr = x + (size_t)n * C;
        double mean = 0.0, var = 0.0;
        for (int c = 0; c < C; c++) mean += xr[c];
        mean /= C;
        for (int c = 0; c < C; c++) var += (xr[c] - mean) * (xr[c] - mean);
        var /= C;
        double rs = 1.0 / sqrt(var + 1e-5);
        for (int c = 0; c < C; c++) out[(size_t)n * C + c] = (xr[c] - mean) * rs * w[c] + b[c];
    }
}

// out (N, OC) = in (N, IC) W^T + b, W stored (OC, IC)
static void ref_linear(double *out, const double *in, const double *W, const double *b, int N, int IC, int OC) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = b ? b[o] : 0.0;
            for (int i = 0; i < IC; i++) s += in[(size_t)n * IC + i] * W[(size_t)o * IC + i];
            out[(size_t)n * OC + o] = s;
        }
}

// Mean cross-entropy over the B*T tokens; per-token losses into losses if non-NULL.
static double ref_loss(const Ref *r, const int *in, const int *tg, int B, int T, double *losses) {
    const int C = r->c.channels, L = r->c.num_layers, NH = r->c.num_heads, V = r->c.vocab_size;
    const int N = B * T, HS = C / NH;
    double *x = calloc((size_t)N * C, sizeof(double)), *ln = calloc((size_t)N * C, sizeof(double));
    double *qkv = calloc((size_t)N * 3 * C, sizeof(double)), *y = calloc((size_t)N * C, sizeof(double));
    double *h = calloc((size_t)N * 4 * C, sizeof(double)), *proj = calloc((size_t)N * C, sizeof(double));
    double *sc = calloc((size_t)T, sizeof(double)), *z = calloc((size_t)V, sizeof(double));
    const double *wte = ref_param(r, GPT2_WTE, 0), *wpe = ref_param(r, GPT2_WPE, 0);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) x[(size_t)n * C + c] = wte[(size_t)in[n] * C + c] + wpe[(size_t)(n % T) * C + c];
    for (int l = 0; l < L; l++) {
        ref_layernorm(ln, x, ref_param(r, GPT2_LN1W, l), ref_param(r, GPT2_LN1B, l), N, C);
        ref_linear(qkv, ln, ref_param(r, GPT2_QKVW, l), ref_param(r, GPT2_QKVB, l), N, C, 3 * C);
        for (int b = 0; b < B; b++)
            for (int hd = 0; hd < NH; hd++)
                for (int t = 0; t < T; t++) {
                    const double *q = qkv + ((size_t)b * T + t) * 3 * C + hd * HS;
                    double mx = -INFINITY, sum = 0.0;
                    for (int s = 0; s <= t; s++) {
                        const double *k = qkv + ((size_t)b * T + s) * 3 * C + C + hd * HS;
                        double d = 0.0;
                        for (int i = 0; i < HS; i++) d += q[i] * k[i];
                        sc[s] = d / sqrt((double)HS);
                        if (sc[s] > mx) mx = sc[s];
                    }
                    for (int s = 0; s <= t; s++) sum += (sc[s] = exp(sc[s] - mx));
                    double *o = y + ((size_t)b * T + t) * C + hd * HS;
                    for (int i = 0; i < HS; i++) {
                        double acc = 0.0;
                        for (int s = 0; s <= t; s++) acc += sc[s] / sum * qkv[((size_t)b * T + s) * 3 * C + 2 * C + hd * HS + i];
                        o[i] = acc;
                    }
                }
        ref_linear(proj, y, ref_param(r, GPT2_ATTPROJW, l), ref_param(r, GPT2_ATTPROJB, l), N, C, C);
        for (size_t i = 0; i < (size_t)N * C; i++) x[i] += proj[i];
        ref_layernorm(ln, x, ref_param(r, GPT2_LN2W, l), ref_param(r, GPT2_LN2B, l), N, C);
        ref_linear(h, ln, ref_param(r, GPT2_FCW, l), ref_param(r, GPT2_FCB, l), N, C, 4 * C);
        for (size_t i = 0; i < (size_t)N * 4 * C; i++)
            h[i] = 0.5 * h[i] * (1.0 + tanh(sqrt(2.0 / M_PI) * (h[i] + 0.044715 * h[i] * h[i] * h[i])));
        ref_linear(proj, h, ref_param(r, GPT2_FCPROJW, l), ref_param(r, GPT2_FCPROJB, l), N, 4 * C, C);
        for (size_t i = 0; i < (size_t)N * C; i++) x[i] += proj[i];
    }
    ref_layernorm(ln, x, ref_param(r, GPT2_LNFW, 0), ref_param(r, GPT2_LNFB, 0), N, C);
    double total = 0.0;
    for (int n = 0; n < N; n++) {
        ref_linear(z, ln + (size_t)n * C, wte, NULL, 1, C, V); // only the V real rows
        double mx = -INFINITY, sum = 0.0;
        for (int o = 0; o < V; o++) mx = z[o] > mx ? z[o] : mx;
        for (int o = 0; o < V; o++) sum += exp(z[o] - mx);
        double loss = log(sum) + mx - z[tg[n]];
        if (losses) losses[n] = loss;
        total += loss;
    }
    free(x); free(ln); free(qkv); free(y); free(h); free(proj); free(sc); free(z);
    return total / N;
}

// ---------------------------------------------------------------------------------
// gradient check

static void check_gradients(const GPT2Config *c, int B, int T, uint64_t seed) {
    const int N = B * T;
    GPT2 m;
    gpt2_cpu_build(&m, c, seed);
    randomize_params(&m, seed + 1);
    int *in = malloc(sizeof(int) * N), *tg = malloc(sizeof(int) * N);
    random_tokens(in, N, c->vocab_size, seed + 2);
    random_tokens(tg, N, c->vocab_size, seed + 3);
    gpt2_cpu_forward(&m, in, tg, B, T);
    gpt2_cpu_zero_grad(&m);
    gpt2_cpu_backward(&m, 1.0f / (float)N);

    double *pd = malloc(sizeof(double) * m.num_parameters), *lref = malloc(sizeof(double) * N);
    for (size_t i = 0; i < m.num_parameters; i++) pd[i] = m.params[i];
    Ref r = ref_make(c, pd);
    double l0 = ref_loss(&r, in, tg, B, T, lref);
    if (fabs(m.mean_loss - l0) > 2e-6 * fabs(l0)) fail_msg("mean loss %.9g, double reference %.9g", m.mean_loss, l0);
    for (int n = 0; n < N; n++)
        if (fabs(m.losses[n] - lref[n]) > 1e-5 * fabs(lref[n]) + 1e-6)
            fail_msg("token %d loss %.9g, double reference %.9g", n, m.losses[n], lref[n]);

    size_t off[GPT2_NUM_PARAM_TENSORS];
    gpt2_param_offsets(c, off);
    const size_t live_wte = (size_t)c->vocab_size * c->channels;
    for (size_t i = live_wte; i < m.param_sizes[GPT2_WTE]; i++)
        if (m.grads[i] != 0.0f) fail_msg("padded wte element %zu has gradient %g, expected exactly 0", i, m.grads[i]);

    // Central differences of the double loss: truncation ~h^2, rounding ~1e-16/h.
    const double h = 1e-5;
    double worst = 0.0;
    for (int t = 0; t < GPT2_NUM_PARAM_TENSORS; t++) {
        size_t n = t == GPT2_WTE ? live_wte : m.param_sizes[t];
        int count = n <= 64 ? (int)n : 64;
        for (int k = 0; k < count; k++) {
            size_t e = n <= 64 ? (size_t)k : (size_t)rng_below(seed, 5, ((uint64_t)t << 32) | (uint64_t)k, n);
            size_t i = off[t] + e;
            double save = pd[i];
            pd[i] = save + h;
            double lp = ref_loss(&r, in, tg, B, T, NULL);
            pd[i] = save - h;
            double lm = ref_loss(&r, in, tg, B, T, NULL);
            pd[i] = save;
            double fd = (lp - lm) / (2 * h), got = m.grads[i];
            // fp32 forward+backward: ~1e-4 relative, with an absolute floor for the
            // tiny gradients whose size is all rounding
            double tol = 1e-3 * fabs(fd) + 2e-6;
            if (fabs(got - fd) > tol)
                fail_msg("%s element %zu: analytic gradient %.9g, finite difference %.9g", gpt2_param_name(t), e, got, fd);
            if (fabs(got - fd) / tol > worst) worst = fabs(got - fd) / tol;
        }
    }
    print_message("  config V=%d Vp=%d L=%d C=%d NH=%d B=%d T=%d: loss %.6f, worst gradient error %.3f of tolerance\n",
                  c->vocab_size, c->padded_vocab_size, c->num_layers, c->channels, c->num_heads, B, T, l0, worst);
    free(pd); free(lref); free(in); free(tg);
    gpt2_cpu_free(&m);
}

static void test_gradients_vs_double_fd(void **state) {
    (void)state;
    GPT2Config a = make_config(37, 48, 2, 16, 2, 8);
    check_gradients(&a, 2, 5, 11);
    // ragged sizes: C = 12 is not a multiple of the 16-wide tiles, 3C = 36, Vp = 40
    GPT2Config b = make_config(37, 40, 2, 12, 3, 8);
    check_gradients(&b, 3, 7, 21);
}

// Wider layers, so that the matmuls split their sums into several cache blocks (the
// tiny configs fit in one): one directional derivative per tensor, g . u against the
// double loss along a random direction u; and the same gradients with 1 and 3 threads.
static void test_gradients_blocked_matmuls(void **state) {
    (void)state;
    GPT2Config c = make_config(100, 128, 1, 128, 4, 40);
    const int B = 2, T = 40, N = B * T;
    int in[80], tg[80];
    random_tokens(in, N, c.vocab_size, 31);
    random_tokens(tg, N, c.vocab_size, 32);
    float *g1 = NULL;
    int saved = omp_get_max_threads();
    for (int threads = 1; threads <= 3; threads += 2) {
        omp_set_num_threads(threads);
        GPT2 m;
        gpt2_cpu_build(&m, &c, 33);
        randomize_params(&m, 34);
        // smaller weights keep the 128-wide layers in a sensible range
        size_t off0[GPT2_NUM_PARAM_TENSORS];
        gpt2_param_offsets(&c, off0);
        for (int t = GPT2_QKVW; t <= GPT2_FCPROJW; t += 2)
            for (size_t i = 0; i < m.param_sizes[t]; i++) m.params[off0[t] + i] *= 0.25f;
        gpt2_cpu_forward(&m, in, tg, B, T);
        gpt2_cpu_zero_grad(&m);
        gpt2_cpu_backward(&m, 1.0f / N);
        if (g1 != NULL) {
            assert_memory_equal(g1, m.grads, sizeof(float) * m.num_parameters);
            gpt2_cpu_free(&m);
            break;
        }
        g1 = malloc(sizeof(float) * m.num_parameters);
        memcpy(g1, m.grads, sizeof(float) * m.num_parameters);

        double *pd = malloc(sizeof(double) * m.num_parameters);
        for (size_t i = 0; i < m.num_parameters; i++) pd[i] = m.params[i];
        Ref r = ref_make(&c, pd);
        double l0 = ref_loss(&r, in, tg, B, T, NULL);
        assert_true(fabs(m.mean_loss - l0) < 1e-5 * fabs(l0));
        size_t off[GPT2_NUM_PARAM_TENSORS];
        gpt2_param_offsets(&c, off);
        const double h = 1e-5;
        double worst = 0.0;
        for (int t = 0; t < GPT2_NUM_PARAM_TENSORS; t++) {
            size_t n = m.param_sizes[t];
            double *u = malloc(sizeof(double) * n), gu = 0.0;
            for (size_t i = 0; i < n; i++) {
                u[i] = rng_normal(77, 3, ((uint64_t)t << 40) | i);
                gu += (double)m.grads[off[t] + i] * u[i];
            }
            for (size_t i = 0; i < n; i++) pd[off[t] + i] += h * u[i];
            double lp = ref_loss(&r, in, tg, B, T, NULL);
            for (size_t i = 0; i < n; i++) pd[off[t] + i] -= 2 * h * u[i];
            double lm = ref_loss(&r, in, tg, B, T, NULL);
            for (size_t i = 0; i < n; i++) pd[off[t] + i] = m.params[off[t] + i];
            double fd = (lp - lm) / (2 * h);
            if (fabs(gu - fd) > 1e-3 * fabs(fd) + 1e-6)
                fail_msg("%s: g.u %.9g, directional finite difference %.9g", gpt2_param_name(t), gu, fd);
            worst = fmax(worst, fabs(gu - fd) / (1e-3 * fabs(fd) + 1e-6));
            free(u);
        }
        print_message("  C=%d N=%d: worst directional error %.3f of tolerance\n", c.channels, N, worst);
        free(pd);
        gpt2_cpu_free(&m);
    }
    omp_set_num_threads(saved);
    free(g1);
}

// ---------------------------------------------------------------------------------

static void test_init_loss_near_log_vocab(void **state) {
    (void)state;
    GPT2Config c = make_config(37, 48, 2, 16, 2, 8);
    GPT2 m;
    gpt2_cpu_build(&m, &c, 1337);
    int in[16], tg[16];
    random_tokens(in, 16, c.vocab_size, 1);
    random_tokens(tg, 16, c.vocab_size, 2);
    gpt2_cpu_forward(&m, in, tg, 2, 8);
    double lnv = log((double)c.vocab_size);
    print_message("  init loss %.5f, ln(V) %.5f\n", m.mean_loss, lnv);
    assert_true(fabs(m.mean_loss - lnv) < 0.03 * lnv);
    double s = 0.0;
    for (int i = 0; i < 16; i++) s += m.losses[i];
    assert_true(fabs(s / 16 - m.mean_loss) < 1e-6);
    // after a forward with targets the buffer holds probabilities over the V real tokens
    const float *p = gpt2_cpu_logits(&m);
    for (int n = 0; n < 16; n++) {
        double sum = 0.0;
        for (int o = 0; o < c.padded_vocab_size; o++) {
            if (o >= c.vocab_size) assert_true(p[(size_t)n * c.padded_vocab_size + o] == 0.0f);
            sum += p[(size_t)n * c.padded_vocab_size + o];
        }
        assert_true(fabs(sum - 1.0) < 1e-5);
    }
    // without targets: raw logits, mean_loss -1
    gpt2_cpu_forward(&m, in, NULL, 2, 8);
    assert_true(m.mean_loss == -1.0f);
    assert_true(gpt2_cpu_logits(&m)[0] != 0.0f);
    // a NaN in the classifier row of a token neither input nor target (so only its logit is
    // NaN) makes the loss NaN, as its probability is undefined: in the 8-wide lanes and the tail
    int lanes = 0, tail = 0;
    for (int tok = 0; tok < c.vocab_size; tok++) {
        int used = 0;
        for (int i = 0; i < 16; i++) used |= in[i] == tok || tg[i] == tok;
        if (used || (tok >= 8 && tok < c.vocab_size / 8 * 8)) continue;
        float *w = m.params + (size_t)tok * c.channels;   // wte comes first
        const float keep = w[0];
        w[0] = NAN;
        gpt2_cpu_forward(&m, in, tg, 2, 8);
        if (!isnan(m.mean_loss)) fail_msg("a NaN logit of token %d gives the loss %g, not NaN", tok, m.mean_loss);
        w[0] = keep;
        tok < 8 ? lanes++ : tail++;
    }
    assert_true(lanes > 0 && tail > 0);
    gpt2_cpu_free(&m);
}

static void test_grad_accumulation(void **state) {
    (void)state;
    GPT2Config c = make_config(37, 48, 2, 16, 2, 8);
    enum { B = 4, T = 5, N = B * T };
    int in[N], tg[N];
    random_tokens(in, N, c.vocab_size, 3);
    random_tokens(tg, N, c.vocab_size, 4);
    GPT2 full, acc;
    gpt2_cpu_build(&full, &c, 7);
    gpt2_cpu_build(&acc, &c, 7);
    randomize_params(&full, 8);
    randomize_params(&acc, 8);
    // the path without micro-batch buffers: backward adds into the sum inside its kernels
    const GPT2CpuOptions inside = {0, 0, 1, 0, 1, NULL};
    gpt2_cpu_set_options(&acc, &inside);
    gpt2_cpu_forward(&full, in, tg, B, T);
    gpt2_cpu_zero_grad(&full);
    gpt2_cpu_backward(&full, 1.0f / N);
    gpt2_cpu_zero_grad(&acc);
    gpt2_cpu_forward(&acc, in, tg, B / 2, T);
    gpt2_cpu_backward(&acc, 1.0f / N);
    gpt2_cpu_forward(&acc, in + N / 2, tg + N / 2, B / 2, T);
    gpt2_cpu_backward(&acc, 1.0f / N);
    double gmax = 0.0, dmax = 0.0;
    for (size_t i = 0; i < full.num_parameters; i++) {
        gmax = fmax(gmax, fabs(full.grads[i]));
        dmax = fmax(dmax, fabs(full.grads[i] - acc.grads[i]));
    }
    print_message("  max |g| %.3e, max |g_full - g_accum| %.3e\n", gmax, dmax);
    assert_true(gmax > 0.0);
    assert_true(dmax <= 1e-6 * gmax);
    // Stronger, by construction: parameter gradients are sums over tokens in token
    // order that continue from the stored value, so splitting the batch changes
    // nothing; except wte, where classifier and embedding sums interleave differently.
    size_t nwte = full.param_sizes[GPT2_WTE];
    assert_memory_equal(full.grads + nwte, acc.grads + nwte, (full.num_parameters - nwte) * sizeof(float));
    gpt2_cpu_free(&full);
    gpt2_cpu_free(&acc);
}

// micro_grads (the default): accumulating micro-batches gives, bit for bit, the sum in
// order of each micro-batch's gradient computed on its own from zero, which is what ZeRO's
// rank-order reduction adds up when each rank runs one of the micro-batches.
static void test_grad_accumulation_micro_buffers(void **state) {
    (void)state;
    GPT2Config c = make_config(37, 48, 2, 16, 2, 8);
    enum { B = 2, T = 5, N = B * T, M = 3 };
    int in[M * N], tg[M * N];
    random_tokens(in, M * N, c.vocab_size, 5);
    random_tokens(tg, M * N, c.vocab_size, 6);
    GPT2 acc, one;
    gpt2_cpu_build(&acc, &c, 7);
    gpt2_cpu_build(&one, &c, 7);
    randomize_params(&acc, 8);
    randomize_params(&one, 8);
    const size_t n = acc.num_parameters;
    float *want = calloc(n, sizeof(float));
    assert_non_null(want);
    gpt2_cpu_zero_grad(&acc);
    for (int k = 0; k < M; k++) {
        gpt2_cpu_forward(&acc, in + k * N, tg + k * N, B, T);
        gpt2_cpu_backward(&acc, 1.0f / (M * N));
        gpt2_cpu_zero_grad(&one);   // micro-batch k alone, from zero
        gpt2_cpu_forward(&one, in + k * N, tg + k * N, B, T);
        gpt2_cpu_backward(&one, 1.0f / (M * N));
        for (size_t i = 0; i < n; i++) want[i] += one.grads[i];
    }
    assert_memory_equal(acc.grads, want, n * sizeof(float));
    // and the other path differs somewhere (else this test checks nothing)
    const GPT2CpuOptions inside = {0, 0, 1, 0, 1, NULL};
    gpt2_cpu_set_options(&acc, &inside);
    gpt2_cpu_zero_grad(&acc);
    for (int k = 0; k < M; k++) {
        gpt2_cpu_forward(&acc, in + k * N, tg + k * N, B, T);
        gpt2_cpu_backward(&acc, 1.0f / (M * N));
    }
    assert_true(memcmp(acc.grads, want, n * sizeof(float)) != 0);
    free(want);
    gpt2_cpu_free(&acc);
    gpt2_cpu_free(&one);
}

// Runs forward, backward, one update and returns copies of what they produced.
typedef struct {
    float *losses, *probs, *grads, *params;
    float loss, norm;
} RunOut;

static RunOut run_with_threads(int threads, const GPT2Config *c, int B, int T) {
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    const int N = B * T;
    int *in = malloc(sizeof(int) * N), *tg = malloc(sizeof(int) * N);
    random_tokens(in, N, c->vocab_size, 5);
    random_tokens(tg, N, c->vocab_size, 6);
    GPT2 m;
    gpt2_cpu_build(&m, c, 9);
    randomize_params(&m, 10);
    gpt2_cpu_forward(&m, in, tg, B, T);
    gpt2_cpu_zero_grad(&m);
    gpt2_cpu_backward(&m, 1.0f / N);
    RunOut r;
    r.loss = m.mean_loss;
    r.norm = gpt2_cpu_grad_norm(&m);
    size_t vp = (size_t)N * c->padded_vocab_size;
    r.losses = malloc(sizeof(float) * N);
    memcpy(r.losses, m.losses, sizeof(float) * N);
    r.grads = malloc(sizeof(float) * m.num_parameters);
    memcpy(r.grads, m.grads, sizeof(float) * m.num_parameters);
    gpt2_cpu_update(&m, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 1);
    r.params = malloc(sizeof(float) * m.num_parameters);
    memcpy(r.params, m.params, sizeof(float) * m.num_parameters);
    gpt2_cpu_forward(&m, in, NULL, B, T); // logits of the updated model
    r.probs = malloc(sizeof(float) * vp);
    memcpy(r.probs, gpt2_cpu_logits(&m), sizeof(float) * vp);
    gpt2_cpu_free(&m);
    free(in);
    free(tg);
    omp_set_num_threads(saved);
    return r;
}

static void test_thread_count_invariance(void **state) {
    (void)state;
    // ragged everywhere: C = 40 (panels of 16, 16, 8), 3C = 120, N = 33, Vp = 320
    GPT2Config c = make_config(300, 320, 2, 40, 4, 16);
    const int B = 3, T = 11, N = B * T;
    size_t np = gpt2_param_sizes(&c, (size_t[GPT2_NUM_PARAM_TENSORS]){0});
    RunOut one = run_with_threads(1, &c, B, T);
    for (int threads = 2; threads <= 4; threads++) {
        RunOut r = run_with_threads(threads, &c, B, T);
        assert_memory_equal(&one.loss, &r.loss, sizeof(float));
        assert_memory_equal(&one.norm, &r.norm, sizeof(float));
        assert_memory_equal(one.losses, r.losses, sizeof(float) * N);
        assert_memory_equal(one.grads, r.grads, sizeof(float) * np);
        assert_memory_equal(one.params, r.params, sizeof(float) * np);
        assert_memory_equal(one.probs, r.probs, sizeof(float) * N * c.padded_vocab_size);
        free(r.losses); free(r.grads); free(r.params); free(r.probs);
    }
    free(one.losses); free(one.grads); free(one.params); free(one.probs);
}

static void test_adamw_matches_shared_element_update(void **state) {
    (void)state;
    GPT2Config c = make_config(37, 48, 2, 16, 2, 8);
    GPT2 m;
    gpt2_cpu_build(&m, &c, 3);
    int in[10], tg[10];
    random_tokens(in, 10, c.vocab_size, 1);
    random_tokens(tg, 10, c.vocab_size, 2);
    gpt2_cpu_forward(&m, in, tg, 2, 5);
    gpt2_cpu_zero_grad(&m);
    gpt2_cpu_backward(&m, 0.1f);

    // grad norm: plain double sum in this test's own order
    double ss = 0.0;
    for (size_t i = 0; i < m.num_parameters; i++) ss += (double)m.grads[i] * m.grads[i];
    assert_true(fabs(gpt2_cpu_grad_norm(&m) - sqrt(ss)) <= 1e-6 * sqrt(ss));

    const size_t n = m.num_parameters;
    float *p = malloc(sizeof(float) * n), *mm = calloc(n, sizeof(float)), *vv = calloc(n, sizeof(float));
    memcpy(p, m.params, sizeof(float) * n);
    size_t off[GPT2_NUM_PARAM_TENSORS];
    gpt2_param_offsets(&c, off);
    for (int step = 1; step <= 3; step++) {
        const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.75f;
        gpt2_cpu_update(&m, lr, b1, b2, eps, wd, gs, step);
        AdamWParams a = adamw_params(lr, b1, b2, eps, wd, gs, step);
        for (int t = 0; t < GPT2_NUM_PARAM_TENSORS; t++)
            for (size_t i = off[t]; i < off[t] + m.param_sizes[t]; i++)
                p[i] = adamw_element(p[i], m.grads[i], &mm[i], &vv[i], &a, gpt2_param_decays(t));
        assert_memory_equal(p, m.params, sizeof(float) * n);
        assert_memory_equal(mm, m.m, sizeof(float) * n);
        assert_memory_equal(vv, m.v, sizeof(float) * n);
    }
    // and the update did something
    GPT2 fresh;
    gpt2_cpu_build(&fresh, &c, 3);
    assert_true(memcmp(fresh.params, m.params, sizeof(float) * n) != 0);
    gpt2_cpu_free(&fresh);
    free(p); free(mm); free(vv);
    gpt2_cpu_free(&m);
}

static void test_memorizes_a_sequence(void **state) {
    (void)state;
    GPT2Config c = make_config(37, 48, 2, 32, 4, 16);
    GPT2 m;
    gpt2_cpu_build(&m, &c, 42);
    enum { B = 2, T = 16, N = B * T };
    int in[N], tg[N], seq[T + 1];
    for (int t = 0; t <= T; t++) seq[t] = (int)((t * 7 + 3) % 37);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            in[b * T + t] = seq[t];
            tg[b * T + t] = seq[t + 1];
        }
    float first = 0.0f, last = 0.0f;
    for (int step = 1; step <= 50; step++) {
        gpt2_cpu_forward(&m, in, tg, B, T);
        if (step == 1) first = m.mean_loss;
        last = m.mean_loss;
        gpt2_cpu_zero_grad(&m);
        gpt2_cpu_backward(&m, 1.0f / N);
        gpt2_cpu_update(&m, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, step);
    }
    gpt2_cpu_forward(&m, in, tg, B, T);
    last = m.mean_loss;
    print_message("  loss %.4f -> %.4f after 50 steps\n", first, last);
    assert_true(first > 3.0f);
    assert_true(last < 0.1f * first);
    gpt2_cpu_free(&m);
}

static char tmpdir[64];

static void test_model_file_roundtrip(void **state) {
    (void)state;
    GPT2Config c = make_config(37, 48, 2, 16, 2, 8);
    GPT2 m;
    gpt2_cpu_build(&m, &c, 5);
    randomize_params(&m, 6);
    int in[10], tg[10];
    random_tokens(in, 10, c.vocab_size, 1);
    random_tokens(tg, 10, c.vocab_size, 2);
    gpt2_cpu_forward(&m, in, tg, 2, 5);
    char path[128];

    snprintf(path, sizeof(path), "%s/model_v3.bin", tmpdir);
    gpt2_model_file_write(path, &c, m.params, GPT2_MODEL_FP32);
    GPT2 r;
    gpt2_cpu_build_from_file(&r, path);
    assert_memory_equal(&r.config, &c, sizeof(c));
    assert_int_equal(r.num_parameters, m.num_parameters);
    assert_memory_equal(r.params, m.params, sizeof(float) * m.num_parameters);
    gpt2_cpu_forward(&r, in, tg, 2, 5);
    assert_memory_equal(&r.mean_loss, &m.mean_loss, sizeof(float));
    gpt2_cpu_free(&r);

    snprintf(path, sizeof(path), "%s/model_v5.bin", tmpdir);
    gpt2_model_file_write(path, &c, m.params, GPT2_MODEL_BF16);
    gpt2_cpu_build_from_file(&r, path);
    assert_memory_equal(&r.config, &c, sizeof(c));
    for (size_t i = 0; i < m.num_parameters; i++) {
        float want = gpt2_bf16_to_f32(gpt2_f32_to_bf16(m.params[i]));
        if (r.params[i] != want) fail_msg("bf16 element %zu: %g, expected %g", i, r.params[i], want);
        assert_true(fabsf(r.params[i] - m.params[i]) <= fabsf(m.params[i]) * (1.0f / 256));
    }
    gpt2_cpu_forward(&r, in, tg, 2, 5);
    print_message("  loss fp32 %.6f, bf16 round trip %.6f\n", m.mean_loss, r.mean_loss);
    assert_true(fabsf(r.mean_loss - m.mean_loss) < 0.02f * m.mean_loss);
    gpt2_cpu_free(&r);
    gpt2_cpu_free(&m);
}

// ---------------------------------------------------------------------------------
// hooks

typedef struct {
    int events[512][3]; // kind (0 fetch, 1 release, 2 grads_ready), unit, is_backward
    int n;
    GPT2 *model;                  // when set: repoint its tables into shadow buffers
    float *shadow_params, *shadow_grads;
} HookLog;

static const int unit_tensors[][12] = {
    {GPT2_WTE, GPT2_WPE, -1},
    {GPT2_LN1W, GPT2_LN1B, GPT2_QKVW, GPT2_QKVB, GPT2_ATTPROJW, GPT2_ATTPROJB, GPT2_LN2W, GPT2_LN2B, GPT2_FCW,
     GPT2_FCB, GPT2_FCPROJW, GPT2_FCPROJB},
    {GPT2_LNFW, GPT2_LNFB, -1},
    {GPT2_WTE, -1},
};

// Points the unit's table entries at the shadow buffers (on) or at NULL (off), so
// any access outside a fetch/release window crashes.
static void repoint(HookLog *h, int unit, int on) {
    GPT2 *m = h->model;
    const int L = m->config.num_layers;
    int kind = unit == 0 ? 0 : unit <= L ? 1 : unit == L + 1 ? 2 : 3, l = kind == 1 ? unit - 1 : 0;
    size_t off[GPT2_NUM_PARAM_TENSORS];
    gpt2_param_offsets(&m->config, off);
    for (int k = 0; k < 12 && unit_tensors[kind][k] >= 0; k++) {
        int t = unit_tensors[kind][k];
        size_t per = m->param_sizes[t] / (gpt2_param_is_per_layer(t) ? (size_t)L : 1);
        m->w[t][l] = on ? h->shadow_params + off[t] + (size_t)l * per : NULL;
        m->g[t][l] = on ? h->shadow_grads + off[t] + (size_t)l * per : NULL;
    }
}

static void log_event(HookLog *h, int kind, int unit, int bwd) {
    if (h->n < 512) {
        h->events[h->n][0] = kind;
        h->events[h->n][1] = unit;
        h->events[h->n][2] = bwd;
    }
    h->n++;
}
static void hk_fetch(void *ctx, int unit, int bwd) {
    HookLog *h = ctx;
    log_event(h, 0, unit, bwd);
    if (h->model) repoint(h, unit, 1);
}
static void hk_release(void *ctx, int unit, int bwd) {
    HookLog *h = ctx;
    log_event(h, 1, unit, bwd);
    if (h->model) repoint(h, unit, 0);
}
static void hk_ready(void *ctx, int unit) { log_event(ctx, 2, unit, 1); }

static void test_hooks_order_and_pointer_tables(void **state) {
    (void)state;
    GPT2Config c = make_config(37, 48, 3, 16, 2, 8);
    const int L = c.num_layers;
    int in[10], tg[10];
    random_tokens(in, 10, c.vocab_size, 1);
    random_tokens(tg, 10, c.vocab_size, 2);

    GPT2 ref;
    gpt2_cpu_build(&ref, &c, 5);
    randomize_params(&ref, 6);
    gpt2_cpu_forward(&ref, in, tg, 2, 5);
    gpt2_cpu_zero_grad(&ref);
    gpt2_cpu_backward(&ref, 0.1f);

    // A model with other parameters whose hooks substitute ref's parameters and
    // collect gradients elsewhere: it must see only what the tables give it.
    GPT2 m;
    gpt2_cpu_build(&m, &c, 1234);
    HookLog *h = calloc(1, sizeof(HookLog));
    h->model = &m;
    h->shadow_params = malloc(sizeof(float) * ref.num_parameters);
    memcpy(h->shadow_params, ref.params, sizeof(float) * ref.num_parameters);
    h->shadow_grads = calloc(ref.num_parameters, sizeof(float));
    for (int u = 0; u < L + 3; u++) repoint(h, u, 0);
    m.hooks = (GPT2Hooks){h, hk_fetch, hk_release, hk_ready};
    gpt2_cpu_forward(&m, in, tg, 2, 5);
    gpt2_cpu_backward(&m, 0.1f);
    assert_memory_equal(&m.mean_loss, &ref.mean_loss, sizeof(float));
    assert_memory_equal(h->shadow_grads, ref.grads, sizeof(float) * ref.num_parameters);
    for (size_t i = 0; i < m.num_parameters; i++) assert_true(m.grads[i] == 0.0f);

    // the expected sequence
    int want[256][3], n = 0;
    for (int u = 0; u < L + 3; u++) {
        want[n][0] = 0; want[n][1] = u; want[n++][2] = 0;
        want[n][0] = 1; want[n][1] = u; want[n++][2] = 0;
    }
    for (int u = L + 2; u >= 0; u--) {
        want[n][0] = 0; want[n][1] = u; want[n++][2] = 1;
        want[n][0] = 2; want[n][1] = u; want[n++][2] = 1;
        want[n][0] = 1; want[n][1] = u; want[n++][2] = 1;
    }
    assert_int_equal(h->n, n);
    for (int i = 0; i < n; i++)
        if (memcmp(want[i], h->events[i], sizeof(want[i])) != 0)
            fail_msg("hook event %d: got (%d, unit %d, bwd %d), expected (%d, unit %d, bwd %d)", i, h->events[i][0],
                     h->events[i][1], h->events[i][2], want[i][0], want[i][1], want[i][2]);

    // A model built without parameters of its own (ZeRO owns them) runs on the tables alone.
    GPT2 e;
    gpt2_cpu_build_external(&e, &c);
    assert_null(e.params);
    assert_null(e.grads);
    h->model = &e;
    h->n = 0;
    memset(h->shadow_grads, 0, sizeof(float) * ref.num_parameters);
    e.hooks = (GPT2Hooks){h, hk_fetch, hk_release, hk_ready};
    gpt2_cpu_forward(&e, in, tg, 2, 5);
    gpt2_cpu_backward(&e, 0.1f);
    assert_memory_equal(&e.mean_loss, &ref.mean_loss, sizeof(float));
    assert_memory_equal(h->shadow_grads, ref.grads, sizeof(float) * ref.num_parameters);
    gpt2_cpu_free(&e);
    free(h->shadow_params);
    free(h->shadow_grads);
    free(h);
    gpt2_cpu_free(&m);
    gpt2_cpu_free(&ref);
}

static void test_activations_regrow_and_reuse(void **state) {
    (void)state;
    GPT2Config c = make_config(37, 48, 2, 16, 2, 8);
    int in[16], tg[16];
    random_tokens(in, 16, c.vocab_size, 1);
    random_tokens(tg, 16, c.vocab_size, 2);
    GPT2 m;
    gpt2_cpu_build(&m, &c, 5);
    const int shapes[][2] = {{1, 3}, {2, 8}, {1, 4}, {4, 2}, {2, 8}};
    size_t cap_after_big = 0;
    for (int s = 0; s < 5; s++) {
        int B = shapes[s][0], T = shapes[s][1];
        gpt2_cpu_forward(&m, in, tg, B, T);
        gpt2_cpu_zero_grad(&m);
        gpt2_cpu_backward(&m, 1.0f);
        if (s == 1) cap_after_big = m.act_capacity;
        if (s > 1) assert_int_equal(m.act_capacity, cap_after_big); // smaller shapes reuse
        GPT2 f;
        gpt2_cpu_build(&f, &c, 5);
        gpt2_cpu_forward(&f, in, tg, B, T);
        gpt2_cpu_backward(&f, 1.0f);
        assert_memory_equal(&f.mean_loss, &m.mean_loss, sizeof(float));
        assert_memory_equal(f.losses, m.losses, sizeof(float) * B * T);
        assert_memory_equal(f.grads, m.grads, sizeof(float) * m.num_parameters);
        gpt2_cpu_free(&f);
    }
    gpt2_cpu_free(&m);
}

// The dry run's prediction equals what a forward and backward allocate, and is 64-byte
// granular per array: the documented shapes (gpt2_cpu.c's Acts / GradActs) each rounded
// up to 16 floats, the per-layer ones per layer; with checkpointing the per-block arrays
// hold one block, with offload the residual stream two slots and the host tier L-1.
static void test_activation_bytes_predicted(void **state) {
    (void)state;
    GPT2Config c = make_config(37, 48, 3, 16, 2, 16);
    int in[48], tg[48];
    random_tokens(in, 48, c.vocab_size, 3);
    random_tokens(tg, 48, c.vocab_size, 4);
    const int shapes[][2] = {{1, 1}, {3, 5}, {2, 16}, {3, 16}};
    const GPT2CpuOptions opts[] = {{0, 0, 1, 1, 1, NULL}, {1, 0, 1, 1, 1, NULL}, {1, 1, 1, 1, 1, NULL}, {1, 1, 4, 1, 1, NULL}};
    for (int s = 0; s < 4; s++) {
        for (int k = 0; k < 4; k++) {
            const int B = shapes[s][0], T = shapes[s][1];
            const GPT2CpuOptions *o = k == 0 ? NULL : &opts[k];   // NULL: the defaults
            GPT2 m;
            gpt2_cpu_build(&m, &c, 5);
            gpt2_cpu_set_options(&m, o);
            gpt2_cpu_forward(&m, in, tg, B, T);
            gpt2_cpu_backward(&m, 1.0f);
            size_t live = (m.act_capacity + m.grad_act_capacity) * sizeof(float);
            size_t host = m.act_host_capacity * sizeof(float);
            assert_int_equal(gpt2_cpu_activation_bytes(&c, B, T, o), live);
            assert_int_equal(gpt2_cpu_activation_host_bytes(&c, B, T, o), host);
            gpt2_cpu_free(&m);
            // independent count: (N = B*T, C, L, NH, Vp) per array, rounded to 16 floats
            const size_t N = (size_t)B * T, C = 16, L = 3, NH = 2, Vp = 48, att = (size_t)B * NH * T * T;
            const size_t R = opts[k].act_offload ? 2 : L + 1, S = opts[k].act_checkpoint ? 1 : L;
#define R16(n) (((n) + 15) / 16 * 16)
            size_t floats = R * R16(N * C)                                                // residual stream
                            + S * (4 * R16(N * C) + 4 * R16(N) + R16(3 * N * C) + R16(att) + 2 * R16(4 * N * C))
                            + R16(N * C) + 2 * R16(N) + R16(N * Vp) + R16(N)             // lnf, stats, logits, losses
                            + 3 * R16(N * C) + R16(3 * N * C) + R16(att) + R16(4 * N * C); // backward scratch
            size_t host_floats = opts[k].act_offload ? (L - 1) * R16(N * C) : 0;
#undef R16
            assert_int_equal(live, floats * sizeof(float));
            assert_int_equal(host, host_floats * sizeof(float));
        }
    }
}

// ---------------------------------------------------------------------------------
// activation checkpointing, its host offload, tiled linears (GPT2CpuOptions)

// Two training steps (forward, backward, AdamW) with the options on fixed parameters and
// tokens: the first step's loss, per-token losses and gradients, the second step's loss,
// the parameters after both updates and the activation buffers the model grew.
typedef struct {
    float loss[2];
    float *losses, *grads, *params;
    size_t act_bytes, host_bytes;
} OptRun;

static OptRun run_options(const GPT2Config *c, const GPT2CpuOptions *o, int B, int T) {
    const int N = B * T;
    int *in = malloc(sizeof(int) * 2 * N), *tg = malloc(sizeof(int) * 2 * N);
    random_tokens(in, 2 * N, c->vocab_size, 41);
    random_tokens(tg, 2 * N, c->vocab_size, 42);
    GPT2 m;
    gpt2_cpu_build(&m, c, 9);
    randomize_params(&m, 10);
    gpt2_cpu_set_options(&m, o);
    OptRun r;
    r.losses = malloc(sizeof(float) * N);
    r.grads = malloc(sizeof(float) * m.num_parameters);
    for (int step = 0; step < 2; step++) {
        gpt2_cpu_forward(&m, in + step * N, tg + step * N, B, T);
        gpt2_cpu_zero_grad(&m);
        gpt2_cpu_backward(&m, 1.0f / N);
        r.loss[step] = m.mean_loss;
        if (step == 0) {
            memcpy(r.losses, m.losses, sizeof(float) * N);
            memcpy(r.grads, m.grads, sizeof(float) * m.num_parameters);
        }
        gpt2_cpu_update(&m, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, step + 1);
    }
    r.params = malloc(sizeof(float) * m.num_parameters);
    memcpy(r.params, m.params, sizeof(float) * m.num_parameters);
    r.act_bytes = (m.act_capacity + m.grad_act_capacity) * sizeof(float);
    r.host_bytes = m.act_host_capacity * sizeof(float);
    gpt2_cpu_free(&m);
    free(in);
    free(tg);
    return r;
}

static void opt_run_free(OptRun *r) {
    free(r->losses);
    free(r->grads);
    free(r->params);
}

// Checkpointing reruns each block's forward, the same code on the same block input (kept
// bit-exact in the residual stream, or copied to the host tier and back), so every
// activation the backward reads is the same bits: losses, gradients and the updated
// parameters are bit-identical, not just close.
static void test_act_checkpoint_bit_identical(void **state) {
    (void)state;
    GPT2Config c = make_config(37, 48, 3, 40, 4, 16);
    const int B = 3, T = 11, N = B * T;
    const size_t np = gpt2_param_sizes(&c, (size_t[GPT2_NUM_PARAM_TENSORS]){0});
    OptRun base = run_options(&c, NULL, B, T);
    const GPT2CpuOptions opts[] = {{1, 0, 1, 1, 1, NULL}, {1, 1, 1, 1, 1, NULL}};
    for (int i = 0; i < 2; i++) {
        OptRun r = run_options(&c, &opts[i], B, T);
        assert_memory_equal(base.loss, r.loss, sizeof(base.loss));
        assert_memory_equal(base.losses, r.losses, sizeof(float) * N);
        assert_memory_equal(base.grads, r.grads, sizeof(float) * np);
        assert_memory_equal(base.params, r.params, sizeof(float) * np);
        assert_true(r.act_bytes < base.act_bytes);
        // the host tier: block inputs 0..L-2, (N, C) each rounded up to 16 floats
        const size_t slot = ((size_t)N * c.channels + 15) / 16 * 16;
        assert_int_equal(r.host_bytes, opts[i].act_offload ? (size_t)(c.num_layers - 1) * slot * sizeof(float) : 0);
        print_message("  L=%d C=%d B=%d T=%d: activations %zu bytes -> %zu checkpointed%s (host tier %zu bytes); "
                      "losses, gradients, parameters bit-identical\n", c.num_layers, c.channels, B, T, base.act_bytes,
                      r.act_bytes, opts[i].act_offload ? " and offloaded" : "", r.host_bytes);
        opt_run_free(&r);
    }
    opt_run_free(&base);
}

// The swap-file tier across gpt2_cpu_release_activations (and gpt2_cpu_set_options) and a
// smaller batch: the file and its slots go with the activations, so the next forward's
// slot is the host slot's size (a slot kept from the larger batch moved past the smaller
// host buffer), and the results are the bits of a model that never offloaded.
static void test_act_swap_file_across_release(void **state) {
    (void)state;
    GPT2Config c = make_config(37, 48, 3, 16, 2, 16);
    char dir[] = "/tmp/test_gpt2_cpu_swap.XXXXXX";
    assert_non_null(mkdtemp(dir));
    const GPT2CpuOptions file = {1, GPT2_ACT_OFFLOAD_FILE, 1, 1, 1, dir};
    int in[64], tg[64];
    random_tokens(in, 64, c.vocab_size, 7);
    random_tokens(tg, 64, c.vocab_size, 8);
    GPT2 m;
    gpt2_cpu_build(&m, &c, 5);
    gpt2_cpu_set_options(&m, &file);
    int watch = folder_watch_begin(dir);   // the swap file never shows in the folder
    gpt2_cpu_forward(&m, in, tg, 4, 16);
    char seen[1024];
    folder_watch_end(watch, seen, sizeof seen);
    if (makes_unnamed_files(dir) ? seen[0] != '\0' : !strstr(seen, " removed act_swap_"))
        fail_msg("the activation swap file in %s: the folder saw:%s", dir, seen);
    gpt2_cpu_zero_grad(&m);
    gpt2_cpu_backward(&m, 1.0f);
    assert_true(m.act_fd >= 0);
    gpt2_cpu_release_activations(&m);
    assert_int_equal(m.act_fd, -1);
    assert_null(m.logits_or_probs);
    gpt2_cpu_forward(&m, in, tg, 1, 16);
    assert_true(m.act_slot_bytes <= m.act_host_capacity * sizeof(float));
    gpt2_cpu_zero_grad(&m);
    gpt2_cpu_backward(&m, 1.0f);
    GPT2 f;
    gpt2_cpu_build(&f, &c, 5);
    gpt2_cpu_forward(&f, in, tg, 1, 16);
    gpt2_cpu_zero_grad(&f);
    gpt2_cpu_backward(&f, 1.0f);
    assert_memory_equal(&f.mean_loss, &m.mean_loss, sizeof(float));
    assert_memory_equal(f.grads, m.grads, sizeof(float) * m.num_parameters);
    // the same across gpt2_cpu_set_options, which lays the activations out anew
    gpt2_cpu_forward(&m, in, tg, 4, 16);
    gpt2_cpu_set_options(&m, &file);
    assert_int_equal(m.act_fd, -1);
    gpt2_cpu_forward(&m, in, tg, 1, 16);
    assert_true(m.act_slot_bytes <= m.act_host_capacity * sizeof(float));
    gpt2_cpu_zero_grad(&m);
    gpt2_cpu_backward(&m, 1.0f);
    assert_memory_equal(f.grads, m.grads, sizeof(float) * m.num_parameters);
    gpt2_cpu_free(&f);
    gpt2_cpu_free(&m);
    assert_int_equal(rmdir(dir), 0);   // the swap file never shows in the folder
}

// A tiled run r against the untiled base: every tensor's gradient within 1e-5 of its max
// |g| (fails naming the tensor and what), the step-1 loss bit-identical, the step-2 loss
// within 1e-5, and the parameters after 2 steps within 2 lr (AdamW's first steps move each
// element by about lr whatever its gradient's size, so a gradient that is rounding noise
// may move its parameter differently). Returns the worst gradient difference / max |g|;
// *pworst the worst parameter difference.
static double tiled_close(const GPT2Config *c, const OptRun *base, const OptRun *r, int N, const char *what,
                          double *pworst) {
    size_t sizes[GPT2_NUM_PARAM_TENSORS], off[GPT2_NUM_PARAM_TENSORS];
    gpt2_param_sizes(c, sizes);
    gpt2_param_offsets(c, off);
    assert_memory_equal(&base->loss[0], &r->loss[0], sizeof(float));
    assert_memory_equal(base->losses, r->losses, sizeof(float) * N);
    double worst = 0.0;
    *pworst = 0.0;
    for (int t = 0; t < GPT2_NUM_PARAM_TENSORS; t++) {
        double gmax = 0.0, dmax = 0.0;
        for (size_t e = off[t]; e < off[t] + sizes[t]; e++) {
            gmax = fmax(gmax, fabs(base->grads[e]));
            dmax = fmax(dmax, fabs(base->grads[e] - r->grads[e]));
            *pworst = fmax(*pworst, fabs(base->params[e] - r->params[e]));
        }
        if (dmax > 1e-5 * gmax)
            fail_msg("%s: %s gradient differs by %.3e (max |g| %.3e)", what, gpt2_param_name(t), dmax, gmax);
        worst = fmax(worst, dmax / gmax);
    }
    assert_true(*pworst <= 2e-3);
    assert_true(fabs(base->loss[1] - r->loss[1]) <= 1e-5 * base->loss[1]);
    return worst;
}

// Tiles of a linear compute each output element as the whole linear does (the same dot
// product over the input), so the forward and the loss are bit-identical; backward sums a
// tiled linear's input gradient tile by tile in reverse order, another order of the same
// float additions, so gradients agree to float rounding. Checkpointing on top changes no bit.
static void test_tile_linear_matches_untiled(void **state) {
    (void)state;
    GPT2Config c = make_config(37, 48, 2, 40, 4, 16);
    const int B = 3, T = 11, N = B * T;
    const size_t np = gpt2_param_sizes(&c, (size_t[GPT2_NUM_PARAM_TENSORS]){0});
    OptRun base = run_options(&c, NULL, B, T);
    const int tiles[] = {2, 4, 5};
    for (int i = 0; i < 3; i++) {
        const GPT2CpuOptions o = {0, 0, tiles[i], 1, 1, NULL}, oc = {1, 1, tiles[i], 1, 1, NULL};
        OptRun r = run_options(&c, &o, B, T), rc = run_options(&c, &oc, B, T);
        char what[32];
        snprintf(what, sizeof(what), "K=%d", tiles[i]);
        double pworst;
        const double worst = tiled_close(&c, &base, &r, N, what, &pworst);
        assert_memory_equal(r.loss, rc.loss, sizeof(r.loss));
        assert_memory_equal(r.grads, rc.grads, sizeof(float) * np);
        assert_memory_equal(r.params, rc.params, sizeof(float) * np);
        print_message("  K=%d: loss bit-identical, gradients within %.2e of each tensor's max |g|, parameters after "
                      "2 steps within %.2e, step-2 loss %.9g vs %.9g; with checkpointing and offload: bit-identical\n",
                      tiles[i], worst, pworst, r.loss[1], base.loss[1]);
        opt_run_free(&r);
        opt_run_free(&rc);
    }
    opt_run_free(&base);
}

// Vocabulary tiles: each embedding row and each logit is computed as untiled (the last
// tile adds wpe onto the rows the others wrote, one add as untiled), so the forward is
// bit-identical; backward sums the classifier's input gradient tile by tile in reverse
// order, so gradients agree to float rounding. With linear tiles and checkpointing too.
static void test_tile_vocab_matches_untiled(void **state) {
    (void)state;
    GPT2Config c = make_config(37, 48, 2, 40, 4, 16);
    const int B = 3, T = 11, N = B * T;
    OptRun base = run_options(&c, NULL, B, T);
    int in[33];
    random_tokens(in, N, c.vocab_size, 21);
    GPT2 u;   // the untiled logits of a forward without targets
    gpt2_cpu_build(&u, &c, 9);
    randomize_params(&u, 10);
    gpt2_cpu_forward(&u, in, NULL, B, T);
    const GPT2CpuOptions opts[] = {{0, 0, 1, 1, 2, NULL}, {0, 0, 1, 1, 3, NULL}, {0, 0, 1, 1, 48, NULL}, {1, 1, 4, 1, 6, NULL}};
    for (int i = 0; i < 4; i++) {
        const GPT2CpuOptions *o = &opts[i];
        OptRun r = run_options(&c, o, B, T);
        char what[32];
        snprintf(what, sizeof(what), "K=%d KV=%d", o->tile_linear, o->tile_vocab);
        double pworst;
        const double worst = tiled_close(&c, &base, &r, N, what, &pworst);
        GPT2 m;
        gpt2_cpu_build(&m, &c, 9);
        randomize_params(&m, 10);
        gpt2_cpu_set_options(&m, o);
        gpt2_cpu_forward(&m, in, NULL, B, T);
        assert_memory_equal(gpt2_cpu_logits(&m), gpt2_cpu_logits(&u), sizeof(float) * N * c.padded_vocab_size);
        gpt2_cpu_free(&m);
        print_message("  K=%d KV=%d%s: logits and loss bit-identical, gradients within %.2e of each tensor's max "
                      "|g|, parameters after 2 steps within %.2e, step-2 loss %.9g vs %.9g\n", o->tile_linear,
                      o->tile_vocab, o->act_checkpoint ? " ckpt+offload" : "", worst, pworst, r.loss[1], base.loss[1]);
        opt_run_free(&r);
    }
    gpt2_cpu_free(&u);
    opt_run_free(&base);
}

// Hooks with tiles and checkpointing: a model whose pointer tables are NULL outside its
// units' windows (set from gpt2_slices_tiled's table into shadow buffers holding the
// parameters; gradient entries only in backward windows) gives the bits of the same model
// without hooks, and the hooks fire in the order gpt2_config.h documents, spelled out here
// from its unit formulas.
typedef struct {
    HookLog log;        // the events (its model is unused: tile_repoint repoints)
    GPT2 *model;
    GPT2Slice *slices;
    int num_slices;
    float *shadow_params, *shadow_grads;
} TileHookLog;

static void tile_repoint(TileHookLog *h, int unit, int on, int bwd) {
    GPT2 *m = h->model;
    const int K = m->opt.tile_linear, KV = m->opt.tile_vocab;
    for (int i = 0; i < h->num_slices; i++) {
        const GPT2Slice *s = &h->slices[i];
        if (s->units[0] != unit && !(s->num_units > 1 && s->units[1] == unit)) continue;
        const int e = s->layer * gpt2_param_tiles(s->tensor, K, KV) + s->tile;
        m->w[s->tensor][e] = on ? h->shadow_params + s->offset : NULL;
        m->g[s->tensor][e] = on && bwd ? h->shadow_grads + s->offset : NULL;
    }
}
static void th_fetch(void *ctx, int unit, int bwd) {
    log_event(&((TileHookLog *)ctx)->log, 0, unit, bwd);
    tile_repoint(ctx, unit, 1, bwd);
}
static void th_release(void *ctx, int unit, int bwd) {
    log_event(&((TileHookLog *)ctx)->log, 1, unit, bwd);
    tile_repoint(ctx, unit, 0, bwd);
}
static void th_ready(void *ctx, int unit) { log_event(&((TileHookLog *)ctx)->log, 2, unit, 1); }

static int want_event(int w[][3], int n, int kind, int unit, int bwd) {
    w[n][0] = kind;
    w[n][1] = unit;
    w[n][2] = bwd;
    return n + 1;
}

static void test_hooks_tiled_and_checkpointed(void **state) {
    (void)state;
    GPT2Config c = make_config(37, 48, 2, 16, 2, 8);
    const int L = c.num_layers, B = 2, T = 5;
    int in[10], tg[10];
    random_tokens(in, 10, c.vocab_size, 1);
    random_tokens(tg, 10, c.vocab_size, 2);
    for (int K = 1; K <= 4; K *= 2) {
      for (int KV = 1; KV <= 6; KV += 5) {   // KV 6: 8 rows of wte per tile
        for (int ck = 0; ck <= 1; ck++) {
            const GPT2CpuOptions o = {ck, ck, K, 1, KV, NULL};
            GPT2 ref;
            gpt2_cpu_build(&ref, &c, 5);
            randomize_params(&ref, 6);
            gpt2_cpu_set_options(&ref, &o);
            gpt2_cpu_forward(&ref, in, tg, B, T);
            gpt2_cpu_zero_grad(&ref);
            gpt2_cpu_backward(&ref, 0.1f);

            GPT2 m;
            gpt2_cpu_build_external(&m, &c);
            gpt2_cpu_set_options(&m, &o);
            GPT2Slots slots = gpt2_cpu_slots(&m);
            assert_int_equal(slots.tiles, K);
            assert_int_equal(slots.vocab_tiles, KV);
            TileHookLog *h = calloc(1, sizeof(TileHookLog));
            h->model = &m;
            h->num_slices = gpt2_num_slices_tiled(&c, K, KV);
            h->slices = malloc(sizeof(GPT2Slice) * h->num_slices);
            gpt2_slices_tiled(&c, K, KV, h->slices);
            h->shadow_params = malloc(sizeof(float) * ref.num_parameters);
            memcpy(h->shadow_params, ref.params, sizeof(float) * ref.num_parameters);
            h->shadow_grads = calloc(ref.num_parameters, sizeof(float));
            for (int u = 0; u < gpt2_num_units_tiled(&c, K, KV); u++) tile_repoint(h, u, 0, 0);
            *slots.hooks = (GPT2Hooks){h, th_fetch, th_release, th_ready};
            gpt2_cpu_forward(&m, in, tg, B, T);
            gpt2_cpu_backward(&m, 0.1f);
            assert_memory_equal(&m.mean_loss, &ref.mean_loss, sizeof(float));
            assert_memory_equal(h->shadow_grads, ref.grads, sizeof(float) * ref.num_parameters);

            // the documented sequence: KV embedding tiles, then per block b = KV + l U, U =
            // 2 + 4K tiled (else 1), the final LN, KV classifier tiles
            static int want[1024][3];
            int n = 0;
            const int U = K > 1 ? 2 + 4 * K : 1, units = KV + L * U + 1 + KV;
            assert_int_equal(gpt2_num_units_tiled(&c, K, KV), units);
            for (int u = 0; u < units; u++) {
                n = want_event(want, n, 0, u, 0);
                n = want_event(want, n, 1, u, 0);
            }
            for (int u = units - 1; u >= 0; u--) {
                const int l = (u - KV) / U, b = KV + l * U;
                if (ck && K > 1 && u >= KV && u < KV + L * U && u == b + U - 1) {
                    // the recompute of block l: its units in forward order but the fcproj tiles
                    for (int v = b; v < b + 2 + 3 * K; v++) {
                        n = want_event(want, n, 0, v, 0);
                        n = want_event(want, n, 1, v, 0);
                    }
                }
                n = want_event(want, n, 0, u, 1);
                n = want_event(want, n, 2, u, 1);
                n = want_event(want, n, 1, u, 1);
            }
            const HookLog *g = &h->log;
            assert_int_equal(g->n, n);
            for (int i = 0; i < n; i++)
                if (memcmp(want[i], g->events[i], sizeof(want[i])) != 0)
                    fail_msg("K=%d KV=%d checkpoint %d: hook event %d: got (%d, unit %d, bwd %d), expected (%d, unit "
                             "%d, bwd %d)", K, KV, ck, i, g->events[i][0], g->events[i][1], g->events[i][2],
                             want[i][0], want[i][1], want[i][2]);
            print_message("  K=%d KV=%d checkpoint %d: %d units, %d hook events in the documented order, bits of "
                          "the hook-less model\n", K, KV, ck, units, n);
            free(h->slices);
            free(h->shadow_params);
            free(h->shadow_grads);
            free(h);
            gpt2_cpu_free(&m);
            gpt2_cpu_free(&ref);
        }
      }
    }
}

// The tiled table lists the untiled table's elements in the same order: each tiled slice
// is replaced in place by its K (wte: KV) tiles, contiguous, covering it exactly.
static void test_tiled_slices_cover_untiled(void **state) {
    (void)state;
    GPT2Config c = make_config(37, 48, 3, 40, 4, 16);
    const int n1 = gpt2_num_slices(&c);
    GPT2Slice *one = malloc(sizeof(GPT2Slice) * n1);
    gpt2_slices(&c, one);
    for (int K = 1; K <= 8; K++)
    for (int KV = 1; KV <= 48; KV *= 2) {
        if (c.channels % K != 0 || c.padded_vocab_size % KV != 0 || (K == 1 && KV == 1)) continue;
        const int nk = gpt2_num_slices_tiled(&c, K, KV);
        GPT2Slice *s = malloc(sizeof(GPT2Slice) * nk);
        gpt2_slices_tiled(&c, K, KV, s);
        int j = 0;
        for (int i = 0; i < n1; i++) {
            const int tiles = gpt2_param_is_tiled(one[i].tensor) ? K : one[i].tensor == GPT2_WTE ? KV : 1;
            size_t at = one[i].offset;
            for (int k = 0; k < tiles; k++, j++) {
                assert_true(j < nk);
                assert_int_equal(s[j].tensor, one[i].tensor);
                assert_int_equal(s[j].layer, one[i].layer);
                assert_int_equal(s[j].tile, k);
                assert_int_equal(s[j].offset, at);
                assert_int_equal(s[j].numel, one[i].numel / tiles);
                if (s[j].tensor == GPT2_WTE) {   // embedding tile k and classifier tile k
                    assert_int_equal(s[j].num_units, 2);
                    assert_int_equal(s[j].units[0], k);
                    assert_int_equal(s[j].units[1], gpt2_unit_classifier(&c, K, KV, k));
                    assert_int_equal(s[j].units[1], gpt2_num_units_tiled(&c, K, KV) - KV + k);
                } else if (s[j].tensor == GPT2_WPE) {
                    assert_int_equal(s[j].units[0], KV - 1);
                }
                at += s[j].numel;
            }
            assert_int_equal(at, one[i].offset + one[i].numel);
        }
        assert_int_equal(j, nk);
        free(s);
    }
    free(one);
}

// ---------------------------------------------------------------------------------
// error paths: run in a child, expect exit status 1 and a message on stderr

typedef void (*Misuse)(GPT2 *m, const int *tok);

typedef struct {
    Misuse fn;
    GPT2Config config;
    int tok[16];
} MisuseArg;

// In the child: build a small model, then misuse it.
static void misuse_in_child(void *p) {
    MisuseArg *a = p;
    omp_set_num_threads(1); // the parent's OpenMP thread pool did not survive fork
    GPT2 m;
    gpt2_cpu_build(&m, &a->config, 1);
    a->fn(&m, a->tok);
}

static void expect_misuse_death(Misuse fn, const char *needle) {
    MisuseArg a = {fn, make_config(37, 48, 1, 16, 2, 8), {0}};
    expect_death(misuse_in_child, &a, 1, "error:", needle, NULL);
}

static void misuse_long_sequence(GPT2 *m, const int *tok) { gpt2_cpu_forward(m, tok, tok, 1, 9); }
static void misuse_bad_token(GPT2 *m, const int *tok) {
    int bad[4] = {0, 1, 37, 2};
    (void)tok;
    gpt2_cpu_forward(m, bad, NULL, 1, 4);
}
static void misuse_bad_target(GPT2 *m, const int *tok) {
    int bad[4] = {0, 1, -1, 2};
    gpt2_cpu_forward(m, tok, bad, 1, 4);
}
static void misuse_backward_without_targets(GPT2 *m, const int *tok) {
    gpt2_cpu_forward(m, tok, NULL, 1, 4);
    gpt2_cpu_backward(m, 1.0f);
}
static void misuse_backward_twice(GPT2 *m, const int *tok) {
    gpt2_cpu_forward(m, tok, tok, 1, 4);
    gpt2_cpu_backward(m, 1.0f);
    gpt2_cpu_backward(m, 1.0f);
}
static void misuse_step_zero(GPT2 *m, const int *tok) {
    (void)tok;
    gpt2_cpu_update(m, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, 0);
}
static void misuse_bad_config(GPT2 *m, const int *tok) {
    (void)tok;
    GPT2Config c = make_config(37, 48, 1, 15, 2, 8); // 15 channels, 2 heads
    gpt2_cpu_free(m);
    gpt2_cpu_build(m, &c, 1);
}
static void misuse_missing_file(GPT2 *m, const int *tok) {
    (void)tok;
    gpt2_cpu_free(m);
    gpt2_cpu_build_from_file(m, "/nonexistent/model.bin");
}

static void misuse_update_external(GPT2 *m, const int *tok) {
    (void)tok;
    GPT2Config c = m->config;
    gpt2_cpu_free(m);
    gpt2_cpu_build_external(m, &c);
    gpt2_cpu_update(m, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, 1);
}

static void misuse_tiles_not_dividing(GPT2 *m, const int *tok) {
    (void)tok;
    gpt2_cpu_set_options(m, &(GPT2CpuOptions){0, 0, 3, 1, 1, NULL});
}
static void misuse_vocab_tiles_not_dividing(GPT2 *m, const int *tok) {
    (void)tok;
    gpt2_cpu_set_options(m, &(GPT2CpuOptions){0, 0, 1, 1, 5, NULL});
}
static void misuse_offload_without_checkpoint(GPT2 *m, const int *tok) {
    (void)tok;
    gpt2_cpu_set_options(m, &(GPT2CpuOptions){0, 1, 1, 1, 1, NULL});
}

static void test_misuse_dies_with_message(void **state) {
    (void)state;
    expect_misuse_death(misuse_long_sequence, "exceeds the model's maximum");
    expect_misuse_death(misuse_bad_token, "input token 37");
    expect_misuse_death(misuse_update_external, "managed externally");
    expect_misuse_death(misuse_bad_target, "target token -1");
    expect_misuse_death(misuse_backward_without_targets, "forward with targets");
    expect_misuse_death(misuse_backward_twice, "forward with targets");
    expect_misuse_death(misuse_step_zero, "step 0");
    expect_misuse_death(misuse_bad_config, "not divisible");
    expect_misuse_death(misuse_missing_file, "/nonexistent/model.bin");
    expect_misuse_death(misuse_tiles_not_dividing, "K = 3 do not divide the channels C = 16");
    expect_misuse_death(misuse_offload_without_checkpoint, "needs act_checkpoint 1");
    expect_misuse_death(misuse_vocab_tiles_not_dividing, "KV = 5 do not divide the padded vocabulary Vp = 48");
}

static int setup_tmpdir(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_gpt2_cpu.XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state) {
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/model_v3.bin", tmpdir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/model_v5.bin", tmpdir);
    unlink(path);
    return rmdir(tmpdir);
}

// argv[1]: run only the tests whose names match it (cmocka's pattern: * and ?)
int main(int argc, char **argv) {
    if (argc > 1) cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients_vs_double_fd),
        cmocka_unit_test(test_gradients_blocked_matmuls),
        cmocka_unit_test(test_init_loss_near_log_vocab),
        cmocka_unit_test(test_grad_accumulation),
        cmocka_unit_test(test_grad_accumulation_micro_buffers),
        cmocka_unit_test(test_thread_count_invariance),
        cmocka_unit_test(test_adamw_matches_shared_element_update),
        cmocka_unit_test(test_memorizes_a_sequence),
        cmocka_unit_test(test_model_file_roundtrip),
        cmocka_unit_test(test_hooks_order_and_pointer_tables),
        cmocka_unit_test(test_activations_regrow_and_reuse),
        cmocka_unit_test(test_activation_bytes_predicted),
        cmocka_unit_test(test_act_checkpoint_bit_identical),
        cmocka_unit_test(test_act_swap_file_across_release),
        cmocka_unit_test(test_tile_linear_matches_untiled),
        cmocka_unit_test(test_tile_vocab_matches_untiled),
        cmocka_unit_test(test_hooks_tiled_and_checkpointed),
        cmocka_unit_test(test_tiled_slices_cover_untiled),
        cmocka_unit_test(test_misuse_dies_with_message),
    };
    return cmocka_run_group_tests_name("gpt2_cpu", tests, setup_tmpdir, remove_tmpdir);
}
