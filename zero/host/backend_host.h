/*
backend_host.h: the host backend (backend_host.c): host memory, MPI collectives, the C
kernels and real streams (worker threads). Trainers on the CPU pass it to zero_init.

The CUDA backend builds its host streams (CPU work: the offloaded optimizer, NVMe) on it.
*/
#ifndef ZERO_BACKEND_HOST_H
#define ZERO_BACKEND_HOST_H

#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

// The host backend (MPI + OpenMP, real streams). NULL after printing why (MPI without
// MPI_THREAD_MULTIPLE at world > 1, out of memory). Free after zero_free of every Zero using it.
const ZeroBackend *zero_backend_host(ZeroComm *comm);
void zero_backend_host_free(const ZeroBackend *b);

#ifdef __cplusplus
}
#endif
#endif
