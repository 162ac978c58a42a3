// Probe (session 9): can a tensor-core kernel that streams the weight through registers, the way the gemv family
// does, read [M,4096]·[4096,N] (B in nn.Linear's [N,K] layout, f16) at gemv's pace for M = 8 and 16?
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o regmma_probe tools/regmma_probe.cu && ./regmma_probe
// The product is computed as C^T = B A^T with mma.sync.m16n8k16: the mma's A operand is 16 rows of the weight, its B
// operand 8 tokens of the activation. A sum over k does not care about k's order, so each lane loads 16 contiguous
// bytes of its two weight rows (g and g + 8) and feeds them to two mmas as if they were the k-slots the fragment
// layout gives it; the activation fragment takes the same 8 physical k of token g (one 16-byte load), so the
// products pair up. A warp owns 16 rows of N and a K slice; WK warps of a block split K and sum through shared
// memory in order. Activations come straight from global memory (L1), or from A staged in shared memory (ACT_SMEM).
// Checked against a naive f32 kernel on random data; timed as `deepgemm bench` times (graph replay, B rotated past L2).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "probe_common.cuh"


// MT: 8-token tiles (1: M <= 8, 2: M <= 16). WN warps side by side along N (16 rows each), WK warps along K.
// U: 16-byte chunks a row and lane a round (two rounds in flight). A row's lanes t = 0..3 read 64 contiguous bytes
// per chunk index j; a round covers 256 U bytes... of each row.
template <int MT, int WN, int WK, int U, bool ACT_SMEM>
__global__ void __launch_bounds__(32 * WN * WK) regmma(const __half* __restrict__ A, const __half* __restrict__ B,
                                                       __half* __restrict__ C, int M, int N, int K) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int THREADS = 32 * WN * WK, STEP = 32 * U;  // k elements a warp consumes a round
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wn = warp % WN, wk = warp / WN;
  const int pitch = K + 32;  // staged A row pitch (halves): rows g and g + 1 land on different bank halves
  __half* const xs = reinterpret_cast<__half*>(smem);
  float* const red = reinterpret_cast<float*>(smem + (ACT_SMEM ? 8 * MT * pitch * 2 : 0));
  if (ACT_SMEM) {
    for (int i = threadIdx.x; i < 8 * MT * (K / 8); i += THREADS) {
      const int r = i / (K / 8), c = i % (K / 8) * 8;
      *reinterpret_cast<uint4*>(xs + r * pitch + c) =
          r < M ? __ldg(reinterpret_cast<const uint4*>(A + size_t(r) * K + c)) : make_uint4(0, 0, 0, 0);
    }
    __syncthreads();
  }
  const int n0 = (blockIdx.x * WN + wn) * 16;
  const int k_slice = K / WK, k0 = wk * k_slice;
  const __half* const row0 = B + size_t(n0 + g) * K + k0 + t * 8;
  const __half* const row1 = row0 + size_t(8) * K;
  float acc[MT][4] = {};
  uint4 wa[2][U], wb[2][U];
  const auto load = [&](uint4 (&w)[2][U], int kk) {
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const bool in = kk + j * 32 < k_slice;
      w[0][j] = in ? __ldg(reinterpret_cast<const uint4*>(row0 + kk + j * 32)) : make_uint4(0, 0, 0, 0);
      w[1][j] = in ? __ldg(reinterpret_cast<const uint4*>(row1 + kk + j * 32)) : make_uint4(0, 0, 0, 0);
    }
  };
  const auto act = [&](int token, int k) -> uint4 {
    if (ACT_SMEM) return *reinterpret_cast<const uint4*>(xs + token * pitch + k);
    return token < M ? __ldg(reinterpret_cast<const uint4*>(A + size_t(token) * K + k)) : make_uint4(0, 0, 0, 0);
  };
  const auto compute = [&](const uint4 (&w)[2][U], int kk) {
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const int k = k0 + kk + j * 32 + t * 8;
      if (kk + j * 32 < k_slice) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          const uint4 x = act(mt * 8 + g, k);
          mma16816(acc[mt], w[0][j].x, w[1][j].x, w[0][j].y, w[1][j].y, x.x, x.y);
          mma16816(acc[mt], w[0][j].z, w[1][j].z, w[0][j].w, w[1][j].w, x.z, x.w);
        }
      }
    }
  };
  load(wa, 0);
#pragma unroll 1
  for (int kk = 0; kk < k_slice; kk += 2 * STEP) {
    load(wb, kk + STEP);
    compute(wa, kk);
    load(wa, kk + 2 * STEP);
    compute(wb, kk + STEP);
  }
  // The WK partial tiles through shared memory, summed in k order: red[wk][token][wn * 16 + row].
  constexpr int RP = WN * 16 + 4;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    float* const p = red + (wk * 8 * MT + mt * 8 + 2 * t) * RP + wn * 16 + g;
    p[0] = acc[mt][0];
    p[RP] = acc[mt][1];
    p[8] = acc[mt][2];
    p[RP + 8] = acc[mt][3];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < M * WN * 16; i += THREADS) {
    const int token = i / (WN * 16), c = i % (WN * 16);
    float s = 0.0f;
    for (int w = 0; w < WK; ++w) s += red[(w * 8 * MT + token) * RP + c];
    C[size_t(token) * N + blockIdx.x * WN * 16 + c] = __float2half(s);
  }
}



static __half *g_A, *g_B, *g_C;
static float* g_ref;

template <int MT, int WN, int WK, int U, bool ACT_SMEM>
static void row(int M, int N, int K, int copies, cudaStream_t s) {
  auto* kern = regmma<MT, WN, WK, U, ACT_SMEM>;
  const int smem = (ACT_SMEM ? 8 * MT * (K + 32) * 2 : 0) + WK * 8 * MT * (WN * 16 + 4) * 4;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int blocks = N / (16 * WN);
  const double worst = checked_error(g_A, g_B, g_C, g_ref, M, N, K, s, [&] { kern<<<blocks, 32 * WN * WK, smem, s>>>(g_A, g_B, g_C, M, N, K); });
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, 32 * WN * WK, smem));
  const size_t bbytes = size_t(N) * K * 2;
  const double us = graph_median_us(s, 8 * copies, [&](int l) {
    kern<<<blocks, 32 * WN * WK, smem, s>>>(g_A, g_B + (l % copies) * size_t(N) * K, g_C, M, N, K);
  });
  std::printf("M=%2d N=%5d  WN %d WK %2d U %d %-5s  %4d blocks of %3d, %d an SM  %7.2f us  %5.0f GB/s  err %.1e%s\n", M,
              N, WN, WK, U, ACT_SMEM ? "smem" : "L1", blocks, 32 * WN * WK, per_sm, us, bbytes / us / 1e3, worst,
              worst > 2e-2 ? "  FAIL" : "");
}

int main() {
  const int K = 4096;
  cudaStream_t s;
  decode_data(K, 16, &g_A, &g_B, &g_C, &g_ref, &s);
  // Call 6 (first configurations: 4 warps or fewer along K) read at 1.1-3.4 TB/s: too few warps stream per SM.
  // Call 7: 8..16 warps along K, each K slice in flight at once or in two rounds.
  for (int M : {8, 16}) {
    const int N = 14336, c = 4;
    if (M <= 8) {
      row<1, 1, 16, 4, false>(M, N, K, c, s);
      row<1, 2, 8, 4, false>(M, N, K, c, s);
      row<1, 1, 8, 4, false>(M, N, K, c, s);
      row<1, 2, 16, 2, false>(M, N, K, c, s);
      row<1, 4, 8, 4, false>(M, N, K, c, s);
      row<1, 1, 16, 2, false>(M, N, K, c, s);
    } else {
      row<2, 1, 16, 4, false>(M, N, K, c, s);
      row<2, 2, 8, 4, false>(M, N, K, c, s);
      row<2, 1, 8, 4, false>(M, N, K, c, s);
      row<2, 2, 16, 2, false>(M, N, K, c, s);
      row<2, 4, 8, 4, false>(M, N, K, c, s);
      row<2, 1, 16, 2, false>(M, N, K, c, s);
    }
  }
  for (int M : {8, 16}) {
    const int N = 4096, c = 14;
    if (M <= 8) {
      row<1, 1, 16, 2, false>(M, N, K, c, s);
      row<1, 1, 16, 4, false>(M, N, K, c, s);
      row<1, 2, 8, 2, false>(M, N, K, c, s);
      row<1, 1, 32, 2, false>(M, N, K, c, s);
    } else {
      row<2, 1, 16, 2, false>(M, N, K, c, s);
      row<2, 1, 16, 4, false>(M, N, K, c, s);
      row<2, 2, 8, 2, false>(M, N, K, c, s);
      row<2, 1, 32, 2, false>(M, N, K, c, s);
    }
  }
  return 0;
}
