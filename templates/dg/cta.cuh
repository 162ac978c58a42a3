// dg/cta.cuh — the `cta` family: a block tile of C through a multi-stage shared-memory pipeline, on the tensor cores
// (mma.sync m16n8k16, f16/bf16) or on the CUDA cores (FFMA, f32), for any strided view.
//
// A block owns a BM x BN tile of C (n fastest, then m, then batch). Per k-tile of BK, a loader per input moves the
// tile into shared memory (cp.async of a vector; a strided gather; for FFMA, loads along k stored transposed), rows
// padded by 16 bytes so that the rows one ldmatrix (or warp) touches fall into different banks.
//
// T is the traits type the generated code defines: the views (dg/view.cuh) with the types, sizes and store of the
// output, and the plan's tile parameters:
//   THREADS, BM, BN, BK, STAGES, MMA, WARPS_M and WARPS_N (mma) or TM and TN (FFMA: outputs a thread; TRANSPOSE_DEPTH
//   where a loader transposes: the k-tiles it holds in registers), A_K_INNER and
//   B_K_INNER (the shared tile's contiguous role is k), MIN_BLOCKS, MIN_BLOCKS_NEEDS_CP_ASYNC (MIN_BLOCKS holds only
//   for instantiations whose loaders are both cp.async; the others keep the whole register file), BATCH (the number
//   of batch products), SMEM_BYTES.
// The splitk family (dg/splitk.cuh) runs the same tiles over a K slice.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "convert.cuh"
#include "launch.cuh"
#include "ptx.cuh"
#include "view.cuh"

namespace dg {
namespace cta {

// ---- Instructions of the mma path (sm_80).

// ldmatrix.x4: each lane names one 16-byte row of an 8x8 b16 matrix; `Trans` delivers it transposed, which is how a
// tile stored with m (or n) contiguous becomes the k-major fragment mma expects.
template <bool Trans>
__device__ __forceinline__ void ldmatrix_x4(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3, const void* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  if constexpr (Trans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 { %0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(s));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 { %0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(s));
  }
}

// W consecutive floats at `src` (W-float aligned) into dst[0 .. W-1]: one load.
template <int W>
__device__ __forceinline__ void load_floats(float* dst, const float* src) {
  static_assert(W == 1 || W == 2 || W == 4, "a vector load moves 1, 2 or 4 floats");
  if constexpr (W == 1) {
    dst[0] = src[0];
  } else if constexpr (W == 2) {
    const float2 v = *reinterpret_cast<const float2*>(src);
    dst[0] = v.x; dst[1] = v.y;
  } else {
    const float4 v = *reinterpret_cast<const float4*>(src);
    dst[0] = v.x; dst[1] = v.y; dst[2] = v.z; dst[3] = v.w;
  }
}

// ---- The inputs' shared-memory tiles.

enum class Operand { A, B };

// One stage of input X in shared memory: ROWS rows of INNER elements (k-tile x block extent, in the orientation the
// plan chose), PITCH elements apart. `other` is X's role beside k (m for A, n for B).
template <class T, Operand X>
struct Tile {
  static constexpr bool is_a = X == Operand::A;
  using E = std::conditional_t<is_a, typename T::A_t, typename T::B_t>;
  using View = std::conditional_t<is_a, typename T::A_view, typename T::B_view>;
  using Other = std::conditional_t<is_a, typename View::m, typename View::n>;  // the role beside k
  static constexpr bool K_INNER = is_a ? T::A_K_INNER : T::B_K_INNER;
  static constexpr int EXTENT = is_a ? T::BM : T::BN;  // the block's extent along `other`
  static constexpr int ROWS = K_INNER ? EXTENT : T::BK, INNER = K_INNER ? T::BK : EXTENT;
  static constexpr int PITCH = INNER + 16 / int(sizeof(E));
  static constexpr int ELEMS = ROWS * PITCH;
};

// ---- Loaders: how one k-tile of an input reaches shared memory, each with the same two calls so that the main loop
// is written once:
//   issue(stage, X, o0, kt, extent)  start the copy of k-tile kt (cp.async) or load it into registers; o0 is the
//                                    tile's origin along `other` and `extent` the view's size along it (M or N)
//   finish(stage)                    nothing (cp.async, direct gathers), or store the staged registers
//   Slot (a template argument of both): the register set of a loader with kDepth > 1 (the k-tile's index mod kDepth)
// kAsync: the loader issues cp.async (the pipeline commits and waits for groups).
// kDepth: the k-tiles a loader holds in registers at once (1 but for transposes): the pipeline stores a k-tile
// kDepth - 1 iterations after it issued it, so that its loads have kDepth k-tiles of math to land under.

// VEC-element cp.async copies along the tile's contiguous role; fewer elements at the end of the view (zero-fill).
template <class T, Operand X, int VEC>
struct LoadCpAsync {
  using S = Tile<T, X>;
  using E = typename S::E;
  using index_t = typename T::index_t;
  static constexpr bool kAsync = true;
  static constexpr int kDepth = 1;
  static constexpr int kPerRow = S::INNER / VEC;
  static constexpr int kChunks = S::ROWS * S::INNER / VEC;
  static constexpr int kPerThread = (kChunks + T::THREADS - 1) / T::THREADS;
  // Bounded past 4: fully unrolled, the copies' addresses would crowd out the accumulators.
  static constexpr int kUnroll = kPerThread > 4 ? 4 : kPerThread;

  template <int Slot = 0>
  __device__ __forceinline__ void issue(E* stage, const E* __restrict__ src0, index_t o0, int kt, index_t extent) const {
    const index_t k0 = index_t(kt) * T::BK;
#pragma unroll kUnroll
    for (int i = 0; i < kPerThread; ++i) {
      const int c = threadIdx.x + i * T::THREADS;
      if constexpr (kChunks % T::THREADS != 0) {
        if (c >= kChunks) break;
      }
      const int row = c / kPerRow, col = (c % kPerRow) * VEC;
      const index_t go = S::K_INNER ? o0 + row : o0 + col, gk = S::K_INNER ? k0 + col : k0 + row;
      // Elements of this vector inside the view: 0 past the end of either role, fewer at the end of the contiguous
      // role (cp.async zero-fills the rest). Vectors never straddle a segment.
      int valid;
      if constexpr (VEC > 1) {
        valid = 0;
        if (go < extent && gk < T::K) {
          const index_t left = S::K_INNER ? T::K - gk : extent - go;
          valid = left < VEC ? int(left) : VEC;
        }
      } else {
        valid = (go < extent && gk < T::K) ? 1 : 0;
      }
      const E* src = src0;
      if (valid) src += S::Other::offset(go) + S::View::k::offset(gk);
      cp_async<VEC * int(sizeof(E))>(stage + row * S::PITCH + col, src, valid * int(sizeof(E)));
    }
  }

  template <int Slot = 0>
  __device__ __forceinline__ void finish(E*) const {}
};

// Element loads staged in registers across the math (a strided gather), stored in finish. Consecutive lanes take
// consecutive elements of a shared row, or with AlongRows consecutive rows at one inner index: the order in which a
// view contiguous along the rows' role (a [rows][k] tile of an mn-contiguous view, as 8-bit mma needs) gives a
// warp's loads shared sectors.
template <class T, Operand X, bool AlongRows = false>
struct LoadGather {
  using S = Tile<T, X>;
  using E = typename S::E;
  using index_t = typename T::index_t;
  static constexpr bool kAsync = false;
  static constexpr int kDepth = 1;
  static constexpr int kElems = S::ROWS * S::INNER;
  static constexpr int kPerThread = (kElems + T::THREADS - 1) / T::THREADS;
  static constexpr bool kGuard = kElems % T::THREADS != 0;
  E staged[kPerThread];

  // Element c of the tile's walk: its shared row and its index in that row.
  __device__ __forceinline__ static int row_of(int c) { return AlongRows ? c % S::ROWS : c / S::INNER; }
  __device__ __forceinline__ static int col_of(int c) { return AlongRows ? c / S::ROWS : c % S::INNER; }

  template <int Slot = 0>
  __device__ __forceinline__ void issue(E*, const E* __restrict__ src, index_t o0, int kt, index_t extent) {
    const index_t k0 = index_t(kt) * T::BK;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int c = threadIdx.x + i * T::THREADS;
      const int row = row_of(c), col = col_of(c);
      const index_t go = S::K_INNER ? o0 + row : o0 + col, gk = S::K_INNER ? k0 + col : k0 + row;
      staged[i] = E(0.0f);
      if ((!kGuard || c < kElems) && go < extent && gk < T::K) {
        staged[i] = src[S::Other::offset(go) + S::View::k::offset(gk)];
      }
    }
  }

  template <int Slot = 0>
  __device__ __forceinline__ void finish(E* stage) const {
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int c = threadIdx.x + i * T::THREADS;
      if (!kGuard || c < kElems) stage[row_of(c) * S::PITCH + col_of(c)] = staged[i];
    }
  }
};

// Element loads stored straight to shared memory (a strided gather): nothing stays live across the math. This is the
// fallback path, sized for the cp.async plan's registers.
template <class T, Operand X>
struct LoadGatherDirect {
  using S = Tile<T, X>;
  using E = typename S::E;
  using index_t = typename T::index_t;
  static constexpr bool kAsync = false;
  static constexpr int kDepth = 1;
  static constexpr int kElems = S::ROWS * S::INNER;
  static constexpr int kPerThread = (kElems + T::THREADS - 1) / T::THREADS;

  template <int Slot = 0>
  __device__ __forceinline__ void issue(E* stage, const E* __restrict__ src, index_t o0, int kt, index_t extent) const {
    const index_t k0 = index_t(kt) * T::BK;
#pragma unroll 8  // bounded: a few loads in flight without raising the kernel's register count
    for (int i = 0; i < kPerThread; ++i) {
      const int c = threadIdx.x + i * T::THREADS;
      if constexpr (kElems % T::THREADS != 0) {
        if (c >= kElems) break;
      }
      const int row = c / S::INNER, col = c % S::INNER;
      const index_t go = S::K_INNER ? o0 + row : o0 + col, gk = S::K_INNER ? k0 + col : k0 + row;
      E v = E(0.0f);
      if (go < extent && gk < T::K) v = src[S::Other::offset(go) + S::View::k::offset(gk)];
      stage[row * S::PITCH + col] = v;
    }
  }

  template <int Slot = 0>
  __device__ __forceinline__ void finish(E*) const {}
};

// FFMA (f32): VEC-element loads along k from a view contiguous along k, staged in registers across the math and
// stored down k in the [k][other] tile. Lane l takes chunk l and a row's chunks are consecutive lanes, so that a warp
// reads whole 32-byte sectors. With TRANSPOSE_DEPTH 2 two k-tiles are in registers at once, one set each by the
// k-tile's parity: a k-tile's loads land under two k-tiles of math instead of one.
template <class T, Operand X, int VEC>
struct LoadTranspose {
  using S = Tile<T, X>;
  using E = typename S::E;
  using index_t = typename T::index_t;
  static_assert(std::is_same<E, float>::value && !S::K_INNER, "transposing loads fill the FFMA path's [k][m] tiles");
  static constexpr bool kAsync = false;
  static constexpr int kDepth = T::TRANSPOSE_DEPTH;
  static constexpr int kChunksPerRow = T::BK / VEC;
  static constexpr int kChunks = S::INNER * kChunksPerRow;
  static constexpr int kPerThread = (kChunks + T::THREADS - 1) / T::THREADS;
  static constexpr bool kGuard = kChunks % T::THREADS != 0;
  float sets[kDepth][kPerThread][VEC];

  template <int Slot = 0>
  __device__ __forceinline__ void issue(E*, const E* __restrict__ src0, index_t o0, int kt, index_t extent) {
    static_assert(Slot < kDepth, "a register set of this loader");
    const index_t k0 = index_t(kt) * T::BK;
    float (&staged)[kPerThread][VEC] = sets[Slot];
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int c = threadIdx.x + i * T::THREADS;
      if constexpr (kGuard) {
        if (c >= kChunks) break;
      }
      const int row = c / kChunksPerRow, col = (c % kChunksPerRow) * VEC;  // `other` and k in the tile
      // Rows of the tile past the view only feed outputs that are never stored: any index of the view will do.
      const index_t go = min(o0 + row, extent - 1);
      const index_t gk = k0 + col;
      if constexpr (T::K % T::BK == 0) {
        load_floats<VEC>(staged[i], src0 + (S::Other::offset(go) + S::View::k::offset(gk)));
      } else if constexpr (VEC > 1) {
        // The last k-tile passes K: past it the tile must hold zeros (fewer elements in the chunk at the end; chunks
        // never straddle a segment).
        const int valid = gk < T::K ? (T::K - gk < VEC ? int(T::K - gk) : VEC) : 0;
        const E* src = src0 + S::Other::offset(go);
        if (valid) src += S::View::k::offset(gk);
        if (valid == VEC) {
          load_floats<VEC>(staged[i], src);
        } else {
#pragma unroll
          for (int e = 0; e < VEC; ++e) staged[i][e] = e < valid ? src[e] : E(0.0f);
        }
      } else {
        // The last k-tile passes K: past it the tile must hold zeros.
        staged[i][0] = gk < T::K ? src0[S::Other::offset(go) + S::View::k::offset(gk)] : E(0.0f);
      }
    }
  }

  template <int Slot = 0>
  __device__ __forceinline__ void finish(E* stage) const {
    const float (&staged)[kPerThread][VEC] = sets[Slot];
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int c = threadIdx.x + i * T::THREADS;
      if constexpr (kGuard) {
        if (c >= kChunks) break;
      }
      const int row = c / kChunksPerRow, col = (c % kChunksPerRow) * VEC;
#pragma unroll
      for (int e = 0; e < VEC; ++e) stage[(col + e) * S::PITCH + row] = staged[i][e];
    }
  }
};

// ---- The math on one shared-memory stage, per instruction: the accumulators, their zeroing, one k-tile, and where
// each accumulator lands in the block tile.

template <class T, bool Mma = T::MMA>
struct Math;

// Tensor cores: warp (wm, wn) owns a WM x WN piece of the block tile, made of MI x NI mma tiles of 16 x 8; fragments
// come from shared memory through ldmatrix.
template <class T>
struct Math<T, true> {
  using A_t = typename T::A_t;
  using B_t = typename T::B_t;
  static constexpr int WM = T::BM / T::WARPS_M, WN = T::BN / T::WARPS_N;  // warp tile
  static constexpr int MI = WM / 16, NI = WN / 8;                         // mma tiles per warp
  static constexpr int A_PITCH = Tile<T, Operand::A>::PITCH, B_PITCH = Tile<T, Operand::B>::PITCH;
  using Acc = float[MI][NI][4];
  int warp_m0, warp_n0;

  __device__ __forceinline__ Math() {
    const int warp = threadIdx.x / 32;
    warp_m0 = (warp / T::WARPS_N) * WM;
    warp_n0 = (warp % T::WARPS_N) * WN;
  }

  __device__ __forceinline__ static void zero(Acc& acc) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.0f;
  }

  __device__ __forceinline__ void compute_tile(const A_t* As, const B_t* Bs, Acc& acc) const {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int kk = 0; kk < T::BK; kk += 16) {
      uint32_t a[MI][4];
      uint32_t b[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        if constexpr (T::A_K_INNER) {
          // A stored [m][k]: lanes 0-15 name rows m0..m0+15 at k, lanes 16-31 the same rows at k+8.
          const A_t* p = As + (warp_m0 + mi * 16 + lane % 16) * A_PITCH + kk + (lane / 16) * 8;
          ldmatrix_x4<false>(a[mi][0], a[mi][1], a[mi][2], a[mi][3], p);
        } else {
          // A stored [k][m]: matrix j = lane/8 is (m half j%2, k half j/2), read transposed.
          const int j = lane / 8, r = lane % 8;
          const A_t* p = As + (kk + (j / 2) * 8 + r) * A_PITCH + warp_m0 + mi * 16 + (j % 2) * 8;
          ldmatrix_x4<true>(a[mi][0], a[mi][1], a[mi][2], a[mi][3], p);
        }
      }
#pragma unroll
      for (int nj = 0; nj < NI / 2; ++nj) {
        // One x4 load feeds two n8 tiles: matrix j = lane/8 is (n half j/2, k half j%2).
        const int j = lane / 8, r = lane % 8;
        if constexpr (T::B_K_INNER) {
          const B_t* p = Bs + (warp_n0 + nj * 16 + (j / 2) * 8 + r) * B_PITCH + kk + (j % 2) * 8;
          ldmatrix_x4<false>(b[2 * nj][0], b[2 * nj][1], b[2 * nj + 1][0], b[2 * nj + 1][1], p);
        } else {
          const B_t* p = Bs + (kk + (j % 2) * 8 + r) * B_PITCH + warp_n0 + nj * 16 + (j / 2) * 8;
          ldmatrix_x4<true>(b[2 * nj][0], b[2 * nj][1], b[2 * nj + 1][0], b[2 * nj + 1][1], p);
        }
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) mma_m16n8k16<A_t>(acc[mi][ni], a[mi], b[ni][0], b[ni][1]);
      }
    }
  }

  // Calls at(row, col, v) for every accumulator, (row, col) in the block tile. The m16n8 layout: lane
  // (g = lane/4, q = lane%4) holds rows g and g+8, columns 2q and 2q+1.
  template <class At>
  __device__ __forceinline__ void for_each(const Acc& acc, At at) const {
    const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int row = warp_m0 + mi * 16 + g, col = warp_n0 + ni * 8 + 2 * q;
        at(row, col, acc[mi][ni][0]);
        at(row, col + 1, acc[mi][ni][1]);
        at(row + 8, col, acc[mi][ni][2]);
        at(row + 8, col + 1, acc[mi][ni][3]);
      }
    }
  }

  // The accumulators into an f32 tile of `pitch` floats a row: a float2 store per pair of columns.
  __device__ __forceinline__ void park(float* partial, int pitch, const Acc& acc) const {
    const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        float* p = partial + (warp_m0 + mi * 16 + g) * pitch + warp_n0 + ni * 8 + 2 * q;
        *reinterpret_cast<float2*>(p) = make_float2(acc[mi][ni][0], acc[mi][ni][1]);
        *reinterpret_cast<float2*>(p + 8 * pitch) = make_float2(acc[mi][ni][2], acc[mi][ni][3]);
      }
    }
  }
};

// CUDA cores: thread (ty, tx) of the (BM / TM) x (BN / TN) thread grid owns rows row(i) and columns col(j): groups of
// VM (VN) consecutive rows (columns), BM / TM * VM (BN / TN * VN) apart. A group is one shared load a k step, and a
// warp's lanes read consecutive vectors of a [k][m] ([k][n]) row or the same one (a broadcast): no bank conflicts.
template <class T>
struct Math<T, false> {
  static_assert(!T::A_K_INNER && !T::B_K_INNER, "the FFMA loop reads shared memory as [k][m] and [k][n]");
  static constexpr int TM = T::TM, TN = T::TN;
  static constexpr int VM = TM % 4 == 0 ? 4 : TM % 2 == 0 ? 2 : 1;  // gcd(TM, 4): at most a 16-byte vector
  static constexpr int VN = TN % 4 == 0 ? 4 : TN % 2 == 0 ? 2 : 1;
  static constexpr int A_PITCH = Tile<T, Operand::A>::PITCH, B_PITCH = Tile<T, Operand::B>::PITCH;
  using Acc = float[TM][TN];
  int tx, ty;

  __device__ __forceinline__ Math() : tx(threadIdx.x % (T::BN / TN)), ty(threadIdx.x / (T::BN / TN)) {}

  __device__ __forceinline__ int row(int i) const { return (i / VM) * (T::BM / TM * VM) + ty * VM + i % VM; }
  __device__ __forceinline__ int col(int j) const { return (j / VN) * (T::BN / TN * VN) + tx * VN + j % VN; }

  __device__ __forceinline__ static void zero(Acc& acc) {
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
  }

  // Per k step, the thread's TM values of A and TN values of B into registers, then their outer product, TM x TN
  // FFMAs. The steps are unrolled, so the compiler issues a step's shared loads ahead of the previous step's FFMAs.
  __device__ __forceinline__ void compute_tile(const float* As, const float* Bs, Acc& acc) const {
#pragma unroll
    for (int kk = 0; kk < T::BK; ++kk) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; i += VM) load_floats<VM>(a + i, As + kk * A_PITCH + row(i));
#pragma unroll
      for (int j = 0; j < TN; j += VN) load_floats<VN>(b + j, Bs + kk * B_PITCH + col(j));
#pragma unroll
      for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
      }
    }
  }

  template <class At>
  __device__ __forceinline__ void for_each(const Acc& acc, At at) const {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
      for (int j = 0; j < TN; ++j) at(row(i), col(j), acc[i][j]);
    }
  }

  __device__ __forceinline__ void park(float* partial, int pitch, const Acc& acc) const {
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) partial[row(i) * pitch + col(j)] = acc[i][j];
  }
};

// ---- The block: its tile, its shared memory, the pipeline.

template <class T>
struct Shape {
  using index_t = typename T::index_t;
  static constexpr int TILES_N = int((T::N + T::BN - 1) / T::BN);
  static constexpr int K_TILES = int((T::K + T::BK - 1) / T::BK);
  static constexpr int A_ELEMS = Tile<T, Operand::A>::ELEMS, B_ELEMS = Tile<T, Operand::B>::ELEMS;
  static constexpr int SMEM_BYTES = T::STAGES * (A_ELEMS * int(sizeof(typename T::A_t)) +
                                                 B_ELEMS * int(sizeof(typename T::B_t)));
  static_assert(SMEM_BYTES == T::SMEM_BYTES, "planner and kernel disagree on shared memory");
  // Output tiles along m for M rows (M a kernel argument where the rows are sized at run time).
  __host__ __device__ static constexpr index_t tiles_m(index_t M) { return (M + T::BM - 1) / T::BM; }
  static constexpr int tiles(index_t M) { return int(tiles_m(M)) * TILES_N * T::BATCH; }
};

// The origin (m0, n0) of output tile `tile` (n fastest, then m, then batch), with the views' pointers moved to its
// batch product.
template <class T>
struct TileOrigin {
  typename T::index_t m0, n0;
};

template <class T, class PA, class PB, class PC>
__device__ __forceinline__ TileOrigin<T> tile_origin(typename T::index_t tile, typename T::index_t M, PA& A, PB& B,
                                                     PC& C, typename T::Epilogue& ep) {
  using index_t = typename T::index_t;
  const index_t n0 = (tile % Shape<T>::TILES_N) * T::BN;
  tile /= Shape<T>::TILES_N;
  const index_t tiles_m = Shape<T>::tiles_m(M);
  const index_t m0 = (tile % tiles_m) * T::BM;
  if constexpr (T::has_batch) {
    const index_t batch = tile / tiles_m;
    A += T::A_view::batch::offset(batch);
    B += T::B_view::batch::offset(batch);
    C += T::C_view::batch::offset(batch);
    T::move_to_batch(ep, batch);
  }
  return {m0, n0};
}

// f(std::integral_constant<int, I>{}) for each I in turn: a loop whose index is a compile-time constant (register
// sets are indexed by it).
template <int... I, class F>
__device__ __forceinline__ void for_each_index(std::integer_sequence<int, I...>, F&& f) {
  (f(std::integral_constant<int, I>{}), ...);
}

// The multi-stage main loop over k-tiles kt0 .. kt0 + count - 1 of the tile at (m0, n0), into `acc`. Iteration kt:
// wait for k-tile kt (cp.async) and the barrier (every thread is past k-tile kt - 1, so its stage is free); start
// k-tile kt + STAGES - 1 (cp.async into that stage, or loads into a register set); compute kt; then store the
// register-staged k-tile a loader issued kDepth - 1 iterations ago. The loop steps by the deeper loader's kDepth so
// that each register set's index is a compile-time constant (k-tile index mod kDepth, counted from kt0).
template <class T, class LoadA, class LoadB>
__device__ __forceinline__ void mainloop(typename T::A_t* As, typename T::B_t* Bs, const typename T::A_t* A,
                                         const typename T::B_t* B, typename T::index_t m0, typename T::index_t n0,
                                         typename T::index_t M, int kt0, int count, const Math<T>& math,
                                         typename Math<T>::Acc& acc) {
  constexpr int STAGES = T::STAGES, A_TILE = Shape<T>::A_ELEMS, B_TILE = Shape<T>::B_ELEMS;
  constexpr bool ASYNC = LoadA::kAsync || LoadB::kAsync;
  constexpr int DA = LoadA::kDepth, DB = LoadB::kDepth, STEP = DA > DB ? DA : DB;
  static_assert(STEP % DA == 0 && STEP % DB == 0, "each loader's register sets cycle within one loop step");
  static_assert(STAGES > STEP, "a k-tile is stored kDepth - 1 iterations after its issue, before it is computed");
  LoadA load_a;
  LoadB load_b;
  // Prologue: start the first STAGES - 1 k-tiles, storing those whose registers are due.
  for_each_index(std::make_integer_sequence<int, STAGES - 1>{}, [&](auto s_) {
    constexpr int s = decltype(s_)::value, fa = s - (DA - 1), fb = s - (DB - 1);
    if (s < count) {
      load_a.template issue<s % DA>(As + s * A_TILE, A, m0, kt0 + s, M);
      load_b.template issue<s % DB>(Bs + s * B_TILE, B, n0, kt0 + s, T::N);
    }
    if constexpr (fa >= 0) {
      if (fa < count) load_a.template finish<fa % DA>(As + fa * A_TILE);
    }
    if constexpr (fb >= 0) {
      if (fb < count) load_b.template finish<fb % DB>(Bs + fb * B_TILE);
    }
    if constexpr (ASYNC) cp_async_commit();
  });
  Math<T>::zero(acc);
#pragma unroll 1
  for (int base = 0; base < count; base += STEP) {
    for_each_index(std::make_integer_sequence<int, STEP>{}, [&](auto j_) {
      constexpr int j = decltype(j_)::value;
      const int kt = base + j;
      if (kt >= count) return;
      if constexpr (ASYNC) cp_async_wait<STAGES - 2>();
      __syncthreads();
      const int next = kt + STAGES - 1;
      if (next < count) {
        load_a.template issue<(j + STAGES - 1) % DA>(As + next % STAGES * A_TILE, A, m0, kt0 + next, M);
        load_b.template issue<(j + STAGES - 1) % DB>(Bs + next % STAGES * B_TILE, B, n0, kt0 + next, T::N);
      }
      if constexpr (ASYNC) cp_async_commit();
      const int stage = kt % STAGES;
      math.compute_tile(As + stage * A_TILE, Bs + stage * B_TILE, acc);
      const int fa = next - (DA - 1), fb = next - (DB - 1);
      if (fa < count) load_a.template finish<(j + STAGES - DA) % DA>(As + fa % STAGES * A_TILE);
      if (fb < count) load_b.template finish<(j + STAGES - DB) % DB>(Bs + fb % STAGES * B_TILE);
    });
  }
}

// Registers a thread: MIN_BLOCKS blocks an SM, or where the plan caps registers only for cp.async loaders, the whole
// register file for the other instantiations (register-staged gathers spill under the cap).
template <class T, class LoadA, class LoadB>
constexpr int min_blocks() {
  return !T::MIN_BLOCKS_NEEDS_CP_ASYNC || (LoadA::kAsync && LoadB::kAsync) ? T::MIN_BLOCKS : 1;
}

// M: the rows (T::M unless T::rows_at_run_time).
template <class T, class LoadA, class LoadB>
__global__ void __launch_bounds__(T::THREADS, (min_blocks<T, LoadA, LoadB>()))
    kernel(const typename T::A_t* __restrict__ A, const typename T::B_t* __restrict__ B,
           typename T::C_param* __restrict__ C, typename T::index_t M_arg, typename T::Epilogue ep, float alpha,
           float beta) {
  using A_t = typename T::A_t;
  using B_t = typename T::B_t;
  using index_t = typename T::index_t;
  const index_t M = T::rows_at_run_time ? M_arg : T::M;
  (void)T::c_along_m;  // stores go element-wise from the accumulators' layout, whatever C's contiguous role
  extern __shared__ __align__(16) unsigned char smem[];
  A_t* const As = reinterpret_cast<A_t*>(smem);
  B_t* const Bs = reinterpret_cast<B_t*>(smem + T::STAGES * Shape<T>::A_ELEMS * sizeof(A_t));
  const TileOrigin<T> t = tile_origin<T>(blockIdx.x, M, A, B, C, ep);
  const Math<T> math;
  typename Math<T>::Acc acc;
  mainloop<T, LoadA, LoadB>(As, Bs, A, B, t.m0, t.n0, M, 0, Shape<T>::K_TILES, math, acc);
  math.for_each(acc, [&](int r, int c, float v) { T::store(C, t.m0 + r, t.n0 + c, v, alpha, beta, M, ep); });
}

// One grid of tiles(M) blocks; the shared-memory opt-in once per device and instantiation.
template <class T, class LoadA, class LoadB>
cudaError_t launch(const typename T::A_t* A, const typename T::B_t* B, typename T::C_param* C, typename T::index_t M,
                   typename T::Epilogue ep, float alpha, float beta, cudaStream_t stream) {
  auto* k = kernel<T, LoadA, LoadB>;
  if constexpr (T::SMEM_BYTES > 48 * 1024) {
    static std::atomic<unsigned long long> attributes_set{0};  // bit d: set on device d
    const cudaError_t err = set_kernel_attributes(attributes_set, k, T::SMEM_BYTES, false);
    if (err != cudaSuccess) return err;
  }
  const LaunchShape shape{unsigned(Shape<T>::tiles(M)), unsigned(T::THREADS), unsigned(T::SMEM_BYTES), false, 1};
  return dg::launch(k, shape, stream, A, B, C, M, ep, alpha, beta);
}

}  // namespace cta
}  // namespace dg
