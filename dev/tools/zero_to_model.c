// zero_to_model: consolidates a sharded ZeRO checkpoint of a GPT-2 trainer into one llm.c
// model file (fp32, version 3), in one process without MPI.
//   zero_to_model OUT_DIR STEP|latest MODEL.bin
// The model shape comes from the trainer's state saved with the checkpoint; each
// tensor slice is placed back at its llm.c offset.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "gpt2_config.h"
#include "utils.h"
#include "zero/zero.h"

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s OUT_DIR STEP|latest MODEL.bin\n"
                        "writes the parameters of OUT_DIR/zero_STEP/ as an llm.c fp32 model file\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    int step = strcmp(argv[2], "latest") == 0 ? -1 : atoi(argv[2]);
    TrainState st;
    if (zero_checkpoint_extra(dir, step, &st, sizeof(st)) != 0)
        die("'%s' holds no GPT-2 trainer checkpoint for step %s (see above)", dir, argv[2]);
    const GPT2Config *c = &st.config;
    char err[256];
    if (gpt2_config_validate(c, err, sizeof(err)) != 0) die("checkpoint in '%s' has a bad model shape: %s", dir, err);
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    size_t n = gpt2_param_sizes(c, sizes);
    // zero_consolidate returns the plugin's tensors concatenated in table order, which
    // is gpt2_slices() order; scatter each slice to its llm.c offset.
    float *table = (float *)malloc_check(n * sizeof(float));
    float *params = (float *)malloc_check(n * sizeof(float));
    if (zero_consolidate(dir, step, table, n) != 0) die("cannot consolidate '%s' (see above)", dir);
    int ns = gpt2_num_slices(c);
    GPT2Slice *slices = (GPT2Slice *)malloc_check((size_t)ns * sizeof(GPT2Slice));
    gpt2_slices(c, slices);
    size_t at = 0;
    for (int i = 0; i < ns; i++) {
        memcpy(params + slices[i].offset, table + at, slices[i].numel * sizeof(float));
        at += slices[i].numel;
    }
    if (at != n) die("internal: slices cover %zu of %zu parameters", at, n);
    gpt2_model_file_write(argv[3], c, params, GPT2_MODEL_FP32);
    printf("wrote %s: step %d, %d layers, %d channels, %zu parameters (saved by %d ranks)\n", argv[3], st.step,
           c->num_layers, c->channels, n, st.world);
    free(slices);
    free(params);
    free(table);
    return 0;
}
