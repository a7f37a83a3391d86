// memory_table.c: the unsharded trainers' memory table (memory_table.h).
#include "memory_table.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../atomic_file.h"
#include "logger.h"   // make_dirs

// 1234567 -> "1,234,567" (tables are read by people)
static const char *grouped(char *buf, size_t cap, uint64_t v) {
    char raw[32];
    int n = snprintf(raw, sizeof raw, "%llu", (unsigned long long)v), o = 0;
    for (int i = 0; i < n && (size_t)o + 2 < cap; i++) {
        if (i > 0 && (n - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = raw[i];
    }
    buf[o] = 0;
    return buf;
}

void memory_table_print(const char *title, const MemoryTable *t, const char *device_column, const char *host_column) {
    static const char *label[MEMORY_KINDS] = {"parameters", "gradients", "optimizer states", "activations"};
    char a[40], b[40];
    printf("memory: %s\n", title);
    if (device_column) printf("memory:   %-20s %16s %16s\n", "bytes", device_column, host_column);
    else printf("memory:   %-20s %16s\n", "bytes", host_column);
    uint64_t sum[2][MEMORY_KINDS + 1] = {{0}};   // device, host; the last column is the total
    for (int k = 0; k < MEMORY_KINDS; k++) {
        sum[0][k] = t->device[k];
        sum[1][k] = t->host[k];
        sum[0][MEMORY_KINDS] += t->device[k];
        sum[1][MEMORY_KINDS] += t->host[k];
    }
    for (int k = 0; k <= MEMORY_KINDS; k++) {
        const char *name = k == MEMORY_KINDS ? "total" : label[k];
        if (device_column)
            printf("memory:   %-20s %16s %16s\n", name, grouped(a, sizeof a, sum[0][k]), grouped(b, sizeof b, sum[1][k]));
        else
            printf("memory:   %-20s %16s\n", name, grouped(b, sizeof b, sum[1][k]));
    }
}

uint64_t memory_table_process_bytes(const MemoryTable *t) {
    uint64_t s = t->runtime;
    for (int k = 0; k < MEMORY_KINDS; k++) s += t->device[k] + t->host[k];
    return s;
}

static cJSON *kinds_json(const uint64_t v[MEMORY_KINDS]) {
    static const char *key[MEMORY_KINDS] = {"parameters", "gradients", "optimizer_states", "activations"};
    cJSON *o = cJSON_CreateObject();
    uint64_t total = 0;
    for (int k = 0; k < MEMORY_KINDS; k++) {
        cJSON_AddNumberToObject(o, key[k], (double)v[k]);
        total += v[k];
    }
    cJSON_AddNumberToObject(o, "buffers", 0);
    cJSON_AddNumberToObject(o, "total", (double)total);
    return o;
}

int memory_table_write_json(const char *out_dir, const char *trainer, const char *source, const MemoryTable *t) {
    cJSON *root = cJSON_CreateObject(), *ranks = cJSON_CreateArray(), *r = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "gpt2-zero-memory");
    cJSON_AddNumberToObject(root, "version", 1);
    cJSON_AddStringToObject(root, "source", source);
    cJSON_AddStringToObject(root, "trainer", trainer);
    cJSON_AddNumberToObject(r, "rank", 0);
    cJSON_AddItemToObject(r, "device", kinds_json(t->device));
    cJSON_AddItemToObject(r, "host", kinds_json(t->host));
    cJSON_AddItemToArray(ranks, r);
    cJSON_AddItemToObject(root, "ranks", ranks);
    if (t->runtime) {
        uint64_t peak = memory_table_process_bytes(t);
        cJSON_AddNumberToObject(root, "runtime_bytes", (double)t->runtime);
        cJSON_AddNumberToObject(root, "process_peak_bytes", (double)peak);
        if (t->budget) {
            cJSON_AddNumberToObject(root, "device_budget_bytes", (double)t->budget);
            cJSON_AddBoolToObject(root, "fits", peak <= t->budget);
        }
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) {
        fprintf(stderr, "error: out of memory writing %s/memory_report.json\n", out_dir);
        return -1;
    }
    char path[4096];
    make_dirs(out_dir);
    snprintf(path, sizeof path, "%s/memory_report.json", out_dir);
    AtomicFile f;   // fails loudly, naming the file
    atomic_file_open(&f, path);
    atomic_file_write(&f, text, strlen(text));
    atomic_file_commit(&f);
    int rc = 0;
    free(text);
    return rc;
}

