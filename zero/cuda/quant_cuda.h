/*
quant_cuda.h: quant.h's block quantization kernels on the GPU (quant_cuda.cu), with the
same formats and the same bits as the C reference (both use quant_element.h's rules;
dev/test/zero/gpu_zero_quant.c checks it). Everything is queued on `stream`; pointers are
device memory. Build quant_cuda.cu without --use_fast_math (flush-to-zero would change
the subnormal cases).

Non-finite input: quant_cuda_quantize writes the refused blocks as the C version does
(scale NaN, values 0) and, when first_bad is not NULL, sets the device word *first_bad to
the lowest index of a non-finite value (ULLONG_MAX when there is none); read it back after
the stream and report with quant_report_bad.

Each call returns QUANT_OK, QUANT_BAD_BLOCK (block size refused, with a message), or -1
after printing the launch error.
*/
#ifndef ZERO_QUANT_CUDA_H
#define ZERO_QUANT_CUDA_H

#include <cuda_runtime_api.h>

#include "../kernels/quant.h"

#ifdef __cplusplus
extern "C" {
#endif

int quant_cuda_quantize(QuantFormat f, QuantDtype in, const void *x, size_t n, int block,
                        void *q, float *scales, unsigned long long *first_bad, cudaStream_t stream);
int quant_cuda_dequantize(QuantFormat f, const void *q, const float *scales, size_t n, int block,
                          QuantDtype out_type, void *out, cudaStream_t stream);
int quant_cuda_dequant_reduce(QuantFormat f, const void *q, size_t q_stride, const float *scales,
                              size_t scale_stride, int nranks, size_t n, int block, float *out,
                              cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
