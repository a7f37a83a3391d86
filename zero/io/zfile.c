// zfile.c: atomic file replacement, CRC-32 (zlib) and small file helpers (see zfile.h).
#include "zfile.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

uint32_t zfile_crc32(uint32_t crc, const void *data, size_t n) {
    const unsigned char *p = data;
    while (n > 0) {   // zlib takes uInt lengths
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = (uint32_t)crc32(crc, p, k);
        p += k;
        n -= k;
    }
    return crc;
}

// Write-behind (zfile.h): with two windows written past what was dropped, the older goes
// to disk (waited for) and out of the cache, and the newer's writeback starts. Every step
// must succeed: a writeback error sync_file_range reports is reported once per open file
// (Linux 4.14 on), so the commit's fsync would return 0 after it. Where the call is not
// available (ENOSYS, EINVAL, ESPIPE: it did nothing) the cache is kept until the commit.
// 0, or -1 with the reason in zf->err.
#define CACHE_WINDOW ((uint64_t)2 << 20)
static int write_back(ZFile *zf, int fd, uint64_t offset, uint64_t bytes, unsigned flags) {
    if (sync_file_range(fd, (off_t)offset, (off_t)bytes, flags) == 0 || errno == ENOSYS || errno == EINVAL ||
        errno == ESPIPE)
        return 0;
    return fail(zf->err, sizeof zf->err, "writing %s failed: writing its bytes from offset %llu back to disk: %s",
                zf->tmp, (unsigned long long)offset, strerror(errno));
}

static int write_behind(ZFile *zf) {
    if (zf->bytes < zf->dropped + 2 * CACHE_WINDOW) return 0;
    if (fflush(zf->f) != 0) return fail(zf->err, sizeof zf->err, "writing %s failed: %s", zf->tmp, strerror(errno));
    const int fd = fileno(zf->f);
    for (; zf->bytes >= zf->dropped + 2 * CACHE_WINDOW; zf->dropped += CACHE_WINDOW) {
        unsigned all = SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER;
        if (write_back(zf, fd, zf->dropped, CACHE_WINDOW, all) != 0) return -1;
        (void)posix_fadvise(fd, (off_t)zf->dropped, (off_t)CACHE_WINDOW, POSIX_FADV_DONTNEED);
    }
    return write_back(zf, fd, zf->dropped, 0, SYNC_FILE_RANGE_WRITE);   // 0: to the end
}

int zfile_open(ZFile *zf, const char *path) {
    memset(zf, 0, sizeof *zf);
    if (strlen(path) >= sizeof zf->path) return fail(zf->err, sizeof zf->err, "path too long: %s", path);
    snprintf(zf->path, sizeof zf->path, "%s", path);
    snprintf(zf->tmp, sizeof zf->tmp, "%s.tmp.%ld", path, (long)getpid());
    // a write past ulimit -f fails with EFBIG (returned by name) instead of killing the
    // process with SIGXFSZ without a word
    signal(SIGXFSZ, SIG_IGN);
    // created here and now, never an existing file or through a symbolic link planted at
    // this name (O_EXCL with O_NOFOLLOW: a link is refused, not followed)
    int fd = open(zf->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    struct stat st;
    if (fd < 0 && errno == EEXIST && lstat(zf->tmp, &st) == 0 && S_ISREG(st.st_mode)) {
        // a plain file named with this PID: an earlier process's (PIDs come round again in a
        // restarted container), which start-up cleanup keeps while another process has its PID
        fprintf(stderr, "zero: note: removing %s, a temp file an earlier process with this PID left\n", zf->tmp);
        if (unlink(zf->tmp) == 0) fd = open(zf->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    }
    if (fd < 0) {
        int e = errno;
        if (e == EEXIST && lstat(zf->tmp, &st) == 0)
            fail(zf->err, sizeof zf->err, "cannot create %s: %s is already there, and this process did not make it; "
                 "nothing is written through it: remove it by hand", zf->tmp,
                 S_ISLNK(st.st_mode) ? "a symbolic link" : S_ISREG(st.st_mode) ? "a file" : "something");
        else
            fail(zf->err, sizeof zf->err, "cannot create %s: %s", zf->tmp, strerror(e));
        zf->tmp[0] = '\0';   // not ours: zfile_abort leaves it alone
        return -1;
    }
    zf->f = fdopen(fd, "wb");
    if (!zf->f) {
        int e = errno;
        close(fd);
        unlink(zf->tmp);
        return fail(zf->err, sizeof zf->err, "cannot create %s: %s", zf->tmp, strerror(e));
    }
    zf->crc = zfile_crc32(0, NULL, 0);
    return 0;
}

int zfile_write(ZFile *zf, const void *data, size_t n) {
    if (!zf->f) return fail(zf->err, sizeof zf->err, "%s is not open", zf->tmp);
    const char *p = data;
    for (size_t done = 0; done < n;) {   // by windows, so the cache is trimmed as it goes
        size_t k = n - done < CACHE_WINDOW ? n - done : (size_t)CACHE_WINDOW;
        if (fwrite(p + done, 1, k, zf->f) != k) {
            int e = errno;
            zfile_abort(zf);
            return fail(zf->err, sizeof zf->err, "writing %s failed: %s", zf->tmp, strerror(e));
        }
        zf->crc = zfile_crc32(zf->crc, p + done, k);
        zf->bytes += k;
        done += k;
        if (write_behind(zf) != 0) {   // the reason is in zf->err, which zfile_abort keeps
            zfile_abort(zf);
            return -1;
        }
    }
    return 0;
}

int zfile_sync_folder_fd(int fd) {
    return fsync(fd) == 0 || errno == EINVAL || errno == ENOTSUP || errno == EOPNOTSUPP ? 0 : errno;
}

int zfile_sync_folder(const char *folder) {
    int fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return 0;
    int e = zfile_sync_folder_fd(fd);
    close(fd);
    return e;
}

// Syncs the folder holding path (zfile_sync_folder), so that a rename into it survives a crash.
static int fsync_parent(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) dir[1] = 0;
    else if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    return zfile_sync_folder(dir);
}

int zfile_commit(ZFile *zf) {
    if (!zf->f) return fail(zf->err, sizeof zf->err, "%s is not open", zf->tmp);
    if (fflush(zf->f) != 0 || fsync(fileno(zf->f)) != 0) {
        int e = errno;
        zfile_abort(zf);
        return fail(zf->err, sizeof zf->err, "flushing %s to disk failed: %s", zf->tmp, strerror(e));
    }
    (void)posix_fadvise(fileno(zf->f), 0, 0, POSIX_FADV_DONTNEED);   // on disk: out of the cache
    int rc = fclose(zf->f);
    zf->f = NULL;
    if (rc != 0) {
        int e = errno;
        remove(zf->tmp);
        return fail(zf->err, sizeof zf->err, "closing %s failed: %s", zf->tmp, strerror(e));
    }
    // read back before it takes the name: a file that does not hold what was written never
    // replaces the one there (for latest_zero, the checkpoint a resume would take)
    if (zfile_verify(zf->tmp, zf->crc, zf->bytes, zf->err, sizeof zf->err) != 0) {
        remove(zf->tmp);
        return -1;
    }
    if (rename(zf->tmp, zf->path) != 0) {
        int e = errno;
        remove(zf->tmp);
        return fail(zf->err, sizeof zf->err, "renaming %s to %s failed: %s", zf->tmp, zf->path, strerror(e));
    }
    int e = fsync_parent(zf->path);   // make the rename itself durable
    if (e != 0)
        return fail(zf->err, sizeof zf->err, "%s took its name, but syncing its folder to disk failed: %s (the name may "
                    "not survive a crash)", zf->path, strerror(e));
    return 0;
}

void zfile_abort(ZFile *zf) {
    if (zf->f) fclose(zf->f);
    zf->f = NULL;
    if (zf->tmp[0]) remove(zf->tmp);
}

// Around the page cache (O_DIRECT, aligned requests): a rank file of GBs read back would
// fill the cache ahead of the reads (readahead). Buffered where O_DIRECT is refused (tmpfs),
// dropping what was cached as it goes.
int zfile_crc_of(const char *path, uint64_t limit, uint32_t *crc, uint64_t *bytes, char *err, size_t errlen) {
    enum { CHUNK = 4 << 20 };
    int direct = 1, fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (fd < 0) { direct = 0; fd = open(path, O_RDONLY | O_CLOEXEC); }
    if (fd < 0) return fail(err, errlen, "%s", strerror(errno));
    // a buffer no larger than the file (in whole 4 KiB blocks, as O_DIRECT wants): a direct
    // read pins the whole buffer first, 4 MiB for a file of a few KB
    size_t cap = CHUNK;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size >= 0) {
        uint64_t want = (uint64_t)st.st_size < limit ? (uint64_t)st.st_size : limit;
        if (want < CHUNK) cap = want / 4096 * 4096 + 4096;
    }
    unsigned char *buf = aligned_alloc(4096, cap);
    if (!buf) { close(fd); return fail(err, errlen, "out of host memory"); }
    uint32_t c = zfile_crc32(0, NULL, 0);
    uint64_t total = 0;
    int rc = 0;
    while (total < limit) {
        ssize_t got = pread(fd, buf, cap, (off_t)total);
        if (got < 0 && errno == EINVAL && direct) {   // O_DIRECT refused here: buffered
            close(fd);
            if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) { rc = fail(err, errlen, "%s", strerror(errno)); break; }
            direct = 0;
            continue;
        }
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) { rc = fail(err, errlen, "read error: %s", strerror(errno)); break; }
        if (got == 0) break;
        size_t use = (uint64_t)got < limit - total ? (size_t)got : (size_t)(limit - total);
        c = zfile_crc32(c, buf, use);
        total += use;
        if (!direct) (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        // a short read is not the end: the end is a read of 0 bytes (after a partial last
        // block, O_DIRECT refuses the unaligned offset and the buffered read says 0)
    }
    free(buf);
    if (fd >= 0) close(fd);
    if (rc == 0) {
        *crc = c;
        if (bytes) *bytes = total;
    }
    return rc;
}

int zfile_verify(const char *path, uint32_t crc, uint64_t bytes, char *err, size_t errlen) {
    uint32_t disk_crc;
    uint64_t disk_bytes;
    char why[256];
    if (zfile_crc_of(path, UINT64_MAX, &disk_crc, &disk_bytes, why, sizeof why) != 0)
        return fail(err, errlen, "%s cannot be read back: %s", path, why);
    if (disk_crc != crc || disk_bytes != bytes)
        return fail(err, errlen, "%s reads back as %llu bytes with CRC-32 0x%08x; %llu bytes with 0x%08x were written", path,
                    (unsigned long long)disk_bytes, disk_crc, (unsigned long long)bytes, crc);
    return 0;
}

int zfile_write_all(const char *path, const void *data, size_t n, uint32_t *crc, char *err, size_t errlen) {
    ZFile zf;
    if (zfile_open(&zf, path) != 0 || zfile_write(&zf, data, n) != 0 || zfile_commit(&zf) != 0) {
        zfile_abort(&zf);
        return fail(err, errlen, "%s", zf.err);
    }
    if (crc) *crc = zf.crc;
    return 0;
}

// What a file of this st_mode is, for a message.
static const char *file_kind(mode_t mode) {
    return S_ISLNK(mode) ? "a symbolic link" : S_ISDIR(mode) ? "a folder" : S_ISFIFO(mode) ? "a FIFO (named pipe)"
         : S_ISCHR(mode) ? "a character device" : S_ISBLK(mode) ? "a block device" : S_ISSOCK(mode) ? "a socket"
         : "not a regular file";
}

int zfile_read_all(const char *path, size_t max, char **out, size_t *n, char *err, size_t errlen) {
    *out = NULL;
    // O_NOFOLLOW: a link planted at the name is refused, not followed (to /dev/zero it would
    // be read without end); O_NONBLOCK: a FIFO opens at once, to be refused below, rather
    // than wait for a writer that never comes
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        int e = errno;
        char to[256];
        ssize_t k = e == ELOOP && lstat(path, &st) == 0 && S_ISLNK(st.st_mode) ? readlink(path, to, sizeof to - 1) : -1;
        if (k >= 0)
            return fail(err, errlen, "cannot read %s: it is a symbolic link (to %.*s), which is not followed (the writer "
                        "puts a regular file there)", path, (int)k, to);
        return fail(err, errlen, "cannot open %s: %s", path, strerror(e));
    }
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fail(err, errlen, "cannot examine %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return fail(err, errlen, "cannot read %s: it is %s, not a regular file", path, file_kind(st.st_mode));
    }
    if ((uint64_t)st.st_size > max) {
        close(fd);
        return fail(err, errlen, "cannot read %s: it is %lld bytes, more than the %zu bytes such a file may hold", path,
                    (long long)st.st_size, max);
    }
    // one byte past the size fstat gave is asked for: a file that grows while it is read is refused
    const size_t size = (size_t)st.st_size;
    char *buf = malloc(size + 2);
    if (!buf) {
        close(fd);
        return fail(err, errlen, "out of host memory reading %s (%zu bytes)", path, size);
    }
    size_t len = 0;
    while (len <= size) {
        ssize_t got = read(fd, buf + len, size + 1 - len);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return fail(err, errlen, "read error on %s: %s", path, strerror(e));
        }
        if (got == 0) break;
        len += (size_t)got;
    }
    close(fd);
    if (len > size) {
        free(buf);
        return fail(err, errlen, "cannot read %s: it grew past its %zu bytes while it was read (is something writing it?)",
                    path, size);
    }
    buf[len] = 0;
    *out = buf;
    if (n) *n = len;
    return 0;
}

int zfile_mkdirs(const char *path, char *err, size_t errlen) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) return fail(err, errlen, "path too long: %s", path);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != 0) continue;
        char c = *s;
        *s = 0;
        // several ranks may race to create the same folder: EEXIST is success
        if (mkdir(p, 0755) == 0) {
            // the new folder's name is an entry of its parent: synced there, so that a crash
            // does not take the folder (and what is later written and synced inside it) away
            int e = fsync_parent(p);
            if (e != 0)
                return fail(err, errlen, "created folder %s, but syncing the folder holding it to disk failed: %s", p,
                            strerror(e));
        } else if (errno != EEXIST) {
            int e = errno;
            struct stat st;
            if (!(stat(p, &st) == 0 && S_ISDIR(st.st_mode))) return fail(err, errlen, "cannot create folder %s: %s", p, strerror(e));
        }
        *s = c;
        if (c == 0) break;
    }
    struct stat st;
    if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) return fail(err, errlen, "%s is not a folder", p);
    return 0;
}

const char *zfile_pread_why(void) { return errno ? strerror(errno) : "the file ends before them"; }

int zfile_pread(int fd, void *buf, size_t n, uint64_t offset) {
    char *p = buf;
    if (offset > (uint64_t)INT64_MAX || n > (uint64_t)INT64_MAX - offset) {   // past what an off_t holds
        errno = EOVERFLOW;
        return -1;
    }
    while (n > 0) {
        ssize_t got = pread(fd, p, n, (off_t)offset);
        if (got < 0 && errno == EINTR) continue;
        if (got == 0) errno = 0;   // the file ended first
        if (got <= 0) return -1;
        p += got;
        n -= (size_t)got;
        offset += (uint64_t)got;
    }
    return 0;
}
