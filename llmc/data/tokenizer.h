// tokenizer.h: GPT-2's byte-level BPE tokenizer.
//
// Two ways to load it:
//  - from OpenAI's encoder.json + vocab.bpe: can encode and decode;
//  - from an llm.c tokenizer file (.bin): can decode only, because that format
//    stores the token bytes but not the merges.
//
// llm.c tokenizer file: a header of 256 int32 (magic 20240328, version, vocab size,
// EOT id; version 1 has no EOT field and means EOT = 50256), then for every token in
// id order a uint8 length (1..255) followed by that many raw bytes.
//
// Encoding is exactly GPT-2's (Python `regex` pre-tokenization, then BPE merges by
// rank) for valid UTF-8. Invalid UTF-8 never stops or crashes encoding: each maximal
// run of bytes that are not valid UTF-8 (RFC 3629: no overlongs, surrogates or code
// points past U+10FFFF) is a piece of its own, encoded byte-level, and the valid text
// around it is pre-tokenized as if the run were the end/start of the text. So
// decode(encode(x)) == x for any bytes x.
#ifndef LLMC_TOKENIZER_H
#define LLMC_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TOKENIZER_MAGIC 20240328
#define TOKENIZER_VERSION 2
#define GPT2_EOT_TOKEN 50256
#define GPT2_VOCAB_SIZE 50257

typedef struct TokenizerEncoder TokenizerEncoder; // merges, regex, cache (tokenizer.c)

typedef struct {
    int vocab_size;
    int eot_token;
    uint8_t *token_len;     // [vocab_size] byte length of each token (1..255)
    uint32_t *token_off;    // [vocab_size] offset of each token in token_bytes
    char *token_bytes;      // every token's raw bytes, each followed by a '\0'
    char source[1024];      // the file(s) it came from, for error messages
    TokenizerEncoder *enc;  // NULL when loaded from a .bin (decode-only)
} Tokenizer;

// A growable array of token ids (the CLI appends document after document).
typedef struct {
    int32_t *ids;
    size_t n, cap;
} TokenBuf;

// Loads encoder.json (cJSON) and vocab.bpe (merge line i has rank i). Exits with a
// message naming the file and the bad entry on any inconsistency.
void tokenizer_load_bpe(Tokenizer *t, const char *encoder_json, const char *vocab_bpe);
// Same, from DIR/encoder.json and DIR/vocab.bpe.
void tokenizer_load_bpe_dir(Tokenizer *t, const char *dir);
// Loads an llm.c tokenizer file (decode-only). Bad magic or version, truncation, a
// zero-length token, trailing bytes or an EOT id out of range exit with a message.
void tokenizer_load(Tokenizer *t, const char *path);
// Writes an llm.c tokenizer file (version 2) atomically.
void tokenizer_save(const Tokenizer *t, const char *path);
void tokenizer_free(Tokenizer *t);

int tokenizer_can_encode(const Tokenizer *t);
// Appends the ids of text[0, len) to out. Exits if the tokenizer is decode-only.
// Not thread-safe: the tokenizer keeps scratch space and a piece cache.
void tokenizer_encode_append(Tokenizer *t, const char *text, size_t len, TokenBuf *out);
// Same, into a fresh malloc'd array (*ids, *n); the caller frees *ids.
void tokenizer_encode(Tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n);
// The raw bytes of token `id` (NUL-terminated for convenience; *len, if not NULL, gets
// the true length since a token may contain a 0 byte). Exits if id is out of range.
const char *tokenizer_decode(const Tokenizer *t, int id, size_t *len);

// A position q >= pos (or len) where the text can be cut without changing its
// encoding: encode(text[0,q)) followed by encode(text[q,len)) == encode(text).
// Lets callers encode huge documents in chunks (progress, bounded latency).
size_t tokenizer_safe_split(const char *text, size_t len, size_t pos);

void tokenbuf_push(TokenBuf *b, int32_t id);
void tokenbuf_free(TokenBuf *b);

#ifdef __cplusplus
}
#endif
#endif
