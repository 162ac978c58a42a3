// dg/fp8_hopper.cuh — the `fp8_hopper` family's persistent kernel (sm_90a): the hopper family's producer, tile walk
// and store phase (dg/hopper_common.cuh) with e4m3 wgmma (m64nNk32, both operands K-major in shared memory) and the
// f32 scales of A and B.
//
// Promotion: each k-iteration (BK = 128 k, one 128-byte swizzle row) runs on the tensor core into accumulators of
// its own, which then go into the f32 accumulators on the CUDA cores, times that k-iteration's scales of A's rows
// and B's columns. The tensor core's FP8 accumulation keeps fewer mantissa bits than f32, so a sum over all of K on
// it loses accuracy as K grows; one k-iteration's 128 products stay well inside what it keeps. A scale constant
// along k multiplies the accumulators once, after the last k-iteration.
//
// Two kernels: the persistent one (a block walks tiles, each over all of K) and the K split (the SPLITS blocks of a
// cluster share one tile, each promoting a slice of its k-iterations, then summing the parked partial tiles over
// the cluster as dg/hopper_split.cuh does): for few tiles, as at decode shapes.
//
// T is the hopper family's traits type (dg/hopper_common.cuh) with e4m3 A_t and B_t, BK = 128, no A
// multicast, no tile or k loops, and the two scale views (their pointers already at the views' first elements):
//   A_scales, B_scales   MN_BLOCK (rows of A / columns of B one scale covers; 0: one scale for all of them),
//                        MN_STRIDE, MN_LAST (the last row / column), K_ITERS_PER (k-iterations one scale covers; 0:
//                        one scale for all of k), K_STRIDE
// Debug: -DDG_FP8_NO_PROMOTION sums all of K on the tensor core (only where no scale varies along k), to show what
// promotion buys.
#pragma once

#include <cuda_fp8.h>

#include "hopper_common.cuh"
#include "hopper_split.cuh"
#include "wgmma_fp8.cuh"

namespace dg {
namespace fp8_hopper {

using hopper::Config;
using hopper::TileOf;

// The scale views' base pointers, as the caller passes them (each view's OFFSET is applied here).
struct Scales {
  const float* a;
  const float* b;
};

#ifdef DG_FP8_NO_PROMOTION
constexpr bool PROMOTE = false;
#else
constexpr bool PROMOTE = true;
#endif

// What a consumer thread holds of one scale view: one value where every row (column) of the tile shares the
// scale, else one a row it owns (2 an m64 block: g and g + 8) or a column (2 an 8-column group: 2q and 2q + 1).
template <class T, bool IsA>
struct ScaleOf {
  using S = std::conditional_t<IsA, typename T::A_scales, typename T::B_scales>;
  static constexpr bool ALONG_K = S::K_ITERS_PER != 0;
  static constexpr bool UNIFORM = S::MN_BLOCK == 0 || S::MN_BLOCK % (IsA ? T::BM : T::BN) == 0;
  static constexpr int COUNT = UNIFORM ? 1 : (IsA ? 2 * Config<T>::MI : T::BN / 4);
};

// Scale S at row (column) `mn`, clamped to the view's last one (rows and columns past the edge feed accumulators
// the store phase skips), and k-iteration `kt`.
template <class S>
__device__ __forceinline__ float scale_at(const float* base, int mn, int kt) {
  static_assert((S::MN_BLOCK != 0 || S::MN_STRIDE == 0) && (S::K_ITERS_PER != 0 || S::K_STRIDE == 0),
                "a scale constant along a role has no stride along it");
  long long at = 0;
  if constexpr (S::MN_BLOCK != 0) at += static_cast<long long>(min(mn, S::MN_LAST) / S::MN_BLOCK) * S::MN_STRIDE;
  if constexpr (S::K_ITERS_PER != 0) at += static_cast<long long>(kt / S::K_ITERS_PER) * S::K_STRIDE;
  return base[at];  // a coherent load: with a dependent launch the previous grid may have just written the scales
}

// This thread's scales of A (its rows) or B (its columns) for k-iteration kt of `tile`.
template <class T, bool IsA>
__device__ __forceinline__ void load_scales(float (&v)[ScaleOf<T, IsA>::COUNT], const float* base,
                                            const TileOf<T>& tile, int kt, int wg, int warp, int lane) {
  using Of = ScaleOf<T, IsA>;
  using S = typename Of::S;
  if constexpr (Of::UNIFORM) {
    v[0] = scale_at<S>(base, IsA ? tile.m0 : tile.n0, kt);
  } else if constexpr (IsA) {
    const int row = tile.m0 + wg * T::WG_M + warp * 16 + lane / 4;
#pragma unroll
    for (int i = 0; i < Of::COUNT; ++i) v[i] = scale_at<S>(base, row + (i / 2) * 64 + (i % 2) * 8, kt);
  } else {
    const int col = tile.n0 + 2 * (lane % 4);
#pragma unroll
    for (int i = 0; i < Of::COUNT; ++i) v[i] = scale_at<S>(base, col + (i / 2) * 8 + i % 2, kt);
  }
}

// The factor of accumulator i of m64 block mi from A's scales (UseA) and B's (UseB) (accumulator layout: d[4j + e]
// is row g + 8 (e / 2), column 8j + 2q + e % 2).
template <class T, bool UseA, bool UseB>
__device__ __forceinline__ float factor(const float* fa, const float* fb, int mi, int i) {
  float f = 1.0f;
  if constexpr (UseA) f *= ScaleOf<T, true>::UNIFORM ? fa[0] : fa[mi * 2 + (i % 4) / 2];
  if constexpr (UseB) f *= ScaleOf<T, false>::UNIFORM ? fb[0] : fb[(i / 4) * 2 + i % 2];
  return f;
}

// What both kernels require of the traits (each instantiates it).
template <class T>
struct TraitsChecked {
  static_assert(T::A_PARTS == 1 && T::ACC_CHAINS == 1 && T::TILE_LOOPS == 0 && T::K_LOOPS == 0 && !T::FLAT_ROWS,
                "the FP8 kernels walk one tiled segment a role, without A multicast");
  static_assert(T::BK == 128 && sizeof(typename T::A_t) == 1 && sizeof(typename T::B_t) == 1,
                "a k-iteration is one 128-byte swizzle row of e4m3");
  static_assert(T::A_map::K_MAJOR && T::B_map::K_MAJOR, "8-bit wgmma reads both operands K-major");
  static_assert(!T::rows_at_run_time, "the FP8 kernels have fixed rows");
  static_assert(PROMOTE || (!ScaleOf<T, true>::ALONG_K && !ScaleOf<T, false>::ALONG_K),
                "without promotion the scales of a k-iteration have nowhere to go: only scales constant along k");
};

// One consumer warpgroup's sum of k-iterations [kt0, kt_end) of `tile` into the f32 accumulators acc, consuming the
// stages from (stage, phase) on: each k-iteration on the tensor core, promoted with its scales; the scales constant
// along k multiply acc once at the end (a K split's partial sums are then already scaled, and sum to the tile's).
template <class T>
__device__ __forceinline__ void promoted_slice(float (&acc)[Config<T>::MI][Config<T>::NACC], uint64_t* full,
                                               uint64_t* empty, uint32_t stages_a, uint32_t stages_b, int& stage,
                                               uint32_t& phase, const TileOf<T>& tile, int kt0, int kt_end, int wg,
                                               int warp, int lane, const Scales& scales) {
  using Cfg = Config<T>;
  using SA = ScaleOf<T, true>;
  using SB = ScaleOf<T, false>;
  // Two sets for the tensor core: k-iteration kt's wgmmas run into one while kt - 1's set is promoted from the
  // other, so that the tensor core is not idle during a promotion.
  float part[2][Cfg::MI][Cfg::NACC];
  // Each k-iteration's scales: loaded when its wgmmas are issued, used when they are promoted one k-iteration
  // later (their latency hides behind that k-iteration).
  float fa[2][SA::COUNT], fb[2][SB::COUNT];
  int issued_stage[2] = {0, 0};
  // Issue k-iteration kt into set B: its scales, the wait for its stage, its wgmmas.
  auto issue = [&](int kt, auto set) {
    constexpr int B = decltype(set)::value;
    if constexpr (SA::ALONG_K) load_scales<T, true>(fa[B], scales.a, tile, kt, wg, warp, lane);
    if constexpr (SB::ALONG_K) load_scales<T, false>(fb[B], scales.b, tile, kt, wg, warp, lane);
    mbar_wait(&full[stage], phase);
    wgmma_fence();
    const uint32_t sa = stages_a + stage * Cfg::A_STAGE_BYTES, sb = stages_b + stage * Cfg::B_STAGE_BYTES;
#pragma unroll
    for (int kk = 0; kk < T::BK / 32; ++kk) {
#pragma unroll
      for (int mi = 0; mi < Cfg::MI; ++mi)
        wgmma_m64k32_e4m3<T::BN>(part[B][mi], hopper::desc_a<T>(sa, wg * T::WG_M + mi * 64, kk),
                                 hopper::desc_b<T>(sb, kk), kk > 0 || (!PROMOTE && kt > kt0));
    }
    wgmma_commit();
    issued_stage[B] = stage;
    if (++stage == T::STAGES) {
      stage = 0;
      phase ^= 1;
    }
  };
  // Promote set B, whose wgmmas are done (Pending: how many later groups may still run): release its stage, then
  // one FFMA an accumulator (the first k-iteration sets them). Where no scale varies along k the first one adds
  // zero rather than copying: a copy lets the compiler give the set's registers to the promoted accumulators,
  // and ptxas then makes the next wgmmas into that set wait for every earlier one.
  auto promote = [&](auto set, auto pending, auto first) {
    constexpr int B = decltype(set)::value;
    wgmma_wait<decltype(pending)::value>();
    hopper::release_stage<T>(empty, issued_stage[B], lane);
#pragma unroll
    for (int mi = 0; mi < Cfg::MI; ++mi) acc_fence(part[B][mi]);
#pragma unroll
    for (int mi = 0; mi < Cfg::MI; ++mi) {
#pragma unroll
      for (int i = 0; i < Cfg::NACC; ++i) {
        const float f = factor<T, SA::ALONG_K, SB::ALONG_K>(fa[B], fb[B], mi, i);
        if constexpr (!decltype(first)::value) acc[mi][i] = fmaf(part[B][mi][i], f, acc[mi][i]);
        else if constexpr (SA::ALONG_K || SB::ALONG_K) acc[mi][i] = part[B][mi][i] * f;
        else acc[mi][i] = part[B][mi][i] + 0.0f;
      }
    }
  };
  using Zero = std::integral_constant<int, 0>;
  using One = std::integral_constant<int, 1>;
  if constexpr (!PROMOTE) {  // every k-iteration into set 0 on the tensor core
    for (int kt = kt0; kt < kt_end; ++kt) {
      issue(kt, Zero{});
      wgmma_wait<0>();
      hopper::release_stage<T>(empty, issued_stage[0], lane);
    }
  } else if (issue(kt0, Zero{}), kt_end - kt0 > 1) {
    issue(kt0 + 1, One{});
    promote(Zero{}, One{}, std::true_type{});
    int kt = kt0 + 2;
    for (; kt + 1 < kt_end; kt += 2) {  // sets alternate: kt0, kt0 + 2, ... in set 0, the others in set 1
      issue(kt, Zero{});
      promote(One{}, One{}, std::false_type{});
      issue(kt + 1, One{});
      promote(Zero{}, One{}, std::false_type{});
    }
    if (kt < kt_end) {  // an odd count: the last k-iteration, in set 0
      issue(kt, Zero{});
      promote(One{}, One{}, std::false_type{});
      promote(Zero{}, Zero{}, std::false_type{});
    } else {
      promote(One{}, Zero{}, std::false_type{});
    }
  } else {
    promote(Zero{}, Zero{}, std::true_type{});
  }
  if constexpr (!PROMOTE) {
#pragma unroll
    for (int mi = 0; mi < Cfg::MI; ++mi)
#pragma unroll
      for (int i = 0; i < Cfg::NACC; ++i) acc[mi][i] = part[0][mi][i];
  }
  // The scales constant along k, once a tile.
  if constexpr (!SA::ALONG_K || !SB::ALONG_K) {
    float fa[SA::COUNT], fb[SB::COUNT];
    if constexpr (!SA::ALONG_K) load_scales<T, true>(fa, scales.a, tile, 0, wg, warp, lane);
    if constexpr (!SB::ALONG_K) load_scales<T, false>(fb, scales.b, tile, 0, wg, warp, lane);
#pragma unroll
    for (int mi = 0; mi < Cfg::MI; ++mi)
#pragma unroll
      for (int i = 0; i < Cfg::NACC; ++i)
        acc[mi][i] *= factor<T, !SA::ALONG_K, !SB::ALONG_K>(fa, fb, mi, i);
  }
}

template <class T>
__global__ void __launch_bounds__(Config<T>::THREADS, T::CTAS_PER_SM)
    persistent_kernel(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                      typename T::C_param* __restrict__ C, const typename T::Epilogue ep, const Scales scales,
                      float alpha, float beta) {
  using Cfg = Config<T>;
  static_assert(sizeof(TraitsChecked<T>) > 0 && T::SPLITS == 1, "the persistent kernel: one block a tile");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* const smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + Cfg::BAR_OFFSET);
  uint64_t* const empty = full + T::STAGES;
  const uint32_t stages_a = smem_u32(smem + Cfg::A_OFFSET), stages_b = smem_u32(smem + Cfg::B_OFFSET);

  if (threadIdx.x == 0) {
    prefetch_tensormap(&tmap_a);
    prefetch_tensormap(&tmap_b);
    // B's boxes of this block's first stages into L2 before the wait for the previous grid (dg/hopper_persistent.cuh).
    hopper::prefetch_first_stages<T>(&tmap_a, &tmap_b, T::TILES, T::TILES_M, 0);
    for (int s = 0; s < T::STAGES; ++s) {
      mbar_init(&full[s], 1);                  // the producer's arrive.expect_tx
      mbar_init(&empty[s], T::CONSUMERS * 4);  // one arrive per consumer warp
    }
    mbar_init_fence();
  }
  __syncthreads();
  // Barriers are set up: from here on this block touches memory that the prior grid in the stream may use.
  wait_for_predecessor();

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    // Producer: few registers; one thread issues every load.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(T::PRODUCER_REGS));
    if (threadIdx.x == 0) {
      int stage = 0;
      uint32_t phase = 0;
      for (int t = blockIdx.x; t < T::TILES; t += gridDim.x) {
        const TileOf<T> tile = hopper::tile_at<T>(t, T::TILES_M);
        for (int kt = 0; kt < T::K_ITERS; ++kt) {
          hopper::issue_stage<T, false>(smem, full, empty, &tmap_a, &tmap_b, stage, phase, kt, tile, nullptr, 0,
                                        unsigned(Cfg::STAGE_TX_BYTES));
          if (++stage == T::STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
      // Every load of this block is issued: the next grid may be scheduled.
      launch_dependents();
    }
  } else {
    // Consumers: two accumulator sets (the tensor core's and the promoted f32 one) need the producer's registers.
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(T::CONSUMER_REGS));
    const int wg = warpgroup - 1, tid = threadIdx.x % 128, lane = tid % 32, warp = tid / 32;
    float* const epi = reinterpret_cast<float*>(smem + Cfg::EPI_OFFSET) + wg * T::EPI_FLOATS;
    float acc[Cfg::MI][Cfg::NACC];
    int stage = 0;
    uint32_t phase = 0;
    for (int t = blockIdx.x; t < T::TILES; t += gridDim.x) {
      const TileOf<T> tile = hopper::tile_at<T>(t, T::TILES_M);
      promoted_slice<T>(acc, full, empty, stages_a, stages_b, stage, phase, tile, 0, T::K_ITERS, wg, warp, lane,
                        scales);
      hopper::store_tile<T>(acc, epi, tile, T::M_INNER, wg, warp, tid, lane, C, ep, alpha, beta);
    }
  }
}

// A dependent launch where the grid takes every block slot, or all but a sixteenth of them over one tile row (as
// the hopper family's persistent kernel).
template <class T>
cudaError_t launch(const typename T::A_t* A, const typename T::B_t* B, typename T::C_param* C,
                   typename T::Epilogue ep, Scales scales, float alpha, float beta, cudaStream_t stream) {
  auto* kernel = persistent_kernel<T>;
  if constexpr (T::SMEM_BYTES > 48 * 1024) {
    static std::atomic<unsigned long long> attributes_set{0};  // bit d: set on device d
    const cudaError_t err = set_kernel_attributes(attributes_set, kernel, T::SMEM_BYTES, false);
    if (err != cudaSuccess) return err;
  }
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  CUtensorMap map_a, map_b;
  err = hopper::tensor_maps<T>(A, B, T::M_INNER, &map_a, &map_b);
  if (err != cudaSuccess) return err;
  const int resident = T::CTAS_PER_SM * sm_count(device);
  const int grid = T::TILES < resident ? T::TILES : resident;  // persistent: CTAS_PER_SM blocks an SM
  const bool dependent = grid == resident || (T::TILES == T::TILES_N && 16 * (resident - grid) <= resident);
  const LaunchShape shape{unsigned(grid), unsigned(Config<T>::THREADS), unsigned(T::SMEM_BYTES), dependent, 1};
  return dg::launch(kernel, shape, stream, map_a, map_b, C, ep, scales, alpha, beta);
}

// The K split: block rank r of a cluster promotes k-iterations [r * KT_PER_SPLIT, (r + 1) * KT_PER_SPLIT) of the
// cluster's tile; dg/hopper_split.cuh's body parks the partial tiles and sums them over the cluster in rank order.
template <class T>
__global__ void __launch_bounds__(Config<T>::THREADS, T::CTAS_PER_SM)
    split_kernel(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                 typename T::C_param* __restrict__ C, const typename T::Epilogue ep, const Scales scales,
                 float alpha, float beta) {
  using Cfg = Config<T>;
  static_assert(sizeof(TraitsChecked<T>) > 0 && T::SPLITS > 1, "the K split: a cluster of SPLITS blocks a tile");
  hopper::split_body<T>(tmap_a, tmap_b, C, T::M_INNER, ep, alpha, beta,
                        [&scales](float (&acc)[Cfg::MI][Cfg::NACC], uint64_t* full, uint64_t* empty,
                                  uint32_t stages_a, uint32_t stages_b, int& stage, uint32_t& phase,
                                  const TileOf<T>& tile, int kt0, int kt_end, int wg, int warp, int lane) {
                          promoted_slice<T>(acc, full, empty, stages_a, stages_b, stage, phase, tile, kt0, kt_end, wg,
                                            warp, lane, scales);
                        });
}

// One cluster of SPLITS blocks a tile, as a dependent launch.
template <class T>
cudaError_t launch_split(const typename T::A_t* A, const typename T::B_t* B, typename T::C_param* C,
                         typename T::Epilogue ep, Scales scales, float alpha, float beta, cudaStream_t stream) {
  auto* kernel = split_kernel<T>;
  if constexpr (T::SMEM_BYTES > 48 * 1024 || T::SPLITS > 8) {
    static std::atomic<unsigned long long> attributes_set{0};  // bit d: set on device d
    const cudaError_t err = set_kernel_attributes(attributes_set, kernel, T::SMEM_BYTES, T::SPLITS > 8);
    if (err != cudaSuccess) return err;
  }
  CUtensorMap map_a, map_b;
  const cudaError_t err = hopper::tensor_maps<T>(A, B, T::M_INNER, &map_a, &map_b);
  if (err != cudaSuccess) return err;
  const LaunchShape shape{unsigned(T::TILES * T::SPLITS), unsigned(Config<T>::THREADS), unsigned(T::SMEM_BYTES), true,
                          unsigned(T::SPLITS)};
  return dg::launch(kernel, shape, stream, map_a, map_b, C, ep, scales, alpha, beta);
}

}  // namespace fp8_hopper
}  // namespace dg
