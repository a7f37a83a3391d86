// cublaslt.cpp: cuBLASLt for the emulated device. NVIDIA's <cublasLt.h> API (names, types,
// enum values, the opaque descriptor storage), computed on the CPU in stream order through
// the emulated runtime (emu.h).
//
// Semantics come from NVIDIA's cuBLAS documentation, chapter "Using the cuBLASLt API"
// (cublasLtMatmul() with its datatypes table and footnotes, cublasLtEpilogue_t,
// cublasLtMatmulDescAttributes_t, cublasLtMatrixLayoutAttribute_t, cublasLtOrder_t,
// cublasLtMatmulPreferenceAttributes_t, cublasLtMatmulAlgoGetHeuristic(), the attribute
// get/set functions) and from the comments of cublasLt.h. Where the documentation leaves a
// choice, the emulation takes the one that breaks a caller relying on luck:
//  - only the type combinations of the datatypes table are accepted, and of those only the
//    ones this project needs (compute CUBLAS_COMPUTE_32F[_PEDANTIC], scale CUDA_R_32F,
//    A/B/C/D in bf16/bf16/bf16/bf16, bf16/bf16/fp32/fp32, fp32/fp32/fp32/fp32); every other
//    documented combination is refused with CUBLAS_STATUS_NOT_SUPPORTED and a message;
//  - an algorithm from the heuristic demands every alignment the preference promised
//    (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES, up to what the layouts' leading dimensions
//    and batch strides allow) and the alignment the bias/aux pointers had when the heuristic
//    ran; algo == NULL is the documented implicit heuristic with default preferences
//    (256-byte alignment, no workspace);
//  - an algorithm asks for workspace whenever the preference allows some (up to 1 MiB), so
//    a smaller workspace at cublasLtMatmul is refused, and the emulation scribbles over it;
//  - outputs whose batch instances overlap (D, aux, bias gradient) are refused: on a GPU
//    they are a race;
//  - with beta == 0 matrix C is not read (it may hold garbage, as in BLAS).
// Epilogues act on x = alpha*op(A)op(B) + beta*C + bias (the order the FP8 section spells
// out): the aux matrix receives x, GELU is the documented tanh approximation, DGELU gives
// x * gelu'(aux). Bias gradients are plain sums (the documentation does not scale them by
// alpha): BGRADA of op(A) over k (m values), BGRADB of op(B) over k (n values), DGELU_BGRAD
// of D's rows after DGELU (m values).
// Accumulation is in fp32 in a fixed order (k ascending, no FMA contraction: emu.mk builds
// with -ffp-contract=off), outputs are rounded with cuda_bf16.h's __float2bfloat16 (round to
// nearest even).
// Not emulated (CUBLAS_STATUS_NOT_SUPPORTED, with a message): other compute and data types,
// the ReLU bit-mask epilogues, pointer-array batches, vector pointer modes, C scaling.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <utility>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "emu.h"

// The header's opaque handle type; a handle is live between cublasLtCreate and cublasLtDestroy.
struct cublasLtContext {
    int unused;
};

namespace {

// ---------------------------------------------------------------- messages and handles

cublasStatus_t fail(cublasStatus_t st, const char *call, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
cublasStatus_t fail(cublasStatus_t st, const char *call, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    emu::say("cuBLASLt: %s: %s (%s)", call, msg, cublasLtGetStatusName(st));
    return st;
}

std::mutex g_handles_mu;
std::set<cublasLtHandle_t> g_handles;

bool handle_live(cublasLtHandle_t h) {
    std::lock_guard<std::mutex> lk(g_handles_mu);
    return g_handles.count(h) != 0;
}

// ---------------------------------------------------------------- descriptor state
// Each descriptor keeps its state inside the header's opaque storage (so that the
// cublasLt*Init functions work on caller-allocated descriptors); it is copied in and out
// with memcpy. A magic number marks initialized storage.

const uint32_t DESC_MAGIC = 0x4c74444du, LAYOUT_MAGIC = 0x4c744c4fu, PREF_MAGIC = 0x4c745052u;
const uint64_t ALGO_MAGIC = 0x656d752d4c74416cull;

struct DescState {
    uint32_t magic;
    int32_t compute, scale, pointer_mode, transa, transb, transc, fill_mode;
    uint32_t epilogue;
    int32_t sm_count, aux_type, bias_type, d_out_scale_mode;
    int32_t scale_mode[5];   // A, B, C, D, aux
    int8_t fast_accum;
    const void *bias;
    int64_t bias_batch_stride;
    void *aux;
    int64_t aux_ld, aux_batch_stride, alpha_vector_batch_stride;
    const void *a_scale, *b_scale, *c_scale, *d_scale;
    void *amax_d, *aux_scale, *aux_amax, *d_out_scale;
    cublasLtEmulationDesc_t emulation;
};
static_assert(sizeof(DescState) <= sizeof(cublasLtMatmulDescOpaque_t), "matmul descriptor state too big");

struct LayoutState {
    uint32_t magic;
    uint32_t type;
    int32_t order;
    int32_t batch;
    uint64_t rows, cols;
    int64_t ld, stride, plane_offset;
    uint32_t batch_mode;
};
static_assert(sizeof(LayoutState) <= sizeof(cublasLtMatrixLayoutOpaque_t), "layout state too big");

struct PrefState {
    uint32_t magic, search_mode;
    uint64_t max_workspace;
    uint32_t reduction_mask;
    uint32_t align[4];   // A, B, C, D
    float max_waves;
    uint64_t impl_mask;
};
static_assert(sizeof(PrefState) <= sizeof(cublasLtMatmulPreferenceOpaque_t), "preference state too big");

// What an emulated algorithm demands of cublasLtMatmul: the same problem kind, this much
// workspace, these alignments in bytes (A, B, C, D, bias, aux; 0: not used).
struct AlgoState {
    uint64_t magic, fingerprint, workspace;
    uint16_t align[6];
};
static_assert(sizeof(AlgoState) <= sizeof(cublasLtMatmulAlgo_t), "algo state too big");

template <class S, class O>
S load_state(const O *opaque) {
    S s;
    memcpy(&s, opaque->data, sizeof s);
    return s;
}
template <class S, class O>
void store_state(O *opaque, const S &s) {
    memcpy(opaque->data, &s, sizeof s);
}

DescState default_desc(cublasComputeType_t compute, cudaDataType_t scale) {
    DescState d;
    memset(&d, 0, sizeof d);
    d.magic = DESC_MAGIC;
    d.compute = compute;
    d.scale = scale;
    d.pointer_mode = CUBLASLT_POINTER_MODE_HOST;
    d.transa = d.transb = d.transc = CUBLAS_OP_N;
    d.fill_mode = CUBLAS_FILL_MODE_FULL;
    d.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    d.aux_type = d.bias_type = -1;
    return d;
}

LayoutState default_layout(cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld) {
    LayoutState l;
    memset(&l, 0, sizeof l);
    l.magic = LAYOUT_MAGIC;
    l.type = (uint32_t)type;
    l.order = CUBLASLT_ORDER_COL;
    l.batch = 1;
    l.rows = rows;
    l.cols = cols;
    l.ld = ld;
    l.batch_mode = CUBLASLT_BATCH_MODE_STRIDED;
    return l;
}

PrefState default_pref() {
    PrefState p;
    memset(&p, 0, sizeof p);
    p.magic = PREF_MAGIC;
    p.search_mode = CUBLASLT_SEARCH_BEST_FIT;
    p.max_workspace = 0;
    p.reduction_mask = CUBLASLT_REDUCTION_SCHEME_MASK;
    for (uint32_t &a : p.align) a = 256;
    p.impl_mask = ~0ull;
    return p;
}

// ---------------------------------------------------------------- attributes
// Every attribute is a field of the state with the size the header gives its type; set and
// get follow the documented rules on buf, sizeInBytes and sizeWritten.

struct Field {
    int attr;
    size_t offset, size;
};
#define FIELD(S, attr, member) {(int)(attr), offsetof(S, member), sizeof(S::member)}
#define DESC_FIELD(attr, member) FIELD(DescState, attr, member)

const Field DESC_FIELDS[] = {
    DESC_FIELD(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, compute),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_SCALE_TYPE, scale),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_POINTER_MODE, pointer_mode),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_TRANSA, transa),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_TRANSB, transb),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_TRANSC, transc),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_FILL_MODE, fill_mode),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, bias_batch_stride),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, aux_batch_stride),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE, alpha_vector_batch_stride),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, sm_count),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, a_scale),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, b_scale),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_C_SCALE_POINTER, c_scale),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, d_scale),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, amax_d),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, aux_type),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER, aux_scale),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER, aux_amax),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_FAST_ACCUM, fast_accum),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, scale_mode[0]),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, scale_mode[1]),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_C_SCALE_MODE, scale_mode[2]),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_D_SCALE_MODE, scale_mode[3]),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE, scale_mode[4]),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER, d_out_scale),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE, d_out_scale_mode),
    DESC_FIELD(CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR, emulation),
};

const Field LAYOUT_FIELDS[] = {
    FIELD(LayoutState, CUBLASLT_MATRIX_LAYOUT_TYPE, type),
    FIELD(LayoutState, CUBLASLT_MATRIX_LAYOUT_ORDER, order),
    FIELD(LayoutState, CUBLASLT_MATRIX_LAYOUT_ROWS, rows),
    FIELD(LayoutState, CUBLASLT_MATRIX_LAYOUT_COLS, cols),
    FIELD(LayoutState, CUBLASLT_MATRIX_LAYOUT_LD, ld),
    FIELD(LayoutState, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, batch),
    FIELD(LayoutState, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride),
    FIELD(LayoutState, CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET, plane_offset),
    FIELD(LayoutState, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, batch_mode),
};

const Field PREF_FIELDS[] = {
    FIELD(PrefState, CUBLASLT_MATMUL_PREF_SEARCH_MODE, search_mode),
    FIELD(PrefState, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, max_workspace),
    FIELD(PrefState, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, reduction_mask),
    FIELD(PrefState, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align[0]),
    FIELD(PrefState, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align[1]),
    FIELD(PrefState, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align[2]),
    FIELD(PrefState, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align[3]),
    FIELD(PrefState, CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT, max_waves),
    FIELD(PrefState, CUBLASLT_MATMUL_PREF_IMPL_MASK, impl_mask),
};

template <size_t N>
const Field *find_field(const Field (&table)[N], int attr) {
    for (const Field &f : table)
        if (f.attr == attr) return &f;
    return nullptr;
}

// "CUBLAS_STATUS_INVALID_VALUE if buf is NULL or sizeInBytes doesn't match size of internal
// storage for selected attribute"
cublasStatus_t set_field(void *state, const Field *f, int attr, const void *buf, size_t size, const char *call) {
    if (!f) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "unknown attribute %d", attr);
    if (!buf) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "attribute %d: buf is NULL", attr);
    if (size != f->size)
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "attribute %d holds %zu bytes, sizeInBytes is %zu", attr,
                    f->size, size);
    memcpy((char *)state + f->offset, buf, size);
    return CUBLAS_STATUS_SUCCESS;
}

// sizeInBytes 0: report the size needed in *sizeWritten; otherwise buf must be non-NULL and
// sizeInBytes exactly the attribute's size.
cublasStatus_t get_field(const void *state, const Field *f, int attr, void *buf, size_t size, size_t *written,
                         const char *call) {
    if (!f) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "unknown attribute %d", attr);
    if (size == 0) {
        if (!written) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "sizeInBytes is 0 and sizeWritten is NULL");
        *written = f->size;
        return CUBLAS_STATUS_SUCCESS;
    }
    if (!buf) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "attribute %d: buf is NULL", attr);
    if (size != f->size)
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "attribute %d holds %zu bytes, sizeInBytes is %zu", attr,
                    f->size, size);
    memcpy(buf, (const char *)state + f->offset, size);
    if (written) *written = size;
    return CUBLAS_STATUS_SUCCESS;
}

// ---------------------------------------------------------------- types and elements

size_t type_size(int t) {
    switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16BF: return 2;
    default: return 0;
    }
}

const char *type_name(int t) {
    switch (t) {
    case CUDA_R_32F: return "CUDA_R_32F";
    case CUDA_R_16BF: return "CUDA_R_16BF";
    case CUDA_R_16F: return "CUDA_R_16F";
    case CUDA_R_64F: return "CUDA_R_64F";
    case CUDA_R_8I: return "CUDA_R_8I";
    case CUDA_R_32I: return "CUDA_R_32I";
    default: return "another cudaDataType";
    }
}

float load(const void *base, int type, int64_t idx) {
    if (type == CUDA_R_32F) return ((const float *)base)[idx];
    return __bfloat162float(((const __nv_bfloat16 *)base)[idx]);
}

void store(void *base, int type, int64_t idx, float v) {
    if (type == CUDA_R_32F) ((float *)base)[idx] = v;
    else ((__nv_bfloat16 *)base)[idx] = __float2bfloat16(v);
}

// Largest power of two dividing v, at most 256 (v == 0: 256).
uint32_t align_of(uint64_t v) {
    uint32_t a = 1;
    while (a < 256 && v % (2 * (uint64_t)a) == 0) a *= 2;
    return a;
}

uint32_t pow2_floor(uint32_t v) {
    uint32_t a = 1;
    while (a * 2 <= v && a < 256) a *= 2;
    return a;
}

// ---------------------------------------------------------------- the problem

// One operand as cublasLtMatmul sees it (from its layout).
struct Matrix {
    int type;
    int32_t order;
    int64_t rows, cols, ld, stride;
    int batch;
};

int64_t offset_of(const Matrix &x, int64_t b, int64_t r, int64_t c) {
    return b * x.stride + (x.order == CUBLASLT_ORDER_COL ? r + c * x.ld : r * x.ld + c);
}

// Elements spanned by all batch instances (0 when empty).
bool span_elems(const Matrix &x, uint64_t *out) {
    *out = 0;
    if (x.rows == 0 || x.cols == 0 || x.batch == 0) return true;
    uint64_t inner = (uint64_t)(x.order == CUBLASLT_ORDER_COL ? x.rows : x.cols);
    uint64_t outer = (uint64_t)(x.order == CUBLASLT_ORDER_COL ? x.cols : x.rows);
    uint64_t a, b, s;
    if (__builtin_mul_overflow(outer - 1, (uint64_t)x.ld, &a)) return false;
    if (__builtin_mul_overflow((uint64_t)(x.batch - 1), (uint64_t)x.stride, &b)) return false;
    if (__builtin_add_overflow(a, b, &s) || __builtin_add_overflow(s, inner, &s)) return false;
    *out = s;
    return true;
}

// Whether two batch instances of x share an element: (db, dj, di) != 0 with
// db*stride + dj*ld + di == 0. (ld >= the contiguous extent is checked before.)
bool batches_overlap(const Matrix &x) {
    int64_t inner = x.order == CUBLASLT_ORDER_COL ? x.rows : x.cols;
    int64_t outer = x.order == CUBLASLT_ORDER_COL ? x.cols : x.rows;
    if (x.batch <= 1 || inner == 0 || outer == 0) return false;
    for (int64_t db = 1; db < x.batch; db++) {
        int64_t off = db * x.stride;
        if (x.ld == 0) {
            if (off < inner) return true;
            continue;
        }
        int64_t q = off / x.ld;   // the column offsets closest to -off
        for (int64_t dj = q; dj <= q + 1; dj++) {
            if (dj > outer - 1) continue;
            int64_t r = off - dj * x.ld;
            if (r < inner && r > -inner) return true;
        }
    }
    return false;
}

// What an epilogue does, from the cublasLtEpilogue_t table.
enum Act { ACT_NONE, ACT_RELU, ACT_GELU, ACT_DGELU };
enum BiasUse { BIAS_NONE, BIAS_ADD, BIAS_GRAD_D, BIAS_GRAD_A, BIAS_GRAD_B };
struct Epi {
    Act act;
    BiasUse bias;
    bool aux_out, aux_in;
    const char *name;
};

cublasStatus_t classify_epilogue(uint32_t e, Epi *out, const char *call) {
    struct Row {
        uint32_t e;
        Epi epi;
    };
    static const Row rows[] = {
        {CUBLASLT_EPILOGUE_DEFAULT, {ACT_NONE, BIAS_NONE, false, false, "DEFAULT"}},
        {CUBLASLT_EPILOGUE_RELU, {ACT_RELU, BIAS_NONE, false, false, "RELU"}},
        {CUBLASLT_EPILOGUE_BIAS, {ACT_NONE, BIAS_ADD, false, false, "BIAS"}},
        {CUBLASLT_EPILOGUE_RELU_BIAS, {ACT_RELU, BIAS_ADD, false, false, "RELU_BIAS"}},
        {CUBLASLT_EPILOGUE_GELU, {ACT_GELU, BIAS_NONE, false, false, "GELU"}},
        {CUBLASLT_EPILOGUE_GELU_BIAS, {ACT_GELU, BIAS_ADD, false, false, "GELU_BIAS"}},
        {CUBLASLT_EPILOGUE_GELU_AUX, {ACT_GELU, BIAS_NONE, true, false, "GELU_AUX"}},
        {CUBLASLT_EPILOGUE_GELU_AUX_BIAS, {ACT_GELU, BIAS_ADD, true, false, "GELU_AUX_BIAS"}},
        {CUBLASLT_EPILOGUE_DGELU, {ACT_DGELU, BIAS_NONE, false, true, "DGELU"}},
        {CUBLASLT_EPILOGUE_DGELU_BGRAD, {ACT_DGELU, BIAS_GRAD_D, false, true, "DGELU_BGRAD"}},
        {CUBLASLT_EPILOGUE_BGRADA, {ACT_NONE, BIAS_GRAD_A, false, false, "BGRADA"}},
        {CUBLASLT_EPILOGUE_BGRADB, {ACT_NONE, BIAS_GRAD_B, false, false, "BGRADB"}},
    };
    for (const Row &r : rows)
        if (r.e == e) {
            *out = r.epi;
            return CUBLAS_STATUS_SUCCESS;
        }
    if (e == CUBLASLT_EPILOGUE_RELU_AUX || e == CUBLASLT_EPILOGUE_RELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DRELU ||
        e == CUBLASLT_EPILOGUE_DRELU_BGRAD)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, call,
                    "epilogue %u (ReLU bit-mask) is not emulated: the bit-mask layout is not documented", e);
    return fail(CUBLAS_STATUS_INVALID_VALUE, call, "epilogue %u is not a cublasLtEpilogue_t", e);
}

// Everything cublasLtMatmul and the heuristic know of a call before its pointers.
struct Problem {
    DescState d;
    Matrix a, b, c, dd;   // A, B, C, D
    int64_t m, n, k;
    int batch;
    bool ta, tb;
    Epi epi;
    int bias_type, aux_type;
};

bool op_is_transpose(int32_t op) { return op == CUBLAS_OP_T || op == CUBLAS_OP_C; }

cublasStatus_t check_desc(const DescState &d, const char *call) {
    if (d.compute != CUBLAS_COMPUTE_32F && d.compute != CUBLAS_COMPUTE_32F_PEDANTIC)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, call,
                    "compute type %d: only CUBLAS_COMPUTE_32F and CUBLAS_COMPUTE_32F_PEDANTIC are emulated", d.compute);
    if (d.scale != CUDA_R_32F)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, call, "scale type %s with CUBLAS_COMPUTE_32F: the datatypes table "
                    "lists only CUDA_R_32F for the real types", type_name(d.scale));
    if (d.pointer_mode != CUBLASLT_POINTER_MODE_HOST && d.pointer_mode != CUBLASLT_POINTER_MODE_DEVICE)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, call, "pointer mode %d: only HOST and DEVICE are emulated",
                    d.pointer_mode);
    if (d.alpha_vector_batch_stride != 0)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, call, "CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE needs an "
                    "alpha vector pointer mode");
    for (int32_t op : {d.transa, d.transb})
        if (op != CUBLAS_OP_N && !op_is_transpose(op))
            return fail(CUBLAS_STATUS_INVALID_VALUE, call, "transpose %d is not a cublasOperation_t", op);
    if (d.transc != CUBLAS_OP_N)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, call, "CUBLASLT_MATMUL_DESC_TRANSC: only CUBLAS_OP_N is supported");
    if (d.fill_mode != CUBLAS_FILL_MODE_FULL)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, call, "CUBLASLT_MATMUL_DESC_FILL_MODE: only CUBLAS_FILL_MODE_FULL "
                    "(not supported for bfloat16, Hopper or Blackwell)");
    if (d.a_scale || d.b_scale || d.d_scale || d.amax_d || d.aux_scale || d.aux_amax || d.d_out_scale)
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "a scale or amax pointer is set: scales are only for narrow "
                    "precision (FP8/FP4) matmuls");
    if (d.c_scale)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, call, "CUBLASLT_MATMUL_DESC_C_SCALE_POINTER is not emulated");
    for (int32_t mode : d.scale_mode)
        if (mode != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F)
            return fail(CUBLAS_STATUS_INVALID_VALUE, call, "a scale mode is set: only for narrow precision matmuls");
    if (d.d_out_scale_mode != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F)
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE is set");
    return CUBLAS_STATUS_SUCCESS;
}

// One layout on its own: order, batch mode, sizes, leading dimension, batch.
cublasStatus_t load_matrix(cublasLtMatrixLayout_t l, char name, bool ld0_ok, Matrix *out, const char *call) {
    if (!l) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "%cdesc is NULL", name);
    LayoutState s = load_state<LayoutState>(l);
    if (s.magic != LAYOUT_MAGIC)
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "%cdesc is not an initialized matrix layout", name);
    if (s.order != CUBLASLT_ORDER_COL && s.order != CUBLASLT_ORDER_ROW)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, call, "%c: order %d (the IMMA tile orders need CUDA_R_8I)", name,
                    s.order);
    if (s.batch_mode != CUBLASLT_BATCH_MODE_STRIDED)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, call, "%c: only CUBLASLT_BATCH_MODE_STRIDED is emulated", name);
    if (s.plane_offset != 0)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, call, "%c: a plane offset is for planar complex types", name);
    if (s.rows > (uint64_t)INT32_MAX || s.cols > (uint64_t)INT32_MAX)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, call, "%c: %llu x %llu: only sizes that fit int32_t", name,
                    (unsigned long long)s.rows, (unsigned long long)s.cols);
    int64_t inner = (int64_t)(s.order == CUBLASLT_ORDER_COL ? s.rows : s.cols);
    bool broadcast = ld0_ok && s.ld == 0;
    if (s.ld < 0 || (s.ld < inner && !broadcast))
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "%c: leading dimension %lld is less than the %s (%lld)", name,
                    (long long)s.ld, s.order == CUBLASLT_ORDER_COL ? "rows of a column-major matrix"
                                                                   : "columns of a row-major matrix", (long long)inner);
    if (s.batch < 1) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "%c: batch count %d", name, s.batch);
    if (s.stride < 0)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, call, "%c: negative batch stride %lld is not emulated", name,
                    (long long)s.stride);
    *out = Matrix{(int)s.type, s.order, (int64_t)s.rows, (int64_t)s.cols, s.ld, s.stride, s.batch};
    return CUBLAS_STATUS_SUCCESS;
}

// The datatypes table of cublasLtMatmul(), for CUBLAS_COMPUTE_32F and scale CUDA_R_32F: A and B
// one type, C and D one type (the in/out-of-place rule).
cublasStatus_t check_types(const Problem &p, const char *call) {
    if (p.c.type != p.dd.type)
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "C is %s and D is %s: C and D must have the same data type",
                    type_name(p.c.type), type_name(p.dd.type));
    bool ok = p.a.type == p.b.type &&
              ((p.a.type == CUDA_R_16BF && (p.c.type == CUDA_R_16BF || p.c.type == CUDA_R_32F)) ||
               (p.a.type == CUDA_R_32F && p.c.type == CUDA_R_32F));
    if (!ok)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, call, "A %s, B %s, C/D %s with CUBLAS_COMPUTE_32F: not a supported "
                    "combination (emulated: bf16/bf16/bf16, bf16/bf16/fp32, fp32/fp32/fp32)",
                    type_name(p.a.type), type_name(p.b.type), type_name(p.c.type));
    return CUBLAS_STATUS_SUCCESS;
}

// op(A) is m x k, op(B) k x n, C and D m x n, every batch count the same.
cublasStatus_t check_shapes(Problem &p, const char *call) {
    p.m = p.dd.rows;
    p.n = p.dd.cols;
    p.k = p.ta ? p.a.rows : p.a.cols;
    int64_t am = p.ta ? p.a.cols : p.a.rows;
    int64_t bk = p.tb ? p.b.cols : p.b.rows, bn = p.tb ? p.b.rows : p.b.cols;
    if (am != p.m)
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "op(A) has %lld rows (A is %lld x %lld, trans%s), D has %lld",
                    (long long)am, (long long)p.a.rows, (long long)p.a.cols, p.ta ? "a T" : "a N", (long long)p.m);
    if (bk != p.k || bn != p.n)
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "op(B) is %lld x %lld (B is %lld x %lld, trans%s), "
                    "expected k x n = %lld x %lld", (long long)bk, (long long)bn, (long long)p.b.rows,
                    (long long)p.b.cols, p.tb ? "b T" : "b N", (long long)p.k, (long long)p.n);
    if (p.c.rows != p.m || p.c.cols != p.n || p.c.order != p.dd.order)
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "C (%lld x %lld, order %d) must match D (%lld x %lld, order %d)",
                    (long long)p.c.rows, (long long)p.c.cols, p.c.order, (long long)p.m, (long long)p.n, p.dd.order);
    p.batch = p.dd.batch;
    if (p.a.batch != p.batch || p.b.batch != p.batch || p.c.batch != p.batch)
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "batch counts differ: A %d, B %d, C %d, D %d", p.a.batch,
                    p.b.batch, p.c.batch, p.batch);
    if (batches_overlap(p.dd))
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "the %d batch instances of D overlap (batch stride %lld, ld %lld)",
                    p.batch, (long long)p.dd.stride, (long long)p.dd.ld);
    return CUBLAS_STATUS_SUCCESS;
}

// The epilogue's inputs and outputs: ROW-order restrictions, bias and aux types, aux ld and
// batch strides, overlapping batch outputs.
cublasStatus_t check_epilogue(Problem &p, const char *call) {
    const DescState &d = p.d;
    cublasStatus_t st = classify_epilogue(d.epilogue, &p.epi, call);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    const Epi &e = p.epi;
    bool row_d = p.dd.order == CUBLASLT_ORDER_ROW;
    if (row_d && (e.act != ACT_NONE) && (e.bias != BIAS_NONE))
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, call, "epilogue %s: epilogues that combine an activation or its "
                    "gradient with bias are not supported when D is CUBLASLT_ORDER_ROW", e.name);
    if (row_d && (e.aux_in || e.aux_out))
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, call, "epilogue %s with D in CUBLASLT_ORDER_ROW: the aux matrix is "
                    "documented column-major only (ld >= rows of D)", e.name);
    p.bias_type = d.bias_type == -1 ? p.dd.type : d.bias_type;
    if (e.bias != BIAS_NONE) {
        if (p.bias_type != p.dd.type)
            return fail(CUBLAS_STATUS_NOT_SUPPORTED, call, "bias type %s with D %s: the datatypes table gives the bias "
                        "the type of D", type_name(p.bias_type), type_name(p.dd.type));
        if (d.bias_batch_stride < 0)
            return fail(CUBLAS_STATUS_NOT_SUPPORTED, call, "negative bias batch stride is not emulated");
        int64_t len = e.bias == BIAS_GRAD_B ? p.n : p.m;
        bool out = e.bias != BIAS_ADD;
        if (out && p.batch > 1 && d.bias_batch_stride < len)
            return fail(CUBLAS_STATUS_INVALID_VALUE, call, "epilogue %s writes %d bias gradients of %lld elements "
                        "%lld apart: they overlap", e.name, p.batch, (long long)len, (long long)d.bias_batch_stride);
    }
    p.aux_type = d.aux_type == -1 ? p.dd.type : d.aux_type;
    if (e.aux_in || e.aux_out) {
        if (p.aux_type != p.dd.type)
            return fail(CUBLAS_STATUS_INVALID_VALUE, call, "aux type %s with D %s: only FP8 kernels take another aux "
                        "type", type_name(p.aux_type), type_name(p.dd.type));
        if (d.aux_ld < p.m || d.aux_ld % 8 != 0)
            return fail(CUBLAS_STATUS_INVALID_VALUE, call, "epilogue %s: CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD %lld must "
                        "be divisible by 8 and no less than the rows of D (%lld)", e.name, (long long)d.aux_ld,
                        (long long)p.m);
        if (d.aux_batch_stride < 0 || d.aux_batch_stride % 8 != 0)
            return fail(CUBLAS_STATUS_INVALID_VALUE, call, "epilogue %s: CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE "
                        "%lld must be divisible by 8", e.name, (long long)d.aux_batch_stride);
        Matrix aux{p.aux_type, CUBLASLT_ORDER_COL, p.m, p.n, d.aux_ld, d.aux_batch_stride, p.batch};
        if (e.aux_out && batches_overlap(aux))
            return fail(CUBLAS_STATUS_INVALID_VALUE, call, "epilogue %s: the %d aux outputs overlap (aux batch stride "
                        "%lld)", e.name, p.batch, (long long)d.aux_batch_stride);
    }
    return CUBLAS_STATUS_SUCCESS;
}

// The descriptor and the four layouts, checked as one problem (Cdesc NULL: Ddesc).
cublasStatus_t make_problem(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                            cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc, bool c_is_d, Problem *p,
                            const char *call) {
    if (!desc) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "the matmul descriptor is NULL");
    p->d = load_state<DescState>(desc);
    if (p->d.magic != DESC_MAGIC)
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "the matmul descriptor is not initialized");
    cublasStatus_t st;
    if ((st = check_desc(p->d, call)) != CUBLAS_STATUS_SUCCESS) return st;
    if ((st = load_matrix(Adesc, 'A', false, &p->a, call)) != CUBLAS_STATUS_SUCCESS) return st;
    if ((st = load_matrix(Bdesc, 'B', false, &p->b, call)) != CUBLAS_STATUS_SUCCESS) return st;
    if ((st = load_matrix(Ddesc, 'D', false, &p->dd, call)) != CUBLAS_STATUS_SUCCESS) return st;
    // Out of place, C's leading dimension may be 0 (row or column broadcast).
    if ((st = load_matrix(Cdesc ? Cdesc : Ddesc, 'C', !c_is_d, &p->c, call)) != CUBLAS_STATUS_SUCCESS) return st;
    p->ta = op_is_transpose(p->d.transa);
    p->tb = op_is_transpose(p->d.transb);
    if ((st = check_types(*p, call)) != CUBLAS_STATUS_SUCCESS) return st;
    if ((st = check_shapes(*p, call)) != CUBLAS_STATUS_SUCCESS) return st;
    return check_epilogue(*p, call);
}

// ---------------------------------------------------------------- algorithms

uint64_t fingerprint(const Problem &p) {
    const int64_t parts[] = {p.d.compute, p.d.scale, p.a.type, p.b.type, p.c.type, p.dd.type, p.d.epilogue,
                             p.ta, p.tb, p.a.order, p.b.order, p.dd.order};
    uint64_t h = 0xcbf29ce484222325ull;
    for (int64_t v : parts) h = (h ^ (uint64_t)v) * 0x100000001b3ull;
    return h;
}

// The alignment an algorithm may demand of one matrix: what the preference promised for its
// pointer, bounded by its leading dimension and batch stride in bytes.
uint32_t matrix_alignment(uint32_t promised, const Matrix &x) {
    size_t es = type_size(x.type);
    uint32_t a = std::min(pow2_floor(promised), align_of((uint64_t)x.ld * es));
    if (x.batch > 1) a = std::min(a, align_of((uint64_t)x.stride * es));
    return a;
}

// The heuristic's one algorithm for a valid problem, or why the preference excludes it.
cublasStatus_t choose_algo(const Problem &p, const PrefState &pref, AlgoState *out, const char *call) {
    if (pref.search_mode != CUBLASLT_SEARCH_BEST_FIT)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, call, "search mode %u: only CUBLASLT_SEARCH_BEST_FIT is emulated",
                    pref.search_mode);
    uint64_t impl = CUBLASLT_NUMERICAL_IMPL_FLAGS_FMA | CUBLASLT_NUMERICAL_IMPL_FLAGS_ACCUMULATOR_32F |
                    (p.a.type == CUDA_R_16BF ? CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_16BF
                                             : CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_32F);
    if ((impl & pref.impl_mask) != impl)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, call, "CUBLASLT_MATMUL_PREF_IMPL_MASK 0x%llx excludes the only "
                    "algorithm (FMA, fp32 accumulator)", (unsigned long long)pref.impl_mask);
    if (pref.max_waves > 0.0f && pref.max_waves < 1.0f)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, call, "CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT %g excludes the only "
                    "algorithm (1 wave)", (double)pref.max_waves);
    const Matrix *mats[4] = {&p.a, &p.b, &p.c, &p.dd};
    AlgoState a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < 4; i++) {
        size_t es = type_size(mats[i]->type);
        if (pref.align[i] < es)
            return fail(CUBLAS_STATUS_NOT_SUPPORTED, call, "the preference promises %u-byte alignment for %c, less "
                        "than its %zu-byte elements", pref.align[i], "ABCD"[i], es);
        a.align[i] = (uint16_t)matrix_alignment(pref.align[i], *mats[i]);
    }
    // The bias and aux pointers are not dereferenced here, but their values set the alignment.
    size_t es = type_size(p.dd.type);
    if (p.epi.bias != BIAS_NONE) {
        uint32_t al = align_of((uintptr_t)p.d.bias);
        if (p.batch > 1) al = std::min(al, align_of((uint64_t)p.d.bias_batch_stride * es));
        a.align[4] = (uint16_t)al;
    }
    if (p.epi.aux_in || p.epi.aux_out) {
        uint32_t al = std::min(align_of((uintptr_t)p.d.aux), align_of((uint64_t)p.d.aux_ld * es));
        if (p.batch > 1) al = std::min(al, align_of((uint64_t)p.d.aux_batch_stride * es));
        a.align[5] = (uint16_t)al;
    }
    a.magic = ALGO_MAGIC;
    a.fingerprint = fingerprint(p);
    a.workspace = std::min<uint64_t>(pref.max_workspace, 1u << 20) / 256 * 256;
    *out = a;
    return CUBLAS_STATUS_SUCCESS;
}

// An algo passed to cublasLtMatmul: NULL is the implicit heuristic with default preferences.
cublasStatus_t resolve_algo(const Problem &p, const cublasLtMatmulAlgo_t *algo, AlgoState *out, const char *call) {
    if (!algo) return choose_algo(p, default_pref(), out, call);
    AlgoState a = load_state<AlgoState>(algo);
    if (a.magic != ALGO_MAGIC)
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "algo is not one cublasLtMatmulAlgoGetHeuristic returned");
    if (a.fingerprint != fingerprint(p))
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "algo was configured for other types, transposes, orders or "
                    "epilogue than this call's");
    *out = a;
    return CUBLAS_STATUS_SUCCESS;
}

// ---------------------------------------------------------------- cublasLtMatmul checks

struct Pointers {
    const void *A, *B, *C;
    void *D;
    const void *bias;   // input (BIAS) or output (gradients), see Epi
    void *aux;
    void *workspace;
    size_t workspace_bytes;
};

// One buffer against the algorithm's alignment (and the element size): the pointer, its
// leading dimension and batch stride in bytes.
cublasStatus_t check_alignment(const void *ptr, uint32_t need, int64_t ld, int64_t stride, int batch, size_t es,
                               const char *what, const char *call) {
    uintptr_t v = (uintptr_t)ptr;
    if (v % es != 0)
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "%s %p is not aligned to its %zu-byte elements", what, ptr, es);
    if (v % need != 0 || ((uint64_t)ld * es) % need != 0 || (batch > 1 && ((uint64_t)stride * es) % need != 0))
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "%s %p (ld %lld, batch stride %lld) breaks the %u-byte "
                    "alignment the algorithm needs (promised to the heuristic, or 256 for algo NULL)", what, ptr,
                    (long long)ld, (long long)stride, need);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t check_range(const void *ptr, const Matrix &x, const char *what, const char *call) {
    uint64_t elems;
    if (!span_elems(x, &elems))
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "%s: the layout spans more than 2^64 elements", what);
    char msg[160];
    snprintf(msg, sizeof msg, "cublasLtMatmul %s (%lld x %lld, ld %lld, batch %d, stride %lld)", what,
             (long long)x.rows, (long long)x.cols, (long long)x.ld, x.batch, (long long)x.stride);
    if (!emu::check_device_range(ptr, elems * type_size(x.type), msg))
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "%s does not lie in one device allocation that holds its layout",
                    what);
    return CUBLAS_STATUS_SUCCESS;
}

// Matrices: non-NULL, aligned as the algorithm needs, inside device memory. C is checked when
// it is read (beta != 0, or a beta only known on the device).
cublasStatus_t check_matrices(const Problem &p, const AlgoState &algo, const Pointers &ptr, bool reads_c,
                              const char *call) {
    const void *bufs[4] = {ptr.A, ptr.B, ptr.C, ptr.D};
    const Matrix *mats[4] = {&p.a, &p.b, &p.c, &p.dd};
    const char *names[4] = {"A", "B", "C", "D"};
    for (int i = 0; i < 4; i++) {
        if (!bufs[i]) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "%s is NULL", names[i]);
        if (i == 2 && !reads_c) continue;
        cublasStatus_t st = check_alignment(bufs[i], algo.align[i], mats[i]->ld, mats[i]->stride, p.batch,
                                            type_size(mats[i]->type), names[i], call);
        if (st == CUBLAS_STATUS_SUCCESS) st = check_range(bufs[i], *mats[i], names[i], call);
        if (st != CUBLAS_STATUS_SUCCESS) return st;
    }
    return CUBLAS_STATUS_SUCCESS;
}

// The epilogue's vectors and matrices: the bias (length m, or n for BGRADB) and the aux matrix.
cublasStatus_t check_epilogue_buffers(const Problem &p, const AlgoState &algo, const Pointers &ptr,
                                      const char *call) {
    const Epi &e = p.epi;
    if (e.bias != BIAS_NONE) {
        if (!ptr.bias)
            return fail(CUBLAS_STATUS_INVALID_VALUE, call, "epilogue %s needs CUBLASLT_MATMUL_DESC_BIAS_POINTER", e.name);
        int64_t len = e.bias == BIAS_GRAD_B ? p.n : p.m;
        Matrix v{p.bias_type, CUBLASLT_ORDER_COL, len, 1, len, p.d.bias_batch_stride, p.batch};
        cublasStatus_t st = check_alignment(ptr.bias, algo.align[4], 0, v.stride, p.batch, type_size(v.type),
                                            "the bias vector", call);
        if (st == CUBLAS_STATUS_SUCCESS) st = check_range(ptr.bias, v, "bias vector", call);
        if (st != CUBLAS_STATUS_SUCCESS) return st;
    }
    if (e.aux_in || e.aux_out) {
        if (!ptr.aux)
            return fail(CUBLAS_STATUS_INVALID_VALUE, call, "epilogue %s needs CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER",
                        e.name);
        Matrix x{p.aux_type, CUBLASLT_ORDER_COL, p.m, p.n, p.d.aux_ld, p.d.aux_batch_stride, p.batch};
        cublasStatus_t st = check_alignment(ptr.aux, algo.align[5], x.ld, x.stride, p.batch, type_size(x.type),
                                            "the aux matrix", call);
        if (st == CUBLAS_STATUS_SUCCESS) st = check_range(ptr.aux, x, "aux matrix", call);
        if (st != CUBLAS_STATUS_SUCCESS) return st;
    }
    return CUBLAS_STATUS_SUCCESS;
}

// The byte runs a matrix's elements occupy, [start, end): one per column of a column-major
// matrix (a row of a row-major one) and batch instance.
void element_runs(const void *base, const Matrix &x, std::vector<std::pair<uintptr_t, uintptr_t>> &out) {
    int64_t inner = x.order == CUBLASLT_ORDER_COL ? x.rows : x.cols;
    int64_t outer = x.order == CUBLASLT_ORDER_COL ? x.cols : x.rows;
    size_t es = type_size(x.type);
    for (int64_t b = 0; b < x.batch; b++)
        for (int64_t j = 0; j < outer; j++) {
            uintptr_t at = (uintptr_t)base + (uintptr_t)((b * x.stride + j * x.ld) * (int64_t)es);
            out.emplace_back(at, at + (uintptr_t)(inner * (int64_t)es));
        }
}

// Whether matrices x at px and y at py share a byte: their extents first, then (only when
// those meet) their element runs, swept in address order.
bool matrices_overlap(const void *px, const Matrix &x, const void *py, const Matrix &y) {
    uint64_t ex, ey;
    if (!span_elems(x, &ex) || !span_elems(y, &ey) || ex == 0 || ey == 0) return false;
    uintptr_t x0 = (uintptr_t)px, x1 = x0 + ex * type_size(x.type);
    uintptr_t y0 = (uintptr_t)py, y1 = y0 + ey * type_size(y.type);
    if (x1 <= y0 || y1 <= x0) return false;
    std::vector<std::pair<uintptr_t, uintptr_t>> rx, ry;
    element_runs(px, x, rx);
    element_runs(py, y, ry);
    std::sort(rx.begin(), rx.end());
    std::sort(ry.begin(), ry.end());
    // two sorted lists of runs (each may overlap itself): a run of x meets a run of y
    size_t i = 0, j = 0;
    uintptr_t xend = 0, yend = 0;   // the furthest end of the runs passed so far
    while (i < rx.size() || j < ry.size()) {
        if (j == ry.size() || (i < rx.size() && rx[i].first <= ry[j].first)) {
            if (rx[i].first < yend) return true;
            xend = std::max(xend, rx[i].second);
            i++;
        } else {
            if (ry[j].first < xend) return true;
            yend = std::max(yend, ry[j].second);
            j++;
        }
    }
    return false;
}

// "This function supports both in-place matrix multiplication (C == D and Cdesc == Ddesc)
// and out-of-place matrix multiplication (C != D ...)" (cublasLtMatmul): the output may
// share memory with C only as that same matrix. D sharing a byte with A or B, or with a C
// it is not (when C is read), is refused: on a GPU the elements of D are written while
// other threads still read those bytes as inputs.
cublasStatus_t check_aliasing(const Problem &p, const Pointers &ptr, bool reads_c, const char *call) {
    const Matrix *ins[3] = {&p.a, &p.b, &p.c};
    const void *in_ptrs[3] = {ptr.A, ptr.B, ptr.C};
    for (int i = 0; i < 3; i++) {
        if (i == 2 && (!reads_c || ptr.C == ptr.D)) continue;
        if (matrices_overlap(ptr.D, p.dd, in_ptrs[i], *ins[i]))
            return fail(CUBLAS_STATUS_INVALID_VALUE, call, "D (%p) shares memory with %s (%p)%s: cublasLtMatmul "
                        "supports in place only C == D with Cdesc == Ddesc", ptr.D, i == 2 ? "C" : i ? "B" : "A",
                        in_ptrs[i], i == 2 ? " without being the same matrix" : ", an input");
    }
    return CUBLAS_STATUS_SUCCESS;
}

// "The workspace pointer must be aligned to at least a multiple of 256 bytes"; the size must
// cover what the algorithm asked for.
cublasStatus_t check_workspace(const AlgoState &algo, const Pointers &ptr, const char *call) {
    if (ptr.workspace_bytes < algo.workspace)
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "workspaceSizeInBytes %zu is less than the %llu bytes the "
                    "algorithm requires", ptr.workspace_bytes, (unsigned long long)algo.workspace);
    if (ptr.workspace_bytes == 0) return CUBLAS_STATUS_SUCCESS;
    if (!ptr.workspace)
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "workspace is NULL with workspaceSizeInBytes %zu",
                    ptr.workspace_bytes);
    if ((uintptr_t)ptr.workspace % 256 != 0)
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "workspace %p is not 256-byte aligned", ptr.workspace);
    if (!emu::check_device_range(ptr.workspace, ptr.workspace_bytes, "cublasLtMatmul workspace"))
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "the workspace is not device memory of workspaceSizeInBytes");
    return CUBLAS_STATUS_SUCCESS;
}

// alpha and beta: host values read now (CUBLASLT_POINTER_MODE_HOST), or device scalars read
// when the work runs.
struct Scalars {
    bool on_device;
    float alpha, beta;
    const float *dalpha, *dbeta;
};

cublasStatus_t read_scalars(const DescState &d, const void *alpha, const void *beta, Scalars *s, const char *call) {
    if (!alpha || !beta) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "alpha or beta is NULL");
    memset(s, 0, sizeof *s);
    if (d.pointer_mode == CUBLASLT_POINTER_MODE_DEVICE) {
        if (!emu::check_device_range(alpha, sizeof(float), "cublasLtMatmul alpha (CUBLASLT_POINTER_MODE_DEVICE)") ||
            !emu::check_device_range(beta, sizeof(float), "cublasLtMatmul beta (CUBLASLT_POINTER_MODE_DEVICE)"))
            return fail(CUBLAS_STATUS_INVALID_VALUE, call, "alpha/beta must be device memory in pointer mode DEVICE");
        s->on_device = true;
        s->dalpha = (const float *)alpha;
        s->dbeta = (const float *)beta;
        return CUBLAS_STATUS_SUCCESS;
    }
    if (emu::mem_kind(alpha) == emu::MEM_DEVICE || emu::mem_kind(beta) == emu::MEM_DEVICE)
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "alpha %p / beta %p: device memory in "
                    "CUBLASLT_POINTER_MODE_HOST (the host would dereference a device pointer)", alpha, beta);
    s->alpha = *(const float *)alpha;
    s->beta = *(const float *)beta;
    return CUBLAS_STATUS_SUCCESS;
}

// ---------------------------------------------------------------- the computation

float gelu(float x) {
    const float s = 0.7978845608028654f;   // sqrt(2/pi)
    return 0.5f * x * (1.0f + tanhf(s * (x + 0.044715f * x * x * x)));
}

// d/dx of gelu above.
float gelu_grad(float x) {
    const float s = 0.7978845608028654f;
    float t = tanhf(s * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * s * (1.0f + 3.0f * 0.044715f * x * x);
}

struct Job {
    Problem p;
    Pointers ptr;
    Scalars sc;
    size_t scribble;   // workspace bytes the algorithm uses
    std::string what;
};

// The algorithm writes its workspace as scratch, so two matmuls that use the same bytes of
// it must be ordered (stream order, an event wait, a synchronization before the second is
// queued): otherwise a GPU may run both at once and each overwrites the other's partial
// results. Each use is kept (its range and its op, the latest per stream), and a matmul on
// another stream that nothing orders after an earlier use, or before which an earlier use
// is not ordered, is reported, whichever of the two the emulator happens to run first.
struct WorkspaceUse {
    uintptr_t lo, hi;
    emu::OpStamp op;
    std::string what;
};
std::mutex g_ws_mu;
std::vector<WorkspaceUse> g_ws_uses;

void check_workspace_order(const Job &j) {
    if (!j.scribble) return;
    const uintptr_t lo = (uintptr_t)j.ptr.workspace, hi = lo + j.scribble;
    const emu::OpStamp me = emu::running_op();
    std::lock_guard<std::mutex> lk(g_ws_mu);
    for (size_t i = 0; i < g_ws_uses.size();) {
        const WorkspaceUse &u = g_ws_uses[i];
        if (u.hi <= lo || hi <= u.lo) { i++; continue; }
        if (u.op.stream != me.stream && !emu::ordered_before_running(u.op))
            emu::die("cuBLASLt: cublasLtMatmul (%s) on stream #%d and cublasLtMatmul (%s) on stream #%d (the emulator's streams in creation order) use the same "
                     "workspace bytes (%p, %zu bytes) with nothing ordering one after the other (no event wait, no "
                     "synchronization between them): on a GPU they may run at once and overwrite each other's scratch",
                     u.what.c_str(), u.op.stream, j.what.c_str(), me.stream, (void *)lo, j.scribble);
        if (u.op.stream == me.stream) g_ws_uses.erase(g_ws_uses.begin() + (long)i);
        else i++;
    }
    g_ws_uses.push_back(WorkspaceUse{lo, hi, me, j.what});
}

// op(X) of one batch instance as floats, row-major: out[r * cols + c] = op(X)[r][c].
void gather_op(const void *base, const Matrix &x, bool trans, int64_t b, std::vector<float> &out) {
    int64_t rows = trans ? x.cols : x.rows, cols = trans ? x.rows : x.cols;
    out.resize((size_t)(rows * cols));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            out[(size_t)(r * cols + c)] = load(base, x.type, trans ? offset_of(x, b, c, r) : offset_of(x, b, r, c));
}

// The dot products of op(A) rows [i0, i0 + rows) with op(B) columns [c0, c0 + w), into
// acc (row r at acc + r * ld): each one summed over k in ascending order in fp32, a
// separately rounded multiply and add per term (-ffp-contract=off). bt: the columns packed
// k x w, contiguous. Full tiles hold 8 rows x 64 columns in vector registers (lanes are
// columns: no sum changes its order); what is left goes one sum at a time.
constexpr int64_t ROW_TILE = 8, COL_TILE = 64, ROW_GROUP = 128;
typedef float v16 __attribute__((vector_size(64)));

void dot_tile(const float *A, int64_t k, int64_t rows, const float *bt, int64_t w, float *acc, int64_t ld) {
    int64_t r0 = 0;
    if (w == COL_TILE)
        for (; r0 + ROW_TILE <= rows; r0 += ROW_TILE) {
            v16 t[ROW_TILE][4] = {};
            for (int64_t l = 0; l < k; l++) {
                v16 b[4];
                memcpy(b, bt + l * COL_TILE, sizeof b);
                for (int r = 0; r < ROW_TILE; r++) {
                    const float a = A[(r0 + r) * k + l];
                    for (int q = 0; q < 4; q++) t[r][q] += a * b[q];
                }
            }
            for (int r = 0; r < ROW_TILE; r++) memcpy(acc + (r0 + r) * ld, t[r], sizeof t[r]);
        }
    for (int64_t r = r0; r < rows; r++)
        for (int64_t c = 0; c < w; c++) {
            float sum = 0.0f;
            for (int64_t l = 0; l < k; l++) sum += A[r * k + l] * bt[l * w + c];
            acc[r * ld + c] = sum;
        }
}

// Rows [i0, i0 + rows) of op(A) times op(B) into acc (rows x n): column tile by column tile,
// each packed once and used for every row, across threads.
void dot_rows(const Problem &p, int64_t i0, int64_t rows, const std::vector<float> &opa, const std::vector<float> &opb,
              float *acc) {
    const int64_t n = p.n, k = p.k, ntiles = (n + COL_TILE - 1) / COL_TILE;
    const float *A = opa.data() + i0 * k, *B = opb.data();
#pragma omp parallel
    {
        std::vector<float> bt((size_t)(k * COL_TILE));
#pragma omp for schedule(static)
        for (int64_t t = 0; t < ntiles; t++) {
            const int64_t c0 = t * COL_TILE, w = n - c0 < COL_TILE ? n - c0 : COL_TILE;
            for (int64_t l = 0; l < k; l++) memcpy(&bt[(size_t)(l * w)], B + l * n + c0, (size_t)w * sizeof(float));
            dot_tile(A, k, rows, bt.data(), w, acc + c0, n);
        }
    }
}

// Row i of D for batch instance b from its dot products acc (dot_rows): alpha/beta, bias,
// aux, activation, and the per-row bias gradients.
void run_row(const Job &j, int64_t b, int64_t i, float alpha, float beta, const std::vector<float> &opa,
             const float *acc) {
    const Problem &p = j.p;
    const Epi &e = p.epi;
    const int64_t n = p.n, k = p.k;
    const int64_t bias_at = b * p.d.bias_batch_stride + i;
    const float bias = e.bias == BIAS_ADD ? load(j.ptr.bias, p.bias_type, bias_at) : 0.0f;
    const int64_t aux_base = b * p.d.aux_batch_stride + i;
    float bgrad = 0.0f;
    for (int64_t c = 0; c < n; c++) {
        float x = alpha * acc[(size_t)c];
        if (beta != 0.0f) x += beta * load(j.ptr.C, p.c.type, offset_of(p.c, b, i, c));
        if (e.bias == BIAS_ADD) x += bias;
        if (e.aux_out) store(j.ptr.aux, p.aux_type, aux_base + c * p.d.aux_ld, x);
        float y = x;
        if (e.act == ACT_RELU) y = x > 0.0f ? x : 0.0f;
        else if (e.act == ACT_GELU) y = gelu(x);
        else if (e.act == ACT_DGELU) y = x * gelu_grad(load(j.ptr.aux, p.aux_type, aux_base + c * p.d.aux_ld));
        bgrad += y;
        store(j.ptr.D, p.dd.type, offset_of(p.dd, b, i, c), y);
    }
    if (e.bias == BIAS_GRAD_D) store((void *)j.ptr.bias, p.bias_type, bias_at, bgrad);
    if (e.bias == BIAS_GRAD_A) {
        float s = 0.0f;
        for (int64_t l = 0; l < k; l++) s += opa[(size_t)(i * k + l)];
        store((void *)j.ptr.bias, p.bias_type, bias_at, s);
    }
}

// BGRADB: the sums of op(B) over k, one per column of D.
void run_bgradb(const Job &j, int64_t b, const std::vector<float> &opb) {
    const Problem &p = j.p;
    std::vector<float> s((size_t)p.n, 0.0f);
    for (int64_t l = 0; l < p.k; l++)
        for (int64_t c = 0; c < p.n; c++) s[(size_t)c] += opb[(size_t)(l * p.n + c)];
    for (int64_t c = 0; c < p.n; c++) store((void *)j.ptr.bias, p.bias_type, b * p.d.bias_batch_stride + c, s[(size_t)c]);
}

// The stream work of one cublasLtMatmul.
void run_matmul(const Job &j) {
    const Problem &p = j.p;
    const float alpha = j.sc.on_device ? *j.sc.dalpha : j.sc.alpha;
    const float beta = j.sc.on_device ? *j.sc.dbeta : j.sc.beta;
    // The workspace holds nothing meaningful after the call.
    check_workspace_order(j);
    if (j.scribble) memset(j.ptr.workspace, 0xa5, j.scribble);
    std::vector<float> opa, opb;
    for (int64_t b = 0; b < p.batch; b++) {
        gather_op(j.ptr.A, p.a, p.ta, b, opa);
        gather_op(j.ptr.B, p.b, p.tb, b, opb);
        std::vector<float> acc((size_t)((p.m < ROW_GROUP ? p.m : ROW_GROUP) * p.n));
        for (int64_t i0 = 0; i0 < p.m; i0 += ROW_GROUP) {
            const int64_t rows = p.m - i0 < ROW_GROUP ? p.m - i0 : ROW_GROUP;
            dot_rows(p, i0, rows, opa, opb, acc.data());
#pragma omp parallel for schedule(static)
            for (int64_t r = 0; r < rows; r++) run_row(j, b, i0 + r, alpha, beta, opa, acc.data() + r * p.n);
            emu::progress();   // a long matmul is not a hang
        }
        if (p.epi.bias == BIAS_GRAD_B) run_bgradb(j, b, opb);
    }
}

cublasStatus_t enqueue_status(cudaError_t e, const char *call) {
    if (e == cudaSuccess) return CUBLAS_STATUS_SUCCESS;
    if (e == cudaErrorInvalidResourceHandle)
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "the stream is not a live stream (%s)", cudaGetErrorName(e));
    return fail(CUBLAS_STATUS_EXECUTION_FAILED, call, "queuing the work failed: %s", cudaGetErrorName(e));
}

// The checks every entry point that touches the device makes.
bool from_host_function(const char *call) {
    emu::init();
    if (!emu::in_host_function()) return false;
    emu::say("cuBLASLt: %s called from a host function (cudaLaunchHostFunc): host functions must not make CUDA "
             "calls", call);
    return true;
}

}  // namespace

// ---------------------------------------------------------------- the API

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle) {
    const char *call = "cublasLtCreate";
    if (from_host_function(call)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!lightHandle) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "lightHandle is NULL");
    cublasLtHandle_t h = new cublasLtContext();
    std::lock_guard<std::mutex> lk(g_handles_mu);
    g_handles.insert(h);
    *lightHandle = h;
    return CUBLAS_STATUS_SUCCESS;
}

// "the release of those resources ... will implicitly call cudaDeviceSynchronize()"
cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
    const char *call = "cublasLtDestroy";
    if (from_host_function(call)) return CUBLAS_STATUS_INTERNAL_ERROR;
    if (!lightHandle) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "lightHandle is NULL");
    {
        std::lock_guard<std::mutex> lk(g_handles_mu);
        if (!g_handles.erase(lightHandle))
            return fail(CUBLAS_STATUS_NOT_INITIALIZED, call, "%p is not a live cuBLASLt handle", (void *)lightHandle);
    }
    cudaDeviceSynchronize();
    delete lightHandle;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasLtGetStatusName(cublasStatus_t status) {
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

// The meanings the cublasStatus_t reference gives each value.
const char *cublasLtGetStatusString(cublasStatus_t status) {
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "resource allocation failed inside the library";
    case CUBLAS_STATUS_INVALID_VALUE: return "an unsupported value or parameter was passed to the function";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "the function requires a feature absent from the device architecture";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "the functionality requested requires a license";
    }
    return "unknown status";
}

size_t cublasLtGetVersion(void) { return CUBLAS_VERSION; }

size_t cublasLtGetCudartVersion(void) { return CUDART_VERSION; }

cublasStatus_t cublasLtGetProperty(libraryPropertyType type, int *value) {
    if (!value) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtGetProperty", "value is NULL");
    switch (type) {
    case MAJOR_VERSION: *value = CUBLAS_VER_MAJOR; return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION: *value = CUBLAS_VER_MINOR; return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = CUBLAS_VER_PATCH; return CUBLAS_STATUS_SUCCESS;
    }
    return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtGetProperty", "type %d is not a libraryPropertyType", (int)type);
}

// ---- matmul descriptors

cublasStatus_t cublasLtMatmulDescInit_internal(cublasLtMatmulDesc_t matmulDesc, size_t size,
                                               cublasComputeType_t computeType, cudaDataType_t scaleType) {
    if (!matmulDesc) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescInit", "matmulDesc is NULL");
    if (size < sizeof(DescState)) return CUBLAS_STATUS_ALLOC_FAILED;
    store_state(matmulDesc, default_desc(computeType, scaleType));
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
    if (!matmulDesc) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescCreate", "matmulDesc is NULL");
    cublasLtMatmulDesc_t d = new cublasLtMatmulDescOpaque_t();
    store_state(d, default_desc(computeType, scaleType));
    *matmulDesc = d;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
    if (!matmulDesc) return CUBLAS_STATUS_SUCCESS;
    memset(matmulDesc->data, 0, sizeof matmulDesc->data);   // a use after destroy finds no magic
    delete matmulDesc;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t sizeInBytes) {
    const char *call = "cublasLtMatmulDescSetAttribute";
    if (!matmulDesc) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "matmulDesc is NULL");
    DescState s = load_state<DescState>(matmulDesc);
    if (s.magic != DESC_MAGIC) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "matmulDesc is not initialized");
    cublasStatus_t st = set_field(&s, find_field(DESC_FIELDS, attr), attr, buf, sizeInBytes, call);
    if (st == CUBLAS_STATUS_SUCCESS) store_state(matmulDesc, s);
    return st;
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              void *buf, size_t sizeInBytes, size_t *sizeWritten) {
    const char *call = "cublasLtMatmulDescGetAttribute";
    if (!matmulDesc) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "matmulDesc is NULL");
    DescState s = load_state<DescState>(matmulDesc);
    if (s.magic != DESC_MAGIC) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "matmulDesc is not initialized");
    return get_field(&s, find_field(DESC_FIELDS, attr), attr, buf, sizeInBytes, sizeWritten, call);
}

// ---- matrix layouts

cublasStatus_t cublasLtMatrixLayoutInit_internal(cublasLtMatrixLayout_t matLayout, size_t size, cudaDataType type,
                                                 uint64_t rows, uint64_t cols, int64_t ld) {
    if (!matLayout) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutInit", "matLayout is NULL");
    if (size < sizeof(LayoutState)) return CUBLAS_STATUS_ALLOC_FAILED;
    store_state(matLayout, default_layout(type, rows, cols, ld));
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
    if (!matLayout) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutCreate", "matLayout is NULL");
    cublasLtMatrixLayout_t l = new cublasLtMatrixLayoutOpaque_t();
    store_state(l, default_layout(type, rows, cols, ld));
    *matLayout = l;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
    if (!matLayout) return CUBLAS_STATUS_SUCCESS;
    memset(matLayout->data, 0, sizeof matLayout->data);
    delete matLayout;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t sizeInBytes) {
    const char *call = "cublasLtMatrixLayoutSetAttribute";
    if (!matLayout) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "matLayout is NULL");
    LayoutState s = load_state<LayoutState>(matLayout);
    if (s.magic != LAYOUT_MAGIC) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "matLayout is not initialized");
    cublasStatus_t st = set_field(&s, find_field(LAYOUT_FIELDS, attr), attr, buf, sizeInBytes, call);
    if (st == CUBLAS_STATUS_SUCCESS) store_state(matLayout, s);
    return st;
}

cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr,
                                                void *buf, size_t sizeInBytes, size_t *sizeWritten) {
    const char *call = "cublasLtMatrixLayoutGetAttribute";
    if (!matLayout) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "matLayout is NULL");
    LayoutState s = load_state<LayoutState>(matLayout);
    if (s.magic != LAYOUT_MAGIC) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "matLayout is not initialized");
    return get_field(&s, find_field(LAYOUT_FIELDS, attr), attr, buf, sizeInBytes, sizeWritten, call);
}

// ---- heuristic preferences

cublasStatus_t cublasLtMatmulPreferenceInit_internal(cublasLtMatmulPreference_t pref, size_t size) {
    if (!pref) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceInit", "pref is NULL");
    if (size < sizeof(PrefState)) return CUBLAS_STATUS_ALLOC_FAILED;
    store_state(pref, default_pref());
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
    if (!pref) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceCreate", "pref is NULL");
    cublasLtMatmulPreference_t p = new cublasLtMatmulPreferenceOpaque_t();
    store_state(p, default_pref());
    *pref = p;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    if (!pref) return CUBLAS_STATUS_SUCCESS;
    memset(pref->data, 0, sizeof pref->data);
    delete pref;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t sizeInBytes) {
    const char *call = "cublasLtMatmulPreferenceSetAttribute";
    if (!pref) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "pref is NULL");
    PrefState s = load_state<PrefState>(pref);
    if (s.magic != PREF_MAGIC) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "pref is not initialized");
    cublasStatus_t st = set_field(&s, find_field(PREF_FIELDS, attr), attr, buf, sizeInBytes, call);
    if (st == CUBLAS_STATUS_SUCCESS) store_state(pref, s);
    return st;
}

cublasStatus_t cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, void *buf,
                                                    size_t sizeInBytes, size_t *sizeWritten) {
    const char *call = "cublasLtMatmulPreferenceGetAttribute";
    if (!pref) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "pref is NULL");
    PrefState s = load_state<PrefState>(pref);
    if (s.magic != PREF_MAGIC) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "pref is not initialized");
    return get_field(&s, find_field(PREF_FIELDS, attr), attr, buf, sizeInBytes, sizeWritten, call);
}

// ---- heuristic and matmul

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int *returnAlgoCount) {
    const char *call = "cublasLtMatmulAlgoGetHeuristic";
    if (from_host_function(call)) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (!handle_live(lightHandle))
        return fail(CUBLAS_STATUS_NOT_INITIALIZED, call, "%p is not a live cuBLASLt handle", (void *)lightHandle);
    if (returnAlgoCount) *returnAlgoCount = 0;
    if (requestedAlgoCount <= 0)
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "requestedAlgoCount %d", requestedAlgoCount);
    if (!heuristicResultsArray || !returnAlgoCount)
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "heuristicResultsArray or returnAlgoCount is NULL");
    if (!preference) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "preference is NULL");
    PrefState pref = load_state<PrefState>(preference);
    if (pref.magic != PREF_MAGIC) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "preference is not initialized");
    Problem p;
    cublasStatus_t st = make_problem(operationDesc, Adesc, Bdesc, Cdesc, Ddesc, false, &p, call);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    AlgoState a;
    if ((st = choose_algo(p, pref, &a, call)) != CUBLAS_STATUS_SUCCESS) return st;
    cublasLtMatmulHeuristicResult_t &r = heuristicResultsArray[0];
    memset(&r, 0, sizeof r);
    store_state(&r.algo, a);
    r.workspaceSize = a.workspace;
    r.state = CUBLAS_STATUS_SUCCESS;
    r.wavesCount = 1.0f;
    *returnAlgoCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t Adesc, const void *B, cublasLtMatrixLayout_t Bdesc,
                              const void *beta, const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspaceSizeInBytes, cudaStream_t stream) {
    const char *call = "cublasLtMatmul";
    if (from_host_function(call)) return CUBLAS_STATUS_EXECUTION_FAILED;
    if (!handle_live(lightHandle))
        return fail(CUBLAS_STATUS_NOT_INITIALIZED, call, "%p is not a live cuBLASLt handle", (void *)lightHandle);
    Job j;
    const bool in_place = C == D;
    cublasStatus_t st = make_problem(computeDesc, Adesc, Bdesc, Cdesc, Ddesc, in_place, &j.p, call);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    const Problem &p = j.p;
    // In place (C == D) the two layouts must be the same.
    if (in_place && (p.c.ld != p.dd.ld || p.c.stride != p.dd.stride))
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "C == D but Cdesc (ld %lld, stride %lld) differs from Ddesc "
                    "(ld %lld, stride %lld)", (long long)p.c.ld, (long long)p.c.stride, (long long)p.dd.ld,
                    (long long)p.dd.stride);
    AlgoState a;
    if ((st = resolve_algo(p, algo, &a, call)) != CUBLAS_STATUS_SUCCESS) return st;
    if ((st = read_scalars(p.d, alpha, beta, &j.sc, call)) != CUBLAS_STATUS_SUCCESS) return st;
    j.ptr = Pointers{A, B, C, D, p.d.bias, p.d.aux, workspace, workspaceSizeInBytes};
    const bool reads_c = j.sc.on_device || j.sc.beta != 0.0f;
    if ((st = check_matrices(p, a, j.ptr, reads_c, call)) != CUBLAS_STATUS_SUCCESS) return st;
    if ((st = check_epilogue_buffers(p, a, j.ptr, call)) != CUBLAS_STATUS_SUCCESS) return st;
    if ((st = check_aliasing(p, j.ptr, reads_c, call)) != CUBLAS_STATUS_SUCCESS) return st;
    if ((st = check_workspace(a, j.ptr, call)) != CUBLAS_STATUS_SUCCESS) return st;
    j.scribble = (size_t)a.workspace;
    char what[160];
    snprintf(what, sizeof what, "cublasLtMatmul %lldx%lldx%lld batch %d epilogue %s", (long long)p.m, (long long)p.n,
             (long long)p.k, p.batch, p.epi.name);
    j.what = what + 15;   // "mxnxk batch b epilogue e"
    // A kind of matmul (types, transposes, epilogue) runs kernels of its own: their first
    // use loads them (lazy loading, emu.h)
    char kind[160];
    snprintf(kind, sizeof kind, "cuBLASLt's kernels for %s%s x %s%s -> %s with epilogue %s", type_name(p.a.type),
             p.ta ? "^T" : "", type_name(p.b.type), p.tb ? "^T" : "", type_name(p.dd.type), p.epi.name);
    emu::load_library_kernels(kind);
    return enqueue_status(emu::enqueue(stream, what, [j] { run_matmul(j); }), call);
}

}  // extern "C"
