// run_info.c: OUT/run.json (cJSON, written through atomic_file).
#include "run_info.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../atomic_file.h"
#include "../utils.h"
#include "schedule.h"

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

// What each run.json field is on the command line, for the lines a resume prints.
static const char *const FLAG_OF[][2] = {
    {"trainer", "the trainer"}, {"train_data", "-i"}, {"val_data", "-j"}, {"val_batches", "-m"}, {"shuffle", "--shuffle"},
    {"seed", "--seed"}, {"model", "-e"}, {"micro_batch", "-b"}, {"seq_len", "-t"}, {"total_batch_tokens", "-d"},
    {"grad_accum", "gradient accumulation steps"}, {"world_size", "ranks"}, {"zero_stage", "-z"}, {"lr", "-l"},
    {"warmup_steps", "-u"}, {"final_lr_frac", "-q"}, {"weight_decay", "-c"}, {"grad_clip", "--grad-clip"},
    {"beta1", "--beta1"}, {"beta2", "--beta2"}, {"adam_eps", "--adam-eps"}, {"steps", "-x"}, {"lr_schedule", "-k"},
    {"overfit_batch", "-a"}, {"skip_loss_z", "-sl"}, {"skip_norm_z", "-sg"}, {"micro_grads", "--micro-grads"},
    {"qwz", "--qwz"}, {"qwz_block", "--qwz-block"}, {"hpz", "--hpz"}, {"qgz", "--qgz"}, {"qgz_block", "--qgz-block"},
    {"hier_reduce", "--hier-reduce"}, {"fast_reduce", "--fast-reduce"}, {"dpu", "--dpu"},
};

static cJSON *parse_or_die(const char *text, const char *path) {
    cJSON *o = cJSON_Parse(text);
    if (o == NULL) die("out of host memory building '%s'", path);
    return o;
}

// The seed as exact digits (a JSON number past 2^53 does not survive a double).
static void run_info_seed(cJSON *o, uint64_t seed, const char *path) {
    char text[24];
    snprintf(text, sizeof(text), "%llu", (unsigned long long)seed);
    cJSON *raw = cJSON_CreateRaw(text);
    if (raw == NULL || !cJSON_ReplaceItemInObjectCaseSensitive(o, "seed", raw)) die("out of host memory building '%s'", path);
}

// This part's settings, as the file holds them: built, printed and parsed back, so that
// they compare with a run.json read from disk (the seed stays exact: run_info_seed).
static cJSON *settings(const char *trainer, const TrainConfig *cfg, int grad_accum, int world, const char *path) {
    const char *slash = strrchr(trainer, '/');
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) die("out of host memory building '%s'", path);
    add_or_die(o, "trainer", cJSON_CreateString(slash ? slash + 1 : trainer), path);
    add_or_die(o, "train_data", cJSON_CreateString(cfg->train_pattern), path);
    add_or_die(o, "val_data", cJSON_CreateString(cfg->val_pattern), path);
    add_or_die(o, "val_batches", cJSON_CreateNumber(cfg->val_max_steps), path);
    add_or_die(o, "shuffle", cJSON_CreateNumber(cfg->shuffle), path);
    add_or_die(o, "seed", cJSON_CreateNumber((double)cfg->seed), path);   // exact text: run_info_seed
    add_or_die(o, "model", cJSON_CreateString(cfg->model), path);
    add_or_die(o, "micro_batch", cJSON_CreateNumber(cfg->B), path);
    add_or_die(o, "seq_len", cJSON_CreateNumber(cfg->T), path);
    add_or_die(o, "total_batch_tokens", cJSON_CreateNumber((double)cfg->total_batch_tokens), path);
    add_or_die(o, "grad_accum", cJSON_CreateNumber(grad_accum), path);
    add_or_die(o, "world_size", cJSON_CreateNumber(world), path);
    add_or_die(o, "zero_stage", cfg->zero_stage < 0 ? cJSON_CreateString("unsharded") : cJSON_CreateNumber(cfg->zero_stage), path);
    add_or_die(o, "lr", float_item(cfg->lr), path);
    add_or_die(o, "warmup_steps", cJSON_CreateNumber(cfg->warmup_steps), path);
    add_or_die(o, "final_lr_frac", float_item(cfg->final_lr_frac), path);
    add_or_die(o, "weight_decay", float_item(cfg->weight_decay), path);
    add_or_die(o, "grad_clip", float_item(cfg->grad_clip), path);
    add_or_die(o, "beta1", float_item(cfg->beta1), path);
    add_or_die(o, "beta2", float_item(cfg->beta2), path);
    add_or_die(o, "adam_eps", float_item(cfg->adam_eps), path);
    add_or_die(o, "steps", cJSON_CreateNumber(cfg->max_steps), path);
    add_or_die(o, "lr_schedule", cJSON_CreateString(train_lr_schedule_names[cfg->lr_schedule]), path);
    add_or_die(o, "overfit_batch", cJSON_CreateNumber(cfg->overfit_batch), path);
    add_or_die(o, "skip_loss_z", float_item(cfg->skip_loss_z), path);
    add_or_die(o, "skip_norm_z", float_item(cfg->skip_norm_z), path);
    add_or_die(o, "micro_grads", cJSON_CreateNumber(cfg->micro_grads), path);
    // ZeRO++ and the reduction's path change the arithmetic (int8 or int4 blocks, another sum
    // order): a resume that changes them says so
    add_or_die(o, "qwz", cJSON_CreateNumber(cfg->qwz), path);
    add_or_die(o, "qwz_block", cJSON_CreateNumber(cfg->qwz_block), path);
    add_or_die(o, "hpz", cJSON_CreateNumber(cfg->hpz), path);
    add_or_die(o, "qgz", cJSON_CreateNumber(cfg->qgz), path);
    add_or_die(o, "qgz_block", cJSON_CreateNumber(cfg->qgz_block), path);
    add_or_die(o, "hier_reduce", cJSON_CreateNumber(cfg->hier_reduce), path);
    add_or_die(o, "fast_reduce", cJSON_CreateNumber(cfg->fast_reduce), path);
    add_or_die(o, "dpu", cJSON_CreateNumber(cfg->dpu), path);
    char *text = cJSON_PrintUnformatted(o);
    if (text == NULL) die("out of host memory building '%s'", path);
    cJSON_Delete(o);
    o = parse_or_die(text, path);
    free(text);
    run_info_seed(o, cfg->seed, path);
    return o;
}

// A new record: the format, then the settings (taken from now, which is freed).
static cJSON *new_record(cJSON *now, const char *path) {
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) die("out of host memory building '%s'", path);
    add_or_die(o, "format", cJSON_CreateString("gpt2-zero-run"), path);
    add_or_die(o, "version", cJSON_CreateNumber(1), path);
    while (now->child) {
        cJSON *v = cJSON_DetachItemViaPointer(now, now->child);
        if (!cJSON_AddItemToObject(o, v->string, v)) die("out of host memory building '%s'", path);
    }
    cJSON_Delete(now);
    return o;
}

// The earlier parts' record, or NULL (missing, or unreadable: then kept aside as
// run.json.unreadable, never overwritten). *why says which.
static cJSON *read_record(const char *path, const char **why) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        *why = "was missing";
        return NULL;
    }
    char *text = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (len + 4096 + 1 > cap) {
            cap = 2 * cap + 8192;
            text = (char *)realloc(text, cap);
            if (text == NULL) die("out of host memory reading '%s'", path);
        }
        got = fread(text + len, 1, cap - len - 1, f);
        len += got;
    } while (got > 0);
    fclose(f);
    text[len] = 0;
    cJSON *o = cJSON_Parse(text);
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(o, "format"), *resumes = cJSON_GetObjectItemCaseSensitive(o, "resumes");
    if (!cJSON_IsString(format) || strcmp(format->valuestring, "gpt2-zero-run") != 0 || (resumes && !cJSON_IsArray(resumes))) {
        cJSON_Delete(o);
        o = NULL;
        static char aside[4200];   // a name no earlier one has: run.json.unreadable, .1, .2, ...
        struct stat st;
        snprintf(aside, sizeof(aside), "%s.unreadable", path);
        for (int k = 1; lstat(aside, &st) == 0; k++) snprintf(aside, sizeof(aside), "%s.unreadable.%d", path, k);
        if (rename(path, aside) != 0) die("'%s' is not a run record, and it cannot be kept aside as '%s': %s", path, aside, strerror(errno));
        static char note[4300];
        snprintf(note, sizeof(note), "was not a run record (kept aside as %s)", aside);
        *why = note;
    } else {
        // the seed's digits as written (the first "seed" is the top level's: it comes first)
        const char *at = strstr(text, "\"seed\":");
        const cJSON *seed = cJSON_GetObjectItemCaseSensitive(o, "seed");
        if (at && cJSON_IsNumber(seed)) {
            unsigned long long exact = strtoull(at + 7, NULL, 10);
            if ((double)exact == seed->valuedouble) run_info_seed(o, exact, path);
        }
    }
    free(text);
    return o;
}

// The settings in force before this part: the first part's, with every resume's changes.
static const cJSON *setting_before(const cJSON *record, const char *key) {
    const cJSON *value = cJSON_GetObjectItemCaseSensitive(record, key), *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(record, "resumes")) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "changed"), key);
        if (c) value = cJSON_GetObjectItemCaseSensitive(c, "to");
    }
    return value;
}

static cJSON *dup_or_null(const cJSON *v, const char *path) {
    cJSON *d = v ? cJSON_Duplicate(v, 1) : cJSON_CreateNull();
    if (d == NULL) die("out of host memory building '%s'", path);
    return d;
}

static const cJSON *setting_now(const cJSON *now, const char *key) { return cJSON_GetObjectItemCaseSensitive(now, key); }

// The learning rate of a step by the schedule that settings (read through get) describe;
// NAN when one of its settings is not recorded.
static double lr_by(const cJSON *settings, const cJSON *(*get)(const cJSON *, const char *), int step) {
    const cJSON *lr = get(settings, "lr"), *warmup = get(settings, "warmup_steps"), *steps = get(settings, "steps"),
                *frac = get(settings, "final_lr_frac"), *kind = get(settings, "lr_schedule");
    if (!cJSON_IsNumber(lr) || !cJSON_IsNumber(warmup) || !cJSON_IsNumber(steps) || !cJSON_IsNumber(frac) ||
        !cJSON_IsString(kind))
        return NAN;
    for (int k = 0; k < (int)(sizeof(train_lr_schedule_names) / sizeof(train_lr_schedule_names[0])); k++)
        if (strcmp(kind->valuestring, train_lr_schedule_names[k]) == 0)
            return lr_schedule(k, (float)lr->valuedouble, step, warmup->valueint, steps->valueint,
                               (float)frac->valuedouble);
    return NAN;
}

// A resumed part: the record keeps the first part's settings at the top and gains an entry
// in "resumes" with the step and each setting that differs from before ("from", "to"), which
// is also printed. Returns that entry (the part's timing goes there).
static cJSON *record_resume(RunInfo *ri, cJSON *now, int step) {
    const char *why = NULL;
    cJSON *record = read_record(ri->path, &why);
    cJSON *entry = cJSON_CreateObject(), *changed = cJSON_CreateObject();
    if (entry == NULL || changed == NULL) die("out of host memory building '%s'", ri->path);
    add_or_die(entry, "step", cJSON_CreateNumber(step), ri->path);
    if (record == NULL) {   // this part's settings at the top, marked as such
        printf("resume at step %d: %s %s: it starts again from this part's settings\n", step, ri->path, why);
        record = new_record(now, ri->path);
        add_or_die(entry, "note", cJSON_CreateString(why), ri->path);
    } else {
        int n = 0;
        for (const cJSON *v = now->child; v; v = v->next) {
            const cJSON *before = setting_before(record, v->string);
            if (before && cJSON_Compare(before, v, 1)) continue;
            cJSON *c = cJSON_CreateObject();
            if (c == NULL) die("out of host memory building '%s'", ri->path);
            add_or_die(c, "from", dup_or_null(before, ri->path), ri->path);
            add_or_die(c, "to", dup_or_null(v, ri->path), ri->path);
            add_or_die(changed, v->string, c, ri->path);
            const char *flag = v->string;
            for (size_t i = 0; i < sizeof(FLAG_OF) / sizeof(FLAG_OF[0]); i++)
                if (strcmp(FLAG_OF[i][0], v->string) == 0) flag = FLAG_OF[i][1];
            char *from = before ? cJSON_PrintUnformatted(before) : NULL, *to = cJSON_PrintUnformatted(v);
            printf("resume at step %d: %s (%s) changed from %s to %s\n", step, flag, v->string, from ? from : "(not recorded)",
                   to ? to : "?");
            free(from);
            free(to);
            n++;
        }
        if (n == 0) printf("resume at step %d: the same settings as before\n", step);
        // -x, -l, -u, -q and -k shape the schedule: say what a change does to the next step
        double lr_from = lr_by(record, setting_before, step), lr_to = lr_by(now, setting_now, step);
        if (!isnan(lr_from) && lr_from != lr_to) {
            printf("resume at step %d: its learning rate is %.6g by this part's schedule, %.6g by the one before\n",
                   step, lr_to, lr_from);
            cJSON *c = cJSON_CreateObject();
            if (c == NULL) die("out of host memory building '%s'", ri->path);
            add_or_die(c, "from", float_item((float)lr_from), ri->path);
            add_or_die(c, "to", float_item((float)lr_to), ri->path);
            add_or_die(entry, "lr_at_step", c, ri->path);
        }
        cJSON_Delete(now);
    }
    add_or_die(entry, "changed", changed, ri->path);
    cJSON *resumes = cJSON_GetObjectItemCaseSensitive(record, "resumes");
    if (resumes == NULL) add_or_die(record, "resumes", resumes = cJSON_CreateArray(), ri->path);
    if (!cJSON_AddItemToArray(resumes, entry)) die("out of host memory building '%s'", ri->path);
    ri->json = record;
    return entry;
}

void run_info_start(RunInfo *ri, const char *trainer, const TrainConfig *cfg, int grad_accum, int world, int rank,
                    int resume_step) {
    memset(ri, 0, sizeof(*ri));
    ri->tokens_per_step = cfg->total_batch_tokens;
    if (rank != 0) return;
    snprintf(ri->path, sizeof(ri->path), "%s/run.json", cfg->out_dir);
    cJSON *now = settings(trainer, cfg, grad_accum, world, ri->path);
    if (resume_step >= 0) {
        ri->part = record_resume(ri, now, resume_step);
    } else {
        ri->json = new_record(now, ri->path);
    }
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
    // a resumed part's timing goes into its "resumes" entry: the first part's stays
    cJSON *part = ri->part ? (cJSON *)ri->part : (cJSON *)ri->json;
    cJSON_DeleteItemFromObjectCaseSensitive(part, "timing");
    add_or_die(part, "timing", timing, ri->path);
    write_json(ri);
    cJSON_Delete((cJSON *)ri->json);
    free(ri->step_seconds);
    memset(ri, 0, sizeof(*ri));
}
