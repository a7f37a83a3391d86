// gpt2_config.c: GPT-2 shapes, the parameter table, llm.c model files and init.
#include "gpt2_config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "atomic_file.h"
#include "rand.h"
#include "utils.h"

static const char *param_names[GPT2_NUM_PARAM_TENSORS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};

size_t gpt2_param_sizes(const GPT2Config *c, size_t s[GPT2_NUM_PARAM_TENSORS]) {
    size_t Vp = (size_t)c->padded_vocab_size, C = (size_t)c->channels;
    size_t maxT = (size_t)c->max_seq_len, L = (size_t)c->num_layers;
    s[GPT2_WTE] = Vp * C;
    s[GPT2_WPE] = maxT * C;
    s[GPT2_LN1W] = L * C;
    s[GPT2_LN1B] = L * C;
    s[GPT2_QKVW] = L * 3 * C * C;
    s[GPT2_QKVB] = L * 3 * C;
    s[GPT2_ATTPROJW] = L * C * C;
    s[GPT2_ATTPROJB] = L * C;
    s[GPT2_LN2W] = L * C;
    s[GPT2_LN2B] = L * C;
    s[GPT2_FCW] = L * 4 * C * C;
    s[GPT2_FCB] = L * 4 * C;
    s[GPT2_FCPROJW] = L * C * 4 * C;
    s[GPT2_FCPROJB] = L * C;
    s[GPT2_LNFW] = C;
    s[GPT2_LNFB] = C;
    size_t total = 0;
    for (int i = 0; i < GPT2_NUM_PARAM_TENSORS; i++) total += s[i];
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
    if (c->num_layers <= 0 || c->channels <= 0 || c->num_heads <= 0 || c->max_seq_len <= 0 ||
        c->vocab_size <= 0) {
        snprintf(err, n, "non-positive model size (L=%d C=%d NH=%d maxT=%d V=%d)", c->num_layers,
                 c->channels, c->num_heads, c->max_seq_len, c->vocab_size);
        return -1;
    }
    if (c->channels % c->num_heads != 0) {
        snprintf(err, n, "channels %d not divisible by heads %d", c->channels, c->num_heads);
        return -1;
    }
    if (c->padded_vocab_size < c->vocab_size) {
        snprintf(err, n, "padded vocab %d smaller than vocab %d", c->padded_vocab_size, c->vocab_size);
        return -1;
    }
    if (c->vocab_size > 65536) {
        snprintf(err, n, "vocab %d does not fit uint16 token shards", c->vocab_size);
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
    long L = -1, C = -1, H = -1, T = 1024;
    while (*p) {
        char key = *p++;
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v <= 0) {
            snprintf(err, n, "model descriptor '%s': '%c' needs a positive number", desc, key);
            return -1;
        }
        p = end;
        switch (key) {
        case 'd': L = v; break;
        case 'c': C = v; break;
        case 'h': H = v; break;
        case 't': T = v; break;
        default:
            snprintf(err, n, "model descriptor '%s': unknown key '%c' (use d, c, h, t)", desc, key);
            return -1;
        }
    }
    if (C < 0) C = 64 * L;
    if (H < 0) H = C / 64 > 0 ? C / 64 : 1;
    c->num_layers = (int)L;
    c->channels = (int)C;
    c->num_heads = (int)H;
    c->max_seq_len = (int)T;
    c->vocab_size = GPT2_VOCAB;
    c->padded_vocab_size = ((GPT2_VOCAB + 127) / 128) * 128;
    return gpt2_config_validate(c, err, n);
}

double gpt2_flops_per_token(const GPT2Config *c, int T) {
    size_t s[GPT2_NUM_PARAM_TENSORS];
    size_t N = gpt2_param_sizes(c, s) - s[GPT2_WPE]; // position embedding is a lookup
    // 6 flops per parameter per token (fwd 2 + bwd 4), plus attention's QK^T and AV:
    // 6 * L * C * T (causal halving ignored, as is usual for MFU).
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

float *gpt2_model_file_read(const char *path, GPT2Config *c) {
    FILE *f = fopen_check(path, "rb");
    long fsize = file_size_check(f, path);
    int32_t h[256];
    if (fsize < (long)sizeof(h)) die("model file '%s' is %ld bytes, shorter than its 1024-byte header", path, fsize);
    fread_check(h, sizeof(int32_t), 256, f, path);
    if (h[0] != GPT2_MODEL_MAGIC)
        die("'%s' is not an llm.c model file: magic %d, expected %d", path, h[0], GPT2_MODEL_MAGIC);
    int version = h[1];
    if (version != GPT2_MODEL_FP32 && version != GPT2_MODEL_BF16)
        die("model file '%s' has version %d; supported are 3 (fp32) and 5 (bf16)", path, version);
    c->max_seq_len = h[2];
    c->vocab_size = h[3];
    c->num_layers = h[4];
    c->num_heads = h[5];
    c->channels = h[6];
    c->padded_vocab_size = h[7];
    char err[256];
    if (gpt2_config_validate(c, err, sizeof(err)) != 0) die("model file '%s' header: %s", path, err);
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    size_t n = gpt2_param_sizes(c, sizes);
    size_t elem = version == GPT2_MODEL_FP32 ? 4 : 2;
    long expect = (long)(sizeof(h) + n * elem);
    if (fsize != expect)
        die("model file '%s' is %ld bytes, but its header (L=%d C=%d Vp=%d, version %d) needs %ld",
            path, fsize, c->num_layers, c->channels, c->padded_vocab_size, version, expect);
    float *params = (float *)malloc_check(n * sizeof(float));
    if (version == GPT2_MODEL_FP32) {
        fread_check(params, sizeof(float), n, f, path);
    } else {
        uint16_t *buf = (uint16_t *)malloc_check(n * sizeof(uint16_t));
        fread_check(buf, sizeof(uint16_t), n, f, path);
        for (size_t i = 0; i < n; i++) params[i] = gpt2_bf16_to_f32(buf[i]);
        free(buf);
    }
    fclose(f);
    return params;
}

void gpt2_model_file_write(const char *path, const GPT2Config *c, const float *params, int version) {
    if (version != GPT2_MODEL_FP32 && version != GPT2_MODEL_BF16)
        die("cannot write model file '%s' with version %d (3 or 5)", path, version);
    int32_t h[256] = {0};
    h[0] = GPT2_MODEL_MAGIC;
    h[1] = version;
    h[2] = c->max_seq_len;
    h[3] = c->vocab_size;
    h[4] = c->num_layers;
    h[5] = c->num_heads;
    h[6] = c->channels;
    h[7] = c->padded_vocab_size;
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    size_t n = gpt2_param_sizes(c, sizes);
    AtomicFile af;
    atomic_file_open(&af, path);
    atomic_file_write(&af, h, sizeof(h));
    if (version == GPT2_MODEL_FP32) {
        atomic_file_write(&af, params, n * sizeof(float));
    } else {
        enum { CHUNK = 1 << 16 };
        uint16_t buf[CHUNK];
        for (size_t i = 0; i < n; i += CHUNK) {
            size_t m = n - i < CHUNK ? n - i : CHUNK;
            for (size_t j = 0; j < m; j++) buf[j] = gpt2_f32_to_bf16(params[i + j]);
            atomic_file_write(&af, buf, m * sizeof(uint16_t));
        }
    }
    atomic_file_commit(&af);
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

void gpt2_slices(const GPT2Config *c, GPT2Slice *out) {
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
}
