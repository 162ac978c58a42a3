// Probe (written in session 11, run in session 12 call 1: slower than tcgemv, not kept; docs/RESULTS.md): warp-specialized register streaming
// for decode. A block owns 16 rows of B (two octets) over all of K. PW producer warps only load: whole 128-byte lines
// into registers (tcgemv's order, D 64-k segments in flight a warp), then into a ring of SLOTS shared-memory slots
// (one slot: 16 rows x 64 k, 2 KB, stored swizzled). CW consumer warps only compute: each takes every CW-th slot,
// reads its fragments with conflict-free 16-byte shared loads and runs mma.sync with the weight as the A operand
// (16 rows x 16 k) and the tokens as B (8 a mma). full / empty mbarriers a slot hand the slots over.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o wsprobe tools/wsprobe.cu
// Why (docs/RESULTS.md, eleventh session): in every register-streaming kernel tried (tcgemv, tools/persist_probe.cu)
// the math costs about 2 us over the loop's own read ceiling at [8,4096]x[4096,14336], although it is a small share
// of the instructions: a warp that waits for its data and then computes issues its next loads late. Here the warps
// that load never compute. (cp.async stages, which also keep loads apart from math, read only 3.6-3.9 TB/s, tenth
// session; these are plain loads in the fast order, with the shared stores added.)
// Checked against a naive f32 kernel on random data; timed as `deepgemm bench` times (graph replay, B rotated past L2).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "probe_common.cuh"

constexpr int KDIM = 4096, SEGS = KDIM / 64;  // 64-k segments of a row
constexpr int SLOT_BYTES = 16 * 128;           // 16 rows x 64 k x 2 bytes

// Row r's chunk c (16 bytes, 8 k) of a slot lies at 16 * (c ^ (r % 8)) in the row's 128 bytes: the producers' stores
// (4 rows x 8 chunks a warp store) and the consumers' loads (lane (g, t): chunk t or t + 4 of rows g and g + 8) each
// touch every 16-byte bank group 4 times, the fewest for 512 bytes.
__device__ __forceinline__ uint32_t slot_at(uint32_t slot, int row, int chunk) {
  return slot + row * 128 + ((chunk ^ (row & 7)) << 4);
}
__device__ __forceinline__ void sts128(uint32_t addr, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr)
               : "memory");
  return v;
}

// TOK tokens (8 or 16: 1 or 2 mmas a weight fragment); PW / CW producer / consumer warps; D segments in flight a
// producer warp (registers: 16 D); SLOTS ring slots; MATH false: consumers only release the slots (the ceiling).
template <int TOK, int PW, int CW, int D, int SLOTS, int MINB, bool MATH = true>
__global__ void __launch_bounds__(32 * (PW + CW), MINB)
    wsgemv(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C, int M, int N) {
  static_assert(SEGS % PW == 0 && SEGS % CW == 0 && SLOTS % PW == 0 && SLOTS % CW == 0,
                "a slot's every use is one producer warp's and one consumer warp's, in order");
  static_assert((SEGS / PW) % D == 0, "a producer's segments are whole rounds of its D buffers");
  constexpr int K = KDIM, TH = TOK / 8, PITCH = TOK + 2;
  extern __shared__ __align__(128) unsigned char smem[];
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + SLOTS * SLOT_BYTES);
  uint64_t* const empty = full + SLOTS;
  float* const red = reinterpret_cast<float*>(empty + SLOTS);  // [CW][16 rows][PITCH]
  const uint32_t ring = smem_u32(smem);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n0 = blockIdx.x * 16;
  if (threadIdx.x == 0) {
    for (int r = 0; r < SLOTS; ++r) {
      mbar_init(&full[r], 32);   // the producer warp's lanes, after their stores
      mbar_init(&empty[r], 32);  // the consumer warp's lanes, after their loads
    }
  }
  __syncthreads();

  if (warp < PW) {
    // Producer p: segments p, p + PW, ... Lane 8q + e loads, for octet o, row 8o + 2q (chunk e) and 8o + 2q + 1
    // (chunk e ^ 4) of the block: whole 128-byte lines, four loads a segment.
    const int e = lane % 8, q = lane / 8;
    const __half* rows[2][2];
    int row_local[2][2], chunk[2][2];
#pragma unroll
    for (int o = 0; o < 2; ++o)
#pragma unroll
      for (int odd = 0; odd < 2; ++odd) {
        row_local[o][odd] = 8 * o + 2 * q + odd;
        chunk[o][odd] = odd ? e ^ 4 : e;
        rows[o][odd] = B + size_t(n0 + row_local[o][odd]) * K + 8 * chunk[o][odd];
      }
    uint4 w[D][2][2];
    const auto load = [&](uint4 (&v)[2][2], int seg) {
#pragma unroll
      for (int o = 0; o < 2; ++o)
#pragma unroll
        for (int odd = 0; odd < 2; ++odd) v[o][odd] = ld_stream(rows[o][odd] + 64 * seg);
    };
    constexpr int MINE = SEGS / PW;  // segments of this producer
#pragma unroll
    for (int d = 0; d < D; ++d) load(w[d], warp + d * PW);
#pragma unroll 1
    for (int i0 = 0; i0 < MINE; i0 += D) {
#pragma unroll
      for (int d = 0; d < D; ++d) {
        const int i = i0 + d, seg = warp + i * PW, r = seg % SLOTS, use = seg / SLOTS;
        mbar_wait(&empty[r], (use & 1) ^ 1);  // the slot's last use is read
        const uint32_t slot = ring + r * SLOT_BYTES;
#pragma unroll
        for (int o = 0; o < 2; ++o)
#pragma unroll
          for (int odd = 0; odd < 2; ++odd) sts128(slot_at(slot, row_local[o][odd], chunk[o][odd]), w[d][o][odd]);
        mbar_arrive(&full[r]);
        if (i + D < MINE) load(w[d], seg + D * PW);
      }
    }
  } else {
    // Consumer c: segments c, c + CW, ... Lane (g, t) reads chunks t and t + 4 of rows g and g + 8 (the mma's A:
    // 16 rows x 16 k, with k permuted the same way for the tokens), and token g's (+ 8h) same chunks as its B.
    const int c = warp - PW, g = lane / 4, t = lane % 4;
    const __half* x_row[TH];
#pragma unroll
    for (int h = 0; h < TH; ++h) x_row[h] = A + size_t(min(g + 8 * h, M - 1)) * K + 8 * t;  // past M: row M - 1
    float acc[TH][4] = {};
#pragma unroll 2
    for (int seg = c; seg < SEGS; seg += CW) {
      const int r = seg % SLOTS, use = seg / SLOTS;
      uint4 xk[TH], xo[TH];
#pragma unroll
      for (int h = 0; h < TH; ++h) {  // the activation through L1, issued before the wait
        xk[h] = __ldg(reinterpret_cast<const uint4*>(x_row[h] + 64 * seg));
        xo[h] = __ldg(reinterpret_cast<const uint4*>(x_row[h] + 64 * seg + 32));
      }
      mbar_wait(&full[r], use & 1);
      const uint32_t slot = ring + r * SLOT_BYTES;
      if (MATH) {
        const uint4 a0 = lds128(slot_at(slot, g, t)), a1 = lds128(slot_at(slot, g + 8, t));
        const uint4 b0 = lds128(slot_at(slot, g, t + 4)), b1 = lds128(slot_at(slot, g + 8, t + 4));
        mbar_arrive(&empty[r]);
#pragma unroll
        for (int h = 0; h < TH; ++h) {
          mma16816(acc[h], a0.x, a1.x, a0.y, a1.y, xk[h].x, xk[h].y);
          mma16816(acc[h], a0.z, a1.z, a0.w, a1.w, xk[h].z, xk[h].w);
          mma16816(acc[h], b0.x, b1.x, b0.y, b1.y, xo[h].x, xo[h].y);
          mma16816(acc[h], b0.z, b1.z, b0.w, b1.w, xo[h].z, xo[h].w);
        }
      } else {
        acc[0][0] += __uint_as_float(xk[0].x ^ xo[0].y);  // keeps the activation's loads
        mbar_arrive(&empty[r]);
      }
    }
    // acc[h] = {D[g][8h + 2t], D[g][8h + 2t + 1], D[g + 8][8h + 2t], D[g + 8][8h + 2t + 1]}, D[row][token].
    float* const mine = red + c * 16 * PITCH;
#pragma unroll
    for (int h = 0; h < TH; ++h) {
      *reinterpret_cast<float2*>(mine + g * PITCH + 8 * h + 2 * t) = make_float2(acc[h][0], acc[h][1]);
      *reinterpret_cast<float2*>(mine + (g + 8) * PITCH + 8 * h + 2 * t) = make_float2(acc[h][2], acc[h][3]);
    }
  }
  __syncthreads();
  // The consumers' partial tiles added in warp order (bit-identical run to run).
  for (int i = threadIdx.x; i < 16 * TOK; i += blockDim.x) {
    const int token = i / 16, row = i % 16;
    float sum = red[row * PITCH + token];
    for (int w = 1; w < CW; ++w) sum += red[(w * 16 + row) * PITCH + token];
    if (token < M) C[size_t(token) * N + n0 + row] = __float2half(sum);
  }
}

static __half *g_A, *g_B, *g_C;
static float* g_ref;

template <int TOK, int PW, int CW, int D, int SLOTS, int MINB, bool MATH = true>
static void row(int M, int N, int copies, cudaStream_t s) {
  auto* kern = wsgemv<TOK, PW, CW, D, SLOTS, MINB, MATH>;
  const int threads = 32 * (PW + CW), blocks = N / 16;
  const int smem = SLOTS * SLOT_BYTES + 2 * SLOTS * 8 + CW * 16 * (TOK + 2) * 4;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, threads, smem));
  const ProbeRun r = run_probe(kern, blocks, threads, smem, MATH, g_A, g_B, g_C, g_ref, M, N, KDIM, copies, s);
  std::printf("%-4s M=%2d N=%5d tok %2d  %d producer + %d consumer warps, %d segs in flight a producer, %2d slots  "
              "%4d blocks (%d an SM)  ",
              MATH ? "mma" : "read", M, N, TOK, PW, CW, D, SLOTS, blocks, per_sm);
  print_probe_result(r, N, KDIM);
}

int main(int argc, char** argv) {
  const int K = KDIM;
  cudaStream_t s;
  decode_data(K, 16, &g_A, &g_B, &g_C, &g_ref, &s);
  const std::string which = argc > 1 ? argv[1] : "first";
  for (int N : {14336, 4096}) {
    const int c = N == 14336 ? 4 : 14;
    std::printf("-- N = %d: read ceilings (consumers only release; target at N = 14336: 28.64 us)\n", N);
    for (int blocks : {264, 528}) print_read_ceiling(g_B, g_ref, N, KDIM, c, blocks, s);
    row<8, 4, 4, 4, 16, 2, false>(1, N, c, s);
    row<8, 2, 2, 4, 16, 3, false>(1, N, c, s);
    row<8, 4, 2, 2, 16, 3, false>(1, N, c, s);
    std::printf("-- N = %d, 8 tokens\n", N);
    for (int M : {8, 5}) {
      row<8, 4, 4, 4, 16, 2>(M, N, c, s);
      row<8, 2, 2, 4, 16, 3>(M, N, c, s);
      row<8, 4, 2, 2, 16, 3>(M, N, c, s);
      row<8, 2, 4, 8, 16, 2>(M, N, c, s);
      row<8, 8, 4, 2, 16, 1>(M, N, c, s);
      row<8, 4, 4, 4, 32, 2>(M, N, c, s);
    }
    std::printf("-- N = %d, 16 tokens\n", N);
    for (int M : {16, 12}) {
      row<16, 4, 4, 4, 16, 2>(M, N, c, s);
      row<16, 2, 2, 4, 16, 3>(M, N, c, s);
      row<16, 4, 4, 4, 32, 2>(M, N, c, s);
    }
  }
  return 0;
}
