// test_dir_sync.c: the two atomic writers (llmc/atomic_file.c for the trainers' files,
// zero/io/zfile.c for ZeRO's checkpoints) sync the folder after the rename that gives a file
// its name, and a failed sync there (EIO: the disk failed) is a failed save, while a file
// system that cannot sync folders (EINVAL) is not. The two mkdir -p (make_dirs for -o,
// zfile_mkdirs for zero_S/) sync each folder they create into its parent, and fail alike.
// A writeback error sync_file_range reports (the writers' write-behind) fails the write: the
// kernel reports it once, so the commit's fsync would not. This file's fsync stands in for
// libc's, records which folders it synced and fails a folder's sync with the errno the test
// sets; its sync_file_range fails with the errno the test sets, or goes to libc.
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
#include "../../../llmc/run/logger.h"
#include "../../../zero/io/zfile.h"
#include "../common/test_util.h"

static int g_folder_errno;   // a folder's fsync fails with this (0: it goes to libc)
static int g_folder_syncs;   // folder syncs asked for
static ino_t g_synced[16];   // the folders of the first 16 of them

int fsync(int fd) {
    static int (*libc_fsync)(int);
    if (!libc_fsync) libc_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        if (g_folder_syncs < 16) g_synced[g_folder_syncs] = st.st_ino;
        g_folder_syncs++;
        if (g_folder_errno) {
            errno = g_folder_errno;
            return -1;
        }
    }
    return libc_fsync(fd);
}

static int g_range_errno;   // sync_file_range fails with this (0: it goes to libc)

int sync_file_range(int fd, off64_t offset, off64_t nbytes, unsigned int flags) {
    static int (*libc_range)(int, off64_t, off64_t, unsigned int);
    if (!libc_range) libc_range = (int (*)(int, off64_t, off64_t, unsigned int))dlsym(RTLD_NEXT, "sync_file_range");
    if (g_range_errno) {
        errno = g_range_errno;
        return -1;
    }
    return libc_range(fd, offset, nbytes, flags);
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

static ino_t inode_of(const char *rel) {
    char path[128];
    struct stat st;
    snprintf(path, sizeof path, "%s%s%s", g_dir, *rel ? "/" : "", rel);
    return stat(path, &st) == 0 ? st.st_ino : 0;
}

// make_dirs or zfile_mkdirs of g_dir/rel: 0, or -1 (zfile_mkdirs's message in g_err)
static char g_err[512];
static int mkdirs_with(int zfile, const char *rel) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", g_dir, rel);
    if (zfile) return zfile_mkdirs(path, g_err, sizeof g_err);
    make_dirs(path);
    return 0;
}

// Two new folders: each synced into its parent (g_dir, then g_dir/NAME); made again: none.
static void check_mkdirs_syncs_new_folders(int zfile, const char *top) {
    char rel[64];
    snprintf(rel, sizeof rel, "%s/inner", top);
    g_folder_errno = 0;
    g_folder_syncs = 0;
    assert_int_equal(mkdirs_with(zfile, rel), 0);
    assert_int_equal(g_folder_syncs, 2);
    assert_true(g_synced[0] == inode_of("") && g_synced[1] == inode_of(top));
    g_folder_syncs = 0;
    assert_int_equal(mkdirs_with(zfile, rel), 0);
    assert_int_equal(g_folder_syncs, 0);
}

static void test_make_dirs_syncs_each_new_folder(void **state) {
    (void)state;
    check_mkdirs_syncs_new_folders(0, "out_dir");
}

static void test_zfile_mkdirs_syncs_each_new_folder(void **state) {
    (void)state;
    check_mkdirs_syncs_new_folders(1, "zero_dir");
}

static void make_dirs_new(void *rel) { (void)mkdirs_with(0, (const char *)rel); }

static void test_make_dirs_dies_when_the_folder_sync_fails(void **state) {
    (void)state;
    g_folder_errno = EIO;
    expect_death(make_dirs_new, "out_eio", DEATH_ANY_STATUS, "created folder '", "out_eio', but syncing the folder holding "
                 "it to disk failed", strerror(EIO), NULL);
    g_folder_errno = 0;
}

static void test_zfile_mkdirs_fails_when_the_folder_sync_fails(void **state) {
    (void)state;
    g_folder_errno = EIO;
    assert_int_equal(mkdirs_with(1, "zero_eio"), -1);
    g_folder_errno = 0;
    assert_non_null(strstr(g_err, "zero_eio, but syncing the folder holding it to disk failed"));
    assert_non_null(strstr(g_err, strerror(EIO)));
}

// 6 MiB: past the two 2 MiB windows after which the writers start their write-behind
enum { BIG = 6 << 20 };

static void atomic_save_big(void *name) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", g_dir, (const char *)name);
    char *data = calloc(1, BIG);
    AtomicFile af;
    atomic_file_open(&af, path);
    atomic_file_write(&af, data, BIG);
    atomic_file_commit(&af);
    free(data);
}

static int zfile_save_big(const char *name, char *err, size_t cap) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    char *data = calloc(1, BIG);
    ZFile zf;
    int rc = zfile_open(&zf, path) != 0 || zfile_write(&zf, data, BIG) != 0 || zfile_commit(&zf) != 0 ? -1 : 0;
    snprintf(err, cap, "%s", zf.err);
    free(data);
    return rc;
}

// a temp file of name left in g_dir
static int temp_left(const char *name) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls %s | grep -q '^%s.tmp.'", g_dir, name);
    return system(cmd) == 0;
}

static void test_atomic_file_dies_when_the_write_behind_fails(void **state) {
    (void)state;
    g_range_errno = EIO;
    expect_death(atomic_save_big, "big.bin", DEATH_ANY_STATUS, "write error on '", "big.bin.tmp.", "(for '",
                 "writing its bytes from offset 0 back to disk failed", strerror(EIO), NULL);
    g_range_errno = 0;
    assert_false(exists("big.bin"));
    assert_false(temp_left("big.bin"));
}

static void test_zfile_fails_when_the_write_behind_fails(void **state) {
    (void)state;
    char err[512];
    g_range_errno = EIO;
    assert_int_equal(zfile_save_big("rank_00002.bin", err, sizeof err), -1);
    g_range_errno = 0;
    assert_non_null(strstr(err, "rank_00002.bin.tmp."));
    assert_non_null(strstr(err, "writing its bytes from offset 0 back to disk"));
    assert_non_null(strstr(err, strerror(EIO)));
    assert_false(exists("rank_00002.bin"));
    assert_false(temp_left("rank_00002.bin"));
}

// A kernel without sync_file_range (ENOSYS): the files are written, the cache kept
static void test_writers_go_on_without_sync_file_range(void **state) {
    (void)state;
    char err[512];
    g_range_errno = ENOSYS;
    atomic_save_big("big_nosys.bin");
    assert_int_equal(zfile_save_big("rank_00003.bin", err, sizeof err), 0);
    g_range_errno = 0;
    assert_true(exists("big_nosys.bin") && exists("rank_00003.bin"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_atomic_file_syncs_its_folder),
        cmocka_unit_test(test_atomic_file_dies_when_the_folder_sync_fails),
        cmocka_unit_test(test_atomic_file_goes_on_where_folders_cannot_sync),
        cmocka_unit_test(test_zfile_fails_when_the_folder_sync_fails),
        cmocka_unit_test(test_zfile_goes_on_where_folders_cannot_sync),
        cmocka_unit_test(test_make_dirs_syncs_each_new_folder),
        cmocka_unit_test(test_zfile_mkdirs_syncs_each_new_folder),
        cmocka_unit_test(test_make_dirs_dies_when_the_folder_sync_fails),
        cmocka_unit_test(test_zfile_mkdirs_fails_when_the_folder_sync_fails),
        cmocka_unit_test(test_atomic_file_dies_when_the_write_behind_fails),
        cmocka_unit_test(test_zfile_fails_when_the_write_behind_fails),
        cmocka_unit_test(test_writers_go_on_without_sync_file_range),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
