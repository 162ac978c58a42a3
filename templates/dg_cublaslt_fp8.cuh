// dg_cublaslt_fp8.cuh -- cuBLASLt FP8 (e4m3) with scales, the bench baseline of an e4m3 spec (issue 41), and bf16
// cuBLASLt on the same shape reported beside it. Self-contained like dg_cublaslt.cuh, whose loader and plan types it
// reuses: cuBLASLt is dlopen'ed, and the cublasLt.h values it needs beyond dg_cublaslt.cuh's are declared below
// (tests/lt_selftest/abi_check.cu checks them against a real cublasLt.h).
//
// cuBLASLt's FP8 GEMM is the "TN" form: column-major D(rows x cols) = alpha * X^T Y + beta * C with X stored
// k x rows and Y stored k x cols, both K-contiguous (op(X) = T, op(Y) = N), each with one scale tensor whose mode
// (cublasLtMatmulMatrixScale_t) says what it covers. For an operand stored k x outer (outer = rows for X, cols for Y),
// Kb = ceil(k / 128), the scale tensors are (the layouts PyTorch's _scaled_mm checks and passes, aten ScaledBlas.cpp,
// _scaled_block1x128_block128x128; the cublasLt.h enum comments):
//   SCALAR_32F      one float for the whole operand
//   OUTER_VEC_32F   one float an outer index: outer floats (X's scale a row of D, Y's a column)
//   VEC128_32F      one float an outer index and 128 k: outer x Kb, the outer index contiguous: s[o + kb * outer]
//   BLK128x128_32F  one float a 128 x 128 block: s[kb + ob * round_up(Kb, 4)], ob = o / 128 (Kb padded to 4)
// Which pairs of modes the installed library runs, and at which shapes, is what its heuristic says: prepare reports
// a refusal, and the alternative below then tries its next candidate (tests/lt_selftest/fp8_selftest.cu prints the
// table; docs/RESULTS.md has the H200's).
//
// The scales of the spec (its A_scales / B_scales views, one f32 per block of the operand's letters) are copied into
// these layouts by dg_lt_fp8_scale_kernel: each scale of the cuBLASLt tensor covers a region of the operand (one
// row and 128 k, a 128 x 128 block, a row, everything) and takes the spec's scale of the region's first element.
// That is the same scaling wherever the spec's blocks hold the region (Python labels each candidate: the same modes,
// the spec's scales in a finer mode cuBLASLt has, or the nearest mode when the values differ).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dg_cublaslt.cuh"

// cublasLt.h / library_types.h values used here beyond dg_cublaslt.cuh's (CUDA 12.9 and 13.0 agree on each):
//   CUDA_R_8F_E4M3 = 28                          library_types.h (CUDA 13.0's, nvidia-cuda-runtime 13.0 wheel)
//   CUBLASLT_MATMUL_DESC_A_SCALE_POINTER = 17    cublasLt.h 13.0.2 (nvidia-cublas 13.0.2.14 wheel); NVIDIA's
//   CUBLASLT_MATMUL_DESC_B_SCALE_POINTER = 18      nvmath-python docs, bindings.cublasLt.MatmulDescAttribute
//   CUBLASLT_MATMUL_DESC_A_SCALE_MODE = 31       cublasLt.h 13.0.2
//   CUBLASLT_MATMUL_DESC_B_SCALE_MODE = 32       cublasLt.h 13.0.2
//   CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F = 0, OUTER_VEC_32F = 3, VEC128_32F = 4, BLK128x128_32F = 5
//                                                cublasLt.h 13.0.2; nvmath-python docs, bindings.cublasLt.MatmulMatrixScale
namespace dg_lt_fp8_abi {
enum : int { R_8F_E4M3 = 28 };
enum : int { DESC_A_SCALE_POINTER = 17, DESC_B_SCALE_POINTER = 18, DESC_A_SCALE_MODE = 31, DESC_B_SCALE_MODE = 32 };
}  // namespace dg_lt_fp8_abi

// cublasLtMatmulMatrixScale_t.
static constexpr int DG_LT_FP8_SCALAR = 0, DG_LT_FP8_OUTER_VEC = 3, DG_LT_FP8_VEC128 = 4, DG_LT_FP8_BLK128x128 = 5;

static inline const char* dg_lt_fp8_mode_name(int mode) {
  switch (mode) {
    case DG_LT_FP8_SCALAR: return "SCALAR_32F";
    case DG_LT_FP8_OUTER_VEC: return "OUTER_VEC_32F";
    case DG_LT_FP8_VEC128: return "VEC128_32F";
    case DG_LT_FP8_BLK128x128: return "BLK128x128_32F";
    default: return nullptr;
  }
}

static inline long long dg_lt_fp8_ceil(long long a, long long b) { return (a + b - 1) / b; }

// Floats in the scale tensor of an operand stored k x outer (see the layouts above).
static inline long long dg_lt_fp8_scale_count(int mode, long long outer, long long k) {
  const long long kb = dg_lt_fp8_ceil(k, 128);
  switch (mode) {
    case DG_LT_FP8_SCALAR: return 1;
    case DG_LT_FP8_OUTER_VEC: return outer;
    case DG_LT_FP8_VEC128: return outer * kb;
    case DG_LT_FP8_BLK128x128: return dg_lt_fp8_ceil(kb, 4) * 4 * dg_lt_fp8_ceil(outer, 128);
    default: return 0;
  }
}

// One FP8 product, column-major as above: X (k x rows, ldx), Y (k x cols, ldy), D (rows x cols, ldd) in dtype_out
// (DG_LT_BF16 / DG_LT_F16 / DG_LT_F32); C has D's type, and its own ldc unless c_is_d.
struct DgLtFp8Call {
  long long rows, cols, k;
  long long ldx, ldy, ldc, ldd;
  int mode_x, mode_y;        // DG_LT_FP8_*
  int dtype_out;
  int c_is_d;
};

struct DgLtFp8Pointers {
  const void* x;
  const void* y;
  const void* c;
  void* d;
  const float* scale_x;
  const float* scale_y;
};

// Descriptors and the heuristic's best algorithm (into dg_cublaslt.cuh's DgLtPlan: its layouts are X, Y, C, D).
// Returns "" or why not; the heuristic's refusal names the modes. Not during graph capture.
static inline std::string dg_lt_fp8_prepare(const DgLtApi& api, void* handle, const DgLtFp8Call& c,
                                            const DgLtFp8Pointers& sample, size_t workspace_bytes, DgLtPlan* plan) {
  using namespace dg_lt_abi;
  using namespace dg_lt_fp8_abi;
  dg_lt_destroy(api, plan);
  if (!handle) return "no cuBLASLt handle";
  if (!dg_lt_fp8_mode_name(c.mode_x) || !dg_lt_fp8_mode_name(c.mode_y)) return "unknown scale mode";
  if (c.rows < 1 || c.cols < 1 || c.k < 1) return "a size is out of range";
  if (c.ldx < c.k || c.ldy < c.k || c.ldd < c.rows || (!c.c_is_d && c.ldc < c.rows)) return "a leading dimension is short";
  std::string why;
  auto check = [&](int status, const char* what) {
    if (status != 0 && why.empty()) why = std::string(what) + " returned " + dg_lt_status(api, status);
    return status == 0;
  };
  const int op_t = OP_T, op_n = OP_N;
  const int32_t mode_x = c.mode_x, mode_y = c.mode_y;
  bool ok = check(api.desc_create(&plan->op, COMPUTE_32F, R_32F), "cublasLtMatmulDescCreate") &&
            check(api.desc_set(plan->op, DESC_TRANSA, &op_t, sizeof(op_t)), "setting TRANSA") &&
            check(api.desc_set(plan->op, DESC_TRANSB, &op_n, sizeof(op_n)), "setting TRANSB") &&
            check(api.desc_set(plan->op, DESC_A_SCALE_MODE, &mode_x, sizeof(mode_x)), "setting the A scale mode") &&
            check(api.desc_set(plan->op, DESC_B_SCALE_MODE, &mode_y, sizeof(mode_y)), "setting the B scale mode") &&
            check(api.desc_set(plan->op, DESC_A_SCALE_POINTER, &sample.scale_x, sizeof(sample.scale_x)),
                  "setting the A scale pointer") &&
            check(api.desc_set(plan->op, DESC_B_SCALE_POINTER, &sample.scale_y, sizeof(sample.scale_y)),
                  "setting the B scale pointer");
  const int out_type = dg_lt_type(c.dtype_out);
  const long long rows[4] = {c.k, c.k, c.rows, c.rows}, cols[4] = {c.rows, c.cols, c.cols, c.cols};
  const long long ld[4] = {c.ldx, c.ldy, c.c_is_d ? c.ldd : c.ldc, c.ldd};
  const int type[4] = {R_8F_E4M3, R_8F_E4M3, out_type, out_type};
  const int elem[4] = {1, 1, dg_lt_elem_bytes(c.dtype_out), dg_lt_elem_bytes(c.dtype_out)};
  for (int i = 0; ok && i < 4; ++i)
    ok = check(api.layout_create(&plan->layout[i], type[i], static_cast<uint64_t>(rows[i]),
                                 static_cast<uint64_t>(cols[i]), static_cast<int64_t>(ld[i])),
               "cublasLtMatrixLayoutCreate");
  void* pref = nullptr;
  if (ok) {
    const uint64_t ws = workspace_bytes;
    const int pref_align[4] = {PREF_MIN_ALIGNMENT_A_BYTES, PREF_MIN_ALIGNMENT_B_BYTES, PREF_MIN_ALIGNMENT_C_BYTES,
                               PREF_MIN_ALIGNMENT_D_BYTES};
    const void* operands[4] = {sample.x, sample.y, c.c_is_d ? sample.d : sample.c, sample.d};
    ok = check(api.pref_create(&pref), "cublasLtMatmulPreferenceCreate") &&
         check(api.pref_set(pref, PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)), "setting the workspace");
    for (int i = 0; ok && i < 4; ++i) {
      plan->align[i] = dg_lt_alignment(operands[i]);
      const uint32_t a = dg_lt_matrix_alignment(operands[i], ld[i], cols[i], 0, 1, elem[i]);
      ok = check(api.pref_set(pref, pref_align[i], &a, sizeof(a)), "setting an alignment");
    }
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
      why = std::string("cuBLASLt has no e4m3 algorithm with scale modes ") + dg_lt_fp8_mode_name(c.mode_x) + " x " +
            dg_lt_fp8_mode_name(c.mode_y);
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

// One cublasLtMatmul of the prepared product on `stream`; the scale pointers are set each run (they move with the
// buffers). Graph-capturable: no allocation, no synchronization.
static inline std::string dg_lt_fp8_run(const DgLtApi& api, void* handle, DgLtPlan* plan, const DgLtFp8Call& c,
                                        const DgLtFp8Pointers& p, float alpha, float beta, void* workspace,
                                        size_t workspace_bytes, cudaStream_t stream) {
  using namespace dg_lt_fp8_abi;
  if (!plan->ready) return "the cuBLASLt FP8 call is not prepared";
  if (workspace_bytes < plan->workspace || (plan->workspace && !workspace)) return "the workspace is too small";
  const void* operands[4] = {p.x, p.y, c.c_is_d ? p.d : p.c, p.d};
  for (int i = 0; i < 4; ++i) {
    if (!operands[i] || !p.scale_x || !p.scale_y) return "a null pointer";
    if (dg_lt_alignment(operands[i]) < plan->align[i]) return "a pointer is less aligned than the algorithm needs";
  }
  if (const int s = api.desc_set(plan->op, DESC_A_SCALE_POINTER, &p.scale_x, sizeof(p.scale_x)))
    return "setting the A scale pointer returned " + dg_lt_status(api, s);
  if (const int s = api.desc_set(plan->op, DESC_B_SCALE_POINTER, &p.scale_y, sizeof(p.scale_y)))
    return "setting the B scale pointer returned " + dg_lt_status(api, s);
  const int s = api.matmul(handle, plan->op, &alpha, p.x, plan->layout[0], p.y, plan->layout[1], &beta, operands[2],
                           plan->layout[2], p.d, plan->layout[3], &plan->algo, workspace, workspace_bytes, stream);
  return s ? "cublasLtMatmul returned " + dg_lt_status(api, s) : std::string();
}

// ------------------------------------------------------------------------------------------------
// Copies: operands into K-major dense temps, scales into cuBLASLt's layout, the output back into its view
// ------------------------------------------------------------------------------------------------

#define DG_LT_FP8_MAX_LETTERS 16

// A strided walk over letters, outer -> inner, in dense row-major order of their sizes: element i of the walk is at
// sum_l index_l * stride[l]. Gathers and scatters move raw bits, one instantiation per element size.
struct DgLtFp8Walk {
  int n;
  long long size[DG_LT_FP8_MAX_LETTERS];
  long long stride[DG_LT_FP8_MAX_LETTERS];
};

__device__ inline long long dg_lt_fp8_walk_offset(const DgLtFp8Walk& w, long long i) {
  long long off = 0;
  for (int d = w.n - 1; d >= 0; --d) {
    off += (i % w.size[d]) * w.stride[d];
    i /= w.size[d];
  }
  return off;
}

template <typename Bits>
__global__ void dg_lt_fp8_gather_kernel(const Bits* __restrict__ src, DgLtFp8Walk w, Bits* __restrict__ dense,
                                        long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    dense[i] = src[dg_lt_fp8_walk_offset(w, i)];
}

template <typename Bits>
__global__ void dg_lt_fp8_scatter_kernel(const Bits* __restrict__ dense, DgLtFp8Walk w, Bits* __restrict__ dst,
                                         long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    dst[dg_lt_fp8_walk_offset(w, i)] = dense[i];
}

// Where the spec's scale of one operand element lives: the operand's outer letters then its K letters (outer ->
// inner, the order of the dense temp's rows and k), each with its size, its block and its stride in the scale view.
struct DgLtFp8ScaleSource {
  int nouter, nk;
  long long size[DG_LT_FP8_MAX_LETTERS];
  long long block[DG_LT_FP8_MAX_LETTERS];
  long long stride[DG_LT_FP8_MAX_LETTERS];
};

__device__ inline long long dg_lt_fp8_scale_offset(const DgLtFp8ScaleSource& s, int first, int count, long long i) {
  long long off = 0;
  for (int d = first + count - 1; d >= first; --d) {
    off += (i % s.size[d]) / s.block[d] * s.stride[d];
    i /= s.size[d];
  }
  return off;
}

// Fills cuBLASLt's scale tensor of an operand (outer x k, `mode`): each element takes the spec's scale at the first
// element of the region it covers; BLK128x128's padding along Kb is 1.
__global__ void dg_lt_fp8_scale_kernel(const float* __restrict__ src, DgLtFp8ScaleSource s, int mode, long long outer,
                                       long long k, float* __restrict__ dst, long long n) {
  const long long kb = (k + 127) / 128, kb_pad = (kb + 3) / 4 * 4;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    long long o0 = 0, k0 = 0;
    if (mode == DG_LT_FP8_OUTER_VEC) {
      o0 = i;
    } else if (mode == DG_LT_FP8_VEC128) {
      o0 = i % outer;
      k0 = i / outer * 128;
    } else if (mode == DG_LT_FP8_BLK128x128) {
      if (i % kb_pad >= kb) {
        dst[i] = 1.0f;
        continue;
      }
      o0 = i / kb_pad * 128;
      k0 = i % kb_pad * 128;
    }
    dst[i] = src[dg_lt_fp8_scale_offset(s, 0, s.nouter, o0) + dg_lt_fp8_scale_offset(s, s.nouter, s.nk, k0)];
  }
}

static inline unsigned dg_lt_fp8_grid(long long n) {
  return static_cast<unsigned>(std::max(1LL, std::min(dg_lt_fp8_ceil(n, 256), 65535LL * 4)));
}

// ------------------------------------------------------------------------------------------------
// The bench's alternatives: DgCublasLtFp8Alternative (cuBLASLt FP8 with scales) and, beside it, dg_cublaslt.cuh's
// DgCublasLtDense in bf16 (cuBLASLt on the same shape: what a user without FP8 runs), both over dg_harness.cuh's DgAltBaseline (Base)
// and DgProblem (Problem), as templates so that this header builds alone.
// ------------------------------------------------------------------------------------------------

// The slots, as dg_harness.cuh numbers them (the scale views' slots come with its e4m3 support: DG_A_SCALES = 7,
// DG_B_SCALES = 8; until then a problem has no buffer there, and bufs[] stops at DG_SLOTS).
static constexpr int DG_LT_FP8_SLOT_A = 0, DG_LT_FP8_SLOT_B = 1, DG_LT_FP8_SLOT_C = 2, DG_LT_FP8_SLOT_D = 3,
                     DG_LT_FP8_SLOT_A_SCALES = 7, DG_LT_FP8_SLOT_B_SCALES = 8;

// One letter of the problem as the scales see it (baseline.fp8_alternative renders these): the block each input's
// scale covers along it (0: the input lacks the letter; -1: the whole extent), and its stride in each scale view.
struct DgLtFp8Letter {
  char letter;
  long long block_a, block_b;
  long long stride_a_scales, stride_b_scales;
};

// One pair of cuBLASLt scale modes to try, in the spec's terms (A's, B's), and how bench names it.
struct DgLtFp8Candidate {
  int mode_a, mode_b;        // DG_LT_FP8_*
  const char* label;         // e.g. "A scales VEC128_32F (1x128), B scales BLK128x128_32F (128x128): the spec's modes"
};

// The scale views' element offsets (DgProblem has them once its scale slots exist; until then Python gives them).
struct DgLtFp8Scales {
  long long offset_a, offset_b;
};

// cuBLASLt FP8 with the spec's scales, or the nearest modes it has. A generated harness constructs one as
//   DgCublasLtFp8Alternative<DgAltBaseline, DgProblem> alternative({DgLtFp8Letter...}, {DgLtFp8Candidate...},
//                                                                 DgLtFp8Scales{...});
// prepare() works out the TN product from the problem's views (which role is cuBLASLt's rows: the one contiguous in
// the output; which operands are K-major matrices as they are and which need a dense copy; whether the output is a
// matrix or a dense temp scattered back), allocates the temps and scale tensors once for the size, and tries the
// candidates in order until cuBLASLt's heuristic takes one. run() = the copies that depend on the inputs (operand
// gathers, scale copies), one cublasLtMatmul, the output's scatter where it has one.
// alpha and beta: cuBLASLt applies both where the output is C (read in place, or through the temp when the output
// is scattered). With D, cuBLASLt writes alpha * A.B into D and beta * C is left out; the spec's epilogue steps are
// not run either: bench compares speed, and formulation() says what was left out.
template <class Base, class Problem>
class DgCublasLtFp8Alternative : public Base {
 public:
  DgCublasLtFp8Alternative(std::vector<DgLtFp8Letter> letters, std::vector<DgLtFp8Candidate> candidates,
                           DgLtFp8Scales scales)
      : letters_(std::move(letters)), candidates_(std::move(candidates)), scales_(scales) {}
  DgCublasLtFp8Alternative(const DgCublasLtFp8Alternative&) = delete;
  DgCublasLtFp8Alternative& operator=(const DgCublasLtFp8Alternative&) = delete;
  ~DgCublasLtFp8Alternative() override {
    release();
    dg_lt_close(api_, handle_);
  }

  const char* epilogue() const override { return name_.c_str(); }
  std::string formulation() const override { return formulation_; }
  Base* beside() override { return &bf16_; }

  std::string prepare(const Problem& p, cudaStream_t stream) override {
    release();
    if (candidates_.empty()) return "no scale modes to try";
    if (!handle_) {
      const std::string why = dg_lt_open(&api_, &handle_);
      if (!why.empty()) return why;
      name_ += " (" + dg_lt_version(api_) + ")";
    }
    std::string why = layout(p);
    if (!why.empty()) return why;
    alpha_ = p.alpha;
    // C is read in place (the output is C) or not at all: with D, beta * C would be another view of cuBLASLt's C.
    beta_ = p.present[DG_LT_FP8_SLOT_D] ? 0.0f : p.beta;
    const bool beta_dropped = p.present[DG_LT_FP8_SLOT_D] && p.beta != 0.0f;
    bf16_.shape(call_.rows, call_.cols, call_.k, DG_LT_BF16, out_dtype_);
    // Temps: the operands that are not K-major matrices, the output when it is not a matrix, the scale tensors.
    const size_t out_elem = dg_lt_elem_bytes(out_dtype_);
    if ((gather_[0] && !alloc(&temp_[0], static_cast<size_t>(call_.rows * call_.k))) ||
        (gather_[1] && !alloc(&temp_[1], static_cast<size_t>(call_.cols * call_.k))) ||
        (scatter_ && !alloc(&temp_out_, static_cast<size_t>(call_.rows * call_.cols) * out_elem)) ||
        !alloc(&workspace_, kWorkspace))
      return "cannot allocate the FP8 baseline's temps";
    std::string first_refusal;
    for (const DgLtFp8Candidate& cand : candidates_) {
      // In cuBLASLt's terms X holds the rows' operand: A, or B when the rows are n.
      call_.mode_x = swap_ ? cand.mode_b : cand.mode_a;
      call_.mode_y = swap_ ? cand.mode_a : cand.mode_b;
      const long long nx = dg_lt_fp8_scale_count(call_.mode_x, call_.rows, call_.k);
      const long long ny = dg_lt_fp8_scale_count(call_.mode_y, call_.cols, call_.k);
      free_scales();
      if (!alloc(reinterpret_cast<void**>(&scale_[0]), nx * sizeof(float)) ||
          !alloc(reinterpret_cast<void**>(&scale_[1]), ny * sizeof(float)))
        return "cannot allocate the scale tensors";
      scale_count_[0] = nx;
      scale_count_[1] = ny;
      DgLtFp8Pointers sample = pointers_for_alignment();
      const std::string w = dg_lt_fp8_prepare(api_, handle_, call_, sample, kWorkspace, &plan_);
      if (w.empty()) {
        formulation_ = std::string("cublasLt fp8 e4m3 TN, ") + cand.label + "; " + shape_desc_ +
                       (p.nsteps ? "; the epilogue's steps not run" : "") +
                       (beta_dropped ? "; beta * C not added (D is its own view)" : "");
        (void)stream;
        return std::string();
      }
      if (first_refusal.empty()) first_refusal = cand.label + std::string(": ") + w;
    }
    return "cuBLASLt runs none of the scale modes tried (first: " + first_refusal + ")";
  }

  std::string run(void* const* bufs, cudaStream_t stream) override {
    if (!plan_.ready) return "not prepared";
    const char* base[2] = {static_cast<const char*>(bufs[DG_LT_FP8_SLOT_A]), static_cast<const char*>(bufs[DG_LT_FP8_SLOT_B])};
    const float* sbase[2] = {static_cast<const float*>(bufs[DG_LT_FP8_SLOT_A_SCALES]),
                             static_cast<const float*>(bufs[DG_LT_FP8_SLOT_B_SCALES])};
    char* out = static_cast<char*>(bufs[out_slot_]);
    if (!base[0] || !base[1] || !sbase[0] || !sbase[1] || !out) return "a buffer is missing";
    out += out_offset_ * dg_lt_elem_bytes(out_dtype_);
    const void* operand[2];
    for (int i = 0; i < 2; ++i) {  // i = 0: A, 1: B
      const char* view = base[i] + offset_[i];
      const long long n = i == 0 ? (swap_ ? call_.cols : call_.rows) * call_.k : (swap_ ? call_.rows : call_.cols) * call_.k;
      if (gather_[i]) {
        dg_lt_fp8_gather_kernel<<<dg_lt_fp8_grid(n), 256, 0, stream>>>(reinterpret_cast<const uint8_t*>(view), walk_[i],
                                                                      static_cast<uint8_t*>(temp_[i]), n);
        operand[i] = temp_[i];
      } else {
        operand[i] = view;
      }
      const int j = (i == 0) == !swap_ ? 0 : 1;   // A's scale tensor is X's unless swapped
      const long long outer = j == 0 ? call_.rows : call_.cols;
      const int mode = j == 0 ? call_.mode_x : call_.mode_y;
      dg_lt_fp8_scale_kernel<<<dg_lt_fp8_grid(scale_count_[j]), 256, 0, stream>>>(
          sbase[i] + (i == 0 ? scales_.offset_a : scales_.offset_b), source_[i], mode, outer, call_.k, scale_[j],
          scale_count_[j]);
    }
    if (cudaGetLastError() != cudaSuccess) return "a copy kernel failed to launch";
    void* d = scatter_ ? temp_out_ : out;
    if (scatter_ && beta_ != 0.0f) launch_out(out, false, stream);   // the temp starts as C for beta
    DgLtFp8Pointers p{swap_ ? operand[1] : operand[0], swap_ ? operand[0] : operand[1], d, d,
                      scale_[0], scale_[1]};
    std::string why = dg_lt_fp8_run(api_, handle_, &plan_, call_, p, alpha_, beta_, workspace_, kWorkspace, stream);
    if (why.empty() && scatter_) launch_out(out, true, stream);
    if (why.empty() && cudaGetLastError() != cudaSuccess) why = "the output's scatter failed to launch";
    return why;
  }

 private:
  static constexpr size_t kWorkspace = size_t(32) << 20;

  struct Letter {
    int dim;            // index into the problem's dims
    long long size;
  };

  // The letters of `role` with size > 1, ordered by descending stride in `slot`.
  static std::vector<Letter> role_letters(const Problem& p, int role, int slot) {
    std::vector<Letter> out;
    for (int d = 0; d < p.ndims; ++d)
      if (p.dims[d].role == role && p.dims[d].size > 1) out.push_back({d, p.dims[d].size});
    std::stable_sort(out.begin(), out.end(), [&](const Letter& a, const Letter& b) {
      return p.dims[a.dim].stride[slot] > p.dims[b.dim].stride[slot];
    });
    return out;
  }

  static long long extent(const std::vector<Letter>& ls) {
    long long n = 1;
    for (const Letter& l : ls) n *= l.size;
    return n;
  }

  // The stride of one step of the index over `ls` (outer -> inner) in `slot` if the letters chain there, else -1;
  // 1 for no letters.
  static long long chained(const Problem& p, const std::vector<Letter>& ls, int slot) {
    if (ls.empty()) return 1;
    for (size_t i = 0; i + 1 < ls.size(); ++i)
      if (p.dims[ls[i].dim].stride[slot] != p.dims[ls[i + 1].dim].stride[slot] * ls[i + 1].size) return -1;
    return p.dims[ls.back().dim].stride[slot];
  }

  // Works out the TN product of problem p (see the class comment). Returns "" or why not.
  std::string layout(const Problem& p) {
    out_slot_ = p.present[DG_LT_FP8_SLOT_D] ? DG_LT_FP8_SLOT_D : DG_LT_FP8_SLOT_C;
    out_dtype_ = p.dtype[out_slot_];
    out_offset_ = p.offset[out_slot_];
    for (int d = 0; d < p.ndims; ++d)
      if (p.dims[d].role == 0 && p.dims[d].size > 1) return "a batch: cuBLASLt's FP8 scales have no batch stride";
    const std::vector<Letter> m = role_letters(p, DG_LT_ROLE_M, out_slot_);
    const std::vector<Letter> n = role_letters(p, DG_LT_ROLE_N, out_slot_);
    const std::vector<Letter> k = role_letters(p, DG_LT_ROLE_K, DG_LT_FP8_SLOT_A);
    // cuBLASLt's rows: the role whose innermost letter is contiguous in the output (n for a row-major C).
    swap_ = !n.empty() && p.dims[n.back().dim].stride[out_slot_] == 1;
    const std::vector<Letter>& rows = swap_ ? n : m;
    const std::vector<Letter>& cols = swap_ ? m : n;
    call_ = DgLtFp8Call{extent(rows), extent(cols), extent(k), 0, 0, 0, 0, 0, 0, out_dtype_, 1};
    const long long row_step = chained(p, rows, out_slot_), col_step = chained(p, cols, out_slot_);
    scatter_ = !(row_step == 1 && (cols.empty() || col_step >= call_.rows));
    call_.ldd = scatter_ || cols.empty() ? call_.rows : col_step;
    call_.ldc = call_.ldd;
    if (scatter_) {  // the temp is column-major rows x cols: a walk over (cols, rows), rows innermost
      out_walk_.n = 0;
      for (const std::vector<Letter>* ls : {&cols, &rows})
        for (const Letter& l : *ls) push(&out_walk_, l.size, p.dims[l.dim].stride[out_slot_]);
      if (out_walk_.n == 0) push(&out_walk_, 1, 1);
    }
    // Each operand as a K-major matrix (outer letters, then K): as it is where its strides chain so, else a dense copy.
    const int slots[2] = {DG_LT_FP8_SLOT_A, DG_LT_FP8_SLOT_B};
    for (int i = 0; i < 2; ++i) {
      const std::vector<Letter>& outer = i == 0 ? m : n;
      const int x = slots[i];
      offset_[i] = p.offset[x];   // e4m3: one byte an element
      const long long k_step = chained(p, k, x), outer_step = chained(p, outer, x);
      const long long ld = outer.empty() ? call_.k : outer_step;
      gather_[i] = !(k_step == 1 && outer_step > 0 && ld >= call_.k && ld % 16 == 0 && p.offset[x] % 16 == 0);
      walk_[i].n = 0;
      for (const std::vector<Letter>* ls : {&outer, &k})
        for (const Letter& l : *ls) push(&walk_[i], l.size, p.dims[l.dim].stride[x]);
      if (walk_[i].n == 0) push(&walk_[i], 1, 1);
      if ((i == 0) == !swap_) call_.ldx = gather_[i] ? call_.k : ld;
      else call_.ldy = gather_[i] ? call_.k : ld;
      // The spec's scales of this operand, walked in the same letter order.
      DgLtFp8ScaleSource& s = source_[i];
      s.nouter = s.nk = 0;
      int at = 0;
      for (const std::vector<Letter>* ls : {&outer, &k}) {
        for (const Letter& l : *ls) {
          const DgLtFp8Letter* info = find(p.dims[l.dim].letter);
          const long long block = !info ? -1 : (i == 0 ? info->block_a : info->block_b);
          if (at >= DG_LT_FP8_MAX_LETTERS) return "too many letters";
          s.size[at] = l.size;
          s.block[at] = block <= 0 ? l.size : block;
          s.stride[at] = !info ? 0 : (i == 0 ? info->stride_a_scales : info->stride_b_scales);
          ++at;
          (ls == &outer ? s.nouter : s.nk) += 1;
        }
      }
    }
    shape_desc_ = std::string(swap_ ? "D^T=B^TA" : "D=A^TB") + " rows=" + std::to_string(call_.rows) + " cols=" +
                  std::to_string(call_.cols) + " k=" + std::to_string(call_.k) +
                  (gather_[0] || gather_[1] || scatter_ ? " with dense copies of" : "") + (gather_[0] ? " A" : "") +
                  (gather_[1] ? " B" : "") + (scatter_ ? " the output" : "");
    if (call_.rows > INT32_MAX || call_.cols > INT32_MAX || call_.k > INT32_MAX) return "a size exceeds cuBLASLt's int";
    return std::string();
  }

  static void push(DgLtFp8Walk* w, long long size, long long stride) {
    if (w->n < DG_LT_FP8_MAX_LETTERS) {
      w->size[w->n] = size;
      w->stride[w->n] = stride;
      ++w->n;
    }
  }

  const DgLtFp8Letter* find(char letter) const {
    for (const DgLtFp8Letter& l : letters_)
      if (l.letter == letter) return &l;
    return nullptr;
  }

  // Pointers as aligned as the run's will be: temps from cudaMalloc (256 bytes), views at their offsets.
  DgLtFp8Pointers pointers_for_alignment() const {
    auto at = [](long long offset_bytes) {
      return reinterpret_cast<void*>(static_cast<uintptr_t>(4096u * 256u) + static_cast<uintptr_t>(offset_bytes % 256));
    };
    const void* a = gather_[0] ? temp_[0] : at(offset_[0]);
    const void* b = gather_[1] ? temp_[1] : at(offset_[1]);
    void* d = scatter_ ? temp_out_ : at(out_offset_ * dg_lt_elem_bytes(out_dtype_));
    return DgLtFp8Pointers{swap_ ? b : a, swap_ ? a : b, d, d, scale_[0], scale_[1]};
  }

  void launch_out(char* out, bool scatter, cudaStream_t stream) const {
    const long long n = call_.rows * call_.cols;
    if (dg_lt_elem_bytes(out_dtype_) == 4) {
      if (scatter)
        dg_lt_fp8_scatter_kernel<<<dg_lt_fp8_grid(n), 256, 0, stream>>>(static_cast<const uint32_t*>(temp_out_), out_walk_,
                                                                        reinterpret_cast<uint32_t*>(out), n);
      else
        dg_lt_fp8_gather_kernel<<<dg_lt_fp8_grid(n), 256, 0, stream>>>(reinterpret_cast<const uint32_t*>(out), out_walk_,
                                                                       static_cast<uint32_t*>(temp_out_), n);
    } else {
      if (scatter)
        dg_lt_fp8_scatter_kernel<<<dg_lt_fp8_grid(n), 256, 0, stream>>>(static_cast<const uint16_t*>(temp_out_), out_walk_,
                                                                        reinterpret_cast<uint16_t*>(out), n);
      else
        dg_lt_fp8_gather_kernel<<<dg_lt_fp8_grid(n), 256, 0, stream>>>(reinterpret_cast<const uint16_t*>(out), out_walk_,
                                                                       static_cast<uint16_t*>(temp_out_), n);
    }
  }

  static bool alloc(void** p, size_t bytes) {
    if (cudaMalloc(p, std::max<size_t>(bytes, 256)) != cudaSuccess) {
      *p = nullptr;
      cudaGetLastError();
      return false;
    }
    return true;
  }

  void free_scales() {
    for (float*& s : scale_) {
      if (s) cudaFree(s);
      s = nullptr;
    }
  }

  void release() {
    dg_lt_destroy(api_, &plan_);
    free_scales();
    for (void** p : {&temp_[0], &temp_[1], &temp_out_, &workspace_}) {
      if (*p) cudaFree(*p);
      *p = nullptr;
    }
  }

  std::vector<DgLtFp8Letter> letters_;
  std::vector<DgLtFp8Candidate> candidates_;
  DgLtFp8Scales scales_;
  std::string name_ = "cublaslt:fp8";
  std::string formulation_, shape_desc_;
  DgLtApi api_;
  void* handle_ = nullptr;
  DgLtPlan plan_;
  DgLtFp8Call call_{};
  bool swap_ = false, scatter_ = false, gather_[2] = {false, false};
  DgLtFp8Walk walk_[2]{}, out_walk_{};
  DgLtFp8ScaleSource source_[2]{};
  long long offset_[2] = {0, 0}, out_offset_ = 0;
  int out_slot_ = DG_LT_FP8_SLOT_C, out_dtype_ = DG_LT_BF16;
  void *temp_[2] = {nullptr, nullptr}, *temp_out_ = nullptr, *workspace_ = nullptr;
  float* scale_[2] = {nullptr, nullptr};
  long long scale_count_[2] = {0, 0};
  float alpha_ = 1.0f, beta_ = 0.0f;
  DgCublasLtDense<Base, Problem> bf16_;
};
