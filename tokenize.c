// tokenize.c: text files -> llm.c token shards, with GPT-2's tokenizer. See usage().
#include <ctype.h>
#include <dirent.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "llmc/atomic_file.h"
#include "llmc/data/dataloader.h"
#include "llmc/data/tokenizer.h"
#include "llmc/run/logger.h"   // make_dirs
#include "llmc/utils.h"

#define DEFAULT_SHARD_SIZE 100000000LL
#define CHUNK_BYTES (1 << 20) // documents are encoded in ~1 MB chunks, for progress

static void usage(FILE *f) {
    fprintf(f,
        "usage: tokenize [options] [FILE...]\n"
        "Tokenizes text with GPT-2's BPE tokenizer into llm.c token shards (header of 256\n"
        "int32: magic %d, version %d, token count; then uint16 tokens). Reads standard\n"
        "input when no FILE is given (or for FILE '-'). Every document is preceded by the\n"
        "<|endoftext|> token (%d), as in llm.c. Text is taken as UTF-8; bytes that are not\n"
        "valid UTF-8 are kept and encoded byte-level.\n"
        "\n"
        "  -o PREFIX              write shards PREFIX_000000.bin, PREFIX_000001.bin, ... (the\n"
        "                         folder of PREFIX is created when it does not exist); each is\n"
        "                         written as NAME.partial and takes its name once the whole input\n"
        "                         is tokenized (a run that fails removes them)\n"
        "  --shard-size N         tokens per shard (default %lld); a document may continue\n"
        "                         into the next shard\n"
        "  --val-first            the first shard is validation data: PREFIX_val_000000.bin,\n"
        "                         then PREFIX_train_000001.bin, PREFIX_train_000002.bin, ...\n"
        "                         (a warning when the train shards hold fewer tokens than it)\n"
        "  --val-tokens N         like --val-first, but the val shard holds whole documents:\n"
        "                         it ends with the first document that brings it to >= N\n"
        "                         tokens, whatever --shard-size says\n"
        "  --jsonl                each input line is a JSON object whose \"text\" string is one\n"
        "                         document (blank lines are skipped; a bad line is an error)\n"
        "  --doc-per-file         each input file is one document (the default without --jsonl)\n"
        "  --print                print each document's ids (space-separated, one line per\n"
        "                         document, no <|endoftext|>) instead of writing shards\n"
        "  --write-tokenizer PATH write the llm.c tokenizer file (for decoding samples); with no\n"
        "                         FILE, -o or --print, nothing is tokenized\n"
        "  --overwrite            remove the shards of PREFIX an earlier run left first; without\n"
        "                         it their presence is an error (a trainer's PREFIX_*.bin would mix\n"
        "                         them with this run's). Nothing is removed while a name may be\n"
        "                         another dataset's (PREFIX_val_000001.bin is -o PREFIX_val's)\n"
        "  --vocab DIR            folder with encoder.json and vocab.bpe (default: data/gpt2 next\n"
        "                         to this executable, else ./data/gpt2); -o takes at most 65536\n"
        "                         tokens (the shards' ids are uint16)\n"
        "  -h, --help             this help\n"
        "\n"
        "Progress (tokens/s) goes to standard error on inputs that take more than a few seconds.\n"
        "examples:\n"
        "  tokenize -o data/tiny/tiny --val-first --shard-size 1000000 tiny.txt\n"
        "  tokenize --jsonl -o data/web/web --val-tokens 10000000 part1.jsonl part2.jsonl\n"
        "  echo 'Hello world' | tokenize --print\n",
        SHARD_MAGIC, SHARD_VERSION, GPT2_EOT_TOKEN, DEFAULT_SHARD_SIZE);
}

static long long parse_count(const char *opt, const char *s, long long max) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < 1 || v > max)
        die("%s: bad value '%s' (expected an integer in [1, %lld])", opt, s, max);
    return v;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// ---------------------------------------------------------------------------------
// Output: shards (or printed ids), plus progress

typedef struct {
    const char *prefix;     // NULL: --print
    long long shard_size;
    int val_first;
    long long val_tokens;   // 0: not used
    int shard_index;
    long long val_written, train_written;   // tokens written to the val shard and the train shards
    TokenBuf buf;           // the shard being filled
    // statistics
    long long docs, tokens, bytes;
    double t0, last_report;
} Sink;

static void progress(Sink *s, int final) {
    double t = now_s();
    if (!final && t - s->last_report < 2.0) return;
    if (!final && t - s->t0 < 2.0) return; // short runs stay quiet
    s->last_report = t;
    double dt = t - s->t0 > 1e-9 ? t - s->t0 : 1e-9;
    fprintf(stderr, "tokenize: %.1f MB of text, %lld tokens, %lld documents done, %.0f tokens/s (%.1f MB/s)%s\n",
            (double)s->bytes / 1e6, s->tokens, s->docs, (double)s->tokens / dt, (double)s->bytes / 1e6 / dt,
            final ? ", finished" : "");
}

// Shards are written as NAME.partial, and take their names only once the whole input is
// tokenized: a run that fails part way (a bad line, a full disk) leaves no shard that a
// trainer's -i glob would take for the whole dataset. A failed run removes its staged shards
// as it exits; a killed one leaves them, and the next run into PREFIX counts them as its own.
#define STAGED ".partial"

// Shard i's final name, and with staged its name until the run ends.
static void shard_name(const Sink *s, int i, int staged, char *path, size_t size) {
    int val = s->val_first || s->val_tokens > 0;
    const char *kind = !val ? "" : i == 0 ? "val_" : "train_";
    if ((size_t)snprintf(path, size, "%s_%s%06d.bin%s", s->prefix, kind, i, staged ? STAGED : "") >= size)
        die("output prefix too long: '%s'", s->prefix);
}

static const Sink *staged_run;   // the run whose shards are staged, until they all take their names
static int in_place;             // of those, how many took theirs (a rename that failed stops part way)

static void remove_staged(void) {
    if (!staged_run) return;
    char path[4096];
    int n = 0;
    for (int i = 0; i <= staged_run->shard_index; i++) {   // with the one being written when it failed
        shard_name(staged_run, i, i >= in_place, path, sizeof path);
        n += unlink(path) == 0;
        if (i == in_place) {   // renamed, its folder's sync then failed: it may have its name
            shard_name(staged_run, i, 0, path, sizeof path);
            n += unlink(path) == 0;
        }
    }
    if (n) fprintf(stderr, "tokenize: removed the %d shard(s) this failed run had written (%s_*)\n", n,
                   staged_run->prefix);
}

static void flush_shard(Sink *s) {
    char path[4096];
    shard_name(s, s->shard_index, 1, path, sizeof path);
    if (!staged_run) {
        staged_run = s;
        atexit(remove_staged);
    }
    shard_write(path, s->buf.ids, (int64_t)s->buf.n);
    if ((s->val_first || s->val_tokens > 0) && s->shard_index == 0) s->val_written = (long long)s->buf.n;
    else s->train_written += (long long)s->buf.n;
    fprintf(stderr, "tokenize: wrote %s (%zu tokens)\n", path, s->buf.n);
    s->shard_index++;
    s->buf.n = 0;
}

// The whole input is in: every staged shard takes its name.
static void shards_in_place(Sink *s) {
    char from[4096], to[4096];
    for (int i = 0; i < s->shard_index; i++) {
        shard_name(s, i, 1, from, sizeof from);
        shard_name(s, i, 0, to, sizeof to);
        atomic_file_rename(from, to);   // exits on failure: remove_staged removes those in place too
        in_place = i + 1;
    }
    staged_run = NULL;
    shard_name(s, 0, 0, from, sizeof from);
    shard_name(s, s->shard_index - 1, 0, to, sizeof to);
    fprintf(stderr, "tokenize: %d shard(s) in place: %s%s%s\n", s->shard_index, from, s->shard_index > 1 ? " to " : "",
            s->shard_index > 1 ? to : "");
}

static int in_val_shard(const Sink *s) { return s->val_tokens > 0 && s->shard_index == 0; }

static void sink_add(Sink *s, const int32_t *ids, size_t n) {
    s->tokens += (long long)n;
    for (size_t i = 0; i < n; i++) {
        if (in_val_shard(s)) {
            // whole documents: the shard is closed in sink_doc_end, not here
            if (s->buf.n >= (size_t)INT32_MAX)
                die("--val-tokens %lld: the val shard reached %d tokens, the shard format's limit, before "
                    "its last document ended", s->val_tokens, INT32_MAX);
        } else if (s->buf.n == (size_t)s->shard_size) {
            flush_shard(s);
        }
        tokenbuf_push(&s->buf, ids[i]);
    }
}

static void sink_doc_end(Sink *s) {
    s->docs++;
    if (in_val_shard(s) && s->buf.n >= (size_t)s->val_tokens) flush_shard(s);
}

// Encodes one document: into the shards (after an EOT) or printed on one line.
static void do_document(Tokenizer *tok, Sink *s, const char *text, size_t len) {
    TokenBuf ids = {0};
    if (s->prefix) {
        int32_t eot = tok->eot_token;
        sink_add(s, &eot, 1);
    }
    size_t pos = 0;
    while (pos < len) {
        size_t cut = len - pos > CHUNK_BYTES ? tokenizer_safe_split(text, len, pos + CHUNK_BYTES) : len;
        ids.n = 0;
        tokenizer_encode_append(tok, text + pos, cut - pos, &ids);
        s->bytes += (long long)(cut - pos);
        if (s->prefix) {
            sink_add(s, ids.ids, ids.n);
        } else {
            for (size_t i = 0; i < ids.n; i++) printf(pos == 0 && i == 0 ? "%d" : " %d", ids.ids[i]);
            s->tokens += (long long)ids.n;
        }
        pos = cut;
        progress(s, 0);
    }
    if (!s->prefix) putchar('\n');
    sink_doc_end(s);
    tokenbuf_free(&ids);
}

// ---------------------------------------------------------------------------------
// Input

static FILE *open_input(const char *path) { return strcmp(path, "-") == 0 ? stdin : fopen_check(path, "rb"); }

static const char *input_name(const char *path) { return strcmp(path, "-") == 0 ? "<stdin>" : path; }

static char *read_all(const char *path, size_t *n) {
    FILE *f = open_input(path);
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc_check(cap);
    for (;;) {
        if (len == cap) {
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (nb == NULL) die("out of memory reading '%s' (%zu bytes so far)", input_name(path), len);
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    if (ferror(f)) die("read error on '%s': %s", input_name(path), strerror(errno));
    if (f != stdin) fclose(f);
    *n = len;
    return buf;
}

// cJSON strings are NUL-terminated, so a \u0000 escape would cut the text. Turns every such
// escape in line into \u000D (D a digit: one character, not a NUL); returns how many.
static int nul_escapes_to(char *line, size_t len, char digit) {
    int n = 0;
    for (char *p = line; (p = memmem(p, len - (size_t)(p - line), "u0000", 5)) != NULL; p += 5) {
        const char *q = p;
        while (q > line && q[-1] == '\\') q--;
        if ((p - q) % 2 == 1) { // an odd run of backslashes escapes the 'u'
            p[4] = digit;
            n++;
        }
    }
    return n;
}

// The "text" of line parsed with its \u0000 escapes as \u000D (malloc'd, *n bytes), or NULL.
static char *text_with(const char *line, size_t len, char digit, size_t *n) {
    char *copy = malloc_check(len + 1), *out = NULL;
    memcpy(copy, line, len);
    copy[len] = '\0';
    nul_escapes_to(copy, len, digit);
    cJSON *obj = cJSON_ParseWithLength(copy, len);
    const cJSON *text = obj ? cJSON_GetObjectItemCaseSensitive(obj, "text") : NULL;
    if (cJSON_IsString(text) && text->valuestring) {
        *n = strlen(text->valuestring);
        out = malloc_check(*n + 1);
        memcpy(out, text->valuestring, *n + 1);
    }
    cJSON_Delete(obj);
    free(copy);
    return out;
}

// The document's "text" whole, with the NUL characters its \u0000 escapes stand for (as
// Python's json reads them, and tiktoken encodes them): parsed once with those escapes as
// U+0001 and once as U+0002, the two texts differ exactly where a NUL stood. NULL when the
// line holds no \u0000 escape (cJSON's text is whole); else malloc'd, *n bytes.
static char *text_with_nuls(const char *line, size_t len, size_t *n) {
    if (!memmem(line, len, "u0000", 5)) return NULL;
    size_t n1 = 0, n2 = 0;
    char *t1 = text_with(line, len, '1', &n1), *t2 = text_with(line, len, '2', &n2);
    if (!t1 || !t2 || n1 != n2) die("internal: the text parsed twice gives %zu and %zu bytes", n1, n2);
    for (size_t i = 0; i < n1; i++)
        if (t1[i] != t2[i]) t1[i] = '\0';
    free(t2);
    *n = n1;
    return t1;
}

// The value of the four hex digits at s (the caller checked them).
static unsigned hex4(const char *s) {
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        int c = tolower((unsigned char)s[k]);
        v = v * 16 + (unsigned)(isdigit(c) ? c - '0' : c - 'a' + 10);
    }
    return v;
}

// What cJSON would cut a string at, or refuse with no useful place: a raw NUL byte, a \u not
// followed by four hex digits (cJSON decodes it as U+0000, Python's json refuses it), a
// UTF-16 surrogate not in a high-low pair (no character, so no UTF-8: cJSON refuses the line,
// and Python's json takes it but cannot encode the text). Returns the 1-based column of the
// first, or 0, with *why saying which.
static long bad_json_escape(const char *line, size_t len, const char **why) {
    const char *z = memchr(line, '\0', len);
    if (z) { *why = "a NUL byte"; return (long)(z - line) + 1; }
    for (size_t i = 0; i + 1 < len; i++) {
        if (line[i] != '\\') continue;
        if (line[i + 1] == 'u') {
            for (size_t k = 2; k < 6; k++)
                if (i + k >= len || !isxdigit((unsigned char)line[i + k])) {
                    *why = "a \\u escape needs four hex digits";
                    return (long)i + 1;
                }
            unsigned v = hex4(line + i + 2);
            if (v >= 0xDC00 && v <= 0xDFFF) { *why = "a UTF-16 low surrogate with no high one before it"; return (long)i + 1; }
            if (v >= 0xD800 && v <= 0xDBFF) {
                size_t j = i + 6;   // a low surrogate's escape must follow at once
                int pair = j + 5 < len && line[j] == '\\' && line[j + 1] == 'u';
                for (size_t k = 2; pair && k < 6; k++) pair = isxdigit((unsigned char)line[j + k]) != 0;
                if (!pair || hex4(line + j + 2) < 0xDC00 || hex4(line + j + 2) > 0xDFFF) {
                    *why = "a UTF-16 high surrogate with no low one after it";
                    return (long)i + 1;
                }
                i = j;   // the pair's low half is checked: go on after it
            }
        }
        i++;   // the escaped character: "\\u" is a backslash, then a plain u
    }
    return 0;
}

static void do_jsonl(Tokenizer *tok, Sink *s, const char *path) {
    FILE *f = open_input(path);
    const char *name = input_name(path);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        size_t k = 0;
        while (k < (size_t)len && (line[k] == ' ' || line[k] == '\t' || line[k] == '\r' || line[k] == '\n')) k++;
        if (k == (size_t)len) continue;
        const char *why = NULL;
        long bad = bad_json_escape(line, (size_t)len, &why);
        if (bad) die("%s:%ld: not valid JSON (column %ld: %s)", name, lineno, bad, why);
        const char *end = NULL;
        cJSON *obj = cJSON_ParseWithLengthOpts(line, (size_t)len, &end, 0);
        if (obj == NULL) {
            const char *at = cJSON_GetErrorPtr();
            long col = (at && at >= line && at <= line + len) ? (long)(at - line) + 1 : 0;
            die("%s:%ld: not valid JSON (error near column %ld)", name, lineno, col);
        }
        while (end && end < line + len && (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')) end++;
        if (end && end < line + len) die("%s:%ld: unexpected text after the JSON object", name, lineno);
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(obj, "text");
        if (!cJSON_IsObject(obj) || !cJSON_IsString(text) || text->valuestring == NULL)
            die("%s:%ld: expected a JSON object with a \"text\" string field", name, lineno);
        size_t n = 0;
        char *whole = text_with_nuls(line, (size_t)len, &n);
        if (whole) do_document(tok, s, whole, n);
        else do_document(tok, s, text->valuestring, strlen(text->valuestring));
        free(whole);
        cJSON_Delete(obj);
    }
    if (ferror(f)) die("read error on '%s': %s", name, strerror(errno));
    free(line);
    if (f != stdin) fclose(f);
}

// data/gpt2 next to the executable, else ./data/gpt2.
static void default_vocab_dir(char *out, size_t size) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        char probe[4096 + 64];
        snprintf(probe, sizeof(probe), "%s/data/gpt2/encoder.json", exe);
        if (access(probe, R_OK) == 0 && (size_t)snprintf(out, size, "%s/data/gpt2", exe) < size) return;
    }
    if (access("data/gpt2/encoder.json", R_OK) != 0)
        die("cannot find the GPT-2 vocabulary: no data/gpt2/encoder.json next to the executable (%s) or in "
            "the current folder; pass --vocab DIR", n > 0 ? exe : "unknown");
    snprintf(out, size, "data/gpt2");
}

// The index of a shard name of -o BASE (BASE the prefix's last part): BASE_NNNNNN.bin,
// BASE_val_NNNNNN.bin or BASE_train_NNNNNN.bin (six digits or more; *kind "", "val_" or
// "train_"), or one staged (.partial); -1 for any other name.
static long shard_index_of(const char *name, const char *base, const char **kind) {
    size_t b = strlen(base);
    if (strncmp(name, base, b) != 0 || name[b] != '_') return -1;
    const char *p = name + b + 1;
    *kind = strncmp(p, "val_", 4) == 0 ? "val_" : strncmp(p, "train_", 6) == 0 ? "train_" : "";
    p += strlen(*kind);
    size_t digits = strspn(p, "0123456789");
    if (digits < 6 || (strcmp(p + digits, ".bin") != 0 && strcmp(p + digits, ".bin" STAGED) != 0)) return -1;
    return strtol(p, NULL, 10);
}

// The shards of prefix already there: an error naming the first and how many, or with
// overwrite removed (and said). The names of -o BASE_val and -o BASE_train (other datasets)
// can look like BASE's val and train shards: BASE writes only val shard 0 and train shards
// from 1, so a val shard past 0 or a train shard 0 is another dataset's, and a val shard 0
// with no train shard may be (unless this run writes that name itself: val). --overwrite
// removes nothing while any name is in doubt.
static void clear_old_shards(const char *prefix, int overwrite, int val) {
    const char *slash = strrchr(prefix, '/');
    char dir[4096];
    if (!slash) snprintf(dir, sizeof(dir), ".");
    else if (slash == prefix) snprintf(dir, sizeof(dir), "/");
    else snprintf(dir, sizeof(dir), "%.*s", (int)(slash - prefix), prefix);
    const char *base = slash ? slash + 1 : prefix;
    DIR *d = opendir(dir);
    if (!d) die("cannot list the output folder '%s': %s", dir, strerror(errno));
    int n = 0, trains = 0;
    char first[4096 + 256] = "", other[4096 + 256] = "", val0[4096 + 256] = "";
    const char *other_kind = "";
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const char *kind;
        long i = shard_index_of(e->d_name, base, &kind);
        if (i < 0) continue;
        char path[4096 + 256];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (!n) snprintf(first, sizeof(first), "%s", path);
        n++;
        trains += strcmp(kind, "train_") == 0;
        if (!strcmp(kind, "val_") && i == 0) snprintf(val0, sizeof val0, "%s", path);
        if (!other[0] && ((!strcmp(kind, "val_") && i > 0) || (!strcmp(kind, "train_") && i == 0))) {
            snprintf(other, sizeof other, "%s", path);
            other_kind = kind;
        }
    }
    if (!other[0] && val0[0] && !trains && !val) {
        snprintf(other, sizeof other, "%s", val0);
        other_kind = "val_";
    }
    char other_prefix[4096 + 16] = "";   // the other dataset's -o
    if (other[0]) snprintf(other_prefix, sizeof other_prefix, "%s_%.*s", prefix, (int)strlen(other_kind) - 1, other_kind);
    if (n && !overwrite)
        die("%d shard(s) of -o %s are there already (%s%s): a trainer's -i %s_*.bin would take them with this run's; "
            "remove them, give another -o, or --overwrite%s%s%s%s%s", n, prefix, n > 1 ? "e.g. " : "", first, prefix,
            other[0] ? " (" : "", other, other[0] ? " may be a shard of another dataset: -o " : "",
            other[0] ? other_prefix : "", other[0] ? ")" : "");
    if (n && other[0])
        die("--overwrite: %s may be a shard of another dataset (-o %s), not of -o %s; nothing removed: remove the "
            "shards of -o %s yourself, or give another -o", other, other_prefix, prefix, prefix);
    rewinddir(d);
    for (struct dirent *e; n && (e = readdir(d)) != NULL;) {
        const char *kind;
        if (shard_index_of(e->d_name, base, &kind) < 0) continue;
        char path[4096 + 256];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (unlink(path) != 0) die("--overwrite: cannot remove '%s': %s", path, strerror(errno));
    }
    closedir(d);
    if (n) fprintf(stderr, "tokenize: --overwrite: removed %d shard(s) of %s an earlier run wrote\n", n, prefix);
}

int main(int argc, char **argv) {
    enum { OPT_SHARD_SIZE = 1000, OPT_VAL_FIRST, OPT_VAL_TOKENS, OPT_JSONL, OPT_DOC_PER_FILE, OPT_PRINT,
           OPT_WRITE_TOKENIZER, OPT_VOCAB, OPT_OVERWRITE };
    static const struct option opts[] = {
        {"shard-size", required_argument, 0, OPT_SHARD_SIZE},
        {"val-first", no_argument, 0, OPT_VAL_FIRST},
        {"val-tokens", required_argument, 0, OPT_VAL_TOKENS},
        {"jsonl", no_argument, 0, OPT_JSONL},
        {"doc-per-file", no_argument, 0, OPT_DOC_PER_FILE},
        {"print", no_argument, 0, OPT_PRINT},
        {"write-tokenizer", required_argument, 0, OPT_WRITE_TOKENIZER},
        {"vocab", required_argument, 0, OPT_VOCAB},
        {"overwrite", no_argument, 0, OPT_OVERWRITE},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *prefix = NULL, *write_tok = NULL, *vocab = NULL;
    long long shard_size = DEFAULT_SHARD_SIZE, val_tokens = 0;
    int val_first = 0, jsonl = 0, doc_per_file = 0, print = 0, overwrite = 0, c;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': prefix = optarg; break;
        case OPT_SHARD_SIZE: shard_size = parse_count("--shard-size", optarg, INT32_MAX); break;
        case OPT_VAL_FIRST: val_first = 1; break;
        case OPT_VAL_TOKENS: val_tokens = parse_count("--val-tokens", optarg, INT32_MAX); break;
        case OPT_JSONL: jsonl = 1; break;
        case OPT_DOC_PER_FILE: doc_per_file = 1; break;
        case OPT_PRINT: print = 1; break;
        case OPT_WRITE_TOKENIZER: write_tok = optarg; break;
        case OPT_VOCAB: vocab = optarg; break;
        case OPT_OVERWRITE: overwrite = 1; break;
        case 'h': usage(stdout); return 0;
        default: fprintf(stderr, "run 'tokenize --help' for usage\n"); return 2;
        }
    }
    if (jsonl && doc_per_file) die("--jsonl and --doc-per-file contradict each other (documents are lines or files)");
    if (val_first && val_tokens > 0) die("give --val-first or --val-tokens, not both");
    if (print && prefix) die("give -o PREFIX (write shards) or --print, not both");
    if (print && (val_first || val_tokens > 0)) die("--val-first/--val-tokens apply to shards, not to --print");
    if (overwrite && !prefix) die("--overwrite applies to the shards of -o PREFIX");
    int nfiles = argc - optind;
    int tokenizing = nfiles > 0 || prefix || print || !write_tok;
    if (tokenizing && !prefix && !print) die("no output: give -o PREFIX to write shards, or --print (see --help)");

    char vocab_dir[4096];
    if (vocab) snprintf(vocab_dir, sizeof(vocab_dir), "%s", vocab);
    else default_vocab_dir(vocab_dir, sizeof(vocab_dir));
    Tokenizer tok;
    tokenizer_load_bpe_dir(&tok, vocab_dir);
    if (prefix && !print && tok.vocab_size > 65536)
        die("--vocab %s holds %d tokens, and token shards store ids as uint16 (llm.c's format): at most 65536 tokens "
            "(--print takes any)", vocab_dir, tok.vocab_size);
    // The shards' folder, as the trainers create -o: before anything is tokenized.
    const char *slash = prefix && !print ? strrchr(prefix, '/') : NULL;
    if (slash && slash > prefix) {
        char dir[4096];
        if ((size_t)(slash - prefix) >= sizeof(dir)) die("output prefix too long: '%s'", prefix);
        memcpy(dir, prefix, (size_t)(slash - prefix));
        dir[slash - prefix] = '\0';
        make_dirs(dir);
    }
    if (prefix && !print) clear_old_shards(prefix, overwrite, val_first || val_tokens > 0);

    if (write_tok) {
        tokenizer_save(&tok, write_tok);
        fprintf(stderr, "tokenize: wrote %s (%d tokens, EOT %d)\n", write_tok, tok.vocab_size, tok.eot_token);
    }
    if (!tokenizing) { tokenizer_free(&tok); return 0; }

    Sink s = {0};
    s.prefix = print ? NULL : prefix;
    s.shard_size = shard_size;
    s.val_first = val_first;
    s.val_tokens = val_tokens;
    s.t0 = s.last_report = now_s();
    static const char *stdin_only[] = {"-"};
    const char **files = nfiles > 0 ? (const char **)argv + optind : stdin_only;
    int count = nfiles > 0 ? nfiles : 1;
    for (int i = 0; i < count; i++) {
        if (jsonl) {
            do_jsonl(&tok, &s, files[i]);
        } else {
            size_t n;
            char *text = read_all(files[i], &n);
            do_document(&tok, &s, text, n);
            free(text);
        }
    }
    if (print) {
        if (fflush(stdout) != 0 || ferror(stdout)) die("error writing ids to standard output: %s", strerror(errno));
    } else {
        if (s.docs == 0) die("no documents in the input (nothing written)");
        int all_val = in_val_shard(&s);
        if (all_val)
            fprintf(stderr, "tokenize: warning: all %lld tokens went to the val shard (--val-tokens %lld); "
                    "no train shard written\n", s.tokens, val_tokens);
        if (s.buf.n > 0) flush_shard(&s);
        shards_in_place(&s);
        if (!all_val && (val_first || val_tokens > 0) && s.train_written < s.val_written)
            fprintf(stderr, "tokenize: warning: the train split (%lld tokens in %d shard(s)) is smaller than the val "
                    "split (%lld tokens): %s\n", s.train_written, s.shard_index - 1, s.val_written,
                    val_first ? "--val-first gives val the first --shard-size tokens; give a smaller --shard-size, "
                                "or --val-tokens N"
                              : "give a smaller --val-tokens");
        progress(&s, 1);
    }
    tokenbuf_free(&s.buf);
    tokenizer_free(&tok);
    return 0;
}
