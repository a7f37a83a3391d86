// progress.c: elapsed time and ETA of the training loop (progress.h).
#include "progress.h"

#include <stdio.h>

#include "train_common.h"

void progress_begin(Progress *p, int first_step, int max_steps) {
    p->start = now_seconds();
    p->warm_end = 0.0;
    p->warm_done = 0;
    p->first_step = first_step;
    p->max_steps = max_steps;
}

const char *progress_duration(double s, char *buf, size_t len) {
    if (s < 0.0) s = 0.0;
    if (s < 59.95) {
        snprintf(buf, len, "%.1fs", s);
    } else if (s < 3599.5) {   // what rounds to 60m00s is 1h00m
        long r = (long)(s + 0.5);
        snprintf(buf, len, "%ldm%02lds", r / 60, r % 60);
    } else {
        long m = (long)(s / 60.0 + 0.5);
        snprintf(buf, len, "%ldh%02ldm", m / 60, m % 60);
    }
    return buf;
}

const char *progress_text(Progress *p, int step, char *buf, size_t len) {
    double now = now_seconds();
    int done = step + 1 - p->first_step, remaining = p->max_steps - (step + 1);
    double per_step;
    if (p->warm_done == 0 || done <= p->warm_done) {   // the first call of the run
        p->warm_end = now;
        p->warm_done = done;
        per_step = (now - p->start) / done;
    } else {
        per_step = (now - p->warm_end) / (done - p->warm_done);
    }
    char e[32], r[32];
    snprintf(buf, len, "elapsed %s | ETA %s", progress_duration(now - p->start, e, sizeof e),
             progress_duration(per_step * remaining, r, sizeof r));
    return buf;
}
