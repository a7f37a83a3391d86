// comm_mpi.c: start-up, node layout and MPI collectives over host memory (see comm.h).
#include "../comm.h"

#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../kernels/quant_element.h"   // quant_f32_to_bf16: round to nearest even

#define ALLREDUCE_CHUNK 64   // doubles per all-gather in zero_mpi_allreduce_sum_f64

struct ZeroCommMPI {
    MPI_Comm world;      // our duplicate of MPI_COMM_WORLD: errors return, tags stay ours
    MPI_Comm intra;      // ranks of this (logical) node
    MPI_Comm inter;      // ranks with this local rank, one per node
    int we_initialized;  // we called MPI_Init_thread, so we finalize
    int thread_multiple; // stream threads and the watchdog may call MPI concurrently
    double *scratch;     // world * ALLREDUCE_CHUNK doubles, allocated at start-up
};

struct ZeroChannel {
    MPI_Comm comm;       // MPI_COMM_NULL without MPI
    MPI_Comm group[ZERO_GROUP_KINDS];   // the channel's sub-communicators ([WORLD] = comm)
};

int zero_comm_thread_safe(const ZeroComm *c) { return c->mpi && c->mpi->thread_multiple; }

// The watchdog's way to end the job from its own thread: MPI_Abort only where MPI allows a
// call from any thread (set on the comm only then).
static void end_job_mpi(ZeroComm *c, int code) { zero_comm_abort(c, code); }

static void comm_fail(ZeroComm *c, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
static void comm_fail(ZeroComm *c, const char *fmt, ...) {
    char msg[1024];
    int len = snprintf(msg, sizeof msg, "zero: rank %d: ", c->rank);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + len, sizeof msg - (size_t)len - 1, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", msg);   // one write: lines of several ranks do not interleave
    zero_comm_abort(c, 1);
}

static const char *mpi_err(int rc, char *buf) {
    int len = 0;
    if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) snprintf(buf, MPI_MAX_ERROR_STRING, "MPI error %d", rc);
    return buf;
}

size_t zero_dtype_size(ZeroDType dt) { return dt == ZERO_U8 ? 1 : dt == ZERO_BF16 ? 2 : 4; }

static MPI_Datatype mpi_type(ZeroDType dt) { return dt == ZERO_U8 ? MPI_BYTE : dt == ZERO_BF16 ? MPI_UINT16_T : MPI_FLOAT; }

// Parses a non-negative int environment variable; returns def when unset, -1 when malformed.
static int env_int(const char *name, int def) {
    const char *s = getenv(name);
    if (!s || !*s) return def;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 0 || v > INT_MAX) return -1;
    return (int)v;
}

// The variable that says an MPI launcher (mpirun, srun's job step) started this process, or
// NULL. Not SLURM_NTASKS: a batch script's shell has it too, and so does every process it
// starts by hand; WORLD_SIZE (a launch without MPI) outranks srun's SLURM_STEP_NUM_TASKS.
static const char *launched_by_mpi(void) {
    static const char *const mpi[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof mpi / sizeof mpi[0]; i++)
        if (getenv(mpi[i])) return mpi[i];
    const char *w = getenv("WORLD_SIZE");
    if (getenv("SLURM_STEP_NUM_TASKS") && !(w && *w)) return "SLURM_STEP_NUM_TASKS";
    return NULL;
}

// The world sizes launchers state in the environment, checked against MPI's once it runs: a
// process that took itself for one of an MPI launch without being one (srun with PMIx sets
// PMIX_RANK in every task, so torchrun under srun, or RANK/WORLD_SIZE given by hand, starts
// MPI) is a world of one, and would train alone while its peers wait or do the same.
// SLURM_STEP_NUM_TASKS only where no mpirun variable is set: mpirun inside an allocation
// starts its daemons as a job step of one task per node, and its ranks inherit that count.
// 0, or -1 after naming the variable, both sizes and what to unset.
static int check_world_size(const ZeroComm *c, const char *by) {
    static const char *const vars[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *s = getenv(vars[i]);
        if (!s || !*s) continue;
        if (!strcmp(vars[i], "SLURM_STEP_NUM_TASKS") && (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE"))) continue;
        if (env_int(vars[i], -1) == c->world) continue;
        // srun's tasks that MPI took for singletons: srun did not give MPI its process manager
        const int srun = !strcmp(vars[i], "SLURM_STEP_NUM_TASKS") || !strcmp(by, "PMIX_RANK") || !strcmp(by, "PMI_SIZE");
        fprintf(stderr, "zero: rank %d: %s=%s, but the MPI world this process joined (it started MPI because %s=%s is "
                "set) has %d rank(s): refusing to train in a world that is not the job's. %s\n",
                c->rank, vars[i], s, by, getenv(by), c->world,
                srun ? "If srun started the ranks, give MPI Slurm's process manager (srun --mpi=pmix, or pmi2, as "
                       "this MPI supports), or start them with mpirun; if another launcher did (torchrun, or "
                       "RANK/WORLD_SIZE by hand), unset PMIX_RANK, PMI_SIZE and OMPI_COMM_WORLD_SIZE for the ranks, "
                       "so that they start from RANK/WORLD_SIZE"
                     : "If mpirun started the ranks, unset this variable (a leftover of another launch) or give the "
                       "launch's rank count; if another launcher did (torchrun, or RANK/WORLD_SIZE by hand), unset "
                       "OMPI_COMM_WORLD_SIZE, PMI_SIZE and PMIX_RANK for the ranks, so that they start from "
                       "RANK/WORLD_SIZE");
        return -1;
    }
    return 0;
}

// A start-up failure once MPI runs, its message printed. The other ranks may already wait in
// a start-up collective (the node split), where no watchdog watches yet, and would wait
// forever for a rank that finalized: end the whole job. A world of one finalizes and returns.
static ZeroComm *init_failed(ZeroComm *c) {
    if (c->mpi && c->world > 1) zero_comm_abort(c, 1);
    zero_comm_free(c);
    return NULL;
}

ZeroComm *zero_comm_init(int *argc, char ***argv) {
    ZeroComm *c = calloc(1, sizeof(ZeroComm));
    if (!c) { fprintf(stderr, "zero: out of host memory for the communicator\n"); return NULL; }
    const char *by = launched_by_mpi();
    if (by) {
        c->launch = ZERO_LAUNCH_MPI;
        c->mpi = calloc(1, sizeof(struct ZeroCommMPI));
        if (!c->mpi) { fprintf(stderr, "zero: out of host memory for the communicator\n"); free(c); return NULL; }
        int inited = 0, provided = 0;
        MPI_Initialized(&inited);
        if (!inited) {
            // MULTIPLE: the host backend's stream threads run collectives concurrently, and
            // the watchdog thread may call MPI_Abort while they wait
            if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
                fprintf(stderr, "zero: MPI_Init_thread failed (started by an MPI launcher, as %s=%s says)\n", by,
                        getenv(by));
                free(c->mpi); free(c);
                return NULL;
            }
            c->mpi->we_initialized = 1;
        } else {
            MPI_Query_thread(&provided);
        }
        c->mpi->thread_multiple = provided >= MPI_THREAD_MULTIPLE;
        if (c->mpi->thread_multiple) c->end_job = end_job_mpi;
        MPI_Comm_dup(MPI_COMM_WORLD, &c->mpi->world);
        MPI_Comm_set_errhandler(c->mpi->world, MPI_ERRORS_RETURN);
        MPI_Comm_rank(c->mpi->world, &c->rank);
        MPI_Comm_size(c->mpi->world, &c->world);
        c->mpi->intra = c->mpi->inter = MPI_COMM_NULL;
        c->mpi->scratch = malloc((size_t)c->world * ALLREDUCE_CHUNK * sizeof(double));
        if (!c->mpi->scratch) comm_fail(c, "out of host memory for the all-reduce scratch");
        if (check_world_size(c, by) != 0) return init_failed(c);
    } else {
        // No launcher: the environment names our place (torchrun-style variables).
        c->launch = ZERO_LAUNCH_ENV;
        c->rank = env_int("RANK", 0);
        c->world = env_int("WORLD_SIZE", 1);
        c->local_rank = env_int("LOCAL_RANK", 0);
        const char *r = getenv("RANK"), *w = getenv("WORLD_SIZE");
        const char *placed = r && *r ? "RANK" : getenv("LOCAL_RANK") && *getenv("LOCAL_RANK") ? "LOCAL_RANK" : NULL;
        if (placed && !(w && *w)) {   // a world of one would go on alone while its peers wait
            fprintf(stderr, "zero: %s=%s but WORLD_SIZE is unset: give every process WORLD_SIZE too (or neither, "
                    "for one process)\n", placed, getenv(placed));
            free(c);
            return NULL;
        }
        if (c->world > 1 && !(r && *r)) {   // every process would be rank 0
            fprintf(stderr, "zero: WORLD_SIZE=%d but RANK is unset: give each process its RANK (0..%d)\n", c->world,
                    c->world - 1);
            free(c);
            return NULL;
        }
        if (c->rank < 0 || c->world < 1 || c->local_rank < 0 || c->rank >= c->world) {
            fprintf(stderr, "zero: bad RANK/WORLD_SIZE/LOCAL_RANK in the environment "
                    "(RANK=%s WORLD_SIZE=%s LOCAL_RANK=%s): need 0 <= RANK < WORLD_SIZE and LOCAL_RANK >= 0\n",
                    getenv("RANK") ? getenv("RANK") : "unset",
                    getenv("WORLD_SIZE") ? getenv("WORLD_SIZE") : "unset",
                    getenv("LOCAL_RANK") ? getenv("LOCAL_RANK") : "unset");
            free(c);
            return NULL;
        }
    }
    if (zero_bootstrap_timeout_check(c->rank) != 0 || zero_comm_set_layout(c, 0, 0) != 0) return init_failed(c);
    return c;
}

void zero_comm_free(ZeroComm *c) {
    if (!c) return;
    zero_comm_set_timeout(c, 0);
    if (c->mpi) {
        if (c->mpi->intra != MPI_COMM_NULL) MPI_Comm_free(&c->mpi->intra);
        if (c->mpi->inter != MPI_COMM_NULL) MPI_Comm_free(&c->mpi->inter);
        MPI_Comm_free(&c->mpi->world);
        if (c->mpi->we_initialized) MPI_Finalize();
        free(c->mpi->scratch);
        free(c->mpi);
    }
    free(c);
}

const char *zero_group_name(ZeroGroup g) {
    static const char *names[ZERO_GROUP_KINDS] = {"world", "node", "across", "hpz"};
    return g >= 0 && g < ZERO_GROUP_KINDS ? names[g] : "?";
}

int zero_group_size(const ZeroComm *c, ZeroGroup g) {
    switch (g) {
    case ZERO_GROUP_NODE: return c->local_size;
    case ZERO_GROUP_ACROSS: return c->num_nodes;
    case ZERO_GROUP_HPZ: return c->hpz_size;
    default: return c->world;
    }
}

int zero_group_index(const ZeroComm *c, ZeroGroup g) {
    switch (g) {
    case ZERO_GROUP_NODE: return c->local_rank;
    case ZERO_GROUP_ACROSS: return c->node;
    case ZERO_GROUP_HPZ: return c->rank % c->hpz_size;
    default: return c->rank;
    }
}

int zero_group_member(const ZeroComm *c, ZeroGroup g, int i) {
    switch (g) {
    case ZERO_GROUP_NODE: return c->node * c->local_size + i;
    case ZERO_GROUP_ACROSS: return i * c->local_size + c->local_rank;
    case ZERO_GROUP_HPZ: return c->rank / c->hpz_size * c->hpz_size + i;
    default: return i;
    }
}

static int set_nodes(ZeroComm *c, int node_size);

int zero_comm_set_layout(ZeroComm *c, int node_size, int hpz_size) {
    if (node_size < 0 || (node_size > 0 && c->world % node_size != 0)) {
        fprintf(stderr, "zero: rank %d: node size %d does not divide world size %d into equal nodes\n",
                c->rank, node_size, c->world);
        return -1;
    }
    if (hpz_size < 0 || (hpz_size > 1 && c->world % hpz_size != 0)) {
        fprintf(stderr, "zero: rank %d: hpZ partition size %d does not divide world size %d into equal groups\n",
                c->rank, hpz_size, c->world);
        return -1;
    }
    c->hpz_size = hpz_size > 1 ? hpz_size : 1;
    if (set_nodes(c, node_size) != 0) return -1;
    // Every node's ranks consecutive, nodes of one size: what the group geometry assumes.
    int ok = c->rank == c->node * c->local_size + c->local_rank && c->local_size * c->num_nodes == c->world;
    if (c->mpi && c->world > 1) MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, c->mpi->world);
    c->consecutive = ok;
    // each group's other members on this node and elsewhere (byte accounting), once: the
    // world's node is local_size ranks wherever they are; the node's are all on it, the
    // across group's all elsewhere; an hpZ group shares [lo, hi) with this node's ranks
    const int X = c->local_size, H = c->hpz_size, base = c->rank / H * H;
    const int lo = base > c->node * X ? base : c->node * X;
    const int hi = base + H < (c->node + 1) * X ? base + H : (c->node + 1) * X;
    const int same[ZERO_GROUP_KINDS] = {X, X, 1, hi > lo ? hi - lo : 1};
    for (int g = 0; g < ZERO_GROUP_KINDS; g++) {
        c->peers_intra[g] = (uint64_t)(same[g] - 1);
        c->peers_inter[g] = (uint64_t)(zero_group_size(c, (ZeroGroup)g) - same[g]);
    }
    return 0;
}

static int set_nodes(ZeroComm *c, int node_size) {
    c->node_size = node_size;
    if (!c->mpi) {
        int local = node_size;
        if (local <= 0) {   // the machines from the environment: ranks numbered machine by machine
            const char *lw = getenv("LOCAL_WORLD_SIZE"), *lr = getenv("LOCAL_RANK");
            local = env_int("LOCAL_WORLD_SIZE", c->world);
            if (local < 1 || c->world % local != 0) {
                fprintf(stderr, "zero: rank %d: LOCAL_WORLD_SIZE=%s does not divide WORLD_SIZE=%d into machines of "
                        "equal size (it is the number of ranks on each machine)\n", c->rank, lw, c->world);
                return -1;
            }
            if (lr && *lr && env_int("LOCAL_RANK", 0) != c->rank % local) {
                fprintf(stderr, "zero: rank %d: LOCAL_RANK=%s, but RANK %d on machines of %d rank(s) (LOCAL_WORLD_SIZE=%s) "
                        "is local rank %d: give LOCAL_WORLD_SIZE, the ranks on each machine, and number the ranks "
                        "machine by machine (RANK = machine x LOCAL_WORLD_SIZE + LOCAL_RANK)\n", c->rank, lr, c->rank,
                        local, lw && *lw ? lw : "unset", c->rank % local);
                return -1;
            }
        }
        c->local_size = local;
        c->local_rank = c->rank % local;
        c->node = c->rank / local;
        c->num_nodes = c->world / local;
        return 0;
    }
    struct ZeroCommMPI *m = c->mpi;
    if (m->intra != MPI_COMM_NULL) MPI_Comm_free(&m->intra);
    if (m->inter != MPI_COMM_NULL) MPI_Comm_free(&m->inter);
    int rc;
    if (node_size > 0) {
        c->node = c->rank / node_size;
        c->num_nodes = c->world / node_size;
        rc = MPI_Comm_split(m->world, c->node, c->rank, &m->intra);
    } else {
        rc = MPI_Comm_split_type(m->world, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &m->intra);
    }
    char eb[MPI_MAX_ERROR_STRING];
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "zero: rank %d: splitting the world into nodes failed: %s\n", c->rank, mpi_err(rc, eb));
        return -1;
    }
    MPI_Comm_rank(m->intra, &c->local_rank);
    MPI_Comm_size(m->intra, &c->local_size);
    rc = MPI_Comm_split(m->world, c->local_rank, c->rank, &m->inter);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "zero: rank %d: building the inter-node communicator failed: %s\n", c->rank, mpi_err(rc, eb));
        return -1;
    }
    if (node_size == 0) {
        // Real nodes: among node leaders (local rank 0) the inter rank is the node index.
        int ids[2] = {0, 0};
        if (c->local_rank == 0) {
            MPI_Comm_rank(m->inter, &ids[0]);
            MPI_Comm_size(m->inter, &ids[1]);
        }
        MPI_Bcast(ids, 2, MPI_INT, 0, m->intra);
        c->node = ids[0];
        c->num_nodes = ids[1];
    }
    return 0;
}

void zero_comm_abort(ZeroComm *c, int code) {
    fflush(stdout);
    fflush(stderr);
    if (c && c->mpi) MPI_Abort(c->mpi->world, code);
    _exit(code);
}

void zero_comm_barrier(ZeroComm *c) {
    if (c->mpi && c->world > 1) {
        char eb[MPI_MAX_ERROR_STRING];
        zero_coll_begin(c, ZERO_COLL_ALL_REDUCE, 0, "barrier");
        int rc = MPI_Barrier(c->mpi->world);
        zero_coll_end(c);
        if (rc != MPI_SUCCESS) comm_fail(c, "MPI_Barrier failed: %s", mpi_err(rc, eb));
    }
}

ZeroChannel *zero_comm_channel_open(ZeroComm *c) {
    ZeroChannel *ch = calloc(1, sizeof *ch);
    if (!ch) { fprintf(stderr, "zero: rank %d: out of host memory for a communication channel\n", c->rank); return NULL; }
    ch->comm = MPI_COMM_NULL;
    for (int g = 0; g < ZERO_GROUP_KINDS; g++) ch->group[g] = MPI_COMM_NULL;
    if (!c->mpi) return ch;
    if (c->world > 1 && !c->mpi->thread_multiple) {
        int provided = 0;
        MPI_Query_thread(&provided);
        fprintf(stderr, "zero: rank %d: collectives on several stream threads need MPI_THREAD_MULTIPLE, but this MPI "
                "provides thread level %d; use an MPI built with thread support (Open MPI and MPICH are)\n",
                c->rank, provided);
        free(ch);
        return NULL;
    }
    char eb[MPI_MAX_ERROR_STRING];
    // collective over the world: watched, so a rank that never comes ends the job
    zero_watch_begin(c, "opening a stream's communicators (MPI_Comm_dup, MPI_Comm_split)");
    int rc = MPI_Comm_dup(c->mpi->world, &ch->comm);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(ch->comm, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS) {
        zero_coll_end(c);
        fprintf(stderr, "zero: rank %d: duplicating the world communicator for a stream failed: %s\n", c->rank,
                mpi_err(rc, eb));
        free(ch);
        return NULL;
    }
    // The sub-groups, keyed by world rank so that a member's rank in the sub-communicator
    // is its group index (ZeroGroup). Split only when the layout makes them meaningful.
    ch->group[ZERO_GROUP_WORLD] = ch->comm;
    int colors[ZERO_GROUP_KINDS] = {0, c->node, c->local_rank, c->rank / c->hpz_size};
    for (int g = 1; g < ZERO_GROUP_KINDS && rc == MPI_SUCCESS; g++) {
        if (!c->consecutive) break;   // zero_init refuses the hierarchical switches then
        rc = MPI_Comm_split(ch->comm, colors[g], c->rank, &ch->group[g]);
        if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(ch->group[g], MPI_ERRORS_RETURN);
        if (rc != MPI_SUCCESS)
            fprintf(stderr, "zero: rank %d: splitting a stream's communicator into %s groups failed: %s\n", c->rank,
                    zero_group_name((ZeroGroup)g), mpi_err(rc, eb));
    }
    zero_coll_end(c);
    if (rc != MPI_SUCCESS) {
        zero_comm_channel_close(c, ch);
        return NULL;
    }
    return ch;
}

void zero_comm_channel_close(ZeroComm *c, ZeroChannel *ch) {
    (void)c;
    if (!ch) return;
    for (int g = 1; g < ZERO_GROUP_KINDS; g++)
        if (ch->group[g] != MPI_COMM_NULL) MPI_Comm_free(&ch->group[g]);
    if (ch->comm != MPI_COMM_NULL) MPI_Comm_free(&ch->comm);
    free(ch);
}

int zero_comm_share_blob(ZeroComm *c, void *blob, size_t bytes, const char *what) {
    if (c->world == 1) return 0;
    if (!c->mpi) {
        const char *tcp = getenv("ZERO_BOOTSTRAP_TCP"), *file = getenv("ZERO_BOOTSTRAP_FILE");
        if (tcp && *tcp && file && *file) {   // ranks given only one of them would wait for the others
            fprintf(stderr, "zero: rank %d: both ZERO_BOOTSTRAP_TCP=%s and ZERO_BOOTSTRAP_FILE=%s are set: give every "
                    "rank one of them\n", c->rank, tcp, file);
            return -1;
        }
        if (tcp && *tcp) return zero_share_blob_tcp(c, tcp, blob, bytes, what);
        if (file && *file) return zero_share_blob_file(c, file, blob, bytes, what);
        fprintf(stderr, "zero: rank %d: sharing %s across WORLD_SIZE=%d ranks without MPI needs ZERO_BOOTSTRAP_TCP "
                "(host:port of rank 0) or ZERO_BOOTSTRAP_FILE (a fresh path on a file system every rank sees), and "
                "ZERO_BOOTSTRAP_SECRET\n", c->rank, what, c->world);
        return -1;
    }
    if (bytes > INT_MAX) {
        fprintf(stderr, "zero: rank %d: %s is %zu bytes, too large to broadcast\n", c->rank, what, bytes);
        return -1;
    }
    char eb[MPI_MAX_ERROR_STRING];
    zero_coll_begin(c, ZERO_COLL_BROADCAST, c->rank == 0 ? bytes : 0, what);
    int rc = MPI_Bcast(blob, (int)bytes, MPI_BYTE, 0, c->mpi->world);
    zero_coll_end(c);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "zero: rank %d: MPI_Bcast of %s (%zu bytes) failed: %s\n", c->rank, what, bytes, mpi_err(rc, eb));
        return -1;
    }
    return 0;
}

// Checks shared by the collectives: an MPI world (or a world of one), counts that fit int.
static void check_parts(ZeroComm *c, const ZeroCollPart *parts, int nparts, const char *op, const char *what) {
    if (!c->mpi && c->world > 1)
        comm_fail(c, "%s of %s: WORLD_SIZE=%d without an MPI launcher; host collectives need mpirun or srun",
                  op, what, c->world);
    for (int i = 0; i < nparts; i++)
        if (parts[i].count > (size_t)INT_MAX)
            comm_fail(c, "%s of %s: %zu elements per rank exceed MPI's int count", op, what, parts[i].count);
}

static MPI_Comm channel_comm(ZeroComm *c, ZeroChannel *ch, ZeroGroup g, const char *op, const char *what) {
    if (g == ZERO_GROUP_WORLD) return ch && ch->comm != MPI_COMM_NULL ? ch->comm : c->mpi->world;
    if (!ch || ch->group[g] == MPI_COMM_NULL)
        comm_fail(c, "%s of %s in the %s group: no such communicator (%s)", op, what, zero_group_name(g),
                  !ch ? "the world channel has none" : "the ranks of a node are not consecutive");
    return ch->group[g];
}

void zero_mpi_all_gather(ZeroComm *c, ZeroChannel *ch, ZeroGroup g, const ZeroCollPart *parts, int nparts,
                         ZeroDType dt, const char *what) {
    check_parts(c, parts, nparts, "all_gather", what);
    size_t es = zero_dtype_size(dt);
    uint64_t per_peer = 0;
    for (int i = 0; i < nparts; i++) per_peer += parts[i].count * es;
    const int size = zero_group_size(c, g), index = zero_group_index(c, g);
    zero_coll_begin_group(c, g, ZERO_COLL_ALL_GATHER, per_peer, what);
    for (int i = 0; i < nparts; i++) {
        const ZeroCollPart *p = &parts[i];
        if (p->count == 0) continue;
        char *mine = (char *)p->recv + (size_t)index * p->count * es;
        if (size == 1) {
            if (p->send != mine) memmove(mine, p->send, p->count * es);
            continue;
        }
        int rc;
        if (p->send == mine)
            rc = MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, p->recv, (int)p->count, mpi_type(dt),
                               channel_comm(c, ch, g, "all_gather", what));
        else
            rc = MPI_Allgather(p->send, (int)p->count, mpi_type(dt), p->recv, (int)p->count, mpi_type(dt),
                               channel_comm(c, ch, g, "all_gather", what));
        if (rc != MPI_SUCCESS) {
            char eb[MPI_MAX_ERROR_STRING];
            comm_fail(c, "MPI_Allgather of %s in the %s group (part %d, %zu elements per rank) failed: %s", what,
                      zero_group_name(g), i, p->count, mpi_err(rc, eb));
        }
    }
    zero_coll_end(c);
}

// MPI has no bf16: a sum of two bf16 buffers, each addition in fp32 rounded back to nearest
// even (what a ring of bf16 buffers does at every hop).
static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = quant_f32_to_bf16(quant_bf16_to_f32(a[i]) + quant_bf16_to_f32(b[i]));
}
static MPI_Op bf16_sum_op;
static void bf16_sum_create(void) { MPI_Op_create(bf16_sum, 1, &bf16_sum_op); }

// The two collectives whose send holds a slice per member: all-to-all (slice q to member q)
// and reduce-scatter (slice q of every member summed at member q).
static void sliced(ZeroComm *c, ZeroChannel *ch, ZeroGroup g, const ZeroCollPart *parts, int nparts, ZeroDType dt,
                   ZeroCollOp op, const char *what) {
    const char *name = zero_coll_name(op);
    check_parts(c, parts, nparts, name, what);
    if (op == ZERO_COLL_REDUCE_SCATTER && dt == ZERO_U8) comm_fail(c, "reduce_scatter of %s: raw bytes cannot be summed", what);
    size_t es = zero_dtype_size(dt);
    uint64_t per_peer = 0;
    for (int i = 0; i < nparts; i++) per_peer += parts[i].count * es;
    const int size = zero_group_size(c, g);
    // MPI_Reduce_scatter_block's implementations (Open MPI's among them) count the whole send
    // buffer, count x members, in an int: a larger one would overflow inside MPI
    for (int i = 0; i < nparts && op == ZERO_COLL_REDUCE_SCATTER && size > 1; i++)
        if (parts[i].count > (size_t)INT_MAX / (size_t)size)
            comm_fail(c, "reduce_scatter of %s in the %s group (part %d): %zu elements per rank x %d ranks = %zu exceed "
                      "MPI's int count (MPI_Reduce_scatter_block counts the whole send buffer in an int)",
                      what, zero_group_name(g), i, parts[i].count, size, parts[i].count * (size_t)size);
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (size > 1 && op == ZERO_COLL_REDUCE_SCATTER && dt == ZERO_BF16) pthread_once(&once, bf16_sum_create);
    zero_coll_begin_group(c, g, op, per_peer, what);
    for (int i = 0; i < nparts; i++) {
        const ZeroCollPart *p = &parts[i];
        if (p->count == 0) continue;
        if (size == 1) {
            if (p->send != p->recv) memmove(p->recv, p->send, p->count * es);
            continue;
        }
        MPI_Comm comm = channel_comm(c, ch, g, name, what);
        int rc = op == ZERO_COLL_ALL_TO_ALL
                     ? MPI_Alltoall(p->send, (int)p->count, mpi_type(dt), p->recv, (int)p->count, mpi_type(dt), comm)
                     : MPI_Reduce_scatter_block(p->send, p->recv, (int)p->count, mpi_type(dt),
                                                dt == ZERO_BF16 ? bf16_sum_op : MPI_SUM, comm);
        if (rc != MPI_SUCCESS) {
            char eb[MPI_MAX_ERROR_STRING];
            comm_fail(c, "%s of %s in the %s group (part %d, %zu elements per slice) failed: %s",
                      op == ZERO_COLL_ALL_TO_ALL ? "MPI_Alltoall" : "MPI_Reduce_scatter_block", what, zero_group_name(g), i,
                      p->count, mpi_err(rc, eb));
        }
    }
    zero_coll_end(c);
}

void zero_mpi_all_to_all(ZeroComm *c, ZeroChannel *ch, ZeroGroup g, const ZeroCollPart *parts, int nparts,
                         ZeroDType dt, const char *what) {
    sliced(c, ch, g, parts, nparts, dt, ZERO_COLL_ALL_TO_ALL, what);
}

void zero_mpi_reduce_scatter(ZeroComm *c, ZeroChannel *ch, ZeroGroup g, const ZeroCollPart *parts, int nparts,
                             ZeroDType dt, const char *what) {
    sliced(c, ch, g, parts, nparts, dt, ZERO_COLL_REDUCE_SCATTER, what);
}

void zero_mpi_allreduce_sum_f64(ZeroComm *c, double *values, int n, const char *what) {
    if (c->world == 1 || n <= 0) return;
    check_parts(c, NULL, 0, "allreduce_sum_f64", what);
    double *all = c->mpi->scratch;
    for (int base = 0; base < n; base += ALLREDUCE_CHUNK) {
        int k = n - base < ALLREDUCE_CHUNK ? n - base : ALLREDUCE_CHUNK;
        zero_coll_begin(c, ZERO_COLL_ALL_REDUCE, (uint64_t)k * sizeof(double), what);
        int rc = MPI_Allgather(values + base, k, MPI_DOUBLE, all, k, MPI_DOUBLE, c->mpi->world);
        zero_coll_end(c);
        if (rc != MPI_SUCCESS) {
            char eb[MPI_MAX_ERROR_STRING];
            comm_fail(c, "all-reduce of %s (%d doubles) failed in MPI_Allgather: %s", what, k, mpi_err(rc, eb));
        }
        // rank order, so every rank gets the same bits
        for (int i = 0; i < k; i++) {
            double s = all[i];
            for (int q = 1; q < c->world; q++) s += all[(size_t)q * k + i];
            values[base + i] = s;
        }
    }
}

void zero_mpi_gather_f64(ZeroComm *c, const double *values, int n, double *all, const char *what) {
    if (n <= 0) return;
    if (c->world == 1) {
        if (all != values) memmove(all, values, (size_t)n * sizeof(double));
        return;
    }
    check_parts(c, NULL, 0, "gather_f64", what);
    zero_coll_begin_to_root(c, ZERO_COLL_GATHER, (uint64_t)n * sizeof(double), what);
    int rc = MPI_Gather(values, n, MPI_DOUBLE, all, n, MPI_DOUBLE, 0, c->mpi->world);
    zero_coll_end(c);
    if (rc != MPI_SUCCESS) {
        char eb[MPI_MAX_ERROR_STRING];
        comm_fail(c, "gather of %s (%d doubles per rank to rank 0) failed in MPI_Gather: %s", what, n, mpi_err(rc, eb));
    }
}
