/*
comm_nccl.h: NCCL collectives over device memory (comm_nccl.cu), for the CUDA backend.
Not part of the host build: it needs cuda_runtime_api.h and links against NCCL.

Set-up (zero_nccl_init, collective): rank 0's ncclUniqueId reaches every rank through
zero_comm_share_blob (MPI_Bcast under mpirun; else ZERO_BOOTSTRAP_TCP or the file
ZERO_BOOTSTRAP_FILE, which rank 0 removes once every rank has joined); the world
communicator comes from ncclCommInitRank, and intra- and inter-node communicators from
ncclCommSplit by the node layout current at set-up. A world of one rank uses no NCCL.

Every collective is enqueued on the caller's stream, on that stream's own communicator when
zero_nccl_stream_open gave it one (else the world's), brackets zero_coll_begin_group/end
(byte accounting, as comm_mpi.c does), and records an event after itself: the watchdog
thread polls the oldest unfinished one and NCCL's asynchronous errors (comm.h:
ZeroCommDevice) and ends the job with ncclCommAbort and a message naming the rank and the
operation. Failures end the job with a message naming the rank, the operation, the group,
`what` and the sizes.

Groups (comm.h's ZeroGroup): a stream's own communicator is split once more per group, by
the layout in force when the stream opens (node, local rank, rank / hpz_size as colors, rank
as key, so a member's NCCL rank is its group index), with consecutive nodes only. A group of
one rank gets no communicator (its collectives are local copies), a group of the whole world
reuses the stream's. A collective in a group other than the world needs such a stream, and
the layout it opened with; otherwise it ends the job saying which.
*/
#ifndef ZERO_COMM_NCCL_H
#define ZERO_COMM_NCCL_H

#include <cuda_runtime_api.h>

#include "../comm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ZeroNccl ZeroNccl;

// Selects this rank's GPU: local rank (of the real node) modulo the device count.
// Returns the device, or -1 after printing why.
int zero_nccl_select_device(ZeroComm *c);

// Collective. device must be current. NULL after printing why.
ZeroNccl *zero_nccl_init(ZeroComm *c, int device);
// Detaches the watchdog hooks, waits for queued work, destroys the communicators.
void zero_nccl_free(ZeroNccl *n);

// The semantics of zero_mpi_all_gather / zero_mpi_all_to_all (comm.h), enqueued on s.
void zero_nccl_all_gather(ZeroNccl *n, ZeroGroup g, const ZeroCollPart *parts, int nparts, ZeroDType dt, cudaStream_t s,
                          const char *what);
void zero_nccl_all_to_all(ZeroNccl *n, ZeroGroup g, const ZeroCollPart *parts, int nparts, ZeroDType dt, cudaStream_t s,
                          const char *what);
// The semantics of zero_mpi_reduce_scatter (comm.h): ncclReduceScatter with ncclSum, in
// NCCL's order (not the same bits across rank counts), enqueued on s.
void zero_nccl_reduce_scatter(ZeroNccl *n, ZeroGroup g, const ZeroCollPart *parts, int nparts, ZeroDType dt,
                              cudaStream_t s, const char *what);
// Host doubles summed in rank order (an all-gather, then a local sum) on the world
// communicator and a stream of its own; blocking.
void zero_nccl_allreduce_sum_f64(ZeroNccl *n, double *values, int count, const char *what);
// The semantics of zero_mpi_gather_f64: point-to-point sends to rank 0 (no all-gather), in
// groups within NCCL's limit of operations per group; blocking, like the above.
void zero_nccl_gather_f64(ZeroNccl *n, const double *values, int count, double *all, const char *what);
// Collective (every rank, same order): collectives enqueued on s from now on use a
// communicator of their own, split from the world, so that two streams' collectives are
// not serialized by NCCL, and one per group of the current layout (above). 0, or -1 after
// printing why.
int zero_nccl_stream_open(ZeroNccl *n, cudaStream_t s);
// The stream s is going away: its communicators are destroyed (every rank, same order).
void zero_nccl_forget_stream(ZeroNccl *n, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
