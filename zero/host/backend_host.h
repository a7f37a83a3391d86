/*
backend_host.h: the host backend (backend_host.c): host memory, MPI collectives, the C
kernels and real streams (worker threads). Trainers on the CPU pass it to zero_init.

The CUDA backend builds its host streams (CPU work: the offloaded optimizer, NVMe) on it,
and borrows two more calls: an event's latest record, captured when a device stream is
told to wait for it (CUDA's rule: the wait sees the record current at that moment), and a
blocking wait for that record, which a device stream runs in a host function.
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

// The record of host event e current now, held until zero_host_marker_wait; NULL when it
// has fired already or e was never recorded (nothing to wait for).
void *zero_host_event_capture(const ZeroBackend *host, ZeroEvent *e);
// Blocks the calling thread until the captured record fires, then lets it go (NULL: none).
void zero_host_marker_wait(const ZeroBackend *host, void *marker);

#ifdef __cplusplus
}
#endif
#endif
