// emu.h: what the emulated libraries (cuBLASLt, cuDNN, NCCL) and the kernel engine ask of
// the emulated CUDA runtime (runtime.cpp). Not included by the project's sources: those see
// only NVIDIA's headers and cuda_emu.h's device built-ins.
//
// The runtime's model, from the CUDA Runtime API documentation:
//  - memory: cudaMalloc gives device memory, cudaMallocHost / cudaHostAlloc pinned host
//    memory (mapped: with unified addressing a kernel may read it at the same address),
//    anything else is pageable host memory, which a kernel may not touch. Every allocation
//    is in a registry, so a pointer of the wrong kind is an error, as on a GPU.
//  - streams run on worker threads, in order; the legacy default stream (0) synchronizes
//    with every blocking stream; events capture a stream's work at record time, and a wait
//    (cudaStreamWaitEvent, cudaEventSynchronize, cudaEventQuery) sees the latest record at
//    the time of the call.
//  - host functions (cudaLaunchHostFunc) run one at a time on one callback thread, and a
//    CUDA call from there fails with cudaErrorNotPermitted.
//  - an asynchronous fault (an illegal address) is sticky: every later call returns it.
//  - lazy loading (CUDA_MODULE_LOADING=LAZY, CUDA's default): a kernel's first launch loads
//    it, which "might require context synchronization" (Programming Guide, Lazy Loading,
//    Potential Hazards). With CUDA_EMU_LOAD_SYNC=1 it always does: the launch waits until
//    the work queued on every stream has finished, which orders nothing (no happens-before),
//    so a kernel that spins until later work runs deadlocks here as it may on a GPU.
//    cudaFuncGetAttributes loads a kernel (the guide's preload); CUDA_MODULE_LOADING=EAGER
//    loads all at start. The libraries' calls load their kernels the same way: cuBLASLt's
//    per kind of matmul (epilogue, types, transposes), cuDNN's per operation graph. Off by default: the wait would put every first launch after all
//    queued work and so hide a missing stream wait there, the commoner bug.
#ifndef CUDA_EMU_EMU_H
#define CUDA_EMU_EMU_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include <functional>
#include <string>

namespace emu {

// SIGSEGV and SIGBUS name the kernel, block and thread they hit (kernels.cpp), unless the
// program or a sanitizer handles them.
void install_fault_report();

enum MemKind { MEM_PAGEABLE = 0, MEM_DEVICE = 1, MEM_PINNED = 2 };
const char *mem_kind_name(MemKind k);   // "pageable host", "device", "pinned host"

// The allocation holding p (its base, size and kind); false when no cudaMalloc/cudaMallocHost/
// cudaHostAlloc allocation that is still live holds it (pageable memory, or freed memory).
struct Alloc {
    char *base;
    size_t bytes;
    MemKind kind;
    uint64_t id;
};
bool find_alloc(const void *p, Alloc *out);
// Device memory and pinned memory from cudaMallocHost/cudaHostAlloc lie in one reserved
// address range, the arena (not in the ASan build, whose heap checks need malloc's): each
// allocation starts on a page of its own and the pages after its end stay unmapped, so an
// access past its end faults, and a kernel's access (which the kernel engine sees) is
// checked against the allocation it falls in to the byte.
extern uintptr_t g_arena_lo, g_arena_hi;   // [lo, hi); both 0 without an arena
inline bool in_arena(uintptr_t a) { return a - g_arena_lo < g_arena_hi - g_arena_lo; }
// The live allocation (any kind, cudaHostRegister ranges too) holding address a: its range
// and a number no other allocation of this process has. False if none.
struct LiveAlloc {
    uintptr_t lo, hi;
    uint64_t id;
};
bool alloc_at(uintptr_t a, LiveAlloc *out);
uint64_t free_count();   // allocations freed so far: caches of alloc_at are stale when it moves

// MEM_PAGEABLE for memory the registry does not hold.
MemKind mem_kind(const void *p);
// Whether a kernel (or a library's device work) may touch [p, p + bytes): inside one live
// device or pinned allocation.
bool device_accessible(const void *p, size_t bytes);
// The same as a check: on failure prints "cuda_emu: <what>: ..." naming the pointer, its
// kind and the allocation it overruns, and returns false.
bool check_device_range(const void *p, size_t bytes, const char *what);

// Runs work on stream s in stream order (after everything queued on s before, and, for the
// legacy default stream and the blocking streams, after what the rules above demand). what
// names the work in diagnostics. Returns the error the call itself reports: the sticky
// error, cudaErrorInvalidResourceHandle for a destroyed stream, cudaErrorNotPermitted from
// a host function. work runs on the stream's worker thread.
cudaError_t enqueue(cudaStream_t s, const char *what, std::function<void()> work);
// The same for work whose effect may be awaited outside CUDA's ordering (a collective other
// processes wait for): on the legacy stream it is not held, nor what was queued there before.
cudaError_t enqueue_observed(cudaStream_t s, const char *what, std::function<void()> work);

// The order of stream work (happens-before: stream order, event records and waits, the
// legacy stream's implicit waits, and the synchronizations the issuing host thread had
// made when it queued the work). An op is named by its stream and its place there.
struct OpStamp {
    int stream;        // -1: none
    uint64_t epoch;    // 1 for the stream's first op
};
OpStamp running_op();                               // on a stream's worker: the work it runs now
bool ordered_before_running(const OpStamp &earlier);   // on a worker: earlier is ordered before it

// From inside stream work: an asynchronous fault. Prints the message, makes err the sticky
// error (every later runtime call returns it) and lets the stream go on (its later work is
// skipped).
void fault(cudaError_t err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Sets the calling host thread's last error (cudaGetLastError) and returns e.
cudaError_t record_error(cudaError_t e);

// 1 on the host-function thread: a CUDA, cuBLAS, cuDNN or NCCL call there is an error.
bool in_host_function();

// The runtime's first call: reads CUDA_EMU_* (seed, jitter, memory size, architecture)
// and prints what it emulates. Every entry point calls it; idempotent.
void init();
uint64_t seed();          // CUDA_EMU_SEED (default 0)
// An unsigned setting from the environment (def when unset); dies naming a bad value.
uint64_t env_u64(const char *name, uint64_t def);
int arch();               // 80, 86, 89 or 90 (CUDA_EMU_ARCH=sm_80|sm_86|sm_89|sm_90, default sm_90)
int sass_arch();          // the build's machine code that runs there: sm_80's on 8.x, sm_90's on 9.0
size_t smem_optin();      // dynamic shared memory a block may opt in to on arch()

// Diagnostics: "cuda_emu: " + message on stderr, one write.
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// A pointer-typed kernel argument, checked when the grid runs (device or pinned memory, or null).
struct LaunchArg {
    const void *ptr;
    const char *type;
};

// Any progress (the hang detector resets its clock): the kernel engine calls it per block.
void progress();

// The kernel engine's launch and cudaFuncGetAttributes: loads kernel on its first use
// (lazy loading, above). With CUDA_EMU_LOAD_SYNC=1 (and not EAGER), a first use at a launch
// (launching true) waits for the queued work to finish; the hang detector names the kernel
// when that wait never ends.
void load_kernel(const void *kernel, const char *name, bool launching);
// A library call's kernels (cuBLASLt's for one kind of matmul, cuDNN's for one operation
// graph), named by what: loaded at their first call as a kernel at its first launch. The
// libraries are built for lazy loading too (the Programming Guide: lazy loading pays "as is
// common when using libraries").
void load_library_kernels(const std::string &what);

}  // namespace emu

#endif
