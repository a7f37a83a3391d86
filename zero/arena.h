/*
arena.h: placement of variable-size blocks inside one buffer allocated at init (ZeRO's
constant-size buffers: no allocation during training, a hard cap on what is live).

Offsets and sizes are in elements. Short-lived blocks are placed first-fit from the bottom;
long-lived ones (a tied tensor used by two units) first-fit from the top, so they do not
split the space that the bottom allocations cycle through. Deterministic: the same
sequence of calls gives the same offsets on every rank.
*/
#ifndef ZERO_ARENA_H
#define ZERO_ARENA_H

#include <stddef.h>

#define ZERO_ARENA_FULL ((size_t)-1)

typedef struct {
    size_t off, size;
} ZeroBlock;

typedef struct {
    size_t capacity;
    size_t in_use, peak;
    int n, max;          // live blocks, sorted by offset; at most max of them
    ZeroBlock *blocks;
} ZeroArena;

int zero_arena_init(ZeroArena *a, size_t capacity, int max_blocks);  // 0, or -1: out of memory
void zero_arena_free_all(ZeroArena *a);                                // releases the block table
// Returns the offset of a new block of size > 0, or ZERO_ARENA_FULL.
size_t zero_arena_alloc(ZeroArena *a, size_t size, int from_top);
// Places a block of size > 0 at off: returns off, or ZERO_ARENA_FULL when it would overlap a
// live block or pass the end.
size_t zero_arena_place(ZeroArena *a, size_t off, size_t size);
// Returns 0, or -1 if no block starts at off.
int zero_arena_release(ZeroArena *a, size_t off);

#endif
