// last_error.h: cudart keeps every code a call returns other than cudaSuccess as the calling
// thread's last error, and the trainers check each launch with cudaGetLastError. A call whose
// failure is expected or tolerated (a poll's "not ready", a --trace event that could not be
// made) takes its code back, so the next launch check does not read it as a failed launch.
#ifndef ZERO_CUDA_LAST_ERROR_H
#define ZERO_CUDA_LAST_ERROR_H

#include <cuda_runtime.h>

// Takes e back where it is the last error; any other error stays where it is.
static inline void zero_cuda_take_back(cudaError_t e) {
    if (e != cudaSuccess && cudaPeekAtLastError() == e) (void)cudaGetLastError();
}

// cudaEventQuery for polling loops: its "not ready" is taken back.
static inline cudaError_t zero_event_query(cudaEvent_t ev) {
    cudaError_t e = cudaEventQuery(ev);
    if (e == cudaErrorNotReady) zero_cuda_take_back(e);
    return e;
}

#endif
