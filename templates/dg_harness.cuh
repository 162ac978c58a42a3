// dg_harness.cuh -- the verification and benchmark driver shared by every generated kernel.
//
// It is copied verbatim next to each generated kernel. The generated <name>_harness.cu includes the
// kernel's header and this file, defines `kProblem`, `kBaseline` and a `launch` wrapper, and hands them
// to dg_harness_main(). Build: nvcc -std=c++17 ... <name>_harness.cu <name>.cu -ldl (cudart and libdl
// only: cuBLAS is dlopen'ed at run time, so the harness builds and runs without it).
//
// Aggregate-initializer field order (Python renders these positionally -- keep in sync). The fields
// after `|` describe a run-time size; a fixed-size problem leaves them out (zero):
//   DgDim         { letter, role, size, {stride_A, stride_B, stride_C} }
//   DgProblem     { name, arch, ndims, {DgDim...}, nc, {offset A, B, C}, {span A, B, C},
//                   {dtype A, B, C}, {align A, B, C}, alpha, beta, tol | run_time_letter, run_time_lo,
//                   nedges, edges }
//   DgStridedView { ndims, {size...}, {stride...} | scaled }
//   DgGemmCall    { desc, swap, trans_x, trans_y, m, n, k, ldx, ldy, ldc, stride_x, stride_y, stride_c, batch
//                   | scaled }
//   DgBaseline    { available, kind, {copy A, B, C}, {view A, view B, view C}, ncalls, {DgGemmCall...} }
//
// Pointer convention: `launch` receives the BASE pointers of the three buffers; the kernel applies
// DgProblem::offset itself, exactly as the element-address formula below says. `align` is what the
// caller promises for those base pointers.
//
// Run-time size: a problem may size one of C's row letters (role M, not in B) at run time, m in
// [run_time_lo, its size]: the dims, spans and kBaseline describe the largest m, and `launch` then
// takes m (DgLaunchRunTimeFn) and must return cudaErrorInvalidValue outside that range. The problem at
// size m is the same views with that letter's size m (no stride depends on it); verify and bench run
// a list of sizes on buffers allocated once for the largest, and the rows past m are holes of C.
//
// Semantics checked: C[c] = alpha * sum over the K letters of A[..] * B[..] + beta * C_old[c], where
// the element address of operand X for a full letter assignment idx is
//   offset[X] + sum_d idx_d * dims[d].stride[X],
// and C is not read at all when beta == 0.
//
// Command line (exactly one JSON object on stdout, always; diagnostics on stderr):
//   <harness> verify [--seeds 1,2,3] [--samples 256] [--repeat 0] [--m LIST]    exit 0 pass, 1 fail
//     --repeat N: N more launches on the first seed's data; C's buffer must come out bit-identical
//   <harness> bench  [--warmup 10] [--reps 50] [--baseline 0|1] [--m LIST]   exit 0
//     --m 1,8,64: the run-time sizes to run (only for a problem with one; default: dg_verify_sizes,
//     dg_bench_sizes)
//   exit 2 bad command line, 3 no CUDA GPU, 4 any CUDA error (or an inconsistent kProblem/kBaseline).
// Non-finite numbers are written as the strings "nan", "inf" and "-inf" (Python's float() reads them).
//
// A problem with a run-time size reports everything a fixed-size one does, plus
//   "dynamic": {"letter", "lo", "hi"}, and each run and first_fail names its "m";
//   verify: "api_m_rejected" (every size outside [lo, hi] was refused), "api_m_probes": [{"m", "rejected"}],
//     "m_cases": [{"m", "passed", "max_abs_err", "rel_err", "first_fail", "repeat_differed"}]; the top-level
//     passed is the AND of all of it, max_abs_err / rel_err the worst size's, repeat_differed the sum;
//   bench: "m_rows": [{"m", and the per-size fields below}], with the largest size's row also at the top
//     level ("m" says which): us, tflops, gbps, us_stream, baseline, baseline_formulation, baseline_us,
//     baseline_tflops, baseline_us_stream, ratio, baseline_candidates.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
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
#include <memory>
#include <string>
#include <utility>
#include <vector>

#define DG_MAX_DIMS 16
enum { DG_F32 = 0, DG_F16 = 1, DG_BF16 = 2 };
enum { DG_BATCH = 0, DG_M = 1, DG_N = 2, DG_K = 3 };
enum { DG_A = 0, DG_B = 1, DG_C = 2 };

struct DgDim {
  char letter;
  int role;                 // DG_BATCH, DG_M, DG_N or DG_K
  long long size;
  long long stride[3];      // element stride of this letter in A, B, C; 0 where the operand has no such letter (or broadcasts it)
};

struct DgProblem {
  const char* name;
  const char* arch;          // "sm_90a"
  int ndims;
  DgDim dims[DG_MAX_DIMS];   // C's letters first, in C's order, then the summed (K) letters
  int nc;                    // how many leading dims are C's letters
  long long offset[3];       // element offset of each view into its buffer
  long long span[3];         // elements each buffer must hold: offset + max reachable index + 1
  int dtype[3];              // DG_F32 / DG_F16 / DG_BF16 for A, B, C
  int align[3];              // bytes the caller promises for each base pointer (power of two, >= element size)
  float alpha, beta;         // the spec's values
  double tol;                // relative Frobenius tolerance
  // A run-time size (all zero for a fixed-size problem): the letter's dim holds its largest size.
  char run_time_letter;      // one of C's letters of role DG_M, not in B
  long long run_time_lo;     // its smallest size
  int nedges;                // the kernel's buckets of the size: each one's first and last, ascending
  const long long* edges;
};

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

// One cublasGemmStridedBatchedEx call, column-major: Cmat(m x n, ldc) = op(X)(m x k) * op(Y)(k x n).
struct DgGemmCall {
  const char* desc;          // how the problem's segments map to cuBLAS's dims, e.g. "C=AB m=hw[3136] n=k[512] k=c[256] batch=n[8]"
  int swap;                  // 0: X is A and Y is B;  1: X is B and Y is A (C^T = B^T A^T)
  int trans_x, trans_y;      // 0 = CUBLAS_OP_N, 1 = CUBLAS_OP_T
  long long m, n, k;
  long long ldx, ldy, ldc;
  long long stride_x, stride_y, stride_c;   // batch strides in elements (0 = broadcast)
  long long batch;
  unsigned scaled;           // DG_SCALE_* bits
};

#define DG_MAX_CALLS 8
struct DgBaseline {
  int available;             // 0: no cuBLAS mapping exists for this problem (e.g. sizes beyond int); `kind` says why
  const char* kind;          // "cublas" (views taken directly) or "copy+cublas" (some operand goes through a dense temp), or the reason it is unavailable
  int copy[3];               // 1: operand goes through a dense row-major temp of view[i]'s shape: A,B gathered into it before the GEMM; C gathered into it first when beta != 0, scattered back after
  DgStridedView view[3];     // used only where copy[i]
  int ncalls;                // formulations to time; the fastest is the baseline
  DgGemmCall calls[DG_MAX_CALLS];
  // Pointers: for a copied operand, its temp (offset 0); otherwise the buffer base + DgProblem::offset.
};

// The kernel's C entry point behind a wrapper that takes base pointers as void*: the fixed-size API, or
// the run-time-size one, whose m is the size of DgProblem::run_time_letter.
typedef cudaError_t (*DgLaunchFn)(const void* A, const void* B, void* C, float alpha, float beta, cudaStream_t stream);
typedef cudaError_t (*DgLaunchRunTimeFn)(const void* A, const void* B, void* C, long long m, float alpha, float beta,
                                         cudaStream_t stream);

int dg_harness_main(int argc, char** argv, const DgProblem& p, const DgBaseline& bl, DgLaunchFn launch);
int dg_harness_main(int argc, char** argv, const DgProblem& p, const DgBaseline& bl, DgLaunchRunTimeFn launch);

// The kernel under test, whichever entry point it has: one call path for both, m ignored by a fixed-size one.
struct DgKernel {
  DgLaunchFn fixed = nullptr;
  DgLaunchRunTimeFn run_time = nullptr;
  cudaError_t operator()(const void* A, const void* B, void* C, long long m, float alpha, float beta,
                         cudaStream_t stream) const {
    return run_time ? run_time(A, B, C, m, alpha, beta, stream) : fixed(A, B, C, alpha, beta, stream);
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

__host__ __device__ inline int dg_elem_size(int dtype) { return dtype == DG_F32 ? 4 : 2; }

__host__ __device__ inline double dg_load(const void* buf, int dtype, long long i) {
  switch (dtype) {
    case DG_F16: return __half2float(static_cast<const __half*>(buf)[i]);
    case DG_BF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(buf)[i]);
    default: return static_cast<const float*>(buf)[i];
  }
}

__host__ __device__ inline void dg_store(void* buf, int dtype, long long i, float v) {
  switch (dtype) {
    case DG_F16: static_cast<__half*>(buf)[i] = __float2half_rn(v); break;
    case DG_BF16: static_cast<__nv_bfloat16*>(buf)[i] = __float2bfloat16_rn(v); break;
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
enum { DG_RNG_A = 0, DG_RNG_B = 1, DG_RNG_C = 2, DG_RNG_SAMPLES = 3, DG_RNG_SIZES = 4 };

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

__global__ void dg_fill_random_kernel(void* buf, int dtype, long long n, unsigned long long seed, int stream) {
  for (long long i = dg_thread_index(); i < n; i += dg_thread_stride())
    dg_store(buf, dtype, i, dg_uniform(dg_random_bits(seed, stream, i)));
}

// The reference: one thread per element of C, in dense row-major order of C's letters. It deliberately
// knows nothing of tiles: it walks the original strides of DgProblem, the summed letters as an odometer
// (last letter fastest), accumulating in double. Products of two f32/f16/bf16 values are exact in double,
// so only the additions round. C_old is read only when beta != 0, so C's NaN poison cannot leak in.
// mag[o] = |alpha| * sum |a*b| (+ |beta * C_old|): the scale a float32 accumulation's rounding error is
// relative to, whatever the cancellation in the sum.
__global__ void dg_reference_kernel(DgProblem p, const void* A, const void* B, const void* C, double* ref,
                                    double* mag, long long count, double alpha, double beta) {
  for (long long o = dg_thread_index(); o < count; o += dg_thread_stride()) {
    long long a = p.offset[DG_A], b = p.offset[DG_B], c = p.offset[DG_C];
    long long rest = o;
    for (int d = p.nc - 1; d >= 0; --d) {
      const long long i = rest % p.dims[d].size;
      rest /= p.dims[d].size;
      a += i * p.dims[d].stride[DG_A];
      b += i * p.dims[d].stride[DG_B];
      c += i * p.dims[d].stride[DG_C];
    }
    long long kidx[DG_MAX_DIMS] = {};
    double acc = 0.0, abs_acc = 0.0;
    for (;;) {
      const double term = dg_load(A, p.dtype[DG_A], a) * dg_load(B, p.dtype[DG_B], b);
      acc += term;
      abs_acc += fabs(term);
      // Advance the odometer over dims nc..ndims-1; running past the first summed letter ends the sum.
      int d = p.ndims - 1;
      for (; d >= p.nc; --d) {
        a += p.dims[d].stride[DG_A];
        b += p.dims[d].stride[DG_B];
        if (++kidx[d] < p.dims[d].size) break;
        a -= p.dims[d].size * p.dims[d].stride[DG_A];
        b -= p.dims[d].size * p.dims[d].stride[DG_B];
        kidx[d] = 0;
      }
      if (d < p.nc) break;
    }
    double out = alpha * acc, scale = fabs(alpha) * abs_acc;
    if (beta != 0.0) {
      const double c_old = beta * dg_load(C, p.dtype[DG_C], c);
      out += c_old;
      scale += fabs(c_old);
    }
    ref[o] = out;
    mag[o] = scale;
  }
}

// Element offset, within view v, of the element at dense row-major index i of v's shape.
__device__ inline long long dg_view_offset(const DgStridedView& v, long long i) {
  long long off = 0;
  for (int d = v.ndims - 1; d >= 0; --d) {
    off += (i % v.size[d]) * v.stride[d];
    i /= v.size[d];
  }
  return off;
}

// Baseline copies move bits, not values, so one instantiation per element size serves every dtype.
template <typename Bits>
__global__ void dg_gather_kernel(const Bits* __restrict__ view_base, DgStridedView v, Bits* __restrict__ dense,
                                 long long n) {
  for (long long i = dg_thread_index(); i < n; i += dg_thread_stride()) dense[i] = view_base[dg_view_offset(v, i)];
}

template <typename Bits>
__global__ void dg_scatter_kernel(const Bits* __restrict__ dense, DgStridedView v, Bits* __restrict__ view_base,
                                  long long n) {
  for (long long i = dg_thread_index(); i < n; i += dg_thread_stride()) view_base[dg_view_offset(v, i)] = dense[i];
}

// ------------------------------------------------------------------------------------------------
// Host-side helpers
// ------------------------------------------------------------------------------------------------

static long long dg_view_count(const DgStridedView& v) {
  long long n = 1;
  for (int d = 0; d < v.ndims; ++d) n *= v.size[d];
  return n;
}

// Number of elements of C (product of the sizes of C's letters).
static long long dg_c_count(const DgProblem& p) {
  long long n = 1;
  for (int d = 0; d < p.nc; ++d) n *= p.dims[d].size;
  return n;
}

// Buffer address of C's element at dense index o; its letters' indices go to idx[0..nc) when asked for.
static long long dg_c_address(const DgProblem& p, long long o, long long* idx) {
  long long addr = p.offset[DG_C];
  for (int d = p.nc - 1; d >= 0; --d) {
    const long long i = o % p.dims[d].size;
    o /= p.dims[d].size;
    addr += i * p.dims[d].stride[DG_C];
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
  }
}

static void dg_check_problem(const DgProblem& p, const DgBaseline& bl) {
  const char* names = "ABC";
  if (p.ndims < 1 || p.ndims > DG_MAX_DIMS || p.nc < 0 || p.nc > p.ndims)
    dg_die(4, dg_format("invalid problem: ndims=%d nc=%d", p.ndims, p.nc));
  for (int d = 0; d < p.ndims; ++d) {
    const DgDim& dim = p.dims[d];
    if (dim.size < 1) dg_die(4, dg_format("invalid problem: letter '%c' has size %lld", dim.letter, dim.size));
    if ((d >= p.nc) != (dim.role == DG_K))
      dg_die(4, dg_format("invalid problem: letter '%c' is %s C's letters but has role %d", dim.letter,
                          d < p.nc ? "among" : "after", dim.role));
    if (d >= p.nc && dim.stride[DG_C] != 0)
      dg_die(4, dg_format("invalid problem: summed letter '%c' has a stride in C", dim.letter));
  }
  long long total = 1;
  for (int d = 0; d < p.ndims; ++d)
    if (__builtin_mul_overflow(total, p.dims[d].size, &total)) dg_die(4, "invalid problem: size product overflows");
  if (bl.available && (bl.ncalls < 1 || bl.ncalls > DG_MAX_CALLS))
    dg_die(4, dg_format("invalid baseline: %d calls", bl.ncalls));
  for (int x = 0; x < 3; ++x) {
    if (p.dtype[x] < DG_F32 || p.dtype[x] > DG_BF16)
      dg_die(4, dg_format("invalid problem: dtype of %c is %d", names[x], p.dtype[x]));
    const int a = p.align[x];
    if (a < dg_elem_size(p.dtype[x]) || (a & (a - 1)) != 0)
      dg_die(4, dg_format("invalid problem: align of %c is %d", names[x], a));
    long long size[DG_MAX_DIMS], stride[DG_MAX_DIMS], lo, hi;
    for (int d = 0; d < p.ndims; ++d) size[d] = p.dims[d].size, stride[d] = p.dims[d].stride[x];
    dg_reach(p.offset[x], p.ndims, size, stride, &lo, &hi);
    if (lo < 0 || hi >= p.span[x])
      dg_die(4, dg_format("invalid problem: %c reaches elements [%lld, %lld] but span is %lld", names[x], lo, hi,
                          p.span[x]));
    if (bl.available && bl.copy[x]) {
      const DgStridedView& v = bl.view[x];
      if (v.ndims < 1 || v.ndims > DG_MAX_DIMS) dg_die(4, dg_format("invalid baseline: view %c ndims", names[x]));
      dg_reach(p.offset[x], v.ndims, v.size, v.stride, &lo, &hi);
      if (lo < 0 || hi >= p.span[x] || dg_view_count(v) < 1)
        dg_die(4, dg_format("invalid baseline: view of %c reaches [%lld, %lld], span %lld", names[x], lo, hi,
                            p.span[x]));
    }
  }
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

static void dg_host_fill_random(std::vector<unsigned char>& buf, int dtype, long long n, unsigned long long seed,
                                int stream) {
  for (long long i = 0; i < n; ++i) dg_store(buf.data(), dtype, i, dg_uniform(dg_random_bits(seed, stream, i)));
}

static void dg_device_fill_random(void* buf, int dtype, long long n, unsigned long long seed, int stream,
                                  cudaStream_t s) {
  dg_fill_random_kernel<<<dg_grid(n), kDgBlock, 0, s>>>(buf, dtype, n, seed, stream);
  DG_CUDA(cudaGetLastError());
}

// Bit patterns written into C. Holes get a signaling NaN with a distinctive payload: a kernel that writes
// a hole is caught by the bit compare, and one that reads a hole (beta != 0) turns its output into NaN.
// Poison (the view when beta == 0) is the quiet NaN: any kernel that reads C then fails.
static unsigned dg_sentinel_bits(int dtype) { return dtype == DG_F32 ? 0x7FBADBADu : dtype == DG_F16 ? 0x7D5Bu : 0x7FA5u; }
static unsigned dg_poison_bits(int dtype) { return dtype == DG_F32 ? 0x7FC00000u : dtype == DG_F16 ? 0x7E00u : 0x7FC0u; }

static void dg_put_bits(unsigned char* buf, int es, long long i, unsigned bits) {
  if (es == 4) {
    const uint32_t b = bits;
    memcpy(buf + i * 4, &b, 4);
  } else {
    const uint16_t b = static_cast<uint16_t>(bits);
    memcpy(buf + i * 2, &b, 2);
  }
}

static bool dg_has_bits(const unsigned char* buf, int es, long long i, unsigned bits) {
  if (es == 4) {
    uint32_t b;
    memcpy(&b, buf + i * 4, 4);
    return b == bits;
  }
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
  float alpha, beta;
  bool passed;
  double max_abs_err, rel_err;
  bool within_acc_bound;     // ||err|| within what f32 accumulation may lose (cancelling sums)
  long long bad_elements;    // finite outputs outside the element bound
  long long nan_elements;    // NaN or Inf outputs
  long long holes_written;   // elements of C's buffer outside the view whose sentinel changed
  long long first_hole;      // buffer index of the first such element, -1 if none
  long long ref_mismatch;    // sampled elements where the GPU reference disagrees with the CPU
  bool has_fail;             // first failing output element, in dense order of C's letters:
  long long fail_index[DG_MAX_DIMS];
  double got, want;
};

// Everything one verify run holds: device buffers, their host images and the layout of C's view. Buffers
// are sized for the largest run-time size; `p`, `m`, `count` and `in_view` are those of the size under test.
struct DgVerifyState {
  const DgProblem* p;
  long long m;                              // the run-time size passed to the kernel (0: fixed-size problem)
  DgKernel kernel;
  cudaStream_t stream;
  long long count;                          // elements of C's view
  DgDeviceBuffer dev[3], dev_ref, dev_mag;
  char* ptr[3];                             // the base pointers this case passes: dev[x].ptr, or shifted
  std::vector<unsigned char> host[3];       // A and B as uploaded; C as uploaded (C_old)
  std::vector<unsigned char> host_c_out;    // C as the kernel left it
  std::vector<double> host_ref, host_mag;
  long long k_terms;                        // products summed per output element
  std::vector<unsigned char> in_view;       // per element of C's buffer: 1 inside the view
};

// The literal definition, independent of the GPU reference's odometer: for each flat index t over the
// summed letters, decompose it and evaluate offset + sum idx * stride from scratch. *magnitude receives
// the sum of the terms' absolute values, the scale the rounding of the sum is relative to.
static double dg_host_reference(const DgVerifyState& st, long long o, double alpha, double beta, double* magnitude) {
  const DgProblem& p = *st.p;
  long long idx[DG_MAX_DIMS];
  const long long c_addr = dg_c_address(p, o, idx);
  long long k_count = 1;
  for (int d = p.nc; d < p.ndims; ++d) k_count *= p.dims[d].size;
  double acc = 0.0, mag = 0.0;
  for (long long t = 0; t < k_count; ++t) {
    long long rest = t;
    for (int d = p.ndims - 1; d >= p.nc; --d) {
      idx[d] = rest % p.dims[d].size;
      rest /= p.dims[d].size;
    }
    long long a = p.offset[DG_A], b = p.offset[DG_B];
    for (int d = 0; d < p.ndims; ++d) {
      a += idx[d] * p.dims[d].stride[DG_A];
      b += idx[d] * p.dims[d].stride[DG_B];
    }
    const double term = dg_load(st.host[DG_A].data(), p.dtype[DG_A], a) * dg_load(st.host[DG_B].data(), p.dtype[DG_B], b);
    acc += term;
    mag += std::fabs(term);
  }
  double out = alpha * acc;
  mag = std::fabs(alpha) * mag;
  if (beta != 0.0) {
    const double c_term = beta * dg_load(st.host[DG_C].data(), p.dtype[DG_C], c_addr);
    out += c_term;
    mag += std::fabs(c_term);
  }
  *magnitude = mag;
  return out;
}

// Max that keeps a NaN once one has been seen.
static double dg_max_nan(double a, double b) { return (std::isnan(a) || std::isnan(b)) ? NAN : std::max(a, b); }

static DgCaseResult dg_verify_case(DgVerifyState& st, const DgOptions& opt, long long seed, float alpha, float beta) {
  const DgProblem& p = *st.p;
  const int c_type = p.dtype[DG_C], c_es = dg_elem_size(c_type);
  const unsigned sentinel = dg_sentinel_bits(c_type);
  DgCaseResult r = {};
  r.m = st.m;
  r.seed = seed;
  r.alpha = alpha;
  r.beta = beta;
  r.first_hole = -1;

  // C: sentinel in the holes; in the view NaN poison (beta == 0: C must not be read) or random C_old.
  std::vector<unsigned char>& c_old = st.host[DG_C];
  for (long long i = 0; i < p.span[DG_C]; ++i) dg_put_bits(c_old.data(), c_es, i, sentinel);
  for (long long o = 0; o < st.count; ++o) {
    const long long addr = dg_c_address(p, o, nullptr);
    if (beta == 0.0f) dg_put_bits(c_old.data(), c_es, addr, dg_poison_bits(c_type));
    else dg_store(c_old.data(), c_type, addr, dg_uniform(dg_random_bits(seed, DG_RNG_C, o)));
  }
  DG_CUDA(cudaMemcpyAsync(st.ptr[DG_C], c_old.data(), c_old.size(), cudaMemcpyHostToDevice, st.stream));

  // The reference reads C_old from the device buffer, so it runs before the kernel under test.
  dg_reference_kernel<<<dg_grid(st.count), kDgBlock, 0, st.stream>>>(
      p, st.ptr[DG_A], st.ptr[DG_B], st.ptr[DG_C], reinterpret_cast<double*>(st.dev_ref.ptr),
      reinterpret_cast<double*>(st.dev_mag.ptr), st.count, alpha, beta);
  DG_CUDA(cudaGetLastError());
  DG_CUDA(cudaStreamSynchronize(st.stream));

  const cudaError_t launched = st.kernel(st.ptr[DG_A], st.ptr[DG_B], st.ptr[DG_C], st.m, alpha, beta, st.stream);
  if (launched != cudaSuccess) dg_die_cuda(launched, "kernel under test (launch returned)", __LINE__);
  DG_CUDA(cudaGetLastError());
  DG_CUDA(cudaStreamSynchronize(st.stream));

  DG_CUDA(cudaMemcpyAsync(st.host_c_out.data(), st.ptr[DG_C], st.host_c_out.size(), cudaMemcpyDeviceToHost, st.stream));
  DG_CUDA(cudaMemcpyAsync(st.host_ref.data(), st.dev_ref.ptr, static_cast<size_t>(st.count) * sizeof(double),
                          cudaMemcpyDeviceToHost, st.stream));
  DG_CUDA(cudaMemcpyAsync(st.host_mag.data(), st.dev_mag.ptr, static_cast<size_t>(st.count) * sizeof(double),
                          cudaMemcpyDeviceToHost, st.stream));
  DG_CUDA(cudaStreamSynchronize(st.stream));

  // Outputs against the reference. Two error scales, the larger one applies:
  //  - tol relative to the output (the dtype's tolerance; most problems), and
  //  - what float32 accumulation of k_terms products may lose: 6 sqrt(k) 2^-24 |alpha| sum|a*b| (Higham's
  //    probabilistic bound). It only dominates when the sum cancels (small result, large terms), e.g.
  //    stride-0 broadcast over summed letters, where a fixed relative tolerance would fail correct code.
  double sum_ref2 = 0.0, sum_err2 = 0.0, sum_bound2 = 0.0;
  const double acc_unit = 6.0 * std::sqrt(static_cast<double>(st.k_terms)) * std::ldexp(1.0, -24);
  for (long long o = 0; o < st.count; ++o) sum_ref2 += st.host_ref[o] * st.host_ref[o];
  const double rms = std::sqrt(sum_ref2 / static_cast<double>(st.count));
  long long idx[DG_MAX_DIMS];
  for (long long o = 0; o < st.count; ++o) {
    const long long addr = dg_c_address(p, o, idx);
    const double got = dg_load(st.host_c_out.data(), c_type, addr), want = st.host_ref[o];
    const double err = std::fabs(got - want);
    const double acc_bound = acc_unit * st.host_mag[o];
    sum_bound2 += acc_bound * acc_bound;
    bool bad;
    if (!std::isfinite(got)) {
      ++r.nan_elements;
      bad = true;
    } else {
      bad = !(err <= std::max(8.0 * p.tol * (std::fabs(want) + rms), acc_bound));
      if (bad) ++r.bad_elements;
    }
    r.max_abs_err = dg_max_nan(r.max_abs_err, err);
    sum_err2 += err * err;
    if (bad && !r.has_fail) {
      r.has_fail = true;
      std::copy(idx, idx + p.nc, r.fail_index);
      r.got = got;
      r.want = want;
    }
  }
  r.rel_err = sum_ref2 > 0.0 ? std::sqrt(sum_err2 / sum_ref2) : std::sqrt(sum_err2);
  r.within_acc_bound = sum_err2 <= sum_bound2;

  // Holes: every element of C's buffer outside the view must still hold the sentinel.
  for (long long i = 0; i < p.span[DG_C]; ++i) {
    if (st.in_view[i] || dg_has_bits(st.host_c_out.data(), c_es, i, sentinel)) continue;
    if (r.holes_written++ == 0) r.first_hole = i;
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
    if (!(std::fabs(st.host_ref[o] - cpu) <= 1e-9 * (std::fabs(cpu) + magnitude))) {
      if (r.ref_mismatch++ == 0)
        fprintf(stderr, "dg_harness: GPU reference disagrees with the CPU at C element %lld: %.17g vs %.17g\n", o,
                st.host_ref[o], cpu);
    }
  }

  r.passed = r.nan_elements == 0 && r.bad_elements == 0 && (r.rel_err <= p.tol || r.within_acc_bound) &&
             r.holes_written == 0 && r.ref_mismatch == 0;
  fprintf(stderr,
          "dg_harness: verify %sseed=%lld alpha=%g beta=%g: %s rel_err=%.3g max_abs_err=%.3g bad=%lld nan=%lld "
          "holes_written=%lld ref_mismatch=%lld\n",
          p.run_time_letter ? dg_format("%c=%lld ", p.run_time_letter, st.m).c_str() : "", seed, alpha, beta,
          r.passed ? "PASS" : "FAIL", r.rel_err, r.max_abs_err, r.bad_elements, r.nan_elements, r.holes_written,
          r.ref_mismatch);
  if (r.has_fail) fprintf(stderr, "dg_harness:   first bad element: got %.9g, want %.9g\n", r.got, r.want);
  if (r.holes_written) fprintf(stderr, "dg_harness:   first written hole: buffer element %lld\n", r.first_hole);
  return r;
}

// Calls the kernel with an argument it must reject. The call must return cudaErrorInvalidValue without
// touching the device: a non-sticky error it may have left behind is cleared by reading it; a sticky one
// (a fault) cannot be cleared and ends the run.
static bool dg_expect_rejected(const DgVerifyState& st, const void* A, const void* B, void* C, long long m,
                               const char* what) {
  const cudaError_t e = st.kernel(A, B, C, m, st.p->alpha, st.p->beta, st.stream);
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

static void dg_json_fail(DgJson& j, const DgProblem& p, const DgCaseResult& r) {
  if (!r.has_fail) { j.null("first_fail"); return; }
  j.begin("first_fail");
  if (p.run_time_letter) j.integer("m", r.m);
  j.integer("seed", r.seed);
  j.num("alpha", r.alpha);
  j.num("beta", r.beta);
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
  j.str("command", command);
  j.str("name", p.name);
  j.str("arch", p.arch);
  j.str("device", prop.name);
  j.str("cc", dg_format("%d.%d", prop.major, prop.minor).c_str());
}

// Run-to-run determinism: from the same inputs and the same C_old (what `start` holds), `repeats` launches
// must leave C's whole buffer bit-identical to the first. Returns how many launches differed.
static long long dg_repeat_check(DgVerifyState& st, const std::vector<unsigned char>& start, float alpha, float beta,
                                 long long repeats) {
  std::vector<unsigned char> first(start.size()), again(start.size());
  long long differed = 0;
  for (long long r = 0; r <= repeats; ++r) {
    DG_CUDA(cudaMemcpyAsync(st.ptr[DG_C], start.data(), start.size(), cudaMemcpyHostToDevice, st.stream));
    const cudaError_t launched = st.kernel(st.ptr[DG_A], st.ptr[DG_B], st.ptr[DG_C], st.m, alpha, beta, st.stream);
    if (launched != cudaSuccess) dg_die_cuda(launched, "kernel under test (launch returned)", __LINE__);
    DG_CUDA(cudaGetLastError());
    std::vector<unsigned char>& out = r == 0 ? first : again;
    DG_CUDA(cudaMemcpyAsync(out.data(), st.ptr[DG_C], out.size(), cudaMemcpyDeviceToHost, st.stream));
    DG_CUDA(cudaStreamSynchronize(st.stream));
    if (r > 0 && memcmp(first.data(), again.data(), first.size()) != 0) ++differed;
  }
  return differed;
}

// Points the state at one run-time size: the problem there, its m and which elements of C's buffer its view
// covers (the rest, the rows past m included, are holes whose sentinel must survive).
static void dg_use_size(DgVerifyState& st, const DgProblem& at, long long m) {
  if (st.p == &at) return;   // a fixed-size problem's one size: nothing changes between seeds
  st.p = &at;
  st.m = m;
  st.count = dg_c_count(at);
  st.in_view.assign(static_cast<size_t>(at.span[DG_C]), 0);
  for (long long o = 0; o < st.count; ++o) {
    unsigned char& mark = st.in_view[dg_c_address(at, o, nullptr)];
    if (mark) dg_die(4, dg_format("invalid problem: C's view aliases (element %lld is reached twice)", o));
    mark = 1;
  }
}

// One run-time size's outcome (the whole problem's, for a fixed-size one).
struct DgSizeResult {
  long long m;
  std::vector<DgCaseResult> runs;
  long long repeat_differed = 0;
  bool passed = true;
  double max_abs_err = 0.0, rel_err = 0.0;
  int first_fail = -1;        // index into runs
};

static void dg_summarize(DgSizeResult& s) {
  s.passed = s.repeat_differed == 0;
  for (size_t i = 0; i < s.runs.size(); ++i) {
    const DgCaseResult& r = s.runs[i];
    s.passed = s.passed && r.passed;
    s.max_abs_err = dg_max_nan(s.max_abs_err, r.max_abs_err);
    s.rel_err = dg_max_nan(s.rel_err, r.rel_err);
    if (s.first_fail < 0 && r.has_fail) s.first_fail = static_cast<int>(i);
  }
}

static void dg_json_run(DgJson& j, const DgProblem& p, const DgCaseResult& r) {
  j.begin();
  if (p.run_time_letter) j.integer("m", r.m);
  j.integer("seed", r.seed);
  j.boolean("shifted", r.shifted);
  j.num("alpha", r.alpha);
  j.num("beta", r.beta);
  j.boolean("passed", r.passed);
  j.num("max_abs_err", r.max_abs_err);
  j.num("rel_err", r.rel_err);
  j.boolean("within_acc_bound", r.within_acc_bound);
  j.integer("bad_elements", r.bad_elements);
  j.integer("nan_elements", r.nan_elements);
  j.integer("holes_written", r.holes_written);
  if (r.first_hole >= 0) j.integer("first_hole", r.first_hole); else j.null("first_hole");
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

static int dg_verify(const DgProblem& p, DgKernel kernel, const DgOptions& opt, const cudaDeviceProp& prop) {
  const std::vector<long long> sizes = dg_sizes(p, opt, true);
  std::vector<DgProblem> problems;   // the problem at each size, kept alive for st.p
  for (const long long m : sizes) problems.push_back(dg_problem_at(p, m));

  // Buffers for the largest size (the problem as given), allocated once.
  DgVerifyState st;
  st.p = nullptr;
  st.kernel = kernel;
  DG_CUDA(cudaStreamCreate(&st.stream));
  for (int x = 0; x < 3; ++x) {
    // Room for the shifted pass: base pointers `align` bytes past a 256-byte boundary.
    st.dev[x] = dg_device_alloc(dg_buffer_bytes(p, x) + p.align[x], p.align[x]);
    st.ptr[x] = st.dev[x].ptr;
    st.host[x].resize(dg_buffer_bytes(p, x));
  }
  const long long max_count = dg_c_count(p);
  st.dev_ref = dg_device_alloc(static_cast<size_t>(max_count) * sizeof(double), sizeof(double));
  st.dev_mag = dg_device_alloc(static_cast<size_t>(max_count) * sizeof(double), sizeof(double));
  st.host_c_out.resize(dg_buffer_bytes(p, DG_C));
  st.host_ref.resize(static_cast<size_t>(max_count));
  st.host_mag.resize(static_cast<size_t>(max_count));
  st.k_terms = 1;
  for (int d = p.nc; d < p.ndims; ++d) st.k_terms *= p.dims[d].size;
  const long long hi = dg_run_time_hi(p);
  dg_use_size(st, p, hi);

  // The API contract first: a kernel that faults here leaves no device to verify on anyway.
  const bool api_null = dg_expect_rejected(st, nullptr, st.dev[DG_B].ptr, st.dev[DG_C].ptr, hi, "A = nullptr");
  const bool api_misaligned =
      dg_expect_rejected(st, st.dev[DG_A].ptr, st.dev[DG_B].ptr, st.dev[DG_C].ptr + 1, hi, "C misaligned by 1 byte");
  // A run-time size outside [lo, hi] must be refused before anything runs: the buffers are sized for hi.
  std::vector<std::pair<long long, bool>> m_probes;
  bool api_m = true;
  if (p.run_time_letter) {
    for (const long long m : dg_sizes_within({-1, 0, p.run_time_lo - 1, hi + 1}, LLONG_MIN, LLONG_MAX)) {
      const std::string what = dg_format("%c = %lld (outside %lld..%lld)", p.run_time_letter, m, p.run_time_lo, hi);
      const bool rejected = dg_expect_rejected(st, st.dev[DG_A].ptr, st.dev[DG_B].ptr, st.dev[DG_C].ptr, m,
                                               what.c_str());
      m_probes.emplace_back(m, rejected);
      api_m = api_m && rejected;
    }
  }

  // Fresh A and B for `seed`, uploaded to where st.ptr points. They cover the largest size: every size
  // below reads a part of them, so one upload serves them all.
  const auto upload_inputs = [&](long long seed) {
    for (int x = DG_A; x <= DG_B; ++x) {
      dg_host_fill_random(st.host[x], p.dtype[x], p.span[x], static_cast<unsigned long long>(seed), x == DG_A ? DG_RNG_A : DG_RNG_B);
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
      if (opt.repeat > 0 && seed == opt.seeds.front()) {
        // C as the cases left it is a valid C_old (finite, sentinels in the holes).
        std::vector<unsigned char> start(st.host_c_out.size());
        DG_CUDA(cudaMemcpy(start.data(), st.ptr[DG_C], start.size(), cudaMemcpyDeviceToHost));
        results[i].repeat_differed = dg_repeat_check(st, start, p.alpha, p.beta, opt.repeat);
      }
    }
  }
  // cudaMalloc gives 256-byte aligned pointers, so the cases above take a kernel's fast path. When the spec
  // promises less than 16 bytes for some operand, one more case passes base pointers exactly `align` bytes
  // past a 256-byte boundary (still what the spec promises): the run-time fallbacks get verified too.
  bool shift = false;
  for (int x = 0; x < 3; ++x) shift |= p.align[x] < 16;
  if (shift && !opt.seeds.empty()) {
    const long long seed = opt.seeds.front() + 1000003;
    for (int x = 0; x < 3; ++x) st.ptr[x] = st.dev[x].ptr + (p.align[x] < 256 ? p.align[x] : 0);
    upload_inputs(seed);
    for (size_t i = 0; i < sizes.size(); ++i) {
      dg_use_size(st, problems[i], sizes[i]);
      results[i].runs.push_back(dg_verify_case(st, opt, seed, p.alpha, p.beta));
      results[i].runs.back().shifted = true;
    }
  }
  DG_CUDA(cudaStreamDestroy(st.stream));

  // The whole: every size's cases, the worst size's errors, the first failure in size order.
  bool passed = api_null && api_misaligned && api_m;
  double max_abs_err = 0.0, rel_err = 0.0;
  long long repeat_differed = 0;
  const DgCaseResult* first_fail = nullptr;
  for (DgSizeResult& s : results) {
    dg_summarize(s);
    passed = passed && s.passed;
    max_abs_err = dg_max_nan(max_abs_err, s.max_abs_err);
    rel_err = dg_max_nan(rel_err, s.rel_err);
    repeat_differed += s.repeat_differed;
    if (!first_fail && s.first_fail >= 0) first_fail = &s.runs[s.first_fail];
  }

  DgJson j;
  dg_json_header(j, "verify", p, prop);
  j.boolean("passed", passed);
  j.num("tol", p.tol);
  j.num("max_abs_err", max_abs_err);
  j.num("rel_err", rel_err);
  if (first_fail) dg_json_fail(j, p, *first_fail); else j.null("first_fail");
  j.boolean("api_null_rejected", api_null);
  j.boolean("api_misaligned_rejected", api_misaligned);
  j.integer("repeat", opt.repeat);
  j.integer("repeat_differed", repeat_differed);  // launches whose C bits differed from the first
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
  CreateFn create = nullptr;
  SetStreamFn set_stream = nullptr;
  DestroyFn destroy = nullptr;
  SetWorkspaceFn set_workspace = nullptr;   // optional (cuBLAS >= 11): a fixed workspace keeps graph capture free of allocations
  GemmStridedBatchedExFn gemm = nullptr;
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
  return dg_cublas_symbol(lib, "cublasCreate_v2", &cb->create, why) &&
         dg_cublas_symbol(lib, "cublasSetStream_v2", &cb->set_stream, why) &&
         dg_cublas_symbol(lib, "cublasDestroy_v2", &cb->destroy, why) &&
         dg_cublas_symbol(lib, "cublasGemmStridedBatchedEx", &cb->gemm, why);
}

// nsets copies of the three buffers, so that consecutive launches do not find their data in L2.
struct DgBenchSets {
  int nsets;
  std::vector<DgDeviceBuffer> buf[3];
};

// The baseline: gathers into dense temps where Python asked for them, one cuBLAS call, scatter of C.
struct DgBaselineRunner {
  const DgProblem* p;
  const DgBaseline* bl;
  const DgBenchSets* sets;
  DgCublas cublas;
  void* handle = nullptr;
  DgDeviceBuffer temp[3];
  cudaStream_t stream;

  void copy(bool gather, int x, int set) const {
    const DgStridedView& v = bl->view[x];
    const long long n = dg_view_count(v);
    char* view_base = sets->buf[x][set].ptr + p->offset[x] * dg_elem_size(p->dtype[x]);
    if (dg_elem_size(p->dtype[x]) == 4) {
      if (gather) dg_gather_kernel<<<dg_grid(n), kDgBlock, 0, stream>>>(reinterpret_cast<const uint32_t*>(view_base), v, reinterpret_cast<uint32_t*>(temp[x].ptr), n);
      else dg_scatter_kernel<<<dg_grid(n), kDgBlock, 0, stream>>>(reinterpret_cast<const uint32_t*>(temp[x].ptr), v, reinterpret_cast<uint32_t*>(view_base), n);
    } else {
      if (gather) dg_gather_kernel<<<dg_grid(n), kDgBlock, 0, stream>>>(reinterpret_cast<const uint16_t*>(view_base), v, reinterpret_cast<uint16_t*>(temp[x].ptr), n);
      else dg_scatter_kernel<<<dg_grid(n), kDgBlock, 0, stream>>>(reinterpret_cast<const uint16_t*>(temp[x].ptr), v, reinterpret_cast<uint16_t*>(view_base), n);
    }
    DG_CUDA(cudaGetLastError());
  }

  // The pointer cuBLAS gets for operand x: its temp, or the view's first element.
  void* operand(int x, int set) const {
    return bl->copy[x] ? temp[x].ptr : sets->buf[x][set].ptr + p->offset[x] * dg_elem_size(p->dtype[x]);
  }

  // One baseline product with formulation `c` on set `set`; returns the cuBLAS status.
  int run(const DgGemmCall& c, int set) const {
    for (int x = DG_A; x <= DG_B; ++x)
      if (bl->copy[x]) copy(true, x, set);
    if (bl->copy[DG_C] && p->beta != 0.0f) copy(true, DG_C, set);
    const int xo = c.swap ? DG_B : DG_A, yo = c.swap ? DG_A : DG_B;
    const int status = cublas.gemm(handle, c.trans_x, c.trans_y, static_cast<int>(c.m), static_cast<int>(c.n),
                                   static_cast<int>(c.k), &p->alpha, operand(xo, set), dg_cublas_type(p->dtype[xo]),
                                   static_cast<int>(c.ldx), c.stride_x, operand(yo, set), dg_cublas_type(p->dtype[yo]),
                                   static_cast<int>(c.ldy), c.stride_y, &p->beta, operand(DG_C, set),
                                   dg_cublas_type(p->dtype[DG_C]), static_cast<int>(c.ldc), c.stride_c,
                                   static_cast<int>(c.batch), DG_CUBLAS_COMPUTE_32F, DG_CUBLAS_GEMM_DEFAULT);
    if (status == 0 && bl->copy[DG_C]) copy(false, DG_C, set);
    return status;
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
  double graph_us = NAN;    // the number reported: CUDA-graph replay
  double stream_us = NAN;   // back-to-back launches from the host
};

template <typename RunSet>
static DgTiming dg_time(cudaStream_t stream, int nsets, const DgOptions& opt, RunSet run_set) {
  DgTiming t;
  t.stream_us = dg_stream_us(stream, nsets, opt.warmup, opt.reps, run_set);
  t.graph_us = dg_graph_us(stream, nsets, dg_graph_launches(nsets, t.stream_us), opt.reps, run_set);
  return t;
}

// One run-time size's timings (the whole problem's, for a fixed-size one).
struct DgBenchRow {
  long long m = 0;
  DgTiming ours;
  std::string baseline;      // the baseline's kind, or why it is unavailable or skipped
  int best_call = -1;        // the fastest formulation, -1 if none ran
  DgTiming best;
  std::vector<DgTiming> call_times;   // per formulation
  std::vector<std::string> call_errors;
  double flops = 0.0, bytes = 0.0;
};

// Work and traffic: A and B count the unique elements they read (broadcast letters read once), C is
// written, and read too when beta != 0.
static void dg_work(const DgProblem& p, double* flops, double* bytes) {
  *flops = 2.0;
  *bytes = 0.0;
  for (int d = 0; d < p.ndims; ++d) *flops *= static_cast<double>(p.dims[d].size);
  for (int x = DG_A; x <= DG_B; ++x) {
    double n = dg_elem_size(p.dtype[x]);
    for (int d = 0; d < p.ndims; ++d)
      if (p.dims[d].stride[x] != 0) n *= static_cast<double>(p.dims[d].size);
    *bytes += n;
  }
  *bytes += static_cast<double>(dg_c_count(p)) * dg_elem_size(p.dtype[DG_C]) * (p.beta != 0.0f ? 2 : 1);
}

// The fields a fixed-size problem reports at the top level and a run-time size in each of "m_rows".
static void dg_json_bench_row(DgJson& j, const DgBenchRow& r, const DgBaseline& bl) {
  const double us = r.ours.graph_us, baseline_us = r.best.graph_us;
  j.num("us", us);
  j.num("tflops", r.flops / (us * 1e-6) / 1e12);
  j.num("gbps", r.bytes / (us * 1e-6) / 1e9);
  j.num("us_stream", r.ours.stream_us);
  j.str("baseline", r.baseline.c_str());
  if (r.best_call < 0) {
    j.null("baseline_formulation");
    j.null("baseline_us");
    j.null("baseline_tflops");
    j.null("baseline_us_stream");
    j.null("ratio");
  } else {
    j.str("baseline_formulation", bl.calls[r.best_call].desc);
    j.num("baseline_us", baseline_us);
    j.num("baseline_tflops", r.flops / (baseline_us * 1e-6) / 1e12);
    j.num("baseline_us_stream", r.best.stream_us);
    j.num("ratio", baseline_us / us);
  }
  j.begin_array("baseline_candidates");
  for (size_t c = 0; c < r.call_times.size(); ++c) {
    j.begin();
    j.str("formulation", bl.calls[c].desc);
    if (r.call_errors[c].empty()) j.num("us", r.call_times[c].graph_us); else j.null("us");
    if (!r.call_errors[c].empty()) j.str("error", r.call_errors[c].c_str());
    j.end();
  }
  j.end_array();
}

static int dg_bench(const DgProblem& p, const DgBaseline& bl, DgKernel kernel, const DgOptions& opt,
                    const cudaDeviceProp& prop) {
  cudaStream_t stream;
  DG_CUDA(cudaStreamCreate(&stream));

  // How many sets: enough to cover 3x L2, at most 64, and using at most half of the free memory. Sized for
  // the largest run-time size; smaller ones use a part of each set.
  size_t set_bytes = 0, temp_bytes = 0;
  for (int x = 0; x < 3; ++x) {
    set_bytes += dg_buffer_bytes(p, x) + p.align[x];
    if (bl.available && bl.copy[x]) temp_bytes += dg_view_count(bl.view[x]) * dg_elem_size(p.dtype[x]);
  }
  size_t free_bytes = 0, total_bytes = 0;
  DG_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  const size_t l2_target = 3 * static_cast<size_t>(prop.l2CacheSize);
  size_t nsets = std::min<size_t>(std::max<size_t>((l2_target + set_bytes - 1) / set_bytes, 1), 64);
  const size_t budget = free_bytes / 2 > temp_bytes ? free_bytes / 2 - temp_bytes : 0;
  nsets = std::max<size_t>(std::min(nsets, budget / set_bytes), 1);

  DgBenchSets sets;
  sets.nsets = static_cast<int>(nsets);
  for (int x = 0; x < 3; ++x) {
    for (int i = 0; i < sets.nsets; ++i) {
      sets.buf[x].push_back(dg_device_alloc(dg_buffer_bytes(p, x), p.align[x]));
      dg_device_fill_random(sets.buf[x][i].ptr, p.dtype[x], p.span[x], 0x5EED0000ULL + i, x, stream);
    }
  }
  DG_CUDA(cudaStreamSynchronize(stream));

  // The baseline, if it can run here (set up once, for the largest size); otherwise the reason it cannot.
  std::string baseline = bl.kind ? bl.kind : "";
  DgBaselineRunner runner;
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
      for (int x = 0; x < 3; ++x)
        if (bl.copy[x]) runner.temp[x] = dg_device_alloc(dg_view_count(bl.view[x]) * dg_elem_size(p.dtype[x]), 256);
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
  for (const long long m : sizes) {
    const DgProblem at = dg_problem_at(p, m);
    const DgBaseline bl_at = dg_baseline_at(bl, m, hi);
    DgBenchRow row;
    row.m = m;
    row.baseline = baseline;
    dg_work(at, &row.flops, &row.bytes);
    row.ours = dg_time(stream, sets.nsets, opt, [&](int i) {
      const cudaError_t e = kernel(sets.buf[DG_A][i].ptr, sets.buf[DG_B][i].ptr, sets.buf[DG_C][i].ptr, m, at.alpha,
                                   at.beta, stream);
      if (e != cudaSuccess) dg_die_cuda(e, "kernel under test (launch returned)", __LINE__);
    });

    // Every formulation is timed the same way as the kernel; the fastest is the baseline.
    row.call_times.resize(static_cast<size_t>(bl.available && opt.baseline ? bl.ncalls : 0));
    row.call_errors.resize(row.call_times.size());
    if (cublas_ready) {
      runner.p = &at;
      runner.bl = &bl_at;
      for (int c = 0; c < bl_at.ncalls; ++c) {
        const DgGemmCall& call = bl_at.calls[c];
        int cs = setup_status;
        if (cs == 0 && std::max({call.m, call.n, call.k, call.ldx, call.ldy, call.ldc, call.batch}) > INT_MAX)
          cs = -1;
        if (cs == 0) cs = runner.run(call, 0);   // a trial call: cuBLAS may reject the types or the layout
        DG_CUDA(cudaStreamSynchronize(stream));
        if (cs != 0) {
          row.call_errors[c] = cs < 0 ? "a cuBLAS dimension exceeds int" : "cuBLAS returned " + dg_cublas_status(cs);
          continue;
        }
        row.call_times[c] = dg_time(stream, sets.nsets, opt, [&](int i) {
          if (const int s = runner.run(call, i)) dg_die(4, "cublasGemmStridedBatchedEx returned " + dg_cublas_status(s));
        });
        if (row.best_call < 0 || row.call_times[c].graph_us < row.best.graph_us) {
          row.best_call = c;
          row.best = row.call_times[c];
        }
      }
      if (row.best_call < 0) row.baseline = "unavailable: " + row.call_errors[0];
    }
    const double us = row.ours.graph_us, baseline_us = row.best.graph_us;
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
  DG_CUDA(cudaStreamDestroy(stream));

  // The top level is the largest size's row, so that a reader of fixed-size results reads it as one.
  DgJson j;
  dg_json_header(j, "bench", p, prop);
  j.str("method", "graph");
  dg_json_bench_row(j, rows.back(), bl);
  j.num("copy_gbps", copy_gbps);
  j.integer("sets", sets.nsets);
  j.integer("reps", opt.reps);
  if (p.run_time_letter) {
    j.integer("m", rows.back().m);
    dg_json_run_time_range(j, p);
    j.begin_array("m_rows");
    for (const DgBenchRow& row : rows) {
      j.begin();
      j.integer("m", row.m);
      dg_json_bench_row(j, row, bl);
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
                      "[--reps 50] [--baseline 0|1] [--m 1,8,64]");
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

static int dg_harness_run(int argc, char** argv, const DgProblem& p, const DgBaseline& bl, DgKernel kernel) {
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
  return opt.command == std::string("verify") ? dg_verify(p, kernel, opt, prop) : dg_bench(p, bl, kernel, opt, prop);
}

int dg_harness_main(int argc, char** argv, const DgProblem& p, const DgBaseline& bl, DgLaunchFn launch) {
  DgKernel kernel;
  kernel.fixed = launch;
  return dg_harness_run(argc, argv, p, bl, kernel);
}

int dg_harness_main(int argc, char** argv, const DgProblem& p, const DgBaseline& bl, DgLaunchRunTimeFn launch) {
  DgKernel kernel;
  kernel.run_time = launch;
  return dg_harness_run(argc, argv, p, bl, kernel);
}
