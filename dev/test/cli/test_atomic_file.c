// test_atomic_file.c: llmc/atomic_file.c where the trainers' runs cannot easily reach it:
// a write error at the write-behind flush (stdio drops the bytes it could not write, so a
// later commit would give a short file without a word), and start-up cleanup of a temp file
// whose writer has exited but is not yet reaped (a zombie writes nothing more).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "../../../llmc/atomic_file.h"
#include "../common/test_util.h"

static char g_dir[64];

static void path_in(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", g_dir, name); }

static int exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

// Writes 4 MiB - 5 bytes (4091 of them left in stdio's buffer), then takes away the room to
// grow (a full disk, here ulimit -f at what is on disk), writes the 5 bytes that cross the
// write-behind window (its flush fails), gives the room back and writes on: the writer must
// stop at the failed flush, not commit a file with 4096 bytes missing.
static void write_through_a_failed_flush(void *arg) {
    (void)arg;
    char path[128];
    path_in(path, sizeof(path), "data.bin");
    const size_t a = ((size_t)4 << 20) - 5;
    unsigned char *buf = malloc(a + 105);
    for (size_t i = 0; i < a + 105; i++) buf[i] = (unsigned char)(i * 7 + 3);
    AtomicFile af;
    atomic_file_open(&af, path);
    atomic_file_write(&af, buf, a);
    struct stat st;
    if (stat(af.tmp_path, &st) != 0) _exit(3);
    struct rlimit lim = {(rlim_t)st.st_size, RLIM_INFINITY};
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(3);
    atomic_file_write(&af, buf + a, 5);
    lim.rlim_cur = RLIM_INFINITY;
    setrlimit(RLIMIT_FSIZE, &lim);
    atomic_file_write(&af, buf + a + 5, 100);
    atomic_file_commit(&af);
    free(buf);
}

static void test_write_behind_error_stops_the_writer(void **state) {
    (void)state;
    char path[128];
    path_in(path, sizeof(path), "data.bin");
    expect_death(write_through_a_failed_flush, NULL, DEATH_ANY_STATUS, "write error on", "data.bin.tmp.",
                 "(for '", "File too large", NULL);
    assert_false(exists(path));   // nothing took the final name
    DIR *d = opendir(g_dir);   // and no temp file was left behind
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strstr(e->d_name, ".tmp.")) fail_msg("left behind: %s", e->d_name);
    closedir(d);
}

static void test_cleanup_removes_a_zombie_writers_file(void **state) {
    (void)state;
    static const char *const names[] = {"ckpt_[0-9]*.bin", NULL};
    char path[160];
    // a writer that exited without its commit, not yet reaped: its temp file goes
    pid_t dead = fork();
    assert_true(dead >= 0);
    if (dead == 0) _exit(0);
    snprintf(path, sizeof(path), "%s/ckpt_00000004.bin.tmp.%ld", g_dir, (long)dead);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    for (int i = 0; i < 200; i++) {   // until the kernel has it as a zombie
        char stat_path[64], buf[256] = "";
        snprintf(stat_path, sizeof(stat_path), "/proc/%ld/stat", (long)dead);
        FILE *s = fopen(stat_path, "r");
        if (s && fgets(buf, sizeof(buf), s) && strstr(buf, ") Z ")) { fclose(s); break; }
        if (s) fclose(s);
        usleep(10000);
    }
    assert_int_equal(atomic_file_remove_stale(g_dir, names), 1);
    assert_false(exists(path));
    assert_int_equal(waitpid(dead, NULL, 0), dead);
    // a live writer keeps its own
    pid_t live = fork();
    assert_true(live >= 0);
    if (live == 0) { pause(); _exit(0); }
    snprintf(path, sizeof(path), "%s/ckpt_00000006.bin.tmp.%ld", g_dir, (long)live);
    f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(atomic_file_remove_stale(g_dir, names), 0);
    assert_true(exists(path));
    kill(live, SIGKILL);
    waitpid(live, NULL, 0);
    unlink(path);
}

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof(g_dir), "/tmp/test_atomic_file.XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_behind_error_stops_the_writer),
        cmocka_unit_test(test_cleanup_removes_a_zombie_writers_file),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
