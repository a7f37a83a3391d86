// nccl.cpp: NCCL for communicators of one rank, as NCCL's documentation defines them:
// collectives are copies queued on their stream; a send to oneself is matched with the
// receive of the same group (ncclGroupStart/End; outside a group a rank's send to itself
// would wait forever for its receive, and is refused here). Communicators of several ranks
// (several processes) are the second emulation step and are refused by name.
#include <nccl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "emu.h"

struct ncclComm {
    int nranks = 1, rank = 0;
    bool aborted = false;
    std::string last_error;
};

namespace {

struct P2p {
    bool send;
    void *buf;
    size_t bytes;
    ncclComm *comm;
    cudaStream_t stream;
};

std::mutex g_mu;
thread_local int t_group_depth = 0;
thread_local std::vector<P2p> t_pending;   // sends and receives of the open group
thread_local std::string t_last_error;

size_t type_size(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

ncclResult_t bad(ncclComm *c, ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
ncclResult_t bad(ncclComm *c, ncclResult_t r, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    emu::say("NCCL: %s", msg);
    t_last_error = msg;
    if (c) c->last_error = msg;
    return r;
}

// The checks every call makes: not from a host function, a live communicator.
ncclResult_t entry(ncclComm *c, const char *call) {
    emu::init();
    if (emu::in_host_function())
        return bad(c, ncclInvalidUsage, "%s called from a host function (cudaLaunchHostFunc)", call);
    if (!c) return bad(c, ncclInvalidArgument, "%s with a null communicator", call);
    if (c->aborted) return bad(c, ncclInvalidUsage, "%s on an aborted communicator", call);
    return ncclSuccess;
}

ncclResult_t queue_copy(ncclComm *c, const char *call, void *dst, const void *src, size_t bytes, cudaStream_t s) {
    if (bytes == 0) return ncclSuccess;
    char what[128];
    snprintf(what, sizeof what, "%s (receive buffer)", call);
    if (!emu::check_device_range(dst, bytes, what)) return bad(c, ncclInvalidArgument, "%s: bad receive buffer", call);
    snprintf(what, sizeof what, "%s (send buffer)", call);
    if (!emu::check_device_range(src, bytes, what)) return bad(c, ncclInvalidArgument, "%s: bad send buffer", call);
    cudaError_t e = emu::enqueue(s, call, [dst, src, bytes] { memmove(dst, src, bytes); });
    if (e != cudaSuccess) return bad(c, ncclUnhandledCudaError, "%s: queuing on its stream: %s", call, cudaGetErrorName(e));
    return ncclSuccess;
}

// Matches the group's sends and receives (in order, per communicator) and queues the copies.
ncclResult_t flush_p2p() {
    std::vector<P2p> ops;
    ops.swap(t_pending);
    std::vector<bool> used(ops.size(), false);
    for (size_t i = 0; i < ops.size(); i++) {
        if (!ops[i].send) continue;
        size_t j = 0;
        for (; j < ops.size(); j++)
            if (!used[j] && !ops[j].send && ops[j].comm == ops[i].comm) break;
        if (j == ops.size())
            return bad(ops[i].comm, ncclInvalidUsage,
                       "ncclSend of %zu bytes to this rank itself has no ncclRecv in its group: it would wait forever",
                       ops[i].bytes);
        used[j] = true;
        if (ops[j].bytes != ops[i].bytes)
            return bad(ops[i].comm, ncclInvalidUsage, "ncclSend of %zu bytes matched with an ncclRecv of %zu bytes",
                       ops[i].bytes, ops[j].bytes);
        if (ops[j].stream != ops[i].stream)
            return bad(ops[i].comm, ncclInvalidUsage, "a send and its receive to oneself on different streams");
        used[i] = true;
        ncclResult_t r = queue_copy(ops[i].comm, "ncclSend/ncclRecv", ops[j].buf, ops[i].buf, ops[i].bytes, ops[i].stream);
        if (r != ncclSuccess) return r;
    }
    for (size_t j = 0; j < ops.size(); j++)
        if (!used[j])
            return bad(ops[j].comm, ncclInvalidUsage, "ncclRecv of %zu bytes from this rank itself has no ncclSend in its group",
                       ops[j].bytes);
    return ncclSuccess;
}

}  // namespace

extern "C" {

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t c) { return c ? c->last_error.c_str() : t_last_error.c_str(); }

ncclResult_t ncclGetVersion(int *v) {
    if (!v) return ncclInvalidArgument;
    *v = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    emu::init();
    if (!id) return bad(nullptr, ncclInvalidArgument, "ncclGetUniqueId with a null id");
    std::random_device rd;
    for (size_t i = 0; i < sizeof id->internal; i++) id->internal[i] = (char)rd();
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId, int rank) {
    emu::init();
    if (!comm) return bad(nullptr, ncclInvalidArgument, "ncclCommInitRank with a null comm pointer");
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return bad(nullptr, ncclInvalidArgument, "ncclCommInitRank: rank %d of %d", rank, nranks);
    if (nranks != 1)
        return bad(nullptr, ncclInvalidUsage,
                   "ncclCommInitRank with %d ranks: the emulated NCCL has communicators of one rank only (NCCL across "
                   "processes is not emulated yet)", nranks);
    *comm = new ncclComm;
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *) {
    return ncclCommInitRank(comm, nranks, id, rank);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *) {
    (void)key;
    ncclResult_t r = entry(comm, "ncclCommSplit");
    if (r != ncclSuccess) return r;
    if (!newcomm) return bad(comm, ncclInvalidArgument, "ncclCommSplit with a null result pointer");
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR) return bad(comm, ncclInvalidArgument, "ncclCommSplit: color %d", color);
    *newcomm = color == NCCL_SPLIT_NOCOLOR ? nullptr : new ncclComm;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    emu::init();
    if (emu::in_host_function()) return bad(comm, ncclInvalidUsage, "ncclCommDestroy called from a host function");
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    comm->aborted = true;   // the handle stays valid for the caller's later destroy
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err) {
    if (!comm || !err) return ncclInvalidArgument;
    *err = ncclSuccess;
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
    if (!comm || !count) return ncclInvalidArgument;
    *count = comm->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
    if (!comm || !rank) return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
    emu::init();
    t_group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
    emu::init();
    if (t_group_depth == 0) return bad(nullptr, ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--t_group_depth > 0) return ncclSuccess;
    return flush_p2p();
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclComm_t comm,
                           cudaStream_t s) {
    ncclResult_t r = entry(comm, "ncclAllGather");
    if (r != ncclSuccess) return r;
    size_t es = type_size(dt);
    if (!es) return bad(comm, ncclInvalidArgument, "ncclAllGather: data type %d", (int)dt);
    return queue_copy(comm, "ncclAllGather", recv, send, count * es, s);
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t s) {
    ncclResult_t r = entry(comm, "ncclAllReduce");
    if (r != ncclSuccess) return r;
    size_t es = type_size(dt);
    if (!es || (int)op < 0 || (int)op >= (int)ncclNumOps)
        return bad(comm, ncclInvalidArgument, "ncclAllReduce: data type %d, op %d", (int)dt, (int)op);
    return queue_copy(comm, "ncclAllReduce", recv, send, count * es, s);   // one rank: every op is the identity
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t dt, int root, ncclComm_t comm,
                           cudaStream_t s) {
    ncclResult_t r = entry(comm, "ncclBroadcast");
    if (r != ncclSuccess) return r;
    if (root != 0) return bad(comm, ncclInvalidArgument, "ncclBroadcast from root %d of a one-rank communicator", root);
    return queue_copy(comm, "ncclBroadcast", recv, send, count * type_size(dt), s);
}

static ncclResult_t p2p(bool is_send, void *buf, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                        cudaStream_t s) {
    const char *call = is_send ? "ncclSend" : "ncclRecv";
    ncclResult_t r = entry(comm, call);
    if (r != ncclSuccess) return r;
    size_t es = type_size(dt);
    if (!es) return bad(comm, ncclInvalidArgument, "%s: data type %d", call, (int)dt);
    if (peer != 0) return bad(comm, ncclInvalidArgument, "%s to peer %d of a one-rank communicator", call, peer);
    if (t_group_depth == 0)
        return bad(comm, ncclInvalidUsage,
                   "%s to this rank itself outside ncclGroupStart/End: it would wait forever for its partner", call);
    t_pending.push_back(P2p{is_send, buf, count * es, comm, s});
    return ncclSuccess;
}

ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm, cudaStream_t s) {
    return p2p(true, (void *)send, count, dt, peer, comm, s);
}

ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm, cudaStream_t s) {
    return p2p(false, recv, count, dt, peer, comm, s);
}

}  // extern "C"
