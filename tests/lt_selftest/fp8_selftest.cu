// fp8_selftest.cu -- runs templates/dg_cublaslt_fp8.cuh on a GPU: which scale-mode pairs the installed cuBLASLt
// takes for e4m3 (its heuristic at 256x256x512, bf16 and f32 outputs), the FP8 alternative (the harness's class,
// driven by hand-made DgProblems) against a float64 host reference of the dequantized product, and the time of the
// DeepGEMM-format product at 4096x7168x16384, graph-replayed, with bf16 cuBLASLt on the same shape beside it.
//
// Cases (each must reach calc_diff = 1 - 2 sum(xy) / sum(x^2 + y^2) < 1e-3 against the reference):
//   deepgemm_256      A [m, k] row-major with 1x128 scales (sa [m, k/128], m-contiguous), B [n, k] with 128x128
//                     scales (sb [n/128, k/128] row-major), C [m, n] row-major bf16: VEC128 x BLK128x128, no copies
//   odd_m_k640        a probe, not counted in the exit code unless its numbers are wrong: m = 250, k = 640 (Kb = 5:
//                     BLK128x128's Kb padded to 8; VEC128's outer stride 250); cuBLASLt 13.1's heuristic refuses it
//   gathered_colmajor A column-major (a dense K-major copy), C column-major f32 (cuBLASLt's rows are m)
//   channel           per-channel scales on both: OUTER_VEC x OUTER_VEC
//   tensor            per-tensor scales: SCALAR x SCALAR
// Build and run from the repository root (bash tests/lt_selftest/run_fp8_on_gpu.sh does both):
//   nvcc -std=c++17 -O1 -gencode=arch=compute_90a,code=sm_90a -I templates tests/lt_selftest/fp8_selftest.cu -ldl
// Exit 0 every case passes, 1 one failed, 2 no cuBLASLt, 3 no GPU. One JSON object on the last line of stdout.
#define DG_HARNESS_DECLARATIONS_ONLY
#include "dg_harness.cuh"
#include "dg_cublaslt_fp8.cuh"

#include <cuda_fp8.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

struct Scales {
  long long bm, bk;          // A: rows x k block; B: cols x k block (0 = the whole extent)
};

struct Case {
  const char* name;
  long long m, n, k;
  int a_kmajor;              // 1: A [m, k] row-major; 0: column-major
  int c_rowmajor;            // 1: C [m, n] row-major; 0: column-major
  int out_dtype;             // DG_LT_BF16 / DG_LT_F32
  Scales sa, sb;
  int mode_a, mode_b;
  int required;              // 0: a probe; cuBLASLt refusing it does not fail the run, wrong numbers do
};

const Case kCases[] = {
    {"deepgemm_256", 256, 256, 512, 1, 1, DG_LT_BF16, {1, 128}, {128, 128}, DG_LT_FP8_VEC128, DG_LT_FP8_BLK128x128, 1},
    {"odd_m_k640", 250, 256, 640, 1, 1, DG_LT_BF16, {1, 128}, {128, 128}, DG_LT_FP8_VEC128, DG_LT_FP8_BLK128x128, 0},
    {"gathered_colmajor", 256, 384, 512, 0, 0, DG_LT_F32, {1, 128}, {128, 128}, DG_LT_FP8_VEC128,
     DG_LT_FP8_BLK128x128, 1},
    {"channel", 256, 256, 512, 1, 1, DG_LT_BF16, {1, 0}, {1, 0}, DG_LT_FP8_OUTER_VEC, DG_LT_FP8_OUTER_VEC, 1},
    {"tensor", 256, 256, 512, 1, 1, DG_LT_BF16, {0, 0}, {0, 0}, DG_LT_FP8_SCALAR, DG_LT_FP8_SCALAR, 1},
};

using Alt = DgCublasLtFp8Alternative<DgAltBaseline, DgProblem>;

long long blocks(long long size, long long block) { return block == 0 ? 1 : (size + block - 1) / block; }

// The problem of a case: dims m, n, k; A, B, C; scale views sa [m-blocks, k-blocks] with the row blocks contiguous,
// sb [n-blocks, k-blocks] row-major (DeepGEMM's layouts).
struct Setup {
  DgProblem p{};
  std::vector<DgLtFp8Letter> letters;
  long long sa_count = 0, sb_count = 0;
};

Setup setup(const Case& c) {
  Setup s;
  DgProblem& p = s.p;
  p.name = c.name;
  p.arch = "sm_90a";
  p.ndims = 3;
  p.nc = 2;
  const char letters[3] = {'m', 'n', 'k'};
  const long long sizes[3] = {c.m, c.n, c.k};
  for (int d = 0; d < 3; ++d) {
    p.dims[d].letter = letters[d];
    p.dims[d].role = d + 1;
    p.dims[d].size = sizes[d];
  }
  p.dims[0].stride[DG_A] = c.a_kmajor ? c.k : 1;
  p.dims[2].stride[DG_A] = c.a_kmajor ? 1 : c.m;
  p.dims[1].stride[DG_B] = c.k;
  p.dims[2].stride[DG_B] = 1;
  p.dims[0].stride[DG_C] = c.c_rowmajor ? c.n : 1;
  p.dims[1].stride[DG_C] = c.c_rowmajor ? 1 : c.m;
  for (int x : {DG_A, DG_B, DG_C}) p.present[x] = 1;
  p.dtype[DG_C] = c.out_dtype;
  p.alpha = 1.0f;
  p.beta = 0.0f;
  const long long mb = blocks(c.m, c.sa.bm), akb = blocks(c.k, c.sa.bk), nb = blocks(c.n, c.sb.bm),
                  bkb = blocks(c.k, c.sb.bk);
  s.sa_count = mb * akb;
  s.sb_count = nb * bkb;
  // A block of 0 is the whole extent: the scale view lacks the letter (stride 0, block -1).
  s.letters = {{'m', c.sa.bm ? c.sa.bm : -1, 0, c.sa.bm ? 1 : 0, 0},
               {'n', 0, c.sb.bm ? c.sb.bm : -1, 0, c.sb.bm ? bkb : 0},
               {'k', c.sa.bk ? c.sa.bk : -1, c.sb.bk ? c.sb.bk : -1, c.sa.bk ? mb : 0, c.sb.bk ? 1 : 0}};
  return s;
}

float e4m3(uint8_t bits) {
  __nv_fp8_e4m3 v;
  v.__x = bits;
  return static_cast<float>(v);
}

uint8_t random_e4m3(std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  return __nv_fp8_e4m3(u(rng)).__x;
}

double calc_diff(const std::vector<double>& x, const std::vector<double>& y) {
  double xy = 0.0, sq = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    xy += x[i] * y[i];
    sq += x[i] * x[i] + y[i] * y[i];
  }
  return sq == 0.0 ? 0.0 : 1.0 - 2.0 * xy / sq;
}

float to_float(const void* out, int dtype, long long i) {
  if (dtype == DG_LT_F32) return static_cast<const float*>(out)[i];
  uint32_t u = static_cast<uint32_t>(static_cast<const uint16_t*>(out)[i]) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

bool g_failed = false;

std::string run_case(const Case& c) {
  Setup s = setup(c);
  const DgProblem& p = s.p;
  std::mt19937 rng(1234);
  std::vector<uint8_t> a(c.m * c.k), b(c.n * c.k);
  for (auto& v : a) v = random_e4m3(rng);
  for (auto& v : b) v = random_e4m3(rng);
  std::uniform_real_distribution<float> su(0.25f, 4.0f);
  std::vector<float> sa(s.sa_count), sb(s.sb_count);
  for (auto& v : sa) v = su(rng);
  for (auto& v : sb) v = su(rng);
  const int oe = c.out_dtype == DG_LT_F32 ? 4 : 2;
  void *da, *db, *dc, *dsa, *dsb;
  cudaMalloc(&da, a.size());
  cudaMalloc(&db, b.size());
  cudaMalloc(&dc, c.m * c.n * oe);
  cudaMalloc(&dsa, sa.size() * 4);
  cudaMalloc(&dsb, sb.size() * 4);
  cudaMemcpy(da, a.data(), a.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), b.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dsa, sa.data(), sa.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dsb, sb.data(), sb.size() * 4, cudaMemcpyHostToDevice);
  cudaMemset(dc, 0xFF, c.m * c.n * oe);   // NaN: every element must be written
  Alt alt(s.letters, {{c.mode_a, c.mode_b, "the case's modes"}}, DgLtFp8Scales{0, 0});
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  std::string why = alt.prepare(p, stream);
  void* bufs[9] = {da, db, dc, nullptr, nullptr, nullptr, nullptr, dsa, dsb};
  if (why.empty()) why = alt.run(bufs, stream);
  if (why.empty() && cudaStreamSynchronize(stream) != cudaSuccess) why = "CUDA error after the run";
  std::string json = std::string("{\"name\": \"") + c.name + "\", \"formulation\": \"" + alt.formulation() + "\"";
  if (!why.empty()) {
    g_failed |= c.required != 0;
    json += std::string(", \"passed\": false, \"required\": ") + (c.required ? "true" : "false") +
            ", \"error\": \"" + why + "\"}";
  } else {
    std::vector<unsigned char> out(c.m * c.n * oe);
    cudaMemcpy(out.data(), dc, out.size(), cudaMemcpyDeviceToHost);
    std::vector<double> ref(c.m * c.n), got(c.m * c.n);
    const long long akb = blocks(c.k, c.sa.bk), bkb = blocks(c.k, c.sb.bk);
    const long long mb = blocks(c.m, c.sa.bm);
    bool nan = false;
    for (long long i = 0; i < c.m; ++i) {
      for (long long j = 0; j < c.n; ++j) {
        double t = 0.0;
        for (long long k = 0; k < c.k; ++k) {
          const double av = e4m3(a[c.a_kmajor ? i * c.k + k : k * c.m + i]);
          const double bv = e4m3(b[j * c.k + k]);
          const long long ib = c.sa.bm ? i / c.sa.bm : 0, kba = c.sa.bk ? k / c.sa.bk : 0;
          const long long jb = c.sb.bm ? j / c.sb.bm : 0, kbb = c.sb.bk ? k / c.sb.bk : 0;
          t += av * sa[ib + kba * mb] * bv * sb[jb * bkb + kbb];
        }
        (void)akb;
        ref[i * c.n + j] = t;
        const float g = to_float(out.data(), c.out_dtype, c.c_rowmajor ? i * c.n + j : j * c.m + i);
        nan |= std::isnan(g);
        got[i * c.n + j] = g;
      }
    }
    const double diff = calc_diff(ref, got);
    const bool passed = !nan && diff < 1e-3;
    g_failed |= !passed;
    char buf[160];
    snprintf(buf, sizeof(buf), ", \"passed\": %s, \"calc_diff\": %.3e, \"nan\": %s}", passed ? "true" : "false", diff,
             nan ? "true" : "false");
    json += buf;
  }
  cudaStreamDestroy(stream);
  for (void* ptr : {da, db, dc, dsa, dsb}) cudaFree(ptr);
  fprintf(stderr, "%s\n", json.c_str());
  return json;
}

// The heuristic's verdict on each mode pair (cuBLASLt's A = X, B = Y) at 256x256x512.
std::string probe_modes(const DgLtApi& api, void* handle) {
  const int modes[4] = {DG_LT_FP8_SCALAR, DG_LT_FP8_OUTER_VEC, DG_LT_FP8_VEC128, DG_LT_FP8_BLK128x128};
  std::string json = "[";
  void* dummy = nullptr;
  cudaMalloc(&dummy, 1 << 20);
  for (int out : {DG_LT_BF16, DG_LT_F32}) {
    for (int mx : modes) {
      for (int my : modes) {
        DgLtFp8Call call{256, 256, 512, 512, 512, 256, 256, mx, my, out, 1};
        DgLtFp8Pointers ptr{dummy, dummy, dummy, dummy, static_cast<const float*>(dummy), static_cast<const float*>(dummy)};
        DgLtPlan plan;
        const std::string why = dg_lt_fp8_prepare(api, handle, call, ptr, 32u << 20, &plan);
        dg_lt_destroy(api, &plan);
        json += std::string(json.size() > 1 ? ", " : "") + "{\"x\": \"" + dg_lt_fp8_mode_name(mx) + "\", \"y\": \"" +
                dg_lt_fp8_mode_name(my) + "\", \"out\": \"" + (out == DG_LT_F32 ? "f32" : "bf16") +
                "\", \"accepted\": " + (why.empty() ? "true" : "false") + "}";
        fprintf(stderr, "modes %s x %s -> %s: %s\n", dg_lt_fp8_mode_name(mx), dg_lt_fp8_mode_name(my),
                out == DG_LT_F32 ? "f32" : "bf16", why.empty() ? "accepted" : why.c_str());
      }
    }
  }
  cudaFree(dummy);
  return json + "]";
}

__global__ void fill_bytes(uint8_t* p, long long n, uint32_t seed) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    p[i] = static_cast<uint8_t>(h & 0x77);   // finite e4m3: exponent below 15, magnitude <= 0.875 * 2^7
  }
}

__global__ void fill_floats(float* p, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    p[i] = 0.01f * (1.0f + (i % 7));
}

// Median time (us) of one launch: `launches` runs captured in a graph, replayed `reps` times.
template <typename Run>
double graph_us(cudaStream_t stream, int launches, int reps, Run run) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  for (int l = 0; l < launches; ++l) run();
  if (cudaStreamEndCapture(stream, &graph) != cudaSuccess || cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
    return NAN;
  cudaGraphLaunch(exec, stream);
  cudaGraphLaunch(exec, stream);
  std::vector<double> us;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(e0, stream);
    cudaGraphLaunch(exec, stream);
    cudaEventRecord(e1, stream);
    cudaEventSynchronize(e1);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, e0, e1);
    us.push_back(1000.0 * ms / launches);
  }
  std::sort(us.begin(), us.end());
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return us[us.size() / 2];
}

std::string time_large() {
  const Case c{"deepgemm_4096x7168x16384", 4096, 7168, 16384, 1, 1, DG_LT_BF16, {1, 128}, {128, 128},
               DG_LT_FP8_VEC128, DG_LT_FP8_BLK128x128, 1};
  Setup s = setup(c);
  void *da, *db, *dc, *dsa, *dsb;
  cudaMalloc(&da, c.m * c.k);
  cudaMalloc(&db, c.n * c.k);
  cudaMalloc(&dc, c.m * c.n * 2);
  cudaMalloc(&dsa, s.sa_count * 4);
  cudaMalloc(&dsb, s.sb_count * 4);
  fill_bytes<<<1024, 256>>>(static_cast<uint8_t*>(da), c.m * c.k, 1);
  fill_bytes<<<1024, 256>>>(static_cast<uint8_t*>(db), c.n * c.k, 2);
  fill_floats<<<256, 256>>>(static_cast<float*>(dsa), s.sa_count);
  fill_floats<<<256, 256>>>(static_cast<float*>(dsb), s.sb_count);
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  Alt alt(s.letters, {{c.mode_a, c.mode_b, "A scales VEC128_32F (1x128), B scales BLK128x128_32F (128x128)"}},
          DgLtFp8Scales{0, 0});
  void* bufs[9] = {da, db, dc, nullptr, nullptr, nullptr, nullptr, dsa, dsb};
  std::string why = alt.prepare(s.p, stream);
  if (why.empty()) why = alt.run(bufs, stream);
  cudaStreamSynchronize(stream);
  const double flops = 2.0 * c.m * c.n * c.k;
  char buf[512];
  double fp8_us = NAN, bf16_us = NAN;
  std::string bf16_why;
  if (why.empty()) fp8_us = graph_us(stream, 20, 7, [&] { alt.run(bufs, stream); });
  DgAltBaseline* bf16 = alt.beside();
  bf16_why = bf16->prepare(s.p, stream);
  if (bf16_why.empty()) bf16_why = bf16->run(bufs, stream);
  cudaStreamSynchronize(stream);
  if (bf16_why.empty()) bf16_us = graph_us(stream, 20, 7, [&] { bf16->run(bufs, stream); });
  snprintf(buf, sizeof(buf),
           "{\"shape\": \"4096x7168x16384\", \"fp8_us\": %.1f, \"fp8_tflops\": %.1f, \"bf16_us\": %.1f, "
           "\"bf16_tflops\": %.1f",
           fp8_us, flops / (fp8_us * 1e-6) / 1e12, bf16_us, flops / (bf16_us * 1e-6) / 1e12);
  std::string json = std::string(buf) + ", \"fp8\": \"" + (why.empty() ? alt.formulation() : "error: " + why) +
                     "\", \"bf16\": \"" + (bf16_why.empty() ? bf16->formulation() : "error: " + bf16_why) + "\"}";
  if (!why.empty()) g_failed = true;
  fprintf(stderr, "%s\n", json.c_str());
  cudaStreamDestroy(stream);
  for (void* ptr : {da, db, dc, dsa, dsb}) cudaFree(ptr);
  return json;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    printf("{\"passed\": false, \"error\": \"no CUDA GPU\"}\n");
    return 3;
  }
  DgLtApi api;
  void* handle = nullptr;
  const std::string why = dg_lt_open(&api, &handle);
  if (!why.empty()) {
    printf("{\"passed\": false, \"error\": \"%s\"}\n", why.c_str());
    return 2;
  }
  std::string json = "{\"library\": \"" + dg_lt_version(api) + "\", \"path\": \"" + api.path + "\", \"modes\": " +
                     probe_modes(api, handle) + ", \"cases\": [";
  bool first = true;
  for (const Case& c : kCases) {
    json += (first ? "" : ", ") + run_case(c);
    first = false;
  }
  json += "], \"timing\": " + time_large();
  json += std::string(", \"passed\": ") + (g_failed ? "false" : "true") + "}";
  printf("%s\n", json.c_str());
  dg_lt_close(api, handle);
  return g_failed ? 1 : 0;
}
