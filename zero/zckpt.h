/*
zckpt.h: the sharded checkpoint format, shared by zero_save/zero_load (checkpoint.c) and
by consolidation (consolidate.c, usable without MPI). Nothing here knows about a running
Zero: only files, the manifest and partition.h's split.

A checkpoint of step S in folder DIR:
  DIR/zero_S/rank_RRRRR.bin   one per saving rank (R = 0..world-1), written atomically
  DIR/zero_S/extra.bin        the trainer's opaque blob (absent when it gave none)
  DIR/zero_S/manifest.json    written by rank 0 after every rank file was verified
  DIR/latest_zero             text "S\n", replaced (atomically) only after the manifest

Rank file, version 1, every integer little-endian:
  0   char[8]  "ZEROSHRD"
  8   u32      version (1)
  12  u32      header bytes (56 + 24 * tensors)
  16  u32      rank          20 u32 world        24 u32 stage     28 u32 last_t
  32  u64      step          40 u64 seed         48 u32 tensors   52 u32 param dtype
  56  per tensor: u64 numel, u64 begin, u64 count   (the real elements this rank owned)
  then per tensor: count fp32 master, count fp32 m, count fp32 v (IEEE-754 little-endian)
  last: u32 CRC-32 (zlib) of every byte before it
A rank owns elements [begin, begin + count) of a tensor under partition.h's split for the
saved world; padding is never written. last_t is the t of the last optimizer step: a
loader refreshes bf16 working weights with it, so stochastic rounding is bit-exact.
*/
#ifndef ZERO_ZCKPT_H
#define ZERO_ZCKPT_H

#include <stddef.h>
#include <stdint.h>

#define ZCK_MAGIC "ZEROSHRD"
#define ZCK_VERSION 1
#define ZCK_MANIFEST_VERSION 1
#define ZCK_HEADER_FIXED 56
#define ZCK_TENSOR_ENTRY 24

enum { ZCK_MASTER = 0, ZCK_M = 1, ZCK_V = 2, ZCK_KINDS = 3 };

typedef struct {
    char *name;
    uint64_t numel;
} ZckTensor;

typedef struct {
    char file[64];
    uint64_t bytes;
    uint32_t crc;
} ZckRankFile;

typedef struct {
    char folder[4096];     // DIR/zero_S
    int version, world, stage, last_t, param_dtype, num_tensors;
    long long step;
    uint64_t seed, numel_total;
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

void zck_folder(char *out, size_t cap, const char *dir, long long step);
void zck_rank_file(char *out, size_t cap, int rank);
// DIR/latest_zero as a step, or -1 (missing or malformed).
long long zck_latest(const char *dir);

// Header bytes for a rank file (begin/count per tensor): out must hold zck_header_size().
size_t zck_header_size(int num_tensors);
void zck_header_encode(unsigned char *out, int rank, int world, int stage, int last_t, long long step,
                       uint64_t seed, int param_dtype, int num_tensors, const uint64_t *numel,
                       const uint64_t *begin, const uint64_t *count);

// Writes m->folder/manifest.json atomically (rank 0, after every rank file was verified).
int zck_manifest_write(const ZckManifest *m, char *err, size_t errlen);
// Parses DIR/zero_S/manifest.json. Returns 0, or -1 with the reason in err.
int zck_manifest_read(const char *dir, long long step, ZckManifest *m, char *err, size_t errlen);
void zck_manifest_free(ZckManifest *m);

int zck_reader_init(ZckReader *r, const ZckManifest *m);
// Opens and verifies the saved files holding elements [begin, begin + n) of tensor t.
int zck_reader_need(ZckReader *r, int t, uint64_t begin, uint64_t n, char *err, size_t errlen);
// Reads those elements of one kind (ZCK_MASTER, ZCK_M, ZCK_V) as fp32 into out.
int zck_reader_read(ZckReader *r, int t, int kind, uint64_t begin, uint64_t n, float *out, char *err, size_t errlen);
void zck_reader_free(ZckReader *r);

// Reads the extra blob into buf (exactly m->extra_bytes), checking its CRC.
int zck_read_extra(const ZckManifest *m, void *buf, size_t bytes, char *err, size_t errlen);

#endif
