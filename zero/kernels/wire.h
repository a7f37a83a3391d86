/*
wire.h: what ZeRO++'s collectives put on the wire, and the kernels that make and read it.

A collective of ZeRO++ moves slices: one rank's shard of a tensor (qwZ's forward
all-gather), or the part of a gradient bound for one rank (qgZ's all-to-all hops). Each
slice travels as a *record*:

    [ payload, padded to 16 bytes ][ scales: one fp32 per block, padded to 16 bytes ]

  ZERO_WIRE_RAW   the slice_n values as they are (dtype dt), no scales
  ZERO_WIRE_INT8  quant.h's int8 blocks (payload slice_n bytes)
  ZERO_WIRE_INT4  quant.h's int4 blocks, two values per byte (payload (slice_n + 1) / 2 bytes)

Blocks restart at every record (the last block of a slice may be shorter), so a record is
made and read without looking at its neighbours, and a tensor's records do not depend on
how tensors are bucketed. Records are multiples of 16 bytes, so records of consecutive
slices stay aligned. The element rules are quant_element.h's (quantize, dequantize) plus
fp32 sums in the stated order, so the host (wire.c) and CUDA (wire_cuda.cu) kernels give
the same bits.

Non-finite input is not refused here: a block holding a NaN or an infinity travels as scale
NaN and reads back as NaNs, which reach the loss or the gradient norm, where the trainer
stops or skips the step (a quantized collective must not turn a NaN into plausible numbers).

The four kernels (backend.h gives their exact contract; these are the host versions, run on
the calling thread, OpenMP inside):
  pack          slices -> records, optionally reordered (ZeRO++ eq. 1-2)
  unpack        records -> values
  reduce_pack   sum runs of records, pack the sums (qgZ's hop between the two all-to-alls)
  reduce        sum records into an fp32 accumulator (the last hop)
*/
#ifndef ZERO_WIRE_H
#define ZERO_WIRE_H

#include <stddef.h>

#include "../zero.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { ZERO_WIRE_RAW = 0, ZERO_WIRE_INT8 = 1, ZERO_WIRE_INT4 = 2 } ZeroWire;

const char *zero_wire_name(ZeroWire w);   // "raw", "int8", "int4"
// Bytes of the payload of a record of n values, where its scales start, and the whole record.
size_t zero_wire_payload_bytes(ZeroWire w, ZeroDType dt, size_t n);
size_t zero_wire_scales_offset(ZeroWire w, ZeroDType dt, size_t n);
size_t zero_wire_record_bytes(ZeroWire w, ZeroDType dt, size_t n, int block);

// 0 when the kernels take these (a known format, fp32 or bf16 values, a block size quant.h
// takes for INT formats, records 4-byte aligned: their scales are floats), else prints why,
// naming fn, and returns -1. Every host and CUDA kernel checks its arguments with it.
int zero_wire_check(const char *fn, ZeroWire w, int block, ZeroDType dt, const void *rec);

// The host kernels (backend.h's wire_* without the stream). dt is ZERO_F32 or ZERO_BF16.
// Arguments no caller may pass (zero_wire_check's, a group that does not divide nslices,
// n > slice_n) stop the process with a message: a queued kernel has no one to return to.
void zero_wire_pack_cpu(ZeroWire w, int block, const void *src, ZeroDType dt, size_t slice_n, int nslices, int group,
                        void *rec);
void zero_wire_unpack_cpu(ZeroWire w, int block, const void *rec, size_t slice_n, int nslices, void *out,
                          ZeroDType dt);
void zero_wire_reduce_pack_cpu(ZeroWire w, int block, const void *in, ZeroDType dt, size_t slice_n, int ngroups,
                               int nout, void *out);
void zero_wire_reduce_cpu(ZeroWire w, int block, const void *rec, ZeroDType dt, size_t slice_n, int nrec, size_t n,
                          float *acc, int accumulate);

#ifdef __cplusplus
}
#endif
#endif
