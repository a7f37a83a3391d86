// ds_config.c: DeepSpeed's ds_config.json into TrainConfig. One table lists every key
// this trainer knows: what it sets, the flag that sets the same thing, its range, or, for
// a feature this trainer does not have, the values that mean "off". Wiring such a feature is
// turning its entry into a value entry.
#include "ds_config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
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
    DS_LEGACY,   // DeepSpeed's deprecated offload switch: true or false into an offload device
    DS_PRECISION,// fp16 / bf16: their "enabled" gets a message; the rest has no effect here
    DS_COMM_DTYPE,// communication_data_type: "fp32" (the default reduction) or "bf16" (--fast-reduce)
    DS_REFUSED,  // a section whose settings this trainer takes from flags only (why says which)
} DsKind;

typedef enum { F_INT, F_LONG, F_I64, F_FLOAT, F_STRING } FieldType;

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
    const char *why;        // DS_INT: why the range is what it is (for its error)
    double multiple_of;     // DS_INT: the value must be a multiple of this (0: any)
    const char *replaces;   // DS_LEGACY: the key beside it that DeepSpeed replaced it with
    const char *hint;       // for -h, where no flag says what the key sets
} DsKey;

#define INT_FIELD(f) .field = offsetof(TrainConfig, f), .type = F_INT
#define LONG_FIELD(f) .field = offsetof(TrainConfig, f), .type = F_LONG
#define I64_FIELD(f) .field = offsetof(TrainConfig, f), .type = F_I64
#define FLOAT_FIELD(f) .field = offsetof(TrainConfig, f), .type = F_FLOAT
#define STRING_FIELD(f) .field = offsetof(TrainConfig, f), .type = F_STRING
#define ELEMS (double)(1L << 40)   // the --zero-* flags' limit
// pin_memory: offload's host memory is always pinned (CUDA) here
#define IDLE_BOOL .kind = DS_IDLE, .json_types = cJSON_True | cJSON_False, .type_name = "true or false", \
                  .why_idle = "always pinned"

static const DsKey KEYS[] = {
    {.key = "train_micro_batch_size_per_gpu", .kind = DS_INT, .lo = 1, .hi = 1 << 20, .flag = TRAIN_FLAG_B,
     .flag_name = "-b", INT_FIELD(B)},
    {.key = "gradient_accumulation_steps", .kind = DS_INT, .lo = 1, .hi = TRAIN_MAX_GRAD_ACCUM,
     .flag = TRAIN_FLAG_GRAD_ACCUM, INT_FIELD(grad_accum_steps), .hint = "1 to 65536",
     .why = "this trainer's bound on micro-steps per optimizer step: fp32 sums of more lose bf16's precision; see -d in -h"},
    {.key = "train_batch_size", .kind = DS_SEQS, .lo = 1, .hi = ELEMS, .flag = TRAIN_FLAG_TOTAL_BATCH,
     .flag_name = "-d", I64_FIELD(total_batch_tokens)},
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
    {.key = "optimizer.params.amsgrad", .kind = DS_LATER, .off = {"false"}},
    // DeepSpeed's schedulers (WarmupLR's log warmup from warmup_min_lr, WarmupDecayLR, ...)
    // are not llm.c's: a section read as if they were would train with another schedule
    {.key = "scheduler", .kind = DS_REFUSED,
     .why = "DeepSpeed's learning-rate schedulers are not this trainer's; its schedule is llm.c's, set by flags: "
            "-k cosine|linear|constant|wsd, -u warmup steps, -l peak, -q final fraction of the peak. Remove the "
            "section, or give its parameters as \"auto\""},
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
    {.key = "zero_optimization.offload_optimizer.ratio", .kind = DS_FLOAT, .lo = 0, .hi = 1, .flag = TRAIN_FLAG_OFFLOAD_RATIO,
     .flag_name = "--offload-optimizer-ratio", FLOAT_FIELD(offload_ratio)},
    {.key = "zero_optimization.offload_param", .kind = DS_SECTION},
    {.key = "zero_optimization.offload_param.device", .kind = DS_OFFLOAD, .flag = TRAIN_FLAG_OFFLOAD_PARAM,
     .flag_name = "--offload-param", INT_FIELD(offload_param)},
    {.key = "zero_optimization.offload_param.nvme_path", .kind = DS_PATH, .flag = TRAIN_FLAG_NVME_PATH,
     .flag_name = "--nvme-path", STRING_FIELD(nvme_path)},
    {.key = "zero_optimization.offload_param.pin_memory", IDLE_BOOL},
    // DeepSpeed's deprecated switches (still in many published configs), mapped as DeepSpeed
    // maps them: cpu_offload to offload_optimizer.device "cpu", cpu_offload_param (older
    // releases: cpu_offload_params) to offload_param.device "cpu"; false is "none"
    {.key = "zero_optimization.cpu_offload", .kind = DS_LEGACY, .flag = TRAIN_FLAG_OFFLOAD_OPTIMIZER,
     .flag_name = "--offload-optimizer", INT_FIELD(offload_optimizer), .replaces = "offload_optimizer"},
    {.key = "zero_optimization.cpu_offload_param", .kind = DS_LEGACY, .flag = TRAIN_FLAG_OFFLOAD_PARAM,
     .flag_name = "--offload-param", INT_FIELD(offload_param), .replaces = "offload_param"},
    {.key = "zero_optimization.cpu_offload_params", .kind = DS_LEGACY, .flag = TRAIN_FLAG_OFFLOAD_PARAM,
     .flag_name = "--offload-param", INT_FIELD(offload_param), .replaces = "offload_param"},
    {.key = "zero_optimization.cpu_offload_use_pin_memory", IDLE_BOOL},
    // ZeRO-Infinity's NVMe engine (DeepSpeed's libaio settings): what means the same here
    // sets the engine, the rest is accepted without effect
    {.key = "aio", .kind = DS_SECTION},
    {.key = "aio.block_size", .kind = DS_INT, .lo = TRAIN_AIO_ALIGN, .hi = TRAIN_AIO_MAX_BLOCK, .multiple_of = TRAIN_AIO_ALIGN,
     .flag = TRAIN_FLAG_AIO_BLOCK_SIZE, I64_FIELD(aio_block_size),
     .why = "bytes per NVMe read or write call, a multiple of the 4096 bytes O_DIRECT transfers align to",
     .hint = "the most bytes per NVMe read or write, a multiple of 4096"},
    {.key = "aio.queue_depth", .kind = DS_INT, .lo = 1, .hi = TRAIN_AIO_MAX_QUEUE_DEPTH, .flag = TRAIN_FLAG_AIO_QUEUE_DEPTH,
     INT_FIELD(aio_queue_depth), .why = "NVMe requests in flight at most, up to the engine's queue",
     .hint = "NVMe requests in flight, 1 to 256"},
    {.key = "aio.thread_count", .kind = DS_IDLE, .json_types = cJSON_Number, .type_name = "a number",
     .why_idle = "requests run in parallel up to queue_depth"},
    {.key = "aio.intra_op_parallelism", .kind = DS_IDLE, .json_types = cJSON_Number, .type_name = "a number",
     .why_idle = "requests run in parallel up to queue_depth"},
    {.key = "aio.single_submit", .kind = DS_IDLE, .json_types = cJSON_True | cJSON_False, .type_name = "true or false",
     .why_idle = "each request is submitted as it is queued"},
    {.key = "aio.overlap_events", .kind = DS_IDLE, .json_types = cJSON_True | cJSON_False,
     .type_name = "true or false", .why_idle = "requests always overlap, up to queue_depth"},
    {.key = "aio.use_gds", .kind = DS_LATER, .off = {"false"}},
    // precision: fp32 on the CPU, bf16 with fp32 master weights on the GPU, whatever the file says
    {.key = "fp16", .kind = DS_PRECISION},
    {.key = "bf16", .kind = DS_PRECISION},
    {.key = "bfloat16", .kind = DS_PRECISION},   // DeepSpeed's older name of bf16
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
    // the type gradients are reduced in
    {.key = "communication_data_type", .kind = DS_COMM_DTYPE, .flag = TRAIN_FLAG_FAST_REDUCE, .flag_name = "--fast-reduce",
     INT_FIELD(fast_reduce)},
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
    char unknown[2048];  // the keys it does not know, for one warning (the first that fit)
    size_t unknown_len;
    int num_unknown, unknown_cut;
} Reader;

// The value as JSON text, for messages (at most 60 characters). (A number past a double's
// range never gets here: check_tree refused it first, since cJSON would print it as null.)
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
    case F_I64: return (double)*(const int64_t *)p;
    default: return *(const float *)p;
    }
}

static void field_set(TrainConfig *c, const DsKey *k, double v) {
    char *p = (char *)c + k->field;
    switch (k->type) {
    case F_INT: *(int *)p = (int)v; break;
    case F_LONG: *(long *)p = (long)v; break;
    case F_I64: *(int64_t *)p = (int64_t)v; break;
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
    if (x == 0 && v->valuedouble != 0) {    // a learning rate of 1e-50 would train at 0
        fprintf(r->log, "error: '%s': %s %s is too small for a float (it would be 0)\n", r->path, k->key,
                json_text(v, text, sizeof(text)));
        return -1;
    }
    int integral = k->kind == DS_FLOAT || x == floor(x);
    if (!integral || !(x >= k->lo && (k->hi_open ? x < k->hi : x <= k->hi)) ||
        (k->multiple_of > 0 && fmod(x, k->multiple_of) != 0)) {
        char mult[48] = "";
        if (k->multiple_of > 0) snprintf(mult, sizeof mult, ", a multiple of %g,", k->multiple_of);
        fprintf(r->log, "error: '%s': %s must be %s in [%g, %g%s%s got %s%s%s%s\n", r->path, k->key, what, k->lo, k->hi,
                k->hi_open ? ")" : "]", *mult ? mult : ",", json_text(v, text, sizeof(text)), k->why ? " (" : "",
                k->why ? k->why : "", k->why ? ")" : "");
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

// An offload device into k's field, unless a flag or an earlier key said otherwise
// (`shown`: the file's value in words).
static int set_device(Reader *r, const DsKey *k, int dev, const char *shown) {
    int *field = (int *)((char *)r->c + k->field);
    if (agree(r, k, *field == dev, train_offload_names[*field], shown) != 0) return -1;
    *field = dev;
    r->c->from_file |= TRAIN_FLAG_BIT(k->flag);
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
    return set_device(r, k, dev, v->valuestring);
}

// DeepSpeed reduces gradients in this type: "bf16" is --fast-reduce (the library's bf16
// reduce-scatter), "fp32" the default (fp32, rank order); fp16 travels nowhere here.
static int apply_comm_dtype(Reader *r, const DsKey *k, const cJSON *v) {
    char text[80];
    int fast = !cJSON_IsString(v) ? -1 : !strcmp(v->valuestring, "bf16") ? 1 : !strcmp(v->valuestring, "fp32") ? 0 : -1;
    if (fast < 0) {
        fprintf(r->log, "error: '%s': %s must be \"fp32\" (gradients summed in fp32 in rank order) or \"bf16\" "
                "(--fast-reduce), got %s\n", r->path, k->key, json_text(v, text, sizeof(text)));
        return -1;
    }
    int *field = (int *)((char *)r->c + k->field);
    if (agree(r, k, *field == fast, *field ? "(on)" : "(off)", v->valuestring) != 0) return -1;
    *field = fast;
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

// DeepSpeed's deprecated cpu_offload / cpu_offload_param(s): true is the device "cpu", false
// "none". DeepSpeed refuses one given beside the key that replaced it; so does this.
static int apply_legacy(Reader *r, const DsKey *k, const cJSON *v, const cJSON *parent) {
    char text[80];
    if (!cJSON_IsBool(v)) {
        fprintf(r->log, "error: '%s': %s must be true or false, got %s\n", r->path, k->key, json_text(v, text, sizeof(text)));
        return -1;
    }
    const cJSON *modern = cJSON_GetObjectItemCaseSensitive(parent, k->replaces);
    if (modern && !is_auto(modern)) {
        fprintf(r->log, "error: '%s': %s is DeepSpeed's deprecated form of zero_optimization.%s, and both are given: "
                "keep %s (DeepSpeed refuses the two together too)\n", r->path, k->key, k->replaces, k->replaces);
        return -1;
    }
    int dev = cJSON_IsTrue(v) ? TRAIN_OFFLOAD_CPU : TRAIN_OFFLOAD_NONE;
    if (set_device(r, k, dev, cJSON_IsTrue(v) ? "true" : "false") != 0) return -1;
    fprintf(r->log, "note: '%s': %s %s is DeepSpeed's deprecated zero_optimization.%s.device \"%s\" (%s %s)\n",
            r->path, k->key, cJSON_IsTrue(v) ? "true" : "false", k->replaces, train_offload_names[dev], k->flag_name,
            train_offload_names[dev]);
    return 0;
}

// fp16 / bf16 (bfloat16): this trainer's precision is its own, so "enabled" true gets a
// message saying what runs instead; the section's other keys (loss scaling) have no effect.
static int apply_precision(Reader *r, const DsKey *k, const cJSON *v) {
    char text[80];
    if (!cJSON_IsObject(v)) {
        fprintf(r->log, "error: '%s': %s must be an object, got %s\n", r->path, k->key, json_text(v, text, sizeof(text)));
        return -1;
    }
    const cJSON *on = cJSON_GetObjectItemCaseSensitive(v, "enabled");
    if (on == NULL || is_auto(on) || cJSON_IsFalse(on)) return 0;   // DeepSpeed's default: off
    if (!cJSON_IsTrue(on)) {
        fprintf(r->log, "error: '%s': %s.enabled must be true, false or \"auto\", got %s\n", r->path, k->key,
                json_text(on, text, sizeof(text)));
        return -1;
    }
    if (strcmp(k->key, "fp16") == 0)
        fprintf(r->log, "warning: '%s': fp16.enabled true: no fp16 runs here: this trainer trains in fp32 on the CPU "
                "(train_gpt2) and in bf16 with fp32 master weights on the GPU (train_gpt2_zero), so no loss scaling "
                "runs either (fp16's other keys have no effect)\n", r->path);
    else
        fprintf(r->log, "note: '%s': %s.enabled true: the GPU trainer (train_gpt2_zero) trains in bf16 with fp32 master "
                "weights whatever the file says, the CPU trainer (train_gpt2) in fp32 (%s's other keys have no "
                "effect)\n", r->path, k->key, k->key);
    return 0;
}

static void note_unknown(Reader *r, const char *key) {
    size_t room = sizeof(r->unknown) - r->unknown_len, need = strlen(key) + (r->num_unknown ? 2 : 0);
    r->num_unknown++;
    if (r->unknown_cut || need >= room) {   // the list shows the first that fit, then "..."
        r->unknown_cut = 1;
        return;
    }
    r->unknown_len += (size_t)snprintf(r->unknown + r->unknown_len, room, "%s%s", need > strlen(key) ? ", " : "", key);
}

static int apply_object(Reader *r, const cJSON *obj, const char *prefix);

// One key of the file and its value (parent: the object holding it).
static int apply_key(Reader *r, const char *key, const cJSON *v, const cJSON *parent) {
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
            if (apply_key(r, elem, cJSON_GetArrayItem(v, i), v) != 0) return -1;
        }
        return 0;
    case DS_ADAM: return apply_adam(r, k, v);
    case DS_LATER: return apply_later(r, k, v);
    case DS_REFUSED: {
        // Hugging Face's templates give every parameter "auto", the trainer's own values: that
        // is the trainer's schedule (the type names none of it), so it is accepted
        const cJSON *params = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "params") : NULL, *set = NULL;
        int accepted = cJSON_IsObject(v) && (params == NULL || cJSON_IsObject(params));
        for (const cJSON *e = accepted && params ? params->child : NULL; e && !set; e = e->next)
            if (!is_auto(e)) set = e;
        if (accepted && !set) return 0;
        fprintf(r->log, "error: '%s': %s%s%s%s%s: %s\n", r->path, key, set ? ".params." : "", set ? set->string : "",
                set ? " = " : "", set ? json_text(set, text, sizeof(text)) : "", k->why);
        return -1;
    }
    case DS_OFFLOAD: return apply_offload(r, k, v);
    case DS_PATH: return apply_path(r, k, v);
    case DS_BOOL: return apply_bool(r, k, v);
    case DS_COMM_DTYPE: return apply_comm_dtype(r, k, v);
    case DS_LEGACY: return apply_legacy(r, k, v, parent);
    case DS_PRECISION: return apply_precision(r, k, v);
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
        // a key holding a path ("zero_optimization.stage", "betas[0]") is no key of the table:
        // it would set a value twice, past the one-object duplicate check, as DeepSpeed never does
        if (strpbrk(e->string, ".[")) {
            note_unknown(r, key);
            continue;
        }
        if (apply_key(r, key, e, obj) != 0) return -1;
    }
    return 0;
}

// ----------------------------------------------------------------------------
// The whole tree, before any key applies: what a plain JSON reader would let through

// Each object's keys go through a hash set (open addressing, FNV-1a), so a file of n keys
// is checked in O(n) whatever its shape; the table is reused from object to object.
typedef struct {
    const char **slot;
    size_t cap;
    const char *path;
    FILE *log;
    char key[512];   // the path of the value being checked, for messages
} TreeCheck;

static uint64_t fnv1a(const char *s) {
    uint64_t h = 14695981039346656037ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

// 1 when obj's keys are distinct, 0 with *dup the first repeated one, -1 out of memory.
static int keys_distinct(TreeCheck *tc, const cJSON *obj, const char **dup) {
    size_t n = 0;
    for (const cJSON *e = obj->child; e; e = e->next) n++;
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    if (cap > tc->cap) {
        const char **bigger = realloc(tc->slot, cap * sizeof *bigger);
        if (!bigger) return -1;
        tc->slot = bigger;
        tc->cap = cap;
    }
    memset(tc->slot, 0, cap * sizeof *tc->slot);
    for (const cJSON *e = obj->child; e; e = e->next) {
        size_t i = (size_t)fnv1a(e->string) & (cap - 1);
        for (; tc->slot[i]; i = (i + 1) & (cap - 1))
            if (strcmp(tc->slot[i], e->string) == 0) {
                *dup = e->string;
                return 0;
            }
        tc->slot[i] = e->string;
    }
    return 1;
}

// Every object's keys distinct (a plain JSON reader would silently keep one of two equal
// keys) and every number within a double's range (cJSON turns 1e999 into infinity, which
// it prints as null). tc->key holds the path of v; it is restored on return.
static int check_tree(TreeCheck *tc, const cJSON *v) {
    size_t len = strlen(tc->key);
    if (cJSON_IsNumber(v) && !isfinite(v->valuedouble)) {
        fprintf(tc->log, "error: '%s': %s is a number that overflows a double (beyond +-1.8e308)\n", tc->path,
                len ? tc->key : "the value");
        return -1;
    }
    if (cJSON_IsObject(v)) {
        const char *dup = NULL;
        int distinct = keys_distinct(tc, v, &dup);
        if (distinct < 0) {
            fprintf(tc->log, "error: out of memory reading '%s'\n", tc->path);
            return -1;
        }
        if (!distinct) {
            fprintf(tc->log, "error: '%s': %s%s%s appears twice\n", tc->path, tc->key, len ? "." : "", dup);
            return -1;
        }
    }
    int i = 0;
    for (const cJSON *e = v->child; e; e = e->next, i++) {
        if (cJSON_IsObject(v)) snprintf(tc->key + len, sizeof(tc->key) - len, "%s%s", len ? "." : "", e->string);
        else snprintf(tc->key + len, sizeof(tc->key) - len, "[%d]", i);
        int rc = check_tree(tc, e);
        tc->key[len] = '\0';
        if (rc != 0) return -1;
    }
    return 0;
}

// Why cJSON refused text at `at`: its nesting limit when the refused character opens an
// object or array CJSON_NESTING_LIMIT levels deep (counted outside strings).
static int nesting_exceeded(const char *text, const char *at) {
    if (*at != '[' && *at != '{') return 0;
    long depth = 0;
    for (const char *p = text; p < at; p++) {
        if (*p == '"') {   // a string: skip it, escapes included
            for (p++; p < at && *p != '"'; p++)
                if (*p == '\\' && p + 1 < at) p++;
        } else if (*p == '[' || *p == '{') {
            depth++;
        } else if (*p == ']' || *p == '}') {
            depth--;
        }
    }
    return depth >= CJSON_NESTING_LIMIT;
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
    // a NUL would end the text for the parser: whatever follows (a second object, say) would
    // be dropped without a word
    const char *nul = memchr(buf, '\0', len);
    if (nul) {
        fprintf(log, "error: '%s' holds a NUL byte at offset %zu (of %zu bytes): a JSON text has none, and what "
                "follows it would be ignored\n", path, (size_t)(nul - buf), len);
        free(buf);
        return NULL;
    }
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
            if (nesting_exceeded(text, at))
                fprintf(log, "error: '%s' nests objects and arrays more than %d levels deep (line %d): that is this "
                        "reader's limit (cJSON's CJSON_NESTING_LIMIT); a DeepSpeed config needs 4\n", path,
                        CJSON_NESTING_LIMIT, line);
            else
                fprintf(log, "error: '%s' is not valid JSON (line %d, near \"%.20s\")\n", path, line, at);
        } else {
            fprintf(log, "error: '%s': a DeepSpeed config is a JSON object ({...})\n", path);
        }
        cJSON_Delete(root);
        free(text);
        return -1;
    }
    TreeCheck tc = {NULL, 0, path, log, ""};
    int rc = check_tree(&tc, root);
    free(tc.slot);
    Reader r = {c, path, log, "", 0, 0, 0};
    if (rc == 0) rc = apply_object(&r, root, "");
    if (rc == 0 && r.num_unknown)
        fprintf(log, "warning: '%s': ignoring %d key%s this trainer does not know: %s%s\n", path, r.num_unknown,
                r.num_unknown > 1 ? "s" : "", r.unknown, r.unknown_cut ? ", ..." : "");
    cJSON_Delete(root);
    free(text);
    return rc;
}

// ----------------------------------------------------------------------------
// DeepSpeed's batch rule

// a x b x c in 64 bits: 0, or -1 when it overflows
static int mul3(int64_t a, int64_t b, int64_t c, int64_t *out) {
    return __builtin_mul_overflow(a, b, out) || __builtin_mul_overflow(*out, c, out) ? -1 : 0;
}

int ds_config_resolve_batch(TrainConfig *c, int world, FILE *log) {
    const unsigned file = c->from_file, set = c->given | c->from_file;
    if (!(file & (TRAIN_FLAG_BIT(TRAIN_FLAG_TOTAL_BATCH) | TRAIN_FLAG_BIT(TRAIN_FLAG_GRAD_ACCUM)))) return 0;
    // Each term as the user gave it: the file's key or the flag.
    char total[160], micro[128];
    if (file & TRAIN_FLAG_BIT(TRAIN_FLAG_TOTAL_BATCH))
        snprintf(total, sizeof(total), "train_batch_size %lld", (long long)(c->total_batch_tokens / c->T));
    else
        snprintf(total, sizeof(total), "-d %lld tokens (%g sequences of T=%d)", (long long)c->total_batch_tokens,
                 (double)c->total_batch_tokens / c->T, c->T);
    int have_total = c->total_batch_tokens >= 0;
    if (c->grad_accum_steps > 0 && have_total && !(set & TRAIN_FLAG_BIT(TRAIN_FLAG_B))) {
        // train_batch_size and accumulation given, no micro batch: DeepSpeed infers it
        int64_t per;
        if (mul3(c->T, c->grad_accum_steps, world, &per) != 0 || c->total_batch_tokens % per != 0 ||
            c->total_batch_tokens / per > (1L << 20) || c->total_batch_tokens / per < 1) {
            fprintf(log, "error: '%s': %s does not split into gradient_accumulation_steps %d x %d ranks x a "
                    "micro-batch of 1 to %d sequences\n", c->deepspeed, total, c->grad_accum_steps, world, 1 << 20);
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
    int64_t micro_tokens, want;
    if (mul3(c->B, c->T, world, &micro_tokens) != 0 ||
        (c->grad_accum_steps > 0 && __builtin_mul_overflow(micro_tokens, (int64_t)c->grad_accum_steps, &want))) {
        fprintf(log, "error: '%s': %s x T=%d x gradient_accumulation_steps %d x %d ranks overflows 64 bits\n",
                c->deepspeed, micro, c->T, c->grad_accum_steps, world);
        return -1;
    }
    if (c->grad_accum_steps > 0) {
        if (!have_total) c->total_batch_tokens = want;
        if (c->total_batch_tokens != want) {
            fprintf(log, "error: '%s': %s != %s x gradient_accumulation_steps %d x %d ranks = %lld sequences "
                    "(DeepSpeed's rule)\n", c->deepspeed, total, micro, c->grad_accum_steps, world,
                    (long long)(want / c->T));
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
            int is_later = k->kind == DS_LATER || k->kind == DS_REFUSED || (k->kind == DS_IDLE && !k->why_idle);
            if (k->kind == DS_SECTION || k->key[len - 1] == ']' || is_later != later) continue;
            const char *dot = strrchr(k->key, '.');
            size_t sec = dot ? (size_t)(dot - k->key) : 0;
            const char *leaf = dot ? dot + 1 : k->key;
            char item[160];
            if (k->kind == DS_LATER) {
                snprintf(item, sizeof(item), "%s %s", leaf, k->off[0]);
            } else if (k->kind == DS_REFUSED) {
                snprintf(item, sizeof(item), "%s with its params \"auto\" (flags set it: -k, -u, -l, -q)", leaf);
            } else if (k->kind == DS_IDLE) {
                snprintf(item, sizeof(item), "%s (any: %s)", leaf, k->why_idle ? k->why_idle : "no effect");
            } else if (k->kind == DS_OFFLOAD) {
                snprintf(item, sizeof(item), "%s none|cpu|nvme (%s)", leaf, k->flag_name);
            } else if (k->kind == DS_ADAM) {
                snprintf(item, sizeof(item), "%s Adam|AdamW", leaf);
            } else if (k->kind == DS_BOOL) {
                snprintf(item, sizeof(item), "%s true|false (%s)", leaf, k->flag_name);
            } else if (k->kind == DS_COMM_DTYPE) {
                snprintf(item, sizeof(item), "%s fp32|bf16 (bf16: %s)", leaf, k->flag_name);
            } else if (k->kind == DS_LEGACY) {
                snprintf(item, sizeof(item), "%s true|false (deprecated: %s cpu|none)", leaf, k->flag_name);
            } else if (k->kind == DS_PRECISION) {
                snprintf(item, sizeof(item), "%s (enabled true: a %s; fp32 on the CPU, bf16 on the GPU)", leaf,
                         strcmp(k->key, "fp16") == 0 ? "warning" : "note");
            } else if (k->kind == DS_PAIR) {
                char e0[160], e1[160];
                snprintf(e0, sizeof(e0), "%s[0]", k->key);
                snprintf(e1, sizeof(e1), "%s[1]", k->key);
                snprintf(item, sizeof(item), "%s (%s, %s)", leaf, find_key(e0)->flag_name, find_key(e1)->flag_name);
            } else if (k->hint) {
                snprintf(item, sizeof(item), "%s (%s)", leaf, k->hint);
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
