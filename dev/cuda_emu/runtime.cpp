// runtime.cpp: the emulated CUDA runtime (cudart): memory in a registry, streams on worker
// threads, events, host functions on one callback thread, errors. Semantics from the CUDA
// Runtime API reference and its "API synchronization behavior" and "stream synchronization
// behavior" notes; where they allow several behaviours, the one that breaks code relying on
// luck (emu.h says which). Speed is not a goal: nothing here is ever timed.
#include "emu.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace emu {

// ---------------------------------------------------------------- settings and messages

static std::once_flag g_init_once;
static uint64_t g_seed = 0;
static int g_jitter = 0;
static uint64_t g_jitter_seed = 0;
static int g_slow = 0;            // CUDA_EMU_SLOW: one stream's work held back
static uint64_t g_slow_seed = 0;
static int g_arch = 90;
static size_t g_mem_cap = (size_t)80 << 30;
static double g_hang_s = 120.0;
static int g_load_sync = 0;             // CUDA_EMU_LOAD_SYNC=1, not CUDA_MODULE_LOADING=EAGER
static int g_trace = 0;   // CUDA_EMU_TRACE=1: every stream operation as it runs, every host wait

void say(const char *fmt, ...) {
    char msg[2048];
    int len = snprintf(msg, sizeof msg, "cuda_emu: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + len, sizeof msg - (size_t)len - 1, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", msg);
}

void die(const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    say("%s", msg);
    fflush(stdout);
    fflush(stderr);
    abort();
}

uint64_t env_u64(const char *name, uint64_t def) {
    const char *s = getenv(name);
    if (!s || !*s) return def;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end) die("%s='%s' is not a non-negative integer", name, s);
    return v;
}

// "80G", "80GiB", "512M", bytes
static size_t env_size(const char *name, size_t def) {
    const char *s = getenv(name);
    if (!s || !*s) return def;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    size_t mul = 1;
    if (*end == 'K' || *end == 'k') mul = (size_t)1 << 10, end++;
    else if (*end == 'M' || *end == 'm') mul = (size_t)1 << 20, end++;
    else if (*end == 'G' || *end == 'g') mul = (size_t)1 << 30, end++;
    if (!strcmp(end, "iB") || !strcmp(end, "B")) end += strlen(end);
    if (errno || *end || v <= 0) die("%s='%s' is not a size (bytes, or with K, M or G)", name, s);
    return (size_t)(v * (double)mul);
}

static void init_once() {
    g_seed = env_u64("CUDA_EMU_SEED", 0);
    const char *j = getenv("CUDA_EMU_JITTER");
    if (j && *j) {
        g_jitter = 1;
        g_jitter_seed = env_u64("CUDA_EMU_JITTER", 0);
    }
    const char *sl = getenv("CUDA_EMU_SLOW");
    if (sl && *sl) {
        g_slow = 1;
        g_slow_seed = env_u64("CUDA_EMU_SLOW", 0);
    }
    const char *a = getenv("CUDA_EMU_ARCH");
    if (a && *a) {
        if (!strcmp(a, "sm_80")) g_arch = 80;
        else if (!strcmp(a, "sm_86")) g_arch = 86;
        else if (!strcmp(a, "sm_89")) g_arch = 89;
        else if (!strcmp(a, "sm_90")) g_arch = 90;
        else die("CUDA_EMU_ARCH='%s': sm_80, sm_86, sm_89 or sm_90", a);
    }
    g_mem_cap = env_size("CUDA_EMU_MEM", g_mem_cap);
    g_hang_s = (double)env_u64("CUDA_EMU_HANG_S", 120);
    const char *ml = getenv("CUDA_MODULE_LOADING");
    g_load_sync = env_u64("CUDA_EMU_LOAD_SYNC", 0) != 0 && !(ml && !strcmp(ml, "EAGER"));
    g_trace = (int)env_u64("CUDA_EMU_TRACE", 0);
    install_fault_report();
    if (getenv("CUDA_EMU_QUIET") == NULL)
        say("emulated device sm_%d, %.1f GiB, seed %llu%s (a CPU emulation: it proves correctness, never speed)",
            g_arch, (double)g_mem_cap / (1 << 30), (unsigned long long)g_seed,
            g_jitter ? ", jitter on (CUDA_EMU_JITTER): random delays before queued stream work" : "");
    if (g_slow && getenv("CUDA_EMU_QUIET") == NULL)
        say("slow producer on (CUDA_EMU_SLOW=%llu): the work of stream number %llu in creation order is held back",
            (unsigned long long)g_slow_seed, (unsigned long long)(g_slow_seed % 4));
}

void init() { std::call_once(g_init_once, init_once); }
uint64_t seed() { init(); return g_seed; }
int arch() { init(); return g_arch; }
// The CUDA Programming Guide's table of compute capabilities: shared memory per block with
// opt-in 163 KB (8.0), 99 KB (8.6, 8.9), 227 KB (9.0); per SM 164, 100, 228 KB.
int sass_arch() { return arch() >= 90 ? 90 : 80; }
size_t smem_optin() { return arch() == 90 ? 227 * 1024 : arch() == 80 ? 163 * 1024 : 99 * 1024; }

static uint64_t mix64(uint64_t x) {
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27; x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// ---------------------------------------------------------------- errors

static std::atomic<int> g_sticky{cudaSuccess};   // an asynchronous fault: every later call returns it
static thread_local cudaError_t t_last = cudaSuccess;
static thread_local bool t_in_host_fn = false;

bool in_host_function() { return t_in_host_fn; }

static cudaError_t ret(cudaError_t e) {
    if (e != cudaSuccess) t_last = e;
    return e;
}

cudaError_t record_error(cudaError_t e) { return ret(e); }

static std::atomic<bool> g_sources_pending{false};
static void settle_pageable_sources();   // below: the pageable sources of cudaMemcpyAsync calls

// The common prologue of an API call: a call from a host function, or after a fault; the
// pageable sources that earlier cudaMemcpyAsync calls left to read.
#define API_ENTRY()                                                                    \
    do {                                                                               \
        init();                                                                        \
        if (t_in_host_fn) {                                                            \
            say("%s called from a host function (cudaLaunchHostFunc): host functions " \
                "must not make CUDA calls", __func__);                                 \
            return ret(cudaErrorNotPermitted);                                         \
        }                                                                              \
        if (g_sources_pending.load()) settle_pageable_sources();                       \
        int st_ = g_sticky.load();                                                     \
        if (st_ != cudaSuccess) return ret((cudaError_t)st_);                          \
    } while (0)

void fault(cudaError_t err, const char *fmt, ...) {
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    say("device fault (%s, sticky): %s", cudaGetErrorName(err), msg);
    int expected = cudaSuccess;
    g_sticky.compare_exchange_strong(expected, (int)err);
}

// ---------------------------------------------------------------- memory registry

// Heap objects that are never destroyed: the worker and watchdog threads outlive main().
static std::mutex &g_mem_mu = *new std::mutex;
static std::map<uintptr_t, Alloc> &g_allocs = *new std::map<uintptr_t, Alloc>;   // by base
static std::map<uintptr_t, bool> &g_registered = *new std::map<uintptr_t, bool>;   // cudaHostRegister ranges
static size_t g_dev_used = 0;
static uint64_t g_alloc_count = 0;

const char *mem_kind_name(MemKind k) {
    return k == MEM_DEVICE ? "device" : k == MEM_PINNED ? "pinned host" : "pageable host";
}

bool find_alloc(const void *p, Alloc *out) {
    std::lock_guard<std::mutex> lk(g_mem_mu);
    auto it = g_allocs.upper_bound((uintptr_t)p);
    if (it == g_allocs.begin()) return false;
    --it;
    const Alloc &a = it->second;
    if ((uintptr_t)p >= (uintptr_t)a.base + (a.bytes ? a.bytes : 1)) return false;
    if (out) *out = a;
    return true;
}

MemKind mem_kind(const void *p) {
    Alloc a;
    return find_alloc(p, &a) ? a.kind : MEM_PAGEABLE;
}

bool device_accessible(const void *p, size_t bytes) {
    Alloc a;
    if (!find_alloc(p, &a)) return false;
    return (uintptr_t)p + bytes <= (uintptr_t)a.base + a.bytes;
}

bool check_device_range(const void *p, size_t bytes, const char *what) {
    if (bytes == 0) return true;
    Alloc a;
    if (!find_alloc(p, &a)) {
        say("%s: %p is not device memory (%s: cudaMalloc, cudaMallocHost and cudaHostAlloc memory only)", what, p,
            p ? "pageable host memory or freed memory" : "a null pointer");
        return false;
    }
    if ((uintptr_t)p + bytes > (uintptr_t)a.base + a.bytes) {
        say("%s: %zu bytes at %p run past the end of its %s allocation (%zu bytes at %p) by %zu bytes", what, bytes, p,
            mem_kind_name(a.kind), a.bytes, (void *)a.base, (size_t)((uintptr_t)p + bytes - (uintptr_t)a.base - a.bytes));
        return false;
    }
    return true;
}

// Fresh memory holds whatever the last user left: a seeded pattern, so that code reading
// memory it never wrote gives bits that change with CUDA_EMU_SEED.
static void poison(void *p, size_t bytes) {
    uint64_t key = mix64(g_seed ^ (0x9e3779b97f4a7c15ull * ++g_alloc_count));
    uint64_t *w = (uint64_t *)p;
    size_t n = bytes / 8;
    for (size_t i = 0; i < n; i++) w[i] = mix64(key + i);
    memset((char *)p + n * 8, 0xa5, bytes - n * 8);
}

// ---------------------------------------------------------------- the arena

uintptr_t g_arena_lo = 0, g_arena_hi = 0;
static const size_t PAGE = 4096;
#if !defined(__SANITIZE_ADDRESS__)
static const size_t ARENA_BYTES = (size_t)1 << 38;   // address space only: pages are mapped per allocation
static uintptr_t g_arena_next = 0;
struct Span {
    uintptr_t at;
    size_t bytes;
};
static std::deque<Span> &g_arena_free = *new std::deque<Span>;   // freed spans, oldest first
static const size_t QUARANTINE = 32;   // the latest frees, never reused: a use after free faults

// Address space for n bytes and the inaccessible page after them (g_mem_mu held): the
// oldest span freed before the latest QUARANTINE frees that holds it (its start; the rest
// stays free), else fresh space. Freed pages stay resident, so an allocation in a freed
// span costs no page faults; fresh ones do (the kernel clears every page), which was a
// third of gpu_zero_toy's time when only spans of up to twice the size were taken.
static void *arena_alloc(size_t n) {
    static std::once_flag once;
    std::call_once(once, [] {
        void *p = mmap(nullptr, ARENA_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) return;
        g_arena_lo = g_arena_next = (uintptr_t)p;
        g_arena_hi = g_arena_lo + ARENA_BYTES;
    });
    if (!g_arena_lo) return nullptr;
    size_t span = (n + PAGE - 1) / PAGE * PAGE + PAGE;
    for (size_t i = 0; i + QUARANTINE < g_arena_free.size(); i++) {
        Span f = g_arena_free[i];
        if (f.bytes < span) continue;
        g_arena_free.erase(g_arena_free.begin() + (long)i);
        if (f.bytes > span) g_arena_free.push_front(Span{f.at + span, f.bytes - span});
        if (mprotect((void *)f.at, span - PAGE, PROT_READ | PROT_WRITE)) return nullptr;
        return (void *)f.at;
    }
    if (g_arena_next + span > g_arena_hi) return nullptr;
    uintptr_t at = g_arena_next;
    g_arena_next += span;
    if (mmap((void *)at, span - PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
             -1, 0) == MAP_FAILED)
        return nullptr;
    return (void *)at;
}

static void arena_free(void *p, size_t n) {   // g_mem_mu held
    size_t span = (n + PAGE - 1) / PAGE * PAGE + PAGE;
    mprotect(p, span, PROT_NONE);
    g_arena_free.push_back(Span{(uintptr_t)p, span});
}
#endif

static uint64_t g_alloc_ids = 0;
static std::atomic<uint64_t> g_frees{0};

bool alloc_at(uintptr_t a, LiveAlloc *out) {
    Alloc al;
    if (!find_alloc((const void *)a, &al)) return false;
    out->lo = (uintptr_t)al.base;
    out->hi = out->lo + al.bytes;
    out->id = al.id;
    return true;
}

uint64_t free_count() { return g_frees.load(std::memory_order_acquire); }

// Whether the allocation a was found as (id 0: none was looked up) still holds p.
static bool still_live(const LiveAlloc &a, const void *p) {
    LiveAlloc now;
    return a.id == 0 || (alloc_at((uintptr_t)p, &now) && now.id == a.id);
}

static cudaError_t register_alloc(void **out, size_t bytes, MemKind kind) {
    if (!out) return cudaErrorInvalidValue;
    size_t n = bytes ? bytes : 1;
    {
        std::lock_guard<std::mutex> lk(g_mem_mu);
        if (kind == MEM_DEVICE && (g_dev_used + bytes > g_mem_cap || bytes > g_mem_cap)) {
            *out = NULL;
            return cudaErrorMemoryAllocation;
        }
    }
    void *p = NULL;
    std::lock_guard<std::mutex> lk(g_mem_mu);
#if defined(__SANITIZE_ADDRESS__)
    // exactly the bytes asked for (256-aligned, as cudaMalloc's are): under AddressSanitizer a
    // kernel that reads or writes one element past them is a heap overflow
    if (posix_memalign(&p, 256, n) != 0) { *out = NULL; return cudaErrorMemoryAllocation; }
#else
    p = arena_alloc(n);
    if (!p) { *out = NULL; return cudaErrorMemoryAllocation; }
#endif
    poison(p, n);
    g_allocs[(uintptr_t)p] = Alloc{(char *)p, bytes, kind, ++g_alloc_ids};
    if (kind == MEM_DEVICE) g_dev_used += bytes;
    *out = p;
    return cudaSuccess;
}

static cudaError_t unregister_free(void *p, MemKind kind, const char *call) {
    if (!p) return cudaSuccess;
    std::unique_lock<std::mutex> lk(g_mem_mu);
    auto it = g_allocs.find((uintptr_t)p);
    if (it == g_allocs.end() || it->second.kind != kind || g_registered.count((uintptr_t)p)) {
        MemKind k = MEM_PAGEABLE;
        auto j = g_allocs.upper_bound((uintptr_t)p);
        bool inside = j != g_allocs.begin() && (--j, (uintptr_t)p < (uintptr_t)j->second.base + j->second.bytes);
        if (inside) k = j->second.kind;
        lk.unlock();
        say("%s(%p): not the start of a live %s allocation (%s)", call, p, kind == MEM_DEVICE ? "cudaMalloc" : "pinned",
            inside ? (k == kind ? "inside one, not its start" : mem_kind_name(k)) : "freed twice, or never allocated");
        return cudaErrorInvalidValue;
    }
    size_t bytes = it->second.bytes;
    if (kind == MEM_DEVICE) g_dev_used -= bytes;
    g_allocs.erase(it);
    g_frees.fetch_add(1, std::memory_order_release);
#if defined(__SANITIZE_ADDRESS__)
    lk.unlock();
    free(p);
#else
    arena_free(p, bytes ? bytes : 1);
#endif
    return cudaSuccess;
}

// ---------------------------------------------------------------- streams, events, host functions

// The order of stream work (happens-before), as vector clocks: entry i of a clock is how
// many of stream i's ops are ordered before the point it describes. A stream's clock moves
// on with each op, joins the clock of each event record it waits for, and joins what the
// issuing host thread had synchronized with when it queued the op (t_host_vc: the streams,
// events and device it synchronized with, queries that found work done). The legacy
// stream's implicit waits are records and waits too. The emulated libraries ask it whether
// an earlier op of another stream is ordered before the running one (cublaslt.cpp: two
// matmuls on one workspace).
typedef std::vector<uint64_t> VClock;
static void join(VClock &a, const VClock &b) {
    if (a.size() < b.size()) a.resize(b.size(), 0);
    for (size_t i = 0; i < b.size(); i++) a[i] = std::max(a[i], b[i]);
}
static thread_local VClock t_host_vc;          // a host thread's
static thread_local VClock t_run_vc;           // a worker's, for the op it runs
static thread_local OpStamp t_run = {-1, 0};

OpStamp running_op() { return t_run; }

bool ordered_before_running(const OpStamp &e) {
    if (t_run.stream < 0 || e.stream < 0) return false;
    if (e.stream == t_run.stream) return e.epoch <= t_run.epoch;
    return (size_t)e.stream < t_run_vc.size() && t_run_vc[(size_t)e.stream] >= e.epoch;
}

struct Record {
    bool done = false;
    double t_ms = 0;              // when it completed (timing events)
    struct Stream *stream = nullptr;
    uint64_t seq = 0;             // its place in its stream
    VClock vc;                    // the work ordered before it (set when it fires)
};
typedef std::shared_ptr<Record> RecordP;

enum OpKind { OP_WORK, OP_RECORD, OP_WAIT, OP_HOSTFN };
struct Op {
    OpKind kind;
    std::string what;
    std::function<void()> work;   // OP_WORK
    RecordP rec;                  // OP_RECORD: fires it; OP_WAIT: waits for it
    cudaHostFn_t fn = nullptr;    // OP_HOSTFN
    void *arg = nullptr;
    RecordP hold;                 // not started before this fires (held legacy work, below)
    RecordP source_hold;          // nor before this one (a pageable source not yet read, below)
    bool observed = false;        // its effect may be awaited outside CUDA's ordering (below)
    VClock host;                  // what the issuing host thread had synchronized with
    Op(OpKind k, std::string w, std::function<void()> f = nullptr, RecordP r = nullptr)
        : kind(k), what(std::move(w)), work(std::move(f)), rec(std::move(r)) {}
};

struct Stream {
    int id = 0;
    unsigned flags = 0;           // cudaStreamNonBlocking or 0
    int priority = 0;
    bool legacy = false;
    bool destroyed = false;
    std::deque<Op> q;             // front: running now (popped when done)
    uint64_t queued = 0, finished = 0;
    bool running = false;
    std::string doing;            // what the worker is on, for hang reports
    std::thread worker;
    // the idle worker's wake-up: work queued or the stream destroyed (g_cv wakes everything
    // else; an idle stream's worker need not wake at every op another stream finishes)
    std::condition_variable work_cv;
    VClock vc, done_vc;           // at the running op; after the last finished one
    uint64_t jitter_n = 0;
    bool slow = false;            // CUDA_EMU_SLOW chose it
};

struct Event {
    unsigned flags = 0;
    RecordP latest;               // null: never recorded
    bool destroyed = false;
};

static std::mutex &g_mu = *new std::mutex;   // every stream queue, record and event below
static std::condition_variable &g_cv = *new std::condition_variable;   // any progress
static std::vector<Stream *> &g_streams = *new std::vector<Stream *>;  // every stream made (destroyed ones too)
static Stream *g_legacy = nullptr;
// The legacy stream's held work. Work on the legacy stream is asynchronous to the host
// (kernels, cudaMemset, cudaMemcpyAsync; cudaMemcpy from pageable memory to device memory
// returns once the source is staged, "but the DMA to final destination may not have
// completed", and one from device to device performs "no host-side synchronization": API
// synchronization behavior), and a non-blocking stream "should perform no implicit
// synchronization with stream 0". Of the behaviours that allows, the latest: the legacy
// stream's work waits until something orders it for the program or another stream (an op
// on a blocking stream, a synchronize or query of the legacy stream or the device, a wait,
// synchronize or query of an event recorded on it). More work on the legacy stream does not,
// so a kernel on a non-blocking stream that reads what stream 0 wrote without such a step
// sees the old bytes every time. Work whose effect may be awaited outside CUDA's ordering
// (a host function, a copy into host memory the host may poll, a collective other processes
// wait for) is not held, and neither is what the legacy stream queued before it: on a GPU
// it runs, and a program that waits for it by other means than CUDA's is not wrong.
static RecordP g_legacy_hold;   // every legacy op since the last release waits for this
static void release_legacy_hold() {   // g_mu held
    if (!g_legacy_hold) return;
    g_legacy_hold->done = true;
    g_legacy_hold.reset();
    g_cv.notify_all();
}
// A wait for (or query of) a record on the legacy stream orders the work before it.
static void release_for(const RecordP &r) {   // g_mu held
    if (r && r->stream && r->stream->legacy && !r->done) release_legacy_hold();
}

// cudaMemcpyAsync from pageable host memory to device memory "might be synchronous with
// respect to host" (API synchronization behavior): the runtime may stage the source before
// returning, or read it in stream order (a system where the device reads pageable memory
// directly), so a program may change or free it only once the copy is done. Of those, the
// latest the emulator can check: the copy runs on a snapshot taken at the call, and is held
// until the program's next CUDA call (from any thread: whatever waits for the copy is
// ordered after it by such a call, so the hold can never deadlock; a kernel's first load,
// which may wait for the device, counts as one); that call first reads the source again and
// faults, naming the copy, when it changed or is gone. From host memory to host memory the
// copy is "fully synchronous with respect to the host": done before the call returns.
struct PageableSource {
    const void *src;
    size_t n;
    std::shared_ptr<std::vector<char>> snapshot;
    std::string what;
};
static std::vector<PageableSource> &g_sources = *new std::vector<PageableSource>;   // g_mu held
static RecordP g_source_hold;   // the held copies wait for this (g_mu held)

// 0 when the n bytes at p still read as want (or cannot be read back here: the check is
// skipped, said once); 1 when they differ; -1 when they are unmapped (freed to the system).
// Read through the kernel, so a freed range neither faults here nor trips a sanitizer.
static int source_differs(const void *p, size_t n, const char *want) {
    char buf[1 << 16];
    for (size_t at = 0; at < n;) {
        size_t len = std::min(sizeof buf, n - at);
        struct iovec local = {buf, len}, remote = {(char *)p + at, len};
        ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
        if (got <= 0 && errno == EFAULT) return -1;
        if (got <= 0) {   // refused (a sandbox's seccomp profile): no check rather than a false fault
            static std::atomic<bool> said{false};
            if (!said.exchange(true))
                say("note: process_vm_readv refused (%s): pageable cudaMemcpyAsync sources are not checked", strerror(errno));
            return 0;
        }
        if (memcmp(buf, want + at, (size_t)got) != 0) return 1;
        at += (size_t)got;
    }
    return 0;
}

static void settle_pageable_sources() {
    std::lock_guard<std::mutex> lk(g_mu);
    for (const PageableSource &ps : g_sources) {
        int d = source_differs(ps.src, ps.n, ps.snapshot->data());
        if (d)
            fault(cudaErrorIllegalAddress, "%s from pageable host memory %p: its source was %s before the program's "
                  "next CUDA call; such a copy may read its source until it is done (\"might be synchronous\", API "
                  "synchronization behavior): wait for the stream before reusing it, or copy with cudaMemcpy, which "
                  "returns once the source is staged", ps.what.c_str(), ps.src, d < 0 ? "freed (unmapped)" : "changed");
    }
    g_sources.clear();
    if (g_source_hold) {
        g_source_hold->done = true;
        g_source_hold.reset();
        g_cv.notify_all();
    }
    g_sources_pending.store(false);
}

static std::atomic<uint64_t> g_progress{0};
void progress() { g_progress++; }
static int g_waiters = 0;               // host threads blocked in a synchronize
static std::vector<std::string> &g_loading = *new std::vector<std::string>;   // kernels whose lazy load waits

// host functions: one callback thread, FIFO
struct HostCall { cudaHostFn_t fn; void *arg; bool done; std::string stream; };
static std::deque<HostCall *> &g_cb_q = *new std::deque<HostCall *>;
static std::condition_variable &g_cb_cv = *new std::condition_variable;   // a call queued
static std::thread g_cb_thread;

static double now_ms() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static void callback_thread() {
    t_in_host_fn = true;
    std::unique_lock<std::mutex> lk(g_mu);
    for (;;) {
        g_cb_cv.wait(lk, [] { return !g_cb_q.empty(); });
        HostCall *c = g_cb_q.front();
        lk.unlock();
        c->fn(c->arg);
        lk.lock();
        g_cb_q.pop_front();
        c->done = true;
        g_progress++;
        g_cv.notify_all();
    }
}

// The slow stream: before a copy, memset, kernel, library call or host function, a pause
// of up to 3 ms one time in three, so that its work lands late for a consumer on another
// stream that does not wait for it (a slow producer on a GPU: a long kernel, a copy
// behind others on the bus).
static void slow_sleep(Stream *s) {
    uint64_t r = mix64(g_slow_seed * 0x9e3779b97f4a7c15ull + 0x51ed27 + s->jitter_n++);
    if (r % 3) return;
    struct timespec ts = {0, (long)((r >> 8) % 3000) * 1000};
    nanosleep(&ts, NULL);
}

static void jitter_sleep(Stream *s) {
    uint64_t r = mix64(g_jitter_seed * 0x100000001b3ull + (uint64_t)s->id * 0x9e3779b97f4a7c15ull + s->jitter_n++);
    if (r & 1) return;
    struct timespec ts = {0, (long)((r >> 8) % 400) * 1000};
    nanosleep(&ts, NULL);
}

static void worker(Stream *s) {
    std::unique_lock<std::mutex> lk(g_mu);
    for (;;) {
        s->work_cv.wait(lk, [s] { return !s->q.empty() || s->destroyed; });
        if (s->q.empty()) break;   // destroyed and drained
        Op &op = s->q.front();
        if (op.hold) g_cv.wait(lk, [&op] { return op.hold->done; });
        if (op.source_hold) g_cv.wait(lk, [&op] { return op.source_hold->done; });
        s->running = true;
        s->doing = op.what;
        if (g_trace) say("stream %d: %s", s->id, op.what.c_str());
        join(s->vc, op.host);
        if (s->vc.size() <= (size_t)s->id) s->vc.resize((size_t)s->id + 1, 0);
        s->vc[(size_t)s->id] = s->finished + 1;
        if (op.kind == OP_WAIT) {
            RecordP r = op.rec;
            g_cv.wait(lk, [&r] { return r->done; });
            join(s->vc, r->vc);
        } else if (op.kind == OP_RECORD) {
            op.rec->vc = s->vc;
            op.rec->done = true;
            op.rec->t_ms = now_ms();
        } else if (op.kind == OP_HOSTFN) {
            if (s->slow) {
                lk.unlock();
                slow_sleep(s);
                lk.lock();
            }
            if (g_sticky.load() == cudaSuccess) {
                HostCall c{op.fn, op.arg, false, op.what};
                g_cb_q.push_back(&c);
                g_cb_cv.notify_one();
                g_cv.wait(lk, [&c] { return c.done; });
            }
        } else {
            std::function<void()> work = std::move(op.work);
            t_run_vc = s->vc;
            t_run = OpStamp{s->id, s->finished + 1};
            lk.unlock();
            if (g_jitter) jitter_sleep(s);
            if (s->slow) slow_sleep(s);
            if (g_sticky.load() == cudaSuccess) work();   // after a fault no device work runs
            lk.lock();
        }
        t_run = OpStamp{-1, 0};
        s->done_vc = s->vc;
        s->q.pop_front();
        s->finished++;
        s->running = false;
        s->doing.clear();
        g_progress++;
        g_cv.notify_all();
    }
}

// Hang detection: threads are waiting and nothing has moved for CUDA_EMU_HANG_S seconds.
static void watchdog() {
    uint64_t last = g_progress.load();
    double since = now_ms();
    for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        uint64_t p = g_progress.load();
        if (p != last) { last = p; since = now_ms(); continue; }
        std::unique_lock<std::mutex> lk(g_mu);
        bool busy = g_waiters > 0 || !g_cb_q.empty();
        for (Stream *s : g_streams)   // held legacy work waits for the program, not for the device
            busy = busy || (!s->q.empty() && !(s->q.front().hold && !s->q.front().hold->done) &&
                            !(s->q.front().source_hold && !s->q.front().source_hold->done));
        if (!busy) { since = now_ms(); continue; }
        if (now_ms() - since < g_hang_s * 1e3) continue;
        say("no progress for %.0f s: a deadlock (CUDA_EMU_HANG_S sets the limit). State:", g_hang_s);
        for (Stream *s : g_streams) {
            if (s->q.empty()) continue;
            const Op &op = s->q.front();
            std::string waits;
            if (op.kind == OP_WAIT && op.rec)
                waits = " waiting for an event record on stream " + std::to_string(op.rec->stream ? op.rec->stream->id : -1) +
                        " (its op " + std::to_string(op.rec->seq) + "; that stream has finished " +
                        std::to_string(op.rec->stream ? op.rec->stream->finished : 0) + ")";
            if (op.hold && !op.hold->done) waits = " (held: nothing has ordered the legacy stream's work yet)";
            if (op.source_hold && !op.source_hold->done)
                waits = " (held: its pageable source is read again at the program's next CUDA call)";
            say("  stream %d%s: %zu ops queued, first: %s%s", s->id, s->legacy ? " (legacy default)" : "", s->q.size(),
                op.what.c_str(), waits.c_str());
        }
        if (!g_cb_q.empty()) say("  host function thread: running one from %s", g_cb_q.front()->stream.c_str());
        for (const std::string &k : g_loading)
            say("  a host thread loading %s (lazy loading waits for the device to be idle: a kernel that spins "
                "until later work runs never lets it; preload a kernel with cudaFuncGetAttributes, a library's by "
                "one call before, or all with CUDA_MODULE_LOADING=EAGER)", k.c_str());
        say("  host threads blocked in a synchronize: %d", g_waiters);
        fflush(stderr);
        abort();
    }
}

static std::once_flag g_threads_once;
static void start_threads() {
    std::call_once(g_threads_once, [] {
        g_cb_thread = std::thread(callback_thread);
        g_cb_thread.detach();
        std::thread(watchdog).detach();
    });
}

static Stream *new_stream(unsigned flags, int priority, bool legacy) {   // g_mu held
    Stream *s = new Stream;
    s->id = (int)g_streams.size();
    s->flags = flags;
    s->priority = priority;
    s->legacy = legacy;
    s->slow = g_slow && g_streams.size() == g_slow_seed % 4;
    g_streams.push_back(s);
    s->worker = std::thread(worker, s);
    s->worker.detach();
    return s;
}

static Stream *legacy_stream() {   // g_mu held
    if (!g_legacy) g_legacy = new_stream(0, 0, true);
    return g_legacy;
}

// The stream a handle names (0 and cudaStreamLegacy: the legacy default stream); null for
// a handle that is not a live stream. g_mu held.
static Stream *stream_of(cudaStream_t h) {
    if (h == 0 || h == cudaStreamLegacy) return legacy_stream();
    if (h == cudaStreamPerThread) {   // ordered only with the legacy stream: not emulated, rather than over-ordered
        say("cudaStreamPerThread (the per-thread default stream) is not emulated: use a stream of your own");
        return nullptr;
    }
    for (Stream *s : g_streams)
        if ((cudaStream_t)s == h) return s->destroyed ? nullptr : s;
    return nullptr;
}

static bool pending(Stream *s) { return !s->q.empty(); }

// Appends op to s, first making it wait where the legacy default stream's rules say.
static void push(Stream *s, Op op) {   // g_mu held
    start_threads();
    if (!s->legacy && !(s->flags & cudaStreamNonBlocking) && g_legacy && pending(g_legacy))
        release_legacy_hold();   // a blocking stream's op waits for the legacy stream's work: it orders it
    if (s->legacy && op.observed) release_legacy_hold();
    if (s->legacy) {
        if (!op.observed && !g_legacy_hold) g_legacy_hold = std::make_shared<Record>();
        if (!op.observed) op.hold = g_legacy_hold;
        // the legacy stream waits for all work queued so far on every blocking stream
        for (Stream *o : g_streams) {
            if (o == s || o->destroyed || (o->flags & cudaStreamNonBlocking) || !pending(o)) continue;
            RecordP r = std::make_shared<Record>();
            r->stream = o;
            r->seq = ++o->queued;
            o->q.push_back(Op(OP_RECORD, "record for the legacy stream", nullptr, r));
            o->work_cv.notify_one();
            s->queued++;
            s->q.push_back(Op(OP_WAIT, "legacy stream waits for stream " + std::to_string(o->id), nullptr, r));
        }
    } else if (!(s->flags & cudaStreamNonBlocking) && g_legacy && pending(g_legacy)) {
        // a blocking stream waits for the legacy stream's work so far
        RecordP r = std::make_shared<Record>();
        r->stream = g_legacy;
        r->seq = ++g_legacy->queued;
        g_legacy->q.push_back(Op(OP_RECORD, "record for a blocking stream", nullptr, r));
        g_legacy->work_cv.notify_one();
        s->queued++;
        s->q.push_back(Op(OP_WAIT, "wait for the legacy stream", nullptr, r));
    }
    s->queued++;
    if (op.kind == OP_RECORD) {
        op.rec->stream = s;
        op.rec->seq = s->queued;
    }
    op.host = t_host_vc;
    s->q.push_back(std::move(op));
    s->work_cv.notify_one();   // nothing else waits for work to be queued
}

static cudaError_t enqueue_op(cudaStream_t h, const char *what, std::function<void()> work, bool observed) {
    API_ENTRY();
    std::lock_guard<std::mutex> lk(g_mu);
    Stream *s = stream_of(h);
    if (!s) return ret(cudaErrorInvalidResourceHandle);
    Op op(OP_WORK, what ? what : "work", std::move(work));
    op.observed = observed;
    push(s, std::move(op));
    return cudaSuccess;
}

cudaError_t enqueue(cudaStream_t h, const char *what, std::function<void()> work) {
    return enqueue_op(h, what, std::move(work), false);
}

cudaError_t enqueue_observed(cudaStream_t h, const char *what, std::function<void()> work) {
    return enqueue_op(h, what, std::move(work), true);
}

// Blocks the calling host thread until pred holds (g_mu held through lk).
template <typename P> static void host_wait(std::unique_lock<std::mutex> &lk, P pred) {
    g_waiters++;
    g_cv.wait(lk, pred);
    g_waiters--;
}

static void sync_stream(std::unique_lock<std::mutex> &lk, Stream *s) {
    if (s->legacy) release_legacy_hold();
    uint64_t target = s->queued;
    host_wait(lk, [s, target] { return s->finished >= target; });
    join(t_host_vc, s->done_vc);
}

static void sync_all(std::unique_lock<std::mutex> &lk) {
    release_legacy_hold();   // first: an earlier stream's work may wait for the legacy stream's
    for (Stream *s : g_streams) sync_stream(lk, s);
}

// The first use of key (a kernel, or a library's kernels) loads it; with CUDA_EMU_LOAD_SYNC=1
// a first use at a launch or library call waits for the device's queued work. describe():
// what the hang report names.
template <class F> static void load(const void *key, bool launching, F describe) {
    init();
    if (t_in_host_fn) return;   // the launch itself is refused (cudaErrorNotPermitted)
    if (g_sources_pending.load()) settle_pageable_sources();   // the launch is the program's next call
    std::unique_lock<std::mutex> lk(g_mu);
    static std::set<const void *> &loaded = *new std::set<const void *>;
    if (!g_load_sync || !loaded.insert(key).second || !launching) return;
    // The device's queued work must finish; nothing is ordered by it (t_host_vc stays), and
    // held legacy work stays held (the legacy stream is not waited for past it): the load
    // is no synchronization the program may count on.
    std::vector<std::pair<Stream *, uint64_t>> targets;
    for (Stream *s : g_streams) {
        uint64_t target = s->finished;
        for (const Op &op : s->q) {
            if (op.hold && !op.hold->done) break;
            target++;
        }
        targets.emplace_back(s, target);
    }
    const std::string what = describe();
    g_loading.push_back(what);
    host_wait(lk, [&targets] {
        for (const auto &t : targets)
            if (t.first->finished < t.second) return false;
        return true;
    });
    g_loading.erase(std::find(g_loading.begin(), g_loading.end(), what));
}

void load_kernel(const void *kernel, const char *name, bool launching) {
    load(kernel, launching, [name] { return std::string("kernel ") + name + " at its first launch"; });
}

void load_library_kernels(const std::string &what) {
    init();
    if (!g_load_sync) return;
    static std::mutex mu;
    static std::set<std::string> &names = *new std::set<std::string>;
    const void *key;
    {
        std::lock_guard<std::mutex> lk(mu);
        key = &*names.insert(what).first;   // a set's elements stay where they are: the key
    }
    load(key, true, [&what] { return what + " at its first call"; });
}

}  // namespace emu

using namespace emu;

// ================================================================ the cudart entry points

extern "C" {

cudaError_t cudaGetLastError(void) {
    init();
    cudaError_t e = t_last;
    int st = g_sticky.load();
    if (st != cudaSuccess) return (cudaError_t)st;
    t_last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) {
    init();
    int st = g_sticky.load();
    return st != cudaSuccess ? (cudaError_t)st : t_last;
}

// ---------------------------------------------------------------- device

cudaError_t cudaGetDeviceCount(int *count) {
    API_ENTRY();
    if (!count) return ret(cudaErrorInvalidValue);
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    API_ENTRY();
    if (device != 0) return ret(cudaErrorInvalidDevice);
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
    API_ENTRY();
    if (!device) return ret(cudaErrorInvalidValue);
    *device = 0;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int device) {
    API_ENTRY();
    if (!p) return ret(cudaErrorInvalidValue);
    if (device != 0) return ret(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    int a = arch();
    snprintf(p->name, sizeof p->name, "CUDA emulator (sm_%d)", a);
    p->totalGlobalMem = g_mem_cap;
    p->sharedMemPerBlock = 48 * 1024;
    p->sharedMemPerBlockOptin = smem_optin();
    p->sharedMemPerMultiprocessor = smem_optin() + 1024;
    p->regsPerBlock = 65536;
    p->regsPerMultiprocessor = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024; p->maxThreadsDim[1] = 1024; p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 0x7fffffff; p->maxGridSize[1] = 65535; p->maxGridSize[2] = 65535;
    p->major = a / 10;
    p->minor = a % 10;
    p->multiProcessorCount = a == 90 ? 132 : a == 89 ? 128 : a == 86 ? 84 : 108;   // H100 SXM, RTX 4090, A40, A100
    p->maxThreadsPerMultiProcessor = a == 86 || a == 89 ? 1536 : 2048;
    p->unifiedAddressing = 1;
    p->canMapHostMemory = 1;
    p->concurrentKernels = 1;
    p->asyncEngineCount = 2;
    p->l2CacheSize = 50 * 1024 * 1024;
    p->memoryBusWidth = 5120;
    p->totalConstMem = 65536;
    p->managedMemory = 1;
    p->pciBusID = 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device) {
    API_ENTRY();
    if (!value) return ret(cudaErrorInvalidValue);
    if (device != 0) return ret(cudaErrorInvalidDevice);
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = (int)p.sharedMemPerBlock; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)p.sharedMemPerBlockOptin; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrMaxRegistersPerBlock: *value = p.regsPerBlock; break;
    case cudaDevAttrUnifiedAddressing: *value = 1; break;
    default: return ret(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
    API_ENTRY();
    std::unique_lock<std::mutex> lk(g_mu);
    if (g_trace) say("host: waits for the device");
    sync_all(lk);
    int st = g_sticky.load();
    return st != cudaSuccess ? ret((cudaError_t)st) : cudaSuccess;
}

cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest) {
    API_ENTRY();
    if (least) *least = 0;
    if (greatest) *greatest = -5;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *freeb, size_t *total) {
    API_ENTRY();
    std::lock_guard<std::mutex> lk(g_mem_mu);
    if (freeb) *freeb = g_mem_cap - g_dev_used;
    if (total) *total = g_mem_cap;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v) {
    if (!v) return ret(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v) {
    if (!v) return ret(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

// ---------------------------------------------------------------- memory

cudaError_t cudaMalloc(void **p, size_t bytes) {
    API_ENTRY();
    return ret(register_alloc(p, bytes, MEM_DEVICE));
}

cudaError_t cudaMallocHost(void **p, size_t bytes) {
    API_ENTRY();
    return ret(register_alloc(p, bytes, MEM_PINNED));
}

cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned int flags) {
    API_ENTRY();
    if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
        return ret(cudaErrorInvalidValue);
    return ret(register_alloc(p, bytes, MEM_PINNED));
}

// Page-locks memory the caller allocated: it becomes pinned (registered) memory, the same
// address on the device (unified addressing); unregistering gives it back, still the
// caller's to free. Overlapping an existing allocation is cudaErrorHostMemoryAlreadyRegistered.
cudaError_t cudaHostRegister(void *p, size_t bytes, unsigned int flags) {
    API_ENTRY();
    if (!p || bytes == 0) return ret(cudaErrorInvalidValue);
    if (flags & ~(unsigned)(cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterIoMemory |
                            cudaHostRegisterReadOnly))
        return ret(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lk(g_mem_mu);
    auto it = g_allocs.lower_bound((uintptr_t)p);
    bool overlap = it != g_allocs.end() && it->first < (uintptr_t)p + bytes;
    if (it != g_allocs.begin()) {
        auto prev = std::prev(it);
        overlap = overlap || (uintptr_t)prev->second.base + prev->second.bytes > (uintptr_t)p;
    }
    if (overlap) {
        say("cudaHostRegister(%p, %zu): the range overlaps memory already registered or allocated by CUDA", p, bytes);
        return ret(cudaErrorHostMemoryAlreadyRegistered);
    }
    g_allocs[(uintptr_t)p] = Alloc{(char *)p, bytes, MEM_PINNED, ++g_alloc_ids};
    g_registered[(uintptr_t)p] = true;
    return cudaSuccess;
}

// Unlike cudaFree and cudaFreeHost, its documentation says nothing of waiting, so it does
// not: a copy still queued that touches the range faults when it runs (copy_async), and a
// kernel's argument in it is pageable memory by then. The program synchronizes first.
cudaError_t cudaHostUnregister(void *p) {
    API_ENTRY();
    std::lock_guard<std::mutex> lk(g_mem_mu);
    if (!g_registered.count((uintptr_t)p)) {
        say("cudaHostUnregister(%p): not the start of a range cudaHostRegister registered", p);
        return ret(cudaErrorHostMemoryNotRegistered);
    }
    g_registered.erase((uintptr_t)p);
    g_allocs.erase((uintptr_t)p);
    g_frees.fetch_add(1, std::memory_order_release);
    return cudaSuccess;
}

cudaError_t cudaHostGetDevicePointer(void **dev, void *host, unsigned int flags) {
    API_ENTRY();
    if (!dev || flags != 0) return ret(cudaErrorInvalidValue);
    Alloc a;
    if (!find_alloc(host, &a) || a.kind != MEM_PINNED) {
        say("cudaHostGetDevicePointer(%p): not pinned host memory (%s)", host, mem_kind_name(mem_kind(host)));
        return ret(cudaErrorInvalidValue);
    }
    *dev = host;   // unified addressing: the same address
    return cudaSuccess;
}

// cudaFree and cudaFreeHost "exhibit synchronous behavior": they wait for the device.
cudaError_t cudaFree(void *p) {
    API_ENTRY();
    if (!p) return cudaSuccess;
    {
        std::unique_lock<std::mutex> lk(g_mu);
        sync_all(lk);
    }
    return ret(unregister_free(p, MEM_DEVICE, "cudaFree"));
}

cudaError_t cudaFreeHost(void *p) {
    API_ENTRY();
    if (!p) return cudaSuccess;
    {
        std::unique_lock<std::mutex> lk(g_mu);
        sync_all(lk);
    }
    return ret(unregister_free(p, MEM_PINNED, "cudaFreeHost"));
}

static const char *kind_name(cudaMemcpyKind k) {
    switch (k) {
    case cudaMemcpyHostToHost: return "cudaMemcpyHostToHost";
    case cudaMemcpyHostToDevice: return "cudaMemcpyHostToDevice";
    case cudaMemcpyDeviceToHost: return "cudaMemcpyDeviceToHost";
    case cudaMemcpyDeviceToDevice: return "cudaMemcpyDeviceToDevice";
    case cudaMemcpyDefault: return "cudaMemcpyDefault";
    }
    return "?";
}

// The two sides of a copy against its direction: a side named device must be one device
// (or, with unified addressing, pinned) allocation holding all its bytes; a side named host
// must not be device memory. cudaMemcpyDefault takes each side's kind from the registry.
static cudaError_t check_copy(const char *call, void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                              MemKind *dk, MemKind *sk) {
    *dk = mem_kind(dst);
    *sk = mem_kind(src);
    bool want_dst_dev, want_src_dev;
    switch (kind) {
    case cudaMemcpyHostToHost: want_dst_dev = false; want_src_dev = false; break;
    case cudaMemcpyHostToDevice: want_dst_dev = true; want_src_dev = false; break;
    case cudaMemcpyDeviceToHost: want_dst_dev = false; want_src_dev = true; break;
    case cudaMemcpyDeviceToDevice: want_dst_dev = true; want_src_dev = true; break;
    case cudaMemcpyDefault:
        want_dst_dev = *dk != MEM_PAGEABLE;
        want_src_dev = *sk != MEM_PAGEABLE;
        break;
    default:
        say("%s: copy kind %d is not a cudaMemcpyKind", call, (int)kind);
        return cudaErrorInvalidMemcpyDirection;
    }
    if (n == 0) return cudaSuccess;
    char what[160];
    if (want_dst_dev) {
        snprintf(what, sizeof what, "%s destination (%s)", call, kind_name(kind));
        if (!check_device_range(dst, n, what)) return cudaErrorInvalidValue;
    } else if (*dk == MEM_DEVICE) {
        say("%s: the destination %p is device memory, but the direction is %s", call, dst, kind_name(kind));
        return cudaErrorInvalidValue;
    }
    if (want_src_dev) {
        snprintf(what, sizeof what, "%s source (%s)", call, kind_name(kind));
        if (!check_device_range(src, n, what)) return cudaErrorInvalidValue;
    } else if (*sk == MEM_DEVICE) {
        say("%s: the source %p is device memory, but the direction is %s", call, src, kind_name(kind));
        return cudaErrorInvalidValue;
    }
    if (!dst || !src) return cudaErrorInvalidValue;
    return cudaSuccess;
}

static cudaError_t copy_async(const char *call, void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                              cudaStream_t h, bool sync) {
    MemKind dk, sk;
    cudaError_t e = check_copy(call, dst, src, n, kind, &dk, &sk);
    if (e != cudaSuccess || n == 0) return ret(e);
    std::unique_lock<std::mutex> lk(g_mu);
    Stream *s = stream_of(h);
    if (!s) return ret(cudaErrorInvalidResourceHandle);
    // From pageable memory the runtime copies into a staging buffer before returning; the
    // copy to device memory happens in stream order.
    std::shared_ptr<std::vector<char>> staged;
    const void *src_arg = src;
    if (sk == MEM_PAGEABLE && dk != MEM_PAGEABLE) {
        staged = std::make_shared<std::vector<char>>((const char *)src, (const char *)src + n);
        src = staged->data();
    }
    // Its device and pinned sides must still be the allocations they are now when it runs:
    // a range unregistered meanwhile (cudaHostUnregister waits for nothing) is gone
    LiveAlloc da = {0, 0, 0}, sa = {0, 0, 0};
    if (dk != MEM_PAGEABLE) alloc_at((uintptr_t)dst, &da);
    if (sk != MEM_PAGEABLE && !staged) alloc_at((uintptr_t)src, &sa);
    std::string what = std::string(call) + " of " + std::to_string(n) + " bytes";
    Op op(OP_WORK, what, [dst, src, n, staged, da, sa, what] {
        const void *gone = !still_live(da, dst) ? dst : !still_live(sa, src) ? src : nullptr;
        if (gone) {
            fault(cudaErrorIllegalAddress, "%s: its %s %p was freed or unregistered (cudaHostUnregister) after the "
                  "copy was queued, before it ran", what.c_str(), gone == dst ? "destination" : "source", gone);
            return;
        }
        memmove(dst, src, n);
    });
    op.observed = dk != MEM_DEVICE;   // into host memory: the host may poll it
    if (staged && !sync && dk == MEM_DEVICE) {   // held until the program's next CUDA call, which checks the source (above)
        if (!g_source_hold) g_source_hold = std::make_shared<Record>();
        op.source_hold = g_source_hold;
        g_sources.push_back(PageableSource{src_arg, n, staged, what});
        g_sources_pending.store(true);
    }
    // cudaMemcpy from pageable memory to device memory returns once the source is staged,
    // and one from device memory to device memory at once ("no host-side synchronization
    // is performed"): the write stays queued on the legacy stream, held (g_legacy_hold)
    // until the program orders it. From pinned memory, to host memory
    // (pageable or pinned), and every other cudaMemcpy: the call returns once the copy is done.
    bool late = sync && dk == MEM_DEVICE && (sk == MEM_PAGEABLE || sk == MEM_DEVICE);
    push(s, std::move(op));   // on the legacy stream: held (g_legacy_hold)
    // host memory to host memory: "fully synchronous with respect to the host", Async too
    if (!late && (sync || dk == MEM_PAGEABLE || (sk != MEM_DEVICE && dk != MEM_DEVICE))) sync_stream(lk, s);
    int st = g_sticky.load();
    return st != cudaSuccess ? ret((cudaError_t)st) : cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind) {
    API_ENTRY();
    return copy_async("cudaMemcpy", dst, src, n, kind, 0, true);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
    API_ENTRY();
    return copy_async("cudaMemcpyAsync", dst, src, n, kind, s, false);
}

static cudaError_t memset_async(const char *call, void *p, int value, size_t n, cudaStream_t h) {
    if (n == 0) return cudaSuccess;
    char what[96];
    snprintf(what, sizeof what, "%s", call);
    if (!check_device_range(p, n, what)) return ret(cudaErrorInvalidValue);
    std::unique_lock<std::mutex> lk(g_mu);
    Stream *s = stream_of(h);
    if (!s) return ret(cudaErrorInvalidResourceHandle);
    push(s, Op(OP_WORK, std::string(call) + " of " + std::to_string(n) + " bytes", [p, value, n] { memset(p, value, n); }));
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int value, size_t n) {
    API_ENTRY();
    return memset_async("cudaMemset", p, value, n, 0);
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t s) {
    API_ENTRY();
    return memset_async("cudaMemsetAsync", p, value, n, s);
}

// ---------------------------------------------------------------- streams

static cudaError_t create_stream(cudaStream_t *out, unsigned flags, int priority) {
    if (!out) return ret(cudaErrorInvalidValue);
    if (flags & ~(unsigned)cudaStreamNonBlocking) return ret(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lk(g_mu);
    start_threads();
    *out = (cudaStream_t)new_stream(flags, priority, false);
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *s) {
    API_ENTRY();
    return create_stream(s, 0, 0);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
    API_ENTRY();
    return create_stream(s, flags, 0);
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned int flags, int priority) {
    API_ENTRY();
    return create_stream(s, flags, std::max(-5, std::min(0, priority)));
}

// Returns at once; the stream's queued work still runs (the reference's rule).
cudaError_t cudaStreamDestroy(cudaStream_t h) {
    API_ENTRY();
    std::lock_guard<std::mutex> lk(g_mu);
    Stream *s = stream_of(h);
    if (!s || s->legacy) return ret(cudaErrorInvalidResourceHandle);
    s->destroyed = true;
    s->work_cv.notify_one();
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t h) {
    API_ENTRY();
    std::unique_lock<std::mutex> lk(g_mu);
    Stream *s = stream_of(h);
    if (!s) return ret(cudaErrorInvalidResourceHandle);
    if (g_trace) say("host: waits for stream %d", s->id);
    sync_stream(lk, s);
    int st = g_sticky.load();
    return st != cudaSuccess ? ret((cudaError_t)st) : cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t h) {
    API_ENTRY();
    std::lock_guard<std::mutex> lk(g_mu);
    Stream *s = stream_of(h);
    if (!s) return ret(cudaErrorInvalidResourceHandle);
    if (s->legacy) release_legacy_hold();   // a polling loop sees the copy land
    if (s->finished < s->queued) return ret(cudaErrorNotReady);   // a result, also kept as the last error
    join(t_host_vc, s->done_vc);
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t h, cudaEvent_t ev, unsigned int flags) {
    API_ENTRY();
    std::lock_guard<std::mutex> lk(g_mu);
    Stream *s = stream_of(h);
    Event *e = (Event *)ev;
    if (!s || !e || e->destroyed) return ret(cudaErrorInvalidResourceHandle);
    if (flags != 0 && flags != cudaEventWaitDefault) return ret(cudaErrorInvalidValue);
    RecordP r = e->latest;   // the record current now: re-recording later does not move this wait
    if (!r) return cudaSuccess;   // never recorded: nothing to wait for
    release_for(r);
    push(s, Op(OP_WAIT, "cudaStreamWaitEvent on stream " + std::to_string(r->stream ? r->stream->id : -1), nullptr, r));
    return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t h, cudaHostFn_t fn, void *arg) {
    API_ENTRY();
    if (!fn) return ret(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lk(g_mu);
    Stream *s = stream_of(h);
    if (!s) return ret(cudaErrorInvalidResourceHandle);
    Op op(OP_HOSTFN, "host function on stream " + std::to_string(s->id));
    op.fn = fn;
    op.arg = arg;
    op.observed = true;   // its effects are the host's
    push(s, std::move(op));
    return cudaSuccess;
}

// ---------------------------------------------------------------- events

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned int flags) {
    API_ENTRY();
    if (!out) return ret(cudaErrorInvalidValue);
    if (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess))
        return ret(cudaErrorInvalidValue);
    if ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming)) return ret(cudaErrorInvalidValue);
    Event *e = new Event;
    e->flags = flags;
    *out = (cudaEvent_t)e;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *out) { return cudaEventCreateWithFlags(out, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t ev) {
    API_ENTRY();
    Event *e = (Event *)ev;
    std::lock_guard<std::mutex> lk(g_mu);
    if (!e || e->destroyed) return ret(cudaErrorInvalidResourceHandle);
    e->destroyed = true;   // queued waits hold the record itself; the handle stays invalid
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t h) {
    API_ENTRY();
    std::lock_guard<std::mutex> lk(g_mu);
    Event *e = (Event *)ev;
    Stream *s = stream_of(h);
    if (!e || e->destroyed || !s) return ret(cudaErrorInvalidResourceHandle);
    RecordP r = std::make_shared<Record>();
    push(s, Op(OP_RECORD, "cudaEventRecord", nullptr, r));
    e->latest = r;
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t ev) {
    API_ENTRY();
    std::lock_guard<std::mutex> lk(g_mu);
    Event *e = (Event *)ev;
    if (!e || e->destroyed) return ret(cudaErrorInvalidResourceHandle);
    release_for(e->latest);   // a polling loop sees the legacy stream's work land
    if (e->latest && !e->latest->done) return ret(cudaErrorNotReady);   // kept as the last error, as cudart does
    if (e->latest) join(t_host_vc, e->latest->vc);
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev) {
    API_ENTRY();
    std::unique_lock<std::mutex> lk(g_mu);
    Event *e = (Event *)ev;
    if (!e || e->destroyed) return ret(cudaErrorInvalidResourceHandle);
    RecordP r = e->latest;   // the record current now
    if (g_trace) say("host: waits for an event");
    release_for(r);
    if (r) {
        host_wait(lk, [&r] { return r->done; });
        join(t_host_vc, r->vc);
    }
    int st = g_sticky.load();
    return st != cudaSuccess ? ret((cudaError_t)st) : cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    API_ENTRY();
    std::lock_guard<std::mutex> lk(g_mu);
    Event *ea = (Event *)a, *eb = (Event *)b;
    if (!ms || !ea || !eb || ea->destroyed || eb->destroyed) return ret(cudaErrorInvalidResourceHandle);
    if ((ea->flags | eb->flags) & cudaEventDisableTiming) return ret(cudaErrorInvalidResourceHandle);
    if (!ea->latest || !eb->latest) return ret(cudaErrorInvalidResourceHandle);
    if (!ea->latest->done || !eb->latest->done) return ret(cudaErrorNotReady);
    *ms = (float)(eb->latest->t_ms - ea->latest->t_ms);
    return cudaSuccess;
}

}  // extern "C"
