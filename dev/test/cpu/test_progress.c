// test_progress.c: the elapsed time and ETA of the step lines (llmc/run/progress.c) and the
// launcher detection that keeps the unsharded trainers to one rank (llmc/run/launch_env.c).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "../../../llmc/run/launch_env.h"
#include "../../../llmc/run/progress.h"
#include "../../../llmc/run/train_common.h"

static void test_durations(void **state) {
    (void)state;
    static const struct { double s; const char *text; } cases[] = {
        {0.0, "0.0s"}, {-3.0, "0.0s"}, {12.34, "12.3s"}, {59.94, "59.9s"}, {59.96, "1m00s"},
        {65.0, "1m05s"}, {3599.4, "59m59s"}, {3599.6, "1h00m"}, {3600.0, "1h00m"}, {7625.0, "2h07m"}, {90061.0, "25h01m"}};
    char buf[32];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_string_equal(progress_duration(cases[i].s, buf, sizeof(buf)), cases[i].text);
}

// Reads "elapsed E | ETA R" back, both in seconds (the test's durations stay under 60 s).
static void parse(const char *text, double *elapsed, double *eta) {
    assert_int_equal(sscanf(text, "elapsed %lfs | ETA %lfs", elapsed, eta), 2);
}

// Run resumed at step 10 of 30. Its first step took 1 s (it is the only measure then);
// after it, 3 more steps in 3 s make 1 s a step for the 16 left. The machine's own time
// between the calls (a busy one's too) adds to both: the checks read it from the printed
// elapsed time, to within the 0.1 s the text rounds to.
static void test_eta_leaves_out_the_first_step(void **state) {
    (void)state;
    Progress p;
    progress_begin(&p, 10, 30);
    p.start = now_seconds() - 1.0;
    char buf[96];
    double elapsed, eta, first;
    parse(progress_text(&p, 10, buf, sizeof(buf)), &first, &eta);
    assert_true(first >= 1.0);
    assert_true(fabs(eta - 19 * first) <= 19 * 0.05 + 0.05);   // the first step's time, 19 times
    p.start -= 3.0;    // 3 s later...
    p.warm_end -= 3.0;
    parse(progress_text(&p, 13, buf, sizeof(buf)), &elapsed, &eta);
    double since_first = elapsed - first;   // 3 s and the machine's time, within 0.1 s
    assert_true(since_first >= 2.9);
    assert_true(fabs(eta - 16 * since_first / 3) <= 16 * 0.1 / 3 + 0.05);   // those 3 steps' rate, 16 times
    parse(progress_text(&p, 29, buf, sizeof(buf)), &elapsed, &eta);
    assert_true(eta == 0.0);
}

static const char *launcher_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS", "WORLD_SIZE",
                                      "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "RANK",
                                      "SLURM_NTASKS"};

static int ranks_with(const char *name, const char *value, char *which, size_t len) {
    for (size_t i = 0; i < sizeof(launcher_vars) / sizeof(launcher_vars[0]); i++) unsetenv(launcher_vars[i]);
    if (name) setenv(name, value, 1);
    return launch_env_ranks(which, len);
}

static void test_launchers(void **state) {
    (void)state;
    char which[96];
    assert_int_equal(ranks_with(NULL, NULL, which, sizeof(which)), 1);
    assert_int_equal(ranks_with("OMPI_COMM_WORLD_SIZE", "2", which, sizeof(which)), 2);
    assert_string_equal(which, "OMPI_COMM_WORLD_SIZE=2");
    assert_int_equal(ranks_with("OMPI_COMM_WORLD_SIZE", "1", which, sizeof(which)), 1);   // mpirun -np 1
    assert_int_equal(ranks_with("PMI_SIZE", "8", which, sizeof(which)), 8);
    assert_int_equal(ranks_with("SLURM_STEP_NUM_TASKS", "4", which, sizeof(which)), 4);
    // a batch script of a 4-task job starts one process: not a launch of 4
    assert_int_equal(ranks_with("SLURM_NTASKS", "4", which, sizeof(which)), 1);
    assert_int_equal(ranks_with("WORLD_SIZE", "3", which, sizeof(which)), 3);
    assert_int_equal(ranks_with("WORLD_SIZE", "three", which, sizeof(which)), 1);
    // PMIx names the rank only: above 0 there are several, how many is unknown
    assert_int_equal(ranks_with("PMIX_RANK", "1", which, sizeof(which)), 0);
    assert_string_equal(which, "PMIX_RANK=1");
    assert_int_equal(ranks_with("PMIX_RANK", "0", which, sizeof(which)), 1);
    ranks_with(NULL, NULL, which, sizeof(which));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_eta_leaves_out_the_first_step),
        cmocka_unit_test(test_launchers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
