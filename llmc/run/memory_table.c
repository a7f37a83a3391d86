// memory_table.c: the unsharded trainers' memory table (memory_table.h).
#include "memory_table.h"

#include <stdio.h>

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
