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

#include "../../llmc/run/ds_config.h"
#include "test_util.h"
#include "../../llmc/run/train_args.h"
#include "../../llmc/run/train_config.h"

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

static void write_config(const char *json) {
    FILE *f = fopen(g_path, "w");
    assert_non_null(f);
    fputs(json, f);
    fclose(f);
}

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
                   "   \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"/local_nvme\", \"pin_memory\": true},"
                   "   \"offload_param\": {\"device\": \"cpu\", \"nvme_path\": \"/local_nvme\"},"
                   "   \"zero_quantized_weights\": true, \"zero_hpz_partition_size\": 8, \"zero_quantized_gradients\": true},"
                   " \"activation_checkpointing\": {\"cpu_checkpointing\": true, \"partition_activations\": false}}");
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
    assert_true(d.B != 3 && d.zero_stage != 3 && d.zero_bucket != 500000 && d.zero_prefetch != 70000 &&
                d.zero_max_live != 900000 && d.zero_persist != 1000);
    unsigned all = 0;
    for (int f = 0; f < TRAIN_FLAG_COUNT; f++)
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
        {"{\"zero_optimization\": {\"offload_optimizer\": {\"pin_memory\": \"yes\"}}}",
         "zero_optimization.offload_optimizer.pin_memory must be true or false, got \"yes\""},
        {"{\"zero_optimization\": {\"offload_param\": {\"nvme_path\": 5}}}",
         "zero_optimization.offload_param.nvme_path must be a folder's path (a string) or null, got 5"},
        {"{\"zero_optimization\": {\"offload_optimizer\": {\"device\": \"disk\"}}}",
         "zero_optimization.offload_optimizer.device must be \"none\", \"cpu\" or \"nvme\", got \"disk\""},
        {"{\"activation_checkpointing\": {\"cpu_checkpointing\": 1}}",
         "activation_checkpointing.cpu_checkpointing must be true or false, got 1"},
        {"{\"zero_optimization\": {\"offload_param\": {\"device\": true}}}",
         "zero_optimization.offload_param.device must be \"none\", \"cpu\" or \"nvme\", got true"},
        {"{\"zero_optimization\": {\"offload_optimizer\": {\"nvme_path\": \"/a\"}, \"offload_param\": {\"nvme_path\": \"/b\"}}}",
         "zero_optimization.offload_param.nvme_path = /b disagrees with the --nvme-path set before (/a)"},
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
    };
    for (size_t i = 0; i < sizeof(later) / sizeof(later[0]); i++)
        expect_refused("", later[i].json, later[i].says, NULL);
    // their "off" values, written out, are fine (and change nothing)
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
                           " \"optimizer\": {\"params\": {\"lr\": 0.001, \"amsgrad\": false}}}"),
                     0);
    expect_log("warning: ");
    expect_log(g_path);
    expect_log("ignoring 4 keys this trainer does not know: fp16, steps_per_print, "
               "zero_optimization.overlap_comm, optimizer.params.amsgrad");
    assert_null(strstr(g_log, "error"));
    assert_int_equal(c.zero_stage, 1);  // the known keys beside them still apply
    assert_true(c.lr == 0.001f);
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
        {"--zero-bucket 1000", "{\"zero_optimization\": {\"reduce_bucket_size\": 5e8}}",
         "--zero-bucket 1000 contradicts zero_optimization.reduce_bucket_size = 500000000 in"},
        {"--zero-prefetch 10", "{\"zero_optimization\": {\"stage3_prefetch_bucket_size\": 20}}",
         "--zero-prefetch 10 contradicts zero_optimization.stage3_prefetch_bucket_size = 20 in"},
        {"--zero-max-live 0", "{\"zero_optimization\": {\"stage3_max_live_parameters\": 1e9}}",
         "--zero-max-live 0 contradicts zero_optimization.stage3_max_live_parameters = 1000000000 in"},
        {"--zero-persist 100000", "{\"zero_optimization\": {\"stage3_param_persistence_threshold\": 1e4}}",
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
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *argv[] = {"train_gpt2", "-z", "1", (char *)bad[i].flag, (char *)bad[i].value, NULL};
        memcpy(g_argv, argv, sizeof(argv));
        expect_death(parse_in_child, "cpu", 1, bad[i].says, NULL);
    }
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
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
