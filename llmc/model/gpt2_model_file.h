// gpt2_model_file.h: llm.c model files: a 256-int32 header (magic 20240326, version
// 3 = fp32 or 5 = bf16, maxT, V, L, NH, C, Vp), then the 16 parameter tensors in llm.c
// order (gpt2_param_offsets).
//
// Reading checks the header against gpt2_config_validate's limits and the size it
// implies against the real file size before anything is allocated. A sharded trainer
// opens the file and reads only the element ranges it owns (positioned reads, no full
// copy anywhere); the unsharded trainers read it whole. Writing streams: the header,
// then values appended in file order, into a temp file that is read back and verified
// before it is renamed over the target, so the writer never needs the whole model.
#ifndef LLMC_GPT2_MODEL_FILE_H
#define LLMC_GPT2_MODEL_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "../atomic_file.h"
#include "gpt2_config.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPT2_MODEL_MAGIC 20240326
#define GPT2_MODEL_FP32 3
#define GPT2_MODEL_BF16 5
#define GPT2_MODEL_HEADER_BYTES 1024

typedef struct {
    int fd;
    char path[4096];
    GPT2Config config;
    int version;           // GPT2_MODEL_FP32 or GPT2_MODEL_BF16
    size_t num_params;     // elements
    uint64_t bytes_read;   // parameter bytes read so far by read_range (for reports)
} GPT2ModelFile;

// Opens a model file and checks its header and size; *c (may be NULL) receives the
// shape. Reads nothing past the header. Exits naming the file and field on any problem.
void gpt2_model_file_open(GPT2ModelFile *mf, const char *path, GPT2Config *c);
// Elements [offset, offset + count) of the flat llm.c parameter order, as fp32 (bf16
// files are widened exactly), by positioned reads: any order, any thread-free caller.
void gpt2_model_file_read_range(GPT2ModelFile *mf, size_t offset, size_t count, float *out);
void gpt2_model_file_close(GPT2ModelFile *mf);
// Bytes of the parameters in the file (everything after the header).
uint64_t gpt2_model_file_param_bytes(const GPT2ModelFile *mf);
// The whole file into a newly allocated fp32 buffer (caller frees).
float *gpt2_model_file_read(const char *path, GPT2Config *c);

typedef struct {
    AtomicFile af;
    GPT2Config config;
    int version;
    size_t num_params, written;  // elements: expected in all, appended so far
} GPT2ModelWriter;

// Starts path's temp file with the header; version 5 rounds each value to bf16 (round
// to nearest even) as it is appended.
void gpt2_model_writer_open(GPT2ModelWriter *w, const char *path, const GPT2Config *c, int version);
// Appends the next count elements of the flat llm.c order.
void gpt2_model_writer_append(GPT2ModelWriter *w, const float *values, size_t count);
// Checks that every element was appended, reads the temp file back against the CRC of
// what was written, then fsyncs and renames it over the target. Exits naming it on error.
void gpt2_model_writer_commit(GPT2ModelWriter *w);
// The whole model from one buffer (the same streamed writer underneath).
void gpt2_model_file_write(const char *path, const GPT2Config *c, const float *params, int version);

// Export piece by piece: for each piece of the source's table, in file order, calls
// fetch(ctx, piece_index, buf) with a buffer of that piece's size, then appends buf to
// path (skipped when path is NULL: the other ranks of a collective fetch). Every caller
// makes the same fetch calls in the same order. Extra memory: the largest piece, so a
// tiled table (gpt2_slices_tiled) exports a model whose embedding alone is GBs through
// one tile's buffer.
typedef void (*GPT2SliceFetch)(void *ctx, int slice, float *out);
typedef struct {
    const GPT2Slice *pieces;   // a table that covers the file (gpt2_slices_tiled); NULL: gpt2_slices(c)
    int num_pieces;
    GPT2SliceFetch fetch;
    void *ctx;
} GPT2ModelSource;
void gpt2_model_file_export(const char *path, const GPT2Config *c, int version, const GPT2ModelSource *src);

// Initial values of any element range of any slice of gpt2_slices(c): read from a model
// file (positioned reads) or GPT-2's seeded init (gpt2_init_range). gpt2_slice_init has
// the signature of a parameter manager's init callback (zero/'s ZeroInitFn), so a sharded
// trainer initializes only what each rank owns.
typedef struct {
    GPT2Config config;
    const GPT2Slice *slices;
    size_t tensor_offset[GPT2_NUM_PARAM_TENSORS];
    uint64_t seed;
    GPT2ModelFile *file;   // NULL: fresh init
} GPT2SliceInit;
void gpt2_slice_init_setup(GPT2SliceInit *si, const GPT2Config *c, const GPT2Slice *slices, uint64_t seed,
                           GPT2ModelFile *file);
void gpt2_slice_init(void *si, int slice, size_t offset, size_t count, float *out);

#ifdef __cplusplus
}
#endif
#endif // LLMC_GPT2_MODEL_FILE_H
