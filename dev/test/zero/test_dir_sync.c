// test_dir_sync.c: the two atomic writers (llmc/atomic_file.c for the trainers' files,
// zero/io/zfile.c for ZeRO's checkpoints) sync the folder after the rename that gives a file
// its name, and a failed sync there (EIO: the disk failed) is a failed save, while a file
// system that cannot sync folders (EINVAL) is not. This file's fsync stands in for libc's
// and fails a folder's sync with the errno the test sets.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../../llmc/atomic_file.h"
#include "../../../zero/io/zfile.h"
#include "../common/test_util.h"

static int g_folder_errno;   // a folder's fsync fails with this (0: it goes to libc)
static int g_folder_syncs;   // folder syncs asked for

int fsync(int fd) {
    static int (*libc_fsync)(int);
    if (!libc_fsync) libc_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        g_folder_syncs++;
        if (g_folder_errno) {
            errno = g_folder_errno;
            return -1;
        }
    }
    return libc_fsync(fd);
}

static char g_dir[64];

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/test_dir_sync.XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static int exists(const char *name) {
    char path[128];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    return stat(path, &st) == 0;
}

static void atomic_save(void *name) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", g_dir, (const char *)name);
    AtomicFile af;
    atomic_file_open(&af, path);
    atomic_file_write(&af, "latest 7\n", 9);
    atomic_file_commit(&af);
}

static void test_atomic_file_syncs_its_folder(void **state) {
    (void)state;
    g_folder_errno = 0;
    g_folder_syncs = 0;
    atomic_save("a.txt");
    assert_true(exists("a.txt"));
    assert_int_equal(g_folder_syncs, 1);
}

static void test_atomic_file_dies_when_the_folder_sync_fails(void **state) {
    (void)state;
    g_folder_errno = EIO;
    expect_death(atomic_save, "b.txt", DEATH_ANY_STATUS, "b.txt' took its name, but syncing its folder", g_dir,
                 strerror(EIO), NULL);
    g_folder_errno = 0;
}

static void test_atomic_file_goes_on_where_folders_cannot_sync(void **state) {
    (void)state;
    g_folder_errno = EINVAL;
    atomic_save("c.txt");
    assert_true(exists("c.txt"));
    g_folder_errno = 0;
}

static int zfile_save(const char *name, char *err, size_t cap) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    ZFile zf;
    int rc = zfile_open(&zf, path) != 0 || zfile_write(&zf, "rank file", 9) != 0 || zfile_commit(&zf) != 0 ? -1 : 0;
    snprintf(err, cap, "%s", zf.err);
    return rc;
}

static void test_zfile_fails_when_the_folder_sync_fails(void **state) {
    (void)state;
    char err[512];
    g_folder_syncs = 0;
    g_folder_errno = EIO;
    assert_int_equal(zfile_save("rank_00000.bin", err, sizeof err), -1);
    g_folder_errno = 0;
    assert_int_equal(g_folder_syncs, 1);
    assert_non_null(strstr(err, "rank_00000.bin took its name, but syncing its folder to disk failed"));
    assert_non_null(strstr(err, strerror(EIO)));
}

static void test_zfile_goes_on_where_folders_cannot_sync(void **state) {
    (void)state;
    char err[512];
    g_folder_syncs = 0;
    g_folder_errno = EINVAL;
    assert_int_equal(zfile_save("rank_00001.bin", err, sizeof err), 0);
    g_folder_errno = 0;
    assert_int_equal(g_folder_syncs, 1);
    assert_true(exists("rank_00001.bin"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_atomic_file_syncs_its_folder),
        cmocka_unit_test(test_atomic_file_dies_when_the_folder_sync_fails),
        cmocka_unit_test(test_atomic_file_goes_on_where_folders_cannot_sync),
        cmocka_unit_test(test_zfile_fails_when_the_folder_sync_fails),
        cmocka_unit_test(test_zfile_goes_on_where_folders_cannot_sync),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
