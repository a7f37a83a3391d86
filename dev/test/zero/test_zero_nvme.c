// test_zero_nvme.c: the NVMe engine (zero/io/nvme.c, included directly so the test can
// reach the swap file's descriptor), on both engines: patterned data written at many
// offsets with many requests in flight and read back in another order, tickets, short
// reads, I/O errors, refused requests, the folder and disk-full errors, the unlinked file
// and its space, the choice of engine (io_uring refused by a seccomp filter), and a ring
// whose every submit the kernel answers "try again" (EAGAIN): a bounded failure, no spin.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "../common/test_util.h"
#include "../../../zero/io/nvme.c"

#include <dirent.h>
#include <linux/filter.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/vfs.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static char g_dir[PATH_MAX];   // a fresh folder per test

static int make_dir(void **state) {
    (void)state;
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/zero_nvme_test_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int entries_in(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int count = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) count++;
    closedir(d);
    return count;
}

// Clears the immutable flag test_folder_errors sets on a folder, so that a failed test
// leaves nothing behind that rm cannot remove.
static void make_mutable(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY), flags;
    if (fd < 0) return;
    if (ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 && (flags & FS_IMMUTABLE_FL)) {
        flags &= ~FS_IMMUTABLE_FL;
        ioctl(fd, FS_IOC_SETFLAGS, &flags);
    }
    close(fd);
}

static int remove_dir(void **state) {
    (void)state;
    unsetenv("ZERO_NVME_ENGINE");
    unsetenv("ZERO_NVME_JITTER");
    char locked[PATH_MAX + 16];
    snprintf(locked, sizeof locked, "%s/locked", g_dir);
    make_mutable(locked);
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

// The value of the 8-byte word at file offset off (independent of how it was moved).
static uint64_t pattern(uint64_t off, uint64_t seed) {
    uint64_t z = off + seed * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fill(void *buf, uint64_t off, size_t bytes, uint64_t seed) {
    uint64_t *w = buf;
    for (size_t i = 0; i < bytes / 8; i++) w[i] = pattern(off + 8 * i, seed);
}

// First word that differs from the pattern, or -1.
static long long mismatch(const void *buf, uint64_t off, size_t bytes, uint64_t seed) {
    const uint64_t *w = buf;
    for (size_t i = 0; i < bytes / 8; i++)
        if (w[i] != pattern(off + 8 * i, seed)) return (long long)(off + 8 * i);
    return -1;
}

static uint64_t rng_next(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

typedef struct { uint64_t off; size_t bytes; } Chunk;

// The file cut into chunks of (1..max_units) * unit bytes, in shuffled order.
static int cut(Chunk *c, int cap, uint64_t file, size_t unit, int max_units, uint64_t seed) {
    int n = 0;
    for (uint64_t off = 0; off < file; n++) {
        assert_true(n < cap);
        size_t b = (1 + rng_next(&seed) % (uint64_t)max_units) * unit;
        if (b > file - off) b = (size_t)(file - off);
        c[n] = (Chunk){off, b};
        off += b;
    }
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rng_next(&seed) % (uint64_t)(i + 1));
        Chunk t = c[i]; c[i] = c[j]; c[j] = t;
    }
    return n;
}

static const char *ENGINES[] = {"threads", "io_uring"};

// Opens an engine of the given kind in g_dir, or skips when io_uring is not available.
static ZeroNvme *open_engine(const char *engine, uint64_t file_bytes, int depth, int nbuf, size_t buf_bytes) {
    setenv("ZERO_NVME_ENGINE", engine, 1);
    ZeroNvmeConfig cfg = {.dir = g_dir, .rank = 3, .file_bytes = file_bytes, .buffer_bytes = buf_bytes,
                          .num_buffers = nbuf, .queue_depth = depth};
    char err[1024];
    ZeroNvme *n = zero_nvme_open(&cfg, err, sizeof err);
    if (!n && strcmp(engine, "io_uring") == 0 && strstr(err, "io_uring is not available")) {
        print_message("skipping the io_uring engine here: %s\n", err);
        skip();
    }
    if (!n) fail_msg("zero_nvme_open(%s): %s", engine, err);
    assert_string_equal(zero_nvme_engine(n), engine);
    assert_string_equal(zero_nvme_error(n), "");
    return n;
}

static void *aligned(size_t bytes) {
    void *p = aligned_alloc(ZERO_NVME_ALIGN, bytes);
    assert_non_null(p);
    return p;
}

// ---------------------------------------------------------------------------------------

static void test_patterned_roundtrip(void **state) {
    const char *engine = *state;
    const uint64_t file = 48 * MiB, seed = 7;
    const int depth = 8, nbuf = 6;
    const size_t bufb = 256 * KiB;
    double t0 = now_s();
    ZeroNvme *n = open_engine(engine, file, depth, nbuf, bufb);
    uint8_t *src = aligned(file), *dst = aligned(file);
    fill(src, 0, file, seed);
    static Chunk c[20000];

    // writes of 4 KiB .. 256 KiB in shuffled order, more than queue_depth at once; moved
    // in 64 KiB pieces, so most requests go through the resubmission of the rest
    n->max_chunk = 64 * KiB;
    int nw = cut(c, 20000, file, 4 * KiB, 64, 11);
    for (int i = 0; i < nw; i++) assert_true(zero_nvme_write(n, src + c[i].off, c[i].off, c[i].bytes) > 0);
    assert_int_equal(zero_nvme_drain(n), 0);
    n->max_chunk = NVME_MAX_CHUNK;

    // read back with another cut (12 KiB units) in another order
    memset(dst, 0xAA, file);
    int nr = cut(c, 20000, file, 12 * KiB, 40, 99);
    for (int i = 0; i < nr; i++) assert_true(zero_nvme_read(n, dst + c[i].off, c[i].off, c[i].bytes) > 0);
    assert_int_equal(zero_nvme_drain(n), 0);
    long long bad = mismatch(dst, 0, file, seed);
    if (bad >= 0) fail_msg("%s: read-back differs at file offset %lld", engine, bad);

    // and through the pool, back to front: a buffer is reused once its last read is waited on
    ZeroTicket last[6] = {0};
    int pool_reads = 0;
    for (int64_t k = (int64_t)(file / bufb) - 1, i = 0; k >= 0; k--, i++) {
        int b = (int)(i % nbuf);
        uint8_t *buf = zero_nvme_buffer(n, b);
        if (last[b]) {
            assert_int_equal(zero_nvme_wait(n, last[b]), 0);
            uint64_t off = (uint64_t)(k + nbuf) * bufb;
            if ((bad = mismatch(buf, off, bufb, seed)) >= 0) fail_msg("%s: pool read differs at %lld", engine, bad);
        }
        last[b] = zero_nvme_read(n, buf, (uint64_t)k * bufb, bufb);
        assert_true(last[b] > 0);
        pool_reads++;
    }
    assert_int_equal(zero_nvme_drain(n), 0);
    for (int b = 0; b < nbuf; b++)
        if ((bad = mismatch(zero_nvme_buffer(n, b), (uint64_t)(nbuf - 1 - b) * bufb, bufb, seed)) >= 0)
            fail_msg("%s: pool buffer %d differs at %lld", engine, b, bad);

    ZeroNvmeStats st;
    zero_nvme_stats(n, &st);
    assert_int_equal(st.bytes_written, file);
    assert_int_equal(st.writes, nw);
    assert_int_equal(st.bytes_read, 2 * file);
    assert_int_equal(st.write_asked, file);   // everything asked has completed
    assert_int_equal(st.read_asked, 2 * file);
    assert_int_equal(st.reads, nr + pool_reads);
    assert_true(st.busy_s > 0 && st.busy_s <= now_s() - t0);
    zero_nvme_close(n);
    free(src);
    free(dst);
}

// A sibling engine on the same file: bytes written through one are read through the other
// once waited on; tickets are its own (a wait on one engine covers none of the other's
// requests); the busy clock is the file's, one value for both; the file lives until the
// last engine closes, the first closed either way round.
static void test_sibling(void **state) {
    const char *engine = *state;
    const uint64_t file = 4 * MiB, seed = 21;
    const size_t bufb = 64 * KiB;
    for (int close_first = 0; close_first < 2; close_first++) {
        ZeroNvme *a = open_engine(engine, file, 4, 1, bufb);
        ZeroNvmeConfig cfg = {.rank = 3, .buffer_bytes = bufb, .num_buffers = 1, .queue_depth = 2};
        char err[1024];
        ZeroNvme *b = zero_nvme_open_sibling(a, &cfg, err, sizeof err);
        if (!b) fail_msg("zero_nvme_open_sibling(%s): %s", engine, err);
        assert_string_equal(zero_nvme_path(b), zero_nvme_path(a));
        assert_int_equal(entries_in(g_dir), 0);   // no second file

        uint8_t *src = aligned(file);
        fill(src, 0, file, seed);
        for (int i = 0; i < 5; i++) assert_true(zero_nvme_write(a, src, 0, file) > 0);   // a's tickets 1..5
        assert_int_equal(zero_nvme_drain(a), 0);
        uint8_t *bb = zero_nvme_buffer(b, 0);
        ZeroTicket t = zero_nvme_read(b, bb, file - bufb, bufb);
        assert_int_equal(t, 1);   // b numbers its own requests
        assert_int_equal(zero_nvme_wait(b, t), 0);
        long long bad = mismatch(bb, file - bufb, bufb, seed);
        if (bad >= 0) fail_msg("%s: the sibling read differs at %lld", engine, bad);

        fill(bb, 0, bufb, seed + 1);   // and the other way
        assert_int_equal(zero_nvme_wait(b, zero_nvme_write(b, bb, 0, bufb)), 0);
        uint8_t *ab = zero_nvme_buffer(a, 0);
        assert_int_equal(zero_nvme_wait(a, zero_nvme_read(a, ab, 0, bufb)), 0);
        if ((bad = mismatch(ab, 0, bufb, seed + 1)) >= 0) fail_msg("%s: a read of the sibling's write differs at %lld", engine, bad);
        assert_int_equal(zero_nvme_wait(b, 2), 0);
        if (close_first) {   // b is closed first this round: it may fail
            assert_int_equal(zero_nvme_wait(b, 3), -1);   // b issued two: a's tickets are not its
            assert_non_null(strstr(zero_nvme_error(b), "never issued"));
            assert_string_equal(zero_nvme_error(a), "");   // and a is untouched by b's failure
            assert_true(zero_nvme_read(a, ab, bufb, bufb) > 0);
            assert_int_equal(zero_nvme_drain(a), 0);
        }

        ZeroNvmeStats sa, sb;
        zero_nvme_stats(a, &sa);
        zero_nvme_stats(b, &sb);
        assert_int_equal(sa.bytes_written, 5 * file);
        assert_int_equal(sb.bytes_read, bufb);
        assert_int_equal(sb.bytes_written, bufb);
        assert_true(sa.busy_s > 0);
        assert_true(sa.busy_s == sb.busy_s);   // one clock, nothing in flight: the same value

        ZeroNvme *first = close_first ? b : a, *last = close_first ? a : b;
        uint8_t *lb = zero_nvme_buffer(last, 0);
        zero_nvme_close(first);
        assert_int_equal(zero_nvme_wait(last, zero_nvme_read(last, lb, 2 * bufb, bufb)), 0);   // the file is still there
        if ((bad = mismatch(lb, 2 * bufb, bufb, seed)) >= 0) fail_msg("%s: after closing one engine, a read differs at %lld", engine, bad);
        zero_nvme_close(last);
        assert_int_equal(entries_in(g_dir), 0);
        free(src);
    }
}

// Ticket t done means every earlier ticket is done, though a big early request finishes
// after the small ones behind it (moved 4 KiB at a time: about 2000 round trips).
static void test_wait_covers_earlier_tickets(void **state) {
    const char *engine = *state;
    const uint64_t big = 8 * MiB, seed = 3;
    ZeroNvme *n = open_engine(engine, big + 16 * 4 * KiB, 8, 0, 0);
    uint8_t *src = aligned(big + 64 * KiB), *dst = aligned(big + 64 * KiB);
    fill(src, 0, big + 64 * KiB, seed);
    assert_true(zero_nvme_write(n, src, 0, big + 64 * KiB) > 0);
    assert_int_equal(zero_nvme_drain(n), 0);

    n->max_chunk = 4 * KiB;
    for (int round = 0; round < 3; round++) {
        memset(dst, 0, big + 64 * KiB);
        ZeroTicket first = zero_nvme_read(n, dst, 0, big), t = first;
        for (int i = 0; i < 7; i++) t = zero_nvme_read(n, dst + big + i * 4 * KiB, big + i * 4 * KiB, 4 * KiB);
        assert_int_equal(t, first + 7);
        assert_int_equal(zero_nvme_wait(n, t), 0);
        long long bad = mismatch(dst, 0, big + 7 * 4 * KiB, seed);
        if (bad >= 0) fail_msg("%s: wait(%llu) returned before ticket %llu's bytes arrived (offset %lld)",
                               engine, (unsigned long long)t, (unsigned long long)first, bad);
        pthread_mutex_lock(&n->mu);
        for (int i = 0; i < n->depth; i++) assert_true(n->slots[i].ticket == 0 || n->slots[i].ticket > t);
        pthread_mutex_unlock(&n->mu);
    }
    // a ticket never issued is an error, and stops the engine
    ZeroTicket last = n->issued;
    assert_int_equal(zero_nvme_wait(n, last + 1), -1);
    assert_non_null(strstr(zero_nvme_error(n), "never issued"));
    assert_int_equal(zero_nvme_wait(n, last), 0);   // what completed before stays good
    assert_int_equal(zero_nvme_read(n, dst, 0, 4 * KiB), 0);
    assert_int_equal(zero_nvme_drain(n), -1);
    zero_nvme_close(n);
    free(src);
    free(dst);
}

// The file shrinks under the engine: the read stops at its end, which falls inside the
// request's second piece (moved in part, the rest issued again, which finds nothing).
static void test_short_read(void **state) {
    const char *engine = *state;
    ZeroNvme *n = open_engine(engine, 1 * MiB, 4, 1, 1 * MiB);
    uint8_t *buf = zero_nvme_buffer(n, 0);
    fill(buf, 0, 1 * MiB, 5);
    ZeroTicket w = zero_nvme_write(n, buf, 0, 1 * MiB);
    assert_int_equal(zero_nvme_wait(n, w), 0);
    assert_int_equal(ftruncate(n->fd, 640 * KiB), 0);
    n->max_chunk = 256 * KiB;
    memset(buf, 0, 1 * MiB);
    ZeroTicket r = zero_nvme_read(n, buf, 256 * KiB, 768 * KiB);
    assert_true(r > w);
    assert_int_equal(zero_nvme_wait(n, w), 0);
    assert_int_equal(zero_nvme_wait(n, r), -1);
    const char *e = zero_nvme_error(n);
    if (!strstr(e, "short read of 393216 of 786432 bytes at offset 262144") || !strstr(e, n->path)
        || !strstr(e, "holds 655360 bytes") || !strstr(e, "rank 3"))
        fail_msg("%s: unexpected message: %s", engine, e);
    long long bad = mismatch(buf, 256 * KiB, 384 * KiB, 5);   // what was there arrived
    if (bad >= 0) fail_msg("%s: the bytes before the end differ at file offset %lld", engine, bad);
    ZeroNvmeStats st;
    zero_nvme_stats(n, &st);
    assert_int_equal(st.reads, 0);   // a failed request does not count as moved
    // stopped: later requests are refused and the first message stays
    assert_int_equal(zero_nvme_write(n, buf, 0, 4 * KiB), 0);
    assert_non_null(strstr(zero_nvme_error(n), "short read of 393216"));
    zero_nvme_close(n);
}

// A failing transfer (the descriptor swapped for a read-only one) reports errno's text,
// the operation, the offset and the size.
static void test_io_error(void **state) {
    const char *engine = *state;
    ZeroNvme *n = open_engine(engine, 1 * MiB, 4, 1, 64 * KiB);
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", n->fd);
    int ro = open(self, O_RDONLY | O_DIRECT);
    assert_true(ro >= 0);
    assert_true(dup2(ro, n->fd) == n->fd);
    close(ro);
    ZeroTicket t = zero_nvme_write(n, zero_nvme_buffer(n, 0), 8 * KiB, 64 * KiB);
    assert_true(t > 0);
    assert_int_equal(zero_nvme_wait(n, t), -1);
    const char *e = zero_nvme_error(n);
    if (!strstr(e, "write of 65536 bytes at offset 8192") || !strstr(e, strerror(EBADF)) || !strstr(e, n->path))
        fail_msg("%s: unexpected message: %s", engine, e);
    ZeroNvmeStats st;
    zero_nvme_stats(n, &st);
    assert_int_equal(st.writes, 0);
    assert_int_equal(st.bytes_written, 0);
    zero_nvme_close(n);
}

static void test_refused_requests(void **state) {
    const char *engine = *state;
    struct { size_t buf_off; uint64_t off; size_t bytes; const char *why; } cases[] = {
        {1, 0, 4096, "must be non-zero multiples of 4096"},          // buffer
        {0, 512, 4096, "at offset 512"},                              // offset
        {0, 0, 4000, "write of 4000 bytes"},                          // size
        {0, 0, 0, "must be non-zero multiples"},                      // empty
        {0, 1 * MiB - 4096, 8192, "goes past the 1048576 bytes reserved"},
        {0, UINT64_MAX - 4095, 8192, "goes past the 1048576 bytes reserved"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ZeroNvme *n = open_engine(engine, 1 * MiB, 2, 1, 64 * KiB);
        char *buf = zero_nvme_buffer(n, 0);
        ZeroTicket ok = zero_nvme_write(n, buf, 0, 4096);
        assert_true(ok > 0);
        assert_int_equal(zero_nvme_write(n, buf + cases[k].buf_off, cases[k].off, cases[k].bytes), 0);
        if (!strstr(zero_nvme_error(n), cases[k].why) || !strstr(zero_nvme_error(n), "refused"))
            fail_msg("%s case %zu: unexpected message: %s", engine, k, zero_nvme_error(n));
        assert_int_equal(zero_nvme_wait(n, ok), 0);     // the request before it is fine
        assert_int_equal(zero_nvme_wait(n, 0), -1);     // the refused one has no ticket
        assert_int_equal(zero_nvme_drain(n), -1);
        assert_int_equal(zero_nvme_read(n, buf, 0, 4096), 0);
        zero_nvme_close(n);
    }
}

// The file never shows in the folder; its space is held while open and freed at close.
static void test_file_unlinked_and_space_freed(void **state) {
    (void)state;
    const uint64_t file = 1024 * MiB, margin = 768 * MiB;
    struct statvfs vs;
    assert_int_equal(statvfs(g_dir, &vs), 0);
    uint64_t before = (uint64_t)vs.f_bavail * vs.f_frsize;
    if (before < 4 * file) { print_message("skipping: %s has less than 4 GiB free\n", g_dir); skip(); }
    mode_t mask = umask(0);   // so that only the engine's own mode shows
    ZeroNvme *n = open_engine("threads", file, 2, 0, 0);
    umask(mask);
    assert_int_equal(entries_in(g_dir), 0);
    char expect[PATH_MAX + 64];
    snprintf(expect, sizeof expect, "%s/zero_swap_rank3_%ld.bin", g_dir, (long)getpid());
    assert_string_equal(zero_nvme_path(n), expect);
    struct stat st;
    assert_int_equal(fstat(n->fd, &st), 0);
    assert_int_equal(st.st_nlink, 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(st.st_size, file);
    assert_true((uint64_t)st.st_blocks * 512 >= file);
    assert_true(fcntl(n->fd, F_GETFL) & O_DIRECT);
    assert_int_equal(statvfs(g_dir, &vs), 0);
    uint64_t open_free = (uint64_t)vs.f_bavail * vs.f_frsize;
    if (open_free + margin > before)
        fail_msg("free space went from %llu to %llu bytes: %llu bytes not reserved", (unsigned long long)before,
                 (unsigned long long)open_free, (unsigned long long)file);
    zero_nvme_close(n);
    uint64_t after = 0;
    for (int i = 0; i < 50 && after < open_free + margin; i++) {   // freeing may lag a little
        if (i) usleep(100000);
        assert_int_equal(statvfs(g_dir, &vs), 0);
        after = (uint64_t)vs.f_bavail * vs.f_frsize;
    }
    if (after < open_free + margin)
        fail_msg("close freed too little: %llu bytes free while open, %llu after", (unsigned long long)open_free,
                 (unsigned long long)after);
    assert_int_equal(entries_in(g_dir), 0);
}

// The swap file never has a name in the folder, not even for an instant, where the file
// system makes unnamed files (O_TMPFILE): a watch on the folder sees nothing created. Where
// it makes none, the named file's creation and removal are all it sees.
static void test_file_never_named(void **state) {
    (void)state;
    const int unnamed = makes_unnamed_files(g_dir);
    int watch = folder_watch_begin(g_dir);
    ZeroNvme *n = open_engine("threads", 4 * MiB, 2, 0, 0);
    char seen[1024];
    folder_watch_end(watch, seen, sizeof seen);
    zero_nvme_close(n);
    print_message("  %s: the folder saw:%s\n", unnamed ? "O_TMPFILE" : "no O_TMPFILE here", seen[0] ? seen : " nothing");
    if (unnamed && seen[0]) fail_msg("the swap file showed in %s:%s", g_dir, seen);
    if (!unnamed && (!strstr(seen, " created zero_swap_rank3_") || !strstr(seen, " removed zero_swap_rank3_")))
        fail_msg("without O_TMPFILE, expected the named file created and removed in %s, saw:%s", g_dir, seen);
}

static void expect_open_error(const char *dir, uint64_t bytes, const char *want1, const char *want2) {
    ZeroNvmeConfig cfg = {.dir = dir, .rank = 2, .file_bytes = bytes, .queue_depth = 2};
    char err[1024];
    ZeroNvme *n = zero_nvme_open(&cfg, err, sizeof err);
    if (n) { zero_nvme_close(n); fail_msg("zero_nvme_open(%s) succeeded", dir); }
    if (!strstr(err, want1) || (want2 && !strstr(err, want2)) || !strstr(err, "rank 2"))
        fail_msg("zero_nvme_open(%s): unexpected message: %s", dir, err);
    print_message("  %s\n", err);
}

static void test_folder_errors(void **state) {
    (void)state;
    char path[PATH_MAX + 64], file[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/missing", g_dir);
    expect_open_error(path, 1 * MiB, "does not exist", path);
    snprintf(file, sizeof file, "%s/a_file", g_dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    expect_open_error(file, 1 * MiB, "is not a folder", file);
    snprintf(path, sizeof path, "%s/a_file/sub", g_dir);
    expect_open_error(path, 1 * MiB, "is not a folder", path);

    // unwritable: as root only an immutable folder refuses (chmod does not stop root)
    snprintf(path, sizeof path, "%s/locked", g_dir);
    assert_int_equal(mkdir(path, 0700), 0);
    int fd = -1, flags = 0;
    if (geteuid() == 0) {
        fd = open(path, O_RDONLY | O_DIRECTORY);
        assert_true(fd >= 0);
        int set = FS_IMMUTABLE_FL;
        if (ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0 || (set |= flags, ioctl(fd, FS_IOC_SETFLAGS, &set)) != 0) {
            print_message("skipping the unwritable folder: cannot make %s immutable: %s\n", path, strerror(errno));
            close(fd);
            fd = -2;
        }
    } else {
        assert_int_equal(chmod(path, 0500), 0);
    }
    if (fd != -2) expect_open_error(path, 1 * MiB, "is not writable", path);
    if (fd >= 0) {
        close(fd);
        make_mutable(path);
    }
    assert_int_equal(entries_in(path), 0);
    assert_int_equal(entries_in(g_dir), 2);   // a_file and locked: nothing left behind
}

// A file that was there before (the previous checkpoint): written here, checked after.
#define PREVIOUS_BYTES (100 * KiB)
static void write_previous(const char *dir, struct stat *st) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/previous_checkpoint.bin", dir);
    static uint64_t words[PREVIOUS_BYTES / 8];
    fill(words, 0, PREVIOUS_BYTES, 42);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(words, 1, PREVIOUS_BYTES, f), PREVIOUS_BYTES);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(stat(path, st), 0);
}

static void check_previous(const char *dir, const struct stat *before) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/previous_checkpoint.bin", dir);
    static uint64_t words[PREVIOUS_BYTES / 8 + 1];
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t got = fread(words, 1, sizeof words, f);
    fclose(f);
    if (got != PREVIOUS_BYTES || st.st_size != (off_t)PREVIOUS_BYTES)
        fail_msg("%s changed size: %zu bytes read, %lld on disk", path, got, (long long)st.st_size);
    long long bad = mismatch(words, 0, PREVIOUS_BYTES, 42);
    if (bad >= 0) fail_msg("%s changed at offset %lld", path, bad);
    assert_true(st.st_mtim.tv_sec == before->st_mtim.tv_sec && st.st_mtim.tv_nsec == before->st_mtim.tv_nsec);
    assert_int_equal(st.st_ino, before->st_ino);
}

// Disk full, simulated by a file-size limit in a child (SIGXFSZ ignored, so the calls
// fail with EFBIG): the reservation at open fails, and so does a write that crosses the
// limit on an engine already open (its first 256 KiB go through, the rest is refused).
static void child_file_size_limit(void *arg) {
    (void)arg;
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim;
    if (getrlimit(RLIMIT_FSIZE, &lim) != 0) { fprintf(stderr, "getrlimit: %s\n", strerror(errno)); _exit(2); }
    rlim_t unlimited = lim.rlim_cur;
    lim.rlim_cur = 1 * MiB;
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) { fprintf(stderr, "setrlimit: %s\n", strerror(errno)); _exit(2); }
    ZeroNvmeConfig cfg = {.dir = g_dir, .rank = 2, .file_bytes = 2 * MiB, .queue_depth = 2,
                          .buffer_bytes = 512 * KiB, .num_buffers = 1};
    char err[1024];
    ZeroNvme *n = zero_nvme_open(&cfg, err, sizeof err);
    fprintf(stderr, "open: %s\n", n ? "succeeded" : err);
    zero_nvme_close(n);
    for (int e = 0; e < 2; e++) {
        lim.rlim_cur = unlimited;
        setrlimit(RLIMIT_FSIZE, &lim);
        setenv("ZERO_NVME_ENGINE", ENGINES[e], 1);
        if (!(n = zero_nvme_open(&cfg, err, sizeof err))) {
            fprintf(stderr, "%s: open: %s\n", ENGINES[e], err);
            continue;
        }
        lim.rlim_cur = 1 * MiB;
        setrlimit(RLIMIT_FSIZE, &lim);
        ZeroTicket t = zero_nvme_write(n, zero_nvme_buffer(n, 0), 768 * KiB, 512 * KiB);
        int rc = t ? zero_nvme_wait(n, t) : -2;
        fprintf(stderr, "%s: write: %d %s; %s\n", ENGINES[e], rc, zero_nvme_error(n), zero_nvme_path(n));
        zero_nvme_close(n);
    }
}

static void test_file_size_limit(void **state) {
    (void)state;
    struct stat prev;
    write_previous(g_dir, &prev);
    char msg[8192];
    int rc = run_in_child(child_file_size_limit, NULL, msg, sizeof msg);
    print_message("%s", msg);
    if (rc != 0) fail_msg("child exited %d: %s", rc, msg);
    char want[PATH_MAX + 200];
    snprintf(want, sizeof want, "open: rank 2: cannot reserve 2097152 bytes (0.00 GiB) for the swap file under %s: "
             "file too large for the file system or the process (RLIMIT_FSIZE 1048576 bytes)\n", g_dir);
    if (!strstr(msg, want)) fail_msg("no \"%s\" in: %s", want, msg);
    for (int e = 0; e < 2; e++) {
        if (e == 1 && strstr(msg, "io_uring: open: ") && strstr(msg, "io_uring is not available")) continue;
        snprintf(want, sizeof want, "%s: write: -1 rank 2: write of 524288 bytes at offset 786432 in %s/zero_swap_rank2_",
                 ENGINES[e], g_dir);
        const char *at = strstr(msg, want);
        if (!at || !strstr(at, "failed after 262144 bytes: File too large; ")) fail_msg("no \"%s\" in: %s", want, msg);
    }
    check_previous(g_dir, &prev);
    assert_int_equal(entries_in(g_dir), 1);   // the previous file alone: no swap file left
}

// A real ENOSPC: more than a whole tmpfs holds (tmpfs refuses that before allocating).
static void test_disk_full(void **state) {
    (void)state;
    struct statfs fs;
    struct statvfs vs;
    if (statfs("/dev/shm", &fs) != 0 || fs.f_type != TMPFS_MAGIC || statvfs("/dev/shm", &vs) != 0 || vs.f_blocks == 0) {
        print_message("skipping: no sized tmpfs at /dev/shm\n");
        skip();
    }
    char dir[] = "/dev/shm/zero_nvme_full_XXXXXX", prev_path[64];
    assert_non_null(mkdtemp(dir));
    struct stat prev;
    write_previous(dir, &prev);
    uint64_t total = (uint64_t)vs.f_blocks * vs.f_frsize, want = total + 1024 * MiB;
    ZeroNvmeConfig cfg = {.dir = dir, .rank = 1, .file_bytes = want, .queue_depth = 2};
    char err[1024], size[64];
    ZeroNvme *n = zero_nvme_open(&cfg, err, sizeof err);
    int left = entries_in(dir);
    check_previous(dir, &prev);
    snprintf(prev_path, sizeof prev_path, "%s/previous_checkpoint.bin", dir);
    unlink(prev_path);
    rmdir(dir);
    if (n) { zero_nvme_close(n); fail_msg("reserving %llu bytes on a %llu-byte tmpfs succeeded", (unsigned long long)want, (unsigned long long)total); }
    if (strstr(err, "does not support O_DIRECT")) { print_message("skipping: %s\n", err); skip(); }
    snprintf(size, sizeof size, "cannot reserve %llu bytes", (unsigned long long)want);
    if (!strstr(err, "disk full") || !strstr(err, size) || !strstr(err, dir) || !strstr(err, "are free there"))
        fail_msg("unexpected message: %s", err);
    print_message("  %s\n", err);
    assert_int_equal(left, 1);   // the previous file alone
}

// A rank that dies (exit without close, or killed) leaves no swap file behind.
static void child_dies_with_engine_open(void *arg) {
    int how = *(int *)arg;
    setenv("ZERO_NVME_ENGINE", ENGINES[how % 2], 1);
    ZeroNvmeConfig cfg = {.dir = g_dir, .rank = 5, .file_bytes = 4 * MiB, .queue_depth = 4,
                          .buffer_bytes = 1 * MiB, .num_buffers = 4};
    char err[1024];
    ZeroNvme *n = zero_nvme_open(&cfg, err, sizeof err);
    if (!n) { fprintf(stderr, "%s\n", err); _exit(2); }
    for (int b = 0; b < 4; b++) zero_nvme_write(n, zero_nvme_buffer(n, b), (uint64_t)b * MiB, 1 * MiB);
    fprintf(stderr, "path=%s\n", zero_nvme_path(n));
    if (how < 2) exit(3);   // requests may still be in flight
    raise(SIGKILL);
}

static void test_no_file_after_error_exit(void **state) {
    (void)state;
    for (int how = 0; how < 4; how++) {
        char msg[4096];
        int rc = run_in_child(child_dies_with_engine_open, &how, msg, sizeof msg);
        if (rc == 2 && how % 2 == 1 && strstr(msg, "io_uring is not available")) continue;
        assert_int_equal(rc, how < 2 ? 3 : -1);
        const char *p = strstr(msg, "path=");
        if (!p) fail_msg("child %d: %s", how, msg);
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%.*s", (int)strcspn(p + 5, "\n"), p + 5);
        assert_non_null(strstr(path, "/zero_swap_rank5_"));
        if (access(path, F_OK) == 0 || entries_in(g_dir) != 0)
            fail_msg("%s is still there after the rank %s with the %s engine open", path,
                     how < 2 ? "exited" : "was killed", ENGINES[how % 2]);
    }
}

// ---------------------------------------------------------------------------------------
// the choice of engine

static void open_report(char *out, size_t len) {
    ZeroNvmeConfig cfg = {.dir = g_dir, .rank = 0, .file_bytes = 64 * KiB, .queue_depth = 4};
    char err[1024];
    ZeroNvme *n = zero_nvme_open(&cfg, err, sizeof err);
    if (n) snprintf(out, len, "engine=%s note=%s", zero_nvme_engine(n), zero_nvme_engine_note(n));
    else snprintf(out, len, "error=%s", err);
    zero_nvme_close(n);
}

// In a child: a system call of io_uring (arg: its number) refused by seccomp, as in a
// container that blocks io_uring_setup, or a sandbox that lets a ring be set up but refuses
// io_uring_enter (the requests).
// From here on, system call nr fails with error err (a seccomp filter): in the calling
// thread, or in every thread of the process (all_threads); with waits_only, only the calls
// that submit nothing (io_uring_enter's second argument, to_submit, is 0: a thread waiting
// for completions). Exits 77 (skipped) where no filter can be installed.
static void refuse_syscall_in(long nr, int err, int all_threads, int waits_only) {
    const unsigned allow_jump = waits_only ? 3 : 1;
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, (unsigned char)allow_jump),
        // the low 32 bits of args[1] (little-endian), an unsigned int for io_uring_enter
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    if (!waits_only) {   // drop the argument test: nr, then refuse or allow
        f[2] = f[4];
        f[3] = f[5];
        prog.len = 4;
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        (all_threads ? syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog)
                     : prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) != 0) {
        fprintf(stderr, "cannot install a seccomp filter: %s\n", strerror(errno));
        _exit(77);
    }
}

static void refuse_syscall(long nr, int err) { refuse_syscall_in(nr, err, 0, 0); }

static void child_without_io_uring(void *arg) {
    const long nr = *(const long *)arg;
#ifdef __NR_io_uring_setup
    refuse_syscall(nr, EPERM);
    char line[1400];
    unsetenv("ZERO_NVME_ENGINE");
    open_report(line, sizeof line);
    fprintf(stderr, "auto: %s\n", line);
    setenv("ZERO_NVME_ENGINE", "io_uring", 1);
    open_report(line, sizeof line);
    fprintf(stderr, "forced: %s\n", line);
    unsetenv("ZERO_NVME_ENGINE");   // the engine chosen moves bytes
    ZeroNvmeConfig cfg = {.dir = g_dir, .rank = 0, .file_bytes = 64 * KiB, .queue_depth = 4};
    char err[1024];
    ZeroNvme *n = zero_nvme_open(&cfg, err, sizeof err);
    uint8_t *src = aligned(64 * KiB), *dst = aligned(64 * KiB);
    fill(src, 0, 64 * KiB, 9);
    int moved = n && zero_nvme_wait(n, zero_nvme_write(n, src, 0, 64 * KiB)) == 0 &&
                zero_nvme_wait(n, zero_nvme_read(n, dst, 0, 64 * KiB)) == 0 && mismatch(dst, 0, 64 * KiB, 9) < 0;
    fprintf(stderr, "moved: %s\n", moved ? "yes" : n ? zero_nvme_error(n) : err);
    zero_nvme_close(n);
#else
    (void)nr;
    _exit(77);
#endif
}

static void test_engine_choice(void **state) {
    (void)state;
    char line[1400];
    setenv("ZERO_NVME_ENGINE", "threads", 1);
    open_report(line, sizeof line);
    assert_string_equal(line, "engine=threads note=threads (4): forced by ZERO_NVME_ENGINE=threads");
    setenv("ZERO_NVME_ENGINE", "bogus", 1);
    open_report(line, sizeof line);
    assert_string_equal(line, "error=rank 0: ZERO_NVME_ENGINE=bogus: expected threads or io_uring");
    unsetenv("ZERO_NVME_ENGINE");
    open_report(line, sizeof line);
    print_message("  this machine: %s\n", line);
    char unset[1400];
    setenv("ZERO_NVME_ENGINE", "", 1);   // set but empty: the automatic choice, not "forced"
    open_report(unset, sizeof unset);
    assert_string_equal(unset, line);
#if !ZERO_NVME_URING
    assert_string_equal(line, "engine=threads note=threads (4): built without liburing");
    return;
#endif
    assert_true(strcmp(line, "engine=io_uring note=io_uring, queue depth 4") == 0
                || strstr(line, "engine=threads note=threads (4): io_uring refused (") == line);

#ifdef __NR_io_uring_setup
    static const struct { long nr; const char *why; } refused[] = {
        {__NR_io_uring_setup, "io_uring_queue_init: Operation not permitted"},
        {__NR_io_uring_enter, "a first request through io_uring: Operation not permitted"},
    };
    for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
        char msg[4096], want_auto[512], want_forced[512];
        int rc = run_in_child(child_without_io_uring, (void *)&refused[k].nr, msg, sizeof msg);
        if (rc == 77) { print_message("skipping the seccomp part: %s\n", msg); return; }
        snprintf(want_auto, sizeof want_auto, "auto: engine=threads note=threads (4): io_uring refused (%s)", refused[k].why);
        snprintf(want_forced, sizeof want_forced, "forced: error=rank 0: ZERO_NVME_ENGINE=io_uring, but io_uring is not "
                 "available (%s)", refused[k].why);
        if (rc != 0 || !strstr(msg, want_auto) || !strstr(msg, want_forced) || !strstr(msg, "moved: yes"))
            fail_msg("with system call %ld refused (child status %d): %s", refused[k].nr, rc, msg);
        assert_int_equal(entries_in(g_dir), 0);
    }
#endif
}

// In a child: a 64 KiB engine on io_uring, forced; exits 77 (skipped) where there is none.
static ZeroNvme *open_uring_or_skip(void) {
    setenv("ZERO_NVME_ENGINE", "io_uring", 1);
    ZeroNvmeConfig cfg = {.dir = g_dir, .rank = 0, .file_bytes = 64 * KiB, .queue_depth = 4};
    char err[1024];
    ZeroNvme *n = zero_nvme_open(&cfg, err, sizeof err);
    if (!n) {
        fprintf(stderr, "no io_uring here: %s\n", err);
        _exit(77);
    }
    return n;
}

// In a child: io_uring up and moving bytes, then every io_uring_enter of the submitting
// thread refused with EAGAIN (seccomp filters the calling thread only; the completion
// thread waits on as before), as a kernel that keeps saying "try again": the next write
// fails within seconds naming the error, instead of the engine resubmitting it forever; an
// alarm ends a child that hangs. Prints what the write's wait returned and the engine's error.
static void child_uring_again(void *arg) {
    (void)arg;
#ifdef __NR_io_uring_enter
    ZeroNvme *n = open_uring_or_skip();
    uint8_t *src = aligned(64 * KiB);
    fill(src, 0, 64 * KiB, 3);
    if (zero_nvme_wait(n, zero_nvme_write(n, src, 0, 64 * KiB)) != 0) {
        fprintf(stderr, "the first write failed: %s\n", zero_nvme_error(n));
        _exit(3);
    }
    refuse_syscall(__NR_io_uring_enter, EAGAIN);
    alarm(60);
    double t0 = now_s();
    int rc = zero_nvme_wait(n, zero_nvme_write(n, src, 0, 64 * KiB));
    fprintf(stderr, "wait: %d after %.1f s: %s\n", rc, now_s() - t0, rc ? zero_nvme_error(n) : "");
    _exit(0);   // no close: its wake-up of the completion thread is refused too
#else
    _exit(77);
#endif
}

static void test_uring_refuses_again(void **state) {
    (void)state;
    char msg[4096];
    int rc = run_in_child(child_uring_again, NULL, msg, sizeof msg);
    if (rc == 77) { print_message("skipping: %s\n", msg); return; }
    double secs = -1;
    const char *w = strstr(msg, "wait: -1 after ");
    if (w) secs = atof(w + strlen("wait: -1 after "));
    if (rc != 0 || !w || secs > 30 || !strstr(msg, "write of 65536 bytes at offset 0") ||
        !strstr(msg, "tries in a row over ") || !strstr(msg, " s): Resource temporarily unavailable"))
        fail_msg("io_uring_enter refused with EAGAIN (child status %d): %s", rc, msg);
    print_message("  %s", w);
}


// In a child: io_uring up and moving bytes, then every wait for completions refused with
// EAGAIN in every thread (the completion thread's waits; submits go through): the completion
// thread tries again 1 ms apart for NVME_RETRY_S, then fails the ring, so a request made
// after that fails at once naming the error, instead of waiting for a completion nothing
// reaps. An alarm ends a child that hangs. Prints when the engine failed and what a later
// read's wait returned.
static void child_uring_reaper_refused(void *arg) {
    (void)arg;
#ifdef __NR_io_uring_enter
    ZeroNvme *n = open_uring_or_skip();
    uint8_t *src = aligned(64 * KiB), *dst = aligned(64 * KiB);
    fill(src, 0, 64 * KiB, 4);
    alarm(60);
    refuse_syscall_in(__NR_io_uring_enter, EAGAIN, 1, 1);
    double t0 = now_s();
    // the completion thread may still be inside the wait it began before the filter: this
    // write's completion ends that wait, or is found by a refused wait's look at the queue
    int wrote = zero_nvme_wait(n, zero_nvme_write(n, src, 0, 64 * KiB));
    fprintf(stderr, "write: %d\n", wrote);
    for (int failed = 0; !failed && now_s() - t0 < 30;) {
        struct timespec ms = {0, 10000000};
        nanosleep(&ms, NULL);
        pthread_mutex_lock(&n->mu);
        failed = n->fail_ticket != 0;
        pthread_mutex_unlock(&n->mu);
    }
    fprintf(stderr, "failed after %.1f s\n", now_s() - t0);
    int rc = zero_nvme_wait(n, zero_nvme_read(n, dst, 0, 64 * KiB));
    fprintf(stderr, "read: %d: %s\n", rc, zero_nvme_error(n));
    zero_nvme_close(n);   // the completion thread has ended; close joins it
    fprintf(stderr, "closed\n");
    _exit(0);
#else
    _exit(77);
#endif
}

static void test_uring_reaper_refused(void **state) {
    (void)state;
    char msg[4096], want[PATH_MAX + 200];
    int rc = run_in_child(child_uring_reaper_refused, NULL, msg, sizeof msg);
    if (rc == 77) { print_message("skipping: %s\n", msg); return; }
    const char *at = strstr(msg, "failed after ");
    double secs = at ? atof(at + strlen("failed after ")) : -1;
    snprintf(want, sizeof want, "read: -1: rank 0: the io_uring completion queue of %s/zero_swap_rank0_", g_dir);
    if (rc != 0 || !strstr(msg, "write: 0\n") || secs < NVME_RETRY_S - 0.5 || secs > 25 || !strstr(msg, want) ||
        !strstr(msg, " failed: Resource temporarily unavailable\n") || !strstr(msg, "closed\n"))
        fail_msg("completion waits refused with EAGAIN (child status %d): %s", rc, msg);
    print_message("  %s", at);
}

// In a child: the completion thread's ending of the ring (its waits refused for
// NVME_RETRY_S) with a request still held, as when one is made in the last moments of those
// seconds: its waiter returns failed at once, where a refusal, tried again, kept the slot and
// the wait hung. The held request is set up by hand (never given to the ring), so the ending
// meets it every run. An alarm ends a child that hangs. Prints what the wait returned.
static void child_uring_failed_with_held(void *arg) {
    (void)arg;
#if ZERO_NVME_URING
    ZeroNvme *n = open_uring_or_skip();
    uint8_t *src = aligned(64 * KiB);
    alarm(20);
    pthread_mutex_lock(&n->mu);
    ZeroTicket t = ++n->issued;
    n->slots[0] = (NvmeSlot){t, OP_WRITE, (char *)src, 0, 64 * KiB, 0, 0, 0};
    n->in_flight++;
    clock_tick(n->clock, +1);
    ring_failed_locked(n, -EAGAIN);
    pthread_mutex_unlock(&n->mu);
    int rc = zero_nvme_wait(n, t);
    fprintf(stderr, "wait: %d: %s\n", rc, zero_nvme_error(n));
    zero_nvme_close(n);
    fprintf(stderr, "closed\n");
    _exit(0);
#else
    _exit(77);
#endif
}

static void test_uring_failed_with_held(void **state) {
    (void)state;
    char msg[4096], want[PATH_MAX + 200];
    int rc = run_in_child(child_uring_failed_with_held, NULL, msg, sizeof msg);
    if (rc == 77) { print_message("skipping: %s\n", msg); return; }
    snprintf(want, sizeof want, "wait: -1: rank 0: the io_uring completion queue of %s/zero_swap_rank0_", g_dir);
    if (rc != 0 || !strstr(msg, want) || !strstr(msg, " failed: Resource temporarily unavailable\n") ||
        !strstr(msg, "closed\n"))
        fail_msg("the ring ended with a request held (child status %d): %s", rc, msg);
}

// 64 writes of 4 KiB through one worker, then the bytes read back and checked; the writes'
// milliseconds. jitter: ZERO_NVME_JITTER's value, or NULL for none.
static double timed_writes(const char *jitter) {
    enum { REQS = 64 };
    const uint64_t seed = 5, file = REQS * 4 * KiB;
    if (jitter) setenv("ZERO_NVME_JITTER", jitter, 1);
    else unsetenv("ZERO_NVME_JITTER");
    ZeroNvmeConfig cfg = {.dir = g_dir, .rank = 0, .file_bytes = file, .queue_depth = 1};
    char err[1024];
    ZeroNvme *n = zero_nvme_open(&cfg, err, sizeof err);
    if (!n) fail_msg("zero_nvme_open with ZERO_NVME_JITTER=%s: %s", jitter ? jitter : "(unset)", err);
    uint8_t *src = aligned(file), *dst = aligned(file);
    fill(src, 0, file, seed);
    double t0 = now_s();
    for (int i = 0; i < REQS; i++) assert_true(zero_nvme_write(n, src + i * 4 * KiB, (uint64_t)i * 4 * KiB, 4 * KiB) > 0);
    assert_int_equal(zero_nvme_drain(n), 0);
    double ms = (now_s() - t0) * 1e3;
    for (int i = 0; i < REQS; i++) assert_true(zero_nvme_read(n, dst + i * 4 * KiB, (uint64_t)i * 4 * KiB, 4 * KiB) > 0);
    assert_int_equal(zero_nvme_drain(n), 0);
    long long at = mismatch(dst, 0, file, seed);
    if (at >= 0) fail_msg("ZERO_NVME_JITTER=%s: a read after the writes' waits gave other bytes at offset %lld",
                          jitter ? jitter : "(unset)", at);
    zero_nvme_close(n);
    free(src);
    free(dst);
    return ms;
}

// ZERO_NVME_JITTER=SEED: the threads engine, said in its note; requests complete late, and
// the bytes are still right. A bad seed, and io_uring forced beside it, are refused.
static void test_jitter(void **state) {
    (void)state;
    char line[1400];
    setenv("ZERO_NVME_JITTER", "7", 1);
    open_report(line, sizeof line);
    assert_string_equal(line, "engine=threads note=threads (4): forced by ZERO_NVME_JITTER=7 (a random sleep of up to "
                              "2000 us before half of the transfers)");
    setenv("ZERO_NVME_ENGINE", "io_uring", 1);
    open_report(line, sizeof line);
    assert_string_equal(line, "error=rank 0: ZERO_NVME_JITTER needs the threads engine, not ZERO_NVME_ENGINE=io_uring");
    unsetenv("ZERO_NVME_ENGINE");
    const char *bad[] = {"x", "-1", "7s"};
    for (int i = 0; i < 3; i++) {
        setenv("ZERO_NVME_JITTER", bad[i], 1);
        open_report(line, sizeof line);
        char want[128];
        snprintf(want, sizeof want, "error=rank 0: ZERO_NVME_JITTER='%s' is not a seed (a non-negative integer)", bad[i]);
        assert_string_equal(line, want);
    }

    // one worker, 64 writes of 4 KiB: with jitter half of them wait up to 2 ms first (about
    // 32 ms in all) and the bytes read back are still the ones written
    double plain = 1e30, jit = 1e30;
    for (int k = 0; k < 2; k++) {
        double t = timed_writes(NULL);
        plain = t < plain ? t : plain;
        t = timed_writes("7");
        jit = t < jit ? t : jit;
    }
    print_message("  64 writes of 4 KiB, one at a time: %.1f ms, with jitter %.1f ms\n", plain, jit);
    if (jit < plain + 15.0) fail_msg("jitter: 64 writes took %.1f ms, without it %.1f ms", jit, plain);
    assert_int_equal(entries_in(g_dir), 0);
}

// The pool comes from the caller's allocator, once, and goes back to it at close.
static int g_allocs, g_frees;
static void *g_pool;
static void *count_alloc(void *ctx, size_t bytes) {
    assert_ptr_equal(ctx, &g_allocs);
    assert_int_equal(bytes, 3 * 12 * KiB);
    g_allocs++;
    return g_pool = aligned_alloc(ZERO_NVME_ALIGN, bytes);
}
static void count_free(void *ctx, void *p) {
    assert_ptr_equal(ctx, &g_allocs);
    assert_ptr_equal(p, g_pool);
    g_frees++;
    free(p);
}

static void test_pool_allocator(void **state) {
    (void)state;
    ZeroNvmeConfig cfg = {.dir = g_dir, .file_bytes = 1 * MiB, .buffer_bytes = 10 * KiB, .num_buffers = 3,
                          .queue_depth = 2, .alloc = count_alloc, .free = count_free, .alloc_ctx = &g_allocs};
    char err[1024];
    ZeroNvme *n = zero_nvme_open(&cfg, err, sizeof err);
    if (!n) fail_msg("%s", err);
    assert_int_equal(zero_nvme_buffer_bytes(n), 12 * KiB);   // rounded up to the alignment
    for (int i = 0; i < 3; i++) assert_ptr_equal(zero_nvme_buffer(n, i), (char *)g_pool + i * 12 * KiB);
    assert_null(zero_nvme_buffer(n, 3));
    assert_int_equal(g_allocs, 1);
    zero_nvme_close(n);
    assert_int_equal(g_frees, 1);
}

// DeepSpeed's aio block_size: block_bytes caps what one pread/pwrite or io_uring entry
// moves; a request larger goes in blocks, and the data arrives the same. Values the engine
// cannot take (off the alignment, past its limit) are refused at open.
static void test_block_bytes(void **state) {
    const char *engine = *state;
    setenv("ZERO_NVME_ENGINE", engine, 1);
    ZeroNvmeConfig cfg = {.dir = g_dir, .rank = 1, .file_bytes = 1 * MiB, .buffer_bytes = 512 * KiB,
                          .num_buffers = 2, .queue_depth = 3, .block_bytes = 8 * KiB};
    char err[1024];
    ZeroNvme *n = zero_nvme_open(&cfg, err, sizeof err);
    if (!n && strcmp(engine, "io_uring") == 0 && strstr(err, "io_uring is not available")) skip();
    if (!n) fail_msg("%s", err);
    assert_int_equal(n->max_chunk, 8 * KiB);
    if (!strstr(zero_nvme_engine_note(n), "; blocks of at most 8192 bytes"))
        fail_msg("the note does not show the block size: %s", zero_nvme_engine_note(n));
    uint8_t *w = zero_nvme_buffer(n, 0), *r = zero_nvme_buffer(n, 1);
    fill(w, 64 * KiB, 512 * KiB, 11);
    memset(r, 0, 512 * KiB);
    ZeroTicket tw = zero_nvme_write(n, w, 64 * KiB, 512 * KiB);   // 64 blocks
    ZeroNvmeStats asked;   // counted when accepted, before any block moves
    zero_nvme_stats(n, &asked);
    assert_true(asked.write_asked == 512 * KiB && asked.read_asked == 0);
    assert_int_equal(zero_nvme_wait(n, tw), 0);
    ZeroTicket tr = zero_nvme_read(n, r, 64 * KiB, 512 * KiB);
    assert_int_equal(zero_nvme_wait(n, tr), 0);
    long long bad = mismatch(r, 64 * KiB, 512 * KiB, 11);
    if (bad >= 0) fail_msg("%s: read back differs at file offset %lld", engine, bad);
    ZeroNvmeStats st;
    zero_nvme_stats(n, &st);
    assert_true(st.reads == 1 && st.writes == 1 && st.bytes_read == 512 * KiB && st.bytes_written == 512 * KiB);
    if (st.transfers != 2 * 64) fail_msg("%s: %llu read and write calls for two requests of 64 blocks", engine,
                                         (unsigned long long)st.transfers);
    zero_nvme_close(n);
    cfg.num_buffers = 0;
    cfg.block_bytes = 0;   // the default: no note
    n = zero_nvme_open(&cfg, err, sizeof err);
    assert_non_null(n);
    assert_int_equal(n->max_chunk, ZERO_NVME_MAX_BLOCK);
    assert_null(strstr(zero_nvme_engine_note(n), "blocks"));
    zero_nvme_close(n);
    static const struct { size_t block; int depth; } bad_cfg[] = {
        {5000, 3}, {ZERO_NVME_MAX_BLOCK + ZERO_NVME_ALIGN, 3}, {0, ZERO_NVME_MAX_DEPTH + 1}, {0, 0}};
    for (size_t i = 0; i < sizeof bad_cfg / sizeof bad_cfg[0]; i++) {
        cfg.block_bytes = bad_cfg[i].block;
        cfg.queue_depth = bad_cfg[i].depth;
        assert_null(zero_nvme_open(&cfg, err, sizeof err));
        if (!strstr(err, "bad NVMe engine settings") || !strstr(err, "block_bytes") || !strstr(err, "queue_depth"))
            fail_msg("case %zu: %s", i, err);
    }
    assert_int_equal(entries_in(g_dir), 0);
}

#define BOTH(t) cmocka_unit_test_prestate_setup_teardown(t, make_dir, remove_dir, (void *)ENGINES[0]), \
                cmocka_unit_test_prestate_setup_teardown(t, make_dir, remove_dir, (void *)ENGINES[1])
#define ONE(t) cmocka_unit_test_setup_teardown(t, make_dir, remove_dir)

int main(void) {
    const struct CMUnitTest tests[] = {
        BOTH(test_patterned_roundtrip),
        BOTH(test_wait_covers_earlier_tickets),
        BOTH(test_sibling),
        BOTH(test_short_read),
        BOTH(test_io_error),
        BOTH(test_refused_requests),
        BOTH(test_block_bytes),
        ONE(test_file_unlinked_and_space_freed),
        ONE(test_file_never_named),
        ONE(test_folder_errors),
        ONE(test_file_size_limit),
        ONE(test_disk_full),
        ONE(test_no_file_after_error_exit),
        ONE(test_engine_choice),
        ONE(test_uring_refuses_again),
        ONE(test_uring_reaper_refused),
        ONE(test_uring_failed_with_held),
        ONE(test_jitter),
        ONE(test_pool_allocator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
