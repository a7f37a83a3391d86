// dryrun.c: predicts every rank's figures (memory by kind, pool sizes, stage-3 gather
// events, bytes sent per collective per step) without MPI and without model memory.
//
// Rather than restating the plugin's sizing and scheduling rules in formulas that could
// drift, the prediction runs the plugin itself: zero_init, then the hooks of a standard
// training step, once per rank, on a "dry" backend whose memory is reserved address
// space (PROT_NONE: never committed, and a stray access would fault rather than go
// unnoticed), whose kernels do nothing and whose collectives only count bytes the way
// comm_mpi.c does. Every size, placement and prefetch decision is therefore the live one.
#include "state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "report.h"
#include "io/zfile.h"

#define DRY_MAX_MAPS 64
#define DRY_ALLREDUCE_CHUNK 64   // doubles per all-gather, as zero_mpi_allreduce_sum_f64

struct ZeroStream { int unused; };
struct ZeroEvent { int unused; };
static struct ZeroStream dry_main_stream, dry_comm_stream;
static struct ZeroEvent dry_event;

typedef struct {
    struct { void *p; size_t n; } maps[DRY_MAX_MAPS];
    int n;
} DryCtx;

static void *d_alloc(const ZeroBackend *b, ZeroMemKind kind, size_t bytes) {
    (void)kind;
    DryCtx *c = b->ctx;
    if (c->n == DRY_MAX_MAPS) return NULL;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), n = (bytes + page - 1) / page * page;
    if (n == 0) n = page;
    void *p = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "zero: dry run: reserving %zu bytes of address space failed (ulimit -v?)\n", n);
        return NULL;
    }
    c->maps[c->n].p = p;
    c->maps[c->n].n = n;
    c->n++;
    return p;
}

static void d_free(const ZeroBackend *b, ZeroMemKind kind, void *p) {
    (void)kind;
    DryCtx *c = b->ctx;
    for (int i = 0; i < c->n; i++)
        if (c->maps[i].p == p) {
            munmap(p, c->maps[i].n);
            c->maps[i] = c->maps[--c->n];
            return;
        }
}

static void d_memset0(const ZeroBackend *b, void *p, size_t n, ZeroStream *s) { (void)b; (void)p; (void)n; (void)s; }
static void d_copy(const ZeroBackend *b, void *dst, ZeroMemKind dk, const void *src, ZeroMemKind sk, size_t n,
                   ZeroStream *s) {
    (void)b; (void)dst; (void)dk; (void)src; (void)sk; (void)n; (void)s;
}
static ZeroStream *d_main_stream(const ZeroBackend *b) { (void)b; return &dry_main_stream; }
static ZeroStream *d_stream_create(const ZeroBackend *b) { (void)b; return &dry_comm_stream; }
static void d_stream_destroy(const ZeroBackend *b, ZeroStream *s) { (void)b; (void)s; }
static void d_stream_sync(const ZeroBackend *b, ZeroStream *s) { (void)b; (void)s; }
static ZeroEvent *d_event_create(const ZeroBackend *b) { (void)b; return &dry_event; }
static void d_event_destroy(const ZeroBackend *b, ZeroEvent *e) { (void)b; (void)e; }
static void d_event_record(const ZeroBackend *b, ZeroEvent *e, ZeroStream *s) { (void)b; (void)e; (void)s; }
static void d_stream_wait(const ZeroBackend *b, ZeroStream *s, ZeroEvent *e) { (void)b; (void)s; (void)e; }

// Collectives: one bracketed operation of sum(count) elements per peer, as comm_mpi.c counts.
static void d_count(ZeroComm *c, ZeroGroup g, ZeroCollOp op, const ZeroCollPart *parts, int nparts, ZeroDType dt,
                    const char *what) {
    uint64_t per_peer = 0;
    for (int i = 0; i < nparts; i++) per_peer += parts[i].count * zero_dtype_size(dt);
    zero_coll_begin_group(c, g, op, per_peer, what);
    zero_coll_end(c);
}
static void d_all_gather(const ZeroBackend *b, ZeroComm *c, ZeroGroup g, const ZeroCollPart *parts, int nparts,
                         ZeroDType dt, ZeroStream *s, const char *what) {
    (void)b; (void)s;
    d_count(c, g, ZERO_COLL_ALL_GATHER, parts, nparts, dt, what);
}
static void d_all_to_all(const ZeroBackend *b, ZeroComm *c, ZeroGroup g, const ZeroCollPart *parts, int nparts,
                         ZeroDType dt, ZeroStream *s, const char *what) {
    (void)b; (void)s;
    d_count(c, g, ZERO_COLL_ALL_TO_ALL, parts, nparts, dt, what);
}
static void d_reduce_scatter(const ZeroBackend *b, ZeroComm *c, ZeroGroup g, const ZeroCollPart *parts, int nparts,
                             ZeroDType dt, ZeroStream *s, const char *what) {
    (void)b; (void)s;
    d_count(c, g, ZERO_COLL_REDUCE_SCATTER, parts, nparts, dt, what);
}
static void d_allreduce_sum_f64(const ZeroBackend *b, ZeroComm *c, double *values, int n, const char *what) {
    (void)b; (void)values;
    if (c->world == 1 || n <= 0) return;
    for (int base = 0; base < n; base += DRY_ALLREDUCE_CHUNK) {
        int k = n - base < DRY_ALLREDUCE_CHUNK ? n - base : DRY_ALLREDUCE_CHUNK;
        zero_coll_begin(c, ZERO_COLL_ALL_REDUCE, (uint64_t)k * sizeof(double), what);
        zero_coll_end(c);
    }
}
static void d_gather_f64(const ZeroBackend *b, ZeroComm *c, const double *values, int n, double *all, const char *what) {
    (void)b; (void)values; (void)all;
    if (c->world == 1 || n <= 0) return;
    zero_coll_begin_to_root(c, ZERO_COLL_GATHER, (uint64_t)n * sizeof(double), what);
    zero_coll_end(c);
}
static void d_reduce_slices(const ZeroBackend *b, float *acc, const void *src, size_t stride, int nslices, size_t n,
                            ZeroDType dt, ZeroStream *s) {
    (void)b; (void)acc; (void)src; (void)stride; (void)nslices; (void)n; (void)dt; (void)s;
}
static void d_adamw(const ZeroBackend *b, float *param, const float *grad, float *m, float *v, size_t n,
                    const AdamWParams *p, int decay, ZeroStream *s) {
    (void)b; (void)param; (void)grad; (void)m; (void)v; (void)n; (void)p; (void)decay; (void)s;
}
static void d_refresh(const ZeroBackend *b, void *dst, ZeroDType dt, const float *master, size_t n, uint64_t seed, int t,
                      uint64_t gidx0, ZeroStream *s) {
    (void)b; (void)dst; (void)dt; (void)master; (void)n; (void)seed; (void)t; (void)gidx0; (void)s;
}
static void d_sum_slices(const ZeroBackend *b, float *out, const void *src, size_t stride, int nslices, size_t n,
                         ZeroDType dt, ZeroStream *s) {
    (void)b; (void)out; (void)src; (void)stride; (void)nslices; (void)n; (void)dt; (void)s;
}
static void d_wire_pack(const ZeroBackend *b, ZeroWire w, int block, const void *src, ZeroDType dt, size_t slice_n,
                        int nslices, int group, void *rec, ZeroStream *s) {
    (void)b; (void)w; (void)block; (void)src; (void)dt; (void)slice_n; (void)nslices; (void)group; (void)rec; (void)s;
}
static void d_wire_unpack(const ZeroBackend *b, ZeroWire w, int block, const void *rec, size_t slice_n, int nslices,
                          void *out, ZeroDType dt, ZeroStream *s) {
    (void)b; (void)w; (void)block; (void)rec; (void)slice_n; (void)nslices; (void)out; (void)dt; (void)s;
}
static void d_wire_reduce_pack(const ZeroBackend *b, ZeroWire w, int block, const void *in, ZeroDType dt,
                               size_t slice_n, int ngroups, int nout, void *out, ZeroStream *s) {
    (void)b; (void)w; (void)block; (void)in; (void)dt; (void)slice_n; (void)ngroups; (void)nout; (void)out; (void)s;
}
static void d_wire_reduce(const ZeroBackend *b, ZeroWire w, int block, const void *rec, ZeroDType dt, size_t slice_n,
                          int nrec, size_t n, float *acc, int accumulate, ZeroStream *s) {
    (void)b; (void)w; (void)block; (void)rec; (void)dt; (void)slice_n; (void)nrec; (void)n; (void)acc; (void)accumulate;
    (void)s;
}
static void d_host_call(const ZeroBackend *b, ZeroStream *s, void (*fn)(void *), void *arg) {
    (void)b; (void)s; (void)fn; (void)arg;   // the plugin queues no CPU work on a counting backend
}
static void d_sum_squares(const ZeroBackend *b, const float *x, size_t n, double *out, ZeroStream *s) {
    (void)b; (void)x; (void)n; (void)s;
    *out = 0.0;   // host memory of zero.c: the one result a kernel leaves on the host
}

static const ZeroBackend dry_template = {
    .name = "dry run",
    .needs_mpi = 0,
    .counts_only = 1,
    .alloc = d_alloc,
    .free = d_free,
    .memset0 = d_memset0,
    .copy = d_copy,
    .main_stream = d_main_stream,
    .stream_create = d_stream_create,
    .stream_create_copy = d_stream_create,
    .stream_create_host = d_stream_create,
    .stream_destroy = d_stream_destroy,
    .stream_sync = d_stream_sync,
    .event_create = d_event_create,
    .event_destroy = d_event_destroy,
    .event_record = d_event_record,
    .stream_wait = d_stream_wait,
    .all_gather = d_all_gather,
    .all_to_all = d_all_to_all,
    .reduce_scatter = d_reduce_scatter,
    .allreduce_sum_f64 = d_allreduce_sum_f64,
    .gather_f64 = d_gather_f64,
    .reduce_slices = d_reduce_slices,
    .sum_slices = d_sum_slices,
    .adamw = d_adamw,
    .refresh = d_refresh,
    .sum_squares = d_sum_squares,
    .wire_pack = d_wire_pack,
    .wire_unpack = d_wire_unpack,
    .wire_reduce_pack = d_wire_reduce_pack,
    .wire_reduce = d_wire_reduce,
    .host_call = d_host_call,
};

// The values do not matter, and `out` is reserved, untouchable address space.
static void dry_init(void *ctx, int tensor, size_t offset, size_t count, float *out) {
    (void)ctx; (void)tensor; (void)offset; (void)count; (void)out;
}

// One rank's run: init, then `steps` standard steps. Fills fig (and info when not NULL; first,
// when not NULL, with the figures after the first step).
static int simulate(const ZeroTensor *tensors, int n, int num_units, const ZeroConfig *cfg, int world, int rank,
                    int grad_accum, int steps, ZeroFigures *fig, ZeroReportInfo *info, ZeroFigures *first) {
    ZeroComm comm;
    memset(&comm, 0, sizeof comm);
    comm.rank = rank;
    comm.world = world;
    comm.launch = ZERO_LAUNCH_ENV;
    if (zero_comm_set_layout(&comm, cfg->node_size, cfg->hpz) != 0) return -1;
    ZeroConfig c = *cfg;
    c.timeout_s = 0;   // no watchdog thread: nothing here can hang
    DryCtx ctx;
    memset(&ctx, 0, sizeof ctx);
    ZeroBackend b = dry_template;
    b.ctx = &ctx;
    Zero *z = zero_init(tensors, n, num_units, &c, &comm, &b, dry_init, NULL);
    if (!z) return -1;
    ZeroStepArgs a = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 0.0f, 0};
    for (int s = 1; s <= steps; s++) {
        zero_begin_step(z, grad_accum);
        for (int m = 0; m < grad_accum; m++) {
            for (int u = 0; u < num_units; u++) {
                zero_fetch(z, u, 0);
                zero_release(z, u, 0);
            }
            for (int u = num_units - 1; u >= 0; u--) {
                zero_fetch(z, u, 1);
                zero_grads_ready(z, u);
                zero_release(z, u, 1);
            }
        }
        a.t = s;
        zero_step(z, &a);
        if (s == 1 && first) zero_figures(z, first);
    }
    zero_figures(z, fig);
    fig->hook_s = fig->step_s = fig->wall_s = fig->optimizer_s = 0.0;   // the simulation's time is no prediction
    if (info) zero_report_info(z, info);
    zero_free(z);
    return 0;
}

int zero_predict(const ZeroTensor *tensors, int n, int num_units, const ZeroConfig *cfg, int world, int grad_accum,
                 int steps, ZeroPrediction *out_per_rank) {
    if (!cfg || !out_per_rank || world < 1 || grad_accum < 1 || steps < 0) {
        fprintf(stderr, "zero: zero_predict needs a config, an output array, world >= 1, grad_accum >= 1, steps >= 0\n");
        return -1;
    }
    for (int r = 0; r < world; r++)
        if (simulate(tensors, n, num_units, cfg, world, r, grad_accum, steps, &out_per_rank[r], NULL, NULL) != 0) return -1;
    return 0;
}

// What a step adds to a counter: the first step differs from the rest (stage 3's first
// forward gathers a unit every later step finds gathered), and each later step repeats the
// second (the schedule is the same and starts from the same state).
static uint64_t extend(uint64_t first, uint64_t second, int steps) {
    return steps > 0 ? first + (uint64_t)(steps - 1) * (second - first) : second - first;
}

// zero_predict for a run of `steps` optimizer steps, from two simulated ones: the counters of
// the whole run, as the live report sums them (0 steps: of one step after the first, the
// steady state of a run whose length is not known).
static int predict_run(const ZeroTensor *tensors, int n, int num_units, const ZeroConfig *cfg, int world,
                       int grad_accum, int steps, ZeroPrediction *out_per_rank) {
    if (steps == 1) return zero_predict(tensors, n, num_units, cfg, world, grad_accum, 1, out_per_rank);
    for (int r = 0; r < world; r++) {
        ZeroFigures one, *f = &out_per_rank[r];
        if (simulate(tensors, n, num_units, cfg, world, r, grad_accum, 2, f, NULL, &one) != 0) return -1;
#define EXTEND(x) f->x = extend(one.x, f->x, steps)
        EXTEND(nvme_read); EXTEND(nvme_written);
        EXTEND(gathers); EXTEND(prefetches); EXTEND(gather_hits); EXTEND(evictions); EXTEND(wasted_gathers);
        EXTEND(buckets); EXTEND(qwz_gathers); EXTEND(hpz_gathers); EXTEND(steps);
        for (int op = 0; op < ZERO_NUM_COLLS; op++) { EXTEND(calls[op]); EXTEND(intra_bytes[op]); EXTEND(inter_bytes[op]); }
        for (int k = 0; k < ZERO_FLOWS; k++) { EXTEND(flow_intra[k]); EXTEND(flow_inter[k]); }
#undef EXTEND
    }
    return 0;
}

// zero_predict_write, with a device budget (0: none) to state in the JSON.
static int predict_write(const char *path_json, const ZeroTensor *tensors, int n, int num_units, const ZeroConfig *cfg,
                         int world, int grad_accum, int steps, const ZeroPrediction *per_rank,
                         const char *extra_json_fields, const ZeroDryRunModel *model) {
    if (!path_json || !cfg || world < 1 || grad_accum < 1 || steps < 0) {
        fprintf(stderr, "zero: zero_predict_write needs a path, a config, world >= 1, grad_accum >= 1, steps >= 0\n");
        return -1;
    }
    ZeroPrediction *mine = NULL;
    if (!per_rank) {
        mine = calloc((size_t)world, sizeof(ZeroPrediction));
        if (!mine || zero_predict(tensors, n, num_units, cfg, world, grad_accum, steps, mine) != 0) {
            free(mine);
            return -1;
        }
        per_rank = mine;
    }
    ZeroReportInfo info;
    ZeroFigures scratch;
    int rc = simulate(tensors, n, num_units, cfg, world, 0, grad_accum, 0, &scratch, &info, NULL);
    if (model) {
        info.device_budget = model->device_budget;
        info.device_is_host = model->device_is_host;
        info.runtime_bytes = model->runtime_bytes;
        info.host_budget = model->host_budget;
    }
    char err[512];
    char *text = rc == 0 ? zero_report_json(&info, "dry_run", per_rank, extra_json_fields, err, sizeof err) : NULL;
    if (rc == 0 && (!text || zfile_write_all(path_json, text, strlen(text), NULL, err, sizeof err) != 0)) {
        fprintf(stderr, "zero: writing the dry-run report %s failed: %s\n", path_json, err);
        rc = -1;
    }
    if (!text) rc = -1;
    free(text);
    free(mine);
    return rc;
}

int zero_predict_write(const char *path_json, const ZeroTensor *tensors, int n, int num_units, const ZeroConfig *cfg,
                       int world, int grad_accum, int steps, const ZeroPrediction *per_rank, const char *extra_json_fields) {
    return predict_write(path_json, tensors, n, num_units, cfg, world, grad_accum, steps, per_rank, extra_json_fields, NULL);
}

#define DRY_GiB 1073741824.0
#define DRY_MAX_GROUPS 16   // lines of the budget table; the JSON has every rank

// What a budget counts of a rank: its device total (zero_budget_total), or its host total.
static uint64_t counted(const ZeroReportInfo *in, const ZeroPrediction *p, int host) {
    return host ? zero_figures_host_total(p) : zero_budget_total(in, p);
}

// Ranks in runs of equal totals, each run with its verdict, then the summary line; host:
// the host budget, else the device's. Returns how many ranks do not fit.
static int print_budget(const ZeroPrediction *pred, int world, const ZeroReportInfo *in, int host) {
    const size_t budget = host ? in->host_budget : in->device_budget;
    printf("%s budget %.2f GiB (%zu bytes) per rank%s:\n", host ? "host" : in->device_is_host ? "memory" : "device",
           budget / DRY_GiB, budget,
           host ? " (offload's host tier, pinned buffers and host activations; not the process's runtime)"
                : in->device_is_host ? " (device and host tiers, activations and the process's runtime)" : "");
    int over = 0, worst = 0, groups = 0;
    for (int r0 = 0, r1; r0 < world; r0 = r1) {
        uint64_t total = counted(in, &pred[r0], host);
        for (r1 = r0 + 1; r1 < world && counted(in, &pred[r1], host) == total; r1++) {}
        if (total > budget) over += r1 - r0;
        if (total > counted(in, &pred[worst], host)) worst = r0;
        if (++groups > DRY_MAX_GROUPS) continue;
        char ranks[48];
        if (r1 - r0 == 1) snprintf(ranks, sizeof ranks, "rank %d", r0);
        else snprintf(ranks, sizeof ranks, "ranks %d-%d", r0, r1 - 1);
        if (total <= budget)
            printf("  %-18s %8.2f GiB: fits (%.2f GiB free)\n", ranks, total / DRY_GiB, (budget - total) / DRY_GiB);
        else
            printf("  %-18s %8.2f GiB: does not fit (%.2f GiB over)\n", ranks, total / DRY_GiB, (total - budget) / DRY_GiB);
    }
    if (groups > DRY_MAX_GROUPS) printf("  ... %d more groups of ranks (the JSON has every rank)\n", groups - DRY_MAX_GROUPS);
    uint64_t most = counted(in, &pred[worst], host);
    if (over == 0)
        printf("fits: all %d ranks fit in %.2f GiB (the largest, rank %d, needs %.2f GiB)\n", world, budget / DRY_GiB,
               worst, most / DRY_GiB);
    else
        printf("does not fit: %d of %d ranks need more than %.2f GiB (rank %d needs %.2f GiB, %.2f GiB over)\n", over,
               world, budget / DRY_GiB, worst, most / DRY_GiB, (most - budget) / DRY_GiB);
    return over;
}

// Both budgets given, the optimizer in host memory and a rank over one of them: the largest
// optimizer_ratio, in steps of 0.05, at which every rank fits both (the least device memory
// that the host allows), each predicted as the run would be. Lower ratios hold more on the
// device and less on the host, so the first ratio that fits the host decides.
static void suggest_ratio(const ZeroTensor *tensors, int n, int num_units, const ZeroConfig *cfg, int world,
                          int grad_accum, const ZeroDryRunModel *model, const ZeroReportInfo *in) {
    ZeroPrediction *p = calloc((size_t)world, sizeof(ZeroPrediction));
    if (!p) return;
    ZeroConfig c = *cfg;
    for (int k = 20; k >= 1; k--) {
        c.optimizer_ratio = k / 20.0;
        if (zero_predict(tensors, n, num_units, &c, world, grad_accum, 1, p) != 0) break;
        uint64_t dev = 0, host = 0;
        for (int r = 0; r < world; r++) {
            p[r].act_device = model->act_device;
            p[r].act_host = model->act_host;
            if (zero_budget_total(in, &p[r]) > dev) dev = zero_budget_total(in, &p[r]);
            if (zero_figures_host_total(&p[r]) > host) host = zero_figures_host_total(&p[r]);
        }
        if (host > in->host_budget) continue;
        if (dev <= in->device_budget)
            printf("a partial optimizer offload fits both: --offload-optimizer-ratio %.2f (at most %.2f GiB on the device "
                   "and %.2f GiB of host memory per rank)\n", c.optimizer_ratio, dev / DRY_GiB, host / DRY_GiB);
        else
            printf("no optimizer ratio fits both: at %.2f, the largest whose host side fits, the device needs %.2f GiB\n",
                   c.optimizer_ratio, dev / DRY_GiB);
        free(p);
        return;
    }
    printf("no optimizer ratio fits both: the host side is over its budget at every ratio down to 0.05\n");
    free(p);
}

// The swap files of the ranks that share a machine (the plugin's and act_nvme bytes of the
// model's each) against the free space under the NVMe folder, where it exists here. Returns
// 1 when they do not fit, else 0.
static int print_disk(const ZeroPrediction *pred, int world, const ZeroConfig *cfg, size_t act_nvme) {
    uint64_t most = 0;
    for (int r = 0; r < world; r++) {
        uint64_t t = act_nvme;
        for (int u = 0; u < ZERO_USE_KINDS; u++) t += pred[r].nvme[u];
        if (t > most) most = t;
    }
    if (most == 0 || !cfg->nvme_path) return 0;
    int per_node = pred[0].local_size > 0 ? pred[0].local_size : world;
    char what[96];
    snprintf(what, sizeof what, "the swap files of %d rank(s) a machine", per_node);
    return zero_check_disk(what, most * (uint64_t)per_node, cfg->nvme_path);
}

int zero_check_disk(const char *what, uint64_t bytes, const char *dir) {
    struct statvfs st;
    if (statvfs(dir, &st) != 0) {
        printf("disk: %s, %.2f GiB under %s, which is not here (%s): not checked\n", what, bytes / DRY_GiB, dir,
               strerror(errno));
        return 0;
    }
    uint64_t free_bytes = (uint64_t)st.f_bavail * (uint64_t)st.f_frsize;
    int fits = bytes <= free_bytes;
    printf("disk: %s, %.2f GiB under %s, which has %.2f GiB free: %s\n", what, bytes / DRY_GiB, dir,
           free_bytes / DRY_GiB, fits ? "fits" : "does not fit");
    return !fits;
}

int zero_dry_run(const ZeroTensor *tensors, int n, int num_units, const ZeroConfig *cfg, int world,
                 int grad_accum, const ZeroDryRunModel *model, const char *path_json) {
    ZeroDryRunModel none = {0, 0, 0, 0, 0, 0, 0, 0};
    if (!model) model = &none;
    ZeroPrediction *pred = calloc((size_t)world, sizeof(ZeroPrediction));
    if (pred == NULL) {
        fprintf(stderr, "zero: out of host memory for a %d-rank prediction\n", world);
        return -1;
    }
    int steps = model->steps > 0 ? model->steps : 0;
    int rc = predict_run(tensors, n, num_units, cfg, world, grad_accum, steps, pred);
    for (int r = 0; rc == 0 && r < world; r++) {
        pred[r].act_device = model->act_device;
        pred[r].act_host = model->act_host;
    }
    if (rc == 0)
        rc = predict_write(path_json, tensors, n, num_units, cfg, world, grad_accum, steps, pred, NULL, model);
    if (rc == 0) {
        const double MiB = 1048576.0;
        const ZeroPrediction *p = &pred[0];
        printf("dry run: ZeRO stage %d, %d ranks, gradient accumulation %d\n", cfg->stage, world, grad_accum);
        printf("rank 0 device bytes: parameters %.2f MiB, gradients %.2f MiB, optimizer (master, m, v) %.2f MiB, "
               "buffers %.2f MiB, activations %.2f MiB: total %.2f MiB\n", p->device[ZERO_USE_PARAMS] / MiB,
               p->device[ZERO_USE_GRADS] / MiB, (p->device[ZERO_USE_MASTER] + p->device[ZERO_USE_OPTIM]) / MiB,
               p->device[ZERO_USE_BUFFERS] / MiB, p->act_device / MiB, zero_figures_device_total(p) / MiB);
        // offload's tiers, when anything lives there
        const size_t *tier[2] = {p->host, p->nvme};
        const char *tname[2] = {"host", "NVMe"};
        for (int k = 0; k < 2; k++) {
            size_t total = k == 0 ? p->act_host : 0;
            for (int u = 0; u < ZERO_USE_KINDS; u++) total += tier[k][u];
            if (total == 0) continue;
            printf("rank 0 %s bytes: parameters %.2f MiB, gradients %.2f MiB, optimizer (master, m, v) %.2f MiB, "
                   "buffers %.2f MiB, activations %.2f MiB: total %.2f MiB\n", tname[k], tier[k][ZERO_USE_PARAMS] / MiB,
                   tier[k][ZERO_USE_GRADS] / MiB, (tier[k][ZERO_USE_MASTER] + tier[k][ZERO_USE_OPTIM]) / MiB,
                   tier[k][ZERO_USE_BUFFERS] / MiB, (k == 0 ? p->act_host : 0) / MiB, total / MiB);
        }
        ZeroReportInfo in = {0};
        in.device_budget = model->device_budget;
        in.device_is_host = model->device_is_host;
        in.runtime_bytes = model->runtime_bytes;
        in.host_budget = model->host_budget;
        if (model->device_is_host)
            printf("rank 0 process peak (predicted): %.2f MiB = the device and host totals + %.2f MiB of runtime "
                   "(code, libraries, MPI, the data)\n", zero_budget_total(&in, p) / MiB, model->runtime_bytes / MiB);
        if (steps == 0)
            printf("rank 0 sends in a step after the first (the run's length is not known; with it, the average of its "
                   "steps, as the live report gives):\n");
        zero_figures_print_sent(p, "rank 0 ");
        zero_figures_print_nvme(p, "rank 0 ");
        printf("wrote %s\n", path_json);
        if (cfg->optimizer_tier == ZERO_TIER_HOST && cfg->optimizer_ratio > 0.0 && cfg->optimizer_ratio < 1.0 &&
            p->device[ZERO_USE_MASTER] == 0)
            printf("note: optimizer ratio %g keeps nothing on the device: the model's first tensor alone is more than "
                   "1 - %g of it (a smaller ratio keeps it there)\n", cfg->optimizer_ratio, cfg->optimizer_ratio);
        int over = 0;
        if (model->device_budget) over += print_budget(pred, world, &in, 0);
        if (model->host_budget) over += print_budget(pred, world, &in, 1);
        if (over > 0) rc = 1;
        if (over > 0 && model->device_budget && model->host_budget && cfg->optimizer_tier == ZERO_TIER_HOST &&
            !(cfg->stage == 3 && cfg->param_tier != ZERO_TIER_DEVICE))   // a partial offload keeps those on the device
            suggest_ratio(tensors, n, num_units, cfg, world, grad_accum, model, &in);
        if (print_disk(pred, world, cfg, model->act_nvme)) rc = 1;
    }
    free(pred);
    return rc;
}
