/*
quant.h: block quantization for ZeRO++'s quantized collectives, the C reference kernels
(quant.c; OpenMP over blocks). quant_cuda.h has the same kernels for the GPU, with the
same bits (the element rules are quant_element.h).

A tensor of n values (fp32 or bf16) is cut into blocks of `block` values from its start
(the last one may be shorter). Each block gets one fp32 scale s = max|x| / Q and each value
an integer q = round-to-nearest-even(x / s) in [-Q, Q]:
  QUANT_INT8  Q = 127, one int8 per value (n bytes)
  QUANT_INT4  Q = 7, two values per byte, element 2k in the low nibble of byte k
              ((n + 1) / 2 bytes; the high nibble after an odd n is 0)
A value reads back as q * s, within half a step of x: |x - q * s| <= s * (1/2 + 2^-16)
(the 2^-16 covers the rounding of x / s and q * s). An all-zero block has s = 0 and reads
back as exact zeros. Blocks are independent, so thread count and grid size cannot change
a bit.

Non-finite input is refused: quant_quantize returns QUANT_NONFINITE with the first bad
element in *bad, and writes that block as scale NaN, values 0 (so ignoring the return
gives NaNs downstream, never plausible numbers). The caller says which tensor it was:
quant_report_bad.

    float *scales = malloc(quant_nblocks(n, block) * sizeof(float));
    void *q = malloc(quant_bytes(QUANT_INT4, n));
    QuantBad bad;
    if (quant_quantize(QUANT_INT4, QUANT_F32, grad, n, block, q, scales, &bad))
        { quant_report_bad(stderr, "gradient h.3.fc_w", rank, QUANT_INT4, &bad); exit(1); }
*/
#ifndef ZERO_QUANT_H
#define ZERO_QUANT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

// Elements per block when the user gives none: Dettmers et al.'s block-wise quantization,
// which ZeRO++ (sec. 3.1, ref. 8) adopts, uses blocks of 2048 (qwZ's int8 weights).
#define QUANT_BLOCK_DEFAULT 2048
// qgZ's int4 gradients: 16 levels lose too much over 2048 values. Measured on 4 ranks in 2
// nodes, 200 steps (dev/bench/bench_qgz_loss.sh): the train loss over stage 3's is +3.1% at
// 2048, +1.2% at 256, +0.31% at 64 and +0.17% at 32, for 0.503, 0.516, 0.563 and 0.625 bytes
// a gradient value on the wire (int4 and an fp32 scale a block): 64 keeps the loss within
// 0.5% under 0.6 bytes a value.
#define QGZ_BLOCK_DEFAULT 64

typedef enum { QUANT_INT8 = 0, QUANT_INT4 = 1 } QuantFormat;
typedef enum { QUANT_F32 = 0, QUANT_BF16 = 1 } QuantDtype;
typedef enum { QUANT_OK = 0, QUANT_NONFINITE = 1, QUANT_BAD_BLOCK = 2 } QuantStatus;

// The first non-finite input value: its block, its element index in the tensor, its value.
typedef struct {
    size_t block, index;
    float value;
} QuantBad;

const char *quant_format_name(QuantFormat f);
int quant_qmax(QuantFormat f);                     // 127 or 7
size_t quant_nblocks(size_t n, int block);         // scales per tensor
size_t quant_bytes(QuantFormat f, size_t n);       // payload bytes per tensor
// 0 when block is a positive even number (int4 blocks must end on a byte); else prints
// why (naming `what`) and returns QUANT_BAD_BLOCK.
int quant_check_block(int block, const char *what);

// x (n values of type in) -> q (quant_bytes) and scales (quant_nblocks). Returns QUANT_OK,
// QUANT_NONFINITE (bad filled; the other blocks are quantized as usual) or QUANT_BAD_BLOCK.
int quant_quantize(QuantFormat f, QuantDtype in, const void *x, size_t n, int block,
                   void *q, float *scales, QuantBad *bad);

// q, scales -> out (n values of type out_type; bf16 rounds q * s to nearest even).
int quant_dequantize(QuantFormat f, const void *q, const float *scales, size_t n, int block,
                     QuantDtype out_type, void *out);

// out[i] = d_0[i] + d_1[i] + ... + d_{N-1}[i] in fp32, added left to right in rank order,
// where d_r is rank r's dequantized tensor: its payload at (char *)q + r * q_stride
// (bytes) and its scales at scales + r * scale_stride (floats). nranks >= 1.
int quant_dequant_reduce(QuantFormat f, const void *q, size_t q_stride, const float *scales,
                         size_t scale_stride, int nranks, size_t n, int block, float *out);

// One block on its own, on the calling thread: the loop bodies of the three calls above,
// and what wire.c's fused kernels are made of. x / out: the block's len values; q: its
// payload (quant_bytes(f, len) bytes). quant_block_quantize returns the block's scale
// (0: all zero; NaN: a non-finite value, payload 0), refusing nothing.
float quant_block_quantize(QuantFormat f, QuantDtype in, const void *x, size_t len, void *q);
void quant_block_dequantize(QuantFormat f, const void *q, float s, size_t len, QuantDtype out_type, void *out);
// acc[k] += q_k * s in fp32 (the dequantize-reduce's step for one more rank).
void quant_block_dequant_add(QuantFormat f, const void *q, float s, size_t len, float *acc);

// "zero: rank R: cannot quantize WHAT to FORMAT: element I (block B) is VALUE ..."
void quant_report_bad(FILE *fp, const char *what, int rank, QuantFormat f, const QuantBad *bad);

#ifdef __cplusplus
}
#endif

#endif
