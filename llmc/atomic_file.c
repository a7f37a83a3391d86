// atomic_file.c: temp file + fsync + rename, with a running CRC-32.
#define _POSIX_C_SOURCE 200809L
#include "atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "utils.h"

void atomic_file_open(AtomicFile *af, const char *path) {
    if (strlen(path) >= sizeof(af->path)) die("path too long: '%s'", path);
    strcpy(af->path, path);
    snprintf(af->tmp_path, sizeof(af->tmp_path), "%s.tmp.%ld", path, (long)getpid());
    af->f = fopen(af->tmp_path, "wb");
    if (af->f == NULL) die("cannot create '%s': %s", af->tmp_path, strerror(errno));
    af->crc = (uint32_t)crc32(0L, Z_NULL, 0);
    af->bytes = 0;
}

void atomic_file_write(AtomicFile *af, const void *data, size_t n) {
    if (n == 0) return;
    if (fwrite(data, 1, n, af->f) != n) {
        int e = errno;
        atomic_file_abort(af);
        die("write error on '%s' (for '%s'): %s", af->tmp_path, af->path, strerror(e));
    }
    // zlib's crc32 takes uInt lengths; feed large buffers in pieces.
    const unsigned char *p = (const unsigned char *)data;
    while (n > 0) {
        uInt m = n > (1u << 30) ? (1u << 30) : (uInt)n;
        af->crc = (uint32_t)crc32(af->crc, p, m);
        p += m;
        n -= m;
        af->bytes += m;
    }
}

void atomic_file_commit(AtomicFile *af) {
    if (fflush(af->f) != 0 || fsync(fileno(af->f)) != 0) {
        int e = errno;
        atomic_file_abort(af);
        die("cannot flush '%s' to disk: %s", af->tmp_path, strerror(e));
    }
    if (fclose(af->f) != 0) {
        af->f = NULL;
        int e = errno;
        remove(af->tmp_path);
        die("cannot close '%s': %s", af->tmp_path, strerror(e));
    }
    af->f = NULL;
    if (rename(af->tmp_path, af->path) != 0) {
        int e = errno;
        remove(af->tmp_path);
        die("cannot rename '%s' to '%s': %s", af->tmp_path, af->path, strerror(e));
    }
    char dir[4096];
    strcpy(dir, af->path);
    int fd = open(dirname(dir), O_RDONLY);
    if (fd >= 0) { fsync(fd); close(fd); } // best effort: some filesystems refuse dir fsync
}

void atomic_file_abort(AtomicFile *af) {
    if (af->f) fclose(af->f);
    af->f = NULL;
    remove(af->tmp_path);
}

// "<name>.tmp.<digits>", as atomic_file_open (and zero/'s zfile_open) name temp files.
static int is_temp_name(const char *name) {
    const char *t = strstr(name, ".tmp.");
    if (t == NULL || t == name) return 0;
    const char *d = t + 5;
    if (*d == '\0') return 0;
    for (; *d; d++)
        if (*d < '0' || *d > '9') return is_temp_name(t + 1);   // a later ".tmp." may be the suffix
    return 1;
}

// Removes the temp files of one folder; appends their names (below `rel`) to list.
static int remove_stale_in(const char *dir, const char *rel, int depth, char *list, size_t cap) {
    DIR *d = opendir(dir);
    if (d == NULL) return 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char path[4608], name[4608];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        snprintf(name, sizeof(name), "%s%s", rel, e->d_name);
        struct stat st;
        if (lstat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            if (depth > 0) {
                strcat(name, "/");
                removed += remove_stale_in(path, name, depth - 1, list, cap);
            }
        } else if (is_temp_name(e->d_name)) {
            if (remove(path) != 0) {
                fprintf(stderr, "warning: cannot remove stale temp file '%s': %s\n", path, strerror(errno));
                continue;
            }
            size_t len = strlen(list);
            if (len + strlen(name) + 3 < cap) snprintf(list + len, cap - len, "%s%s", len ? ", " : "", name);
            else if (len + 5 < cap && strcmp(list + len - 3, "...") != 0) snprintf(list + len, cap - len, ", ...");
            removed++;
        }
    }
    closedir(d);
    return removed;
}

int atomic_file_remove_stale(const char *dir) {
    char list[1024] = "";
    int removed = remove_stale_in(dir, "", 1, list, sizeof(list));
    if (removed > 0)
        printf("removed %d stale temp file%s of an interrupted run from '%s': %s\n", removed, removed == 1 ? "" : "s",
               dir, list);
    return removed;
}

uint32_t file_crc32(const char *path, long offset, long length, uint64_t *nbytes) {
    FILE *f = fopen_check(path, "rb");
    fseek_check(f, offset, SEEK_SET, path);
    uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
    unsigned char buf[1 << 16];
    uint64_t total = 0;
    for (;;) {
        size_t want = sizeof(buf);
        if (length >= 0 && (uint64_t)length - total < want) want = (size_t)((uint64_t)length - total);
        if (want == 0) break;
        size_t got = fread(buf, 1, want, f);
        if (got == 0) break;
        crc = (uint32_t)crc32(crc, buf, (uInt)got);
        total += got;
    }
    if (ferror(f)) die("read error on '%s': %s", path, strerror(errno));
    fclose(f);
    if (length >= 0 && total != (uint64_t)length)
        die("'%s' is truncated: %llu of %ld bytes from offset %ld", path, (unsigned long long)total, length, offset);
    if (nbytes) *nbytes = total;
    return crc;
}
