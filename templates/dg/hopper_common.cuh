// dg/hopper_common.cuh — the pieces the `hopper` kernels share (sm_90a): TMA + wgmma with a producer warpgroup and
// CONSUMERS consumer warpgroups over a ring of STAGES shared-memory stages, BK = one 128-byte swizzle row a stage.
//
// The three kernels (a template per variant) build on these: dg/hopper_persistent.cuh (a persistent grid walking
// tiles), dg/hopper_split.cuh (K split over a cluster, one tile a cluster) and dg/hopper_multicast.cuh (A's box
// loaded in parts across a cluster along n).
//
// T is the traits type the generated code defines:
//   types      A_t, B_t, C_t, C_param (const C_t where the spec writes D), Out_t (the view written), Epilogue
//   tiling     BM, BN, BK, STAGES, CONSUMERS, WG_M, CTAS_PER_SM, RASTER, PRODUCER_REGS, CONSUMER_REGS, ACC_CHAINS
//   sizes      rows_at_run_time, M_UNIT (rows a unit of the run-time letter), M_INNER (fixed rows), N_INNER,
//              TILES_M, TILES_N, TILE_GROUPS, TILES, K_INNER_TILES, K_ITERS, FLAT_ROWS and M_ROWS
//   loops      TILE_LOOPS, LOOPS[] (dg::hopper::Loop: size, an m loop?, the output's stride), K_LOOPS, K_LOOP_SIZE[]
//   operands   A_map, B_map (dg::hopper operand maps: RANK, K_MAJOR, BOXES, BOX_BYTES, DIMS[]), A_ROWS_FOLLOW_M,
//              A_BOX_ROWS, B_FIRST, B_EVICT_FIRST, A_EVICT_FIRST, A_PARTS, TMA_DTYPE, L2_PROMOTION
//   output     C_ALONG_M, C_VEC, C_SM, C_SN, EPI_COLS, EPI_PITCH, EPI_FLOATS, PACKED, PACK_COLS, PACK_PITCH
//   K split    SPLITS, KT_PER_SPLIT, RED_PITCH;  SMEM_BYTES (the planner's, checked against the layout here)
//   functions  out(C, ep): the output's first element; finish_vector(p, src, dst, gm, gn, tile, m_inner, C, ep,
//              alpha, beta): C_VEC f32 values through the epilogue into the output's dtype (loads only);
//              store_vector(p, dst, gm, gn, m_inner): them stored; pointwise(t): the epilogue's steps without views
//              (the packed store's).
#pragma once

#include <cstdint>
#include <mutex>
#include <type_traits>
#include <utility>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "convert.cuh"
#include "launch.cuh"
#include "ptx.cuh"
#include "wgmma.cuh"

namespace dg {
namespace hopper {

// A loop over a non-tiled segment of the m or n role: one index a tile (or, with flat rows, an m loop's index a
// 64-row block). `c_stride`: the output's element stride along it.
struct Loop {
  int size;
  bool is_m;
  long long c_stride;
};

// What a tensor-map dim's coordinate is: the k offset in the tiled k segment, the tile's origin in the tiled m or
// n segment, a tile loop's index, or an outer k loop's index.
enum Source : int { AT_K, AT_MN, AT_LOOP, AT_K_LOOP };

// One dim of a tensor map, innermost first: its size (0: M_INNER, at run time), its stride in bytes (unused for
// the innermost), its box (0: a_box_rows(M_INNER), at run time) and its coordinate's source.
struct Dim {
  unsigned long long size;
  unsigned long long stride;
  unsigned box;
  Source source;
  int index;  // the loop's, for AT_LOOP and AT_K_LOOP
};

// The layout every kernel derives from the traits: shared memory (STAGES x (A tile, B tile), 1024-byte aligned
// for the 128B swizzle, then each consumer's epilogue staging unless K is split, then the barriers).
template <class T>
struct Config {
  static constexpr int MI = T::WG_M / 64;  // m64 wgmmas per k16 step
  static constexpr int ODD_MI = T::ACC_CHAINS == 2 ? MI : 1;  // blocks of the odd k16 steps' accumulators
  static constexpr int THREADS = 128 * (T::CONSUMERS + 1);
  static constexpr int NACC = T::BN / 2;  // accumulators a thread per m64 block
  static constexpr bool SPLIT = T::SPLITS > 1;
  static constexpr bool MULTICAST = T::A_PARTS > 1;
  static constexpr int A_STAGE_BYTES = T::BM * T::BK * int(sizeof(typename T::A_t));
  static constexpr int B_STAGE_BYTES = T::BN * T::BK * int(sizeof(typename T::B_t));
  static constexpr int A_PART_ROWS = T::BM / T::A_PARTS, A_PART_BYTES = A_STAGE_BYTES / T::A_PARTS;
  static constexpr uint16_t CLUSTER_MASK = uint16_t((1u << T::A_PARTS) - 1);
  static constexpr int TILES_N_GRID = (T::TILES_N + T::A_PARTS - 1) / T::A_PARTS * T::A_PARTS;
  // What TMA delivers per stage (whole boxes): A's box holds only the rows present where they are fewer than BM.
  static constexpr int STAGE_TX_BYTES =
      (T::A_ROWS_FOLLOW_M && T::A_BOX_ROWS < T::BM ? T::A_BOX_ROWS * T::BK * int(sizeof(typename T::A_t))
                                                   : A_STAGE_BYTES) + B_STAGE_BYTES;
  static constexpr int A_OFFSET = 0, B_OFFSET = T::STAGES * A_STAGE_BYTES;
  static constexpr int EPI_OFFSET = B_OFFSET + T::STAGES * B_STAGE_BYTES;
  static constexpr int BAR_OFFSET = SPLIT ? EPI_OFFSET : EPI_OFFSET + T::CONSUMERS * T::EPI_FLOATS * 4;
  static constexpr int SMEM_BYTES = BAR_OFFSET + 2 * T::STAGES * 8 + 1024;  // + room to align the base to 1024
  static_assert(SMEM_BYTES == T::SMEM_BYTES, "planner and kernel disagree on shared memory");
  static_assert(A_STAGE_BYTES % 1024 == 0 && B_STAGE_BYTES % 1024 == 0, "stages must stay 1024-byte aligned");
  static_assert(!MULTICAST || A_PART_BYTES % 1024 == 0, "A's parts must keep the 128B swizzle's atoms");
  static_assert(!T::PACKED || (T::C_ALONG_M ? T::PACK_COLS : 64) * T::PACK_PITCH * 2 <= T::EPI_FLOATS * 4,
                "the packed tile must fit the staging buffer");
  static_assert(!SPLIT || (T::C_ALONG_M ? T::BN : T::BM) * T::RED_PITCH * 4 <= BAR_OFFSET,
                "the partial tile must fit in the stages");
  static_assert(T::A_map::BOX_BYTES * T::A_map::BOXES == A_STAGE_BYTES &&
                T::B_map::BOX_BYTES * T::B_map::BOXES == B_STAGE_BYTES, "a stage is its boxes");
  static_assert(T::KT_PER_SPLIT * T::SPLITS >= T::K_ITERS, "the K slices cover every k-iteration");
  static_assert(T::rows_at_run_time || T::M_UNIT == 1, "fixed rows come in one unit");
  static_assert(T::rows_at_run_time || T::TILES == T::TILE_GROUPS * T::TILES_M * (MULTICAST ? TILES_N_GRID : T::TILES_N),
                "the tiles are the tile groups' rows and columns");
  static_assert(SPLIT || (T::BN % (SPLIT ? 1 : T::EPI_COLS) == 0 && T::EPI_PITCH >= (T::C_ALONG_M ? 64 : T::EPI_COLS)),
                "the staging buffer holds EPI_COLS columns of a 64-row block");
  static_assert(T::K_LOOP_SIZE[0] >= 1 && T::LOOPS[0].size >= 1, "loops have at least one index");
};

// A's box rows while the rows present (M_INNER rounded up to a swizzle atom's 8 rows) are fewer than BM: wgmma
// reads BM rows, and the rows past the box (stale shared memory) feed only accumulator rows that are never stored.
template <class T>
__host__ __device__ constexpr int a_box_rows(int m_inner) {
  return m_inner < T::BM ? (m_inner + 7) / 8 * 8 : T::BM;
}

// A tile: its BM x BN origin in the tiled segments and its tile-loop indices.
template <int Loops>
struct Tile {
  int m0, n0;
  int loop[Loops > 0 ? Loops : 1];
};

template <class T>
using TileOf = Tile<T::TILE_LOOPS>;

// The index of the first tile loop a tile group walks (the m loops are each 64-row block's with flat rows), and of
// the first m loop.
template <class T>
__host__ __device__ constexpr int first_group_loop() {
  for (int i = 0; i < T::TILE_LOOPS; ++i)
    if (!(T::FLAT_ROWS && T::LOOPS[i].is_m)) return i;
  return T::TILE_LOOPS;
}

template <class T>
__host__ __device__ constexpr int first_m_loop() {
  for (int i = 0; i < T::TILE_LOOPS; ++i)
    if (T::LOOPS[i].is_m) return i;
  return T::TILE_LOOPS;
}

// Loop `I`'s index from the running quotient `q` (the loops are taken innermost, the highest index, first): the
// remainder by its size, or the whole quotient for the outermost loop `First` of the walk. `M`: the walk is the m
// loops' (granule_at), else the tile group's.
template <class T, bool M, int First, int I>
__device__ __forceinline__ void loop_index(TileOf<T>& tile, int& q) {
  constexpr Loop l = T::LOOPS[I];
  constexpr bool walked = M ? l.is_m : !(T::FLAT_ROWS && l.is_m);
  if constexpr (walked) {
    if constexpr (I == First) {
      tile.loop[I] = q;
    } else {
      tile.loop[I] = q % l.size;
      q /= l.size;
    }
  }
}

template <class T, bool M, int First, size_t... I>
__device__ __forceinline__ void loop_indices(TileOf<T>& tile, int q, std::index_sequence<I...>) {
  (loop_index<T, M, First, T::TILE_LOOPS - 1 - int(I)>(tile, q), ...);
}

template <class T, int I>
__device__ __forceinline__ void zero_m_loop(TileOf<T>& tile) {
  constexpr bool is_m = T::LOOPS[I].is_m;
  if constexpr (is_m) tile.loop[I] = 0;
}

template <class T, size_t... I>
__device__ __forceinline__ void zero_m_loops(TileOf<T>& tile, std::index_sequence<I...>) {
  (zero_m_loop<T, int(I)>(tile), ...);
}

// Tile t -> its tile-loop indices and its origin: tiles of one loop index are consecutive; inside, RASTER tile
// rows walk all tile columns together (their A tiles stay in L2), or with A multicast the tile columns of a tile
// row are consecutive, so that the blocks of a cluster share a tile row on every pass.
template <class T>
__device__ __forceinline__ TileOf<T> tile_at(int t, int tiles_m) {
  constexpr int TILES_N = Config<T>::MULTICAST ? Config<T>::TILES_N_GRID : T::TILES_N;
  TileOf<T> tile;
  if constexpr (Config<T>::MULTICAST) {
    const int r = t % (tiles_m * TILES_N);
    tile.m0 = (r / TILES_N) * T::BM;
    tile.n0 = (r % TILES_N) * T::BN;
  } else {
    constexpr int RASTER = T::RASTER;
    const int r = t % (tiles_m * TILES_N);
    const int band = r / (RASTER * TILES_N), in_band = r % (RASTER * TILES_N);
    const int rows = min(tiles_m - band * RASTER, RASTER);
    tile.m0 = (band * RASTER + in_band % rows) * T::BM;
    tile.n0 = (in_band / rows) * T::BN;
  }
  if constexpr (T::FLAT_ROWS) zero_m_loops<T>(tile, std::make_index_sequence<T::TILE_LOOPS>{});  // granule_at's
  constexpr int FIRST = first_group_loop<T>();
  if constexpr (FIRST < T::TILE_LOOPS)
    loop_indices<T, false, FIRST>(tile, t / (tiles_m * TILES_N), std::make_index_sequence<T::TILE_LOOPS>{});
  return tile;
}

// Flat rows: row `flat` of the M_ROWS run -> its M_INNER index (m0) and the m loops' indices; n0 and the other loop
// indices stay the tile's. Rows past M_ROWS give an m-loop index past its size: TMA zero-fills that box.
template <class T>
__device__ __forceinline__ TileOf<T> granule_at(int flat, const TileOf<T>& tile) {
  TileOf<T> b = tile;
  const int q = flat / T::M_INNER;
  b.m0 = flat - q * T::M_INNER;
  loop_indices<T, true, first_m_loop<T>()>(b, q, std::make_index_sequence<T::TILE_LOOPS>{});
  return b;
}

template <class T, int I>
__device__ __forceinline__ long long c_loop_offset(const TileOf<T>& tile) {
  constexpr long long stride = T::LOOPS[I].c_stride;
  if constexpr (stride != 0) return static_cast<long long>(tile.loop[I]) * stride;
  return 0;
}

template <class T, size_t... I>
__device__ __forceinline__ long long c_tile_sum(const TileOf<T>& tile, std::index_sequence<I...>) {
  return (0ll + ... + c_loop_offset<T, int(I)>(tile));
}

// The output's offset at a tile's loop indices.
template <class T>
__device__ __forceinline__ long long c_tile_offset(const TileOf<T>& tile) {
  return c_tile_sum<T>(tile, std::make_index_sequence<T::TILE_LOOPS>{});
}

// ---- The producer: one k-iteration's boxes.

// Dim `D` of operand Op's tensor map: its coordinate at the tile `tile`: `k0` in the tiled k segment, `ko` the outer
// k loops' indices, `a_part` this block's part of A's rows (A multicast), `shift` added (a box's offset).
template <class T, class Op, int D>
__device__ __forceinline__ int coordinate(const TileOf<T>& tile, int k0, const int* ko, int a_part, int shift) {
  constexpr Dim d = Op::DIMS[D];
  if constexpr (d.source == AT_K) {
    return k0 + shift;
  } else if constexpr (d.source == AT_MN) {
    if constexpr (!Op::IS_A) return tile.n0 + shift;
    else if constexpr (Config<T>::MULTICAST) return tile.m0 + a_part * Config<T>::A_PART_ROWS + shift;
    else return tile.m0 + shift;
  } else if constexpr (d.source == AT_LOOP) {
    return tile.loop[d.index] + shift;
  } else {
    return ko[d.index] + shift;
  }
}

// What a box goes through: a load into this block's shared memory (`evict_first`: its L2 lines leave first), a
// multicast into every block of the cluster, or a prefetch into L2 only.
enum Issue : int { LOAD, LOAD_EVICT_FIRST, MULTICAST, MULTICAST_EVICT_FIRST, PREFETCH };

// One box; `shift` moves its innermost coordinate.
template <class T, class Op, Issue How, size_t... I>
__device__ __forceinline__ void issue_box(std::index_sequence<I...>, void* dst, const CUtensorMap* map, uint64_t* bar,
                                          const TileOf<T>& tile, int k0, const int* ko, int a_part, int shift) {
  if constexpr (How == PREFETCH) {
    tma_prefetch(map, coordinate<T, Op, int(I)>(tile, k0, ko, a_part, I == 0 ? shift : 0)...);
  } else if constexpr (How == LOAD) {
    tma_load(dst, map, bar, coordinate<T, Op, int(I)>(tile, k0, ko, a_part, I == 0 ? shift : 0)...);
  } else if constexpr (How == LOAD_EVICT_FIRST) {
    tma_load_hint(dst, map, bar, evict_first_policy(),
                  coordinate<T, Op, int(I)>(tile, k0, ko, a_part, I == 0 ? shift : 0)...);
  } else {
    tma_load_multicast<How == MULTICAST_EVICT_FIRST>(
        dst, map, bar, Config<T>::CLUSTER_MASK, How == MULTICAST_EVICT_FIRST ? evict_first_policy() : 0,
        coordinate<T, Op, int(I)>(tile, k0, ko, a_part, I == 0 ? shift : 0)...);
  }
}

// One operand's boxes of a stage: with flat rows (A) one a 64-row block at the block's own coordinates (`blocks`),
// else BOXES boxes 64 elements apart along the innermost dim.
template <class T, bool IsA, Issue How>
__device__ __forceinline__ void issue_operand(unsigned char* dst, const CUtensorMap* map, uint64_t* bar,
                                              const TileOf<T>& tile, const TileOf<T>* blocks, int k0, const int* ko,
                                              int a_part) {
  using Op = std::conditional_t<IsA, typename T::A_map, typename T::B_map>;
  using Dims = std::make_index_sequence<Op::RANK>;
  if constexpr (IsA && T::FLAT_ROWS) {
#pragma unroll
    for (int j = 0; j < Op::BOXES; ++j)  // a box a 64-row block
      issue_box<T, Op, How>(Dims{}, dst + j * Op::BOX_BYTES, map, bar, blocks[j], k0, ko, a_part, 0);
  } else if constexpr (Op::BOXES == 1) {
    issue_box<T, Op, How>(Dims{}, dst, map, bar, tile, k0, ko, a_part, 0);
  } else {
#pragma unroll
    for (int j = 0; j < Op::BOXES; ++j)
      issue_box<T, Op, How>(Dims{}, dst + j * Op::BOX_BYTES, map, bar, tile, k0, ko, a_part, j * 64);
  }
}

// The outer k loops' indices of the quotient `kq` (loop 0 outermost, taking the whole rest).
template <class T, int I>
__device__ __forceinline__ void outer_k_index(int* ko, int& kq) {
  if constexpr (I == 0) {
    ko[I] = kq;
  } else {
    constexpr int size = T::K_LOOP_SIZE[I];
    ko[I] = kq % size;
    kq /= size;
  }
}

template <class T, size_t... I>
__device__ __forceinline__ void outer_k(int* ko, int kq, std::index_sequence<I...>) {
  (outer_k_index<T, T::K_LOOPS - 1 - int(I)>(ko, kq), ...);
}

// One k-iteration `kt` of `tile` (and A's 64-row `blocks` with flat rows): its boxes into stage `stage` once the
// consumers have released it, B's first where the plan says so (the weight streams from DRAM once), each
// completing on full[stage]; or (`Prefetch`) the streamed operand's boxes into L2 only: B's, or with A multicast
// this block's part of A's (A is then the operand read once a tile row).
template <class T, bool Prefetch>
__device__ __forceinline__ void issue_stage(unsigned char* smem, uint64_t* full, uint64_t* empty,
                                            const CUtensorMap* map_a, const CUtensorMap* map_b, int stage,
                                            uint32_t phase, int kt, const TileOf<T>& tile, const TileOf<T>* blocks,
                                            int a_part, unsigned tx_bytes) {
  using C = Config<T>;
  const int k0 = (kt % T::K_INNER_TILES) * T::BK;
  int ko[T::K_LOOPS > 0 ? T::K_LOOPS : 1];
  if constexpr (T::K_LOOPS > 0) outer_k<T>(ko, kt / T::K_INNER_TILES, std::make_index_sequence<T::K_LOOPS>{});
  unsigned char* const a_dst = smem + C::A_OFFSET + stage * C::A_STAGE_BYTES + (C::MULTICAST ? a_part * C::A_PART_BYTES : 0);
  unsigned char* const b_dst = smem + C::B_OFFSET + stage * C::B_STAGE_BYTES;
  if constexpr (Prefetch) {
    if constexpr (C::MULTICAST)
      issue_operand<T, true, PREFETCH>(nullptr, map_a, nullptr, tile, blocks, k0, ko, a_part);
    else
      issue_operand<T, false, PREFETCH>(nullptr, map_b, nullptr, tile, blocks, k0, ko, a_part);
  } else {
    constexpr Issue HOW_A = C::MULTICAST ? (T::A_EVICT_FIRST ? MULTICAST_EVICT_FIRST : MULTICAST) : LOAD;
    constexpr Issue HOW_B = T::B_EVICT_FIRST ? LOAD_EVICT_FIRST : LOAD;
    mbar_wait(&empty[stage], phase ^ 1);  // the consumers released this stage's last use
    mbar_expect_tx(&full[stage], tx_bytes);
    if constexpr (T::B_FIRST) {
      issue_operand<T, false, HOW_B>(b_dst, map_b, &full[stage], tile, blocks, k0, ko, a_part);
      issue_operand<T, true, HOW_A>(a_dst, map_a, &full[stage], tile, blocks, k0, ko, a_part);
    } else {
      issue_operand<T, true, HOW_A>(a_dst, map_a, &full[stage], tile, blocks, k0, ko, a_part);
      issue_operand<T, false, HOW_B>(b_dst, map_b, &full[stage], tile, blocks, k0, ko, a_part);
    }
  }
}

// Before the wait for the previous grid: the streamed operand's boxes of this block's first STAGES k-iterations
// into L2, so that the stream is already running while that grid finishes. The TMA loads after the wait still
// read that grid's writes (`.nc` loads would not). Only where every block has one tile.
template <class T>
__device__ __forceinline__ void prefetch_first_stages(const CUtensorMap* map_a, const CUtensorMap* map_b, int tiles,
                                                      int tiles_m, int a_part) {
  if (int(blockIdx.x) < tiles && tiles <= int(gridDim.x)) {
    const TileOf<T> tile = tile_at<T>(int(blockIdx.x), tiles_m);
    for (int kt = 0; kt < (T::STAGES < T::K_ITERS ? T::STAGES : T::K_ITERS); ++kt)
      issue_stage<T, true>(nullptr, nullptr, nullptr, map_a, map_b, 0, 0, kt, tile, nullptr, a_part, 0);
  }
}

// ---- The consumers.

// Descriptors of the 64 x 16 A block (rows `row0`.. of this stage, k16 step `kk`) and the 16 x BN B block.
// K-major: [rows][64 k], row r at r * 128 bytes, k16 step kk at kk * 32 bytes inside the swizzled row.
// MN-major: [boxes][64 k rows][64 mn], boxes BOX_BYTES apart (LBO), k rows kk * 16.. (2 atoms).
template <class T>
__device__ __forceinline__ uint64_t desc_a(uint32_t stage_a, int row0, int kk) {
  using Op = typename T::A_map;
  if constexpr (Op::K_MAJOR)
    return smem_desc(stage_a + row0 * 128 + kk * 32, 16, 1024);
  else
    return smem_desc(stage_a + (row0 / 64) * Op::BOX_BYTES + kk * 16 * 128, Op::BOX_BYTES, 1024);
}
template <class T>
__device__ __forceinline__ uint64_t desc_b(uint32_t stage_b, int kk) {
  using Op = typename T::B_map;
  if constexpr (Op::K_MAJOR)
    return smem_desc(stage_b + kk * 32, 16, 1024);
  else
    return smem_desc(stage_b + kk * 16 * 128, Op::BOX_BYTES, 1024);
}

template <class T>
__device__ __forceinline__ void wgmma(float (&d)[Config<T>::NACC], uint64_t da, uint64_t db, int accumulate) {
  wgmma_m64k16<T::BN, typename T::A_t, !T::A_map::K_MAJOR, !T::B_map::K_MAJOR>(d, da, db, accumulate);
}

// A consumer warp's release of the stage it last read: with A multicast, in every block of the cluster (each
// block's producer refills it in all of them).
template <class T>
__device__ __forceinline__ void release_stage(uint64_t* empty, int last, int lane) {
  if constexpr (Config<T>::MULTICAST) {
    if (lane < T::A_PARTS) mbar_arrive_remote(&empty[last], lane);  // in every block of the cluster
  } else {
    if (lane == 0) mbar_arrive(&empty[last]);
  }
}

// A consumer warpgroup's k-iterations [kt0, kt_end) of one tile into `acc`: the wgmmas of a stage, then the
// previous stage released once its wgmmas are done. With ACC_CHAINS == 2 the odd k16 steps accumulate into
// `acc_odd`, summed after the tile's last wgmma (consecutive wgmmas then do not wait on each other's accumulators).
template <class T>
__device__ __forceinline__ void mma_tile(float (&acc)[Config<T>::MI][Config<T>::NACC],
                                         float (&acc_odd)[Config<T>::ODD_MI][Config<T>::NACC], uint64_t* full,
                                         uint64_t* empty, uint32_t stages_a, uint32_t stages_b, int& stage,
                                         uint32_t& phase, int kt0, int kt_end, int wg, int lane) {
  using C = Config<T>;
  int last = 0;
  for (int kt = kt0; kt < kt_end; ++kt) {
    mbar_wait(&full[stage], phase);
    wgmma_fence();
    const uint32_t sa = stages_a + stage * C::A_STAGE_BYTES, sb = stages_b + stage * C::B_STAGE_BYTES;
    if constexpr (T::ACC_CHAINS == 2) {
#pragma unroll
      for (int kk = 0; kk < T::BK / 16; kk += 2) {
#pragma unroll
        for (int mi = 0; mi < C::MI; ++mi)
          wgmma<T>(acc[mi], desc_a<T>(sa, wg * T::WG_M + mi * 64, kk), desc_b<T>(sb, kk), kt > kt0 || kk > 0);
#pragma unroll
        for (int mi = 0; mi < C::MI; ++mi)
          wgmma<T>(acc_odd[mi], desc_a<T>(sa, wg * T::WG_M + mi * 64, kk + 1), desc_b<T>(sb, kk + 1),
                   kt > kt0 || kk > 0);
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < T::BK / 16; ++kk) {
#pragma unroll
        for (int mi = 0; mi < C::MI; ++mi)
          wgmma<T>(acc[mi], desc_a<T>(sa, wg * T::WG_M + mi * 64, kk), desc_b<T>(sb, kk), kt > kt0 || kk > 0);
      }
    }
    wgmma_commit();
    if (kt > kt0) {
      wgmma_wait<1>();  // the wgmmas of k-iteration kt-1 are done: their stage may be refilled
      release_stage<T>(empty, last, lane);
    }
    last = stage;
    if (++stage == T::STAGES) {
      stage = 0;
      phase ^= 1;
    }
  }
  wgmma_wait<0>();
  release_stage<T>(empty, last, lane);
#pragma unroll
  for (int mi = 0; mi < C::MI; ++mi) acc_fence(acc[mi]);
  if constexpr (T::ACC_CHAINS == 2) {
#pragma unroll
    for (int mi = 0; mi < C::MI; ++mi) {
      acc_fence(acc_odd[mi]);
#pragma unroll
      for (int i = 0; i < C::NACC; ++i) acc[mi][i] += acc_odd[mi][i];
    }
  }
}

// The output at (gm, gn) of the tile's loop indices `c_tile`.
template <class T>
__device__ __forceinline__ typename T::Out_t* out_at(typename T::C_param* C, const typename T::Epilogue& ep,
                                                     long long c_tile, int gm, int gn) {
  return T::out(C, ep) + c_tile + static_cast<long long>(gm) * T::C_SM + static_cast<long long>(gn) * T::C_SN;
}

// A consumer warpgroup's 64-row block `mi` of the tile: row0 (its first M_INNER index) and, with flat rows, the
// block's own loop indices and the output's offset at them. False: past the last m-loop index (nothing to store).
template <class T>
__device__ __forceinline__ bool block_rows(const TileOf<T>& tile, int wg, int mi, int& row0, TileOf<T>& blk,
                                           long long& c_tile) {
  if constexpr (T::FLAT_ROWS) {
    const int flat0 = tile.m0 + wg * T::WG_M + mi * 64;  // this 64-row block's first row of the M_ROWS run
    if (flat0 >= T::M_ROWS) return false;  // the whole warpgroup skips it
    blk = granule_at<T>(flat0, tile);
    row0 = blk.m0;
    c_tile = c_tile_offset<T>(blk);
  } else {
    row0 = tile.m0 + wg * T::WG_M + mi * 64;
  }
  return true;
}

// The f32 staging store: EPI_COLS columns of a consumer warpgroup's accumulators at a time through its staging
// buffer `epi`, then the epilogue on each C_VEC-element vector of the output along its contiguous role as the store
// phase reads it (T::finish_vector: the views read beside the accumulators, C for beta included), into registers in
// the output's dtype; then each vector stored (T::store_vector). A thread finishes a batch of its vectors before it
// stores one, so that their loads run together: in one loop, each load would wait for the store before it, which it
// may alias.
template <class T>
__device__ __forceinline__ void staged_store(float (&acc)[Config<T>::MI][Config<T>::NACC], float* epi,
                                             const TileOf<T>& tile, long long c_tile_of_tile, int m_inner, int wg,
                                             int warp, int tid, int g, int q, typename T::C_param* C,
                                             const typename T::Epilogue& ep, float alpha, float beta) {
  constexpr int EPI_COLS = T::EPI_COLS, EPI_PITCH = T::EPI_PITCH, VEC = T::C_VEC;
#pragma unroll
  for (int mi = 0; mi < Config<T>::MI; ++mi) {
    int row0;
    TileOf<T> blk = tile;
    long long c_tile = c_tile_of_tile;
    if (!block_rows<T>(tile, wg, mi, row0, blk, c_tile)) continue;
#pragma unroll
    for (int nc = 0; nc < T::BN / EPI_COLS; ++nc) {
#pragma unroll
      for (int j = 0; j < EPI_COLS / 8; ++j) {
        const int i = (nc * (EPI_COLS / 8) + j) * 4;  // a constant once unrolled: acc stays in registers
        const int r = warp * 16 + g, col = j * 8 + 2 * q;
        if constexpr (T::C_ALONG_M) {  // [col][row] staging: the store phase reads runs of rows
          epi[col * EPI_PITCH + r] = acc[mi][i];
          epi[(col + 1) * EPI_PITCH + r] = acc[mi][i + 1];
          epi[col * EPI_PITCH + r + 8] = acc[mi][i + 2];
          epi[(col + 1) * EPI_PITCH + r + 8] = acc[mi][i + 3];
        } else {
          *reinterpret_cast<float2*>(&epi[r * EPI_PITCH + col]) = make_float2(acc[mi][i], acc[mi][i + 1]);
          *reinterpret_cast<float2*>(&epi[(r + 8) * EPI_PITCH + col]) = make_float2(acc[mi][i + 2], acc[mi][i + 3]);
        }
      }
      asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
      // Vector v of the columns: VEC consecutive rows of one column where the output runs along m, else VEC
      // consecutive columns of one row; false past the output's edge.
      auto vector_at = [&](int v, int& gm, int& gn, const float*& src) {
        if constexpr (T::C_ALONG_M) {
          const int col = v / (64 / VEC), rv = (v % (64 / VEC)) * VEC;
          gm = row0 + rv, gn = tile.n0 + nc * EPI_COLS + col;
          src = &epi[col * EPI_PITCH + rv];
        } else {
          const int r = v / (EPI_COLS / VEC), cv = (v % (EPI_COLS / VEC)) * VEC;
          gm = row0 + r, gn = tile.n0 + nc * EPI_COLS + cv;
          src = &epi[r * EPI_PITCH + cv];
        }
        return gm < m_inner && gn < T::N_INNER;
      };
      // A thread's vectors v = tid + 128 u of the columns, BATCH at a time: each finished from the staging tile into
      // registers in the output's dtype, then each stored. A batch of at most 8 outputs bounds the registers its
      // loads in flight take.
      static_assert(8 % VEC == 0, "an output vector is at most 8 elements");
      constexpr int VECTORS = 64 * EPI_COLS / VEC, PER_THREAD = (VECTORS + 127) / 128;
      constexpr int BATCH = PER_THREAD < 8 / VEC ? PER_THREAD : 8 / VEC;
#pragma unroll 1  // batch by batch: unrolled, the batches' loads would be scheduled together after all
      for (int u0 = 0; u0 < PER_THREAD; u0 += BATCH) {
        alignas(16) typename T::Out_t vals[BATCH][VEC];
#pragma unroll
        for (int i = 0; i < BATCH; ++i) {
          const int u = u0 + i, v = tid + u * 128;
          int gm, gn;
          const float* src;
          if (u < PER_THREAD && v < VECTORS && vector_at(v, gm, gn, src))
            T::finish_vector(out_at<T>(C, ep, c_tile, gm, gn), src, vals[i], gm, gn, blk, m_inner, C, ep, alpha, beta);
        }
#pragma unroll
        for (int i = 0; i < BATCH; ++i) {
          const int u = u0 + i, v = tid + u * 128;
          int gm, gn;
          const float* src;
          if (u < PER_THREAD && v < VECTORS && vector_at(v, gm, gn, src))
            T::store_vector(out_at<T>(C, ep, c_tile, gm, gn), vals[i], gm, gn, m_inner);
        }
      }
      asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");  // staging free for the next columns
    }
  }
}

// Two adjacent outputs of one row (beta == 0): the epilogue in f32, then rounded and packed (low half first).
template <class T>
__device__ __forceinline__ uint32_t out_pair(float x0, float x1, float alpha) {
  const float t0 = T::pointwise(alpha * x0), t1 = T::pointwise(alpha * x1);
  if constexpr (std::is_same_v<typename T::Out_t, __nv_bfloat16>) {
    const auto pair = __floats2bfloat162_rn(t0, t1);
    return *reinterpret_cast<const uint32_t*>(&pair);
  } else {
    const auto pair = __floats2half2_rn(t0, t1);
    return *reinterpret_cast<const uint32_t*>(&pair);
  }
}

// The packed store (beta == 0: C is not read): the epilogue on the accumulators in registers; stmatrix writes
// 16-bit pairs into the warpgroup's staging tile, PACK_COLS columns at a time ([col][row] where the output is
// m-contiguous, else [row][col]), lines padded to PACK_PITCH elements, and the warpgroup copies them out in
// C_VEC-element vectors along the output's contiguous role.
template <class T>
__device__ __forceinline__ void packed_store(float (&acc)[Config<T>::MI][Config<T>::NACC], float* epi,
                                             const TileOf<T>& tile, long long c_tile_of_tile, int m_inner, int wg,
                                             int warp, int tid, int lane, typename T::C_param* C,
                                             const typename T::Epilogue& ep, float alpha) {
  using Out_t = typename T::Out_t;
  using Raw = raw_t<T::C_VEC * int(sizeof(Out_t))>;
  constexpr int PACK_COLS = T::PACK_COLS, PACK_PITCH = T::PACK_PITCH, VEC = T::C_VEC;
  constexpr bool M = T::C_ALONG_M;
  constexpr int PER_LINE = (M ? 64 : PACK_COLS) / VEC;  // vectors a line of the staging tile
  Out_t* const tile16 = reinterpret_cast<Out_t*>(epi);
  // stmatrix.x4: lane l gives the address of line l % 8 of matrix l / 8; the matrices are rows 0-7 and 8-15 of
  // this warp's 16 rows by columns 0-7, then the same rows by columns 8-15 (one register each, as wgmma left them).
  const int line = lane % 8, half = (lane / 8) % 2, c8 = lane / 16;
#pragma unroll
  for (int mi = 0; mi < Config<T>::MI; ++mi) {
    int row0;
    TileOf<T> blk = tile;
    long long c_tile = c_tile_of_tile;
    if (!block_rows<T>(tile, wg, mi, row0, blk, c_tile)) continue;
#pragma unroll
    for (int nc = 0; nc < T::BN / PACK_COLS; ++nc) {
#pragma unroll
      for (int j = 0; j < PACK_COLS / 16; ++j) {
        const int i = (nc * (PACK_COLS / 8) + 2 * j) * 4;  // a constant once unrolled: acc stays in registers
        uint32_t at;
        if constexpr (M) {  // stored transposed: a line is a column
          const int col = 16 * j + 8 * c8 + line, row = warp * 16 + 8 * half;
          at = smem_u32(tile16 + col * PACK_PITCH + row);
        } else {
          const int row = warp * 16 + 8 * half + line, col = 16 * j + 8 * c8;
          at = smem_u32(tile16 + row * PACK_PITCH + col);
        }
        stmatrix_x4<M>(at, out_pair<T>(acc[mi][i], acc[mi][i + 1], alpha),
                       out_pair<T>(acc[mi][i + 2], acc[mi][i + 3], alpha),
                       out_pair<T>(acc[mi][i + 4], acc[mi][i + 5], alpha),
                       out_pair<T>(acc[mi][i + 6], acc[mi][i + 7], alpha));
      }
      asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
      // Copy out: every vector of the tile loaded first (they are independent), then stored where it lies.
      constexpr int VECS = 64 * PACK_COLS / VEC / 128;  // a thread's
      Raw vals[VECS];
#pragma unroll
      for (int u = 0; u < VECS; ++u) {
        const int v = tid + u * 128;
        vals[u] = *reinterpret_cast<const Raw*>(tile16 + (v / PER_LINE) * PACK_PITCH + (v % PER_LINE) * VEC);
      }
#pragma unroll
      for (int u = 0; u < VECS; ++u) {
        const int v = tid + u * 128;
        const int gm = M ? row0 + (v % PER_LINE) * VEC : row0 + v / PER_LINE;
        const int gn = M ? tile.n0 + nc * PACK_COLS + v / PER_LINE : tile.n0 + nc * PACK_COLS + (v % PER_LINE) * VEC;
        if (gm >= m_inner || gn >= T::N_INNER) continue;
        Out_t* const p = out_at<T>(C, ep, c_tile, gm, gn);
        if ((M ? gm : gn) + VEC <= (M ? m_inner : T::N_INNER)) {
          // __stwb (st.global.wb, a plain store): written as a dereference, nvcc splits this store into 4-byte
          // stores where the output is m-contiguous.
          __stwb(reinterpret_cast<Raw*>(p), vals[u]);
        } else {  // the end of the contiguous segment: element by element, from the staging tile
          const Out_t* const e = tile16 + (v / PER_LINE) * PACK_PITCH + (v % PER_LINE) * VEC;
#pragma unroll
          for (int x = 0; x < VEC; ++x)
            if ((M ? gm : gn) + x < (M ? m_inner : T::N_INNER)) p[x] = e[x];
        }
      }
      asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");  // staging free for the next columns
    }
  }
}

// The epilogue of a whole tile from the accumulators (the persistent and multicast kernels): packed where the plan
// allows it and beta == 0, else staged.
template <class T>
__device__ __forceinline__ void store_tile(float (&acc)[Config<T>::MI][Config<T>::NACC], float* epi,
                                           const TileOf<T>& tile, int m_inner, int wg, int warp, int tid, int lane,
                                           typename T::C_param* C, const typename T::Epilogue& ep, float alpha,
                                           float beta) {
  // Accumulator layout of m64nN: warp w holds rows 16w + g and 16w + g + 8 (g = lane / 4), columns 8j + 2q and
  // 8j + 2q + 1 (q = lane % 4) as d[4j .. 4j + 3].
  const long long c_tile = T::FLAT_ROWS ? 0 : c_tile_offset<T>(tile);
  const int g = lane / 4, q = lane % 4;
  if constexpr (T::PACKED) {
    if (beta == 0.0f) {
      packed_store<T>(acc, epi, tile, c_tile, m_inner, wg, warp, tid, lane, C, ep, alpha);
    } else {
      staged_store<T>(acc, epi, tile, c_tile, m_inner, wg, warp, tid, g, q, C, ep, alpha, beta);
    }
  } else {
    staged_store<T>(acc, epi, tile, c_tile, m_inner, wg, warp, tid, g, q, C, ep, alpha, beta);
  }
}

// ---- Host side: tensor maps (128B swizzle, zero fill out of bounds), innermost dim first.

template <class T, class Op>
bool encode(CUtensorMap* map, const void* view, cuuint64_t m_inner) {
  cuuint64_t dims[Op::RANK], strides[Op::RANK > 1 ? Op::RANK - 1 : 1];
  cuuint32_t box[Op::RANK], unit[Op::RANK];
  for (int d = 0; d < Op::RANK; ++d) {
    dims[d] = Op::DIMS[d].size != 0 ? Op::DIMS[d].size : m_inner;
    box[d] = Op::DIMS[d].box != 0 ? Op::DIMS[d].box : cuuint32_t(a_box_rows<T>(int(m_inner)));
    unit[d] = 1;
    if (d > 0) strides[d - 1] = Op::DIMS[d].stride;
  }
  const EncodeTiledFn fn = encode_tiled();
  return fn(map, T::TMA_DTYPE, Op::RANK, const_cast<void*>(view), dims, Op::RANK > 1 ? strides : nullptr, box, unit,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, T::L2_PROMOTION,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// Tensor maps depend only on the A and B pointers (and M_INNER where the rows are a run-time size): the last few
// sets keep theirs, per instantiation.
template <class T>
cudaError_t tensor_maps(const typename T::A_t* A, const typename T::B_t* B, int m_inner, CUtensorMap* map_a,
                        CUtensorMap* map_b) {
  struct Entry {
    const void* a = nullptr;
    const void* b = nullptr;
    int m_inner = 0;
    CUtensorMap map_a, map_b;
  };
  constexpr int kSlots = 8;
  static std::mutex lock;
  static Entry cache[kSlots];
  static int next_slot = 0;
  std::lock_guard<std::mutex> guard(lock);
  for (const Entry& e : cache) {
    if (e.a == A && e.b == B && e.m_inner == m_inner) {
      *map_a = e.map_a;
      *map_b = e.map_b;
      return cudaSuccess;
    }
  }
  if (const cudaError_t err = ready_to_encode(); err != cudaSuccess) return err;
  Entry& e = cache[next_slot];
  if (!encode<T, typename T::A_map>(&e.map_a, A, cuuint64_t(m_inner)) ||
      !encode<T, typename T::B_map>(&e.map_b, B, cuuint64_t(m_inner))) {
    e.a = e.b = nullptr;
    return cudaErrorInvalidValue;
  }
  e.a = A;
  e.b = B;
  e.m_inner = m_inner;
  next_slot = (next_slot + 1) % kSlots;
  *map_a = e.map_a;
  *map_b = e.map_b;
  return cudaSuccess;
}

// The rows of a launch: m units of M_UNIT rows where they are a run-time size, else the fixed M_INNER.
template <class T>
int rows_of(int64_t m) {
  if constexpr (T::rows_at_run_time) return int(m) * T::M_UNIT;
  return T::M_INNER;
}

// The tiles of a launch with `m_inner` rows.
template <class T>
int tiles_of(int m_inner) {
  if constexpr (T::rows_at_run_time) return T::TILE_GROUPS * ((m_inner + T::BM - 1) / T::BM) * T::TILES_N;
  return T::TILES;
}

}  // namespace hopper
}  // namespace dg
