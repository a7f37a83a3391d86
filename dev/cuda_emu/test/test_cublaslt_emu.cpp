// test_cublaslt_emu.cpp: the emulated cuBLASLt (dev/cuda_emu/cublaslt.cpp) against a plain
// triple loop in double, and the errors broken callers must get. What is expected comes from
// NVIDIA's cuBLASLt documentation (cublasLtMatmul and its datatypes table, cublasLtEpilogue_t,
// the descriptor, layout and preference attributes), re-derived here, not from the library.
//
// Every check counts; a failed one prints a line; the last line is "N passed, N failed" and
// the exit status is 0 only when none failed. Device memory comes from the emulated runtime.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <vector>

// ---------------------------------------------------------------- checks

static int g_passed = 0, g_failed = 0;

static bool check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool check(bool ok, const char *fmt, ...) {
    if (ok) {
        g_passed++;
        return true;
    }
    g_failed++;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("FAIL: %s\n", msg);
    fflush(stdout);
    return false;
}

static const char *st_name(cublasStatus_t st) { return cublasLtGetStatusName(st); }

// A setup step that failed: the remaining checks would mean nothing, so count it and stop.
[[noreturn]] static void fatal(const char *file, int line, const char *call, const char *err) {
    g_failed++;
    printf("FAIL: %s:%d: setup step %s -> %s (stopping)\n", file, line, call, err);
    printf("%d passed, %d failed\n", g_passed, g_failed);
    exit(1);
}
#define MUST(call)                                                                   \
    do {                                                                             \
        cublasStatus_t st_ = (call);                                                 \
        if (st_ != CUBLAS_STATUS_SUCCESS) fatal(__FILE__, __LINE__, #call, st_name(st_)); \
    } while (0)
#define MUST_CUDA(call)                                                              \
    do {                                                                             \
        cudaError_t e_ = (call);                                                     \
        if (e_ != cudaSuccess) fatal(__FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
    } while (0)

static cublasLtHandle_t g_lt;

// ---------------------------------------------------------------- host matrices

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static double uniform() {   // in [-1, 1]
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (double)(g_rng % 2001) / 1000.0 - 1.0;
}

static size_t esize(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

static float round_to(cudaDataType_t t, double v) {
    float f = (float)v;
    return t == CUDA_R_32F ? f : __bfloat162float(__float2bfloat16(f));
}

// A matrix (or vector) as the caller lays it out: host values over its whole span (float
// holds every bf16 value exactly), and the device (or pinned) copy.
struct HostMat {
    cudaDataType_t type = CUDA_R_32F;
    int order = CUBLASLT_ORDER_COL;
    int64_t rows = 0, cols = 0, ld = 0, stride = 0;
    int batch = 1;
    std::vector<float> h;
    void *dev = nullptr;
    bool pinned = false;

    int64_t idx(int64_t b, int64_t r, int64_t c) const {
        return b * stride + (order == CUBLASLT_ORDER_COL ? r + c * ld : r * ld + c);
    }
    double at(int64_t b, int64_t r, int64_t c) const { return h[(size_t)idx(b, r, c)]; }
    size_t bytes() const { return h.size() * esize(type); }
};

static int64_t span_of(const HostMat &x) {
    if (x.rows == 0 || x.cols == 0) return 0;
    int64_t inner = x.order == CUBLASLT_ORDER_COL ? x.rows : x.cols;
    int64_t outer = x.order == CUBLASLT_ORDER_COL ? x.cols : x.rows;
    return (x.batch - 1) * x.stride + (outer - 1) * x.ld + inner;
}

// ld = the contiguous extent + pad; batch instances stride_pad elements apart beyond that.
static HostMat make_mat(cudaDataType_t type, int order, int64_t rows, int64_t cols, int64_t pad, int batch,
                        int64_t stride_pad = 5) {
    HostMat x;
    x.type = type;
    x.order = order;
    x.rows = rows;
    x.cols = cols;
    x.ld = (order == CUBLASLT_ORDER_COL ? rows : cols) + pad;
    x.batch = batch;
    x.stride = batch > 1 ? x.ld * (order == CUBLASLT_ORDER_COL ? cols : rows) + stride_pad : 0;
    x.h.assign((size_t)span_of(x), 0.0f);
    return x;
}

static HostMat make_vec(cudaDataType_t type, int64_t len, int batch, int64_t stride) {
    HostMat v = make_mat(type, CUBLASLT_ORDER_COL, len, 1, 0, 1);
    v.batch = batch;
    v.stride = batch > 1 ? stride : 0;
    v.h.assign((size_t)span_of(v), 0.0f);
    return v;
}

static void fill_random(HostMat &x) {
    for (float &v : x.h) v = round_to(x.type, uniform());
}

// Small integers: every product and sum is exact in fp32, so the only rounding left is the
// output's (sums past 256 need more than bf16's 8 significant bits, and odd ones are ties).
static void fill_ints(HostMat &x) {
    for (float &v : x.h) v = (float)(int)(15.5 * uniform());
}

static void fill_nan(HostMat &x) {
    for (float &v : x.h) v = NAN;
}

static std::vector<unsigned char> to_bytes(const HostMat &x) {
    std::vector<unsigned char> out(x.bytes());
    for (size_t i = 0; i < x.h.size(); i++) {
        if (x.type == CUDA_R_32F) memcpy(&out[i * 4], &x.h[i], 4);
        else {
            __nv_bfloat16 b = __float2bfloat16(x.h[i]);
            memcpy(&out[i * 2], &b, 2);
        }
    }
    return out;
}

static std::vector<float> from_bytes(const std::vector<unsigned char> &in, cudaDataType_t t) {
    std::vector<float> out(in.size() / esize(t));
    for (size_t i = 0; i < out.size(); i++) {
        if (t == CUDA_R_32F) memcpy(&out[i], &in[i * 4], 4);
        else {
            __nv_bfloat16 b;
            memcpy(&b, &in[i * 2], 2);
            out[i] = __bfloat162float(b);
        }
    }
    return out;
}

// Allocates (device memory, or pinned host memory) and copies the host values in.
static void upload(HostMat &x) {
    size_t n = x.bytes() ? x.bytes() : 1;
    if (x.pinned) MUST_CUDA(cudaMallocHost(&x.dev, n));
    else MUST_CUDA(cudaMalloc(&x.dev, n));
    std::vector<unsigned char> b = to_bytes(x);
    if (!b.empty()) MUST_CUDA(cudaMemcpy(x.dev, b.data(), b.size(), cudaMemcpyDefault));
}

static std::vector<float> download(const HostMat &x) {
    std::vector<unsigned char> b(x.bytes());
    if (!b.empty()) MUST_CUDA(cudaMemcpy(b.data(), x.dev, b.size(), cudaMemcpyDefault));
    return from_bytes(b, x.type);
}

static void release(HostMat &x) {
    if (x.dev) MUST_CUDA(x.pinned ? cudaFreeHost(x.dev) : cudaFree(x.dev));
    x.dev = nullptr;
}

static cublasLtMatrixLayout_t make_layout(const HostMat &x) {
    cublasLtMatrixLayout_t l;
    MUST(cublasLtMatrixLayoutCreate(&l, x.type, (uint64_t)x.rows, (uint64_t)x.cols, x.ld));
    int32_t order = x.order;
    MUST(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof order));
    if (x.batch > 1) {
        int32_t batch = x.batch;
        int64_t stride = x.stride;
        MUST(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
        MUST(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    }
    return l;
}

// ---------------------------------------------------------------- epilogues, from the docs

static bool epi_bias_in(cublasLtEpilogue_t e) {
    return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_RELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS ||
           e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
static bool epi_bias_out(cublasLtEpilogue_t e) {
    return e == CUBLASLT_EPILOGUE_DGELU_BGRAD || e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB;
}
static bool epi_aux_out(cublasLtEpilogue_t e) {
    return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
static bool epi_aux_in(cublasLtEpilogue_t e) {
    return e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}
static bool epi_relu(cublasLtEpilogue_t e) { return e == CUBLASLT_EPILOGUE_RELU || e == CUBLASLT_EPILOGUE_RELU_BIAS; }
static bool epi_gelu(cublasLtEpilogue_t e) {
    return e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS || epi_aux_out(e);
}

static const char *epi_name(cublasLtEpilogue_t e) {
    switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: return "DEFAULT";
    case CUBLASLT_EPILOGUE_RELU: return "RELU";
    case CUBLASLT_EPILOGUE_BIAS: return "BIAS";
    case CUBLASLT_EPILOGUE_RELU_BIAS: return "RELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU: return "GELU";
    case CUBLASLT_EPILOGUE_GELU_BIAS: return "GELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU_AUX: return "GELU_AUX";
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return "GELU_AUX_BIAS";
    case CUBLASLT_EPILOGUE_DGELU: return "DGELU";
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: return "DGELU_BGRAD";
    case CUBLASLT_EPILOGUE_BGRADA: return "BGRADA";
    case CUBLASLT_EPILOGUE_BGRADB: return "BGRADB";
    default: return "other";
    }
}

// The documented tanh approximation, and its derivative.
static double gelu_ref(double x) {
    const double s = sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + tanh(s * (x + 0.044715 * x * x * x)));
}
static double gelu_grad_ref(double x) {
    const double s = sqrt(2.0 / M_PI);
    double t = tanh(s * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * s * (1.0 + 3.0 * 0.044715 * x * x);
}

// ---------------------------------------------------------------- one matmul call

struct Case {
    cudaDataType_t ab = CUDA_R_16BF, cd = CUDA_R_16BF;
    int m = 8, n = 8, k = 8;
    bool ta = false, tb = false;
    int batch = 1;
    int pad = 0;                  // extra leading dimension of every matrix
    float alpha = 1.0f, beta = 0.0f;
    int order_a = CUBLASLT_ORDER_COL, order_b = CUBLASLT_ORDER_COL, order_cd = CUBLASLT_ORDER_COL;
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    bool heuristic = true;        // false: algo NULL
    bool out_of_place = false;    // C != D
    bool device_scalars = false;  // CUBLASLT_POINTER_MODE_DEVICE
    bool exact = false;           // integer data, compared bit for bit
};

static std::string describe(const Case &c) {
    char s[320];
    snprintf(s, sizeof s, "%s/%s m=%d n=%d k=%d op=%c%c batch=%d pad=%d alpha=%g beta=%g order=%s%s%s epi=%s %s%s%s%s",
             c.ab == CUDA_R_32F ? "f32" : "bf16", c.cd == CUDA_R_32F ? "f32" : "bf16", c.m, c.n, c.k,
             c.ta ? 'T' : 'N', c.tb ? 'T' : 'N', c.batch, c.pad, (double)c.alpha, (double)c.beta,
             c.order_a == CUBLASLT_ORDER_ROW ? "R" : "C", c.order_b == CUBLASLT_ORDER_ROW ? "R" : "C",
             c.order_cd == CUBLASLT_ORDER_ROW ? "R" : "C", epi_name(c.epi), c.heuristic ? "heuristic" : "algo=NULL",
             c.out_of_place ? " out-of-place" : "", c.device_scalars ? " device-scalars" : "", c.exact ? " exact" : "");
    return s;
}

// Everything one cublasLtMatmul call uses. The host copies keep what the caller means; a
// broken-caller test changes what is passed to cuBLASLt, not the meaning.
struct Run {
    Case c;
    HostMat A, B, C, D, bias, aux;
    bool has_bias = false, has_aux = false;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr, ld = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool use_algo = false;
    size_t ws_needed = 0;
    void *ws = nullptr;
    size_t ws_bytes = 0;
    float alpha = 1.0f, beta = 0.0f;
    float *dscalars = nullptr;   // device alpha, beta
    // what cublasLtMatmul is given (defaults: the buffers above)
    const void *pA = nullptr, *pB = nullptr, *pC = nullptr;
    void *pD = nullptr;
};

static void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void *v, size_t n) {
    MUST(cublasLtMatmulDescSetAttribute(d, a, v, n));
}

static void build_desc(Run &r) {
    const Case &c = r.c;
    MUST(cublasLtMatmulDescCreate(&r.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    int32_t ta = c.ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = c.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    set_desc(r.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    set_desc(r.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    uint32_t epi = c.epi;
    set_desc(r.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (r.has_bias) {
        set_desc(r.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &r.bias.dev, sizeof r.bias.dev);
        int64_t s = r.bias.stride;
        set_desc(r.desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &s, sizeof s);
    }
    if (r.has_aux) {
        set_desc(r.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &r.aux.dev, sizeof r.aux.dev);
        int64_t ld = r.aux.ld, s = r.aux.stride;
        set_desc(r.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld);
        set_desc(r.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &s, sizeof s);
    }
    if (c.device_scalars) {
        int32_t mode = CUBLASLT_POINTER_MODE_DEVICE;
        set_desc(r.desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode, sizeof mode);
    }
}

static uint32_t ptr_alignment(const void *p) {
    uint32_t a = 256;
    while (a > 1 && (uintptr_t)p % a) a /= 2;
    return a;
}

// The heuristic as a careful caller asks it: the pointers' real alignment and a 4 MiB workspace.
static cublasStatus_t ask_heuristic(Run &r, uint64_t max_ws = 4u << 20) {
    cublasLtMatmulPreference_t pref;
    MUST(cublasLtMatmulPreferenceCreate(&pref));
    MUST(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws));
    const void *ptrs[4] = {r.pA, r.pB, r.pC, r.pD};
    const cublasLtMatmulPreferenceAttributes_t attrs[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; i++) {
        uint32_t al = ptr_alignment(ptrs[i]);
        MUST(cublasLtMatmulPreferenceSetAttribute(pref, attrs[i], &al, sizeof al));
    }
    cublasLtMatmulHeuristicResult_t res;
    int count = -1;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(g_lt, r.desc, r.la, r.lb, r.lc, r.ld, pref, 1, &res, &count);
    MUST(cublasLtMatmulPreferenceDestroy(pref));
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (count != 1 || res.state != CUBLAS_STATUS_SUCCESS || res.workspaceSize > max_ws)
        return CUBLAS_STATUS_INTERNAL_ERROR;
    r.algo = res.algo;
    r.use_algo = true;
    r.ws_needed = res.workspaceSize;
    return CUBLAS_STATUS_SUCCESS;
}

// Host data, device buffers, descriptors and (if the case says so) the heuristic's algorithm.
static void prepare(Run &r, const Case &c) {
    r = Run();
    r.c = c;
    r.A = make_mat(c.ab, c.order_a, c.ta ? c.k : c.m, c.ta ? c.m : c.k, c.pad, c.batch);
    r.B = make_mat(c.ab, c.order_b, c.tb ? c.n : c.k, c.tb ? c.k : c.n, c.pad, c.batch, 3);
    r.D = make_mat(c.cd, c.order_cd, c.m, c.n, c.pad, c.batch, 7);
    void (*fill)(HostMat &) = c.exact ? fill_ints : fill_random;
    fill(r.A);
    fill(r.B);
    // D's old contents: C when in place with beta != 0, otherwise NaN that must not leak in.
    if (c.out_of_place) {
        r.C = make_mat(c.cd, c.order_cd, c.m, c.n, c.pad + 2, c.batch, 1);
        if (c.beta != 0.0f) fill(r.C);
        else fill_nan(r.C);
        fill_nan(r.D);
    } else {
        if (c.beta != 0.0f) fill(r.D);
        else fill_nan(r.D);
    }
    r.has_bias = epi_bias_in(c.epi) || epi_bias_out(c.epi);
    if (r.has_bias) {
        int64_t len = c.epi == CUBLASLT_EPILOGUE_BGRADB ? c.n : c.m;
        r.bias = make_vec(c.cd, len, c.batch, len + 3);
        if (epi_bias_in(c.epi)) fill(r.bias);
        else fill_nan(r.bias);
    }
    r.has_aux = epi_aux_in(c.epi) || epi_aux_out(c.epi);
    if (r.has_aux) {
        r.aux = make_mat(c.cd, CUBLASLT_ORDER_COL, c.m, c.n, 0, c.batch, 8);
        r.aux.ld = (c.m + 7) / 8 * 8 + 8;   // divisible by 8, more than m
        r.aux.stride = c.batch > 1 ? r.aux.ld * c.n + 16 : 0;
        r.aux.h.assign((size_t)span_of(r.aux), 0.0f);
        if (epi_aux_in(c.epi)) {
            for (float &v : r.aux.h) v = round_to(c.cd, 2.5 * uniform());   // GELU inputs over the bend
        } else {
            fill_nan(r.aux);
        }
    }
    for (HostMat *x : {&r.A, &r.B, &r.C, &r.D, &r.bias, &r.aux})
        if (!x->h.empty()) upload(*x);
    r.pA = r.A.dev;
    r.pB = r.B.dev;
    r.pD = r.D.dev;
    r.pC = c.out_of_place ? r.C.dev : r.D.dev;
    build_desc(r);
    r.la = make_layout(r.A);
    r.lb = make_layout(r.B);
    r.ld = make_layout(r.D);
    r.lc = make_layout(c.out_of_place ? r.C : r.D);
    r.alpha = c.alpha;
    r.beta = c.beta;
    if (c.device_scalars) {
        MUST_CUDA(cudaMalloc(&r.dscalars, 2 * sizeof(float)));
        float ab[2] = {c.alpha, c.beta};
        MUST_CUDA(cudaMemcpy(r.dscalars, ab, sizeof ab, cudaMemcpyHostToDevice));
    }
    if (c.heuristic) {
        MUST(ask_heuristic(r));
        r.ws_bytes = 4u << 20;
        MUST_CUDA(cudaMalloc(&r.ws, r.ws_bytes));
    }
}

static cublasStatus_t launch(Run &r, cudaStream_t s = 0) {
    const void *alpha = r.c.device_scalars ? (const void *)r.dscalars : (const void *)&r.alpha;
    const void *beta = r.c.device_scalars ? (const void *)(r.dscalars + 1) : (const void *)&r.beta;
    return cublasLtMatmul(g_lt, r.desc, alpha, r.pA, r.la, r.pB, r.lb, beta, r.pC, r.lc, r.pD, r.ld,
                          r.use_algo ? &r.algo : nullptr, r.ws, r.ws_bytes, s);
}

static void finish(Run &r) {
    MUST_CUDA(cudaDeviceSynchronize());
    for (HostMat *x : {&r.A, &r.B, &r.C, &r.D, &r.bias, &r.aux}) release(*x);
    if (r.ws) MUST_CUDA(cudaFree(r.ws));
    if (r.dscalars) MUST_CUDA(cudaFree(r.dscalars));
    for (cublasLtMatrixLayout_t l : {r.la, r.lb, r.lc, r.ld}) MUST(cublasLtMatrixLayoutDestroy(l));
    MUST(cublasLtMatmulDescDestroy(r.desc));
    r.ws = nullptr;
    r.dscalars = nullptr;
}

// ---------------------------------------------------------------- the reference

// One expected value, with how far a correct fp32 computation may be from it.
struct Expect {
    double v, tol;
};

static double out_ulp(cudaDataType_t t, double v, bool exact) {
    return exact ? 0.0 : fabs(v) * (t == CUDA_R_32F ? 0x1p-22 : 0x1p-7);
}

// The triple loop in double: D, aux and the bias vector as the documentation defines them.
struct Reference {
    std::vector<Expect> D, aux, bias;   // by storage index in the buffers
    std::vector<bool> d_written, aux_written, bias_written;
};

static Reference reference(const Run &r) {
    const Case &c = r.c;
    Reference ref;
    ref.D.assign(r.D.h.size(), Expect{0, 0});
    ref.d_written.assign(r.D.h.size(), false);
    ref.aux.assign(r.aux.h.size(), Expect{0, 0});
    ref.aux_written.assign(r.aux.h.size(), false);
    ref.bias.assign(r.bias.h.size(), Expect{0, 0});
    ref.bias_written.assign(r.bias.h.size(), false);
    // exact: no rounding before the output's, which must be bit for bit (ties to even)
    const double u = c.exact ? 0.0 : 0x1p-24, slack = 4.0 * (c.k + 3) * u, tiny = c.exact ? 0.0 : 1e-6;
    for (int b = 0; b < c.batch; b++) {
        std::vector<double> rowsum(c.m, 0.0), rowtol(c.m, 0.0), rowmag(c.m, 0.0);
        for (int i = 0; i < c.m; i++) {
            for (int j = 0; j < c.n; j++) {
                double dot = 0, mag = 0;
                for (int l = 0; l < c.k; l++) {
                    double a = c.ta ? r.A.at(b, l, i) : r.A.at(b, i, l);
                    double bb = c.tb ? r.B.at(b, j, l) : r.B.at(b, l, j);
                    dot += a * bb;
                    mag += fabs(a * bb);
                }
                double x = c.alpha * dot;
                mag *= fabs(c.alpha);
                if (c.beta != 0.0f) {
                    double cv = c.out_of_place ? r.C.at(b, i, j) : r.D.at(b, i, j);
                    x += c.beta * cv;
                    mag += fabs(c.beta * cv);
                }
                if (epi_bias_in(c.epi)) {
                    double bv = r.bias.at(b, i, 0);
                    x += bv;
                    mag += fabs(bv);
                }
                double tol = slack * mag + tiny * (mag + 1.0);
                if (epi_aux_out(c.epi)) {
                    int64_t ai = r.aux.idx(b, i, j);
                    ref.aux[(size_t)ai] = Expect{round_to(r.aux.type, x), tol + out_ulp(r.aux.type, x, c.exact)};
                    ref.aux_written[(size_t)ai] = true;
                }
                double y = x;
                if (epi_relu(c.epi)) y = x > 0 ? x : 0;
                if (epi_gelu(c.epi)) y = gelu_ref(x);
                if (epi_aux_in(c.epi)) y = x * gelu_grad_ref(r.aux.at(b, i, j));
                tol *= 1.2;   // |gelu'| <= 1.13
                rowsum[i] += y;
                rowtol[i] += tol;
                rowmag[i] += fabs(y);
                int64_t di = r.D.idx(b, i, j);
                ref.D[(size_t)di] = Expect{round_to(c.cd, y), tol + out_ulp(c.cd, y, c.exact)};
                ref.d_written[(size_t)di] = true;
            }
        }
        // Bias gradients: DGELU_BGRAD sums D's rows (over n); BGRADA and BGRADB sum op(A) and
        // op(B) over the GEMM's k.
        auto put_bias = [&](int64_t at, double v, double tol) {
            ref.bias[(size_t)at] = Expect{round_to(c.cd, v), tol + out_ulp(c.cd, v, c.exact)};
            ref.bias_written[(size_t)at] = true;
        };
        if (c.epi == CUBLASLT_EPILOGUE_DGELU_BGRAD)
            for (int i = 0; i < c.m; i++)
                put_bias(r.bias.idx(b, i, 0), rowsum[i], rowtol[i] + (c.n + 2) * u * rowmag[i]);
        if (c.epi == CUBLASLT_EPILOGUE_BGRADA)
            for (int i = 0; i < c.m; i++) {
                double s = 0, mag = 0;
                for (int l = 0; l < c.k; l++) {
                    double a = c.ta ? r.A.at(b, l, i) : r.A.at(b, i, l);
                    s += a;
                    mag += fabs(a);
                }
                put_bias(r.bias.idx(b, i, 0), s, slack * mag);
            }
        if (c.epi == CUBLASLT_EPILOGUE_BGRADB)
            for (int j = 0; j < c.n; j++) {
                double s = 0, mag = 0;
                for (int l = 0; l < c.k; l++) {
                    double bb = c.tb ? r.B.at(b, j, l) : r.B.at(b, l, j);
                    s += bb;
                    mag += fabs(bb);
                }
                put_bias(r.bias.idx(b, j, 0), s, slack * mag);
            }
    }
    return ref;
}

// Compares one buffer: written elements within tolerance, the others (padding, gaps between
// batch instances) untouched. Returns the number of bad elements; prints the first if asked.
static int compare(const char *what, const std::vector<float> &got, const std::vector<float> &before,
                   const std::vector<Expect> &want, const std::vector<bool> &written, const std::string &ctx,
                   bool report) {
    int bad = 0;
    for (size_t i = 0; i < got.size(); i++) {
        bool ok;
        if (written[i]) ok = fabs((double)got[i] - want[i].v) <= want[i].tol;   // false for NaN
        else ok = memcmp(&got[i], &before[i], sizeof(float)) == 0 || (isnan(got[i]) && isnan(before[i]));
        if (!ok && bad++ == 0 && report)
            printf("  %s: %s[%zu] = %.9g, expected %s %.9g (tolerance %.3g)\n", ctx.c_str(), what, i, (double)got[i],
                   written[i] ? "" : "untouched", written[i] ? want[i].v : (double)before[i],
                   written[i] ? want[i].tol : 0.0);
    }
    return bad;
}

// Waits for the work, then compares D, aux and bias with the reference.
static int verify(Run &r, bool report) {
    MUST_CUDA(cudaDeviceSynchronize());
    Reference ref = reference(r);
    std::string ctx = describe(r.c);
    int bad = compare("D", download(r.D), r.D.h, ref.D, ref.d_written, ctx, report);
    if (epi_aux_out(r.c.epi)) bad += compare("aux", download(r.aux), r.aux.h, ref.aux, ref.aux_written, ctx, report);
    if (epi_bias_out(r.c.epi))
        bad += compare("bias", download(r.bias), r.bias.h, ref.bias, ref.bias_written, ctx, report);
    return bad;
}

// A correct call: it must succeed and match the reference.
static void expect_correct(const Case &c) {
    Run r;
    prepare(r, c);
    cublasStatus_t st = launch(r);
    if (check(st == CUBLAS_STATUS_SUCCESS, "%s: cublasLtMatmul returned %s", describe(c).c_str(), st_name(st))) {
        int bad = verify(r, true);
        check(bad == 0, "%s: %d elements differ from the reference", describe(c).c_str(), bad);
    }
    finish(r);
}

// ---------------------------------------------------------------- correct callers

static void test_sweep() {
    const cudaDataType_t types[3][2] = {{CUDA_R_16BF, CUDA_R_16BF}, {CUDA_R_16BF, CUDA_R_32F}, {CUDA_R_32F, CUDA_R_32F}};
    const int shapes[4][3] = {{1, 1, 1}, {3, 17, 5}, {17, 3, 64}, {64, 33, 17}};
    int variant = 0;
    for (auto &t : types)
        for (int op = 0; op < 4; op++)
            for (auto &s : shapes)
                for (int batch : {1, 3})
                    for (int pad : {0, 3})
                        for (float beta : {0.0f, 0.5f}) {
                            Case c;
                            c.ab = t[0];
                            c.cd = t[1];
                            c.m = s[0];
                            c.n = s[1];
                            c.k = s[2];
                            c.ta = op & 1;
                            c.tb = op & 2;
                            c.batch = batch;
                            c.pad = pad;
                            c.beta = beta;
                            c.alpha = variant % 3 == 0 ? -0.75f : 1.0f;
                            c.heuristic = variant % 2 == 0;
                            c.out_of_place = variant % 5 == 1;
                            variant++;
                            expect_correct(c);
                        }
}

// Every mix of COL and ROW order (C and D share one order).
static void test_orders() {
    const cudaDataType_t types[3][2] = {{CUDA_R_16BF, CUDA_R_16BF}, {CUDA_R_16BF, CUDA_R_32F}, {CUDA_R_32F, CUDA_R_32F}};
    for (auto &t : types)
        for (int orders = 0; orders < 8; orders++)
            for (int op = 0; op < 4; op++) {
                Case c;
                c.ab = t[0];
                c.cd = t[1];
                c.m = 5;
                c.n = 9;
                c.k = 7;
                c.ta = op & 1;
                c.tb = op & 2;
                c.pad = orders % 3;
                c.batch = op == 3 ? 2 : 1;
                c.beta = op == 1 ? 0.25f : 0.0f;
                c.order_a = orders & 1 ? CUBLASLT_ORDER_ROW : CUBLASLT_ORDER_COL;
                c.order_b = orders & 2 ? CUBLASLT_ORDER_ROW : CUBLASLT_ORDER_COL;
                c.order_cd = orders & 4 ? CUBLASLT_ORDER_ROW : CUBLASLT_ORDER_COL;
                c.epi = orders & 4 ? (op == 2 ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_GELU)
                                   : CUBLASLT_EPILOGUE_DEFAULT;
                expect_correct(c);
            }
}

static void test_epilogues() {
    const cublasLtEpilogue_t epis[] = {
        CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_RELU, CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_RELU_BIAS,
        CUBLASLT_EPILOGUE_GELU, CUBLASLT_EPILOGUE_GELU_BIAS, CUBLASLT_EPILOGUE_GELU_AUX, CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
        CUBLASLT_EPILOGUE_DGELU, CUBLASLT_EPILOGUE_DGELU_BGRAD, CUBLASLT_EPILOGUE_BGRADA, CUBLASLT_EPILOGUE_BGRADB};
    const cudaDataType_t types[3][2] = {{CUDA_R_16BF, CUDA_R_16BF}, {CUDA_R_16BF, CUDA_R_32F}, {CUDA_R_32F, CUDA_R_32F}};
    const int shapes[3][3] = {{1, 1, 1}, {17, 3, 24}, {24, 13, 33}};
    int variant = 0;
    for (cublasLtEpilogue_t e : epis)
        for (auto &t : types)
            for (auto &s : shapes)
                for (int batch : {1, 2}) {
                    Case c;
                    c.ab = t[0];
                    c.cd = t[1];
                    c.m = s[0];
                    c.n = s[1];
                    c.k = s[2];
                    c.epi = e;
                    c.batch = batch;
                    c.ta = variant % 2;
                    c.tb = variant % 3 == 0;
                    c.pad = variant % 4;
                    c.alpha = variant % 5 == 0 ? 0.5f : 1.0f;
                    c.beta = variant % 3 == 1 ? 0.75f : 0.0f;
                    c.heuristic = variant % 7 != 3;
                    variant++;
                    expect_correct(c);
                }
}

// Integer data: the results are exact before the output conversion, so bf16 outputs must be
// __float2bfloat16 of them bit for bit (round to nearest, ties to even).
static void test_exact_rounding() {
    const cublasLtEpilogue_t epis[] = {CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_RELU, CUBLASLT_EPILOGUE_BIAS,
                                       CUBLASLT_EPILOGUE_RELU_BIAS, CUBLASLT_EPILOGUE_BGRADA, CUBLASLT_EPILOGUE_BGRADB};
    int variant = 0;
    for (cublasLtEpilogue_t e : epis)
        for (cudaDataType_t cd : {CUDA_R_16BF, CUDA_R_32F})
            for (int op = 0; op < 4; op++) {
                Case c;
                c.exact = true;
                c.cd = cd;
                c.m = 19;
                c.n = 23;
                c.k = 37;
                c.ta = op & 1;
                c.tb = op & 2;
                c.epi = e;
                c.batch = 1 + variant % 2;
                c.beta = variant % 3 == 0 ? 0.5f : 0.0f;
                c.alpha = variant % 4 == 1 ? 2.0f : 1.0f;
                variant++;
                expect_correct(c);
            }
}

// The dot products accumulate in fp32, k ascending: 2^24 + 1 + 1 stays 2^24, 1 + 1 + 2^24 does not.
static void test_accumulation_order() {
    for (cudaDataType_t ab : {CUDA_R_32F, CUDA_R_16BF})
        for (int big_first = 0; big_first < 2; big_first++) {
            HostMat A = make_mat(ab, CUBLASLT_ORDER_COL, 1, 3, 0, 1), B = make_mat(ab, CUBLASLT_ORDER_COL, 3, 1, 0, 1);
            HostMat D = make_mat(CUDA_R_32F, CUBLASLT_ORDER_COL, 1, 1, 0, 1);
            A.h = big_first ? std::vector<float>{16777216.0f, 1.0f, 1.0f} : std::vector<float>{1.0f, 1.0f, 16777216.0f};
            B.h = {1.0f, 1.0f, 1.0f};
            for (HostMat *x : {&A, &B, &D}) upload(*x);
            cublasLtMatmulDesc_t desc;
            MUST(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
            cublasLtMatrixLayout_t la = make_layout(A), lb = make_layout(B), ld = make_layout(D);
            float alpha = 1.0f, beta = 0.0f;
            cublasStatus_t st = cublasLtMatmul(g_lt, desc, &alpha, A.dev, la, B.dev, lb, &beta, D.dev, ld, D.dev, ld,
                                               nullptr, nullptr, 0, 0);
            float got = st == CUBLAS_STATUS_SUCCESS ? download(D)[0] : -1.0f;
            float want = big_first ? 16777216.0f : 16777218.0f;
            check(got == want, "fp32 accumulation, k ascending (%s inputs, 2^24 %s): got %.1f, expected %.1f",
                  ab == CUDA_R_32F ? "fp32" : "bf16", big_first ? "first" : "last", (double)got, (double)want);
            for (cublasLtMatrixLayout_t l : {la, lb, ld}) MUST(cublasLtMatrixLayoutDestroy(l));
            MUST(cublasLtMatmulDescDestroy(desc));
            for (HostMat *x : {&A, &B, &D}) release(*x);
        }
}

// Out of place, C's leading dimension may be 0: every column of D gets the same C column.
static void test_c_broadcast() {
    Case c;
    c.m = 6;
    c.n = 5;
    c.k = 4;
    c.beta = 1.0f;
    c.out_of_place = true;
    Run r;
    prepare(r, c);
    release(r.C);
    r.C = make_mat(c.cd, CUBLASLT_ORDER_COL, c.m, c.n, 0, 1);
    r.C.ld = 0;
    r.C.h.assign((size_t)c.m, 0.0f);
    fill_random(r.C);
    upload(r.C);
    r.pC = r.C.dev;
    MUST(cublasLtMatrixLayoutDestroy(r.lc));
    r.lc = make_layout(r.C);
    r.use_algo = false;
    cublasStatus_t st = launch(r);
    if (check(st == CUBLAS_STATUS_SUCCESS, "C with ld 0 (broadcast): %s", st_name(st)))
        check(verify(r, true) == 0, "C with ld 0 (broadcast): result differs");
    finish(r);
}

static void test_device_scalars() {
    for (float beta : {0.0f, 0.5f}) {
        Case c;
        c.m = 9;
        c.n = 4;
        c.k = 6;
        c.alpha = 1.5f;
        c.beta = beta;
        c.device_scalars = true;
        c.epi = CUBLASLT_EPILOGUE_BIAS;
        expect_correct(c);
    }
}

// Stream order: the matmul waits behind a host function that holds its stream; alpha is read
// when cublasLtMatmul is called, not when the work runs; D (pinned) stays untouched until then.
static std::atomic<int> g_gate{0};
static void CUDART_CB hold_stream(void *) {
    while (!g_gate.load()) usleep(200);
}

static void test_stream_order() {
    Case c;
    c.m = 7;
    c.n = 6;
    c.k = 5;
    c.alpha = 2.0f;
    c.heuristic = false;
    Run r;
    // D in pinned memory so that the host can look at it while the stream is held.
    prepare(r, c);
    release(r.D);
    r.D.pinned = true;
    upload(r.D);
    r.pC = r.pD = r.D.dev;
    cudaStream_t s;
    MUST_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    g_gate = 0;
    MUST_CUDA(cudaLaunchHostFunc(s, hold_stream, nullptr));
    cublasStatus_t st = launch(r, s);
    r.alpha = 100.0f;   // too late: the call has read alpha already
    usleep(20000);
    std::vector<float> early = from_bytes(std::vector<unsigned char>((unsigned char *)r.D.dev,
                                                                     (unsigned char *)r.D.dev + r.D.bytes()),
                                          r.D.type);
    bool untouched = true;
    for (float v : early) untouched = untouched && isnan(v);
    check(untouched, "stream order: D was written while its stream was still held by a host function");
    g_gate = 1;
    MUST_CUDA(cudaStreamSynchronize(s));
    r.alpha = 2.0f;
    if (check(st == CUBLAS_STATUS_SUCCESS, "stream order: cublasLtMatmul on a held stream: %s", st_name(st)))
        check(verify(r, true) == 0, "stream order: result differs (alpha must be read at call time)");
    MUST_CUDA(cudaStreamDestroy(s));
    finish(r);
}

// ---------------------------------------------------------------- the API around matmul

static void test_descriptors() {
    cublasLtMatmulDesc_t d;
    MUST(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    int32_t v32 = -1;
    uint32_t u32 = 0;
    size_t written = 0;
    check(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &v32, sizeof v32, &written) ==
                  CUBLAS_STATUS_SUCCESS && v32 == CUBLAS_OP_N && written == 4,
          "matmul descriptor: TRANSA defaults to CUBLAS_OP_N (got %d)", v32);
    check(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &u32, sizeof u32, nullptr) ==
                  CUBLAS_STATUS_SUCCESS && u32 == CUBLASLT_EPILOGUE_DEFAULT,
          "matmul descriptor: EPILOGUE defaults to CUBLASLT_EPILOGUE_DEFAULT (got %u)", u32);
    check(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_POINTER_MODE, &v32, sizeof v32, nullptr) ==
                  CUBLAS_STATUS_SUCCESS && v32 == CUBLASLT_POINTER_MODE_HOST,
          "matmul descriptor: POINTER_MODE defaults to HOST");
    check(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &v32, sizeof v32, nullptr) ==
                  CUBLAS_STATUS_SUCCESS && v32 == CUBLAS_COMPUTE_32F,
          "matmul descriptor: COMPUTE_TYPE is the one given to Create");
    check(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &v32, sizeof v32, nullptr) ==
                  CUBLAS_STATUS_SUCCESS && v32 == -1,
          "matmul descriptor: BIAS_DATA_TYPE defaults to -1");
    check(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, nullptr, 0, &written) ==
                  CUBLAS_STATUS_SUCCESS && written == sizeof(void *),
          "matmul descriptor: sizeInBytes 0 reports the size of BIAS_POINTER (got %zu)", written);
    check(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, nullptr, 0, nullptr) ==
              CUBLAS_STATUS_INVALID_VALUE,
          "matmul descriptor: sizeInBytes 0 and sizeWritten NULL is INVALID_VALUE");
    int64_t ld = 64;
    check(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &ld, sizeof ld) == CUBLAS_STATUS_INVALID_VALUE,
          "matmul descriptor: an 8-byte value for the int32_t TRANSA is INVALID_VALUE");
    check(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, nullptr, 8) ==
              CUBLAS_STATUS_INVALID_VALUE,
          "matmul descriptor: buf NULL is INVALID_VALUE");
    check(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld) ==
              CUBLAS_STATUS_SUCCESS,
          "matmul descriptor: set EPILOGUE_AUX_LD");
    int64_t back = 0;
    check(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &back, sizeof back, nullptr) ==
                  CUBLAS_STATUS_SUCCESS && back == 64,
          "matmul descriptor: EPILOGUE_AUX_LD reads back");
    MUST(cublasLtMatmulDescDestroy(d));

    // Init on caller storage (the header's static inline Init functions).
    cublasLtMatmulDescOpaque_t dstore;
    cublasLtMatrixLayoutOpaque_t lstore;
    cublasLtMatmulPreferenceOpaque_t pstore;
    check(cublasLtMatmulDescInit(&dstore, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS,
          "cublasLtMatmulDescInit on caller storage");
    check(cublasLtMatrixLayoutInit(&lstore, CUDA_R_16BF, 3, 4, 3) == CUBLAS_STATUS_SUCCESS,
          "cublasLtMatrixLayoutInit on caller storage");
    check(cublasLtMatmulPreferenceInit(&pstore) == CUBLAS_STATUS_SUCCESS,
          "cublasLtMatmulPreferenceInit on caller storage");

    uint64_t rows = 0;
    int32_t order = -1, batch = 0;
    int64_t stride = -1;
    check(cublasLtMatrixLayoutGetAttribute(&lstore, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof rows, nullptr) ==
                  CUBLAS_STATUS_SUCCESS && rows == 3,
          "layout: ROWS reads back");
    check(cublasLtMatrixLayoutGetAttribute(&lstore, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof order, nullptr) ==
                  CUBLAS_STATUS_SUCCESS && order == CUBLASLT_ORDER_COL,
          "layout: ORDER defaults to CUBLASLT_ORDER_COL");
    check(cublasLtMatrixLayoutGetAttribute(&lstore, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch,
                                           nullptr) == CUBLAS_STATUS_SUCCESS && batch == 1,
          "layout: BATCH_COUNT defaults to 1");
    check(cublasLtMatrixLayoutGetAttribute(&lstore, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                           sizeof stride, nullptr) == CUBLAS_STATUS_SUCCESS && stride == 0,
          "layout: STRIDED_BATCH_OFFSET defaults to 0");
    check(cublasLtMatrixLayoutSetAttribute(&lstore, CUBLASLT_MATRIX_LAYOUT_ROWS, &batch, sizeof batch) ==
              CUBLAS_STATUS_INVALID_VALUE,
          "layout: a 4-byte value for the uint64_t ROWS is INVALID_VALUE");

    uint64_t ws = 1;
    uint32_t al = 0;
    check(cublasLtMatmulPreferenceGetAttribute(&pstore, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws,
                                               nullptr) == CUBLAS_STATUS_SUCCESS && ws == 0,
          "preference: MAX_WORKSPACE_BYTES defaults to 0");
    check(cublasLtMatmulPreferenceGetAttribute(&pstore, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof al,
                                               nullptr) == CUBLAS_STATUS_SUCCESS && al == 256,
          "preference: MIN_ALIGNMENT_B_BYTES defaults to 256");

    check(strcmp(cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED") == 0,
          "cublasLtGetStatusName");
    check(cublasLtGetStatusString(CUBLAS_STATUS_INVALID_VALUE) != nullptr &&
              strlen(cublasLtGetStatusString(CUBLAS_STATUS_INVALID_VALUE)) > 0,
          "cublasLtGetStatusString");
    check(cublasLtGetVersion() == CUBLAS_VERSION, "cublasLtGetVersion is %zu", cublasLtGetVersion());
}

static void test_heuristic() {
    Case c;
    c.heuristic = false;
    Run r;
    prepare(r, c);
    cublasLtMatmulPreference_t pref;
    MUST(cublasLtMatmulPreferenceCreate(&pref));
    cublasLtMatmulHeuristicResult_t res[3];
    int count = -1;
    cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(g_lt, r.desc, r.la, r.lb, r.lc, r.ld, pref, 3, res, &count);
    check(st == CUBLAS_STATUS_SUCCESS && count >= 1 && res[0].state == CUBLAS_STATUS_SUCCESS &&
              res[0].workspaceSize == 0,
          "heuristic with default preferences: %s, %d algorithms, workspace %zu (no workspace allowed)", st_name(st),
          count, count > 0 ? res[0].workspaceSize : (size_t)0);
    // The algorithm runs with no workspace at all.
    r.algo = res[0].algo;
    r.use_algo = true;
    st = launch(r);
    if (check(st == CUBLAS_STATUS_SUCCESS, "matmul with the default-preference algorithm: %s", st_name(st)))
        check(verify(r, true) == 0, "matmul with the default-preference algorithm: result differs");

    check(cublasLtMatmulAlgoGetHeuristic(g_lt, r.desc, r.la, r.lb, r.lc, r.ld, pref, 0, res, &count) ==
              CUBLAS_STATUS_INVALID_VALUE,
          "heuristic: requestedAlgoCount 0 is INVALID_VALUE");
    uint64_t max_ws = 1 << 20;
    MUST(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws));
    st = cublasLtMatmulAlgoGetHeuristic(g_lt, r.desc, r.la, r.lb, r.lc, r.ld, pref, 1, res, &count);
    check(st == CUBLAS_STATUS_SUCCESS && count == 1 && res[0].workspaceSize <= max_ws,
          "heuristic: workspaceSize %zu within MAX_WORKSPACE_BYTES %llu", res[0].workspaceSize,
          (unsigned long long)max_ws);
    uint32_t one = 1;
    MUST(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &one, sizeof one));
    st = cublasLtMatmulAlgoGetHeuristic(g_lt, r.desc, r.la, r.lb, r.lc, r.ld, pref, 1, res, &count);
    check(st == CUBLAS_STATUS_NOT_SUPPORTED && count == 0,
          "heuristic: 1-byte alignment for bf16 A leaves no algorithm: %s, count %d", st_name(st), count);
    MUST(cublasLtMatmulPreferenceDestroy(pref));
    MUST(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t mask = ~(uint64_t)CUBLASLT_NUMERICAL_IMPL_FLAGS_FMA;
    MUST(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_IMPL_MASK, &mask, sizeof mask));
    st = cublasLtMatmulAlgoGetHeuristic(g_lt, r.desc, r.la, r.lb, r.lc, r.ld, pref, 1, res, &count);
    check(st == CUBLAS_STATUS_NOT_SUPPORTED,
          "heuristic: an IMPL_MASK without FMA excludes the emulated algorithm: %s", st_name(st));
    MUST(cublasLtMatmulPreferenceDestroy(pref));
    finish(r);
}

// ---------------------------------------------------------------- broken callers

// The caller's mistake must give an error status, or a result the reference rejects.
static void expect_caught(Run &r, const char *mistake) {
    cublasStatus_t st = launch(r);
    if (st != CUBLAS_STATUS_SUCCESS) {
        check(true, "%s", mistake);
        return;
    }
    int bad = verify(r, false);
    check(bad > 0, "%s: not caught (status SUCCESS and the result matches)", mistake);
}

static void expect_status(Run &r, cublasStatus_t want, const char *mistake) {
    cublasStatus_t st = launch(r);
    check(st == want, "%s: %s, expected %s", mistake, st_name(st), st_name(want));
}

static Case base_case() {
    Case c;
    c.m = 12;
    c.n = 10;
    c.k = 12;
    c.beta = 0.0f;
    return c;
}

static void replace_layout(cublasLtMatrixLayout_t *l, const HostMat &x) {
    MUST(cublasLtMatrixLayoutDestroy(*l));
    *l = make_layout(x);
}

static void test_broken_shapes() {
    Run r;
    // Square A stored as op N but declared transposed: shapes fit, the numbers do not.
    prepare(r, base_case());
    int32_t t = CUBLAS_OP_T;
    set_desc(r.desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
    r.use_algo = false;
    expect_caught(r, "wrong transpose of a square A");
    finish(r);

    Case c = base_case();
    c.k = 5;
    prepare(r, c);
    set_desc(r.desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
    r.use_algo = false;
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "wrong transpose of a 12x5 A (shape mismatch)");
    finish(r);

    // Leading dimension: padded data declared packed reads the wrong elements.
    c = base_case();
    c.pad = 3;
    prepare(r, c);
    HostMat lie = r.A;
    lie.ld = lie.rows;
    replace_layout(&r.la, lie);
    r.use_algo = false;
    expect_caught(r, "A's leading dimension declared smaller than it is");
    finish(r);

    prepare(r, base_case());
    lie = r.B;
    lie.ld = lie.rows - 1;
    replace_layout(&r.lb, lie);
    r.use_algo = false;
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "B's leading dimension less than its rows");
    finish(r);

    prepare(r, base_case());
    lie = r.D;
    lie.ld = lie.rows + 64;
    replace_layout(&r.ld, lie);
    replace_layout(&r.lc, lie);
    r.use_algo = false;
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "D's leading dimension too large for its buffer");
    finish(r);

    // Batch strides.
    c = base_case();
    c.batch = 3;
    prepare(r, c);
    lie = r.A;
    lie.stride += 40;
    replace_layout(&r.la, lie);
    r.use_algo = false;
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "A's batch stride runs past its buffer");
    finish(r);

    prepare(r, c);
    lie = r.B;
    lie.stride = lie.ld * lie.cols / 2;
    replace_layout(&r.lb, lie);
    r.use_algo = false;
    expect_caught(r, "B's batch stride smaller than it is (instances overlap)");
    finish(r);

    prepare(r, c);
    lie = r.D;
    lie.stride = 0;
    replace_layout(&r.ld, lie);
    replace_layout(&r.lc, lie);
    r.use_algo = false;
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "D's batch stride 0 (every instance writes the same matrix)");
    finish(r);

    prepare(r, c);
    lie = r.B;
    lie.batch = 2;
    replace_layout(&r.lb, lie);
    r.use_algo = false;
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "B's batch count differs from D's");
    finish(r);

    // C and D.
    c = base_case();
    c.out_of_place = true;
    c.beta = 1.0f;
    prepare(r, c);
    lie = r.C;
    lie.type = CUDA_R_32F;
    replace_layout(&r.lc, lie);
    r.use_algo = false;
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "C fp32 with D bf16");
    finish(r);

    c = base_case();
    c.beta = 1.0f;
    prepare(r, c);
    lie = r.D;
    lie.ld += 2;
    replace_layout(&r.lc, lie);
    r.use_algo = false;
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "C == D with a Cdesc unlike Ddesc");
    finish(r);
}

static void test_broken_types() {
    Run r;
    prepare(r, base_case());
    HostMat lie = r.B;
    lie.type = CUDA_R_32F;
    replace_layout(&r.lb, lie);
    r.use_algo = false;
    expect_status(r, CUBLAS_STATUS_NOT_SUPPORTED, "A bf16 with B fp32");
    finish(r);

    Case c = base_case();
    c.ab = c.cd = CUDA_R_32F;
    prepare(r, c);
    HostMat dl = r.D;
    dl.type = CUDA_R_16BF;
    replace_layout(&r.ld, dl);
    replace_layout(&r.lc, dl);
    r.use_algo = false;
    expect_status(r, CUBLAS_STATUS_NOT_SUPPORTED, "A/B fp32 with C/D bf16 (not in the datatypes table)");
    finish(r);

    prepare(r, base_case());
    lie = r.A;
    lie.type = CUDA_R_16F;
    replace_layout(&r.la, lie);
    lie = r.B;
    lie.type = CUDA_R_16F;
    replace_layout(&r.lb, lie);
    r.use_algo = false;
    expect_status(r, CUBLAS_STATUS_NOT_SUPPORTED, "A/B fp16 with C/D bf16");
    finish(r);

    prepare(r, base_case());
    MUST(cublasLtMatmulDescDestroy(r.desc));
    MUST(cublasLtMatmulDescCreate(&r.desc, CUBLAS_COMPUTE_16F, CUDA_R_16F));
    r.use_algo = false;
    expect_status(r, CUBLAS_STATUS_NOT_SUPPORTED, "compute type CUBLAS_COMPUTE_16F for bf16 data");
    finish(r);

    prepare(r, base_case());
    MUST(cublasLtMatmulDescDestroy(r.desc));
    MUST(cublasLtMatmulDescCreate(&r.desc, CUBLAS_COMPUTE_32F, CUDA_R_16BF));
    r.use_algo = false;
    expect_status(r, CUBLAS_STATUS_NOT_SUPPORTED, "scale type CUDA_R_16BF with CUBLAS_COMPUTE_32F");
    finish(r);

    // A bias vector of the wrong type: fp32 values for a bf16 D, read as bf16 pairs.
    c = base_case();
    c.epi = CUBLASLT_EPILOGUE_BIAS;
    prepare(r, c);
    release(r.bias);
    HostMat fbias = r.bias;
    fbias.type = CUDA_R_32F;
    upload(fbias);
    r.bias.dev = fbias.dev;   // released by finish
    set_desc(r.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &fbias.dev, sizeof fbias.dev);
    r.use_algo = false;
    expect_caught(r, "an fp32 bias vector for a bf16 D");
    int32_t bt = CUDA_R_32F;
    set_desc(r.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
    expect_status(r, CUBLAS_STATUS_NOT_SUPPORTED, "BIAS_DATA_TYPE fp32 with a bf16 D");
    finish(r);

    // ROW-order D with bias plus activation (documented unsupported), and with aux.
    c = base_case();
    c.order_cd = CUBLASLT_ORDER_ROW;
    c.epi = CUBLASLT_EPILOGUE_GELU;
    c.heuristic = false;
    for (cublasLtEpilogue_t e : {CUBLASLT_EPILOGUE_GELU_BIAS, CUBLASLT_EPILOGUE_RELU_BIAS}) {
        prepare(r, c);
        HostMat b = make_vec(c.cd, c.m, 1, 0);
        fill_random(b);
        upload(b);
        r.bias = b;
        uint32_t ev = e;
        set_desc(r.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ev, sizeof ev);
        set_desc(r.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b.dev, sizeof b.dev);
        expect_status(r, CUBLAS_STATUS_NOT_SUPPORTED, e == CUBLASLT_EPILOGUE_GELU_BIAS ? "GELU_BIAS with a ROW-order D"
                                                                                        : "RELU_BIAS with a ROW-order D");
        finish(r);
    }
}

static void test_broken_pointers() {
    Run r;
    // Misalignment against what the heuristic was promised (256 bytes for cudaMalloc memory).
    Case c = base_case();
    c.m = c.k = 16;   // A's ld of 32 bytes lets the algorithm demand 32-byte alignment
    prepare(r, c);
    r.pA = (const char *)r.A.dev + 16;
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "A moved 16 bytes after the heuristic was promised 256");
    r.pA = (const char *)r.A.dev + 1;
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "A misaligned to its bf16 elements");
    r.pA = r.A.dev;
    void *ws = r.ws;
    r.ws = (char *)ws + 16;
    r.ws_bytes -= 16;
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "workspace not 256-byte aligned");
    r.ws = ws;
    r.ws_bytes = r.ws_needed ? r.ws_needed - 256 : 0;
    if (r.ws_needed)
        expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "workspace smaller than the heuristic's workspaceSize");
    r.ws_bytes = 4u << 20;
    cublasLtMatmulAlgo_t garbage;
    memset(&garbage, 0, sizeof garbage);
    cublasLtMatmulAlgo_t good = r.algo;
    r.algo = garbage;
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "an algo that no heuristic returned");
    r.algo = good;
    uint32_t ev = CUBLASLT_EPILOGUE_RELU;
    set_desc(r.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ev, sizeof ev);
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "an algo from the heuristic for another epilogue");
    finish(r);

    // Buffers that are not device memory.
    prepare(r, base_case());
    std::vector<unsigned char> pageable(r.A.bytes());
    r.pA = pageable.data();
    r.use_algo = false;
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "A in pageable host memory");
    r.pA = r.A.dev;
    std::vector<unsigned char> pageable_d(r.D.bytes());
    r.pC = r.pD = pageable_d.data();
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "D in pageable host memory");
    r.pC = r.pD = r.D.dev;
    void *freed;
    MUST_CUDA(cudaMalloc(&freed, r.B.bytes()));
    MUST_CUDA(cudaFree(freed));
    r.pB = freed;
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "B freed before the call");
    r.pB = r.B.dev;
    r.pA = nullptr;
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "A NULL");
    r.pA = r.A.dev;
    // alpha as a device pointer while the pointer mode says host.
    float *dalpha;
    MUST_CUDA(cudaMalloc(&dalpha, sizeof(float)));
    cublasStatus_t st = cublasLtMatmul(g_lt, r.desc, dalpha, r.pA, r.la, r.pB, r.lb, &r.beta, r.pC, r.lc, r.pD, r.ld,
                                       nullptr, nullptr, 0, 0);
    check(st == CUBLAS_STATUS_INVALID_VALUE, "alpha in device memory with CUBLASLT_POINTER_MODE_HOST: %s", st_name(st));
    MUST_CUDA(cudaFree(dalpha));
    finish(r);

    // Bias and aux buffers.
    c = base_case();
    c.epi = CUBLASLT_EPILOGUE_BIAS;
    prepare(r, c);
    void *short_bias;
    MUST_CUDA(cudaMalloc(&short_bias, (c.m - 1) * esize(c.cd)));
    set_desc(r.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &short_bias, sizeof short_bias);
    r.use_algo = false;
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "a bias vector one element shorter than D's rows");
    void *null_bias = nullptr;
    set_desc(r.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &null_bias, sizeof null_bias);
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "epilogue BIAS without a bias pointer");
    MUST_CUDA(cudaFree(short_bias));
    finish(r);

    // A bias pointer moved after the heuristic saw it.
    prepare(r, c);
    HostMat big = make_vec(c.cd, c.m + 1, 1, 0);
    upload(big);
    void *moved = (char *)big.dev + 2;
    set_desc(r.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &moved, sizeof moved);
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "a bias pointer less aligned than when the heuristic ran");
    release(big);
    finish(r);

    c = base_case();
    c.epi = CUBLASLT_EPILOGUE_GELU_AUX;
    c.heuristic = false;
    prepare(r, c);
    int64_t bad_ld = c.m + 2;
    set_desc(r.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &bad_ld, sizeof bad_ld);
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "EPILOGUE_AUX_LD not divisible by 8");
    bad_ld = 8;
    set_desc(r.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &bad_ld, sizeof bad_ld);
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "EPILOGUE_AUX_LD less than D's rows");
    void *null_aux = nullptr;
    int64_t good_ld = r.aux.ld;
    set_desc(r.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &good_ld, sizeof good_ld);
    set_desc(r.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &null_aux, sizeof null_aux);
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "epilogue GELU_AUX without an aux pointer");
    finish(r);

    // Batched outputs of the epilogue that would overlap.
    c = base_case();
    c.batch = 2;
    c.heuristic = false;
    c.epi = CUBLASLT_EPILOGUE_GELU_AUX;
    prepare(r, c);
    int64_t zero = 0;
    set_desc(r.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &zero, sizeof zero);
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "batched GELU_AUX with aux batch stride 0");
    finish(r);
    c.epi = CUBLASLT_EPILOGUE_BGRADB;
    prepare(r, c);
    set_desc(r.desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &zero, sizeof zero);
    expect_status(r, CUBLAS_STATUS_INVALID_VALUE, "batched BGRADB with bias batch stride 0");
    finish(r);
}

// cuBLASLt from a host function, and handles that are not live.
struct HostFnCall {
    Run *r;
    cublasStatus_t matmul, create;
};
static void CUDART_CB call_from_host_fn(void *p) {
    HostFnCall *h = (HostFnCall *)p;
    h->matmul = launch(*h->r);
    cublasLtHandle_t tmp = nullptr;
    h->create = cublasLtCreate(&tmp);
}

static void test_broken_context() {
    Run r;
    Case c = base_case();
    c.heuristic = false;
    prepare(r, c);
    cudaStream_t s;
    MUST_CUDA(cudaStreamCreate(&s));
    HostFnCall h{&r, CUBLAS_STATUS_SUCCESS, CUBLAS_STATUS_SUCCESS};
    MUST_CUDA(cudaLaunchHostFunc(s, call_from_host_fn, &h));
    MUST_CUDA(cudaStreamSynchronize(s));
    MUST_CUDA(cudaStreamDestroy(s));
    check(h.matmul != CUBLAS_STATUS_SUCCESS, "cublasLtMatmul from a host function: %s", st_name(h.matmul));
    check(h.create != CUBLAS_STATUS_SUCCESS, "cublasLtCreate from a host function: %s", st_name(h.create));

    cublasLtHandle_t saved = g_lt;
    cublasLtHandle_t dead;
    MUST(cublasLtCreate(&dead));
    MUST(cublasLtDestroy(dead));
    g_lt = dead;
    expect_status(r, CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtMatmul with a destroyed handle");
    g_lt = nullptr;
    expect_status(r, CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtMatmul with a NULL handle");
    g_lt = saved;
    check(cublasLtDestroy(dead) == CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtDestroy twice");
    check(cublasLtDestroy(nullptr) == CUBLAS_STATUS_INVALID_VALUE, "cublasLtDestroy(NULL)");
    finish(r);
}

// Outputs that share memory with inputs. cublasLtMatmul "supports both in-place matrix
// multiplication (C == D and Cdesc == Ddesc) and out-of-place matrix multiplication (C != D
// ...)": D may share memory with C only as that same matrix. Every operand here is a
// 16 x 16 fp32 matrix with ld 64 in one buffer, placed at a row offset of its own, so that
// extents overlap while elements may not.
static void test_aliasing() {
    const int n = 16, ld = 64, cols = 64;
    float *buf;
    MUST_CUDA(cudaMalloc(&buf, (size_t)ld * cols * sizeof(float)));
    std::vector<float> h((size_t)ld * cols);
    for (size_t i = 0; i < h.size(); i++) h[i] = (float)((int)(i % 13) - 6);
    MUST_CUDA(cudaMemcpy(buf, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t lay;
    MUST(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    MUST(cublasLtMatrixLayoutCreate(&lay, CUDA_R_32F, n, n, ld));
    // the heuristic told the pointers' real alignment (16 bytes at the row offsets used)
    cublasLtMatmulPreference_t pref;
    MUST(cublasLtMatmulPreferenceCreate(&pref));
    uint32_t al = 16;
    for (auto a : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                   CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
        MUST(cublasLtMatmulPreferenceSetAttribute(pref, a, &al, sizeof al));
    cublasLtMatmulHeuristicResult_t res;
    int count = 0;
    MUST(cublasLtMatmulAlgoGetHeuristic(g_lt, desc, lay, lay, lay, lay, pref, 1, &res, &count));
    // rows offsets (in elements) of A, B, C, D in every column of the buffer
    auto run = [&](int a, int b, int c, int d, float beta) {
        const float one = 1.0f;
        return cublasLtMatmul(g_lt, desc, &one, buf + a, lay, buf + b, lay, &beta, buf + c, lay, buf + d, lay,
                              &res.algo, nullptr, 0, 0);
    };
    cublasStatus_t st = run(0, 16, 32, 48, 1.0f);
    MUST_CUDA(cudaDeviceSynchronize());
    std::vector<float> got(h.size());
    MUST_CUDA(cudaMemcpy(got.data(), buf, h.size() * sizeof(float), cudaMemcpyDeviceToHost));
    bool exact = st == CUBLAS_STATUS_SUCCESS;
    for (int i = 0; i < n && exact; i++)
        for (int j = 0; j < n; j++) {
            double want = h[(size_t)(32 + i + j * ld)];
            for (int k = 0; k < n; k++) want += (double)h[(size_t)(i + k * ld)] * h[(size_t)(16 + k + j * ld)];
            exact = exact && got[(size_t)(48 + i + j * ld)] == (float)want;
        }
    check(exact, "aliasing: A, B, C and D interleaved in one buffer (extents overlap, elements do not): %s, D exact",
          st_name(st));
    st = run(0, 16, 0, 0, 0.0f);
    check(st == CUBLAS_STATUS_INVALID_VALUE, "aliasing: D == A refused: %s", st_name(st));
    st = run(0, 16, 24, 24, 0.0f);
    check(st == CUBLAS_STATUS_INVALID_VALUE, "aliasing: D 8 rows into B refused: %s", st_name(st));
    st = run(0, 16, 40, 36, 1.0f);
    check(st == CUBLAS_STATUS_INVALID_VALUE, "aliasing: C 4 rows into D (C != D, beta 1) refused: %s", st_name(st));
    st = run(0, 16, 40, 36, 0.0f);
    check(st == CUBLAS_STATUS_SUCCESS, "aliasing: the same with beta 0 (C is not read): %s", st_name(st));
    st = run(0, 16, 36, 36, 1.0f);
    check(st == CUBLAS_STATUS_SUCCESS, "aliasing: C == D in place: %s", st_name(st));
    MUST_CUDA(cudaDeviceSynchronize());
    MUST(cublasLtMatmulPreferenceDestroy(pref));
    MUST(cublasLtMatrixLayoutDestroy(lay));
    MUST(cublasLtMatmulDescDestroy(desc));
    MUST_CUDA(cudaFree(buf));
}

int main() {
    MUST(cublasLtCreate(&g_lt));
    test_descriptors();
    test_heuristic();
    test_sweep();
    test_orders();
    test_epilogues();
    test_exact_rounding();
    test_accumulation_order();
    test_c_broadcast();
    test_device_scalars();
    test_stream_order();
    test_broken_shapes();
    test_aliasing();
    test_broken_types();
    test_broken_pointers();
    test_broken_context();
    MUST(cublasLtDestroy(g_lt));
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed == 0 ? 0 : 1;
}
