/*
backend_cuda.h: the CUDA backend (backend_cuda.cu, with NCCL from comm_nccl.cu).

    ZeroComm *comm = zero_comm_init(&argc, &argv);
    zero_cuda_select_device(comm);                 // before the trainer makes streams or buffers
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    const ZeroBackend *b = zero_backend_cuda(comm, stream);   // collective: NCCL set-up
    Zero *z = zero_init(..., comm, b, ...);  ...  zero_free(z);
    zero_backend_cuda_free(b);
    zero_comm_free(comm);

The model's kernels run on `stream`, the backend's main stream; collectives run on a comm
stream that zero_init creates (non-blocking, highest priority) and are ordered against the
model by events. Buffers are device memory; ZERO_MEM_HOST is pinned. Launch with mpirun, or
without MPI with RANK / WORLD_SIZE / LOCAL_RANK and ZERO_BOOTSTRAP_TCP=host:port or
ZERO_BOOTSTRAP_FILE=path (comm.h).

Numerics: the same bits as the host backend (backend.h). This needs backend_cuda.cu built
without flush-to-zero (no --use_fast_math, no -ftz=true); zero_backend_cuda checks it on
the device and refuses to start otherwise.
*/
#ifndef ZERO_BACKEND_CUDA_H
#define ZERO_BACKEND_CUDA_H

#include <cuda_runtime_api.h>

#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

// cudaSetDevice(local rank on this machine % device count). Returns the device or -1
// after printing why.
int zero_cuda_select_device(ZeroComm *comm);

// Collective over the world. Uses the current device. NULL after printing why.
const ZeroBackend *zero_backend_cuda(ZeroComm *comm, cudaStream_t main_stream);
// After zero_free of every Zero that uses it; before zero_comm_free.
void zero_backend_cuda_free(const ZeroBackend *b);

#ifdef __cplusplus
}
#endif
#endif
