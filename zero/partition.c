// partition.c: the padded, aligned per-tensor split (see partition.h).
#include "partition.h"

#include <stdio.h>
#include <stdlib.h>

int zero_split(size_t numel, int world, ZeroSplit *out) {
    if (world < 1) return -1;
    size_t n = (size_t)world;
    // ceil(numel / N) without the overflow of numel + N - 1
    size_t per = numel / n + (numel % n != 0);
    size_t a = ZERO_ALIGN_ELEMS;
    if (per > SIZE_MAX - (a - 1)) return -1;
    size_t shard = (per + a - 1) / a * a;
    if (shard != 0 && n > SIZE_MAX / shard) return -1;
    out->numel = numel;
    out->shard = shard;
    out->padded = shard * n;
    out->world = world;
    return 0;
}

size_t zero_owned_begin(const ZeroSplit *s, int rank) {
    size_t b = (size_t)rank * s->shard;
    return b < s->numel ? b : s->numel;
}

size_t zero_owned_count(const ZeroSplit *s, int rank) {
    size_t b = zero_owned_begin(s, rank);
    size_t e = b + s->shard;
    if (e > s->numel) e = s->numel;
    return e - b;
}

int zero_layout_build(ZeroLayout *l, const ZeroTensor *tensors, int num_tensors, int world,
                      int rank, char *err, size_t errlen) {
    l->t = NULL;
    if (num_tensors < 1 || world < 1 || rank < 0 || rank >= world) {
        snprintf(err, errlen, "bad layout request: %d tensors, world %d, rank %d",
                 num_tensors, world, rank);
        return -1;
    }
    l->t = calloc((size_t)num_tensors, sizeof(ZeroTensorLayout));
    if (!l->t) { snprintf(err, errlen, "out of host memory for the tensor layout"); return -1; }
    l->num_tensors = num_tensors;
    l->world = world;
    l->rank = rank;
    l->shard_total = l->padded_total = l->max_padded = 0;
    l->numel_total = 0;
    for (int i = 0; i < num_tensors; i++) {
        ZeroTensorLayout *t = &l->t[i];
        if (zero_split(tensors[i].numel, world, &t->split) != 0 ||
            l->padded_total > SIZE_MAX - t->split.padded) {
            snprintf(err, errlen, "tensor %d (%s): %zu elements overflow when padded for %d ranks",
                     i, tensors[i].name ? tensors[i].name : "?", tensors[i].numel, world);
            free(l->t);
            l->t = NULL;
            return -1;
        }
        t->shard_off = l->shard_total;
        t->full_off = l->padded_total;
        t->global_off = l->numel_total;
        t->own_begin = zero_owned_begin(&t->split, rank);
        t->own_count = zero_owned_count(&t->split, rank);
        l->shard_total += t->split.shard;
        l->padded_total += t->split.padded;
        l->numel_total += t->split.numel;
        if (t->split.padded > l->max_padded) l->max_padded = t->split.padded;
    }
    return 0;
}

void zero_layout_free(ZeroLayout *l) {
    free(l->t);
    l->t = NULL;
}
