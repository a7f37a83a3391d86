// test_threads.c: OpenMP threads per rank (llmc/run/threads.c): cores / ranks on this node
// by default, from Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE first, else the world's own count
// (MPI_COMM_TYPE_SHARED split, LOCAL_WORLD_SIZE); at least 1; capped by the CPUs the process
// may run on; --threads wins, then OMP_NUM_THREADS.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "../../../llmc/run/threads.h"

static char why[256];

static void test_cores_divided_by_local_ranks(void **state) {
    (void)state;
    // mpirun -np 4 on 2 cores: 1 each, not 2 (8 threads on 2 cores)
    assert_int_equal(threads_choose(0, NULL, "4", 4, "MPI_COMM_TYPE_SHARED", 2, 2, why, sizeof(why)), 1);
    assert_non_null(strstr(why, "2 cores / 4 ranks on this node, from OMPI_COMM_WORLD_LOCAL_SIZE"));
    assert_int_equal(threads_choose(0, NULL, "2", 2, "MPI_COMM_TYPE_SHARED", 2, 2, why, sizeof(why)), 1);
    assert_int_equal(threads_choose(0, NULL, "4", 4, "x", 16, 16, why, sizeof(why)), 4);
    assert_int_equal(threads_choose(0, NULL, "3", 3, "x", 16, 16, why, sizeof(why)), 5);
    assert_non_null(strstr(why, "5 per rank"));
    // one rank: every core
    assert_int_equal(threads_choose(0, NULL, NULL, 1, "x", 16, 16, why, sizeof(why)), 16);
    assert_non_null(strstr(why, "one rank on this node"));
}

static void test_local_ranks_sources(void **state) {
    (void)state;
    // Open MPI's variable wins over the world's count (here a logical count of 1)
    assert_int_equal(threads_choose(0, NULL, "8", 1, "MPI_COMM_TYPE_SHARED", 16, 16, why, sizeof(why)), 2);
    // unset, empty or not a number: the world's count and what told it
    assert_int_equal(threads_choose(0, NULL, NULL, 2, "MPI_COMM_TYPE_SHARED", 16, 16, why, sizeof(why)), 8);
    assert_non_null(strstr(why, "from MPI_COMM_TYPE_SHARED"));
    assert_int_equal(threads_choose(0, NULL, "", 4, "LOCAL_WORLD_SIZE", 16, 16, why, sizeof(why)), 4);
    assert_non_null(strstr(why, "from LOCAL_WORLD_SIZE"));
    assert_int_equal(threads_choose(0, NULL, "two", 4, "LOCAL_WORLD_SIZE", 16, 16, why, sizeof(why)), 4);
}

static void test_explicit_settings_win(void **state) {
    (void)state;
    // --threads first, even with OMP_NUM_THREADS set
    assert_int_equal(threads_choose(3, "5", "4", 4, "x", 2, 2, why, sizeof(why)), 3);
    assert_non_null(strstr(why, "--threads"));
    // OMP_NUM_THREADS: left to OpenMP (0 = set nothing), and said
    assert_int_equal(threads_choose(0, "5", "4", 4, "x", 2, 2, why, sizeof(why)), 0);
    assert_non_null(strstr(why, "OMP_NUM_THREADS=5"));
}

static void test_capped_by_allowed_cpus(void **state) {
    (void)state;
    // bound to one core by the launcher: 1, not 8
    assert_int_equal(threads_choose(0, NULL, "2", 2, "x", 16, 1, why, sizeof(why)), 1);
    assert_non_null(strstr(why, "capped at the 1 CPU(s)"));
    // bound to a socket of 8: the division already fits
    assert_int_equal(threads_choose(0, NULL, "2", 2, "x", 16, 8, why, sizeof(why)), 8);
    assert_null(strstr(why, "capped"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cores_divided_by_local_ranks),
        cmocka_unit_test(test_local_ranks_sources),
        cmocka_unit_test(test_explicit_settings_win),
        cmocka_unit_test(test_capped_by_allowed_cpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
