// selftest_harness.cu -- stands in for a generated <name>_harness.cu to exercise templates/dg_harness.cuh.
//
// The kernel is a hand-written naive one (one thread per output element, float accumulation) that reads
// kProblem's strides, so the same code serves every problem below. Pick one with -DSELFTEST_CASE=N:
//   1 (default) f16 GEMM C[m=5,n=3] = A[m,k=7] B[k,n]: A row-major with a padded row stride (9) and an
//     offset, C column-major with ldc 8 and an offset (holes on both sides); cuBLAS takes the views directly.
//   2  the same problem with the baseline forced through dense temps of A and C ("copy+cublas").
//   3  a batched bf16 x bf16 -> f32 contraction with two summed letters, B broadcast over the batch and a
//     padded C: big enough for the bench to mean something.
//   4  an f16 GEMM whose m is sized at run time (2..40), A and C padded and offset: the entry point takes m.
//   5  case 4 with the baseline forced through dense temps of A and C, whose sizes scale with m.
// Planted bugs, each of which the harness must catch (verify exits 1, or 4 for the fault):
//   -DSELFTEST_BROKEN=1  drop the last summed term and write one hole
//   -DSELFTEST_BROKEN=2  read C even when beta == 0 (the NaN poison must show up)
//   -DSELFTEST_BROKEN=3  no argument checks: the A = nullptr probe faults
//   -DSELFTEST_BROKEN=4  (cases 4, 5) ignore m and compute every row up to the largest size: rows past m
//                        are holes then, and they get written
//   -DSELFTEST_BROKEN=5  (cases 4, 5) accept an m outside the range (clamped into it) instead of refusing it
// -DSELFTEST_BAD_BASELINE gives case 1's baseline ldc < m: bench must report the baseline unavailable.
//
// Build from the repository root (no warnings expected):
//   nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80 -Xptxas -v
//        -Xcompiler -Wall tests/harness_selftest/selftest_harness.cu -I templates -o /tmp/selftest -ldl
#include <cuda_bf16.h>
#include <cuda_fp16.h>
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
typedef __half TA;
typedef __half TB;
typedef __half TC;
// dims: m (A stride 9, C stride 1), n (B stride 1, C stride 8), k (A stride 1, B stride 3).
// spans: A 3 + 4*9 + 6 + 1 = 46; B 6*3 + 2 + 1 = 21; C 2 + 4 + 2*8 + 1 = 23.
static const DgProblem kProblem = {
    "selftest", "sm_90a", 3,
    {{'m', DG_M, 5, {9, 0, 1}}, {'n', DG_N, 3, {0, 1, 8}}, {'k', DG_K, 7, {1, 3, 0}}},
    2, {3, 0, 2}, {46, 21, 23}, {DG_F16, DG_F16, DG_F16}, {2, 2, 2}, 1.5f, 0.5f, 1e-2};
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
typedef __nv_bfloat16 TA;
typedef __nv_bfloat16 TB;
typedef float TC;
// C[b=3, m=1024, n=768] = sum_{k1=8, k2=128} A[b, m, k1, k2] * B[k1, k2, n], C rows padded to 800.
static const DgProblem kProblem = {
    "selftest_batched", "sm_90a", 5,
    {{'b', DG_BATCH, 3, {1048576, 0, 819200}},
     {'m', DG_M, 1024, {1024, 0, 800}},
     {'n', DG_N, 768, {0, 1, 1}},
     {'i', DG_K, 8, {128, 98304, 0}},
     {'j', DG_K, 128, {1, 768, 0}}},
    3, {0, 0, 0}, {3145728, 786432, 2457568}, {DG_BF16, DG_BF16, DG_F32}, {16, 16, 16}, 1.0f, 1.0f, 1e-3};
// Row-major C (m x n, ld 800) is column-major (n x m): swap, Cmat(768 x 1024) = B(768 x 1024) * A(1024 x 1024).
static const DgBaseline kBaseline = {
    1, "cublas", {0, 0, 0}, {}, 1, {{"C^T=BA batch=b", 1, 0, 0, 768, 1024, 1024, 768, 1024, 800, 0, 1048576, 819200, 3}}};
#elif SELFTEST_CASE == 4 || SELFTEST_CASE == 5
typedef __half TA;
typedef __half TB;
typedef __half TC;
#define SELFTEST_RUN_TIME 1
// C[m, n=24] = A[m, k=33] B[k, n] with m in 2..40 at run time: A rows padded to 40 at offset 5, C rows
// padded to 32 at offset 3 (holes in every row, before the view and, for m < 40, the rows past m).
// spans: A 5 + 39*40 + 32 + 1 = 1598; B 32*24 + 23 + 1 = 792; C 3 + 39*32 + 23 + 1 = 1275.
static const long long kEdges[] = {2, 4, 5, 16, 17, 40};
static const DgProblem kProblem = {
    "selftest_run_time", "sm_90a", 3,
    {{'m', DG_M, 40, {40, 0, 32}}, {'n', DG_N, 24, {0, 1, 1}}, {'k', DG_K, 33, {1, 24, 0}}},
    2, {5, 0, 3}, {1598, 792, 1275}, {DG_F16, DG_F16, DG_F16}, {2, 2, 2}, 1.5f, 0.5f, 1e-2,
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
#else
#error "unknown SELFTEST_CASE"
#endif

// One thread per element of C; the summed letters are enumerated by a flat index.
__global__ void selftest_naive_kernel(DgProblem p, const TA* A, const TB* B, TC* C, float alpha, float beta,
                                      long long count) {
  const long long o = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (o >= count) return;
  long long idx[DG_MAX_DIMS];
  long long rest = o, c = p.offset[DG_C], k_count = 1;
  for (int d = p.nc - 1; d >= 0; --d) {
    idx[d] = rest % p.dims[d].size;
    rest /= p.dims[d].size;
    c += idx[d] * p.dims[d].stride[DG_C];
  }
  for (int d = p.nc; d < p.ndims; ++d) k_count *= p.dims[d].size;
#if SELFTEST_BROKEN == 1
  --k_count;
  if (o == 0) C[p.offset[DG_C] > 0 ? p.offset[DG_C] - 1 : p.span[DG_C] - 1] = TC(0.0f);
#endif
  float acc = 0.0f;
  for (long long t = 0; t < k_count; ++t) {
    rest = t;
    for (int d = p.ndims - 1; d >= p.nc; --d) {
      idx[d] = rest % p.dims[d].size;
      rest /= p.dims[d].size;
    }
    long long a = p.offset[DG_A], b = p.offset[DG_B];
    for (int d = 0; d < p.ndims; ++d) {
      a += idx[d] * p.dims[d].stride[DG_A];
      b += idx[d] * p.dims[d].stride[DG_B];
    }
    acc += static_cast<float>(A[a]) * static_cast<float>(B[b]);
  }
  float out = alpha * acc;
#if SELFTEST_BROKEN == 2
  out += beta * static_cast<float>(C[c]);
#else
  if (beta != 0.0f) out += beta * static_cast<float>(C[c]);
#endif
  C[c] = TC(out);
}

// The problem `p` (kProblem, or kProblem at a run-time size).
static cudaError_t launch_problem(const DgProblem& p, const void* A, const void* B, void* C, float alpha, float beta,
                                  cudaStream_t s) {
#if SELFTEST_BROKEN != 3
  if (!A || !B || !C) return cudaErrorInvalidValue;
  const void* ptrs[3] = {A, B, C};
  for (int x = 0; x < 3; ++x)
    if (reinterpret_cast<uintptr_t>(ptrs[x]) % p.align[x] != 0) return cudaErrorInvalidValue;
#endif
  long long count = 1;
  for (int d = 0; d < p.nc; ++d) count *= p.dims[d].size;
  selftest_naive_kernel<<<static_cast<unsigned>((count + 127) / 128), 128, 0, s>>>(
      p, static_cast<const TA*>(A), static_cast<const TB*>(B), static_cast<TC*>(C), alpha, beta, count);
  return cudaGetLastError();
}

#ifdef SELFTEST_RUN_TIME
static cudaError_t launch(const void* A, const void* B, void* C, long long m, float alpha, float beta,
                          cudaStream_t s) {
  const long long lo = kProblem.run_time_lo, hi = dg_run_time_hi(kProblem);
#if SELFTEST_BROKEN == 5
  m = std::min(std::max(m, lo), hi);
#else
  if (m < lo || m > hi) return cudaErrorInvalidValue;
#endif
#if SELFTEST_BROKEN == 4
  m = hi;
#endif
  return launch_problem(dg_problem_at(kProblem, m), A, B, C, alpha, beta, s);
}
#else
static cudaError_t launch(const void* A, const void* B, void* C, float alpha, float beta, cudaStream_t s) {
  return launch_problem(kProblem, A, B, C, alpha, beta, s);
}
#endif

int main(int argc, char** argv) { return dg_harness_main(argc, argv, kProblem, kBaseline, launch); }
