// selftest_harness.cu -- stands in for a generated <name>_harness.cu to exercise templates/dg_harness.cuh.
//
// The kernel is a hand-written naive one (one thread per output element, float accumulation, the epilogue in
// float) that reads kProblem's strides, so the same code serves every problem below. Pick one with
// -DSELFTEST_CASE=N:
//   1 (default) f16 GEMM C[m=5,n=3] = A[m,k=7] B[k,n]: A row-major with a padded row stride (9) and an
//     offset, C column-major with ldc 8 and an offset (holes on both sides); cuBLAS takes the views directly.
//   2  the same problem with the baseline forced through dense temps of A and C ("copy+cublas").
//   3  a batched bf16 x bf16 -> f32 contraction with two summed letters, B broadcast over the batch and a
//     padded C: big enough for the bench to mean something.
//   4  an f16 GEMM whose m is sized at run time (2..40), A and C padded and offset: the entry point takes m.
//   5  case 4 with the baseline forced through dense temps of A and C, whose sizes scale with m.
//   6  an f16 GEMM with an output view D (column-major, offset, holes), beta 0.5 (C read only), and every kind
//     of step: bias[n] (offset), scale[m] (f32, stride 2), relu, residual[mn] (column-major), clamp[-2.5, 2.5].
//   7  a bf16 x bf16 -> f32 GEMM whose m is sized at run time (2..40) into D (padded rows), beta 0 (C is never
//     read, and may be null), bias[n] then gelu_tanh: the rows past m are holes of D.
//   8  f32 in place (no D): C[b=3,m=16,n=20] = A[b,m,k=8] B[k,n] + C, bias[bm] (broadcast over n), sigmoid,
//     scale[n]; the baseline is one batched GEMM with beta 1, then the elementwise pass.
//   9  e4m3 A and B with f32 scales over blocks (fp8_problem.inc): two summed letters, A's scales blocked along m
//     and j by 2 (a tail block) in a padded view, B's along j by 4 and whole along n; no cuBLAS baseline.
//   10 bf16 attention scores S[b=2, h=3, s=64, t=48] = sum_d Q[b, s, h, d=32] K[b, t, h, d] + 0.5 S, every view
//     dense in its letter order: b and h chain in neither input, so the baseline's candidates are Q and K copied
//     to [b, h, s|t, d] + one strided-batched call, and a pointer-array call over b, h on the views in place.
// Planted bugs, each of which the harness must catch (verify exits 1, or 4 for the fault):
//   -DSELFTEST_BROKEN=1  drop the last summed term and write one hole of the output
//   -DSELFTEST_BROKEN=2  read C even when beta == 0 (the NaN poison must show up)
//   -DSELFTEST_BROKEN=3  no argument checks: the A = nullptr probe faults
//   -DSELFTEST_BROKEN=4  (cases 4, 5, 7) ignore m and compute every row up to the largest size: rows past m
//                        are holes then, and they get written
//   -DSELFTEST_BROKEN=5  (cases 4, 5, 7) accept an m outside the range (clamped into it) instead of refusing it
//   -DSELFTEST_BROKEN=6  (cases 6, 7, 8) forget the bias
//   -DSELFTEST_BROKEN=7  (case 6) relu and clamp with fmaxf / fminf, which turn NaN into a number: only the
//                        NaN input case shows it
//   -DSELFTEST_BROKEN=8  (cases 6, 7) write the result into C as well (C is read only when there is D)
//   -DSELFTEST_BROKEN=9  (cases 6, 7, 8) no checks on the epilogue's pointers: the bias = nullptr probe faults
//   -DSELFTEST_BROKEN=10 (with SELFTEST_DEPENDENT) never wait for the previous grid: verify's predecessor, which
//                        writes every buffer after the kernel is scheduled, must show it
//   -DSELFTEST_BROKEN=11 (case 9) leave out B's scales
//   -DSELFTEST_BROKEN=12 (case 9) index A's scales along the summed letters by B's blocks (4, not 2): a kernel
//                        that assumes one K block for both inputs
// -DSELFTEST_BAD_BASELINE gives case 1's baseline ldc < m: bench must report the baseline unavailable; case 10's
// pointer-array call a b stride in C twice the real one, which reaches past C: the harness refuses it (exit 4)
// before it looks for a GPU.
// -DSELFTEST_DEPENDENT launches the kernel as a programmatic dependent launch (sm_90), as the generated small-M
// kernels are: it waits (griddepcontrol.wait) before it touches memory.
//
// Build from the repository root (no warnings expected):
//   nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80 -Xptxas -v
//        -Xcompiler -Wall tests/harness_selftest/selftest_harness.cu -I templates -o /tmp/selftest -ldl
#include <cuda_runtime.h>

#include <cstdint>

#include "dg_harness.cuh"

#ifndef SELFTEST_CASE
#define SELFTEST_CASE 1
#endif
#ifndef SELFTEST_BROKEN
#define SELFTEST_BROKEN 0
#endif

#if SELFTEST_CASE == 1 || SELFTEST_CASE == 2
// dims: m (A stride 9, C stride 1), n (B stride 1, C stride 8), k (A stride 1, B stride 3).
// spans: A 3 + 4*9 + 6 + 1 = 46; B 6*3 + 2 + 1 = 21; C 2 + 4 + 2*8 + 1 = 23.
static const DgProblem kProblem = {
    "selftest", "sm_90a", 3,
    {{'m', DG_M, 5, {9, 0, 1}}, {'n', DG_N, 3, {0, 1, 8}}, {'k', DG_K, 7, {1, 3, 0}}},
    2, {1, 1, 1}, {3, 0, 2}, {46, 21, 23}, {DG_F16, DG_F16, DG_F16}, {2, 2, 2}, 1.5f, 0.5f, 1e-2};
#if SELFTEST_CASE == 1
// Column-major C (m x n, ldc 8) = op(A) op(B): row-major A is column-major (k x m, ld 9), so transposed;
// likewise B (n x k, ld 3).
#ifdef SELFTEST_BAD_BASELINE
static const long long kLdc = 1;
#else
static const long long kLdc = 8;
#endif
static const DgBaseline kBaseline = {
    1, "cublas", {0, 0, 0}, {}, 1, {{"C=A^TB^T", 0, 1, 1, 5, 3, 7, 9, 3, kLdc, 0, 0, 0, 1}}};
#else
// A gathered into a dense 5x7 row-major temp, C into a dense 5x3 row-major one; row-major C is
// column-major (n x m), so swap: Cmat(3 x 5, ld 3) = B(3 x 7, ld 3) * A(7 x 5, ld 7), no transposes.
static const DgBaseline kBaseline = {
    1, "copy+cublas", {1, 0, 1},
    {{2, {5, 7}, {9, 1}}, {}, {2, {5, 3}, {1, 8}}},
    1, {{"C^T=BA", 1, 0, 0, 3, 5, 7, 3, 7, 3, 0, 0, 0, 1}}};
#endif
#elif SELFTEST_CASE == 3
// C[b=3, m=1024, n=768] = sum_{k1=8, k2=128} A[b, m, k1, k2] * B[k1, k2, n], C rows padded to 800.
static const DgProblem kProblem = {
    "selftest_batched", "sm_90a", 5,
    {{'b', DG_BATCH, 3, {1048576, 0, 819200}},
     {'m', DG_M, 1024, {1024, 0, 800}},
     {'n', DG_N, 768, {0, 1, 1}},
     {'i', DG_K, 8, {128, 98304, 0}},
     {'j', DG_K, 128, {1, 768, 0}}},
    3, {1, 1, 1}, {0, 0, 0}, {3145728, 786432, 2457568}, {DG_BF16, DG_BF16, DG_F32}, {16, 16, 16}, 1.0f, 1.0f, 1e-3};
// Row-major C (m x n, ld 800) is column-major (n x m): swap, Cmat(768 x 1024) = B(768 x 1024) * A(1024 x 1024).
static const DgBaseline kBaseline = {
    1, "cublas", {0, 0, 0}, {}, 1, {{"C^T=BA batch=b", 1, 0, 0, 768, 1024, 1024, 768, 1024, 800, 0, 1048576, 819200, 3}}};
#elif SELFTEST_CASE == 4 || SELFTEST_CASE == 5
#define SELFTEST_RUN_TIME 1
// C[m, n=24] = A[m, k=33] B[k, n] with m in 2..40 at run time: A rows padded to 40 at offset 5, C rows
// padded to 32 at offset 3 (holes in every row, before the view and, for m < 40, the rows past m).
// spans: A 5 + 39*40 + 32 + 1 = 1598; B 32*24 + 23 + 1 = 792; C 3 + 39*32 + 23 + 1 = 1275.
static const long long kEdges[] = {2, 4, 5, 16, 17, 40};
static const DgProblem kProblem = {
    "selftest_run_time", "sm_90a", 3,
    {{'m', DG_M, 40, {40, 0, 32}}, {'n', DG_N, 24, {0, 1, 1}}, {'k', DG_K, 33, {1, 24, 0}}},
    2, {1, 1, 1}, {5, 0, 3}, {1598, 792, 1275}, {DG_F16, DG_F16, DG_F16}, {2, 2, 2}, 1.5f, 0.5f, 1e-2, 0, {},
    'm', 2, 6, kEdges};
#if SELFTEST_CASE == 4
// Row-major C is column-major (n x m, ldc 32): swap, Cmat(24 x m) = B(24 x 33, ld 24) * A(33 x m, ld 40); the
// call's n is m (given for 40).
static const DgBaseline kBaseline = {
    1, "cublas", {0, 0, 0}, {}, 1,
    {{"C^T=BA m=n[24] n=m[40] k=k[33]", 1, 0, 0, 24, 40, 33, 24, 40, 32, 0, 0, 0, 1, DG_SCALE_N}}};
#else
// A gathered into a dense m x 33 temp and C into a dense m x 24 one (their m dims scale): Cmat(24 x m, ld 24)
// = B(24 x 33, ld 24) * A(33 x m, ld 33).
static const DgBaseline kBaseline = {
    1, "copy+cublas", {1, 0, 1},
    {{2, {40, 33}, {40, 1}, 1u << 0}, {}, {2, {40, 24}, {32, 1}, 1u << 0}},
    1, {{"C^T=BA", 1, 0, 0, 24, 40, 33, 24, 33, 24, 0, 0, 0, 1, DG_SCALE_N}}};
#endif
#elif SELFTEST_CASE == 6
#define CASE6_NAME "selftest_epilogue"
#include "case6_problem.inc"
#elif SELFTEST_CASE == 7
#define SELFTEST_RUN_TIME 1
// D[m, n=24] = gelu_tanh(bias[n] + A.B), m in 2..40 at run time, beta 0: bf16 A (rows padded to 40, offset 5)
// and B, f32 C (never read) and D (rows padded to 28, offset 2), bf16 bias.
// spans: A 1598, B 792, C 3 + 39*32 + 23 + 1 = 1275, D 2 + 39*28 + 23 + 1 = 1118, bias 24.
static const long long kEdges[] = {2, 9, 10, 40};
static const DgProblem kProblem = {
    "selftest_epilogue_run_time", "sm_90a", 3,
    {{'m', DG_M, 40, {40, 0, 32, 28}}, {'n', DG_N, 24, {0, 1, 1, 1, 1}}, {'k', DG_K, 33, {1, 24}}},
    2, {1, 1, 1, 1, 1}, {5, 0, 3, 2, 0}, {1598, 792, 1275, 1118, 24}, {DG_BF16, DG_BF16, DG_F32, DG_F32, DG_BF16},
    {2, 2, 4, 4, 2}, 1.0f, 0.0f, 1e-2,
    2, {{"bias[n]", DG_STEP_BIAS, 0, 0.0f, 0.0f}, {"gelu_tanh", DG_STEP_ACTIVATION, DG_GELU_TANH, 0.0f, 0.0f}},
    'm', 2, 4, kEdges};
// Row-major D is column-major (n x m, ld 28): swap, Dmat(24 x m) = B(24 x 33, ld 24) * A(33 x m, ld 40).
static const DgBaseline kBaseline = {
    1, "cublas", {0, 0, 0}, {}, 1,
    {{"D^T=BA m=n[24] n=m[40] k=k[33]", 1, 0, 0, 24, 40, 33, 24, 40, 28, 0, 0, 0, 1, DG_SCALE_N}}, "elementwise"};
#elif SELFTEST_CASE == 8
// C[b=3, m=16, n=20] = scale[n] * sigmoid(bias[b, m] + A[b, m, k=8] B[k, n] + C), all f32, in place; C rows
// padded to 24. spans: A 384, B 160, C 2*384 + 15*24 + 19 + 1 = 1148, bias 48, scale 20.
static const DgProblem kProblem = {
    "selftest_epilogue_in_place", "sm_90a", 4,
    {{'b', DG_BATCH, 3, {128, 0, 384, 0, 16}},
     {'m', DG_M, 16, {8, 0, 24, 0, 1}},
     {'n', DG_N, 20, {0, 1, 1, 0, 0, 1}},
     {'k', DG_K, 8, {1, 20}}},
    3, {1, 1, 1, 0, 1, 1}, {0, 0, 0, 0, 0, 0}, {384, 160, 1148, 0, 48, 20}, {DG_F32, DG_F32, DG_F32, 0, DG_F32, DG_F32},
    {4, 4, 4, 0, 4, 4}, 1.0f, 1.0f, 1e-5,
    3,
    {{"bias[bm]", DG_STEP_BIAS, 0, 0.0f, 0.0f},
     {"sigmoid", DG_STEP_ACTIVATION, DG_SIGMOID, 0.0f, 0.0f},
     {"scale[n]", DG_STEP_SCALE, 0, 0.0f, 0.0f}}};
// Row-major C[b] (m x n, ld 24) is column-major (n x m): swap, Cmat(20 x 16) = B(20 x 8, ld 20) * A(8 x 16, ld 8)
// batched over b (B broadcast), with beta 1 in place; then the elementwise pass applies the steps.
static const DgBaseline kBaseline = {
    1, "cublas", {0, 0, 0}, {}, 1, {{"C^T=BA batch=b", 1, 0, 0, 20, 16, 8, 20, 8, 24, 0, 128, 384, 3}}, "elementwise"};
#elif SELFTEST_CASE == 9
#define FP8_NAME "selftest_fp8"
#include "fp8_problem.inc"
#elif SELFTEST_CASE == 10
// Strides: Q [b, s, h, d] (6144, 96, 32, 1), K [b, t, h, d] (4608, 96, 32, 1), S [b, h, s, t] (9216, 3072, 48, 1).
static const DgProblem kProblem = {
    "selftest_multi_batch", "sm_90a", 5,
    {{'b', DG_BATCH, 2, {6144, 4608, 9216}},
     {'h', DG_BATCH, 3, {32, 32, 3072}},
     {'s', DG_M, 64, {96, 0, 48}},
     {'t', DG_N, 48, {0, 96, 1}},
     {'d', DG_K, 32, {1, 1, 0}}},
    4, {1, 1, 1}, {0, 0, 0}, {12288, 9216, 18432}, {DG_BF16, DG_BF16, DG_BF16}, {16, 16, 16}, 1.0f, 0.5f, 1e-2};
#ifdef SELFTEST_BAD_BASELINE
static const long long kPointerStrideC = 2 * 9216;
#else
static const long long kPointerStrideC = 9216;
#endif
// Row-major S[b, h] (s x t, ld 48) is column-major (t x s): swap, Smat(48 x 64) = K^T Q, K (t x d, ld 96 in place,
// 32 in its temp) transposed. The copy call gathers Q and K into [b, h, s|t, d] temps (d innermost, as they lie);
// the pointer-array call takes matrix (b, h) at b * 4608 + h * 32 in K, b * 6144 + h * 32 in Q, b * 9216 + h * 3072
// in S.
static const DgBaseline kBaseline = {
    1, "multi-batch", {1, 1, 0},
    {{4, {2, 3, 64, 32}, {6144, 32, 96, 1}}, {4, {2, 3, 48, 32}, {4608, 32, 96, 1}}, {}},
    2,
    {{"copy+strided-batched (dense A, B): C^T=B^TA batch=b[2]h[3]", 1, 1, 0, 48, 64, 32, 32, 32, 48, 1536, 2048, 3072,
      6},
     {"pointer-array batched over b[2],h[3]: C^T=B^TA", 1, 1, 0, 48, 64, 32, 96, 96, 48, 0, 0, 0, 6, 0u, 2,
      {{2, 4608, 6144, kPointerStrideC, 0}, {3, 32, 32, 3072, 0}}}}};
#else
#error "unknown SELFTEST_CASE"
#endif

// The epilogue in float, as a kernel applies it (written here from the definitions, not taken from the
// harness's reference).
__device__ float selftest_epilogue(const DgProblem& p, const DgBuffers& bufs, const long long* at, float t) {
  for (int s = 0; s < p.nsteps; ++s) {
    const DgStep& step = p.steps[s];
    const bool eat_nan = SELFTEST_BROKEN == 7;
    switch (step.kind) {
      case DG_STEP_BIAS:
        if (SELFTEST_BROKEN != 6) t += static_cast<float>(dg_load(bufs.ptr[DG_BIAS], p.dtype[DG_BIAS], at[DG_BIAS]));
        break;
      case DG_STEP_SCALE: t *= static_cast<float>(dg_load(bufs.ptr[DG_SCALE], p.dtype[DG_SCALE], at[DG_SCALE])); break;
      case DG_STEP_RESIDUAL:
        t += static_cast<float>(dg_load(bufs.ptr[DG_RESIDUAL], p.dtype[DG_RESIDUAL], at[DG_RESIDUAL]));
        break;
      case DG_STEP_ACTIVATION:
        switch (step.activation) {
          case DG_RELU: t = eat_nan ? fmaxf(t, 0.0f) : (t < 0.0f ? 0.0f : t); break;
          case DG_GELU_TANH: t = 0.5f * t * (1.0f + tanhf(0.7978845608f * (t + 0.044715f * t * t * t))); break;
          case DG_GELU_ERF: t = 0.5f * t * (1.0f + erff(t * 0.7071067812f)); break;
          case DG_SILU: t = t / (1.0f + expf(-t)); break;
          case DG_SIGMOID: t = 1.0f / (1.0f + expf(-t)); break;
          default: t = tanhf(t); break;
        }
        break;
      default:
        t = eat_nan ? fminf(fmaxf(t, step.lo), step.hi) : (t < step.lo ? step.lo : (t > step.hi ? step.hi : t));
        break;
    }
  }
  return t;
}

// One thread per element of the output; the summed letters are enumerated by a flat index.
__global__ void selftest_naive_kernel(DgProblem p, DgBuffers bufs, float alpha, float beta, long long count) {
#if defined(SELFTEST_DEPENDENT) && SELFTEST_BROKEN != 10 && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  const long long o = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (o >= count) return;
  const int out = dg_out_slot(p);
  long long idx[DG_MAX_DIMS], at[DG_SLOTS];
  long long rest = o, k_count = 1;
  for (int x = 0; x < DG_SLOTS; ++x) at[x] = p.offset[x];
  for (int d = p.nc - 1; d >= 0; --d) {
    idx[d] = rest % p.dims[d].size;
    rest /= p.dims[d].size;
    for (int x = DG_C; x < DG_SLOTS; ++x) at[x] += idx[d] * p.dims[d].stride[x];
  }
  for (int d = p.nc; d < p.ndims; ++d) k_count *= p.dims[d].size;
  void* const out_buf = const_cast<void*>(bufs.ptr[out]);
#if SELFTEST_BROKEN == 1
  --k_count;
  if (o == 0) dg_store(out_buf, p.dtype[out], p.offset[out] > 0 ? p.offset[out] - 1 : p.span[out] - 1, 0.0f);
#endif
  float acc = 0.0f;
  for (long long t = 0; t < k_count; ++t) {
    rest = t;
    for (int d = p.ndims - 1; d >= p.nc; --d) {
      idx[d] = rest % p.dims[d].size;
      rest /= p.dims[d].size;
    }
    long long a = p.offset[DG_A], b = p.offset[DG_B], sa = p.offset[DG_A_SCALES], sb = p.offset[DG_B_SCALES];
    for (int d = 0; d < p.ndims; ++d) {
      const DgDim& dim = p.dims[d];
      a += idx[d] * dim.stride[DG_A];
      b += idx[d] * dim.stride[DG_B];
      // A scale covers `block` consecutive indices of the letter (0: one).
      long long block_a = dim.block[0] > 0 ? dim.block[0] : 1;
      const long long block_b = dim.block[1] > 0 ? dim.block[1] : 1;
      if (SELFTEST_BROKEN == 12 && d >= p.nc && block_b > 1) block_a = block_b;
      sa += idx[d] / block_a * dim.stride[DG_A_SCALES];
      sb += idx[d] / block_b * dim.stride[DG_B_SCALES];
    }
    float va = static_cast<float>(dg_load(bufs.ptr[DG_A], p.dtype[DG_A], a));
    float vb = static_cast<float>(dg_load(bufs.ptr[DG_B], p.dtype[DG_B], b));
    if (p.present[DG_A_SCALES]) va *= static_cast<float>(dg_load(bufs.ptr[DG_A_SCALES], DG_F32, sa));
    if (p.present[DG_B_SCALES] && SELFTEST_BROKEN != 11) vb *= static_cast<float>(dg_load(bufs.ptr[DG_B_SCALES], DG_F32, sb));
    acc += va * vb;
  }
  float t = alpha * acc;
  if (SELFTEST_BROKEN == 2 || beta != 0.0f) t += beta * static_cast<float>(dg_load(bufs.ptr[DG_C], p.dtype[DG_C], at[DG_C]));
  t = selftest_epilogue(p, bufs, at, t);
  dg_store(out_buf, p.dtype[out], at[out], t);
#if SELFTEST_BROKEN == 8
  if (out == DG_D && bufs.ptr[DG_C]) dg_store(const_cast<void*>(bufs.ptr[DG_C]), p.dtype[DG_C], at[DG_C], t);
#endif
}

// The problem `p` (kProblem, or kProblem at a run-time size) on the buffers by slot.
static cudaError_t launch_problem(const DgProblem& p, void* const bufs[DG_SLOTS], float alpha, float beta,
                                  cudaStream_t s) {
  // The checks a generated entry point makes: every buffer the problem has, C only when it is read or written.
  const bool c_optional = p.present[DG_D] && beta == 0.0f;
  for (int x = 0; x < DG_SLOTS; ++x) {
    const bool checked = SELFTEST_BROKEN == 3 ? false : SELFTEST_BROKEN == 9 ? x <= DG_D : true;
    if (!p.present[x] || !checked) continue;
    if (!bufs[x] && !(x == DG_C && c_optional)) return cudaErrorInvalidValue;
    if (reinterpret_cast<uintptr_t>(bufs[x]) % p.align[x] != 0) return cudaErrorInvalidValue;
  }
  DgBuffers in;
  for (int x = 0; x < DG_SLOTS; ++x) in.ptr[x] = bufs[x];
  const long long count = dg_c_count(p);
#ifdef SELFTEST_DEPENDENT
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>((count + 127) / 128));
  config.blockDim = dim3(128);
  config.stream = s;
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attr;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, selftest_naive_kernel, p, in, alpha, beta, count);
#else
  selftest_naive_kernel<<<static_cast<unsigned>((count + 127) / 128), 128, 0, s>>>(p, in, alpha, beta, count);
  return cudaGetLastError();
#endif
}

#ifdef SELFTEST_RUN_TIME
static cudaError_t launch(void* const bufs[DG_SLOTS], long long m, float alpha, float beta, cudaStream_t s) {
  const long long lo = kProblem.run_time_lo, hi = dg_run_time_hi(kProblem);
#if SELFTEST_BROKEN == 5
  m = std::min(std::max(m, lo), hi);
#else
  if (m < lo || m > hi) return cudaErrorInvalidValue;
#endif
#if SELFTEST_BROKEN == 4
  m = hi;
#endif
  return launch_problem(dg_problem_at(kProblem, m), bufs, alpha, beta, s);
}
#else
static cudaError_t launch(void* const bufs[DG_SLOTS], float alpha, float beta, cudaStream_t s) {
  return launch_problem(kProblem, bufs, alpha, beta, s);
}
#endif

int main(int argc, char** argv) { return dg_harness_main(argc, argv, kProblem, kBaseline, launch); }
