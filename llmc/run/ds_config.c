// ds_config.c: DeepSpeed's ds_config.json into TrainConfig. One table lists every key
// this trainer knows: what it sets, the flag that sets the same thing, its range, or, for
// a feature of a later issue, the values that mean "off". Wiring such a feature is
// turning its entry into a value entry.
#include "ds_config.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

typedef enum {
    DS_SECTION,  // an object whose keys are in the table
    DS_PAIR,     // an array of exactly two numbers, whose elements are "key[0]" and "key[1]"
    DS_INT,      // an integral number into an int or long field
    DS_SEQS,     // an integral number of sequences, stored as tokens (x T): train_batch_size
    DS_FLOAT,    // a number into a float field
    DS_ADAM,     // optimizer.type: DeepSpeed's Adam and AdamW both run as AdamW here
    DS_OFFLOAD,  // an offload device: "none", "cpu" or "nvme" into an int field (TRAIN_OFFLOAD_*)
    DS_PATH,     // a string (or null: unset) into a const char * field
    DS_BOOL,     // true or false into an int field (1 or 0)
    DS_LATER,    // a feature not built yet: only its "off" values are accepted
    DS_IDLE,     // a detail of such a feature: any value of its JSON type, without effect yet
} DsKind;

typedef enum { F_INT, F_LONG, F_FLOAT, F_STRING } FieldType;

typedef struct {
    const char *key;        // path in the file: '.' between objects, [i] for array elements
    DsKind kind;
    double lo, hi;          // accepted range: the same as the flag's
    int hi_open;            // hi itself is refused (AdamW's betas)
    TrainFlag flag;         // the setting (for c->given / c->from_file)
    const char *flag_name;  // the command-line flag for the same setting, or NULL
    size_t field;           // offsetof(TrainConfig, ...)
    FieldType type;
    const char *off[2];     // DS_LATER: the accepted values as JSON text
    int json_types;         // DS_IDLE: the cJSON type bits it accepts
    const char *type_name;  // DS_IDLE: those in words
    const char *why_idle;   // DS_IDLE: why it has no effect (for -h)
} DsKey;

#define INT_FIELD(f) .field = offsetof(TrainConfig, f), .type = F_INT
#define LONG_FIELD(f) .field = offsetof(TrainConfig, f), .type = F_LONG
#define FLOAT_FIELD(f) .field = offsetof(TrainConfig, f), .type = F_FLOAT
#define STRING_FIELD(f) .field = offsetof(TrainConfig, f), .type = F_STRING
#define ELEMS (double)(1L << 40)   // the --zero-* flags' limit
// pin_memory: offload's host memory is always pinned (CUDA) here
#define IDLE_BOOL .kind = DS_IDLE, .json_types = cJSON_True | cJSON_False, .type_name = "true or false", \
                  .why_idle = "always pinned"

static const DsKey KEYS[] = {
    {.key = "train_micro_batch_size_per_gpu", .kind = DS_INT, .lo = 1, .hi = 1 << 20, .flag = TRAIN_FLAG_B,
     .flag_name = "-b", INT_FIELD(B)},
    {.key = "gradient_accumulation_steps", .kind = DS_INT, .lo = 1, .hi = 1 << 30, .flag = TRAIN_FLAG_GRAD_ACCUM,
     INT_FIELD(grad_accum_steps)},
    {.key = "train_batch_size", .kind = DS_SEQS, .lo = 1, .hi = ELEMS, .flag = TRAIN_FLAG_TOTAL_BATCH,
     .flag_name = "-d", LONG_FIELD(total_batch_tokens)},
    {.key = "gradient_clipping", .kind = DS_FLOAT, .lo = -1, .hi = 1e9, .flag = TRAIN_FLAG_GRAD_CLIP,
     .flag_name = "--grad-clip", FLOAT_FIELD(grad_clip)},
    {.key = "optimizer", .kind = DS_SECTION},
    {.key = "optimizer.type", .kind = DS_ADAM},
    {.key = "optimizer.params", .kind = DS_SECTION},
    {.key = "optimizer.params.lr", .kind = DS_FLOAT, .lo = 0, .hi = 10, .flag = TRAIN_FLAG_LR, .flag_name = "-l",
     FLOAT_FIELD(lr)},
    {.key = "optimizer.params.betas", .kind = DS_PAIR},
    {.key = "optimizer.params.betas[0]", .kind = DS_FLOAT, .lo = 0, .hi = 1, .hi_open = 1, .flag = TRAIN_FLAG_BETA1,
     .flag_name = "--beta1", FLOAT_FIELD(beta1)},
    {.key = "optimizer.params.betas[1]", .kind = DS_FLOAT, .lo = 0, .hi = 1, .hi_open = 1, .flag = TRAIN_FLAG_BETA2,
     .flag_name = "--beta2", FLOAT_FIELD(beta2)},
    {.key = "optimizer.params.eps", .kind = DS_FLOAT, .lo = 1e-30, .hi = 1, .flag = TRAIN_FLAG_ADAM_EPS,
     .flag_name = "--adam-eps", FLOAT_FIELD(adam_eps)},
    {.key = "optimizer.params.weight_decay", .kind = DS_FLOAT, .lo = 0, .hi = 10, .flag = TRAIN_FLAG_WEIGHT_DECAY,
     .flag_name = "-c", FLOAT_FIELD(weight_decay)},
    // DeepSpeed's Adam with adam_w_mode false is Adam with L2 regularization
    {.key = "optimizer.params.adam_w_mode", .kind = DS_LATER, .off = {"true"}},
    {.key = "optimizer.params.bias_correction", .kind = DS_LATER, .off = {"true"}},
    {.key = "zero_optimization", .kind = DS_SECTION},
    {.key = "zero_optimization.stage", .kind = DS_INT, .lo = 0, .hi = 3, .flag = TRAIN_FLAG_ZERO_STAGE,
     .flag_name = "-z", INT_FIELD(zero_stage)},
    {.key = "zero_optimization.reduce_bucket_size", .kind = DS_INT, .lo = 0, .hi = ELEMS,
     .flag = TRAIN_FLAG_ZERO_BUCKET, .flag_name = "--zero-bucket", LONG_FIELD(zero_bucket)},
    {.key = "zero_optimization.stage3_prefetch_bucket_size", .kind = DS_INT, .lo = 0, .hi = ELEMS,
     .flag = TRAIN_FLAG_ZERO_PREFETCH, .flag_name = "--zero-prefetch", LONG_FIELD(zero_prefetch)},
    {.key = "zero_optimization.stage3_max_live_parameters", .kind = DS_INT, .lo = 0, .hi = ELEMS,
     .flag = TRAIN_FLAG_ZERO_MAX_LIVE, .flag_name = "--zero-max-live", LONG_FIELD(zero_max_live)},
    {.key = "zero_optimization.stage3_param_persistence_threshold", .kind = DS_INT, .lo = 0, .hi = ELEMS,
     .flag = TRAIN_FLAG_ZERO_PERSIST, .flag_name = "--zero-persist", LONG_FIELD(zero_persist)},
    // offload (ZeRO-Offload / ZeRO-Infinity); one swap folder serves both nvme_paths, so
    // the two must agree
    {.key = "zero_optimization.offload_optimizer", .kind = DS_SECTION},
    {.key = "zero_optimization.offload_optimizer.device", .kind = DS_OFFLOAD, .flag = TRAIN_FLAG_OFFLOAD_OPTIMIZER,
     .flag_name = "--offload-optimizer", INT_FIELD(offload_optimizer)},
    {.key = "zero_optimization.offload_optimizer.nvme_path", .kind = DS_PATH, .flag = TRAIN_FLAG_NVME_PATH,
     .flag_name = "--nvme-path", STRING_FIELD(nvme_path)},
    {.key = "zero_optimization.offload_optimizer.pin_memory", IDLE_BOOL},
    {.key = "zero_optimization.offload_param", .kind = DS_SECTION},
    {.key = "zero_optimization.offload_param.device", .kind = DS_OFFLOAD, .flag = TRAIN_FLAG_OFFLOAD_PARAM,
     .flag_name = "--offload-param", INT_FIELD(offload_param)},
    {.key = "zero_optimization.offload_param.nvme_path", .kind = DS_PATH, .flag = TRAIN_FLAG_NVME_PATH,
     .flag_name = "--nvme-path", STRING_FIELD(nvme_path)},
    {.key = "zero_optimization.offload_param.pin_memory", IDLE_BOOL},
    // activation checkpointing: where to checkpoint is the model's business in DeepSpeed;
    // here --act-checkpoint 1 turns it on and cpu_checkpointing moves the checkpoints to host
    {.key = "activation_checkpointing", .kind = DS_SECTION},
    {.key = "activation_checkpointing.cpu_checkpointing", .kind = DS_BOOL, .flag = TRAIN_FLAG_ACT_OFFLOAD,
     .flag_name = "--act-offload", INT_FIELD(act_offload)},
    {.key = "activation_checkpointing.partition_activations", .kind = DS_LATER, .off = {"false"}},
    // ZeRO++
    {.key = "zero_optimization.zero_quantized_weights", .kind = DS_BOOL, .flag = TRAIN_FLAG_QWZ, .flag_name = "--qwz",
     INT_FIELD(qwz)},
    {.key = "zero_optimization.zero_hpz_partition_size", .kind = DS_INT, .lo = 0, .hi = 1 << 20, .flag = TRAIN_FLAG_HPZ,
     .flag_name = "--hpz", INT_FIELD(hpz)},
    {.key = "zero_optimization.zero_quantized_gradients", .kind = DS_BOOL, .flag = TRAIN_FLAG_QGZ, .flag_name = "--qgz",
     INT_FIELD(qgz)},
};
#define NUM_KEYS (sizeof(KEYS) / sizeof(KEYS[0]))

static const DsKey *find_key(const char *key) {
    for (size_t i = 0; i < NUM_KEYS; i++)
        if (strcmp(KEYS[i].key, key) == 0) return &KEYS[i];
    return NULL;
}

// ----------------------------------------------------------------------------
// Reading the file

typedef struct {
    TrainConfig *c;
    const char *path;
    FILE *log;
    char unknown[2048];  // the keys it does not know, for one warning
    int num_unknown;
} Reader;

// The value as JSON text, for messages (at most 60 characters).
static const char *json_text(const cJSON *v, char *buf, size_t cap) {
    char *s = cJSON_PrintUnformatted(v);
    snprintf(buf, cap, "%.60s%s", s ? s : "?", s && strlen(s) > 60 ? "..." : "");
    free(s);
    return buf;
}

static int is_auto(const cJSON *v) { return cJSON_IsString(v) && strcmp(v->valuestring, "auto") == 0; }

static double field_get(const TrainConfig *c, const DsKey *k) {
    const char *p = (const char *)c + k->field;
    switch (k->type) {
    case F_INT: return *(const int *)p;
    case F_LONG: return (double)*(const long *)p;
    default: return *(const float *)p;
    }
}

static void field_set(TrainConfig *c, const DsKey *k, double v) {
    char *p = (char *)c + k->field;
    switch (k->type) {
    case F_INT: *(int *)p = (int)v; break;
    case F_LONG: *(long *)p = (long)v; break;
    default: *(float *)p = (float)v; break;
    }
}

// A number key: type, range, the flag's agreement, then the field.
static int apply_number(Reader *r, const DsKey *k, const cJSON *v) {
    char text[80];
    const char *what = k->kind == DS_FLOAT ? "a number" : "an integer";
    if (!cJSON_IsNumber(v)) {
        fprintf(r->log, "error: '%s': %s must be %s, got %s\n", r->path, k->key, what,
                json_text(v, text, sizeof(text)));
        return -1;
    }
    double x = v->valuedouble;
    if (k->kind == DS_FLOAT) x = (float)x;  // checked as the trainer will hold it (0.999999999 is 1.0f)
    int integral = k->kind == DS_FLOAT || x == floor(x);
    if (!integral || !(x >= k->lo && (k->hi_open ? x < k->hi : x <= k->hi))) {
        fprintf(r->log, "error: '%s': %s must be %s in [%g, %g%s, got %s\n", r->path, k->key, what, k->lo, k->hi,
                k->hi_open ? ")" : "]", json_text(v, text, sizeof(text)));
        return -1;
    }
    if (k->kind == DS_SEQS) {  // sequences -> tokens per step, within -d's limit
        if (x * r->c->T > (double)(1L << 40)) {
            fprintf(r->log, "error: '%s': %s %.0f sequences of T=%d is more than 2^40 tokens\n", r->path, k->key, x,
                    r->c->T);
            return -1;
        }
        x *= r->c->T;
    }
    if ((r->c->given & TRAIN_FLAG_BIT(k->flag)) && field_get(r->c, k) != x) {
        char flag_value[32], tokens[64] = "";
        snprintf(flag_value, sizeof(flag_value), k->type == F_FLOAT ? "%g" : "%.0f", field_get(r->c, k));
        if (k->kind == DS_SEQS) snprintf(tokens, sizeof(tokens), " (x T=%d = %.0f tokens)", r->c->T, x);
        fprintf(r->log, "error: %s %s contradicts %s = %s%s in '%s'\n", k->flag_name, flag_value, k->key,
                json_text(v, text, sizeof(text)), tokens, r->path);
        return -1;
    }
    field_set(r->c, k, x);
    r->c->from_file |= TRAIN_FLAG_BIT(k->flag);
    return 0;
}

static int apply_adam(Reader *r, const DsKey *k, const cJSON *v) {
    char text[80];
    if (cJSON_IsString(v) && (strcasecmp(v->valuestring, "Adam") == 0 || strcasecmp(v->valuestring, "AdamW") == 0))
        return 0;
    fprintf(r->log, "error: '%s': %s %s is not supported (this trainer's optimizer is AdamW: \"Adam\" or \"AdamW\")\n",
            r->path, k->key, json_text(v, text, sizeof(text)));
    return -1;
}

static int apply_later(Reader *r, const DsKey *k, const cJSON *v) {
    char text[80], accepted[64] = "";
    for (int i = 0; i < 2 && k->off[i]; i++) {
        cJSON *off = cJSON_Parse(k->off[i]);
        int same = cJSON_Compare(v, off, 1);
        cJSON_Delete(off);
        if (same) return 0;
        snprintf(accepted + strlen(accepted), sizeof(accepted) - strlen(accepted), "%s%s", i ? " or " : "", k->off[i]);
    }
    fprintf(r->log, "error: '%s': %s = %s is not supported yet (accepted until it is: %s)\n", r->path, k->key,
            json_text(v, text, sizeof(text)), accepted);
    return -1;
}

// The value a key names, set unless a flag or an earlier key of the file said otherwise
// (the two nvme_paths set one folder). `shown`: the value in words for messages.
static int agree(Reader *r, const DsKey *k, int same, const char *now, const char *shown) {
    if (same) return 0;
    if (r->c->given & TRAIN_FLAG_BIT(k->flag)) {
        fprintf(r->log, "error: %s %s contradicts %s = %s in '%s'\n", k->flag_name, now, k->key, shown, r->path);
        return -1;
    }
    if (r->c->from_file & TRAIN_FLAG_BIT(k->flag)) {
        fprintf(r->log, "error: '%s': %s = %s disagrees with the %s set before (%s): one folder serves both\n",
                r->path, k->key, shown, k->flag_name, now);
        return -1;
    }
    return 0;
}

static int apply_offload(Reader *r, const DsKey *k, const cJSON *v) {
    char text[80];
    int dev = cJSON_IsString(v) ? train_offload_parse(v->valuestring) : -1;
    if (dev < 0) {
        fprintf(r->log, "error: '%s': %s must be \"none\", \"cpu\" or \"nvme\", got %s\n", r->path, k->key,
                json_text(v, text, sizeof(text)));
        return -1;
    }
    int *field = (int *)((char *)r->c + k->field);
    if (agree(r, k, *field == dev, train_offload_names[*field], v->valuestring) != 0) return -1;
    *field = dev;
    r->c->from_file |= TRAIN_FLAG_BIT(k->flag);
    return 0;
}

static int apply_bool(Reader *r, const DsKey *k, const cJSON *v) {
    char text[80];
    if (!cJSON_IsBool(v)) {
        fprintf(r->log, "error: '%s': %s must be true or false, got %s\n", r->path, k->key, json_text(v, text, sizeof(text)));
        return -1;
    }
    int *field = (int *)((char *)r->c + k->field), on = cJSON_IsTrue(v);
    char now[8];
    snprintf(now, sizeof now, "%d", *field);
    if (agree(r, k, *field == on, now, on ? "true" : "false") != 0) return -1;
    *field = on;
    r->c->from_file |= TRAIN_FLAG_BIT(k->flag);
    return 0;
}

// A string from the file that outlives the parsed file, like argv's strings: kept for the
// process on a list (reachable, so leak checkers do not count it).
typedef struct Kept { struct Kept *next; char s[]; } Kept;
static Kept *kept;

static char *keep_string(const char *s) {
    size_t n = strlen(s) + 1;
    Kept *k = malloc(sizeof *k + n);
    if (!k) return NULL;
    memcpy(k->s, s, n);
    k->next = kept;
    kept = k;
    return k->s;
}

static int apply_path(Reader *r, const DsKey *k, const cJSON *v) {
    char text[80];
    if (cJSON_IsNull(v)) return 0;   // DeepSpeed's "not set"
    if (!cJSON_IsString(v) || !*v->valuestring) {
        fprintf(r->log, "error: '%s': %s must be a folder's path (a string) or null, got %s\n", r->path, k->key,
                json_text(v, text, sizeof(text)));
        return -1;
    }
    const char **field = (const char **)((char *)r->c + k->field);
    int set = (r->c->given | r->c->from_file) & TRAIN_FLAG_BIT(k->flag);
    if (agree(r, k, !set || strcmp(*field, v->valuestring) == 0, set ? *field : "", v->valuestring) != 0) return -1;
    char *copy = keep_string(v->valuestring);
    if (!copy) {
        fprintf(r->log, "error: out of memory reading '%s'\n", r->path);
        return -1;
    }
    *field = copy;
    r->c->from_file |= TRAIN_FLAG_BIT(k->flag);
    return 0;
}

static void note_unknown(Reader *r, const char *key) {
    size_t len = strlen(r->unknown);
    snprintf(r->unknown + len, sizeof(r->unknown) - len, "%s%s", r->num_unknown ? ", " : "", key);
    r->num_unknown++;
}

static int apply_object(Reader *r, const cJSON *obj, const char *prefix);

// One key of the file and its value.
static int apply_key(Reader *r, const char *key, const cJSON *v) {
    const DsKey *k = find_key(key);
    if (k == NULL) {
        note_unknown(r, key);
        return 0;
    }
    if (is_auto(v)) return 0;  // the trainer's value: the flag's or the default
    char text[80];
    switch (k->kind) {
    case DS_SECTION:
        if (!cJSON_IsObject(v)) {
            fprintf(r->log, "error: '%s': %s must be an object, got %s\n", r->path, key,
                    json_text(v, text, sizeof(text)));
            return -1;
        }
        return apply_object(r, v, key);
    case DS_PAIR:
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2) {
            fprintf(r->log, "error: '%s': %s must be an array of 2 numbers, got %s\n", r->path, key,
                    json_text(v, text, sizeof(text)));
            return -1;
        }
        for (int i = 0; i < 2; i++) {
            char elem[256];
            snprintf(elem, sizeof(elem), "%s[%d]", key, i);
            if (apply_key(r, elem, cJSON_GetArrayItem(v, i)) != 0) return -1;
        }
        return 0;
    case DS_ADAM: return apply_adam(r, k, v);
    case DS_LATER: return apply_later(r, k, v);
    case DS_OFFLOAD: return apply_offload(r, k, v);
    case DS_PATH: return apply_path(r, k, v);
    case DS_BOOL: return apply_bool(r, k, v);
    case DS_IDLE:
        if (v->type & k->json_types) return 0;
        fprintf(r->log, "error: '%s': %s must be %s, got %s\n", r->path, key, k->type_name,
                json_text(v, text, sizeof(text)));
        return -1;
    default: return apply_number(r, k, v);
    }
}

static int apply_object(Reader *r, const cJSON *obj, const char *prefix) {
    for (const cJSON *e = obj->child; e; e = e->next) {
        char key[256];
        snprintf(key, sizeof(key), "%s%s%s", prefix, *prefix ? "." : "", e->string);
        // a plain JSON reader would silently keep one of two equal keys: say so instead
        for (const cJSON *d = obj->child; d != e; d = d->next)
            if (strcmp(d->string, e->string) == 0) {
                fprintf(r->log, "error: '%s': %s appears twice\n", r->path, key);
                return -1;
            }
        if (apply_key(r, key, e) != 0) return -1;
    }
    return 0;
}

// The whole file as a NUL-terminated string (caller frees), or NULL after a message.
static char *read_text(const char *path, FILE *log) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(log, "error: cannot open DeepSpeed config '%s': %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = (char *)malloc(cap);
    for (size_t got; buf && (got = fread(buf + len, 1, cap - 1 - len, f)) > 0;) {
        len += got;
        if (len + 1 == cap) {
            char *bigger = cap < (1u << 24) ? (char *)realloc(buf, cap * 2) : NULL;
            if (bigger == NULL) { free(buf); buf = NULL; break; }
            buf = bigger;
            cap *= 2;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (buf == NULL || bad) {
        fprintf(log, "error: cannot read DeepSpeed config '%s': %s\n", path, bad ? "read error" : "larger than 16 MiB");
        free(buf);
        return NULL;
    }
    buf[len] = '\0';
    return buf;
}

int ds_config_apply(TrainConfig *c, const char *path, FILE *log) {
    char *text = read_text(path, log);
    if (text == NULL) return -1;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (root == NULL || !cJSON_IsObject(root)) {
        if (root == NULL) {
            const char *at = end ? end : text;
            int line = 1;
            for (const char *p = text; p < at && *p; p++) line += *p == '\n';
            fprintf(log, "error: '%s' is not valid JSON (line %d, near \"%.20s\")\n", path, line, at);
        } else {
            fprintf(log, "error: '%s': a DeepSpeed config is a JSON object ({...})\n", path);
        }
        cJSON_Delete(root);
        free(text);
        return -1;
    }
    Reader r = {c, path, log, "", 0};
    int rc = apply_object(&r, root, "");
    if (rc == 0 && r.num_unknown)
        fprintf(log, "warning: '%s': ignoring %d key%s this trainer does not know: %s\n", path, r.num_unknown,
                r.num_unknown > 1 ? "s" : "", r.unknown);
    cJSON_Delete(root);
    free(text);
    return rc;
}

// ----------------------------------------------------------------------------
// DeepSpeed's batch rule

int ds_config_resolve_batch(TrainConfig *c, int world, FILE *log) {
    const unsigned file = c->from_file, set = c->given | c->from_file;
    if (!(file & (TRAIN_FLAG_BIT(TRAIN_FLAG_TOTAL_BATCH) | TRAIN_FLAG_BIT(TRAIN_FLAG_GRAD_ACCUM)))) return 0;
    // Each term as the user gave it: the file's key or the flag.
    char total[160], micro[128];
    if (file & TRAIN_FLAG_BIT(TRAIN_FLAG_TOTAL_BATCH))
        snprintf(total, sizeof(total), "train_batch_size %ld", c->total_batch_tokens / c->T);
    else
        snprintf(total, sizeof(total), "-d %ld tokens (%g sequences of T=%d)", c->total_batch_tokens,
                 (double)c->total_batch_tokens / c->T, c->T);
    int have_total = c->total_batch_tokens >= 0;
    if (c->grad_accum_steps > 0 && have_total && !(set & TRAIN_FLAG_BIT(TRAIN_FLAG_B))) {
        // train_batch_size and accumulation given, no micro batch: DeepSpeed infers it
        long per = (long)c->T * c->grad_accum_steps * world;
        if (c->total_batch_tokens % per != 0 || c->total_batch_tokens / per > (1L << 20)) {
            fprintf(log, "error: '%s': %s does not split into gradient_accumulation_steps %d x %d ranks x a "
                    "micro-batch of at most %d sequences\n", c->deepspeed, total, c->grad_accum_steps, world, 1 << 20);
            return -1;
        }
        c->B = (int)(c->total_batch_tokens / per);
        return 0;
    }
    if (file & TRAIN_FLAG_BIT(TRAIN_FLAG_B))
        snprintf(micro, sizeof(micro), "train_micro_batch_size_per_gpu %d", c->B);
    else if (c->given & TRAIN_FLAG_BIT(TRAIN_FLAG_B))
        snprintf(micro, sizeof(micro), "-b %d", c->B);
    else
        snprintf(micro, sizeof(micro), "micro-batch %d (-b's default)", c->B);
    long micro_tokens = (long)c->B * c->T * world;
    if (c->grad_accum_steps > 0) {
        long want = micro_tokens * c->grad_accum_steps;
        if (!have_total) c->total_batch_tokens = want;
        if (c->total_batch_tokens != want) {
            fprintf(log, "error: '%s': %s != %s x gradient_accumulation_steps %d x %d ranks = %ld sequences "
                    "(DeepSpeed's rule)\n", c->deepspeed, total, micro, c->grad_accum_steps, world, want / c->T);
            return -1;
        }
    } else if (c->total_batch_tokens % micro_tokens != 0) {
        fprintf(log, "error: '%s': %s is not a multiple of %s x %d ranks (the accumulation steps must be whole)\n",
                c->deepspeed, total, micro, world);
        return -1;
    }
    return 0;
}

// ----------------------------------------------------------------------------
// -h

void ds_config_usage(FILE *out, const char *indent) {
    // One line per section ("optimizer.params: lr (-l), ..."), wrapped at 96 columns: first
    // the keys that set something, then those accepted only when off.
    for (int later = 0; later < 2; later++) {
        if (later) fprintf(out, "%snot supported yet, accepted with these values only:\n", indent);
        int col = 0;
        const char *section = NULL;  // the key that began the line
        size_t section_len = 0;
        for (size_t i = 0; i < NUM_KEYS; i++) {
            const DsKey *k = &KEYS[i];
            size_t len = strlen(k->key);
            int is_later = k->kind == DS_LATER || (k->kind == DS_IDLE && !k->why_idle);
            if (k->kind == DS_SECTION || k->key[len - 1] == ']' || is_later != later) continue;
            const char *dot = strrchr(k->key, '.');
            size_t sec = dot ? (size_t)(dot - k->key) : 0;
            const char *leaf = dot ? dot + 1 : k->key;
            char item[160];
            if (k->kind == DS_LATER) {
                snprintf(item, sizeof(item), "%s %s", leaf, k->off[0]);
            } else if (k->kind == DS_IDLE) {
                snprintf(item, sizeof(item), "%s (any: %s)", leaf, k->why_idle ? k->why_idle : "no effect");
            } else if (k->kind == DS_OFFLOAD) {
                snprintf(item, sizeof(item), "%s none|cpu|nvme (%s)", leaf, k->flag_name);
            } else if (k->kind == DS_ADAM) {
                snprintf(item, sizeof(item), "%s Adam|AdamW", leaf);
            } else if (k->kind == DS_BOOL) {
                snprintf(item, sizeof(item), "%s true|false (%s)", leaf, k->flag_name);
            } else if (k->kind == DS_PAIR) {
                char e0[160], e1[160];
                snprintf(e0, sizeof(e0), "%s[0]", k->key);
                snprintf(e1, sizeof(e1), "%s[1]", k->key);
                snprintf(item, sizeof(item), "%s (%s, %s)", leaf, find_key(e0)->flag_name, find_key(e1)->flag_name);
            } else {
                snprintf(item, sizeof(item), "%s%s%s%s%s", leaf, k->flag_name ? " (" : "",
                         k->flag_name ? k->flag_name : "", k->kind == DS_SEQS ? " / T" : "", k->flag_name ? ")" : "");
            }
            if (section == NULL || sec != section_len || strncmp(k->key, section, sec) != 0) {
                if (col) fprintf(out, "\n");
                col = fprintf(out, "%s%.*s%s", indent, (int)sec, k->key, sec ? ": " : "");
                section = k->key;
                section_len = sec;
            } else if (col + 2 + (int)strlen(item) > 96) {
                col = fprintf(out, ",\n%s  ", indent);
            } else {
                col += fprintf(out, ", ");
            }
            col += fprintf(out, "%s", item);
        }
        if (col) fprintf(out, "\n");
    }
    fprintf(out, "%sother keys are ignored with a warning naming them\n", indent);
}
