// atomic_file.h: write a file so that readers see either the old or the complete new
// contents, never a torn one: write "<path>.tmp.<pid>", fsync, rename, fsync the folder.
// A running CRC-32 of everything written is kept for manifests and verification.
#ifndef LLMC_ATOMIC_FILE_H
#define LLMC_ATOMIC_FILE_H

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    FILE *f;
    char path[4096];
    char tmp_path[4096 + 32];
    uint32_t crc;      // CRC-32 (zlib) of the bytes written so far
    uint64_t bytes;    // bytes written so far
} AtomicFile;

void atomic_file_open(AtomicFile *af, const char *path);
void atomic_file_write(AtomicFile *af, const void *data, size_t n);
// Flushes, fsyncs, renames over the final path and fsyncs the folder.
void atomic_file_commit(AtomicFile *af);
// Removes the temp file (used on error paths that can recover).
void atomic_file_abort(AtomicFile *af);

// Removes "<name>.tmp.<digits>" files, the temp files of a writer (this one, or zero/'s,
// which names them the same way) that died before its commit, from dir and the folders
// directly inside it; prints one line naming what it removed. Only for an output folder
// no other process is writing to (call it at start-up, before anything is written).
// Returns how many it removed.
int atomic_file_remove_stale(const char *dir);

// CRC-32 of the bytes [offset, offset + length) of a file; length < 0 means to the end.
// *nbytes (if not NULL) receives the count read. Exits naming the file on error.
uint32_t file_crc32(const char *path, long offset, long length, uint64_t *nbytes);

#ifdef __cplusplus
}
#endif
#endif
