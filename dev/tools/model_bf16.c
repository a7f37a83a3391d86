// model_bf16: an llm.c model file rounded to bf16 (version 5, each value to the nearest
// bf16, ties to even), the version llm.c's bf16 train_gpt2cu reads; this project's
// trainers read both. Streams the file, one 4M-element chunk in memory.
//   model_bf16 IN.bin OUT.bin
#include <stdio.h>
#include <stdlib.h>

#include "../../llmc/model/gpt2_config.h"
#include "../../llmc/model/gpt2_model_file.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s IN.bin OUT.bin (an llm.c model file, rounded to bf16: version 5)\n", argv[0]);
        return 2;
    }
    GPT2ModelFile in;
    GPT2Config c;
    gpt2_model_file_open(&in, argv[1], &c);
    GPT2ModelWriter out;
    gpt2_model_writer_open(&out, argv[2], &c, GPT2_MODEL_BF16);
    const size_t chunk = (size_t)1 << 22;
    float *buf = (float *)malloc(chunk * sizeof(float));
    if (!buf) {
        fprintf(stderr, "model_bf16: out of memory\n");
        return 1;
    }
    for (size_t off = 0; off < in.num_params; off += chunk) {
        size_t n = in.num_params - off < chunk ? in.num_params - off : chunk;
        gpt2_model_file_read_range(&in, off, n, buf);
        gpt2_model_writer_append(&out, buf, n);
    }
    gpt2_model_writer_commit(&out);
    gpt2_model_file_close(&in);
    free(buf);
    printf("model_bf16: %s (%zu parameters) -> %s (bf16, version 5)\n", argv[1], in.num_params, argv[2]);
    return 0;
}
