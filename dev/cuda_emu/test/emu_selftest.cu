// emu_selftest.cu: the emulated device against what CUDA defines, and against broken
// callers it must catch. Each case runs in a process of its own (this program with the
// case's name), so that a sticky error or a deliberate death stays in it; the parent
// checks its exit status and what it printed. Ends with "N passed, N failed".
//
// Kernel engine: barriers, shuffles, votes and atomics give CUDA's results; a reduction
// that lacks a barrier, and a result that depends on block order, change between launches
// (each launch draws its own interleaving); a barrier or shuffle not reached by every
// thread it needs is an error; launch limits (threads, shared memory, registers from the
// build's table). Runtime: event waits bind to the record current when they are made,
// the legacy default stream waits for blocking streams only, host functions run on one
// thread and may not call CUDA, copies and memsets refuse the wrong kind of memory, a
// pageable cudaMemcpy to the device lands late for a non-blocking stream, a
// kernel given a pageable pointer faults (sticky), the device size is honoured, fresh
// memory is not zero.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#define CK(call)                                                                              \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess) {                                                              \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

static int g_bad = 0;
static void expect(bool ok, const char *what) {
    if (!ok) {
        printf("FAIL: %s\n", what);
        g_bad = 1;
    }
}

// ---------------------------------------------------------------- kernels

// Tree sum of 256 values in shared memory, with the barrier each level needs (or not).
template <bool BARRIERS>
__global__ void block_sum(const float *x, float *out) {
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = x[blockIdx.x * 256 + t];
    if (BARRIERS) __syncthreads();
    for (int w = 128; w > 0; w >>= 1) {
        if (t < w) s[t] += s[t + w];
        if (BARRIERS) __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

// Every block writes its index to the same place: the last block to run wins.
__global__ void last_writer(int *out) {
    if (threadIdx.x == 0) *out = (int)blockIdx.x;
}

// A barrier inside a branch that half the block skips (undefined behaviour in CUDA).
__global__ void divergent_barrier(float *x) {
    if (threadIdx.x < 16) return;
    __syncthreads();
    x[threadIdx.x] = 1.0f;
}

// Shuffles and votes of a full warp: each lane's value is its lane index times 3.
__global__ void warp_ops(int *out) {
    int lane = threadIdx.x;
    int v = lane * 3;
    out[lane] = __shfl_xor_sync(0xffffffffu, v, 5);
    out[32 + lane] = __shfl_sync(0xffffffffu, v, 7);
    out[64 + lane] = __shfl_down_sync(0xffffffffu, v, 4);
    out[96 + lane] = __shfl_up_sync(0xffffffffu, v, 4);
    out[128 + lane] = (int)__ballot_sync(0xffffffffu, lane % 3 == 0);
    out[160 + lane] = __all_sync(0xffffffffu, lane < 32) + 2 * __any_sync(0xffffffffu, lane == 31);
    // a warp-sum by xor butterfly
    int s = lane;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    out[192 + lane] = s;
}

// A full-mask shuffle that lanes 16..31 never reach.
__global__ void divergent_shuffle(int *out) {
    int lane = threadIdx.x;
    if (lane < 16) out[lane] = __shfl_xor_sync(0xffffffffu, lane, 1);
}

__global__ void atomic_count(unsigned long long *n, unsigned long long *lowest) {
    atomicAdd(n, 1ull);
    atomicMin(lowest, (unsigned long long)(blockIdx.x * blockDim.x + threadIdx.x) + 5);
}

// Dynamic shared memory: each thread writes its slot, then reads its neighbour's.
__global__ void dynamic_smem(float *out, int n) {
    extern __shared__ float shared[];
    shared[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = shared[(threadIdx.x + 1) % n];
}

// Many live values per thread: the build gives it many registers.
__global__ void register_hungry(const float *x, float *out) {
    float v[96];
#pragma unroll
    for (int i = 0; i < 96; i++) v[i] = x[i * 97 + threadIdx.x];
    float acc = 0;
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
        for (int i = 0; i < 96; i++) acc = acc * v[(i + r) % 96] + v[i];
    out[threadIdx.x] = acc;
}

__global__ void write_one(float *p) { p[threadIdx.x] = 1.0f; }

__global__ void copy_ints(const int *in, int *out) { out[threadIdx.x] = in[threadIdx.x]; }
__global__ void fill_ints(int *out, int v) { out[threadIdx.x] = v + (int)threadIdx.x; }

// Thread n writes one element past an n-element buffer.
__global__ void write_past_end(float *p, int n) {
    if (threadIdx.x <= (unsigned)n) p[threadIdx.x] = 2.0f;
}

// Warp 0 hands values to warp 1 through shared memory with only a warp operation between:
// a shuffle orders the lanes of its own warp, not the other warp (BARRIER: with __syncthreads).
template <bool BARRIER>
__global__ void warp_handoff(int *out) {
    __shared__ int s[64];
    s[threadIdx.x] = (int)threadIdx.x;
    int v = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1);
    if (BARRIER) __syncthreads();
    out[threadIdx.x] = s[(threadIdx.x + 32) % 64] + v;
}

// Lanes swap values through shared memory with __syncwarp between (ordered: no race), and
// read a neighbour's slot after a full-warp shuffle (ordered too).
__global__ void warp_swap(int *out) {
    __shared__ int s[64], t[64];
    s[threadIdx.x] = (int)threadIdx.x * 5;
    __syncwarp();
    int a = s[threadIdx.x ^ 1];
    t[threadIdx.x] = a;
    int b = __shfl_xor_sync(0xffffffffu, a, 2);
    out[threadIdx.x] = t[threadIdx.x ^ 3] + b;
}

// Every thread of every block adds one to *n without an atomic: a lost update.
__global__ void plain_count(unsigned *n) { *n = *n + 1; }

// Block b reads what block b-1 wrote in the same launch: no grid-wide order between blocks.
__global__ void read_previous_block(int *x) {
    if (threadIdx.x == 0) {
        x[blockIdx.x + 1] = (int)blockIdx.x;
        if (blockIdx.x > 0) x[0] += x[blockIdx.x];
    }
}

// Writes one element past the dynamic shared memory the launch asked for.
__global__ void dynamic_smem_past_end(float *out) {
    extern __shared__ float shared[];
    shared[threadIdx.x] = 1.0f;   // with 64 floats, thread 64 writes shared[64]
    __syncthreads();
    if (threadIdx.x == 0) out[0] = shared[0];
}

// Writes one element past a static shared array.
__global__ void static_smem_past_end(float *out) {
    __shared__ float s[32];
    __shared__ float t[32];
    s[threadIdx.x] = 1.0f;   // thread 32 writes s[32]
    t[threadIdx.x % 32] = 2.0f;
    __syncthreads();
    if (threadIdx.x == 0) out[0] = s[0] + t[0];
}

// Reads a static shared variable before any thread of the block wrote it, then writes it.
__global__ void static_smem_unwritten(unsigned *out) {
    __shared__ unsigned v;
    if (threadIdx.x == 0) {
        out[blockIdx.x] = v;
        v = 42;
    }
}

// A 16-byte vector load (as llmc's load16 moves one) at an address 4 bytes past a 16-byte boundary.
struct alignas(16) Floats4 {
    float v[4];
};
__global__ void misaligned_load(const float *x, float *out) {
    Floats4 r;
    *reinterpret_cast<int4 *>(&r) = *reinterpret_cast<const int4 *>(x + 1);
    out[threadIdx.x] = r.v[threadIdx.x % 4];
}

// The approximate intrinsics over n inputs: out[4i..4i+3] = __expf, __logf, rsqrtf, __fdividef.
__global__ void intrinsics(const float *x, int n, float *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    out[4 * i] = __expf(v);
    out[4 * i + 1] = __logf(fabsf(v) + 0.25f);
    out[4 * i + 2] = rsqrtf(fabsf(v) + 0.25f);
    out[4 * i + 3] = __fdividef(v, 1.0f + 0.5f * (float)(i % 7));
}

// ---------------------------------------------------------------- helpers

static std::atomic<int> g_gate[4];
static void CUDART_CB wait_gate(void *arg) {
    int k = (int)(intptr_t)arg;
    while (!g_gate[k].load()) usleep(200);
}
static void open_gate(int k) { g_gate[k].store(1); }

// Polls the stream for up to s seconds; true when it finished.
static bool finishes_within(cudaStream_t st, double s) {
    for (int i = 0; i < (int)(s * 1000); i++) {
        if (cudaStreamQuery(st) == cudaSuccess) return true;
        usleep(1000);
    }
    return false;
}

// ---------------------------------------------------------------- cases

static int case_barrier_sum() {   // the correct reduction: exact, every launch
    const int B = 8;
    float h[B * 256], sums[B], *x, *out;
    for (int i = 0; i < B * 256; i++) h[i] = (float)(i % 7);
    CK(cudaMalloc(&x, sizeof h));
    CK(cudaMalloc(&out, sizeof sums));
    CK(cudaMemcpy(x, h, sizeof h, cudaMemcpyHostToDevice));
    for (int rep = 0; rep < 5; rep++) {
        block_sum<true><<<B, 256>>>(x, out);
        CK(cudaGetLastError());
        CK(cudaMemcpy(sums, out, sizeof sums, cudaMemcpyDeviceToHost));
        for (int b = 0; b < B; b++) {
            float want = 0;
            for (int t = 0; t < 256; t++) want += h[b * 256 + t];
            expect(sums[b] == want, "block_sum with barriers gives the exact sum");
        }
    }
    return g_bad;
}

static int case_missing_barrier() {   // the same reduction without barriers: caught
    float h[256], sum, *x, *out;
    for (int i = 0; i < 256; i++) h[i] = 1.0f;
    CK(cudaMalloc(&x, sizeof h));
    CK(cudaMalloc(&out, sizeof(float)));
    CK(cudaMemcpy(x, h, sizeof h, cudaMemcpyHostToDevice));
    int wrong = 0;
    for (int rep = 0; rep < 10; rep++) {
        block_sum<false><<<1, 256>>>(x, out);
        CK(cudaMemcpy(&sum, out, sizeof sum, cudaMemcpyDeviceToHost));
        wrong += sum != 256.0f;
    }
    printf("missing barrier: %d of 10 launches wrong\n", wrong);
    expect(wrong > 0, "a reduction without __syncthreads gives a wrong sum in some launch");
    return g_bad;
}

static int case_block_order() {   // a result that depends on block order changes
    int *out, seen[64] = {0}, v;
    CK(cudaMalloc(&out, sizeof(int)));
    int distinct = 0;
    for (int rep = 0; rep < 20; rep++) {
        last_writer<<<64, 32>>>(out);
        CK(cudaMemcpy(&v, out, sizeof v, cudaMemcpyDeviceToHost));
        if (v >= 0 && v < 64 && !seen[v]++) distinct++;
    }
    printf("block order: %d distinct last blocks in 20 launches\n", distinct);
    expect(distinct > 1, "the last block to run differs between launches");
    return g_bad;
}

// A first launch of one block has no other block to race with: a later launch of 64
// (the same kernel and block shape) is checked too, and its blocks race on *out.
static int case_grid_race_after_one_block() {
    int *out;
    CK(cudaMalloc(&out, sizeof(int)));
    last_writer<<<1, 32>>>(out);
    CK(cudaDeviceSynchronize());
    last_writer<<<64, 32>>>(out);
    CK(cudaDeviceSynchronize());
    return g_bad;
}

static int case_divergent_barrier() {   // must die, naming the kernel
    float *x;
    CK(cudaMalloc(&x, 64 * sizeof(float)));
    divergent_barrier<<<1, 32>>>(x);
    cudaDeviceSynchronize();
    return 0;
}

static int case_warp_ops() {
    int *d, h[224];
    CK(cudaMalloc(&d, sizeof h));
    warp_ops<<<1, 32>>>(d);
    CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    unsigned ballot = 0;
    for (int l = 0; l < 32; l++)
        if (l % 3 == 0) ballot |= 1u << l;
    for (int l = 0; l < 32; l++) {
        expect(h[l] == (l ^ 5) * 3, "__shfl_xor_sync");
        expect(h[32 + l] == 21, "__shfl_sync from lane 7");
        expect(h[64 + l] == (l + 4 < 32 ? (l + 4) * 3 : l * 3), "__shfl_down_sync keeps its own value past the end");
        expect(h[96 + l] == (l >= 4 ? (l - 4) * 3 : l * 3), "__shfl_up_sync keeps its own value before the start");
        expect((unsigned)h[128 + l] == ballot, "__ballot_sync");
        expect(h[160 + l] == 3, "__all_sync and __any_sync");
        expect(h[192 + l] == 496, "butterfly warp sum");
    }
    return g_bad;
}

static int case_divergent_shuffle() {   // must die
    int *d;
    CK(cudaMalloc(&d, 32 * sizeof(int)));
    divergent_shuffle<<<1, 32>>>(d);
    cudaDeviceSynchronize();
    return 0;
}

static int case_atomics() {
    unsigned long long *d, h[2] = {0, ~0ull};
    CK(cudaMalloc(&d, sizeof h));
    CK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
    atomic_count<<<7, 96>>>(d, d + 1);
    CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    expect(h[0] == 7 * 96, "atomicAdd counts every thread");
    expect(h[1] == 5, "atomicMin keeps the least");
    return g_bad;
}

static int case_launch_limits() {
    float *x, *out;
    CK(cudaMalloc(&x, 96 * 97 * 1024 * sizeof(float)));
    CK(cudaMalloc(&out, 1024 * sizeof(float)));
    write_one<<<1, 1025>>>(out);
    expect(cudaGetLastError() == cudaErrorInvalidConfiguration, "1025 threads per block: cudaErrorInvalidConfiguration");
    expect(cudaGetLastError() == cudaSuccess, "the launch error is not sticky");
    write_one<<<dim3(1, 70000), 1>>>(out);
    expect(cudaGetLastError() == cudaErrorInvalidConfiguration, "grid y of 70000: cudaErrorInvalidConfiguration");
    dynamic_smem<<<1, 64, 64 * 1024>>>(out, 64);
    expect(cudaGetLastError() != cudaSuccess, "64 KiB of dynamic shared memory without the attribute is refused");
    CK(cudaFuncSetAttribute(dynamic_smem, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024));
    dynamic_smem<<<1, 64, 64 * 1024>>>(out, 64);
    expect(cudaGetLastError() == cudaSuccess, "with cudaFuncSetAttribute it launches");
    float h[64];
    CK(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 64; i++) expect(h[i] == (float)((i + 1) % 64), "dynamic shared memory holds what was written");
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, register_hungry));
    printf("register_hungry: %d registers per thread in the build\n", fa.numRegs);
    register_hungry<<<1, 1024>>>(x, out);
    cudaError_t e = cudaGetLastError();
    bool fits = ((fa.numRegs * 32 + 255) / 256 * 256) * 32 <= 65536;
    expect(fits ? e == cudaSuccess : e == cudaErrorLaunchOutOfResources,
           "1024 threads x the build's registers: launched exactly when they fit");
    register_hungry<<<1, 64>>>(x, out);
    expect(cudaGetLastError() == cudaSuccess, "64 threads of the same kernel fit");
    CK(cudaDeviceSynchronize());
    return g_bad;
}

static int case_pageable_kernel_arg() {   // a kernel given pageable memory: sticky fault
    float *host = (float *)malloc(64 * sizeof(float)), *d;
    write_one<<<1, 32>>>(host);
    cudaError_t e = cudaDeviceSynchronize();
    expect(e == cudaErrorIllegalAddress, "the kernel faults with cudaErrorIllegalAddress");
    expect(cudaMalloc(&d, 16) == cudaErrorIllegalAddress, "the fault is sticky: later calls return it");
    free(host);
    return g_bad;
}

static int case_event_binds_at_wait() {   // a wait sees the record current when it is made
    cudaStream_t a, b;
    cudaEvent_t ev;
    float *x;
    CK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CK(cudaMalloc(&x, 32 * sizeof(float)));
    // stream a waits for this thread (the gates) while it launches write_one: loaded now, so
    // that its first launch needs no load, which may wait for stream a (lazy loading, emu.h;
    // CUDA_EMU_LOAD_SYNC=1)
    cudaFuncAttributes attr;
    CK(cudaFuncGetAttributes(&attr, (const void *)write_one));
    CK(cudaLaunchHostFunc(a, wait_gate, (void *)0));
    CK(cudaEventRecord(ev, a));          // record 1: after gate 0
    CK(cudaStreamWaitEvent(b, ev, 0));   // binds to record 1
    CK(cudaLaunchHostFunc(a, wait_gate, (void *)1));
    CK(cudaEventRecord(ev, a));          // record 2: after gate 1, which stays closed
    write_one<<<1, 32, 0, b>>>(x);
    expect(cudaEventQuery(ev) == cudaErrorNotReady, "the event's latest record has not fired");
    open_gate(0);
    expect(finishes_within(b, 5.0), "stream b runs once record 1 fires, though record 2 has not");
    open_gate(1);
    CK(cudaEventSynchronize(ev));
    CK(cudaDeviceSynchronize());
    return g_bad;
}

// "not ready" from a query is also the thread's last error (cudart keeps every code a call
// returns other than cudaSuccess): a launch checked by cudaGetLastError after a poll that
// did not clear it reads as failed
static int case_not_ready_is_last_error() {
    cudaStream_t a;
    cudaEvent_t ev;
    float *x;
    CK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CK(cudaMalloc(&x, 32 * sizeof(float)));
    write_one<<<1, 32, 0, a>>>(x);   // loaded before the gate closes the stream
    CK(cudaStreamSynchronize(a));
    CK(cudaGetLastError());
    CK(cudaLaunchHostFunc(a, wait_gate, (void *)3));
    CK(cudaEventRecord(ev, a));
    expect(cudaEventQuery(ev) == cudaErrorNotReady, "the event has not fired");
    expect(cudaPeekAtLastError() == cudaErrorNotReady, "cudaPeekAtLastError returns the event query's \"not ready\"");
    write_one<<<1, 32>>>(x);
    expect(cudaGetLastError() == cudaErrorNotReady, "a good launch leaves it: cudaGetLastError returns it");
    expect(cudaGetLastError() == cudaSuccess, "cudaGetLastError reset it");
    expect(cudaStreamQuery(a) == cudaErrorNotReady, "the stream has work left");
    expect(cudaGetLastError() == cudaErrorNotReady, "the stream query's \"not ready\" is the last error too");
    open_gate(3);
    CK(cudaStreamSynchronize(a));
    expect(cudaEventQuery(ev) == cudaSuccess && cudaStreamQuery(a) == cudaSuccess, "both done");
    expect(cudaGetLastError() == cudaSuccess, "a query that finds the work done leaves no error");
    CK(cudaDeviceSynchronize());
    return g_bad;
}

static int case_legacy_stream() {   // the legacy stream waits for blocking streams only
    cudaStream_t blocking, nonblocking;
    float *x;
    CK(cudaStreamCreate(&blocking));
    CK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));
    CK(cudaMalloc(&x, 64 * sizeof(float)));
    CK(cudaLaunchHostFunc(nonblocking, wait_gate, (void *)2));
    CK(cudaMemsetAsync(x, 0, 64, 0));
    expect(finishes_within(0, 5.0), "the legacy stream does not wait for a non-blocking stream");
    open_gate(2);
    CK(cudaDeviceSynchronize());
    g_gate[2] = 0;
    CK(cudaLaunchHostFunc(blocking, wait_gate, (void *)2));
    CK(cudaMemsetAsync(x, 0, 64, 0));
    usleep(100000);
    expect(cudaStreamQuery(0) == cudaErrorNotReady, "the legacy stream waits for a blocking stream's work");
    open_gate(2);
    CK(cudaDeviceSynchronize());
    return g_bad;
}

static std::atomic<int> g_cb_result{-1};
static void CUDART_CB calls_cuda(void *) { g_cb_result = (int)cudaStreamQuery(0); }
static int case_host_function_no_cuda() {
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    CK(cudaLaunchHostFunc(s, calls_cuda, nullptr));
    CK(cudaStreamSynchronize(s));
    expect(g_cb_result == cudaErrorNotPermitted, "a CUDA call inside a host function fails with cudaErrorNotPermitted");
    return g_bad;
}

// Lazy loading (CUDA_EMU_LOAD_SYNC=1): a kernel that spins until another kernel sets a
// flag, the other's first launch coming while it spins. Its load may synchronize the
// context (emu.h): a deadlock the hang detector reports naming it, unless it was preloaded
// (cudaFuncGetAttributes) or CUDA_MODULE_LOADING=EAGER loaded every kernel at start.
__global__ void spin_until_set(const volatile int *flag) {
    while (*flag == 0) __nanosleep(1000);
}
__global__ void set_flag(int *flag) { *flag = 1; }
static int spin_then_launch(bool preload) {
    int *flag;
    cudaStream_t a, b;
    CK(cudaHostAlloc((void **)&flag, sizeof(int), cudaHostAllocMapped));
    *flag = 0;
    CK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaFuncAttributes attr;
    if (preload) CK(cudaFuncGetAttributes(&attr, (const void *)set_flag));
    spin_until_set<<<1, 1, 0, a>>>(flag);
    set_flag<<<1, 1, 0, b>>>(flag);
    CK(cudaDeviceSynchronize());
    expect(*flag == 1, "the spinning kernel ended once the other set the flag");
    return g_bad;
}
static int case_lazy_load_while_spinning() { return spin_then_launch(false); }   // must die (hang detected)
static int case_lazy_load_preloaded() { return spin_then_launch(true); }

// Host functions of two streams, each waiting for what the other's later host function
// does: one callback thread runs them in turn, so this never ends (the watchdog says so).
static std::atomic<int> g_flag_a{0}, g_flag_b{0};
static void CUDART_CB wait_b_then_set_a(void *) { while (!g_flag_b) usleep(100); g_flag_a = 1; }
static void CUDART_CB set_b(void *) { g_flag_b = 1; }
static int case_host_functions_serialize() {   // must die (hang detected)
    cudaStream_t s1, s2;
    CK(cudaStreamCreate(&s1));
    CK(cudaStreamCreate(&s2));
    CK(cudaLaunchHostFunc(s1, wait_b_then_set_a, nullptr));
    usleep(50000);
    CK(cudaLaunchHostFunc(s2, set_b, nullptr));
    cudaDeviceSynchronize();
    return 0;
}

// A kernel's write one element past the end of a cudaMalloc buffer (must die): the memory
// check names it, or under AddressSanitizer it is a heap-buffer-overflow.
static int case_kernel_out_of_bounds() {
    float *d;
    CK(cudaMalloc(&d, 31 * sizeof(float)));
    write_past_end<<<1, 32>>>(d, 31);
    cudaDeviceSynchronize();
    return 0;
}

// A kernel's store through an address made from an integer (an index that overflowed to a
// wild address), outside everything the memory checks watch: the fault names the kernel,
// its block and thread, as a GPU names the kernel of an illegal address (must die).
__global__ void wild_store(unsigned long long addr) {
    int *q = (int *)(uintptr_t)addr;
    *q = 1;
}
static int case_wild_address() {
    wild_store<<<1, 1>>>(16);
    cudaDeviceSynchronize();
    return 0;
}

static int case_warp_handoff() {   // must die: a shuffle does not order two warps
    int *d;
    CK(cudaMalloc(&d, 64 * sizeof(int)));
    warp_handoff<false><<<1, 64>>>(d);
    cudaDeviceSynchronize();
    return 0;
}

static int case_warp_handoff_barrier() {   // the same with __syncthreads: exact, no race
    int *d, h[64];
    CK(cudaMalloc(&d, sizeof h));
    warp_handoff<true><<<1, 64>>>(d);
    CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 64; i++) expect(h[i] == (i + 32) % 64 + (i ^ 1), "warp_handoff with a barrier");
    return g_bad;
}

static int case_warp_swap() {   // __syncwarp and full-warp shuffles order the lanes: no race
    int *d, h[64];
    CK(cudaMalloc(&d, sizeof h));
    for (int rep = 0; rep < 5; rep++) {
        warp_swap<<<1, 64>>>(d);
        CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
        for (int i = 0; i < 64; i++)
            expect(h[i] == ((i ^ 3) ^ 1) * 5 + ((i ^ 2) ^ 1) * 5, "lanes swap through shared memory");
    }
    return g_bad;
}

static int case_lost_update() {   // must die: a non-atomic count from many threads
    unsigned *n;
    CK(cudaMalloc(&n, sizeof *n));
    CK(cudaMemset(n, 0, sizeof *n));
    plain_count<<<8, 64>>>(n);
    cudaDeviceSynchronize();
    return 0;
}

static int case_lost_update_shows() {   // without the race check: the count comes out short
    unsigned *n, h;
    CK(cudaMalloc(&n, sizeof *n));
    int short_runs = 0;
    for (int rep = 0; rep < 5; rep++) {
        CK(cudaMemset(n, 0, sizeof *n));
        plain_count<<<8, 64>>>(n);
        CK(cudaMemcpy(&h, n, sizeof h, cudaMemcpyDeviceToHost));
        short_runs += h != 8 * 64;
    }
    printf("lost updates: %d of 5 launches counted short\n", short_runs);
    expect(short_runs > 0, "interleaved threads and blocks lose updates of a non-atomic count");
    return g_bad;
}

static int case_block_dependence() {   // must die: block b reads block b-1's write
    int *x;
    CK(cudaMalloc(&x, 9 * sizeof(int)));
    CK(cudaMemset(x, 0, 9 * sizeof(int)));
    read_previous_block<<<8, 32>>>(x);
    cudaDeviceSynchronize();
    return 0;
}

static int case_dynamic_smem_past_end() {   // must die: 64 floats asked for, 65 threads write
    float *d;
    CK(cudaMalloc(&d, sizeof(float)));
    dynamic_smem_past_end<<<1, 65, 64 * sizeof(float)>>>(d);
    cudaDeviceSynchronize();
    return 0;
}

static int case_static_smem_past_end() {   // must die
    float *d;
    CK(cudaMalloc(&d, sizeof(float)));
    static_smem_past_end<<<1, 33>>>(d);
    cudaDeviceSynchronize();
    return 0;
}

static int case_static_smem_fresh() {   // every block's static shared memory starts afresh
    const int B = 16;
    unsigned *d, h[B];
    CK(cudaMalloc(&d, sizeof h));
    static_smem_unwritten<<<B, 32>>>(d);
    CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    int distinct = 0;
    for (int b = 0; b < B; b++) {
        expect(h[b] != 42, "a block does not see what another block left in static shared memory");
        for (int c = 0; c < b; c++)
            if (h[c] == h[b]) goto seen;
        distinct++;
    seen:;
    }
    expect(distinct > B / 2, "static shared memory holds a pattern drawn per block");
    return g_bad;
}

static int case_misaligned_load() {   // must die
    float *x, *out;
    CK(cudaMalloc(&x, 64 * sizeof(float)));
    CK(cudaMalloc(&out, 32 * sizeof(float)));
    misaligned_load<<<1, 32>>>(x, out);
    cudaDeviceSynchronize();
    return 0;
}

// Stream a (created first: CUDA_EMU_SLOW=0 makes it the slow one) writes a buffer that a
// kernel on stream b reads, with the event wait between them or without it.
static int slow_producer(bool wait) {
    cudaStream_t a, b;
    CK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t ev;
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    int *x, *y, h[32];
    CK(cudaMalloc(&x, sizeof h));
    CK(cudaMalloc(&y, sizeof h));
    // waited: 20 reads, none stale. Unwaited: reads until one is stale (the slowed stream
    // pauses only some kernels, for milliseconds: on a busy machine the consumer's stream
    // may not wake inside those pauses for a while), for at most 60 s
    int stale = 0, rep = 0;
    auto start = std::chrono::steady_clock::now();
    for (; wait ? rep < 20 : stale == 0 && (rep < 20 || std::chrono::steady_clock::now() - start < std::chrono::seconds(60));
         rep++) {
        fill_ints<<<1, 32, 0, a>>>(x, 1000 * rep);
        CK(cudaEventRecord(ev, a));
        if (wait) CK(cudaStreamWaitEvent(b, ev, 0));
        copy_ints<<<1, 32, 0, b>>>(x, y);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(h, y, sizeof h, cudaMemcpyDeviceToHost));
        stale += h[5] != 1000 * rep + 5;
    }
    printf("slow producer: %d of %d reads stale\n", stale, rep);
    expect(wait ? stale == 0 : stale > 0, wait ? "the waiting consumer reads the producer's data"
                                               : "a consumer without its wait reads stale data");
    return g_bad;
}
static int case_slow_producer_unwaited() { return slow_producer(false); }
static int case_slow_producer_waited() { return slow_producer(true); }

static int case_copy_kinds() {
    float *d, h[16] = {0}, *p;
    CK(cudaMalloc(&d, sizeof h));
    CK(cudaMallocHost(&p, sizeof h));
    expect(cudaMemcpy(d, d, sizeof h, cudaMemcpyHostToDevice) == cudaErrorInvalidValue,
           "cudaMemcpyHostToDevice from device memory is refused");
    expect(cudaMemcpy(h, h, sizeof h, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue,
           "cudaMemcpyDeviceToHost from pageable memory is refused");
    expect(cudaMemcpy(d, h, sizeof h + 4, cudaMemcpyHostToDevice) == cudaErrorInvalidValue,
           "a copy past the end of the allocation is refused");
    expect(cudaMemset(h, 0, sizeof h) == cudaErrorInvalidValue, "cudaMemset of pageable memory is refused");
    expect(cudaMemset(p, 0, sizeof h) == cudaSuccess, "cudaMemset of pinned memory works");
    expect(cudaFree(d + 1) == cudaErrorInvalidValue, "cudaFree inside an allocation is refused");
    expect(cudaFree(p) == cudaErrorInvalidValue, "cudaFree of pinned memory is refused");
    float *q;
    expect(cudaHostGetDevicePointer((void **)&q, h, 0) == cudaErrorInvalidValue,
           "cudaHostGetDevicePointer of pageable memory is refused");
    CK(cudaHostGetDevicePointer((void **)&q, p, 0));
    expect(q == p, "pinned memory maps at the same address (unified addressing)");
    // memory that was never written is not zero, and differs from allocation to allocation
    unsigned char a[64], b[64];
    unsigned char *da, *db;
    CK(cudaMalloc(&da, 64));
    CK(cudaMalloc(&db, 64));
    CK(cudaMemcpy(a, da, 64, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b, db, 64, cudaMemcpyDeviceToHost));
    int zeros = 0;
    for (int i = 0; i < 64; i++) zeros += a[i] == 0;
    expect(zeros < 16 && memcmp(a, b, 64) != 0, "fresh device memory holds a pattern, not zeros");
    CK(cudaDeviceSynchronize());
    return g_bad;
}

// cudaMemcpy from pageable memory to device memory returns once the source is staged, "but
// the DMA to final destination may not have completed" (API synchronization behavior): a
// kernel on a non-blocking stream that reads the destination next sees the old bytes (what
// a test harness on an H200 did, in 75 of 5216 checks). A synchronize of
// the legacy stream or the device, an event recorded after the copy, a blocking stream, or
// the copy on the kernel's own stream makes it see the data. From pinned memory the call
// is synchronous; to host memory it returns with the data there. Run with
// CUDA_EMU_HANG_S=2: a held copy is not a hang.
enum Fence { NONE, SYNC_LEGACY, SYNC_DEVICE, EVENT, BLOCKING_STREAM, ASYNC_ON_STREAM, FROM_PINNED };
static bool kernel_sees_copy(Fence f, int base) {
    const int n = 64;
    int h[n], got[n], *d_in, *d_out, *pinned;
    cudaStream_t nb, blocking;
    cudaEvent_t ev;
    CK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
    CK(cudaStreamCreate(&blocking));
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CK(cudaMalloc(&d_in, sizeof h));
    CK(cudaMalloc(&d_out, sizeof h));
    CK(cudaMallocHost(&pinned, sizeof h));
    CK(cudaMemset(d_in, 0, sizeof h));
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < n; i++) h[i] = pinned[i] = base + i;
    cudaStream_t st = f == BLOCKING_STREAM ? blocking : nb;
    if (f == ASYNC_ON_STREAM) CK(cudaMemcpyAsync(d_in, h, sizeof h, cudaMemcpyHostToDevice, nb));
    else if (f == FROM_PINNED) CK(cudaMemcpy(d_in, pinned, sizeof h, cudaMemcpyHostToDevice));
    else CK(cudaMemcpy(d_in, h, sizeof h, f == NONE ? cudaMemcpyHostToDevice : cudaMemcpyDefault));
    // cudaMemcpy returns with the source staged: the copy has what h held at the call (a
    // cudaMemcpyAsync's source stays the program's to keep until the copy is done)
    if (f != ASYNC_ON_STREAM)
        for (int i = 0; i < n; i++) h[i] = -1;
    if (f == SYNC_LEGACY) CK(cudaStreamSynchronize(0));
    if (f == SYNC_DEVICE) CK(cudaDeviceSynchronize());
    if (f == EVENT) {
        CK(cudaEventRecord(ev, 0));
        CK(cudaStreamWaitEvent(nb, ev, 0));
    }
    if (f == NONE) usleep(2500000);   // longer than CUDA_EMU_HANG_S: the watchdog stays quiet
    copy_ints<<<1, n, 0, st>>>(d_in, d_out);
    CK(cudaStreamSynchronize(st));
    CK(cudaMemcpy(got, d_out, sizeof got, cudaMemcpyDeviceToHost));
    bool all = true, none = true;
    for (int i = 0; i < n; i++) {
        all = all && got[i] == base + i;
        none = none && got[i] == 0;
    }
    expect(all || none, "the kernel sees all of the copy or none of it");
    CK(cudaMemcpy(got, d_in, sizeof got, cudaMemcpyDeviceToHost));   // the copy lands, as staged
    for (int i = 0; i < n; i++) expect(got[i] == base + i, "the copy lands what the source held at the call");
    CK(cudaDeviceSynchronize());
    return all;
}

static int case_pageable_copy_lands_late() {
    expect(!kernel_sees_copy(NONE, 100),
           "a pageable cudaMemcpy, then a kernel on a non-blocking stream: the kernel reads the old bytes");
    expect(kernel_sees_copy(SYNC_LEGACY, 200), "... with cudaStreamSynchronize(0) between: it sees the copy");
    expect(kernel_sees_copy(SYNC_DEVICE, 300), "... with cudaDeviceSynchronize() between (cudaMemcpyDefault)");
    expect(kernel_sees_copy(EVENT, 400), "... with an event recorded on stream 0 and waited for");
    expect(kernel_sees_copy(BLOCKING_STREAM, 500), "... with the kernel on a blocking stream");
    expect(kernel_sees_copy(ASYNC_ON_STREAM, 600), "... with cudaMemcpyAsync on the kernel's stream");
    expect(kernel_sees_copy(FROM_PINNED, 700), "a cudaMemcpy from pinned memory is synchronous");
    // to host memory (pageable or pinned): the call returns with the data there
    int *d, got[64], *pinned;
    CK(cudaMalloc(&d, sizeof got));
    CK(cudaMallocHost(&pinned, sizeof got));
    for (int round = 0; round < 2; round++) {
        fill_ints<<<1, 64>>>(d, 1000 * (round + 1));
        int *dst = round ? pinned : got;
        CK(cudaMemcpy(dst, d, sizeof got, cudaMemcpyDeviceToHost));
        bool ok = true;
        for (int i = 0; i < 64; i++) ok = ok && dst[i] == 1000 * (round + 1) + i;
        expect(ok, round ? "cudaMemcpy to pinned memory returns with the data there"
                         : "cudaMemcpy to pageable memory returns with the data there");
    }
    CK(cudaDeviceSynchronize());
    return g_bad;
}

// cudaMemcpyAsync from pageable memory "might be synchronous" (API synchronization
// behavior): it may read its source until the copy is done, so a source changed (or freed)
// before the stream is waited for is a fault at the program's next CUDA call, naming the
// copy; one left alone until after a wait is not (the case itself then dies at the change)
static int case_pageable_async_source_reused() {
    int h[64], *d;
    CK(cudaMalloc(&d, sizeof h));
    for (int i = 0; i < 64; i++) h[i] = i;
    CK(cudaMemcpyAsync(d, h, sizeof h, cudaMemcpyHostToDevice, 0));
    CK(cudaStreamSynchronize(0));
    h[0] = -1;   // after the wait: the program's again
    CK(cudaMemcpyAsync(d, h, sizeof h, cudaMemcpyHostToDevice, 0));
    h[0] = 0;    // before any wait: the copy may still read it
    CK(cudaStreamSynchronize(0));
    return g_bad;
}

// a held pageable copy, then a kernel's first launch whose load waits for the device
// (CUDA_EMU_LOAD_SYNC=1): the launch is the program's next call, so the copy goes first
static int case_pageable_copy_then_first_load() {
    int h[64], got[64], *d_in, *d_out;
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CK(cudaMalloc(&d_in, sizeof h));
    CK(cudaMalloc(&d_out, sizeof h));
    for (int i = 0; i < 64; i++) h[i] = 7 * i;
    CK(cudaMemcpyAsync(d_in, h, sizeof h, cudaMemcpyHostToDevice, st));
    copy_ints<<<1, 64, 0, st>>>(d_in, d_out);
    CK(cudaStreamSynchronize(st));   // (a non-blocking stream: the legacy stream's copy would not wait)
    CK(cudaMemcpy(got, d_out, sizeof got, cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int i = 0; i < 64; i++) ok = ok && got[i] == 7 * i;
    expect(ok, "the kernel read what the copy brought");
    CK(cudaDeviceSynchronize());
    return g_bad;
}

// Any work on stream 0, and not only its last op, waits until something orders it: a
// cudaMemset ("asynchronous with respect to the host"), the first of two device-to-device
// copies, a kernel followed by a memset there. A kernel on a non-blocking stream reads the
// old bytes without cudaStreamSynchronize(0), the new ones with it.
enum LegacyWork { L_MEMSET, L_FIRST_COPY, L_KERNEL };
static bool nonblocking_sees(LegacyWork w, bool fence) {
    const int n = 64;
    int got[n], *d_in, *d_src, *d_other, *d_out;
    cudaStream_t nb;
    CK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
    CK(cudaMalloc(&d_in, sizeof got));
    CK(cudaMalloc(&d_src, sizeof got));
    CK(cudaMalloc(&d_other, sizeof got));
    CK(cudaMalloc(&d_out, sizeof got));
    fill_ints<<<1, n>>>(d_src, 7000);
    CK(cudaMemset(d_in, 0, sizeof got));
    CK(cudaDeviceSynchronize());
    if (w == L_MEMSET) CK(cudaMemset(d_in, 1, sizeof got));
    if (w == L_FIRST_COPY) {
        CK(cudaMemcpy(d_in, d_src, sizeof got, cudaMemcpyDeviceToDevice));
        CK(cudaMemcpy(d_other, d_src, sizeof got, cudaMemcpyDeviceToDevice));
    }
    if (w == L_KERNEL) {
        fill_ints<<<1, n>>>(d_in, 7000);
        CK(cudaMemset(d_other, 0, sizeof got));
    }
    if (fence) CK(cudaStreamSynchronize(0));
    usleep(100000);   // time alone orders nothing
    copy_ints<<<1, n, 0, nb>>>(d_in, d_out);
    CK(cudaStreamSynchronize(nb));
    CK(cudaMemcpy(got, d_out, sizeof got, cudaMemcpyDeviceToHost));
    bool none = true;
    for (int i = 0; i < n; i++) none = none && got[i] == 0;
    CK(cudaDeviceSynchronize());
    CK(cudaFree(d_in));
    CK(cudaFree(d_src));
    CK(cudaFree(d_other));
    CK(cudaFree(d_out));
    CK(cudaStreamDestroy(nb));
    return !none;
}

// What the host may wait for by other means than CUDA's runs without a synchronize, with
// the stream-0 work before it: a host function, a copy into pinned memory the host polls.
// And a device synchronize waits for a stream created before the legacy stream's first use
// whose kernel waits for a stream-0 kernel (it releases the legacy stream's work first).
static std::atomic<int> g_hostfn_ran{0};
static void CUDART_CB note_ran(void *) { g_hostfn_ran = 1; }
static bool polled_within(const volatile int *p, int want, double s) {
    for (int i = 0; i < (int)(s * 1000); i++) {
        if (*p == want) return true;
        usleep(1000);
    }
    return false;
}
static int case_legacy_work_observed() {
    int *d, *pinned;
    CK(cudaMalloc(&d, 64 * sizeof(int)));
    CK(cudaMallocHost(&pinned, 64 * sizeof(int)));
    pinned[5] = 0;
    fill_ints<<<1, 64>>>(d, 100);
    CK(cudaLaunchHostFunc(0, note_ran, nullptr));
    expect(polled_within((const volatile int *)&g_hostfn_ran, 1, 5.0), "a host function on stream 0 runs while the host polls");
    fill_ints<<<1, 64>>>(d, 200);
    CK(cudaMemcpyAsync(pinned, d, 64 * sizeof(int), cudaMemcpyDeviceToHost, 0));
    expect(polled_within((const volatile int *)&pinned[5], 205, 5.0),
           "a copy into pinned memory on stream 0 lands, with the kernel before it, while the host polls");
    CK(cudaDeviceSynchronize());
    int *flag;
    cudaStream_t early;
    CK(cudaStreamCreateWithFlags(&early, cudaStreamNonBlocking));
    CK(cudaHostAlloc((void **)&flag, sizeof(int), cudaHostAllocMapped));
    *flag = 0;
    spin_until_set<<<1, 1, 0, early>>>(flag);
    set_flag<<<1, 1>>>(flag);
    CK(cudaDeviceSynchronize());
    expect(*flag == 1, "cudaDeviceSynchronize: an earlier stream's kernel waiting for a stream-0 kernel ends");
    return g_bad;
}

// cudaHostUnregister is documented to wait for nothing: a copy from the range still queued
// behind a host function finds it gone when it runs, a device fault (sticky)
static std::atomic<int> g_unregistered{0};
static void CUDART_CB wait_unregistered(void *) {
    for (int i = 0; i < 3000 && !g_unregistered; i++) usleep(1000);
}
static int case_host_unregister_waits_for_nothing() {
    const size_t n = 1 << 16;
    char *h = (char *)aligned_alloc(4096, n);
    memset(h, 7, n);
    void *d;
    cudaStream_t s;
    CK(cudaMalloc(&d, n));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaHostRegister(h, n, cudaHostRegisterDefault));
    CK(cudaLaunchHostFunc(s, wait_unregistered, nullptr));
    CK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s));
    CK(cudaHostUnregister(h));   // returns with the copy still queued
    g_unregistered = 1;
    cudaError_t e = cudaStreamSynchronize(s);
    expect(e == cudaErrorIllegalAddress, "the queued copy from the unregistered range faults");
    free(h);
    return g_bad;
}

static int case_legacy_work_held() {
    expect(!nonblocking_sees(L_MEMSET, false), "a cudaMemset on stream 0, then a kernel on a non-blocking stream: it reads the old bytes");
    expect(nonblocking_sees(L_MEMSET, true), "... with cudaStreamSynchronize(0) between: it sees the memset");
    expect(!nonblocking_sees(L_FIRST_COPY, false), "the first of two device-to-device cudaMemcpy: the old bytes too");
    expect(!nonblocking_sees(L_KERNEL, false), "a kernel on stream 0 with a cudaMemset after it: the old bytes too");
    expect(nonblocking_sees(L_KERNEL, true), "... with cudaStreamSynchronize(0) between: it sees the kernel's");
    return g_bad;
}

static int case_device_size() {   // run with CUDA_EMU_MEM=64M
    size_t freeb = 0, total = 0;
    CK(cudaMemGetInfo(&freeb, &total));
    expect(total == (size_t)64 << 20, "cudaMemGetInfo reports CUDA_EMU_MEM");
    void *a, *b;
    CK(cudaMalloc(&a, (size_t)48 << 20));
    expect(cudaMalloc(&b, (size_t)32 << 20) == cudaErrorMemoryAllocation, "past the device size: cudaErrorMemoryAllocation");
    expect(cudaGetLastError() == cudaErrorMemoryAllocation && cudaGetLastError() == cudaSuccess,
           "the allocation failure is reported once, not sticky");
    CK(cudaFree(a));
    CK(cudaMalloc(&b, (size_t)32 << 20));
    return g_bad;
}

// NCCL at one rank: an all-gather is a copy on its stream; a send to oneself needs its
// receive in the same group; sizes must match; outside a group it would wait forever.
static int case_nccl_one_rank() {
    ncclUniqueId id;
    ncclComm_t comm, sub;
    cudaStream_t s;
    float *a, *b, h[8];
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaMalloc(&a, 8 * sizeof(float)));
    CK(cudaMalloc(&b, 8 * sizeof(float)));
    for (int i = 0; i < 8; i++) h[i] = (float)i;
    CK(cudaMemcpyAsync(a, h, sizeof h, cudaMemcpyHostToDevice, s));   // a cudaMemcpy would not reach s in time
    expect(ncclGetUniqueId(&id) == ncclSuccess && ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess, "a one-rank communicator");
    expect(ncclCommInitRank(&sub, 2, id, 0) == ncclInvalidUsage, "two ranks are refused (not emulated across processes)");
    expect(ncclAllGather(a, b, 8, ncclFloat, comm, s) == ncclSuccess, "ncclAllGather");
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(h, b, sizeof h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 8; i++) expect(h[i] == (float)i, "a one-rank all-gather copies");
    expect(ncclSend(a, 8, ncclFloat, 0, comm, s) == ncclInvalidUsage, "a send to oneself outside a group is refused");
    ncclGroupStart();
    ncclSend(a, 8, ncclFloat, 0, comm, s);
    ncclRecv(b, 4, ncclFloat, 0, comm, s);
    expect(ncclGroupEnd() == ncclInvalidUsage, "a send and a receive of different sizes are refused");
    ncclGroupStart();
    ncclSend(a, 8, ncclFloat, 0, comm, s);
    expect(ncclGroupEnd() == ncclInvalidUsage, "a send without its receive in the group is refused");
    expect(ncclCommSplit(comm, 0, 0, &sub, nullptr) == ncclSuccess && sub != nullptr, "ncclCommSplit");
    expect(ncclCommSplit(comm, NCCL_SPLIT_NOCOLOR, 0, &sub, nullptr) == ncclSuccess && sub == nullptr,
           "NCCL_SPLIT_NOCOLOR gives no communicator");
    ncclCommDestroy(comm);
    return g_bad;
}

// ---------------------------------------------------------------- library strictness

// cuBLASLt: two 16x16x16 fp32 matmuls (D = A B, the heuristic's algorithm with a workspace)
// on two streams sharing one workspace. ORDER: 0 nothing orders them (must die), 1 an event
// wait, 2 the host synchronizes the first stream before queuing the second, 3 one stream.
static int lt_two_matmuls(int order) {
    const int n = 16;
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t lay;
    cublasLtMatmulPreference_t pref;
    cudaStream_t s1, s2;
    cudaEvent_t ev;
    float *a, *b, *d1, *d2, ha[n * n], hb[n * n], hd[n * n];
    void *ws;
    const size_t ws_bytes = 1 << 20;
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    for (float **p : {&a, &b, &d1, &d2}) CK(cudaMalloc(p, sizeof ha));
    CK(cudaMalloc(&ws, ws_bytes));
    for (int i = 0; i < n * n; i++) ha[i] = (float)(i % 7) - 3.0f, hb[i] = (float)(i % 5) - 2.0f;
    CK(cudaMemcpy(a, ha, sizeof ha, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, hb, sizeof hb, cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize());
    expect(cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS && cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) ==
           CUBLAS_STATUS_SUCCESS && cublasLtMatrixLayoutCreate(&lay, CUDA_R_32F, n, n, n) == CUBLAS_STATUS_SUCCESS &&
           cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS, "cuBLASLt set-up");
    uint64_t max_ws = ws_bytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws);
    cublasLtMatmulHeuristicResult_t res;
    int count = 0;
    expect(cublasLtMatmulAlgoGetHeuristic(lt, desc, lay, lay, lay, lay, pref, 1, &res, &count) == CUBLAS_STATUS_SUCCESS &&
           count == 1 && res.workspaceSize > 0, "the heuristic's algorithm uses a workspace");
    const float one = 1.0f, zero = 0.0f;
    expect(cublasLtMatmul(lt, desc, &one, a, lay, b, lay, &zero, d1, lay, d1, lay, &res.algo, ws, ws_bytes, s1) ==
           CUBLAS_STATUS_SUCCESS, "the first matmul");
    if (order == 1) {
        CK(cudaEventRecord(ev, s1));
        CK(cudaStreamWaitEvent(s2, ev, 0));
    }
    if (order == 2) CK(cudaStreamSynchronize(s1));
    expect(cublasLtMatmul(lt, desc, &one, b, lay, a, lay, &zero, d2, lay, d2, lay, &res.algo, ws, ws_bytes,
                          order == 3 ? s1 : s2) == CUBLAS_STATUS_SUCCESS, "the second matmul");
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(hd, d1, sizeof hd, cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {   // column-major: D[i][j] = sum_k A[i][k] B[k][j]
            float want = 0.0f;
            for (int k = 0; k < n; k++) want += ha[i + k * n] * hb[k + j * n];
            ok = ok && hd[i + j * n] == want;
        }
    expect(ok, "the first matmul's result");
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(lay);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(lt);
    return g_bad;
}
// Lazy loading reaches the libraries' kernels (emu.h): with CUDA_EMU_LOAD_SYNC=1 a
// kernel spins on stream a until set_flag (preloaded) runs on stream b after a 16x16x16
// matmul there. The matmul's first call loads cuBLASLt's kernels, which waits for the
// spinning kernel: a deadlock the hang report names, unless one matmul of the kind ran
// before (WARM).
static int lt_matmul_while_spinning(bool warm) {
    const int n = 16;
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t lay;
    cudaStream_t a, b;
    int *flag;
    float *x, *y;
    CK(cudaHostAlloc((void **)&flag, sizeof(int), cudaHostAllocMapped));
    *flag = 0;
    CK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CK(cudaMalloc(&x, n * n * sizeof(float)));
    CK(cudaMalloc(&y, n * n * sizeof(float)));
    CK(cudaMemset(x, 0, n * n * sizeof(float)));
    cudaFuncAttributes attr;
    CK(cudaFuncGetAttributes(&attr, (const void *)set_flag));
    expect(cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS && cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) ==
           CUBLAS_STATUS_SUCCESS && cublasLtMatrixLayoutCreate(&lay, CUDA_R_32F, n, n, n) == CUBLAS_STATUS_SUCCESS,
           "cuBLASLt set-up");
    const float one = 1.0f, zero = 0.0f;
    auto matmul = [&](cudaStream_t s) {
        return cublasLtMatmul(lt, desc, &one, x, lay, x, lay, &zero, y, lay, y, lay, nullptr, nullptr, 0, s);
    };
    if (warm) {
        expect(matmul(b) == CUBLAS_STATUS_SUCCESS, "the warm-up matmul");
        CK(cudaStreamSynchronize(b));
    }
    spin_until_set<<<1, 1, 0, a>>>(flag);
    expect(matmul(b) == CUBLAS_STATUS_SUCCESS, "the matmul while a kernel spins");
    set_flag<<<1, 1, 0, b>>>(flag);
    CK(cudaDeviceSynchronize());
    expect(*flag == 1, "the spinning kernel ended once the other set the flag");
    cublasLtMatrixLayoutDestroy(lay);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(lt);
    return g_bad;
}
static int case_lazy_load_library_while_spinning() { return lt_matmul_while_spinning(false); }   // must die
static int case_lazy_load_library_warm() { return lt_matmul_while_spinning(true); }

static int case_lt_workspace_unordered() { return lt_two_matmuls(0); }
static int case_lt_workspace_ordered() { return lt_two_matmuls(1) | lt_two_matmuls(2) | lt_two_matmuls(3); }

// NCCL from two host threads on one (one-rank) communicator. MODE: 0 both issue
// all-gathers at once (must die), 1 the second thread issues into the communicator while
// the first thread's group holds an operation of it (must die), 2 they take turns under a
// mutex (allowed: one thread at a time).
static int nccl_two_threads(int mode) {
    ncclUniqueId id;
    ncclComm_t comm;
    cudaStream_t s;
    float *a, *b;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaMalloc(&a, 64 * sizeof(float)));
    CK(cudaMalloc(&b, 64 * sizeof(float)));
    expect(ncclGetUniqueId(&id) == ncclSuccess && ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess, "a one-rank communicator");
    std::atomic<int> go{0}, in_group{0}, second_done{0};
    std::mutex turn;
    auto worker = [&](int who) {
        while (!go.load()) usleep(10);
        if (mode == 1) {
            if (who == 0) {
                ncclGroupStart();
                ncclAllGather(a, b, 64, ncclFloat, comm, s);
                in_group = 1;
                while (!second_done.load()) usleep(100);
                ncclGroupEnd();
            } else {
                while (!in_group.load()) usleep(10);
                ncclAllGather(a + 32, b, 32, ncclFloat, comm, s);
                second_done = 1;
            }
            return;
        }
        if (mode == 2) {
            for (int i = 0; i < 50; i++) {
                std::lock_guard<std::mutex> lk(turn);
                expect(ncclAllGather(a, b, 64, ncclFloat, comm, s) == ncclSuccess, "an all-gather in turn");
            }
            return;
        }
        // until the two calls meet (the death): a fixed count may end on a busy machine
        // before the other thread is scheduled at all, and then nothing overlapped
        auto start = std::chrono::steady_clock::now();
        for (int i = 1; std::chrono::steady_clock::now() - start < std::chrono::seconds(60); i++) {
            ncclAllGather(a, b, 64, ncclFloat, comm, s);
            if (i % 64 == 0) cudaStreamSynchronize(s);   // a bounded queue
        }
    };
    std::thread t0(worker, 0), t1(worker, 1);
    go = 1;
    t0.join();
    t1.join();
    CK(cudaStreamSynchronize(s));
    ncclCommDestroy(comm);
    return g_bad;
}
static int case_nccl_two_threads_at_once() { return nccl_two_threads(0); }
static int case_nccl_group_of_another_thread() { return nccl_two_threads(1); }
static int case_nccl_threads_take_turns() { return nccl_two_threads(2); }

// The approximate intrinsics against the CUDA Programming Guide's bounds (its "Intrinsic
// Functions" table; rsqrtf 2 ulp): every result within them, the same bits from a second
// launch, and (WANT_INEXACT) some results other than the correctly rounded ones, so that a
// tolerance that holds only for exact results fails here; with CUDA_EMU_MATH_SEED=0 all exact.
static double ulp_of(float r) { return (double)nextafterf(fabsf(r), INFINITY) - (double)fabsf(r); }
static int intrinsics_case(bool want_inexact) {
    const int n = 4096;
    static float hx[n], a[4 * n], b[4 * n];
    for (int i = 0; i < n; i++) hx[i] = -20.0f + 30.0f * (float)i / n + 1e-3f * (float)(i % 13);
    float *x, *out;
    CK(cudaMalloc(&x, sizeof hx));
    CK(cudaMalloc(&out, sizeof a));
    CK(cudaMemcpy(x, hx, sizeof hx, cudaMemcpyHostToDevice));
    float *res[2] = {a, b};
    for (float *r : res) {
        intrinsics<<<n / 256, 256>>>(x, n, out);
        CK(cudaMemcpy(r, out, sizeof a, cudaMemcpyDeviceToHost));
    }
    int outside = 0, inexact = 0;
    for (int i = 0; i < n; i++) {
        double v = hx[i], y = fabs(v) + 0.25;
        double want[4] = {exp(v), log((double)(fabsf(hx[i]) + 0.25f)), 1.0 / sqrt((double)(fabsf(hx[i]) + 0.25f)),
                          v / (double)(1.0f + 0.5f * (float)(i % 7))};
        (void)y;
        for (int f = 0; f < 4; f++) {
            float got = a[4 * i + f];
            double err = fabs((double)got - want[f]);
            double bound = f == 0   ? (2.0 + floor(fabs(1.173 * v))) * ulp_of((float)want[f])
                           : f == 1 ? (fabsf(hx[i]) + 0.25f >= 0.5f && fabsf(hx[i]) + 0.25f <= 2.0f
                                           ? ldexp(1.0, -21) / pow(2.0, 0.41)
                                           : 3.0 * ulp_of((float)want[f]))
                                    : 2.0 * ulp_of((float)want[f]);
            if (!(err <= bound)) {
                if (outside++ < 5) printf("intrinsic %d at x=%.9g: %.9g, exact %.12g (error %.3g, bound %.3g)\n", f, v, got, want[f], err, bound);
            }
            if (got != (float)want[f]) inexact++;
            if (memcmp(&a[4 * i + f], &b[4 * i + f], 4)) outside += 1000000;
        }
    }
    printf("%d of %d results differ from the correctly rounded value, %d outside the documented error\n", inexact,
           4 * n, outside);
    expect(outside == 0, "every approximate intrinsic within its documented error, the same bits twice");
    expect(want_inexact ? inexact > n / 4 : inexact == 0,
           want_inexact ? "the intrinsics are not exact (a tolerance needing exact math fails)" : "exact with seed 0");
    return g_bad;
}
static int case_intrinsics_approximate() { return intrinsics_case(true); }
static int case_intrinsics_exact() { return intrinsics_case(false); }

struct Case {
    const char *name;
    int (*fn)();
    int expect_death;          // 0: exits 0 with nothing failed; 1: must die
    const char *must_say;      // what its output must contain
    const char *env;           // extra environment
};

static const Case cases[] = {
    {"barrier_sum", case_barrier_sum, 0, nullptr, nullptr},
    {"missing_barrier", case_missing_barrier, 0, "launches wrong", "CUDA_EMU_RACECHECK=0"},
    {"block_order", case_block_order, 0, "distinct last blocks", "CUDA_EMU_RACECHECK=0"},
    {"warp_handoff_barrier", case_warp_handoff_barrier, 0, nullptr, nullptr},
    {"warp_swap", case_warp_swap, 0, nullptr, nullptr},
    {"static_smem_fresh", case_static_smem_fresh, 0, nullptr, nullptr},
#ifndef __SANITIZE_ADDRESS__
    // the memory checks (the instrumentation, which the AddressSanitizer build has not)
    {"missing_barrier_race", case_missing_barrier, 1, "data race on shared memory at byte", nullptr},
    {"block_order_race", case_block_order, 1, "data race on global memory", nullptr},
    {"grid_race_after_one_block", case_grid_race_after_one_block, 1, "data race on global memory", nullptr},
    {"warp_handoff", case_warp_handoff, 1, "data race on shared memory", nullptr},
    {"lost_update", case_lost_update, 1, "data race on global memory", nullptr},
    {"lost_update_shows", case_lost_update_shows, 0, "launches counted short", "CUDA_EMU_RACECHECK=0"},
    {"block_dependence", case_block_dependence, 1, "data race on global memory", nullptr},
    {"dynamic_smem_past_end", case_dynamic_smem_past_end, 1, "dynamic shared memory, which is the launch's 256 bytes",
     nullptr},
    {"static_smem_past_end", case_static_smem_past_end, 1, "outside every __shared__ variable", nullptr},
    {"misaligned_load", case_misaligned_load, 1, "misaligned global memory access", nullptr},
#endif
    {"divergent_barrier", case_divergent_barrier, 1, "__syncthreads reached by 16 of the block's 32 threads", nullptr},
    {"warp_ops", case_warp_ops, 0, nullptr, nullptr},
    {"divergent_shuffle", case_divergent_shuffle, 1, "has exited: every lane of the mask must reach the same operation",
     nullptr},
    {"atomics", case_atomics, 0, nullptr, nullptr},
    {"launch_limits", case_launch_limits, 0, "registers per thread in the build", nullptr},
    {"pageable_kernel_arg", case_pageable_kernel_arg, 0, "pageable host or freed", nullptr},
    {"event_binds_at_wait", case_event_binds_at_wait, 0, nullptr, nullptr},
    {"not_ready_is_last_error", case_not_ready_is_last_error, 0, nullptr, nullptr},
    {"legacy_stream", case_legacy_stream, 0, nullptr, nullptr},
    {"host_function_no_cuda", case_host_function_no_cuda, 0, "must not make CUDA calls", nullptr},
    {"host_functions_serialize", case_host_functions_serialize, 1, "no progress for 2 s", "CUDA_EMU_HANG_S=2"},
    {"copy_kinds", case_copy_kinds, 0, nullptr, nullptr},
    {"lazy_load_while_spinning", case_lazy_load_while_spinning, 1, "loading kernel set_flag at its first launch",
     "CUDA_EMU_HANG_S=2 CUDA_EMU_LOAD_SYNC=1"},
    // the cases that must not hang get a long limit: a loaded machine may starve a stream's
    // thread for a while, and that must not read as the hang the dying cases show
    {"lazy_load_preloaded", case_lazy_load_preloaded, 0, nullptr, "CUDA_EMU_HANG_S=20 CUDA_EMU_LOAD_SYNC=1"},
    {"eager_loading", case_lazy_load_while_spinning, 0, nullptr,
     "CUDA_EMU_HANG_S=20 CUDA_EMU_LOAD_SYNC=1 CUDA_MODULE_LOADING=EAGER"},
    {"load_sync_off", case_lazy_load_while_spinning, 0, nullptr, "CUDA_EMU_HANG_S=20 CUDA_EMU_LOAD_SYNC=0"},
    {"lazy_load_library_while_spinning", case_lazy_load_library_while_spinning, 1,
     "loading cuBLASLt's kernels for CUDA_R_32F x CUDA_R_32F -> CUDA_R_32F with epilogue", "CUDA_EMU_HANG_S=2 CUDA_EMU_LOAD_SYNC=1"},
    {"lazy_load_library_warm", case_lazy_load_library_warm, 0, nullptr, "CUDA_EMU_HANG_S=20 CUDA_EMU_LOAD_SYNC=1"},
    {"slow_producer_unwaited", case_slow_producer_unwaited, 0, "reads stale", "CUDA_EMU_SLOW=0"},
    {"slow_producer_waited", case_slow_producer_waited, 0, "0 of 20 reads stale", "CUDA_EMU_SLOW=0"},
    {"pageable_copy_lands_late", case_pageable_copy_lands_late, 0, nullptr, "CUDA_EMU_HANG_S=2"},
    {"pageable_copy_then_first_load", case_pageable_copy_then_first_load, 0, nullptr,
     "CUDA_EMU_LOAD_SYNC=1 CUDA_EMU_HANG_S=10"},
    {"pageable_async_source_reused", case_pageable_async_source_reused, 1,
     "cudaMemcpyAsync of 256 bytes from pageable host memory", nullptr},
    {"legacy_work_held", case_legacy_work_held, 0, nullptr, "CUDA_EMU_HANG_S=20"},
    {"legacy_work_observed", case_legacy_work_observed, 0, nullptr, "CUDA_EMU_HANG_S=3"},
    {"host_unregister_waits_for_nothing", case_host_unregister_waits_for_nothing, 0,
     "was freed or unregistered (cudaHostUnregister) after the copy was queued", "CUDA_EMU_HANG_S=5"},
#ifdef __SANITIZE_ADDRESS__
    {"kernel_out_of_bounds", case_kernel_out_of_bounds, 1, "heap-buffer-overflow", nullptr},
#else
    {"kernel_out_of_bounds", case_kernel_out_of_bounds, 1, "out-of-bounds global memory access: writes 4 bytes", nullptr},
    {"wild_address", case_wild_address, 1, "SIGSEGV at address 0x10 in kernel wild_store (launched at", nullptr},
#endif
    {"device_size", case_device_size, 0, nullptr, "CUDA_EMU_MEM=64M"},
    {"nccl_one_rank", case_nccl_one_rank, 0, nullptr, nullptr},
    {"lt_workspace_unordered", case_lt_workspace_unordered, 1, "use the same workspace bytes", nullptr},
    {"lt_workspace_ordered", case_lt_workspace_ordered, 0, nullptr, nullptr},
    {"nccl_two_threads_at_once", case_nccl_two_threads_at_once, 1, "must not be issued to one communicator by several",
     nullptr},
    {"nccl_group_of_another_thread", case_nccl_group_of_another_thread, 1, "one thread must issue all the operations",
     nullptr},
    {"nccl_threads_take_turns", case_nccl_threads_take_turns, 0, nullptr, nullptr},
    {"intrinsics_approximate", case_intrinsics_approximate, 0, "differ from the correctly rounded", nullptr},
    {"intrinsics_exact", case_intrinsics_exact, 0, "0 of 16384 results differ", "CUDA_EMU_MATH_SEED=0"},
};

int main(int argc, char **argv) {
    if (argc == 2) {
        for (const Case &c : cases)
            if (!strcmp(argv[1], c.name)) return c.fn();
        fprintf(stderr, "no case %s\n", argv[1]);
        return 2;
    }
    int passed = 0, failed = 0;
    for (const Case &c : cases) {
        std::string cmd = std::string(c.env ? c.env : "") + " CUDA_EMU_QUIET=1 /proc/" + std::to_string(getpid()) +
                          "/exe " + c.name + " 2>&1";
        FILE *f = popen(cmd.c_str(), "r");
        std::string out;
        char buf[512];
        while (f && fgets(buf, sizeof buf, f)) out += buf;
        int st = f ? pclose(f) : -1;
        bool died = !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        bool ok = c.expect_death ? died : !died && out.find("FAIL") == std::string::npos;
        if (c.must_say && out.find(c.must_say) == std::string::npos) ok = false;
        if (ok) {
            passed++;
            printf("ok   %s%s\n", c.name, c.expect_death ? " (refused, as it must be)" : "");
        } else {
            failed++;
            printf("FAIL %s (%s; expected %s%s%s):\n%s", c.name, died ? "died" : "exited 0",
                   c.expect_death ? "a death" : "success", c.must_say ? " saying: " : "", c.must_say ? c.must_say : "",
                   out.c_str());
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
