// atomic_file.c: temp file + fsync + rename, with a running CRC-32.
#define _POSIX_C_SOURCE 200809L
#include "atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "utils.h"

// Write-behind: once two windows past what was dropped have been written, the older one is
// written out (waiting for it), dropped from the page cache, and the newer one's writeback
// is started, so the disk works while the caller produces the next window. The flush must
// succeed: stdio drops the bytes it could not write and the next ones land in their place
// (a short file whose fsync reports nothing). So must each sync_file_range: a writeback
// error it reports is reported once per open file (Linux 4.14 on), so the commit's fsync
// would return 0 after it; the write stops here, naming the file. Where the call is not
// available (ENOSYS, EINVAL, ESPIPE: it did nothing) the cache is kept until the commit.
#define CACHE_WINDOW ((uint64_t)2 << 20)
static void write_back(AtomicFile *af, int fd, uint64_t offset, uint64_t bytes, unsigned flags) {
    if (sync_file_range(fd, (off_t)offset, (off_t)bytes, flags) == 0 || errno == ENOSYS || errno == EINVAL ||
        errno == ESPIPE)
        return;
    int e = errno;
    atomic_file_abort(af);
    die("write error on '%s' (for '%s'): writing its bytes from offset %llu back to disk failed: %s", af->tmp_path,
        af->path, (unsigned long long)offset, strerror(e));
}

static void drop_written(AtomicFile *af) {
    if (af->bytes - af->dropped < 2 * CACHE_WINDOW) return;
    if (fflush(af->f) != 0) {
        int e = errno;
        atomic_file_abort(af);
        die("write error on '%s' (for '%s'): %s", af->tmp_path, af->path, strerror(e));
    }
    int fd = fileno(af->f);
    while (af->bytes - af->dropped >= 2 * CACHE_WINDOW) {
        write_back(af, fd, af->dropped, CACHE_WINDOW,
                   SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
        (void)posix_fadvise(fd, (off_t)af->dropped, (off_t)CACHE_WINDOW, POSIX_FADV_DONTNEED);
        af->dropped += CACHE_WINDOW;
    }
    write_back(af, fd, af->dropped, 0, SYNC_FILE_RANGE_WRITE);   // 0: to the end
}

void atomic_file_open(AtomicFile *af, const char *path) {
    if (strlen(path) >= sizeof(af->path)) die("path too long: '%s'", path);
    strcpy(af->path, path);
    snprintf(af->tmp_path, sizeof(af->tmp_path), "%s.tmp.%ld", path, (long)getpid());
    // a write past ulimit -f fails with EFBIG (reported by name below) instead of killing
    // the process with SIGXFSZ without a word
    signal(SIGXFSZ, SIG_IGN);
    // created here and now, never an existing file or whatever a symbolic link planted at
    // this name points to (O_EXCL with O_NOFOLLOW: a link is refused, not followed)
    int fd = open(af->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    struct stat st;
    if (fd < 0 && errno == EEXIST && lstat(af->tmp_path, &st) == 0 && S_ISREG(st.st_mode)) {
        // a plain file named with this PID: an earlier process's (a restarted container hands
        // out the same PIDs), which start-up cleanup keeps while another process has its PID
        fprintf(stderr, "note: removing '%s', a temp file an earlier process with this PID left\n", af->tmp_path);
        if (unlink(af->tmp_path) == 0) fd = open(af->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    }
    if (fd < 0) {
        int e = errno;
        if (e == EEXIST && lstat(af->tmp_path, &st) == 0)
            die("cannot create '%s' (for '%s'): %s is already there, and this process did not make it; nothing is "
                "written through it: remove it by hand", af->tmp_path, path,
                S_ISLNK(st.st_mode) ? "a symbolic link" : S_ISREG(st.st_mode) ? "a file" : "something");
        die("cannot create '%s': %s", af->tmp_path, strerror(e));
    }
    af->f = fdopen(fd, "wb");
    if (af->f == NULL) {
        int e = errno;
        close(fd);
        unlink(af->tmp_path);
        die("cannot create '%s': %s", af->tmp_path, strerror(e));
    }
    af->crc = (uint32_t)crc32(0L, Z_NULL, 0);
    af->bytes = 0;
    af->dropped = 0;
}

void atomic_file_write(AtomicFile *af, const void *data, size_t n) {
    // in windows, so that the page cache is trimmed as a large buffer goes out
    const unsigned char *p = (const unsigned char *)data;
    while (n > 0) {
        size_t m = n > CACHE_WINDOW ? (size_t)CACHE_WINDOW : n;
        if (fwrite(p, 1, m, af->f) != m) {
            int e = errno;
            atomic_file_abort(af);
            die("write error on '%s' (for '%s'): %s", af->tmp_path, af->path, strerror(e));
        }
        af->crc = (uint32_t)crc32(af->crc, p, (uInt)m);   // zlib takes uInt lengths: m fits
        af->bytes += m;
        p += m;
        n -= m;
        drop_written(af);
    }
}

// Flushes and fsyncs the temp file; exits, removing it, when that fails.
static void flush_to_disk(AtomicFile *af) {
    if (fflush(af->f) != 0 || fsync(fileno(af->f)) != 0) {
        int e = errno;
        atomic_file_abort(af);
        die("cannot flush '%s' (for '%s') to disk: %s", af->tmp_path, af->path, strerror(e));
    }
    (void)posix_fadvise(fileno(af->f), 0, 0, POSIX_FADV_DONTNEED);   // on disk now: out of the cache
}

// The name path took reaches the disk too (atomic_file_sync_folder); exits when the disk failed.
static void sync_folder_of(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    const char *folder = dirname(dir);
    int e = atomic_file_sync_folder(folder);
    if (e != 0)
        die("'%s' took its name, but syncing its folder '%s' to disk failed: %s (the name may not survive a crash)",
            path, folder, strerror(e));
}

static void close_and_rename(AtomicFile *af) {
    if (fclose(af->f) != 0) {
        af->f = NULL;
        int e = errno;
        remove(af->tmp_path);
        die("cannot close '%s' (for '%s'): %s", af->tmp_path, af->path, strerror(e));
    }
    af->f = NULL;
    if (rename(af->tmp_path, af->path) != 0) {
        int e = errno;
        remove(af->tmp_path);
        die("cannot rename '%s' to '%s': %s", af->tmp_path, af->path, strerror(e));
    }
    sync_folder_of(af->path);
}

void atomic_file_rename(const char *from, const char *to) {
    if (rename(from, to) != 0) die("cannot rename '%s' to '%s': %s", from, to, strerror(errno));
    sync_folder_of(to);
}

int atomic_file_sync_folder(const char *folder) {
    int fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return 0;
    int e = fsync(fd) == 0 || errno == EINVAL || errno == ENOTSUP || errno == EOPNOTSUPP ? 0 : errno;
    close(fd);
    return e;
}

void atomic_file_commit(AtomicFile *af) {
    flush_to_disk(af);
    close_and_rename(af);
}

void atomic_file_commit_verified(AtomicFile *af, const char *what) {
    flush_to_disk(af);
    uint64_t nbytes;
    uint32_t crc = file_crc32(af->tmp_path, 0, -1, &nbytes);
    if (crc != af->crc || nbytes != af->bytes) {
        atomic_file_abort(af);
        die("%s '%s' failed verification: %llu bytes with CRC %08x on disk, %llu bytes with CRC %08x written; not "
            "saved", what, af->path, (unsigned long long)nbytes, crc, (unsigned long long)af->bytes, af->crc);
    }
    close_and_rename(af);
}

void atomic_file_abort(AtomicFile *af) {
    if (af->f) fclose(af->f);
    af->f = NULL;
    remove(af->tmp_path);
}

// The PID of a temp file name "<base>.tmp.<pid>" as atomic_file_open (and zero/'s zfile_open)
// write them ("%ld" of getpid(): no sign, no leading zero, fits a pid_t), with *base_len the
// length of <base>; 0 when the name is not one.
static pid_t temp_pid(const char *name, size_t *base_len) {
    const char *t = NULL;
    for (const char *s = strstr(name, ".tmp."); s; s = strstr(s + 1, ".tmp.")) t = s;   // the suffix is the last one
    if (t == NULL || t == name) return 0;
    const char *d = t + 5;
    if (*d < '1' || *d > '9' || strlen(d) > 10) return 0;
    long long pid = 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9') return 0;
        pid = pid * 10 + (*d - '0');
    }
    if (pid > INT_MAX) return 0;
    *base_len = (size_t)(t - name);
    return (pid_t)pid;
}

// The file part of a name pattern where it applies: in dir itself (folder NULL) a pattern
// without '/'; in a folder one level down, "FOLDER/FILE" whose FOLDER matches the folder's name.
static const char *file_pattern(const char *pattern, const char *folder) {
    const char *slash = strchr(pattern, '/');
    if (folder == NULL) return slash ? NULL : pattern;
    char dir_pat[NAME_MAX + 1];
    if (slash == NULL || slash - pattern > NAME_MAX) return NULL;
    memcpy(dir_pat, pattern, (size_t)(slash - pattern));
    dir_pat[slash - pattern] = '\0';
    return fnmatch(dir_pat, folder, 0) == 0 ? slash + 1 : NULL;
}

// Whether <base> (the first len bytes of name) is one of names at this folder level.
static int ours(const char *name, size_t len, const char *folder, const char *const *names) {
    char base[NAME_MAX + 1];
    if (len > NAME_MAX) return 0;
    memcpy(base, name, len);
    base[len] = '\0';
    for (; *names; names++) {
        const char *fp = file_pattern(*names, folder);
        if (fp && fnmatch(fp, base, 0) == 0) return 1;
    }
    return 0;
}

// Whether a folder directly in dir is one where names puts files (zero_N/).
static int our_folder(const char *folder, const char *const *names) {
    for (; *names; names++)
        if (file_pattern(*names, folder)) return 1;
    return 0;
}

// When this machine booted (seconds since the epoch), or -1 if unknown.
static time_t boot_time(void) {
    FILE *f = fopen("/proc/stat", "r");
    if (f != NULL) {
        char line[256];
        long long btime = -1;
        while (fgets(line, sizeof(line), f))
            if (sscanf(line, "btime %lld", &btime) == 1) break;
        fclose(f);
        if (btime > 0) return (time_t)btime;
    }
#ifdef CLOCK_BOOTTIME
    struct timespec up;
    if (clock_gettime(CLOCK_BOOTTIME, &up) == 0) return time(NULL) - up.tv_sec - 1;
#endif
    return -1;
}

// "name, name, ..." that stops growing with ", ..." when cap is reached.
static void list_add(char *list, size_t cap, const char *item) {
    size_t len = strlen(list);
    if (len >= 5 && strcmp(list + len - 5, ", ...") == 0) return;
    if (len + strlen(item) + 3 + 5 < cap) snprintf(list + len, cap - len, "%s%s", len ? ", " : "", item);
    else snprintf(list + len, cap - len, "%s...", len ? ", " : "");
}

typedef struct {
    const char *const *names;
    time_t boot;
    int removed, kept;
    char removed_list[1024], kept_list[1024];
} Stale;

// Whether process pid still runs: a zombie (state Z in /proc/PID/stat: exited, not yet
// reaped) writes nothing more.
static int process_lives(pid_t pid) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return 0;
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) return 1;   // no /proc: kill's word stands
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *close_paren = strrchr(buf, ')');   // the name may hold spaces and parentheses
    return !(close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z');
}

// One folder, opened as dfd (closed here); `folder`: its name when it is one level down
// (NULL for dir itself), `shown`: how it reads in messages.
static void remove_stale_in(Stale *s, int dfd, const char *folder, const char *shown) {
    DIR *d = fdopendir(dfd);
    if (d == NULL) {
        close(dfd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char rel[2 * NAME_MAX + 2];
        snprintf(rel, sizeof(rel), "%s%s%s", folder ? folder : "", folder ? "/" : "", e->d_name);
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            // one level down, only the folders the names allow (zero_N/), never through a symlink
            if (folder != NULL || !our_folder(e->d_name, s->names)) continue;
            int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) remove_stale_in(s, sub, e->d_name, shown);
            continue;
        }
        size_t base_len;
        pid_t pid = temp_pid(e->d_name, &base_len);
        // a symlink or anything but a plain file is nobody's temp file here: no writer makes one
        if (!S_ISREG(st.st_mode) || pid == 0 || !ours(e->d_name, base_len, folder, s->names)) continue;
        // the PID in the name of a file from before this boot says nothing about its writer
        char why[sizeof(rel) + 64];
        if (s->boot < 0 || st.st_mtime < s->boot) {
            snprintf(why, sizeof(why), "%s (%s)", rel, s->boot < 0 ? "boot time unknown" : "older than this boot");
        } else if (pid != getpid() && process_lives(pid)) {
            // (a file named with this process's own PID is an earlier process's: this one has
            // written nothing yet, and a restarted container hands out the same PIDs again)
            snprintf(why, sizeof(why), "%s (process %ld is running)", rel, (long)pid);
        } else if (unlinkat(dirfd(d), e->d_name, 0) != 0) {
            fprintf(stderr, "warning: cannot remove stale temp file '%s/%s': %s\n", shown, rel, strerror(errno));
            continue;
        } else {
            list_add(s->removed_list, sizeof(s->removed_list), rel);
            s->removed++;
            continue;
        }
        list_add(s->kept_list, sizeof(s->kept_list), why);
        s->kept++;
    }
    closedir(d);
}

int atomic_file_remove_stale(const char *dir, const char *const *names) {
    Stale s;
    memset(&s, 0, sizeof(s));
    s.names = names;
    s.boot = boot_time();
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return 0;
    remove_stale_in(&s, dfd, NULL, dir);
    if (s.removed > 0)
        printf("removed %d stale temp file%s of an interrupted run from '%s': %s\n", s.removed,
               s.removed == 1 ? "" : "s", dir, s.removed_list);
    if (s.kept > 0)
        printf("kept %d temp file%s in '%s' that may not be stale (remove by hand what no process is writing): %s\n",
               s.kept, s.kept == 1 ? "" : "s", dir, s.kept_list);
    return s.removed;
}

// Reads for a CRC go around the page cache (O_DIRECT, aligned 4 MiB requests): a read-back
// of a file of GBs would otherwise fill the cache ahead of it (readahead reaches MBs past
// what was read). Where O_DIRECT is refused (tmpfs) the reads are buffered, and what they
// cached is dropped as they go.
#define DIRECT_ALIGN 4096
#define DIRECT_CHUNK ((size_t)4 << 20)
uint32_t file_crc32(const char *path, long offset, long length, uint64_t *nbytes) {
    int direct = 1, fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (fd < 0) {
        direct = 0;
        fd = open(path, O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0) die("cannot open '%s': %s", path, strerror(errno));
    unsigned char *buf = (unsigned char *)aligned_alloc(DIRECT_ALIGN, DIRECT_CHUNK);
    if (!buf) die("out of memory reading '%s'", path);
    uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
    uint64_t total = 0, at = (uint64_t)offset / DIRECT_ALIGN * DIRECT_ALIGN;   // aligned reads from at
    size_t skip = (size_t)((uint64_t)offset - at);
    for (;;) {
        ssize_t got = pread(fd, buf, DIRECT_CHUNK, (off_t)at);
        if (got < 0 && errno == EINVAL && direct) {   // this file system refuses O_DIRECT reads
            close(fd);
            if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) die("cannot open '%s': %s", path, strerror(errno));
            direct = 0;
            continue;
        }
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) die("read error on '%s': %s", path, strerror(errno));
        if ((size_t)got <= skip) break;
        size_t use = (size_t)got - skip;
        if (length >= 0 && (uint64_t)length - total < use) use = (size_t)((uint64_t)length - total);
        crc = (uint32_t)crc32(crc, buf + skip, (uInt)use);
        total += use;
        at += (uint64_t)got;
        skip = 0;
        if (!direct) (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        if ((length >= 0 && total == (uint64_t)length) || (size_t)got < DIRECT_CHUNK) break;
    }
    free(buf);
    close(fd);
    if (length >= 0 && total != (uint64_t)length)
        die("'%s' is truncated: %llu of %ld bytes from offset %ld", path, (unsigned long long)total, length, offset);
    if (nbytes) *nbytes = total;
    return crc;
}
