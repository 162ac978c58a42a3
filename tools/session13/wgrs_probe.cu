// Probe (session 13): the weight streamed through registers as tcgemv streams it (whole 128-byte lines, one
// shuffle), fed to wgmma as its A operand from registers (m64nTOKk16: 64 weight rows a warpgroup, 16 a warp), the
// activation staged by the warpgroup in shared memory as wgmma's B operand (no swizzle, k permuted to match the
// lanes' chunks). Why: tcgemv's mma.sync takes the activation from registers through L1, one copy a warp, which at 16
// tokens matches the weight's bytes (34.4 us at [16,4096]x[4096,14336] against 28.5 at 8 tokens, call 1); here one
// shared copy serves a warpgroup's 64 rows (a quarter of the weight's bytes at 16 tokens) and costs no registers.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I tools -o wgrs_probe tools/session13/wgrs_probe.cu
// C[M,N] = A[M,K] . B[N,K]^T (f16, f32 sums), M <= TOK, N a multiple of 64, K = 4096.
// Lane (g, t) = (lane / 4, lane % 4) ends with chunks t and t + 4 (16 bytes, 8 k each) of rows g and g + 8 of its
// warp's 16. wgmma's A fragment of k16-step j = 2h + l takes, in k-slots 2t, 2t + 1 and 8 + 2t, 8 + 2t + 1, the
// elements 32h + 8t + 4l + {0, 1} and + {2, 3} of the 64-k segment. The activation in shared memory follows: a 16-byte
// line (token n, step j, k-half kh) holds in word t the elements 32h + 8t + 4l + 2kh + {0, 1}; core matrices (8 tokens
// x 16 bytes) at ((j * 2 + kh) * NG + n / 8) * 128 bytes: LBO (along k) NG * 128, SBO (along tokens) 128.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "probe_common.cuh"

__device__ __forceinline__ uint64_t desc_noswizzle(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return uint64_t((addr & 0x3FFFF) >> 4) | uint64_t(lbo >> 4) << 16 | uint64_t(sbo >> 4) << 32;  // layout 0: none
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
__device__ __forceinline__ void keep_reg(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }
__device__ __forceinline__ void keep_acc(float& r) { asm volatile("" : "+f"(r)::"memory"); }

__device__ __forceinline__ void wgmma_rs(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint64_t desc_b) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, 1, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b));
}
__device__ __forceinline__ void wgmma_rs(float (&d)[8], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint64_t desc_b) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, 1, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b));
}
__device__ __forceinline__ void wgmma_rs(float (&d)[16], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint64_t desc_b) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, 1, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b));
}
__device__ __forceinline__ void wgmma_rs(float (&d)[32], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint64_t desc_b) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, 1, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b));
}
__device__ __forceinline__ void wgmma_rs(float (&d)[64], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint64_t desc_b) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, 1, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b));
}


// Block: KW warpgroups on the same 64 weight rows, each a K slice (summed in order through shared memory).
// Each warpgroup: U 64-k segments a round, two rounds of the weight in flight in registers; the activation of the
// next round staged (global -> registers -> shared, permuted) while this round's wgmmas run.
// LATE: the weight's registers are reloaded after the round's wgmmas completed (the fragments need no copy of
// their own: fewer registers, the next loads a little later).
template <int TOK, int KW, int U, int MINB, bool LATE = false>
__global__ void __launch_bounds__(128 * KW, MINB)
    wgrs(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C, int M, int N) {
  constexpr int K = 4096;  // the probes' K (run_probe's kernels take M and N)
  constexpr int NG = TOK / 8, SEG = TOK * 128, SLOT = U * SEG, NACC = TOK / 2;
  constexpr int XCHUNKS = U * TOK * 8 / 128;  // 16-byte activation chunks a thread stages a round
  static_assert(U * TOK * 8 % 128 == 0, "whole chunks a thread");
  extern __shared__ __align__(128) unsigned char smem[];
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128, warp = tid / 32, lane = threadIdx.x % 32;
  unsigned char* const slots = smem + wg * 2 * SLOT;
  const int e = lane % 8, q = lane / 8, g = lane / 4, t = lane % 4;
  const bool g_odd = e >= 4;
  const int k_slice = K / KW, k0 = wg * k_slice, rounds = k_slice / (64 * U);
  const int row0 = blockIdx.x * 64 + warp * 16;
  const __half* even_row[2];
  const __half* odd_row[2];
#pragma unroll
  for (int o = 0; o < 2; ++o) {
    even_row[o] = B + size_t(row0 + 8 * o + 2 * q) * K + k0 + 8 * e;
    odd_row[o] = B + size_t(row0 + 8 * o + 2 * q + 1) * K + k0 + 8 * (e ^ 4);
  }
  uint4 wa[U][2][2], wb[U][2][2];  // two rounds: [segment][octet][even / odd load]
  const auto load_w = [&](uint4 (&w)[U][2][2], int r) {
#pragma unroll
    for (int s = 0; s < U; ++s)
#pragma unroll
      for (int o = 0; o < 2; ++o) {
        const int kk = (r * U + s) * 64;
        w[s][o][0] = ld_stream(even_row[o] + kk);
        w[s][o][1] = ld_stream(odd_row[o] + kk);
      }
  };
  uint4 xa[XCHUNKS], xb[XCHUNKS];  // the activation of the next round and of the one after (from L2: a round ahead)
  const auto load_x = [&](uint4 (&x)[XCHUNKS], int r) {
#pragma unroll
    for (int i = 0; i < XCHUNKS; ++i) {
      const int idx = tid + 128 * i, c = idx % 8, n = (idx / 8) % TOK, s = idx / (8 * TOK);
      x[i] = n < M ? __ldg(reinterpret_cast<const uint4*>(A + size_t(n) * K + k0 + (r * U + s) * 64 + 8 * c))
                   : make_uint4(0, 0, 0, 0);
    }
  };
  const auto store_x = [&](const uint4 (&x)[XCHUNKS], int slot) {
#pragma unroll
    for (int i = 0; i < XCHUNKS; ++i) {
      const int idx = tid + 128 * i, c = idx % 8, n = (idx / 8) % TOK, s = idx / (8 * TOK);
      const int h = c / 4, tc = c % 4;
      unsigned char* const seg = slots + slot * SLOT + s * SEG + (n / 8) * 128 + (n % 8) * 16 + 4 * tc;
      const uint32_t words[4] = {x[i].x, x[i].y, x[i].z, x[i].w};
#pragma unroll
      for (int wi = 0; wi < 4; ++wi) {  // word wi = 2l + kh -> step j = 2h + l, k-half kh
        const int j = 2 * h + wi / 2, kh = wi % 2;
        *reinterpret_cast<uint32_t*>(seg + (j * 2 + kh) * NG * 128) = words[wi];
      }
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
  };
  float acc[NACC];
#pragma unroll
  for (int i = 0; i < NACC; ++i) acc[i] = 0.0f;
  const uint32_t slots_addr = smem_u32(slots);

  // One round: the activation of the round after next starts loading, this round's weight becomes wgmma fragments
  // and its registers take the round after next; then the wgmmas, and the next round's activation goes to the other
  // slot.
  // Before round r: its activation is in slot r % 2, round r + 1's in registers `next` (loaded during round r - 1).
  const auto step = [&](uint4 (&w)[U][2][2], uint4 (&next)[XCHUNKS], uint4 (&after)[XCHUNKS], int r) {
    if (r + 2 < rounds) load_x(after, r + 2);
    uint32_t a[U][4][4];
#pragma unroll
    for (int s = 0; s < U; ++s) {
      uint4 keep[2], other[2];
#pragma unroll
      for (int o = 0; o < 2; ++o) {
        keep[o] = sel(g_odd, w[s][o][1], w[s][o][0]);
        other[o] = shfl_xor4(sel(g_odd, w[s][o][0], w[s][o][1]));
      }
      a[s][0][0] = keep[0].x, a[s][0][1] = keep[1].x, a[s][0][2] = keep[0].y, a[s][0][3] = keep[1].y;
      a[s][1][0] = keep[0].z, a[s][1][1] = keep[1].z, a[s][1][2] = keep[0].w, a[s][1][3] = keep[1].w;
      a[s][2][0] = other[0].x, a[s][2][1] = other[1].x, a[s][2][2] = other[0].y, a[s][2][3] = other[1].y;
      a[s][3][0] = other[0].z, a[s][3][1] = other[1].z, a[s][3][2] = other[0].w, a[s][3][3] = other[1].w;
    }
    if (!LATE && r + 2 < rounds) load_w(w, r + 2);
    const uint32_t slot = slots_addr + (r % 2) * SLOT;
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < U; ++s)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        wgmma_rs(acc, a[s][j][0], a[s][j][1], a[s][j][2], a[s][j][3],
                 desc_noswizzle(slot + s * SEG + j * 2 * NG * 128, NG * 128, 128));
    wgmma_commit();
    wgmma_wait0();
#pragma unroll
    for (int i = 0; i < NACC; ++i) keep_acc(acc[i]);
#pragma unroll
    for (int s = 0; s < U; ++s)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) keep_reg(a[s][j][i]);
    if (LATE && r + 2 < rounds) load_w(w, r + 2);
    if (r + 1 < rounds) store_x(next, (r + 1) % 2);
  };
  load_w(wa, 0);
  load_w(wb, 1);
  load_x(xb, 0);
  store_x(xb, 0);
  load_x(xa, 1);
#pragma unroll 1
  for (int r = 0; r < rounds; r += 2) {  // rounds is even (K = 4096)
    step(wa, xa, xb, r);
    step(wb, xb, xa, r + 1);
  }
  // acc: row 16 warp + g (+ 8 for odd pairs), token 8i + 2t (+1): d[4i] (g, 8i+2t), d[4i+1] (g, 8i+2t+1),
  // d[4i+2] (g+8, 8i+2t), d[4i+3] (g+8, 8i+2t+1).
  __syncthreads();  // every warpgroup's wgmmas are done: the slots become the partial tiles [wg][token][64 rows]
  float* const red = reinterpret_cast<float*>(smem);
  constexpr int RP = 64 + 4;
#pragma unroll
  for (int i = 0; i < (NACC + 3) / 4; ++i)
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      const int row = warp * 16 + g + 8 * (v / 2), token = 8 * i + 2 * t + v % 2;
      red[(wg * TOK + token) * RP + row] = acc[4 * i + v];
    }
  __syncthreads();
  for (int i = threadIdx.x; i < M * 64; i += 128 * KW) {
    const int token = i / 64, row = i % 64;
    float sum = 0.0f;
    for (int w2 = 0; w2 < KW; ++w2) sum += red[(w2 * TOK + token) * RP + row];
    C[size_t(token) * N + blockIdx.x * 64 + row] = __float2half(sum);
  }
}

static __half *g_A, *g_B, *g_C;
static float* g_ref;

template <int TOK, int KW, int U, int MINB, bool LATE = false>
static void row(int M, int N, int K, int copies, cudaStream_t s) {
  auto* kern = wgrs<TOK, KW, U, MINB, LATE>;
  const int smem = std::max(KW * 2 * U * TOK * 128, KW * TOK * (64 + 4) * 4);
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, 128 * KW, smem));
  std::printf("wgrs M=%3d N=%5d TOK=%3d KW=%d U=%d minb=%d%s (%d blocks an SM, %5d B smem): ", M, N, TOK, KW, U, MINB, LATE ? " late" : "",
              per_sm, smem);
  const ProbeRun r = run_probe(kern, N / 64, 128 * KW, smem, true, g_A, g_B, g_C, g_ref, M, N, K, copies, s);
  print_probe_result(r, N, K);
}

int main(int argc, char** argv) {
  const int K = 4096;
  cudaStream_t s;
  decode_data(K, 128, &g_A, &g_B, &g_C, &g_ref, &s);
  for (int N : {14336}) {
    const int c = 4;
    std::printf("-- N = %d (call 2, same run: tcgemv 28.73 us at M = 8; hopper 30.56 at 16, 31.40 at 64)\n", N);
    row<8, 2, 2, 2>(8, N, K, c, s);
    row<8, 2, 2, 2, true>(8, N, K, c, s);
    row<16, 2, 2, 1>(16, N, K, c, s);
    row<16, 2, 2, 2>(16, N, K, c, s);
    row<16, 2, 2, 2, true>(16, N, K, c, s);
    row<16, 2, 1, 2>(16, N, K, c, s);
    row<16, 2, 1, 3, true>(16, N, K, c, s);
    row<16, 2, 3, 1, true>(16, N, K, c, s);
    row<32, 2, 2, 2, true>(32, N, K, c, s);
    row<32, 2, 1, 2, true>(32, N, K, c, s);
    row<64, 2, 1, 2, true>(64, N, K, c, s);
    row<64, 2, 2, 1, true>(64, N, K, c, s);
  }
  print_read_ceiling(g_B, g_ref, 14336, K, 4, 264, s);
  return 0;
}
