// logger.c: main.log writer.
#include "logger.h"

#include <errno.h>
#include <libgen.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>

#include "../atomic_file.h"
#include "../utils.h"

void make_dirs(const char *path) {
    char buf[4096];
    if (path[0] == '\0') die("cannot create a folder with an empty name");
    if (strlen(path) >= sizeof(buf)) die("path too long: '%s'", path);
    strcpy(buf, path);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(buf, 0755) == 0) {
                // the new folder is an entry of its parent: synced there, so that a crash
                // does not take it away with everything later written and synced inside it
                char parent[4096];
                snprintf(parent, sizeof(parent), "%s", buf);
                int e = atomic_file_sync_folder(dirname(parent));
                if (e != 0) die("created folder '%s', but syncing the folder holding it to disk failed: %s", buf, strerror(e));
            } else if (errno != EEXIST) {
                die("cannot create folder '%s': %s", buf, strerror(errno));
            }
            *p = saved;
            if (saved == '\0') break;
        }
    }
}

// Rewrites the log keeping only lines of steps before first_dropped.
static void truncate_from(const char *path, int first_dropped) {
    FILE *in = fopen(path, "r");
    if (in == NULL) return;
    AtomicFile af;
    atomic_file_open(&af, path);
    char line[1024];
    while (fgets(line, sizeof(line), in)) {
        int step;
        if (sscanf(line, "s:%d", &step) == 1 && step >= first_dropped) continue;
        atomic_file_write(&af, line, strlen(line));
    }
    if (ferror(in)) die("read error on '%s': %s", path, strerror(errno));
    fclose(in);
    atomic_file_commit(&af);
}

void logger_open(Logger *lg, const char *out_dir, int resume_step) {
    make_dirs(out_dir);
    snprintf(lg->path, sizeof(lg->path), "%s/main.log", out_dir);
    if (resume_step >= 0) truncate_from(lg->path, resume_step);
    lg->f = fopen(lg->path, resume_step >= 0 ? "a" : "w");
    if (lg->f == NULL) die("cannot open log '%s': %s", lg->path, strerror(errno));
}

// The log is the run's record: a line that cannot be written (disk full, ulimit -f) stops
// the run, naming the file, rather than let it go on and lose every line after it.
static void log_line(Logger *lg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_line(Logger *lg, const char *fmt, ...) {
    if (!lg->f) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vfprintf(lg->f, fmt, ap);
    va_end(ap);
    if (n < 0 || fflush(lg->f) != 0)
        die("cannot write the log '%s': %s; stopping, as the run's record would be lost", lg->path, strerror(errno));
}

void logger_train(Logger *lg, int step, float loss, float lr, float grad_norm) {
    log_line(lg, "s:%d trl:%f lr:%e norm:%f\n", step, loss, lr, grad_norm);
}

void logger_val(Logger *lg, int step, float loss) { log_line(lg, "s:%d tel:%f\n", step, loss); }

void logger_close(Logger *lg) {
    FILE *f = lg->f;
    lg->f = NULL;
    if (f && fclose(f) != 0) die("cannot close the log '%s': %s", lg->path, strerror(errno));
}
