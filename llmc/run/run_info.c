// run_info.c: OUT/run.json (cJSON, written through atomic_file).
#include "run_info.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../atomic_file.h"
#include "../utils.h"

static void add_or_die(cJSON *parent, const char *key, cJSON *item, const char *path) {
    if (item == NULL || !cJSON_AddItemToObject(parent, key, item)) die("out of host memory building '%s'", path);
}

// A float flag as it was typed (0.002, not 0.0020000000949949026).
static cJSON *float_item(float v) {
    char text[32];
    for (int digits = 6; digits <= 9; digits++) {   // the shortest that reads back as v
        snprintf(text, sizeof(text), "%.*g", digits, (double)v);
        if (strtof(text, NULL) == v) break;
    }
    return cJSON_CreateRaw(text);
}

static void write_json(const RunInfo *ri) {
    char *text = cJSON_Print((cJSON *)ri->json);
    if (text == NULL) die("out of host memory printing '%s'", ri->path);
    AtomicFile af;
    atomic_file_open(&af, ri->path);
    atomic_file_write(&af, text, strlen(text));
    atomic_file_write(&af, "\n", 1);
    atomic_file_commit(&af);
    free(text);
}

void run_info_start(RunInfo *ri, const char *trainer, const TrainConfig *cfg, int grad_accum, int world, int rank) {
    memset(ri, 0, sizeof(*ri));
    ri->tokens_per_step = cfg->total_batch_tokens;
    if (rank != 0) return;
    snprintf(ri->path, sizeof(ri->path), "%s/run.json", cfg->out_dir);
    const char *slash = strrchr(trainer, '/');
    char seed[24];
    snprintf(seed, sizeof(seed), "%llu", (unsigned long long)cfg->seed);   // exact: not a double
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) die("out of host memory building '%s'", ri->path);
    add_or_die(o, "format", cJSON_CreateString("gpt2-zero-run"), ri->path);
    add_or_die(o, "version", cJSON_CreateNumber(1), ri->path);
    add_or_die(o, "trainer", cJSON_CreateString(slash ? slash + 1 : trainer), ri->path);
    add_or_die(o, "train_data", cJSON_CreateString(cfg->train_pattern), ri->path);
    add_or_die(o, "val_data", cJSON_CreateString(cfg->val_pattern), ri->path);
    add_or_die(o, "val_batches", cJSON_CreateNumber(cfg->val_max_steps), ri->path);
    add_or_die(o, "shuffle", cJSON_CreateNumber(cfg->shuffle), ri->path);
    add_or_die(o, "seed", cJSON_CreateRaw(seed), ri->path);
    add_or_die(o, "model", cJSON_CreateString(cfg->model), ri->path);
    add_or_die(o, "micro_batch", cJSON_CreateNumber(cfg->B), ri->path);
    add_or_die(o, "seq_len", cJSON_CreateNumber(cfg->T), ri->path);
    add_or_die(o, "total_batch_tokens", cJSON_CreateNumber((double)cfg->total_batch_tokens), ri->path);
    add_or_die(o, "grad_accum", cJSON_CreateNumber(grad_accum), ri->path);
    add_or_die(o, "world_size", cJSON_CreateNumber(world), ri->path);
    add_or_die(o, "zero_stage",
               cfg->zero_stage < 0 ? cJSON_CreateString("unsharded") : cJSON_CreateNumber(cfg->zero_stage), ri->path);
    add_or_die(o, "lr", float_item(cfg->lr), ri->path);
    add_or_die(o, "warmup_steps", cJSON_CreateNumber(cfg->warmup_steps), ri->path);
    add_or_die(o, "final_lr_frac", float_item(cfg->final_lr_frac), ri->path);
    add_or_die(o, "weight_decay", float_item(cfg->weight_decay), ri->path);
    add_or_die(o, "grad_clip", float_item(cfg->grad_clip), ri->path);
    add_or_die(o, "steps", cJSON_CreateNumber(cfg->max_steps), ri->path);
    ri->json = o;
    write_json(ri);
}

void run_info_step(RunInfo *ri, double seconds) {
    if (ri->json == NULL) return;
    if (ri->num_steps == ri->capacity) {
        ri->capacity = ri->capacity ? 2 * ri->capacity : 256;
        ri->step_seconds = (double *)realloc(ri->step_seconds, (size_t)ri->capacity * sizeof(double));
        if (ri->step_seconds == NULL) die("out of host memory recording step times for '%s'", ri->path);
    }
    ri->step_seconds[ri->num_steps++] = seconds;
}

void run_info_finish(RunInfo *ri) {
    if (ri->json == NULL) return;
    cJSON *timing = cJSON_CreateObject();
    cJSON *steps = cJSON_CreateArray();
    if (timing == NULL || steps == NULL) die("out of host memory building '%s'", ri->path);
    double sum = 0.0;
    int first = ri->num_steps > 1 ? 1 : 0;
    for (int i = 0; i < ri->num_steps; i++) {
        // microseconds are all a step line shows, and they keep the file short
        cJSON *s = cJSON_CreateNumber(round(ri->step_seconds[i] * 1e6) / 1e6);
        if (s == NULL || !cJSON_AddItemToArray(steps, s)) die("out of host memory building '%s'", ri->path);
        if (i >= first) sum += ri->step_seconds[i];
    }
    int timed = ri->num_steps - first;
    add_or_die(timing, "step_seconds", steps, ri->path);
    add_or_die(timing, "tokens_per_step", cJSON_CreateNumber((double)ri->tokens_per_step), ri->path);
    add_or_die(timing, "timed_steps", cJSON_CreateNumber(timed), ri->path);
    add_or_die(timing, "tokens_per_second",
               timed > 0 && sum > 0 ? cJSON_CreateNumber(round((double)ri->tokens_per_step * timed / sum * 10) / 10)
                                    : cJSON_CreateNull(), ri->path);
    add_or_die((cJSON *)ri->json, "timing", timing, ri->path);
    write_json(ri);
    cJSON_Delete((cJSON *)ri->json);
    free(ri->step_seconds);
    memset(ri, 0, sizeof(*ri));
}
