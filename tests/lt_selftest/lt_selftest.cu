// lt_selftest.cu -- runs templates/dg_cublaslt.cuh's cuBLASLt calls on a GPU and checks them against a naive
// float64 reference on the host: the BIAS / RELU_BIAS / GELU_BIAS epilogues (and RELU, GELU) on the
// nn.Linear layout in f16 and bf16, what baseline.py (its cuBLASLt part) relies on (beta with C != D, a per-batch bias
// through CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE with a broadcast weight, m = 1, cuBLASLt not reading C
// when beta == 0), which GELU cuBLASLt computes (an f32 output tells tanh from erf apart), and one graph
// capture. Probes (not counted in the exit code unless their numbers are wrong): an f32 bias with a bf16
// output, pointers aligned to 2 bytes only.
//
// The problem, in our terms (row-major): out[b, i, j] = epi(alpha * sum_k A[b, i, k] W[b', j, k]
// + beta * C[b, i, j] + bias[b'', j]), A [M, K] (row stride lda), W [N, K] (nn.Linear's weight; b' = 0
// when broadcast), bias [N] (b'' = 0 unless per batch), C and D [M, N] with their own row strides. Its
// cuBLAS formulation is baseline.py's for such a spec: C^T = W^T A, i.e. X = W (transposed), Y = A,
// rows = n (the bias's letters), cols = m.
//
// Build and run from the repository root (bash tests/lt_selftest/run_on_gpu.sh does both):
//   nvcc -std=c++17 -O1 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -Wall -I templates
//        tests/lt_selftest/lt_selftest.cu -o /tmp/lt_selftest -ldl
//   /tmp/lt_selftest            (DEEPGEMM_CUBLASLT=/path/to/libcublasLt.so.13 if it is not on the loader's path)
// Prints one JSON object on stdout: {"passed", "library", "path", "gelu", "cases": [{"name", "status", ...}]};
// exit 0 all required cases pass, 1 some failed, 2 cuBLASLt cannot be loaded, 3 no GPU. Each case runs in a
// process of its own (`lt_selftest --case NAME`, names from --list: a fault stays in its case); `lt_selftest --custom
// ab,out,bias,epilogue,m,n,k,batch,alpha,beta,d_pad,separate_c,w_broadcast,bias_per_batch,misalign` runs one
// problem of one's own (see parse_custom).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dg_cublaslt.cuh"

namespace {

struct Case {
  const char* name;
  int dtype_ab, dtype_out, dtype_bias;
  int epilogue;
  long long m, n, k, batch;
  float alpha, beta;
  long long d_pad;       // D's row stride is n + d_pad
  int separate_c;        // 1: C is its own buffer (row stride n), read for beta; D is written
  int w_broadcast;       // 1: one W for every batch
  int bias_per_batch;    // 1: bias [batch, n]
  long long misalign;    // elements added to every pointer (alignment probe)
  int required;          // 0: a probe; "unsupported" does not fail the run, wrong numbers do
  int capture;           // 1: run once more inside a CUDA graph; the result must be bit-identical
  int alternative;       // 1: through DgCublasLtAlternative (the harness's class) instead, see run_alternative
};

const Case kCases[] = {
    {"f16_bias", DG_LT_F16, DG_LT_F16, DG_LT_F16, DG_LT_EPILOGUE_BIAS, 64, 96, 80, 1, 1.0f, 0.0f, 0, 0, 0, 0, 0, 1, 0},
    {"f16_relu_bias", DG_LT_F16, DG_LT_F16, DG_LT_F16, DG_LT_EPILOGUE_RELU_BIAS, 64, 96, 80, 1, 1.0f, 0.0f, 0, 0, 0, 0,
     0, 1, 0},
    {"f16_gelu_bias", DG_LT_F16, DG_LT_F16, DG_LT_F16, DG_LT_EPILOGUE_GELU_BIAS, 64, 96, 80, 1, 1.0f, 0.0f, 0, 0, 0, 0,
     0, 1, 1},
    {"bf16_bias", DG_LT_BF16, DG_LT_BF16, DG_LT_BF16, DG_LT_EPILOGUE_BIAS, 64, 96, 80, 1, 1.0f, 0.0f, 0, 0, 0, 0, 0, 1,
     0},
    {"bf16_relu_bias", DG_LT_BF16, DG_LT_BF16, DG_LT_BF16, DG_LT_EPILOGUE_RELU_BIAS, 64, 96, 80, 1, 1.0f, 0.0f, 0, 0, 0,
     0, 0, 1, 0},
    {"bf16_gelu_bias", DG_LT_BF16, DG_LT_BF16, DG_LT_BF16, DG_LT_EPILOGUE_GELU_BIAS, 64, 96, 80, 1, 1.0f, 0.0f, 0, 0, 0,
     0, 0, 1, 1},
    {"f16_relu", DG_LT_F16, DG_LT_F16, -1, DG_LT_EPILOGUE_RELU, 64, 96, 80, 1, 1.0f, 0.0f, 0, 0, 0, 0, 0, 1, 0},
    {"bf16_gelu", DG_LT_BF16, DG_LT_BF16, -1, DG_LT_EPILOGUE_GELU, 64, 96, 80, 1, 1.0f, 0.0f, 0, 0, 0, 0, 0, 1, 0},
    // f32 output: small enough an error that the tanh and erf forms of GELU are told apart.
    {"f16_f32out_gelu_bias", DG_LT_F16, DG_LT_F32, DG_LT_F32, DG_LT_EPILOGUE_GELU_BIAS, 64, 96, 64, 1, 1.0f, 0.0f, 0,
     0, 0, 0, 0, 1, 0},
    // beta != 0, C and D different views (D's rows padded), alpha != 1.
    {"bf16_beta_c_ne_d", DG_LT_BF16, DG_LT_BF16, DG_LT_BF16, DG_LT_EPILOGUE_BIAS, 48, 64, 72, 1, 1.25f, 0.5f, 8, 1, 0,
     0, 0, 1, 0},
    // m = 1 (a decode step): cuBLASLt's output is n x 1.
    {"bf16_m1_gelu_bias", DG_LT_BF16, DG_LT_BF16, DG_LT_BF16, DG_LT_EPILOGUE_GELU_BIAS, 1, 256, 128, 1, 1.0f, 0.0f, 0,
     0, 0, 0, 0, 1, 0},
    // A batch of 3 with one W (stride 0) and a bias per batch (CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE).
    {"bf16_batch_bias_stride", DG_LT_BF16, DG_LT_BF16, DG_LT_BF16, DG_LT_EPILOGUE_RELU_BIAS, 32, 64, 48, 3, 1.0f, 0.0f,
     0, 0, 1, 1, 0, 1, 0},
    // The same batch with one bias for all (batch stride 0) and C != D with beta.
    {"f16_batch_bias_shared", DG_LT_F16, DG_LT_F16, DG_LT_F16, DG_LT_EPILOGUE_GELU_BIAS, 32, 64, 48, 3, 1.0f, 1.0f, 4,
     1, 1, 0, 0, 1, 0},
    // D's rows 68 halves apart (8-byte aligned only): cuBLASLt 13.1's heuristic, told only the pointer's
    // alignment, picked a 16-byte-store GELU kernel that faulted; dg_lt_prepare tells it what ld leaves.
    {"f16_gelu_bias_ld68", DG_LT_F16, DG_LT_F16, DG_LT_F16, DG_LT_EPILOGUE_GELU_BIAS, 32, 64, 48, 1, 1.0f, 0.0f, 4, 0,
     0, 0, 0, 1, 0},
    {"bf16_gelu_bias_ld68_beta", DG_LT_BF16, DG_LT_BF16, DG_LT_BF16, DG_LT_EPILOGUE_GELU_BIAS, 32, 64, 48, 1, 1.0f,
     1.0f, 4, 1, 0, 0, 0, 1, 0},
    // A per-batch bias 50 halves apart (4-byte aligned): the heuristic is shown a pointer as aligned as that.
    {"f16_batch_bias_stride50", DG_LT_F16, DG_LT_F16, DG_LT_F16, DG_LT_EPILOGUE_GELU_BIAS, 16, 50, 40, 3, 1.0f, 0.0f,
     6, 0, 0, 1, 0, 1, 0},
    // f32 throughout (no TF32: CUBLAS_COMPUTE_32F), and no epilogue at all with C != D (cuBLAS cannot do that).
    {"f32_gelu_bias", DG_LT_F32, DG_LT_F32, DG_LT_F32, DG_LT_EPILOGUE_GELU_BIAS, 40, 56, 72, 1, 1.0f, 0.0f, 0, 0, 0, 0,
     0, 1, 0},
    {"f16_default_c_ne_d", DG_LT_F16, DG_LT_F16, -1, DG_LT_EPILOGUE_DEFAULT, 48, 64, 72, 2, 0.75f, 0.5f, 8, 1, 0, 0, 0,
     1, 0},
    // The harness's DgCublasLtAlternative over stand-ins of DgAltBaseline and DgProblem: offset views (the
    // bias 2-byte aligned), a run-time m of 40 with the calls given at 64, two formulations to choose from.
    {"alternative_run_time", DG_LT_F16, DG_LT_F16, DG_LT_F16, DG_LT_EPILOGUE_GELU_BIAS, 64, 96, 80, 1, 1.0f, 0.0f, 0, 0,
     0, 0, 0, 1, 0, 1},
    // Probes.
    {"probe_bf16_out_f32_bias", DG_LT_BF16, DG_LT_BF16, DG_LT_F32, DG_LT_EPILOGUE_BIAS, 64, 96, 80, 1, 1.0f, 0.0f, 0, 0,
     0, 0, 0, 0, 0},
    {"probe_f16_align2", DG_LT_F16, DG_LT_F16, DG_LT_F16, DG_LT_EPILOGUE_GELU_BIAS, 63, 95, 79, 1, 1.0f, 0.0f, 1, 0, 0,
     0, 1, 0, 0},
};

unsigned long long g_rng = 0x9E3779B97F4A7C15ull;
double uniform() {  // in [-1, 1)
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<double>(g_rng >> 11) / 4503599627370496.0 - 1.0;
}

int elem_size(int dtype) { return dtype == DG_LT_F32 ? 4 : 2; }

// The value stored as `dtype` (rounded to it) at element i of a host buffer, and back.
void put(std::vector<unsigned char>& buf, int dtype, long long i, double v) {
  if (dtype == DG_LT_F32) {
    const float f = static_cast<float>(v);
    memcpy(&buf[i * 4], &f, 4);
  } else if (dtype == DG_LT_F16) {
    const __half h = __float2half_rn(static_cast<float>(v));
    memcpy(&buf[i * 2], &h, 2);
  } else {
    const __nv_bfloat16 h = __float2bfloat16_rn(static_cast<float>(v));
    memcpy(&buf[i * 2], &h, 2);
  }
}

double get(const std::vector<unsigned char>& buf, int dtype, long long i) {
  if (dtype == DG_LT_F32) {
    float f;
    memcpy(&f, &buf[i * 4], 4);
    return f;
  }
  if (dtype == DG_LT_F16) {
    __half h;
    memcpy(&h, &buf[i * 2], 2);
    return __half2float(h);
  }
  __nv_bfloat16 h;
  memcpy(&h, &buf[i * 2], 2);
  return __bfloat162float(h);
}

void put_nan(std::vector<unsigned char>& buf, int dtype, long long i) {
  put(buf, dtype, i, std::nan(""));
}

double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

struct DeviceBuffer {
  void* ptr = nullptr;
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
};

std::string upload(DeviceBuffer& d, const std::vector<unsigned char>& h) {
  if (cudaMalloc(&d.ptr, h.size() + 256) != cudaSuccess) return "cudaMalloc failed";
  if (cudaMemcpy(d.ptr, h.data(), h.size(), cudaMemcpyHostToDevice) != cudaSuccess) return "cudaMemcpy failed";
  return std::string();
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (static_cast<unsigned char>(ch) >= 0x20) out += ch;
  }
  return out;
}

std::string num(double v) {
  if (std::isnan(v)) return "\"nan\"";
  if (std::isinf(v)) return v > 0 ? "\"inf\"" : "\"-inf\"";
  char b[64];
  snprintf(b, sizeof(b), "%.6g", v);
  return b;
}

struct Outcome {
  std::string status;      // "pass", "fail" or "unsupported"
  std::string why;
  double max_err = 0.0, max_err_erf = 0.0;   // against the expected reference (GELU: tanh), and GELU's erf form
  long long bad = 0, nan = 0, holes_written = 0;
  int graph_identical = -1;
};

// The DgLtCall baseline.py renders for this problem (the swapped formulation: rows = n, cols = m).
DgLtCall make_call(const Case& c, long long lda, long long ldd, long long ldc) {
  DgLtCall call{};
  call.desc = c.name;
  call.swap = 1;
  call.trans_x = 1;  // W [n, k] row-major is column-major k x n: op = T gives n x k
  call.trans_y = 0;  // A [m, k] row-major is column-major k x m
  call.m = c.n;
  call.n = c.m;
  call.k = c.k;
  call.ldx = c.k;
  call.ldy = lda;
  call.ldc = c.separate_c ? ldc : ldd;
  call.ldd = ldd;
  call.stride_x = c.w_broadcast ? 0 : c.n * c.k;
  call.stride_y = c.m * lda;
  call.stride_d = c.m * ldd;
  call.stride_c = c.separate_c ? c.m * ldc : call.stride_d;
  call.batch = c.batch;
  call.dtype_ab = c.dtype_ab;
  call.dtype_out = c.dtype_out;
  call.dtype_bias = c.dtype_bias;
  call.epilogue = c.epilogue;
  call.bias_batch_stride = c.bias_per_batch ? c.n : 0;
  call.c_is_d = c.separate_c ? 0 : 1;
  call.scaled = 0;
  return call;
}

// Stand-ins of dg_harness.cuh's DgAltBaseline and DgProblem: the members DgCublasLtAlternative uses.
struct FakeAltBase {
  virtual ~FakeAltBase() = default;
  virtual const char* epilogue() const = 0;
  virtual std::string formulation() const = 0;
  virtual std::string prepare(const struct FakeProblem& p, cudaStream_t stream) = 0;
  virtual std::string run(void* const bufs[7], cudaStream_t stream) = 0;
};
struct FakeProblem {
  int ndims;
  struct {
    char letter;
    long long size;
  } dims[3];
  char run_time_letter;
  int present[7];
  long long offset[7];
  int dtype[7];
  int align[7];
  float alpha, beta;
};

// C[m, n] = gelu(A[m, k] W[n, k]^T + bias[n]) at m = 40 of 64, through DgCublasLtAlternative: views at offsets
// A 8, W 0, C 16 (rows of n), bias 3 (2-byte aligned); the rows past m must stay untouched.
Outcome run_alternative(const Case& c, cudaStream_t stream) {
  Outcome o;
  const long long hi = c.m, m = c.m * 5 / 8, n = c.n, k = c.k;
  const long long off[5] = {8, 0, 16, 0, 3};
  const int t = c.dtype_ab;
  std::vector<unsigned char> ha((off[0] + hi * k) * 2), hw((off[1] + n * k) * 2), hc((off[2] + hi * n) * 2),
      hb((off[4] + n) * 2);
  for (long long i = 0; i < off[0] + hi * k; ++i) put(ha, t, i, uniform());
  for (long long i = 0; i < off[1] + n * k; ++i) put(hw, t, i, uniform());
  for (long long i = 0; i < off[4] + n; ++i) put(hb, t, i, uniform());
  for (long long i = 0; i < off[2] + hi * n; ++i) put_nan(hc, t, i);
  DeviceBuffer da, dw, dc, db;
  for (auto& [d, h] : {std::pair<DeviceBuffer*, std::vector<unsigned char>*>{&da, &ha}, {&dw, &hw}, {&dc, &hc},
                       {&db, &hb}}) {
    o.why = upload(*d, *h);
    if (!o.why.empty()) {
      o.status = "fail";
      return o;
    }
  }
  FakeProblem p{};
  p.ndims = 3;
  p.dims[0] = {'m', m};
  p.dims[1] = {'n', n};
  p.dims[2] = {'k', k};
  p.run_time_letter = 'm';
  for (int s = 0; s < 7; ++s) p.dtype[s] = t, p.align[s] = 2;
  p.present[0] = p.present[1] = p.present[2] = p.present[4] = 1;
  p.offset[0] = off[0], p.offset[1] = off[1], p.offset[2] = off[2], p.offset[4] = off[4];
  p.alpha = c.alpha;
  p.beta = c.beta;
  DgLtCall call{};
  call = DgLtCall{"C^T=B^TA m=n n=m k=k", 1, 1, 0, n, hi, k, k, k, n, n, 0, 0, 0, 0, 1, t, t, t, c.epilogue, 0, 1,
                  DG_LT_SCALE_N};
  DgCublasLtAlternative<FakeAltBase, FakeProblem> alt({call, call}, hi);
  void* bufs[7] = {da.ptr, dw.ptr, dc.ptr, nullptr, db.ptr, nullptr, nullptr};
  o.why = alt.prepare(p, stream);
  if (o.why.empty()) o.why = alt.run(bufs, stream);  // the trial run: times both formulations, keeps one
  if (o.why.empty()) o.why = alt.run(bufs, stream);
  if (o.why.empty() && cudaStreamSynchronize(stream) != cudaSuccess) o.why = "the run faulted";
  if (o.why.empty() && std::string(alt.epilogue()).rfind("cublaslt:GELU_BIAS", 0) != 0)
    o.why = std::string("epilogue() is ") + alt.epilogue();
  if (o.why.empty() && alt.formulation() != call.desc) o.why = "formulation() is " + alt.formulation();
  if (!o.why.empty()) {
    o.status = "fail";
    return o;
  }
  cudaMemcpy(hc.data(), dc.ptr, hc.size(), cudaMemcpyDeviceToHost);
  const double u = t == DG_LT_F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  for (long long i = 0; i < off[2] + hi * n; ++i) {
    const double got = get(hc, t, i);
    const long long e = i - off[2];
    if (e < 0 || e >= m * n) {  // before the view, or a row past m
      o.holes_written += !std::isnan(got);
      continue;
    }
    const long long r = e / n, j = e % n;
    double acc = 0.0, mag = 0.0;
    for (long long q = 0; q < k; ++q) {
      const double prod = get(ha, t, off[0] + r * k + q) * get(hw, t, off[1] + j * k + q);
      acc += prod;
      mag += std::fabs(prod);
    }
    const double bias = get(hb, t, off[4] + j), pre = c.alpha * acc + bias, want = gelu_tanh(pre);
    const double tol = 4.0 * u * (std::fabs(want) + 2.0 * std::fabs(pre) + std::fabs(bias)) + k * std::ldexp(1.0, -23) * mag + 2e-5;
    if (std::isnan(got)) {
      ++o.nan;
      continue;
    }
    o.max_err = std::max(o.max_err, std::fabs(got - want));
    o.max_err_erf = std::max(o.max_err_erf, std::fabs(got - gelu_erf(pre)));
    o.bad += std::fabs(got - want) > tol;
  }
  const bool ok = o.bad == 0 && o.nan == 0 && o.holes_written == 0;
  o.status = ok ? "pass" : "fail";
  if (!ok) o.why = std::to_string(o.bad) + " elements off, " + std::to_string(o.nan) + " NaN, " +
                   std::to_string(o.holes_written) + " holes written";
  return o;
}

Outcome run_case(const DgLtApi& lt, void* handle, const Case& c, void* workspace, size_t ws_bytes, cudaStream_t stream) {
  if (c.alternative) return run_alternative(c, stream);
  Outcome o;
  const long long lda = c.k + (c.misalign ? 1 : 0), ldd = c.n + c.d_pad, ldc = c.n;
  const long long off = c.misalign;  // elements before every view
  const long long na = off + c.batch * c.m * lda, nw = off + (c.w_broadcast ? 1 : c.batch) * c.n * c.k;
  const long long nbias = off + (c.bias_per_batch ? c.batch : 1) * c.n;
  const long long nd = off + c.batch * c.m * ldd, nc = off + c.batch * c.m * ldc;
  const bool bias = dg_lt_has_bias(c.epilogue);
  const int bias_dtype = bias ? c.dtype_bias : c.dtype_out;
  std::vector<unsigned char> ha(na * elem_size(c.dtype_ab)), hw(nw * elem_size(c.dtype_ab)),
      hb(nbias * elem_size(bias_dtype)), hd(nd * elem_size(c.dtype_out)), hc(nc * elem_size(c.dtype_out));
  for (long long i = 0; i < na; ++i) put(ha, c.dtype_ab, i, uniform());
  for (long long i = 0; i < nw; ++i) put(hw, c.dtype_ab, i, uniform());
  for (long long i = 0; i < nbias; ++i) put(hb, bias_dtype, i, uniform());
  for (long long i = 0; i < nc; ++i) put(hc, c.dtype_out, i, uniform());
  // D is NaN-poisoned: with C == D and beta == 0, cuBLASLt must not read it; D's row padding must survive.
  for (long long i = 0; i < nd; ++i) put_nan(hd, c.dtype_out, i);
  DeviceBuffer da, dw, db, dd, dc;
  for (auto& [d, h] : {std::pair<DeviceBuffer*, std::vector<unsigned char>*>{&da, &ha}, {&dw, &hw}, {&db, &hb},
                       {&dd, &hd}, {&dc, &hc}}) {
    o.why = upload(*d, *h);
    if (!o.why.empty()) {
      o.status = "fail";
      return o;
    }
  }
  auto at = [](const DeviceBuffer& d, long long elems, int dtype) {
    return static_cast<void*>(static_cast<char*>(d.ptr) + elems * elem_size(dtype));
  };
  DgLtPointers p{at(da, off, c.dtype_ab), at(dw, off, c.dtype_ab), c.separate_c ? at(dc, off, c.dtype_out) : nullptr,
                 at(dd, off, c.dtype_out), bias ? at(db, off, bias_dtype) : nullptr};
  const DgLtCall call = make_call(c, lda, ldd, ldc);
  DgLtPlan plan;
  o.why = dg_lt_prepare(lt, handle, call, p, ws_bytes, &plan);
  if (!o.why.empty()) {
    o.status = "unsupported";
    return o;
  }
  o.why = dg_lt_run(lt, handle, &plan, p, c.alpha, c.beta, workspace, ws_bytes, stream);
  if (o.why.empty() && cudaStreamSynchronize(stream) != cudaSuccess) o.why = "the run faulted";
  if (!o.why.empty()) {
    dg_lt_destroy(lt, &plan);
    o.status = "unsupported";
    return o;
  }
  cudaMemcpy(hd.data(), dd.ptr, hd.size(), cudaMemcpyDeviceToHost);

  if (c.capture) {  // once more, captured into a graph: the same bits
    std::vector<unsigned char> first = hd;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    std::string why;
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) != cudaSuccess) why = "begin capture failed";
    if (why.empty()) why = dg_lt_run(lt, handle, &plan, p, c.alpha, c.beta, workspace, ws_bytes, stream);
    if (cudaStreamEndCapture(stream, &graph) != cudaSuccess && why.empty()) why = "end capture failed";
    if (why.empty() && cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) why = "instantiate failed";
    if (why.empty() && cudaGraphLaunch(exec, stream) != cudaSuccess) why = "graph launch failed";
    if (why.empty() && cudaStreamSynchronize(stream) != cudaSuccess) why = "the graph faulted";
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    if (!why.empty()) {
      dg_lt_destroy(lt, &plan);
      o.status = "fail";
      o.why = "graph capture: " + why;
      return o;
    }
    cudaMemcpy(hd.data(), dd.ptr, hd.size(), cudaMemcpyDeviceToHost);
    o.graph_identical = first == hd;
  }
  dg_lt_destroy(lt, &plan);

  // The reference, float64, from the values as stored.
  const double u = c.dtype_out == DG_LT_F32 ? std::ldexp(1.0, -24)
                   : c.dtype_out == DG_LT_F16 ? std::ldexp(1.0, -11)
                                              : std::ldexp(1.0, -8);
  const bool gelu = c.epilogue == DG_LT_EPILOGUE_GELU || c.epilogue == DG_LT_EPILOGUE_GELU_BIAS;
  const bool relu = c.epilogue == DG_LT_EPILOGUE_RELU || c.epilogue == DG_LT_EPILOGUE_RELU_BIAS;
  for (long long b = 0; b < c.batch; ++b) {
    for (long long i = 0; i < c.m; ++i) {
      for (long long j = 0; j < ldd; ++j) {
        const long long di = off + b * c.m * ldd + i * ldd + j;
        const double got = get(hd, c.dtype_out, di);
        if (j >= c.n) {  // D's row padding: untouched (still NaN)
          o.holes_written += !std::isnan(got);
          continue;
        }
        double acc = 0.0, mag = 0.0;
        for (long long k = 0; k < c.k; ++k) {
          const double a = get(ha, c.dtype_ab, off + b * c.m * lda + i * lda + k);
          const double w = get(hw, c.dtype_ab, off + (c.w_broadcast ? 0 : b) * c.n * c.k + j * c.k + k);
          acc += a * w;
          mag += std::fabs(a * w);
        }
        double t = c.alpha * acc;
        mag *= std::fabs(c.alpha);
        double terms = std::fabs(t);  // the magnitudes of the epilogue's inputs: alpha A.B, beta C, the bias
        if (c.beta != 0.0f) {
          const double cv = get(hc, c.dtype_out, off + b * c.m * ldc + i * ldc + j);
          t += c.beta * cv;
          mag += std::fabs(c.beta * cv);
          terms += std::fabs(c.beta * cv);
        }
        if (bias) {
          const double bv = get(hb, bias_dtype, off + (c.bias_per_batch ? b : 0) * c.n + j);
          t += bv;
          mag += std::fabs(bv);
          terms += std::fabs(bv);
        }
        const double want = gelu ? gelu_tanh(t) : relu ? std::max(t, 0.0) : t;
        const double erf_form = gelu ? gelu_erf(t) : want;
        // Rounding to the output type, f32 accumulation (K terms), and a fast GELU's own error. Some of
        // cuBLASLt's kernels for 16-bit outputs (cutlass_80_..._gelu_f16) add beta C and the bias and apply the
        // activation in the output's precision: a few of its units of each input of the epilogue, not only of
        // the result. A wrong layout, bias or activation is off by far more.
        const double tol = (c.dtype_out == DG_LT_F32 ? 2.0 * u * std::fabs(want)
                                                     : 4.0 * u * (std::fabs(want) + std::fabs(t) + terms)) +
                           c.k * std::ldexp(1.0, -23) * mag + (gelu ? 2e-5 : 0.0);
        if (std::isnan(got)) {
          ++o.nan;
          continue;
        }
        const double err = std::fabs(got - want);
        o.max_err = std::max(o.max_err, err);
        o.max_err_erf = std::max(o.max_err_erf, std::fabs(got - erf_form));
        o.bad += err > tol;
      }
    }
  }
  const bool ok = o.bad == 0 && o.nan == 0 && o.holes_written == 0 && o.graph_identical != 0;
  o.status = ok ? "pass" : "fail";
  if (!ok) {
    o.why = std::to_string(o.bad) + " elements off, " + std::to_string(o.nan) + " NaN, " +
            std::to_string(o.holes_written) + " holes written" + (o.graph_identical == 0 ? ", graph run differs" : "");
  }
  return o;
}

std::string case_json(const Case& c, const Outcome& o) {
  return std::string("{\"name\": \"") + c.name + "\", \"required\": " + (c.required ? "true" : "false") +
         ", \"status\": \"" + o.status + "\", \"why\": \"" + json_escape(o.why) + "\", \"max_err\": " +
         num(o.max_err) + ", \"max_err_vs_gelu_erf\": " + num(o.max_err_erf) + ", \"bad\": " + std::to_string(o.bad) +
         ", \"nan\": " + std::to_string(o.nan) + ", \"holes_written\": " + std::to_string(o.holes_written) +
         ", \"graph_identical\": " + (o.graph_identical < 0 ? "null" : o.graph_identical ? "true" : "false") + "}";
}

// One case in this process: prints {"library", "path", "case": {...}}; exit 0 pass, 1 fail, 5 unsupported,
// 2 no cuBLASLt, 3 no GPU.
int run_one(const Case& c) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    printf("{\"error\": \"no CUDA GPU\"}\n");
    return 3;
  }
  DgLtApi lt;
  void* handle = nullptr;
  const std::string why = dg_lt_open(&lt, &handle);
  if (!why.empty()) {
    printf("{\"error\": \"%s\"}\n", json_escape(why).c_str());
    return 2;
  }
  const size_t ws_bytes = 32u << 20;
  void* workspace = nullptr;
  cudaStream_t stream;
  if (cudaMalloc(&workspace, ws_bytes) != cudaSuccess || cudaStreamCreate(&stream) != cudaSuccess) {
    printf("{\"error\": \"CUDA setup failed\"}\n");
    return 3;
  }
  const Outcome o = run_case(lt, handle, c, workspace, ws_bytes, stream);
  printf("{\"library\": \"%s\", \"path\": \"%s\", \"case\": %s}\n", json_escape(dg_lt_version(lt)).c_str(),
         json_escape(lt.path).c_str(), case_json(c, o).c_str());
  fprintf(stderr, "lt_selftest: %-26s %-11s max_err %-10.3g (erf form %-10.3g) %s\n", c.name, o.status.c_str(),
          o.max_err, o.max_err_erf, o.why.c_str());
  return o.status == "pass" ? 0 : o.status == "unsupported" ? 5 : 1;
}

// "--custom ab,out,bias,epilogue,m,n,k,batch,alpha,beta,d_pad,separate_c,w_broadcast,bias_per_batch,misalign":
// one problem of one's own, for a diagnosis (dtype ids 0 f32, 1 f16, 2 bf16; bias -1 for none).
bool parse_custom(const char* text, Case* c) {
  double v[15];
  if (sscanf(text, "%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf", &v[0], &v[1], &v[2], &v[3], &v[4],
             &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11], &v[12], &v[13], &v[14]) != 15)
    return false;
  *c = Case{"custom", int(v[0]), int(v[1]), int(v[2]), int(v[3]), (long long)v[4], (long long)v[5], (long long)v[6],
            (long long)v[7], float(v[8]), float(v[9]), (long long)v[10], int(v[11]), int(v[12]), int(v[13]),
            (long long)v[14], 1, 0, 0};
  return c->m > 0 && c->n > 0 && c->k > 0 && c->batch > 0 && dg_lt_epilogue_name(c->epilogue);
}

}  // namespace

// Without arguments: every case, each in a child process of its own (a fault in one, sticky for its CUDA
// context, cannot spoil the others), and one JSON report.
int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--list") {
    for (const Case& c : kCases) printf("%s\n", c.name);
    return 0;
  }
  if (argc == 3 && std::string(argv[1]) == "--case") {
    for (const Case& c : kCases)
      if (std::string(c.name) == argv[2]) return run_one(c);
    fprintf(stderr, "lt_selftest: no case %s\n", argv[2]);
    return 4;
  }
  if (argc == 3 && std::string(argv[1]) == "--custom") {
    Case c;
    if (!parse_custom(argv[2], &c)) {
      fprintf(stderr, "lt_selftest: --custom wants 15 numbers, see the source\n");
      return 4;
    }
    return run_one(c);
  }
  if (argc != 1) {
    fprintf(stderr, "usage: lt_selftest [--list | --case NAME | --custom FIELDS]\n");
    return 4;
  }
  bool passed = true;
  std::string cases, library, path, gelu_form = "unknown", error;
  int code = 0;
  for (const Case& c : kCases) {
    const std::string cmd = std::string("'") + argv[0] + "' --case " + c.name;
    FILE* child = popen(cmd.c_str(), "r");
    std::string line;
    char buf[4096];
    while (child && fgets(buf, sizeof(buf), child)) line += buf;
    const int status = child ? pclose(child) : -1;
    const int rc = status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (rc == 2 || rc == 3) {  // no cuBLASLt, or no GPU: the same for every case
      error = line;
      code = rc;
      break;
    }
    auto field = [&](const char* key) {  // a string field of the child's line
      const std::string k = std::string("\"") + key + "\": \"";
      const size_t at = line.find(k);
      return at == std::string::npos ? std::string() : line.substr(at + k.size(), line.find('"', at + k.size()) - at - k.size());
    };
    if (library.empty()) library = field("library"), path = field("path");
    const size_t at = line.find("\"case\": ");
    std::string record;
    if (at == std::string::npos || rc < 0 || rc == 4) {
      record = std::string("{\"name\": \"") + c.name + "\", \"required\": " + (c.required ? "true" : "false") +
               ", \"status\": \"fail\", \"why\": \"the case's process ended with status " + std::to_string(status) +
               " and no report (a crash?)\"}";
      passed = false;
    } else {
      record = line.substr(at + 8, line.rfind('}') - at - 8);
      if (rc == 1 || (c.required && rc != 0)) passed = false;
    }
    if (std::string(c.name) == "f16_f32out_gelu_bias" && rc == 0) {
      const double tanh_err = atof(line.c_str() + line.find("\"max_err\": ") + 11);
      const double erf_err = atof(line.c_str() + line.find("\"max_err_vs_gelu_erf\": ") + 23);
      gelu_form = tanh_err < erf_err ? "tanh" : "erf";
    }
    cases += (cases.empty() ? "" : ", ") + record;
  }
  if (code) {
    while (!error.empty() && (error.back() == '\n' || error.back() == '}')) error.pop_back();
    printf("{\"passed\": false, %s}\n", error.empty() ? "\"error\": \"no report\"" : error.substr(1).c_str());
    return code;
  }
  printf("{\"passed\": %s, \"library\": \"%s\", \"path\": \"%s\", \"gelu\": \"%s\", \"cases\": [%s]}\n",
         passed ? "true" : "false", library.c_str(), path.c_str(), gelu_form.c_str(), cases.c_str());
  return passed ? 0 : 1;
}
