// report.c: accounting. Per rank: bytes by kind (parameters, gradients, optimizer states,
// activations, buffers) on device and host, and bytes sent per collective per step
// (intra- and inter-node); gathered to rank 0 and written as JSON, or printed as a table.
// dryrun.c writes the same JSON from a prediction (report.h).
#include "state.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "io/zfile.h"

_Static_assert(ZERO_NUM_COLLS == ZERO_COLL_NUM, "zero.h's ZERO_NUM_COLLS must match comm.h's ZeroCollOp");

void zero_figures(const Zero *z, ZeroFigures *f) {
    memset(f, 0, sizeof *f);
    ZeroStats st;
    zero_stats(z, &st);
    for (int k = 0; k < ZERO_USE_KINDS; k++) {
        f->device[k] = st.device[k];
        f->host[k] = st.host[k];
        f->nvme[k] = st.nvme[k];
    }
    f->act_device = z->acct.act_dev;
    f->act_host = z->acct.act_host;
    f->param_pool_elems = st.param_pool_elems;
    f->param_pool_peak = st.param_pool_peak;
    f->grad_pool_elems = st.grad_pool_elems;
    f->grad_pool_peak = st.grad_pool_peak;
    f->gathers = st.gathers;
    f->prefetches = st.prefetches;
    f->gather_hits = st.gather_hits;
    f->evictions = st.evictions;
    f->wasted_gathers = st.wasted_gathers;
    f->buckets = st.buckets;
    f->nvme_read = st.nvme_read;
    f->nvme_written = st.nvme_written;
    f->nvme_busy_s = st.nvme_busy_s;
    f->nvme_last_read = z->off.last_read;
    f->nvme_last_written = z->off.last_written;
    f->local_size = z->comm->local_size;
    f->num_nodes = z->comm->num_nodes;
    f->grad_accum = z->step.grad_accum;
    f->steps = z->step.done;
    for (int k = 0; k < ZERO_FLOWS; k++) {
        f->flow_intra[k] = z->acct.flow_intra[k];
        f->flow_inter[k] = z->acct.flow_inter[k];
    }
    f->qwz_gathers = st.qwz_gathers;
    f->hpz_gathers = st.hpz_gathers;
    f->secondary_bytes = st.secondary_bytes;
    f->hook_s = z->step.hook_s;
    f->step_s = z->step.step_s;
    f->wall_s = z->step.wall_s;
    f->optimizer_s = (double)atomic_load_explicit(&z->off.adamw_ns, memory_order_relaxed) * 1e-9;
    f->update_wait_s = (double)z->off.dpu_wait_ns * 1e-9;
    f->accum_wait_s = (double)atomic_load_explicit(&z->off.dpu_stall_ns, memory_order_relaxed) * 1e-9;
    for (int op = 0; op < ZERO_COLL_NUM; op++) {
        f->calls[op] = z->step.sent[op].calls;
        f->intra_bytes[op] = z->step.sent[op].intra_bytes;
        f->inter_bytes[op] = z->step.sent[op].inter_bytes;
    }
}

void zero_report_set_activation_bytes(Zero *z, size_t device_bytes, size_t host_bytes) {
    z->acct.act_dev = device_bytes;
    z->acct.act_host = host_bytes;
}

void zero_report_info(const Zero *z, ZeroReportInfo *in) {
    memset(in, 0, sizeof *in);
    in->stage = z->stage;
    in->world = z->world;
    in->node_size = z->cfg.node_size;
    in->num_tensors = z->num_tensors;
    in->num_units = z->num_units;
    in->param_dtype = z->cfg.param_dtype;
    in->grad_dtype = z->cfg.grad_dtype;
    in->bucket_elems = z->cfg.bucket_elems;
    in->prefetch_elems = z->cfg.prefetch_elems;
    in->max_live_elems = z->cfg.max_live_elems;
    in->persist_elems = z->cfg.persist_elems;
    in->numel = z->layout.numel_total;
    in->padded = z->layout.padded_total;
    in->shard = z->layout.shard_total;
    in->optimizer_tier = z->cfg.optimizer_tier;
    in->param_tier = z->stage == 3 ? z->cfg.param_tier : ZERO_TIER_DEVICE;
    for (int i = 0; i < z->num_tensors; i++)
        if (z->t[i].persistent) in->persist_padded += z->t[i].lay->split.padded;
    in->qwz = z->cfg.qwz;
    in->hpz = z->comm->hpz_size;
    in->qgz = z->cfg.qgz;
    in->hier_reduce = z->reduce.two_hops;
    in->fast_reduce = z->cfg.fast_reduce;
    in->dpu_from = z->cfg.dpu_from;
    in->qwz_block = z->gather.qwz_block;
    in->qgz_block = z->reduce.qgz_block;
    in->qwz_bytes = z->gather.qwz_own ? z->gather.qwz_own_bytes : 0;
    in->secondary_bytes = z->gather.hpz_copy ? z->gather.hpz_copy_elems * z->param_size : 0;
    in->param_is_master = z->off.param_is_master;
    in->opt_device_shard = z->off.opt_base;
    if (z->stage == 3 && !z->off.param_is_master)   // the gathers' source when the master is off the device
        in->work_shard = in->param_tier != ZERO_TIER_DEVICE ? in->shard : in->shard - in->opt_device_shard;
    if (z->off.dpu_work) in->dpu_bytes = (in->shard - in->opt_device_shard) * z->param_size;
    if (z->off.park != ZERO_TIER_DEVICE)
        for (int i = 0; i < z->num_tensors; i++)
            if (z->t[i].num_units > 1) in->parked_bytes += z->t[i].lay->split.padded * z->grad_size;
}

uint64_t zero_figures_model_states(const ZeroFigures *f) {
    uint64_t s = 0;
    for (int k = ZERO_USE_PARAMS; k <= ZERO_USE_OPTIM; k++) s += f->device[k] + f->host[k] + f->nvme[k];
    return s;
}

void zero_formula(const ZeroReportInfo *in, const ZeroFigures *f, ZeroFormula *out) {
    double pes = (double)zero_dtype_size(in->param_dtype), ges = (double)zero_dtype_size(in->grad_dtype);
    memset(out, 0, sizeof *out);
    // fp32 master, m, v: 12 bytes a parameter (the paper's K); the reduced gradient shard
    // is always fp32 (4); working params and gradients in their dtypes
    switch (in->stage) {
    case 0:   // everything whole; the reduced shard is the only 1/N term; --fast-reduce
              // gathers the bf16 sums into a whole buffer of their own
        out->replicated = pes + ges + 12.0 + (in->grad_dtype == ZERO_F32 ? 0.0 : 4.0) + (in->fast_reduce ? 2.0 : 0.0);
        out->sharded = 4.0;
        break;
    case 1:
        out->replicated = pes + ges;
        out->sharded = 16.0;
        break;
    case 2:
        out->replicated = pes;
        out->sharded = 16.0;
        out->pools = (uint64_t)ges * f->grad_pool_elems;
        break;
    default:  // gathered from the fp32 master (bf16: rounded into the gather buffer)
        out->replicated = 0.0;
        out->sharded = 16.0;
        out->pools = (uint64_t)ges * f->grad_pool_elems + (uint64_t)pes * (f->param_pool_elems + in->persist_padded) +
                     in->qwz_bytes + in->secondary_bytes;
        // offloaded, the gathers read a working shard kept apart from the master (unless fp32
        // in the master's tier: then the master is it); a partial offload's, of its tensors
        if (in->work_shard == in->shard) out->sharded += pes;
        else out->pools += (uint64_t)pes * in->work_shard;
        break;
    }
    out->pools += in->parked_bytes;   // tied partial gradients, parked off the device (offload)
    out->pools += in->dpu_bytes;      // the delayed update's working parameters, waiting to land
    out->bytes = (uint64_t)(out->replicated * (double)in->padded + out->sharded * (double)in->shard) + out->pools;
    double psi = (double)in->numel, n = (double)in->world;
    static const double paper[4][2] = {{16, 0}, {4, 12}, {2, 14}, {0, 16}};   // ZeRO paper, section 5
    out->paper_bytes = paper[in->stage][0] * psi + paper[in->stage][1] * psi / n;
}

// ---------------------------------------------------------------- JSON

static const char *dt_name(ZeroDType d) { return d == ZERO_BF16 ? "bf16" : "fp32"; }

static cJSON *add_obj(cJSON *parent, const char *key) { return parent ? cJSON_AddObjectToObject(parent, key) : NULL; }
static void add_num(cJSON *o, const char *key, double v) { if (o) cJSON_AddNumberToObject(o, key, v); }

static uint64_t kinds_total(const size_t *use, size_t act) {
    uint64_t s = act;
    for (int k = 0; k < ZERO_USE_KINDS; k++) s += use[k];
    return s;
}

uint64_t zero_figures_device_total(const ZeroFigures *f) { return kinds_total(f->device, f->act_device); }

uint64_t zero_figures_host_total(const ZeroFigures *f) { return kinds_total(f->host, f->act_host); }

uint64_t zero_budget_total(const ZeroReportInfo *in, const ZeroFigures *f) {
    uint64_t t = zero_figures_device_total(f);
    if (in->device_is_host) t += kinds_total(f->host, f->act_host) + in->runtime_bytes;
    return t;
}

static void add_kinds(cJSON *o, const size_t *use, size_t act) {
    size_t opt = use[ZERO_USE_MASTER] + use[ZERO_USE_OPTIM];
    add_num(o, "parameters", (double)use[ZERO_USE_PARAMS]);
    add_num(o, "gradients", (double)use[ZERO_USE_GRADS]);
    add_num(o, "optimizer_states", (double)opt);
    add_num(o, "activations", (double)act);
    add_num(o, "buffers", (double)use[ZERO_USE_BUFFERS]);
    add_num(o, "total", (double)kinds_total(use, act));
}

static void add_sent(cJSON *o, const ZeroFigures *f, int per_step) {
    double div = per_step ? (f->steps ? (double)f->steps : 1.0) : 1.0;
    uint64_t c = 0, ia = 0, ie = 0;
    for (int op = 0; op <= ZERO_COLL_NUM; op++) {
        cJSON *e = add_obj(o, op < ZERO_COLL_NUM ? zero_coll_name((ZeroCollOp)op) : "total");
        uint64_t calls = op < ZERO_COLL_NUM ? f->calls[op] : c;
        uint64_t intra = op < ZERO_COLL_NUM ? f->intra_bytes[op] : ia;
        uint64_t inter = op < ZERO_COLL_NUM ? f->inter_bytes[op] : ie;
        add_num(e, "calls", (double)calls / div);
        add_num(e, "intra_node_bytes", (double)intra / div);
        add_num(e, "inter_node_bytes", (double)inter / div);
        if (op < ZERO_COLL_NUM) { c += calls; ia += intra; ie += inter; }
    }
}

// The run: its settings, sizes and the formula's terms, at the top level.
static void add_run(cJSON *root, const ZeroReportInfo *in, const char *source, const ZeroFigures *ranks) {
    cJSON_AddStringToObject(root, "format", "zero-report");
    add_num(root, "version", 1);
    cJSON_AddStringToObject(root, "source", source);
    add_num(root, "stage", in->stage);
    add_num(root, "world_size", in->world);
    add_num(root, "node_size", in->node_size);
    add_num(root, "ranks_per_node", ranks[0].local_size);
    add_num(root, "num_nodes", ranks[0].num_nodes);
    cJSON_AddStringToObject(root, "param_dtype", dt_name(in->param_dtype));
    cJSON_AddStringToObject(root, "grad_dtype", dt_name(in->grad_dtype));
    add_num(root, "num_tensors", in->num_tensors);
    add_num(root, "num_units", in->num_units);
    cJSON *cfg = add_obj(root, "config");
    add_num(cfg, "bucket_elems", (double)in->bucket_elems);
    add_num(cfg, "prefetch_elems", (double)in->prefetch_elems);
    add_num(cfg, "max_live_elems", (double)in->max_live_elems);
    add_num(cfg, "persist_elems", (double)in->persist_elems);
    cJSON *pp = add_obj(cfg, "zero_pp");   // ZeRO++ switches
    if (pp) {
        cJSON_AddBoolToObject(pp, "qwz", in->qwz);
        add_num(pp, "hpz_partition_size", in->hpz);
        cJSON_AddBoolToObject(pp, "qgz", in->qgz);
        cJSON_AddBoolToObject(pp, "two_hop_gradients", in->hier_reduce);
        add_num(pp, "qwz_block", in->qwz_block);
        add_num(pp, "qgz_block", in->qgz_block);
    }
    cJSON_AddBoolToObject(root, "params_stored_as_master", in->param_is_master);   // offload, fp32: one copy
    if (in->optimizer_tier != ZERO_TIER_DEVICE)   // offload: the shard's elements whose states stay on the device
        add_num(root, "optimizer_device_shard", (double)in->opt_device_shard);
    add_num(root, "parked_tied_gradient_bytes", (double)in->parked_bytes);          // offload: off the device
    add_num(root, "psi", (double)in->numel);
    add_num(root, "psi_padded", (double)in->padded);
    add_num(root, "padding", (double)(in->padded - in->numel));
    add_num(root, "shard_elems", (double)in->shard);
    add_num(root, "steps", (double)ranks[0].steps);
    add_num(root, "grad_accum", ranks[0].grad_accum);
    cJSON_AddStringToObject(root, "formula",
                            "model_states = replicated * psi_padded + sharded * psi_padded / world_size + pools (bytes)");
    if (in->device_is_host) {   // the CPU trainer's dry run: the whole process, per rank at most
        uint64_t most = 0;
        for (int r = 0; r < in->world; r++)
            if (zero_budget_total(in, &ranks[r]) > most) most = zero_budget_total(in, &ranks[r]);
        add_num(root, "runtime_bytes", (double)in->runtime_bytes);
        add_num(root, "process_peak_bytes", (double)most);
    }
    if (in->device_budget) {
        int over = 0;
        for (int r = 0; r < in->world; r++) over += zero_budget_total(in, &ranks[r]) > in->device_budget;
        add_num(root, "device_budget_bytes", (double)in->device_budget);
        add_num(root, "ranks_over_device_budget", over);
    }
    if (in->host_budget) {
        int over = 0;
        for (int r = 0; r < in->world; r++) over += zero_figures_host_total(&ranks[r]) > in->host_budget;
        add_num(root, "host_budget_bytes", (double)in->host_budget);
        add_num(root, "ranks_over_host_budget", over);
    }
}

// A rank's pools, gather and bucket events, bytes sent by operation and by flow, ZeRO++.
static void add_rank_counts(cJSON *e, const ZeroReportInfo *in, const ZeroFigures *f) {
    cJSON *po = add_obj(e, "pools");
    add_num(po, "param_pool_elems", (double)f->param_pool_elems);
    add_num(po, "param_pool_peak", (double)f->param_pool_peak);
    add_num(po, "grad_pool_elems", (double)f->grad_pool_elems);
    add_num(po, "grad_pool_peak", (double)f->grad_pool_peak);
    // bytes of the fixed pools, counted above under parameters (gather pool, persistent
    // tensors) and gradients (gradient pool)
    add_num(po, "param_pool_bytes", (double)(f->param_pool_elems * zero_dtype_size(in->param_dtype)));
    add_num(po, "persistent_bytes", (double)(in->persist_padded * zero_dtype_size(in->param_dtype)));
    add_num(po, "grad_pool_bytes", (double)(f->grad_pool_elems * zero_dtype_size(in->grad_dtype)));
    cJSON *ev = add_obj(e, "events");
    add_num(ev, "gathers", (double)f->gathers);
    add_num(ev, "prefetches", (double)f->prefetches);
    add_num(ev, "gather_hits", (double)f->gather_hits);
    add_num(ev, "evictions", (double)f->evictions);
    add_num(ev, "wasted_gathers", (double)f->wasted_gathers);
    add_num(ev, "buckets", (double)f->buckets);
    add_num(e, "steps", (double)f->steps);
    add_sent(add_obj(e, "sent_per_step"), f, 1);
    cJSON *fl = add_obj(e, "sent_per_step_by_flow");   // the same bytes by what they carry
    for (int k = 0; fl && k < ZERO_FLOWS; k++) {
        double div = f->steps ? (double)f->steps : 1.0;
        cJSON *x = add_obj(fl, zero_flow_name((ZeroFlow)k));
        add_num(x, "intra_node_bytes", (double)f->flow_intra[k] / div);
        add_num(x, "inter_node_bytes", (double)f->flow_inter[k] / div);
    }
    cJSON *zp = add_obj(e, "zero_pp");
    add_num(zp, "secondary_partition_bytes", (double)f->secondary_bytes);
    add_num(zp, "qwz_records_bytes", (double)in->qwz_bytes);
    add_num(zp, "qwz_gathers", (double)f->qwz_gathers);
    add_num(zp, "hpz_gathers", (double)f->hpz_gathers);
    add_sent(add_obj(e, "sent_total"), f, 0);
}

// One rank's figures: memory by kind and use, NVMe traffic, time, the budget, the formula,
// and its counts (add_rank_counts).
// dry (a dry run's prediction): what it does not predict is null, not 0: the time a step
// takes and the time a swap file is busy.
static void add_rank(cJSON *e, const ZeroReportInfo *in, const ZeroFigures *f, int r, int dry) {
    add_num(e, "rank", r);
    add_kinds(add_obj(e, "device"), f->device, f->act_device);
    add_kinds(add_obj(e, "host"), f->host, f->act_host);
    add_kinds(add_obj(e, "nvme"), f->nvme, 0);
    uint64_t on_nvme = 0;
    for (int u = 0; u < ZERO_USE_KINDS; u++) on_nvme += f->nvme[u];
    cJSON *nv = add_obj(e, "nvme_per_step");   // the swap file's traffic (offload to nvme)
    add_num(nv, "read_bytes", f->steps ? (double)f->nvme_read / (double)f->steps : 0.0);
    add_num(nv, "written_bytes", f->steps ? (double)f->nvme_written / (double)f->steps : 0.0);
    if (dry && on_nvme) cJSON_AddNullToObject(nv, "busy_seconds");   // (without a swap file: none, as live)
    else add_num(nv, "busy_seconds", f->steps ? f->nvme_busy_s / (double)f->steps : 0.0);   // requests in flight
    add_num(nv, "last_step_read_bytes", (double)f->nvme_last_read);       // a step after the first: the
    add_num(nv, "last_step_written_bytes", (double)f->nvme_last_written); // deferred update's I/O is in it
    if (dry) cJSON_AddNullToObject(e, "seconds_per_step");
    else {
        cJSON *ts = add_obj(e, "seconds_per_step");   // the calling thread's time (ZeroFigures)
        double ns = f->steps ? (double)f->steps : 1.0;
        add_num(ts, "step", f->wall_s / ns);
        add_num(ts, "in_hooks", f->hook_s / ns);
        add_num(ts, "in_zero_step", f->step_s / ns);
        add_num(ts, "model", (f->wall_s - f->hook_s - f->step_s) / ns);
        add_num(ts, "optimizer_compute", f->optimizer_s / ns);   // offload: the CPU AdamW (zero.h: ZeroFigures)
        if (in->dpu_from) {   // the delayed update: what of the CPU's step the device still waited for
            add_num(ts, "update_wait", f->update_wait_s / ns);
            add_num(ts, "accumulation_wait", f->accum_wait_s / ns);
        }
    }
    if (in->device_budget) {   // headroom < 0: over the budget by that much
        cJSON *b = add_obj(e, "device_budget");
        uint64_t total = zero_budget_total(in, f);
        if (b) cJSON_AddBoolToObject(b, "fits", total <= in->device_budget);
        add_num(b, "headroom_bytes", (double)in->device_budget - (double)total);
        add_num(b, "counted_bytes", (double)total);
    }
    if (in->host_budget) {
        cJSON *b = add_obj(e, "host_budget");
        uint64_t total = zero_figures_host_total(f);
        if (b) cJSON_AddBoolToObject(b, "fits", total <= in->host_budget);
        add_num(b, "headroom_bytes", (double)in->host_budget - (double)total);
        add_num(b, "counted_bytes", (double)total);
    }
    cJSON *os = add_obj(e, "optimizer_states_split");
    add_num(os, "device_fp32_master", (double)f->device[ZERO_USE_MASTER]);
    add_num(os, "device_adam_m_v", (double)f->device[ZERO_USE_OPTIM]);
    add_num(os, "host_fp32_master", (double)f->host[ZERO_USE_MASTER]);
    add_num(os, "host_adam_m_v", (double)f->host[ZERO_USE_OPTIM]);
    add_num(e, "model_states_bytes", (double)zero_figures_model_states(f));
    ZeroFormula fm;
    zero_formula(in, f, &fm);
    cJSON *fo = add_obj(e, "formula");
    add_num(fo, "replicated_bytes_per_param", fm.replicated);
    add_num(fo, "sharded_bytes_per_param", fm.sharded);
    add_num(fo, "pool_bytes", (double)fm.pools);
    add_num(fo, "model_states_bytes", (double)fm.bytes);
    add_num(fo, "paper_mixed_precision_bytes", fm.paper_bytes);
    add_rank_counts(e, in, f);
}

// The trainer's fields (a JSON object) at the top level; its value wins over the plugin's.
static void add_extra(cJSON *root, cJSON *extra_obj) {
    cJSON *item = extra_obj->child;
    while (item) {
        cJSON *next = item->next;
        cJSON_DetachItemViaPointer(extra_obj, item);
        cJSON_DeleteItemFromObjectCaseSensitive(root, item->string);   // the trainer's value wins
        cJSON_AddItemToObject(root, item->string, item);
        item = next;
    }
    cJSON_Delete(extra_obj);
}

char *zero_report_json(const ZeroReportInfo *in, const char *source, const ZeroFigures *ranks, const char *extra,
                       char *err, size_t errlen) {
    cJSON *extra_obj = NULL;
    if (extra && *extra) {
        extra_obj = cJSON_Parse(extra);
        if (!cJSON_IsObject(extra_obj)) {
            cJSON_Delete(extra_obj);
            snprintf(err, errlen, "the extra report fields are not a JSON object: %.200s", extra);
            return NULL;
        }
    }
    cJSON *root = cJSON_CreateObject();
    if (!root) { cJSON_Delete(extra_obj); snprintf(err, errlen, "out of host memory building the report"); return NULL; }
    add_run(root, in, source, ranks);
    cJSON *arr = cJSON_AddArrayToObject(root, "ranks");
    for (int r = 0; arr && r < in->world; r++) {
        cJSON *e = cJSON_CreateObject();
        if (!e || !cJSON_AddItemToArray(arr, e)) break;
        add_rank(e, in, &ranks[r], r, strcmp(source, "dry_run") == 0);
    }
    if (extra_obj) add_extra(root, extra_obj);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) snprintf(err, errlen, "out of host memory printing the report");
    return text;
}

// ---------------------------------------------------------------- live report

// ZeroFigures <-> doubles, for the gather to rank 0 (integers below 2^53 are exact).
#define FIG_DOUBLES (3 * ZERO_USE_KINDS + 3 + 2 + 4 + 6 + 4 + 3 * ZERO_NUM_COLLS + 2 * ZERO_FLOWS + 3 + 4 + 2 + 2)

static void fig_pack(const ZeroFigures *f, double *d) {
    int k = 0;
    for (int u = 0; u < ZERO_USE_KINDS; u++) {
        d[k++] = (double)f->device[u]; d[k++] = (double)f->host[u]; d[k++] = (double)f->nvme[u];
    }
    d[k++] = (double)f->nvme_read; d[k++] = (double)f->nvme_written; d[k++] = f->nvme_busy_s;
    d[k++] = (double)f->act_device; d[k++] = (double)f->act_host;
    d[k++] = (double)f->param_pool_elems; d[k++] = (double)f->param_pool_peak;
    d[k++] = (double)f->grad_pool_elems; d[k++] = (double)f->grad_pool_peak;
    d[k++] = (double)f->gathers; d[k++] = (double)f->prefetches; d[k++] = (double)f->gather_hits;
    d[k++] = (double)f->evictions; d[k++] = (double)f->wasted_gathers; d[k++] = (double)f->buckets;
    d[k++] = f->local_size; d[k++] = f->num_nodes; d[k++] = f->grad_accum; d[k++] = (double)f->steps;
    for (int op = 0; op < ZERO_NUM_COLLS; op++) {
        d[k++] = (double)f->calls[op]; d[k++] = (double)f->intra_bytes[op]; d[k++] = (double)f->inter_bytes[op];
    }
    for (int fl = 0; fl < ZERO_FLOWS; fl++) { d[k++] = (double)f->flow_intra[fl]; d[k++] = (double)f->flow_inter[fl]; }
    d[k++] = (double)f->qwz_gathers; d[k++] = (double)f->hpz_gathers; d[k++] = (double)f->secondary_bytes;
    d[k++] = f->hook_s; d[k++] = f->step_s; d[k++] = f->wall_s; d[k++] = f->optimizer_s;
    d[k++] = (double)f->nvme_last_read; d[k++] = (double)f->nvme_last_written;
    d[k++] = f->update_wait_s; d[k++] = f->accum_wait_s;
}

static void fig_unpack(const double *d, ZeroFigures *f) {
    int k = 0;
    memset(f, 0, sizeof *f);
    for (int u = 0; u < ZERO_USE_KINDS; u++) {
        f->device[u] = (size_t)d[k++]; f->host[u] = (size_t)d[k++]; f->nvme[u] = (size_t)d[k++];
    }
    f->nvme_read = (uint64_t)d[k++]; f->nvme_written = (uint64_t)d[k++]; f->nvme_busy_s = d[k++];
    f->act_device = (size_t)d[k++]; f->act_host = (size_t)d[k++];
    f->param_pool_elems = (size_t)d[k++]; f->param_pool_peak = (size_t)d[k++];
    f->grad_pool_elems = (size_t)d[k++]; f->grad_pool_peak = (size_t)d[k++];
    f->gathers = (uint64_t)d[k++]; f->prefetches = (uint64_t)d[k++]; f->gather_hits = (uint64_t)d[k++];
    f->evictions = (uint64_t)d[k++]; f->wasted_gathers = (uint64_t)d[k++]; f->buckets = (uint64_t)d[k++];
    f->local_size = (int)d[k++]; f->num_nodes = (int)d[k++]; f->grad_accum = (int)d[k++]; f->steps = (uint64_t)d[k++];
    for (int op = 0; op < ZERO_NUM_COLLS; op++) {
        f->calls[op] = (uint64_t)d[k++]; f->intra_bytes[op] = (uint64_t)d[k++]; f->inter_bytes[op] = (uint64_t)d[k++];
    }
    for (int fl = 0; fl < ZERO_FLOWS; fl++) { f->flow_intra[fl] = (uint64_t)d[k++]; f->flow_inter[fl] = (uint64_t)d[k++]; }
    f->qwz_gathers = (uint64_t)d[k++]; f->hpz_gathers = (uint64_t)d[k++]; f->secondary_bytes = (size_t)d[k++];
    f->hook_s = d[k++]; f->step_s = d[k++]; f->wall_s = d[k++]; f->optimizer_s = d[k++];
    f->nvme_last_read = (uint64_t)d[k++]; f->nvme_last_written = (uint64_t)d[k++];
    f->update_wait_s = d[k++]; f->accum_wait_s = d[k++];
}

int zero_report_write(Zero *z, const char *path_json, const char *extra_json_fields) {
    if (z->step.open) {   // the same on every rank
        return zero_refuse(z->rank, "zero_report_write inside a step (call it between steps)");
    }
    // only rank 0 writes the file: a gather to it, O(1) bytes from each other rank
    double mine[FIG_DOUBLES], *d = NULL;
    ZeroFigures *all = NULL;
    ZeroFigures fig;
    zero_figures(z, &fig);
    fig_pack(&fig, mine);
    if (z->rank == 0) {
        d = calloc((size_t)z->world * FIG_DOUBLES, sizeof(double));
        all = calloc((size_t)z->world, sizeof(ZeroFigures));
        if (!d || !all) zero_fail(z, "out of host memory gathering the report (%d ranks)", z->world);
    }
    z->b->gather_f64(z->b, z->comm, mine, FIG_DOUBLES, d, "the report figures");
    int bad = 0;
    if (z->rank == 0) {
        for (int r = 0; r < z->world; r++) fig_unpack(d + (size_t)r * FIG_DOUBLES, &all[r]);
        ZeroReportInfo in;
        zero_report_info(z, &in);
        char err[512];
        char *text = zero_report_json(&in, "live", all, extra_json_fields, err, sizeof err);
        if (!text || zfile_write_all(path_json, text, strlen(text), NULL, err, sizeof err) != 0) {
            zero_say(z, "writing the report %s failed: %s", path_json ? path_json : "(null)", err);
            bad = 1;
        }
        free(text);
        zero_figures_print_nvme(&all[0], "zero: rank 0's ");   // the swap file's traffic, in the log too
    }
    free(d);
    free(all);
    double f = bad;
    zero_allreduce_sum_f64(z, &f, 1);
    return f != 0 ? -1 : 0;
}

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

void zero_figures_print_sent(const ZeroFigures *f, const char *prefix) {
    if (f->steps == 0) return;
    char a[32], b[32];
    printf("%ssent per step (%llu step%s):", prefix, (unsigned long long)f->steps, f->steps == 1 ? "" : "s");
    for (int op = 0; op < ZERO_COLL_NUM; op++)
        if (f->calls[op])
            printf(" %s %s B intra + %s B inter;", zero_coll_name((ZeroCollOp)op),
                   grouped(a, sizeof a, f->intra_bytes[op] / f->steps), grouped(b, sizeof b, f->inter_bytes[op] / f->steps));
    printf("\n");
    printf("%sby flow per step:", prefix);
    for (int k = 0; k < ZERO_FLOWS; k++)
        if (f->flow_intra[k] + f->flow_inter[k])
            printf(" %s %s B intra + %s B inter;", zero_flow_name((ZeroFlow)k),
                   grouped(a, sizeof a, f->flow_intra[k] / f->steps), grouped(b, sizeof b, f->flow_inter[k] / f->steps));
    printf("\n");
}

void zero_figures_print_nvme(const ZeroFigures *f, const char *prefix) {
    uint64_t on_nvme = 0;
    for (int u = 0; u < ZERO_USE_KINDS; u++) on_nvme += f->nvme[u];
    if (f->steps == 0 || on_nvme == 0) return;
    char a[32], b[32], c[32], d[32];
    printf("%sNVMe swap file per step (%llu step%s): read %s B, written %s B; its last step: read %s B, written %s B\n",
           prefix, (unsigned long long)f->steps, f->steps == 1 ? "" : "s", grouped(a, sizeof a, f->nvme_read / f->steps),
           grouped(b, sizeof b, f->nvme_written / f->steps), grouped(c, sizeof c, f->nvme_last_read),
           grouped(d, sizeof d, f->nvme_last_written));
}

void zero_report_print(const Zero *z) {
    if (z->rank != 0) return;
    ZeroFigures f;
    zero_figures(z, &f);
    ZeroReportInfo in;
    zero_report_info(z, &in);
    ZeroFormula fm;
    zero_formula(&in, &f, &fm);
    char a[40], b[40], c[40], d[40];
    printf("zero: stage %d on %d ranks (%d node%s of %d), %s params, %s grads: %s parameters, %s padded\n", in.stage,
           in.world, f.num_nodes, f.num_nodes == 1 ? "" : "s", f.local_size, dt_name(in.param_dtype),
           dt_name(in.grad_dtype), grouped(a, sizeof a, in.numel), grouped(b, sizeof b, in.padded));
    // The host backend's "device" is where the model computes: host RAM. The column says
    // so, lest it read as GPU memory; the "host" column is what sits beside it.
    const char *device = strcmp(z->b->name, "host") == 0 ? "device (host RAM on the CPU backend)" : "device";
    int w = (int)strlen(device) > 16 ? (int)strlen(device) : 16;
    int nvme = 0;   // an NVMe column only when something lives there
    for (int k = 0; k < ZERO_USE_KINDS; k++) nvme |= f.nvme[k] != 0;
    printf("zero:   %-20s %*s %16s%s\n", "rank 0 bytes", w, device, "host", nvme ? "             nvme" : "");
    static const char *label[] = {"parameters", "gradients", "optimizer states", "activations", "buffers"};
    uint64_t td = 0, th = 0, tn = 0;
    for (int k = 0; k < 5; k++) {
        uint64_t dv, hv, nv;
        if (k == 2) {
            dv = f.device[ZERO_USE_MASTER] + f.device[ZERO_USE_OPTIM];
            hv = f.host[ZERO_USE_MASTER] + f.host[ZERO_USE_OPTIM];
            nv = f.nvme[ZERO_USE_MASTER] + f.nvme[ZERO_USE_OPTIM];
        } else if (k == 3) {
            dv = f.act_device; hv = f.act_host; nv = 0;
        } else {
            int u = k == 0 ? ZERO_USE_PARAMS : k == 1 ? ZERO_USE_GRADS : ZERO_USE_BUFFERS;
            dv = f.device[u]; hv = f.host[u]; nv = f.nvme[u];
        }
        td += dv;
        th += hv;
        tn += nv;
        printf("zero:   %-20s %*s %16s", label[k], w, grouped(a, sizeof a, dv), grouped(b, sizeof b, hv));
        if (nvme) printf(" %16s", grouped(c, sizeof c, nv));
        printf("\n");
    }
    printf("zero:   %-20s %*s %16s", "total", w, grouped(a, sizeof a, td), grouped(b, sizeof b, th));
    if (nvme) printf(" %16s", grouped(c, sizeof c, tn));
    printf("\n");
    if (z->off.opt != ZERO_TIER_DEVICE && z->off.opt_first > 0)
        printf("zero:   (a partial optimizer offload: tensors %s..%s, %zu of this rank's %zu shard elements, keep "
               "their optimizer states on the device)\n", z->t[0].name, z->t[z->off.opt_first - 1].name, z->off.opt_base,
               z->layout.shard_total);
    if (z->off.param_is_master)
        printf("zero:   (the working parameters are fp32 like the master and live in its tier, %s: stored once, "
               "as the master)\n", zero_tier_name(z->off.param));
    printf("zero: model states %s B = %g B x %s + %g B x %s / %d + pools %s B (paper, mixed precision: %.0f B)\n",
           grouped(a, sizeof a, zero_figures_model_states(&f)), fm.replicated, grouped(b, sizeof b, in.padded), fm.sharded,
           grouped(c, sizeof c, in.padded), in.world, grouped(d, sizeof d, fm.pools), fm.paper_bytes);
    zero_figures_print_sent(&f, "zero: ");
    if (in.qwz || in.hpz > 1 || in.hier_reduce)
        printf("zero: ZeRO++: qwZ %s (records %s B), hpZ %d (secondary partition %s B), gradients %s\n",
               in.qwz ? "on" : "off", grouped(a, sizeof a, in.qwz_bytes), in.hpz, grouped(b, sizeof b, in.secondary_bytes),
               in.qgz ? "in two hops, int4 (qgZ)" : in.hier_reduce ? "in two hops" : "flat");
    fflush(stdout);
}
