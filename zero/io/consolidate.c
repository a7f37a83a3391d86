// consolidate.c: a sharded checkpoint back into whole tensors, in one process, without MPI
// and without a running Zero (a model-file writer or an offline tool calls it).
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zckpt.h"
#include "../zero.h"

static long long resolve_step(const char *dir, int step) {
    if (step >= 0) return step;
    char why[4400];
    long long s = zck_latest(dir, why, sizeof why);
    if (s == -1) fprintf(stderr, "zero: no checkpoint in %s: %s/latest_zero is missing\n", dir, dir);
    if (s == -2) fprintf(stderr, "zero: no checkpoint in %s: %s\n", dir, why);
    if (s > INT_MAX) {   // the step travels as an int (zero_consolidate_state)
        fprintf(stderr, "zero: %s/latest_zero names step %lld, past the largest step a checkpoint may have (%d)\n", dir, s,
                INT_MAX);
        return -1;
    }
    return s;
}

int zero_consolidate_state(const char *ckpt_dir, int step, int which, float *out, size_t n) {
    if (!ckpt_dir || which < ZCK_MASTER || which > ZCK_V) {
        fprintf(stderr, "zero: zero_consolidate_state needs a folder and which = 0 (master), 1 (m) or 2 (v)\n");
        return -1;
    }
    long long s = resolve_step(ckpt_dir, step);
    if (s < 0) return -1;
    ZckManifest m;
    ZckReader r;
    char err[1400];
    if (zck_manifest_read(ckpt_dir, s, &m, err, sizeof err) != 0) {
        fprintf(stderr, "zero: %s\n", err);
        return -1;
    }
    if (m.numel_total != (uint64_t)n) {
        fprintf(stderr, "zero: checkpoint %s holds %llu parameters; the output has room for %zu\n", m.folder,
                (unsigned long long)m.numel_total, n);
        zck_manifest_free(&m);
        return -1;
    }
    if (zck_reader_init(&r, &m) != 0) {
        fprintf(stderr, "zero: out of host memory consolidating %s\n", m.folder);
        zck_manifest_free(&m);
        return -1;
    }
    int rc = 0;
    size_t off = 0;
    // every file is verified (size, CRC, header) before any of it is used
    for (int i = 0; i < m.num_tensors && rc == 0; i++) rc = zck_reader_need(&r, i, 0, m.t[i].numel, err, sizeof err);
    if (rc == 0) rc = zck_reader_need_empty(&r, 0, 1, err, sizeof err);
    for (int i = 0; i < m.num_tensors && rc == 0; i++) {
        rc = zck_reader_read(&r, i, which, 0, m.t[i].numel, out + off, err, sizeof err);
        off += (size_t)m.t[i].numel;
    }
    if (rc != 0) fprintf(stderr, "zero: %s\n", err);
    zck_reader_free(&r);
    zck_manifest_free(&m);
    return rc;
}

int zero_consolidate(const char *ckpt_dir, int step, float *out_full_params, size_t n) {
    return zero_consolidate_state(ckpt_dir, step, ZCK_MASTER, out_full_params, n);
}

void zero_checkpoint_info_free(ZeroCheckpointInfo *info) {
    if (info->names)
        for (int i = 0; i < info->num_tensors; i++) free(info->names[i]);
    free(info->names);
    free(info->numel);
    memset(info, 0, sizeof *info);
}

int zero_checkpoint_info(const char *ckpt_dir, int step, ZeroCheckpointInfo *out) {
    memset(out, 0, sizeof *out);
    if (!ckpt_dir) {
        fprintf(stderr, "zero: zero_checkpoint_info needs a checkpoint folder\n");
        return -1;
    }
    long long s = resolve_step(ckpt_dir, step);
    if (s < 0) return -1;
    ZckManifest m;
    char err[1400];
    if (zck_manifest_read(ckpt_dir, s, &m, err, sizeof err) != 0) {
        fprintf(stderr, "zero: %s\n", err);
        return -1;
    }
    out->world = m.world;
    out->stage = m.stage;
    out->last_t = m.last_t;
    out->step = m.step;
    out->param_dtype = m.param_dtype ? ZERO_BF16 : ZERO_F32;
    out->seed = m.seed;
    zck_run_id_hex(m.run_id, out->run_id);
    out->numel_total = (size_t)m.numel_total;
    out->extra_bytes = m.has_extra ? (size_t)m.extra_bytes : 0;
    out->names = calloc((size_t)m.num_tensors, sizeof(char *));
    out->numel = calloc((size_t)m.num_tensors, sizeof(size_t));
    int rc = out->names && out->numel ? 0 : -1;
    out->num_tensors = out->names ? m.num_tensors : 0;
    for (int i = 0; i < m.num_tensors && rc == 0; i++) {
        out->names[i] = strdup(m.t[i].name);
        out->numel[i] = (size_t)m.t[i].numel;
        if (!out->names[i]) rc = -1;
    }
    zck_manifest_free(&m);
    if (rc != 0) {
        fprintf(stderr, "zero: out of host memory reading the checkpoint table\n");
        zero_checkpoint_info_free(out);
    }
    return rc;
}

int zero_checkpoint_extra(const char *ckpt_dir, int step, void *extra, size_t extra_bytes) {
    long long s = resolve_step(ckpt_dir, step);
    if (s < 0) return -1;
    ZckManifest m;
    char err[512];
    if (zck_manifest_read(ckpt_dir, s, &m, err, sizeof err) != 0) {
        fprintf(stderr, "zero: %s\n", err);
        return -1;
    }
    int rc = zck_read_extra(&m, extra, extra_bytes, err, sizeof err);
    if (rc != 0) fprintf(stderr, "zero: %s\n", err);
    zck_manifest_free(&m);
    return rc;
}
