// test_grad_norm.c: the global gradient norm of llmc (llmc/model/grad_norm.h: the CPU trainer's
// gpt2_cpu_grad_norm, and the host reference of train_gpt2cu's device norm) against zero/
// on the GPT-2 slice table: the same double sum of squares as zero's host backend
// sum_squares added slice by slice (what zero.c does), and the same norm and clip scale as
// a real 1-rank zero_step at every stage, bit for bit. The gradients span many orders of
// magnitude, so any other summation order gives another double (checked: the test can
// tell orders apart). Links libzero.a (its Makefile rule).
#include <float.h>
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../../llmc/numerics/adamw.h"
#include "../../../llmc/model/gpt2_config.h"
#include "../../../llmc/cpu/gpt2_cpu.h"
#include "../../../llmc/model/grad_norm.h"
#include "../../../llmc/numerics/rand.h"
#include "../../../zero/backend.h"
#include "../../../zero/host/backend_host.h"
#include "../../../zero/comm.h"
#include "../../../zero/zero.h"

// A small GPT-2 (the full vocabulary, so wte spans many blocks) and its slice table.
typedef struct {
    GPT2Config c;
    size_t n;
    int ns;
    GPT2Slice *sl;
    float *g;
} Model;

// Gradients of random sign and magnitudes 2^-30 .. 2^6: a sum of their squares rounds
// differently in almost any other order.
static void model_make(Model *m, const char *desc, uint64_t seed) {
    char err[256];
    assert_int_equal(gpt2_config_from_descriptor(desc, &m->c, err, sizeof err), 0);
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    m->n = gpt2_param_sizes(&m->c, sizes);
    m->ns = gpt2_num_slices(&m->c);
    m->sl = malloc((size_t)m->ns * sizeof(GPT2Slice));
    m->g = malloc(m->n * sizeof(float));
    assert_non_null(m->sl);
    assert_non_null(m->g);
    gpt2_slices(&m->c, m->sl);
    for (size_t i = 0; i < m->n; i++)
        m->g[i] = ldexpf(rng_normal(seed, 77, i), (int)rng_below(seed, 78, i, 37) - 30);
}

static void model_free(Model *m) {
    free(m->sl);
    free(m->g);
}

// Bitwise equality (a NaN equals itself, +0 and -0 differ).
static int same_f64(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }
static int same_f32(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

// One world of one and zero's host backend for the whole program (MPI starts only once).
static ZeroComm *comm;
static const ZeroBackend *backend;

static int setup(void **state) {
    (void)state;
    comm = zero_comm_init(NULL, NULL);   // no launcher: a world of one
    backend = comm ? zero_backend_host(comm) : NULL;
    return backend ? 0 : -1;
}
static int teardown(void **state) {
    (void)state;
    zero_backend_host_free(backend);
    zero_comm_free(comm);
    return 0;
}

// zero.c's norm on one rank: its backend's sum_squares per tensor of its table (here the
// GPT-2 slices), added in table order, then summed over the (one) rank.
static double zero_backend_total(const ZeroBackend *b, const Model *m) {
    double *sq = malloc((size_t)m->ns * sizeof(double));
    assert_non_null(sq);
    ZeroStream *s = b->main_stream(b);
    for (int k = 0; k < m->ns; k++) b->sum_squares(b, m->g + m->sl[k].offset, m->sl[k].numel, &sq[k], s);
    b->stream_sync(b, s);
    double total = 0.0;
    for (int k = 0; k < m->ns; k++) total += sq[k];
    b->allreduce_sum_f64(b, comm, &total, 1, "test gradient norm");
    free(sq);
    return total;
}

// llmc's sum of squares (the CPU trainer's and the CUDA reference's) is zero's host
// backend's, as a double; so are the norm and the clip scale for clips that bite and not.
static void test_llmc_norm_is_zero_host_backend_norm(void **state) {
    (void)state;
    const char *descs[] = {"d2c64h2t64", "d3c128h2t64"};
    for (int d = 0; d < 2; d++) {
        Model m;
        model_make(&m, descs[d], 100 + (uint64_t)d);
        const double want = zero_backend_total(backend, &m);
        const double got = grad_norm_sumsq(m.g, m.sl, m.ns);
        if (!same_f64(got, want))
            fail_msg("%s: llmc sum of squares %.17g, zero's host backend %.17g", descs[d], got, want);
        // The CPU trainer's norm, through the model.
        GPT2 cpu;
        gpt2_cpu_build(&cpu, &m.c, 1);
        memcpy(cpu.grads, m.g, m.n * sizeof(float));
        const float zero_norm = (float)sqrt(want);   // zero.c's expressions
        const float cpu_norm = gpt2_cpu_grad_norm(&cpu);
        if (!same_f32(cpu_norm, zero_norm) || !same_f32(adamw_norm(got), zero_norm))
            fail_msg("%s: norm %.9g (gpt2_cpu_grad_norm), %.9g (adamw_norm), zero %.9g", descs[d], cpu_norm,
                     adamw_norm(got), zero_norm);
        gpt2_cpu_free(&cpu);
        const float clips[] = {zero_norm / 3, zero_norm, zero_norm * 2, 0.0f, -1.0f, nextafterf(zero_norm, 0.0f)};
        for (size_t k = 0; k < sizeof clips / sizeof clips[0]; k++) {
            const float c = clips[k];
            const float zero_clip = (c > 0 && zero_norm > c) ? c / zero_norm : 1.0f;
            if (!same_f32(adamw_clip_scale(zero_norm, c), zero_clip))
                fail_msg("%s: clip %.9g: scale %.9g, zero %.9g", descs[d], c, adamw_clip_scale(zero_norm, c), zero_clip);
        }
        assert_true(!same_f32(adamw_clip_scale(zero_norm, zero_norm / 3), 1.0f));   // that clip bites

        // The data tells orders apart: the flat buffer in blocks (ignoring the slices) and
        // one left-to-right pass both give other doubles.
        const double flat = adamw_sumsq(m.g, m.n);
        double serial = 0.0;
        for (size_t i = 0; i < m.n; i++) serial = adamw_sumsq_add(serial, m.g[i]);
        if (same_f64(flat, want) || same_f64(serial, want))
            fail_msg("%s: other orders give the same sum (%.17g, %.17g, %.17g): the test cannot tell them apart",
                     descs[d], flat, serial, want);
        model_free(&m);
    }
}

// The parallel host version is the one-thread definition of llmc/numerics/adamw.h applied slice by
// slice, at any thread count, on tables with empty slices, odd sizes and slices out of
// flat order (the block locator's edge cases).
static void test_parallel_blocks_are_the_definition(void **state) {
    (void)state;
    const size_t sizes[] = {0, 1, 4095, 0, 4096, 4097, 0, 3 * 4096 + 17, 70000, 0};
    const int ns = (int)(sizeof sizes / sizeof sizes[0]);
    GPT2Slice sl[sizeof sizes / sizeof sizes[0]];
    size_t n = 0;
    for (int k = ns - 1; k >= 0; k--) {   // back to front in the buffer
        memset(&sl[k], 0, sizeof sl[k]);
        sl[k].offset = n;
        sl[k].numel = sizes[k];
        n += sizes[k];
    }
    float *g = malloc(n * sizeof(float));
    assert_non_null(g);
    for (size_t i = 0; i < n; i++) g[i] = ldexpf(rng_normal(7, 77, i), (int)rng_below(7, 78, i, 41) - 30);
    double want = 0.0;
    for (int k = 0; k < ns; k++) want += adamw_sumsq(g + sl[k].offset, sl[k].numel);
    const int threads[] = {1, 2, 3}, before = omp_get_max_threads();
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        omp_set_num_threads(threads[t]);
        const double got = grad_norm_sumsq(g, sl, ns);
        if (!same_f64(got, want))
            fail_msg("%d threads: %.17g, the definition %.17g", threads[t], got, want);
    }
    omp_set_num_threads(before);
    // Every block of every non-empty slice, once, in order.
    GradNormSpan spans[sizeof sizes / sizeof sizes[0]];
    const size_t nb = grad_norm_spans(sl, ns, spans);
    size_t b = 0;
    for (int k = 0; k < ns; k++)
        for (size_t lo = 0; lo < sizes[k]; lo += ADAMW_SUMSQ_BLOCK, b++) {
            size_t at;
            int len;
            grad_norm_block(spans, ns, b, &at, &len);
            const size_t want_len = sizes[k] - lo < ADAMW_SUMSQ_BLOCK ? sizes[k] - lo : ADAMW_SUMSQ_BLOCK;
            if (at != sl[k].offset + lo || (size_t)len != want_len)
                fail_msg("block %zu: at %zu length %d, want slice %d at %zu length %zu", b, at, len, k, sl[k].offset + lo,
                         want_len);
        }
    assert_int_equal(b, nb);
    free(g);
}

// A real zero_step on one rank, every stage: the norm it returns is llmc's, and the
// masters it leaves are AdamW with llmc's clip scale (a clip that bites), bit for bit.
typedef struct {
    const Model *m;
    const float *p0;
} InitCtx;

static void init_from(void *ctx, int tensor, size_t offset, size_t count, float *out) {
    const InitCtx *ic = ctx;
    memcpy(out, ic->p0 + ic->m->sl[tensor].offset + offset, count * sizeof(float));
}

static void test_zero_step_norm_and_clip_are_llmc(void **state) {
    (void)state;
    Model m;
    model_make(&m, "d2c64h2t64", 5);
    float *p0 = malloc(m.n * sizeof(float)), *got = malloc(m.n * sizeof(float));
    assert_non_null(p0);
    assert_non_null(got);
    gpt2_init_params(&m.c, p0, 9);
    ZeroTensor *zt = calloc((size_t)m.ns, sizeof(ZeroTensor));
    assert_non_null(zt);
    for (int k = 0; k < m.ns; k++) {
        zt[k] = (ZeroTensor){m.sl[k].name, m.sl[k].numel, m.sl[k].decay, {m.sl[k].units[0], m.sl[k].units[1]},
                             m.sl[k].num_units};
    }
    const float norm = adamw_norm(grad_norm_sumsq(m.g, m.sl, m.ns)), clip = norm / 3;
    const AdamWParams ap = adamw_params(1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, adamw_clip_scale(norm, clip), 1);
    const int nu = gpt2_num_units(&m.c);
    for (int stage = 0; stage <= 3; stage++) {
        ZeroConfig zc;
        zero_config_defaults(&zc);
        zc.stage = stage;
        zc.param_dtype = zc.grad_dtype = ZERO_F32;   // the model below writes fp32 gradients
        InitCtx ic = {&m, p0};
        Zero *z = zero_init(zt, m.ns, nu, &zc, comm, backend, init_from, &ic);
        assert_non_null(z);
        zero_begin_step(z, 1);
        for (int u = 0; u < nu; u++) {
            zero_fetch(z, u, 0);
            zero_release(z, u, 0);
        }
        for (int u = nu - 1; u >= 0; u--) {
            const ZeroUnitView *v = zero_fetch(z, u, 1);
            for (int i = 0; i < v->count; i++) {
                const GPT2Slice *s = &m.sl[v->tensors[i]];
                if (s->units[0] != u && s->num_units > 1) continue;   // a shared tensor's gradient, added once
                float *gb = v->grads[i];
                for (size_t e = 0; e < s->numel; e++) gb[e] += m.g[s->offset + e];
            }
            zero_grads_ready(z, u);
            zero_release(z, u, 1);
        }
        ZeroStepArgs args = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, clip, 1};
        const float zn = zero_step(z, &args);
        size_t bad = 0, first = 0;
        float first_want = 0.0f;
        for (int k = 0; k < m.ns; k++) {
            const GPT2Slice *s = &m.sl[k];
            zero_gather_master(z, k, got + s->offset);
            for (size_t e = 0; e < s->numel; e++) {
                float mm = 0.0f, vv = 0.0f;
                const size_t i = s->offset + e;
                const float want = adamw_element(p0[i], m.g[i], &mm, &vv, &ap, s->decay);
                if (!same_f32(want, got[i]) && bad++ == 0) { first = i; first_want = want; }
            }
        }
        zero_free(z);   // before any failure: a live Zero's stream threads would outlive the test
        if (!same_f32(zn, norm)) fail_msg("stage %d: zero_step norm %.9g, llmc %.9g", stage, zn, norm);
        if (bad)
            fail_msg("stage %d: %zu/%zu masters differ from AdamW with llmc's clip scale %.9g (first: element %zu "
                     "is %.9g, %.9g with that scale)", stage, bad, m.n, ap.grad_scale, first, got[first], first_want);
    }
    free(zt);
    free(p0);
    free(got);
    model_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llmc_norm_is_zero_host_backend_norm),
        cmocka_unit_test(test_parallel_blocks_are_the_definition),
        cmocka_unit_test(test_zero_step_norm_and_clip_are_llmc),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
