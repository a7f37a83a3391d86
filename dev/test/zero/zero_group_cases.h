/*
zero_group_cases.h: what a collective inside a ZeRO++ group (zero/comm.h's ZeroGroup) must
deliver, worked out from the layout alone (world, node size, hpZ size) and not from zero/'s
own group functions: a group's members in index order, tagged elements, the expected
result of an all-gather and an all-to-all, and the bytes counted intra- and inter-node.
mpi_zero_groups.c checks the host backend with it, gpu_zero_toy.c the CUDA backend.
Header-only; host buffers only (the GPU test copies to and from the device).

Each element is tagged by (part, sending rank, receiving rank or GC_ANY, position) through
a hash, so a slice from the wrong member, at the wrong place or of the wrong part shows as
a wrong value. The tag is stored as a value the dtype holds exactly: fp32 an integer below
2^24, bf16 a bit pattern below 0x7F00 (never a NaN), u8 a byte.
*/
#ifndef ZERO_GROUP_CASES_H
#define ZERO_GROUP_CASES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../../../zero/comm.h"

#define GC_ANY 0xFFFF   // the receiver of an all-gather's elements: every member

typedef struct {
    int world, node_size, hpz;   // node_size > 0: logical nodes of consecutive ranks; hpz >= 1
} GcLayout;

static const ZeroGroup gc_groups[ZERO_GROUP_KINDS] = {ZERO_GROUP_WORLD, ZERO_GROUP_NODE, ZERO_GROUP_ACROSS,
                                                      ZERO_GROUP_HPZ};

// 1 when ranks a and b are in one group g: the definitions of comm.h, by rank arithmetic.
static inline int gc_together(GcLayout L, ZeroGroup g, int a, int b) {
    switch (g) {
    case ZERO_GROUP_NODE: return a / L.node_size == b / L.node_size;
    case ZERO_GROUP_ACROSS: return a % L.node_size == b % L.node_size;
    case ZERO_GROUP_HPZ: return a / L.hpz == b / L.hpz;
    default: return 1;
    }
}

// The members of rank's group g in index order (ascending rank: the order a split keyed by
// rank gives); returns their number and sets *index to rank's place among them.
static inline int gc_members(GcLayout L, ZeroGroup g, int rank, int *members, int *index) {
    int n = 0;
    for (int r = 0; r < L.world; r++) {
        if (!gc_together(L, g, rank, r)) continue;
        if (r == rank) *index = n;
        members[n++] = r;
    }
    return n;
}

// What rank sends in a collective of group g with bytes_per_peer to each other member:
// the members on its own (logical) node count as intra, the others as inter.
static inline void gc_bytes(GcLayout L, ZeroGroup g, int rank, uint64_t bytes_per_peer, uint64_t *intra,
                            uint64_t *inter) {
    *intra = *inter = 0;
    for (int r = 0; r < L.world; r++) {
        if (r == rank || !gc_together(L, g, rank, r)) continue;
        if (r / L.node_size == rank / L.node_size) *intra += bytes_per_peer;
        else *inter += bytes_per_peer;
    }
}

static inline const char *gc_dtype_name(ZeroDType dt) { return dt == ZERO_U8 ? "u8" : dt == ZERO_BF16 ? "bf16" : "fp32"; }

// The element bits of (part, from, to, i) in dtype dt.
static inline uint32_t gc_tag(ZeroDType dt, int part, int from, int to, size_t i) {
    uint64_t x = ((uint64_t)part << 48) ^ ((uint64_t)from << 32) ^ ((uint64_t)to << 16) ^ (uint64_t)i;
    x ^= x >> 31;   // splitmix64's finalizer: nearby tags differ in every bit
    x *= 0x7fb5d329728ea185ull;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dull;
    x ^= x >> 33;
    if (dt == ZERO_U8) return (uint32_t)(x & 0xFF);
    if (dt == ZERO_BF16) return (uint32_t)(x % 0x7F00);
    float f = (float)(x & 0xFFFFFF);
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline void gc_put(void *buf, ZeroDType dt, size_t at, uint32_t bits) {
    if (dt == ZERO_U8) ((uint8_t *)buf)[at] = (uint8_t)bits;
    else if (dt == ZERO_BF16) { uint16_t h = (uint16_t)bits; memcpy((char *)buf + at * 2, &h, 2); }
    else memcpy((char *)buf + at * 4, &bits, 4);
}

static inline uint32_t gc_get(const void *buf, ZeroDType dt, size_t at) {
    if (dt == ZERO_U8) return ((const uint8_t *)buf)[at];
    if (dt == ZERO_BF16) { uint16_t h; memcpy(&h, (const char *)buf + at * 2, 2); return h; }
    uint32_t u;
    memcpy(&u, (const char *)buf + at * 4, 4);
    return u;
}

// A collective's shape: nparts parts of counts[k] elements per member.
typedef struct {
    int nparts;
    const size_t *counts;
} GcShape;

static inline size_t gc_total(GcShape S) {
    size_t t = 0;
    for (int k = 0; k < S.nparts; k++) t += S.counts[k];
    return t;
}

// all_gather. The buffers hold the parts back to back: send gc_total elements, recv n times
// that (part k: n slices of counts[k]). gc_gather_send fills rank's contribution;
// gc_gather_place puts it at its slot of recv instead (the in-place form).
static inline void gc_gather_send(void *send, ZeroDType dt, GcShape S, int rank) {
    size_t o = 0;
    for (int k = 0; k < S.nparts; k++)
        for (size_t i = 0; i < S.counts[k]; i++) gc_put(send, dt, o++, gc_tag(dt, k, rank, GC_ANY, i));
}

static inline void gc_gather_place(void *recv, ZeroDType dt, GcShape S, int n, int index, int rank) {
    size_t o = 0;
    for (int k = 0; k < S.nparts; k++) {
        for (size_t i = 0; i < S.counts[k]; i++)
            gc_put(recv, dt, o + (size_t)index * S.counts[k] + i, gc_tag(dt, k, rank, GC_ANY, i));
        o += S.counts[k] * (size_t)n;
    }
}

// 0 when recv holds every member's contribution in index order; else 1 and why in msg.
static inline int gc_gather_wrong(const void *recv, ZeroDType dt, GcShape S, const int *members, int n, char *msg,
                                  size_t cap) {
    size_t o = 0;
    for (int k = 0; k < S.nparts; k++) {
        for (int q = 0; q < n; q++)
            for (size_t i = 0; i < S.counts[k]; i++) {
                uint32_t want = gc_tag(dt, k, members[q], GC_ANY, i);
                uint32_t got = gc_get(recv, dt, o + (size_t)q * S.counts[k] + i);
                if (got != want) {
                    snprintf(msg, cap, "part %d slice %d (from rank %d) element %zu: bits %#x, expected %#x", k, q,
                             members[q], i, got, want);
                    return 1;
                }
            }
        o += S.counts[k] * (size_t)n;
    }
    return 0;
}

// all_to_all. send and recv: part k is n slices of counts[k]; send slice r goes to member r.
static inline void gc_a2a_send(void *send, ZeroDType dt, GcShape S, const int *members, int n, int rank) {
    size_t o = 0;
    for (int k = 0; k < S.nparts; k++)
        for (int r = 0; r < n; r++)
            for (size_t i = 0; i < S.counts[k]; i++) gc_put(send, dt, o++, gc_tag(dt, k, rank, members[r], i));
}

// 0 when recv slice q of every part is what member q sent to rank; else 1 and why in msg.
static inline int gc_a2a_wrong(const void *recv, ZeroDType dt, GcShape S, const int *members, int n, int rank,
                               char *msg, size_t cap) {
    size_t o = 0;
    for (int k = 0; k < S.nparts; k++)
        for (int q = 0; q < n; q++)
            for (size_t i = 0; i < S.counts[k]; i++, o++) {
                uint32_t want = gc_tag(dt, k, members[q], rank, i), got = gc_get(recv, dt, o);
                if (got != want) {
                    snprintf(msg, cap, "part %d slice %d (from rank %d) element %zu: bits %#x, expected %#x", k, q,
                             members[q], i, got, want);
                    return 1;
                }
            }
    return 0;
}

#endif
