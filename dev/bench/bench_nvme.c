// bench_nvme.c: the NVMe engine's (zero/io/nvme.c) sequential write and read GB/s against
// the plain baseline on the same disk: one thread writing, then reading, a file of the
// same size with pwrite/pread on an O_DIRECT descriptor, one block at a time (what
// `dd oflag=direct` does). Both files are reserved with fallocate first, as the engine's
// swap file is. Prints a table; it is a measurement, not a test.
//
//   make bench_nvme && ./bench_nvme [DIR] [-s GiB] [-b MiB,..] [-q depth,..] [-e engine,..] [-r rounds]
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "../../zero/io/nvme.h"

#define MAX_LIST 16

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench_nvme: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static int parse_list(const char *s, long *out) {
    int n = 0;
    for (char *end; *s && n < MAX_LIST; s = *end ? end + 1 : end) {
        out[n] = strtol(s, &end, 10);
        if (end == s || out[n] <= 0 || (*end && *end != ',')) die("bad list \"%s\"", s);
        n++;
    }
    return n;
}

static const char *fs_name(const char *dir) {
    struct statfs fs;
    if (statfs(dir, &fs) != 0) return "?";
    switch ((unsigned long)fs.f_type) {
    case 0xEF53: return "ext2/3/4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x01021994: return "tmpfs";
    default: return "other";
    }
}

typedef struct { double write, read; } Rate;   // GB/s

// The baseline: one thread, sequential pwrite then pread of `bytes`, `block` at a time.
static Rate plain_direct(const char *dir, uint64_t bytes, size_t block, void *buf) {
    char path[4096];
    snprintf(path, sizeof path, "%s/bench_nvme_plain_%ld.bin", dir, (long)getpid());
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_DIRECT, 0600);
    if (fd < 0) die("cannot create %s: %s", path, strerror(errno));
    unlink(path);
    if (fallocate(fd, 0, 0, (off_t)bytes) != 0) die("cannot reserve space for %s: %s", path, strerror(errno));
    Rate r;
    double t = now_s();
    for (uint64_t off = 0; off < bytes; off += block)
        if (pwrite(fd, buf, block, (off_t)off) != (ssize_t)block) die("plain write to %s: %s", path, strerror(errno));
    r.write = (double)bytes / (now_s() - t) / 1e9;
    t = now_s();
    for (uint64_t off = 0; off < bytes; off += block)
        if (pread(fd, buf, block, (off_t)off) != (ssize_t)block) die("plain read of %s: %s", path, strerror(errno));
    r.read = (double)bytes / (now_s() - t) / 1e9;
    close(fd);
    return r;
}

// One pass of the engine over the whole file: `depth` pool buffers, each reused once its
// previous request is done, so `depth` requests stay in flight.
static double engine_pass(ZeroNvme *n, int write, uint64_t bytes, size_t block, int depth) {
    ZeroTicket last[256] = {0};
    double t = now_s();
    for (uint64_t i = 0; i * block < bytes; i++) {
        int b = (int)(i % (uint64_t)depth);
        if (last[b] && zero_nvme_wait(n, last[b]) != 0) die("%s", zero_nvme_error(n));
        void *buf = zero_nvme_buffer(n, b);
        last[b] = write ? zero_nvme_write(n, buf, i * block, block) : zero_nvme_read(n, buf, i * block, block);
        if (!last[b]) die("%s", zero_nvme_error(n));
    }
    if (zero_nvme_drain(n) != 0) die("%s", zero_nvme_error(n));
    return (double)bytes / (now_s() - t) / 1e9;
}

static Rate engine_run(const char *dir, const char *engine, uint64_t bytes, size_t block, int depth, char *note, size_t notelen) {
    setenv("ZERO_NVME_ENGINE", engine, 1);
    ZeroNvmeConfig cfg = {.dir = dir, .rank = 0, .file_bytes = bytes, .buffer_bytes = block,
                          .num_buffers = depth, .queue_depth = depth};
    char err[1024];
    ZeroNvme *n = zero_nvme_open(&cfg, err, sizeof err);
    if (!n) die("%s", err);
    snprintf(note, notelen, "%s", zero_nvme_engine_note(n));
    for (int b = 0; b < depth; b++) memset(zero_nvme_buffer(n, b), 0x5a + b, block);
    Rate r;
    r.write = engine_pass(n, 1, bytes, block, depth);
    r.read = engine_pass(n, 0, bytes, block, depth);
    zero_nvme_close(n);
    return r;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
    const char *dir = "/tmp";
    double gib = 2.0;
    long blocks[MAX_LIST] = {1, 4, 16}, depths[MAX_LIST] = {1, 2, 4, 8};
    int nblocks = 3, ndepths = 4, rounds = 3;
    const char *engines[2] = {"threads", "io_uring"};
    int nengines = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            printf("usage: bench_nvme [DIR] [-s GiB] [-b MiB,..] [-q depth,..] [-e threads,io_uring] [-r rounds]\n"
                   "  DIR   folder on the disk to measure (default /tmp); files there are unlinked at once\n"
                   "  -s    file size in GiB (default 2)\n  -b    block sizes in MiB (default 1,4,16)\n"
                   "  -q    queue depths (default 1,2,4,8)\n  -e    engines (default threads,io_uring)\n"
                   "  -r    rounds per row (default 3): each round runs the baseline, then the engine,\n"
                   "        so a shared disk's drift hits both alike; the row shows medians\n");
            return 0;
        } else if (strcmp(a, "-s") == 0 && v) { gib = atof(v); i++; }
        else if (strcmp(a, "-b") == 0 && v) { nblocks = parse_list(v, blocks); i++; }
        else if (strcmp(a, "-q") == 0 && v) { ndepths = parse_list(v, depths); i++; }
        else if (strcmp(a, "-r") == 0 && v) { rounds = atoi(v); i++; }
        else if (strcmp(a, "-e") == 0 && v) {
            if (strcmp(v, "threads") == 0 || strcmp(v, "io_uring") == 0) { engines[0] = v; nengines = 1; }
            else if (strcmp(v, "threads,io_uring") != 0) die("bad engine list \"%s\"", v);
            i++;
        } else if (a[0] != '-') dir = a;
        else die("unknown argument %s (see --help)", a);
    }
    if (rounds < 1 || rounds > 99) die("rounds %d: expected 1..99", rounds);
    for (int i = 0; i < ndepths; i++)
        if (depths[i] > 256) die("queue depth %ld is over 256", depths[i]);
    size_t maxblock = 0;
    for (int i = 0; i < nblocks; i++) if ((size_t)blocks[i] << 20 > maxblock) maxblock = (size_t)blocks[i] << 20;
    uint64_t bytes = (uint64_t)(gib * (1 << 30)) / maxblock * maxblock;
    if (bytes == 0) die("file size %.3f GiB is below one block", gib);
    void *buf = aligned_alloc(ZERO_NVME_ALIGN, maxblock);
    if (!buf) die("out of memory for a %zu-byte block", maxblock);
    memset(buf, 0xa5, maxblock);

    printf("NVMe engine vs plain O_DIRECT: %.2f GiB file under %s (%s), GB = 1e9 bytes, median of %d rounds\n"
           "baseline: one thread, sequential pwrite then pread of the same size with the same block\n\n",
           (double)bytes / (1 << 30), dir, fs_name(dir), rounds);
    printf("  %-9s %5s %5s | %-27s | %-27s\n", "", "block", "", "write GB/s", "read GB/s");
    printf("  %-9s %5s %5s | %8s %8s %9s | %8s %8s %9s\n", "engine", "MiB", "depth", "engine", "plain", "engine/pl",
           "engine", "plain", "engine/pl");
    char note[2][256] = {"", ""};
    double ew[99], er[99], bw[99], br[99], qw[99], qr[99];
    for (int e = 0; e < nengines; e++)
        for (int i = 0; i < nblocks; i++)
            for (int q = 0; q < ndepths; q++) {
                size_t block = (size_t)blocks[i] << 20;
                for (int r = 0; r < rounds; r++) {
                    Rate b = plain_direct(dir, bytes, block, buf);
                    Rate x = engine_run(dir, engines[e], bytes, block, (int)depths[q], note[e], sizeof note[e]);
                    bw[r] = b.write; br[r] = b.read; ew[r] = x.write; er[r] = x.read;
                    qw[r] = x.write / b.write; qr[r] = x.read / b.read;
                }
                printf("  %-9s %5ld %5ld | %8.3f %8.3f %8.0f%% | %8.3f %8.3f %8.0f%%\n", engines[e], blocks[i],
                       depths[q], median(ew, rounds), median(bw, rounds), 100 * median(qw, rounds),
                       median(er, rounds), median(br, rounds), 100 * median(qr, rounds));
                fflush(stdout);
            }
    printf("\n(engine/pl: the median of each round's engine over plain)\n");
    for (int e = 0; e < nengines; e++) printf("engine %s: %s\n", engines[e], note[e]);
    free(buf);
    return 0;
}
