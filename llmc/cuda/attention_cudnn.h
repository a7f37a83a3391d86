// attention_cudnn.h: causal flash attention through cuDNN's backend graph API
// (scaled dot product attention, bf16 in/out, fp32 softmax statistics).
//
// Layouts (the ones the GPT-2 model produces, used through strides, no permutes):
//   qkv  (B, T, 3, NH, HS) bf16: q, k, v for each token, heads contiguous
//   out  (B, T, NH, HS)    bf16
//   stats (B, NH, T)       fp32: per-row softmax log-sum-exp saved for backward
// Scale 1/sqrt(HS), causal mask.
//
// Graphs are built once in attention_cudnn_prepare() (at model init, outside the
// step loop); forward/backward then only execute the cached plans.
#ifndef LLMC_ATTENTION_CUDNN_H
#define LLMC_ATTENTION_CUDNN_H

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>

// Builds (or finds cached) forward and backward plans for this shape. Returns 1 when
// cuDNN supports it on this GPU with the deterministic backward, 2 with the atomic one
// (only when atomic_dq asks for it: when cuDNN declines it, with a note, the deterministic
// one runs and prepare returns 1), 0 when cuDNN cannot run the shape, or when the runtime cuDNN is one that
// attention_cudnn_backward_ok() refuses (the caller falls back to plain kernels; the
// reason, naming the version, is printed once). Sets *workspace_bytes to the largest workspace this shape
// needs (forward or backward; 16-byte aligned device memory, may be shared by both calls
// but not by concurrent ones). forward/backward must only be called for prepared shapes.
// atomic_dq 0: the backward is cuDNN's deterministic variant, the same bits every run;
// 1: cuDNN may add dQ's parts atomically into an fp32 accumulator (faster; cuDNN's own default), so
// the bits of dQ vary from run to run. A shape is prepared per atomic_dq, and forward,
// backward and release name the one they use.
// Each prepare of a shape (found in the cache or not, supported or not) takes a reference that
// attention_cudnn_release gives back; the shape's plans are freed with the last (a model
// prepares at build and releases at free, so shapes of freed models do not fill the cache).
int attention_cudnn_prepare(int B, int T, int NH, int HS, int atomic_dq, size_t *workspace_bytes);
void attention_cudnn_release(int B, int T, int NH, int HS, int atomic_dq);
// backward overwrites all of dqkv (dq, dk, dv in the q, k, v slots); stats and out are the
// forward's outputs for the same qkv.
void attention_cudnn_forward(__nv_bfloat16 *out, float *stats, const __nv_bfloat16 *qkv,
                             int B, int T, int NH, int HS, int atomic_dq, void *workspace, cudaStream_t stream);
void attention_cudnn_backward(__nv_bfloat16 *dqkv, const __nv_bfloat16 *dout,
                              const __nv_bfloat16 *qkv, const __nv_bfloat16 *out,
                              const float *stats, int B, int T, int NH, int HS, int atomic_dq,
                              void *workspace, cudaStream_t stream);
void attention_cudnn_destroy(void);   // every shape's plans and the handle, whatever the references

#endif
