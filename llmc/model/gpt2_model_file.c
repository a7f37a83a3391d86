// gpt2_model_file.c: llm.c model files: checked header, positioned range reads,
// streamed verified writes.
#include "gpt2_model_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../utils.h"

// Bytes per stored element of a supported version.
static size_t elem_bytes(int version) { return version == GPT2_MODEL_FP32 ? 4 : 2; }

void gpt2_model_file_open(GPT2ModelFile *mf, const char *path, GPT2Config *c) {
    memset(mf, 0, sizeof(*mf));
    if (strlen(path) >= sizeof(mf->path)) die("model file path too long: '%s'", path);
    strcpy(mf->path, path);
    mf->fd = open(path, O_RDONLY);
    if (mf->fd < 0) die("cannot open model file '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(mf->fd, &st) != 0) die("cannot stat model file '%s': %s", path, strerror(errno));
    uint64_t fsize = (uint64_t)st.st_size;
    int32_t h[GPT2_MODEL_HEADER_BYTES / sizeof(int32_t)];
    if (fsize < sizeof(h))
        die("model file '%s' is %llu bytes, shorter than its %zu-byte header", path, (unsigned long long)fsize,
            sizeof(h));
    ssize_t got = pread(mf->fd, h, sizeof(h), 0);
    if (got != (ssize_t)sizeof(h))
        die("cannot read the header of model file '%s': %s", path, got < 0 ? strerror(errno) : "short read");
    if (h[0] != GPT2_MODEL_MAGIC)
        die("'%s' is not an llm.c model file: magic %d, expected %d", path, h[0], GPT2_MODEL_MAGIC);
    mf->version = h[1];
    if (mf->version != GPT2_MODEL_FP32 && mf->version != GPT2_MODEL_BF16)
        die("model file '%s' has version %d; supported are 3 (fp32) and 5 (bf16)", path, mf->version);
    GPT2Config *mc = &mf->config;
    mc->max_seq_len = h[2];
    mc->vocab_size = h[3];
    mc->num_layers = h[4];
    mc->num_heads = h[5];
    mc->channels = h[6];
    mc->padded_vocab_size = h[7];
    char err[256];
    if (gpt2_config_validate(mc, err, sizeof(err)) != 0) die("model file '%s' header: %s", path, err);
    // Within the limits these cannot overflow; they are checked all the same.
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    mf->num_params = gpt2_param_sizes(mc, sizes);
    uint64_t expect = size_add(sizeof(h), size_mul(mf->num_params, elem_bytes(mf->version), path), path);
    if (fsize != expect)
        die("model file '%s' is %llu bytes, but its header (L=%d C=%d NH=%d maxT=%d Vp=%d, version %d) needs %llu",
            path, (unsigned long long)fsize, mc->num_layers, mc->channels, mc->num_heads, mc->max_seq_len,
            mc->padded_vocab_size, mf->version, (unsigned long long)expect);
    if (c) *c = *mc;
}

// Reads exactly n bytes at file offset off (pread may return less than asked).
static void pread_full(const GPT2ModelFile *mf, void *dst, size_t n, uint64_t off) {
    char *p = (char *)dst;
    while (n > 0) {
        size_t want = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t got = pread(mf->fd, p, want, (off_t)off);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0)
            die("read error on model file '%s' at byte %llu: %s", mf->path, (unsigned long long)off,
                got < 0 ? strerror(errno) : "unexpected end of file");
        p += got;
        off += (uint64_t)got;
        n -= (size_t)got;
    }
}

void gpt2_model_file_read_range(GPT2ModelFile *mf, size_t offset, size_t count, float *out) {
    if (size_add(offset, count, mf->path) > mf->num_params)
        die("model file '%s': elements [%zu, %zu + %zu) are past its %zu parameters", mf->path, offset, offset,
            count, mf->num_params);
    size_t eb = elem_bytes(mf->version);
    uint64_t at = GPT2_MODEL_HEADER_BYTES + (uint64_t)offset * eb;
    if (mf->version == GPT2_MODEL_FP32) {
        pread_full(mf, out, count * sizeof(float), at);
    } else {
        enum { CHUNK = 1 << 15 };
        uint16_t buf[CHUNK];
        for (size_t i = 0; i < count; i += CHUNK) {
            size_t m = count - i < CHUNK ? count - i : CHUNK;
            pread_full(mf, buf, m * sizeof(uint16_t), at + i * sizeof(uint16_t));
            for (size_t j = 0; j < m; j++) out[i + j] = gpt2_bf16_to_f32(buf[j]);
        }
    }
    mf->bytes_read += (uint64_t)count * eb;
    // read once (each rank its own ranges): out of the page cache, which a cgroup charges
    (void)posix_fadvise(mf->fd, (off_t)at, (off_t)((uint64_t)count * eb), POSIX_FADV_DONTNEED);
}

void gpt2_model_file_close(GPT2ModelFile *mf) {
    if (mf->fd >= 0) close(mf->fd);
    mf->fd = -1;
}

uint64_t gpt2_model_file_param_bytes(const GPT2ModelFile *mf) {
    return (uint64_t)mf->num_params * elem_bytes(mf->version);
}

float *gpt2_model_file_read(const char *path, GPT2Config *c) {
    GPT2ModelFile mf;
    gpt2_model_file_open(&mf, path, c);
    float *params = (float *)malloc_check(size_mul(mf.num_params, sizeof(float), path));
    gpt2_model_file_read_range(&mf, 0, mf.num_params, params);
    gpt2_model_file_close(&mf);
    return params;
}

void gpt2_model_writer_open(GPT2ModelWriter *w, const char *path, const GPT2Config *c, int version) {
    if (version != GPT2_MODEL_FP32 && version != GPT2_MODEL_BF16)
        die("cannot write model file '%s' with version %d (3 or 5)", path, version);
    char err[256];
    if (gpt2_config_validate(c, err, sizeof(err)) != 0) die("cannot write model file '%s': %s", path, err);
    memset(w, 0, sizeof(*w));
    w->config = *c;
    w->version = version;
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    w->num_params = gpt2_param_sizes(c, sizes);
    int32_t h[GPT2_MODEL_HEADER_BYTES / sizeof(int32_t)] = {0};
    h[0] = GPT2_MODEL_MAGIC;
    h[1] = version;
    h[2] = c->max_seq_len;
    h[3] = c->vocab_size;
    h[4] = c->num_layers;
    h[5] = c->num_heads;
    h[6] = c->channels;
    h[7] = c->padded_vocab_size;
    atomic_file_open(&w->af, path);
    atomic_file_write(&w->af, h, sizeof(h));
}

void gpt2_model_writer_append(GPT2ModelWriter *w, const float *values, size_t count) {
    if (count > w->num_params - w->written) {
        atomic_file_abort(&w->af);
        die("model file '%s': appending %zu elements after %zu overruns its %zu parameters", w->af.path, count,
            w->written, w->num_params);
    }
    if (w->version == GPT2_MODEL_FP32) {
        atomic_file_write(&w->af, values, count * sizeof(float));
    } else {
        enum { CHUNK = 1 << 15 };
        uint16_t buf[CHUNK];
        for (size_t i = 0; i < count; i += CHUNK) {
            size_t m = count - i < CHUNK ? count - i : CHUNK;
            for (size_t j = 0; j < m; j++) buf[j] = gpt2_f32_to_bf16(values[i + j]);
            atomic_file_write(&w->af, buf, m * sizeof(uint16_t));
        }
    }
    w->written += count;
}

void gpt2_model_writer_commit(GPT2ModelWriter *w) {
    if (w->written != w->num_params) {
        atomic_file_abort(&w->af);
        die("model file '%s': %zu of %zu parameters were written; not saved", w->af.path, w->written,
            w->num_params);
    }
    atomic_file_commit_verified(&w->af, "model file");   // read back before it replaces the target
}

void gpt2_model_file_write(const char *path, const GPT2Config *c, const float *params, int version) {
    GPT2ModelWriter w;
    gpt2_model_writer_open(&w, path, c, version);
    gpt2_model_writer_append(&w, params, w.num_params);
    gpt2_model_writer_commit(&w);
}

// A slice's place in the file and its index in the gpt2_slices table.
typedef struct {
    size_t offset, numel;
    int index;
} FileSlice;

static int by_offset(const void *a, const void *b) {
    size_t x = ((const FileSlice *)a)->offset, y = ((const FileSlice *)b)->offset;
    return (x > y) - (x < y);
}

void gpt2_model_file_export(const char *path, const GPT2Config *c, int version, const GPT2ModelSource *src) {
    int n = src->pieces ? src->num_pieces : gpt2_num_slices(c);
    GPT2Slice *untiled = NULL;
    if (!src->pieces) {
        untiled = (GPT2Slice *)malloc_check((size_t)n * sizeof(GPT2Slice));
        gpt2_slices(c, untiled);
    }
    const GPT2Slice *slices = src->pieces ? src->pieces : untiled;
    FileSlice *order = (FileSlice *)malloc_check((size_t)n * sizeof(FileSlice));
    size_t largest = 0;
    for (int i = 0; i < n; i++) {
        order[i] = (FileSlice){slices[i].offset, slices[i].numel, i};
        if (slices[i].numel > largest) largest = slices[i].numel;
    }
    qsort(order, (size_t)n, sizeof(FileSlice), by_offset);  // table order is by unit
    float *buf = (float *)malloc_check(size_mul(largest, sizeof(float), "model export buffer"));
    GPT2ModelWriter w;
    if (path) gpt2_model_writer_open(&w, path, c, version);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        if (order[i].offset != at)
            die("internal: slice %s starts at element %zu, expected %zu", slices[order[i].index].name,
                order[i].offset, at);
        src->fetch(src->ctx, order[i].index, buf);
        if (path) gpt2_model_writer_append(&w, buf, order[i].numel);
        at += order[i].numel;
    }
    if (path) gpt2_model_writer_commit(&w);
    free(buf);
    free(order);
    free(untiled);
}

void gpt2_slice_init_setup(GPT2SliceInit *si, const GPT2Config *c, const GPT2Slice *slices, uint64_t seed,
                           GPT2ModelFile *file) {
    si->config = *c;
    si->slices = slices;
    gpt2_param_offsets(c, si->tensor_offset);
    si->seed = seed;
    si->file = file;
}

void gpt2_slice_init(void *ctx, int slice, size_t offset, size_t count, float *out) {
    const GPT2SliceInit *si = (const GPT2SliceInit *)ctx;
    const GPT2Slice *s = &si->slices[slice];
    if (si->file) {
        gpt2_model_file_read_range(si->file, s->offset + offset, count, out);
    } else {   // the slice's place inside its tensor (all layers)
        size_t within = s->offset - si->tensor_offset[s->tensor] + offset;
        gpt2_init_range(&si->config, s->tensor, within, count, out, si->seed);
    }
}
