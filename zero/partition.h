/*
partition.h: how one tensor is split across N ranks (ZeRO-Infinity 6.1: every tensor is
partitioned across all ranks, so every rank holds 1/N of every tensor).

The tensor is viewed as padded to N*S elements, S = roundup(ceil(numel/N), ZERO_ALIGN_ELEMS).
Rank r owns elements [r*S, min((r+1)*S, numel)) of the real tensor; the rest of its slot
is padding, always zero. Padded, equal slots are what collectives want (an all-gather of
S elements per rank lands the full tensor in place) and keep every slot aligned to 16
elements (64 bytes in fp32, 32 in bf16).
A rank past the end of a small tensor (numel < N*S) owns nothing but still holds a zero slot.
*/
#ifndef ZERO_PARTITION_H
#define ZERO_PARTITION_H

#include <stddef.h>
#include <stdint.h>

#include "zero.h"

typedef struct {
    size_t numel;    // real elements
    size_t shard;    // S: slot size per rank, a multiple of ZERO_ALIGN_ELEMS (0 if numel == 0)
    size_t padded;   // N * S
    int world;
} ZeroSplit;

// Returns 0 and fills *out, or -1 when world < 1 or the padded size overflows size_t.
int zero_split(size_t numel, int world, ZeroSplit *out);
// First real element rank r owns (clamped to numel), and how many it owns (may be 0).
size_t zero_owned_begin(const ZeroSplit *s, int rank);
size_t zero_owned_count(const ZeroSplit *s, int rank);

// Where every tensor sits in the flat buffers the plugin allocates.
typedef struct {
    ZeroSplit split;
    size_t shard_off;   // offset in a rank's shard buffers (sum of earlier S)
    size_t full_off;    // offset in full padded buffers (sum of earlier N*S)
    uint64_t global_off;// global index of element 0 (sum of earlier numel): keys rounding RNG
    size_t own_begin, own_count;  // this rank's real elements
} ZeroTensorLayout;

typedef struct {
    int num_tensors, world, rank;
    ZeroTensorLayout *t;
    size_t shard_total;   // sum of S: elements in a rank's shard buffers
    size_t padded_total;  // sum of N*S = world * shard_total
    uint64_t numel_total; // sum of numel (the real parameter count)
    size_t max_padded;    // largest N*S of any tensor
} ZeroLayout;

// Builds the layout for rank; returns 0, or -1 with a message in err (size errlen).
int zero_layout_build(ZeroLayout *l, const ZeroTensor *tensors, int num_tensors, int world,
                      int rank, char *err, size_t errlen);
void zero_layout_free(ZeroLayout *l);

#endif
