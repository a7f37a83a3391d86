// a2a_plan.c: the all-to-all's call order and groups (a2a_plan.h).
#include "a2a_plan.h"

void zero_a2a_plan(int world, int rank, const ZeroCollPart *parts, int nparts, int max_calls, ZeroA2AVisit visit,
                   void *ctx) {
    int in_group = 0;
    for (int i = 0; i < nparts; i++) {
        if (parts[i].count == 0) continue;
        for (int k = 1; k < world; k++) {
            if (in_group + 2 > max_calls) {
                visit(ctx, ZERO_A2A_GROUP_END, i, -1, -1);
                in_group = 0;
            }
            if (in_group == 0) visit(ctx, ZERO_A2A_GROUP_START, i, -1, -1);
            visit(ctx, ZERO_A2A_SEND_RECV, i, (rank + k) % world, (rank - k + world) % world);
            in_group += 2;
        }
    }
    if (in_group) visit(ctx, ZERO_A2A_GROUP_END, nparts - 1, -1, -1);
}
