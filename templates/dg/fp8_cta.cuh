// dg/fp8_cta.cuh — the `fp8_cta` family: e4m3 A and B with f32 scales on the tensor cores through mma.sync
// m16n8k32 (sm_89 and later), a block tile of C for any strided view.
//
// The cta family's tile (dg/cta.cuh): a BM x BN tile of C a block, k-tiles of BK through a multi-stage shared-memory
// pipeline, its loaders (cp.async of up to 16 bytes along k, or a strided gather), its tile order and its store. 8-bit
// mma reads both operands K-major, so both shared tiles are [rows][k] whatever the views' layouts: a view that is not
// k-contiguous reaches them through the gather, its lanes along the view's contiguous role (AlongRows).
//
// Promotion: each k-tile (at most 128 k) is summed on the tensor core into accumulators of its own, then added on
// the CUDA cores into f32 accumulators, times that k-tile's scales where they vary along k. The FP8 tensor core keeps
// only about 14 bits of a running sum; the f32 add keeps the rest. The plan makes every scale constant over a k-tile.
// Scales constant along k multiply the f32 accumulators once, before the store.
//
// T is the traits type the generated code defines: dg/cta.cuh's list with MMA = true and A_K_INNER = B_K_INNER =
// true, and one struct a scale view, A_scales and B_scales, each with its roles (batch, m or n, k) as ScaleRoles and
// K_VARYING (whether the scale changes along k).
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "cta.cuh"

namespace dg {
namespace fp8_cta {

// One letter of a role as a scale view sees it: `Size` indices, one scale per `Block` of them, `Stride` elements
// apart in the scale view (0: the view lacks the letter, or one scale covers all of it).
template <long long Size, long long Block, long long Stride>
struct ScaleSeg {
  static constexpr long long size = Size;
  static constexpr long long block = Block;
  static constexpr long long stride = Stride;
};

// A role's flat index -> the scale view's element offset; one ScaleSeg a letter of the role, innermost first.
template <class I, class... Segs>
struct ScaleRole;

template <class I>
struct ScaleRole<I> {
  __host__ __device__ static constexpr I offset(I) { return I(0); }
};

template <class I, class S, class... Outer>
struct ScaleRole<I, S, Outer...> {
  __host__ __device__ static constexpr I offset(I i) {
    const I here = S::stride == 0 ? I(0) : ((sizeof...(Outer) ? i % I(S::size) : i) / I(S::block)) * I(S::stride);
    if constexpr (sizeof...(Outer) == 0) {
      return here;
    } else {
      return here + ScaleRole<I, Outer...>::offset(i / I(S::size));
    }
  }
};

// D += A * B for one m16n8k32 tile of e4m3 inputs, f32 accumulators.
__device__ __forceinline__ void mma_m16n8k32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
      "{ %0, %1, %2, %3}, { %4, %5, %6, %7}, { %8, %9}, { %0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();  // the planner targets e4m3 at sm_89 and later only
#endif
}

// Warp (wm, wn) owns a WM x WN piece of the block tile, MI x NI mma tiles of 16 x 8. From [rows][k] bytes, ldmatrix
// (b16) hands lane (g = lane/4, q = lane%4) bytes 4q..4q+3 of row g of each 8 x 16-byte matrix: the e4m3 fragment of
// m16n8k32, whose registers hold 4 consecutive k of one row (A) or column (B).
template <class T>
struct Math {
  static_assert(T::MMA && T::A_K_INNER && T::B_K_INNER, "8-bit mma reads both operands K-major");
  static constexpr int WM = T::BM / T::WARPS_M, WN = T::BN / T::WARPS_N;
  static constexpr int MI = WM / 16, NI = WN / 8;
  static_assert(WM % 16 == 0 && WN % 16 == 0 && T::BK % 32 == 0, "whole m16 rows, n16 columns and k32 steps");
  static constexpr int A_PITCH = cta::Tile<T, cta::Operand::A>::PITCH, B_PITCH = cta::Tile<T, cta::Operand::B>::PITCH;
  using Acc = float[MI][NI][4];
  int warp_m0, warp_n0;

  __device__ __forceinline__ Math() {
    const int warp = threadIdx.x / 32;
    warp_m0 = (warp / T::WARPS_N) * WM;
    warp_n0 = (warp % T::WARPS_N) * WN;
  }

  // One k-tile into `part`, which it overwrites: the first k32 step multiplies onto zeros.
  __device__ __forceinline__ void compute_tile(const typename T::A_t* As, const typename T::B_t* Bs, Acc& part) const {
    const int lane = threadIdx.x % 32, j = lane / 8, r = lane % 8;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) part[mi][ni][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < T::BK; kk += 32) {
      uint32_t a[MI][4];
      uint32_t b[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        // Matrix j: rows (j % 2) * 8 .. + 7 of the m16 tile, k bytes (j / 2) * 16 .. + 15.
        const auto* p = As + (warp_m0 + mi * 16 + (j % 2) * 8 + r) * A_PITCH + kk + (j / 2) * 16;
        cta::ldmatrix_x4<false>(a[mi][0], a[mi][1], a[mi][2], a[mi][3], p);
      }
#pragma unroll
      for (int nj = 0; nj < NI / 2; ++nj) {
        // One x4 load feeds two n8 tiles: matrix j is (n half j / 2, k half j % 2).
        const auto* p = Bs + (warp_n0 + nj * 16 + (j / 2) * 8 + r) * B_PITCH + kk + (j % 2) * 16;
        cta::ldmatrix_x4<false>(b[2 * nj][0], b[2 * nj][1], b[2 * nj + 1][0], b[2 * nj + 1][1], p);
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) mma_m16n8k32(part[mi][ni], a[mi], b[ni][0], b[ni][1]);
    }
  }

  // The block-tile rows and columns of this thread's accumulators: acc[mi][ni][e] is at row(mi, e / 2), col(ni, e % 2).
  __device__ __forceinline__ int row(int mi, int h) const { return warp_m0 + mi * 16 + (threadIdx.x % 32) / 4 + 8 * h; }
  __device__ __forceinline__ int col(int ni, int h) const { return warp_n0 + ni * 8 + 2 * (threadIdx.x % 4) + h; }
};

// The scales of one operand for this thread's MN rows (columns) of the tile: their offsets in the scale view (the
// batch's and the rows' parts) and the values of the current k-tile.
template <class T, class S, int MN>
struct ScaleRows {
  using index_t = typename T::index_t;
  index_t at[MN][2];
  float v[MN][2];

  // `first(i, h)`: the tile's row (column) i, h; rows past the view's last (a tile's tail) read its last row's scale,
  // whose product is never stored.
  template <class First>
  __device__ __forceinline__ void locate(index_t base, index_t origin, index_t last, First first) {
#pragma unroll
    for (int i = 0; i < MN; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const index_t x = origin + first(i, h);
        at[i][h] = base + S::mn::offset(x < last ? x : last);
      }
  }

  __device__ __forceinline__ void load(const float* __restrict__ scales, index_t k) {
    const index_t kk = S::k::offset(k);
#pragma unroll
    for (int i = 0; i < MN; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) v[i][h] = __ldg(scales + at[i][h] + kk);
  }
};

struct Scales {
  const float* a;  // A_scales and B_scales at their views' first elements
  const float* b;
};

// M: the rows (T::M unless T::rows_at_run_time).
template <class T, class LoadA, class LoadB>
__global__ void __launch_bounds__(T::THREADS, (cta::min_blocks<T, LoadA, LoadB>()))
    kernel(const typename T::A_t* __restrict__ A, const typename T::B_t* __restrict__ B,
           typename T::C_param* __restrict__ C, typename T::index_t M_arg, typename T::Epilogue ep, Scales scales,
           float alpha, float beta) {
  using A_t = typename T::A_t;
  using B_t = typename T::B_t;
  using index_t = typename T::index_t;
  using SA = typename T::A_scales;
  using SB = typename T::B_scales;
  using M8 = Math<T>;
  constexpr int STAGES = T::STAGES, A_TILE = cta::Shape<T>::A_ELEMS, B_TILE = cta::Shape<T>::B_ELEMS;
  constexpr int K_TILES = cta::Shape<T>::K_TILES;
  constexpr bool ASYNC = LoadA::kAsync || LoadB::kAsync;
  const index_t M = T::rows_at_run_time ? M_arg : T::M;
  (void)T::c_along_m;  // stores go element-wise from the accumulators' layout, whatever C's contiguous role
  extern __shared__ __align__(16) unsigned char smem[];
  A_t* const As = reinterpret_cast<A_t*>(smem);
  B_t* const Bs = reinterpret_cast<B_t*>(smem + STAGES * A_TILE * sizeof(A_t));
  const index_t batch = index_t(blockIdx.x) / (index_t(cta::Shape<T>::TILES_N) * cta::Shape<T>::tiles_m(M));
  const cta::TileOrigin<T> t = cta::tile_origin<T>(blockIdx.x, M, A, B, C, ep);
  const M8 math;

  ScaleRows<T, SA, M8::MI> sa;
  ScaleRows<T, SB, M8::NI> sb;
  sa.locate(SA::batch::offset(batch), t.m0, M - 1, [&](int i, int h) { return math.row(i, h); });
  sb.locate(SB::batch::offset(batch), t.n0, index_t(T::N) - 1, [&](int i, int h) { return math.col(i, h); });

  typename M8::Acc acc, part;
#pragma unroll
  for (int mi = 0; mi < M8::MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < M8::NI; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.0f;

  LoadA load_a;
  LoadB load_b;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < K_TILES) {
      load_a.issue(As + s * A_TILE, A, t.m0, s, M);
      load_b.issue(Bs + s * B_TILE, B, t.n0, s, T::N);
      load_a.finish(As + s * A_TILE);
      load_b.finish(Bs + s * B_TILE);
    }
    if constexpr (ASYNC) cp_async_commit();
  }
#pragma unroll 1
  for (int kt = 0; kt < K_TILES; ++kt) {
    if constexpr (ASYNC) cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int next = kt + STAGES - 1, next_stage = next % STAGES;
    if (next < K_TILES) {
      load_a.issue(As + next_stage * A_TILE, A, t.m0, next, M);
      load_b.issue(Bs + next_stage * B_TILE, B, t.n0, next, T::N);
    }
    if constexpr (ASYNC) cp_async_commit();
    // This k-tile's scales, loaded before its mma so that they arrive meanwhile.
    if constexpr (SA::K_VARYING) sa.load(scales.a, index_t(kt) * T::BK);
    if constexpr (SB::K_VARYING) sb.load(scales.b, index_t(kt) * T::BK);
    const int stage = kt % STAGES;
    math.compute_tile(As + stage * A_TILE, Bs + stage * B_TILE, part);
    // Promotion: the k-tile's sum into the f32 accumulators, times its scales where they vary along k.
#pragma unroll
    for (int mi = 0; mi < M8::MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < M8::NI; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if constexpr (SA::K_VARYING || SB::K_VARYING) {
            const float s = (SA::K_VARYING ? sa.v[mi][e / 2] : 1.0f) * (SB::K_VARYING ? sb.v[ni][e % 2] : 1.0f);
            acc[mi][ni][e] = fmaf(part[mi][ni][e], s, acc[mi][ni][e]);
          } else {
            acc[mi][ni][e] += part[mi][ni][e];
          }
        }
    if (next < K_TILES) {
      load_a.finish(As + next_stage * A_TILE);
      load_b.finish(Bs + next_stage * B_TILE);
    }
  }

  // Scales constant along k, once; then the store (alpha, beta, the epilogue) of every accumulator in range.
  if constexpr (!SA::K_VARYING) sa.load(scales.a, 0);
  if constexpr (!SB::K_VARYING) sb.load(scales.b, 0);
#pragma unroll
  for (int mi = 0; mi < M8::MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < M8::NI; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float v = acc[mi][ni][e];
        if constexpr (!SA::K_VARYING) v *= sa.v[mi][e / 2];
        if constexpr (!SB::K_VARYING) v *= sb.v[ni][e % 2];
        T::store(C, t.m0 + math.row(mi, e / 2), t.n0 + math.col(ni, e % 2), v, alpha, beta, M, ep);
      }
}

// One grid of tiles(M) blocks; the shared-memory opt-in once per device and instantiation.
template <class T, class LoadA, class LoadB>
cudaError_t launch(const typename T::A_t* A, const typename T::B_t* B, typename T::C_param* C, typename T::index_t M,
                   typename T::Epilogue ep, Scales scales, float alpha, float beta, cudaStream_t stream) {
  auto* k = kernel<T, LoadA, LoadB>;
  if constexpr (T::SMEM_BYTES > 48 * 1024) {
    static std::atomic<unsigned long long> attributes_set{0};  // bit d: set on device d
    const cudaError_t err = set_kernel_attributes(attributes_set, k, T::SMEM_BYTES, false);
    if (err != cudaSuccess) return err;
  }
  const LaunchShape shape{unsigned(cta::Shape<T>::tiles(M)), unsigned(T::THREADS), unsigned(T::SMEM_BYTES), false, 1};
  return dg::launch(k, shape, stream, A, B, C, M, ep, scales, alpha, beta);
}

}  // namespace fp8_cta
}  // namespace dg
