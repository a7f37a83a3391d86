// tokenizer.c: GPT-2 byte-level BPE: vocabulary loading, llm.c tokenizer files,
// pre-tokenization (PCRE2) and rank-ordered pair merging.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer.h"

#include <cjson/cJSON.h>
#include <pcre2.h>

#include "../atomic_file.h"
#include "../numerics/rand.h"
#include "../utils.h"

// GPT-2's pattern with \s written as \p{White_Space} (and \S as its complement):
// Python's `regex` module, which GPT-2 uses, defines \s as exactly the White_Space
// property, while PCRE2's \s also matches U+180E. Verified over all code points.
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\p{White_Space}\\p{L}\\p{N}]+"
    "|\\p{White_Space}+(?!\\P{White_Space})|\\p{White_Space}+";

#define CACHE_MAX_PIECE 64            // longer pieces are rare; caching them buys little
#define CACHE_SLOTS (1u << 18)
#define CACHE_MAX_ENTRIES (CACHE_SLOTS / 2) // then the cache is cleared (keeps probes short)
#define PAIR_EMPTY UINT64_MAX
#define MAX_VOCAB (1 << 24)

typedef struct {
    uint64_t hash;
    uint32_t key_off, val_off;
    uint16_t key_len, val_len; // key_len 0 marks an empty slot
} CacheSlot;

struct TokenizerEncoder {
    int32_t byte_id[256];       // token of each single byte
    // (left, right) -> rank, open addressing; rank r merges into merge_result[r]
    uint64_t *pair_key;
    int32_t *pair_rank;
    size_t pair_mask;
    int32_t *merge_left, *merge_right, *merge_result;
    int num_merges;
    pcre2_code *re;
    pcre2_match_data *md;
    // piece -> ids cache
    CacheSlot *cache;
    size_t cache_entries;
    unsigned char *cache_keys;
    size_t ck_len, ck_cap;
    int32_t *cache_vals;
    size_t cv_len, cv_cap;
    // BPE scratch, grown on demand
    int32_t *sym, *next, *prev, *touched;
    uint64_t *heap;
    size_t scratch_cap;
};

// ---------------------------------------------------------------------------------
// Small helpers

static void *realloc_check(void *p, size_t size) {
    void *q = realloc(p, size ? size : 1);
    if (q == NULL) die("out of host memory reallocating to %zu bytes", size);
    return q;
}

void tokenbuf_push(TokenBuf *b, int32_t id) {
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 1024;
        b->ids = realloc_check(b->ids, b->cap * sizeof(int32_t));
    }
    b->ids[b->n++] = id;
}

void tokenbuf_free(TokenBuf *b) {
    free(b->ids);
    b->ids = NULL;
    b->n = b->cap = 0;
}

static char *read_whole_file(const char *path, size_t *n) {
    FILE *f = fopen_check(path, "rb");
    long size = file_size_check(f, path);
    char *buf = malloc_check((size_t)size + 1);
    if (size > 0) fread_check(buf, 1, (size_t)size, f, path);
    fclose(f);
    buf[size] = '\0';
    *n = (size_t)size;
    return buf;
}

static uint64_t hash_bytes(const unsigned char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ULL; // FNV-1a, then a full mix for the low bits
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return rng_mix64(h ^ n);
}

static size_t pow2_at_least(size_t n) {
    size_t p = 1;
    while (p < n) p <<= 1;
    return p;
}

// Length of the valid UTF-8 character at s (RFC 3629: shortest form, no surrogates,
// at most U+10FFFF), or 0 if the bytes there are not one. *cp gets the code point.
static int utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    int len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { len = 3; v = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; v = c & 0x07; min = 0x10000; }
    else return 0;
    if (n < (size_t)len) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
}

// GPT-2 writes tokens as text: printable Latin-1 bytes stand for themselves and the
// other 68 bytes become U+0100.. in byte order. cp_to_byte inverts it (-1: not used).
static void byte_alphabet(int16_t cp_to_byte[512]) {
    for (int i = 0; i < 512; i++) cp_to_byte[i] = -1;
    int shifted = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        cp_to_byte[printable ? b : 256 + shifted++] = (int16_t)b;
    }
}

// Maps a token written in GPT-2's alphabet back to raw bytes. Returns the byte count,
// or -1 with *bad set to the offending code point.
static int alphabet_to_bytes(const int16_t cp_to_byte[512], const char *s, size_t n,
                             unsigned char *out, uint32_t *bad) {
    size_t i = 0;
    int m = 0;
    while (i < n) {
        uint32_t cp = 0xFFFD;
        int k = utf8_next((const unsigned char *)s + i, n - i, &cp);
        if (k == 0 || cp >= 512 || cp_to_byte[cp] < 0) { *bad = k ? cp : 0xFFFD; return -1; }
        out[m++] = (unsigned char)cp_to_byte[cp];
        i += (size_t)k;
    }
    return m;
}

// ---------------------------------------------------------------------------------
// Tables shared by both loaders

static void tokenizer_alloc(Tokenizer *t, int vocab_size, size_t byte_capacity) {
    memset(t, 0, sizeof(*t));
    t->vocab_size = vocab_size;
    t->token_len = calloc_check((size_t)vocab_size, sizeof(uint8_t));
    t->token_off = calloc_check((size_t)vocab_size, sizeof(uint32_t));
    t->token_bytes = malloc_check(byte_capacity);
}

static void set_source(Tokenizer *t, const char *a, const char *b) {
    if (b) snprintf(t->source, sizeof(t->source), "%s + %s", a, b);
    else snprintf(t->source, sizeof(t->source), "%s", a);
}

// Raw bytes -> id, for resolving merges while loading. Open addressing over ids.
typedef struct {
    int32_t *slot;
    size_t mask;
} VocabIndex;

static int32_t vocab_find(const VocabIndex *vi, const Tokenizer *t, const unsigned char *p, size_t n) {
    for (size_t i = hash_bytes(p, n) & vi->mask;; i = (i + 1) & vi->mask) {
        int32_t id = vi->slot[i];
        if (id < 0) return -1;
        if (t->token_len[id] == n && memcmp(t->token_bytes + t->token_off[id], p, n) == 0) return id;
    }
}

// ---------------------------------------------------------------------------------
// Loading encoder.json + vocab.bpe

static void pair_insert(TokenizerEncoder *e, int32_t a, int32_t b, int32_t rank) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t i = rng_mix64(key) & e->pair_mask;
    while (e->pair_key[i] != PAIR_EMPTY && e->pair_key[i] != key) i = (i + 1) & e->pair_mask;
    // A repeated pair keeps its last rank, as Python's dict(zip(merges, ranks)) does.
    e->pair_key[i] = key;
    e->pair_rank[i] = rank;
}

static inline int32_t pair_lookup(const TokenizerEncoder *e, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (size_t i = rng_mix64(key) & e->pair_mask;; i = (i + 1) & e->pair_mask) {
        if (e->pair_key[i] == key) return e->pair_rank[i];
        if (e->pair_key[i] == PAIR_EMPTY) return -1;
    }
}

static void load_encoder_json(Tokenizer *t, const char *path, const int16_t cp_to_byte[512]) {
    size_t n;
    char *text = read_whole_file(path, &n);
    cJSON *root = cJSON_ParseWithLength(text, n);
    if (root == NULL) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = (at && at >= text && at <= text + n) ? (size_t)(at - text) : 0;
        die("'%s' is not valid JSON (parse error near byte %zu)", path, off);
    }
    if (!cJSON_IsObject(root)) die("'%s' must be a JSON object mapping token strings to ids", path);
    int count = cJSON_GetArraySize(root);
    if (count < 257 || count > MAX_VOCAB)
        die("'%s' has %d tokens; expected the 256 byte tokens plus merges and <|endoftext|> (at most %d)",
            path, count, MAX_VOCAB);
    size_t capacity = 0;
    for (cJSON *it = root->child; it; it = it->next) capacity += strlen(it->string) + 1;
    tokenizer_alloc(t, count, capacity);
    unsigned char *seen = calloc_check((size_t)count, 1);
    unsigned char raw[1024];
    size_t used = 0;
    for (cJSON *it = root->child; it; it = it->next) {
        const char *key = it->string;
        size_t klen = strlen(key);
        if (klen == 0) die("'%s' has an empty token string", path);
        if (klen > 4 * 255) die("'%s': token \"%.40s...\" is longer than 255 bytes (llm.c's limit)", path, key);
        uint32_t bad;
        int m = alphabet_to_bytes(cp_to_byte, key, klen, raw, &bad);
        if (m < 0) die("'%s': token \"%s\" has character U+%04X, which is not in GPT-2's byte alphabet", path, key, bad);
        if (m > 255) die("'%s': token \"%s\" is %d bytes, longer than llm.c's limit of 255", path, key, m);
        if (!cJSON_IsNumber(it)) die("'%s': token \"%s\" has an id that is not a number", path, key);
        double v = it->valuedouble;
        if (v < 0 || v >= count || v != (double)(int)v)
            die("'%s': token \"%s\" has id %.17g; ids must be integers in [0, %d), %d being the token count",
                path, key, v, count, count);
        int id = (int)v;
        if (seen[id]) die("'%s': id %d is used by more than one token (again by \"%s\")", path, id, key);
        seen[id] = 1;
        t->token_len[id] = (uint8_t)m;
        t->token_off[id] = (uint32_t)used;
        memcpy(t->token_bytes + used, raw, (size_t)m);
        t->token_bytes[used + (size_t)m] = '\0';
        used += (size_t)m + 1;
    }
    free(seen);
    cJSON_Delete(root);
    free(text);
}

static void load_merges(Tokenizer *t, const VocabIndex *vi, const char *path, const int16_t cp_to_byte[512]) {
    TokenizerEncoder *e = t->enc;
    size_t n;
    char *text = read_whole_file(path, &n);
    // Count lines to size the tables (one merge per line after the header).
    size_t lines = 1;
    for (size_t i = 0; i < n; i++) lines += text[i] == '\n';
    e->merge_left = malloc_check(lines * sizeof(int32_t));
    e->merge_right = malloc_check(lines * sizeof(int32_t));
    e->merge_result = malloc_check(lines * sizeof(int32_t));
    size_t cap = pow2_at_least(2 * lines + 16);
    e->pair_key = malloc_check(cap * sizeof(uint64_t));
    e->pair_rank = malloc_check(cap * sizeof(int32_t));
    for (size_t i = 0; i < cap; i++) e->pair_key[i] = PAIR_EMPTY;
    e->pair_mask = cap - 1;

    unsigned char a[1024], b[1024], ab[2048];
    size_t pos = 0;
    int lineno = 0;
    while (pos < n) {
        size_t end = pos;
        while (end < n && text[end] != '\n') end++;
        lineno++;
        size_t len = end - pos;
        char *line = text + pos;
        pos = end + 1;
        if (len > 0 && line[len - 1] == '\r') len--;
        line[len] = '\0';
        if (lineno == 1) {
            // Python's loader drops the first line unread; insist it is the header so
            // that ranks cannot silently shift by one.
            if (strncmp(line, "#version", 8) != 0)
                die("'%s' line 1: expected the '#version: ...' header, got \"%.60s\"", path, line);
            continue;
        }
        if (end == n && len > 0)   // GPT-2's encoder.py, tiktoken and transformers read split('\n')[1:-1]
            die("'%s' line %d: \"%.60s\" is not ended by a newline, and GPT-2's own loaders drop the text "
                "after the last newline, so they would not take it as a merge: end the file with a newline "
                "to keep it, or remove the line", path, lineno, line);
        if (len == 0) {
            if (pos >= n) break; // final newline
            die("'%s' line %d is empty; every line after the header must be a merge \"A B\"", path, lineno);
        }
        char *sp = strchr(line, ' ');
        if (sp == NULL || sp == line || sp[1] == '\0' || strchr(sp + 1, ' ') != NULL)
            die("'%s' line %d: expected two tokens separated by one space, got \"%s\"", path, lineno, line);
        if ((size_t)(sp - line) > 4 * 255 || strlen(sp + 1) > 4 * 255)
            die("'%s' line %d: a token is longer than any vocabulary token can be", path, lineno);
        uint32_t bad;
        int la = alphabet_to_bytes(cp_to_byte, line, (size_t)(sp - line), a, &bad);
        int lb = la < 0 ? -1 : alphabet_to_bytes(cp_to_byte, sp + 1, strlen(sp + 1), b, &bad);
        if (la < 0 || lb < 0)
            die("'%s' line %d: \"%s\" has character U+%04X, which is not in GPT-2's byte alphabet", path, lineno, line, bad);
        int32_t ida = vocab_find(vi, t, a, (size_t)la);
        int32_t idb = vocab_find(vi, t, b, (size_t)lb);
        memcpy(ab, a, (size_t)la);
        memcpy(ab + la, b, (size_t)lb);
        int32_t idab = vocab_find(vi, t, ab, (size_t)(la + lb));
        if (ida < 0 || idb < 0 || idab < 0) {
            *sp = '\0';
            die("'%s' line %d: merge \"%s %s\": %s is not in the vocabulary", path, lineno, line, sp + 1,
                ida < 0 ? "the left token" : idb < 0 ? "the right token" : "the merged token");
        }
        int32_t rank = e->num_merges++;
        e->merge_left[rank] = ida;
        e->merge_right[rank] = idb;
        e->merge_result[rank] = idab;
        pair_insert(e, ida, idb, rank);
    }
    if (lineno == 0) die("'%s' is empty; expected a '#version' header and merges", path);
    free(text);
}

static void compile_pattern(TokenizerEncoder *e) {
    int err;
    PCRE2_SIZE erroff;
    e->re = pcre2_compile((PCRE2_SPTR)GPT2_PATTERN, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &erroff, NULL);
    if (e->re == NULL) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof(msg));
        die("cannot compile GPT-2's pre-tokenization pattern at offset %zu: %s (PCRE2 %d.%d needs Unicode "
            "support and \\p{White_Space}, i.e. 10.40 or later)", (size_t)erroff, (char *)msg,
            PCRE2_MAJOR, PCRE2_MINOR);
    }
    // JIT is a large speedup but optional (some platforms lack it); the interpreter
    // gives identical matches.
    (void)pcre2_jit_compile(e->re, PCRE2_JIT_COMPLETE);
    e->md = pcre2_match_data_create_from_pattern(e->re, NULL);
    if (e->md == NULL) die("out of memory creating PCRE2 match data");
}

void tokenizer_load_bpe(Tokenizer *t, const char *encoder_json, const char *vocab_bpe) {
    int16_t cp_to_byte[512];
    byte_alphabet(cp_to_byte);
    load_encoder_json(t, encoder_json, cp_to_byte);
    set_source(t, encoder_json, vocab_bpe);

    VocabIndex vi;
    size_t cap = pow2_at_least(2 * (size_t)t->vocab_size);
    vi.slot = malloc_check(cap * sizeof(int32_t));
    vi.mask = cap - 1;
    for (size_t i = 0; i < cap; i++) vi.slot[i] = -1;
    for (int id = 0; id < t->vocab_size; id++) {
        const unsigned char *p = (const unsigned char *)t->token_bytes + t->token_off[id];
        size_t n = t->token_len[id];
        int32_t other = vocab_find(&vi, t, p, n);
        if (other >= 0) die("'%s': tokens %d and %d have the same bytes", encoder_json, other, id);
        size_t i = hash_bytes(p, n) & vi.mask;
        while (vi.slot[i] >= 0) i = (i + 1) & vi.mask;
        vi.slot[i] = id;
    }

    TokenizerEncoder *e = calloc_check(1, sizeof(TokenizerEncoder));
    t->enc = e;
    for (int b = 0; b < 256; b++) {
        unsigned char c = (unsigned char)b;
        e->byte_id[b] = vocab_find(&vi, t, &c, 1);
        if (e->byte_id[b] < 0) die("'%s' has no token for the single byte 0x%02X", encoder_json, b);
    }
    t->eot_token = vocab_find(&vi, t, (const unsigned char *)"<|endoftext|>", 13);
    if (t->eot_token < 0) die("'%s' has no <|endoftext|> token", encoder_json);

    load_merges(t, &vi, vocab_bpe, cp_to_byte);
    free(vi.slot);
    compile_pattern(e);
    e->cache = calloc_check(CACHE_SLOTS, sizeof(CacheSlot));
}

void tokenizer_load_bpe_dir(Tokenizer *t, const char *dir) {
    char a[4096], b[4096];
    if ((size_t)snprintf(a, sizeof(a), "%s/encoder.json", dir) >= sizeof(a) ||
        (size_t)snprintf(b, sizeof(b), "%s/vocab.bpe", dir) >= sizeof(b))
        die("vocabulary folder path too long: '%s'", dir);
    tokenizer_load_bpe(t, a, b);
}

// ---------------------------------------------------------------------------------
// llm.c tokenizer files

void tokenizer_load(Tokenizer *t, const char *path) {
    size_t n;
    unsigned char *buf = (unsigned char *)read_whole_file(path, &n);
    const size_t header_bytes = 256 * sizeof(int32_t);
    if (n < header_bytes)
        die("'%s' is truncated: %zu bytes, but the tokenizer header alone is %zu bytes", path, n, header_bytes);
    int32_t h[256];
    memcpy(h, buf, header_bytes);
    if (h[0] != TOKENIZER_MAGIC)
        die("'%s' has bad magic %d (expected %d): not an llm.c tokenizer file", path, h[0], TOKENIZER_MAGIC);
    if (h[1] != 1 && h[1] != 2) die("'%s' has unsupported version %d (expected 1 or 2)", path, h[1]);
    int vocab = h[2];
    if (vocab <= 0 || vocab > MAX_VOCAB) die("'%s' has bad vocab size %d (expected 1..%d)", path, vocab, MAX_VOCAB);
    int eot = h[1] == 1 ? GPT2_EOT_TOKEN : h[3]; // version 1 predates the EOT field
    if (eot < 0 || eot >= vocab)
        die("'%s' has EOT id %d outside the vocabulary of %d tokens%s", path, eot, vocab,
            h[1] == 1 ? " (version 1 files imply EOT = 50256)" : "");

    tokenizer_alloc(t, vocab, n - header_bytes + (size_t)vocab);
    t->eot_token = eot;
    set_source(t, path, NULL);
    size_t off = header_bytes, used = 0;
    for (int id = 0; id < vocab; id++) {
        if (off >= n)
            die("'%s' is truncated: it ends (%zu bytes) before token %d of %d", path, n, id, vocab);
        size_t len = buf[off++];
        if (len == 0) die("'%s': token %d has length 0 (byte offset %zu)", path, id, off - 1);
        if (off + len > n)
            die("'%s' is truncated: token %d (length %zu at byte offset %zu) runs past the end (%zu bytes)",
                path, id, len, off - 1, n);
        t->token_len[id] = (uint8_t)len;
        t->token_off[id] = (uint32_t)used;
        memcpy(t->token_bytes + used, buf + off, len);
        t->token_bytes[used + len] = '\0';
        used += len + 1;
        off += len;
    }
    if (off != n) die("'%s' has %zu unexpected bytes after its last token (%d)", path, n - off, vocab - 1);
    free(buf);
}

void tokenizer_save(const Tokenizer *t, const char *path) {
    size_t size = 256 * sizeof(int32_t);
    for (int id = 0; id < t->vocab_size; id++) size += 1 + t->token_len[id];
    unsigned char *buf = calloc_check(size, 1);
    int32_t h[256] = {0};
    h[0] = TOKENIZER_MAGIC;
    h[1] = TOKENIZER_VERSION;
    h[2] = t->vocab_size;
    h[3] = t->eot_token;
    memcpy(buf, h, sizeof(h));
    size_t off = sizeof(h);
    for (int id = 0; id < t->vocab_size; id++) {
        buf[off++] = t->token_len[id];
        memcpy(buf + off, t->token_bytes + t->token_off[id], t->token_len[id]);
        off += t->token_len[id];
    }
    AtomicFile af;
    atomic_file_open(&af, path);
    atomic_file_write(&af, buf, size);
    atomic_file_commit(&af);
    free(buf);
}

void tokenizer_free(Tokenizer *t) {
    free(t->token_len);
    free(t->token_off);
    free(t->token_bytes);
    TokenizerEncoder *e = t->enc;
    if (e) {
        free(e->pair_key);
        free(e->pair_rank);
        free(e->merge_left);
        free(e->merge_right);
        free(e->merge_result);
        pcre2_match_data_free(e->md);
        pcre2_code_free(e->re);
        free(e->cache);
        free(e->cache_keys);
        free(e->cache_vals);
        free(e->sym);
        free(e->next);
        free(e->prev);
        free(e->touched);
        free(e->heap);
        free(e);
    }
    memset(t, 0, sizeof(*t));
}

const char *tokenizer_decode(const Tokenizer *t, int id, size_t *len) {
    if (id < 0 || id >= t->vocab_size)
        die("token id %d is out of range for the tokenizer from '%s' (vocab size %d)", id, t->source, t->vocab_size);
    if (len) *len = t->token_len[id];
    return t->token_bytes + t->token_off[id];
}

int tokenizer_can_encode(const Tokenizer *t) { return t->enc != NULL; }

// ---------------------------------------------------------------------------------
// Piece cache

static int cache_get(TokenizerEncoder *e, const unsigned char *p, size_t n, uint64_t h, TokenBuf *out) {
    for (size_t i = h & (CACHE_SLOTS - 1);; i = (i + 1) & (CACHE_SLOTS - 1)) {
        const CacheSlot *s = &e->cache[i];
        if (s->key_len == 0) return 0;
        if (s->hash == h && s->key_len == n && memcmp(e->cache_keys + s->key_off, p, n) == 0) {
            for (size_t k = 0; k < s->val_len; k++) tokenbuf_push(out, e->cache_vals[s->val_off + k]);
            return 1;
        }
    }
}

static void cache_put(TokenizerEncoder *e, const unsigned char *p, size_t n, uint64_t h, const int32_t *ids, size_t m) {
    if (e->cache_entries >= CACHE_MAX_ENTRIES) {
        memset(e->cache, 0, CACHE_SLOTS * sizeof(CacheSlot));
        e->cache_entries = e->ck_len = e->cv_len = 0;
    }
    if (e->ck_len + n > e->ck_cap) {
        e->ck_cap = (e->ck_cap + n) * 2;
        e->cache_keys = realloc_check(e->cache_keys, e->ck_cap);
    }
    if (e->cv_len + m > e->cv_cap) {
        e->cv_cap = (e->cv_cap + m) * 2;
        e->cache_vals = realloc_check(e->cache_vals, e->cv_cap * sizeof(int32_t));
    }
    size_t i = h & (CACHE_SLOTS - 1);
    while (e->cache[i].key_len != 0) i = (i + 1) & (CACHE_SLOTS - 1);
    CacheSlot *s = &e->cache[i];
    s->hash = h;
    s->key_off = (uint32_t)e->ck_len;
    s->key_len = (uint16_t)n;
    s->val_off = (uint32_t)e->cv_len;
    s->val_len = (uint16_t)m;
    memcpy(e->cache_keys + e->ck_len, p, n);
    memcpy(e->cache_vals + e->cv_len, ids, m * sizeof(int32_t));
    e->ck_len += n;
    e->cv_len += m;
    e->cache_entries++;
}

// ---------------------------------------------------------------------------------
// BPE on one piece

// Min-heap of (rank << 32 | position): pops by rank, then left to right.
static void heap_push(uint64_t *h, size_t *n, uint64_t v) {
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n) {
    uint64_t top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= last) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = last;
    return top;
}

static void push_pair(TokenizerEncoder *e, size_t *hn, int32_t left_pos) {
    int32_t r = pair_lookup(e, e->sym[left_pos], e->sym[e->next[left_pos]]);
    if (r >= 0) heap_push(e->heap, hn, ((uint64_t)r << 32) | (uint32_t)left_pos);
}

// GPT-2's merge loop is: find the lowest-ranked adjacent pair, replace all of its
// non-overlapping occurrences left to right, repeat. Doing it one occurrence at a time
// can differ (a pair made by the first replacement may outrank the rest), so each
// round here pops every heap entry of the lowest rank before any new pair is pushed.
// Symbols live in a linked list over byte positions; a consumed position gets sym -1,
// which also invalidates stale heap entries. O(n log n) even for huge pieces.
static void bpe_piece(TokenizerEncoder *e, const unsigned char *p, size_t n, TokenBuf *out) {
    if (n == 1) { tokenbuf_push(out, e->byte_id[p[0]]); return; }
    if (n > (size_t)INT32_MAX / 4) die("a single pre-tokenized piece of %zu bytes is too long to encode", n);
    uint64_t h = 0;
    if (n <= CACHE_MAX_PIECE) {
        h = hash_bytes(p, n);
        if (cache_get(e, p, n, h, out)) return;
    }
    if (n > e->scratch_cap) {
        e->scratch_cap = n * 2;
        e->sym = realloc_check(e->sym, e->scratch_cap * sizeof(int32_t));
        e->next = realloc_check(e->next, e->scratch_cap * sizeof(int32_t));
        e->prev = realloc_check(e->prev, e->scratch_cap * sizeof(int32_t));
        e->touched = realloc_check(e->touched, e->scratch_cap * sizeof(int32_t));
        e->heap = realloc_check(e->heap, 3 * e->scratch_cap * sizeof(uint64_t)); // n-1 + 2 per merge
    }
    int32_t *sym = e->sym, *next = e->next, *prev = e->prev;
    const int32_t end = (int32_t)n;
    for (int32_t i = 0; i < end; i++) {
        sym[i] = e->byte_id[p[i]];
        next[i] = i + 1;
        prev[i] = i - 1;
    }
    size_t hn = 0;
    for (int32_t i = 0; i + 1 < end; i++) push_pair(e, &hn, i);
    while (hn > 0) {
        uint32_t rank = (uint32_t)(e->heap[0] >> 32);
        int32_t a = e->merge_left[rank], b = e->merge_right[rank], ab = e->merge_result[rank];
        size_t nt = 0;
        while (hn > 0 && (uint32_t)(e->heap[0] >> 32) == rank) {
            int32_t pos = (int32_t)(uint32_t)heap_pop(e->heap, &hn);
            int32_t nx = next[pos];
            if (sym[pos] != a || nx >= end || sym[nx] != b) continue; // stale or overlapped
            sym[pos] = ab;
            sym[nx] = -1;
            next[pos] = next[nx];
            if (next[nx] < end) prev[next[nx]] = pos;
            e->touched[nt++] = pos;
        }
        for (size_t k = 0; k < nt; k++) {
            int32_t pos = e->touched[k];
            if (prev[pos] >= 0) push_pair(e, &hn, prev[pos]);
            if (next[pos] < end) push_pair(e, &hn, pos);
        }
    }
    size_t start = out->n;
    for (int32_t i = 0; i < end; i = next[i]) tokenbuf_push(out, sym[i]);
    if (n <= CACHE_MAX_PIECE) cache_put(e, p, n, h, out->ids + start, out->n - start);
}

// ---------------------------------------------------------------------------------
// Pre-tokenization and encoding

// s[0, n) is valid UTF-8, so PCRE2's own check (O(n) per call) is skipped.
static void encode_valid(TokenizerEncoder *e, const unsigned char *s, size_t n, TokenBuf *out) {
    size_t off = 0;
    while (off < n) {
        int rc = pcre2_match(e->re, s, n, off, PCRE2_NO_UTF_CHECK, e->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) { bpe_piece(e, s + off, n - off, out); return; }
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof(msg));
            die("pre-tokenization failed at byte %zu of a %zu-byte text: %s", off, n, (char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
        size_t ms = ov[0], me = ov[1];
        // Every character matches some branch, so ms == off; keep any gap anyway.
        if (ms > off) bpe_piece(e, s + off, ms - off, out);
        if (me <= ms) die("internal error: empty pre-tokenization match at byte %zu", ms);
        bpe_piece(e, s + ms, me - ms, out);
        off = me;
    }
}

void tokenizer_encode_append(Tokenizer *t, const char *text, size_t len, TokenBuf *out) {
    if (t->enc == NULL)
        die("the tokenizer from '%s' cannot encode: an llm.c tokenizer file has no merges; "
            "load encoder.json + vocab.bpe to encode", t->source);
    TokenizerEncoder *e = t->enc;
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    uint32_t cp;
    while (i < len) {
        size_t j = i;
        while (j < len) {
            if (s[j] < 0x80) { j++; continue; }
            int k = utf8_next(s + j, len - j, &cp);
            if (k == 0) break;
            j += (size_t)k;
        }
        if (j > i) encode_valid(e, s + i, j - i, out);
        size_t k = j; // a maximal run of bytes that start no valid character
        while (k < len && s[k] >= 0x80 && utf8_next(s + k, len - k, &cp) == 0) k++;
        if (k > j) bpe_piece(e, s + j, k - j, out);
        i = k;
    }
}

void tokenizer_encode(Tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n) {
    TokenBuf b = {0};
    tokenizer_encode_append(t, text, len, &b);
    *ids = b.ids ? b.ids : malloc_check(sizeof(int32_t));
    *n = b.n;
}

// Cutting after a '\n' that has a visible ASCII character on each side is neutral:
// with the text cut or not, the '\n' is a piece of its own (its neighbours are not
// white space), every match before it is decided by reading at most up to it, and
// matches after it never look back. Between the two bytes of a "\r\n" with visible
// characters around it, too: whole, "\r" is a piece (\s+(?!\S) backs off from the
// \n before a visible character) and "\n" another, as they are cut. (After the "\r\n"
// is not: at the end of a text "\r\n" is one piece.)
static int visible(unsigned char c) { return c > 0x20 && c < 0x7F; }
size_t tokenizer_safe_split(const char *text, size_t len, size_t pos) {
    const unsigned char *s = (const unsigned char *)text;
    if (pos < 2) pos = 2;
    for (size_t q = pos; q < len; q++) {
        if (s[q - 1] == '\n' && visible(s[q - 2]) && visible(s[q])) return q;
        if (s[q - 1] == '\r' && s[q] == '\n' && q + 1 < len && visible(s[q - 2]) && visible(s[q + 1])) return q;
    }
    return len;
}
