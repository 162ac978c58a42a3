// dg/hopper_persistent.cuh — the `hopper` family's persistent kernel: a grid of CTAS_PER_SM blocks an SM walks the
// BM x BN tiles of C (dg/hopper_common.cuh: tile_at); a block's producer warpgroup streams each tile's k-iterations
// through the stages while its consumer warpgroups run the wgmmas and store the tile.
#pragma once

#include "hopper_common.cuh"

namespace dg {
namespace hopper {

template <class T>
__global__ void __launch_bounds__(Config<T>::THREADS, T::CTAS_PER_SM)
    persistent_kernel(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                      typename T::C_param* __restrict__ C, const int m_inner_arg, const typename T::Epilogue ep,
                      float alpha, float beta) {
  using Cfg = Config<T>;
  static_assert(T::SPLITS == 1 && T::A_PARTS == 1, "the K split and A multicast have kernels of their own");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* const smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + Cfg::BAR_OFFSET);
  uint64_t* const empty = full + T::STAGES;
  const uint32_t stages_a = smem_u32(smem + Cfg::A_OFFSET), stages_b = smem_u32(smem + Cfg::B_OFFSET);
  // With rows at run time, M_INNER is the kernel's argument and the tile counts follow it.
  const int M_INNER = T::rows_at_run_time ? m_inner_arg : T::M_INNER;
  const int TILES_M = T::rows_at_run_time ? (M_INNER + T::BM - 1) / T::BM : T::TILES_M;
  const int TILES = T::rows_at_run_time ? T::TILE_GROUPS * TILES_M * T::TILES_N : T::TILES;

  if (threadIdx.x == 0) {
    prefetch_tensormap(&tmap_a);
    prefetch_tensormap(&tmap_b);
    // B's boxes of this block's first stages into L2 before the wait for the previous grid: this block gets its SM
    // when the previous grid's block there leaves, before that grid completes. With several tiles a block it
    // measured slower; it pays in full where the previous grid's weight loads are evict_first.
    prefetch_first_stages<T>(&tmap_a, &tmap_b, TILES, TILES_M, 0);
    for (int s = 0; s < T::STAGES; ++s) {
      mbar_init(&full[s], 1);                // the producer's arrive.expect_tx
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
      const unsigned tx_bytes = T::rows_at_run_time && T::A_ROWS_FOLLOW_M
                                    ? unsigned(a_box_rows<T>(M_INNER) * T::BK * int(sizeof(typename T::A_t)) +
                                               Cfg::B_STAGE_BYTES)
                                    : unsigned(Cfg::STAGE_TX_BYTES);
      int stage = 0;
      uint32_t phase = 0;
      for (int t = blockIdx.x; t < TILES; t += gridDim.x) {
        const TileOf<T> tile = tile_at<T>(t, TILES_M);
        TileOf<T> blocks[T::FLAT_ROWS ? T::BM / 64 : 1];  // A's 64-row blocks, each at its own row and m-loop indices
        if constexpr (T::FLAT_ROWS) {
#pragma unroll
          for (int j = 0; j < T::BM / 64; ++j) blocks[j] = granule_at<T>(tile.m0 + j * 64, tile);
        }
        for (int kt = 0; kt < T::K_ITERS; ++kt) {
          issue_stage<T, false>(smem, full, empty, &tmap_a, &tmap_b, stage, phase, kt, tile, blocks, 0, tx_bytes);
          if (++stage == T::STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
      // Every load of this block is issued: the next grid may be scheduled (its blocks start as this grid's leave
      // the SMs, and wait for it to complete before they touch memory).
      launch_dependents();
    }
  } else {
    // Consumers: the accumulators need the registers the producer gave up.
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(T::CONSUMER_REGS));
    const int wg = warpgroup - 1, tid = threadIdx.x % 128, lane = tid % 32, warp = tid / 32;
    float* const epi = reinterpret_cast<float*>(smem + Cfg::EPI_OFFSET) + wg * T::EPI_FLOATS;
    float acc[Cfg::MI][Cfg::NACC];
    float acc_odd[Cfg::ODD_MI][Cfg::NACC];
    int stage = 0;
    uint32_t phase = 0;
    for (int t = blockIdx.x; t < TILES; t += gridDim.x) {
      const TileOf<T> tile = tile_at<T>(t, TILES_M);
      mma_tile<T>(acc, acc_odd, full, empty, stages_a, stages_b, stage, phase, 0, T::K_ITERS, wg, lane);
      store_tile<T>(acc, epi, tile, M_INNER, wg, warp, tid, lane, C, ep, alpha, beta);
    }
  }
}

// A dependent launch where the grid takes every block slot, or all but a sixteenth of them over one tile row:
// measured faster there, and slower on grids that leave more SMs idle or span two tile rows.
template <class T>
cudaError_t launch_persistent(const typename T::A_t* A, const typename T::B_t* B, typename T::C_param* C, int64_t m,
                   typename T::Epilogue ep, float alpha, float beta, cudaStream_t stream) {
  auto* kernel = persistent_kernel<T>;
  if constexpr (T::SMEM_BYTES > 48 * 1024) {
    static std::atomic<unsigned long long> attributes_set{0};  // bit d: set on device d
    const cudaError_t err = set_kernel_attributes(attributes_set, kernel, T::SMEM_BYTES, false);
    if (err != cudaSuccess) return err;
  }
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  const int m_inner = rows_of<T>(m);
  CUtensorMap map_a, map_b;
  err = tensor_maps<T>(A, B, m_inner, &map_a, &map_b);
  if (err != cudaSuccess) return err;
  const int tiles = tiles_of<T>(m_inner);
  const int resident = T::CTAS_PER_SM * sm_count(device);
  const int grid = tiles < resident ? tiles : resident;  // persistent: CTAS_PER_SM blocks an SM
  const bool dependent = grid == resident || (tiles == T::TILES_N && 16 * (resident - grid) <= resident);
  const LaunchShape shape{unsigned(grid), unsigned(Config<T>::THREADS), unsigned(T::SMEM_BYTES), dependent, 1};
  return dg::launch(kernel, shape, stream, map_a, map_b, C, m_inner, ep, alpha, beta);
}

}  // namespace hopper
}  // namespace dg
