/*
report.h: what the live report (report.c) and the dry run (dryrun.c) share: the run's
settings as the report states them, the model-state formula, and the JSON writer, so
that both produce the same schema from the same record (ZeroFigures, zero.h).
*/
#ifndef ZERO_REPORT_H
#define ZERO_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "zero.h"

typedef struct {
    int stage, world, node_size, num_tensors, num_units;
    ZeroDType param_dtype, grad_dtype;
    size_t bucket_elems, prefetch_elems, max_live_elems, persist_elems;   // as used (bucket clamped)
    uint64_t numel, padded, shard;   // Psi, Psi padded (N * shard), the per-rank shard
    size_t persist_padded;           // stage 3: padded elements kept gathered for good
    size_t device_budget;            // dry run: device bytes a rank has (0: not checked)
    int device_is_host;              // dry run: the budget covers the host tier and runtime_bytes too
    size_t runtime_bytes;            // dry run: the process's own bytes besides the plugin's and the model's
    size_t host_budget;              // dry run, a GPU: host bytes a rank has for the host side (0: not checked)
    ZeroTier optimizer_tier, param_tier;   // where offload keeps them (device: not offloaded)
    int qwz, hpz, qgz, hier_reduce, qwz_block, qgz_block;   // ZeRO++ switches as used
    int fast_reduce;                 // bf16 gradient sums (stage 0 keeps them whole: 2 B a parameter)
    int dpu_from;                    // the delayed parameter update's first step (0: off)
    size_t qwz_bytes, secondary_bytes;     // qwZ's int8 records of the shard, hpZ's secondary partition
    int param_is_master;             // offloaded fp32 working parameters stored as the master (one copy)
    size_t opt_device_shard;         // elements of this rank's shard whose optimizer states are on the device
    size_t work_shard;               // stage 3, offloaded: elements of the working shard kept apart from the master
    size_t parked_bytes;             // offload: where tied tensors' partial gradients park between units
    size_t dpu_bytes;                // the delayed update's working parameters (host; 0 without it)
} ZeroReportInfo;

// Model states (params + grads + fp32 master + m + v) of one rank as the ZeRO paper writes
// them, with this implementation's coefficients and explicit padding and pools:
//   bytes = replicated * Psi_padded + sharded * Psi_padded / N + pools
// wherever they live (device, host or NVMe: offload moves bytes, it does not remove them;
// stage 3 with offload also keeps the working shard the gathers read, 2 or 4 B / N).
typedef struct {
    double replicated, sharded;     // bytes per parameter
    uint64_t pools;                 // gradient pool (stages 2-3), gather pool + persistent (3),
                                    // qwZ's records of the shard and hpZ's secondary partition (3)
    uint64_t bytes;
    double paper_bytes;             // the paper's mixed-precision figure (2+2+12) on unpadded Psi
} ZeroFormula;

void zero_report_info(const Zero *z, ZeroReportInfo *info);
void zero_formula(const ZeroReportInfo *info, const ZeroFigures *f, ZeroFormula *out);
uint64_t zero_figures_model_states(const ZeroFigures *f);
// Everything a rank holds in device memory: model states, buffers and activations.
uint64_t zero_figures_device_total(const ZeroFigures *f);
// "PREFIXsent per step (N steps): ..." and "PREFIXby flow per step: ...": what a rank sent in
// a step, by collective and by flow (nothing when the figures cover no step).
void zero_figures_print_sent(const ZeroFigures *f, const char *prefix);
// The swap file's bytes read and written per step and in the last step, when anything lives
// on NVMe (a dry run's prediction, or a live run's count).
void zero_figures_print_nvme(const ZeroFigures *f, const char *prefix);
// What a device budget is checked against: the device total, and where device memory is
// host memory (in->device_is_host) the host tier and the process's runtime too.
uint64_t zero_budget_total(const ZeroReportInfo *in, const ZeroFigures *f);
// Everything a rank holds in host memory besides the process's runtime: offload's host tier,
// pinned buffers and host activations (what a host budget is checked against).
uint64_t zero_figures_host_total(const ZeroFigures *f);
// The report as JSON text (malloc'd), or NULL with the reason in err.
char *zero_report_json(const ZeroReportInfo *info, const char *source, const ZeroFigures *ranks,
                       const char *extra_json_fields, char *err, size_t errlen);

#endif
