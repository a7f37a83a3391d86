// run_lock.c: one run per output folder (run_lock.h).
#include "run_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "../atomic_file.h"
#include "../utils.h"
#include "logger.h"

// The files a run writes in its output folder, so the only temp files start-up removes:
// llmc/run/'s logger.c, run_info.c, checkpoint.c and memory_table.c, gpt2_zero.c's
// zero_report.json, zero/'s sharded checkpoints (zero/io/zckpt.c, zero/checkpoint.c) and
// the model file zero_to_model writes there by default.
static const char *const RUN_FILES[] = {
    "main.log", "run.json", "latest", "ckpt_[0-9]*.bin", "model_[0-9]*.bin", "model_final.bin",
    "memory_report.json", "zero_report.json", "latest_zero", "zero_to_model_[0-9]*.bin",
    "zero_[0-9]*/rank_[0-9]*.bin", "zero_[0-9]*/manifest.json", "zero_[0-9]*/extra.bin",
    NULL};

static int lock_fd = -1;   // open for the life of the process: its lock goes when it does

// At exit (a return from main, exit() or die()): the PID comes out of the lock file; one left
// there names a run that was killed or aborted.
static void clear_pid(void) {
    if (lock_fd >= 0 && ftruncate(lock_fd, 0) != 0) { /* nothing left to do about it */ }
}

// "process PID on HOST" from what the holder wrote into the lock file.
static void describe_holder(int fd, char *out, size_t cap) {
    char text[320] = "";
    ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    long pid = 0;
    char host[256] = "";
    if (sscanf(text, "%ld %255s", &pid, host) >= 1 && pid > 0)
        snprintf(out, cap, "process %ld%s%s", pid, host[0] ? " on " : "", host);
    else
        snprintf(out, cap, "a process that has not written its PID yet");
}

// At exit: the progress lines, memory tables and messages on stdout were all written (a
// full disk under `> run.txt` loses them as surely as main.log's lines).
static void check_stdout(void) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return;
    int e = errno;   // 0 when the failed write was an earlier line's
    char target[4096] = "?";
    ssize_t n = readlink("/proc/self/fd/1", target, sizeof(target) - 1);
    target[n > 0 ? n : 1] = '\0';
    fprintf(stderr, "error: writing the standard output ('%s') failed%s%s: this run's printed record is incomplete\n",
            target, e ? ": " : "", e ? strerror(e) : "");
    _exit(EXIT_FAILURE);
}

void run_lock_take(const char *out_dir, int rank) {
    signal(SIGXFSZ, SIG_IGN);
    if (rank != 0) return;   // its stdout is /dev/null
    atexit(check_stdout);
    make_dirs(out_dir);
    char path[4096];
    if ((size_t)snprintf(path, sizeof(path), "%s/.lock", out_dir) >= sizeof(path)) die("path too long: '%s'", out_dir);
    // never through a symbolic link planted at .lock: its target would be truncated below
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ELOOP)
        die("the output folder's lock file '%s' is a symbolic link, not this project's: nothing is written through "
            "it; remove it", path);
    if (fd < 0) die("cannot open the output folder's lock file '%s': %s", path, strerror(errno));
    int rc;
    for (int tries = 0; (rc = flock(fd, LOCK_EX | LOCK_NB)) != 0 && errno == EWOULDBLOCK && tries < 20; tries++) {
        struct timespec pause = {0, 50 * 1000 * 1000};   // a holder that is exiting (killed) lets go soon
        nanosleep(&pause, NULL);
    }
    if (rc != 0 && errno == EWOULDBLOCK) {
        char holder[400];
        describe_holder(fd, holder, sizeof(holder));
        die("output folder '%s' is in use by another run: %s holds '%s'; wait for it to end or choose another -o",
            out_dir, holder, path);
    }
    if (rc != 0) {
        fprintf(stderr, "warning: cannot lock '%s' (%s): nothing stops another run from writing into '%s' at the "
                "same time\n", path, strerror(errno), out_dir);
        close(fd);
    } else {
        char host[256] = "";
        if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
        char text[320];
        int len = snprintf(text, sizeof(text), "%ld %s\n", (long)getpid(), host[0] ? host : "?");
        // over what a killed holder left, then cut to this line
        ssize_t put = pwrite(fd, text, (size_t)len, 0);
        if (put != len || ftruncate(fd, len) != 0)
            die("cannot write '%s': %s", path, put >= 0 && put < len ? "short write" : strerror(errno));
        lock_fd = fd;
        atexit(clear_pid);
    }
    atomic_file_remove_stale(out_dir, RUN_FILES);
}
