// nccl.cpp: NCCL for communicators of one rank or of several ranks in several processes
// (or threads) on this machine, as NCCL's documentation (docs.nvidia.com/deeplearning/nccl,
// "API" and "Group Calls" / "Point-to-point communication") defines them:
//  - ncclGetUniqueId draws a random id; ncclCommInitRank(nranks, id, rank) blocks until all
//    nranks ranks of the id have joined (a rendezvous in POSIX shared memory, /dev/shm,
//    named after the id and unlinked once every rank has mapped it). A rank that joins
//    with another nranks, a rank joined twice, or an id reused for a second communicator
//    is refused; a rank that never arrives makes the others fail after
//    CUDA_EMU_NCCL_TIMEOUT seconds (default 120), naming the ranks missing.
//  - collectives and point-to-point calls are operations queued on the stream given; when
//    the stream reaches one, the rank moves its data through shared-memory rings (one per
//    ordered pair of ranks, FIFO, so a rank's sends to a peer match that peer's receives
//    in order, as NCCL matches them). ncclAllGather places rank r's chunk at r*count.
//    ncclReduceScatter (ncclSum of float32, bfloat16, float64) sends chunk q to rank q, which
//    sums the chunks in an order NCCL does not document: here from a rank drawn from
//    CUDA_EMU_SEED and the operation, round the ring, rounding to the type at every addition.
//    Operations of one communicator run in the order they were issued, whatever stream
//    they are on. Where the documentation leaves a choice, the emulation takes the one
//    that breaks code relying on luck: a send completes only once its receiver has taken
//    all of it (as a large NCCL send does), so ncclSend/ncclRecv pairs that need a group
//    to progress deadlock here too, and every message carries its kind and size, so ranks
//    that call different operations (or sizes) in the same position fail by name instead
//    of exchanging garbage.
//  - a wait that sees no movement for CUDA_EMU_NCCL_TIMEOUT seconds (its value when the
//    communicator was created, so a test may give one communicator a short one; a split's
//    set-up waits at least as long as its parent's calls), a peer
//    that aborted, failed, destroyed its communicator or exited, or a message of another
//    kind or size fails the operation: the message names the operation, the rank and the peers, and the
//    communicator gets an asynchronous error (ncclCommGetAsyncError: ncclSystemError for a
//    timeout, ncclRemoteError for a peer, ncclInvalidUsage for mismatched calls). As an NCCL
//    kernel whose peer is gone, the operation (and every later one of the communicator)
//    then does not end until this process calls ncclCommAbort: a program that never checks
//    the asynchronous error hangs here as on a GPU, and meets the runtime's hang report
//    (CUDA_EMU_HANG_S). No CUDA fault is raised. (NCCL itself has no such timeout; a wait
//    for peers that keep moving does not count against it, nor against the hang report.)
//  - ncclCommSplit is a blocking collective over the parent (color, key, NCCL_SPLIT_NOCOLOR):
//    the new communicators order their ranks by key, then by parent rank.
//  - ncclCommAbort unblocks this process's waits on the communicator and tells the peers
//    (they fail with ncclRemoteError); ncclCommDestroy waits for the communicator's queued
//    operations first (NCCL's destroy finalizes: it flushes them).
//  - "it is not allowed to issue NCCL operations to a single communicator in parallel with
//    multiple threads ... for any grouped NCCL operations, users need to ensure only one
//    thread issues all the operations in the group" (Thread Safety): an operation call
//    (ncclAllGather, ncclReduceScatter, ncclAllReduce, ncclBroadcast, ncclSend, ncclRecv) on a communicator
//    that another host thread is inside an operation call on, or on which another thread
//    has an open group's operations, ends the process naming both threads. Using one
//    communicator from several threads one at a time is allowed; when a call comes from
//    another thread than the communicator's last one, the emulator keeps it inside the call
//    for 2 ms, so that a third call racing with it is caught rather than missed.
// A send to oneself is matched with the receive of the same group; outside a group it
// would wait forever for its receive, and is refused. ncclAllReduce and ncclBroadcast are
// emulated for one rank only (the project calls neither across ranks).
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <nccl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "emu.h"

namespace {

constexpr int MAX_RANKS = 64;
constexpr size_t RING = 1u << 20;   // bytes of one ring (one ordered pair of ranks)
enum Kind : uint32_t { K_ALLGATHER = 1, K_P2P = 2, K_REDUCESCATTER = 3 };
enum State : int { S_NONE = 0, S_JOINED = 1, S_MAPPED = 2, S_LEFT = 3, S_ABORTED = 4, S_FAILED = 5 };

struct alignas(64) Slot {
    std::atomic<int> pid;
    std::atomic<int> state;
    std::atomic<uint32_t> bell;       // futex word: bumped when something this rank waits for moves
    std::atomic<uint64_t> split_seq;  // ncclCommSplit exchanges: the last one published
    int64_t split_val[2][2];          // [seq parity][color, key]
};

struct Header {   // the rendezvous segment, one per communicator
    std::atomic<int> nranks;
    std::atomic<int> error_rank;   // -1 + rank that refused the set-up (0: none)
    char error[512];
    Slot slot[MAX_RANKS];
};

struct alignas(64) RingHdr {
    std::atomic<uint64_t> head;   // bytes written by the sender
    char pad[56];
    std::atomic<uint64_t> tail;   // bytes taken by the receiver
    char pad2[56];
};
constexpr size_t RING_STRIDE = sizeof(RingHdr) + RING;

struct MsgHdr {
    uint32_t magic_kind;
    uint32_t rank;
    uint64_t bytes;
};

// CUDA_EMU_NCCL_TIMEOUT as a communicator is created: each keeps the value it was made with
double env_timeout_s() {
    const char *e = getenv("CUDA_EMU_NCCL_TIMEOUT");
    double v = e && *e ? atof(e) : 120.0;
    return v > 0 ? v : 120.0;
}

double now_s() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void futex_wait(std::atomic<uint32_t> *w, uint32_t v, double secs) {
    struct timespec ts;
    ts.tv_sec = (time_t)secs;
    ts.tv_nsec = (long)((secs - (double)ts.tv_sec) * 1e9);
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, v, &ts, nullptr, 0);
}

void ring_bell(std::atomic<uint32_t> *w) {
    w->fetch_add(1, std::memory_order_release);
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

bool pid_alive(int pid) { return pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH; }

}  // namespace

struct ncclComm {
    int nranks = 1, rank = 0;
    uint64_t token[2] = {0, 0};   // names the shared segments
    std::string name;             // "/cuda_emu_nccl_<token>"
    Header *hdr = nullptr;
    char *seg[MAX_RANKS] = {};    // rank q's inbound rings (ring from p into q: seg[q] + p * RING_STRIDE)
    size_t seg_bytes = 0;
    uint64_t splits = 0;          // ncclCommSplit calls so far
    double timeout = 120;         // CUDA_EMU_NCCL_TIMEOUT when it was created

    std::atomic<bool> aborted{false};
    std::atomic<int> async_err{ncclSuccess};
    std::mutex mu;                // the fields below, and last_error
    std::condition_variable cv;
    uint64_t issued = 0, next_run = 0, finished = 0;
    int running = 0;
    std::string last_error;
    // the host threads operating it (Thread Safety): inside an operation call now, the last
    // one to make one, the one whose open group holds some of its operations
    std::atomic<long> user{0};
    std::atomic<long> last_user{0}, group_owner{0};
    std::string user_call;

    RingHdr *ring(int from, int to) { return (RingHdr *)(seg[to] + (size_t)from * RING_STRIDE); }
    char *ring_data(int from, int to) { return seg[to] + (size_t)from * RING_STRIDE + sizeof(RingHdr); }
};

namespace {

struct Call {   // one NCCL call of an open group
    int kind;   // K_ALLGATHER, K_P2P or K_REDUCESCATTER
    bool send;  // for K_P2P
    const void *sbuf;
    void *rbuf;
    size_t bytes;   // per rank
    int peer;
    ncclComm *comm;
    cudaStream_t stream;
    ncclDataType_t dt = ncclFloat32;   // K_REDUCESCATTER: what it sums
};

std::mutex g_mu;   // the id registry
std::map<std::pair<uint64_t, uint64_t>, std::pair<int, uint64_t>> g_ids;   // token -> nranks, ranks joined (bits)
thread_local int t_group_depth = 0;
thread_local std::vector<Call> t_pending;   // the open group's calls
thread_local std::string t_last_error;

size_t type_size(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

void set_error(ncclComm *c, const char *msg) {
    t_last_error = msg;
    if (c) {
        std::lock_guard<std::mutex> lk(c->mu);
        c->last_error = msg;
    }
}

ncclResult_t bad(ncclComm *c, ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
ncclResult_t bad(ncclComm *c, ncclResult_t r, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    emu::say("NCCL: %s", msg);
    set_error(c, msg);
    return r;
}

// The checks every call makes: not from a host function, a live communicator.
ncclResult_t entry(ncclComm *c, const char *call) {
    emu::init();
    if (emu::in_host_function())
        return bad(c, ncclInvalidUsage, "%s called from a host function (cudaLaunchHostFunc)", call);
    if (!c) return bad(c, ncclInvalidArgument, "%s with a null communicator", call);
    if (c->aborted) return bad(c, ncclInvalidUsage, "%s on an aborted communicator", call);
    return ncclSuccess;
}

std::string hex(const uint64_t t[2]) {
    char b[40];
    snprintf(b, sizeof b, "%016llx%016llx", (unsigned long long)t[0], (unsigned long long)t[1]);
    return b;
}

std::string seg_name(const ncclComm *c, int r) { return c->name + "_r" + std::to_string(r); }

std::string rank_list(const std::vector<int> &v) {
    std::string s;
    for (size_t i = 0; i < v.size(); i++) s += (i ? ", " : "") + std::to_string(v[i]);
    return s;
}

void *map_shm(const std::string &name, int flags, size_t bytes, bool grow, const char **why) {
    int fd = shm_open(name.c_str(), flags, 0600);
    if (fd < 0) { *why = "shm_open"; return nullptr; }
    if (grow && ftruncate(fd, (off_t)bytes) != 0) { close(fd); *why = "ftruncate"; return nullptr; }
    void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) { *why = "mmap"; return nullptr; }
    return p;
}

void unmap_all(ncclComm *c) {
    for (int q = 0; q < c->nranks && q < MAX_RANKS; q++)
        if (c->seg[q]) { munmap(c->seg[q], c->seg_bytes); c->seg[q] = nullptr; }
    if (c->hdr) { munmap(c->hdr, sizeof(Header)); c->hdr = nullptr; }
}

// Marks this rank's end in the shared header and wakes every peer.
void post_state(ncclComm *c, State s) {
    if (!c->hdr) return;
    c->hdr->slot[c->rank].state.store(s, std::memory_order_release);
    for (int q = 0; q < c->nranks; q++) ring_bell(&c->hdr->slot[q].bell);
}

const char *state_word(int s) {
    switch (s) {
    case S_LEFT: return "destroyed its communicator";
    case S_ABORTED: return "aborted its communicator";
    case S_FAILED: return "failed an operation on it";
    default: return "exited";
    }
}

// A peer that can no longer take part (exited, aborted, failed, left): its description, or "".
std::string peer_gone(ncclComm *c, int q, bool left_ok) {
    Slot &s = c->hdr->slot[q];
    int st = s.state.load(std::memory_order_acquire);
    if (st == S_ABORTED || st == S_FAILED || (st == S_LEFT && !left_ok))
        return "rank " + std::to_string(q) + " " + state_word(st);
    int pid = s.pid.load();
    if (pid > 0 && !pid_alive(pid)) return "rank " + std::to_string(q) + " (pid " + std::to_string(pid) + ") exited";
    return "";
}

// The rendezvous of ncclCommInitRank (and of each new communicator of ncclCommSplit).
ncclResult_t join(ncclComm *c, const char *call) {
    const int n = c->nranks, r = c->rank;
    c->name = "/cuda_emu_nccl_" + hex(c->token);
    const char *why = "";
    c->hdr = (Header *)map_shm(c->name, O_CREAT | O_RDWR, sizeof(Header), true, &why);
    if (!c->hdr)
        return bad(nullptr, ncclSystemError, "%s: rank %d of %d: %s of %s: %s", call, r, n, why, c->name.c_str(),
                   strerror(errno));
    Header *h = c->hdr;
    bool own_seg = false;
    auto fail = [&](ncclResult_t res, const std::string &msg, bool tell) {
        if (tell && h->error_rank.load() == 0) {
            snprintf(h->error, sizeof h->error, "%s", msg.c_str());
            h->error_rank.store(r + 1, std::memory_order_release);
            for (int q = 0; q < MAX_RANKS; q++) ring_bell(&h->slot[q].bell);
        }
        if (own_seg) shm_unlink(seg_name(c, r).c_str());
        shm_unlink(c->name.c_str());   // no file left behind; a late rank makes a fresh one and times out
        unmap_all(c);
        return bad(nullptr, res, "%s: %s", call, msg.c_str());
    };
    int expect = 0;
    if (!h->nranks.compare_exchange_strong(expect, n) && expect != n)
        return fail(ncclInvalidUsage,
                    "rank " + std::to_string(r) + " joined with nranks " + std::to_string(n) + ", but the ranks before it " +
                        "joined this id with nranks " + std::to_string(expect),
                    true);
    int pid0 = 0;
    if (!h->slot[r].pid.compare_exchange_strong(pid0, (int)getpid()))
        return fail(ncclInvalidUsage,
                    "rank " + std::to_string(r) + " of " + std::to_string(n) + " joined twice (it is already process " +
                        std::to_string(pid0) + ")",
                    true);
    c->seg_bytes = (size_t)n * RING_STRIDE;
    c->seg[r] = (char *)map_shm(seg_name(c, r), O_CREAT | O_EXCL | O_RDWR, c->seg_bytes, true, &why);
    if (!c->seg[r])
        return fail(ncclSystemError, std::string(why) + " of " + seg_name(c, r) + ": " + strerror(errno), true);
    own_seg = true;
    auto wait_all = [&](int at_least, const char *stage) -> std::string {
        double deadline = now_s() + c->timeout;
        for (;;) {
            uint32_t b = h->slot[r].bell.load(std::memory_order_acquire);
            if (int e = h->error_rank.load(std::memory_order_acquire)) return std::string("rank ") + std::to_string(e - 1) +
                                                                                 " refused: " + h->error;
            std::vector<int> missing;
            for (int q = 0; q < n; q++) {
                int st = h->slot[q].state.load(std::memory_order_acquire);
                if (st >= at_least) continue;   // it passed this stage (and may be further on)
                if (h->slot[q].pid.load() > 0 && !pid_alive(h->slot[q].pid.load()))
                    return "rank " + std::to_string(q) + " exited during the set-up";
                missing.push_back(q);
            }
            if (missing.empty()) return "";
            if (now_s() > deadline)
                return "rank " + std::to_string(r) + " of " + std::to_string(n) + " waited " +
                       std::to_string((int)c->timeout) + " s " + stage + " for rank(s) " + rank_list(missing) +
                       " (CUDA_EMU_NCCL_TIMEOUT): are all ranks running, with the same id?";
            emu::progress();
            futex_wait(&h->slot[r].bell, b, 0.05);
        }
    };
    post_state(c, S_JOINED);
    std::string e = wait_all(S_JOINED, "to join");
    if (!e.empty()) return fail(e.find("waited") != std::string::npos ? ncclSystemError : ncclRemoteError, e, true);
    for (int q = 0; q < n; q++) {
        if (q == r) continue;
        c->seg[q] = (char *)map_shm(seg_name(c, q), O_RDWR, c->seg_bytes, false, &why);
        if (!c->seg[q]) return fail(ncclSystemError, std::string(why) + " of " + seg_name(c, q) + ": " + strerror(errno), true);
    }
    post_state(c, S_MAPPED);
    e = wait_all(S_MAPPED, "to map the rings");
    if (!e.empty()) return fail(ncclRemoteError, e, true);
    shm_unlink(seg_name(c, r).c_str());   // every rank has it mapped: nothing stays in /dev/shm
    shm_unlink(c->name.c_str());
    return ncclSuccess;
}

// Registers the use of an id in this process: one communicator per id, each rank once.
ncclResult_t claim_id(const uint64_t tok[2], int nranks, int rank, const char *call) {
    std::lock_guard<std::mutex> lk(g_mu);
    auto &e = g_ids[{tok[0], tok[1]}];
    if (e.first && e.first != nranks)
        return bad(nullptr, ncclInvalidUsage,
                   "%s: this ncclUniqueId already named a communicator of %d ranks here; nranks %d is another one (draw "
                   "a new id)", call, e.first, nranks);
    if (rank < 64 && (e.second >> rank & 1))
        return bad(nullptr, ncclInvalidUsage, "%s: rank %d of this ncclUniqueId already joined in this process", call, rank);
    e.first = nranks;
    if (rank < 64) e.second |= 1ull << rank;
    return ncclSuccess;
}

// parent: the communicator split (NULL for ncclCommInitRank), whose timeout the new one's
// set-up keeps when it is the longer (a split is a call on the parent).
ncclResult_t make_comm(ncclComm_t *out, int nranks, const uint64_t tok[2], int rank, const char *call,
                       const ncclComm *parent) {
    ncclResult_t r = claim_id(tok, nranks, rank, call);
    if (r != ncclSuccess) return r;
    ncclComm *c = new ncclComm;
    c->nranks = nranks;
    c->rank = rank;
    c->token[0] = tok[0];
    c->token[1] = tok[1];
    const double own = env_timeout_s();
    c->timeout = parent && parent->timeout > own ? parent->timeout : own;
    if (nranks > 1) {
        r = join(c, call);
        if (r != ncclSuccess) {
            delete c;
            return r;
        }
    }
    c->timeout = own;
    *out = c;
    return ncclSuccess;
}

// ---------------------------------------------------------------- operations on a stream

struct Xfer {
    bool send;
    int peer;
    char *buf;
    size_t bytes;
    uint32_t kind;
    bool hdr_done = false;
    size_t done = 0;
    uint64_t end = 0;   // send: the ring position after its last byte
};

struct Copy {
    void *dst;
    const void *src;
    size_t bytes;
};

// A reduce-scatter's sum, once every rank's slice for this one has landed in `in` (rank q's
// at q * count elements).
struct Sum {
    std::shared_ptr<std::vector<char>> in;
    void *out;
    size_t count;
    ncclDataType_t dt;
};

struct CommOp {   // one communicator's part of a group
    ncclComm *comm;
    uint64_t ticket;
    std::string what;
    std::vector<Copy> local;
    std::vector<Xfer> x;
    std::vector<Sum> sums;   // after the transfers
};

const char *kind_name(uint32_t k, bool send) {
    return k == K_ALLGATHER ? "ncclAllGather" : k == K_REDUCESCATTER ? "ncclReduceScatter" : send ? "ncclSend" : "ncclRecv";
}

float bf16_value(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
uint16_t bf16_round(float f) {   // to nearest even; a NaN stays a NaN
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// NCCL documents no order for a sum. The one here starts at a rank drawn from the seed and
// the operation's ticket and goes round the ring, and (as NCCL's bf16 buffers do) rounds to
// the type after every addition: code that expects rank order, or the same bits at another
// rank count or seed, sees the difference.
void run_sum(const Sum &m, int nranks, uint64_t ticket) {
    const int first = (int)((emu::seed() * 0x9e3779b97f4a7c15ull + ticket * 0xbf58476d1ce4e5b9ull) >> 33) % nranks;
    const char *in = m.in->data();
    for (size_t i = 0; i < m.count; i++) {
        if (m.dt == ncclBfloat16) {
            const uint16_t *v = (const uint16_t *)in;
            uint16_t acc = v[(size_t)first * m.count + i];
            for (int k = 1; k < nranks; k++)
                acc = bf16_round(bf16_value(acc) + bf16_value(v[(size_t)((first + k) % nranks) * m.count + i]));
            ((uint16_t *)m.out)[i] = acc;
        } else if (m.dt == ncclFloat32) {
            const float *v = (const float *)in;
            float acc = v[(size_t)first * m.count + i];
            for (int k = 1; k < nranks; k++) acc += v[(size_t)((first + k) % nranks) * m.count + i];
            ((float *)m.out)[i] = acc;
        } else {
            const double *v = (const double *)in;
            double acc = v[(size_t)first * m.count + i];
            for (int k = 1; k < nranks; k++) acc += v[(size_t)((first + k) % nranks) * m.count + i];
            ((double *)m.out)[i] = acc;
        }
    }
}

void copy_ring(char *ring, uint64_t pos, char *dst, const char *src, size_t bytes, bool into_ring) {
    size_t off = (size_t)(pos % RING), first = bytes < RING - off ? bytes : RING - off;
    if (into_ring) {
        memcpy(ring + off, src, first);
        memcpy(ring, src + first, bytes - first);
    } else {
        memcpy(dst, ring + off, first);
        memcpy(dst + first, ring, bytes - first);
    }
}

// The next piece of x's payload (at most room bytes) between its buffer and the ring at
// pos (into the ring for a send); its size.
size_t move_payload(Xfer &x, char *data, uint64_t pos, size_t room) {
    if (!x.hdr_done || x.done == x.bytes || room == 0) return 0;
    size_t k = x.bytes - x.done < room ? x.bytes - x.done : room;
    copy_ring(data, pos, x.buf + x.done, x.buf + x.done, k, x.send);
    x.done += k;
    return k;
}

// Makes a ring's new head (sender) or tail (receiver) visible and wakes the peer.
void publish(ncclComm *c, std::atomic<uint64_t> &where, uint64_t pos, int peer, bool &moved) {
    where.store(pos, std::memory_order_release);
    ring_bell(&c->hdr->slot[peer].bell);
    moved = true;
}

// Moves what can move now; "" or an error. moved: whether anything did.
std::string step(ncclComm *c, Xfer &x, bool &moved) {
    const int me = c->rank;
    if (x.send) {
        RingHdr *rh = c->ring(me, x.peer);
        char *data = c->ring_data(me, x.peer);
        uint64_t head = rh->head.load(std::memory_order_relaxed), tail = rh->tail.load(std::memory_order_acquire);
        size_t space = RING - (size_t)(head - tail);
        bool wrote = false;
        if (!x.hdr_done && space >= sizeof(MsgHdr)) {
            MsgHdr m = {(uint32_t)(0xC0DE0000u | x.kind), (uint32_t)me, x.bytes};
            copy_ring(data, head, nullptr, (const char *)&m, sizeof m, true);
            head += sizeof m;
            space -= sizeof m;
            x.hdr_done = wrote = true;
        }
        size_t k = move_payload(x, data, head, space);
        head += k;
        if (wrote || k) {
            publish(c, rh->head, head, x.peer, moved);
            if (x.done == x.bytes) x.end = head;
        }
        return "";
    }
    RingHdr *rh = c->ring(x.peer, me);
    char *data = c->ring_data(x.peer, me);
    uint64_t tail = rh->tail.load(std::memory_order_relaxed), head = rh->head.load(std::memory_order_acquire);
    size_t avail = (size_t)(head - tail);
    bool took = false;
    if (!x.hdr_done && avail >= sizeof(MsgHdr)) {
        MsgHdr m;
        copy_ring(data, tail, (char *)&m, nullptr, sizeof m, false);
        uint32_t k = m.magic_kind & 0xffff;
        if ((m.magic_kind & 0xffff0000u) != 0xC0DE0000u || (int)m.rank != x.peer)
            return "the ring from rank " + std::to_string(x.peer) + " is corrupt";
        if (k != x.kind || m.bytes != x.bytes) {
            char b[400];
            snprintf(b, sizeof b,
                     "rank %d's %s expected %s of %zu bytes from rank %d there, and met its %s of %llu bytes: the ranks' "
                     "calls on this communicator differ in kind, size or order",
                     me, kind_name(x.kind, false), kind_name(x.kind, true), x.bytes, x.peer, kind_name(k, true),
                     (unsigned long long)m.bytes);
            return b;
        }
        tail += sizeof m;
        avail -= sizeof m;
        x.hdr_done = took = true;
    }
    size_t k = move_payload(x, data, tail, avail);
    tail += k;
    if (took || k) publish(c, rh->tail, tail, x.peer, moved);
    return "";
}

bool xfer_finished(ncclComm *c, const Xfer &x) {
    if (!x.hdr_done || x.done < x.bytes) return false;
    return !x.send || c->ring(c->rank, x.peer)->tail.load(std::memory_order_acquire) >= x.end;
}

// Fails the operation: the communicator's asynchronous error, its peers told.
void op_failed(ncclComm *c, const CommOp &op, ncclResult_t res, const std::string &why) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s (operation %llu of the communicator %s, rank %d of %d) failed: %s", op.what.c_str(),
             (unsigned long long)op.ticket, c->name.c_str(), c->rank, c->nranks, why.c_str());
    emu::say("NCCL: %s", msg);
    set_error(c, msg);
    int ok = ncclSuccess;
    c->async_err.compare_exchange_strong(ok, res);
    if (!c->aborted) post_state(c, S_FAILED);
}

// After an error an operation does not end by itself: like an NCCL kernel whose peer is
// gone, it waits until this process calls ncclCommAbort (the documented way out, after
// ncclCommGetAsyncError reports the error). It does not count as progress, so a program
// that never aborts meets the runtime's hang report (CUDA_EMU_HANG_S).
void wait_for_abort(ncclComm *c) {
    while (!c->aborted) {
        if (!c->hdr) { usleep(50000); continue; }
        std::atomic<uint32_t> &bell = c->hdr->slot[c->rank].bell;
        uint32_t b = bell.load(std::memory_order_acquire);
        if (c->aborted) break;
        futex_wait(&bell, b, 0.1);
    }
}

// Runs one communicator's part of a group: the local copies, then every transfer, all
// progressing together (a full ring toward a peer must not stop this rank's receives).
void run_op(CommOp &op) {
    ncclComm *c = op.comm;
    {
        std::unique_lock<std::mutex> lk(c->mu);
        c->cv.wait(lk, [&] { return c->next_run == op.ticket || c->aborted; });
        if (c->aborted) {   // aborted operations end
            if (c->next_run == op.ticket) c->next_run++;
            c->finished++;
            c->cv.notify_all();
            return;
        }
        c->running++;
    }
    bool failed = c->async_err.load() != ncclSuccess;   // an earlier operation failed: this one cannot progress
    if (!failed)
        for (const Copy &k : op.local)
            if (k.dst != k.src) memmove(k.dst, k.src, k.bytes);
    double last_move = now_s();
    while (!failed && !op.x.empty()) {
        Slot &mine = c->hdr->slot[c->rank];
        uint32_t bell = mine.bell.load(std::memory_order_acquire);
        bool moved = false, all_done = true;
        std::string err;
        // the first unfinished transfer of each (peer, direction) moves; later ones wait behind it
        std::vector<char> busy_send(c->nranks, 0), busy_recv(c->nranks, 0);
        for (Xfer &x : op.x) {
            if (xfer_finished(c, x)) continue;
            all_done = false;
            char &busy = x.send ? busy_send[x.peer] : busy_recv[x.peer];
            if (busy) continue;
            bool written = x.send && x.hdr_done && x.done == x.bytes;
            if (!written) busy = 1;   // a written send waits only for its receiver; the next may follow it
            err = step(c, x, moved);
            if (!err.empty()) break;
        }
        if (!err.empty()) { op_failed(c, op, ncclInvalidUsage, err); failed = true; break; }
        if (all_done) break;
        if (moved) { last_move = now_s(); emu::progress(); continue; }
        if (c->aborted) break;   // this process aborted the communicator
        std::vector<int> waiting;
        std::string gone;
        for (const Xfer &x : op.x) {
            if (xfer_finished(c, x)) continue;
            bool seen = false;
            for (int q : waiting) seen = seen || q == x.peer;
            if (!seen) waiting.push_back(x.peer);
            if (gone.empty()) gone = peer_gone(c, x.peer, false);
        }
        if (!gone.empty()) { op_failed(c, op, ncclRemoteError, gone + " while this rank waited for it"); failed = true; break; }
        if (now_s() - last_move > c->timeout) {
            op_failed(c, op, ncclSystemError,
                      "waited " + std::to_string((int)c->timeout) + " s without progress for rank(s) " + rank_list(waiting) +
                          " (CUDA_EMU_NCCL_TIMEOUT): a peer never issued the matching call");
            failed = true;
            break;
        }
        emu::progress();   // NCCL's own deadline applies here, not the runtime's hang detector
        futex_wait(&mine.bell, bell, 0.05);
    }
    if (failed) wait_for_abort(c);
    else if (!c->aborted)
        for (const Sum &m : op.sums) run_sum(m, c->nranks, op.ticket);
    std::lock_guard<std::mutex> lk(c->mu);
    c->running--;
    c->next_run++;
    c->finished++;
    c->cv.notify_all();
}

ncclResult_t check_range(ncclComm *c, const char *call, const void *p, size_t bytes, const char *which) {
    if (bytes == 0) return ncclSuccess;
    char what[128];
    snprintf(what, sizeof what, "%s (%s buffer)", call, which);
    if (!emu::check_device_range(p, bytes, what)) return bad(c, ncclInvalidArgument, "%s: bad %s buffer", call, which);
    return ncclSuccess;
}

long this_thread() { return (long)syscall(SYS_gettid); }

// An operation call on c from this host thread: no other thread inside one on c, and no
// other thread's open group holding operations of c (see the file's header).
struct Operating {
    ncclComm *c;
    Operating(ncclComm *comm, const char *call) : c(comm) {
        long me = this_thread(), other = 0;
        if (!c->user.compare_exchange_strong(other, me))
            emu::die("NCCL: %s on communicator %p (rank %d of %d) from host thread %ld while host thread %ld is inside "
                     "%s on it: NCCL operations must not be issued to one communicator by several threads in parallel",
                     call, (void *)c, c->rank, c->nranks, me, other, c->user_call.c_str());
        c->user_call = call;
        long owner = c->group_owner.load();
        if (owner && owner != me)
            emu::die("NCCL: %s on communicator %p (rank %d of %d) from host thread %ld while host thread %ld's group "
                     "(ncclGroupStart) holds operations of it: one thread must issue all the operations of a group",
                     call, (void *)c, c->rank, c->nranks, me, owner);
        if (c->last_user.exchange(me) != me) {   // handed over: hold the call open, so a racing one shows
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, nullptr);
        }
    }
    ~Operating() { c->user = 0; }
};

// Turns the group's calls into one operation per communicator, queued on their stream.
ncclResult_t flush() {
    std::vector<Call> calls;
    calls.swap(t_pending);
    for (const Call &k : calls) k.comm->group_owner = 0;
    if (calls.empty()) return ncclSuccess;
    cudaStream_t s = calls[0].stream;
    for (const Call &k : calls)
        if (k.stream != s)
            return bad(k.comm, ncclInvalidUsage,
                       "a group with operations on different streams: not emulated (the project issues one stream per group)");
    std::vector<CommOp> ops;
    std::vector<bool> used(calls.size(), false);
    for (size_t i = 0; i < calls.size(); i++) {
        Call &k = calls[i];
        CommOp *op = nullptr;
        for (CommOp &o : ops)
            if (o.comm == k.comm) op = &o;
        if (!op) {
            ops.push_back(CommOp{k.comm, 0, "", {}, {}, {}});
            op = &ops.back();
        }
        ncclComm *c = k.comm;
        const char *name = kind_name(k.kind, k.send);
        if (op->what.find(name) == std::string::npos) op->what += std::string(op->what.empty() ? "" : "+") + name;
        if (k.kind == K_REDUCESCATTER) {   // slice q of the send buffer goes to rank q, which sums
            auto in = std::make_shared<std::vector<char>>((size_t)c->nranks * k.bytes);
            op->local.push_back(Copy{in->data() + (size_t)c->rank * k.bytes, (const char *)k.sbuf + (size_t)c->rank * k.bytes,
                                     k.bytes});
            for (int q = 0; q < c->nranks; q++) {
                if (q == c->rank) continue;
                op->x.push_back(Xfer{true, q, (char *)k.sbuf + (size_t)q * k.bytes, k.bytes, K_REDUCESCATTER});
                op->x.push_back(Xfer{false, q, in->data() + (size_t)q * k.bytes, k.bytes, K_REDUCESCATTER});
            }
            op->sums.push_back(Sum{in, k.rbuf, k.bytes / type_size(k.dt), k.dt});
            continue;
        }
        if (k.kind == K_ALLGATHER) {
            op->local.push_back(Copy{(char *)k.rbuf + (size_t)c->rank * k.bytes, k.sbuf, k.bytes});
            for (int q = 0; q < c->nranks; q++) {
                if (q == c->rank) continue;
                op->x.push_back(Xfer{true, q, (char *)k.sbuf, k.bytes, K_ALLGATHER});
                op->x.push_back(Xfer{false, q, (char *)k.rbuf + (size_t)q * k.bytes, k.bytes, K_ALLGATHER});
            }
            continue;
        }
        if (k.peer != c->rank) {
            op->x.push_back(Xfer{k.send, k.peer, k.send ? (char *)k.sbuf : (char *)k.rbuf, k.bytes, K_P2P});
            continue;
        }
        // to oneself: matched with the group's next receive from oneself, in order
        if (!k.send) continue;
        size_t j = 0;
        for (; j < calls.size(); j++)
            if (!used[j] && calls[j].kind == K_P2P && !calls[j].send && calls[j].comm == c && calls[j].peer == c->rank) break;
        if (j == calls.size())
            return bad(c, ncclInvalidUsage,
                       "ncclSend of %zu bytes to this rank itself has no ncclRecv in its group: it would wait forever", k.bytes);
        used[j] = used[i] = true;
        if (calls[j].bytes != k.bytes)
            return bad(c, ncclInvalidUsage, "ncclSend of %zu bytes matched with an ncclRecv of %zu bytes", k.bytes,
                       calls[j].bytes);
        op->local.push_back(Copy{calls[j].rbuf, k.sbuf, k.bytes});
    }
    for (size_t j = 0; j < calls.size(); j++)
        if (calls[j].kind == K_P2P && !calls[j].send && calls[j].peer == calls[j].comm->rank && !used[j])
            return bad(calls[j].comm, ncclInvalidUsage,
                       "ncclRecv of %zu bytes from this rank itself has no ncclSend in its group", calls[j].bytes);
    for (CommOp &op : ops) {
        std::lock_guard<std::mutex> lk(op.comm->mu);
        op.ticket = op.comm->issued++;
    }
    for (CommOp &op : ops) {
        std::string what = op.what;
        ncclComm *c = op.comm;
        auto shared = std::make_shared<CommOp>(std::move(op));
        cudaError_t e = emu::enqueue_observed(s, what.c_str(), [shared] { run_op(*shared); });
        if (e != cudaSuccess) {
            std::lock_guard<std::mutex> lk(c->mu);   // its ticket will never run: let the next ones
            c->next_run++;
            c->finished++;
            c->cv.notify_all();
            return bad(c, ncclUnhandledCudaError, "%s: queuing on its stream: %s", what.c_str(), cudaGetErrorName(e));
        }
    }
    return ncclSuccess;
}

// Outside a group a call is a group of its own.
ncclResult_t add_call(const Call &k) {
    if (t_group_depth > 0) k.comm->group_owner = this_thread();
    t_pending.push_back(k);
    return t_group_depth > 0 ? ncclSuccess : flush();
}

// Host-side exchange over the parent communicator: every rank's (color, key).
ncclResult_t exchange_split(ncclComm *c, int color, int key, std::vector<int64_t> &colors, std::vector<int64_t> &keys) {
    colors.assign(c->nranks, color);
    keys.assign(c->nranks, key);
    if (c->nranks == 1) return ncclSuccess;
    uint64_t seq = ++c->splits;
    Slot &mine = c->hdr->slot[c->rank];
    mine.split_val[seq & 1][0] = color;
    mine.split_val[seq & 1][1] = key;
    mine.split_seq.store(seq, std::memory_order_release);
    for (int q = 0; q < c->nranks; q++) ring_bell(&c->hdr->slot[q].bell);
    double last = now_s();
    for (;;) {
        uint32_t b = mine.bell.load(std::memory_order_acquire);
        std::vector<int> missing;
        std::string gone;
        for (int q = 0; q < c->nranks; q++)
            if (c->hdr->slot[q].split_seq.load(std::memory_order_acquire) < seq) {
                missing.push_back(q);
                if (gone.empty()) gone = peer_gone(c, q, false);
            }
        if (missing.empty()) break;
        if (!gone.empty()) return bad(c, ncclRemoteError, "ncclCommSplit (rank %d of %d): %s", c->rank, c->nranks, gone.c_str());
        if (c->aborted) return bad(c, ncclInvalidUsage, "ncclCommSplit: the communicator was aborted");
        if (now_s() - last > c->timeout)
            return bad(c, ncclSystemError,
                       "ncclCommSplit (rank %d of %d) waited %d s for rank(s) %s (CUDA_EMU_NCCL_TIMEOUT): a rank did not call it",
                       c->rank, c->nranks, (int)c->timeout, rank_list(missing).c_str());
        emu::progress();
        futex_wait(&mine.bell, b, 0.05);
    }
    for (int q = 0; q < c->nranks; q++) {
        colors[q] = c->hdr->slot[q].split_val[seq & 1][0];
        keys[q] = c->hdr->slot[q].split_val[seq & 1][1];
    }
    return ncclSuccess;
}

uint64_t mix(uint64_t x) {   // splitmix64's finalizer
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Waits until every operation queued on c has run (destroy flushes, as ncclCommFinalize does).
void drain(ncclComm *c) {
    if (c->async_err.load() != ncclSuccess)
        emu::say("NCCL: ncclCommDestroy of a communicator with an asynchronous error (%s) waits for its failed "
                 "operations, which end only with ncclCommAbort (NCCL's documented way out after an error)",
                 ncclGetErrorString((ncclResult_t)c->async_err.load()));
    std::unique_lock<std::mutex> lk(c->mu);
    c->cv.wait(lk, [&] { return c->finished == c->issued; });
}

}  // namespace

extern "C" {

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t c) {
    if (!c) return t_last_error.c_str();
    static thread_local std::string copy;
    std::lock_guard<std::mutex> lk(c->mu);
    copy = c->last_error;
    return copy.c_str();
}

ncclResult_t ncclGetVersion(int *v) {
    if (!v) return ncclInvalidArgument;
    *v = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    emu::init();
    if (!id) return bad(nullptr, ncclInvalidArgument, "ncclGetUniqueId with a null id");
    std::random_device rd;
    for (size_t i = 0; i < sizeof id->internal; i++) id->internal[i] = (char)rd();
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    emu::init();
    if (!comm) return bad(nullptr, ncclInvalidArgument, "ncclCommInitRank with a null comm pointer");
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return bad(nullptr, ncclInvalidArgument, "ncclCommInitRank: rank %d of %d", rank, nranks);
    if (nranks > MAX_RANKS)
        return bad(nullptr, ncclInvalidUsage, "ncclCommInitRank with %d ranks: the emulated NCCL has at most %d", nranks,
                   MAX_RANKS);
    uint64_t tok[2];
    memcpy(tok, id.internal, sizeof tok);
    return make_comm(comm, nranks, tok, rank, "ncclCommInitRank", nullptr);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *) {
    return ncclCommInitRank(comm, nranks, id, rank);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *) {
    ncclResult_t r = entry(comm, "ncclCommSplit");
    if (r != ncclSuccess) return r;
    if (!newcomm) return bad(comm, ncclInvalidArgument, "ncclCommSplit with a null result pointer");
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR) return bad(comm, ncclInvalidArgument, "ncclCommSplit: color %d", color);
    std::vector<int64_t> colors, keys;
    uint64_t nsplit = comm->splits + 1;   // the same on every rank (exchange_split counts it)
    r = exchange_split(comm, color, key, colors, keys);
    if (r != ncclSuccess) return r;
    if (comm->nranks == 1) comm->splits++;
    *newcomm = nullptr;
    if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
    std::vector<int> members;   // by key, then parent rank
    for (int q = 0; q < comm->nranks; q++)
        if (colors[q] == color) members.push_back(q);
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return keys[a] < keys[b]; });
    int my = 0;
    for (size_t i = 0; i < members.size(); i++)
        if (members[i] == comm->rank) my = (int)i;
    uint64_t tok[2] = {mix(comm->token[0] ^ mix(nsplit)), mix(comm->token[1] ^ mix(((uint64_t)color << 32) + nsplit + 0x51ed))};
    return make_comm(newcomm, (int)members.size(), tok, my, "ncclCommSplit", comm);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    emu::init();
    if (emu::in_host_function()) return bad(comm, ncclInvalidUsage, "ncclCommDestroy called from a host function");
    drain(comm);
    if (!comm->aborted) post_state(comm, S_LEFT);
    unmap_all(comm);
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    {
        std::lock_guard<std::mutex> lk(comm->mu);
        comm->aborted = true;
        comm->cv.notify_all();
    }
    post_state(comm, S_ABORTED);   // wakes this process's waits too
    std::unique_lock<std::mutex> lk(comm->mu);
    comm->cv.wait(lk, [&] { return comm->running == 0; });
    // The operations still queued skip themselves and need the object; it stays (a few
    // hundred bytes), its shared memory goes.
    if (comm->hdr) {
        for (int q = 0; q < comm->nranks; q++)
            if (comm->seg[q]) { munmap(comm->seg[q], comm->seg_bytes); comm->seg[q] = nullptr; }
    }
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err) {
    if (!comm || !err) return ncclInvalidArgument;
    *err = (ncclResult_t)comm->async_err.load();
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
    if (!comm || !count) return ncclInvalidArgument;
    *count = comm->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
    if (!comm || !rank) return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
    emu::init();
    t_group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
    emu::init();
    if (t_group_depth == 0) return bad(nullptr, ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--t_group_depth > 0) return ncclSuccess;
    return flush();
}

// NCCL's in-place operations (user guide, "In-place Operations"): an all-gather is in place
// when sendbuff == recvbuff + rank * sendcount, a reduce-scatter when recvbuff == sendbuff +
// rank * recvcount, the others when sendbuff == recvbuff. Any other overlap of the per-rank
// buffer (part, part_bytes) with the whole one (whole, whole_bytes) has a collective read
// what it has already overwritten: refused.
static ncclResult_t check_in_place(ncclComm_t comm, const char *call, const void *part, size_t part_bytes,
                                   const void *whole, size_t whole_bytes, int in_place_rank) {
    const char *p = (const char *)part, *w = (const char *)whole;
    if (p == w + (size_t)in_place_rank * part_bytes || p + part_bytes <= w || w + whole_bytes <= p) return ncclSuccess;
    return bad(comm, ncclInvalidArgument, "%s: its buffers overlap without being in place (the %zu bytes at %p and the "
               "%zu bytes at %p): NCCL works in place only when the per-rank buffer sits at the rank's offset of the "
               "whole one (rank %d: %p)", call, part_bytes, part, whole_bytes, whole, in_place_rank,
               (const void *)(w + (size_t)in_place_rank * part_bytes));
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclComm_t comm,
                           cudaStream_t s) {
    ncclResult_t r = entry(comm, "ncclAllGather");
    if (r != ncclSuccess) return r;
    Operating busy(comm, "ncclAllGather");
    size_t es = type_size(dt);
    if (!es) return bad(comm, ncclInvalidArgument, "ncclAllGather: data type %d", (int)dt);
    size_t bytes = count * es;
    if ((r = check_range(comm, "ncclAllGather", recv, bytes * comm->nranks, "receive")) != ncclSuccess ||
        (r = check_range(comm, "ncclAllGather", send, bytes, "send")) != ncclSuccess ||
        (r = check_in_place(comm, "ncclAllGather", send, bytes, recv, bytes * comm->nranks, comm->rank)) != ncclSuccess)
        return r;
    if (bytes == 0) return ncclSuccess;
    return add_call(Call{K_ALLGATHER, false, send, recv, bytes, -1, comm, s});
}

// One rank only: every reduction is the identity, a broadcast a copy.
static ncclResult_t one_rank_copy(ncclComm_t comm, const char *call, void *recv, const void *send, size_t bytes,
                                  cudaStream_t s) {
    if (comm->nranks != 1)
        return bad(comm, ncclInvalidUsage, "%s across %d ranks: not emulated (only ncclAllGather and ncclSend/ncclRecv are)",
                   call, comm->nranks);
    ncclResult_t r;
    if ((r = check_range(comm, call, recv, bytes, "receive")) != ncclSuccess ||
        (r = check_range(comm, call, send, bytes, "send")) != ncclSuccess ||
        (r = check_in_place(comm, call, send, bytes, recv, bytes, 0)) != ncclSuccess || bytes == 0)
        return r;
    cudaError_t e = emu::enqueue_observed(s, call, [recv, send, bytes] { memmove(recv, send, bytes); });
    if (e != cudaSuccess) return bad(comm, ncclUnhandledCudaError, "%s: queuing on its stream: %s", call, cudaGetErrorName(e));
    return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t s) {
    ncclResult_t r = entry(comm, "ncclReduceScatter");
    if (r != ncclSuccess) return r;
    Operating busy(comm, "ncclReduceScatter");
    size_t es = type_size(dt);
    if (!es || (int)op < 0 || (int)op >= (int)ncclNumOps)
        return bad(comm, ncclInvalidArgument, "ncclReduceScatter: data type %d, op %d", (int)dt, (int)op);
    if (op != ncclSum || (dt != ncclFloat32 && dt != ncclBfloat16 && dt != ncclFloat64))
        return bad(comm, ncclInvalidUsage, "ncclReduceScatter: op %d on data type %d is not emulated (ncclSum of float32, "
                   "bfloat16 and float64 is)", (int)op, (int)dt);
    size_t bytes = count * es;
    if ((r = check_range(comm, "ncclReduceScatter", recv, bytes, "receive")) != ncclSuccess ||
        (r = check_range(comm, "ncclReduceScatter", send, bytes * comm->nranks, "send")) != ncclSuccess ||
        (r = check_in_place(comm, "ncclReduceScatter", recv, bytes, send, bytes * comm->nranks, comm->rank)) != ncclSuccess)
        return r;
    if (bytes == 0) return ncclSuccess;
    Call k{K_REDUCESCATTER, false, send, recv, bytes, -1, comm, s};
    k.dt = dt;
    return add_call(k);
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t s) {
    ncclResult_t r = entry(comm, "ncclAllReduce");
    if (r != ncclSuccess) return r;
    Operating busy(comm, "ncclAllReduce");
    size_t es = type_size(dt);
    if (!es || (int)op < 0 || (int)op >= (int)ncclNumOps)
        return bad(comm, ncclInvalidArgument, "ncclAllReduce: data type %d, op %d", (int)dt, (int)op);
    return one_rank_copy(comm, "ncclAllReduce", recv, send, count * es, s);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t dt, int root, ncclComm_t comm,
                           cudaStream_t s) {
    ncclResult_t r = entry(comm, "ncclBroadcast");
    if (r != ncclSuccess) return r;
    Operating busy(comm, "ncclBroadcast");
    if (root < 0 || root >= comm->nranks) return bad(comm, ncclInvalidArgument, "ncclBroadcast from root %d", root);
    return one_rank_copy(comm, "ncclBroadcast", recv, send, count * type_size(dt), s);
}

static ncclResult_t p2p(bool is_send, void *buf, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                        cudaStream_t s) {
    const char *call = is_send ? "ncclSend" : "ncclRecv";
    ncclResult_t r = entry(comm, call);
    if (r != ncclSuccess) return r;
    Operating busy(comm, call);
    size_t es = type_size(dt);
    if (!es) return bad(comm, ncclInvalidArgument, "%s: data type %d", call, (int)dt);
    if (peer < 0 || peer >= comm->nranks)
        return bad(comm, ncclInvalidArgument, "%s to peer %d of a communicator of %d rank(s)", call, peer, comm->nranks);
    if (peer == comm->rank && t_group_depth == 0)
        return bad(comm, ncclInvalidUsage,
                   "%s to this rank itself outside ncclGroupStart/End: it would wait forever for its partner", call);
    if ((r = check_range(comm, call, buf, count * es, is_send ? "send" : "receive")) != ncclSuccess) return r;
    return add_call(Call{K_P2P, is_send, buf, buf, count * es, peer, comm, s});
}

ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm, cudaStream_t s) {
    return p2p(true, (void *)send, count, dt, peer, comm, s);
}

ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm, cudaStream_t s) {
    return p2p(false, recv, count, dt, peer, comm, s);
}

}  // extern "C"
