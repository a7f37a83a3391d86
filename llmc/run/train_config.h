// train_config.h: the trainers' command line (llm.c-compatible single-letter flags
// plus a few long options), shared by train_gpt2 (CPU) and train_gpt2cu (CUDA).
#ifndef LLMC_TRAIN_CONFIG_H
#define LLMC_TRAIN_CONFIG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// The plugin's quantization block when none is given (zero/kernels/quant.h's QUANT_BLOCK_DEFAULT;
// gpt2_zero.c checks that they agree, since llmc/ does not include zero/).
#define TRAIN_QUANT_BLOCK_DEFAULT 2048
#define TRAIN_QGZ_BLOCK_DEFAULT 64      // and qgZ's (QGZ_BLOCK_DEFAULT)

// The most gradient accumulation steps (micro-batches per rank per optimizer step) -d or a
// DeepSpeed file may ask for: 2^16. It holds a 4M-token batch (2^22 tokens: GPT-3's and
// Llama's) in micro-batches of one 64-token sequence on one rank; past it the fp32 sums of
// that many micro-steps' gradients carry about 2^16 x 2^-24 = 2^-8 relative rounding, bf16's
// own precision, and one step runs longer than anyone waits to see a loss.
#define TRAIN_MAX_GRAD_ACCUM 65536
// DeepSpeed's aio section: the NVMe engine's limits (zero/io/nvme.h's; gpt2_zero.c checks
// that they agree, since llmc/ does not include zero/): requests in flight, and bytes per
// read or write call, a multiple of the O_DIRECT alignment.
#define TRAIN_AIO_MAX_QUEUE_DEPTH 256
#define TRAIN_AIO_MAX_BLOCK (1L << 30)
#define TRAIN_AIO_ALIGN 4096
// -k's schedules, llm.c's names in this order (train_lr_schedule_names).
enum { TRAIN_LR_COSINE = 0, TRAIN_LR_LINEAR, TRAIN_LR_CONSTANT, TRAIN_LR_WSD };
extern const char *const train_lr_schedule_names[4];
// -nk's default: this checkpoint and the previous one.
#define TRAIN_CKPT_KEEP_DEFAULT 2

// --nan-skip-limit's default: the run stops at this many skipped steps in a row.
#define TRAIN_NAN_SKIP_LIMIT_DEFAULT 10

enum { TRAIN_ACT_OFFLOAD_NVME = 2 };   // --act-offload nvme (the CPU model's GPT2_ACT_OFFLOAD_FILE)

typedef struct {
    const char *train_pattern;  // -i
    const char *val_pattern;    // -j
    const char *model;          // -e descriptor ("d12") or llm.c model file
    const char *out_dir;        // -o
    const char *tokenizer_path; // --tokenizer
    int B;                      // -b micro-batch per rank
    int T;                      // -t sequence length
    int64_t total_batch_tokens; // -d tokens per optimizer step (all ranks); -1 = B*T*world
    float lr;                   // -l
    int warmup_steps;           // -u
    float final_lr_frac;        // -q
    float weight_decay;         // -c
    float grad_clip;            // --grad-clip (<= 0 disables)
    float beta1, beta2;         // --beta1 --beta2: AdamW's moment decay rates
    float adam_eps;             // --adam-eps: AdamW's epsilon
    int max_steps;              // -x (-1: one epoch of the train data)
    int val_every;              // -v (0 disables)
    int val_max_steps;          // -m batches per validation (-1: whole val set)
    int sample_every;           // -s (0 disables)
    int gen_tokens;             // -g
    int checkpoint_every;       // -n (0 disables; the last step is always saved when > 0)
    int resume;                 // -y 1: continue from the latest checkpoint in out_dir (none yet: start fresh)
    int nan_skip;               // --nan-skip: skip a step with a NaN/inf loss or norm (default: stop)
    int nan_skip_limit;         // --nan-skip-limit N: with --nan-skip, the N-th skipped step in a row stops the run
    uint64_t seed;              // --seed
    int shuffle;                // --shuffle (train data order)
    int recompute;              // -r (CUDA): 0 none, 1 GELU, 2 whole MLP/LN inputs
    int use_cudnn;              // --cudnn (CUDA), gpt2_cuda_memory.h's GPT2_CUDNN_*: 1 cuDNN, its deterministic
                                // backward; 2 cuDNN, its atomic backward; 0 plain kernels
    int micro_grads;            // --micro-grads (CPU, train_gpt2cu): each micro-batch's gradient in a buffer of its own
    int lr_schedule;            // -k: TRAIN_LR_COSINE, _LINEAR, _CONSTANT, _WSD (llm.c's schedulers.h)
    int ckpt_keep;              // -nk: checkpoints kept on disk (0: all)
    int ckpt_major;             // -nm: checkpoints at multiples of this step are never pruned (0: none)
    float skip_loss_z;          // -sl: skip an update whose loss z-score exceeds it (0: off)
    float skip_norm_z;          // -sg: the same for the gradient norm (0: off)
    int overfit_batch;          // -a 1: every step trains on the first batch(es) of the train data
    int threads;                // --threads (CPU): OpenMP threads, 0 = default
    int act_checkpoint;         // --act-checkpoint 1: keep block inputs only, recompute blocks in backward
    int act_offload;            // --act-offload 1: those block inputs in host memory (needs --act-checkpoint 1);
                                //   TRAIN_ACT_OFFLOAD_NVME: in a swap file under --nvme-path (CPU trainer)
    int tile_linear;            // --tile-linear K: a block's four linears as K tiles, each its own unit
    int tile_vocab;             // --tile-vocab KV: wte's rows as KV tiles (embedding and classifier units)
    // ZeRO (trainers built with zero/): -z STAGE and its knobs, in elements
    int zero_stage;             // -z: -1 = unsharded (no plugin), 0..3
    long zero_bucket;           // --zero-bucket: gradient reduction bucket (-1: sized from the model)
    long zero_prefetch;         // --zero-prefetch: stage-3 look-ahead (-1: sized from the model)
    long zero_max_live;         // --zero-max-live: stage-3 most gathered elements (0 = auto)
    long zero_persist;          // --zero-persist: stage-3 tensors this small stay gathered (-1: the plugin's choice)
    int node_size;              // --node-size: ranks per logical node (0 = real nodes)
    double zero_timeout;        // --zero-timeout: seconds before a stuck collective ends the run
    int dry_run;                // --dry-run: predict ZeRO memory and traffic, do not train
    int dry_run_world;          // --world N: ranks to predict for
    uint64_t gpu_mem;           // --gpu-mem BYTES: the dry run checks each rank against it (0: no check)
    uint64_t host_mem;          // --host-mem BYTES: train_gpt2_zero's dry run checks each rank's host side too
    // ZeRO-Offload / ZeRO-Infinity: where the optimizer states (stages 1-3) and the working
    // parameter shard (stage 3) live: TRAIN_OFFLOAD_NONE (the device), _CPU or _NVME
    int offload_optimizer;      // --offload-optimizer none|cpu|nvme
    float offload_ratio;        // --offload-optimizer-ratio R: the fraction of the parameters whose optimizer is offloaded
    int offload_param;          // --offload-param none|cpu|nvme
    const char *nvme_path;      // --nvme-path DIR: the NVMe swap files' folder
    const char *trace_path;     // --trace FILE: the timeline, FILE.rankR.json per rank
    int trace_steps;            // --trace-steps N: the last N steps of it
    // DeepSpeed's aio section (no flag of its own): the NVMe engine's settings (0: its defaults)
    int aio_queue_depth;        // aio.queue_depth: NVMe requests in flight at most
    int64_t aio_block_size;     // aio.block_size: the most bytes one NVMe read or write call moves
    // ZeRO++ (zero/kernels/wire.h): each switch on its own
    int qwz;                    // --qwz: stage-3 forward gathers move int8 blocks
    int hpz;                    // --hpz N: stage-3 secondary partition over N ranks (0 or 1: off)
    int qgz;                    // --qgz: gradients in two hops, int4 blocks on the wire
    int hier_reduce;            // --hier-reduce: the same two hops, unquantized
    int fast_reduce;            // --fast-reduce: bf16 gradients summed by the library's reduce-scatter
    int qwz_block, qgz_block;   // --qwz-block, --qgz-block: values per block (0: the default)
    int dpu;                    // --dpu N: from optimizer step N on, the update is one step delayed (0: off)
    // DeepSpeed's config file (llmc/run/ds_config.h)
    const char *deepspeed;      // --deepspeed FILE, or NULL
    int grad_accum_steps;       // its gradient_accumulation_steps (0: derived from -d)
    int micro_grads_given;      // --micro-grads was on the command line (train_gpt2_zero refuses it)
    unsigned given;             // TRAIN_FLAG_BIT()s of the flags the command line gave
    unsigned from_file;         // TRAIN_FLAG_BIT()s of the values the config file set
} TrainConfig;

// Settings a config file may also set: a file value that contradicts a flag given on the
// command line is an error, one the command line left alone replaces the default. From
// TRAIN_FLAG_FIRST_CLI_ONLY on, flags a config file does not set (their bit only says that
// the command line gave them).
typedef enum {
    TRAIN_FLAG_B, TRAIN_FLAG_TOTAL_BATCH, TRAIN_FLAG_GRAD_ACCUM, TRAIN_FLAG_LR, TRAIN_FLAG_WEIGHT_DECAY,
    TRAIN_FLAG_GRAD_CLIP, TRAIN_FLAG_BETA1, TRAIN_FLAG_BETA2, TRAIN_FLAG_ADAM_EPS, TRAIN_FLAG_ZERO_STAGE,
    TRAIN_FLAG_ZERO_BUCKET, TRAIN_FLAG_ZERO_PREFETCH, TRAIN_FLAG_ZERO_MAX_LIVE, TRAIN_FLAG_ZERO_PERSIST,
    TRAIN_FLAG_OFFLOAD_OPTIMIZER, TRAIN_FLAG_OFFLOAD_PARAM, TRAIN_FLAG_NVME_PATH, TRAIN_FLAG_ACT_OFFLOAD,
    TRAIN_FLAG_QWZ, TRAIN_FLAG_HPZ, TRAIN_FLAG_QGZ, TRAIN_FLAG_DEEPSPEED, TRAIN_FLAG_AIO_QUEUE_DEPTH,
    TRAIN_FLAG_AIO_BLOCK_SIZE, TRAIN_FLAG_FAST_REDUCE, TRAIN_FLAG_OFFLOAD_RATIO, TRAIN_FLAG_ZERO_TIMEOUT,
    TRAIN_FLAG_NODE_SIZE, TRAIN_FLAG_DRY_RUN_WORLD, TRAIN_FLAG_TRACE_STEPS, TRAIN_FLAG_COUNT
} TrainFlag;
#define TRAIN_FLAG_FIRST_CLI_ONLY TRAIN_FLAG_ZERO_TIMEOUT
#define TRAIN_FLAG_BIT(f) (1u << (f))

// --offload-* values, in the order of zero/'s ZeroTier (DeepSpeed's device names).
enum { TRAIN_OFFLOAD_NONE = 0, TRAIN_OFFLOAD_CPU = 1, TRAIN_OFFLOAD_NVME = 2 };
extern const char *const train_offload_names[3];   // "none", "cpu", "nvme"
// The value of a name above, or -1.
int train_offload_parse(const char *name);

// The trainers call train_args_parse (train_args.h): these flags, then a DeepSpeed file
// (ds_config.c applies it onto what the flags gave), then these checks.
// Fills defaults for the given trainer ("cpu", "cuda" or "cuda-zero"), then parses argv's
// flags. Returns 1 on -h (nothing else parsed), 0 otherwise; prints what is wrong and exits
// 1 on a bad flag or value.
int train_config_parse_flags(TrainConfig *c, int argc, char **argv, const char *flavour);
// The checks of the combination (flags and file together): prints and exits 1 when wrong.
void train_config_check(TrainConfig *c, const char *flavour);
void train_config_usage(const char *prog, const char *flavour);
// 1 when the trainer takes ZeRO's flags (and --deepspeed).
int train_config_has_zero(const char *flavour);
// Prints the resolved configuration as a table (rank 0).
void train_config_print(const TrainConfig *c, int grad_accum, int world);
// A memory size: a number (digits, optionally a fraction: 79.5) and an optional unit, K M
// G T or KiB MiB GiB TiB (powers of 1024), KB MB GB TB (powers of 1000), B (bytes); case
// does not matter. Sets *bytes (rounded down) and returns 0 when it is in [1, 2^60];
// returns -1 for anything else.
int train_config_parse_bytes(const char *s, uint64_t *bytes);

#ifdef __cplusplus
}
#endif
#endif
