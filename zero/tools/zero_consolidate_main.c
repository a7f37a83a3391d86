// zero_consolidate: a sharded zero/ checkpoint into one raw fp32 file plus a JSON index.
// Model-agnostic: tensors are written whole, in table order, padding left out; OUT.json
// names each tensor with its element offset and count, so a model-specific wrapper (the
// GPT-2 model-file writer) can reorder or reshape them.
//
//   zero_consolidate [--state master|m|v] CKPT_DIR STEP|latest OUT
//
// Build (no MPI): cc -std=c11 -D_GNU_SOURCE -O2 zero/tools/zero_consolidate_main.c
//   zero/io/consolidate.c zero/io/zckpt.c zero/io/zfile.c zero/partition.c -lcjson -lz
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../zero.h"
#include "../io/zfile.h"

static int usage(void) {
    fprintf(stderr, "usage: zero_consolidate [--state master|m|v] CKPT_DIR STEP|latest OUT\n"
                    "  writes OUT (raw little-endian fp32, tensors in table order) and OUT.json (names, offsets)\n");
    return 2;
}

int main(int argc, char **argv) {
    int which = 0, a = 1;
    if (a + 1 < argc && strcmp(argv[a], "--state") == 0) {
        const char *s = argv[a + 1];
        which = !strcmp(s, "master") ? 0 : !strcmp(s, "m") ? 1 : !strcmp(s, "v") ? 2 : -1;
        if (which < 0) return usage();
        a += 2;
    }
    if (argc - a != 3) return usage();
    const char *dir = argv[a], *step_arg = argv[a + 1], *out = argv[a + 2];
    int step = -1;
    if (strcmp(step_arg, "latest") != 0) {
        char *end;
        long v = strtol(step_arg, &end, 10);
        if (end == step_arg || *end || v < 0 || v > 0x7fffffff) return usage();   // "" is no step
        step = (int)v;
    }
    ZeroCheckpointInfo info;
    if (zero_checkpoint_info(dir, step, &info) != 0) {
        fprintf(stderr, "zero_consolidate: cannot read checkpoint %s step %s (see above)\n", dir, step_arg);
        return 1;
    }
    // the manifest's total is bounded when it is read (ZCK_MAX_ELEMS); the product is
    // checked all the same, so a count from a file never wraps an allocation
    size_t bytes;
    if (__builtin_mul_overflow(info.numel_total ? info.numel_total : 1, sizeof(float), &bytes)) {
        fprintf(stderr, "zero_consolidate: checkpoint %s step %lld holds %zu elements: their fp32 bytes overflow a size_t\n",
                dir, info.step, info.numel_total);
        zero_checkpoint_info_free(&info);
        return 1;
    }
    float *buf = malloc(bytes);
    char err[1024], json_path[4200];
    int failed = !buf || zero_consolidate_state(dir, (int)info.step, which, buf, info.numel_total) != 0;
    if (!buf) fprintf(stderr, "zero_consolidate: out of memory for checkpoint %s step %lld: %zu floats (%zu bytes)\n", dir,
                      info.step, info.numel_total, bytes);
    else if (failed) fprintf(stderr, "zero_consolidate: cannot consolidate checkpoint %s step %lld (see above)\n", dir, info.step);
    if (!failed && zfile_write_all(out, buf, info.numel_total * sizeof(float), NULL, err, sizeof err) != 0) {
        fprintf(stderr, "zero_consolidate: %s\n", err);
        failed = 1;
    }
    if (failed) {
        free(buf);
        zero_checkpoint_info_free(&info);
        return 1;
    }
    cJSON *root = cJSON_CreateObject(), *arr = NULL;
    static const char *states[] = {"master", "m", "v"};
    int ok = root && cJSON_AddStringToObject(root, "checkpoint", dir) && cJSON_AddNumberToObject(root, "step", (double)info.step) &&
             cJSON_AddStringToObject(root, "run_id", info.run_id) &&
             cJSON_AddNumberToObject(root, "world_size", info.world) && cJSON_AddNumberToObject(root, "stage", info.stage) &&
             cJSON_AddStringToObject(root, "state", states[which]) && cJSON_AddStringToObject(root, "dtype", "fp32") &&
             cJSON_AddNumberToObject(root, "numel_total", (double)info.numel_total) &&
             (arr = cJSON_AddArrayToObject(root, "tensors"));
    size_t off = 0;
    for (int i = 0; ok && i < info.num_tensors; i++) {
        cJSON *e = cJSON_CreateObject();
        ok = e && cJSON_AddItemToArray(arr, e) && cJSON_AddStringToObject(e, "name", info.names[i]) &&
             cJSON_AddNumberToObject(e, "offset", (double)off) && cJSON_AddNumberToObject(e, "numel", (double)info.numel[i]);
        off += info.numel[i];
    }
    char *text = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    snprintf(json_path, sizeof json_path, "%s.json", out);
    if (!text || zfile_write_all(json_path, text, strlen(text), NULL, err, sizeof err) != 0) {
        fprintf(stderr, "zero_consolidate: writing %s failed: %s\n", json_path, text ? err : "out of memory");
        free(text);
        free(buf);
        zero_checkpoint_info_free(&info);
        return 1;
    }
    printf("zero_consolidate: %s step %lld (%d ranks, stage %d): %d tensors, %zu %s values -> %s, %s\n", dir, info.step,
           info.world, info.stage, info.num_tensors, info.numel_total, states[which], out, json_path);
    free(text);
    free(buf);
    zero_checkpoint_info_free(&info);
    return 0;
}
