// test_cudnn_emu.cpp: tests of the emulated cuDNN backend API (dev/cuda_emu/cudnn.cpp), run
// against the emulated CUDA runtime. Graphs are built with the backend API exactly as a caller
// would (and as llmc/cuda/attention_cudnn.cu does for causal attention), executed, and compared
// with plain reference loops written here. "Broken callers" (a wrong stride, a wrong or
// duplicated unique id, a missing or too small buffer, a pageable pointer, a wrong attribute
// type, ...) must each give an error status or a result the reference comparison rejects.
//
// The expectations come from NVIDIA's cuDNN 9 documentation of the backend API (see cudnn.cpp's
// header). Output: one line per failed check, then "N passed, N failed"; exit status 1 when any
// check failed.
//
//   make build/emu/test_cudnn_emu && ./build/emu/test_cudnn_emu
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <vector>

static int g_passed = 0, g_failed = 0;

#define CHECK(cond, ...)                                  \
    do {                                                  \
        if (cond) {                                       \
            g_passed++;                                   \
        } else {                                          \
            g_failed++;                                   \
            printf("FAIL line %d: ", __LINE__);           \
            printf(__VA_ARGS__);                          \
            printf("\n");                                 \
        }                                                 \
    } while (0)

#define CUDA_OK(call)                                                                          \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            printf("FATAL line %d: %s: %s\n", __LINE__, #call, cudaGetErrorString(e_));         \
            exit(2);                                                                           \
        }                                                                                      \
    } while (0)

typedef cudnnBackendDescriptor_t Desc;
typedef std::vector<int64_t> Dims;

static const cudnnDataType_t F32 = CUDNN_DATA_FLOAT, BF16 = CUDNN_DATA_BFLOAT16, I32 = CUDNN_DATA_INT32;
static const char *sname(cudnnStatus_t s) { return cudnnGetErrorString(s); }
static bool bad_param(cudnnStatus_t s) { return CUDNN_STATUS_CATEGORY(s) == CUDNN_STATUS_BAD_PARAM; }
static bool not_supported(cudnnStatus_t s) { return CUDNN_STATUS_CATEGORY(s) == CUDNN_STATUS_NOT_SUPPORTED; }

static cudnnHandle_t g_handle;

// ---------------------------------------------------------------- building graphs

// Owns the descriptors it creates; remembers the first failing call.
struct Graph {
    std::vector<Desc> owned, ops;
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
    std::string where;
    Desc op_graph = nullptr, plan = nullptr;
    int64_t workspace = 0;

    Graph() = default;
    Graph(const Graph &) = delete;
    ~Graph() {
        for (size_t i = owned.size(); i-- > 0;) cudnnBackendDestroyDescriptor(owned[i]);
    }
    bool ok() const { return status == CUDNN_STATUS_SUCCESS; }
    void note(cudnnStatus_t st, const char *what) {
        if (ok() && st != CUDNN_STATUS_SUCCESS) status = st, where = what;
    }
    Desc create(cudnnBackendDescriptorType_t t) {
        Desc d = nullptr;
        if (!ok()) return nullptr;
        note(cudnnBackendCreateDescriptor(t, &d), "create");
        if (d) owned.push_back(d);
        return d;
    }
    void set(Desc d, cudnnBackendAttributeName_t n, cudnnBackendAttributeType_t t, int64_t c, const void *v,
             const char *what = "set") {
        if (ok()) note(cudnnBackendSetAttribute(d, n, t, c, v), what);
    }
    void fin(Desc d, const char *what) {
        if (ok()) note(cudnnBackendFinalize(d), what);
    }
};

static Dims packed(const Dims &dims) {
    Dims s(dims.size());
    int64_t st = 1;
    for (size_t i = dims.size(); i-- > 0;) s[i] = st, st *= dims[i];
    return s;
}

static Desc tensor(Graph &g, int64_t uid, cudnnDataType_t dt, const Dims &dims, const Dims &strides,
                   bool is_virtual = false, bool by_value = false) {
    Desc t = g.create(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t align = 16;
    g.set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
    g.set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, (int64_t)dims.size(), dims.data());
    g.set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, (int64_t)strides.size(), strides.data());
    g.set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    g.set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    g.set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
    if (by_value) g.set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
    g.fin(t, "tensor finalize");
    return t;
}

static Desc scalar(Graph &g, int64_t uid) { return tensor(g, uid, F32, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true); }

struct PwOpts {
    int64_t axis = -1;
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    float alpha1 = 1, alpha2 = 1;
    bool set_alpha = false;
    double relu_lower = 0, relu_upper = 0, relu_slope = 0;
    bool set_relu = false;
};

// y = op(x [, b [, t]]); for the backward activations x is dy and b is x, y is dx.
static Desc pointwise(Graph &g, cudnnPointwiseMode_t mode, Desc x, Desc b, Desc t, Desc y, const PwOpts &o = PwOpts()) {
    Desc pw = g.create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    g.set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    g.set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &o.prec);
    if (o.axis >= 0) g.set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &o.axis);
    if (o.set_relu) {
        g.set(pw, CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, CUDNN_TYPE_DOUBLE, 1, &o.relu_lower);
        g.set(pw, CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, CUDNN_TYPE_DOUBLE, 1, &o.relu_upper);
        g.set(pw, CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE, CUDNN_TYPE_DOUBLE, 1, &o.relu_slope);
    }
    g.fin(pw, "pointwise descriptor finalize");
    Desc op = g.create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    g.set(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
    const bool bwd = mode >= CUDNN_POINTWISE_RELU_BWD && mode <= CUDNN_POINTWISE_GELU_APPROX_TANH_BWD;
    if (bwd) {
        g.set(op, CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
        g.set(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
        g.set(op, CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    } else {
        g.set(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
        if (b) g.set(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
        if (t) g.set(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
        g.set(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    }
    if (o.set_alpha) {
        g.set(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &o.alpha1);
        g.set(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &o.alpha2);
    }
    g.fin(op, "pointwise operation finalize");
    if (g.ok()) g.ops.push_back(op);
    return op;
}

static Desc matmul(Graph &g, Desc a, Desc b, Desc c) {
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    Desc mm = g.create(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    g.set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    g.fin(mm, "matmul descriptor finalize");
    Desc op = g.create(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    g.set(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a);
    g.set(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    g.set(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
    g.set(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm);
    g.fin(op, "matmul operation finalize");
    if (g.ok()) g.ops.push_back(op);
    return op;
}

static Desc reduction(Graph &g, cudnnReduceTensorOp_t rop, Desc x, Desc y) {
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    Desc rd = g.create(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    g.set(rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &rop);
    g.set(rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    g.fin(rd, "reduction descriptor finalize");
    Desc op = g.create(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    g.set(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &rd);
    g.set(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    g.set(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    g.fin(op, "reduction operation finalize");
    if (g.ok()) g.ops.push_back(op);
    return op;
}

static Desc reshape(Graph &g, Desc x, Desc y) {
    Desc op = g.create(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    g.set(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    g.set(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    g.fin(op, "reshape operation finalize");
    if (g.ok()) g.ops.push_back(op);
    return op;
}

// Operation graph, heuristics (mode), the first engine config that becomes a plan.
static void make_plan(Graph &g, cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A) {
    g.op_graph = g.create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    g.set(g.op_graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &g_handle);
    g.set(g.op_graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, (int64_t)g.ops.size(), g.ops.data());
    g.fin(g.op_graph, "operation graph finalize");
    Desc heur = g.create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    g.set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g.op_graph);
    g.set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    g.fin(heur, "heuristics finalize");
    int64_t count = 0;
    if (g.ok())
        g.note(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                        nullptr), "heuristics count");
    if (g.ok() && count < 1) g.note(CUDNN_STATUS_NOT_SUPPORTED, "heuristics: no engine configs");
    Desc cfg = g.create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    int64_t got = 0;
    if (g.ok())
        g.note(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got,
                                        &cfg), "heuristics results");
    g.plan = g.create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    g.set(g.plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &g_handle);
    g.set(g.plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg);
    g.fin(g.plan, "plan finalize");
    int64_t n = 0;
    if (g.ok())
        g.note(cudnnBackendGetAttribute(g.plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                        &g.workspace), "workspace size");
}

static cudnnStatus_t execute(Desc plan, const std::vector<int64_t> &uids, const std::vector<void *> &ptrs, void *ws,
                             cudnnHandle_t h = nullptr) {
    Desc pack = nullptr;
    cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, (int64_t)uids.size(),
                                      uids.data());
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                      (int64_t)ptrs.size(), ptrs.data());
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(pack);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendExecute(h ? h : g_handle, plan, pack);
    if (pack) cudnnBackendDestroyDescriptor(pack);
    return st;
}

// ---------------------------------------------------------------- memory

static size_t dt_bytes(cudnnDataType_t dt) { return dt == CUDNN_DATA_BFLOAT16 || dt == CUDNN_DATA_HALF ? 2 : 4; }

static std::vector<char> to_bytes(cudnnDataType_t dt, const std::vector<float> &v) {
    std::vector<char> b(v.size() * dt_bytes(dt));
    for (size_t i = 0; i < v.size(); i++) {
        if (dt == F32) ((float *)b.data())[i] = v[i];
        else if (dt == BF16) ((__nv_bfloat16 *)b.data())[i] = __float2bfloat16(v[i]);
        else if (dt == CUDNN_DATA_HALF) ((__half *)b.data())[i] = __float2half(v[i]);
        else ((int32_t *)b.data())[i] = (int32_t)v[i];
    }
    return b;
}

static std::vector<float> from_bytes(cudnnDataType_t dt, const char *b, size_t n) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) {
        if (dt == F32) v[i] = ((const float *)b)[i];
        else if (dt == BF16) v[i] = __bfloat162float(((const __nv_bfloat16 *)b)[i]);
        else if (dt == CUDNN_DATA_HALF) v[i] = __half2float(((const __half *)b)[i]);
        else v[i] = (float)((const int32_t *)b)[i];
    }
    return v;
}

static float round_to(cudnnDataType_t dt, float v) { return from_bytes(dt, to_bytes(dt, {v}).data(), 1)[0]; }

static std::vector<void *> g_allocs;

// Device memory of n elements, all bytes 0xFF (NaN in fp32 and bf16: anything unwritten shows).
// The memset is on the legacy stream, which a non-blocking stream does not wait for: synchronize.
static void *dev(size_t n, cudnnDataType_t dt) {
    void *p = nullptr;
    CUDA_OK(cudaMalloc(&p, n * dt_bytes(dt)));
    CUDA_OK(cudaMemset(p, 0xff, n * dt_bytes(dt)));
    CUDA_OK(cudaDeviceSynchronize());
    g_allocs.push_back(p);
    return p;
}

static void *dev_from(cudnnDataType_t dt, const std::vector<float> &v) {
    void *p = dev(v.size(), dt);
    std::vector<char> b = to_bytes(dt, v);
    CUDA_OK(cudaMemcpy(p, b.data(), b.size(), cudaMemcpyHostToDevice));
    return p;
}

static std::vector<float> host_from(cudnnDataType_t dt, const void *p, size_t n) {
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<char> b(n * dt_bytes(dt));
    CUDA_OK(cudaMemcpy(b.data(), p, b.size(), cudaMemcpyDeviceToHost));
    return from_bytes(dt, b.data(), n);
}

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float uniform(float lo, float hi) {
    g_rng ^= g_rng >> 12, g_rng ^= g_rng << 25, g_rng ^= g_rng >> 27;
    return lo + (hi - lo) * (float)((g_rng * 0x2545F4914F6CDD1Dull) >> 40) / 16777216.0f;
}
static std::vector<float> randoms(size_t n, float lo, float hi, cudnnDataType_t round = F32) {
    std::vector<float> v(n);
    for (auto &x : v) x = round_to(round, uniform(lo, hi));
    return v;
}

static int64_t offset(const Dims &idx, const Dims &strides) {
    int64_t o = 0;
    for (size_t i = 0; i < idx.size(); i++) o += idx[i] * strides[i];
    return o;
}
static int64_t extent(const Dims &dims, const Dims &strides) {
    int64_t e = 1;
    for (size_t i = 0; i < dims.size(); i++) e += (dims[i] - 1) * strides[i];
    return e;
}
// Row-major iteration over dims.
static bool next_index(Dims &idx, const Dims &dims) {
    for (size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < dims[d]) return true;
        idx[d] = 0;
    }
    return false;
}

// ---------------------------------------------------------------- tests: the API itself

static void test_basics() {
    CHECK(cudnnGetVersion() == CUDNN_VERSION, "cudnnGetVersion %zu, header %d", cudnnGetVersion(), CUDNN_VERSION);
    CHECK(strcmp(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "CUDNN_STATUS_BAD_PARAM") == 0, "error string");
    cudaStream_t s, got = nullptr;
    CUDA_OK(cudaStreamCreate(&s));
    CHECK(cudnnSetStream(g_handle, s) == CUDNN_STATUS_SUCCESS && cudnnGetStream(g_handle, &got) == CUDNN_STATUS_SUCCESS &&
              got == s, "set/get stream");
    cudnnSetStream(g_handle, 0);
    CUDA_OK(cudaStreamDestroy(s));
    cudnnHandle_t h2;
    CHECK(cudnnCreate(&h2) == CUDNN_STATUS_SUCCESS && cudnnDestroy(h2) == CUDNN_STATUS_SUCCESS, "create/destroy");
    CHECK(bad_param(cudnnDestroy(h2)), "destroying a handle twice is an error");
    CHECK(bad_param(cudnnCreate(nullptr)), "cudnnCreate(NULL)");
}

static void test_attributes() {
    Desc t = nullptr;
    CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &t) == CUDNN_STATUS_SUCCESS, "create tensor");
    const cudnnDataType_t dt = F32;
    const int64_t dims[4] = {2, 3, 4, 5}, strides[4] = {60, 20, 5, 1}, uid = 42, align = 16, two[2] = {1, 2};
    // a wrong type, a wrong count, an attribute of another descriptor type
    cudnnStatus_t st = cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_INT64, 1, &uid);
    CHECK(bad_param(st), "DATA_TYPE set as INT64: %s", sname(st));
    st = cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 2, two);
    CHECK(bad_param(st), "UNIQUE_ID with 2 elements: %s", sname(st));
    st = cudnnBackendSetAttribute(t, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
    CHECK(bad_param(st), "a matmul attribute on a tensor: %s", sname(st));
    const int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    st = cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 9, nine);
    CHECK(bad_param(st), "9 dimensions (CUDNN_DIM_MAX is 8): %s", sname(st));
    const cudnnDataType_t bogus = (cudnnDataType_t)99;
    st = cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &bogus);
    CHECK(bad_param(st), "data type 99: %s", sname(st));
    char msg[256];
    cudnnGetLastErrorString(msg, sizeof msg);
    CHECK(msg[0] != 0, "cudnnGetLastErrorString after an error is empty");
    cudnnGetLastErrorString(msg, sizeof msg);
    CHECK(msg[0] == 0, "cudnnGetLastErrorString clears the message (got '%s')", msg);

    cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
    cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 3, strides);
    cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    int64_t n = 0, got[8] = {0};
    st = cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, &n, got);
    CHECK(st == CUDNN_STATUS_NOT_INITIALIZED, "get before finalize: %s", sname(st));
    st = cudnnBackendFinalize(t);
    CHECK(bad_param(st), "finalize without BYTE_ALIGNMENT: %s", sname(st));
    cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    st = cudnnBackendFinalize(t);
    CHECK(bad_param(st), "finalize with 4 dims and 3 strides: %s", sname(st));
    const int64_t neg[4] = {60, -20, 5, 1};
    cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, neg);
    st = cudnnBackendFinalize(t);
    CHECK(bad_param(st), "finalize with a negative stride: %s", sname(st));
    const int64_t align2 = 2;
    cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
    cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align2);
    st = cudnnBackendFinalize(t);
    CHECK(bad_param(st), "fp32 with 2-byte alignment: %s", sname(st));
    cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    st = cudnnBackendFinalize(t);
    CHECK(st == CUDNN_STATUS_SUCCESS, "finalize: %s", sname(st));

    // get returns what was set (count query first), and the defaults
    st = cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 0, &n, nullptr);
    CHECK(st == CUDNN_STATUS_SUCCESS && n == 4, "dimension count: %s, %lld", sname(st), (long long)n);
    st = cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 8, &n, got);
    CHECK(st == CUDNN_STATUS_SUCCESS && n == 4 && !memcmp(got, strides, sizeof strides), "strides read back");
    int64_t u = 0;
    cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &n, &u);
    CHECK(u == 42, "uid read back %lld", (long long)u);
    bool virt = true;
    st = cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &n, &virt);
    CHECK(st == CUDNN_STATUS_SUCCESS && n == 1 && !virt, "IS_VIRTUAL defaults to false");
    cudnnDataType_t gdt = BF16;
    cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &n, &gdt);
    CHECK(gdt == F32, "data type read back");
    st = cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT32, 1, &n, &u);
    CHECK(bad_param(st), "get with the wrong type: %s", sname(st));
    st = cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    CHECK(st == CUDNN_STATUS_NOT_INITIALIZED, "set after finalize: %s", sname(st));
    st = cudnnBackendFinalize(t);
    CHECK(st != CUDNN_STATUS_SUCCESS, "finalize twice: %s", sname(st));

    // descriptor-valued attributes: the element type is checked, references must be finalized
    Desc pw = nullptr, op = nullptr, t2 = nullptr;
    cudnnBackendCreateDescriptor(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &pw);
    cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, &op);
    cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &t2);
    st = cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
    CHECK(bad_param(st), "a pointwise descriptor as XDESC: %s", sname(st));
    st = cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_INT64, 1, &uid);
    CHECK(bad_param(st), "XDESC given as INT64: %s", sname(st));
    const cudnnPointwiseMode_t relu = CUDNN_POINTWISE_RELU_FWD;
    cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &relu);
    cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &dt);
    cudnnBackendFinalize(pw);
    cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
    cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
    cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t2);
    st = cudnnBackendFinalize(op);
    CHECK(bad_param(st), "an operation whose output tensor is not finalized: %s", sname(st));
    double lo = -1;
    cudnnBackendGetAttribute(pw, CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, CUDNN_TYPE_DOUBLE, 1, &n, &lo);
    CHECK(lo == 0.0, "RELU_LOWER_CLIP defaults to 0 (%g)", lo);

    Desc sdpa = nullptr;
    st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, &sdpa);
    CHECK(not_supported(st), "SDPA_FWD is not emulated: %s", sname(st));
    st = cudnnBackendCreateDescriptor((cudnnBackendDescriptorType_t)999, &sdpa);
    CHECK(bad_param(st), "descriptor type 999: %s", sname(st));
    for (Desc d : {op, pw, t2, t}) cudnnBackendDestroyDescriptor(d);
    st = cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    CHECK(bad_param(st), "a destroyed descriptor: %s", sname(st));
}

// Heuristics, engine configs, plans: what they report.
static void test_plan_queries() {
    Graph g;
    Desc x = tensor(g, 1, F32, {1, 2, 3}, {6, 3, 1}), y = tensor(g, 2, F32, {1, 2, 3}, {6, 3, 1});
    pointwise(g, CUDNN_POINTWISE_EXP, x, nullptr, nullptr, y);
    make_plan(g, CUDNN_HEUR_MODE_FALLBACK);
    CHECK(g.ok(), "plan from FALLBACK heuristics: %s at %s", sname(g.status), g.where.c_str());
    CHECK(g.workspace > 0, "the plan asks for workspace (%lld)", (long long)g.workspace);
    int64_t n = 0, count = 0, index = -1;
    cudnnBackendGetAttribute(g.op_graph, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64, 1, &n, &count);
    CHECK(count >= 1, "engine global count %lld", (long long)count);
    Desc cfg = nullptr, engine = nullptr;
    cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg);
    cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine);
    cudnnStatus_t st = cudnnBackendGetAttribute(g.plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                                CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &cfg);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &engine);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &index);
    CHECK(st == CUDNN_STATUS_SUCCESS && index >= 0 && index < count, "plan -> config -> engine index: %s, %lld",
          sname(st), (long long)index);
    int64_t cfg_ws = -1;
    cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &cfg_ws);
    CHECK(cfg_ws == g.workspace, "config workspace %lld == plan workspace %lld", (long long)cfg_ws, (long long)g.workspace);
    cudnnBackendDestroyDescriptor(cfg);
    cudnnBackendDestroyDescriptor(engine);

    // an engine the graph does not have
    Desc bad = nullptr;
    const int64_t idx = count + 5;
    cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &bad);
    cudnnBackendSetAttribute(bad, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g.op_graph);
    cudnnBackendSetAttribute(bad, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &idx);
    st = cudnnBackendFinalize(bad);
    CHECK(not_supported(st), "engine index past the count: %s", sname(st));
    cudnnBackendDestroyDescriptor(bad);

    // a graph run with mode A, and its output
    Graph h;
    Desc x2 = tensor(h, 1, F32, {1, 2, 3}, {6, 3, 1}), y2 = tensor(h, 2, F32, {1, 2, 3}, {6, 3, 1});
    pointwise(h, CUDNN_POINTWISE_NEG, x2, nullptr, nullptr, y2);
    make_plan(h, CUDNN_HEUR_MODE_A);
    std::vector<float> xv = {1, 2, 3, 4, 5, 6};
    void *dx = dev_from(F32, xv), *dy = dev(6, F32), *ws = dev((size_t)h.workspace / 4 + 1, F32);
    st = execute(h.plan, {1, 2}, {dx, dy}, ws);
    std::vector<float> yv = host_from(F32, dy, 6);
    CHECK(st == CUDNN_STATUS_SUCCESS && yv[5] == -6 && yv[0] == -1, "mode A plan runs: %s", sname(st));
}

// ---------------------------------------------------------------- tests: operations

// Batched matmul, every operand strided differently, batch broadcast of B, bf16 inputs.
static void test_matmul(cudnnDataType_t out_dt) {
    const int64_t Bn = 2, H = 3, M = 5, K = 4, N = 6;
    const Dims ad = {Bn, H, M, K}, as = {H * K * M, K * M, 1, M};        // A stored transposed
    const Dims bd = {Bn, 1, K, N}, bs = {K * 8, K * 8, 8, 1};           // rows padded to 8, one B per batch
    const Dims cd = {Bn, H, M, N}, cs = {H * M * 7 + 3, M * 7, 7, 1};   // padded rows and batches
    Graph g;
    Desc a = tensor(g, 1, BF16, ad, as), b = tensor(g, 2, F32, bd, bs), c = tensor(g, 3, out_dt, cd, cs);
    matmul(g, a, b, c);
    make_plan(g);
    CHECK(g.ok(), "matmul plan: %s at %s", sname(g.status), g.where.c_str());
    std::vector<float> av = randoms((size_t)extent(ad, as), -1, 1, BF16), bv = randoms((size_t)extent(bd, bs), -1, 1);
    void *pa = dev_from(BF16, av), *pb = dev_from(F32, bv), *pc = dev((size_t)extent(cd, cs), out_dt);
    void *ws = dev((size_t)g.workspace, F32);
    cudnnStatus_t st = execute(g.plan, {1, 2, 3}, {pa, pb, pc}, ws);
    CHECK(st == CUDNN_STATUS_SUCCESS, "matmul execute: %s", sname(st));
    std::vector<float> cv = host_from(out_dt, pc, (size_t)extent(cd, cs));
    double worst = 0;
    for (int64_t i = 0; i < Bn; i++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t m = 0; m < M; m++)
                for (int64_t n = 0; n < N; n++) {
                    double r = 0;
                    for (int64_t k = 0; k < K; k++)
                        r += (double)av[offset({i, h, m, k}, as)] * bv[offset({i, 0, k, n}, bs)];
                    const double got = cv[offset({i, h, m, n}, cs)];
                    const double tol = out_dt == F32 ? 1e-5 : 1.0 / 128 * fmax(fabs(r), 1e-3);
                    worst = fmax(worst, fabs(got - r) / tol);
                }
    CHECK(worst <= 1.0, "matmul (C %s) differs from the reference: %.2f x tolerance", out_dt == F32 ? "fp32" : "bf16",
          worst);
}

// A matmul into an fp32 tensor in memory that the graph reads again (the SDPA backward's dQ
// accumulator) adds its tiles along K atomically, in an order that changes from execution to
// execution: close to the reference every time, not the same bits every time. The same
// matmul with nothing reading its output gives the same bits every time. Before cuDNN 9.6
// the accumulator starts from what it held (the caller zeroes it), from 9.6 from zero.
static void test_accumulator() {
    const int64_t M = 4, K = 256, N = 3;
    const Dims ad = {1, 1, M, K}, bd = {1, 1, K, N}, cd = {1, 1, M, N};
    std::vector<float> av = randoms((size_t)(M * K), -1, 1), bv = randoms((size_t)(K * N), -1, 1);
    void *pa = dev_from(F32, av), *pb = dev_from(F32, bv);
    for (int accum = 0; accum < 2; accum++) {
        Graph g;
        Desc a = tensor(g, 1, F32, ad, packed(ad)), b = tensor(g, 2, F32, bd, packed(bd));
        Desc c = tensor(g, 3, F32, cd, packed(cd));
        matmul(g, a, b, c);
        if (accum) pointwise(g, CUDNN_POINTWISE_IDENTITY, c, nullptr, nullptr, tensor(g, 4, F32, cd, packed(cd)));
        make_plan(g);
        CHECK(g.ok(), "accumulator graph %d: %s at %s", accum, sname(g.status), g.where.c_str());
        void *pc = dev((size_t)(M * N), F32), *py = dev((size_t)(M * N), F32), *ws = dev((size_t)g.workspace + 4, F32);
        std::vector<float> first;
        int differ = 0;
        double worst = 0;
        for (int run = 0; run < 6; run++) {
            CHECK(cudaMemset(pc, 0, (size_t)(M * N) * 4) == cudaSuccess, "zeroing the accumulator");
            std::vector<int64_t> uids = {1, 2, 3};
            std::vector<void *> ptrs = {pa, pb, pc};
            if (accum) uids.push_back(4), ptrs.push_back(py);
            CHECK(execute(g.plan, uids, ptrs, ws) == CUDNN_STATUS_SUCCESS, "accumulator graph %d runs", accum);
            std::vector<float> y = host_from(F32, accum ? py : pc, (size_t)(M * N));
            for (int64_t m = 0; m < M; m++)
                for (int64_t n = 0; n < N; n++) {
                    double r = 0;
                    for (int64_t k = 0; k < K; k++) r += (double)av[m * K + k] * bv[k * N + n];
                    worst = fmax(worst, fabs(y[m * N + n] - r) / 1e-4);
                }
            if (run == 0) first = y;
            else differ += memcmp(first.data(), y.data(), y.size() * 4) != 0;
        }
        CHECK(worst <= 1.0, "accumulator graph %d differs from the reference: %.2f x tolerance", accum, worst);
        if (accum) CHECK(differ > 0, "the accumulator gave the same bits in all 6 executions");
        else CHECK(differ == 0, "a matmul into memory nothing reads again changed bits in %d of 5 executions", differ);
        if (accum) {   // cuDNN 9.5: adds to what the accumulator holds
            std::vector<float> ones((size_t)(M * N), 1.0f);
            CHECK(cudaMemcpy(pc, ones.data(), ones.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess, "ones");
            setenv("CUDA_EMU_CUDNN_VERSION", "90500", 1);
            CHECK(execute(g.plan, {1, 2, 3, 4}, {pa, pb, pc, py}, ws) == CUDNN_STATUS_SUCCESS, "9.5 runs");
            std::vector<float> y = host_from(F32, py, (size_t)(M * N));   // the execution read the version
            unsetenv("CUDA_EMU_CUDNN_VERSION");
            CHECK(fabs(y[0] - 1.0f - first[0]) < 1e-3, "cuDNN 9.5's accumulator: %g, expected 1 + %g", y[0], first[0]);
        }
    }
}

static double sigm(double x) { return 1 / (1 + exp(-x)); }

// Reference pointwise, in double: y = op(x, b, t); backward modes get (dy, x).
static double ref_pointwise(cudnnPointwiseMode_t m, double x, double b, double t, int64_t index, const PwOpts &o) {
    const double k = sqrt(2 / M_PI), c = 0.044715;
    switch (m) {
    case CUDNN_POINTWISE_ADD: return x + b;
    case CUDNN_POINTWISE_ADD_SQUARE: return x + b * b;
    case CUDNN_POINTWISE_DIV: return x / b;
    case CUDNN_POINTWISE_MAX: return fmax(x, b);
    case CUDNN_POINTWISE_MIN: return fmin(x, b);
    case CUDNN_POINTWISE_MOD: return fmod(x, b);
    case CUDNN_POINTWISE_MUL: return x * b;
    case CUDNN_POINTWISE_POW: return pow(x, b);
    case CUDNN_POINTWISE_SUB: return x - b;
    case CUDNN_POINTWISE_ATAN2: return atan2(x, b);
    case CUDNN_POINTWISE_ABS: return fabs(x);
    case CUDNN_POINTWISE_CEIL: return ceil(x);
    case CUDNN_POINTWISE_COS: return cos(x);
    case CUDNN_POINTWISE_EXP: return exp(x);
    case CUDNN_POINTWISE_FLOOR: return floor(x);
    case CUDNN_POINTWISE_LOG: return log(x);
    case CUDNN_POINTWISE_NEG: return -x;
    case CUDNN_POINTWISE_RSQRT: return 1 / sqrt(x);
    case CUDNN_POINTWISE_SIN: return sin(x);
    case CUDNN_POINTWISE_SQRT: return sqrt(x);
    case CUDNN_POINTWISE_TAN: return tan(x);
    case CUDNN_POINTWISE_ERF: return erf(x);
    case CUDNN_POINTWISE_IDENTITY: return x;
    case CUDNN_POINTWISE_RECIPROCAL: return 1 / x;
    case CUDNN_POINTWISE_RELU_FWD:
        if (o.set_relu) return x < o.relu_lower ? o.relu_lower + o.relu_slope * (x - o.relu_lower) : fmin(x, o.relu_upper);
        return fmax(x, 0);
    case CUDNN_POINTWISE_TANH_FWD: return tanh(x);
    case CUDNN_POINTWISE_SIGMOID_FWD: return sigm(x);
    case CUDNN_POINTWISE_ELU_FWD: return x > 0 ? x : exp(x) - 1;
    case CUDNN_POINTWISE_GELU_FWD: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case CUDNN_POINTWISE_SOFTPLUS_FWD: return log1p(exp(x));
    case CUDNN_POINTWISE_SWISH_FWD: return x * sigm(x);
    case CUDNN_POINTWISE_GELU_APPROX_TANH_FWD: return 0.5 * x * (1 + tanh(k * (x + c * x * x * x)));
    case CUDNN_POINTWISE_RELU_BWD: return x * (b > 0 ? 1 : 0);
    case CUDNN_POINTWISE_TANH_BWD: return x * (1 - tanh(b) * tanh(b));
    case CUDNN_POINTWISE_SIGMOID_BWD: return x * sigm(b) * (1 - sigm(b));
    case CUDNN_POINTWISE_ELU_BWD: return x * (b > 0 ? 1 : exp(b));
    case CUDNN_POINTWISE_GELU_BWD: return x * (0.5 * (1 + erf(b / sqrt(2.0))) + b * exp(-b * b / 2) / sqrt(2 * M_PI));
    case CUDNN_POINTWISE_SOFTPLUS_BWD: return x * sigm(b);
    case CUDNN_POINTWISE_SWISH_BWD: return x * (sigm(b) + b * sigm(b) * (1 - sigm(b)));
    case CUDNN_POINTWISE_GELU_APPROX_TANH_BWD: {
        const double u = k * (b + c * b * b * b), th = tanh(u);
        return x * (0.5 * (1 + th) + 0.5 * b * (1 - th * th) * k * (1 + 3 * c * b * b));
    }
    case CUDNN_POINTWISE_CMP_EQ: return x == b;
    case CUDNN_POINTWISE_CMP_NEQ: return x != b;
    case CUDNN_POINTWISE_CMP_GT: return x > b;
    case CUDNN_POINTWISE_CMP_GE: return x >= b;
    case CUDNN_POINTWISE_CMP_LT: return x < b;
    case CUDNN_POINTWISE_CMP_LE: return x <= b;
    case CUDNN_POINTWISE_LOGICAL_AND: return x != 0 && b != 0;
    case CUDNN_POINTWISE_LOGICAL_OR: return x != 0 || b != 0;
    case CUDNN_POINTWISE_LOGICAL_NOT: return x == 0;
    case CUDNN_POINTWISE_GEN_INDEX: return (double)index;
    case CUDNN_POINTWISE_BINARY_SELECT: return t != 0 ? x : b;
    }
    return NAN;
}

// One pointwise mode on X [2,3,4] (strided), B [2,1,4] (broadcast over dim 1), T [2,3,1] (INT32 mask).
static void test_pointwise_mode(cudnnPointwiseMode_t mode, const char *name, const PwOpts &o = PwOpts()) {
    const bool binary = (mode <= CUDNN_POINTWISE_SUB && mode != CUDNN_POINTWISE_SQRT) || mode == CUDNN_POINTWISE_ATAN2 ||
                        (mode >= CUDNN_POINTWISE_CMP_EQ && mode <= CUDNN_POINTWISE_LOGICAL_OR);
    const bool ternary = mode == CUDNN_POINTWISE_BINARY_SELECT;
    const bool bwd = mode >= CUDNN_POINTWISE_RELU_BWD && mode <= CUDNN_POINTWISE_GELU_APPROX_TANH_BWD;
    const bool positive = mode == CUDNN_POINTWISE_LOG || mode == CUDNN_POINTWISE_SQRT || mode == CUDNN_POINTWISE_RSQRT ||
                          mode == CUDNN_POINTWISE_POW;
    const bool logical = mode >= CUDNN_POINTWISE_LOGICAL_AND && mode <= CUDNN_POINTWISE_LOGICAL_NOT;
    const bool gen_index = mode == CUDNN_POINTWISE_GEN_INDEX;
    const Dims xd = {2, 3, 4}, xs = {16, 5, 1}, bd = bwd ? xd : Dims{2, 1, 4}, bs = bwd ? Dims{12, 4, 1} : Dims{4, 4, 1};
    const Dims td = {2, 3, 1}, ts = {3, 1, 1}, yd = xd, ys = {12, 4, 1};
    const cudnnDataType_t ydt = gen_index ? I32 : F32;
    Graph g;
    Desc x = tensor(g, 1, F32, xd, xs);
    Desc b = binary || ternary || bwd ? tensor(g, 2, F32, bd, bs) : nullptr;
    Desc t = ternary ? tensor(g, 3, I32, td, ts) : nullptr;
    Desc y = tensor(g, 4, ydt, yd, ys);
    pointwise(g, mode, x, b, t, y, o);
    make_plan(g);
    CHECK(g.ok(), "%s plan: %s at %s", name, sname(g.status), g.where.c_str());
    if (!g.ok()) return;
    std::vector<float> xv = randoms((size_t)extent(xd, xs), positive ? 0.2f : -2, 2);
    std::vector<float> bv = randoms((size_t)extent(bd, bs), positive ? 0.2f : -2, 2);
    std::vector<float> tv = randoms((size_t)extent(td, ts), 0, 1);
    for (auto &v : tv) v = v > 0.5f;
    if (logical)
        for (auto *vec : {&xv, &bv})
            for (auto &v : *vec) v = v > 0;
    if (mode >= CUDNN_POINTWISE_CMP_EQ && mode <= CUDNN_POINTWISE_CMP_LE) xv[0] = bv[0];   // an equal pair
    if (mode == CUDNN_POINTWISE_DIV || mode == CUDNN_POINTWISE_MOD)
        for (auto &v : bv) v = v < 0 ? v - 0.5f : v + 0.5f;
    void *px = dev_from(F32, xv), *pb = dev_from(F32, bv), *pt = dev_from(I32, tv), *py = dev((size_t)extent(yd, ys), ydt);
    void *ws = dev((size_t)g.workspace, F32);
    std::vector<int64_t> uids = {1, 4};
    std::vector<void *> ptrs = {px, py};
    if (b) uids.push_back(2), ptrs.push_back(pb);
    if (t) uids.push_back(3), ptrs.push_back(pt);
    cudnnStatus_t st = execute(g.plan, uids, ptrs, ws);
    CHECK(st == CUDNN_STATUS_SUCCESS, "%s execute: %s", name, sname(st));
    std::vector<float> yv = host_from(ydt, py, (size_t)extent(yd, ys));
    double worst = 0;
    Dims i = {0, 0, 0};
    do {
        const double xa = xv[offset(i, xs)] * (o.set_alpha ? o.alpha1 : 1.0f);
        const double ba = bv[offset({i[0], bwd ? i[1] : 0, i[2]}, bs)] * (o.set_alpha ? o.alpha2 : 1.0f);
        const double r = ref_pointwise(mode, xa, ba, tv[offset({i[0], i[1], 0}, ts)], i[1], o);
        const double got = yv[offset(i, ys)];
        worst = fmax(worst, fabs(got - r) / (1e-4 * fmax(1.0, fabs(r))));
        if (got != got) worst = INFINITY;
    } while (next_index(i, xd));
    CHECK(worst <= 1.0, "%s differs from the reference: %.2f x tolerance", name, worst);
}

static void test_pointwise_modes() {
    struct {
        cudnnPointwiseMode_t m;
        const char *name;
    } modes[] = {
#define M(x) {CUDNN_POINTWISE_##x, #x}
        M(ADD), M(ADD_SQUARE), M(DIV), M(MAX), M(MIN), M(MOD), M(MUL), M(POW), M(SUB), M(ABS), M(CEIL), M(COS), M(EXP),
        M(FLOOR), M(LOG), M(NEG), M(RSQRT), M(SIN), M(SQRT), M(TAN), M(ERF), M(IDENTITY), M(RECIPROCAL), M(ATAN2),
        M(RELU_FWD), M(TANH_FWD), M(SIGMOID_FWD), M(ELU_FWD), M(GELU_FWD), M(SOFTPLUS_FWD), M(SWISH_FWD),
        M(GELU_APPROX_TANH_FWD), M(RELU_BWD), M(TANH_BWD), M(SIGMOID_BWD), M(ELU_BWD), M(GELU_BWD), M(SOFTPLUS_BWD),
        M(SWISH_BWD), M(GELU_APPROX_TANH_BWD), M(CMP_EQ), M(CMP_NEQ), M(CMP_GT), M(CMP_GE), M(CMP_LT), M(CMP_LE),
        M(LOGICAL_AND), M(LOGICAL_OR), M(LOGICAL_NOT), M(BINARY_SELECT),
#undef M
    };
    for (auto &m : modes) test_pointwise_mode(m.m, m.name);
    PwOpts gi;
    gi.axis = 1;
    test_pointwise_mode(CUDNN_POINTWISE_GEN_INDEX, "GEN_INDEX axis 1", gi);
    PwOpts alpha;
    alpha.set_alpha = true, alpha.alpha1 = 2.0f, alpha.alpha2 = -0.5f;
    test_pointwise_mode(CUDNN_POINTWISE_ADD, "ADD with alpha1 2, alpha2 -0.5", alpha);
    PwOpts clip;
    clip.set_relu = true, clip.relu_lower = -0.5, clip.relu_upper = 1.0, clip.relu_slope = 0.1;
    test_pointwise_mode(CUDNN_POINTWISE_RELU_FWD, "RELU_FWD clipped [-0.5, 1], slope 0.1", clip);

    // documented finalize-time errors: a missing input, operands that do not broadcast, a bad axis
    Graph g1;
    Desc x = tensor(g1, 1, F32, {2, 3}, {3, 1}), y = tensor(g1, 2, F32, {2, 3}, {3, 1});
    pointwise(g1, CUDNN_POINTWISE_ADD, x, nullptr, nullptr, y);
    CHECK(bad_param(g1.status), "ADD without BDESC: %s", sname(g1.status));
    Graph g2;
    Desc x2 = tensor(g2, 1, F32, {2, 3}, {3, 1}), b2 = tensor(g2, 2, F32, {2, 2}, {2, 1}), y2 = tensor(g2, 3, F32, {2, 3}, {3, 1});
    pointwise(g2, CUDNN_POINTWISE_ADD, x2, b2, nullptr, y2);
    CHECK(bad_param(g2.status), "ADD of [2,3] and [2,2]: %s", sname(g2.status));
    Graph g3;
    Desc x3 = tensor(g3, 1, F32, {2, 3}, {3, 1}), y3 = tensor(g3, 2, I32, {2, 3}, {3, 1});
    PwOpts ax;
    ax.axis = 2;
    pointwise(g3, CUDNN_POINTWISE_GEN_INDEX, x3, nullptr, nullptr, y3, ax);
    CHECK(bad_param(g3.status), "GEN_INDEX axis 2 of a 2-d tensor: %s", sname(g3.status));
}

// bf16 output: values rounded to nearest even.
static void test_bf16_rounding() {
    Graph g;
    Desc x = tensor(g, 1, F32, {1, 1, 4}, {4, 4, 1}), y = tensor(g, 2, BF16, {1, 1, 4}, {4, 4, 1});
    pointwise(g, CUDNN_POINTWISE_IDENTITY, x, nullptr, nullptr, y);
    make_plan(g);
    // 1 + 2^-8 is a tie (rounds to even: 1), 1 + 3*2^-8 rounds up to 1 + 2^-6, values stay exact otherwise
    std::vector<float> xv = {1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -2.5f, 1.0f + 1.0f / 128};
    void *px = dev_from(F32, xv), *py = dev(4, BF16), *ws = dev((size_t)g.workspace, F32);
    cudnnStatus_t st = execute(g.plan, {1, 2}, {px, py}, ws);
    std::vector<float> yv = host_from(BF16, py, 4);
    CHECK(st == CUDNN_STATUS_SUCCESS && yv[0] == 1.0f && yv[1] == 1.0f + 1.0f / 64 && yv[2] == -2.5f &&
              yv[3] == 1.0f + 1.0f / 128, "bf16 rounding: %s %.9g %.9g %.9g %.9g", sname(st), yv[0], yv[1], yv[2], yv[3]);
}

static void test_reductions() {
    struct {
        cudnnReduceTensorOp_t op;
        const char *name;
    } ops[] = {{CUDNN_REDUCE_TENSOR_ADD, "ADD"},   {CUDNN_REDUCE_TENSOR_MUL, "MUL"},   {CUDNN_REDUCE_TENSOR_MIN, "MIN"},
               {CUDNN_REDUCE_TENSOR_MAX, "MAX"},   {CUDNN_REDUCE_TENSOR_AMAX, "AMAX"}, {CUDNN_REDUCE_TENSOR_AVG, "AVG"},
               {CUDNN_REDUCE_TENSOR_NORM1, "NORM1"}, {CUDNN_REDUCE_TENSOR_NORM2, "NORM2"},
               {CUDNN_REDUCE_TENSOR_MUL_NO_ZEROS, "MUL_NO_ZEROS"}};
    const Dims xd = {2, 3, 4, 5}, xs = {80, 25, 5, 1};   // padded batches
    // reduce dims 2 and 3 into a strided y, and dims 1 and 3
    const Dims yds[2] = {{2, 3, 1, 1}, {2, 1, 4, 1}}, yss[2] = {{5, 1, 1, 1}, {8, 8, 2, 1}};
    for (auto &o : ops) {
        for (int v = 0; v < 2; v++) {
            Graph g;
            Desc x = tensor(g, 1, F32, xd, xs), y = tensor(g, 2, F32, yds[v], yss[v]);
            reduction(g, o.op, x, y);
            make_plan(g);
            CHECK(g.ok(), "reduction %s plan: %s at %s", o.name, sname(g.status), g.where.c_str());
            if (!g.ok()) continue;
            std::vector<float> xv = randoms((size_t)extent(xd, xs), -1.5f, 1.5f);
            xv[0] = 0;   // a zero for MUL_NO_ZEROS
            void *px = dev_from(F32, xv), *py = dev((size_t)extent(yds[v], yss[v]), F32), *ws = dev((size_t)g.workspace, F32);
            cudnnStatus_t st = execute(g.plan, {1, 2}, {px, py}, ws);
            std::vector<float> yv = host_from(F32, py, (size_t)extent(yds[v], yss[v]));
            double worst = st == CUDNN_STATUS_SUCCESS ? 0 : INFINITY;
            Dims j(4, 0);
            do {
                double acc = o.op == CUDNN_REDUCE_TENSOR_MUL || o.op == CUDNN_REDUCE_TENSOR_MUL_NO_ZEROS ? 1
                             : o.op == CUDNN_REDUCE_TENSOR_MIN ? INFINITY : o.op == CUDNN_REDUCE_TENSOR_MAX ? -INFINITY : 0;
                int count = 0;
                Dims i(4, 0);
                do {
                    bool in = true;
                    for (int d = 0; d < 4; d++) in = in && (yds[v][d] == 1 || i[d] == j[d]);
                    if (!in) continue;
                    const double e = xv[offset(i, xs)];
                    count++;
                    switch (o.op) {
                    case CUDNN_REDUCE_TENSOR_ADD: case CUDNN_REDUCE_TENSOR_AVG: acc += e; break;
                    case CUDNN_REDUCE_TENSOR_MUL: acc *= e; break;
                    case CUDNN_REDUCE_TENSOR_MUL_NO_ZEROS: if (e != 0) acc *= e; break;
                    case CUDNN_REDUCE_TENSOR_MIN: acc = fmin(acc, e); break;
                    case CUDNN_REDUCE_TENSOR_MAX: acc = fmax(acc, e); break;
                    case CUDNN_REDUCE_TENSOR_AMAX: acc = fmax(acc, fabs(e)); break;
                    case CUDNN_REDUCE_TENSOR_NORM1: acc += fabs(e); break;
                    case CUDNN_REDUCE_TENSOR_NORM2: acc += e * e; break;
                    }
                } while (next_index(i, xd));
                if (o.op == CUDNN_REDUCE_TENSOR_AVG) acc /= count;
                if (o.op == CUDNN_REDUCE_TENSOR_NORM2) acc = sqrt(acc);
                const double got = yv[offset(j, yss[v])];
                worst = fmax(worst, fabs(got - acc) / (1e-5 * fmax(1.0, fabs(acc))));
                if (got != got) worst = INFINITY;
            } while (next_index(j, yds[v]));
            CHECK(worst <= 1.0, "reduction %s into [%lld,%lld,%lld,%lld]: %.2f x tolerance (%s)", o.name,
                  (long long)yds[v][0], (long long)yds[v][1], (long long)yds[v][2], (long long)yds[v][3], worst, sname(st));
        }
    }
    Graph g;
    Desc x = tensor(g, 1, F32, {2, 3}, {3, 1}), y = tensor(g, 2, F32, {2, 2}, {2, 1});
    reduction(g, CUDNN_REDUCE_TENSOR_ADD, x, y);
    CHECK(bad_param(g.status), "reduction of [2,3] into [2,2]: %s", sname(g.status));
}

// Reshape as a view: a transpose through permuted dims and strides, and a plain re-shaping.
static void test_reshape() {
    {
        Graph g;
        Desc x = tensor(g, 1, F32, {2, 3, 4}, {12, 4, 1});
        Desc xt = tensor(g, 100, F32, {2, 4, 3}, {12, 1, 4}, true);   // x transposed, same memory
        Desc y = tensor(g, 2, F32, {2, 4, 3}, {12, 3, 1});
        reshape(g, x, xt);
        pointwise(g, CUDNN_POINTWISE_IDENTITY, xt, nullptr, nullptr, y);
        make_plan(g);
        CHECK(g.ok(), "transpose plan: %s at %s", sname(g.status), g.where.c_str());
        std::vector<float> xv = randoms(24, -1, 1);
        void *px = dev_from(F32, xv), *py = dev(24, F32), *ws = dev((size_t)g.workspace, F32);
        cudnnStatus_t st = execute(g.plan, {1, 2}, {px, py}, ws);
        std::vector<float> yv = host_from(F32, py, 24);
        bool ok = st == CUDNN_STATUS_SUCCESS;
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 3; j++) ok = ok && yv[b * 12 + i * 3 + j] == xv[b * 12 + j * 4 + i];
        CHECK(ok, "reshape as a transpose: %s", sname(st));
    }
    {
        Graph g;
        Desc x = tensor(g, 1, F32, {2, 3, 4}, {12, 4, 1}), y = tensor(g, 2, F32, {6, 4}, {4, 1});
        reshape(g, x, y);
        make_plan(g);
        std::vector<float> xv = randoms(24, -1, 1);
        void *px = dev_from(F32, xv), *py = dev(24, F32), *ws = dev((size_t)g.workspace, F32);
        cudnnStatus_t st = execute(g.plan, {1, 2}, {px, py}, ws);
        CHECK(st == CUDNN_STATUS_SUCCESS && host_from(F32, py, 24) == xv, "reshape [2,3,4] -> [6,4]: %s", sname(st));
    }
    {
        Graph g;
        Desc x = tensor(g, 1, F32, {2, 3, 4}, {12, 4, 1}), y = tensor(g, 2, F32, {2, 4, 3}, {24, 6, 2});
        reshape(g, x, y);
        CHECK(not_supported(g.status), "a reshape whose strides address other memory: %s", sname(g.status));
    }
}

// ---------------------------------------------------------------- causal attention, as attention_cudnn.cu builds it

enum : int64_t {
    kUidQ = 1, kUidK = 2, kUidV = 3, kUidO = 4, kUidStats = 5, kUidScale = 6, kUidMaskValue = 7, kUidDO = 8,
    kUidDQ = 9, kUidDK = 10, kUidDV = 11, kUidOne = 12, kUidDsum = 13, kUidDQAccum = 14, kFirstVirtual = 100,
};

struct Shapes {
    int64_t B, T, NH, HS, C;
    Dims qkv_d, qkv_s, kt_d, kt_s, o_s, row_d, row_s, s_d, s_s, st_s, bhtd_s;
    Shapes(int64_t b, int64_t t, int64_t h, int64_t d) : B(b), T(t), NH(h), HS(d), C(h * d) {
        const int64_t c = C;
        qkv_d = {b, h, t, d}, qkv_s = {t * 3 * c, d, 3 * c, 1};
        kt_d = {b, h, d, t}, kt_s = {t * 3 * c, d, 1, 3 * c};
        o_s = {t * c, d, c, 1};
        row_d = {b, h, t, 1}, row_s = packed(row_d);
        s_d = {b, h, t, t}, s_s = packed(s_d);
        st_s = {h * t * t, t * t, 1, t};
        bhtd_s = packed(qkv_d);
    }
};

enum Fault { NO_FAULT, O_PACKED_STRIDES, Q_WRONG_STRIDE, SELECT_SWAPPED, MASK_AXES_SWAPPED };

struct Attn {
    Graph g;
    int64_t next_uid = kFirstVirtual;
    Desc virt(cudnnDataType_t dt, const Dims &d, const Dims &s) { return tensor(g, next_uid++, dt, d, s, true); }
};

static Desc causal_mask(Attn &a, const Shapes &sh, Desc s, Desc mask_value, Fault f) {
    PwOpts row, col;
    row.axis = f == MASK_AXES_SWAPPED ? 3 : 2;
    col.axis = f == MASK_AXES_SWAPPED ? 2 : 3;
    Desc r = a.virt(I32, sh.s_d, sh.s_s), c = a.virt(I32, sh.s_d, sh.s_s);
    pointwise(a.g, CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, r, row);
    pointwise(a.g, CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, c, col);
    Desc keep = a.virt(CUDNN_DATA_BOOLEAN, sh.s_d, sh.s_s);
    PwOpts boolean;
    boolean.prec = CUDNN_DATA_BOOLEAN;
    pointwise(a.g, CUDNN_POINTWISE_CMP_GE, r, c, nullptr, keep, boolean);
    Desc masked = a.virt(F32, sh.s_d, sh.s_s);
    if (f == SELECT_SWAPPED) pointwise(a.g, CUDNN_POINTWISE_BINARY_SELECT, mask_value, s, keep, masked);
    else pointwise(a.g, CUDNN_POINTWISE_BINARY_SELECT, s, mask_value, keep, masked);
    return masked;
}

static void build_forward(Attn &a, const Shapes &sh, Fault f = NO_FAULT) {
    Graph &g = a.g;
    Dims q_s = sh.qkv_s;
    if (f == Q_WRONG_STRIDE) q_s[2] = sh.C;   // as if q were its own (B, T, NH, HS) tensor
    Desc q = tensor(g, kUidQ, BF16, sh.qkv_d, q_s);
    Desc kt = tensor(g, kUidK, BF16, sh.kt_d, sh.kt_s);
    Desc v = tensor(g, kUidV, BF16, sh.qkv_d, sh.qkv_s);
    Desc o = tensor(g, kUidO, BF16, sh.qkv_d, f == O_PACKED_STRIDES ? sh.bhtd_s : sh.o_s);
    Desc stats = tensor(g, kUidStats, F32, sh.row_d, sh.row_s);
    Desc scale = scalar(g, kUidScale), mask_value = scalar(g, kUidMaskValue);
    Desc s = a.virt(F32, sh.s_d, sh.s_s);
    matmul(g, q, kt, s);
    Desc s_scaled = a.virt(F32, sh.s_d, sh.s_s);
    pointwise(g, CUDNN_POINTWISE_MUL, s, scale, nullptr, s_scaled);
    Desc s_masked = causal_mask(a, sh, s_scaled, mask_value, f);
    Desc row_max = a.virt(F32, sh.row_d, sh.row_s);
    reduction(g, CUDNN_REDUCE_TENSOR_MAX, s_masked, row_max);
    Desc shifted = a.virt(F32, sh.s_d, sh.s_s);
    pointwise(g, CUDNN_POINTWISE_SUB, s_masked, row_max, nullptr, shifted);
    Desc e = a.virt(F32, sh.s_d, sh.s_s);
    pointwise(g, CUDNN_POINTWISE_EXP, shifted, nullptr, nullptr, e);
    Desc row_sum = a.virt(F32, sh.row_d, sh.row_s);
    reduction(g, CUDNN_REDUCE_TENSOR_ADD, e, row_sum);
    Desc log_sum = a.virt(F32, sh.row_d, sh.row_s);
    pointwise(g, CUDNN_POINTWISE_LOG, row_sum, nullptr, nullptr, log_sum);
    pointwise(g, CUDNN_POINTWISE_ADD, row_max, log_sum, nullptr, stats);
    Desc p = a.virt(BF16, sh.s_d, sh.s_s);
    pointwise(g, CUDNN_POINTWISE_DIV, e, row_sum, nullptr, p);
    matmul(g, p, v, o);
    make_plan(g);
}

static void build_backward(Attn &a, const Shapes &sh, bool dq_accumulator) {
    Graph &g = a.g;
    Desc q = tensor(g, kUidQ, BF16, sh.qkv_d, sh.qkv_s);
    Desc kt = tensor(g, kUidK, BF16, sh.kt_d, sh.kt_s);
    Desc vt = tensor(g, kUidV, BF16, sh.kt_d, sh.kt_s);
    Desc o = tensor(g, kUidO, BF16, sh.qkv_d, sh.o_s);
    Desc d_o = tensor(g, kUidDO, BF16, sh.qkv_d, sh.o_s);
    Desc stats = tensor(g, kUidStats, F32, sh.row_d, sh.row_s);
    Desc dq = tensor(g, kUidDQ, BF16, sh.qkv_d, sh.qkv_s);
    Desc dk = tensor(g, kUidDK, BF16, sh.qkv_d, sh.qkv_s);
    Desc dv = tensor(g, kUidDV, BF16, sh.qkv_d, sh.qkv_s);
    Desc scale = scalar(g, kUidScale), mask_value = scalar(g, kUidMaskValue), one = scalar(g, kUidOne);
    Desc do_o = a.virt(F32, sh.qkv_d, sh.bhtd_s);
    pointwise(g, CUDNN_POINTWISE_MUL, d_o, o, nullptr, do_o);
    Desc do_o_sum = a.virt(F32, sh.row_d, sh.row_s);
    reduction(g, CUDNN_REDUCE_TENSOR_ADD, do_o, do_o_sum);
    Desc dsum = tensor(g, kUidDsum, F32, sh.row_d, sh.row_s);
    pointwise(g, CUDNN_POINTWISE_MUL, do_o_sum, one, nullptr, dsum);
    Desc s = a.virt(F32, sh.s_d, sh.s_s);
    matmul(g, q, kt, s);
    Desc s_scaled = a.virt(F32, sh.s_d, sh.s_s);
    pointwise(g, CUDNN_POINTWISE_MUL, s, scale, nullptr, s_scaled);
    Desc s_centered = a.virt(F32, sh.s_d, sh.s_s);
    pointwise(g, CUDNN_POINTWISE_SUB, s_scaled, stats, nullptr, s_centered);
    Desc s_masked = causal_mask(a, sh, s_centered, mask_value, NO_FAULT);
    Desc p = a.virt(F32, sh.s_d, sh.s_s);
    pointwise(g, CUDNN_POINTWISE_EXP, s_masked, nullptr, nullptr, p);
    Desc pt = a.virt(BF16, sh.s_d, sh.st_s);
    reshape(g, p, pt);
    matmul(g, pt, d_o, dv);
    Desc dp = a.virt(F32, sh.s_d, sh.s_s);
    matmul(g, d_o, vt, dp);
    Desc dp_c = a.virt(F32, sh.s_d, sh.s_s);
    pointwise(g, CUDNN_POINTWISE_SUB, dp, dsum, nullptr, dp_c);
    Desc ds_u = a.virt(F32, sh.s_d, sh.s_s);
    pointwise(g, CUDNN_POINTWISE_MUL, dp_c, p, nullptr, ds_u);
    Desc ds = a.virt(F32, sh.s_d, sh.s_s);
    pointwise(g, CUDNN_POINTWISE_MUL, ds_u, scale, nullptr, ds);
    Desc dst = a.virt(BF16, sh.s_d, sh.st_s);
    reshape(g, ds, dst);
    matmul(g, dst, q, dk);
    Desc k = a.virt(F32, {sh.B, sh.NH, sh.T, sh.HS}, {sh.kt_s[0], sh.kt_s[1], sh.kt_s[3], sh.kt_s[2]});
    reshape(g, kt, k);
    if (dq_accumulator) {
        Desc acc = tensor(g, kUidDQAccum, F32, sh.qkv_d, sh.bhtd_s);
        matmul(g, ds, k, acc);
        pointwise(g, CUDNN_POINTWISE_IDENTITY, acc, nullptr, nullptr, dq);
    } else {
        matmul(g, ds, k, dq);
    }
    make_plan(g);
}

// Inputs, device buffers and the double-precision reference of one attention shape.
struct AttnCase {
    Shapes sh;
    std::vector<float> qkv, dout;                 // bf16 values
    std::vector<double> out, lse, dqkv;           // reference
    void *d_qkv, *d_out, *d_stats, *d_dout, *d_dqkv;
    float scale, mask_value = -FLT_MAX, one = 1.0f;

    AttnCase(int64_t B, int64_t T, int64_t NH, int64_t HS) : sh(B, T, NH, HS) {
        const int64_t C = sh.C, n_qkv = B * T * 3 * C, n_out = B * T * C;
        scale = 1.0f / sqrtf((float)HS);
        qkv = randoms((size_t)n_qkv, -2, 2, BF16);
        dout = randoms((size_t)n_out, -1, 1, BF16);
        out.assign((size_t)n_out, 0), lse.assign((size_t)(B * NH * T), 0), dqkv.assign((size_t)n_qkv, 0);
        std::vector<double> p((size_t)T), dp((size_t)T);
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < NH; h++)
                for (int64_t i = 0; i < T; i++) {
                    auto at = [&](int64_t t, int slot, int64_t d) { return (size_t)(((b * T + t) * 3 + slot) * C + h * HS + d); };
                    double m = -INFINITY, z = 0;
                    for (int64_t j = 0; j <= i; j++) {
                        double s = 0;
                        for (int64_t d = 0; d < HS; d++) s += (double)qkv[at(i, 0, d)] * qkv[at(j, 1, d)];
                        p[j] = s * scale;
                        m = fmax(m, p[j]);
                    }
                    for (int64_t j = 0; j <= i; j++) z += (p[j] = exp(p[j] - m));
                    for (int64_t j = 0; j <= i; j++) p[j] /= z;
                    lse[(size_t)((b * NH + h) * T + i)] = m + log(z);
                    const size_t o = (size_t)((b * T + i) * C + h * HS);
                    for (int64_t d = 0; d < HS; d++) {
                        double acc = 0;
                        for (int64_t j = 0; j <= i; j++) acc += p[j] * qkv[at(j, 2, d)];
                        out[o + d] = acc;
                    }
                    double D = 0;
                    for (int64_t d = 0; d < HS; d++) D += (double)dout[o + d] * out[o + d];
                    for (int64_t j = 0; j <= i; j++) {
                        double s = 0;
                        for (int64_t d = 0; d < HS; d++) s += (double)dout[o + d] * qkv[at(j, 2, d)];
                        dp[j] = p[j] * (s - D) * scale;
                    }
                    for (int64_t j = 0; j <= i; j++)
                        for (int64_t d = 0; d < HS; d++) {
                            dqkv[at(i, 0, d)] += dp[j] * qkv[at(j, 1, d)];
                            dqkv[at(j, 1, d)] += dp[j] * qkv[at(i, 0, d)];
                            dqkv[at(j, 2, d)] += p[j] * dout[o + d];
                        }
                }
        d_qkv = dev_from(BF16, qkv);
        d_dout = dev_from(BF16, dout);
        d_out = dev((size_t)n_out, BF16);
        d_stats = dev((size_t)(B * NH * T), F32);
        d_dqkv = dev((size_t)n_qkv, BF16);
    }
    void *q() { return d_qkv; }
    void *k() { return (char *)d_qkv + sh.C * 2; }
    void *v() { return (char *)d_qkv + sh.C * 4; }
    std::vector<int64_t> fwd_uids() const { return {kUidQ, kUidK, kUidV, kUidO, kUidStats, kUidScale, kUidMaskValue}; }
    std::vector<void *> fwd_ptrs() { return {q(), k(), v(), d_out, d_stats, &scale, &mask_value}; }
    void clear_outputs() {
        CUDA_OK(cudaMemset(d_out, 0xff, (size_t)(sh.B * sh.T * sh.C) * 2));
        CUDA_OK(cudaMemset(d_stats, 0xff, (size_t)(sh.B * sh.NH * sh.T) * 4));
        CUDA_OK(cudaMemset(d_dqkv, 0xff, (size_t)(sh.B * sh.T * 3 * sh.C) * 2));
    }
    // max |got - ref| / max |ref| over elements [offset, offset + width) of each row; NaN: infinite
    static double err(const std::vector<float> &got, const std::vector<double> &ref, size_t row, size_t offset,
                      size_t width) {
        double diff = 0, mx = 1e-30;
        for (size_t r = 0; r < got.size() / row; r++)
            for (size_t c = offset; c < offset + width; c++) {
                const size_t i = r * row + c;
                if (got[i] != got[i]) return INFINITY;
                diff = fmax(diff, fabs(got[i] - ref[i]));
                mx = fmax(mx, fabs(ref[i]));
            }
        return diff / mx;
    }
    double out_err() {
        return err(host_from(BF16, d_out, out.size()), out, (size_t)sh.C, 0, (size_t)sh.C);
    }
    double stats_err() {
        std::vector<float> s = host_from(F32, d_stats, lse.size());
        double diff = 0, mx = 1;
        for (size_t i = 0; i < s.size(); i++) {
            diff = s[i] == s[i] ? fmax(diff, fabs(s[i] - lse[i])) : INFINITY;
            mx = fmax(mx, fabs(lse[i]));
        }
        return diff / mx;
    }
    double grad_err(int slot) {
        return err(host_from(BF16, d_dqkv, dqkv.size()), dqkv, (size_t)(3 * sh.C), (size_t)(slot * sh.C), (size_t)sh.C);
    }
};

static const double kAttnTol = 2e-2;   // bf16 outputs and bf16 P / dS, as dev/test/cuda/gpu_attention_cudnn.cu allows

static size_t round_up(size_t a, size_t b) { return (a + b - 1) / b * b; }

static void test_attention() {
    AttnCase c(2, 16, 2, 8);
    Attn fwd;
    build_forward(fwd, c.sh);
    CHECK(fwd.g.ok(), "attention forward plan: %s at %s", sname(fwd.g.status), fwd.g.where.c_str());
    if (!fwd.g.ok()) return;
    void *ws_fwd = dev((size_t)fwd.g.workspace, F32);
    cudnnStatus_t st = execute(fwd.g.plan, c.fwd_uids(), c.fwd_ptrs(), ws_fwd);
    CHECK(st == CUDNN_STATUS_SUCCESS, "attention forward: %s", sname(st));
    double e_out = c.out_err(), e_stats = c.stats_err();
    CHECK(e_out < kAttnTol, "attention out error %.3e", e_out);
    CHECK(e_stats < kAttnTol, "attention stats error %.3e", e_stats);

    for (int accum = 1; accum >= 0; accum--) {
        Attn bwd;
        build_backward(bwd, c.sh, accum);
        CHECK(bwd.g.ok(), "attention backward plan (%s dQ): %s at %s", accum ? "accumulator" : "direct",
              sname(bwd.g.status), bwd.g.where.c_str());
        if (!bwd.g.ok()) continue;
        // the caller's workspace layout: plan workspace, then Dsum, then the dQ accumulator
        const size_t rows = (size_t)(c.sh.B * c.sh.NH * c.sh.T);
        const size_t dsum_off = round_up((size_t)bwd.g.workspace, 256), acc_off = dsum_off + round_up(rows * 4, 256);
        const size_t ws_bytes = acc_off + (accum ? rows * (size_t)c.sh.HS * 4 : 0);
        char *ws = (char *)dev(ws_bytes / 4 + 1, F32);
        CUDA_OK(cudaMemset(c.d_dqkv, 0xff, c.dqkv.size() * 2));
        std::vector<int64_t> uids = {kUidQ, kUidK, kUidV, kUidO, kUidDO, kUidStats, kUidDQ,
                                     kUidDK, kUidDV, kUidScale, kUidMaskValue, kUidOne, kUidDsum};
        std::vector<void *> ptrs = {c.q(), c.k(), c.v(), c.d_out, c.d_dout, c.d_stats, c.d_dqkv,
                                    (char *)c.d_dqkv + c.sh.C * 2, (char *)c.d_dqkv + c.sh.C * 4,
                                    &c.scale, &c.mask_value, &c.one, ws + dsum_off};
        if (accum) uids.push_back(kUidDQAccum), ptrs.push_back(ws + acc_off);
        st = execute(bwd.g.plan, uids, ptrs, ws);
        CHECK(st == CUDNN_STATUS_SUCCESS, "attention backward: %s", sname(st));
        for (int slot = 0; slot < 3; slot++) {
            double e = c.grad_err(slot);
            CHECK(e < kAttnTol, "attention backward (%s dQ) %s error %.3e", accum ? "accumulator" : "direct",
                  slot == 0 ? "dq" : slot == 1 ? "dk" : "dv", e);
        }
        if (!accum) continue;
        // broken caller: Dsum placed inside the plan's own workspace (the engine uses it)
        CUDA_OK(cudaMemset(c.d_dqkv, 0xff, c.dqkv.size() * 2));
        ptrs[12] = ws;
        st = execute(bwd.g.plan, uids, ptrs, ws);
        double e = fmax(c.grad_err(0), c.grad_err(1));
        CHECK(st != CUDNN_STATUS_SUCCESS || !(e < kAttnTol), "Dsum inside the plan's workspace went unnoticed (%.3e)", e);
        // broken caller: no workspace
        ptrs[12] = ws + dsum_off;
        st = execute(bwd.g.plan, uids, ptrs, nullptr);
        CHECK(bad_param(st), "backward without a workspace: %s", sname(st));
        // broken caller: the dQ accumulator left out of the variant pack
        std::vector<int64_t> u13(uids.begin(), uids.end() - 1);
        std::vector<void *> p13(ptrs.begin(), ptrs.end() - 1);
        st = execute(bwd.g.plan, u13, p13, ws);
        CHECK(bad_param(st), "backward without the dQ accumulator pointer: %s", sname(st));
    }
}

// Broken callers of the forward graph: each must fail or give a result the reference rejects.
static void test_attention_broken() {
    AttnCase c(1, 12, 2, 8);   // T != HS: a missing transpose is a shape error
    Attn good;
    build_forward(good, c.sh);
    if (!good.g.ok()) {
        CHECK(false, "forward plan: %s", sname(good.g.status));
        return;
    }
    void *ws = dev((size_t)good.g.workspace, F32);
    auto rejected = [&](cudnnStatus_t st) {
        if (st != CUDNN_STATUS_SUCCESS) return true;
        return !(c.out_err() < kAttnTol && c.stats_err() < kAttnTol);
    };
    const Fault faults[] = {O_PACKED_STRIDES, Q_WRONG_STRIDE, SELECT_SWAPPED, MASK_AXES_SWAPPED};
    const char *names[] = {"O with packed strides", "Q with the stride of a (B,T,NH,HS) tensor",
                           "BINARY_SELECT with x and b swapped", "GEN_INDEX axes swapped (anti-causal)"};
    for (int i = 0; i < 4; i++) {
        Attn a;
        build_forward(a, c.sh, faults[i]);
        c.clear_outputs();
        cudnnStatus_t st = a.g.ok() ? execute(a.g.plan, c.fwd_uids(), c.fwd_ptrs(), ws) : a.g.status;
        CHECK(rejected(st), "broken caller not caught: %s", names[i]);
    }
    // K and V pointers swapped (both valid bf16 buffers)
    std::vector<void *> p = c.fwd_ptrs();
    std::swap(p[1], p[2]);
    c.clear_outputs();
    CHECK(rejected(execute(good.g.plan, c.fwd_uids(), p, ws)), "K and V pointers swapped went unnoticed");
    // a typo in a unique id: stats bound to uid 15
    std::vector<int64_t> u = c.fwd_uids();
    u[4] = 15;
    cudnnStatus_t st = execute(good.g.plan, u, c.fwd_ptrs(), ws);
    CHECK(bad_param(st), "stats bound to a uid the graph does not have: %s", sname(st));
    // the same uid twice in a variant pack
    u = c.fwd_uids();
    u[4] = kUidO;
    st = execute(good.g.plan, u, c.fwd_ptrs(), ws);
    CHECK(bad_param(st), "uid listed twice in the variant pack: %s", sname(st));
    // the mask value missing
    u = c.fwd_uids();
    p = c.fwd_ptrs();
    u.pop_back(), p.pop_back();
    st = execute(good.g.plan, u, p, ws);
    CHECK(bad_param(st), "by-value mask value missing: %s", sname(st));
    // out one element too small
    void *small = dev((size_t)(c.sh.B * c.sh.T * c.sh.C) - 1, BF16);
    p = c.fwd_ptrs();
    p[3] = small;
    st = execute(good.g.plan, c.fwd_uids(), p, ws);
    CHECK(bad_param(st), "out buffer one element short: %s", sname(st));
    // stats in pageable host memory
    std::vector<float> pageable((size_t)(c.sh.B * c.sh.NH * c.sh.T));
    p = c.fwd_ptrs();
    p[4] = pageable.data();
    st = execute(good.g.plan, c.fwd_uids(), p, ws);
    CHECK(bad_param(st), "stats in pageable host memory: %s", sname(st));
    // a misaligned pointer (the tensors are declared 16-byte aligned)
    p = c.fwd_ptrs();
    p[0] = (char *)p[0] + 2;
    st = execute(good.g.plan, c.fwd_uids(), p, ws);
    CHECK(bad_param(st), "q 2 bytes off its 16-byte alignment: %s", sname(st));
    // the by-value scale pointing to device memory
    p = c.fwd_ptrs();
    p[5] = c.d_stats;
    st = execute(good.g.plan, c.fwd_uids(), p, ws);
    CHECK(bad_param(st), "by-value scale given a device pointer: %s", sname(st));
    // workspace too small
    void *ws_small = dev((size_t)good.g.workspace / 4 - 1, F32);
    st = execute(good.g.plan, c.fwd_uids(), c.fwd_ptrs(), ws_small);
    CHECK(bad_param(st), "workspace 4 bytes short: %s", sname(st));
    // K not transposed (no reshape): the matmul shapes do not fit
    {
        Graph g;
        Desc q = tensor(g, kUidQ, BF16, c.sh.qkv_d, c.sh.qkv_s), k = tensor(g, kUidK, BF16, c.sh.qkv_d, c.sh.qkv_s);
        Desc s = tensor(g, 100, F32, c.sh.s_d, c.sh.s_s, true);
        matmul(g, q, k, s);
        CHECK(bad_param(g.status), "Q @ K without the transpose: %s", sname(g.status));
    }
    // two different tensors with one unique id
    {
        Graph g;
        Desc x = tensor(g, 1, F32, {2, 3}, {3, 1}), y = tensor(g, 2, F32, {2, 3}, {3, 1});
        Desc x2 = tensor(g, 2, F32, {2, 3}, {1, 2}), y2 = tensor(g, 3, F32, {2, 3}, {3, 1});
        pointwise(g, CUDNN_POINTWISE_EXP, x, nullptr, nullptr, y);
        pointwise(g, CUDNN_POINTWISE_EXP, x2, nullptr, nullptr, y2);
        make_plan(g);
        CHECK(bad_param(g.status), "uid 2 for two different tensors: %s", sname(g.status));
    }
    // a virtual tensor read but never written; an operation reading its own output
    {
        Graph g;
        Desc x = tensor(g, 100, F32, {2, 3}, {3, 1}, true), y = tensor(g, 2, F32, {2, 3}, {3, 1});
        pointwise(g, CUDNN_POINTWISE_EXP, x, nullptr, nullptr, y);
        make_plan(g);
        CHECK(bad_param(g.status), "virtual input nobody writes: %s", sname(g.status));
    }
    {
        Graph g;
        Desc x = tensor(g, 1, F32, {2, 3}, {3, 1}), y = tensor(g, 2, F32, {2, 3}, {3, 1});
        pointwise(g, CUDNN_POINTWISE_ADD, x, y, nullptr, y);
        make_plan(g);
        CHECK(bad_param(g.status), "y = x + y in one operation (a cycle): %s", sname(g.status));
    }
}

// ---------------------------------------------------------------- stream order

static std::atomic<int> g_gate{0};
static std::atomic<int> g_hostfn_status{-1};

// Waits for the main thread, then writes the input the queued execution must read.
static void CUDART_CB gate_then_fill(void *arg) {
    while (!g_gate.load()) usleep(1000);
    float *x = (float *)arg;
    for (int i = 0; i < 8; i++) x[i] = 3.0f;
}

struct HostFnCall {
    Desc plan, pack;
};
static void CUDART_CB execute_from_host_fn(void *arg) {
    HostFnCall *c = (HostFnCall *)arg;
    g_hostfn_status = cudnnBackendExecute(g_handle, c->plan, c->pack);
}

static void test_stream_order() {
    Graph g;
    Desc x = tensor(g, 1, F32, {1, 1, 1, 8}, {8, 8, 8, 1}), s = scalar(g, 2), y = tensor(g, 3, F32, {1, 1, 1, 8}, {8, 8, 8, 1});
    pointwise(g, CUDNN_POINTWISE_MUL, x, s, nullptr, y);
    make_plan(g);
    CHECK(g.ok(), "scale plan: %s", sname(g.status));
    float *x_pinned = nullptr;
    CUDA_OK(cudaMallocHost((void **)&x_pinned, 8 * sizeof(float)));
    for (int i = 0; i < 8; i++) x_pinned[i] = 1.0f;
    void *py = dev(8, F32), *ws = dev((size_t)g.workspace, F32);
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudnnSetStream(g_handle, stream);
    // the stream is held by a host function; the execution queued after it must see what it writes,
    // and the by-value scale must be the value at the call
    float scale = 2.0f;
    g_gate = 0;
    CUDA_OK(cudaLaunchHostFunc(stream, gate_then_fill, x_pinned));
    cudnnStatus_t st = execute(g.plan, {1, 2, 3}, {x_pinned, &scale, py}, ws);
    scale = 100.0f;
    g_gate = 1;
    CUDA_OK(cudaStreamSynchronize(stream));
    std::vector<float> yv = host_from(F32, py, 8);
    CHECK(st == CUDNN_STATUS_SUCCESS && yv[0] == 6.0f && yv[7] == 6.0f,
          "execution in stream order with the scale of the call: %s, y = %g (want 6)", sname(st), yv[0]);

    // destroying the plan right after executing leaves the queued work intact
    {
        Graph h;
        Desc x2 = tensor(h, 1, F32, {1, 1, 8}, {8, 8, 1}), y2 = tensor(h, 3, F32, {1, 1, 8}, {8, 8, 1});
        pointwise(h, CUDNN_POINTWISE_NEG, x2, nullptr, nullptr, y2);
        make_plan(h);
        g_gate = 0;
        CUDA_OK(cudaLaunchHostFunc(stream, gate_then_fill, x_pinned));
        st = execute(h.plan, {1, 3}, {x_pinned, py}, ws);
    }
    g_gate = 1;
    CUDA_OK(cudaStreamSynchronize(stream));
    yv = host_from(F32, py, 8);
    CHECK(st == CUDNN_STATUS_SUCCESS && yv[3] == -3.0f, "plan destroyed before its execution ran: %s, y = %g", sname(st),
          yv[3]);

    // cudnnBackendExecute from a host function is refused
    Desc pack = nullptr;
    const int64_t uids[3] = {1, 2, 3};
    void *ptrs[3] = {x_pinned, &scale, py};
    cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
    cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
    cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
    cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    cudnnBackendFinalize(pack);
    HostFnCall call = {g.plan, pack};
    CUDA_OK(cudaLaunchHostFunc(stream, execute_from_host_fn, &call));
    CUDA_OK(cudaStreamSynchronize(stream));
    CHECK(g_hostfn_status.load() != CUDNN_STATUS_SUCCESS && g_hostfn_status.load() != -1,
          "cudnnBackendExecute from a host function: %s", sname((cudnnStatus_t)g_hostfn_status.load()));

    // a destroyed stream
    cudnnSetStream(g_handle, 0);
    CUDA_OK(cudaStreamDestroy(stream));
    cudnnSetStream(g_handle, stream);
    st = cudnnBackendExecute(g_handle, g.plan, pack);
    CHECK(st != CUDNN_STATUS_SUCCESS, "execute on a destroyed stream: %s", sname(st));
    cudaGetLastError();
    cudnnSetStream(g_handle, 0);
    cudnnBackendDestroyDescriptor(pack);
    CUDA_OK(cudaFreeHost(x_pinned));
}

int main() {
    if (cudnnCreate(&g_handle) != CUDNN_STATUS_SUCCESS) {
        printf("FATAL: cudnnCreate failed\n");
        return 2;
    }
    test_basics();
    test_attributes();
    test_plan_queries();
    test_matmul(F32);
    test_matmul(BF16);
    test_accumulator();
    test_pointwise_modes();
    test_bf16_rounding();
    test_reductions();
    test_reshape();
    test_attention();
    test_attention_broken();
    test_stream_order();
    cudnnDestroy(g_handle);
    for (void *p : g_allocs) cudaFree(p);
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed == 0 ? 0 : 1;
}
