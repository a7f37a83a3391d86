/*
zfile.h: the few file helpers zero/ needs for checkpoints and reports (zero/ does not use
llmc/'s): atomic whole-file replacement with a running CRC-32, CRC of an existing file (a read-back),
mkdir -p, and little-endian field encoding. Errors are returned (0 / -1) with a message in
the caller's buffer, never by exiting: a failed save must not kill a training run.

Atomic write: bytes go to "<path>.tmp.<pid>"; commit flushes, fsyncs, renames over <path>
and fsyncs the folder, so a reader sees the old file or the whole new one, never a torn one.
The temp file is created with O_CREAT|O_EXCL|O_NOFOLLOW: a file or link already under its
name is an error, never written through. zfile_open ignores SIGXFSZ, so a write past
ulimit -f returns EFBIG (named) instead of killing the process. Written bytes leave the
page cache as the file grows (two 2 MiB windows stay cached at most) and zfile_crc_of drops
what it reads, so a rank file of many GB does not fill a cgroup's memory with cache.
*/
#ifndef ZERO_ZFILE_H
#define ZERO_ZFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    FILE *f;
    char path[4096];
    char tmp[4096 + 32];
    uint32_t crc;       // CRC-32 (zlib) of the bytes written so far
    uint64_t bytes;
    uint64_t dropped;   // the first `dropped` bytes are on disk and out of the page cache
    char err[512];      // why the last call failed
} ZFile;

int zfile_open(ZFile *zf, const char *path);
int zfile_write(ZFile *zf, const void *data, size_t n);
// fsync, read the temp file back (zfile_verify: the bytes and CRC written), then rename it
// onto the path: what takes the name is what was written. On failure the temp file is
// removed and the path keeps what it had.
int zfile_commit(ZFile *zf);
void zfile_abort(ZFile *zf);   // drop the temp file (safe after a failed call)

// CRC-32 continuing from crc (start with 0), over n bytes.
uint32_t zfile_crc32(uint32_t crc, const void *data, size_t n);
// CRC-32 and size of the first `limit` bytes of a file (UINT64_MAX: all of it).
int zfile_crc_of(const char *path, uint64_t limit, uint32_t *crc, uint64_t *bytes, char *err, size_t errlen);
// Reads path back: 0 when it holds `bytes` bytes with CRC-32 crc, else -1 saying what it holds.
int zfile_verify(const char *path, uint32_t crc, uint64_t bytes, char *err, size_t errlen);
// Writes a whole file atomically, read back before it replaces the old one (zfile_commit);
// *crc (if not NULL) receives its CRC-32.
int zfile_write_all(const char *path, const void *data, size_t n, uint32_t *crc, char *err, size_t errlen);
// Reads a whole small file of at most max bytes (NUL-terminated copy in *out, free() it).
// Only a regular file is read: a symbolic link at path is not followed, and a FIFO, a device
// or a folder is refused at once (never waited on, never read without end); so is a file
// past max bytes. -1, naming the file and what it is or its size, otherwise.
int zfile_read_all(const char *path, size_t max, char **out, size_t *n, char *err, size_t errlen);
// mkdir -p; existing folders are fine. Each folder it creates is synced into its parent
// (zfile_sync_folder), so the new path survives a crash; a failed sync is a failure.
int zfile_mkdirs(const char *path, char *err, size_t errlen);
// Syncs a folder, by descriptor or by name, so that the names created, renamed or removed
// in it survive a crash. 0, or the errno of a failed sync (then the disk failed). A file
// system that cannot sync folders (EINVAL, ENOTSUP), or by name a folder this process
// cannot open, leaves it to the file system: 0.
int zfile_sync_folder_fd(int fd);
int zfile_sync_folder(const char *folder);
// Reads exactly n bytes at offset; -1 when it cannot, and then zfile_pread_why() says why
// (errno's text, or that the file ended first).
int zfile_pread(int fd, void *buf, size_t n, uint64_t offset);
const char *zfile_pread_why(void);

// Little-endian fields, so checkpoint headers mean the same on every host.
static inline void zle_put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline void zle_put64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint32_t zle_get32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static inline uint64_t zle_get64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

#endif
