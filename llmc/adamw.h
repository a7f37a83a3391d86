// adamw.h: the one AdamW element update, shared by the CPU model, the CUDA kernels
// and zero/'s sharded optimizers. Each operation is spelled out as a separately
// rounded IEEE op (no FMA contraction: host code builds with -ffp-contract=off, device
// code uses the _rn intrinsics), so CPU and GPU give bit-identical parameters.
#ifndef LLMC_ADAMW_H
#define LLMC_ADAMW_H

#include <math.h>

#ifdef __CUDACC__
#define ADAMW_HD __host__ __device__
#else
#define ADAMW_HD
#endif

static inline ADAMW_HD float adamw_mul(float a, float b) {
#ifdef __CUDA_ARCH__
    float r;
    asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    return a * b;
#endif
}
static inline ADAMW_HD float adamw_add(float a, float b) {
#ifdef __CUDA_ARCH__
    float r;
    asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    return a + b;
#endif
}
static inline ADAMW_HD float adamw_div(float a, float b) {
#ifdef __CUDA_ARCH__
    float r;
    asm("div.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    return a / b;
#endif
}
static inline ADAMW_HD float adamw_sqrt(float a) {
#ifdef __CUDA_ARCH__
    float r;
    asm("sqrt.rn.f32 %0, %1;" : "=f"(r) : "f"(a));
    return r;
#else
    return sqrtf(a);
#endif
}

// Per-step scalars, computed once on the host: bias corrections 1 - beta^t.
typedef struct {
    float lr, beta1, beta2, eps, weight_decay, grad_scale;
    float bias_correction1, bias_correction2;
} AdamWParams;

static inline AdamWParams adamw_params(float lr, float beta1, float beta2, float eps,
                                       float weight_decay, float grad_scale, int t) {
    AdamWParams a;
    a.lr = lr; a.beta1 = beta1; a.beta2 = beta2; a.eps = eps;
    a.weight_decay = weight_decay; a.grad_scale = grad_scale;
    a.bias_correction1 = (float)(1.0 - pow((double)beta1, (double)t));
    a.bias_correction2 = (float)(1.0 - pow((double)beta2, (double)t));
    return a;
}

// Updates *m and *v in place and returns the new parameter. decay is 0 or 1.
static inline ADAMW_HD float adamw_element(float param, float grad, float *m, float *v,
                                           const AdamWParams *a, int decay) {
    float g = adamw_mul(grad, a->grad_scale);
    float mt = adamw_add(adamw_mul(a->beta1, *m), adamw_mul(1.0f - a->beta1, g));
    float vt = adamw_add(adamw_mul(a->beta2, *v), adamw_mul(adamw_mul(1.0f - a->beta2, g), g));
    *m = mt;
    *v = vt;
    float mhat = adamw_div(mt, a->bias_correction1);
    float vhat = adamw_div(vt, a->bias_correction2);
    float upd = adamw_div(mhat, adamw_add(adamw_sqrt(vhat), a->eps));
    if (decay) upd = adamw_add(upd, adamw_mul(a->weight_decay, param));
    return adamw_add(param, -adamw_mul(a->lr, upd));
}

#endif
