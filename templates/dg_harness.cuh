// dg_harness.cuh -- the verification and benchmark driver shared by every generated kernel.
//
// It is copied verbatim next to each generated kernel. The generated <name>_harness.cu includes the
// kernel's header and this file, defines `kProblem`, `kBaseline` and a `launch` wrapper, and hands them
// to dg_harness_main(). Build: nvcc -std=c++17 ... <name>_harness.cu <name>.cu -ldl (cudart and libdl
// only: cuBLAS is dlopen'ed at run time, so the harness builds and runs without it).
//
// Slots: the buffers a problem may have, in the C API's order: A, B, C, then D (the output view, when it
// is not C), bias, scale and residual (DG_A .. DG_RESIDUAL), then A_scales and B_scales, the f32 scales of e4m3
// inputs (present exactly when A, respectively B, is e4m3). Every per-operand array below has one entry a
// slot; a slot the problem lacks has present 0 and zero strides, offset, span, dtype and align.
//
// Aggregate-initializer field order (Python renders these positionally -- keep in sync). The fields
// after `|` describe a run-time size; a fixed-size problem leaves them out (zero):
//   DgDim         { letter, role, size, {stride per slot: A, B, C, D, bias, scale, residual, A_scales, B_scales},
//                   {block: A_scales, B_scales} }      (a problem without scales leaves the blocks out: zero)
//   DgStep        { text, kind, activation, lo, hi }
//   DgProblem     { name, arch, ndims, {DgDim...}, nc, {present per slot}, {offset per slot}, {span per slot},
//                   {dtype per slot}, {align per slot}, alpha, beta, tol, nsteps, {DgStep...} | run_time_letter,
//                   run_time_lo, nedges, edges }
//   DgStridedView { ndims, {size...}, {stride...} | scaled }
//   DgGemmCall    { desc, swap, trans_x, trans_y, m, n, k, ldx, ldy, ldc, stride_x, stride_y, stride_c, batch
//                   | scaled, npointer_dims, {DgPointerDim...} }   (a strided-batched call leaves the last two out)
//   DgPointerDim  { size, stride_x, stride_y, stride_c, scaled }
//   DgBaseline    { available, kind, {copy A, B, out}, {view A, view B, view out}, ncalls, {DgGemmCall...},
//                   epilogue }      (out: the GEMM's output, D when the problem has one, else C)
//
// Pointer convention: `launch` receives the BASE pointers of the buffers, indexed by slot (nullptr for a
// slot the problem lacks), and passes them in the entry point's order: A, B, C, [D], [bias], [scale], [residual],
// [A_scales, B_scales], [m], alpha, beta, stream. The kernel applies DgProblem::offset itself (the scales'
// too), exactly as the element-address formula below says. `align` is what the caller promises for those base
// pointers.
//
// Run-time size: a problem may size one of C's row letters (role M, not in B) at run time, m in
// [run_time_lo, its size]: the dims, spans and kBaseline describe the largest m, and `launch` then
// takes m (DgLaunchRunTimeFn) and must return cudaErrorInvalidValue outside that range. The problem at
// size m is the same views with that letter's size m (no stride depends on it); verify and bench run
// a list of sizes on buffers allocated once for the largest, and the rows past m are holes of the output.
//
// Semantics checked, for each element c of the output's letters (C's):
//   t = alpha * sum over the K letters of A[..] * B[..] + beta * C_old[c]   (C not read at all when beta == 0)
// and with e4m3 inputs each factor times its scale: A[..] * A_scales[..] and B[..] * B_scales[..], both in double
// (docs/design/fp8.md: sa[m / bm, k / bk] for DeepGEMM's blocks)
// then each step in order: bias: t += bias[c]; scale: t *= scale[c]; residual: t += residual[c];
// activation: t = f(t) (docs/design/epilogue.md's formulas; relu(t) = t < 0 ? 0 : t); clamp: t = t < lo ? lo :
// (t > hi ? hi : t) -- NaN stays NaN through every one. t is written to D[c] when the problem has D (C is
// then only read, and may be null when beta == 0), else to C[c]. The element address of slot X for a
// full letter assignment idx is
//   offset[X] + sum_d idx_d * dims[d].stride[X],
// so a bias or scale (stride 0 on the letters it lacks) is broadcast over those; a scale slot's is
//   offset[X] + sum_d (idx_d / dims[d].block[X - DG_A_SCALES]) * dims[d].stride[X]   (a block of 0 reads as 1),
// its strides per block, and its element of A (or B) the one of the block holding the element's indices.
//
// Command line (exactly one JSON object on stdout, always; diagnostics on stderr):
//   <harness> verify [--seeds 1,2,3] [--samples 256] [--repeat 0] [--m LIST]    exit 0 pass, 1 fail
//     --repeat N: N more launches on the first seed's data; the output's buffer must come out bit-identical
//     Every case launches the kernel right behind one that writes all its buffers (dg_restore_after_idle_kernel):
//     a programmatic dependent launch that touches memory before its griddepcontrol.wait fails.
//   <harness> bench  [--warmup 10] [--reps 50] [--baseline 0|1] [--roof 0|1] [--m LIST]   exit 0
//     --m 1,8,64: the run-time sizes to run (only for a problem with one; default: dg_verify_sizes,
//     dg_bench_sizes)
//     --roof 1: also the compute roof (dg_measure_roof): cuBLAS on a large square GEMM of the inputs' dtype, timed
//     the same way in the same run, as "roof_tflops" and "roof_gemm" (what ran, or "unavailable: why"); both null
//     without it
//     With the baseline, each size runs ours, the baseline's candidates, the candidates in reverse, ours; the
//     times reported are each side's mean, its passes in "us_passes" / "baseline_us_passes" (and each
//     candidate's "us_passes"). With --baseline 0 ours runs once.
//   exit 2 bad command line, 3 no CUDA GPU, 4 any CUDA error (or an inconsistent kProblem/kBaseline).
// Non-finite numbers are written as the strings "nan", "inf" and "-inf" (Python's float() reads them).
// verify reports for every case (each of "runs"), each run-time size ("m_cases") and at the top level (the worst)
// "max_abs_err", "rel_err" (||kernel - reference|| / ||reference||, Frobenius) and "calc_diff", DeepGEMM's
// metric 1 - 2 sum(x y) / sum(x^2 + y^2) over the output (x the kernel's, y the reference's; elements whose
// reference is NaN left out, as from the norms). A case passes when every element is within its bound and rel_err
// within tol (or the sum's float32 evaluation bound); with e4m3 inputs also only when calc_diff < 1e-3
// (kDgFp8MaxCalcDiff), so never with NaN.
// Both commands report "dtype" (the inputs' dtype: f32, f16, bf16 or e4m3), "output" ("C" or "D") and "epilogue" (the steps as text, e.g. ["bias[n]", "gelu_tanh"]);
// bench reports "baseline_epilogue": how the baseline applied the epilogue ("elementwise": the harness's
// kernel after cuBLAS; an alternative's name when that was faster; null without one).
// bench's "baseline" names what the fastest candidate ran: "cublas" (a strided-batched call on the views),
// "copy+cublas" (one over dense temps, the copies timed with it), "cublas-ptr-array" (a pointer-array call on the
// views), or an alternative's name; when none ran, "unavailable: " and why.
//
// A problem with a run-time size reports everything a fixed-size one does, plus
//   "dynamic": {"letter", "lo", "hi"}, and each run and first_fail names its "m";
//   verify: "api_m_rejected" (every size outside [lo, hi] was refused), "api_m_probes": [{"m", "rejected"}],
//     "m_cases": [{"m", "passed", "max_abs_err", "rel_err", "calc_diff", "first_fail", "repeat_differed"}]; the
//     top-level passed is the AND of all of it, max_abs_err / rel_err / calc_diff the worst size's, repeat_differed
//     the sum;
//   bench: "m_rows": [{"m", and the per-size fields below}], with the largest size's row also at the top
//     level ("m" says which): us, tflops, gbps, us_stream, us_passes, baseline, baseline_formulation,
//     baseline_epilogue, baseline_us, baseline_tflops, baseline_us_stream, baseline_us_passes, ratio,
//     baseline_candidates.
// An e4m3 problem's bench (whose baseline is cuBLASLt FP8, dg_cublaslt_fp8.cuh) also reports bf16 cuBLASLt on the
// same shape beside it, never a candidate: "bf16_baseline" (its formulation, or "unavailable: why"),
// "bf16_baseline_us", "bf16_baseline_tflops" and "bf16_ratio" (bf16_baseline_us / us), per size where m_rows are.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#define DG_MAX_DIMS 16
// The reports' layout (records.py: HARNESS_SCHEMA_VERSION): a change a reader must know of raises it.
#define DG_REPORT_SCHEMA_VERSION 1
#define DG_MAX_STEPS 16
enum { DG_F32 = 0, DG_F16 = 1, DG_BF16 = 2, DG_E4M3 = 3, DG_INT8 = 4, DG_UINT8 = 5, DG_INT4 = 6, DG_UINT4 = 7 };
static const char* const kDgDtypeNames[8] = {"f32", "f16", "bf16", "e4m3", "int8", "uint8", "int4", "uint4"};   // the spec's names, by DG_* dtype
// The integer weight types (B and its zero points; docs/design/weight-only.md); the 4-bit ones are 32-bit words.
__host__ __device__ inline bool dg_int_dtype(int dtype) { return dtype >= DG_INT8; }
enum { DG_BATCH = 0, DG_M = 1, DG_N = 2, DG_K = 3 };
// The slots, in the C API's order.
enum {
  DG_A = 0, DG_B = 1, DG_C = 2, DG_D = 3, DG_BIAS = 4, DG_SCALE = 5, DG_RESIDUAL = 6, DG_A_SCALES = 7, DG_B_SCALES = 8,
  DG_B_ZEROS = 9, DG_SLOTS = 10
};
static const char* const kDgSlotNames[DG_SLOTS] = {"A", "B", "C", "D", "bias", "scale", "residual", "A_scales",
                                                   "B_scales", "B_zeros"};
// The scale slots: A_scales scales A, B_scales B; B_zeros, integer weights' zero points, has B_scales' blocks.
// DgDim::block's index of scale slot x is x - DG_A_SCALES (B_zeros: B_scales').
__host__ __device__ inline bool dg_is_scale_slot(int x) { return x == DG_A_SCALES || x == DG_B_SCALES || x == DG_B_ZEROS; }
__host__ __device__ inline int dg_block_index(int x) { return x == DG_A_SCALES ? 0 : 1; }
// How a 4-bit view's words hold its values (DgProblem::pack): eight of the packed letter a word, value j of a word in
// nibble j (LINEAR) or in the nibble AWQ's order puts it (AWQ: nibble i holds value 0 2 4 6 1 3 5 7 [i]); DG: the
// tiled layout of `deepgemm pack` (docs/design/weight-only.md). Zero points are subtracted (w = (q - z) s) or
// prescaled (w = q s - z).
enum { DG_PACK_NONE = 0, DG_PACK_LINEAR = 1, DG_PACK_AWQ = 2, DG_PACK_DG = 3 };
enum { DG_ZEROS_SUBTRACT = 0, DG_ZEROS_PRESCALED = 1 };
enum { DG_STEP_BIAS = 0, DG_STEP_SCALE = 1, DG_STEP_RESIDUAL = 2, DG_STEP_ACTIVATION = 3, DG_STEP_CLAMP = 4 };
enum { DG_RELU = 1, DG_GELU_TANH = 2, DG_GELU_ERF = 3, DG_SILU = 4, DG_SIGMOID = 5, DG_TANH = 6 };

struct DgDim {
  char letter;
  int role;                 // DG_BATCH, DG_M, DG_N or DG_K
  long long size;
  long long stride[DG_SLOTS];   // element stride of this letter in each slot; 0 where the slot has no such letter (or broadcasts it)
  // How many consecutive indices of this letter one scale covers, in A_scales and B_scales (0 reads as 1): the
  // scale slot's index along the letter is index / block, and its stride is per block.
  long long block[2];
};

// The block of `dim` in slot x: 1 for every slot but the scale slots, and for a scale slot's block 0.
__host__ __device__ inline long long dg_block(const DgDim& dim, int x) {
  if (!dg_is_scale_slot(x)) return 1;
  const long long b = dim.block[dg_block_index(x)];
  return b > 0 ? b : 1;
}

// How many distinct indices slot x has along `dim`: the size, or for a scale slot the number of blocks.
__host__ __device__ inline long long dg_extent(const DgDim& dim, int x) {
  const long long b = dg_block(dim, x);
  return (dim.size + b - 1) / b;
}

// One epilogue step. The bias / scale / residual steps read their slot's view.
struct DgStep {
  const char* text;         // as the JSON reports it, e.g. "bias[n]", "gelu_tanh", "clamp[-1.0, 1.0]"
  int kind;                 // DG_STEP_*
  int activation;           // DG_RELU .. DG_TANH, for DG_STEP_ACTIVATION; else 0
  float lo, hi;             // the bounds of DG_STEP_CLAMP (lo <= hi, as the kernel compares in float32)
};

struct DgProblem {
  const char* name;
  const char* arch;          // "sm_90a"
  int ndims;
  DgDim dims[DG_MAX_DIMS];   // C's letters first, in C's order, then the summed (K) letters
  int nc;                    // how many leading dims are C's letters
  int present[DG_SLOTS];     // 1: the problem has this buffer (A, B and C always)
  long long offset[DG_SLOTS];   // element offset of each view into its buffer
  long long span[DG_SLOTS];  // elements each buffer must hold: offset + max reachable index + 1
  int dtype[DG_SLOTS];       // DG_F32 / DG_F16 / DG_BF16; DG_E4M3 for A and B (then their scale slots are present)
  int align[DG_SLOTS];       // bytes the caller promises for each base pointer (power of two, >= element size)
  float alpha, beta;         // the spec's values
  double tol;                // relative Frobenius tolerance
  int nsteps;                // the epilogue, applied in order (0: a plain product)
  DgStep steps[DG_MAX_STEPS];
  // A run-time size (all zero for a fixed-size problem): the letter's dim holds its largest size.
  char run_time_letter;      // one of C's letters of role DG_M, not in B
  long long run_time_lo;     // its smallest size
  int nedges;                // the kernel's buckets of the size: each one's first and last, ascending
  const long long* edges;
  // Integer weights (all zero otherwise): how B's and B_zeros' 4-bit words hold their values (DG_PACK_*), the dim
  // of the packed letter (for DG_PACK_DG: B's k letter, then its n letter), and the zero points' form.
  int pack[DG_SLOTS];
  int pack_dims[DG_SLOTS][2];
  int zero_form;
};

// The slot the kernel writes: D when the problem has one, else C.
__host__ __device__ inline int dg_out_slot(const DgProblem& p) { return p.present[DG_D] ? DG_D : DG_C; }

// Whether the problem's inputs are e4m3 (with their scales).
inline bool dg_fp8_inputs(const DgProblem& p) { return p.dtype[DG_A] == DG_E4M3 || p.dtype[DG_B] == DG_E4M3; }
// Whether B is integer weights (with their scales, and maybe zero points).
__host__ __device__ inline bool dg_int_weights(const DgProblem& p) { return dg_int_dtype(p.dtype[DG_B]); }

struct DgStridedView {       // an operand's view, in the order of its dense row-major temp (e.g. batch, rows, cols)
  int ndims;
  long long size[DG_MAX_DIMS];
  long long stride[DG_MAX_DIMS];   // element strides into the operand's buffer (offset applied separately from DgProblem::offset)
  unsigned scaled;           // bit d: size[d] is proportional to the run-time size (given for the largest)
};

// DgGemmCall::scaled bits: the fields proportional to the run-time size (given for the largest). A
// leading dimension never is; a batch stride is for a dense temp (batch x m x cols).
enum {
  DG_SCALE_M = 1, DG_SCALE_N = 2, DG_SCALE_K = 4, DG_SCALE_BATCH = 8,
  DG_SCALE_STRIDE_X = 16, DG_SCALE_STRIDE_Y = 32, DG_SCALE_STRIDE_C = 64,
};

// One batch segment of a pointer-array call: its size and element strides in X, Y and the GEMM's output.
struct DgPointerDim {
  long long size;
  long long stride_x, stride_y, stride_c;
  int scaled;                // 1: size is proportional to the run-time size (given for the largest)
};

// One cublasGemmStridedBatchedEx call, column-major: Cmat(m x n, ldc) = op(X)(m x k) * op(Y)(k x n). Its
// Cmat is the problem's output view: D when the problem has one (written with beta 0), else C.
// With npointer_dims > 0 it is one cublasGemmBatchedEx call instead: matrix i of X, Y and Cmat starts at the
// view's first element plus, for i's index in each of pointer_dims (row-major over them, outermost first), that
// index times the dim's stride; batch is the product of their sizes, the batch strides are 0, and the call takes
// every operand in place (DgBaseline's temps serve the strided calls only). bench builds the pointer arrays in
// device memory once a size, before anything is timed.
struct DgGemmCall {
  const char* desc;          // how the problem's segments map to cuBLAS's dims, e.g. "C=AB m=hw[3136] n=k[512] k=c[256] batch=n[8]"
  int swap;                  // 0: X is A and Y is B;  1: X is B and Y is A (C^T = B^T A^T)
  int trans_x, trans_y;      // 0 = CUBLAS_OP_N, 1 = CUBLAS_OP_T
  long long m, n, k;
  long long ldx, ldy, ldc;
  long long stride_x, stride_y, stride_c;   // batch strides in elements (0 = broadcast)
  long long batch;
  unsigned scaled;           // DG_SCALE_* bits
  int npointer_dims;         // 0: a strided-batched call
  DgPointerDim pointer_dims[DG_MAX_DIMS];
};

#define DG_MAX_CALLS 8
// Index 2 of DgBaseline's copy and view: the GEMM's output (D when the problem has one, else C).
enum { DG_GEMM_OUT = 2 };
struct DgBaseline {
  int available;             // 0: no cuBLAS mapping exists for this problem (e.g. sizes beyond int); `kind` says why
  const char* kind;          // "cublas" (views taken directly), "copy+cublas" (some operand goes through a dense temp), "multi-batch" (pointer-array calls beside a copy+cublas call), or the reason it is unavailable
  int copy[3];               // 1: operand (A, B, out) goes through a dense row-major temp of view[i]'s shape in the strided calls: A,B gathered into it before the GEMM; the output gathered into it first when the GEMM's beta != 0, scattered back after
  DgStridedView view[3];     // used only where copy[i]
  int ncalls;                // formulations to time; the fastest is the baseline
  DgGemmCall calls[DG_MAX_CALLS];
  // Pointers: for a copied operand, its temp (offset 0); otherwise the buffer base + DgProblem::offset.
  const char* epilogue;      // "elementwise": the harness's elementwise kernel follows each GEMM (beta * C with D,
                             // then the steps); nullptr for a problem with neither steps nor D with beta != 0
};

// An alternative baseline for a problem with an epilogue -- cuBLASLt with its fused epilogue
// (CUBLASLT_EPILOGUE_BIAS / _RELU_BIAS / _GELU_BIAS, templates/dg_cublaslt.cuh) -- that bench times beside
// cuBLAS + the elementwise kernel in the same run, the same way; the faster is the baseline. A generated
// harness passes one to dg_harness_main where baseline.py says it applies (CublasPlan.alternative).
// At each size bench calls prepare, one trial run outside any capture, then epilogue() and formulation()
// (so they may depend on what prepare and the trial settled), then the timed runs.
class DgAltBaseline {
 public:
  virtual ~DgAltBaseline() = default;
  virtual const char* epilogue() const = 0;       // baseline_epilogue (and baseline) when it wins, e.g. "cublaslt:GELU_BIAS"
  virtual std::string formulation() const = 0;    // baseline_formulation when it wins
  // Gets ready to run problem `p` (one run-time size; stays alive until the next prepare) on `stream`:
  // "" when it can, else why not (then it is reported and skipped). Called before any run.
  virtual std::string prepare(const DgProblem& p, cudaStream_t stream) = 0;
  // One launch on one set of buffers (base pointers by slot, as the kernel under test gets them), enqueued
  // on `stream` and capturable into a CUDA graph (no allocation, no synchronization): "" or the error.
  virtual std::string run(void* const bufs[DG_SLOTS], cudaStream_t stream) = 0;
  // Another baseline timed beside this one at each size and reported apart, never a candidate: for an e4m3
  // problem, bf16 cuBLASLt on the same shape ("bf16_baseline_*" in bench's JSON). Prepared after this one.
  virtual DgAltBaseline* beside() { return nullptr; }
};

// The kernel's C entry point behind a wrapper that takes the base pointers by slot: the fixed-size API, or
// the run-time-size one, whose m is the size of DgProblem::run_time_letter. The wrapper passes the
// pointers the problem has, in the C API's order (A, B, C, [D], [bias], [scale], [residual]).
typedef cudaError_t (*DgLaunchFn)(void* const bufs[DG_SLOTS], float alpha, float beta, cudaStream_t stream);
typedef cudaError_t (*DgLaunchRunTimeFn)(void* const bufs[DG_SLOTS], long long m, float alpha, float beta,
                                         cudaStream_t stream);

int dg_harness_main(int argc, char** argv, const DgProblem& p, const DgBaseline& bl, DgLaunchFn launch,
                    DgAltBaseline* alternative = nullptr);
int dg_harness_main(int argc, char** argv, const DgProblem& p, const DgBaseline& bl, DgLaunchRunTimeFn launch,
                    DgAltBaseline* alternative = nullptr);

// Everything below defines dg_harness_main. With DG_HARNESS_DECLARATIONS_ONLY a harness compiles against the
// declarations above and links an object of this file compiled once (`deepgemm build` shares one per arch, nvcc
// and flags across kernels); without it, this file is the whole harness, as the folder's Makefile and CMake build it.
#ifndef DG_HARNESS_DECLARATIONS_ONLY

// The kernel under test, whichever entry point it has: one call path for both, m ignored by a fixed-size one.
struct DgKernel {
  DgLaunchFn fixed = nullptr;
  DgLaunchRunTimeFn run_time = nullptr;
  cudaError_t operator()(void* const bufs[DG_SLOTS], long long m, float alpha, float beta, cudaStream_t stream) const {
    return run_time ? run_time(bufs, m, alpha, beta, stream) : fixed(bufs, alpha, beta, stream);
  }
};

// ------------------------------------------------------------------------------------------------
// JSON output and fatal errors
// ------------------------------------------------------------------------------------------------

// A minimal streaming JSON writer: it tracks only whether the next member needs a leading comma.
class DgJson {
 public:
  void begin(const char* key = nullptr) { open(key, '{'); }
  void end() { close('}'); }
  void begin_array(const char* key) { open(key, '['); }
  void end_array() { close(']'); }
  void str(const char* key, const char* v) {
    put_key(key);
    if (v) quote(v); else s_ += "null";
  }
  void null(const char* key) { put_key(key); s_ += "null"; }
  void boolean(const char* key, bool v) { put_key(key); s_ += v ? "true" : "false"; }
  void integer(const char* key, long long v) { put_key(key); s_ += std::to_string(v); }
  // Shortest form that reads back to the same double; non-finite values as strings, since bare
  // NaN/Infinity are not JSON.
  void num(const char* key, double v) {
    put_key(key);
    if (std::isnan(v)) { s_ += "\"nan\""; return; }
    if (std::isinf(v)) { s_ += v > 0 ? "\"inf\"" : "\"-inf\""; return; }
    char buf[40];
    for (int prec = 15; prec <= 17; ++prec) {
      snprintf(buf, sizeof buf, "%.*g", prec, v);
      if (strtod(buf, nullptr) == v) break;
    }
    s_ += buf;
  }
  const std::string& text() const { return s_; }

 private:
  void put_key(const char* key) {
    if (comma_) s_ += ',';
    comma_ = true;
    if (key) { quote(key); s_ += ':'; }
  }
  void open(const char* key, char bracket) { put_key(key); s_ += bracket; comma_ = false; }
  void close(char bracket) { s_ += bracket; comma_ = true; }
  void quote(const char* v) {
    s_ += '"';
    for (const unsigned char* c = reinterpret_cast<const unsigned char*>(v); *c; ++c) {
      if (*c == '"' || *c == '\\') { s_ += '\\'; s_ += static_cast<char>(*c); }
      else if (*c < 0x20) { char esc[8]; snprintf(esc, sizeof esc, "\\u%04x", *c); s_ += esc; }
      else s_ += static_cast<char>(*c);
    }
    s_ += '"';
  }
  std::string s_;
  bool comma_ = false;
};

// Named in every error object; set once the command line is parsed / the problem is known.
static const char* g_dg_command = nullptr;
static const char* g_dg_name = nullptr;

// Where the one JSON object goes. cuBLAS prints its argument errors on stdout, and so does a kernel's
// device printf; either would corrupt the object the caller parses. dg_claim_stdout() keeps the real
// stdout for the JSON alone and points file descriptor 1 (everyone else's stdout) at stderr.
static FILE* g_dg_out = stdout;

static void dg_claim_stdout() {
  fflush(stdout);
  const int fd = dup(STDOUT_FILENO);
  if (fd < 0) return;   // then everything shares stdout, as without this
  FILE* out = fdopen(fd, "w");
  if (!out || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    if (out) fclose(out); else close(fd);
    return;
  }
  g_dg_out = out;
}

static void dg_print_json(const std::string& json) {
  fprintf(g_dg_out, "%s\n", json.c_str());
  fflush(g_dg_out);
}

static std::string dg_format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static std::string dg_format(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

// Prints the error object and exits. Nothing is cleaned up: process exit releases the device.
[[noreturn]] static void dg_die(int exit_code, const std::string& message) {
  DgJson j;
  j.begin();
  j.integer("schema_version", DG_REPORT_SCHEMA_VERSION);
  j.str("command", g_dg_command);
  if (g_dg_name) j.str("name", g_dg_name);
  j.str("error", message.c_str());
  j.end();
  dg_print_json(j.text());
  fprintf(stderr, "dg_harness: error: %s\n", message.c_str());
  exit(exit_code);
}

[[noreturn]] static void dg_die_cuda(cudaError_t e, const char* what, int line) {
  dg_die(4, dg_format("%s: %s (%s) [dg_harness.cuh:%d]", what, cudaGetErrorName(e), cudaGetErrorString(e), line));
}

#define DG_CUDA(call)                                                \
  do {                                                               \
    const cudaError_t dg_err_ = (call);                              \
    if (dg_err_ != cudaSuccess) dg_die_cuda(dg_err_, #call, __LINE__); \
  } while (0)

// ------------------------------------------------------------------------------------------------
// Element access and reproducible random values (shared by host and device code)
// ------------------------------------------------------------------------------------------------

__host__ __device__ inline int dg_elem_size(int dtype) {
  return dtype == DG_F32 || dtype == DG_INT4 || dtype == DG_UINT4 ? 4 : dtype == DG_E4M3 || dtype == DG_INT8 || dtype == DG_UINT8 ? 1 : 2;
}

__host__ __device__ inline double dg_load(const void* buf, int dtype, long long i) {
  switch (dtype) {
    case DG_F16: return __half2float(static_cast<const __half*>(buf)[i]);
    case DG_BF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(buf)[i]);
    case DG_E4M3: return static_cast<float>(static_cast<const __nv_fp8_e4m3*>(buf)[i]);
    default: return static_cast<const float*>(buf)[i];
  }
}

// Rounded to nearest even; an e4m3 store saturates to +-448 (e4m3 has no infinity), NaN stays NaN.
__host__ __device__ inline void dg_store(void* buf, int dtype, long long i, float v) {
  switch (dtype) {
    case DG_F16: static_cast<__half*>(buf)[i] = __float2half_rn(v); break;
    case DG_BF16: static_cast<__nv_bfloat16*>(buf)[i] = __float2bfloat16_rn(v); break;
    case DG_E4M3: static_cast<__nv_fp8_e4m3*>(buf)[i] = __nv_fp8_e4m3(v); break;
    default: static_cast<float*>(buf)[i] = v; break;
  }
}

// splitmix64's finalizer: a bijective 64-bit mix with full avalanche.
__host__ __device__ inline unsigned long long dg_mix64(unsigned long long z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Independent random streams under one seed: what each stream fills.
enum {
  DG_RNG_A = 0, DG_RNG_B = 1, DG_RNG_C = 2, DG_RNG_SAMPLES = 3, DG_RNG_SIZES = 4,
  DG_RNG_BIAS = 5, DG_RNG_SCALE = 6, DG_RNG_RESIDUAL = 7, DG_RNG_NAN = 8, DG_RNG_A_SCALES = 9, DG_RNG_B_SCALES = 10,
  DG_RNG_B_ZEROS = 11,
};

// Element i of a splitmix64 sequence whose starting state depends on (seed, stream): any element is
// computed directly, so host and device fills agree and need no sequential state.
__host__ __device__ inline unsigned long long dg_random_bits(unsigned long long seed, int stream, long long i) {
  const unsigned long long kGolden = 0x9E3779B97F4A7C15ULL;
  const unsigned long long state = dg_mix64(seed * kGolden + static_cast<unsigned long long>(stream));
  return dg_mix64(state + static_cast<unsigned long long>(i + 1) * kGolden);
}

// An odd multiple of 2^-24 in (-1, 1): uniform, exact in float, and never zero.
__host__ __device__ inline float dg_uniform(unsigned long long bits) {
  const long long odd = static_cast<long long>(bits >> 40) * 2 + 1 - (1LL << 24);
  return static_cast<float>(odd) * (1.0f / 16777216.0f);
}

// e4m3 (e4m3fn): 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinity, NaN is S.1111.111 (0x7F, 0xFF), the
// largest finite 448 (0x7E), subnormals below 2^-6.
__host__ __device__ inline bool dg_e4m3_is_nan(unsigned bits) { return (bits & 0x7Fu) == 0x7Fu; }

// How random e4m3 data is drawn: 1 element in kDgE4m3WideOneIn is a bit pattern uniform over the 254 finite ones
// (values near 448 and subnormals included), the others are dg_uniform rounded to e4m3. Never NaN.
constexpr unsigned kDgE4m3WideOneIn = 16;
__host__ __device__ inline unsigned dg_random_e4m3_bits(unsigned long long bits, float amplitude) {
  if ((bits & (kDgE4m3WideOneIn - 1)) == 0) {
    const unsigned r = static_cast<unsigned>((bits >> 8) % 254u);   // 0..253 -> 0x00..0x7E, 0x80..0xFE
    return r < 0x7Fu ? r : r + 1u;
  }
  return __nv_cvt_float_to_fp8(amplitude * dg_uniform(bits), __NV_SATFINITE, __NV_E4M3);
}

// A random scale: positive and of varied magnitude, 1.m * 2^e with 23 random mantissa bits and e uniform in -10..-3,
// so in [2^-10, 2^-2): as quantization sets them (amax / 448), the scaled inputs are about 1 in size, and a sum of
// 16384 products fits an f16 output even where one scale covers a whole tensor. Built from its bits, so host and
// device draw the same float.
__host__ __device__ inline float dg_random_scale(unsigned long long bits) {
  const unsigned exponent = 127u - 10u + static_cast<unsigned>(bits & 7u);
  const unsigned word = (exponent << 23) | static_cast<unsigned>((bits >> 41) & 0x7FFFFFu);
  float v;
  memcpy(&v, &word, sizeof v);
  return v;
}

// What a buffer holds, for its random fill: data, scales, or integer weights' zero points (subtracted: in [0, 16),
// as a 4-bit zero point lies; prescaled: z * s, a zero point times a scale).
enum { DG_FILL_DATA = 0, DG_FILL_SCALE = 1, DG_FILL_ZERO = 2, DG_FILL_ZERO_PRESCALED = 3 };

// Element i of a buffer filled at random: scales by dg_random_scale, e4m3 by dg_random_e4m3_bits, integers (int8 and
// uint8 bytes, 4-bit types' words) by random bits, so that every value of every nibble comes up; float zero points
// as DG_FILL_* says; the other types uniform in (-amplitude, amplitude) rounded to the dtype. Host and device fills
// both go through it.
__host__ __device__ inline void dg_store_random(void* buf, int dtype, int kind, long long i, unsigned long long bits,
                                                float amplitude) {
  if (dtype == DG_INT4 || dtype == DG_UINT4) static_cast<unsigned*>(buf)[i] = static_cast<unsigned>(bits >> 24);
  else if (dtype == DG_INT8 || dtype == DG_UINT8) static_cast<unsigned char*>(buf)[i] = static_cast<unsigned char>(bits >> 24);
  else if (kind == DG_FILL_SCALE) dg_store(buf, dtype, i, dg_random_scale(bits));
  else if (kind == DG_FILL_ZERO) dg_store(buf, dtype, i, 8.0f + 8.0f * dg_uniform(bits));
  else if (kind == DG_FILL_ZERO_PRESCALED) dg_store(buf, dtype, i, 8.0f * dg_random_scale(bits));
  else if (dtype == DG_E4M3) static_cast<unsigned char*>(buf)[i] = static_cast<unsigned char>(dg_random_e4m3_bits(bits, amplitude));
  else dg_store(buf, dtype, i, amplitude * dg_uniform(bits));
}

// ------------------------------------------------------------------------------------------------
// The epilogue, as the reference applies it (double) -- written from docs/design/epilogue.md's definitions,
// not from any kernel's code
// ------------------------------------------------------------------------------------------------

__host__ __device__ inline double dg_activation(int activation, double t) {
  const double kSqrt2OverPi = 0.79788456080286535588, kInvSqrt2 = 0.70710678118654752440;
  switch (activation) {
    case DG_RELU: return t < 0.0 ? 0.0 : t;   // not fmax: NaN stays NaN
    case DG_GELU_TANH: return 0.5 * t * (1.0 + tanh(kSqrt2OverPi * (t + 0.044715 * t * t * t)));
    case DG_GELU_ERF: return 0.5 * t * (1.0 + erf(t * kInvSqrt2));
    case DG_SILU: return t / (1.0 + exp(-t));
    case DG_SIGMOID: return 1.0 / (1.0 + exp(-t));
    default: return tanh(t);   // DG_TANH (dg_check_problem refuses anything else)
  }
}

// The largest |f'(t)| of an activation: how much an error in t can grow through it. GeLU's derivative
// peaks at 1.129 (both forms), SiLU's at 1.0998, the sigmoid's at 1/4.
__host__ __device__ inline double dg_activation_slope(int activation) {
  switch (activation) {
    case DG_GELU_TANH: case DG_GELU_ERF: return 1.13;
    case DG_SILU: return 1.1;
    case DG_SIGMOID: return 0.25;
    default: return 1.0;   // relu, tanh
  }
}

// Each slot's element address for element o (dense row-major over C's letters) of the output's letters:
// offset + sum over C's letters of index * stride, with index / block for a scale slot. For A, B and their
// scales only the C-letter part (the summed letters are walked on top of it). C's letters' indices go to
// idx[0..nc) when asked for.
__host__ __device__ inline void dg_output_addresses(const DgProblem& p, long long o, long long* at, long long* idx) {
  for (int x = 0; x < DG_SLOTS; ++x) at[x] = p.offset[x];
  for (int d = p.nc - 1; d >= 0; --d) {
    const DgDim& dim = p.dims[d];
    const long long i = o % dim.size;
    o /= dim.size;
    for (int x = 0; x < DG_SLOTS; ++x) at[x] += (dg_is_scale_slot(x) ? i / dg_block(dim, x) : i) * dim.stride[x];
    if (idx) idx[d] = i;
  }
}

// ------------------------------------------------------------------------------------------------
// Integer weights, as the reference reads them -- written from docs/design/weight-only.md's definitions (the
// layouts, the nibble orders, the dequantization), not from any kernel's code
// ------------------------------------------------------------------------------------------------

// The integer slot x (B, or B_zeros) holds at the letter indices idx (every dim's): its element, or for a 4-bit view
// the nibble of its word. B_zeros is indexed by blocks (B_scales'), its packed letter's blocks eight to a word.
__host__ __device__ inline long long dg_int_value(const DgProblem& p, const void* buf, int x, const long long* idx) {
  long long word = p.offset[x];
  int nibble = 0;
  if (p.pack[x] == DG_PACK_DG) {
    // 16 (n) x 64 (k) chunks of 128 words, n-major; lane 4 g + t (g = n % 8, t = (k % 64) / 16) holds the chunk's
    // k 16 t .. 16 t + 15 in words 4 lane .. 4 lane + 3, word kt the k 16 t + 4 kt + r (r = 0..3); in a word, nibble
    // 0 (n, r) = (g, 0), 1 (g + 8, 0), 2 (g, 2), 3 (g + 8, 2), 4 (g, 1), 5 (g + 8, 1), 6 (g, 3), 7 (g + 8, 3).
    const long long k = idx[p.pack_dims[x][0]], n = idx[p.pack_dims[x][1]];
    const long long k_chunks = (p.dims[p.pack_dims[x][0]].size + 63) / 64;
    const long long lane = 4 * (n % 8) + (k % 64) / 16;
    word += ((n / 16) * k_chunks + k / 64) * 128 + 4 * lane + (k % 16) / 4;
    nibble = static_cast<int>((n % 16) / 8 + 2 * ((k % 4) / 2) + 4 * (k % 2));
  } else {
    for (int d = 0; d < p.ndims; ++d) {
      const DgDim& dim = p.dims[d];
      long long i = idx[d] / dg_block(dim, x);
      if (p.pack[x] != DG_PACK_NONE && d == p.pack_dims[x][0]) {
        const int value = static_cast<int>(i % 8);   // of the word's eight
        nibble = p.pack[x] == DG_PACK_LINEAR ? value : (value % 2) * 4 + value / 2;   // AWQ: 0 2 4 6 1 3 5 7
        i /= 8;
      }
      word += i * dim.stride[x];
    }
  }
  switch (p.dtype[x]) {
    case DG_INT8: return static_cast<const signed char*>(buf)[word];
    case DG_UINT8: return static_cast<const unsigned char*>(buf)[word];
    default: {
      const long long q = (static_cast<const unsigned*>(buf)[word] >> (4 * nibble)) & 15u;
      return p.dtype[x] == DG_INT4 && q >= 8 ? q - 16 : q;   // int4: two's complement
    }
  }
}

// B's weight at the letter indices idx, dequantized: w = q s, (q - z) s with subtracted zero points, q s - z with
// prescaled ones; s and z B_scales' and B_zeros' for the block holding idx. Exact in double but for the prescaled
// form's one rounding. *size (if given) receives what a dequantization's roundings are relative to: |w|, or
// |q s| + |z| for the prescaled form (where q s and z cancel, s's rounding is relative to q s, not to w).
__host__ __device__ inline double dg_weight(const DgProblem& p, const void* const* bufs, const long long* idx,
                                            double* size = nullptr) {
  const double q = static_cast<double>(dg_int_value(p, bufs[DG_B], DG_B, idx));
  long long at = p.offset[DG_B_SCALES];
  for (int d = 0; d < p.ndims; ++d) at += idx[d] / dg_block(p.dims[d], DG_B_SCALES) * p.dims[d].stride[DG_B_SCALES];
  const double s = dg_load(bufs[DG_B_SCALES], p.dtype[DG_B_SCALES], at);
  if (!p.present[DG_B_ZEROS]) {
    if (size) *size = fabs(q * s);
    return q * s;
  }
  double z;
  if (dg_int_dtype(p.dtype[DG_B_ZEROS])) {
    z = static_cast<double>(dg_int_value(p, bufs[DG_B_ZEROS], DG_B_ZEROS, idx));
  } else {
    long long zat = p.offset[DG_B_ZEROS];
    for (int d = 0; d < p.ndims; ++d) zat += idx[d] / dg_block(p.dims[d], DG_B_ZEROS) * p.dims[d].stride[DG_B_ZEROS];
    z = dg_load(bufs[DG_B_ZEROS], p.dtype[DG_B_ZEROS], zat);
  }
  const double w = p.zero_form == DG_ZEROS_PRESCALED ? q * s - z : (q - z) * s;
  if (size) *size = p.zero_form == DG_ZEROS_PRESCALED ? fabs(q * s) + fabs(z) : fabs(w);
  return w;
}

// The epilogue's steps on t = alpha * sum + beta * C_old, in order, in double; `bufs` and `at` give each
// slot's buffer and this element's address in it. *mag, the scale t's float32 evaluation error is relative
// to (see dg_reference_sum_kernel), goes through the same steps: an added operand adds its magnitude, a scale
// multiplies by its magnitude, an activation by its largest slope, a clamp by 1.
__host__ __device__ inline double dg_reference_epilogue(const DgProblem& p, const void* const* bufs, const long long* at,
                                                        double t, double* mag) {
  for (int s = 0; s < p.nsteps; ++s) {
    const DgStep& step = p.steps[s];
    switch (step.kind) {
      case DG_STEP_BIAS:
      case DG_STEP_RESIDUAL: {
        const int x = step.kind == DG_STEP_BIAS ? DG_BIAS : DG_RESIDUAL;
        const double v = dg_load(bufs[x], p.dtype[x], at[x]);
        t += v;
        *mag += fabs(v);
        break;
      }
      case DG_STEP_SCALE: {
        const double v = dg_load(bufs[DG_SCALE], p.dtype[DG_SCALE], at[DG_SCALE]);
        t *= v;
        *mag *= fabs(v);
        break;
      }
      case DG_STEP_ACTIVATION:
        t = dg_activation(step.activation, t);
        *mag *= dg_activation_slope(step.activation);
        break;
      default:   // DG_STEP_CLAMP; comparisons, so that NaN stays NaN
        t = t < step.lo ? static_cast<double>(step.lo) : (t > step.hi ? static_cast<double>(step.hi) : t);
        break;
    }
  }
  return t;
}

// ------------------------------------------------------------------------------------------------
// Device kernels of the harness itself (the GPU reference, random fills, baseline copies)
// ------------------------------------------------------------------------------------------------

static const int kDgBlock = 256;

// Grid for a grid-stride loop over n > 0 items; capped, since every loop strides over the rest.
static unsigned dg_grid(long long n) {
  return static_cast<unsigned>(std::min<long long>((n + kDgBlock - 1) / kDgBlock, 1LL << 20));
}

__device__ inline long long dg_thread_index() {
  return static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline long long dg_thread_stride() {
  return static_cast<long long>(gridDim.x) * blockDim.x;
}

__global__ void dg_fill_random_kernel(void* buf, int dtype, int kind, long long n, unsigned long long seed,
                                      int stream) {
  for (long long i = dg_thread_index(); i < n; i += dg_thread_stride())
    dg_store_random(buf, dtype, kind, i, dg_random_bits(seed, stream, i), 1.0f);
}

// verify launches the kernel under test right behind a kernel that writes every one of its buffers, as an
// engine launches it behind the kernel that produced its inputs. This predecessor lets the next grid in at once
// (griddepcontrol.launch_dependents on sm_90+), idles `idle_ns` so that a programmatic dependent launch's blocks
// are resident and past their prologue, then restores each buffer from its saved image; until then the buffers
// hold NaN bits (all ones). A dependent kernel that reads a buffer before its griddepcontrol.wait reads NaN, and
// one that writes its output before it has the write overwritten: either fails verify's checks.
// For the next grid's blocks to share its SMs: one warp a block, at most 32 registers (next to a block of 384
// threads at 168, the whole register file), and the largest shared-memory carveout (set once, dg_launch_predecessor):
// an SM changes its carveout only when empty, so behind a kernel run at a smaller one, a dependent launch needing
// shared memory starts only when that kernel completes.
struct DgRestoreList {
  int n;
  char* dst[DG_SLOTS];
  const char* src[DG_SLOTS];
  size_t bytes[DG_SLOTS];
};

__device__ inline unsigned long long dg_globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void __maxnreg__(32) dg_restore_after_idle_kernel(DgRestoreList list, unsigned long long idle_ns) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  const unsigned long long start = dg_globaltimer();
  while (dg_globaltimer() - start < idle_ns) __nanosleep(500);
  const size_t thread = static_cast<size_t>(blockIdx.x) * 32 + threadIdx.x, threads = static_cast<size_t>(gridDim.x) * 32;
  for (int i = 0; i < list.n; ++i) {   // dst and src are 16-byte aligned (dg_device_alloc)
    const size_t words = list.bytes[i] / 16;
    uint4* dst = reinterpret_cast<uint4*>(list.dst[i]);
    const uint4* src = reinterpret_cast<const uint4*>(list.src[i]);
    size_t w = thread;
    for (; w + 3 * threads < words; w += 4 * threads) {   // 4 loads in flight a thread
      const uint4 v0 = src[w], v1 = src[w + threads], v2 = src[w + 2 * threads], v3 = src[w + 3 * threads];
      dst[w] = v0;
      dst[w + threads] = v1;
      dst[w + 2 * threads] = v2;
      dst[w + 3 * threads] = v3;
    }
    for (; w < words; w += threads) dst[w] = src[w];
    for (size_t b = words * 16 + thread; b < list.bytes[i]; b += threads) list.dst[i][b] = list.src[i][b];
  }
}

// Every slot's buffer, as one kernel argument (nullptr for a slot the problem lacks).
struct DgBuffers {
  const void* ptr[DG_SLOTS];
};

// The terms t0 .. t1 - 1 (flat indices over the summed letters, last letter fastest) of output element o, added
// in order in double: *sum gets their sum, *sum_abs the sum of their magnitudes. The summed letters are walked
// as an odometer over the ORIGINAL strides of DgProblem, for A, B and (kScaled) A_scales and B_scales, each of
// whose addresses moves by its stride when the letter's index enters a new block. A term is a * b, or with
// scales (a * sa) * (b * sb): a product of two f32/f16/bf16 values is exact in double, a scaled term rounds once
// (2^-53).
template <bool kScaled>
__host__ __device__ inline void dg_reference_run(const DgProblem& p, const void* const* bufs, long long o, long long t0,
                                                 long long t1, double* sum, double* sum_abs) {
  // The walked slots: A, B, then (kScaled) A_scales and B_scales; an absent one has stride 0 and is not read.
  const int kWalked = kScaled ? 4 : 2;
  const int slot[4] = {DG_A, DG_B, DG_A_SCALES, DG_B_SCALES};
  long long at[DG_SLOTS];
  dg_output_addresses(p, o, at, nullptr);
  long long addr[4], kidx[DG_MAX_DIMS] = {};
  long long left[DG_MAX_DIMS][2] = {};   // a scale slot's indices of the letter left in its block, this one included
  for (int w = 0; w < kWalked; ++w) addr[w] = at[slot[w]];
  long long rest = t0;  // the odometer starts at flat index t0
  for (int d = p.ndims - 1; d >= p.nc; --d) {
    const DgDim& dim = p.dims[d];
    kidx[d] = rest % dim.size;
    rest /= dim.size;
    addr[0] += kidx[d] * dim.stride[DG_A];
    addr[1] += kidx[d] * dim.stride[DG_B];
    for (int w = 2; w < kWalked; ++w) {
      const long long block = dg_block(dim, slot[w]);
      addr[w] += kidx[d] / block * dim.stride[slot[w]];
      left[d][w - 2] = block - kidx[d] % block;
    }
  }
  const bool sa = kScaled && p.present[DG_A_SCALES], sb = kScaled && p.present[DG_B_SCALES];
  double acc = 0.0, abs_acc = 0.0;
  for (long long t = t0; t < t1; ++t) {
    double a = dg_load(bufs[DG_A], p.dtype[DG_A], addr[0]), b = dg_load(bufs[DG_B], p.dtype[DG_B], addr[1]);
    if (sa) a *= dg_load(bufs[DG_A_SCALES], p.dtype[DG_A_SCALES], addr[2]);
    if (sb) b *= dg_load(bufs[DG_B_SCALES], p.dtype[DG_B_SCALES], addr[3]);
    const double term = a * b;
    acc += term;
    abs_acc += fabs(term);
    for (int d = p.ndims - 1; d >= p.nc; --d) {
      const DgDim& dim = p.dims[d];
      addr[0] += dim.stride[DG_A];
      addr[1] += dim.stride[DG_B];
      for (int w = 2; w < kWalked; ++w) {   // a scale's address moves when the index enters its next block
        if (--left[d][w - 2] > 0) continue;
        left[d][w - 2] = dg_block(dim, slot[w]);
        addr[w] += dim.stride[slot[w]];
      }
      if (++kidx[d] < dim.size) break;
      // Back to index 0: A and B moved size times, a scale once a block entered (size / block times).
      addr[0] -= dim.size * dim.stride[DG_A];
      addr[1] -= dim.size * dim.stride[DG_B];
      for (int w = 2; w < kWalked; ++w) {
        const long long block = dg_block(dim, slot[w]);
        addr[w] -= dim.size / block * dim.stride[slot[w]];
        left[d][w - 2] = block;
      }
      kidx[d] = 0;
    }
  }
  *sum = acc;
  *sum_abs = abs_acc;
}

// dg_reference_run for integer weights: each term a * w, w = dg_weight at the term's letter indices, evaluated from
// scratch (a 4-bit view's address is not a sum of strides times indices, so nothing is walked).
__host__ __device__ inline void dg_reference_run_weights(const DgProblem& p, const void* const* bufs, long long o,
                                                         long long t0, long long t1, double* sum, double* sum_abs) {
  long long at[DG_SLOTS], idx[DG_MAX_DIMS] = {};
  dg_output_addresses(p, o, at, idx);
  double acc = 0.0, abs_acc = 0.0;
  for (long long t = t0; t < t1; ++t) {
    long long rest = t, a = at[DG_A];
    for (int d = p.ndims - 1; d >= p.nc; --d) {
      idx[d] = rest % p.dims[d].size;
      rest /= p.dims[d].size;
      a += idx[d] * p.dims[d].stride[DG_A];
    }
    double size;
    const double va = dg_load(bufs[DG_A], p.dtype[DG_A], a);
    acc += va * dg_weight(p, bufs, idx, &size);
    abs_acc += fabs(va) * size;
  }
  *sum = acc;
  *sum_abs = abs_acc;
}

// The reference: one thread per run of consecutive terms of one output element (dg_reference_run), output
// elements in dense row-major order of C's letters. It deliberately knows nothing of tiles. An output's sum is
// cut into `chunks` runs only when there are too few outputs to fill the GPU (a full reduction has one output and
// millions of terms, which one thread would walk for seconds); dg_reference_sum_kernel adds the runs in
// their order. With chunks = 1 each thread walks one whole output.
__global__ void dg_reference_terms_kernel(DgProblem p, DgBuffers in, double* part, double* part_abs, long long count,
                                          long long k_terms, long long chunks) {
  const bool scaled = p.present[DG_A_SCALES] || p.present[DG_B_SCALES];
  for (long long w = dg_thread_index(); w < count * chunks; w += dg_thread_stride()) {
    const long long o = w / chunks, c = w % chunks;
    const long long t0 = c * k_terms / chunks, t1 = (c + 1) * k_terms / chunks;
    if (dg_int_weights(p)) dg_reference_run_weights(p, in.ptr, o, t0, t1, &part[w], &part_abs[w]);
    else if (scaled) dg_reference_run<true>(p, in.ptr, o, t0, t1, &part[w], &part_abs[w]);
    else dg_reference_run<false>(p, in.ptr, o, t0, t1, &part[w], &part_abs[w]);
  }
}

// The runs of each output added in order, then beta * C_old and the epilogue. C_old is read only when
// beta != 0, so C's NaN poison cannot leak in. mag[o] = |alpha| * sum |term| (+ |beta * C_old|), through the
// epilogue's steps: the scale a float32 evaluation's rounding error is relative to, whatever the
// cancellation in the sum. With chunks = 1, part and ref may be one buffer (each thread reads its own
// element before it writes it).
__global__ void dg_reference_sum_kernel(DgProblem p, DgBuffers in, const double* part, const double* part_abs,
                                        double* ref, double* mag, long long count, long long chunks, double alpha,
                                        double beta) {
  for (long long o = dg_thread_index(); o < count; o += dg_thread_stride()) {
    double acc = 0.0, abs_acc = 0.0;
    for (long long c = 0; c < chunks; ++c) {
      acc += part[o * chunks + c];
      abs_acc += part_abs[o * chunks + c];
    }
    long long at[DG_SLOTS];
    dg_output_addresses(p, o, at, nullptr);
    double t = alpha * acc, scale = fabs(alpha) * abs_acc;
    if (beta != 0.0) {
      const double c_old = beta * dg_load(in.ptr[DG_C], p.dtype[DG_C], at[DG_C]);
      t += c_old;
      scale += fabs(c_old);
    }
    ref[o] = dg_reference_epilogue(p, in.ptr, at, t, &scale);
    mag[o] = scale;
  }
}

// How many runs each output's sum is cut into: enough threads to fill the GPU (kDgRefThreads), runs of at
// least kDgRefMinRun terms; 1 when the outputs alone fill it.
static const long long kDgRefThreads = 1LL << 18, kDgRefMinRun = 2048;
static long long dg_reference_chunks(long long count, long long k_terms) {
  if (count >= kDgRefThreads) return 1;
  return std::max(1LL, std::min((kDgRefThreads + count - 1) / count, k_terms / kDgRefMinRun));
}

// Element offset, within view v, of the element at dense row-major index i of v's shape. Index is the type the
// divisions run in: 32-bit where the view's count fits one.
template <typename Index>
__device__ inline long long dg_view_offset(const DgStridedView& v, Index i) {
  long long off = 0;
  for (int d = v.ndims - 1; d >= 0; --d) {
    const Index size = static_cast<Index>(v.size[d]);
    off += static_cast<long long>(i % size) * v.stride[d];
    i /= size;
  }
  return off;
}

// Baseline copies move bits, not values, so one instantiation per unit size serves every dtype. A unit is one
// element, or several consecutive ones along a contiguous innermost dim (dg_copy_units).
template <typename Index, typename Bits>
__global__ void dg_gather_kernel(const Bits* __restrict__ view_base, DgStridedView v, Bits* __restrict__ dense,
                                 long long n) {
  for (long long i = dg_thread_index(); i < n; i += dg_thread_stride())
    dense[i] = view_base[dg_view_offset(v, static_cast<Index>(i))];
}

// Sums (got - want)^2 and want^2 over the output view of p (slot x) into sums[0], sums[1]: one atomic a warp.
__global__ void dg_diff_kernel(DgProblem p, int x, const void* got, const void* want, long long count, double* sums) {
  double d2 = 0.0, w2 = 0.0;
  for (long long o = dg_thread_index(); o < count; o += dg_thread_stride()) {
    long long at[DG_SLOTS];
    dg_output_addresses(p, o, at, nullptr);
    const double g = dg_load(got, p.dtype[x], at[x]), w = dg_load(want, p.dtype[x], at[x]);
    d2 += (g - w) * (g - w);
    w2 += w * w;
  }
  for (int lane = 16; lane > 0; lane /= 2) {
    d2 += __shfl_down_sync(0xffffffffu, d2, lane);
    w2 += __shfl_down_sync(0xffffffffu, w2, lane);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(&sums[0], d2);
    atomicAdd(&sums[1], w2);
  }
}

template <typename Index, typename Bits>
__global__ void dg_scatter_kernel(const Bits* __restrict__ dense, DgStridedView v, Bits* __restrict__ view_base,
                                  long long n) {
  for (long long i = dg_thread_index(); i < n; i += dg_thread_stride())
    view_base[dg_view_offset(v, static_cast<Index>(i))] = dense[i];
}

// ------------------------------------------------------------------------------------------------
// The baseline's epilogue: one elementwise pass after the cuBLAS GEMM
// ------------------------------------------------------------------------------------------------

// What a user without a fused epilogue runs after cuBLAS: one kernel over the output view that adds beta * C
// (with D, cuBLAS wrote alpha * A.B into D with beta 0) and applies the steps in float32, reading bias, scale
// and residual through their strides. Its walk (dg_elementwise_plan): C's letters without the size-1 ones,
// ordered by the output's stride (innermost last), neighbours merged where every buffer the pass touches
// chains, so that a dense output with a bias over its columns is rows x one long inner dim. A tile is
// kDgEwIlp * kDgBlock consecutive elements of the inner dim in one row: a thread works out the row's
// addresses once a tile, then issues its kDgEwIlp elements' loads together (coalesced, kDgBlock apart), then
// computes and stores them. (An inner dim much shorter than a tile leaves threads idle; outputs whose innermost letter
// is that short are rare.)
static const int kDgEwIlp = 8;

// The buffers the pass touches, in its own order (each an index into DgElementwise's per-buffer arrays).
enum { DG_EW_OUT = 0, DG_EW_C = 1, DG_EW_BIAS = 2, DG_EW_SCALE = 3, DG_EW_RESIDUAL = 4, DG_EW_BUFFERS = 5 };

struct DgElementwise {
  int ndims;                                      // >= 1; the innermost dim last
  long long size[DG_MAX_DIMS];
  long long stride[DG_MAX_DIMS][DG_EW_BUFFERS];   // 0 for a buffer the pass does not read
  long long offset[DG_EW_BUFFERS];
  int dtype[DG_EW_BUFFERS];
  int slot[DG_EW_BUFFERS];                        // the problem's slot of each buffer; -1: not read
  const void* ptr[DG_EW_BUFFERS];                 // set for each launch (dg_run_elementwise)
  float beta;                                     // t = beta * C + t first, where slot[DG_EW_C] >= 0
  long long chunks;                               // tiles a row: ceil(inner size / (kDgEwIlp * kDgBlock))
  long long tiles;                                // rows * chunks
  int narrow;                                     // 1: every index fits in int (32-bit index math)
  int nsteps;
  DgStep steps[DG_MAX_STEPS];
};

// float32 versions of the activations, as a framework's elementwise kernel computes them, on a thread's
// kDgEwIlp values at once: the switch is taken once for all of them.
__device__ inline void dg_activation_f32(int activation, float (&t)[kDgEwIlp]) {
#define DG_EW_EACH(expr) _Pragma("unroll") for (int j = 0; j < kDgEwIlp; ++j) t[j] = (expr)
  switch (activation) {
    case DG_RELU: DG_EW_EACH(t[j] < 0.0f ? 0.0f : t[j]); break;
    case DG_GELU_TANH:
      DG_EW_EACH(0.5f * t[j] * (1.0f + tanhf(0.7978845608f * (t[j] + 0.044715f * t[j] * t[j] * t[j]))));
      break;
    case DG_GELU_ERF: DG_EW_EACH(0.5f * t[j] * (1.0f + erff(t[j] * 0.7071067812f))); break;
    case DG_SILU: DG_EW_EACH(t[j] / (1.0f + expf(-t[j]))); break;
    case DG_SIGMOID: DG_EW_EACH(1.0f / (1.0f + expf(-t[j]))); break;
    default: DG_EW_EACH(tanhf(t[j])); break;
  }
#undef DG_EW_EACH
}

// A thread's kDgEwIlp elements of one buffer, element j at base + (first + j * kDgBlock) * step (0 past the
// inner dim's end): the dtype's switch once for all, then every load issued together.
template <typename Index>
__device__ inline void dg_ew_load(const void* buf, int dtype, Index base, Index step, Index first, Index n,
                                  float (&v)[kDgEwIlp]) {
#define DG_EW_LOAD(T, convert)                                                          \
  _Pragma("unroll") for (int j = 0; j < kDgEwIlp; ++j) {                                \
    const Index i = first + j * kDgBlock;                                               \
    v[j] = i < n ? convert(static_cast<const T*>(buf)[base + i * step]) : 0.0f;         \
  }
  switch (dtype) {
    case DG_F16: DG_EW_LOAD(__half, __half2float); break;
    case DG_BF16: DG_EW_LOAD(__nv_bfloat16, __bfloat162float); break;
    default: DG_EW_LOAD(float, static_cast<float>); break;
  }
#undef DG_EW_LOAD
}

template <typename Index>
__device__ inline void dg_ew_store(void* buf, int dtype, Index base, Index step, Index first, Index n,
                                   const float (&v)[kDgEwIlp]) {
#define DG_EW_STORE(T, convert)                                                         \
  _Pragma("unroll") for (int j = 0; j < kDgEwIlp; ++j) {                                \
    const Index i = first + j * kDgBlock;                                               \
    if (i < n) static_cast<T*>(buf)[base + i * step] = convert(v[j]);                   \
  }
  switch (dtype) {
    case DG_F16: DG_EW_STORE(__half, __float2half_rn); break;
    case DG_BF16: DG_EW_STORE(__nv_bfloat16, __float2bfloat16_rn); break;
    default: DG_EW_STORE(float, static_cast<float>); break;
  }
#undef DG_EW_STORE
}

// Index: int where every address and tile number fits (e.narrow), else long long. Every switch (dtype, step,
// activation) is taken once a tile for a thread's kDgEwIlp elements, so that the per-element work is what
// the epilogue costs; per-buffer arrays are indexed by constants only (unrolled loops) and stay in registers.
template <typename Index>
__global__ void __launch_bounds__(kDgBlock) dg_elementwise_kernel(DgElementwise e) {
  const int inner = e.ndims - 1;
  const Index n_inner = static_cast<Index>(e.size[inner]), chunks = static_cast<Index>(e.chunks);
  for (Index tile = blockIdx.x; tile < static_cast<Index>(e.tiles); tile += gridDim.x) {
    Index row = tile / chunks;
    const Index first = (tile - row * chunks) * (kDgEwIlp * kDgBlock) + static_cast<Index>(threadIdx.x);
    Index at[DG_EW_BUFFERS];
#pragma unroll
    for (int x = 0; x < DG_EW_BUFFERS; ++x) at[x] = static_cast<Index>(e.offset[x]);
    for (int d = inner - 1; d >= 0; --d) {
      const Index size = static_cast<Index>(e.size[d]);
      const Index i = row % size;
      row /= size;
#pragma unroll
      for (int x = 0; x < DG_EW_BUFFERS; ++x) at[x] += i * static_cast<Index>(e.stride[d][x]);
    }
    // Every buffer's loads first, so that they are in flight together.
    float v[DG_EW_BUFFERS][kDgEwIlp];
#pragma unroll
    for (int x = 0; x < DG_EW_BUFFERS; ++x)
      if (e.slot[x] >= 0)
        dg_ew_load(e.ptr[x], e.dtype[x], at[x], static_cast<Index>(e.stride[inner][x]), first, n_inner, v[x]);
    float (&t)[kDgEwIlp] = v[DG_EW_OUT];
    if (e.slot[DG_EW_C] >= 0) {
#pragma unroll
      for (int j = 0; j < kDgEwIlp; ++j) t[j] = fmaf(e.beta, v[DG_EW_C][j], t[j]);
    }
    for (int s = 0; s < e.nsteps; ++s) {
      const DgStep step = e.steps[s];
#define DG_EW_EACH(expr) _Pragma("unroll") for (int j = 0; j < kDgEwIlp; ++j) t[j] = (expr)
      switch (step.kind) {
        case DG_STEP_BIAS: DG_EW_EACH(t[j] + v[DG_EW_BIAS][j]); break;
        case DG_STEP_SCALE: DG_EW_EACH(t[j] * v[DG_EW_SCALE][j]); break;
        case DG_STEP_RESIDUAL: DG_EW_EACH(t[j] + v[DG_EW_RESIDUAL][j]); break;
        case DG_STEP_ACTIVATION: dg_activation_f32(step.activation, t); break;
        default: DG_EW_EACH(t[j] < step.lo ? step.lo : (t[j] > step.hi ? step.hi : t[j])); break;
      }
#undef DG_EW_EACH
    }
    dg_ew_store(const_cast<void*>(e.ptr[DG_EW_OUT]), e.dtype[DG_EW_OUT], at[DG_EW_OUT],
                static_cast<Index>(e.stride[inner][DG_EW_OUT]), first, n_inner, t);
  }
}

// Whether the baseline needs the elementwise pass: the problem has steps, or D with beta != 0 (cuBLAS has
// no separate output view, so it writes alpha * A.B to D and the pass adds beta * C).
static bool dg_needs_elementwise(const DgProblem& p) { return p.nsteps > 0 || (p.present[DG_D] && p.beta != 0.0f); }

static DgElementwise dg_elementwise_plan(const DgProblem& p) {
  DgElementwise e = {};
  e.slot[DG_EW_OUT] = dg_out_slot(p);
  e.slot[DG_EW_C] = p.present[DG_D] && p.beta != 0.0f ? DG_C : -1;
  e.slot[DG_EW_BIAS] = p.present[DG_BIAS] ? DG_BIAS : -1;
  e.slot[DG_EW_SCALE] = p.present[DG_SCALE] ? DG_SCALE : -1;
  e.slot[DG_EW_RESIDUAL] = p.present[DG_RESIDUAL] ? DG_RESIDUAL : -1;
  e.beta = p.beta;
  const auto stride = [&](const DgDim& dim, int x) { return e.slot[x] < 0 ? 0 : dim.stride[e.slot[x]]; };
  // C's letters that move an address, outermost (largest output stride) first.
  std::vector<int> order;
  for (int d = 0; d < p.nc; ++d)
    if (p.dims[d].size > 1) order.push_back(d);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return std::llabs(p.dims[a].stride[e.slot[DG_EW_OUT]]) > std::llabs(p.dims[b].stride[e.slot[DG_EW_OUT]]);
  });
  for (const int d : order) {
    const DgDim& dim = p.dims[d];
    if (e.ndims > 0) {
      const int prev = e.ndims - 1;
      bool chains = true;
      for (int x = 0; x < DG_EW_BUFFERS; ++x) chains = chains && e.stride[prev][x] == stride(dim, x) * dim.size;
      if (chains) {   // the previous dim and this one walk every buffer as one
        e.size[prev] *= dim.size;
        for (int x = 0; x < DG_EW_BUFFERS; ++x) e.stride[prev][x] = stride(dim, x);
        continue;
      }
    }
    e.size[e.ndims] = dim.size;
    for (int x = 0; x < DG_EW_BUFFERS; ++x) e.stride[e.ndims][x] = stride(dim, x);
    ++e.ndims;
  }
  if (e.ndims == 0) e.size[e.ndims++] = 1;   // one element
  long long rows = 1, widest = 0;
  for (int d = 0; d + 1 < e.ndims; ++d) rows *= e.size[d];
  for (int x = 0; x < DG_EW_BUFFERS; ++x) {
    if (e.slot[x] < 0) continue;
    e.offset[x] = p.offset[e.slot[x]];
    e.dtype[x] = p.dtype[e.slot[x]];
    widest = std::max(widest, p.span[e.slot[x]]);
  }
  const long long per_tile = kDgEwIlp * kDgBlock, n_inner = e.size[e.ndims - 1];
  e.chunks = (n_inner + per_tile - 1) / per_tile;
  e.tiles = rows * e.chunks;
  e.narrow = std::max({widest, e.tiles, n_inner + per_tile}) <= INT_MAX;
  e.nsteps = p.nsteps;
  std::copy(p.steps, p.steps + p.nsteps, e.steps);
  return e;
}

// One pass on the buffers `bufs` (base pointers by slot).
static void dg_run_elementwise(DgElementwise e, void* const bufs[DG_SLOTS], cudaStream_t stream) {
  for (int x = 0; x < DG_EW_BUFFERS; ++x) e.ptr[x] = e.slot[x] < 0 ? nullptr : bufs[e.slot[x]];
  const unsigned grid = static_cast<unsigned>(std::min<long long>(e.tiles, 1LL << 20));
  if (e.narrow) dg_elementwise_kernel<int><<<grid, kDgBlock, 0, stream>>>(e);
  else dg_elementwise_kernel<long long><<<grid, kDgBlock, 0, stream>>>(e);
}

// ------------------------------------------------------------------------------------------------
// Host-side helpers
// ------------------------------------------------------------------------------------------------

static long long dg_view_count(const DgStridedView& v) {
  long long n = 1;
  for (int d = 0; d < v.ndims; ++d) n *= v.size[d];
  return n;
}

// Number of elements of the output view (product of the sizes of C's letters).
static long long dg_c_count(const DgProblem& p) {
  long long n = 1;
  for (int d = 0; d < p.nc; ++d) n *= p.dims[d].size;
  return n;
}

// Buffer address in slot x (C, D or an epilogue view: slots over C's letters) of output element o, the
// dense row-major index over C's letters; their indices go to idx[0..nc) when asked for.
static long long dg_address(const DgProblem& p, int x, long long o, long long* idx) {
  long long addr = p.offset[x];
  for (int d = p.nc - 1; d >= 0; --d) {
    const long long i = o % p.dims[d].size;
    o /= p.dims[d].size;
    addr += i * p.dims[d].stride[x];
    if (idx) idx[d] = i;
  }
  return addr;
}

static size_t dg_buffer_bytes(const DgProblem& p, int x) {
  return static_cast<size_t>(p.span[x]) * dg_elem_size(p.dtype[x]);
}

// Smallest and largest element index a strided walk reaches from `offset`; strides may be negative or 0.
static void dg_reach(long long offset, int n, const long long* size, const long long* stride, long long* lo,
                     long long* hi) {
  *lo = *hi = offset;
  for (int d = 0; d < n; ++d) {
    const long long ext = (size[d] - 1) * stride[d];
    if (ext > 0) *hi += ext; else *lo += ext;
  }
}

// ------------------------------------------------------------------------------------------------
// Run-time size
// ------------------------------------------------------------------------------------------------

// The dim of the run-time letter, or -1 for a fixed-size problem.
static int dg_run_time_dim(const DgProblem& p) {
  if (!p.run_time_letter) return -1;
  for (int d = 0; d < p.nc; ++d)
    if (p.dims[d].letter == p.run_time_letter) return d;
  return -1;   // dg_check_problem refuses a letter C does not have
}

// The largest run-time size (the letter's size in kProblem), or 0 for a fixed-size problem.
static long long dg_run_time_hi(const DgProblem& p) {
  const int d = dg_run_time_dim(p);
  return d < 0 ? 0 : p.dims[d].size;
}

// The problem at run-time size m: the same views with the letter's size m. A fixed-size problem as it is.
static DgProblem dg_problem_at(const DgProblem& p, long long m) {
  DgProblem q = p;
  const int d = dg_run_time_dim(p);
  if (d >= 0) q.dims[d].size = m;
  return q;
}

// The baseline at run-time size m: each field given for the largest size that is proportional to the size,
// scaled (it is a whole multiple of the largest size: dg_check_problem).
static DgBaseline dg_baseline_at(const DgBaseline& bl, long long m, long long hi) {
  DgBaseline b = bl;
  const auto scale = [&](long long& field, bool scaled) {
    if (scaled) field = field / hi * m;
  };
  for (DgStridedView& v : b.view)
    for (int d = 0; d < v.ndims; ++d) scale(v.size[d], (v.scaled >> d) & 1u);
  for (int c = 0; c < b.ncalls; ++c) {
    DgGemmCall& call = b.calls[c];
    scale(call.m, call.scaled & DG_SCALE_M);
    scale(call.n, call.scaled & DG_SCALE_N);
    scale(call.k, call.scaled & DG_SCALE_K);
    scale(call.batch, call.scaled & DG_SCALE_BATCH);
    scale(call.stride_x, call.scaled & DG_SCALE_STRIDE_X);
    scale(call.stride_y, call.scaled & DG_SCALE_STRIDE_Y);
    scale(call.stride_c, call.scaled & DG_SCALE_STRIDE_C);
    for (int d = 0; d < call.npointer_dims; ++d) scale(call.pointer_dims[d].size, call.pointer_dims[d].scaled != 0);
  }
  return b;
}

// Sizes in [lo, hi], ascending, each once.
static std::vector<long long> dg_sizes_within(std::vector<long long> sizes, long long lo, long long hi) {
  sizes.erase(std::remove_if(sizes.begin(), sizes.end(), [&](long long m) { return m < lo || m > hi; }), sizes.end());
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

// verify's sizes: the small ones and powers of two where tilings change, every bucket edge with its
// neighbours (where the entry point switches kernels, and one past), both ends, and 3 sizes drawn from `seed`.
static std::vector<long long> dg_verify_sizes(const DgProblem& p, unsigned long long seed) {
  const long long lo = p.run_time_lo, hi = dg_run_time_hi(p);
  std::vector<long long> sizes = {1, 2, 3, 7, 8, 9, 16, 17, 63, 64, lo, hi};
  for (int e = 0; e < p.nedges; ++e)
    for (long long near = -1; near <= 1; ++near) sizes.push_back(p.edges[e] + near);
  for (int r = 0; r < 3; ++r)
    sizes.push_back(lo + static_cast<long long>(dg_random_bits(seed, DG_RNG_SIZES, r) %
                                                static_cast<unsigned long long>(hi - lo + 1)));
  return dg_sizes_within(sizes, lo, hi);
}

// bench's sizes: decode batches from one token up, and both ends.
static std::vector<long long> dg_bench_sizes(const DgProblem& p) {
  const long long lo = p.run_time_lo, hi = dg_run_time_hi(p);
  return dg_sizes_within({1, 8, 16, 64, 128, 256, lo, hi}, lo, hi);
}

// kProblem and kBaseline are generated, so an inconsistency is a generator bug; catching it here keeps
// the harness itself from reading or writing outside its buffers.
static void dg_check_run_time(const DgProblem& p, const DgBaseline& bl) {
  const int d = dg_run_time_dim(p);
  const long long hi = dg_run_time_hi(p);
  if (p.run_time_letter) {
    if (d < 0 || p.dims[d].role != DG_M || p.dims[d].stride[DG_B] != 0)
      dg_die(4, dg_format("invalid problem: run-time letter '%c' is not a row letter of C", p.run_time_letter));
    if (p.run_time_lo < 1 || p.run_time_lo > hi)
      dg_die(4, dg_format("invalid problem: run-time range %lld..%lld", p.run_time_lo, hi));
    if (p.nedges < 0 || (p.nedges > 0 && !p.edges)) dg_die(4, dg_format("invalid problem: %d bucket edges", p.nedges));
    for (int e = 0; e < p.nedges; ++e)
      if (p.edges[e] < p.run_time_lo || p.edges[e] > hi || (e > 0 && p.edges[e] < p.edges[e - 1]))
        dg_die(4, dg_format("invalid problem: bucket edge %lld out of order or outside the run-time range", p.edges[e]));
  } else if (p.run_time_lo || p.nedges) {
    dg_die(4, "invalid problem: a run-time range without a run-time letter");
  }
  // What scales with the size is given for the largest, so it must be a whole multiple of it.
  const auto check = [&](long long value, bool scaled, const char* what) {
    if (scaled && (hi < 1 || value % hi != 0))
      dg_die(4, dg_format("invalid baseline: %s %lld scales with a run-time size (largest %lld)", what, value, hi));
  };
  for (const DgStridedView& v : bl.view)
    for (int k = 0; k < v.ndims; ++k) check(v.size[k], (v.scaled >> k) & 1u, "view size");
  for (int c = 0; c < bl.ncalls && c < DG_MAX_CALLS; ++c) {
    const DgGemmCall& call = bl.calls[c];
    check(call.m, call.scaled & DG_SCALE_M, "m");
    check(call.n, call.scaled & DG_SCALE_N, "n");
    check(call.k, call.scaled & DG_SCALE_K, "k");
    check(call.batch, call.scaled & DG_SCALE_BATCH, "batch");
    check(call.stride_x, call.scaled & DG_SCALE_STRIDE_X, "stride_x");
    check(call.stride_y, call.scaled & DG_SCALE_STRIDE_Y, "stride_y");
    check(call.stride_c, call.scaled & DG_SCALE_STRIDE_C, "stride_c");
    for (int d = 0; d < call.npointer_dims && d < DG_MAX_DIMS; ++d)
      check(call.pointer_dims[d].size, call.pointer_dims[d].scaled != 0, "pointer dim size");
  }
}

// Which slot each step that reads a view reads; -1 for an activation or a clamp.
static int dg_step_slot(int kind) {
  return kind == DG_STEP_BIAS ? DG_BIAS : kind == DG_STEP_SCALE ? DG_SCALE : kind == DG_STEP_RESIDUAL ? DG_RESIDUAL : -1;
}

static void dg_check_steps(const DgProblem& p, const DgBaseline& bl) {
  if (p.nsteps < 0 || p.nsteps > DG_MAX_STEPS) dg_die(4, dg_format("invalid problem: %d epilogue steps", p.nsteps));
  int reads[DG_SLOTS] = {};
  for (int s = 0; s < p.nsteps; ++s) {
    const DgStep& step = p.steps[s];
    if (!step.text) dg_die(4, dg_format("invalid problem: epilogue step %d has no text", s));
    if (step.kind < DG_STEP_BIAS || step.kind > DG_STEP_CLAMP)
      dg_die(4, dg_format("invalid problem: epilogue step %d has kind %d", s, step.kind));
    if (step.kind == DG_STEP_ACTIVATION && (step.activation < DG_RELU || step.activation > DG_TANH))
      dg_die(4, dg_format("invalid problem: epilogue step %d has activation %d", s, step.activation));
    if (step.kind == DG_STEP_CLAMP && !(step.lo <= step.hi))
      dg_die(4, dg_format("invalid problem: epilogue step %d clamps to [%g, %g]", s, step.lo, step.hi));
    const int x = dg_step_slot(step.kind);
    if (x >= 0 && reads[x]++) dg_die(4, dg_format("invalid problem: a second %s step", kDgSlotNames[x]));
  }
  // Each epilogue view is read by exactly one step.
  for (int x = DG_BIAS; x <= DG_RESIDUAL; ++x)
    if (reads[x] != p.present[x])
      dg_die(4, dg_format("invalid problem: slot %s is %spresent but %d steps read it", kDgSlotNames[x],
                          p.present[x] ? "" : "not ", reads[x]));
  const bool elementwise = bl.epilogue && strcmp(bl.epilogue, "elementwise") == 0;
  if (bl.available && elementwise != dg_needs_elementwise(p))
    dg_die(4, dg_format("invalid baseline: epilogue \"%s\" for a problem that %s the elementwise pass",
                        bl.epilogue ? bl.epilogue : "(none)", dg_needs_elementwise(p) ? "needs" : "does not need"));
}

// A pointer-array call reads and writes its operands in place: every matrix it addresses must lie inside the
// operand's buffer, and its batch must be the product of its dims.
static void dg_check_pointer_call(const DgProblem& p, const DgGemmCall& c) {
  if (c.npointer_dims == 0) return;
  if (c.npointer_dims < 0 || c.npointer_dims > DG_MAX_DIMS)
    dg_die(4, dg_format("invalid baseline: '%s' has %d pointer dims", c.desc, c.npointer_dims));
  if (c.stride_x || c.stride_y || c.stride_c)
    dg_die(4, dg_format("invalid baseline: '%s' is a pointer-array call with batch strides", c.desc));
  long long count = 1;
  long long reach[3] = {0, 0, 0};   // X, Y, Cmat: the farthest matrix's first element past the view's first
  for (int d = 0; d < c.npointer_dims; ++d) {
    const DgPointerDim& dim = c.pointer_dims[d];
    if (dim.size < 1 || dim.stride_x < 0 || dim.stride_y < 0 || dim.stride_c < 1)
      dg_die(4, dg_format("invalid baseline: '%s' has pointer dim %d of size %lld, strides %lld/%lld/%lld", c.desc, d,
                          dim.size, dim.stride_x, dim.stride_y, dim.stride_c));
    count *= dim.size;
    reach[0] += (dim.size - 1) * dim.stride_x;
    reach[1] += (dim.size - 1) * dim.stride_y;
    reach[2] += (dim.size - 1) * dim.stride_c;
  }
  if (count != c.batch) dg_die(4, dg_format("invalid baseline: '%s' batches %lld, its pointer dims %lld", c.desc, c.batch, count));
  // Column-major extents: op(X) is m x k, op(Y) k x n, Cmat m x n; a transposed operand is stored the other way.
  const long long rows[3] = {c.trans_x ? c.k : c.m, c.trans_y ? c.n : c.k, c.m};
  const long long cols[3] = {c.trans_x ? c.m : c.k, c.trans_y ? c.k : c.n, c.n};
  const long long ld[3] = {c.ldx, c.ldy, c.ldc};
  const int slots[3] = {c.swap ? DG_B : DG_A, c.swap ? DG_A : DG_B, dg_out_slot(p)};
  for (int i = 0; i < 3; ++i) {
    const long long last = p.offset[slots[i]] + reach[i] + (rows[i] - 1) + (cols[i] - 1) * ld[i];
    if (ld[i] < rows[i] || last >= p.span[slots[i]])
      dg_die(4, dg_format("invalid baseline: '%s' reaches element %lld of %s (span %lld, ld %lld)", c.desc, last,
                          kDgSlotNames[slots[i]], p.span[slots[i]], ld[i]));
  }
}

static void dg_check_problem(const DgProblem& p, const DgBaseline& bl) {
  if (p.ndims < 1 || p.ndims > DG_MAX_DIMS || p.nc < 0 || p.nc > p.ndims)
    dg_die(4, dg_format("invalid problem: ndims=%d nc=%d", p.ndims, p.nc));
  if (!p.present[DG_A] || !p.present[DG_B] || !p.present[DG_C]) dg_die(4, "invalid problem: A, B and C are always present");
  for (int d = 0; d < p.ndims; ++d) {
    const DgDim& dim = p.dims[d];
    if (dim.size < 1) dg_die(4, dg_format("invalid problem: letter '%c' has size %lld", dim.letter, dim.size));
    if ((d >= p.nc) != (dim.role == DG_K))
      dg_die(4, dg_format("invalid problem: letter '%c' is %s C's letters but has role %d", dim.letter,
                          d < p.nc ? "among" : "after", dim.role));
    for (int x = DG_C; x <= DG_RESIDUAL; ++x)   // the output and the epilogue's views have C's letters only
      if (d >= p.nc && dim.stride[x] != 0)
        dg_die(4, dg_format("invalid problem: summed letter '%c' has a stride in %s", dim.letter, kDgSlotNames[x]));
    for (int x = 0; x < DG_SLOTS; ++x)
      if (!p.present[x] && dim.stride[x] != 0)
        dg_die(4, dg_format("invalid problem: letter '%c' has a stride in absent slot %s", dim.letter, kDgSlotNames[x]));
    for (int x = DG_A_SCALES; x <= DG_B_SCALES; ++x) {
      const long long block = dim.block[dg_block_index(x)];
      if (block < 0 || (block > 0 && !p.present[x]))
        dg_die(4, dg_format("invalid problem: letter '%c' has block %lld in %s slot %s", dim.letter, block,
                            p.present[x] ? "scale" : "absent", kDgSlotNames[x]));
    }
  }
  long long total = 1;
  for (int d = 0; d < p.ndims; ++d)
    if (__builtin_mul_overflow(total, p.dims[d].size, &total)) dg_die(4, "invalid problem: size product overflows");
  if (bl.available && (bl.ncalls < 1 || bl.ncalls > DG_MAX_CALLS))
    dg_die(4, dg_format("invalid baseline: %d calls", bl.ncalls));
  if (bl.available && dg_fp8_inputs(p)) dg_die(4, "invalid baseline: cublasGemmEx has no e4m3 inputs");
  if (bl.available && dg_int_weights(p)) dg_die(4, "invalid baseline: cublasGemmEx has no integer weights");
  for (int x = 0; x < DG_SLOTS; ++x) {
    const char* name = kDgSlotNames[x];
    if (!p.present[x]) {
      if (p.span[x] != 0 || p.offset[x] != 0) dg_die(4, dg_format("invalid problem: absent slot %s has a buffer", name));
      continue;
    }
    // e4m3 is an input type (A and B), with f32 scales; integer types are B's (with f32, f16 or bf16 scales) and its
    // zero points' (unsigned, or a float); every other slot is f32, f16 or bf16.
    const int dt = p.dtype[x];
    const bool ok = x == DG_A ? dt >= DG_F32 && dt <= DG_E4M3
                  : x == DG_B ? dt >= DG_F32 && dt <= DG_UINT4
                  : x == DG_B_ZEROS ? dg_int_weights(p) && (dt == DG_UINT8 || dt == DG_UINT4 || (dt >= DG_F32 && dt <= DG_BF16))
                  : dg_is_scale_slot(x) ? (x == DG_B_SCALES && dg_int_weights(p) ? dt >= DG_F32 && dt <= DG_BF16 : dt == DG_F32)
                  : dt >= DG_F32 && dt <= DG_BF16;
    if (!ok) dg_die(4, dg_format("invalid problem: dtype of %s is %d", name, dt));
    if ((p.pack[x] != DG_PACK_NONE) != (dt == DG_INT4 || dt == DG_UINT4))
      dg_die(4, dg_format("invalid problem: %s is %s but its packing is %d", name, kDgDtypeNames[dt], p.pack[x]));
    const int a = p.align[x];
    if (a < dg_elem_size(p.dtype[x]) || (a & (a - 1)) != 0)
      dg_die(4, dg_format("invalid problem: align of %s is %d", name, a));
    long long size[DG_MAX_DIMS], stride[DG_MAX_DIMS], lo, hi;   // a scale slot's size along a letter: its blocks
    for (int d = 0; d < p.ndims; ++d) {
      size[d] = dg_extent(p.dims[d], x), stride[d] = p.dims[d].stride[x];
      if (p.pack[x] != DG_PACK_NONE && d == p.pack_dims[x][0]) size[d] = (size[d] + 7) / 8;   // words
    }
    if (p.pack[x] == DG_PACK_DG) {   // one dense run: 128 words a 16 (n) x 64 (k) chunk
      const long long k = p.dims[p.pack_dims[x][0]].size, n = p.dims[p.pack_dims[x][1]].size;
      lo = p.offset[x];
      hi = p.offset[x] + (k + 63) / 64 * ((n + 15) / 16) * 128 - 1;
    } else {
      dg_reach(p.offset[x], p.ndims, size, stride, &lo, &hi);
    }
    if (lo < 0 || hi >= p.span[x])
      dg_die(4, dg_format("invalid problem: %s reaches elements [%lld, %lld] but span is %lld", name, lo, hi, p.span[x]));
  }
  // An e4m3 input (or integer B) has its scales, and only these have; zero points go with integer weights.
  for (int x = DG_A; x <= DG_B; ++x) {
    const int scales = x == DG_A ? DG_A_SCALES : DG_B_SCALES;
    const bool scaled = p.dtype[x] == DG_E4M3 || dg_int_dtype(p.dtype[x]);
    if (scaled != (p.present[scales] != 0))
      dg_die(4, dg_format("invalid problem: %s is %s but slot %s is %spresent", kDgSlotNames[x],
                          kDgDtypeNames[p.dtype[x]], kDgSlotNames[scales], p.present[scales] ? "" : "not "));
  }
  if (p.present[DG_B_ZEROS] && !dg_int_weights(p)) dg_die(4, "invalid problem: B_zeros without integer weights");
  // The baseline's dense temps: A, B and the GEMM's output.
  for (int i = 0; i < 3; ++i) {
    const int x = i == DG_GEMM_OUT ? dg_out_slot(p) : i;
    if (!bl.available || !bl.copy[i]) continue;
    const DgStridedView& v = bl.view[i];
    long long lo, hi;
    if (v.ndims < 1 || v.ndims > DG_MAX_DIMS) dg_die(4, dg_format("invalid baseline: view %s ndims", kDgSlotNames[x]));
    dg_reach(p.offset[x], v.ndims, v.size, v.stride, &lo, &hi);
    if (lo < 0 || hi >= p.span[x] || dg_view_count(v) < 1)
      dg_die(4, dg_format("invalid baseline: view of %s reaches [%lld, %lld], span %lld", kDgSlotNames[x], lo, hi,
                          p.span[x]));
  }
  for (int c = 0; bl.available && c < bl.ncalls; ++c) dg_check_pointer_call(p, bl.calls[c]);
  dg_check_steps(p, bl);
  dg_check_run_time(p, bl);
}

// Device memory whose usable pointer is rounded up to `align` bytes. The extra `align` bytes also keep
// the 1-byte-misaligned API probe inside the allocation.
struct DgCudaFree {
  void operator()(void* ptr) const { cudaFree(ptr); }   // teardown: an error here changes nothing
};
struct DgDeviceBuffer {
  std::unique_ptr<void, DgCudaFree> raw;
  char* ptr = nullptr;
};

static DgDeviceBuffer dg_device_alloc(size_t bytes, size_t align) {
  void* raw = nullptr;
  DG_CUDA(cudaMalloc(&raw, bytes + align));
  DgDeviceBuffer b;
  b.raw.reset(raw);
  b.ptr = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + align - 1) & ~static_cast<uintptr_t>(align - 1));
  return b;
}

// What slot x holds, for its fill (DG_FILL_*): B_zeros' zero points, a scale slot's scales, else data.
static int dg_fill_kind(const DgProblem& p, int x) {
  if (x == DG_B_ZEROS) return p.zero_form == DG_ZEROS_PRESCALED ? DG_FILL_ZERO_PRESCALED : DG_FILL_ZERO;
  return dg_is_scale_slot(x) ? DG_FILL_SCALE : DG_FILL_DATA;
}

// Slot x's buffer at random (dg_store_random: uniform in (-amplitude, amplitude) rounded to the dtype, e4m3's
// wide values, integers' random bits, a scale slot's positive scales, zero points); the device fill draws the same
// values.
static void dg_host_fill_random(std::vector<unsigned char>& buf, int kind, int dtype, long long n, unsigned long long seed,
                                int stream, float amplitude = 1.0f) {
  for (long long i = 0; i < n; ++i)
    dg_store_random(buf.data(), dtype, kind, i, dg_random_bits(seed, stream, i), amplitude);
}

static void dg_device_fill_random(void* buf, int kind, int dtype, long long n, unsigned long long seed, int stream,
                                  cudaStream_t s) {
  dg_fill_random_kernel<<<dg_grid(n), kDgBlock, 0, s>>>(buf, dtype, kind, n, seed, stream);
  DG_CUDA(cudaGetLastError());
}

// Bit patterns written into C and D. Holes get a signaling NaN with a distinctive payload: a kernel that
// writes a hole is caught by the bit compare, and one that reads a hole (beta != 0) turns its output into
// NaN. Poison (C's view when beta == 0, D's view always) is the quiet NaN: a kernel that reads C then fails,
// and so does one that leaves an element of D unwritten. verify's NaN input is the quiet NaN too.
// e4m3 has one NaN a sign and no payload: its sentinel is the negative NaN, its poison the positive one (only A
// and B are e4m3, so only verify's NaN input uses them).
static unsigned dg_sentinel_bits(int dtype) {
  return dtype == DG_F32 ? 0x7FBADBADu : dtype == DG_F16 ? 0x7D5Bu : dtype == DG_E4M3 ? 0xFFu : 0x7FA5u;
}
static unsigned dg_poison_bits(int dtype) {
  return dtype == DG_F32 ? 0x7FC00000u : dtype == DG_F16 ? 0x7E00u : dtype == DG_E4M3 ? 0x7Fu : 0x7FC0u;
}

static void dg_put_bits(unsigned char* buf, int es, long long i, unsigned bits) {
  if (es == 4) {
    const uint32_t b = bits;
    memcpy(buf + i * 4, &b, 4);
  } else if (es == 2) {
    const uint16_t b = static_cast<uint16_t>(bits);
    memcpy(buf + i * 2, &b, 2);
  } else {
    buf[i] = static_cast<unsigned char>(bits);
  }
}

static bool dg_has_bits(const unsigned char* buf, int es, long long i, unsigned bits) {
  if (es == 4) {
    uint32_t b;
    memcpy(&b, buf + i * 4, 4);
    return b == bits;
  }
  if (es == 1) return buf[i] == static_cast<unsigned char>(bits);
  uint16_t b;
  memcpy(&b, buf + i * 2, 2);
  return b == static_cast<uint16_t>(bits);
}

// ------------------------------------------------------------------------------------------------
// verify
// ------------------------------------------------------------------------------------------------

struct DgOptions {
  const char* command = nullptr;
  std::vector<long long> seeds{1, 2, 3};
  long long samples = 256;
  long long repeat = 0;       // verify: launches that must reproduce the first one's bits
  long long warmup = 10;
  long long reps = 50;
  long long baseline = 1;    // bench: 0 times the kernel only (tuning measures many candidates)
  long long roof = 0;        // bench: 1 also times the compute roof (dg_measure_roof)
  std::vector<long long> sizes;   // --m: the run-time sizes to run; empty: dg_verify_sizes / dg_bench_sizes
};

// The sizes a command runs: --m or its default list for a run-time size; for a fixed-size problem one
// entry, 0, which its entry point does not take.
static std::vector<long long> dg_sizes(const DgProblem& p, const DgOptions& opt, bool verify) {
  if (!p.run_time_letter) return {0};
  if (!opt.sizes.empty()) return dg_sizes_within(opt.sizes, LLONG_MIN, LLONG_MAX);
  return verify ? dg_verify_sizes(p, static_cast<unsigned long long>(opt.seeds.empty() ? 0 : opt.seeds.front()))
                : dg_bench_sizes(p);
}

struct DgCaseResult {
  long long m;               // the run-time size (0 for a fixed-size problem)
  long long seed;
  bool shifted;              // base pointers `align` bytes past a 256-byte boundary
  bool nan_input;            // one element of A is NaN: the outputs that sum it must come out NaN
  float alpha, beta;
  bool passed;
  double max_abs_err, rel_err;
  double calc_diff;          // DeepGEMM's metric, 1 - 2 sum(x y) / sum(x^2 + y^2) (dg_calc_diff)
  bool within_acc_bound;     // ||err|| within what f32 evaluation may lose (cancelling sums)
  long long bad_elements;    // finite outputs outside the element bound
  long long nan_elements;    // NaN or Inf outputs where the reference is finite
  long long nan_lost;        // outputs that are not NaN where the reference is (a NaN eaten on the way)
  long long holes_written;   // elements of the output's buffer outside the view whose sentinel changed
  long long first_hole;      // buffer index of the first such element, -1 if none
  long long c_written;       // with D: elements of C's buffer (read only) whose bits changed
  long long ref_mismatch;    // sampled elements where the GPU reference disagrees with the CPU
  bool has_fail;             // first failing output element, in dense order of C's letters:
  long long fail_index[DG_MAX_DIMS];
  double got, want;
};

// Everything one verify run holds: device buffers, their host images and the layout of the output's view.
// Buffers are sized for the largest run-time size; `p`, `m`, `count` and `in_view` are those of the size
// under test.
struct DgVerifyState {
  const DgProblem* p;
  long long m;                              // the run-time size passed to the kernel (0: fixed-size problem)
  DgKernel kernel;
  cudaStream_t stream;
  int out;                                  // the slot the kernel writes: D or C
  long long count;                          // elements of the output's view
  DgDeviceBuffer dev[DG_SLOTS], dev_ref, dev_mag, dev_part, dev_part_abs;
  size_t dev_bytes[DG_SLOTS];               // bytes of dev[x] from dev[x].ptr (room for the shifted pass included)
  DgDeviceBuffer saved[DG_SLOTS];           // each buffer's image while the predecessor holds NaN in it
  int sms;                                  // the predecessor's grid: one warp an SM
  void* ptr[DG_SLOTS];                      // the base pointers this case passes: dev[x].ptr, or shifted; nullptr if absent
  std::vector<unsigned char> host[DG_SLOTS];   // each buffer as uploaded: inputs, C_old, the output's sentinels and poison
  std::vector<unsigned char> host_out;      // the output's buffer as the kernel left it
  std::vector<unsigned char> host_c_after;  // with D: C's buffer after the kernel, which must equal host[DG_C]
  std::vector<double> host_ref, host_mag;
  long long k_terms;                        // products summed per output element
  std::vector<unsigned char> in_view;       // per element of the output's buffer: 1 inside the view
};

// The literal definition, independent of the GPU reference's odometer: for each flat index t over the
// summed letters, decompose it and evaluate offset + sum idx * stride from scratch (idx / block for the scales,
// each term (a * sa) * (b * sb)); then beta * C_old and the epilogue, each operand addressed from the output's
// indices afresh. *magnitude receives the error scale (dg_reference_sum_kernel's mag).
static double dg_host_reference(const DgVerifyState& st, long long o, double alpha, double beta, double* magnitude) {
  const DgProblem& p = *st.p;
  long long idx[DG_MAX_DIMS];
  dg_address(p, DG_C, o, idx);
  long long k_count = 1;
  for (int d = p.nc; d < p.ndims; ++d) k_count *= p.dims[d].size;
  double acc = 0.0, mag = 0.0;
  for (long long t = 0; t < k_count; ++t) {
    long long rest = t;
    for (int d = p.ndims - 1; d >= p.nc; --d) {
      idx[d] = rest % p.dims[d].size;
      rest /= p.dims[d].size;
    }
    long long a = p.offset[DG_A], b = p.offset[DG_B], sa = p.offset[DG_A_SCALES], sb = p.offset[DG_B_SCALES];
    for (int d = 0; d < p.ndims; ++d) {
      const DgDim& dim = p.dims[d];
      a += idx[d] * dim.stride[DG_A];
      b += idx[d] * dim.stride[DG_B];
      sa += idx[d] / dg_block(dim, DG_A_SCALES) * dim.stride[DG_A_SCALES];
      sb += idx[d] / dg_block(dim, DG_B_SCALES) * dim.stride[DG_B_SCALES];
    }
    double va = dg_load(st.host[DG_A].data(), p.dtype[DG_A], a), vb, size = -1.0;
    if (dg_int_weights(p)) {   // the weight dequantized with its scale (and zero point)
      const void* in[DG_SLOTS];
      for (int x = 0; x < DG_SLOTS; ++x) in[x] = st.host[x].data();
      vb = dg_weight(p, in, idx, &size);
    } else {
      vb = dg_load(st.host[DG_B].data(), p.dtype[DG_B], b);
      if (p.present[DG_B_SCALES]) vb *= dg_load(st.host[DG_B_SCALES].data(), p.dtype[DG_B_SCALES], sb);
    }
    if (p.present[DG_A_SCALES]) va *= dg_load(st.host[DG_A_SCALES].data(), p.dtype[DG_A_SCALES], sa);
    const double term = va * vb;
    acc += term;
    mag += size < 0.0 ? std::fabs(term) : std::fabs(va) * size;
  }
  long long at[DG_SLOTS] = {};
  const void* bufs[DG_SLOTS] = {};
  for (int x = DG_C; x <= DG_RESIDUAL; ++x) {
    if (!p.present[x]) continue;
    bufs[x] = st.host[x].data();
    at[x] = p.offset[x];
    for (int d = 0; d < p.nc; ++d) at[x] += idx[d] * p.dims[d].stride[x];
  }
  double out = alpha * acc;
  mag = std::fabs(alpha) * mag;
  if (beta != 0.0) {
    const double c_term = beta * dg_load(bufs[DG_C], p.dtype[DG_C], at[DG_C]);
    out += c_term;
    mag += std::fabs(c_term);
  }
  out = dg_reference_epilogue(p, bufs, at, out, &mag);
  *magnitude = mag;
  return out;
}

// Max that keeps a NaN once one has been seen.
static double dg_max_nan(double a, double b) { return (std::isnan(a) || std::isnan(b)) ? NAN : std::max(a, b); }

// DeepGEMM's accuracy metric over the output (x: the kernel's, y: the reference), from sum(x y) and
// sum(x^2 + y^2): 1 - 2 sum(x y) / sum(x^2 + y^2), 0 when x = y. It is 0 for two all-zero outputs, and NaN
// when an output is NaN or infinite.
static double dg_calc_diff(double sum_xy, double sum_squares) {
  if (sum_squares == 0.0) return sum_xy == 0.0 ? 0.0 : NAN;
  return 1.0 - 2.0 * sum_xy / sum_squares;
}

// An e4m3-input problem also passes only with calc_diff below this (and never with NaN).
static const double kDgFp8MaxCalcDiff = 1e-3;

// C's buffer for one case: the sentinel in its holes; in its view random C_old (beta != 0) or NaN poison (C
// must not be read). Without D it is the output, and its holes must keep the sentinel.
static void dg_fill_c(DgVerifyState& st, long long seed, float beta) {
  const DgProblem& p = *st.p;
  const int type = p.dtype[DG_C], es = dg_elem_size(type);
  std::vector<unsigned char>& c = st.host[DG_C];
  for (long long i = 0; i < p.span[DG_C]; ++i) dg_put_bits(c.data(), es, i, dg_sentinel_bits(type));
  for (long long o = 0; o < st.count; ++o) {
    const long long addr = dg_address(p, DG_C, o, nullptr);
    if (beta == 0.0f) dg_put_bits(c.data(), es, addr, dg_poison_bits(type));
    else dg_store(c.data(), type, addr, dg_uniform(dg_random_bits(static_cast<unsigned long long>(seed), DG_RNG_C, o)));
  }
  DG_CUDA(cudaMemcpyAsync(st.ptr[DG_C], c.data(), c.size(), cudaMemcpyHostToDevice, st.stream));
}

// Where verify's NaN input goes: the element of A that a random output's random summed term reads.
static long long dg_nan_address(const DgVerifyState& st, long long seed) {
  const DgProblem& p = *st.p;
  const unsigned long long s = static_cast<unsigned long long>(seed);
  const long long o = static_cast<long long>(dg_random_bits(s, DG_RNG_NAN, 0) % static_cast<unsigned long long>(st.count));
  long long rest = static_cast<long long>(dg_random_bits(s, DG_RNG_NAN, 1) % static_cast<unsigned long long>(st.k_terms));
  long long at[DG_SLOTS];
  dg_output_addresses(p, o, at, nullptr);
  long long a = at[DG_A];
  for (int d = p.ndims - 1; d >= p.nc; --d) {
    a += (rest % p.dims[d].size) * p.dims[d].stride[DG_A];
    rest /= p.dims[d].size;
  }
  return a;
}

// Copies element i of slot x's host image to the device.
static void dg_upload_element(DgVerifyState& st, int x, long long i) {
  const size_t es = static_cast<size_t>(dg_elem_size(st.p->dtype[x]));
  DG_CUDA(cudaMemcpyAsync(static_cast<char*>(st.ptr[x]) + i * es, st.host[x].data() + i * es, es, cudaMemcpyHostToDevice,
                          st.stream));
}

// Saves every buffer, launches the kernel under test once, fills every buffer with NaN bits and queues
// dg_restore_after_idle_kernel, which puts the saved images back after 50 µs: the kernel launched next in st.stream
// runs right behind a kernel that writes all its buffers. The launch before is there because a kernel's first
// launch loads it (CUDA's lazy module loading) and starts hundreds of µs late, past the restore, so a kernel not
// run before (an alignment fallback, a run-time bucket) would never overlap the writer. Its output is overwritten
// by the restore.
static void dg_launch_predecessor(DgVerifyState& st, float alpha, float beta) {
  DgRestoreList list = {};
  for (int x = 0; x < DG_SLOTS; ++x) {
    if (!st.dev[x].ptr) continue;
    DG_CUDA(cudaMemcpyAsync(st.saved[x].ptr, st.dev[x].ptr, st.dev_bytes[x], cudaMemcpyDeviceToDevice, st.stream));
    list.dst[list.n] = st.dev[x].ptr;
    list.src[list.n] = st.saved[x].ptr;
    list.bytes[list.n] = st.dev_bytes[x];
    ++list.n;
  }
  const cudaError_t loaded = st.kernel(st.ptr, st.m, alpha, beta, st.stream);
  if (loaded != cudaSuccess) dg_die_cuda(loaded, "kernel under test (launch returned)", __LINE__);
  DG_CUDA(cudaGetLastError());
  for (int i = 0; i < list.n; ++i) DG_CUDA(cudaMemsetAsync(list.dst[i], 0xFF, list.bytes[i], st.stream));
  static const cudaError_t carveout = cudaFuncSetAttribute(
      dg_restore_after_idle_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
  DG_CUDA(carveout);
  dg_restore_after_idle_kernel<<<st.sms, 32, 0, st.stream>>>(list, 50000ull);
  DG_CUDA(cudaGetLastError());
}

// One case: fresh C_old (and poisoned output), the reference, the kernel, and every check on what it left.
// nan_input: one element of A is NaN for this case (restored after), so the outputs that sum it must be NaN
// -- an epilogue that drops NaN (fmaxf for relu, say) fails here.
static DgCaseResult dg_verify_case(DgVerifyState& st, const DgOptions& opt, long long seed, float alpha, float beta,
                                   bool nan_input = false) {
  const DgProblem& p = *st.p;
  const int out = st.out, out_type = p.dtype[out], out_es = dg_elem_size(out_type);
  const unsigned sentinel = dg_sentinel_bits(out_type);
  DgCaseResult r = {};
  r.m = st.m;
  r.seed = seed;
  r.nan_input = nan_input;
  r.alpha = alpha;
  r.beta = beta;
  r.first_hole = -1;

  dg_fill_c(st, seed, beta);
  if (out == DG_D) {   // D: the sentinel in its holes, NaN poison in its view (every element must be written)
    std::vector<unsigned char>& d = st.host[DG_D];
    for (long long i = 0; i < p.span[DG_D]; ++i) dg_put_bits(d.data(), out_es, i, sentinel);
    for (long long o = 0; o < st.count; ++o) dg_put_bits(d.data(), out_es, dg_address(p, DG_D, o, nullptr), dg_poison_bits(out_type));
    DG_CUDA(cudaMemcpyAsync(st.ptr[DG_D], d.data(), d.size(), cudaMemcpyHostToDevice, st.stream));
  }
  const int a_es = dg_elem_size(p.dtype[DG_A]);
  long long nan_at = -1;
  unsigned char a_saved[4];
  if (nan_input) {
    nan_at = dg_nan_address(st, seed);
    memcpy(a_saved, st.host[DG_A].data() + nan_at * a_es, a_es);
    dg_put_bits(st.host[DG_A].data(), a_es, nan_at, dg_poison_bits(p.dtype[DG_A]));
    dg_upload_element(st, DG_A, nan_at);
  }

  // The reference reads C_old from the device buffer, so it runs before the kernel under test.
  DgBuffers in;
  for (int x = 0; x < DG_SLOTS; ++x) in.ptr[x] = st.ptr[x];
  const long long chunks = dg_reference_chunks(st.count, st.k_terms);
  double* ref = reinterpret_cast<double*>(st.dev_ref.ptr);
  double* mag = reinterpret_cast<double*>(st.dev_mag.ptr);
  double* part = chunks == 1 ? ref : reinterpret_cast<double*>(st.dev_part.ptr);
  double* part_abs = chunks == 1 ? mag : reinterpret_cast<double*>(st.dev_part_abs.ptr);
  dg_reference_terms_kernel<<<dg_grid(st.count * chunks), kDgBlock, 0, st.stream>>>(p, in, part, part_abs, st.count,
                                                                                     st.k_terms, chunks);
  DG_CUDA(cudaGetLastError());
  dg_reference_sum_kernel<<<dg_grid(st.count), kDgBlock, 0, st.stream>>>(p, in, part, part_abs, ref, mag, st.count,
                                                                          chunks, alpha, beta);
  DG_CUDA(cudaGetLastError());
  DG_CUDA(cudaStreamSynchronize(st.stream));

  dg_launch_predecessor(st, alpha, beta);
  const cudaError_t launched = st.kernel(st.ptr, st.m, alpha, beta, st.stream);
  if (launched != cudaSuccess) dg_die_cuda(launched, "kernel under test (launch returned)", __LINE__);
  DG_CUDA(cudaGetLastError());
  DG_CUDA(cudaStreamSynchronize(st.stream));

  DG_CUDA(cudaMemcpyAsync(st.host_out.data(), st.ptr[out], st.host_out.size(), cudaMemcpyDeviceToHost, st.stream));
  if (out == DG_D)
    DG_CUDA(cudaMemcpyAsync(st.host_c_after.data(), st.ptr[DG_C], st.host_c_after.size(), cudaMemcpyDeviceToHost, st.stream));
  DG_CUDA(cudaMemcpyAsync(st.host_ref.data(), st.dev_ref.ptr, static_cast<size_t>(st.count) * sizeof(double),
                          cudaMemcpyDeviceToHost, st.stream));
  DG_CUDA(cudaMemcpyAsync(st.host_mag.data(), st.dev_mag.ptr, static_cast<size_t>(st.count) * sizeof(double),
                          cudaMemcpyDeviceToHost, st.stream));
  DG_CUDA(cudaStreamSynchronize(st.stream));

  // Outputs against the reference. Two error scales, the larger one applies:
  //  - tol relative to the output (the dtype's tolerance; most problems), and
  //  - what float32 evaluation may lose: 6 sqrt(k) 2^-24 mag, mag = |alpha| sum|a*b| (+ |beta C_old|) carried
  //    through the epilogue (Higham's probabilistic bound for the sum). It only dominates when the sum
  //    cancels (small result, large terms), e.g. stride-0 broadcast over summed letters, where a fixed
  //    relative tolerance would fail correct code.
  //  - for an element of e4m3 inputs, also what the FP8 tensor core may lose: it aligns each k32 step's
  //    products to the largest and keeps about 14 bits, so each of a step's 32 products may lose 2^-13 of the
  //    step's largest, at most 32 2^-13 = 2^-8 of the step's magnitude, and a kernel promotes to f32 after each
  //    step's sum (at least every 128 k): at most 2^-8 mag. One e4m3 value near 448 in a step makes its largest
  //    product dwarf the others (verify draws one in 16 from the whole range). It enters the element check
  //    only: the Frobenius test keeps the f32 bound and the e4m3 tolerance, so a kernel that does not promote
  //    still fails (its error grows with the unpromoted steps).
  //  - for an element of integer weights, also what dequantizing them to the activations' 16-bit type may lose:
  //    the scale rounded to it, then the weight (and, for a float zero point, q - z) rounded, each by at most the
  //    type's unit roundoff u (2^-8 bf16, 2^-11 f16) of the weight's size (dg_weight), so 3 u mag. The mag of
  //    such a problem sums those sizes; an epilogue that compresses the output's scale (a clamp, a small scale)
  //    leaves the tolerance relative to the output below this rounding.
  // Where the reference is NaN (a NaN input), the output must be NaN too; those elements take no part in
  // the norms.
  double sum_ref2 = 0.0, sum_err2 = 0.0, sum_bound2 = 0.0, sum_xy = 0.0, sum_squares = 0.0;
  long long finite_refs = 0;
  const double acc_unit = 6.0 * std::sqrt(static_cast<double>(st.k_terms)) * std::ldexp(1.0, -24);
  const double fp8_unit = dg_fp8_inputs(p) ? 32.0 * std::ldexp(1.0, -13) : 0.0;
  const double dequant_unit = !dg_int_weights(p)             ? 0.0
                              : p.dtype[DG_A] == DG_BF16     ? 3.0 * std::ldexp(1.0, -8)
                              : p.dtype[DG_A] == DG_F16      ? 3.0 * std::ldexp(1.0, -11)
                                                             : 3.0 * std::ldexp(1.0, -24);
  for (long long o = 0; o < st.count; ++o) {
    if (std::isnan(st.host_ref[o])) continue;
    sum_ref2 += st.host_ref[o] * st.host_ref[o];
    ++finite_refs;
  }
  const double rms = finite_refs ? std::sqrt(sum_ref2 / static_cast<double>(finite_refs)) : 0.0;
  long long idx[DG_MAX_DIMS];
  for (long long o = 0; o < st.count; ++o) {
    const long long addr = dg_address(p, out, o, idx);
    const double got = dg_load(st.host_out.data(), out_type, addr), want = st.host_ref[o];
    bool bad;
    if (std::isnan(want)) {
      bad = !std::isnan(got);
      if (bad) {
        ++r.nan_lost;
        r.max_abs_err = NAN;
      }
    } else {
      const double err = std::fabs(got - want);
      const double acc_bound = acc_unit * st.host_mag[o];
      const double element_bound = std::max(acc_bound, std::max(fp8_unit, dequant_unit) * st.host_mag[o]);
      sum_xy += got * want;
      sum_squares += got * got + want * want;
      sum_bound2 += acc_bound * acc_bound;
      if (!std::isfinite(got)) {
        ++r.nan_elements;
        bad = true;
      } else {
        bad = !(err <= std::max(8.0 * p.tol * (std::fabs(want) + rms), element_bound));
        if (bad) ++r.bad_elements;
      }
      r.max_abs_err = dg_max_nan(r.max_abs_err, err);
      sum_err2 += err * err;
    }
    if (bad && !r.has_fail) {
      r.has_fail = true;
      std::copy(idx, idx + p.nc, r.fail_index);
      r.got = got;
      r.want = want;
    }
  }
  r.rel_err = sum_ref2 > 0.0 ? std::sqrt(sum_err2 / sum_ref2) : std::sqrt(sum_err2);
  r.calc_diff = dg_calc_diff(sum_xy, sum_squares);
  r.within_acc_bound = sum_err2 <= sum_bound2;

  // Holes: every element of the output's buffer outside the view must still hold the sentinel.
  for (long long i = 0; i < p.span[out]; ++i) {
    if (st.in_view[i] || dg_has_bits(st.host_out.data(), out_es, i, sentinel)) continue;
    if (r.holes_written++ == 0) r.first_hole = i;
  }
  // With D, C is only read: all of its buffer must come out as it went in.
  if (out == DG_D) {
    const int c_es = dg_elem_size(p.dtype[DG_C]);
    for (long long i = 0; i < p.span[DG_C]; ++i)
      if (memcmp(st.host_c_after.data() + i * c_es, st.host[DG_C].data() + i * c_es, c_es) != 0) ++r.c_written;
  }

  // The CPU check of the GPU reference on `samples` elements: the first, the last and random ones
  // (all of them when there are no more than `samples`).
  const bool all = opt.samples >= st.count;
  const long long n_samples = all ? st.count : opt.samples;
  for (long long j = 0; j < n_samples; ++j) {
    long long o;
    if (all) o = j;
    else if (j == 0) o = 0;
    else if (j == 1) o = st.count - 1;
    else o = static_cast<long long>(dg_random_bits(seed, DG_RNG_SAMPLES, j) % static_cast<unsigned long long>(st.count));
    double magnitude;
    const double cpu = dg_host_reference(st, o, alpha, beta, &magnitude);
    const bool agree = std::isnan(cpu) ? std::isnan(st.host_ref[o])
                                       : std::fabs(st.host_ref[o] - cpu) <= 1e-9 * (std::fabs(cpu) + magnitude);
    if (!agree && r.ref_mismatch++ == 0)
      fprintf(stderr, "dg_harness: GPU reference disagrees with the CPU at output element %lld: %.17g vs %.17g\n", o,
              st.host_ref[o], cpu);
  }
  if (nan_at >= 0) {   // A as it was, for the cases after this one
    memcpy(st.host[DG_A].data() + nan_at * a_es, a_saved, a_es);
    dg_upload_element(st, DG_A, nan_at);
  }

  r.passed = r.nan_elements == 0 && r.nan_lost == 0 && r.bad_elements == 0 && (r.rel_err <= p.tol || r.within_acc_bound) &&
             r.holes_written == 0 && r.c_written == 0 && r.ref_mismatch == 0 &&
             (!dg_fp8_inputs(p) || r.calc_diff < kDgFp8MaxCalcDiff);
  fprintf(stderr,
          "dg_harness: verify %sseed=%lld alpha=%g beta=%g%s: %s rel_err=%.3g calc_diff=%.3g max_abs_err=%.3g bad=%lld "
          "nan=%lld nan_lost=%lld holes_written=%lld c_written=%lld ref_mismatch=%lld\n",
          p.run_time_letter ? dg_format("%c=%lld ", p.run_time_letter, st.m).c_str() : "", seed, alpha, beta,
          nan_input ? " (NaN input)" : "", r.passed ? "PASS" : "FAIL", r.rel_err, r.calc_diff, r.max_abs_err, r.bad_elements,
          r.nan_elements, r.nan_lost, r.holes_written, r.c_written, r.ref_mismatch);
  if (r.has_fail) fprintf(stderr, "dg_harness:   first bad element: got %.9g, want %.9g\n", r.got, r.want);
  if (r.holes_written) fprintf(stderr, "dg_harness:   first written hole: buffer element %lld\n", r.first_hole);
  return r;
}

// Calls the kernel with an argument it must reject. The call must return cudaErrorInvalidValue without
// touching the device: a non-sticky error it may have left behind is cleared by reading it; a sticky one
// (a fault) cannot be cleared and ends the run.
static bool dg_expect_rejected(const DgVerifyState& st, void* const bufs[DG_SLOTS], long long m, float beta,
                               const char* what) {
  const cudaError_t e = st.kernel(bufs, m, st.p->alpha, beta, st.stream);
  (void)cudaGetLastError();
  const cudaError_t sync = cudaStreamSynchronize(st.stream);
  if (sync != cudaSuccess)
    dg_die(4, dg_format("kernel under test faulted when called with %s (it must return cudaErrorInvalidValue): %s",
                        what, cudaGetErrorString(sync)));
  if (e != cudaErrorInvalidValue)
    fprintf(stderr, "dg_harness: called with %s the kernel returned %s, not cudaErrorInvalidValue\n", what,
            cudaGetErrorName(e));
  return e == cudaErrorInvalidValue;
}

// The API contract's probes, one argument wrong at a time: a null pointer, then a pointer 1 byte past its
// buffer's (aligned) start, for every buffer the problem has (the second where the promised alignment is more
// than 1 byte). C may be null only with D and beta == 0, so
// its null probe passes beta 1 when the problem has D.
struct DgApiProbes {
  std::vector<std::pair<std::string, bool>> probes;   // what was passed, whether it was rejected
  bool null_rejected = true, misaligned_rejected = true;
  bool null_c_accepted = true;                        // with D: C = nullptr with beta == 0 ran
};

static DgApiProbes dg_api_probes(const DgVerifyState& st, long long m) {
  const DgProblem& p = *st.p;
  DgApiProbes api;
  for (int misaligned = 0; misaligned <= 1; ++misaligned) {
    for (int x = 0; x < DG_SLOTS; ++x) {
      if (!p.present[x]) continue;
      void* bufs[DG_SLOTS];
      for (int y = 0; y < DG_SLOTS; ++y) bufs[y] = st.dev[y].ptr;
      float beta = p.beta;
      std::string what;
      if (misaligned) {
        if (p.align[x] < 2) continue;   // a 1-byte promise (e4m3) takes every address
        bufs[x] = st.dev[x].ptr + 1;
        what = std::string(kDgSlotNames[x]) + " misaligned by 1 byte";
      } else {
        bufs[x] = nullptr;
        what = std::string(kDgSlotNames[x]) + " = nullptr";
        if (x == DG_C && p.present[DG_D]) {
          beta = p.beta != 0.0f ? p.beta : 1.0f;
          what += dg_format(" with beta = %g", beta);
        }
      }
      const bool rejected = dg_expect_rejected(st, bufs, m, beta, what.c_str());
      api.probes.emplace_back(what, rejected);
      (misaligned ? api.misaligned_rejected : api.null_rejected) &= rejected;
    }
  }
  if (p.present[DG_D]) {   // C = nullptr with beta == 0 is allowed then: it must run (its output is not checked)
    void* bufs[DG_SLOTS];
    for (int y = 0; y < DG_SLOTS; ++y) bufs[y] = st.dev[y].ptr;
    bufs[DG_C] = nullptr;
    const cudaError_t e = st.kernel(bufs, m, p.alpha, 0.0f, st.stream);
    const cudaError_t sync = cudaStreamSynchronize(st.stream);
    if (sync != cudaSuccess)
      dg_die(4, dg_format("kernel under test faulted when called with C = nullptr and beta = 0 (allowed with D): %s",
                          cudaGetErrorString(sync)));
    (void)cudaGetLastError();
    api.null_c_accepted = e == cudaSuccess;
    if (e != cudaSuccess)
      fprintf(stderr, "dg_harness: called with C = nullptr and beta = 0 (allowed with D) the kernel returned %s\n",
              cudaGetErrorName(e));
  }
  return api;
}

static void dg_json_fail(DgJson& j, const DgProblem& p, const DgCaseResult& r) {
  if (!r.has_fail) { j.null("first_fail"); return; }
  j.begin("first_fail");
  if (p.run_time_letter) j.integer("m", r.m);
  j.integer("seed", r.seed);
  j.num("alpha", r.alpha);
  j.num("beta", r.beta);
  if (r.nan_input) j.boolean("nan_input", true);
  j.begin("index");
  for (int d = 0; d < p.nc; ++d) {
    const char letter[2] = {p.dims[d].letter, '\0'};
    j.integer(letter, r.fail_index[d]);
  }
  j.end();
  j.num("got", r.got);
  j.num("want", r.want);
  j.end();
}

// Opens a result object with the fields verify and bench share.
static void dg_json_header(DgJson& j, const char* command, const DgProblem& p, const cudaDeviceProp& prop) {
  j.begin();
  j.integer("schema_version", DG_REPORT_SCHEMA_VERSION);
  j.str("command", command);
  j.str("name", p.name);
  j.str("arch", p.arch);
  j.str("device", prop.name);
  j.str("cc", dg_format("%d.%d", prop.major, prop.minor).c_str());
  j.str("dtype", kDgDtypeNames[p.dtype[DG_A]]);
  if (dg_int_weights(p)) j.str("weights", kDgDtypeNames[p.dtype[DG_B]]);
  j.str("output", kDgSlotNames[dg_out_slot(p)]);
  j.begin_array("epilogue");
  for (int s = 0; s < p.nsteps; ++s) j.str(nullptr, p.steps[s].text);
  j.end_array();
}

// Run-to-run determinism: from the same inputs and the same output buffer (what `start` holds), `repeats`
// launches must leave the output's whole buffer bit-identical to the first. Returns how many launches differed.
static long long dg_repeat_check(DgVerifyState& st, const std::vector<unsigned char>& start, float alpha, float beta,
                                 long long repeats) {
  std::vector<unsigned char> first(start.size()), again(start.size());
  long long differed = 0;
  for (long long r = 0; r <= repeats; ++r) {
    DG_CUDA(cudaMemcpyAsync(st.ptr[st.out], start.data(), start.size(), cudaMemcpyHostToDevice, st.stream));
    const cudaError_t launched = st.kernel(st.ptr, st.m, alpha, beta, st.stream);
    if (launched != cudaSuccess) dg_die_cuda(launched, "kernel under test (launch returned)", __LINE__);
    DG_CUDA(cudaGetLastError());
    std::vector<unsigned char>& out = r == 0 ? first : again;
    DG_CUDA(cudaMemcpyAsync(out.data(), st.ptr[st.out], out.size(), cudaMemcpyDeviceToHost, st.stream));
    DG_CUDA(cudaStreamSynchronize(st.stream));
    if (r > 0 && memcmp(first.data(), again.data(), first.size()) != 0) ++differed;
  }
  return differed;
}

// Points the state at one run-time size: the problem there, its m and which elements of the output's buffer
// its view covers (the rest, the rows past m included, are holes whose sentinel must survive).
static void dg_use_size(DgVerifyState& st, const DgProblem& at, long long m) {
  if (st.p == &at) return;   // a fixed-size problem's one size: nothing changes between seeds
  st.p = &at;
  st.m = m;
  st.count = dg_c_count(at);
  st.in_view.assign(static_cast<size_t>(at.span[st.out]), 0);
  for (long long o = 0; o < st.count; ++o) {
    unsigned char& mark = st.in_view[dg_address(at, st.out, o, nullptr)];
    if (mark)
      dg_die(4, dg_format("invalid problem: %s's view aliases (element %lld is reached twice)", kDgSlotNames[st.out], o));
    mark = 1;
  }
}

// One run-time size's outcome (the whole problem's, for a fixed-size one).
struct DgSizeResult {
  long long m;
  std::vector<DgCaseResult> runs;
  long long repeat_differed = 0;
  bool passed = true;
  double max_abs_err = 0.0, rel_err = 0.0, calc_diff = 0.0;   // the worst case's
  int first_fail = -1;        // index into runs
};

static void dg_summarize(DgSizeResult& s) {
  s.passed = s.repeat_differed == 0;
  for (size_t i = 0; i < s.runs.size(); ++i) {
    const DgCaseResult& r = s.runs[i];
    s.passed = s.passed && r.passed;
    s.max_abs_err = dg_max_nan(s.max_abs_err, r.max_abs_err);
    s.rel_err = dg_max_nan(s.rel_err, r.rel_err);
    s.calc_diff = dg_max_nan(s.calc_diff, r.calc_diff);
    if (s.first_fail < 0 && r.has_fail) s.first_fail = static_cast<int>(i);
  }
}

static void dg_json_run(DgJson& j, const DgProblem& p, const DgCaseResult& r) {
  j.begin();
  if (p.run_time_letter) j.integer("m", r.m);
  j.integer("seed", r.seed);
  j.boolean("shifted", r.shifted);
  if (p.nsteps > 0) j.boolean("nan_input", r.nan_input);
  j.num("alpha", r.alpha);
  j.num("beta", r.beta);
  j.boolean("passed", r.passed);
  j.num("max_abs_err", r.max_abs_err);
  j.num("rel_err", r.rel_err);
  j.num("calc_diff", r.calc_diff);
  j.boolean("within_acc_bound", r.within_acc_bound);
  j.integer("bad_elements", r.bad_elements);
  j.integer("nan_elements", r.nan_elements);
  if (p.nsteps > 0) j.integer("nan_lost", r.nan_lost);
  j.integer("holes_written", r.holes_written);
  if (r.first_hole >= 0) j.integer("first_hole", r.first_hole); else j.null("first_hole");
  if (p.present[DG_D]) j.integer("c_written", r.c_written);
  j.integer("ref_mismatch", r.ref_mismatch);
  dg_json_fail(j, p, r);
  j.end();
}

static void dg_json_run_time_range(DgJson& j, const DgProblem& p) {
  const char letter[2] = {p.run_time_letter, '\0'};
  j.begin("dynamic");
  j.str("letter", letter);
  j.integer("lo", p.run_time_lo);
  j.integer("hi", dg_run_time_hi(p));
  j.end();
}

// The mean square of an input element as verify draws it, its scale included (dg_store_random): 1/3 for
// uniform (-1, 1); for e4m3 the wide patterns' share added, and the scales' mean square (E[m^2] = 7/3 for m
// uniform in [1, 2), times the mean of 4^e over e in -10..-3) multiplied in.
static double dg_input_mean_square(const DgProblem& p, int x) {
  double scale = 0.0;   // the scales' mean square
  for (int e = -10; e <= -3; ++e) scale += std::ldexp(1.0, 2 * e) / 8.0 * 7.0 / 3.0;
  if (x == DG_B && dg_int_weights(p)) {   // (q - z)^2 s^2 over the values drawn: q and integer z uniform
    const int dt = p.dtype[DG_B];
    const int n = dt == DG_INT4 || dt == DG_UINT4 ? 16 : 256, lo = dt == DG_INT4 || dt == DG_INT8 ? -n / 2 : 0;
    const bool subtract = p.present[DG_B_ZEROS] && p.zero_form == DG_ZEROS_SUBTRACT;
    const int nz = !subtract ? 1 : p.dtype[DG_B_ZEROS] == DG_UINT8 ? 256 : 16;   // float zeros: about [0, 16)
    double w2 = 0.0;
    for (int q = lo; q < lo + n; ++q)
      for (int z = 0; z < nz; ++z) w2 += static_cast<double>((q - z) * (q - z)) / (static_cast<double>(n) * nz);
    return w2 * scale;
  }
  if (p.dtype[x] != DG_E4M3) return 1.0 / 3.0;
  double wide = 0.0;   // the mean square of the 254 finite e4m3 values
  unsigned char bits;
  for (unsigned b = 0; b < 256; ++b) {
    if (dg_e4m3_is_nan(b)) continue;
    bits = static_cast<unsigned char>(b);
    const double v = dg_load(&bits, DG_E4M3, 0);
    wide += v * v / 254.0;
  }
  const double narrow = (1.0 - 1.0 / kDgE4m3WideOneIn) / 3.0 + wide / kDgE4m3WideOneIn;
  return p.present[x == DG_A ? DG_A_SCALES : DG_B_SCALES] ? narrow * scale : narrow;
}

// The typical size of alpha * A.B with verify's inputs (uniform in (-1, 1): a product has variance 1/9; e4m3
// inputs with their scales: dg_input_mean_square): bias and residual are drawn at that size, so that a forgotten
// or misplaced one shows beside the product.
static float dg_additive_amplitude(const DgProblem& p, long long k_terms) {
  const double k = static_cast<double>(k_terms);
  const double typical = dg_fp8_inputs(p) || dg_int_weights(p)
                             ? std::sqrt(k * dg_input_mean_square(p, DG_A) * dg_input_mean_square(p, DG_B))
                             : std::sqrt(k) / 3.0;
  return static_cast<float>(std::max(1.0, std::fabs(p.alpha) * typical));
}

static int dg_verify(const DgProblem& p, DgKernel kernel, const DgOptions& opt, const cudaDeviceProp& prop) {
  const std::vector<long long> sizes = dg_sizes(p, opt, true);
  std::vector<DgProblem> problems;   // the problem at each size, kept alive for st.p
  for (const long long m : sizes) problems.push_back(dg_problem_at(p, m));

  // Buffers for the largest size (the problem as given), allocated once.
  DgVerifyState st;
  st.p = nullptr;
  st.kernel = kernel;
  st.out = dg_out_slot(p);
  st.sms = prop.multiProcessorCount;
  DG_CUDA(cudaStreamCreate(&st.stream));
  for (int x = 0; x < DG_SLOTS; ++x) {
    st.ptr[x] = nullptr;
    if (!p.present[x]) continue;
    // Room for the shifted pass: base pointers `align` bytes past a 256-byte boundary.
    st.dev_bytes[x] = dg_buffer_bytes(p, x) + p.align[x];
    st.dev[x] = dg_device_alloc(st.dev_bytes[x], std::max<size_t>(p.align[x], 16));
    st.saved[x] = dg_device_alloc(st.dev_bytes[x], 16);
    st.ptr[x] = st.dev[x].ptr;
    st.host[x].resize(dg_buffer_bytes(p, x));
  }
  const long long max_count = dg_c_count(p);
  st.dev_ref = dg_device_alloc(static_cast<size_t>(max_count) * sizeof(double), sizeof(double));
  st.dev_mag = dg_device_alloc(static_cast<size_t>(max_count) * sizeof(double), sizeof(double));
  // The reference's runs (dg_reference_chunks): count * chunks < 2 * kDgRefThreads whenever chunks > 1.
  st.dev_part = dg_device_alloc(static_cast<size_t>(2 * kDgRefThreads) * sizeof(double), sizeof(double));
  st.dev_part_abs = dg_device_alloc(static_cast<size_t>(2 * kDgRefThreads) * sizeof(double), sizeof(double));
  st.host_out.resize(dg_buffer_bytes(p, st.out));
  if (st.out == DG_D) st.host_c_after.resize(dg_buffer_bytes(p, DG_C));
  st.host_ref.resize(static_cast<size_t>(max_count));
  st.host_mag.resize(static_cast<size_t>(max_count));
  st.k_terms = 1;
  for (int d = p.nc; d < p.ndims; ++d) st.k_terms *= p.dims[d].size;
  const long long hi = dg_run_time_hi(p);
  dg_use_size(st, p, hi);

  // The API contract first: a kernel that faults here leaves no device to verify on anyway.
  const DgApiProbes api = dg_api_probes(st, hi);
  // A run-time size outside [lo, hi] must be refused before anything runs: the buffers are sized for hi.
  std::vector<std::pair<long long, bool>> m_probes;
  bool api_m = true;
  if (p.run_time_letter) {
    void* bufs[DG_SLOTS];
    for (int x = 0; x < DG_SLOTS; ++x) bufs[x] = st.dev[x].ptr;
    for (const long long m : dg_sizes_within({-1, 0, p.run_time_lo - 1, hi + 1}, LLONG_MIN, LLONG_MAX)) {
      const std::string what = dg_format("%c = %lld (outside %lld..%lld)", p.run_time_letter, m, p.run_time_lo, hi);
      const bool rejected = dg_expect_rejected(st, bufs, m, p.beta, what.c_str());
      m_probes.emplace_back(m, rejected);
      api_m = api_m && rejected;
    }
  }

  // Fresh inputs for `seed` (A, B and the epilogue's views), uploaded to where st.ptr points. They cover the
  // largest size: every size below reads a part of them, so one upload serves them all.
  const float additive = dg_additive_amplitude(p, st.k_terms);
  const auto upload_inputs = [&](long long seed) {
    const int inputs[] = {DG_A, DG_B, DG_BIAS, DG_SCALE, DG_RESIDUAL, DG_A_SCALES, DG_B_SCALES, DG_B_ZEROS};
    const int streams[] = {DG_RNG_A, DG_RNG_B, DG_RNG_BIAS, DG_RNG_SCALE, DG_RNG_RESIDUAL, DG_RNG_A_SCALES,
                           DG_RNG_B_SCALES, DG_RNG_B_ZEROS};
    for (int i = 0; i < 8; ++i) {
      const int x = inputs[i];
      if (!p.present[x]) continue;
      dg_host_fill_random(st.host[x], dg_fill_kind(p, x), p.dtype[x], p.span[x], static_cast<unsigned long long>(seed),
                          streams[i], x == DG_BIAS || x == DG_RESIDUAL ? additive : 1.0f);
      DG_CUDA(cudaMemcpyAsync(st.ptr[x], st.host[x].data(), st.host[x].size(), cudaMemcpyHostToDevice, st.stream));
    }
  };
  std::vector<DgSizeResult> results(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) results[i].m = sizes[i];
  for (const long long seed : opt.seeds) {
    upload_inputs(seed);
    for (size_t i = 0; i < sizes.size(); ++i) {
      dg_use_size(st, problems[i], sizes[i]);
      std::vector<DgCaseResult>& runs = results[i].runs;
      runs.push_back(dg_verify_case(st, opt, seed, p.alpha, p.beta));
      if (p.beta != 0.0f) runs.push_back(dg_verify_case(st, opt, seed, p.alpha, 0.0f));
      if (seed != opt.seeds.front()) continue;
      if (opt.repeat > 0) {
        // The output as the cases left it is a valid start (finite, sentinels in the holes); with D, C gets
        // a finite C_old again (the beta == 0 case poisoned it).
        if (st.out == DG_D) dg_fill_c(st, seed, p.beta);
        std::vector<unsigned char> start(st.host_out.size());
        DG_CUDA(cudaMemcpy(start.data(), st.ptr[st.out], start.size(), cudaMemcpyDeviceToHost));
        results[i].repeat_differed = dg_repeat_check(st, start, p.alpha, p.beta, opt.repeat);
      }
      // With an epilogue, NaN must get through it: one case with a NaN in A.
      if (p.nsteps > 0) runs.push_back(dg_verify_case(st, opt, seed, p.alpha, p.beta, true));
    }
  }
  // cudaMalloc gives 256-byte aligned pointers, so the cases above take a kernel's fast path. When the spec
  // promises less than 16 bytes for some operand, one more case passes base pointers exactly `align` bytes
  // past a 256-byte boundary (still what the spec promises): the run-time fallbacks get verified too.
  bool shift = false;
  for (int x = 0; x < DG_SLOTS; ++x) shift |= p.present[x] && p.align[x] < 16;
  if (shift && !opt.seeds.empty()) {
    const long long seed = opt.seeds.front() + 1000003;
    for (int x = 0; x < DG_SLOTS; ++x)
      if (p.present[x]) st.ptr[x] = st.dev[x].ptr + (p.align[x] < 256 ? p.align[x] : 0);
    upload_inputs(seed);
    for (size_t i = 0; i < sizes.size(); ++i) {
      dg_use_size(st, problems[i], sizes[i]);
      results[i].runs.push_back(dg_verify_case(st, opt, seed, p.alpha, p.beta));
      results[i].runs.back().shifted = true;
    }
  }
  DG_CUDA(cudaStreamDestroy(st.stream));

  // The whole: every size's cases, the worst size's errors, the first failure in size order.
  bool passed = api.null_rejected && api.misaligned_rejected && api.null_c_accepted && api_m;
  double max_abs_err = 0.0, rel_err = 0.0, calc_diff = 0.0;
  long long repeat_differed = 0;
  const DgCaseResult* first_fail = nullptr;
  for (DgSizeResult& s : results) {
    dg_summarize(s);
    passed = passed && s.passed;
    max_abs_err = dg_max_nan(max_abs_err, s.max_abs_err);
    rel_err = dg_max_nan(rel_err, s.rel_err);
    calc_diff = dg_max_nan(calc_diff, s.calc_diff);
    repeat_differed += s.repeat_differed;
    if (!first_fail && s.first_fail >= 0) first_fail = &s.runs[s.first_fail];
  }

  DgJson j;
  dg_json_header(j, "verify", p, prop);
  j.boolean("passed", passed);
  j.num("tol", p.tol);
  j.num("max_abs_err", max_abs_err);
  j.num("rel_err", rel_err);
  j.num("calc_diff", calc_diff);
  if (first_fail) dg_json_fail(j, p, *first_fail); else j.null("first_fail");
  j.boolean("api_null_rejected", api.null_rejected);
  j.boolean("api_misaligned_rejected", api.misaligned_rejected);
  if (p.present[DG_D]) j.boolean("api_null_c_accepted", api.null_c_accepted);
  j.begin_array("api_probes");
  for (const auto& probe : api.probes) {
    j.begin();
    j.str("probe", probe.first.c_str());
    j.boolean("rejected", probe.second);
    j.end();
  }
  j.end_array();
  j.integer("repeat", opt.repeat);
  j.integer("repeat_differed", repeat_differed);  // launches whose output bits differed from the first
  j.begin_array("runs");
  for (const DgSizeResult& s : results)
    for (const DgCaseResult& r : s.runs) dg_json_run(j, p, r);
  j.end_array();
  if (p.run_time_letter) {
    dg_json_run_time_range(j, p);
    j.boolean("api_m_rejected", api_m);
    j.begin_array("api_m_probes");
    for (const auto& probe : m_probes) {
      j.begin();
      j.integer("m", probe.first);
      j.boolean("rejected", probe.second);
      j.end();
    }
    j.end_array();
    j.begin_array("m_cases");
    for (const DgSizeResult& s : results) {
      j.begin();
      j.integer("m", s.m);
      j.boolean("passed", s.passed);
      j.num("max_abs_err", s.max_abs_err);
      j.num("rel_err", s.rel_err);
      j.num("calc_diff", s.calc_diff);
      if (s.first_fail >= 0) dg_json_fail(j, p, s.runs[s.first_fail]); else j.null("first_fail");
      j.integer("repeat_differed", s.repeat_differed);
      j.end();
    }
    j.end_array();
  }
  j.end();
  dg_print_json(j.text());
  if (p.run_time_letter) {
    for (const DgSizeResult& s : results)
      if (!s.passed) fprintf(stderr, "dg_harness: verify %s: FAILED at %c = %lld\n", p.name, p.run_time_letter, s.m);
  }
  fprintf(stderr, "dg_harness: verify %s: %s\n", p.name, passed ? "PASSED" : "FAILED");
  return passed ? 0 : 1;
}

// ------------------------------------------------------------------------------------------------
// bench
// ------------------------------------------------------------------------------------------------

// cuBLAS, loaded at run time so that neither its headers nor its library are needed to build. The
// types mirror cublas_api.h: handles are pointers, enums are ints, statuses are ints (0 = success).
struct DgCublas {
  typedef int (*CreateFn)(void** handle);
  typedef int (*SetStreamFn)(void* handle, cudaStream_t stream);
  typedef int (*DestroyFn)(void* handle);
  typedef int (*SetWorkspaceFn)(void* handle, void* workspace, size_t bytes);
  typedef int (*GemmStridedBatchedExFn)(void* handle, int transa, int transb, int m, int n, int k,
                                        const void* alpha, const void* A, int a_type, int lda, long long stride_a,
                                        const void* B, int b_type, int ldb, long long stride_b, const void* beta,
                                        void* C, int c_type, int ldc, long long stride_c, int batch_count,
                                        int compute_type, int algo);
  typedef int (*GemmBatchedExFn)(void* handle, int transa, int transb, int m, int n, int k, const void* alpha,
                                 const void* const A[], int a_type, int lda, const void* const B[], int b_type, int ldb,
                                 const void* beta, void* const C[], int c_type, int ldc, int batch_count,
                                 int compute_type, int algo);
  CreateFn create = nullptr;
  SetStreamFn set_stream = nullptr;
  DestroyFn destroy = nullptr;
  SetWorkspaceFn set_workspace = nullptr;   // optional (cuBLAS >= 11): a fixed workspace keeps graph capture free of allocations
  GemmStridedBatchedExFn gemm = nullptr;
  GemmBatchedExFn gemm_batched = nullptr;   // the pointer-array calls'; a cuBLAS without it reports them unavailable
};

enum { DG_CUDA_R_32F = 0, DG_CUDA_R_16F = 2, DG_CUDA_R_16BF = 14, DG_CUBLAS_COMPUTE_32F = 68, DG_CUBLAS_GEMM_DEFAULT = -1 };

static int dg_cublas_type(int dtype) {
  return dtype == DG_F16 ? DG_CUDA_R_16F : dtype == DG_BF16 ? DG_CUDA_R_16BF : DG_CUDA_R_32F;
}

// cublasStatus_t's names, for the reason a baseline is unavailable.
static std::string dg_cublas_status(int status) {
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
static bool dg_cublas_symbol(void* lib, const char* symbol, Fn* fn, std::string* why) {
  void* address = dlsym(lib, symbol);
  if (!address) {
    *why = std::string("cuBLAS lacks ") + symbol;
    return false;
  }
  *fn = reinterpret_cast<Fn>(address);
  return true;
}

// Fills *cb and returns true, or returns false with the reason in *why. The library stays loaded until
// the process exits: unloading cuBLAS while its runtime state lives is not safe.
static bool dg_load_cublas(DgCublas* cb, std::string* why) {
  std::vector<std::string> names;
  const char* env = getenv("DEEPGEMM_CUBLAS");
  if (env && *env) names.push_back(env);
  for (const char* n : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) names.push_back(n);
  void* lib = nullptr;
  std::string tried;
  for (const std::string& n : names) {
    lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
    const char* err = dlerror();
    tried += (tried.empty() ? "" : "; ") + (err ? std::string(err) : n);
  }
  if (!lib) {
    *why = "cannot load cuBLAS (set DEEPGEMM_CUBLAS to its path): " + tried;
    return false;
  }
  cb->set_workspace = reinterpret_cast<DgCublas::SetWorkspaceFn>(dlsym(lib, "cublasSetWorkspace_v2"));
  cb->gemm_batched = reinterpret_cast<DgCublas::GemmBatchedExFn>(dlsym(lib, "cublasGemmBatchedEx"));
  return dg_cublas_symbol(lib, "cublasCreate_v2", &cb->create, why) &&
         dg_cublas_symbol(lib, "cublasSetStream_v2", &cb->set_stream, why) &&
         dg_cublas_symbol(lib, "cublasDestroy_v2", &cb->destroy, why) &&
         dg_cublas_symbol(lib, "cublasGemmStridedBatchedEx", &cb->gemm, why);
}

// nsets copies of every buffer, so that consecutive launches do not find their data in L2.
struct DgBenchSets {
  int nsets;
  std::vector<DgDeviceBuffer> buf[DG_SLOTS];   // empty for a slot the problem lacks

  // Set i's base pointers by slot, as the kernel gets them.
  void bases(int i, void* out[DG_SLOTS]) const {
    for (int x = 0; x < DG_SLOTS; ++x) out[x] = buf[x].empty() ? nullptr : buf[x][i].ptr;
  }
};

// How a baseline copy moves a view: in units of `unit` bytes, the view counted in them.
struct DgCopyUnits {
  int unit;
  DgStridedView v;
};

// The widest unit (16, 8 or 4 bytes, else the element) a copy of view v (elements of es bytes) between `base` and
// a dense temp at `temp` moves: one that the innermost dim (stride 1) holds a whole number of, every other stride
// a whole number of, and both addresses are aligned to. The copy then reads and writes 16-byte vectors along a
// contiguous innermost dim, and divides its index once a unit.
static DgCopyUnits dg_copy_units(const DgStridedView& v, int es, const void* base, const void* temp) {
  const int last = v.ndims - 1;
  for (int unit = 16; unit > es; unit /= 2) {
    const long long per = unit / es;
    bool fits = v.stride[last] == 1 && v.size[last] % per == 0 &&
                reinterpret_cast<uintptr_t>(base) % unit == 0 && reinterpret_cast<uintptr_t>(temp) % unit == 0;
    for (int d = 0; d < last; ++d) fits = fits && (v.size[d] == 1 || v.stride[d] % per == 0);
    if (!fits) continue;
    DgCopyUnits u = {unit, v};
    u.v.size[last] /= per;
    for (int d = 0; d < last; ++d) u.v.stride[d] /= per;
    return u;
  }
  return {es, v};
}

template <typename Bits>
static void dg_launch_copy(bool gather, const DgStridedView& v, char* base, char* temp, cudaStream_t stream) {
  const long long n = dg_view_count(v);
  const Bits* from = reinterpret_cast<const Bits*>(gather ? base : temp);
  Bits* to = reinterpret_cast<Bits*>(gather ? temp : base);
  if (n <= static_cast<long long>(UINT_MAX)) {
    if (gather) dg_gather_kernel<unsigned><<<dg_grid(n), kDgBlock, 0, stream>>>(from, v, to, n);
    else dg_scatter_kernel<unsigned><<<dg_grid(n), kDgBlock, 0, stream>>>(from, v, to, n);
  } else {
    if (gather) dg_gather_kernel<long long><<<dg_grid(n), kDgBlock, 0, stream>>>(from, v, to, n);
    else dg_scatter_kernel<long long><<<dg_grid(n), kDgBlock, 0, stream>>>(from, v, to, n);
  }
}

// Why a baseline call did not run, from run()'s status: cuBLAS's, or one of these.
enum { DG_CALL_TOO_BIG = -1, DG_CALL_NO_BATCHED = -2 };
static std::string dg_call_error(int status) {
  if (status == DG_CALL_TOO_BIG) return "a cuBLAS dimension exceeds int";
  if (status == DG_CALL_NO_BATCHED) return "cuBLAS lacks cublasGemmBatchedEx";
  return "cuBLAS returned " + dg_cublas_status(status);
}

// The baseline: gathers into dense temps where Python asked for them, one cuBLAS call into the output view
// (D when the problem has one, with beta 0), the scatter of the output, then the elementwise pass when the
// problem needs one (beta * C with D, and the steps). A pointer-array call takes the views in place, its
// pointer arrays built by set_pointers for the size under test.
struct DgBaselineRunner {
  const DgProblem* p;
  const DgBaseline* bl;
  const DgBenchSets* sets;
  DgCublas cublas;
  void* handle = nullptr;
  DgDeviceBuffer temp[3];    // A, B and the GEMM's output, where copied
  // Per pointer-array call: for each set, the device pointers of X's matrices, then Y's, then Cmat's (batch each,
  // for the largest size).
  DgDeviceBuffer pointers[DG_MAX_CALLS];
  long long pointer_capacity[DG_MAX_CALLS] = {};   // matrices a set's arrays hold
  cudaStream_t stream;
  bool elementwise = false;  // the elementwise pass follows the GEMM
  DgElementwise ew;          // its plan, for the size under test

  // The slot behind the baseline's operand i (A, B or the GEMM's output).
  int slot(int i) const { return i == DG_GEMM_OUT ? dg_out_slot(*p) : i; }

  // With D, cuBLAS writes alpha * A.B alone (it has no separate output view); the elementwise pass adds beta * C.
  float gemm_beta() const { return p->present[DG_D] ? 0.0f : p->beta; }

  char* view_base(int i, int set) const {
    const int x = slot(i);
    return sets->buf[x][set].ptr + p->offset[x] * dg_elem_size(p->dtype[x]);
  }

  void copy(bool gather, int i, int set) const {
    const int es = dg_elem_size(p->dtype[slot(i)]);
    char* base = view_base(i, set);
    const DgCopyUnits u = dg_copy_units(bl->view[i], es, base, temp[i].ptr);
    switch (u.unit) {
      case 16: dg_launch_copy<uint4>(gather, u.v, base, temp[i].ptr, stream); break;
      case 8: dg_launch_copy<uint2>(gather, u.v, base, temp[i].ptr, stream); break;
      case 4: dg_launch_copy<uint32_t>(gather, u.v, base, temp[i].ptr, stream); break;
      case 2: dg_launch_copy<uint16_t>(gather, u.v, base, temp[i].ptr, stream); break;
      default: dg_launch_copy<uint8_t>(gather, u.v, base, temp[i].ptr, stream); break;
    }
    DG_CUDA(cudaGetLastError());
  }

  // The pointer cuBLAS gets for operand i: its temp, or the view's first element.
  void* operand(int i, int set) const { return bl->copy[i] ? temp[i].ptr : view_base(i, set); }

  // Allocates the pointer arrays of each pointer-array call of `b` (the baseline at the largest size).
  void allocate_pointers(const DgBaseline& b) {
    for (int c = 0; c < b.ncalls; ++c) {
      if (b.calls[c].npointer_dims == 0) continue;
      pointer_capacity[c] = b.calls[c].batch;
      pointers[c] = dg_device_alloc(static_cast<size_t>(sets->nsets) * 3 * b.calls[c].batch * sizeof(void*), 256);
    }
  }

  // Fills every set's pointer arrays for the calls of *bl (the size under test): synchronous, before any timing.
  void set_pointers() const {
    for (int c = 0; c < bl->ncalls; ++c) {
      const DgGemmCall& call = bl->calls[c];
      if (call.npointer_dims == 0) continue;
      if (call.batch > pointer_capacity[c]) dg_die(4, dg_format("invalid baseline: '%s' grows past its largest size", call.desc));
      const int ops[3] = {call.swap ? DG_B : DG_A, call.swap ? DG_A : DG_B, DG_GEMM_OUT};
      std::vector<void*> host(static_cast<size_t>(sets->nsets) * 3 * call.batch);
      for (int set = 0; set < sets->nsets; ++set) {
        for (int o = 0; o < 3; ++o) {
          char* base = view_base(ops[o], set);
          const long long es = dg_elem_size(p->dtype[slot(ops[o])]);
          void** out = host.data() + (static_cast<size_t>(set) * 3 + o) * call.batch;
          for (long long b = 0; b < call.batch; ++b) {
            long long off = 0, rest = b;
            for (int d = call.npointer_dims - 1; d >= 0; --d) {
              const DgPointerDim& dim = call.pointer_dims[d];
              const long long stride = o == 0 ? dim.stride_x : o == 1 ? dim.stride_y : dim.stride_c;
              off += (rest % dim.size) * stride;
              rest /= dim.size;
            }
            out[b] = base + off * es;
          }
        }
      }
      DG_CUDA(cudaMemcpy(pointers[c].ptr, host.data(), host.size() * sizeof(void*), cudaMemcpyHostToDevice));
    }
  }

  // One baseline product with formulation `ci` on set `set`, its epilogue included; returns the cuBLAS status
  // (or DG_CALL_NO_BATCHED).
  int run(int ci, int set) const {
    const DgGemmCall& c = bl->calls[ci];
    const float beta = gemm_beta();
    const bool temps = c.npointer_dims == 0;
    if (temps) {
      for (int i = DG_A; i <= DG_B; ++i)
        if (bl->copy[i]) copy(true, i, set);
      if (bl->copy[DG_GEMM_OUT] && beta != 0.0f) copy(true, DG_GEMM_OUT, set);
    }
    const int xo = c.swap ? DG_B : DG_A, yo = c.swap ? DG_A : DG_B, out = slot(DG_GEMM_OUT);
    int status;
    if (temps) {
      status = cublas.gemm(handle, c.trans_x, c.trans_y, static_cast<int>(c.m), static_cast<int>(c.n),
                           static_cast<int>(c.k), &p->alpha, operand(xo, set), dg_cublas_type(p->dtype[xo]),
                           static_cast<int>(c.ldx), c.stride_x, operand(yo, set), dg_cublas_type(p->dtype[yo]),
                           static_cast<int>(c.ldy), c.stride_y, &beta, operand(DG_GEMM_OUT, set),
                           dg_cublas_type(p->dtype[out]), static_cast<int>(c.ldc), c.stride_c,
                           static_cast<int>(c.batch), DG_CUBLAS_COMPUTE_32F, DG_CUBLAS_GEMM_DEFAULT);
    } else {
      if (!cublas.gemm_batched) return DG_CALL_NO_BATCHED;
      void** arrays = reinterpret_cast<void**>(pointers[ci].ptr) + static_cast<size_t>(set) * 3 * c.batch;
      status = cublas.gemm_batched(handle, c.trans_x, c.trans_y, static_cast<int>(c.m), static_cast<int>(c.n),
                                   static_cast<int>(c.k), &p->alpha, arrays, dg_cublas_type(p->dtype[xo]),
                                   static_cast<int>(c.ldx), arrays + c.batch, dg_cublas_type(p->dtype[yo]),
                                   static_cast<int>(c.ldy), &beta, arrays + 2 * c.batch, dg_cublas_type(p->dtype[out]),
                                   static_cast<int>(c.ldc), static_cast<int>(c.batch), DG_CUBLAS_COMPUTE_32F,
                                   DG_CUBLAS_GEMM_DEFAULT);
    }
    if (status != 0) return status;
    if (temps && bl->copy[DG_GEMM_OUT]) copy(false, DG_GEMM_OUT, set);
    if (elementwise) {
      void* bufs[DG_SLOTS];
      sets->bases(set, bufs);
      dg_run_elementwise(ew, bufs, stream);
      DG_CUDA(cudaGetLastError());
    }
    return 0;
  }

  // What bench calls the baseline when call `ci` is the fastest.
  const char* kind(int ci) const {
    if (bl->calls[ci].npointer_dims > 0) return "cublas-ptr-array";
    return bl->copy[DG_A] || bl->copy[DG_B] || bl->copy[DG_GEMM_OUT] ? "copy+cublas" : "cublas";
  }
};

static double dg_median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Stream timing: the median time of one launch when launches are issued back to back from the host.
// Each of `reps` samples times nsets consecutive launches (one per set) between two events. When the
// host takes longer to issue a launch than the GPU to run it, this measures the host, not the kernel.
template <typename RunSet>
static double dg_stream_us(cudaStream_t stream, int nsets, long long warmup, long long reps, RunSet run_set) {
  for (long long w = 0; w < warmup; ++w) run_set(static_cast<int>(w % nsets));
  std::vector<cudaEvent_t> events(static_cast<size_t>(reps) + 1);
  for (cudaEvent_t& e : events) DG_CUDA(cudaEventCreate(&e));
  DG_CUDA(cudaEventRecord(events[0], stream));
  for (long long r = 0; r < reps; ++r) {
    for (int i = 0; i < nsets; ++i) run_set(i);
    DG_CUDA(cudaEventRecord(events[r + 1], stream));
  }
  DG_CUDA(cudaEventSynchronize(events[reps]));
  DG_CUDA(cudaGetLastError());
  std::vector<double> us(static_cast<size_t>(reps));
  for (long long r = 0; r < reps; ++r) {
    float ms = 0.0f;
    DG_CUDA(cudaEventElapsedTime(&ms, events[r], events[r + 1]));
    us[r] = 1000.0 * ms / nsets;
  }
  for (cudaEvent_t e : events) DG_CUDA(cudaEventDestroy(e));
  return dg_median(us);
}

// Graph timing, what a serving engine sees: `launches` launches (set l % nsets for launch l, so that
// consecutive launches find their inputs outside L2) are captured into one CUDA graph; the graph is
// replayed `reps` times, each replay between two events, and the median replay time is divided by
// `launches`. Host launch cost is paid once, at capture.
template <typename RunSet>
static double dg_graph_us(cudaStream_t stream, int nsets, long long launches, long long reps, RunSet run_set) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  DG_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (long long l = 0; l < launches; ++l) run_set(static_cast<int>(l % nsets));
  DG_CUDA(cudaStreamEndCapture(stream, &graph));
  DG_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int w = 0; w < 2; ++w) DG_CUDA(cudaGraphLaunch(exec, stream));   // upload and warm the clocks
  std::vector<cudaEvent_t> events(static_cast<size_t>(reps) * 2);
  for (cudaEvent_t& e : events) DG_CUDA(cudaEventCreate(&e));
  for (long long r = 0; r < reps; ++r) {
    DG_CUDA(cudaEventRecord(events[2 * r], stream));
    DG_CUDA(cudaGraphLaunch(exec, stream));
    DG_CUDA(cudaEventRecord(events[2 * r + 1], stream));
  }
  DG_CUDA(cudaStreamSynchronize(stream));
  DG_CUDA(cudaGetLastError());
  std::vector<double> us(static_cast<size_t>(reps));
  for (long long r = 0; r < reps; ++r) {
    float ms = 0.0f;
    DG_CUDA(cudaEventElapsedTime(&ms, events[2 * r], events[2 * r + 1]));
    us[r] = 1000.0 * ms / static_cast<double>(launches);
  }
  for (cudaEvent_t e : events) DG_CUDA(cudaEventDestroy(e));
  DG_CUDA(cudaGraphExecDestroy(exec));
  DG_CUDA(cudaGraphDestroy(graph));
  return dg_median(us);
}

// Launches per captured graph: a whole number of rotations through the sets, about 2 ms of work
// per replay (so that event resolution and the replay's own start cost vanish), at most 4096.
static long long dg_graph_launches(int nsets, double estimate_us) {
  const double per_rotation = std::max(estimate_us, 0.5) * nsets;
  const long long rotations = std::max(1LL, static_cast<long long>(std::ceil(2000.0 / per_rotation)));
  return std::max<long long>(nsets, std::min<long long>(rotations * nsets, std::max(4096LL / nsets, 1LL) * nsets));
}

struct DgTiming {
  double graph_us = NAN;    // the number reported: CUDA-graph replay (the mean of the passes)
  double stream_us = NAN;   // back-to-back launches from the host (the mean of the passes)
  std::vector<double> graph_passes;   // each pass's graph time, in the order they ran
};

template <typename RunSet>
static DgTiming dg_time(cudaStream_t stream, int nsets, const DgOptions& opt, RunSet run_set) {
  DgTiming t;
  t.stream_us = dg_stream_us(stream, nsets, opt.warmup, opt.reps, run_set);
  t.graph_us = dg_graph_us(stream, nsets, dg_graph_launches(nsets, t.stream_us), opt.reps, run_set);
  t.graph_passes = {t.graph_us};
  return t;
}

// Folds a second pass into a timing: the numbers reported become the mean of the two.
static void dg_add_pass(DgTiming& t, const DgTiming& again) {
  t.graph_passes.push_back(again.graph_us);
  t.graph_us = 0.5 * (t.graph_us + again.graph_us);
  t.stream_us = 0.5 * (t.stream_us + again.stream_us);
}

// One way to run the baseline: a cuBLAS formulation (with the elementwise pass where the problem needs
// one), or the alternative epilogue baseline.
struct DgBaselineCandidate {
  std::string kind;                 // what bench calls the baseline when this one is the fastest ("baseline")
  std::string formulation;
  std::string epilogue;             // how it applies the epilogue: "elementwise", the alternative's name, or none ("")
  bool alternative = false;         // the alternative epilogue baseline, not cuBLAS
  DgTiming time;
  std::string error;                // why it did not run, or why its result was refused; empty when it ran
  double rel_diff = NAN;            // a cuBLAS candidate's output against the kernel's (dg_output_diff); NaN unchecked
};

// One run-time size's timings (the whole problem's, for a fixed-size one).
struct DgBenchRow {
  long long m = 0;
  DgTiming ours;
  std::string baseline;      // the baseline's kind, or why it is unavailable or skipped
  std::vector<DgBaselineCandidate> candidates;
  int best = -1;             // the fastest candidate that ran, -1 if none did
  double flops = 0.0, bytes = 0.0;
  DgBaselineCandidate beside;   // the alternative's beside() baseline; its formulation empty when there is none
};

// Work and traffic: the inputs (A, B, the epilogue's views, the scales and zero points) count the unique elements
// they read (broadcast letters read once; a scale slot one element a block; a 4-bit view its words), the output is
// written, and C read too when beta != 0.
static void dg_work(const DgProblem& p, double* flops, double* bytes) {
  *flops = 2.0;
  *bytes = 0.0;
  for (int d = 0; d < p.ndims; ++d) *flops *= static_cast<double>(p.dims[d].size);
  for (const int x : {DG_A, DG_B, DG_BIAS, DG_SCALE, DG_RESIDUAL, DG_A_SCALES, DG_B_SCALES, DG_B_ZEROS}) {
    if (!p.present[x]) continue;
    double n = dg_elem_size(p.dtype[x]);
    if (p.pack[x] == DG_PACK_DG) {
      n *= static_cast<double>(p.span[x] - p.offset[x]);
    } else {
      for (int d = 0; d < p.ndims; ++d) {
        if (p.dims[d].stride[x] == 0) continue;
        const long long e = dg_extent(p.dims[d], x);
        n *= static_cast<double>(p.pack[x] != DG_PACK_NONE && d == p.pack_dims[x][0] ? (e + 7) / 8 : e);
      }
    }
    *bytes += n;
  }
  const double count = static_cast<double>(dg_c_count(p));
  *bytes += count * dg_elem_size(p.dtype[dg_out_slot(p)]);
  if (p.beta != 0.0f) *bytes += count * dg_elem_size(p.dtype[DG_C]);
}

// A timing's passes, in the order they ran (bench's two orders).
static void dg_json_passes(DgJson& j, const char* key, const DgTiming& t) {
  j.begin_array(key);
  for (const double pass : t.graph_passes) j.num(nullptr, pass);
  j.end_array();
}

// The fields a fixed-size problem reports at the top level and a run-time size in each of "m_rows".
static void dg_json_bench_row(DgJson& j, const DgBenchRow& r) {
  const double us = r.ours.graph_us;
  j.num("us", us);
  j.num("tflops", r.flops / (us * 1e-6) / 1e12);
  j.num("gbps", r.bytes / (us * 1e-6) / 1e9);
  j.num("us_stream", r.ours.stream_us);
  dg_json_passes(j, "us_passes", r.ours);
  j.str("baseline", r.baseline.c_str());
  if (r.best < 0) {
    j.null("baseline_formulation");
    j.null("baseline_epilogue");
    j.null("baseline_us");
    j.null("baseline_tflops");
    j.null("baseline_us_stream");
    j.null("baseline_us_passes");
    j.null("ratio");
  } else {
    const DgBaselineCandidate& best = r.candidates[r.best];
    const double baseline_us = best.time.graph_us;
    j.str("baseline_formulation", best.formulation.c_str());
    if (best.epilogue.empty()) j.null("baseline_epilogue"); else j.str("baseline_epilogue", best.epilogue.c_str());
    j.num("baseline_us", baseline_us);
    j.num("baseline_tflops", r.flops / (baseline_us * 1e-6) / 1e12);
    j.num("baseline_us_stream", best.time.stream_us);
    dg_json_passes(j, "baseline_us_passes", best.time);
    j.num("ratio", baseline_us / us);
  }
  if (!r.beside.formulation.empty() || !r.beside.error.empty()) {   // bf16 cuBLASLt beside an e4m3 baseline
    const DgBaselineCandidate& b = r.beside;
    if (b.error.empty()) {
      j.str("bf16_baseline", b.formulation.c_str());
      j.num("bf16_baseline_us", b.time.graph_us);
      j.num("bf16_baseline_tflops", r.flops / (b.time.graph_us * 1e-6) / 1e12);
      j.num("bf16_ratio", b.time.graph_us / us);
    } else {
      j.str("bf16_baseline", ("unavailable: " + b.error).c_str());
      j.null("bf16_baseline_us");
      j.null("bf16_baseline_tflops");
      j.null("bf16_ratio");
    }
  }
  j.begin_array("baseline_candidates");
  for (const DgBaselineCandidate& c : r.candidates) {
    j.begin();
    j.str("formulation", c.formulation.c_str());
    if (!c.epilogue.empty()) j.str("epilogue", c.epilogue.c_str());
    if (c.error.empty()) {
      j.num("us", c.time.graph_us);
      dg_json_passes(j, "us_passes", c.time);
    } else {
      j.null("us");
    }
    if (!c.alternative && !std::isnan(c.rel_diff)) j.num("rel_diff", c.rel_diff);
    if (!c.error.empty()) j.str("error", c.error.c_str());
    j.end();
  }
  j.end_array();
}

// bench checks each cuBLAS candidate's result before timing it: its output on set 0 against the kernel's on the same
// inputs (which verify checks against the reference), as ||got - want|| / ||want|| over the output view. Two
// float32-accumulated results of one product differ by their roundings (under 1e-2 at 16-bit outputs); a wrong
// layout or batch differs by about 1. A candidate past the limit is refused, not timed. The alternatives are not
// checked: cuBLASLt FP8's nearest scale mode computes another product by design.
static const double kDgBaselineMaxDiff = 5e-2;

struct DgBaselineCheck {
  int slot = -1;             // the output's slot
  DgDeviceBuffer start;      // set 0's output before any run: each run starts from it (beta reads it)
  DgDeviceBuffer want;       // the kernel's output
  DgDeviceBuffer sums;       // dg_diff_kernel's two sums
  size_t bytes = 0;

  // Fresh data in set 0's output, the kernel's result from it kept, and the output put back as it was.
  void prepare(const DgProblem& at, const DgBenchSets& sets, const std::function<void(int)>& run_ours,
               cudaStream_t stream) {
    if (slot < 0) {
      slot = dg_out_slot(at);
      bytes = dg_buffer_bytes(at, slot);
      start = dg_device_alloc(bytes, 256);
      want = dg_device_alloc(bytes, 256);
      sums = dg_device_alloc(2 * sizeof(double), 256);
    }
    char* out = sets.buf[slot][0].ptr;
    dg_device_fill_random(out, dg_fill_kind(at, slot), at.dtype[slot], at.span[slot], 0xC4EC0000ULL, slot, stream);
    DG_CUDA(cudaMemcpyAsync(start.ptr, out, bytes, cudaMemcpyDeviceToDevice, stream));
    run_ours(0);
    DG_CUDA(cudaMemcpyAsync(want.ptr, out, bytes, cudaMemcpyDeviceToDevice, stream));
    restore(sets, stream);
  }

  void restore(const DgBenchSets& sets, cudaStream_t stream) const {
    DG_CUDA(cudaMemcpyAsync(sets.buf[slot][0].ptr, start.ptr, bytes, cudaMemcpyDeviceToDevice, stream));
    DG_CUDA(cudaStreamSynchronize(stream));
  }

  // The relative difference of set 0's output from the kernel's (NaN where either holds NaN), then the output
  // put back as it was.
  double diff(const DgProblem& at, const DgBenchSets& sets, cudaStream_t stream) const {
    const long long count = dg_c_count(at);
    DG_CUDA(cudaMemsetAsync(sums.ptr, 0, 2 * sizeof(double), stream));
    dg_diff_kernel<<<static_cast<unsigned>(std::min<long long>((count + kDgBlock - 1) / kDgBlock, 1024)), kDgBlock, 0,
                     stream>>>(at, slot, sets.buf[slot][0].ptr, want.ptr, count, reinterpret_cast<double*>(sums.ptr));
    DG_CUDA(cudaGetLastError());
    double host[2];
    DG_CUDA(cudaMemcpyAsync(host, sums.ptr, sizeof(host), cudaMemcpyDeviceToHost, stream));
    restore(sets, stream);
    return host[1] > 0.0 ? std::sqrt(host[0] / host[1]) : (host[0] == 0.0 ? 0.0 : INFINITY);
  }
};

// The hook for an alternative epilogue baseline (DgAltBaseline, e.g. cuBLASLt's fused epilogue): prepared for
// the size under test, one trial run, then timed the same way as everything else; it joins the row's
// candidates, and the fastest candidate is the baseline. Returns what runs it on a set, for bench's second
// pass; empty when it did not run.
static std::function<void(int)> dg_time_alternative(DgAltBaseline& alt, const DgProblem& at, const DgBenchSets& sets,
                                                    cudaStream_t stream, const DgOptions& opt, DgBenchRow& row) {
  DgBaselineCandidate cand;
  cand.alternative = true;
  void* bufs[DG_SLOTS];
  sets.bases(0, bufs);
  cand.error = alt.prepare(at, stream);
  if (cand.error.empty()) cand.error = alt.run(bufs, stream);   // a trial: it may refuse this layout
  DG_CUDA(cudaStreamSynchronize(stream));
  // Asked after prepare and the trial run, which may settle them.
  cand.epilogue = alt.epilogue();
  cand.kind = cand.epilogue;
  cand.formulation = alt.formulation();
  std::function<void(int)> run_set;
  if (cand.error.empty()) {
    run_set = [&alt, &sets, stream, epilogue = cand.epilogue](int i) {
      void* set_bufs[DG_SLOTS];
      sets.bases(i, set_bufs);
      const std::string e = alt.run(set_bufs, stream);
      if (!e.empty()) dg_die(4, "alternative baseline " + epilogue + ": " + e);
    };
    cand.time = dg_time(stream, sets.nsets, opt, run_set);
  }
  row.candidates.push_back(cand);
  if (DgAltBaseline* other = alt.beside()) {   // timed once, after the alternative (which sets its shape)
    DgBaselineCandidate& b = row.beside;
    b.error = cand.error.empty() ? other->prepare(at, stream) : "the alternative did not run";
    if (b.error.empty()) b.error = other->run(bufs, stream);
    DG_CUDA(cudaStreamSynchronize(stream));
    b.formulation = other->formulation();
    if (b.error.empty())
      b.time = dg_time(stream, sets.nsets, opt, [other, &sets, stream](int i) {
        void* set_bufs[DG_SLOTS];
        sets.bases(i, set_bufs);
        const std::string e = other->run(set_bufs, stream);
        if (!e.empty()) dg_die(4, "bf16 baseline: " + e);
      });
  }
  return run_set;
}

// The compute roof of the inputs' dtype: cuBLAS on a square GEMM large enough to run at its peak (TN, f32
// accumulation, the output of the inputs' dtype, random inputs: zeros draw less power), graph-timed like the
// kernels. The f32 GEMM is smaller: it runs on the CUDA cores (CUBLAS_COMPUTE_32F, no TF32), as the f32 kernels
// do. `what` says what ran, or "unavailable: why" with tflops NaN.
struct DgRoof {
  double tflops = NAN;
  std::string what;
};

static DgRoof dg_measure_roof(const DgProblem& p, cudaStream_t stream, const DgOptions& opt) {
  DgRoof roof;
  const int dtype = p.dtype[DG_A];
  if (dtype == DG_E4M3) {
    roof.what = "unavailable: cuBLAS's GemmEx has no e4m3 inputs (cuBLASLt's FP8 GEMM is not timed as a roof)";
    return roof;
  }
  DgCublas cublas;
  std::string why;
  if (!dg_load_cublas(&cublas, &why)) {
    roof.what = "unavailable: " + why;
    return roof;
  }
  const int es = dg_elem_size(dtype);
  long long n = dtype == DG_F32 ? 4096 : 8192;
  size_t free_bytes = 0, total_bytes = 0;
  DG_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  while (n > 1024 && 3.0 * n * n * es > 0.5 * static_cast<double>(free_bytes)) n /= 2;
  if (3.0 * n * n * es > 0.5 * static_cast<double>(free_bytes)) {
    roof.what = "unavailable: too little free memory for a square GEMM";
    return roof;
  }
  void* handle = nullptr;
  if (const int created = cublas.create(&handle)) {
    roof.what = "unavailable: cublasCreate returned " + dg_cublas_status(created);
    return roof;
  }
  const size_t ws_bytes = 64u << 20;
  const DgDeviceBuffer workspace = dg_device_alloc(ws_bytes, 256);
  int status = cublas.set_stream(handle, stream);
  if (status == 0 && cublas.set_workspace) status = cublas.set_workspace(handle, workspace.ptr, ws_bytes);
  DgDeviceBuffer buf[3];
  for (int i = 0; i < 3; ++i) {
    buf[i] = dg_device_alloc(static_cast<size_t>(n * n * es), 256);
    dg_device_fill_random(buf[i].ptr, DG_FILL_DATA, dtype, n * n, 0x600FULL + i, i, stream);
  }
  const float alpha = 1.0f, beta = 0.0f;
  const int type = dg_cublas_type(dtype), size = static_cast<int>(n);
  const auto gemm = [&](int) {
    return cublas.gemm(handle, 1, 0, size, size, size, &alpha, buf[0].ptr, type, size, 0, buf[1].ptr, type, size, 0,
                       &beta, buf[2].ptr, type, size, 0, 1, DG_CUBLAS_COMPUTE_32F, DG_CUBLAS_GEMM_DEFAULT);
  };
  if (status == 0) status = gemm(0);   // a trial call: cuBLAS may refuse the type on this GPU
  DG_CUDA(cudaStreamSynchronize(stream));
  if (status != 0) {
    roof.what = "unavailable: cuBLAS returned " + dg_cublas_status(status);
  } else {
    const DgTiming t = dg_time(stream, 1, opt, [&](int i) {
      if (const int s = gemm(i)) dg_die(4, "roof GEMM: cublasGemmStridedBatchedEx returned " + dg_cublas_status(s));
    });
    roof.tflops = 2.0 * static_cast<double>(n) * n * n / (t.graph_us * 1e-6) / 1e12;
    roof.what = dg_format("cuBLAS %s %lldx%lldx%lld TN, f32 accumulation", kDgDtypeNames[dtype], n, n, n);
  }
  cublas.destroy(handle);
  return roof;
}

static int dg_bench(const DgProblem& p, const DgBaseline& bl, DgKernel kernel, DgAltBaseline* alternative,
                    const DgOptions& opt, const cudaDeviceProp& prop) {
  cudaStream_t stream;
  DG_CUDA(cudaStreamCreate(&stream));

  // How many sets: enough to cover 3x L2, at most 64, and using at most half of the free memory. Sized for
  // the largest run-time size; smaller ones use a part of each set.
  size_t set_bytes = 0, temp_bytes = 0;
  for (int x = 0; x < DG_SLOTS; ++x)
    if (p.present[x]) set_bytes += dg_buffer_bytes(p, x) + p.align[x];
  for (int c = 0; opt.baseline && bl.available && c < bl.ncalls; ++c)   // a pointer-array call's arrays, a set's
    if (bl.calls[c].npointer_dims > 0) set_bytes += 3 * static_cast<size_t>(bl.calls[c].batch) * sizeof(void*);
  for (int i = 0; i < 3; ++i) {
    const int x = i == DG_GEMM_OUT ? dg_out_slot(p) : i;
    if (bl.available && bl.copy[i]) temp_bytes += dg_view_count(bl.view[i]) * dg_elem_size(p.dtype[x]);
  }
  size_t free_bytes = 0, total_bytes = 0;
  DG_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  const size_t l2_target = 3 * static_cast<size_t>(prop.l2CacheSize);
  size_t nsets = std::min<size_t>(std::max<size_t>((l2_target + set_bytes - 1) / set_bytes, 1), 64);
  const size_t budget = free_bytes / 2 > temp_bytes ? free_bytes / 2 - temp_bytes : 0;
  nsets = std::max<size_t>(std::min(nsets, budget / set_bytes), 1);

  DgBenchSets sets;
  sets.nsets = static_cast<int>(nsets);
  for (int x = 0; x < DG_SLOTS; ++x) {
    if (!p.present[x]) continue;
    for (int i = 0; i < sets.nsets; ++i) {
      sets.buf[x].push_back(dg_device_alloc(dg_buffer_bytes(p, x), p.align[x]));
      dg_device_fill_random(sets.buf[x][i].ptr, dg_fill_kind(p, x), p.dtype[x], p.span[x], 0x5EED0000ULL + i, x,
                            stream);
    }
  }
  DG_CUDA(cudaStreamSynchronize(stream));

  // The baseline, if it can run here (set up once, for the largest size); otherwise the reason it cannot.
  std::string baseline = bl.kind ? bl.kind : "";
  DgBaselineRunner runner;
  runner.p = &p;
  runner.sets = &sets;
  runner.stream = stream;
  bool cublas_ready = false;
  int setup_status = 0;
  DgDeviceBuffer workspace;
  if (!opt.baseline) {
    baseline = "skipped (--baseline 0)";
  } else if (!bl.available) {
    if (baseline.rfind("unavailable", 0) != 0) baseline = "unavailable: " + baseline;   // the generator may say it already
  } else {
    std::string why;
    if (!dg_load_cublas(&runner.cublas, &why)) {
      baseline = "unavailable: " + why;
    } else if (const int created = runner.cublas.create(&runner.handle)) {
      baseline = "unavailable: cublasCreate returned " + dg_cublas_status(created);
    } else {
      cublas_ready = true;
      for (int i = 0; i < 3; ++i)
        if (bl.copy[i])
          runner.temp[i] = dg_device_alloc(dg_view_count(bl.view[i]) * dg_elem_size(p.dtype[runner.slot(i)]), 256);
      runner.allocate_pointers(bl);
      setup_status = runner.cublas.set_stream(runner.handle, stream);
      if (setup_status == 0 && runner.cublas.set_workspace) {
        const size_t ws_bytes = 64u << 20;
        workspace = dg_device_alloc(ws_bytes, 256);
        setup_status = runner.cublas.set_workspace(runner.handle, workspace.ptr, ws_bytes);
      }
    }
  }

  const std::vector<long long> sizes = dg_sizes(p, opt, false);
  const long long hi = dg_run_time_hi(p);
  std::vector<DgBenchRow> rows;
  DgBaselineCheck check;
  for (const long long m : sizes) {
    const DgProblem at = dg_problem_at(p, m);
    const DgBaseline bl_at = dg_baseline_at(bl, m, hi);
    DgBenchRow row;
    row.m = m;
    row.baseline = baseline;
    dg_work(at, &row.flops, &row.bytes);
    // Both sides run twice at each size, in the order ours, the baseline's candidates, the candidates again
    // in reverse, ours: so each is timed once right after itself and once right after the other side. Both
    // sides draw near the board's power cap, and a kernel timed after a hungrier one starts below full
    // clock (docs/design/verify-and-bench.md, "Bench"); one fixed order would hand that to the side that runs
    // second. Each number reported is the mean of its two passes (`us_passes` in the JSON). With no baseline
    // timed, ours runs once.
    void* bufs[DG_SLOTS];
    const auto run_ours = [&](int i) {
      sets.bases(i, bufs);
      const cudaError_t e = kernel(bufs, m, at.alpha, at.beta, stream);
      if (e != cudaSuccess) dg_die_cuda(e, "kernel under test (launch returned)", __LINE__);
    };
    row.ours = dg_time(stream, sets.nsets, opt, run_ours);

    // Every formulation is timed the same way as the kernel (its epilogue pass included); the fastest
    // candidate is the baseline.
    std::vector<std::function<void(int)>> again;   // per candidate: what runs it on a set; empty if it did not run
    if (cublas_ready) {
      runner.p = &at;
      runner.bl = &bl_at;
      runner.elementwise = dg_needs_elementwise(at);
      if (runner.elementwise) runner.ew = dg_elementwise_plan(at);
      runner.set_pointers();   // outside every timed region: the pointer-array calls time the call alone
      check.prepare(at, sets, run_ours, stream);
      for (int c = 0; c < bl_at.ncalls; ++c) {
        const DgGemmCall& call = bl_at.calls[c];
        DgBaselineCandidate cand;
        cand.kind = runner.kind(c);
        cand.formulation = call.desc;
        if (runner.elementwise) cand.epilogue = "elementwise";
        int cs = setup_status;
        if (cs == 0 && std::max({call.m, call.n, call.k, call.ldx, call.ldy, call.ldc, call.batch}) > INT_MAX)
          cs = DG_CALL_TOO_BIG;
        if (cs == 0) cs = runner.run(c, 0);   // a trial call: cuBLAS may reject the types or the layout
        DG_CUDA(cudaStreamSynchronize(stream));
        std::function<void(int)> run_set;
        if (cs == 0) cand.rel_diff = check.diff(at, sets, stream);
        if (cs != 0) {
          cand.error = dg_call_error(cs);
        } else if (!(cand.rel_diff <= kDgBaselineMaxDiff)) {
          cand.error = dg_format("its result differs from the kernel's: relative difference %.3g (limit %g)",
                                 cand.rel_diff, kDgBaselineMaxDiff);
        } else {
          run_set = [&runner, c](int i) {
            if (const int s = runner.run(c, i)) dg_die(4, "the baseline's cuBLAS call: " + dg_call_error(s));
          };
          cand.time = dg_time(stream, sets.nsets, opt, run_set);
        }
        row.candidates.push_back(cand);
        again.push_back(run_set);
      }
    }
    if (alternative && opt.baseline) again.push_back(dg_time_alternative(*alternative, at, sets, stream, opt, row));
    bool timed_any = false;
    for (size_t c = again.size(); c-- > 0;) {
      if (!again[c]) continue;
      dg_add_pass(row.candidates[c].time, dg_time(stream, sets.nsets, opt, again[c]));
      timed_any = true;
    }
    if (timed_any) dg_add_pass(row.ours, dg_time(stream, sets.nsets, opt, run_ours));
    for (size_t c = 0; c < row.candidates.size(); ++c) {
      const DgBaselineCandidate& cand = row.candidates[c];
      if (cand.error.empty() && (row.best < 0 || cand.time.graph_us < row.candidates[row.best].time.graph_us))
        row.best = static_cast<int>(c);
    }
    if (row.best >= 0)
      row.baseline = row.candidates[row.best].kind;
    else if (!row.candidates.empty())
      row.baseline = "unavailable: " + row.candidates[0].error;
    const double us = row.ours.graph_us, baseline_us = row.best < 0 ? NAN : row.candidates[row.best].time.graph_us;
    fprintf(stderr, "dg_harness: bench %s%s: %.3f us (graph), %.3f us (stream), %.2f TFLOP/s; baseline %s: %s us\n",
            p.name, p.run_time_letter ? dg_format(" %c=%lld", p.run_time_letter, m).c_str() : "", us,
            row.ours.stream_us, row.flops / (us * 1e-6) / 1e12, row.baseline.c_str(),
            std::isnan(baseline_us) ? "-" : dg_format("%.3f", baseline_us).c_str());
    rows.push_back(std::move(row));
  }
  if (cublas_ready) runner.cublas.destroy(runner.handle);

  // What the memory system streams in the same run: a device-to-device copy of 3x L2 (from DRAM),
  // graph-timed like the kernels, read + write bytes a second. A weight-streaming kernel approaches it.
  double copy_gbps = NAN;
  if (opt.baseline) {
    size_t free_now = 0, total_now = 0;
    DG_CUDA(cudaMemGetInfo(&free_now, &total_now));
    if (2 * l2_target < free_now / 2) {
      const DgDeviceBuffer src = dg_device_alloc(l2_target, 256), dst = dg_device_alloc(l2_target, 256);
      const double copy_us = dg_graph_us(stream, 1, 16, opt.reps, [&](int) {
        DG_CUDA(cudaMemcpyAsync(dst.ptr, src.ptr, l2_target, cudaMemcpyDeviceToDevice, stream));
      });
      copy_gbps = 2.0 * static_cast<double>(l2_target) / (copy_us * 1e-6) / 1e9;
    }
  }
  // The bench's own buffers are freed first: the roof's square GEMM needs room of its own.
  sets = DgBenchSets();
  workspace = DgDeviceBuffer();
  for (DgDeviceBuffer& t : runner.temp) t = DgDeviceBuffer();
  const DgRoof roof = opt.roof ? dg_measure_roof(p, stream, opt) : DgRoof();
  DG_CUDA(cudaStreamDestroy(stream));

  // The top level is the largest size's row, so that a reader of fixed-size results reads it as one.
  DgJson j;
  dg_json_header(j, "bench", p, prop);
  j.str("method", "graph");
  dg_json_bench_row(j, rows.back());
  j.num("copy_gbps", copy_gbps);
  if (opt.roof) {
    if (std::isnan(roof.tflops)) j.null("roof_tflops"); else j.num("roof_tflops", roof.tflops);
    j.str("roof_gemm", roof.what.c_str());
  } else {
    j.null("roof_tflops");
    j.null("roof_gemm");
  }
  j.integer("sets", static_cast<long long>(nsets));
  j.integer("reps", opt.reps);
  if (p.run_time_letter) {
    j.integer("m", rows.back().m);
    dg_json_run_time_range(j, p);
    j.begin_array("m_rows");
    for (const DgBenchRow& row : rows) {
      j.begin();
      j.integer("m", row.m);
      dg_json_bench_row(j, row);
      j.end();
    }
    j.end_array();
  }
  j.end();
  dg_print_json(j.text());
  return 0;
}

// ------------------------------------------------------------------------------------------------
// Command line and entry point
// ------------------------------------------------------------------------------------------------

[[noreturn]] static void dg_usage(const std::string& problem) {
  dg_die(2, problem + "; usage: verify [--seeds 1,2,3] [--samples 256] [--repeat 0] [--m 1,8,64] | bench [--warmup 10] "
                      "[--reps 50] [--baseline 0|1] [--roof 0|1] [--m 1,8,64]");
}

// A whole decimal integer in [lo, hi], or false.
static bool dg_parse_int(const char* s, long long lo, long long hi, long long* out) {
  char* end = nullptr;
  errno = 0;
  const long long v = strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// A non-empty comma-separated list of integers in [lo, hi], or false.
static bool dg_parse_list(const std::string& list, long long lo, long long hi, std::vector<long long>* out) {
  out->clear();
  if (list.empty()) return false;
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    long long v;
    if (!dg_parse_int(list.substr(start, comma - start).c_str(), lo, hi, &v)) return false;
    out->push_back(v);
    start = comma + 1;
  }
  return true;
}

static DgOptions dg_parse_args(int argc, char** argv) {
  DgOptions opt;
  if (argc < 2) dg_usage("no command");
  const std::string cmd = argv[1];
  if (cmd == "verify") opt.command = "verify";
  else if (cmd == "bench") opt.command = "bench";
  else dg_usage("unknown command '" + cmd + "'");
  g_dg_command = opt.command;
  const bool verify = cmd == "verify";
  for (int i = 2; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) dg_usage(flag + " needs a value");
    const char* value = argv[i + 1];
    bool ok;
    if (verify && flag == "--seeds") {
      ok = dg_parse_list(value, 0, LLONG_MAX, &opt.seeds);
    } else if (flag == "--m") {
      ok = dg_parse_list(value, LLONG_MIN, LLONG_MAX, &opt.sizes);   // the range is the problem's: dg_check_sizes
    } else if (verify && flag == "--samples") {
      ok = dg_parse_int(value, 1, LLONG_MAX, &opt.samples);
    } else if (verify && flag == "--repeat") {
      ok = dg_parse_int(value, 0, 1000000, &opt.repeat);
    } else if (!verify && flag == "--warmup") {
      ok = dg_parse_int(value, 0, 1000000, &opt.warmup);
    } else if (!verify && flag == "--reps") {
      ok = dg_parse_int(value, 1, 1000000, &opt.reps);
    } else if (!verify && flag == "--baseline") {
      ok = dg_parse_int(value, 0, 1, &opt.baseline);
    } else if (!verify && flag == "--roof") {
      ok = dg_parse_int(value, 0, 1, &opt.roof);
    } else {
      dg_usage("unknown option '" + flag + "' for " + cmd);
    }
    if (!ok) dg_usage("bad value '" + std::string(value) + "' for " + flag);
  }
  return opt;
}

// --m names sizes of the problem's run-time range, and only a problem with one takes it.
static void dg_check_sizes(const DgProblem& p, const DgOptions& opt) {
  if (opt.sizes.empty()) return;
  if (!p.run_time_letter) dg_usage("--m: this kernel has no run-time size");
  const long long hi = dg_run_time_hi(p);
  for (const long long m : opt.sizes)
    if (m < p.run_time_lo || m > hi)
      dg_usage(dg_format("--m: %lld is outside the run-time range %lld..%lld of '%c'", m, p.run_time_lo, hi,
                         p.run_time_letter));
}

static int dg_harness_run(int argc, char** argv, const DgProblem& p, const DgBaseline& bl, DgKernel kernel,
                          DgAltBaseline* alternative) {
  dg_claim_stdout();
  g_dg_name = p.name;
  const DgOptions opt = dg_parse_args(argc, argv);
  dg_check_problem(p, bl);
  if ((p.run_time_letter != 0) != (kernel.run_time != nullptr))
    dg_die(4, p.run_time_letter ? "invalid harness: a run-time size, but the kernel's entry point takes no m"
                                : "invalid harness: the kernel's entry point takes m, but the problem has no run-time size");
  dg_check_sizes(p, opt);

  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0)
    dg_die(3, std::string("no CUDA GPU: ") + cudaGetErrorString(e != cudaSuccess ? e : cudaErrorNoDevice));

  int device = 0;
  DG_CUDA(cudaGetDevice(&device));
  cudaDeviceProp prop;
  DG_CUDA(cudaGetDeviceProperties(&prop, device));
  return opt.command == std::string("verify") ? dg_verify(p, kernel, opt, prop)
                                              : dg_bench(p, bl, kernel, alternative, opt, prop);
}

int dg_harness_main(int argc, char** argv, const DgProblem& p, const DgBaseline& bl, DgLaunchFn launch,
                    DgAltBaseline* alternative) {
  DgKernel kernel;
  kernel.fixed = launch;
  return dg_harness_run(argc, argv, p, bl, kernel, alternative);
}

int dg_harness_main(int argc, char** argv, const DgProblem& p, const DgBaseline& bl, DgLaunchRunTimeFn launch,
                    DgAltBaseline* alternative) {
  DgKernel kernel;
  kernel.run_time = launch;
  return dg_harness_run(argc, argv, p, bl, kernel, alternative);
}

#endif  // DG_HARNESS_DECLARATIONS_ONLY
