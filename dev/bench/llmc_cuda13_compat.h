// llmc_cuda13_compat.h: force-included (nvcc -include, through NVCC_APPEND_FLAGS) when
// dev/bench/bench_vs_llmc.sh builds llm.c's train_gpt2cu. CUDA 13's cudaMemAdvise takes a
// cudaMemLocation where CUDA 12's took a device number (cudaCpuDeviceId for the host), as
// llm.c calls it; this overload takes the device number. Nothing changes before CUDA 13.
#pragma once
#include <cuda_runtime.h>
#if defined(__cplusplus) && defined(CUDART_VERSION) && CUDART_VERSION >= 13000
static inline cudaError_t cudaMemAdvise(const void *ptr, size_t bytes, cudaMemoryAdvise advice, int device) {
    cudaMemLocation where;
    where.type = device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    where.id = device;
    return cudaMemAdvise(ptr, bytes, advice, where);
}
#endif
