// run_lock.h: one run per output folder, and what every trainer process sets up before
// it writes a byte.
//
// run_lock_take(out_dir, rank), called by every process of a trainer at start:
//  - every process ignores SIGXFSZ: a write past the file-size limit (ulimit -f) then fails
//    with EFBIG, and its writer stops the run naming the file (as on a full disk), where
//    the kernel would kill the process without a word;
//  - rank 0 (the one process of an unsharded run) creates out_dir and takes an exclusive
//    flock on OUT/.lock, held until the process exits however it exits (the kernel drops
//    it, kill -9 included), and writes "PID HOST" into it (emptied again by exit() or
//    die(); a kill or the plugin's MPI_Abort leaves it). When another process holds it,
//    the run stops at once (after up to a second's grace for a holder on its way out)
//    naming that process's PID and host: two runs writing one folder tear its log and
//    checkpoints. The file stays (removing it would let a third run lock another file);
//  - then rank 0 removes the temp files a dead run left there: atomic_file_remove_stale
//    with the names of the files a run writes (run_lock.c lists them);
//  - and at exit rank 0 checks that its standard output was all written (a full disk under
//    `> run.txt`): if not, it says so on stderr and the exit status is 1.
// Under ZeRO only rank 0 locks: the folder is the run's, the other ranks write only their
// own rank files in zero_N/ folders rank 0 creates, and they wait for rank 0 in the
// plugin's start-up collectives; a rank 0 refused exits, and its launcher (mpirun) stops
// the rest, or they time out there.
// A file system without locks (some network mounts) gets a warning and no lock.
#ifndef LLMC_RUN_LOCK_H
#define LLMC_RUN_LOCK_H

#ifdef __cplusplus
extern "C" {
#endif

void run_lock_take(const char *out_dir, int rank);

#ifdef __cplusplus
}
#endif
#endif
