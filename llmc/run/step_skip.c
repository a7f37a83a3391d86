// step_skip.c: --nan-skip and -sl/-sg, and the memory a checkpoint carries for them.
#include "step_skip.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// --nan-skip's count over this process's run (one run per process): steps checked,
// skipped in all, and skipped in a row up to the last step checked; of that streak, the
// steps a resumed run's checkpoint carried in (skipped before the resume, not counted in
// checked or skipped).
static struct { int checked, skipped, in_a_row, in_a_row_before_resume; } nan_steps;

int nonfinite_step(const TrainConfig *cfg, int step, float loss, float norm, int rank) {
    nan_steps.checked++;
    if (isfinite(loss) && isfinite(norm)) {
        nan_steps.in_a_row = nan_steps.in_a_row_before_resume = 0;
        return 0;
    }
    nan_steps.skipped++;
    if (!cfg->nan_skip || ++nan_steps.in_a_row >= cfg->nan_skip_limit) {
        fflush(stdout);   // the step lines before it come first in a shared log
        if (rank == 0 && !cfg->nan_skip)
            fprintf(stderr, "error: step %d/%d: loss %f, gradient norm %f: not finite, so training stops here. Nothing "
                    "of this step was applied or saved (the last checkpoint is intact); --nan-skip skips such steps "
                    "instead\n", step + 1, cfg->max_steps, loss, norm);
        else if (rank == 0) {
            char carried[96] = "";
            if (nan_steps.in_a_row_before_resume > 0)
                snprintf(carried, sizeof carried, " (%d of them before the checkpoint this run resumed from)",
                         nan_steps.in_a_row_before_resume);
            fprintf(stderr, "error: step %d/%d: loss %f, gradient norm %f: not finite, %d such steps in a row%s "
                    "(--nan-skip-limit %d), so training stops here; %d of the %d steps of this run were skipped. "
                    "Nothing of them was applied (a checkpoint holds the weights from before them)\n", step + 1,
                    cfg->max_steps, loss, norm, nan_steps.in_a_row, carried, cfg->nan_skip_limit, nan_steps.skipped,
                    nan_steps.checked);
        }
        fflush(stderr);
        exit(EXIT_FAILURE);
    }
    printf("step %4d/%d | loss %f | norm %f | skipped (--nan-skip): not finite, the update is not applied\n", step + 1,
           cfg->max_steps, loss, norm);
    return 1;
}

void nonfinite_summary(const TrainConfig *cfg) {
    if (!cfg->nan_skip) return;
    printf("--nan-skip: %d of the %d steps of this run skipped (loss or gradient norm not finite; their updates were "
           "not applied)\n", nan_steps.skipped, nan_steps.checked);
}

// A value's z-score against the window that already holds it: NaN (no verdict) until the
// window is full.
static double outlier_add(OutlierWindow *w, double x) {
    if (w->count < OUTLIER_WINDOW) {
        w->buf[w->count++] = x;
        w->sum += x;
        w->sum_sq += x * x;
        return NAN;
    }
    double old = w->buf[w->next];
    w->buf[w->next] = x;
    w->next = (w->next + 1) % OUTLIER_WINDOW;
    w->sum += x - old;
    w->sum_sq += x * x - old * old;
    double mean = w->sum / OUTLIER_WINDOW, var = w->sum_sq / OUTLIER_WINDOW - mean * mean;
    return var > 0 ? (x - mean) / sqrt(var) : 0.0;
}

// One run per process, as nan_steps; the windows are a checkpoint's.
static struct { OutlierWindow loss, norm; int checked, skipped, last; } outliers;

int outlier_step(const TrainConfig *cfg, int step, float loss, float norm, int rank) {
    outliers.last = 0;
    if (!(cfg->skip_loss_z > 0 || cfg->skip_norm_z > 0) || !isfinite(loss) || !isfinite(norm)) return 0;
    outliers.checked++;
    double zl = outlier_add(&outliers.loss, loss), zg = outlier_add(&outliers.norm, norm);
    const char *why = NULL;
    double z = 0, limit = 0;
    if (cfg->skip_loss_z > 0 && isfinite(zl) && zl > cfg->skip_loss_z) why = "loss", z = zl, limit = cfg->skip_loss_z;
    else if (cfg->skip_norm_z > 0 && isfinite(zg) && zg > cfg->skip_norm_z) why = "norm", z = zg, limit = cfg->skip_norm_z;
    if (!why) return 0;
    outliers.skipped++;
    outliers.last = 1;
    if (rank == 0)
        printf("step %4d/%d | loss %f | norm %.4f | skipped (%s): %s z-score %.2f above %g, the update is not "
               "applied\n", step + 1, cfg->max_steps, loss, norm, why[0] == 'l' ? "-sl" : "-sg", why, z, limit);
    return 1;
}

int outlier_skipped_last(void) { return outliers.last; }

void outlier_summary(const TrainConfig *cfg, int rank) {
    if (rank != 0 || !(cfg->skip_loss_z > 0 || cfg->skip_norm_z > 0)) return;
    printf("-sl/-sg: %d of the %d updates of this run skipped as outliers (loss z-score above %g, gradient norm "
           "z-score above %g; 0: off)\n", outliers.skipped, outliers.checked, cfg->skip_loss_z, cfg->skip_norm_z);
}


void step_skip_get(StepSkipState *s) {
    memset(s, 0, sizeof(*s));
    s->loss = outliers.loss;
    s->norm = outliers.norm;
    s->nan_in_a_row = nan_steps.in_a_row;
}

// Whether w is a window outlier_add can leave behind: count values, and a replacement
// slot that moves only once the window is full.
static const char *window_invalid(const OutlierWindow *w) {
    if (w->count < 0 || w->count > OUTLIER_WINDOW) return "count";
    if (w->next < 0 || w->next >= OUTLIER_WINDOW || (w->count < OUTLIER_WINDOW && w->next != 0)) return "next slot";
    if (!isfinite(w->sum) || !isfinite(w->sum_sq)) return "running sums";
    for (int i = 0; i < w->count; i++)
        if (!isfinite(w->buf[i])) return "values";
    return NULL;
}

int step_skip_set(const StepSkipState *s, char *why, size_t len) {
    const OutlierWindow *w[2] = {&s->loss, &s->norm};
    const char *names[2] = {"-sl loss window", "-sg norm window"};
    for (int i = 0; i < 2; i++) {
        const char *bad = window_invalid(w[i]);
        if (bad) {
            snprintf(why, len, "its %s holds %s no run leaves (count %d, next slot %d)", names[i], bad, w[i]->count,
                     w[i]->next);
            return -1;
        }
    }
    if (s->nan_in_a_row < 0) {
        snprintf(why, len, "its --nan-skip streak is %d", s->nan_in_a_row);
        return -1;
    }
    outliers.loss = s->loss;
    outliers.norm = s->norm;
    nan_steps.in_a_row = nan_steps.in_a_row_before_resume = s->nan_in_a_row;
    return 0;
}
