// train_config.c: command-line parsing with getopt_long from one table of the flags, which
// also gives the help (-h); every value is range-checked.
#include "train_config.h"
#include "launch_env.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../model/gpt2_config.h"   // GPT2_MAX_TILES

_Static_assert(TRAIN_FLAG_COUNT <= 32, "TrainConfig's given and from_file hold one bit per TrainFlag");

// Flavours: "cpu" (train_gpt2: unsharded, or ZeRO under -z), "cuda" (train_gpt2cu:
// unsharded only, so the ZeRO flags are refused), "cuda-zero" (train_gpt2_zero).
static int flavour_cuda(const char *flavour) { return strncmp(flavour, "cuda", 4) == 0; }
static int flavour_zero(const char *flavour) { return strcmp(flavour, "cuda") != 0; }
static int flavour_cuda_zero(const char *flavour) { return strcmp(flavour, "cuda-zero") == 0; }

// --trace-steps's default: the last 4 steps.
#define TRAIN_TRACE_STEPS_DEFAULT 4

const char *const train_lr_schedule_names[4] = {"cosine", "linear", "constant", "wsd"};

const char *const train_offload_names[3] = {"none", "cpu", "nvme"};

int train_offload_parse(const char *name) {
    for (int i = 0; i < 3; i++)
        if (strcmp(name, train_offload_names[i]) == 0) return i;
    return -1;
}

static void defaults(TrainConfig *c, int cuda) {
    memset(c, 0, sizeof(*c));
    c->train_pattern = "data/kjv/kjv_train_*.bin";
    c->val_pattern = "data/kjv/kjv_val_*.bin";
    c->tokenizer_path = "data/gpt2/gpt2_tokenizer.bin";
    c->out_dir = "out";
    // CPU default: small enough that 30 steps take seconds on 2 cores.
    c->model = cuda ? "d12" : "d4c128h4t128";
    c->B = cuda ? 4 : 4;
    c->T = cuda ? 1024 : 64;
    c->total_batch_tokens = -1;
    c->lr = cuda ? 3e-4f : 2e-3f;
    c->warmup_steps = cuda ? 0 : 3;
    c->final_lr_frac = 0.1f;
    c->weight_decay = 0.0f;
    c->grad_clip = 1.0f;
    c->beta1 = 0.9f;
    c->beta2 = 0.95f;
    c->adam_eps = 1e-8f;
    c->max_steps = cuda ? -1 : 30;
    c->val_every = cuda ? 20 : 10;
    c->val_max_steps = 8;
    c->sample_every = cuda ? 20 : 30;
    c->gen_tokens = cuda ? 64 : 24;
    c->checkpoint_every = 0;
    c->resume = 0;
    c->nan_skip = 0;
    c->nan_skip_limit = TRAIN_NAN_SKIP_LIMIT_DEFAULT;
    c->seed = 1337;
    c->shuffle = 1;
    c->recompute = 1;
    c->use_cudnn = 1;
    c->micro_grads = 1;
    c->lr_schedule = TRAIN_LR_COSINE;
    c->ckpt_keep = TRAIN_CKPT_KEEP_DEFAULT;
    c->threads = 0;
    c->act_checkpoint = 0;
    c->act_offload = 0;
    c->tile_linear = 1;
    c->tile_vocab = 1;
    c->zero_stage = -1;
    c->zero_bucket = -1;     // sized from the model by the plugin
    c->zero_prefetch = -1;
    c->zero_max_live = 0;
    c->zero_persist = -1;   // the plugin chooses (zero.h: persist_elems)
    c->node_size = 0;
    c->zero_timeout = 600.0;
    c->dry_run = 0;
    c->dry_run_world = 1;
    c->gpu_mem = 0;
    c->host_mem = 0;
    c->offload_optimizer = TRAIN_OFFLOAD_NONE;
    c->offload_ratio = 1.0f;
    c->offload_param = TRAIN_OFFLOAD_NONE;
    c->nvme_path = NULL;
    c->trace_path = NULL;
    c->trace_steps = TRAIN_TRACE_STEPS_DEFAULT;
}

static long parse_long(const char *flag, const char *s, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);   // past long's range: LONG_MAX or LONG_MIN and ERANGE, refused
    if (*s == '\0' || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
        fprintf(stderr, "error: %s expects an integer in [%ld, %ld], got '%s'\n", flag, lo, hi, s);
        exit(1);
    }
    return v;
}

// A quantization block: int4 packs two values a byte, so blocks are even.
static int parse_block(const char *flag, const char *s) {
    long v = parse_long(flag, s, 2, 1 << 24);
    if (v % 2) {
        fprintf(stderr, "error: %s expects an even number of values per block, got %ld\n", flag, v);
        exit(1);
    }
    return (int)v;
}

int train_config_parse_bytes(const char *s, uint64_t *bytes) {
    static const struct { const char *unit; double scale; } units[] = {
        {"", 1}, {"B", 1},
        {"K", 0x1p10}, {"KiB", 0x1p10}, {"M", 0x1p20}, {"MiB", 0x1p20},
        {"G", 0x1p30}, {"GiB", 0x1p30}, {"T", 0x1p40}, {"TiB", 0x1p40},
        {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}};
    // digits, then optionally '.' and digits: no sign, exponent, hex, inf or nan
    const char *p = s;
    double v = 0.0, frac = 0.1;
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) v = v * 10.0 + (*p - '0');
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++, digits++, frac *= 0.1) v += (*p - '0') * frac;
    if (digits == 0) return -1;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(p, units[i].unit) != 0) continue;
        double b = v * units[i].scale;
        if (!(b >= 1.0 && b <= 0x1p60)) return -1;
        *bytes = (uint64_t)b;
        return 0;
    }
    return -1;
}

static float parse_float(const char *flag, const char *s, double lo, double hi) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);   // past double's range (1e999, 1e-999): ERANGE, refused
    // and a nonzero value that a float holds as 0 (-l 1e-50 would train at rate 0)
    if (*s == '\0' || *end != '\0' || errno == ERANGE || !(v >= lo && v <= hi)) {
        fprintf(stderr, "error: %s expects a number in [%g, %g], got '%s'\n", flag, lo, hi, s);
        exit(1);
    }
    if (v != 0.0 && (float)v == 0.0f) {
        fprintf(stderr, "error: %s %s is too small for a float (it would be 0)\n", flag, s);
        exit(1);
    }
    return (float)v;
}

// AdamW's betas: [0, 1), checked after the rounding to float (0.999999999 is 1.0f).
static float parse_beta(const char *flag, const char *s) {
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    float v = (float)d;
    if (*s == '\0' || *end != '\0' || errno == ERANGE || !(v >= 0.0f && v < 1.0f) || (d != 0.0 && v == 0.0f)) {
        fprintf(stderr, "error: %s expects a number in [0, 1), got '%s'\n", flag, s);
        exit(1);
    }
    return v;
}

// -x: -1 (one epoch) or a step count; 0 steps would train nothing.
static int parse_steps(const char *s) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno == ERANGE || !(v == -1 || (v >= 1 && v <= 1L << 30))) {
        fprintf(stderr, "error: -x expects -1 (one epoch of the train data) or a number of optimizer steps in "
                "[1, %ld], got '%s'\n", 1L << 30, s);
        exit(1);
    }
    return (int)v;
}

static int parse_offload(const char *flag, const char *s) {
    int v = train_offload_parse(s);
    if (v < 0) {
        fprintf(stderr, "error: %s expects none, cpu or nvme, got '%s'\n", flag, s);
        exit(1);
    }
    return v;
}

// ----------------------------------------------------------------------------
// The flags: one table gives the parser and the help (-h).

// The trainers whose help lists a row: train_gpt2, train_gpt2cu, train_gpt2_zero, and groups
// of them. (The parser takes a row's flag in every trainer, save that train_gpt2cu refuses
// the ZeRO flags.)
enum { FOR_CPU = 1, FOR_CU = 2, FOR_CU_ZERO = 4, FOR_ALL = FOR_CPU | FOR_CU | FOR_CU_ZERO,
       FOR_CUDA = FOR_CU | FOR_CU_ZERO, FOR_ZERO = FOR_CPU | FOR_CU_ZERO };

static unsigned flavour_bit(const char *flavour) {
    return flavour_cuda_zero(flavour) ? FOR_CU_ZERO : flavour_cuda(flavour) ? FOR_CU : FOR_CPU;
}

// How a value is read and where it goes (the field at the row's offset, of this type).
typedef enum {
    V_STR,       // const char *: the text as given
    V_INT,       // int: an integer in [lo, hi]
    V_LONG,      // long: the same
    V_I64,       // int64_t: the same
    V_U64,       // uint64_t: an integer in [0, 2^63-1]
    V_FLOAT,     // float: a number in [lo, hi]
    V_DOUBLE,    // double: the same, read as a float
    V_BETA,      // float: in [0, 1)
    V_BLOCK,     // int: an even quantization block
    V_OFFLOAD,   // int: none, cpu or nvme
    V_SCHEDULE,  // int: a -k name
    V_SET,       // int: set to 1; the flag takes no value
    V_HELP,      // -h: the help
    V_HEADING,   // no flag: a line of the help (a section heading or a note)
} ValueKind;

#define NO_FIELD ((size_t)-1)   // a flag that stores nothing (or only in its own way)

typedef struct Flag Flag;
// One flag being read: the row, its value, the trainer.
typedef struct {
    TrainConfig *c;
    const Flag *f;
    const char *arg;
    const char *flavour, *prog;
    int nan_skip_limit_given;   // --nan-skip-limit (it needs --nan-skip)
} Parse;
// A value read in a way of its own (a refusal, a check, more than a store).
typedef void (*ParseValue)(Parse *p);

struct Flag {
    const char *flag;    // as typed, named in messages and in the help: "-b", "--seed", "-nk"
    const char *name;    // getopt's long name where the flag's is not it ("-h N": "hellaswag"), or NULL
    const char *value;   // the value's name in the help ("N"); NULL: the flag takes no value
    ValueKind kind;
    size_t at;           // offsetof(TrainConfig, its field), or NO_FIELD
    double lo, hi;       // the value's range; for a heading, lo: the column its rows' help starts at
    int given;           // the TrainFlag the flag sets (a config file may not contradict it), or -1
    unsigned who;        // FOR_*: the trainers whose help lists it
    int zero;            // a ZeRO flag: train_gpt2cu refuses it
    // The help: a printf format given the default (as text: %s), one line per '\n';
    // "{A}{B}" reads A in the CUDA trainers' help and B in the CPU trainer's.
    const char *help;
    ParseValue parse;    // NULL: read by kind
};

// Prints "error: " and the message, and exits 1.
static void refuse(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void refuse(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "error: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    exit(1);
}

// The value as an integer in the row's range.
static long int_value(const Parse *p) { return parse_long(p->f->flag, p->arg, (long)p->f->lo, (long)p->f->hi); }

// llm.c's multi-node flags: this project's start-up takes the same facts from the launcher.
static void refuse_multinode(Parse *p) {
    if (!flavour_zero(p->flavour))
        refuse("%s is llm.c's multi-process start-up, and %s trains one GPU: for data parallel training run "
               "train_gpt2_zero under mpirun -np N (see -h)\n", p->f->flag, p->prog);
    refuse("%s is llm.c's multi-process start-up (-pn processes, -pr rank, -pg GPUs per node, -pm/-pi tcp|fs|mpi, "
           "-ps server, -pp/-pf shared folder), not taken here: the launcher says it. Use mpirun -np N (or srun), or "
           "without MPI set RANK, WORLD_SIZE and LOCAL_RANK in each process with ZERO_BOOTSTRAP_TCP=host:port "
           "(llm.c's tcp) or ZERO_BOOTSTRAP_FILE=path (llm.c's fs) and the job's ZERO_BOOTSTRAP_SECRET "
           "(zero/README.md: Start-up)\n", p->f->flag);
}

static void refuse_gelu_fusion(Parse *p) {
    (void)p;
    refuse("-ge (llm.c's GELU fusion into the matmul) is not selectable: the CUDA model's kernels are fixed; "
           "drop -ge\n");
}

static void read_steps(Parse *p) { p->c->max_steps = parse_steps(p->arg); }

static void read_recompute(Parse *p) {
    if (!flavour_cuda(p->flavour))
        refuse("-r (activation recompute) is the CUDA trainers': the CPU trainer keeps every activation, or with "
               "--act-checkpoint 1 only each block's input\n");
    p->c->recompute = (int)int_value(p);
}

// A switch of llm.c's accepted without effect when in range (-f: no matmul here takes fp32 inputs).
static void check_only(Parse *p) { (void)int_value(p); }

static void read_master_weights(Parse *p) {
    if (int_value(p) == 0)
        refuse("-w 0 (no fp32 master weights) is not available: every trainer keeps fp32 master weights (-w 1). To "
               "save their memory, shard them with ZeRO (-z 1, 2 or 3)\n");
}

static void read_hellaswag(Parse *p) {
    if (int_value(p) == 1)
        refuse("-h 1 asks for llm.c's HellaSwag evaluation, which is not implemented here; -h 0 (no evaluation) is "
               "accepted, and -h alone prints the help\n");
}

static void read_gpu_status(Parse *p) {
    if (int_value(p) > 0)
        refuse("-lg %s (llm.c's GPU utilization, power and temperature every N steps) is not implemented: run "
               "nvidia-smi --query-gpu=utilization.gpu,memory.used,power.draw,temperature.gpu --format=csv -l 10 "
               "beside the run; -lg 0 or -1 (off) is accepted\n", p->arg);
}

static void read_micro_grads(Parse *p) {
    p->c->micro_grads = (int)int_value(p);
    p->c->micro_grads_given = 1;
}

static void read_nan_skip_limit(Parse *p) {
    p->c->nan_skip_limit = (int)int_value(p);
    p->nan_skip_limit_given = 1;
}

static void read_mem(const char *flag, const char *arg, uint64_t *out) {
    if (train_config_parse_bytes(arg, out) != 0)
        refuse("%s expects a size from 1 byte to 2^60 bytes such as 80G, 80GiB, 80GB or 85899345920, got '%s'\n", flag, arg);
}
static void read_gpu_mem(Parse *p) { read_mem("--gpu-mem", p->arg, &p->c->gpu_mem); }
static void read_host_mem(Parse *p) { read_mem("--host-mem", p->arg, &p->c->host_mem); }

static void read_act_offload(Parse *p) {
    p->c->act_offload = strcmp(p->arg, "nvme") == 0 ? TRAIN_ACT_OFFLOAD_NVME : (int)int_value(p);
}

static void read_schedule(int *v, const char *arg) {
    int k = 0;
    while (k < 4 && strcmp(arg, train_lr_schedule_names[k]) != 0) k++;
    if (k == 4) refuse("-k expects a learning rate schedule: cosine, linear, constant or wsd, got '%s'\n", arg);
    *v = k;
}

// Reads arg into f's field by f's kind.
static void store_value(TrainConfig *c, const Flag *f, const char *arg) {
    if (f->at == NO_FIELD) return;
    char *p = (char *)c + f->at;
    long lo = (long)f->lo, hi = (long)f->hi;
    switch (f->kind) {
    case V_STR: *(const char **)p = arg; break;
    case V_INT: *(int *)p = (int)parse_long(f->flag, arg, lo, hi); break;
    case V_LONG: *(long *)p = parse_long(f->flag, arg, lo, hi); break;
    case V_I64: *(int64_t *)p = parse_long(f->flag, arg, lo, hi); break;
    case V_U64: *(uint64_t *)p = (uint64_t)parse_long(f->flag, arg, 0, LONG_MAX); break;
    case V_FLOAT: *(float *)p = parse_float(f->flag, arg, f->lo, f->hi); break;
    case V_DOUBLE: *(double *)p = parse_float(f->flag, arg, f->lo, f->hi); break;
    case V_BETA: *(float *)p = parse_beta(f->flag, arg); break;
    case V_BLOCK: *(int *)p = parse_block(f->flag, arg); break;
    case V_OFFLOAD: *(int *)p = parse_offload(f->flag, arg); break;
    case V_SCHEDULE: read_schedule((int *)p, arg); break;
    case V_SET: *(int *)p = 1; break;
    case V_HELP: case V_HEADING: break;
    }
}

// The default of f's field, as its help prints it.
static void default_text(const TrainConfig *d, const Flag *f, char *buf, size_t len) {
    buf[0] = '\0';
    if (f->at == NO_FIELD) return;
    const char *p = (const char *)d + f->at;
    switch (f->kind) {
    case V_STR: snprintf(buf, len, "%s", *(const char *const *)p ? *(const char *const *)p : ""); break;
    case V_INT: case V_BLOCK: case V_OFFLOAD: case V_SET: snprintf(buf, len, "%d", *(const int *)p); break;
    case V_LONG: snprintf(buf, len, "%ld", *(const long *)p); break;
    case V_I64: snprintf(buf, len, "%lld", (long long)*(const int64_t *)p); break;
    case V_U64: snprintf(buf, len, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    case V_FLOAT: case V_BETA: snprintf(buf, len, "%g", *(const float *)p); break;
    case V_DOUBLE: snprintf(buf, len, "%g", *(const double *)p); break;
    case V_SCHEDULE: snprintf(buf, len, "%s", train_lr_schedule_names[*(const int *)p]); break;
    case V_HELP: case V_HEADING: break;
    }
}

#define AT(field) offsetof(TrainConfig, field)
// A line of the help with no flag (printed as it is), or with text NULL only a new column
// for the rows below it (0: the same column).
#define HEADING(who, column, text) {NULL, NULL, NULL, V_HEADING, NO_FIELD, column, 0, -1, who, 0, text, NULL}
#define STR_(x) #x
#define STR(x) STR_(x)

// In the order of the help. Rows of one flag (its help differs between trainers) read the value
// alike; the parser uses the first.
static const Flag flags[] = {
    HEADING(FOR_ALL, 10, NULL),
    {"-i", NULL, "GLOB", V_STR, AT(train_pattern), 0, 0, -1, FOR_ALL, 0, "train token shards (default %s)", NULL},
    {"-j", NULL, "GLOB", V_STR, AT(val_pattern), 0, 0, -1, FOR_ALL, 0, "validation token shards (default %s)", NULL},
    {"-e", NULL, "MODEL", V_STR, AT(model), 0, 0, -1, FOR_ZERO, 0,
     "descriptor dN[cC][hH][tT] (N layers, C channels = 64N, H heads = C/64,\n"
     "T max sequence 1024; at most d1024, c65536, h4096, t1048576) or an llm.c\n"
     "model file; under -z each rank reads only its shards (default %s)", NULL},
    {"-e", NULL, "MODEL", V_STR, AT(model), 0, 0, -1, FOR_CU, 0,
     "descriptor dN[cC][hH][tT] (N layers, C channels = 64N, H heads = C/64,\n"
     "T max sequence 1024; at most d1024, c65536, h4096, t1048576) or an llm.c\n"
     "model file (default %s)", NULL},
    {"-o", NULL, "DIR", V_STR, AT(out_dir), 0, 0, -1, FOR_ALL, 0,
     "output folder: main.log, checkpoints, the model files model_STEP.bin (one per\n"
     "checkpoint) and model_final.bin (at the end) (default %s); one holding an\n"
     "earlier run's checkpoints takes only -y 1", NULL},
    {"-b", NULL, "N", V_INT, AT(B), 1, 1 << 20, TRAIN_FLAG_B, FOR_ALL, 0, "micro-batch size per rank (default %s)",
     NULL},
    {"-t", NULL, "N", V_INT, AT(T), 1, 1 << 20, -1, FOR_ALL, 0, "sequence length (default %s)", NULL},
    {"-d", NULL, "N", V_I64, AT(total_batch_tokens), -1, 1L << 40, TRAIN_FLAG_TOTAL_BATCH, FOR_ALL, 0,
     "total batch in tokens per step (all ranks): a multiple of B*T*ranks, gradient\n"
     "accumulation covers the rest, at most " STR(TRAIN_MAX_GRAD_ACCUM) " micro-batches per rank (default B*T*ranks)",
     NULL},
    {"-l", NULL, "LR", V_FLOAT, AT(lr), 0, 10, TRAIN_FLAG_LR, FOR_ALL, 0, "peak learning rate (default %s)", NULL},
    {"-u", NULL, "N", V_INT, AT(warmup_steps), 0, 1 << 30, -1, FOR_ALL, 0, "warmup steps (default %s)", NULL},
    {"-k", NULL, "NAME", V_SCHEDULE, AT(lr_schedule), 0, 0, -1, FOR_ALL, 0,
     "learning rate schedule after the warmup, llm.c's: cosine (to -q x peak), linear\n"
     "(to -q x peak), constant (the peak from the first step: no warmup, -u unused),\n"
     "wsd (the peak until 80%% of the steps, then 1 - sqrt decay to -q x peak)\n"
     "(default %s)", NULL},
    {"-q", NULL, "F", V_FLOAT, AT(final_lr_frac), 0, 1, -1, FOR_ALL, 0,
     "final learning rate as a fraction of the peak (default %s)", NULL},
    {"-c", NULL, "WD", V_FLOAT, AT(weight_decay), 0, 10, TRAIN_FLAG_WEIGHT_DECAY, FOR_ALL, 0,
     "AdamW weight decay on 2D tensors (default %s)", NULL},
    {"-x", NULL, "N", V_INT, AT(max_steps), 0, 0, -1, FOR_ALL, 0,
     "optimizer steps, at least 1 (default %s; -1 = one epoch of the train data)", read_steps},
    {"-v", NULL, "N", V_INT, AT(val_every), 0, 1 << 30, -1, FOR_ALL, 0,
     "validation loss every N steps, 0 = never (default %s)", NULL},
    {"-m", NULL, "N", V_INT, AT(val_max_steps), -1, 1 << 30, -1, FOR_ALL, 0,
     "validation batches per evaluation, at least 1; -1 = all (default %s)", NULL},
    {"-s", NULL, "N", V_INT, AT(sample_every), 0, 1 << 30, -1, FOR_ALL, 0,
     "sample text every N steps, 0 = never (default %s)", NULL},
    {"-g", NULL, "N", V_INT, AT(gen_tokens), 0, 1 << 20, -1, FOR_ALL, 0, "tokens to sample (default %s)", NULL},
    {"-n", NULL, "N", V_INT, AT(checkpoint_every), 0, 1 << 30, -1, FOR_ALL, 0,
     "checkpoint every N steps and at the end, 0 = never (default %s)", NULL},
    {"-nk", NULL, "N", V_INT, AT(ckpt_keep), 0, 1 << 30, -1, FOR_ALL, 0,
     "checkpoints kept on disk, the newest; 0 = all (default %s: this one and the previous)", NULL},
    {"-nm", NULL, "N", V_INT, AT(ckpt_major), 0, 1 << 30, -1, FOR_ALL, 0,
     "major checkpoints: one whose step is a multiple of N is never removed by -nk, 0 = none\n(default %s)", NULL},
    {"-sl", NULL, "Z", V_FLOAT, AT(skip_loss_z), 0, 1e9, -1, FOR_ALL, 0,
     "skip an update whose loss is more than Z standard deviations above the mean of the\n"
     "last 128 steps' losses (llm.c's outlier window: no skip in the first 128 steps);\n"
     "0 = off (default %s). The run's end says how many were skipped", NULL},
    {"-sg", NULL, "Z", V_FLOAT, AT(skip_norm_z), 0, 1e9, -1, FOR_ALL, 0, "the same for the gradient norm (default %s)",
     NULL},
    {"-a", NULL, "0|1", V_INT, AT(overfit_batch), 0, 1, -1, FOR_ALL, 0,
     "1: overfit one batch: every step trains on the train data's first batch (all its\n"
     "micro-batches), for debugging (default %s)", NULL},
    {"-h", "hellaswag", "0", V_INT, NO_FIELD, 0, 1, -1, FOR_ALL, 0,
     "accepted: no HellaSwag evaluation (-h 1 is refused: not implemented)", read_hellaswag},
    {"-f", NULL, "0|1", V_INT, NO_FIELD, 0, 1, -1, FOR_ALL, 0,
     "llm.c's TF32 switch: accepted, no effect (no matmul here takes fp32 inputs)", check_only},
    {"-w", NULL, "1", V_INT, NO_FIELD, 0, 1, -1, FOR_ALL, 0,
     "llm.c's fp32 master weights: always kept (-w 0 is refused)", read_master_weights},
    {"-lg", NULL, "N", V_INT, NO_FIELD, -(1L << 30), 1L << 30, -1, FOR_ALL, 0,
     "llm.c's GPU status every N steps: N <= 0 (off) accepted, N > 0 refused", read_gpu_status},
    {"-y", NULL, "1", V_INT, AT(resume), 0, 1, -1, FOR_ALL, 0,
     "resume from the latest checkpoint in the output folder; with none there\n"
     "yet, start fresh (so a restart loop can always pass -y 1)", NULL},
    {"-r", NULL, "N", V_INT, AT(recompute), 0, 2, -1, FOR_CUDA, 0,
     "activation recompute: 0 none, 1 GELU, 2 GELU and LayerNorms (default %s)", read_recompute},
    {"-ge", NULL, "N", V_INT, NO_FIELD, 0, 0, -1, 0, 0, NULL, refuse_gelu_fusion},
    {"-pn", NULL, "N", V_INT, NO_FIELD, 0, 0, -1, 0, 0, NULL, refuse_multinode},
    {"-pr", NULL, "N", V_INT, NO_FIELD, 0, 0, -1, 0, 0, NULL, refuse_multinode},
    {"-pg", NULL, "N", V_INT, NO_FIELD, 0, 0, -1, 0, 0, NULL, refuse_multinode},
    {"-pm", NULL, "N", V_INT, NO_FIELD, 0, 0, -1, 0, 0, NULL, refuse_multinode},
    {"-pi", NULL, "N", V_INT, NO_FIELD, 0, 0, -1, 0, 0, NULL, refuse_multinode},
    {"-ps", NULL, "N", V_INT, NO_FIELD, 0, 0, -1, 0, 0, NULL, refuse_multinode},
    {"-pp", NULL, "N", V_INT, NO_FIELD, 0, 0, -1, 0, 0, NULL, refuse_multinode},
    {"-pf", NULL, "N", V_INT, NO_FIELD, 0, 0, -1, 0, 0, NULL, refuse_multinode},
    HEADING(FOR_ALL, 16, NULL),
    {"--cudnn", NULL, "0|1|2", V_INT, AT(use_cudnn), 0, 2, -1, FOR_CUDA, 0,
     "attention by cuDNN with its deterministic backward (1), cuDNN with its faster atomic backward, whose bits "
     "vary run to run (2), or plain kernels (0) (default %s)", NULL},
    {"--seed", NULL, "N", V_U64, AT(seed), 0, 0, -1, FOR_ALL, 0,
     "seed of init, data order and sampling, 0 to 2^63-1 (default %s)", NULL},
    {"--shuffle", NULL, "0|1", V_INT, AT(shuffle), 0, 1, -1, FOR_ALL, 0,
     "shuffle the train windows each epoch (default %s)", NULL},
    {"--grad-clip", NULL, "F", V_FLOAT, AT(grad_clip), -1, 1e9, TRAIN_FLAG_GRAD_CLIP, FOR_ALL, 0,
     "clip the global gradient norm to F, <= 0 disables (default %s)", NULL},
    {"--beta1", NULL, "F", V_BETA, AT(beta1), 0, 1, TRAIN_FLAG_BETA1, FOR_ALL, 0,
     "AdamW's first-moment decay, in [0, 1) (default %s)", NULL},
    {"--beta2", NULL, "F", V_BETA, AT(beta2), 0, 1, TRAIN_FLAG_BETA2, FOR_ALL, 0,
     "AdamW's second-moment decay, in [0, 1) (default %s)", NULL},
    {"--adam-eps", NULL, "F", V_FLOAT, AT(adam_eps), 1e-30, 1, TRAIN_FLAG_ADAM_EPS, FOR_ALL, 0,
     "AdamW's epsilon, in [1e-30, 1] (default %s)", NULL},
    {"--nan-skip", NULL, NULL, V_SET, AT(nan_skip), 0, 0, -1, FOR_ALL, 0,
     "a step whose loss or gradient norm is NaN or infinite is skipped (its\n"
     "update is not applied) and training goes on; the run's end says how many\n"
     "were skipped. Default: such a step stops the run with a message naming it,\n"
     "and nothing of it is saved", NULL},
    {"--nan-skip-limit", NULL, "N", V_INT, AT(nan_skip_limit), 1, 1 << 30, -1, FOR_ALL, 0,
     "with --nan-skip: the N-th skipped step in a row stops the run as a\n"
     "non-finite step does without --nan-skip (default %s)", read_nan_skip_limit},
    {"--tokenizer", NULL, "F", V_STR, AT(tokenizer_path), 0, 0, -1, FOR_ALL, 0,
     "llm.c tokenizer file for samples (default %s)", NULL},
    {"--threads", NULL, "N", V_INT, AT(threads), 0, 4096, -1, FOR_ALL, 0,
     "OpenMP threads per rank for the host's work (default: cores / ranks on this node)", NULL},
    {"--trace", NULL, "FILE", V_STR, AT(trace_path), 0, 0, -1, FOR_ALL, 0,
     "a timeline per rank, FILE.rankRRRRR.json (Chrome trace: Perfetto, chrome://tracing):\n"
     "what each thread did and waited on (forward and backward of each unit, each\n"
     "gather and reduction, host-stream and NVMe work, the optimizer step, validation,\n"
     "checkpoints){ and a track per GPU stream of what the GPU ran, timed by CUDA events}{}, the last --trace-steps N "
     "steps (default " STR(TRAIN_TRACE_STEPS_DEFAULT) "; 0: as many as fit), also written when\n"
     "the watchdog ends a stuck run; scripts/trace_merge.py joins the ranks' files", NULL},
    {"--trace-steps", NULL, "N", V_INT, AT(trace_steps), 0, 1 << 20, TRAIN_FLAG_TRACE_STEPS, 0, 0, NULL, NULL},
    {"--micro-grads", NULL, "0|1", V_INT, AT(micro_grads), 0, 1, -1, FOR_CPU | FOR_CU, 0,
     "with gradient accumulation: 1 computes each micro-batch's gradient in a\n"
     "buffer of its own (one more gradient-sized buffer) and adds it to the sum,\n"
     "so accumulation N gives the bits of ZeRO on N ranks; 0 accumulates inside\n"
     "the backward's kernels (no buffer; the last bits differ from N ranks)\n"
     "(default %s){}{; refused with -z, where the gradients are the ZeRO plugin's}", read_micro_grads},
    // train_gpt2_zero: the gradients are the plugin's; no flag, a fixed rule per stage
    {"--micro-grads", NULL, "", V_INT, AT(micro_grads), 0, 1, -1, FOR_CU_ZERO, 0,
     "refused here (the gradients are the ZeRO plugin's): with accumulation,\n"
     "-z 2 and 3 add each micro-step's reduced gradient into their shard (the\n"
     "bits of train_gpt2cu --micro-grads 1 at 1 rank), -z 0 and 1 accumulate\n"
     "inside the backward's kernels (those of --micro-grads 0)", read_micro_grads},
    {"--act-checkpoint", NULL, "0|1", V_INT, AT(act_checkpoint), 0, 1, -1, FOR_ALL, 0,
     "activation checkpointing: keep only each transformer block's input\n"
     "and recompute the block's forward just before its backward (the same\n"
     "gradients; activations: the block inputs plus one block's) (default %s)", NULL},
    {"--act-offload", NULL, "0|1{}{|nvme}", V_INT, AT(act_offload), 0, 1, TRAIN_FLAG_ACT_OFFLOAD, FOR_ALL, 0,
     "with --act-checkpoint 1: the block inputs go to {pinned host memory (a copy stream)}{a host buffer of their "
     "own (1)}\nafter each block's forward and come back ahead of its backward{}{;\n"
     "nvme: to a swap file under --nvme-path (they grow with depth: on NVMe\n"
     "they take no memory)} (default %s)", read_act_offload},
    {"--tile-linear", NULL, "K", V_INT, AT(tile_linear), 1, GPT2_MAX_TILES, -1, FOR_ALL, 0,
     "memory-centric tiling: each block's four linears (qkv, attention projection,\n"
     "MLP fc and projection) run as K tiles along their output rows, each tile a\n"
     "parameter unit of its own, so ZeRO stage 3 gathers one tile at a time; K must\n"
     "divide the channels C{ with C/K a multiple of 8}{}. Same model files; a sharded checkpoint resumes\n"
     "only with the same K (default %s)", NULL},
    {"--tile-vocab", NULL, "KV", V_INT, AT(tile_vocab), 1, GPT2_MAX_TILES, -1, FOR_ALL, 0,
     "the same for the vocabulary: the token embedding and the classifier run as\n"
     "KV tiles of wte's rows, each tile's embedding and classifier parts units of\n"
     "their own, so ZeRO stage 3 gathers Vp/KV rows of wte at a time instead of all\n"
     "of them; KV must divide the padded vocabulary Vp{ with Vp/KV a multiple of 8}{}.\n"
     "Same model files; a sharded checkpoint resumes only with the same KV\n"
     "(default %s)", NULL},
    HEADING(FOR_ALL, 10,
            "  llm.c's -r (CPU), -ge, -pn -pr -pg -pm/-pi -ps -pp/-pf are refused, each saying what to use"),
    {"-h", NULL, NULL, V_HELP, NO_FIELD, 0, 0, -1, FOR_CU, 0, "this help", NULL},
    HEADING(FOR_CU, 0, "\nOne GPU, unsharded. Data parallel training with ZeRO: train_gpt2_zero (mpirun -np N)."),
    HEADING(FOR_ZERO, 20, "\nZeRO (data parallel over MPI ranks; launch with mpirun -np N):"),
    {"-z", NULL, "STAGE", V_INT, AT(zero_stage), 0, 3, TRAIN_FLAG_ZERO_STAGE, FOR_ZERO, 1,
     "0 data parallel, 1 optimizer states, 2 + gradients, 3 + parameters\n"
     "sharded (default: {0}{no plugin, a single unsharded rank; several ranks need -z})", NULL},
    {"--zero-bucket", NULL, "N", V_LONG, AT(zero_bucket), 0, 1L << 40, TRAIN_FLAG_ZERO_BUCKET, FOR_ZERO, 1,
     "gradient reduction bucket, elements (default: from the model, at most 4M,\n"
     "so that stage 2 holds less gradient memory than stage 1)", NULL},
    {"--zero-prefetch", NULL, "N", V_LONG, AT(zero_prefetch), 0, 1L << 40, TRAIN_FLAG_ZERO_PREFETCH, FOR_ZERO, 1,
     "stage 3: gather up to N elements ahead (default: one typical unit, so that\n"
     "stage 3 holds less parameter memory than stage 2)", NULL},
    {"--zero-max-live", NULL, "N", V_LONG, AT(zero_max_live), 0, 1L << 40, TRAIN_FLAG_ZERO_MAX_LIVE, FOR_ZERO, 1,
     "stage 3: most gathered elements alive, 0 = largest unit + prefetch", NULL},
    {"--zero-persist", NULL, "N", V_LONG, AT(zero_persist), 0, 1L << 40, TRAIN_FLAG_ZERO_PERSIST, FOR_ZERO, 1,
     "stage 3: tensors of at most N elements stay gathered (default 65536; 0 with\n"
     "--offload-param nvme: small tensors are read with their unit, not kept)", NULL},
    {"--node-size", NULL, "N", V_INT, AT(node_size), 0, 1 << 20, TRAIN_FLAG_NODE_SIZE, FOR_ZERO, 1,
     "ranks per logical node, for intra/inter-node figures (default: real nodes)", NULL},
    {"--zero-timeout", NULL, "S", V_DOUBLE, AT(zero_timeout), 0.001, 1e9, TRAIN_FLAG_ZERO_TIMEOUT, FOR_ZERO, 1,
     "a collective stuck this many seconds ends the run (default %s)", NULL},
    {"--dry-run", NULL, NULL, V_SET, AT(dry_run), 0, 0, -1, FOR_ZERO, 1,
     "{with -z: predict per-rank memory and bytes sent per step for --world\n"
     "ranks, write OUT/zero_report.json, and exit without training}"
     "{predict the memory of the run and exit without training: with -z per\n"
     "rank for --world ranks, and the bytes sent per step (OUT/zero_report.json);\n"
     "without -z the unsharded run's (OUT/memory_report.json). Counts the\n"
     "process's peak: model states, buffers, activations and its runtime}", NULL},
    {"--world", NULL, "N", V_INT, AT(dry_run_world), 1, 1 << 20, TRAIN_FLAG_DRY_RUN_WORLD, FOR_ZERO, 1,
     "ranks for --dry-run (default %s)", NULL},
    {"--gpu-mem", NULL, "SIZE", V_INT, NO_FIELD, 0, 0, -1, FOR_ZERO, 1,
     "with --dry-run: memory a rank has for the model ({GPU}{host RAM}): prints\n"
     "per rank whether its total ({model states, buffers, activations}{the process's predicted peak}) fits,\n"
     "and exits with status 2 when one does not, or when the swap files do not\n"
     "fit the free space under --nvme-path. SIZE: 80G = 80GiB = 80 x 2^30\n"
     "bytes, 80GB = 80 x 10^9; K M T alike, fractions allowed (79.5G), B = bytes", read_gpu_mem},
    {"--host-mem", NULL, "SIZE", V_INT, NO_FIELD, 0, 0, -1, FOR_CU_ZERO, 1,
     "with --dry-run: host memory a rank has for offload's host tier, the pinned\n"
     "buffers and host activations (the process's own runtime is not counted):\n"
     "prints per rank whether that fits, and exits with status 2 when one does\n"
     "not. With --gpu-mem and --offload-optimizer cpu, when either does not fit,\n"
     "prints the largest --offload-optimizer-ratio that fits both. SIZE as --gpu-mem", read_host_mem},
    {"--offload-optimizer", NULL, "none|cpu|nvme", V_OFFLOAD, AT(offload_optimizer), 0, 0, TRAIN_FLAG_OFFLOAD_OPTIMIZER,
     FOR_ZERO, 1,
     "stages 1-3 (ZeRO-Offload, ZeRO-Infinity): the fp32 master, AdamW m and v\n"
     "and the reduced gradient of a rank's shard live in {pinned host}{a separate host} memory (cpu)\n"
     "or in a swap file under --nvme-path (nvme), and AdamW runs on the\n"
     "CPU; bit-identical to none (default none)", NULL},
    {"--offload-optimizer-ratio", NULL, "R", V_FLOAT, AT(offload_ratio), 0, 1, TRAIN_FLAG_OFFLOAD_RATIO, FOR_ZERO, 1,
     "with --offload-optimizer cpu: offload the optimizer states of a fraction R\n"
     "of the parameters (0 < R <= 1); the model's first tensors, about 1 - R\n"
     "of it, keep theirs on the device and are updated there. Bit-identical to\n"
     "R = 1 and to none (default 1)", NULL},
    {"--dpu", NULL, "N", V_INT, AT(dpu), 0, 1 << 30, -1, FOR_ZERO, 1,
     "{with --offload-optimizer cpu: from optimizer step N on, step t's AdamW\n"
     "runs on the CPU beside step t+1's forward and backward, which train on\n"
     "the parameters of step t-1 (ZeRO-Offload's one-step delayed parameter\n"
     "update; its paper starts at step 40). It changes the math: the gradient\n"
     "is one step stale. A checkpoint and the run's end land the update in\n"
     "flight, so a resume is bit-exact (default 0: off)}"
     "{with -z and --offload-optimizer cpu: from optimizer step N on, step t's\n"
     "AdamW runs on the CPU beside step t+1's forward and backward, which\n"
     "train on the parameters of step t-1 (ZeRO-Offload's one-step delayed\n"
     "parameter update; its paper starts at step 40). It changes the math: the\n"
     "gradient is one step stale. Without -z the same delay, unsharded: the\n"
     "reference a ZeRO run with it (the whole optimizer offloaded) matches bit\n"
     "for bit. A checkpoint and the run's end land the update in flight, so a\n"
     "resume is bit-exact (default 0: off)}", NULL},
    {"--offload-param", NULL, "none|cpu|nvme", V_OFFLOAD, AT(offload_param), 0, 0, TRAIN_FLAG_OFFLOAD_PARAM,
     FOR_ZERO, 1,
     "stage 3: the working-parameter shard the gathers read lives in host\n"
     "memory (cpu) or in the swap file (nvme), brought up ahead of use along\n"
     "the prefetch order (default none)", NULL},
    {"--nvme-path", NULL, "DIR", V_STR, AT(nvme_path), 0, 0, TRAIN_FLAG_NVME_PATH, FOR_ZERO, 1,
     "folder for the NVMe swap files (one per rank, O_DIRECT, unnamed, else\n"
     "unlinked at once: the space is freed however the run ends)", NULL},
    HEADING(FOR_ZERO, 0, "ZeRO++ (each on its own; --node-size N makes N consecutive ranks a logical node):"),
    {"--qwz", NULL, NULL, V_SET, AT(qwz), 0, 0, TRAIN_FLAG_QWZ, FOR_ZERO, 1,
     "stage 3: forward all-gathers move int8 blocks of the weights (one fp32\n"
     "scale per block), unpacked into the working buffer; backward gathers\n"
     "move the weights as they are (qwZ)", NULL},
    {"--hpz", NULL, "N", V_INT, AT(hpz), 0, 1 << 20, TRAIN_FLAG_HPZ, FOR_ZERO, 1,
     "stage 3: after a unit's forward gather each rank keeps 1/N of it, so that\n"
     "its backward gather stays inside groups of N consecutive ranks (N dividing\n"
     "the node size: no inter-node traffic; a wider group is warned of); costs\n"
     "psi/N working values per rank (hpZ; 0 or 1: off)", NULL},
    {"--qgz", NULL, NULL, V_SET, AT(qgz), 0, 0, TRAIN_FLAG_QGZ, FOR_ZERO, 1,
     "gradients reduced in two hops, inside the node then across nodes, as int4\n"
     "blocks, summed in fp32 in a fixed order (qgZ)", NULL},
    {"--hier-reduce", NULL, NULL, V_SET, AT(hier_reduce), 0, 0, -1, FOR_ZERO, 1,
     "the same two hops without quantization: the bytes a rank sends to\n"
     "other nodes shrink by the node size against the flat all-to-all", NULL},
    {"--fast-reduce", NULL, NULL, V_SET, AT(fast_reduce), 0, 0, TRAIN_FLAG_FAST_REDUCE, FOR_ZERO, 1,
     "gradients rounded to bf16 and summed by the library's own reduce-scatter\n"
     "(NCCL; MPI on the CPU), as llm.c does: half the bytes of the default and\n"
     "the library's fastest path, but the sum's order is the library's, so the\n"
     "bits differ with the rank count (the default sums in rank order in fp32)", NULL},
    {"--qwz-block", NULL, "N", V_BLOCK, AT(qwz_block), 0, 0, -1, FOR_ZERO, 1,
     "values per int8 block (even; default " STR(TRAIN_QUANT_BLOCK_DEFAULT) ")", NULL},
    {"--qgz-block", NULL, "N", V_BLOCK, AT(qgz_block), 0, 0, -1, FOR_ZERO, 1,
     "values per int4 block (even; default " STR(TRAIN_QGZ_BLOCK_DEFAULT) ")", NULL},
    {"--deepspeed", NULL, "FILE", V_STR, AT(deepspeed), 0, 0, TRAIN_FLAG_DEEPSPEED, FOR_ZERO, 1,
     "DeepSpeed's ds_config.json: its keys (listed at the end) set what the\n"
     "flags set (a flag given too must agree; \"auto\" keeps the flag's value\n"
     "or the default)", NULL},
    HEADING(FOR_ZERO, 10,
            "  Under -z, -n writes sharded checkpoints (OUT/zero_STEP/, each with OUT/model_STEP.bin), -y 1\n"
            "  resumes from them (any world size or stage), OUT/zero_report.json holds the measured memory\n"
            "  and traffic."),
    {"-h", NULL, NULL, V_HELP, NO_FIELD, 0, 0, -1, FOR_ZERO, 0, "this help", NULL},
};
#define NUM_FLAGS (sizeof(flags) / sizeof(flags[0]))

// Resolves help's "{A}{B}" alternatives into out: A in the CUDA trainers' help, B in the CPU's.
static void pick(const char *help, int cuda, char *out, size_t len) {
    size_t n = 0;
    for (const char *p = help; *p && n + 1 < len; p++) {
        if (*p != '{') { out[n++] = *p; continue; }
        const char *a = p + 1, *a_end = strchr(a, '}'), *b = a_end + 2, *b_end = strchr(b, '}');
        const char *from = cuda ? a : b, *to = cuda ? a_end : b_end;
        while (from < to && n + 1 < len) out[n++] = *from++;
        p = b_end;
    }
    out[n] = '\0';
}

// One row of the help: the flag and its value, then the help from the column on.
static void print_row(const Flag *f, const TrainConfig *d, int cuda, int column) {
    char text[2048], line[2048], value[64], def[256];
    pick(f->help, cuda, text, sizeof(text));
    if (f->kind == V_HEADING) {
        printf("%s\n", text);
        return;
    }
    default_text(d, f, def, sizeof(def));
    snprintf(line, sizeof(line), text, def);
    pick(f->value ? f->value : "", cuda, value, sizeof(value));
    char syn[96];
    snprintf(syn, sizeof(syn), "%s%s%s", f->flag, f->value ? " " : "", value);
    int n = (int)strlen(syn);
    if (n > column + 8) printf("  %s\n%*s", syn, column + 2, "");   // a long synopsis: the help below it
    else if (n + 2 <= column) printf("  %-*s", column, syn);
    else printf("  %s  ", syn);
    for (const char *p = line; *p; p++) {
        putchar(*p);
        if (*p == '\n') printf("%*s", column + 2, "");
    }
    putchar('\n');
}

void train_config_usage(const char *prog, const char *flavour) {
    TrainConfig d;
    int cuda = flavour_cuda(flavour);
    defaults(&d, cuda);
    printf("usage: %s [options]\n\n", prog);
    printf("Trains GPT-2 (%s). With no options it trains on the bundled corpus.\n\n",
           cuda ? "CUDA, bf16 mixed precision" : "CPU, fp32 reference");
    unsigned me = flavour_bit(flavour);
    int column = 0;
    for (size_t i = 0; i < NUM_FLAGS; i++) {
        const Flag *f = &flags[i];
        if (!(f->who & me)) continue;
        if (f->kind == V_HEADING && f->lo > 0) column = (int)f->lo;
        if (f->help) print_row(f, &d, cuda, column);
    }
}

int train_config_has_zero(const char *flavour) { return flavour_zero(flavour); }

// getopt's long name of a row ("seed"; llm.c's two-letter "nk", which the pre-pass makes
// long; "hellaswag"), or NULL for a single letter.
static const char *long_name(const Flag *f) {
    if (f->name) return f->name;
    if (f->flag[1] == '-') return f->flag + 2;
    return f->flag[2] ? f->flag + 1 : NULL;
}

// getopt's code of row i: its letter, or past the letters the index of the first row of its
// long name.
enum { LONG_CODE = 1000 };
static int code_of(size_t i) {
    const char *name = long_name(&flags[i]);
    if (!name) return flags[i].flag[1];
    for (size_t k = 0;; k++) {
        const char *other = flags[k].flag ? long_name(&flags[k]) : NULL;
        if (other && strcmp(other, name) == 0) return LONG_CODE + (int)k;
    }
}

// The row getopt's code names, or NULL (an unknown option, a missing value).
static const Flag *row_of(int code) {
    if (code >= LONG_CODE) return code - LONG_CODE < (int)NUM_FLAGS ? &flags[code - LONG_CODE] : NULL;
    for (size_t i = 0; i < NUM_FLAGS; i++)
        if (flags[i].flag && !long_name(&flags[i]) && flags[i].flag[1] == code) return &flags[i];
    return NULL;
}

// getopt's option string and long options, from the rows (each name once).
static void getopt_tables(char *shorts, struct option *longs) {
    size_t ns = 0, nl = 0;
    shorts[ns++] = '+';   // stop at the first non-option (an error), so argv[at] is the element parsed
    shorts[ns++] = ':';
    for (size_t i = 0; i < NUM_FLAGS; i++) {
        const Flag *f = &flags[i];
        if (!f->flag || row_of(code_of(i)) != f) continue;   // a heading, or a name seen before
        const char *name = long_name(f);
        if (name) {
            longs[nl++] = (struct option){name, f->value ? required_argument : no_argument, 0, code_of(i)};
        } else {
            shorts[ns++] = f->flag[1];
            if (f->value) shorts[ns++] = ':';
        }
    }
    shorts[ns] = '\0';
    longs[nl++] = (struct option){"help", no_argument, 0, 'h'};
    longs[nl] = (struct option){0, 0, 0, 0};
}

// Whether s is an optional '-' and digits: llm.c's -h takes such a value, our -h none.
static int is_integer(const char *s) {
    if (*s == '-') s++;
    if (!*s) return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return 0;
    return 1;
}

// A copy of argv where llm.c's two-letter flags and "-h N" read as long options, element
// for element (so that messages can quote what the user typed). Option values are skipped,
// so a value that looks like a flag stays a value.
static char **llmc_flags(int argc, char **argv, const char *shorts, const struct option *longs) {
    static char names[NUM_FLAGS][8];
    char **out = (char **)malloc((size_t)(argc + 1) * sizeof(char *));
    if (!out) {
        fprintf(stderr, "error: out of memory parsing the command line\n");
        exit(1);
    }
    for (int i = 0; i <= argc; i++) out[i] = argv[i];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0 || a[0] != '-' || a[1] == '\0') break;   // getopt stops there too ('+')
        int mapped = 0;
        for (size_t k = 0; k < NUM_FLAGS; k++)
            if (flags[k].flag && flags[k].flag[1] != '-' && flags[k].flag[2] && strcmp(a, flags[k].flag) == 0) {
                snprintf(names[k], sizeof names[k], "-%s", a);   // "--nk"
                out[i] = names[k];
                mapped = 1;
            }
        if (mapped) { i++; continue; }   // each takes a value
        if (strcmp(a, "-h") == 0 && i + 1 < argc && is_integer(argv[i + 1])) {
            out[i] = (char *)"--hellaswag";
            i++;
            continue;
        }
        if (a[1] == '-') {   // a long option: skip its separate value
            const char *eq = strchr(a + 2, '=');
            size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            // as getopt_long reads it: the name exactly, else a prefix of one or more names
            // ("--shuf" is --shuffle) that agree on taking a value
            int exact = -1, takes = -1;
            for (const struct option *o = longs; o->name; o++) {
                if (strncmp(o->name, a + 2, len) != 0) continue;
                int req = o->has_arg == required_argument;
                if (strlen(o->name) == len) { exact = req; break; }
                takes = takes == -1 || takes == req ? req : -2;
            }
            if ((exact == -1 ? takes : exact) == 1 && !eq) i++;
            continue;
        }
        const char *p = strchr(shorts, a[1]);   // "-b 4" (not "-b4"): skip the 4
        if (p && a[1] != ':' && p[1] == ':' && a[2] == '\0') i++;
    }
    return out;
}

// Why getopt refused a long option as typed: a value given to a flag that takes none
// ("--nan-skip=3"), a prefix of several flags ("--tile"), or no such flag.
static void refuse_long(const char *typed, const struct option *longs) {
    const char *name = typed + (strncmp(typed, "--", 2) == 0 ? 2 : 1), *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    char matches[256] = "";
    int n = 0;
    for (const struct option *o = longs; o->name; o++) {
        int again = 0;   // a flag of two rows (one per trainer) is one flag
        for (const struct option *q = longs; q < o && !again; q++) again = strcmp(q->name, o->name) == 0;
        if (again || strncmp(o->name, name, len) != 0) continue;
        if (strlen(o->name) == len && eq && o->has_arg == no_argument) {
            fprintf(stderr, "error: option '--%s' takes no value, got '%s' (see -h)\n", o->name, typed);
            return;
        }
        size_t at = strlen(matches);
        snprintf(matches + at, sizeof matches - at, "%s--%s", n++ ? ", " : "", o->name);
    }
    if (n > 1) fprintf(stderr, "error: option '%s' is ambiguous: %s (see -h)\n", typed, matches);
    else fprintf(stderr, "error: unknown option '%s' (see -h)\n", typed);
}

int train_config_parse_flags(TrainConfig *c, int argc, char **argv, const char *flavour) {
    defaults(c, flavour_cuda(flavour));
    static char shorts[2 * NUM_FLAGS + 3];
    static struct option longs[NUM_FLAGS + 2];
    getopt_tables(shorts, longs);
    Parse p = {c, NULL, NULL, flavour, argv[0], 0};
    char **args = llmc_flags(argc, argv, shorts, longs);
    opterr = 0;
    optind = 1;
    int opt;
    for (int at = optind; (opt = getopt_long(argc, args, shorts, longs, NULL)) != -1; at = optind) {
        const char *typed = argv[at < argc ? at : argc - 1];   // the flag as the user typed it
        const Flag *f = opt == ':' ? NULL : row_of(opt);
        if (opt == ':') {
            fprintf(stderr, "error: option '%s' needs a value (see -h)\n", typed);
            exit(1);
        }
        if (!f) {
            if (optopt > 0 && optopt < 256 && strlen(typed) > 2 && typed[1] != '-')   // "-Q7", "-bq": name the letter
                fprintf(stderr, "error: unknown option '-%c' in '%s' (see -h)\n", optopt, typed);
            else
                refuse_long(typed, longs);
            exit(1);
        }
        if (f->zero && !flavour_zero(flavour)) {
            fprintf(stderr, "error: %s is a ZeRO option, and %s trains one unsharded GPU: run train_gpt2_zero for "
                    "ZeRO (see -h)\n", f->flag, argv[0]);
            exit(1);
        }
        if (f->given >= 0) c->given |= TRAIN_FLAG_BIT(f->given);
        if (f->kind == V_HELP) {
            free(args);
            return 1;
        }
        p.f = f, p.arg = optarg;
        if (f->parse) f->parse(&p);
        else store_value(c, f, optarg);
    }
    free(args);
    if (optind < argc) {
        fprintf(stderr, "error: unexpected argument '%s' (see -h)\n", argv[optind]);
        exit(1);
    }
    if (p.nan_skip_limit_given && !c->nan_skip) {
        fprintf(stderr, "error: --nan-skip-limit %d limits --nan-skip's skipped steps: give --nan-skip too (without "
                "it the first non-finite step stops the run)\n", c->nan_skip_limit);
        exit(1);
    }
    return 0;
}

void train_config_check(TrainConfig *c, const char *flavour) {
    char launcher[96];
    if (c->dry_run && launch_env_ranks(launcher, sizeof launcher) != 1) {
        fprintf(stderr, "error: --dry-run plays every rank in one process (--world N): start it once, not as one of "
                "several ranks (%s)\n", launcher);
        exit(1);
    }
    if (c->zero_stage < 0 && strcmp(flavour, "cuda-zero") == 0) c->zero_stage = 0;   // train_gpt2_zero: -z 0
    if (c->deepspeed && c->zero_stage < 0 && !flavour_cuda(flavour)) {
        fprintf(stderr, "error: --deepspeed configures a ZeRO run: give -z STAGE or zero_optimization.stage in '%s'\n",
                c->deepspeed);
        exit(1);
    }
    if (c->zero_stage >= 0 && c->micro_grads_given) {
        fprintf(stderr, "error: --micro-grads is not %s: its gradients are the ZeRO plugin's; with "
                "accumulation -z 2 and 3 add each micro-step's reduced gradient into their shard (the rule of "
                "--micro-grads 1), -z 0 and 1 accumulate inside the backward's kernels (as --micro-grads 0)\n",
                flavour_cuda_zero(flavour) ? "train_gpt2_zero's" : "a ZeRO run's (-z)");
        exit(1);
    }
    if (c->act_offload == TRAIN_ACT_OFFLOAD_NVME && flavour_cuda(flavour)) {
        fprintf(stderr, "error: --act-offload nvme is the CPU trainer's: the CUDA trainers keep the block inputs in "
                "pinned host memory (--act-offload 1)\n");
        exit(1);
    }
    if (c->act_offload && !c->act_checkpoint) {
        fprintf(stderr, "error: --act-offload 1 moves the block inputs that --act-checkpoint 1 keeps: give "
                "--act-checkpoint 1 too\n");
        exit(1);
    }
    if ((c->gpu_mem || c->host_mem) && !c->dry_run) {
        fprintf(stderr, "error: %s checks a prediction: give --dry-run (and -z STAGE, --world N)\n",
                c->gpu_mem ? "--gpu-mem" : "--host-mem");
        exit(1);
    }
    if (c->host_mem && !flavour_cuda(flavour)) {
        fprintf(stderr, "error: --host-mem is for train_gpt2_zero: here --gpu-mem counts the whole process (the CPU "
                "trainer's device is host memory)\n");
        exit(1);
    }
    if (c->dry_run && c->zero_stage < 0 && flavour_cuda(flavour)) {
        fprintf(stderr, "error: --dry-run predicts a ZeRO configuration: give -z STAGE\n");
        exit(1);
    }
    if (c->dry_run && c->zero_stage < 0 && c->dry_run_world != 1) {
        fprintf(stderr, "error: --dry-run without -z predicts the unsharded trainer, one process: --world %d needs "
                "-z STAGE\n", c->dry_run_world);
        exit(1);
    }
    // ZeRO's knobs on a run without the plugin would do nothing: refused (a DeepSpeed file may
    // name them idly, as DeepSpeed allows; stage 3's knobs at a lower stage are taken, as
    // DeepSpeed takes them, so that one set of flags serves every stage)
    const unsigned zero_knobs = TRAIN_FLAG_BIT(TRAIN_FLAG_ZERO_PREFETCH) | TRAIN_FLAG_BIT(TRAIN_FLAG_ZERO_MAX_LIVE) |
                                TRAIN_FLAG_BIT(TRAIN_FLAG_ZERO_PERSIST) | TRAIN_FLAG_BIT(TRAIN_FLAG_ZERO_BUCKET) |
                                TRAIN_FLAG_BIT(TRAIN_FLAG_NODE_SIZE) | TRAIN_FLAG_BIT(TRAIN_FLAG_ZERO_TIMEOUT);
    if (c->zero_stage < 0 && (c->given & zero_knobs)) {
        fprintf(stderr, "error: --zero-bucket, --zero-prefetch, --zero-max-live, --zero-persist, --node-size and "
                "--zero-timeout tune ZeRO: give -z STAGE\n");
        exit(1);
    }
    if ((c->given & TRAIN_FLAG_BIT(TRAIN_FLAG_DRY_RUN_WORLD)) && !c->dry_run) {
        fprintf(stderr, "error: --world %d sets the ranks --dry-run predicts; a run's ranks are mpirun's -np\n",
                c->dry_run_world);
        exit(1);
    }
    if ((c->qwz_block && !c->qwz) || (c->qgz_block && !c->qgz)) {
        fprintf(stderr, "error: %s sets the block of %s: give %s too\n", c->qwz_block && !c->qwz ? "--qwz-block" :
                "--qgz-block", c->qwz_block && !c->qwz ? "--qwz" : "--qgz", c->qwz_block && !c->qwz ? "--qwz" : "--qgz");
        exit(1);
    }
    if ((c->given & TRAIN_FLAG_BIT(TRAIN_FLAG_TRACE_STEPS)) && !c->trace_path) {
        fprintf(stderr, "error: --trace-steps %d sets how much --trace keeps: give --trace FILE too\n", c->trace_steps);
        exit(1);
    }
    if (c->val_every > 0 && c->val_max_steps == 0) {
        fprintf(stderr, "error: -m 0 evaluates no validation batch: give -v 0 to turn validation off (-m -1: all "
                "batches)\n");
        exit(1);
    }
    if (c->use_cudnn != 1 && !flavour_cuda(flavour)) {
        fprintf(stderr, "error: --cudnn %d is the CUDA trainers' (their attention kernels); the CPU trainer's "
                "attention is its own\n", c->use_cudnn);
        exit(1);
    }
    // ZeRO++'s switches (the plugin checks them too; here they fail before any work)
    if ((c->qwz || c->hpz > 1 || c->qgz || c->hier_reduce) && c->zero_stage < 0) {
        fprintf(stderr, "error: ZeRO++ (--qwz, --hpz, --qgz, --hier-reduce) is part of ZeRO: give -z STAGE\n");
        exit(1);
    }
    if (c->fast_reduce && c->zero_stage < 0) {
        fprintf(stderr, "error: --fast-reduce chooses how ZeRO reduces gradients: give -z STAGE\n");
        exit(1);
    }
    if (c->qwz && c->zero_stage != 3) {
        fprintf(stderr, "error: --qwz needs -z 3 (below it parameters are not gathered before each use)\n");
        exit(1);
    }
    if (c->hpz > 1 && c->zero_stage != 3) {
        fprintf(stderr, "error: --hpz %d needs -z 3 (below it parameters are not gathered before each use)\n", c->hpz);
        exit(1);
    }
    // offload's combinations (the plugin checks them too; here they fail before any work)
    if ((c->offload_optimizer || c->offload_param) && c->zero_stage < 0) {
        fprintf(stderr, "error: offload (--offload-optimizer, --offload-param) is part of ZeRO: give -z STAGE\n");
        exit(1);
    }
    if (c->offload_optimizer && c->zero_stage == 0) {
        fprintf(stderr, "error: --offload-optimizer %s needs -z 1, 2 or 3 (stage 0 keeps every optimizer state on "
                "every rank)\n", train_offload_names[c->offload_optimizer]);
        exit(1);
    }
    if (c->offload_ratio < 1.0f) {   // a partial offload
        if (c->offload_ratio <= 0.0f) {
            fprintf(stderr, "error: --offload-optimizer-ratio %g offloads nothing: leave out --offload-optimizer instead\n",
                    (double)c->offload_ratio);
            exit(1);
        }
        if (c->offload_optimizer != TRAIN_OFFLOAD_CPU) {
            fprintf(stderr, "error: --offload-optimizer-ratio %g keeps part of the optimizer states in host memory: it needs "
                    "--offload-optimizer cpu (got %s)\n", (double)c->offload_ratio, train_offload_names[c->offload_optimizer]);
            exit(1);
        }
        if (c->offload_param) {
            fprintf(stderr, "error: --offload-optimizer-ratio %g with --offload-param %s is not supported (the tensors "
                    "updated on the device keep their parameters there)\n", (double)c->offload_ratio,
                    train_offload_names[c->offload_param]);
            exit(1);
        }
    }
    if (c->offload_param && c->zero_stage != 3) {
        fprintf(stderr, "error: --offload-param %s needs -z 3 (stages 0-2 keep whole parameters on every rank)\n",
                train_offload_names[c->offload_param]);
        exit(1);
    }
    if (c->dpu > 0 && c->zero_stage >= 0 && c->offload_optimizer != TRAIN_OFFLOAD_CPU) {
        fprintf(stderr, "error: --dpu %d delays the update the CPU's optimizer makes in host memory: with -z it needs "
                "--offload-optimizer cpu (got %s)%s\n", c->dpu, train_offload_names[c->offload_optimizer],
                flavour_cuda(flavour) ? "" : "; without -z the CPU trainer runs the same delay unsharded");
        exit(1);
    }
    if (c->dpu > 0 && c->offload_param) {
        fprintf(stderr, "error: --dpu %d with --offload-param %s is not supported (the delayed update's parameters land "
                "on the device)\n", c->dpu, train_offload_names[c->offload_param]);
        exit(1);
    }
    int nvme = c->offload_optimizer == TRAIN_OFFLOAD_NVME || c->offload_param == TRAIN_OFFLOAD_NVME ||
               c->act_offload == TRAIN_ACT_OFFLOAD_NVME;
    if (nvme && (!c->nvme_path || !*c->nvme_path)) {
        fprintf(stderr, "error: offload to nvme needs --nvme-path DIR (a folder on a fast local disk)\n");
        exit(1);
    }
    if (!nvme && (c->given & TRAIN_FLAG_BIT(TRAIN_FLAG_NVME_PATH))) {   // a config file may name one idly
        fprintf(stderr, "error: --nvme-path is for --offload-optimizer nvme, --offload-param nvme or --act-offload nvme\n");
        exit(1);
    }
}

void train_config_print(const TrainConfig *c, int grad_accum, int world) {
    printf("+----------------------+------------------------------------------+\n");
    printf("| %-20s | %-40s |\n", "train data", c->train_pattern);
    printf("| %-20s | %-40s |\n", "val data", c->val_pattern);
    printf("| %-20s | %-40s |\n", "model", c->model);
    printf("| %-20s | %-40s |\n", "output", c->out_dir);
    printf("| %-20s | %-40d |\n", "micro-batch B", c->B);
    printf("| %-20s | %-40d |\n", "sequence T", c->T);
    printf("| %-20s | %-40d |\n", "ranks", world);
    printf("| %-20s | %-40d |\n", "grad accumulation", grad_accum);
    // resolve_grad_accum made it B*T*world*grad_accum, without overflow
    printf("| %-20s | %-40lld |\n", "tokens per step", (long long)c->total_batch_tokens);
    printf("| %-20s | %-40g |\n", "learning rate", c->lr);
    char adamw[64];
    snprintf(adamw, sizeof(adamw), "%g, %g, %g", c->beta1, c->beta2, c->adam_eps);
    printf("| %-20s | %-40s |\n", "AdamW betas, eps", adamw);
    printf("| %-20s | %-40d |\n", "warmup steps", c->warmup_steps);
    char sched[64];
    snprintf(sched, sizeof sched, "%s to %g x peak", train_lr_schedule_names[c->lr_schedule], c->final_lr_frac);
    printf("| %-20s | %-40s |\n", "lr schedule", c->lr_schedule == TRAIN_LR_CONSTANT ? "constant" : sched);
    if (c->skip_loss_z > 0 || c->skip_norm_z > 0) {
        char z[64];
        snprintf(z, sizeof z, "loss z > %g, norm z > %g (0: off)", c->skip_loss_z, c->skip_norm_z);
        printf("| %-20s | %-40s |\n", "skip updates", z);
    }
    if (c->overfit_batch) printf("| %-20s | %-40s |\n", "overfit one batch", "yes (-a 1)");
    printf("| %-20s | %-40d |\n", "max steps", c->max_steps);
    printf("| %-20s | %-40llu |\n", "seed", (unsigned long long)c->seed);
    if (c->act_checkpoint)
        printf("| %-20s | %-40s |\n", "activations",
               c->act_offload == TRAIN_ACT_OFFLOAD_NVME ? "checkpointed, offloaded to nvme"
               : c->act_offload ? "checkpointed, offloaded to host" : "checkpointed");
    if (c->tile_linear > 1) printf("| %-20s | %-40d |\n", "linear tiles", c->tile_linear);
    if (c->tile_vocab > 1) printf("| %-20s | %-40d |\n", "vocabulary tiles", c->tile_vocab);
    if (c->zero_stage >= 0) printf("| %-20s | %-40d |\n", "ZeRO stage", c->zero_stage);
    if (c->offload_optimizer) printf("| %-20s | %-40s |\n", "offload optimizer", train_offload_names[c->offload_optimizer]);
    if (c->offload_ratio < 1.0f) printf("| %-20s | %-40.3g |\n", "offload ratio", (double)c->offload_ratio);
    if (c->dpu > 0) {
        char from[64];
        snprintf(from, sizeof from, "one step delayed from step %d", c->dpu);
        printf("| %-20s | %-40s |\n", "parameter update", from);
    }
    if (c->offload_param) printf("| %-20s | %-40s |\n", "offload parameters", train_offload_names[c->offload_param]);
    if (c->nvme_path) printf("| %-20s | %-40s |\n", "NVMe path", c->nvme_path);
    if (c->qwz || c->hpz > 1 || c->qgz || c->hier_reduce) {
        char pp[64];
        snprintf(pp, sizeof pp, "%s%s hpZ %d, %s", c->qwz ? "qwZ" : "", c->qwz ? "," : "", c->hpz > 1 ? c->hpz : 1,
                 c->qgz ? "qgZ" : c->hier_reduce ? "2-hop gradients" : "flat gradients");
        printf("| %-20s | %-40s |\n", "ZeRO++", pp);
    }
    if (c->fast_reduce) printf("| %-20s | %-40s |\n", "gradient reduction", "bf16, the library's reduce-scatter");
    if (c->deepspeed) printf("| %-20s | %-40s |\n", "DeepSpeed config", c->deepspeed);
    printf("+----------------------+------------------------------------------+\n");
}
