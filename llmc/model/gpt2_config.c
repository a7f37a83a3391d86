// gpt2_config.c: GPT-2 shapes and their limits, the parameter table and init.
#include "gpt2_config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../numerics/rand.h"
#include "../utils.h"

static const char *param_names[GPT2_NUM_PARAM_TENSORS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};

size_t gpt2_param_sizes(const GPT2Config *c, size_t s[GPT2_NUM_PARAM_TENSORS]) {
    const char *what = "GPT-2 parameter sizes";
    size_t Vp = (size_t)c->padded_vocab_size, C = (size_t)c->channels;
    size_t maxT = (size_t)c->max_seq_len, L = (size_t)c->num_layers;
    size_t LC = size_mul(L, C, what), LCC = size_mul(LC, C, what);
    s[GPT2_WTE] = size_mul(Vp, C, what);
    s[GPT2_WPE] = size_mul(maxT, C, what);
    s[GPT2_LN1W] = LC;
    s[GPT2_LN1B] = LC;
    s[GPT2_QKVW] = size_mul(3, LCC, what);
    s[GPT2_QKVB] = size_mul(3, LC, what);
    s[GPT2_ATTPROJW] = LCC;
    s[GPT2_ATTPROJB] = LC;
    s[GPT2_LN2W] = LC;
    s[GPT2_LN2B] = LC;
    s[GPT2_FCW] = size_mul(4, LCC, what);
    s[GPT2_FCB] = size_mul(4, LC, what);
    s[GPT2_FCPROJW] = size_mul(4, LCC, what);
    s[GPT2_FCPROJB] = LC;
    s[GPT2_LNFW] = C;
    s[GPT2_LNFB] = C;
    size_t total = 0;
    for (int i = 0; i < GPT2_NUM_PARAM_TENSORS; i++) total = size_add(total, s[i], what);
    return total;
}

void gpt2_param_offsets(const GPT2Config *c, size_t off[GPT2_NUM_PARAM_TENSORS]) {
    size_t s[GPT2_NUM_PARAM_TENSORS];
    gpt2_param_sizes(c, s);
    size_t o = 0;
    for (int i = 0; i < GPT2_NUM_PARAM_TENSORS; i++) { off[i] = o; o += s[i]; }
}

const char *gpt2_param_name(int t) {
    return (t >= 0 && t < GPT2_NUM_PARAM_TENSORS) ? param_names[t] : "?";
}

int gpt2_param_is_per_layer(int t) { return t >= GPT2_LN1W && t <= GPT2_FCPROJB; }

int gpt2_param_decays(int t) {
    return t == GPT2_WTE || t == GPT2_WPE || t == GPT2_QKVW || t == GPT2_ATTPROJW ||
           t == GPT2_FCW || t == GPT2_FCPROJW;
}

int gpt2_config_validate(const GPT2Config *c, char *err, size_t n) {
    const struct { const char *name; int value, max; } f[] = {
        {"layers (L)", c->num_layers, GPT2_MAX_LAYERS},
        {"channels (C)", c->channels, GPT2_MAX_CHANNELS},
        {"heads (NH)", c->num_heads, GPT2_MAX_HEADS},
        {"max sequence length (maxT)", c->max_seq_len, GPT2_MAX_SEQ_LEN},
        {"vocab (V)", c->vocab_size, GPT2_MAX_VOCAB},
        {"padded vocab (Vp)", c->padded_vocab_size, GPT2_MAX_PADDED_VOCAB},
    };
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
        if (f[i].value <= 0 || f[i].value > f[i].max) {
            snprintf(err, n, "%s = %d is outside [1, %d]", f[i].name, f[i].value, f[i].max);
            return -1;
        }
    }
    if (c->channels % c->num_heads != 0) {
        snprintf(err, n, "channels (C) = %d is not divisible by heads (NH) = %d", c->channels, c->num_heads);
        return -1;
    }
    if (c->padded_vocab_size < c->vocab_size) {
        snprintf(err, n, "padded vocab (Vp) = %d is smaller than vocab (V) = %d", c->padded_vocab_size,
                 c->vocab_size);
        return -1;
    }
    return 0;
}

int gpt2_config_from_descriptor(const char *desc, GPT2Config *c, char *err, size_t n) {
    const char *p = desc;
    if (p == NULL || *p != 'd') {
        snprintf(err, n, "model descriptor '%s' must start with 'd' (e.g. d12)", desc ? desc : "");
        return -1;
    }
    // Each value is bounded before any arithmetic, so C = 64 L below cannot overflow.
    long L = -1, C = -1, H = -1, T = 1024;
    while (*p) {
        char key = *p++;
        long *dst, max;
        const char *what;
        switch (key) {
        case 'd': dst = &L; max = GPT2_MAX_LAYERS; what = "layers"; break;
        case 'c': dst = &C; max = GPT2_MAX_CHANNELS; what = "channels"; break;
        case 'h': dst = &H; max = GPT2_MAX_HEADS; what = "heads"; break;
        case 't': dst = &T; max = GPT2_MAX_SEQ_LEN; what = "max sequence length"; break;
        default:
            snprintf(err, n, "model descriptor '%s': unknown key '%c' (use d, c, h, t)", desc, key);
            return -1;
        }
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || *p == '-' || *p == '+' || (v == 0 && errno != ERANGE)) {
            snprintf(err, n, "model descriptor '%s': '%c' needs a positive number", desc, key);
            return -1;
        }
        if (errno == ERANGE || v > max) {
            snprintf(err, n, "model descriptor '%s': %c%.*s (%s) is outside [1, %ld]", desc, key, (int)(end - p), p,
                     what, max);
            return -1;
        }
        *dst = v;
        p = end;
    }
    if (L < 0) {
        snprintf(err, n, "model descriptor '%s' has no layer count 'd'", desc);
        return -1;
    }
    if (C < 0) C = 64 * L;
    if (H < 0) H = C / 64 > 0 ? C / 64 : 1;
    c->num_layers = (int)L;
    c->channels = (int)C;
    c->num_heads = (int)H;
    c->max_seq_len = (int)T;
    c->vocab_size = GPT2_VOCAB;
    c->padded_vocab_size = ((GPT2_VOCAB + 127) / 128) * 128;
    if (gpt2_config_validate(c, err, n) != 0) {
        char why[200];
        snprintf(why, sizeof(why), "%s", err);
        snprintf(err, n, "model descriptor '%s': %s", desc, why);
        return -1;
    }
    return 0;
}

double gpt2_flops_per_token(const GPT2Config *c, int T) {
    size_t s[GPT2_NUM_PARAM_TENSORS];
    size_t N = gpt2_param_sizes(c, s) - s[GPT2_WPE]; // position embedding is a lookup
    // 6 flops per parameter per token (fwd 2 + bwd 4), plus attention's QK^T and AV:
    // 6 * L * C * T (per layer 4TC forward and 8TC backward, halved for the causal mask: a
    // token attends to T/2 keys on average), llm.c's term (its N also counts wpe: 0.6% more at d12).
    return 6.0 * (double)N + 6.0 * c->num_layers * (double)c->channels * T;
}

uint16_t gpt2_f32_to_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float gpt2_bf16_to_f32(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

void gpt2_init_range(const GPT2Config *c, int t, size_t offset, size_t count, float *out, uint64_t seed) {
    if (t == GPT2_LN1W || t == GPT2_LN2W || t == GPT2_LNFW) {
        for (size_t i = 0; i < count; i++) out[i] = 1.0f;
        return;
    }
    if (!gpt2_param_decays(t)) { // biases
        memset(out, 0, count * sizeof(float));
        return;
    }
    float std = (t == GPT2_ATTPROJW || t == GPT2_FCPROJW) ? 0.02f / sqrtf(2.0f * (float)c->num_layers) : 0.02f;
    // wte rows past the real vocabulary are padding: zero, never read by a token.
    size_t live = t == GPT2_WTE ? (size_t)c->vocab_size * c->channels : (size_t)-1;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < count; i++) {
        size_t e = offset + i;
        out[i] = e < live ? std * rng_normal(seed, RNG_STREAM_INIT, ((uint64_t)t << 40) | e) : 0.0f;
    }
}

void gpt2_init_params(const GPT2Config *c, float *params, uint64_t seed) {
    size_t sizes[GPT2_NUM_PARAM_TENSORS], off[GPT2_NUM_PARAM_TENSORS];
    gpt2_param_sizes(c, sizes);
    gpt2_param_offsets(c, off);
    for (int t = 0; t < GPT2_NUM_PARAM_TENSORS; t++) gpt2_init_range(c, t, 0, sizes[t], params + off[t], seed);
}

int gpt2_param_is_tiled(int t) {
    return t == GPT2_QKVW || t == GPT2_QKVB || t == GPT2_ATTPROJW || t == GPT2_ATTPROJB || t == GPT2_FCW ||
           t == GPT2_FCB || t == GPT2_FCPROJW || t == GPT2_FCPROJB;
}

int gpt2_block_unit(int K, int KV, int l, int t, int k) {
    const int b = KV + l * gpt2_block_units(K);
    if (K == 1) return b;
    switch (t) {
    case GPT2_LN1W: case GPT2_LN1B: return b;
    case GPT2_QKVW: case GPT2_QKVB: return b + 1 + k;
    case GPT2_ATTPROJW: case GPT2_ATTPROJB: return b + 1 + K + k;
    case GPT2_LN2W: case GPT2_LN2B: return b + 1 + 2 * K;
    case GPT2_FCW: case GPT2_FCB: return b + 2 + 2 * K + k;
    case GPT2_FCPROJW: case GPT2_FCPROJB: return b + 2 + 3 * K + k;
    default: die("gpt2_block_unit: %s is not a per-layer tensor", gpt2_param_name(t)); return -1;
    }
}

int gpt2_tile_check(const GPT2Config *c, int K, char *err, size_t n) {
    if (K < 1 || K > GPT2_MAX_TILES) {
        snprintf(err, n, "tiles K = %d is outside [1, %d]", K, GPT2_MAX_TILES);
        return -1;
    }
    if (c->channels % K != 0) {
        snprintf(err, n, "tiles K = %d do not divide the channels C = %d (each linear's output rows, C, 3C or 4C, "
                 "are split into K equal tiles)", K, c->channels);
        return -1;
    }
    return 0;
}

int gpt2_vocab_tile_check(const GPT2Config *c, int KV, char *err, size_t n) {
    if (KV < 1 || KV > GPT2_MAX_TILES) {
        snprintf(err, n, "vocabulary tiles KV = %d is outside [1, %d]", KV, GPT2_MAX_TILES);
        return -1;
    }
    if (c->padded_vocab_size % KV != 0) {
        snprintf(err, n, "vocabulary tiles KV = %d do not divide the padded vocabulary Vp = %d (wte's rows are "
                 "split into KV equal tiles)", KV, c->padded_vocab_size);
        return -1;
    }
    return 0;
}

// The untiled table: one slice per (tensor, layer), ordered by unit.
static int untiled_slices(const GPT2Config *c, GPT2Slice *out) {
    size_t sizes[GPT2_NUM_PARAM_TENSORS], off[GPT2_NUM_PARAM_TENSORS];
    gpt2_param_sizes(c, sizes);
    gpt2_param_offsets(c, off);
    int L = c->num_layers, n = 0;
    for (int t = 0; t < GPT2_NUM_PARAM_TENSORS; t++) {
        int layers = gpt2_param_is_per_layer(t) ? L : 1;
        for (int l = 0; l < layers; l++) {
            GPT2Slice *s = &out[n++];
            memset(s, 0, sizeof(*s));
            if (layers > 1) snprintf(s->name, sizeof(s->name), "%s.%d", gpt2_param_name(t), l);
            else snprintf(s->name, sizeof(s->name), "%s", gpt2_param_name(t));
            s->tensor = t;
            s->layer = l;
            s->numel = sizes[t] / layers;
            s->offset = off[t] + (size_t)l * s->numel;
            s->decay = gpt2_param_decays(t);
            s->num_units = 1;
            if (t == GPT2_WTE) { s->units[0] = 0; s->units[1] = L + 2; s->num_units = 2; }
            else if (t == GPT2_WPE) s->units[0] = 0;
            else if (t == GPT2_LNFW || t == GPT2_LNFB) s->units[0] = L + 1;
            else s->units[0] = 1 + l;
        }
    }
    // Order by first unit (stable), so each unit's slices are contiguous in the table.
    for (int i = 1; i < n; i++) {
        GPT2Slice key = out[i];
        int j = i - 1;
        while (j >= 0 && out[j].units[0] > key.units[0]) { out[j + 1] = out[j]; j--; }
        out[j + 1] = key;
    }
    return n;
}

void gpt2_slices(const GPT2Config *c, GPT2Slice *out) { untiled_slices(c, out); }

// The unit of slice s (untiled numbering in s) with K and KV tiles, s being tile k if tiled.
static int tiled_unit(const GPT2Config *c, int K, int KV, const GPT2Slice *s, int unit, int k) {
    const int L = c->num_layers;
    if (unit == 0) return s->tensor == GPT2_WPE ? gpt2_unit_embedding(KV, KV - 1) : gpt2_unit_embedding(KV, k);
    if (unit == L + 1) return gpt2_unit_lnf(c, K, KV);
    if (unit == L + 2) return gpt2_unit_classifier(c, K, KV, k);
    return gpt2_block_unit(K, KV, s->layer, s->tensor, k);
}

void gpt2_slices_tiled(const GPT2Config *c, int K, int KV, GPT2Slice *out) {
    char err[256];
    if (gpt2_tile_check(c, K, err, sizeof(err)) != 0) die("gpt2_slices_tiled: %s", err);
    if (gpt2_vocab_tile_check(c, KV, err, sizeof(err)) != 0) die("gpt2_slices_tiled: %s", err);
    const int n1 = gpt2_num_slices(c);
    GPT2Slice *base = (GPT2Slice *)malloc_check((size_t)n1 * sizeof(GPT2Slice));
    untiled_slices(c, base);
    int n = 0;
    for (int i = 0; i < n1; i++) {
        const GPT2Slice *s = &base[i];
        const int tiles = gpt2_param_tiles(s->tensor, K, KV);
        for (int k = 0; k < tiles; k++) {
            GPT2Slice *o = &out[n++];
            *o = *s;
            if (tiles > 1) {   // rows [k R/tiles, (k+1) R/tiles) of the layer's (R, cols) matrix: contiguous
                if ((size_t)snprintf(o->name, sizeof(o->name), "%s.t%d", s->name, k) >= sizeof(o->name))
                    die("tile %d of %s: its name does not fit the %zu bytes of a slice name", k, s->name, sizeof(o->name));
                o->tile = k;
                o->numel = s->numel / (size_t)tiles;
                o->offset = s->offset + (size_t)k * o->numel;
            }
            for (int u = 0; u < o->num_units; u++) o->units[u] = tiled_unit(c, K, KV, s, s->units[u], k);
        }
    }
    free(base);
}
