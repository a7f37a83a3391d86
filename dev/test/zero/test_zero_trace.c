// test_zero_trace.c: which steps the trace ring writes (zero/trace.c, included directly so
// the test builds with the plain test rule): whole steps only, the last --trace-steps of
// them, a step the full ring lost part of left out even when a span recorded late carries
// an older step, and a line when no whole step is left.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <unistd.h>

#include "../../../zero/trace.c"

static char g_dir[] = "/tmp/test_zero_trace.XXXXXX";

// Writes the trace and returns its otherData's first_step and last_step, and the number of
// spans of each step in 0..max_step into per_step (when non-NULL).
static void written(int *first, int *last, int *per_step, int max_step) {
    assert_int_equal(zero_trace_write(), 0);
    char path[4200];
    snprintf(path, sizeof path, "%s/t.rank00000.json", g_dir);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = '\0';
    fclose(f);
    cJSON *d = cJSON_Parse(text);
    assert_non_null(d);
    cJSON *o = cJSON_GetObjectItem(d, "otherData");
    *first = cJSON_GetObjectItem(o, "first_step")->valueint;
    *last = cJSON_GetObjectItem(o, "last_step")->valueint;
    if (per_step) {
        memset(per_step, 0, (size_t)(max_step + 1) * sizeof(int));
        cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(d, "traceEvents")) {
            cJSON *ph = cJSON_GetObjectItem(e, "ph"), *args = cJSON_GetObjectItem(e, "args");
            if (!ph || strcmp(ph->valuestring, "X") != 0) continue;
            int s = cJSON_GetObjectItem(args, "step")->valueint;
            assert_true(s >= 0 && s <= max_step);
            per_step[s]++;
        }
    }
    cJSON_Delete(d);
    free(text);
}

static void spans(int n) {
    for (int i = 0; i < n; i++) zero_trace_span("op", "", 1, 2);
}

static void start(int keep_steps) {
    char path[4200];
    snprintf(path, sizeof path, "%s/t", g_dir);
    assert_int_equal(zero_trace_start(path, 0, 1, keep_steps), 0);
}

// The ring keeps the last keep_steps steps, each whole.
static void test_last_steps(void **state) {
    (void)state;
    start(2);
    for (int s = 0; s < 5; s++) {
        zero_trace_step(s);
        spans(10);
    }
    int first, last, per[5];
    written(&first, &last, per, 4);
    assert_int_equal(first, 3);
    assert_int_equal(last, 4);
    assert_int_equal(per[3], 10);
    assert_int_equal(per[4], 10);
    assert_int_equal(per[2], 0);
    zero_trace_stop();
}

// Step 1 loses events to the wrap after a span of step 0 was recorded late (a GPU stream's,
// timed after the fact): step 1 is not written as if whole.
static void test_wrap_with_a_late_span(void **state) {
    (void)state;
    start(0);
    zero_trace_step(0);
    spans(40000);
    zero_trace_step(1);
    spans(5000);
    int track = zero_trace_track("gpu");
    zero_trace_span_on(track, 0, "late", "", 1, 2);
    spans(10000);
    zero_trace_step(2);
    // the ring then holds the late span, step 1's last 10000 and these: its oldest event is
    // of step 0, but step 1's first 5000 are gone
    spans(ZERO_TRACE_EVENTS - 10001);
    int first, last, per[3];
    written(&first, &last, per, 2);
    assert_int_equal(last, 2);
    assert_int_equal(first, 2);   // step 1 lost its first events
    assert_int_equal(per[1], 0);
    assert_int_equal(per[0], 0);
    zero_trace_stop();
}

// A single step larger than the ring: nothing whole to write, and a line says so.
static void test_step_larger_than_the_ring(void **state) {
    (void)state;
    start(0);
    zero_trace_step(0);
    spans(10);
    zero_trace_step(1);
    spans(ZERO_TRACE_EVENTS + 10);
    int first, last;
    char path[4200], said[512] = "";
    snprintf(path, sizeof path, "%s/stderr.txt", g_dir);
    fflush(stderr);
    int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);   // the line goes to stderr
    assert_true(saved >= 0 && fd >= 0 && dup2(fd, 2) == 2);
    written(&first, &last, NULL, 1);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(said, 1, sizeof said - 1, f);
    said[n] = '\0';
    fclose(f);
    assert_true(first > last);
    if (!strstr(said, "holds no whole step: step 1 alone took more than the ring's"))
        fail_msg("no line says the trace holds no whole step; stderr: '%s'", said);
    zero_trace_stop();
}

// The start-up check of the file's path is rank 0's (the trainers make the output folder
// there); another rank starts whatever errno an earlier call left (here EEXIST, which the
// check reads as "an earlier run's temp file"), and a missing folder is refused on rank 0.
static void test_start_checks_the_path_on_rank_0(void **state) {
    (void)state;
    char path[4200];
    snprintf(path, sizeof path, "%s/not_yet/t", g_dir);
    errno = EEXIST;
    assert_int_equal(zero_trace_start(path, 1, 2, 2), 0);
    zero_trace_stop();
    errno = EEXIST;
    assert_int_equal(zero_trace_start(path, 0, 2, 2), -1);
}

int main(void) {
    if (!mkdtemp(g_dir)) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_checks_the_path_on_rank_0),
        cmocka_unit_test(test_last_steps),
        cmocka_unit_test(test_wrap_with_a_late_span),
        cmocka_unit_test(test_step_larger_than_the_ring),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) return 1;
    return rc;
}
