/*
comm.h: the communication world ZeRO runs in.

Start-up (comm_mpi.c):
  - launched by mpirun or srun (OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK in the
    environment, or srun's SLURM_STEP_NUM_TASKS without WORLD_SIZE): MPI_Init_thread, rank
    and world from MPI_COMM_WORLD;
  - otherwise rank, world and local rank come from RANK, WORLD_SIZE, LOCAL_RANK (default
    0, 1, 0; RANK is required when WORLD_SIZE > 1) and LOCAL_WORLD_SIZE (ranks a machine,
    numbered machine by machine), and MPI is never touched. The host backend then needs world == 1; a device
    backend bootstraps its own collectives (NCCL) with zero_comm_share_blob(), which goes
    over TCP when ZERO_BOOTSTRAP_TCP=host:port is set, else through a shared file named by
    ZERO_BOOTSTRAP_FILE (bootstrap_tcp.c). Either needs the job's secret in every rank
    (ZERO_BOOTSTRAP_SECRET, or ZERO_BOOTSTRAP_SECRET_FILE naming a file of mode 0600), and
    gives the blob only to, and takes it only from, a process that proves it holds it.
    ZERO_BOOTSTRAP_TIMEOUT (seconds, default 600) bounds either wait.

Node layout: node_size > 0 makes ranks [k*node_size, (k+1)*node_size) logical node k (so the
hierarchical paths run on one machine); 0 means real nodes (MPI_Comm_split_type SHARED).

Threads: collectives of the host backend run on its stream threads (backend_host.c), each
stream on its own duplicate of the world (a ZeroChannel), so two streams' collectives never
share an MPI communicator; MPI is initialized with MPI_THREAD_MULTIPLE for that. The byte
counters and the watchdog take calls from any thread.

Every collective runs between zero_coll_begin() and zero_coll_end() (watchdog.c, below
comm_mpi.c: it knows the world only through this struct and ends the job through its
end_job callback), which
count the bytes this rank sends to ranks in its node and outside it, and arm a watchdog for
the calling thread: a collective in flight longer than timeout_s prints
    rank R: collective OP on N bytes timed out after S s (...)
and ends the whole job (MPI_Abort). A device library whose collectives run asynchronously
(NCCL) attaches a ZeroCommDevice: the watchdog thread then also polls it, so a collective
stuck on the device, or the library's asynchronous error, ends the job the same way.
*/
#ifndef ZERO_COMM_H
#define ZERO_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "zero.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ZERO_COLL_ALL_GATHER = 0,
    ZERO_COLL_ALL_TO_ALL = 1,
    ZERO_COLL_ALL_REDUCE = 2,
    ZERO_COLL_BROADCAST = 3,
    ZERO_COLL_GATHER = 4,      // to rank 0 only (report and checkpoint metadata)
    ZERO_COLL_REDUCE_SCATTER = 5,
    ZERO_COLL_NUM = 6
} ZeroCollOp;

const char *zero_coll_name(ZeroCollOp op);

typedef struct {
    uint64_t calls;
    uint64_t intra_bytes;   // sent to ranks of this rank's (logical) node
    uint64_t inter_bytes;   // sent to ranks of other nodes
} ZeroCollBytes;

typedef enum { ZERO_LAUNCH_ENV = 0, ZERO_LAUNCH_MPI = 1 } ZeroLaunch;

struct ZeroCommMPI;     // communicators (comm_mpi.c)
typedef struct ZeroChannel ZeroChannel;   // a stream's own duplicate of the world (comm_mpi.c)
struct ZeroWatchdog;    // timer thread (watchdog.c)

// Hooks of a device collective library (comm_nccl.cu). Its collectives return before they
// run, so the watchdog asks it, every poll_s seconds, about the oldest one still running.
typedef struct ZeroCommDevice {
    double poll_s;
    // Watchdog thread: 0, or 1 after printing why the job must end (a collective in flight
    // longer than timeout_s, an asynchronous library error).
    int (*poll)(ZeroComm *c, double timeout_s);
    // Watchdog thread, before the job ends: abort the library's communicators.
    void (*abort)(ZeroComm *c);
} ZeroCommDevice;

// The sub-groups ZeRO++ talks in. Each is a set of ranks in which every rank has an index
// (slices of a collective's parts are in index order). Ranks of a node must be consecutive
// (rank = node * local_size + local_rank; logical nodes always are, real nodes are checked):
//   WORLD   all ranks; index = rank
//   NODE    the ranks of this node; index = local_rank               (intra-node hop)
//   ACROSS  the ranks with this local_rank, one per node; index = node (inter-node hop)
//   HPZ     ranks [rank / H * H, rank / H * H + H), H = hpz_size; index = rank % H
typedef enum { ZERO_GROUP_WORLD = 0, ZERO_GROUP_NODE = 1, ZERO_GROUP_ACROSS = 2, ZERO_GROUP_HPZ = 3,
               ZERO_GROUP_KINDS = 4 } ZeroGroup;

struct ZeroComm {
    int rank, world;
    int local_rank, local_size;  // place in, and size of, this rank's (logical) node
    int node, num_nodes;
    int node_size;               // the layout asked for: 0 = real nodes
    int hpz_size;                // ranks per HPZ group (divides world; 1 when off)
    int consecutive;             // 1 when every node's ranks are consecutive (see ZeroGroup)
    uint64_t peers_intra[ZERO_GROUP_KINDS], peers_inter[ZERO_GROUP_KINDS];   // zero_group_peers, per layout
    ZeroLaunch launch;
    ZeroCollBytes sent[ZERO_COLL_NUM];   // updated atomically (collectives run on several threads)
    double stall_s;              // tests: sleep this long inside the next collective
    struct ZeroCommMPI *mpi;     // NULL when not launched by MPI
    struct ZeroWatchdog *watchdog;
    ZeroCommDevice *dev;         // NULL unless a device backend attached its collectives
    // How the watchdog thread ends the job (comm_mpi.c sets it: MPI_Abort where MPI may be
    // called from another thread, else NULL and the watchdog _exits). The watchdog sits
    // below the communicator and calls nothing of it but this.
    void (*end_job)(ZeroComm *c, int code);
};

// Start-up. Returns NULL after printing why (bad environment, MPI failure, a launcher's world
// size that MPI's contradicts); once MPI runs in a world of several ranks, a failure ends the
// job instead (zero_comm_abort): the others may already wait in a start-up collective.
ZeroComm *zero_comm_init(int *argc, char ***argv);
// Finalizes MPI if zero_comm_init started it.
void zero_comm_free(ZeroComm *c);
// Regroups ranks into nodes (see above) and HPZ groups of hpz_size ranks (0 or 1: groups of
// one). Collective; returns 0 or -1 after printing why (a size that does not divide the world).
// Channels (and the CUDA backend's streams) opened afterwards have sub-communicators for
// every group; those opened before keep the old layout's.
int zero_comm_set_layout(ZeroComm *c, int node_size, int hpz_size);
// Group geometry (see ZeroGroup): its size, this rank's index in it, and the world rank of
// its member with index i.
int zero_group_size(const ZeroComm *c, ZeroGroup g);
int zero_group_index(const ZeroComm *c, ZeroGroup g);
int zero_group_member(const ZeroComm *c, ZeroGroup g, int i);
const char *zero_group_name(ZeroGroup g);   // "world", "node", "across", "hpz"
// Starts, retimes or (timeout_s <= 0) stops the watchdog. Returns 0 or -1.
int zero_comm_set_timeout(ZeroComm *c, double timeout_s);
// Ends every rank of the job (MPI_Abort, or exit without MPI).
void zero_comm_abort(ZeroComm *c, int code) __attribute__((noreturn));
void zero_comm_barrier(ZeroComm *c);
// 1 when other threads (stream threads, the watchdog) may call MPI concurrently.
int zero_comm_thread_safe(const ZeroComm *c);

// A private duplicate of the world for one stream's collectives (MPI_Comm_dup). Collective:
// every rank opens (and closes) its channels in the same order. Returns NULL after printing
// why; without MPI (a world of one) a channel is a placeholder.
ZeroChannel *zero_comm_channel_open(ZeroComm *c);
void zero_comm_channel_close(ZeroComm *c, ZeroChannel *ch);

// Copies rank 0's bytes to every rank: the hook a device backend uses to share its
// collective library's id (ncclUniqueId). MPI_Bcast when launched by MPI; else over TCP
// ($ZERO_BOOTSTRAP_TCP) or through the file $ZERO_BOOTSTRAP_FILE, both authenticated by the
// job's secret (see above). Returns 0 or -1 after printing why.
int zero_comm_share_blob(ZeroComm *c, void *blob, size_t bytes, const char *what);
// The TCP path of zero_comm_share_blob (spec "host:port"; rank 0 listens on host:port
// only, the others connect to it; each side proves the job's secret before the bytes,
// sealed, travel). Returns 0 or -1 after printing why.
int zero_share_blob_tcp(ZeroComm *c, const char *spec, void *blob, size_t bytes, const char *what);
// The file path (rank 0 writes the bytes sealed under the job's secret to a fresh file it
// renames onto path; the others poll path and refuse a file the secret does not open).
// Returns 0 or -1 after printing why.
int zero_share_blob_file(ZeroComm *c, const char *path, void *blob, size_t bytes, const char *what);
// Seconds a rank waits for the others at start-up: $ZERO_BOOTSTRAP_TIMEOUT, default 600.
double zero_bootstrap_timeout(void);
// 0, or -1 after printing why when $ZERO_BOOTSTRAP_TIMEOUT is set but not a number of
// seconds in (0, 1e6] (zero_comm_init refuses to start then).
int zero_bootstrap_timeout_check(int rank);
// Attaches (or, with NULL, detaches) a device library's hooks; the watchdog stops using
// the old ones before this returns.
void zero_comm_attach_device(ZeroComm *c, ZeroCommDevice *dev);

// Collective bracketing (watchdog.c). bytes_per_peer: what this rank sends to each other
// rank in the operation (all-gather: its shard; all-to-all: one slice). Nests per thread;
// several threads may be inside collectives at once.
void zero_coll_begin(ZeroComm *c, ZeroCollOp op, uint64_t bytes_per_peer, const char *what);
// The same inside group g: bytes_per_peer to each other member, intra- or inter-node by the
// member's node.
void zero_coll_begin_group(ZeroComm *c, ZeroGroup g, ZeroCollOp op, uint64_t bytes_per_peer, const char *what);
// The other members of group g on this rank's node (*intra) and on other nodes (*inter).
void zero_group_peers(const ZeroComm *c, ZeroGroup g, uint64_t *intra, uint64_t *inter);
// The same for an operation rooted at rank 0 (a gather): every other rank sends `bytes`
// to rank 0 alone (intra- or inter-node by rank 0's node, which is node 0); rank 0 sends
// nothing.
void zero_coll_begin_to_root(ZeroComm *c, ZeroCollOp op, uint64_t bytes, const char *what);
void zero_coll_end(ZeroComm *c);
// The same watch without a collective, for waits on the peers such as a communicator's
// teardown; ended by zero_coll_end.
void zero_watch_begin(ZeroComm *c, const char *what);
// 1 once the watchdog has begun ending the job (it then aborts the device library, which
// releases waits on the stalled collective with no result in them). Code that waits on
// device work calls zero_comm_park_if_ending() after the wait: while the job ends, it never
// returns, so nothing goes on from an aborted collective's buffers.
int zero_comm_ending(void);
void zero_comm_park_if_ending(void);
// Tests: this rank sleeps `seconds` inside its next collective or watched wait (to trip the watchdog).
void zero_comm_inject_stall(ZeroComm *c, double seconds);

// MPI over host memory (comm_mpi.c), used by the host backend. Each part moves `count`
// elements per member of group g (slices in group-index order); dtype picks the element
// size. ch: the calling stream's channel (NULL: the world, g must be WORLD; only the thread
// that created the comm may use that). Failures end the job with a message naming the
// rank, the group, the operation and `what`.
typedef struct {
    const void *send;   // all_gather: this rank's count elements (may be recv + index*count:
                        //   in place); all_to_all, reduce_scatter: N slices of count, slice r
                        //   goes to member r
    void *recv;         // N * count elements; slice q comes from member q (N: the group's size);
                        //   reduce_scatter: count elements, the sum of the slices for this rank
    size_t count;
} ZeroCollPart;

void zero_mpi_all_gather(ZeroComm *c, ZeroChannel *ch, ZeroGroup g, const ZeroCollPart *parts, int nparts, ZeroDType dt,
                         const char *what);
void zero_mpi_all_to_all(ZeroComm *c, ZeroChannel *ch, ZeroGroup g, const ZeroCollPart *parts, int nparts, ZeroDType dt,
                         const char *what);
// Each part's send holds N slices of count elements (slice q for member q); recv gets the sum
// of every member's slice for this rank, in MPI's order (bf16: each addition rounded to
// nearest even, as a ring of bf16 buffers adds). Not the same bits across rank counts.
// count x N must fit an int (MPI counts the whole send buffer in one); else the job ends.
void zero_mpi_reduce_scatter(ZeroComm *c, ZeroChannel *ch, ZeroGroup g, const ZeroCollPart *parts, int nparts,
                             ZeroDType dt, const char *what);
// values[0..n) summed over ranks in rank order 0..N-1 (an all-gather, then a local sum):
// the same bits on every rank and in every run.
void zero_mpi_allreduce_sum_f64(ZeroComm *c, double *values, int n, const char *what);
// Rank 0 receives every rank's values[0..n) into all (rank q's at all[q*n]; all is
// ignored on other ranks and may be NULL there). Each other rank sends n doubles.
void zero_mpi_gather_f64(ZeroComm *c, const double *values, int n, double *all, const char *what);

size_t zero_dtype_size(ZeroDType dt);

#ifdef __cplusplus
}
#endif
#endif
