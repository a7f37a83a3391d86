// zckpt.c: the sharded checkpoint format: file names, rank-file headers, the manifest,
// and reading element ranges back from whichever saved rank files hold them (zckpt.h).
#include "zckpt.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../partition.h"
#include "zfile.h"

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

void zck_folder(char *out, size_t cap, const char *dir, long long step) {
    snprintf(out, cap, "%s/zero_%lld", dir, step);
}

void zck_rank_file(char *out, size_t cap, int rank) { snprintf(out, cap, "rank_%05d.bin", rank); }

// The number after prefix, when name is prefix + that number printed with fmt + suffix
// exactly (no sign, no spaces, no other zero padding); -1 otherwise.
static long long canonical_number(const char *name, const char *prefix, const char *fmt, const char *suffix) {
    size_t lp = strlen(prefix), ls = strlen(suffix), ln = strlen(name);
    if (ln <= lp + ls || strncmp(name, prefix, lp) != 0 || strcmp(name + ln - ls, suffix) != 0 || ln - lp - ls > 18) return -1;
    long long v = 0;
    for (size_t i = lp; i < ln - ls; i++) {
        if (name[i] < '0' || name[i] > '9') return -1;
        v = v * 10 + (name[i] - '0');
    }
    char back[64];
    snprintf(back, sizeof back, fmt, v);
    return strlen(back) == ln - lp - ls && strncmp(back, name + lp, ln - lp - ls) == 0 ? v : -1;
}

long long zck_folder_step(const char *name) { return canonical_number(name, "zero_", "%lld", ""); }

int zck_is_format_file(const char *name) {
    char base[256];
    snprintf(base, sizeof base, "%s", name);
    char *tmp = strstr(base, ".tmp.");   // zfile's temp file of NAME: NAME.tmp.PID
    if (tmp) {
        if (!tmp[5]) return 0;
        for (const char *c = tmp + 5; *c; c++)
            if (*c < '0' || *c > '9') return 0;
        *tmp = 0;
    }
    if (strcmp(base, ZCK_MANIFEST_FILE) == 0 || strcmp(base, ZCK_EXTRA_FILE) == 0) return 1;
    long long r = canonical_number(base, "rank_", "%05lld", ".bin");
    return r >= 0 && r <= 0x7fffffff;
}

long long zck_latest(const char *dir, char *why, size_t cap) {
    char path[4200], err[4400], *text = NULL;
    snprintf(path, sizeof path, "%s/latest_zero", dir);
    struct stat st;
    if (lstat(path, &st) != 0 && errno == ENOENT) return -1;
    if (zfile_read_all(path, ZCK_LATEST_MAX_BYTES, &text, NULL, err, sizeof err) != 0) {
        if (why) snprintf(why, cap, "%s", err);
        return -2;
    }
    char *end;
    errno = 0;
    long long s = strtoll(text, &end, 10);
    while (*end == '\n' || *end == ' ' || *end == '\r') end++;
    int ok = errno == 0 && end != text && *end == 0 && s >= 0;
    if (!ok && why) snprintf(why, cap, "%s is malformed: it does not hold a step number", path);
    free(text);
    return ok ? s : -2;
}

void zck_run_id_hex(const uint8_t id[ZCK_RUN_ID_BYTES], char *out) {
    for (int i = 0; i < ZCK_RUN_ID_BYTES; i++) snprintf(out + 2 * i, 3, "%02x", id[i]);
}

int zck_run_id_parse(const char *hex, uint8_t id[ZCK_RUN_ID_BYTES]) {
    if (strlen(hex) != 2 * ZCK_RUN_ID_BYTES) return -1;
    for (int i = 0; i < ZCK_RUN_ID_BYTES; i++) {
        unsigned v = 0;
        for (int k = 0; k < 2; k++) {
            char c = hex[2 * i + k];
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0) return -1;
            v = v * 16 + (unsigned)d;
        }
        id[i] = (uint8_t)v;
    }
    return 0;
}

size_t zck_header_size(int num_tensors) { return ZCK_HEADER_FIXED + (size_t)num_tensors * ZCK_TENSOR_ENTRY; }

void zck_header_encode(unsigned char *out, const ZckHeader *h, const uint64_t *numel, const uint64_t *begin,
                       const uint64_t *count) {
    memcpy(out, ZCK_MAGIC, 8);
    zle_put32(out + 8, ZCK_VERSION);
    zle_put32(out + 12, (uint32_t)zck_header_size(h->num_tensors));
    zle_put32(out + 16, (uint32_t)h->rank);
    zle_put32(out + 20, (uint32_t)h->world);
    zle_put32(out + 24, (uint32_t)h->stage);
    zle_put32(out + 28, (uint32_t)h->last_t);
    zle_put64(out + 32, (uint64_t)h->step);
    zle_put64(out + 40, h->seed);
    zle_put32(out + 48, (uint32_t)h->num_tensors);
    zle_put32(out + 52, (uint32_t)h->param_dtype);
    memcpy(out + 56, h->run_id, ZCK_RUN_ID_BYTES);
    for (int i = 0; i < h->num_tensors; i++) {
        unsigned char *e = out + ZCK_HEADER_FIXED + (size_t)i * ZCK_TENSOR_ENTRY;
        zle_put64(e, numel[i]);
        zle_put64(e + 8, begin[i]);
        zle_put64(e + 16, count[i]);
    }
}

// The fixed fields of a version-2 header (the caller checked magic and version).
static void header_decode(const unsigned char *in, ZckHeader *h) {
    h->rank = (int)zle_get32(in + 16);
    h->world = (int)zle_get32(in + 20);
    h->stage = (int)zle_get32(in + 24);
    h->last_t = (int)zle_get32(in + 28);
    h->step = (long long)zle_get64(in + 32);
    h->seed = zle_get64(in + 40);
    h->num_tensors = (int)zle_get32(in + 48);
    h->param_dtype = (int)zle_get32(in + 52);
    memcpy(h->run_id, in + 56, ZCK_RUN_ID_BYTES);
}

// ---------------------------------------------------------------- manifest

static int json_u64(const cJSON *o, const char *key, uint64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9007199254740992.0) return -1;
    *out = (uint64_t)v->valuedouble;
    return (double)*out == v->valuedouble ? 0 : -1;   // integers only
}

// A decimal u64 written as a string (digits only, no sign, no overflow): 0, or -1.
static int parse_u64(const char *text, uint64_t *out) {
    uint64_t v = 0;
    if (!*text) return -1;
    for (const char *c = text; *c; c++)
        if (*c < '0' || *c > '9' || __builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(*c - '0'), &v))
            return -1;
    *out = v;
    return 0;
}

static int json_int(const cJSON *o, const char *key, int *out) {
    uint64_t v;
    if (json_u64(o, key, &v) != 0 || v > 0x7fffffff) return -1;
    *out = (int)v;
    return 0;
}

void zck_manifest_free(ZckManifest *m) {
    if (m->t)
        for (int i = 0; i < m->num_tensors; i++) free(m->t[i].name);
    free(m->t);
    free(m->ranks);
    m->t = NULL;
    m->ranks = NULL;
}

int zck_manifest_read(const char *dir, long long step, ZckManifest *m, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    zck_folder(m->folder, sizeof m->folder, dir, step);
    char path[4200], why[512], *text = NULL;
    snprintf(path, sizeof path, "%s/" ZCK_MANIFEST_FILE, m->folder);
    if (zfile_read_all(path, ZCK_MANIFEST_MAX_BYTES, &text, NULL, why, sizeof why) != 0)
        return fail(err, errlen, "checkpoint %s has no readable manifest: %s", m->folder, why);
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root) return fail(err, errlen, "checkpoint manifest %s is not valid JSON", path);
    int rc = -1;
    const char *what = "";
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    uint64_t st = 0;
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "zero-sharded-checkpoint") != 0) { what = "format"; goto bad; }
    if (json_int(root, "version", &m->version) != 0) { what = "version"; goto bad; }
    if (m->version != ZCK_MANIFEST_VERSION) {
        fail(err, errlen, "checkpoint manifest %s has format version %d; this build reads version %d%s", path, m->version,
             ZCK_MANIFEST_VERSION, m->version < ZCK_MANIFEST_VERSION ? " (saved by an older build, before checkpoints "
             "carried a run id: resume it with that build, or start afresh)" : " (saved by a newer build)");
        goto out;
    }
    if (json_u64(root, "step", &st) != 0 || (long long)st != step) { what = "step"; goto bad; }
    m->step = (long long)st;
    if (json_int(root, "world_size", &m->world) != 0 || m->world < 1) { what = "world_size"; goto bad; }
    if (json_int(root, "stage", &m->stage) != 0 || m->stage > 3) { what = "stage"; goto bad; }
    if (json_int(root, "last_t", &m->last_t) != 0) { what = "last_t"; goto bad; }
    const cJSON *pd = cJSON_GetObjectItemCaseSensitive(root, "param_dtype");
    if (!cJSON_IsString(pd) || (strcmp(pd->valuestring, "fp32") && strcmp(pd->valuestring, "bf16"))) { what = "param_dtype"; goto bad; }
    m->param_dtype = strcmp(pd->valuestring, "bf16") == 0;
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(root, "seed");
    if (!cJSON_IsString(seed) || parse_u64(seed->valuestring, &m->seed) != 0) { what = "seed"; goto bad; }
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(root, "run_id");
    if (!cJSON_IsString(run) || zck_run_id_parse(run->valuestring, m->run_id) != 0) { what = "run_id"; goto bad; }
    const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(root, "tensors");
    if (!cJSON_IsArray(tensors) || cJSON_GetArraySize(tensors) < 1) { what = "tensors"; goto bad; }
    m->num_tensors = cJSON_GetArraySize(tensors);
    if (m->num_tensors > ZCK_MAX_TENSORS) {
        fail(err, errlen, "checkpoint manifest %s lists %d tensors, more than a rank file's header can hold (%d)", path,
             m->num_tensors, ZCK_MAX_TENSORS);
        goto out;
    }
    m->t = calloc((size_t)m->num_tensors, sizeof(ZckTensor));
    if (!m->t) { fail(err, errlen, "out of host memory reading %s", path); goto out; }
    int i = 0, wrapped = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, tensors) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (!cJSON_IsString(nm) || json_u64(e, "numel", &m->t[i].numel) != 0) { what = "tensors"; goto bad; }
        m->t[i].name = strdup(nm->valuestring);
        if (!m->t[i].name) { fail(err, errlen, "out of host memory reading %s", path); goto out; }
        // each numel is at most 2^53, but enough of them wrap a 64-bit sum (and a product
        // of the sum): the total is bounded below, before anyone allocates or seeks by it
        wrapped |= __builtin_add_overflow(m->numel_total, m->t[i].numel, &m->numel_total);
        i++;
    }
    if (wrapped || m->numel_total > ZCK_MAX_ELEMS) {
        char total[32];
        snprintf(total, sizeof total, "%" PRIu64, m->numel_total);
        fail(err, errlen, "checkpoint manifest %s lists %d tensors of %s elements in all, more than a checkpoint can hold "
             "(%" PRIu64 ")", path, m->num_tensors, wrapped ? "more than 2^64" : total, ZCK_MAX_ELEMS);
        goto out;
    }
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(root, "ranks");
    if (!cJSON_IsArray(ranks) || cJSON_GetArraySize(ranks) != m->world) { what = "ranks"; goto bad; }
    m->ranks = calloc((size_t)m->world, sizeof(ZckRankFile));
    if (!m->ranks) { fail(err, errlen, "out of host memory reading %s", path); goto out; }
    i = 0;
    cJSON_ArrayForEach(e, ranks) {
        const cJSON *file = cJSON_GetObjectItemCaseSensitive(e, "file");
        int r;
        uint64_t crc;
        if (json_int(e, "rank", &r) != 0 || r != i || !cJSON_IsString(file) || strchr(file->valuestring, '/') ||
            strlen(file->valuestring) >= sizeof m->ranks[i].file || json_u64(e, "bytes", &m->ranks[i].bytes) != 0 ||
            json_u64(e, "crc32", &crc) != 0 || crc > 0xffffffffu) { what = "ranks"; goto bad; }
        snprintf(m->ranks[i].file, sizeof m->ranks[i].file, "%s", file->valuestring);
        m->ranks[i].crc = (uint32_t)crc;
        i++;
    }
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(root, "extra");
    if (cJSON_IsObject(extra)) {
        const cJSON *file = cJSON_GetObjectItemCaseSensitive(extra, "file");
        uint64_t crc;
        if (!cJSON_IsString(file) || strchr(file->valuestring, '/') || strlen(file->valuestring) >= sizeof m->extra_file ||
            json_u64(extra, "bytes", &m->extra_bytes) != 0 || json_u64(extra, "crc32", &crc) != 0 || crc > 0xffffffffu) {
            what = "extra";
            goto bad;
        }
        m->has_extra = 1;
        m->extra_crc = (uint32_t)crc;
        snprintf(m->extra_file, sizeof m->extra_file, "%s", file->valuestring);
    } else if (extra && !cJSON_IsNull(extra)) {
        what = "extra";
        goto bad;
    }
    rc = 0;
    goto out;
bad:
    fail(err, errlen, "checkpoint manifest %s is malformed (field \"%s\")", path, what);
out:
    cJSON_Delete(root);
    if (rc != 0) zck_manifest_free(m);
    return rc;
}

int zck_manifest_write(const ZckManifest *m, char *err, size_t errlen) {
    cJSON *root = cJSON_CreateObject(), *tensors = NULL, *ranks = NULL;
    char seed[32], path[4200], run[2 * ZCK_RUN_ID_BYTES + 1];
    snprintf(seed, sizeof seed, "%" PRIu64, m->seed);   // a string: JSON numbers are doubles
    zck_run_id_hex(m->run_id, run);
    int ok = root != NULL;
    ok = ok && cJSON_AddStringToObject(root, "format", "zero-sharded-checkpoint");
    ok = ok && cJSON_AddNumberToObject(root, "version", ZCK_MANIFEST_VERSION);
    ok = ok && cJSON_AddStringToObject(root, "run_id", run);
    ok = ok && cJSON_AddNumberToObject(root, "step", (double)m->step);
    ok = ok && cJSON_AddNumberToObject(root, "last_t", m->last_t);
    ok = ok && cJSON_AddNumberToObject(root, "world_size", m->world);
    ok = ok && cJSON_AddNumberToObject(root, "stage", m->stage);
    ok = ok && cJSON_AddStringToObject(root, "param_dtype", m->param_dtype ? "bf16" : "fp32");
    ok = ok && cJSON_AddStringToObject(root, "seed", seed);
    ok = ok && cJSON_AddNumberToObject(root, "numel_total", (double)m->numel_total);
    ok = ok && (tensors = cJSON_AddArrayToObject(root, "tensors"));
    for (int i = 0; ok && i < m->num_tensors; i++) {
        cJSON *e = cJSON_CreateObject();
        ok = e && cJSON_AddItemToArray(tensors, e);
        ok = ok && cJSON_AddStringToObject(e, "name", m->t[i].name);
        ok = ok && cJSON_AddNumberToObject(e, "numel", (double)m->t[i].numel);
    }
    ok = ok && (ranks = cJSON_AddArrayToObject(root, "ranks"));
    for (int q = 0; ok && q < m->world; q++) {
        cJSON *e = cJSON_CreateObject();
        ok = e && cJSON_AddItemToArray(ranks, e);
        ok = ok && cJSON_AddNumberToObject(e, "rank", q);
        ok = ok && cJSON_AddStringToObject(e, "file", m->ranks[q].file);
        ok = ok && cJSON_AddNumberToObject(e, "bytes", (double)m->ranks[q].bytes);
        ok = ok && cJSON_AddNumberToObject(e, "crc32", m->ranks[q].crc);
    }
    if (ok && m->has_extra) {
        cJSON *e = cJSON_AddObjectToObject(root, "extra");
        ok = e && cJSON_AddStringToObject(e, "file", m->extra_file);
        ok = ok && cJSON_AddNumberToObject(e, "bytes", (double)m->extra_bytes);
        ok = ok && cJSON_AddNumberToObject(e, "crc32", m->extra_crc);
    } else if (ok) {
        ok = cJSON_AddNullToObject(root, "extra") != NULL;
    }
    char *text = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) return fail(err, errlen, "out of host memory building the checkpoint manifest");
    snprintf(path, sizeof path, "%s/" ZCK_MANIFEST_FILE, m->folder);
    size_t len = strlen(text);
    if (len + 1 > ZCK_MANIFEST_MAX_BYTES) {
        free(text);
        return fail(err, errlen, "checkpoint manifest %s would be %zu bytes, more than a reader takes (%zu): not written",
                    path, len + 1, ZCK_MANIFEST_MAX_BYTES);
    }
    text[len] = '\n';   // cJSON leaves room for the NUL: replace it, write len + 1 bytes
    int rc = zfile_write_all(path, text, len + 1, NULL, err, errlen);
    free(text);
    return rc;
}

// ---------------------------------------------------------------- rank files

static int host_little_endian(void) {
    const uint32_t one = 1;
    return *(const unsigned char *)&one == 1;
}

static void shard_close(ZckShard *s) {
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
    s->verified = 0;
    free(s->data_off);
    free(s->begin);
    free(s->count);
    s->data_off = s->begin = s->count = NULL;
}

// Opens saved rank q's file and checks it against the manifest and the partition, in an
// order that names the real fault: a damaged file, a foreign file, then a stale one.
static int shard_open(const ZckManifest *m, int q, ZckShard *s, char *err, size_t errlen) {
    const ZckRankFile *rf = &m->ranks[q];
    snprintf(s->path, sizeof s->path, "%s/%s", m->folder, rf->file);
    const char *p = s->path;
    if (!host_little_endian()) return fail(err, errlen, "checkpoint files are little-endian; this host is not");
    struct stat st;
    if (stat(p, &st) != 0)
        return fail(err, errlen, "checkpoint file %s (rank %d of %d) is missing: %s", p, q, m->world, strerror(errno));
    uint64_t size = (uint64_t)st.st_size;
    if (size != rf->bytes)
        return fail(err, errlen, "checkpoint file %s (rank %d of %d) is %s: %" PRIu64 " bytes, the manifest says %" PRIu64,
                    p, q, m->world, size < rf->bytes ? "truncated" : "the wrong size", size, rf->bytes);
    size_t hs = zck_header_size(m->num_tensors);
    if (size < hs + 4)
        return fail(err, errlen, "checkpoint file %s (rank %d of %d) is truncated: %" PRIu64 " bytes, shorter than its header",
                    p, q, m->world, size);
    uint32_t body_crc;
    char why[256];
    if (zfile_crc_of(p, size - 4, &body_crc, NULL, why, sizeof why) != 0)
        return fail(err, errlen, "checkpoint file %s (rank %d of %d) cannot be read: %s", p, q, m->world, why);
    s->fd = open(p, O_RDONLY);
    if (s->fd < 0) return fail(err, errlen, "checkpoint file %s (rank %d of %d) cannot be opened: %s", p, q, m->world, strerror(errno));
    unsigned char trailer[4];
    unsigned char *h = malloc(hs);
    s->data_off = calloc((size_t)m->num_tensors, sizeof(uint64_t));
    s->begin = calloc((size_t)m->num_tensors, sizeof(uint64_t));
    s->count = calloc((size_t)m->num_tensors, sizeof(uint64_t));
    int rc = -1;
    if (!h || !s->data_off || !s->begin || !s->count) { fail(err, errlen, "out of host memory"); goto out; }
    if (zfile_pread(s->fd, trailer, 4, size - 4) != 0) {
        fail(err, errlen, "checkpoint file %s (rank %d of %d): its 4-byte trailer at byte %lld cannot be read: %s", p, q,
             m->world, (long long)(size - 4), zfile_pread_why());
        goto out;
    }
    if (zfile_pread(s->fd, h, hs, 0) != 0) {
        fail(err, errlen, "checkpoint file %s (rank %d of %d): its %zu-byte header cannot be read: %s", p, q, m->world,
             (size_t)hs, zfile_pread_why());
        goto out;
    }
    if (zle_get32(trailer) != body_crc) {
        fail(err, errlen, "checkpoint file %s (rank %d of %d) is corrupt: the CRC-32 of its body is 0x%08x, its trailer "
             "says 0x%08x", p, q, m->world, body_crc, zle_get32(trailer));
        goto out;
    }
    if (memcmp(h, ZCK_MAGIC, 8) != 0) {
        fail(err, errlen, "checkpoint file %s (rank %d of %d) is not a zero/ rank file (bad magic)", p, q, m->world);
        goto out;
    }
    if (zle_get32(h + 8) != ZCK_VERSION) {
        fail(err, errlen, "checkpoint file %s (rank %d of %d) has format version %u; this build reads version %d", p, q,
             m->world, zle_get32(h + 8), ZCK_VERSION);
        goto out;
    }
    ZckHeader fh;
    header_decode(h, &fh);
    // intact, but is it this checkpoint's? (a file copied from another run or step)
    if (memcmp(fh.run_id, m->run_id, ZCK_RUN_ID_BYTES) != 0 || fh.step != m->step) {
        char mine[2 * ZCK_RUN_ID_BYTES + 1], theirs[2 * ZCK_RUN_ID_BYTES + 1];
        zck_run_id_hex(fh.run_id, theirs);
        zck_run_id_hex(m->run_id, mine);
        fail(err, errlen, "checkpoint file %s (rank %d of %d) was saved by run %s at step %lld, but its manifest is "
             "for run %s at step %lld: a rank file of another %s was copied in", p, q, m->world, theirs, fh.step, mine,
             m->step, memcmp(fh.run_id, m->run_id, ZCK_RUN_ID_BYTES) != 0 ? "run" : "step of this run");
        goto out;
    }
    if (body_crc != rf->crc) {
        fail(err, errlen, "checkpoint file %s (rank %d of %d) has CRC-32 0x%08x, the manifest says 0x%08x (was it "
             "replaced after the save?)", p, q, m->world, body_crc, rf->crc);
        goto out;
    }
    if (zle_get32(h + 12) != hs || fh.rank != q || fh.world != m->world || fh.num_tensors != m->num_tensors) {
        fail(err, errlen, "checkpoint file %s (rank %d of %d) has a header that does not match the manifest: rank %d of "
             "%d, %d tensors, %u header bytes (the manifest implies %d tensors, %zu bytes)", p, q, m->world, fh.rank,
             fh.world, fh.num_tensors, zle_get32(h + 12), m->num_tensors, hs);
        goto out;
    }
    // the header's settings, which the manifest repeats: a load takes them from the manifest
    // (last_t keys the bf16 rounding of the refreshed weights), so they must agree
    static const char *names[] = {"stage", "last_t", "seed", "param dtype (0 fp32, 1 bf16)"};
    const uint64_t in_file[] = {(uint64_t)fh.stage, (uint64_t)(uint32_t)fh.last_t, fh.seed, (uint64_t)fh.param_dtype};
    const uint64_t in_manifest[] = {(uint64_t)m->stage, (uint64_t)(uint32_t)m->last_t, m->seed, (uint64_t)m->param_dtype};
    for (int k = 0; k < 4; k++)
        if (in_file[k] != in_manifest[k]) {
            fail(err, errlen, "checkpoint file %s (rank %d of %d) was saved with %s %" PRIu64 ", but %s/manifest.json says %"
                 PRIu64 " (the manifest was edited or is another save's)", p, q, m->world, names[k], in_file[k], m->folder,
                 in_manifest[k]);
            goto out;
        }
    uint64_t off = hs;
    for (int i = 0; i < m->num_tensors; i++) {
        const unsigned char *e = h + ZCK_HEADER_FIXED + (size_t)i * ZCK_TENSOR_ENTRY;
        ZeroSplit sp;
        if (zero_split((size_t)m->t[i].numel, m->world, &sp) != 0) { fail(err, errlen, "tensor %s cannot be split", m->t[i].name); goto out; }
        s->begin[i] = zle_get64(e + 8);
        s->count[i] = zle_get64(e + 16);
        if (zle_get64(e) != m->t[i].numel || s->begin[i] != zero_owned_begin(&sp, q) || s->count[i] != zero_owned_count(&sp, q)) {
            fail(err, errlen, "checkpoint file %s (rank %d of %d): tensor %s holds [%" PRIu64 ", +%" PRIu64 ") of %" PRIu64
                 " elements, not this rank's part of the manifest's %" PRIu64, p, q, m->world, m->t[i].name, s->begin[i],
                 s->count[i], zle_get64(e), m->t[i].numel);
            goto out;
        }
        s->data_off[i] = off;
        uint64_t bytes;
        if (__builtin_mul_overflow(s->count[i], (uint64_t)ZCK_KINDS * 4, &bytes) || __builtin_add_overflow(off, bytes, &off) ||
            off > (uint64_t)INT64_MAX - 4) {
            fail(err, errlen, "checkpoint file %s (rank %d of %d): its header's element counts take the file past 2^63 bytes "
                 "(at tensor %s, %" PRIu64 " elements)", p, q, m->world, m->t[i].name, s->count[i]);
            goto out;
        }
    }
    if (off + 4 != size) {
        fail(err, errlen, "checkpoint file %s (rank %d of %d) is %" PRIu64 " bytes, its header implies %" PRIu64, p, q,
             m->world, size, off + 4);
        goto out;
    }
    s->verified = 1;
    rc = 0;
out:
    free(h);
    if (rc != 0) shard_close(s);
    return rc;
}

// Keeps at most ZCK_MAX_OPEN descriptors: a verified file can be reopened by path.
static void spare_fds(ZckReader *r) {
    if (r->nopen < ZCK_MAX_OPEN) return;
    for (int q = 0; q < r->m->world; q++)
        if (r->sh[q].fd >= 0) {
            close(r->sh[q].fd);
            r->sh[q].fd = -1;
        }
    r->nopen = 0;
}

// A verified, open shard q (verifying it on first use).
static int shard_ready(ZckReader *r, int q, char *err, size_t errlen) {
    ZckShard *s = &r->sh[q];
    if (s->verified && s->fd >= 0) return 0;
    spare_fds(r);
    if (!s->verified) {
        if (shard_open(r->m, q, s, err, errlen) != 0) return -1;
    } else {
        s->fd = open(s->path, O_RDONLY);
        if (s->fd < 0)
            return fail(err, errlen, "checkpoint file %s (rank %d of %d) cannot be reopened: %s", s->path, q, r->m->world,
                        strerror(errno));
    }
    r->nopen++;
    return 0;
}

int zck_reader_init(ZckReader *r, const ZckManifest *m) {
    r->m = m;
    r->sh = calloc((size_t)m->world, sizeof(ZckShard));
    r->nopen = 0;
    if (!r->sh) return -1;
    for (int q = 0; q < m->world; q++) r->sh[q].fd = -1;
    return 0;
}

void zck_reader_free(ZckReader *r) {
    if (r->sh)
        for (int q = 0; q < r->m->world; q++) shard_close(&r->sh[q]);
    free(r->sh);
    r->sh = NULL;
}

// Calls fn for each saved rank holding part of [begin, begin + n) of tensor t.
typedef int (*piece_fn)(ZckReader *r, int q, int t, uint64_t a, uint64_t b, void *arg, char *err, size_t errlen);

static int for_pieces(ZckReader *r, int t, uint64_t begin, uint64_t n, piece_fn fn, void *arg, char *err, size_t errlen) {
    const ZckManifest *m = r->m;
    if (t < 0 || t >= m->num_tensors || begin > m->t[t].numel || n > m->t[t].numel - begin)
        return fail(err, errlen, "internal: read of [%" PRIu64 ", +%" PRIu64 ") of tensor %d is out of range", begin, n, t);
    if (n == 0) return 0;
    ZeroSplit sp;
    zero_split((size_t)m->t[t].numel, m->world, &sp);
    uint64_t end = begin + n;
    for (int q = (int)(begin / sp.shard); q < m->world; q++) {
        uint64_t qb = zero_owned_begin(&sp, q), qe = qb + zero_owned_count(&sp, q);
        if (qb >= end) break;
        uint64_t a = begin > qb ? begin : qb, b = end < qe ? end : qe;
        if (a < b && fn(r, q, t, a, b, arg, err, errlen) != 0) return -1;
    }
    return 0;
}

static int need_piece(ZckReader *r, int q, int t, uint64_t a, uint64_t b, void *arg, char *err, size_t errlen) {
    (void)t; (void)a; (void)b; (void)arg;
    return r->sh[q].verified ? 0 : shard_ready(r, q, err, errlen);
}

int zck_reader_need(ZckReader *r, int t, uint64_t begin, uint64_t n, char *err, size_t errlen) {
    return for_pieces(r, t, begin, n, need_piece, NULL, err, errlen);
}

int zck_reader_need_empty(ZckReader *r, int first, int stride, char *err, size_t errlen) {
    const ZckManifest *m = r->m;
    for (int q = first; q < m->world; q += stride) {
        int owns = 0;
        for (int t = 0; t < m->num_tensors && !owns; t++) {
            ZeroSplit sp;
            zero_split((size_t)m->t[t].numel, m->world, &sp);
            owns = zero_owned_count(&sp, q) > 0;
        }
        if (!owns && !r->sh[q].verified && shard_ready(r, q, err, errlen) != 0) return -1;
    }
    return 0;
}

typedef struct {
    int kind;
    uint64_t begin;
    float *out;
} ReadArg;

static int read_piece(ZckReader *r, int q, int t, uint64_t a, uint64_t b, void *arg, char *err, size_t errlen) {
    ReadArg *ra = arg;
    ZckShard *s = &r->sh[q];
    if (shard_ready(r, q, err, errlen) != 0) return -1;
    uint64_t off = s->data_off[t] + ((uint64_t)ra->kind * s->count[t] + (a - s->begin[t])) * 4;
    if (zfile_pread(s->fd, ra->out + (a - ra->begin), (size_t)(b - a) * 4, off) != 0)
        return fail(err, errlen, "checkpoint file %s (rank %d of %d): %" PRIu64 " bytes at byte %" PRIu64 " could not be "
                    "read (changed since it was verified?): %s", s->path, q, r->m->world, (b - a) * 4, off, zfile_pread_why());
    return 0;
}

int zck_reader_read(ZckReader *r, int t, int kind, uint64_t begin, uint64_t n, float *out, char *err, size_t errlen) {
    ReadArg ra = {kind, begin, out};
    return for_pieces(r, t, begin, n, read_piece, &ra, err, errlen);
}

int zck_read_extra(const ZckManifest *m, void *buf, size_t bytes, char *err, size_t errlen) {
    if (!m->has_extra || m->extra_bytes != bytes)
        return fail(err, errlen, "checkpoint %s holds %" PRIu64 " bytes of trainer data, the trainer expects %zu", m->folder,
                    m->has_extra ? m->extra_bytes : 0, bytes);
    if (bytes == 0) return 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", m->folder, m->extra_file);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return fail(err, errlen, "checkpoint file %s (trainer data) is missing: %s", path, strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = fail(err, errlen, "checkpoint file %s (trainer data) cannot be examined: %s", path, strerror(errno));
    else if ((uint64_t)st.st_size != bytes)
        rc = fail(err, errlen, "checkpoint file %s (trainer data) is %s: %lld bytes, the manifest says %zu", path,
                  (uint64_t)st.st_size < bytes ? "truncated" : "the wrong size", (long long)st.st_size, bytes);
    else if (zfile_pread(fd, buf, bytes, 0) != 0)
        rc = fail(err, errlen, "checkpoint file %s (trainer data) cannot be read: %s", path, zfile_pread_why());
    else if (zfile_crc32(0, buf, bytes) != m->extra_crc)
        rc = fail(err, errlen, "checkpoint file %s (trainer data) is corrupt: CRC-32 0x%08x, the manifest says 0x%08x", path,
                  zfile_crc32(0, buf, bytes), m->extra_crc);
    close(fd);
    return rc;
}
