// zero_to_model: consolidates a sharded ZeRO checkpoint of a GPT-2 trainer into one llm.c
// model file (fp32, version 3), in one process without MPI.
//   zero_to_model OUT_DIR STEP|latest [MODEL.bin]
// Without MODEL.bin the file lands in the run's folder: OUT_DIR/zero_to_model_STEP.bin
// (8 digits, like the trainer's model_STEP.bin, which holds the same parameters).
// The model shape comes from the trainer's state saved with the checkpoint. The
// consolidated master (tensor-table order) is streamed to the file slice by slice in
// llm.c order, so the tool holds the model once, not twice.
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../llmc/run/checkpoint.h"
#include "../../llmc/model/gpt2_config.h"
#include "../../llmc/model/gpt2_model_file.h"
#include "../../llmc/utils.h"
#include "../../zero/zero.h"

// The consolidated parameters and where each slice starts in them (table order).
typedef struct {
    const float *table;
    size_t *start;
    const GPT2Slice *slices;
} Consolidated;

static void copy_slice(void *ctx, int slice, float *out) {
    const Consolidated *c = (const Consolidated *)ctx;
    memcpy(out, c->table + c->start[slice], c->slices[slice].numel * sizeof(float));
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s OUT_DIR STEP|latest [MODEL.bin]\n"
                        "writes the parameters of OUT_DIR/zero_STEP/ as an llm.c fp32 model file, MODEL.bin\n"
                        "or by default OUT_DIR/zero_to_model_STEP.bin (STEP in 8 digits)\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    int step = -1;
    if (strcmp(argv[2], "latest") != 0) {
        char *end;
        long v = strtol(argv[2], &end, 10);
        if (end == argv[2] || *end || v < 0 || v > INT_MAX) die("STEP must be a step number or latest, not '%s'", argv[2]);
        step = (int)v;
    }
    // latest resolved once: a run saving into the folder meanwhile does not mix two steps
    ZeroCheckpointInfo info;
    if (zero_checkpoint_info(dir, step, &info) != 0)
        die("'%s' holds no ZeRO checkpoint for step %s (see above)", dir, argv[2]);
    step = (int)info.step;
    // the model's shape and the step are among the first fields, which format 1 holds too
    size_t state_bytes = info.extra_bytes == TRAIN_STATE_V1_BYTES ? TRAIN_STATE_V1_BYTES : sizeof(TrainState);
    zero_checkpoint_info_free(&info);
    TrainState st;
    memset(&st, 0, sizeof(st));
    if (zero_checkpoint_extra(dir, step, &st, state_bytes) != 0)
        die("'%s' holds no GPT-2 trainer checkpoint for step %s (see above)", dir, argv[2]);
    const GPT2Config *c = &st.config;
    char err[256];
    if (gpt2_config_validate(c, err, sizeof(err)) != 0) die("checkpoint in '%s' has a bad model shape: %s", dir, err);
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    size_t n = gpt2_param_sizes(c, sizes);
    // zero_consolidate returns the plugin's tensors concatenated in table order, which
    // is gpt2_slices() order.
    float *table = (float *)malloc_check(size_mul(n, sizeof(float), "consolidated parameters"));
    if (zero_consolidate(dir, step, table, n) != 0) die("cannot consolidate '%s' (see above)", dir);
    int ns = gpt2_num_slices(c);
    GPT2Slice *slices = (GPT2Slice *)malloc_check((size_t)ns * sizeof(GPT2Slice));
    gpt2_slices(c, slices);
    size_t *start = (size_t *)malloc_check((size_t)ns * sizeof(size_t));
    size_t at = 0;
    for (int i = 0; i < ns; i++) {
        start[i] = at;
        at += slices[i].numel;
    }
    if (at != n) die("internal: slices cover %zu of %zu parameters", at, n);
    Consolidated cons = {table, start, slices};
    char path[4096];
    if (argc == 4) snprintf(path, sizeof(path), "%s", argv[3]);
    else if ((size_t)snprintf(path, sizeof(path), "%s/zero_to_model_%08d.bin", dir, st.step) >= sizeof(path))
        die("output folder name too long: '%s'", dir);
    GPT2ModelSource src = {NULL, 0, copy_slice, &cons};
    gpt2_model_file_export(path, c, GPT2_MODEL_FP32, &src);
    printf("wrote %s: step %d, %d layers, %d channels, %zu parameters (saved by %d ranks)\n", path, st.step,
           c->num_layers, c->channels, n, st.world);
    free(start);
    free(slices);
    free(table);
    return 0;
}
