// test_ds_config.c: DeepSpeed's config file (llmc/run/ds_config.c) against values written
// here: every implemented key lands in its TrainConfig field, "auto" keeps the flag or
// default, wrong types and out-of-range values are refused naming the key, features of
// later issues are refused ("not supported yet") unless off, unknown keys are warned
// about by name, a flag the file contradicts is an error naming both with both values,
// and DeepSpeed's train_batch_size = micro x accumulation x world is checked or filled in.
// Also the AdamW flags (--beta1 --beta2 --adam-eps) and their ranges.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <time.h>

#include "../../../llmc/run/ds_config.h"
#include "../common/test_util.h"
#include "../../../llmc/run/train_common.h"
#include "../../../llmc/run/train_args.h"
#include "../../../llmc/run/train_config.h"

static char g_path[64];  // the config file each test writes
static char g_log[8192]; // what the last apply() printed

static int group_setup(void **state) {
    (void)state;
    snprintf(g_path, sizeof(g_path), "/tmp/test_ds_config_XXXXXX");
    int fd = mkstemp(g_path);
    if (fd < 0) return -1;
    close(fd);
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    return remove(g_path);
}

static void write_config_bytes(const char *bytes, size_t len) {
    FILE *f = fopen(g_path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, len, f), len);
    fclose(f);
}

static void write_config(const char *json) { write_config_bytes(json, strlen(json)); }

// The CPU trainer's command line (space-separated flags, "" for none) parsed into c.
static void parse_flags(TrainConfig *c, const char *flags) {
    static char buf[512];
    static char *argv[64];
    snprintf(buf, sizeof(buf), "%s", flags);
    int argc = 0;
    argv[argc++] = "train_gpt2";
    for (char *tok = strtok(buf, " "); tok && argc < 63; tok = strtok(NULL, " ")) argv[argc++] = tok;
    argv[argc] = NULL;
    train_args_parse(c, argc, argv, "cpu");
}

// A stream for the code under test to print to; log_end puts what it printed in g_log.
static char *g_out;
static size_t g_out_len;
static FILE *log_begin(void) {
    FILE *log = open_memstream(&g_out, &g_out_len);
    assert_non_null(log);
    return log;
}
static void log_end(FILE *log) {
    fclose(log);
    snprintf(g_log, sizeof(g_log), "%s", g_out);
    free(g_out);
}

// Flags, then the config file: ds_config_apply's result, its output in g_log.
static int apply(TrainConfig *c, const char *flags, const char *json) {
    parse_flags(c, flags);
    write_config(json);
    c->deepspeed = g_path;
    FILE *log = log_begin();
    int rc = ds_config_apply(c, g_path, log);
    log_end(log);
    return rc;
}

static void expect_log(const char *needle) {
    if (strstr(g_log, needle) == NULL) fail_msg("output lacks \"%s\"; it was: %s", needle, g_log);
}

// Refused: apply() returns -1 and says each of the NULL-terminated strings.
static void expect_refused(const char *flags, const char *json, ...) {
    TrainConfig c;
    if (apply(&c, flags, json) != -1) fail_msg("accepted: %s %s (output: %s)", flags, json, g_log);
    expect_log("error: ");
    va_list ap;
    va_start(ap, json);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;) expect_log(s);
    va_end(ap);
}

// The file is read without a word and leaves the configuration exactly as the flags made it.
static void expect_no_change(const char *flags, const char *json) {
    TrainConfig c, d;
    parse_flags(&d, flags);
    assert_int_equal(apply(&c, flags, json), 0);
    assert_string_equal(g_log, "");
    assert_int_equal(c.from_file, 0);
    c.deepspeed = d.deepspeed;  // the only field apply() itself set
    assert_memory_equal(&c, &d, sizeof(c));
}

// ---------------------------------------------------------------------------------

static void test_every_key_sets_its_field(void **state) {
    (void)state;
    TrainConfig c, d;
    parse_flags(&d, "");  // the defaults, to see that every value below differs from them
    int rc = apply(&c, "-t 16",
                   "{\"train_micro_batch_size_per_gpu\": 3, \"gradient_accumulation_steps\": 5,"
                   " \"train_batch_size\": 30, \"gradient_clipping\": 0.25,"
                   " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.004, \"betas\": [0.8, 0.99],"
                   "   \"eps\": 1e-6, \"weight_decay\": 0.05, \"adam_w_mode\": true, \"bias_correction\": true}},"
                   " \"zero_optimization\": {\"stage\": 3, \"reduce_bucket_size\": 5e5,"
                   "   \"stage3_prefetch_bucket_size\": 70000, \"stage3_max_live_parameters\": 900000,"
                   "   \"stage3_param_persistence_threshold\": 1000,"
                   "   \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"/local_nvme\", \"pin_memory\": true,"
                   "     \"ratio\": 0.75},"
                   "   \"offload_param\": {\"device\": \"cpu\", \"nvme_path\": \"/local_nvme\"},"
                   "   \"zero_quantized_weights\": true, \"zero_hpz_partition_size\": 8, \"zero_quantized_gradients\": true},"
                   " \"activation_checkpointing\": {\"cpu_checkpointing\": true, \"partition_activations\": false},"
                   " \"aio\": {\"block_size\": 262144, \"queue_depth\": 32, \"thread_count\": 1, \"single_submit\": false,"
                   "   \"overlap_events\": true, \"intra_op_parallelism\": 1, \"use_gds\": false},"
                   " \"fp16\": {\"enabled\": false, \"loss_scale\": 0}, \"bf16\": {\"enabled\": false},"
                   " \"communication_data_type\": \"bf16\"}");
    assert_int_equal(rc, 0);
    assert_string_equal(g_log, "");  // every key known: no warning
    assert_int_equal(c.B, 3);
    assert_int_equal(c.grad_accum_steps, 5);
    assert_int_equal(c.total_batch_tokens, 30 * 16);  // sequences x T
    assert_true(c.grad_clip == 0.25f && d.grad_clip != 0.25f);
    assert_true(c.lr == 0.004f && d.lr != 0.004f);
    assert_true(c.beta1 == 0.8f && d.beta1 != 0.8f);
    assert_true(c.beta2 == 0.99f && d.beta2 != 0.99f);
    assert_true(c.adam_eps == 1e-6f && d.adam_eps != 1e-6f);
    assert_true(c.weight_decay == 0.05f && d.weight_decay != 0.05f);
    assert_int_equal(c.zero_stage, 3);
    assert_int_equal(c.zero_bucket, 500000);
    assert_int_equal(c.zero_prefetch, 70000);
    assert_int_equal(c.zero_max_live, 900000);
    assert_int_equal(c.zero_persist, 1000);
    assert_int_equal(c.offload_optimizer, TRAIN_OFFLOAD_NVME);
    assert_int_equal(c.offload_param, TRAIN_OFFLOAD_CPU);
    assert_string_equal(c.nvme_path, "/local_nvme");
    assert_true(d.offload_optimizer == TRAIN_OFFLOAD_NONE && d.offload_param == TRAIN_OFFLOAD_NONE && !d.nvme_path);
    assert_true(c.act_offload == 1 && d.act_offload == 0);
    assert_true(c.qwz == 1 && c.hpz == 8 && c.qgz == 1 && d.qwz == 0 && d.hpz == 0 && d.qgz == 0);
    assert_true(c.fast_reduce == 1 && d.fast_reduce == 0);
    assert_true(c.offload_ratio == 0.75f && d.offload_ratio == 1.0f);
    assert_true(c.aio_block_size == 262144 && c.aio_queue_depth == 32 && d.aio_block_size == 0 && d.aio_queue_depth == 0);
    assert_true(d.B != 3 && d.zero_stage != 3 && d.zero_bucket != 500000 && d.zero_prefetch != 70000 &&
                d.zero_max_live != 900000 && d.zero_persist != 1000);
    unsigned all = 0;
    for (int f = 0; f < TRAIN_FLAG_FIRST_CLI_ONLY; f++)   // the flags a file may set
        if (f != TRAIN_FLAG_DEEPSPEED) all |= TRAIN_FLAG_BIT(f);
    assert_int_equal(c.from_file, all);
    assert_int_equal(c.given, 0);
    // "Adam" (any case) is DeepSpeed's AdamW too
    assert_int_equal(apply(&c, "", "{\"optimizer\": {\"type\": \"adam\"}}"), 0);
}

static void test_auto_keeps_the_trainer_value(void **state) {
    (void)state;
    expect_no_change("-l 0.0005",
                     "{\"train_micro_batch_size_per_gpu\": \"auto\", \"train_batch_size\": \"auto\","
                     " \"gradient_accumulation_steps\": \"auto\", \"gradient_clipping\": \"auto\","
                     " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": \"auto\", \"betas\": \"auto\","
                     "   \"eps\": \"auto\", \"weight_decay\": \"auto\"}},"
                     " \"zero_optimization\": {\"stage\": \"auto\", \"reduce_bucket_size\": \"auto\","
                     "   \"stage3_prefetch_bucket_size\": \"auto\", \"stage3_param_persistence_threshold\": \"auto\","
                     "   \"stage3_max_live_parameters\": \"auto\"}}");
}

static void test_wrong_types_and_ranges(void **state) {
    (void)state;
    static const struct { const char *json, *says; } bad[] = {
        {"{\"zero_optimization\": {\"stage\": \"3\"}}", "zero_optimization.stage must be an integer, got \"3\""},
        {"{\"communication_data_type\": \"fp16\"}", "communication_data_type must be \"fp32\""},
        {"{\"communication_data_type\": 16}", "communication_data_type must be \"fp32\""},
        {"{\"zero_optimization\": {\"stage\": 2.5}}", "zero_optimization.stage must be an integer in [0, 3], got 2.5"},
        {"{\"zero_optimization\": {\"stage\": 4}}", "zero_optimization.stage must be an integer in [0, 3], got 4"},
        {"{\"zero_optimization\": {\"stage\": true}}", "zero_optimization.stage must be an integer, got true"},
        {"{\"zero_optimization\": 3}", "zero_optimization must be an object, got 3"},
        {"{\"zero_optimization\": {\"reduce_bucket_size\": -1}}",
         "zero_optimization.reduce_bucket_size must be an integer in [0,"},
        {"{\"zero_optimization\": {\"stage3_prefetch_bucket_size\": 1e13}}",
         "stage3_prefetch_bucket_size must be an integer in"},
        {"{\"zero_optimization\": {\"stage3_max_live_parameters\": null}}",
         "stage3_max_live_parameters must be an integer, got null"},
        {"{\"zero_optimization\": {\"stage3_param_persistence_threshold\": \"1e5\"}}",
         "stage3_param_persistence_threshold must be an integer"},
        {"{\"train_micro_batch_size_per_gpu\": 0}", "train_micro_batch_size_per_gpu must be an integer in [1,"},
        {"{\"gradient_accumulation_steps\": 1.5}", "gradient_accumulation_steps must be an integer in [1,"},
        {"{\"train_batch_size\": [8]}", "train_batch_size must be an integer, got [8]"},
        {"{\"train_batch_size\": 1e12}", "more than 2^40 tokens"},
        {"{\"gradient_clipping\": \"1.0\"}", "gradient_clipping must be a number, got \"1.0\""},
        {"{\"optimizer\": {\"params\": {\"lr\": -0.1}}}", "optimizer.params.lr must be a number in [0, 10], got -0.1"},
        {"{\"optimizer\": {\"params\": {\"betas\": [0.9]}}}",
         "optimizer.params.betas must be an array of 2 numbers, got [0.9]"},
        {"{\"optimizer\": {\"params\": {\"betas\": 0.9}}}", "optimizer.params.betas must be an array of 2 numbers"},
        {"{\"optimizer\": {\"params\": {\"betas\": [0.9, 1.0]}}}",
         "optimizer.params.betas[1] must be a number in [0, 1), got 1"},
        {"{\"optimizer\": {\"params\": {\"betas\": [0.999999999, 0.9]}}}",
         "optimizer.params.betas[0] must be a number in [0, 1)"},
        {"{\"optimizer\": {\"params\": {\"betas\": [\"a\", 0.9]}}}",
         "optimizer.params.betas[0] must be a number, got \"a\""},
        {"{\"optimizer\": {\"params\": {\"eps\": 0}}}", "optimizer.params.eps must be a number in [1e-30, 1], got 0"},
        {"{\"optimizer\": {\"params\": {\"weight_decay\": 11}}}",
         "optimizer.params.weight_decay must be a number in [0, 10]"},
        {"{\"optimizer\": {\"params\": []}}", "optimizer.params must be an object"},
        // nonzero, but 0 as the float the trainer holds: a rate of 0, clipping off
        {"{\"optimizer\": {\"params\": {\"lr\": 1e-50}}}", "optimizer.params.lr 1e-50 is too small for a float (it would be 0)"},
        {"{\"gradient_clipping\": 1e-46}", "gradient_clipping 1e-46 is too small for a float (it would be 0)"},
        {"{\"zero_optimization\": {\"offload_optimizer\": {\"pin_memory\": \"yes\"}}}",
         "zero_optimization.offload_optimizer.pin_memory must be true or false, got \"yes\""},
        {"{\"zero_optimization\": {\"offload_param\": {\"nvme_path\": 5}}}",
         "zero_optimization.offload_param.nvme_path must be a folder's path (a string) or null, got 5"},
        {"{\"zero_optimization\": {\"offload_optimizer\": {\"ratio\": 1.5}}}",
         "zero_optimization.offload_optimizer.ratio must be a number in [0, 1], got 1.5"},
        {"{\"zero_optimization\": {\"offload_optimizer\": {\"device\": \"disk\"}}}",
         "zero_optimization.offload_optimizer.device must be \"none\", \"cpu\" or \"nvme\", got \"disk\""},
        {"{\"activation_checkpointing\": {\"cpu_checkpointing\": 1}}",
         "activation_checkpointing.cpu_checkpointing must be true or false, got 1"},
        {"{\"zero_optimization\": {\"offload_param\": {\"device\": true}}}",
         "zero_optimization.offload_param.device must be \"none\", \"cpu\" or \"nvme\", got true"},
        {"{\"zero_optimization\": {\"offload_optimizer\": {\"nvme_path\": \"/a\"}, \"offload_param\": {\"nvme_path\": \"/b\"}}}",
         "zero_optimization.offload_param.nvme_path = /b disagrees with the --nvme-path set before (/a)"},
        // accumulation: at most TRAIN_MAX_GRAD_ACCUM (2^30 was accepted before)
        {"{\"gradient_accumulation_steps\": 1073741824}",
         "gradient_accumulation_steps must be an integer in [1, 65536], got 1073741824 (this trainer's bound"},
        {"{\"gradient_accumulation_steps\": 65537}", "gradient_accumulation_steps must be an integer in [1, 65536]"},
        {"{\"gradient_accumulation_steps\": 0}", "gradient_accumulation_steps must be an integer in [1, 65536], got 0"},
        // the aio section: what the NVMe engine takes
        {"{\"aio\": {\"block_size\": 5000}}", "aio.block_size must be an integer in [4096, 1.07374e+09], a multiple "
         "of 4096, got 5000"},
        {"{\"aio\": {\"block_size\": 0}}", "aio.block_size must be an integer in [4096,"},
        {"{\"aio\": {\"queue_depth\": 0}}", "aio.queue_depth must be an integer in [1, 256], got 0"},
        {"{\"aio\": {\"queue_depth\": 1024}}", "aio.queue_depth must be an integer in [1, 256], got 1024"},
        {"{\"aio\": {\"thread_count\": \"2\"}}", "aio.thread_count must be a number, got \"2\""},
        {"{\"aio\": {\"single_submit\": 1}}", "aio.single_submit must be true or false, got 1"},
        {"{\"aio\": 8}", "aio must be an object, got 8"},
        // the deprecated offload switches
        {"{\"zero_optimization\": {\"cpu_offload\": \"yes\"}}", "zero_optimization.cpu_offload must be true or false"},
        {"{\"zero_optimization\": {\"cpu_offload\": true, \"offload_optimizer\": {\"device\": \"cpu\"}}}",
         "zero_optimization.cpu_offload is DeepSpeed's deprecated form of zero_optimization.offload_optimizer, and both "
         "are given"},
        {"{\"zero_optimization\": {\"offload_param\": {\"device\": \"none\"}, \"cpu_offload_param\": false}}",
         "zero_optimization.cpu_offload_param is DeepSpeed's deprecated form of zero_optimization.offload_param"},
        {"{\"zero_optimization\": {\"cpu_offload_params\": true, \"offload_param\": {\"device\": \"nvme\"}}}",
         "zero_optimization.cpu_offload_params is DeepSpeed's deprecated form of zero_optimization.offload_param"},
        // precision sections
        {"{\"fp16\": {\"enabled\": \"yes\"}}", "fp16.enabled must be true, false or \"auto\", got \"yes\""},
        {"{\"bf16\": true}", "bf16 must be an object, got true"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        expect_refused("", bad[i].json, bad[i].says, g_path, NULL);
}

static void test_later_features_refused_unless_off(void **state) {
    (void)state;
    static const struct { const char *json, *says; } later[] = {
        {"{\"optimizer\": {\"params\": {\"adam_w_mode\": false}}}",
         "optimizer.params.adam_w_mode = false is not supported yet"},
        {"{\"activation_checkpointing\": {\"partition_activations\": true}}",
         "activation_checkpointing.partition_activations = true is not supported yet"},
        {"{\"optimizer\": {\"params\": {\"bias_correction\": false}}}",
         "optimizer.params.bias_correction = false is not supported yet"},
        {"{\"optimizer\": {\"type\": \"Lamb\"}}", "optimizer.type \"Lamb\" is not supported"},
        {"{\"optimizer\": {\"type\": \"OneBitAdam\"}}", "optimizer.type \"OneBitAdam\" is not supported"},
        {"{\"aio\": {\"use_gds\": true}}", "aio.use_gds = true is not supported yet"},
        {"{\"optimizer\": {\"params\": {\"amsgrad\": true}}}", "optimizer.params.amsgrad = true is not supported yet"},
        // a scheduler would train with another schedule than the one it names: refused, with the flags
        {"{\"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"warmup_num_steps\": 10}}}",
         "scheduler.params.warmup_num_steps = 10: DeepSpeed's learning-rate schedulers are not this trainer's; its "
         "schedule is llm.c's, set by flags: -k cosine|linear|constant|wsd, -u warmup steps"},
        {"{\"scheduler\": \"WarmupLR\"}", "scheduler: DeepSpeed's learning-rate schedulers are not this trainer's"},
    };
    for (size_t i = 0; i < sizeof(later) / sizeof(later[0]); i++)
        expect_refused("", later[i].json, later[i].says, NULL);
    // their "off" values, written out, are fine (and change nothing)
    expect_no_change("", "{\"scheduler\": \"auto\", \"optimizer\": {\"params\": {\"amsgrad\": false}}}");
    expect_no_change("", "{\"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"warmup_num_steps\": \"auto\"}}}");
    expect_no_change("", "{\"zero_optimization\": {"
                         " \"offload_optimizer\": {\"pin_memory\": true, \"nvme_path\": null},"
                         " \"offload_param\": {\"nvme_path\": null, \"pin_memory\": false}}}");
}

static void test_unknown_keys_warned_by_name(void **state) {
    (void)state;
    TrainConfig c;
    assert_int_equal(apply(&c, "",
                           "{\"fp16\": {\"enabled\": true}, \"steps_per_print\": 10,"
                           " \"zero_optimization\": {\"stage\": 1, \"overlap_comm\": true},"
                           " \"optimizer\": {\"params\": {\"lr\": 0.001, \"torch_adam\": false}}}"),
                     0);
    expect_log("warning: ");
    expect_log(g_path);
    // fp16 has a message of its own (test_precision), not a place in the list
    expect_log("ignoring 3 keys this trainer does not know: steps_per_print, "
               "zero_optimization.overlap_comm, optimizer.params.torch_adam");
    expect_log("fp16.enabled true: no fp16 runs here");
    assert_null(strstr(g_log, "error"));
    assert_int_equal(c.zero_stage, 1);  // the known keys beside them still apply
    assert_true(c.lr == 0.001f);
    // a key that spells a path is no key of the table: nothing it names is set (a second value
    // for the stage or a beta, past the one-object duplicate check), and it is named
    assert_int_equal(apply(&c, "",
                           "{\"zero_optimization\": {\"stage\": 3}, \"zero_optimization.stage\": 0,"
                           " \"optimizer\": {\"params\": {\"betas\": [0.8, 0.95], \"betas[0]\": 0.5}},"
                           " \"optimizer.params.lr\": 0.005}"),
                     0);
    expect_log("ignoring 3 keys this trainer does not know: zero_optimization.stage, optimizer.params.betas[0], "
               "optimizer.params.lr");
    assert_int_equal(c.zero_stage, 3);
    assert_true(c.beta1 == 0.8f);
    TrainConfig d;
    parse_flags(&d, "");
    assert_true(c.lr == d.lr);
}

static void test_flag_contradicting_the_file(void **state) {
    (void)state;
    static const struct { const char *flags, *json, *says; } clash[] = {
        {"-b 4", "{\"train_micro_batch_size_per_gpu\": 2}", "-b 4 contradicts train_micro_batch_size_per_gpu = 2 in"},
        {"-t 32 -d 1024", "{\"train_batch_size\": 16}",
         "-d 1024 contradicts train_batch_size = 16 (x T=32 = 512 tokens) in"},
        {"--grad-clip 2", "{\"gradient_clipping\": 1.0}", "--grad-clip 2 contradicts gradient_clipping = 1 in"},
        {"-l 0.001",
         "{\"optimizer\": {\"params\": {\"lr\": 0.002}}}", "-l 0.001 contradicts optimizer.params.lr = 0.002 in"},
        {"--beta1 0.8", "{\"optimizer\": {\"params\": {\"betas\": [0.9, 0.95]}}}",
         "--beta1 0.8 contradicts optimizer.params.betas[0] = 0.9 in"},
        {"--beta2 0.999", "{\"optimizer\": {\"params\": {\"betas\": [0.9, 0.95]}}}",
         "--beta2 0.999 contradicts optimizer.params.betas[1] = 0.95 in"},
        {"--adam-eps 1e-6", "{\"optimizer\": {\"params\": {\"eps\": 1e-8}}}",
         "--adam-eps 1e-06 contradicts optimizer.params.eps = 1e-08 in"},
        {"-c 0.1", "{\"optimizer\": {\"params\": {\"weight_decay\": 0.0}}}",
         "-c 0.1 contradicts optimizer.params.weight_decay = 0 in"},
        {"-z 2", "{\"zero_optimization\": {\"stage\": 3}}", "-z 2 contradicts zero_optimization.stage = 3 in"},
        {"-z 1 --fast-reduce", "{\"communication_data_type\": \"fp32\"}",
         "--fast-reduce (on) contradicts communication_data_type = fp32 in"},
        {"-z 3 --zero-bucket 1000", "{\"zero_optimization\": {\"reduce_bucket_size\": 5e8}}",
         "--zero-bucket 1000 contradicts zero_optimization.reduce_bucket_size = 500000000 in"},
        {"-z 3 --zero-prefetch 10", "{\"zero_optimization\": {\"stage3_prefetch_bucket_size\": 20}}",
         "--zero-prefetch 10 contradicts zero_optimization.stage3_prefetch_bucket_size = 20 in"},
        {"-z 3 --zero-max-live 0", "{\"zero_optimization\": {\"stage3_max_live_parameters\": 1e9}}",
         "--zero-max-live 0 contradicts zero_optimization.stage3_max_live_parameters = 1000000000 in"},
        {"-z 3 --zero-persist 100000", "{\"zero_optimization\": {\"stage3_param_persistence_threshold\": 1e4}}",
         "--zero-persist 100000 contradicts zero_optimization.stage3_param_persistence_threshold = 10000 in"},
        {"--act-checkpoint 1 --act-offload 0", "{\"activation_checkpointing\": {\"cpu_checkpointing\": true}}",
         "--act-offload 0 contradicts activation_checkpointing.cpu_checkpointing = true in"},
        {"-z 3 --hpz 2", "{\"zero_optimization\": {\"zero_hpz_partition_size\": 4}}",
         "--hpz 2 contradicts zero_optimization.zero_hpz_partition_size = 4 in"},
    };
    for (size_t i = 0; i < sizeof(clash) / sizeof(clash[0]); i++)
        expect_refused(clash[i].flags, clash[i].json, clash[i].says, g_path, NULL);
    // a flag that agrees with the file is fine, and so is a default the file changes
    TrainConfig c;
    assert_int_equal(apply(&c, "-z 2 -b 2 -t 32 -d 512 --beta1 0.8",
                           "{\"zero_optimization\": {\"stage\": 2}, \"train_micro_batch_size_per_gpu\": 2,"
                           " \"train_batch_size\": 16, \"optimizer\": {\"params\": {\"betas\": [0.8, 0.9]}}}"),
                     0);
    assert_true(c.beta1 == 0.8f && c.beta2 == 0.9f);
    assert_int_equal(c.given & TRAIN_FLAG_BIT(TRAIN_FLAG_BETA2), 0);
}

// DeepSpeed's rule: train_batch_size = micro x accumulation x world.
static void test_batch_rule(void **state) {
    (void)state;
    // -t 16 throughout; B and tokens are what the trainer then holds (rc 0), says what is wrong (rc -1)
    static const struct {
        const char *flags, *json;
        int world, rc, B;
        long tokens;
        const char *says;
    } cases[] = {
        // all three, consistent (2 x 3 x 4 = 24), then the same file on 2 ranks
        {"", "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 3, \"train_batch_size\": 24}",
         4, 0, 2, 24 * 16, ""},
        {"", "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 3, \"train_batch_size\": 24}",
         2, -1, 0, 0,
         "train_batch_size 24 != train_micro_batch_size_per_gpu 2 x gradient_accumulation_steps 3 x 2 ranks = "
         "12 sequences"},
        // micro and accumulation: the total follows
        {"",
         "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 3}", 4, 0, 2, 2 * 3 * 4 * 16, ""},
        // total and accumulation, no micro batch anywhere (or "auto"): DeepSpeed infers it
        {"", "{\"gradient_accumulation_steps\": 3, \"train_batch_size\": 48}", 4, 0, 4, 48 * 16, ""},
        {"",
         "{\"gradient_accumulation_steps\": 1, \"train_batch_size\": 24, \"train_micro_batch_size_per_gpu\": \"auto\"}",
         4, 0, 6, 24 * 16, ""},
        {"", "{\"gradient_accumulation_steps\": 3, \"train_batch_size\": 50}", 4, -1, 0, 0,
         "train_batch_size 50 does not split into gradient_accumulation_steps 3 x 4 ranks"},
        // ... but -b given: checked, not inferred
        {"-b 2", "{\"gradient_accumulation_steps\": 3, \"train_batch_size\": 48}", 4, -1, 0, 0,
         "train_batch_size 48 != -b 2 x gradient_accumulation_steps 3 x 4 ranks = 24 sequences"},
        // total and micro: the accumulation must come out whole
        {"", "{\"train_micro_batch_size_per_gpu\": 2, \"train_batch_size\": 24}", 4, 0, 2, 24 * 16, ""},
        {"", "{\"train_micro_batch_size_per_gpu\": 2, \"train_batch_size\": 20}", 4, -1, 0, 0,
         "train_batch_size 20 is not a multiple of train_micro_batch_size_per_gpu 2 x 4 ranks"},
        // without the accumulation the micro batch's default stays, and is named as such
        {"", "{\"train_batch_size\": 10}", 4, -1, 0, 0,
         "train_batch_size 10 is not a multiple of micro-batch 4 (-b's default) x 4 ranks"},
        // -d against the file's accumulation
        {"-b 2 -d 512", "{\"gradient_accumulation_steps\": 3}", 4, -1, 0, 0,
         "-d 512 tokens (32 sequences of T=16) != -b 2 x gradient_accumulation_steps 3 x 4 ranks = 24 sequences"},
        // neither total nor accumulation in the file: -d's own rule (resolve_grad_accum), untouched
        {"-b 2", "{\"train_micro_batch_size_per_gpu\": 2}", 3, 0, 2, -1, ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        TrainConfig c;
        char flags[64];
        snprintf(flags, sizeof(flags), "-t 16 %s", cases[i].flags);
        assert_int_equal(apply(&c, flags, cases[i].json), 0);
        FILE *log = log_begin();
        int rc = ds_config_resolve_batch(&c, cases[i].world, log);
        log_end(log);
        if (rc != cases[i].rc) fail_msg("case %zu: rc %d, want %d (output: %s)", i, rc, cases[i].rc, g_log);
        expect_log(cases[i].says);
        if (rc == 0) {
            assert_int_equal(c.B, cases[i].B);
            assert_int_equal(c.total_batch_tokens, cases[i].tokens);
        }
    }
}

static void test_bad_files(void **state) {
    (void)state;
    expect_refused("", "{\"zero_optimization\": {\"stage\": 1,}}", "is not valid JSON (line 1", g_path, NULL);
    expect_refused("", "{\n  \"a\": 1,\n  \"b\": \n}", "is not valid JSON (line 4", NULL);
    expect_refused("", "{} {}", "is not valid JSON", NULL);
    expect_refused("", "[1, 2]", "a DeepSpeed config is a JSON object", NULL);
    expect_refused("", "", "is not valid JSON", NULL);
    expect_refused("", "{\"zero_optimization\": {\"stage\": 1, \"stage\": 2}}", "zero_optimization.stage appears twice",
                   NULL);
    // in a section the trainer ignores too, and in an object inside an array
    expect_refused("", "{\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"a\": 1, \"a\": 2}}}",
                   "scheduler.params.a appears twice", NULL);
    expect_refused("", "{\"x\": [1, {\"b\": 1, \"b\": 1}]}", "x[1].b appears twice", NULL);
    TrainConfig c;
    parse_flags(&c, "");
    FILE *log = log_begin();
    assert_int_equal(ds_config_apply(&c, "/nonexistent/ds.json", log), -1);
    log_end(log);
    expect_log("cannot open DeepSpeed config '/nonexistent/ds.json'");
}

// Through train_args_parse, as the trainers call it (errors exit 1).
static char *g_argv[16];
static void parse_in_child(void *arg) {
    TrainConfig c;
    int argc = 0;
    while (g_argv[argc]) argc++;
    train_args_parse(&c, argc, g_argv, (const char *)arg);
}

static void test_command_line(void **state) {
    (void)state;
    // the CPU trainer runs a config file only under ZeRO
    write_config("{\"optimizer\": {\"params\": {\"lr\": 0.001}}}");
    char *no_stage[] = {"train_gpt2", "--deepspeed", g_path, NULL};
    memcpy(g_argv, no_stage, sizeof(no_stage));
    expect_death(parse_in_child, "cpu", 1, "--deepspeed configures a ZeRO run", g_path, NULL);
    // an error in the file ends the parse with the file's message
    write_config("{\"activation_checkpointing\": {\"partition_activations\": true}}");
    expect_death(parse_in_child, "cuda-zero", 1, "partition_activations = true is not supported yet", NULL);
    // offload from the file: checked like the flags (parameters need stage 3, nvme a folder)
    write_config("{\"zero_optimization\": {\"stage\": 2, \"offload_param\": {\"device\": \"cpu\"}}}");
    expect_death(parse_in_child, "cuda-zero", 1, "--offload-param cpu needs -z 3", NULL);
    write_config("{\"zero_optimization\": {\"stage\": 1, \"offload_optimizer\": {\"device\": \"nvme\"}}}");
    expect_death(parse_in_child, "cpu", 1, "offload to nvme needs --nvme-path DIR", NULL);
    write_config("{\"zero_optimization\": {\"stage\": 1, \"offload_optimizer\": {\"device\": \"cpu\"}}}");
    char *contra[] = {"train_gpt2", "--deepspeed", g_path, "--offload-optimizer", "nvme", "--nvme-path", "/tmp", NULL};
    memcpy(g_argv, contra, sizeof(contra));
    expect_death(parse_in_child, "cpu", 1, "--offload-optimizer nvme contradicts zero_optimization.offload_optimizer.device = cpu",
                 NULL);
    memcpy(g_argv, no_stage, sizeof(no_stage));
    // train_gpt2cu trains unsharded: a config file is a ZeRO option it refuses
    expect_death(parse_in_child, "cuda", 1, "--deepspeed is a ZeRO option", NULL);
    // the file's stage makes it a ZeRO run; the flags' values stay where it says nothing
    write_config("{\"zero_optimization\": {\"stage\": 2}}");
    TrainConfig c;
    char *ok[] = {"train_gpt2", "--deepspeed", g_path, "-l", "0.0007", NULL};
    train_args_parse(&c, 5, ok, "cpu");
    assert_int_equal(c.zero_stage, 2);
    assert_true(c.lr == 0.0007f);
    assert_ptr_equal(c.deepspeed, g_path);
    assert_int_equal(c.given, TRAIN_FLAG_BIT(TRAIN_FLAG_DEEPSPEED) | TRAIN_FLAG_BIT(TRAIN_FLAG_LR));
    // the AdamW flags and their ranges
    char *adamw[] = {"train_gpt2", "--beta1", "0", "--beta2", "0.999", "--adam-eps", "1e-6", NULL};
    train_args_parse(&c, 7, adamw, "cpu");
    assert_true(c.beta1 == 0.0f && c.beta2 == 0.999f && c.adam_eps == 1e-6f);
    parse_flags(&c, "");
    assert_true(c.beta1 == 0.9f && c.beta2 == 0.95f && c.adam_eps == 1e-8f);  // the values hard-coded before
    static const struct { const char *flag, *value, *says; } bad[] = {
        {"--beta1", "1", "--beta1 expects a number in [0, 1), got '1'"},
        {"--beta1", "0.9999999999", "--beta1 expects a number in [0, 1)"},
        {"--beta2", "-0.1", "--beta2 expects a number in [0, 1), got '-0.1'"},
        {"--beta2", "x", "--beta2 expects a number"},
        {"--adam-eps", "0", "--adam-eps expects a number in [1e-30, 1], got '0'"},
        {"--deepspeed", "/nonexistent/ds.json", "cannot open DeepSpeed config '/nonexistent/ds.json'"},
        // past the range of strtol/strtod: refused, not clamped to LONG_MAX (or rounded to 0)
        {"--seed", "99999999999999999999", "--seed expects an integer in [0, 9223372036854775807], got "
         "'99999999999999999999'"},
        {"--seed", "-99999999999999999999", "--seed expects an integer in [0,"},
        {"-l", "1e-999", "-l expects a number in [0, 10], got '1e-999'"},
        {"--grad-clip", "1e999", "--grad-clip expects a number in [-1, 1e+09], got '1e999'"},
        // -x 0 trains nothing: said so, not "the train data holds less than one step"
        {"-x", "0", "-x expects -1 (one epoch of the train data) or a number of optimizer steps in [1, 1073741824], "
         "got '0'"},
        {"-x", "-2", "-x expects -1 (one epoch of the train data) or a number of optimizer steps"},
        {"--nan-skip-limit", "3", "--nan-skip-limit 3 limits --nan-skip's skipped steps: give --nan-skip too"},
        {"--nan-skip-limit", "0", "--nan-skip-limit expects an integer in [1, 1073741824], got '0'"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *argv[] = {"train_gpt2", "-z", "1", (char *)bad[i].flag, (char *)bad[i].value, NULL};
        memcpy(g_argv, argv, sizeof(argv));
        expect_death(parse_in_child, "cpu", 1, bad[i].says, NULL);
    }
}

// -d and the DeepSpeed batch keys through resolve_grad_accum, as the trainers call it:
// flags, the file, then the geometry on `world` ranks (errors exit 1; success exits 0
// after printing the accumulation).
static struct { const char *flags, *json; int world; } g_geo;
static void resolve_in_child(void *arg) {
    (void)arg;
    TrainConfig c;
    if (apply(&c, g_geo.flags, g_geo.json) != 0) {
        fprintf(stderr, "the file was refused: %s", g_log);
        exit(3);
    }
    int accum = resolve_grad_accum(&c, g_geo.world);
    fprintf(stderr, "accumulation %d, %lld tokens per step\n", accum, (long long)c.total_batch_tokens);
    exit(0);
}

static void expect_geometry(const char *flags, const char *json, int world, int status, const char *says) {
    g_geo.flags = flags;
    g_geo.json = json;
    g_geo.world = world;
    expect_death(resolve_in_child, NULL, status, says, NULL);
}

static void test_batch_bounds(void **state) {
    (void)state;
    // -d through an int: 549755814016 = (2^32 + 1) x 128 was accumulation 1 with the loss
    // scaled by 1/5.5e11; 0 and 2^40 were accumulation 0 (every step a NaN)
    expect_geometry("-b 2 -t 64 -d 549755814016", "{}", 1, 1,
                    "-d 549755814016 is 4294967297 micro-batches of B*T*ranks = 2*64*1 = 128 tokens per rank: at most "
                    "65536 gradient accumulation steps are allowed");
    expect_geometry("-b 2 -t 64 -d 1099511627776", "{}", 1, 1, "-d 1099511627776 is 8589934592 micro-batches");
    expect_geometry("-b 2 -t 64 -d 0", "{}", 1, 1,
                    "-d 0 is less than one micro-batch on every rank, B*T*ranks = 2*64*1 = 128 tokens");
    expect_geometry("-b 2 -t 64 -d 64", "{}", 1, 1, "-d 64 is less than one micro-batch on every rank");
    expect_geometry("-b 2 -t 64 -d 128", "{}", 2, 1, "-d 128 is less than one micro-batch on every rank, "
                    "B*T*ranks = 2*64*2 = 256 tokens");
    expect_geometry("-b 2 -t 64 -d 200", "{}", 1, 1, "-d 200 is not a multiple of B*T*ranks = 2*64*1 = 128");
    expect_geometry("-b 1048576 -t 4096", "{}", 1, 1, "-b 1048576 x -t 4096 = 4294967296 tokens in one micro-batch: "
                    "more than the 2147483647 the models index");
    // the bound itself, and the default
    expect_geometry("-b 2 -t 64 -d 8388608", "{}", 1, 0, "accumulation 65536, 8388608 tokens per step");
    expect_geometry("-b 2 -t 64 -d 8388864", "{}", 1, 1, "-d 8388864 is 65538 micro-batches");
    expect_geometry("-b 2 -t 64", "{}", 3, 0, "accumulation 1, 384 tokens per step");
    // the same through the DeepSpeed file's train_batch_size (in sequences of T)
    expect_geometry("-b 2 -t 64", "{\"train_batch_size\": 8589934594}", 1, 1,
                    "train_batch_size 8589934594 (x T=64 = 549755814016 tokens) in '");
    expect_geometry("-b 2 -t 64", "{\"train_batch_size\": 8589934594}", 1, 1, "is 4294967297 micro-batches");
    expect_geometry("-t 64", "{\"train_batch_size\": 1, \"train_micro_batch_size_per_gpu\": 2}", 1, 1,
                    "train_batch_size 1 is not a multiple of train_micro_batch_size_per_gpu 2 x 1 ranks");
    expect_geometry("-t 64", "{\"train_batch_size\": 131072, \"train_micro_batch_size_per_gpu\": 2}", 1, 0,
                    "accumulation 65536");
    expect_geometry("-t 64", "{\"train_batch_size\": 131074, \"train_micro_batch_size_per_gpu\": 2}", 1, 1,
                    "train_batch_size 131074 (x T=64 = 8388736 tokens) in '");
    // DeepSpeed's rule with the bound: the accumulation the file gives, whatever the world
    expect_geometry("-t 64", "{\"train_micro_batch_size_per_gpu\": 1048576, \"gradient_accumulation_steps\": 65536}",
                    1 << 30, 1, "x T=64 x gradient_accumulation_steps 65536 x 1073741824 ranks overflows 64 bits");
    expect_geometry("-t 64", "{\"gradient_accumulation_steps\": 4, \"train_batch_size\": 32}", 2, 0,
                    "accumulation 4, 2048 tokens per step");
}

// The parser where a plain JSON reader lets things through.
static void test_parser_limits(void **state) {
    (void)state;
    // a number past a double's range: cJSON makes it infinity and prints it as null
    expect_refused("", "{\"zero_optimization\": {\"stage3_max_live_parameters\": 1e999}}",
                   "zero_optimization.stage3_max_live_parameters is a number that overflows a double", NULL);
    expect_refused("", "{\"optimizer\": {\"params\": {\"betas\": [-1e400, 0.9]}}}",
                   "optimizer.params.betas[0] is a number that overflows a double", NULL);
    expect_refused("", "{\"unknown_section\": {\"x\": 1e999}}", "unknown_section.x is a number that overflows a double",
                   NULL);
    // a NUL byte: the parser would stop there and a second object setting stage 3 would vanish
    static const char nul[] = "{\"zero_optimization\": {\"stage\": 1}}\0{\"zero_optimization\": {\"stage\": 3}}";
    TrainConfig c;
    parse_flags(&c, "");
    write_config_bytes(nul, sizeof nul - 1);
    FILE *log = log_begin();
    assert_int_equal(ds_config_apply(&c, g_path, log), -1);
    log_end(log);
    expect_log("holds a NUL byte at offset 35 (of 71 bytes)");
    assert_int_equal(c.zero_stage, -1);
    // nesting: cJSON's limit is CJSON_NESTING_LIMIT (1000) levels; one past it is refused as
    // such, not as "not valid JSON"
    for (int levels = 999; levels <= 100001; levels += levels < 1001 ? 1 : 99000) {   // 999, 1000, 1001, 100001
        size_t n = (size_t)levels - 1;   // arrays inside the top object
        char *deep = malloc(2 * n + 16);
        assert_non_null(deep);
        size_t len = (size_t)sprintf(deep, "{\"x\": ");
        memset(deep + len, '[', n);
        len += n;
        deep[len++] = '1';
        memset(deep + len, ']', n);
        len += n;
        deep[len++] = '}';
        write_config_bytes(deep, len);
        free(deep);
        parse_flags(&c, "");
        log = log_begin();
        int rc = ds_config_apply(&c, g_path, log);
        log_end(log);
        if (levels <= 1000) {
            if (rc != 0) fail_msg("%d levels refused: %s", levels, g_log);
            expect_log("ignoring 1 key this trainer does not know: x");
        } else {
            if (rc != -1) fail_msg("%d levels accepted", levels);
            expect_log("nests objects and arrays more than 1000 levels deep (line 1)");
        }
    }
    // the duplicate-key check is linear: 200,000 keys (the 16 MiB limit holds ~1M) in well
    // under a second of CPU time, where comparing every pair would take minutes
    enum { KEYS_N = 200000 };
    char *big = malloc((size_t)KEYS_N * 24 + 64);
    assert_non_null(big);
    size_t len = (size_t)sprintf(big, "{");
    for (int i = 0; i < KEYS_N; i++) len += (size_t)sprintf(big + len, "\"k%07d\": %d, ", i, i);
    len += (size_t)sprintf(big + len, "\"k%07d\": 0}", KEYS_N / 2);   // one repeat, last
    write_config_bytes(big, len);
    parse_flags(&c, "");
    clock_t t0 = clock();
    log = log_begin();
    assert_int_equal(ds_config_apply(&c, g_path, log), -1);
    log_end(log);
    double cpu_s = (double)(clock() - t0) / CLOCKS_PER_SEC;
    expect_log("k0100000 appears twice");
    if (cpu_s > 1.0) fail_msg("%d keys took %.2f s of CPU time to check", KEYS_N + 1, cpu_s);
    // without the repeat: read, and the warning lists the first keys, then "..."
    len -= strlen("\"k0100000\": 0}") + 2;
    len += (size_t)sprintf(big + len, "}");
    write_config_bytes(big, len);
    parse_flags(&c, "");
    t0 = clock();
    log = log_begin();
    assert_int_equal(ds_config_apply(&c, g_path, log), 0);
    log_end(log);
    cpu_s = (double)(clock() - t0) / CLOCKS_PER_SEC;
    expect_log("ignoring 200000 keys this trainer does not know: k0000000, k0000001, ");
    expect_log(", ...\n");
    if (cpu_s > 1.0) fail_msg("%d keys took %.2f s of CPU time to read", KEYS_N, cpu_s);
    free(big);
}

// DeepSpeed's deprecated offload switches map as DeepSpeed maps them.
static void test_legacy_offload_keys(void **state) {
    (void)state;
    TrainConfig c;
    assert_int_equal(apply(&c, "", "{\"zero_optimization\": {\"stage\": 3, \"cpu_offload\": true, "
                                   "\"cpu_offload_param\": true, \"cpu_offload_use_pin_memory\": true}}"), 0);
    assert_int_equal(c.offload_optimizer, TRAIN_OFFLOAD_CPU);
    assert_int_equal(c.offload_param, TRAIN_OFFLOAD_CPU);
    assert_null(strstr(g_log, "ignoring"));
    expect_log("zero_optimization.cpu_offload true is DeepSpeed's deprecated zero_optimization.offload_optimizer.device "
               "\"cpu\" (--offload-optimizer cpu)");
    expect_log("zero_optimization.cpu_offload_param true is DeepSpeed's deprecated zero_optimization.offload_param.device "
               "\"cpu\" (--offload-param cpu)");
    // DeepSpeed 0.3's spelling, as older published configs have it
    assert_int_equal(apply(&c, "", "{\"zero_optimization\": {\"stage\": 3, \"cpu_offload_params\": true}}"), 0);
    assert_int_equal(c.offload_param, TRAIN_OFFLOAD_CPU);
    assert_int_equal(c.offload_optimizer, TRAIN_OFFLOAD_NONE);
    assert_int_equal(apply(&c, "", "{\"zero_optimization\": {\"stage\": 2, \"cpu_offload\": false}}"), 0);
    assert_int_equal(c.offload_optimizer, TRAIN_OFFLOAD_NONE);
    // "auto" beside it is not a value (DeepSpeed drops it)
    assert_int_equal(apply(&c, "", "{\"zero_optimization\": {\"cpu_offload\": true, \"offload_optimizer\": \"auto\"}}"),
                     0);
    assert_int_equal(c.offload_optimizer, TRAIN_OFFLOAD_CPU);
    // a flag that says otherwise
    expect_refused("-z 2 --offload-optimizer nvme --nvme-path /tmp", "{\"zero_optimization\": {\"cpu_offload\": true}}",
                   "--offload-optimizer nvme contradicts zero_optimization.cpu_offload = true in", NULL);
    expect_refused("-z 3 --offload-param cpu", "{\"zero_optimization\": {\"cpu_offload_param\": false}}",
                   "--offload-param cpu contradicts zero_optimization.cpu_offload_param = false in", NULL);
}

// fp16 and bf16 get messages of their own, not a place among the unknown keys.
static void test_precision(void **state) {
    (void)state;
    TrainConfig c;
    assert_int_equal(apply(&c, "", "{\"fp16\": {\"enabled\": true, \"loss_scale\": 0, \"initial_scale_power\": 16}}"), 0);
    expect_log("warning: ");
    expect_log("fp16.enabled true: no fp16 runs here: this trainer trains in fp32 on the CPU (train_gpt2) and in bf16 "
               "with fp32 master weights on the GPU (train_gpt2_zero), so no loss scaling runs either");
    assert_null(strstr(g_log, "ignoring"));
    assert_int_equal(apply(&c, "", "{\"bf16\": {\"enabled\": true}}"), 0);
    expect_log("note: ");
    expect_log("bf16.enabled true: the GPU trainer (train_gpt2_zero) trains in bf16 with fp32 master weights whatever "
               "the file says, the CPU trainer (train_gpt2) in fp32");
    assert_int_equal(apply(&c, "", "{\"bfloat16\": {\"enabled\": true}}"), 0);
    expect_log("bfloat16.enabled true");
    // off, "auto" or absent: what runs anyway, said nothing about
    expect_no_change("", "{\"fp16\": {\"enabled\": false, \"loss_scale\": 0}, \"bf16\": {\"enabled\": \"auto\"}}");
    expect_no_change("", "{\"fp16\": {\"enabled\": \"auto\"}, \"bf16\": {}}");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_key_sets_its_field),
        cmocka_unit_test(test_auto_keeps_the_trainer_value),
        cmocka_unit_test(test_wrong_types_and_ranges),
        cmocka_unit_test(test_later_features_refused_unless_off),
        cmocka_unit_test(test_unknown_keys_warned_by_name),
        cmocka_unit_test(test_flag_contradicting_the_file),
        cmocka_unit_test(test_batch_rule),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_command_line),
        cmocka_unit_test(test_batch_bounds),
        cmocka_unit_test(test_parser_limits),
        cmocka_unit_test(test_legacy_offload_keys),
        cmocka_unit_test(test_precision),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
