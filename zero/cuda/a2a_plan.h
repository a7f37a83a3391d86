/*
a2a_plan.h: the order and grouping of an all-to-all's point-to-point calls (NCCL has no
all-to-all of its own: comm_nccl.cu sends and receives one slice per peer, in groups).

NCCL takes at most 2048 calls between ncclGroupStart and ncclGroupEnd, and a send only
completes with its matching receive, so the groups must be cut the same way on every rank.
The plan: for each non-empty part in order, peer steps k = 1 .. N-1, where step k sends
slice (rank + k) mod N to that rank and receives slice (rank - k) mod N from that rank. A
group closes before it would exceed max_calls calls. Where a call lands depends only on
its place (part, k) in that sequence, the same on every rank, so rank a's send to b in
step k and b's receive from a in step k are always in the same group, at any world size.
Host C: tests check the plan without a GPU.
*/
#ifndef ZERO_A2A_PLAN_H
#define ZERO_A2A_PLAN_H

#include "../comm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { ZERO_A2A_GROUP_START, ZERO_A2A_SEND_RECV, ZERO_A2A_GROUP_END } ZeroA2AOp;

// Calls visit in plan order. SEND_RECV: send slice `to` of part `part` to rank `to` and
// receive slice `from` from rank `from` (two calls). max_calls >= 2. Nothing for N = 1.
typedef void (*ZeroA2AVisit)(void *ctx, ZeroA2AOp op, int part, int to, int from);
void zero_a2a_plan(int world, int rank, const ZeroCollPart *parts, int nparts, int max_calls, ZeroA2AVisit visit,
                   void *ctx);

#ifdef __cplusplus
}
#endif
#endif
