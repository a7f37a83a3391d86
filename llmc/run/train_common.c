// train_common.c: helpers shared by the trainer loops.
#include "train_common.h"

#include <glob.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ds_config.h"
#include "../utils.h"

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int file_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

int resolve_model_open(const char *model, GPT2Config *c, GPT2ModelFile *file) {
    char err[256];
    if (gpt2_config_from_descriptor(model, c, err, sizeof(err)) == 0) return 0;
    if (!file_exists(model)) die("-e '%s' is neither a model descriptor (%s) nor a readable model file", model, err);
    gpt2_model_file_open(file, model, c);
    return 1;
}

void print_model_file_read(const GPT2ModelFile *file, double bytes_all_ranks) {
    printf("model file '%s': rank 0 read %llu of its %llu parameter bytes, all ranks %.0f\n", file->path,
           (unsigned long long)file->bytes_read, (unsigned long long)gpt2_model_file_param_bytes(file),
           bytes_all_ranks);
}

float *resolve_model_params(const char *model, uint64_t seed, GPT2Config *c) {
    GPT2ModelFile file;
    if (resolve_model_open(model, c, &file)) {
        gpt2_model_file_close(&file);
        return gpt2_model_file_read(model, c);
    }
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    float *params = (float *)malloc_check(gpt2_param_sizes(c, sizes) * sizeof(float));
    gpt2_init_params(c, params, seed);
    return params;
}

void check_seq_len(const TrainConfig *cfg, const GPT2Config *c) {
    if (cfg->T > c->max_seq_len) die("-t %d exceeds the model's maximum sequence length %d", cfg->T, c->max_seq_len);
}

void check_tiles(const TrainConfig *cfg, const GPT2Config *c) {
    char err[256];
    if (gpt2_tile_check(c, cfg->tile_linear, err, sizeof(err)) != 0) die("--tile-linear %d: %s", cfg->tile_linear, err);
    if (gpt2_vocab_tile_check(c, cfg->tile_vocab, err, sizeof(err)) != 0) die("--tile-vocab %d: %s", cfg->tile_vocab, err);
}

int resolve_grad_accum(TrainConfig *cfg, int world) {
    if (ds_config_resolve_batch(cfg, world, stderr) != 0) exit(1);  // --deepspeed's batch keys, if any
    int64_t micro_tokens;   // one micro-batch on every rank
    if (cfg->B < 1 || cfg->T < 1 || world < 1 || __builtin_mul_overflow((int64_t)cfg->B, (int64_t)cfg->T, &micro_tokens) ||
        __builtin_mul_overflow(micro_tokens, (int64_t)world, &micro_tokens))
        die("B*T*ranks = %d*%d*%d is not a positive 64-bit number of tokens", cfg->B, cfg->T, world);
    if ((int64_t)cfg->B * cfg->T > INT_MAX)   // the models index a micro-batch's tokens with an int
        die("-b %d x -t %d = %lld tokens in one micro-batch: more than the %d the models index", cfg->B, cfg->T,
            (long long)cfg->B * cfg->T, INT_MAX);
    if (cfg->total_batch_tokens < 0) cfg->total_batch_tokens = micro_tokens;
    // the total as the user gave it: -d, or the DeepSpeed file's train_batch_size
    char total[160];
    if (cfg->from_file & TRAIN_FLAG_BIT(TRAIN_FLAG_TOTAL_BATCH))
        snprintf(total, sizeof total, "train_batch_size %lld (x T=%d = %lld tokens) in '%s'",
                 (long long)(cfg->total_batch_tokens / cfg->T), cfg->T, (long long)cfg->total_batch_tokens,
                 cfg->deepspeed ? cfg->deepspeed : "?");
    else
        snprintf(total, sizeof total, "-d %lld", (long long)cfg->total_batch_tokens);
    if (cfg->total_batch_tokens < micro_tokens)
        die("%s is less than one micro-batch on every rank, B*T*ranks = %d*%d*%d = %lld tokens (-d is the tokens of "
            "one optimizer step, all ranks together)", total, cfg->B, cfg->T, world, (long long)micro_tokens);
    if (cfg->total_batch_tokens % micro_tokens != 0)
        die("%s is not a multiple of B*T*ranks = %d*%d*%d = %lld", total, cfg->B, cfg->T, world,
            (long long)micro_tokens);
    int64_t accum = cfg->total_batch_tokens / micro_tokens;
    if (accum > TRAIN_MAX_GRAD_ACCUM)
        die("%s is %lld micro-batches of B*T*ranks = %d*%d*%d = %lld tokens per rank: at most %d gradient accumulation "
            "steps are allowed (fp32 sums of more micro-steps lose bf16's precision; see -h); raise -b or lower the "
            "total", total, (long long)accum, cfg->B, cfg->T, world, (long long)micro_tokens, TRAIN_MAX_GRAD_ACCUM);
    return (int)accum;
}

int open_data(TrainConfig *cfg, DataLoader *train, DataLoader *val, int rank, int world, int grad_accum,
              int vocab_size) {
    dataloader_init(train, cfg->train_pattern, cfg->B, cfg->T, vocab_size, rank, world, cfg->shuffle, cfg->seed);
    dataloader_set_accum(train, grad_accum);   // an optimizer step never straddles two epochs
    int have_val = cfg->val_every > 0;
    if (have_val) dataloader_init(val, cfg->val_pattern, cfg->B, cfg->T, vocab_size, rank, world, 0, cfg->seed);
    if (cfg->max_steps < 0) {   // -x -1: one epoch, within -x's own limit
        int64_t steps = train->total_windows / ((int64_t)cfg->B * world * grad_accum);
        if (steps > 1 << 30) die("-x -1: one epoch of the train data is %lld steps, more than -x's limit %d: give -x N",
                                 (long long)steps, 1 << 30);
        cfg->max_steps = (int)steps;
    }
    if (cfg->max_steps <= 0)
        die("-x -1: the train data holds less than one step of %lld tokens", (long long)cfg->total_batch_tokens);
    return have_val;
}

// The largest file a glob names, less the shard header: the tokens a loader holds at once.
static size_t largest_shard(const char *pattern) {
    glob_t g;
    size_t most = 0;
    if (glob(pattern, 0, NULL, &g) != 0) return 0;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        struct stat st;
        if (stat(g.gl_pathv[i], &st) == 0 && (size_t)st.st_size > most) most = (size_t)st.st_size;
    }
    globfree(&g);
    return most > 1024 ? most - 1024 : 0;
}

size_t train_data_bytes(const TrainConfig *cfg) {
    return largest_shard(cfg->train_pattern) + (cfg->val_every > 0 ? largest_shard(cfg->val_pattern) : 0);
}

// A "Key:   N kB" line of /proc/self/status, in bytes.
static size_t proc_status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL) return 0;
    char line[256];
    size_t len = strlen(key), kb = 0;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, len) == 0 && line[len] == ':') {
            kb = (size_t)strtoull(line + len + 1, NULL, 10);
            break;
        }
    fclose(f);
    return kb * 1024;
}

size_t host_memory_now(void) { return proc_status_kb("VmRSS"); }
size_t host_memory_peak(void) { return proc_status_kb("VmHWM"); }

int host_memory_reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f == NULL) return -1;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

void print_cost(const char *what, double t0) {
    printf("%s took %.2f s and at most %.1f MiB of host memory (peak resident)\n", what, now_seconds() - t0,
           host_memory_peak() / 1048576.0);
}

int load_sampling_tokenizer(Tokenizer *tok, TrainConfig *cfg, int vocab_size, int *eot) {
    *eot = GPT2_EOT;
    if (cfg->sample_every <= 0) return 0;
    int found = file_exists(cfg->tokenizer_path), fits = 0;
    if (found) {
        tokenizer_load(tok, cfg->tokenizer_path);
        fits = tok->vocab_size == vocab_size;
        if (fits) *eot = tok->eot_token;   // one of its tokens: the loader checks it
    }
    if (*eot >= vocab_size) {
        printf("note: sampling is off (-s): the model's %d tokens hold no <|endoftext|> (%d) to start a sample "
               "from\n", vocab_size, *eot);
        cfg->sample_every = 0;
    } else if (!found) {
        printf("note: tokenizer '%s' not found, samples print token ids\n", cfg->tokenizer_path);
    } else if (!fits) {
        printf("note: tokenizer '%s' has %d tokens and the model %d: samples print token ids\n", cfg->tokenizer_path,
               tok->vocab_size, vocab_size);
    }
    int have = found && fits && cfg->sample_every > 0;
    if (found && !have) tokenizer_free(tok);
    return have;
}

void print_token(const Tokenizer *tok, int id) {
    if (tok == NULL) {
        printf("%d ", id);
        return;
    }
    size_t len;
    const char *bytes = tokenizer_decode(tok, id, &len);
    fwrite(bytes, 1, len, stdout);
}
