// test_gpt2_zero.cu: GPU tests. Kernels against small C references, then the CUDA model
// against the CPU fp32 reference (llmc/cpu/gpt2_cpu.h) on logits, loss, all 16 gradient
// tensors and 10 AdamW steps, for both attention paths; and against the PyTorch ground truth
// of dev/ref/ (argv[1] "ref": that alone; main names the other parts).
//
// Prints "PASS name (numbers)" or "FAIL name (numbers)" per check and a final
// "N passed, N failed"; exits non-zero on any failure, 0 with a SKIP line without a GPU.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cudnn.h>

#include "llmc/numerics/adamw.h"
#include "llmc/cuda/adamw_cuda.cuh"
#include "llmc/cuda/attention_cudnn.h"
#include "llmc/cuda/attention_cudnn_version.h"
#include "llmc/cuda/attention_fallback.cuh"
#include "llmc/cuda/bias_grad.cuh"
#include "llmc/cuda/classifier.cuh"
#include "llmc/cuda/cuda_utils.cuh"
#include "llmc/cuda/elementwise.cuh"
#include "llmc/cuda/encoder.cuh"
#include "llmc/model/gpt2_config.h"
#include "llmc/model/gpt2_model_file.h"
#include "llmc/cpu/gpt2_cpu.h"
#include "llmc/cuda/gpt2_cuda.h"
#include "llmc/cuda/gpt2_cuda_trainer.h"
#include "llmc/cuda/grad_norm.cuh"
#include "llmc/model/grad_norm.h"
#include "llmc/cuda/layernorm.cuh"
#include "llmc/cuda/matmul_cublaslt.h"
#include "llmc/numerics/rand.h"
#include "dev/ref/gpt2_ref.h"

// ----------------------------------------------------------------------------
// Reporting

static int n_passed = 0, n_failed = 0;

static void report(int ok, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void report(int ok, const char *name, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    printf("%s %s (%s)\n", ok ? "PASS" : "FAIL", name, buf);
    fflush(stdout);
    if (ok) n_passed++;
    else n_failed++;
}

// ----------------------------------------------------------------------------
// Host helpers

static float bf16_round(float x) { return gpt2_bf16_to_f32(gpt2_f32_to_bf16(x)); }

// Deterministic test data: scale * N(0, 1) + shift, optionally rounded to bf16.
static float *host_normal(size_t n, float scale, float shift, uint64_t seed, int round) {
    float *x = (float *)malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        x[i] = shift + scale * rng_normal(seed, 77, i);
        if (round) x[i] = bf16_round(x[i]);
    }
    return x;
}

static bf16 *dev_bf16(const float *x, size_t n) {
    uint16_t *tmp = (uint16_t *)malloc(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) tmp[i] = gpt2_f32_to_bf16(x[i]);
    bf16 *d;
    CUDA_CHECK(cudaMalloc(&d, n * sizeof(bf16)));
    CUDA_CHECK(cudaMemcpy(d, tmp, n * sizeof(bf16), cudaMemcpyHostToDevice));
    // a copy from pageable memory may return before its DMA lands, and the model's
    // non-blocking stream does not wait for the legacy stream: wait here
    CUDA_CHECK(cudaDeviceSynchronize());
    free(tmp);
    return d;
}

static float *dev_f32(const float *x, size_t n) {
    float *d;
    CUDA_CHECK(cudaMalloc(&d, n * sizeof(float)));
    if (x) CUDA_CHECK(cudaMemcpy(d, x, n * sizeof(float), cudaMemcpyHostToDevice));
    else CUDA_CHECK(cudaMemset(d, 0, n * sizeof(float)));
    CUDA_CHECK(cudaDeviceSynchronize());   // as in dev_bf16

    return d;
}

static void get_bf16(float *dst, const bf16 *src, size_t n) {
    uint16_t *tmp = (uint16_t *)malloc(n * sizeof(uint16_t));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(tmp, src, n * sizeof(bf16), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) dst[i] = gpt2_bf16_to_f32(tmp[i]);
    free(tmp);
}

static void get_f32(float *dst, const float *src, size_t n) {
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost));
}

// ||a - b|| / ||b|| (0 when both are zero).
static double rel_l2(const float *a, const float *b, size_t n) {
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)a[i] - b[i];
        d += e * e;
        r += (double)b[i] * b[i];
    }
    if (r == 0) return d == 0 ? 0 : INFINITY;
    return sqrt(d / r);
}
static double rel_l2_d(const float *a, const double *b, size_t n) {
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)a[i] - b[i];
        d += e * e;
        r += b[i] * b[i];
    }
    if (r == 0) return d == 0 ? 0 : INFINITY;
    return sqrt(d / r);
}

static double max_abs(const float *a, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i]));
    return m;
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static double gelu_ref(double x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static double gelu_grad_ref(double x) {
    double t = tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
}

// ----------------------------------------------------------------------------
// Kernel tests

static void test_layernorm(int N, int C) {
    char name[64];
    float *x = host_normal((size_t)N * C, 2.0f, 0.5f, 1, 1);
    float *w = host_normal(C, 0.5f, 1.0f, 2, 1);
    float *b = host_normal(C, 0.3f, 0.0f, 3, 1);
    float *dy = host_normal((size_t)N * C, 1.0f, 0.0f, 4, 1);
    float *dx0 = host_normal((size_t)N * C, 0.5f, 0.0f, 5, 1);
    float *dw0 = host_normal(C, 1.0f, 0.0f, 6, 0);
    float *db0 = host_normal(C, 1.0f, 0.0f, 7, 0);
    bf16 *d_x = dev_bf16(x, (size_t)N * C), *d_w = dev_bf16(w, C), *d_b = dev_bf16(b, C);
    bf16 *d_out = dev_bf16(x, (size_t)N * C), *d_dy = dev_bf16(dy, (size_t)N * C), *d_dx = dev_bf16(dx0, (size_t)N * C);
    float *d_mean = dev_f32(NULL, N), *d_rstd = dev_f32(NULL, N);
    float *d_dw = dev_f32(dw0, C), *d_db = dev_f32(db0, C);
    float *d_scratch = dev_f32(NULL, layernorm_backward_scratch_floats(N, C));

    layernorm_forward(d_out, d_mean, d_rstd, d_x, d_w, d_b, N, C, 0);
    layernorm_backward(d_dx, d_dw, d_db, d_dy, d_x, d_mean, d_rstd, d_w, N, C, 1, d_scratch, 0);

    float *out = (float *)malloc((size_t)N * C * 4), *mean = (float *)malloc(N * 4), *rstd = (float *)malloc(N * 4);
    float *dx = (float *)malloc((size_t)N * C * 4), *dw = (float *)malloc(C * 4), *db = (float *)malloc(C * 4);
    get_bf16(out, d_out, (size_t)N * C);
    get_f32(mean, d_mean, N);
    get_f32(rstd, d_rstd, N);
    get_bf16(dx, d_dx, (size_t)N * C);
    get_f32(dw, d_dw, C);
    get_f32(db, d_db, C);

    double *r_out = (double *)calloc((size_t)N * C, 8), *r_dx = (double *)calloc((size_t)N * C, 8);
    double *r_dw = (double *)calloc(C, 8), *r_db = (double *)calloc(C, 8);
    double *r_mean = (double *)calloc(N, 8), *r_rstd = (double *)calloc(N, 8);
    for (int i = 0; i < C; i++) { r_dw[i] = dw0[i]; r_db[i] = db0[i]; }
    for (int r = 0; r < N; r++) {
        const float *xr = x + (size_t)r * C, *dyr = dy + (size_t)r * C;
        double m = 0, v = 0;
        for (int i = 0; i < C; i++) m += xr[i];
        m /= C;
        for (int i = 0; i < C; i++) v += (xr[i] - m) * (xr[i] - m);
        double s = 1.0 / sqrt(v / C + 1e-5);
        r_mean[r] = m;
        r_rstd[r] = s;
        double sg = 0, sgx = 0;
        for (int i = 0; i < C; i++) {
            double xh = (xr[i] - m) * s, g = (double)dyr[i] * w[i];
            r_out[(size_t)r * C + i] = xh * w[i] + b[i];
            sg += g;
            sgx += g * xh;
            r_dw[i] += dyr[i] * xh;
            r_db[i] += dyr[i];
        }
        for (int i = 0; i < C; i++) {
            double xh = (xr[i] - m) * s, g = (double)dyr[i] * w[i];
            r_dx[(size_t)r * C + i] = dx0[(size_t)r * C + i] + s * (g - sg / C - xh * sgx / C);
        }
    }
    double e_out = rel_l2_d(out, r_out, (size_t)N * C), e_mean = rel_l2_d(mean, r_mean, N);
    double e_rstd = rel_l2_d(rstd, r_rstd, N), e_dx = rel_l2_d(dx, r_dx, (size_t)N * C);
    double e_dw = rel_l2_d(dw, r_dw, C), e_db = rel_l2_d(db, r_db, C);
    snprintf(name, sizeof(name), "layernorm_forward N=%d C=%d", N, C);
    report(e_out < 1e-2 && e_mean < 1e-5 && e_rstd < 1e-4, name, "out %.2e mean %.2e rstd %.2e", e_out, e_mean, e_rstd);
    snprintf(name, sizeof(name), "layernorm_backward N=%d C=%d", N, C);
    report(e_dx < 1e-2 && e_dw < 1e-4 && e_db < 1e-4, name, "dx %.2e dweight %.2e dbias %.2e", e_dx, e_dw, e_db);

    void *dev[] = {d_x, d_w, d_b, d_out, d_dy, d_dx, d_mean, d_rstd, d_dw, d_db, d_scratch};
    for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++) CUDA_CHECK(cudaFree(dev[i]));
    void *host[] = {x, w, b, dy, dx0, dw0, db0, out, mean, rstd, dx, dw, db, r_out, r_dx, r_dw, r_db, r_mean, r_rstd};
    for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++) free(host[i]);
}

static void test_classifier(void) {
    const int N = 7, V = 50257, Vp = 50304;
    float *logits = host_normal((size_t)N * Vp, 3.0f, 0.0f, 10, 1);
    int targets[N];
    for (int r = 0; r < N; r++) targets[r] = (int)rng_below(11, 5, r, V);
    targets[0] = V - 1; // the last real column
    for (int r = 0; r < N; r++) logits[(size_t)r * Vp + targets[r]] = bf16_round(6.0f); // a confident row or two
    bf16 *d_logits = dev_bf16(logits, (size_t)N * Vp);
    float *d_losses = dev_f32(NULL, N);
    int *d_targets;
    CUDA_CHECK(cudaMalloc(&d_targets, sizeof(targets)));
    CUDA_CHECK(cudaMemcpy(d_targets, targets, sizeof(targets), cudaMemcpyHostToDevice));
    double *d_sum;
    CUDA_CHECK(cudaMalloc(&d_sum, sizeof(double)));
    double start = 1.25;
    CUDA_CHECK(cudaMemcpy(d_sum, &start, sizeof(double), cudaMemcpyHostToDevice));

    classifier_forward_backward(d_logits, d_losses, d_targets, N, V, Vp, 0);
    loss_accumulate(d_sum, d_losses, N, 0);

    float *dl = (float *)malloc((size_t)N * Vp * 4), losses[N];
    double sum;
    get_bf16(dl, d_logits, (size_t)N * Vp);
    get_f32(losses, d_losses, N);
    CUDA_CHECK(cudaMemcpy(&sum, d_sum, sizeof(double), cudaMemcpyDeviceToHost));

    double worst_loss = 0, worst_grad = 0, ref_sum = start;
    int pad_ok = 1;
    double *ref = (double *)malloc((size_t)Vp * 8);
    float *row = (float *)malloc((size_t)Vp * 4);
    for (int r = 0; r < N; r++) {
        const float *x = logits + (size_t)r * Vp;
        double m = -INFINITY, z = 0;
        for (int i = 0; i < V; i++) m = fmax(m, x[i]);
        for (int i = 0; i < V; i++) z += exp(x[i] - m);
        double lse = m + log(z), loss = lse - x[targets[r]];
        ref_sum += losses[r];
        worst_loss = fmax(worst_loss, fabs(losses[r] - loss) / fmax(1.0, fabs(loss)));
        for (int i = 0; i < V; i++) ref[i] = exp(x[i] - lse) - (i == targets[r]);
        for (int i = 0; i < V; i++) row[i] = dl[(size_t)r * Vp + i];
        worst_grad = fmax(worst_grad, rel_l2_d(row, ref, V));
        for (int i = V; i < Vp; i++) pad_ok &= dl[(size_t)r * Vp + i] == 0.0f;
    }
    report(worst_loss < 1e-4, "classifier loss", "max rel err %.2e", worst_loss);
    report(worst_grad < 1e-2 && pad_ok, "classifier dlogits", "max row rel L2 %.2e, padding zero %d", worst_grad, pad_ok);
    report(fabs(sum - ref_sum) < 1e-6 * fabs(ref_sum), "loss_accumulate", "got %.9g want %.9g", sum, ref_sum);
    CUDA_CHECK(cudaFree(d_logits));
    CUDA_CHECK(cudaFree(d_losses));
    CUDA_CHECK(cudaFree(d_targets));
    CUDA_CHECK(cudaFree(d_sum));
    free(logits);
    free(dl);
    free(ref);
    free(row);
}

// The host version of the stochastic rounding rule, written independently of the device one.
static uint16_t host_round_stochastic(float x, uint64_t seed, uint64_t step, uint64_t index) {
    uint32_t r = rng_u32(seed, RNG_STREAM_ROUNDING, (step << 40) | index);
    uint32_t u;
    memcpy(&u, &x, 4);
    u += r & 0xffffu;
    return (uint16_t)(u >> 16);
}

// key[i] = index of flat (llm.c order) element i when the slices of gpt2_slices() are laid
// end to end: the element numbering that keys the bf16 rounding in both trainers.
static uint64_t *slice_order_keys(const GPT2Config *c, size_t n) {
    int ns = gpt2_num_slices(c);
    GPT2Slice *sl = (GPT2Slice *)malloc((size_t)ns * sizeof(GPT2Slice));
    uint64_t *key = (uint64_t *)malloc(n * sizeof(uint64_t));
    gpt2_slices(c, sl);
    uint64_t next = 0;
    for (int k = 0; k < ns; k++)
        for (size_t j = 0; j < sl[k].numel; j++) key[sl[k].offset + j] = next++;
    free(sl);
    return key;
}

// The AdamW step, then the bf16 refresh alone, over slice table sl (ns slices within n
// elements), against adamw_element and host_round_stochastic bit for bit: slice k's element
// i is keyed by the numel of slices 0..k-1 plus i, and elements no slice covers keep their
// values. misalign = 1 shifts every base pointer by one element (the scalar path).
static void adamw_case(const char *what, const GPT2Slice *sl, int ns, size_t n, int misalign) {
    const uint64_t seed = 4242;
    const int step = 7;
    const size_t len = n + misalign;
    uint64_t *key = (uint64_t *)malloc(len * sizeof(uint64_t));   // UINT64_MAX: no slice's
    int *decay = (int *)malloc(len * sizeof(int));
    for (size_t j = 0; j < len; j++) key[j] = UINT64_MAX;
    uint64_t next = 0;
    for (int k = 0; k < ns; k++)
        for (size_t i = 0; i < sl[k].numel; i++) {
            key[misalign + sl[k].offset + i] = next++;
            decay[misalign + sl[k].offset + i] = sl[k].decay;
        }
    float *p = host_normal(len, 0.05f, 0.0f, 20, 0), *g = host_normal(len, 0.01f, 0.0f, 21, 0);
    float *m = host_normal(len, 0.001f, 0.0f, 22, 0), *v = host_normal(len, 1e-5f, 0.0f, 23, 0);
    for (size_t j = 0; j < len; j++) v[j] = v[j] * v[j];
    uint16_t *b0 = (uint16_t *)malloc(len * 2), *gb = (uint16_t *)malloc(len * 2);
    for (size_t j = 0; j < len; j++) b0[j] = (uint16_t)(rng_u32(24, 77, j) | 1);
    const float scale = 0.75f;
    AdamWParams hp = adamw_params(1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, step);
    float *d_p = dev_f32(p, len), *d_g = dev_f32(g, len), *d_m = dev_f32(m, len), *d_v = dev_f32(v, len);
    float *d_scale = dev_f32(&scale, 1);
    bf16 *d_b;
    CUDA_CHECK(cudaMalloc(&d_b, len * sizeof(bf16)));
    CUDA_CHECK(cudaMemcpy(d_b, b0, len * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());
    adamw_update_slices(d_p + misalign, d_b + misalign, d_g + misalign, d_m + misalign, d_v + misalign, sl, ns, hp,
                        d_scale, seed, step, 0);
    float *gp = (float *)malloc(len * 4), *gm = (float *)malloc(len * 4), *gv = (float *)malloc(len * 4);
    get_f32(gp, d_p, len);
    get_f32(gm, d_m, len);
    get_f32(gv, d_v, len);
    CUDA_CHECK(cudaMemcpy(gb, d_b, len * 2, cudaMemcpyDeviceToHost));

    AdamWParams h = hp;
    h.grad_scale = scale;
    size_t bad_p = 0, bad_b = 0, bad_gap = 0, covered = 0;
    for (size_t j = 0; j < len; j++) {
        if (key[j] == UINT64_MAX) {
            bad_gap += memcmp(&p[j], &gp[j], 4) != 0 || memcmp(&m[j], &gm[j], 4) != 0 ||
                       memcmp(&v[j], &gv[j], 4) != 0 || gb[j] != b0[j];
            continue;
        }
        float mj = m[j], vj = v[j];
        p[j] = adamw_element(p[j], g[j], &mj, &vj, &h, decay[j]);
        bad_p += memcmp(&p[j], &gp[j], 4) != 0 || memcmp(&mj, &gm[j], 4) != 0 || memcmp(&vj, &gv[j], 4) != 0;
        bad_b += host_round_stochastic(p[j], seed, step, key[j]) != gb[j];
        covered++;
    }
    char name[160];
    snprintf(name, sizeof(name), "adamw bit-exact (%s)", what);
    report(bad_p == 0 && bad_b == 0 && bad_gap == 0, name,
           "%d slices, %zu elements: %zu master/m/v and %zu bf16 differ from the host, %zu outside changed", ns,
           covered, bad_p, bad_b, bad_gap);

    // the refresh alone, from the updated master, with step 0's keys
    round_stochastic_slices(d_b + misalign, d_p + misalign, sl, ns, seed, 0, 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(gb, d_b, len * 2, cudaMemcpyDeviceToHost));
    bad_b = bad_gap = 0;
    for (size_t j = 0; j < len; j++) {
        if (key[j] == UINT64_MAX) bad_gap += gb[j] != b0[j];
        else bad_b += host_round_stochastic(gp[j], seed, 0, key[j]) != gb[j];
    }
    snprintf(name, sizeof(name), "stochastic rounding (%s)", what);
    report(bad_b == 0 && bad_gap == 0, name, "%zu/%zu bf16 differ from the host rule, %zu outside changed", bad_b,
           covered, bad_gap);
    CUDA_CHECK(cudaFree(d_p));
    CUDA_CHECK(cudaFree(d_g));
    CUDA_CHECK(cudaFree(d_m));
    CUDA_CHECK(cudaFree(d_v));
    CUDA_CHECK(cudaFree(d_b));
    CUDA_CHECK(cudaFree(d_scale));
    free(p); free(g); free(m); free(v); free(gp); free(gm); free(gv); free(gb); free(b0); free(key); free(decay);
}

// One slice of 10007 elements on the vector or the scalar path.
static void test_adamw(int misalign, int decay) {
    GPT2Slice sl;
    memset(&sl, 0, sizeof(sl));
    sl.numel = 10007;
    sl.decay = decay;
    char what[64];
    snprintf(what, sizeof(what), "one slice, %s path, decay %d", misalign ? "scalar" : "vector", decay);
    adamw_case(what, &sl, 1, sl.numel, misalign);

    // The rounding is unbiased: the mean of many roundings of one value approaches it.
    if (!misalign && decay) {
        const float x = 1.0f + 1.0f / 3.0f * (1.0f / 128.0f); // a third of the way between two bf16s
        double acc = 0;
        const int trials = 20000;
        for (int i = 0; i < trials; i++) acc += gpt2_bf16_to_f32(host_round_stochastic(x, 4242, 1, i));
        double bias = acc / trials - x;
        report(fabs(bias) < 2e-4, "stochastic rounding unbiased (host rule)", "mean - x = %.2e", bias);
    }
}

// A table as the model's: more slices than one launch takes (128), laid out in a shuffled
// offset order with gaps of 0-2 elements (odd offsets take the scalar path), sizes 1, 3, 5
// and past one block (1024 elements), both decay flags.
static void test_adamw_slices(void) {
    enum { NS = 300 };
    const size_t sizes[] = {1, 3, 5, 4, 8, 2, 7, 12, 1025, 16, 33, 64, 100, 2500, 1, 1024, 3, 4099, 5, 640};
    const int nsizes = (int)(sizeof(sizes) / sizeof(sizes[0]));
    GPT2Slice sl[NS];
    int order[NS];
    for (int k = 0; k < NS; k++) order[k] = k;
    for (int k = NS - 1; k > 0; k--) {
        const int j = (int)rng_below(50, 77, k, k + 1), t = order[k];
        order[k] = order[j];
        order[j] = t;
    }
    size_t n = 0;
    for (int r = 0; r < NS; r++) {
        GPT2Slice *s = &sl[order[r]];
        memset(s, 0, sizeof(*s));
        n += rng_below(51, 77, r, 3);
        s->offset = n;
        s->numel = sizes[order[r] % nsizes];
        s->decay = (int)rng_below(52, 77, order[r], 2);
        n += s->numel;
    }
    adamw_case("300 slices out of offset order", sl, NS, n + 1, 0);
}

// Device norm and clip scale against the host version (llmc/model/grad_norm.h, the order zero/
// follows), bit for bit: slices of awkward sizes, out of flat order, unaligned.
static void grad_norm_case(const char *what, const float *g, size_t n, const GPT2Slice *sl, int ns) {
    const double total = grad_norm_sumsq(g, sl, ns);
    const float want_norm = adamw_norm(total);
    float *d_g = dev_f32(g, n), *d_out = dev_f32(NULL, 2), out[2];
    void *mem;
    CUDA_CHECK(cudaMalloc(&mem, grad_norm_plan_bytes(sl, ns)));
    GradNormPlan plan;
    grad_norm_plan_init(&plan, mem, sl, ns, 0);
    const float clips[4] = {want_norm / 2, want_norm * 2, 0.0f, want_norm};
    int bad = 0;
    char first[160] = "";
    for (int c = 0; c < 4; c++) {
        grad_norm_clip(d_out, d_g, &plan, clips[c], 0);
        get_f32(out, d_out, 2);
        const float want_clip = adamw_clip_scale(want_norm, clips[c]);
        if (memcmp(&out[0], &want_norm, 4) != 0 || memcmp(&out[1], &want_clip, 4) != 0) {
            if (!bad++)
                snprintf(first, sizeof(first), "clip %.9g: norm %.9g scale %.9g, host %.9g %.9g", clips[c], out[0],
                         out[1], want_norm, want_clip);
        }
    }
    char name[128];
    snprintf(name, sizeof(name), "grad norm = host order (%s)", what);
    report(bad == 0, name, "%d slices, norm %.9g%s%s", ns, want_norm, bad ? "; " : "", first);
    CUDA_CHECK(cudaFree(mem));
    CUDA_CHECK(cudaFree(d_g));
    CUDA_CHECK(cudaFree(d_out));
}

static void test_grad_norm(void) {
    // Sizes around the block length and the warp's 32 blocks; laid out back to front so
    // the table order is not the flat order, and odd sizes leave later slices unaligned.
    const size_t sizes[] = {1, 31, 4095, 4096, 4097, 32 * 4096, 32 * 4096 + 5, 100003, 65 * 4096 - 1, 3};
    const int ns = (int)(sizeof(sizes) / sizeof(sizes[0]));
    GPT2Slice sl[sizeof(sizes) / sizeof(sizes[0])];
    size_t n = 0;
    for (int k = ns - 1; k >= 0; k--) {
        memset(&sl[k], 0, sizeof(sl[k]));
        sl[k].offset = n;
        sl[k].numel = sizes[k];
        n += sizes[k];
    }
    float *g = host_normal(n, 0.01f, 0.0f, 30, 0);
    grad_norm_case("normal", g, n, sl, ns);
    // Subnormal gradients count (a flush-to-zero conversion would give norm 0).
    for (size_t i = 0; i < n; i++) g[i] = ldexpf(1.0f + (float)(i % 7), -140);
    grad_norm_case("subnormal", g, n, sl, ns);
    for (size_t i = 0; i < n; i++) g[i] = 1e-3f * rng_normal(31, 77, i);
    g[n / 3] = INFINITY;
    grad_norm_case("an infinity", g, n, sl, ns);
    g[n / 2] = NAN;
    grad_norm_case("a NaN", g, n, sl, ns);
    free(g);
}

// bias_grad over many chunks of rows (every second pass row strides over several) and a
// row pitch wider than the columns, against a double reference.
static void test_bias_grad(int rows, int cols, int ld) {
    char name[64];
    const float alpha = 0.5f;
    float *dout = host_normal((size_t)rows * ld, 1.0f, 0.25f, 48, 1), *db0 = host_normal(cols, 1.0f, 0.0f, 49, 0);
    bf16 *d_dout = dev_bf16(dout, (size_t)rows * ld);
    float *d_db = dev_f32(db0, cols), *d_scratch = dev_f32(NULL, bias_grad_scratch_floats(rows, cols));
    bias_grad(d_db, d_dout, rows, cols, ld, alpha, d_scratch, 0);
    float *db = (float *)malloc(cols * sizeof(float));
    get_f32(db, d_db, cols);
    double *ref = (double *)calloc(cols, sizeof(double));
    for (int c = 0; c < cols; c++) {
        double t = 0;
        for (int r = 0; r < rows; r++) t += dout[(size_t)r * ld + c];
        ref[c] = db0[c] + alpha * t;
    }
    double e = rel_l2_d(db, ref, cols);
    snprintf(name, sizeof(name), "bias_grad rows=%d cols=%d ld=%d", rows, cols, ld);
    report(e < 1e-5, name, "rel L2 %.2e", e);
    CUDA_CHECK(cudaFree(d_dout));
    CUDA_CHECK(cudaFree(d_db));
    CUDA_CHECK(cudaFree(d_scratch));
    free(dout);
    free(db0);
    free(db);
    free(ref);
}

// The linear-layer helpers against double references, with fused epilogues on and off.
static void test_matmul(int fused) {
    const int R = 96, I = 64, O = 136;
    const float alpha = 0.5f;
    float *inp = host_normal((size_t)R * I, 1.0f, 0.0f, 40, 1), *w = host_normal((size_t)O * I, 0.2f, 0.0f, 41, 1);
    float *bias = host_normal(O, 0.5f, 0.0f, 42, 1), *res = host_normal((size_t)R * O, 1.0f, 0.0f, 43, 1);
    float *dout = host_normal((size_t)R * O, 1.0f, 0.0f, 44, 1), *pre_i = host_normal((size_t)R * I, 1.0f, 0.0f, 45, 1);
    float *dw0 = host_normal((size_t)O * I, 1.0f, 0.0f, 46, 0), *db0 = host_normal(O, 1.0f, 0.0f, 47, 0);
    bf16 *d_inp = dev_bf16(inp, (size_t)R * I), *d_w = dev_bf16(w, (size_t)O * I), *d_bias = dev_bf16(bias, O);
    bf16 *d_res = dev_bf16(res, (size_t)R * O), *d_dout = dev_bf16(dout, (size_t)R * O);
    bf16 *d_pre_i = dev_bf16(pre_i, (size_t)R * I);
    bf16 *d_out = dev_bf16(res, (size_t)R * O), *d_pre = dev_bf16(res, (size_t)R * O), *d_gelu = dev_bf16(res, (size_t)R * O);
    bf16 *d_dinp = dev_bf16(inp, (size_t)R * I);
    float *d_dw = dev_f32(dw0, (size_t)O * I), *d_db = dev_f32(db0, O);
    float *d_scratch = dev_f32(NULL, matmul_backward_scratch_floats(R, O));
    matmul_set_fused_epilogues(fused);

    matmul_forward(d_out, d_inp, d_w, d_bias, d_res, NULL, R, I, O, 0);
    matmul_forward(d_gelu, d_inp, d_w, d_bias, NULL, d_pre, R, I, O, 0);
    matmul_backward_input(d_dinp, d_dout, d_w, d_pre_i, alpha, R, I, O, 0);
    matmul_backward_weight(d_dw, d_db, d_dout, d_inp, 1.0f, R, I, O, d_scratch, 0);

    size_t nRO = (size_t)R * O, nRI = (size_t)R * I;
    float *out = (float *)malloc(nRO * 4), *pre = (float *)malloc(nRO * 4), *gl = (float *)malloc(nRO * 4);
    float *dinp = (float *)malloc(nRI * 4), *dw = (float *)malloc((size_t)O * I * 4), *db = (float *)malloc(O * 4);
    get_bf16(out, d_out, nRO);
    get_bf16(pre, d_pre, nRO);
    get_bf16(gl, d_gelu, nRO);
    get_bf16(dinp, d_dinp, nRI);
    get_f32(dw, d_dw, (size_t)O * I);
    get_f32(db, d_db, O);

    double *r_out = (double *)malloc(nRO * 8), *r_pre = (double *)malloc(nRO * 8), *r_gl = (double *)malloc(nRO * 8);
    double *r_dinp = (double *)malloc(nRI * 8), *r_dw = (double *)malloc((size_t)O * I * 8), *r_db = (double *)malloc(O * 8);
    for (int r = 0; r < R; r++)
        for (int o = 0; o < O; o++) {
            double acc = bias[o];
            for (int i = 0; i < I; i++) acc += (double)inp[(size_t)r * I + i] * w[(size_t)o * I + i];
            r_pre[(size_t)r * O + o] = acc;
            r_gl[(size_t)r * O + o] = gelu_ref(acc);
            r_out[(size_t)r * O + o] = acc + res[(size_t)r * O + o];
        }
    for (int r = 0; r < R; r++)
        for (int i = 0; i < I; i++) {
            double acc = 0;
            for (int o = 0; o < O; o++) acc += (double)dout[(size_t)r * O + o] * w[(size_t)o * I + i];
            r_dinp[(size_t)r * I + i] = alpha * acc * gelu_grad_ref(pre_i[(size_t)r * I + i]);
        }
    for (int o = 0; o < O; o++) {
        double sb = db0[o];
        for (int r = 0; r < R; r++) sb += dout[(size_t)r * O + o];
        r_db[o] = sb;
        for (int i = 0; i < I; i++) {
            double acc = dw0[(size_t)o * I + i];
            for (int r = 0; r < R; r++) acc += (double)dout[(size_t)r * O + o] * inp[(size_t)r * I + i];
            r_dw[(size_t)o * I + i] = acc;
        }
    }
    double e_out = rel_l2_d(out, r_out, nRO), e_pre = rel_l2_d(pre, r_pre, nRO), e_gl = rel_l2_d(gl, r_gl, nRO);
    double e_dinp = rel_l2_d(dinp, r_dinp, nRI), e_dw = rel_l2_d(dw, r_dw, (size_t)O * I), e_db = rel_l2_d(db, r_db, O);
    char name[96];
    const char *how = fused ? "fused epilogues" : "unfused";
    snprintf(name, sizeof(name), "matmul forward bias+residual (%s)", how);
    report(e_out < 1e-2, name, "rel L2 %.2e", e_out);
    snprintf(name, sizeof(name), "matmul forward GELU (%s)", how);
    report(e_pre < 1e-2 && e_gl < 1e-2, name, "pre %.2e gelu %.2e", e_pre, e_gl);
    snprintf(name, sizeof(name), "matmul backward input with dGELU (%s)", how);
    report(e_dinp < 1e-2, name, "rel L2 %.2e", e_dinp);
    snprintf(name, sizeof(name), "matmul backward weight+bias accumulate (%s)", how);
    report(e_dw < 1e-4 && e_db < 1e-4, name, "dweight %.2e dbias %.2e", e_dw, e_db);
    matmul_set_fused_epilogues(1);

    void *dev[] = {d_inp, d_w, d_bias, d_res, d_dout, d_pre_i, d_out, d_pre, d_gelu, d_dinp, d_dw, d_db, d_scratch};
    for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++) CUDA_CHECK(cudaFree(dev[i]));
    void *host[] = {inp, w, bias, res, dout, pre_i, dw0, db0, out, pre, gl, dinp, dw, db, r_out, r_pre, r_gl, r_dinp, r_dw, r_db};
    for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++) free(host[i]);
}

// gelu_forward and gelu_backward_inplace against the double references at a length that is
// not a multiple of 8 (the last, partial group goes element by element): the input holds
// exactly n elements, and the 8 elements after an output's n keep their pattern.
static void test_gelu(size_t n) {
    float *x = host_normal(n, 2.0f, 0.0f, 48, 1), *dy = host_normal(n, 1.0f, 0.0f, 49, 1);
    uint16_t *tmp = (uint16_t *)malloc((n + 8) * sizeof(uint16_t));
    bf16 *d_x, *d_y, *d_d;
    CUDA_CHECK(cudaMalloc(&d_x, n * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&d_y, (n + 8) * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&d_d, (n + 8) * sizeof(bf16)));
    CUDA_CHECK(cudaMemset(d_y, 0xff, (n + 8) * sizeof(bf16)));
    CUDA_CHECK(cudaMemset(d_d, 0xff, (n + 8) * sizeof(bf16)));
    for (size_t i = 0; i < n; i++) tmp[i] = gpt2_f32_to_bf16(x[i]);
    CUDA_CHECK(cudaMemcpy(d_x, tmp, n * sizeof(bf16), cudaMemcpyHostToDevice));
    for (size_t i = 0; i < n; i++) tmp[i] = gpt2_f32_to_bf16(dy[i]);
    CUDA_CHECK(cudaMemcpy(d_d, tmp, n * sizeof(bf16), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());   // as in dev_bf16
    gelu_forward(d_y, d_x, n, 0);
    gelu_backward_inplace(d_d, d_x, n, 0);
    const char *names[2] = {"gelu_forward", "gelu_backward_inplace"};
    bf16 *outs[2] = {d_y, d_d};
    for (int k = 0; k < 2; k++) {
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(tmp, outs[k], (n + 8) * sizeof(bf16), cudaMemcpyDeviceToHost));
        double worst = 0;
        size_t bad = 0, guard = 0;
        for (size_t i = 0; i < n; i++) {
            double want = k == 0 ? gelu_ref(x[i]) : dy[i] * gelu_grad_ref(x[i]);
            double err = fabs(gpt2_bf16_to_f32(tmp[i]) - want) / (fabs(want) + 1e-3);
            worst = fmax(worst, err);
            if (!(err < 1e-2)) bad++;
        }
        for (size_t i = n; i < n + 8; i++) guard += tmp[i] != 0xffff;
        char name[96];
        snprintf(name, sizeof(name), "%s (n = %zu)", names[k], n);
        report(bad == 0 && guard == 0, name, "max rel err %.2e, %zu values off, %zu written past n", worst, bad, guard);
    }
    CUDA_CHECK(cudaFree(d_x));
    CUDA_CHECK(cudaFree(d_y));
    CUDA_CHECK(cudaFree(d_d));
    free(x);
    free(dy);
    free(tmp);
}

static void test_encoder(void) {
    const int B = 3, T = 17, C = 64, V = 100;
    const int n = B * T;
    float *wte = host_normal((size_t)V * C, 0.1f, 0.0f, 50, 1), *wpe = host_normal((size_t)T * C, 0.1f, 0.0f, 51, 1);
    float *dout = host_normal((size_t)n * C, 1.0f, 0.0f, 52, 1);
    float *dwte0 = host_normal((size_t)V * C, 1.0f, 0.0f, 53, 0), *dwpe0 = host_normal((size_t)T * C, 1.0f, 0.0f, 54, 0);
    int tokens[n];
    for (int i = 0; i < n; i++) tokens[i] = (int)rng_below(55, 1, i, 9) * 11; // few distinct ids, many repeats
    int uniq[n], starts[n + 1], pos[n], counts[V];
    int nu = encoder_buckets_build(uniq, starts, pos, tokens, n, V, counts);
    int *d_tok, *d_uniq, *d_starts, *d_pos;
    CUDA_CHECK(cudaMalloc(&d_tok, sizeof(tokens)));
    CUDA_CHECK(cudaMalloc(&d_uniq, sizeof(uniq)));
    CUDA_CHECK(cudaMalloc(&d_starts, sizeof(starts)));
    CUDA_CHECK(cudaMalloc(&d_pos, sizeof(pos)));
    CUDA_CHECK(cudaMemcpy(d_tok, tokens, sizeof(tokens), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_uniq, uniq, sizeof(uniq), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_starts, starts, sizeof(starts), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_pos, pos, sizeof(pos), cudaMemcpyHostToDevice));
    bf16 *d_wte = dev_bf16(wte, (size_t)V * C), *d_wpe = dev_bf16(wpe, (size_t)T * C), *d_dout = dev_bf16(dout, (size_t)n * C);
    bf16 *d_out = dev_bf16(dout, (size_t)n * C);
    float *d_dwte = dev_f32(dwte0, (size_t)V * C), *d_dwpe = dev_f32(dwpe0, (size_t)T * C);
    encoder_forward(d_out, d_tok, d_wte, d_wpe, B, T, C, 0);
    EncoderBuckets bk = {nu, d_uniq, d_starts, d_pos};
    encoder_backward(d_dwte, d_dwpe, d_dout, &bk, B, T, C, 0);
    float *out = (float *)malloc((size_t)n * C * 4), *dwte = (float *)malloc((size_t)V * C * 4);
    float *dwpe = (float *)malloc((size_t)T * C * 4);
    get_bf16(out, d_out, (size_t)n * C);
    get_f32(dwte, d_dwte, (size_t)V * C);
    get_f32(dwpe, d_dwpe, (size_t)T * C);
    size_t bad = 0;
    double *r_dwte = (double *)malloc((size_t)V * C * 8), *r_dwpe = (double *)malloc((size_t)T * C * 8);
    for (size_t i = 0; i < (size_t)V * C; i++) r_dwte[i] = dwte0[i];
    for (size_t i = 0; i < (size_t)T * C; i++) r_dwpe[i] = dwpe0[i];
    for (int i = 0; i < n; i++)
        for (int c = 0; c < C; c++) {
            float want = bf16_round(wte[(size_t)tokens[i] * C + c] + wpe[(size_t)(i % T) * C + c]);
            if (out[(size_t)i * C + c] != want) bad++;
            r_dwte[(size_t)tokens[i] * C + c] += dout[(size_t)i * C + c];
            r_dwpe[(size_t)(i % T) * C + c] += dout[(size_t)i * C + c];
        }
    double e_wte = rel_l2_d(dwte, r_dwte, (size_t)V * C), e_wpe = rel_l2_d(dwpe, r_dwpe, (size_t)T * C);
    report(bad == 0, "encoder_forward", "%zu values differ", bad);
    report(e_wte < 1e-6 && e_wpe < 1e-6, "encoder_backward", "dwte %.2e dwpe %.2e (%d distinct tokens)", e_wte, e_wpe, nu);
    void *dev[] = {d_tok, d_uniq, d_starts, d_pos, d_wte, d_wpe, d_dout, d_out, d_dwte, d_dwpe};
    for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++) CUDA_CHECK(cudaFree(dev[i]));
    void *host[] = {wte, wpe, dout, dwte0, dwpe0, out, dwte, dwpe, r_dwte, r_dwpe};
    for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++) free(host[i]);
}

// Causal attention in double: out, and dqkv for a given dout.
static void attention_ref(double *out, double *dqkv, const float *qkv, const float *dout, int B, int T, int NH, int HS) {
    const int C = NH * HS;
    const double scale = 1.0 / sqrt((double)HS);
    double *p = (double *)malloc((size_t)T * 8), *dp = (double *)malloc((size_t)T * 8);
    for (size_t i = 0; i < (size_t)B * T * 3 * C; i++) dqkv[i] = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                const float *q = qkv + ((size_t)b * T + i) * 3 * C + h * HS;
                double m = -INFINITY, z = 0;
                for (int j = 0; j <= i; j++) {
                    const float *k = qkv + ((size_t)b * T + j) * 3 * C + C + h * HS;
                    double s = 0;
                    for (int d = 0; d < HS; d++) s += (double)q[d] * k[d];
                    p[j] = s * scale;
                    m = fmax(m, p[j]);
                }
                for (int j = 0; j <= i; j++) { p[j] = exp(p[j] - m); z += p[j]; }
                for (int j = 0; j <= i; j++) p[j] /= z;
                double *o = out + ((size_t)b * T + i) * C + h * HS;
                const float *dy = dout + ((size_t)b * T + i) * C + h * HS;
                for (int d = 0; d < HS; d++) o[d] = 0;
                double dot = 0;
                for (int j = 0; j <= i; j++) {
                    const float *v = qkv + ((size_t)b * T + j) * 3 * C + 2 * C + h * HS;
                    double *dv = dqkv + ((size_t)b * T + j) * 3 * C + 2 * C + h * HS;
                    dp[j] = 0;
                    for (int d = 0; d < HS; d++) {
                        o[d] += p[j] * v[d];
                        dv[d] += p[j] * dy[d];
                        dp[j] += (double)dy[d] * v[d];
                    }
                    dot += p[j] * dp[j];
                }
                double *dq = dqkv + ((size_t)b * T + i) * 3 * C + h * HS;
                for (int j = 0; j <= i; j++) {
                    double ds = p[j] * (dp[j] - dot) * scale;
                    const float *k = qkv + ((size_t)b * T + j) * 3 * C + C + h * HS;
                    double *dk = dqkv + ((size_t)b * T + j) * 3 * C + C + h * HS;
                    for (int d = 0; d < HS; d++) {
                        dq[d] += ds * k[d];
                        dk[d] += ds * q[d];
                    }
                }
            }
    free(p);
    free(dp);
}

static void test_attention(int use_cudnn, int B, int T, int NH, int HS) {
    const int C = NH * HS;
    const size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C;
    char name[96];
    snprintf(name, sizeof(name), "attention %s B=%d T=%d NH=%d HS=%d", gpt2_cuda_attention_name(use_cudnn), B, T, NH, HS);
    const int atomic = use_cudnn == GPT2_CUDNN_ATOMIC;
    size_t ws = 0;
    if (use_cudnn && !attention_cudnn_backward_ok(cudnnGetVersion())) {
        // a runtime with a known bad backward must be refused, so the model falls back
        report(!attention_cudnn_prepare(B, T, NH, HS, atomic, &ws), name, "cuDNN %zu refused by attention_cudnn_prepare",
               (size_t)cudnnGetVersion());
        return;
    }
    if (use_cudnn) {
        const int built = attention_cudnn_prepare(B, T, NH, HS, atomic, &ws);
        if (!built) {
            report(0, name, "cuDNN attention_cudnn_prepare declined this shape");
            return;
        }
        if (built != use_cudnn) report(0, name, "prepare built backward %d, asked for %d", built, use_cudnn);
    }
    float *qkv = host_normal(nqkv, 1.0f, 0.0f, 60, 1), *dout = host_normal(nout, 1.0f, 0.0f, 61, 1);
    bf16 *d_qkv = dev_bf16(qkv, nqkv), *d_dout = dev_bf16(dout, nout), *d_out = dev_bf16(dout, nout);
    bf16 *d_dqkv = dev_bf16(qkv, nqkv);
    float *d_scores = NULL, *d_stats = NULL;
    bf16 *d_probs = NULL;
    void *d_ws = NULL;
    if (use_cudnn) {
        d_stats = dev_f32(NULL, (size_t)B * NH * T);
        if (ws) CUDA_CHECK(cudaMalloc(&d_ws, ws));
        attention_cudnn_forward(d_out, d_stats, d_qkv, B, T, NH, HS, atomic, d_ws, 0);
        attention_cudnn_backward(d_dqkv, d_dout, d_qkv, d_out, d_stats, B, T, NH, HS, atomic, d_ws, 0);
    } else {
        d_scores = dev_f32(NULL, (size_t)B * NH * T * T);
        CUDA_CHECK(cudaMalloc(&d_probs, (size_t)B * NH * T * T * sizeof(bf16)));
        attention_fallback_forward(d_out, d_scores, d_probs, d_qkv, B, T, NH, HS, 0);
        attention_fallback_backward(d_dqkv, d_scores, d_probs, d_dout, d_qkv, B, T, NH, HS, 0);
    }
    float *out = (float *)malloc(nout * 4), *dqkv = (float *)malloc(nqkv * 4);
    get_bf16(out, d_out, nout);
    get_bf16(dqkv, d_dqkv, nqkv);
    double *r_out = (double *)malloc(nout * 8), *r_dqkv = (double *)malloc(nqkv * 8);
    attention_ref(r_out, r_dqkv, qkv, dout, B, T, NH, HS);
    double e_out = rel_l2_d(out, r_out, nout), e_d = rel_l2_d(dqkv, r_dqkv, nqkv);
    report(e_out < 2e-2 && e_d < 3e-2, name, "out %.2e dqkv %.2e", e_out, e_d);
    void *dev[] = {d_qkv, d_dout, d_out, d_dqkv, d_scores, d_stats, d_probs, d_ws};
    for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
        if (dev[i]) CUDA_CHECK(cudaFree(dev[i]));
    free(qkv); free(dout); free(out); free(dqkv); free(r_out); free(r_dqkv);
}

// ----------------------------------------------------------------------------
// The model against the CPU reference

#define STEPS 6   // AdamW steps t = 1..6: the bias corrections and the rounding keys move every step
#define LR 1e-3f
#define BETA1 0.9f
#define BETA2 0.95f
#define EPS 1e-8f
#define WD 0.1f
#define CLIP 1.0f

typedef struct {
    GPT2Config config;
    int B, T;
    size_t n;                        // parameters
    size_t sizes[GPT2_NUM_PARAM_TENSORS], offsets[GPT2_NUM_PARAM_TENSORS];
    float *params;                   // initial parameters, fed to both models
    int *inputs[STEPS], *targets[STEPS];
    // CPU results
    float *logits;                   // forward of batch 0 without targets (B, T, Vp)
    float loss;                      // forward of batch 0 with targets
    float *grads;                    // its gradients, loss scale 1/(B*T)
    float step_loss[STEPS], step_norm[STEPS];
    float *final_params;             // after STEPS AdamW steps
} Reference;

static void reference_build(Reference *r) {
    char err[128];
    if (gpt2_config_from_descriptor("d2c128h2t128", &r->config, err, sizeof(err)) != 0) {
        fprintf(stderr, "config: %s\n", err);
        exit(1);
    }
    r->B = 4;
    r->T = 128; // cuDNN runtimes before 9.15.1 need T % 128 == 0; head size 64 as in GPT-2
    r->n = gpt2_param_sizes(&r->config, r->sizes);
    gpt2_param_offsets(&r->config, r->offsets);
    r->params = (float *)malloc(r->n * sizeof(float));
    gpt2_init_params(&r->config, r->params, 1337);
    const int BT = r->B * r->T, V = r->config.vocab_size;
    for (int s = 0; s < STEPS; s++) {
        r->inputs[s] = (int *)malloc(BT * sizeof(int));
        r->targets[s] = (int *)malloc(BT * sizeof(int));
        for (int i = 0; i < BT; i++) {
            // Mostly a small set of ids (repeats exercise the embedding scatter), some anywhere.
            uint64_t u = rng_below(99, s, i, 4);
            r->inputs[s][i] = u ? (int)rng_below(98, s, i, 300) : (int)rng_below(97, s, i, V);
            r->targets[s][i] = (int)rng_below(96, s, i, V);
        }
        r->inputs[s][BT - 1] = GPT2_EOT;
    }

    GPT2 cpu;
    gpt2_cpu_build(&cpu, &r->config, 1337);
    memcpy(cpu.params, r->params, r->n * sizeof(float));
    const size_t nl = (size_t)BT * r->config.padded_vocab_size;
    gpt2_cpu_forward(&cpu, r->inputs[0], NULL, r->B, r->T);
    r->logits = (float *)malloc(nl * sizeof(float));
    memcpy(r->logits, gpt2_cpu_logits(&cpu), nl * sizeof(float));
    gpt2_cpu_zero_grad(&cpu);
    gpt2_cpu_forward(&cpu, r->inputs[0], r->targets[0], r->B, r->T);
    r->loss = cpu.mean_loss;
    gpt2_cpu_backward(&cpu, 1.0f / BT);
    r->grads = (float *)malloc(r->n * sizeof(float));
    memcpy(r->grads, cpu.grads, r->n * sizeof(float));
    for (int s = 0; s < STEPS; s++) {
        gpt2_cpu_zero_grad(&cpu);
        gpt2_cpu_forward(&cpu, r->inputs[s], r->targets[s], r->B, r->T);
        r->step_loss[s] = cpu.mean_loss;
        gpt2_cpu_backward(&cpu, 1.0f / BT);
        float norm = gpt2_cpu_grad_norm(&cpu);
        r->step_norm[s] = norm;
        float scale = norm > CLIP ? CLIP / norm : 1.0f;
        gpt2_cpu_update(&cpu, LR, BETA1, BETA2, EPS, WD, scale, s + 1);
    }
    r->final_params = (float *)malloc(r->n * sizeof(float));
    memcpy(r->final_params, cpu.params, r->n * sizeof(float));
    gpt2_cpu_free(&cpu);
    printf("CPU reference: loss %.5f, %d steps to loss %.5f\n", r->loss, STEPS, r->step_loss[STEPS - 1]);
}

static void compare_grads(const Reference *r, const float *grads, const char *tag, double tol) {
    for (int t = 0; t < GPT2_NUM_PARAM_TENSORS; t++) {
        char name[96];
        snprintf(name, sizeof(name), "%s grad %s", tag, gpt2_param_name(t));
        double e = rel_l2(grads + r->offsets[t], r->grads + r->offsets[t], r->sizes[t]);
        report(e < tol, name, "rel L2 %.2e, |ref| max %.2e", e, max_abs(r->grads + r->offsets[t], r->sizes[t]));
    }
}

// Hooks that log the call sequence.
typedef struct {
    int calls[512][3]; // kind (0 fetch, 1 release, 2 grads_ready), unit, is_backward
    int n;
} HookLog;
static void log_call(HookLog *h, int kind, int unit, int bwd) {
    if (h->n < 512) { h->calls[h->n][0] = kind; h->calls[h->n][1] = unit; h->calls[h->n][2] = bwd; }
    h->n++;
}
static void hook_fetch(void *ctx, int unit, int bwd) { log_call((HookLog *)ctx, 0, unit, bwd); }
static void hook_release(void *ctx, int unit, int bwd) { log_call((HookLog *)ctx, 1, unit, bwd); }
static void hook_ready(void *ctx, int unit) { log_call((HookLog *)ctx, 2, unit, 1); }

// The documented sequence over U units without recompute windows: fetch/release each unit
// forward in order, then fetch, grads_ready, release each backward in reverse.
static int hooks_in_order_units(const HookLog *h, int U) {
    int want[512][3], n = 0;
    if (5 * U > 512) return 0;
    for (int u = 0; u < U; u++) {
        want[n][0] = 0; want[n][1] = u; want[n++][2] = 0;
        want[n][0] = 1; want[n][1] = u; want[n++][2] = 0;
    }
    for (int u = U - 1; u >= 0; u--) {
        want[n][0] = 0; want[n][1] = u; want[n++][2] = 1;
        want[n][0] = 2; want[n][1] = u; want[n++][2] = 1;
        want[n][0] = 1; want[n][1] = u; want[n++][2] = 1;
    }
    if (h->n != n) return 0;
    for (int i = 0; i < n; i++)
        if (memcmp(h->calls[i], want[i], sizeof(want[i])) != 0) return 0;
    return 1;
}
static int hooks_in_order(const HookLog *h, int L) { return hooks_in_order_units(h, L + 3); }

// extra: also compare the unfused matmul paths. bitwise: two identical backward passes
// must give identical bits (cuDNN's atomic-dQ backward variant is only close).
static void test_model(const Reference *r, int use_cudnn, int recompute, int extra, int bitwise) {
    char tag[64];
    snprintf(tag, sizeof(tag), "model[%s rc%d]",
             use_cudnn == GPT2_CUDNN_ATOMIC ? "cudnn atomic" : use_cudnn ? "cudnn" : "fallback", recompute);
    char name[128];
    const int B = r->B, T = r->T, BT = B * T, V = r->config.vocab_size, Vp = r->config.padded_vocab_size;
    GPT2CudaOptions opt;
    memset(&opt, 0, sizeof(opt)); // external_params and any later field: off
    opt.recompute = recompute;
    opt.use_cudnn = use_cudnn;
    opt.seed = 777;
    GPT2Cuda m;
    gpt2_cuda_build(&m, &r->config, r->params, B, T, &opt);
    if (use_cudnn && !m.use_cudnn && attention_cudnn_backward_ok(cudnnGetVersion())) {
        snprintf(name, sizeof(name), "%s cuDNN attention available", tag);
        report(0, name, "attention_cudnn_prepare declined B=%d T=%d; ran the fallback instead", B, T);
    }
    if (m.use_cudnn && m.use_cudnn != use_cudnn) {
        snprintf(name, sizeof(name), "%s attention path", tag);
        report(0, name, "the model runs --cudnn %d, built with %d", m.use_cudnn, use_cudnn);
    }

    // The initial bf16 copy is the stochastic rounding of step 0 (as zero/'s refresh at init).
    {
        float *w0 = (float *)malloc(r->n * sizeof(float));
        uint64_t *key = slice_order_keys(&r->config, r->n);
        gpt2_cuda_get_params_bf16(&m, w0);
        size_t bad0 = 0;
        for (size_t i = 0; i < r->n; i++) {
            float want = gpt2_bf16_to_f32(host_round_stochastic(r->params[i], opt.seed, 0, key[i]));
            if (memcmp(&want, &w0[i], 4) != 0) bad0++;
        }
        snprintf(name, sizeof(name), "%s initial bf16 params = stochastic rounding of step 0", tag);
        report(bad0 == 0, name, "%zu/%zu differ", bad0, r->n);
        free(key);
        free(w0);
    }

    // Logits: forward without targets.
    gpt2_cuda_forward(&m, r->inputs[0], NULL, B, T);
    const size_t nl = (size_t)BT * Vp;
    float *logits = (float *)malloc(nl * sizeof(float));
    get_bf16(logits, m.acts.logits, nl);
    double e_l = rel_l2(logits, r->logits, nl);
    double e_max = max_abs_diff(logits, r->logits, nl) / max_abs(r->logits, nl);
    snprintf(name, sizeof(name), "%s logits", tag);
    report(e_l < 2e-2 && e_max < 5e-2, name, "rel L2 %.2e, max abs diff / max %.2e", e_l, e_max);
    const float *row = gpt2_cuda_logits_row(&m, B - 1, T - 1);
    snprintf(name, sizeof(name), "%s logits_row", tag);
    report(memcmp(row, logits + (size_t)(BT - 1) * Vp, V * sizeof(float)) == 0, name, "row (%d, %d)", B - 1, T - 1);

    // A smaller batch on the same model: sequences are independent, so the first half of
    // batch 0 must give the first half of the logits.
    gpt2_cuda_forward(&m, r->inputs[0], NULL, B / 2, T);
    get_bf16(logits, m.acts.logits, nl / 2);
    double e_half = rel_l2(logits, r->logits, nl / 2);
    snprintf(name, sizeof(name), "%s logits at B=%d on a B=%d model", tag, B / 2, B);
    report(e_half < 2e-2, name, "rel L2 %.2e", e_half);

    // Loss and gradients of batch 0.
    HookLog *hooks = (HookLog *)calloc(1, sizeof(HookLog));
    m.hooks.ctx = hooks;
    m.hooks.fetch = hook_fetch;
    m.hooks.release = hook_release;
    m.hooks.grads_ready = hook_ready;
    gpt2_cuda_zero_grad(&m);
    gpt2_cuda_forward(&m, r->inputs[0], r->targets[0], B, T);
    gpt2_cuda_backward(&m, 1.0f / BT);
    memset(&m.hooks, 0, sizeof(m.hooks));
    float loss, norm;
    gpt2_cuda_step_stats(&m, &loss, &norm);
    snprintf(name, sizeof(name), "%s hooks order", tag);
    report(hooks_in_order(hooks, r->config.num_layers), name, "%d calls", hooks->n);
    free(hooks);
    snprintf(name, sizeof(name), "%s loss", tag);
    report(fabsf(loss - r->loss) < 5e-3f * r->loss, name, "%.6f vs CPU %.6f", loss, r->loss);
    float *grads = (float *)malloc(r->n * sizeof(float)), *again = (float *)malloc(r->n * sizeof(float));
    gpt2_cuda_get_grads(&m, grads);
    compare_grads(r, grads, tag, 3e-2);
    {
        // The norm and clip scale the update uses: the host order on the same gradients
        // (zero/'s order on the same slice table), bit for bit, with a clip that bites.
        const float want = adamw_norm(grad_norm_sumsq(grads, m.slices, m.num_slices)), clip = want / 2;
        const float want_clip = adamw_clip_scale(want, clip);
        float got[2];
        gpt2_cuda_grad_norm(&m, clip);
        CUDA_CHECK(cudaStreamSynchronize(m.stream));
        CUDA_CHECK(cudaMemcpy(got, m.norm_clip, sizeof(got), cudaMemcpyDeviceToHost));
        snprintf(name, sizeof(name), "%s grad norm and clip = host order", tag);
        report(memcmp(&got[0], &want, 4) == 0 && memcmp(&got[1], &want_clip, 4) == 0, name,
               "norm %.9g scale %.9g, host %.9g %.9g", got[0], got[1], want, want_clip);
    }

    // Same inputs, same bits.
    gpt2_cuda_zero_grad(&m);
    gpt2_cuda_forward(&m, r->inputs[0], r->targets[0], B, T);
    gpt2_cuda_backward(&m, 1.0f / BT);
    gpt2_cuda_get_grads(&m, again);
    int same = memcmp(grads, again, r->n * sizeof(float)) == 0;
    double e_rep = rel_l2(again, grads, r->n);
    snprintf(name, sizeof(name), "%s %s backward", tag, bitwise ? "bitwise reproducible" : "reproducible");
    report(same || (!bitwise && e_rep < 1e-3), name, "two identical passes: %s, rel L2 %.2e",
           same ? "identical bits" : "bits differ", e_rep);

    // Gradient accumulation: two micro-steps at half scale equal one at full scale.
    gpt2_cuda_zero_grad(&m);
    for (int k = 0; k < 2; k++) {
        gpt2_cuda_forward(&m, r->inputs[0], r->targets[0], B, T);
        gpt2_cuda_backward(&m, 0.5f / BT);
    }
    gpt2_cuda_get_grads(&m, again);
    gpt2_cuda_step_stats(&m, &loss, &norm);
    double e_acc = rel_l2(again, grads, r->n);
    snprintf(name, sizeof(name), "%s gradient accumulation", tag);
    report(e_acc < (bitwise ? 1e-5 : 1e-3) && fabsf(loss - r->loss) < 5e-3f * r->loss, name,
           "2 x half vs 1 x full rel L2 %.2e, mean loss %.6f", e_acc, loss);

    if (extra) {
        // The unfused matmul paths give the same gradients up to rounding.
        m.matmul_fused = 0;
        gpt2_cuda_zero_grad(&m);
        gpt2_cuda_forward(&m, r->inputs[0], r->targets[0], B, T);
        gpt2_cuda_backward(&m, 1.0f / BT);
        gpt2_cuda_get_grads(&m, again);
        m.matmul_fused = 1;
        double e = rel_l2(again, grads, r->n);
        snprintf(name, sizeof(name), "%s unfused epilogues vs fused", tag);
        report(e < 1e-2, name, "all gradients rel L2 %.2e", e);
    }

    // Training: STEPS AdamW steps from the initial parameters, on the same batches as the CPU.
    gpt2_cuda_set_state(&m, r->params, NULL, NULL);
    double worst_loss = 0, worst_norm = 0;
    for (int s = 0; s < STEPS; s++) {
        gpt2_cuda_zero_grad(&m);
        gpt2_cuda_forward(&m, r->inputs[s], r->targets[s], B, T);
        gpt2_cuda_backward(&m, 1.0f / BT);
        gpt2_cuda_update(&m, LR, BETA1, BETA2, EPS, WD, CLIP, s + 1);
        gpt2_cuda_step_stats(&m, &loss, &norm);
        double el = fabs(loss - r->step_loss[s]), en = fabs(norm - r->step_norm[s]) / r->step_norm[s];
        worst_loss = fmax(worst_loss, el);
        worst_norm = fmax(worst_norm, en);
        printf("  %s step %d: loss %.5f (CPU %.5f) grad norm %.5f (CPU %.5f)\n", tag, s + 1, loss, r->step_loss[s],
               norm, r->step_norm[s]);
    }
    snprintf(name, sizeof(name), "%s training losses", tag);
    report(worst_loss < 2e-2, name, "max |loss - CPU| over %d steps %.2e", STEPS, worst_loss);
    snprintf(name, sizeof(name), "%s training grad norms", tag);
    report(worst_norm < 5e-2, name, "max rel diff %.2e", worst_norm);

    float *master = (float *)malloc(r->n * sizeof(float)), *work = (float *)malloc(r->n * sizeof(float));
    gpt2_cuda_get_master(&m, master);
    for (int t = 0; t < GPT2_NUM_PARAM_TENSORS; t++) {
        const size_t off = r->offsets[t];
        double num = 0, den = 0, dp = 0, pp = 0;
        const int layers = gpt2_param_is_per_layer(t) ? r->config.num_layers : 1;
        const size_t per = r->sizes[t] / layers;
        for (size_t i = 0; i < r->sizes[t]; i++) {
            // The K third of qkvb has a zero gradient in exact arithmetic (a constant added
            // to all of a row's scores); AdamW turns either side's rounding noise into
            // full-size steps of random sign, so it is left out.
            if (t == GPT2_QKVB) {
                size_t j = i % per, C = r->config.channels;
                if (j >= C && j < 2 * C) continue;
            }
            double g = master[off + i], c = r->final_params[off + i], p0 = r->params[off + i];
            num += (g - c) * (g - c);
            den += (c - p0) * (c - p0);
            dp += (g - c) * (g - c);
            pp += c * c;
        }
        double e_upd = den > 0 ? sqrt(num / den) : sqrt(num);
        double e_par = pp > 0 ? sqrt(dp / pp) : sqrt(dp);
        // Elements whose gradient is near zero get AdamW steps of either sign on either side,
        // so the update error is bounded loosely; a wrong tensor, mask or scale gives >= 1.
        snprintf(name, sizeof(name), "%s params after %d steps %s", tag, STEPS, gpt2_param_name(t));
        report(e_upd < 0.2, name, "updates rel L2 %.2e, params rel L2 %.2e", e_upd, e_par);
    }

    // The bf16 copy is exactly the stochastic rounding of the master at the last step, each
    // element keyed by its index in slice order (how zero/ numbers the same element).
    gpt2_cuda_get_params_bf16(&m, work);
    uint64_t *key = slice_order_keys(&r->config, r->n);
    size_t bad = 0;
    for (size_t i = 0; i < r->n; i++) {
        float want = gpt2_bf16_to_f32(host_round_stochastic(master[i], opt.seed, STEPS, key[i]));
        if (memcmp(&want, &work[i], 4) != 0) bad++;
    }
    free(key);
    snprintf(name, sizeof(name), "%s bf16 params = stochastic rounding of master", tag);
    report(bad == 0, name, "%zu/%zu differ", bad, r->n);

    // Resume: restoring master and moments at step STEPS gives back the same bf16 copy, and
    // one more step from there equals one more step of the uninterrupted model.
    float *mm = (float *)malloc(r->n * sizeof(float)), *vv = (float *)malloc(r->n * sizeof(float));
    float *cont = (float *)malloc(r->n * sizeof(float)), *resumed = (float *)malloc(r->n * sizeof(float));
    gpt2_cuda_get_opt_state(&m, mm, vv);
    gpt2_cuda_zero_grad(&m);
    gpt2_cuda_forward(&m, r->inputs[0], r->targets[0], B, T);
    gpt2_cuda_backward(&m, 1.0f / BT);
    gpt2_cuda_update(&m, LR, BETA1, BETA2, EPS, WD, CLIP, STEPS + 1);
    gpt2_cuda_get_master(&m, cont);
    gpt2_cuda_set_state_at(&m, master, mm, vv, STEPS);
    float *restored = (float *)malloc(r->n * sizeof(float));
    gpt2_cuda_get_params_bf16(&m, restored);
    int same_bf16 = memcmp(restored, work, r->n * sizeof(float)) == 0;
    gpt2_cuda_zero_grad(&m);
    gpt2_cuda_forward(&m, r->inputs[0], r->targets[0], B, T);
    gpt2_cuda_backward(&m, 1.0f / BT);
    gpt2_cuda_update(&m, LR, BETA1, BETA2, EPS, WD, CLIP, STEPS + 1);
    gpt2_cuda_get_master(&m, resumed);
    int same_step = memcmp(resumed, cont, r->n * sizeof(float)) == 0;
    snprintf(name, sizeof(name), "%s resume with set_state_at", tag);
    report(same_bf16 && (same_step || !bitwise), name, "bf16 copy %s, next step %s", same_bf16 ? "identical" : "differs",
           same_step ? "identical" : "differs");

    // The trainer's checkpoint after a skipped step (-sl/-sg, --nan-skip): saved at step
    // STEPS + 1 whose update was not applied, it must load the bf16 copy of step STEPS (the
    // last applied one), not a rounding keyed by the saved step.
    char dir[] = "/tmp/test_gpt2_zero_ckpt.XXXXXX";
    if (mkdtemp(dir) == NULL) { perror("mkdtemp"); exit(1); }
    gpt2_cuda_set_state_at(&m, master, mm, vv, STEPS);
    TrainState st;
    memset(&st, 0, sizeof(st));
    st.step = STEPS + 1;
    st.last_t = STEPS;
    st.config = r->config;
    st.B = B, st.T = T, st.world = 1, st.tokens_per_step = BT;
    gpt2_cuda_checkpoint_save(&m, dir, &st, 0, 0);
    gpt2_cuda_set_state_at(&m, master, mm, vv, STEPS + 1);   // another rounding, which the load must replace
    TrainState loaded;
    gpt2_cuda_checkpoint_load(&m, dir, STEPS + 1, &loaded);
    gpt2_cuda_get_params_bf16(&m, restored);
    same_bf16 = memcmp(restored, work, r->n * sizeof(float)) == 0;
    snprintf(name, sizeof(name), "%s resume from a checkpoint after a skipped step", tag);
    report(same_bf16 && loaded.last_t == STEPS, name, "saved at step %d, last update %d: bf16 copy %s", STEPS + 1,
           loaded.last_t, same_bf16 ? "of the last update" : "differs from the last update's");
    const char *written[] = {"ckpt_%08d.bin", "model_%08d.bin", "latest"};
    for (int i = 0; i < 3; i++) {
        char file[64], path[128];
        snprintf(file, sizeof(file), written[i], STEPS + 1);
        snprintf(path, sizeof(path), "%s/%s", dir, file);
        if (unlink(path) != 0) fprintf(stderr, "warning: could not remove %s\n", path);
    }
    if (rmdir(dir) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
    free(mm);
    free(vv);
    free(cont);
    free(resumed);
    free(restored);

    gpt2_cuda_free(&m);
    free(logits);
    free(grads);
    free(again);
    free(master);
    free(work);
}

// Activation checkpointing reruns each block's forward with the same kernels on the same
// block input (kept, or offloaded to pinned host memory and copied back), so with
// deterministic attention the loss and every gradient are bit-identical to the run
// without; two micro-steps, so that the offload's events and slots are reused. Hooks keep
// the untiled order (the recompute runs inside the block's backward window).
static void test_act_checkpoint(const Reference *r, int use_cudnn, int recompute) {
    const int B = r->B, T = r->T, BT = B * T;
    float *want = (float *)malloc(r->n * sizeof(float)), *got = (float *)malloc(r->n * sizeof(float));
    float want_loss = 0.0f;
    for (int mode = 0; mode < 3; mode++) {   // none, checkpoint, checkpoint + offload
        GPT2CudaOptions opt;
        memset(&opt, 0, sizeof(opt));
        opt.recompute = recompute;
        opt.use_cudnn = use_cudnn;
        opt.seed = 777;
        opt.act_checkpoint = mode >= 1;
        opt.act_offload = mode == 2;
        GPT2Cuda m;
        gpt2_cuda_build(&m, &r->config, r->params, B, T, &opt);
        HookLog *hooks = (HookLog *)calloc(1, sizeof(HookLog));
        gpt2_cuda_zero_grad(&m);
        for (int micro = 0; micro < 2; micro++) {
            if (micro == 1) m.hooks = GPT2Hooks{hooks, hook_fetch, hook_release, hook_ready};
            gpt2_cuda_forward(&m, r->inputs[micro], r->targets[micro], B, T);
            gpt2_cuda_backward(&m, 1.0f / BT);
        }
        memset(&m.hooks, 0, sizeof(m.hooks));
        float loss, norm;
        gpt2_cuda_step_stats(&m, &loss, &norm);
        gpt2_cuda_get_grads(&m, mode == 0 ? want : got);
        char name[128];
        snprintf(name, sizeof(name), "act_checkpoint[%s rc%d%s] hooks order", use_cudnn ? "cudnn" : "fallback",
                 recompute, mode == 2 ? " offload" : mode == 1 ? "" : " off");
        report(hooks_in_order(hooks, r->config.num_layers), name, "%d calls", hooks->n);
        free(hooks);
        if (mode == 0) {
            want_loss = loss;
        } else {
            size_t bad = 0;
            for (size_t i = 0; i < r->n; i++) bad += memcmp(&want[i], &got[i], sizeof(float)) != 0;
            snprintf(name, sizeof(name), "act_checkpoint[%s rc%d%s] loss and gradients bit-identical",
                     use_cudnn ? "cudnn" : "fallback", recompute, mode == 2 ? " offload" : "");
            report(bad == 0 && memcmp(&loss, &want_loss, sizeof(float)) == 0, name,
                   "loss %.7f vs %.7f, %zu/%zu gradients differ, host tier %zu bytes", loss, want_loss, bad, r->n,
                   m.host_act_bytes);
        }
        gpt2_cuda_free(&m);
    }
    free(want);
    free(got);
}

// Builds m with opt and runs one forward and backward of the reference's first batch with
// hooks that log the calls (the caller frees the log).
static HookLog *hooked_step(GPT2Cuda *m, const Reference *r, const GPT2CudaOptions *opt) {
    gpt2_cuda_build(m, &r->config, r->params, r->B, r->T, opt);
    HookLog *hooks = (HookLog *)calloc(1, sizeof(HookLog));
    m->hooks = GPT2Hooks{hooks, hook_fetch, hook_release, hook_ready};
    gpt2_cuda_zero_grad(m);
    gpt2_cuda_forward(m, r->inputs[0], r->targets[0], r->B, r->T);
    gpt2_cuda_backward(m, 1.0f / (r->B * r->T));
    memset(&m->hooks, 0, sizeof(m->hooks));
    return hooks;
}

// Tiled linears (K tiles, each its own unit): the CUDA model against the CPU reference
// like the untiled one (loss, every gradient), and the hooks: each unit fetched and
// released once forward and once backward, plus the forward windows the recompute adds
// (act_checkpoint: block l's units but the fcproj tiles; recompute 2: both LayerNorms).
static void test_tiles(const Reference *r, int K, int recompute, int ckpt) {
    const int L = r->config.num_layers;
    char tag[64], name[128];
    snprintf(tag, sizeof(tag), "tiles[K=%d rc%d%s]", K, recompute, ckpt ? " ckpt+offload" : "");
    GPT2CudaOptions opt;
    memset(&opt, 0, sizeof(opt));
    opt.recompute = recompute;
    opt.seed = 777;
    opt.act_checkpoint = ckpt;
    opt.act_offload = ckpt;
    opt.tile_linear = K;
    GPT2Cuda m;
    HookLog *hooks = hooked_step(&m, r, &opt);
    const int U = gpt2_num_units_tiled(&r->config, K, 1);
    const int want = 2 * U + 3 * U + (ckpt ? L * 2 * (2 + 3 * K) : 0) + (recompute >= 2 ? L * 2 * 2 : 0);
    int fetches = 0, releases = 0;
    for (int i = 0; i < hooks->n && i < 512; i++) {
        fetches += hooks->calls[i][0] == 0;
        releases += hooks->calls[i][0] == 1;
    }
    snprintf(name, sizeof(name), "%s hook calls", tag);
    report(hooks->n == want && fetches == releases, name, "%d calls (want %d), %d fetches, %d releases", hooks->n,
           want, fetches, releases);
    free(hooks);
    float loss, norm;
    gpt2_cuda_step_stats(&m, &loss, &norm);
    snprintf(name, sizeof(name), "%s loss", tag);
    report(fabsf(loss - r->loss) < 5e-3f * r->loss, name, "%.6f vs CPU %.6f", loss, r->loss);
    float *grads = (float *)malloc(r->n * sizeof(float));
    gpt2_cuda_get_grads(&m, grads);
    compare_grads(r, grads, tag, 3e-2);
    free(grads);
    gpt2_cuda_free(&m);
}

// Vocabulary tiles (KV embedding and KV classifier units; with K linear tiles too): the
// CUDA model against the CPU reference like the untiled one, and against the untiled CUDA
// model (the classifier's input gradient sums its tiles in fp32 before one bf16 rounding,
// where cuBLASLt sums all of Vp: close, not the same bits); untiled linears: the hooks in
// the documented order.
static void test_vocab_tiles(const Reference *r, int KV, int K, int recompute) {
    char tag[64], name[128];
    snprintf(tag, sizeof(tag), "vocab tiles[KV=%d K=%d rc%d]", KV, K, recompute);
    GPT2CudaOptions opt;
    memset(&opt, 0, sizeof(opt));
    opt.recompute = recompute;
    opt.seed = 777;
    opt.tile_linear = K;
    float *grads[2], loss[2], norm;
    for (int tiled = 0; tiled <= 1; tiled++) {
        opt.tile_vocab = tiled ? KV : 1;
        GPT2Cuda m;
        HookLog *hooks = hooked_step(&m, r, &opt);
        if (tiled) {
            const int U = gpt2_num_units_tiled(&r->config, K, KV);
            int fetches = 0;
            for (int i = 0; i < hooks->n && i < 512; i++) fetches += hooks->calls[i][0] == 0;
            snprintf(name, sizeof(name), "%s hooks", tag);
            if (K == 1)
                report(hooks_in_order_units(hooks, U), name, "%d calls over %d units in the documented order", hooks->n,
                       U);
            else   // recompute 2 adds a forward window per LayerNorm unit and layer
                report(fetches == 2 * U + (recompute >= 2 ? 2 * r->config.num_layers : 0), name,
                       "%d fetches over %d units", fetches, U);
        }
        free(hooks);
        gpt2_cuda_step_stats(&m, &loss[tiled], &norm);
        grads[tiled] = (float *)malloc(r->n * sizeof(float));
        gpt2_cuda_get_grads(&m, grads[tiled]);
        gpt2_cuda_free(&m);
    }
    snprintf(name, sizeof(name), "%s loss", tag);
    report(fabsf(loss[1] - r->loss) < 5e-3f * r->loss, name, "%.7f vs CPU %.7f, untiled CUDA %.7f (%s)", loss[1],
           r->loss, loss[0], memcmp(&loss[0], &loss[1], sizeof(float)) ? "differs" : "bit-identical");
    compare_grads(r, grads[1], tag, 3e-2);
    double worst = 0.0;
    for (int t = 0; t < GPT2_NUM_PARAM_TENSORS; t++)
        worst = fmax(worst, rel_l2(grads[1] + r->offsets[t], grads[0] + r->offsets[t], r->sizes[t]));
    snprintf(name, sizeof(name), "%s gradients vs untiled CUDA", tag);
    report(worst < 1e-2, name, "worst tensor rel L2 %.2e", worst);
    free(grads[0]);
    free(grads[1]);
}

// The CUDA model against the PyTorch ground truth (dev/ref/README.md: float64, a tiny GPT-2,
// two AdamW steps) from its model file: logits, loss, every gradient, the norms, the fp32
// master after each step and the bf16 working copy made from it. Run from the repository
// root. Bounds: bf16 keeps 8 significant bits, so each stored weight or activation is off
// by up to 2^-9 relative (round to nearest), a stochastically rounded weight by up to 2^-7;
// a value that passes through a few dozen such roundings (two blocks, their LayerNorms
// and residual adds) carries about 1e-2 of relative error. So: logits rel L2 2e-2 and
// max |diff| / max |ref| 5e-2, loss and norms relative 5e-3 and 2e-2, each gradient tensor
// rel L2 3e-2 (the bounds test_model holds the CUDA model to against the CPU) and
// max |diff| / max |ref| REF_GRAD_TOL; the master after each step within
// gpt2_ref_params_vs_bound's bound (dev/ref/gpt2_ref.h: the reach of a gradient error of
// REF_GRAD_TOL max |g| through AdamW) plus 1e-6, and the bf16 copy within that plus its
// stochastic rounding, 2^-7 |p|. A wrong gradient, mask, scale or optimizer formula misses
// these by far (a LayerNorm backward without its mean term: gradients rel L2 0.42, the
// master 2e4 times its bound; AdamW without decay: 353 times).
#define REF_GRAD_TOL 5e-2
static void test_pytorch_reference(int use_cudnn) {
    char tag[64], name[160], err[512];
    GPT2Ref r;
    if (gpt2_ref_load(&r, GPT2_REF_DIR "/gpt2_ref.bin", err, sizeof(err)) != 0) {
        report(0, "pytorch reference file", "%s", err);
        return;
    }
    GPT2Config c;
    float *p0 = gpt2_model_file_read(GPT2_REF_DIR "/gpt2_ref_model.bin", &c);
    const int B = r.B, T = r.T, BT = B * T, Vp = c.padded_vocab_size;
    size_t sizes[GPT2_NUM_PARAM_TENSORS], off[GPT2_NUM_PARAM_TENSORS];
    const size_t n = gpt2_param_sizes(&c, sizes);
    gpt2_param_offsets(&c, off);
    GPT2CudaOptions opt;
    memset(&opt, 0, sizeof(opt));
    opt.use_cudnn = use_cudnn;
    opt.seed = 777;
    GPT2Cuda m;
    gpt2_cuda_build(&m, &c, p0, B, T, &opt);
    snprintf(tag, sizeof(tag), "pytorch ref [%s]", m.use_cudnn ? "cudnn" : "fallback");
    report(memcmp(&c, &r.config, sizeof(c)) == 0 && n == r.num_params, tag, "model file and reference agree on the shape");

    const size_t nl = (size_t)BT * Vp;
    float *logits = (float *)malloc(nl * sizeof(float)), *grads = (float *)malloc(n * sizeof(float));
    float *master = (float *)malloc(n * sizeof(float)), *work = (float *)malloc(n * sizeof(float));
    gpt2_cuda_forward(&m, r.inputs, NULL, B, T);
    get_bf16(logits, m.acts.logits, nl);
    GPT2RefDiff dl = gpt2_ref_diff(logits, r.logits, nl);
    snprintf(name, sizeof(name), "%s logits", tag);
    report(dl.rel_l2 < 2e-2 && dl.scaled < 5e-2, name, "rel L2 %.2e, max |diff| / max |ref| %.2e", dl.rel_l2, dl.scaled);

    for (int s = 0; s < r.steps; s++) {
        float loss, norm;
        gpt2_cuda_zero_grad(&m);
        gpt2_cuda_forward(&m, r.inputs, r.targets, B, T);
        gpt2_cuda_backward(&m, 1.0f / (float)BT);
        if (s == 0) {
            gpt2_cuda_get_grads(&m, grads);
            double worst = 0, worst_max = 0;
            int at = 0, at_max = 0;
            for (int t = 0; t < GPT2_NUM_PARAM_TENSORS; t++) {
                GPT2RefDiff d = gpt2_ref_diff(grads + off[t], r.grads + off[t], sizes[t]);
                if (!(d.rel_l2 <= worst)) { worst = d.rel_l2; at = t; }
                if (!(d.scaled <= worst_max)) { worst_max = d.scaled; at_max = t; }
            }
            snprintf(name, sizeof(name), "%s gradients", tag);
            report(worst < 3e-2 && worst_max < REF_GRAD_TOL, name,
                   "worst tensor rel L2 %.2e (%s), max |diff| / max |ref| %.2e (%s)", worst, gpt2_param_name(at),
                   worst_max, gpt2_param_name(at_max));
        }
        gpt2_cuda_update(&m, r.lr, r.beta1, r.beta2, r.eps, r.weight_decay, r.grad_clip, s + 1);
        gpt2_cuda_step_stats(&m, &loss, &norm);
        snprintf(name, sizeof(name), "%s step %d loss and grad norm", tag, s + 1);
        const double el = fabs(loss - r.loss[s]) / r.loss[s], en = fabs(norm - r.norm[s]) / r.norm[s];
        report(el < 5e-3 && en < 2e-2, name, "loss %.6f vs %.6f (rel %.2e), norm %.5f vs %.5f (rel %.2e)", loss,
               r.loss[s], el, norm, r.norm[s], en);
        gpt2_cuda_get_master(&m, master);
        gpt2_cuda_get_params_bf16(&m, work);
        double large_m, large_w;
        const double em = gpt2_ref_params_vs_bound(&r, master, s + 1, REF_GRAD_TOL, 1e-6, 0.0, &large_m);
        const double ew = gpt2_ref_params_vs_bound(&r, work, s + 1, REF_GRAD_TOL, 1e-6, 1.0 / 128, &large_w);
        snprintf(name, sizeof(name), "%s params after step %d", tag, s + 1);
        report(em <= 1.0 && ew <= 1.0, name,
               "max |diff| / bound: fp32 master %.2e, bf16 copy %.2e; max |diff| where |g| >= max |g| / 10: "
               "master %.2e, bf16 %.2e",
               em, ew, large_m, large_w);
    }
    gpt2_cuda_free(&m);
    free(logits);
    free(grads);
    free(master);
    free(work);
    free(p0);
    gpt2_ref_free(&r);
}

// argv[1] names one part, so that parts can run side by side where the whole program takes
// long (the emulated device): "kernels" (each kernel against its C reference), "model" (the
// model against the CPU reference), "checkpoints" (the same with activation checkpoints),
// "tiles" (the tiled runs), "ref" (the PyTorch reference). No argument: every part.
int main(int argc, char **argv) {
    const char *part = argc > 1 ? argv[1] : "all";
    const char *parts[] = {"all", "kernels", "model", "checkpoints", "tiles", "ref"};
    int known = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) known |= strcmp(part, parts[i]) == 0;
    if (!known || argc > 2) {
        fprintf(stderr, "usage: %s [kernels | model | checkpoints | tiles | ref]   (no argument: every part); got "
                "'%s'%s\n", argv[0], part, argc > 2 ? " and more" : "");
        return 2;
    }
#define PART(name) (strcmp(part, "all") == 0 || strcmp(part, name) == 0)
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        printf("SKIP: no CUDA device (%s)\n", err != cudaSuccess ? cudaGetErrorString(err) : "device count is 0");
        return 0;
    }
    const cudaDeviceProp *p = cuda_device_props();
    printf("device: %s (sm_%d%d, %d SMs)\n", p->name, p->major, p->minor, p->multiProcessorCount);
    matmul_init();

    if (PART("kernels")) {
        test_layernorm(37, 200);
        test_layernorm(300, 768);
        test_layernorm(70, 2040);   // the widest rows: MAXV 8 with a partial last vector, and 16
        test_layernorm(70, 4096);
        test_layernorm(5000, 64);    // 20 rows a block (cuda_kernel_sizes.h): 250 partials
        test_layernorm(20000, 136);  // the most rows a block, a partial first vector
        test_classifier();
        test_adamw(0, 1);
        test_adamw(1, 0);
        test_adamw_slices();
        test_grad_norm();
        test_matmul(1);
        test_matmul(0);
        test_bias_grad(9000, 136, 144);   // 36 chunks of BIAS_GRAD_ROWS
        test_bias_grad(65535 * 256 + 40, 8, 8);   // 65536 chunks: past gridDim.y's 65535
        test_encoder();
        test_gelu(6149);   // 768 vectors of 8, then 5 elements
        test_attention(0, 2, 128, 2, 64);
        test_attention(0, 3, 37, 3, 16);
        test_attention(GPT2_CUDNN_ON, 2, 128, 2, 64);
        test_attention(GPT2_CUDNN_ATOMIC, 2, 128, 2, 64);
        // On the emulated device, a runtime before cuDNN 9.6, whose atomic backward adds onto
        // what its dQ accumulator holds: prepare's plans clear it first (a fresh workspace
        // holds the emulator's fill pattern). A GPU ignores the variable.
        setenv("CUDA_EMU_CUDNN_VERSION", "90500", 1);
        test_attention(GPT2_CUDNN_ATOMIC, 3, 128, 2, 64);
        unsetenv("CUDA_EMU_CUDNN_VERSION");
    }
    if (PART("model") || PART("checkpoints") || PART("tiles")) {
        Reference ref;
        reference_build(&ref);
        if (PART("model")) {
            test_model(&ref, GPT2_CUDNN_ATOMIC, 0, 1, 0);   // cuDNN's faster backward (--cudnn 2)
            test_model(&ref, GPT2_CUDNN_OFF, 1, 0, 1);
            test_model(&ref, GPT2_CUDNN_ON, 2, 0, 1);
        }
        if (PART("checkpoints")) {
            test_act_checkpoint(&ref, 0, 0);
            test_act_checkpoint(&ref, 0, 2);
            test_act_checkpoint(&ref, 1, 1);
        }
        if (PART("tiles")) {
            test_tiles(&ref, 2, 1, 0);
            test_tiles(&ref, 4, 2, 0);
            test_tiles(&ref, 4, 0, 1);
            test_vocab_tiles(&ref, 8, 1, 0);
            test_vocab_tiles(&ref, 24, 1, 1);
            test_vocab_tiles(&ref, 8, 2, 2);
        }
    }
    if (PART("ref")) {
        test_pytorch_reference(0);
        test_pytorch_reference(1);
    }
#undef PART

    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed ? 1 : 0;
}
