/*
wire_cuda.h: wire.h's four kernels on the GPU (wire_cuda.cu), the same records and the same
bits as the host versions in wire.c (both use quant_element.h's rules and fp32 sums in
record order; dev/test/zero/test_backend_ops.c checks it). Arguments are those of wire.h's
zero_wire_*_cpu; pointers are device memory; everything is queued on `stream`. Records must
start 4-byte aligned (their scales are floats); 16-byte aligned buffers, slices and blocks
get vector loads. Build wire_cuda.cu without --use_fast_math.

Each call returns 0, QUANT_BAD_BLOCK after printing why the arguments were refused (block
size, dtype, alignment, slice counts), or -1 after printing the launch error.
*/
#ifndef ZERO_WIRE_CUDA_H
#define ZERO_WIRE_CUDA_H

#include <cuda_runtime_api.h>

#include "../kernels/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

int zero_wire_pack_cuda(ZeroWire w, int block, const void *src, ZeroDType dt, size_t slice_n, int nslices, int group,
                        void *rec, cudaStream_t stream);
int zero_wire_unpack_cuda(ZeroWire w, int block, const void *rec, size_t slice_n, int nslices, void *out, ZeroDType dt,
                          cudaStream_t stream);
int zero_wire_reduce_pack_cuda(ZeroWire w, int block, const void *in, ZeroDType dt, size_t slice_n, int ngroups,
                               int nout, void *out, cudaStream_t stream);
int zero_wire_reduce_cuda(ZeroWire w, int block, const void *rec, ZeroDType dt, size_t slice_n, int nrec, size_t n,
                          float *acc, int accumulate, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
