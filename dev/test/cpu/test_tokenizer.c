// test_tokenizer.c: the GPT-2 tokenizer (llmc/data/tokenizer.c) and the tokenize CLI.
// Run from the repo root: data files are found at data/gpt2 and dev/test.
// Expected ids come from an independent implementation (gpt-3-encoder, JavaScript;
// see dev/data/make_tokenizer_fixture.js), cross-checked there against Python's regex.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "../common/test_util.h"
#include "../../../llmc/data/tokenizer.h"
#include "../../../llmc/utils.h"

#define VOCAB_DIR "data/gpt2"
#define BIN_PATH "data/gpt2/gpt2_tokenizer.bin"
#define CASES_PATH "dev/test/cpu/tokenizer_cases.txt"
#define EXPECTED_PATH "dev/test/cpu/tokenizer_expected.txt"
#define TOKENIZE_BIN "./tokenize"

static Tokenizer g_tok;  // loaded from encoder.json + vocab.bpe once for all tests
static char g_tmp[64];   // scratch folder, removed at the end

// ---------------------------------------------------------------------------------
// Helpers

static const char *tmp_path(const char *name) {
    static char buf[8][384];
    static int k = 0;
    char *p = buf[k++ % 8];
    snprintf(p, 384, "%s/%.300s", g_tmp, name);
    return p;
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen_check(path, "rb");
    long size = file_size_check(f, path);
    char *buf = malloc_check((size_t)size + 1);
    if (size > 0) fread_check(buf, 1, (size_t)size, f, path);
    buf[size] = '\0';
    fclose(f);
    *n = (size_t)size;
    return buf;
}

static void spit(const char *path, const void *data, size_t n) {
    FILE *f = fopen_check(path, "wb");
    fwrite_check(data, 1, n, f, path);
    fclose(f);
}

static TokenBuf enc(const char *s, size_t n) {
    TokenBuf b = {0};
    tokenizer_encode_append(&g_tok, s, n, &b);
    return b;
}

static char *decode_all(const Tokenizer *t, const int32_t *ids, size_t n, size_t *len) {
    size_t total = 0, k;
    for (size_t i = 0; i < n; i++) { tokenizer_decode(t, ids[i], &k); total += k; }
    char *out = malloc_check(total + 1);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = tokenizer_decode(t, ids[i], &k);
        memcpy(out + off, p, k);
        off += k;
    }
    out[off] = '\0';
    *len = off;
    return out;
}

static int ids_equal(const TokenBuf *a, const int32_t *b, size_t n) {
    return a->n == n && (n == 0 || memcmp(a->ids, b, n * sizeof(int32_t)) == 0);
}

static void assert_roundtrip(const char *s, size_t n) {
    TokenBuf b = enc(s, n);
    size_t len;
    char *back = decode_all(&g_tok, b.ids, b.n, &len);
    assert_int_equal(len, n);
    assert_memory_equal(back, s, n);
    for (size_t i = 0; i < b.n; i++) {
        assert_true(b.ids[i] >= 0 && b.ids[i] < g_tok.vocab_size);
        assert_int_not_equal(b.ids[i], g_tok.eot_token); // text never turns into EOT
    }
    free(back);
    tokenbuf_free(&b);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint32_t rnd(void) { // xorshift64*
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1DULL) >> 32);
}

static size_t put_utf8(uint32_t cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 63)); o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 63));
    o[2] = (char)(0x80 | ((cp >> 6) & 63)); o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

// Runs a shell command; returns its exit status, stdout and stderr in *out / *err.
static int run_cmd(const char *cmd, char **out, char **err) {
    char full[8192];
    snprintf(full, sizeof(full), "%s > %s 2> %s", cmd, tmp_path("cmd.out"), tmp_path("cmd.err"));
    fflush(NULL);
    int st = system(full);
    size_t n;
    char *o = slurp(tmp_path("cmd.out"), &n), *e = slurp(tmp_path("cmd.err"), &n);
    if (out) *out = o; else free(o);
    if (err) *err = e; else free(e);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int have_cli(void) { return access(TOKENIZE_BIN, X_OK) == 0; }

// ---------------------------------------------------------------------------------
// Fixture: cases (JSON strings) and expected ids

typedef struct {
    char **text;
    size_t *len;
    int32_t **ids;
    size_t *nids;
    int n;
} Fixture;

static Fixture g_fix;

static void load_fixture(Fixture *fx) {
    size_t n;
    char *cases = slurp(CASES_PATH, &n), *expected = slurp(EXPECTED_PATH, &n);
    int cap = 1024;
    fx->text = calloc_check((size_t)cap, sizeof(char *));
    fx->len = calloc_check((size_t)cap, sizeof(size_t));
    fx->ids = calloc_check((size_t)cap, sizeof(int32_t *));
    fx->nids = calloc_check((size_t)cap, sizeof(size_t));
    int lineno = 0;
    for (char *line = strtok(cases, "\n"); line; line = strtok(NULL, "\n")) {
        lineno++;
        if (line[0] == '#' || line[0] == '\0') continue;
        cJSON *j = cJSON_Parse(line);
        if (!cJSON_IsString(j)) die("%s: line \"%.40s\" is not a JSON string", CASES_PATH, line);
        if (fx->n == cap) die("%s: more than %d cases; raise the limit in the test", CASES_PATH, cap);
        fx->text[fx->n] = strdup(j->valuestring);
        fx->len[fx->n] = strlen(j->valuestring);
        fx->n++;
        cJSON_Delete(j);
    }
    // expected: a comment line, then exactly one line per case (possibly empty)
    char *p = strchr(expected, '\n');
    if (expected[0] != '#' || p == NULL) die("%s: expected a '#' header line", EXPECTED_PATH);
    p++;
    for (int i = 0; i < fx->n; i++) {
        char *eol = strchr(p, '\n');
        if (eol == NULL) die("%s: has fewer lines than the %d cases", EXPECTED_PATH, fx->n);
        *eol = '\0';
        size_t cnt = 0;
        fx->ids[i] = malloc_check((strlen(p) / 2 + 1) * sizeof(int32_t));
        for (char *q = p, *end; *q; q = end) {
            long v = strtol(q, &end, 10);
            if (end == q) die("%s: bad id text \"%s\" for case %d", EXPECTED_PATH, q, i);
            fx->ids[i][cnt++] = (int32_t)v;
        }
        fx->nids[i] = cnt;
        p = eol + 1;
    }
    if (*p != '\0') die("%s: has more lines than the %d cases", EXPECTED_PATH, fx->n);
    (void)lineno;
    free(cases);
    free(expected);
}

static void print_escaped(const char *s, size_t n) {
    for (size_t i = 0; i < n && i < 120; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != 0x7F) putchar(c);
        else printf("\\x%02x", c);
    }
}

// ---------------------------------------------------------------------------------
// Tests: encoding

static void test_fixture_matches_reference(void **state) {
    (void)state;
    assert_true(g_fix.n > 400);
    int bad = 0;
    for (int i = 0; i < g_fix.n; i++) {
        TokenBuf b = enc(g_fix.text[i], g_fix.len[i]);
        if (!ids_equal(&b, g_fix.ids[i], g_fix.nids[i])) {
            if (++bad <= 10) {
                printf("case %d \"", i);
                print_escaped(g_fix.text[i], g_fix.len[i]);
                printf("\"\n  got     ");
                for (size_t k = 0; k < b.n; k++) printf(" %d", b.ids[k]);
                printf("\n  expected");
                for (size_t k = 0; k < g_fix.nids[i]; k++) printf(" %d", g_fix.ids[i][k]);
                printf("\n");
            }
        }
        tokenbuf_free(&b);
    }
    if (bad) fail_msg("%d of %d fixture cases differ from the reference", bad, g_fix.n);
}

static void test_known_ids(void **state) {
    (void)state;
    assert_int_equal(g_tok.vocab_size, GPT2_VOCAB_SIZE);
    assert_int_equal(g_tok.eot_token, GPT2_EOT_TOKEN);
    const int32_t hello[] = {15496, 995}, the[] = {262}, nl[] = {198};
    TokenBuf b = enc("Hello world", 11);
    assert_true(ids_equal(&b, hello, 2));
    tokenbuf_free(&b);
    b = enc(" the", 4);
    assert_true(ids_equal(&b, the, 1));
    tokenbuf_free(&b);
    b = enc("\n", 1);
    assert_true(ids_equal(&b, nl, 1));
    tokenbuf_free(&b);
    size_t len;
    assert_string_equal(tokenizer_decode(&g_tok, 50256, &len), "<|endoftext|>");
    assert_int_equal(len, 13);
    assert_string_equal(tokenizer_decode(&g_tok, 262, NULL), " the");
    assert_string_equal(tokenizer_decode(&g_tok, 0, NULL), "!");
    // The literal text "<|endoftext|>" is ordinary text, not the EOT token.
    b = enc("<|endoftext|>", 13);
    assert_true(b.n > 1);
    tokenbuf_free(&b);
    // Empty input gives no tokens.
    b = enc("", 0);
    assert_int_equal(b.n, 0);
    tokenbuf_free(&b);
}

static void test_encode_allocating_variant(void **state) {
    (void)state;
    int32_t *ids;
    size_t n;
    tokenizer_encode(&g_tok, "Hello world", 11, &ids, &n);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 15496);
    assert_int_equal(ids[1], 995);
    free(ids);
    tokenizer_encode(&g_tok, "", 0, &ids, &n);
    assert_int_equal(n, 0);
    free(ids);
}

static void test_roundtrip_fixture_cases(void **state) {
    (void)state;
    for (int i = 0; i < g_fix.n; i++) assert_roundtrip(g_fix.text[i], g_fix.len[i]);
}

static void test_roundtrip_random_utf8(void **state) {
    (void)state;
    char *buf = malloc_check(4 * 300 + 1);
    for (int iter = 0; iter < 3000; iter++) {
        size_t n = 0, len = rnd() % 300;
        for (size_t k = 0; k < len; k++) {
            uint32_t r = rnd() % 100, cp;
            if (r < 50) cp = rnd() % 0x80;                    // ASCII, controls and NUL included
            else if (r < 70) cp = 0x80 + rnd() % (0x800 - 0x80);
            else if (r < 90) { do cp = 0x800 + rnd() % (0x10000 - 0x800); while (cp >= 0xD800 && cp <= 0xDFFF); }
            else cp = 0x10000 + rnd() % (0x110000 - 0x10000);
            n += put_utf8(cp, buf + n);
        }
        assert_roundtrip(buf, n);
    }
    free(buf);
}

static void test_roundtrip_random_bytes(void **state) {
    (void)state;
    unsigned char buf[256];
    for (int iter = 0; iter < 3000; iter++) {
        size_t n = rnd() % sizeof(buf);
        for (size_t k = 0; k < n; k++) {
            uint32_t r = rnd();
            // mostly high bytes, so broken and valid multibyte sequences both occur
            buf[k] = (unsigned char)(r % 4 == 0 ? 0x20 + (r >> 8) % 0x60 : 0x80 + (r >> 8) % 0x80);
        }
        assert_roundtrip((const char *)buf, n);
    }
}

// Invalid UTF-8: each maximal invalid run is its own piece, and the valid text on
// either side is tokenized as if the run were the end / start of the text.
static void test_invalid_utf8_defined_behavior(void **state) {
    (void)state;
    const struct { const char *text; size_t a, b; } cases[] = {
        {"ab\xff" "cd", 2, 3},
        {"caf\xc3", 3, 4},                    // truncated 2-byte sequence at the end
        {"\xc0\xaf" "x", 0, 2},               // overlong '/'
        {"\xed\xa0\x80 y", 0, 3},             // UTF-16 surrogate
        {"\xf4\x90\x80\x80!", 0, 4},          // past U+10FFFF
        {"hello \x80\x80\x80 world", 6, 9},   // stray continuation bytes
        {"a  \xfe", 3, 4},                    // spaces before the run end a piece as at end of text
        {"\xe4\xbd" "a", 0, 2},               // truncated 3-byte sequence then ASCII
        {"x\xff\xfe\xfd", 1, 4},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const char *s = cases[c].text;
        size_t n = strlen(s), a = cases[c].a, b = cases[c].b;
        TokenBuf got = enc(s, n), want = {0};
        tokenizer_encode_append(&g_tok, s, a, &want);
        tokenizer_encode_append(&g_tok, s + a, b - a, &want);
        tokenizer_encode_append(&g_tok, s + b, n - b, &want);
        if (!ids_equal(&got, want.ids, want.n)) fail_msg("invalid UTF-8 case %zu segmented unexpectedly", c);
        assert_roundtrip(s, n);
        tokenbuf_free(&got);
        tokenbuf_free(&want);
    }
    // A lone invalid byte is its byte token.
    TokenBuf b = enc("\xff", 1);
    assert_int_equal(b.n, 1);
    size_t len;
    const char *p = tokenizer_decode(&g_tok, b.ids[0], &len);
    assert_int_equal(len, 1);
    assert_int_equal((unsigned char)p[0], 0xFF);
    tokenbuf_free(&b);
    // NUL bytes are valid UTF-8 and survive.
    assert_roundtrip("a\0b\0\0c", 6);
}

static void test_long_pieces(void **state) {
    (void)state;
    const size_t n = 1 << 20;
    char *s = malloc_check(n);
    const char fill[] = {'a', ' ', '7', '=', (char)0xFF};
    for (size_t f = 0; f < sizeof(fill); f++) {
        memset(s, fill[f], n);
        assert_roundtrip(s, n);
    }
    for (size_t i = 0; i < n; i++) s[i] = "ab"[i % 2]; // one 1 MB letter piece, many merge rounds
    assert_roundtrip(s, n);
    free(s);
}

static void test_safe_split(void **state) {
    (void)state;
    // Text from all fixture cases, one per line ("\n", then " ", then "\r\n" line ends), several
    // times over.
    size_t cap = 0;
    for (int i = 0; i < g_fix.n; i++) cap += g_fix.len[i] + 2;
    cap *= 4;
    char *text = malloc_check(cap + 1);
    size_t len = 0;
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < g_fix.n; i++) {
            memcpy(text + len, g_fix.text[i], g_fix.len[i]);
            len += g_fix.len[i];
            if (r == 3) text[len++] = '\r';
            text[len++] = r == 1 ? ' ' : '\n';
        }
    TokenBuf whole = enc(text, len);
    int checked = 0, in_crlf = 0;
    for (size_t pos = 0; pos < len; pos += 97) {
        size_t q = tokenizer_safe_split(text, len, pos);
        assert_true(q >= pos && q <= len);
        TokenBuf parts = {0};
        tokenizer_encode_append(&g_tok, text, q, &parts);
        tokenizer_encode_append(&g_tok, text + q, len - q, &parts);
        if (!ids_equal(&parts, whole.ids, whole.n)) fail_msg("cutting at %zu changes the encoding", q);
        tokenbuf_free(&parts);
        checked += q < len;
        in_crlf += q < len && text[q - 1] == '\r';
    }
    assert_true(checked > 100);
    assert_true(in_crlf > 20);   // "\r\n" text is cut too (inside the pair)
    // ... and never after a "\r\n": whole, "x\r\ny" has the pieces "\r" and "\n"; cut after
    // them, "\r\n" at the end of the first part is one
    const char *crlf = "ab\r\ncd";
    assert_int_equal(tokenizer_safe_split(crlf, strlen(crlf), 2), 3);
    // Chunked encoding of the whole text, as the CLI does it.
    TokenBuf chunks = {0};
    for (size_t pos = 0; pos < len;) {
        size_t q = tokenizer_safe_split(text, len, pos + 1000);
        tokenizer_encode_append(&g_tok, text + pos, q - pos, &chunks);
        pos = q;
    }
    assert_true(ids_equal(&chunks, whole.ids, whole.n));
    tokenbuf_free(&chunks);
    tokenbuf_free(&whole);
    free(text);
}

// ---------------------------------------------------------------------------------
// Tests: merge semantics on a tiny vocabulary

static void write_tiny_vocab(const char *dir_json, const char *dir_bpe, const char *merges, int drop_byte) {
    // GPT-2's byte alphabet, written independently of tokenizer.c
    cJSON *o = cJSON_CreateObject();
    int shifted = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        uint32_t cp = printable ? (uint32_t)b : 256u + (uint32_t)shifted++;
        char key[8];
        key[put_utf8(cp, key)] = '\0';
        // drop_byte: its id goes to a two-byte token instead, so ids stay dense
        cJSON_AddNumberToObject(o, b == drop_byte ? "qq" : key, b);
    }
    cJSON_AddNumberToObject(o, "ab", 256);
    cJSON_AddNumberToObject(o, "aba", 257);
    cJSON_AddNumberToObject(o, "abab", 258);
    cJSON_AddNumberToObject(o, "<|endoftext|>", 259);
    char *js = cJSON_PrintUnformatted(o);
    spit(dir_json, js, strlen(js));
    free(js);
    cJSON_Delete(o);
    spit(dir_bpe, merges, strlen(merges));
}

static void expect_tiny(Tokenizer *t, const char *text, const int32_t *want, size_t n) {
    int32_t *ids;
    size_t m;
    tokenizer_encode(t, text, strlen(text), &ids, &m);
    if (m != n || memcmp(ids, want, n * sizeof(int32_t)) != 0) {
        printf("\"%s\" ->", text);
        for (size_t i = 0; i < m; i++) printf(" %d", ids[i]);
        printf("\n");
        fail_msg("tiny vocabulary: wrong ids for \"%s\"", text);
    }
    free(ids);
}

// Ranks: 0 (ab, a) -> aba; 1 (a, b) -> ab; 2 (ab, ab) -> abab. GPT-2 replaces all
// occurrences of the best pair before looking again, so "abab" -> [ab, ab] -> [abab];
// merging one occurrence at a time would give [ab, a, b] -> [aba, b].
static void test_merge_rounds_like_gpt2(void **state) {
    (void)state;
    const char *j = tmp_path("tiny.json"), *m = tmp_path("tiny.bpe");
    write_tiny_vocab(j, m, "#version: 0.2\nab a\na b\nab ab\n", -1);
    Tokenizer t;
    tokenizer_load_bpe(&t, j, m);
    assert_int_equal(t.vocab_size, 260);
    assert_int_equal(t.eot_token, 259);
    const int32_t abab[] = {258}, ababab[] = {258, 256}, abaab[] = {257, 256}, aaa[] = {'a', 'a', 'a'},
                  ab_space_ab[] = {256, ' ', 256};
    expect_tiny(&t, "abab", abab, 1);
    expect_tiny(&t, "ababab", ababab, 2);
    expect_tiny(&t, "abaab", abaab, 2);
    expect_tiny(&t, "aaa", aaa, 3);
    expect_tiny(&t, "ab ab", ab_space_ab, 3); // " ab" is one piece: [' ', ab]
    tokenizer_free(&t);
}

// ---------------------------------------------------------------------------------
// Tests: llm.c tokenizer files

static void test_bin_save_load_roundtrip(void **state) {
    (void)state;
    const char *p = tmp_path("saved.bin");
    tokenizer_save(&g_tok, p);
    Tokenizer t;
    tokenizer_load(&t, p);
    assert_int_equal(t.vocab_size, g_tok.vocab_size);
    assert_int_equal(t.eot_token, g_tok.eot_token);
    assert_false(tokenizer_can_encode(&t));
    for (int id = 0; id < t.vocab_size; id++) {
        size_t a, b;
        const char *x = tokenizer_decode(&t, id, &a), *y = tokenizer_decode(&g_tok, id, &b);
        assert_int_equal(a, b);
        assert_memory_equal(x, y, a);
    }
    tokenizer_free(&t);
    // The committed file is exactly what save writes.
    size_t n1, n2;
    char *saved = slurp(p, &n1), *committed = slurp(BIN_PATH, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(saved, committed, n1);
    free(saved);
    free(committed);
}

static void test_bin_committed_decodes_like_vocab(void **state) {
    (void)state;
    Tokenizer t;
    tokenizer_load(&t, BIN_PATH);
    assert_int_equal(t.vocab_size, GPT2_VOCAB_SIZE);
    assert_int_equal(t.eot_token, GPT2_EOT_TOKEN);
    TokenBuf b = enc("Hello, 世界! 👋", strlen("Hello, 世界! 👋"));
    size_t len;
    char *s = decode_all(&t, b.ids, b.n, &len);
    assert_string_equal(s, "Hello, 世界! 👋");
    free(s);
    tokenbuf_free(&b);
    tokenizer_free(&t);
}

static void test_bin_version1_implies_eot(void **state) {
    (void)state;
    size_t n;
    char *buf = slurp(BIN_PATH, &n);
    int32_t h[4] = {TOKENIZER_MAGIC, 1, GPT2_VOCAB_SIZE, 0}; // version 1: no EOT field
    memcpy(buf, h, sizeof(h));
    spit(tmp_path("v1.bin"), buf, n);
    free(buf);
    Tokenizer t;
    tokenizer_load(&t, tmp_path("v1.bin"));
    assert_int_equal(t.eot_token, GPT2_EOT_TOKEN);
    assert_string_equal(tokenizer_decode(&t, 50256, NULL), "<|endoftext|>");
    tokenizer_free(&t);
}

static void load_bin_child(void *path) {
    Tokenizer t;
    tokenizer_load(&t, (const char *)path);
}

// Writes a modified copy of the committed file: header ints patched, size changed.
static const char *corrupt_copy(const char *name, int which, int32_t value, long size_delta, long zero_at) {
    size_t n;
    char *buf = slurp(BIN_PATH, &n);
    if (which >= 0) memcpy(buf + 4 * which, &value, 4);
    if (zero_at >= 0) buf[zero_at] = 0;
    char *big = calloc_check(n + 16, 1);
    memcpy(big, buf, n);
    const char *p = tmp_path(name);
    spit(p, big, (size_t)((long)n + size_delta));
    free(buf);
    free(big);
    return p;
}

static void test_bin_corrupt_files_exit_with_message(void **state) {
    (void)state;
    const char *p;
    p = corrupt_copy("magic.bin", 0, 12345, 0, -1);
    expect_death(load_bin_child, (void *)p, 1, p, "bad magic 12345", NULL);
    p = corrupt_copy("version.bin", 1, 7, 0, -1);
    expect_death(load_bin_child, (void *)p, 1, p, "unsupported version 7", NULL);
    p = corrupt_copy("vocab.bin", 2, -5, 0, -1);
    expect_death(load_bin_child, (void *)p, 1, p, "bad vocab size -5", NULL);
    p = corrupt_copy("eot.bin", 3, 60000, 0, -1);
    expect_death(load_bin_child, (void *)p, 1, p, "EOT id 60000", NULL);
    size_t n;
    free(slurp(BIN_PATH, &n));
    p = corrupt_copy("header.bin", -1, 0, 100 - (long)n, -1);
    expect_death(load_bin_child, (void *)p, 1, p, "truncated", "header", NULL);
    p = corrupt_copy("short.bin", -1, 0, -3, -1);
    expect_death(load_bin_child, (void *)p, 1, p, "truncated", "token 50256", NULL);
    p = corrupt_copy("cut.bin", -1, 0, -14, -1); // exactly before EOT's length byte
    expect_death(load_bin_child, (void *)p, 1, p, "truncated", "before token 50256", NULL);
    p = corrupt_copy("zero.bin", -1, 0, 0, 1024); // token 0's length byte
    expect_death(load_bin_child, (void *)p, 1, p, "token 0 has length 0", NULL);
    p = corrupt_copy("trailing.bin", -1, 0, 5, -1);
    expect_death(load_bin_child, (void *)p, 1, p, "5 unexpected bytes", NULL);
    p = tmp_path("does-not-exist.bin");
    expect_death(load_bin_child, (void *)p, 1, p, "cannot open", NULL);
}

static void encode_child(void *tok) { TokenBuf b = {0}; tokenizer_encode_append(tok, "hi", 2, &b); }
static void decode_child(void *id) { tokenizer_decode(&g_tok, *(int *)id, NULL); }

static void test_decode_only_cannot_encode(void **state) {
    (void)state;
    Tokenizer t;
    tokenizer_load(&t, BIN_PATH);
    expect_death(encode_child, &t, 1, "cannot encode", BIN_PATH, "encoder.json", NULL);
    tokenizer_free(&t);
}

static void test_decode_out_of_range(void **state) {
    (void)state;
    int big = 50257, neg = -1;
    expect_death(decode_child, &big, 1, "token id 50257 is out of range", "encoder.json", NULL);
    expect_death(decode_child, &neg, 1, "token id -1 is out of range", NULL);
}

typedef struct { const char *json, *bpe; } VocabPaths;
static void load_bpe_child(void *arg) {
    Tokenizer t;
    tokenizer_load_bpe(&t, ((VocabPaths *)arg)->json, ((VocabPaths *)arg)->bpe);
}

static void test_bad_vocab_files_exit_with_message(void **state) {
    (void)state;
    VocabPaths v = {tmp_path("bad.json"), tmp_path("bad.bpe")};
    write_tiny_vocab(v.json, v.bpe, "#version: 0.2\na b\nq zz\n", -1);
    expect_death(load_bpe_child, &v, 1, v.bpe, "line 3", "\"q zz\"", "not in the vocabulary", NULL);
    write_tiny_vocab(v.json, v.bpe, "a b\n", -1);
    expect_death(load_bpe_child, &v, 1, v.bpe, "line 1", "#version", NULL);
    write_tiny_vocab(v.json, v.bpe, "#version: 0.2\na b c\n", -1);
    expect_death(load_bpe_child, &v, 1, v.bpe, "line 2", "two tokens", NULL);
    write_tiny_vocab(v.json, v.bpe, "#version: 0.2\na b\nab a", -1);   // Python's [1:-1] drops "ab a"
    expect_death(load_bpe_child, &v, 1, v.bpe, "line 3", "\"ab a\"", "not ended by a newline", NULL);
    write_tiny_vocab(v.json, v.bpe, "#version: 0.2\na b\n", 'z');
    expect_death(load_bpe_child, &v, 1, v.json, "no token for the single byte 0x7A", NULL);
    spit(v.json, "{\"a\": 1,", 8);
    expect_death(load_bpe_child, &v, 1, v.json, "not valid JSON", NULL);
    spit(v.json, "[1, 2]", 6);
    expect_death(load_bpe_child, &v, 1, v.json, "JSON object", NULL);
    write_tiny_vocab(v.json, v.bpe, "#version: 0.2\n", -1);
    size_t n;
    char *js = slurp(v.json, &n);
    char *at = strstr(js, "\"ab\":256");
    assert_non_null(at);
    memcpy(at, "\"ab\":999", 8);
    spit(v.json, js, n);
    free(js);
    expect_death(load_bpe_child, &v, 1, v.json, "token \"ab\" has id 999", NULL);
    // a folder where a file belongs (it opens for reading): named as such
    VocabPaths d = {tmp_path("vocab_folder"), v.bpe};
    assert_int_equal(mkdir(d.json, 0700), 0);
    expect_death(load_bpe_child, &d, 1, d.json, "is a folder, not a file", NULL);
}

// ---------------------------------------------------------------------------------
// Tests: the tokenize CLI (skipped when ./tokenize has not been built)

static int32_t *read_shard(const char *path, int32_t *count) {
    size_t n;
    char *buf = slurp(path, &n);
    int32_t h[256];
    assert_true(n >= sizeof(h));
    memcpy(h, buf, sizeof(h));
    assert_int_equal(h[0], 20240520);
    assert_int_equal(h[1], 1);
    assert_int_equal(n, sizeof(h) + 2 * (size_t)h[2]);
    int32_t *ids = malloc_check((size_t)h[2] * sizeof(int32_t) + 4);
    for (int32_t i = 0; i < h[2]; i++) {
        uint16_t v;
        memcpy(&v, buf + sizeof(h) + 2 * (size_t)i, 2);
        ids[i] = v;
    }
    *count = h[2];
    free(buf);
    return ids;
}

// Concatenation of all shards PREFIX_<kind>NNNNNN.bin, in order; checks shard sizes.
static TokenBuf read_shards(const char *prefix, int val, int shard_size, int *nshards) {
    TokenBuf all = {0};
    int k = 0;
    for (;; k++) {
        char path[512];
        snprintf(path, sizeof(path), "%s_%s%06d.bin", prefix, !val ? "" : k == 0 ? "val_" : "train_", k);
        if (access(path, R_OK) != 0) break;
        int32_t cnt;
        int32_t *ids = read_shard(path, &cnt);
        if (shard_size > 0) assert_true(cnt <= shard_size);
        for (int32_t i = 0; i < cnt; i++) tokenbuf_push(&all, ids[i]);
        free(ids);
    }
    *nshards = k;
    return all;
}

static void test_cli_print_matches_library(void **state) {
    (void)state;
    if (!have_cli()) { printf("(%s not built)\n", TOKENIZE_BIN); skip(); }
    const char *text = "Hello world! It's 2024.\n\n  Ünïcödé, 世界 👋\ttabs\n";
    spit(tmp_path("print.txt"), text, strlen(text));
    char cmd[512], *out;
    snprintf(cmd, sizeof(cmd), "%s --print %s", TOKENIZE_BIN, tmp_path("print.txt"));
    assert_int_equal(run_cmd(cmd, &out, NULL), 0);
    TokenBuf want = enc(text, strlen(text)), got = {0};
    for (char *q = out, *end;; q = end) {
        long v = strtol(q, &end, 10);
        if (end == q) break;
        tokenbuf_push(&got, (int32_t)v);
    }
    assert_true(ids_equal(&got, want.ids, want.n));
    free(out);
    tokenbuf_free(&got);
    tokenbuf_free(&want);
}

static void test_cli_shards(void **state) {
    (void)state;
    if (!have_cli()) { printf("(%s not built)\n", TOKENIZE_BIN); skip(); }
    const char *a = "First document. It has some words.\n", *b = "Second, 第二 document!";
    spit(tmp_path("a.txt"), a, strlen(a));
    spit(tmp_path("b.txt"), b, strlen(b));
    TokenBuf want = {0};
    tokenbuf_push(&want, GPT2_EOT_TOKEN);
    tokenizer_encode_append(&g_tok, a, strlen(a), &want);
    tokenbuf_push(&want, GPT2_EOT_TOKEN);
    tokenizer_encode_append(&g_tok, b, strlen(b), &want);

    char cmd[1024];
    int nsh;
    snprintf(cmd, sizeof(cmd), "%s -o %s --shard-size 7 %s %s", TOKENIZE_BIN, tmp_path("plain"),
             tmp_path("a.txt"), tmp_path("b.txt"));
    assert_int_equal(run_cmd(cmd, NULL, NULL), 0);
    TokenBuf got = read_shards(tmp_path("plain"), 0, 7, &nsh);
    assert_int_equal(nsh, (int)((want.n + 6) / 7));
    assert_true(ids_equal(&got, want.ids, want.n));
    tokenbuf_free(&got);

    snprintf(cmd, sizeof(cmd), "%s -o %s --val-first --shard-size 5 %s %s", TOKENIZE_BIN, tmp_path("vf"),
             tmp_path("a.txt"), tmp_path("b.txt"));
    assert_int_equal(run_cmd(cmd, NULL, NULL), 0);
    got = read_shards(tmp_path("vf"), 1, 5, &nsh);
    assert_true(nsh >= 2);
    assert_true(ids_equal(&got, want.ids, want.n));
    assert_int_not_equal(access(tmp_path("vf_000000.bin"), F_OK), 0);
    tokenbuf_free(&got);

    // --val-tokens: the val shard is whole documents (here the first one).
    snprintf(cmd, sizeof(cmd), "%s -o %s --val-tokens 3 --shard-size 5 %s %s", TOKENIZE_BIN, tmp_path("vt"),
             tmp_path("a.txt"), tmp_path("b.txt"));
    assert_int_equal(run_cmd(cmd, NULL, NULL), 0);
    int32_t cnt;
    int32_t *val = read_shard(tmp_path("vt_val_000000.bin"), &cnt);
    TokenBuf first = {0};
    tokenbuf_push(&first, GPT2_EOT_TOKEN);
    tokenizer_encode_append(&g_tok, a, strlen(a), &first);
    assert_int_equal((size_t)cnt, first.n);
    assert_memory_equal(val, first.ids, first.n * sizeof(int32_t));
    free(val);
    got = read_shards(tmp_path("vt"), 1, 0, &nsh);
    assert_true(ids_equal(&got, want.ids, want.n));
    tokenbuf_free(&got);
    tokenbuf_free(&first);
    tokenbuf_free(&want);
}

static void test_cli_jsonl(void **state) {
    (void)state;
    if (!have_cli()) { printf("(%s not built)\n", TOKENIZE_BIN); skip(); }
    const char *good = "{\"text\": \"one\", \"id\": 1}\n\n{\"text\": \"two\\nlines \\u00e9\"}\n";
    spit(tmp_path("good.jsonl"), good, strlen(good));
    char cmd[1024], *err;
    snprintf(cmd, sizeof(cmd), "%s --jsonl -o %s %s", TOKENIZE_BIN, tmp_path("j"), tmp_path("good.jsonl"));
    assert_int_equal(run_cmd(cmd, NULL, NULL), 0);
    TokenBuf want = {0};
    tokenbuf_push(&want, GPT2_EOT_TOKEN);
    tokenizer_encode_append(&g_tok, "one", 3, &want);
    tokenbuf_push(&want, GPT2_EOT_TOKEN);
    tokenizer_encode_append(&g_tok, "two\nlines \xc3\xa9", 12, &want);
    int nsh;
    TokenBuf got = read_shards(tmp_path("j"), 0, 0, &nsh);
    assert_int_equal(nsh, 1);
    assert_true(ids_equal(&got, want.ids, want.n));
    tokenbuf_free(&got);
    tokenbuf_free(&want);

    const char *bad = "{\"text\": \"ok\"}\n{\"text\": \"unterminated}\n";
    spit(tmp_path("bad.jsonl"), bad, strlen(bad));
    snprintf(cmd, sizeof(cmd), "%s --jsonl -o %s %s", TOKENIZE_BIN, tmp_path("jb"), tmp_path("bad.jsonl"));
    assert_int_equal(run_cmd(cmd, NULL, &err), 1);
    char where[512];
    snprintf(where, sizeof(where), "%s:2", tmp_path("bad.jsonl"));
    if (!strstr(err, where)) fail_msg("stderr lacks \"%s\": %s", where, err);
    free(err);

    const char *notext = "{\"text\": \"ok\"}\n{\"body\": \"x\"}\n";
    spit(tmp_path("notext.jsonl"), notext, strlen(notext));
    snprintf(cmd, sizeof(cmd), "%s --jsonl --print %s", TOKENIZE_BIN, tmp_path("notext.jsonl"));
    assert_int_equal(run_cmd(cmd, NULL, &err), 1);
    snprintf(where, sizeof(where), "%s:2", tmp_path("notext.jsonl"));
    if (!strstr(err, where) || !strstr(err, "\"text\"")) fail_msg("stderr lacks \"%s\" / \"text\": %s", where, err);
    free(err);

    // \u0000 is a NUL character of the text (Python's json reads it so; tiktoken encodes it):
    // cJSON's strings end at a NUL, yet the text is taken whole, a \u0001 beside it unchanged
    const char *nul = "{\"text\": \"a\\u0000b\\u0001c\\u0000\"}\n";
    spit(tmp_path("nul.jsonl"), nul, strlen(nul));
    snprintf(cmd, sizeof(cmd), "%s --jsonl -o %s %s", TOKENIZE_BIN, tmp_path("jn"), tmp_path("nul.jsonl"));
    assert_int_equal(run_cmd(cmd, NULL, NULL), 0);
    tokenbuf_push(&want, GPT2_EOT_TOKEN);
    tokenizer_encode_append(&g_tok, "a\0b\x01" "c\0", 6, &want);
    got = read_shards(tmp_path("jn"), 0, 0, &nsh);
    assert_int_equal(nsh, 1);
    assert_true(ids_equal(&got, want.ids, want.n));
    tokenbuf_free(&got);
    tokenbuf_free(&want);
    // one in another field cuts no text: the document is taken whole (an escaped backslash
    // before "u0000" in the text is no escape either)
    const char *other = "{\"id\": \"x\\u0000y\", \"text\": \"a\\\\u0000b\"}\n";
    spit(tmp_path("other.jsonl"), other, strlen(other));
    snprintf(cmd, sizeof(cmd), "%s --jsonl --print %s", TOKENIZE_BIN, tmp_path("other.jsonl"));
    char *out;
    assert_int_equal(run_cmd(cmd, &out, &err), 0);
    const char *plain = "a\\u0000b\n";   // the text as cJSON decodes it: a\u0000b
    spit(tmp_path("other.txt"), plain, strlen(plain) - 1);
    char *alone;
    snprintf(cmd, sizeof(cmd), "%s --print %s", TOKENIZE_BIN, tmp_path("other.txt"));
    assert_int_equal(run_cmd(cmd, &alone, NULL), 0);
    if (strcmp(out, alone) != 0) fail_msg("a \\u0000 outside \"text\": tokens %s, the text alone gives %s", out, alone);
    free(out);
    free(alone);
    free(err);
    // what cJSON would decode as a NUL and Python's json refuses: a \u without four hex
    // digits, a raw NUL byte; each names its line and column (an escaped backslash before
    // "uZZZZ" is plain text, taken)
    const char *hex = "{\"text\": \"ok\"}\n{\"text\": \"keep\\uZZZZ lost\"}\n";
    const char nulbyte[] = "{\"text\": \"a\0b\"}\n";
    const char *esc = "{\"text\": \"a\\\\uZZZZ\"}\n";
    // a UTF-16 surrogate outside a high-low pair is no character (cJSON refuses the line with
    // no useful column; Python's json takes it and then cannot encode the text): named; a pair
    // is one character, taken
    const char *high = "{\"text\": \"a\\uD83Dx\"}\n", *high2 = "{\"text\": \"\\ud83d\\u0041\"}\n";
    const char *low = "{\"text\": \"a\\ud83d\\ude00\\uDE00\"}\n", *pair = "{\"text\": \"a\\ud83d\\ude00b\"}\n";
    const struct { const char *name, *data; size_t len; const char *want; int rc; } cases[] = {
        {"hex.jsonl", hex, strlen(hex), ":2: not valid JSON (column 15: a \\u escape needs four hex digits)", 1},
        {"nulbyte.jsonl", nulbyte, sizeof(nulbyte) - 1, ":1: not valid JSON (column 12: a NUL byte)", 1},
        {"esc.jsonl", esc, strlen(esc), NULL, 0},
        {"high.jsonl", high, strlen(high), ":1: not valid JSON (column 12: a UTF-16 high surrogate with no low one after it)", 1},
        {"high2.jsonl", high2, strlen(high2), ":1: not valid JSON (column 11: a UTF-16 high surrogate with no low one after it)", 1},
        {"low.jsonl", low, strlen(low), ":1: not valid JSON (column 24: a UTF-16 low surrogate with no high one before it)", 1},
        {"pair.jsonl", pair, strlen(pair), NULL, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        spit(tmp_path(cases[i].name), cases[i].data, cases[i].len);
        snprintf(cmd, sizeof(cmd), "%s --jsonl --print %s", TOKENIZE_BIN, tmp_path(cases[i].name));
        assert_int_equal(run_cmd(cmd, NULL, &err), cases[i].rc);
        if (cases[i].want && !strstr(err, cases[i].want)) fail_msg("%s: stderr lacks \"%s\": %s", cases[i].name, cases[i].want, err);
        free(err);
    }
}

// A vocabulary of more than 65536 tokens: shards hold uint16 ids, so -o refuses it before
// anything is written, naming the vocabulary and its size; --print takes it.
static void test_cli_vocab_too_big_for_shards(void **state) {
    (void)state;
    if (!have_cli()) { printf("(%s not built)\n", TOKENIZE_BIN); skip(); }
    char dir[512], json[600], bpe[600], cmd[2048], *out, *err;
    snprintf(dir, sizeof dir, "%s", tmp_path("bigvocab"));
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(json, sizeof json, "%s/encoder.json", dir);
    snprintf(bpe, sizeof bpe, "%s/vocab.bpe", dir);
    write_tiny_vocab(json, bpe, "#version: 0.2\na b\n", -1);   // 260 tokens, EOT 259
    size_t n;
    char *js = slurp(json, &n);
    cJSON *o = cJSON_Parse(js);
    free(js);
    for (int id = 260; id <= 65536; id++) {   // 65537 tokens in all
        char key[16];
        snprintf(key, sizeof key, "zz%d", id);
        cJSON_AddNumberToObject(o, key, id);
    }
    js = cJSON_PrintUnformatted(o);
    spit(json, js, strlen(js));
    free(js);
    cJSON_Delete(o);
    spit(tmp_path("big.txt"), "ab", 2);
    snprintf(cmd, sizeof cmd, "%s --vocab %s -o %s %s", TOKENIZE_BIN, dir, tmp_path("big/out"), tmp_path("big.txt"));
    assert_int_equal(run_cmd(cmd, NULL, &err), 1);
    if (!strstr(err, dir) || !strstr(err, "holds 65537 tokens") || !strstr(err, "at most 65536"))
        fail_msg("stderr lacks the vocabulary, its size and the limit: %s", err);
    free(err);
    assert_int_not_equal(access(tmp_path("big"), F_OK), 0);   // nothing written, not even the folder
    snprintf(cmd, sizeof cmd, "%s --vocab %s --print %s", TOKENIZE_BIN, dir, tmp_path("big.txt"));
    assert_int_equal(run_cmd(cmd, &out, NULL), 0);
    assert_string_equal(out, "256\n");   // "ab": the one merge
    free(out);
}

static void test_cli_write_tokenizer_and_help(void **state) {
    (void)state;
    if (!have_cli()) { printf("(%s not built)\n", TOKENIZE_BIN); skip(); }
    char cmd[512], *out;
    snprintf(cmd, sizeof(cmd), "%s --write-tokenizer %s", TOKENIZE_BIN, tmp_path("cli.bin"));
    assert_int_equal(run_cmd(cmd, NULL, NULL), 0);
    size_t n1, n2;
    char *x = slurp(tmp_path("cli.bin"), &n1), *y = slurp(BIN_PATH, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(x, y, n1);
    free(x);
    free(y);
    snprintf(cmd, sizeof(cmd), "%s --help", TOKENIZE_BIN);
    assert_int_equal(run_cmd(cmd, &out, NULL), 0);
    assert_non_null(strstr(out, "--val-first"));
    assert_non_null(strstr(out, "--jsonl"));
    free(out);
    snprintf(cmd, sizeof(cmd), "%s --shard-size 0 -o x", TOKENIZE_BIN);
    assert_int_equal(run_cmd(cmd, NULL, &out), 1);
    assert_non_null(strstr(out, "--shard-size"));
    free(out);
}

// ---------------------------------------------------------------------------------

static int setup(void **state) {
    (void)state;
    tokenizer_load_bpe_dir(&g_tok, VOCAB_DIR);
    load_fixture(&g_fix);
    snprintf(g_tmp, sizeof(g_tmp), "/tmp/test_tokenizer.XXXXXX");
    if (mkdtemp(g_tmp) == NULL) die("cannot create a temp folder from '%s': %s", g_tmp, strerror(errno));
    return 0;
}

static int teardown(void **state) {
    (void)state;
    DIR *d = opendir(g_tmp);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) unlink(tmp_path(e->d_name));
        closedir(d);
        rmdir(g_tmp);
    }
    tokenizer_free(&g_tok);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_matches_reference),
        cmocka_unit_test(test_known_ids),
        cmocka_unit_test(test_encode_allocating_variant),
        cmocka_unit_test(test_roundtrip_fixture_cases),
        cmocka_unit_test(test_roundtrip_random_utf8),
        cmocka_unit_test(test_roundtrip_random_bytes),
        cmocka_unit_test(test_invalid_utf8_defined_behavior),
        cmocka_unit_test(test_long_pieces),
        cmocka_unit_test(test_safe_split),
        cmocka_unit_test(test_merge_rounds_like_gpt2),
        cmocka_unit_test(test_bin_save_load_roundtrip),
        cmocka_unit_test(test_bin_committed_decodes_like_vocab),
        cmocka_unit_test(test_bin_version1_implies_eot),
        cmocka_unit_test(test_bin_corrupt_files_exit_with_message),
        cmocka_unit_test(test_decode_only_cannot_encode),
        cmocka_unit_test(test_decode_out_of_range),
        cmocka_unit_test(test_bad_vocab_files_exit_with_message),
        cmocka_unit_test(test_cli_print_matches_library),
        cmocka_unit_test(test_cli_shards),
        cmocka_unit_test(test_cli_jsonl),
        cmocka_unit_test(test_cli_vocab_too_big_for_shards),
        cmocka_unit_test(test_cli_write_tokenizer_and_help),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
