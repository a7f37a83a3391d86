// test_zfile_crc.c: zfile_crc_of, the read-back that verifies every checkpoint file, against
// zlib's crc32 over the same bytes in memory. Its buffer follows the file's size in whole
// 4 KiB blocks (4 MiB at most), so the sizes here sit on each side of a block and of the
// 4 MiB chunk, with limits below, at and above the size; on the disk (O_DIRECT) and on
// tmpfs (/dev/shm, which refuses O_DIRECT: the buffered path).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "../../../zero/io/zfile.h"
#include "../common/test_util.h"

static const size_t g_sizes[] = {0, 1, 4095, 4096, 4097, 8192, 65537, (4u << 20) - 1, 4u << 20, (4u << 20) + 4097};

// every size and limit in FOLDER: the CRC and byte count zlib gives for the first
// min(size, limit) bytes
static void check_folder(const char *folder) {
    size_t most = g_sizes[sizeof g_sizes / sizeof g_sizes[0] - 1];
    unsigned char *data = malloc(most);
    assert_non_null(data);
    for (size_t i = 0; i < most; i++) data[i] = (unsigned char)(i * 2654435761u >> 13);
    char path[512];
    snprintf(path, sizeof path, "%s/zfile_crc_%d.bin", folder, (int)getpid());
    for (size_t s = 0; s < sizeof g_sizes / sizeof g_sizes[0]; s++) {
        size_t size = g_sizes[s];
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(data, 1, size, f), size);
        assert_int_equal(fclose(f), 0);
        uint64_t limits[] = {UINT64_MAX, size, size ? size - 1 : 0, 4096, 0};
        for (size_t l = 0; l < sizeof limits / sizeof limits[0]; l++) {
            uint64_t expect_bytes = size < limits[l] ? size : limits[l];
            uint32_t expect = (uint32_t)crc32(crc32(0L, Z_NULL, 0), data, (uInt)expect_bytes);
            uint32_t crc = 0;
            uint64_t bytes = 0;
            char err[256] = "";
            int rc = zfile_crc_of(path, limits[l], &crc, &bytes, err, sizeof err);
            if (rc != 0 || crc != expect || bytes != expect_bytes)
                fail_msg("%s: size %zu limit %llu: rc %d (%s), %llu bytes CRC 0x%08x; zlib: %llu bytes CRC 0x%08x", folder,
                         size, (unsigned long long)limits[l], rc, err, (unsigned long long)bytes, crc,
                         (unsigned long long)expect_bytes, expect);
        }
    }
    unlink(path);
    free(data);
}

static void test_crc_on_the_disk(void **state) {
    (void)state;
    char folder[] = "/var/tmp/zfile_crc_XXXXXX";
    assert_non_null(mkdtemp(folder));
    check_folder(folder);
    rmdir(folder);
}

static void test_crc_on_tmpfs(void **state) {
    (void)state;
    if (access("/dev/shm", W_OK) != 0) skip();
    check_folder("/dev/shm");
}

static void test_missing_file_named_error(void **state) {
    (void)state;
    uint32_t crc;
    char err[256] = "";
    assert_int_not_equal(zfile_crc_of("/nonexistent/zfile_crc.bin", UINT64_MAX, &crc, NULL, err, sizeof err), 0);
    assert_non_null(strstr(err, "No such file"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc_on_the_disk),
        cmocka_unit_test(test_crc_on_tmpfs),
        cmocka_unit_test(test_missing_file_named_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
