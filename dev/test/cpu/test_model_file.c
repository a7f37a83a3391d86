// test_model_file.c: llm.c model files and model shapes: headers whose sizes would wrap
// around are refused (with the file and field named) instead of crashing, every shape
// field is bounded, descriptors reject values that would overflow, activation sizes are
// overflow-checked, positioned range reads return exactly the stored values (fp32 and
// bf16), and the streamed writer and the slice-by-slice export write exactly the bytes
// of an llm.c file assembled here by hand.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../../llmc/model/gpt2_config.h"
#include "../../../llmc/cpu/gpt2_cpu.h"
#include "../../../llmc/model/gpt2_model_file.h"
#include "../../../llmc/numerics/rand.h"
#include "../common/test_util.h"

static char g_root[256];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(path);
}

static int group_setup(void **state) {
    (void)state;
    snprintf(g_root, sizeof(g_root), "/tmp/test_model_file_XXXXXX");
    return mkdtemp(g_root) ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    return nftw(g_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static GPT2Config shape(int maxT, int V, int L, int NH, int C, int Vp) {
    GPT2Config c = {maxT, V, Vp, L, NH, C};
    return c;
}

// A model file by hand: the header, then `payload` bytes of anything.
static void write_raw_model(const char *path, int version, const GPT2Config *c, size_t payload) {
    int32_t h[256] = {GPT2_MODEL_MAGIC, version, c->max_seq_len, c->vocab_size, c->num_layers,
                      c->num_heads, c->channels, c->padded_vocab_size};
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(h, sizeof(h), 1, f), 1);
    for (size_t i = 0; i < payload; i++) assert_int_equal(fputc((int)(i * 37 % 251), f), (int)(i * 37 % 251));
    assert_int_equal(fclose(f), 0);
}

static void read_model(void *path) { free(gpt2_model_file_read((const char *)path, &(GPT2Config){0})); }

// The parameter count of a shape as 64-bit arithmetic without overflow checks computes
// it (modulo 2^64): what a reader that trusts the header would compare the file with.
static uint64_t wrapped_param_count(const GPT2Config *c) {
    uint64_t Vp = (uint64_t)c->padded_vocab_size, C = (uint64_t)c->channels, T = (uint64_t)c->max_seq_len;
    uint64_t L = (uint64_t)c->num_layers;
    return Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
}

// L=1, C=2^30, Vp=2^31-1 and maxT chosen so that 4 * params wraps to exactly 0: the
// 1 KB header-only file "matches" its header. It must be refused, naming the file and
// the field, before anything is allocated (it crashed the trainer with a segfault).
static void test_wrapping_header_refused(void **state) {
    (void)state;
    char path[512];
    snprintf(path, sizeof(path), "%s/wrap.bin", g_root);
    GPT2Config c = shape(2147483634, GPT2_VOCAB, 1, 1, 1 << 30, 2147483647);
    assert_true(1024 + 4 * wrapped_param_count(&c) == 1024); // the crafted wrap-around
    write_raw_model(path, GPT2_MODEL_FP32, &c, 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 1024);
    expect_death(read_model, path, DEATH_ANY_STATUS, path, "channels (C) = 1073741824 is outside [1, 65536]", NULL);
}

typedef struct { const char *path; } OpenArgs;
static void open_model(void *p) {
    GPT2ModelFile mf;
    gpt2_model_file_open(&mf, ((OpenArgs *)p)->path, NULL);
    gpt2_model_file_close(&mf);
}

// Each shape field, one past its limit (and at zero), is refused naming field and value.
static void test_header_fields_bounded(void **state) {
    (void)state;
    char path[512];
    snprintf(path, sizeof(path), "%s/field.bin", g_root);
    const GPT2Config ok = shape(64, 100, 2, 2, 16, 128);
    struct { const char *needle; GPT2Config c; } cases[] = {
        {"layers (L) = 1025 is outside [1, 1024]", shape(64, 100, 1025, 2, 16, 128)},
        {"channels (C) = 65537 is outside [1, 65536]", shape(64, 100, 2, 1, 65537, 128)},
        {"heads (NH) = 4097 is outside [1, 4096]", shape(64, 100, 2, 4097, 16, 128)},
        {"max sequence length (maxT) = 1048577 is outside", shape(1048577, 100, 2, 2, 16, 128)},
        {"vocab (V) = 65537 is outside [1, 65536]", shape(64, 65537, 2, 2, 16, 131072)},
        {"padded vocab (Vp) = 131073 is outside", shape(64, 100, 2, 2, 16, 131073)},
        {"layers (L) = 0 is outside", shape(64, 100, 0, 2, 16, 128)},
        {"channels (C) = -16 is outside", shape(64, 100, 2, 2, -16, 128)},
        {"not divisible by heads (NH) = 3", shape(64, 100, 2, 3, 16, 128)},
        {"padded vocab (Vp) = 64 is smaller than vocab (V) = 100", shape(64, 100, 2, 2, 16, 64)},
    };
    OpenArgs a = {path};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        write_raw_model(path, GPT2_MODEL_FP32, &cases[i].c, 4096);
        expect_death(open_model, &a, DEATH_ANY_STATUS, path, cases[i].needle, NULL);
    }
    // The real size must match the header's exactly, in both directions.
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    size_t n = gpt2_param_sizes(&ok, sizes);
    char needle[128];
    write_raw_model(path, GPT2_MODEL_BF16, &ok, 2 * n - 1);
    snprintf(needle, sizeof(needle), "is %zu bytes, but its header", 1024 + 2 * n - 1);
    char needs[64];
    snprintf(needs, sizeof(needs), "version 5) needs %zu", 1024 + 2 * n);
    expect_death(open_model, &a, DEATH_ANY_STATUS, path, needle, needs, NULL);
    write_raw_model(path, GPT2_MODEL_FP32, &ok, 4 * n + 4);
    snprintf(needs, sizeof(needs), "version 3) needs %zu", 1024 + 4 * n);
    expect_death(open_model, &a, DEATH_ANY_STATUS, path, needs, NULL);
    write_raw_model(path, GPT2_MODEL_FP32, &ok, 4 * n);
    open_model(&a);
    // The limits themselves are valid shapes: GPT-2 XL and far beyond.
    char err[256];
    GPT2Config xl = shape(1024, GPT2_VOCAB, 48, 25, 1600, 50304);
    assert_int_equal(gpt2_config_validate(&xl, err, sizeof(err)), 0);
    GPT2Config top = shape(1 << 20, 65536, 1024, 4096, 65536, 131072);
    assert_int_equal(gpt2_config_validate(&top, err, sizeof(err)), 0);
    assert_true(gpt2_param_sizes(&top, sizes) < ((size_t)1 << 56));
}

static void test_descriptors(void **state) {
    (void)state;
    GPT2Config c;
    char err[256];
    assert_int_equal(gpt2_config_from_descriptor("d12", &c, err, sizeof(err)), 0);
    assert_int_equal(c.num_layers, 12);
    assert_int_equal(c.channels, 768);
    assert_int_equal(c.num_heads, 12);
    assert_int_equal(c.max_seq_len, 1024);
    assert_int_equal(gpt2_config_from_descriptor("d1024", &c, err, sizeof(err)), 0); // the largest default shape
    assert_int_equal(c.channels, 65536);
    assert_int_equal(gpt2_config_from_descriptor("d4c128h4t256", &c, err, sizeof(err)), 0);
    assert_int_equal(c.channels, 128);
    assert_int_equal(c.max_seq_len, 256);
    struct { const char *desc, *needle; } bad[] = {
        {"d9223372036854775807", "d9223372036854775807 (layers) is outside [1, 1024]"},
        {"d99999999999999999999999", "(layers) is outside [1, 1024]"},
        {"d4294967297", "d4294967297 (layers) is outside"},  // 2^32 + 1: an int cast made it d1
        {"d2147483648", "d2147483648 (layers) is outside"},  // an int cast would make it negative
        {"d1025", "d1025 (layers) is outside [1, 1024]"},
        {"d4c4294967424", "c4294967424 (channels) is outside [1, 65536]"}, // 2^32 + 128 as int is 128
        {"d4h9223372036854775807", "(heads) is outside"},
        {"d4t9223372036854775807", "(max sequence length) is outside"},
        {"d0", "'d' needs a positive number"},
        {"d-3", "'d' needs a positive number"},
        {"d4x2", "unknown key 'x'"},
        {"d4c100h3", "not divisible by heads (NH) = 3"},
        {"c128", "must start with 'd'"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        if (gpt2_config_from_descriptor(bad[i].desc, &c, err, sizeof(err)) == 0)
            fail_msg("descriptor '%s' was accepted (L=%d C=%d)", bad[i].desc, c.num_layers, c.channels);
        if (strstr(err, bad[i].needle) == NULL)
            fail_msg("'%s': message \"%s\" lacks \"%s\"", bad[i].desc, err, bad[i].needle);
    }
}

// At the shape limits one attention array (B NH T T per layer, times L) no longer fits
// size_t: the forward must refuse, not allocate a wrapped size and write past it.
static void forward_huge(void *p) {
    (void)p;
    GPT2Config c = shape(1 << 20, 16, 1024, 4096, 4096, 128);
    GPT2 m;
    gpt2_cpu_build_external(&m, &c);
    int B = 4, T = 1 << 20;  // B*T = 2^22 tokens; B*NH*T*T*L = 2^64
    int *tokens = (int *)calloc((size_t)B * T, sizeof(int));
    gpt2_cpu_forward(&m, tokens, NULL, B, T);
}

static void test_activation_sizes_checked(void **state) {
    (void)state;
    expect_death(forward_huge, NULL, DEATH_ANY_STATUS, "GPT-2 activation sizes", "overflows size_t", NULL);
}

// Parameters with irregular values (and some that round differently in bf16).
static float *random_params(const GPT2Config *c, size_t *n) {
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    *n = gpt2_param_sizes(c, sizes);
    float *p = (float *)malloc(*n * sizeof(float));
    for (size_t i = 0; i < *n; i++) p[i] = rng_normal(11, 5, i) * (i % 7 == 0 ? 1e-3f : 1.0f);
    return p;
}

static void test_range_reads(void **state) {
    (void)state;
    GPT2Config c = shape(16, 100, 3, 2, 24, 128);
    size_t n;
    float *p = random_params(&c, &n);
    for (int version = GPT2_MODEL_FP32; version <= GPT2_MODEL_BF16; version += 2) {
        char path[512];
        snprintf(path, sizeof(path), "%s/ranges_v%d.bin", g_root, version);
        gpt2_model_file_write(path, &c, p, version);
        GPT2ModelFile mf;
        GPT2Config got;
        gpt2_model_file_open(&mf, path, &got);
        assert_memory_equal(&got, &c, sizeof(c));
        assert_int_equal(mf.num_params, n);
        assert_int_equal(mf.version, version);
        assert_int_equal(gpt2_model_file_param_bytes(&mf), n * (version == GPT2_MODEL_FP32 ? 4 : 2));
        // Random ranges in random order, including empty ones and the last element.
        float *out = (float *)malloc(n * sizeof(float));
        uint64_t bytes = 0;
        for (int k = 0; k < 200; k++) {
            size_t off = (size_t)rng_below(3, 1, (uint64_t)k, n + 1);
            size_t cnt = (size_t)rng_below(3, 2, (uint64_t)k, n - off + 1);
            if (k == 0) { off = n - 1; cnt = 1; }
            gpt2_model_file_read_range(&mf, off, cnt, out);
            bytes += cnt * (version == GPT2_MODEL_FP32 ? 4 : 2);
            for (size_t i = 0; i < cnt; i++) {
                float want = version == GPT2_MODEL_FP32 ? p[off + i] : gpt2_bf16_to_f32(gpt2_f32_to_bf16(p[off + i]));
                if (memcmp(&out[i], &want, sizeof(float)) != 0)
                    fail_msg("v%d element %zu: %.9g, stored %.9g", version, off + i, out[i], want);
            }
        }
        assert_int_equal(mf.bytes_read, bytes);
        gpt2_model_file_close(&mf);
        free(out);
    }
    free(p);
}

typedef struct { const char *path; size_t off, cnt; } RangeArgs;
static void read_past_end(void *p) {
    RangeArgs *a = (RangeArgs *)p;
    GPT2ModelFile mf;
    gpt2_model_file_open(&mf, a->path, NULL);
    float x[4];
    gpt2_model_file_read_range(&mf, a->off, a->cnt, x);
}

static void test_range_past_end(void **state) {
    (void)state;
    GPT2Config c = shape(16, 100, 1, 2, 8, 128);
    size_t n;
    float *p = random_params(&c, &n);
    char path[512];
    snprintf(path, sizeof(path), "%s/past.bin", g_root);
    gpt2_model_file_write(path, &c, p, GPT2_MODEL_FP32);
    RangeArgs a = {path, n - 1, 2};
    expect_death(read_past_end, &a, DEATH_ANY_STATUS, path, "past its", NULL);
    RangeArgs b = {path, SIZE_MAX, 2}; // offset + count wraps
    expect_death(read_past_end, &b, DEATH_ANY_STATUS, path, "overflows", NULL);
    free(p);
}

// The bytes of an llm.c model file assembled by hand.
static unsigned char *expected_bytes(const GPT2Config *c, const float *p, size_t n, int version, size_t *len) {
    size_t eb = version == GPT2_MODEL_FP32 ? 4 : 2;
    *len = 1024 + n * eb;
    unsigned char *b = (unsigned char *)calloc(*len, 1);
    int32_t h[8] = {GPT2_MODEL_MAGIC, version, c->max_seq_len, c->vocab_size, c->num_layers,
                    c->num_heads, c->channels, c->padded_vocab_size};
    memcpy(b, h, sizeof(h));
    for (size_t i = 0; i < n; i++) {
        if (version == GPT2_MODEL_FP32) {
            memcpy(b + 1024 + 4 * i, &p[i], 4);
        } else {
            uint16_t v = gpt2_f32_to_bf16(p[i]);
            memcpy(b + 1024 + 2 * i, &v, 2);
        }
    }
    return b;
}

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = (unsigned char *)malloc(*len ? *len : 1);
    assert_int_equal(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

static void assert_file_is(const char *path, const unsigned char *want, size_t want_len) {
    size_t len;
    unsigned char *got = slurp(path, &len);
    assert_int_equal(len, want_len);
    assert_memory_equal(got, want, len);
    free(got);
}

// No temp file of the writer may be left in g_root.
static void assert_no_temp_files(void) {
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "ls %s | grep -q '\\.tmp\\.'", g_root);
    assert_int_not_equal(system(cmd), 0);
}

static void test_streamed_writer(void **state) {
    (void)state;
    GPT2Config c = shape(16, 100, 2, 2, 24, 128);
    size_t n;
    float *p = random_params(&c, &n);
    for (int version = GPT2_MODEL_FP32; version <= GPT2_MODEL_BF16; version += 2) {
        char path[512];
        snprintf(path, sizeof(path), "%s/stream_v%d.bin", g_root, version);
        GPT2ModelWriter w;
        gpt2_model_writer_open(&w, path, &c, version);
        assert_int_equal(access(path, F_OK), -1); // nothing under the final name yet
        for (size_t at = 0, k = 0; at < n; k++) {  // uneven pieces
            size_t cnt = (size_t)rng_below(4, 4, k, 3000) + (k % 5 == 0 ? 0 : 1);
            if (cnt > n - at) cnt = n - at;
            gpt2_model_writer_append(&w, p + at, cnt);
            at += cnt;
        }
        gpt2_model_writer_commit(&w);
        size_t len;
        unsigned char *want = expected_bytes(&c, p, n, version, &len);
        assert_file_is(path, want, len);
        free(want);
    }
    assert_no_temp_files();
    free(p);
}

typedef struct { const char *path; const GPT2Config *c; const float *p; size_t count; } ShortArgs;
static void write_short(void *q) {
    ShortArgs *a = (ShortArgs *)q;
    GPT2ModelWriter w;
    gpt2_model_writer_open(&w, a->path, a->c, GPT2_MODEL_FP32);
    gpt2_model_writer_append(&w, a->p, a->count);
    gpt2_model_writer_commit(&w);
}

static void test_writer_refuses_incomplete(void **state) {
    (void)state;
    GPT2Config c = shape(16, 100, 1, 2, 8, 128);
    size_t n;
    float *p = random_params(&c, &n);
    char path[512];
    snprintf(path, sizeof(path), "%s/short.bin", g_root);
    ShortArgs a = {path, &c, p, n - 1};
    char num[64];
    snprintf(num, sizeof(num), "%zu of %zu parameters", n - 1, n);
    expect_death(write_short, &a, DEATH_ANY_STATUS, path, num, NULL);
    assert_int_equal(access(path, F_OK), -1);
    assert_no_temp_files();
    free(p);
}

// Export: the fetches come in file order, one slice each, and the file equals the
// hand-assembled one; without a path the same fetches happen and nothing is written.
typedef struct {
    const float *params;
    GPT2Slice *slices;
    size_t next_offset;
    int calls;
} ExportLog;

static void fetch_slice(void *ctx, int slice, float *out) {
    ExportLog *log = (ExportLog *)ctx;
    const GPT2Slice *s = &log->slices[slice];
    assert_int_equal(s->offset, log->next_offset);
    memcpy(out, log->params + s->offset, s->numel * sizeof(float));
    log->next_offset += s->numel;
    log->calls++;
}

static void test_export_slice_by_slice(void **state) {
    (void)state;
    GPT2Config c = shape(16, 100, 3, 2, 24, 128);
    size_t n;
    float *p = random_params(&c, &n);
    int ns = gpt2_num_slices(&c);
    GPT2Slice *slices = (GPT2Slice *)malloc((size_t)ns * sizeof(GPT2Slice));
    gpt2_slices(&c, slices);
    char path[512];
    snprintf(path, sizeof(path), "%s/export.bin", g_root);
    ExportLog log = {p, slices, 0, 0};
    GPT2ModelSource src = {NULL, 0, fetch_slice, &log};
    gpt2_model_file_export(path, &c, GPT2_MODEL_FP32, &src);
    assert_int_equal(log.calls, ns);
    assert_int_equal(log.next_offset, n);
    size_t len;
    unsigned char *want = expected_bytes(&c, p, n, GPT2_MODEL_FP32, &len);
    assert_file_is(path, want, len);
    free(want);
    ExportLog quiet = {p, slices, 0, 0};
    GPT2ModelSource quiet_src = {NULL, 0, fetch_slice, &quiet};
    gpt2_model_file_export(NULL, &c, GPT2_MODEL_FP32, &quiet_src);
    assert_int_equal(quiet.calls, ns);
    free(slices);
    free(p);
}

// The bf16 the model files store is fp32 rounded to nearest, ties to even, NaNs quiet: bits
// worked out by hand, so the range reads and the writer below (which use the same
// conversion for their expected values) rest on a checked rounding.
static void test_bf16_rounding_known_bits(void **state) {
    (void)state;
    static const struct { uint32_t f32; uint16_t bf16; } cases[] = {
        {0x3f800000u, 0x3f80},   // 1
        {0x3f808000u, 0x3f80},   // 1 + 2^-8: halfway, to the even 0x3f80
        {0x3f80c000u, 0x3f81},   // 1 + 2^-8 + 2^-9: above halfway, up
        {0x3f818000u, 0x3f82},   // halfway above the odd 0x3f81: up to the even
        {0x3f817fffu, 0x3f81},   // just below halfway: down
        {0xbfc00000u, 0xbfc0},   // -1.5, exact
        {0x7f7fffffu, 0x7f80},   // the largest float rounds to infinity
        {0x00000001u, 0x0000},   // the smallest subnormal rounds to zero
        {0x7fc00001u, 0x7fc0},   // a quiet NaN stays one
        {0x7f800001u, 0x7fc0},   // a signalling NaN comes out quiet, not infinity
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float x;
        memcpy(&x, &cases[i].f32, 4);
        uint16_t got = gpt2_f32_to_bf16(x);
        if (got != cases[i].bf16) fail_msg("fp32 0x%08x: bf16 0x%04x, want 0x%04x", cases[i].f32, got, cases[i].bf16);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_rounding_known_bits),
        cmocka_unit_test(test_wrapping_header_refused),
        cmocka_unit_test(test_header_fields_bounded),
        cmocka_unit_test(test_descriptors),
        cmocka_unit_test(test_activation_sizes_checked),
        cmocka_unit_test(test_range_reads),
        cmocka_unit_test(test_range_past_end),
        cmocka_unit_test(test_streamed_writer),
        cmocka_unit_test(test_writer_refuses_incomplete),
        cmocka_unit_test(test_export_slice_by_slice),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
