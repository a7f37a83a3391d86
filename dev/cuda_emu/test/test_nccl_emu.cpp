// test_nccl_emu.cpp: the emulated NCCL (dev/cuda_emu/nccl.cpp) across processes. Every rank
// is a process started by scripts/launch_ranks.sh (NO_MPI=1: RANK, WORLD_SIZE and
// ZERO_BOOTSTRAP_FILE); rank 0 draws the ncclUniqueId and hands it over in that file. The
// expectations come from NCCL's documentation (AllGather: rank r's chunk at offset r*count;
// point-to-point: a rank's sends to a peer match the peer's receives in order; groups let
// sends and receives progress together; ncclCommSplit orders the new ranks by key, then by
// old rank; NCCL_SPLIT_NOCOLOR gives no communicator; ncclCommAbort ends the waits).
//
//   test_nccl_emu            the cases below, every rank; "rank R: N passed, N failed"
//   test_nccl_emu mismatch   rank 1 joins with nranks WORLD_SIZE+1: refused on every rank
//   test_nccl_emu alone      WORLD_SIZE ranks asked, only this one comes: times out naming the rest
//
// Cases: all-gathers of distinct patterns at several sizes (one byte to several rings'
// worth), at offsets into their buffers, in place, several in one group; a send/recv ring
// bigger than a ring buffer; an all-to-all of grouped sends and receives with a send to
// oneself; two sends to one peer matched in order; a split into halves (keys reversed)
// and across, NCCL_SPLIT_NOCOLOR; broken callers: ranks that all-gather different sizes
// (an asynchronous ncclInvalidUsage naming both calls; the operation waits for ncclCommAbort), a peer that never issues its part
// (rank 0 times out naming the op, the rank and the peers), ncclCommAbort unblocking this
// rank's wait and failing its peers' later waits (ncclRemoteError).
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

static int g_passed = 0, g_failed = 0, g_rank = 0, g_world = 1;

#define CHECK(cond, ...)                                  \
    do {                                                  \
        if (cond) {                                       \
            g_passed++;                                   \
        } else {                                          \
            g_failed++;                                   \
            printf("rank %d: FAIL line %d: ", g_rank, __LINE__); \
            printf(__VA_ARGS__);                          \
            printf("\n");                                 \
            fflush(stdout);                               \
        }                                                 \
    } while (0)

#define OK(call)                                                                                     \
    do {                                                                                             \
        long r_ = (long)(call);                                                                      \
        if (r_ != 0) {                                                                               \
            printf("rank %d: FATAL line %d: %s returned %ld\n", g_rank, __LINE__, #call, r_);       \
            exit(2);                                                                                 \
        }                                                                                            \
    } while (0)

static double now_s() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int env_int(const char *k, int def) {
    const char *v = getenv(k);
    return v && *v ? atoi(v) : def;
}

// Rank 0 writes the id (temporary file, then rename); the others poll for it.
static ncclUniqueId share_id() {
    ncclUniqueId id;
    const char *path = getenv("ZERO_BOOTSTRAP_FILE");
    if (!path) { printf("rank %d: FATAL: no ZERO_BOOTSTRAP_FILE (start with NO_MPI=1 scripts/launch_ranks.sh)\n", g_rank); exit(2); }
    if (g_rank == 0) {
        OK(ncclGetUniqueId(&id));
        std::string tmp = std::string(path) + ".tmp";
        FILE *f = fopen(tmp.c_str(), "wb");
        if (!f || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0 || rename(tmp.c_str(), path) != 0) {
            printf("rank 0: FATAL: writing %s\n", path);
            exit(2);
        }
        return id;
    }
    for (double t0 = now_s(); now_s() - t0 < 60;) {
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t n = fread(&id, sizeof id, 1, f);
            fclose(f);
            if (n == 1) return id;
        }
        usleep(10000);
    }
    printf("rank %d: FATAL: no id in %s after 60 s\n", g_rank, path);
    exit(2);
}

static uint8_t pattern(int rank, size_t i, int salt) { return (uint8_t)(rank * 131 + i * 7 + (i >> 8) * 13 + salt * 29 + 1); }

static void fill(uint8_t *d, size_t n, int rank, int salt) {
    std::vector<uint8_t> h(n);
    for (size_t i = 0; i < n; i++) h[i] = pattern(rank, i, salt);
    OK(cudaMemcpy(d, h.data(), n, cudaMemcpyHostToDevice));
    // from pageable memory the copy may land after cudaMemcpy returns, and the collectives'
    // non-blocking streams do not wait for the legacy stream: wait here
    OK(cudaStreamSynchronize(0));
}

// First index where d[0..n) differs from rank's pattern, or -1.
static long mismatch(const uint8_t *d, size_t n, int rank, int salt) {
    std::vector<uint8_t> h(n);
    OK(cudaMemcpy(h.data(), d, n, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        if (h[i] != pattern(rank, i, salt)) return (long)i;
    return -1;
}

static cudaStream_t g_s;
static ncclComm_t g_world_comm;

static void barrier() {   // an all-gather of nothing much on the world communicator
    static uint8_t *b = nullptr;
    if (!b) OK(cudaMalloc(&b, 64 * 4));
    OK(ncclAllGather(b + g_rank * 4, b, 4, ncclUint8, g_world_comm, g_s));
    OK(cudaStreamSynchronize(g_s));
}

static void case_allgather(ncclComm_t comm, int n, int me, const char *label) {
    const size_t sizes[] = {1, 7, 4096 + 3, (3u << 20) + 5};
    for (size_t bytes : sizes) {
        for (int off = 0; off <= 5; off += 5) {
            uint8_t *send, *recv;
            OK(cudaMalloc(&send, bytes + off));
            OK(cudaMalloc(&recv, bytes * n + off));
            fill(send + off, bytes, me, (int)bytes);
            OK(ncclAllGather(send + off, recv + off, bytes, ncclUint8, comm, g_s));
            OK(cudaStreamSynchronize(g_s));
            for (int q = 0; q < n; q++) {
                long bad = mismatch(recv + off + q * bytes, bytes, q, (int)bytes);
                CHECK(bad < 0, "%s all-gather of %zu bytes at offset %d: rank %d's chunk differs at byte %ld", label, bytes,
                      off, q, bad);
            }
            OK(cudaFree(send));
            OK(cudaFree(recv));
        }
    }
    // in place, floats, and three in one group
    size_t count = 1000;
    float *buf;
    OK(cudaMalloc(&buf, count * n * sizeof(float)));
    std::vector<float> h(count * n, -1.0f);
    for (size_t i = 0; i < count; i++) h[me * count + i] = (float)(me * 10000 + i);
    OK(cudaMemcpyAsync(buf, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice, g_s));   // in g_s's order
    OK(ncclAllGather(buf + me * count, buf, count, ncclFloat32, comm, g_s));
    OK(cudaMemcpyAsync(h.data(), buf, h.size() * sizeof(float), cudaMemcpyDeviceToHost, g_s));
    OK(cudaStreamSynchronize(g_s));
    int wrong = 0;
    for (int q = 0; q < n; q++)
        for (size_t i = 0; i < count; i++) wrong += h[q * count + i] != (float)(q * 10000 + i);
    CHECK(wrong == 0, "%s in-place all-gather of floats: %d wrong", label, wrong);
    OK(cudaFree(buf));
    uint8_t *s3[3], *r3[3];
    const size_t b3[3] = {100, 70000, 3};
    OK(ncclGroupStart());
    for (int k = 0; k < 3; k++) {
        OK(cudaMalloc(&s3[k], b3[k]));
        OK(cudaMalloc(&r3[k], b3[k] * n));
        fill(s3[k], b3[k], me, 50 + k);
        OK(ncclAllGather(s3[k], r3[k], b3[k], ncclUint8, comm, g_s));
    }
    OK(ncclGroupEnd());
    OK(cudaStreamSynchronize(g_s));
    for (int k = 0; k < 3; k++) {
        for (int q = 0; q < n; q++)
            CHECK(mismatch(r3[k] + q * b3[k], b3[k], q, 50 + k) < 0, "%s grouped all-gather %d: rank %d's chunk", label, k, q);
        OK(cudaFree(s3[k]));
        OK(cudaFree(r3[k]));
    }
}

static float bf16_f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint16_t bf16_rne(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// ncclReduceScatter: float32 sums of integers (exact in any order), in place and grouped;
// bfloat16 sums whose result depends on the order: each element must be the sum of the
// ranks' values in some rotation of the ring, rounded to bf16 after every addition.
static void case_reduce_scatter(ncclComm_t comm, int n, int me) {
    const size_t count = 1000;
    std::vector<float> h(count * n), out(count);
    for (int q = 0; q < n; q++)
        for (size_t i = 0; i < count; i++) h[q * count + i] = (float)(me * 1000 + q * 10 + (int)(i % 7));
    float *buf, *recv;
    OK(cudaMalloc(&buf, h.size() * sizeof(float)));
    OK(cudaMalloc(&recv, count * sizeof(float)));
    for (int inplace = 0; inplace < 2; inplace++) {
        OK(cudaMemcpyAsync(buf, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice, g_s));
        float *dst = inplace ? buf + me * count : recv;
        OK(ncclReduceScatter(buf, dst, count, ncclFloat32, ncclSum, comm, g_s));
        OK(cudaMemcpyAsync(out.data(), dst, count * sizeof(float), cudaMemcpyDeviceToHost, g_s));
        OK(cudaStreamSynchronize(g_s));
        int wrong = 0;
        for (size_t i = 0; i < count; i++) {
            float want = 0;
            for (int r = 0; r < n; r++) want += (float)(r * 1000 + me * 10 + (int)(i % 7));
            wrong += out[i] != want;
        }
        CHECK(wrong == 0, "reduce-scatter of floats%s: %d of %zu wrong", inplace ? " in place" : "", wrong, count);
    }
    // bf16: rank r gives 1 + r/256 for element 0 and 2^-9 * (r + 1) for element 1 of every slice
    uint16_t *b16, *r16;
    const size_t c16 = 2;
    std::vector<uint16_t> hb(c16 * n), ob(c16 * 2);
    for (int q = 0; q < n; q++) {
        hb[q * c16] = bf16_rne(1.0f + me / 256.0f);
        hb[q * c16 + 1] = bf16_rne((me + 1) / 512.0f);
    }
    OK(cudaMalloc(&b16, hb.size() * 2));
    OK(cudaMalloc(&r16, c16 * 2 * 2));
    OK(cudaMemcpyAsync(b16, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice, g_s));
    OK(ncclGroupStart());   // two in one group
    OK(ncclReduceScatter(b16, r16, c16, ncclBfloat16, ncclSum, comm, g_s));
    OK(ncclReduceScatter(b16, r16 + c16, c16, ncclBfloat16, ncclSum, comm, g_s));
    OK(ncclGroupEnd());
    OK(cudaMemcpyAsync(ob.data(), r16, ob.size() * 2, cudaMemcpyDeviceToHost, g_s));
    OK(cudaStreamSynchronize(g_s));
    for (size_t i = 0; i < ob.size(); i++) {
        bool found = false;
        std::string sums;
        for (int first = 0; first < n && !found; first++) {
            uint16_t acc = 0;
            for (int k = 0; k < n; k++) {
                int r = (first + k) % n;
                uint16_t v = i % 2 == 0 ? bf16_rne(1.0f + r / 256.0f) : bf16_rne((r + 1) / 512.0f);
                acc = k == 0 ? v : bf16_rne(bf16_f(acc) + bf16_f(v));
            }
            found = acc == ob[i];
            sums += " " + std::to_string(bf16_f(acc));
        }
        CHECK(found, "bf16 reduce-scatter element %zu: %g is no ring order's sum (those are%s)", i, bf16_f(ob[i]), sums.c_str());
    }
    // ops the emulator does not sum are refused by name
    ncclResult_t r = ncclReduceScatter(buf, recv, count, ncclFloat32, ncclMax, comm, g_s);
    CHECK(r == ncclInvalidUsage && std::string(ncclGetLastError(comm)).find("ncclReduceScatter") != std::string::npos,
          "ncclMax is refused naming the call (%d: %s)", (int)r, ncclGetLastError(comm));
    // buffers that overlap other than in place are refused (NCCL would read what it overwrote)
    r = ncclReduceScatter(buf, buf + 1, count, ncclFloat32, ncclSum, comm, g_s);
    CHECK(r == ncclInvalidArgument && std::string(ncclGetLastError(comm)).find("overlap without being in place") !=
          std::string::npos, "a reduce-scatter into its own send buffer off the rank's offset is refused (%d: %s)", (int)r,
          ncclGetLastError(comm));
    r = ncclAllGather(buf + 1, buf, count, ncclFloat32, comm, g_s);
    CHECK(r == ncclInvalidArgument && std::string(ncclGetLastError(comm)).find("ncclAllGather") != std::string::npos,
          "an all-gather from inside its receive buffer off the rank's offset is refused (%d: %s)", (int)r,
          ncclGetLastError(comm));
    OK(cudaFree(buf));
    OK(cudaFree(recv));
    OK(cudaFree(b16));
    OK(cudaFree(r16));
}

static void case_p2p(ncclComm_t comm, int n, int me) {
    // a ring, larger than one ring buffer: every rank sends and receives at once
    size_t bytes = (2u << 20) + 17;
    uint8_t *a, *b;
    OK(cudaMalloc(&a, bytes));
    OK(cudaMalloc(&b, bytes));
    fill(a, bytes, me, 7);
    int to = (me + 1) % n, from = (me + n - 1) % n;
    OK(ncclGroupStart());
    OK(ncclSend(a, bytes, ncclUint8, to, comm, g_s));
    OK(ncclRecv(b, bytes, ncclUint8, from, comm, g_s));
    OK(ncclGroupEnd());
    OK(cudaStreamSynchronize(g_s));
    CHECK(mismatch(b, bytes, from, 7) < 0, "ring send/recv: the data from rank %d", from);
    OK(cudaFree(a));
    OK(cudaFree(b));
    // all-to-all: chunk (me -> q) has its own size and pattern; the one to oneself too
    std::vector<uint8_t *> sb(n), rb(n);
    auto sz = [](int p, int q) { return (size_t)(1000 + 313 * p + 77 * q); };
    for (int q = 0; q < n; q++) {
        OK(cudaMalloc(&sb[q], sz(me, q)));
        OK(cudaMalloc(&rb[q], sz(q, me)));
        fill(sb[q], sz(me, q), me, 100 + q);
    }
    OK(ncclGroupStart());
    for (int q = 0; q < n; q++) {
        OK(ncclSend(sb[q], sz(me, q), ncclUint8, q, comm, g_s));
        OK(ncclRecv(rb[q], sz(q, me), ncclUint8, q, comm, g_s));
    }
    OK(ncclGroupEnd());
    OK(cudaStreamSynchronize(g_s));
    for (int q = 0; q < n; q++) {
        CHECK(mismatch(rb[q], sz(q, me), q, 100 + me) < 0, "all-to-all: the chunk from rank %d", q);
        OK(cudaFree(sb[q]));
        OK(cudaFree(rb[q]));
    }
    // two sends to one peer, matched with its two receives in order; sizes differ
    uint8_t *x, *y, *rx, *ry;
    OK(cudaMalloc(&x, 300));
    OK(cudaMalloc(&y, 500));
    OK(cudaMalloc(&rx, 300));
    OK(cudaMalloc(&ry, 500));
    fill(x, 300, me, 1);
    fill(y, 500, me, 2);
    OK(ncclGroupStart());
    OK(ncclRecv(rx, 300, ncclUint8, from, comm, g_s));
    OK(ncclSend(x, 300, ncclUint8, to, comm, g_s));
    OK(ncclSend(y, 500, ncclUint8, to, comm, g_s));
    OK(ncclRecv(ry, 500, ncclUint8, from, comm, g_s));
    OK(ncclGroupEnd());
    OK(cudaStreamSynchronize(g_s));
    CHECK(mismatch(rx, 300, from, 1) < 0 && mismatch(ry, 500, from, 2) < 0, "two sends to one peer match in order");
    OK(cudaFree(x));
    OK(cudaFree(y));
    OK(cudaFree(rx));
    OK(cudaFree(ry));
}

static void case_split(int n, int me) {
    // halves, keys reversed: the new rank follows the key
    ncclComm_t half = nullptr, across = nullptr, none = nullptr;
    int color = me < n / 2 ? 0 : 1;
    OK(ncclCommSplit(g_world_comm, color, -me, &half, nullptr));
    int hn = 0, hr = -1;
    ncclCommCount(half, &hn);
    ncclCommUserRank(half, &hr);
    int first = color == 0 ? 0 : n / 2, size = color == 0 ? n / 2 : n - n / 2;
    CHECK(hn == size && hr == first + size - 1 - me, "split in halves (keys -rank): rank %d of %d, expected %d of %d", hr, hn,
          first + size - 1 - me, size);
    // all-gather on the half: chunk j is from the member of new rank j (its data carries its world rank)
    uint8_t *s, *r;
    OK(cudaMalloc(&s, 4096));
    OK(cudaMalloc(&r, 4096 * hn));
    fill(s, 4096, me, 9);
    OK(ncclAllGather(s, r, 4096, ncclUint8, half, g_s));
    OK(cudaStreamSynchronize(g_s));
    for (int j = 0; j < hn; j++) {
        int world_rank = first + size - 1 - j;
        CHECK(mismatch(r + j * 4096, 4096, world_rank, 9) < 0, "all-gather on the half: new rank %d is world rank %d", j,
              world_rank);
    }
    // across: even and odd ranks, keys equal (old rank breaks the tie)
    OK(ncclCommSplit(g_world_comm, me % 2, 0, &across, nullptr));
    int an = 0, ar = -1;
    ncclCommCount(across, &an);
    ncclCommUserRank(across, &ar);
    CHECK(an == (n - me % 2 + 1) / 2 && ar == me / 2, "split across (equal keys): rank %d of %d", ar, an);
    if (an > 1) case_p2p(across, an, ar);
    // NCCL_SPLIT_NOCOLOR on the last rank: no communicator there, the others still get one
    OK(ncclCommSplit(g_world_comm, me == n - 1 ? NCCL_SPLIT_NOCOLOR : 3, 0, &none, nullptr));
    CHECK((me == n - 1) == (none == nullptr), "NCCL_SPLIT_NOCOLOR gives no communicator (and only there)");
    if (none) {
        int c = 0;
        ncclCommCount(none, &c);
        CHECK(c == n - 1, "the split without the last rank has %d ranks", c);
        OK(ncclCommDestroy(none));
    }
    OK(cudaFree(s));
    OK(cudaFree(r));
    OK(ncclCommDestroy(half));
    OK(ncclCommDestroy(across));
}

// A failed operation does not end by itself (as an NCCL kernel whose peer is gone): poll
// the asynchronous error, as a watchdog does, then abort, which ends it.
static ncclResult_t async_error_then_abort(ncclComm_t c, cudaStream_t s, std::string *msg, double *secs) {
    double t0 = now_s();
    ncclResult_t ae = ncclSuccess;
    while (ncclCommGetAsyncError(c, &ae) == ncclSuccess && ae == ncclSuccess && now_s() - t0 < 60) usleep(10000);
    *secs = now_s() - t0;
    *msg = ncclGetLastError(c);
    CHECK(cudaStreamQuery(s) == cudaErrorNotReady, "the failed operation waits for ncclCommAbort");
    OK(ncclCommAbort(c));
    OK(cudaStreamSynchronize(s));
    return ae;
}

static void case_broken(int n, int me) {
    // ranks all-gathering different sizes: every rank gets an asynchronous error
    ncclComm_t m;
    OK(ncclCommSplit(g_world_comm, 0, me, &m, nullptr));
    uint8_t *s, *r;
    OK(cudaMalloc(&s, 64));
    OK(cudaMalloc(&r, 64 * n));
    OK(ncclAllGather(s, r, me == 1 ? 16 : 8, ncclUint8, m, g_s));
    std::string msg;
    double dt;
    ncclResult_t ae = async_error_then_abort(m, g_s, &msg, &dt);
    CHECK(ae == ncclInvalidUsage || ae == ncclRemoteError, "different all-gather sizes: asynchronous error %d", (int)ae);
    CHECK(msg.find("ncclAllGather") != std::string::npos, "the message names the call: %s", msg.c_str());
    barrier();

    // a peer that never issues its part: rank 0 times out on a communicator made with
    // CUDA_EMU_NCCL_TIMEOUT=2 (its other waits keep the long one: a busy peer is no fault)
    ncclComm_t t;
    std::string long_wait = getenv("CUDA_EMU_NCCL_TIMEOUT");
    if (me == 0) setenv("CUDA_EMU_NCCL_TIMEOUT", "2", 1);
    OK(ncclCommSplit(g_world_comm, 0, me, &t, nullptr));
    setenv("CUDA_EMU_NCCL_TIMEOUT", long_wait.c_str(), 1);
    if (me == 0) {
        OK(ncclAllGather(s, r, 8, ncclUint8, t, g_s));
        ae = async_error_then_abort(t, g_s, &msg, &dt);
        std::string peers = n == 2 ? "rank(s) 1" : "rank(s) 1, 2, 3";
        CHECK(ae == ncclSystemError && dt > 1.5 && dt < 30, "a missing peer: async error %d after %.1f s", (int)ae, dt);
        CHECK(msg.find("ncclAllGather") != std::string::npos && msg.find("rank 0 of") != std::string::npos &&
                  msg.find(peers) != std::string::npos,
              "the timeout names the op, the rank and the peers (%s): %s", peers.c_str(), msg.c_str());
    }
    barrier();   // the others wait here (their timeout is longer)
    if (me != 0) OK(ncclCommDestroy(t));

    // ncclCommAbort: rank 0's wait ends at once; the peers' later waits fail (ncclRemoteError)
    ncclComm_t a;
    OK(ncclCommSplit(g_world_comm, 0, me, &a, nullptr));
    if (me == 0) {
        cudaStream_t s2;
        OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
        OK(ncclAllGather(s, r, 8, ncclUint8, a, s2));
        usleep(300000);
        double t0 = now_s();
        OK(ncclCommAbort(a));
        OK(cudaStreamSynchronize(s2));
        CHECK(now_s() - t0 < 1.5, "ncclCommAbort ends this rank's wait (%.2f s)", now_s() - t0);
        OK(cudaStreamDestroy(s2));
    }
    barrier();
    if (me != 0) {
        OK(ncclAllGather(s, r, 8, ncclUint8, a, g_s));
        ae = async_error_then_abort(a, g_s, &msg, &dt);
        CHECK(ae == ncclRemoteError && msg.find("rank 0 aborted") != std::string::npos,
              "a peer's abort fails this rank's wait: error %d: %s", (int)ae, msg.c_str());
    }
    OK(cudaFree(s));
    OK(cudaFree(r));
}

int main(int argc, char **argv) {
    g_rank = env_int("RANK", 0);
    g_world = env_int("WORLD_SIZE", 1);
    std::string mode = argc > 1 ? argv[1] : "";
    // a rank alone gives up on its missing peer soon; every other wait may be long on a busy
    // machine (the missing-peer case below shortens its own communicator's)
    setenv("CUDA_EMU_NCCL_TIMEOUT", mode == "alone" ? "2" : "60", 0);
    ncclUniqueId id = share_id();
    if (mode == "mismatch" || mode == "alone") {
        int n = mode == "mismatch" && g_rank == 1 ? g_world + 1 : g_world;
        double t0 = now_s();
        ncclComm_t c = nullptr;
        ncclResult_t r = ncclCommInitRank(&c, n, id, g_rank);
        std::string msg = ncclGetLastError(nullptr);
        printf("rank %d: ncclCommInitRank(nranks %d) returned %d after %.1f s: %s\n", g_rank, n, (int)r, now_s() - t0,
               msg.c_str());
        CHECK(r != ncclSuccess && c == nullptr, "the set-up is refused");
        if (mode == "mismatch")
            CHECK(msg.find("nranks") != std::string::npos, "the message names nranks: %s", msg.c_str());
        else
            CHECK(r == ncclSystemError && msg.find("rank(s) 1") != std::string::npos, "the message names the missing ranks: %s",
                  msg.c_str());
        printf("rank %d: %d passed, %d failed\n", g_rank, g_passed, g_failed);
        return g_failed ? 1 : 0;
    }
    OK(cudaStreamCreateWithFlags(&g_s, cudaStreamNonBlocking));
    OK(ncclCommInitRank(&g_world_comm, g_world, id, g_rank));
    int n = 0, me = -1;
    ncclCommCount(g_world_comm, &n);
    ncclCommUserRank(g_world_comm, &me);
    CHECK(n == g_world && me == g_rank, "the world communicator: rank %d of %d", me, n);
    double t0 = now_s();
    case_allgather(g_world_comm, n, me, "world");
    case_reduce_scatter(g_world_comm, n, me);
    case_p2p(g_world_comm, n, me);
    if (n > 1) {
        case_split(n, me);
        case_broken(n, me);
    }
    barrier();
    OK(ncclCommDestroy(g_world_comm));
    OK(cudaStreamDestroy(g_s));
    printf("rank %d: %d passed, %d failed (%.1f s)\n", g_rank, g_passed, g_failed, now_s() - t0);
    return g_failed ? 1 : 0;
}
