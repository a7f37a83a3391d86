// atomic_file.c: temp file + fsync + rename, with a running CRC-32.
#define _POSIX_C_SOURCE 200809L
#include "atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <string.h>
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
