// kernels.cpp: the kernel engine. A launch is checked against the hardware's limits and
// the real build's resource usage (launch_limits.cpp, generated from ptxas), then queued on
// its stream. There every block runs in an order drawn from CUDA_EMU_SEED; inside a block
// every CUDA thread is a fiber (a stack of its own and a register switch), and the scheduler switches between them only at
// __syncthreads, __syncwarp, shuffles and votes, picking the next runnable thread at
// random (seeded). So the interleaving between two barriers, and the order of blocks,
// change with the seed: code that needs a barrier it lacks, or depends on block order,
// changes bits between seeds. A barrier not reached by every live thread, a warp
// operation not reached by every lane of its mask, and a lane outside its own mask are
// errors, named with the kernel, block and thread.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
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

static const size_t STACK_BYTES =
#ifdef EMU_ASAN
    512 * 1024;
#else
    128 * 1024;
#endif

// ---------------------------------------------------------------- context switch
// A fiber switch saves the callee-saved registers, the SSE and x87 control words and the
// stack pointer, and loads another's: no system call (glibc's swapcontext makes one per
// switch to save the signal mask, which a CUDA thread does not have).
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
    "    subq $8, %rsp\n"
    "    stmxcsr (%rsp)\n"
    "    fnstcw 4(%rsp)\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    ldmxcsr (%rsp)\n"
    "    fldcw 4(%rsp)\n"
    "    addq $8, %rsp\n"
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

// A fresh fiber's stack: what emu_ctx_switch pops (control words, six registers) and a
// return into emu_fiber_start, so that emu_fiber_main starts with the ABI's alignment.
static void *fiber_stack_init(char *stack, size_t bytes) {
    uintptr_t top = ((uintptr_t)stack + bytes) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)(top - 80);
    uint32_t csr;
    uint16_t cw;
    __asm__ volatile("stmxcsr %0" : "=m"(csr));
    __asm__ volatile("fnstcw %0" : "=m"(cw));
    memset(sp, 0, 64);
    memcpy(sp, &csr, 4);
    memcpy((char *)sp + 4, &cw, 2);
    sp[7] = (uint64_t)(uintptr_t)emu_fiber_start;
    return sp;
}

enum State { READY, AT_BARRIER, AT_WARP, DONE };
enum WarpOp { WOP_NONE, WOP_SYNC, WOP_SHFL, WOP_VOTE };

struct Block;
struct Thread {
    ThreadView view;
    int linear = 0, lane = 0, warp = 0;
    State state = READY;
    void *sp = nullptr;            // saved stack pointer while switched out
    char *stack = nullptr;
    // a warp operation in progress
    WarpOp wop = WOP_NONE;
    unsigned wmask = 0;
    int wkind = 0, warg = 0, wwidth = 32;
    uint64_t wvalue = 0, wresult = 0;
    Block *blk = nullptr;
#ifdef EMU_ASAN
    void *fake_stack = nullptr;
#endif
};

struct Block {
    const char *kernel = "";
    const void *sched_bottom = nullptr;   // ASan: the scheduler's stack
    size_t sched_size = 0;
    const char *file = "";
    int line = 0;
    std::function<void()> *body = nullptr;
    std::vector<Thread> threads;
    int nthreads = 0;
    void *sched_sp = nullptr;      // the scheduler's saved stack pointer
    uint64_t rng = 0;
    Thread *running = nullptr;
    int barriers_done = 0;
    std::string error;   // set by a fiber that found misuse; the scheduler reports it
};

// Per host thread: the fiber stacks, reused from block to block and launch to launch.
static thread_local std::vector<char *> t_stacks;
static thread_local Block *t_block = nullptr;

static char *stack_for(int i) {
    while ((int)t_stacks.size() <= i) {
        // a guard page below each stack: an overflow faults instead of corrupting a neighbour
        char *p = (char *)mmap(nullptr, STACK_BYTES + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                               -1, 0);
        if (p == MAP_FAILED) emu::die("out of memory for fiber stacks (%zu bytes each)", STACK_BYTES);
        mprotect(p, 4096, PROT_NONE);
        t_stacks.push_back(p + 4096);
    }
    return t_stacks[(size_t)i];
}

static uint64_t next_rand(uint64_t *s) {
    uint64_t x = (*s += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static std::string where(const Block *b, const Thread *t) {
    char buf[384];
    snprintf(buf, sizeof buf, "kernel %s (launched at %s:%d), block (%u,%u,%u), thread (%u,%u,%u)", b->kernel, b->file,
             b->line, t->view.block_idx.x, t->view.block_idx.y, t->view.block_idx.z, t->view.thread_idx.x,
             t->view.thread_idx.y, t->view.thread_idx.z);
    return buf;
}

// ---------------------------------------------------------------- fiber switching

static void switch_to_scheduler(Thread *t) {
    Block *b = t->blk;
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(t->state == DONE ? nullptr : &t->fake_stack, b->sched_bottom, b->sched_size);
#endif
    emu_ctx_switch(&t->sp, b->sched_sp);
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(t->fake_stack, &b->sched_bottom, &b->sched_size);
#endif
    t_view = &t->view;
}

extern "C" void emu_fiber_main() {
    Block *b = t_block;
    Thread *t = b->running;
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &b->sched_bottom, &b->sched_size);
#endif
    t_view = &t->view;
    (*b->body)();
    t->state = DONE;
    switch_to_scheduler(t);
    emu::die("a finished CUDA thread was resumed");
}

static void run_fiber(Block *b, Thread *t) {
    b->running = t;
    t_view = &t->view;
#ifdef EMU_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, t->stack, STACK_BYTES);
#endif
    emu_ctx_switch(&b->sched_sp, t->sp);
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
    t_view = nullptr;
}

// The running thread stops here until the scheduler resumes it; misuse found by the
// scheduler meanwhile ends the program there.
static void yield(Thread *t) { switch_to_scheduler(t); }

static Thread *current() {
    Block *b = t_block;
    if (!b || !b->running) emu::die("__syncthreads or a warp operation outside a kernel");
    return b->running;
}

// ---------------------------------------------------------------- barriers and warp operations

void barrier() {
    Thread *t = current();
    t->state = AT_BARRIER;
    yield(t);
}

static uint64_t warp_op(WarpOp op, unsigned mask, int kind, int arg, int width, uint64_t value) {
    Thread *t = current();
    if (!(mask >> t->lane & 1u)) {
        t->blk->error = where(t->blk, t) + ": lane " + std::to_string(t->lane) + " calls a warp operation with mask 0x" +
                        ([&] { char h[16]; snprintf(h, sizeof h, "%08x", mask); return std::string(h); })() +
                        " that does not include it (undefined behaviour)";
        emu::die("%s", t->blk->error.c_str());
    }
    if (width <= 0 || width > 32 || (width & (width - 1)))
        emu::die("%s: warp operation with width %d (a power of two up to 32)", where(t->blk, t).c_str(), width);
    t->wop = op;
    t->wmask = mask;
    t->wkind = kind;
    t->warg = arg;
    t->wwidth = width;
    t->wvalue = value;
    t->state = AT_WARP;
    yield(t);
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

// The lanes of warp w waiting at a warp operation whose whole mask is waiting at the same
// one: their results, and READY again. Returns 1 if it released any.
static int try_complete_warp(Block *b, int w) {
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
                b->error = where(b, t) + ": warp operation mask names lane " + std::to_string(m) +
                           ", which this block does not have";
                return -1;
            }
            if (o->state == DONE || o->state == AT_BARRIER) {
                b->error = where(b, t) + ": a warp operation (mask 0x" +
                           ([&] { char h[16]; snprintf(h, sizeof h, "%08x", mask); return std::string(h); })() +
                           ") whose lane " + std::to_string(m) + (o->state == DONE ? " has exited" : " waits at __syncthreads") +
                           ": every lane of the mask must reach the same operation";
                return -1;
            }
            if (o->state != AT_WARP) { all = false; break; }
            if (o->wop != t->wop || o->wmask != mask || o->wkind != t->wkind) {
                b->error = where(b, t) + ": lanes of one mask at different warp operations (lane " + std::to_string(l) +
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
                    b->error = where(b, o) + ": shuffle reads lane " + std::to_string(src) +
                               ", which is not in the mask (its value is undefined)";
                    return -1;
                }
                r = vals[src];
            } else if (o->wop == WOP_VOTE) {
                unsigned inmask = ballot;
                switch ((VoteKind)o->wkind) {
                case VOTE_BALLOT: r = inmask; break;
                case VOTE_ANY: r = inmask != 0; break;
                case VOTE_ALL: r = inmask == mask; break;
                }
            }
            o->wresult = r;
            o->state = READY;
            released = 1;
        }
    }
    return released;
}

// Nothing is runnable: release a complete barrier or warp operation, or report why not.
static int unblock(Block *b) {
    int live = 0, at_barrier = 0, at_warp = 0;
    for (int i = 0; i < b->nthreads; i++) {
        State s = b->threads[(size_t)i].state;
        if (s != DONE) live++;
        if (s == AT_BARRIER) at_barrier++;
        if (s == AT_WARP) at_warp++;
    }
    if (live == 0) return 0;
    int released = 0;
    for (int w = 0; w * 32 < b->nthreads; w++) {
        int r = try_complete_warp(b, w);
        if (r < 0) return -1;
        released |= r;
    }
    if (released) return 1;
    // CUDA: "__syncthreads() is allowed in conditional code but only if the conditional
    // evaluates identically across the entire thread block": a thread that exited never
    // arrives, so the barrier completes only when every thread of the block is there.
    if (at_barrier == b->nthreads) {
        for (int i = 0; i < b->nthreads; i++)
            if (b->threads[(size_t)i].state == AT_BARRIER) b->threads[(size_t)i].state = READY;
        b->barriers_done++;
        return 1;
    }
    // stuck: describe it
    const Thread *first_barrier = nullptr, *first_other = nullptr;
    for (int i = 0; i < b->nthreads; i++) {
        const Thread *t = &b->threads[(size_t)i];
        if (t->state == AT_BARRIER && !first_barrier) first_barrier = t;
        if (t->state != AT_BARRIER && !first_other) first_other = t;
    }
    char msg[512];
    if (at_barrier > 0)
        snprintf(msg, sizeof msg,
                 ": __syncthreads reached by %d of the block's %d threads (%d exited, %d wait at a warp operation; "
                 "first missing: thread %u); a barrier must be reached by every thread of the block",
                 at_barrier, b->nthreads, b->nthreads - live, at_warp, first_other ? first_other->view.thread_idx.x : 0u);
    else
        snprintf(msg, sizeof msg, ": %d threads wait at warp operations that can never complete", at_warp);
    b->error = where(b, first_barrier ? first_barrier : first_other) + msg;
    return -1;
}

static void run_block(Block *b) {
    for (int i = 0; i < b->nthreads; i++) {
        Thread *t = &b->threads[(size_t)i];
        t->state = READY;
        t->wop = WOP_NONE;
        t->blk = b;
        t->stack = stack_for(i);
        t->sp = fiber_stack_init(t->stack, STACK_BYTES);
    }
    t_block = b;
    std::vector<int> ready;
    ready.reserve((size_t)b->nthreads);
    for (;;) {
        ready.clear();
        for (int i = 0; i < b->nthreads; i++)
            if (b->threads[(size_t)i].state == READY) ready.push_back(i);
        if (ready.empty()) {
            int r = unblock(b);
            if (r == 0) break;   // every thread done
            if (r < 0) emu::die("%s", b->error.c_str());
            continue;
        }
        // run the ready threads in a random order, each until it blocks or ends
        for (size_t k = ready.size(); k > 1; k--) {
            size_t j = next_rand(&b->rng) % k;
            std::swap(ready[k - 1], ready[j]);
        }
        for (int i : ready) {
            Thread *t = &b->threads[(size_t)i];
            if (t->state != READY) continue;
            run_fiber(b, t);
            if (!b->error.empty()) emu::die("%s", b->error.c_str());
        }
    }
    t_block = nullptr;
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
    const int arch = emu::arch();
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
    const EmuKernelLimits *lim = mangled.empty() ? nullptr : limits_of(mangled, arch);
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
    size_t optin = arch == 90 ? 227 * 1024 : 163 * 1024;
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

struct Grid {
    std::string name, file;
    int line;
    dim3 g, b;
    size_t smem;
    std::vector<emu::LaunchArg> ptrs;
    std::function<void()> body;
    uint64_t launch_no;
};

static std::atomic<uint64_t> g_launches{0};

static uint64_t gcd64(uint64_t a, uint64_t b) {
    while (b) { uint64_t t = a % b; a = b; b = t; }
    return a;
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
    uint64_t nblocks = (uint64_t)gr->g.x * gr->g.y * gr->g.z;
    int nthreads = (int)(gr->b.x * gr->b.y * gr->b.z);
    uint64_t key = emu::seed() * 0x9e3779b97f4a7c15ull ^ (gr->launch_no + 1) * 0xd1b54a32d192ed03ull;
    // blocks in the order i -> (a*i + c) mod n, a bijection drawn from the seed
    uint64_t a = 1, c = 0;
    if (nblocks > 1) {
        a = next_rand(&key) % nblocks;
        while (a == 0 || gcd64(a, nblocks) != 1) a = (a + 1) % nblocks;
        c = next_rand(&key) % nblocks;
    }
    Block b;
    b.kernel = gr->name.c_str();
    b.file = gr->file.c_str();
    b.line = gr->line;
    b.body = &gr->body;
    b.nthreads = nthreads;
    b.threads.resize((size_t)nthreads);
    for (int i = 0; i < nthreads; i++) {
        Thread &t = b.threads[(size_t)i];
        t.linear = i;
        t.lane = i % 32;
        t.warp = i / 32;
        t.view.thread_idx = make_uint3((unsigned)i % gr->b.x, (unsigned)i / gr->b.x % gr->b.y,
                                       (unsigned)i / (gr->b.x * gr->b.y));
        t.view.block_dim = gr->b;
        t.view.grid_dim = gr->g;
    }
    for (uint64_t k = 0; k < nblocks; k++) {
        uint64_t id = nblocks > 1 ? (unsigned __int128)(a * (unsigned __int128)k + c) % nblocks : 0;
        uint3 bid = make_uint3((unsigned)(id % gr->g.x), (unsigned)(id / gr->g.x % gr->g.y),
                               (unsigned)(id / ((uint64_t)gr->g.x * gr->g.y)));
        for (int i = 0; i < nthreads; i++) b.threads[(size_t)i].view.block_idx = bid;
        b.rng = next_rand(&key);
        // dynamic shared memory holds what the previous block left: a fresh seeded pattern
        for (int r = 0; r < emu_dynamic_smem_count; r++) {
            unsigned char *p = (unsigned char *)emu_dynamic_smem[r].storage();
            size_t n = gr->smem < emu_dynamic_smem[r].bytes ? gr->smem : emu_dynamic_smem[r].bytes;
            uint64_t s = b.rng;
            for (size_t j = 0; j < n; j++) p[j] = (unsigned char)next_rand(&s);
        }
        run_block(&b);
        emu::progress();
    }
}

void launch(const void *kernel, const char *name, const char *file, int line, dim3 grid, dim3 block, size_t smem,
            cudaStream_t stream, const emu::LaunchArg *ptrs, int nptrs, std::function<void()> body) {
    emu::init();
    cudaError_t e = check_config(kernel, name, file, line, grid, block, smem);
    if (e != cudaSuccess) {
        emu::record_error(e);
        return;
    }
    auto gr = std::make_shared<Grid>();
    gr->name = name;
    gr->file = file;
    gr->line = line;
    gr->g = grid;
    gr->b = block;
    gr->smem = smem;
    gr->ptrs.assign(ptrs, ptrs + nptrs);
    gr->body = std::move(body);
    gr->launch_no = g_launches++;
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
        size_t optin = emu::arch() == 90 ? 227 * 1024 : 163 * 1024;
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
    const EmuKernelLimits *lim = mangled.empty() ? nullptr : emu_dev::limits_of(mangled, emu::arch());
    if (!lim) {
        emu::say("cudaFuncGetAttributes: %p is no kernel of the build's table", func);
        return emu::record_error(cudaErrorInvalidDeviceFunction);
    }
    memset(attr, 0, sizeof *attr);
    attr->numRegs = lim->regs;
    attr->sharedSizeBytes = (size_t)lim->static_smem;
    int per_warp = (lim->regs * 32 + 255) / 256 * 256;
    int warps = per_warp ? 65536 / per_warp : 32;
    attr->maxThreadsPerBlock = warps * 32 < 1024 ? warps * 32 : 1024;
    attr->maxDynamicSharedSizeBytes = (int)emu_dev::max_dynamic_smem(func);
    if (!attr->maxDynamicSharedSizeBytes) attr->maxDynamicSharedSizeBytes = 48 * 1024 - lim->static_smem;
    attr->ptxVersion = attr->binaryVersion = emu::arch();
    return cudaSuccess;
}
