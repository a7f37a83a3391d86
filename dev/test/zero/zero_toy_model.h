/*
zero_toy_model.h: the toy model of the zero/ tests (a residual tanh MLP whose first and last
layers share one weight E, so E belongs to two units like GPT-2's wte), packaged for the
core, checkpoint and report tests (mpi_zero_toy.c, mpi_zero_ckpt.c). Header-only.

  unit 0      h0 = tanh(E x + b0)
  unit i      h_i = h_{i-1} + g_i * tanh(W_i h_{i-1} + b_i)         i = 1..L
  unit L+1    o = s * (E^T h_L) + c,   loss = 0.5 |o - y|^2 / (global samples)
Tensor sizes (377, 29, 841, 13, 1) are not multiples of 16 and some are below the world.
Data and init are pure functions of (seed, step, micro-step, rank, index).
*/
#ifndef ZERO_TOY_MODEL_H
#define ZERO_TOY_MODEL_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../../../zero/backend.h"
#include "../../../zero/partition.h"
#include "../../../zero/zero.h"

// Test bookkeeping shared by the programs: a failed check prints one line with the rank.
static int rank_g = 0, passes = 0, fails = 0;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...) {
    if (ok) { passes++; return; }
    fails++;
    char msg[1024];
    int len = snprintf(msg, sizeof msg, "FAIL rank %d: ", rank_g);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + len, sizeof msg - (size_t)len - 1, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", msg);
}

enum { TOY_D = 13, TOY_H = 29, TOY_L = 3, TOY_B = 3 };
#define TOY_NU (TOY_L + 2)
#define TOY_NT (2 + 3 * TOY_L + 2)
#define TOY_SEED 4242ull
#define TOY_STREAM_X 101
#define TOY_STREAM_Y 102

typedef struct {
    ZeroTensor t[TOY_NT];
    char names[TOY_NT][16];
    float base[TOY_NT], scale[TOY_NT];
    int unit_tensors[TOY_NU][3], unit_n[TOY_NU];
} Toy;

static inline void toy_add(Toy *m, int *k, const char *nm, size_t n, int decay, int u0, int u1, int nu, float b, float s) {
    snprintf(m->names[*k], sizeof m->names[*k], "%s", nm);
    m->t[*k] = (ZeroTensor){m->names[*k], n, decay, {u0, u1}, nu};
    m->base[*k] = b;
    m->scale[*k] = s;
    (*k)++;
}

static inline void toy_table(Toy *m) {
    int k = 0;
    memset(m, 0, sizeof *m);
    toy_add(m, &k, "E", (size_t)TOY_H * TOY_D, 1, 0, TOY_NU - 1, 2, 0.0f, 0.3f);
    toy_add(m, &k, "b0", TOY_H, 0, 0, 0, 1, 0.0f, 0.1f);
    for (int i = 1; i <= TOY_L; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "W%d", i); toy_add(m, &k, nm, (size_t)TOY_H * TOY_H, 1, i, 0, 1, 0.0f, 0.2f);
        snprintf(nm, sizeof nm, "b%d", i); toy_add(m, &k, nm, TOY_H, 0, i, 0, 1, 0.0f, 0.1f);
        snprintf(nm, sizeof nm, "g%d", i); toy_add(m, &k, nm, TOY_H, 0, i, 0, 1, 0.5f, 0.1f);
    }
    toy_add(m, &k, "c", TOY_D, 0, TOY_NU - 1, 0, 1, 0.0f, 0.1f);
    toy_add(m, &k, "s", 1, 0, TOY_NU - 1, 0, 1, 1.0f, 0.0f);
    for (int t = 0; t < TOY_NT; t++)   // a unit's tensors in table order (ZeroUnitView's order)
        for (int j = 0; j < m->t[t].num_units; j++) {
            int u = m->t[t].units[j];
            m->unit_tensors[u][m->unit_n[u]++] = t;
        }
}

static inline size_t toy_numel_total(const Toy *m) {
    size_t n = 0;
    for (int t = 0; t < TOY_NT; t++) n += m->t[t].numel;
    return n;
}

static inline float toy_init_value(const Toy *m, int t, size_t i) {
    return m->base[t] + m->scale[t] * rng_normal(TOY_SEED, RNG_STREAM_INIT, ((uint64_t)t << 40) | i);
}

static inline void toy_init(void *ctx, int t, size_t offset, size_t count, float *out) {
    const Toy *m = ctx;
    for (size_t i = 0; i < count; i++) out[i] = toy_init_value(m, t, offset + i);
}

typedef struct {
    float x[TOY_B][TOY_D], y[TOY_B][TOY_D];
    float h[TOY_L + 1][TOY_B][TOY_H], a[TOY_L + 1][TOY_B][TOY_H];
    float eh[TOY_B][TOY_D], o[TOY_B][TOY_D];
    float dh[TOY_B][TOY_H];
} ToyActs;

static inline void toy_load_data(ToyActs *A, int step, int micro, int rank, int world, int accum) {
    for (int b = 0; b < TOY_B; b++) {
        uint64_t sample = (((uint64_t)step * accum + micro) * world + rank) * TOY_B + b;
        for (int k = 0; k < TOY_D; k++) {
            A->x[b][k] = rng_normal(TOY_SEED, TOY_STREAM_X, sample * TOY_D + k);
            A->y[b][k] = 0.5f * rng_normal(TOY_SEED, TOY_STREAM_Y, sample * TOY_D + k);
        }
    }
}

static inline void toy_forward_unit(int u, float *const *p, ToyActs *A) {
    if (u == 0) {
        const float *E = p[0], *b0 = p[1];
        for (int b = 0; b < TOY_B; b++)
            for (int j = 0; j < TOY_H; j++) {
                float z = b0[j];
                for (int k = 0; k < TOY_D; k++) z += E[j * TOY_D + k] * A->x[b][k];
                A->h[0][b][j] = tanhf(z);
            }
    } else if (u <= TOY_L) {
        const float *W = p[0], *bb = p[1], *g = p[2];
        for (int b = 0; b < TOY_B; b++)
            for (int j = 0; j < TOY_H; j++) {
                float z = bb[j];
                for (int k = 0; k < TOY_H; k++) z += W[j * TOY_H + k] * A->h[u - 1][b][k];
                float a = tanhf(z);
                A->a[u][b][j] = a;
                A->h[u][b][j] = A->h[u - 1][b][j] + g[j] * a;
            }
    } else {
        const float *E = p[0], *c = p[1], *s = p[2];
        for (int b = 0; b < TOY_B; b++)
            for (int k = 0; k < TOY_D; k++) {
                float e = 0.0f;
                for (int j = 0; j < TOY_H; j++) e += E[j * TOY_D + k] * A->h[TOY_L][b][j];
                A->eh[b][k] = e;
                A->o[b][k] = s[0] * e + c[k];
            }
    }
}

static inline float toy_loss(const ToyActs *A, float inv) {
    float l = 0.0f;
    for (int b = 0; b < TOY_B; b++)
        for (int k = 0; k < TOY_D; k++) l += 0.5f * (A->o[b][k] - A->y[b][k]) * (A->o[b][k] - A->y[b][k]);
    return l * inv;
}

// Accumulates (+=) into the gradient buffers.
static inline void toy_backward_unit(int u, float *const *p, float *const *g, ToyActs *A, float inv) {
    if (u == TOY_NU - 1) {
        const float *E = p[0], *s = p[2];
        float *gE = g[0], *gc = g[1], *gs = g[2];
        for (int b = 0; b < TOY_B; b++) {
            float d[TOY_D];
            for (int k = 0; k < TOY_D; k++) {
                d[k] = (A->o[b][k] - A->y[b][k]) * inv;
                gc[k] += d[k];
                gs[0] += d[k] * A->eh[b][k];
            }
            for (int j = 0; j < TOY_H; j++) {
                float dh = 0.0f;
                for (int k = 0; k < TOY_D; k++) {
                    gE[j * TOY_D + k] += s[0] * d[k] * A->h[TOY_L][b][j];
                    dh += E[j * TOY_D + k] * (s[0] * d[k]);
                }
                A->dh[b][j] = dh;
            }
        }
    } else if (u >= 1) {
        const float *W = p[0], *gg = p[2];
        float *gW = g[0], *gb = g[1], *gG = g[2];
        for (int b = 0; b < TOY_B; b++) {
            float dz[TOY_H], dprev[TOY_H];
            for (int j = 0; j < TOY_H; j++) {
                float a = A->a[u][b][j];
                gG[j] += A->dh[b][j] * a;
                dz[j] = A->dh[b][j] * gg[j] * (1.0f - a * a);
                gb[j] += dz[j];
            }
            for (int k = 0; k < TOY_H; k++) {
                float acc = A->dh[b][k];
                for (int j = 0; j < TOY_H; j++) {
                    gW[j * TOY_H + k] += dz[j] * A->h[u - 1][b][k];
                    acc += W[j * TOY_H + k] * dz[j];
                }
                dprev[k] = acc;
            }
            memcpy(A->dh[b], dprev, sizeof dprev);
        }
    } else {
        float *gE = g[0], *gb0 = g[1];
        for (int b = 0; b < TOY_B; b++)
            for (int j = 0; j < TOY_H; j++) {
                float h = A->h[0][b][j];
                float dz = A->dh[b][j] * (1.0f - h * h);
                gb0[j] += dz;
                for (int k = 0; k < TOY_D; k++) gE[j * TOY_D + k] += dz * A->x[b][k];
            }
    }
}

// bf16 weights are upcast to compute; bf16 gradients accumulate with round-to-nearest-even.
static inline uint16_t toy_bf16_rne(float x) {
    union { float f; uint32_t u; } v = {x};
    if ((v.u & 0x7f800000u) == 0x7f800000u) return (uint16_t)((v.u >> 16) | ((v.u & 0x7fffffu) ? 0x40u : 0u));
    return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}

static float toy_pscratch[3][TOY_H * TOY_H], toy_gscratch[3][TOY_H * TOY_H];

static inline void toy_upcast(const Toy *toy, int u, void *const *params, ZeroDType pdt, float **p) {
    for (int i = 0; i < toy->unit_n[u]; i++) {
        if (pdt == ZERO_F32) { p[i] = params[i]; continue; }
        const uint16_t *w = params[i];
        for (size_t k = 0; k < toy->t[toy->unit_tensors[u][i]].numel; k++) toy_pscratch[i][k] = zero_bf16_to_f32(w[k]);
        p[i] = toy_pscratch[i];
    }
}

static inline void toy_run_backward(const Toy *toy, int u, void *const *params, void *const *grads, ZeroDType pdt, ZeroDType gdt,
                             ToyActs *A, float inv) {
    float *p[3], *g[3];
    toy_upcast(toy, u, params, pdt, p);
    for (int i = 0; i < toy->unit_n[u]; i++) {
        if (gdt == ZERO_F32) { g[i] = grads[i]; continue; }
        memset(toy_gscratch[i], 0, sizeof toy_gscratch[i]);
        g[i] = toy_gscratch[i];
    }
    toy_backward_unit(u, p, g, A, inv);
    if (gdt == ZERO_BF16)
        for (int i = 0; i < toy->unit_n[u]; i++) {
            uint16_t *gb = grads[i];
            for (size_t k = 0; k < toy->t[toy->unit_tensors[u][i]].numel; k++)
                gb[k] = toy_bf16_rne(zero_bf16_to_f32(gb[k]) + toy_gscratch[i][k]);
        }
}

static const float TOY_LR = 1e-2f, TOY_B1 = 0.9f, TOY_B2 = 0.95f, TOY_EPS = 1e-8f, TOY_WD = 0.1f, TOY_CLIP = 0.35f;

// Optimizer steps [from, to) (0-based; AdamW t = step + 1), each of `accum` micro-steps:
// forward over units 0..U-1, backward over U-1..0 with grads_ready before release (the
// order zero_predict assumes).
static inline void toy_train(Zero *z, const Toy *toy, int rank, int world, int accum, ZeroDType pdt, ZeroDType gdt, int from, int to) {
    static ToyActs A;
    float inv = 1.0f / (float)(world * accum * TOY_B);
    ZeroStepArgs args = {TOY_LR, TOY_B1, TOY_B2, TOY_EPS, TOY_WD, TOY_CLIP, 0};
    for (int step = from; step < to; step++) {
        zero_begin_step(z, accum);
        for (int micro = 0; micro < accum; micro++) {
            toy_load_data(&A, step, micro, rank, world, accum);
            for (int u = 0; u < TOY_NU; u++) {
                const ZeroUnitView *v = zero_fetch(z, u, 0);
                float *p[3];
                toy_upcast(toy, u, v->params, pdt, p);
                toy_forward_unit(u, p, &A);
                zero_release(z, u, 0);
            }
            for (int u = TOY_NU - 1; u >= 0; u--) {
                const ZeroUnitView *v = zero_fetch(z, u, 1);
                toy_run_backward(toy, u, v->params, v->grads, pdt, gdt, &A, inv);
                zero_grads_ready(z, u);
                zero_release(z, u, 1);
            }
        }
        args.t = step + 1;
        zero_step(z, &args);
    }
}

// Stage 3 without prefetch: shard elements one rank sends in the all-gathers of one
// optimizer step of G micro-steps (persistent tensors, gathered at the step, apart). Every
// fetch gathers its unit's pool tensors except those the very next fetch also uses, which
// stay: the last forward unit's for its backward, and between micro-steps the first unit's.
// In the run's first step the first micro-step records the fetch order and keeps nothing.
static inline uint64_t toy_stage3_gathered(const Toy *toy, int world, size_t persist, int G, int run_first_step) {
    uint64_t all = 0, first = 0, last = 0;
    for (int t = 0; t < TOY_NT; t++) {
        if (persist > 0 && toy->t[t].numel <= persist) continue;
        ZeroSplit sp;
        zero_split(toy->t[t].numel, world, &sp);
        all += sp.shard * (uint64_t)toy->t[t].num_units;
        for (int j = 0; j < toy->t[t].num_units; j++) {
            if (toy->t[t].units[j] == 0) first += sp.shard;
            if (toy->t[t].units[j] == TOY_NU - 1) last += sp.shard;
        }
    }
    return (uint64_t)G * 2 * all - (uint64_t)(G - (run_first_step ? 1 : 0)) * last - (uint64_t)(G - 1) * first;
}

// Every tensor's fp32 master, concatenated in table order (collective).
static inline void toy_gather_all(Zero *z, const Toy *toy, float *out) {
    size_t off = 0;
    for (int t = 0; t < TOY_NT; t++) {
        zero_gather_master(z, t, out + off);
        off += toy->t[t].numel;
    }
}

#endif
