// arena.c: first-fit placement in a fixed buffer (see arena.h). The block table is a
// small sorted array (at most one block per tensor), so linear scans are fine.
#include "arena.h"

#include <stdlib.h>
#include <string.h>

int zero_arena_init(ZeroArena *a, size_t capacity, int max_blocks) {
    memset(a, 0, sizeof *a);
    a->capacity = capacity;
    a->max = max_blocks > 0 ? max_blocks : 1;
    a->blocks = malloc((size_t)a->max * sizeof(ZeroBlock));
    return a->blocks ? 0 : -1;
}

void zero_arena_free_all(ZeroArena *a) {
    free(a->blocks);
    a->blocks = NULL;
    a->n = 0;
}

static void insert_at(ZeroArena *a, int i, size_t off, size_t size) {
    memmove(&a->blocks[i + 1], &a->blocks[i], (size_t)(a->n - i) * sizeof(ZeroBlock));
    a->blocks[i].off = off;
    a->blocks[i].size = size;
    a->n++;
    a->in_use += size;
    if (a->in_use > a->peak) a->peak = a->in_use;
}

size_t zero_arena_alloc(ZeroArena *a, size_t size, int from_top) {
    if (size == 0 || size > a->capacity || a->n == a->max) return ZERO_ARENA_FULL;
    if (!from_top) {
        // gap i lies between block i-1 and block i
        size_t lo = 0;
        for (int i = 0; i <= a->n; i++) {
            size_t hi = i < a->n ? a->blocks[i].off : a->capacity;
            if (hi - lo >= size) { insert_at(a, i, lo, size); return lo; }
            if (i < a->n) lo = a->blocks[i].off + a->blocks[i].size;
        }
    } else {
        size_t hi = a->capacity;
        for (int i = a->n; i >= 0; i--) {
            size_t lo = i > 0 ? a->blocks[i - 1].off + a->blocks[i - 1].size : 0;
            if (hi - lo >= size) { insert_at(a, i, hi - size, size); return hi - size; }
            if (i > 0) hi = a->blocks[i - 1].off;
        }
    }
    return ZERO_ARENA_FULL;
}

size_t zero_arena_place(ZeroArena *a, size_t off, size_t size) {
    if (size == 0 || size > a->capacity || off > a->capacity - size || a->n == a->max) return ZERO_ARENA_FULL;
    int i = 0;   // the first block that ends after off
    while (i < a->n && a->blocks[i].off + a->blocks[i].size <= off) i++;
    if (i < a->n && a->blocks[i].off < off + size) return ZERO_ARENA_FULL;
    insert_at(a, i, off, size);
    return off;
}

int zero_arena_release(ZeroArena *a, size_t off) {
    for (int i = 0; i < a->n; i++) {
        if (a->blocks[i].off != off) continue;
        a->in_use -= a->blocks[i].size;
        memmove(&a->blocks[i], &a->blocks[i + 1], (size_t)(a->n - i - 1) * sizeof(ZeroBlock));
        a->n--;
        return 0;
    }
    return -1;
}
