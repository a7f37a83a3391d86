// kernels.cpp: the kernel engine. A launch is checked against the hardware's limits and
// the real build's resource usage (launch_limits.cpp, generated from ptxas), then queued on
// its stream. There several blocks at a time run interleaved, in an order drawn from
// CUDA_EMU_SEED; every CUDA thread is a fiber (a stack of its own and a register switch),
// and the scheduler switches between them at __syncthreads, __syncwarp, shuffles and votes,
// and now and then at a memory access, picking the next runnable thread at random
// (seeded). So the interleaving, within a block and between blocks, changes with the seed:
// code that needs a barrier or an atomic it lacks, or depends on block order, changes bits
// between seeds. A barrier not reached by every live thread, a warp operation not reached
// by every lane of its mask, and a lane outside its own mask are errors, named with the
// kernel, block and thread. Every load and store of the kernels is checked (the memory
// checks below): the bounds of shared and global memory, alignment, and races.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "device.h"
#include "emu.h"

#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

// The resource usage of every kernel of the real build (ptxas), per architecture.
struct EmuKernelLimits {
    const char *mangled;
    int arch;          // 80, 90
    int regs;          // registers per thread
    int static_smem;   // bytes
    int max_threads;   // its __launch_bounds__ (0: none)
};
extern "C" const EmuKernelLimits emu_kernel_limits[];
extern "C" const int emu_kernel_limits_count;

namespace emu_dev {

thread_local ThreadView *t_view = nullptr;

ThreadView *outside_kernel() { emu::die("a device built-in (threadIdx, blockIdx, ...) was read outside a kernel"); }
uint64_t math_seed() {
    static const uint64_t seed = emu::env_u64("CUDA_EMU_MATH_SEED", 1);
    return seed;
}
uint3 thread_idx() { return cur()->thread_idx; }
uint3 block_idx() { return cur()->block_idx; }
dim3 block_dim() { return cur()->block_dim; }
dim3 grid_dim() { return cur()->grid_dim; }

static const size_t STACK_BYTES =
#ifdef EMU_ASAN
    512 * 1024;
#else
    128 * 1024;
#endif

// ---------------------------------------------------------------- context switch
// A fiber switch saves the callee-saved registers and the stack pointer, and loads
// another's: no system call (glibc's swapcontext makes one per switch to save the signal
// mask, which a CUDA thread does not have). The SSE and x87 control words are not switched:
// every fiber of a host thread runs with that thread's (nothing in a kernel changes them),
// and loading them (fldcw, ldmxcsr) was most of a switch's time.
extern "C" void emu_ctx_switch(void **save_sp, void *load_sp);
extern "C" void emu_fiber_start();
__asm__(
    ".text\n"
    ".globl emu_ctx_switch\n"
    ".type emu_ctx_switch,@function\n"
    "emu_ctx_switch:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size emu_ctx_switch, .-emu_ctx_switch\n"
    ".globl emu_fiber_start\n"
    ".type emu_fiber_start,@function\n"
    "emu_fiber_start:\n"
    "    call emu_fiber_main\n"
    "    ud2\n"
    ".size emu_fiber_start, .-emu_fiber_start\n");

// A fresh fiber's stack: what emu_ctx_switch pops (six registers) and a return into
// emu_fiber_start, so that emu_fiber_main starts with the ABI's alignment.
// Each stack's top is moved down by a different multiple of 64 bytes (its color): the
// stacks are 4 KiB-aligned mappings, and without it every fiber's hot lines would fall in
// the same few cache sets, and a switch to another fiber would miss the cache.
static void *fiber_stack_init(char *stack, size_t bytes, int color) {
    uintptr_t top = ((uintptr_t)stack + bytes - (size_t)(color % 61) * 64) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)(top - 72);   // emu_fiber_start starts at top - 16: aligned for its call
    memset(sp, 0, 48);
    sp[6] = (uint64_t)(uintptr_t)emu_fiber_start;
    return sp;
}

enum State { READY, AT_BARRIER, AT_WARP, DONE };
enum WarpOp { WOP_NONE, WOP_SYNC, WOP_SHFL, WOP_VOTE };

struct Block;
struct Grid;
struct Thread {   // what the scheduler reads at every switch first (one cache line)
    void *sp = nullptr;            // saved stack pointer while switched out
    Block *blk = nullptr;
    char *stack = nullptr;
    State state = READY;
    int linear = 0, lane = 0, warp = 0;
    // a warp operation in progress
    WarpOp wop = WOP_NONE;
    unsigned wmask = 0;
    int wkind = 0, warg = 0, wwidth = 32;
    uint64_t wvalue = 0, wresult = 0;
    ThreadView view;
#ifdef EMU_ASAN
    void *fake_stack = nullptr;
#endif
};

// The warp's clocks for the race check: vc[l][m] is what lane l knows of lane m's clock
// (vc[l][l] is lane l's own). A warp operation joins the clocks of the lanes in its mask,
// then each of them moves its own on: an access of lane m with clock c is ordered before
// lane l's later accesses iff vc[l][m] >= c.
struct WarpClock {
    uint32_t vc[32][32];
};

// A block's shared memory: one region per slot of the scheduler, each followed by an
// unmapped page. Static __shared__ variables are placed from its start as their
// declarations are reached (each filled with a pattern drawn for the block, with a gap
// between them); dynamic shared memory is exactly the launch's size, ending where the
// unmapped page begins (less under 256 bytes of alignment, which the access check covers).
static const size_t SMEM_REGION = 232 * 1024;
struct SharedVar {
    uint64_t key;
    char *ptr;
    size_t bytes;
    const char *name;
};

struct Block {
    Grid *grid = nullptr;
    int slot = 0;
    uint32_t id = 0;               // linear block index
    uint32_t serial = 0;           // this run of a block, for the shared-memory race check
    std::vector<Thread> threads;
    int nthreads = 0, live = 0, at_barrier = 0;
    uint32_t bar = 0;              // barriers completed
    std::vector<WarpClock> clocks;   // kept on race-checked launches only
    std::vector<uint32_t> arrived;   // per warp: the lanes waiting at a warp operation
    bool clock_overflow = false;   // a counter ran out: no race check for the rest of the block
    char *smem = nullptr;          // the slot's region
    char *dyn = nullptr;           // dynamic shared memory: [dyn, dyn + smem)
    size_t static_used = 0;
    std::vector<SharedVar> vars;
    uintptr_t var_lo = 0, var_hi = 0;   // the static shared variable last accessed (the fast path's)
    uint64_t rng = 0;
    bool active = false;
};

// The race check's record of one access (16 bytes), and a shadow cell: the last write and
// the last read of 8 bytes of memory.
struct Rec {
    uint32_t gen;                  // launch (global memory) or block run (shared memory); 0: none
    uint32_t block_atomic;         // linear block << 1 | atomic
    uint32_t bar_mask;             // barriers completed << 8 | bytes of the 8 touched
    uint32_t clk_tid;              // lane clock << 10 | linear thread index
};
struct Cell {
    Rec w, r;
};

struct Grid {
    std::string name, file;
    int line;
    const void *kernel;
    dim3 g, b;
    size_t smem;
    std::vector<emu::LaunchArg> ptrs;
    std::function<void()> body;
    uint64_t launch_no;
    uint32_t gen;
    bool racecheck;   // this launch's accesses go through the race check
};

// Per host thread (a stream's worker): the fiber stacks, shared regions and race-check
// shadows, reused from launch to launch.
// They go back when the thread ends (a destroyed stream's worker): a program that makes
// and destroys many streams would otherwise run out of mappings.
struct ThreadMaps {
    std::vector<char *> stacks, regions;
    std::vector<Cell *> region_shadow;
    Cell *arena_shadow = nullptr;
    ~ThreadMaps();
};
static thread_local ThreadMaps t_maps;
#define t_stacks (t_maps.stacks)
#define t_regions (t_maps.regions)
#define t_region_shadow (t_maps.region_shadow)
static thread_local Thread *t_cur = nullptr;     // the CUDA thread running now
static thread_local Grid *t_grid = nullptr;      // the grid this host thread runs
static thread_local void *t_sched_sp = nullptr;  // the scheduler's saved stack pointer
#ifdef EMU_ASAN
static thread_local const void *t_sched_bottom = nullptr;
static thread_local size_t t_sched_size = 0;
#endif
static thread_local std::string t_error;         // misuse a fiber found; the scheduler reports it

// The memory checks' fast path (the __tsan_* entry points inline it): the ranges in which
// an access needs no more than its bounds and alignment checked: the 4 allocations global
// accesses last fell in, the running block's dynamic shared memory and the static shared
// variable it last touched, and the running CUDA thread's stack (its locals: no check).
// Empty outside a kernel; every access of a race-checked launch takes the full check.
struct FastRanges {
    struct { uintptr_t lo, hi; } alloc[4] = {};
    unsigned alloc_next = 0;
    uintptr_t dyn_lo = 0, dyn_hi = 0;
    uintptr_t var_lo = 0, var_hi = 0;
    uintptr_t stack_lo = 0, stack_hi = 0;
    bool slow = true;   // every access takes the full check (a race-checked launch)
};
static thread_local FastRanges t_fast;

static char *map_guarded(size_t bytes, const char *what) {
    char *p = (char *)mmap(nullptr, bytes + 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                           -1, 0);
    if (p == MAP_FAILED) emu::die("no memory for %s (%zu bytes): %s", what, bytes, strerror(errno));
    mprotect(p, 4096, PROT_NONE);
    mprotect(p + 4096 + bytes, 4096, PROT_NONE);
    return p + 4096;
}

static char *stack_for(int i) {
    while ((int)t_stacks.size() <= i) {
        // a guard page below each stack: an overflow faults instead of corrupting a neighbour
        char *p = (char *)mmap(nullptr, STACK_BYTES + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                               -1, 0);
        if (p == MAP_FAILED) emu::die("no memory for fiber stacks (%zu bytes each): %s", STACK_BYTES, strerror(errno));
        mprotect(p, 4096, PROT_NONE);
        t_stacks.push_back(p + 4096);
    }
    return t_stacks[(size_t)i];
}

static char *region_for(int slot) {
    while ((int)t_regions.size() <= slot) {
        t_regions.push_back(map_guarded(SMEM_REGION, "shared memory"));
        t_region_shadow.push_back(nullptr);
    }
    return t_regions[(size_t)slot];
}

static uint64_t gcd64(uint64_t a, uint64_t b) {
    while (b) { uint64_t t = a % b; a = b; b = t; }
    return a;
}

static uint64_t next_rand(uint64_t *s) {
    uint64_t x = (*s += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// A draw in [0, n) (a multiply, not a division: the scheduler draws at every switch).
static inline uint64_t rand_below(uint64_t *s, uint64_t n) {
    return (uint64_t)(((unsigned __int128)next_rand(s) * n) >> 64);
}

static uint3 block_index(const Grid *g, uint64_t id) {
    return make_uint3((unsigned)(id % g->g.x), (unsigned)(id / g->g.x % g->g.y), (unsigned)(id / ((uint64_t)g->g.x * g->g.y)));
}
static uint3 thread_index(const Grid *g, unsigned i) {
    return make_uint3(i % g->b.x, i / g->b.x % g->b.y, i / (g->b.x * g->b.y));
}

static std::string where(const Block *b, const Thread *t) {
    char buf[384];
    snprintf(buf, sizeof buf, "kernel %s (launched at %s:%d), block (%u,%u,%u), thread (%u,%u,%u)", b->grid->name.c_str(),
             b->grid->file.c_str(), b->grid->line, t->view.block_idx.x, t->view.block_idx.y, t->view.block_idx.z,
             t->view.thread_idx.x, t->view.thread_idx.y, t->view.thread_idx.z);
    return buf;
}

// A fault (SIGSEGV, SIGBUS) names the kernel, block and thread running on this host thread,
// where a GPU reports an illegal address with the kernel: an access the checks did not
// cover (an index that overflowed to a wild address, a host pointer in a table the device
// cannot read, a page past an allocation's end). Then the signal's default action.
static void on_fault(int sig, siginfo_t *si, void *) {
    char buf[768];
    const Thread *t = t_cur;
    const Grid *g = t_grid;
    int n;
    if (t && g)
        n = snprintf(buf, sizeof buf, "cuda_emu: %s at address %p in kernel %s (launched at %s:%d), block (%u,%u,%u), "
                     "thread (%u,%u,%u): an access outside the memory the device may use (on a GPU: an illegal "
                     "address)\n", sig == SIGBUS ? "SIGBUS" : "SIGSEGV", si->si_addr, g->name.c_str(), g->file.c_str(),
                     g->line, t->view.block_idx.x, t->view.block_idx.y, t->view.block_idx.z, t->view.thread_idx.x,
                     t->view.thread_idx.y, t->view.thread_idx.z);
    else
        n = snprintf(buf, sizeof buf, "cuda_emu: %s at address %p outside any kernel\n", sig == SIGBUS ? "SIGBUS" : "SIGSEGV",
                     si->si_addr);
    if (n > 0) (void)!write(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    signal(sig, SIG_DFL);
    raise(sig);
}

}  // namespace emu_dev

namespace emu {
// Where the program (or a sanitizer) has not installed its own.
void install_fault_report() {
    for (int sig : {SIGSEGV, SIGBUS}) {
        struct sigaction old;
        if (sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = emu_dev::on_fault;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(sig, &sa, nullptr);
    }
}
}  // namespace emu

namespace emu_dev {

// ---------------------------------------------------------------- settings

struct Settings {
    int blocks_at_once;      // CUDA_EMU_BLOCKS: blocks interleaved (default 4)
    int racecheck;           // CUDA_EMU_RACECHECK: 0 off, 1 the first launch of each kernel, block and grid shape (default), 2 all
    uint32_t preempt;        // CUDA_EMU_PREEMPT: mean shared/global accesses between forced switches (0: none)
};
static Settings g_settings;   // read once, before the first grid runs
static const Settings &settings() {
    static std::once_flag once;
    std::call_once(once, [] {
        emu::init();
        Settings &s = g_settings;
        s.blocks_at_once = (int)emu::env_u64("CUDA_EMU_BLOCKS", 4);
        if (s.blocks_at_once < 1) s.blocks_at_once = 1;
        s.racecheck = (int)emu::env_u64("CUDA_EMU_RACECHECK", 1);
        s.preempt = (uint32_t)emu::env_u64("CUDA_EMU_PREEMPT", 64);
    });
    return g_settings;
}

// ---------------------------------------------------------------- fiber switching

static void switch_to_scheduler(Thread *t) {
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(t->state == DONE ? nullptr : &t->fake_stack, t_sched_bottom, t_sched_size);
#endif
    emu_ctx_switch(&t->sp, t_sched_sp);
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(t->fake_stack, &t_sched_bottom, &t_sched_size);
#endif
    t_view = &t->view;
}

extern "C" void emu_fiber_main() {
    Thread *t = t_cur;
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &t_sched_bottom, &t_sched_size);
#endif
    t_view = &t->view;
    t_grid->body();
    t->state = DONE;
    switch_to_scheduler(t);
    emu::die("a finished CUDA thread was resumed");
}

static void run_fiber(Thread *t) {
    t_cur = t;
    t_view = &t->view;
    Block *b = t->blk;
    t_fast.dyn_lo = (uintptr_t)b->dyn;
    t_fast.dyn_hi = (uintptr_t)b->dyn + b->grid->smem;
    t_fast.var_lo = b->var_lo;
    t_fast.var_hi = b->var_hi;
    t_fast.stack_lo = (uintptr_t)t->stack;
    t_fast.stack_hi = (uintptr_t)t->stack + STACK_BYTES;
#ifdef EMU_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, t->stack, STACK_BYTES);
#endif
    emu_ctx_switch(&t_sched_sp, t->sp);
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
    t_view = nullptr;
    t_cur = nullptr;
}

static Thread *current() {
    if (!t_cur) emu::die("__syncthreads, a warp operation or shared memory outside a kernel");
    return t_cur;
}

// ---------------------------------------------------------------- barriers and warp operations

void barrier() {
    Thread *t = current();
    t->state = AT_BARRIER;
    switch_to_scheduler(t);
}

static std::string hex32(unsigned v) {
    char h[16];
    snprintf(h, sizeof h, "0x%08x", v);
    return h;
}

static uint64_t warp_op(WarpOp op, unsigned mask, int kind, int arg, int width, uint64_t value) {
    Thread *t = current();
    if (!(mask >> t->lane & 1u))
        emu::die("%s: lane %d calls a warp operation with mask %s that does not include it (undefined behaviour)",
                 where(t->blk, t).c_str(), t->lane, hex32(mask).c_str());
    if (width <= 0 || width > 32 || (width & (width - 1)))
        emu::die("%s: warp operation with width %d (a power of two up to 32)", where(t->blk, t).c_str(), width);
    t->wop = op;
    t->wmask = mask;
    t->wkind = kind;
    t->warg = arg;
    t->wwidth = width;
    t->wvalue = value;
    t->state = AT_WARP;
    switch_to_scheduler(t);
    t->wop = WOP_NONE;
    return t->wresult;
}

void warp_sync(unsigned mask) { warp_op(WOP_SYNC, mask, 0, 0, 32, 0); }

uint64_t warp_shuffle(unsigned mask, uint64_t value, ShflKind kind, int arg, int width) {
    return warp_op(WOP_SHFL, mask, kind, arg, width, value);
}

unsigned warp_vote(unsigned mask, int pred, VoteKind kind) {
    return (unsigned)warp_op(WOP_VOTE, mask, kind, 0, 32, pred ? 1 : 0);
}

// Warp w's lanes waiting at a warp operation whose whole mask is there: their results,
// their clocks joined, and READY again (appended to ready). -1 with t_error on misuse.
static int try_complete_warp(Block *b, int w, std::vector<Thread *> &ready) {
    Thread *lanes[32] = {nullptr};
    int base = w * 32;
    for (int l = 0; l < 32 && base + l < b->nthreads; l++) lanes[l] = &b->threads[(size_t)(base + l)];
    int released = 0;
    for (int l = 0; l < 32; l++) {
        Thread *t = lanes[l];
        if (!t || t->state != AT_WARP) continue;
        unsigned mask = t->wmask;
        bool all = true;
        for (int m = 0; m < 32 && all; m++) {
            if (!(mask >> m & 1u)) continue;
            Thread *o = lanes[m];
            if (!o) {
                t_error = where(b, t) + ": warp operation mask names lane " + std::to_string(m) +
                          ", which this block does not have";
                return -1;
            }
            if (o->state == DONE || o->state == AT_BARRIER) {
                t_error = where(b, t) + ": a warp operation (mask " + hex32(mask) + ") whose lane " + std::to_string(m) +
                          (o->state == DONE ? " has exited" : " waits at __syncthreads") +
                          ": every lane of the mask must reach the same operation";
                return -1;
            }
            if (o->state != AT_WARP) { all = false; break; }
            if (o->wop != t->wop || o->wmask != mask || o->wkind != t->wkind) {
                t_error = where(b, t) + ": lanes of one mask at different warp operations (lane " + std::to_string(l) +
                          " and lane " + std::to_string(m) + ")";
                return -1;
            }
        }
        if (!all) continue;
        // compute every lane's result from the values as they arrived
        uint64_t vals[32];
        for (int m = 0; m < 32; m++) vals[m] = lanes[m] ? lanes[m]->wvalue : 0;
        unsigned ballot = 0;
        for (int m = 0; m < 32; m++)
            if ((mask >> m & 1u) && vals[m]) ballot |= 1u << m;
        for (int m = 0; m < 32; m++) {
            if (!(mask >> m & 1u)) continue;
            Thread *o = lanes[m];
            uint64_t r = 0;
            if (o->wop == WOP_SHFL) {
                int width = o->wwidth, seg = m & ~(width - 1), src = m;
                switch ((ShflKind)o->wkind) {
                case SHFL_XOR: src = seg + ((m - seg) ^ o->warg); if (src >= seg + width) src = m; break;
                case SHFL_IDX: src = seg + (o->warg & (width - 1)); break;
                case SHFL_DOWN: src = m + o->warg; if (src >= seg + width) src = m; break;
                case SHFL_UP: src = m - o->warg; if (src < seg) src = m; break;
                }
                if (!(mask >> src & 1u)) {
                    t_error = where(b, o) + ": shuffle reads lane " + std::to_string(src) +
                              ", which is not in the mask (its value is undefined)";
                    return -1;
                }
                r = vals[src];
            } else if (o->wop == WOP_VOTE) {
                switch ((VoteKind)o->wkind) {
                case VOTE_BALLOT: r = ballot; break;
                case VOTE_ANY: r = ballot != 0; break;
                case VOTE_ALL: r = ballot == mask; break;
                }
            }
            o->wresult = r;
            o->state = READY;
            ready.push_back(o);
        }
        b->arrived[(size_t)w] &= ~mask;
        released = 1;
        if (!b->grid->racecheck) continue;
        // the lanes of the mask synchronize: each learns what the others knew, then moves on
        WarpClock &wc = b->clocks[(size_t)w];
        uint32_t joined[32] = {0};
        for (int m = 0; m < 32; m++)
            if (mask >> m & 1u)
                for (int k = 0; k < 32; k++) joined[k] = joined[k] > wc.vc[m][k] ? joined[k] : wc.vc[m][k];
        for (int m = 0; m < 32; m++)
            if (mask >> m & 1u) {
                memcpy(wc.vc[m], joined, sizeof joined);
                if (++wc.vc[m][m] >= (1u << 22)) b->clock_overflow = true;
            }
    }
    return released;
}

// Nothing can run: says why block b is stuck (t_error).
static void describe_stuck(Block *b) {
    int at_warp = 0;
    const Thread *first_barrier = nullptr, *first_other = nullptr;
    for (int i = 0; i < b->nthreads; i++) {
        const Thread *t = &b->threads[(size_t)i];
        if (t->state == AT_WARP) at_warp++;
        if (t->state == AT_BARRIER && !first_barrier) first_barrier = t;
        if (t->state != AT_BARRIER && !first_other) first_other = t;
    }
    char msg[512];
    // CUDA: "__syncthreads() is allowed in conditional code but only if the conditional
    // evaluates identically across the entire thread block": a thread that exited never
    // arrives, so the barrier completes only when every thread of the block is there.
    if (b->at_barrier > 0)
        snprintf(msg, sizeof msg,
                 ": __syncthreads reached by %d of the block's %d threads (%d exited, %d wait at a warp operation; "
                 "first missing: thread %u); a barrier must be reached by every thread of the block",
                 b->at_barrier, b->nthreads, b->nthreads - b->live, at_warp,
                 first_other ? first_other->view.thread_idx.x : 0u);
    else
        snprintf(msg, sizeof msg, ": %d threads wait at warp operations that can never complete", at_warp);
    t_error = where(b, first_barrier ? first_barrier : first_other) + msg;
}

// ---------------------------------------------------------------- shared memory

static std::atomic<uint32_t> g_block_serial{1};

static void fill_pattern(char *p, size_t n, uint64_t seed) {
    uint64_t s = seed;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = next_rand(&s);
        memcpy(p + i, &v, 8);
    }
    for (; i < n; i++) p[i] = (char)next_rand(&s);
}

void *block_shared(uint64_t key, size_t bytes, size_t align, const char *name) {
    Block *b = current()->blk;
    for (const SharedVar &v : b->vars)
        if (v.key == key) return v.ptr;
    if (align < 16) align = 16;
    size_t at = (b->static_used + align - 1) / align * align;
    if (at + bytes > (size_t)(b->dyn - b->smem))
        emu::die("%s: static shared memory (%zu bytes with __shared__ %s) and %zu bytes of dynamic shared memory exceed "
                 "the %zu bytes the emulator gives a block", where(b, t_cur).c_str(), at + bytes, name, b->grid->smem,
                 SMEM_REGION);
    SharedVar v{key, b->smem + at, bytes, name};
    fill_pattern(v.ptr, bytes, b->rng ^ key);
    b->static_used = at + bytes + 16;   // a gap: an overrun of one variable is not inside the next
    b->vars.push_back(v);
    return v.ptr;
}

void *dynamic_shared(size_t align, const char *name) {
    Block *b = current()->blk;
    if ((uintptr_t)b->dyn % align)
        emu::die("%s: extern __shared__ %s asks for %zu-byte alignment (the emulator gives 256)", where(b, t_cur).c_str(),
                 name, align);
    return b->dyn;
}

// ---------------------------------------------------------------- the memory checks
// Every load and store of the project's device code is compiled with -fsanitize=thread's
// instrumentation (emu.mk), and the calls it makes land here (the __tsan_* functions at
// the end of this file). Outside a kernel, and for memory that is neither this block's
// shared memory nor the arena (a thread's locals, the launch's arguments), they do nothing.
// Otherwise: the bounds (the shared variable or the dynamic shared memory, the allocation),
// the alignment (an N-byte access to an N-aligned address, as the GPU requires), the race
// check, and now and then a switch to another CUDA thread (CUDA_EMU_PREEMPT), so that an
// update that is not atomic can lose another thread's.

enum { ACC_READ = 0, ACC_WRITE = 1, ACC_ATOMIC = 2 };

static thread_local uint64_t t_preempt_rng = 1;
static thread_local int64_t t_preempt_left = 1 << 30;

static void preempt(Thread *t) {
    t_preempt_left = 1 + (int64_t)rand_below(&t_preempt_rng, 2 * (uint64_t)g_settings.preempt);
    switch_to_scheduler(t);   // stays READY: the scheduler puts it back among the runnable
}

// The allocation cache of this host thread: the last few allocations kernels touched.
struct AllocCache {
    uintptr_t lo, hi;
};
static thread_local AllocCache t_acache[8];
static thread_local int t_acache_n = 0, t_acache_next = 0;
static thread_local uint64_t t_acache_frees = ~0ull;

// The race check's shadow of the arena, one per host thread that runs kernels (each
// launch runs on one): the cells of address a are at (a - arena start) / 8. Reserved
// address space; pages appear as kernels touch memory. Records of freed memory stay, and
// are stale: a record counts only within its own launch.
#define t_arena_shadow (t_maps.arena_shadow)

static size_t arena_shadow_bytes() { return (emu::g_arena_hi - emu::g_arena_lo) / 8 * sizeof(Cell); }
static size_t region_shadow_bytes() { return (SMEM_REGION + 7) / 8 * sizeof(Cell); }

ThreadMaps::~ThreadMaps() {
    for (char *p : stacks) munmap(p - 4096, STACK_BYTES + 4096);
    for (char *p : regions) munmap(p - 4096, SMEM_REGION + 2 * 4096);
    for (Cell *p : region_shadow)
        if (p) munmap(p, region_shadow_bytes());
    if (arena_shadow) munmap(arena_shadow, arena_shadow_bytes());
}

static Cell *arena_shadow() {
    if (!t_arena_shadow) {
        size_t n = arena_shadow_bytes();
        void *p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) emu::die("no address space for the race check's shadow (%zu bytes)", n);
        t_arena_shadow = (Cell *)p;
    }
    return t_arena_shadow;
}

static Cell *new_shadow(size_t bytes) {
    size_t n = (bytes + 7) / 8 * sizeof(Cell);
    void *p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) emu::die("out of memory for the race check's shadow of %zu bytes", bytes);
    return (Cell *)p;
}

// At each launch (cudaFree waits for the device, so nothing is freed while a grid runs).
static void refresh_alloc_cache() {
    uint64_t f = emu::free_count();
    if (f != t_acache_frees) {   // something was freed since: the cache may hold it
        t_acache_frees = f;
        t_acache_n = 0;
    }
}

static AllocCache *cached_alloc(uintptr_t a) {
    if (t_acache_n && a - t_acache[0].lo < t_acache[0].hi - t_acache[0].lo) return &t_acache[0];
    for (int i = 1; i < t_acache_n; i++)
        if (a - t_acache[i].lo < t_acache[i].hi - t_acache[i].lo) {
            std::swap(t_acache[0], t_acache[i]);
            return &t_acache[0];
        }
    emu::LiveAlloc la;
    if (!emu::alloc_at(a, &la)) return nullptr;
    // the newest in front (the next lookups most likely hit it), the one it displaces to a
    // free slot, or (all 8 taken) to a slot taken in turn. (A slot counted without being
    // written held a range of an earlier launch, perhaps freed since: a kernel's correct
    // access to a reused address was reported past the end of the old allocation.)
    if (t_acache_n == 0) {
        t_acache_n = 1;
    } else if (t_acache_n < 8) {
        t_acache[t_acache_n++] = t_acache[0];
    } else {
        t_acache[1 + t_acache_next] = t_acache[0];
        t_acache_next = (t_acache_next + 1) % 7;
    }
    t_acache[0] = AllocCache{la.lo, la.hi};
    return &t_acache[0];
}

[[noreturn]] static void access_error(Thread *t, const std::string &what) {
    emu::die("%s: %s", where(t->blk, t).c_str(), what.c_str());
}

static std::string describe_addr(Thread *t, uintptr_t a, bool *shared) {
    Block *b = t->blk;
    char buf[320];
    *shared = false;
    if (a - (uintptr_t)b->smem < SMEM_REGION) {
        *shared = true;
        for (const SharedVar &v : b->vars)
            if (a - (uintptr_t)v.ptr < v.bytes) {
                snprintf(buf, sizeof buf, "byte %zu of __shared__ %s (%zu bytes)", (size_t)(a - (uintptr_t)v.ptr), v.name,
                         v.bytes);
                return buf;
            }
        snprintf(buf, sizeof buf, "byte %zu of the dynamic shared memory (%zu bytes)", (size_t)(a - (uintptr_t)b->dyn),
                 b->grid->smem);
        return buf;
    }
    emu::Alloc al;
    if (emu::find_alloc((const void *)a, &al))
        snprintf(buf, sizeof buf, "%p, byte %zu of the %zu-byte %s allocation at %p", (void *)a,
                 (size_t)(a - (uintptr_t)al.base), al.bytes, emu::mem_kind_name(al.kind), (void *)al.base);
    else
        snprintf(buf, sizeof buf, "%p", (void *)a);
    return buf;
}

static std::string other_thread(const Block *b, const Rec &r) {
    const Grid *g = b->grid;
    uint3 bi = block_index(g, r.block_atomic >> 1), ti = thread_index(g, r.clk_tid & 1023u);
    char buf[160];
    snprintf(buf, sizeof buf, "thread (%u,%u,%u) of block (%u,%u,%u)", ti.x, ti.y, ti.z, bi.x, bi.y, bi.z);
    return buf;
}

// Whether the access r is ordered before the running thread's access now (same launch or
// block run): the same thread; the same block with a barrier since; the same warp with a
// warp operation since that covered both lanes.
static inline bool ordered(const Thread *t, const Block *b, const Rec &r) {
    if ((r.block_atomic >> 1) != (b->id & 0x7fffffffu)) return false;
    uint32_t tid = r.clk_tid & 1023u;
    if (tid == (uint32_t)t->linear) return true;
    if ((b->bar & 0xffffffu) > (r.bar_mask >> 8)) return true;
    if ((int)(tid >> 5) != t->warp) return false;
    return b->clocks[(size_t)t->warp].vc[t->lane][tid & 31] >= (r.clk_tid >> 10);
}

[[noreturn]] static void report_race(Thread *t, uintptr_t a, size_t n, int kind, const Rec &r, bool prev_write) {
    Block *b = t->blk;
    bool shared;
    std::string addr = describe_addr(t, a, &shared);
    char buf[1024];
    snprintf(buf, sizeof buf,
             "data race on %s memory at %s: this thread %s %zu bytes, and %s %s it earlier in this launch with no "
             "__syncthreads, warp operation covering both, or atomics ordering the two",
             shared ? "shared" : "global", addr.c_str(), kind & ACC_WRITE ? "writes" : "reads", n,
             other_thread(b, r).c_str(), prev_write ? ((r.block_atomic & 1) ? "atomically updated" : "wrote") : "read");
    access_error(t, buf);
}

static inline void check_cell(Thread *t, Block *b, Cell *c, uint32_t gen, uint32_t mask, int kind, uintptr_t a,
                              size_t n) {
    const bool atomic = kind & ACC_ATOMIC;
    const uint32_t me_block = (b->id & 0x7fffffffu) << 1 | (atomic ? 1u : 0u);
    if (c->w.gen == gen && ((c->w.bar_mask & 0xffu) & mask) && !(atomic && (c->w.block_atomic & 1)) &&
        !ordered(t, b, c->w))
        report_race(t, a, n, kind, c->w, true);
    Rec me{gen, me_block, (b->bar & 0xffffffu) << 8 | mask,
           b->clocks[(size_t)t->warp].vc[t->lane][t->lane] << 10 | (uint32_t)t->linear};
    if (kind & ACC_WRITE) {
        if (c->r.gen == gen && ((c->r.bar_mask & 0xffu) & mask) && !(atomic && (c->r.block_atomic & 1)) &&
            !ordered(t, b, c->r))
            report_race(t, a, n, kind, c->r, false);
        c->w = me;
    } else {
        c->r = me;
    }
}

static void race_check(Thread *t, Block *b, Cell *shadow, uintptr_t base, uint32_t gen, uintptr_t a, size_t n,
                       int kind) {
    if (b->clock_overflow || b->bar >= (1u << 24)) return;
    uintptr_t off = a - base, end = off + n;
    for (uintptr_t g = off & ~(uintptr_t)7; g < end; g += 8) {
        uintptr_t lo = g > off ? g : off, hi = g + 8 < end ? g + 8 : end;
        uint32_t mask = ((1u << (hi - lo)) - 1) << (lo - g);
        check_cell(t, b, &shadow[g / 8], gen, mask, kind, a, n);
    }
}

static __attribute__((noinline)) void check_access_slow(const void *p, size_t n, int kind, bool aligned) {
    Thread *t = t_cur;
    if (!t) return;
    uintptr_t a = (uintptr_t)p;
    Block *b = t->blk;
    if (a - (uintptr_t)b->smem < SMEM_REGION + 4096) {   // this block's shared memory (and the page after it)
        uintptr_t dyn = (uintptr_t)b->dyn;
        bool inside = false;
        if (a >= dyn) {
            inside = a + n <= dyn + b->grid->smem;
        } else {
            for (const SharedVar &v : b->vars)
                if (a - (uintptr_t)v.ptr < v.bytes) {
                    inside = a + n <= (uintptr_t)v.ptr + v.bytes;
                    b->var_lo = t_fast.var_lo = (uintptr_t)v.ptr;
                    b->var_hi = t_fast.var_hi = (uintptr_t)v.ptr + v.bytes;
                    break;
                }
        }
        if (!inside) {
            char buf[512];
            bool shared;
            std::string at = describe_addr(t, a, &shared);
            if (a >= dyn)
                snprintf(buf, sizeof buf,
                         "out-of-bounds shared memory access: %zu bytes at byte %zu of the dynamic shared memory, "
                         "which is the launch's %zu bytes", n, (size_t)(a - dyn), b->grid->smem);
            else
                snprintf(buf, sizeof buf,
                         "out-of-bounds shared memory access: %zu bytes at %s, outside every __shared__ variable of "
                         "the block (or running past the end of one)", n, at.c_str());
            access_error(t, buf);
        }
        if (aligned && n > 1 && a % n)
            access_error(t, "misaligned shared memory access: " + std::to_string(n) + " bytes at an address " +
                                std::to_string(a % n) + " bytes past a multiple of " + std::to_string(n));
        if (t_grid->racecheck) {
            Cell *&sh = t_region_shadow[(size_t)b->slot];
            if (!sh) sh = new_shadow(SMEM_REGION);   // region_shadow_bytes()
            race_check(t, b, sh, (uintptr_t)b->smem, b->serial, a, n, kind);
        }
    } else if (emu::in_arena(a)) {
        AllocCache *c = cached_alloc(a);
        if (!c || a + n > c->hi) {
            bool shared;
            char buf[512];
            snprintf(buf, sizeof buf, "out-of-bounds global memory access: %s %zu bytes at %s%s",
                     kind & ACC_WRITE ? "writes" : "reads", n, describe_addr(t, a, &shared).c_str(),
                     c ? ", running past its end" : ", inside no live allocation (past one's end, or freed)");
            access_error(t, buf);
        }
        if (aligned && n > 1 && a % n)
            access_error(t, "misaligned global memory access: " + std::to_string(n) + " bytes at " +
                                [&] { bool s; return describe_addr(t, a, &s); }() + ", not a multiple of " +
                                std::to_string(n) + " (a GPU faults: misaligned address)");
        if (t_grid->racecheck) race_check(t, b, arena_shadow(), emu::g_arena_lo, t_grid->gen, a, n, kind);
        else {   // the fast path's allocations: this one replaces the oldest
            bool known = false;
            for (const auto &r : t_fast.alloc) known |= r.lo == c->lo;
            if (!known) {
                auto &slot = t_fast.alloc[t_fast.alloc_next++ % 4];
                slot.lo = c->lo;
                slot.hi = c->hi;
            }
        }
    } else {
        return;   // a thread's locals, the launch's arguments, host memory the kernel engine keeps
    }
    if (--t_preempt_left <= 0 && g_settings.preempt) preempt(t);
}

// The same checks, most accesses decided inline: inside one of the last 4 allocations,
// the dynamic shared memory or the last static shared variable, aligned, and no race check
// on this launch: only the forced switch's count; inside the running thread's stack:
// nothing. Anything else (including every access outside a kernel) takes the full check.
static inline __attribute__((always_inline)) void check_access(const void *p, size_t n, int kind, bool aligned) {
    uintptr_t a = (uintptr_t)p;
    const FastRanges &f = t_fast;
    if (!f.slow && (!aligned || n == 1 || a % n == 0)) {
        if ((a >= f.alloc[0].lo && a + n <= f.alloc[0].hi) || (a >= f.alloc[1].lo && a + n <= f.alloc[1].hi) ||
            (a >= f.alloc[2].lo && a + n <= f.alloc[2].hi) || (a >= f.alloc[3].lo && a + n <= f.alloc[3].hi) ||
            (a >= f.dyn_lo && a + n <= f.dyn_hi) || (a >= f.var_lo && a + n <= f.var_hi)) {
            if (--t_preempt_left > 0) return;
        } else if (a >= f.stack_lo && a + n <= f.stack_hi) {
            return;
        }
    }
    check_access_slow(p, n, kind, aligned);
}

// ---------------------------------------------------------------- the scheduler
// Up to CUDA_EMU_BLOCKS blocks of the grid run at once, in an order drawn from the seed;
// the scheduler runs one CUDA thread at a time, picked at random (seeded) among the
// runnable threads of all of them, until it reaches a barrier, a warp operation, its end,
// or a forced switch at a memory access. A warp operation completes as soon as every lane
// of its mask is there (it synchronizes the warp, not the block); a barrier when every
// thread of the block is.

static void start_block(Grid *gr, Block *b, uint64_t id, uint64_t *key, std::vector<Thread *> &ready) {
    b->id = (uint32_t)id;
    b->serial = g_block_serial++;
    if (!b->serial) b->serial = g_block_serial++;
    b->rng = next_rand(key);
    uint3 bid = block_index(gr, id);
    b->live = b->nthreads;
    b->at_barrier = 0;
    b->bar = 0;
    b->clock_overflow = false;
    if (gr->racecheck)
        for (WarpClock &wc : b->clocks) {
            memset(wc.vc, 0, sizeof wc.vc);
            for (int l = 0; l < 32; l++) wc.vc[l][l] = 1;
        }
    for (uint32_t &a : b->arrived) a = 0;
    b->smem = region_for(b->slot);
    b->dyn = (char *)(((uintptr_t)b->smem + SMEM_REGION - gr->smem) & ~(uintptr_t)255);
    b->static_used = 0;
    b->vars.clear();
    b->var_lo = b->var_hi = 0;
    fill_pattern(b->dyn, gr->smem, b->rng);   // what earlier blocks left: a seeded pattern
    for (int i = 0; i < b->nthreads; i++) {
        Thread *t = &b->threads[(size_t)i];
        t->view.block_idx = bid;
        t->state = READY;
        t->wop = WOP_NONE;
        t->blk = b;
        t->stack = stack_for(b->slot * b->nthreads + i);
        t->sp = fiber_stack_init(t->stack, STACK_BYTES, b->slot * b->nthreads + i);
        ready.push_back(t);
    }
    b->active = true;
}

static void run_grid(Grid *gr) {
    for (size_t i = 0; i < gr->ptrs.size(); i++) {
        const void *p = gr->ptrs[i].ptr;
        if (p && !emu::device_accessible(p, 1)) {
            emu::fault(cudaErrorIllegalAddress,
                       "kernel %s (launched at %s:%d): pointer argument %zu = %p is %s memory, which a kernel cannot "
                       "reach (cudaMalloc or pinned memory only)",
                       gr->name.c_str(), gr->file.c_str(), gr->line, i + 1, p,
                       emu::find_alloc(p, nullptr) ? "unknown" : "pageable host or freed");
            return;
        }
    }
    const Settings &st = settings();
    refresh_alloc_cache();
    uint64_t nblocks = (uint64_t)gr->g.x * gr->g.y * gr->g.z;
    int nthreads = (int)(gr->b.x * gr->b.y * gr->b.z);
    uint64_t key = emu::seed() * 0x9e3779b97f4a7c15ull ^ (gr->launch_no + 1) * 0xd1b54a32d192ed03ull;
    t_preempt_rng = next_rand(&key);
    t_preempt_left = st.preempt ? 1 + (int64_t)rand_below(&t_preempt_rng, 2 * (uint64_t)st.preempt) : (1ll << 62);
    // blocks in the order i -> (a*i + c) mod n, a bijection drawn from the seed
    uint64_t a = 1, c = 0;
    if (nblocks > 1) {
        a = next_rand(&key) % nblocks;
        while (a == 0 || gcd64(a, nblocks) != 1) a = (a + 1) % nblocks;
        c = next_rand(&key) % nblocks;
    }
    // at most 2048 CUDA threads at once (each a stack and its guard page: mappings are finite)
    int slots = (int)(nblocks < (uint64_t)st.blocks_at_once ? nblocks : (uint64_t)st.blocks_at_once);
    if (slots > 1 && slots * nthreads > 2048) slots = 2048 / nthreads > 1 ? 2048 / nthreads : 1;
    std::vector<Block> blocks((size_t)slots);
    for (int s = 0; s < slots; s++) {
        Block &b = blocks[(size_t)s];
        b.grid = gr;
        b.slot = s;
        b.nthreads = nthreads;
        b.threads.resize((size_t)nthreads);
        if (gr->racecheck) b.clocks.resize((size_t)(nthreads + 31) / 32);
        b.arrived.assign((size_t)(nthreads + 31) / 32, 0);
        for (int i = 0; i < nthreads; i++) {
            Thread &t = b.threads[(size_t)i];
            t.linear = i;
            t.lane = i % 32;
            t.warp = i / 32;
            t.view.thread_idx = thread_index(gr, (unsigned)i);
            t.view.block_dim = gr->b;
            t.view.grid_dim = gr->g;
        }
    }
    t_grid = gr;
    t_fast = FastRanges();
    t_fast.slow = gr->racecheck;
    std::vector<Thread *> ready;
    ready.reserve((size_t)slots * (size_t)nthreads);
    uint64_t next_block = 0;
    int active = 0;
    uint64_t rng = next_rand(&key);
    Thread *next = nullptr;   // drawn ahead (below)
    auto fail = [&]() { emu::die("%s", t_error.c_str()); };
    bool retired = true;   // a slot may be free: start the next blocks
    for (;;) {
        for (int s = 0; retired && s < slots && next_block < nblocks; s++) {
            if (blocks[(size_t)s].active) continue;
            uint64_t id = nblocks > 1 ? (uint64_t)((unsigned __int128)(a * (unsigned __int128)next_block + c) % nblocks) : 0;
            next_block++;
            start_block(gr, &blocks[(size_t)s], id, &key, ready);
            active++;
        }
        retired = false;
        if (ready.empty() && !next) {
            if (active == 0) break;
            // nothing can run: a warp operation or barrier that some lane or thread cannot reach
            for (Block &b : blocks)
                for (int w = 0; b.active && w * 32 < b.nthreads && t_error.empty(); w++) try_complete_warp(&b, w, ready);
            if (t_error.empty())
                for (Block &b : blocks)
                    if (b.active) { describe_stuck(&b); break; }
            fail();
        }
        Thread *t = next;
        if (!t) {
            size_t j = (size_t)rand_below(&rng, ready.size());
            t = ready[j];
            ready[j] = ready.back();
            ready.pop_back();
        }
        // the one after it, drawn now: its stack and state are fetched while this one runs
        next = nullptr;
        if (!ready.empty()) {
            size_t j = (size_t)rand_below(&rng, ready.size());
            next = ready[j];
            ready[j] = ready.back();
            ready.pop_back();
            __builtin_prefetch(next);
            __builtin_prefetch(next->sp);
        }
        run_fiber(t);
        if (!t_error.empty()) fail();
        Block *b = t->blk;
        switch (t->state) {
        case READY:   // switched out at a memory access
            ready.push_back(t);
            break;
        case AT_WARP: {
            // complete it once the last lane of its mask is there (misuse shows when nothing can run)
            uint32_t &arrived = b->arrived[(size_t)t->warp];
            arrived |= 1u << t->lane;
            if ((arrived & t->wmask) == t->wmask && try_complete_warp(b, t->warp, ready) < 0) fail();
            break;
        }
        case AT_BARRIER:
            if (++b->at_barrier == b->nthreads) {
                b->at_barrier = 0;
                b->bar++;
                for (Thread &o : b->threads) {
                    o.state = READY;
                    ready.push_back(&o);
                }
            }
            break;
        case DONE:
            if (--b->live == 0) {
                b->active = false;
                active--;
                retired = true;
                emu::progress();
            }
            break;
        }
    }
    t_grid = nullptr;
    t_fast = FastRanges();
}

// ---------------------------------------------------------------- launch limits

struct KernelAttr {
    size_t max_dynamic_smem = 0;   // cudaFuncAttributeMaxDynamicSharedMemorySize
};
static std::mutex g_attr_mu;
static std::map<const void *, KernelAttr> g_attr;

size_t max_dynamic_smem(const void *kernel) {
    std::lock_guard<std::mutex> lk(g_attr_mu);
    auto it = g_attr.find(kernel);
    return it == g_attr.end() ? 0 : it->second.max_dynamic_smem;
}

static std::string mangled_name(const void *kernel) {
    Dl_info info;
    if (dladdr(kernel, &info) && info.dli_sname && info.dli_saddr == kernel) return info.dli_sname;
    return "";
}

static const EmuKernelLimits *limits_of(const std::string &mangled, int arch) {
    for (int i = 0; i < emu_kernel_limits_count; i++)
        if (emu_kernel_limits[i].arch == arch && mangled == emu_kernel_limits[i].mangled) return &emu_kernel_limits[i];
    return nullptr;
}

// The synchronous launch errors, as the hardware and the build's resource usage decide.
static cudaError_t check_config(const void *kernel, const char *name, const char *file, int line, dim3 g, dim3 b,
                                size_t smem) {
    const int arch = emu::arch();   // the device; its resource usage is that of the machine code that runs there
    auto bad = [&](cudaError_t e, const std::string &why) {
        emu::say("launch of %s at %s:%d: %s (%s)", name, file, line, why.c_str(), cudaGetErrorName(e));
        return e;
    };
    char buf[256];
    if (b.x == 0 || b.y == 0 || b.z == 0 || g.x == 0 || g.y == 0 || g.z == 0) {
        snprintf(buf, sizeof buf, "grid (%u,%u,%u) or block (%u,%u,%u) has a zero dimension", g.x, g.y, g.z, b.x, b.y, b.z);
        return bad(cudaErrorInvalidConfiguration, buf);
    }
    unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    if (b.x > 1024 || b.y > 1024 || b.z > 64 || threads > 1024) {
        snprintf(buf, sizeof buf, "block (%u,%u,%u) = %llu threads: at most 1024, dimensions at most (1024,1024,64)", b.x,
                 b.y, b.z, threads);
        return bad(cudaErrorInvalidConfiguration, buf);
    }
    if (g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535) {
        snprintf(buf, sizeof buf, "grid (%u,%u,%u): at most (2^31-1, 65535, 65535)", g.x, g.y, g.z);
        return bad(cudaErrorInvalidConfiguration, buf);
    }
    std::string mangled = mangled_name(kernel);
    const EmuKernelLimits *lim = mangled.empty() ? nullptr : limits_of(mangled, emu::sass_arch());
    if (!lim) {
        snprintf(buf, sizeof buf,
                 "no resource usage for this kernel%s%s in the build's table (launch_limits.cpp): the emulator "
                 "launches only kernels the real build compiled",
                 mangled.empty() ? "" : " ", mangled.c_str());
        return bad(cudaErrorInvalidDeviceFunction, buf);
    }
    if (lim->max_threads && threads > (unsigned long long)lim->max_threads) {
        snprintf(buf, sizeof buf, "%llu threads per block, past its __launch_bounds__(%d)", threads, lim->max_threads);
        return bad(cudaErrorLaunchOutOfResources, buf);
    }
    size_t optin = emu::smem_optin();
    size_t allowed = smem > 48 * 1024 ? max_dynamic_smem(kernel) : 48 * 1024;
    if (smem > 48 * 1024 && allowed < smem) {
        snprintf(buf, sizeof buf,
                 "%zu bytes of dynamic shared memory need cudaFuncSetAttribute(MaxDynamicSharedMemorySize) >= that first "
                 "(set: %zu)", smem, allowed);
        return bad(cudaErrorInvalidValue, buf);
    }
    if ((size_t)lim->static_smem + smem > (smem > 48 * 1024 ? optin : 48 * 1024)) {
        snprintf(buf, sizeof buf, "%d bytes of static and %zu of dynamic shared memory exceed the %zu bytes of sm_%d",
                 lim->static_smem, smem, smem > 48 * 1024 ? optin : (size_t)48 * 1024, arch);
        return bad(cudaErrorInvalidValue, buf);
    }
    // registers: allocated per warp in units of 256, 64K per block. Every architecture the
    // real build compiles for: a configuration that one of them refuses is refused here.
    for (int a : {80, 90}) {
        const EmuKernelLimits *la = limits_of(mangled, a);
        if (!la) continue;
        unsigned long long warps = (threads + 31) / 32;
        unsigned long long per_warp = ((unsigned long long)la->regs * 32 + 255) / 256 * 256;
        if (warps * per_warp > 65536) {
            snprintf(buf, sizeof buf, "%llu threads x %d registers (sm_%d build) need %llu registers, a block has 65536",
                     threads, la->regs, a, warps * per_warp);
            return bad(cudaErrorLaunchOutOfResources, buf);
        }
    }
    return cudaSuccess;
}

// ---------------------------------------------------------------- the launch

static std::atomic<uint64_t> g_launches{0};

// The race check costs most of the emulated time: by default it watches the first launch
// of each kernel with each block shape and each grid shape (which of its x, y and z are
// more than 1), whose threads' accesses follow the same indices as in the later ones; a
// launch of one block, which no other block can race, does not stand for one of several
// (the grid's sizes themselves would multiply the launches checked). CUDA_EMU_RACECHECK=2
// watches every launch.
static bool race_this_launch(const void *kernel, dim3 g, dim3 b) {
    const Settings &st = settings();
    if (st.racecheck != 1) return st.racecheck >= 2;
    static std::mutex mu;
    static std::map<std::tuple<const void *, unsigned, unsigned, unsigned, unsigned>, int> seen;
    std::lock_guard<std::mutex> lk(mu);
    const unsigned grid_shape = (g.x > 1) | (g.y > 1) << 1 | (g.z > 1) << 2;
    return seen[std::make_tuple(kernel, b.x, b.y, b.z, grid_shape)]++ == 0;
}

void launch(const void *kernel, const char *name, const char *file, int line, dim3 grid, dim3 block, size_t smem,
            cudaStream_t stream, const emu::LaunchArg *ptrs, int nptrs, std::function<void()> body) {
    emu::init();
    cudaError_t e = check_config(kernel, name, file, line, grid, block, smem);
    if (e != cudaSuccess) {
        emu::record_error(e);
        return;
    }
    emu::load_kernel(kernel, name, true);   // its first launch: lazy loading (emu.h)
    auto gr = std::make_shared<Grid>();
    gr->name = name;
    gr->file = file;
    gr->line = line;
    gr->g = grid;
    gr->b = block;
    gr->smem = smem;
    gr->ptrs.assign(ptrs, ptrs + nptrs);
    gr->body = std::move(body);
    gr->kernel = kernel;
    gr->racecheck = race_this_launch(kernel, grid, block);
    gr->launch_no = g_launches++;
    gr->gen = (uint32_t)(gr->launch_no % 0xffffffffu) + 1;
    std::string what = std::string("kernel ") + name;
    e = emu::enqueue(stream, what.c_str(), [gr] { run_grid(gr.get()); });
    if (e != cudaSuccess) emu::record_error(e);
}

}  // namespace emu_dev

extern "C" cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr, int value) {
    emu::init();
    if (emu::in_host_function()) return emu::record_error(cudaErrorNotPermitted);
    if (!func) return emu::record_error(cudaErrorInvalidDeviceFunction);
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        size_t optin = emu::smem_optin();
        if (value < 0 || (size_t)value > optin) {
            emu::say("cudaFuncSetAttribute(MaxDynamicSharedMemorySize, %d): at most %zu on sm_%d", value, optin, emu::arch());
            return emu::record_error(cudaErrorInvalidValue);
        }
        std::lock_guard<std::mutex> lk(emu_dev::g_attr_mu);
        emu_dev::g_attr[func].max_dynamic_smem = (size_t)value;
        return cudaSuccess;
    }
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
    return emu::record_error(cudaErrorInvalidValue);
}

// From the build's table (this architecture's entry).
extern "C" cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *attr, const void *func) {
    emu::init();
    if (emu::in_host_function()) return emu::record_error(cudaErrorNotPermitted);
    if (!attr || !func) return emu::record_error(cudaErrorInvalidValue);
    std::string mangled = emu_dev::mangled_name(func);
    const EmuKernelLimits *lim = mangled.empty() ? nullptr : emu_dev::limits_of(mangled, emu::sass_arch());
    if (!lim) {
        emu::say("cudaFuncGetAttributes: %p is no kernel of the build's table", func);
        return emu::record_error(cudaErrorInvalidDeviceFunction);
    }
    emu::load_kernel(func, mangled.c_str(), false);   // the guide's preload: later launches need no load
    memset(attr, 0, sizeof *attr);
    attr->numRegs = lim->regs;
    attr->sharedSizeBytes = (size_t)lim->static_smem;
    int per_warp = (lim->regs * 32 + 255) / 256 * 256;
    int warps = per_warp ? 65536 / per_warp : 32;
    attr->maxThreadsPerBlock = warps * 32 < 1024 ? warps * 32 : 1024;
    attr->maxDynamicSharedSizeBytes = (int)emu_dev::max_dynamic_smem(func);
    if (!attr->maxDynamicSharedSizeBytes) attr->maxDynamicSharedSizeBytes = 48 * 1024 - lim->static_smem;
    attr->ptxVersion = attr->binaryVersion = emu::sass_arch();
    return cudaSuccess;
}

// ---------------------------------------------------------------- the instrumentation's entry points
// What gcc's -fsanitize=thread calls (its documented ABI, libsanitizer/tsan/tsan_interface.h):
// each plain access of N bytes, and each atomic operation, which these perform themselves.
// There is no ThreadSanitizer runtime in the emulated programs: these are the whole of it.

using emu_dev::check_access;
using emu_dev::ACC_READ;
using emu_dev::ACC_WRITE;
using emu_dev::ACC_ATOMIC;

extern "C" {
void __tsan_init() {}
void __tsan_func_entry(void *) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void **, void *) {}
void __tsan_vptr_read(void **) {}
void __tsan_read_range(void *p, unsigned long n) { check_access(p, n, ACC_READ, false); }
void __tsan_write_range(void *p, unsigned long n) { check_access(p, n, ACC_WRITE, false); }
#define EMU_TSAN_RW(N)                                                                                  \
    void __tsan_read##N(void *p) { check_access(p, N, ACC_READ, true); }                               \
    void __tsan_write##N(void *p) { check_access(p, N, ACC_WRITE, true); }                             \
    void __tsan_unaligned_read##N(void *p) { check_access(p, N, ACC_READ, false); }                    \
    void __tsan_unaligned_write##N(void *p) { check_access(p, N, ACC_WRITE, false); }                  \
    void __tsan_volatile_read##N(void *p) { check_access(p, N, ACC_READ, true); }                      \
    void __tsan_volatile_write##N(void *p) { check_access(p, N, ACC_WRITE, true); }
EMU_TSAN_RW(1)
EMU_TSAN_RW(2)
EMU_TSAN_RW(4)
EMU_TSAN_RW(8)
EMU_TSAN_RW(16)
#undef EMU_TSAN_RW

void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

#define EMU_TSAN_ATOMIC(N, T)                                                                              \
    T __tsan_atomic##N##_load(const volatile T *a, int) {                                                  \
        check_access((const void *)a, sizeof(T), ACC_READ | ACC_ATOMIC, true);                             \
        return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                       \
    }                                                                                                      \
    void __tsan_atomic##N##_store(volatile T *a, T v, int) {                                               \
        check_access((const void *)a, sizeof(T), ACC_WRITE | ACC_ATOMIC, true);                            \
        __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                          \
    }                                                                                                      \
    T __tsan_atomic##N##_exchange(volatile T *a, T v, int) {                                               \
        check_access((const void *)a, sizeof(T), ACC_WRITE | ACC_ATOMIC, true);                            \
        return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                                \
    }                                                                                                      \
    T __tsan_atomic##N##_fetch_add(volatile T *a, T v, int) {                                              \
        check_access((const void *)a, sizeof(T), ACC_WRITE | ACC_ATOMIC, true);                            \
        return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);                                                 \
    }                                                                                                      \
    T __tsan_atomic##N##_fetch_sub(volatile T *a, T v, int) {                                              \
        check_access((const void *)a, sizeof(T), ACC_WRITE | ACC_ATOMIC, true);                            \
        return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST);                                                 \
    }                                                                                                      \
    T __tsan_atomic##N##_fetch_and(volatile T *a, T v, int) {                                              \
        check_access((const void *)a, sizeof(T), ACC_WRITE | ACC_ATOMIC, true);                            \
        return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST);                                                 \
    }                                                                                                      \
    T __tsan_atomic##N##_fetch_or(volatile T *a, T v, int) {                                               \
        check_access((const void *)a, sizeof(T), ACC_WRITE | ACC_ATOMIC, true);                            \
        return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST);                                                  \
    }                                                                                                      \
    T __tsan_atomic##N##_fetch_xor(volatile T *a, T v, int) {                                              \
        check_access((const void *)a, sizeof(T), ACC_WRITE | ACC_ATOMIC, true);                            \
        return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST);                                                 \
    }                                                                                                      \
    T __tsan_atomic##N##_fetch_nand(volatile T *a, T v, int) {                                             \
        check_access((const void *)a, sizeof(T), ACC_WRITE | ACC_ATOMIC, true);                            \
        return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST);                                                \
    }                                                                                                      \
    int __tsan_atomic##N##_compare_exchange_strong(volatile T *a, T *c, T v, int, int) {                  \
        check_access((const void *)a, sizeof(T), ACC_WRITE | ACC_ATOMIC, true);                            \
        return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);            \
    }                                                                                                      \
    int __tsan_atomic##N##_compare_exchange_weak(volatile T *a, T *c, T v, int, int) {                    \
        check_access((const void *)a, sizeof(T), ACC_WRITE | ACC_ATOMIC, true);                            \
        return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);             \
    }                                                                                                      \
    T __tsan_atomic##N##_compare_exchange_val(volatile T *a, T c, T v, int, int) {                        \
        check_access((const void *)a, sizeof(T), ACC_WRITE | ACC_ATOMIC, true);                            \
        __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                  \
        return c;                                                                                          \
    }
EMU_TSAN_ATOMIC(8, uint8_t)
EMU_TSAN_ATOMIC(16, uint16_t)
EMU_TSAN_ATOMIC(32, uint32_t)
EMU_TSAN_ATOMIC(64, uint64_t)
#undef EMU_TSAN_ATOMIC
}
