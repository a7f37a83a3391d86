// train_config.c: command-line parsing with getopt_long; every value is range-checked.
#include "train_config.h"

#include <errno.h>
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

// Long options without a single-letter form.
enum { OPT_SEED = 1000, OPT_SHUFFLE, OPT_CLIP, OPT_TOKENIZER, OPT_THREADS, OPT_ZBUCKET,
       OPT_ZPREFETCH, OPT_ZLIVE, OPT_ZPERSIST, OPT_NODE, OPT_ZTIMEOUT, OPT_DRYRUN, OPT_WORLD, OPT_NANSKIP,
       OPT_GPUMEM, OPT_BETA1, OPT_BETA2, OPT_ADAM_EPS, OPT_DEEPSPEED, OPT_OFFLOAD_OPT, OPT_OFFLOAD_PARAM,
       OPT_NVME_PATH, OPT_ACT_CKPT, OPT_ACT_OFFLOAD, OPT_TILE_LINEAR, OPT_TILE_VOCAB, OPT_QWZ, OPT_HPZ, OPT_QGZ, OPT_HIER,
       OPT_QWZ_BLOCK, OPT_QGZ_BLOCK, OPT_NANSKIP_LIMIT, OPT_CUDNN, OPT_MICRO_GRADS, OPT_HELLASWAG, OPT_TRACE,
       OPT_TRACE_STEPS,
       // llm.c's two-letter flags, which the pre-pass (llmc_flags) turns into these
       OPT_NK, OPT_NM, OPT_SL, OPT_SG, OPT_LG, OPT_GE, OPT_PN, OPT_PR, OPT_PG, OPT_PM, OPT_PI, OPT_PS, OPT_PP,
       OPT_PF };

const char *const train_lr_schedule_names[4] = {"cosine", "linear", "constant", "wsd"};

const char *const train_offload_names[3] = {"none", "cpu", "nvme"};

int train_offload_parse(const char *name) {
    for (int i = 0; i < 3; i++)
        if (strcmp(name, train_offload_names[i]) == 0) return i;
    return -1;
}

// The flag of a ZeRO-only option, or NULL for the others.
static const char *zero_flag(int opt) {
    switch (opt) {
    case 'z': return "-z";
    case OPT_ZBUCKET: return "--zero-bucket";
    case OPT_ZPREFETCH: return "--zero-prefetch";
    case OPT_ZLIVE: return "--zero-max-live";
    case OPT_ZPERSIST: return "--zero-persist";
    case OPT_NODE: return "--node-size";
    case OPT_ZTIMEOUT: return "--zero-timeout";
    case OPT_DRYRUN: return "--dry-run";
    case OPT_WORLD: return "--world";
    case OPT_GPUMEM: return "--gpu-mem";
    case OPT_DEEPSPEED: return "--deepspeed";
    case OPT_OFFLOAD_OPT: return "--offload-optimizer";
    case OPT_OFFLOAD_PARAM: return "--offload-param";
    case OPT_NVME_PATH: return "--nvme-path";
    case OPT_QWZ: return "--qwz";
    case OPT_HPZ: return "--hpz";
    case OPT_QGZ: return "--qgz";
    case OPT_HIER: return "--hier-reduce";
    case OPT_QWZ_BLOCK: return "--qwz-block";
    case OPT_QGZ_BLOCK: return "--qgz-block";
    default: return NULL;
    }
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
    c->zero_persist = 1L << 16;
    c->node_size = 0;
    c->zero_timeout = 600.0;
    c->dry_run = 0;
    c->dry_run_world = 1;
    c->gpu_mem = 0;
    c->offload_optimizer = TRAIN_OFFLOAD_NONE;
    c->offload_param = TRAIN_OFFLOAD_NONE;
    c->nvme_path = NULL;
    c->trace_path = NULL;
    c->trace_steps = 4;
}

void train_config_usage(const char *prog, const char *flavour) {
    TrainConfig d;
    int cuda = flavour_cuda(flavour);
    defaults(&d, cuda);
    printf("usage: %s [options]\n\n", prog);
    printf("Trains GPT-2 (%s). With no options it trains on the bundled corpus.\n\n",
           cuda ? "CUDA, bf16 mixed precision" : "CPU, fp32 reference");
    printf("  -i GLOB   train token shards (default %s)\n", d.train_pattern);
    printf("  -j GLOB   validation token shards (default %s)\n", d.val_pattern);
    printf("  -e MODEL  descriptor dN[cC][hH][tT] (N layers, C channels = 64N, H heads = C/64,\n"
           "            T max sequence 1024; at most d1024, c65536, h4096, t1048576) or an llm.c\n"
           "            model file%s (default %s)\n", flavour_zero(flavour) ? "; under -z each rank reads only its shards" : "",
           d.model);
    printf("  -o DIR    output folder: main.log, checkpoints, the model files model_STEP.bin (one per\n"
           "            checkpoint) and model_final.bin (at the end) (default %s)\n", d.out_dir);
    printf("  -b N      micro-batch size per rank (default %d)\n", d.B);
    printf("  -t N      sequence length (default %d)\n", d.T);
    printf("  -d N      total batch in tokens per step (all ranks): a multiple of B*T*ranks, gradient\n"
           "            accumulation covers the rest, at most %d micro-batches per rank (default B*T*ranks)\n",
           TRAIN_MAX_GRAD_ACCUM);
    printf("  -l LR     peak learning rate (default %g)\n", d.lr);
    printf("  -u N      warmup steps (default %d)\n", d.warmup_steps);
    printf("  -k NAME   learning rate schedule after the warmup, llm.c's: cosine (to -q x peak), linear\n"
           "            (to -q x peak), constant (the peak), wsd (the peak until 80%% of the steps, then\n"
           "            1 - sqrt decay to -q x peak) (default %s)\n", train_lr_schedule_names[d.lr_schedule]);
    printf("  -q F      final learning rate as a fraction of the peak (default %g)\n", d.final_lr_frac);
    printf("  -c WD     AdamW weight decay on 2D tensors (default %g)\n", d.weight_decay);
    printf("  -x N      optimizer steps, at least 1 (default %d; -1 = one epoch of the train data)\n", d.max_steps);
    printf("  -v N      validation loss every N steps, 0 = never (default %d)\n", d.val_every);
    printf("  -m N      validation batches per evaluation, -1 = all (default %d)\n", d.val_max_steps);
    printf("  -s N      sample text every N steps, 0 = never (default %d)\n", d.sample_every);
    printf("  -g N      tokens to sample (default %d)\n", d.gen_tokens);
    printf("  -n N      checkpoint every N steps and at the end, 0 = never (default %d)\n", d.checkpoint_every);
    printf("  -nk N     checkpoints kept on disk, the newest; 0 = all (default %d: this one and the previous)\n",
           d.ckpt_keep);
    printf("  -nm N     major checkpoints: one whose step is a multiple of N is never removed by -nk, 0 = none\n"
           "            (default 0)\n");
    printf("  -sl Z     skip an update whose loss is more than Z standard deviations above the mean of the\n"
           "            last 128 steps' losses (llm.c's outlier window: no skip in the first 128 steps);\n"
           "            0 = off (default 0). The run's end says how many were skipped\n");
    printf("  -sg Z     the same for the gradient norm (default 0)\n");
    printf("  -a 0|1    1: overfit one batch: every step trains on the train data's first batch (all its\n"
           "            micro-batches), for debugging (default 0)\n");
    printf("  -h 0      accepted: no HellaSwag evaluation (-h 1 is refused: not implemented)\n");
    printf("  -f 0|1    llm.c's TF32 switch: accepted, no effect (no matmul here takes fp32 inputs)\n");
    printf("  -w 1      llm.c's fp32 master weights: always kept (-w 0 is refused)\n");
    printf("  -lg N     llm.c's GPU status every N steps: N <= 0 (off) accepted, N > 0 refused\n");
    printf("  -y 1      resume from the latest checkpoint in the output folder; with none there\n"
           "            yet, start fresh (so a restart loop can always pass -y 1)\n");
    if (cuda) {
        printf("  -r N      activation recompute: 0 none, 1 GELU, 2 GELU and LayerNorms (default %d)\n", d.recompute);
        printf("  --cudnn 0|1     cuDNN flash attention (1) or plain kernels (0) (default %d)\n", d.use_cudnn);
    }
    printf("  --seed N        seed of init, data order and sampling, 0 to 2^63-1 (default %llu)\n",
           (unsigned long long)d.seed);
    printf("  --shuffle 0|1   shuffle the train windows each epoch (default %d)\n", d.shuffle);
    printf("  --grad-clip F   clip the global gradient norm to F, <= 0 disables (default %g)\n", d.grad_clip);
    printf("  --beta1 F       AdamW's first-moment decay, in [0, 1) (default %g)\n", d.beta1);
    printf("  --beta2 F       AdamW's second-moment decay, in [0, 1) (default %g)\n", d.beta2);
    printf("  --adam-eps F    AdamW's epsilon, in [1e-30, 1] (default %g)\n", d.adam_eps);
    printf("  --nan-skip      a step whose loss or gradient norm is NaN or infinite is skipped (its\n"
           "                  update is not applied) and training goes on; the run's end says how many\n"
           "                  were skipped. Default: such a step stops the run with a message naming it,\n"
           "                  and nothing of it is saved\n");
    printf("  --nan-skip-limit N  with --nan-skip: the N-th skipped step in a row stops the run as a\n"
           "                  non-finite step does without --nan-skip (default %d)\n", d.nan_skip_limit);
    printf("  --tokenizer F   llm.c tokenizer file for samples (default %s)\n", d.tokenizer_path);
    if (!cuda) printf("  --threads N     OpenMP threads (default: cores / ranks on this node)\n");
    printf("  --trace FILE    a timeline per rank, FILE.rankRRRRR.json (Chrome trace: Perfetto, chrome://tracing):\n"
           "                  what each thread did and waited on (forward and backward of each unit, each\n"
           "                  gather and reduction, host-stream and NVMe work, the optimizer step, validation,\n"
           "                  checkpoints)%s, the last --trace-steps N steps (default %d), also written when\n"
           "                  the watchdog ends a stuck run; scripts/trace_merge.py joins the ranks' files\n",
           cuda ? " and a track per GPU stream of what the GPU ran, timed by CUDA events" : "", d.trace_steps);
    if (!flavour_cuda_zero(flavour))
        printf("  --micro-grads 0|1  with gradient accumulation: 1 computes each micro-batch's gradient in a\n"
               "                  buffer of its own (one more gradient-sized buffer) and adds it to the sum,\n"
               "                  so accumulation N gives the bits of ZeRO on N ranks; 0 accumulates inside\n"
               "                  the backward's kernels (no buffer; the last bits differ from N ranks)\n"
               "                  (default %d)\n", d.micro_grads);
    else   // train_gpt2_zero: the gradients are the plugin's; no flag, a fixed rule per stage
        printf("  --micro-grads   refused here (the gradients are the ZeRO plugin's): with accumulation,\n"
               "                  -z 2 and 3 add each micro-step's reduced gradient into their shard (the\n"
               "                  bits of train_gpt2cu --micro-grads 1 at 1 rank), -z 0 and 1 accumulate\n"
               "                  inside the backward's kernels (those of --micro-grads 0)\n");
    printf("  --act-checkpoint 0|1  activation checkpointing: keep only each transformer block's input\n"
           "                  and recompute the block's forward just before its backward (the same\n"
           "                  gradients; activations: the block inputs plus one block's) (default %d)\n",
           d.act_checkpoint);
    printf("  --act-offload 0|1%s  with --act-checkpoint 1: the block inputs go to %s\n"
           "                  after each block's forward and come back ahead of its backward%s (default %d)\n",
           cuda ? "" : "|nvme", cuda ? "pinned host memory (a copy stream)" : "a host buffer of their own (1)",
           cuda ? "" : ";\n                  nvme: to a swap file under --nvme-path (they grow with depth: on NVMe\n"
                       "                  they take no memory)", d.act_offload);
    printf("  --tile-linear K  memory-centric tiling: each block's four linears (qkv, attention projection,\n"
           "                  MLP fc and projection) run as K tiles along their output rows, each tile a\n"
           "                  parameter unit of its own, so ZeRO stage 3 gathers one tile at a time; K must\n"
           "                  divide the channels C%s. Same model files; a sharded checkpoint resumes\n"
           "                  only with the same K (default %d)\n",
           cuda ? " with C/K a multiple of 8" : "", d.tile_linear);
    printf("  --tile-vocab KV  the same for the vocabulary: the token embedding and the classifier run as\n"
           "                  KV tiles of wte's rows, each tile's embedding and classifier parts units of\n"
           "                  their own, so ZeRO stage 3 gathers Vp/KV rows of wte at a time instead of all\n"
           "                  of them; KV must divide the padded vocabulary Vp%s.\n"
           "                  Same model files; a sharded checkpoint resumes only with the same KV\n"
           "                  (default %d)\n",
           cuda ? " with Vp/KV a multiple of 8" : "", d.tile_vocab);
    printf("  llm.c's -r (CPU), -ge, -pn -pr -pg -pm/-pi -ps -pp/-pf are refused, each saying what to use\n");
    if (!flavour_zero(flavour)) {   // train_gpt2cu: no ZeRO flags to list
        printf("  -h        this help\n");
        printf("\nOne GPU, unsharded. Data parallel training with ZeRO: train_gpt2_zero (mpirun -np N).\n");
        return;
    }
    printf("\nZeRO (data parallel over MPI ranks; launch with mpirun -np N):\n");
    printf("  -z STAGE            0 data parallel, 1 optimizer states, 2 + gradients, 3 + parameters\n"
           "                      sharded (default: %s)\n",
           cuda ? "0" : "no plugin, a single unsharded rank; several ranks need -z");
    printf("  --zero-bucket N     gradient reduction bucket, elements (default: from the model, at most 4M,\n"
           "                      so that stage 2 holds less gradient memory than stage 1)\n");
    printf("  --zero-prefetch N   stage 3: gather up to N elements ahead (default: one typical unit, so that\n"
           "                      stage 3 holds less parameter memory than stage 2)\n");
    printf("  --zero-max-live N   stage 3: most gathered elements alive, 0 = largest unit + prefetch\n");
    printf("  --zero-persist N    stage 3: tensors of at most N elements stay gathered (default %ld)\n", d.zero_persist);
    printf("  --node-size N       ranks per logical node, for intra/inter-node figures (default: real nodes)\n");
    printf("  --zero-timeout S    a collective stuck this many seconds ends the run (default %g)\n", d.zero_timeout);
    if (cuda)
        printf("  --dry-run           with -z: predict per-rank memory and bytes sent per step for --world\n"
               "                      ranks, write OUT/zero_report.json, and exit without training\n");
    else
        printf("  --dry-run           predict the memory of the run and exit without training: with -z per\n"
               "                      rank for --world ranks, and the bytes sent per step (OUT/zero_report.json);\n"
               "                      without -z the unsharded run's (OUT/memory_report.json). Counts the\n"
               "                      process's peak: model states, buffers, activations and its runtime\n");
    printf("  --world N           ranks for --dry-run (default 1)\n");
    printf("  --gpu-mem SIZE      with --dry-run: memory a rank has for the model (%s): prints\n"
           "                      per rank whether its total (%s) fits,\n"
           "                      and exits with status 2 when one does not, or when the swap files do not\n"
           "                      fit the free space under --nvme-path. SIZE: 80G = 80GiB = 80 x 2^30\n"
           "                      bytes, 80GB = 80 x 10^9; K M T alike, fractions allowed (79.5G), B = bytes\n",
           cuda ? "GPU" : "host RAM", cuda ? "model states, buffers, activations" : "the process's predicted peak");
    printf("  --offload-optimizer none|cpu|nvme\n"
           "                      stages 1-3 (ZeRO-Offload, ZeRO-Infinity): the fp32 master, AdamW m and v\n"
           "                      and the reduced gradient of a rank's shard live in %s memory (cpu)\n"
           "                      or in a swap file under --nvme-path (nvme), and AdamW runs on the\n"
           "                      CPU; bit-identical to none (default none)\n", cuda ? "pinned host" : "a separate host");
    printf("  --offload-param none|cpu|nvme\n"
           "                      stage 3: the working-parameter shard the gathers read lives in host\n"
           "                      memory (cpu) or in the swap file (nvme), brought up ahead of use along\n"
           "                      the prefetch order (default none)\n");
    printf("  --nvme-path DIR     folder for the NVMe swap files (one per rank, O_DIRECT, removed at exit)\n");
    printf("ZeRO++ (each on its own; --node-size N makes N consecutive ranks a logical node):\n");
    printf("  --qwz               stage 3: forward all-gathers move int8 blocks of the weights (one fp32\n"
           "                      scale per block), unpacked into the working buffer; backward gathers\n"
           "                      move the weights as they are (qwZ)\n");
    printf("  --hpz N             stage 3: after a unit's forward gather each rank keeps 1/N of it, so that\n"
           "                      its backward gather stays inside groups of N consecutive ranks (N = the\n"
           "                      node size: no inter-node traffic); costs psi/N working values per rank\n"
           "                      (hpZ; 0 or 1: off)\n");
    printf("  --qgz               gradients reduced in two hops, inside the node then across nodes, as int4\n"
           "                      blocks, summed in fp32 in a fixed order (qgZ)\n");
    printf("  --hier-reduce       the same two hops without quantization: the bytes a rank sends to\n"
           "                      other nodes shrink by the node size against the flat all-to-all\n");
    printf("  --qwz-block N       values per int8 block (even; default %d)\n", TRAIN_QUANT_BLOCK_DEFAULT);
    printf("  --qgz-block N       values per int4 block (even; default %d)\n", TRAIN_QGZ_BLOCK_DEFAULT);
    printf("  --deepspeed FILE    DeepSpeed's ds_config.json: its keys (listed at the end) set what the\n"
           "                      flags set (a flag given too must agree; \"auto\" keeps the flag's value\n"
           "                      or the default)\n");
    printf("  Under -z, -n writes sharded checkpoints (OUT/zero_STEP/, each with OUT/model_STEP.bin), -y 1\n"
           "  resumes from them (any world size or stage), OUT/zero_report.json holds the measured memory\n"
           "  and traffic.\n");
    printf("  -h        this help\n");
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
    if (*s == '\0' || *end != '\0' || errno == ERANGE || !(v >= lo && v <= hi)) {
        fprintf(stderr, "error: %s expects a number in [%g, %g], got '%s'\n", flag, lo, hi, s);
        exit(1);
    }
    return (float)v;
}

// AdamW's betas: [0, 1), checked after the rounding to float (0.999999999 is 1.0f).
static float parse_beta(const char *flag, const char *s) {
    char *end;
    float v = (float)strtod(s, &end);
    if (*s == '\0' || *end != '\0' || !(v >= 0.0f && v < 1.0f)) {
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

int train_config_has_zero(const char *flavour) { return flavour_zero(flavour); }

// llm.c's two-letter flags (train_gpt2.cu), each a long option here: getopt would read
// "-nk 2" as -n with the value "k". -pm/-pi and -pp/-pf: llm.c's help and its parser
// disagree on these names, so both are known.
static const struct { const char *flag; int opt; } two_letter[] = {
    {"-nk", OPT_NK}, {"-nm", OPT_NM}, {"-sl", OPT_SL}, {"-sg", OPT_SG}, {"-lg", OPT_LG}, {"-ge", OPT_GE},
    {"-pn", OPT_PN}, {"-pr", OPT_PR}, {"-pg", OPT_PG}, {"-pm", OPT_PM}, {"-pi", OPT_PI}, {"-ps", OPT_PS},
    {"-pp", OPT_PP}, {"-pf", OPT_PF}};
#define NUM_TWO_LETTER (sizeof(two_letter) / sizeof(two_letter[0]))

static const char *two_letter_flag(int opt) {
    for (size_t k = 0; k < NUM_TWO_LETTER; k++)
        if (two_letter[k].opt == opt) return two_letter[k].flag;
    return "?";
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
    static char names[NUM_TWO_LETTER][8];
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
        for (size_t k = 0; k < NUM_TWO_LETTER; k++)
            if (strcmp(a, two_letter[k].flag) == 0) {
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
            for (const struct option *o = longs; o->name; o++)
                if (strlen(o->name) == len && strncmp(o->name, a + 2, len) == 0 && o->has_arg == required_argument && !eq)
                    i++;
            continue;
        }
        const char *p = strchr(shorts, a[1]);   // "-b 4" (not "-b4"): skip the 4
        if (p && a[1] != ':' && p[1] == ':' && a[2] == '\0') i++;
    }
    return out;
}

// llm.c's multi-node flags: this project's start-up takes the same facts from the launcher.
static void refuse_multinode(const char *flag, const char *flavour, const char *prog) {
    if (!flavour_zero(flavour)) {
        fprintf(stderr, "error: %s is llm.c's multi-process start-up, and %s trains one GPU: for data parallel "
                "training run train_gpt2_zero under mpirun -np N (see -h)\n", flag, prog);
        exit(1);
    }
    fprintf(stderr, "error: %s is llm.c's multi-process start-up (-pn processes, -pr rank, -pg GPUs per node, "
            "-pm/-pi tcp|fs|mpi, -ps server, -pp/-pf shared folder), not taken here: the launcher says it. Use "
            "mpirun -np N (or srun), or without MPI set RANK, WORLD_SIZE and LOCAL_RANK in each process with "
            "ZERO_BOOTSTRAP_TCP=host:port (llm.c's tcp) or ZERO_BOOTSTRAP_FILE=path (llm.c's fs) and the job's "
            "ZERO_BOOTSTRAP_SECRET (zero/README.md: Start-up)\n", flag);
    exit(1);
}

int train_config_parse_flags(TrainConfig *c, int argc, char **argv, const char *flavour) {
    defaults(c, flavour_cuda(flavour));
    // which TrainFlag each option sets (the rest: -1), so that a config file cannot
    // silently override what the command line said
    static const struct { int opt; TrainFlag flag; } flag_of[] = {
        {'b', TRAIN_FLAG_B}, {'d', TRAIN_FLAG_TOTAL_BATCH}, {'l', TRAIN_FLAG_LR},
        {'c', TRAIN_FLAG_WEIGHT_DECAY}, {OPT_CLIP, TRAIN_FLAG_GRAD_CLIP}, {OPT_BETA1, TRAIN_FLAG_BETA1},
        {OPT_BETA2, TRAIN_FLAG_BETA2}, {OPT_ADAM_EPS, TRAIN_FLAG_ADAM_EPS}, {'z', TRAIN_FLAG_ZERO_STAGE},
        {OPT_ZBUCKET, TRAIN_FLAG_ZERO_BUCKET}, {OPT_ZPREFETCH, TRAIN_FLAG_ZERO_PREFETCH},
        {OPT_ZLIVE, TRAIN_FLAG_ZERO_MAX_LIVE}, {OPT_ZPERSIST, TRAIN_FLAG_ZERO_PERSIST},
        {OPT_OFFLOAD_OPT, TRAIN_FLAG_OFFLOAD_OPTIMIZER}, {OPT_OFFLOAD_PARAM, TRAIN_FLAG_OFFLOAD_PARAM},
        {OPT_ACT_OFFLOAD, TRAIN_FLAG_ACT_OFFLOAD}, {OPT_QWZ, TRAIN_FLAG_QWZ}, {OPT_HPZ, TRAIN_FLAG_HPZ},
        {OPT_QGZ, TRAIN_FLAG_QGZ},
        {OPT_NVME_PATH, TRAIN_FLAG_NVME_PATH}, {OPT_DEEPSPEED, TRAIN_FLAG_DEEPSPEED}};
    static const struct option longs[] = {
        {"seed", required_argument, 0, OPT_SEED},
        {"shuffle", required_argument, 0, OPT_SHUFFLE},
        {"grad-clip", required_argument, 0, OPT_CLIP},
        {"tokenizer", required_argument, 0, OPT_TOKENIZER},
        {"threads", required_argument, 0, OPT_THREADS},
        {"zero-bucket", required_argument, 0, OPT_ZBUCKET},
        {"zero-prefetch", required_argument, 0, OPT_ZPREFETCH},
        {"zero-max-live", required_argument, 0, OPT_ZLIVE},
        {"zero-persist", required_argument, 0, OPT_ZPERSIST},
        {"node-size", required_argument, 0, OPT_NODE},
        {"zero-timeout", required_argument, 0, OPT_ZTIMEOUT},
        {"dry-run", no_argument, 0, OPT_DRYRUN},
        {"world", required_argument, 0, OPT_WORLD},
        {"gpu-mem", required_argument, 0, OPT_GPUMEM},
        {"nan-skip", no_argument, 0, OPT_NANSKIP},
        {"nan-skip-limit", required_argument, 0, OPT_NANSKIP_LIMIT},
        {"beta1", required_argument, 0, OPT_BETA1},
        {"beta2", required_argument, 0, OPT_BETA2},
        {"adam-eps", required_argument, 0, OPT_ADAM_EPS},
        {"deepspeed", required_argument, 0, OPT_DEEPSPEED},
        {"offload-optimizer", required_argument, 0, OPT_OFFLOAD_OPT},
        {"offload-param", required_argument, 0, OPT_OFFLOAD_PARAM},
        {"nvme-path", required_argument, 0, OPT_NVME_PATH},
        {"trace", required_argument, 0, OPT_TRACE},
        {"trace-steps", required_argument, 0, OPT_TRACE_STEPS},
        {"act-checkpoint", required_argument, 0, OPT_ACT_CKPT},
        {"act-offload", required_argument, 0, OPT_ACT_OFFLOAD},
        {"tile-linear", required_argument, 0, OPT_TILE_LINEAR},
        {"tile-vocab", required_argument, 0, OPT_TILE_VOCAB},
        {"qwz", no_argument, 0, OPT_QWZ},
        {"hpz", required_argument, 0, OPT_HPZ},
        {"qgz", no_argument, 0, OPT_QGZ},
        {"hier-reduce", no_argument, 0, OPT_HIER},
        {"qwz-block", required_argument, 0, OPT_QWZ_BLOCK},
        {"qgz-block", required_argument, 0, OPT_QGZ_BLOCK},
        {"cudnn", required_argument, 0, OPT_CUDNN},
        {"micro-grads", required_argument, 0, OPT_MICRO_GRADS},
        {"hellaswag", required_argument, 0, OPT_HELLASWAG},
        {"nk", required_argument, 0, OPT_NK}, {"nm", required_argument, 0, OPT_NM},
        {"sl", required_argument, 0, OPT_SL}, {"sg", required_argument, 0, OPT_SG},
        {"lg", required_argument, 0, OPT_LG}, {"ge", required_argument, 0, OPT_GE},
        {"pn", required_argument, 0, OPT_PN}, {"pr", required_argument, 0, OPT_PR},
        {"pg", required_argument, 0, OPT_PG}, {"pm", required_argument, 0, OPT_PM},
        {"pi", required_argument, 0, OPT_PI}, {"ps", required_argument, 0, OPT_PS},
        {"pp", required_argument, 0, OPT_PP}, {"pf", required_argument, 0, OPT_PF},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int opt, nan_skip_limit_given = 0;
    // '+': stop at the first non-option (an error below), so argv[at] is the element parsed
    static const char shorts[] = "+:i:j:e:o:b:t:d:l:u:q:c:x:v:m:s:g:n:y:r:f:z:k:a:w:h";
    char **args = llmc_flags(argc, argv, shorts, longs);
    opterr = 0;
    optind = 1;
    for (int at = optind; (opt = getopt_long(argc, args, shorts, longs, NULL)) != -1; at = optind) {
        const char *typed = argv[at < argc ? at : argc - 1];   // the flag as the user typed it
        if (zero_flag(opt) && !flavour_zero(flavour)) {
            fprintf(stderr, "error: %s is a ZeRO option, and %s trains one unsharded GPU: run train_gpt2_zero for "
                    "ZeRO (see -h)\n", zero_flag(opt), argv[0]);
            exit(1);
        }
        for (size_t k = 0; k < sizeof(flag_of) / sizeof(flag_of[0]); k++)
            if (flag_of[k].opt == opt) c->given |= TRAIN_FLAG_BIT(flag_of[k].flag);
        switch (opt) {
        case 'i': c->train_pattern = optarg; break;
        case 'j': c->val_pattern = optarg; break;
        case 'e': c->model = optarg; break;
        case 'o': c->out_dir = optarg; break;
        case 'b': c->B = (int)parse_long("-b", optarg, 1, 1 << 20); break;
        case 't': c->T = (int)parse_long("-t", optarg, 1, 1 << 20); break;
        case 'd': c->total_batch_tokens = parse_long("-d", optarg, -1, 1L << 40); break;
        case 'l': c->lr = parse_float("-l", optarg, 0, 10); break;
        case 'u': c->warmup_steps = (int)parse_long("-u", optarg, 0, 1 << 30); break;
        case 'q': c->final_lr_frac = parse_float("-q", optarg, 0, 1); break;
        case 'c': c->weight_decay = parse_float("-c", optarg, 0, 10); break;
        case 'x': c->max_steps = parse_steps(optarg); break;
        case 'v': c->val_every = (int)parse_long("-v", optarg, 0, 1 << 30); break;
        case 'm': c->val_max_steps = (int)parse_long("-m", optarg, -1, 1 << 30); break;
        case 's': c->sample_every = (int)parse_long("-s", optarg, 0, 1 << 30); break;
        case 'g': c->gen_tokens = (int)parse_long("-g", optarg, 0, 1 << 20); break;
        case 'n': c->checkpoint_every = (int)parse_long("-n", optarg, 0, 1 << 30); break;
        case 'y': c->resume = (int)parse_long("-y", optarg, 0, 1); break;
        case 'r':
            if (!flavour_cuda(flavour)) {
                fprintf(stderr, "error: -r (activation recompute) is the CUDA trainers': the CPU trainer keeps every "
                        "activation, or with --act-checkpoint 1 only each block's input\n");
                exit(1);
            }
            c->recompute = (int)parse_long("-r", optarg, 0, 2);
            break;
        case 'f': parse_long("-f", optarg, 0, 1); break;   // llm.c's TF32 switch: no fp32-input matmul here
        case OPT_CUDNN: c->use_cudnn = (int)parse_long("--cudnn", optarg, 0, 1); break;
        case OPT_MICRO_GRADS:
            c->micro_grads = (int)parse_long("--micro-grads", optarg, 0, 1);
            c->micro_grads_given = 1;
            break;
        case 'k': {
            int k = 0;
            while (k < 4 && strcmp(optarg, train_lr_schedule_names[k]) != 0) k++;
            if (k == 4) {
                fprintf(stderr, "error: -k expects a learning rate schedule: cosine, linear, constant or wsd, got "
                        "'%s'\n", optarg);
                exit(1);
            }
            c->lr_schedule = k;
            break;
        }
        case 'a': c->overfit_batch = (int)parse_long("-a", optarg, 0, 1); break;
        case 'w':
            if (parse_long("-w", optarg, 0, 1) == 0) {
                fprintf(stderr, "error: -w 0 (no fp32 master weights) is not available: every trainer keeps fp32 "
                        "master weights (-w 1). To save their memory, shard them with ZeRO (-z 1, 2 or 3)\n");
                exit(1);
            }
            break;
        case OPT_HELLASWAG:
            if (parse_long("-h", optarg, 0, 1) == 1) {
                fprintf(stderr, "error: -h 1 asks for llm.c's HellaSwag evaluation, which is not implemented here; "
                        "-h 0 (no evaluation) is accepted, and -h alone prints the help\n");
                exit(1);
            }
            break;
        case OPT_NK: c->ckpt_keep = (int)parse_long("-nk", optarg, 0, 1 << 30); break;
        case OPT_NM: c->ckpt_major = (int)parse_long("-nm", optarg, 0, 1 << 30); break;
        case OPT_SL: c->skip_loss_z = parse_float("-sl", optarg, 0, 1e9); break;
        case OPT_SG: c->skip_norm_z = parse_float("-sg", optarg, 0, 1e9); break;
        case OPT_LG:
            if (parse_long("-lg", optarg, -(1L << 30), 1L << 30) > 0) {
                fprintf(stderr, "error: -lg %s (llm.c's GPU utilization, power and temperature every N steps) is "
                        "not implemented: run nvidia-smi --query-gpu=utilization.gpu,memory.used,power.draw,"
                        "temperature.gpu --format=csv -l 10 beside the run; -lg 0 or -1 (off) is accepted\n", optarg);
                exit(1);
            }
            break;
        case OPT_GE:
            fprintf(stderr, "error: -ge (llm.c's GELU fusion into the matmul) is not selectable: the CUDA model's "
                    "kernels are fixed; drop -ge\n");
            exit(1);
        case OPT_PN: case OPT_PR: case OPT_PG: case OPT_PM: case OPT_PI: case OPT_PS: case OPT_PP: case OPT_PF:
            refuse_multinode(two_letter_flag(opt), flavour, argv[0]);
            break;
        case 'z': c->zero_stage = (int)parse_long("-z", optarg, 0, 3); break;
        case OPT_ZBUCKET: c->zero_bucket = parse_long("--zero-bucket", optarg, 0, 1L << 40); break;
        case OPT_ZPREFETCH: c->zero_prefetch = parse_long("--zero-prefetch", optarg, 0, 1L << 40); break;
        case OPT_ZLIVE: c->zero_max_live = parse_long("--zero-max-live", optarg, 0, 1L << 40); break;
        case OPT_ZPERSIST: c->zero_persist = parse_long("--zero-persist", optarg, 0, 1L << 40); break;
        case OPT_NODE: c->node_size = (int)parse_long("--node-size", optarg, 0, 1 << 20); break;
        case OPT_ZTIMEOUT: c->zero_timeout = parse_float("--zero-timeout", optarg, 0.001, 1e9); break;
        case OPT_DRYRUN: c->dry_run = 1; break;
        case OPT_WORLD: c->dry_run_world = (int)parse_long("--world", optarg, 1, 1 << 20); break;
        case OPT_NANSKIP: c->nan_skip = 1; break;
        case OPT_NANSKIP_LIMIT:
            c->nan_skip_limit = (int)parse_long("--nan-skip-limit", optarg, 1, 1 << 30);
            nan_skip_limit_given = 1;
            break;
        case OPT_BETA1: c->beta1 = parse_beta("--beta1", optarg); break;
        case OPT_BETA2: c->beta2 = parse_beta("--beta2", optarg); break;
        case OPT_ADAM_EPS: c->adam_eps = parse_float("--adam-eps", optarg, 1e-30, 1); break;
        case OPT_DEEPSPEED: c->deepspeed = optarg; break;
        case OPT_OFFLOAD_OPT: c->offload_optimizer = parse_offload("--offload-optimizer", optarg); break;
        case OPT_OFFLOAD_PARAM: c->offload_param = parse_offload("--offload-param", optarg); break;
        case OPT_NVME_PATH: c->nvme_path = optarg; break;
        case OPT_TRACE: c->trace_path = optarg; break;
        case OPT_TRACE_STEPS: c->trace_steps = (int)parse_long("--trace-steps", optarg, 0, 1 << 20); break;
        case OPT_GPUMEM:
            if (train_config_parse_bytes(optarg, &c->gpu_mem) != 0) {
                fprintf(stderr, "error: --gpu-mem expects a size from 1 byte to 2^60 bytes such as 80G, 80GiB, "
                        "80GB or 85899345920, got '%s'\n", optarg);
                exit(1);
            }
            break;
        case OPT_SEED: c->seed = (uint64_t)parse_long("--seed", optarg, 0, 0x7fffffffffffffffL); break;
        case OPT_SHUFFLE: c->shuffle = (int)parse_long("--shuffle", optarg, 0, 1); break;
        case OPT_CLIP: c->grad_clip = parse_float("--grad-clip", optarg, -1, 1e9); break;
        case OPT_TOKENIZER: c->tokenizer_path = optarg; break;
        case OPT_THREADS: c->threads = (int)parse_long("--threads", optarg, 0, 4096); break;
        case OPT_ACT_CKPT: c->act_checkpoint = (int)parse_long("--act-checkpoint", optarg, 0, 1); break;
        case OPT_ACT_OFFLOAD:
            c->act_offload = strcmp(optarg, "nvme") == 0 ? TRAIN_ACT_OFFLOAD_NVME : (int)parse_long("--act-offload", optarg, 0, 1);
            break;
        case OPT_QWZ: c->qwz = 1; break;
        case OPT_HPZ: c->hpz = (int)parse_long("--hpz", optarg, 0, 1 << 20); break;
        case OPT_QGZ: c->qgz = 1; break;
        case OPT_HIER: c->hier_reduce = 1; break;
        case OPT_QWZ_BLOCK: c->qwz_block = parse_block("--qwz-block", optarg); break;
        case OPT_QGZ_BLOCK: c->qgz_block = parse_block("--qgz-block", optarg); break;
        case OPT_TILE_LINEAR: c->tile_linear = (int)parse_long("--tile-linear", optarg, 1, GPT2_MAX_TILES); break;
        case OPT_TILE_VOCAB: c->tile_vocab = (int)parse_long("--tile-vocab", optarg, 1, GPT2_MAX_TILES); break;
        case 'h': return 1;
        case ':':
            fprintf(stderr, "error: option '%s' needs a value (see -h)\n", typed);
            exit(1);
        default:
            if (optopt > 0 && optopt < 256 && strlen(typed) > 2 && typed[1] != '-')   // "-Q7", "-bq": name the letter
                fprintf(stderr, "error: unknown option '-%c' in '%s' (see -h)\n", optopt, typed);
            else
                fprintf(stderr, "error: unknown option '%s' (see -h)\n", typed);
            exit(1);
        }
    }
    free(args);
    if (optind < argc) {
        fprintf(stderr, "error: unexpected argument '%s' (see -h)\n", argv[optind]);
        exit(1);
    }
    if (nan_skip_limit_given && !c->nan_skip) {
        fprintf(stderr, "error: --nan-skip-limit %d limits --nan-skip's skipped steps: give --nan-skip too (without "
                "it the first non-finite step stops the run)\n", c->nan_skip_limit);
        exit(1);
    }
    return 0;
}

void train_config_check(TrainConfig *c, const char *flavour) {
    if (c->zero_stage < 0 && strcmp(flavour, "cuda-zero") == 0) c->zero_stage = 0;   // train_gpt2_zero: -z 0
    if (c->deepspeed && c->zero_stage < 0 && !flavour_cuda(flavour)) {
        fprintf(stderr, "error: --deepspeed configures a ZeRO run: give -z STAGE or zero_optimization.stage in '%s'\n",
                c->deepspeed);
        exit(1);
    }
    if (flavour_cuda_zero(flavour) && c->micro_grads_given) {
        fprintf(stderr, "error: --micro-grads is not train_gpt2_zero's: its gradients are the ZeRO plugin's; with "
                "accumulation -z 2 and 3 add each micro-step's reduced gradient into their shard (the rule of "
                "--micro-grads 1), -z 0 and 1 accumulate inside the backward's kernels (as --micro-grads 0)\n");
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
    if (c->gpu_mem && !c->dry_run) {
        fprintf(stderr, "error: --gpu-mem checks a prediction: give --dry-run (and -z STAGE, --world N)\n");
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
    // ZeRO++'s switches (the plugin checks them too; here they fail before any work)
    if ((c->qwz || c->hpz > 1 || c->qgz || c->hier_reduce) && c->zero_stage < 0) {
        fprintf(stderr, "error: ZeRO++ (--qwz, --hpz, --qgz, --hier-reduce) is part of ZeRO: give -z STAGE\n");
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
    if (c->offload_param && c->zero_stage != 3) {
        fprintf(stderr, "error: --offload-param %s needs -z 3 (stages 0-2 keep whole parameters on every rank)\n",
                train_offload_names[c->offload_param]);
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
    if (c->offload_param) printf("| %-20s | %-40s |\n", "offload parameters", train_offload_names[c->offload_param]);
    if (c->nvme_path) printf("| %-20s | %-40s |\n", "NVMe path", c->nvme_path);
    if (c->qwz || c->hpz > 1 || c->qgz || c->hier_reduce) {
        char pp[64];
        snprintf(pp, sizeof pp, "%s%s hpZ %d, %s", c->qwz ? "qwZ" : "", c->qwz ? "," : "", c->hpz > 1 ? c->hpz : 1,
                 c->qgz ? "qgZ" : c->hier_reduce ? "2-hop gradients" : "flat gradients");
        printf("| %-20s | %-40s |\n", "ZeRO++", pp);
    }
    if (c->deepspeed) printf("| %-20s | %-40s |\n", "DeepSpeed config", c->deepspeed);
    printf("+----------------------+------------------------------------------+\n");
}
