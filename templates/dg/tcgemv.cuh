// dg/tcgemv.cuh — the `tcgemv` family: 2..16 rows of A (multi-token decode) times B on the tensor cores, B streamed
// once from memory into registers in whole 128-byte lines.
//
// C^T = B^T A^T on mma.sync.m16n8k16: the mma's A operand is TOKENS rows of A (the tokens; zero past M), its B operand
// 8 rows of B (8 columns of C, an "octet"). A block holds ROW_GROUPS groups of K_WARPS warps; a group owns 8 x OCTETS
// columns, and each of its warps streams them over its K slice of K_SLICE elements, UNROLL 64-k segments a round, two
// rounds in flight. The warps' partial tiles are added in a fixed order through shared memory: bit-identical results
// run to run, no workspace.
//
// Two variants, one kernel template each:
//   kernel<T>         every warp loads the activation through L1 with its round of the weight (a dependent launch);
//   staged_kernel<T>  TMA stages the activation's whole K in shared memory once a block (T::A_STAGED; 16 tokens).
//
// T is the traits type the generated code defines: the views (dg/view.cuh) with the types, sizes and store of the
// output, and the plan's parameters:
//   TOKENS (8 or 16), OCTETS, K_WARPS, UNROLL, ROW_GROUPS, THREADS, BN, K_SLICE, TILES_N, BLOCKS, RED_PITCH,
//   MIN_BLOCKS (the launch bound's blocks an SM), WHOLE_SEGMENTS (K is whole 64-k segments), WHOLE_BLOCKS (N is whole
//   blocks), A_STAGED; through L1: PREFETCH_ROUNDS (rounds of the weight prefetched into L2 before the wait; 0: none);
//   staged: ACT_BYTES, GROUP_SEGMENTS, BARRIERS, SMEM_ALIGN, SMEM_BYTES.
#pragma once

#include <atomic>
#include <cstdint>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mutex>
#include <type_traits>

#include "launch.cuh"
#include "ptx.cuh"
#include "reduce.cuh"
#include "view.cuh"

namespace dg {
namespace tcgemv {

constexpr int SEGMENT = 64;  // k elements of a row one pair of loads covers (a 128-byte line of f16/bf16)

// 16 bytes of the weight, streamed: read once, so it does not take L1's room from the activation. `Coherent` where
// the kernel prefetches lines of the weight before its wait for the previous grid: `.nc` loads after the wait may
// return those lines as the prefetch took them, not as that grid wrote them since; coherent ones read the writes the
// wait makes visible.
template <bool Coherent>
__device__ __forceinline__ uint4 load_stream(const void* p) {
  uint4 v;
  if constexpr (Coherent) {
    asm volatile("ld.global.L1::no_allocate.v4.u32 { %0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  } else {
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 { %0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  }
  return v;
}

// 16 bytes of the weight (the line that holds them) into L2 ahead of its load.
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }

__device__ __forceinline__ uint4 load_shared(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 { %0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}

// d += a (16 x 16, the tokens) * b (16 x 8, an octet of B's rows); E (f16 or bf16) inputs, f32 accumulators.
template <class E>
__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  static_assert(std::is_same<E, __half>::value || std::is_same<E, __nv_bfloat16>::value, "f16 or bf16 inputs");
  if constexpr (std::is_same<E, __half>::value) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 { %0, %1, %2, %3}, "
                 "{ %4, %5, %6, %7}, { %8, %9}, { %0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 { %0, %1, %2, %3}, "
                 "{ %4, %5, %6, %7}, { %8, %9}, { %0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ uint4 pick(bool first, uint4 a, uint4 b) {
  return make_uint4(first ? a.x : b.x, first ? a.y : b.y, first ? a.z : b.z, first ? a.w : b.w);
}

__device__ __forceinline__ uint4 swap_with_lane_xor_4(uint4 v) {
  return make_uint4(__shfl_xor_sync(0xffffffffu, v.x, 4), __shfl_xor_sync(0xffffffffu, v.y, 4),
                    __shfl_xor_sync(0xffffffffu, v.z, 4), __shfl_xor_sync(0xffffffffu, v.w, 4));
}

// One 64-k segment of an octet: lane (g, t) holds chunks t and t + 4 of weight row g once it keeps one of its two
// loads and swaps the other with lane ^ 4; tokens g (x0, x1) and g + 8 (y0, y1) at the same chunks pair with them.
template <class E>
__device__ __forceinline__ void mma_segment(float (&acc)[4], bool g_odd, uint4 even, uint4 odd, uint4 x0, uint4 x1,
                                            uint4 y0, uint4 y1) {
  const uint4 keep = pick(g_odd, odd, even);
  const uint4 other = swap_with_lane_xor_4(pick(g_odd, even, odd));
  mma16816<E>(acc, x0.x, y0.x, x0.y, y0.y, keep.x, keep.y);
  mma16816<E>(acc, x0.z, y0.z, x0.w, y0.w, keep.z, keep.w);
  mma16816<E>(acc, x1.x, y1.x, x1.y, y1.y, other.x, other.y);
  mma16816<E>(acc, x1.z, y1.z, x1.w, y1.w, other.z, other.w);
}

// The plan's layout, checked once for both variants.
template <class T>
__device__ __forceinline__ constexpr bool check_plan() {
  static_assert(T::TOKENS == 8 || T::TOKENS == 16, "an mma tile holds 8 tokens (rows 8..15 zero) or 16");
  static_assert(T::rows_at_run_time || T::M <= T::TOKENS, "the rows fit one mma tile");
  static_assert(T::THREADS == 32 * T::K_WARPS * T::ROW_GROUPS && T::BN == 8 * T::OCTETS * T::ROW_GROUPS,
                "a block: ROW_GROUPS groups of K_WARPS warps, each group OCTETS octets of columns");
  static_assert(T::K_SLICE % SEGMENT == 0, "a warp's slice is whole 64-k segments");
  static_assert(T::has_batch || T::TILES_N == T::BLOCKS, "one product: a block a column tile");
  static_assert(T::RED_PITCH >= T::BN, "a partial tile's row holds the block's columns");
  return true;
}

// acc[o] = {D[g][2t], D[g][2t + 1], D[g + 8][2t], D[g + 8][2t + 1]}, D[token][column of octet o]: each warp's partial
// tile at its `slot`, then the K_WARPS tiles added in order into the first (bit-identical run to run), then the store.
template <class T>
__device__ __forceinline__ void reduce_and_store(float* partial, const float (&acc)[T::OCTETS][4], int slot,
                                                 int column0, typename T::C_param* C, typename T::index_t M,
                                                 typename T::index_t n0, float alpha, float beta,
                                                 const typename T::Epilogue& ep) {
  constexpr int TOKENS = T::TOKENS, RED_PITCH = T::RED_PITCH, BN = T::BN;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  float* const mine = partial + slot * (TOKENS * RED_PITCH);
#pragma unroll
  for (int o = 0; o < T::OCTETS; ++o)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int token = g + 8 * (i >> 1);
      if (token < TOKENS) mine[token * RED_PITCH + column0 + 8 * o + 2 * t + (i & 1)] = acc[o][i];
    }
  __syncthreads();
  for (int i = threadIdx.x; i < TOKENS * BN; i += T::THREADS) {
    const int r = i / BN, c = i % BN;
    float s = partial[r * RED_PITCH + c];
    for (int w = 1; w < T::K_WARPS; ++w) s += partial[(w * TOKENS + r) * RED_PITCH + c];
    partial[r * RED_PITCH + c] = s;
  }
  store_partial_tile<T, TOKENS, BN, T::THREADS, 1, RED_PITCH>(partial, C, M, 0, n0, 0, alpha, beta, ep);
}

// The register-stream kernel: every warp loads its tokens' chunks of A through L1 with each round of the weight. At
// most the launch bound's registers a thread: MIN_BLOCKS blocks an SM keep two rounds of loads in flight each. `m`
// is M where the rows are a run-time size (T::rows_at_run_time), else unused.
template <class T>
__global__ void __launch_bounds__(T::THREADS, T::MIN_BLOCKS)
    kernel(const typename T::A_t* __restrict__ A, const typename T::B_t* __restrict__ B,
           typename T::C_param* __restrict__ C, typename T::index_t m, typename T::Epilogue ep, float alpha,
           float beta) {
  static_assert(check_plan<T>() && !T::A_STAGED && T::ROW_GROUPS == 1, "through L1 a block is one group");
  using index_t = typename T::index_t;
  using A_t = typename T::A_t;
  using B_t = typename T::B_t;
  using Av = typename T::A_view;
  using Bv = typename T::B_view;
  constexpr int TOKENS = T::TOKENS, OCTETS = T::OCTETS, UNROLL = T::UNROLL, K_SLICE = T::K_SLICE;
  constexpr int STEP = SEGMENT * UNROLL;  // k a round
  constexpr bool COHERENT = T::PREFETCH_ROUNDS > 0;
  const index_t M = T::rows_at_run_time ? m : T::M;
  __shared__ __align__(16) float partial[T::K_WARPS * TOKENS * T::RED_PITCH];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  index_t n0 = index_t(blockIdx.x) * T::BN;
  if constexpr (T::has_batch) {
    // Block -> (product of the batch, column tile), columns fastest; the views' pointers move to the product.
    n0 = index_t(blockIdx.x % T::TILES_N) * T::BN;
    const index_t batch = index_t(blockIdx.x / T::TILES_N);
    A += Av::batch::offset(batch);
    B += Bv::batch::offset(batch);
    C += T::C_view::batch::offset(batch);
    T::move_to_batch(ep, batch);
  }
  // The warp's K slice: [k0, k0 + k_len); empty for the last warps when K is short (they add zeros).
  const index_t k0 = min(index_t(warp) * K_SLICE, T::K);
  const int k_len = int(min(index_t(K_SLICE), T::K - k0));

  // Loads: lanes 8q..8q+7 read rows 2q and 2q + 1 of each octet (whole 128-byte lines of 64 k); lane e = lane % 8
  // takes chunk e of row 2q and chunk e ^ 4 of row 2q + 1. Lane (g, t) = (lane / 4, lane % 4) then keeps the
  // chunk t of its own row g (from the first load if g is even, else the second) and swaps the other with
  // lane ^ 4: it ends with chunks t and t + 4 of row g, the k its four mmas of the segment pair with.
  const int e = lane % 8, q = lane / 8, g = lane / 4, t = lane % 4;
  const bool g_odd = e >= 4;
  const int even_chunk = 8 * e, odd_chunk = 8 * (e ^ 4);
  const B_t* even_row[OCTETS];
  const B_t* odd_row[OCTETS];
  bool even_in[OCTETS], odd_in[OCTETS];  // rows past N read nothing (zeros); where N is whole blocks every row is in
#pragma unroll
  for (int o = 0; o < OCTETS; ++o) {
    const index_t n_even = n0 + 8 * o + 2 * q, n_odd = n_even + 1;
    even_in[o] = T::WHOLE_BLOCKS || n_even < T::N;
    odd_in[o] = T::WHOLE_BLOCKS || n_odd < T::N;
    even_row[o] = even_in[o] ? B + Bv::n::offset(n_even) + Bv::k::offset(k0) : B;
    odd_row[o] = odd_in[o] ? B + Bv::n::offset(n_odd) + Bv::k::offset(k0) : B;
  }
  if constexpr (T::PREFETCH_ROUNDS > 0) {
    // Before the wait for the previous grid: the warp's first rounds of the weight into L2, so that its stream starts
    // while that grid finishes. A prefetch returns nothing; the loads after the wait are coherent.
#pragma unroll
    for (int r = 0; r < T::PREFETCH_ROUNDS; ++r)
#pragma unroll
      for (int s = 0; s < UNROLL; ++s) {
        const int seg = r * STEP + SEGMENT * s;
#pragma unroll
        for (int o = 0; o < OCTETS; ++o) {
          if (even_in[o] && seg + even_chunk < k_len) prefetch_l2(even_row[o] + seg + even_chunk);
          if (odd_in[o] && seg + odd_chunk < k_len) prefetch_l2(odd_row[o] + seg + odd_chunk);
        }
      }
  }
  wait_for_predecessor();
  // The activation: lane (g, t) feeds tokens g and g + 8 (with 8 tokens, 8..15 are zero), chunks t and t + 4 of each
  // 64-k segment, through L1. A token past M reads row M - 1 instead: its products land in rows of the tile that are
  // never stored, and the loads need no per-lane predicate.
  constexpr int TOKEN_HALVES = TOKENS / 8;
  const A_t* x_row[TOKEN_HALVES];
#pragma unroll
  for (int h = 0; h < TOKEN_HALVES; ++h) {
    const index_t token = min(index_t(g + 8 * h), M - 1);
    x_row[h] = A + Av::m::offset(token) + Av::k::offset(k0);
  }

  uint4 wa[OCTETS][UNROLL][2], wb[OCTETS][UNROLL][2], xa[TOKEN_HALVES][UNROLL][2], xb[TOKEN_HALVES][UNROLL][2];
  // The loop streams the slice's whole 64-k segments, [0, k_whole); where K is not whole segments, the one warp whose
  // slice ends K inside a segment loads that segment after the loop, a lane's chunks each tested (a per-lane test on
  // every load of the loop needs more registers than the bound and spills).
  const int k_whole = T::WHOLE_SEGMENTS ? k_len : k_len / SEGMENT * SEGMENT;
  // One round at k offset kk of the slice: the activation's chunks first (L1 hits, not queued behind the weight's
  // misses), then the weight's. Segments past the whole ones and rows past N read nothing: zeros.
  const auto load = [&](uint4 (&w)[OCTETS][UNROLL][2], uint4 (&x)[TOKEN_HALVES][UNROLL][2], int kk) {
#pragma unroll
    for (int s = 0; s < UNROLL; ++s) {
      const int seg = kk + SEGMENT * s;
      const bool in = seg < k_whole;  // a whole segment or none, warp-wide
#pragma unroll
      for (int h = 0; h < TOKEN_HALVES; ++h) {
        x[h][s][0] = in ? __ldg(reinterpret_cast<const uint4*>(x_row[h] + seg + 8 * t)) : uint4{};
        x[h][s][1] = in ? __ldg(reinterpret_cast<const uint4*>(x_row[h] + seg + 8 * t + 32)) : uint4{};
      }
#pragma unroll
      for (int o = 0; o < OCTETS; ++o) {
        w[o][s][0] = even_in[o] && in ? load_stream<COHERENT>(even_row[o] + seg + even_chunk) : uint4{};
        w[o][s][1] = odd_in[o] && in ? load_stream<COHERENT>(odd_row[o] + seg + odd_chunk) : uint4{};
      }
    }
  };
  float acc[OCTETS][4];
#pragma unroll
  for (int o = 0; o < OCTETS; ++o) acc[o][0] = acc[o][1] = acc[o][2] = acc[o][3] = 0.0f;
  // The round's segments that start below `end`: k_whole in the loop, k_whole + 1 for the partial segment alone.
  const auto mma_round = [&](const uint4 (&w)[OCTETS][UNROLL][2], const uint4 (&x)[TOKEN_HALVES][UNROLL][2], int kk,
                             int end) {
#pragma unroll
    for (int s = 0; s < UNROLL; ++s) {
      if (kk + SEGMENT * s < end) {
        uint4 y0{}, y1{};  // tokens 8..15: none with 8 tokens
        if constexpr (TOKEN_HALVES == 2) y0 = x[TOKEN_HALVES - 1][s][0], y1 = x[TOKEN_HALVES - 1][s][1];
#pragma unroll
        for (int o = 0; o < OCTETS; ++o)
          mma_segment<B_t>(acc[o], g_odd, w[o][s][0], w[o][s][1], x[0][s][0], x[0][s][1], y0, y1);
      }
    }
  };

  // Two register buffers: one round's loads are in flight while the other's mmas run.
  load(wa, xa, 0);
#pragma unroll 1
  for (int kk = 0; kk < k_whole; kk += 2 * STEP) {
    load(wb, xb, kk + STEP);
    mma_round(wa, xa, kk, k_whole);
    load(wa, xa, kk + 2 * STEP);
    mma_round(wb, xb, kk + STEP, k_whole);
  }
  if constexpr (!T::WHOLE_SEGMENTS) {
    if (k_whole < k_len) {  // the partial segment, into the round's first; chunks past K read nothing: zeros
      const int seg = k_whole;
#pragma unroll
      for (int h = 0; h < TOKEN_HALVES; ++h) {
        xa[h][0][0] = seg + 8 * t < k_len ? __ldg(reinterpret_cast<const uint4*>(x_row[h] + seg + 8 * t)) : uint4{};
        xa[h][0][1] =
            seg + 8 * t + 32 < k_len ? __ldg(reinterpret_cast<const uint4*>(x_row[h] + seg + 8 * t + 32)) : uint4{};
      }
#pragma unroll
      for (int o = 0; o < OCTETS; ++o) {
        wa[o][0][0] = even_in[o] && seg + even_chunk < k_len ? load_stream<COHERENT>(even_row[o] + seg + even_chunk)
                                                             : uint4{};
        wa[o][0][1] = odd_in[o] && seg + odd_chunk < k_len ? load_stream<COHERENT>(odd_row[o] + seg + odd_chunk)
                                                           : uint4{};
      }
      mma_round(wa, xa, k_whole, k_whole + 1);
    }
  }
  // This thread's loads are done: the next kernel in the stream may be scheduled once every block got here or exited
  // (it waits for this grid to complete before it reads memory; a prefetching one prefetches meanwhile). Without the
  // prefetch the kernel never triggers: the next grid comes in as its blocks exit.
  if constexpr (T::PREFETCH_ROUNDS > 0) launch_dependents();

  reduce_and_store<T>(partial, acc, warp, 0, C, M, n0, alpha, beta, ep);
}

// The staged-activation kernel: A's TOKENS x K comes once a block by TMA into shared memory (box s holds the tokens of
// 64-k segment s, 128-byte swizzled: chunk c of 8 k of token r at s * BOX + (r / 8) * 1024 + (r % 8) * 128 +
// (c ^ (r % 8)) * 16), shared by the block's ROW_GROUPS groups. Each warp's slice completes in groups of
// GROUP_SEGMENTS segments, one mbarrier a group. One block an SM; `m` as in kernel<T>.
template <class T>
__global__ void __launch_bounds__(T::THREADS, T::MIN_BLOCKS)
    staged_kernel(const __grid_constant__ CUtensorMap map_a, const typename T::B_t* __restrict__ B,
                  typename T::C_param* __restrict__ C, typename T::index_t m, typename T::Epilogue ep, float alpha,
                  float beta) {
  using index_t = typename T::index_t;
  using B_t = typename T::B_t;
  using Bv = typename T::B_view;
  constexpr int TOKENS = T::TOKENS, OCTETS = T::OCTETS, UNROLL = T::UNROLL, K_SLICE = T::K_SLICE;
  constexpr int K_WARPS = T::K_WARPS, STEP = SEGMENT * UNROLL;
  constexpr int BOX = TOKENS * 128;
  constexpr int SEGMENTS = int(T::K) / SEGMENT, SLICE_SEGMENTS = K_SLICE / SEGMENT;
  constexpr int GROUP_SEGMENTS = T::GROUP_SEGMENTS, SLICE_GROUPS = SLICE_SEGMENTS / GROUP_SEGMENTS;
  constexpr int ACT_BYTES = T::ACT_BYTES, BARRIERS = T::BARRIERS, SMEM_ALIGN = T::SMEM_ALIGN;
  static_assert(check_plan<T>() && T::A_STAGED && !T::has_batch, "the staged activation is one product's");
  static_assert(TOKENS == 16, "the activation is staged at 16 tokens");
  static_assert(ACT_BYTES == BOX * SEGMENTS && BARRIERS == K_WARPS * SLICE_GROUPS, "the plan's layout");
  static_assert(T::WHOLE_SEGMENTS && T::K == K_WARPS * K_SLICE && K_SLICE % (2 * STEP) == 0,
                "every slice whole pairs of rounds: no guard");
  static_assert(GROUP_SEGMENTS % UNROLL == 0 && SLICE_SEGMENTS % GROUP_SEGMENTS == 0, "whole rounds a group");
  static_assert(SMEM_ALIGN + ACT_BYTES + 8 * BARRIERS + K_WARPS * TOKENS * T::RED_PITCH * 4 <= T::SMEM_BYTES, "room");
  const index_t M = T::rows_at_run_time ? m : T::M;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* const act = smem_raw + ((SMEM_ALIGN - (smem_u32(smem_raw) & (SMEM_ALIGN - 1))) & (SMEM_ALIGN - 1));
  uint64_t* const bars = reinterpret_cast<uint64_t*>(act + ACT_BYTES);
  float* const partial = reinterpret_cast<float*>(bars + BARRIERS);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = warp / K_WARPS, k_warp = warp % K_WARPS;  // the warp's columns and its K slice
  const index_t n0 = index_t(blockIdx.x) * T::BN;
  const index_t k0 = index_t(k_warp) * K_SLICE;  // the warp's K slice: [k0, k0 + K_SLICE)

  // A's TOKENS x K, staged once: thread 0 arms each group's mbarrier with its boxes' bytes (the zero fill past M
  // counts too) and issues the boxes, every slice's first group first: the order the warps need them.
  if (threadIdx.x == 0) {
    for (int j = 0; j < BARRIERS; ++j) mbar_init(&bars[j], 1);
    mbar_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 0; i < SLICE_GROUPS; ++i)
      for (int w = 0; w < K_WARPS; ++w) {
        const int first = w * SLICE_SEGMENTS + i * GROUP_SEGMENTS;
        uint64_t* const bar = &bars[w * SLICE_GROUPS + i];
        mbar_expect_tx(bar, GROUP_SEGMENTS * BOX);
        for (int s = first; s < first + GROUP_SEGMENTS; ++s) tma_load(act + s * BOX, &map_a, bar, s * SEGMENT, 0);
      }
  }
  // This warp's slice of the boxes and its groups' mbarriers; token g's line of a box (token g + 8: + 1024).
  const uint32_t act_line = smem_u32(act) + uint32_t(k0 / SEGMENT) * BOX + (lane / 4) * 128;
  uint64_t* const slice_bars = bars + k_warp * SLICE_GROUPS;

  // The weight's loads as in kernel<T>: lanes 8q..8q+7 read rows 2q and 2q + 1 of each octet of the group's columns.
  const int e = lane % 8, q = lane / 8, g = lane / 4, t = lane % 4;
  const bool g_odd = e >= 4;
  const int even_chunk = 8 * e, odd_chunk = 8 * (e ^ 4);
  const B_t* even_row[OCTETS];
  const B_t* odd_row[OCTETS];
  bool even_in[OCTETS], odd_in[OCTETS];  // rows past N read nothing (zeros); where N is whole blocks every row is in
#pragma unroll
  for (int o = 0; o < OCTETS; ++o) {
    const index_t n_even = n0 + 8 * OCTETS * group + 8 * o + 2 * q, n_odd = n_even + 1;
    even_in[o] = T::WHOLE_BLOCKS || n_even < T::N;
    odd_in[o] = T::WHOLE_BLOCKS || n_odd < T::N;
    even_row[o] = even_in[o] ? B + Bv::n::offset(n_even) + Bv::k::offset(k0) : B;
    odd_row[o] = odd_in[o] ? B + Bv::n::offset(n_odd) + Bv::k::offset(k0) : B;
  }
  // The activation: lane (g, t) feeds tokens g and g + 8, chunks t and t + 4 of each 64-k segment, read from the
  // staged boxes just before its mmas (chunk c of token g at (c ^ g) * 16 in its 128-byte line: a quarter warp's two
  // tokens share 4 bank groups, a 2-way conflict on 4 reads a segment; an order without it takes 16 selects and more
  // registers than the bound leaves).
  const uint32_t chunk_t = uint32_t(t ^ g) * 16, chunk_t4 = uint32_t((t + 4) ^ g) * 16;

  uint4 wa[OCTETS][UNROLL][2], wb[OCTETS][UNROLL][2];
#pragma unroll
  for (int o = 0; o < OCTETS; ++o) even_row[o] += even_chunk, odd_row[o] += odd_chunk;  // each load: whole segments on
  // One round of the weight at k offset kk of the slice (rows past N read nothing: zeros). Every warp's slice is
  // K_SLICE, whole pairs of rounds: no segment is past it.
  const auto load = [&](uint4 (&w)[OCTETS][UNROLL][2], int kk) {
#pragma unroll
    for (int s = 0; s < UNROLL; ++s) {
      const int seg = kk + SEGMENT * s;
#pragma unroll
      for (int o = 0; o < OCTETS; ++o) {
        w[o][s][0] = even_in[o] ? load_stream<false>(even_row[o] + seg) : uint4{};
        w[o][s][1] = odd_in[o] ? load_stream<false>(odd_row[o] + seg) : uint4{};
      }
    }
  };
  float acc[OCTETS][4];
#pragma unroll
  for (int o = 0; o < OCTETS; ++o) acc[o][0] = acc[o][1] = acc[o][2] = acc[o][3] = 0.0f;
  // A round's segments lie in one group of the slice (GROUP_SEGMENTS is a multiple of UNROLL): one wait a round.
  const auto mma_round = [&](const uint4 (&w)[OCTETS][UNROLL][2], int kk) {
    mbar_wait(&slice_bars[kk / SEGMENT / GROUP_SEGMENTS], 0);
#pragma unroll
    for (int s = 0; s < UNROLL; ++s) {
      const uint32_t box = act_line + uint32_t(kk / SEGMENT + s) * BOX;
      const uint4 x0 = load_shared(box + chunk_t), x1 = load_shared(box + chunk_t4);  // token g
      const uint4 y0 = load_shared(box + 1024 + chunk_t), y1 = load_shared(box + 1024 + chunk_t4);  // token g + 8
#pragma unroll
      for (int o = 0; o < OCTETS; ++o) mma_segment<B_t>(acc[o], g_odd, w[o][s][0], w[o][s][1], x0, x1, y0, y1);
    }
  };

  // Two register buffers: one round's loads are in flight while the other's mmas run.
  load(wa, 0);
#pragma unroll 1
  for (int kk = 0; kk < K_SLICE; kk += 2 * STEP) {
    load(wb, kk + STEP);
    mma_round(wa, kk);
    if (kk + 2 * STEP < K_SLICE) load(wa, kk + 2 * STEP);
    mma_round(wb, kk + STEP);
  }

  reduce_and_store<T>(partial, acc, k_warp, 8 * OCTETS * group, C, M, n0, alpha, beta, ep);
}

// The tensor map's element type of A.
template <class A_t>
constexpr CUtensorMapDataType tma_dtype() {
  static_assert(std::is_same<A_t, __half>::value || std::is_same<A_t, __nv_bfloat16>::value, "f16 or bf16 A");
  return std::is_same<A_t, __half>::value ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
}

// A's tensor map for staged_kernel<T>: [M tokens][K], boxes of TOKENS x 64 k, 128-byte swizzle, zero fill past M and K.
// It depends only on A's pointer and M: the last few keep theirs (a cache of T's own, behind a lock).
template <class T>
cudaError_t activation_map(const typename T::A_t* A, typename T::index_t M, CUtensorMap* map) {
  using Av = typename T::A_view;
  static_assert(Av::m::segments == 1 && Av::k::segments == 1 && Av::k::offset(1) == 1, "A: [M][K], K contiguous");
  constexpr unsigned long long row_bytes = (unsigned long long)Av::m::offset(1) * sizeof(typename T::A_t);
  struct Entry {
    const void* a = nullptr;
    typename T::index_t m = 0;
    CUtensorMap map;
  };
  constexpr int kSlots = 8;
  static std::mutex lock;
  static Entry cache[kSlots];
  static int next_slot = 0;
  std::lock_guard<std::mutex> guard(lock);
  for (const Entry& e : cache) {
    if (e.a == A && e.m == M) {
      *map = e.map;
      return cudaSuccess;
    }
  }
  if (const cudaError_t err = ready_to_encode(); err != cudaSuccess) return err;
  Entry& e = cache[next_slot];
  const cuuint64_t dims[2] = {cuuint64_t(T::K), cuuint64_t(M)};
  const cuuint64_t strides[1] = {row_bytes};  // bytes between A's rows
  const cuuint32_t box[2] = {SEGMENT, T::TOKENS}, unit[2] = {1, 1};
  if (encode_tiled()(&e.map, tma_dtype<typename T::A_t>(), 2, const_cast<typename T::A_t*>(A), dims, strides, box,
                     unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
    e.a = nullptr;
    return cudaErrorInvalidValue;
  }
  e.a = A;
  e.m = M;
  next_slot = (next_slot + 1) % kSlots;
  *map = e.map;
  return cudaSuccess;
}

// A, B and C point at the views' first elements; M is the rows (T::M where they are fixed). The register-stream
// kernel is a programmatic dependent launch; the staged one a plain launch with A's tensor map.
template <class T>
cudaError_t launch(const typename T::A_t* A, const typename T::B_t* B, typename T::C_param* C, typename T::index_t M,
                   typename T::Epilogue ep, float alpha, float beta, cudaStream_t stream) {
  if constexpr (T::A_STAGED) {
    auto* k = staged_kernel<T>;
    if constexpr (T::SMEM_BYTES > 48 * 1024) {
      static std::atomic<unsigned long long> attributes_set{0};  // bit d: set on device d
      const cudaError_t err = set_kernel_attributes(attributes_set, k, T::SMEM_BYTES, false);
      if (err != cudaSuccess) return err;
    }
    CUtensorMap map_a;
    const cudaError_t err = activation_map<T>(A, M, &map_a);
    if (err != cudaSuccess) return err;
    const LaunchShape shape{unsigned(T::BLOCKS), unsigned(T::THREADS), unsigned(T::SMEM_BYTES), false, 1};
    return dg::launch(k, shape, stream, map_a, B, C, M, ep, alpha, beta);
  } else {
    const LaunchShape shape{unsigned(T::BLOCKS), unsigned(T::THREADS), 0, true, 1};
    return dg::launch(kernel<T>, shape, stream, A, B, C, M, ep, alpha, beta);
  }
}

}  // namespace tcgemv
}  // namespace dg
