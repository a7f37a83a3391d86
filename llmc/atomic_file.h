// atomic_file.h: write a file so that readers see either the old or the complete new
// contents, never a torn one: write "<path>.tmp.<pid>", fsync, rename, fsync the folder.
// A running CRC-32 of everything written is kept for manifests and verification.
// Written bytes leave the page cache as the file grows (at most two 2 MiB windows stay
// cached), and the CRC read-back drops what it read: a model file or checkpoint of many GB
// does not fill the memory a cgroup charges to the run with cache.
// The temp file is created exclusively without following links (O_CREAT|O_EXCL|O_NOFOLLOW):
// whatever is already there under its name stops the write, naming it. atomic_file_open
// ignores SIGXFSZ, so a write past ulimit -f fails with a message instead of a silent kill.
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
    uint64_t dropped;  // the first `dropped` bytes are on disk and out of the page cache
} AtomicFile;

void atomic_file_open(AtomicFile *af, const char *path);
void atomic_file_write(AtomicFile *af, const void *data, size_t n);
// Flushes, fsyncs, renames over the final path and fsyncs the folder.
void atomic_file_commit(AtomicFile *af);
// The same, reading the whole temp file back after the fsync first: its size and CRC must
// be what was written, or it is removed and the run exits naming `what` ("checkpoint") and
// the path. Nothing unverified ever takes the final name.
void atomic_file_commit_verified(AtomicFile *af, const char *what);
// Removes the temp file (used on error paths that can recover).
void atomic_file_abort(AtomicFile *af);
// Renames a complete file (one a commit wrote) to its final name and fsyncs the folder.
void atomic_file_rename(const char *from, const char *to);
// Syncs a folder, so that the names created, renamed or removed in it survive a crash.
// 0, or the errno of a failed sync (then the disk failed); a folder this process cannot
// open, or a file system that cannot sync folders (EINVAL, ENOTSUP), leaves it to the file
// system: 0.
int atomic_file_sync_folder(const char *folder);

// Removes the temp files "<name>.tmp.<pid>" that a writer (this one, or zero/'s, which
// names them the same way) left when it died before its commit: in dir, and in the folders
// directly inside it that `names` names. names: NULL-terminated fnmatch patterns of the
// files a run writes, "FILE" in dir or "FOLDER/FILE" one level down ("ckpt_[0-9]*.bin",
// "zero_[0-9]*/rank_[0-9]*.bin"). A file is removed only when all of these hold, and
// otherwise kept:
//   - its <name> matches names and <pid> is a PID as getpid() prints it (a user's
//     "notes.tmp.123" or "x.tmp.old" is no temp file of ours);
//   - it is a plain file reached without following a symlink (a writer makes no symlinks;
//     a folder that is a symlink is not entered);
//   - the process <pid> is gone: kill(pid, 0) fails with ESRCH, or it has exited and is not
//     yet reaped (a zombie: state Z in /proc/<pid>/stat) (a running writer, such as a
//     run whose output folder lies inside dir, keeps its file; so does a file whose dead
//     writer's PID a live process has taken since). PIDs are this host's: a run on another
//     host sharing the folder is kept out by the folder's lock, not by this;
//   - it was last written since this machine booted (the PID in an older file's name
//     says nothing about its writer, so such a file is left for a person to judge).
// Prints one line naming what it removed and one naming the temp files of those names it
// kept, and why. Call it at start-up, holding the folder (run_lock.h). Returns how many
// it removed.
int atomic_file_remove_stale(const char *dir, const char *const *names);

// CRC-32 of the bytes [offset, offset + length) of a file; length < 0 means to the end.
// *nbytes (if not NULL) receives the count read. Exits naming the file on error.
uint32_t file_crc32(const char *path, long offset, long length, uint64_t *nbytes);

#ifdef __cplusplus
}
#endif
#endif
