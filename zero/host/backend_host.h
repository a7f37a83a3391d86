/*
backend_host.h: what the CUDA backend borrows from the host backend (backend_host.c) for
its host streams, whose work runs on CPU threads: an event's latest record, captured when a
device stream is told to wait for it (CUDA's rule: the wait sees the record current at
that moment), and a blocking wait for it, which a device stream runs in a host function
(cudaLaunchHostFunc). Not for trainers.
*/
#ifndef ZERO_BACKEND_HOST_H
#define ZERO_BACKEND_HOST_H

#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

// The record of host event e current now, held until zero_host_marker_wait; NULL when it
// has fired already or e was never recorded (nothing to wait for).
void *zero_host_event_capture(const ZeroBackend *host, ZeroEvent *e);
// Blocks the calling thread until the captured record fires, then lets it go (NULL: none).
void zero_host_marker_wait(const ZeroBackend *host, void *marker);

#ifdef __cplusplus
}
#endif
#endif
