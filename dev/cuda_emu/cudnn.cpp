// cudnn.cpp: the emulated cuDNN 9 backend (graph) API. Descriptors are built with
// cudnnBackendCreateDescriptor / SetAttribute / Finalize; engine heuristics give engine configs,
// execution plans report their workspace, and cudnnBackendExecute interprets the operation graph
// on the CPU, queued on the handle's stream (emu::enqueue), in fp32 compute with every tensor
// read and written in its own data type through its own strides.
//
// Types, enum values and signatures are NVIDIA's <cudnn.h> (the toolkit's, 9.19 here).
// Semantics come from NVIDIA's cuDNN 9 documentation: the backend descriptor types with their
// attributes and finalization rules, cudnnBackendSetAttribute / GetAttribute / Finalize / Execute
// and their return codes (set on a finalized descriptor: NOT_INITIALIZED; get on one not yet
// finalized: NOT_INITIALIZED; a wrong attribute name, type or count: BAD_PARAM),
// cudnnPointwiseMode_t (y = op(alpha1 * x [, alpha2 * b])), and from NVIDIA's cudnn-frontend
// headers, which document what the attributes mean:
//  - BINARY_SELECT takes x (XDESC), b (BDESC) and a mask t (TDESC): y = t ? x : b.
//  - GEN_INDEX writes each element's index along CUDNN_ATTR_POINTWISE_AXIS; x gives the shape.
//  - backward activations (*_BWD) take dy (DYDESC) and x (XDESC) and write dx (DXDESC).
//  - RESHAPE: before 9.22 there is no reshape mode and the operation is the default VIEW_ONLY
//    one: y is a view of x's memory, its element at index i is the one at offset sum(i * y's
//    strides). A transpose is y with permuted dims and the matching permuted strides.
//  - matmul: C[..., M, N] = A[..., M, K] * B[..., K, N], a batch dim of size 1 broadcasts.
//  - pointwise and reduction operands broadcast where a dim is 1; a reduction reduces the dims
//    where y has size 1.
// Where the documentation leaves a choice, the emulation takes the one that exposes a caller
// relying on luck: the plan asks for a workspace and the engine overwrites it before every
// operation, virtual tensors start as NaN, layouts are always read through their strides.
// SDPA_FWD/BWD and the other fused node types are not emulated (llmc/cuda/attention_cudnn.cu
// builds attention from matmul, pointwise, reduction and reshape nodes).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "emu.h"

struct cudnnContext {
    cudaStream_t stream = 0;
};

namespace {

// ---------------------------------------------------------------- errors

thread_local std::string t_last_error;   // cudnnGetLastErrorString

const char *status_name(int s) {
    switch (s) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH: return "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH";
    case CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH: return "CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH";
    case CUDNN_STATUS_DEPRECATED: return "CUDNN_STATUS_DEPRECATED";
    case CUDNN_STATUS_LICENSE_ERROR: return "CUDNN_STATUS_LICENSE_ERROR";
    case CUDNN_STATUS_RUNTIME_IN_PROGRESS: return "CUDNN_STATUS_RUNTIME_IN_PROGRESS";
    case CUDNN_STATUS_RUNTIME_FP_OVERFLOW: return "CUDNN_STATUS_RUNTIME_FP_OVERFLOW";
    case CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED: return "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case 2001: return "CUDNN_STATUS_INVALID_VALUE";
    case CUDNN_STATUS_BAD_PARAM_NULL_POINTER: return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
    case CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER: return "CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER";
    case CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED: return "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED";
    case CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND: return "CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND";
    case CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT: return "CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT";
    case CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH: return "CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH";
    case CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH: return "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH";
    case CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES: return "CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES";
    case CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE: return "CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE";
    case CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH: return "CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH";
    case CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE: return "CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN: return "CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN";
    case CUDNN_STATUS_NOT_SUPPORTED_SHAPE: return "CUDNN_STATUS_NOT_SUPPORTED_SHAPE";
    case CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE: return "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE";
    case CUDNN_STATUS_NOT_SUPPORTED_LAYOUT: return "CUDNN_STATUS_NOT_SUPPORTED_LAYOUT";
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER:
        return "CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER";
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART: return "CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART";
    case CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH: return "CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH";
    case CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING:
        return "CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING";
    case CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE: return "CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE";
    case CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT:
        return "CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT";
    case CUDNN_STATUS_NOT_SUPPORTED_PADDING: return "CUDNN_STATUS_NOT_SUPPORTED_PADDING";
    case CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM: return "CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API: return "CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API";
    case CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE: return "CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE";
    case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED: return "CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED";
    case CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE: return "CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE";
    case CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED:
        return "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED";
    case CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED:
        return "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED";
    case CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM: return "CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM";
    case CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED:
        return "CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    case CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER: return "CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER";
    case CUDNN_STATUS_EXECUTION_FAILED_CUBLAS: return "CUDNN_STATUS_EXECUTION_FAILED_CUBLAS";
    case CUDNN_STATUS_EXECUTION_FAILED_CUDART: return "CUDNN_STATUS_EXECUTION_FAILED_CUDART";
    case CUDNN_STATUS_EXECUTION_FAILED_CURAND: return "CUDNN_STATUS_EXECUTION_FAILED_CURAND";
    }
    return "CUDNN_STATUS_UNKNOWN (not a cudnnStatus_t value)";
}

// Records the message for cudnnGetLastErrorString, prints it, and returns st.
cudnnStatus_t fail(cudnnStatus_t st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
cudnnStatus_t fail(cudnnStatus_t st, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    t_last_error = msg;
    emu::say("cuDNN: %s: %s", status_name(st), msg);
    return st;
}

// The check every entry point makes first: the CUDA documentation forbids CUDA calls (and so the
// libraries built on them) from a host function.
#define FROM_HOST_FUNCTION_CHECK()                                                                          \
    do {                                                                                                    \
        emu::init();                                                                                        \
        if (emu::in_host_function())                                                                        \
            return fail(CUDNN_STATUS_EXECUTION_FAILED_CUDART,                                               \
                        "%s called from a host function (cudaLaunchHostFunc): the CUDA runtime refuses "    \
                        "calls there (cudaErrorNotPermitted)", __func__);                                   \
    } while (0)

// ---------------------------------------------------------------- data types

const char *dtype_name(cudnnDataType_t t) {
    static const char *names[] = {"FLOAT", "DOUBLE", "HALF", "INT8", "INT32", "INT8x4", "UINT8", "UINT8x4",
                                  "INT8x32", "BFLOAT16", "INT64", "BOOLEAN", "FP8_E4M3", "FP8_E5M2",
                                  "FAST_FLOAT_FOR_FP8", "FP8_E8M0", "FP4_E2M1", "INT4", "UINT4", "UINT32",
                                  "COMPLEX_FP32", "COMPLEX_FP64"};
    int i = (int)t;
    return i >= 0 && i < (int)(sizeof names / sizeof names[0]) ? names[i] : "(invalid data type)";
}

bool valid_dtype(int t) { return t >= CUDNN_DATA_FLOAT && t <= CUDNN_DATA_COMPLEX_FP64; }

// Bytes of one element in memory for the types the emulated engine reads and writes there; 0
// for the others (BOOLEAN lives only in virtual tensors here).
size_t dtype_bytes(cudnnDataType_t t) {
    switch (t) {
    case CUDNN_DATA_FLOAT: case CUDNN_DATA_INT32: return 4;
    case CUDNN_DATA_DOUBLE: case CUDNN_DATA_INT64: return 8;
    case CUDNN_DATA_HALF: case CUDNN_DATA_BFLOAT16: return 2;
    case CUDNN_DATA_INT8: case CUDNN_DATA_UINT8: return 1;
    default: return 0;
    }
}

// The element size the documented alignment rule divides by (0: unknown, no rule applied).
size_t dtype_align_unit(cudnnDataType_t t) {
    switch (t) {
    case CUDNN_DATA_FP8_E4M3: case CUDNN_DATA_FP8_E5M2: case CUDNN_DATA_FP8_E8M0: return 1;
    case CUDNN_DATA_INT8x4: case CUDNN_DATA_UINT8x4: case CUDNN_DATA_UINT32: return 4;
    case CUDNN_DATA_INT8x32: return 32;
    case CUDNN_DATA_COMPLEX_FP32: return 8;
    case CUDNN_DATA_COMPLEX_FP64: return 16;
    default: return dtype_bytes(t);
    }
}

template <typename I> I to_int(float v) {
    if (v != v) return 0;
    if (v <= (float)std::numeric_limits<I>::min()) return std::numeric_limits<I>::min();
    if (v >= (float)std::numeric_limits<I>::max()) return std::numeric_limits<I>::max();
    return (I)v;   // toward zero, as a C conversion
}

float load(cudnnDataType_t t, const char *p, int64_t i) {
    switch (t) {
    case CUDNN_DATA_FLOAT: return ((const float *)p)[i];
    case CUDNN_DATA_DOUBLE: return (float)((const double *)p)[i];
    case CUDNN_DATA_HALF: return __half2float(((const __half *)p)[i]);
    case CUDNN_DATA_BFLOAT16: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    case CUDNN_DATA_INT32: return (float)((const int32_t *)p)[i];
    case CUDNN_DATA_INT64: return (float)((const int64_t *)p)[i];
    case CUDNN_DATA_INT8: return (float)((const int8_t *)p)[i];
    case CUDNN_DATA_UINT8: return (float)((const uint8_t *)p)[i];
    default: return NAN;
    }
}

void store(cudnnDataType_t t, char *p, int64_t i, float v) {
    switch (t) {
    case CUDNN_DATA_FLOAT: ((float *)p)[i] = v; break;
    case CUDNN_DATA_DOUBLE: ((double *)p)[i] = v; break;
    case CUDNN_DATA_HALF: ((__half *)p)[i] = __float2half(v); break;   // round to nearest even
    case CUDNN_DATA_BFLOAT16: ((__nv_bfloat16 *)p)[i] = __float2bfloat16(v); break;
    case CUDNN_DATA_INT32: ((int32_t *)p)[i] = to_int<int32_t>(v); break;
    case CUDNN_DATA_INT64: ((int64_t *)p)[i] = to_int<int64_t>(v); break;
    case CUDNN_DATA_INT8: ((int8_t *)p)[i] = to_int<int8_t>(v); break;
    case CUDNN_DATA_UINT8: ((uint8_t *)p)[i] = to_int<uint8_t>(v); break;
    default: break;
    }
}

// The value a tensor of type t holds after v is written to it (virtual tensors keep floats).
float quantize(cudnnDataType_t t, float v) {
    switch (t) {
    case CUDNN_DATA_HALF: return __half2float(__float2half(v));
    case CUDNN_DATA_BFLOAT16: return __bfloat162float(__float2bfloat16(v));
    case CUDNN_DATA_INT32: return (float)to_int<int32_t>(v);
    case CUDNN_DATA_INT64: return (float)to_int<int64_t>(v);
    case CUDNN_DATA_INT8: return (float)to_int<int8_t>(v);
    case CUDNN_DATA_UINT8: return (float)to_int<uint8_t>(v);
    case CUDNN_DATA_BOOLEAN: return v != 0.0f ? 1.0f : 0.0f;
    default: return v;
    }
}

// ---------------------------------------------------------------- tensors and operations

struct TensorInfo {
    int64_t uid = 0;
    cudnnDataType_t dtype = CUDNN_DATA_FLOAT;
    int rank = 0;
    int64_t dim[CUDNN_DIM_MAX] = {}, stride[CUDNN_DIM_MAX] = {};
    int64_t alignment = 0;
    bool is_virtual = false, by_value = false;

    int64_t count() const {
        int64_t n = 1;
        for (int i = 0; i < rank; i++) n *= dim[i];
        return n;
    }
    // One past the largest element offset: how many elements the layout spans.
    int64_t extent() const {
        int64_t e = 1;
        for (int i = 0; i < rank; i++) e += (dim[i] - 1) * stride[i];
        return e;
    }
    bool same(const TensorInfo &o) const {
        if (uid != o.uid || dtype != o.dtype || rank != o.rank || is_virtual != o.is_virtual ||
            by_value != o.by_value || alignment != o.alignment)
            return false;
        for (int i = 0; i < rank; i++)
            if (dim[i] != o.dim[i] || stride[i] != o.stride[i]) return false;
        return true;
    }
    std::string describe() const {
        std::string s = "tensor uid " + std::to_string(uid) + " (" + dtype_name(dtype) + " dims [";
        for (int i = 0; i < rank; i++) s += (i ? "," : "") + std::to_string(dim[i]);
        s += "] strides [";
        for (int i = 0; i < rank; i++) s += (i ? "," : "") + std::to_string(stride[i]);
        s += "]";
        if (is_virtual) s += ", virtual";
        if (by_value) s += ", by value";
        return s + ")";
    }
};
typedef std::shared_ptr<const TensorInfo> TensorP;

// The memory a layout addresses as (stride, size) runs, sorted by stride, nested runs merged:
// two non-overlapping layouts with the same runs address the same element offsets.
std::vector<std::pair<int64_t, int64_t>> layout_runs(const TensorInfo &t) {
    std::vector<std::pair<int64_t, int64_t>> r, out;
    for (int i = 0; i < t.rank; i++)
        if (t.dim[i] > 1) r.push_back({t.stride[i], t.dim[i]});
    std::sort(r.begin(), r.end());
    for (auto &run : r) {
        if (!out.empty() && out.back().first * out.back().second == run.first) out.back().second *= run.second;
        else out.push_back(run);
    }
    return out;
}

// No two elements share an offset (checked the simple way: each dimension, by increasing
// stride, steps over everything the smaller ones span).
bool layout_injective(const TensorInfo &t) {
    std::vector<std::pair<int64_t, int64_t>> r;
    for (int i = 0; i < t.rank; i++)
        if (t.dim[i] > 1) r.push_back({t.stride[i], t.dim[i]});
    std::sort(r.begin(), r.end());
    int64_t span = 1;
    for (auto &run : r) {
        if (run.first < span) return false;
        span = run.first * run.second;
    }
    return true;
}

enum Arity { UNARY, BINARY, TERNARY, ACT_BACKWARD };

const char *pw_mode_name(int m) {
    switch (m) {
    case CUDNN_POINTWISE_ADD: return "ADD";
    case CUDNN_POINTWISE_ADD_SQUARE: return "ADD_SQUARE";
    case CUDNN_POINTWISE_DIV: return "DIV";
    case CUDNN_POINTWISE_MAX: return "MAX";
    case CUDNN_POINTWISE_MIN: return "MIN";
    case CUDNN_POINTWISE_MOD: return "MOD";
    case CUDNN_POINTWISE_MUL: return "MUL";
    case CUDNN_POINTWISE_POW: return "POW";
    case CUDNN_POINTWISE_SUB: return "SUB";
    case CUDNN_POINTWISE_ABS: return "ABS";
    case CUDNN_POINTWISE_CEIL: return "CEIL";
    case CUDNN_POINTWISE_COS: return "COS";
    case CUDNN_POINTWISE_EXP: return "EXP";
    case CUDNN_POINTWISE_FLOOR: return "FLOOR";
    case CUDNN_POINTWISE_LOG: return "LOG";
    case CUDNN_POINTWISE_NEG: return "NEG";
    case CUDNN_POINTWISE_RSQRT: return "RSQRT";
    case CUDNN_POINTWISE_SIN: return "SIN";
    case CUDNN_POINTWISE_SQRT: return "SQRT";
    case CUDNN_POINTWISE_TAN: return "TAN";
    case CUDNN_POINTWISE_ERF: return "ERF";
    case CUDNN_POINTWISE_IDENTITY: return "IDENTITY";
    case CUDNN_POINTWISE_RECIPROCAL: return "RECIPROCAL";
    case CUDNN_POINTWISE_ATAN2: return "ATAN2";
    case CUDNN_POINTWISE_RELU_FWD: return "RELU_FWD";
    case CUDNN_POINTWISE_TANH_FWD: return "TANH_FWD";
    case CUDNN_POINTWISE_SIGMOID_FWD: return "SIGMOID_FWD";
    case CUDNN_POINTWISE_ELU_FWD: return "ELU_FWD";
    case CUDNN_POINTWISE_GELU_FWD: return "GELU_FWD";
    case CUDNN_POINTWISE_SOFTPLUS_FWD: return "SOFTPLUS_FWD";
    case CUDNN_POINTWISE_SWISH_FWD: return "SWISH_FWD";
    case CUDNN_POINTWISE_GELU_APPROX_TANH_FWD: return "GELU_APPROX_TANH_FWD";
    case CUDNN_POINTWISE_RELU_BWD: return "RELU_BWD";
    case CUDNN_POINTWISE_TANH_BWD: return "TANH_BWD";
    case CUDNN_POINTWISE_SIGMOID_BWD: return "SIGMOID_BWD";
    case CUDNN_POINTWISE_ELU_BWD: return "ELU_BWD";
    case CUDNN_POINTWISE_GELU_BWD: return "GELU_BWD";
    case CUDNN_POINTWISE_SOFTPLUS_BWD: return "SOFTPLUS_BWD";
    case CUDNN_POINTWISE_SWISH_BWD: return "SWISH_BWD";
    case CUDNN_POINTWISE_GELU_APPROX_TANH_BWD: return "GELU_APPROX_TANH_BWD";
    case CUDNN_POINTWISE_CMP_EQ: return "CMP_EQ";
    case CUDNN_POINTWISE_CMP_NEQ: return "CMP_NEQ";
    case CUDNN_POINTWISE_CMP_GT: return "CMP_GT";
    case CUDNN_POINTWISE_CMP_GE: return "CMP_GE";
    case CUDNN_POINTWISE_CMP_LT: return "CMP_LT";
    case CUDNN_POINTWISE_CMP_LE: return "CMP_LE";
    case CUDNN_POINTWISE_LOGICAL_AND: return "LOGICAL_AND";
    case CUDNN_POINTWISE_LOGICAL_OR: return "LOGICAL_OR";
    case CUDNN_POINTWISE_LOGICAL_NOT: return "LOGICAL_NOT";
    case CUDNN_POINTWISE_GEN_INDEX: return "GEN_INDEX";
    case CUDNN_POINTWISE_BINARY_SELECT: return "BINARY_SELECT";
    }
    return nullptr;
}

Arity pw_arity(cudnnPointwiseMode_t m) {
    switch (m) {
    case CUDNN_POINTWISE_ADD: case CUDNN_POINTWISE_ADD_SQUARE: case CUDNN_POINTWISE_DIV: case CUDNN_POINTWISE_MAX:
    case CUDNN_POINTWISE_MIN: case CUDNN_POINTWISE_MOD: case CUDNN_POINTWISE_MUL: case CUDNN_POINTWISE_POW:
    case CUDNN_POINTWISE_SUB: case CUDNN_POINTWISE_ATAN2: case CUDNN_POINTWISE_CMP_EQ: case CUDNN_POINTWISE_CMP_NEQ:
    case CUDNN_POINTWISE_CMP_GT: case CUDNN_POINTWISE_CMP_GE: case CUDNN_POINTWISE_CMP_LT: case CUDNN_POINTWISE_CMP_LE:
    case CUDNN_POINTWISE_LOGICAL_AND: case CUDNN_POINTWISE_LOGICAL_OR:
        return BINARY;
    case CUDNN_POINTWISE_BINARY_SELECT:
        return TERNARY;
    case CUDNN_POINTWISE_RELU_BWD: case CUDNN_POINTWISE_TANH_BWD: case CUDNN_POINTWISE_SIGMOID_BWD:
    case CUDNN_POINTWISE_ELU_BWD: case CUDNN_POINTWISE_GELU_BWD: case CUDNN_POINTWISE_SOFTPLUS_BWD:
    case CUDNN_POINTWISE_SWISH_BWD: case CUDNN_POINTWISE_GELU_APPROX_TANH_BWD:
        return ACT_BACKWARD;
    default:
        return UNARY;
    }
}

struct PwInfo {
    cudnnPointwiseMode_t mode = CUDNN_POINTWISE_IDENTITY;
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    double relu_lower = 0, relu_upper = DBL_MAX, relu_slope = 0, elu_alpha = 1, softplus_beta = 1, swish_beta = 1;
    int64_t axis = -1;
};

enum OpKind { OP_POINTWISE, OP_MATMUL, OP_REDUCTION, OP_RESHAPE };

struct OpInfo {
    OpKind kind = OP_POINTWISE;
    PwInfo pw;                    // OP_POINTWISE
    float alpha1 = 1, alpha2 = 1;  // OP_POINTWISE
    cudnnReduceTensorOp_t reduce = CUDNN_REDUCE_TENSOR_ADD;  // OP_REDUCTION
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;                 // OP_MATMUL, OP_REDUCTION
    // pointwise: x [, b [, t]] (backward activations: dy, x); matmul: a, b; reduction, reshape: x
    std::vector<TensorP> in;
    TensorP out;
    std::string name() const {
        switch (kind) {
        case OP_POINTWISE: return std::string("pointwise ") + pw_mode_name(pw.mode);
        case OP_MATMUL: return "matmul";
        case OP_REDUCTION: return "reduction";
        case OP_RESHAPE: return "reshape";
        }
        return "?";
    }
};

// A finalized operation graph in the form the engine runs it.
struct Program {
    struct Step {
        OpInfo op;
        std::vector<int> in;   // indices into tensors
        int out;
    };
    std::vector<TensorInfo> tensors;
    std::vector<Step> steps;    // topological order
    std::vector<int> last_use;  // per tensor: the last step reading (or writing) it
    int64_t workspace = 0;      // bytes the plan asks for
    uint64_t serial = 0;        // the operation graph's number, in finalize order: its kernels' name
};
typedef std::shared_ptr<const Program> ProgramP;

// The emulated engine: one engine (global index 0) that runs every graph the emulation accepts.
const int64_t kEngineCount = 1;
// The workspace it asks for: some per operation, all of it overwritten before each operation.
const int64_t kWorkspacePerStep = 256;

// ---------------------------------------------------------------- descriptors

struct Desc;
typedef std::shared_ptr<Desc> DescP;

struct Attr {
    cudnnBackendAttributeType_t type = CUDNN_TYPE_INT64;
    int64_t count = 0;
    std::vector<unsigned char> raw;   // count elements (every type but descriptors)
    std::vector<DescP> descs;         // CUDNN_TYPE_BACKEND_DESCRIPTOR
};

struct Desc {
    cudnnBackendDescriptorType_t type;
    bool finalized = false;
    std::map<int, Attr> attrs;   // as set; finalization adds the defaults of optional attributes
    // what finalization derives
    TensorP tensor;                          // TENSOR
    PwInfo pw;                               // POINTWISE
    std::shared_ptr<const OpInfo> op;        // OPERATION_POINTWISE/MATMUL/REDUCTION/RESHAPE
    ProgramP program;                        // OPERATIONGRAPH, ENGINE, ENGINECFG, EXECUTION_PLAN
    std::vector<DescP> results;              // ENGINEHEUR
    explicit Desc(cudnnBackendDescriptorType_t t) : type(t) {}
};

std::mutex g_mu;                        // the registries and every descriptor
std::map<Desc *, DescP> g_descs;        // live descriptors (cudnnBackendDescriptorDestroy removes)
std::set<cudnnContext *> g_handles;     // live handles

DescP lookup(cudnnBackendDescriptor_t d) {
    auto it = g_descs.find((Desc *)d);
    return it == g_descs.end() ? nullptr : it->second;
}

const char *desc_type_name(int t) {
    static const char *names[] = {
        "POINTWISE", "CONVOLUTION", "ENGINE", "ENGINECFG", "ENGINEHEUR", "EXECUTION_PLAN", "INTERMEDIATE_INFO",
        "KNOB_CHOICE", "KNOB_INFO", "LAYOUT_INFO", "OPERATION_CONVOLUTION_FORWARD",
        "OPERATION_CONVOLUTION_BACKWARD_FILTER", "OPERATION_CONVOLUTION_BACKWARD_DATA", "OPERATION_POINTWISE",
        "OPERATION_GEN_STATS", "OPERATIONGRAPH", "VARIANT_PACK", "TENSOR", "MATMUL", "OPERATION_MATMUL",
        "OPERATION_BN_FINALIZE_STATISTICS", "REDUCTION", "OPERATION_REDUCTION", "OPERATION_BN_BWD_WEIGHTS",
        "RESAMPLE", "OPERATION_RESAMPLE_FWD", "OPERATION_RESAMPLE_BWD", "OPERATION_CONCAT", "OPERATION_SIGNAL",
        "OPERATION_NORM_FORWARD", "OPERATION_NORM_BACKWARD", "OPERATION_RESHAPE", "RNG", "OPERATION_RNG",
        "KERNEL_CACHE", "OPERATION_PAGED_CACHE_LOAD", "OPERATION_BLOCK_SCALE_QUANTIZE",
        "OPERATION_BLOCK_SCALE_DEQUANTIZE", "DEVICEPROP", "OPERATION_EXPAND_BAND_MATRIX",
        "OPERATION_CONTRACT_BAND_MATRIX", "OPERATION_SDPA_FWD", "OPERATION_MOE_GROUPED_MATMUL", "OPERATION_SDPA_BWD"};
    return t >= 0 && t < (int)(sizeof names / sizeof names[0]) ? names[t] : "(invalid descriptor type)";
}

bool emulated_type(int t) {
    switch (t) {
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR: case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: case CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR: case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR: case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR:
        return true;
    }
    return false;
}

bool is_operation(int t) {
    return t == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR || t == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR ||
           t == CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR || t == CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR;
}

// ---------------------------------------------------------------- attribute table

enum Mode { SET, GET, UNSUPPORTED };   // settable; computed (get only); documented but not emulated
const int ANY_OP = -2;                  // element descriptor type: any operation descriptor

struct AttrSpec {
    int owner;                  // descriptor type
    int name;                   // cudnnBackendAttributeName_t
    const char *text;
    int type, alt;              // the attribute type, and a second one it also takes (FLOAT/DOUBLE)
    int64_t min_count, max_count;
    int elem;                   // CUDNN_TYPE_BACKEND_DESCRIPTOR: the element descriptor type (or ANY_OP)
    Mode mode;
};

const int64_t MANY = INT64_MAX;
// clang-format off
#define S(owner, name, type, alt, lo, hi, elem, mode) \
    {CUDNN_BACKEND_##owner##_DESCRIPTOR, CUDNN_ATTR_##name, "CUDNN_ATTR_" #name, \
     CUDNN_TYPE_##type, CUDNN_TYPE_##alt, lo, hi, elem, mode}
#define T_(x) CUDNN_BACKEND_##x##_DESCRIPTOR

const AttrSpec kSpecs[] = {
    S(POINTWISE, POINTWISE_MODE, POINTWISE_MODE, POINTWISE_MODE, 1, 1, -1, SET),
    S(POINTWISE, POINTWISE_MATH_PREC, DATA_TYPE, DATA_TYPE, 1, 1, -1, SET),
    S(POINTWISE, POINTWISE_NAN_PROPAGATION, NAN_PROPOGATION, NAN_PROPOGATION, 1, 1, -1, SET),
    S(POINTWISE, POINTWISE_RELU_LOWER_CLIP, DOUBLE, FLOAT, 1, 1, -1, SET),
    S(POINTWISE, POINTWISE_RELU_UPPER_CLIP, DOUBLE, FLOAT, 1, 1, -1, SET),
    S(POINTWISE, POINTWISE_RELU_LOWER_CLIP_SLOPE, DOUBLE, FLOAT, 1, 1, -1, SET),
    S(POINTWISE, POINTWISE_ELU_ALPHA, DOUBLE, FLOAT, 1, 1, -1, SET),
    S(POINTWISE, POINTWISE_SOFTPLUS_BETA, DOUBLE, FLOAT, 1, 1, -1, SET),
    S(POINTWISE, POINTWISE_SWISH_BETA, DOUBLE, FLOAT, 1, 1, -1, SET),
    S(POINTWISE, POINTWISE_AXIS, INT64, INT64, 1, 1, -1, SET),

    S(TENSOR, TENSOR_BYTE_ALIGNMENT, INT64, INT64, 1, 1, -1, SET),
    S(TENSOR, TENSOR_DATA_TYPE, DATA_TYPE, DATA_TYPE, 1, 1, -1, SET),
    S(TENSOR, TENSOR_DIMENSIONS, INT64, INT64, 1, CUDNN_DIM_MAX, -1, SET),
    S(TENSOR, TENSOR_STRIDES, INT64, INT64, 1, CUDNN_DIM_MAX, -1, SET),
    S(TENSOR, TENSOR_VECTOR_COUNT, INT64, INT64, 1, 1, -1, SET),
    S(TENSOR, TENSOR_VECTORIZED_DIMENSION, INT64, INT64, 1, 1, -1, SET),
    S(TENSOR, TENSOR_UNIQUE_ID, INT64, INT64, 1, 1, -1, SET),
    S(TENSOR, TENSOR_IS_VIRTUAL, BOOLEAN, BOOLEAN, 1, 1, -1, SET),
    S(TENSOR, TENSOR_IS_BY_VALUE, BOOLEAN, BOOLEAN, 1, 1, -1, SET),
    S(TENSOR, TENSOR_REORDERING_MODE, TENSOR_REORDERING_MODE, TENSOR_REORDERING_MODE, 1, 1, -1, SET),
    S(TENSOR, TENSOR_RAGGED_OFFSET_DESC, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(TENSOR), UNSUPPORTED),

    S(MATMUL, MATMUL_COMP_TYPE, DATA_TYPE, DATA_TYPE, 1, 1, -1, SET),
    S(MATMUL, MATMUL_PADDING_VALUE, DOUBLE, FLOAT, 1, 1, -1, UNSUPPORTED),

    S(REDUCTION, REDUCTION_OPERATOR, REDUCTION_OPERATOR_TYPE, REDUCTION_OPERATOR_TYPE, 1, 1, -1, SET),
    S(REDUCTION, REDUCTION_COMP_TYPE, DATA_TYPE, DATA_TYPE, 1, 1, -1, SET),
    S(REDUCTION, REDUCTION_IS_DETERMINISTIC, BOOLEAN, BOOLEAN, 1, 1, -1, SET),

    S(OPERATION_POINTWISE, OPERATION_POINTWISE_PW_DESCRIPTOR,
      BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(POINTWISE), SET),
    S(OPERATION_POINTWISE, OPERATION_POINTWISE_XDESC, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(TENSOR), SET),
    S(OPERATION_POINTWISE, OPERATION_POINTWISE_BDESC, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(TENSOR), SET),
    S(OPERATION_POINTWISE, OPERATION_POINTWISE_YDESC, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(TENSOR), SET),
    S(OPERATION_POINTWISE, OPERATION_POINTWISE_TDESC, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(TENSOR), SET),
    S(OPERATION_POINTWISE, OPERATION_POINTWISE_DXDESC, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(TENSOR), SET),
    S(OPERATION_POINTWISE, OPERATION_POINTWISE_DYDESC, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(TENSOR), SET),
    S(OPERATION_POINTWISE, OPERATION_POINTWISE_ALPHA1, FLOAT, DOUBLE, 1, 1, -1, SET),
    S(OPERATION_POINTWISE, OPERATION_POINTWISE_ALPHA2, FLOAT, DOUBLE, 1, 1, -1, SET),

    S(OPERATION_MATMUL, OPERATION_MATMUL_ADESC, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(TENSOR), SET),
    S(OPERATION_MATMUL, OPERATION_MATMUL_BDESC, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(TENSOR), SET),
    S(OPERATION_MATMUL, OPERATION_MATMUL_CDESC, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(TENSOR), SET),
    S(OPERATION_MATMUL, OPERATION_MATMUL_DESC, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(MATMUL), SET),
    S(OPERATION_MATMUL, OPERATION_MATMUL_IRREGULARLY_STRIDED_BATCH_COUNT, INT64, INT64, 1, 1, -1, UNSUPPORTED),
    S(OPERATION_MATMUL, OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC,
      BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(TENSOR), UNSUPPORTED),
    S(OPERATION_MATMUL, OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC,
      BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(TENSOR), UNSUPPORTED),
    S(OPERATION_MATMUL, OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC,
      BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(TENSOR), UNSUPPORTED),

    S(OPERATION_REDUCTION, OPERATION_REDUCTION_XDESC, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(TENSOR), SET),
    S(OPERATION_REDUCTION, OPERATION_REDUCTION_YDESC, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(TENSOR), SET),
    S(OPERATION_REDUCTION, OPERATION_REDUCTION_DESC, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(REDUCTION), SET),

    S(OPERATION_RESHAPE, OPERATION_RESHAPE_XDESC, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(TENSOR), SET),
    S(OPERATION_RESHAPE, OPERATION_RESHAPE_YDESC, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(TENSOR), SET),

    S(OPERATIONGRAPH, OPERATIONGRAPH_HANDLE, HANDLE, HANDLE, 1, 1, -1, SET),
    S(OPERATIONGRAPH, OPERATIONGRAPH_OPS, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, MANY, ANY_OP, SET),
    S(OPERATIONGRAPH, OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, INT64, INT64, 1, 1, -1, GET),
    S(OPERATIONGRAPH, OPERATIONGRAPH_IS_DYNAMIC_SHAPE_ENABLED, BOOLEAN, BOOLEAN, 1, 1, -1, SET),

    S(ENGINEHEUR, ENGINEHEUR_MODE, HEUR_MODE, HEUR_MODE, 1, 1, -1, SET),
    S(ENGINEHEUR, ENGINEHEUR_OPERATION_GRAPH, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(OPERATIONGRAPH), SET),
    S(ENGINEHEUR, ENGINEHEUR_RESULTS, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 0, MANY, T_(ENGINECFG), GET),
    S(ENGINEHEUR, ENGINEHEUR_SM_COUNT_TARGET, INT32, INT32, 1, 1, -1, SET),
    S(ENGINEHEUR, ENGINEHEUR_DEVICEPROP, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(DEVICEPROP), UNSUPPORTED),

    S(ENGINECFG, ENGINECFG_ENGINE, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(ENGINE), SET),
    S(ENGINECFG, ENGINECFG_INTERMEDIATE_INFO,
      BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(INTERMEDIATE_INFO), UNSUPPORTED),
    S(ENGINECFG, ENGINECFG_KNOB_CHOICES, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 0, MANY, T_(KNOB_CHOICE), SET),
    S(ENGINECFG, ENGINECFG_WORKSPACE_SIZE, INT64, INT64, 1, 1, -1, GET),

    S(ENGINE, ENGINE_OPERATION_GRAPH, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(OPERATIONGRAPH), SET),
    S(ENGINE, ENGINE_GLOBAL_INDEX, INT64, INT64, 1, 1, -1, SET),
    S(ENGINE, ENGINE_KNOB_INFO, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 0, MANY, T_(KNOB_INFO), GET),
    S(ENGINE, ENGINE_NUMERICAL_NOTE, NUMERICAL_NOTE, NUMERICAL_NOTE, 0, MANY, -1, GET),
    S(ENGINE, ENGINE_BEHAVIOR_NOTE, BEHAVIOR_NOTE, BEHAVIOR_NOTE, 0, MANY, -1, GET),
    S(ENGINE, ENGINE_LAYOUT_INFO, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 0, MANY, T_(LAYOUT_INFO), GET),
    S(ENGINE, ENGINE_SM_COUNT_TARGET, INT32, INT32, 1, 1, -1, SET),
    S(ENGINE, ENGINE_DEVICEPROP, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(DEVICEPROP), UNSUPPORTED),

    S(EXECUTION_PLAN, EXECUTION_PLAN_HANDLE, HANDLE, HANDLE, 1, 1, -1, SET),
    S(EXECUTION_PLAN, EXECUTION_PLAN_ENGINE_CONFIG, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(ENGINECFG), SET),
    S(EXECUTION_PLAN, EXECUTION_PLAN_WORKSPACE_SIZE, INT64, INT64, 1, 1, -1, GET),
    S(EXECUTION_PLAN, EXECUTION_PLAN_COMPUTED_INTERMEDIATE_UIDS, INT64, INT64, 0, MANY, -1, GET),
    S(EXECUTION_PLAN, EXECUTION_PLAN_RUN_ONLY_INTERMEDIATE_UIDS, INT64, INT64, 0, MANY, -1, UNSUPPORTED),
    S(EXECUTION_PLAN, EXECUTION_PLAN_JSON_REPRESENTATION, CHAR, CHAR, 0, MANY, -1, UNSUPPORTED),
    S(EXECUTION_PLAN, EXECUTION_PLAN_KERNEL_CACHE,
      BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(KERNEL_CACHE), UNSUPPORTED),
    S(EXECUTION_PLAN, EXECUTION_PLAN_DEVICEPROP,
      BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, T_(DEVICEPROP), UNSUPPORTED),

    S(VARIANT_PACK, VARIANT_PACK_UNIQUE_IDS, INT64, INT64, 0, MANY, -1, SET),
    S(VARIANT_PACK, VARIANT_PACK_DATA_POINTERS, VOID_PTR, VOID_PTR, 0, MANY, -1, SET),
    S(VARIANT_PACK, VARIANT_PACK_WORKSPACE, VOID_PTR, VOID_PTR, 1, 1, -1, SET),
    S(VARIANT_PACK, VARIANT_PACK_INTERMEDIATES, VOID_PTR, VOID_PTR, 0, MANY, -1, UNSUPPORTED),
    S(VARIANT_PACK, VARIANT_PACK_OVERRIDE_UNIQUE_IDS, INT64, INT64, 0, MANY, -1, UNSUPPORTED),
    S(VARIANT_PACK, VARIANT_PACK_OVERRIDE_SHAPES, INT64, INT64, 0, MANY, -1, UNSUPPORTED),
    S(VARIANT_PACK, VARIANT_PACK_OVERRIDE_STRIDES, INT64, INT64, 0, MANY, -1, UNSUPPORTED),

    S(KNOB_CHOICE, KNOB_CHOICE_KNOB_TYPE, KNOB_TYPE, KNOB_TYPE, 1, 1, -1, SET),
    S(KNOB_CHOICE, KNOB_CHOICE_KNOB_VALUE, INT64, INT64, 1, 1, -1, SET),
};
#undef S
#undef T_
// clang-format on

const AttrSpec *find_spec(int owner, int name) {
    for (const AttrSpec &s : kSpecs)
        if (s.owner == owner && s.name == name) return &s;
    return nullptr;
}

const char *attr_name(int name) {
    for (const AttrSpec &s : kSpecs)
        if (s.name == name) return s.text;
    return "(an attribute name this emulation does not know)";
}

const char *attr_type_name(int t) {
    static const char *names[] = {
        "HANDLE", "DATA_TYPE", "BOOLEAN", "INT64", "FLOAT", "DOUBLE", "VOID_PTR", "CONVOLUTION_MODE", "HEUR_MODE",
        "KNOB_TYPE", "NAN_PROPOGATION", "NUMERICAL_NOTE", "LAYOUT_TYPE", "ATTRIB_NAME", "POINTWISE_MODE",
        "BACKEND_DESCRIPTOR", "GENSTATS_MODE", "BN_FINALIZE_STATS_MODE", "REDUCTION_OPERATOR_TYPE",
        "BEHAVIOR_NOTE", "TENSOR_REORDERING_MODE", "RESAMPLE_MODE", "PADDING_MODE", "INT32", "CHAR",
        "SIGNAL_MODE", "FRACTION", "NORM_MODE", "NORM_FWD_PHASE", "RNG_DISTRIBUTION", "MOE_GROUPED_MATMUL_MODE"};
    return t >= 0 && t < (int)(sizeof names / sizeof names[0]) ? names[t] : "(invalid attribute type)";
}

// Bytes of one element of an attribute type (the C type the documentation maps it to).
size_t attr_elem_size(int t) {
    switch (t) {
    case CUDNN_TYPE_HANDLE: return sizeof(cudnnHandle_t);
    case CUDNN_TYPE_DATA_TYPE: return sizeof(cudnnDataType_t);
    case CUDNN_TYPE_BOOLEAN: return sizeof(bool);
    case CUDNN_TYPE_INT64: return sizeof(int64_t);
    case CUDNN_TYPE_FLOAT: return sizeof(float);
    case CUDNN_TYPE_DOUBLE: return sizeof(double);
    case CUDNN_TYPE_VOID_PTR: return sizeof(void *);
    case CUDNN_TYPE_CONVOLUTION_MODE: return sizeof(cudnnConvolutionMode_t);
    case CUDNN_TYPE_HEUR_MODE: return sizeof(cudnnBackendHeurMode_t);
    case CUDNN_TYPE_KNOB_TYPE: return sizeof(cudnnBackendKnobType_t);
    case CUDNN_TYPE_NAN_PROPOGATION: return sizeof(cudnnNanPropagation_t);
    case CUDNN_TYPE_NUMERICAL_NOTE: return sizeof(cudnnBackendNumericalNote_t);
    case CUDNN_TYPE_LAYOUT_TYPE: return sizeof(cudnnBackendLayoutType_t);
    case CUDNN_TYPE_ATTRIB_NAME: return sizeof(cudnnBackendAttributeName_t);
    case CUDNN_TYPE_POINTWISE_MODE: return sizeof(cudnnPointwiseMode_t);
    case CUDNN_TYPE_BACKEND_DESCRIPTOR: return sizeof(cudnnBackendDescriptor_t);
    case CUDNN_TYPE_GENSTATS_MODE: return sizeof(cudnnGenStatsMode_t);
    case CUDNN_TYPE_BN_FINALIZE_STATS_MODE: return sizeof(cudnnBnFinalizeStatsMode_t);
    case CUDNN_TYPE_REDUCTION_OPERATOR_TYPE: return sizeof(cudnnReduceTensorOp_t);
    case CUDNN_TYPE_BEHAVIOR_NOTE: return sizeof(cudnnBackendBehaviorNote_t);
    case CUDNN_TYPE_TENSOR_REORDERING_MODE: return sizeof(cudnnBackendTensorReordering_t);
    case CUDNN_TYPE_RESAMPLE_MODE: return sizeof(cudnnResampleMode_t);
    case CUDNN_TYPE_PADDING_MODE: return sizeof(cudnnPaddingMode_t);
    case CUDNN_TYPE_INT32: return sizeof(int32_t);
    case CUDNN_TYPE_CHAR: return sizeof(char);
    case CUDNN_TYPE_SIGNAL_MODE: return sizeof(cudnnSignalMode_t);
    case CUDNN_TYPE_FRACTION: return sizeof(cudnnFraction_t);
    case CUDNN_TYPE_NORM_MODE: return sizeof(cudnnBackendNormMode_t);
    case CUDNN_TYPE_NORM_FWD_PHASE: return sizeof(cudnnBackendNormFwdPhase_t);
    case CUDNN_TYPE_RNG_DISTRIBUTION: return sizeof(cudnnRngDistribution_t);
    case CUDNN_TYPE_MOE_GROUPED_MATMUL_MODE: return sizeof(cudnnMoeGroupedMatmulMode_t);
    }
    return 0;
}

// An enumeration argument as the integer the caller passed (it may be no declared value).
template <typename E> int as_int(const E &e) {
    int v;
    memcpy(&v, &e, sizeof v);
    return v;
}

template <typename V> V elem(const Attr &a, int64_t i = 0) {
    V v;
    memcpy(&v, a.raw.data() + i * sizeof(V), sizeof(V));
    return v;
}

Attr make_attr(cudnnBackendAttributeType_t type, const void *p, int64_t n) {
    Attr a;
    a.type = type;
    a.count = n;
    a.raw.assign((const unsigned char *)p, (const unsigned char *)p + n * attr_elem_size(type));
    return a;
}

Attr make_descs(const std::vector<DescP> &v) {
    Attr a;
    a.type = CUDNN_TYPE_BACKEND_DESCRIPTOR;
    a.count = (int64_t)v.size();
    a.descs = v;
    return a;
}

// The values an attribute type admits (enumerations by their declared values).
bool valid_values(const Attr &a, std::string *why) {
    for (int64_t i = 0; i < a.count; i++) {
        int v = 0;
        switch (a.type) {
        case CUDNN_TYPE_DATA_TYPE:
            v = elem<int>(a, i);
            if (!valid_dtype(v)) return *why = "data type " + std::to_string(v) + " is not a cudnnDataType_t", false;
            break;
        case CUDNN_TYPE_BOOLEAN: {
            unsigned char b = a.raw[i];
            if (b > 1) return *why = "a bool holds " + std::to_string(b), false;
            break;
        }
        case CUDNN_TYPE_POINTWISE_MODE:
            v = elem<int>(a, i);
            if (!pw_mode_name(v))
                return *why = "pointwise mode " + std::to_string(v) + " is not a cudnnPointwiseMode_t", false;
            break;
        case CUDNN_TYPE_REDUCTION_OPERATOR_TYPE:
            v = elem<int>(a, i);
            if (v < CUDNN_REDUCE_TENSOR_ADD || v > CUDNN_REDUCE_TENSOR_MUL_NO_ZEROS)
                return *why = "reduction operator " + std::to_string(v) + " is not a cudnnReduceTensorOp_t", false;
            break;
        case CUDNN_TYPE_HEUR_MODE:
            v = elem<int>(a, i);
            if (v < 0 || v >= CUDNN_HEUR_MODES_COUNT)
                return *why = "heuristics mode " + std::to_string(v) + " is not a mode", false;
            break;
        case CUDNN_TYPE_KNOB_TYPE:
            v = elem<int>(a, i);
            if (v < 0 || v >= CUDNN_KNOB_TYPE_COUNTS)
                return *why = "knob type " + std::to_string(v) + " is not a knob", false;
            break;
        case CUDNN_TYPE_TENSOR_REORDERING_MODE:
            v = elem<int>(a, i);
            if (v < CUDNN_TENSOR_REORDERING_NONE || v > CUDNN_TENSOR_REORDERING_F8_128x4)
                return *why = "reordering mode " + std::to_string(v) + " is not a mode", false;
            break;
        case CUDNN_TYPE_NAN_PROPOGATION:
            v = elem<int>(a, i);
            if (v < 0 || v > 1) return *why = "NaN propagation " + std::to_string(v) + " is not a mode", false;
            break;
        case CUDNN_TYPE_HANDLE:
            if (!g_handles.count(elem<cudnnContext *>(a, i)))
                return *why = "not a live cudnnHandle_t (cudnnCreate)", false;
            break;
        default:
            break;
        }
    }
    return true;
}

// A copy of a finalized descriptor's state into a caller's descriptor (GetAttribute of a
// descriptor-valued attribute fills descriptors the caller created).
void copy_into(Desc &dst, const Desc &src) { dst = src; }

// ---------------------------------------------------------------- finalization

const Attr *attr(const Desc &d, int name) {
    auto it = d.attrs.find(name);
    return it == d.attrs.end() ? nullptr : &it->second;
}

DescP ref(const Desc &d, int name) {
    const Attr *a = attr(d, name);
    return a && a->count > 0 ? a->descs[0] : nullptr;
}

double real(const Desc &d, int name, double def) {
    const Attr *a = attr(d, name);
    if (!a) return def;
    return a->type == CUDNN_TYPE_FLOAT ? elem<float>(*a) : elem<double>(*a);
}

void set_default(Desc &d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const void *v) {
    if (!attr(d, name)) d.attrs[name] = make_attr(type, v, 1);
}

#define REQUIRE(d, name)                                                                                   \
    do {                                                                                                   \
        if (!attr(d, name))                                                                                \
            return fail(CUDNN_STATUS_BAD_PARAM, "%s: required attribute %s is not set",                   \
                        desc_type_name((d).type), attr_name(name));                                        \
    } while (0)

// A referenced descriptor must be finalized before the one referencing it is.
cudnnStatus_t need_final(const Desc &d, int name, DescP *out) {
    DescP r = ref(d, name);
    if (!r)
        return fail(CUDNN_STATUS_BAD_PARAM, "%s: required attribute %s is not set", desc_type_name(d.type),
                    attr_name(name));
    if (!r->finalized)
        return fail(CUDNN_STATUS_BAD_PARAM, "%s: the %s descriptor in %s is not finalized", desc_type_name(d.type),
                    desc_type_name(r->type), attr_name(name));
    *out = r;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_tensor(Desc &d) {
    REQUIRE(d, CUDNN_ATTR_TENSOR_DATA_TYPE);
    REQUIRE(d, CUDNN_ATTR_TENSOR_DIMENSIONS);
    REQUIRE(d, CUDNN_ATTR_TENSOR_STRIDES);
    REQUIRE(d, CUDNN_ATTR_TENSOR_UNIQUE_ID);
    REQUIRE(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT);
    const Attr &dims = *attr(d, CUDNN_ATTR_TENSOR_DIMENSIONS), &strides = *attr(d, CUDNN_ATTR_TENSOR_STRIDES);
    if (dims.count != strides.count)
        return fail(CUDNN_STATUS_BAD_PARAM, "tensor: %lld dimensions but %lld strides", (long long)dims.count,
                    (long long)strides.count);
    auto t = std::make_shared<TensorInfo>();
    t->uid = elem<int64_t>(*attr(d, CUDNN_ATTR_TENSOR_UNIQUE_ID));
    t->dtype = elem<cudnnDataType_t>(*attr(d, CUDNN_ATTR_TENSOR_DATA_TYPE));
    t->alignment = elem<int64_t>(*attr(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT));
    t->rank = (int)dims.count;
    for (int i = 0; i < t->rank; i++) {
        t->dim[i] = elem<int64_t>(dims, i);
        t->stride[i] = elem<int64_t>(strides, i);
    }
    const bool f = false;
    const int64_t one = 1, minus_one = -1;
    const cudnnBackendTensorReordering_t none = CUDNN_TENSOR_REORDERING_NONE;
    set_default(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &f);
    set_default(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &f);
    set_default(d, CUDNN_ATTR_TENSOR_VECTOR_COUNT, CUDNN_TYPE_INT64, &one);
    set_default(d, CUDNN_ATTR_TENSOR_VECTORIZED_DIMENSION, CUDNN_TYPE_INT64, &minus_one);
    set_default(d, CUDNN_ATTR_TENSOR_REORDERING_MODE, CUDNN_TYPE_TENSOR_REORDERING_MODE, &none);
    t->is_virtual = elem<bool>(*attr(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL));
    t->by_value = elem<bool>(*attr(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE));

    // the documented finalization errors
    const int64_t kLimit = (int64_t)1 << 50;
    int64_t n = 1, e = 1;
    for (int i = 0; i < t->rank; i++) {
        if (t->dim[i] <= 0 || t->stride[i] <= 0)
            return fail(CUDNN_STATUS_BAD_PARAM, "%s: dimensions and strides must be positive", t->describe().c_str());
        if (t->dim[i] > kLimit || t->stride[i] > kLimit || (n *= t->dim[i]) > kLimit ||
            (e += (t->dim[i] - 1) * t->stride[i]) > kLimit)
            return fail(CUDNN_STATUS_BAD_PARAM, "%s: too large", t->describe().c_str());
    }
    const size_t unit = dtype_align_unit(t->dtype);
    if (t->alignment <= 0 || (unit && t->alignment % (int64_t)unit != 0))
        return fail(CUDNN_STATUS_BAD_PARAM, "%s: byte alignment %lld is not a positive multiple of the %s size",
                    t->describe().c_str(), (long long)t->alignment, dtype_name(t->dtype));
    if (t->is_virtual && t->by_value)
        return fail(CUDNN_STATUS_BAD_PARAM, "%s: a tensor cannot be both virtual and by value", t->describe().c_str());
    // what the emulated engine does not do
    if (elem<int64_t>(*attr(d, CUDNN_ATTR_TENSOR_VECTOR_COUNT)) != 1)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, "%s: vectorized tensors are not emulated", t->describe().c_str());
    if (elem<int>(*attr(d, CUDNN_ATTR_TENSOR_REORDERING_MODE)) != CUDNN_TENSOR_REORDERING_NONE)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, "%s: reordered tensors are not emulated", t->describe().c_str());
    if (t->by_value && t->count() != 1)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, "%s: a by-value tensor must be a scalar (one element)",
                    t->describe().c_str());
    d.tensor = t;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_pointwise_desc(Desc &d) {
    REQUIRE(d, CUDNN_ATTR_POINTWISE_MODE);
    REQUIRE(d, CUDNN_ATTR_POINTWISE_MATH_PREC);
    PwInfo &p = d.pw;
    p.mode = elem<cudnnPointwiseMode_t>(*attr(d, CUDNN_ATTR_POINTWISE_MODE));
    p.prec = elem<cudnnDataType_t>(*attr(d, CUDNN_ATTR_POINTWISE_MATH_PREC));
    p.relu_lower = real(d, CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, 0.0);
    p.relu_upper = real(d, CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, DBL_MAX);
    p.relu_slope = real(d, CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE, 0.0);
    p.elu_alpha = real(d, CUDNN_ATTR_POINTWISE_ELU_ALPHA, 1.0);
    p.softplus_beta = real(d, CUDNN_ATTR_POINTWISE_SOFTPLUS_BETA, 1.0);
    p.swish_beta = real(d, CUDNN_ATTR_POINTWISE_SWISH_BETA, 1.0);
    const Attr *axis = attr(d, CUDNN_ATTR_POINTWISE_AXIS);
    p.axis = axis ? elem<int64_t>(*axis) : -1;
    set_default(d, CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, CUDNN_TYPE_DOUBLE, &p.relu_lower);
    set_default(d, CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, CUDNN_TYPE_DOUBLE, &p.relu_upper);
    set_default(d, CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE, CUDNN_TYPE_DOUBLE, &p.relu_slope);
    set_default(d, CUDNN_ATTR_POINTWISE_ELU_ALPHA, CUDNN_TYPE_DOUBLE, &p.elu_alpha);
    set_default(d, CUDNN_ATTR_POINTWISE_SOFTPLUS_BETA, CUDNN_TYPE_DOUBLE, &p.softplus_beta);
    set_default(d, CUDNN_ATTR_POINTWISE_SWISH_BETA, CUDNN_TYPE_DOUBLE, &p.swish_beta);
    set_default(d, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, &p.axis);
    return CUDNN_STATUS_SUCCESS;
}

// Input dims equal to the output's or 1 (broadcast), same rank.
cudnnStatus_t check_broadcast(const char *op, const char *role, const TensorInfo &in, const TensorInfo &out) {
    bool ok = in.rank == out.rank;
    for (int i = 0; ok && i < in.rank; i++) ok = in.dim[i] == out.dim[i] || in.dim[i] == 1;
    if (!ok)
        return fail(CUDNN_STATUS_BAD_PARAM, "%s: %s %s does not broadcast to the output %s", op, role,
                    in.describe().c_str(), out.describe().c_str());
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t tensor_ref(const Desc &d, int name, TensorP *out) {
    DescP r;
    cudnnStatus_t st = need_final(d, name, &r);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    *out = r->tensor;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t check_output(const char *op, const TensorInfo &y) {
    if (y.by_value)
        return fail(CUDNN_STATUS_BAD_PARAM, "%s: the output %s is a by-value tensor", op, y.describe().c_str());
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_op_pointwise(Desc &d) {
    DescP pwd;
    cudnnStatus_t st = need_final(d, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, &pwd);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    auto op = std::make_shared<OpInfo>();
    op->kind = OP_POINTWISE;
    op->pw = pwd->pw;
    const std::string name = op->name();
    const char *nm = name.c_str();
    const Arity arity = pw_arity(op->pw.mode);
    // the tensors each mode takes; any other tensor attribute set is a caller's mistake
    std::vector<int> takes, in_names;
    int out_name;
    if (arity == ACT_BACKWARD) {
        in_names = {CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, CUDNN_ATTR_OPERATION_POINTWISE_XDESC};
        out_name = CUDNN_ATTR_OPERATION_POINTWISE_DXDESC;
    } else {
        in_names = {CUDNN_ATTR_OPERATION_POINTWISE_XDESC};
        if (arity != UNARY) in_names.push_back(CUDNN_ATTR_OPERATION_POINTWISE_BDESC);
        if (arity == TERNARY) in_names.push_back(CUDNN_ATTR_OPERATION_POINTWISE_TDESC);
        out_name = CUDNN_ATTR_OPERATION_POINTWISE_YDESC;
    }
    takes = in_names;
    takes.push_back(out_name);
    for (int n : {CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
                  CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_ATTR_OPERATION_POINTWISE_TDESC,
                  CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, CUDNN_ATTR_OPERATION_POINTWISE_DYDESC})
        if (attr(d, n) && std::find(takes.begin(), takes.end(), n) == takes.end())
            return fail(CUDNN_STATUS_BAD_PARAM, "%s: takes no %s", nm, attr_name(n));
    for (int n : in_names) {
        TensorP t;
        if ((st = tensor_ref(d, n, &t)) != CUDNN_STATUS_SUCCESS) return st;
        op->in.push_back(t);
    }
    if ((st = tensor_ref(d, out_name, &op->out)) != CUDNN_STATUS_SUCCESS) return st;
    if ((st = check_output(nm, *op->out)) != CUDNN_STATUS_SUCCESS) return st;
    for (size_t i = 0; i < op->in.size(); i++)
        if ((st = check_broadcast(nm, attr_name(in_names[i]), *op->in[i], *op->out)) != CUDNN_STATUS_SUCCESS) return st;
    if (op->pw.mode == CUDNN_POINTWISE_GEN_INDEX && (op->pw.axis < 0 || op->pw.axis >= op->out->rank))
        return fail(CUDNN_STATUS_BAD_PARAM, "%s: CUDNN_ATTR_POINTWISE_AXIS %lld is not a dimension of %s", nm,
                    (long long)op->pw.axis, op->out->describe().c_str());
    op->alpha1 = (float)real(d, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, 1.0);
    op->alpha2 = (float)real(d, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, 1.0);
    if (arity == ACT_BACKWARD && (op->alpha1 != 1 || op->alpha2 != 1))
        return fail(CUDNN_STATUS_NOT_SUPPORTED, "%s: alpha scaling of a backward activation is not emulated", nm);
    const float one = 1.0f;
    set_default(d, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, &one);
    set_default(d, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, &one);
    d.op = op;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_op_matmul(Desc &d) {
    auto op = std::make_shared<OpInfo>();
    op->kind = OP_MATMUL;
    TensorP a, b;
    DescP mm;
    cudnnStatus_t st;
    if ((st = tensor_ref(d, CUDNN_ATTR_OPERATION_MATMUL_ADESC, &a)) != CUDNN_STATUS_SUCCESS) return st;
    if ((st = tensor_ref(d, CUDNN_ATTR_OPERATION_MATMUL_BDESC, &b)) != CUDNN_STATUS_SUCCESS) return st;
    if ((st = tensor_ref(d, CUDNN_ATTR_OPERATION_MATMUL_CDESC, &op->out)) != CUDNN_STATUS_SUCCESS) return st;
    if ((st = need_final(d, CUDNN_ATTR_OPERATION_MATMUL_DESC, &mm)) != CUDNN_STATUS_SUCCESS) return st;
    op->comp = elem<cudnnDataType_t>(*attr(*mm, CUDNN_ATTR_MATMUL_COMP_TYPE));
    op->in = {a, b};
    const TensorInfo &c = *op->out;
    if ((st = check_output("matmul", c)) != CUDNN_STATUS_SUCCESS) return st;
    const int r = c.rank;
    bool ok = r >= 2 && a->rank == r && b->rank == r && a->dim[r - 1] == b->dim[r - 2] &&
              c.dim[r - 2] == a->dim[r - 2] && c.dim[r - 1] == b->dim[r - 1];
    for (int i = 0; ok && i < r - 2; i++)
        ok = (a->dim[i] == c.dim[i] || a->dim[i] == 1) && (b->dim[i] == c.dim[i] || b->dim[i] == 1) &&
             c.dim[i] == std::max(a->dim[i], b->dim[i]);
    if (!ok)
        return fail(CUDNN_STATUS_BAD_PARAM, "matmul: A %s times B %s does not give C %s (A [..., M, K], B [..., K, N], "
                    "C [..., M, N], batch dims equal or 1)", a->describe().c_str(), b->describe().c_str(),
                    c.describe().c_str());
    d.op = op;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_op_reduction(Desc &d) {
    auto op = std::make_shared<OpInfo>();
    op->kind = OP_REDUCTION;
    TensorP x;
    DescP rd;
    cudnnStatus_t st;
    if ((st = tensor_ref(d, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, &x)) != CUDNN_STATUS_SUCCESS) return st;
    if ((st = tensor_ref(d, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, &op->out)) != CUDNN_STATUS_SUCCESS) return st;
    if ((st = need_final(d, CUDNN_ATTR_OPERATION_REDUCTION_DESC, &rd)) != CUDNN_STATUS_SUCCESS) return st;
    op->reduce = elem<cudnnReduceTensorOp_t>(*attr(*rd, CUDNN_ATTR_REDUCTION_OPERATOR));
    op->comp = elem<cudnnDataType_t>(*attr(*rd, CUDNN_ATTR_REDUCTION_COMP_TYPE));
    op->in = {x};
    const TensorInfo &y = *op->out;
    if ((st = check_output("reduction", y)) != CUDNN_STATUS_SUCCESS) return st;
    bool ok = x->rank == y.rank;
    for (int i = 0; ok && i < y.rank; i++) ok = y.dim[i] == x->dim[i] || y.dim[i] == 1;
    if (!ok)
        return fail(CUDNN_STATUS_BAD_PARAM, "reduction: y %s is not x %s with reduced dims of size 1",
                    y.describe().c_str(), x->describe().c_str());
    d.op = op;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_op_reshape(Desc &d) {
    auto op = std::make_shared<OpInfo>();
    op->kind = OP_RESHAPE;
    TensorP x;
    cudnnStatus_t st;
    if ((st = tensor_ref(d, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, &x)) != CUDNN_STATUS_SUCCESS) return st;
    if ((st = tensor_ref(d, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, &op->out)) != CUDNN_STATUS_SUCCESS) return st;
    op->in = {x};
    const TensorInfo &y = *op->out;
    if ((st = check_output("reshape", y)) != CUDNN_STATUS_SUCCESS) return st;
    if (x->count() != y.count())
        return fail(CUDNN_STATUS_BAD_PARAM, "reshape: x %s and y %s have different element counts",
                    x->describe().c_str(), y.describe().c_str());
    // a view: y's strides must address exactly the elements x's address
    if (!layout_injective(*x) || !layout_injective(y) || layout_runs(*x) != layout_runs(y))
        return fail(CUDNN_STATUS_NOT_SUPPORTED, "reshape: y %s is not a view of x %s (without a reshape mode, 9.19's "
                    "reshape is VIEW_ONLY: y's strides must address the same elements as x's)",
                    y.describe().c_str(), x->describe().c_str());
    d.op = op;
    return CUDNN_STATUS_SUCCESS;
}

// Memory types the engine reads and writes, by tensor kind.
bool engine_dtype_ok(const TensorInfo &t) {
    if (t.is_virtual) return dtype_bytes(t.dtype) != 0 || t.dtype == CUDNN_DATA_BOOLEAN;
    return dtype_bytes(t.dtype) != 0;
}

cudnnStatus_t finalize_graph(Desc &d) {
    const Attr *ops = attr(d, CUDNN_ATTR_OPERATIONGRAPH_OPS);
    if (!ops)
        return fail(CUDNN_STATUS_BAD_PARAM,
                    "OPERATIONGRAPH: required attribute CUDNN_ATTR_OPERATIONGRAPH_OPS is not set");
    const Attr *dyn = attr(d, CUDNN_ATTR_OPERATIONGRAPH_IS_DYNAMIC_SHAPE_ENABLED);
    if (dyn && elem<bool>(*dyn))
        return fail(CUDNN_STATUS_NOT_SUPPORTED, "OPERATIONGRAPH: dynamic shapes are not emulated");
    auto p = std::make_shared<Program>();
    static std::atomic<uint64_t> graphs{0};
    p->serial = ++graphs;
    std::map<int64_t, int> by_uid;
    std::set<const Desc *> seen_ops;
    auto add = [&](const TensorP &t, int *index) -> cudnnStatus_t {
        auto it = by_uid.find(t->uid);
        if (it == by_uid.end()) {
            by_uid[t->uid] = *index = (int)p->tensors.size();
            p->tensors.push_back(*t);
            return CUDNN_STATUS_SUCCESS;
        }
        if (!p->tensors[it->second].same(*t))
            return fail(CUDNN_STATUS_BAD_PARAM, "OPERATIONGRAPH: unique id %lld names two different tensors: %s and %s",
                        (long long)t->uid, p->tensors[it->second].describe().c_str(), t->describe().c_str());
        *index = it->second;
        return CUDNN_STATUS_SUCCESS;
    };
    for (const DescP &o : ops->descs) {
        if (!o->finalized)
            return fail(CUDNN_STATUS_BAD_PARAM, "OPERATIONGRAPH: the %s descriptor in CUDNN_ATTR_OPERATIONGRAPH_OPS is "
                        "not finalized", desc_type_name(o->type));
        if (!seen_ops.insert(o.get()).second)
            return fail(CUDNN_STATUS_BAD_PARAM, "OPERATIONGRAPH: the same %s descriptor is in the ops twice",
                        desc_type_name(o->type));
        Program::Step s;
        s.op = *o->op;
        for (const TensorP &t : o->op->in) {
            int i;
            cudnnStatus_t st = add(t, &i);
            if (st != CUDNN_STATUS_SUCCESS) return st;
            s.in.push_back(i);
        }
        cudnnStatus_t st = add(o->op->out, &s.out);
        if (st != CUDNN_STATUS_SUCCESS) return st;
        p->steps.push_back(s);
    }
    const int nt = (int)p->tensors.size(), ns = (int)p->steps.size();
    std::vector<int> producer(nt, -1);
    for (int s = 0; s < ns; s++) {
        int o = p->steps[s].out;
        if (producer[o] >= 0)
            return fail(CUDNN_STATUS_BAD_PARAM, "OPERATIONGRAPH: %s is the output of two operations (%s and %s)",
                        p->tensors[o].describe().c_str(), p->steps[producer[o]].op.name().c_str(),
                        p->steps[s].op.name().c_str());
        producer[o] = s;
    }
    for (int i = 0; i < nt; i++) {
        const TensorInfo &t = p->tensors[i];
        if (t.is_virtual && producer[i] < 0)
            return fail(CUDNN_STATUS_BAD_PARAM, "OPERATIONGRAPH: virtual %s is read but no operation writes it",
                        t.describe().c_str());
        if (!engine_dtype_ok(t))
            return fail(CUDNN_STATUS_NOT_SUPPORTED, "OPERATIONGRAPH: %s: the emulated engine does not hold %s%s",
                        t.describe().c_str(), dtype_name(t.dtype), t.is_virtual ? "" : " in memory");
        if (producer[i] >= 0 && !layout_injective(t))
            return fail(CUDNN_STATUS_NOT_SUPPORTED, "OPERATIONGRAPH: output %s: its strides give several elements "
                        "the same address", t.describe().c_str());
    }
    for (const Program::Step &s : p->steps) {
        if ((s.op.kind == OP_MATMUL || s.op.kind == OP_REDUCTION) && s.op.comp != CUDNN_DATA_FLOAT)
            return fail(CUDNN_STATUS_NOT_SUPPORTED, "OPERATIONGRAPH: %s with compute type %s: the emulated engine "
                        "computes in FLOAT", s.op.name().c_str(), dtype_name(s.op.comp));
    }
    // topological order (Kahn); a cycle, including an operation reading its own output, is an error
    std::vector<int> pending(ns, 0), order;
    std::vector<std::vector<int>> users(ns);
    for (int s = 0; s < ns; s++)
        for (int i : p->steps[s].in)
            if (producer[i] >= 0) pending[s]++, users[producer[i]].push_back(s);
    for (int s = 0; s < ns; s++)
        if (!pending[s]) order.push_back(s);
    for (size_t k = 0; k < order.size(); k++)
        for (int u : users[order[k]])
            if (--pending[u] == 0) order.push_back(u);
    if ((int)order.size() != ns)
        return fail(CUDNN_STATUS_BAD_PARAM, "OPERATIONGRAPH: the operations form a cycle");
    std::vector<Program::Step> sorted;
    for (int s : order) sorted.push_back(p->steps[s]);
    p->steps.swap(sorted);
    p->last_use.assign(nt, -1);
    for (int s = 0; s < ns; s++) {
        for (int i : p->steps[s].in) p->last_use[i] = s;
        p->last_use[p->steps[s].out] = std::max(p->last_use[p->steps[s].out], s);
    }
    p->workspace = (kWorkspacePerStep * ns + 1023) / 1024 * 1024;
    d.program = p;
    return CUDNN_STATUS_SUCCESS;
}

// The engine config the heuristics give for a graph: engine 0 of the graph, no knobs.
DescP make_engine_config(const DescP &graph) {
    auto engine = std::make_shared<Desc>(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    const int64_t index = 0;
    engine->attrs[CUDNN_ATTR_ENGINE_OPERATION_GRAPH] = make_descs({graph});
    engine->attrs[CUDNN_ATTR_ENGINE_GLOBAL_INDEX] = make_attr(CUDNN_TYPE_INT64, &index, 1);
    engine->program = graph->program;
    engine->finalized = true;
    auto cfg = std::make_shared<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    cfg->attrs[CUDNN_ATTR_ENGINECFG_ENGINE] = make_descs({engine});
    cfg->attrs[CUDNN_ATTR_ENGINECFG_KNOB_CHOICES] = make_descs({});
    cfg->program = graph->program;
    cfg->finalized = true;
    return cfg;
}

cudnnStatus_t finalize(Desc &d) {
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    DescP r;
    switch ((int)d.type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: return finalize_tensor(d);
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR: return finalize_pointwise_desc(d);
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR:
        REQUIRE(d, CUDNN_ATTR_MATMUL_COMP_TYPE);
        return CUDNN_STATUS_SUCCESS;
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR: {
        REQUIRE(d, CUDNN_ATTR_REDUCTION_OPERATOR);
        REQUIRE(d, CUDNN_ATTR_REDUCTION_COMP_TYPE);
        const bool f = false;
        set_default(d, CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC, CUDNN_TYPE_BOOLEAN, &f);
        return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: return finalize_op_pointwise(d);
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR: return finalize_op_matmul(d);
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR: return finalize_op_reduction(d);
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR: return finalize_op_reshape(d);
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: return finalize_graph(d);
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR: {
        if ((st = need_final(d, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, &r)) != CUDNN_STATUS_SUCCESS) return st;
        REQUIRE(d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX);
        int64_t index = elem<int64_t>(*attr(d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX));
        if (index < 0 || index >= kEngineCount)
            return fail(CUDNN_STATUS_NOT_SUPPORTED, "ENGINE: global index %lld is not an engine of this graph (the "
                        "emulation has %lld)", (long long)index, (long long)kEngineCount);
        d.program = r->program;
        return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: {
        if ((st = need_final(d, CUDNN_ATTR_ENGINECFG_ENGINE, &r)) != CUDNN_STATUS_SUCCESS) return st;
        const Attr *knobs = attr(d, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES);
        if (knobs && knobs->count > 0)
            return fail(CUDNN_STATUS_NOT_SUPPORTED, "ENGINECFG: the emulated engine has no knobs to choose");
        if (!knobs) d.attrs[CUDNN_ATTR_ENGINECFG_KNOB_CHOICES] = make_descs({});
        d.program = r->program;
        return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: {
        if ((st = need_final(d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, &r)) != CUDNN_STATUS_SUCCESS) return st;
        REQUIRE(d, CUDNN_ATTR_ENGINEHEUR_MODE);
        d.results = {make_engine_config(r)};   // every mode: the one engine
        return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
        if ((st = need_final(d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, &r)) != CUDNN_STATUS_SUCCESS) return st;
        d.program = r->program;
        return CUDNN_STATUS_SUCCESS;
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: {
        const Attr *uids = attr(d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS),
                   *ptrs = attr(d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
        int64_t nu = uids ? uids->count : 0, np = ptrs ? ptrs->count : 0;
        if (nu != np)
            return fail(CUDNN_STATUS_BAD_PARAM, "VARIANT_PACK: %lld unique ids but %lld data pointers", (long long)nu,
                        (long long)np);
        std::set<int64_t> seen;
        for (int64_t i = 0; i < nu; i++)
            if (!seen.insert(elem<int64_t>(*uids, i)).second)
                return fail(CUDNN_STATUS_BAD_PARAM, "VARIANT_PACK: unique id %lld is listed twice",
                            (long long)elem<int64_t>(*uids, i));
        void *null = nullptr;
        set_default(d, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &null);
        return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR:
        REQUIRE(d, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE);
        REQUIRE(d, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE);
        return CUDNN_STATUS_SUCCESS;
    }
    return fail(CUDNN_STATUS_NOT_SUPPORTED, "%s descriptors are not emulated", desc_type_name(d.type));
}

// The attributes a finalized descriptor computes (CUDNN_ATTR_*_WORKSPACE_SIZE, heuristics results...).
Attr computed(const Desc &d, int name) {
    Attr a;
    const int64_t ws = d.program ? d.program->workspace : 0;
    switch (name) {
    case CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT: return make_attr(CUDNN_TYPE_INT64, &kEngineCount, 1);
    case CUDNN_ATTR_ENGINEHEUR_RESULTS: return make_descs(d.results);
    case CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE:
    case CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE: return make_attr(CUDNN_TYPE_INT64, &ws, 1);
    case CUDNN_ATTR_ENGINE_NUMERICAL_NOTE: a.type = CUDNN_TYPE_NUMERICAL_NOTE; return a;
    case CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE: a.type = CUDNN_TYPE_BEHAVIOR_NOTE; return a;
    case CUDNN_ATTR_EXECUTION_PLAN_COMPUTED_INTERMEDIATE_UIDS: a.type = CUDNN_TYPE_INT64; return a;
    default: a.type = CUDNN_TYPE_BACKEND_DESCRIPTOR; return a;   // knob and layout infos: none
    }
}

// ---------------------------------------------------------------- the engine

// Visits every index of dims[0..rank) in row-major order keeping N offsets; offset k moves by
// strides[k][d] along dimension d. f(idx, off).
template <int N, typename F>
void for_each_index(int rank, const int64_t *dims, const int64_t (*strides)[CUDNN_DIM_MAX], F f) {
    int64_t idx[CUDNN_DIM_MAX] = {0}, off[N] = {0}, total = 1;
    for (int d = 0; d < rank; d++) total *= dims[d];
    for (int64_t n = 0; n < total; n++) {
        f((const int64_t *)idx, (const int64_t *)off);
        for (int d = rank - 1; d >= 0; d--) {
            for (int k = 0; k < N; k++) off[k] += strides[k][d];
            if (++idx[d] < dims[d]) break;
            for (int k = 0; k < N; k++) off[k] -= strides[k][d] * dims[d];
            idx[d] = 0;
        }
    }
}

// A tensor while the engine runs: memory (device or pinned), a virtual tensor's scratch, or a
// by-value scalar.
struct Operand {
    const TensorInfo *t = nullptr;
    char *mem = nullptr;
    float *buf = nullptr;
    float get(int64_t off) const { return buf ? buf[off] : load(t->dtype, mem, off); }
    void set(int64_t off, float v) const {
        if (buf) buf[off] = quantize(t->dtype, v);
        else store(t->dtype, mem, off, v);
    }
};

// Strides of t seen from an output of dims out: 0 where t broadcasts (dim 1).
void broadcast_strides(const TensorInfo &t, const TensorInfo &out, int64_t *s) {
    for (int d = 0; d < out.rank; d++) s[d] = t.dim[d] == 1 && out.dim[d] != 1 ? 0 : t.stride[d];
}

float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// y = op(alpha1 * a, alpha2 * b [, c]); backward activations: dx = dy * f'(x) with a = dy, b = x.
float pointwise(const OpInfo &op, float a, float b, float c, int64_t index) {
    const PwInfo &p = op.pw;
    const Arity arity = pw_arity(p.mode);
    if (arity != ACT_BACKWARD) {
        a *= op.alpha1;
        b *= op.alpha2;
    }
    const float kSqrt2OverPi = 0.7978845608f, kGeluC = 0.044715f;
    switch (p.mode) {
    case CUDNN_POINTWISE_ADD: return a + b;
    case CUDNN_POINTWISE_ADD_SQUARE: return a + b * b;
    case CUDNN_POINTWISE_DIV: return a / b;
    case CUDNN_POINTWISE_MAX: return fmaxf(a, b);
    case CUDNN_POINTWISE_MIN: return fminf(a, b);
    case CUDNN_POINTWISE_MOD: return fmodf(a, b);
    case CUDNN_POINTWISE_MUL: return a * b;
    case CUDNN_POINTWISE_POW: return powf(a, b);
    case CUDNN_POINTWISE_SUB: return a - b;
    case CUDNN_POINTWISE_ATAN2: return atan2f(a, b);
    case CUDNN_POINTWISE_ABS: return fabsf(a);
    case CUDNN_POINTWISE_CEIL: return ceilf(a);
    case CUDNN_POINTWISE_COS: return cosf(a);
    case CUDNN_POINTWISE_EXP: return expf(a);
    case CUDNN_POINTWISE_FLOOR: return floorf(a);
    case CUDNN_POINTWISE_LOG: return logf(a);
    case CUDNN_POINTWISE_NEG: return -a;
    case CUDNN_POINTWISE_RSQRT: return 1.0f / sqrtf(a);
    case CUDNN_POINTWISE_SIN: return sinf(a);
    case CUDNN_POINTWISE_SQRT: return sqrtf(a);
    case CUDNN_POINTWISE_TAN: return tanf(a);
    case CUDNN_POINTWISE_ERF: return erff(a);
    case CUDNN_POINTWISE_IDENTITY: return a;
    case CUDNN_POINTWISE_RECIPROCAL: return 1.0f / a;
    case CUDNN_POINTWISE_RELU_FWD: {
        const float lo = (float)p.relu_lower, hi = (float)std::min(p.relu_upper, (double)FLT_MAX);
        return a < lo ? lo + (float)p.relu_slope * (a - lo) : fminf(a, hi);
    }
    case CUDNN_POINTWISE_TANH_FWD: return tanhf(a);
    case CUDNN_POINTWISE_SIGMOID_FWD: return sigmoid(a);
    case CUDNN_POINTWISE_ELU_FWD: return a > 0 ? a : (float)p.elu_alpha * (expf(a) - 1.0f);
    case CUDNN_POINTWISE_GELU_FWD: return 0.5f * a * (1.0f + erff(a * 0.70710678f));
    case CUDNN_POINTWISE_SOFTPLUS_FWD: {
        const float beta = (float)p.softplus_beta;
        return log1pf(expf(beta * a)) / beta;
    }
    case CUDNN_POINTWISE_SWISH_FWD: return a * sigmoid((float)p.swish_beta * a);
    case CUDNN_POINTWISE_GELU_APPROX_TANH_FWD:
        return 0.5f * a * (1.0f + tanhf(kSqrt2OverPi * (a + kGeluC * a * a * a)));
    // backward activations: a = dy, b = x
    case CUDNN_POINTWISE_RELU_BWD: {
        const float lo = (float)p.relu_lower, hi = (float)std::min(p.relu_upper, (double)FLT_MAX);
        return a * (b <= lo ? (float)p.relu_slope : b >= hi ? 0.0f : 1.0f);
    }
    case CUDNN_POINTWISE_TANH_BWD: {
        const float t = tanhf(b);
        return a * (1.0f - t * t);
    }
    case CUDNN_POINTWISE_SIGMOID_BWD: {
        const float s = sigmoid(b);
        return a * s * (1.0f - s);
    }
    case CUDNN_POINTWISE_ELU_BWD: return a * (b > 0 ? 1.0f : (float)p.elu_alpha * expf(b));
    case CUDNN_POINTWISE_GELU_BWD:
        return a * (0.5f * (1.0f + erff(b * 0.70710678f)) + b * 0.39894228f * expf(-0.5f * b * b));
    case CUDNN_POINTWISE_SOFTPLUS_BWD: return a * sigmoid((float)p.softplus_beta * b);
    case CUDNN_POINTWISE_SWISH_BWD: {
        const float beta = (float)p.swish_beta, s = sigmoid(beta * b);
        return a * (s + beta * b * s * (1.0f - s));
    }
    case CUDNN_POINTWISE_GELU_APPROX_TANH_BWD: {
        const float u = kSqrt2OverPi * (b + kGeluC * b * b * b), t = tanhf(u);
        const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluC * b * b);
        return a * (0.5f * (1.0f + t) + 0.5f * b * (1.0f - t * t) * du);
    }
    case CUDNN_POINTWISE_CMP_EQ: return a == b;
    case CUDNN_POINTWISE_CMP_NEQ: return a != b;
    case CUDNN_POINTWISE_CMP_GT: return a > b;
    case CUDNN_POINTWISE_CMP_GE: return a >= b;
    case CUDNN_POINTWISE_CMP_LT: return a < b;
    case CUDNN_POINTWISE_CMP_LE: return a <= b;
    case CUDNN_POINTWISE_LOGICAL_AND: return a != 0 && b != 0;
    case CUDNN_POINTWISE_LOGICAL_OR: return a != 0 || b != 0;
    case CUDNN_POINTWISE_LOGICAL_NOT: return a == 0;
    case CUDNN_POINTWISE_GEN_INDEX: return (float)index;
    case CUDNN_POINTWISE_BINARY_SELECT: return c != 0 ? a : b;   // y = t ? x : b
    }
    return NAN;
}

void run_pointwise(const OpInfo &op, const Operand &y, const std::vector<Operand> &in) {
    const TensorInfo &yt = *y.t;
    int64_t st[4][CUDNN_DIM_MAX] = {};
    memcpy(st[0], yt.stride, sizeof st[0]);
    for (size_t k = 0; k < in.size(); k++) broadcast_strides(*in[k].t, yt, st[k + 1]);
    const bool gen_index = op.pw.mode == CUDNN_POINTWISE_GEN_INDEX;
    const int axis = (int)op.pw.axis;
    const size_t n = in.size();
    for_each_index<4>(yt.rank, yt.dim, st, [&](const int64_t *idx, const int64_t *off) {
        float v[3] = {0, 0, 0};
        if (!gen_index)   // GEN_INDEX's x only gives the shape
            for (size_t k = 0; k < n; k++) v[k] = in[k].get(off[k + 1]);
        y.set(off[0], pointwise(op, v[0], v[1], v[2], gen_index ? idx[axis] : 0));
    });
}

// A matmul into an fp32 tensor in memory that a later node reads is the engine's accumulator
// (the SDPA backward's dQ, cudnn-frontend's dQ_accum): cuDNN's fused kernels add each tile of
// the reduction into it with atomics, in whatever order their blocks finish, so its bits vary
// from run to run (cuDNN's determinism page; the deterministic backward has no accumulator).
// How many terms a block adds at once is the engine's (a tile of keys); here every term of K
// is an atomic add of its own, in an order drawn from CUDA_EMU_SEED and the execution's
// ticket: the finest grain, so that even a small model's runs part (with tiles of 16 keys,
// six steps of d2c64h1t64 gave the same bf16 model under two seeds of three). Code that
// expects the same bits from that graph twice fails here too. Before cuDNN 9.6 the engine
// added to what the accumulator held (the caller zeroed it: cudnn-frontend's memset below
// 9.6); from 9.6 it zeroes it itself.
std::atomic<uint64_t> g_accum_tickets{0};

void run_matmul(const Operand &a, const Operand &b, const Operand &c, bool atomic_accum) {
    const TensorInfo &at = *a.t, &bt = *b.t, &ct = *c.t;
    const int r = ct.rank;
    const int64_t M = ct.dim[r - 2], N = ct.dim[r - 1], K = at.dim[r - 1];
    int64_t st[3][CUDNN_DIM_MAX] = {};
    for (int d = 0; d < r - 2; d++) {
        st[0][d] = ct.stride[d];
        st[1][d] = at.dim[d] == 1 ? 0 : at.stride[d];
        st[2][d] = bt.dim[d] == 1 ? 0 : bt.stride[d];
    }
    std::vector<float> ap((size_t)(M * K)), bp((size_t)(N * K));   // A rows, B columns, as floats
    const uint64_t ticket = atomic_accum ? g_accum_tickets.fetch_add(1) : 0;
    const bool zeroed = cudnnGetVersion() >= 90600;
    for_each_index<3>(r - 2, ct.dim, st, [&](const int64_t *, const int64_t *off) {
        for (int64_t m = 0; m < M; m++)
            for (int64_t k = 0; k < K; k++) ap[m * K + k] = a.get(off[1] + m * at.stride[r - 2] + k * at.stride[r - 1]);
        for (int64_t nn = 0; nn < N; nn++)
            for (int64_t k = 0; k < K; k++)
                bp[nn * K + k] = b.get(off[2] + k * bt.stride[r - 2] + nn * bt.stride[r - 1]);
        if (atomic_accum) {
            std::vector<int64_t> order((size_t)K);
            for (int64_t m = 0; m < M; m++) {
                // one order per output row (per batch and execution): a row's terms race
                uint64_t x = emu::seed() * 0x9e3779b97f4a7c15ull + ticket * 0xbf58476d1ce4e5b9ull +
                             (uint64_t)(off[0] + m * ct.stride[r - 2]);
                for (int64_t k = 0; k < K; k++) order[(size_t)k] = k;
                for (int64_t k = K - 1; k > 0; k--) {   // Fisher-Yates on a splitmix64 stream
                    x += 0x9e3779b97f4a7c15ull;
                    uint64_t z = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
                    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
                    std::swap(order[(size_t)k], order[(size_t)((z ^ (z >> 31)) % (uint64_t)(k + 1))]);
                }
                const float *ar = &ap[m * K];
                for (int64_t nn = 0; nn < N; nn++) {
                    const float *br = &bp[nn * K];
                    const int64_t o = off[0] + m * ct.stride[r - 2] + nn * ct.stride[r - 1];
                    float acc = zeroed ? 0.0f : c.get(o);
                    for (int64_t k : order) acc += ar[k] * br[k];   // each an atomicAdd
                    c.set(o, acc);
                }
            }
            emu::progress();
            return;
        }
        for (int64_t m = 0; m < M; m++) {
            const float *ar = &ap[m * K];
            for (int64_t nn = 0; nn < N; nn++) {
                const float *br = &bp[nn * K];
                float acc = 0;   // fp32 accumulation
                for (int64_t k = 0; k < K; k++) acc += ar[k] * br[k];
                c.set(off[0] + m * ct.stride[r - 2] + nn * ct.stride[r - 1], acc);
            }
        }
        emu::progress();
    });
}

void run_reduction(const OpInfo &op, const Operand &x, const Operand &y) {
    const TensorInfo &xt = *x.t, &yt = *y.t;
    // y's elements by their row-major position; reduced dims step 0
    int64_t st[2][CUDNN_DIM_MAX] = {};
    memcpy(st[0], xt.stride, sizeof st[0]);
    int64_t packed = 1;
    for (int d = yt.rank - 1; d >= 0; d--) {
        st[1][d] = yt.dim[d] == 1 ? 0 : packed;
        packed *= yt.dim[d];
    }
    const cudnnReduceTensorOp_t rop = op.reduce;
    float init = 0;
    if (rop == CUDNN_REDUCE_TENSOR_MUL || rop == CUDNN_REDUCE_TENSOR_MUL_NO_ZEROS) init = 1;
    if (rop == CUDNN_REDUCE_TENSOR_MIN) init = INFINITY;
    if (rop == CUDNN_REDUCE_TENSOR_MAX) init = -INFINITY;
    std::vector<float> acc((size_t)yt.count(), init);
    for_each_index<2>(xt.rank, xt.dim, st, [&](const int64_t *, const int64_t *off) {
        const float v = x.get(off[0]);
        float &s = acc[off[1]];
        switch (rop) {
        case CUDNN_REDUCE_TENSOR_ADD: case CUDNN_REDUCE_TENSOR_AVG: s += v; break;
        case CUDNN_REDUCE_TENSOR_MUL: s *= v; break;
        case CUDNN_REDUCE_TENSOR_MUL_NO_ZEROS: if (v != 0) s *= v; break;
        case CUDNN_REDUCE_TENSOR_MIN: s = fminf(s, v); break;
        case CUDNN_REDUCE_TENSOR_MAX: s = fmaxf(s, v); break;
        case CUDNN_REDUCE_TENSOR_AMAX: s = fmaxf(s, fabsf(v)); break;
        case CUDNN_REDUCE_TENSOR_NORM1: s += fabsf(v); break;
        case CUDNN_REDUCE_TENSOR_NORM2: s += v * v; break;
        }
    });
    const float n = (float)(xt.count() / yt.count());
    int64_t yst[1][CUDNN_DIM_MAX];
    memcpy(yst[0], yt.stride, sizeof yst[0]);
    int64_t i = 0;
    for_each_index<1>(yt.rank, yt.dim, yst, [&](const int64_t *, const int64_t *off) {
        float v = acc[i++];
        if (rop == CUDNN_REDUCE_TENSOR_AVG) v /= n;
        if (rop == CUDNN_REDUCE_TENSOR_NORM2) v = sqrtf(v);
        y.set(off[0], v);
    });
}

// VIEW_ONLY reshape: y's element at offset o is x's element at offset o.
void run_reshape(const Operand &x, const Operand &y) {
    int64_t st[1][CUDNN_DIM_MAX];
    memcpy(st[0], y.t->stride, sizeof st[0]);
    for_each_index<1>(y.t->rank, y.t->dim, st,
                      [&](const int64_t *, const int64_t *off) { y.set(off[0], x.get(off[0])); });
}

// One execution: runs on the stream's worker thread. mem: each memory tensor's data pointer;
// scalar: each by-value tensor's value (read when cudnnBackendExecute was called).
void run_program(const Program &p, const std::vector<char *> &mem, std::vector<float> scalar, char *ws) {
    std::vector<std::vector<float>> scratch(p.tensors.size());
    auto operand = [&](int i) {
        Operand o;
        o.t = &p.tensors[i];
        if (o.t->is_virtual) o.buf = scratch[i].data();
        else if (o.t->by_value) o.buf = &scalar[i];
        else o.mem = mem[i];
        return o;
    };
    for (size_t s = 0; s < p.steps.size(); s++) {
        const Program::Step &step = p.steps[s];
        if (p.workspace > 0) memset(ws, 0xff, (size_t)p.workspace);   // the engine's own use of it: NaN bytes
        if (p.tensors[step.out].is_virtual) scratch[step.out].assign((size_t)p.tensors[step.out].extent(), NAN);
        std::vector<Operand> in;
        for (int i : step.in) in.push_back(operand(i));
        const Operand out = operand(step.out);
        switch (step.op.kind) {
        case OP_POINTWISE: run_pointwise(step.op, out, in); break;
        case OP_MATMUL: {
            const TensorInfo &t = p.tensors[step.out];
            bool read_later = false;   // by a later node of the graph: the accumulator
            for (size_t l = s + 1; l < p.steps.size() && !read_later; l++)
                for (int i : p.steps[l].in) read_later |= i == step.out;
            run_matmul(in[0], in[1], out, !t.is_virtual && t.dtype == CUDNN_DATA_FLOAT && read_later);
            break;
        }
        case OP_REDUCTION: run_reduction(step.op, in[0], out); break;
        case OP_RESHAPE: run_reshape(in[0], out); break;
        }
        for (size_t i = 0; i < p.tensors.size(); i++)   // virtual tensors no later step reads
            if (p.tensors[i].is_virtual && p.last_use[i] == (int)s) std::vector<float>().swap(scratch[i]);
        emu::progress();
    }
}

cudnnStatus_t execute(cudnnContext *h, const Desc &plan, const Desc &pack) {
    const ProgramP prog = plan.program;
    const Attr *uids = attr(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS),
               *ptrs = attr(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
    const int64_t n = uids ? uids->count : 0;
    const size_t nt = prog->tensors.size();
    std::vector<char *> mem(nt, nullptr);
    std::vector<float> scalar(nt, 0.0f);
    for (size_t i = 0; i < nt; i++) {
        const TensorInfo &t = prog->tensors[i];
        if (t.is_virtual) continue;
        int64_t k = 0;
        while (k < n && elem<int64_t>(*uids, k) != t.uid) k++;
        if (k == n)
            return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendExecute: the variant pack has no data pointer for %s",
                        t.describe().c_str());
        char *p = elem<char *>(*ptrs, k);
        if (!p)
            return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendExecute: the data pointer for %s is NULL",
                        t.describe().c_str());
        if (t.by_value) {
            // a by-value tensor's pointer is host memory, read now (it is a kernel argument)
            if (emu::mem_kind(p) == emu::MEM_DEVICE)
                return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendExecute: by-value %s points to device memory %p; "
                            "cuDNN reads it on the host", t.describe().c_str(), (void *)p);
            scalar[i] = load(t.dtype, p, 0);
            continue;
        }
        if ((uintptr_t)p % (uintptr_t)t.alignment != 0)
            return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendExecute: the data pointer %p for %s is not %lld-byte "
                        "aligned (its CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT)", (void *)p, t.describe().c_str(),
                        (long long)t.alignment);
        char what[256];
        snprintf(what, sizeof what, "cudnnBackendExecute: %s", t.describe().c_str());
        if (!emu::check_device_range(p, (size_t)t.extent() * dtype_bytes(t.dtype), what))
            return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendExecute: the data pointer %p does not hold %s (%lld bytes "
                        "of device or pinned memory)", (void *)p, t.describe().c_str(),
                        (long long)(t.extent() * (int64_t)dtype_bytes(t.dtype)));
        mem[i] = p;
    }
    char *ws = elem<char *>(*attr(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE));
    if (prog->workspace > 0 &&
        !emu::check_device_range(ws, (size_t)prog->workspace, "cudnnBackendExecute: the variant pack's workspace"))
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendExecute: the workspace %p does not hold the %lld bytes the "
                    "plan asks for (CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)", (void *)ws, (long long)prog->workspace);
    // An operation graph's kernels (fused or generated for it) load at its first execution
    // (lazy loading, emu.h); another graph of the same shape counts as other kernels.
    emu::load_library_kernels("cuDNN's kernels for operation graph #" + std::to_string(prog->serial) + " (" +
                              std::to_string(prog->steps.size()) + " operations)");
    cudaError_t e = emu::enqueue(h->stream, "cudnnBackendExecute (emulated engine)",
                                 [prog, mem, scalar, ws] { run_program(*prog, mem, scalar, ws); });
    if (e != cudaSuccess)
        return fail(CUDNN_STATUS_EXECUTION_FAILED, "cudnnBackendExecute: queuing on the handle's stream %p: %s",
                    (void *)h->stream, cudaGetErrorName(e));
    return CUDNN_STATUS_SUCCESS;
}

}  // namespace

// ================================================================ the cuDNN entry points

extern "C" {

// CUDA_EMU_CUDNN_VERSION=N: the version reported, as another runtime cuDNN would report it,
// for the callers' decisions by version (the emulated library itself stays this one).
size_t cudnnGetVersion(void) {
    const char *v = getenv("CUDA_EMU_CUDNN_VERSION");
    if (v && *v) {
        char *end;
        unsigned long long n = strtoull(v, &end, 10);
        if (*end == '\0' && n > 0) return (size_t)n;
        fprintf(stderr, "cuda_emu: CUDA_EMU_CUDNN_VERSION=%s is not a cudnnGetVersion() number (9.14.0 is 91400)\n", v);
        exit(EXIT_FAILURE);
    }
    return CUDNN_VERSION;
}

const char *cudnnGetErrorString(cudnnStatus_t status) { return status_name(as_int(status)); }

// Copies the calling thread's last error message (truncated to max_size) and clears it.
void cudnnGetLastErrorString(char *message, size_t max_size) {
    if (!message || max_size == 0) return;
    snprintf(message, max_size, "%s", t_last_error.c_str());
    t_last_error.clear();
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle) {
    FROM_HOST_FUNCTION_CHECK();
    if (!handle) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnCreate: handle is NULL");
    std::lock_guard<std::mutex> lk(g_mu);
    cudnnContext *h = new cudnnContext;
    g_handles.insert(h);
    *handle = h;
    return CUDNN_STATUS_SUCCESS;
}

// As documented, releasing the handle's resources synchronizes the device.
cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
    FROM_HOST_FUNCTION_CHECK();
    {
        std::lock_guard<std::mutex> lk(g_mu);
        if (!g_handles.erase(handle))
            return fail(CUDNN_STATUS_BAD_PARAM, "cudnnDestroy: %p is not a live handle", (void *)handle);
    }
    cudaDeviceSynchronize();
    delete handle;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
    FROM_HOST_FUNCTION_CHECK();
    std::lock_guard<std::mutex> lk(g_mu);
    if (!g_handles.count(handle))
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetStream: %p is not a live handle", (void *)handle);
    handle->stream = stream;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t *stream) {
    FROM_HOST_FUNCTION_CHECK();
    std::lock_guard<std::mutex> lk(g_mu);
    if (!g_handles.count(handle))
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetStream: %p is not a live handle", (void *)handle);
    if (!stream) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetStream: stream is NULL");
    *stream = handle->stream;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t *descriptor) {
    FROM_HOST_FUNCTION_CHECK();
    if (!descriptor) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendCreateDescriptor: descriptor is NULL");
    if (as_int(type) < 0 || as_int(type) > CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendCreateDescriptor: %d is not a cudnnBackendDescriptorType_t",
                    as_int(type));
    if (!emulated_type(type))
        return fail(CUDNN_STATUS_NOT_SUPPORTED, "cudnnBackendCreateDescriptor: %s descriptors are not emulated",
                    desc_type_name(type));
    std::lock_guard<std::mutex> lk(g_mu);
    DescP d = std::make_shared<Desc>(type);
    g_descs[d.get()] = d;
    *descriptor = d.get();
    return CUDNN_STATUS_SUCCESS;
}

// Descriptors that reference this one keep what they need; the handle itself becomes invalid.
cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor) {
    FROM_HOST_FUNCTION_CHECK();
    std::lock_guard<std::mutex> lk(g_mu);
    if (!g_descs.erase((Desc *)descriptor))
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendDestroyDescriptor: %p is not a live descriptor", descriptor);
    return CUDNN_STATUS_SUCCESS;
}

// Deprecated: puts the descriptor back into its just-created state.
cudnnStatus_t cudnnBackendInitialize(cudnnBackendDescriptor_t descriptor) {
    FROM_HOST_FUNCTION_CHECK();
    std::lock_guard<std::mutex> lk(g_mu);
    DescP d = lookup(descriptor);
    if (!d) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendInitialize: %p is not a live descriptor", descriptor);
    *d = Desc(d->type);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t count, const void *values) {
    FROM_HOST_FUNCTION_CHECK();
    std::lock_guard<std::mutex> lk(g_mu);
    DescP d = lookup(descriptor);
    if (!d) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendSetAttribute: %p is not a live descriptor", descriptor);
    const char *owner = desc_type_name(d->type);
    if (d->finalized)
        return fail(CUDNN_STATUS_NOT_INITIALIZED,
                    "cudnnBackendSetAttribute(%s): the %s descriptor is already finalized", attr_name(as_int(name)),
                    owner);
    const AttrSpec *s = find_spec(d->type, as_int(name));
    if (!s)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendSetAttribute: %s is not an attribute of %s (%d)",
                    attr_name(as_int(name)), owner, as_int(name));
    if (s->mode == GET)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendSetAttribute: %s of %s is not settable", s->text, owner);
    if (s->mode == UNSUPPORTED)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, "cudnnBackendSetAttribute: %s of %s is not emulated", s->text, owner);
    if (as_int(type) != s->type && as_int(type) != s->alt)
        return fail(CUDNN_STATUS_BAD_PARAM,
                    "cudnnBackendSetAttribute: %s of %s takes CUDNN_TYPE_%s%s%s, not CUDNN_TYPE_%s", s->text, owner,
                    attr_type_name(s->type), s->alt != s->type ? " or CUDNN_TYPE_" : "",
                    s->alt != s->type ? attr_type_name(s->alt) : "", attr_type_name(as_int(type)));
    if (count < s->min_count || count > s->max_count)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendSetAttribute: %s of %s takes %lld to %lld elements, not %lld",
                    s->text, owner, (long long)s->min_count, (long long)s->max_count, (long long)count);
    if (count > 0 && !values)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendSetAttribute: %s of %s: arrayOfElements is NULL", s->text,
                    owner);
    Attr a;
    if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
        a.type = type;
        a.count = count;
        for (int64_t i = 0; i < count; i++) {
            cudnnBackendDescriptor_t e = ((const cudnnBackendDescriptor_t *)values)[i];
            DescP r = lookup(e);
            if (!r)
                return fail(CUDNN_STATUS_BAD_PARAM,
                            "cudnnBackendSetAttribute: %s of %s: element %lld (%p) is not a live "
                            "descriptor",
                            s->text, owner, (long long)i, e);
            if (s->elem == ANY_OP ? !is_operation(r->type) : (int)r->type != s->elem)
                return fail(CUDNN_STATUS_BAD_PARAM,
                            "cudnnBackendSetAttribute: %s of %s: element %lld is a %s descriptor, "
                            "not %s",
                            s->text, owner, (long long)i, desc_type_name(r->type),
                            s->elem == ANY_OP ? "an operation" : desc_type_name(s->elem));
            a.descs.push_back(r);
        }
    } else {
        a = make_attr(type, values, count);
        std::string why;
        if (!valid_values(a, &why))
            return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendSetAttribute: %s of %s: %s", s->text, owner, why.c_str());
    }
    d->attrs[name] = a;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t requested, int64_t *count,
                                       void *values) {
    FROM_HOST_FUNCTION_CHECK();
    std::lock_guard<std::mutex> lk(g_mu);
    DescP d = lookup(descriptor);
    if (!d) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendGetAttribute: %p is not a live descriptor", descriptor);
    const char *owner = desc_type_name(d->type);
    const AttrSpec *s = find_spec(d->type, as_int(name));
    if (!s)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendGetAttribute: %s is not an attribute of %s (%d)",
                    attr_name(as_int(name)), owner, as_int(name));
    if (s->mode == UNSUPPORTED)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, "cudnnBackendGetAttribute: %s of %s is not emulated", s->text, owner);
    if (as_int(type) != s->type && as_int(type) != s->alt)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendGetAttribute: %s of %s is CUDNN_TYPE_%s, not CUDNN_TYPE_%s",
                    s->text, owner, attr_type_name(s->type), attr_type_name(as_int(type)));
    if (!count) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendGetAttribute: %s: elementCount is NULL", s->text);
    if (requested < 0 || (requested > 0 && !values))
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendGetAttribute: %s: %lld elements requested into %p", s->text,
                    (long long)requested, values);
    if (!d->finalized)
        return fail(CUDNN_STATUS_NOT_INITIALIZED, "cudnnBackendGetAttribute(%s): the %s descriptor is not finalized",
                    s->text, owner);
    Attr a;
    if (s->mode == GET) a = computed(*d, name);
    else if (const Attr *set = attr(*d, name)) a = *set;
    else a.type = (cudnnBackendAttributeType_t)s->type;   // an optional attribute without a value
    *count = a.count;
    const int64_t n = std::min(requested, a.count);
    if (a.type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
        for (int64_t i = 0; i < n; i++) {
            cudnnBackendDescriptor_t e = ((cudnnBackendDescriptor_t *)values)[i];
            DescP dst = lookup(e);
            if (!dst || dst->type != a.descs[i]->type || dst->finalized)
                return fail(CUDNN_STATUS_BAD_PARAM,
                            "cudnnBackendGetAttribute: %s of %s: element %lld must be a created, "
                            "not yet finalized %s descriptor",
                            s->text, owner, (long long)i, desc_type_name(a.descs[i]->type));
            copy_into(*dst, *a.descs[i]);
        }
    } else if (type == a.type) {
        if (n > 0) memcpy(values, a.raw.data(), (size_t)n * attr_elem_size(type));
    } else {   // FLOAT <-> DOUBLE
        for (int64_t i = 0; i < n; i++) {
            if (type == CUDNN_TYPE_FLOAT) ((float *)values)[i] = (float)elem<double>(a, i);
            else ((double *)values)[i] = elem<float>(a, i);
        }
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor) {
    FROM_HOST_FUNCTION_CHECK();
    std::lock_guard<std::mutex> lk(g_mu);
    DescP d = lookup(descriptor);
    if (!d) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize: %p is not a live descriptor", descriptor);
    if (d->finalized)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize: the %s descriptor is already finalized",
                    desc_type_name(d->type));
    cudnnStatus_t st = finalize(*d);
    if (st == CUDNN_STATUS_SUCCESS) d->finalized = true;
    return st;
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t pack) {
    FROM_HOST_FUNCTION_CHECK();
    std::unique_lock<std::mutex> lk(g_mu);
    if (!g_handles.count(handle))
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendExecute: %p is not a live handle", (void *)handle);
    DescP p = lookup(plan), v = lookup(pack);
    if (!p || p->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR || !p->finalized)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendExecute: %p is not a finalized execution plan", plan);
    if (!v || v->type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR || !v->finalized)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendExecute: %p is not a finalized variant pack", pack);
    return execute(handle, *p, *v);
}

}  // extern "C"
