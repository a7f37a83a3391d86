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
    uint64_t runtime;                // a CPU process's own bytes besides (code, libraries, the data); 0: not counted
    uint64_t budget;                 // a dry run's --gpu-mem (0: none)
} MemoryTable;

// Prints "memory: ..." lines: a header with the column names, one row per kind and the
// totals. device_column NULL: a single column (host_column), for a model computing in
// host RAM, whose device bytes are then ignored.
void memory_table_print(const char *title, const MemoryTable *t, const char *device_column, const char *host_column);
// The same bytes as OUT/memory_report.json, in the per-rank layout of the ZeRO plugin's
// zero_report.json ("ranks": [{"rank": 0, "device": {"parameters": ..., "total": ...},
// "host": {...}}]), so that scripts/compare_runs.py sets both runs side by side. Written
// atomically (a write error ends the run naming the file); returns 0, or -1 out of memory.
// With t->runtime, also "runtime_bytes" and "process_peak_bytes" (every column and the
// runtime: a CPU process's predicted peak), and with t->budget "device_budget_bytes" and
// "fits" (that peak within it). source: "live" (the run's own) or "dry_run" (a prediction), as
// zero_report.json says it.
int memory_table_write_json(const char *out_dir, const char *trainer, const char *source, const MemoryTable *t);
// Every column and the runtime: a CPU process's peak.
uint64_t memory_table_process_bytes(const MemoryTable *t);

#ifdef __cplusplus
}
#endif
#endif
