// logger.c: main.log writer.
#include "logger.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "../atomic_file.h"
#include "../utils.h"

void make_dirs(const char *path) {
    char buf[4096];
    if (strlen(path) >= sizeof(buf)) die("path too long: '%s'", path);
    strcpy(buf, path);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                die("cannot create folder '%s': %s", buf, strerror(errno));
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

void logger_train(Logger *lg, int step, float loss, float lr, float grad_norm) {
    if (!lg->f) return;
    fprintf(lg->f, "s:%d trl:%f lr:%e norm:%f\n", step, loss, lr, grad_norm);
    fflush(lg->f);
}

void logger_val(Logger *lg, int step, float loss) {
    if (!lg->f) return;
    fprintf(lg->f, "s:%d tel:%f\n", step, loss);
    fflush(lg->f);
}

void logger_close(Logger *lg) {
    if (lg->f) fclose(lg->f);
    lg->f = NULL;
}
