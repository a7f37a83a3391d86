// gpt2_cpu.c: the fp32 CPU GPT-2. Every output element is computed by exactly one
// thread and every sum runs in one fixed sequential order, so the numbers do not depend
// on the OpenMP thread count or schedule. Loops use dynamic schedules: when another
// process shares a core, the other thread takes over the work instead of waiting. The matmuls use 6x16 register tiles written with GCC
// vector extensions (AVX2 ymm with -march=native, SSE pairs otherwise).
#include "gpt2_cpu.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <math.h>
#include <omp.h>
#include <string.h>
#include <unistd.h>

#include "../numerics/adamw_cpu.h"
#include "../model/gpt2_model_file.h"
#include "../model/grad_norm.h"
#include "../utils.h"

// ---------------------------------------------------------------------------------
// small helpers

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
// Without AVX, GCC warns that returning v8f has another ABI; it only leaves static
// functions here, so the ABI never matters. (Vectors are never passed as arguments:
// that note cannot be silenced this way, hence the macros below.)
#pragma GCC diagnostic ignored "-Wpsabi"

// memcpy loads/stores: unaligned and free of aliasing questions; GCC emits vmovups.
static inline v8f ld8(const float *p) {
    v8f v;
    memcpy(&v, p, sizeof(v));
    return v;
}
#define ST8(p, v)                              \
    do {                                       \
        v8f st8_v_ = (v);                      \
        memcpy((p), &st8_v_, sizeof(st8_v_));  \
    } while (0)
// Lane-wise mask ? a : b (mask lanes all ones or all zeros).
#define SELECT8(mask, a, b) ((v8f)(((v8i)(a) & (mask)) | ((v8i)(b) & ~(mask))))

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

// 64-byte aligned, so ymm rows do not straddle cache lines more than they must.
static float *alloc_floats(size_t n) {
    void *p = NULL;
    int rc = posix_memalign(&p, 64, size_mul(n ? n : 1, sizeof(float), "float buffer"));
    if (rc != 0) die("out of host memory allocating %zu floats: %s", n, strerror(rc));
    return (float *)p;
}

// ---------------------------------------------------------------------------------
// matmuls. Weights are (OC, IC) row-major: out = inp @ W^T + b. Every output element
// is one sequential sum (ascending over IC, OC or N); tiling only decides when the
// running sum is kept in a register and when in memory, never the order.

// Tile shape (rows, 8-float vectors per row); overridable for tuning, and every
// shape gives the same numbers. 6 x 16 uses 12 of the 16 ymm registers as accumulators.
#ifndef GPT2_MR
#define GPT2_MR 6
#endif
#ifndef GPT2_NV
#define GPT2_NV 2
#endif
enum { MR = GPT2_MR, NV = GPT2_NV, NR = 8 * NV }; // register tile: MR rows x NR columns
enum { FWD_OB = 4 * NR, FWD_NB = 16 * MR };      // forward task: packed weight rows x input rows
enum { DW_OG = 16 * MR };                        // dw task: output rows (16 tiles)
enum { PACK_FLOATS = 32768 };                    // 128 KiB packed blocks stay in L2

static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }
static int round_nr(int n) { return (n + NR - 1) / NR * NR; }
// Rows of a (rows x IC) block that fit in PACK_FLOATS.
static int block_rows(int IC) { return imax(MR, PACK_FLOATS / round_nr(IC)); }

// Scratch floats one thread needs in matmul_forward / matmul_backward. Every thread
// packs privately: no thread waits for another inside a matmul.
static size_t matmul_scratch_per_thread(int IC) {
    size_t icp = (size_t)round_nr(IC), br = (size_t)block_rows(IC);
    size_t fwd = round16(icp * FWD_OB);
    size_t bwd = round16(br * icp) + round16(br * DW_OG);
    return fwd > bwd ? fwd : bwd;
}

// pack[i * FWD_OB + j] = W[o0 + j][i]: the block transposed so that a tile's columns
// are contiguous; columns past oc are zero (computed, never stored).
static void pack_weights(float *pack, const float *w, int o0, int oc, int IC) {
    for (int j = 0; j < FWD_OB; j++) {
        if (j < oc) {
            const float *row = w + (size_t)(o0 + j) * IC;
            for (int i = 0; i < IC; i++) pack[(size_t)i * FWD_OB + j] = row[i];
        } else {
            for (int i = 0; i < IC; i++) pack[(size_t)i * FWD_OB + j] = 0.0f;
        }
    }
}

// Copies panel p (columns [p * NR, p * NR + NR)) of rows [0, rows) of a (rows x ld)
// matrix: out[r * NR + j] = a[r][p * NR + j], zero past cols.
static void pack_panel(float *out, const float *a, size_t ld, int rows, int cols, int p) {
    int c0 = p * NR, nc = imin(NR, cols - c0);
    for (int r = 0; r < rows; r++) {
        float *o = out + (size_t)r * NR;
        const float *s = a + (size_t)r * ld + c0;
        if (nc == NR) {
            memcpy(o, s, NR * sizeof(float));
        } else {
            for (int j = 0; j < NR; j++) o[j] = j < nc ? s[j] : 0.0f;
        }
    }
}

// Stores an MR x NR register tile: rows < nr, columns < nc.
static inline void store_tile(float *out, size_t ldo, v8f acc[MR][NV], int nr, int nc) {
    for (int r = 0; r < nr; r++) {
        if (nc == NR) {
            for (int j = 0; j < NV; j++) ST8(out + r * ldo + 8 * j, acc[r][j]);
        } else {
            float tmp[NR];
            for (int j = 0; j < NV; j++) ST8(tmp + 8 * j, acc[r][j]);
            memcpy(out + r * ldo, tmp, (size_t)nc * sizeof(float));
        }
    }
}

// Loads rows < nr, columns < nc of a tile (zero elsewhere).
static inline void load_tile(v8f acc[MR][NV], const float *src, size_t lds, int nr, int nc) {
    for (int r = 0; r < MR; r++) {
        float tmp[NR] = {0};
        if (r < nr) memcpy(tmp, src + r * lds, (size_t)nc * sizeof(float));
        for (int j = 0; j < NV; j++) acc[r][j] = ld8(tmp + 8 * j);
    }
}

// out[r][j] = bias[j] + sum_i a[r][i] * pack[i][j], i ascending. Rows past nr repeat
// row 0 (keeps the loop branch-free) and are not stored; likewise columns past nc.
static inline void fwd_tile(float *out, size_t ldo, const float *a, size_t lda, int nr,
                            const float *pk, int IC, const float *bias, int nc) {
    const float *row[MR];
    for (int r = 0; r < MR; r++) row[r] = a + (size_t)(r < nr ? r : 0) * lda;
    float b[NR] = {0};
    if (bias) memcpy(b, bias, (size_t)nc * sizeof(float));
    v8f acc[MR][NV];
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < NV; j++) acc[r][j] = ld8(b + 8 * j);
    for (int i = 0; i < IC; i++) {
        v8f wv[NV];
        for (int j = 0; j < NV; j++) wv[j] = ld8(pk + (size_t)i * FWD_OB + 8 * j);
        for (int r = 0; r < MR; r++) {
            float x = row[r][i];
            for (int j = 0; j < NV; j++) acc[r][j] += x * wv[j];
        }
    }
    store_tile(out, ldo, acc, nr, nc);
}

// out (N, OC) = inp (N, IC) @ W^T + bias (bias may be NULL); out's rows are ldo apart
// (OC, or a wider matrix whose column block a tile of W fills).
static void matmul_forward(float *ws, float *out, size_t ldo, const float *inp, const float *w, const float *bias,
                           int N, int IC, int OC) {
    const int ncb = (OC + FWD_OB - 1) / FWD_OB, nrb = (N + FWD_NB - 1) / FWD_NB;
    const size_t per_thread = matmul_scratch_per_thread(IC);
    #pragma omp parallel
    {
        float *pack = ws + (size_t)omp_get_thread_num() * per_thread;
        int packed = -1; // a chunk of tasks shares one weight block
        // Dynamic chunks (any split gives the same numbers) keep both cores busy when
        // one of them is also running something else.
        #pragma omp for schedule(dynamic, nrb)
        for (int task = 0; task < ncb * nrb; task++) {
            int cb = task / nrb, rb = task % nrb;
            int o0 = cb * FWD_OB, oc = imin(FWD_OB, OC - o0);
            if (cb != packed) {
                pack_weights(pack, w, o0, oc, IC);
                packed = cb;
            }
            int n1 = imin(N, (rb + 1) * FWD_NB);
            for (int n = rb * FWD_NB; n < n1; n += MR)
                for (int j = 0; j < oc; j += NR)
                    fwd_tile(out + (size_t)n * ldo + o0 + j, ldo, inp + (size_t)n * IC, (size_t)IC,
                             imin(MR, n1 - n), pack + j, IC, bias ? bias + o0 + j : NULL, imin(NR, oc - j));
        }
    }
}

// dinp tile (+)= sum over o < no of dout[r][o] * wp[o][:], o ascending; wp: NR
// weight columns, rows ldwp apart. Starts from zero when first.
static inline void dinp_tile(float *dinp, size_t ldi, const float *dout, size_t ldd, int nr, int nc,
                             const float *wp, size_t ldwp, int no, int first) {
    const float *drow[MR];
    for (int r = 0; r < MR; r++) drow[r] = dout + (size_t)(r < nr ? r : 0) * ldd;
    v8f acc[MR][NV];
    if (first) {
        for (int r = 0; r < MR; r++)
            for (int j = 0; j < NV; j++) acc[r][j] = (v8f){0};
    } else {
        load_tile(acc, dinp, ldi, nr, nc);
    }
    for (int o = 0; o < no; o++) {
        v8f wv[NV];
        for (int j = 0; j < NV; j++) wv[j] = ld8(wp + (size_t)o * ldwp + 8 * j);
        for (int r = 0; r < MR; r++) {
            float x = drow[r][o];
            for (int j = 0; j < NV; j++) acc[r][j] += x * wv[j];
        }
    }
    store_tile(dinp, ldi, acc, nr, nc);
}

// dw tile += sum over n < nn of dp[n][r] * ip[n][:], n ascending; dp holds MR packed
// dout columns per row, ip one NR panel of the packed inputs.
static inline void dw_tile(float *dw, size_t ldw, int orows, int nc, const float *dp, const float *ip, int nn) {
    v8f acc[MR][NV];
    load_tile(acc, dw, ldw, orows, nc);
    for (int n = 0; n < nn; n++) {
        v8f iv[NV];
        for (int j = 0; j < NV; j++) iv[j] = ld8(ip + (size_t)n * NR + 8 * j);
        for (int r = 0; r < MR; r++) {
            float x = dp[(size_t)n * MR + r];
            for (int j = 0; j < NV; j++) acc[r][j] += x * iv[j];
        }
    }
    store_tile(dw, ldw, acc, orows, nc);
}

// dinp = dout @ W (overwritten, or added to when accumulate); dw += dout^T @ inp; dbias +=
// column sums of dout (dbias may be NULL). dout (N, OC) with rows ldd apart (OC, or the
// column block of a tile), inp (N, IC), W (OC, IC). Accumulating continues each dinp
// element's sum from its stored value: the tiles of one W, in order, give the bits of W whole.
static void matmul_backward(float *ws, float *dinp, int accumulate, float *dw, float *dbias, const float *dout,
                            size_t ldd, const float *inp, const float *w, int N, int IC, int OC) {
    const int br = block_rows(IC), np = (IC + NR - 1) / NR, ntiles = (N + MR - 1) / MR;
    const int ngroups = (OC + DW_OG - 1) / DW_OG;
    const int nthreads = omp_get_max_threads();
    const size_t per_thread = matmul_scratch_per_thread(IC);
    // dinp tasks: (panel group, row range) pairs, about two per thread (dynamic
    // schedule, for balance when a core is shared). Each task streams its columns of
    // W once and its rows of dout once: choose the split that moves the fewest bytes,
    // pg * N * OC + rp * IC * OC.
    const int want = nthreads > 1 ? 2 * nthreads : 1;
    int pg = 1, rp = imin(ntiles, want);
    double best = 1e300;
    for (int g = 1; g <= imin(np, want); g++) {
        int r = imin(ntiles, (want + g - 1) / g);
        double cost = (double)g * N + (double)r * IC;
        if (cost < best) { best = cost; pg = g; rp = r; }
    }
    const int panels_per = (np + pg - 1) / pg, tiles_per = (ntiles + rp - 1) / rp;
    #pragma omp parallel
    {
        float *pk = ws + (size_t)omp_get_thread_num() * per_thread;
        float *dp = pk + round16((size_t)br * round_nr(IC));
        #pragma omp for schedule(dynamic, 1) nowait
        for (int task = 0; task < pg * rp; task++) {
            int p0 = task / rp * panels_per, p1 = imin(np, p0 + panels_per);
            int t0 = task % rp * tiles_per, t1 = imin(ntiles, t0 + tiles_per);
            for (int o0 = 0; o0 < OC; o0 += br) { // W blocks in order: the sums run o ascending
                int no = imin(br, OC - o0);
                for (int p = p0; p < p1; p++) {
                    // full panels are read in place (rows IC apart); a ragged last
                    // panel is packed with zero padding
                    const float *wp = w + (size_t)o0 * IC + p * NR;
                    size_t ldwp = (size_t)IC;
                    if (IC - p * NR < NR) {
                        pack_panel(pk, w + (size_t)o0 * IC, (size_t)IC, no, IC, p);
                        wp = pk;
                        ldwp = NR;
                    }
                    for (int t = t0; t < t1; t++) {
                        int n = t * MR;
                        dinp_tile(dinp + (size_t)n * IC + p * NR, (size_t)IC, dout + (size_t)n * ldd + o0, ldd,
                                  imin(MR, N - n), imin(NR, IC - p * NR), wp, ldwp, no, o0 == 0 && !accumulate);
                    }
                }
            }
        }
        // dw: tasks are groups of DW_OG output rows, each running over the input blocks
        // in order. A thread keeps its packed input block while the next task needs
        // the same one (always, when N fits in one block).
        int packed_n0 = -1;
        #pragma omp for schedule(dynamic, 1) nowait
        for (int gi = 0; gi < ngroups; gi++) {
            int g0 = gi * DW_OG, tiles = (imin(DW_OG, OC - g0) + MR - 1) / MR;
            for (int n0 = 0; n0 < N; n0 += br) {
                int nn = imin(br, N - n0);
                if (packed_n0 != n0) { // input block as NR panels
                    for (int p = 0; p < np; p++)
                        pack_panel(pk + (size_t)p * nn * NR, inp + (size_t)n0 * IC, (size_t)IC, nn, IC, p);
                    packed_n0 = n0;
                }
                // dp[(t * nn + n) * MR + r] = dout[n0 + n][g0 + t * MR + r], zero past OC
                const int full = g0 + tiles * MR <= OC;
                for (int n = 0; n < nn; n++) {
                    const float *d = dout + (size_t)(n0 + n) * ldd + g0;
                    for (int t = 0; t < tiles; t++) {
                        float *q = dp + ((size_t)t * nn + n) * MR;
                        if (full) {
                            memcpy(q, d + t * MR, MR * sizeof(float));
                        } else {
                            for (int r = 0; r < MR; r++) q[r] = g0 + t * MR + r < OC ? d[t * MR + r] : 0.0f;
                        }
                    }
                }
                for (int t = 0; t < tiles; t++) {
                    int o = g0 + t * MR;
                    for (int p = 0; p < np; p++)
                        dw_tile(dw + (size_t)o * IC + p * NR, (size_t)IC, imin(MR, OC - o), imin(NR, IC - p * NR),
                                dp + (size_t)t * nn * MR, pk + (size_t)p * nn * NR, nn);
                }
            }
        }
        if (dbias) {
            #pragma omp for schedule(dynamic, 1) nowait
            for (int o0 = 0; o0 < OC; o0 += 64) {
                int oc = imin(64, OC - o0);
                float acc[64];
                memcpy(acc, dbias + o0, (size_t)oc * sizeof(float));
                for (int n = 0; n < N; n++) {
                    const float *d = dout + (size_t)n * ldd + o0;
                    for (int j = 0; j < oc; j++) acc[j] += d[j];
                }
                memcpy(dbias + o0, acc, (size_t)oc * sizeof(float));
            }
        }
    }
}

// ---------------------------------------------------------------------------------
// layers

static const float LN_EPS = 1e-5f;

// Tile [v0, v1) of wte's rows (wte points at row v0): out = wte[tok] for the tokens in it;
// the tile holding wpe (wpe non-NULL, the last) adds wpe[t] to every row, which the earlier
// tiles wrote. Each out element is wte[tok][c] + wpe[t][c], one add: untiled's bits.
static void encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe,
                            int B, int T, int C, int v0, int v1) {
    #pragma omp parallel for schedule(dynamic, 16)
    for (int n = 0; n < B * T; n++) {
        const int tok = tokens[n];
        const float *e = tok >= v0 && tok < v1 ? wte + (size_t)(tok - v0) * C : NULL;
        const float *p = wpe ? wpe + (size_t)(n % T) * C : NULL;
        float *o = out + (size_t)n * C;
        if (e && p) for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
        else if (e) for (int c = 0; c < C; c++) o[c] = e[c];
        else if (p) for (int c = 0; c < C; c++) o[c] += p[c];
    }
}

// Its backward on the same tile (dwte at row v0; dwpe NULL but in the last tile). Token rows
// can repeat, so threads split channels and walk the tokens in order: each dwte and dwpe
// element adds in token order, whatever the tiles.
static void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens,
                             int B, int T, int C, int v0, int v1) {
    #pragma omp parallel for schedule(dynamic, 1)
    for (int c0 = 0; c0 < C; c0 += 16) {
        int cc = imin(16, C - c0);
        for (int n = 0; n < B * T; n++) {
            const float *d = dout + (size_t)n * C + c0;
            const int tok = tokens[n];
            if (tok >= v0 && tok < v1) {
                float *a = dwte + (size_t)(tok - v0) * C + c0;
                for (int c = 0; c < cc; c++) a[c] += d[c];
            }
            if (dwpe) {
                float *p = dwpe + (size_t)(n % T) * C + c0;
                for (int c = 0; c < cc; c++) p[c] += d[c];
            }
        }
    }
}

static void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                              const float *w, const float *b, int N, int C) {
    #pragma omp parallel for schedule(dynamic, 16)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float s = 0.0f;
        for (int c = 0; c < C; c++) s += x[c];
        float mu = s / (float)C;
        float v = 0.0f;
        for (int c = 0; c < C; c++) {
            float d = x[c] - mu;
            v += d * d;
        }
        float rs = 1.0f / sqrtf(v / (float)C + LN_EPS);
        float *o = out + (size_t)n * C;
        for (int c = 0; c < C; c++) o[c] = (x[c] - mu) * rs * w[c] + b[c];
        mean[n] = mu;
        rstd[n] = rs;
    }
}

// dinp += d(LN)/d(inp)^T dout; dw, db accumulate over rows in order.
static void layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                               const float *inp, const float *mean, const float *rstd,
                               const float *w, int N, int C) {
    #pragma omp parallel
    {
        #pragma omp for schedule(dynamic, 16)
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C, *d = dout + (size_t)n * C;
            float mu = mean[n], rs = rstd[n];
            float sd = 0.0f, sdx = 0.0f; // sums of dxhat and dxhat * xhat
            for (int c = 0; c < C; c++) {
                float dxh = d[c] * w[c];
                sd += dxh;
                sdx += dxh * ((x[c] - mu) * rs);
            }
            sd /= (float)C;
            sdx /= (float)C;
            float *di = dinp + (size_t)n * C;
            for (int c = 0; c < C; c++) {
                float xh = (x[c] - mu) * rs;
                di[c] += (d[c] * w[c] - sd - xh * sdx) * rs;
            }
        }
        #pragma omp for schedule(dynamic, 1)
        for (int c0 = 0; c0 < C; c0 += 64) {
            int cc = imin(64, C - c0);
            float aw[64], ab[64];
            memcpy(aw, dw + c0, (size_t)cc * sizeof(float));
            memcpy(ab, db + c0, (size_t)cc * sizeof(float));
            for (int n = 0; n < N; n++) {
                const float *x = inp + (size_t)n * C + c0, *d = dout + (size_t)n * C + c0;
                float mu = mean[n], rs = rstd[n];
                for (int c = 0; c < cc; c++) {
                    aw[c] += d[c] * ((x[c] - mu) * rs);
                    ab[c] += d[c];
                }
            }
            memcpy(dw + c0, aw, (size_t)cc * sizeof(float));
            memcpy(db + c0, ab, (size_t)cc * sizeof(float));
        }
    }
}

static const float GELU_K = 0.7978845608028654f; // sqrt(2 / pi)
static const float GELU_A = 0.044715f;

static void gelu_forward(float *out, const float *inp, size_t n) {
    #pragma omp parallel for schedule(dynamic, 4096)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_K * (x + GELU_A * x * x * x)));
    }
}

// In place: d <- d * gelu'(x).
static void gelu_backward(float *d, const float *inp, size_t n) {
    #pragma omp parallel for schedule(dynamic, 4096)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float th = tanhf(GELU_K * (x + GELU_A * x * x * x));
        float dth = GELU_K * (1.0f + 3.0f * GELU_A * x * x) * (1.0f - th * th);
        d[i] *= 0.5f * (1.0f + th) + 0.5f * x * dth;
    }
}

// qkv: (B, T, 3C) as [q | k | v]; att: (B, NH, T, T) probabilities (zero above the
// diagonal); y: (B, T, C).
static void attention_forward(float *y, float *att, const float *qkv, int B, int T, int C, int NH) {
    const int HS = C / NH;
    const float scale = 1.0f / sqrtf((float)HS);
    const size_t C3 = (size_t)3 * C;
    #pragma omp parallel for schedule(dynamic, 16)
    for (long task = 0; task < (long)B * NH * T; task++) {
        int t = (int)(task % T), h = (int)(task / T % NH), b = (int)(task / ((long)T * NH));
        const float *q = qkv + ((size_t)b * T + t) * C3 + (size_t)h * HS;
        float *p = att + (((size_t)b * NH + h) * T + t) * T;
        float mx = -INFINITY;
        for (int t2 = 0; t2 <= t; t2++) {
            const float *k = qkv + ((size_t)b * T + t2) * C3 + C + (size_t)h * HS;
            float s = 0.0f;
            for (int d = 0; d < HS; d++) s += q[d] * k[d];
            s *= scale;
            p[t2] = s;
            if (s > mx) mx = s;
        }
        float sum = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
            p[t2] = expf(p[t2] - mx);
            sum += p[t2];
        }
        float inv = 1.0f / sum;
        for (int t2 = 0; t2 <= t; t2++) p[t2] *= inv;
        for (int t2 = t + 1; t2 < T; t2++) p[t2] = 0.0f;
        float *o = y + ((size_t)b * T + t) * C + (size_t)h * HS;
        for (int d = 0; d < HS; d++) o[d] = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
            const float *v = qkv + ((size_t)b * T + t2) * C3 + 2 * (size_t)C + (size_t)h * HS;
            for (int d = 0; d < HS; d++) o[d] += p[t2] * v[d];
        }
    }
}

// dqkv is overwritten. Each (b, h) owns its q, k, v slices; rows go in order of t,
// because dk and dv gather contributions from every later query.
static void attention_backward(float *dqkv, float *datt, const float *dy, const float *att,
                               const float *qkv, int B, int T, int C, int NH) {
    const int HS = C / NH;
    const float scale = 1.0f / sqrtf((float)HS);
    const size_t C3 = (size_t)3 * C;
    #pragma omp parallel for schedule(dynamic, 1)
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        for (int t = 0; t < T; t++) {
            float *r = dqkv + ((size_t)b * T + t) * C3 + (size_t)h * HS;
            for (int d = 0; d < HS; d++) r[d] = r[d + C] = r[d + 2 * C] = 0.0f;
        }
        for (int t = 0; t < T; t++) {
            const float *p = att + ((size_t)bh * T + t) * T;
            float *dp = datt + ((size_t)bh * T + t) * T;
            const float *g = dy + ((size_t)b * T + t) * C + (size_t)h * HS;
            const float *q = qkv + ((size_t)b * T + t) * C3 + (size_t)h * HS;
            float *dq = dqkv + ((size_t)b * T + t) * C3 + (size_t)h * HS;
            // through y = sum p v: dp and dv
            for (int t2 = 0; t2 <= t; t2++) {
                const float *v = qkv + ((size_t)b * T + t2) * C3 + 2 * (size_t)C + (size_t)h * HS;
                float *dv = dqkv + ((size_t)b * T + t2) * C3 + 2 * (size_t)C + (size_t)h * HS;
                float s = 0.0f;
                for (int d = 0; d < HS; d++) {
                    s += g[d] * v[d];
                    dv[d] += p[t2] * g[d];
                }
                dp[t2] = s;
            }
            // through the softmax, then the scaled scores q.k
            float pdp = 0.0f;
            for (int t2 = 0; t2 <= t; t2++) pdp += p[t2] * dp[t2];
            for (int t2 = 0; t2 <= t; t2++) {
                float ds = p[t2] * (dp[t2] - pdp) * scale;
                const float *k = qkv + ((size_t)b * T + t2) * C3 + C + (size_t)h * HS;
                float *dk = dqkv + ((size_t)b * T + t2) * C3 + C + (size_t)h * HS;
                for (int d = 0; d < HS; d++) {
                    dq[d] += ds * k[d];
                    dk[d] += ds * q[d];
                }
            }
        }
    }
}

static void residual_add(float *out, const float *a, size_t n) {
    #pragma omp parallel for schedule(dynamic, 4096)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + out[i];
}

// e^x for x <= 0, within a few ulp of expf: Cody-Waite reduction x = k ln2 + r,
// |r| <= ln2/2, then a degree-7 Taylor polynomial (truncation < 1e-8 relative) times
// 2^k; 0 below -87. Plain arithmetic in vectors (glibc's expf does not vectorize
// without -ffast-math), the same on every machine; exp_nonpos is the same steps on
// one element, for row ends, and gives identical bits.
typedef float v4f __attribute__((vector_size(16)));
typedef double v4d __attribute__((vector_size(32)));
static const float EXP_LO = -87.0f, EXP_MAGIC = 12582912.0f; // 1.5 * 2^23 rounds to integer
static const float LOG2E = 1.44269504f, LN2_HI = 0.693145751953125f, LN2_LO = 1.42860677e-6f;
static const float EXP_C[8] = {1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f,
                               1.0f / 6.0f, 0.5f, 1.0f, 1.0f};

static inline v8f splat(float x) { return (v8f){x, x, x, x, x, x, x, x}; }

// e^(p[0..7] - sub)
static inline v8f exp8_nonpos(const float *p8, float sub) {
    v8f x = ld8(p8) - sub;
    v8i ok = x > splat(EXP_LO);
    v8f xc = SELECT8(ok, x, splat(EXP_LO)); // keeps 2^k normal (and NaN out of the int conversion)
    v8f kf = (xc * LOG2E + EXP_MAGIC) - EXP_MAGIC;
    v8f r = (xc - kf * LN2_HI) - kf * LN2_LO; // kf * LN2_HI is exact (15-bit constant)
    v8f p = splat(EXP_C[0]);
    for (int i = 1; i < 8; i++) p = p * r + EXP_C[i];
    v8i bits = (__builtin_convertvector(kf, v8i) + 127) << 23;
    return SELECT8(ok, p * (v8f)bits, splat(0.0f));
}

static inline float exp_nonpos(float x) {
    int ok = x > EXP_LO;
    float xc = ok ? x : EXP_LO;
    float kf = (xc * LOG2E + EXP_MAGIC) - EXP_MAGIC;
    float r = (xc - kf * LN2_HI) - kf * LN2_LO;
    float p = EXP_C[0];
    for (int i = 1; i < 8; i++) p = p * r + EXP_C[i];
    int32_t bits = ((int32_t)kf + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof(scale));
    return ok ? p * scale : 0.0f;
}

// Softmax over the first V logits of each row, in place (columns V..Vp-1 become 0),
// and the per-token cross-entropy. Fixed lanes of 8 with a fixed final combination
// keep the order of the sums independent of anything but V.
static void softmax_xent_forward(float *probs, float *losses, const int *targets, int N, int V, int Vp) {
    #pragma omp parallel for schedule(dynamic, 4)
    for (int n = 0; n < N; n++) {
        float *row = probs + (size_t)n * Vp;
        const int V8 = V / 8 * 8;
        // the max takes a NaN logit (x != x), so it reaches the loss instead of vanishing
        // as a probability of 0 (exp_nonpos maps NaN to 0)
        v8f vmax = splat(-INFINITY);
        for (int o = 0; o < V8; o += 8) {
            v8f x = ld8(row + o);
            vmax = SELECT8((x > vmax) | (x != x), x, vmax);
        }
        float mx = -INFINITY, lanes[8];
        ST8(lanes, vmax);
        for (int j = 0; j < 8; j++) mx = lanes[j] > mx || lanes[j] != lanes[j] ? lanes[j] : mx;
        for (int o = V8; o < V; o++) mx = row[o] > mx || row[o] != row[o] ? row[o] : mx;
        float zt = row[targets[n]] - mx;
        v4d slo = {0}, shi = {0}; // lanes 0-3 and 4-7 of the sum, in double
        for (int o = 0; o < V8; o += 8) {
            ST8(row + o, exp8_nonpos(row + o, mx));
            v4f lo, hi;
            memcpy(&lo, row + o, sizeof(lo));
            memcpy(&hi, row + o + 4, sizeof(hi));
            slo += __builtin_convertvector(lo, v4d);
            shi += __builtin_convertvector(hi, v4d);
        }
        double lsum[8], sum = 0.0;
        memcpy(lsum, &slo, sizeof(slo));
        memcpy(lsum + 4, &shi, sizeof(shi));
        for (int j = 0; j < 8; j++) sum += lsum[j];
        for (int o = V8; o < V; o++) {
            row[o] = exp_nonpos(row[o] - mx);
            sum += (double)row[o];
        }
        float inv = (float)(1.0 / sum);
        for (int o = 0; o < V; o++) row[o] *= inv;
        for (int o = V; o < Vp; o++) row[o] = 0.0f;
        losses[n] = (float)(log(sum) - (double)zt);
    }
}

// ---------------------------------------------------------------------------------
// activation layout

// The residual stream: res[l] is block l's input (res[0] the embeddings) and res[L] the
// last block's output, L+1 slots; with act_offload two slots taken in turn (block l reads
// slot l % 2 and writes the other). The per-block arrays have one slot per layer, or a
// single slot every block reuses under act_checkpoint.
typedef struct {
    float *res;                             // R slots of (N, C)
    float *ln1, *ln1_mean, *ln1_rstd;       // per block slot: (N, C), (N), (N)
    float *qkv, *att, *atty, *res2;         // (N, 3C), (B, NH, T, T), (N, C), (N, C)
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fch, *fch_gelu;                  // (N, 4C), (N, 4C)
    float *lnf, *lnf_mean, *lnf_rstd;       // (N, C), (N), (N)
    float *logits, *losses;                 // (N, Vp), (N)
} Acts;

typedef struct {
    float *dres, *dln, *datty, *dqkv, *datt, *dfch;
} GradActs;

// Each array starts on a 64-byte boundary.

static float *carve(float **base, size_t n) {
    float *p = *base;
    *base += round16(n);
    return p;
}

// Activation sizes come from the config and (B, T): every product and the total are
// overflow-checked (B * NH * T * T * L is the one that can outgrow size_t).
static size_t mul_acts(size_t a, size_t b) { return size_mul(a, b, "GPT-2 activation sizes"); }
static size_t round16_acts(size_t n) { return size_add(n, 15, "GPT-2 activation sizes") & ~(size_t)15; }

static const GPT2CpuOptions default_options = {0, 0, 1, 1, 1, NULL};
static const GPT2CpuOptions *options_or_default(const GPT2CpuOptions *o) { return o ? o : &default_options; }

static size_t residual_slots(const GPT2Config *c, const GPT2CpuOptions *o) {
    return o->act_offload ? 2 : (size_t)c->num_layers + 1;
}
static size_t block_slots(const GPT2Config *c, const GPT2CpuOptions *o) {
    return o->act_checkpoint ? 1 : (size_t)c->num_layers;
}

// With base NULL only the size is computed (returned in floats).
static size_t layout_acts(const GPT2Config *c, const GPT2CpuOptions *o, int B, int T, float *base, Acts *a) {
    const size_t N = mul_acts((size_t)B, (size_t)T), C = (size_t)c->channels;
    const size_t NH = (size_t)c->num_heads, Vp = (size_t)c->padded_vocab_size;
    const size_t NC = mul_acts(N, C), att = mul_acts(mul_acts(mul_acts((size_t)B, NH), (size_t)T), (size_t)T);
    const size_t R = residual_slots(c, o), S = block_slots(c, o);
    size_t sizes[] = {NC,
                      NC, N, N, mul_acts(3, NC), att, NC, NC, NC, N, N, mul_acts(4, NC), mul_acts(4, NC),
                      NC, N, N, mul_acts(N, Vp), N};
    size_t total = 0;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t slots = i == 0 ? R : (i <= 12 ? S : 1);
        total = size_add(total, mul_acts(slots, round16_acts(sizes[i])), "GPT-2 activation sizes");
    }
    if (base) {
        float *p = base;
        a->res = carve(&p, R * round16(sizes[0]));
        float **per_block[] = {&a->ln1, &a->ln1_mean, &a->ln1_rstd, &a->qkv, &a->att, &a->atty, &a->res2,
                               &a->ln2, &a->ln2_mean, &a->ln2_rstd, &a->fch, &a->fch_gelu};
        for (int i = 0; i < 12; i++) *per_block[i] = carve(&p, S * round16(sizes[1 + i]));
        a->lnf = carve(&p, sizes[13]);
        a->lnf_mean = carve(&p, sizes[14]);
        a->lnf_rstd = carve(&p, sizes[15]);
        a->logits = carve(&p, sizes[16]);
        a->losses = carve(&p, sizes[17]);
    }
    return total;
}

// Slot s of an array of (N, ...) slots of n floats.
static float *slot_of(float *arr, size_t n, size_t s) { return arr + s * round16(n); }

static size_t layout_grad_acts(const GPT2Config *c, int B, int T, float *base, GradActs *g) {
    const size_t N = mul_acts((size_t)B, (size_t)T), C = (size_t)c->channels, NH = (size_t)c->num_heads;
    const size_t NC = mul_acts(N, C), att = mul_acts(mul_acts(mul_acts((size_t)B, NH), (size_t)T), (size_t)T);
    size_t sizes[] = {NC, NC, NC, mul_acts(3, NC), att, mul_acts(4, NC)};
    size_t total = 0;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        total = size_add(total, round16_acts(sizes[i]), "GPT-2 activation sizes");
    if (base) {
        float *p = base;
        g->dres = carve(&p, sizes[0]);
        g->dln = carve(&p, sizes[1]);
        g->datty = carve(&p, sizes[2]);
        g->dqkv = carve(&p, sizes[3]);
        g->datt = carve(&p, sizes[4]);
        g->dfch = carve(&p, sizes[5]);
    }
    return total;
}

// The host tier of act_offload: block inputs 0..L-2 (block L-1's input is still in its
// slot when its backward starts), one (N, C) slot each. In a swap file (act_offload 2) they
// are slots of the file, and the host holds one, aligned for O_DIRECT, that they pass through.
#define ACT_FILE_ALIGN 4096
static size_t act_file_slot_floats(size_t NC) {
    return size_add(NC, ACT_FILE_ALIGN / sizeof(float) - 1, "GPT-2 activation sizes") / (ACT_FILE_ALIGN / sizeof(float)) *
           (ACT_FILE_ALIGN / sizeof(float));
}
static size_t layout_act_host(const GPT2Config *c, const GPT2CpuOptions *o, int B, int T) {
    if (!o->act_offload || c->num_layers < 2) return 0;
    const size_t NC = mul_acts(mul_acts((size_t)B, (size_t)T), (size_t)c->channels);
    if (o->act_offload == GPT2_ACT_OFFLOAD_FILE) return act_file_slot_floats(NC);
    return mul_acts((size_t)c->num_layers - 1, round16_acts(NC));
}

size_t gpt2_cpu_activation_bytes(const GPT2Config *c, int B, int T, const GPT2CpuOptions *opt) {
    const GPT2CpuOptions *o = options_or_default(opt);
    size_t floats = size_add(layout_acts(c, o, B, T, NULL, NULL), layout_grad_acts(c, B, T, NULL, NULL),
                             "GPT-2 activation sizes");
    return size_mul(floats, sizeof(float), "GPT-2 activation sizes");
}

size_t gpt2_cpu_sample_extra_bytes(const GPT2Config *c, int B, int T, int gen_tokens, const GPT2CpuOptions *opt) {
    const GPT2CpuOptions *o = options_or_default(opt);
    int t = gen_tokens < c->max_seq_len - 1 ? gen_tokens : c->max_seq_len - 1;
    if (t < 1) return 0;
    size_t train = layout_acts(c, o, B, T, NULL, NULL), sample = layout_acts(c, o, 1, t, NULL, NULL);
    return sample > train ? size_mul(sample - train, sizeof(float), "GPT-2 activation sizes") : 0;
}

// The peaks the report measures: what acts and grad_acts (act_host) hold now, if more.
static void note_peak(GPT2 *m) {
    if (m->act_capacity + m->grad_act_capacity > m->act_peak) m->act_peak = m->act_capacity + m->grad_act_capacity;
    if (m->act_host_capacity > m->act_host_peak) m->act_host_peak = m->act_host_capacity;
}

size_t gpt2_cpu_activation_host_bytes(const GPT2Config *c, int B, int T, const GPT2CpuOptions *opt) {
    return size_mul(layout_act_host(c, options_or_default(opt), B, T), sizeof(float), "GPT-2 activation sizes");
}

// The swap file: a slot for each of the block inputs 0..L-2.
static size_t act_file_bytes(int L, size_t NC) {
    return size_mul(mul_acts((size_t)L - 1, act_file_slot_floats(NC)), sizeof(float), "GPT-2 activation sizes");
}

size_t gpt2_cpu_activation_file_bytes(const GPT2Config *c, int B, int T, const GPT2CpuOptions *opt) {
    const GPT2CpuOptions *o = options_or_default(opt);
    if (o->act_offload != GPT2_ACT_OFFLOAD_FILE || c->num_layers < 2) return 0;
    return act_file_bytes(c->num_layers, mul_acts(mul_acts((size_t)B, (size_t)T), (size_t)c->channels));
}

// ---------------------------------------------------------------------------------
// build / free

// Points the gradient tables at a flat buffer in the parameters' layout (or NULL entries).
static void point_grads(GPT2 *m, float *base) {
    const int L = m->config.num_layers, K = m->opt.tile_linear, KV = m->opt.tile_vocab;
    size_t off = 0;
    for (int t = 0; t < GPT2_NUM_PARAM_TENSORS; t++) {
        const int nl = gpt2_param_is_per_layer(t) ? L : 1, tiles = gpt2_param_tiles(t, K, KV);
        const size_t per = m->param_sizes[t] / (size_t)nl / (size_t)tiles, n = (size_t)nl * (size_t)tiles;
        for (size_t i = 0; i < n; i++) m->g[t][i] = base ? base + off + i * per : NULL;
        off += m->param_sizes[t];
    }
}

// The pointer tables for the options' tiles: into the flat buffers, or NULL entries when a
// parameter manager fills them per unit.
static void build_tables(GPT2 *m) {
    const int L = m->config.num_layers, K = m->opt.tile_linear, KV = m->opt.tile_vocab;
    size_t off = 0;
    for (int t = 0; t < GPT2_NUM_PARAM_TENSORS; t++) {
        const int nl = gpt2_param_is_per_layer(t) ? L : 1, tiles = gpt2_param_tiles(t, K, KV);
        const size_t per = m->param_sizes[t] / (size_t)nl / (size_t)tiles, n = (size_t)nl * (size_t)tiles;
        free(m->w[t]);
        free(m->g[t]);
        m->w[t] = (float **)malloc_check(n * sizeof(float *));
        m->g[t] = (float **)malloc_check(n * sizeof(float *));
        for (size_t i = 0; i < n; i++) m->w[t][i] = m->params ? m->params + off + i * per : NULL;
        off += m->param_sizes[t];
    }
    point_grads(m, m->params ? m->grads : NULL);
}

// params NULL: external parameters (a parameter manager fills the tables per unit).
static void setup(GPT2 *m, const GPT2Config *c, float *params) {
    memset(m, 0, sizeof(*m));
    m->act_fd = -1;
    m->config = *c;
    m->opt = default_options;
    m->num_parameters = gpt2_param_sizes(c, m->param_sizes);
    m->params = params;
    if (params) {
        m->grads = alloc_floats(m->num_parameters);
        memset(m->grads, 0, m->num_parameters * sizeof(float));
    }
    build_tables(m);
    m->mean_loss = -1.0f;
}

static void check_config(const GPT2Config *c, const char *what) {
    char err[256];
    if (gpt2_config_validate(c, err, sizeof(err)) != 0) die("invalid GPT-2 config (%s): %s", what, err);
}

void gpt2_cpu_build(GPT2 *m, const GPT2Config *c, uint64_t seed) {
    check_config(c, "gpt2_cpu_build");
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    float *params = alloc_floats(gpt2_param_sizes(c, sizes));
    gpt2_init_params(c, params, seed);
    setup(m, c, params);
}

void gpt2_cpu_build_external(GPT2 *m, const GPT2Config *c) {
    check_config(c, "gpt2_cpu_build_external");
    setup(m, c, NULL);
}

// The swap file goes with the host slot it moves through: the next forward sizes both anew
// (a slot kept from a larger batch would move past a smaller host slot).
static void close_act_file(GPT2 *m) {
    if (m->act_fd < 0) return;
    close(m->act_fd);
    m->act_fd = -1;
    m->act_slot_bytes = 0;
}

void gpt2_cpu_set_options(GPT2 *m, const GPT2CpuOptions *opt) {
    const GPT2CpuOptions *o = options_or_default(opt);
    char err[256];
    if (o->act_checkpoint != 0 && o->act_checkpoint != 1)
        die("gpt2_cpu_set_options: act_checkpoint %d must be 0 or 1", o->act_checkpoint);
    if (o->act_offload < 0 || o->act_offload > GPT2_ACT_OFFLOAD_FILE)
        die("gpt2_cpu_set_options: act_offload %d must be 0, 1 or 2 (a swap file)", o->act_offload);
    if (o->act_offload == GPT2_ACT_OFFLOAD_FILE && (!o->act_swap_dir || !*o->act_swap_dir))
        die("gpt2_cpu_set_options: act_offload 2 keeps the block inputs in a swap file: it needs a folder");
    if (o->act_offload && !o->act_checkpoint)
        die("gpt2_cpu_set_options: act_offload moves the checkpoints of act_checkpoint: it needs act_checkpoint 1");
    if (o->micro_grads != 0 && o->micro_grads != 1)
        die("gpt2_cpu_set_options: micro_grads %d must be 0 or 1", o->micro_grads);
    if (gpt2_tile_check(&m->config, o->tile_linear, err, sizeof(err)) != 0) die("gpt2_cpu_set_options: %s", err);
    if (gpt2_vocab_tile_check(&m->config, o->tile_vocab, err, sizeof(err)) != 0) die("gpt2_cpu_set_options: %s", err);
    m->opt = *o;
    build_tables(m);
    // laid out anew by the next forward for these options
    free(m->acts);
    free(m->act_host);
    m->acts = m->act_host = NULL;
    m->act_capacity = m->act_host_capacity = 0;
    close_act_file(m);
    m->backward_ready = 0;
}

static void set_slot(void *model, const GPT2Slice *s, void *params, void *grads) {
    GPT2 *m = (GPT2 *)model;
    const int i = s->layer * gpt2_param_tiles(s->tensor, m->opt.tile_linear, m->opt.tile_vocab) + s->tile;
    m->w[s->tensor][i] = (float *)params;
    if (grads) m->g[s->tensor][i] = (float *)grads;
}

GPT2Slots gpt2_cpu_slots(GPT2 *m) { return (GPT2Slots){m, set_slot, &m->hooks, m->opt.tile_linear, m->opt.tile_vocab}; }

void gpt2_cpu_build_from_file(GPT2 *m, const char *path) {
    GPT2Config c;
    float *params = gpt2_model_file_read(path, &c); // validates the header itself
    setup(m, &c, params);
}

void gpt2_cpu_release_activations(GPT2 *m) {
    free(m->acts);
    free(m->grad_acts);
    free(m->act_host);
    m->acts = m->grad_acts = m->act_host = NULL;
    m->act_capacity = m->grad_act_capacity = m->act_host_capacity = 0;
    m->logits_or_probs = NULL;   // they pointed into acts
    m->losses = NULL;
    close_act_file(m);
    m->backward_ready = 0;
    malloc_trim(0);   // freed heap pages too (glibc keeps them otherwise), not only mmapped blocks
}

void gpt2_cpu_free(GPT2 *m) {
    if (m->act_fd >= 0) close(m->act_fd);
    free(m->params);
    free(m->grads);
    free(m->grads_micro);
    free(m->m);
    free(m->v);
    for (int t = 0; t < GPT2_NUM_PARAM_TENSORS; t++) {
        free(m->w[t]);
        free(m->g[t]);
    }
    free(m->acts);
    free(m->grad_acts);
    free(m->act_host);
    free(m->token_buf);
    free(m->scratch);
    memset(m, 0, sizeof(*m));
}

// ---------------------------------------------------------------------------------
// forward / backward

// Matmul scratch for the current thread count (grown, never shrunk).
static float *model_scratch(GPT2 *m) {
    const int nt = omp_get_max_threads(), C = m->config.channels;
    size_t a = matmul_scratch_per_thread(C), b = matmul_scratch_per_thread(4 * C);
    size_t need = (size_t)nt * (a > b ? a : b);
    if (need > m->scratch_capacity) {
        free(m->scratch);
        m->scratch = alloc_floats(need);
        m->scratch_capacity = need;
    }
    return m->scratch;
}

static void hook_fetch(GPT2 *m, int unit, int bwd) {
    if (m->hooks.fetch) m->hooks.fetch(m->hooks.ctx, unit, bwd);
}
static void hook_release(GPT2 *m, int unit, int bwd) {
    if (m->hooks.release) m->hooks.release(m->hooks.ctx, unit, bwd);
}
static void hook_grads_ready(GPT2 *m, int unit) {
    if (m->hooks.grads_ready) m->hooks.grads_ready(m->hooks.ctx, unit);
}

// A block's parts (attention, LN2, each MLP tile) are units of their own when tiled, each
// fetched around its part; untiled one window around the whole block encloses them all.
static void part_fetch(GPT2 *m, int unit, int bwd) {
    if (m->opt.tile_linear > 1) hook_fetch(m, unit, bwd);
}
static void part_done(GPT2 *m, int unit, int bwd) {
    if (m->opt.tile_linear == 1) return;
    if (bwd) hook_grads_ready(m, unit);
    hook_release(m, unit, bwd);
}

// Block l's activations in their slots.
typedef struct {
    float *x, *out;                         // input and output (residual stream slots)
    float *ln1, *ln1m, *ln1r, *qkv, *att, *atty, *res2, *ln2, *ln2m, *ln2r, *fch, *fchg;
} BlockActs;

static BlockActs block_acts(const GPT2 *m, const Acts *a, int l) {
    const size_t N = (size_t)m->B * m->T, NC = N * (size_t)m->config.channels;
    const size_t att = (size_t)m->B * m->config.num_heads * m->T * m->T;
    const size_t s = m->opt.act_checkpoint ? 0 : (size_t)l, R = residual_slots(&m->config, &m->opt);
    BlockActs b = {slot_of(a->res, NC, (size_t)l % R), slot_of(a->res, NC, (size_t)(l + 1) % R),
                   slot_of(a->ln1, NC, s), slot_of(a->ln1_mean, N, s), slot_of(a->ln1_rstd, N, s),
                   slot_of(a->qkv, 3 * NC, s), slot_of(a->att, att, s), slot_of(a->atty, NC, s),
                   slot_of(a->res2, NC, s), slot_of(a->ln2, NC, s), slot_of(a->ln2_mean, N, s),
                   slot_of(a->ln2_rstd, N, s), slot_of(a->fch, 4 * NC, s), slot_of(a->fch_gelu, 4 * NC, s)};
    return b;
}

// Block l's linear with weight tensor wt (its bias is wt + 1): out (N, OC) = inp (N, IC)
// @ W^T + b, tile after tile (each tile writes its column block of out, rows OC apart).
// Every output element is computed as the untiled matmul computes it: the same bits.
static void linear_forward(GPT2 *m, int l, int wt, float *ws, float *out, const float *inp, int N, int IC, int OC) {
    const int K = m->opt.tile_linear, KV = m->opt.tile_vocab, R = OC / K;
    for (int k = 0; k < K; k++) {
        const int unit = gpt2_block_unit(K, KV, l, wt, k);
        part_fetch(m, unit, 0);
        matmul_forward(ws, out + (size_t)k * R, OC, inp, m->w[wt][l * K + k], m->w[wt + 1][l * K + k], N, IC, R);
        part_done(m, unit, 0);
    }
}

// Its backward, tiles in reverse order: each tile's weight and bias gradients are complete
// in its window; dinp (overwritten) sums the tiles' contributions, so its sums run over the
// output rows in another order than untiled: the same value within float rounding.
static void linear_backward(GPT2 *m, int l, int wt, float *ws, float *dinp, const float *dout, const float *inp,
                            int N, int IC, int OC) {
    const int K = m->opt.tile_linear, KV = m->opt.tile_vocab, R = OC / K;
    for (int k = K - 1; k >= 0; k--) {
        const int unit = gpt2_block_unit(K, KV, l, wt, k), i = l * K + k;
        part_fetch(m, unit, 1);
        matmul_backward(ws, dinp, k < K - 1, m->g[wt][i], m->g[wt + 1][i], dout + (size_t)k * R, OC, inp, m->w[wt][i],
                        N, IC, R);
        part_done(m, unit, 1);
    }
}

// Block l's forward into b. A recompute (act_checkpoint, in backward) stops before the
// MLP's output projection, which backward does not read, and runs inside the untiled
// block's backward window; a forward fetches the untiled block itself. Tiled, both fetch
// each part as a forward does (gpt2_config.h: GPT2Hooks).
static void block_forward(GPT2 *m, const BlockActs *b, int l, float *ws, int recompute) {
    const int C = m->config.channels, NH = m->config.num_heads, B = m->B, T = m->T, K = m->opt.tile_linear;
    const int KV = m->opt.tile_vocab;
    const int N = B * T, whole = K == 1 && !recompute;
    const size_t NC = (size_t)N * C;
    if (whole) hook_fetch(m, gpt2_block_unit(1, KV, l, GPT2_LN1W, 0), 0);
    part_fetch(m, gpt2_block_unit(K, KV, l, GPT2_LN1W, 0), 0);
    layernorm_forward(b->ln1, b->ln1m, b->ln1r, b->x, m->w[GPT2_LN1W][l], m->w[GPT2_LN1B][l], N, C);
    part_done(m, gpt2_block_unit(K, KV, l, GPT2_LN1W, 0), 0);
    linear_forward(m, l, GPT2_QKVW, ws, b->qkv, b->ln1, N, C, 3 * C);
    attention_forward(b->atty, b->att, b->qkv, B, T, C, NH);
    linear_forward(m, l, GPT2_ATTPROJW, ws, b->res2, b->atty, N, C, C);
    residual_add(b->res2, b->x, NC);
    part_fetch(m, gpt2_block_unit(K, KV, l, GPT2_LN2W, 0), 0);
    layernorm_forward(b->ln2, b->ln2m, b->ln2r, b->res2, m->w[GPT2_LN2W][l], m->w[GPT2_LN2B][l], N, C);
    part_done(m, gpt2_block_unit(K, KV, l, GPT2_LN2W, 0), 0);
    linear_forward(m, l, GPT2_FCW, ws, b->fch, b->ln2, N, C, 4 * C);
    gelu_forward(b->fchg, b->fch, 4 * NC);
    if (!recompute) {
        linear_forward(m, l, GPT2_FCPROJW, ws, b->out, b->fchg, N, 4 * C, C);
        residual_add(b->out, b->res2, NC);
    }
    if (whole) hook_release(m, gpt2_block_unit(1, KV, l, GPT2_LN1W, 0), 0);
}

// g->dres holds d(loss)/d(block output); block l's backward turns it into d/d(block input).
// Untiled, the block's one backward window also encloses the act_checkpoint recompute.
static void block_backward(GPT2 *m, const BlockActs *b, int l, float *ws, const GradActs *g) {
    const int C = m->config.channels, NH = m->config.num_heads, B = m->B, T = m->T, K = m->opt.tile_linear;
    const int KV = m->opt.tile_vocab;
    const int N = B * T, unit = gpt2_block_unit(1, KV, l, GPT2_LN1W, 0);
    if (K == 1) hook_fetch(m, unit, 1);
    if (m->opt.act_checkpoint) block_forward(m, b, l, ws, 1);
    linear_backward(m, l, GPT2_FCPROJW, ws, g->dfch, g->dres, b->fchg, N, 4 * C, C);
    gelu_backward(g->dfch, b->fch, (size_t)N * 4 * C);
    linear_backward(m, l, GPT2_FCW, ws, g->dln, g->dfch, b->ln2, N, C, 4 * C);
    part_fetch(m, gpt2_block_unit(K, KV, l, GPT2_LN2W, 0), 1);
    layernorm_backward(g->dres, m->g[GPT2_LN2W][l], m->g[GPT2_LN2B][l], g->dln, b->res2, b->ln2m, b->ln2r,
                       m->w[GPT2_LN2W][l], N, C);
    part_done(m, gpt2_block_unit(K, KV, l, GPT2_LN2W, 0), 1);
    linear_backward(m, l, GPT2_ATTPROJW, ws, g->datty, g->dres, b->atty, N, C, C);
    attention_backward(g->dqkv, g->datt, g->datty, b->att, b->qkv, B, T, C, NH);
    linear_backward(m, l, GPT2_QKVW, ws, g->dln, g->dqkv, b->ln1, N, C, 3 * C);
    part_fetch(m, gpt2_block_unit(K, KV, l, GPT2_LN1W, 0), 1);
    layernorm_backward(g->dres, m->g[GPT2_LN1W][l], m->g[GPT2_LN1B][l], g->dln, b->x, b->ln1m, b->ln1r,
                       m->w[GPT2_LN1W][l], N, C);
    part_done(m, gpt2_block_unit(K, KV, l, GPT2_LN1W, 0), 1);
    if (K == 1) {
        hook_grads_ready(m, unit);
        hook_release(m, unit, 1);
    }
}

// act_offload's host tier: block l's input (N, C) floats in slot l.
static float *host_slot(GPT2 *m, int l) {
    return slot_of(m->act_host, (size_t)m->B * m->T * m->config.channels, (size_t)l);
}

// act_offload 2: the swap file, an unnamed file in DIR (O_TMPFILE, mode 0600) or, where the
// file system makes none, DIR/act_swap_PID.bin created exclusively (never through a link)
// and unlinked at once, so that nothing is left behind however the process ends; O_DIRECT
// where the file system takes it (no page cache), else plain writes whose cache is dropped.
// Slots of act_slot_bytes for block inputs 0..L-2, reserved at open.
static void act_file_open(GPT2 *m, size_t NC) {
    m->act_slot_bytes = act_file_slot_floats(NC) * sizeof(float);
    int n = snprintf(m->act_path, sizeof(m->act_path), "%s/act_swap_%ld.bin", m->opt.act_swap_dir, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof(m->act_path)) die("activation swap folder name too long: '%s'", m->opt.act_swap_dir);
    const int flags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    m->act_direct = 1;
    m->act_fd = -1;
#ifdef O_TMPFILE
    m->act_fd = open(m->opt.act_swap_dir, O_TMPFILE | O_EXCL | O_RDWR | O_DIRECT | O_CLOEXEC, 0600);   // never linkable
#endif
    if (m->act_fd < 0) {   // the named file, whose open explains any refusal
        m->act_fd = open(m->act_path, flags | O_DIRECT, 0600);
        if (m->act_fd < 0 && errno == EINVAL) {   // no O_DIRECT on this file system (tmpfs before Linux 6.6)
            unlink(m->act_path);   // the kernel creates the file before it refuses O_DIRECT: O_EXCL's, so ours
            m->act_direct = 0;
            m->act_fd = open(m->act_path, flags, 0600);
        }
        if (m->act_fd < 0) die("cannot create the activation swap file '%s': %s", m->act_path, strerror(errno));
        unlink(m->act_path);
    }
    uint64_t bytes = act_file_bytes(m->config.num_layers, NC);
    int rc = posix_fallocate(m->act_fd, 0, (off_t)bytes);
    if (rc != 0) die("cannot reserve %llu bytes for the activation swap file '%s': %s", (unsigned long long)bytes,
                     m->act_path, strerror(rc));
}

// Block l's input x (NC floats) to its slot of the swap file, or back, through the aligned
// host slot.
static void act_file_io(GPT2 *m, int l, float *x, size_t NC, int write) {
    const off_t at = (off_t)((uint64_t)l * m->act_slot_bytes);
    if (write) memcpy(m->act_host, x, NC * sizeof(float));
    for (size_t done = 0; done < m->act_slot_bytes;) {
        char *buf = (char *)m->act_host + done;
        ssize_t k = write ? pwrite(m->act_fd, buf, m->act_slot_bytes - done, at + (off_t)done)
                          : pread(m->act_fd, buf, m->act_slot_bytes - done, at + (off_t)done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            die("activation swap file '%s': %s of block %d's input (%zu bytes at offset %lld) failed: %s", m->act_path,
                write ? "the write" : "the read", l, m->act_slot_bytes, (long long)at, k < 0 ? strerror(errno) : "end of file");
        done += (size_t)k;
    }
    if (!m->act_direct) (void)posix_fadvise(m->act_fd, at, (off_t)m->act_slot_bytes, POSIX_FADV_DONTNEED);
    if (!write) memcpy(x, m->act_host, NC * sizeof(float));
}

// act_offload: block l's input to the host tier (1) or the swap file (2), and back.
static void act_store(GPT2 *m, int l, float *x, size_t NC) {
    if (m->opt.act_offload == GPT2_ACT_OFFLOAD_FILE) act_file_io(m, l, x, NC, 1);
    else memcpy(host_slot(m, l), x, NC * sizeof(float));
}
static void act_load(GPT2 *m, int l, float *x, size_t NC) {
    if (m->opt.act_offload == GPT2_ACT_OFFLOAD_FILE) act_file_io(m, l, x, NC, 0);
    else memcpy(x, host_slot(m, l), NC * sizeof(float));
}

void gpt2_cpu_forward(GPT2 *m, const int *inputs, const int *targets, int B, int T) {
    const GPT2Config *c = &m->config;
    const int C = c->channels, L = c->num_layers, V = c->vocab_size;
    const int Vp = c->padded_vocab_size, K = m->opt.tile_linear, KV = m->opt.tile_vocab, RV = Vp / KV;
    if (m->w[GPT2_WTE] == NULL) die("gpt2_cpu_forward: model not built");
    if (B <= 0 || T <= 0) die("gpt2_cpu_forward: batch %d x %d must be positive", B, T);
    if (T > c->max_seq_len) die("gpt2_cpu_forward: sequence length %d exceeds the model's maximum %d", T, c->max_seq_len);
    if (inputs == NULL) die("gpt2_cpu_forward: inputs is NULL");
    const size_t N = (size_t)B * T;
    if (N > (size_t)INT32_MAX / 4) die("gpt2_cpu_forward: batch %d x %d too large", B, T);

    // Own copies of the tokens: backward must not depend on the caller's buffers.
    if (m->token_capacity < 2 * N) {
        free(m->token_buf);
        m->token_buf = (int *)malloc_check(2 * N * sizeof(int));
        m->token_capacity = 2 * N;
    }
    int *in = m->token_buf, *tg = m->token_buf + N;
    for (size_t i = 0; i < N; i++) {
        if (inputs[i] < 0 || inputs[i] >= V) die("gpt2_cpu_forward: input token %d at %zu outside [0, %d)", inputs[i], i, V);
        in[i] = inputs[i];
        if (targets) {
            if (targets[i] < 0 || targets[i] >= V) die("gpt2_cpu_forward: target token %d at %zu outside [0, %d)", targets[i], i, V);
            tg[i] = targets[i];
        }
    }
    m->inputs = in;
    m->targets = targets ? tg : NULL;

    size_t need = layout_acts(c, &m->opt, B, T, NULL, NULL), need_host = layout_act_host(c, &m->opt, B, T);
    if (need > m->act_capacity) {
        free(m->acts);
        m->acts = alloc_floats(need);
        m->act_capacity = need;
    }
    if (targets && need_host > m->act_host_capacity) {   // only a backward reads the tier
        free(m->act_host);
        void *p = NULL;   // aligned for the swap file's O_DIRECT transfers
        int rc = posix_memalign(&p, ACT_FILE_ALIGN, need_host * sizeof(float));
        if (rc != 0) die("out of host memory allocating %zu floats: %s", need_host, strerror(rc));
        m->act_host = (float *)p;
        m->act_host_capacity = need_host;
    }
    note_peak(m);
    if (targets && m->opt.act_offload == GPT2_ACT_OFFLOAD_FILE && L > 1 &&
        (m->act_fd < 0 || m->act_slot_bytes < N * (size_t)C * sizeof(float))) {   // first use, or larger B x T
        if (m->act_fd >= 0) close(m->act_fd);
        act_file_open(m, N * (size_t)C);
    }
    m->B = B;
    m->T = T;
    Acts a = {0};
    layout_acts(c, &m->opt, B, T, m->acts, &a);
    m->logits_or_probs = a.logits;
    m->losses = a.losses;
    float *ws = model_scratch(m);

    // embedding tiles in order; the last holds wpe
    for (int k = 0; k < KV; k++) {
        hook_fetch(m, gpt2_unit_embedding(KV, k), 0);
        encoder_forward(a.res, in, m->w[GPT2_WTE][k], k == KV - 1 ? m->w[GPT2_WPE][0] : NULL, B, T, C, k * RV,
                        (k + 1) * RV);
        hook_release(m, gpt2_unit_embedding(KV, k), 0);
    }

    const size_t NC = N * (size_t)C;
    for (int l = 0; l < L; l++) {
        BlockActs b = block_acts(m, &a, l);
        block_forward(m, &b, l, ws, 0);
        // the input goes to the host tier: the next block writes its output over it
        if (m->opt.act_offload && targets && l < L - 1) act_store(m, l, b.x, NC);
    }

    const float *last = block_acts(m, &a, L - 1).out;
    hook_fetch(m, gpt2_unit_lnf(c, K, KV), 0);
    layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, last, m->w[GPT2_LNFW][0], m->w[GPT2_LNFB][0], (int)N, C);
    hook_release(m, gpt2_unit_lnf(c, K, KV), 0);

    // classifier tiles in order, each writing its column block of the logits (rows Vp
    // apart): every logit is computed as the untiled matmul computes it
    for (int k = 0; k < KV; k++) {
        hook_fetch(m, gpt2_unit_classifier(c, K, KV, k), 0);
        matmul_forward(ws, a.logits + (size_t)k * RV, Vp, a.lnf, m->w[GPT2_WTE][k], NULL, (int)N, C, RV);
        hook_release(m, gpt2_unit_classifier(c, K, KV, k), 0);
    }

    if (targets) {
        softmax_xent_forward(a.logits, a.losses, tg, (int)N, V, Vp);
        double s = 0.0;
        for (size_t i = 0; i < N; i++) s += a.losses[i];
        m->mean_loss = (float)(s / (double)N);
        m->backward_ready = 1;
    } else {
        m->mean_loss = -1.0f;
        m->backward_ready = 0;
    }
}

const float *gpt2_cpu_logits(const GPT2 *m) {
    if (m->logits_or_probs == NULL) die("gpt2_cpu_logits: no forward has run yet");
    return m->logits_or_probs;
}

// The flat-buffer operations below need the model's own parameters.
static void require_own_params(const GPT2 *m, const char *fn) {
    if (m->params == NULL) die("%s: the parameters are managed externally (ZeRO)", fn);
}

void gpt2_cpu_zero_grad(GPT2 *m) {
    require_own_params(m, __func__);
    memset(m->grads, 0, m->num_parameters * sizeof(float));
    m->micro_in_step = 0;
}

static void backward_into_tables(GPT2 *m, float loss_scale);

// The first micro-batch's gradient goes straight into the zeroed sum (0 + g is g); each
// later one into a zeroed buffer of its own, then sum += it, element by element: the
// sum of whole micro-batch gradients in order, as ZeRO's rank-order reduction forms it.
void gpt2_cpu_backward(GPT2 *m, float loss_scale) {
    if (!m->params || !m->opt.micro_grads || m->micro_in_step++ == 0) {
        backward_into_tables(m, loss_scale);
        return;
    }
    if (!m->grads_micro) m->grads_micro = alloc_floats(m->num_parameters);
    memset(m->grads_micro, 0, m->num_parameters * sizeof(float));
    point_grads(m, m->grads_micro);
    backward_into_tables(m, loss_scale);
    point_grads(m, m->grads);
    float *acc = m->grads;
    const float *g = m->grads_micro;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < m->num_parameters; i++) acc[i] += g[i];
}

static void backward_into_tables(GPT2 *m, float loss_scale) {
    const GPT2Config *c = &m->config;
    const int C = c->channels, L = c->num_layers, V = c->vocab_size;
    const int Vp = c->padded_vocab_size, B = m->B, T = m->T, K = m->opt.tile_linear;
    const int KV = m->opt.tile_vocab, RV = Vp / KV;
    if (!m->backward_ready)
        die("gpt2_cpu_backward: needs a forward with targets first (and one backward per forward)");
    const size_t N = (size_t)B * T, NC = N * (size_t)C;

    size_t need = layout_grad_acts(c, B, T, NULL, NULL);
    if (need > m->grad_act_capacity) {
        free(m->grad_acts);
        m->grad_acts = alloc_floats(need);
        m->grad_act_capacity = need;
    }
    note_peak(m);
    Acts a = {0};
    GradActs g = {0};
    layout_acts(c, &m->opt, B, T, m->acts, &a);
    layout_grad_acts(c, B, T, m->grad_acts, &g);
    float *ws = model_scratch(m);

    // the probabilities become dlogits = (probs - onehot) * scale in place (no parameter
    // reads: before the classifier's windows); the padded columns are already 0
    {
        float *d = a.logits;
        const int *tg = m->targets;
        #pragma omp parallel for schedule(dynamic, 4)
        for (size_t n = 0; n < N; n++) {
            float *row = d + n * (size_t)Vp;
            float pt = row[tg[n]];
            for (int o = 0; o < V; o++) row[o] *= loss_scale;
            row[tg[n]] = (pt - 1.0f) * loss_scale;
        }
    }
    // classifier tiles in reverse order: each tile's dwte is complete in its window (the
    // embedding adds to it later); dln sums the tiles' contributions, so its sums run over
    // the vocabulary in another order than untiled (KV > 1): the same within float rounding
    for (int k = KV - 1; k >= 0; k--) {
        const int unit = gpt2_unit_classifier(c, K, KV, k);
        hook_fetch(m, unit, 1);
        matmul_backward(ws, g.dln, k < KV - 1, m->g[GPT2_WTE][k], NULL, a.logits + (size_t)k * RV, Vp, a.lnf,
                        m->w[GPT2_WTE][k], (int)N, C, RV);
        hook_grads_ready(m, unit);
        hook_release(m, unit, 1);
    }
    m->backward_ready = 0;

    hook_fetch(m, gpt2_unit_lnf(c, K, KV), 1);
    memset(g.dres, 0, NC * sizeof(float));
    layernorm_backward(g.dres, m->g[GPT2_LNFW][0], m->g[GPT2_LNFB][0], g.dln, block_acts(m, &a, L - 1).out,
                       a.lnf_mean, a.lnf_rstd, m->w[GPT2_LNFW][0], (int)N, C);
    hook_grads_ready(m, gpt2_unit_lnf(c, K, KV));
    hook_release(m, gpt2_unit_lnf(c, K, KV), 1);

    for (int l = L - 1; l >= 0; l--) {
        BlockActs b = block_acts(m, &a, l);
        // act_offload: block l's input came back while block l+1 ran (the last block's never
        // left); now block l-1's comes back into the slot block l's output held, which
        // nothing reads any more
        if (m->opt.act_offload && l > 0) act_load(m, l - 1, block_acts(m, &a, l - 1).x, NC);
        block_backward(m, &b, l, ws, &g);
    }

    // embedding tiles in reverse order, dwpe with the last
    for (int k = KV - 1; k >= 0; k--) {
        const int unit = gpt2_unit_embedding(KV, k);
        hook_fetch(m, unit, 1);
        encoder_backward(m->g[GPT2_WTE][k], k == KV - 1 ? m->g[GPT2_WPE][0] : NULL, g.dres, m->inputs, B, T, C,
                         k * RV, (k + 1) * RV);
        hook_grads_ready(m, unit);
        hook_release(m, unit, 1);
    }
}

// ---------------------------------------------------------------------------------
// optimizer

float gpt2_cpu_grad_norm(const GPT2 *m) {
    require_own_params(m, __func__);
    // Slice by slice in llmc/model/grad_norm.h's order, the one zero/ follows on the same table,
    // so the unsharded and the 1-rank -z trainer clip by the same bits.
    const int ns = gpt2_num_slices(&m->config);
    GPT2Slice *slices = (GPT2Slice *)malloc_check((size_t)ns * sizeof(GPT2Slice));
    gpt2_slices(&m->config, slices);
    const float norm = adamw_norm(grad_norm_sumsq(m->grads, slices, ns));
    free(slices);
    return norm;
}

void gpt2_cpu_update(GPT2 *m, float lr, float beta1, float beta2, float eps, float weight_decay,
                     float grad_scale, int t) {
    require_own_params(m, __func__);
    if (t < 1) die("gpt2_cpu_update: step %d must be >= 1 (bias correction)", t);
    const size_t n = m->num_parameters;
    if (m->m == NULL) {
        m->m = alloc_floats(n);
        m->v = alloc_floats(n);
        memset(m->m, 0, n * sizeof(float));
        memset(m->v, 0, n * sizeof(float));
    }
    const AdamWParams ap = adamw_params(lr, beta1, beta2, eps, weight_decay, grad_scale, t);
    size_t off[GPT2_NUM_PARAM_TENSORS];
    gpt2_param_offsets(&m->config, off);
    // Tensor by tensor (the decay flag), each through the host's one AdamW array kernel.
    for (int k = 0; k < GPT2_NUM_PARAM_TENSORS; k++) {
        const size_t o = off[k];
        adamw_update_array(m->params + o, m->grads + o, m->m + o, m->v + o, m->param_sizes[k], &ap,
                           gpt2_param_decays(k));
    }
}
