// attention_cudnn.cu: causal scaled dot product attention (forward and backward) through the
// raw cuDNN backend graph API (cudnnBackendCreateDescriptor / SetAttribute / Finalize / Execute).
//
// Which API path, and why
// -----------------------
// cuDNN 9.13+ headers declare single-node SDPA operations (CUDNN_BACKEND_OPERATION_SDPA_FWD/
// BWD_DESCRIPTOR). They are not used here because, up to the 9.19 headers this project builds
// against, neither node has any way to express a causal mask: the forward node only has Q, K, V,
// O, stats, scale, a block-sparse mask tensor (tile granularity, not per element), paging and
// sequence-length inputs, and the backward node has no mask input at all (the subgraph hook a
// mask would need arrives in later releases). A GPT-2 trainer needs element-wise causal masking,
// so this file describes attention as an operation graph of matmul, pointwise and reduction
// nodes. cuDNN's runtime fusion engines recognise that pattern and run it as one fused flash-
// attention kernel (forward) or one fused backward kernel set. The pattern graph is also what
// works across every cuDNN 9.x runtime, which matters because the GPU machine's cuDNN may not be
// the 9.19 this was compiled against.
//
// Forward graph (S is [B, NH, T, T], never materialised):
//   S = (Q @ K^T) * scale ;  S = causal(S) ;  M = rowmax(S) ;  E = exp(S - M) ;  Z = rowsum(E)
//   stats = M + log(Z)    ;  P = E / Z (bf16) ;  O = P @ V
// Backward graph:
//   Dsum = rowsum(dO * O) * 1                      (stored in our workspace, fp32)
//   P  = exp(causal((Q @ K^T) * scale - stats))
//   dV = P^T @ dO
//   dS = (dO @ V^T - Dsum) * P * scale
//   dK = dS^T @ Q ;  dQ = dS @ K                   (dQ through an fp32 accumulator in the
//                                                   workspace unless deterministic mode is asked)
// Transposes are expressed as reshape nodes with permuted dims/strides; K^T and V^T are just
// views (swapped dims and strides) of the qkv buffer, so nothing is permuted in memory.
//
// Layouts (see attention_cudnn.h): qkv (B, T, 3, NH, HS), out/dout (B, T, NH, HS), stats
// (B, NH, T). dqkv is fully overwritten, dQ/dK/dV land in the same slots as q/k/v.
//
// Backward variants: the deterministic one (the default: the same bits every run) is built
// alone; with atomic_dq the atomic one (cuDNN's default, faster) is tried first, then the
// deterministic one. If cuDNN can run neither, prepare returns 0.
//
// Runtime needs: cuDNN 9.x with its runtime-compiled engines (libcudnn_engines_runtime_compiled),
// NVRTC and the CUDA driver; the fused kernels are generated and compiled at prepare time.
// Runtimes 9.10.0 and 9.10.1 are refused (known bad bf16 backward; attention_cudnn_version.h):
// prepare returns 0 with a note naming the version and the model runs the plain kernels.
//
// Verification status: the graphs were checked without a GPU (cuDNN 9.19 deviceless planning
// from a described sm_90 / sm_80 device): the fused engines accept all three graphs (forward,
// both backward variants) and compile kernels for them, and reject deliberately broken variants.
// Numerical results have not been checked on a GPU yet; dev/test/cuda/gpu_attention_cudnn.cu does that.
#include "attention_cudnn.h"
#include "attention_cudnn_version.h"
#include "../model/cuda_kernel_sizes.h"

#include <cudnn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "../utils.h"

#if !defined(CUDNN_MAJOR) || CUDNN_MAJOR < 9
#error "attention_cudnn.cu needs cuDNN 9 headers (backend graph API)"
#endif

namespace {

// ------------------------------------------------------------------------------------------
// Tensor unique ids. Non-virtual tensors have fixed ids (they are bound in the variant pack);
// virtual (on-chip only) tensors are numbered from kFirstVirtualUid upwards.
enum : int64_t {
    kUidQ = 1,
    kUidK = 2,  // K^T view
    kUidV = 3,  // V (forward) or V^T view (backward)
    kUidO = 4,
    kUidStats = 5,
    kUidScale = 6,
    kUidMaskValue = 7,
    kUidDO = 8,
    kUidDQ = 9,
    kUidDK = 10,
    kUidDV = 11,
    kUidOne = 12,
    kUidDsum = 13,
    kUidDQAccum = 14,
    kFirstVirtualUid = 100,
};

// ------------------------------------------------------------------------------------------
// A graph under construction: owns every backend descriptor it creates (tensors, operations,
// the operation graph, heuristics, engine configs and the final execution plan), so that the
// plan's dependencies live exactly as long as the plan. Helpers record the first failure and
// turn into no-ops afterwards, so construction code reads straight through.
struct Tensor {
    cudnnBackendDescriptor_t desc = nullptr;
    int64_t uid = 0;
    int64_t dim[4] = {0, 0, 0, 0};
    int64_t stride[4] = {0, 0, 0, 0};
};

struct Graph {
    std::vector<cudnnBackendDescriptor_t> owned;
    std::vector<cudnnBackendDescriptor_t> ops;
    cudnnBackendDescriptor_t op_graph = nullptr;
    cudnnBackendDescriptor_t plan = nullptr;
    int64_t plan_workspace = 0;
    int64_t next_uid = kFirstVirtualUid;
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
    char error[768] = "";

    Graph() = default;
    Graph(const Graph &) = delete;
    Graph &operator=(const Graph &) = delete;
    ~Graph() {
        // Reverse creation order: the plan first, the tensors it references last.
        for (size_t i = owned.size(); i-- > 0;) cudnnBackendDestroyDescriptor(owned[i]);
    }
    bool ok() const { return status == CUDNN_STATUS_SUCCESS; }

    // Records a failed cuDNN call (the first one wins) with cuDNN's own last error message.
    void fail(cudnnStatus_t st, const char *what) {
        if (!ok()) return;
        status = st;
        char last[512];
        last[0] = '\0';
        cudnnGetLastErrorString(last, sizeof(last));
        snprintf(error, sizeof(error), "%s: %s%s%s", what, cudnnGetErrorString(st), last[0] ? " -- " : "",
                 last);
    }
    bool check(cudnnStatus_t st, const char *what) {
        if (st != CUDNN_STATUS_SUCCESS) fail(st, what);
        return st == CUDNN_STATUS_SUCCESS;
    }
    cudnnBackendDescriptor_t create(cudnnBackendDescriptorType_t type, const char *what) {
        if (!ok()) return nullptr;
        cudnnBackendDescriptor_t d = nullptr;
        if (!check(cudnnBackendCreateDescriptor(type, &d), what)) return nullptr;
        owned.push_back(d);
        return d;
    }
    void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
             int64_t count, const void *values, const char *what) {
        if (!ok()) return;
        check(cudnnBackendSetAttribute(d, name, type, count, values), what);
    }
    void finalize(cudnnBackendDescriptor_t d, const char *what) {
        if (!ok()) return;
        check(cudnnBackendFinalize(d), what);
    }
};

// Packed row-major strides for a 4-d shape.
void packed_strides(const int64_t dim[4], int64_t stride[4]) {
    stride[3] = 1;
    for (int i = 2; i >= 0; i--) stride[i] = stride[i + 1] * dim[i + 1];
}

Tensor make_tensor(Graph &g, const char *name, cudnnDataType_t dtype, const int64_t dim[4],
                   const int64_t stride[4], int64_t uid, bool is_virtual, bool by_value = false) {
    Tensor t;
    t.uid = uid;
    memcpy(t.dim, dim, sizeof(t.dim));
    memcpy(t.stride, stride, sizeof(t.stride));
    char what[160];
    snprintf(what, sizeof(what), "tensor '%s' (uid %lld, dims [%lld,%lld,%lld,%lld] strides [%lld,%lld,%lld,%lld])",
             name, (long long)uid, (long long)dim[0], (long long)dim[1], (long long)dim[2], (long long)dim[3],
             (long long)stride[0], (long long)stride[1], (long long)stride[2], (long long)stride[3]);
    t.desc = g.create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, what);
    const int64_t alignment = 16;
    const bool virt = is_virtual;
    g.set(t.desc, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dtype, what);
    g.set(t.desc, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim, what);
    g.set(t.desc, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, stride, what);
    g.set(t.desc, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, what);
    g.set(t.desc, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment, what);
    g.set(t.desc, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt, what);
    if (by_value) {
        const bool bv = true;
        g.set(t.desc, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &bv, what);
    }
    g.finalize(t.desc, what);
    return t;
}

// A virtual tensor: lives only inside the fused kernel, gets the next free uid.
Tensor virtual_tensor(Graph &g, const char *name, cudnnDataType_t dtype, const int64_t dim[4],
                      const int64_t stride[4]) {
    return make_tensor(g, name, dtype, dim, stride, g.next_uid++, true);
}
// Virtual tensor with the same shape and strides as `like`.
Tensor virtual_like(Graph &g, const char *name, cudnnDataType_t dtype, const Tensor &like) {
    return virtual_tensor(g, name, dtype, like.dim, like.stride);
}
// fp32 scalar passed by value (host memory bound in the variant pack at execute time).
Tensor scalar_tensor(Graph &g, const char *name, int64_t uid) {
    const int64_t one[4] = {1, 1, 1, 1};
    return make_tensor(g, name, CUDNN_DATA_FLOAT, one, one, uid, false, true);
}

// y = op(x [, b [, t]]). For CUDNN_POINTWISE_GEN_INDEX pass axis >= 0.
void pointwise(Graph &g, const char *name, cudnnPointwiseMode_t mode, cudnnDataType_t math_prec,
               const Tensor &x, const Tensor *b, const Tensor *t, const Tensor &y, int64_t axis = -1) {
    char what[160];
    snprintf(what, sizeof(what), "pointwise op '%s'", name);
    cudnnBackendDescriptor_t pw = g.create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, what);
    g.set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, what);
    g.set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &math_prec, what);
    if (axis >= 0) g.set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, what);
    g.finalize(pw, what);

    cudnnBackendDescriptor_t op = g.create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what);
    g.set(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw, what);
    g.set(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x.desc, what);
    if (b) g.set(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b->desc, what);
    if (t) g.set(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t->desc, what);
    g.set(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y.desc, what);
    g.finalize(op, what);
    if (g.ok()) g.ops.push_back(op);
}

// Reduction of x into the (broadcast-shaped) y.
void reduction(Graph &g, const char *name, cudnnReduceTensorOp_t reduce_op, const Tensor &x, const Tensor &y) {
    char what[160];
    snprintf(what, sizeof(what), "reduction op '%s'", name);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t rd = g.create(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, what);
    g.set(rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &reduce_op, what);
    g.set(rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, what);
    g.finalize(rd, what);

    cudnnBackendDescriptor_t op = g.create(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, what);
    g.set(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &rd, what);
    g.set(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x.desc, what);
    g.set(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y.desc, what);
    g.finalize(op, what);
    if (g.ok()) g.ops.push_back(op);
}

// Batched c = a @ b over the last two dims, fp32 accumulation.
void matmul(Graph &g, const char *name, const Tensor &a, const Tensor &b, const Tensor &c) {
    char what[160];
    snprintf(what, sizeof(what), "matmul op '%s'", name);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t mm = g.create(CUDNN_BACKEND_MATMUL_DESCRIPTOR, what);
    g.set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, what);
    g.finalize(mm, what);

    cudnnBackendDescriptor_t op = g.create(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, what);
    g.set(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a.desc, what);
    g.set(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b.desc, what);
    g.set(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c.desc, what);
    g.set(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm, what);
    g.finalize(op, what);
    if (g.ok()) g.ops.push_back(op);
}

// y is a re-view of x (used for transposes: permuted dims with matching permuted strides).
void reshape(Graph &g, const char *name, const Tensor &x, const Tensor &y) {
    char what[160];
    snprintf(what, sizeof(what), "reshape op '%s'", name);
    cudnnBackendDescriptor_t op = g.create(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, what);
    g.set(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x.desc, what);
    g.set(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y.desc, what);
    g.finalize(op, what);
    if (g.ok()) g.ops.push_back(op);
}

// Causal mask on scores s ([B, NH, T, T]): keeps entries with row (query) >= column (key) and
// replaces the rest by mask_value (ATTENTION_CUDNN_MASK_VALUE). Returns the masked virtual tensor.
Tensor causal_mask(Graph &g, const Tensor &s, const Tensor &mask_value) {
    Tensor row = virtual_like(g, "row_index", CUDNN_DATA_INT32, s);
    pointwise(g, "gen_row_index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, s, nullptr, nullptr, row, 2);
    Tensor col = virtual_like(g, "col_index", CUDNN_DATA_INT32, s);
    pointwise(g, "gen_col_index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, s, nullptr, nullptr, col, 3);
    Tensor keep = virtual_like(g, "row_ge_col", CUDNN_DATA_BOOLEAN, s);
    pointwise(g, "row_ge_col", CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, &col, nullptr, keep);
    Tensor masked = virtual_like(g, "masked_scores", CUDNN_DATA_FLOAT, s);
    // BINARY_SELECT: y = t ? x : b
    pointwise(g, "causal_select", CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, s, &mask_value, &keep, masked);
    return masked;
}

// The HANDLE attributes of the operation graph and the execution plan are marked deprecated in
// recent headers (device-property descriptors, cuDNN 9.8+, are the newer way to name the target
// GPU), but binding the handle is what every 9.x runtime accepts, so it is kept and the warning
// (only emitted when CUDNN_WARN_DEPRECATED is defined) is silenced here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

// Finalizes the operation graph, asks the heuristics for engine configs and keeps the first one
// that finalizes into an execution plan. On failure g.error says why.
void build_plan(Graph &g, cudnnHandle_t handle) {
    if (!g.ok()) return;
    g.op_graph = g.create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    g.set(g.op_graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "operation graph handle");
    g.set(g.op_graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, (int64_t)g.ops.size(),
          g.ops.data(), "operation graph ops");
    g.finalize(g.op_graph, "operation graph finalize (graph rejected)");
    if (!g.ok()) return;

    // Engine configs: heuristics mode A first, the fallback list second. Failures to build a plan
    // from a config are expected (not every engine supports every graph) and only the last one is
    // reported if nothing works.
    char attempts[512] = "";
    const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    const char *mode_names[2] = {"heuristics mode A", "heuristics mode FALLBACK"};
    for (int m = 0; m < 2 && g.plan == nullptr; m++) {
        cudnnBackendDescriptor_t heur = nullptr;
        if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur) != CUDNN_STATUS_SUCCESS) {
            g.fail(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "create engine heuristics descriptor");
            return;
        }
        g.owned.push_back(heur);
        cudnnStatus_t st = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g.op_graph);
        if (st == CUDNN_STATUS_SUCCESS)
            st = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[m]);
        if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(heur);
        int64_t count = 0;
        if (st == CUDNN_STATUS_SUCCESS)
            st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                          &count, nullptr);
        if (st != CUDNN_STATUS_SUCCESS) {
            char last[256];
            last[0] = '\0';
            cudnnGetLastErrorString(last, sizeof(last));
            size_t len = strlen(attempts);
            snprintf(attempts + len, sizeof(attempts) - len, "%s%s: %s%s%s", len ? "; " : "", mode_names[m],
                     cudnnGetErrorString(st), last[0] ? " -- " : "", last);
            continue;
        }
        if (count <= 0) {
            size_t len = strlen(attempts);
            snprintf(attempts + len, sizeof(attempts) - len, "%s%s: no engine configs", len ? "; " : "",
                     mode_names[m]);
            continue;
        }
        std::vector<cudnnBackendDescriptor_t> cfgs;
        for (int64_t i = 0; i < count; i++) {
            cudnnBackendDescriptor_t c = nullptr;
            if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &c) != CUDNN_STATUS_SUCCESS) break;
            g.owned.push_back(c);
            cfgs.push_back(c);
        }
        int64_t got = 0;
        st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                      (int64_t)cfgs.size(), &got, cfgs.data());
        if (st != CUDNN_STATUS_SUCCESS) {
            size_t len = strlen(attempts);
            snprintf(attempts + len, sizeof(attempts) - len, "%s%s: reading %lld engine configs: %s",
                     len ? "; " : "", mode_names[m], (long long)count, cudnnGetErrorString(st));
            continue;
        }
        if (got > (int64_t)cfgs.size()) got = (int64_t)cfgs.size();
        cudnnStatus_t last_st = CUDNN_STATUS_NOT_SUPPORTED;
        char last_msg[256] = "";
        for (int64_t i = 0; i < got; i++) {
            cudnnBackendDescriptor_t plan = nullptr;
            if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) != CUDNN_STATUS_SUCCESS)
                break;
            st = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
            if (st == CUDNN_STATUS_SUCCESS)
                st = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                              CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]);
            if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(plan);
            int64_t ws = 0, n = 0;
            if (st == CUDNN_STATUS_SUCCESS)
                st = cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                              &n, &ws);
            if (st == CUDNN_STATUS_SUCCESS && ws >= 0) {
                g.owned.push_back(plan);
                g.plan = plan;
                g.plan_workspace = ws;
                break;
            }
            last_st = st;
            last_msg[0] = '\0';
            cudnnGetLastErrorString(last_msg, sizeof(last_msg));
            cudnnBackendDestroyDescriptor(plan);
        }
        if (g.plan == nullptr) {
            size_t len = strlen(attempts);
            snprintf(attempts + len, sizeof(attempts) - len,
                     "%s%s: none of %lld engine configs built a plan (last: %s%s%s)", len ? "; " : "",
                     mode_names[m], (long long)got, cudnnGetErrorString(last_st), last_msg[0] ? " -- " : "",
                     last_msg);
        }
    }
    if (g.plan == nullptr) {
        g.status = CUDNN_STATUS_NOT_SUPPORTED;
        snprintf(g.error, sizeof(g.error), "no execution plan: %s", attempts);
    }
}

#pragma GCC diagnostic pop

// Best effort: the global index of the engine behind the plan (for the one-line log). -1 if unknown.
int64_t plan_engine_index(Graph &g) {
    if (g.plan == nullptr) return -1;
    cudnnBackendDescriptor_t cfg = nullptr, engine = nullptr;
    int64_t idx = -1, n = 0;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg) != CUDNN_STATUS_SUCCESS) return -1;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) == CUDNN_STATUS_SUCCESS &&
        cudnnBackendGetAttribute(g.plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                 &n, &cfg) == CUDNN_STATUS_SUCCESS &&
        cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                 &engine) == CUDNN_STATUS_SUCCESS) {
        if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &idx) !=
            CUDNN_STATUS_SUCCESS)
            idx = -1;
    }
    if (engine) cudnnBackendDestroyDescriptor(engine);
    cudnnBackendDestroyDescriptor(cfg);
    return idx;
}

// ------------------------------------------------------------------------------------------
// Shapes of the tensors both graphs share.
struct Shapes {
    int64_t B, T, NH, HS, C;
    int64_t qkv_dim[4], qkv_stride[4];  // Q, K, V (and dQ, dK, dV) read/written in place
    int64_t kt_dim[4], kt_stride[4];    // K^T / V^T views: [B, NH, HS, T]
    int64_t o_dim[4], o_stride[4];      // O, dO: (B, T, NH, HS) seen as [B, NH, T, HS]
    int64_t row_dim[4], row_stride[4];  // stats and other per-row values: [B, NH, T, 1] packed
    int64_t s_dim[4], s_stride[4];      // scores [B, NH, T, T] (virtual)
    int64_t st_dim[4], st_stride[4];    // transposed scores view [B, NH, T(key), T(query)]
    int64_t bhtd_dim[4], bhtd_stride[4];  // packed [B, NH, T, HS] (virtual products, dQ accumulator)
};

Shapes make_shapes(int B, int T, int NH, int HS) {
    Shapes s;
    s.B = B, s.T = T, s.NH = NH, s.HS = HS, s.C = (int64_t)NH * HS;
    const int64_t b = B, t = T, h = NH, d = HS, c = s.C;
    const int64_t qkv_dim[4] = {b, h, t, d}, qkv_stride[4] = {t * 3 * c, d, 3 * c, 1};
    const int64_t kt_dim[4] = {b, h, d, t}, kt_stride[4] = {t * 3 * c, d, 1, 3 * c};
    const int64_t o_stride[4] = {t * c, d, c, 1};
    const int64_t row_dim[4] = {b, h, t, 1};
    const int64_t s_dim[4] = {b, h, t, t};
    const int64_t st_stride[4] = {h * t * t, t * t, 1, t};
    memcpy(s.qkv_dim, qkv_dim, sizeof(qkv_dim));
    memcpy(s.qkv_stride, qkv_stride, sizeof(qkv_stride));
    memcpy(s.kt_dim, kt_dim, sizeof(kt_dim));
    memcpy(s.kt_stride, kt_stride, sizeof(kt_stride));
    memcpy(s.o_dim, qkv_dim, sizeof(qkv_dim));
    memcpy(s.o_stride, o_stride, sizeof(o_stride));
    memcpy(s.row_dim, row_dim, sizeof(row_dim));
    packed_strides(s.row_dim, s.row_stride);
    memcpy(s.s_dim, s_dim, sizeof(s_dim));
    packed_strides(s.s_dim, s.s_stride);
    memcpy(s.st_dim, s_dim, sizeof(s_dim));
    memcpy(s.st_stride, st_stride, sizeof(st_stride));
    memcpy(s.bhtd_dim, qkv_dim, sizeof(qkv_dim));
    packed_strides(s.bhtd_dim, s.bhtd_stride);
    return s;
}

void build_forward_graph(Graph &g, const Shapes &sh) {
    const cudnnDataType_t BF16 = CUDNN_DATA_BFLOAT16, F32 = CUDNN_DATA_FLOAT;
    Tensor q = make_tensor(g, "Q", BF16, sh.qkv_dim, sh.qkv_stride, kUidQ, false);
    Tensor kt = make_tensor(g, "K^T", BF16, sh.kt_dim, sh.kt_stride, kUidK, false);
    Tensor v = make_tensor(g, "V", BF16, sh.qkv_dim, sh.qkv_stride, kUidV, false);
    Tensor o = make_tensor(g, "O", BF16, sh.o_dim, sh.o_stride, kUidO, false);
    Tensor stats = make_tensor(g, "stats", F32, sh.row_dim, sh.row_stride, kUidStats, false);
    Tensor scale = scalar_tensor(g, "attn_scale", kUidScale);
    Tensor mask_value = scalar_tensor(g, "mask_value", kUidMaskValue);

    Tensor s = virtual_tensor(g, "S", F32, sh.s_dim, sh.s_stride);
    matmul(g, "Q@K^T", q, kt, s);
    Tensor s_scaled = virtual_like(g, "S_scaled", F32, s);
    pointwise(g, "scale", CUDNN_POINTWISE_MUL, F32, s, &scale, nullptr, s_scaled);
    Tensor s_masked = causal_mask(g, s_scaled, mask_value);

    // softmax with the log-sum-exp saved for the backward pass
    Tensor row_max = virtual_tensor(g, "row_max", F32, sh.row_dim, sh.row_stride);
    reduction(g, "row_max", CUDNN_REDUCE_TENSOR_MAX, s_masked, row_max);
    Tensor shifted = virtual_like(g, "S_minus_max", F32, s);
    pointwise(g, "sub_max", CUDNN_POINTWISE_SUB, F32, s_masked, &row_max, nullptr, shifted);
    Tensor e = virtual_like(g, "exp", F32, s);
    pointwise(g, "exp", CUDNN_POINTWISE_EXP, F32, shifted, nullptr, nullptr, e);
    Tensor row_sum = virtual_tensor(g, "row_sum", F32, sh.row_dim, sh.row_stride);
    reduction(g, "row_sum", CUDNN_REDUCE_TENSOR_ADD, e, row_sum);
    Tensor log_sum = virtual_tensor(g, "log_row_sum", F32, sh.row_dim, sh.row_stride);
    pointwise(g, "log", CUDNN_POINTWISE_LOG, F32, row_sum, nullptr, nullptr, log_sum);
    pointwise(g, "stats", CUDNN_POINTWISE_ADD, F32, row_max, &log_sum, nullptr, stats);
    // P feeds the second matmul, whose A operand cuDNN takes in the i/o precision (bf16).
    Tensor p = virtual_like(g, "P", BF16, s);
    pointwise(g, "normalize", CUDNN_POINTWISE_DIV, F32, e, &row_sum, nullptr, p);

    matmul(g, "P@V", p, v, o);
}

void build_backward_graph(Graph &g, const Shapes &sh, bool dq_accumulator) {
    const cudnnDataType_t BF16 = CUDNN_DATA_BFLOAT16, F32 = CUDNN_DATA_FLOAT;
    Tensor q = make_tensor(g, "Q", BF16, sh.qkv_dim, sh.qkv_stride, kUidQ, false);
    Tensor kt = make_tensor(g, "K^T", BF16, sh.kt_dim, sh.kt_stride, kUidK, false);
    Tensor vt = make_tensor(g, "V^T", BF16, sh.kt_dim, sh.kt_stride, kUidV, false);
    Tensor o = make_tensor(g, "O", BF16, sh.o_dim, sh.o_stride, kUidO, false);
    Tensor d_o = make_tensor(g, "dO", BF16, sh.o_dim, sh.o_stride, kUidDO, false);
    Tensor stats = make_tensor(g, "stats", F32, sh.row_dim, sh.row_stride, kUidStats, false);
    Tensor dq = make_tensor(g, "dQ", BF16, sh.qkv_dim, sh.qkv_stride, kUidDQ, false);
    Tensor dk = make_tensor(g, "dK", BF16, sh.qkv_dim, sh.qkv_stride, kUidDK, false);
    Tensor dv = make_tensor(g, "dV", BF16, sh.qkv_dim, sh.qkv_stride, kUidDV, false);
    Tensor scale = scalar_tensor(g, "attn_scale", kUidScale);
    Tensor mask_value = scalar_tensor(g, "mask_value", kUidMaskValue);
    Tensor one = scalar_tensor(g, "one", kUidOne);

    // Dsum = rowsum(dO * O), kept in the workspace (fp32, [B, NH, T, 1])
    Tensor do_o = virtual_tensor(g, "dO*O", F32, sh.bhtd_dim, sh.bhtd_stride);
    pointwise(g, "dO*O", CUDNN_POINTWISE_MUL, F32, d_o, &o, nullptr, do_o);
    Tensor do_o_sum = virtual_tensor(g, "rowsum(dO*O)", F32, sh.row_dim, sh.row_stride);
    reduction(g, "rowsum(dO*O)", CUDNN_REDUCE_TENSOR_ADD, do_o, do_o_sum);
    Tensor dsum = make_tensor(g, "Dsum", F32, sh.row_dim, sh.row_stride, kUidDsum, false);
    pointwise(g, "Dsum", CUDNN_POINTWISE_MUL, F32, do_o_sum, &one, nullptr, dsum);

    // recompute P from the saved statistics
    Tensor s = virtual_tensor(g, "S", F32, sh.s_dim, sh.s_stride);
    matmul(g, "Q@K^T", q, kt, s);
    Tensor s_scaled = virtual_like(g, "S_scaled", F32, s);
    pointwise(g, "scale", CUDNN_POINTWISE_MUL, F32, s, &scale, nullptr, s_scaled);
    Tensor s_centered = virtual_like(g, "S_minus_stats", F32, s);
    pointwise(g, "sub_stats", CUDNN_POINTWISE_SUB, F32, s_scaled, &stats, nullptr, s_centered);
    Tensor s_masked = causal_mask(g, s_centered, mask_value);
    Tensor p = virtual_like(g, "P", F32, s);
    pointwise(g, "exp", CUDNN_POINTWISE_EXP, F32, s_masked, nullptr, nullptr, p);

    // dV = P^T @ dO
    Tensor pt = virtual_tensor(g, "P^T", BF16, sh.st_dim, sh.st_stride);
    reshape(g, "P^T", p, pt);
    matmul(g, "P^T@dO", pt, d_o, dv);

    // dS = (dO @ V^T - Dsum) * P * scale
    Tensor dp = virtual_tensor(g, "dP", F32, sh.s_dim, sh.s_stride);
    matmul(g, "dO@V^T", d_o, vt, dp);
    Tensor dp_centered = virtual_like(g, "dP_minus_Dsum", F32, s);
    pointwise(g, "sub_Dsum", CUDNN_POINTWISE_SUB, F32, dp, &dsum, nullptr, dp_centered);
    Tensor ds_unscaled = virtual_like(g, "dS_unscaled", F32, s);
    pointwise(g, "mul_P", CUDNN_POINTWISE_MUL, F32, dp_centered, &p, nullptr, ds_unscaled);
    Tensor ds = virtual_like(g, "dS", F32, s);
    pointwise(g, "scale_dS", CUDNN_POINTWISE_MUL, F32, ds_unscaled, &scale, nullptr, ds);

    // dK = dS^T @ Q
    Tensor dst = virtual_tensor(g, "dS^T", BF16, sh.st_dim, sh.st_stride);
    reshape(g, "dS^T", ds, dst);
    matmul(g, "dS^T@Q", dst, q, dk);

    // dQ = dS @ K, with K obtained by transposing the K^T view back
    const int64_t k_dim[4] = {sh.kt_dim[0], sh.kt_dim[1], sh.kt_dim[3], sh.kt_dim[2]};
    const int64_t k_stride[4] = {sh.kt_stride[0], sh.kt_stride[1], sh.kt_stride[3], sh.kt_stride[2]};
    Tensor k = virtual_tensor(g, "K", F32, k_dim, k_stride);
    reshape(g, "K", kt, k);
    if (dq_accumulator) {
        Tensor acc = make_tensor(g, "dQ_accum", F32, sh.bhtd_dim, sh.bhtd_stride, kUidDQAccum, false);
        matmul(g, "dS@K", ds, k, acc);
        pointwise(g, "dQ", CUDNN_POINTWISE_IDENTITY, F32, acc, nullptr, nullptr, dq);
    } else {
        matmul(g, "dS@K", ds, k, dq);
    }
}

// ------------------------------------------------------------------------------------------
// Cache of prepared shapes.
struct Entry {
    int B, T, NH, HS;
    int atomic_dq;   // the caller allows the atomic backward (part of the key)
    int state;  // 0 free, 1 ready, -1 unsupported (reason already printed)
    int refs;   // prepares not yet released: the plans go with the last release
    Graph *fwd;
    Graph *bwd;
    bool dq_accumulator;   // backward uses the fp32 dQ accumulator in the workspace
    bool memset_dq_accum;  // ... and the runtime cuDNN needs it zeroed first (before 9.6)
    size_t fwd_workspace;  // bytes the forward needs
    size_t bwd_dsum_offset, bwd_dq_accum_offset, bwd_workspace;
    // by-value scalars bound at execute time
    float scale, mask_value, one;
};

const int kMaxEntries = 8;
Entry g_entries[kMaxEntries];
cudnnHandle_t g_handle = nullptr;

Entry *find_entry(int B, int T, int NH, int HS, int atomic_dq) {
    for (int i = 0; i < kMaxEntries; i++) {
        Entry &e = g_entries[i];
        if (e.state != 0 && e.B == B && e.T == T && e.NH == NH && e.HS == HS && e.atomic_dq == atomic_dq) return &e;
    }
    return nullptr;
}

void release_entry(Entry &e) {
    delete e.fwd;
    delete e.bwd;
    e.fwd = nullptr;
    e.bwd = nullptr;
}

// Prints why the shape is unsupported (once: the entry remembers it), then frees its graphs.
// `detail` may point into those graphs, so it is printed first.
int unsupported(Entry &e, const char *prefix, const char *detail) {
    fprintf(stderr, "[attention_cudnn] B=%d T=%d NH=%d HS=%d not supported, using the fallback: %s%s\n", e.B, e.T,
            e.NH, e.HS, prefix, detail);
    fflush(stderr);
    release_entry(e);
    e.state = -1;
    return 0;
}

void check_aligned(const void *p, const char *name, const char *fn) {
    if ((uintptr_t)p % 16 != 0)
        die("%s: %s pointer %p is not 16-byte aligned (the cuDNN tensors are declared 16-byte aligned)", fn, name, p);
}

void execute(Graph &g, int n, const int64_t *uids, void *const *ptrs, void *workspace, cudaStream_t stream,
             const char *fn, const Entry &e) {
    cudnnStatus_t st = cudnnSetStream(g_handle, stream);
    if (st != CUDNN_STATUS_SUCCESS) die("%s: cudnnSetStream: %s", fn, cudnnGetErrorString(st));
    cudnnBackendDescriptor_t pack = nullptr;
    st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
    const char *step = "create variant pack";
    if (st == CUDNN_STATUS_SUCCESS) {
        step = "variant pack unique ids";
        st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
    }
    if (st == CUDNN_STATUS_SUCCESS) {
        step = "variant pack data pointers";
        st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
    }
    if (st == CUDNN_STATUS_SUCCESS) {
        step = "variant pack workspace";
        st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    }
    if (st == CUDNN_STATUS_SUCCESS) {
        step = "variant pack finalize";
        st = cudnnBackendFinalize(pack);
    }
    if (st == CUDNN_STATUS_SUCCESS) {
        step = "cudnnBackendExecute";
        st = cudnnBackendExecute(g_handle, g.plan, pack);
    }
    if (st != CUDNN_STATUS_SUCCESS) {
        char last[512];
        last[0] = '\0';
        cudnnGetLastErrorString(last, sizeof(last));
        if (pack) cudnnBackendDestroyDescriptor(pack);
        die("%s (B=%d T=%d NH=%d HS=%d): %s failed: %s%s%s", fn, e.B, e.T, e.NH, e.HS, step, cudnnGetErrorString(st),
            last[0] ? " -- " : "", last);
    }
    cudnnBackendDestroyDescriptor(pack);
}

Entry &ready_entry(int B, int T, int NH, int HS, int atomic_dq, const char *fn) {
    Entry *e = find_entry(B, T, NH, HS, atomic_dq);
    if (e == nullptr || e->state != 1)
        die("%s: shape B=%d T=%d NH=%d HS=%d (atomic_dq %d) was not prepared successfully (call "
            "attention_cudnn_prepare first and use the fallback when it returns 0)",
            fn, B, T, NH, HS, atomic_dq);
    return *e;
}

}  // namespace

// ------------------------------------------------------------------------------------------
int attention_cudnn_prepare(int B, int T, int NH, int HS, int atomic_dq, size_t *workspace_bytes) {
    if (workspace_bytes) *workspace_bytes = 0;
    if (B <= 0 || T <= 0 || NH <= 0 || HS <= 0)
        die("attention_cudnn_prepare: invalid shape B=%d T=%d NH=%d HS=%d", B, T, NH, HS);

    atomic_dq = atomic_dq != 0;
    Entry *found = find_entry(B, T, NH, HS, atomic_dq);
    if (found) {
        found->refs++;
        if (found->state != 1) return 0;
        if (workspace_bytes)
            *workspace_bytes =
                found->fwd_workspace > found->bwd_workspace ? found->fwd_workspace : found->bwd_workspace;
        return found->dq_accumulator ? 2 : 1;
    }
    Entry *slot = nullptr;
    for (int i = 0; i < kMaxEntries && !slot; i++)
        if (g_entries[i].state == 0) slot = &g_entries[i];
    if (slot == nullptr)
        die("attention_cudnn_prepare: more than %d distinct attention shapes prepared (B=%d T=%d NH=%d HS=%d)",
            kMaxEntries, B, T, NH, HS);
    Entry &e = *slot;
    memset(&e, 0, sizeof(e));
    e.B = B, e.T = T, e.NH = NH, e.HS = HS, e.atomic_dq = atomic_dq;
    e.state = -1;  // until proven otherwise
    e.refs = 1;

    char detail[256];
    const size_t version = cudnnGetVersion();
    if (!attention_cudnn_rules(version, T, HS, detail, sizeof(detail))) return unsupported(e, "", detail);

    int device = 0;
    cudaDeviceProp prop;
    cudaError_t cerr = cudaGetDevice(&device);
    if (cerr == cudaSuccess) cerr = cudaGetDeviceProperties(&prop, device);
    if (cerr != cudaSuccess) return unsupported(e, "cannot query the CUDA device: ", cudaGetErrorString(cerr));
    if (prop.major < 8) {
        snprintf(detail, sizeof(detail), "fused attention needs sm_80 or newer, device %d is sm_%d%d", device,
                 prop.major, prop.minor);
        return unsupported(e, "", detail);
    }
    if (g_handle == nullptr) {
        cudnnStatus_t st = cudnnCreate(&g_handle);
        if (st != CUDNN_STATUS_SUCCESS) {
            g_handle = nullptr;
            char last[256];
            last[0] = '\0';
            cudnnGetLastErrorString(last, sizeof(last));
            snprintf(detail, sizeof(detail), "%s %s", cudnnGetErrorString(st), last);
            return unsupported(e, "cudnnCreate failed: ", detail);
        }
    }

    e.scale = 1.0f / sqrtf((float)HS);
    e.mask_value = ATTENTION_CUDNN_MASK_VALUE;
    e.one = 1.0f;
    const Shapes sh = make_shapes(B, T, NH, HS);

    // forward
    e.fwd = new Graph();
    build_forward_graph(*e.fwd, sh);
    build_plan(*e.fwd, g_handle);
    if (!e.fwd->ok()) return unsupported(e, "forward graph: ", e.fwd->error);
    e.fwd_workspace = (size_t)e.fwd->plan_workspace;

    // backward: with atomic_dq first with the fp32 dQ accumulator (cuDNN's default, faster,
    // atomic adds), then without it (the variant cuDNN runs when determinism is requested);
    // without atomic_dq only the second.
    char bwd_errors[1600] = "";
    for (int variant = atomic_dq ? 0 : 1; variant < 2; variant++) {
        const bool accum = variant == 0;
        Graph *g = new Graph();
        build_backward_graph(*g, sh, accum);
        build_plan(*g, g_handle);
        if (g->ok()) {
            e.bwd = g;
            e.dq_accumulator = accum;
            break;
        }
        size_t len = strlen(bwd_errors);
        snprintf(bwd_errors + len, sizeof(bwd_errors) - len, "%s[%s] %s", len ? " " : "",
                 accum ? "atomic dQ" : "deterministic", g->error);
        delete g;
    }
    if (e.bwd == nullptr) {
        if (!atomic_dq) {   // say that the faster variant may still run (a user choice: other bits)
            size_t len = strlen(bwd_errors);
            snprintf(bwd_errors + len, sizeof(bwd_errors) - len,
                     " (the trainers' --cudnn 2 lets cuDNN try its atomic backward: faster, not the same bits every run)");
        }
        return unsupported(e, "backward graph: ", bwd_errors);
    }

    // the layout a dry run predicts without cuDNN (cuda_kernel_sizes.h)
    const AttentionCudnnBwdWorkspace ws =
        attention_cudnn_bwd_workspace((size_t)e.bwd->plan_workspace, B, T, NH, HS, e.dq_accumulator);
    e.bwd_dsum_offset = ws.dsum_offset;
    e.bwd_dq_accum_offset = ws.dq_accum_offset;
    e.bwd_workspace = ws.bytes;
    e.memset_dq_accum = e.dq_accumulator && version < 90600;
    e.state = 1;
    if (workspace_bytes) *workspace_bytes = e.fwd_workspace > e.bwd_workspace ? e.fwd_workspace : e.bwd_workspace;
    printf("[attention_cudnn] B=%d T=%d NH=%d HS=%d: cuDNN %zu fused attention ready (forward engine %lld, "
           "workspace %zu B; backward engine %lld, %s dQ, workspace %zu B)\n",
           B, T, NH, HS, version, (long long)plan_engine_index(*e.fwd), e.fwd_workspace,
           (long long)plan_engine_index(*e.bwd), e.dq_accumulator ? "atomic" : "deterministic", e.bwd_workspace);
    if (atomic_dq && !e.dq_accumulator)
        printf("[attention_cudnn] B=%d T=%d NH=%d HS=%d: the atomic backward asked for is declined, the deterministic "
               "one runs: %s\n", B, T, NH, HS, bwd_errors);
    return e.dq_accumulator ? 2 : 1;
}

void attention_cudnn_forward(__nv_bfloat16 *out, float *stats, const __nv_bfloat16 *qkv, int B, int T, int NH,
                             int HS, int atomic_dq, void *workspace, cudaStream_t stream) {
    atomic_dq = atomic_dq != 0;
    const char *fn = "attention_cudnn_forward";
    Entry &e = ready_entry(B, T, NH, HS, atomic_dq, fn);
    check_aligned(out, "out", fn);
    check_aligned(stats, "stats", fn);
    check_aligned(qkv, "qkv", fn);
    check_aligned(workspace, "workspace", fn);
    if (e.fwd_workspace > 0 && workspace == nullptr)
        die("%s: needs %zu bytes of workspace, got NULL", fn, e.fwd_workspace);
    const size_t C = (size_t)NH * HS;
    __nv_bfloat16 *q = const_cast<__nv_bfloat16 *>(qkv);
    const int64_t uids[7] = {kUidQ, kUidK, kUidV, kUidO, kUidStats, kUidScale, kUidMaskValue};
    void *const ptrs[7] = {q, q + C, q + 2 * C, out, stats, &e.scale, &e.mask_value};
    execute(*e.fwd, 7, uids, ptrs, workspace, stream, fn, e);
}

void attention_cudnn_backward(__nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv,
                              const __nv_bfloat16 *out, const float *stats, int B, int T, int NH, int HS,
                              int atomic_dq, void *workspace, cudaStream_t stream) {
    atomic_dq = atomic_dq != 0;
    const char *fn = "attention_cudnn_backward";
    Entry &e = ready_entry(B, T, NH, HS, atomic_dq, fn);
    check_aligned(dqkv, "dqkv", fn);
    check_aligned(dout, "dout", fn);
    check_aligned(qkv, "qkv", fn);
    check_aligned(out, "out", fn);
    check_aligned(stats, "stats", fn);
    check_aligned(workspace, "workspace", fn);
    if (workspace == nullptr) die("%s: needs %zu bytes of workspace, got NULL", fn, e.bwd_workspace);
    const size_t C = (size_t)NH * HS;
    __nv_bfloat16 *q = const_cast<__nv_bfloat16 *>(qkv);
    char *ws = (char *)workspace;
    int64_t uids[14] = {kUidQ,  kUidK,  kUidV,     kUidO,      kUidDO, kUidStats, kUidDQ,
                        kUidDK, kUidDV, kUidScale, kUidMaskValue, kUidOne, kUidDsum, kUidDQAccum};
    void *ptrs[14] = {q,
                      q + C,
                      q + 2 * C,
                      const_cast<__nv_bfloat16 *>(out),
                      const_cast<__nv_bfloat16 *>(dout),
                      const_cast<float *>(stats),
                      dqkv,
                      dqkv + C,
                      dqkv + 2 * C,
                      &e.scale,
                      &e.mask_value,
                      &e.one,
                      ws + e.bwd_dsum_offset,
                      ws + e.bwd_dq_accum_offset};
    int n = 13;  // the dQ accumulator (last entry) only exists in the atomic variant
    if (e.dq_accumulator) {
        n = 14;
        if (e.memset_dq_accum) {
            cudaError_t cerr = cudaMemsetAsync(ptrs[13], 0, (size_t)B * NH * T * HS * sizeof(float), stream);
            if (cerr != cudaSuccess) die("%s: clearing the dQ accumulator: %s", fn, cudaGetErrorString(cerr));
        }
    }
    execute(*e.bwd, n, uids, ptrs, workspace, stream, fn, e);
}

void attention_cudnn_release(int B, int T, int NH, int HS, int atomic_dq) {
    Entry *e = find_entry(B, T, NH, HS, atomic_dq != 0);
    if (e == nullptr || --e->refs > 0) return;
    release_entry(*e);
    e->state = 0;
}

void attention_cudnn_destroy(void) {
    for (int i = 0; i < kMaxEntries; i++) {
        release_entry(g_entries[i]);
        g_entries[i].state = 0;
    }
    if (g_handle) {
        cudnnDestroy(g_handle);
        g_handle = nullptr;
    }
}
