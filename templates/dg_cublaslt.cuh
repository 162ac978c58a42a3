// dg_cublaslt.cuh -- cuBLASLt with a fused epilogue (bias, relu, GELU), the bench baseline of a spec whose
// whole epilogue cuBLASLt has. Self-contained: it builds with the CUDA runtime and libdl only,
// like dg_harness.cuh's cuBLAS, because cuBLASLt is dlopen'ed at run time and the few cublasLt.h types
// and values it needs are declared below (the CUDA 12 and 13 headers agree on every one of them;
// tests/lt_selftest/abi_check.cu checks them against a real cublasLt.h where one is installed).
//
// What Python decides (dgemm_cli/baseline.py, its cuBLASLt part) and renders, one DgLtCall per formulation:
//   DgLtCall { desc, swap, trans_x, trans_y, m, n, k, ldx, ldy, ldc, ldd, stride_x, stride_y, stride_c,
//              stride_d, batch, dtype_ab, dtype_out, dtype_bias, epilogue, bias_batch_stride, c_is_d, scaled }
// Column-major, as cuBLAS: D(m x n, ldd) = epi(alpha * op(X)(m x k) * op(Y)(k x n) + beta * C(m x n, ldc)),
// X = A and Y = B, or with swap X = B and Y = A; `batch` matrices, each operand moving by its stride_*
// (0 = the same matrix for every batch, inputs only). The epilogue adds the bias, a packed vector over the
// m rows (the same for every column; with a batch it moves by bias_batch_stride), then the activation.
// c_is_d: C is the output itself (in place, or beta == 0 so that C is not read): D's pointer and layout
// serve for C and ldc / stride_c equal ldd / stride_d.
//
// Use (all errors come back as a reason string, empty on success; nothing here aborts):
//   DgLtApi lt;  void* handle;  std::string why = dg_lt_open(&lt, &handle);      // dlopen + cublasLtCreate
//   DgLtPlan plan;  why = dg_lt_prepare(lt, handle, call, pointers, workspace_bytes, &plan);
//       // descriptors, the heuristic's best algorithm: NOT during graph capture. `pointers` are a sample
//       // of the run's pointers: the algorithm is chosen for their alignment (and every run checks it).
//   why = dg_lt_run(lt, handle, &plan, pointers, alpha, beta, workspace, workspace_bytes, stream);
//       // one cublasLtMatmul on `stream`; graph-capturable (no allocation, no sync)
//   dg_lt_destroy(lt, &plan);  dg_lt_close(lt, handle);
// Pointers (DgLtPointers): a, b, c = the first element of each view (buffer base + the view's offset),
// d = the output view's first element (D's, or C's when the spec has no D), bias = the bias view's first
// element (nullptr without a bias). With c_is_d, c is ignored. A run-time-sized problem re-prepares at
// each size: dg_lt_at_size(call, m, hi) scales the fields Python marked (`scaled`, DG_LT_SCALE_* bits).
// The heuristic is told each matrix's alignment as its pointer, ld and batch stride leave it: told the
// pointer's alone, cuBLASLt can pick a vector-store kernel that faults on an ld that is not as aligned.
//
// For the bench, DgCublasLtAlternative<DgAltBaseline, DgProblem> (at the end) wraps all of it as
// dg_harness.cuh's alternative baseline; baseline.lt_alternative renders its construction.
#pragma once

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

// The dtype ids of dg_harness.cuh (DG_F32, DG_F16, DG_BF16) and its DgGemmCall::scaled bits (DG_SCALE_*):
// the same values, named apart so that this header also builds alone.
static constexpr int DG_LT_F32 = 0, DG_LT_F16 = 1, DG_LT_BF16 = 2;
static constexpr unsigned DG_LT_SCALE_M = 1, DG_LT_SCALE_N = 2, DG_LT_SCALE_K = 4, DG_LT_SCALE_BATCH = 8;

// cublasLtEpilogue_t.
static constexpr int DG_LT_EPILOGUE_DEFAULT = 1, DG_LT_EPILOGUE_RELU = 2, DG_LT_EPILOGUE_BIAS = 4,
                     DG_LT_EPILOGUE_RELU_BIAS = 6, DG_LT_EPILOGUE_GELU = 32, DG_LT_EPILOGUE_GELU_BIAS = 36;

// The cublasLt.h / cublas_api.h / library_types.h values used here. Handles and descriptors are pointers,
// enums are ints, statuses are ints (0 = CUBLAS_STATUS_SUCCESS).
namespace dg_lt_abi {
enum : int { R_32F = 0, R_16F = 2, R_16BF = 14 };  // cudaDataType_t: CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF
enum : int { COMPUTE_32F = 68 };                // cublasComputeType_t: CUBLAS_COMPUTE_32F
enum : int { OP_N = 0, OP_T = 1 };               // cublasOperation_t: CUBLAS_OP_N, CUBLAS_OP_T
enum : int {  // cublasLtMatmulDescAttributes_t
  DESC_TRANSA = 3, DESC_TRANSB = 4, DESC_EPILOGUE = 7, DESC_BIAS_POINTER = 8, DESC_BIAS_BATCH_STRIDE = 10,
  DESC_BIAS_DATA_TYPE = 26,
};
enum : int { LAYOUT_BATCH_COUNT = 5, LAYOUT_STRIDED_BATCH_OFFSET = 6 };  // cublasLtMatrixLayoutAttribute_t
enum : int {  // cublasLtMatmulPreferenceAttributes_t
  PREF_MAX_WORKSPACE_BYTES = 1, PREF_MIN_ALIGNMENT_A_BYTES = 5, PREF_MIN_ALIGNMENT_B_BYTES = 6,
  PREF_MIN_ALIGNMENT_C_BYTES = 7, PREF_MIN_ALIGNMENT_D_BYTES = 8,
};
struct Algo {  // cublasLtMatmulAlgo_t
  uint64_t data[8];
};
struct HeuristicResult {  // cublasLtMatmulHeuristicResult_t
  Algo algo;
  size_t workspaceSize;
  int state;  // cublasStatus_t
  float wavesCount;
  int reserved[4];
};
}  // namespace dg_lt_abi

// One formulation with its epilogue (the field order is what baseline.LtEpilogue.c_initializer renders).
struct DgLtCall {
  const char* desc;          // e.g. "C^T=B^TA m=n[14336] n=m[4096] k=k[4096]"
  int swap;                  // 0: X is A and Y is B;  1: X is B and Y is A (C^T = B^T A^T)
  int trans_x, trans_y;      // 0 = N, 1 = T
  long long m, n, k;
  long long ldx, ldy, ldc, ldd;
  long long stride_x, stride_y, stride_c, stride_d;   // batch strides in elements
  long long batch;
  int dtype_ab, dtype_out;   // DG_LT_F32 / DG_LT_F16 / DG_LT_BF16: A and B; C and D
  int dtype_bias;            // the bias's dtype, -1 without a bias
  int epilogue;              // DG_LT_EPILOGUE_*
  long long bias_batch_stride;
  int c_is_d;                // 1: pass the output for C (C is the output, or beta == 0)
  unsigned scaled;           // DG_LT_SCALE_* bits: the fields proportional to the run-time size (given for the largest)
};

struct DgLtPointers {
  const void* a;
  const void* b;
  const void* c;
  void* d;
  const void* bias;
};

// cuBLASLt's entry points, loaded at run time.
struct DgLtApi {
  typedef int (*CreateFn)(void** handle);
  typedef int (*DestroyFn)(void* handle);
  typedef int (*DescCreateFn)(void** desc, int compute_type, int scale_type);
  typedef int (*SetAttributeFn)(void* object, int attribute, const void* value, size_t bytes);
  typedef int (*DestroyObjectFn)(void* object);
  typedef int (*LayoutCreateFn)(void** layout, int type, uint64_t rows, uint64_t cols, int64_t ld);
  typedef int (*PreferenceCreateFn)(void** preference);
  typedef int (*HeuristicFn)(void* handle, void* op, void* a, void* b, void* c, void* d, void* preference,
                             int requested, dg_lt_abi::HeuristicResult* results, int* returned);
  typedef int (*MatmulFn)(void* handle, void* op, const void* alpha, const void* a, void* a_desc, const void* b,
                          void* b_desc, const void* beta, const void* c, void* c_desc, void* d, void* d_desc,
                          const dg_lt_abi::Algo* algo, void* workspace, size_t workspace_bytes, cudaStream_t stream);
  typedef size_t (*VersionFn)();
  typedef const char* (*StatusNameFn)(int status);

  CreateFn create = nullptr;
  DestroyFn destroy = nullptr;
  DescCreateFn desc_create = nullptr;
  SetAttributeFn desc_set = nullptr;
  DestroyObjectFn desc_destroy = nullptr;
  LayoutCreateFn layout_create = nullptr;
  SetAttributeFn layout_set = nullptr;
  DestroyObjectFn layout_destroy = nullptr;
  PreferenceCreateFn pref_create = nullptr;
  SetAttributeFn pref_set = nullptr;
  DestroyObjectFn pref_destroy = nullptr;
  HeuristicFn heuristic = nullptr;
  MatmulFn matmul = nullptr;
  VersionFn version = nullptr;          // optional
  StatusNameFn status_name = nullptr;   // optional
  std::string path;                     // the library that was loaded
};

// The descriptors and algorithm of one prepared call.
struct DgLtPlan {
  DgLtCall call{};
  void* op = nullptr;
  void* layout[4] = {nullptr, nullptr, nullptr, nullptr};  // X, Y, C, D
  dg_lt_abi::Algo algo{};
  size_t workspace = 0;      // what the algorithm needs (<= the workspace given to dg_lt_prepare)
  unsigned align[5] = {0, 0, 0, 0, 0};   // bytes the algorithm was chosen for: X, Y, C, D, bias
  int ready = 0;
};

static inline const char* dg_lt_epilogue_name(int epilogue) {
  switch (epilogue) {
    case DG_LT_EPILOGUE_DEFAULT: return "DEFAULT";
    case DG_LT_EPILOGUE_RELU: return "RELU";
    case DG_LT_EPILOGUE_BIAS: return "BIAS";
    case DG_LT_EPILOGUE_RELU_BIAS: return "RELU_BIAS";
    case DG_LT_EPILOGUE_GELU: return "GELU";
    case DG_LT_EPILOGUE_GELU_BIAS: return "GELU_BIAS";
    default: return nullptr;
  }
}

static inline bool dg_lt_has_bias(int epilogue) { return (epilogue & DG_LT_EPILOGUE_BIAS) != 0; }

static inline std::string dg_lt_status(const DgLtApi& api, int status) {
  if (api.status_name) {
    const char* name = api.status_name(status);
    if (name && *name) return name;
  }
  switch (status) {
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "cuBLAS status " + std::to_string(status);
  }
}

template <typename Fn>
static inline bool dg_lt_symbol(void* lib, const char* symbol, Fn* fn, std::string* why) {
  void* address = dlsym(lib, symbol);
  if (!address) {
    *why = std::string("cuBLASLt lacks ") + symbol;
    return false;
  }
  *fn = reinterpret_cast<Fn>(address);
  return true;
}

// Loads cuBLASLt: $DEEPGEMM_CUBLASLT, then libcublasLt beside $DEEPGEMM_CUBLAS (the path the cuBLAS
// baseline is told), then libcublasLt.so.13, .so.12, .so. Returns "" or why not. The library stays loaded
// until the process exits.
static inline std::string dg_lt_load(DgLtApi* api) {
  std::vector<std::string> names;
  const char* env = getenv("DEEPGEMM_CUBLASLT");
  if (env && *env) names.push_back(env);
  const char* cublas = getenv("DEEPGEMM_CUBLAS");
  if (cublas && *cublas && strchr(cublas, '/')) {
    const std::string dir(cublas, strrchr(cublas, '/') + 1);
    for (const char* n : {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}) names.push_back(dir + n);
  }
  for (const char* n : {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}) names.push_back(n);
  void* lib = nullptr;
  std::string tried;
  for (const std::string& n : names) {
    lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      api->path = n;
      break;
    }
    const char* err = dlerror();
    tried += (tried.empty() ? "" : "; ") + (err ? std::string(err) : n);
  }
  if (!lib) return "cannot load cuBLASLt (set DEEPGEMM_CUBLASLT to its path): " + tried;
  api->version = reinterpret_cast<DgLtApi::VersionFn>(dlsym(lib, "cublasLtGetVersion"));
  api->status_name = reinterpret_cast<DgLtApi::StatusNameFn>(dlsym(lib, "cublasLtGetStatusName"));
  std::string why;
  const bool ok = dg_lt_symbol(lib, "cublasLtCreate", &api->create, &why) &&
                  dg_lt_symbol(lib, "cublasLtDestroy", &api->destroy, &why) &&
                  dg_lt_symbol(lib, "cublasLtMatmulDescCreate", &api->desc_create, &why) &&
                  dg_lt_symbol(lib, "cublasLtMatmulDescSetAttribute", &api->desc_set, &why) &&
                  dg_lt_symbol(lib, "cublasLtMatmulDescDestroy", &api->desc_destroy, &why) &&
                  dg_lt_symbol(lib, "cublasLtMatrixLayoutCreate", &api->layout_create, &why) &&
                  dg_lt_symbol(lib, "cublasLtMatrixLayoutSetAttribute", &api->layout_set, &why) &&
                  dg_lt_symbol(lib, "cublasLtMatrixLayoutDestroy", &api->layout_destroy, &why) &&
                  dg_lt_symbol(lib, "cublasLtMatmulPreferenceCreate", &api->pref_create, &why) &&
                  dg_lt_symbol(lib, "cublasLtMatmulPreferenceSetAttribute", &api->pref_set, &why) &&
                  dg_lt_symbol(lib, "cublasLtMatmulPreferenceDestroy", &api->pref_destroy, &why) &&
                  dg_lt_symbol(lib, "cublasLtMatmulAlgoGetHeuristic", &api->heuristic, &why) &&
                  dg_lt_symbol(lib, "cublasLtMatmul", &api->matmul, &why);
  return ok ? std::string() : why;
}

// dg_lt_load, then a handle. Returns "" or why not.
static inline std::string dg_lt_open(DgLtApi* api, void** handle) {
  *handle = nullptr;
  std::string why = dg_lt_load(api);
  if (!why.empty()) return why;
  if (const int s = api->create(handle)) {
    *handle = nullptr;
    return "cublasLtCreate returned " + dg_lt_status(*api, s);
  }
  return std::string();
}

static inline void dg_lt_close(const DgLtApi& api, void* handle) {
  if (handle && api.destroy) api.destroy(handle);
}

// "cuBLASLt 130002" style, for the bench's output (the loaded library's version, if it says).
static inline std::string dg_lt_version(const DgLtApi& api) {
  return api.version ? "cuBLASLt " + std::to_string(api.version()) : std::string("cuBLASLt");
}

static inline int dg_lt_elem_bytes(int dtype) { return dtype == DG_LT_F32 ? 4 : 2; }

static inline int dg_lt_type(int dtype) {
  return dtype == DG_LT_F16 ? dg_lt_abi::R_16F : dtype == DG_LT_BF16 ? dg_lt_abi::R_16BF
                                                                          : dg_lt_abi::R_32F;
}

// The alignment (bytes, a power of two, at most 256) of a pointer: cuBLASLt's heuristic assumes 256 unless told.
static inline unsigned dg_lt_alignment(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  unsigned align = 1;
  while (align < 256 && !(a & align)) align <<= 1;
  return align;
}

// The alignment (bytes) every matrix of a batch has: the pointer's, the columns' (ld elements apart) and,
// with a batch, the matrices' (stride elements apart). The heuristic must be told this, not the pointer's
// alone: for a 256-byte-aligned D with ld = 68 halves it can pick a 16-byte-store kernel, which faults.
static inline unsigned dg_lt_matrix_alignment(const void* p, long long ld, long long cols, long long stride,
                                              long long batch, int elem_bytes) {
  unsigned align = dg_lt_alignment(p);
  if (cols > 1) align = std::min(align, dg_lt_alignment(reinterpret_cast<const void*>(ld * elem_bytes)));
  if (batch > 1 && stride != 0) align = std::min(align, dg_lt_alignment(reinterpret_cast<const void*>(stride * elem_bytes)));
  return align;
}

// The call when the run-time size planned at `hi` is `m`: the fields Python marked scale as value / hi * m.
static inline DgLtCall dg_lt_at_size(DgLtCall c, long long m, long long hi) {
  if (c.scaled & DG_LT_SCALE_M) c.m = c.m / hi * m;
  if (c.scaled & DG_LT_SCALE_N) c.n = c.n / hi * m;
  if (c.scaled & DG_LT_SCALE_K) c.k = c.k / hi * m;
  if (c.scaled & DG_LT_SCALE_BATCH) c.batch = c.batch / hi * m;
  return c;
}

static inline void dg_lt_destroy(const DgLtApi& api, DgLtPlan* plan) {
  for (void*& l : plan->layout) {
    if (l && api.layout_destroy) api.layout_destroy(l);
    l = nullptr;
  }
  if (plan->op && api.desc_destroy) api.desc_destroy(plan->op);
  plan->op = nullptr;
  plan->ready = 0;
}

// The operands as cuBLASLt names them: A = X (B with swap), B = Y, then C and D.
static inline void dg_lt_operands(const DgLtCall& c, const DgLtPointers& p, const void* out[4]) {
  out[0] = c.swap ? p.b : p.a;
  out[1] = c.swap ? p.a : p.b;
  out[2] = c.c_is_d ? p.d : p.c;
  out[3] = p.d;
}

// Builds the descriptors of `call` and picks the heuristic's best algorithm for a workspace of at most
// `workspace_bytes`, for pointers aligned as `sample`'s are. Returns "" or why not (the plan then holds
// nothing). Not during graph capture.
static inline std::string dg_lt_prepare(const DgLtApi& api, void* handle, const DgLtCall& call,
                                        const DgLtPointers& sample, size_t workspace_bytes, DgLtPlan* plan) {
  using namespace dg_lt_abi;
  dg_lt_destroy(api, plan);
  plan->call = call;
  const DgLtCall& c = call;
  if (!handle) return "no cuBLASLt handle";
  if (!dg_lt_epilogue_name(c.epilogue)) return "unknown cuBLASLt epilogue " + std::to_string(c.epilogue);
  for (int t : {c.dtype_ab, c.dtype_out})
    if (t < DG_LT_F32 || t > DG_LT_BF16) return "unknown dtype id " + std::to_string(t);
  const bool bias = dg_lt_has_bias(c.epilogue);
  if (bias && (c.dtype_bias < DG_LT_F32 || c.dtype_bias > DG_LT_BF16)) return "a bias epilogue without a bias dtype";
  if (c.m < 1 || c.n < 1 || c.k < 1 || c.batch < 1 || c.batch > INT32_MAX) return "a size is out of range";
  // Stored shapes: X is m x k (k x m when transposed), Y k x n (n x k), C and D m x n.
  const long long rows[4] = {c.trans_x ? c.k : c.m, c.trans_y ? c.n : c.k, c.m, c.m};
  const long long cols[4] = {c.trans_x ? c.m : c.k, c.trans_y ? c.k : c.n, c.n, c.n};
  const long long ld[4] = {c.ldx, c.ldy, c.c_is_d ? c.ldd : c.ldc, c.ldd};
  const long long stride[4] = {c.stride_x, c.stride_y, c.c_is_d ? c.stride_d : c.stride_c, c.stride_d};
  const int type[4] = {dg_lt_type(c.dtype_ab), dg_lt_type(c.dtype_ab), dg_lt_type(c.dtype_out),
                       dg_lt_type(c.dtype_out)};
  const int elem[4] = {dg_lt_elem_bytes(c.dtype_ab), dg_lt_elem_bytes(c.dtype_ab), dg_lt_elem_bytes(c.dtype_out),
                       dg_lt_elem_bytes(c.dtype_out)};
  const char* names[4] = {"X", "Y", "C", "D"};
  for (int i = 0; i < 4; ++i)
    if (ld[i] < rows[i]) return std::string("ld of ") + names[i] + " is under its rows";

  std::string why;
  auto check = [&](int status, const char* what) {
    if (status != 0 && why.empty()) why = std::string(what) + " returned " + dg_lt_status(api, status);
    return status == 0;
  };
  const int op_x = c.trans_x ? OP_T : OP_N, op_y = c.trans_y ? OP_T : OP_N;
  const uint32_t epilogue = static_cast<uint32_t>(c.epilogue);
  const void* operands[4];
  dg_lt_operands(c, sample, operands);
  bool ok = check(api.desc_create(&plan->op, COMPUTE_32F, R_32F), "cublasLtMatmulDescCreate") &&
            check(api.desc_set(plan->op, DESC_TRANSA, &op_x, sizeof(op_x)), "setting TRANSA") &&
            check(api.desc_set(plan->op, DESC_TRANSB, &op_y, sizeof(op_y)), "setting TRANSB") &&
            check(api.desc_set(plan->op, DESC_EPILOGUE, &epilogue, sizeof(epilogue)), "setting the epilogue");
  if (ok && bias) {
    const int32_t bias_type = dg_lt_type(c.dtype_bias);
    const int64_t bias_stride = c.bias_batch_stride;
    // The heuristic reads the pointer's value for its alignment.
    ok = check(api.desc_set(plan->op, DESC_BIAS_POINTER, &sample.bias, sizeof(sample.bias)), "setting the bias") &&
         check(api.desc_set(plan->op, DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)), "setting the bias dtype") &&
         (c.batch == 1 || check(api.desc_set(plan->op, DESC_BIAS_BATCH_STRIDE, &bias_stride, sizeof(bias_stride)),
                                "setting the bias batch stride"));
  }
  for (int i = 0; ok && i < 4; ++i) {
    ok = check(api.layout_create(&plan->layout[i], type[i], static_cast<uint64_t>(rows[i]),
                                 static_cast<uint64_t>(cols[i]), static_cast<int64_t>(ld[i])),
               "cublasLtMatrixLayoutCreate");
    if (ok && c.batch > 1) {
      const int32_t count = static_cast<int32_t>(c.batch);
      const int64_t offset = stride[i];
      ok = check(api.layout_set(plan->layout[i], LAYOUT_BATCH_COUNT, &count, sizeof(count)), "setting the batch") &&
           check(api.layout_set(plan->layout[i], LAYOUT_STRIDED_BATCH_OFFSET, &offset, sizeof(offset)),
                 "setting a batch stride");
    }
  }
  void* pref = nullptr;
  if (ok) {
    const uint64_t ws = workspace_bytes;
    const int pref_align[4] = {PREF_MIN_ALIGNMENT_A_BYTES, PREF_MIN_ALIGNMENT_B_BYTES, PREF_MIN_ALIGNMENT_C_BYTES,
                               PREF_MIN_ALIGNMENT_D_BYTES};
    ok = check(api.pref_create(&pref), "cublasLtMatmulPreferenceCreate") &&
         check(api.pref_set(pref, PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)), "setting the workspace");
    for (int i = 0; ok && i < 4; ++i) {
      plan->align[i] = dg_lt_alignment(operands[i]);
      const uint32_t a = dg_lt_matrix_alignment(operands[i], ld[i], cols[i], stride[i], c.batch, elem[i]);
      ok = check(api.pref_set(pref, pref_align[i], &a, sizeof(a)), "setting an alignment");
    }
  }
  if (ok && bias) {
    // The heuristic takes the bias's alignment from the pointer's value alone: a per-batch bias is only as
    // aligned as its batch stride leaves it, so it is shown a pointer that is exactly that aligned (the runs
    // set the real one).
    plan->align[4] = dg_lt_alignment(sample.bias);
    const unsigned a = dg_lt_matrix_alignment(sample.bias, 0, 1, c.bias_batch_stride, c.batch,
                                              dg_lt_elem_bytes(c.dtype_bias));
    const void* shown = a < plan->align[4] ? static_cast<const char*>(sample.bias) + a : sample.bias;
    ok = check(api.desc_set(plan->op, DESC_BIAS_POINTER, &shown, sizeof(shown)), "setting the bias");
  }
  if (ok) {
    HeuristicResult results[8];
    int returned = 0;
    ok = check(api.heuristic(handle, plan->op, plan->layout[0], plan->layout[1], plan->layout[2], plan->layout[3],
                             pref, 8, results, &returned),
               "cublasLtMatmulAlgoGetHeuristic");
    int best = -1;
    for (int i = 0; ok && i < returned && best < 0; ++i)
      if (results[i].state == 0 && results[i].workspaceSize <= workspace_bytes) best = i;
    if (ok && best < 0) {
      ok = false;
      why = std::string("cuBLASLt has no algorithm for ") + (c.desc ? c.desc : "this call") + " with epilogue " +
            dg_lt_epilogue_name(c.epilogue);
    }
    if (ok) {
      plan->algo = results[best].algo;
      plan->workspace = results[best].workspaceSize;
    }
  }
  if (pref) api.pref_destroy(pref);
  if (!ok) {
    dg_lt_destroy(api, plan);
    return why;
  }
  plan->ready = 1;
  return std::string();
}

// One cublasLtMatmul of the prepared call on `stream` (alpha, beta: host values). Returns "" or why not.
// Graph-capturable: it allocates nothing and does not synchronize.
static inline std::string dg_lt_run(const DgLtApi& api, void* handle, DgLtPlan* plan, const DgLtPointers& p,
                                    float alpha, float beta, void* workspace, size_t workspace_bytes,
                                    cudaStream_t stream) {
  using namespace dg_lt_abi;
  if (!plan->ready) return "the cuBLASLt call is not prepared";
  const DgLtCall& c = plan->call;
  if (workspace_bytes < plan->workspace || (plan->workspace && !workspace)) return "the workspace is too small";
  const bool bias = dg_lt_has_bias(c.epilogue);
  const void* operands[4];
  dg_lt_operands(c, p, operands);
  const char* names[5] = {"X", "Y", "C", "D", "bias"};
  for (int i = 0; i < 5; ++i) {
    const void* ptr = i < 4 ? operands[i] : p.bias;
    if (i == 4 && !bias) break;
    if (!ptr) return std::string("null pointer for ") + names[i];
    if (dg_lt_alignment(ptr) < plan->align[i])
      return std::string("the ") + names[i] + " pointer is less aligned than the algorithm was chosen for";
  }
  if (bias) {
    if (const int s = api.desc_set(plan->op, DESC_BIAS_POINTER, &p.bias, sizeof(p.bias)))
      return "setting the bias returned " + dg_lt_status(api, s);
  }
  const int s = api.matmul(handle, plan->op, &alpha, operands[0], plan->layout[0], operands[1], plan->layout[1], &beta,
                           operands[2], plan->layout[2], p.d, plan->layout[3], &plan->algo, workspace, workspace_bytes,
                           stream);
  return s ? "cublasLtMatmul returned " + dg_lt_status(api, s) : std::string();
}

// ------------------------------------------------------------------------------------------------
// The bench's alternative baseline: dg_harness.cuh's DgAltBaseline (Base) over its DgProblem (Problem), as a
// template so that this header still builds alone. A generated harness constructs one as
//   DgCublasLtAlternative<DgAltBaseline, DgProblem> alternative({DgLtCall, ...}, run_time_hi);
// (baseline.lt_alternative renders it: the formulations cuBLASLt runs with the whole epilogue, and the
// run-time letter's largest size, 0 for a fixed-size problem). prepare() builds every formulation for the
// problem's size (their algorithms chosen for the alignments the problem promises: DgProblem::align and the
// views' offsets); the first run() outside a graph capture times each a few times and keeps the fastest.
// Pointers: bufs[] are the base pointers by slot (A, B, C, D, bias, ...); the views' offsets are applied
// here. The slots, as dg_harness.cuh numbers them:
static constexpr int DG_LT_SLOT_A = 0, DG_LT_SLOT_B = 1, DG_LT_SLOT_C = 2, DG_LT_SLOT_D = 3, DG_LT_SLOT_BIAS = 4;

template <class Base, class Problem>
class DgCublasLtAlternative : public Base {
 public:
  DgCublasLtAlternative(std::vector<DgLtCall> calls, long long run_time_hi)
      : calls_(std::move(calls)), hi_(run_time_hi) {
    name_ = std::string("cublaslt:") + (calls_.empty() ? "none" : dg_lt_epilogue_name(calls_[0].epilogue));
  }
  DgCublasLtAlternative(const DgCublasLtAlternative&) = delete;
  DgCublasLtAlternative& operator=(const DgCublasLtAlternative&) = delete;
  ~DgCublasLtAlternative() override {
    release();
    if (workspace_) cudaFree(workspace_);
    dg_lt_close(api_, handle_);
  }

  const char* epilogue() const override { return name_.c_str(); }

  std::string formulation() const override {
    if (chosen_ < 0) return plans_.empty() ? std::string() : std::string(plans_[0].call.desc);
    return plans_[chosen_].call.desc;
  }

  std::string prepare(const Problem& p, cudaStream_t) override {
    release();
    if (calls_.empty()) return "no formulation that cuBLASLt runs with this epilogue";
    if (!handle_) {
      const std::string why = dg_lt_open(&api_, &handle_);
      if (!why.empty()) return why;
      name_ += " (" + dg_lt_version(api_) + ")";
    }
    if (!workspace_ && cudaMalloc(&workspace_, kWorkspace) != cudaSuccess) {
      workspace_ = nullptr;
      cudaGetLastError();
      return "cannot allocate cuBLASLt's workspace";
    }
    // The run-time size of this problem (its letter's dim), for the fields Python gave at the largest.
    long long m = 0;
    for (int d = 0; d < p.ndims; ++d)
      if (p.run_time_letter && p.dims[d].letter == p.run_time_letter) m = p.dims[d].size;
    out_slot_ = p.present[DG_LT_SLOT_D] ? DG_LT_SLOT_D : DG_LT_SLOT_C;
    const int slots[5] = {DG_LT_SLOT_A, DG_LT_SLOT_B, DG_LT_SLOT_C, out_slot_, DG_LT_SLOT_BIAS};
    for (int i = 0; i < 5; ++i) {
      const int s = slots[i];
      const bool has = s != DG_LT_SLOT_BIAS || p.present[DG_LT_SLOT_BIAS];
      offset_bytes_[i] = has ? p.offset[s] * dg_lt_elem_bytes(p.dtype[s]) : 0;
      slot_[i] = has ? s : -1;
      // A pointer exactly as aligned as the harness's buffers (cudaMalloc: 256 bytes) and the view's offset
      // leave, as a user calling the heuristic with these pointers gets (our kernels, too, check the real
      // pointers at run time). The heuristic reads the value only; dg_lt_run checks the real pointers. Told
      // the spec's promise instead (2 bytes for a plain f16 spec), it picks a far slower kernel.
      const unsigned a = std::min(256u, dg_lt_alignment(reinterpret_cast<const void*>(offset_bytes_[i])));
      sample_[i] = reinterpret_cast<void*>(static_cast<uintptr_t>(a) + 4096u * 256u);
    }
    alpha_ = p.alpha;
    beta_ = p.beta;
    std::string why;
    for (const DgLtCall& c : calls_) {
      DgLtPlan plan;
      const DgLtCall at = hi_ > 0 && m > 0 ? dg_lt_at_size(c, m, hi_) : c;
      const std::string w = dg_lt_prepare(api_, handle_, at, pointers(sample_), kWorkspace, &plan);
      if (w.empty()) plans_.push_back(plan);
      else if (why.empty()) why = w;
    }
    chosen_ = plans_.size() == 1 ? 0 : -1;
    return plans_.empty() ? why : std::string();
  }

  std::string run(void* const* bufs, cudaStream_t stream) override {
    if (plans_.empty()) return "not prepared";
    void* ptr[5];
    for (int i = 0; i < 5; ++i)
      ptr[i] = slot_[i] >= 0 && bufs[slot_[i]] ? static_cast<char*>(bufs[slot_[i]]) + offset_bytes_[i] : nullptr;
    const DgLtPointers p = pointers(ptr);
    if (chosen_ < 0) {
      cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
      cudaStreamIsCapturing(stream, &capturing);
      if (capturing != cudaStreamCaptureStatusNone) {
        chosen_ = 0;
      } else {
        const std::string why = choose(p, stream);
        if (!why.empty()) return why;
      }
    }
    return dg_lt_run(api_, handle_, &plans_[chosen_], p, alpha_, beta_, workspace_, kWorkspace, stream);
  }

 private:
  static constexpr size_t kWorkspace = size_t(32) << 20;

  static DgLtPointers pointers(void* const ptr[5]) { return DgLtPointers{ptr[0], ptr[1], ptr[2], ptr[3], ptr[4]}; }

  // Each prepared formulation a few times on the real buffers (the output is written, as any run writes
  // it); the fastest is kept.
  std::string choose(const DgLtPointers& p, cudaStream_t stream) {
    float best = -1.0f;
    cudaEvent_t start, stop;
    if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) return "cudaEventCreate failed";
    std::string why;
    for (size_t i = 0; i < plans_.size() && why.empty(); ++i) {
      for (int r = 0; r < 2 && why.empty(); ++r)
        why = dg_lt_run(api_, handle_, &plans_[i], p, alpha_, beta_, workspace_, kWorkspace, stream);
      cudaEventRecord(start, stream);
      for (int r = 0; r < 5 && why.empty(); ++r)
        why = dg_lt_run(api_, handle_, &plans_[i], p, alpha_, beta_, workspace_, kWorkspace, stream);
      cudaEventRecord(stop, stream);
      float ms = 0.0f;
      if (why.empty() && cudaEventSynchronize(stop) == cudaSuccess && cudaEventElapsedTime(&ms, start, stop) == cudaSuccess &&
          (best < 0.0f || ms < best)) {
        best = ms;
        chosen_ = static_cast<int>(i);
      }
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (why.empty() && chosen_ < 0) why = "timing the cuBLASLt formulations failed";
    return why;
  }

  void release() {
    for (DgLtPlan& plan : plans_) dg_lt_destroy(api_, &plan);
    plans_.clear();
    chosen_ = -1;
  }

  std::vector<DgLtCall> calls_;
  long long hi_ = 0;
  std::string name_;
  DgLtApi api_;
  void* handle_ = nullptr;
  void* workspace_ = nullptr;
  std::vector<DgLtPlan> plans_;
  int chosen_ = -1;
  int out_slot_ = DG_LT_SLOT_C;
  int slot_[5] = {-1, -1, -1, -1, -1};     // A, B, C, the output, the bias
  long long offset_bytes_[5] = {0, 0, 0, 0, 0};
  void* sample_[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
  float alpha_ = 1.0f, beta_ = 0.0f;
};

// ------------------------------------------------------------------------------------------------
// Dense products on operands of their own: DgCublasLtDense (one TN GEMM of a given shape in f16 or bf16, beside
// the FP8 baseline: what a user without FP8 runs) and DgCublasLtDenseWeights (the baseline of integer weights:
// the same product with the weights held dense in A's dtype).
// ------------------------------------------------------------------------------------------------

// DgDim::role values (dg_harness.cuh's DG_BATCH .. DG_K).
static constexpr int DG_LT_ROLE_BATCH = 0, DG_LT_ROLE_M = 1, DG_LT_ROLE_N = 2, DG_LT_ROLE_K = 3;

// D[rows x cols] = X^T Y with X [rows][k] and Y [cols][k] row-major (both K-major: cuBLASLt's TN), in dtype_ab with
// f32 accumulation, on temps allocated and filled once a prepare: the speed of a dense GEMM of the shape.
template <class Base, class Problem>
class DgCublasLtDense : public Base {
 public:
  const char* epilogue() const override { return dtype_ab_ == DG_LT_F16 ? "cublaslt:f16" : "cublaslt:bf16"; }
  std::string formulation() const override { return desc_; }

  // The shape (rows x cols x k, the inputs' and the output's dtypes), set before prepare.
  void shape(long long rows, long long cols, long long k, int dtype_ab, int dtype_out) {
    rows_ = rows;
    cols_ = cols;
    k_ = k;
    dtype_ab_ = dtype_ab;
    dtype_out_ = dtype_out;
  }

  std::string prepare(const Problem&, cudaStream_t stream) override {
    release();
    if (rows_ < 1 || cols_ < 1 || k_ < 1) return "no shape";
    if (dtype_ab_ != DG_LT_F16 && dtype_ab_ != DG_LT_BF16) return "a dense GEMM of 16-bit inputs only";
    if (!handle_) {
      const std::string why = dg_lt_open(&api_, &handle_);
      if (!why.empty()) return why;
    }
    const size_t x_bytes = static_cast<size_t>(rows_ * k_) * 2, y_bytes = static_cast<size_t>(cols_ * k_) * 2;
    const size_t d_bytes = static_cast<size_t>(rows_ * cols_) * dg_lt_elem_bytes(dtype_out_);
    if (cudaMalloc(&x_, x_bytes) != cudaSuccess || cudaMalloc(&y_, y_bytes) != cudaSuccess ||
        cudaMalloc(&d_, d_bytes) != cudaSuccess || cudaMalloc(&workspace_, kWorkspace) != cudaSuccess) {
      cudaGetLastError();
      release();
      return "cannot allocate the dense operands";
    }
    // Every element 0x3030 (f16 0.129, bf16 6.4e-10): finite, nonzero, sums far from f16's range for any k a spec
    // takes; the speed of a dense GEMM hardly depends on the values.
    cudaMemsetAsync(x_, 0x30, x_bytes, stream);
    cudaMemsetAsync(y_, 0x30, y_bytes, stream);
    call_ = DgLtCall{"", 0, 1, 0, rows_, cols_, k_, k_, k_, rows_, rows_, 0, 0, 0, 0, 1, dtype_ab_, dtype_out_, -1,
                     DG_LT_EPILOGUE_DEFAULT, 0, 1, 0u};
    desc_ = std::string("cublasLt ") + (dtype_ab_ == DG_LT_F16 ? "f16" : "bf16") + " TN m=" +
            std::to_string(rows_) + " n=" + std::to_string(cols_) + " k=" + std::to_string(k_) + " (" +
            dg_lt_version(api_) + ")";
    call_.desc = desc_.c_str();
    const DgLtPointers p{x_, y_, d_, d_, nullptr};
    return dg_lt_prepare(api_, handle_, call_, p, kWorkspace, &plan_);
  }

  std::string run(void* const*, cudaStream_t stream) override {
    const DgLtPointers p{x_, y_, d_, d_, nullptr};
    return dg_lt_run(api_, handle_, &plan_, p, 1.0f, 0.0f, workspace_, kWorkspace, stream);
  }

  ~DgCublasLtDense() override {
    release();
    dg_lt_close(api_, handle_);
  }

 protected:
  std::string desc_;

 private:
  static constexpr size_t kWorkspace = size_t(32) << 20;
  void release() {
    dg_lt_destroy(api_, &plan_);
    for (void** p : {&x_, &y_, &d_, &workspace_}) {
      if (*p) cudaFree(*p);
      *p = nullptr;
    }
  }
  long long rows_ = 0, cols_ = 0, k_ = 0;
  int dtype_ab_ = DG_LT_BF16, dtype_out_ = DG_LT_BF16;
  DgLtApi api_;
  void* handle_ = nullptr;
  DgLtPlan plan_;
  DgLtCall call_{};
  void *x_ = nullptr, *y_ = nullptr, *d_ = nullptr, *workspace_ = nullptr;
};

// The baseline of integer weights (B int4 / uint4 / int8 / uint8 with scales): the same product with the weights
// dequantized once and held dense in A's dtype, as F.linear runs it (out^T [n x m] = W [n][k] . x [m][k]^T): what a
// user of a 16-bit model runs. A generated harness constructs one as
//   DgCublasLtDenseWeights<DgAltBaseline, DgProblem> alternative;
// Only the product is timed: alpha, beta and the epilogue's steps are left out, and formulation() says so.
template <class Base, class Problem>
class DgCublasLtDenseWeights : public DgCublasLtDense<Base, Problem> {
  using Dense = DgCublasLtDense<Base, Problem>;

 public:
  const char* epilogue() const override { return "cublaslt:dense-weights"; }

  std::string prepare(const Problem& p, cudaStream_t stream) override {
    long long size[4] = {1, 1, 1, 1};  // batch, m, n, k: the problem's dims at this size, by role
    for (int d = 0; d < p.ndims; ++d) size[p.dims[d].role] *= p.dims[d].size;
    if (size[DG_LT_ROLE_BATCH] > 1) return "a batch of weight matrices has no dense-weights baseline";
    const int out_slot = p.present[DG_LT_SLOT_D] ? DG_LT_SLOT_D : DG_LT_SLOT_C;
    this->shape(size[DG_LT_ROLE_N], size[DG_LT_ROLE_M], size[DG_LT_ROLE_K], p.dtype[DG_LT_SLOT_A], p.dtype[out_slot]);
    const std::string why = Dense::prepare(p, stream);
    this->desc_ += p.nsteps || p.present[DG_LT_SLOT_D] || p.beta != 0.0f
                       ? ": dense weights, the product alone (without beta * C and the epilogue)"
                       : ": dense weights";
    return why;
  }
};
