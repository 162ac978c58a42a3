// What the decode probes in tools/ share (rowstream_probe.cu, swapmma_probe.cu, regmma_probe.cu, persist_probe.cu,
// wsprobe.cu; read_patterns.cu takes the mbarrier helpers): shared-memory addresses and mbarriers, the streamed load
// and the lane swap, one mma.sync, the probes' random data (decode_data), and the check of a probe kernel against a
// naive kernel. The probes' product: C[M,N] (f16) = A[M,K] (f16, row-major) . B^T, B in nn.Linear's [N,K] layout
// (f16), f32 sums.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "graph_timing.cuh"

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// mbarriers: `full` completes when the copies of a stage have landed, `empty` when its readers are done.
__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(smem_u32(bar)), "r"(parity)
                 : "memory");
  } while (!done);
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}

// 16 bytes of the weight, streamed past L1 (read once); a lane-wise pick of two vectors; a vector swapped with
// lane ^ 4.
__device__ __forceinline__ uint4 ld_stream(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ uint4 sel(bool p, uint4 a, uint4 b) {
  return make_uint4(p ? a.x : b.x, p ? a.y : b.y, p ? a.z : b.z, p ? a.w : b.w);
}
__device__ __forceinline__ uint4 shfl_xor4(uint4 v) {
  return make_uint4(__shfl_xor_sync(~0u, v.x, 4), __shfl_xor_sync(~0u, v.y, 4), __shfl_xor_sync(~0u, v.z, 4),
                    __shfl_xor_sync(~0u, v.w, 4));
}

// d += a (16 x 16) * b (16 x 8): f16 inputs, f32 accumulators.
__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The reference: one thread a column of C, f32 sums in k order.
__global__ void reference(const __half* A, const __half* B, float* C, int M, int N, int K) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  for (int m = 0; m < M; ++m) {
    float s = 0.0f;
    for (int k = 0; k < K; ++k) s += __half2float(A[size_t(m) * K + k]) * __half2float(B[size_t(n) * K + k]);
    C[size_t(m) * N + n] = s;
  }
}

// Random values in [-1, 1] (a hash of the index and the seed).
__global__ void fill(__half* p, size_t n, uint32_t seed) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ seed;
    x ^= x >> 15, x *= 2246822519u, x ^= x >> 13;
    p[i] = __float2half((int(x % 2001) - 1000) / 1000.0f);
  }
}

// The probes' data, random values in [-1, 1]: A (`rows` x K), B (PROBE_COPIES copies of the N = PROBE_N weight,
// rotated past L2 by the timings: 470 MB at K = 4096), C and the reference's room for `rows` x PROBE_N; and a
// non-blocking stream.
constexpr int PROBE_N = 14336, PROBE_COPIES = 4;
static void decode_data(int K, int rows, __half** A, __half** B, __half** C, float** ref, cudaStream_t* s) {
  const size_t big = size_t(PROBE_COPIES) * PROBE_N * K;
  CK(cudaMalloc(B, big * 2));
  CK(cudaMalloc(A, size_t(rows) * K * 2));
  CK(cudaMalloc(C, size_t(rows) * PROBE_N * 2));
  CK(cudaMalloc(ref, size_t(rows) * PROBE_N * 4));
  fill<<<1024, 256>>>(*B, big, 1);
  fill<<<64, 256>>>(*A, size_t(rows) * K, 2);
  CK(cudaDeviceSynchronize());
  CK(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));
}

// C poisoned with NaN, one launch (`launch()` on stream s), then the largest error against the reference, relative
// to 1 + |reference|: infinity where C holds a NaN. `ref`: room for M x N floats.
template <typename Launch>
static double checked_error(const __half* A, const __half* B, __half* C, float* ref, int M, int N, int K,
                            cudaStream_t s, Launch launch) {
  CK(cudaMemset(C, 0xff, size_t(M) * N * 2));
  launch();
  CK(cudaStreamSynchronize(s));
  std::vector<__half> got(size_t(M) * N);
  std::vector<float> want(size_t(M) * N);
  CK(cudaMemcpy(got.data(), C, got.size() * 2, cudaMemcpyDeviceToHost));
  reference<<<(N + 127) / 128, 128>>>(A, B, ref, M, N, K);
  CK(cudaMemcpy(want.data(), ref, want.size() * 4, cudaMemcpyDeviceToHost));
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float v = __half2float(got[i]);
    if (!(v == v)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, double(std::abs(v - want[i])) / (1.0 + std::abs(want[i])));
  }
  return worst;
}

// A decode probe kernel (A, B, C, M, N) on `blocks` x `threads` with `smem` dynamic bytes (opted in by the caller):
// checked against the reference when `check` (C poisoned first), then timed with B rotated over `copies` copies.
struct ProbeRun {
  double worst, us;
  int regs, stack;
};
template <typename Kernel>
static ProbeRun run_probe(Kernel* kern, int blocks, int threads, int smem, bool check, const __half* A, const __half* B,
                          __half* C, float* ref, int M, int N, int K, int copies, cudaStream_t s) {
  ProbeRun r{};
  if (check)
    r.worst = checked_error(A, B, C, ref, M, N, K, s, [&] { kern<<<blocks, threads, smem, s>>>(A, B, C, M, N); });
  r.us = graph_median_us(s, 8 * copies, [&](int l) {
    kern<<<blocks, threads, smem, s>>>(A, B + (l % copies) * size_t(N) * K, C, M, N);
  });
  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, kern));
  r.regs = fa.numRegs, r.stack = int(fa.localSizeBytes);
  return r;
}

// The end of a probe's line: the kernel's registers and stack, its time, the N x K f16 weight's bytes over it, the
// worst error against the reference (FAIL past 2e-2); then the line is flushed.
static void print_probe_result(const ProbeRun& r, int N, int K) {
  std::printf("%3d regs %3d B stack  %7.2f us  %5.0f GB/s  err %.1e%s\n", r.regs, r.stack, r.us,
              size_t(N) * K * 2 / r.us / 1e3, r.worst, r.worst > 2e-2 ? "  FAIL" : "");
  std::fflush(stdout);
}

// The read ceiling of the same bytes: the N x K weight read by read_kernel (grid-stride 16-byte loads) on `blocks`
// blocks of 512 threads, rotated over `copies` copies; one line printed.
static void print_read_ceiling(const __half* B, float* sink, int N, int K, int copies, int blocks, cudaStream_t s) {
  const size_t vecs = size_t(N) * K / 8;
  const double us = graph_median_us(s, 8 * copies, [&](int l) {
    read_kernel<4><<<blocks, 512, 0, s>>>(reinterpret_cast<const uint4*>(B + (l % copies) * size_t(N) * K), vecs, sink);
  });
  std::printf("grid-stride read, %d blocks of 512 threads: %7.2f us  %5.0f GB/s\n", blocks, us, size_t(N) * K * 2 / us / 1e3);
}
