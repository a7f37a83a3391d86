/*
zckpt.h: the sharded checkpoint format, shared by zero_save/zero_load (checkpoint.c) and
by consolidation (consolidate.c, usable without MPI). Nothing here knows about a running
Zero: only files, the manifest and partition.h's split.

A checkpoint of step S in folder DIR:
  DIR/zero_S/rank_RRRRR.bin   one per saving rank (R = 0..world-1), written atomically
  DIR/zero_S/extra.bin        the trainer's opaque blob (absent when it gave none)
  DIR/zero_S/manifest.json    written by rank 0 after every rank file was verified
  DIR/latest_zero             text "S\n", replaced (atomically) only after the manifest

Rank file, version 2, every integer little-endian:
  0   char[8]  "ZEROSHRD"
  8   u32      version (2)
  12  u32      header bytes (72 + 24 * tensors)
  16  u32      rank          20 u32 world        24 u32 stage     28 u32 last_t
  32  u64      step          40 u64 seed         48 u32 tensors   52 u32 param dtype
  56  u8[16]   run id: the identity of the run that saved it (zero_run_id)
  72  per tensor: u64 numel, u64 begin, u64 count   (the real elements this rank owned)
  then per tensor: count fp32 master, count fp32 m, count fp32 v (IEEE-754 little-endian)
  last: u32 CRC-32 (zlib) of every byte before it (the body)
A rank owns elements [begin, begin + count) of a tensor under partition.h's split for the
saved world; padding is never written. last_t is the t of the last optimizer step: a
loader refreshes bf16 working weights with it, so stochastic rounding is bit-exact.

The manifest (version 2) names the run id and the step too, and each rank file's size and
body CRC. A loader checks, per file: size; body against trailer (corruption); magic and
version; run id and step against the manifest (a file copied in from another run or
another step of this run); body CRC against the manifest; then the rest of the header.
Then the header's stage, last_t, seed and param dtype must equal the manifest's (they
decide how a load refreshes bf16 weights), and every count from a file meets arithmetic
only through overflow-checked sums and products, bounded by ZCK_MAX_ELEMS: a crafted
manifest or header whose sizes wrap is refused naming the file and the value.
Version 1 checkpoints (no run id) are refused with a message saying so.
*/
#ifndef ZERO_ZCKPT_H
#define ZERO_ZCKPT_H

#include <stddef.h>
#include <stdint.h>

#define ZCK_MAGIC "ZEROSHRD"
#define ZCK_VERSION 2
#define ZCK_MANIFEST_VERSION 2
#define ZCK_HEADER_FIXED 72
#define ZCK_TENSOR_ENTRY 24
#define ZCK_RUN_ID_BYTES 16
// The most elements a checkpoint may hold in all (2^58; each tensor at most 2^53, what a
// JSON number holds exactly). Every byte offset of a rank file (12 bytes an element) then
// fits an off_t and an fp32 buffer of the whole a size_t. A manifest past it is refused.
#define ZCK_MAX_ELEMS ((uint64_t)1 << 58)
// The most tensors: the header size (72 + 24 per tensor) is a u32.
#define ZCK_MAX_TENSORS ((int)((UINT32_MAX - ZCK_HEADER_FIXED) / ZCK_TENSOR_ENTRY))

enum { ZCK_MASTER = 0, ZCK_M = 1, ZCK_V = 2, ZCK_KINDS = 3 };

typedef struct {
    char *name;
    uint64_t numel;
} ZckTensor;

typedef struct {
    char file[64];
    uint64_t bytes;
    uint32_t crc;          // CRC-32 of the body (every byte before the trailer)
} ZckRankFile;

// The fixed fields of a rank file's header.
typedef struct {
    int rank, world, stage, last_t, param_dtype, num_tensors;
    long long step;
    uint64_t seed;
    uint8_t run_id[ZCK_RUN_ID_BYTES];
} ZckHeader;

typedef struct {
    char folder[4096];     // DIR/zero_S
    int version, world, stage, last_t, param_dtype, num_tensors;
    long long step;
    uint64_t seed, numel_total;
    uint8_t run_id[ZCK_RUN_ID_BYTES];
    ZckTensor *t;
    ZckRankFile *ranks;    // world entries
    int has_extra;
    uint64_t extra_bytes;
    uint32_t extra_crc;
    char extra_file[64];
} ZckManifest;

// One saved rank's file, opened and verified (size and CRC against the manifest, header
// against the manifest and the partition).
typedef struct {
    int verified;          // size, CRC and header checked (the fields below are valid)
    int fd;                // -1 when not open (a verified file may be closed to spare fds)
    char path[4200];
    uint64_t *data_off;    // per tensor: byte offset of its master values
    uint64_t *begin, *count;
} ZckShard;

// Reads ranges of any tensor from whichever saved rank files hold them (opened lazily).
typedef struct {
    const ZckManifest *m;
    ZckShard *sh;          // m->world entries
    int nopen;             // open descriptors, kept under ZCK_MAX_OPEN (many saved ranks)
} ZckReader;

#ifndef ZCK_MAX_OPEN
#define ZCK_MAX_OPEN 64
#endif

#define ZCK_MANIFEST_FILE "manifest.json"
#define ZCK_EXTRA_FILE "extra.bin"
// The most bytes a reader takes from latest_zero ("S\n": 21 at most) and from a manifest
// (about 60 bytes a tensor and 90 a saved rank: 64 MiB holds a million of each). A save
// whose manifest would be larger fails rather than publish what no load could read.
#define ZCK_LATEST_MAX_BYTES 64
#define ZCK_MANIFEST_MAX_BYTES ((size_t)64 << 20)

void zck_folder(char *out, size_t cap, const char *dir, long long step);
void zck_rank_file(char *out, size_t cap, int rank);
// The step of a folder name zck_folder writes ("zero_S", exactly as it prints S), or -1.
long long zck_folder_step(const char *name);
// 1 when a file name inside a zero_S folder is one the format writes: rank_RRRRR.bin,
// manifest.json, extra.bin, or one's temp file NAME.tmp.PID (zfile.h); 0 otherwise. Pruning
// removes these and nothing else.
int zck_is_format_file(const char *name);
// DIR/latest_zero as a step; -1 when it is missing, -2 when it is malformed or cannot be
// read (a symbolic link, a FIFO, too large: zfile_read_all), the reason then in why (if not NULL).
long long zck_latest(const char *dir, char *why, size_t cap);

// A run id as 32 lowercase hex digits (out: at least 33 bytes), and back (0, or -1).
void zck_run_id_hex(const uint8_t id[ZCK_RUN_ID_BYTES], char *out);
int zck_run_id_parse(const char *hex, uint8_t id[ZCK_RUN_ID_BYTES]);

// Header bytes for a rank file (begin/count per tensor): out must hold zck_header_size().
size_t zck_header_size(int num_tensors);
void zck_header_encode(unsigned char *out, const ZckHeader *h, const uint64_t *numel, const uint64_t *begin,
                       const uint64_t *count);

// Writes m->folder/manifest.json atomically (rank 0, after every rank file was verified).
int zck_manifest_write(const ZckManifest *m, char *err, size_t errlen);
// Parses DIR/zero_S/manifest.json. Returns 0, or -1 with the reason in err.
int zck_manifest_read(const char *dir, long long step, ZckManifest *m, char *err, size_t errlen);
void zck_manifest_free(ZckManifest *m);

int zck_reader_init(ZckReader *r, const ZckManifest *m);
// Opens and verifies the saved files holding elements [begin, begin + n) of tensor t.
int zck_reader_need(ZckReader *r, int t, uint64_t begin, uint64_t n, char *err, size_t errlen);
// Opens and verifies the saved files that hold no element of any tensor (a saved rank whose
// slots are all padding), of the saved ranks q with q % stride == first: no read needs them,
// yet a missing or damaged one is refused like any other.
int zck_reader_need_empty(ZckReader *r, int first, int stride, char *err, size_t errlen);
// Reads those elements of one kind (ZCK_MASTER, ZCK_M, ZCK_V) as fp32 into out.
int zck_reader_read(ZckReader *r, int t, int kind, uint64_t begin, uint64_t n, float *out, char *err, size_t errlen);
void zck_reader_free(ZckReader *r);

// Reads the extra blob into buf (exactly m->extra_bytes), checking its CRC.
int zck_read_extra(const ZckManifest *m, void *buf, size_t bytes, char *err, size_t errlen);

#endif
