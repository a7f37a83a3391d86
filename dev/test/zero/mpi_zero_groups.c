/*
mpi_zero_groups.c: collectives inside the ZeRO++ groups (zero/comm.h's ZeroGroup: world,
node, across, hpz) on the host backend's streams, each with its own channel of MPI
sub-communicators, at every layout of the world (each node size and each hpZ size that
divides it), against zero_group_cases.h, which works the groups out by rank arithmetic:
  - zero_group_size / index / member;
  - all_gather (out of place and in place) and all_to_all in each group, fp32, bf16 and u8,
    several parts with a 0-element one: each element, tagged with its sender, receiver and
    place, lands where it should;
  - comm->sent after each collective: one call, and the intra- and inter-node bytes of the
    members on this rank's node and off it;
  - zero_comm_set_layout refuses a node size or an hpZ size that does not divide the world
    with a message naming it and the world, and leaves the layout as it was.
Launch with mpirun -np N (dev/test/zero/test_zero_groups.sh). Ends with the line
"mpi_zero_groups: N ranks, P checks passed, F failed" (all ranks together).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../../zero/backend.h"
#include "../../../zero/host/backend_host.h"
#include "../../../zero/comm.h"

#include "zero_group_cases.h"
#include "zero_toy_model.h"   // check(), rank_g

static const ZeroDType dtypes[3] = {ZERO_F32, ZERO_BF16, ZERO_U8};
static const size_t counts[] = {7, 0, 333, 1, 64};   // one part of none, odd sizes
static const size_t one[] = {1};

typedef struct {
    ZeroComm *c;
    const ZeroBackend *b;
    ZeroStream *s;
    GcLayout L;
    int *members;   // world entries
} Ctx;

static ZeroCollBytes sent_now(const ZeroComm *c, ZeroCollOp op) {
    ZeroCollBytes x;
    x.calls = __atomic_load_n(&c->sent[op].calls, __ATOMIC_RELAXED);
    x.intra_bytes = __atomic_load_n(&c->sent[op].intra_bytes, __ATOMIC_RELAXED);
    x.inter_bytes = __atomic_load_n(&c->sent[op].inter_bytes, __ATOMIC_RELAXED);
    return x;
}

// The counters moved by one call and this rank's share of bytes_per_peer to each member.
static void check_bytes(Ctx *x, ZeroGroup g, ZeroCollOp op, ZeroCollBytes before, uint64_t bytes_per_peer,
                        const char *what) {
    ZeroCollBytes after = sent_now(x->c, op);
    uint64_t intra, inter;
    gc_bytes(x->L, g, x->c->rank, bytes_per_peer, &intra, &inter);
    check(after.calls - before.calls == 1 && after.intra_bytes - before.intra_bytes == intra &&
              after.inter_bytes - before.inter_bytes == inter,
          "node size %d, hpz %d, %s group, %s: counted %llu calls, %llu intra and %llu inter bytes; expected 1, %llu, %llu",
          x->L.node_size, x->L.hpz, zero_group_name(g), what, (unsigned long long)(after.calls - before.calls),
          (unsigned long long)(after.intra_bytes - before.intra_bytes),
          (unsigned long long)(after.inter_bytes - before.inter_bytes), (unsigned long long)intra,
          (unsigned long long)inter);
}

static void gather_case(Ctx *x, ZeroGroup g, ZeroDType dt, GcShape S, int in_place) {
    int index = -1, n = gc_members(x->L, g, x->c->rank, x->members, &index);
    size_t es = zero_dtype_size(dt), total = gc_total(S);
    char *send = malloc(total * es + 1), *recv = malloc(total * (size_t)n * es + 1);
    ZeroCollPart *parts = malloc((size_t)S.nparts * sizeof *parts);
    memset(recv, 0xA5, total * (size_t)n * es);   // what was there before must not survive
    if (in_place) gc_gather_place(recv, dt, S, n, index, x->c->rank);
    else gc_gather_send(send, dt, S, x->c->rank);
    size_t so = 0, ro = 0;
    for (int k = 0; k < S.nparts; k++) {
        parts[k].recv = recv + ro * es;
        parts[k].send = in_place ? recv + (ro + (size_t)index * S.counts[k]) * es : send + so * es;
        parts[k].count = S.counts[k];
        so += S.counts[k];
        ro += S.counts[k] * (size_t)n;
    }
    char what[96], why[256];
    snprintf(what, sizeof what, "all_gather (%s, %d parts, %s)", gc_dtype_name(dt), S.nparts,
             in_place ? "in place" : "out of place");
    ZeroCollBytes before = sent_now(x->c, ZERO_COLL_ALL_GATHER);
    x->b->all_gather(x->b, x->c, g, parts, S.nparts, dt, x->s, what);
    x->b->stream_sync(x->b, x->s);
    check(!gc_gather_wrong(recv, dt, S, x->members, n, why, sizeof why), "node size %d, hpz %d, %s group, %s: %s",
          x->L.node_size, x->L.hpz, zero_group_name(g), what, why);
    check_bytes(x, g, ZERO_COLL_ALL_GATHER, before, total * es, what);
    free(send); free(recv); free(parts);
}

static void a2a_case(Ctx *x, ZeroGroup g, ZeroDType dt, GcShape S) {
    int index = -1, n = gc_members(x->L, g, x->c->rank, x->members, &index);
    size_t es = zero_dtype_size(dt), total = gc_total(S) * (size_t)n;
    char *send = malloc(total * es + 1), *recv = malloc(total * es + 1);
    ZeroCollPart *parts = malloc((size_t)S.nparts * sizeof *parts);
    memset(recv, 0xA5, total * es);
    gc_a2a_send(send, dt, S, x->members, n, x->c->rank);
    size_t o = 0;
    for (int k = 0; k < S.nparts; k++) {
        parts[k] = (ZeroCollPart){send + o * es, recv + o * es, S.counts[k]};
        o += S.counts[k] * (size_t)n;
    }
    char what[96], why[256];
    snprintf(what, sizeof what, "all_to_all (%s, %d parts)", gc_dtype_name(dt), S.nparts);
    ZeroCollBytes before = sent_now(x->c, ZERO_COLL_ALL_TO_ALL);
    x->b->all_to_all(x->b, x->c, g, parts, S.nparts, dt, x->s, what);
    x->b->stream_sync(x->b, x->s);
    check(!gc_a2a_wrong(recv, dt, S, x->members, n, x->c->rank, why, sizeof why), "node size %d, hpz %d, %s group, %s: %s",
          x->L.node_size, x->L.hpz, zero_group_name(g), what, why);
    check_bytes(x, g, ZERO_COLL_ALL_TO_ALL, before, gc_total(S) * es, what);
    free(send); free(recv); free(parts);
}

// Every group's geometry and collectives at one layout, on a stream opened after it.
static void run_layout(Ctx *x, int node_size, int hpz) {
    ZeroComm *c = x->c;
    x->L = (GcLayout){c->world, node_size, hpz};
    int rc = zero_comm_set_layout(c, node_size, hpz);
    check(rc == 0, "zero_comm_set_layout(node size %d, hpz %d) at world %d refused", node_size, hpz, c->world);
    if (rc != 0) return;
    for (int gi = 0; gi < ZERO_GROUP_KINDS; gi++) {
        ZeroGroup g = gc_groups[gi];
        int index = -1, n = gc_members(x->L, g, c->rank, x->members, &index);
        check(zero_group_size(c, g) == n && zero_group_index(c, g) == index,
              "node size %d, hpz %d, %s group: size %d and index %d; expected %d and %d", node_size, hpz,
              zero_group_name(g), zero_group_size(c, g), zero_group_index(c, g), n, index);
        int bad = -1;
        for (int i = 0; i < n && bad < 0; i++)
            if (zero_group_member(c, g, i) != x->members[i]) bad = i;
        check(bad < 0, "node size %d, hpz %d, %s group: member %d is rank %d; expected rank %d", node_size, hpz,
              zero_group_name(g), bad, bad < 0 ? 0 : zero_group_member(c, g, bad), bad < 0 ? 0 : x->members[bad]);
    }
    x->s = x->b->stream_create(x->b);
    check(x->s != NULL, "node size %d, hpz %d: stream_create failed", node_size, hpz);
    if (!x->s) return;
    GcShape many = {(int)(sizeof counts / sizeof counts[0]), counts}, single = {1, one};
    for (int gi = 0; gi < ZERO_GROUP_KINDS; gi++)
        for (int d = 0; d < 3; d++) {
            gather_case(x, gc_groups[gi], dtypes[d], many, 0);
            gather_case(x, gc_groups[gi], dtypes[d], many, 1);
            a2a_case(x, gc_groups[gi], dtypes[d], many);
        }
    for (int gi = 0; gi < ZERO_GROUP_KINDS; gi++) {
        gather_case(x, gc_groups[gi], ZERO_BF16, single, 1);
        a2a_case(x, gc_groups[gi], ZERO_U8, single);
    }
    x->b->stream_destroy(x->b, x->s);
    x->s = NULL;
}

// zero_comm_set_layout with stderr caught in a temporary file: its result and what it printed.
static int set_layout_caught(ZeroComm *c, int node_size, int hpz, char *out, size_t cap) {
    fflush(stderr);
    FILE *tmp = tmpfile();
    int saved = dup(2);
    if (!tmp || saved < 0) { fprintf(stderr, "FAIL rank %d: no temporary file for stderr\n", c->rank); exit(1); }
    dup2(fileno(tmp), 2);
    int rc = zero_comm_set_layout(c, node_size, hpz);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(out, 1, cap - 1, tmp);
    out[n] = 0;
    fclose(tmp);
    return rc;
}

// A refused layout says which size and world, and the layout in force stays.
static void refusal(ZeroComm *c, int node_size, int hpz, const char *words, int bad) {
    int sizes[ZERO_GROUP_KINDS];
    for (int g = 0; g < ZERO_GROUP_KINDS; g++) sizes[g] = zero_group_size(c, gc_groups[g]);
    int was_node = c->node_size, was_hpz = c->hpz_size;
    char msg[1024], want[160];
    int rc = set_layout_caught(c, node_size, hpz, msg, sizeof msg);
    snprintf(want, sizeof want, "rank %d: %s %d does not divide world size %d", c->rank, words, bad, c->world);
    check(rc == -1 && strstr(msg, want), "set_layout(node size %d, hpz %d) at world %d: returned %d, printed \"%s\"; "
          "expected -1 and \"%s\"", node_size, hpz, c->world, rc, msg, want);
    int same = c->node_size == was_node && c->hpz_size == was_hpz;
    for (int g = 0; g < ZERO_GROUP_KINDS; g++) same &= zero_group_size(c, gc_groups[g]) == sizes[g];
    check(same, "set_layout(node size %d, hpz %d) at world %d changed the layout it refused", node_size, hpz, c->world);
}

int main(int argc, char **argv) {
    ZeroComm *comm = zero_comm_init(&argc, &argv);
    if (!comm) return 1;
    rank_g = comm->rank;
    const ZeroBackend *b = zero_backend_host(comm);
    if (!b) return 1;
    Ctx x = {comm, b, NULL, {0, 0, 0}, malloc((size_t)comm->world * sizeof(int))};
    const int W = comm->world;
    for (int ns = 1; ns <= W; ns++)
        for (int h = 1; h <= W; h++)
            if (W % ns == 0 && W % h == 0) run_layout(&x, ns, h);
    // the last layout stays in force through the refusals
    refusal(comm, W + 1, 1, "node size", W + 1);
    refusal(comm, 1, W + 1, "hpZ partition size", W + 1);
    for (int d = 2; d < W; d++)
        if (W % d != 0) {
            refusal(comm, d, 1, "node size", d);
            refusal(comm, 1, d, "hpZ partition size", d);
        }
    free(x.members);
    double f[2] = {(double)fails, (double)passes};   // every rank learns whether any failed
    zero_mpi_allreduce_sum_f64(comm, f, 2, "test summary");
    if (comm->rank == 0) printf("mpi_zero_groups: %d ranks, %.0f checks passed, %.0f failed\n", W, f[1], f[0]);
    zero_backend_host_free(b);
    zero_comm_free(comm);
    return f[0] > 0 ? 1 : 0;
}
