// event_query.h: cudaEventQuery for polling loops. cudart keeps a query's "not ready" as
// the calling thread's last error, and the launches after it are checked with
// cudaGetLastError: this one takes it back, and leaves any other error where it is.
#ifndef ZERO_CUDA_EVENT_QUERY_H
#define ZERO_CUDA_EVENT_QUERY_H

#include <cuda_runtime.h>

static inline cudaError_t zero_event_query(cudaEvent_t ev) {
    cudaError_t e = cudaEventQuery(ev);
    if (e == cudaErrorNotReady && cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
    return e;
}

#endif
