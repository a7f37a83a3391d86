// checkpoint.c: sharded save and load of the optimizer state (fp32 master, AdamW m, v).
// The format and the range reader are in zckpt.[ch]; this file moves the bytes between a
// running Zero and the files, and keeps the ranks in agreement (a checkpoint is published
// only when every rank's file is on disk and verified; a load changes nothing unless every
// rank verified everything it needs).
#include "state.h"

#include "offload.h"   // zero_state_read/write: the optimizer state wherever it lives

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io/zckpt.h"
#include "io/zfile.h"

#define CKPT_CHUNK ((size_t)1 << 20)   // floats per device <-> host copy

// Every rank learns whether any rank failed (a rank-order sum: same answer everywhere).
static int any_failed(Zero *z, int failed) {
    double f = failed ? 1.0 : 0.0;
    zero_allreduce_sum_f64(z, &f, 1);
    return f != 0.0;
}

int zero_latest(const char *dir) {
    long long s = dir ? zck_latest(dir, NULL, 0) : -1;
    return s > 0x7fffffff ? -2 : (int)s;
}

// Writes this rank's file; fills the CRC of its body and the size of the whole file.
// Returns 0 or -1 (printed).
static int write_rank_file(Zero *z, const char *path, long long step, uint32_t *crc, uint64_t *bytes) {
    const ZeroBackend *b = z->b;
    int nt = z->num_tensors, rc = -1;
    size_t hs = zck_header_size(nt);
    unsigned char *h = malloc(hs);
    uint64_t *numel = malloc((size_t)nt * sizeof(uint64_t)), *begin = malloc((size_t)nt * sizeof(uint64_t)),
             *count = malloc((size_t)nt * sizeof(uint64_t));
    float *chunk = b->alloc(b, ZERO_MEM_HOST, CKPT_CHUNK * sizeof(float));
    ZFile zf;
    memset(&zf, 0, sizeof zf);
    if (!h || !numel || !begin || !count || !chunk) {
        zero_say(z, "out of host memory saving checkpoint file %s", path);
        goto out;
    }
    for (int i = 0; i < nt; i++) {
        numel[i] = z->t[i].lay->split.numel;
        begin[i] = z->t[i].lay->own_begin;
        count[i] = z->t[i].lay->own_count;
    }
    ZckHeader fh = {z->rank, z->world, z->stage, z->step.last_t, (int)z->cfg.param_dtype, nt, step, z->cfg.seed, {0}};
    memcpy(fh.run_id, z->acct.run_id, ZCK_RUN_ID_BYTES);
    zck_header_encode(h, &fh, numel, begin, count);
    if (zfile_open(&zf, path) != 0 || zfile_write(&zf, h, hs) != 0) goto io;
    // the owned elements, wherever they live (device, host or NVMe: offload.c)
    static const int kinds[ZCK_KINDS] = {ZK_MASTER, ZK_M, ZK_V};
    for (int i = 0; i < nt; i++)
        for (int k = 0; k < ZCK_KINDS; k++)
            for (size_t done = 0; done < count[i]; done += CKPT_CHUNK) {
                size_t n = count[i] - done < CKPT_CHUNK ? (size_t)(count[i] - done) : CKPT_CHUNK;
                zero_state_read(z, kinds[k], i, done, n, chunk);
                if (zfile_write(&zf, chunk, n * sizeof(float)) != 0) goto io;
            }
    unsigned char trailer[4];
    const uint32_t body_crc = zf.crc;   // CRC of everything before the trailer
    zle_put32(trailer, body_crc);
    // committed once read back from the file system: what the manifest vouches for is on disk
    if (zfile_write(&zf, trailer, 4) != 0 || zfile_commit(&zf) != 0) goto io;
    *crc = body_crc;   // not zf.crc: a CRC over data ending in its own CRC is the same for every file
    *bytes = zf.bytes;
    rc = 0;
    goto out;
io:
    zero_say(z, "saving checkpoint: %s", zf.err);
    zfile_abort(&zf);
out:
    if (chunk) b->free(b, ZERO_MEM_HOST, chunk);
    free(h);
    free(numel);
    free(begin);
    free(count);
    return rc;
}

// The last 4 bytes of a rank file (its body's CRC-32, little-endian). 0, or -1 (errno set).
static int read_trailer(const char *path, off_t size, uint32_t *crc) {
    unsigned char b[4] = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    const ssize_t got = size >= 4 ? pread(fd, b, 4, size - 4) : 0;
    const int e = got < 0 ? errno : EIO;   // a short read: the file shrank under us
    close(fd);
    *crc = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    if (got == 4) return 0;
    errno = e;
    return -1;
}

// Rank 0: extra.bin, manifest.json, then latest_zero. Returns 0 or -1 (printed).
// files: rank q's size and CRC at files[2q], files[2q + 1].
static int publish(Zero *z, const char *dir, const char *folder, long long step, const double *files, const void *extra,
                   size_t extra_bytes) {
    ZckManifest m;
    memset(&m, 0, sizeof m);
    snprintf(m.folder, sizeof m.folder, "%s", folder);
    m.version = ZCK_MANIFEST_VERSION;
    m.world = z->world;
    m.stage = z->stage;
    m.last_t = z->step.last_t;
    m.param_dtype = (int)z->cfg.param_dtype;
    m.step = step;
    m.seed = z->cfg.seed;
    memcpy(m.run_id, z->acct.run_id, ZCK_RUN_ID_BYTES);
    m.num_tensors = z->num_tensors;
    m.numel_total = z->layout.numel_total;
    m.t = calloc((size_t)z->num_tensors, sizeof(ZckTensor));
    m.ranks = calloc((size_t)z->world, sizeof(ZckRankFile));
    char err[1024], path[4200];
    int rc = -1;
    if (!m.t || !m.ranks) {
        zero_say(z, "out of host memory writing the checkpoint manifest");
        goto out;
    }
    for (int i = 0; i < z->num_tensors; i++) {
        m.t[i].name = z->t[i].name;   // borrowed: not freed below
        m.t[i].numel = z->t[i].lay->split.numel;
    }
    for (int q = 0; q < z->world; q++) {
        zck_rank_file(m.ranks[q].file, sizeof m.ranks[q].file, q);
        m.ranks[q].bytes = (uint64_t)files[2 * q];
        m.ranks[q].crc = (uint32_t)files[2 * q + 1];
        // every rank's file where rank 0 sees the folder: a folder of each node's own (not
        // one shared file system) would publish a checkpoint no rank can resume from
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", folder, m.ranks[q].file);
        const int found = stat(path, &st) == 0;
        // the file's trailer is its body's CRC: one of the same size an earlier run left in a
        // folder that is not the rank's has another (a node's own folder at the same path)
        uint32_t trailer = 0;
        const int sized = found && (uint64_t)st.st_size == m.ranks[q].bytes;
        const int read = sized && read_trailer(path, st.st_size, &trailer) == 0;
        if (!read || trailer != m.ranks[q].crc) {
            char seen[160];
            if (sized && !read) snprintf(seen, sizeof seen, "cannot read its CRC there (%s)", strerror(errno));
            else if (sized)
                snprintf(seen, sizeof seen, "sees a file of that size whose CRC is %08x, not its %08x (another run's?)",
                         trailer, m.ranks[q].crc);
            else if (found) snprintf(seen, sizeof seen, "sees %lld bytes there", (long long)st.st_size);
            else snprintf(seen, sizeof seen, "does not see it (%s)", strerror(errno));
            zero_say(z, "checkpoint %s not published: rank %d wrote %s (%llu bytes), and rank 0 %s: the output folder "
                     "must be one folder that every rank shares (a shared file system)", folder, q, path,
                     (unsigned long long)m.ranks[q].bytes, seen);
            goto out;
        }
    }
    if (extra && extra_bytes > 0) {
        m.has_extra = 1;
        m.extra_bytes = extra_bytes;
        snprintf(m.extra_file, sizeof m.extra_file, "%s", ZCK_EXTRA_FILE);
        snprintf(path, sizeof path, "%s/%s", folder, m.extra_file);
        if (zfile_write_all(path, extra, extra_bytes, &m.extra_crc, err, sizeof err) != 0) {
            zero_say(z, "saving checkpoint: %s", err);
            goto out;
        }
    }
    if (zck_manifest_write(&m, err, sizeof err) != 0) {
        zero_say(z, "saving checkpoint: %s", err);
        goto out;
    }
    char text[32];
    int len = snprintf(text, sizeof text, "%lld\n", step);
    snprintf(path, sizeof path, "%s/latest_zero", dir);
    if (zfile_write_all(path, text, (size_t)len, NULL, err, sizeof err) != 0) {
        zero_say(z, "saving checkpoint: %s", err);
        goto out;
    }
    rc = 0;
out:
    free(m.t);
    free(m.ranks);
    return rc;
}

// Rank 0, before any rank writes step S's files: a manifest already in zero_S (an earlier
// save of S, by a run that went back to an older checkpoint) is removed, and the removal
// synced to disk. Otherwise an interrupted save leaves it over a mix of old and new rank
// files, a folder that zero_prune would keep as a published checkpoint in place of a good
// older one. Returns 0 or -1 (printed).
static int unpublish(Zero *z, const char *folder) {
    char path[4200];
    snprintf(path, sizeof path, "%s/" ZCK_MANIFEST_FILE, folder);
    if (unlink(path) != 0 && errno != ENOENT) {
        zero_say(z, "saving checkpoint: cannot remove the earlier manifest %s before the rank files are rewritten: %s",
                 path, strerror(errno));
        return -1;
    }
    int e = zfile_sync_folder(folder);
    if (e != 0) {
        zero_say(z, "saving checkpoint: syncing %s to disk failed: %s (its earlier manifest may come back over new rank "
                 "files after a crash)", folder, strerror(e));
        return -1;
    }
    return 0;
}

int zero_save(Zero *z, const char *dir, int step, const void *extra, size_t extra_bytes) {
    // same answer on every rank: the step state and arguments are the same everywhere
    if (z->step.open) { zero_say(z, "zero_save inside a step (call it after zero_step)"); return -1; }
    if (!dir || step < 0) { zero_say(z, "zero_save needs a folder and a step >= 0 (got step %d)", step); return -1; }
    zero_land_update(z);   // a delayed update in flight: saved and resumed runs go on from its result alike
    char folder[4096], file[64], path[4200], err[512];
    zck_folder(folder, sizeof folder, dir, step);
    zck_rank_file(file, sizeof file, z->rank);
    snprintf(path, sizeof path, "%s/%s", folder, file);
    zero_sync_streams(z);
    int bad = 0;
    uint32_t crc = 0;
    uint64_t bytes = 0;
    struct stat st;
    if (zfile_mkdirs(folder, err, sizeof err) != 0) {
        zero_say(z, "saving checkpoint: %s", err);
        bad = 1;
    } else if (lstat(folder, &st) != 0 || !S_ISDIR(st.st_mode)) {   // never written through a link to someone's folder
        zero_say(z, "saving checkpoint: %s is a symbolic link, not a folder of this run: nothing is written through it "
                 "(remove the link, or choose another output folder)", folder);
        bad = 1;
    } else if (z->rank == 0 && unpublish(z, folder) != 0) {
        bad = 1;
    }
    // the agreement orders the ranks: none writes its file before rank 0 removed the manifest
    if (any_failed(z, bad)) {
        if (z->rank == 0) zero_say(z, "checkpoint %s not saved: a rank could not prepare its folder (see above)", folder);
        return -1;
    }
    bad = write_rank_file(z, path, step, &crc, &bytes) != 0;
    // rank 0 alone needs every file's size and CRC (for the manifest): a gather, O(1)
    // bytes from each rank rather than an all-reduce of world-sized slots. A rank whose
    // write failed sends size 0 (a rank file is never empty: its header comes first).
    double mine[2] = {bad ? 0.0 : (double)bytes, (double)crc}, *files = NULL;   // exact: integers < 2^53
    if (z->rank == 0 && !(files = malloc((size_t)z->world * 2 * sizeof(double))))
        zero_fail(z, "out of host memory saving a checkpoint");
    z->b->gather_f64(z->b, z->comm, mine, 2, files, "checkpoint file sizes and CRCs");
    int pub = 0;
    for (int q = 0; z->rank == 0 && q < z->world && pub == 0; q++)
        if (files[2 * q] == 0.0) {
            zero_say(z, "checkpoint %s not published: rank %d failed to write its file (see above)", folder, q);
            pub = -1;
        }
    if (z->rank == 0 && pub == 0) pub = publish(z, dir, folder, step, files, extra, extra_bytes);
    free(files);
    return any_failed(z, pub != 0 || bad) ? -1 : 0;
}

// Checks the manifest's tensor table against ours. Returns 0 or -1 (printed): the same
// parameters in another table (a trainer's tiling option changed) are told from another model.
static int check_table(const Zero *z, const ZckManifest *m) {
    char why[512] = "";
    if (m->num_tensors != z->num_tensors)
        snprintf(why, sizeof why, "it has %d tensors, this run %d", m->num_tensors, z->num_tensors);
    for (int i = 0; i < z->num_tensors && !why[0]; i++) {
        if (strcmp(m->t[i].name, z->t[i].name) != 0)
            snprintf(why, sizeof why, "tensor %d is %s here, %s in the checkpoint", i, z->t[i].name, m->t[i].name);
        else if (m->t[i].numel != z->t[i].lay->split.numel)
            snprintf(why, sizeof why, "tensor %s has %zu elements here, %" PRIu64 " in the checkpoint", z->t[i].name,
                     z->t[i].lay->split.numel, m->t[i].numel);
    }
    if (!why[0]) return 0;
    if (m->numel_total == z->layout.numel_total)
        zero_say(z, "checkpoint %s holds the same %" PRIu64 " parameters in another tensor table (%s): resume with the "
                 "table (the tiling) it was saved with", m->folder, m->numel_total, why);
    else
        zero_say(z, "checkpoint %s is for a different model: %s", m->folder, why);
    return -1;
}

// What zck_latest's answer says, for a message.
static const char *latest_said(long long s, char *text, size_t cap) {
    if (s >= 0) snprintf(text, cap, "step %lld", s);
    else snprintf(text, cap, "%s", s == -2 ? "no step (malformed)" : "no step (missing)");
    return text;
}

int zero_load(Zero *z, const char *dir, int step, void *extra, size_t extra_bytes) {
    if (z->step.open) { zero_say(z, "zero_load inside a step (call it between steps)"); return -1; }
    const ZeroBackend *b = z->b;
    char latest_why[4400] = "";
    long long s = step >= 0 ? step : (dir ? zck_latest(dir, latest_why, sizeof latest_why) : -1);
    ZckManifest m;
    ZckReader r;
    memset(&m, 0, sizeof m);
    memset(&r, 0, sizeof r);
    char err[1400];
    void *extra_tmp = NULL;
    float *chunk = NULL;
    int bad = 0;
    // every rank reads latest_zero itself: rank 0's reading decides, and a rank that read
    // another step (a stale view of a shared folder) stops the load, since ranks that loaded
    // different steps would train on a mix of them
    if (step < 0 && z->world > 1) {
        double at0 = z->rank == 0 ? (double)s : 0;
        zero_allreduce_sum_f64(z, &at0, 1);
        if ((long long)at0 != s) {
            char here[64], there[64];
            zero_say(z, "%s/latest_zero names %s here and %s on rank 0: do all ranks see the same folder (a stale "
                     "network file system cache, a per-rank working folder)?", dir ? dir : "(null)",
                     latest_said(s, here, sizeof here), latest_said((long long)at0, there, sizeof there));
            bad = 1;
        }
    }
    // phase 1: read and verify everything this rank needs; change nothing
    if (bad) {
    } else if (!dir || s < 0) {
        if (s == -2) zero_say(z, "no checkpoint to load in %s: %s", dir ? dir : "(null)", latest_why);
        else zero_say(z, "no checkpoint to load in %s: %s/latest_zero is missing", dir ? dir : "(null)", dir ? dir : "");
        bad = 1;
    } else if (zck_manifest_read(dir, s, &m, err, sizeof err) != 0) {
        zero_say(z, "%s", err);
        bad = 1;
    } else if (check_table(z, &m) != 0) {
        bad = 1;
    } else if (zck_reader_init(&r, &m) != 0) {
        zero_say(z, "out of host memory loading a checkpoint");
        bad = 1;
    } else {
        for (int i = 0; i < z->num_tensors && !bad; i++) {
            const ZeroTensorLayout *l = z->t[i].lay;
            if (zck_reader_need(&r, i, l->own_begin, l->own_count, err, sizeof err) != 0) {
                zero_say(z, "%s", err);
                bad = 1;
            }
        }
        // the saved files no read needs, dealt to the ranks: every one is checked once
        if (!bad && zck_reader_need_empty(&r, z->rank, z->world, err, sizeof err) != 0) {
            zero_say(z, "%s", err);
            bad = 1;
        }
        if (!bad && extra && extra_bytes > 0) {   // a trainer that passes none skips it
            extra_tmp = malloc(extra_bytes);
            if (!extra_tmp || zck_read_extra(&m, extra_tmp, extra_bytes, err, sizeof err) != 0) {
                zero_say(z, "%s", extra_tmp ? err : "out of host memory loading a checkpoint");
                bad = 1;
            }
        }
        chunk = bad ? NULL : b->alloc(b, ZERO_MEM_HOST, CKPT_CHUNK * sizeof(float));
        if (!bad && !chunk) {
            zero_say(z, "out of host memory loading a checkpoint");
            bad = 1;
        }
    }
    if (any_failed(z, bad)) {
        if (chunk) b->free(b, ZERO_MEM_HOST, chunk);
        free(extra_tmp);
        if (r.sh) zck_reader_free(&r);
        if (m.t) zck_manifest_free(&m);
        return -1;
    }
    if (z->rank == 0 && (m.world != z->world || m.stage != z->stage))
        printf("zero: loading %s, saved by %d ranks at stage %d, into %d ranks at stage %d\n", m.folder, m.world, m.stage,
               z->world, z->stage);
    // a change of precision is allowed (an fp32 CPU run resumed by the bf16 CUDA trainer),
    // and said, as it changes the numbers from here on
    static const char *dtype[] = {"fp32", "bf16"};
    const int run_dtype = z->cfg.param_dtype != ZERO_F32;
    if (z->rank == 0 && m.param_dtype != run_dtype)
        printf("zero: loading %s, saved with %s working parameters, into a run with %s ones: the fp32 master weights "
               "carry over, and the steps from here compute in %s, not as the saved run's would\n", m.folder,
               dtype[m.param_dtype != 0], dtype[run_dtype], dtype[run_dtype]);
    if (z->rank == 0 && m.seed != z->cfg.seed && z->cfg.param_dtype != ZERO_F32)
        printf("zero: note: %s was saved with rounding seed %" PRIu64 ", this run uses %" PRIu64
               ": bf16 weights will not round as in the saved run\n", m.folder, m.seed, z->cfg.seed);

    // phase 2: every rank verified its files; a failure now would leave the state half
    // replaced, so it ends the job
    zero_sync_streams(z);
    static const int kinds[ZCK_KINDS] = {ZK_MASTER, ZK_M, ZK_V};
    float *bases[ZCK_KINDS] = {z->step.master, z->step.m, z->step.v};
    for (int i = 0; i < z->num_tensors; i++) {
        const ZeroTensorLayout *l = z->t[i].lay;
        for (int k = 0; k < ZCK_KINDS; k++)
            for (size_t done = 0; done < l->own_count; done += CKPT_CHUNK) {
                size_t n = l->own_count - done < CKPT_CHUNK ? l->own_count - done : CKPT_CHUNK;
                if (zck_reader_read(&r, i, k, l->own_begin + done, n, chunk, err, sizeof err) != 0)
                    zero_fail(z, "loading %s: %s", m.folder, err);
                zero_state_write(z, kinds[k], i, done, n, chunk);   // device, host or NVMe (offload.c)
            }
    }
    if (z->stage == 0) {
        // stage 0 keeps everything whole: gather the slots, as zero_init does
        static const char *what[ZCK_KINDS] = {"loaded master weights", "loaded AdamW m", "loaded AdamW v"};
        for (int k = 0; k < ZCK_KINDS; k++) {
            for (int i = 0; i < z->num_tensors; i++) {
                const ZeroTensorLayout *l = z->t[i].lay;
                z->parts[i].send = bases[k] + l->full_off + (size_t)z->rank * l->split.shard;
                z->parts[i].recv = bases[k] + l->full_off;
                z->parts[i].count = l->split.shard;
            }
            b->all_gather(b, z->comm, ZERO_GROUP_WORLD, z->parts, z->num_tensors, ZERO_F32, z->gather.stream, what[k]);
            b->stream_sync(b, z->gather.stream);
        }
    }
    zero_refresh_after_load(z, m.last_t, m.step);
    zero_run_id_set(z, m.run_id);   // a resumed run keeps the identity it started with
    if (extra && extra_bytes > 0) memcpy(extra, extra_tmp, extra_bytes);
    b->free(b, ZERO_MEM_HOST, chunk);
    free(extra_tmp);
    zck_reader_free(&r);
    zck_manifest_free(&m);
    return 0;
}

// ---------------------------------------------------------------- pruning
// Deletes only what the format writes (zck_is_format_file) and never through a symbolic
// link: folders are opened with O_NOFOLLOW and their files removed by unlinkat relative
// to that descriptor, so a zero_S that is a link to someone's folder, or a file of someone's
// inside a real zero_S, is left where it is (and said once).

// What prune_folder did to one zero_S folder.
typedef struct {
    int removed, strays;   // format files removed; other entries left
    char stray[256];       // the first of those
} PruneResult;

// Removes the format's files from parent/name (a real folder, not a link) and, when
// nothing else is in it, the folder. The manifest goes first, its removal synced to disk
// before any rank file goes: a prune cut short leaves a folder that no longer looks like a
// published checkpoint, never a manifest over missing files. Returns 0, or -1 with errno
// set (ELOOP or ENOTDIR: name is a symbolic link or no folder, and nothing was touched).
static int prune_folder(int parent, const char *name, PruneResult *res) {
    memset(res, 0, sizeof *res);
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return -1;
    }
    // the names first, then the removals: readdir's view of a folder changing under it is unspecified
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        struct stat st;
        if (!zck_is_format_file(e->d_name) || fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
            if (res->strays++ == 0) snprintf(res->stray, sizeof res->stray, "%s", e->d_name);
            continue;
        }
        if (n == cap) {
            char **bigger = realloc(names, (cap = cap ? 2 * cap : 16) * sizeof *names);
            if (bigger == NULL) { rc = -1; break; }
            names = bigger;
        }
        if ((names[n] = strdup(e->d_name)) == NULL) { rc = -1; break; }
        n++;
    }
    // the manifest's removal failed or is not on disk (or the listing is incomplete): the
    // rank files stay
    int manifest_left = rc != 0;
    for (size_t i = 0; i < n && !manifest_left; i++) {
        if (strcmp(names[i], ZCK_MANIFEST_FILE) != 0) continue;
        int failed = unlinkat(fd, names[i], 0) == 0 ? zfile_sync_folder_fd(fd) : errno;
        if (failed == 0) {
            res->removed++;
        } else {
            manifest_left = 1;
            rc = -1;
            errno = failed;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (!manifest_left && strcmp(names[i], ZCK_MANIFEST_FILE) != 0) {
            if (unlinkat(fd, names[i], 0) == 0) res->removed++;
            else rc = -1;
        }
        free(names[i]);
    }
    free(names);
    closedir(d);   // closes fd
    if (rc == 0 && res->strays == 0 && unlinkat(parent, name, AT_REMOVEDIR) != 0) rc = -1;
    return rc;
}

// Whether the file name in the folder fd is a regular file of `bytes` bytes; if not, why.
static int holds(int fd, const char *name, uint64_t bytes, char *why, size_t cap) {
    struct stat st;
    if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) snprintf(why, cap, "%s: %s", name, strerror(errno));
    else if (!S_ISREG(st.st_mode)) snprintf(why, cap, "%s is not a regular file", name);
    else if ((uint64_t)st.st_size != bytes)
        snprintf(why, cap, "%s is %lld bytes, the manifest says %" PRIu64, name, (long long)st.st_size, bytes);
    else return 1;
    return 0;
}

// Whether dir/name, zero_`step` (a real folder: not a link), holds a published checkpoint:
// a manifest, and every file it names there a regular file of the size it records. A
// manifest over missing or cut files (a save or a prune cut short) is none; then
// *has_manifest is 1 and why says what is wrong. A manifest this build cannot read (another
// version, an I/O error) sets *unjudged: pruning neither removes nor counts that folder.
static int published(int parent, const char *dir, const char *name, long long step, int *has_manifest, int *unjudged,
                     char *why, size_t cap) {
    *has_manifest = *unjudged = 0;
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    *has_manifest = fstatat(fd, ZCK_MANIFEST_FILE, &st, AT_SYMLINK_NOFOLLOW) == 0;
    ZckManifest m;
    int readable = *has_manifest && zck_manifest_read(dir, step, &m, why, cap) == 0, yes = readable;
    *unjudged = *has_manifest && !readable;
    for (int q = 0; yes && q < m.world; q++) yes = holds(fd, m.ranks[q].file, m.ranks[q].bytes, why, cap);
    if (yes && m.has_extra) yes = holds(fd, m.extra_file, m.extra_bytes, why, cap);
    if (readable) zck_manifest_free(&m);
    close(fd);
    return yes;
}

// A link named zero_S is reported the first time a prune meets it, not at every save.
static int first_sighting(long long step) {
    static long long seen[64];
    static int nseen;
    for (int i = 0; i < nseen; i++)
        if (seen[i] == step) return 0;
    if (nseen < 64) seen[nseen++] = step;
    return 1;
}

typedef struct {
    long long step;
    int complete;   // a published checkpoint: its manifest and every file it names (published())
    int stale;      // holds a manifest, but is not complete (`why` says what is wrong)
    int unjudged;   // holds a manifest this build cannot read: left alone, not counted
    char why[512];
} PruneEntry;

static int newer_first(const void *a, const void *b) {
    long long x = ((const PruneEntry *)a)->step, y = ((const PruneEntry *)b)->step;
    return x < y ? 1 : x > y ? -1 : 0;
}

int zero_prune(Zero *z, const char *dir, int keep, long long major) {
    if (z->rank != 0 || keep < 1) return 0;
    long long latest = zck_latest(dir, NULL, 0);
    if (latest < 0) return 0;
    int parent = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (parent < 0) return -1;
    int listing = dup(parent);
    DIR *d = listing >= 0 ? fdopendir(listing) : NULL;
    if (d == NULL) {
        if (listing >= 0) close(listing);
        close(parent);
        return -1;
    }
    // The real zero_S folders at or below the published latest (one above it is a save
    // under way: left alone), newest first.
    PruneEntry *list = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        long long s = zck_folder_step(e->d_name);
        if (s < 0 || s > latest) continue;
        struct stat st;
        if (fstatat(parent, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (!S_ISDIR(st.st_mode)) {
            if (first_sighting(s))
                zero_say(z, "%s/%s is %s, not a checkpoint folder: left alone (not followed, nothing in it removed)", dir,
                         e->d_name, S_ISLNK(st.st_mode) ? "a symbolic link" : "no folder");
            continue;
        }
        if (n == cap) {
            PruneEntry *bigger = realloc(list, (cap = cap ? 2 * cap : 16) * sizeof *list);
            if (bigger == NULL) { rc = -1; break; }
            list = bigger;
        }
        list[n].step = s;
        list[n].complete = published(parent, dir, e->d_name, s, &list[n].stale, &list[n].unjudged, list[n].why,
                                     sizeof list[n].why);
        list[n].stale = list[n].stale && !list[n].complete && !list[n].unjudged;
        n++;
    }
    closedir(d);
    qsort(list, n, sizeof *list, newer_first);
    // the newest `keep` published checkpoints survive; the rest are removed, their files only
    int kept = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (list[i].unjudged) continue;   // another version's, or unreadable now: not this prune's to judge
        if ((list[i].complete && kept < keep) || list[i].step == latest) {   // latest_zero's: never removed
            kept++;
            continue;
        }
        if (list[i].complete && major > 0 && list[i].step % major == 0) continue;   // a major checkpoint (-nm)
        char name[64];
        snprintf(name, sizeof name, "zero_%lld", list[i].step);
        PruneResult res;
        if (prune_folder(parent, name, &res) != 0) {
            zero_say(z, "could not remove old checkpoint %s/%s: %s", dir, name, strerror(errno));
            rc = -1;
        } else if (list[i].stale && res.removed > 0) {
            zero_say(z, "removed %s/%s: it holds a manifest but is no complete checkpoint (%s), so it did not count "
                     "among the %d kept", dir, name, list[i].why, keep);
        }
        if (rc == 0 && res.strays > 0 && res.removed > 0) {   // said when its files go, not at every later save
            zero_say(z, "removed old checkpoint %s/%s but kept the folder: it also holds %d file%s the checkpoint "
                     "format does not name (%s%s), left as they are", dir, name, res.strays, res.strays == 1 ? "" : "s",
                     res.stray, res.strays > 1 ? ", ..." : "");
        }
    }
    free(list);
    close(parent);
    return rc;
}
