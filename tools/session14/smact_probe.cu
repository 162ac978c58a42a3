// Probe (session 14): tcgemv's weight stream (whole 128-byte lines into registers, one shuffle, mma.sync with the
// weight as the B operand and the tokens as A) with the activation read from shared memory, loaded there once a block
// by TMA; one block an SM covers 112 of N's rows, so the activation crosses L2 once an SM (16.8 MB for 128 blocks at
// 16 tokens) instead of once a 16 or 32 rows (117 MB in tcgemv's 2-warp blocks at 16 tokens).
// Why: every register-streamed design measured so far (tcgemv, the 4-octet variants, the persistent probe, wgrs) ran
// 2.5-3 us slower at 16 tokens than at 8 (31.2-31.5 against 28.5-28.8 us at [M,4096]x[4096,14336]); what grows with
// the tokens is the activation's L2 traffic and its registers. Here both stay small: a warp never holds more than one
// segment's activation, read just before its mmas (ld.shared, about 30 cycles).
// The persistent probe of session 11 also loaded the activation once an SM, but each warp owned 1/16 of K and the
// block summed its 16 warps' partial tiles every 16 rows (one barrier a slab); here a warp owns its rows over its
// whole K range (K / KS) and the block sums once, at the end.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I tools -o smact_probe tools/session14/smact_probe.cu
// C[M,N] = A[M,K] . B[N,K]^T (f16, f32 sums), M <= TOK, N a multiple of ROWS, K = 4096.
// Activation layout: TMA boxes of [TOK tokens][64 k] with the 128-byte swizzle, box j (64-k segment j) at j * TOK *
// 128 bytes: chunk c (8 k) of token r at (r / 8) * 1024 + (r % 8) * 128 + ((c ^ (r % 8)) * 16). Lane (g, t) reads
// chunks t and t + 4 of tokens g and g + 8; lanes with odd g read t + 4 first, so each quarter warp hits 8 distinct
// 16-byte bank groups.
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "probe_common.cuh"
#include "probe_tma.cuh"

constexpr int KDIM = 4096, SEGS_PER_GROUP = 8;  // one mbarrier a group of 8 segments (512 k)

__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr));
  return v;
}
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
               ::"r"(dst), "l"(map), "r"(smem_u32(bar)), "r"(c0), "r"(c1) : "memory");
}

// TOK tokens (8: the mma's rows 8..15 take zeros; 16), OCT octets (8 rows) a warp, KS warps splitting K for the same
// rows, W warps a block (W / KS row groups: ROWS = W / KS * OCT * 8 rows a block), SEGS 64-k segments a round, NBUF
// register buffers (NBUF - 1 rounds in flight while one's math runs), MATH false: the loads alone.
// EARLY: a segment's buffer is reloaded (NBUF rounds ahead) as soon as its fragments are built, before its mmas (else
// the next round's loads wait behind this round's mma chains); CH accumulator chains an octet (1, 2, 4: a segment's
// 4 mmas of an octet spread over them), added at the end. PROD: one more warp issues the TMA loads (else thread 0
// does, and its warp starts its weight stream after 64 TMA issues); MINB blocks an SM. CPA: the activation staged
// by every compute thread with 16-byte cp.async copies into the same swizzled layout, each thread's copies of a group
// tracked by the group's mbarrier (cp.async.mbarrier.arrive.noinc; no tensor map, any k-contiguous A view); tokens
// past M copy row M - 1 (their products land in rows never stored).
template <int TOK, int OCT, int KS, int W, int SEGS, int NBUF, bool MATH = true, bool EARLY = false, int CH = 1,
          bool PROD = false, int MINB = 1, bool CPA = false>
__global__ void __launch_bounds__(32 * (W + PROD), MINB)
    smact(const __grid_constant__ CUtensorMap amap, const __half* __restrict__ A, const __half* __restrict__ B,
          __half* __restrict__ C, int M, int N) {
  constexpr int K = KDIM, RG = W / KS, ROWS = RG * OCT * 8, BOX = TOK * 128, KSEGS = K / 64 / KS;
  constexpr int ROUNDS = KSEGS / SEGS, GROUPS = K / 64 / SEGS_PER_GROUP;
  static_assert(W % KS == 0 && KSEGS % SEGS == 0 && SEGS_PER_GROUP % SEGS == 0, "whole rounds, a round in one group");
  extern __shared__ __align__(1024) unsigned char raw[];
  unsigned char* const act = raw + ((1024 - (smem_u32(raw) & 1023)) & 1023);
  uint64_t* const bars = reinterpret_cast<uint64_t*>(act + TOK * K * 2);
  float* const red = reinterpret_cast<float*>(bars + GROUPS);  // [RG][OCT][TOK][8] partials of ks = 1..KS-1
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int e = lane % 8, q = lane / 8, g = lane / 4, t = lane % 4;
  const bool g_odd = e >= 4;
  const int rg = warp % RG, ks = warp / RG;
  const int row0 = blockIdx.x * ROWS + rg * OCT * 8, k0 = ks * (K / KS);

  if (threadIdx.x == 0) {
    for (int i = 0; i < GROUPS; ++i) mbar_init(&bars[i], CPA ? 32 * W : 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (CPA && threadIdx.x < 32 * W) {
    constexpr int PER = GROUPS / KS, CHUNKS = TOK * SEGS_PER_GROUP * 8;  // 16-byte chunks a group
    for (int i = 0; i < PER; ++i)
#pragma unroll
      for (int s = 0; s < KS; ++s) {
        const int grp = s * PER + i;
        for (int c = threadIdx.x; c < CHUNKS; c += 32 * W) {
          const int chunk = c % 8, r = (c / 8) % TOK, seg = grp * SEGS_PER_GROUP + c / (8 * TOK);
          const __half* src = A + size_t(min(r, M - 1)) * K + seg * 64 + chunk * 8;
          const uint32_t dst = smem_u32(act + seg * BOX + (r / 8) * 1024 + (r % 8) * 128 + ((chunk ^ (r % 8)) * 16));
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
        }
        asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(&bars[grp])) : "memory");
      }
  }
  const bool issuer = !CPA && (PROD ? threadIdx.x == 32 * W : threadIdx.x == 0);
  if (issuer) {  // groups in the order the K slices reach them: slice 0's first, slice 1's first, ...
    constexpr int PER = GROUPS / KS;
    for (int i = 0; i < PER; ++i)
      for (int s = 0; s < KS; ++s) {
        const int grp = s * PER + i;
        mbar_expect_tx(&bars[grp], SEGS_PER_GROUP * BOX);
        for (int j = 0; j < SEGS_PER_GROUP; ++j) {
          const int seg = grp * SEGS_PER_GROUP + j;
          tma_load_2d(smem_u32(act + seg * BOX), &amap, &bars[grp], seg * 64, 0);
        }
      }
  }

  if (PROD && warp == W) return;  // the producer warp: its loads are issued
  const __half* even_row[OCT];
  const __half* odd_row[OCT];
#pragma unroll
  for (int o = 0; o < OCT; ++o) {
    even_row[o] = B + size_t(row0 + 8 * o + 2 * q) * K + k0 + 8 * e;
    odd_row[o] = B + size_t(row0 + 8 * o + 2 * q + 1) * K + k0 + 8 * (e ^ 4);
  }
  uint4 wbuf[NBUF][SEGS][OCT][2];
  const auto load = [&](uint4 (&w)[SEGS][OCT][2], int r) {
#pragma unroll
    for (int s = 0; s < SEGS; ++s)
#pragma unroll
      for (int o = 0; o < OCT; ++o) {
        const int kk = (r * SEGS + s) * 64;
        w[s][o][0] = ld_stream(even_row[o] + kk);
        w[s][o][1] = ld_stream(odd_row[o] + kk);
      }
  };
  float acc[OCT][CH][4] = {};
  uint32_t sink = 0;
  const uint32_t act_addr = smem_u32(act);
  const int c_first = t + 4 * (g & 1);  // odd g: chunk t + 4 first (bank groups, header)
  const auto math = [&](uint4 (&w)[SEGS][OCT][2], int r) {
    const int seg0 = (k0 / 64) + r * SEGS;
    if (MATH) mbar_wait(&bars[seg0 / SEGS_PER_GROUP], 0);
#pragma unroll
    for (int s = 0; s < SEGS; ++s) {
      if (!MATH) {
#pragma unroll
        for (int o = 0; o < OCT; ++o)
#pragma unroll
          for (int l = 0; l < 2; ++l) sink ^= w[s][o][l].x ^ w[s][o][l].y ^ w[s][o][l].z ^ w[s][o][l].w;
        continue;
      }
      const uint32_t box = act_addr + (seg0 + s) * BOX;
      uint4 xt[2], xf[2];  // chunks t and t + 4 of tokens g and g + 8
#pragma unroll
      for (int h = 0; h < TOK / 8; ++h) {
        const uint32_t line = box + h * 1024 + g * 128;
        const uint4 first = lds128(line + ((c_first ^ g) * 16)), second = lds128(line + (((c_first ^ 4) ^ g) * 16));
        xt[h] = sel(g & 1, second, first);
        xf[h] = sel(g & 1, first, second);
      }
      if (TOK == 8) xt[1] = xf[1] = make_uint4(0, 0, 0, 0);
      uint4 keep[OCT], other[OCT];
#pragma unroll
      for (int o = 0; o < OCT; ++o) {
        keep[o] = sel(g_odd, w[s][o][1], w[s][o][0]);             // chunk t of row 8o + g
        other[o] = shfl_xor4(sel(g_odd, w[s][o][0], w[s][o][1]));  // chunk t + 4 of row 8o + g
      }
      if (EARLY && r + NBUF < ROUNDS)
#pragma unroll
        for (int o = 0; o < OCT; ++o) {
          const int kk = ((r + NBUF) * SEGS + s) * 64;
          w[s][o][0] = ld_stream(even_row[o] + kk);
          w[s][o][1] = ld_stream(odd_row[o] + kk);
        }
#pragma unroll
      for (int o = 0; o < OCT; ++o) {
        mma16816(acc[o][0], xt[0].x, xt[1].x, xt[0].y, xt[1].y, keep[o].x, keep[o].y);
        mma16816(acc[o][1 % CH], xt[0].z, xt[1].z, xt[0].w, xt[1].w, keep[o].z, keep[o].w);
        mma16816(acc[o][2 % CH], xf[0].x, xf[1].x, xf[0].y, xf[1].y, other[o].x, other[o].y);
        mma16816(acc[o][3 % CH], xf[0].z, xf[1].z, xf[0].w, xf[1].w, other[o].z, other[o].w);
      }
    }
  };
  constexpr int AHEAD = EARLY ? NBUF : NBUF - 1;  // rounds loaded before the first math
#pragma unroll
  for (int d = 0; d < AHEAD; ++d) load(wbuf[d], d);
#pragma unroll 1
  for (int r = 0; r < ROUNDS; r += NBUF) {
#pragma unroll
    for (int i = 0; i < NBUF; ++i) {
      const int rr = r + i;
      if (rr < ROUNDS) {
        if (!EARLY && rr + NBUF - 1 < ROUNDS) load(wbuf[(i + NBUF - 1) % NBUF], rr + NBUF - 1);
        math(wbuf[i], rr);
      }
    }
  }
#pragma unroll
  for (int o = 0; o < OCT; ++o)
#pragma unroll
    for (int c = 1; c < CH; ++c)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[o][0][i] += acc[o][c][i];
  if (!MATH) {
    if (sink == 0x12345678u) C[0] = __float2half(1.0f);
    return;
  }
  // acc[o] = {D[g][2t], D[g][2t + 1], D[g + 8][2t], D[g + 8][2t + 1]}: D[token][row 8o + .]. The K slices' partials
  // are added in slice order (bit-identical run to run).
  if (KS > 1) {
    if (ks > 0)
#pragma unroll
      for (int o = 0; o < OCT; ++o) {
        float* const p = red + (((ks - 1) * RG + rg) * OCT + o) * TOK * 8;
        *reinterpret_cast<float2*>(p + g * 8 + 2 * t) = make_float2(acc[o][0][0], acc[o][0][1]);
        if (TOK == 16) *reinterpret_cast<float2*>(p + (g + 8) * 8 + 2 * t) = make_float2(acc[o][0][2], acc[o][0][3]);
      }
    asm volatile("bar.sync 1, %0;\n" ::"n"(32 * W) : "memory");  // the compute warps (not the producer)
    if (ks > 0) return;
#pragma unroll
    for (int o = 0; o < OCT; ++o)
      for (int s = 1; s < KS; ++s) {
        const float* const p = red + (((s - 1) * RG + rg) * OCT + o) * TOK * 8;
        const float2 lo = *reinterpret_cast<const float2*>(p + g * 8 + 2 * t);
        acc[o][0][0] += lo.x, acc[o][0][1] += lo.y;
        if (TOK == 16) {
          const float2 hi = *reinterpret_cast<const float2*>(p + (g + 8) * 8 + 2 * t);
          acc[o][0][2] += hi.x, acc[o][0][3] += hi.y;
        }
      }
  }
#pragma unroll
  for (int o = 0; o < OCT; ++o) {
    const int n = row0 + 8 * o + 2 * t;
    if (g < M) *reinterpret_cast<__half2*>(C + size_t(g) * N + n) = __floats2half2_rn(acc[o][0][0], acc[o][0][1]);
    if (TOK == 16 && g + 8 < M)
      *reinterpret_cast<__half2*>(C + size_t(g + 8) * N + n) = __floats2half2_rn(acc[o][0][2], acc[o][0][3]);
  }
}

// The activation's map: [M tokens][K], boxes of [TOK][64] (tokens past M: TMA's zero fill).
static CUtensorMap act_map(const __half* A, int M, int K, int tok) {
  static const Encode encode = encoder();
  CUtensorMap m;
  const cuuint64_t dims[2] = {cuuint64_t(K), cuuint64_t(M)}, strides[1] = {cuuint64_t(K) * 2};
  const cuuint32_t box[2] = {64, cuuint32_t(tok)}, estr[2] = {1, 1};
  if (encode(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, const_cast<__half*>(A), dims, strides, box, estr,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
    std::printf("tensor map failed\n");
    std::exit(1);
  }
  return m;
}

static __half *g_A, *g_B, *g_C;
static __half* g_A_copies = nullptr;  // ROTATE_A: PROBE_COPIES more copies of A, one a launch (as deepgemm bench rotates it)
static bool g_rotate_a = false;
static float* g_ref;

template <int TOK, int OCT, int KS, int W, int SEGS, int NBUF, bool MATH = true, bool EARLY = false, int CH = 1,
          bool PROD = false, int MINB = 1, bool CPA = false>
static void row(int M, int N, int copies, cudaStream_t s) {
  auto* kern = smact<TOK, OCT, KS, W, SEGS, NBUF, MATH, EARLY, CH, PROD, MINB, CPA>;
  constexpr int ROWS = W / KS * OCT * 8;
  const int smem = 1024 + TOK * KDIM * 2 + KDIM / 64 / SEGS_PER_GROUP * 8 + (KS - 1) * ROWS * TOK * 4;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const CUtensorMap amap = act_map(g_A, M, KDIM, TOK);
  CUtensorMap amaps[PROBE_COPIES];
  for (int c = 0; c < PROBE_COPIES; ++c) amaps[c] = act_map(g_A_copies + size_t(c) * 16 * KDIM, M, KDIM, TOK);
  const int blocks = N / ROWS, threads = 32 * (W + PROD), K = KDIM;
  ProbeRun r{};
  if (MATH)
    r.worst = checked_error(g_A, g_B, g_C, g_ref, M, N, K, s, [&] { kern<<<blocks, threads, smem, s>>>(amap, g_A, g_B, g_C, M, N); });
  r.us = graph_median_us(s, 8 * copies, [&](int l) {
    kern<<<blocks, threads, smem, s>>>(g_rotate_a ? amaps[l % PROBE_COPIES] : amap, g_A, g_B + (l % copies) * size_t(N) * K,
                                       g_C, M, N);
  });
  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, kern));
  r.regs = fa.numRegs, r.stack = int(fa.localSizeBytes);
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, threads, smem));
  std::printf("%-4s M=%2d N=%5d tok %2d  oct %d  ks %d  %2d%s warps  %d segs x %d bufs%s ch %d  %s  %4d blocks of %3d rows (%d an SM)  ",
              MATH ? "mma" : "read", M, N, TOK, OCT, KS, W, PROD ? "+1" : "  ", SEGS, NBUF, EARLY ? " early" : "      ", CH,
              CPA ? "cp.async" : g_rotate_a ? "TMA, A rotated" : "TMA     ", blocks, ROWS, per_sm);
  print_probe_result(r, N, K);
}

int main(int argc, char** argv) {
  cudaStream_t s;
  decode_data(KDIM, 16, &g_A, &g_B, &g_C, &g_ref, &s);
  const int N = 14336, c = 4;
  std::printf("-- N = %d, read ceilings (4.1 TB/s: 28.64 us)\n", N);
  for (int blocks : {132, 264}) print_read_ceiling(g_B, g_ref, N, KDIM, c, blocks, s);
  row<16, 2, 2, 14, 2, 2, false>(16, N, c, s);
  row<16, 2, 2, 14, 2, 2, false, false, 1, true>(16, N, c, s);
  CK(cudaMalloc(&g_A_copies, size_t(PROBE_COPIES) * 16 * KDIM * 2));
  for (int c = 0; c < PROBE_COPIES; ++c)
    CK(cudaMemcpy(g_A_copies + size_t(c) * 16 * KDIM, g_A, size_t(16) * KDIM * 2, cudaMemcpyDeviceToDevice));
  for (int M : {16, 8}) {
    std::printf("-- N = %d, M = %d: A in L2, then A rotated over %d copies\n", N, M, PROBE_COPIES);
    for (bool rot : {false, true}) {
      g_rotate_a = rot;
      if (M > 8)
        row<16, 2, 2, 14, 2, 2>(M, N, c, s);
      else
        row<8, 2, 2, 14, 2, 2>(M, N, c, s);
    }
  }
  g_rotate_a = false;
  return 0;
}
