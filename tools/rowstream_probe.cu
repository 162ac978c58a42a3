// Probe (session 10): a decode kernel that moves the weight with 1-D bulk copies (cp.async.bulk: one copy a
// weight row and K chunk, not a 2-D tensor-map box) into a ring of shared-memory stages, and multiplies with
// mma.sync from there. [M,K]·[K,N] with B in nn.Linear's [N,K] layout, f16, f32 accumulate, M = 1..64.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o rowstream_probe tools/rowstream_probe.cu
// Why: the hopper family's TMA box order reads at most 4.03 TB/s at N = 14336 with no math at all, a grid-stride
// read 4.29 (tools/read_patterns.cu). Does a row-wise bulk-copy stream read faster, and does math on it keep pace?
// The product is C^T = B A^T with mma.sync.m16n8k16 (the mma's A operand: 16 weight rows; its B operand: 8 tokens).
// A sum over k ignores k's order, so each lane reads 16 contiguous bytes (8 k) of its rows g and g + 8 and of token
// g, and feeds them to two mmas as the k-slots its fragments hold: weight and activation pair up on the same k.
// Rows of a stage sit 16 bytes apart mod 128 (pitch = chunk + 16 bytes): the 8 rows g of one read hit 8 different
// bank groups, so a warp's 512-byte read takes the minimum 4 wavefronts.
// Checked against a naive f32 kernel on random data; timed as `deepgemm bench` times (graph replay, B rotated past L2).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "probe_common.cuh"

template <bool EVICT_FIRST>
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, uint64_t* bar, uint64_t policy) {
  if (EVICT_FIRST)
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::"r"(
            smem_u32(dst)),
        "l"(src), "r"(bytes), "r"(smem_u32(bar)), "l"(policy)
        : "memory");
  else
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     smem_u32(dst)),
                 "l"(src), "r"(bytes), "r"(smem_u32(bar))
                 : "memory");
}

// MT: 8-token tiles (M <= 8 MT). WC consumer warps, R 16-row tiles each: BN = 16 R WC weight rows a block.
// KS: k elements a stage; STAGES in the ring. MATH false: consumers only wait and release (the read ceiling).
template <int MT, int WC, int R, int KS, int STAGES, bool MATH, bool EVICT_FIRST>
__global__ void __launch_bounds__(32 * (WC + 1)) rowstream(const __half* __restrict__ A, const __half* __restrict__ B,
                                                            __half* __restrict__ C, int M, int N, int K) {
  constexpr int BN = 16 * R * WC, TOK = MATH ? 8 * MT : 0, ROWS = BN + TOK;
  constexpr int PITCH = KS * 2 + 16, STAGE_BYTES = ROWS * PITCH;
  extern __shared__ __align__(128) unsigned char smem[];
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + STAGES * STAGE_BYTES);
  uint64_t* const empty = full + STAGES;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n0 = blockIdx.x * BN;
  const int chunks = K / KS;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], WC);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  // Token rows past M are never copied: zero them in every stage once.
  if (MATH)
    for (int i = threadIdx.x; i < STAGES * (TOK - M) * (PITCH / 16); i += blockDim.x) {
      const int s = i / ((TOK - M) * (PITCH / 16)), r = M + i / (PITCH / 16) % (TOK - M), c = i % (PITCH / 16);
      *reinterpret_cast<uint4*>(smem + s * STAGE_BYTES + (BN + r) * PITCH + c * 16) = make_uint4(0, 0, 0, 0);
    }
  __syncthreads();
  if (warp == WC) {  // producer
    uint64_t policy = 0;
    if (EVICT_FIRST) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
    const int copied = BN + (MATH ? M : 0);
    for (int c = 0; c < chunks; ++c) {
      const int s = c % STAGES;
      mbar_wait(&empty[s], ((c / STAGES) & 1) ^ 1);
      if (lane == 0) mbar_expect_tx(&full[s], copied * KS * 2);
      __syncwarp();
      unsigned char* const stage = smem + s * STAGE_BYTES;
      for (int r = lane; r < copied; r += 32) {
        const __half* src = r < BN ? B + size_t(n0 + r) * K + size_t(c) * KS : A + size_t(r - BN) * K + size_t(c) * KS;
        bulk_copy<EVICT_FIRST>(stage + r * PITCH, src, KS * 2, &full[s], policy);
      }
    }
    return;
  }
  const int g = lane / 4, t = lane % 4;
  float acc[R][MT][4] = {};
  uint32_t sink = 0;
  for (int c = 0; c < chunks; ++c) {
    const int s = c % STAGES;
    mbar_wait(&full[s], (c / STAGES) & 1);
    const unsigned char* const stage = smem + s * STAGE_BYTES;
    if (MATH) {
#pragma unroll 4
      for (int j = 0; j < KS / 32; ++j) {
        const int kb = (32 * j + 8 * t) * 2;
        uint4 x[MT];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) x[mt] = *reinterpret_cast<const uint4*>(stage + (BN + mt * 8 + g) * PITCH + kb);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const int row = (warp * R + r) * 16 + g;
          const uint4 w0 = *reinterpret_cast<const uint4*>(stage + row * PITCH + kb);
          const uint4 w1 = *reinterpret_cast<const uint4*>(stage + (row + 8) * PITCH + kb);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma16816(acc[r][mt], w0.x, w1.x, w0.y, w1.y, x[mt].x, x[mt].y);
            mma16816(acc[r][mt], w0.z, w1.z, w0.w, w1.w, x[mt].z, x[mt].w);
          }
        }
      }
    } else {
      sink ^= *reinterpret_cast<const uint32_t*>(stage + (warp * 16 * R + g) * PITCH + t * 4);
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[s]);
  }
  if (!MATH) {
    if (sink == 0x12345678u) C[0] = __float2half(1.0f);
    return;
  }
  // acc[r][mt]: {D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]}, D[row][token].
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = n0 + (warp * R + r) * 16 + g;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int token = mt * 8 + 2 * t + (i & 1), n = row + (i >> 1) * 8;
        if (token < M) C[size_t(token) * N + n] = __float2half(acc[r][mt][i]);
      }
  }
}

// The same stream with the copies done by every thread as 16-byte cp.async (LDGSTS): a warp's 32 chunks are 512
// contiguous bytes of one row, landing at the same padded pitch. No TMA request per row; STAGES - 1 chunks in flight.
template <int MT, int WC, int R, int KS, int STAGES, bool MATH>
__global__ void __launch_bounds__(32 * WC) cpstream(const __half* __restrict__ A, const __half* __restrict__ B,
                                                    __half* __restrict__ C, int M, int N, int K) {
  constexpr int BN = 16 * R * WC, TOK = MATH ? 8 * MT : 0, THREADS = 32 * WC;
  constexpr int PITCH = KS * 2 + 16, STAGE_BYTES = (BN + TOK) * PITCH, CPR = KS / 8;
  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n0 = blockIdx.x * BN;
  const int chunks = K / KS;
  if (MATH)
    for (int i = threadIdx.x; i < STAGES * (TOK - M) * (PITCH / 16); i += THREADS) {
      const int s = i / ((TOK - M) * (PITCH / 16)), r = M + i / (PITCH / 16) % (TOK - M), c = i % (PITCH / 16);
      *reinterpret_cast<uint4*>(smem + s * STAGE_BYTES + (BN + r) * PITCH + c * 16) = make_uint4(0, 0, 0, 0);
    }
  const int copied = (BN + (MATH ? M : 0)) * CPR;
  const auto load_stage = [&](int c) {
    unsigned char* const stage = smem + (c % STAGES) * STAGE_BYTES;
    if (c < chunks)
      for (int q = threadIdx.x; q < copied; q += THREADS) {
        const int r = q / CPR, col = q % CPR;
        const __half* src = (r < BN ? B + size_t(n0 + r) * K : A + size_t(r - BN) * K) + size_t(c) * KS + col * 8;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(stage + r * PITCH + col * 16)), "l"(src)
                     : "memory");
      }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };
#pragma unroll 1
  for (int c = 0; c < STAGES - 1; ++c) load_stage(c);
  const int g = lane / 4, t = lane % 4;
  float acc[R][MT][4] = {};
  uint32_t sink = 0;
#pragma unroll 1
  for (int c = 0; c < chunks; ++c) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2) : "memory");
    __syncthreads();  // chunk c landed for every thread; everyone is done with chunk c - 1's slot
    load_stage(c + STAGES - 1);
    const unsigned char* const stage = smem + (c % STAGES) * STAGE_BYTES;
    if (MATH) {
#pragma unroll 4
      for (int j = 0; j < KS / 32; ++j) {
        const int kb = (32 * j + 8 * t) * 2;
        uint4 x[MT];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) x[mt] = *reinterpret_cast<const uint4*>(stage + (BN + mt * 8 + g) * PITCH + kb);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const int row = (warp * R + r) * 16 + g;
          const uint4 w0 = *reinterpret_cast<const uint4*>(stage + row * PITCH + kb);
          const uint4 w1 = *reinterpret_cast<const uint4*>(stage + (row + 8) * PITCH + kb);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma16816(acc[r][mt], w0.x, w1.x, w0.y, w1.y, x[mt].x, x[mt].y);
            mma16816(acc[r][mt], w0.z, w1.z, w0.w, w1.w, x[mt].z, x[mt].w);
          }
        }
      }
    } else {
      sink ^= *reinterpret_cast<const uint32_t*>(stage + (warp * 16 * R + g) * PITCH + t * 4);
    }
  }
  if (!MATH) {
    if (sink == 0x12345678u) C[0] = __float2half(1.0f);
    return;
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = n0 + (warp * R + r) * 16 + g;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int token = mt * 8 + 2 * t + (i & 1), n = row + (i >> 1) * 8;
        if (token < M) C[size_t(token) * N + n] = __float2half(acc[r][mt][i]);
      }
  }
}

// Call 3: the cp.async stream with cheap addressing (compile-time shapes: each thread's chunk of a stage is a shift
// and a multiply away), and every warp copying: a warp's 32 chunks are 512 contiguous bytes of one row.
template <int MT, int WC, int KS, int STAGES, bool MATH>
__global__ void __launch_bounds__(32 * WC) cp2stream(const __half* __restrict__ A, const __half* __restrict__ B,
                                                     __half* __restrict__ C, int M, int N, int K) {
  constexpr int BN = 16 * WC, TOK = MATH ? 8 * MT : 0, THREADS = 32 * WC;
  constexpr int PITCH = KS * 2 + 16, STAGE_BYTES = (BN + TOK) * PITCH, CPR = KS / 8, CPT = BN * CPR / THREADS;
  static_assert(BN * CPR % THREADS == 0, "whole chunks a thread");
  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n0 = blockIdx.x * BN;
  const int chunks = K / KS;
  if (MATH)
    for (int i = threadIdx.x; i < STAGES * (TOK - M) * (PITCH / 16); i += THREADS) {
      const int s = i / ((TOK - M) * (PITCH / 16)), r = M + i / (PITCH / 16) % (TOK - M), c = i % (PITCH / 16);
      *reinterpret_cast<uint4*>(smem + s * STAGE_BYTES + (BN + r) * PITCH + c * 16) = make_uint4(0, 0, 0, 0);
    }
  const __half* const Bblk = B + size_t(n0) * K;
  const uint32_t smem0 = smem_u32(smem);
  const auto load_stage = [&](int c) {
    const uint32_t stage = smem0 + (c % STAGES) * STAGE_BYTES;
    if (c < chunks) {
      const __half* const src0 = Bblk + size_t(c) * KS;
#pragma unroll
      for (int p = 0; p < CPT; ++p) {
        const int q = p * THREADS + threadIdx.x, r = q / CPR, col = q % CPR;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(stage + r * PITCH + col * 16),
                     "l"(src0 + size_t(r) * K + col * 8)
                     : "memory");
      }
      if (MATH)
        for (int q = threadIdx.x; q < M * CPR; q += THREADS) {
          const int r = q / CPR, col = q % CPR;
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(stage + (BN + r) * PITCH + col * 16),
                       "l"(A + size_t(r) * K + size_t(c) * KS + col * 8)
                       : "memory");
        }
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };
#pragma unroll 1
  for (int c = 0; c < STAGES - 1; ++c) load_stage(c);
  const int g = lane / 4, t = lane % 4;
  float acc[MT][4] = {};
  uint32_t sink = 0;
#pragma unroll 1
  for (int c = 0; c < chunks; ++c) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2) : "memory");
    __syncthreads();
    load_stage(c + STAGES - 1);
    const unsigned char* const stage = smem + (c % STAGES) * STAGE_BYTES;
    if (MATH) {
#pragma unroll 4
      for (int j = 0; j < KS / 32; ++j) {
        const int kb = (32 * j + 8 * t) * 2;
        const int row = warp * 16 + g;
        const uint4 w0 = *reinterpret_cast<const uint4*>(stage + row * PITCH + kb);
        const uint4 w1 = *reinterpret_cast<const uint4*>(stage + (row + 8) * PITCH + kb);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          const uint4 x = *reinterpret_cast<const uint4*>(stage + (BN + mt * 8 + g) * PITCH + kb);
          mma16816(acc[mt], w0.x, w1.x, w0.y, w1.y, x.x, x.y);
          mma16816(acc[mt], w0.z, w1.z, w0.w, w1.w, x.z, x.w);
        }
      }
    } else {
      sink ^= *reinterpret_cast<const uint32_t*>(stage + (warp * 16 + g) * PITCH + t * 4);
    }
  }
  if (!MATH) {
    if (sink == 0x12345678u) C[0] = __float2half(1.0f);
    return;
  }
  const int row = n0 + warp * 16 + g;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int token = mt * 8 + 2 * t + (i & 1), n = row + (i >> 1) * 8;
      if (token < M) C[size_t(token) * N + n] = __float2half(acc[mt][i]);
    }
}

// Call 3: plain loads of the weight with no shared memory and no math, to tell the DRAM order apart from the rest.
// FRAG: the order an mma fragment wants (a warp owns 16 rows; lane (g, t) reads rows g and g + 8, 16 bytes at k =
// 32 j + 8 t: a load is 8 rows x 64 bytes). Else gemv's order (a warp owns 4 rows; a load is 512 bytes of one row).
// WK warps of a block split K; U loads a row and round, two rounds in flight.
template <bool FRAG, int WN, int WK, int U>
__global__ void __launch_bounds__(32 * WN * WK) ldg_order(const __half* __restrict__ B, float* out, int N, int K) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wn = warp % WN, wk = warp / WN;
  constexpr int ROWS = FRAG ? 16 : 4;
  const int k_slice = K / WK, k0 = wk * k_slice;
  const size_t n0 = size_t(blockIdx.x * WN + wn) * ROWS;
  uint32_t sink = 0;
  const auto chunk = [&](int r, int kk, int j) -> const uint4* {  // r: 0..1 (FRAG) or 0..3
    if (FRAG) return reinterpret_cast<const uint4*>(B + (n0 + lane / 4 + 8 * r) * K + k0 + kk + 32 * j + 8 * (lane % 4));
    return reinterpret_cast<const uint4*>(B + (n0 + r) * K + k0 + kk + 256 * j + 8 * lane);
  };
  constexpr int R = FRAG ? 2 : 4, STEP = FRAG ? 32 * U : 256 * U;
  uint4 a[R][U], b[R][U];
  const auto load = [&](uint4 (&w)[R][U], int kk) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int j = 0; j < U; ++j) w[r][j] = kk < k_slice ? __ldg(chunk(r, kk, j)) : make_uint4(0, 0, 0, 0);
  };
  const auto use = [&](const uint4 (&w)[R][U]) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int j = 0; j < U; ++j) sink ^= w[r][j].x ^ w[r][j].w;
  };
  load(a, 0);
  for (int kk = 0; kk < k_slice; kk += 2 * STEP) {
    load(b, kk + STEP);
    use(a);
    load(a, kk + 2 * STEP);
    use(b);
  }
  if (sink == 0x12345678u) out[0] = 1.0f;
}



static __half *g_A, *g_B, *g_C;
static float* g_ref;

template <int MT, int WC, int R, int KS, int STAGES, bool MATH, bool EVICT_FIRST = false, bool CP = false>
static void row(int M, int N, int K, int copies, cudaStream_t s) {
  auto* kern = CP ? cpstream<MT, WC, R, KS, STAGES, MATH> : rowstream<MT, WC, R, KS, STAGES, MATH, EVICT_FIRST>;
  constexpr int BN = 16 * R * WC, ROWS = BN + (MATH ? 8 * MT : 0);
  const int smem = STAGES * ROWS * (KS * 2 + 16) + (CP ? 0 : 2 * STAGES * 8);
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int blocks = N / BN, threads = 32 * (WC + (CP ? 0 : 1));
  const double worst = MATH ? checked_error(g_A, g_B, g_C, g_ref, M, N, K, s, [&] { kern<<<blocks, threads, smem, s>>>(g_A, g_B, g_C, M, N, K); }) : 0.0;
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, threads, smem));
  const size_t bbytes = size_t(N) * K * 2;
  const double us = graph_median_us(s, 8 * copies, [&](int l) {
    kern<<<blocks, threads, smem, s>>>(g_A, g_B + (l % copies) * size_t(N) * K, g_C, M, N, K);
  });
  std::printf("%-4s %-4s M=%2d N=%5d  rows %3d (%d warps x %d tiles) KS %3d x %d stages%s  %4d blocks, %d an SM, %6.1f KB  "
              "%7.2f us  %5.0f GB/s  err %.1e%s\n",
              CP ? "cp" : "bulk", MATH ? "mma" : "read", M, N, BN, WC, R, KS, STAGES, EVICT_FIRST ? " ef" : "   ", blocks, per_sm,
              smem / 1024.0, us, bbytes / us / 1e3, worst, worst > 2e-2 ? "  FAIL" : "");
  std::fflush(stdout);
}

template <int MT, int WC, int R, int KS, int STAGES, bool MATH>
static void cp(int M, int N, int K, int copies, cudaStream_t s) {
  row<MT, WC, R, KS, STAGES, MATH, false, true>(M, N, K, copies, s);
}

template <int MT, int WC, int KS, int STAGES, bool MATH>
static void cp2(int M, int N, int K, int copies, cudaStream_t s) {
  auto* kern = cp2stream<MT, WC, KS, STAGES, MATH>;
  constexpr int BN = 16 * WC, ROWS = BN + (MATH ? 8 * MT : 0);
  const int smem = STAGES * ROWS * (KS * 2 + 16);
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int blocks = N / BN, threads = 32 * WC;
  const double worst = MATH ? checked_error(g_A, g_B, g_C, g_ref, M, N, K, s, [&] { kern<<<blocks, threads, smem, s>>>(g_A, g_B, g_C, M, N, K); }) : 0.0;
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, threads, smem));
  const size_t bbytes = size_t(N) * K * 2;
  const double us = graph_median_us(s, 8 * copies, [&](int l) {
    kern<<<blocks, threads, smem, s>>>(g_A, g_B + (l % copies) * size_t(N) * K, g_C, M, N, K);
  });
  std::printf("cp2  %-4s M=%2d N=%5d  rows %3d (%2d warps) KS %4d x %d stages  %4d blocks, %d an SM, %6.1f KB  "
              "%7.2f us  %5.0f GB/s  err %.1e%s\n",
              MATH ? "mma" : "read", M, N, BN, WC, KS, STAGES, blocks, per_sm, smem / 1024.0, us, bbytes / us / 1e3,
              worst, worst > 2e-2 ? "  FAIL" : "");
  std::fflush(stdout);
}

template <bool FRAG, int WN, int WK, int U>
static void ldg(int N, int K, int copies, cudaStream_t s) {
  auto* kern = ldg_order<FRAG, WN, WK, U>;
  const int rows = (FRAG ? 16 : 4) * WN, blocks = N / rows, threads = 32 * WN * WK;
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, threads, 0));
  const double us = graph_median_us(s, 8 * copies, [&](int l) {
    kern<<<blocks, threads, 0, s>>>(g_B + (l % copies) * size_t(N) * K, g_ref, N, K);
  });
  std::printf("ldg  %-4s N=%5d  %3d rows a block (%d x %d warps), U %d: %3d B of a row a round  %4d blocks, %d an SM  "
              "%7.2f us  %5.0f GB/s\n",
              FRAG ? "frag" : "gemv", N, rows, WN, WK, U, (FRAG ? 64 : 512) * U, blocks, per_sm, us,
              size_t(N) * K * 2 / us / 1e3);
  std::fflush(stdout);
}

int main(int argc, char** argv) {
  const std::string set = argc > 1 ? argv[1] : "cp2";  // bulk: call 1's set; cp: call 2's; cp2: call 3's
  const bool bulk = set == "bulk";
  const int K = 4096;
  cudaStream_t s;
  decode_data(K, 64, &g_A, &g_B, &g_C, &g_ref, &s);
  if (set == "cp2") {
    const int N = 14336, c = 4;
    std::printf("-- plain loads, no math, N = %d: the fragment's order against gemv's\n", N);
    ldg<false, 4, 1, 4>(N, K, c, s);
    ldg<false, 4, 1, 2>(N, K, c, s);
    ldg<true, 4, 1, 4>(N, K, c, s);
    ldg<true, 4, 1, 8>(N, K, c, s);
    ldg<true, 2, 2, 8>(N, K, c, s);
    ldg<true, 1, 4, 8>(N, K, c, s);
    ldg<true, 1, 8, 4>(N, K, c, s);
    std::printf("-- cp.async, cheap addressing, N = %d\n", N);
    cp2<1, 7, 256, 3, false>(1, N, K, c, s);
    cp2<1, 7, 128, 6, false>(1, N, K, c, s);
    cp2<1, 4, 256, 3, false>(1, N, K, c, s);
    cp2<1, 4, 512, 3, false>(1, N, K, c, s);
    cp2<1, 4, 128, 6, false>(1, N, K, c, s);
    cp2<1, 2, 512, 3, false>(1, N, K, c, s);
    cp2<1, 7, 256, 3, true>(8, N, K, c, s);
    cp2<1, 4, 256, 3, true>(8, N, K, c, s);
    cp2<1, 4, 128, 5, true>(8, N, K, c, s);
    cp2<2, 7, 256, 3, true>(16, N, K, c, s);
    cp2<2, 4, 128, 4, true>(16, N, K, c, s);
    cp2<2, 4, 256, 2, true>(16, N, K, c, s);
  }
  if (set == "cp2") {
    const int N = 4096, c = 14;
    std::printf("-- N = %d\n", N);
    ldg<false, 4, 1, 4>(N, K, c, s);
    ldg<true, 4, 1, 8>(N, K, c, s);
    ldg<true, 1, 4, 8>(N, K, c, s);
    cp2<1, 2, 512, 3, false>(1, N, K, c, s);
    cp2<1, 1, 512, 4, false>(1, N, K, c, s);
    cp2<1, 2, 256, 6, false>(1, N, K, c, s);
    cp2<2, 2, 512, 3, true>(16, N, K, c, s);
    cp2<2, 1, 512, 3, true>(16, N, K, c, s);
    cp2<2, 2, 256, 4, true>(16, N, K, c, s);
  }
  if (set == "cp") {
    const int N = 14336, c = 4;
    std::printf("-- cp.async, N = %d: read ceilings (a grid-stride read: 4.29 TB/s; hopper's TMA order: 4.03)\n", N);
    cp<1, 7, 1, 128, 6, false>(1, N, K, c, s);
    cp<1, 7, 1, 256, 3, false>(1, N, K, c, s);
    cp<1, 4, 1, 256, 3, false>(1, N, K, c, s);
    cp<1, 4, 1, 512, 3, false>(1, N, K, c, s);
    cp<1, 2, 1, 512, 3, false>(1, N, K, c, s);
    std::printf("-- cp.async with math, N = %d (hopper today: 30.5 us at M = 8 / 16; target <= 28.6)\n", N);
    for (int M : {1, 8}) {
      cp<1, 7, 1, 256, 3, true>(M, N, K, c, s);
      cp<1, 4, 1, 256, 3, true>(M, N, K, c, s);
      cp<1, 4, 1, 512, 3, true>(M, N, K, c, s);
      cp<1, 2, 1, 512, 3, true>(M, N, K, c, s);
    }
    for (int M : {16}) {
      cp<2, 7, 1, 256, 3, true>(M, N, K, c, s);
      cp<2, 4, 1, 256, 3, true>(M, N, K, c, s);
      cp<2, 4, 1, 512, 2, true>(M, N, K, c, s);
      cp<2, 2, 1, 512, 3, true>(M, N, K, c, s);
      cp<2, 2, 2, 256, 3, true>(M, N, K, c, s);
    }
    for (int M : {32}) {
      cp<4, 4, 1, 256, 3, true>(M, N, K, c, s);
      cp<4, 2, 2, 256, 3, true>(M, N, K, c, s);
    }
    for (int M : {64}) {
      cp<8, 4, 1, 256, 2, true>(M, N, K, c, s);
      cp<8, 2, 2, 256, 2, true>(M, N, K, c, s);
      cp<8, 4, 1, 128, 4, true>(M, N, K, c, s);
    }
  }
  if (set == "cp") {
    const int N = 4096, c = 14;
    std::printf("-- cp.async, N = %d (hopper today: 10.95 us at M = 16, target 10.65; cuBLAS ~12.8)\n", N);
    cp<1, 2, 1, 512, 3, false>(1, N, K, c, s);
    cp<1, 1, 1, 512, 4, false>(1, N, K, c, s);
    cp<1, 2, 1, 256, 4, false>(1, N, K, c, s);
    for (int M : {8}) {
      cp<1, 2, 1, 512, 3, true>(M, N, K, c, s);
      cp<1, 1, 1, 512, 4, true>(M, N, K, c, s);
    }
    for (int M : {16}) {
      cp<2, 2, 1, 512, 3, true>(M, N, K, c, s);
      cp<2, 1, 1, 512, 3, true>(M, N, K, c, s);
      cp<2, 2, 1, 256, 4, true>(M, N, K, c, s);
    }
    for (int M : {64}) {
      cp<8, 2, 1, 256, 3, true>(M, N, K, c, s);
      cp<8, 1, 1, 256, 4, true>(M, N, K, c, s);
    }
  }
  if (bulk) {
    const int N = 14336, c = 4;
    std::printf("-- read ceilings, N = %d (a grid-stride read: 4.29 TB/s; hopper's TMA order: 4.03)\n", N);
    row<1, 7, 1, 256, 3, false>(1, N, K, c, s);
    row<1, 7, 1, 256, 3, false, true>(1, N, K, c, s);
    row<1, 7, 1, 128, 6, false>(1, N, K, c, s);
    row<1, 4, 1, 512, 3, false>(1, N, K, c, s);
    row<1, 4, 1, 256, 3, false>(1, N, K, c, s);
    row<1, 4, 1, 128, 4, false>(1, N, K, c, s);
    row<1, 2, 1, 256, 6, false>(1, N, K, c, s);
    std::printf("-- with math, N = %d (hopper today: 30.5 us at M = 8 / 16; gemv 28.5 at M = 1; target <= 28.6)\n", N);
    for (int M : {1, 8}) {
      row<1, 7, 1, 256, 3, true>(M, N, K, c, s);
      row<1, 7, 1, 128, 6, true>(M, N, K, c, s);
      row<1, 4, 1, 128, 4, true>(M, N, K, c, s);
    }
    for (int M : {16}) {
      row<2, 7, 1, 256, 3, true>(M, N, K, c, s);
      row<2, 7, 1, 256, 3, true, true>(M, N, K, c, s);
      row<2, 7, 1, 128, 6, true>(M, N, K, c, s);
      row<2, 4, 1, 128, 4, true>(M, N, K, c, s);
    }
    for (int M : {32}) {
      row<4, 7, 1, 128, 5, true>(M, N, K, c, s);
      row<4, 7, 1, 256, 2, true>(M, N, K, c, s);
    }
    for (int M : {64}) {
      row<8, 7, 1, 128, 4, true>(M, N, K, c, s);
      row<8, 7, 1, 64, 8, true>(M, N, K, c, s);
    }
  }
  if (bulk) {
    const int N = 4096, c = 14;
    std::printf("-- N = %d (hopper today: 10.95 us at M = 16, target 10.65; cuBLAS ~12.8)\n", N);
    row<1, 2, 1, 256, 6, false>(1, N, K, c, s);
    row<1, 1, 1, 256, 6, false>(1, N, K, c, s);
    row<1, 2, 1, 512, 4, false>(1, N, K, c, s);
    for (int M : {8}) {
      row<1, 2, 1, 256, 6, true>(M, N, K, c, s);
      row<1, 1, 1, 256, 6, true>(M, N, K, c, s);
    }
    for (int M : {16}) {
      row<2, 2, 1, 256, 6, true>(M, N, K, c, s);
      row<2, 1, 1, 256, 6, true>(M, N, K, c, s);
      row<2, 2, 1, 512, 4, true>(M, N, K, c, s);
    }
    for (int M : {64}) row<8, 2, 1, 128, 6, true>(M, N, K, c, s);
  }
  return 0;
}
