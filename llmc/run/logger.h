// logger.h: llm.c-style log in OUT/main.log: "s:STEP trl:LOSS" (train) and
// "s:STEP tel:LOSS" (validation), one line each, flushed as written. A line that cannot be
// written or flushed (disk full, ulimit -f) stops the run with a message naming the log and
// a non-zero exit: a run whose record is lost is no successful run.
#ifndef LLMC_LOGGER_H
#define LLMC_LOGGER_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    FILE *f;
    char path[4096];
} Logger;

// Creates out_dir if needed. On resume (resume_step >= 0) lines of steps >= resume_step
// are dropped (that run redoes them), so the log after a resumed run reads as if it had never stopped.
void logger_open(Logger *lg, const char *out_dir, int resume_step);
void logger_train(Logger *lg, int step, float loss, float lr, float grad_norm);
void logger_val(Logger *lg, int step, float loss);
void logger_close(Logger *lg);

// mkdir -p, syncing each folder it creates into its parent (a new -o folder survives a
// crash); exits with a message naming the folder on failure.
void make_dirs(const char *path);

#ifdef __cplusplus
}
#endif
#endif
