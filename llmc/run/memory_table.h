// memory_table.h: the start-up memory table of the unsharded trainers, by kind (parameters,
// gradients, optimizer states, activations), in the layout of the ZeRO plugin's table
// (zero_report_print), so that a run with and without ZeRO read side by side.
#ifndef LLMC_MEMORY_TABLE_H
#define LLMC_MEMORY_TABLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { MEMORY_PARAMS, MEMORY_GRADS, MEMORY_OPTIM, MEMORY_ACTS, MEMORY_KINDS };

typedef struct {
    uint64_t device[MEMORY_KINDS];   // bytes where the model computes
    uint64_t host[MEMORY_KINDS];     // bytes in host RAM beside it
} MemoryTable;

// Prints "memory: ..." lines: a header with the column names, one row per kind and the
// totals. device_column NULL: a single column (host_column), for a model computing in
// host RAM, whose device bytes are then ignored.
void memory_table_print(const char *title, const MemoryTable *t, const char *device_column, const char *host_column);

#ifdef __cplusplus
}
#endif
#endif
