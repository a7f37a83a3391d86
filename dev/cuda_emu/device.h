// device.h: the kernel engine's side of the device built-ins (kernels.cpp): the running
// CUDA thread's indices, block barriers, warp shuffles and votes, and the launch.
#ifndef CUDA_EMU_DEVICE_H
#define CUDA_EMU_DEVICE_H

#include <cuda_runtime.h>
#include <stdint.h>

#include <functional>

#include "emu.h"

namespace emu_dev {

struct ThreadView {
    uint3 thread_idx;
    uint3 block_idx;
    dim3 block_dim;
    dim3 grid_dim;
};
extern thread_local ThreadView *t_view;   // the CUDA thread running on this host thread
ThreadView *outside_kernel();              // dies: a built-in read outside a kernel
inline ThreadView *cur() { return t_view ? t_view : outside_kernel(); }
// The built-ins as the kernels read them: functions of the engine (not compiled with the
// memory checks' instrumentation, so a read of threadIdx is no checked access), const for
// the compiler (a CUDA thread's indices never change while it runs, so it may reuse them).
__attribute__((const)) uint3 thread_idx();
__attribute__((const)) uint3 block_idx();
__attribute__((const)) dim3 block_dim();
__attribute__((const)) dim3 grid_dim();

void barrier();                            // __syncthreads
void warp_sync(unsigned mask);             // __syncwarp
enum ShflKind { SHFL_XOR, SHFL_IDX, SHFL_DOWN, SHFL_UP };
uint64_t warp_shuffle(unsigned mask, uint64_t value, ShflKind kind, int arg, int width);
enum VoteKind { VOTE_BALLOT, VOTE_ANY, VOTE_ALL };
unsigned warp_vote(unsigned mask, int pred, VoteKind kind);

// Checks the configuration (a bad one sets the calling thread's last error, as a launch
// does), then queues the grid on the stream: each block in a seeded order, each of its
// threads a fiber that calls body() with the built-ins set.
void launch(const void *kernel, const char *name, const char *file, int line, dim3 grid, dim3 block, size_t smem,
            cudaStream_t stream, const emu::LaunchArg *ptrs, int nptrs, std::function<void()> body);

// Shared memory of the running block (rewrite_launch.py turns the sources' declarations
// into these calls): a static __shared__ variable, one per declaration (key) and block,
// holding a pattern drawn for the block; and the block's dynamic shared memory, exactly
// the launch's size.
void *block_shared(uint64_t key, size_t bytes, size_t align, const char *name);
void *dynamic_shared(size_t align, const char *name);

// cudaFuncSetAttribute's record (kernels.cpp): the dynamic shared memory a kernel may ask for.
size_t max_dynamic_smem(const void *kernel);

}  // namespace emu_dev

#endif
